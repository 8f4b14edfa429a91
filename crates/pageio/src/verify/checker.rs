//! The parallel checker: every block of every file read through the AIO subsystem, every
//! checksum computed where the read completes, results reported in `pg_checksums`' order.
//!
//! # Problem
//!
//! `pg_checksums` reads one 8 kB block at a time with synchronous `read(2)` and checksums it
//! on the same core, so it is bound by one core's checksum speed when the data is cached and
//! by queue-depth-one latency when it is not. We want the device's bandwidth cold and every
//! core's checksum throughput warm — and still the same lines, counts and exit status.
//!
//! # Mechanism
//!
//! ```text
//!                     shared cursor: (file, block) ── next chunk of ≤ io_combine_limit blocks
//!                        │            │
//!   scanner thread 1 ◄───┘   …   ◄────┘ scanner thread `jobs`    (each an AIO backend)
//!     keeps effective_io_concurrency reads in flight (stage_read_owned, reused buffers)
//!        │ submit
//!        ▼
//!   io_method: worker threads / io_uring / inline ─► preadv
//!        │ complete
//!        ▼
//!   shared callback (runs where the read completed — the I/O workers under `worker`):
//!     per block: pd_upper == 0 → new page, skipped;  else pg_checksum_page(block + segno·131072)
//!     mismatch → pushed to that file's slot
//!        │
//!   scanner reclaims: counts blocks, notes a short read, decrements the file's I/Os left
//!        │
//!   calling thread: emits files in walk order as soon as each has no I/O left
//! ```
//!
//! Parallelism comes from two places. Under `io_method=worker` the checksum work runs in the
//! `io_workers` threads, so one scanner suffices. Under `sync` and `io_uring` the callback
//! runs in the scanner itself, so several scanners (`jobs`) are needed to use several cores.
//!
//! A file whose size is not a multiple of 8 kB ends the run as `pg_checksums` ends it: its
//! last read comes back short, the error names the block and the bytes read, and nothing
//! after that file is checked (the walk order is known up front, so nothing after it is even
//! opened). Files before it are reported normally.
//!
//! # Worked example
//!
//! Three files: `global/1262` (1 block), `base/5/16384` (1112 blocks), `base/5/16384.1`
//! (3 blocks) with `io_combine_limit = 16`. The cursor hands out `1262[0..1]`,
//! `16384[0..16]`, … `16384[1104..1112]`, `16384.1[0..3]`: 72 reads. The read of
//! `16384.1[0..3]` is checksummed as blocks 131072..131074; a mismatch in its block 2 is
//! reported as "block 2" of `base/5/16384.1`, after every line of `base/5/16384`.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::walk::ClusterFile;
use super::VerifyError;
use crate::aio::{AioCallbacks, AioError, IoBuffer, IoOp, IoStatus, IoTarget, SharedCompletion};
use crate::config::BLCKSZ;
use crate::page::checksum::{pg_checksum_page, stored_checksum};
use crate::storage::{OpenMode, RELSEG_SIZE_BLOCKS};
use crate::Aio;

/// How often the calling thread looks for finished files and updates progress. Short enough
/// that failure lines appear promptly, long enough to cost nothing.
const EMIT_INTERVAL: Duration = Duration::from_millis(20);

/// Byte offset of `pd_upper` in the page header; 0 means a new page (`PageIsNew`).
const PD_UPPER_OFFSET: usize = 14;

/// Most scanner threads. Each is an AIO backend with its own handles; beyond a few per core
/// they only contend for the cursor.
pub const MAX_JOBS: usize = 64;

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
    /// Bytes read.
    pub bytes_read: u64,
}

/// Per-file state shared by scanners, the callback and the emitting thread.
struct Slot {
    /// Reads not yet reclaimed; the file is reported when this reaches 0.
    ios_remaining: AtomicU32,
    blocks_scanned: AtomicU64,
    new_pages: AtomicU64,
    failures: Mutex<Vec<ChecksumFailure>>,
    error: Mutex<Option<VerifyError>>,
}

struct Shared {
    files: Vec<ClusterFile>,
    slots: Vec<Slot>,
    combine_blocks: u64,
    cursor: Mutex<(usize, u64)>,
    /// Index of the first file with an error: no chunk past it is issued.
    stop_after: AtomicUsize,
    bytes_done: AtomicU64,
    abort: AtomicBool,
}

impl Shared {
    fn blocks_to_read(&self, file: usize) -> u64 {
        self.files[file].size_bytes.div_ceil(BLCKSZ as u64)
    }

    /// The next chunk to read: (file, first block in the file, block count).
    fn next_chunk(&self) -> Option<(usize, u64, u32)> {
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
            let n = (total - block).min(self.combine_blocks);
            *c = (file, block + n);
            return Some((file, block, n as u32));
        }
    }

    fn fail_file(&self, file: usize, error: VerifyError) {
        let mut e = self.slots[file]
            .error
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if e.is_none() {
            *e = Some(error);
        }
        self.stop_after.fetch_min(file, Ordering::AcqRel);
    }
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
        let segno = self.shared.files[file as usize].segno;
        // pg_checksums computes `blockno + segmentno * RELSEG_SIZE` in 32-bit BlockNumber
        // arithmetic; wrapping keeps us bit-identical even for absurd segment numbers.
        let seg_base = segno.wrapping_mul(RELSEG_SIZE_BLOCKS);
        let mut new_pages = 0;
        let mut bad = Vec::new();
        for i in 0..io.result.blocks_done as usize {
            let Some(block) = io.block_mut(i) else { break };
            let Ok(page) = <&[u8; BLCKSZ]>::try_from(&*block) else {
                break;
            };
            if page[PD_UPPER_OFFSET] == 0 && page[PD_UPPER_OFFSET + 1] == 0 {
                new_pages += 1;
                continue;
            }
            let block_in_file = (first + i as u64) as u32;
            let calculated = pg_checksum_page(page, block_in_file.wrapping_add(seg_base));
            let stored = stored_checksum(page);
            if calculated != stored {
                bad.push(ChecksumFailure {
                    block: block_in_file,
                    calculated,
                    stored,
                });
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

/// Checks `files` (in walk order) with `jobs` scanner threads on `aio`.
///
/// `on_file` is called on the calling thread once per file, in order, as soon as the file is
/// fully checked; `on_progress` is called with the bytes read so far every few milliseconds.
/// Returns the totals, or the error of the first file (in walk order) that could not be read
/// in full — after `on_file` has reported that file and every file before it.
pub fn check_files(
    aio: &Aio,
    files: Vec<ClusterFile>,
    jobs: usize,
    mut on_file: impl FnMut(&ClusterFile, &FileOutcome),
    mut on_progress: impl FnMut(u64),
) -> Result<CheckTotals, VerifyError> {
    // Like pg_checksums, stop at the first file that ends in a partial block; nothing after
    // it is opened.
    let limit = files
        .iter()
        .position(|f| f.size_bytes % BLCKSZ as u64 != 0)
        .map_or(files.len(), |i| i + 1);
    let mut files = files;
    files.truncate(limit);
    let config = aio.config();
    let combine_blocks = config.io_combine_limit_blocks.max(1) as u64;
    let slots = files
        .iter()
        .map(|f| Slot {
            ios_remaining: AtomicU32::new(
                f.size_bytes
                    .div_ceil(BLCKSZ as u64)
                    .div_ceil(combine_blocks)
                    .min(u32::MAX as u64) as u32,
            ),
            blocks_scanned: AtomicU64::new(0),
            new_pages: AtomicU64::new(0),
            failures: Mutex::new(Vec::new()),
            error: Mutex::new(None),
        })
        .collect();
    let shared = Arc::new(Shared {
        files,
        slots,
        combine_blocks,
        cursor: Mutex::new((0, 0)),
        stop_after: AtomicUsize::new(usize::MAX),
        bytes_done: AtomicU64::new(0),
        abort: AtomicBool::new(false),
    });
    let jobs = jobs.clamp(1, MAX_JOBS);
    let depth = config
        .effective_io_concurrency
        .max(1)
        .min(config.io_max_concurrency);

    let mut totals = CheckTotals::default();
    let mut fatal: Option<VerifyError> = None;
    let thread_errors = std::thread::scope(|s| {
        let handles: Vec<_> = (0..jobs)
            .map(|_| {
                let shared = shared.clone();
                let aio = aio.clone();
                s.spawn(move || {
                    let r = scanner(&aio, &shared, depth);
                    if r.is_err() {
                        shared.abort.store(true, Ordering::Release);
                    }
                    r
                })
            })
            .collect();
        let mut next = 0usize;
        loop {
            let finished = handles.iter().all(|h| h.is_finished());
            while fatal.is_none()
                && next < shared.files.len()
                && shared.slots[next].ios_remaining.load(Ordering::Acquire) == 0
            {
                let slot = &shared.slots[next];
                let mut failures =
                    std::mem::take(&mut *slot.failures.lock().unwrap_or_else(|p| p.into_inner()));
                failures.sort_by_key(|f| f.block);
                let outcome = FileOutcome {
                    blocks_scanned: slot.blocks_scanned.load(Ordering::Acquire),
                    new_pages: slot.new_pages.load(Ordering::Acquire),
                    failures,
                    error: slot.error.lock().unwrap_or_else(|p| p.into_inner()).take(),
                };
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
            std::thread::sleep(EMIT_INTERVAL);
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
    Ok(totals)
}

/// One scanner: an AIO backend keeping `depth` reads in flight until the cursor runs dry.
fn scanner(aio: &Aio, shared: &Arc<Shared>, depth: usize) -> Result<(), VerifyError> {
    let mut backend = aio.backend()?;
    let callbacks: Arc<dyn AioCallbacks> = Arc::new(VerifyCallback {
        shared: shared.clone(),
    });
    let full_bytes = shared.combine_blocks as usize * BLCKSZ;
    // Full-size buffers come back with each completion and are reused: allocating and
    // zeroing 128 kB per read would cost as much memory bandwidth as the read itself.
    let mut free_buffers: Vec<IoBuffer> = Vec::with_capacity(depth);
    let mut in_flight = VecDeque::with_capacity(depth);
    loop {
        backend.enter_batch_mode();
        while in_flight.len() < depth {
            let Some((file, first, n)) = shared.next_chunk() else {
                break;
            };
            let f = &shared.files[file];
            let seg_file = match aio.files().open(&f.path, f.display.clone(), OpenMode::Read) {
                Ok(h) => h,
                Err(e) => {
                    shared.fail_file(file, VerifyError::Aio(AioError::Storage(Arc::new(e))));
                    shared.slots[file]
                        .ios_remaining
                        .fetch_sub(1, Ordering::AcqRel);
                    continue;
                }
            };
            let len = n as usize * BLCKSZ;
            let buffer = match free_buffers.pop() {
                Some(b) if b.len() == len => b,
                Some(b) => {
                    free_buffers.push(b);
                    IoBuffer::zeroed(len)
                }
                None => IoBuffer::zeroed(len),
            };
            let target = IoTarget {
                path: f.display.clone(),
                first_block: f.segno as u64 * RELSEG_SIZE_BLOCKS as u64 + first,
                nblocks: n,
            };
            let staged = (|| {
                let mut h = backend.acquire()?;
                h.set_callbacks(callbacks.clone(), &[file as u64, first]);
                h.stage_read_owned(seg_file, first * BLCKSZ as u64, buffer, target)
            })();
            match staged {
                Ok(wref) => in_flight.push_back((wref, file, first, n)),
                Err(e) => {
                    shared.fail_file(file, e.into());
                    shared.slots[file]
                        .ios_remaining
                        .fetch_sub(1, Ordering::AcqRel);
                }
            }
        }
        backend.exit_batch_mode();
        let Some((wref, file, first, n)) = in_flight.pop_front() else {
            return Ok(());
        };
        let completion = backend.wait(wref).or_else(|| backend.take_completion(wref));
        let slot = &shared.slots[file];
        match completion {
            None => shared.fail_file(
                file,
                VerifyError::Internal(format!(
                    "the completion of the read of blocks {first}.. of \"{}\" went missing",
                    shared.files[file].display
                )),
            ),
            Some(c) => {
                let done = c.result.blocks_done.min(n) as u64;
                slot.blocks_scanned.fetch_add(done, Ordering::Relaxed);
                shared
                    .bytes_done
                    .fetch_add(done * BLCKSZ as u64, Ordering::Relaxed);
                if c.result.status != IoStatus::Ok {
                    if let Some(e) = read_error(&shared.files[file], first, done, &c.result) {
                        shared.fail_file(file, e);
                    }
                }
                if let Some(b) = c.buffer {
                    if b.len() == full_bytes && free_buffers.len() < depth {
                        free_buffers.push(b);
                    }
                }
            }
        }
        slot.ios_remaining.fetch_sub(1, Ordering::AcqRel);
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
