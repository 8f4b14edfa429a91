//! The parallel checker: every block of every file checked once — in place when the page
//! cache already holds it, otherwise read through the AIO subsystem and checksummed where
//! the read completes — with results reported in `pg_checksums`' order.
//!
//! # Problem
//!
//! `pg_checksums` reads one 8 kB block at a time with synchronous `read(2)` and checksums it
//! on the same core, so it is bound by one core's copy-and-checksum speed when the data is
//! cached and by queue-depth-one latency when it is not. We want the device's bandwidth cold,
//! no copy at all warm — and still the same lines, counts and exit status.
//!
//! # Mechanism
//!
//! ```text
//!                     shared cursor: (file, block) ── next window of ≤ 16 MB (WINDOW_BYTES)
//!                        │            │
//!   scanner thread 1 ◄───┘   …   ◄────┘ scanner thread `jobs`
//!        │
//!        ├─ window fully in the page cache (mapped reads on, not direct I/O)?
//!        │    yes: checksum every page through a read-only mapping, in this thread,
//!        │         no copy (see `mapped`); record the results like a completed read
//!        │    no:  split into reads of ≤ io_combine_limit blocks ─┐
//!        │                                                       ▼
//!        │  keeps effective_io_concurrency reads in flight (aio::IoPipeline in
//!        │  completion order: whichever read finishes first frees its slot;
//!        │  stage_read_owned, reused buffers; partial reads re-issued)
//!        │ submit
//!        ▼
//!   io_method: worker threads / io_uring / inline ─► preadv
//!        │ complete
//!        ▼
//!   shared callback (runs where the read completed — the I/O workers under `worker`):
//!     per block: pd_upper == 0 → new page, skipped;  else pg_checksum_page(block + segno·131072)
//!     mismatch → pushed to that file's slot
//!        │
//!   scanner reclaims: counts blocks, notes a short read, decrements the file's units left
//!        │
//!   calling thread: emits files in walk order as soon as each has no unit left
//! ```
//!
//! Each file's slot counts the units still outstanding: one per window to start with; a
//! window that is read instead of mapped adds one per extra read before staging any, so the
//! count reaches zero exactly when the last of its pages has been checked, by either path.
//! Failures are sorted by block before a file is reported, so the order of lines never
//! depends on which path or thread checked a block.
//!
//! Parallelism comes from three places: mapped windows are checksummed by the scanners
//! (`jobs` of them); under `io_method=worker` the checksums of reads run in the `io_workers`
//! threads; under `sync` and `io_uring` they run in the scanners.
//!
//! A file whose size is not a multiple of 8 kB ends the run as `pg_checksums` ends it: its
//! last read comes back short, the error names the block and the bytes read, and nothing
//! after that file is checked (the walk order is known up front, so nothing after it is even
//! opened). Files before it are reported normally. The window holding the partial block is
//! never mapped (only whole blocks within the size `fstat` reports are), so that error always
//! comes from the read path.
//!
//! # Worked example
//!
//! Three files: `global/1262` (1 block), `base/5/16384` (1112 blocks), `base/5/16384.1`
//! (3 blocks), with `io_combine_limit = 16`. Each is smaller than a window, so the cursor
//! hands out three windows: `1262[0..1]`, `16384[0..1112]`, `16384.1[0..3]`. With everything
//! cached and mapped reads on, each is checked in place. With mapped reads off (or nothing
//! cached) they become 1 + 70 + 1 reads: `16384[0..16]`, … `16384[1104..1112]`, and the unit
//! count of `16384` goes from 1 to 70 before the first of them is staged. The read of
//! `16384.1[0..3]` is checksummed as blocks 131072..131074; a mismatch in its block 2 is
//! reported as "block 2" of `base/5/16384.1`, after every line of `base/5/16384`.
//!
//! # Online mode
//!
//! The online check (`online`) runs this checker with `Mode::online`: no window is mapped
//! (a running server truncates files, and a mapping of a truncated range faults), so every
//! page is read through the AIO subsystem; a file gone when it is opened, or shorter than the
//! walk saw, ends only that file (recorded in its outcome) instead of the run; a page whose
//! header is zero but whose body is not is reported as a failure, as PostgreSQL's
//! `PageIsVerified` rejects it; and reads can be paced to a byte rate. What a failure means
//! on a running server is decided by `online`, which re-reads the page.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::mapped::{map_window, with_guard};
use super::walk::ClusterFile;
use super::VerifyError;
use crate::aio::{
    AioCallbacks, AioError, IoBuffer, IoOp, IoPipeline, IoStatus, IoTarget, PipelineDriver,
    PipelineIo, SharedCompletion, WaitRef,
};
use crate::config::BLCKSZ;
use crate::page::checksum::{pg_checksum_page, stored_checksum};
use crate::storage::page_cache::{self, Residency};
use crate::storage::{OpenMode, SegmentFile, RELSEG_SIZE_BLOCKS};
use crate::{Aio, Backend};

/// How often the calling thread looks for finished files and updates progress. Short enough
/// that failure lines appear promptly, long enough to cost nothing.
const EMIT_INTERVAL: Duration = Duration::from_millis(20);

/// Byte offset of `pd_upper` in the page header; 0 means a new page (`PageIsNew`).
const PD_UPPER_OFFSET: usize = 14;

/// Bytes of a file a scanner takes from the cursor at a time: checked in place as one
/// mapping when the page cache holds them all, else read in `io_combine_limit` pieces.
///
/// Mapped, each window costs a cachestat, an mmap and a munmap (with a TLB shoot-down on the
/// other CPUs); from 4 MB up that is lost in the per-page cost — 4, 16, 64, 256 and 1024 MB
/// windows all checked the 4.7 GB benchmark cluster in 0.29–0.33 s with two scanners —
/// while 1 MB windows were three times slower in a standalone test. Read, a window keeps each
/// scanner on its own stretch of the file instead of two scanners alternating 128 kB reads:
/// cold, that was 2.1–2.4 GB/s against 1.6–1.8 GB/s on the benchmark disk. 16 MB is also a
/// multiple of any page-cache folio size, so a large folio never straddles a window (the 6.18
/// kernel's cachestat reports such a range as uncached, which would only send it to the read
/// path). The bound on memory is address space, not RAM: mapped pages are the page cache's
/// own, and reads use `effective_io_concurrency` reused buffers whatever the window.
pub const WINDOW_BYTES: usize = 16 << 20;

/// Most scanner threads. Each is an AIO backend with its own handles; beyond a few per core
/// they only contend for the cursor.
pub const MAX_JOBS: usize = 64;

/// How [`check_files`] runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckOptions {
    /// Scanner threads: each keeps `effective_io_concurrency` reads in flight and checksums
    /// the windows it checks in place (1..=[`MAX_JOBS`]).
    pub jobs: usize,
    /// Check windows that are entirely in the page cache through a read-only mapping instead
    /// of reading them (see `mapped`). Never used under direct I/O, whose point is to bypass
    /// the page cache.
    pub mapped_reads: bool,
}

impl Default for CheckOptions {
    /// One scanner, mapped reads on.
    fn default() -> CheckOptions {
        CheckOptions {
            jobs: 1,
            mapped_reads: true,
        }
    }
}

/// How [`check_files_in`] treats a cluster: stopped (`pg_checksums`' rules) or running.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Mode {
    /// The server is running: see "Online mode" in the module docs.
    pub(crate) online: bool,
    /// Most bytes read per second over all scanners, if paced.
    pub(crate) max_rate_bytes_per_s: Option<u64>,
}

/// Paces reads to a byte rate: every read is admitted at the moment the bytes issued so far
/// are due at that rate, so the average over the run is at most the rate.
struct Throttle {
    started: std::time::Instant,
    rate_bytes_per_s: u64,
    issued_bytes: AtomicU64,
}

impl Throttle {
    /// Waits until `bytes` more may be read. Each wait is at most the time of the reads
    /// already admitted, so it is bounded by the rate and the reads in flight.
    fn admit(&self, bytes: u64) {
        let issued = self
            .issued_bytes
            .fetch_add(bytes, Ordering::Relaxed)
            .saturating_add(bytes);
        let due = Duration::from_secs_f64(issued as f64 / self.rate_bytes_per_s.max(1) as f64);
        let elapsed = self.started.elapsed();
        if due > elapsed {
            std::thread::sleep(due - elapsed);
        }
    }
}

/// One block whose stored checksum differs from the computed one.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ChecksumFailure {
    /// Block number within the file (what `pg_checksums` prints).
    pub block: u32,
    /// Checksum computed for the block's relation block number.
    pub calculated: u16,
    /// `pd_checksum` stored on the page.
    pub stored: u16,
}

/// What checking one file found.
#[derive(Debug)]
pub struct FileOutcome {
    /// Blocks read in full (new pages included, as `pg_checksums` counts them).
    pub blocks_scanned: u64,
    /// Blocks skipped as new (`pd_upper == 0`).
    pub new_pages: u64,
    /// Checksum mismatches, by block.
    pub failures: Vec<ChecksumFailure>,
    /// The error that ends the run at this file (short read, read error, open error).
    pub error: Option<VerifyError>,
    /// Online only: the file was gone when it was opened (dropped by the server).
    pub vanished: bool,
    /// Online only: a read ended at the file's end before the size the walk saw (the server
    /// truncated it); `blocks_scanned` counts what was there.
    pub shrunk: bool,
}

/// Totals of a completed run.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct CheckTotals {
    /// Files opened and read.
    pub files_scanned: u64,
    /// Blocks read in full.
    pub blocks_scanned: u64,
    /// Blocks skipped as new pages.
    pub new_pages: u64,
    /// Blocks whose checksum does not match.
    pub bad_checksums: u64,
    /// Bytes checked, by either path.
    pub bytes_read: u64,
    /// Of `bytes_read`, the bytes checked in place through a mapping (no read issued).
    pub bytes_mapped: u64,
}

/// Per-file state shared by scanners, the callback and the emitting thread.
struct Slot {
    /// Units (windows, or reads of a window) not yet finished; the file is reported when
    /// this reaches 0.
    units_remaining: AtomicU32,
    blocks_scanned: AtomicU64,
    new_pages: AtomicU64,
    failures: Mutex<Vec<ChecksumFailure>>,
    error: Mutex<Option<VerifyError>>,
    vanished: AtomicBool,
    shrunk: AtomicBool,
}

struct Shared {
    files: Vec<ClusterFile>,
    slots: Vec<Slot>,
    /// Largest read, in blocks (`io_combine_limit`).
    combine_blocks: u64,
    /// Unit handed out by the cursor ([`WINDOW_BYTES`]).
    window_blocks: u64,
    mapped_reads: bool,
    /// See [`Mode::online`].
    online: bool,
    throttle: Option<Throttle>,
    cursor: Mutex<(usize, u64)>,
    /// Index of the first file with an error: no window past it is issued.
    stop_after: AtomicUsize,
    bytes_done: AtomicU64,
    bytes_mapped: AtomicU64,
    abort: AtomicBool,
}

impl Shared {
    fn blocks_to_read(&self, file: usize) -> u64 {
        blocks_to_read(&self.files[file], self.online)
    }

    /// The next window to check: (file, first block in the file, block count).
    fn next_window(&self) -> Option<(usize, u64, u64)> {
        let mut c = self.cursor.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            let (file, block) = *c;
            if file >= self.files.len()
                || file > self.stop_after.load(Ordering::Acquire)
                || self.abort.load(Ordering::Acquire)
            {
                return None;
            }
            let total = self.blocks_to_read(file);
            if block >= total {
                *c = (file + 1, 0);
                continue;
            }
            let n = (total - block).min(self.window_blocks);
            *c = (file, block + n);
            return Some((file, block, n));
        }
    }

    /// Records the error that ends the run at `file`. Of several, the one at the lowest
    /// block is kept — the one `pg_checksums`, reading in order, would have hit first —
    /// whichever scanner found it first.
    fn fail_file(&self, file: usize, error: VerifyError) {
        if self.online {
            // The server drops and truncates files while we read: that ends the file, not
            // the run.
            match &error {
                VerifyError::Aio(AioError::Storage(e))
                    if matches!(**e, crate::storage::StorageError::NotFound { .. }) =>
                {
                    self.slots[file].vanished.store(true, Ordering::Release);
                    return;
                }
                VerifyError::ShortRead { .. } => {
                    self.slots[file].shrunk.store(true, Ordering::Release);
                    return;
                }
                _ => {}
            }
        }
        let mut e = self.slots[file]
            .error
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let earlier = match (e.as_ref().and_then(VerifyError::block), error.block()) {
            (Some(old), Some(new)) => new < old,
            (None, _) => e.is_none(),
            (Some(_), None) => false,
        };
        if earlier {
            *e = Some(error);
        }
        self.stop_after.fetch_min(file, Ordering::AcqRel);
    }

    /// Marks one unit of `file` finished; everything it found must be recorded before.
    fn finish_unit(&self, file: usize) {
        self.slots[file]
            .units_remaining
            .fetch_sub(1, Ordering::AcqRel);
    }
}

/// Blocks of `file` to check: every block the walk saw, a partial last one included (its
/// read reports it, as `pg_checksums` does); online, only whole blocks, since a partial one
/// is a block the server is appending right now.
fn blocks_to_read(file: &ClusterFile, online: bool) -> u64 {
    if online {
        file.size_bytes / BLCKSZ as u64
    } else {
        file.size_bytes.div_ceil(BLCKSZ as u64)
    }
}

/// Checks consecutive whole pages, the first being block `first_block` of a segment whose
/// blocks are numbered from `seg_base` in the relation. Mismatches are appended to
/// `failures`; returns the number of new (all-zero header) pages skipped.
fn check_pages(
    bytes: &[u8],
    first_block: u64,
    seg_base: u32,
    failures: &mut Vec<ChecksumFailure>,
) -> u64 {
    let mut new_pages = 0;
    for (i, page) in bytes.chunks_exact(BLCKSZ).enumerate() {
        let Ok(page) = <&[u8; BLCKSZ]>::try_from(page) else {
            break;
        };
        if let Some(f) = check_page(page, first_block + i as u64, seg_base, false) {
            failures.push(f);
        } else if is_new(page) {
            new_pages += 1;
        }
    }
    new_pages
}

fn is_new(page: &[u8; BLCKSZ]) -> bool {
    page[PD_UPPER_OFFSET] == 0 && page[PD_UPPER_OFFSET + 1] == 0
}

/// `None` for a good or new page, the failure otherwise. A page with `pd_upper == 0` is new
/// (`pg_checksums`' `PageIsNew`); with `all_zero_rule` it is new only when all of it is zero
/// (`PageIsVerified`), so a zeroed header over live data is a failure.
#[inline]
pub(crate) fn check_page(
    page: &[u8; BLCKSZ],
    block: u64,
    seg_base: u32,
    all_zero_rule: bool,
) -> Option<ChecksumFailure> {
    if is_new(page) && (!all_zero_rule || page.iter().all(|&b| b == 0)) {
        return None;
    }
    let block_in_file = block as u32;
    // pg_checksums computes `blockno + segmentno * RELSEG_SIZE` in 32-bit BlockNumber
    // arithmetic; wrapping keeps us bit-identical even for absurd segment numbers.
    let calculated = pg_checksum_page(page, block_in_file.wrapping_add(seg_base));
    let stored = stored_checksum(page);
    (calculated != stored).then_some(ChecksumFailure {
        block: block_in_file,
        calculated,
        stored,
    })
}

/// Verifies pages in the thread that completes each read.
struct VerifyCallback {
    shared: Arc<Shared>,
}

impl AioCallbacks for VerifyCallback {
    fn complete_shared(&self, io: &mut SharedCompletion<'_>) {
        if io.op != IoOp::Readv || io.result.status == IoStatus::Error {
            return;
        }
        let (Some(&file), Some(&first)) = (io.handle_data.first(), io.handle_data.get(1)) else {
            return;
        };
        let Some(slot) = self.shared.slots.get(file as usize) else {
            return;
        };
        let seg_base = self.shared.files[file as usize]
            .segno
            .wrapping_mul(RELSEG_SIZE_BLOCKS);
        let mut new_pages = 0;
        let mut bad = Vec::new();
        for i in 0..io.result.blocks_done as usize {
            let Some(block) = io.block_mut(i) else { break };
            let Ok(page) = <&[u8; BLCKSZ]>::try_from(&*block) else {
                break;
            };
            if let Some(f) = check_page(page, first + i as u64, seg_base, self.shared.online) {
                bad.push(f);
            } else if is_new(page) {
                new_pages += 1;
            }
        }
        slot.new_pages.fetch_add(new_pages, Ordering::Relaxed);
        if !bad.is_empty() {
            slot.failures
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend(bad);
        }
    }
}

/// Checks `files` (in walk order) on `aio` as `options` say.
///
/// `on_file` is called on the calling thread once per file, in order, as soon as the file is
/// fully checked; `on_progress` is called with the bytes checked so far every few
/// milliseconds. Returns the totals, or the error of the first file (in walk order) that
/// could not be read in full — after `on_file` has reported that file and every file before
/// it.
pub fn check_files(
    aio: &Aio,
    files: Vec<ClusterFile>,
    options: &CheckOptions,
    on_file: impl FnMut(&ClusterFile, &FileOutcome),
    on_progress: impl FnMut(u64),
) -> Result<CheckTotals, VerifyError> {
    check_files_in(aio, files, options, Mode::default(), on_file, on_progress)
}

/// [`check_files`] in the given [`Mode`].
pub(crate) fn check_files_in(
    aio: &Aio,
    files: Vec<ClusterFile>,
    options: &CheckOptions,
    mode: Mode,
    mut on_file: impl FnMut(&ClusterFile, &FileOutcome),
    mut on_progress: impl FnMut(u64),
) -> Result<CheckTotals, VerifyError> {
    let mut files = files;
    if !mode.online {
        // Like pg_checksums, stop at the first file that ends in a partial block; nothing
        // after it is opened.
        let limit = files
            .iter()
            .position(|f| f.size_bytes % BLCKSZ as u64 != 0)
            .map_or(files.len(), |i| i + 1);
        files.truncate(limit);
    }
    let config = aio.config();
    let combine_blocks = config.io_combine_limit_blocks.max(1) as u64;
    let mapped_reads = options.mapped_reads && !config.direct_io && !mode.online;
    let window_blocks = ((WINDOW_BYTES / BLCKSZ) as u64).max(combine_blocks);
    let shared = new_shared(files, combine_blocks, window_blocks, mapped_reads, mode);
    let jobs = options.jobs.clamp(1, MAX_JOBS);
    let depth = config
        .effective_io_concurrency
        .max(1)
        .min(config.io_max_concurrency);

    let mut totals = CheckTotals::default();
    let mut fatal: Option<VerifyError> = None;
    // Scanners wake the calling thread when they end, so the last files are reported (and
    // the run returns) at once rather than at the next EMIT_INTERVAL tick.
    let emitter = std::thread::current();
    let scanners_done = AtomicUsize::new(0);
    let thread_errors = std::thread::scope(|s| {
        let handles: Vec<_> = (0..jobs)
            .map(|_| {
                let shared = shared.clone();
                let aio = aio.clone();
                let emitter = emitter.clone();
                let scanners_done = &scanners_done;
                s.spawn(move || {
                    let r = scanner(&aio, &shared, depth);
                    if r.is_err() {
                        shared.abort.store(true, Ordering::Release);
                    }
                    scanners_done.fetch_add(1, Ordering::AcqRel);
                    emitter.unpark();
                    r
                })
            })
            .collect();
        let mut next = 0usize;
        loop {
            let finished = scanners_done.load(Ordering::Acquire) == handles.len();
            while fatal.is_none()
                && next < shared.files.len()
                && shared.slots[next].units_remaining.load(Ordering::Acquire) == 0
            {
                let outcome = take_outcome(&shared.slots[next]);
                on_file(&shared.files[next], &outcome);
                totals.files_scanned += 1;
                totals.blocks_scanned += outcome.blocks_scanned;
                totals.new_pages += outcome.new_pages;
                totals.bad_checksums += outcome.failures.len() as u64;
                if let Some(e) = outcome.error {
                    shared.stop_after.fetch_min(next, Ordering::AcqRel);
                    fatal = Some(e);
                }
                next += 1;
            }
            on_progress(shared.bytes_done.load(Ordering::Relaxed));
            if finished || fatal.is_some() || shared.abort.load(Ordering::Acquire) {
                break;
            }
            std::thread::park_timeout(EMIT_INTERVAL);
        }
        handles
            .into_iter()
            .filter_map(|h| match h.join() {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e),
                Err(_) => Some(VerifyError::Internal("a scanner thread panicked".into())),
            })
            .collect::<Vec<_>>()
    });
    if let Some(e) = fatal {
        return Err(e);
    }
    if let Some(e) = thread_errors.into_iter().next() {
        return Err(e);
    }
    totals.bytes_read = shared.bytes_done.load(Ordering::Relaxed);
    totals.bytes_mapped = shared.bytes_mapped.load(Ordering::Relaxed);
    Ok(totals)
}

/// The state the scanners, the callback and the emitting thread share, every file's slot
/// holding its windows still to check.
fn new_shared(
    files: Vec<ClusterFile>,
    combine_blocks: u64,
    window_blocks: u64,
    mapped_reads: bool,
    mode: Mode,
) -> Arc<Shared> {
    let slots = files
        .iter()
        .map(|f| Slot {
            units_remaining: AtomicU32::new(
                blocks_to_read(f, mode.online)
                    .div_ceil(window_blocks)
                    .min(u32::MAX as u64) as u32,
            ),
            blocks_scanned: AtomicU64::new(0),
            new_pages: AtomicU64::new(0),
            failures: Mutex::new(Vec::new()),
            error: Mutex::new(None),
            vanished: AtomicBool::new(false),
            shrunk: AtomicBool::new(false),
        })
        .collect();
    Arc::new(Shared {
        files,
        slots,
        combine_blocks,
        window_blocks,
        mapped_reads,
        online: mode.online,
        throttle: mode.max_rate_bytes_per_s.map(|rate| Throttle {
            started: std::time::Instant::now(),
            rate_bytes_per_s: rate,
            issued_bytes: AtomicU64::new(0),
        }),
        cursor: Mutex::new((0, 0)),
        stop_after: AtomicUsize::new(usize::MAX),
        bytes_done: AtomicU64::new(0),
        bytes_mapped: AtomicU64::new(0),
        abort: AtomicBool::new(false),
    })
}

/// The outcome of a file all of whose units are done, taken out of its slot: its
/// mismatches in block order, and its error.
fn take_outcome(slot: &Slot) -> FileOutcome {
    let mut failures =
        std::mem::take(&mut *slot.failures.lock().unwrap_or_else(|p| p.into_inner()));
    failures.sort_by_key(|f| f.block);
    let error = slot.error.lock().unwrap_or_else(|p| p.into_inner()).take();
    // pg_checksums stops at a block it cannot read: mismatches found past it (by reads
    // already in flight) are not reported.
    if let Some(stop) = error.as_ref().and_then(VerifyError::block) {
        failures.retain(|f| (f.block as u64) < stop);
    }
    FileOutcome {
        blocks_scanned: slot.blocks_scanned.load(Ordering::Acquire),
        new_pages: slot.new_pages.load(Ordering::Acquire),
        failures,
        error,
        vanished: slot.vanished.load(Ordering::Acquire),
        shrunk: slot.shrunk.load(Ordering::Acquire),
    }
}

/// Checks the window `first..first + n` of `file` in place if the page cache holds all of
/// it; returns false (nothing recorded) when it must be read instead.
fn check_in_place(shared: &Shared, file: usize, seg: &SegmentFile, first: u64, n: u64) -> bool {
    let offset_bytes = first * BLCKSZ as u64;
    let len_bytes = (n as usize) * BLCKSZ;
    let fd = seg.raw_fd();
    // Map only what exists now: a window reaching past the current end (a partial last
    // block, or a file that shrank since the walk) is read, so the read path reports it.
    // SAFETY: fstat writes into the zeroed struct; fd is open while `seg` lives.
    let size_bytes = unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut st) != 0 {
            return false;
        }
        st.st_size as u64
    };
    if offset_bytes + len_bytes as u64 > size_bytes
        || !offset_bytes.is_multiple_of(page_cache::page_size() as u64)
    {
        return false;
    }
    let residency = page_cache::residency(fd, offset_bytes, len_bytes);
    if residency == Residency::NotAll {
        return false;
    }
    let Ok(mapping) = map_window(fd, offset_bytes, len_bytes) else {
        return false;
    };
    if residency == Residency::Unknown && !mapping.all_resident() {
        return false;
    }
    let seg_base = shared.files[file].segno.wrapping_mul(RELSEG_SIZE_BLOCKS);
    let mut failures = Vec::new();
    let Ok(new_pages) = with_guard(&mapping, |bytes| {
        check_pages(bytes, first, seg_base, &mut failures)
    }) else {
        return false;
    };
    drop(mapping);
    let slot = &shared.slots[file];
    slot.new_pages.fetch_add(new_pages, Ordering::Relaxed);
    slot.blocks_scanned.fetch_add(n, Ordering::Relaxed);
    if !failures.is_empty() {
        slot.failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(failures);
    }
    shared
        .bytes_done
        .fetch_add(len_bytes as u64, Ordering::Relaxed);
    shared
        .bytes_mapped
        .fetch_add(len_bytes as u64, Ordering::Relaxed);
    shared.finish_unit(file);
    true
}

/// One read a scanner stages: `n` blocks of `file` from block `first`.
struct Read {
    file: usize,
    seg: Arc<SegmentFile>,
    first: u64,
    n: u32,
}

/// One scanner: takes windows from the cursor, checks cached ones in place and keeps
/// `depth` reads of the others in flight through the AIO layer's [`IoPipeline`], until the
/// cursor runs dry.
///
/// A read that comes back PARTIAL has its rest re-issued by the pipeline; the unit stays open
/// until the last piece completes. A read of several blocks that fails with an errno is read
/// again one block at a time, so the error names the block that failed, as `pg_checksums`
/// (which reads one block at a time) names it; blocks of the range that do read are checked
/// as usual.
fn scanner(aio: &Aio, shared: &Arc<Shared>, depth: usize) -> Result<(), VerifyError> {
    let mut backend = aio.backend()?;
    let combine = shared.combine_blocks;
    let mut driver = ScanReads {
        aio,
        shared,
        callbacks: Arc::new(VerifyCallback {
            shared: shared.clone(),
        }),
        combine_blocks: combine,
        full_bytes: combine as usize * BLCKSZ,
        depth,
        free_buffers: Vec::with_capacity(depth),
        pending: VecDeque::new(),
    };
    // Completion order: a window's reads are independent (failures are sorted by block before
    // a file is reported), so a slow read must not keep the finished ones' slots idle.
    IoPipeline::new(depth)
        .completion_order()
        .run(&mut backend, &mut driver)?;
    Ok(())
}

/// Which file (and open segment) a scanner's read belongs to.
#[derive(Clone)]
struct ReadTag {
    file: usize,
    seg: Arc<SegmentFile>,
}

/// The pipeline driver of one scanner.
struct ScanReads<'a> {
    aio: &'a Aio,
    shared: &'a Arc<Shared>,
    callbacks: Arc<dyn AioCallbacks>,
    combine_blocks: u64,
    full_bytes: usize,
    depth: usize,
    /// Full-size buffers come back with each completion and are reused: allocating and
    /// zeroing a buffer per read would cost as much memory bandwidth as the read itself.
    free_buffers: Vec<IoBuffer>,
    /// Reads not staged yet: the rest of the current window, and block-by-block retries.
    pending: VecDeque<Read>,
}

impl ScanReads<'_> {
    fn recycle(&mut self, buffer: Option<IoBuffer>) {
        if let Some(buffer) = buffer {
            if buffer.len() == self.full_bytes && self.free_buffers.len() < self.depth {
                self.free_buffers.push(buffer);
            }
        }
    }
}

impl PipelineDriver for ScanReads<'_> {
    type Tag = ReadTag;

    fn next_io(&mut self, backend: &mut Backend) -> Option<PipelineIo<ReadTag>> {
        let shared = self.shared;
        loop {
            if let Some(read) = self.pending.pop_front() {
                if let Some(throttle) = &shared.throttle {
                    // Keep what is staged moving while this scanner waits for its turn.
                    backend.submit_staged();
                    throttle.admit(read.n as u64 * BLCKSZ as u64);
                }
                return Some(PipelineIo {
                    first_block: read.first,
                    nblocks: read.n,
                    tag: ReadTag {
                        file: read.file,
                        seg: read.seg,
                    },
                });
            }
            // The cursor is finite: every call moves it forward, so this loop ends.
            let (file, first, n) = shared.next_window()?;
            let cluster_file = &shared.files[file];
            let seg = match self.aio.files().open(
                &cluster_file.path,
                cluster_file.display.clone(),
                OpenMode::Read,
            ) {
                Ok(seg) => seg,
                Err(e) => {
                    shared.fail_file(file, VerifyError::Aio(AioError::Storage(Arc::new(e))));
                    shared.finish_unit(file);
                    continue;
                }
            };
            if shared.mapped_reads {
                // Keep the reads already staged moving while this thread checksums.
                backend.submit_staged();
                if check_in_place(shared, file, &seg, first, n) {
                    continue;
                }
            }
            split_into_reads(
                shared,
                file,
                &seg,
                first,
                n,
                self.combine_blocks,
                &mut self.pending,
            );
        }
    }

    fn stage(
        &mut self,
        backend: &mut Backend,
        io: &PipelineIo<ReadTag>,
    ) -> Result<WaitRef, AioError> {
        let cluster_file = &self.shared.files[io.tag.file];
        let len = io.nblocks as usize * BLCKSZ;
        let buffer = match self.free_buffers.pop() {
            Some(b) if b.len() == len => b,
            Some(b) => {
                self.free_buffers.push(b);
                IoBuffer::zeroed(len)
            }
            None => IoBuffer::zeroed(len),
        };
        let target = IoTarget {
            path: cluster_file.display.clone(),
            first_block: cluster_file.segno as u64 * RELSEG_SIZE_BLOCKS as u64 + io.first_block,
            nblocks: io.nblocks,
        };
        let mut handle = backend.acquire()?;
        handle.set_callbacks(
            self.callbacks.clone(),
            &[io.tag.file as u64, io.first_block],
        );
        handle.stage_read_owned(
            io.tag.seg.clone(),
            io.first_block * BLCKSZ as u64,
            buffer,
            target,
        )
    }

    fn stage_failed(&mut self, io: PipelineIo<ReadTag>, error: AioError) -> Result<(), AioError> {
        // The file ends the run here; other files go on.
        self.shared.fail_file(io.tag.file, error.into());
        self.shared.finish_unit(io.tag.file);
        Ok(())
    }

    fn complete(
        &mut self,
        io: &PipelineIo<ReadTag>,
        completion: crate::aio::IoCompletion,
    ) -> Result<(), AioError> {
        let shared = self.shared;
        let file = io.tag.file;
        let slot = &shared.slots[file];
        let done = completion.result.blocks_done.min(io.nblocks) as u64;
        slot.blocks_scanned.fetch_add(done, Ordering::Relaxed);
        shared
            .bytes_done
            .fetch_add(done * BLCKSZ as u64, Ordering::Relaxed);
        if shared.online
            && done < io.nblocks as u64
            && completion.result.raw_result >= 0
            && completion.result.status != IoStatus::Partial
        {
            // The file ended before the size the walk saw: the server truncated it.
            slot.shrunk.store(true, Ordering::Release);
        }
        match completion.result.status {
            IoStatus::Ok => {}
            // The pipeline re-issues the rest; the unit ends with its last piece.
            IoStatus::Partial => {
                self.recycle(completion.buffer);
                return Ok(());
            }
            IoStatus::Error | IoStatus::Unknown => {
                if completion.result.raw_result < 0 && io.nblocks > 1 && done == 0 {
                    // Find the failing block: retry the range block by block, next.
                    slot.units_remaining
                        .fetch_add(io.nblocks - 1, Ordering::AcqRel);
                    for block in (io.first_block..io.first_block + io.nblocks as u64).rev() {
                        self.pending.push_front(Read {
                            file,
                            seg: io.tag.seg.clone(),
                            first: block,
                            n: 1,
                        });
                    }
                    self.recycle(completion.buffer);
                    return Ok(());
                }
                if let Some(e) = read_error(
                    &shared.files[file],
                    io.first_block,
                    done,
                    &completion.result,
                ) {
                    shared.fail_file(file, e);
                }
            }
        }
        self.recycle(completion.buffer);
        shared.finish_unit(file);
        Ok(())
    }
}

/// Queues the reads of a window that is not checked in place: `io_combine_limit` blocks
/// each, the file's unit count raised first so it cannot reach zero before the last one.
fn split_into_reads(
    shared: &Shared,
    file: usize,
    seg: &Arc<SegmentFile>,
    first: u64,
    n: u64,
    combine: u64,
    pending: &mut VecDeque<Read>,
) {
    let reads = n.div_ceil(combine);
    if reads > 1 {
        shared.slots[file]
            .units_remaining
            .fetch_add((reads - 1) as u32, Ordering::AcqRel);
    }
    let mut b = first;
    while b < first + n {
        let k = (first + n - b).min(combine);
        pending.push_back(Read {
            file,
            seg: seg.clone(),
            first: b,
            n: k as u32,
        });
        b += k;
    }
}

/// Turns an incomplete read into `pg_checksums`' error, or `None` when the read simply hit
/// the end of a file that shrank to a block boundary (which `pg_checksums` takes as the end).
fn read_error(
    file: &ClusterFile,
    first: u64,
    blocks_done: u64,
    result: &crate::aio::IoResult,
) -> Option<VerifyError> {
    let block = first + blocks_done;
    if result.raw_result < 0 {
        return Some(VerifyError::ReadFailed {
            path: file.display.to_string(),
            block,
            source: std::io::Error::from_raw_os_error((-result.raw_result) as i32),
        });
    }
    match &result.error {
        Some(AioError::Short { .. }) | None => {
            let bytes_read = (result.raw_result as u64).saturating_sub(blocks_done * BLCKSZ as u64);
            (bytes_read > 0).then(|| VerifyError::ShortRead {
                path: file.display.to_string(),
                block,
                bytes_read: bytes_read as usize,
                expected_bytes: BLCKSZ,
            })
        }
        Some(other) => Some(VerifyError::Aio(other.clone())),
    }
}
