//! # Enabling and disabling data checksums offline (`pg_checksums --enable / --disable`)
//!
//! ## Problem
//!
//! PostgreSQL 18's `initdb` enables data checksums by default and `pg_upgrade` refuses to
//! upgrade between clusters whose setting differs, so an old cluster without checksums must
//! first go through `pg_checksums --enable` — offline, one synchronous 8 kB read and write at
//! a time, one file at a time, on one core. This module does the same job with reads and
//! writes kept in flight through the AIO subsystem and the checksum work on every core.
//!
//! ## Mechanism
//!
//! ```text
//!   ControlFile::check_for_enable     PostgreSQL 18, cleanly shut down, checksums off
//!        │
//!   walk_cluster                      the files pg_checksums visits, in its order
//!        │
//!   rewrite_checksums                 `jobs` jobs take windows of WINDOW_BLOCKS; each job is
//!        │                            two threads joined by bounded channels:
//!        │   reader: read window (Backend::read_blocks: io_combine_limit reads, many in
//!        │           flight), up to READ_AHEAD_WINDOWS ahead of the rewriter
//!        │   rewriter: per page: new (pd_upper = 0)? skip : checksum == pd_checksum? skip
//!        │             : set pd_checksum, copy the page out; hand the window buffer back
//!        │             write the copied pages (write stream: consecutive pages combined,
//!        │             many in flight) — while the reader reads the next windows
//!        ▼
//!   sync_data_directory               fsync every file of the data directory, pg_wal and the
//!                                     tablespaces (or syncfs per file system), as pg_checksums
//!        │                            ── only now are the new page images durable ──
//!   write_control_file                data_checksum_version = 1, time = now, CRC-32C recomputed,
//!                                     written in place and fsynced
//! ```
//!
//! ## Overlap and memory
//!
//! A job that read a window, checksummed it, wrote it and waited before reading the next
//! left the device idle while the CPU worked and never had reads and writes in flight
//! together. The reader keeps [`READ_AHEAD_WINDOWS`] windows read ahead instead, through
//! its own AIO backend, so reads go on while the rewriter's writes are in flight. Memory is
//! bounded by the buffers that circulate: per job `READ_AHEAD_WINDOWS + 1` windows of 8 MB
//! and at most one window of copied 8 kB pages — 32 MB per job. Buffered I/O stays the
//! default (measured in `docs/BENCHMARKS.md`: 4.1 s buffered against 6.2 s with direct I/O
//! on the 4.7 GB benchmark cluster): the page cache takes the writes at memory speed while
//! the reads continue, whereas direct I/O makes each window's writes wait for the device.
//!
//! ## Why an interrupted run is harmless
//!
//! Only `pd_checksum` changes on a page; the data and line pointers are byte-for-byte the
//! same, so every row reads the same whatever subset of the writes reached the disk. While
//! `pg_control` says checksums are off, the server never looks at `pd_checksum`, so a cluster
//! killed at any point before the last step starts with checksums off and every row intact;
//! running `--enable` again rewrites what is still missing (pages already carrying the right
//! checksum are skipped, as `pg_checksums` skips them). `pg_control` is written last, after
//! every data file is synced, so once it says "on", every page is durable with its checksum.
//! A write that fails stops the run before `pg_control` is touched.
//!
//! `--disable` changes only `pg_control` (the pages keep their now unused checksums, as with
//! `pg_checksums`).
//!
//! ## Worked example
//!
//! A fresh `initdb --no-data-checksums` cluster: 950 files, 2788 blocks, none new, none with
//! a checksum yet, so all 2788 blocks of the 781 non-empty files are rewritten ("Files
//! written: 781 / Blocks written: 2788"), the files synced, and `pg_control` updated. Run
//! `--disable` and then `--enable` again: every page already carries its checksum, so
//! nothing is written ("Files written: 0 / Blocks written: 0") and only `pg_control` changes.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use super::walk::ClusterFile;
use super::VerifyError;
use crate::aio::{write_stream, Aio, IoBuffer, WriteStreamOptions};
use crate::config::BLCKSZ;
use crate::page::checksum::{pg_checksum_page, stored_checksum, PD_CHECKSUM_OFFSET};
use crate::page::control::{
    crc32c, read_control_bytes, ControlFile, OFFSET_CRC, OFFSET_DATA_CHECKSUM_VERSION, OFFSET_TIME,
};
use crate::storage::{RelFile, RELSEG_SIZE_BLOCKS};

/// Blocks one thread reads, checksums and writes back as a unit (8 MB). Large enough that
/// the reads of a window fill every handle (64 × 128 kB) and writes combine to
/// `io_combine_limit`; small enough that `jobs` threads hold little memory (a window's read
/// buffer plus at most a window of rewritten pages each) and that one thread's checksum work
/// overlaps another's I/O on a 2-core machine.
pub const WINDOW_BLOCKS: u64 = 1024;

/// Windows each job's reader keeps read ahead of its rewriter: while the rewriter
/// checksums window N and its writes are in flight, windows N+1 and N+2 are read. Without
/// this a job read, then checksummed, then wrote, then waited, so its reads and writes never
/// overlapped and the device idled while the CPU worked. Two rather than one so that a
/// window whose writes take long (a writeback burst) does not stall the reads; more only
/// adds memory. Memory per job: `READ_AHEAD_WINDOWS + 1` window buffers of 8 MB plus at most
/// one window of rewritten 8 kB pages, so 32 MB per job (64 MB at the default two jobs).
pub const READ_AHEAD_WINDOWS: usize = 2;

/// Most rewriting threads: each is an AIO backend with its own handles; past a few per
/// core they only contend for the cursor (the same bound as the checker's scanners).
pub const MAX_JOBS: usize = super::checker::MAX_JOBS;

/// How often the progress callback is called while the threads work.
const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);

/// Value of `data_checksum_version` when checksums are on (`PG_DATA_CHECKSUM_VERSION`).
pub const PG_DATA_CHECKSUM_VERSION: u32 = 1;

/// How [`sync_data_directory`] makes the rewritten files durable (`--sync-method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncMethod {
    /// `fsync` each file (the default, as PostgreSQL's `recovery_init_sync_method`).
    Fsync,
    /// `syncfs` once per file system among the data directory, `pg_wal` and the tablespaces
    /// (Linux).
    Syncfs,
}

/// Totals of a [`rewrite_checksums`] run, named as `pg_checksums --enable` prints them.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct EnableTotals {
    /// Files read.
    pub files_scanned: u64,
    /// Blocks read (new pages included).
    pub blocks_scanned: u64,
    /// Files with at least one block rewritten.
    pub files_written: u64,
    /// Blocks rewritten (their checksum differed).
    pub blocks_written: u64,
    /// New (all-zero header) pages, skipped.
    pub new_pages: u64,
    /// Bytes read.
    pub bytes_read: u64,
}

/// Per-file counters, filled by whichever thread takes its windows.
#[derive(Default)]
struct FileCounts {
    blocks_scanned: AtomicU64,
    blocks_written: AtomicU64,
    new_pages: AtomicU64,
}

struct Shared<'a> {
    files: &'a [ClusterFile],
    counts: Vec<FileCounts>,
    /// (file, next block) of the next window to hand out.
    cursor: Mutex<(usize, u64)>,
    /// Set by the first error: no thread takes another window.
    stop: AtomicBool,
    /// The errors, with (file, block) to keep the one `pg_checksums`, going in order, would
    /// have met first.
    errors: Mutex<Vec<((usize, u64), VerifyError)>>,
    bytes_done: AtomicU64,
}

impl Shared<'_> {
    fn next_window(&self) -> Option<(usize, u64, u64)> {
        let mut cursor = self.cursor.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if self.stop.load(Ordering::Acquire) {
                return None;
            }
            let (file, block) = *cursor;
            let whole_blocks = self.files.get(file)?.size_bytes / BLCKSZ as u64;
            if block >= whole_blocks {
                *cursor = (file + 1, 0);
                continue;
            }
            let n = (whole_blocks - block).min(WINDOW_BLOCKS);
            *cursor = (file, block + n);
            return Some((file, block, n));
        }
    }

    fn fail(&self, file: usize, block: u64, error: VerifyError) {
        self.stop.store(true, Ordering::Release);
        self.errors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(((file, block), error));
    }
}

/// Rewrites every page of `files` whose stored checksum differs from PostgreSQL's checksum
/// of it (new pages skipped), with `jobs` threads each reading windows of [`WINDOW_BLOCKS`]
/// through the AIO subsystem and writing the changed pages back through a write stream.
/// `on_file` is called once per file, in walk order, after all of them are done, with the
/// number of blocks rewritten in it; `progress` now and then with the bytes done.
///
/// Nothing is synced: see [`sync_data_directory`]. A file whose size is not a multiple of
/// 8192 bytes is `pg_checksums`' "could not read block" error, found before anything of that
/// file is read. On the first error no new window is started; the error returned is the one
/// at the lowest (file, block), after every thread finished.
pub fn rewrite_checksums(
    aio: &Aio,
    files: &[ClusterFile],
    jobs: usize,
    mut on_file: impl FnMut(&ClusterFile, u64),
    mut progress: impl FnMut(u64),
) -> Result<EnableTotals, VerifyError> {
    // pg_checksums stops at a partial block when it reaches it; doing the check up front
    // stops before anything is written, which leaves less to explain.
    if let Some(file) = files.iter().find(|f| f.size_bytes % BLCKSZ as u64 != 0) {
        return Err(VerifyError::ShortRead {
            path: file.display.to_string(),
            block: file.size_bytes / BLCKSZ as u64,
            bytes_read: (file.size_bytes % BLCKSZ as u64) as usize,
            expected_bytes: BLCKSZ,
        });
    }
    let shared = Shared {
        files,
        counts: files.iter().map(|_| FileCounts::default()).collect(),
        cursor: Mutex::new((0, 0)),
        stop: AtomicBool::new(false),
        errors: Mutex::new(Vec::new()),
        bytes_done: AtomicU64::new(0),
    };
    let jobs = jobs.clamp(1, MAX_JOBS);
    let running = AtomicUsize::new(jobs);
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            let shared = &shared;
            let running = &running;
            scope.spawn(move || {
                if let Err(error) = job(aio, shared) {
                    shared.fail(usize::MAX, u64::MAX, error);
                }
                running.fetch_sub(1, Ordering::AcqRel);
            });
        }
        // The calling thread reports progress until every rewriter has finished; each ends
        // after its last window, so this loop ends too.
        while running.load(Ordering::Acquire) > 0 {
            progress(shared.bytes_done.load(Ordering::Relaxed));
            std::thread::sleep(PROGRESS_INTERVAL);
        }
    });
    let mut errors = shared
        .errors
        .into_inner()
        .unwrap_or_else(|p| p.into_inner());
    errors.sort_by_key(|(at, _)| *at);
    if let Some((_, error)) = errors.into_iter().next() {
        return Err(error);
    }
    let mut totals = EnableTotals::default();
    for (file, counts) in files.iter().zip(&shared.counts) {
        let written = counts.blocks_written.load(Ordering::Relaxed);
        totals.files_scanned += 1;
        totals.blocks_scanned += counts.blocks_scanned.load(Ordering::Relaxed);
        totals.new_pages += counts.new_pages.load(Ordering::Relaxed);
        totals.blocks_written += written;
        totals.files_written += u64::from(written > 0);
        totals.bytes_read += file.size_bytes;
        on_file(file, written);
    }
    progress(totals.bytes_read);
    Ok(totals)
}

/// A window read by a [`reader`], handed to its [`rewriter`]: (file index, first block,
/// blocks, the buffer holding them).
type ReadWindow = (usize, u64, u64, IoBuffer);

/// Allocates one window's read buffer, or says why not.
fn window_buffer(len_bytes: usize) -> Result<IoBuffer, VerifyError> {
    IoBuffer::try_zeroed(len_bytes).map_err(|_| {
        VerifyError::Internal(format!(
            "could not allocate a {} MB read buffer",
            len_bytes >> 20
        ))
    })
}

/// One job: a [`reader`] thread and a [`rewriter`] thread (the caller's), joined by two
/// bounded channels, so that the next windows are read while this one is checksummed and
/// its writes are in flight. `READ_AHEAD_WINDOWS + 1` window buffers circulate between the
/// two (a filled one goes to the rewriter, which hands it back as soon as the changed pages
/// are copied out, before writing them), which bounds the job's memory; a closed channel
/// (the other side ended, on an error or at the end) ends each side, so neither waits on a
/// partner that is gone.
fn job(aio: &Aio, shared: &Shared<'_>) -> Result<(), VerifyError> {
    let (filled_tx, filled_rx) = std::sync::mpsc::sync_channel::<ReadWindow>(READ_AHEAD_WINDOWS);
    let (free_tx, free_rx) = std::sync::mpsc::sync_channel::<IoBuffer>(READ_AHEAD_WINDOWS + 1);
    for _ in 0..=READ_AHEAD_WINDOWS {
        let buffer = window_buffer(WINDOW_BLOCKS as usize * BLCKSZ)?;
        // Cannot fail: the receiver is alive and the channel holds every buffer.
        let _ = free_tx.send(buffer);
    }
    std::thread::scope(|scope| {
        let reader = scope.spawn(move || {
            if let Err(error) = reader(aio, shared, free_rx, filled_tx) {
                shared.fail(usize::MAX, u64::MAX, error);
            }
        });
        let result = rewriter(aio, shared, filled_rx, free_tx);
        if reader.join().is_err() {
            shared.fail(
                usize::MAX,
                u64::MAX,
                VerifyError::Internal("a reading thread panicked".into()),
            );
        }
        result
    })
}

/// Reads windows until there are none, another thread failed, or the rewriter ended: each
/// into a buffer the rewriter handed back.
fn reader(
    aio: &Aio,
    shared: &Shared<'_>,
    free: std::sync::mpsc::Receiver<IoBuffer>,
    filled: std::sync::mpsc::SyncSender<ReadWindow>,
) -> Result<(), VerifyError> {
    let mut backend = aio.backend()?;
    loop {
        // Take a free buffer before a window, so a window is never claimed and then dropped.
        let Ok(buffer) = free.recv() else {
            return Ok(());
        };
        let Some((file_index, first_block, nblocks)) = shared.next_window() else {
            return Ok(());
        };
        let file = &shared.files[file_index];
        let rel = RelFile::new(&file.path);
        let len_bytes = nblocks as usize * BLCKSZ;
        // A file's last window is shorter: it gets a buffer of its own size, which then
        // circulates in place of the full one (the count of buffers, the bound, is kept).
        let buffer = if buffer.len() == len_bytes {
            buffer
        } else {
            drop(buffer);
            window_buffer(len_bytes)?
        };
        match backend.read_blocks(&rel, first_block, buffer) {
            Ok(read) => {
                if filled
                    .send((file_index, first_block, nblocks, read))
                    .is_err()
                {
                    return Ok(());
                }
            }
            Err(error) => {
                let block = error
                    .target()
                    .map_or(first_block, |target| target.first_block);
                shared.fail(file_index, block, VerifyError::Aio(error));
                return Ok(());
            }
        }
    }
}

/// Checksums each window the reader filled, hands its buffer back, and writes the changed
/// pages through a write stream, until the reader ends.
fn rewriter(
    aio: &Aio,
    shared: &Shared<'_>,
    filled: std::sync::mpsc::Receiver<ReadWindow>,
    free: std::sync::mpsc::SyncSender<IoBuffer>,
) -> Result<(), VerifyError> {
    let mut backend = aio.backend()?;
    let options = WriteStreamOptions::for_maintenance(&backend);
    // Page buffers come back from the write stream and are reused.
    let mut free_pages: Vec<IoBuffer> = Vec::new();
    while let Ok((file_index, first_block, nblocks, read)) = filled.recv() {
        if shared.stop.load(Ordering::Acquire) {
            // Another thread failed: write nothing more.
            return Ok(());
        }
        let file = &shared.files[file_index];
        let rel = RelFile::new(&file.path);
        let len_bytes = nblocks as usize * BLCKSZ;
        let seg_base = file.segno.wrapping_mul(RELSEG_SIZE_BLOCKS);
        let mut changed: Vec<(u64, IoBuffer)> = Vec::new();
        let mut new_pages = 0u64;
        for (i, page) in read.as_slice().chunks_exact(BLCKSZ).enumerate() {
            let Ok(page) = <&[u8; BLCKSZ]>::try_from(page) else {
                break;
            };
            let block = first_block + i as u64;
            if is_new(page) {
                new_pages += 1;
                continue;
            }
            // 32-bit BlockNumber arithmetic, as pg_checksums computes it.
            let checksum = pg_checksum_page(page, (block as u32).wrapping_add(seg_base));
            if checksum == stored_checksum(page) {
                continue;
            }
            let mut out = free_pages.pop().unwrap_or_else(|| IoBuffer::zeroed(BLCKSZ));
            let bytes = out.as_mut_slice();
            bytes.copy_from_slice(page);
            bytes[PD_CHECKSUM_OFFSET..PD_CHECKSUM_OFFSET + 2]
                .copy_from_slice(&checksum.to_le_bytes());
            changed.push((block, out));
        }
        // The changed pages are copied out: the reader may fill this buffer again while
        // they are written. A reader that already ended no longer needs it.
        let _ = free.send(read);
        let counts = &shared.counts[file_index];
        counts.blocks_scanned.fetch_add(nblocks, Ordering::Relaxed);
        counts.new_pages.fetch_add(new_pages, Ordering::Relaxed);
        let to_write = changed.len() as u64;
        if to_write > 0 {
            let mut pages = changed.into_iter();
            let result = write_stream(
                &mut backend,
                &rel,
                options,
                || pages.next(),
                |_, page| free_pages.push(page),
            );
            if let Err(error) = result {
                let block = error
                    .target()
                    .map_or(first_block, |target| target.first_block);
                shared.fail(file_index, block, VerifyError::WriteFailed(error));
                return Ok(());
            }
            counts.blocks_written.fetch_add(to_write, Ordering::Relaxed);
            start_writeback(&backend, &rel, first_block, nblocks);
        }
        shared
            .bytes_done
            .fetch_add(len_bytes as u64, Ordering::Relaxed);
    }
    Ok(())
}

/// Asks the kernel to start writing the window's dirty pages now (`sync_file_range` with
/// `SYNC_FILE_RANGE_WRITE`, as PostgreSQL's `pg_flush_data` under `checkpoint_flush_after`),
/// without waiting: the device writes while the next windows are read, instead of taking
/// every dirty page at the final sync. Only a hint — durability still comes from
/// [`sync_data_directory`] — so a failure is ignored, and direct I/O has nothing to flush.
fn start_writeback(backend: &crate::Backend, rel: &RelFile, first_block: u64, nblocks: u64) {
    if backend.aio().config().direct_io {
        return;
    }
    let Ok((file, offset_bytes, _)) = backend.locate(
        rel,
        first_block,
        nblocks as u32,
        crate::storage::OpenMode::ReadWriteCreate,
    ) else {
        return;
    };
    // SAFETY: a plain system call on a descriptor the file cache keeps open while `file`
    // (an Arc) lives; it reads no memory of ours.
    unsafe {
        libc::sync_file_range(
            file.raw_fd(),
            offset_bytes as libc::off64_t,
            (nblocks as usize * BLCKSZ) as libc::off64_t,
            libc::SYNC_FILE_RANGE_WRITE,
        );
    }
}

/// `PageIsNew`: `pd_upper` is zero.
fn is_new(page: &[u8; BLCKSZ]) -> bool {
    /// Byte offset of `pd_upper` in the page header.
    const PD_UPPER_OFFSET: usize = 14;
    page[PD_UPPER_OFFSET] == 0 && page[PD_UPPER_OFFSET + 1] == 0
}

/// Deepest directory nesting [`sync_data_directory`] walks below the data directory (a
/// tablespace's files are 5 levels down: `pg_tblspc/OID/PG_18_…/DBOID/FILE`). Deeper is not
/// a PostgreSQL layout; the walk reports it instead of going on.
const MAX_SYNC_DEPTH: usize = 64;

/// Makes the whole data directory durable, as `pg_checksums` does before it writes
/// `pg_control` (PostgreSQL's `sync_pgdata`), and returns what it synced.
///
/// * [`SyncMethod::Fsync`]: every regular file under `pgdata`, then each directory after its
///   contents (so new entries and sizes are durable too). Symbolic links are followed only
///   where PostgreSQL puts them — `pg_wal` and the tablespaces in `pg_tblspc` — so the walk
///   cannot loop; it is also bounded to `MAX_SYNC_DEPTH` levels. A file that disappears
///   during the walk is skipped, as PostgreSQL does.
/// * [`SyncMethod::Syncfs`]: one `syncfs` for each file system among `pgdata`, `pg_wal` and
///   each tablespace.
///
/// The paths returned are those synced: every file and directory with `Fsync`, one path per
/// file system with `Syncfs`.
pub fn sync_data_directory(pgdata: &Path, method: SyncMethod) -> Result<Vec<PathBuf>, VerifyError> {
    // The locations PostgreSQL follows links to: the data directory, pg_wal, tablespaces.
    let mut roots = vec![pgdata.to_path_buf()];
    let wal = pgdata.join("pg_wal");
    if is_symlink(&wal) {
        roots.push(wal);
    }
    let tblspc = pgdata.join("pg_tblspc");
    if let Ok(entries) = std::fs::read_dir(&tblspc) {
        let mut links: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| is_symlink(p))
            .collect();
        links.sort();
        roots.extend(links);
    }
    let mut synced = Vec::new();
    match method {
        SyncMethod::Fsync => {
            for root in &roots {
                sync_tree(root, 0, &mut synced)?;
            }
            // A followed link's own directory entry lives in the parent, synced with the
            // data directory above.
        }
        SyncMethod::Syncfs => {
            let mut devices = Vec::new();
            for root in &roots {
                let dev = match std::fs::metadata(root) {
                    Ok(m) => std::os::unix::fs::MetadataExt::dev(&m),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(source) => {
                        return Err(VerifyError::Sync {
                            path: root.clone(),
                            source,
                        })
                    }
                };
                if !devices.contains(&dev) {
                    devices.push(dev);
                    sync_path(root, true)?;
                    synced.push(root.clone());
                }
            }
        }
    }
    Ok(synced)
}

fn is_symlink(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

/// `fsync` of every regular file below `dir` (followed if it is itself a link: the caller
/// passes only pg_wal and tablespace links), then of `dir`; links inside are not followed.
fn sync_tree(dir: &Path, depth: usize, synced: &mut Vec<PathBuf>) -> Result<(), VerifyError> {
    if depth > MAX_SYNC_DEPTH {
        return Err(VerifyError::Sync {
            path: dir.to_path_buf(),
            source: std::io::Error::other(format!(
                "directories nested more than {MAX_SYNC_DEPTH} levels below the data \
                 directory: not a PostgreSQL layout"
            )),
        });
    }
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(VerifyError::OpenDirectory {
                path: dir.to_path_buf(),
                source,
            })
        }
    };
    let mut paths: Vec<(PathBuf, std::fs::FileType)> = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| VerifyError::OpenDirectory {
            path: dir.to_path_buf(),
            source,
        })?;
        let Ok(file_type) = entry.file_type() else {
            continue; // gone since the directory was read
        };
        paths.push((entry.path(), file_type));
    }
    paths.sort_by(|a, b| a.0.cmp(&b.0));
    for (path, file_type) in paths {
        if file_type.is_dir() {
            sync_tree(&path, depth + 1, synced)?;
        } else if file_type.is_file() {
            match sync_path(&path, false) {
                Ok(()) => synced.push(path),
                Err(VerifyError::Sync { source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
    }
    sync_path(dir, false)?;
    synced.push(dir.to_path_buf());
    Ok(())
}

/// `fsync` (or `syncfs`) through a read-only descriptor of `path`, as PostgreSQL's
/// `fsync_fname` does for files and directories alike.
fn sync_path(path: &Path, syncfs: bool) -> Result<(), VerifyError> {
    let error = |source| VerifyError::Sync {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(error)?;
    let rc = if syncfs {
        // SAFETY: a plain system call on a descriptor this function owns.
        unsafe { libc::syncfs(file.as_raw_fd()) }
    } else {
        // SAFETY: as above.
        unsafe { libc::fsync(file.as_raw_fd()) }
    };
    if rc != 0 {
        return Err(error(std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Sets `data_checksum_version` in `<pgdata>/global/pg_control` to `version` and its
/// "last modified" `time` to now (as PostgreSQL's `update_controlfile` does, so the file is
/// the one `pg_checksums` would write), recomputes the CRC-32C, writes the file in place (one write of the whole file, as PostgreSQL's
/// `update_controlfile`; the struct fits in one 512-byte sector, which a device writes
/// whole) and, with `sync`, fsyncs it. The file is re-read and checked first, so a file
/// another program changed since it was checked is parsed again, not overwritten blindly.
pub fn write_control_file(pgdata: &Path, version: u32, sync: bool) -> Result<(), VerifyError> {
    let path = pgdata.join("global").join("pg_control");
    let mut bytes = read_control_bytes(&path)?;
    ControlFile::parse(&bytes, &path)?;
    bytes[OFFSET_DATA_CHECKSUM_VERSION..OFFSET_DATA_CHECKSUM_VERSION + 4]
        .copy_from_slice(&version.to_le_bytes());
    // A clock before 1970 is not a reason to refuse: the time is only informative.
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    bytes[OFFSET_TIME..OFFSET_TIME + 8].copy_from_slice(&now_s.to_le_bytes());
    let crc = crc32c(&bytes[..OFFSET_CRC]);
    bytes[OFFSET_CRC..OFFSET_CRC + 4].copy_from_slice(&crc.to_le_bytes());
    let error = |source| VerifyError::ControlFileWrite {
        path: path.clone(),
        source,
    };
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .map_err(error)?;
    std::os::unix::fs::FileExt::write_all_at(&file, &bytes, 0).map_err(error)?;
    if sync {
        file.sync_all().map_err(error)?;
    }
    Ok(())
}

/// The steps of [`enable_checksums`] after the rewrite, reported as they start, so a caller
/// can print what `pg_checksums` prints between them.
#[derive(Debug)]
pub enum EnableStep<'a> {
    /// Every page is rewritten (nothing synced yet); the totals are final.
    Rewritten(&'a EnableTotals),
    /// The data files are about to be synced (not reported with `sync: None`).
    Syncing,
    /// `pg_control` is about to be updated.
    UpdatingControlFile,
}

/// What [`enable_checksums`] tells its caller while it runs. Every method does nothing by
/// default.
pub trait EnableObserver {
    /// A file is done (in walk order, after every file is rewritten), with the blocks
    /// rewritten in it.
    fn file_done(&mut self, file: &ClusterFile, blocks_written: u64) {
        let _ = (file, blocks_written);
    }
    /// Bytes read so far, now and then.
    fn progress(&mut self, bytes_done: u64) {
        let _ = bytes_done;
    }
    /// A step starts.
    fn step(&mut self, step: EnableStep<'_>) {
        let _ = step;
    }
}

/// An observer that wants to hear nothing.
impl EnableObserver for () {}

/// `pg_checksums --enable` on a cluster whose `pg_control` passed
/// [`ControlFile::check_for_enable`]: [`rewrite_checksums`] of `files` with `jobs` threads,
/// then (with `sync`) [`sync_data_directory`], and only then [`write_control_file`] with
/// checksum version 1. Any error stops the run before `pg_control` is written, so the
/// cluster keeps checksums off (see the module documentation for why that is safe).
pub fn enable_checksums(
    aio: &Aio,
    pgdata: &Path,
    files: &[ClusterFile],
    jobs: usize,
    sync: Option<SyncMethod>,
    observer: &mut dyn EnableObserver,
) -> Result<EnableTotals, VerifyError> {
    let observer = std::cell::RefCell::new(observer);
    let totals = rewrite_checksums(
        aio,
        files,
        jobs,
        |file, written| observer.borrow_mut().file_done(file, written),
        |bytes| observer.borrow_mut().progress(bytes),
    )?;
    let observer = observer.into_inner();
    observer.step(EnableStep::Rewritten(&totals));
    if let Some(method) = sync {
        observer.step(EnableStep::Syncing);
        sync_data_directory(pgdata, method)?;
    }
    observer.step(EnableStep::UpdatingControlFile);
    write_control_file(pgdata, PG_DATA_CHECKSUM_VERSION, sync.is_some())?;
    Ok(totals)
}
