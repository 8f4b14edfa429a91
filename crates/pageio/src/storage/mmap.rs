//! # Memory mappings
//!
//! Three parts of the engine map memory, each for its own reason:
//!
//! ```text
//!   buffer pool      anonymous, read-write, huge pages when asked   MappedRegion::anonymous
//!   verify           a window of a relation file, read-only         MappedRegion::file(ReadOnly)
//!                    (checksummed in place when cached)
//!   aio publish      the in-flight area in /dev/shm, read-write     MappedRegion::file(ReadWrite)
//!                    for its writer, read-only for `pageio aios`     or (ReadOnly)
//! ```
//!
//! [`MappedRegion`] is the one type behind all three: it maps, says how long it is, answers
//! whether its pages are resident (`mincore(2)`), and unmaps exactly what it mapped when
//! dropped. What the bytes mean — buffers coordinated by pins, atomic words under a
//! seqlock, file pages read under a SIGBUS guard — is the user's: the region hands out a raw
//! pointer, and each user's `unsafe` block says why its accesses are sound.
//!
//! Worked example: a 128 MB pool with `huge_pages = try` asks for
//! `MappedRegion::anonymous(128 MB, Huge)`; on a host without reserved huge pages the kernel
//! refuses (ENOMEM) and the pool asks again with `Normal` pages.

use std::os::fd::RawFd;

/// Page size of an anonymous mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageKind {
    /// The kernel's normal pages (transparent huge pages as the system's policy has it).
    Normal,
    /// Explicit huge pages (`MAP_HUGETLB`), from the reserved pool (`vm.nr_hugepages`). The
    /// length must be a multiple of the huge page size.
    Huge,
}

/// What a file mapping may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapAccess {
    /// `PROT_READ`: the descriptor may be read-only, and the bytes are only loaded.
    ReadOnly,
    /// `PROT_READ | PROT_WRITE`: stores reach the file (the descriptor must be open for
    /// writing).
    ReadWrite,
}

/// One `mmap(2)` mapping, unmapped when dropped.
#[derive(Debug)]
pub struct MappedRegion {
    ptr: *mut libc::c_void,
    len_bytes: usize,
}

// SAFETY: the region owns its mapping and hands out only a raw pointer; it never reads or
// writes the bytes itself. Unmapping from another thread is sound. Every access through the
// pointer is an `unsafe` block of the region's user, which coordinates threads.
unsafe impl Send for MappedRegion {}
// SAFETY: as above: `&MappedRegion` gives the pointer and the length, nothing more.
unsafe impl Sync for MappedRegion {}

impl MappedRegion {
    /// A private, zero-filled, read-write mapping of `len_bytes` (`MAP_ANONYMOUS`).
    pub fn anonymous(len_bytes: usize, pages: PageKind) -> std::io::Result<MappedRegion> {
        let huge = match pages {
            PageKind::Normal => 0,
            PageKind::Huge => libc::MAP_HUGETLB,
        };
        Self::map(
            len_bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | huge,
            -1,
            0,
        )
    }

    /// A shared mapping of `len_bytes` at `offset_bytes` (a multiple of the page size) of the
    /// open file `fd`: what the file holds, and with [`MapAccess::ReadWrite`] what is stored
    /// reaches it.
    pub fn file(
        fd: RawFd,
        offset_bytes: u64,
        len_bytes: usize,
        access: MapAccess,
    ) -> std::io::Result<MappedRegion> {
        let prot = match access {
            MapAccess::ReadOnly => libc::PROT_READ,
            MapAccess::ReadWrite => libc::PROT_READ | libc::PROT_WRITE,
        };
        let offset = libc::off_t::try_from(offset_bytes).map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("mapping offset {offset_bytes} is beyond what mmap takes"),
            )
        })?;
        Self::map(len_bytes, prot, libc::MAP_SHARED, fd, offset)
    }

    fn map(
        len_bytes: usize,
        prot: libc::c_int,
        flags: libc::c_int,
        fd: RawFd,
        offset: libc::off_t,
    ) -> std::io::Result<MappedRegion> {
        if len_bytes == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a mapping of 0 bytes",
            ));
        }
        // SAFETY: a fresh mapping at an address the kernel chooses (no MAP_FIXED), so nothing
        // else refers to that memory; the result is checked for MAP_FAILED.
        let ptr = unsafe { libc::mmap(std::ptr::null_mut(), len_bytes, prot, flags, fd, offset) };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(MappedRegion { ptr, len_bytes })
    }

    /// The first byte of the mapping (page-aligned).
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.cast()
    }

    /// The mapping's length.
    pub fn len_bytes(&self) -> usize {
        self.len_bytes
    }

    /// `mincore(2)`: true when every page of the mapping is resident in memory (for a file
    /// mapping: in the page cache).
    pub fn all_resident(&self) -> bool {
        self.resident(0..self.len_bytes)
    }
}

impl MappedRegion {
    /// `mincore(2)` over bytes `range` of the mapping (clipped to it, widened to whole
    /// pages): true when every page of it is resident (for a file mapping: in the page
    /// cache); false for an empty range or when mincore fails.
    pub fn resident(&self, range: std::ops::Range<usize>) -> bool {
        let page = super::page_cache::page_size();
        let start = range.start.min(self.len_bytes) / page * page;
        let end = range.end.min(self.len_bytes);
        if start >= end {
            return false;
        }
        let mut vec = vec![0u8; (end - start).div_ceil(page)];
        // SAFETY: the range lies within this mapping (clipped above, page-aligned start);
        // `vec` has one byte per page of it.
        let rc = unsafe {
            libc::mincore(
                self.ptr.cast::<u8>().add(start).cast(),
                end - start,
                vec.as_mut_ptr(),
            )
        };
        rc == 0 && vec.iter().all(|b| b & 1 == 1)
    }

    /// `madvise(MADV_POPULATE_READ)` over bytes `range` of the mapping (clipped to it,
    /// widened to whole pages): maps them now, as reading them would, reading from the file
    /// what the page cache does not hold. Never signals: a page that cannot be mapped (past
    /// the end of a truncated file, unreadable) is an error (`EFAULT`), as is a kernel
    /// before 5.14 (`EINVAL`). The bytes are not changed. Returns the bytes populated (the
    /// range as clipped).
    pub fn populate_read(&self, range: std::ops::Range<usize>) -> std::io::Result<usize> {
        let page = super::page_cache::page_size();
        let start = range.start.min(self.len_bytes) / page * page;
        let end = range.end.min(self.len_bytes);
        if start >= end {
            return Ok(0);
        }
        // SAFETY: the range lies within this mapping (clipped above, page-aligned start),
        // which stays mapped while `self` is borrowed; MADV_POPULATE_READ only maps pages for
        // reading and never changes their contents.
        let rc = unsafe {
            libc::madvise(
                self.ptr.cast::<u8>().add(start).cast(),
                end - start,
                libc::MADV_POPULATE_READ,
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(end - start)
    }
}

impl Drop for MappedRegion {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `map` mapped; the region is being dropped, so no
        // borrow of it (and by the users' contracts no access through its pointer) remains.
        unsafe {
            libc::munmap(self.ptr, self.len_bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;

    #[test]
    fn anonymous_memory_is_zeroed_and_writable() {
        let region = MappedRegion::anonymous(3 * 4096, PageKind::Normal).unwrap();
        assert_eq!(region.len_bytes(), 3 * 4096);
        // SAFETY: the region is ours, 3 pages long, and no other reference exists.
        let bytes = unsafe { std::slice::from_raw_parts_mut(region.as_ptr(), region.len_bytes()) };
        assert!(bytes.iter().all(|&b| b == 0));
        bytes[5000] = 7;
        assert_eq!(bytes[5000], 7);
    }

    #[test]
    fn a_file_mapping_shows_the_file_and_writes_reach_it() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(&[1u8; 8192]).unwrap();
        f.flush().unwrap();
        let rw = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(f.path())
            .unwrap();
        let region = MappedRegion::file(rw.as_raw_fd(), 0, 8192, MapAccess::ReadWrite).unwrap();
        // Just written through the page cache, so resident.
        assert!(region.all_resident());
        // SAFETY: the region is ours and 8192 bytes long; nothing else maps the file here.
        let bytes = unsafe { std::slice::from_raw_parts_mut(region.as_ptr(), 8192) };
        assert!(bytes.iter().all(|&b| b == 1));
        bytes[100] = 9;
        drop(region);
        assert_eq!(std::fs::read(f.path()).unwrap()[100], 9);
        let ro = std::fs::File::open(f.path()).unwrap();
        // A read-only descriptor cannot be mapped for writing.
        let err = MappedRegion::file(ro.as_raw_fd(), 0, 8192, MapAccess::ReadWrite).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EACCES));
        assert!(MappedRegion::file(ro.as_raw_fd(), 0, 8192, MapAccess::ReadOnly).is_ok());
    }

    #[test]
    fn zero_bytes_and_huge_offsets_are_refused() {
        let err = MappedRegion::anonymous(0, PageKind::Normal).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
        let f = tempfile::tempfile().unwrap();
        let err =
            MappedRegion::file(f.as_raw_fd(), u64::MAX, 4096, MapAccess::ReadOnly).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    }
}
