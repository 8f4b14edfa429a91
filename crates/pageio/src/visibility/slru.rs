//! The simple-LRU files behind transaction status (`slru.c`'s on-disk side): a directory of
//! segment files named by the hexadecimal segment number (`%04X` in PostgreSQL 18), each of
//! at most 32 pages of 8 kB. A segment is read whole the first time one of its pages is
//! needed and kept, shared between threads, for the life of the [`super::TransactionLog`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use super::{status_dir, status_file, VisibilityError};
use crate::config::BLCKSZ;
use crate::storage::{read_small_file, SmallFileError};

/// `SLRU_PAGES_PER_SEGMENT`.
pub const PAGES_PER_SEGMENT: u32 = 32;
/// The largest segment file: 32 pages. A larger file is not a status segment.
const SEGMENT_MAX_BYTES: u64 = PAGES_PER_SEGMENT as u64 * BLCKSZ as u64;

/// Xids per byte of the commit log (`CLOG_XACTS_PER_BYTE`: 2 status bits each).
const CLOG_XACTS_PER_BYTE: u32 = 4;
/// Xids per commit-log page (`CLOG_XACTS_PER_PAGE`).
const CLOG_XACTS_PER_PAGE: u32 = BLCKSZ as u32 * CLOG_XACTS_PER_BYTE;

/// Which status files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlruKind {
    /// `pg_xact`: commit status, 2 bits per xid.
    Xact,
    /// `pg_multixact/offsets`: where each multi's members start.
    MultiXactOffsets,
    /// `pg_multixact/members`: member xids and their lock modes.
    MultiXactMembers,
}

impl SlruKind {
    fn dir(self) -> &'static str {
        match self {
            SlruKind::Xact => "pg_xact",
            SlruKind::MultiXactOffsets => "pg_multixact/offsets",
            SlruKind::MultiXactMembers => "pg_multixact/members",
        }
    }
}

/// One status directory and the segments read from it so far.
#[derive(Debug)]
pub struct Slru {
    pgdata: PathBuf,
    kind: SlruKind,
    dir: PathBuf,
    /// Segment number → its bytes. Read-mostly: a lock per lookup is cheap next to a
    /// tuple's work, and each thread's `Visibility` remembers its last answer anyway.
    segments: RwLock<HashMap<u32, Arc<[u8]>>>,
}

impl Slru {
    /// The `kind` status files of the cluster at `pgdata`.
    pub fn new(pgdata: &Path, kind: SlruKind) -> Slru {
        Slru {
            pgdata: pgdata.to_path_buf(),
            kind,
            dir: status_dir(pgdata, kind.dir()),
            segments: RwLock::new(HashMap::new()),
        }
    }

    /// The data directory.
    pub fn pgdata(&self) -> &Path {
        &self.pgdata
    }

    /// The display name of segment `segno`.
    pub fn file(&self, segno: u32) -> String {
        status_file(self.kind.dir(), segno)
    }

    /// The bytes of segment `segno`, read on first use. `subject` names what was looked up.
    fn segment(
        &self,
        segno: u32,
        subject: &dyn Fn() -> String,
    ) -> Result<Arc<[u8]>, VisibilityError> {
        if let Some(s) = self
            .segments
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&segno)
        {
            return Ok(s.clone());
        }
        let path = self.dir.join(format!("{segno:04X}"));
        let bytes: Arc<[u8]> = read_small_file(&path, SEGMENT_MAX_BYTES)
            .map_err(|e| VisibilityError::StatusUnreadable {
                subject: subject(),
                file: self.file(segno),
                problem: match e {
                    SmallFileError::Missing => "does not exist".into(),
                    SmallFileError::Io(e) => format!("cannot be read ({e})"),
                    other => format!("cannot be read: {other}"),
                },
            })?
            .into();
        self.segments
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(segno, bytes.clone());
        Ok(bytes)
    }

    /// The `len` bytes at byte `offset` of page `pageno` (counted from the directory's
    /// first segment), or an error saying the segment is too short.
    pub fn bytes_at<const N: usize>(
        &self,
        pageno: u32,
        offset: usize,
        subject: &dyn Fn() -> String,
    ) -> Result<[u8; N], VisibilityError> {
        let segno = pageno / PAGES_PER_SEGMENT;
        let seg = self.segment(segno, subject)?;
        let at = (pageno % PAGES_PER_SEGMENT) as usize * BLCKSZ + offset;
        seg.get(at..at + N)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| VisibilityError::StatusUnreadable {
                subject: subject(),
                file: self.file(segno),
                problem: format!(
                    "is {} bytes, too short to hold page {} of the segment",
                    seg.len(),
                    pageno % PAGES_PER_SEGMENT
                ),
            })
    }

    /// The two commit-status bits of `xid` (only for [`SlruKind::Xact`]).
    pub fn xact_status(&self, xid: u32) -> Result<u8, VisibilityError> {
        debug_assert_eq!(self.kind, SlruKind::Xact);
        let pageno = xid / CLOG_XACTS_PER_PAGE;
        let byte = ((xid % CLOG_XACTS_PER_PAGE) / CLOG_XACTS_PER_BYTE) as usize;
        let [b] = self.bytes_at::<1>(pageno, byte, &|| format!("transaction {xid}"))?;
        Ok((b >> ((xid % CLOG_XACTS_PER_BYTE) * 2)) & 0b11)
    }

    /// The error for an xmax whose status VACUUM already removed.
    pub fn truncated_error(&self, xid: u32, oldest_xid: u32) -> VisibilityError {
        let pageno = xid / CLOG_XACTS_PER_PAGE;
        VisibilityError::StatusUnreadable {
            subject: format!("transaction {xid}"),
            file: self.file(pageno / PAGES_PER_SEGMENT),
            problem: format!(
                "no longer holds it: the xid is older than the cluster's oldest xid {oldest_xid}, whose status VACUUM removes only after freezing every row that carries it, so a row deleted by it cannot still be on disk"
            ),
        }
    }
}
