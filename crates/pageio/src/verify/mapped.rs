//! Checking page-cache-resident data in place: read-only mapping (the storage layer's
//! [`MappedRegion`]), SIGBUS guard (the residency probe, `cachestat(2)`, is
//! `storage::page_cache::residency`).
//!
//! # Problem
//!
//! When the cluster is already in the page cache, reading it is a memory copy: `pread`
//! copies every byte from the page cache into our buffer, and then the checksum reads it
//! again. Checksumming the page cache's own pages through a read-only mapping skips the
//! copy, at the price of page-table work instead: every 4 kB page is mapped on first touch
//! and unmapped afterwards. On the benchmark machine (4.7 GB cached, AVX2 checksum, two
//! scanners) that took 0.17–0.18 s against 0.26–0.27 s reading in the published runs, and
//! 0.29 s against 0.305 s (one scanner: 0.40 against 0.47 s) at a busier moment; the copy
//! always cost more than the mappings. See `docs/BENCHMARKS.md`, "pageio verify".
//!
//! A mapping is the wrong tool for data that is not cached: every miss is a synchronous page
//! fault, one read-around at a time, which is exactly the queue-depth-one behaviour the AIO
//! subsystem exists to avoid. So a window is checked in place only when the kernel says all
//! of it is resident; otherwise it goes through the AIO reads.
//!
//! # Mechanism
//!
//! ```text
//!   window of WINDOW_BYTES (16 MB, or less at the end of a file)
//!     │ within the size fstat(2) reports now, whole blocks only? ── no ─► AIO reads
//!     │ cachestat(2): every page of the range cached? ──────────── no ─► AIO reads
//!     │   (ENOSYS on kernels before 6.5: mmap, then mincore(2) instead)
//!     │   (EPERM: the caller neither owns nor may write the file, so the kernel will not
//!     │    say, and mincore would not either ─────────────────────────────► AIO reads)
//!     ▼
//!   mmap(PROT_READ, MAP_SHARED) on the O_RDONLY descriptor
//!     ▼
//!   checksum every page straight from the mapping, with this thread's SIGBUS guard armed;
//!   pages are mapped as they are touched, 16 per fault (the kernel's fault-around)
//!     │ a fault inside the window that cannot be served (file truncated, or a page
//!     │ evicted since cachestat and unreadable now) → the handler maps zero pages over the
//!     │ rest of the window and flags the thread → the window's results are discarded
//!     │                                                         ─── flagged ─► AIO reads
//!     ▼
//!   munmap; results recorded exactly as a completed read's would be
//! ```
//!
//! `MADV_POPULATE_READ` (map the whole window up front, reporting unreadable pages as an
//! error rather than SIGBUS) was tried and dropped: it maps page by page through
//! `get_user_pages`, which made mapped windows slower than reading them.
//!
//! Nothing is ever written: the mapping is `PROT_READ` on a descriptor opened `O_RDONLY`
//! (the kernel refuses `PROT_WRITE` on it), and zero pages mapped by the guard are private
//! anonymous memory. The AIO path re-reads a window that failed here, so the error a user
//! sees (errno, short read, file and block) is the one the read path produces.
//!
//! ## Why the SIGBUS guard exists, and what it does not cover
//!
//! Touching a mapped page beyond the end of a file, or one the kernel cannot read back,
//! raises SIGBUS, which by default kills the process. The window is mapped only within the
//! size `fstat` reported just before and only when all of it was cached, so this needs the
//! file to shrink, or a cached page to be evicted and then fail to read, in the millisecond
//! or so it takes to checksum a window. A cluster that verify accepts is shut down, so
//! nothing truncates its files; the guard makes even that case a clean fallback instead of a
//! crash. It is process-wide (installed once, on first use) but acts only on faults inside
//! the window the faulting thread has armed; any other SIGBUS is passed to the handler that
//! was installed before (Rust's own, which reports stack overflows) or to the default action.
//!
//! Data read through the mapping could in principle change while we read it (another
//! process writing the file); that is the same race a `pread` of a file being written has,
//! and verify refuses running clusters for this reason. A window whose guard fired is
//! discarded whole, so zeros from the guard never reach a report.
//!
//! # Worked example
//!
//! `base/5/16399` is 1 GB and fully cached. Its first window, bytes 0..16 MB, is within the
//! file, cachestat reports 4096 of 4096 pages cached, and 2048 pages are checksummed as
//! blocks 0..2047 straight from the mapping, with no copy. Drop the page cache halfway
//! through: the next window reports 0 cached pages and becomes 16 AIO reads of 1 MB (or
//! 128 of 128 kB, per `io_combine_limit`), checksummed where they complete.

#[cfg(test)]
use crate::storage::sigbus::Faulted;
pub(crate) use crate::storage::sigbus::{map_window, with_guard};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::page_cache::{residency, Residency};
    use std::io::Write;
    use std::os::unix::io::AsRawFd;

    fn file_of(len_bytes: usize) -> (tempfile::NamedTempFile, std::fs::File) {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        let data: Vec<u8> = (0..len_bytes).map(|i| (i % 251) as u8).collect();
        f.write_all(&data).unwrap();
        f.flush().unwrap();
        let ro = std::fs::File::open(f.path()).unwrap();
        (f, ro)
    }

    #[test]
    fn resident_after_write_and_mapping_reads_the_file() {
        let len = 64 * 8192;
        let (_f, ro) = file_of(len);
        // Just written, so cached; as the owner we may ask.
        let r = residency(ro.as_raw_fd(), 0, len);
        assert_ne!(r, Residency::NotAll);
        let m = map_window(ro.as_raw_fd(), 0, len).unwrap();
        assert!(m.all_resident());
        let sum = with_guard(&m, |b| b.iter().map(|&x| x as u64).sum::<u64>()).unwrap();
        let expect: u64 = (0..len).map(|i| (i % 251) as u64).sum();
        assert_eq!(sum, expect);
    }

    #[test]
    fn truncation_under_a_mapping_is_caught_not_fatal() {
        let len = 64 * 8192;
        let (f, ro) = file_of(len);
        let m = map_window(ro.as_raw_fd(), 0, len).unwrap();
        // Shrink the file to 10 pages after mapping: touching page 10 and later raises
        // SIGBUS, which the guard must turn into Faulted.
        f.as_file().set_len(10 * 8192).unwrap();
        let r = with_guard(&m, |b| b.iter().map(|&x| x as u64).sum::<u64>());
        assert_eq!(r, Err(Faulted));
        // The guard is disarmed again: a clean window afterwards is fine.
        let (_g, ro2) = file_of(8192);
        let m2 = map_window(ro2.as_raw_fd(), 0, 8192).unwrap();
        assert!(with_guard(&m2, |b| b.len()).is_ok());
    }
}
