//! The PostgreSQL I/O settings: `random_page_cost`, `effective_io_concurrency`,
//! `maintenance_io_concurrency`, `io_combine_limit`, `io_method` and the I/O workers
//! (`io_workers` in PostgreSQL 18, the pool's `io_min_workers` / `io_max_workers` in 19).
//!
//! Each is measured when the disk was (the measurement's recommendation, with its reason),
//! else guessed from the data directory's storage class (`host::disk_class`: NVMe, SSD, a
//! spinning disk, or a virtual or unknown device that never gets less than PostgreSQL 18's
//! defaults). `random_page_cost` looks first at the data against the cache: data that fits
//! is read from memory, where a random page costs what a sequential one does.

use super::super::units::{human_bytes, BLOCK, KB};
use super::ctx::AIO_SINCE_PG;
use super::settings::{
    number_setting, size_setting, word_setting, CONCURRENCY_TOLERANCE, COST_TOLERANCE, EXACT,
};
use super::{Ctx, Verdict};
use crate::advise::{Status, UserInput};
use crate::config::IoMethodKind;
use crate::host::DiskClass;

/// `effective_io_concurrency` guessed for a spinning disk: PostgreSQL docs 19.4.6 ("for
/// magnetic drives, the number of separate drives"); pgtune's HDD value.
pub const ROTATIONAL_IO_CONCURRENCY: u32 = 2;

/// `effective_io_concurrency` guessed for SSD and NVMe: PostgreSQL docs 19.4.6 (SSDs "can
/// often process many concurrent requests, so the best value might be in the hundreds");
/// pgtune's SSD value.
pub const SSD_IO_CONCURRENCY: u32 = 200;

/// `random_page_cost` guessed for a spinning disk: PostgreSQL's default (docs 19.7.2).
pub const ROTATIONAL_RANDOM_PAGE_COST: f64 = 4.0;

/// `random_page_cost` guessed for SSD and NVMe (pgtune; PostgreSQL docs 19.7.2: lower it
/// when random reads cost little more than sequential ones).
pub const SSD_RANDOM_PAGE_COST: f64 = 1.1;

/// `effective_io_concurrency` and `maintenance_io_concurrency` for a device whose speed is
/// not known (a virtual disk, a network file system) and was not measured: PostgreSQL 18's
/// default (release notes: "Increase the default value of effective_io_concurrency and
/// maintenance_io_concurrency to 16"). Advice below it would be worse than no advice.
pub const MIN_UNMEASURED_IO_CONCURRENCY: u32 = 16;

/// `random_page_cost` when the data fits in the cache: pgtune's SSD value, as a page read
/// from memory costs the same wherever it lies.
pub const CACHED_RANDOM_PAGE_COST: f64 = 1.1;

/// The data counts as fully cached when it is at most this share of the effective cache
/// (`effective_cache_size`): the rest leaves room for its growth, the indexes' working set,
/// sorts and everything else the machine runs.
pub const FULLY_CACHED_SHARE: f64 = 0.5;

/// Guessed `io_workers`: one per this many effective CPUs (pageio's guess, a quarter).
pub const CPUS_PER_IO_WORKER: u32 = 4;

/// PostgreSQL 18's default `io_workers` (docs io_workers): the guess never goes below it.
pub const DEFAULT_IO_WORKERS: u32 = 3;

/// The most I/O workers PostgreSQL allows (`MAX_IO_WORKERS` in PostgreSQL 18's proc.h).
pub const MAX_IO_WORKERS: u32 = 32;

/// PostgreSQL 19's pool keeps one worker ready per this many CPUs (`io_min_workers`).
pub const CPUS_PER_READY_IO_WORKER: u32 = 8;

/// PostgreSQL 19's pool may grow to one worker per this many CPUs (`io_max_workers`): half.
pub const CPUS_PER_POOL_IO_WORKER: u32 = 2;

/// The first PostgreSQL version with the adaptive I/O worker pool (`io_min_workers`,
/// `io_max_workers`) instead of a fixed `io_workers` (PostgreSQL 19 docs).
pub const IO_WORKER_POOL_SINCE_PG: u32 = 19;

/// `io_combine_limit` recommended: 128 kB, the most `io_max_combine_limit` allows by
/// default (PostgreSQL 18 docs io_combine_limit).
pub const IO_COMBINE_LIMIT_BYTES: u64 = 128 * KB;

impl Ctx<'_> {
    /// The recommended io_method, with the reason.
    pub fn io_method(&self) -> (String, String) {
        let causes = self.uring_causes();
        if let Some(m) = self.measured() {
            let r = &m.recommendations.io_method;
            if r.value == IoMethodKind::IoUring && !causes.is_empty() {
                let other = &m.for_postgresql(false).io_method;
                return (
                    other.value.to_string(),
                    format!(
                        "measured: io_uring was the best, but PostgreSQL cannot use it here ({}); without it: {}",
                        causes.join("; "),
                        other.reason
                    ),
                );
            }
            return (r.value.to_string(), format!("measured: {}", r.reason));
        }
        if causes.is_empty() {
            (
                "worker".into(),
                format!(
                    "guessed: worker is PostgreSQL's default and needs nothing from the kernel; io_uring is usable here — run with {} to see whether it is faster on this disk",
                    self.names.name(UserInput::Measure)
                ),
            )
        } else {
            (
                "worker".into(),
                format!("io_uring cannot be used here: {}", causes.join("; ")),
            )
        }
    }

    /// Why a device setting is a guess, and how to measure instead.
    fn guess_note(&self) -> String {
        format!(
            "guessed from the storage class {} ({}); run with {}",
            self.disk.class.name(),
            self.disk.evidence,
            self.names.name(UserInput::Measure)
        )
    }

    /// Whether the storage's speed is not known from its facts (a virtual disk, a network
    /// file system, nothing readable) and was not measured: then no I/O concurrency goes
    /// below PostgreSQL 18's default.
    pub(super) fn speed_unknown(&self) -> bool {
        self.measured().is_none() && !self.disk.class.is_flash() && !self.disk.class.spins()
    }

    /// `effective_io_concurrency` and its reason.
    pub fn eic(&self) -> (u32, String) {
        if let Some(m) = self.measured() {
            let r = &m.recommendations.effective_io_concurrency;
            return (measured_count(r.value), format!("measured: {}", r.reason));
        }
        match self.disk.class {
            DiskClass::Hdd => (ROTATIONAL_IO_CONCURRENCY, self.guess_note()),
            DiskClass::Nvme | DiskClass::Ssd => (SSD_IO_CONCURRENCY, self.guess_note()),
            _ => (
                MIN_UNMEASURED_IO_CONCURRENCY,
                format!(
                    "{}; a device of this class gets no less than PostgreSQL 18's default {MIN_UNMEASURED_IO_CONCURRENCY} without a measurement, and a configured value above it is kept",
                    self.guess_note()
                ),
            ),
        }
    }

    /// `maintenance_io_concurrency` and its reason: measured, the depth near the device's
    /// peak; guessed, the same as `effective_io_concurrency`.
    pub fn mic(&self) -> (u32, String) {
        if let Some(m) = self.measured() {
            let r = &m.recommendations.maintenance_io_concurrency;
            return (measured_count(r.value), format!("measured: {}", r.reason));
        }
        let (eic, why) = self.eic();
        (eic, format!("as effective_io_concurrency: {why}"))
    }

    /// The data's size against the cache, when both are known: the figures and whether the
    /// data is fully cached (at most `FULLY_CACHED_SHARE` of the effective cache).
    pub fn data_cached(&self) -> Option<(bool, String)> {
        let size = self.facts.instance.as_ref()?.database_size_bytes?;
        if self.ram == 0 {
            return None;
        }
        let cache = self.effective_cache_size();
        let (sb, _) = self.current("shared_buffers");
        let cached = (size as f64) <= cache as f64 * FULLY_CACHED_SHARE;
        Some((
            cached,
            format!(
                "data {}, RAM {} ({}), shared_buffers {sb}: {}",
                human_bytes(size),
                human_bytes(self.ram),
                self.ram_limit,
                if cached {
                    format!(
                        "fully cached (at most {:.0}% of the {} effective cache)",
                        FULLY_CACHED_SHARE * 100.0,
                        human_bytes(cache)
                    )
                } else {
                    format!(
                        "more than {:.0}% of the {} effective cache",
                        FULLY_CACHED_SHARE * 100.0,
                        human_bytes(cache)
                    )
                }
            ),
        ))
    }

    /// `random_page_cost` and its reason: 1.1 when the data fits in the cache (a random
    /// page then costs what a sequential one does, whatever the disk); else the measured
    /// ratio, else by storage class.
    pub fn random_page_cost(&self) -> (f64, String) {
        let cached = self.data_cached();
        if let Some((true, figures)) = &cached {
            let measured = self
                .measured()
                .map(|m| {
                    format!(
                        "; the disk's own ratio (measured: {}) matters only for reads the cache misses",
                        m.recommendations.random_page_cost.reason
                    )
                })
                .unwrap_or_default();
            return (CACHED_RANDOM_PAGE_COST, format!("{figures}{measured}"));
        }
        let figures = cached
            .map(|(_, f)| format!("{f}; "))
            .unwrap_or_else(|| "the data's size is not known; ".to_string());
        if let Some(m) = self.measured() {
            let r = &m.recommendations.random_page_cost;
            return (r.value, format!("{figures}measured: {}", r.reason));
        }
        let rpc = match self.disk.class {
            DiskClass::Nvme | DiskClass::Ssd => SSD_RANDOM_PAGE_COST,
            _ => ROTATIONAL_RANDOM_PAGE_COST,
        };
        (rpc, format!("{figures}{}", self.guess_note()))
    }

    /// `io_workers` (PostgreSQL 18) and its reason.
    pub fn io_workers(&self) -> (u32, String) {
        if let Some(m) = self.measured() {
            let r = &m.for_postgresql(self.uring_causes().is_empty()).io_workers;
            return (measured_count(r.value), format!("measured: {}", r.reason));
        }
        (
            self.cpus
                .div_ceil(CPUS_PER_IO_WORKER)
                .clamp(DEFAULT_IO_WORKERS, MAX_IO_WORKERS),
            format!(
                "a quarter of the {} effective CPUs, at least PostgreSQL's default {DEFAULT_IO_WORKERS}, at most {MAX_IO_WORKERS} — run with {}",
                self.cpus,
                self.names.name(UserInput::Measure)
            ),
        )
    }
}

/// A measured count as the rules' `u32`: the measurement's values are small (queue depths
/// up to 64, workers up to 32), so saturating is only a guard.
fn measured_count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

pub(super) fn r_random_page_cost(ctx: &Ctx) -> Option<Verdict> {
    let (rec, why) = ctx.random_page_cost();
    Some(number_setting(
        ctx,
        "random_page_cost",
        rec,
        COST_TOLERANCE,
        format!("{rec}"),
        format!("a random page read relative to a sequential one: {why}"),
    ))
}

pub(super) fn r_eic(ctx: &Ctx) -> Option<Verdict> {
    let (rec, why) = ctx.eic();
    Some(concurrency_setting(
        ctx,
        "effective_io_concurrency",
        rec,
        format!("I/Os a scan keeps in flight: {why}"),
    ))
}

pub(super) fn r_mic(ctx: &Ctx) -> Option<Verdict> {
    let (rec, why) = ctx.mic();
    Some(concurrency_setting(
        ctx,
        "maintenance_io_concurrency",
        rec,
        format!("I/Os VACUUM, index builds and recovery keep in flight: {why}"),
    ))
}

/// An I/O concurrency: within [`CONCURRENCY_TOLERANCE`] of the recommendation. Without a
/// measurement the recommendation is a guess from the storage class, so on anything but a
/// spinning disk a configured value from [`MIN_UNMEASURED_IO_CONCURRENCY`] up is kept (an
/// earlier measurement's, say: advise must not take back what it measured before) and the
/// snippet keeps it too; the item still names the class's guess and how to measure.
fn concurrency_setting(ctx: &Ctx, name: &str, rec: u32, why: String) -> Verdict {
    let mut v = number_setting(
        ctx,
        name,
        f64::from(rec),
        CONCURRENCY_TOLERANCE,
        rec.to_string(),
        why,
    );
    let configured = ctx
        .setting(name)
        .and_then(|s| s.value.trim_matches('\'').parse::<u32>().ok());
    let guessed = ctx.measured().is_none() && !ctx.disk.class.spins();
    if let Some(n) = configured.filter(|n| guessed && *n >= MIN_UNMEASURED_IO_CONCURRENCY) {
        v.status = Some(Status::Ok);
        v.recommended = if ctx.speed_unknown() || n == rec {
            format!("{n} (as configured: at least {rec})")
        } else {
            format!(
                "{n} (as configured; the storage class suggests {rec}, a guess: measure to compare)"
            )
        };
        v.conf = Some((name.to_string(), n.to_string()));
        v.fix = "none".into();
    }
    v
}

pub(super) fn r_io_combine_limit(ctx: &Ctx) -> Option<Verdict> {
    if ctx.pg < AIO_SINCE_PG {
        return None;
    }
    Some(size_setting(
        ctx,
        "io_combine_limit",
        BLOCK,
        IO_COMBINE_LIMIT_BYTES,
        "the largest I/O PostgreSQL 18 merges adjacent blocks into; 128 kB is the most io_max_combine_limit allows by default".into(),
    ))
}

pub(super) fn r_io_method(ctx: &Ctx) -> Option<Verdict> {
    if ctx.pg < AIO_SINCE_PG {
        return None;
    }
    let (rec, why) = ctx.io_method();
    let mut v = word_setting(ctx, "io_method", &rec, why);
    if ctx.wants_uring() && !ctx.uring_causes().is_empty() {
        v.status = Some(Status::Bad);
        v.reason = format!(
            "io_method = io_uring cannot start here: {}",
            ctx.uring_causes().join("; ")
        );
    }
    Some(v)
}

pub(super) fn r_io_workers(ctx: &Ctx) -> Option<Verdict> {
    // Only PostgreSQL 18 has a fixed io_workers; 19 sizes a pool instead.
    if ctx.pg != AIO_SINCE_PG {
        return None;
    }
    let (rec, why) = ctx.io_workers();
    Some(number_setting(
        ctx,
        "io_workers",
        rec as f64,
        EXACT,
        rec.to_string(),
        format!("I/O worker processes for io_method = worker: {why}"),
    ))
}

pub(super) fn r_io_min_workers(ctx: &Ctx) -> Option<Verdict> {
    if ctx.pg < IO_WORKER_POOL_SINCE_PG {
        return None;
    }
    let by_cpus = ctx
        .cpus
        .div_ceil(CPUS_PER_READY_IO_WORKER)
        .clamp(1, MAX_IO_WORKERS);
    let usable = ctx.uring_causes().is_empty();
    let measured = ctx.measured().and_then(|m| m.io_workers(usable));
    let (rec, why) = match measured {
        // The measured count is what one cold scan needed at full speed: kept ready, the
        // first scan after a quiet spell does not wait for the pool to grow. Never above
        // the pool's ceiling (io_max_workers' rule takes at least the same count).
        Some(w) => {
            let rec = (measured_count(w)).max(by_cpus).clamp(1, MAX_IO_WORKERS);
            (
                rec,
                format!(
                    "PostgreSQL 19 grows the I/O worker pool on demand; keep ready the {w} workers one cold scan needed (measured: {}), at least one per {CPUS_PER_READY_IO_WORKER} of the {} CPUs",
                    ctx.measured().map_or("", |m| m.for_postgresql(usable).io_workers.reason.as_str()),
                    ctx.cpus
                ),
            )
        }
        None => (
            by_cpus,
            format!(
                "PostgreSQL 19 grows the I/O worker pool on demand; keep one per {CPUS_PER_READY_IO_WORKER} of the {} CPUs ready",
                ctx.cpus
            ),
        ),
    };
    Some(number_setting(
        ctx,
        "io_min_workers",
        rec as f64,
        EXACT,
        rec.to_string(),
        why,
    ))
}

pub(super) fn r_io_max_workers(ctx: &Ctx) -> Option<Verdict> {
    if ctx.pg < IO_WORKER_POOL_SINCE_PG {
        return None;
    }
    let (rec, why) = ctx.io_workers();
    let rec = rec
        .max(ctx.cpus.div_ceil(CPUS_PER_POOL_IO_WORKER))
        .clamp(1, MAX_IO_WORKERS);
    let why = format!(
        "the pool's ceiling: half the {} CPUs or the PostgreSQL 18 io_workers choice ({why}), \
         at most {MAX_IO_WORKERS}",
        ctx.cpus
    );
    Some(number_setting(
        ctx,
        "io_max_workers",
        rec as f64,
        EXACT,
        rec.to_string(),
        why,
    ))
}
