//! The facts one run reads and the values derived from them once: the PostgreSQL version
//! advised for, the effective RAM and CPUs, the connections assumed, and the sizes every
//! memory rule starts from (`shared_buffers`, `work_mem`, the process count, the shared
//! memory PostgreSQL will ask for).
//!
//! Each formula's constants are named here with the source they come from: PostgreSQL's
//! documentation and source for what the server computes itself (`wal_buffers = -1`, the
//! process array), pgtune for the starting points (`shared_buffers`, `work_mem`).

use super::memory::{HUGE_PAGES_HEADROOM, HUGE_PAGES_WORTH_BYTES};
use super::settings::pg_default;
use crate::advise::units::{round_down, BLOCK, GB, KB, MB};
use crate::advise::{Facts, InputNames, Inputs, MeasuredIo, UserInput, Workload};
use crate::host::{Classified, DiskClass, SettingSource};

/// `shared_buffers` is the effective RAM divided by this: a quarter (PostgreSQL docs 19.4.1
/// "a reasonable starting value for shared_buffers is 25% of the memory"; pgtune).
pub const SHARED_BUFFERS_RAM_DIVISOR: u64 = 4;

/// On a desktop `shared_buffers` is the RAM divided by this: a sixteenth (pgtune), since the
/// machine runs other programs too.
pub const DESKTOP_SHARED_BUFFERS_RAM_DIVISOR: u64 = 16;

/// `wal_buffers = -1` takes `shared_buffers` divided by this (PostgreSQL docs 19.5.2
/// wal_buffers; `XLOGChooseNumBuffers` in xlog.c).
pub const WAL_BUFFERS_DIVISOR: u64 = 32;

/// The automatic `wal_buffers` is at least this many blocks (xlog.c: 8 pages).
pub const MIN_WAL_BUFFERS_BLOCKS: u64 = 8;

/// The automatic `wal_buffers` is at most one WAL segment, 16 MB by default (PostgreSQL docs
/// 19.5.2 wal_buffers).
pub const MAX_WAL_BUFFERS_BYTES: u64 = 16 * MB;

/// PostgreSQL's default `max_worker_processes` (docs 19.4.6): the recommendation never goes
/// below it, since logical replication and extensions need slots too.
pub const MIN_WORKER_PROCESSES: u32 = 8;

/// pgtune's cap on `max_parallel_workers_per_gather` (except for a warehouse) and on
/// `max_parallel_maintenance_workers`.
pub const MAX_PARALLEL_WORKERS_PER_OPERATION: u32 = 4;

/// Below this many CPUs pgtune gives each parallel operation half the CPUs rounded down
/// (one CPU: no parallelism).
pub const PARALLEL_ROUND_DOWN_BELOW_CPUS: u32 = 4;

/// pgtune's `work_mem` divides the spare memory among this many sorts or hashes per
/// connection and worker: a query may run several at once.
pub const WORK_MEM_OPERATIONS_PER_PROCESS: u64 = 3;

/// pgtune halves `work_mem` for the dw and mixed workloads.
pub const WORK_MEM_MIXED_DIVISOR: u64 = 2;

/// pgtune takes a sixth of `work_mem` on a desktop.
pub const WORK_MEM_DESKTOP_DIVISOR: u64 = 6;

/// `work_mem` never below PostgreSQL's default, 4 MB (docs 19.4.1).
pub const MIN_WORK_MEM_BYTES: u64 = 4 * MB;

/// `maintenance_work_mem` is the RAM divided by this (pgtune: RAM/16).
pub const MAINTENANCE_WORK_MEM_RAM_DIVISOR: u64 = 16;

/// For a warehouse, `maintenance_work_mem` is the RAM divided by this (pgtune: RAM/8).
pub const DW_MAINTENANCE_WORK_MEM_RAM_DIVISOR: u64 = 8;

/// `maintenance_work_mem` at most 2 GB (pageio's cap): each autovacuum worker may take this
/// much (`autovacuum_work_mem = -1`, PostgreSQL docs 19.4.1), and VACUUM's dead-tuple store
/// gains little past it.
pub const MAX_MAINTENANCE_WORK_MEM_BYTES: u64 = 2 * GB;

/// The first PostgreSQL version with asynchronous I/O: `io_method`, I/O worker processes,
/// `autovacuum_worker_slots` (PostgreSQL 18 release notes).
pub const AIO_SINCE_PG: u32 = 18;

/// Autovacuum worker slots from PostgreSQL 18 (`autovacuum_worker_slots` default 16).
pub const AUTOVACUUM_SLOTS_PG18: u64 = 16;

/// Autovacuum workers before PostgreSQL 18 (`autovacuum_max_workers` default 3).
pub const AUTOVACUUM_WORKERS_BEFORE_PG18: u64 = 3;

/// The autovacuum launcher: one process.
pub const AUTOVACUUM_LAUNCHERS: u64 = 1;

/// `max_wal_senders`' default (PostgreSQL docs 19.6.1): each may be a process.
pub const DEFAULT_MAX_WAL_SENDERS: u64 = 10;

/// Auxiliary processes before PostgreSQL 18 (`NUM_AUXILIARY_PROCS` in proc.h: 6).
pub const AUXILIARY_PROCESSES_BEFORE_PG18: u64 = 6;

/// Auxiliary processes from PostgreSQL 18: the 6 above plus 32 I/O-worker slots
/// (`MAX_IO_WORKERS` in PostgreSQL 18's proc.h).
pub const AUXILIARY_PROCESSES_PG18: u64 = 38;

/// Shared memory beside `shared_buffers` for each buffer: descriptors and checkpoint sort
/// space take about 1/64 of the buffers (buf_init.c: a 64-byte descriptor and a 20-byte
/// checkpoint entry per 8 kB buffer, plus the buffer mapping table).
pub const BUFFER_OVERHEAD_DIVISOR: u64 = 64;

/// Shared memory per possible process: PGPROC, lock and predicate-lock tables at their
/// default sizes. PostgreSQL 18.6's `shared_memory_size` grows from 150 MB to 201 MB when
/// `max_connections` goes from 100 to 1100 (with `shared_buffers = 128MB`): about 50 kB
/// each, rounded up to 64 kB.
pub const SHARED_BYTES_PER_PROCESS: u64 = 64 * KB;

/// Shared memory of fixed structures (CLOG, subtransaction and multixact buffers, stats,
/// the AIO handles). A generous allowance: PostgreSQL 18.6 reports `shared_memory_size =
/// 9MB` for `shared_buffers = 128kB` with 100 connections, everything included. With the
/// other terms the estimate is 1083 MB where PostgreSQL 18.6 asks for 1086 MB
/// (`shared_buffers = 1GB`, 100 connections); [`HUGE_PAGES_HEADROOM`] covers the rest
/// (tested in `advise_hosts.rs`).
pub const FIXED_SHARED_BYTES: u64 = 16 * MB;

/// The huge page size assumed when `/proc/meminfo` reports none: x86-64's and arm64's
/// default 2 MB (kernel admin-guide/mm/hugetlbpage.rst).
pub const DEFAULT_HUGEPAGE_BYTES: u64 = 2 * MB;

/// The facts and the values derived from them once.
pub struct Ctx<'a> {
    /// Everything read.
    pub facts: &'a Facts,
    /// The user's choices.
    pub inputs: &'a Inputs,
    /// How the caller names the user's inputs, for messages that point at one.
    pub names: &'a dyn InputNames,
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
    /// The class of PGDATA's storage and the evidence (`host::disk_class`), corrected by a
    /// measurement that rules out a spinning disk.
    pub disk: Classified,
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

/// Every configured setting PostgreSQL `pg` refuses (see [`crate::advise::guc`]).
fn refused_settings(facts: &Facts, pg: u32) -> Vec<Refused> {
    let Some(instance) = facts.instance.as_ref() else {
        return Vec::new();
    };
    instance
        .settings
        .iter()
        .filter_map(|(name, s)| {
            let message = if crate::advise::guc::unknown_in(name, pg) {
                crate::advise::guc::unknown_message(name, &s.file.display().to_string(), s.line)
            } else {
                let r = crate::advise::guc::check(name, &s.value, pg).err()?;
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
    pub(super) fn new(facts: &'a Facts, inputs: &'a Inputs, names: &'a dyn InputNames) -> Ctx<'a> {
        let instance = facts.instance.as_ref();
        let pg = inputs
            .pg_version
            .or(instance.and_then(|i| i.pg_version))
            .unwrap_or(crate::advise::DEFAULT_PG_VERSION);
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
            (Some(n), _) => (n, names.name(UserInput::MaxConnections)),
            (None, Some((n, at))) => (n, at),
            (None, None) => (
                workload_connections(inputs.workload),
                format!(
                    "pgtune's default for {} {}",
                    names.name(UserInput::Workload),
                    inputs.workload.name()
                ),
            ),
        };
        let disk = measured_class(&facts.host.storage_class, inputs.measured.as_ref());
        Ctx {
            facts,
            inputs,
            names,
            pg,
            ram,
            ram_limit,
            cpus,
            cpu_limit,
            max_connections,
            disk,
            refused,
        }
    }

    /// The workload advised for.
    pub(super) fn workload(&self) -> Workload {
        self.inputs.workload
    }

    /// The measurement's recommendations, when the disk was measured.
    pub(super) fn measured(&self) -> Option<&MeasuredIo> {
        self.inputs.measured.as_ref()
    }

    /// A configured value PostgreSQL accepts; a refused one is judged apart (its item is
    /// BAD), so no recommendation is derived from it.
    pub(super) fn setting(&self, name: &str) -> Option<&SettingSource> {
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
    pub(super) fn current(&self, name: &str) -> (String, String) {
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
            DESKTOP_SHARED_BUFFERS_RAM_DIVISOR
        } else {
            SHARED_BUFFERS_RAM_DIVISOR
        };
        round_down(self.ram / share, MB)
    }

    /// `wal_buffers` as PostgreSQL's automatic choice computes it: shared_buffers / 32, at
    /// most one 16 MB WAL segment, at least 8 blocks.
    pub fn wal_buffers(&self) -> u64 {
        (self.shared_buffers() / WAL_BUFFERS_DIVISOR)
            .clamp(MIN_WAL_BUFFERS_BLOCKS * BLOCK, MAX_WAL_BUFFERS_BYTES)
            / BLOCK
            * BLOCK
    }

    /// `max_worker_processes`: one per CPU, never below PostgreSQL's default of 8 (logical
    /// replication and extensions need slots too).
    pub fn max_worker_processes(&self) -> u32 {
        self.cpus.max(MIN_WORKER_PROCESSES)
    }

    /// `max_parallel_workers`: one per CPU (pgtune).
    pub fn max_parallel_workers(&self) -> u32 {
        self.cpus
    }

    /// `max_parallel_workers_per_gather`: half the CPUs, at most 4 except for a warehouse
    /// (pgtune); below 4 CPUs half of them rounded down (one CPU: no parallelism).
    pub fn parallel_per_gather(&self) -> u32 {
        if self.cpus < PARALLEL_ROUND_DOWN_BELOW_CPUS {
            return self.cpus / 2;
        }
        let half = self.cpus.div_ceil(2);
        if self.workload() == Workload::Dw {
            half
        } else {
            half.min(MAX_PARALLEL_WORKERS_PER_OPERATION)
        }
    }

    /// `max_parallel_maintenance_workers`: half the CPUs, at most 4 (pgtune).
    pub fn parallel_maintenance(&self) -> u32 {
        if self.cpus < PARALLEL_ROUND_DOWN_BELOW_CPUS {
            self.cpus / 2
        } else {
            self.cpus
                .div_ceil(2)
                .min(MAX_PARALLEL_WORKERS_PER_OPERATION)
        }
    }

    /// `work_mem` (pgtune): (RAM − shared_buffers) / ((connections + worker processes) × 3)
    /// — a query may run several sorts and hashes at once — halved for dw and mixed, a sixth
    /// on a desktop, at least PostgreSQL's default 4 MB; in kB.
    pub fn work_mem(&self) -> u64 {
        let spare = self.ram.saturating_sub(self.shared_buffers());
        let slots = (u64::from(self.max_connections.0) + u64::from(self.max_worker_processes()))
            * WORK_MEM_OPERATIONS_PER_PROCESS;
        let base = spare / slots.max(1);
        let per = match self.workload() {
            Workload::Web | Workload::Oltp => base,
            Workload::Dw | Workload::Mixed => base / WORK_MEM_MIXED_DIVISOR,
            Workload::Desktop => base / WORK_MEM_DESKTOP_DIVISOR,
        };
        round_down(per.max(MIN_WORK_MEM_BYTES), KB)
    }

    /// `maintenance_work_mem`: RAM/16 (RAM/8 for a warehouse; pgtune), at most 2 GB — each
    /// autovacuum worker may take this much (`autovacuum_work_mem = -1`), and VACUUM's
    /// dead-tuple store gains little past it.
    pub fn maintenance_work_mem(&self) -> u64 {
        let share = if self.workload() == Workload::Dw {
            DW_MAINTENANCE_WORK_MEM_RAM_DIVISOR
        } else {
            MAINTENANCE_WORK_MEM_RAM_DIVISOR
        };
        round_down((self.ram / share).min(MAX_MAINTENANCE_WORK_MEM_BYTES), MB)
    }

    /// Every process that may exist, as PostgreSQL sizes its process array: connections +
    /// autovacuum workers (`autovacuum_worker_slots`, 16 from PostgreSQL 18; 3 before) + the
    /// launcher + `max_worker_processes` + `max_wal_senders` (10) + auxiliary processes
    /// (6, plus 32 I/O-worker slots from 18). Each may own an io_uring and its descriptor.
    pub fn processes(&self) -> (u64, String) {
        let (autovac, aux) = if self.pg >= AIO_SINCE_PG {
            (AUTOVACUUM_SLOTS_PG18, AUXILIARY_PROCESSES_PG18)
        } else {
            (
                AUTOVACUUM_WORKERS_BEFORE_PG18,
                AUXILIARY_PROCESSES_BEFORE_PG18,
            )
        };
        let workers = u64::from(self.max_worker_processes());
        let n = u64::from(self.max_connections.0)
            + autovac
            + AUTOVACUUM_LAUNCHERS
            + workers
            + DEFAULT_MAX_WAL_SENDERS
            + aux;
        (
            n,
            format!(
                "{} connections + {autovac} autovacuum + {AUTOVACUUM_LAUNCHERS} launcher + {workers} workers + {DEFAULT_MAX_WAL_SENDERS} WAL senders + {aux} auxiliary = {n} processes",
                self.max_connections.0
            ),
        )
    }

    /// PostgreSQL's shared memory, estimated: shared_buffers, its per-buffer descriptors and
    /// checkpoint sort space (~1/64), wal_buffers, ~64 kB per process (PGPROC, lock and
    /// predicate-lock tables at default sizes) and 16 MB of fixed structures.
    pub fn shared_memory(&self) -> u64 {
        let sb = self.shared_buffers();
        sb + sb / BUFFER_OVERHEAD_DIVISOR
            + self.wal_buffers()
            + self.processes().0 * SHARED_BYTES_PER_PROCESS
            + FIXED_SHARED_BYTES
    }

    /// The huge page size, and a note when it is assumed.
    pub(super) fn hugepage_size(&self) -> (u64, &'static str) {
        match self.facts.host.memory.hugepage_size_bytes {
            Some(s) if s > 0 => (s, ""),
            _ => (
                DEFAULT_HUGEPAGE_BYTES,
                " (Hugepagesize not reported; 2 MB assumed)",
            ),
        }
    }

    /// Huge pages to reserve: the shared memory plus 10%, in pages.
    pub fn huge_pages_needed(&self) -> u64 {
        let (size, _) = self.hugepage_size();
        ((self.shared_memory() as f64 * HUGE_PAGES_HEADROOM) / size as f64).ceil() as u64
    }

    /// Whether reserving huge pages is worth it here.
    pub(super) fn huge_pages_worth(&self) -> bool {
        self.shared_buffers() >= HUGE_PAGES_WORTH_BYTES
            || self.facts.host.memory.huge_pages_total.unwrap_or(0) > 0
    }
}

/// Random 8 kB reads per second at queue depth 1 above which a device is not a spinning
/// disk: a 15 000 rpm disk seeks in ~3.5 ms and turns in 2 ms, about 200 reads a second;
/// 500 leaves room for a disk's own cache and never reaches flash's thousands.
pub const HDD_MAX_RANDOM_READS_PER_SECOND: f64 = 500.0;

/// The storage class with a measurement's correction: a device measured faster than any
/// spinning disk is not one, whatever its flag said.
fn measured_class(class: &Classified, measured: Option<&MeasuredIo>) -> Classified {
    match measured {
        Some(m)
            if matches!(class.class, DiskClass::Hdd | DiskClass::Unknown)
                && m.random_reads_per_second_qd1 > HDD_MAX_RANDOM_READS_PER_SECOND =>
        {
            Classified {
                class: DiskClass::Virtual,
                evidence: format!(
                    "{}; measured {:.0} random reads/s at depth 1, more than any spinning disk ({HDD_MAX_RANDOM_READS_PER_SECOND:.0})",
                    class.evidence, m.random_reads_per_second_qd1
                ),
            }
        }
        _ => class.clone(),
    }
}

/// pgtune's connection count per workload, used when neither the user nor the configuration
/// gives one.
pub fn workload_connections(w: Workload) -> u32 {
    match w {
        Workload::Web => 200,
        Workload::Oltp => 300,
        Workload::Dw => 40,
        Workload::Desktop => 20,
        Workload::Mixed => 100,
    }
}
