//! # Read-ahead advice for sequential scans
//!
//! A buffered sequential scan leaves the device's queue to the kernel's read-ahead, which
//! keeps one or two windows of `read_ahead_kb` in flight per file, whatever the stream asks
//! for. On a device whose throughput grows with the queue depth (a virtual disk, a network
//! volume, NVMe), that is far from its rate: a 1 MB buffered reader on the benchmark disk
//! read 350–410 MB/s, the same reader telling the kernel 64 MB ahead what it will read
//! (`posix_fadvise(WILLNEED)` in 2 MB pieces) 1.3–1.55 GB/s, in the same minutes.
//!
//! So a buffered seq scan may advise the blocks up to `seq_read_ahead` (64 MB) ahead of the
//! last block handed to a stream, in whole pieces of [`ADVICE_PIECE_BLOCKS`] (2 MB), never
//! across a segment; under direct I/O there is no page cache to fill and nothing is advised
//! (the read stream is the only read-ahead there is). PostgreSQL's read stream advises only
//! non-sequential reads and leaves sequential ones to the kernel.
//!
//! Whether it does is [`plan`]'s choice (`seq_read_ahead = auto`, the default), from what the
//! device under the heap says: the 350–410 MB/s above was a device reading 128 kB ahead by
//! itself. Where `read_ahead_kb` is [`KERNEL_WINDOW_DEEP_BYTES`] (4 MB) or more, the kernel's
//! own read-ahead keeps a deep enough queue, and the scan leaves it alone: the kernel then
//! caches the heap in large folios, which later scans read in place (`scan::in_place`) in
//! half the time of the advice's 4 kB pages. A serial scan also tells each segment
//! `POSIX_FADV_SEQUENTIAL` (the kernel reads twice the window ahead): one stream alone
//! with the plain window left the device idle part of the time. Elsewhere, and where sysfs
//! does not say (overlay, tmpfs, NFS), the scan advises 64 MB ahead as below.
//!
//! ```text
//!   seq_read_ahead   device read_ahead_kb   threads   the scan
//!   auto             ≥ 4 MB                 1         kernel alone + POSIX_FADV_SEQUENTIAL
//!   auto             ≥ 4 MB                 2+        kernel alone
//!   auto             < 4 MB or unknown      any       WILLNEED 64 MB ahead
//!   SIZE > 0         (not asked)            any       WILLNEED SIZE ahead
//!   0                (not asked)            any       kernel alone
//! ```
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
//! scans moved within the noise; it was not kept.
//!
//! Advice is a hint: a failed `posix_fadvise` is not counted, a failed cachestat counts as
//! "not cached", and the scan goes on either way, since the reads themselves report any real
//! error with file and block.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::buffer::BufferPool;
use crate::config::BLCKSZ;
use crate::host::Sysroot;
use crate::storage::page_cache::{residency, Residency};
use crate::storage::{OpenMode, RelFile, RELSEG_SIZE_BLOCKS};

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
    /// Under [`ReadAheadPlan::Kernel`] with `sequential`: the segments below this one were
    /// told `POSIX_FADV_SEQUENTIAL`.
    hinted_segments: AtomicU64,
}

/// How a buffered sequential scan reads ahead of its read streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum ReadAheadPlan {
    /// Nothing beyond the read stream: direct I/O, or an empty heap.
    None,
    /// `posix_fadvise(WILLNEED)` `window_bytes` ahead of the streams, in 2 MB pieces.
    Advise {
        /// How far ahead.
        window_bytes: u64,
        /// The device's `read_ahead_kb` in bytes (`None`: not known, or not asked).
        device_window_bytes: Option<u64>,
        /// Whether `seq_read_ahead = auto` chose this (else the setting asked for it).
        auto: bool,
    },
    /// The kernel's own read-ahead alone (it caches the heap in large folios).
    Kernel {
        /// The device's `read_ahead_kb` in bytes (`None`: not known, or not asked).
        device_window_bytes: Option<u64>,
        /// Whether `seq_read_ahead = auto` chose this (else the setting, 0, asked for it).
        auto: bool,
        /// Whether the segment files were told `POSIX_FADV_SEQUENTIAL` (a serial scan under
        /// `auto`: the kernel then reads twice the device's window ahead).
        sequential: bool,
    },
}

impl std::fmt::Display for ReadAheadPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kb = |b: &Option<u64>| match b {
            Some(b) => format!("read_ahead_kb {}", b / 1024),
            None => "read_ahead_kb unknown".to_string(),
        };
        match self {
            ReadAheadPlan::None => write!(f, "none (direct I/O)"),
            ReadAheadPlan::Advise {
                window_bytes,
                device_window_bytes,
                auto,
            } => {
                write!(f, "advice {} MB ahead", window_bytes >> 20)?;
                if *auto {
                    write!(f, " (auto: device {})", kb(device_window_bytes))?;
                }
                Ok(())
            }
            ReadAheadPlan::Kernel {
                device_window_bytes,
                auto,
                sequential,
            } => {
                write!(f, "kernel")?;
                if *sequential {
                    write!(f, ", sequential hint")?;
                }
                if *auto {
                    write!(f, " (auto: device {})", kb(device_window_bytes))
                } else {
                    write!(f, " (seq_read_ahead 0)")
                }
            }
        }
    }
}

impl SeqReadAhead {
    /// Advice `window_bytes` ahead over a heap of `nblocks` blocks; a window under one
    /// piece advises nothing.
    pub fn new(window_bytes: u64, nblocks: u64) -> SeqReadAhead {
        let plan = if window_bytes / BLCKSZ as u64 >= ADVICE_PIECE_BLOCKS {
            ReadAheadPlan::Advise {
                window_bytes,
                device_window_bytes: None,
                auto: false,
            }
        } else {
            ReadAheadPlan::Kernel {
                device_window_bytes: None,
                auto: false,
                sequential: false,
            }
        };
        SeqReadAhead::with_plan(plan, nblocks)
    }

    /// Read-ahead following `plan` over a heap of `nblocks` blocks.
    pub fn with_plan(plan: ReadAheadPlan, nblocks: u64) -> SeqReadAhead {
        let window_bytes = match plan {
            ReadAheadPlan::Advise { window_bytes, .. } => window_bytes,
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
            hinted_segments: AtomicU64::new(0),
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
    /// advice's window; for the kernel's own read-ahead four times the device's window
    /// (twice with the sequential hint, and the kernel keeps up to two windows in flight),
    /// or 64 MB where the window is not known.
    pub fn reach_blocks(&self) -> u64 {
        let bytes = match self.plan {
            ReadAheadPlan::None => 0,
            ReadAheadPlan::Advise { window_bytes, .. } => window_bytes,
            ReadAheadPlan::Kernel {
                device_window_bytes,
                ..
            } => device_window_bytes.map_or(64 << 20, |w| w.saturating_mul(4)),
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
        if let ReadAheadPlan::Kernel {
            sequential: true, ..
        } = self.plan
        {
            self.hint_sequential(pool, rel, block);
        }
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

impl SeqReadAhead {
    /// Tells each segment up to `block`'s, once, `POSIX_FADV_SEQUENTIAL`. Segments are
    /// reached in order (a serial scan), so a mark that only moves forward is enough.
    fn hint_sequential(&self, pool: &BufferPool, rel: &RelFile, block: u64) {
        let segment = block / RELSEG_SIZE_BLOCKS as u64;
        if segment < self.hinted_segments.load(Ordering::Relaxed) {
            return;
        }
        let from = self
            .hinted_segments
            .fetch_max(segment + 1, Ordering::Relaxed);
        for s in from..=segment {
            // A hint: a segment that cannot be opened is reported by its reads.
            if let Ok((file, _)) = rel.locate(
                pool.aio().files(),
                s * RELSEG_SIZE_BLOCKS as u64,
                1,
                OpenMode::Read,
            ) {
                let _ = file.advise_sequential();
            }
        }
    }
}

/// The device read-ahead window (`read_ahead_kb`) from which `seq_read_ahead = auto` leaves a
/// sequential scan to the kernel's own read-ahead: 4 MB. Measured on the benchmark disk
/// (docs/bench-notes/SCANS.md, "Read-ahead by the device's window"): with `read_ahead_kb`
/// 8192 the kernel alone read the cold 2.28 GB `uniform` heap with two threads in
/// 0.95–1.15 s against 1.32–1.65 s advised, and cached it in large folios, which later
/// scans read in place in half the time; with 128 it took 1.38–1.77 s against 1.08–1.52 s
/// advised.
pub const KERNEL_WINDOW_DEEP_BYTES: u64 = 4 << 20;

/// The read-ahead window of the block device under the file `fd` (its `read_ahead_kb`,
/// in bytes), or `None` when the file system has no block device (`major` 0: overlay,
/// tmpfs, NFS) or sysfs does not say.
pub fn device_read_ahead_bytes(sys: &Sysroot, fd: i32) -> Option<u64> {
    // SAFETY: libc::stat is plain old data, for which all-zero bytes are a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: st is a writable stat buffer; an invalid fd only makes fstat fail.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return None;
    }
    read_ahead_bytes_of(sys, libc::major(st.st_dev), libc::minor(st.st_dev))
}

/// `read_ahead_kb` of device `major:minor` in bytes: its own queue's, or for a partition
/// (which has none) its disk's, the sysfs directory above it.
pub fn read_ahead_bytes_of(sys: &Sysroot, major: u32, minor: u32) -> Option<u64> {
    if major == 0 {
        return None;
    }
    // /sys/dev/block/M:m links to the device's directory; a partition's parent is its disk.
    let dir = std::fs::canonicalize(sys.path(format!("/sys/dev/block/{major}:{minor}"))).ok()?;
    let root = std::fs::canonicalize(sys.root()).ok()?;
    let kb = |dir: &std::path::Path| {
        let machine = std::path::Path::new("/").join(dir.strip_prefix(&root).ok()?);
        sys.u64_value(machine.join("queue/read_ahead_kb"))
    };
    kb(&dir)
        .or_else(|| kb(dir.parent()?))
        .and_then(|kb| kb.checked_mul(1024))
}

/// How a sequential scan of `rel` (`nblocks` blocks, `threads` threads) through `pool`
/// reads ahead. Direct I/O: nothing. `seq_read_ahead` set to a size: advice that far ahead
/// (0: the kernel alone). `auto`: the kernel alone when the device's own window (see
/// `device_window`) is at least [`KERNEL_WINDOW_DEEP_BYTES`], with `POSIX_FADV_SEQUENTIAL`
/// for a serial scan (one stream alone did not keep the device busy with the plain window:
/// 1.2–4.1 s against 1.1–1.2 s with the hint); advice `seq_read_ahead` ahead otherwise,
/// and when the window is not known.
pub fn plan(
    direct_io: bool,
    auto: bool,
    advice_blocks: u64,
    threads: usize,
    device_window: impl FnOnce() -> Option<u64>,
) -> ReadAheadPlan {
    if direct_io {
        return ReadAheadPlan::None;
    }
    let advise = |device_window_bytes, auto| {
        if advice_blocks >= ADVICE_PIECE_BLOCKS {
            ReadAheadPlan::Advise {
                window_bytes: advice_blocks * BLCKSZ as u64,
                device_window_bytes,
                auto,
            }
        } else {
            ReadAheadPlan::Kernel {
                device_window_bytes,
                auto,
                sequential: false,
            }
        }
    };
    if !auto {
        return advise(None, false);
    }
    match device_window() {
        Some(bytes) if bytes >= KERNEL_WINDOW_DEEP_BYTES => ReadAheadPlan::Kernel {
            device_window_bytes: Some(bytes),
            auto: true,
            sequential: threads <= 1,
        },
        other => advise(other, true),
    }
}

/// The read-ahead of a sequential scan of `rel` (`nblocks` blocks, `threads` threads)
/// through `pool`, as [`plan`] chooses it.
pub fn for_scan(pool: &BufferPool, rel: &RelFile, nblocks: u64, threads: usize) -> SeqReadAhead {
    let config = pool.aio().config();
    let plan = plan(
        config.direct_io,
        config.seq_read_ahead_auto,
        config.seq_read_ahead_blocks as u64,
        threads,
        || {
            if nblocks == 0 {
                return None;
            }
            let (file, _) = rel.locate(pool.aio().files(), 0, 1, OpenMode::Read).ok()?;
            device_read_ahead_bytes(&Sysroot::default(), file.raw_fd())
        },
    );
    SeqReadAhead::with_plan(plan, nblocks)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: u64 = 1 << 20;
    const ADVICE: u64 = (64 * MB) / BLCKSZ as u64;

    /// Every branch of `seq_read_ahead = auto` and of a set size, at the threshold's edges.
    #[test]
    fn plan_follows_the_device_window_and_the_threads() {
        let kernel = |bytes: u64, sequential| ReadAheadPlan::Kernel {
            device_window_bytes: Some(bytes),
            auto: true,
            sequential,
        };
        let advise = |device: Option<u64>| ReadAheadPlan::Advise {
            window_bytes: 64 * MB,
            device_window_bytes: device,
            auto: true,
        };
        let deep = KERNEL_WINDOW_DEEP_BYTES;
        let cases: [(Option<u64>, usize, ReadAheadPlan); 7] = [
            (Some(8 * MB), 2, kernel(8 * MB, false)),
            (Some(8 * MB), 1, kernel(8 * MB, true)),
            (Some(deep), 2, kernel(deep, false)),
            (Some(deep - 1024), 2, advise(Some(deep - 1024))),
            (Some(128 * 1024), 1, advise(Some(128 * 1024))),
            (Some(0), 2, advise(Some(0))),
            (None, 2, advise(None)),
        ];
        for (device, threads, want) in cases {
            let got = plan(false, true, ADVICE, threads, || device);
            assert_eq!(got, want, "device {device:?}, {threads} threads");
        }
        // A size set by hand is used as it is, and the device is not asked.
        let asked = || -> Option<u64> { panic!("the device is not asked") };
        assert_eq!(
            plan(false, false, ADVICE, 2, asked),
            ReadAheadPlan::Advise {
                window_bytes: 64 * MB,
                device_window_bytes: None,
                auto: false
            }
        );
        assert_eq!(
            plan(false, false, 0, 1, asked),
            ReadAheadPlan::Kernel {
                device_window_bytes: None,
                auto: false,
                sequential: false
            }
        );
        // Direct I/O has no page cache to read ahead into.
        assert_eq!(plan(true, true, ADVICE, 1, asked), ReadAheadPlan::None);
        // The words a user sees.
        assert_eq!(
            kernel(8 * MB, true).to_string(),
            "kernel, sequential hint (auto: device read_ahead_kb 8192)"
        );
        assert_eq!(
            advise(None).to_string(),
            "advice 64 MB ahead (auto: device read_ahead_kb unknown)"
        );
    }

    /// `read_ahead_kb` of a disk, of a partition (its disk's), of a device sysfs does not
    /// describe, and of a file system without a block device.
    #[test]
    fn device_window_from_sysfs() {
        let root = tempfile::tempdir().unwrap();
        let disk = root.path().join("sys/devices/virtual/block/vda");
        std::fs::create_dir_all(disk.join("queue")).unwrap();
        std::fs::create_dir_all(disk.join("vda1")).unwrap();
        std::fs::write(disk.join("queue/read_ahead_kb"), "8192\n").unwrap();
        let links = root.path().join("sys/dev/block");
        std::fs::create_dir_all(&links).unwrap();
        std::os::unix::fs::symlink("../../devices/virtual/block/vda", links.join("254:0")).unwrap();
        std::os::unix::fs::symlink("../../devices/virtual/block/vda/vda1", links.join("254:1"))
            .unwrap();
        let sys = Sysroot::new(root.path());
        assert_eq!(read_ahead_bytes_of(&sys, 254, 0), Some(8 * MB));
        assert_eq!(
            read_ahead_bytes_of(&sys, 254, 1),
            Some(8 * MB),
            "a partition"
        );
        assert_eq!(read_ahead_bytes_of(&sys, 254, 7), None, "not in sysfs");
        assert_eq!(read_ahead_bytes_of(&sys, 0, 42), None, "no block device");
        std::fs::write(disk.join("queue/read_ahead_kb"), "lots\n").unwrap();
        assert_eq!(read_ahead_bytes_of(&sys, 254, 0), None, "not a number");
        // A descriptor fstat refuses reports nothing.
        assert_eq!(device_read_ahead_bytes(&Sysroot::default(), -1), None);
    }
}
