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

// ---------------------------------------------------------------------------------------
// Encoding
// ---------------------------------------------------------------------------------------

struct Encoder {
    buf: Vec<u8>,
}

impl Encoder {
    fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    fn i32(&mut self, v: i32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    fn bool(&mut self, v: bool) {
        self.buf.push(v as u8);
    }
    /// A string cut to `max_bytes` at a character boundary.
    fn str(&mut self, s: &str, max_bytes: usize) {
        let mut end = s.len().min(max_bytes);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.u32(end as u32);
        self.buf.extend_from_slice(&s.as_bytes()[..end]);
    }
}

struct Decoder<'a> {
    buf: &'a [u8],
    at: usize,
    path: &'a Path,
}

impl<'a> Decoder<'a> {
    fn garbled(&self, what: impl Into<String>) -> PublishError {
        PublishError::Garbled {
            path: self.path.to_path_buf(),
            what: what.into(),
        }
    }
    fn take(&mut self, n: usize, field: &str) -> Result<&'a [u8], PublishError> {
        let end = self.at.checked_add(n).filter(|&end| end <= self.buf.len());
        match end {
            Some(end) => {
                let s = &self.buf[self.at..end];
                self.at = end;
                Ok(s)
            }
            None => Err(self.garbled(format!(
                "{field} runs past the end ({n} bytes at offset {})",
                self.at
            ))),
        }
    }
    fn u64(&mut self, field: &str) -> Result<u64, PublishError> {
        let mut w = [0u8; 8];
        w.copy_from_slice(self.take(8, field)?);
        Ok(u64::from_le_bytes(w))
    }
    fn u32(&mut self, field: &str) -> Result<u32, PublishError> {
        let mut w = [0u8; 4];
        w.copy_from_slice(self.take(4, field)?);
        Ok(u32::from_le_bytes(w))
    }
    fn i32(&mut self, field: &str) -> Result<i32, PublishError> {
        Ok(self.u32(field)? as i32)
    }
    fn bool(&mut self, field: &str) -> Result<bool, PublishError> {
        match self.take(1, field)?[0] {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(self.garbled(format!("{field} is {v}, not a boolean"))),
        }
    }
    fn str(&mut self, field: &str, max_bytes: usize) -> Result<String, PublishError> {
        let len = self.u32(field)? as usize;
        if len > max_bytes {
            return Err(self.garbled(format!(
                "{field} is {len} bytes long, at most {max_bytes} are written"
            )));
        }
        let bytes = self.take(len, field)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| self.garbled(format!("{field} is not UTF-8")))
    }
}

/// Longest short word published (a state, an operation, a result, a method name).
const MAX_WORD_BYTES: usize = 32;

fn encode_header(h: &AreaHeader) -> Vec<u8> {
    let mut e = Encoder { buf: Vec::new() };
    e.i32(h.pid);
    e.u64(h.start_time_ticks);
    e.str(&h.program, MAX_PROGRAM_BYTES);
    e.str(&h.io_method, MAX_WORD_BYTES);
    e.u64(h.effective_io_concurrency);
    e.u64(h.io_combine_limit_blocks);
    e.u64(h.io_max_concurrency);
    e.bool(h.direct_io);
    e.u64(h.io_workers);
    e.u64(h.instance);
    e.buf
}

fn decode_header(buf: &[u8], path: &Path) -> Result<AreaHeader, PublishError> {
    let mut d = Decoder { buf, at: 0, path };
    Ok(AreaHeader {
        pid: d.i32("header pid")?,
        start_time_ticks: d.u64("header start time")?,
        program: d.str("header program", MAX_PROGRAM_BYTES)?,
        io_method: d.str("header io_method", MAX_WORD_BYTES)?,
        effective_io_concurrency: d.u64("header effective_io_concurrency")?,
        io_combine_limit_blocks: d.u64("header io_combine_limit")?,
        io_max_concurrency: d.u64("header io_max_concurrency")?,
        direct_io: d.bool("header direct_io")?,
        io_workers: d.u64("header io_workers")?,
        instance: d.u64("header instance")?,
    })
}

fn encode_counters(e: &mut Encoder, c: &IoCounters) {
    for v in [
        c.ios_issued,
        c.kernel_ios,
        c.ios_merged,
        c.blocks,
        c.bytes,
        c.io_ns,
        c.wait_ns,
        c.waits,
        c.errors,
        c.partials,
        c.executed_by_submitter,
    ] {
        e.u64(v);
    }
}

fn decode_counters(d: &mut Decoder<'_>) -> Result<IoCounters, PublishError> {
    Ok(IoCounters {
        ios_issued: d.u64("counter ios_issued")?,
        kernel_ios: d.u64("counter kernel_ios")?,
        ios_merged: d.u64("counter ios_merged")?,
        blocks: d.u64("counter blocks")?,
        bytes: d.u64("counter bytes")?,
        io_ns: d.u64("counter io_ns")?,
        wait_ns: d.u64("counter wait_ns")?,
        waits: d.u64("counter waits")?,
        errors: d.u64("counter errors")?,
        partials: d.u64("counter partials")?,
        executed_by_submitter: d.u64("counter executed_by_submitter")?,
    })
}

fn encode_row(e: &mut Encoder, r: &AioRow) {
    e.i32(r.pid);
    e.u32(r.io_id);
    e.u64(r.io_generation);
    e.str(r.state, MAX_WORD_BYTES);
    e.str(r.operation, MAX_WORD_BYTES);
    e.u64(r.off);
    e.u64(r.length);
    e.str(r.target, MAX_WORD_BYTES);
    e.u32(r.handle_data_len);
    e.bool(r.raw_result.is_some());
    e.u64(r.raw_result.unwrap_or(0) as u64);
    e.str(r.result, MAX_WORD_BYTES);
    e.str(&r.target_desc, MAX_TARGET_DESC_BYTES);
    e.bool(r.f_sync);
    e.bool(r.f_localmem);
    e.bool(r.f_buffered);
}

fn decode_row(d: &mut Decoder<'_>) -> Result<PublishedRow, PublishError> {
    Ok(PublishedRow {
        pid: d.i32("row pid")?,
        io_id: d.u32("row io_id")?,
        io_generation: d.u64("row io_generation")?,
        state: d.str("row state", MAX_WORD_BYTES)?,
        operation: d.str("row operation", MAX_WORD_BYTES)?,
        off: d.u64("row off")?,
        length: d.u64("row length")?,
        target: d.str("row target", MAX_WORD_BYTES)?,
        handle_data_len: d.u32("row handle_data_len")?,
        raw_result: {
            let known = d.bool("row raw_result flag")?;
            let v = d.u64("row raw_result")? as i64;
            known.then_some(v)
        },
        result: d.str("row result", MAX_WORD_BYTES)?,
        target_desc: d.str("row target_desc", MAX_TARGET_DESC_BYTES)?,
        f_sync: d.bool("row f_sync")?,
        f_localmem: d.bool("row f_localmem")?,
        f_buffered: d.bool("row f_buffered")?,
    })
}

/// The most bytes one encoded row can take.
const MAX_ROW_BYTES: usize =
    4 + 4 + 8 + 8 + 8 + 4 + 1 + 8 + 3 + 5 * 4 + 4 * MAX_WORD_BYTES + MAX_TARGET_DESC_BYTES;

/// What the publisher encodes: the sample's fixed part and the snapshot's rows.
struct SampleSource<'a> {
    sampled_at_ns: u64,
    publishes: u64,
    counters: IoCounters,
    pool: Option<PublishedPool>,
    depth_now: u32,
    depth_samples: u64,
    depth_histogram: &'a [u64; DEPTH_BUCKETS],
    backends: u32,
    backend_counters: &'a [PublishedBackend],
    rows: &'a [AioRow],
}

fn encode_sample(s: &SampleSource<'_>) -> Vec<u8> {
    let mut e = Encoder {
        buf: Vec::with_capacity(1024 + s.rows.len().min(MAX_ROWS) * 128),
    };
    e.u64(s.sampled_at_ns);
    e.u64(s.publishes);
    encode_counters(&mut e, &s.counters);
    e.bool(s.pool.is_some());
    let pool = s.pool.unwrap_or(PublishedPool {
        workers: 0,
        busy_workers: 0,
        min_workers: 0,
        max_workers: 0,
        adaptive: false,
        queued_ios: 0,
    });
    e.u64(pool.workers);
    e.u64(pool.busy_workers);
    e.u64(pool.min_workers);
    e.u64(pool.max_workers);
    e.bool(pool.adaptive);
    e.u64(pool.queued_ios);
    e.u32(s.depth_now);
    e.u64(s.depth_samples);
    for &v in s.depth_histogram {
        e.u64(v);
    }
    e.u32(s.backends);
    let backend_counters = &s.backend_counters[..s.backend_counters.len().min(super::MAX_BACKENDS)];
    e.u32(backend_counters.len() as u32);
    for b in backend_counters {
        e.u32(b.id);
        e.i32(b.tid);
        e.bool(b.active);
        encode_counters(&mut e, &b.counters);
    }
    e.u32(s.rows.len() as u32);
    // Rows published: as many as fit both MAX_ROWS and the area (every row is checked
    // against its worst-case size, so the count written before them is exact).
    let fixed_end = e.buf.len() + 8;
    let room_rows = (SAMPLE_BYTES - fixed_end) / MAX_ROW_BYTES;
    let published = s.rows.len().min(MAX_ROWS).min(room_rows);
    e.u32((s.rows.len() - published) as u32);
    e.u32(published as u32);
    for r in &s.rows[..published] {
        encode_row(&mut e, r);
    }
    debug_assert!(e.buf.len() <= SAMPLE_BYTES);
    e.buf
}

fn decode_sample(buf: &[u8], path: &Path) -> Result<AreaSample, PublishError> {
    let mut d = Decoder { buf, at: 0, path };
    let sampled_at_ns = d.u64("sample time")?;
    let publishes = d.u64("sample publishes")?;
    let counters = decode_counters(&mut d)?;
    let has_pool = d.bool("pool flag")?;
    let pool = PublishedPool {
        workers: d.u64("pool workers")?,
        busy_workers: d.u64("pool busy workers")?,
        min_workers: d.u64("pool min workers")?,
        max_workers: d.u64("pool max workers")?,
        adaptive: d.bool("pool adaptive")?,
        queued_ios: d.u64("pool queued I/Os")?,
    };
    let depth_now = d.u32("depth now")?;
    let depth_samples = d.u64("depth samples")?;
    let mut depth_histogram = [0u64; DEPTH_BUCKETS];
    for v in depth_histogram.iter_mut() {
        *v = d.u64("depth histogram")?;
    }
    let backends = d.u32("backends")?;
    let backend_count = d.u32("backend counters")? as usize;
    if backend_count > super::MAX_BACKENDS {
        return Err(d.garbled(format!(
            "{backend_count} backends' counters, at most {} are written",
            super::MAX_BACKENDS
        )));
    }
    let mut backend_counters = Vec::with_capacity(backend_count);
    for _ in 0..backend_count {
        backend_counters.push(PublishedBackend {
            id: d.u32("backend id")?,
            tid: d.i32("backend tid")?,
            active: d.bool("backend active")?,
            counters: decode_counters(&mut d)?,
        });
    }
    let rows_total = d.u32("rows total")?;
    let rows_cut = d.u32("rows cut")?;
    let published = d.u32("rows published")? as usize;
    if published > MAX_ROWS || published as u64 + rows_cut as u64 != rows_total as u64 {
        return Err(d.garbled(format!(
            "{published} rows published and {rows_cut} cut do not add up to {rows_total} (at most {MAX_ROWS} are published)"
        )));
    }
    let mut rows = Vec::with_capacity(published);
    for _ in 0..published {
        rows.push(decode_row(&mut d)?);
    }
    Ok(AreaSample {
        sampled_at_ns,
        publishes,
        counters,
        pool: has_pool.then_some(pool),
        depth_now,
        depth_samples,
        depth_histogram,
        backends,
        backend_counters,
        rows_total,
        rows_cut,
        rows,
    })
}

// ---------------------------------------------------------------------------------------
// The mapped area
// ---------------------------------------------------------------------------------------

/// Word indexes in the preamble.
const WORD_MAGIC: usize = 0;
const WORD_VERSION: usize = 1;
const WORD_AREA_BYTES: usize = 2;
const WORD_HEADER_LEN: usize = 3;
const WORD_SEQUENCE: usize = 4;
const WORD_SAMPLE_LEN: usize = 5;
const HEADER_WORD: usize = PREAMBLE_BYTES / 8;
const SAMPLE_WORD: usize = (PREAMBLE_BYTES + HEADER_BYTES) / 8;

/// Maps an area file its writer created `AREA_BYTES` long, read-write, as the storage
/// layer's one mapping type. (Readers do not map: they copy the words with `pread`.)
fn map_area(file: &File) -> std::io::Result<MappedRegion> {
    use std::os::fd::AsRawFd;
    MappedRegion::file(file.as_raw_fd(), 0, AREA_BYTES, MapAccess::ReadWrite)
}

/// An area's mapping as `AREA_BYTES / 8` atomic words.
fn words(map: &MappedRegion) -> &[AtomicU64] {
    debug_assert_eq!(map.len_bytes(), AREA_BYTES);
    // SAFETY: the mapping is AREA_BYTES long (`map_area`), page-aligned (so 8-byte aligned),
    // lives as long as the borrow of `map`, and AtomicU64 has the size and alignment of u64;
    // every access goes through atomic operations, so another process writing the words
    // concurrently is not a data race in this process. A read-only mapping is only ever
    // loaded from.
    unsafe { std::slice::from_raw_parts(map.as_ptr() as *const AtomicU64, AREA_BYTES / 8) }
}

fn store_bytes(words: &[AtomicU64], first_word: usize, bytes: &[u8]) {
    for (i, chunk) in bytes.chunks(8).enumerate() {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        words[first_word + i].store(u64::from_le_bytes(w), Ordering::Relaxed);
    }
}

fn load_bytes(words: &[AtomicU64], first_word: usize, len: usize, out: &mut Vec<u8>) {
    out.clear();
    for word in &words[first_word..first_word + len.div_ceil(8)] {
        out.extend_from_slice(&word.load(Ordering::Relaxed).to_le_bytes());
    }
    out.truncate(len);
}

/// The writing side of one area.
struct AreaWriter {
    map: MappedRegion,
    path: PathBuf,
}

impl AreaWriter {
    /// Creates `dir/pageio-aios.<pid>.<instance>` holding `header`.
    fn create(dir: &Path, header: &AreaHeader) -> std::io::Result<AreaWriter> {
        let name = format!("{AREA_FILE_PREFIX}{}.{}", header.pid, header.instance);
        let path = dir.join(&name);
        let tmp = dir.join(format!(".{name}.tmp"));
        // A temporary name left by an earlier process with the same pid (killed while
        // creating its area): ours now, because the pid is.
        let _ = std::fs::remove_file(&tmp);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)?;
        let result = (|| {
            file.set_len(AREA_BYTES as u64)?;
            let map = map_area(&file)?;
            let words = words(&map);
            let encoded = encode_header(header);
            if encoded.len() > HEADER_BYTES {
                return Err(std::io::Error::other("header larger than HEADER_BYTES"));
            }
            store_bytes(words, HEADER_WORD, &encoded);
            words[WORD_VERSION].store(LAYOUT_VERSION, Ordering::Relaxed);
            words[WORD_AREA_BYTES].store(AREA_BYTES as u64, Ordering::Relaxed);
            words[WORD_HEADER_LEN].store(encoded.len() as u64, Ordering::Relaxed);
            words[WORD_SEQUENCE].store(0, Ordering::Relaxed);
            words[WORD_SAMPLE_LEN].store(0, Ordering::Relaxed);
            words[WORD_MAGIC].store(AREA_MAGIC, Ordering::Release);
            // A file of the same name left by a dead process with our pid (it is stale by
            // definition: the pid is ours now) is replaced.
            std::fs::rename(&tmp, &path)?;
            Ok(map)
        })();
        match result {
            Ok(map) => Ok(AreaWriter { map, path }),
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                Err(e)
            }
        }
    }

    /// Writes one sample under the seqlock.
    fn publish(&self, sample: &[u8]) {
        let words = words(&self.map);
        let seq = words[WORD_SEQUENCE].load(Ordering::Relaxed);
        words[WORD_SEQUENCE].store(seq.wrapping_add(1), Ordering::Relaxed);
        // Readers that see the new words also see the odd sequence.
        fence(Ordering::Release);
        words[WORD_SAMPLE_LEN].store(sample.len() as u64, Ordering::Relaxed);
        store_bytes(words, SAMPLE_WORD, sample);
        words[WORD_SEQUENCE].store(seq.wrapping_add(2), Ordering::Release);
    }
}

/// Waits before retry `attempt` of a seqlock read — yielding at first, then sleeping
/// briefly — and says whether to go on: false once [`MAX_READ_WAIT`] has passed since
/// `start` (a writer that never finishes cannot hold a reader).
fn pause_before_retry(attempt: u32, start: Instant) -> bool {
    if attempt == 0 {
        return true;
    }
    if start.elapsed() >= MAX_READ_WAIT {
        return false;
    }
    if attempt < READ_RETRIES_YIELDING {
        std::thread::yield_now();
    } else {
        std::thread::sleep(READ_RETRY_SLEEP);
    }
    true
}

/// Reads the area in `path` if it is trusted by default ([`AreaTrust::OwnerOnly`]).
pub fn read_area(path: &Path) -> Result<PublishedArea, PublishError> {
    read_area_trusting(path, AreaTrust::OwnerOnly)
}

/// Reads the area in `path`, first checking its owner and mode against `trust` on the open
/// descriptor (so a file swapped in after the check is not the one read).
pub fn read_area_trusting(path: &Path, trust: AreaTrust) -> Result<PublishedArea, PublishError> {
    let io = |source| PublishError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                PublishError::NotRegular {
                    path: path.to_path_buf(),
                }
            } else {
                io(e)
            }
        })?;
    let meta = file.metadata().map_err(io)?;
    let file_type = meta.file_type();
    if !file_type.is_file() || file_type.is_fifo() {
        return Err(PublishError::NotRegular {
            path: path.to_path_buf(),
        });
    }
    if let Some(error) = distrust(trust, &meta, path) {
        return Err(error);
    }
    if meta.len() != AREA_BYTES as u64 {
        return Err(PublishError::WrongSize {
            path: path.to_path_buf(),
            size_bytes: meta.len(),
            expected_bytes: AREA_BYTES as u64,
        });
    }
    // Copied with pread, never mapped: a file that another user (or anyone who can write
    // the directory) truncates under a mapping raises SIGBUS in the reader, while a read
    // only comes up short. The seqlock works on the copy as on a mapping: the sequence word
    // is copied before the sample (pread copies in offset order), then read again after
    // it; the copy is consistent when both are the same even number.
    use std::os::unix::fs::FileExt;
    let start = Instant::now();
    let mut bytes = vec![0u8; AREA_BYTES];
    let seq_at = (WORD_SEQUENCE * 8) as u64;
    for attempt in 0u32.. {
        if !pause_before_retry(attempt, start) {
            break;
        }
        let read = |buf: &mut [u8], at: u64| {
            file.read_exact_at(buf, at).map_err(|e| {
                if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    PublishError::WrongSize {
                        path: path.to_path_buf(),
                        size_bytes: file.metadata().map(|m| m.len()).unwrap_or(0),
                        expected_bytes: AREA_BYTES as u64,
                    }
                } else {
                    io(e)
                }
            })
        };
        read(&mut bytes, 0)?;
        let copied = &bytes[seq_at as usize..seq_at as usize + 8];
        if copied[0] % 2 == 1 {
            continue;
        }
        let mut now = [0u8; 8];
        read(&mut now, seq_at)?;
        if now != copied {
            continue;
        }
        return decode_area_bytes(&bytes, path);
    }
    Err(PublishError::Busy {
        path: path.to_path_buf(),
    })
}

/// Reads an area's words: preamble checks, the header, then the sample under the seqlock.
fn read_words(words: &[AtomicU64], path: &Path) -> Result<PublishedArea, PublishError> {
    if words[WORD_MAGIC].load(Ordering::Acquire) != AREA_MAGIC {
        return Err(PublishError::BadMagic {
            path: path.to_path_buf(),
        });
    }
    let version = words[WORD_VERSION].load(Ordering::Relaxed);
    if version != LAYOUT_VERSION {
        return Err(PublishError::UnsupportedVersion {
            path: path.to_path_buf(),
            found: version,
        });
    }
    let garbled = |what: String| PublishError::Garbled {
        path: path.to_path_buf(),
        what,
    };
    let area_bytes = words[WORD_AREA_BYTES].load(Ordering::Relaxed);
    if area_bytes != AREA_BYTES as u64 {
        return Err(garbled(format!(
            "area size field is {area_bytes}, expected {AREA_BYTES}"
        )));
    }
    let header_len = words[WORD_HEADER_LEN].load(Ordering::Relaxed);
    if header_len > HEADER_BYTES as u64 {
        return Err(garbled(format!(
            "header length {header_len} is beyond its {HEADER_BYTES} bytes"
        )));
    }
    let mut buf = Vec::with_capacity(HEADER_BYTES);
    load_bytes(words, HEADER_WORD, header_len as usize, &mut buf);
    let header = decode_header(&buf, path)?;
    let sample = read_sample(words, path, &mut buf)?;
    Ok(PublishedArea {
        path: path.to_path_buf(),
        header,
        sample,
    })
}

fn read_sample(
    words: &[AtomicU64],
    path: &Path,
    buf: &mut Vec<u8>,
) -> Result<AreaSample, PublishError> {
    let start = Instant::now();
    for attempt in 0u32.. {
        if !pause_before_retry(attempt, start) {
            break;
        }
        let before = words[WORD_SEQUENCE].load(Ordering::Acquire);
        if before % 2 == 1 {
            continue;
        }
        let len = words[WORD_SAMPLE_LEN].load(Ordering::Relaxed);
        let len_ok = len <= SAMPLE_BYTES as u64;
        if len_ok {
            load_bytes(words, SAMPLE_WORD, len as usize, buf);
        }
        // The copies above happen before the second load of the sequence.
        fence(Ordering::Acquire);
        let after = words[WORD_SEQUENCE].load(Ordering::Relaxed);
        if before != after {
            continue;
        }
        if !len_ok {
            return Err(PublishError::Garbled {
                path: path.to_path_buf(),
                what: format!("sample length {len} is beyond its {SAMPLE_BYTES} bytes"),
            });
        }
        if before == 0 {
            // Created, not yet published: an empty sample, not an error.
            return Ok(AreaSample {
                sampled_at_ns: 0,
                publishes: 0,
                counters: IoCounters::default(),
                pool: None,
                depth_now: 0,
                depth_samples: 0,
                depth_histogram: [0; DEPTH_BUCKETS],
                backends: 0,
                backend_counters: Vec::new(),
                rows_total: 0,
                rows_cut: 0,
                rows: Vec::new(),
            });
        }
        return decode_sample(buf, path);
    }
    Err(PublishError::Busy {
        path: path.to_path_buf(),
    })
}

/// Decodes an area from a byte image of its file (what [`read_area`] maps): for tests and
/// tools that have the bytes already. Never panics, whatever the bytes.
pub fn decode_area_bytes(bytes: &[u8], path: &Path) -> Result<PublishedArea, PublishError> {
    if bytes.len() != AREA_BYTES {
        return Err(PublishError::WrongSize {
            path: path.to_path_buf(),
            size_bytes: bytes.len() as u64,
            expected_bytes: AREA_BYTES as u64,
        });
    }
    let words: Vec<AtomicU64> = bytes
        .chunks_exact(8)
        .map(|c| {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            AtomicU64::new(u64::from_le_bytes(w))
        })
        .collect();
    read_words(&words, path)
}

// ---------------------------------------------------------------------------------------
// Processes: start time, command line, staleness
// ---------------------------------------------------------------------------------------

/// A process's start time in clock ticks since boot (field 22 of `/proc/<pid>/stat`), or
/// `None` when no such process is visible.
pub fn process_start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces and ')': the fields
    // after the last ')' are space-separated, field 3 first.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(22 - 3)?.parse().ok()
}

/// Whether an area's publisher is gone, and why.
pub fn stale_reason(header: &AreaHeader) -> Option<StaleReason> {
    match process_start_time(header.pid) {
        // 0: the publisher could not read its own start time; only a missing pid counts.
        Some(t) if t == header.start_time_ticks || header.start_time_ticks == 0 => None,
        Some(t) => Some(StaleReason::PidReused {
            start_time_ticks: t,
        }),
        None => {
            // /proc may hide other users' processes (hidepid); kill(pid, 0) tells whether
            // the pid exists at all. EPERM: it exists, but is not ours to read — not stale.
            // SAFETY: signal 0 only checks for existence and permission; nothing is sent.
            let r = unsafe { libc::kill(header.pid, 0) };
            let gone =
                r != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
            gone.then_some(StaleReason::ProcessGone)
        }
    }
}

/// The pid and instance in an area's file name, when the name has the exact pattern
/// `pageio-aios.<pid>.<n>` (digits only).
pub fn parse_area_name(name: &str) -> Option<(i32, u64)> {
    let rest = name.strip_prefix(AREA_FILE_PREFIX)?;
    let (pid, instance) = rest.split_once('.')?;
    let digits = |s: &str| !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(pid) || !digits(instance) {
        return None;
    }
    Some((pid.parse().ok()?, instance.parse().ok()?))
}

/// Most directory entries examined in the publish directory: `/dev/shm` is shared with
/// everything else on the machine, and a directory with millions of files must not turn one
/// `pageio aios` into a long walk.
pub const MAX_DIR_ENTRIES: usize = 100_000;

/// Every area in `dir`: live, stale or unreadable, sorted by pid and instance, with the
/// default trust ([`AreaTrust::OwnerOnly`]). Files whose names do not match the pattern are
/// not looked at.
pub fn list_areas(dir: &Path) -> std::io::Result<Vec<AreaEntry>> {
    list_areas_trusting(dir, AreaTrust::OwnerOnly)
}

/// [`list_areas`] reading the areas `trust` accepts; the others are
/// [`AreaEntry::Unreadable`] with [`PublishError::Untrusted`].
pub fn list_areas_trusting(dir: &Path, trust: AreaTrust) -> std::io::Result<Vec<AreaEntry>> {
    let mut found: Vec<((i32, u64), PathBuf)> = Vec::new();
    for entry in std::fs::read_dir(dir)?.take(MAX_DIR_ENTRIES) {
        let entry = entry?;
        let name = entry.file_name();
        let Some(key) = name.to_str().and_then(parse_area_name) else {
            continue;
        };
        found.push((key, entry.path()));
    }
    found.sort();
    Ok(found
        .into_iter()
        .map(|((pid, _), path)| match read_area_trusting(&path, trust) {
            Err(error) => AreaEntry::Unreadable { path, error },
            Ok(area) if area.header.pid != pid => AreaEntry::Unreadable {
                error: PublishError::Garbled {
                    path: path.clone(),
                    what: format!(
                        "the header's pid {} is not the file name's {pid}",
                        area.header.pid
                    ),
                },
                path,
            },
            Ok(area) => match stale_reason(&area.header) {
                Some(reason) => AreaEntry::Stale { area, reason },
                None => AreaEntry::Live(area),
            },
        })
        .collect())
}

/// Removes a stale area, checking again first that the file has an area's name, starts with
/// the magic, holds the same publisher as `area`, that this publisher is still gone, and that
/// the file passes the default trust ([`AreaTrust::OwnerOnly`]: another user's file is
/// never removed). Returns whether it removed the file.
pub fn remove_stale(area: &PublishedArea) -> Result<bool, PublishError> {
    let path = &area.path;
    let name_ok = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(parse_area_name)
        .is_some();
    if !name_ok {
        return Ok(false);
    }
    let now = read_area(path)?;
    if now.header != area.header || stale_reason(&now.header).is_none() {
        return Ok(false);
    }
    match std::fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(source) => Err(PublishError::Io {
            path: path.clone(),
            source,
        }),
    }
}

// ---------------------------------------------------------------------------------------
// The publisher
// ---------------------------------------------------------------------------------------

/// Areas of this process not yet removed, for the `atexit` hook.
static LIVE_AREAS: Mutex<Vec<CString>> = Mutex::new(Vec::new());

/// The next instance number of this process.
static NEXT_INSTANCE: AtomicU64 = AtomicU64::new(0);

static ATEXIT: Once = Once::new();

extern "C" fn remove_areas_at_exit() {
    // try_lock: a thread that exits the process while another holds the lock must not hang.
    if let Ok(paths) = LIVE_AREAS.try_lock() {
        for path in paths.iter() {
            // SAFETY: a NUL-terminated path we own.
            unsafe {
                libc::unlink(path.as_ptr());
            }
        }
    }
}

fn register_live(path: &Path) {
    ATEXIT.call_once(|| {
        // SAFETY: registers a function that only unlinks paths; runs at exit(3).
        unsafe {
            libc::atexit(remove_areas_at_exit);
        }
    });
    if let Ok(c) = CString::new(path.as_os_str().as_bytes()) {
        LIVE_AREAS.lock().unwrap_or_else(|p| p.into_inner()).push(c);
    }
}

fn unregister_live(path: &Path) {
    let bytes = path.as_os_str().as_bytes();
    LIVE_AREAS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|c| c.as_bytes() != bytes);
}

/// The command line of this process, arguments separated by spaces.
fn own_command_line() -> String {
    match std::fs::read("/proc/self/cmdline") {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            text.trim_end_matches('\0').replace('\0', " ")
        }
        Err(_) => std::env::args().collect::<Vec<_>>().join(" "),
    }
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write; CLOCK_MONOTONIC always exists.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The publisher of one `Aio`: its area and the thread that fills it. Dropping it stops the
/// thread and removes the file.
pub(super) struct Publisher {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Publisher {
    /// Creates the area and starts the thread.
    pub(super) fn start(
        core: Weak<AioCore>,
        config: &crate::IoConfig,
        io_method: &str,
    ) -> std::io::Result<Publisher> {
        // SAFETY: getpid has no preconditions.
        let pid = unsafe { libc::getpid() };
        let header = AreaHeader {
            pid,
            start_time_ticks: process_start_time(pid).unwrap_or(0),
            program: own_command_line(),
            io_method: io_method.to_string(),
            effective_io_concurrency: config.effective_io_concurrency as u64,
            io_combine_limit_blocks: config.io_combine_limit_blocks as u64,
            io_max_concurrency: config.io_max_concurrency as u64,
            direct_io: config.direct_io,
            io_workers: config.io_workers as u64,
            instance: NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed),
        };
        let writer = AreaWriter::create(&config.aio_publish_dir, &header)?;
        let path = writer.path.clone();
        register_live(&path);
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("pageio-aios".into())
                .spawn(move || publisher_loop(core, writer, stop))
        };
        match thread {
            Ok(thread) => Ok(Publisher {
                path,
                stop,
                thread: Some(thread),
            }),
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                unregister_live(&path);
                Err(e)
            }
        }
    }

    /// The area's file.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            // The last `Aio` may be dropped by the publisher thread itself (it holds a
            // strong reference for the length of one publish); it cannot join itself, and
            // it exits right after this.
            if thread.thread().id() != std::thread::current().id() {
                thread.thread().unpark();
                let _ = thread.join();
            }
        }
        let _ = std::fs::remove_file(&self.path);
        unregister_live(&self.path);
    }
}

/// In-flight I/Os: handles given to the method and not yet completed.
fn in_flight_depth(core: &AioCore) -> (u32, u32) {
    let backends = core.backends.read().unwrap_or_else(|p| p.into_inner());
    let depth = backends
        .iter()
        .flat_map(|b| b.handles.iter())
        .filter(|h| h.state() == HandleState::Submitted)
        .count();
    (depth as u32, backends.len() as u32)
}

fn publisher_loop(core: Weak<AioCore>, writer: AreaWriter, stop: Arc<AtomicBool>) {
    let mut histogram = [0u64; DEPTH_BUCKETS];
    let mut samples = 0u64;
    let mut publishes = 0u64;
    let mut next_publish = Instant::now();
    // Depth samples in a row that found nothing in flight, and how many depth-sample
    // intervals the last sleep lasted (the weight of the next sample).
    let mut zero_streak = 0u64;
    let mut weight = 1u64;
    while !stop.load(Ordering::Acquire) {
        let Some(core) = core.upgrade() else { break };
        let (depth, backends) = in_flight_depth(&core);
        // A sample stands for the time since the previous one, so the histogram stays
        // weighted by time when the loop sleeps longer (below).
        histogram[depth_bucket(depth)] += weight;
        samples += weight;
        zero_streak = if depth == 0 { zero_streak + weight } else { 0 };
        let now = Instant::now();
        if now >= next_publish {
            let backend_counters = backend_counters(&core);
            let counters = backend_counters
                .iter()
                .fold(IoCounters::default(), |total, b| total + b.counters);
            let rows = super::Aio { core: core.clone() }.snapshot();
            let pool = core.method.worker_pool().map(|p| PublishedPool {
                workers: p.workers as u64,
                busy_workers: p.workers.saturating_sub(p.idle_workers) as u64,
                min_workers: p.min_workers as u64,
                max_workers: p.max_workers as u64,
                adaptive: p.adaptive,
                queued_ios: p.queued_ios as u64,
            });
            publishes += 1;
            let bytes = encode_sample(&SampleSource {
                sampled_at_ns: monotonic_ns(),
                publishes,
                counters,
                pool,
                depth_now: depth,
                depth_samples: samples,
                depth_histogram: &histogram,
                backends,
                backend_counters: &backend_counters,
                rows: &rows,
            });
            writer.publish(&bytes);
            next_publish = now + PUBLISH_INTERVAL;
        }
        drop(core);
        // Nothing in flight for a whole publish interval (an idle process): sample once per
        // publish interval until something is in flight again. At most one interval at the
        // start of a burst is then counted at the depth of its one sample.
        let idle = zero_streak >= SAMPLES_PER_PUBLISH;
        let sleep = if idle {
            PUBLISH_INTERVAL
        } else {
            DEPTH_SAMPLE_INTERVAL
        };
        weight = if idle { SAMPLES_PER_PUBLISH } else { 1 };
        std::thread::park_timeout(sleep);
    }
}

fn backend_counters(core: &AioCore) -> Vec<PublishedBackend> {
    core.backends
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .map(|b| PublishedBackend {
            id: b.id,
            tid: b.tid.load(Ordering::Relaxed),
            active: b.active.load(Ordering::Relaxed),
            counters: b.counters.snapshot(),
        })
        .collect()
}

/// Writes samples into an area file for tests: the same seqlock writer the publisher
/// thread uses, without an `Aio`.
#[doc(hidden)]
pub struct TestAreaWriter {
    writer: AreaWriter,
}

impl TestAreaWriter {
    /// Creates `dir/pageio-aios.<pid>.<instance>` with `header`.
    pub fn create(dir: &Path, header: &AreaHeader) -> std::io::Result<TestAreaWriter> {
        Ok(TestAreaWriter {
            writer: AreaWriter::create(dir, header)?,
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.writer.path
    }

    /// Publishes a sample built from `counters`, `histogram` and `rows`.
    pub fn publish(
        &self,
        publishes: u64,
        counters: IoCounters,
        histogram: &[u64; DEPTH_BUCKETS],
        rows: &[AioRow],
    ) {
        let bytes = encode_sample(&SampleSource {
            sampled_at_ns: monotonic_ns(),
            publishes,
            counters,
            pool: None,
            depth_now: rows.len() as u32,
            depth_samples: histogram.iter().sum(),
            depth_histogram: histogram,
            backends: 1,
            backend_counters: &[],
            rows,
        });
        self.writer.publish(&bytes);
    }
}
