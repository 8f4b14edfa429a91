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

use std::path::{Path, PathBuf};

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
    /// module's whole-mapping residency check answers for that page alone.
    fn resident_pages(path: &Path) -> usize {
        use crate::verify::mapped::{page_size, Mapping};
        use std::os::fd::AsRawFd;
        let file = std::fs::File::open(path).unwrap();
        let len_bytes = file.metadata().unwrap().len();
        (0..len_bytes.div_ceil(page_size() as u64))
            .filter(|&page| {
                Mapping::new(file.as_raw_fd(), page * page_size() as u64, page_size())
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
