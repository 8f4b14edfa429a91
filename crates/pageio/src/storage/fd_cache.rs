//! The file-descriptor cache.
//!
//! A scan of a large cluster touches thousands of segment files, more than a process may keep
//! open. PostgreSQL's `fd.c` keeps a bounded LRU of "virtual file descriptors" and closes the
//! least recently used when it needs room; this is the same idea with reference counting:
//!
//! ```text
//!   open("base/5/16384.3") ─► hit?  bump its tick, hand out Arc clone
//!                             miss? at bound → drop the entry with the smallest tick
//!                                   open(2); EMFILE → drop one more and retry once
//! ```
//!
//! The cache holds one `Arc<SegmentFile>` per open file; I/Os in flight hold clones, so
//! dropping a cache entry only closes the descriptor once the last I/O on it completes. The
//! bound is `min(max_open_files, RLIMIT_NOFILE - RESERVED_FDS)`: the reserve leaves room for
//! the descriptors the rest of the process needs (io_uring rings, stdio, sockets).

use std::collections::{BTreeMap, HashMap};
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::direct::{dio_alignment, DioAlignment};
use super::StorageError;

/// Descriptors kept free for everything that is not a cached data file (PostgreSQL keeps
/// `NUM_RESERVED_FDS` = 10 plus what was already open at start; rings and test harnesses need
/// a few more, so 64).
pub const RESERVED_FDS: u64 = 64;

/// Smallest cache that lets the engine make progress: a merged I/O, the file being written
/// and the file being read must be open at once, with some slack.
pub(crate) const MIN_CACHED_FILES: u64 = 8;

/// How a file is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpenMode {
    /// `O_RDONLY`: the file must exist. Tools that promise not to write (verify) use only
    /// this.
    Read,
    /// `O_RDWR | O_CREAT`.
    ReadWriteCreate,
}

/// One open segment file.
#[derive(Debug)]
pub struct SegmentFile {
    fd: OwnedFd,
    path: PathBuf,
    display: Arc<str>,
    direct: bool,
    writable: bool,
    alignment: DioAlignment,
    size_at_open: u64,
}

impl SegmentFile {
    /// The file's size in bytes when it was opened (`fstat`).
    pub fn size_at_open(&self) -> u64 {
        self.size_at_open
    }

    /// The raw descriptor (valid while this value lives).
    pub fn raw_fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The name used in messages (relative to the data directory when known).
    pub fn display_name(&self) -> &Arc<str> {
        &self.display
    }

    /// Whether the file was opened with `O_DIRECT`.
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    /// Whether the file was opened for writing.
    pub fn is_writable(&self) -> bool {
        self.writable
    }

    /// The direct-I/O alignment of the file's file system.
    pub fn alignment(&self) -> DioAlignment {
        self.alignment
    }

    /// `pread(2)`, retrying `EINTR`.
    pub fn pread(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        loop {
            // SAFETY: buf is valid for writes of buf.len() bytes.
            let rc = unsafe {
                libc::pread(
                    self.raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    offset as libc::off_t,
                )
            };
            if rc >= 0 {
                return Ok(rc as usize);
            }
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EINTR) {
                return Err(err);
            }
        }
    }

    /// `pwrite(2)`, retrying `EINTR`.
    pub fn pwrite(&self, buf: &[u8], offset: u64) -> std::io::Result<usize> {
        loop {
            // SAFETY: buf is valid for reads of buf.len() bytes.
            let rc = unsafe {
                libc::pwrite(
                    self.raw_fd(),
                    buf.as_ptr().cast(),
                    buf.len(),
                    offset as libc::off_t,
                )
            };
            if rc >= 0 {
                return Ok(rc as usize);
            }
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EINTR) {
                return Err(err);
            }
        }
    }

    /// `posix_fadvise(WILLNEED)`: starts kernel read-ahead of a byte range (PostgreSQL's
    /// prefetch for the sync method). Meaningless under `O_DIRECT`, so a no-op there.
    pub fn advise_willneed(&self, offset: u64, len_bytes: u64) -> Result<(), StorageError> {
        if self.direct {
            return Ok(());
        }
        self.fadvise(
            offset,
            len_bytes,
            libc::POSIX_FADV_WILLNEED,
            "posix_fadvise(WILLNEED)",
        )
    }

    /// `posix_fadvise(DONTNEED)` over the whole file: evicts its clean pages from the page
    /// cache.
    pub fn advise_dontneed(&self) -> Result<(), StorageError> {
        self.fadvise(0, 0, libc::POSIX_FADV_DONTNEED, "posix_fadvise(DONTNEED)")
    }

    fn fadvise(
        &self,
        offset: u64,
        len_bytes: u64,
        advice: i32,
        call: &'static str,
    ) -> Result<(), StorageError> {
        // SAFETY: plain syscall on an fd we own.
        let rc = unsafe {
            libc::posix_fadvise(
                self.raw_fd(),
                offset as libc::off_t,
                len_bytes as libc::off_t,
                advice,
            )
        };
        if rc != 0 {
            return Err(StorageError::Syscall {
                call,
                path: self.path.clone(),
                source: std::io::Error::from_raw_os_error(rc),
            });
        }
        Ok(())
    }

    /// `fdatasync(2)`.
    pub fn sync_data(&self) -> Result<(), StorageError> {
        // SAFETY: plain syscall on an fd we own.
        if unsafe { libc::fdatasync(self.raw_fd()) } != 0 {
            return Err(StorageError::Syscall {
                call: "fdatasync",
                path: self.path.clone(),
                source: std::io::Error::last_os_error(),
            });
        }
        Ok(())
    }
}

struct Entry {
    file: Arc<SegmentFile>,
    tick: u64,
}

struct CacheState {
    entries: HashMap<(PathBuf, OpenMode), Entry>,
    /// tick → key; the smallest tick is the least recently used entry.
    lru: BTreeMap<u64, (PathBuf, OpenMode)>,
    next_tick: u64,
    opens: u64,
    evictions: u64,
}

/// A bounded, thread-safe cache of open segment files.
pub struct FileCache {
    state: Mutex<CacheState>,
    bound: usize,
    direct: bool,
    nofile_limit: u64,
    /// The `max_open_files` setting the cache was made with, for messages.
    max_open_files: usize,
}

impl std::fmt::Debug for FileCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileCache")
            .field("bound", &self.bound)
            .field("direct", &self.direct)
            .finish()
    }
}

/// The soft `RLIMIT_NOFILE`.
pub fn nofile_soft_limit() -> u64 {
    // SAFETY: `libc::rlimit` is two integers, for which all-zero bytes are a valid value.
    let mut rl: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: getrlimit writes only into `rl`, a properly sized struct we own exclusively.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) } != 0 {
        return 1024;
    }
    rl.rlim_cur
}

impl FileCache {
    /// A cache holding at most `max_open_files` files (fewer if `RLIMIT_NOFILE` demands),
    /// opening files with `O_DIRECT` when `direct` is set.
    pub fn new(max_open_files: usize, direct: bool) -> Result<FileCache, StorageError> {
        let limit = nofile_soft_limit();
        let usable = limit.saturating_sub(RESERVED_FDS);
        if usable < MIN_CACHED_FILES {
            return Err(StorageError::FdLimitTooLow {
                max_open_files,
                limit,
                usable,
                needed: MIN_CACHED_FILES,
                // Enough for the setting actually in force (and never below the minimum).
                needed_limit: RESERVED_FDS + (max_open_files as u64).max(MIN_CACHED_FILES),
            });
        }
        let bound = (max_open_files as u64).min(usable).max(1) as usize;
        Ok(FileCache {
            state: Mutex::new(CacheState {
                entries: HashMap::new(),
                lru: BTreeMap::new(),
                next_tick: 0,
                opens: 0,
                evictions: 0,
            }),
            bound,
            direct,
            nofile_limit: limit,
            max_open_files,
        })
    }

    /// The number of files the cache keeps open at most.
    pub fn bound(&self) -> usize {
        self.bound
    }

    /// Whether files are opened with `O_DIRECT`.
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    /// Files currently cached.
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `(open(2) calls, evictions)` since creation.
    pub fn counters(&self) -> (u64, u64) {
        let s = self.lock();
        (s.opens, s.evictions)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CacheState> {
        // A panic while holding this lock cannot leave the maps inconsistent in a way that
        // matters (worst case an entry without LRU tick), so poisoning is ignored.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Closes every cached file (I/Os in flight keep theirs open until they finish).
    pub fn clear(&self) {
        let mut s = self.lock();
        s.entries.clear();
        s.lru.clear();
    }

    /// Returns the open file for `path`, opening it (and evicting the least recently used
    /// file at the bound) when it is not cached.
    pub fn open(
        &self,
        path: &Path,
        display: Arc<str>,
        mode: OpenMode,
    ) -> Result<Arc<SegmentFile>, StorageError> {
        let key = (path.to_path_buf(), mode);
        let mut s = self.lock();
        let tick = s.next_tick;
        s.next_tick += 1;
        if let Some(entry) = s.entries.get_mut(&key) {
            let old = std::mem::replace(&mut entry.tick, tick);
            let file = entry.file.clone();
            s.lru.remove(&old);
            s.lru.insert(tick, key);
            return Ok(file);
        }
        while s.entries.len() >= self.bound {
            Self::evict_one(&mut s);
        }
        let file = match self.open_file(path, display.clone(), mode) {
            Err(StorageError::TooManyOpenFiles { .. }) if !s.entries.is_empty() => {
                // Another part of the process holds descriptors we did not count: make room
                // and try once more before giving up.
                Self::evict_one(&mut s);
                self.open_file(path, display, mode)?
            }
            other => other?,
        };
        let file = Arc::new(file);
        s.opens += 1;
        s.entries.insert(
            key.clone(),
            Entry {
                file: file.clone(),
                tick,
            },
        );
        s.lru.insert(tick, key);
        Ok(file)
    }

    fn evict_one(s: &mut CacheState) {
        if let Some((_, key)) = s.lru.pop_first() {
            s.entries.remove(&key);
            s.evictions += 1;
        }
    }

    /// The error of an `open` that failed with `err`: what sits at `path` when it is not a
    /// regular file, a missing file or directory, the descriptor limit, a refused O_DIRECT.
    fn open_error(&self, path: &Path, err: std::io::Error) -> StorageError {
        // Something that is not a regular file may refuse the open itself (a directory
        // opened for writing: EISDIR; a socket: ENXIO): name what it is.
        if !matches!(err.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) {
            if let Ok(meta) = std::fs::metadata(path) {
                if !meta.is_file() {
                    return StorageError::NotRegularFile {
                        path: path.to_path_buf(),
                        what: super::file_type_name(meta.file_type()),
                    };
                }
            }
        }
        match err.raw_os_error() {
            Some(libc::ENOENT) => {
                let dir = path.parent().unwrap_or(Path::new("."));
                match super::directory_problem(dir) {
                    Some(problem) => StorageError::DirectoryMissing {
                        path: path.to_path_buf(),
                        dir: dir.to_path_buf(),
                        problem,
                    },
                    None => StorageError::NotFound {
                        path: path.to_path_buf(),
                    },
                }
            }
            Some(libc::EMFILE) | Some(libc::ENFILE) => StorageError::TooManyOpenFiles {
                path: path.to_path_buf(),
                limit: self.nofile_limit,
                max_open_files: self.max_open_files,
                bound: self.bound,
            },
            Some(libc::EINVAL) if self.direct => StorageError::DirectIoUnsupported {
                path: path.to_path_buf(),
                source: err,
            },
            _ => StorageError::Open {
                path: path.to_path_buf(),
                source: err,
            },
        }
    }

    fn open_file(
        &self,
        path: &Path,
        display: Arc<str>,
        mode: OpenMode,
    ) -> Result<SegmentFile, StorageError> {
        let c_path = CString::new(path.as_os_str().as_bytes()).map_err(|_| StorageError::Open {
            path: path.to_path_buf(),
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "path contains a NUL byte",
            ),
        })?;
        // Opening a FIFO for reading waits for a writer forever, so the file is opened
        // non-blocking, checked on the descriptor (below: a regular file, whatever was
        // swapped in at the path meanwhile), and only then made blocking again.
        let mut flags = libc::O_CLOEXEC | libc::O_NONBLOCK;
        flags |= match mode {
            OpenMode::Read => libc::O_RDONLY,
            OpenMode::ReadWriteCreate => libc::O_RDWR | libc::O_CREAT,
        };
        if self.direct {
            flags |= libc::O_DIRECT;
        }
        // SAFETY: c_path is a valid NUL-terminated string.
        let fd = unsafe { libc::open(c_path.as_ptr(), flags, 0o600 as libc::c_uint) };
        if fd < 0 {
            return Err(self.open_error(path, std::io::Error::last_os_error()));
        }
        // SAFETY: fd is a freshly opened descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: libc::stat is plain old data, for which all-zero bytes are a valid value.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fd is a valid open descriptor and st a writable stat buffer.
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
            return Err(StorageError::Open {
                path: path.to_path_buf(),
                source: std::io::Error::last_os_error(),
            });
        }
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Err(StorageError::NotRegularFile {
                path: path.to_path_buf(),
                what: match st.st_mode & libc::S_IFMT {
                    libc::S_IFDIR => "a directory",
                    libc::S_IFIFO => "a FIFO",
                    libc::S_IFCHR => "a character device",
                    libc::S_IFBLK => "a block device",
                    libc::S_IFSOCK => "a socket",
                    _ => "not a file",
                },
            });
        }
        // A regular file: clear O_NONBLOCK, which would otherwise make io_uring and
        // preadv2 reads of uncached data fail with EAGAIN instead of waiting for the device.
        // SAFETY: fd is a valid open descriptor; F_GETFL takes no argument.
        let fl = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
        let cleared = fl >= 0 && {
            // SAFETY: fd is a valid open descriptor; F_SETFL takes the flags as an int.
            unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, fl & !libc::O_NONBLOCK) == 0 }
        };
        if !cleared {
            return Err(StorageError::Open {
                path: path.to_path_buf(),
                source: std::io::Error::last_os_error(),
            });
        }
        let alignment = if self.direct {
            match dio_alignment(path)? {
                Some(a) => a,
                None => {
                    return Err(StorageError::DirectIoUnsupported {
                        path: path.to_path_buf(),
                        source: std::io::Error::from_raw_os_error(libc::EINVAL),
                    })
                }
            }
        } else {
            DioAlignment::default()
        };
        Ok(SegmentFile {
            fd,
            path: path.to_path_buf(),
            display,
            direct: self.direct,
            writable: mode == OpenMode::ReadWriteCreate,
            alignment,
            size_at_open: u64::try_from(st.st_size).unwrap_or(0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(p: &Path) -> Arc<str> {
        p.display().to_string().into()
    }

    #[test]
    fn lru_bound_is_kept_and_in_flight_files_stay_open() {
        let dir = tempfile::tempdir().unwrap();
        let cache = FileCache::new(3, false).unwrap();
        let paths: Vec<_> = (0..5).map(|i| dir.path().join(format!("f{i}"))).collect();
        for p in &paths {
            std::fs::write(p, b"x").unwrap();
        }
        let held = cache
            .open(&paths[0], name(&paths[0]), OpenMode::Read)
            .unwrap();
        for p in &paths[1..] {
            cache.open(p, name(p), OpenMode::Read).unwrap();
        }
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.counters(), (5, 2));
        // f0 was least recently used and is gone from the cache, but our clone still reads.
        let mut b = [0u8; 1];
        assert_eq!(held.pread(&mut b, 0).unwrap(), 1);
        // f4 is cached: opening again does not call open(2).
        cache
            .open(&paths[4], name(&paths[4]), OpenMode::Read)
            .unwrap();
        assert_eq!(cache.counters().0, 5);
        // Touch f2 so f3 is the eviction victim next.
        cache
            .open(&paths[2], name(&paths[2]), OpenMode::Read)
            .unwrap();
        cache
            .open(&paths[0], name(&paths[0]), OpenMode::Read)
            .unwrap();
        let s = cache.lock();
        assert!(!s.entries.contains_key(&(paths[3].clone(), OpenMode::Read)));
        assert!(s.entries.contains_key(&(paths[2].clone(), OpenMode::Read)));
    }

    #[test]
    fn read_mode_never_creates() {
        let dir = tempfile::tempdir().unwrap();
        let cache = FileCache::new(8, false).unwrap();
        let p = dir.path().join("absent");
        let err = cache.open(&p, name(&p), OpenMode::Read).unwrap_err();
        assert!(matches!(err, StorageError::NotFound { .. }));
        assert!(!p.exists());
    }
}
