//! Host rules on the scheduler and the clock: session autogroups, the migration cost that
//! keeps backends on their CPU, and the clock source `track_io_timing` reads.

use super::memory::{on_host, sysctl_persist, unreadable};
use super::{skipped, Ctx, Verdict};
use crate::advise::Status;

/// `sched_migration_cost_ns` below this makes the scheduler move busy backends between CPUs
/// too eagerly (`tuned` throughput-performance sets 5 ms; the kernel default is 0.5 ms).
pub const MIN_MIGRATION_COST_NS: u64 = 5_000_000;

/// A clock source that costs more than this per read makes `track_io_timing` expensive
/// (pg_test_timing's documentation).
pub const MAX_CLOCK_READ_NS: f64 = crate::host::clock::CHEAP_CLOCK_READ_NS;

/// Clock sources slow enough to read that `track_io_timing` and EXPLAIN ANALYZE pay for
/// them on every I/O whatever the measurement says (PostgreSQL docs pg_test_timing: "hpet"
/// and "acpi_pm" are its examples of slow sources; jiffies has tick resolution).
pub const SLOW_CLOCKSOURCES: [&str; 3] = ["hpet", "acpi_pm", "jiffies"];

pub(super) fn r_autogroup(ctx: &Ctx) -> Option<Verdict> {
    let Some(on) = ctx.facts.host.kernel.sched_autogroup_enabled else {
        return Some(unreadable(
            "/proc/sys/kernel/sched_autogroup_enabled".into(),
        ));
    };
    let status = if on == 0 { Status::Ok } else { Status::Warn };
    let mut v = Verdict::new(
        status,
        on.to_string(),
        "/proc/sys/kernel/sched_autogroup_enabled",
    )
    .rec("0")
    .why("autogroup shares CPU per session, so all of PostgreSQL (one session) competes as one task against a single shell job")
    .fix(format!("sysctl -w kernel.sched_autogroup_enabled=0{}", sysctl_persist(ctx)));
    if status != Status::Ok {
        v = v.sysctl("kernel.sched_autogroup_enabled", 0);
    }
    Some(v)
}

pub(super) fn r_migration_cost(ctx: &Ctx) -> Option<Verdict> {
    let k = &ctx.facts.host.kernel;
    let Some(ns) = k.sched_migration_cost_ns else {
        return Some(skipped(
            format!(
                "neither /proc/sys/kernel/sched_migration_cost_ns (gone since Linux 5.13) nor /sys/kernel/debug/sched/migration_cost_ns (debugfs: not mounted, or root only) is readable here{}; check it as root on the host, where {MIN_MIGRATION_COST_NS} ns or more is wanted",
                on_host(ctx)
            ),
            "/sys/kernel/debug/sched/migration_cost_ns",
        ));
    };
    let source = k
        .sched_migration_cost_source
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let status = if ns >= MIN_MIGRATION_COST_NS {
        Status::Ok
    } else {
        Status::Warn
    };
    let is_sysctl = source.starts_with("/proc/sys");
    let mut v = Verdict::new(status, format!("{ns} ns"), source.clone())
        .rec(format!("{MIN_MIGRATION_COST_NS} ns"))
        .why("a short migration cost lets the scheduler bounce busy backends between CPUs, losing their caches")
        .fix(if is_sysctl {
            format!(
                "sysctl -w kernel.sched_migration_cost_ns={MIN_MIGRATION_COST_NS}{}",
                sysctl_persist(ctx)
            )
        } else {
            format!(
                "echo {MIN_MIGRATION_COST_NS} > {source} (debugfs, since Linux 5.13; set it at boot, e.g. a tuned profile){}",
                on_host(ctx)
            )
        });
    if status != Status::Ok && is_sysctl {
        v = v.sysctl("kernel.sched_migration_cost_ns", MIN_MIGRATION_COST_NS);
    }
    Some(v)
}

pub(super) fn r_clock(ctx: &Ctx) -> Option<Verdict> {
    let k = &ctx.facts.host.kernel;
    let cost = ctx.facts.probes.clock_read_ns;
    if k.clocksource.is_none() && cost.is_none() {
        return Some(skipped(
            "the clock source is not readable and its cost was not measured (a captured tree)",
            crate::host::kernel::CURRENT_CLOCKSOURCE,
        ));
    }
    let src = k.clocksource.clone().unwrap_or_else(|| "?".into());
    let slow_source = SLOW_CLOCKSOURCES.contains(&src.as_str());
    let slow = cost.is_some_and(|c| c > MAX_CLOCK_READ_NS) || slow_source;
    let has_tsc = k.available_clocksources.iter().any(|c| c == "tsc");
    Some(
        Verdict::new(
            if slow { Status::Warn } else { Status::Ok },
            match cost {
                Some(c) => format!("{src}, {c:.0} ns per read (measured like pg_test_timing)"),
                None => format!("{src} (read cost not measured)"),
            },
            crate::host::kernel::CURRENT_CLOCKSOURCE,
        )
        .rec(format!("a clock read under {MAX_CLOCK_READ_NS:.0} ns (tsc)"))
        .why("track_io_timing and EXPLAIN ANALYZE read the clock around every I/O, which a slow clock source turns into the main cost")
        .fix(if has_tsc && src != "tsc" {
            format!("echo tsc > {}; keep it with clocksource=tsc on the kernel command line", crate::host::kernel::CURRENT_CLOCKSOURCE)
        } else if slow {
            "no faster clock source is available: keep track_io_timing = off".to_string()
        } else {
            "none".to_string()
        }),
    )
}
