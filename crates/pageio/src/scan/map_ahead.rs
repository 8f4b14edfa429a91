//! # Map-ahead: the next cached windows mapped off the scanning thread
//!
//! ## Problem
//!
//! A window read in place ([`super::in_place`]) costs the scanning thread the mapping of
//! its pages: the first touch of each 64 kB faults, and the kernel maps the 16 pages around
//! it one by one (a page-table entry, a reference and the memory-cgroup counters per 4 kB
//! page), then unmaps them the same way when the segment's mapping goes. For a page cache
//! in large folios that is cheap (a folio is mapped at once); for one in 4 kB pages — what
//! `WILLNEED` advice leaves, and so what pageio's own cold scan leaves — it measured about
//! 210 ms of the 2.28 GB `uniform` heap's warm serial scan, 150 ms of mapping and 60 ms of
//! unmapping, a third of the whole (docs/bench-notes/SCANS.md, "Map-ahead").
//!
//! PostgreSQL's worker method has the same cost shape and moves it off the backend: its I/O
//! workers do the copies. A serial scan here has the same spare CPU.
//!
//! Once the pages are mapped, the largest cost left to the scanning thread is the check of
//! each page before it is walked (header and checksum, `verify_page`): a third of the warm
//! serial scan of `uniform` (`perf`: 38% of its samples in the checksum), because the
//! checksum is the first read of all 8 kB of a page from memory, while the walk reads only
//! the line pointers and the tuples. That work, too, can move to the helper.
//!
//! ## Mechanism
//!
//! ```text
//!   scanning thread                              map-ahead thread (one per serial scan)
//!   read_window(N): segment mapping (Arc) ──populate(bytes of N+1..N+AHEAD)──► madvise(
//!     walk window N's pages in place                                        MADV_POPULATE_READ)
//!   read_window(N+1): its pages are mapped: no faults      then verify N+1..N+AHEAD in
//!     and verified: only walked                             order (verify_page), extending
//!                                                           the mapping's verified range
//!   next segment: the old mapping (Arc) ───────────retire─────────────────► last Arc dropped
//!                                                                            here: munmap
//!   scan ends: sender dropped ─────────────────────────────────────────────► thread ends; joined
//! ```
//!
//! After a populate, the thread verifies the window's pages ([`AheadVerified`]): the same
//! function with the pool's settings, on the same mapped bytes the scanning thread then
//! walks, in block order, extending one range of verified blocks per segment mapping (one
//! atomic, `from << 32 | to`) up to the first page that fails. The scanning thread skips its
//! own check of a page inside that range and checks every other page itself, so a damaged
//! page reaches the pool's rules exactly as without the helper, and a helper that lags
//! costs nothing but the work it duplicates. The helper reads the scanning thread's
//! mapping under its own SIGBUS guard ([`with_shared_guard`]): a fault there (a file
//! truncated under the scan) puts zeros over the rest of the mapping for both threads, so
//! the guard first sets the mapping's `poisoned` flag, which the scanning thread checks
//! after each page it walks; set, the scan ends with the truncation error, as when the
//! scanning thread faults itself. Pages the scanning thread found verified count as
//! `pages_verified_ahead`.
//!
//! Populating is a hint: what it maps the scanning thread would have faulted in itself, so
//! an error (a page evicted and unreadable, a file truncated: `EFAULT` rather than SIGBUS,
//! since `MADV_POPULATE_READ` never signals) is ignored here and met, with the file and
//! block named, by the scanning thread under its SIGBUS guard as before. The jobs hold the
//! mapping by `Arc`, so a mapping is never unmapped while a job may still populate it, and
//! retiring one sends the scanning thread's reference to this thread so that the unmap is
//! done here too. The queue is bounded ([`QUEUE`]): a populate that does not fit is
//! skipped (the pages are then faulted in by the scanning thread), a retire that does not
//! fit is unmapped by the scanning thread. Neither side ever waits on the other except at
//! the end, when the scan joins the thread: at most the queued jobs, each a populate of
//! one window or an unmap.
//!
//! ## When
//!
//! Only where there is a CPU to spare, and only where the next windows are known: a serial
//! scan (a parallel scan's next chunk is the allocator's choice) under an io_method with
//! workers of its own (`worker`, `io_uring`; `sync` does everything on the calling thread)
//! on a machine with more than one CPU ([`wanted`]). The thread is started at the first
//! window that has something after it to map, so a heap of one window, or a cold scan that
//! reads nothing in place, starts none.
//!
//! ## Worked example
//!
//! Warm `uniform` in 4 kB pages, serial. Window 0 (blocks 0..2048) maps segment 0 and
//! queues the populate of bytes 16..48 MB; the scanning thread faults window 0 in itself
//! while the map-ahead thread maps windows 1 and 2. Window 1 finds its pages mapped and
//! queues 48..64 MB (window 3), and so on: from window 1 on, the scanning thread walks
//! pages that are already mapped. At block 131,072 the scan moves to segment 1: segment 0's
//! mapping goes to the map-ahead thread, which unmaps its 1 GB while the scan goes on.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::config::{IoMethodKind, SeqMapAhead, BLCKSZ};
use crate::page::verify_page;
use crate::storage::sigbus::with_shared_guard;
use crate::storage::MappedRegion;

/// The pages of one segment mapping that the map-ahead thread has verified, so that the
/// scanning thread need not (see the module docs): a range of the segment's blocks that
/// only grows at its end while the windows come in order, and starts again where a window
/// does not follow the last.
pub(crate) struct AheadVerified {
    /// The relation block number of the segment's first block (the checksum's block number).
    first_blkno: u64,
    /// The cluster's `data_checksums`, as the pool checks pages.
    checksums: bool,
    /// The verified blocks of the segment, `from << 32 | to` (`from..to`): one atomic, so
    /// that the scanning thread never reads one end of an old range with the other end of a
    /// new one. A segment holds 131,072 blocks, so each end fits in 32 bits.
    range: AtomicU64,
    /// Set when the thread's read of the mapping faulted (a file truncated under the scan,
    /// a page evicted and unreadable): the SIGBUS guard then put zeros over the rest of the
    /// mapping, which the scanning thread reads too (see [`AheadVerified::poisoned`]).
    poisoned: AtomicBool,
    /// The first block of the window the scanning thread is reading: the thread does not
    /// verify blocks before it (the scanning thread has checked them itself by then), and
    /// skips ahead to it when it lags.
    scanning: AtomicU64,
}

impl AheadVerified {
    /// The verification state of a mapping of the segment whose first block is relation
    /// block `first_blkno`.
    pub(crate) fn new(first_blkno: u64, checksums: bool) -> Arc<AheadVerified> {
        #[cfg(not(test))]
        let poisoned = false;
        #[cfg(test)]
        let poisoned = hook::POISON_NEW.with(std::cell::Cell::get);
        Arc::new(AheadVerified {
            first_blkno,
            checksums,
            range: AtomicU64::new(0),
            poisoned: AtomicBool::new(poisoned),
            scanning: AtomicU64::new(0),
        })
    }

    /// The scanning thread is about to read the window starting at block `block` of the
    /// segment.
    pub(crate) fn scanning_from(&self, block: u64) {
        self.scanning.store(block, Ordering::Relaxed);
    }

    /// Whether block `block` of the segment (not of the relation) was verified.
    pub(crate) fn verified(&self, block: u64) -> bool {
        let packed = self.range.load(Ordering::Acquire);
        (packed >> 32..packed & u64::from(u32::MAX)).contains(&block)
    }

    /// Whether the mapping may hold zeros the guard put in for this thread: set before the
    /// zeros go in, so a scanning thread that finds it clear after walking a page walked the
    /// file's bytes.
    pub(crate) fn poisoned(&self) -> bool {
        self.poisoned.load(Ordering::SeqCst)
    }

    /// Verifies the whole blocks within bytes `bytes` of `region` (the segment's mapping,
    /// from its first byte) with the pool's check ([`verify_page`], the same function and
    /// settings as the scanning thread) and extends the range over those that pass, in
    /// order; stops at the first that fails (the scanning thread then checks it and reports
    /// it itself) or faults. Returns the pages verified.
    fn verify(&self, region: &MappedRegion, bytes: Range<usize>) -> u64 {
        let first = bytes.start.div_ceil(BLCKSZ) as u64;
        let end = (bytes.end.min(region.len_bytes()) / BLCKSZ) as u64;
        if first >= end || end > u64::from(u32::MAX) || self.poisoned() {
            return 0;
        }
        let packed = self.range.load(Ordering::Acquire);
        let mut from = if packed & u64::from(u32::MAX) == first && packed != 0 {
            packed >> 32
        } else {
            // Not after the last range: start again here (the range is empty meanwhile).
            self.range.store(first << 32 | first, Ordering::Release);
            first
        };
        let walked = with_shared_guard(region, &self.poisoned, |mem| {
            let mut block = first;
            let mut done = 0;
            while block < end {
                let scanning = self.scanning.load(Ordering::Relaxed);
                if block < scanning {
                    // Behind the scanning thread, which checks these pages itself: go on
                    // from where it is (the range starts again there).
                    block = scanning.min(end);
                    from = block;
                    self.range.store(from << 32 | block, Ordering::Release);
                    continue;
                }
                let at = block as usize * BLCKSZ;
                let Some(page) = mem
                    .get(at..at + BLCKSZ)
                    .and_then(|p| <&[u8; BLCKSZ]>::try_from(p).ok())
                else {
                    break;
                };
                let blkno = self.first_blkno.saturating_add(block);
                let ok = u32::try_from(blkno)
                    .is_ok_and(|b| verify_page(page, b, self.checksums).is_ok());
                // A fault put zeros in (which pass as a new page): the flag is set by now.
                if !ok || self.poisoned() {
                    break;
                }
                block += 1;
                done += 1;
                self.range.store(from << 32 | block, Ordering::Release);
            }
            done
        });
        walked.unwrap_or(0)
    }
}

/// Windows populated ahead of the one being walked: two, so that the populate of the next
/// one has started before the scanning thread needs it (one left the scanning thread
/// waiting on the kernel's page-table lock at every window).
pub const AHEAD_WINDOWS: usize = 2;

/// Jobs queued at most.
const QUEUE: usize = 8;

/// One job for the map-ahead thread.
enum Job {
    /// Map bytes `start..end` of the mapping, and verify its pages into the
    /// [`AheadVerified`] if one is given.
    Populate(Arc<MappedRegion>, usize, usize, Option<Arc<AheadVerified>>),
    /// Drop this reference (the last one, normally: the unmap happens here).
    Retire(Arc<MappedRegion>),
}

/// Whether a serial scan maps ahead under `setting` and the (resolved) io_method `method`
/// on a machine with `cpus` CPUs: `auto` when the method has workers of its own and there
/// is a second CPU.
pub(crate) fn wanted(setting: SeqMapAhead, method: IoMethodKind, cpus: usize) -> bool {
    match setting {
        SeqMapAhead::On => true,
        SeqMapAhead::Off => false,
        SeqMapAhead::Auto => method != IoMethodKind::Sync && cpus > 1,
    }
}

/// The map-ahead thread of one scanning thread.
pub(crate) struct MapAhead {
    tx: Option<SyncSender<Job>>,
    thread: Option<JoinHandle<()>>,
    populated: Arc<AtomicU64>,
}

impl MapAhead {
    /// Starts the thread; `None` if it cannot be started (the scan then maps for itself).
    pub(crate) fn start() -> Option<MapAhead> {
        let (tx, rx) = sync_channel::<Job>(QUEUE);
        let populated = Arc::new(AtomicU64::new(0));
        let counter = populated.clone();
        let thread = std::thread::Builder::new()
            .name("pageio-map-ahead".into())
            .spawn(move || {
                for job in rx {
                    match job {
                        // Only what the page cache holds: reading the rest is the read
                        // stream's job (a cold window goes to it, with its look-ahead).
                        Job::Populate(region, start, end, verified) => {
                            if region.resident(start..end) {
                                if let Ok(bytes) = region.populate_read(start..end) {
                                    counter.fetch_add(bytes as u64, Ordering::Relaxed);
                                    if let Some(v) = verified {
                                        v.verify(&region, start..end);
                                    }
                                }
                            }
                        }
                        Job::Retire(region) => drop(region),
                    }
                }
            })
            .ok()?;
        Some(MapAhead {
            tx: Some(tx),
            thread: Some(thread),
            populated,
        })
    }

    /// Queues the populate of bytes `range` of `region`, and the verification of its pages
    /// into `verified` if given; skipped when the queue is full.
    pub(crate) fn populate(
        &self,
        region: &Arc<MappedRegion>,
        range: Range<usize>,
        verified: Option<&Arc<AheadVerified>>,
    ) {
        if let Some(tx) = &self.tx {
            let _ = tx.try_send(Job::Populate(
                region.clone(),
                range.start,
                range.end,
                verified.cloned(),
            ));
        }
    }

    /// Hands `region` to the thread to drop; dropped here when the queue is full.
    pub(crate) fn retire(&self, region: Arc<MappedRegion>) {
        if let Some(tx) = &self.tx {
            match tx.try_send(Job::Retire(region)) {
                Ok(()) => {}
                Err(
                    TrySendError::Full(Job::Retire(r)) | TrySendError::Disconnected(Job::Retire(r)),
                ) => drop(r),
                Err(_) => {}
            }
        }
    }

    /// Waits for the queued jobs and the thread's end; returns the bytes it populated.
    pub(crate) fn finish(mut self) -> u64 {
        self.stop();
        self.populated.load(Ordering::Relaxed)
    }

    fn stop(&mut self) {
        self.tx = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for MapAhead {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A test's way to stand for a fault of the map-ahead thread: verification states made on
/// this thread start with the flag set, as after the thread's guard put zeros in.
#[cfg(test)]
pub(crate) mod hook {
    use std::cell::Cell;

    thread_local! {
        pub(super) static POISON_NEW: Cell<bool> = const { Cell::new(false) };
    }

    /// Whether [`super::AheadVerified::new`] on this thread starts poisoned.
    pub(crate) fn poison_new(on: bool) {
        POISON_NEW.with(|p| p.set(on));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_maps_ahead_with_an_io_method_of_workers_and_a_cpu_to_spare() {
        use IoMethodKind::{IoUring, Sync, Worker};
        use SeqMapAhead::{Auto, Off, On};
        let cases = [
            (Auto, Worker, 2, true),
            (Auto, IoUring, 2, true),
            (Auto, Sync, 2, false),
            (Auto, Worker, 1, false),
            (Auto, IoUring, 1, false),
            (On, Sync, 1, true),
            (On, Worker, 1, true),
            (Off, Worker, 64, false),
            (Off, Sync, 64, false),
        ];
        for (setting, method, cpus, want) in cases {
            assert_eq!(
                wanted(setting, method, cpus),
                want,
                "{setting:?} {method} {cpus}"
            );
        }
    }

    /// A file mapping of `blocks` 8 kB blocks of a fresh file (in the page cache).
    fn mappedfile(dir: &std::path::Path, blocks: usize) -> (std::fs::File, Arc<MappedRegion>) {
        let path = dir.join("f");
        // Block by block, so that no folio of the page cache spans two blocks and one block
        // can be evicted alone.
        let mut out = std::fs::File::create(&path).unwrap();
        for _ in 0..blocks {
            std::io::Write::write_all(&mut out, &[7u8; 8192]).unwrap();
        }
        drop(out);
        let file = std::fs::File::open(&path).unwrap();
        let region = crate::storage::sigbus::map_window(
            std::os::fd::AsRawFd::as_raw_fd(&file),
            0,
            blocks * 8192,
        )
        .unwrap();
        (file, Arc::new(region))
    }

    #[test]
    fn populates_what_is_cached_counts_it_and_unmaps_what_it_is_given() {
        let dir = tempfile::tempdir().unwrap();
        let (file, region) = mappedfile(dir.path(), 64);
        // Blocks 48..64 leave the page cache: a populate touching them is skipped, so the
        // map-ahead never reads what the page cache does not hold.
        file.sync_all().unwrap();
        // SAFETY: a plain system call on a descriptor this test owns.
        let rc = unsafe {
            libc::posix_fadvise(
                std::os::fd::AsRawFd::as_raw_fd(&file),
                48 * 8192,
                16 * 8192,
                libc::POSIX_FADV_DONTNEED,
            )
        };
        assert_eq!(rc, 0);
        assert!(!region.resident(48 * 8192..64 * 8192), "evicted");
        let m = MapAhead::start().expect("a thread");
        m.populate(&region, 0..64 * 8192, None);
        m.populate(&region, 8192..40 * 8192, None);
        // Clipped to the mapping: nothing past its end.
        m.populate(&region, 64 * 8192..100 * 8192, None);
        let weak = Arc::downgrade(&region);
        m.retire(region);
        assert_eq!(m.finish(), 39 * 8192, "bytes populated");
        let again = crate::storage::sigbus::map_window(
            std::os::fd::AsRawFd::as_raw_fd(&file),
            0,
            64 * 8192,
        )
        .unwrap();
        assert!(
            !again.resident(48 * 8192..64 * 8192),
            "not read by the map-ahead"
        );
        assert!(weak.upgrade().is_none(), "the retired mapping was dropped");
    }

    /// A mapping of `blocks` checksummed empty pages (as relation blocks 0..), block
    /// `damaged` with a byte of its free space changed (its checksum no longer matches).
    fn checksummed_file(
        dir: &std::path::Path,
        blocks: u64,
        damaged: Option<u64>,
    ) -> (std::fs::File, Arc<MappedRegion>) {
        use crate::page::builder::{set_checksum, PageBuilder};
        let path = dir.join("f");
        let mut bytes = Vec::new();
        for block in 0..blocks {
            let mut page = PageBuilder::new(0).unwrap().finish();
            set_checksum(&mut page, block as u32);
            if damaged == Some(block) {
                page[4000] ^= 0x55;
            }
            bytes.extend_from_slice(&page);
        }
        std::fs::write(&path, &bytes).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let region = crate::storage::sigbus::map_window(
            std::os::fd::AsRawFd::as_raw_fd(&file),
            0,
            bytes.len(),
        )
        .unwrap();
        (file, Arc::new(region))
    }

    #[test]
    fn verifies_ahead_in_order_stops_at_a_damaged_page_and_starts_again_after_a_gap() {
        let dir = tempfile::tempdir().unwrap();
        let (_file, region) = checksummed_file(dir.path(), 64, Some(20));
        let b = BLCKSZ;
        let v = AheadVerified::new(0, true);
        assert!(!v.verified(0), "nothing verified yet");
        assert_eq!(v.verify(&region, 0..16 * b), 16);
        assert!((0..16).all(|k| v.verified(k)) && !v.verified(16));
        // Follows on: extended up to the damaged page, which is left to the scanning thread.
        assert_eq!(v.verify(&region, 16 * b..32 * b), 4);
        assert!(v.verified(0) && v.verified(19) && !v.verified(20) && !v.verified(21));
        // Does not follow on: the range starts again there.
        assert_eq!(v.verify(&region, 32 * b..48 * b), 16);
        assert!(!v.verified(0) && !v.verified(31) && v.verified(32) && v.verified(47));
        assert!(!v.verified(48));
        // Partial blocks at either end are not verified; nothing past the mapping is.
        assert_eq!(v.verify(&region, 48 * b + 1..50 * b + 7), 1);
        assert!(v.verified(49) && !v.verified(48) && !v.verified(50));
        assert_eq!(v.verify(&region, 64 * b..80 * b), 0);
        assert!(!v.poisoned());
        // The checksum's block number is the relation's: the same pages as segment 1's
        // blocks all fail; with checksums off, the damaged page's header still passes.
        let other_segment = AheadVerified::new(131_072, true);
        assert_eq!(other_segment.verify(&region, 0..16 * b), 0);
        let unchecked = AheadVerified::new(0, false);
        assert_eq!(unchecked.verify(&region, 0..64 * b), 64);
        // Behind the scanning thread: on from where it reads, the range starting there.
        let lagging = AheadVerified::new(0, true);
        lagging.scanning_from(40);
        assert_eq!(lagging.verify(&region, 32 * b..48 * b), 8);
        assert!(!lagging.verified(39) && lagging.verified(40) && lagging.verified(47));
        assert_eq!(lagging.verify(&region, 48 * b..56 * b), 8, "follows on");
        assert!(lagging.verified(40) && lagging.verified(55));
        lagging.scanning_from(60);
        assert_eq!(lagging.verify(&region, 0..16 * b), 0, "all behind it");
    }

    #[test]
    fn a_fault_while_verifying_ahead_poisons_the_mapping_never_a_signal() {
        let dir = tempfile::tempdir().unwrap();
        let (_file, region) = checksummed_file(dir.path(), 64, None);
        std::fs::OpenOptions::new()
            .write(true)
            .open(dir.path().join("f"))
            .unwrap()
            .set_len(10 * BLCKSZ as u64)
            .unwrap();
        let v = AheadVerified::new(0, true);
        // Blocks 10.. are gone: the read of block 10 faults, the guard puts zeros in, and the
        // flag the scanning thread checks is set; what was verified before stays verified.
        assert_eq!(
            v.verify(&region, 0..64 * BLCKSZ),
            0,
            "the guard's result is dropped"
        );
        assert!(v.poisoned(), "a reader of the same mapping is told");
        assert!(v.verified(9) && !v.verified(10));
        assert_eq!(
            v.verify(&region, 0..8 * BLCKSZ),
            0,
            "nothing more once poisoned"
        );
    }

    #[test]
    fn a_truncated_file_is_skipped_never_a_signal() {
        let dir = tempfile::tempdir().unwrap();
        let (file, region) = mappedfile(dir.path(), 64);
        std::fs::OpenOptions::new()
            .write(true)
            .open(dir.path().join("f"))
            .unwrap()
            .set_len(10 * 8192)
            .unwrap();
        assert!(
            region.populate_read(20 * 8192..30 * 8192).is_err(),
            "EFAULT, no SIGBUS"
        );
        let m = MapAhead::start().expect("a thread");
        m.populate(&region, 0..64 * 8192, None);
        m.populate(&region, 0..10 * 8192, None);
        assert_eq!(m.finish(), 10 * 8192, "only the blocks still in the file");
        drop(file);
    }
}
