//! # Cached pages read in place (buffered sequential scans)
//!
//! ## Problem
//!
//! A sequential scan of a table the page cache already holds spends its time copying:
//! every 128 kB read is a `preadv` that copies the kernel's pages into buffer-pool buffers,
//! and only then are the pages checksummed and walked tuple by tuple. PostgreSQL pays the
//! same copy; for a warm 2.28 GB table it is a large part of the scan. `verify` already
//! avoids it by checksumming cached windows through a read-only mapping
//! (`verify::mapped`); this module does the same for the heap pages of a seq scan.
//!
//! ## Mechanism
//!
//! The blocks a scanning thread is given (all of them for a serial scan, the chunks of the
//! shared [`super::BlockAllocator`] for a parallel one) are cut into *windows* of at most
//! [`WINDOW_BLOCKS`] (16 MB), never across a 1 GB segment. The read stream's block callback
//! (the `Planner`) asks the page cache about each window once, as it reaches it:
//!
//! ```text
//!   next window ── seq_read_in_place off, direct I/O, cachestat says not all cached
//!     │            (or cannot say), or the scan's own read-ahead may have cached it
//!     │            (a cold scan: see below) ─────────────────► blocks to the read stream
//!     │                                                         (AIO reads into the pool,
//!     │ all cached                                               as before)
//!     ▼
//!   callback reports "no more blocks for now": the stream finishes what is in flight and
//!   the consumer walks those pages first (block order is kept when the query needs it)
//!     ▼
//!   consumer: fstat (whole blocks within the file's size now? ── no ─► error: file, block)
//!     ▼
//!   this thread's read-only mapping of the window's segment file (made once per segment,
//!   all of its whole blocks, kept for the following windows); for each page of the
//!   window, under the SIGBUS guard (storage::sigbus):
//!     verify_page (header + checksum, exactly the pool's check) ── fails ─► the rest of
//!     │                                          the window goes to the read stream, whose
//!     │                                          pool applies zero_damaged_pages /
//!     │                                          ignore_checksum_failure or reports it
//!     ▼ ok
//!   the tuple sink walks the page where it lies ── SIGBUS ─► error naming file and block
//!     ▼
//!   stream.resume(): the callback goes on with the next window
//!   (the mapping is dropped at the next segment, after a fault, or when the thread ends)
//! ```
//!
//! A serial scan with a CPU to spare (`seq_map_ahead`, `scan::map_ahead`) has a helper
//! thread map the two cached windows after the one being walked, so that the scanning
//! thread does not fault their pages in itself, verify their pages with the same check, so
//! that the scanning thread only walks them, and unmap the mappings it lets go of.
//!
//! A mapping per segment rather than per window: every `munmap` in a process with several
//! threads interrupts the CPUs running the others to flush their TLBs. With a 2 MB window
//! per allocator chunk, that was one interrupt per 2 MB per thread, and on the busy 2-CPU
//! benchmark machine (virtual CPUs, answered late when preempted) two threads reading in
//! place were slower than two threads copying (see `docs/bench-notes/SCANS.md`).
//!
//! ## Why bypassing the buffer pool is equivalent
//!
//! The pool gives a scan two guarantees: a page it hands out was verified (header sanity
//! and checksum, `zero_damaged_pages` / `ignore_checksum_failure` applied) when it was read
//! from storage, and it does not change while pinned. A page read in place is verified by
//! the same function ([`crate::page::verify_page`], with the pool's own checksum setting)
//! before the sink sees it, once per read exactly as a pool read is; a page that fails is
//! not used here at all but read through the pool, so damaged pages are counted, zeroed,
//! used or reported by the pool's one rule. Nothing writes the files of the stopped cluster
//! a scan reads, so the mapped bytes cannot change while the sink walks them, as a pinned
//! buffer cannot; and a page the pool may already hold from an earlier scan is the same
//! bytes as the file's. The sink takes pages by reference (`&[u8]`) and keeps nothing past
//! the call, so no page outlives its mapping. Pages read in place count as
//! [`super::ScanResult::pages_in_place`], neither as hits nor as reads of the pool.
//!
//! A file truncated under the scan is the one case a mapping handles differently from a
//! read: the window is mapped only within the size `fstat` reports just before, and a page
//! that disappears after that raises SIGBUS, which the guard turns into zeros and a flag.
//! The scan then fails with [`ScanError::FileChanged`] naming the segment file and block —
//! never a signal, never a hang, never a count that silently misses rows. A fault while
//! checking a page whose file did not shrink (evicted, and reading it back failed) hands
//! the rest of the window to the read path, which reports the I/O error as it always does.
//!
//! A cold scan reads as it did before: a window within the read-ahead's reach
//! ([`SeqReadAhead::may_have_cached`]: the advice's window, or 64 MB for the kernel's own
//! read-ahead) past the last window given to the stream
//! goes to the stream even when the read-ahead has cached it by now, since alternating
//! between the two paths would drain the stream's look-ahead at every switch (and the
//! advice's 4 kB pages cost as much to map as to copy, measured in
//! `docs/bench-notes/SCANS.md`). Unless the window one reach further on is cached as well:
//! the read-ahead cannot have got there, so the heap was cached before the scan, with a
//! hole the stream just read, and from this window on it is read in place again. A heap
//! cached up to some point and cold after it is read in place up to there.
//!
//! Under direct I/O nothing is mapped: `O_DIRECT` asks to bypass the page cache, and reading
//! from it would measure something else.
//!
//! ## Worked example
//!
//! `uniform` (2.28 GB, 280,000 blocks in three segments), warm, serial. The first window is
//! blocks 0..2048; cachestat reports all 4,096 kernel pages of bytes 0..16 MB cached, so the
//! callback reports no blocks, the (empty) stream ends at once, and the consumer maps the
//! first segment (1 GB) once and walks the window's 2,048 pages in place. 136 more windows
//! follow the same way, three mappings in all (the third segment's last window is 1,472
//! blocks: windows stop at segment ends and at the heap's end). Had the page cache held
//! only the first half of the table, the callback would have handed blocks 139,264.. to the
//! stream from the first window not fully cached on, and the stream would have read them
//! through the pool with its usual look-ahead, the two paths alternating only where
//! residency changes. With two threads each allocator chunk (256 blocks, 2 MB) is one
//! window, and each thread maps each segment once.

use std::cell::RefCell;
use std::ops::Range;
use std::rc::Rc;
use std::sync::Arc;

use super::map_ahead::{self, AheadVerified, MapAhead};
use super::parallel::{BlockAllocator, WorkerBlocks};
use super::{ScanError, ScanOptions, ScanResult, Table, TupleSink};
use crate::buffer::BufferPool;
use crate::page::verify_page;
use crate::storage::page_cache::{residency, Residency};
use crate::storage::sigbus::{map_window, with_guard};
use crate::storage::{MappedRegion, OpenMode, RelFile, SegmentFile, BLCKSZ, RELSEG_SIZE_BLOCKS};
use crate::stream::readahead::SeqReadAhead;
use crate::stream::{ReadStream, StreamOptions, StreamOrder};
use crate::Backend;

/// Most blocks one window covers (16 MB, verify's window): one cachestat call and one fstat
/// per 16 MB cost nothing next to walking 2,048 pages, while a window stays small
/// enough that a partly cached heap switches between the two paths close to where its
/// residency changes. Divides a segment, so a serial scan's windows never straddle one.
pub const WINDOW_BLOCKS: u64 = 2048;

/// Whether `pool`'s scans read cached pages in place: `seq_read_in_place` on and direct
/// I/O off.
pub(crate) fn enabled(pool: &BufferPool) -> bool {
    let config = pool.aio().config();
    config.seq_read_in_place && !config.direct_io
}

/// Where one scanning thread's blocks come from.
pub(super) enum Blocks<'a> {
    /// A serial scan: every block from `next` up to `nblocks`.
    Serial {
        /// The first block not handed out yet.
        next: u64,
        /// The heap's size.
        nblocks: u64,
    },
    /// A thread of a parallel scan: the chunks the shared allocator gives it.
    Parallel(WorkerBlocks<'a>),
}

impl Blocks<'_> {
    fn next_range(&mut self) -> Option<Range<u64>> {
        match self {
            Blocks::Serial { next, nblocks } => {
                if *next >= *nblocks {
                    return None;
                }
                let end = next.saturating_add(WINDOW_BLOCKS).min(*nblocks);
                let range = *next..end;
                *next = end;
                Some(range)
            }
            Blocks::Parallel(worker) => worker.next_range(),
        }
    }
}

/// The read stream's block callback: cuts the thread's blocks into windows and sends each
/// either to the stream or, when the page cache holds all of it, to the consumer.
struct Planner<'a> {
    blocks: Blocks<'a>,
    /// Blocks taken from `blocks` and not yet cut into windows.
    uncut: Range<u64>,
    /// Blocks for the read stream.
    to_read: Range<u64>,
    /// A cached window the consumer is to read in place before the stream goes on.
    resident: Option<Range<u64>>,
    /// Whether windows may be read in place at all ([`enabled`]).
    in_place: bool,
    pool: &'a BufferPool,
    rel: &'a RelFile,
    read_ahead: &'a SeqReadAhead,
}

impl Planner<'_> {
    fn next_window(&mut self) -> Option<Range<u64>> {
        if self.uncut.is_empty() {
            self.uncut = self.blocks.next_range()?;
        }
        let start = self.uncut.start;
        let end = self
            .uncut
            .end
            .min(start.saturating_add(WINDOW_BLOCKS))
            .min(start.saturating_add(RelFile::blocks_in_segment(start) as u64));
        self.uncut.start = end;
        Some(start..end)
    }

    /// The next block for the stream; `None` at the end of the thread's blocks, or when a
    /// cached window waits for the consumer (which resumes the stream after it).
    fn next_block(&mut self) -> Option<u64> {
        loop {
            if let Some(block) = self.to_read.next() {
                return Some(block);
            }
            if self.resident.is_some() {
                return None;
            }
            let window = self.next_window()?;
            // A cached window this scan's own read-ahead may have cached (a cold scan: the
            // read-ahead runs ahead of the stream) goes to the stream: switching paths each
            // time the read-ahead gets ahead would drain the stream's look-ahead. Unless
            // the window one read-ahead reach further on is cached too, which the
            // read-ahead cannot have reached: the heap was cached before the scan (a warm
            // heap with a hole), and is read in place again from here.
            if self.in_place
                && self.is_cached(&window)
                && (!self.read_ahead.may_have_cached(window.start)
                    || self.is_cached(&self.beyond_read_ahead(&window)))
            {
                // The advice follows the scan through cached windows too, so that the
                // device is already reading what comes after them (see `readahead`).
                self.read_ahead.advance(self.pool, self.rel, window.start);
                self.resident = Some(window);
                return None;
            }
            self.read_ahead.note_streamed(window.end);
            self.to_read = window;
        }
    }

    /// The window as long as `window` (within one segment) one read-ahead reach further on.
    fn beyond_read_ahead(&self, window: &Range<u64>) -> Range<u64> {
        let start = window.start.saturating_add(self.read_ahead.reach_blocks());
        let end = start
            .saturating_add(window.end - window.start)
            .min(start.saturating_add(RelFile::blocks_in_segment(start) as u64));
        start..end
    }

    /// cachestat: does the page cache hold every byte of `window`? Anything but a clear
    /// yes (no cachestat, a file we may not ask about, a file that cannot be opened) reads
    /// the window, whose reads then report any real error with file and block.
    fn is_cached(&self, window: &Range<u64>) -> bool {
        let Ok(n) = u32::try_from(window.end - window.start) else {
            return false;
        };
        match self
            .rel
            .locate(self.pool.aio().files(), window.start, n, OpenMode::Read)
        {
            Ok((file, offset_bytes)) => {
                residency(file.raw_fd(), offset_bytes, n as usize * BLCKSZ) == Residency::All
            }
            Err(_) => false,
        }
    }
}

/// Reads one thread's share of a sequential scan of `table`: the windows the page cache
/// holds in place, the others through a read stream over the pool; every page goes to
/// `sink`. Fills in `part`'s page counts and stream statistics. `allocator` (a parallel
/// scan) is checked after each page and each window: a stopped allocator ends the thread.
#[allow(clippy::too_many_arguments)]
pub(super) fn scan_blocks<S: TupleSink>(
    pool: &BufferPool,
    backend: &mut Backend,
    table: &Table,
    options: &ScanOptions,
    blocks: Blocks<'_>,
    read_ahead: &SeqReadAhead,
    sink: &mut S,
    part: &mut ScanResult,
    allocator: Option<&BlockAllocator>,
) -> Result<(), ScanError> {
    let planner = Rc::new(RefCell::new(Planner {
        blocks,
        uncut: 0..0,
        to_read: 0..0,
        resident: None,
        in_place: enabled(pool),
        pool,
        rel: &table.heap,
        read_ahead,
    }));
    let feed = planner.clone();
    let mut stream = ReadStream::new(
        pool,
        &table.heap,
        StreamOptions {
            policy: options.policy,
            bulk_read: true,
            // A count and a sum do not depend on page order.
            order: options.stream_order.unwrap_or(StreamOrder::Completion),
        },
        move || feed.borrow_mut().next_block().map(|block| (block, ())),
    )
    .with_read_ahead(read_ahead);
    let stopped = || allocator.is_some_and(BlockAllocator::is_stopped);
    let map_ahead_wanted = matches!(planner.borrow().blocks, Blocks::Serial { .. })
        && enabled(pool)
        && map_ahead::wanted(
            pool.aio().config().seq_map_ahead,
            pool.aio().io_method(),
            std::thread::available_parallelism().map_or(1, |n| n.get()),
        );
    let mut mapping = SegmentMapping {
        current: None,
        populated_to: 0,
        map_ahead_wanted,
        map_ahead: None,
        verified: None,
    };
    'scan: loop {
        while let Some(buf) = stream.next(backend)? {
            sink.page(&table.heap, buf.block, buf.page())?;
            part.heap_pages += 1;
            if stopped() {
                break 'scan;
            }
        }
        // The stream has handed out every block before the cached window (or all of its
        // blocks): read the window, then let the callback go on.
        let Some(window) = planner.borrow_mut().resident.take() else {
            break;
        };
        let outcome = read_window(pool, &table.heap, window.clone(), &mut mapping, sink, part)?;
        if let Some(from) = outcome {
            planner.borrow_mut().to_read = from..window.end;
        }
        if stopped() {
            break;
        }
        stream.resume();
    }
    part.stream = stream.stats();
    mapping.finish(part);
    Ok(())
}

/// The page at byte `at` of a mapped window, if the window reaches that far.
fn page_at(bytes: &[u8], at: usize) -> Option<&[u8; BLCKSZ]> {
    bytes
        .get(at..at.checked_add(BLCKSZ)?)
        .and_then(|p| <&[u8; BLCKSZ]>::try_from(p).ok())
}

/// The size of the open file `fd` now, or `None` if fstat fails.
fn file_size_bytes(fd: i32) -> Option<u64> {
    // SAFETY: fstat writes into the zeroed struct; the caller keeps `fd` open.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut st) != 0 {
            return None;
        }
        u64::try_from(st.st_size).ok()
    }
}

/// The error for a segment file found shorter than the blocks the scan is reading: it names
/// the file, the first block gone and the size now.
fn truncated(seg: &SegmentFile, window_start: u64, size_bytes: u64) -> ScanError {
    let seg_first_block = window_start / RELSEG_SIZE_BLOCKS as u64 * RELSEG_SIZE_BLOCKS as u64;
    let first_gone = seg_first_block
        .saturating_add(size_bytes / BLCKSZ as u64)
        .max(window_start);
    ScanError::FileChanged {
        path: seg.display_name().to_string(),
        block: first_gone,
        problem: format!(
            "the file is now {size_bytes} bytes, which ends before this block: it was truncated while the scan read it"
        ),
    }
}

/// This thread's read-only mapping of the segment file it is reading in place, kept from
/// window to window: one `mmap` and one `munmap` per segment rather than per window. Every
/// `munmap` of a multi-threaded process interrupts the other CPUs running it to flush their
/// TLBs, which on a busy machine (a preempted virtual CPU answers late) cost a parallel
/// scan more than the copy it saved; pages once mapped also stay mapped for the next
/// window. Each scanning thread maps for itself, because the SIGBUS guard replaces the
/// faulting thread's mapping with zeros, which another thread must never read as data; the
/// one other reader of a mapping, its map-ahead thread, raises the mapping's flag before
/// its guard does so, and the scanning thread checks it after every page
/// (`AheadVerified::poisoned`).
struct SegmentMapping {
    /// The segment number, the bytes mapped from its start, and the mapping.
    current: Option<(u64, u64, Arc<MappedRegion>)>,
    /// Bytes of the current mapping given to `map_ahead` to populate.
    populated_to: usize,
    /// Whether this scan maps ahead (a serial scan with a CPU to spare, see
    /// `scan::map_ahead`); cleared if the thread cannot be started.
    map_ahead_wanted: bool,
    /// The thread that maps the next windows and unmaps old mappings, started when there
    /// is first something to map ahead (a heap of one window, or a cold one, needs none).
    map_ahead: Option<MapAhead>,
    /// The pages of the current mapping the map-ahead thread has verified (with map-ahead).
    verified: Option<Arc<AheadVerified>>,
}

impl SegmentMapping {
    /// The mapping of segment `segno` covering bytes `..end_bytes`, mapping (all of the
    /// file's `size_bytes` in whole blocks) if the current one does not; `None` if the
    /// kernel refuses the mapping.
    fn covering(
        &mut self,
        fd: i32,
        segno: u64,
        end_bytes: u64,
        size_bytes: u64,
        checksums: bool,
    ) -> Option<&Arc<MappedRegion>> {
        let reuse = matches!(&self.current, Some((s, len, _)) if *s == segno && *len >= end_bytes);
        if !reuse {
            // Drop the old mapping first: at most one segment mapped per thread.
            self.drop_current();
            let len_bytes = size_bytes / BLCKSZ as u64 * BLCKSZ as u64;
            let region = map_window(fd, 0, usize::try_from(len_bytes).ok()?).ok()?;
            #[cfg(test)]
            hook::after_map();
            self.current = Some((segno, len_bytes, Arc::new(region)));
            if self.map_ahead_wanted {
                let first_blkno = segno.saturating_mul(RELSEG_SIZE_BLOCKS as u64);
                self.verified = Some(AheadVerified::new(first_blkno, checksums));
            }
        }
        self.current.as_ref().map(|(_, _, region)| region)
    }

    /// Lets go of the current mapping: unmapped by the map-ahead thread if there is one,
    /// here otherwise.
    fn drop_current(&mut self) {
        self.populated_to = 0;
        self.verified = None;
        if let Some((_, _, region)) = self.current.take() {
            match &self.map_ahead {
                Some(m) => m.retire(region),
                None => drop(region),
            }
        }
    }

    /// Asks the map-ahead thread (if any) to map the [`map_ahead::AHEAD_WINDOWS`] windows
    /// after bytes `..end_bytes` of the current mapping, `window_bytes` each.
    fn map_after(&mut self, end_bytes: usize, window_bytes: usize) {
        let Some((_, _, region)) = &self.current else {
            return;
        };
        let start = self.populated_to.max(end_bytes);
        let end = window_bytes
            .saturating_mul(map_ahead::AHEAD_WINDOWS)
            .saturating_add(end_bytes)
            .min(region.len_bytes());
        if start >= end || !self.map_ahead_wanted {
            return;
        }
        if self.map_ahead.is_none() {
            self.map_ahead = MapAhead::start();
            self.map_ahead_wanted = self.map_ahead.is_some();
        }
        if let Some(m) = &self.map_ahead {
            m.populate(region, start..end, self.verified.as_ref());
            self.populated_to = end;
        }
    }

    /// Ends the scan's mapping: the last one unmapped, the map-ahead thread joined, its
    /// count of pages mapped ahead added to `part`.
    fn finish(&mut self, part: &mut ScanResult) {
        self.drop_current();
        if let Some(m) = self.map_ahead.take() {
            let bytes = m.finish();
            part.pages_mapped_ahead += bytes / BLCKSZ as u64;
        }
    }
}

/// Reads the cached `window` of `rel` in place (see the module docs), through this
/// thread's `mapping` of its segment. Returns the first block the read stream must read
/// instead (a page that failed verification, or a window that could not be mapped), or
/// `None` when every page was read here.
fn read_window<S: TupleSink>(
    pool: &BufferPool,
    rel: &RelFile,
    window: Range<u64>,
    mapping: &mut SegmentMapping,
    sink: &mut S,
    part: &mut ScanResult,
) -> Result<Option<u64>, ScanError> {
    let Ok(n) = u32::try_from(window.end - window.start) else {
        return Ok(Some(window.start));
    };
    let Ok((seg, offset_bytes)) = rel.locate(pool.aio().files(), window.start, n, OpenMode::Read)
    else {
        return Ok(Some(window.start));
    };
    let len_bytes = n as usize * BLCKSZ;
    let end_bytes = offset_bytes.saturating_add(len_bytes as u64);
    let fd = seg.raw_fd();
    let truncated_now = || match file_size_bytes(fd) {
        Some(size) if end_bytes > size => Some(truncated(&seg, window.start, size)),
        _ => None,
    };
    // Read only what exists now: touching a mapped page past the end is SIGBUS.
    let Some(size_bytes) = file_size_bytes(fd) else {
        return Ok(Some(window.start));
    };
    if end_bytes > size_bytes {
        return Err(truncated(&seg, window.start, size_bytes));
    }
    let segno = window.start / RELSEG_SIZE_BLOCKS as u64;
    let checksums = pool.check_options().checksums;
    if mapping
        .covering(fd, segno, end_bytes, size_bytes, checksums)
        .is_none()
    {
        return Ok(Some(window.start));
    }
    mapping.map_after(usize::try_from(end_bytes).unwrap_or(usize::MAX), len_bytes);
    let Some((_, _, region)) = mapping.current.clone() else {
        return Ok(Some(window.start));
    };
    let region = &*region;
    let verified_ahead = mapping.verified.clone();
    if let Some(v) = &verified_ahead {
        v.scanning_from(offset_bytes / BLCKSZ as u64);
    }
    for block in window.clone() {
        // In the segment's mapping: offset_bytes is the window's start within the segment.
        let Some(at) = usize::try_from(offset_bytes)
            .ok()
            .and_then(|o| o.checked_add(((block - window.start) as usize).checked_mul(BLCKSZ)?))
        else {
            return Ok(Some(block));
        };
        let Ok(blkno) = u32::try_from(block) else {
            return Ok(Some(block));
        };
        // Verified by the map-ahead thread (the same check on the same bytes), or here.
        let ahead = verified_ahead
            .as_ref()
            .is_some_and(|v| v.verified((at / BLCKSZ) as u64));
        let verified = if ahead {
            Ok(true)
        } else {
            with_guard(region, |bytes| {
                page_at(bytes, at).is_some_and(|page| verify_page(page, blkno, checksums).is_ok())
            })
        };
        match verified {
            Ok(true) => {}
            // Damaged: the pool's rules decide (zero it, use it, or report it).
            Ok(false) => return Ok(Some(block)),
            Err(_) => {
                // The guard put zeros over the rest of the mapping: never read it again.
                mapping.drop_current();
                return match truncated_now() {
                    Some(e) => Err(e),
                    // Not truncated: the read path reads the page again and reports what
                    // goes wrong with it as it always does.
                    None => Ok(Some(block)),
                };
            }
        }
        let walked = with_guard(region, |bytes| match page_at(bytes, at) {
            Some(page) => sink.page(rel, block, page),
            None => Ok(()),
        });
        // The map-ahead thread's guard may have put zeros in this mapping too; it says so
        // before it does, so a clear flag now means the walk read the file's bytes.
        let poisoned = verified_ahead.as_ref().is_some_and(|v| v.poisoned());
        match walked {
            Ok(outcome) if !poisoned => outcome?,
            // The sink may have seen zeros from the guard: its answer cannot be trusted.
            _ => {
                mapping.drop_current();
                let problem = if walked.is_ok() {
                    "a page of this segment could not be read back from the page cache by the thread verifying pages ahead of the scan (SIGBUS: evicted, and reading it again failed)"
                } else {
                    "the page was verified and then could not be read back from the page cache (SIGBUS: evicted, and reading it again failed)"
                };
                return Err(truncated_now().unwrap_or_else(|| ScanError::FileChanged {
                    path: seg.display_name().to_string(),
                    block,
                    problem: problem.into(),
                }));
            }
        }
        part.heap_pages += 1;
        part.pages_in_place += 1;
        part.pages_verified_ahead += u64::from(ahead);
    }
    Ok(None)
}

/// A test's hook into [`read_window`], between mapping a segment and reading it: the one
/// moment a truncation turns into SIGBUS rather than a size check.
#[cfg(test)]
pub(crate) mod hook {
    use std::cell::Cell;

    thread_local! {
        static AFTER_MAP: Cell<Option<fn()>> = const { Cell::new(None) };
    }

    /// Calls `f` after each segment mapping this thread makes.
    pub(crate) fn set_after_map(f: Option<fn()>) {
        AFTER_MAP.with(|h| h.set(f));
    }

    pub(super) fn after_map() {
        if let Some(f) = AFTER_MAP.with(Cell::get) {
            f();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::PageCheckOptions;
    use crate::config::{IoConfig, IoMethodKind, SeqMapAhead};
    use crate::page::builder::{set_checksum, PageBuilder};
    use crate::scan::{run_scan, Between, ScanKind};
    use crate::stream::DistancePolicy;
    use crate::Aio;
    use std::cell::Cell;
    use std::path::Path;

    /// A heap of `nblocks` empty, checksummed pages at `dir/16384`, in the page cache (just
    /// written).
    fn empty_heap(dir: &Path, nblocks: u64) -> Table {
        let mut bytes = Vec::with_capacity(nblocks as usize * BLCKSZ);
        for block in 0..nblocks {
            let mut page = PageBuilder::new(0).unwrap().finish();
            set_checksum(&mut page, block as u32);
            bytes.extend_from_slice(&page);
        }
        let path = dir.join("16384");
        std::fs::write(&path, &bytes).unwrap();
        Table {
            heap: RelFile::new(path),
            index: None,
            columns: vec![crate::page::heap::ColumnType::Float8],
            transactions: None,
        }
    }

    fn seq_scan(table: &Table, threads: usize) -> Result<ScanResult, ScanError> {
        seq_scan_with(table, threads, IoMethodKind::Sync, SeqMapAhead::Auto)
    }

    fn seq_scan_with(
        table: &Table,
        threads: usize,
        io_method: IoMethodKind,
        seq_map_ahead: SeqMapAhead,
    ) -> Result<ScanResult, ScanError> {
        let aio = Aio::new(IoConfig {
            io_method,
            seq_map_ahead,
            ..IoConfig::default()
        })
        .unwrap();
        let pool = BufferPool::new(
            &aio,
            PageCheckOptions {
                checksums: true,
                ..PageCheckOptions::default()
            },
        )
        .unwrap();
        run_scan(
            &pool,
            table,
            &ScanOptions {
                kind: ScanKind::Seq,
                predicate: Between::ALL,
                policy: DistancePolicy::Adaptive,
                stream_order: None,
                parallel_workers: threads,
            },
        )
    }

    thread_local! {
        /// The heap file the hooks below truncate.
        static HEAP: std::cell::RefCell<std::path::PathBuf> = Default::default();
    }

    fn truncate_heap_to(nblocks: u64) {
        let path = HEAP.with(|p| p.borrow().clone());
        let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        f.set_len(nblocks * BLCKSZ as u64).unwrap();
    }

    /// Truncates the mapped file to 10 blocks: the mapping's later pages are gone.
    fn truncate_to_10_blocks() {
        truncate_heap_to(10);
    }

    /// Truncates the mapped file to 2,058 blocks: the first window (0..2048) is whole, the
    /// second (2048..2148) is not.
    fn truncate_to_2058_blocks() {
        truncate_heap_to(2058);
    }

    thread_local! {
        static MAPPINGS: Cell<u32> = const { Cell::new(0) };
    }

    fn count_mapping() {
        MAPPINGS.with(|n| n.set(n.get() + 1));
    }

    #[test]
    fn one_mapping_serves_every_window_of_a_segment() {
        let dir = tempfile::tempdir().unwrap();
        let table = empty_heap(dir.path(), 2148);
        hook::set_after_map(Some(count_mapping));
        let r = seq_scan(&table, 1);
        hook::set_after_map(None);
        let r = r.unwrap();
        assert_eq!(r.pages_in_place, 2148, "two windows, both in place");
        assert_eq!(MAPPINGS.with(Cell::get), 1, "one mapping for both windows");
    }

    #[test]
    fn a_cached_heap_is_read_in_place_every_page_once() {
        let dir = tempfile::tempdir().unwrap();
        let table = empty_heap(dir.path(), 2148);
        for threads in [1, 2] {
            let r = seq_scan(&table, threads).unwrap();
            assert_eq!(r.heap_pages, 2148, "{threads}");
            assert_eq!(r.pages_in_place, 2148, "{threads}: all cached");
            assert_eq!(r.pool.reads + r.pool.hits, 0, "{threads}: no pool buffer");
        }
    }

    #[test]
    fn truncation_after_mapping_is_an_error_naming_file_and_block_not_a_signal() {
        // Without and with the map-ahead thread (which then has the second window to map).
        for (nblocks, method, map_ahead) in [
            (64, IoMethodKind::Sync, SeqMapAhead::Off),
            (2148, IoMethodKind::Worker, SeqMapAhead::On),
            (2148, IoMethodKind::IoUring, SeqMapAhead::On),
        ] {
            truncation_after_mapping(nblocks, method, map_ahead);
        }
    }

    fn truncation_after_mapping(nblocks: u64, method: IoMethodKind, map_ahead: SeqMapAhead) {
        let dir = tempfile::tempdir().unwrap();
        let table = empty_heap(dir.path(), nblocks);
        HEAP.with(|p| *p.borrow_mut() = table.heap.path().to_path_buf());
        hook::set_after_map(Some(truncate_to_10_blocks));
        let outcome = seq_scan_with(&table, 1, method, map_ahead);
        hook::set_after_map(None);
        match outcome {
            Err(e @ ScanError::FileChanged { block: 10, .. }) => {
                let msg = e.to_string();
                assert!(msg.contains(&format!("{}", dir.path().join("16384").display())));
                assert!(
                    msg.contains("at block 10: the file is now 81920 bytes, which ends before this block: it was truncated while the scan read it"),
                    "{msg}"
                );
                assert!(msg.contains("stop the server"), "{msg}");
            }
            other => panic!("expected the truncation error at block 10, got {other:?}"),
        }
    }

    #[test]
    fn a_fault_of_the_thread_verifying_ahead_ends_the_scan_with_file_and_block() {
        // The map-ahead thread's guard put zeros in the shared mapping (its flag is set):
        // the scanning thread, which checks the flag after each page, must not count what it
        // walked, and names the file and block instead.
        let dir = tempfile::tempdir().unwrap();
        let table = empty_heap(dir.path(), 2148);
        map_ahead::hook::poison_new(true);
        let outcome = seq_scan_with(&table, 1, IoMethodKind::Worker, SeqMapAhead::On);
        map_ahead::hook::poison_new(false);
        match outcome {
            Err(e @ ScanError::FileChanged { block: 0, .. }) => {
                let msg = e.to_string();
                assert!(msg.contains(&format!("{}", dir.path().join("16384").display())));
                assert!(msg.contains("the thread verifying pages ahead"), "{msg}");
                assert!(msg.contains("stop the server"), "{msg}");
            }
            other => panic!("expected the error at block 0, got {other:?}"),
        }
        // Without the fault the same scan reads every page in place.
        let r = seq_scan_with(&table, 1, IoMethodKind::Worker, SeqMapAhead::On).unwrap();
        assert_eq!(r.pages_in_place, 2148);
    }

    #[test]
    fn truncation_between_windows_is_the_read_paths_error_naming_the_first_block_gone() {
        let dir = tempfile::tempdir().unwrap();
        let table = empty_heap(dir.path(), 2148);
        HEAP.with(|p| *p.borrow_mut() = table.heap.path().to_path_buf());
        hook::set_after_map(Some(truncate_to_2058_blocks));
        let outcome = seq_scan(&table, 1);
        hook::set_after_map(None);
        // The second window is no longer all cached (its end is gone), so it goes to the
        // read stream, whose short read names the file and the block.
        let msg = outcome.expect_err("a truncated heap").to_string();
        assert!(msg.starts_with("could not read blocks 2058.."), "{msg}");
        assert!(
            msg.contains(&format!(
                "in file \"{}\"",
                dir.path().join("16384").display()
            )),
            "{msg}"
        );
    }
}
