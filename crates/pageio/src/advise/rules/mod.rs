//! The advice table: every rule, its formula and where that comes from.
//!
//! [`RULES`] is the one table of rules, in report order. Each [`Rule`] has a group, a name
//! and a citation, and an `eval` that reads the [`Ctx`] — the facts plus the values derived
//! once from them (effective RAM and CPUs, the recommended `shared_buffers`, the shared
//! memory it implies, the process count) — and returns a [`Verdict`], or `None` when the
//! rule does not apply (io_workers before PostgreSQL 18, storage without a data directory).
//!
//! The rules live in one submodule per group, and every threshold and formula constant is
//! named beside the rules that use it, with the source it comes from:
//!
//! ```text
//!   ctx        the facts and the sizes derived from them (shared_buffers, work_mem, processes)
//!   memory     host: effective resources, overcommit, swappiness, dirty writeback, huge pages
//!   kernel     host: scheduler autogroup and migration cost, the clock source
//!   storage    the data directory's and pg_wal's file systems and disks, O_DIRECT
//!   io_uring   whether PostgreSQL 18 can use io_uring here: sysctl, seccomp, liburing, limits
//!   settings   how an instance setting is judged (tolerances, PostgreSQL's defaults)
//!   memory_settings, wal, io, instance    the PostgreSQL settings, by topic
//! ```
//!
//! Instance settings are compared with the value PostgreSQL would use: the last line setting
//! it in the resolved configuration (with its `file:line`), else PostgreSQL's default for the
//! version ([`pg_default`]). A size within [`SIZE_TOLERANCE`] of the recommendation is OK:
//! memory formulas are starting points, and a value a DBA chose nearby is not a fault.
//!
//! Where a message points the user at one of advise's own inputs (a measurement, the data
//! directory, the binaries), it names that input through the caller's [`InputNames`], so
//! the library's text never spells a command-line flag.

mod ctx;
mod instance;
mod io;
mod io_uring;
mod kernel;
mod memory;
mod memory_settings;
mod settings;
mod storage;
mod wal;

pub use ctx::{workload_connections, Ctx, Refused};
pub use io_uring::{DEFAULT_URING_ENTRIES, MAX_FILES_PER_PROCESS};
pub use kernel::{MAX_CLOCK_READ_NS, MIN_MIGRATION_COST_NS};
pub use memory::{HUGE_PAGES_HEADROOM, HUGE_PAGES_WORTH_BYTES, MAX_SWAPPINESS, OVERCOMMIT_RATIO};
pub use memory_settings::MAX_SHARED_BUFFERS_SHARE;
pub use settings::{
    pg_default, CHECKPOINT_TARGET_TOLERANCE, CONCURRENCY_TOLERANCE, COST_TOLERANCE, EXACT,
    SIZE_TOLERANCE,
};
pub use storage::MIN_ROTATIONAL_READ_AHEAD_KB;
pub use wal::wal_sizes;

use super::{Advice, Facts, Group, InputNames, Inputs, Item, Status};
use instance::{
    r_checksums, r_config_files, r_max_parallel_workers, r_max_worker_processes,
    r_parallel_maintenance, r_per_gather, r_server, r_track_io_timing,
};
use io::{
    r_eic, r_io_combine_limit, r_io_max_workers, r_io_method, r_io_min_workers, r_io_workers,
    r_mic, r_random_page_cost,
};
use io_uring::{r_liburing, r_memlock, r_nofile, r_seccomp, r_uring, r_uring_sysctl};
use kernel::{r_autogroup, r_clock, r_migration_cost};
use memory::{
    r_dirty, r_effective, r_hugepages, r_overcommit, r_swappiness, r_thp, r_zone_reclaim,
};
use memory_settings::{
    r_effective_cache_size, r_huge_pages_setting, r_maintenance_work_mem, r_shared_buffers,
    r_work_mem,
};
use storage::{
    r_barriers, r_device, r_direct_io, r_noatime, r_read_ahead, r_scheduler, r_wal_storage,
};
use wal::{r_checkpoint_target, r_max_wal, r_min_wal, r_wal_buffers};

/// One rule (see the module header).
pub struct Rule {
    /// The report group.
    pub group: Group,
    /// The setting or check it judges.
    pub name: &'static str,
    /// Where its formula or threshold comes from.
    pub cite: &'static str,
    /// The evaluation.
    pub eval: fn(&Ctx) -> Option<Verdict>,
}

/// What a rule found.
#[derive(Debug, Clone, Default)]
pub struct Verdict {
    status: Option<Status>,
    found: String,
    source: String,
    recommended: String,
    reason: String,
    fix: String,
    conf: Option<(String, String)>,
    sysctl: Vec<(String, String)>,
}

impl Verdict {
    fn new(status: Status, found: impl Into<String>, source: impl Into<String>) -> Verdict {
        Verdict {
            status: Some(status),
            found: found.into(),
            source: source.into(),
            ..Default::default()
        }
    }
    fn rec(mut self, recommended: impl Into<String>) -> Self {
        self.recommended = recommended.into();
        self
    }
    fn why(mut self, reason: impl Into<String>) -> Self {
        self.reason = reason.into();
        self
    }
    fn fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = fix.into();
        self
    }
    fn sysctl(mut self, key: &str, value: impl ToString) -> Self {
        self.sysctl.push((key.to_string(), value.to_string()));
        self
    }
}

/// A check that could not be made, as an item saying why (never silence).
fn skipped(reason: impl Into<String>, source: impl Into<String>) -> Verdict {
    Verdict::new(
        Status::Ok,
        format!("not checked: {}", reason.into()),
        source,
    )
    .rec("—")
    .fix("none")
}

/// Every rule, in report order. Each comment names the source of its formula or threshold.
pub const RULES: &[Rule] = &[
    // cgroup v2 memory.max / cpu.max (kernel Documentation/admin-guide/cgroup-v2.rst).
    Rule {
        group: Group::Host,
        name: "effective resources",
        cite: "kernel cgroup-v2.rst (memory.max, cpu.max, cpuset)",
        eval: r_effective,
    },
    // PostgreSQL docs §19.4.4 "Linux Memory Overcommit"; kernel mm/overcommit-accounting.rst.
    Rule {
        group: Group::Host,
        name: "vm.overcommit_memory",
        cite: "PostgreSQL docs 19.4.4 Linux Memory Overcommit; kernel overcommit-accounting.rst",
        eval: r_overcommit,
    },
    // Red Hat tuned throughput-performance (vm.swappiness=10).
    Rule {
        group: Group::Host,
        name: "vm.swappiness",
        cite: "Red Hat tuned throughput-performance profile",
        eval: r_swappiness,
    },
    // kernel admin-guide/sysctl/vm.rst (dirty_*_bytes); PostgreSQL docs 28.5 WAL configuration.
    Rule {
        group: Group::Host,
        name: "vm.dirty_background_bytes",
        cite: "kernel sysctl/vm.rst dirty_background_bytes; PostgreSQL docs 28.5 checkpoints",
        eval: r_dirty,
    },
    // PostgreSQL docs §19.4.1 huge_pages (THP discouraged).
    Rule {
        group: Group::Host,
        name: "transparent_hugepage",
        cite: "PostgreSQL docs 19.4.1 huge_pages; kernel admin-guide/mm/transhuge.rst",
        eval: r_thp,
    },
    // PostgreSQL docs §19.4.5 Linux Huge Pages (shared_memory_size_in_huge_pages).
    Rule {
        group: Group::Host,
        name: "vm.nr_hugepages",
        cite: "PostgreSQL docs 19.4.5 Linux Huge Pages",
        eval: r_hugepages,
    },
    // kernel admin-guide/sysctl/vm.rst zone_reclaim_mode.
    Rule {
        group: Group::Host,
        name: "vm.zone_reclaim_mode",
        cite: "kernel sysctl/vm.rst zone_reclaim_mode",
        eval: r_zone_reclaim,
    },
    // kernel sched-autogroup; pgsql-performance "autogroup and PostgreSQL" (2012).
    Rule {
        group: Group::Host,
        name: "kernel.sched_autogroup_enabled",
        cite: "kernel sysctl/kernel.rst sched_autogroup_enabled; pgsql-performance 2012",
        eval: r_autogroup,
    },
    // Red Hat tuned throughput-performance (sched_migration_cost_ns=5000000).
    Rule {
        group: Group::Host,
        name: "sched_migration_cost_ns",
        cite: "Red Hat tuned throughput-performance profile",
        eval: r_migration_cost,
    },
    // PostgreSQL docs pg_test_timing.
    Rule {
        group: Group::Host,
        name: "clocksource",
        cite: "PostgreSQL docs pg_test_timing",
        eval: r_clock,
    },
    Rule {
        group: Group::Storage,
        name: "data directory storage",
        cite: "/proc/self/mountinfo, sysfs block queue",
        eval: r_device,
    },
    // kernel Documentation/block (deadline-iosched, bfq-iosched).
    Rule {
        group: Group::Storage,
        name: "I/O scheduler",
        cite: "kernel Documentation/block/deadline-iosched.rst, bfq-iosched.rst",
        eval: r_scheduler,
    },
    Rule {
        group: Group::Storage,
        name: "read_ahead_kb",
        cite: "kernel queue-sysfs.rst read_ahead_kb",
        eval: r_read_ahead,
    },
    // PostgreSQL wiki "Tuning Your PostgreSQL Server" (noatime).
    Rule {
        group: Group::Storage,
        name: "noatime",
        cite: "mount(8) noatime; PostgreSQL wiki Tuning Your PostgreSQL Server",
        eval: r_noatime,
    },
    // PostgreSQL docs 28.1 Reliability (write barriers).
    Rule {
        group: Group::Storage,
        name: "write barriers",
        cite: "PostgreSQL docs 28.1 Reliability",
        eval: r_barriers,
    },
    // PostgreSQL docs 28.6 WAL Internals (pg_wal on another disk); 28.1 Reliability.
    Rule {
        group: Group::Storage,
        name: "pg_wal storage",
        cite: "PostgreSQL docs 28.6 WAL Internals; 28.1 Reliability",
        eval: r_wal_storage,
    },
    Rule {
        group: Group::Storage,
        name: "O_DIRECT",
        cite: "statx(2) STATX_DIOALIGN; PostgreSQL docs debug_io_direct",
        eval: r_direct_io,
    },
    // kernel sysctl/kernel.rst io_uring_disabled, io_uring_group (6.6+).
    Rule {
        group: Group::IoUring,
        name: "kernel.io_uring_disabled",
        cite: "kernel sysctl/kernel.rst io_uring_disabled",
        eval: r_uring_sysctl,
    },
    // seccomp(2); Docker's default seccomp profile (blocks io_uring since 25.0).
    Rule {
        group: Group::IoUring,
        name: "seccomp",
        cite: "seccomp(2); moby default seccomp profile",
        eval: r_seccomp,
    },
    // PostgreSQL 18 docs io_method (requires --with-liburing).
    Rule {
        group: Group::IoUring,
        name: "liburing",
        cite: "PostgreSQL 18 docs io_method, installation --with-liburing",
        eval: r_liburing,
    },
    // io_uring_setup(2) (ring memory accounting); PostgreSQL 18 io_uring creates rings in the postmaster.
    Rule {
        group: Group::IoUring,
        name: "RLIMIT_MEMLOCK",
        cite: "io_uring_setup(2); PostgreSQL 18 src/backend/storage/aio/method_io_uring.c",
        eval: r_memlock,
    },
    // PostgreSQL 18 release notes (soft RLIMIT_NOFILE raised for io_uring); max_files_per_process.
    Rule {
        group: Group::IoUring,
        name: "RLIMIT_NOFILE",
        cite: "PostgreSQL 18 release notes; docs max_files_per_process",
        eval: r_nofile,
    },
    Rule {
        group: Group::IoUring,
        name: "io_uring",
        cite: "the io_uring items above",
        eval: r_uring,
    },
    // PostgreSQL docs 19.1.2 (configuration file), 19.1.5 (includes).
    Rule {
        group: Group::Instance,
        name: "configuration files",
        cite: "PostgreSQL docs 19.1.2, 19.1.5 (includes)",
        eval: r_config_files,
    },
    // PostgreSQL docs §19.4.1 shared_buffers (25%); pgtune.
    Rule {
        group: Group::Instance,
        name: "shared_buffers",
        cite: "PostgreSQL docs 19.4.1 shared_buffers; pgtune",
        eval: r_shared_buffers,
    },
    // PostgreSQL docs §19.4.1 huge_pages.
    Rule {
        group: Group::Instance,
        name: "huge_pages",
        cite: "PostgreSQL docs 19.4.1 huge_pages",
        eval: r_huge_pages_setting,
    },
    // pgtune (RAM × 3/4; desktop 1/4).
    Rule {
        group: Group::Instance,
        name: "effective_cache_size",
        cite: "pgtune; PostgreSQL docs 19.7.2",
        eval: r_effective_cache_size,
    },
    // pgtune's work_mem formula.
    Rule {
        group: Group::Instance,
        name: "work_mem",
        cite: "pgtune work_mem formula",
        eval: r_work_mem,
    },
    // pgtune (RAM/16, dw RAM/8), capped at 2 GB by pageio.
    Rule {
        group: Group::Instance,
        name: "maintenance_work_mem",
        cite: "pgtune; PostgreSQL docs 19.4.1 (autovacuum_work_mem)",
        eval: r_maintenance_work_mem,
    },
    // PostgreSQL docs §19.5.2 wal_buffers (-1: shared_buffers/32 up to a segment).
    Rule {
        group: Group::Instance,
        name: "wal_buffers",
        cite: "PostgreSQL docs 19.5.2 wal_buffers",
        eval: r_wal_buffers,
    },
    // pgtune per workload.
    Rule {
        group: Group::Instance,
        name: "min_wal_size",
        cite: "pgtune",
        eval: r_min_wal,
    },
    Rule {
        group: Group::Instance,
        name: "max_wal_size",
        cite: "pgtune; PostgreSQL docs 28.5",
        eval: r_max_wal,
    },
    // PostgreSQL 14 release notes (default 0.9).
    Rule {
        group: Group::Instance,
        name: "checkpoint_completion_target",
        cite: "PostgreSQL 14 release notes; pgtune",
        eval: r_checkpoint_target,
    },
    // PostgreSQL docs §19.7.2 random_page_cost; pgtune (HDD 4, SSD 1.1).
    Rule {
        group: Group::Instance,
        name: "random_page_cost",
        cite: "PostgreSQL docs 19.7.2 random_page_cost; pgtune",
        eval: r_random_page_cost,
    },
    // PostgreSQL docs §19.4.6 effective_io_concurrency; PostgreSQL 18 release notes.
    Rule {
        group: Group::Instance,
        name: "effective_io_concurrency",
        cite: "PostgreSQL docs 19.4.6; PostgreSQL 18 release notes; pgtune",
        eval: r_eic,
    },
    Rule {
        group: Group::Instance,
        name: "maintenance_io_concurrency",
        cite: "PostgreSQL docs 19.4.6",
        eval: r_mic,
    },
    // PostgreSQL 18 docs io_combine_limit.
    Rule {
        group: Group::Instance,
        name: "io_combine_limit",
        cite: "PostgreSQL 18 docs io_combine_limit",
        eval: r_io_combine_limit,
    },
    // PostgreSQL 18 docs io_method.
    Rule {
        group: Group::Instance,
        name: "io_method",
        cite: "PostgreSQL 18 docs io_method",
        eval: r_io_method,
    },
    // PostgreSQL 18 docs io_workers (default 3).
    Rule {
        group: Group::Instance,
        name: "io_workers",
        cite: "PostgreSQL 18 docs io_workers",
        eval: r_io_workers,
    },
    // PostgreSQL 19 development docs (io_min_workers / io_max_workers).
    Rule {
        group: Group::Instance,
        name: "io_min_workers",
        cite: "PostgreSQL 19 docs io_min_workers",
        eval: r_io_min_workers,
    },
    Rule {
        group: Group::Instance,
        name: "io_max_workers",
        cite: "PostgreSQL 19 docs io_max_workers",
        eval: r_io_max_workers,
    },
    // pgtune parallel settings.
    Rule {
        group: Group::Instance,
        name: "max_worker_processes",
        cite: "pgtune; PostgreSQL docs 19.4.6",
        eval: r_max_worker_processes,
    },
    Rule {
        group: Group::Instance,
        name: "max_parallel_workers",
        cite: "pgtune",
        eval: r_max_parallel_workers,
    },
    Rule {
        group: Group::Instance,
        name: "max_parallel_workers_per_gather",
        cite: "pgtune",
        eval: r_per_gather,
    },
    Rule {
        group: Group::Instance,
        name: "max_parallel_maintenance_workers",
        cite: "pgtune",
        eval: r_parallel_maintenance,
    },
    // PostgreSQL docs track_io_timing, pg_test_timing.
    Rule {
        group: Group::Instance,
        name: "track_io_timing",
        cite: "PostgreSQL docs 19.9.3 track_io_timing; pg_test_timing",
        eval: r_track_io_timing,
    },
    // pg_ctl status (postmaster.pid and a live process).
    Rule {
        group: Group::Instance,
        name: "server",
        cite: "pg_ctl status; PostgreSQL docs 18.3 (postmaster.pid)",
        eval: r_server,
    },
    // PostgreSQL 18 release notes (initdb enables checksums); pg_checksums.
    Rule {
        group: Group::Instance,
        name: "data_checksums",
        cite: "PostgreSQL 18 release notes; pg_checksums",
        eval: r_checksums,
    },
];

/// Runs every rule and renders the snippets; messages name the user's inputs as `names`
/// spells them.
pub fn evaluate(facts: &Facts, inputs: &Inputs, names: &dyn InputNames) -> Advice {
    let ctx = Ctx::new(facts, inputs, names);
    let mut items: Vec<Item> = RULES
        .iter()
        .filter_map(|rule| {
            let v = (rule.eval)(&ctx)?;
            Some(Item {
                group: rule.group,
                name: rule.name.to_string(),
                status: v.status.unwrap_or(Status::Ok),
                found: v.found,
                source: v.source,
                recommended: v.recommended,
                reason: v.reason,
                fix: v.fix,
                cite: rule.cite,
                conf: v.conf,
                sysctl: v.sysctl,
            })
        })
        .collect();
    for r in &ctx.refused {
        if let Some(item) = items.iter_mut().find(|i| i.name == r.name) {
            item.status = Status::Bad;
            item.found = r.value.clone();
            item.source = r.location.clone();
            item.reason = format!(
                "PostgreSQL {} will not start with this value: {}",
                ctx.pg, r.message
            );
            item.fix = format!("correct {}: {}", r.location, item.fix);
        }
    }
    items.sort_by_key(|i| i.group);
    let mut advice = Advice {
        pg_version: ctx.pg,
        workload: inputs.workload,
        max_connections: ctx.max_connections.0,
        max_connections_source: ctx.max_connections.1.clone(),
        effective_memory_bytes: (ctx.ram > 0).then_some(ctx.ram),
        memory_limit: ctx.ram_limit.clone(),
        effective_cpus: ctx.cpus,
        cpu_limit: ctx.cpu_limit.clone(),
        items,
        postgresql_conf: String::new(),
        sysctl_conf: String::new(),
        problems: facts
            .host
            .problems
            .iter()
            .map(ToString::to_string)
            .chain(
                facts
                    .instance
                    .iter()
                    .flat_map(|i| i.problems.iter().cloned()),
            )
            .collect(),
    };
    advice.postgresql_conf = super::snippets::postgresql_conf(&advice);
    advice.sysctl_conf = super::snippets::sysctl_conf(&advice);
    advice
}
