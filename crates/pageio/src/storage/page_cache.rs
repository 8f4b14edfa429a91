//! The kernel's page cache, emptied on purpose for cold runs.
//!
//! A "cold" measurement must find nothing of the relation in memory: not in the buffer pool
//! (a fresh pool sees to that) and not in the kernel's page cache. Two levels of eviction
//! exist, and every tool uses these two functions rather than its own copy:
//!
//! ```text
//!   RelFile::evict_from_page_cache   per segment: fdatasync, then posix_fadvise(DONTNEED)
//!        │                           (SegmentFile::advise_dontneed); any user, only the
//!        │                           relation's own pages, dirty pages written first
//!        ▼
//!   drop_page_cache                  sync(2), then "3" into /proc/sys/vm/drop_caches: the
//!                                    whole page cache, dentries and inodes; root only
//! ```
//!
//! `DONTNEED` is enough for the relation's data but leaves the index's upper levels, the
//! file system's metadata and everything else warm; dropping the whole cache is the honest
//! cold start, and it needs root, so callers ask [`can_drop_page_cache`] first and say which
//! of the two they did.
//!
//! The other way round, `residency` asks whether a byte range is already cached
//! (`cachestat(2)`, Linux 6.5 and later; one system call, no mapping): `verify` checks
//! cached windows in place instead of reading them, and a sequential scan's read-ahead
//! (`scan::readahead`) does not advise pieces the cache already holds.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::StorageError;

/// The kernel's knob for dropping clean caches (`3`: page cache plus dentries and inodes).
pub const DROP_CACHES_PATH: &str = "/proc/sys/vm/drop_caches";

/// Whether this process may drop the whole page cache: writing [`DROP_CACHES_PATH`] needs
/// root (a file of mode 0644 owned by root, and `CAP_SYS_ADMIN` to act on it).
pub fn can_drop_page_cache() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Drops the whole page cache: `sync; echo 3 > /proc/sys/vm/drop_caches`.
///
/// `sync` first, because the kernel drops only clean pages. Without root this fails with
/// [`StorageError::DropPageCache`] before syncing anything; evict single relations with
/// `RelFile::evict_from_page_cache` instead.
pub fn drop_page_cache() -> Result<(), StorageError> {
    drop_caches_at(Path::new(DROP_CACHES_PATH), can_drop_page_cache())
}

/// [`drop_page_cache`] with the knob's path and the permission decision given, so the error
/// paths can be tested without root or without touching the real cache.
fn drop_caches_at(knob: &Path, permitted: bool) -> Result<(), StorageError> {
    let fail = |source: std::io::Error| StorageError::DropPageCache {
        path: PathBuf::from(knob),
        source,
    };
    if !permitted {
        return Err(fail(std::io::Error::from_raw_os_error(libc::EACCES)));
    }
    // SAFETY: sync has no preconditions and cannot fail.
    unsafe { libc::sync() };
    std::fs::write(knob, "3").map_err(fail)
}

/// `cachestat(2)`'s system call number: the same on every architecture (it was added after
/// the tables were unified), and missing from some libc versions' constants.
const SYS_CACHESTAT: libc::c_long = 451;

/// Set once cachestat has returned ENOSYS, so later calls answer `Unknown` at once.
static NO_CACHESTAT: AtomicBool = AtomicBool::new(false);

/// What the kernel says about a byte range of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Residency {
    /// Every page is in the page cache.
    All,
    /// At least one page is not.
    NotAll,
    /// cachestat does not exist (kernels before 6.5): a caller that must know asks mincore
    /// on a mapping (`verify`); one that only saves work treats the range as not cached.
    Unknown,
}

/// Asks cachestat(2) whether `len_bytes` at `offset_bytes` of `fd` are all cached.
pub(crate) fn residency(fd: i32, offset_bytes: u64, len_bytes: usize) -> Residency {
    if NO_CACHESTAT.load(Ordering::Relaxed) {
        return Residency::Unknown;
    }
    // struct cachestat_range { __u64 off; __u64 len; }
    let range: [u64; 2] = [offset_bytes, len_bytes as u64];
    // struct cachestat { nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted }
    let mut stat = [0u64; 5];
    // SAFETY: both pointers reference live arrays of the sizes the kernel reads and writes.
    let rc = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            fd as libc::c_uint,
            range.as_ptr(),
            stat.as_mut_ptr(),
            0 as libc::c_uint,
        )
    };
    if rc != 0 {
        let errno = std::io::Error::last_os_error().raw_os_error();
        if errno == Some(libc::ENOSYS) {
            NO_CACHESTAT.store(true, Ordering::Relaxed);
            return Residency::Unknown;
        }
        // EPERM: the caller neither owns the file nor may write it. mincore has the same
        // restriction (it would report only pages this process has mapped, i.e. none), so
        // asking it would only cost a mapping: answer "not all cached" and let the caller read.
        return Residency::NotAll;
    }
    if stat[0] >= (len_bytes as u64).div_ceil(page_size() as u64) {
        Residency::All
    } else {
        Residency::NotAll
    }
}

/// The system page size (4 kB on x86-64, 4–64 kB on arm64).
pub(crate) fn page_size() -> usize {
    static PAGE_SIZE: AtomicUsize = AtomicUsize::new(0);
    match PAGE_SIZE.load(Ordering::Relaxed) {
        0 => {
            // SAFETY: sysconf has no preconditions.
            let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
            let n = if n > 0 { n as usize } else { 4096 };
            PAGE_SIZE.store(n, Ordering::Relaxed);
            n
        }
        n => n,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_permission_the_error_names_the_knob_and_root() {
        let err = drop_caches_at(Path::new(DROP_CACHES_PATH), false).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EACCES));
        let msg = err.to_string();
        assert!(msg.contains("/proc/sys/vm/drop_caches"), "{msg}");
        assert!(msg.contains("needs root"), "{msg}");
    }

    #[test]
    fn a_knob_that_cannot_be_written_is_an_error_not_a_silent_warm_run() {
        let dir = tempfile::tempdir().unwrap();
        let knob = dir.path().join("missing-dir").join("drop_caches");
        let err = drop_caches_at(&knob, true).unwrap_err();
        assert!(
            matches!(&err, StorageError::DropPageCache { path, .. } if path == &knob),
            "{err}"
        );
        let knob = dir.path().join("drop_caches");
        drop_caches_at(&knob, true).unwrap();
        assert_eq!(std::fs::read_to_string(&knob).unwrap(), "3");
    }

    /// Pages of `path` the page cache holds: each page mapped on its own, so the verify
    /// storage layer's whole-mapping residency check answers for that page alone.
    fn resident_pages(path: &Path) -> usize {
        use crate::storage::{MapAccess, MappedRegion};
        use std::os::fd::AsRawFd;
        let file = std::fs::File::open(path).unwrap();
        let len_bytes = file.metadata().unwrap().len();
        (0..len_bytes.div_ceil(page_size() as u64))
            .filter(|&page| {
                MappedRegion::file(
                    file.as_raw_fd(),
                    page * page_size() as u64,
                    page_size(),
                    MapAccess::ReadOnly,
                )
                .unwrap()
                .all_resident()
            })
            .count()
    }

    #[test]
    fn relation_eviction_empties_the_cache_of_every_segment() {
        let dir = tempfile::tempdir().unwrap();
        let rel = crate::storage::RelFile::new(dir.path().join("16384"));
        for segno in 0..2 {
            std::fs::write(rel.segment_path(segno), vec![1u8; 64 << 10]).unwrap();
            // Reading pulls every page into the cache, so the eviction has work to do.
            std::fs::read(rel.segment_path(segno)).unwrap();
            assert!(
                resident_pages(&rel.segment_path(segno)) > 0,
                "segment {segno}"
            );
        }
        rel.evict_from_page_cache().unwrap();
        for segno in 0..2 {
            assert_eq!(
                resident_pages(&rel.segment_path(segno)),
                0,
                "segment {segno}"
            );
        }
    }
}
