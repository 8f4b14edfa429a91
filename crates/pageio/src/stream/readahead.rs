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
//! read-ahead, tried again"). A setting by device cannot see that; a measurement can (below).
//!
//! **Measured, not fixed (`seq_read_ahead = auto`, the default).** Which way is cheaper
//! depends on the machine's state, not on the table: on the benchmark machine, a virtual
//! machine whose balloon device hands free memory back to its host in 2 MB blocks (free page
//! reporting, `page_reporting_order` 9), the kernel's read-ahead takes its large folios from
//! exactly those blocks, and each first touch of them costs the host a fault. Right after
//! memory was freed (before it is reported) a `cat` of the 2.28 GB `uniform` heap took 0.44–
//! 0.58 s of system time; 8 s later 2.0–2.1 s, the time in `_copy_to_iter`. The advice's
//! 4 kB pages come from smaller free blocks, which are never reported: 0.8–0.9 s either way.
//! A cold scan with the kernel's read-ahead alone took 2.9–3.4 s against the advice's
//! 1.5–1.9 s once memory had settled, and as fast either way right after a drop of the page
//! cache; on a machine that hands nothing back, the kernel's large folios cost less CPU than
//! the advice's 4 kB pages. (The slow 1 MB reader at the top may have met this cost rather
//! than a shallow queue: a reader alone on a CPU, copying at 2 s of system time per 2 GB,
//! reads at about 1 GB/s whatever the device does.) So each
//! scan measures the two on its own stretches of [`STRETCH_BLOCKS`] (32 MB): the wall time
//! and the process's CPU time per block from the first block of a stretch handed to a stream
//! to the first of the next ([`Chooser`]). Stretches 0 and 1 go to the kernel's read-ahead,
//! 2 and 3 to the advice, the first of each pair a warm-up that is not measured (the scan's
//! start; the advice's first window, issued at once); then the cheaper way runs, keeping the
//! kernel's read-ahead on a tie (within 10% wall, 50% CPU), for the large folios it leaves
//! for the next scan; the other way is probed again after 16 stretches, then 64, then every
//! 128 (at once when a kernel run's cost rises past the advice's; only after 128 when the
//! kernel's read-ahead lost by 2× or more). The one shared mark still moves forward
//! only, and an advised stretch the kernel may read next advises nothing past its own end, so
//! that each way is measured on its own reads. A heap under 64 MB is read by the kernel's
//! read-ahead alone.
//!
//! Advice is a hint: a failed `posix_fadvise` is not counted, a failed cachestat counts as
//! "not cached", and the scan goes on either way, since the reads themselves report any real
//! error with file and block.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

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
    /// Whether blocks handed to a stream now are advised (always for `Advise`, never for
    /// `Kernel` and `None`, per stretch for `Measured`).
    advising: AtomicBool,
    /// The measured choice (`Measured` only), consulted once per stretch.
    chooser: Option<Mutex<Chooser>>,
    /// The first stretch not begun yet (`u64::MAX` without a chooser).
    next_stretch: AtomicU64,
    /// Stretches begun with advice and with the kernel's read-ahead (`Measured` only).
    stretches_advised: AtomicU64,
    stretches_kernel: AtomicU64,
    /// Where the chooser's wall clock starts.
    epoch: Instant,
    /// No advice reaches past this block (`u64::MAX`: no cap; see
    /// [`Chooser::next_may_be_kernel`]).
    advice_cap: AtomicU64,
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
    /// Whichever of the two costs this scan less, as measured on its own stretches
    /// (`seq_read_ahead = auto`, see [`Chooser`]); `window_bytes` ahead when advising.
    Measured {
        /// How far ahead, while advising.
        window_bytes: u64,
    },
}

/// How one stretch of a [`ReadAheadPlan::Measured`] scan reads ahead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ReadAheadMode {
    /// `posix_fadvise(WILLNEED)` a window ahead: a deep queue, 4 kB pages.
    Advise,
    /// The kernel's own read-ahead: `read_ahead_kb` ahead, large folios.
    Kernel,
}

impl ReadAheadMode {
    fn other(self) -> ReadAheadMode {
        match self {
            ReadAheadMode::Advise => ReadAheadMode::Kernel,
            ReadAheadMode::Kernel => ReadAheadMode::Advise,
        }
    }
}

/// Blocks of one stretch a measured scan reads one way (32 MB): long enough that the
/// kernel's read-ahead is past its ramp (a few reads to reach `read_ahead_kb`), short
/// enough that probing the way that loses costs a 2 GB heap a few percent.
pub const STRETCH_BLOCKS: u64 = (32 << 20) / BLCKSZ as u64;

/// Stretches the chosen way reads before the other way is tried again, the first time; each
/// probe that confirms the choice makes the next run four times as long, up to
/// [`MAX_RUN_STRETCHES`].
pub const FIRST_RUN_STRETCHES: u32 = 16;

/// Longest run between two probes (4 GB).
pub const MAX_RUN_STRETCHES: u32 = 128;

/// The kernel's read-ahead is kept while its wall time per block is within this factor of
/// the advice's: ties go to the large folios it leaves for the next scan.
pub const KERNEL_WALL_TOLERANCE: f64 = 1.1;

/// The kernel's read-ahead is kept while the process's CPU time per block under it is
/// within this factor of the advice's.
pub const KERNEL_CPU_TOLERANCE: f64 = 1.5;

/// The kernel's read-ahead that costs this many times the advice's wall or CPU time per
/// block has lost clearly: the advice then runs [`MAX_RUN_STRETCHES`] before the next probe,
/// since each probe of a way that dear costs its stretch several times over.
pub const CLEAR_LOSS: f64 = 2.0;

/// What the measured read-ahead (`seq_read_ahead = auto`) of one scan did.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct ReadAheadReport {
    /// Stretches of [`STRETCH_BLOCKS`] begun with advice.
    pub stretches_advised: u64,
    /// Stretches begun with the kernel's own read-ahead.
    pub stretches_kernel: u64,
    /// The way chosen last (none if the heap ended before both were measured).
    pub chosen: Option<ReadAheadMode>,
    /// The latest cost measured with advice.
    pub advised: Option<StretchCost>,
    /// The latest cost measured with the kernel's read-ahead.
    pub kernel: Option<StretchCost>,
}

/// A moment in a scan: wall-clock and process CPU seconds since some fixed point.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Moment {
    /// Wall-clock seconds.
    pub wall: f64,
    /// CPU seconds of the whole process (every thread: scan threads and I/O workers).
    pub cpu: f64,
}

/// What one way of reading ahead cost, per block.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct StretchCost {
    /// Wall-clock seconds per block.
    pub wall: f64,
    /// Process CPU seconds per block.
    pub cpu: f64,
}

/// The measured choice between advice and the kernel's read-ahead of one sequential scan
/// (`seq_read_ahead = auto`). A pure state machine over stretch numbers and [`Moment`]s, so
/// its rules are tested with made-up clocks:
///
/// - stretch 0 is read by the kernel's read-ahead unmeasured (it holds the scan's start:
///   the first reads' latency, the read-ahead's ramp), stretch 1 by the kernel's read-ahead
///   measured, stretch 2 with advice unmeasured (its first window goes out at once, which
///   steady advice never pays) and stretch 3 with advice measured (wall and process CPU
///   time per block, from the first block of a stretch handed to a stream to the first
///   block of the next); every later switch to advice warms up the same way;
/// - the kernel's read-ahead is chosen while it costs at most [`KERNEL_WALL_TOLERANCE`] of
///   the advice's wall time and [`KERNEL_CPU_TOLERANCE`] of its CPU time per block; the
///   advice otherwise;
/// - the chosen way is measured on every stretch it reads; after a run of
///   [`FIRST_RUN_STRETCHES`] the other way is probed (for one stretch, after its warm-up if
///   it is the advice) and the choice made
///   again from the two latest costs; a probe that confirms the choice makes the next run
///   four times as long (up to [`MAX_RUN_STRETCHES`]), one that overturns it starts the
///   runs over, and a kernel's read-ahead that loses by [`CLEAR_LOSS`] is not tried again
///   for [`MAX_RUN_STRETCHES`];
/// - a run of the kernel's read-ahead ends at once when one of its stretches loses to the
///   last advice measured: its cost can rise mid-scan (on the benchmark machine, when the
///   memory it takes large folios from has been handed back to the host);
/// - an advised stretch that the kernel's read-ahead may follow advises nothing past its
///   own end ([`Chooser::next_may_be_kernel`]), so that the kernel's stretch is measured
///   on its own reads, not on advice still on its way.
#[derive(Debug, Clone)]
pub struct Chooser {
    /// How the current stretch reads ahead.
    mode: ReadAheadMode,
    /// The stretch the current one began at, and when.
    started: Option<(u64, Moment)>,
    kernel: Option<StretchCost>,
    advised: Option<StretchCost>,
    chosen: Option<ReadAheadMode>,
    /// Stretches the chosen way has read since the last probe, and the run's length.
    run: u32,
    run_len: u32,
    /// The current stretch is not measured: the scan's first (its start: the first reads'
    /// latency, the kernel's read-ahead ramping up), or the first advised after the kernel's
    /// read-ahead (the advice's first window, issued at once).
    warming_up: bool,
}

impl Default for Chooser {
    fn default() -> Self {
        Chooser::new()
    }
}

impl Chooser {
    /// A scan about to begin: its first stretch goes to the kernel's read-ahead.
    pub fn new() -> Chooser {
        Chooser {
            mode: ReadAheadMode::Kernel,
            started: None,
            kernel: None,
            advised: None,
            chosen: None,
            run: 0,
            run_len: FIRST_RUN_STRETCHES,
            warming_up: true,
        }
    }

    /// The way chosen so far (none before both ways were measured).
    pub fn chosen(&self) -> Option<ReadAheadMode> {
        self.chosen
    }

    /// The latest cost measured for `mode`.
    pub fn cost(&self, mode: ReadAheadMode) -> Option<StretchCost> {
        match mode {
            ReadAheadMode::Advise => self.advised,
            ReadAheadMode::Kernel => self.kernel,
        }
    }

    /// How the current stretch reads ahead.
    pub fn mode(&self) -> ReadAheadMode {
        self.mode
    }

    /// Whether the stretch after the current one may read with the kernel's read-ahead: the
    /// current one is the first advised (the first choice follows it), a probe of the advice
    /// while the kernel's read-ahead is chosen, or the last of a run of advice before the
    /// kernel's is probed. Such a stretch advises nothing past its end.
    pub fn next_may_be_kernel(&self) -> bool {
        self.mode == ReadAheadMode::Advise
            && !self.warming_up
            && match self.chosen {
                None | Some(ReadAheadMode::Kernel) => true,
                Some(ReadAheadMode::Advise) => self.run + 1 >= self.run_len,
            }
    }

    /// Whether the kernel's read-ahead is the better way, by the rule above.
    pub fn kernel_is_better(kernel: StretchCost, advised: StretchCost) -> bool {
        kernel.wall <= advised.wall * KERNEL_WALL_TOLERANCE
            && kernel.cpu <= advised.cpu * KERNEL_CPU_TOLERANCE
    }

    /// Stretch `stretch` begins at `now` (the first of its blocks was handed to a stream;
    /// `stretch` is past every stretch begun before): closes the measurement of the stretch
    /// before, and returns how this one reads ahead.
    pub fn begin(&mut self, stretch: u64, now: Moment) -> ReadAheadMode {
        let Some((from, then)) = self.started else {
            self.started = Some((stretch, now));
            return self.mode;
        };
        if stretch <= from {
            return self.mode; // not a new stretch: nothing to close
        }
        self.started = Some((stretch, now));
        if std::mem::take(&mut self.warming_up) {
            return self.mode; // the same way again, measured this time
        }
        let blocks = (stretch - from).saturating_mul(STRETCH_BLOCKS) as f64;
        let cost = StretchCost {
            wall: (now.wall - then.wall).max(0.0) / blocks,
            cpu: (now.cpu - then.cpu).max(0.0) / blocks,
        };
        let closed = self.mode;
        match closed {
            ReadAheadMode::Kernel => self.kernel = Some(cost),
            ReadAheadMode::Advise => self.advised = Some(cost),
        }
        let (Some(kernel), Some(advised)) = (self.kernel, self.advised) else {
            // Stretch 1 measured the kernel's read-ahead: now the advice, warming up first.
            self.mode = ReadAheadMode::Advise;
            self.warming_up = true;
            return self.mode;
        };
        let best = if Chooser::kernel_is_better(kernel, advised) {
            ReadAheadMode::Kernel
        } else {
            ReadAheadMode::Advise
        };
        let clear_loss =
            kernel.wall >= advised.wall * CLEAR_LOSS || kernel.cpu >= advised.cpu * CLEAR_LOSS;
        let next = match self.chosen {
            // The first two measurements: the first choice.
            None => {
                self.chosen = Some(best);
                self.run = 0;
                if clear_loss {
                    self.run_len = MAX_RUN_STRETCHES;
                }
                best
            }
            // A probe of the way not chosen: the choice again, from two adjacent stretches.
            Some(chosen) if closed == chosen.other() => {
                self.run_len = if best == ReadAheadMode::Advise && clear_loss {
                    MAX_RUN_STRETCHES
                } else if best == chosen {
                    self.run_len.saturating_mul(4).min(MAX_RUN_STRETCHES)
                } else {
                    FIRST_RUN_STRETCHES
                };
                self.chosen = Some(best);
                self.run = 0;
                best
            }
            // A stretch of the chosen way: the run goes on, or the other way is probed; at
            // once if the kernel's read-ahead, chosen, now loses to the last advice measured
            // (its cost rises when memory gets scarce or slow to hand out, mid-scan).
            Some(chosen) => {
                self.run += 1;
                if self.run >= self.run_len || (chosen == ReadAheadMode::Kernel && best != chosen) {
                    chosen.other()
                } else {
                    chosen
                }
            }
        };
        // Advice after the kernel's read-ahead warms up for a stretch: its first window goes
        // out at once, which a stretch of steady advice never pays.
        self.warming_up = next == ReadAheadMode::Advise && closed == ReadAheadMode::Kernel;
        self.mode = next;
        self.mode
    }
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
            ReadAheadPlan::Advise { window_bytes } | ReadAheadPlan::Measured { window_bytes } => {
                window_bytes
            }
            _ => 0,
        };
        let measured = matches!(plan, ReadAheadPlan::Measured { .. })
            && window_bytes / BLCKSZ as u64 >= ADVICE_PIECE_BLOCKS;
        SeqReadAhead {
            plan,
            window_blocks: window_bytes / BLCKSZ as u64,
            nblocks,
            advised_until: AtomicU64::new(0),
            calls: AtomicU64::new(0),
            cached_streak: AtomicU64::new(0),
            skip: AtomicU64::new(0),
            streamed_until: AtomicU64::new(0),
            advising: AtomicBool::new(matches!(plan, ReadAheadPlan::Advise { .. })),
            chooser: measured.then(|| Mutex::new(Chooser::new())),
            next_stretch: AtomicU64::new(if measured { 0 } else { u64::MAX }),
            stretches_advised: AtomicU64::new(0),
            stretches_kernel: AtomicU64::new(0),
            epoch: Instant::now(),
            advice_cap: AtomicU64::new(u64::MAX),
        }
    }

    /// What the measured choice did so far (all empty for other plans).
    pub fn report(&self) -> ReadAheadReport {
        let chooser = self
            .chooser
            .as_ref()
            .and_then(|c| c.lock().ok().map(|c| c.clone()));
        ReadAheadReport {
            stretches_advised: self.stretches_advised.load(Ordering::Relaxed),
            stretches_kernel: self.stretches_kernel.load(Ordering::Relaxed),
            chosen: chooser.as_ref().and_then(Chooser::chosen),
            advised: chooser.as_ref().and_then(|c| c.cost(ReadAheadMode::Advise)),
            kernel: chooser.as_ref().and_then(|c| c.cost(ReadAheadMode::Kernel)),
        }
    }

    /// Under [`ReadAheadPlan::Measured`], the first block of a stretch not begun yet begins
    /// it: the chooser closes the stretch before and says how this one reads ahead. Other
    /// blocks cost one relaxed load.
    fn steer(&self, block: u64) {
        self.steer_at(block, || Moment {
            wall: self.epoch.elapsed().as_secs_f64(),
            cpu: process_cpu_seconds(),
        });
    }

    /// [`SeqReadAhead::steer`] with the clock read by `now` (made up in tests).
    fn steer_at(&self, block: u64, now: impl FnOnce() -> Moment) {
        let stretch = block / STRETCH_BLOCKS;
        if stretch < self.next_stretch.load(Ordering::Relaxed) {
            return;
        }
        let Some(chooser) = &self.chooser else {
            return;
        };
        // A poisoned lock (a thread panicked mid-update) keeps the way read so far.
        let Ok(mut chooser) = chooser.lock() else {
            return;
        };
        if stretch < self.next_stretch.load(Ordering::Relaxed) {
            return; // another thread began it
        }
        let mode = chooser.begin(stretch, now());
        self.next_stretch.store(stretch + 1, Ordering::Relaxed);
        match mode {
            ReadAheadMode::Advise => {
                // Advise from here on, not the blocks the kernel's read-ahead has read, and
                // not past this stretch if the kernel's read-ahead may read the next one.
                let cap = if chooser.next_may_be_kernel() {
                    (stretch + 1).saturating_mul(STRETCH_BLOCKS)
                } else {
                    u64::MAX
                };
                self.advice_cap.store(cap, Ordering::Relaxed);
                self.advised_until
                    .fetch_max(stretch.saturating_mul(STRETCH_BLOCKS), Ordering::Relaxed);
                self.stretches_advised.fetch_add(1, Ordering::Relaxed);
                self.advising.store(true, Ordering::Relaxed);
            }
            ReadAheadMode::Kernel => {
                self.stretches_kernel.fetch_add(1, Ordering::Relaxed);
                self.advising.store(false, Ordering::Relaxed);
            }
        }
    }

    /// What this scan does to read ahead.
    pub fn plan(&self) -> ReadAheadPlan {
        self.plan
    }

    /// Whether this may advise anything at all.
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
            ReadAheadPlan::Measured { window_bytes } => window_bytes.max(KERNEL_REACH_BYTES),
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
        self.steer(block);
        if !self.advising.load(Ordering::Relaxed) || !self.is_enabled() {
            return;
        }
        // Whole pieces only (but the heap's end): every piece starts at a multiple of
        // ADVICE_PIECE_BLOCKS, so each is advised by one call, whichever thread makes it.
        let ahead = block
            .saturating_add(self.window_blocks)
            .min(self.advice_cap.load(Ordering::Relaxed));
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

/// The read-ahead of a sequential scan of `nblocks` blocks through `pool`: measured
/// (`seq_read_ahead = auto`), `seq_read_ahead` ahead, or the kernel's alone; nothing under
/// direct I/O.
pub fn for_scan(pool: &BufferPool, nblocks: u64) -> SeqReadAhead {
    let config = pool.aio().config();
    if config.direct_io {
        return SeqReadAhead::with_plan(ReadAheadPlan::None, nblocks);
    }
    let window_bytes = config.seq_read_ahead_blocks as u64 * BLCKSZ as u64;
    if config.seq_read_ahead_auto {
        return SeqReadAhead::with_plan(ReadAheadPlan::Measured { window_bytes }, nblocks);
    }
    SeqReadAhead::new(window_bytes, nblocks)
}

/// CPU seconds of the whole process so far (every thread), for the measured choice; 0 if
/// the clock cannot be read (the choice then rests on wall time alone).
fn process_cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec that outlives the call, and
    // CLOCK_PROCESS_CPUTIME_ID is a clock every Linux kernel provides.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
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

    /// A made-up moment.
    fn at(wall: f64, cpu: f64) -> Moment {
        Moment { wall, cpu }
    }

    /// The cost per block of a stretch that took `seconds` of wall and CPU time.
    fn per_block(seconds: f64) -> Option<StretchCost> {
        let per = seconds / STRETCH_BLOCKS as f64;
        Some(StretchCost {
            wall: per,
            cpu: per,
        })
    }

    use ReadAheadMode::{Advise as A, Kernel as K};

    /// Drives a chooser through stretches 0, 1, 2, … where stretch i costs `costs[i]` (wall,
    /// CPU seconds for the whole stretch; stretch 0, the warm-up, costs 100 s, which must
    /// count for nothing); returns the way each stretch was read.
    fn drive(costs: &[(f64, f64)]) -> (Vec<ReadAheadMode>, Chooser) {
        let mut c = Chooser::new();
        let mut now = at(0.0, 0.0);
        let mut ways = vec![c.begin(0, now)];
        now = at(100.0, 100.0);
        ways.push(c.begin(1, now));
        for (i, &(wall, cpu)) in costs.iter().enumerate() {
            now = at(now.wall + wall, now.cpu + cpu);
            ways.push(c.begin(i as u64 + 2, now));
        }
        ways.pop(); // the way of the stretch after the last cost given
        (ways, c)
    }

    /// The rule: the kernel's read-ahead is kept within 10% of the advice's wall time and
    /// 50% of its CPU time per block, advice otherwise, whichever way loses.
    #[test]
    fn the_kernel_is_kept_on_a_tie_and_within_its_tolerances() {
        let cost = |wall, cpu| StretchCost { wall, cpu };
        let advice = cost(1.0, 1.0);
        for (kernel, want, why) in [
            (cost(1.0, 1.0), true, "a tie"),
            (cost(0.5, 0.5), true, "cheaper both ways"),
            (cost(1.1, 1.5), true, "at both tolerances"),
            (cost(1.11, 1.0), false, "slower than 10%"),
            (cost(1.0, 1.51), false, "CPU over 50%"),
            (
                cost(2.0, 0.2),
                false,
                "cheap but slow (a shallow read_ahead_kb)",
            ),
            (
                cost(0.2, 4.0),
                false,
                "fast but costly (large folios from returned memory)",
            ),
        ] {
            assert_eq!(Chooser::kernel_is_better(kernel, advice), want, "{why}");
        }
        // No CPU clock (both 0): wall time alone.
        assert!(Chooser::kernel_is_better(cost(1.0, 0.0), cost(1.0, 0.0)));
    }

    /// The sequence of ways for scripted costs: the warm-ups, the probes, the runs and their
    /// growth, the early end of a kernel run whose cost rose, a probe that overturns the
    /// choice, a clear loss that puts the next probe off longest.
    #[test]
    fn stretches_follow_the_measured_costs() {
        let first = FIRST_RUN_STRETCHES as usize;
        let max = MAX_RUN_STRETCHES as usize;
        let k_cheap = (1.0, 1.0);
        let a_dear = (1.5, 1.5);
        let k_mild = (1.5, 1.0); // slower by more than the tolerance, not clearly
        let a_cheap = (1.0, 1.0);
        let k_dear = (4.0, 4.0); // a clear loss
        let w = (100.0, 100.0); // a warm-up, which must count for nothing
        let seq = |parts: &[(ReadAheadMode, usize)]| -> Vec<ReadAheadMode> {
            parts.iter().flat_map(|&(m, n)| vec![m; n]).collect()
        };
        let costs = |parts: &[((f64, f64), usize)]| -> Vec<(f64, f64)> {
            parts.iter().flat_map(|&(c, n)| vec![c; n]).collect()
        };

        // Kernel cheaper: stretches 0 and 1 the kernel's, 2 and 3 advice (the first a
        // warm-up), a run of 16 kernel stretches, an advice probe (warm-up and measured), a
        // run of 64.
        let (ways, c) = drive(&costs(&[
            (k_cheap, 1),
            (w, 1),
            (a_dear, 1),
            (k_cheap, first),
            (w, 1),
            (a_dear, 1),
            (k_cheap, 4 * first),
        ]));
        assert_eq!(
            ways,
            seq(&[(K, 2), (A, 2), (K, first), (A, 2), (K, 4 * first)])
        );
        assert_eq!(c.chosen(), Some(K));
        assert_eq!(c.cost(K), per_block(1.0));
        assert_eq!(
            c.cost(A),
            per_block(1.5),
            "the warm-ups counted for nothing"
        );

        // Advice cheaper, not clearly: the mirror image (back to advice after the kernel's
        // probe, a warm-up again).
        let (ways, c) = drive(&costs(&[
            (k_mild, 1),
            (w, 1),
            (a_cheap, 1),
            (a_cheap, first),
            (k_mild, 1),
            (w, 1),
            (a_cheap, 4 * first),
        ]));
        assert_eq!(
            ways,
            seq(&[(K, 2), (A, 2), (A, first), (K, 1), (A, 1), (A, 4 * first)])
        );
        assert_eq!(c.chosen(), Some(A));

        // Advice clearly cheaper: the next probe only after the longest run.
        let (ways, _) = drive(&costs(&[
            (k_dear, 1),
            (w, 1),
            (a_cheap, 1),
            (a_cheap, max),
            (k_dear, 1),
        ]));
        assert_eq!(ways, seq(&[(K, 2), (A, 2), (A, max), (K, 1)]));

        // The kernel chosen, then its cost rises mid-run: the next stretch probes the
        // advice at once, which wins clearly: the longest run.
        let (ways, c) = drive(&costs(&[
            (k_cheap, 1),
            (w, 1),
            (a_dear, 1),
            (k_cheap, 2),
            (k_dear, 1),
            (w, 1),
            (a_dear, 1),
            (a_dear, max),
            (k_dear, 1),
        ]));
        assert_eq!(
            ways,
            seq(&[(K, 2), (A, 2), (K, 3), (A, 2), (A, max), (K, 1)])
        );
        assert_eq!(c.chosen(), Some(A));

        // Advice chosen; a probe finds the kernel now cheaper: it is chosen, runs anew.
        let (ways, c) = drive(&costs(&[
            (k_mild, 1),
            (w, 1),
            (a_cheap, 1),
            (a_dear, first),
            (k_cheap, 1),
            (k_cheap, first),
            (w, 1),
        ]));
        assert_eq!(
            ways,
            seq(&[(K, 2), (A, 2), (A, first), (K, 1), (K, first), (A, 1)])
        );
        assert_eq!(c.chosen(), Some(K));

        // Runs grow fourfold per confirming probe, up to MAX_RUN_STRETCHES.
        let mut c = Chooser::new();
        let mut t = 0.0;
        let mut ways = vec![];
        for i in 0..600u64 {
            let way = c.begin(i, at(t, t));
            ways.push(way);
            t += if way == K { 1.0 } else { 1.5 };
        }
        let probes: Vec<usize> = (4..ways.len())
            .filter(|&i| ways[i] == A && ways[i - 1] == K)
            .collect();
        let gaps: Vec<usize> = probes.windows(2).map(|p| p[1] - p[0] - 2).collect();
        assert_eq!(probes[0], 4 + first);
        assert_eq!(&gaps[..3], &[4 * first, max, max]);
    }

    /// Stretches skipped (a cached stretch read in place, a thread far ahead) are measured
    /// per block over all of them; time going backwards or a stretch begun again never
    /// divides by zero or counts negative time.
    #[test]
    fn uneven_stretches_are_measured_per_block() {
        let mut c = Chooser::new();
        assert_eq!(c.begin(0, at(0.0, 0.0)), K);
        assert_eq!(c.begin(2, at(50.0, 50.0)), K, "the warm-up: not measured");
        assert_eq!(c.cost(K), None);
        assert_eq!(c.begin(5, at(53.0, 53.0)), A, "three stretches at 1 s each");
        assert_eq!(c.cost(K), per_block(1.0));
        assert_eq!(
            c.begin(5, at(99.0, 99.0)),
            A,
            "the same stretch: nothing measured"
        );
        assert_eq!(c.begin(6, at(60.0, 60.0)), A, "the advice's warm-up");
        assert_eq!(c.cost(A), None);
        assert_eq!(
            c.begin(7, at(59.0, 59.0)),
            A,
            "a clock going back: a cost of 0"
        );
        assert_eq!(
            c.cost(A),
            Some(StretchCost {
                wall: 0.0,
                cpu: 0.0
            })
        );
        assert_eq!(c.chosen(), Some(A));
        assert_eq!(
            c.begin(4, at(99.0, 99.0)),
            A,
            "an earlier stretch: nothing changes"
        );
        assert_eq!(
            c.cost(A),
            Some(StretchCost {
                wall: 0.0,
                cpu: 0.0
            })
        );
    }

    /// An advised stretch the kernel's read-ahead may follow advises nothing past its end:
    /// the first advised stretch, a probe of the advice, the last stretch of an advice run.
    #[test]
    fn advice_stops_where_the_kernel_may_take_over() {
        let r = SeqReadAhead::with_plan(
            ReadAheadPlan::Measured {
                window_bytes: 64 << 20,
            },
            1 << 40,
        );
        let s = STRETCH_BLOCKS;
        let mut t = 0.0;
        let mut step = |block: u64, cost: f64| {
            r.steer_at(block, || at(t, t));
            t += cost;
            (
                r.advising.load(Ordering::Relaxed),
                r.advice_cap.load(Ordering::Relaxed),
            )
        };
        assert_eq!(step(0, 9.0), (false, u64::MAX), "the warm-up: the kernel's");
        assert_eq!(
            step(5, 0.0),
            (false, u64::MAX),
            "within a stretch: nothing changes"
        );
        assert_eq!(
            step(s, 1.5),
            (false, u64::MAX),
            "stretch 1: the kernel's, measured"
        );
        assert_eq!(
            step(2 * s, 50.0),
            (true, u64::MAX),
            "the advice's warm-up: uncapped"
        );
        assert_eq!(
            step(3 * s, 1.0),
            (true, 4 * s),
            "the first advice measured: capped"
        );
        let run = FIRST_RUN_STRETCHES as u64;
        for i in 4..(4 + run - 1) {
            assert_eq!(step(i * s + 7, 1.0), (true, u64::MAX), "an advice run");
        }
        let last = 4 + run - 1;
        assert_eq!(
            step(last * s, 1.0),
            (true, (last + 1) * s),
            "the run's last: capped"
        );
        assert_eq!(
            step((last + 1) * s, 1.5),
            (false, (last + 1) * s),
            "the probe"
        );
        let report = r.report();
        assert_eq!(report.chosen, Some(A));
        assert_eq!(report.stretches_kernel, 3);
        assert_eq!(report.stretches_advised, run + 2);
        // The plans that do not measure never steer.
        let fixed = SeqReadAhead::new(64 << 20, 1 << 40);
        fixed.steer_at(s * 3, || unreachable!("no clock read without a chooser"));
        assert_eq!(fixed.report(), ReadAheadReport::default());
        assert!(fixed.advising.load(Ordering::Relaxed));
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
