//! The advice table: every rule, its formula and where that comes from.
//!
//! [`RULES`] is the one place where thresholds and formulas live. Each [`Rule`] has a group,
//! a name and a citation, and an `eval` that reads the [`Ctx`] — the facts plus the values
//! derived once from them (effective RAM and CPUs, the recommended `shared_buffers`, the
//! shared memory it implies, the process count) — and returns a [`Verdict`], or `None` when
//! the rule does not apply (io_workers before PostgreSQL 18, storage without a data
//! directory).
//!
//! Instance settings are compared with the value PostgreSQL would use: the last line setting
//! it in the resolved configuration (with its `file:line`), else PostgreSQL's default for the
//! version ([`pg_default`]). A size within [`SIZE_TOLERANCE`] of the recommendation is OK:
//! memory formulas are starting points, and a value a DBA chose nearby is not a fault.

use super::units::{format_size, human_bytes, parse_size, round_down, BLOCK, GB, KB, MB};
use super::{Advice, Facts, Group, Inputs, Item, MeasuredIo, Status, Workload};
use crate::config::IoMethodKind;
use crate::host::SettingSource;

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

/// `shared_buffers` above this share of the effective RAM is BAD: with the backends' own
/// memory on top the cgroup or the OOM killer ends the server.
pub const MAX_SHARED_BUFFERS_SHARE: f64 = 0.8;

/// `vm.overcommit_ratio` recommended with strict overcommit: a fifth of ordinary memory left
/// for the kernel and page cache (the default 50 wastes half the RAM without swap).
pub const OVERCOMMIT_RATIO: u64 = 80;

/// Shared memory below this is not worth huge pages (pgtune sets `huge_pages = try` from
/// 2 GB of `shared_buffers`; below, the page-table savings are small).
pub const HUGE_PAGES_WORTH_BYTES: u64 = 2 * GB;

/// Huge pages reserved above PostgreSQL's estimated shared memory: its exact size
/// (`shared_memory_size`) moves with settings and extensions, so the reservation keeps 10%
/// headroom.
pub const HUGE_PAGES_HEADROOM: f64 = 1.10;

/// `vm.swappiness` above this lets the kernel swap database memory out to keep page cache
/// (Red Hat's `tuned` throughput-performance profile sets 10).
pub const MAX_SWAPPINESS: u64 = 10;

/// `sched_migration_cost_ns` below this makes the scheduler move busy backends between CPUs
/// too eagerly (`tuned` throughput-performance sets 5 ms; the kernel default is 0.5 ms).
pub const MIN_MIGRATION_COST_NS: u64 = 5_000_000;

/// A clock source that costs more than this per read makes `track_io_timing` expensive
/// (pg_test_timing's documentation).
pub const MAX_CLOCK_READ_NS: f64 = crate::host::clock::CHEAP_CLOCK_READ_NS;

/// `read_ahead_kb` below this on a spinning disk leaves sequential scans seek-bound.
pub const MIN_ROTATIONAL_READ_AHEAD_KB: u64 = 1024;

/// PostgreSQL's per-process file budget (`max_files_per_process` default).
pub const MAX_FILES_PER_PROCESS: u64 = 1000;

/// Entries of one io_uring when `io_max_concurrency` is automatic: PostgreSQL 18 takes
/// `min(64, NBuffers / processes)`, 64 for any realistic `shared_buffers`.
pub const DEFAULT_URING_ENTRIES: u64 = 64;

/// The kernel's page size, for ring memory.
const PAGE: u64 = 4096;

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

/// The facts and the values derived from them once.
pub struct Ctx<'a> {
    /// Everything read.
    pub facts: &'a Facts,
    /// The user's choices.
    pub inputs: &'a Inputs,
    /// The PostgreSQL major version advised for.
    pub pg: u32,
    /// Effective RAM, bytes (0 when unknown: memory rules then say so).
    pub ram: u64,
    /// What decided it.
    pub ram_limit: String,
    /// Effective CPUs.
    pub cpus: u32,
    /// What decided them.
    pub cpu_limit: String,
    /// Connections assumed, and from where.
    pub max_connections: (u32, String),
    /// Whether PGDATA's disks spin: `Some(true)` if any does.
    pub rotational: Option<bool>,
    /// Settings whose value PostgreSQL refuses at start-up, in name order.
    pub refused: Vec<Refused>,
}

/// A setting PostgreSQL will not start with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The setting.
    pub name: String,
    /// The value as written.
    pub value: String,
    /// `file:line`.
    pub location: String,
    /// PostgreSQL's message, with its hint when it gives one.
    pub message: String,
}

/// Every configured setting PostgreSQL `pg` refuses (see [`super::guc`]).
fn refused_settings(facts: &Facts, pg: u32) -> Vec<Refused> {
    let Some(instance) = facts.instance.as_ref() else {
        return Vec::new();
    };
    instance
        .settings
        .iter()
        .filter_map(|(name, s)| {
            let message = if super::guc::unknown_in(name, pg) {
                super::guc::unknown_message(name, &s.file.display().to_string(), s.line)
            } else {
                let r = super::guc::check(name, &s.value, pg).err()?;
                match r.hint {
                    Some(h) => format!("{} ({h})", r.message),
                    None => r.message,
                }
            };
            Some(Refused {
                name: name.clone(),
                value: s.value.clone(),
                location: s.location(),
                message,
            })
        })
        .collect()
}

impl<'a> Ctx<'a> {
    fn new(facts: &'a Facts, inputs: &'a Inputs) -> Ctx<'a> {
        let instance = facts.instance.as_ref();
        let pg = inputs
            .pg_version
            .or(instance.and_then(|i| i.pg_version))
            .unwrap_or(super::DEFAULT_PG_VERSION);
        let refused = refused_settings(facts, pg);
        let res = &facts.host.resources;
        let (ram, ram_limit) = match &res.effective_memory_bytes {
            Some(e) => (e.value, e.limit.to_string()),
            None => (0, "unknown: /proc/meminfo not readable".to_string()),
        };
        let (cpus, cpu_limit) = match &res.effective_cpus {
            Some(e) => (e.value.max(1), e.limit.to_string()),
            None => (1, "unknown: 1 assumed".to_string()),
        };
        let conf_connections = instance
            .and_then(|i| i.setting("max_connections"))
            .filter(|_| !refused.iter().any(|r| r.name == "max_connections"))
            .and_then(|s| s.value.parse::<u32>().ok().map(|v| (v, s.location())));
        let max_connections = match (inputs.max_connections, conf_connections) {
            (Some(n), _) => (n, "--max-connections".to_string()),
            (None, Some((n, at))) => (n, at),
            (None, None) => (
                workload_connections(inputs.workload),
                format!("pgtune's default for --workload {}", inputs.workload.name()),
            ),
        };
        let rotational = facts.host.storage.as_ref().and_then(|s| {
            let known: Vec<bool> = s.disks.iter().filter_map(|d| d.rotational).collect();
            (!known.is_empty()).then(|| known.iter().any(|r| *r))
        });
        Ctx {
            facts,
            inputs,
            pg,
            ram,
            ram_limit,
            cpus,
            cpu_limit,
            max_connections,
            rotational,
            refused,
        }
    }

    fn workload(&self) -> Workload {
        self.inputs.workload
    }

    fn measured(&self) -> Option<&MeasuredIo> {
        self.inputs.measured.as_ref()
    }

    /// A configured value PostgreSQL accepts; a refused one is judged apart (its item is
    /// BAD), so no recommendation is derived from it.
    fn setting(&self, name: &str) -> Option<&SettingSource> {
        if self
            .refused
            .iter()
            .any(|r| r.name.eq_ignore_ascii_case(name))
        {
            return None;
        }
        self.facts.instance.as_ref()?.setting(name)
    }

    /// The value PostgreSQL would use, and where it comes from.
    fn current(&self, name: &str) -> (String, String) {
        match self.setting(name) {
            Some(s) => (s.value.clone(), s.location()),
            None => (
                pg_default(name, self.pg).to_string(),
                format!("PostgreSQL {} default", self.pg),
            ),
        }
    }

    /// `shared_buffers`: 25% of RAM (PostgreSQL docs §19.4.1 "a reasonable starting value
    /// for shared_buffers is 25% of the memory"; pgtune), 1/16 on a desktop (pgtune), in
    /// whole MB.
    pub fn shared_buffers(&self) -> u64 {
        let share = if self.workload() == Workload::Desktop {
            16
        } else {
            4
        };
        round_down(self.ram / share, MB)
    }

    /// `wal_buffers` as PostgreSQL's automatic choice computes it: shared_buffers / 32, at
    /// most one 16 MB WAL segment, at least 8 blocks.
    pub fn wal_buffers(&self) -> u64 {
        (self.shared_buffers() / 32).clamp(8 * BLOCK, 16 * MB) / BLOCK * BLOCK
    }

    /// `max_worker_processes`: one per CPU, never below PostgreSQL's default of 8 (logical
    /// replication and extensions need slots too).
    pub fn max_worker_processes(&self) -> u32 {
        self.cpus.max(8)
    }

    /// `max_parallel_workers`: one per CPU (pgtune).
    pub fn max_parallel_workers(&self) -> u32 {
        self.cpus
    }

    /// `max_parallel_workers_per_gather`: half the CPUs, at most 4 except for a warehouse
    /// (pgtune); below 4 CPUs half of them rounded down (one CPU: no parallelism).
    pub fn parallel_per_gather(&self) -> u32 {
        if self.cpus < 4 {
            return self.cpus / 2;
        }
        let half = self.cpus.div_ceil(2);
        if self.workload() == Workload::Dw {
            half
        } else {
            half.min(4)
        }
    }

    /// `max_parallel_maintenance_workers`: half the CPUs, at most 4 (pgtune).
    pub fn parallel_maintenance(&self) -> u32 {
        if self.cpus < 4 {
            self.cpus / 2
        } else {
            self.cpus.div_ceil(2).min(4)
        }
    }

    /// `work_mem` (pgtune): (RAM − shared_buffers) / ((connections + worker processes) × 3)
    /// — a query may run several sorts and hashes at once — halved for dw and mixed, a sixth
    /// on a desktop, at least PostgreSQL's default 4 MB; in kB.
    pub fn work_mem(&self) -> u64 {
        let spare = self.ram.saturating_sub(self.shared_buffers());
        let slots = (self.max_connections.0 as u64 + self.max_worker_processes() as u64) * 3;
        let base = spare / slots.max(1);
        let per = match self.workload() {
            Workload::Web | Workload::Oltp => base,
            Workload::Dw | Workload::Mixed => base / 2,
            Workload::Desktop => base / 6,
        };
        round_down(per.max(4 * MB), KB)
    }

    /// `maintenance_work_mem`: RAM/16 (RAM/8 for a warehouse; pgtune), at most 2 GB — each
    /// autovacuum worker may take this much (`autovacuum_work_mem = -1`), and VACUUM's
    /// dead-tuple store gains little past it.
    pub fn maintenance_work_mem(&self) -> u64 {
        let share = if self.workload() == Workload::Dw {
            8
        } else {
            16
        };
        round_down((self.ram / share).min(2 * GB), MB)
    }

    /// Every process that may exist, as PostgreSQL sizes its process array: connections +
    /// autovacuum workers (`autovacuum_worker_slots`, 16 from PostgreSQL 18; 3 before) + the
    /// launcher + `max_worker_processes` + `max_wal_senders` (10) + auxiliary processes
    /// (6, plus 32 I/O-worker slots from 18). Each may own an io_uring and its descriptor.
    pub fn processes(&self) -> (u64, String) {
        let (autovac, aux) = if self.pg >= 18 { (16, 38) } else { (3, 6) };
        let workers = self.max_worker_processes() as u64;
        let n = self.max_connections.0 as u64 + autovac + 1 + workers + 10 + aux;
        (
            n,
            format!(
                "{} connections + {autovac} autovacuum + 1 launcher + {workers} workers + 10 WAL senders + {aux} auxiliary = {n} processes",
                self.max_connections.0
            ),
        )
    }

    /// PostgreSQL's shared memory, estimated: shared_buffers, its per-buffer descriptors and
    /// checkpoint sort space (~1/64), wal_buffers, ~64 kB per process (PGPROC, lock and
    /// predicate-lock tables at default sizes) and 16 MB of fixed structures.
    pub fn shared_memory(&self) -> u64 {
        let sb = self.shared_buffers();
        sb + sb / 64 + self.wal_buffers() + self.processes().0 * 64 * KB + 16 * MB
    }

    fn hugepage_size(&self) -> (u64, &'static str) {
        match self.facts.host.memory.hugepage_size_bytes {
            Some(s) if s > 0 => (s, ""),
            _ => (2 * MB, " (Hugepagesize not reported; 2 MB assumed)"),
        }
    }

    /// Huge pages to reserve: the shared memory plus 10%, in pages.
    pub fn huge_pages_needed(&self) -> u64 {
        let (size, _) = self.hugepage_size();
        ((self.shared_memory() as f64 * HUGE_PAGES_HEADROOM) / size as f64).ceil() as u64
    }

    /// Whether reserving huge pages is worth it here.
    fn huge_pages_worth(&self) -> bool {
        self.shared_buffers() >= HUGE_PAGES_WORTH_BYTES
            || self.facts.host.memory.huge_pages_total.unwrap_or(0) > 0
    }

    /// Whether io_uring can work for PostgreSQL here, and if not every cause.
    pub fn uring_causes(&self) -> Vec<String> {
        let f = self.facts;
        let mut causes = Vec::new();
        if self.pg < 18 {
            causes.push(format!("PostgreSQL {} has no io_method", self.pg));
            return causes;
        }
        if let Some(cause) = &f.host.kernel.io_uring.refused_cause {
            causes.push(cause.clone());
        } else if let Some(Err(e)) = &f.probes.io_uring_setup {
            causes.push(format!("io_uring_setup failed: {e}"));
        }
        if let Some(bin) = &f.pg_bin {
            if bin.liburing == Some(false) {
                causes.push(format!(
                    "{} was built without liburing ({})",
                    bin.postgres.display(),
                    bin.how
                ));
            }
        }
        if let Some((need, have)) = self.memlock_short() {
            causes.push(format!(
                "RLIMIT_MEMLOCK {} is below the {} the rings need",
                human_bytes(have),
                human_bytes(need)
            ));
        }
        causes
    }

    /// Whether io_uring rings are charged to RLIMIT_MEMLOCK on this kernel: before 5.12
    /// (before rings moved to memcg accounting) and again from 6.14.
    fn memlock_charged(&self) -> Option<bool> {
        self.facts
            .host
            .kernel
            .version
            .map(|v| !((5, 12)..(6, 14)).contains(&v))
    }

    /// Bytes of the rings PostgreSQL creates, all in the postmaster: one per process, each
    /// an SQ of 64-byte entries and a CQ of twice as many 16-byte entries plus the index
    /// array, page-rounded.
    pub fn ring_bytes(&self) -> u64 {
        let entries = self
            .setting("io_max_concurrency")
            .and_then(|s| s.value.parse::<i64>().ok())
            .filter(|v| *v > 0)
            .map(|v| (v as u64).next_power_of_two())
            .unwrap_or(DEFAULT_URING_ENTRIES);
        let sq = (entries * 64).div_ceil(PAGE) * PAGE;
        let cq = (320 + 2 * entries * 16 + entries * 4).div_ceil(PAGE) * PAGE;
        self.processes().0 * (sq + cq)
    }

    /// `(needed, soft limit)` when the memlock limit is too low for the rings.
    fn memlock_short(&self) -> Option<(u64, u64)> {
        use crate::host::RlimitValue;
        if self.memlock_charged() != Some(true) {
            return None;
        }
        let soft = self.facts.host.limits.memlock_bytes?.soft;
        let need = self.ring_bytes();
        match soft {
            RlimitValue::Limited(have) if have < need => Some((need, have)),
            _ => None,
        }
    }

    /// Whether the configuration asks for io_uring.
    fn wants_uring(&self) -> bool {
        self.setting("io_method")
            .is_some_and(|s| s.value.trim_matches('\'') == "io_uring")
    }

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
                "guessed: worker is PostgreSQL's default and needs nothing from the kernel; io_uring is usable here — run with --measure to see whether it is faster on this disk".into(),
            )
        } else {
            (
                "worker".into(),
                format!("io_uring cannot be used here: {}", causes.join("; ")),
            )
        }
    }

    fn guess_note(&self) -> String {
        let rot = match self.rotational {
            Some(true) => "rotational=1",
            Some(false) => "rotational=0",
            None => "rotational=unknown, SSD assumed",
        };
        format!("guessed ({rot}); run with --measure")
    }

    /// `effective_io_concurrency` and its reason.
    pub fn eic(&self) -> (u32, String) {
        if let Some(m) = self.measured() {
            let r = &m.recommendations.effective_io_concurrency;
            return (measured_count(r.value), format!("measured: {}", r.reason));
        }
        match self.rotational {
            // PostgreSQL docs (effective_io_concurrency): for magnetic drives, the number of
            // separate drives; pgtune: HDD 2.
            Some(true) => (2, self.guess_note()),
            // PostgreSQL docs: SSDs "can often process many concurrent requests, so the best
            // value might be in the hundreds"; pgtune: SSD 200.
            _ => (200, self.guess_note()),
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

    /// `random_page_cost` and its reason.
    pub fn random_page_cost(&self) -> (f64, String) {
        if let Some(m) = self.measured() {
            let r = &m.recommendations.random_page_cost;
            return (r.value, format!("measured: {}", r.reason));
        }
        match self.rotational {
            Some(true) => (4.0, self.guess_note()),
            _ => (1.1, self.guess_note()),
        }
    }

    /// `io_workers` (PostgreSQL 18) and its reason.
    pub fn io_workers(&self) -> (u32, String) {
        if let Some(m) = self.measured() {
            let r = &m.for_postgresql(self.uring_causes().is_empty()).io_workers;
            return (measured_count(r.value), format!("measured: {}", r.reason));
        }
        (
            self.cpus.div_ceil(4).clamp(3, 32),
            format!(
                "a quarter of the {} effective CPUs, at least PostgreSQL's default 3, at most 32 — run with --measure",
                self.cpus
            ),
        )
    }
}

/// A measured count as the rules' `u32`: the measurement's values are small (queue depths
/// up to 64, workers up to 32), so saturating is only a guard.
fn measured_count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// pgtune's connection count per workload, used when neither `--max-connections` nor the
/// configuration gives one.
pub fn workload_connections(w: Workload) -> u32 {
    match w {
        Workload::Web => 200,
        Workload::Oltp => 300,
        Workload::Dw => 40,
        Workload::Desktop => 20,
        Workload::Mixed => 100,
    }
}

/// pgtune's `min_wal_size` / `max_wal_size` per workload.
pub fn wal_sizes(w: Workload) -> (u64, u64) {
    match w {
        Workload::Web | Workload::Mixed => (GB, 4 * GB),
        Workload::Oltp => (2 * GB, 8 * GB),
        Workload::Dw => (4 * GB, 16 * GB),
        Workload::Desktop => (100 * MB, 2 * GB),
    }
}

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
        "effective_io_concurrency" if pg >= 18 => "16",
        "effective_io_concurrency" => "1",
        "maintenance_io_concurrency" if pg >= 18 => "16",
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

// ---- instance setting helpers ----

/// A size setting: OK within [`SIZE_TOLERANCE`].
fn size_setting(ctx: &Ctx, name: &str, base: u64, rec_bytes: u64, reason: String) -> Verdict {
    let (found, source) = ctx.current(name);
    let found_bytes = parse_size(&found, base);
    let ok = found_bytes.is_some_and(|f| {
        let ratio = f as f64 / rec_bytes.max(1) as f64;
        (1.0 / SIZE_TOLERANCE..=SIZE_TOLERANCE).contains(&ratio)
    });
    setting_verdict(name, ok, found, source, format_size(rec_bytes), reason)
}

/// A number setting: OK when equal, or within `tolerance` (a factor) of it.
fn number_setting(
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
            (1.0 / tolerance - 1e-9..=tolerance + 1e-9).contains(&ratio)
        }
    });
    setting_verdict(name, ok, found, source, shown, reason)
}

/// A word setting (`on`, `worker`).
fn word_setting(ctx: &Ctx, name: &str, rec: &str, reason: String) -> Verdict {
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

fn sysfs_source(path: &str) -> String {
    path.to_string()
}

fn vm(name: &str) -> String {
    format!("/proc/sys/vm/{name}")
}

/// Host settings apply to the whole machine; inside a container they are the host's.
fn on_host(ctx: &Ctx) -> &'static str {
    if ctx.facts.host.cgroup.memory_max_bytes.is_some()
        || ctx.facts.host.cgroup.cpu_quota_cpus.is_some()
    {
        " (on the host: a container shares the host's kernel settings)"
    } else {
        ""
    }
}

// ---- the rules ----

fn r_effective(ctx: &Ctx) -> Option<Verdict> {
    let status = if ctx.ram == 0 {
        Status::Bad
    } else {
        Status::Ok
    };
    Some(
        Verdict::new(
            status,
            format!(
                "{} RAM, {} CPUs",
                if ctx.ram == 0 {
                    "unknown".to_string()
                } else {
                    human_bytes(ctx.ram)
                },
                ctx.cpus
            ),
            format!("RAM: {}; CPUs: {}", ctx.ram_limit, ctx.cpu_limit),
        )
        .rec("every size below is computed from these")
        .why("a container may use only what its cgroup allows, not the host's MemTotal and CPUs")
        .fix(if ctx.ram == 0 {
            "make /proc/meminfo readable (or pass --sysroot to a complete capture)"
        } else {
            "none"
        }),
    )
}

fn r_overcommit(ctx: &Ctx) -> Option<Verdict> {
    let m = &ctx.facts.host.memory;
    let mode = m.overcommit_memory?;
    let total = m.mem_total_bytes.unwrap_or(0);
    let swap = m.swap_total_bytes.unwrap_or(0);
    let (hp_size, _) = ctx.hugepage_size();
    let hp_now = m.huge_pages_total.unwrap_or(0) * hp_size;
    let hp_after = if ctx.huge_pages_worth() {
        ctx.huge_pages_needed() * hp_size
    } else {
        hp_now
    };
    let committed = m.committed_as_bytes.unwrap_or(0);
    // CommitLimit = SwapTotal + (MemTotal − huge pages) × overcommit_ratio / 100
    // (Documentation/mm/overcommit-accounting.rst): reserved huge pages leave the pool.
    let limit = |ratio: u64, huge: u64| swap + total.saturating_sub(huge) / 100 * ratio;
    // More than OVERCOMMIT_RATIO if what is committed now would not fit.
    let mut ratio = OVERCOMMIT_RATIO;
    while ratio < 100 && limit(ratio, hp_after) < committed {
        ratio += 5;
    }
    // Strict accounting cannot hold what is committed already: it would fail allocations
    // at once, so it needs swap first.
    let needs_swap = limit(ratio, hp_after) < committed;
    let arithmetic = format!(
        "CommitLimit = {} swap + ({} RAM − {} huge pages) × {ratio}% = {}",
        human_bytes(swap),
        human_bytes(total),
        human_bytes(hp_after),
        human_bytes(limit(ratio, hp_after))
    );
    let (status, found) = match mode {
        2 => {
            let cur_ratio = m.overcommit_ratio.unwrap_or(50);
            let cur = m
                .commit_limit_bytes
                .unwrap_or_else(|| limit(cur_ratio, hp_now));
            let found = format!(
                "2, ratio {cur_ratio}: CommitLimit {} (= {} swap + ({} − {} huge pages) × {cur_ratio}%), Committed_AS {}",
                human_bytes(cur),
                human_bytes(swap),
                human_bytes(total),
                human_bytes(hp_now),
                human_bytes(committed)
            );
            let status = if committed > cur {
                Status::Bad
            } else if limit(cur_ratio, hp_after) < committed {
                Status::Warn
            } else {
                Status::Ok
            };
            (status, found)
        }
        other => (
            Status::Warn,
            format!(
                "{other} ({}; swap {}, Committed_AS {}, CommitLimit {} not enforced)",
                if other == 0 { "heuristic" } else { "always" },
                human_bytes(swap),
                human_bytes(committed),
                human_bytes(m.commit_limit_bytes.unwrap_or(0))
            ),
        ),
    };
    let rec = if needs_swap {
        format!(
            "first add at least {} of swap: Committed_AS {} exceeds even {arithmetic}; then 2",
            human_bytes(committed - limit(ratio, hp_after)),
            human_bytes(committed)
        )
    } else {
        format!("2 with vm.overcommit_ratio = {ratio} ({arithmetic})")
    };
    let mut v = Verdict::new(status, found, vm("overcommit_memory"))
        .rec(rec)
        .why(if status == Status::Bad {
            "more memory is committed than the commit limit allows, so new allocations (a backend's work_mem) fail now".to_string()
        } else {
            "without strict accounting the OOM killer, not an allocation error, answers memory pressure, and it may kill the postmaster's children or the postmaster itself".to_string()
        })
        .fix(if needs_swap {
            format!(
                "add swap (fallocate -l SIZE /swapfile; mkswap /swapfile; swapon /swapfile), then sysctl -w vm.overcommit_memory=2 vm.overcommit_ratio={ratio}{}",
                on_host(ctx)
            )
        } else {
            format!(
                "sysctl -w vm.overcommit_memory=2 vm.overcommit_ratio={ratio}{}",
                on_host(ctx)
            )
        });
    if status != Status::Ok && !needs_swap {
        v = v
            .sysctl("vm.overcommit_memory", 2)
            .sysctl("vm.overcommit_ratio", ratio);
    }
    Some(v)
}

fn r_swappiness(ctx: &Ctx) -> Option<Verdict> {
    let m = &ctx.facts.host.memory;
    let s = m.swappiness?;
    let no_swap = m.swap_total_bytes == Some(0);
    let status = if s <= MAX_SWAPPINESS || no_swap {
        Status::Ok
    } else {
        Status::Warn
    };
    let mut v = Verdict::new(
        status,
        if no_swap {
            format!("{s} (no swap configured)")
        } else {
            s.to_string()
        },
        vm("swappiness"),
    )
    .rec(format!("{MAX_SWAPPINESS}"))
    .why("a high swappiness swaps out idle backends' and shared memory to keep page cache, and a swapped-in buffer costs a disk read on the query path")
    .fix(format!("sysctl -w vm.swappiness={MAX_SWAPPINESS}{}", on_host(ctx)));
    if status != Status::Ok {
        v = v.sysctl("vm.swappiness", MAX_SWAPPINESS);
    }
    Some(v)
}

fn r_dirty(ctx: &Ctx) -> Option<Verdict> {
    let m = &ctx.facts.host.memory;
    let total = m.mem_total_bytes?;
    let rotational = ctx.rotational == Some(true);
    // A spinning disk absorbs ~100 MB/s; an SSD several times that.
    let (bg_rec, dirty_rec) = if rotational {
        (64 * MB, 256 * MB)
    } else {
        (256 * MB, GB)
    };
    let bg_bytes = m.dirty_background_bytes.unwrap_or(0);
    let dirty_bytes = m.dirty_bytes.unwrap_or(0);
    let bg_ratio = m.dirty_background_ratio.unwrap_or(10);
    let ratio = m.dirty_ratio.unwrap_or(20);
    let (found, effective_bg) = if bg_bytes > 0 {
        (
            format!(
                "dirty_background_bytes {}, dirty_bytes {}",
                human_bytes(bg_bytes),
                human_bytes(dirty_bytes)
            ),
            bg_bytes,
        )
    } else {
        let eff = total / 100 * bg_ratio;
        (
            format!(
                "dirty_background_ratio {bg_ratio}%, dirty_ratio {ratio}% of {} = {} / {}",
                human_bytes(total),
                human_bytes(eff),
                human_bytes(total / 100 * ratio)
            ),
            eff,
        )
    };
    let status = if effective_bg > 2 * bg_rec {
        Status::Warn
    } else {
        Status::Ok
    };
    let mut v = Verdict::new(status, found, vm("dirty_background_ratio"))
        .rec(format!(
            "vm.dirty_background_bytes = {bg_rec}, vm.dirty_bytes = {dirty_rec} ({} / {})",
            human_bytes(bg_rec),
            human_bytes(dirty_rec)
        ))
        .why("on large RAM a percentage lets gigabytes of dirty pages pile up, and the checkpoint's fsync then stalls every writer while they drain")
        .fix(format!(
            "sysctl -w vm.dirty_background_bytes={bg_rec} vm.dirty_bytes={dirty_rec}{}",
            on_host(ctx)
        ));
    if status != Status::Ok {
        v = v
            .sysctl("vm.dirty_background_bytes", bg_rec)
            .sysctl("vm.dirty_bytes", dirty_rec);
    }
    Some(v)
}

fn r_thp(ctx: &Ctx) -> Option<Verdict> {
    let thp = &ctx.facts.host.kernel.thp;
    let enabled = thp.enabled.as_deref()?;
    let status = if enabled == "always" {
        Status::Warn
    } else {
        Status::Ok
    };
    Some(
        Verdict::new(
            status,
            format!(
                "enabled [{enabled}], defrag [{}]",
                thp.defrag.as_deref().unwrap_or("?")
            ),
            "/sys/kernel/mm/transparent_hugepage/enabled",
        )
        .rec("never (or madvise)")
        .why("transparent huge pages in 'always' mode stall allocations on compaction and are known to degrade PostgreSQL; explicit huge_pages do the useful part")
        .fix(format!(
            "echo never > /sys/kernel/mm/transparent_hugepage/enabled; keep it with transparent_hugepage=never on the kernel command line{}",
            on_host(ctx)
        )),
    )
}

fn r_hugepages(ctx: &Ctx) -> Option<Verdict> {
    if ctx.ram == 0 {
        return None;
    }
    let m = &ctx.facts.host.memory;
    let total = m.huge_pages_total.unwrap_or(0);
    let (size, assumed) = ctx.hugepage_size();
    let need = ctx.huge_pages_needed();
    let worth = ctx.huge_pages_worth();
    let status = if !worth || total >= need {
        Status::Ok
    } else {
        Status::Warn
    };
    let found = format!(
        "{total} reserved ({} free, {} reserved for mappings) of {}{assumed}",
        m.huge_pages_free.unwrap_or(0),
        m.huge_pages_rsvd.unwrap_or(0),
        human_bytes(size)
    );
    let rec = if worth {
        format!(
            "{need} ({} shared_buffers + {} other shared memory, +10%, in {} pages)",
            human_bytes(ctx.shared_buffers()),
            human_bytes(ctx.shared_memory() - ctx.shared_buffers()),
            human_bytes(size)
        )
    } else {
        format!(
            "0 (shared memory {} is below {}: not worth reserving)",
            human_bytes(ctx.shared_memory()),
            human_bytes(HUGE_PAGES_WORTH_BYTES)
        )
    };
    let mut v = Verdict::new(status, found, "/proc/meminfo HugePages_Total")
        .rec(rec)
        .why("shared_buffers in huge pages cuts page-table memory per backend and TLB misses, but only if the pages are reserved before PostgreSQL starts")
        .fix(format!(
            "sysctl -w vm.nr_hugepages={need}{}; PostgreSQL tells the exact count: postgres -D PGDATA -C shared_memory_size_in_huge_pages",
            on_host(ctx)
        ));
    if status != Status::Ok {
        v = v.sysctl("vm.nr_hugepages", need);
    }
    Some(v)
}

fn r_zone_reclaim(ctx: &Ctx) -> Option<Verdict> {
    let mode = ctx.facts.host.memory.zone_reclaim_mode?;
    let nodes = ctx.facts.host.kernel.numa.nodes.len();
    let status = if mode == 0 || nodes < 2 {
        Status::Ok
    } else {
        Status::Warn
    };
    let mut v = Verdict::new(
        status,
        format!("{mode} ({nodes} NUMA node{})", if nodes == 1 { "" } else { "s" }),
        vm("zone_reclaim_mode"),
    )
    .rec("0")
    .why("zone reclaim drops page cache on the local node rather than use another node's free memory, so a database's cached data is thrown away")
    .fix(format!("sysctl -w vm.zone_reclaim_mode=0{}", on_host(ctx)));
    if status != Status::Ok {
        v = v.sysctl("vm.zone_reclaim_mode", 0);
    }
    Some(v)
}

fn r_autogroup(ctx: &Ctx) -> Option<Verdict> {
    let on = ctx.facts.host.kernel.sched_autogroup_enabled?;
    let status = if on == 0 { Status::Ok } else { Status::Warn };
    let mut v = Verdict::new(
        status,
        on.to_string(),
        "/proc/sys/kernel/sched_autogroup_enabled",
    )
    .rec("0")
    .why("autogroup shares CPU per session, so all of PostgreSQL (one session) competes as one task against a single shell job")
    .fix(format!("sysctl -w kernel.sched_autogroup_enabled=0{}", on_host(ctx)));
    if status != Status::Ok {
        v = v.sysctl("kernel.sched_autogroup_enabled", 0);
    }
    Some(v)
}

fn r_migration_cost(ctx: &Ctx) -> Option<Verdict> {
    let k = &ctx.facts.host.kernel;
    let ns = k.sched_migration_cost_ns?;
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
                on_host(ctx)
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

fn r_clock(ctx: &Ctx) -> Option<Verdict> {
    let k = &ctx.facts.host.kernel;
    let cost = ctx.facts.probes.clock_read_ns;
    if k.clocksource.is_none() && cost.is_none() {
        return None;
    }
    let src = k.clocksource.clone().unwrap_or_else(|| "?".into());
    let slow_source = matches!(src.as_str(), "hpet" | "acpi_pm" | "jiffies");
    let slow = cost.is_some_and(|c| c > MAX_CLOCK_READ_NS) || slow_source;
    let has_tsc = k.available_clocksources.iter().any(|c| c == "tsc");
    Some(
        Verdict::new(
            if slow { Status::Warn } else { Status::Ok },
            match cost {
                Some(c) => format!("{src}, {c:.0} ns per read (measured like pg_test_timing)"),
                None => format!("{src} (read cost not measured)"),
            },
            sysfs_source(crate::host::kernel::CURRENT_CLOCKSOURCE),
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

fn storage<'a>(ctx: &Ctx<'a>) -> Option<&'a crate::host::StorageFacts> {
    ctx.facts.host.storage.as_ref()
}

fn r_device(ctx: &Ctx) -> Option<Verdict> {
    let Some(s) = storage(ctx) else {
        return Some(
            Verdict::new(Status::Ok, "not checked", "no data directory")
                .rec("run with --pgdata DIR to check PGDATA's file system and disks")
                .why("the storage checks need to know which file system holds the data")
                .fix("pageio advise --pgdata DIR"),
        );
    };
    let mount = s.mount.as_ref();
    let disks: Vec<String> = s
        .disks
        .iter()
        .map(|d| {
            format!(
                "{} ({})",
                d.partition_of.clone().unwrap_or_else(|| d.name.clone()),
                match d.rotational {
                    Some(true) => "rotational",
                    Some(false) => "non-rotational",
                    None => "rotational unknown",
                }
            )
        })
        .collect();
    let via = s
        .device
        .as_ref()
        .map(|d| {
            let mut v = d.name.clone();
            if let Some(n) = &d.dm_name {
                v.push_str(&format!(" {n}"));
            }
            if let Some(l) = &d.md_level {
                v.push_str(&format!(" {l}"));
            }
            v
        })
        .unwrap_or_else(|| "no block device".into());
    Some(
        Verdict::new(
            Status::Ok,
            format!(
                "{} on {} {} via {via}; disks: {}",
                s.path.display(),
                mount.map(|m| m.fs_type.as_str()).unwrap_or("?"),
                mount
                    .map(|m| m.mount_point.display().to_string())
                    .unwrap_or_default(),
                if disks.is_empty() {
                    "none".into()
                } else {
                    disks.join(", ")
                }
            ),
            crate::host::storage::MOUNTINFO,
        )
        .rec("—")
        .why("the device type decides the I/O scheduler, effective_io_concurrency and random_page_cost below")
        .fix("none"),
    )
}

fn r_scheduler(ctx: &Ctx) -> Option<Verdict> {
    let s = storage(ctx)?;
    let disks: Vec<_> = s.disks.iter().filter(|d| d.scheduler.is_some()).collect();
    if disks.is_empty() {
        return None;
    }
    let mut bad = Vec::new();
    let mut found = Vec::new();
    for d in &disks {
        let name = d.partition_of.clone().unwrap_or_else(|| d.name.clone());
        let sched = d.scheduler.clone().unwrap_or_default();
        found.push(format!("{name} [{sched}]"));
        // Kernel Documentation/block: mq-deadline bounds latency and merges for seeking
        // disks; BFQ targets interactive desktops at a high per-request CPU cost; fast
        // devices need no scheduler ("none").
        let want = if d.rotational == Some(true) {
            "mq-deadline"
        } else {
            "none"
        };
        let fine = if d.rotational == Some(true) {
            sched == "mq-deadline"
        } else {
            sched == "none" || sched == "mq-deadline"
        };
        if !fine {
            bad.push((name, want));
        }
    }
    let status = if bad.is_empty() {
        Status::Ok
    } else {
        Status::Warn
    };
    let fix = if bad.is_empty() {
        "none".to_string()
    } else {
        bad.iter()
            .map(|(n, w)| {
                format!(
                    "echo {w} > /sys/block/{n}/queue/scheduler; keep it with ACTION==\"add|change\", KERNEL==\"{n}\", ATTR{{queue/scheduler}}=\"{w}\" in /etc/udev/rules.d/60-io-scheduler.rules"
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    Some(
        Verdict::new(status, found.join(", "), "/sys/block/*/queue/scheduler")
            .rec("mq-deadline on rotational disks, none (or mq-deadline) on SSD/NVMe")
            .why("BFQ and kyber trade throughput for desktop fairness, and a seeking disk without a scheduler loses request merging")
            .fix(fix),
    )
}

fn r_read_ahead(ctx: &Ctx) -> Option<Verdict> {
    let s = storage(ctx)?;
    let dev = s.device.as_ref()?;
    let kb = dev.read_ahead_kb?;
    let status = if ctx.rotational == Some(true) && kb < MIN_ROTATIONAL_READ_AHEAD_KB {
        Status::Warn
    } else {
        Status::Ok
    };
    let found = format!("{kb} kB on {}", dev.name);
    let source = format!("/sys/block/{}/queue/read_ahead_kb", dev.name);
    let rec = if ctx.rotational == Some(true) {
        format!("at least {MIN_ROTATIONAL_READ_AHEAD_KB} kB (rotational; 4096 kB if lower)")
    } else {
        format!("{kb} kB (as is: PostgreSQL 18 reads ahead itself)")
    };
    let fix = if status == Status::Ok {
        "none".to_string()
    } else {
        format!(
            "blockdev --setra 8192 /dev/{} (4096 kB in 512-byte sectors); keep it in a udev rule",
            dev.name
        )
    };
    let why = "sequential scans on a seeking disk need large kernel read-ahead between \
               PostgreSQL's own combined reads";
    Some(
        Verdict::new(status, found, source)
            .rec(rec)
            .why(why)
            .fix(fix),
    )
}

fn r_noatime(ctx: &Ctx) -> Option<Verdict> {
    let mount = storage(ctx)?.mount.as_ref()?;
    let status = if mount.noatime() {
        Status::Ok
    } else {
        Status::Warn
    };
    Some(
        Verdict::new(
            status,
            format!("{} {} ({})", mount.fs_type, mount.mount_point.display(), mount.mount_options.join(",")),
            crate::host::storage::MOUNTINFO,
        )
        .rec("noatime")
        .why("relation files are written all the time, so with relatime almost every first read after a write also writes the inode's access time")
        .fix(format!(
            "mount -o remount,noatime {}; add noatime to its options in /etc/fstab",
            mount.mount_point.display()
        )),
    )
}

fn r_barriers(ctx: &Ctx) -> Option<Verdict> {
    let mount = storage(ctx)?.mount.as_ref()?;
    let unsafe_opts: Vec<&str> = ["nobarrier", "barrier=0", "data=writeback"]
        .into_iter()
        .filter(|o| mount.has_option(o))
        .collect();
    let status = if unsafe_opts.is_empty() {
        Status::Ok
    } else {
        Status::Bad
    };
    Some(
        Verdict::new(
            status,
            if unsafe_opts.is_empty() {
                "barriers on".to_string()
            } else {
                unsafe_opts.join(",")
            },
            crate::host::storage::MOUNTINFO,
        )
        .rec("write barriers on (no nobarrier, data=ordered)")
        .why("without barriers a power loss can reorder the WAL's flush past the data it protects, which PostgreSQL cannot repair (PostgreSQL docs, Reliability)")
        .fix(if unsafe_opts.is_empty() {
            "none".to_string()
        } else {
            format!(
                "remove {} from {}'s options in /etc/fstab and remount",
                unsafe_opts.join(","),
                mount.mount_point.display()
            )
        }),
    )
}

fn r_direct_io(ctx: &Ctx) -> Option<Verdict> {
    let probe = ctx.facts.probes.direct_io.as_ref()?;
    let (status, found) = match probe {
        Ok(Some(a)) => (
            Status::Ok,
            format!(
                "supported, memory alignment {} B, offset alignment {} B{}",
                a.mem_align_bytes,
                a.offset_align_bytes,
                if a.from_statx {
                    ""
                } else {
                    " (assumed; statx does not report it)"
                }
            ),
        ),
        Ok(None) => (
            Status::Warn,
            "not supported by this file system".to_string(),
        ),
        Err(e) => (Status::Warn, format!("not probed: {e}")),
    };
    let source = "open(O_DIRECT) of PG_VERSION, else statx(STATX_DIOALIGN), on the data directory";
    let why = "PostgreSQL's debug_io_direct and pageio's --direct-io need O_DIRECT; without it \
               every read goes through the page cache";
    let fix = if status == Status::Ok {
        "none"
    } else {
        "put PGDATA on ext4 or xfs (tmpfs and some network file systems refuse O_DIRECT)"
    };
    Some(
        Verdict::new(status, found, source)
            .rec("supported")
            .why(why)
            .fix(fix),
    )
}

fn pg18_uring(ctx: &Ctx) -> bool {
    ctx.pg >= 18
}

/// The status of an io_uring problem: BAD when the configuration asks for io_uring (the
/// server will not start), else WARN.
fn uring_problem(ctx: &Ctx) -> Status {
    if ctx.wants_uring() {
        Status::Bad
    } else {
        Status::Warn
    }
}

fn r_uring_sysctl(ctx: &Ctx) -> Option<Verdict> {
    if !pg18_uring(ctx) {
        return None;
    }
    let u = &ctx.facts.host.kernel.io_uring;
    let disabled = u.disabled?;
    let status = if disabled == 0 {
        Status::Ok
    } else {
        uring_problem(ctx)
    };
    let found = match disabled {
        1 => format!(
            "1 (only group {} may create rings)",
            u.group.map(|g| g.to_string()).unwrap_or_else(|| "?".into())
        ),
        d => d.to_string(),
    };
    let mut v = Verdict::new(status, found, "/proc/sys/kernel/io_uring_disabled")
        .rec("0 (or 1 with kernel.io_uring_group = the postgres user's group)")
        .why(
            u.refused_cause
                .clone()
                .unwrap_or_else(|| "io_uring is allowed for every process".into()),
        )
        .fix(u.refused_fix.clone().unwrap_or_else(|| "none".into()));
    if status != Status::Ok {
        v = v.sysctl("kernel.io_uring_disabled", 0);
    }
    Some(v)
}

fn r_seccomp(ctx: &Ctx) -> Option<Verdict> {
    if !pg18_uring(ctx) {
        return None;
    }
    let sc = &ctx.facts.seccomp;
    let probe = ctx.facts.probes.io_uring_setup.as_ref();
    let sysctl_off = ctx.facts.host.kernel.io_uring.disabled.unwrap_or(0) != 0;
    let refused = sc.mode == Some(2) && matches!(probe, Some(Err(_))) && !sysctl_off;
    let status = if refused {
        uring_problem(ctx)
    } else {
        Status::Ok
    };
    let probe_text = match probe {
        None => "io_uring_setup not probed".to_string(),
        Some(Ok(())) => "io_uring_setup succeeds".to_string(),
        Some(Err(e)) => format!("io_uring_setup fails: {e}"),
    };
    Some(
        Verdict::new(
            status,
            format!("Seccomp: {} ({}); {probe_text}", sc.mode.map(|m| m.to_string()).unwrap_or_else(|| "-".into()), sc.mode_name()),
            format!("{} and a live io_uring_setup", crate::host::process::PROC_SELF_STATUS),
        )
        .rec("no filter refusing io_uring_setup, io_uring_enter, io_uring_register")
        .why(if refused {
            "a seccomp filter (Docker's and containerd's default profiles block io_uring) refuses io_uring_setup, so PostgreSQL with io_method = io_uring fails at start"
        } else {
            "nothing filters the io_uring system calls"
        })
        .fix(if refused {
            "run the container with a seccomp profile that allows io_uring_setup, io_uring_enter and io_uring_register (docker run --security-opt seccomp=PROFILE.json; Kubernetes securityContext.seccompProfile), or set io_method = worker"
        } else {
            "none"
        }),
    )
}

fn r_liburing(ctx: &Ctx) -> Option<Verdict> {
    if !pg18_uring(ctx) {
        return None;
    }
    let Some(bin) = &ctx.facts.pg_bin else {
        return Some(
            Verdict::new(
                Status::Ok,
                "not checked: no postgres binary in --pg-bin or PATH",
                "PATH",
            )
            .rec("built --with-liburing (for io_method = io_uring)")
            .why("PostgreSQL accepts io_method = io_uring only when built with liburing")
            .fix("pageio advise --pg-bin DIR (the directory holding postgres)"),
        );
    };
    let status = match bin.liburing {
        Some(false) => uring_problem(ctx),
        _ => Status::Ok,
    };
    Some(
        Verdict::new(
            status,
            match bin.liburing {
                Some(true) => "linked with liburing".to_string(),
                Some(false) => "built without liburing".to_string(),
                None => "unknown".to_string(),
            },
            bin.how.clone(),
        )
        .rec("built --with-liburing (for io_method = io_uring)")
        .why("PostgreSQL accepts io_method = io_uring only when built with liburing, and refuses to start otherwise")
        .fix(if status == Status::Ok { "none" } else { "install a PostgreSQL build configured --with-liburing (meson -Dliburing=enabled), or keep io_method = worker" }),
    )
}

fn r_memlock(ctx: &Ctx) -> Option<Verdict> {
    if !pg18_uring(ctx) {
        return None;
    }
    let limit = ctx.facts.host.limits.memlock_bytes?;
    let need = ctx.ring_bytes();
    let (procs, arithmetic) = ctx.processes();
    let charged = ctx.memlock_charged();
    let short = ctx.memlock_short();
    let status = if short.is_some() {
        uring_problem(ctx)
    } else {
        Status::Ok
    };
    let show = |v: crate::host::RlimitValue| match v {
        crate::host::RlimitValue::Unlimited => "unlimited".to_string(),
        crate::host::RlimitValue::Limited(b) => human_bytes(b),
    };
    Some(
        Verdict::new(
            status,
            format!("soft {}, hard {}", show(limit.soft), show(limit.hard)),
            "/proc/self/limits Max locked memory (this process; the server's comes from its service unit)",
        )
        .rec(format!(
            "at least {} ({arithmetic}; {} per ring){}",
            human_bytes(need),
            human_bytes(need / procs.max(1)),
            match charged {
                Some(true) => ", charged to RLIMIT_MEMLOCK on this kernel",
                Some(false) => ", not charged on this kernel (5.12–6.13 charge rings to the memory cgroup)",
                None => "",
            }
        ))
        .why("the postmaster creates every backend's io_uring before forking, and where rings count against RLIMIT_MEMLOCK a low limit makes io_uring_setup fail with ENOMEM at start")
        .fix(if status == Status::Ok {
            "none".to_string()
        } else {
            format!(
                "LimitMEMLOCK={} in the PostgreSQL service (systemctl edit postgresql), or ulimit -l {} before pg_ctl start",
                need.div_ceil(MB) * MB,
                need.div_ceil(KB)
            )
        }),
    )
}

fn r_nofile(ctx: &Ctx) -> Option<Verdict> {
    use crate::host::RlimitValue;
    let limit = ctx.facts.host.limits.nofile?;
    let (procs, arithmetic) = ctx.processes();
    // From PostgreSQL 18 one descriptor per ring (all held by the postmaster) plus its own
    // file budget; before, the file budget alone.
    let uring = ctx.pg >= 18;
    let need = if uring {
        procs + MAX_FILES_PER_PROCESS
    } else {
        MAX_FILES_PER_PROCESS
    };
    let hard_ok = match limit.hard {
        RlimitValue::Unlimited => true,
        RlimitValue::Limited(h) => h >= need,
    };
    let status = if hard_ok {
        Status::Ok
    } else if ctx.wants_uring() && ctx.pg >= 18 {
        Status::Bad
    } else {
        Status::Warn
    };
    let show = |v: RlimitValue| match v {
        RlimitValue::Unlimited => "unlimited".to_string(),
        RlimitValue::Limited(n) => n.to_string(),
    };
    Some(
        Verdict::new(
            status,
            format!("soft {}, hard {}", show(limit.soft), show(limit.hard)),
            "/proc/self/limits Max open files (this process; the server's comes from its service unit)",
        )
        .rec(if uring {
            format!(
                "hard limit ≥ {need} ({arithmetic}, one descriptor each for its io_uring, + max_files_per_process {MAX_FILES_PER_PROCESS})"
            )
        } else {
            format!("hard limit ≥ {need} (max_files_per_process)")
        })
        .why(if uring {
            "with io_method = io_uring the postmaster holds one ring descriptor per possible process (PostgreSQL 18 raises its soft limit to the hard one for them), on top of its own files"
        } else {
            "each backend may keep max_files_per_process files open"
        })
        .fix(if hard_ok {
            "none".to_string()
        } else {
            format!("LimitNOFILE={need} in the PostgreSQL service (systemctl edit postgresql), or ulimit -n {need}")
        }),
    )
}

fn r_uring(ctx: &Ctx) -> Option<Verdict> {
    let causes = ctx.uring_causes();
    if ctx.pg < 18 {
        return Some(
            Verdict::new(
                Status::Ok,
                format!("not used by PostgreSQL {}", ctx.pg),
                "--pg-version",
            )
            .rec("—")
            .why("asynchronous I/O and io_method arrived in PostgreSQL 18")
            .fix("none"),
        );
    }
    let status = if causes.is_empty() {
        Status::Ok
    } else {
        uring_problem(ctx)
    };
    Some(
        Verdict::new(
            status,
            if causes.is_empty() {
                "usable".to_string()
            } else {
                format!("not usable: {}", causes.join("; "))
            },
            "the io_uring checks above",
        )
        .rec(if causes.is_empty() {
            "io_method = io_uring is possible"
        } else {
            "io_method = worker until the causes are fixed"
        })
        .why(if status == Status::Bad {
            "postgresql.conf sets io_method = io_uring, which fails at start here"
        } else if causes.is_empty() {
            "the kernel, the process's limits and the PostgreSQL build all allow io_uring"
        } else {
            "io_method = io_uring would fail here; worker works everywhere"
        })
        .fix(if causes.is_empty() {
            "none".to_string()
        } else {
            "fix the io_uring items above, or set io_method = worker".to_string()
        }),
    )
}

fn r_config_files(ctx: &Ctx) -> Option<Verdict> {
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

fn r_wal_storage(ctx: &Ctx) -> Option<Verdict> {
    let s = ctx.facts.wal_storage.as_ref()?;
    let mount = s.mount.as_ref();
    let unsafe_opts: Vec<&str> = ["nobarrier", "barrier=0", "data=writeback"]
        .into_iter()
        .filter(|o| mount.is_some_and(|m| m.has_option(o)))
        .collect();
    let disks: Vec<String> = s
        .disks
        .iter()
        .map(|d| {
            format!(
                "{}{}",
                d.partition_of.clone().unwrap_or_else(|| d.name.clone()),
                match d.rotational {
                    Some(true) => " (rotational)",
                    Some(false) => " (non-rotational)",
                    None => "",
                }
            )
        })
        .collect();
    let status = if unsafe_opts.is_empty() {
        Status::Ok
    } else {
        Status::Bad
    };
    Some(
        Verdict::new(
            status,
            format!(
                "{} on {} {} ({}); disks: {}",
                s.path.display(),
                mount.map(|m| m.fs_type.as_str()).unwrap_or("?"),
                mount.map(|m| m.mount_point.display().to_string()).unwrap_or_default(),
                mount.map(|m| m.mount_options.join(",")).unwrap_or_default(),
                if disks.is_empty() { "none".to_string() } else { disks.join(", ") }
            ),
            "pg_wal link, /proc/self/mountinfo",
        )
        .rec("write barriers on")
        .why(if unsafe_opts.is_empty() {
            "WAL on its own file system: its flushes do not queue behind data writes"
        } else {
            "the WAL's flush is what makes a commit durable; without barriers a power loss can lose committed transactions"
        })
        .fix(if unsafe_opts.is_empty() {
            "none".to_string()
        } else {
            format!("remove {} from the WAL file system's options in /etc/fstab and remount", unsafe_opts.join(","))
        }),
    )
}

fn r_shared_buffers(ctx: &Ctx) -> Option<Verdict> {
    if ctx.ram == 0 {
        return None;
    }
    let rec = ctx.shared_buffers();
    let mut v = size_setting(
        ctx,
        "shared_buffers",
        BLOCK,
        rec,
        format!(
            "{} of the {} effective RAM ({}); the kernel's page cache holds the rest",
            if ctx.workload() == Workload::Desktop {
                "1/16"
            } else {
                "25%"
            },
            human_bytes(ctx.ram),
            ctx.ram_limit
        ),
    );
    let (found, _) = ctx.current("shared_buffers");
    if parse_size(&found, BLOCK)
        .is_some_and(|f| f as f64 > ctx.ram as f64 * MAX_SHARED_BUFFERS_SHARE)
    {
        v.status = Some(Status::Bad);
        v.reason = format!(
            "{found} is more than 80% of the {} effective RAM ({}): the server will be killed or fail to allocate",
            human_bytes(ctx.ram),
            ctx.ram_limit
        );
    }
    Some(v)
}

fn r_huge_pages_setting(ctx: &Ctx) -> Option<Verdict> {
    if ctx.ram == 0 {
        return None;
    }
    let total = ctx.facts.host.memory.huge_pages_total.unwrap_or(0);
    let need = ctx.huge_pages_needed();
    let enough = total >= need;
    let rec = if enough { "on" } else { "try" };
    let mut v = word_setting(
        ctx,
        "huge_pages",
        rec,
        if enough {
            format!("{total} huge pages are reserved, enough for the {need} needed: 'on' fails loudly if they go missing")
        } else {
            format!("{total} huge pages reserved, {need} needed: 'try' falls back to normal pages instead of refusing to start")
        },
    );
    let (found, _) = ctx.current("huge_pages");
    if found.trim_matches('\'') == "on" && !enough {
        v.status = Some(Status::Bad);
        v.reason = format!(
            "huge_pages = on with {total} huge pages reserved of the {need} needed: the server will not start"
        );
    }
    Some(v)
}

fn r_effective_cache_size(ctx: &Ctx) -> Option<Verdict> {
    if ctx.ram == 0 {
        return None;
    }
    let rec = if ctx.workload() == Workload::Desktop {
        round_down(ctx.ram / 4, MB)
    } else {
        round_down(ctx.ram / 4 * 3, MB)
    };
    Some(size_setting(
        ctx,
        "effective_cache_size",
        BLOCK,
        rec,
        format!(
            "{} of the {} effective RAM: what shared_buffers and the page cache together can hold, for the planner's index costs",
            if ctx.workload() == Workload::Desktop { "25%" } else { "75%" },
            human_bytes(ctx.ram)
        ),
    ))
}

fn r_work_mem(ctx: &Ctx) -> Option<Verdict> {
    if ctx.ram == 0 {
        return None;
    }
    let rec = ctx.work_mem();
    Some(size_setting(
        ctx,
        "work_mem",
        KB,
        rec,
        format!(
            "({} RAM − {} shared_buffers) / (({} connections + {} worker processes) × 3){}, at least 4 MB: several sorts and hashes per query must fit at once",
            human_bytes(ctx.ram),
            human_bytes(ctx.shared_buffers()),
            ctx.max_connections.0,
            ctx.max_worker_processes(),
            match ctx.workload() {
                Workload::Dw | Workload::Mixed => " / 2",
                Workload::Desktop => " / 6",
                _ => "",
            }
        ),
    ))
}

fn r_maintenance_work_mem(ctx: &Ctx) -> Option<Verdict> {
    if ctx.ram == 0 {
        return None;
    }
    Some(size_setting(
        ctx,
        "maintenance_work_mem",
        KB,
        ctx.maintenance_work_mem(),
        format!(
            "RAM/{} capped at 2 GB: each autovacuum worker may take it",
            if ctx.workload() == Workload::Dw {
                8
            } else {
                16
            }
        ),
    ))
}

fn r_wal_buffers(ctx: &Ctx) -> Option<Verdict> {
    if ctx.ram == 0 {
        return None;
    }
    let rec = ctx.wal_buffers();
    let mut v = size_setting(
        ctx,
        "wal_buffers",
        BLOCK,
        rec,
        "shared_buffers/32 up to one 16 MB WAL segment — what PostgreSQL's automatic -1 picks, written out".into(),
    );
    if ctx.current("wal_buffers").0.trim_matches('\'') == "-1" {
        v.status = Some(Status::Ok);
    }
    Some(v)
}

fn r_min_wal(ctx: &Ctx) -> Option<Verdict> {
    Some(size_setting(
        ctx,
        "min_wal_size",
        MB,
        wal_sizes(ctx.workload()).0,
        format!(
            "pgtune's value for {}: WAL kept for reuse instead of recreated",
            ctx.workload().name()
        ),
    ))
}

fn r_max_wal(ctx: &Ctx) -> Option<Verdict> {
    Some(size_setting(
        ctx,
        "max_wal_size",
        MB,
        wal_sizes(ctx.workload()).1,
        format!(
            "pgtune's value for {}: checkpoints by time, not forced by WAL volume",
            ctx.workload().name()
        ),
    ))
}

fn r_checkpoint_target(ctx: &Ctx) -> Option<Verdict> {
    Some(number_setting(
        ctx,
        "checkpoint_completion_target",
        0.9,
        CHECKPOINT_TARGET_TOLERANCE,
        "0.9".into(),
        "spread checkpoint writes over 90% of the interval (PostgreSQL 14's default)".into(),
    ))
}

fn r_random_page_cost(ctx: &Ctx) -> Option<Verdict> {
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

fn r_eic(ctx: &Ctx) -> Option<Verdict> {
    let (rec, why) = ctx.eic();
    Some(number_setting(
        ctx,
        "effective_io_concurrency",
        rec as f64,
        CONCURRENCY_TOLERANCE,
        rec.to_string(),
        format!("I/Os a scan keeps in flight: {why}"),
    ))
}

fn r_mic(ctx: &Ctx) -> Option<Verdict> {
    let (rec, why) = ctx.mic();
    Some(number_setting(
        ctx,
        "maintenance_io_concurrency",
        rec as f64,
        CONCURRENCY_TOLERANCE,
        rec.to_string(),
        format!("I/Os VACUUM, index builds and recovery keep in flight: {why}"),
    ))
}

fn r_io_combine_limit(ctx: &Ctx) -> Option<Verdict> {
    if ctx.pg < 18 {
        return None;
    }
    Some(size_setting(
        ctx,
        "io_combine_limit",
        BLOCK,
        128 * KB,
        "the largest I/O PostgreSQL 18 merges adjacent blocks into; 128 kB is the most io_max_combine_limit allows by default".into(),
    ))
}

fn r_io_method(ctx: &Ctx) -> Option<Verdict> {
    if ctx.pg < 18 {
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

fn r_io_workers(ctx: &Ctx) -> Option<Verdict> {
    if ctx.pg != 18 {
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

fn r_io_min_workers(ctx: &Ctx) -> Option<Verdict> {
    if ctx.pg < 19 {
        return None;
    }
    let by_cpus = ctx.cpus.div_ceil(8).clamp(1, 32);
    let usable = ctx.uring_causes().is_empty();
    let measured = ctx.measured().and_then(|m| m.io_workers(usable));
    let (rec, why) = match measured {
        // The measured count is what one cold scan needed at full speed: kept ready, the
        // first scan after a quiet spell does not wait for the pool to grow. Never above
        // the pool's ceiling (io_max_workers' rule takes at least the same count).
        Some(w) => {
            let rec = (measured_count(w)).max(by_cpus).clamp(1, 32);
            (
                rec,
                format!(
                    "PostgreSQL 19 grows the I/O worker pool on demand; keep ready the {w} workers one cold scan needed (measured: {}), at least one per 8 of the {} CPUs",
                    ctx.measured().map_or("", |m| m.for_postgresql(usable).io_workers.reason.as_str()),
                    ctx.cpus
                ),
            )
        }
        None => (
            by_cpus,
            format!(
                "PostgreSQL 19 grows the I/O worker pool on demand; keep one per 8 of the {} CPUs ready",
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

fn r_io_max_workers(ctx: &Ctx) -> Option<Verdict> {
    if ctx.pg < 19 {
        return None;
    }
    let (rec, why) = ctx.io_workers();
    let rec = rec.max(ctx.cpus.div_ceil(2)).clamp(1, 32);
    let why = format!(
        "the pool's ceiling: half the {} CPUs or the PostgreSQL 18 io_workers choice ({why}), \
         at most 32",
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

fn r_max_worker_processes(ctx: &Ctx) -> Option<Verdict> {
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

fn r_max_parallel_workers(ctx: &Ctx) -> Option<Verdict> {
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

fn r_per_gather(ctx: &Ctx) -> Option<Verdict> {
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

fn r_parallel_maintenance(ctx: &Ctx) -> Option<Verdict> {
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

fn r_track_io_timing(ctx: &Ctx) -> Option<Verdict> {
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

fn r_server(ctx: &Ctx) -> Option<Verdict> {
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

fn r_checksums(ctx: &Ctx) -> Option<Verdict> {
    let inst = ctx.facts.instance.as_ref()?;
    inst.pgdata.as_ref()?;
    let on = inst.data_checksums?;
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

/// Runs every rule and renders the snippets.
pub fn evaluate(facts: &Facts, inputs: &Inputs) -> Advice {
    let ctx = Ctx::new(facts, inputs);
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
    advice.postgresql_conf = super::render::postgresql_conf(&advice);
    advice.sysctl_conf = super::render::sysctl_conf(&advice);
    advice
}
