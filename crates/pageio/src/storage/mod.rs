//! # Relation storage
//!
//! PostgreSQL stores a relation fork as a chain of 1 GB segment files named after its
//! relfilenode: `16384`, `16384.1`, `16384.2`, … for the main fork, `16384_fsm`, `16384_vm`
//! (and their `.N` segments) for the free-space and visibility maps. A block number is global
//! to the fork; the segment and the offset inside it follow from `RELSEG_SIZE` (131072 blocks
//! of 8 kB):
//!
//! ```text
//!   block 200000 of base/5/16384
//!     segment = 200000 / 131072 = 1          → file base/5/16384.1
//!     offset  = (200000 % 131072) * 8192     → 565182464
//!
//!   blocks 131070..131074 cross a boundary   → two I/Os: 16384 [131070, 131071]
//!                                                        16384.1 [0, 1]
//! ```
//!
//! No single I/O ever crosses a segment boundary: [`RelFile::blocks_in_segment`] tells a
//! caller how far it may combine (PostgreSQL's `smgrmaxcombine`), and the synchronous helpers
//! here split for it.
//!
//! Open files live in a [`FileCache`], bounded by `max_open_files` and kept below the
//! process's `RLIMIT_NOFILE`, closing the least recently used file first. Each cached file is
//! an `Arc<SegmentFile>`: an I/O in flight holds its own reference, so evicting a file from
//! the cache never closes a descriptor under the kernel's feet; the descriptor closes when the
//! last I/O using it completes.
//!
//! Direct I/O (`O_DIRECT`) is chosen per cache. Its alignment rules come from `statx`
//! (`STATX_DIOALIGN`, Linux 6.1+) when the kernel reports them, 4096 bytes otherwise. A file
//! system that refuses `O_DIRECT` is an error naming the path and the fix — never a silent
//! fallback to buffered I/O, which would make every measurement a lie. [`open_direct`] and
//! [`check_direct_io`] ask that question of one file the way the engine would.
//!
//! Cold runs empty the page cache through one of two functions, never a copy:
//! [`RelFile::evict_from_page_cache`] (one relation, `POSIX_FADV_DONTNEED` per segment) and
//! [`page_cache::drop_page_cache`] (everything, root only).
//!
//! Memory mappings — the buffer pool's memory, verify's in-place windows, the published
//! in-flight area — are all one type, [`MappedRegion`].

mod cluster_guard;
mod direct;
mod fd_cache;
mod mmap;
pub mod page_cache;
mod relation;
pub(crate) mod sigbus;
mod small_file;

pub use cluster_guard::{enclosing_cluster, is_tablespace_version_dir};
pub use direct::{
    check_direct_io, dio_alignment, open_direct, DioAlignment, IoBuffer,
    DEFAULT_DIO_ALIGNMENT_BYTES,
};
pub(crate) use fd_cache::MIN_CACHED_FILES;
pub use fd_cache::{nofile_soft_limit, FileCache, OpenMode, SegmentFile, RESERVED_FDS};
pub use mmap::{MapAccess, MappedRegion, PageKind};
pub use relation::{
    ForkNumber, OrphanSegment, RelFile, SegmentLayout, MAX_BLOCK_NUMBER, MAX_SEGMENTS,
    SEGMENT_BYTES,
};
pub use small_file::{
    dangling_link_on_the_way, directory_problem, file_type_name, read_small_file,
    read_small_file_through_links, SmallFileError,
};

use std::path::{Path, PathBuf};

use thiserror::Error;

/// Size of one page (PostgreSQL's `BLCKSZ`). Defined here, at the bottom of the layers, and
/// used by `page` and `config` as theirs, so the crate has one block size.
pub const BLCKSZ: usize = 8192;

/// Blocks per segment file (PostgreSQL's `RELSEG_SIZE`: 1 GB of 8 kB blocks).
pub const RELSEG_SIZE_BLOCKS: u32 = 131072;

/// The names in directory `dir`, for messages and checks that say what a directory holds:
/// in the order the file system lists them, names that are not UTF-8 converted lossily,
/// entries that cannot be read skipped, and none when the directory cannot be read.
pub fn dir_entry_names(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Errors of the storage layer. Every variant names the file and says how to fix it.
#[derive(Debug, Error)]
pub enum StorageError {
    /// `open(2)` failed for a reason other than the ones below.
    #[error("could not open file \"{path}\": {source}")]
    Open {
        /// File path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file's directory does not exist (a write into a database directory that is not
    /// there, a path through a dangling link).
    #[error("could not open file \"{path}\": its directory \"{dir}\" {problem}: create the directory first (a relation is written into an existing database or tablespace directory), or check the path")]
    DirectoryMissing {
        /// File path.
        path: PathBuf,
        /// The directory that should hold it.
        dir: PathBuf,
        /// What is wrong with it ("does not exist", "is a link to …, which does not exist").
        problem: String,
    },
    /// The file does not exist (a read of a relation segment that is not there).
    #[error("could not open file \"{path}\": No such file or directory (is the relation's path right, and was it not truncated?)")]
    NotFound {
        /// File path.
        path: PathBuf,
    },
    /// A relation segment's path holds something other than a regular file: a FIFO (whose
    /// reads would wait for a writer forever), a device (`/dev/zero` never ends), a socket or
    /// a directory.
    #[error("could not read relation file \"{path}\": it is {what}, not a regular file; a relation's segments are regular files: restore the file, or point at the right data directory")]
    NotRegularFile {
        /// File path.
        path: PathBuf,
        /// What it is ("a FIFO", "a character device", …).
        what: &'static str,
    },
    /// A segment file larger than a segment (PostgreSQL's `mdnblocks` stops with "segment
    /// too big"): not a relation segment, or damaged.
    #[error("relation segment \"{path}\" is {size_bytes} bytes, more than a segment's 1073741824 (RELSEG_SIZE 131072 blocks of 8192): it is not a relation segment, or it was damaged; restore it from a backup, or point at the right file")]
    SegmentTooBig {
        /// File path.
        path: PathBuf,
        /// Its size.
        size_bytes: u64,
    },
    /// The file system refused `O_DIRECT`.
    #[error("could not open file \"{path}\" with O_DIRECT: the file system does not support direct I/O ({source}); set direct_io = off")]
    DirectIoUnsupported {
        /// File path.
        path: PathBuf,
        /// The OS error (EINVAL on tmpfs-like file systems).
        source: std::io::Error,
    },
    /// The process ran out of file descriptors even after closing cached ones.
    #[error("could not open file \"{path}\": too many open files: the file cache keeps up to {bound} open (max_open_files = {max_open_files}{}) and the rest of the process holds the others of RLIMIT_NOFILE {limit}; raise the limit with `ulimit -n`, or lower max_open_files", if bound < max_open_files { format!(", capped by RLIMIT_NOFILE {limit} minus {} reserved", fd_cache::RESERVED_FDS) } else { String::new() })]
    TooManyOpenFiles {
        /// File path.
        path: PathBuf,
        /// The soft limit in force.
        limit: u64,
        /// The `max_open_files` setting in force.
        max_open_files: usize,
        /// Files the cache keeps open at most (`max_open_files`, capped by the limit).
        bound: usize,
    },
    /// The descriptor limit leaves too little room for the cache.
    #[error("RLIMIT_NOFILE soft limit {limit} leaves only {usable} file descriptors for the file cache (at least {needed} needed; max_open_files = {max_open_files}); raise it with `ulimit -n {needed_limit}` to keep {max_open_files} files open")]
    FdLimitTooLow {
        /// The `max_open_files` setting in force.
        max_open_files: usize,
        /// Soft limit.
        limit: u64,
        /// Descriptors left after the reserve.
        usable: u64,
        /// Minimum the cache needs.
        needed: u64,
        /// A limit that would do.
        needed_limit: u64,
    },
    /// A synchronous read or write failed.
    #[error("could not {op} block {block} in file \"{path}\": {source}")]
    Io {
        /// "read" or "write".
        op: &'static str,
        /// File path.
        path: PathBuf,
        /// Block number within the relation fork.
        block: u64,
        /// The OS error.
        source: std::io::Error,
    },
    /// A synchronous read came back short (end of file inside the range).
    #[error(
        "could not read block {block} in file \"{path}\": read {bytes_read} of {expected_bytes}"
    )]
    ShortRead {
        /// File path.
        path: PathBuf,
        /// Block number within the relation fork.
        block: u64,
        /// Bytes actually read.
        bytes_read: usize,
        /// Bytes asked for.
        expected_bytes: usize,
    },
    /// A direct-I/O request is not aligned as the file system requires.
    #[error("direct I/O on \"{path}\" needs memory aligned to {mem_align} bytes and offsets/lengths to {offset_align} bytes; got address alignment {got_addr_align}, offset {offset}, length {len_bytes}")]
    Misaligned {
        /// File path.
        path: PathBuf,
        /// Required memory alignment.
        mem_align: usize,
        /// Required offset/length alignment.
        offset_align: usize,
        /// Largest power of two dividing the buffer address.
        got_addr_align: usize,
        /// File offset of the request.
        offset: u64,
        /// Length of the request.
        len_bytes: usize,
    },
    /// An I/O would cross a segment boundary.
    #[error(
        "I/O of {nblocks} blocks at block {block} of \"{path}\" crosses the 1 GB segment boundary"
    )]
    CrossesSegment {
        /// Relation fork path.
        path: PathBuf,
        /// First block.
        block: u64,
        /// Block count.
        nblocks: u32,
    },
    /// An I/O reaches past the last block number a relation can have: PostgreSQL's block
    /// numbers are 32 bits and `0xFFFFFFFF` is `InvalidBlockNumber`, so a larger number
    /// would wrap onto another block — a read of the wrong page, a write over it.
    #[error("I/O of {nblocks} blocks at block {block} of \"{path}\" reaches past block {max_block}, the last block number a relation can have: the block number is corrupt or out of range")]
    BlockOutOfRange {
        /// Relation fork path.
        path: PathBuf,
        /// First block.
        block: u64,
        /// Block count.
        nblocks: u64,
        /// `MaxBlockNumber`.
        max_block: u64,
    },
    /// The whole page cache could not be dropped (not root, or a read-only `/proc/sys`).
    #[error("could not drop the page cache: writing 3 to \"{path}\" failed ({source}); this needs root and a writable /proc/sys")]
    DropPageCache {
        /// The knob written (`/proc/sys/vm/drop_caches`).
        path: PathBuf,
        /// The OS error (EACCES when not root).
        source: std::io::Error,
    },
    /// `posix_fadvise` or `statx` failed.
    #[error("{call} failed on \"{path}\": {source}")]
    Syscall {
        /// The call that failed.
        call: &'static str,
        /// File path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

impl StorageError {
    /// The errno behind the error, when there is one.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            StorageError::Open { source, .. }
            | StorageError::DirectIoUnsupported { source, .. }
            | StorageError::Io { source, .. }
            | StorageError::Syscall { source, .. }
            | StorageError::DropPageCache { source, .. } => source.raw_os_error(),
            StorageError::NotFound { .. } | StorageError::DirectoryMissing { .. } => {
                Some(libc::ENOENT)
            }
            StorageError::TooManyOpenFiles { .. } => Some(libc::EMFILE),
            _ => None,
        }
    }
}
