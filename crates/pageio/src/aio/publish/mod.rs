//! # Publishing a process's AIO state for `pageio aios`
//!
//! [`Aio::snapshot`] shows the handles in use, but only inside the process. To let a DBA see
//! what a running `pageio verify` or `pageio scan` is doing — how deep its queue is, which
//! blocks of which file are in flight, whether it waits on the disk — every [`Aio`] publishes
//! its state in a small file-backed shared-memory area that other processes read (copied
//! with `pread`, never mapped: a file truncated under a mapping would kill the reader with
//! SIGBUS).
//!
//! [`Aio`]: super::Aio
//! [`Aio::snapshot`]: super::Aio::snapshot
//! [`Aio::counters`]: super::Aio::counters
//! [`Aio::io_worker_pool`]: super::Aio::io_worker_pool
//!
//! ## The mechanism
//!
//! A *publisher thread* owned by the `Aio` wakes every [`DEPTH_SAMPLE_INTERVAL`] (1 ms),
//! counts the I/Os in flight (handles in `SUBMITTED`: given to the method, not completed) and
//! adds one to that depth's histogram bucket; every [`PUBLISH_INTERVAL`] (10 ms) it also
//! copies [`Aio::snapshot`], [`Aio::counters`] and [`Aio::io_worker_pool`] into the area.
//! The I/O hot path is not touched at all: everything published is read from state the
//! engine already keeps (handle states, atomic counters). Once nothing has been in flight
//! for a whole publish interval (an idle process), the thread wakes once per publish
//! interval and counts each sample as ten, until something is in flight again: an idle
//! process costs 100 wake-ups a second, and the histogram stays weighted by time.
//!
//! ```text
//!   Aio ──(Weak)── publisher thread ── every 1 ms: depth → histogram[bucket]++
//!                          │            every 10 ms: seqlock write ─►  pageio-aios.<pid>.<n>
//!                          ▼                                                 ▲ pread (a copy)
//!          snapshot(), counters(), io_worker_pool()           pageio aios (any process)
//! ```
//!
//! ## The file
//!
//! One file per `Aio`: `<aio_publish_dir>/pageio-aios.<pid>.<n>`, `n` counting the process's
//! `Aio`s from 0 (io-bench runs one per method; most commands have one). It is created under
//! a temporary name with `O_EXCL | O_NOFOLLOW` and mode 0600 (only its owner and root can
//! read it, as `pg_aios` is limited to `pg_read_all_stats`), its header written, and renamed
//! into place, so a reader never sees a half-written header. It is removed when the `Aio` is
//! dropped, and at normal process exit (`exit(3)` runs an `atexit` hook) for an `Aio` that
//! was never dropped. A process killed by a signal leaves it behind: that is a *stale* area.
//!
//! ```text
//!   offset  size        content
//!   0       8           magic: "PGAIOS01" read as a little-endian u64 (AREA_MAGIC)
//!   8       8           layout version (LAYOUT_VERSION)
//!   16      8           area size in bytes
//!   24      8           header length in bytes
//!   32      8           sequence number (the seqlock: odd while the writer is writing)
//!   40      8           sample length in bytes (under the seqlock)
//!   64      HEADER_BYTES  the header, written once: pid, start time, program, io_method,
//!                       settings
//!   64+HEADER_BYTES  SAMPLE_BYTES  the sample, rewritten every publish: counters, worker
//!                       pool, depth histogram, rows (at most MAX_ROWS)
//! ```
//!
//! Header and sample are a small length-prefixed little-endian encoding; every field a
//! reader decodes is bounds-checked, so a truncated or garbled file is a
//! [`PublishError`] naming the file and what was wrong, never a panic.
//!
//! ## Writers never block on readers
//!
//! The sample is guarded by a seqlock: the writer makes the sequence odd, stores the words,
//! makes it even again. A reader copies the words between two loads of the sequence and
//! retries when they differ or are odd, for at most [`MAX_READ_WAIT`] (then
//! [`PublishError::Busy`]). All shared words are accessed as `AtomicU64`, so a reader racing
//! the writer sees old or new words, never undefined behaviour, and the sequence check
//! rejects any mixture.
//!
//! ## A worked example
//!
//! `pageio verify` runs as pid 4242 under `io_method = worker` and publishes
//! `/dev/shm/pageio-aios.4242.0`. `pageio aios --watch` reads it at t = 0 s: `publishes`
//! 812, `counters.bytes` 3.2 GB, `depth_histogram` `[40, 3, 5, 9, 120, 300, 0, …]`
//! (`depth_samples` 477). At t = 1 s: `bytes` 3.6 GB, histogram `[41, 3, 6, 9, 160, 1258,
//! 0, …]` (1477 samples). The view shows 400 MB/s, and over that second 1000 depth samples:
//! 96% at 9–16 in flight, 4% at 5–8 — the queue is kept full (`effective_io_concurrency`
//! 16), so the device, not the CPU, is the limit.
//!
//! ## Where it is
//!
//! ```text
//!   mod.rs        the layout's constants, the published types, who may be trusted
//!   encoding.rs   header and sample records: encode, and decode with every field checked
//!   area.rs       the writer's mapping and seqlock; the readers' copies (pread) of an area
//!   process.rs    start times, staleness, listing and removing areas in the directory
//!   publisher.rs  the thread that samples one Aio and writes its area
//! ```
//!
//! ## Stale areas
//!
//! The header carries the pid and the process's start time (field 22 of `/proc/<pid>/stat`,
//! clock ticks since boot). An area is stale when that pid no longer exists, or exists with a
//! different start time (the pid was reused). [`remove_stale`] removes such a file — only one
//! whose name has the exact pattern and that starts with the magic, checked again right
//! before the unlink.

use std::ffi::CString;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Once, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use thiserror::Error;

use super::handle::HandleState;
use super::{AioCore, AioRow, IoCounters};
use crate::storage::{MapAccess, MappedRegion};

/// First word of every area: "PGAIOS01" read as a little-endian u64.
pub const AREA_MAGIC: u64 = u64::from_le_bytes(*b"PGAIOS01");

/// Version of the layout described in the module docs; a reader refuses any other.
pub const LAYOUT_VERSION: u64 = 1;

/// Prefix of every area's file name: `pageio-aios.<pid>.<n>`.
pub const AREA_FILE_PREFIX: &str = "pageio-aios.";

/// Bytes before the header: magic, version, sizes, the sequence, the sample length.
const PREAMBLE_BYTES: usize = 64;

/// Room for the header. The largest part is the command line, cut at [`MAX_PROGRAM_BYTES`].
pub const HEADER_BYTES: usize = 4096;

/// Most bytes of the command line kept in the header: enough for any real `pageio`
/// invocation's flags, small enough to keep the header in one page.
pub const MAX_PROGRAM_BYTES: usize = 1024;

/// Most rows (handles in use) published per sample. 256 is four backends at the default
/// `io_max_concurrency` of 64 — the in-flight view is for reading, not for accounting, and
/// the sample says how many were cut ([`AreaSample::rows_cut`]).
pub const MAX_ROWS: usize = 256;

/// Most bytes of one row's `target_desc` kept ("blocks a..b in file "…"" with a long path).
pub const MAX_TARGET_DESC_BYTES: usize = 256;

/// Room for the sample: the fixed part, [`MAX_BACKENDS`](super::MAX_BACKENDS) backends'
/// counters (97 bytes each) and [`MAX_ROWS`] rows of at most ~450 bytes each.
pub const SAMPLE_BYTES: usize = 160 * 1024;

/// Size of every area file.
pub const AREA_BYTES: usize = PREAMBLE_BYTES + HEADER_BYTES + SAMPLE_BYTES;

/// How often the in-flight depth is sampled for the histogram: often enough that a reader
/// differencing two samples a second apart gets a thousand points.
pub const DEPTH_SAMPLE_INTERVAL: Duration = Duration::from_millis(1);

/// How often the full state (rows, counters, pool) is copied into the area: ten times per
/// second-long refresh of `pageio aios --watch`, and cheap enough (one snapshot of at most a
/// few hundred handles) not to show next to the I/O it describes.
pub const PUBLISH_INTERVAL: Duration = Duration::from_millis(10);

/// Depth samples per publish.
const SAMPLES_PER_PUBLISH: u64 =
    (PUBLISH_INTERVAL.as_micros() / DEPTH_SAMPLE_INTERVAL.as_micros()) as u64;

/// Longest a reader keeps retrying a sample the writer is rewriting. A write takes
/// microseconds, but a publisher preempted in the middle of one on a loaded machine resumes
/// only at its next time slice (a few ms); 100 ms covers that many times over, and a writer
/// stuck longer is reported ([`PublishError::Busy`]) instead of waited for.
pub const MAX_READ_WAIT: Duration = Duration::from_millis(100);

/// Retries that only yield the CPU before the reader starts sleeping [`READ_RETRY_SLEEP`]
/// between tries: most conflicts end within a yield.
const READ_RETRIES_YIELDING: u32 = 16;

/// The pause between later retries: short next to a time slice, long enough not to spin.
const READ_RETRY_SLEEP: Duration = Duration::from_micros(50);

/// Upper bounds (inclusive) of the depth histogram's buckets: 0, 1, 2, 3–4, 5–8, … , 257+.
/// Powers of two, because what matters is the order of magnitude of the queue depth.
pub const DEPTH_BUCKET_UPPER: [u32; DEPTH_BUCKETS - 1] = [0, 1, 2, 4, 8, 16, 32, 64, 128, 256];

/// Number of depth histogram buckets (the last one is open: 257 and deeper).
pub const DEPTH_BUCKETS: usize = 11;

/// The histogram bucket of an in-flight depth.
pub fn depth_bucket(depth: u32) -> usize {
    DEPTH_BUCKET_UPPER
        .iter()
        .position(|&upper| depth <= upper)
        .unwrap_or(DEPTH_BUCKETS - 1)
}

/// The label of a depth bucket: `0`, `1`, `2`, `3-4`, …, `257+`.
pub fn depth_bucket_label(bucket: usize) -> String {
    match bucket {
        0..=2 => bucket.to_string(),
        b if b < DEPTH_BUCKETS - 1 => {
            format!(
                "{}-{}",
                DEPTH_BUCKET_UPPER[b - 1] + 1,
                DEPTH_BUCKET_UPPER[b]
            )
        }
        _ => format!("{}+", DEPTH_BUCKET_UPPER[DEPTH_BUCKETS - 2] + 1),
    }
}

/// What went wrong reading one area. Each names the file.
#[derive(Debug, Error)]
pub enum PublishError {
    /// The file could not be opened, examined or mapped.
    #[error("could not read AIO area \"{path}\": {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Not a regular file (a symlink, a directory, a device).
    #[error("\"{path}\" is not a regular file; it is not a pageio AIO area")]
    NotRegular {
        /// The file.
        path: PathBuf,
    },
    /// Shorter (or longer) than an area.
    #[error("AIO area \"{path}\" is {size_bytes} bytes, expected {expected_bytes}: truncated or not a pageio area")]
    WrongSize {
        /// The file.
        path: PathBuf,
        /// Its size.
        size_bytes: u64,
        /// An area's size.
        expected_bytes: u64,
    },
    /// The magic number is wrong.
    #[error("\"{path}\" does not start with the pageio AIO area magic; it is not a pageio area")]
    BadMagic {
        /// The file.
        path: PathBuf,
    },
    /// Another layout version (a newer or older pageio wrote it).
    #[error("AIO area \"{path}\" has layout version {found}, this pageio reads version {LAYOUT_VERSION}: use the pageio that wrote it")]
    UnsupportedVersion {
        /// The file.
        path: PathBuf,
        /// The version found.
        found: u64,
    },
    /// A field failed its bounds check.
    #[error("AIO area \"{path}\" is garbled: {what}")]
    Garbled {
        /// The file.
        path: PathBuf,
        /// Which field and why.
        what: String,
    },
    /// The writer was always mid-write.
    #[error("AIO area \"{path}\" was being rewritten during every read for {} ms; its writer may be stuck", MAX_READ_WAIT.as_millis())]
    Busy {
        /// The file.
        path: PathBuf,
    },
    /// Owned by a user the reader does not trust, or writable by others than its owner: not
    /// read (see [`AreaTrust`]).
    #[error("AIO area \"{path}\" was skipped unread: {why}; a file someone else can write may hold anything, so it is read only when its owner is trusted")]
    Untrusted {
        /// The file.
        path: PathBuf,
        /// Its owner's uid.
        owner_uid: u32,
        /// Its permission bits.
        mode: u32,
        /// Which rule it failed, in words.
        why: String,
    },
}

/// Whose areas a reader reads. A publish directory such as `/dev/shm` is shared with every
/// user of the machine, and anyone can put a file there named like another process's area.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AreaTrust {
    /// The default: an area is read only when it is owned by the reader's effective uid, or
    /// by the owner of the running process its name claims (only that user, or root, can
    /// have made it), and no one but its owner can write it (no group or other write bit).
    #[default]
    OwnerOnly,
    /// Any area, whoever owns it and whoever can write it. Reading it is still safe (it is
    /// copied and every field is checked); what it says may be made up.
    Anyone,
}

/// Why `meta` (an area's `fstat`) fails `trust`, if it does.
fn distrust(trust: AreaTrust, meta: &std::fs::Metadata, path: &Path) -> Option<PublishError> {
    use std::os::unix::fs::MetadataExt;
    if trust == AreaTrust::Anyone {
        return None;
    }
    let (owner_uid, mode) = (meta.uid(), meta.mode() & 0o7777);
    let untrusted = |why: String| PublishError::Untrusted {
        path: path.to_path_buf(),
        owner_uid,
        mode,
        why,
    };
    if mode & 0o022 != 0 {
        return Some(untrusted(format!(
            "its mode {mode:04o} lets {} write it",
            if mode & 0o002 != 0 {
                "every user"
            } else {
                "its group"
            }
        )));
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if owner_uid == me {
        return None;
    }
    let claimed_pid = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(parse_area_name)
        .map(|(pid, _)| pid);
    let process_owner = claimed_pid.and_then(|pid| {
        std::fs::metadata(format!("/proc/{pid}"))
            .ok()
            .map(|m| m.uid())
    });
    match (claimed_pid, process_owner) {
        (_, Some(uid)) if uid == owner_uid => None,
        (Some(pid), Some(uid)) => Some(untrusted(format!(
            "it is owned by uid {owner_uid}, but process {pid} runs as uid {uid} and this reader as uid {me}"
        ))),
        (Some(pid), None) => Some(untrusted(format!(
            "it is owned by uid {owner_uid}, not this reader's uid {me}, and process {pid} is not running"
        ))),
        (None, _) => Some(untrusted(format!(
            "it is owned by uid {owner_uid}, not this reader's uid {me}"
        ))),
    }
}

/// The header: who publishes, with which settings. Written once.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct AreaHeader {
    /// Process id.
    pub pid: i32,
    /// The process's start time, clock ticks since boot (`/proc/<pid>/stat` field 22).
    pub start_time_ticks: u64,
    /// The command line, arguments separated by spaces (cut at [`MAX_PROGRAM_BYTES`]).
    pub program: String,
    /// `sync`, `worker` or `io_uring`.
    pub io_method: String,
    /// The setting in force.
    pub effective_io_concurrency: u64,
    /// The setting in force, in blocks.
    pub io_combine_limit_blocks: u64,
    /// The setting in force.
    pub io_max_concurrency: u64,
    /// The setting in force.
    pub direct_io: bool,
    /// `io_workers` (0: the adaptive pool).
    pub io_workers: u64,
    /// Which of the process's `Aio`s this is (the `n` of the file name).
    pub instance: u64,
}

/// The worker pool's state in a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct PublishedPool {
    /// Worker threads running.
    pub workers: u64,
    /// Of those, executing I/O (not parked).
    pub busy_workers: u64,
    /// The floor.
    pub min_workers: u64,
    /// The ceiling.
    pub max_workers: u64,
    /// Whether the pool grows and shrinks.
    pub adaptive: bool,
    /// Kernel I/Os waiting in the queue.
    pub queued_ios: u64,
}

/// One handle in use, with `pg_aios`'s columns (see [`AioRow`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PublishedRow {
    /// Thread id of the owning backend (a backend is a thread).
    pub pid: i32,
    /// Global handle number.
    pub io_id: u32,
    /// Generation of the handle.
    pub io_generation: u64,
    /// Handle state, spelled as in `pg_aios`.
    pub state: String,
    /// `readv`, `writev` or `invalid`.
    pub operation: String,
    /// File offset in bytes.
    pub off: u64,
    /// Length in bytes.
    pub length: u64,
    /// `smgr`.
    pub target: String,
    /// Number of handle-data entries.
    pub handle_data_len: u32,
    /// Bytes or `-errno`, once known.
    pub raw_result: Option<i64>,
    /// UNKNOWN, OK, PARTIAL or ERROR.
    pub result: String,
    /// Blocks and file.
    pub target_desc: String,
    /// Executed synchronously.
    pub f_sync: bool,
    /// Memory is backend-local.
    pub f_localmem: bool,
    /// Buffered (not direct) I/O.
    pub f_buffered: bool,
}

/// One backend's counters in a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct PublishedBackend {
    /// The backend's slot number.
    pub id: u32,
    /// Thread id of the thread that last registered the slot (the `pid` of its rows).
    pub tid: i32,
    /// Whether a thread holds the slot now (a released slot keeps its counters).
    pub active: bool,
    /// Its counters since the slot was created.
    pub counters: IoCounters,
}

/// The state at one publish.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct AreaSample {
    /// When it was taken, `CLOCK_MONOTONIC` in ns (system-wide, so a reader can compare it
    /// with its own clock to see a publisher that stopped).
    pub sampled_at_ns: u64,
    /// Publishes so far (this one included).
    pub publishes: u64,
    /// Counters summed over every backend of the `Aio`.
    pub counters: IoCounters,
    /// The worker pool (worker method only).
    pub pool: Option<PublishedPool>,
    /// I/Os in flight at the last depth sample.
    pub depth_now: u32,
    /// Depth samples taken so far; the sum of `depth_histogram`.
    pub depth_samples: u64,
    /// Depth samples per bucket ([`DEPTH_BUCKET_UPPER`]) since the `Aio` started: a reader
    /// differences two samples to get the histogram over its interval.
    pub depth_histogram: [u64; DEPTH_BUCKETS],
    /// Backends (threads) registered.
    pub backends: u32,
    /// Each backend's counters (`counters` is their sum).
    pub backend_counters: Vec<PublishedBackend>,
    /// Handles in use at the snapshot.
    pub rows_total: u32,
    /// Of those, not published (beyond [`MAX_ROWS`] or the area's room).
    pub rows_cut: u32,
    /// The handles published.
    pub rows: Vec<PublishedRow>,
}

/// An area read from its file.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PublishedArea {
    /// The file.
    pub path: PathBuf,
    /// Who publishes.
    pub header: AreaHeader,
    /// The latest sample.
    pub sample: AreaSample,
}

/// Why an area is stale.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum StaleReason {
    /// No process has that pid.
    ProcessGone,
    /// The pid belongs to a process started at another time: reused.
    PidReused {
        /// The start time of the process now holding the pid.
        start_time_ticks: u64,
    },
}

impl std::fmt::Display for StaleReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StaleReason::ProcessGone => write!(f, "the process is gone"),
            StaleReason::PidReused { .. } => {
                write!(f, "the pid now belongs to a process started later")
            }
        }
    }
}

/// One file found in the publish directory.
#[derive(Debug)]
pub enum AreaEntry {
    /// A live process's area.
    Live(PublishedArea),
    /// An area left by a process that is gone.
    Stale {
        /// What it held.
        area: PublishedArea,
        /// Why it is stale.
        reason: StaleReason,
    },
    /// A file with an area's name that could not be read.
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        error: PublishError,
    },
}

mod area;
mod encoding;
mod process;
mod publisher;

pub use area::{decode_area_bytes, read_area, read_area_trusting};
pub use process::{
    list_areas, list_areas_trusting, parse_area_name, process_start_time, remove_stale,
    stale_reason, MAX_DIR_ENTRIES,
};
pub(in crate::aio) use publisher::Publisher;
pub use publisher::TestAreaWriter;

use area::AreaWriter;
use encoding::{decode_header, decode_sample, encode_header, encode_sample, SampleSource};
