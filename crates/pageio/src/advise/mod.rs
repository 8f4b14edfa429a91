//! `pageio advise`: host and instance configuration for PostgreSQL 17, 18 and 19, from the
//! facts of this machine.
//!
//! # Design
//!
//! ```text
//!   host::HostFacts ─┐      (files under a Sysroot: /proc, /sys, cgroups, limits, mounts)
//!   host::Probes ────┤      (live: io_uring_setup, O_DIRECT, clock cost — injectable)
//!   host::PgBinFacts ┼─► Facts ─► Ctx (effective RAM/CPUs, derived sizes) ─► RULES ─► Advice
//!   host::Instance ──┤                                                         │
//!   MeasuredIo? ─────┘ (measure::run + measure::recommend)          items · postgresql.conf
//!                                                                          · sysctl.d snippets
//! ```
//!
//! Facts are gathered once ([`Facts`]); nothing after that touches the machine, so the same
//! facts always give the same advice and tests drive every rule from captured trees with
//! injected probe results. [`rules::RULES`] is the single table of rules: each names its
//! group, its setting and the source of its formula or threshold (PostgreSQL's
//! documentation, the kernel's, pgtune's formulas, PostgreSQL 18/19 release notes), and
//! computes one [`Item`]: status, the value found and where, the recommendation, a
//! one-sentence reason and the exact fix. Every size is computed from the *effective* RAM and
//! CPUs — the container's when a cgroup limits them — and the advice says which limit
//! applied.
//!
//! The [`Advice`] is data: the items, the `postgresql.conf` and `sysctl.d` snippets (file
//! contents, ready to apply), the problems met; it serialises to JSON as it is. Showing it
//! to a person is the front end's work (the `pageio` command prints a grouped report). A
//! message that points the user at one of advise's inputs — measure the disk, give the data
//! directory — names the input as the caller spells it ([`InputNames`]: a command line's
//! flags), so the library never spells a flag.
//!
//! # Statuses and exit status
//!
//! `ok` — nothing to change; `warn` — a change is recommended; `bad` — something that fails
//! or loses data as configured (a value PostgreSQL refuses at start-up, with its own
//! message — see [`guc`] —, a server that will not start with `io_method = io_uring`
//! here, `huge_pages = on` without enough huge pages, write barriers off, commit limit
//! exceeded). [`Advice::exit_status`] is 0, 1 or 2. (The `pageio` command also exits 2 when
//! it could not run at all, and then prints no advice: a script tells the two apart by the
//! advice on stdout.)

pub mod guc;
pub mod live;
pub mod measured;
pub mod rules;
mod snippets;
pub mod units;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

pub use measured::MeasuredIo;

use crate::host::{HostFacts, InstanceFacts, PgBinFacts, Probes, SeccompFacts, Sysroot};

/// The workload the settings are tuned for (pgtune's five, with its defaults for
/// connections and WAL).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// Many short transactions, many connections.
    Oltp,
    /// Web application: mostly reads, many connections.
    Web,
    /// Data warehouse: few connections, large scans and sorts.
    Dw,
    /// A mix of the above.
    Mixed,
    /// A developer machine that also runs other programs.
    Desktop,
}

impl Workload {
    /// Every workload with its command-line name.
    pub const ALL: [(&'static str, Workload); 5] = [
        ("oltp", Workload::Oltp),
        ("web", Workload::Web),
        ("dw", Workload::Dw),
        ("mixed", Workload::Mixed),
        ("desktop", Workload::Desktop),
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, w)| *w == self)
            .map(|(n, _)| *n)
            .unwrap_or("mixed")
    }

    /// Parses a command-line name.
    pub fn parse(name: &str) -> Option<Workload> {
        Self::ALL.iter().find(|(n, _)| *n == name).map(|(_, w)| *w)
    }
}

/// What the user chose, beside the facts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Inputs {
    /// The workload.
    pub workload: Workload,
    /// The connections to size for; else the configuration's, else the workload's default.
    pub max_connections: Option<u32>,
    /// The PostgreSQL major version to advise for; else the cluster's `PG_VERSION`, else 18.
    pub pg_version: Option<u32>,
    /// A measurement of the data directory's disk, when one was made.
    pub measured: Option<MeasuredIo>,
}

impl Default for Inputs {
    fn default() -> Self {
        Inputs {
            workload: Workload::Mixed,
            max_connections: None,
            pg_version: None,
            measured: None,
        }
    }
}

/// PostgreSQL versions advice can be given for.
pub const PG_VERSIONS: [u32; 3] = [17, 18, 19];

/// The version assumed when neither the inputs nor a data directory give one: the current
/// release.
pub const DEFAULT_PG_VERSION: u32 = 18;

/// Everything read from the machine for one run.
#[derive(Debug, Serialize)]
pub struct Facts {
    /// `/proc`, `/sys`, cgroups, limits, the data directory's storage.
    pub host: HostFacts,
    /// The process's seccomp state.
    pub seccomp: SeccompFacts,
    /// Live probe results (injected in tests).
    pub probes: Probes,
    /// The PostgreSQL binaries, when found.
    pub pg_bin: Option<PgBinFacts>,
    /// The instance, when a data directory or a configuration file was given.
    pub instance: Option<InstanceFacts>,
    /// The storage under `pg_wal` when it is a link to another place (`initdb --waldir`).
    pub wal_storage: Option<crate::host::StorageFacts>,
}

/// Where to read facts from.
#[derive(Debug, Clone, Default)]
pub struct Sources<'a> {
    /// The data directory (read as given; its storage is looked up under the sysroot).
    pub pgdata: Option<&'a Path>,
    /// A `postgresql.conf` to read instead of (or without) the data directory's.
    pub config: Option<&'a Path>,
    /// Where the PostgreSQL binaries are; else `PATH` is searched.
    pub pg_bin: Option<&'a Path>,
    /// The machine path whose storage to examine when there is no data directory (a
    /// captured tree's mount point in tests).
    pub storage_path: Option<&'a Path>,
}

impl Facts {
    /// Reads every fact under `sys`, with the given probe results.
    pub fn read(sys: &Sysroot, sources: &Sources<'_>, probes: Probes) -> Facts {
        let storage_path: Option<PathBuf> = sources
            .pgdata
            .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()))
            .or_else(|| sources.storage_path.map(Path::to_path_buf));
        let seccomp = crate::host::process::read_seccomp(sys);
        let host = HostFacts::read(sys, storage_path.as_deref());
        let instance = (sources.pgdata.is_some() || sources.config.is_some())
            .then(|| InstanceFacts::read(sources.pgdata, sources.config));
        // pg_wal may be a link to another file system; its storage is examined too.
        let wal_storage = sources
            .pgdata
            .map(|d| d.join("pg_wal"))
            .filter(|w| {
                w.symlink_metadata()
                    .is_ok_and(|m| m.file_type().is_symlink())
            })
            .and_then(|w| std::fs::canonicalize(w).ok())
            .map(|target| crate::host::storage::read(sys, &target));
        let mut host = host;
        host.problems.extend(sys.take_problems());
        Facts {
            host,
            seccomp,
            probes,
            pg_bin: crate::host::pgbin::read_pg_bin(sources.pg_bin),
            instance,
            wal_storage,
        }
    }

    /// Reads the real machine (`/`), running the live probes on `pgdata`.
    pub fn read_live(sources: &Sources<'_>) -> Facts {
        let probes = Probes::live(
            sources.pgdata.or(sources.storage_path),
            crate::host::clock::DEFAULT_CLOCK_PROBE,
        );
        Self::read(&Sysroot::default(), sources, probes)
    }
}

/// The groups of the advice, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Group {
    /// Memory, kernel and scheduler settings.
    Host,
    /// The data directory's file system and devices.
    Storage,
    /// Whether io_uring can be used, and the limits it needs.
    IoUring,
    /// The PostgreSQL settings.
    Instance,
    /// What a running server says: its live settings and run-time statistics.
    Live,
}

impl Group {
    /// The group's heading.
    pub fn name(self) -> &'static str {
        match self {
            Group::Host => "host",
            Group::Storage => "storage",
            Group::IoUring => "io_uring",
            Group::Instance => "instance",
            Group::Live => "live",
        }
    }
}

/// An item's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Nothing to change.
    Ok,
    /// A change is recommended.
    Warn,
    /// Fails or risks data as configured.
    Bad,
}

impl Status {
    /// The marker a report shows.
    pub fn marker(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::Warn => "WARN",
            Status::Bad => "BAD",
        }
    }
}

/// One line of advice.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Item {
    /// The advice group.
    pub group: Group,
    /// The setting or check (`vm.swappiness`, `shared_buffers`, `io_uring`).
    pub name: String,
    /// The verdict.
    pub status: Status,
    /// The value found.
    pub found: String,
    /// Where it was read: a file, a sysctl, a conf `file:line`, or `default`.
    pub source: String,
    /// The recommended value.
    pub recommended: String,
    /// Why, in one sentence.
    pub reason: String,
    /// The exact fix: a sysctl line, a conf line, a command.
    pub fix: String,
    /// Where the rule's formula or threshold comes from.
    pub cite: &'static str,
    /// The `postgresql.conf` line this item contributes (name, value), if any.
    #[serde(skip)]
    pub conf: Option<(String, String)>,
    /// The `sysctl.d` lines this item contributes, if any.
    #[serde(skip)]
    pub sysctl: Vec<(String, String)>,
}

/// The whole advice of one run.
#[derive(Debug, Clone, Serialize)]
pub struct Advice {
    /// The PostgreSQL major version advised for.
    pub pg_version: u32,
    /// The workload.
    pub workload: Workload,
    /// The connections assumed, and where that number came from.
    pub max_connections: u32,
    /// Where `max_connections` came from.
    pub max_connections_source: String,
    /// Effective RAM, bytes.
    pub effective_memory_bytes: Option<u64>,
    /// The limit that decided the effective RAM.
    pub memory_limit: String,
    /// Effective CPUs.
    pub effective_cpus: u32,
    /// The limit that decided the effective CPUs.
    pub cpu_limit: String,
    /// Every item, grouped, in table order.
    pub items: Vec<Item>,
    /// A `postgresql.conf` snippet with every instance recommendation.
    pub postgresql_conf: String,
    /// A `/etc/sysctl.d/` snippet with every kernel setting to change.
    pub sysctl_conf: String,
    /// Facts that could not be read, each naming the file and the cause: the items that
    /// needed them are missing or say "unknown".
    pub problems: Vec<String>,
}

impl Advice {
    /// What the advice is for: `PostgreSQL 18, workload mixed, 100 connections (default)`.
    pub fn advised_for(&self) -> String {
        format!(
            "PostgreSQL {}, workload {}, {} connections ({})",
            self.pg_version,
            self.workload.name(),
            self.max_connections,
            self.max_connections_source
        )
    }

    /// The effective RAM the advice is sized from, or "unknown".
    pub fn effective_memory(&self) -> String {
        self.effective_memory_bytes
            .map(units::human_bytes)
            .unwrap_or_else(|| "unknown".into())
    }

    /// The worst status.
    pub fn worst(&self) -> Status {
        self.items
            .iter()
            .map(|i| i.status)
            .max()
            .unwrap_or(Status::Ok)
    }

    /// 0: nothing to fix; 1: warnings; 2: something bad (see the module header).
    pub fn exit_status(&self) -> i32 {
        match self.worst() {
            Status::Ok => 0,
            Status::Warn => 1,
            Status::Bad => 2,
        }
    }

    /// The item named `name`.
    pub fn item(&self, name: &str) -> Option<&Item> {
        self.items.iter().find(|i| i.name == name)
    }

    /// Adds what a running server said ([`live::live_items`], [`live::file_differences`])
    /// after the other groups, and writes the `postgresql.conf` snippet again so it holds
    /// the live items' lines too.
    pub fn add_live(&mut self, items: Vec<Item>) {
        self.items.extend(items);
        // A stable sort: each group keeps its rule-table order.
        self.items.sort_by_key(|i| i.group);
        self.postgresql_conf = snippets::postgresql_conf(self);
    }
}

/// An input of advise that a message may point the user at: "run with a measurement",
/// "give the data directory". The caller names each one ([`InputNames`]) — a command line
/// by its flag — so the library's text says what to give, not how to spell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserInput {
    /// The cluster's data directory ([`Sources::pgdata`]).
    PgData,
    /// Where the PostgreSQL binaries are ([`Sources::pg_bin`]).
    PgBin,
    /// The PostgreSQL version advised for ([`Inputs::pg_version`]).
    PgVersion,
    /// The connections to size for ([`Inputs::max_connections`]).
    MaxConnections,
    /// The workload ([`Inputs::workload`]).
    Workload,
    /// A measurement of the disk ([`Inputs::measured`], from `measure::run`).
    Measure,
    /// A captured machine tree read instead of `/` ([`Sysroot`]).
    Sysroot,
    /// The engine's direct-I/O setting (`IoConfig::direct_io`), which needs O_DIRECT.
    DirectIo,
}

/// How the caller spells the [`UserInput`]s its user gives; advice's messages use it where
/// they point at one. A command line answers with its flags, a library caller with its own
/// words ([`PlainNames`]).
pub trait InputNames {
    /// The input's name, as a message mentions it: "run with NAME", "pgtune's default for
    /// NAME mixed".
    fn name(&self, input: UserInput) -> String;
    /// The input with a placeholder for its value: "run with USAGE to check ...".
    fn usage(&self, input: UserInput) -> String;
    /// The whole step that gives advice again with the input, as a fix.
    fn rerun(&self, input: UserInput) -> String;
}

/// The inputs in plain words, for callers without flags of their own (the library API, its
/// tests): "run with a measurement of the disk".
#[derive(Debug, Clone, Copy, Default)]
pub struct PlainNames;

impl InputNames for PlainNames {
    fn name(&self, input: UserInput) -> String {
        match input {
            UserInput::PgData => "the data directory",
            UserInput::PgBin => "the PostgreSQL binary directory",
            UserInput::PgVersion => "the PostgreSQL version given",
            UserInput::MaxConnections => "the connection count given",
            UserInput::Workload => "the workload",
            UserInput::Measure => "a measurement of the disk",
            UserInput::Sysroot => "a sysroot",
            UserInput::DirectIo => "direct I/O",
        }
        .to_string()
    }

    fn usage(&self, input: UserInput) -> String {
        self.name(input)
    }

    fn rerun(&self, input: UserInput) -> String {
        format!("advise again with {}", self.name(input))
    }
}

/// Evaluates every rule of [`rules::RULES`] on `facts`, naming the user's inputs in plain
/// words ([`PlainNames`]).
pub fn advise(facts: &Facts, inputs: &Inputs) -> Advice {
    rules::evaluate(facts, inputs, &PlainNames)
}

/// Evaluates every rule of [`rules::RULES`] on `facts`; messages that point at one of the
/// user's inputs name it as `names` spells it (a command line's flags).
pub fn advise_with_names(facts: &Facts, inputs: &Inputs, names: &dyn InputNames) -> Advice {
    rules::evaluate(facts, inputs, names)
}

/// How long a measurement for advice runs by default.
pub const DEFAULT_MEASURE: Duration = Duration::from_secs(30);
