//! What only a running server can tell: its live settings and its run-time statistics,
//! turned into advice items.
//!
//! # Design
//!
//! A configuration file says what the server *will* use; the server itself says what it
//! *does* use (a file edited but not reloaded, a setting waiting for a restart) and what
//! happened since its statistics were reset: how often a block was found in shared buffers,
//! how many checkpoints came early because WAL filled `max_wal_size`, how much sorting spilled
//! to temporary files, which tables autovacuum has fallen behind on, which indexes nobody
//! reads. A DBA gets these from postgresqltuner; advise gets them here.
//!
//! ```text
//!   front end (a client connection, read-only)        this module (no client library)
//!   ──────────────────────────────────────────        ───────────────────────────────
//!   pg_settings, pg_stat_database,                    LiveFacts ──► live_items ──► Items
//!   pg_stat_checkpointer, pg_stat_bgwriter,   ──►        │            (checks.rs)
//!   pg_stat_io, pg_stat_user_tables, indexes,            └─ with the files' settings:
//!   pg_stat_activity, pg_prepared_xacts                     file_differences (diff.rs)
//! ```
//!
//! The facts are plain rows ([`LiveFacts`]): the front end runs the queries (in one read-only
//! transaction, bounded) and fills them; every check here is a pure function of them, so
//! each threshold is unit-tested at its edges without a server. A part the front end could
//! not read — a view the server's version lacks, a privilege the role lacks, a query that
//! failed — is [`Reading::Unavailable`] with the reason, and the check that needed it becomes
//! an item saying so: a check never goes silent.
//!
//! # Worked example
//!
//! `pg_stat_checkpointer` says `num_timed = 3, num_requested = 9`: 75% of the checkpoints
//! were forced by WAL volume, not by `checkpoint_timeout`. The `checkpoints` item is WARN,
//! recommends twice the live `max_wal_size`, and names the fix (`ALTER SYSTEM SET
//! max_wal_size = …` then a reload: it needs no restart).

mod checks;
mod diff;
#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

use super::{Group, Item, Status, Workload};

pub use checks::live_items;
pub use diff::file_differences;

/// A part of the facts that was read, or why it could not be.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reading<T> {
    /// The rows as the server gave them.
    Read(T),
    /// Why they are missing (the version lacks the view, the role lacks a privilege, the
    /// query failed), in a sentence that names the fix.
    Unavailable(String),
}

impl<T> Reading<T> {
    /// The rows, when read.
    pub fn read(&self) -> Result<&T, &str> {
        match self {
            Reading::Read(t) => Ok(t),
            Reading::Unavailable(why) => Err(why),
        }
    }
}

impl<T> Default for Reading<T> {
    fn default() -> Self {
        Reading::Unavailable("not read".into())
    }
}

/// One row of `pg_settings`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LiveSetting {
    /// `name`.
    pub name: String,
    /// `setting`: the value in the base unit, as text.
    pub setting: String,
    /// `unit` (`8kB`, `kB`, `MB`, `B`, `ms`, `s`, `min`), if any.
    pub unit: Option<String>,
    /// `source`: `default`, `configuration file`, `command line`, `override`, ….
    pub source: String,
    /// `sourcefile` (null unless the role may read all settings).
    pub sourcefile: Option<String>,
    /// `sourceline`.
    pub sourceline: Option<i32>,
    /// `pending_restart`: the files set another value that needs a restart.
    pub pending_restart: bool,
    /// `boot_val`: the compiled-in default.
    pub boot_val: Option<String>,
    /// `enumvals` of an enum setting.
    pub enumvals: Option<Vec<String>>,
    /// `context` (`postmaster` needs a restart, `sighup` a reload, …).
    pub context: String,
}

impl LiveSetting {
    /// Where the live value comes from: `file:line`, else the source.
    pub fn origin(&self) -> String {
        match (&self.sourcefile, self.sourceline) {
            (Some(file), Some(line)) => format!("{file}:{line} (live)"),
            _ => format!("{} (live)", self.source),
        }
    }

    /// Bytes in one unit of a memory setting.
    pub fn unit_bytes(&self) -> Option<u64> {
        match self.unit.as_deref()? {
            "B" => Some(1),
            "kB" => Some(1024),
            "8kB" => Some(8192),
            "16kB" => Some(16 * 1024),
            "MB" => Some(1 << 20),
            "16MB" => Some(16 << 20),
            "GB" => Some(1 << 30),
            _ => None,
        }
    }

    /// Milliseconds in one unit of a time setting.
    pub fn unit_ms(&self) -> Option<u64> {
        match self.unit.as_deref()? {
            "us" => None,
            "ms" => Some(1),
            "s" => Some(1000),
            "min" => Some(60_000),
            _ => None,
        }
    }

    /// The value of a memory setting in bytes (`None` for -1 and non-memory settings).
    pub fn bytes(&self) -> Option<u64> {
        let count: u64 = self.setting.parse().ok()?;
        count.checked_mul(self.unit_bytes()?)
    }

    /// The value as a number.
    pub fn number(&self) -> Option<f64> {
        self.setting.parse().ok()
    }
}

/// One row of `pg_stat_database` (a database; the shared-objects row has no name and is
/// left out).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DatabaseStats {
    /// `datname`.
    pub datname: String,
    /// `numbackends`.
    pub numbackends: i64,
    /// `blks_read`: blocks not found in shared buffers.
    pub blks_read: i64,
    /// `blks_hit`: blocks found in shared buffers.
    pub blks_hit: i64,
    /// `temp_files`.
    pub temp_files: i64,
    /// `temp_bytes`.
    pub temp_bytes: i64,
    /// `stats_reset`, as the server prints it.
    pub stats_reset: Option<String>,
    /// Seconds since `stats_reset`.
    pub stats_age_seconds: Option<f64>,
}

/// `pg_stat_checkpointer` (PostgreSQL 17 and later).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CheckpointerStats {
    /// `num_timed`: checkpoints scheduled by `checkpoint_timeout`.
    pub num_timed: i64,
    /// `num_requested`: checkpoints forced (WAL reached `max_wal_size`, or a command).
    pub num_requested: i64,
    /// `buffers_written`.
    pub buffers_written: i64,
    /// `stats_reset`.
    pub stats_reset: Option<String>,
    /// Seconds since `stats_reset`.
    pub stats_age_seconds: Option<f64>,
}

/// `pg_stat_bgwriter`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BgwriterStats {
    /// `buffers_clean`: buffers the background writer wrote.
    pub buffers_clean: i64,
    /// `maxwritten_clean`: rounds it stopped at `bgwriter_lru_maxpages`.
    pub maxwritten_clean: i64,
    /// `buffers_alloc`.
    pub buffers_alloc: i64,
}

/// `pg_stat_io` summed per backend type (PostgreSQL 16 and later).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StatIo {
    /// `backend_type`.
    pub backend_type: String,
    /// Read operations.
    pub reads: i64,
    /// Milliseconds spent reading (0 without `track_io_timing`).
    pub read_time_ms: f64,
    /// Write operations.
    pub writes: i64,
    /// Writes of shared buffers in the `normal` context: a backend cleaning a buffer
    /// itself because neither the background writer nor the checkpointer had.
    pub normal_writes: i64,
    /// Milliseconds spent writing.
    pub write_time_ms: f64,
    /// Shared-buffer hits.
    pub hits: i64,
}

/// A table's dead tuples against its autovacuum threshold (`pg_stat_user_tables`,
/// `pg_class.reltuples` and its reloptions).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TableVacuum {
    /// `schema.name`.
    pub table: String,
    /// `n_dead_tup`.
    pub n_dead_tup: i64,
    /// `n_live_tup`.
    pub n_live_tup: i64,
    /// `pg_class.reltuples` (-1: never vacuumed or analyzed).
    pub reltuples: f64,
    /// The table's `autovacuum_enabled` reloption, if set.
    pub autovacuum_enabled: Option<bool>,
    /// Its `autovacuum_vacuum_threshold` reloption, if set.
    pub vacuum_threshold: Option<f64>,
    /// Its `autovacuum_vacuum_scale_factor` reloption, if set.
    pub vacuum_scale_factor: Option<f64>,
    /// When autovacuum last vacuumed it.
    pub last_autovacuum: Option<String>,
}

/// An index, its use since the statistics were reset and its definition's key.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IndexFacts {
    /// `schema.table`.
    pub table: String,
    /// `schema.index`.
    pub index: String,
    /// `idx_scan`.
    pub idx_scan: i64,
    /// `pg_relation_size` of the index.
    pub size_bytes: i64,
    /// `indisunique`.
    pub unique: bool,
    /// `indisprimary`.
    pub primary: bool,
    /// The index backs a constraint (unique, primary key, exclusion).
    pub constraint: bool,
    /// `indisvalid`.
    pub valid: bool,
    /// What makes two indexes the same: access method, key columns, operator classes,
    /// collations, expressions and predicate (the front end writes it from `pg_index`).
    pub key: String,
}

/// Connections in use (`pg_stat_activity`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Connections {
    /// Client backends.
    pub client_backends: i64,
    /// Of them, sessions of superusers.
    pub superuser_backends: i64,
}

/// Prepared transactions (`pg_prepared_xacts`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PreparedXacts {
    /// How many.
    pub count: i64,
    /// Seconds since the oldest was prepared.
    pub oldest_age_seconds: Option<f64>,
}

/// Everything read from a running server for advice.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LiveFacts {
    /// Host, port, database and user (never a password).
    pub target: String,
    /// `server_version`.
    pub server_version: String,
    /// `server_version_num`.
    pub server_version_num: u32,
    /// `current_database()`.
    pub database: String,
    /// `current_user`.
    pub role: String,
    /// The role is a superuser or a member of `pg_read_all_stats`.
    pub read_all_stats: bool,
    /// The role is a superuser or a member of `pg_read_all_settings` (`sourcefile`,
    /// `sourceline` are null otherwise).
    pub read_all_settings: bool,
    /// Seconds since the postmaster started.
    pub uptime_seconds: Option<f64>,
    /// `pg_settings`.
    pub settings: Reading<Vec<LiveSetting>>,
    /// `pg_stat_database`.
    pub databases: Reading<Vec<DatabaseStats>>,
    /// `pg_stat_checkpointer`.
    pub checkpointer: Reading<CheckpointerStats>,
    /// `pg_stat_bgwriter`.
    pub bgwriter: Reading<BgwriterStats>,
    /// `pg_stat_io`, per backend type.
    pub stat_io: Reading<Vec<StatIo>>,
    /// Tables of the connected database.
    pub tables: Reading<Vec<TableVacuum>>,
    /// Indexes of the connected database.
    pub indexes: Reading<Vec<IndexFacts>>,
    /// Connections in use.
    pub connections: Reading<Connections>,
    /// Prepared transactions.
    pub prepared_xacts: Reading<PreparedXacts>,
}

impl LiveFacts {
    /// A live setting by name.
    pub fn setting(&self, name: &str) -> Option<&LiveSetting> {
        self.settings.read().ok()?.iter().find(|s| s.name == name)
    }

    /// A live setting's value as text (`None` when unread or unknown).
    pub fn value(&self, name: &str) -> Option<&str> {
        self.setting(name).map(|s| s.setting.as_str())
    }

    /// The server's major version (`180006` → 18).
    pub fn major_version(&self) -> u32 {
        self.server_version_num / 10_000
    }
}

/// What the live checks need beside the facts.
#[derive(Debug, Clone, Copy)]
pub struct LiveInputs {
    /// The workload advised for (`jit` depends on it).
    pub workload: Workload,
}

/// An item of the live group.
#[allow(clippy::too_many_arguments)]
pub(crate) fn item(
    name: &str,
    status: Status,
    found: String,
    source: String,
    recommended: String,
    reason: String,
    fix: String,
    cite: &'static str,
) -> Item {
    Item {
        group: Group::Live,
        name: name.to_string(),
        status,
        found,
        source,
        recommended,
        reason,
        fix,
        cite,
        conf: None,
        sysctl: Vec::new(),
    }
}

/// An item saying a check could not run, and why.
pub(crate) fn unavailable(name: &str, why: &str, cite: &'static str) -> Item {
    item(
        name,
        Status::Warn,
        "not checked".into(),
        "the running server".into(),
        "—".into(),
        format!("this check could not run: {why}"),
        "see the reason".into(),
        cite,
    )
}

/// A duration in words: `3 d 4 h`, `5 h 12 min`, `40 s`.
pub fn duration_words(seconds: f64) -> String {
    let s = seconds.max(0.0) as u64;
    let (d, h, m) = (s / 86_400, s % 86_400 / 3600, s % 3600 / 60);
    if d > 0 {
        format!("{d} d {h} h")
    } else if h > 0 {
        format!("{h} h {m} min")
    } else if m > 0 {
        format!("{m} min {} s", s % 60)
    } else {
        format!("{s} s")
    }
}

/// Sources of `pg_settings` that a person set (a file, the command line, the environment),
/// as opposed to PostgreSQL's defaults and this session's own values.
const SET_BY_SOMEONE: [&str; 4] = [
    "configuration file",
    "command line",
    "environment variable",
    "global",
];

/// The running server's settings as an [`InstanceFacts`](crate::host::InstanceFacts), for
/// advice without configuration files: each value written as a file would hold it (a size
/// in the largest exact unit, a time with its unit), with `pg_settings.sourcefile:line` as
/// its source when the role may read it, else `pg_settings (SOURCE)`.
pub fn instance_from_live(live: &LiveFacts) -> crate::host::InstanceFacts {
    let mut instance = crate::host::InstanceFacts {
        pg_version: Some(live.major_version()),
        ..Default::default()
    };
    let Ok(settings) = live.settings.read() else {
        return instance;
    };
    for s in settings
        .iter()
        .filter(|s| SET_BY_SOMEONE.contains(&s.source.as_str()))
    {
        let value = match (s.bytes(), s.unit_ms(), &s.unit) {
            (Some(bytes), _, _) => crate::advise::units::format_size(bytes),
            (None, Some(_), Some(unit)) => format!("{}{unit}", s.setting),
            _ => s.setting.clone(),
        };
        let (file, line) = match (&s.sourcefile, s.sourceline) {
            (Some(file), Some(line)) => (file.into(), usize::try_from(line).unwrap_or(0)),
            _ => (format!("pg_settings ({})", s.source).into(), 0),
        };
        instance.settings.insert(
            s.name.to_ascii_lowercase(),
            crate::host::SettingSource { value, file, line },
        );
    }
    instance
}
