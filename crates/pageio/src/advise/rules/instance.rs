//! The remaining instance items: the configuration files as PostgreSQL resolves them, the
//! parallel-worker settings, `track_io_timing`, whether the server runs, and data checksums.

use super::super::units::human_bytes;
use super::kernel::MAX_CLOCK_READ_NS;
use super::settings::{number_setting, word_setting, EXACT};
use super::{Ctx, Verdict};
use crate::advise::{Status, Workload};

pub(super) fn r_config_files(ctx: &Ctx) -> Option<Verdict> {
    let inst = ctx.facts.instance.as_ref()?;
    let files: Vec<String> = inst
        .config_files
        .iter()
        .map(|f| f.display().to_string())
        .collect();
    let problems: Vec<String> = inst
        .config_problems
        .iter()
        .cloned()
        .chain(
            ctx.refused
                .iter()
                .map(|r| format!("{}: {}", r.location, r.message)),
        )
        .collect();
    let broken = !problems.is_empty();
    Some(
        Verdict::new(
            if broken { Status::Bad } else { Status::Ok },
            if broken {
                problems.join("; ")
            } else {
                format!("{} read: {}", files.len(), files.join(", "))
            },
            "postgresql.conf, its includes, postgresql.auto.conf",
        )
        .rec("every configuration file readable and valid")
        .why(if broken {
            format!("PostgreSQL {} refuses to start on a configuration file it cannot read or parse, or on a value it does not accept, and the settings below are judged without it", ctx.pg)
        } else {
            "the settings below are the last value each file sets, as PostgreSQL resolves them".to_string()
        })
        .fix(if broken { "correct the file and line named" } else { "none" }),
    )
}

pub(super) fn r_max_worker_processes(ctx: &Ctx) -> Option<Verdict> {
    let rec = ctx.max_worker_processes();
    Some(number_setting(
        ctx,
        "max_worker_processes",
        rec as f64,
        EXACT,
        rec.to_string(),
        format!(
            "one background worker per effective CPU ({}), at least PostgreSQL's 8",
            ctx.cpus
        ),
    ))
}

pub(super) fn r_max_parallel_workers(ctx: &Ctx) -> Option<Verdict> {
    let rec = ctx.max_parallel_workers();
    Some(number_setting(
        ctx,
        "max_parallel_workers",
        rec as f64,
        EXACT,
        rec.to_string(),
        format!(
            "parallel workers beyond the {} effective CPUs only queue ({})",
            ctx.cpus, ctx.cpu_limit
        ),
    ))
}

pub(super) fn r_per_gather(ctx: &Ctx) -> Option<Verdict> {
    let rec = ctx.parallel_per_gather();
    Some(number_setting(
        ctx,
        "max_parallel_workers_per_gather",
        rec as f64,
        EXACT,
        rec.to_string(),
        format!(
            "half the {} CPUs{} per query",
            ctx.cpus,
            if ctx.workload() == Workload::Dw {
                ""
            } else {
                ", at most 4"
            }
        ),
    ))
}

pub(super) fn r_parallel_maintenance(ctx: &Ctx) -> Option<Verdict> {
    let rec = ctx.parallel_maintenance();
    Some(number_setting(
        ctx,
        "max_parallel_maintenance_workers",
        rec as f64,
        EXACT,
        rec.to_string(),
        format!(
            "half the {} CPUs, at most 4, per index build or VACUUM",
            ctx.cpus
        ),
    ))
}

pub(super) fn r_track_io_timing(ctx: &Ctx) -> Option<Verdict> {
    let cost = ctx.facts.probes.clock_read_ns;
    let slow = cost.is_some_and(|c| c > MAX_CLOCK_READ_NS);
    let rec = if slow { "off" } else { "on" };
    Some(word_setting(
        ctx,
        "track_io_timing",
        rec,
        match cost {
            Some(c) => format!("a clock read costs {c:.0} ns here (limit {MAX_CLOCK_READ_NS:.0} ns): I/O times in pg_stat_io and EXPLAIN (BUFFERS) are {}", if slow { "too costly" } else { "nearly free" }),
            None => "the clock was not measured; tsc-class clocks make I/O timing nearly free".to_string(),
        },
    ))
}

pub(super) fn r_server(ctx: &Ctx) -> Option<Verdict> {
    let inst = ctx.facts.instance.as_ref()?;
    let running = inst.running.as_ref()?;
    let state = running
        .control_state
        .clone()
        .unwrap_or_else(|| "pg_control not readable".into());
    let found = match (running.postmaster_pid, running.alive) {
        (Some(pid), true) => format!("running (postmaster pid {pid}; pg_control: {state})"),
        (Some(pid), false) => format!(
            "stopped (postmaster.pid names pid {pid}, which does not exist: a crash left it; pg_control: {state})"
        ),
        (None, _) => format!("stopped (pg_control: {state})"),
    };
    let version = match inst.pg_version {
        Some(v) if v != ctx.pg => format!("; PG_VERSION {v}, advised for {}", ctx.pg),
        Some(v) => format!("; PostgreSQL {v}"),
        None => String::new(),
    };
    let size = inst
        .database_size_bytes
        .map(|b| format!("; {} of data", human_bytes(b)))
        .unwrap_or_default();
    Some(
        Verdict::new(
            Status::Ok,
            format!("{found}{version}{size}"),
            "postmaster.pid, global/pg_control, PG_VERSION",
        )
        .rec("—")
        .why("settings marked 'restart' take effect only when the server restarts")
        .fix("none"),
    )
}

pub(super) fn r_checksums(ctx: &Ctx) -> Option<Verdict> {
    let inst = ctx.facts.instance.as_ref()?;
    inst.pgdata.as_ref()?;
    let Some(on) = inst.data_checksums else {
        return Some(super::skipped(
            "global/pg_control could not be read (see what was not read)",
            "global/pg_control",
        ));
    };
    let (status, found, fix) = if on {
        (Status::Ok, "on", "none")
    } else {
        (
            Status::Warn,
            "off",
            "stop the server, then pg_checksums --enable -D PGDATA",
        )
    };
    let why = "without checksums a page the storage corrupted is read as data (initdb enables \
               them by default from PostgreSQL 18)";
    Some(
        Verdict::new(status, found, "global/pg_control data_checksum_version")
            .rec("on")
            .why(why)
            .fix(fix),
    )
}
