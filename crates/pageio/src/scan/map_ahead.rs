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
//! ## Mechanism
//!
//! ```text
//!   scanning thread                              map-ahead thread (one per serial scan)
//!   read_window(N): segment mapping (Arc) ──populate(bytes of N+1..N+AHEAD)──► madvise(
//!     walk window N's pages in place                                        MADV_POPULATE_READ)
//!   read_window(N+1): its pages are mapped: no faults
//!   next segment: the old mapping (Arc) ───────────retire─────────────────► last Arc dropped
//!                                                                            here: munmap
//!   scan ends: sender dropped ─────────────────────────────────────────────► thread ends; joined
//! ```
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

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::config::{IoMethodKind, SeqMapAhead};
use crate::storage::MappedRegion;

/// Windows populated ahead of the one being walked: two, so that the populate of the next
/// one has started before the scanning thread needs it (one left the scanning thread
/// waiting on the kernel's page-table lock at every window).
pub const AHEAD_WINDOWS: usize = 2;

/// Jobs queued at most.
const QUEUE: usize = 8;

/// One job for the map-ahead thread.
enum Job {
    /// Map bytes `start..end` of the mapping.
    Populate(Arc<MappedRegion>, usize, usize),
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
                        Job::Populate(region, start, end) => {
                            if region.resident(start..end) {
                                if let Ok(bytes) = region.populate_read(start..end) {
                                    counter.fetch_add(bytes as u64, Ordering::Relaxed);
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

    /// Queues the populate of bytes `range` of `region`; skipped when the queue is full.
    pub(crate) fn populate(&self, region: &Arc<MappedRegion>, range: std::ops::Range<usize>) {
        if let Some(tx) = &self.tx {
            let _ = tx.try_send(Job::Populate(region.clone(), range.start, range.end));
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
        m.populate(&region, 0..64 * 8192);
        m.populate(&region, 8192..40 * 8192);
        // Clipped to the mapping: nothing past its end.
        m.populate(&region, 64 * 8192..100 * 8192);
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
        m.populate(&region, 0..64 * 8192);
        m.populate(&region, 0..10 * 8192);
        assert_eq!(m.finish(), 10 * 8192, "only the blocks still in the file");
        drop(file);
    }
}
