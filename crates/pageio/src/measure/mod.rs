//! # Measured I/O settings
//!
//! `effective_io_concurrency`, `io_method`, `io_workers` and `random_page_cost` are usually
//! chosen from a form ("SSD or HDD?"). This module measures instead: what the device under
//! a PostgreSQL data directory delivers, and what the engine delivers on it under each
//! io_method — in a fixed time, without writing a byte inside the cluster — and
//! [`recommend`] turns the numbers into settings, each with the numbers behind it.
//!
//! ## Mechanism
//!
//! ```text
//!  MeasureTarget::DataDirectory(PGDATA)         MeasureTarget::Directory(DIR)
//!    cluster walk (as pg_checksums walks it)      refuse DIR inside a cluster or tablespace
//!    ├─ largest segment files ─┐                  write DIR/pageio-measure-scratch-<pid>:
//!    └─ largest heap ──────┐   │                  checksummed heap pages, ≤ 256 MB, ≤ 1/10
//!                          │   │                  of the free space, bounded by its time share
//!                          │   ▼                  (removed on success, error and cancel)
//!                          │  device: O_DIRECT preads (device.rs), read-only
//!                          │    sequential 128 kB at depth 32 → bytes/s
//!                          │    random 8 kB at depth 1, 2, 4, … 64 → reads/s (two rounds,
//!                          │    the best of each depth's two kept)
//!                          ▼
//!                         engine: the relation through ReadStream + BufferPool, cold
//!                           (evicted with RelFile::evict_from_page_cache before each pass),
//!                           every block in order and a sparse 1-in-8 subset (bitmap-like),
//!                           under sync · worker (3) · worker (more) · io_uring if the
//!                           engine's probe allows it → pages/s
//! ```
//!
//! ## The time bound
//!
//! The whole run is bounded by `seconds` (default 30). Each run of a phase (the scratch
//! file, one device pattern or depth, one io_method) has a weight; when a run starts it gets
//! `remaining time × its weight ÷ the weights still to come`, so a phase that finishes early
//! (a small relation, a PGDATA needing no scratch file) leaves its time to the ones after it.
//! Every loop checks its deadline at least every few milliseconds or every 1 MB, so the run
//! ends within a small slack of the bound (the reads in flight when a deadline passes,
//! setting up one I/O method, evicting one file). A run always completes at least one
//! read and lasts at least 40 ms (`MIN_RUN`, below which a rate measures thread start-up),
//! so every rate it reports is above zero — and a bound below half a second is exceeded
//! by that floor.
//!
//! ## Worked example
//!
//! `seconds = 30` on a directory, io_uring allowed: weights 2 (scratch) + 8 × 1 (sequential,
//! and seven queue depths in two rounds of ½ each) + 8 × 1.5 (sync, worker 3, worker 6,
//! io_uring, each sequential and sparse) = 22. The scratch file gets up to 2.7 s; if it is
//! written in 1 s, the 29 s left are shared by 20 weights: ~1.45 s for the sequential probe,
//! ~0.7 s per depth and round, ~2.2 s per method and pattern.
//!
//! ## Writing only where asked
//!
//! With a data directory nothing is written: relation files are opened read-only, and the
//! cold passes only ask the kernel to drop their cached pages. With a directory, the one
//! file written is the scratch file, created with `O_EXCL` under a name that says what it
//! is, and removed by a guard on every path out (success, error, panic, and cancel — the
//! caller's Ctrl-C handler sets [`MeasureOptions::cancel`]).
//!
//! On a running cluster the cold passes evict the largest table's pages from the kernel's
//! page cache (not from the server's shared_buffers), so the server reads them from the
//! device again afterwards; the measurement notes it when `postmaster.pid` is present.

pub mod device;
mod recommend;
pub mod saved;

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::aio::AioError;
use crate::buffer::{BufferError, BufferPool, PageCheckOptions};
use crate::config::{IoConfig, IoMethodKind, BLCKSZ};
use crate::page::builder::{set_checksum, HeapTupleBuilder, PageBuilder};
use crate::page::control::ControlFile;
use crate::page::header::PageHeader;
use crate::page::heap::Datum;
use crate::page::ItemPointer;
use crate::storage::{RelFile, StorageError};
use crate::stream::{ReadStream, StreamOptions};
use crate::verify::walk::walk_cluster;
use crate::verify::VerifyError;
use crate::Aio;

pub use device::{Pattern, ProbeError, ProbeFiles, ProbeRate};
pub use recommend::{recommend, Recommendation, Recommendations};

/// Default time bound of a whole measurement: long enough for each of the ~12 runs to
/// average over a second or two of reads, short enough to run before a change window.
pub const DEFAULT_SECONDS: f64 = 30.0;

/// Longest measurement accepted: a bound is a promise to the caller, and an hour is past
/// any use of "measure before you configure".
pub const MAX_SECONDS: f64 = 3600.0;

/// The queue depths measured by default: powers of two from 1 to 64, enough to see where
/// the random-read rate stops growing (the knee `effective_io_concurrency` is set at) and
/// whether depth 64 still gains over 32 (for `maintenance_io_concurrency`).
pub const DEFAULT_QUEUE_DEPTHS: [usize; 7] = [1, 2, 4, 8, 16, 32, 64];

/// Random read size: PostgreSQL's block, the unit an index or bitmap-heap scan reads.
pub const RANDOM_READ_SIZE_BYTES: usize = BLCKSZ;

/// Sequential read size: 128 kB, PostgreSQL 18's default `io_combine_limit`, the size of a
/// sequential scan's reads.
pub const SEQUENTIAL_READ_SIZE_BYTES: usize = 128 * 1024;

/// Sequential queue depth: a sequential scan with look-ahead keeps many combined reads in
/// flight (the kernel's read-ahead or the stream's), so the bandwidth is measured at a
/// depth where the device is saturated, as fio's usual `--iodepth=32`.
pub const SEQUENTIAL_QUEUE_DEPTH: usize = 32;

/// Largest scratch file: large enough that random reads spread over far more than a
/// device's own cache (tens of MB on SSDs and virtual disks), small enough to write in a
/// few seconds on a slow disk.
pub const DEFAULT_SCRATCH_SIZE_BYTES: u64 = 256 << 20;

/// Smallest scratch file written whatever the time share: below this the random reads
/// measure the device's cache rather than its media. It takes well under a second on any
/// disk in use today.
pub const MIN_SCRATCH_SIZE_BYTES: u64 = 16 << 20;

/// The scratch file takes at most this fraction of the file system's free space, so a
/// measurement never fills a disk a database is about to grow into.
pub const SCRATCH_FREE_SPACE_DIVISOR: u64 = 10;

/// Scratch writes are issued in pieces of this size, and the time share is checked between
/// them: 1 MB takes milliseconds even on a slow disk.
const SCRATCH_WRITE_CHUNK_BYTES: usize = 1 << 20;

/// Prefix of the scratch file's name, so that anyone finding one knows what made it.
pub const SCRATCH_FILE_PREFIX: &str = "pageio-measure-scratch-";

/// Most segment files the device probe reads in a data directory: the largest ones, enough
/// to spread random reads over most of a cluster's data without opening thousands of files.
pub const MAX_PROBE_FILES: usize = 8;

/// Most relations whose first page is read to find the largest heap (candidates are taken
/// largest first, so the first heap found is the answer; indexes and sequences in between
/// are few in any real cluster). Bounds the work on a cluster with many large indexes.
const MAX_HEAP_CANDIDATES: usize = 64;

/// `effective_io_concurrency` of the engine reads: PostgreSQL 18's default, so that the
/// methods are compared as an untuned server would run them.
pub const ENGINE_EFFECTIVE_IO_CONCURRENCY: usize = 16;

/// `shared_buffers` of the engine reads: each pass uses a fresh pool (so every page is a
/// miss) and a sequential read recycles a small bulk-read ring, so a small pool suffices and
/// keeps the per-pass allocation cheap.
const ENGINE_SHARED_BUFFERS_BYTES: usize = 32 << 20;

/// The deadline is checked every this many blocks handed to a stream: at 1 GB/s that is
/// every 0.5 ms, and checking the clock per block would cost more than the check is worth.
const DEADLINE_CHECK_BLOCKS: u64 = 64;

/// Weight of the scratch-file run in the time split (see the module header): writing costs
/// about twice a read of the same size on most devices.
const WEIGHT_SCRATCH: f64 = 2.0;
/// Weight of one device probe run.
const WEIGHT_DEVICE_RUN: f64 = 1.0;
/// Weight of one io_method run: more than a device run, since it also sets up the method
/// and evicts the relation before each pass.
const WEIGHT_ENGINE_RUN: f64 = 1.5;

/// The sparse pattern reads about one block in this many: a bitmap heap scan of the
/// published `uniform` table (18 rows per page) at ~1% of its rows touches ~1 page in 6, and
/// its reads are single blocks with gaps the look-ahead must cover — the case where the
/// published benchmarks find io_method and io_workers matter most.
pub const SPARSE_STRIDE_BLOCKS: u64 = 8;

/// The random-read depth sweep is measured in this many rounds, each over every depth, and
/// each depth keeps its best round: a shared or virtual disk slows down for seconds at a
/// time, and two rounds apart in time let one slow spell cost a depth one round, not its
/// place on the curve.
pub const SWEEP_ROUNDS: usize = 2;

/// Shortest run: below this a rate is dominated by thread start-up and clock resolution.
const MIN_RUN: Duration = Duration::from_millis(40);

/// Fewest I/O workers the "more workers" run uses: twice PostgreSQL 18's default of 3, so
/// that the comparison asks a real question even on a machine with one or two CPUs
/// (I/O workers mostly wait for the device, so more of them than CPUs can help).
pub const MORE_WORKERS_MIN: usize = 6;

/// The "more workers" run uses this many workers per effective CPU (bounded by the engine's
/// limit of 32 workers).
pub const MORE_WORKERS_PER_CPU: usize = 2;

/// What to measure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MeasureTarget {
    /// A PostgreSQL data directory: read-only, on its largest relation files and its
    /// largest heap.
    DataDirectory(PathBuf),
    /// A directory on the file system to measure (PGDATA's, for a cluster not yet made):
    /// a scratch file is written there and removed. Refused inside a PostgreSQL cluster.
    Directory(PathBuf),
}

/// A measurement's phases, for progress reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "phase")]
pub enum Phase {
    /// Writing the scratch file.
    Prepare,
    /// Sequential bandwidth.
    Sequential,
    /// Random reads at one queue depth.
    Random {
        /// The queue depth.
        queue_depth: usize,
    },
    /// Reading the relation under one io_method.
    Relation {
        /// The method.
        io_method: IoMethodKind,
        /// Its worker count (worker only).
        io_workers: Option<usize>,
    },
    /// Done; the scratch file (if any) removed.
    Done,
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Phase::Prepare => f.write_str("writing the scratch file"),
            Phase::Sequential => f.write_str("sequential 128 kB reads"),
            Phase::Random { queue_depth } => write!(f, "random 8 kB reads at depth {queue_depth}"),
            Phase::Relation {
                io_method,
                io_workers,
            } => write!(
                f,
                "relation read, io_method = {}",
                method_label(*io_method, *io_workers)
            ),
            Phase::Done => f.write_str("done"),
        }
    }
}

/// A progress callback: the phase starting and the fraction of the time bound used so far
/// (0.0 to 1.0). Called from the measuring thread, between runs.
pub type ProgressFn = Arc<dyn Fn(Phase, f64) + Send + Sync>;

/// The probe deciding whether io_uring is measured: the engine's start-up probe by default;
/// tests inject a refusal.
pub type UringProbeFn = fn() -> Result<(), AioError>;

/// Options of [`run`].
#[derive(Clone)]
pub struct MeasureOptions {
    /// What to measure.
    pub target: MeasureTarget,
    /// Time bound of the whole measurement, in seconds.
    pub seconds: f64,
    /// Queue depths of the random-read runs; must include 1 and 32 (the two rates every
    /// recommendation needs).
    pub queue_depths: Vec<usize>,
    /// Largest scratch file (directory targets only).
    pub scratch_size_bytes: u64,
    /// CPUs the workload may use (a container's limit); `None` = this process's
    /// available parallelism. Sizes the "more workers" run.
    pub effective_cpus: Option<usize>,
    /// Whether io_uring may be used (the engine's probe unless replaced).
    pub io_uring_probe: UringProbeFn,
    /// Progress reports.
    pub progress: Option<ProgressFn>,
    /// Set by the caller (a Ctrl-C handler) to stop early: [`run`] returns
    /// [`MeasureError::Cancelled`] after removing its scratch file.
    pub cancel: Option<Arc<AtomicBool>>,
}

impl std::fmt::Debug for MeasureOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MeasureOptions")
            .field("target", &self.target)
            .field("seconds", &self.seconds)
            .field("queue_depths", &self.queue_depths)
            .field("scratch_size_bytes", &self.scratch_size_bytes)
            .field("effective_cpus", &self.effective_cpus)
            .field("progress", &self.progress.is_some())
            .field("cancel", &self.cancel)
            .finish_non_exhaustive()
    }
}

impl MeasureOptions {
    /// The defaults for `target`: 30 s, depths 1 to 64, a scratch file of up to 256 MB.
    pub fn new(target: MeasureTarget) -> MeasureOptions {
        MeasureOptions {
            target,
            seconds: DEFAULT_SECONDS,
            queue_depths: DEFAULT_QUEUE_DEPTHS.to_vec(),
            scratch_size_bytes: DEFAULT_SCRATCH_SIZE_BYTES,
            effective_cpus: None,
            io_uring_probe: crate::aio::method::uring::probe,
            progress: None,
            cancel: None,
        }
    }
}

/// What [`run`] measured. Every number carries its unit in its name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// The directory measured (PGDATA or the scratch directory).
    pub target: String,
    /// Whether the target is a PostgreSQL data directory (read-only measurement).
    pub data_directory: bool,
    /// The scratch file written and removed (directory targets).
    pub scratch_file: Option<String>,
    /// The device measurement.
    pub device: DeviceRates,
    /// The engine's reads of one relation under each io_method.
    pub relation: RelationRead,
    /// CPUs the run assumed (sizes the "more workers" run).
    pub effective_cpus: usize,
    /// The time bound asked for.
    pub budget_seconds: f64,
    /// The time the whole measurement took.
    pub elapsed_seconds: f64,
    /// Anything that limits what the numbers mean (buffered reads, a small relation).
    pub notes: Vec<String>,
}

/// The device's rates on the target's file system.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceRates {
    /// How they were measured.
    pub source: String,
    /// Files read (O_DIRECT unless `direct_io` is false).
    pub files: Vec<String>,
    /// Their total size.
    pub probed_bytes: u64,
    /// Whether the reads bypassed the page cache.
    pub direct_io: bool,
    /// Sequential bandwidth (128 kB reads at depth 32).
    pub sequential_bytes_per_second: f64,
    /// The same as 8 kB pages per second.
    pub sequential_pages_per_second: f64,
    /// Seconds the sequential run took.
    pub sequential_seconds: f64,
    /// Random 8 kB reads per second at queue depth 1.
    pub random_reads_per_second_qd1: f64,
    /// Random 8 kB reads per second at queue depth 32.
    pub random_reads_per_second_qd32: f64,
    /// Every depth measured, in increasing order.
    pub random: Vec<DepthRate>,
}

impl DeviceRates {
    /// The random-read rate measured at `queue_depth`, if it was measured.
    pub fn random_reads_per_second_at(&self, queue_depth: usize) -> Option<f64> {
        self.random
            .iter()
            .find(|r| r.queue_depth == queue_depth)
            .map(|r| r.reads_per_second)
    }
}

/// Random 8 kB reads at one queue depth.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DepthRate {
    /// Reads in flight.
    pub queue_depth: usize,
    /// Reads completed per second.
    pub reads_per_second: f64,
    /// Reads completed.
    pub reads: u64,
    /// Seconds the run took.
    pub seconds: f64,
}

/// The engine's cold reads of one relation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelationRead {
    /// The relation's file (its first segment).
    pub relation: String,
    /// Whether it is the generated scratch relation rather than a cluster's heap.
    pub generated: bool,
    /// Its size in blocks.
    pub blocks: u64,
    /// `effective_io_concurrency` of the reads.
    pub effective_io_concurrency: usize,
    /// Whether pages were checksum-verified as they arrived.
    pub checksums: bool,
    /// One run per io_method measured.
    pub runs: Vec<MethodRun>,
    /// Methods not measured, and why.
    pub not_measured: Vec<MethodSkipped>,
}

/// One io_method's cold reads: the whole relation in order, and a sparse subset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MethodRun {
    /// The method.
    pub io_method: IoMethodKind,
    /// Its worker count (worker only).
    pub io_workers: Option<usize>,
    /// `sync`, `worker:3`, `io_uring`.
    pub label: String,
    /// Every block in order, as a sequential scan reads (bulk-read ring).
    pub sequential: PatternRead,
    /// About one block in [`SPARSE_STRIDE_BLOCKS`], ascending with random gaps, as a bitmap
    /// heap scan at ~1% selectivity reads: mostly single-block reads, where the methods
    /// differ most (one blocking read per worker against a ring's many).
    pub sparse: PatternRead,
}

/// One access pattern's cold reads under one method.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PatternRead {
    /// Pages handed out per second of reading (evictions excluded).
    pub pages_per_second: f64,
    /// Pages handed out.
    pub pages: u64,
    /// Pages that needed a read (the rest were hits; cold passes make this all of them).
    pub pages_read: u64,
    /// Passes over the relation (each one cold).
    pub passes: u32,
    /// Seconds spent reading.
    pub seconds: f64,
}

/// A method that was not measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MethodSkipped {
    /// The method.
    pub io_method: IoMethodKind,
    /// Why (the engine's probe message, with the fix).
    pub reason: String,
}

/// Why a measurement failed. Each names the file or setting and the fix.
#[derive(Debug, thiserror::Error)]
pub enum MeasureError {
    /// An option is out of range.
    #[error("measure: {name} = {value} is invalid: {reason}")]
    InvalidOption {
        /// The option (`seconds`, `queue_depths`).
        name: &'static str,
        /// Its value.
        value: String,
        /// What is allowed.
        reason: String,
    },
    /// A directory target lies inside a PostgreSQL cluster or tablespace.
    #[error("refusing to write a scratch file in \"{}\": it is inside the PostgreSQL data directory or tablespace \"{}\"; measure the cluster read-only (MeasureTarget::DataDirectory, {}) or choose a directory outside it", dir.display(), cluster.display(), crate::config::Term::AdviseDataDirectory)]
    InsideDataDirectory {
        /// The directory asked for.
        dir: PathBuf,
        /// The cluster (or tablespace) holding it.
        cluster: PathBuf,
    },
    /// A data-directory target is not one.
    #[error("\"{}\" is not a PostgreSQL data directory (no PG_VERSION): pass the cluster's directory, or measure a plain directory with a scratch file", .0.display())]
    NotADataDirectory(PathBuf),
    /// The cluster holds no relation file with a whole page, or no heap.
    #[error("\"{}\" holds no {what} to measure: load some data first, or measure its file system with a scratch file (a directory outside the cluster)", pgdata.display())]
    NothingToRead {
        /// The data directory.
        pgdata: PathBuf,
        /// "relation file of 8 kB or more", "heap with data".
        what: &'static str,
    },
    /// The directory or its file system cannot take the scratch file.
    #[error("could not {action} the scratch file \"{}\": {source}; choose a writable directory with at least {} MB free", path.display(), (MIN_SCRATCH_SIZE_BYTES * SCRATCH_FREE_SPACE_DIVISOR) >> 20)]
    Scratch {
        /// What failed (create, write, sync).
        action: &'static str,
        /// The scratch file (or its directory).
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Walking or reading the cluster failed.
    #[error(transparent)]
    Cluster(#[from] VerifyError),
    /// Opening or evicting a file failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// A probe read failed.
    #[error(transparent)]
    Probe(ProbeError),
    /// Setting up an I/O method or an I/O failed.
    #[error(transparent)]
    Aio(#[from] AioError),
    /// The buffer pool or a read through it failed (a damaged page names file and block).
    #[error(transparent)]
    Buffer(#[from] BufferError),
    /// [`MeasureOptions::cancel`] was set.
    #[error("measurement cancelled (the scratch file, if any, was removed)")]
    Cancelled,
}

impl From<ProbeError> for MeasureError {
    fn from(e: ProbeError) -> MeasureError {
        match e {
            ProbeError::Cancelled => MeasureError::Cancelled,
            other => MeasureError::Probe(other),
        }
    }
}

/// `worker:3`, `sync`, `io_uring`.
fn method_label(method: IoMethodKind, io_workers: Option<usize>) -> String {
    match io_workers {
        Some(n) => format!("{method}:{n}"),
        None => method.to_string(),
    }
}

/// The time split of the module header: each run gets the remaining time in proportion to
/// its weight among the runs still to come.
struct Budget {
    start: Instant,
    total: Duration,
    weight_left: f64,
}

impl Budget {
    fn slice(&mut self, weight: f64) -> Duration {
        let left = self.total.saturating_sub(self.start.elapsed());
        let share = if self.weight_left > 0.0 {
            (weight / self.weight_left).min(1.0)
        } else {
            1.0
        };
        self.weight_left = (self.weight_left - weight).max(0.0);
        left.mul_f64(share).max(MIN_RUN)
    }

    fn fraction(&self) -> f64 {
        (self.start.elapsed().as_secs_f64() / self.total.as_secs_f64().max(1e-9)).min(1.0)
    }
}

/// Removes the scratch file on every path out of [`run`].
struct ScratchGuard(PathBuf);

impl Drop for ScratchGuard {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Measures the device and the engine on `options.target` within `options.seconds`.
///
/// Errors name the file and the fix; on every error (and on cancel) the scratch file is
/// removed before returning.
pub fn run(options: &MeasureOptions) -> Result<Measurement, MeasureError> {
    validate(options)?;
    let never = Arc::new(AtomicBool::new(false));
    let cancel: &AtomicBool = options.cancel.as_ref().unwrap_or(&never);
    let report = |phase: Phase, budget: &Budget| {
        if let Some(progress) = &options.progress {
            progress(phase, budget.fraction());
        }
    };
    let cpus = options.effective_cpus.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    let (methods, not_measured) = methods_to_measure(options, cpus);
    let mut depths = options.queue_depths.clone();
    depths.sort_unstable();
    depths.dedup();

    let scratch = matches!(options.target, MeasureTarget::Directory(_));
    let mut budget = Budget {
        start: Instant::now(),
        total: Duration::from_secs_f64(options.seconds),
        weight_left: if scratch { WEIGHT_SCRATCH } else { 0.0 }
            + WEIGHT_DEVICE_RUN * (depths.len() + 1) as f64
            + WEIGHT_ENGINE_RUN * 2.0 * methods.len() as f64,
    };
    let mut notes = Vec::new();
    let prepared = prepare_target(options, &mut budget, cancel, &report, &mut notes)?;
    let scratch_file = prepared
        .scratch_guard
        .as_ref()
        .map(|g| g.0.display().to_string());
    let device = measure_device(
        &prepared.probe_paths,
        &depths,
        &mut budget,
        cancel,
        &report,
        &mut notes,
    )?;
    let (blocks, runs) = measure_engine(
        &prepared,
        &methods,
        &mut budget,
        cancel,
        &report,
        &mut notes,
    )?;
    report(Phase::Done, &budget);
    Ok(Measurement {
        target: prepared.target.display().to_string(),
        data_directory: !scratch,
        scratch_file,
        device,
        relation: RelationRead {
            relation: prepared.relation.display().to_string(),
            generated: scratch,
            blocks,
            effective_io_concurrency: ENGINE_EFFECTIVE_IO_CONCURRENCY,
            checksums: prepared.checksums,
            runs,
            not_measured,
        },
        effective_cpus: cpus,
        budget_seconds: options.seconds,
        elapsed_seconds: budget.start.elapsed().as_secs_f64(),
        notes,
    })
}

/// How [`run`] reports its phases to the caller's progress callback.
type Report<'a> = dyn Fn(Phase, &Budget) + 'a;

/// The io_methods to measure, with their worker counts: sync, worker with 3 and with more
/// workers per CPU, and io_uring when the probe says it works here (else why not).
fn methods_to_measure(
    options: &MeasureOptions,
    cpus: usize,
) -> (Vec<(IoMethodKind, Option<usize>)>, Vec<MethodSkipped>) {
    let mut methods: Vec<(IoMethodKind, Option<usize>)> = vec![
        (IoMethodKind::Sync, None),
        (IoMethodKind::Worker, Some(3)),
        (
            IoMethodKind::Worker,
            Some(
                (cpus * MORE_WORKERS_PER_CPU)
                    .clamp(MORE_WORKERS_MIN, crate::config::MAX_IO_WORKERS),
            ),
        ),
    ];
    let mut not_measured = Vec::new();
    match (options.io_uring_probe)() {
        Ok(()) => methods.push((IoMethodKind::IoUring, None)),
        Err(e) => not_measured.push(MethodSkipped {
            io_method: IoMethodKind::IoUring,
            reason: e.to_string(),
        }),
    }
    (methods, not_measured)
}

/// The files a measurement reads, and the guard that removes the scratch file on every way
/// out.
struct PreparedTarget {
    /// The directory measured.
    target: PathBuf,
    /// The files the device probe reads.
    probe_paths: Vec<PathBuf>,
    /// The relation read under each io_method.
    relation: PathBuf,
    /// Whether its pages carry checksums.
    checksums: bool,
    /// Removes the scratch file (a directory target only).
    scratch_guard: Option<ScratchGuard>,
}

/// A data directory's files as they are, or a scratch file written in a directory (never
/// inside a cluster).
fn prepare_target(
    options: &MeasureOptions,
    budget: &mut Budget,
    cancel: &AtomicBool,
    report: &Report<'_>,
    notes: &mut Vec<String>,
) -> Result<PreparedTarget, MeasureError> {
    match &options.target {
        MeasureTarget::DataDirectory(pgdata) => {
            let (probe_paths, heap) = cluster_files(pgdata)?;
            let checksums = ControlFile::read(pgdata)
                .map_err(VerifyError::from)?
                .data_checksum_version
                != 0;
            if pgdata.join("postmaster.pid").exists() {
                notes.push(format!(
                    "the cluster in \"{}\" looks running (postmaster.pid): its largest table was evicted from the kernel's page cache for the cold reads, and the server's own I/O shared the device with the measurement",
                    pgdata.display()
                ));
            }
            Ok(PreparedTarget {
                target: pgdata.clone(),
                probe_paths,
                relation: heap,
                checksums,
                scratch_guard: None,
            })
        }
        MeasureTarget::Directory(dir) => {
            if let Some(cluster) = enclosing_cluster(dir) {
                return Err(MeasureError::InsideDataDirectory {
                    dir: dir.clone(),
                    cluster,
                });
            }
            // The process id and a counter: two measurements of one directory, from two
            // processes or two threads, never share (or remove) each other's file.
            static SCRATCH_SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let path = dir.join(format!(
                "{SCRATCH_FILE_PREFIX}{}-{}",
                std::process::id(),
                SCRATCH_SEQ.fetch_add(1, Ordering::Relaxed)
            ));
            report(Phase::Prepare, budget);
            let slice = budget.slice(WEIGHT_SCRATCH);
            let guard = write_scratch(&path, options.scratch_size_bytes, slice, cancel)?;
            Ok(PreparedTarget {
                target: dir.clone(),
                probe_paths: vec![path.clone()],
                relation: path,
                checksums: true,
                scratch_guard: Some(guard),
            })
        }
    }
}

/// The device's rates: one sequential run and a random sweep over `depths`, with O_DIRECT
/// when the file system allows it, else buffered after eviction.
fn measure_device(
    probe_paths: &[PathBuf],
    depths: &[usize],
    budget: &mut Budget,
    cancel: &AtomicBool,
    report: &Report<'_>,
    notes: &mut Vec<String>,
) -> Result<DeviceRates, MeasureError> {
    let files = match ProbeFiles::open(probe_paths, true) {
        Ok(f) => f,
        Err(StorageError::DirectIoUnsupported { path, source }) => {
            notes.push(format!(
                "the file system refused O_DIRECT on \"{}\" ({source}): the device was read through the page cache after evicting the files, so rates above the device's are the page cache's",
                path.display()
            ));
            for p in probe_paths {
                RelFile::new(p).evict_from_page_cache()?;
            }
            ProbeFiles::open(probe_paths, false)?
        }
        Err(e) => return Err(e.into()),
    };
    report(Phase::Sequential, budget);
    let seq = device::probe(
        &files,
        Pattern::Sequential,
        SEQUENTIAL_READ_SIZE_BYTES,
        SEQUENTIAL_QUEUE_DEPTH,
        budget.slice(WEIGHT_DEVICE_RUN),
        cancel,
    )?;
    let mut random: Vec<DepthRate> = depths
        .iter()
        .map(|&queue_depth| DepthRate {
            queue_depth,
            reads_per_second: 0.0,
            reads: 0,
            seconds: 0.0,
        })
        .collect();
    for _round in 0..SWEEP_ROUNDS {
        for rate in random.iter_mut() {
            let queue_depth = rate.queue_depth;
            report(Phase::Random { queue_depth }, budget);
            let r = device::probe(
                &files,
                Pattern::Random,
                RANDOM_READ_SIZE_BYTES,
                queue_depth,
                budget.slice(WEIGHT_DEVICE_RUN / SWEEP_ROUNDS as f64),
                cancel,
            )?;
            rate.reads_per_second = rate.reads_per_second.max(r.reads_per_second);
            rate.reads += r.reads;
            rate.seconds += r.seconds;
        }
    }
    let at = |qd: usize| {
        random
            .iter()
            .find(|r| r.queue_depth == qd)
            .map_or(0.0, |r| r.reads_per_second)
    };
    Ok(DeviceRates {
        source: format!(
            "built-in probe: {} pread, one thread per queue slot",
            if files.is_direct() {
                "O_DIRECT"
            } else {
                "buffered"
            }
        ),
        files: files
            .paths()
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
        probed_bytes: files.total_bytes(),
        direct_io: files.is_direct(),
        sequential_bytes_per_second: seq.bytes_per_second,
        sequential_pages_per_second: seq.bytes_per_second / BLCKSZ as f64,
        sequential_seconds: seq.seconds,
        random_reads_per_second_qd1: at(1),
        random_reads_per_second_qd32: at(32),
        random,
    })
}

/// The engine: the relation read cold under each io_method, sequentially and sparsely;
/// returns the relation's size in blocks and one run per method.
fn measure_engine(
    prepared: &PreparedTarget,
    methods: &[(IoMethodKind, Option<usize>)],
    budget: &mut Budget,
    cancel: &AtomicBool,
    report: &Report<'_>,
    notes: &mut Vec<String>,
) -> Result<(u64, Vec<MethodRun>), MeasureError> {
    let rel = RelFile::new(&prepared.relation);
    let blocks = rel.nblocks()?;
    if blocks < 1024 {
        notes.push(format!(
            "the relation read under each io_method has only {blocks} blocks: per-read set-up weighs more than on a real table, so the methods' rates are closer together than they would be"
        ));
    }
    let check = PageCheckOptions {
        checksums: prepared.checksums,
        ..PageCheckOptions::default()
    };
    let mut runs = Vec::new();
    for &(io_method, io_workers) in methods {
        report(
            Phase::Relation {
                io_method,
                io_workers,
            },
            budget,
        );
        let config = IoConfig {
            io_method,
            io_workers: io_workers.unwrap_or(3),
            effective_io_concurrency: ENGINE_EFFECTIVE_IO_CONCURRENCY,
            shared_buffers_bytes: ENGINE_SHARED_BUFFERS_BYTES,
            ..IoConfig::default()
        };
        let aio = Aio::new(config)?;
        let slice = budget.slice(WEIGHT_ENGINE_RUN);
        let sequential = read_cold(&aio, &rel, blocks, false, check, slice, cancel)?;
        let slice = budget.slice(WEIGHT_ENGINE_RUN);
        let sparse = read_cold(&aio, &rel, blocks, true, check, slice, cancel)?;
        runs.push(MethodRun {
            io_method,
            io_workers,
            label: method_label(io_method, io_workers),
            sequential,
            sparse,
        });
    }
    Ok((blocks, runs))
}

fn validate(options: &MeasureOptions) -> Result<(), MeasureError> {
    if !(options.seconds.is_finite() && options.seconds > 0.0 && options.seconds <= MAX_SECONDS) {
        return Err(MeasureError::InvalidOption {
            name: "seconds",
            value: options.seconds.to_string(),
            reason: format!("expected more than 0 and at most {MAX_SECONDS}"),
        });
    }
    let depths = &options.queue_depths;
    if !depths.contains(&1)
        || !depths.contains(&32)
        || depths
            .iter()
            .any(|&d| d == 0 || d > device::MAX_QUEUE_DEPTH)
    {
        return Err(MeasureError::InvalidOption {
            name: "queue_depths",
            value: format!("{depths:?}"),
            reason: format!(
                "expected depths between 1 and {}, including 1 and 32 (the rates the recommendations need)",
                device::MAX_QUEUE_DEPTH
            ),
        });
    }
    Ok(())
}

pub use crate::storage::enclosing_cluster;

/// The largest segment files of the cluster (for the device probe) and its largest heap's
/// first segment (for the engine reads).
fn cluster_files(pgdata: &Path) -> Result<(Vec<PathBuf>, PathBuf), MeasureError> {
    if !pgdata.join("PG_VERSION").is_file() {
        return Err(MeasureError::NotADataDirectory(pgdata.to_path_buf()));
    }
    let files = walk_cluster(pgdata.as_os_str(), None)?;
    // Main forks only: the free-space and visibility maps are a few pages each.
    let main: Vec<_> = files
        .iter()
        .filter(|f| {
            f.path
                .file_name()
                .and_then(OsStr::to_str)
                .is_some_and(|n| !n.contains('_'))
        })
        .collect();
    let mut by_size: Vec<_> = main
        .iter()
        .filter(|f| f.size_bytes >= BLCKSZ as u64)
        .collect();
    by_size.sort_by(|a, b| b.size_bytes.cmp(&a.size_bytes).then(a.path.cmp(&b.path)));
    let probe: Vec<PathBuf> = by_size
        .iter()
        .take(MAX_PROBE_FILES)
        .map(|f| f.path.clone())
        .collect();
    if probe.is_empty() {
        return Err(MeasureError::NothingToRead {
            pgdata: pgdata.to_path_buf(),
            what: "relation file of 8 kB or more",
        });
    }
    // Relations by total size (all segments), largest first: one pass, keyed by the first
    // segment's path (the segment suffix `.N` stripped), so a cluster of a million files
    // costs a million map updates.
    let mut totals: std::collections::HashMap<PathBuf, u64> = std::collections::HashMap::new();
    for f in &main {
        let first_segment = match f.path.file_name().and_then(OsStr::to_str) {
            Some(name) => f
                .path
                .with_file_name(name.split('.').next().unwrap_or(name)),
            None => continue,
        };
        *totals.entry(first_segment).or_default() += f.size_bytes;
    }
    let mut relations: Vec<(u64, PathBuf)> = totals
        .into_iter()
        .filter(|(path, _)| path.is_file())
        .map(|(path, total)| (total, path))
        .collect();
    relations.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let heap = relations
        .into_iter()
        .filter(|(size, _)| *size >= BLCKSZ as u64)
        .take(MAX_HEAP_CANDIDATES)
        .find(|(_, path)| is_heap(path))
        .map(|(_, path)| path)
        .ok_or_else(|| MeasureError::NothingToRead {
            pgdata: pgdata.to_path_buf(),
            what: "heap with data",
        })?;
    Ok((probe, heap))
}

/// Whether the relation's first page looks like a heap page: initialised, and no special
/// space (btree, hash, GiST, GIN, SP-GiST and BRIN pages all have one; sequences are heaps
/// of one page and lose to any real table on size).
fn is_heap(path: &Path) -> bool {
    let mut page = [0u8; BLCKSZ];
    let Ok(mut f) = std::fs::File::open(path) else {
        return false;
    };
    if std::io::Read::read_exact(&mut f, &mut page).is_err() {
        return false;
    }
    match PageHeader::parse(&page) {
        Ok(h) => h.pd_upper != 0 && h.pd_special as usize == BLCKSZ,
        Err(_) => false,
    }
}

/// Writes the scratch relation: checksummed heap pages (so the engine reads can verify
/// them like a real table's), up to `size_bytes`, at most a tenth of the free space, and
/// for at most `slice` once [`MIN_SCRATCH_SIZE_BYTES`] are written. Synced and evicted from
/// the page cache, so the first reads are cold.
fn write_scratch(
    path: &Path,
    size_bytes: u64,
    slice: Duration,
    cancel: &AtomicBool,
) -> Result<ScratchGuard, MeasureError> {
    let err = |action: &'static str| {
        move |source: std::io::Error| MeasureError::Scratch {
            action,
            path: path.to_path_buf(),
            source,
        }
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    let free_bytes = free_space_bytes(dir).map_err(err("check free space for"))?;
    let limit_bytes = size_bytes.min(free_bytes / SCRATCH_FREE_SPACE_DIVISOR);
    if limit_bytes < MIN_SCRATCH_SIZE_BYTES {
        return Err(MeasureError::Scratch {
            action: "make room for",
            path: path.to_path_buf(),
            source: std::io::Error::from_raw_os_error(libc::ENOSPC),
        });
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(err("create"))?;
    // From here on the guard removes the file whatever happens.
    let guard = ScratchGuard(path.to_path_buf());
    let template = scratch_page().map_err(|e| MeasureError::Scratch {
        action: "build a page for",
        path: path.to_path_buf(),
        source: std::io::Error::other(e.to_string()),
    })?;
    let start = Instant::now();
    let mut chunk = vec![0u8; SCRATCH_WRITE_CHUNK_BYTES];
    let mut written = 0u64;
    let mut blkno = 0u32;
    while written < limit_bytes {
        if cancel.load(Ordering::Relaxed) {
            return Err(MeasureError::Cancelled);
        }
        if written >= MIN_SCRATCH_SIZE_BYTES && start.elapsed() >= slice {
            break;
        }
        let n = (limit_bytes - written).min(chunk.len() as u64) as usize / BLCKSZ * BLCKSZ;
        if n == 0 {
            break;
        }
        for out in chunk[..n].chunks_exact_mut(BLCKSZ) {
            let mut page = template;
            set_checksum(&mut page, blkno);
            out.copy_from_slice(&page);
            blkno += 1;
        }
        file.write_all(&chunk[..n]).map_err(err("write"))?;
        written += n as u64;
    }
    file.sync_all().map_err(err("sync"))?;
    drop(file);
    RelFile::new(path).evict_from_page_cache()?;
    Ok(guard)
}

/// One heap page of `(a double precision, b text)` rows, as a table of the benchmark's
/// shape; each block gets its own checksum when written.
fn scratch_page() -> Result<[u8; BLCKSZ], crate::page::PageError> {
    /// Rows per page: the published `uniform` table's fillfactor-25 packing.
    const ROWS_PER_PAGE: u16 = 18;
    let text = [b'x'; 64];
    let mut page = PageBuilder::new(0)?;
    for row in 0..ROWS_PER_PAGE {
        let tuple = HeapTupleBuilder::new()
            .ctid(ItemPointer {
                block: 0,
                offset: row + 1,
            })
            .build(&[Datum::Float8(f64::from(row)), Datum::text(&text)])?;
        page.add_item(&tuple)?;
    }
    Ok(page.finish())
}

fn free_space_bytes(dir: &Path) -> std::io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: an all-zero statvfs is a valid value of this plain C struct.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `st` a struct statvfs, both live for the call.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(st.f_bavail as u64 * st.f_frsize as u64)
}

/// Whether block `block` belongs to pass `pass`'s sparse subset (splitmix64 of both: a
/// different, reproducible subset each pass, so no pass finds another's blocks anywhere).
fn sparse_pick(block: u64, pass: u32) -> bool {
    let mut z = block ^ (u64::from(pass) << 40) ^ 0x9E37_79B9_7F4A_7C15;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)).is_multiple_of(SPARSE_STRIDE_BLOCKS)
}

/// Reads `rel` cold through a read stream and a fresh buffer pool per pass — every block in
/// order, or the sparse subset — until `slice` has passed (at least one page, and the pass
/// in progress stops at the deadline).
fn read_cold(
    aio: &Aio,
    rel: &RelFile,
    blocks: u64,
    sparse: bool,
    check: PageCheckOptions,
    slice: Duration,
    cancel: &AtomicBool,
) -> Result<PatternRead, MeasureError> {
    let mut backend = aio.backend()?;
    let deadline = Instant::now() + slice;
    let (mut pages, mut pages_read, mut passes) = (0u64, 0u64, 0u32);
    let mut reading = Duration::ZERO;
    loop {
        rel.evict_from_page_cache()?;
        let pool = BufferPool::new(aio, check)?;
        let pass_start = Instant::now();
        let (mut next, mut handed) = (0u64, 0u64);
        let pass = passes;
        let mut stream = ReadStream::new(
            &pool,
            rel,
            StreamOptions {
                // A sequential scan recycles a small ring; a bitmap heap scan does not.
                bulk_read: !sparse,
                ..StreamOptions::default()
            },
            || loop {
                // Bounded by the relation's size: `next` only grows.
                if next >= blocks {
                    return None;
                }
                let block = next;
                next += 1;
                // The last block stands in when the subset of a tiny relation is empty, so
                // every pass hands out at least one page and every rate is above zero.
                let last_chance = handed == 0 && next == blocks;
                if sparse && !sparse_pick(block, pass) && !last_chance {
                    continue;
                }
                if handed > 0
                    && handed.is_multiple_of(DEADLINE_CHECK_BLOCKS)
                    && (Instant::now() >= deadline || cancel.load(Ordering::Relaxed))
                {
                    return None;
                }
                handed += 1;
                return Some((block, ()));
            },
        );
        while let Some(buffer) = stream.next(&mut backend)? {
            drop(buffer);
            pages += 1;
        }
        pages_read += stream.stats().shared_read;
        drop(stream);
        reading += pass_start.elapsed();
        passes += 1;
        if cancel.load(Ordering::Relaxed) {
            return Err(MeasureError::Cancelled);
        }
        if Instant::now() >= deadline {
            break;
        }
    }
    let seconds = reading.as_secs_f64().max(1e-9);
    Ok(PatternRead {
        pages_per_second: pages as f64 / seconds,
        pages,
        pages_read,
        passes,
        seconds,
    })
}

#[cfg(test)]
mod tests;
