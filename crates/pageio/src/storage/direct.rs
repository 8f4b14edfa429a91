//! Direct-I/O alignment and aligned memory.
//!
//! `O_DIRECT` transfers go straight between the device and user memory, so the kernel asks
//! that the memory address, the file offset and the length are multiples of the device's
//! logical block size (and of the DMA alignment for memory). Since Linux 6.1 `statx` reports
//! both numbers (`STATX_DIOALIGN`); before that, 4096 is the safe answer on every common
//! device, so it is the fallback.
//!
//! [`IoBuffer`] is owned memory aligned to 4096 bytes, which satisfies every alignment
//! `statx` reports on common devices and lets the same buffer serve buffered and direct I/O.
//!
//! Whether a file system takes `O_DIRECT` at all is only known by trying: ramfs answers
//! `open(O_DIRECT)` with `EINVAL`, tmpfs did too before Linux 6.6, and some file systems
//! accept the flag but report no alignment. [`open_direct`] opens one file exactly as the
//! engine does under `direct_io = on` (through a [`FileCache`]), so a tool that asks first —
//! a benchmark deciding whether to run its direct cells, a device probe — gets the same
//! answer and the same error the engine would give:
//!
//! ```text
//!   open_direct(path) ─► FileCache(direct).open(path, O_RDONLY)
//!                          open(O_DIRECT) EINVAL       → DirectIoUnsupported { path }
//!                          statx: no DIO alignment     → DirectIoUnsupported { path }
//!                          ok                          → SegmentFile { alignment, pread }
//! ```

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr::NonNull;

use std::sync::Arc;

use super::{FileCache, OpenMode, SegmentFile, StorageError};

/// Alignment used when the kernel does not report one; also the alignment of every
/// [`IoBuffer`]. 4096 is the logical block size of virtually every device and a multiple of
/// the DMA alignment of all of them.
pub const DEFAULT_DIO_ALIGNMENT_BYTES: usize = 4096;

/// The alignment `O_DIRECT` needs on one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct DioAlignment {
    /// Required alignment of the memory address.
    pub mem_align_bytes: usize,
    /// Required alignment of the file offset and of the length.
    pub offset_align_bytes: usize,
    /// Whether the numbers came from `statx` (true) or the 4096 fallback (false).
    pub from_statx: bool,
}

impl Default for DioAlignment {
    fn default() -> Self {
        DioAlignment {
            mem_align_bytes: DEFAULT_DIO_ALIGNMENT_BYTES,
            offset_align_bytes: DEFAULT_DIO_ALIGNMENT_BYTES,
            from_statx: false,
        }
    }
}

/// Asks `statx(STATX_DIOALIGN)` for a path's direct-I/O alignment.
///
/// Returns `Ok(None)` when the kernel reports that the file does not support direct I/O at
/// all, the default when the kernel does not know the field.
pub fn dio_alignment(path: &Path) -> Result<Option<DioAlignment>, StorageError> {
    let c_path = CString::new(path.as_os_str().as_bytes()).map_err(|_| StorageError::Syscall {
        call: "statx",
        path: path.to_path_buf(),
        source: std::io::Error::from_raw_os_error(libc::EINVAL),
    })?;
    // SAFETY: `libc::statx` is a plain C struct of integers, for which all-zero bytes are a
    // valid value.
    let mut buf: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: `c_path` is a NUL-terminated string that outlives the call, and statx writes
    // only into `buf`, a properly sized and aligned `struct statx` we own exclusively.
    let rc = unsafe {
        libc::statx(
            libc::AT_FDCWD,
            c_path.as_ptr(),
            0,
            libc::STATX_DIOALIGN,
            &mut buf,
        )
    };
    if rc != 0 {
        let err = std::io::Error::last_os_error();
        // Kernels before 4.11 have no statx at all: fall back like an old stx_mask would.
        if err.raw_os_error() == Some(libc::ENOSYS) {
            return Ok(Some(DioAlignment::default()));
        }
        return Err(StorageError::Syscall {
            call: "statx",
            path: path.to_path_buf(),
            source: err,
        });
    }
    if buf.stx_mask & libc::STATX_DIOALIGN == 0 {
        return Ok(Some(DioAlignment::default()));
    }
    if buf.stx_dio_mem_align == 0 || buf.stx_dio_offset_align == 0 {
        return Ok(None);
    }
    Ok(Some(DioAlignment {
        mem_align_bytes: buf.stx_dio_mem_align as usize,
        offset_align_bytes: buf.stx_dio_offset_align as usize,
        from_statx: true,
    }))
}

/// Opens `path` read-only with `O_DIRECT`, as the engine opens relation files under
/// `direct_io = on`, and returns it with its alignment (`SegmentFile::alignment`).
///
/// A file system that refuses direct I/O is [`StorageError::DirectIoUnsupported`] naming the
/// path; a missing file is [`StorageError::NotFound`]. The descriptor closes when the last
/// clone of the returned file is dropped.
pub fn open_direct(path: &Path) -> Result<Arc<SegmentFile>, StorageError> {
    // A cache of one file: the same open(2) flags, errno mapping and statx check as every
    // relation file the engine opens, with nothing kept open behind the caller's back.
    let cache = FileCache::new(1, true)?;
    let display: Arc<str> = path.display().to_string().into();
    cache.open(path, display, OpenMode::Read)
}

/// Whether the file system holding `path` (an existing file) accepts direct I/O: its
/// alignment when it does, the engine's own error when it does not (see [`open_direct`]).
pub fn check_direct_io(path: &Path) -> Result<DioAlignment, StorageError> {
    open_direct(path).map(|file| file.alignment())
}

/// Owned, zero-initialised memory aligned to [`DEFAULT_DIO_ALIGNMENT_BYTES`], usable for
/// buffered and direct I/O alike.
pub struct IoBuffer {
    ptr: NonNull<u8>,
    len_bytes: usize,
}

// SAFETY: IoBuffer owns its allocation exclusively, like a Vec<u8>.
unsafe impl Send for IoBuffer {}
// SAFETY: shared references only give out `&[u8]`.
unsafe impl Sync for IoBuffer {}

impl IoBuffer {
    /// Allocates `len_bytes` of zeroed, aligned memory. A zero-length buffer allocates
    /// nothing.
    pub fn zeroed(len_bytes: usize) -> IoBuffer {
        if len_bytes == 0 {
            return IoBuffer {
                ptr: NonNull::dangling(),
                len_bytes: 0,
            };
        }
        let layout = Self::layout(len_bytes);
        // SAFETY: layout has non-zero size.
        let raw = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        IoBuffer { ptr, len_bytes }
    }

    /// Like [`IoBuffer::zeroed`], but a failed allocation (a memory limit such as
    /// `ulimit -v`) is an error the caller can report instead of an abort.
    pub fn try_zeroed(len_bytes: usize) -> Result<IoBuffer, std::collections::TryReserveError> {
        if len_bytes == 0 {
            return Ok(IoBuffer::zeroed(0));
        }
        let layout = Layout::from_size_align(len_bytes, DEFAULT_DIO_ALIGNMENT_BYTES)
            .map_err(|_| Self::alloc_error())?;
        // SAFETY: layout has non-zero size.
        let raw = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or_else(Self::alloc_error)?;
        Ok(IoBuffer { ptr, len_bytes })
    }

    /// A `TryReserveError` (it has no public constructor; an impossible reservation makes one).
    fn alloc_error() -> std::collections::TryReserveError {
        Vec::<u8>::new()
            .try_reserve(usize::MAX)
            .expect_err("reserving usize::MAX bytes always fails")
    }

    /// Copies a slice into a new aligned buffer.
    pub fn from_slice(data: &[u8]) -> IoBuffer {
        let mut buf = IoBuffer::zeroed(data.len());
        buf.as_mut_slice().copy_from_slice(data);
        buf
    }

    fn layout(len_bytes: usize) -> Layout {
        Layout::from_size_align(len_bytes, DEFAULT_DIO_ALIGNMENT_BYTES)
            .expect("buffer length overflows isize")
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len_bytes
    }

    /// True for a zero-length buffer.
    pub fn is_empty(&self) -> bool {
        self.len_bytes == 0
    }

    /// The contents.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for len_bytes (or dangling with length 0).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len_bytes) }
    }

    /// The contents, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: ptr is valid for len_bytes and uniquely owned.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len_bytes) }
    }

    /// Raw pointer to the start, for building iovecs.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl Drop for IoBuffer {
    fn drop(&mut self) {
        if self.len_bytes != 0 {
            // SAFETY: allocated in `zeroed` with the same layout.
            unsafe { dealloc(self.ptr.as_ptr(), Self::layout(self.len_bytes)) }
        }
    }
}

impl std::fmt::Debug for IoBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "IoBuffer({} bytes)", self.len_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_aligned_and_zeroed() {
        for len in [0usize, 1, 8192, 3 * 8192 + 17] {
            let mut b = IoBuffer::zeroed(len);
            assert_eq!(b.len(), len);
            assert!(b.as_slice().iter().all(|&x| x == 0));
            if len > 0 {
                assert_eq!(b.as_mut_ptr() as usize % DEFAULT_DIO_ALIGNMENT_BYTES, 0);
            }
        }
        let b = IoBuffer::from_slice(b"abc");
        assert_eq!(b.as_slice(), b"abc");
    }

    #[test]
    fn open_direct_reads_with_aligned_buffers_and_names_a_missing_file() {
        // The temporary directory's file system takes O_DIRECT, as the statx test below
        // also assumes (a disk, or tmpfs since Linux 6.6).
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, [5u8; 2 * 8192]).unwrap();
        let file = open_direct(&path).unwrap();
        assert!(file.is_direct());
        assert!(!file.is_writable());
        assert_eq!(check_direct_io(&path).unwrap(), file.alignment());
        let mut buf = IoBuffer::zeroed(8192);
        assert_eq!(file.pread(buf.as_mut_slice(), 8192).unwrap(), 8192);
        assert!(buf.as_slice().iter().all(|&b| b == 5));
        let err = check_direct_io(&dir.path().join("absent")).unwrap_err();
        assert!(matches!(err, StorageError::NotFound { .. }), "{err}");
        assert!(err.to_string().contains("absent"), "{err}");
    }

    #[test]
    fn statx_reports_alignment_on_the_root_file_system() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, [0u8; 8192]).unwrap();
        let a = dio_alignment(&path)
            .unwrap()
            .expect("ext4 supports O_DIRECT");
        assert!(a.mem_align_bytes.is_power_of_two());
        assert!(a.offset_align_bytes.is_power_of_two());
        assert!(a.offset_align_bytes <= DEFAULT_DIO_ALIGNMENT_BYTES);
    }
}
