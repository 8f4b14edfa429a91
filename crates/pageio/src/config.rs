//! # Settings
//!
//! Every knob of the engine, under the name a PostgreSQL user would look for
//! (`io_method`, `io_workers`, `io_max_concurrency`, `io_combine_limit`,
//! `effective_io_concurrency`, `maintenance_io_concurrency`, `shared_buffers`, `huge_pages`,
//! `direct_io`, `max_open_files`), with PostgreSQL's defaults and PostgreSQL's unit syntax.
//!
//! Values arrive from three places — code, command-line flags, and a `postgresql.conf`-style
//! file — so the parsing lives here once:
//!
//! ```text
//!   "128kB" ──parse_size_bytes──► 131072          (memory units: B, kB, MB, GB, TB; 1024-based)
//!   "16"    ──parse_blocks──────► 16 blocks       (a bare number of a block-valued setting is blocks,
//!   "128kB" ──parse_blocks──────► 16 blocks        as in PostgreSQL; a unit is converted to blocks)
//!   io_method = 'worker'  # comment  ──parse_conf──► ("io_method", "worker")
//! ```
//!
//! A configuration file is read as PostgreSQL reads `postgresql.conf` ([`read_conf_file`]),
//! so a cluster's own file can be passed as it is: `#` comments, optional `=`, quoted values
//! with `''` and backslash escapes, and `include` / `include_if_exists` / `include_dir`
//! resolved against the including file's directory, at most [`CONF_FILE_MAX_DEPTH`] levels
//! deep, a cycle reported with its chain. Settings pageio does not use (`max_connections`,
//! …) are ignored and listed in the [`ConfLoad`] report; a name within two edits of one of
//! pageio's settings (`io_wrokers`) is an error rather than silently ignored. Errors name
//! the file and line (and, for an include, the including file and line).
//!
//! Every value is checked against the same bounds PostgreSQL uses (`io_combine_limit` at most
//! 128 blocks, `io_workers` 1..=32, …) and an out-of-range value names the setting, the bound
//! and the fix.

use std::fmt;
use std::path::Path;
use std::str::FromStr;

use thiserror::Error;

/// Size of one page (PostgreSQL's `BLCKSZ`).
pub const BLCKSZ: usize = crate::storage::BLCKSZ;

/// Largest `io_combine_limit`, in blocks. PostgreSQL caps it at `MAX_IO_COMBINE_LIMIT`
/// (`PG_IOV_MAX` = 128 blocks = 1 MB) because one I/O's iovec array must fit in one
/// `preadv` call and one handle's fixed-size data.
pub const MAX_IO_COMBINE_LIMIT_BLOCKS: usize = 128;

/// Largest `io_workers`; PostgreSQL's `MAX_IO_WORKERS` is 32. Beyond that, hand-off contention
/// on the one shared queue costs more than another thread gains.
pub const MAX_IO_WORKERS: usize = 32;

/// `io_workers` when it was not set: the worker method runs an adaptive pool between
/// `io_min_workers` and `io_max_workers` (PostgreSQL 19). Setting `io_workers = N` asks for a
/// fixed pool of N threads, as in PostgreSQL 18.
pub const IO_WORKERS_ADAPTIVE: usize = 0;

/// Largest `io_worker_idle_timeout` and `io_worker_launch_interval`, in milliseconds:
/// PostgreSQL's bound for millisecond settings (`INT_MAX`).
pub const MAX_IO_WORKER_INTERVAL_MS: u64 = i32::MAX as u64;

/// Largest `io_max_concurrency`. PostgreSQL allows up to 1024 handles per backend; every handle
/// reserves memory for `io_combine_limit` iovecs, so the bound keeps per-backend memory small.
pub const MAX_IO_MAX_CONCURRENCY: usize = 1024;

/// Largest `effective_io_concurrency` (PostgreSQL: 1000).
pub const MAX_EFFECTIVE_IO_CONCURRENCY: usize = 1000;

/// How I/O is executed (PostgreSQL's `io_method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IoMethodKind {
    /// Executed inline at submission with `preadv`/`pwritev`, like PostgreSQL 17.
    Sync,
    /// A pool of `io_workers` threads fed through a bounded shared queue.
    Worker,
    /// One io_uring per backend.
    IoUring,
    /// io_uring when the kernel allows it, otherwise worker (and one line saying why).
    Auto,
}

impl IoMethodKind {
    /// The three concrete methods, in the order the conformance suite runs them.
    pub const CONCRETE: [IoMethodKind; 3] = [
        IoMethodKind::Sync,
        IoMethodKind::Worker,
        IoMethodKind::IoUring,
    ];

    /// The setting's spelling (`sync`, `worker`, `io_uring`, `auto`).
    pub fn as_str(self) -> &'static str {
        match self {
            IoMethodKind::Sync => "sync",
            IoMethodKind::Worker => "worker",
            IoMethodKind::IoUring => "io_uring",
            IoMethodKind::Auto => "auto",
        }
    }
}

impl fmt::Display for IoMethodKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for IoMethodKind {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        match s.trim().to_ascii_lowercase().replace('-', "_").as_str() {
            "sync" => Ok(IoMethodKind::Sync),
            "worker" => Ok(IoMethodKind::Worker),
            "io_uring" | "iouring" | "uring" => Ok(IoMethodKind::IoUring),
            "auto" => Ok(IoMethodKind::Auto),
            _ => Err(ConfigError::Invalid {
                name: "io_method".into(),
                value: s.into(),
                reason: "expected one of: sync, worker, io_uring, auto".into(),
            }),
        }
    }
}

/// PostgreSQL's `huge_pages` setting for the buffer pool's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HugePages {
    /// Use huge pages when the kernel has them, otherwise normal pages.
    Try,
    /// Fail when huge pages cannot be had.
    On,
    /// Never use huge pages.
    Off,
}

impl FromStr for HugePages {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "try" => Ok(HugePages::Try),
            "on" | "true" | "yes" | "1" => Ok(HugePages::On),
            "off" | "false" | "no" | "0" => Ok(HugePages::Off),
            _ => Err(ConfigError::Invalid {
                name: "huge_pages".into(),
                value: s.into(),
                reason: "expected one of: try, on, off".into(),
            }),
        }
    }
}

/// `seq_map_ahead`: whether a serial sequential scan reading cached windows in place has a
/// helper thread map the next windows before it reaches them (`scan::map_ahead`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SeqMapAhead {
    /// On under an io_method with workers of its own (`worker`, `io_uring`) on a machine
    /// with more than one CPU; off under `sync` or on one CPU.
    Auto,
    /// Always (even under `sync`).
    On,
    /// Never: the scanning thread maps every page it reads in place itself.
    Off,
}

impl FromStr for SeqMapAhead {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(SeqMapAhead::Auto),
            "on" | "true" | "yes" | "1" => Ok(SeqMapAhead::On),
            "off" | "false" | "no" | "0" => Ok(SeqMapAhead::Off),
            _ => Err(ConfigError::Invalid {
                name: "seq_map_ahead".into(),
                value: s.into(),
                reason: "expected one of: auto, on, off".into(),
            }),
        }
    }
}

/// A setting that could not be accepted.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The value does not parse or is out of range.
    #[error("invalid value for parameter \"{name}\": \"{value}\": {reason}")]
    Invalid {
        /// Setting name (PostgreSQL spelling).
        name: String,
        /// The rejected value as given.
        value: String,
        /// What is wrong and what would be accepted.
        reason: String,
    },
    /// The name is not a setting this engine knows.
    #[error("unrecognized configuration parameter \"{name}\" (known: {known})")]
    Unknown {
        /// The unknown name.
        name: String,
        /// The known names, for the message.
        known: String,
    },
    /// A configuration file has a malformed or invalid line.
    #[error("configuration file \"{path}\" line {line}: {reason}")]
    File {
        /// File path.
        path: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A configuration file (given, or named by an `include` line) could not be read.
    #[error("could not open configuration file \"{path}\": {reason}{}", included_from_text(.included_from))]
    Open {
        /// The file as resolved (relative includes are resolved against the including file).
        path: String,
        /// The including file and the line of the `include`, when there is one.
        included_from: Option<(String, usize)>,
        /// What is wrong (the OS error, a nesting or cycle problem).
        reason: String,
    },
}

fn included_from_text(from: &Option<(String, usize)>) -> String {
    match from {
        Some((path, line)) => format!(" (included from \"{path}\" line {line})"),
        None => String::new(),
    }
}

/// The engine's settings, named as in PostgreSQL. See `DESIGN.md` for the table.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct IoConfig {
    /// How I/O is executed.
    pub io_method: IoMethodKind,
    /// I/O worker threads for the worker method: a fixed pool of this many, as in
    /// PostgreSQL 18; [`IO_WORKERS_ADAPTIVE`] (0, the default: not set) runs the adaptive pool
    /// between `io_min_workers` and `io_max_workers` instead.
    pub io_workers: usize,
    /// The adaptive pool's floor: threads kept even when idle (PostgreSQL 19's
    /// `io_min_workers`, 1..=32).
    pub io_min_workers: usize,
    /// The adaptive pool's ceiling (PostgreSQL 19's `io_max_workers`, 1..=32).
    pub io_max_workers: usize,
    /// How long the highest-numbered worker may idle before it exits, while the pool is above
    /// `io_min_workers` (PostgreSQL 19's `io_worker_idle_timeout`, in ms).
    pub io_worker_idle_timeout_ms: u64,
    /// Least time between two worker launches (PostgreSQL 19's `io_worker_launch_interval`,
    /// in ms): the pool grows by at most one thread per interval.
    pub io_worker_launch_interval_ms: u64,
    /// AIO handles per backend: the handle budget. A read stream keeps at most
    /// `min(effective_io_concurrency, io_max_concurrency)` reads in flight, and takes in a
    /// completed read (giving its handle back) as soon as its budget is spent, not when the
    /// consumer reaches the page — so handles are held only by reads the device still has,
    /// and buffers waiting to be consumed hold pins, not handles.
    ///
    /// Why decoupled rather than sized from `effective_io_concurrency`: PostgreSQL 18 sizes
    /// it from the pins a backend may hold (`AioChooseMaxConcurrency`: shared_buffers /
    /// (max_connections + auxiliary processes), at most 64) and caps each stream's I/Os by
    /// it; handles tied up by completed-but-unconsumed reads were what starved the stream
    /// here (a queue of finished reads behind one slow one), and freeing them at completion
    /// removes that without more memory per backend. The default 64 is four times the
    /// default `effective_io_concurrency`; raise both together past it (measured in
    /// `docs/BENCHMARKS.md`, "Order-free streams").
    pub io_max_concurrency: usize,
    /// Largest single I/O, in blocks.
    pub io_combine_limit_blocks: usize,
    /// Most I/Os a read stream keeps in flight; 0 means synchronous. Capped per stream by
    /// `io_max_concurrency`.
    pub effective_io_concurrency: usize,
    /// Most I/Os a maintenance job keeps in flight (PostgreSQL's
    /// `maintenance_io_concurrency`, default 16 since PostgreSQL 18): the write streams of
    /// `checksums --enable` use it rather than `effective_io_concurrency`, as VACUUM and
    /// ANALYZE do in PostgreSQL; 0 means one at a time.
    pub maintenance_io_concurrency: usize,
    /// How far ahead of a buffered sequential scan the kernel is told what will be read
    /// (`posix_fadvise(WILLNEED)` in 2 MB pieces), in blocks, always or (under
    /// `seq_read_ahead_auto`) in the stretches where advice measured cheaper; 0 leaves
    /// read-ahead to the kernel alone. No PostgreSQL setting matches: PostgreSQL's read stream advises only
    /// non-sequential reads and leaves sequential ones to the kernel's `read_ahead_kb`, which
    /// keeps a device that needs a deep queue far below its rate (see `scan::readahead`).
    /// Not used under direct I/O, where the read stream is the only read-ahead.
    pub seq_read_ahead_blocks: usize,
    /// `seq_read_ahead = auto` (the default): each scan measures, stretch by stretch, what
    /// the advice (`seq_read_ahead_blocks` ahead) and the kernel's own read-ahead cost it,
    /// and reads ahead the cheaper way (`stream::readahead::Chooser`). Setting a size
    /// turns it off and always advises; 0 never does.
    pub seq_read_ahead_auto: bool,
    /// Whether a buffered sequential scan reads the parts of a heap the page cache already
    /// holds in place, through a read-only mapping, instead of copying them into the buffer
    /// pool (`scan::in_place`); off reads every page through the buffer pool. No PostgreSQL
    /// setting matches: PostgreSQL always copies. Not used under direct I/O, which bypasses
    /// the page cache.
    pub seq_read_in_place: bool,
    /// Whether a serial sequential scan reading cached pages in place has a helper thread
    /// map the next 16 MB windows before the scanning thread reaches them, and unmap the
    /// segments it is done with (`scan::map_ahead`). No PostgreSQL setting matches:
    /// PostgreSQL copies, and its I/O workers do the copies.
    pub seq_map_ahead: SeqMapAhead,
    /// Buffer pool size in bytes.
    pub shared_buffers_bytes: usize,
    /// Huge pages for the buffer pool's memory.
    pub huge_pages: HugePages,
    /// Bypass the page cache (O_DIRECT).
    pub direct_io: bool,
    /// Bound of the file-descriptor cache.
    pub max_open_files: usize,
    /// Publish this process's AIO state (handles in use, counters, worker pool, in-flight
    /// depth) in a shared-memory file other processes read with `pageio aios`. The engine's
    /// I/O path is not touched; a thread copies the state every 10 ms (see
    /// `aio::publish`).
    pub aio_publish: bool,
    /// Where the published files go, one `pageio-aios.<pid>.<n>` per `Aio`.
    pub aio_publish_dir: std::path::PathBuf,
}

/// The default `aio_publish_dir`: memory-backed on every Linux system, and where `pageio
/// aios` looks unless told otherwise.
pub const DEFAULT_AIO_PUBLISH_DIR: &str = "/dev/shm";

impl Default for IoConfig {
    fn default() -> Self {
        IoConfig {
            io_method: IoMethodKind::Worker,
            io_workers: IO_WORKERS_ADAPTIVE,
            io_min_workers: 2,
            io_max_workers: 8,
            io_worker_idle_timeout_ms: 60_000,
            io_worker_launch_interval_ms: 100,
            io_max_concurrency: 64,
            io_combine_limit_blocks: 16,
            effective_io_concurrency: 16,
            maintenance_io_concurrency: 16,
            seq_read_ahead_blocks: DEFAULT_SEQ_READ_AHEAD_BLOCKS,
            seq_read_ahead_auto: true,
            seq_read_in_place: true,
            seq_map_ahead: SeqMapAhead::Auto,
            shared_buffers_bytes: 128 * 1024 * 1024,
            huge_pages: HugePages::Try,
            direct_io: false,
            max_open_files: 1000,
            aio_publish: true,
            aio_publish_dir: std::path::PathBuf::from(DEFAULT_AIO_PUBLISH_DIR),
        }
    }
}

/// How far ahead `seq_read_ahead = auto` advises while advising: 64 MB. On the benchmark disk a single buffered reader
/// advising 16, 64 and 256 MB ahead read at 0.9–1.1, 1.3–1.55 and 1.2–1.35 GB/s, without
/// advice 0.35–0.41 GB/s; a cold `count(abalance)` over `pgbench_accounts` (4 GB) took 3.0, 2.6 and
/// 3.0 s against 4.5 s (docs/BENCHMARKS.md, "Sequential read-ahead advice"). The price: the
/// kernel reads advised pages into 4 kB pages, not large folios, and a later scan of them
/// from the page cache is up to 40% slower (see `scan::readahead`), which is why `auto`
/// measures the two ways rather than always advising.
pub const DEFAULT_SEQ_READ_AHEAD_BLOCKS: usize = (64 << 20) / BLCKSZ;

/// Largest `seq_read_ahead`: 1 GB, one segment file.
pub const MAX_SEQ_READ_AHEAD_BLOCKS: usize = (1 << 30) / BLCKSZ;

/// The names [`IoConfig::set`] accepts.
pub const SETTING_NAMES: [&str; 19] = [
    "io_method",
    "io_workers",
    "io_min_workers",
    "io_max_workers",
    "io_worker_idle_timeout",
    "io_worker_launch_interval",
    "io_max_concurrency",
    "io_combine_limit",
    "effective_io_concurrency",
    "maintenance_io_concurrency",
    "seq_read_ahead",
    "seq_read_in_place",
    "seq_map_ahead",
    "shared_buffers",
    "huge_pages",
    "direct_io",
    "max_open_files",
    "aio_publish",
    "aio_publish_dir",
];

impl IoConfig {
    /// Sets one setting by its PostgreSQL name (dashes are accepted for underscores), parsing
    /// the value with PostgreSQL's unit rules and checking its range.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), ConfigError> {
        let key = name.trim().to_ascii_lowercase().replace('-', "_");
        let value = value.trim();
        match key.as_str() {
            "io_method" => self.io_method = value.parse()?,
            "io_workers" => {
                self.io_workers = parse_count("io_workers", value, 1, MAX_IO_WORKERS)?;
            }
            "io_min_workers" => {
                self.io_min_workers = parse_count("io_min_workers", value, 1, MAX_IO_WORKERS)?;
            }
            "io_max_workers" => {
                self.io_max_workers = parse_count("io_max_workers", value, 1, MAX_IO_WORKERS)?;
            }
            "io_worker_idle_timeout" => {
                self.io_worker_idle_timeout_ms =
                    parse_duration_ms("io_worker_idle_timeout", value)?;
            }
            "io_worker_launch_interval" => {
                self.io_worker_launch_interval_ms =
                    parse_duration_ms("io_worker_launch_interval", value)?;
            }
            "io_max_concurrency" => {
                self.io_max_concurrency =
                    parse_count("io_max_concurrency", value, 1, MAX_IO_MAX_CONCURRENCY)?;
            }
            "io_combine_limit" => {
                let blocks = parse_blocks("io_combine_limit", value)?;
                if !(1..=MAX_IO_COMBINE_LIMIT_BLOCKS).contains(&blocks) {
                    return Err(ConfigError::Invalid {
                        name: "io_combine_limit".into(),
                        value: value.into(),
                        reason: format!(
                            "must be between 1 and {MAX_IO_COMBINE_LIMIT_BLOCKS} blocks (8kB..1MB)"
                        ),
                    });
                }
                self.io_combine_limit_blocks = blocks;
            }
            "effective_io_concurrency" => {
                self.effective_io_concurrency = parse_count(
                    "effective_io_concurrency",
                    value,
                    0,
                    MAX_EFFECTIVE_IO_CONCURRENCY,
                )?;
            }
            "maintenance_io_concurrency" => {
                self.maintenance_io_concurrency = parse_count(
                    "maintenance_io_concurrency",
                    value,
                    0,
                    MAX_EFFECTIVE_IO_CONCURRENCY,
                )?;
            }
            "seq_read_ahead" => {
                (self.seq_read_ahead_blocks, self.seq_read_ahead_auto) =
                    parse_seq_read_ahead(value)?;
            }
            "seq_read_in_place" => {
                self.seq_read_in_place = parse_bool("seq_read_in_place", value)?;
            }
            "seq_map_ahead" => self.seq_map_ahead = value.parse()?,
            "shared_buffers" => {
                // A bare number is a count of 8kB buffers, as in postgresql.conf.
                let blocks = parse_blocks("shared_buffers", value)?;
                if blocks < 16 {
                    return Err(ConfigError::Invalid {
                        name: "shared_buffers".into(),
                        value: value.into(),
                        reason: "must be at least 128kB (16 buffers)".into(),
                    });
                }
                self.shared_buffers_bytes = blocks * BLCKSZ;
            }
            "huge_pages" => self.huge_pages = value.parse()?,
            "direct_io" | "debug_io_direct" => self.direct_io = parse_bool("direct_io", value)?,
            "max_open_files" | "max_files_per_process" => {
                self.max_open_files = parse_count("max_open_files", value, 8, 1 << 20)?;
            }
            "aio_publish" => self.aio_publish = parse_bool("aio_publish", value)?,
            "aio_publish_dir" => {
                let dir = value.trim_matches('\'');
                if dir.is_empty() {
                    return Err(ConfigError::Invalid {
                        name: "aio_publish_dir".into(),
                        value: value.into(),
                        reason: "must name a directory (or set aio_publish = off)".into(),
                    });
                }
                self.aio_publish_dir = std::path::PathBuf::from(dir);
            }
            _ => {
                return Err(ConfigError::Unknown {
                    name: name.into(),
                    known: SETTING_NAMES.join(", "),
                })
            }
        }
        Ok(())
    }

    /// Applies a `postgresql.conf`-syntax file: the settings pageio uses are set (a later
    /// line overrides an earlier one, as in PostgreSQL), every other setting is ignored, and
    /// `include`, `include_if_exists` and `include_dir` are followed (see [`read_conf_file`]).
    /// Returns what was applied and what was ignored.
    pub fn load_file(&mut self, path: &Path) -> Result<ConfLoad, ConfigError> {
        let entries = read_conf_file(path)?;
        let mut report = ConfLoad::default();
        for entry in entries {
            match canonical_setting_name(&entry.name) {
                Some(_) => {
                    self.set(&entry.name, &entry.value)
                        .map_err(|e| ConfigError::File {
                            path: entry.path.display().to_string(),
                            line: entry.line,
                            reason: e.to_string(),
                        })?;
                    report.applied.push(entry);
                }
                None => {
                    if let Some(near) = near_setting_name(&entry.name) {
                        return Err(ConfigError::File {
                            path: entry.path.display().to_string(),
                            line: entry.line,
                            reason: format!(
                                "unrecognized configuration parameter \"{}\": did you mean \"{near}\"?",
                                entry.name
                            ),
                        });
                    }
                    report.ignored.push(entry);
                }
            }
        }
        Ok(report)
    }

    /// The worker method's pool: `(min, max)` threads. `io_workers = N` gives `(N, N)`, a
    /// fixed pool as in PostgreSQL 18; otherwise `(io_min_workers, io_max_workers)`, the
    /// adaptive pool of PostgreSQL 19.
    pub fn io_worker_bounds(&self) -> (usize, usize) {
        if self.io_workers == IO_WORKERS_ADAPTIVE {
            (self.io_min_workers, self.io_max_workers)
        } else {
            (self.io_workers, self.io_workers)
        }
    }

    /// `io_combine_limit` in bytes.
    pub fn io_combine_limit_bytes(&self) -> usize {
        self.io_combine_limit_blocks * BLCKSZ
    }

    /// Checks the cross-setting invariants the per-setting parsers cannot see.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let checks: [(&str, usize, usize, usize); 7] = [
            (
                "io_workers",
                self.io_workers,
                IO_WORKERS_ADAPTIVE,
                MAX_IO_WORKERS,
            ),
            ("io_min_workers", self.io_min_workers, 1, MAX_IO_WORKERS),
            ("io_max_workers", self.io_max_workers, 1, MAX_IO_WORKERS),
            (
                "io_max_concurrency",
                self.io_max_concurrency,
                1,
                MAX_IO_MAX_CONCURRENCY,
            ),
            (
                "io_combine_limit",
                self.io_combine_limit_blocks,
                1,
                MAX_IO_COMBINE_LIMIT_BLOCKS,
            ),
            (
                "effective_io_concurrency",
                self.effective_io_concurrency,
                0,
                MAX_EFFECTIVE_IO_CONCURRENCY,
            ),
            (
                "maintenance_io_concurrency",
                self.maintenance_io_concurrency,
                0,
                MAX_EFFECTIVE_IO_CONCURRENCY,
            ),
        ];
        for (name, value, lo, hi) in checks {
            if value < lo || value > hi {
                return Err(ConfigError::Invalid {
                    name: name.into(),
                    value: value.to_string(),
                    reason: format!("must be between {lo} and {hi}"),
                });
            }
        }
        for (name, value) in [
            ("io_worker_idle_timeout", self.io_worker_idle_timeout_ms),
            (
                "io_worker_launch_interval",
                self.io_worker_launch_interval_ms,
            ),
        ] {
            if value > MAX_IO_WORKER_INTERVAL_MS {
                return Err(ConfigError::Invalid {
                    name: name.into(),
                    value: format!("{value}ms"),
                    reason: format!("must be at most {MAX_IO_WORKER_INTERVAL_MS}ms"),
                });
            }
        }
        if self.io_min_workers > self.io_max_workers {
            return Err(ConfigError::Invalid {
                name: "io_min_workers".into(),
                value: self.io_min_workers.to_string(),
                reason: format!(
                    "must not exceed io_max_workers ({}): raise io_max_workers or lower io_min_workers",
                    self.io_max_workers
                ),
            });
        }
        Ok(())
    }
}

/// Deepest nesting of `include` directives, as PostgreSQL's `CONF_FILE_MAX_DEPTH` (10): a
/// deeper chain is almost certainly a mistake, and the bound keeps the reader finite even
/// when the cycle check is defeated (for example through bind mounts).
pub const CONF_FILE_MAX_DEPTH: usize = 10;

/// The largest configuration file read: PostgreSQL 18's own `postgresql.conf` is about
/// 32 kB, so 16 MiB is 500 times any real one, and a path such as `/dev/zero` or a huge file
/// named by `include` is refused before it is read instead of filling memory.
pub const CONF_FILE_MAX_BYTES: u64 = 16 << 20;

/// The most bytes read over a file and all its includes (each file is held while its
/// includes are read, so this also bounds the reader's memory).
pub const CONF_TOTAL_MAX_BYTES: u64 = 64 << 20;

/// The longest configuration line accepted: a setting's value is a name, a number or a
/// short list; a longer line is not a setting.
pub const CONF_LINE_MAX_BYTES: usize = 64 << 10;

/// How much of a line an error message quotes.
const CONF_QUOTE_MAX_BYTES: usize = 200;

/// At most [`CONF_QUOTE_MAX_BYTES`] of `line` (cut at a character boundary), with `…` when
/// cut, for error messages.
fn quoted_excerpt(line: &str) -> String {
    if line.len() <= CONF_QUOTE_MAX_BYTES {
        return line.to_string();
    }
    let mut end = CONF_QUOTE_MAX_BYTES;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &line[..end])
}

/// One `name = value` line of a configuration file, with where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfEntry {
    /// Setting name as written.
    pub name: String,
    /// Value, unquoted.
    pub value: String,
    /// The file holding the line.
    pub path: std::path::PathBuf,
    /// 1-based line number.
    pub line: usize,
}

/// What [`IoConfig::load_file`] did with a configuration file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfLoad {
    /// Lines that set a setting pageio uses, in the order applied.
    pub applied: Vec<ConfEntry>,
    /// Lines naming settings pageio does not use (`max_connections`, `log_timezone`, …).
    pub ignored: Vec<ConfEntry>,
}

/// The pageio setting a configuration name sets (`max_files_per_process` sets
/// `max_open_files`, `debug_io_direct` sets `direct_io`), or `None` for a setting pageio does
/// not use. Dashes count as underscores and case is ignored, as [`IoConfig::set`] does.
pub fn canonical_setting_name(name: &str) -> Option<&'static str> {
    let key = name.trim().to_ascii_lowercase().replace('-', "_");
    match key.as_str() {
        "max_files_per_process" => Some("max_open_files"),
        "debug_io_direct" => Some("direct_io"),
        k => SETTING_NAMES.iter().copied().find(|n| *n == k),
    }
}

/// Edit distance up to which an unknown name is taken for a misspelt pageio setting. Two
/// catches a dropped, doubled or swapped letter; no PostgreSQL 18 setting is that close to
/// one of pageio's (the nearest, `io_max_combine_limit`, is four away from
/// `io_combine_limit`).
const MISSPELLING_DISTANCE: usize = 2;

/// The pageio setting `name` looks like a misspelling of, if any.
fn near_setting_name(name: &str) -> Option<&'static str> {
    let key = name.trim().to_ascii_lowercase().replace('-', "_");
    SETTING_NAMES
        .iter()
        .copied()
        .find(|known| edit_distance(&key, known) <= MISSPELLING_DISTANCE)
}

/// Levenshtein distance (names are short, so the quadratic table is fine).
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitute = prev[j] + usize::from(ca != cb);
            cur[j + 1] = substitute.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// Reads a `postgresql.conf`-syntax file as PostgreSQL's configuration reader does: every
/// `name = value` line in order, following `include 'file'` (an error when missing),
/// `include_if_exists 'file'` (skipped when missing) and `include_dir 'dir'` (its `*.conf`
/// files not starting with `.`, in name order). A relative include is resolved against the
/// directory of the file that names it. Nesting is bounded by [`CONF_FILE_MAX_DEPTH`], and a
/// file that includes itself, directly or not, is reported as a cycle naming the chain.
pub fn read_conf_file(path: &Path) -> Result<Vec<ConfEntry>, ConfigError> {
    let mut out = Vec::new();
    let mut stack = Vec::new();
    let mut budget_bytes = CONF_TOTAL_MAX_BYTES;
    read_conf_recursive(path, None, &mut stack, &mut budget_bytes, &mut out)?;
    Ok(out)
}

/// The setting part of a configuration file's line (before any comment) as text: a line
/// longer than [`CONF_LINE_MAX_BYTES`], a NUL outside a comment, or bytes that are not
/// UTF-8 are errors made by `file_err`.
fn conf_line_setting_text(
    raw: &[u8],
    file_err: impl Fn(String) -> ConfigError,
) -> Result<&str, ConfigError> {
    if raw.len() > CONF_LINE_MAX_BYTES {
        return Err(file_err(format!(
            "the line is {} bytes, longer than the {CONF_LINE_MAX_BYTES} a setting may take (CONF_LINE_MAX_BYTES); it starts \"{}\"",
            raw.len(),
            quoted_excerpt(&String::from_utf8_lossy(raw))
        )));
    }
    let setting_part = &raw[..comment_start(raw)];
    if let Some(column) = setting_part.iter().position(|b| *b == 0) {
        return Err(file_err(format!(
            "the line holds a NUL byte at byte {}, outside a comment, which PostgreSQL refuses too (\"syntax error\"): \"{}\"; remove it",
            column + 1,
            quoted_excerpt(&String::from_utf8_lossy(setting_part).replace('\0', "\\0"))
        )));
    }
    std::str::from_utf8(setting_part).map_err(|e| {
        file_err(format!(
            "byte {} is not UTF-8 text, and pageio reads settings as UTF-8: \"{}\"; write the value in UTF-8 (a comment may hold any bytes)",
            e.valid_up_to() + 1,
            quoted_excerpt(&String::from_utf8_lossy(setting_part))
        ))
    })
}

fn read_conf_recursive(
    path: &Path,
    included_from: Option<(String, usize)>,
    stack: &mut Vec<std::path::PathBuf>,
    budget_bytes: &mut u64,
    out: &mut Vec<ConfEntry>,
) -> Result<(), ConfigError> {
    let open_err = |reason: String| ConfigError::Open {
        path: path.display().to_string(),
        included_from: included_from.clone(),
        reason,
    };
    // The given file is depth 0; as in PostgreSQL, depth 10 is allowed and 11 is not.
    if stack.len() > CONF_FILE_MAX_DEPTH {
        return Err(open_err(format!(
            "maximum nesting depth of {CONF_FILE_MAX_DEPTH} include levels exceeded"
        )));
    }
    let limit = CONF_FILE_MAX_BYTES.min(*budget_bytes);
    let bytes = crate::storage::read_small_file_through_links(path, limit).map_err(|e| match e {
        crate::storage::SmallFileError::Missing => {
            open_err(std::io::Error::from_raw_os_error(libc::ENOENT).to_string())
        }
        crate::storage::SmallFileError::TooLarge { size_bytes, .. } => open_err(format!(
            "it is {size_bytes} bytes, and a configuration file may have at most {CONF_FILE_MAX_BYTES} (CONF_FILE_MAX_BYTES), all files read through includes at most {CONF_TOTAL_MAX_BYTES} together (CONF_TOTAL_MAX_BYTES): is the path right?"
        )),
        other => open_err(other.to_string()),
    })?;
    *budget_bytes -= bytes.len() as u64;
    // The canonical path identifies the file however it was named, for the cycle check.
    let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    if let Some(first) = stack.iter().position(|p| *p == canonical) {
        let chain: Vec<String> = stack[first..]
            .iter()
            .chain(std::iter::once(&canonical))
            .map(|p| p.display().to_string())
            .collect();
        return Err(open_err(format!(
            "include cycle: {}",
            chain.join(" includes ")
        )));
    }
    stack.push(canonical);
    let base = path.parent().unwrap_or(Path::new("."));
    // Lines are cut from bytes, not from a decoded text: PostgreSQL reads bytes, and a
    // comment may hold anything (a Latin-1 word, a NUL) without stopping the server, while
    // the setting part of a line must be text.
    let mut lines: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    if lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    for (index, raw) in lines.into_iter().enumerate() {
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let line_no = index + 1;
        let here = Some((path.display().to_string(), line_no));
        let file_err = |reason: String| ConfigError::File {
            path: path.display().to_string(),
            line: line_no,
            reason,
        };
        let line = conf_line_setting_text(raw, file_err)?;
        let Some((name, value)) = parse_conf_line(line).map_err(file_err)? else {
            continue;
        };
        let target = base.join(&value);
        match name.to_ascii_lowercase().as_str() {
            "include" => read_conf_recursive(&target, here, stack, budget_bytes, out)?,
            "include_if_exists" => {
                if target.exists() {
                    read_conf_recursive(&target, here, stack, budget_bytes, out)?;
                }
            }
            "include_dir" => {
                let entries = std::fs::read_dir(&target).map_err(|e| ConfigError::Open {
                    path: target.display().to_string(),
                    included_from: here.clone(),
                    reason: e.to_string(),
                })?;
                let mut files: Vec<std::path::PathBuf> = entries
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| {
                        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                        !name.starts_with('.') && name.ends_with(".conf") && p.is_file()
                    })
                    .collect();
                // PostgreSQL sorts by name with strcmp, so the order is byte order.
                files.sort();
                for file in files {
                    read_conf_recursive(&file, here.clone(), stack, budget_bytes, out)?;
                }
            }
            _ => out.push(ConfEntry {
                name,
                value,
                path: path.to_path_buf(),
                line: line_no,
            }),
        }
    }
    stack.pop();
    Ok(())
}

/// Where a line's comment starts: the first `#` outside a quoted value (`''` and `\'` inside
/// quotes do not end it), or the line's length when there is none.
fn comment_start(line: &[u8]) -> usize {
    let mut quoted = false;
    let mut i = 0;
    while i < line.len() {
        match line[i] {
            b'\\' if quoted => i += 1,
            b'\'' => quoted = !quoted,
            b'#' if !quoted => return i,
            _ => {}
        }
        i += 1;
    }
    line.len()
}

/// Parses one `postgresql.conf` line into `(name, value)`; `Ok(None)` for blank and comment
/// lines. Values may be bare or single-quoted (`''` or `\'` inside quotes is one quote, and
/// an empty quoted value is allowed); `=` is optional, as in PostgreSQL.
pub fn parse_conf_line(line: &str) -> Result<Option<(String, String)>, String> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    let name_end = line
        .find(|c: char| c.is_whitespace() || c == '=')
        .unwrap_or(line.len());
    let name = &line[..name_end];
    let mut rest = line[name_end..].trim_start();
    if let Some(stripped) = rest.strip_prefix('=') {
        rest = stripped.trim_start();
    }
    let value = if let Some(quoted) = rest.strip_prefix('\'') {
        let mut out = String::new();
        let mut chars = quoted.chars().peekable();
        let mut closed = false;
        while let Some(c) = chars.next() {
            if c == '\\' {
                // PostgreSQL's GUC_scanstr escapes.
                match chars.next() {
                    Some('n') => out.push('\n'),
                    Some('t') => out.push('\t'),
                    Some('r') => out.push('\r'),
                    Some(other) => out.push(other),
                    None => {}
                }
            } else if c == '\'' {
                if chars.peek() == Some(&'\'') {
                    chars.next();
                    out.push('\'');
                } else {
                    closed = true;
                    break;
                }
            } else {
                out.push(c);
            }
        }
        if !closed {
            return Err(format!("unterminated quoted value for \"{name}\""));
        }
        let trailing: String = chars.collect();
        let trailing = trailing.trim_start();
        if name.is_empty() || !(trailing.is_empty() || trailing.starts_with('#')) {
            return Err(format!(
                "expected \"name = value\", got \"{}\"",
                quoted_excerpt(line)
            ));
        }
        return Ok(Some((name.to_string(), out)));
    } else {
        rest.split('#').next().unwrap_or("").trim().to_string()
    };
    if name.is_empty() || value.is_empty() {
        return Err(format!(
            "expected \"name = value\", got \"{}\"",
            quoted_excerpt(line)
        ));
    }
    Ok(Some((name.to_string(), value)))
}

/// Parses a memory size with PostgreSQL's units (`B`, `kB`, `MB`, `GB`, `TB`, 1024-based);
/// a bare number is bytes.
pub fn parse_size_bytes(name: &str, value: &str) -> Result<usize, ConfigError> {
    parse_with_unit(name, value, 1)
}

/// `seq_read_ahead`: `auto` (measured, advising 64 MB ahead when it advises), or a size
/// from 0 (the kernel's read-ahead alone) to 1GB, always advised; (blocks, auto).
fn parse_seq_read_ahead(value: &str) -> Result<(usize, bool), ConfigError> {
    if value.trim().eq_ignore_ascii_case("auto") {
        return Ok((DEFAULT_SEQ_READ_AHEAD_BLOCKS, true));
    }
    // A bare number is blocks, as for PostgreSQL's block-valued settings. Either way of
    // being wrong is told that `auto` is a value too.
    let blocks = parse_blocks("seq_read_ahead", value).map_err(|e| match e {
        ConfigError::Invalid {
            name,
            value,
            reason,
        } => ConfigError::Invalid {
            name,
            value,
            reason: format!("{reason}; or auto"),
        },
        other => other,
    })?;
    if blocks > MAX_SEQ_READ_AHEAD_BLOCKS {
        return Err(ConfigError::Invalid {
            name: "seq_read_ahead".into(),
            value: value.into(),
            reason: "must be auto, or between 0 (off) and 1GB".into(),
        });
    }
    Ok((blocks, false))
}

/// Parses a block-valued setting: a bare number is blocks, a memory unit is converted to
/// blocks and must be a whole number of them.
pub fn parse_blocks(name: &str, value: &str) -> Result<usize, ConfigError> {
    let bytes = parse_with_unit(name, value, BLCKSZ)?;
    if bytes % BLCKSZ != 0 {
        return Err(ConfigError::Invalid {
            name: name.into(),
            value: value.into(),
            reason: "must be a multiple of the 8kB block size".into(),
        });
    }
    Ok(bytes / BLCKSZ)
}

fn parse_with_unit(name: &str, value: &str, bare_unit_bytes: usize) -> Result<usize, ConfigError> {
    let invalid = |reason: &str| ConfigError::Invalid {
        name: name.into(),
        value: value.into(),
        reason: reason.into(),
    };
    let v = value.trim();
    let digits_end = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    if digits_end == 0 {
        return Err(invalid(
            "expected a number with an optional unit (B, kB, MB, GB, TB)",
        ));
    }
    let number: usize = v[..digits_end]
        .parse()
        .map_err(|_| invalid("number too large"))?;
    let unit = v[digits_end..].trim();
    let multiplier: usize = match unit {
        "" => bare_unit_bytes,
        "B" => 1,
        "kB" | "KB" | "k" | "K" => 1 << 10,
        "MB" | "M" => 1 << 20,
        "GB" | "G" => 1 << 30,
        "TB" | "T" => 1 << 40,
        _ => {
            return Err(invalid(
                "unknown unit: valid units are \"B\", \"kB\", \"MB\", \"GB\" and \"TB\"",
            ))
        }
    };
    number
        .checked_mul(multiplier)
        .ok_or_else(|| invalid("value too large"))
}

/// A PostgreSQL time value of a millisecond setting: a bare number is milliseconds; units
/// `us`, `ms`, `s`, `min`, `h`, `d` are converted (rounded to whole milliseconds, as
/// PostgreSQL rounds), and the result is at most [`MAX_IO_WORKER_INTERVAL_MS`].
pub fn parse_duration_ms(name: &str, value: &str) -> Result<u64, ConfigError> {
    let v = value.trim();
    let split = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(v.len());
    let (number, unit) = (v[..split].trim(), v[split..].trim());
    let invalid = |reason: String| ConfigError::Invalid {
        name: name.into(),
        value: value.into(),
        reason,
    };
    let n: f64 = number
        .parse()
        .map_err(|_| invalid("expected a time such as 100ms, 60s or 1min".into()))?;
    let per_unit_ms = match unit {
        "" | "ms" => 1.0,
        "us" => 0.001,
        "s" => 1_000.0,
        "min" => 60_000.0,
        "h" => 3_600_000.0,
        "d" => 86_400_000.0,
        other => {
            return Err(invalid(format!(
                "unknown time unit \"{other}\": valid units are us, ms, s, min, h and d"
            )))
        }
    };
    let ms = (n * per_unit_ms).round();
    if !ms.is_finite() || ms > MAX_IO_WORKER_INTERVAL_MS as f64 {
        return Err(invalid(format!(
            "must be at most {MAX_IO_WORKER_INTERVAL_MS}ms"
        )));
    }
    Ok(ms as u64)
}

fn parse_count(name: &str, value: &str, lo: usize, hi: usize) -> Result<usize, ConfigError> {
    let n: usize = value.trim().parse().map_err(|_| ConfigError::Invalid {
        name: name.into(),
        value: value.into(),
        reason: "expected a whole number".into(),
    })?;
    if n < lo || n > hi {
        return Err(ConfigError::Invalid {
            name: name.into(),
            value: value.into(),
            reason: format!("must be between {lo} and {hi}"),
        });
    }
    Ok(n)
}

/// Parses a PostgreSQL boolean (`on`/`off`, `true`/`false`, `yes`/`no`, `1`/`0`).
pub fn parse_bool(name: &str, value: &str) -> Result<bool, ConfigError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "on" | "true" | "yes" | "1" | "data" => Ok(true),
        "off" | "false" | "no" | "0" | "" => Ok(false),
        _ => Err(ConfigError::Invalid {
            name: name.into(),
            value: value.into(),
            reason: "expected on or off".into(),
        }),
    }
}

pub mod terms;
pub use terms::{set_term_spelling, Term};

#[cfg(test)]
mod tests;

#[cfg(test)]
mod bounded_input_tests;
