//! # Read-ahead advice for sequential scans
//!
//! A buffered sequential scan leaves the device's queue to the kernel's read-ahead, which
//! keeps one or two windows of `read_ahead_kb` in flight per file, whatever the stream asks
//! for. On a device whose throughput grows with the queue depth (a virtual disk, a network
//! volume, NVMe), that is far from its rate: a 1 MB buffered reader on the benchmark disk
//! read 350–410 MB/s, the same reader telling the kernel 64 MB ahead what it will read
//! (`posix_fadvise(WILLNEED)` in 2 MB pieces) 1.3–1.55 GB/s, in the same minutes.
//!
//! So a buffered seq scan advises the blocks up to `seq_read_ahead` (64 MB by default) ahead
//! of the last block handed to a stream, in whole pieces of [`ADVICE_PIECE_BLOCKS`] (2 MB),
//! never across a segment; under direct I/O there is no page cache to fill and nothing is
//! advised (the read stream is the only read-ahead there is). PostgreSQL's read stream
//! advises only non-sequential reads and leaves sequential ones to the kernel.
//!
//! The read stream owns the advice: a scan makes one [`SeqReadAhead`] ([`for_scan`]) and hands
//! it to each of its streams ([`crate::stream::ReadStream::with_read_ahead`]), which advance it
//! with every block their callback yields. The scan itself never touches the page cache or a
//! file descriptor; like the stream's own `posix_fadvise` of non-sequential reads, this is
//! the stream's business.
//!
//! One [`SeqReadAhead`] serves all threads of a parallel scan: its mark (`advised_until`)
//! only moves forward, with `fetch_max`, so each piece is advised by exactly one thread,
//! whichever moved the mark past it.
//!
//! ```text
//!   blocks:   0 ─────────── position ─────────── advised_until ────── position + window
//!                            │ handed to a stream   │ advised earlier     │
//!                            └──────────────────────┴── advised now ──────┘ (whole pieces)
//! ```
//!
//! A piece the page cache already holds (cachestat) is not advised; after k cached pieces
//! in a row the next 2^k − 1 (at most 32) are passed without asking, so a warm scan costs a
//! few dozen cachestat calls, not one per piece.
//!
//! **Worked example.** `pgbench_accounts` at scale 300: 491,804 blocks in four segments,
//! cold, two threads, the default 64 MB (8,192 blocks). The first block handed out moves the
//! mark from 0 to 8,192: pieces 0..256, …, 7,936..8,192 are advised (32 calls). From then on
//! the mark follows the streams a piece at a time (1,922 calls for the whole heap, one per
//! piece), and the kernel has up to 64 MB of reads queued instead of its 8 MB read-ahead
//! window.
//!
//! **The cost.** Linux reads `WILLNEED` into single 4 kB pages, where its own read-ahead of a
//! sequential reader builds large folios (measured through `/proc/kpageflags`: 0% of the
//! advised table in large folios, 99% after a scan without the advice;
//! `bench/page-cache-fill.py`). A later scan of those pages *from the page cache* walks 32
//! folios per 128 kB read instead of one: for the 2.28 GB `uniform` table 0.71 of the speed
//! in one run, 0.85–0.91 in another, no measurable difference in a third, until the pages
//! are evicted. The cold scan that put them there was 1.2 s against 2.3 s. A workload that
//! scans the same cached table again and again is better off with `seq_read_ahead = 0`.
//! Reading ahead through the kernel's own path instead (helper threads sending the pieces to
//! `/dev/null`) was as fast cold but left only half the table in large folios, and later
//! scans moved within the noise; it was not kept. Nor was leaving read-ahead to the kernel
//! where the device's own window is deep (`read_ahead_kb` 8 MB and 64 MB, measured): a cold
//! 2.28 GB heap read as fast either way, but the 4 GB `pgbench_accounts` took 3.0–4.5 s
//! against 1.8–2.5 s advised, because on the benchmark machine, a virtual machine that
//! returns free memory to its host, the first touch of each newly cached large folio cost
//! more system time than the copy itself (docs/bench-notes/SCANS.md, "The kernel's own
//! read-ahead, tried again").
//!
//! Advice is a hint: a failed `posix_fadvise` is not counted, a failed cachestat counts as
//! "not cached", and the scan goes on either way, since the reads themselves report any real
//! error with file and block.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::buffer::BufferPool;
use crate::config::BLCKSZ;
use crate::storage::page_cache::{residency, Residency};
use crate::storage::{OpenMode, RelFile};

/// Blocks one `posix_fadvise(WILLNEED)` covers (2 MB): large enough that a 4 GB heap takes
/// 2,000 calls, small enough that the kernel starts on the first piece at once. Divides a
/// segment (131,072 blocks), so pieces from a segment start never straddle one.
pub const ADVICE_PIECE_BLOCKS: u64 = 256;

/// Most pieces passed without asking the page cache after a cached stretch (64 MB).
const MAX_SKIP_PIECES: u64 = 32;

/// The read-ahead advice of one sequential scan (all its threads). Its state is a few
/// relaxed atomics: the threads race only on a hint, never on which blocks are read.
#[derive(Debug)]
pub struct SeqReadAhead {
    plan: ReadAheadPlan,
    window_blocks: u64,
    nblocks: u64,
    advised_until: AtomicU64,
    calls: AtomicU64,
    /// Pieces in a row found cached (see [`SeqReadAhead::advance`]).
    cached_streak: AtomicU64,
    /// Pieces still to pass without asking the page cache.
    skip: AtomicU64,
    /// The end of the furthest window a stream of this scan was given (0: none yet), from
    /// which [`SeqReadAhead::may_have_cached`] reckons what the read-ahead may have cached.
    streamed_until: AtomicU64,
}

/// How a buffered sequential scan reads ahead of its read streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadAheadPlan {
    /// Nothing beyond the read stream: direct I/O.
    None,
    /// `posix_fadvise(WILLNEED)` `window_bytes` ahead of the streams, in 2 MB pieces.
    Advise {
        /// How far ahead.
        window_bytes: u64,
    },
    /// The kernel's own read-ahead alone (`seq_read_ahead = 0`).
    Kernel,
}

impl SeqReadAhead {
    /// Advice `window_bytes` ahead over a heap of `nblocks` blocks; a window under one
    /// piece advises nothing.
    pub fn new(window_bytes: u64, nblocks: u64) -> SeqReadAhead {
        let plan = if window_bytes / BLCKSZ as u64 >= ADVICE_PIECE_BLOCKS {
            ReadAheadPlan::Advise { window_bytes }
        } else {
            ReadAheadPlan::Kernel
        };
        SeqReadAhead::with_plan(plan, nblocks)
    }

    /// Read-ahead following `plan` over a heap of `nblocks` blocks.
    pub fn with_plan(plan: ReadAheadPlan, nblocks: u64) -> SeqReadAhead {
        let window_bytes = match plan {
            ReadAheadPlan::Advise { window_bytes } => window_bytes,
            _ => 0,
        };
        SeqReadAhead {
            plan,
            window_blocks: window_bytes / BLCKSZ as u64,
            nblocks,
            advised_until: AtomicU64::new(0),
            calls: AtomicU64::new(0),
            cached_streak: AtomicU64::new(0),
            skip: AtomicU64::new(0),
            streamed_until: AtomicU64::new(0),
        }
    }

    /// What this scan does to read ahead.
    pub fn plan(&self) -> ReadAheadPlan {
        self.plan
    }

    /// Whether this advises anything at all.
    pub fn is_enabled(&self) -> bool {
        self.window_blocks >= ADVICE_PIECE_BLOCKS
    }

    /// Blocks up to `end` were handed to a read stream of this scan (see
    /// [`SeqReadAhead::may_have_cached`]).
    pub fn note_streamed(&self, end: u64) {
        self.streamed_until.fetch_max(end, Ordering::Relaxed);
    }

    /// Whether this scan's own read-ahead may have brought `block` into the page cache: it
    /// lies within the read-ahead's reach ([`SeqReadAhead::reach_blocks`]) past the furthest
    /// window a stream was given. A sequential scan reads such blocks through its stream
    /// even when they are cached by now (`scan::in_place`): switching to reading in place
    /// each time the read-ahead gets ahead of the stream would drain the stream's
    /// look-ahead, and the advice's 4 kB pages cost as much to map as to copy. Cached
    /// blocks beyond the reach were cached before the scan, and are read in place.
    pub fn may_have_cached(&self, block: u64) -> bool {
        let streamed = self.streamed_until.load(Ordering::Relaxed);
        streamed > 0 && block < streamed.saturating_add(self.reach_blocks())
    }

    /// How far past the blocks handed to the streams this scan's read-ahead may read: the
    /// advice's window; for the kernel's own read-ahead [`KERNEL_REACH_BYTES`].
    pub fn reach_blocks(&self) -> u64 {
        let bytes = match self.plan {
            ReadAheadPlan::None => 0,
            ReadAheadPlan::Advise { window_bytes } => window_bytes,
            ReadAheadPlan::Kernel => KERNEL_REACH_BYTES,
        };
        bytes / BLCKSZ as u64
    }

    /// `posix_fadvise(WILLNEED)` calls made so far.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// `block` is about to be handed to a stream: advises what is now within the window
    /// ahead of it and was not advised yet, a whole number of pieces at a time.
    pub fn advance(&self, pool: &BufferPool, rel: &RelFile, block: u64) {
        if !self.is_enabled() {
            return;
        }
        // Whole pieces only (but the heap's end): every piece starts at a multiple of
        // ADVICE_PIECE_BLOCKS, so each is advised by one call, whichever thread makes it.
        let ahead = block.saturating_add(self.window_blocks);
        let limit = if ahead >= self.nblocks {
            self.nblocks
        } else {
            ahead / ADVICE_PIECE_BLOCKS * ADVICE_PIECE_BLOCKS
        };
        if limit <= self.advised_until.load(Ordering::Relaxed) {
            return;
        }
        let from = self.advised_until.fetch_max(limit, Ordering::Relaxed);
        if from >= limit {
            return;
        }
        let files = pool.aio().files();
        let mut next = from;
        while next < limit {
            let n = (limit - next)
                .min(ADVICE_PIECE_BLOCKS)
                .min(RelFile::blocks_in_segment(next) as u64);
            let skip = self.skip.load(Ordering::Relaxed);
            if skip > 0 {
                self.skip.store(skip - 1, Ordering::Relaxed);
                next += n;
                continue;
            }
            if let Ok((file, offset)) = rel.locate(files, next, n as u32, OpenMode::Read) {
                let len = n * BLCKSZ as u64;
                // A piece the page cache already holds needs no advice. Asking costs a
                // cachestat system call, so after k cached pieces in a row the
                // next 2^k − 1 (at most MAX_SKIP_PIECES) are passed without asking: a warm
                // scan asks a few dozen times, a cold one asks and advises every piece, and
                // a partly cached heap loses at most 64 MB of advice after a cached stretch
                // (the kernel's own read-ahead still reads it).
                if residency(file.raw_fd(), offset, len as usize) == Residency::All {
                    let streak = self.cached_streak.fetch_add(1, Ordering::Relaxed) + 1;
                    let skip = ((1u64 << streak.min(6)) - 1).min(MAX_SKIP_PIECES);
                    self.skip.store(skip, Ordering::Relaxed);
                } else {
                    self.cached_streak.store(0, Ordering::Relaxed);
                    if file.advise_willneed(offset, len).is_ok() {
                        self.calls.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            next += n;
        }
    }
}

/// How far ahead of a reader the kernel's own read-ahead may have read, as
/// [`SeqReadAhead::reach_blocks`] reckons it: 64 MB, more than the two windows of the largest
/// `read_ahead_kb` commonly set (16 MB) it keeps in flight.
pub const KERNEL_REACH_BYTES: u64 = 64 << 20;

/// The read-ahead of a sequential scan of `nblocks` blocks through `pool`: `seq_read_ahead`
/// ahead, nothing under direct I/O.
pub fn for_scan(pool: &BufferPool, nblocks: u64) -> SeqReadAhead {
    let config = pool.aio().config();
    if config.direct_io {
        return SeqReadAhead::with_plan(ReadAheadPlan::None, nblocks);
    }
    SeqReadAhead::new(config.seq_read_ahead_blocks as u64 * BLCKSZ as u64, nblocks)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plan a window makes, the words a user sees, and how far each plan reaches.
    #[test]
    fn plans_and_their_reach() {
        let advise = SeqReadAhead::new(64 << 20, 1000);
        assert_eq!(
            advise.plan(),
            ReadAheadPlan::Advise {
                window_bytes: 64 << 20
            }
        );
        assert_eq!(advise.reach_blocks(), 8192);
        // Under one piece nothing is advised: the kernel's own read-ahead.
        let kernel = SeqReadAhead::new(1 << 20, 1000);
        assert_eq!(kernel.plan(), ReadAheadPlan::Kernel);
        assert!(!kernel.is_enabled());
        assert_eq!(kernel.reach_blocks(), KERNEL_REACH_BYTES / BLCKSZ as u64);
        let none = SeqReadAhead::with_plan(ReadAheadPlan::None, 1000);
        assert_eq!(none.reach_blocks(), 0);
        assert!(!none.is_enabled());
    }

    /// Blocks within the reach past the furthest window streamed may have been cached by the
    /// scan's read-ahead; blocks beyond it, or any block before a window was streamed, not.
    #[test]
    fn what_the_read_ahead_may_have_cached() {
        let r = SeqReadAhead::new(2 << 20, 100_000); // reach: 256 blocks
        assert!(!r.may_have_cached(0), "nothing streamed yet");
        assert!(!r.may_have_cached(5000));
        r.note_streamed(2048);
        assert!(r.may_have_cached(2048));
        assert!(r.may_have_cached(2048 + 255));
        assert!(
            !r.may_have_cached(2048 + 256),
            "one reach past: cached before the scan"
        );
        r.note_streamed(1024);
        assert!(r.may_have_cached(2300), "the mark never moves back");
        r.note_streamed(u64::MAX);
        assert!(r.may_have_cached(u64::MAX - 1), "no overflow");
    }
}
