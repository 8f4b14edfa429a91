//! How an instance setting is judged: the value PostgreSQL would use (the configuration's,
//! else its default for the version, [`pg_default`]) against the recommendation, within a
//! tolerance that depends on the kind of setting; and the `postgresql.conf` line the fix
//! and the snippet carry.

use super::super::units::{format_size, parse_size};
use super::ctx::AIO_SINCE_PG;
use super::{Ctx, Verdict};
use crate::advise::Status;

/// A size setting within this factor of the recommendation (either way) is OK.
pub const SIZE_TOLERANCE: f64 = 1.5;

/// A concurrency setting within this factor is OK: the guesses are order-of-magnitude, and
/// doubling or halving in-flight I/Os changes little near the device's saturation.
pub const CONCURRENCY_TOLERANCE: f64 = 2.0;

/// A planner cost within this factor is OK (1.1 vs 1.0 or 1.3 picks the same plans).
pub const COST_TOLERANCE: f64 = 1.25;

/// `checkpoint_completion_target` within this factor of 0.9 (0.8 and up) is OK: the last
/// tenth of the interval changes little.
pub const CHECKPOINT_TARGET_TOLERANCE: f64 = 1.125;

/// Counts (workers) must match exactly.
pub const EXACT: f64 = 1.0;

/// Floating-point slack on a tolerance's bounds, so a value exactly at the bound (0.8 for
/// 0.9 within 1.125) is not refused for a rounding error.
const RATIO_SLACK: f64 = 1e-9;

/// PostgreSQL's default for a setting the configuration does not set (postgresql.conf's
/// commented defaults for the version).
pub fn pg_default(name: &str, pg: u32) -> &'static str {
    match name {
        "shared_buffers" => "128MB",
        "huge_pages" => "try",
        "effective_cache_size" => "4GB",
        "work_mem" => "4MB",
        "maintenance_work_mem" => "64MB",
        "wal_buffers" => "-1",
        "min_wal_size" => "80MB",
        "max_wal_size" => "1GB",
        "checkpoint_completion_target" => "0.9",
        "random_page_cost" => "4",
        // PostgreSQL 18 raised both (release notes: "Increase the default value of
        // effective_io_concurrency and maintenance_io_concurrency to 16").
        "effective_io_concurrency" if pg >= AIO_SINCE_PG => "16",
        "effective_io_concurrency" => "1",
        "maintenance_io_concurrency" if pg >= AIO_SINCE_PG => "16",
        "maintenance_io_concurrency" => "10",
        "io_combine_limit" => "128kB",
        "io_method" => "worker",
        "io_workers" => "3",
        "io_min_workers" => "1",
        "io_max_workers" => "8",
        "max_worker_processes" => "8",
        "max_parallel_workers" => "8",
        "max_parallel_workers_per_gather" => "2",
        "max_parallel_maintenance_workers" => "2",
        "track_io_timing" => "off",
        _ => "",
    }
}

/// A size setting: OK within [`SIZE_TOLERANCE`].
pub(super) fn size_setting(
    ctx: &Ctx,
    name: &str,
    base: u64,
    rec_bytes: u64,
    reason: String,
) -> Verdict {
    let (found, source) = ctx.current(name);
    let found_bytes = parse_size(&found, base);
    let ok = found_bytes.is_some_and(|f| {
        let ratio = f as f64 / rec_bytes.max(1) as f64;
        (1.0 / SIZE_TOLERANCE..=SIZE_TOLERANCE).contains(&ratio)
    });
    setting_verdict(name, ok, found, source, format_size(rec_bytes), reason)
}

/// A number setting: OK when equal, or within `tolerance` (a factor) of it.
pub(super) fn number_setting(
    ctx: &Ctx,
    name: &str,
    rec: f64,
    tolerance: f64,
    shown: String,
    reason: String,
) -> Verdict {
    let (found, source) = ctx.current(name);
    let ok = found.trim_matches('\'').parse::<f64>().is_ok_and(|f| {
        if rec == 0.0 || f == 0.0 {
            f == rec
        } else {
            let ratio = f / rec;
            (1.0 / tolerance - RATIO_SLACK..=tolerance + RATIO_SLACK).contains(&ratio)
        }
    });
    setting_verdict(name, ok, found, source, shown, reason)
}

/// A word setting (`on`, `worker`).
pub(super) fn word_setting(ctx: &Ctx, name: &str, rec: &str, reason: String) -> Verdict {
    let (found, source) = ctx.current(name);
    let norm = |s: &str| s.trim_matches('\'').to_ascii_lowercase();
    let ok = norm(&found) == norm(rec)
        || (matches!(norm(rec).as_str(), "on" | "off")
            && crate::config::parse_bool(name, &norm(&found)).ok()
                == crate::config::parse_bool(name, rec).ok());
    setting_verdict(name, ok, found, source, rec.to_string(), reason)
}

fn setting_verdict(
    name: &str,
    ok: bool,
    found: String,
    source: String,
    rec: String,
    reason: String,
) -> Verdict {
    let status = if ok { Status::Ok } else { Status::Warn };
    let conf_value = if rec.parse::<f64>().is_ok() {
        rec.clone()
    } else {
        format!("'{rec}'")
    };
    let mut v = Verdict::new(status, found, source)
        .rec(rec.clone())
        .why(reason)
        .fix(format!(
            "{name} = {conf_value}   (postgresql.conf, then restart or reload)"
        ));
    v.conf = Some((name.to_string(), conf_value));
    v
}
