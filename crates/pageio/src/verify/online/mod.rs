//! # Checking the checksums of a running cluster, with no false alarm
//!
//! ## Problem
//!
//! `pg_checksums` and the offline check need the server stopped, because a running server
//! writes pages while we read them: an 8 kB page written over two 4 kB file-system blocks can
//! be read half old, half new (a torn read), and its checksum then fails although nothing is
//! damaged. A DBA with a large production cluster cannot stop it, so the check must tell a
//! page that is changing from a page that is damaged, and never call the first corrupt.
//!
//! ## Mechanism
//!
//! The rule is the one PostgreSQL's `pg_basebackup` (`verify_page_checksum` in
//! `basebackup.c`) and pgBackRest (its page checksum verification during a backup) apply:
//!
//! ```text
//!   pg_control (re-read until its CRC validates) ─► redo LSN R of the last checkpoint
//!   every page, read once through AIO (the offline checker in online mode):
//!     all-zero ─► new page, valid (PageIsVerified)
//!     checksum good ─► good
//!     checksum bad (or a zero header over data) ─► re-read it, up to REREADS times,
//!                                                   REREAD_DELAY apart:
//!        a re-read is good ─────────────────────► "re-read": good
//!        every re-read bad, some LSN ≥ R ───────► "skipped: modified during the check"
//!        every re-read bad, every LSN < R ──────► corrupt
//! ```
//!
//! Why the LSN tells: with data checksums on, every change of a page after the checkpoint
//! whose redo point is R — a WAL-logged change, or even a hint bit, which then logs a
//! full-page image — gives the page an LSN ≥ R. A page being written under us therefore
//! carries a new LSN in its new half, and after a crash it would be restored from WAL (a
//! full-page image at its first change after R), so its bytes on disk now do not matter. A
//! page that keeps failing with an old LSN has not been written since R: its bad bytes are
//! on disk, not in flight. R is read once, at the start: a newer checkpoint during the run
//! only makes R conservative.
//!
//! Relations the server never WAL-logs are left out, as `pg_basebackup` leaves them out:
//! the non-init forks of unlogged relations (those with an `_init` fork) and temporary
//! relations (`t<backend>_<node>`). Their pages change without an LSN, so the rule cannot
//! judge them, and they are reset at a crash anyway.
//!
//! Reads go through the AIO subsystem only, never through a mapping (the in-place path of
//! the offline check): the server truncates files (VACUUM, TRUNCATE, DROP), and a mapped
//! range that is truncated faults. Nothing is written, no advice is given to the kernel
//! about the server's files (its cache stays as it was), and no lock is taken: the check
//! only opens files read-only and reads them.
//!
//! Files change during the run: one gone when opened is counted as vanished, one that ends
//! before the size the walk saw as shrunk (its blocks up to the end are checked), and files
//! created after the walk are counted by a second walk at the end and reported as not
//! checked. None of these is an error.
//!
//! A file that ends in a partial block is different: the server writes and extends files in
//! whole blocks, so a partial block is either an extension caught half-copied (its size moves
//! on within microseconds) or a file cut mid-page. Its size is looked at again [`REREADS`]
//! times, [`REREAD_DELAY`] apart ([`stable_partial_tail`]); a size that stays put is reported
//! as damage (the file, the partial block, the bytes it has), and the run exits as for a
//! corrupt page. A file cut at a block boundary cannot be told from one the server truncated
//! (VACUUM does) without knowing how long the relation should be, so it is not reported.
//!
//! ## Bounds
//!
//! A failing page is re-read [`REREADS`] times, [`REREAD_DELAY`] apart, all failing pages of
//! a file in the same round: a file with failures costs at most `REREADS × REREAD_DELAY`
//! (100 ms) more, whatever their number. `pg_control` is read at most
//! [`crate::page::control::CONTROL_READ_ATTEMPTS`] times.
//!
//! ## What it cannot see
//!
//! A page damaged after the check started and rewritten by the server before it is read
//! looks good (the damage is gone from disk, as it would be from a backup). A page whose
//! LSN field itself is damaged to a value ≥ R is skipped as modified, not reported: the LSN
//! is the only witness the rule has. A page damaged in shared buffers and not yet written is
//! not on disk to be read.
//!
//! ## Worked example
//!
//! R = 0/3000028. Block 7 of `base/5/16384` fails on the first read; 25 ms later it reads
//! good (the server's write finished): re-read, good. Block 9 of `base/5/16390` fails four
//! more times with LSN 0/1A2B3C0 < R, each read the same bytes: corrupt, "5 of 5 reads
//! agreed". Block 2 of `base/5/16384.1` fails every time with LSN 0/3100000 ≥ R: skipped.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::checker::{check_files_in, check_page, CheckOptions, ChecksumFailure, Mode};
use super::walk::{walk_cluster_online, ClusterFile};
use super::VerifyError;
use crate::config::BLCKSZ;
use crate::page::control::{ControlFile, CONTROL_READ_ATTEMPTS, CONTROL_READ_DELAY};
use crate::storage::RELSEG_SIZE_BLOCKS;
use crate::Aio;

/// Re-reads of a page whose checksum failed before it is judged. A torn read lasts as long
/// as the server's one `pwrite` of the page (microseconds); four more reads 25 ms apart
/// outlast any write, so a page still failing with an old LSN is on disk that way.
pub const REREADS: u32 = 4;

/// Pause before each round of re-reads (see [`REREADS`]).
pub const REREAD_DELAY: Duration = Duration::from_millis(25);

/// Bytes of `postmaster.pid` read: its first line (the PID) is all we need; the file is a
/// few hundred bytes.
const POSTMASTER_PID_MAX_BYTES: u64 = 4096;

/// Byte offset of `pd_lsn` in the page header: `xlogid` (high 32 bits), then `xrecoff`.
const PD_LSN_OFFSET: usize = 0;

/// The LSN stored on a page (`PageGetLSN`).
pub fn page_lsn(page: &[u8; BLCKSZ]) -> u64 {
    let word = |at: usize| u32::from_le_bytes([page[at], page[at + 1], page[at + 2], page[at + 3]]);
    (u64::from(word(PD_LSN_OFFSET)) << 32) | u64::from(word(PD_LSN_OFFSET + 4))
}

/// An LSN as PostgreSQL prints it (`0/3000028`).
pub fn format_lsn(lsn: u64) -> String {
    format!("{:X}/{:X}", lsn >> 32, lsn & 0xFFFF_FFFF)
}

/// How an online run goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnlineOptions {
    /// Scanner threads (as [`CheckOptions::jobs`]).
    pub jobs: usize,
    /// Most bytes read per second over all scanners; `None`: as fast as the device allows.
    pub max_rate_bytes_per_s: Option<u64>,
    /// The redo LSN pages are judged against (see the module docs).
    pub redo_lsn: u64,
    /// Only the relation with this filenode.
    pub filenode: Option<u32>,
}

/// A page every read of which failed with an old LSN: corrupt on disk.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct OnlineFailure {
    /// Block number within the file.
    pub block: u32,
    /// Checksum computed on the last read.
    pub calculated: u16,
    /// Checksum stored on the last read.
    pub stored: u16,
    /// The page's LSN on the last read (older than the redo LSN).
    pub page_lsn: u64,
    /// Reads of the page (the first and the re-reads).
    pub reads: u32,
    /// Of those, the reads whose bytes were identical to the last.
    pub reads_agreed: u32,
}

/// What the online check found in one file.
#[derive(Debug, Clone, Default)]
pub struct OnlineFileOutcome {
    /// Blocks read in full.
    pub blocks_scanned: u64,
    /// Corrupt pages, by block.
    pub corrupt: Vec<OnlineFailure>,
    /// Pages that failed and then read good.
    pub pages_reread: u64,
    /// Pages that kept failing with an LSN at or past the redo LSN: being written.
    pub pages_skipped: u64,
    /// The file was gone when opened or re-read.
    pub vanished: bool,
    /// The file ended before the size the walk saw.
    pub shrunk: bool,
    /// The file ends in a partial block that stayed the same over every re-check: it was
    /// cut mid-page, which no write of the server does (see [`stable_partial_tail`]).
    pub partial_tail: Option<PartialTail>,
}

/// A file that ends in a partial block and kept that size: truncated mid-page.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PartialTail {
    /// The partial block's number within the file.
    pub block: u32,
    /// The bytes of it that exist (less than a block).
    pub bytes: u64,
    /// The file's size, the same at every check.
    pub size_bytes: u64,
}

/// Totals of an online run.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct OnlineTotals {
    /// Files read (vanished ones excluded).
    pub files_scanned: u64,
    /// Blocks read in full.
    pub blocks_scanned: u64,
    /// Pages corrupt on disk.
    pub bad_checksums: u64,
    /// Pages that failed once and read good on a re-read.
    pub pages_reread: u64,
    /// Pages skipped as modified during the check.
    pub pages_skipped: u64,
    /// Files gone before they could be read (during the walk or after it).
    pub files_vanished: u64,
    /// Files shorter than the walk saw them.
    pub files_shrunk: u64,
    /// Files ending in a partial block that did not change over the re-checks: truncated
    /// mid-page, reported as damage.
    pub files_partial_block: u64,
    /// Files created after the walk, found by a second walk: not checked.
    pub files_new: u64,
    /// Files of unlogged and temporary relations, left out (see the module docs).
    pub files_unlogged_skipped: u64,
    /// Bytes read.
    pub bytes_read: u64,
    /// The redo LSN the pages were judged against.
    pub redo_lsn: u64,
}

/// One read of a page by a [`PageSource`].
#[derive(Debug)]
pub enum PageRead {
    /// The page's bytes.
    Page(Box<[u8; BLCKSZ]>),
    /// The file is gone.
    Vanished,
    /// The file ends before the page.
    PastEnd,
}

/// Where re-reads come from: the file on disk, or a scripted source in tests.
pub trait PageSource {
    /// Reads block `block` of the file.
    fn read_page(&mut self, block: u32) -> Result<PageRead, std::io::Error>;
}

/// Re-reads of a relation file, opened read-only once.
pub struct FileSource {
    file: Option<std::fs::File>,
}

impl FileSource {
    /// Opens `path` read-only; a file that is gone reads as [`PageRead::Vanished`].
    pub fn open(path: &Path) -> Result<FileSource, std::io::Error> {
        match std::fs::File::open(path) {
            Ok(file) => Ok(FileSource { file: Some(file) }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(FileSource { file: None }),
            Err(e) => Err(e),
        }
    }
}

impl PageSource for FileSource {
    fn read_page(&mut self, block: u32) -> Result<PageRead, std::io::Error> {
        let Some(file) = &self.file else {
            return Ok(PageRead::Vanished);
        };
        let mut page = Box::new([0u8; BLCKSZ]);
        let offset = u64::from(block) * BLCKSZ as u64;
        match file.read_exact_at(&mut page[..], offset) {
            Ok(()) => Ok(PageRead::Page(page)),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(PageRead::PastEnd),
            Err(e) => Err(e),
        }
    }
}

/// The verdict on a page whose first read failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// A re-read was good.
    ReRead,
    /// Every re-read failed, at least one with an LSN at or past the redo LSN.
    Modified,
    /// Every re-read failed with an LSN older than the redo LSN.
    Corrupt(OnlineFailure),
    /// The file went away.
    Vanished,
    /// The file no longer reaches the page.
    Shrunk,
}

/// The state of one failing page across re-reads.
struct Pending {
    first: ChecksumFailure,
    last: Option<Box<[u8; BLCKSZ]>>,
    last_failure: Option<ChecksumFailure>,
    reads: u32,
    reads_agreed: u32,
    saw_new_lsn: bool,
}

/// Judges the pages of one file whose first read failed (`failures`, from the first pass):
/// re-reads each up to `rereads` times, `delay` apart, and applies the rule of the module
/// docs against `redo_lsn`. `seg_base` is the relation block number of the file's block 0.
/// Returns one verdict per failure, in the same order.
pub fn recheck_pages(
    source: &mut dyn PageSource,
    failures: &[ChecksumFailure],
    seg_base: u32,
    redo_lsn: u64,
    rereads: u32,
    delay: Duration,
) -> Result<Vec<Verdict>, std::io::Error> {
    let mut verdicts: Vec<Option<Verdict>> = vec![None; failures.len()];
    let mut pending: Vec<Pending> = failures
        .iter()
        .map(|f| Pending {
            first: f.clone(),
            last: None,
            last_failure: None,
            reads: 1,
            reads_agreed: 1,
            saw_new_lsn: false,
        })
        .collect();
    for _round in 0..rereads {
        if verdicts.iter().all(Option::is_some) {
            break;
        }
        std::thread::sleep(delay);
        for (i, p) in pending.iter_mut().enumerate() {
            if verdicts[i].is_some() {
                continue;
            }
            let page = match source.read_page(p.first.block)? {
                PageRead::Page(page) => page,
                PageRead::Vanished => {
                    verdicts[i] = Some(Verdict::Vanished);
                    continue;
                }
                PageRead::PastEnd => {
                    verdicts[i] = Some(Verdict::Shrunk);
                    continue;
                }
            };
            p.reads += 1;
            match check_page(&page, u64::from(p.first.block), seg_base, true) {
                None => verdicts[i] = Some(Verdict::ReRead),
                Some(failure) => {
                    p.saw_new_lsn |= page_lsn(&page) >= redo_lsn;
                    p.reads_agreed = match &p.last {
                        Some(last) if **last == *page => p.reads_agreed + 1,
                        // The first read's bytes are not kept: it agrees when its
                        // checksums were the same.
                        None if failure.calculated == p.first.calculated
                            && failure.stored == p.first.stored =>
                        {
                            2
                        }
                        _ => 1,
                    };
                    p.last = Some(page);
                    p.last_failure = Some(failure);
                }
            }
        }
    }
    Ok(verdicts
        .into_iter()
        .zip(pending)
        .map(|(verdict, p)| verdict.unwrap_or_else(|| judge(p, redo_lsn)))
        .collect())
}

/// The verdict on a page every re-read of which failed.
fn judge(p: Pending, redo_lsn: u64) -> Verdict {
    let (Some(page), Some(failure)) = (p.last, p.last_failure) else {
        // No re-read was made (rereads = 0): without a second read a torn page cannot be
        // told from a damaged one, so it is not called corrupt.
        return Verdict::Modified;
    };
    let lsn = page_lsn(&page);
    if p.saw_new_lsn || lsn >= redo_lsn {
        return Verdict::Modified;
    }
    Verdict::Corrupt(OnlineFailure {
        block: failure.block,
        calculated: failure.calculated,
        stored: failure.stored,
        page_lsn: lsn,
        reads: p.reads,
        reads_agreed: p.reads_agreed,
    })
}

/// Whether a postmaster runs for `pgdata`: `postmaster.pid` names a process that exists.
/// Returns its PID, or `None` when there is no file or its process is gone.
pub fn running_postmaster(pgdata: &Path) -> Option<i32> {
    let bytes =
        crate::storage::read_small_file(&pgdata.join("postmaster.pid"), POSTMASTER_PID_MAX_BYTES)
            .ok()?;
    let first = bytes.split(|&b| b == b'\n').next()?;
    let pid: i32 = std::str::from_utf8(first).ok()?.trim().parse().ok()?;
    if pid <= 0 {
        return None;
    }
    // SAFETY: kill with signal 0 sends nothing; it only asks whether the process exists.
    let r = unsafe { libc::kill(pid, 0) };
    let alive = r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    alive.then_some(pid)
}

/// The start of an online check: a postmaster must run for `pgdata` (else the check refuses,
/// naming the offline check), and `pg_control`, read until its CRC validates, must show this
/// layout with checksums on. Returns it; its redo LSN is where pages are judged from.
pub fn start_online_check(pgdata: &Path) -> Result<ControlFile, VerifyError> {
    if running_postmaster(pgdata).is_none() {
        return Err(VerifyError::NotRunning {
            pgdata: pgdata.to_path_buf(),
        });
    }
    let control = ControlFile::read_consistent(pgdata, CONTROL_READ_ATTEMPTS, CONTROL_READ_DELAY)?;
    control.check_for_online_verify()?;
    Ok(control)
}

/// Whether a relation file name is a temporary relation's (`t<backend>_<node>…`).
fn is_temp_relation(name: &[u8]) -> bool {
    let Some(rest) = name.strip_prefix(b"t") else {
        return false;
    };
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    digits > 0 && rest.get(digits) == Some(&b'_')
}

/// Leaves out the files of relations the server does not WAL-log (see the module docs);
/// returns how many were left out.
fn drop_unlogged(files: &mut Vec<ClusterFile>) -> u64 {
    let node_of = |f: &ClusterFile| -> (PathBuf, Vec<u8>) {
        let name = f.path.file_name().map(OsStr::as_bytes).unwrap_or_default();
        let node: Vec<u8> = name
            .iter()
            .take_while(|&&b| b != b'_' && b != b'.')
            .copied()
            .collect();
        (
            f.path.parent().map(Path::to_path_buf).unwrap_or_default(),
            node,
        )
    };
    let unlogged: HashSet<(PathBuf, Vec<u8>)> = files
        .iter()
        .filter(|f| {
            f.path
                .file_name()
                .is_some_and(|n| n.as_bytes().ends_with(b"_init"))
        })
        .map(node_of)
        .collect();
    let before = files.len();
    files.retain(|f| {
        let name = f.path.file_name().map(OsStr::as_bytes).unwrap_or_default();
        let init_fork = name.ends_with(b"_init");
        !is_temp_relation(name) && (init_fork || !unlogged.contains(&node_of(f)))
    });
    (before - files.len()) as u64
}

/// Checks every data file of the running cluster at `pgdata` by the rule of the module
/// docs. `on_file` is called once per file, in walk order, with what was found;
/// `on_progress` with the bytes read so far. Never writes.
pub fn check_cluster_online(
    aio: &Aio,
    pgdata: &Path,
    options: &OnlineOptions,
    mut on_file: impl FnMut(&ClusterFile, &OnlineFileOutcome),
    on_progress: impl FnMut(u64),
) -> Result<OnlineTotals, VerifyError> {
    let (mut files, vanished_in_walk) = walk_cluster_online(pgdata.as_os_str(), options.filenode)?;
    let mut totals = OnlineTotals {
        redo_lsn: options.redo_lsn,
        files_vanished: vanished_in_walk,
        files_unlogged_skipped: drop_unlogged(&mut files),
        ..OnlineTotals::default()
    };
    let walked: HashSet<PathBuf> = files.iter().map(|f| f.path.clone()).collect();
    let check_options = CheckOptions {
        jobs: options.jobs,
        mapped_reads: false,
    };
    let mode = Mode {
        online: true,
        max_rate_bytes_per_s: options.max_rate_bytes_per_s,
    };
    let mut recheck_error = None;
    let first_pass = check_files_in(
        aio,
        files,
        &check_options,
        mode,
        |file, outcome| {
            if recheck_error.is_some() {
                return;
            }
            match judge_file(file, outcome, options.redo_lsn) {
                Ok(judged) => {
                    add_file(&mut totals, &judged);
                    on_file(file, &judged);
                }
                Err(e) => recheck_error = Some(e),
            }
        },
        on_progress,
    )?;
    if let Some(e) = recheck_error {
        return Err(e);
    }
    totals.bytes_read = first_pass.bytes_read;
    // Files created during the run: found by walking again, reported, not checked.
    let (mut after, _) = walk_cluster_online(pgdata.as_os_str(), options.filenode)?;
    drop_unlogged(&mut after);
    totals.files_new = after.iter().filter(|f| !walked.contains(&f.path)).count() as u64;
    Ok(totals)
}

/// Adds one file's outcome to the totals.
fn add_file(totals: &mut OnlineTotals, judged: &OnlineFileOutcome) {
    if judged.vanished {
        totals.files_vanished += 1;
    } else {
        totals.files_scanned += 1;
    }
    totals.files_shrunk += u64::from(judged.shrunk && !judged.vanished);
    totals.files_partial_block += u64::from(judged.partial_tail.is_some());
    totals.blocks_scanned += judged.blocks_scanned;
    totals.bad_checksums += judged.corrupt.len() as u64;
    totals.pages_reread += judged.pages_reread;
    totals.pages_skipped += judged.pages_skipped;
}

/// Applies the rule to the failures of one file's first pass.
fn judge_file(
    file: &ClusterFile,
    outcome: &super::FileOutcome,
    redo_lsn: u64,
) -> Result<OnlineFileOutcome, VerifyError> {
    let mut judged = OnlineFileOutcome {
        blocks_scanned: outcome.blocks_scanned,
        vanished: outcome.vanished,
        shrunk: outcome.shrunk,
        ..OnlineFileOutcome::default()
    };
    if outcome.error.is_none()
        && !outcome.vanished
        && !file.size_bytes.is_multiple_of(BLCKSZ as u64)
    {
        judged.partial_tail =
            stable_partial_tail(&file.path, REREADS, REREAD_DELAY).map_err(|source| {
                VerifyError::ReadFailed {
                    path: file.display.to_string(),
                    block: file.size_bytes / BLCKSZ as u64,
                    source,
                }
            })?;
    }
    // A file with an error (a read error other than a vanished or shrunk file) ends the run:
    // the checker returns that error once this file is reported.
    if outcome.failures.is_empty() || outcome.error.is_some() {
        return Ok(judged);
    }
    let read_failed = |source: std::io::Error| VerifyError::ReadFailed {
        path: file.display.to_string(),
        block: u64::from(outcome.failures[0].block),
        source,
    };
    let mut source = FileSource::open(&file.path).map_err(read_failed)?;
    let seg_base = file.segno.wrapping_mul(RELSEG_SIZE_BLOCKS);
    let verdicts = recheck_pages(
        &mut source,
        &outcome.failures,
        seg_base,
        redo_lsn,
        REREADS,
        REREAD_DELAY,
    )
    .map_err(read_failed)?;
    for verdict in verdicts {
        match verdict {
            Verdict::ReRead => judged.pages_reread += 1,
            Verdict::Modified => judged.pages_skipped += 1,
            Verdict::Corrupt(failure) => judged.corrupt.push(failure),
            Verdict::Vanished => judged.vanished = true,
            Verdict::Shrunk => judged.shrunk = true,
        }
    }
    Ok(judged)
}

/// Whether the file at `path` ends in a partial block that stays put: its size is looked at
/// `checks` more times, `delay` apart. The server writes and extends relation files in whole
/// blocks, so a partial block is either an extension caught half-copied into the page cache
/// (gone at the next look: the size moves on to a whole block) or a file cut mid-page
/// (truncated by something other than PostgreSQL, a crash of the file system, a copy that
/// stopped short). `None` when the file is gone, reaches a whole block, or changes size.
pub fn stable_partial_tail(
    path: &Path,
    checks: u32,
    delay: Duration,
) -> Result<Option<PartialTail>, std::io::Error> {
    let size_now = || match std::fs::metadata(path) {
        Ok(meta) => Ok(Some(meta.len())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    };
    let block = BLCKSZ as u64;
    let Some(size_bytes) = size_now()?.filter(|size| !size.is_multiple_of(block)) else {
        return Ok(None);
    };
    for _ in 0..checks {
        std::thread::sleep(delay);
        if size_now()? != Some(size_bytes) {
            return Ok(None);
        }
    }
    Ok(Some(PartialTail {
        block: u32::try_from(size_bytes / block).unwrap_or(u32::MAX),
        bytes: size_bytes % block,
        size_bytes,
    }))
}

#[cfg(test)]
mod tests;
