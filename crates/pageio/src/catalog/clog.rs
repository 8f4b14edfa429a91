//! Transaction status from the commit log (`pg_xact`), for tuples without hint bits.
//!
//! After a clean shutdown nothing is in progress, but hint bits are set lazily by readers:
//! a catalog row inserted (or deleted) by a committed transaction and never read since
//! carries no `HEAP_XMIN_COMMITTED` (or `HEAP_XMAX_COMMITTED`). Believing only hint bits
//! would then show both the old and the new pg_class row of a table rewritten by `VACUUM
//! FULL` — two answers for one table. So the catalog reader asks `pg_xact`, as
//! `TransactionIdDidCommit` does:
//!
//! ```text
//!   2 bits per xid (0 in progress, 1 committed, 2 aborted, 3 sub-committed)
//!   4 xids per byte, 32768 per 8 kB page, 32 pages per segment file
//!   pg_xact/<segno as %04X>, segno = xid / 1048576
//! ```
//!
//! In progress or sub-committed after a clean shutdown means the transaction never
//! committed (a crash before the shutdown), which PostgreSQL also treats as aborted.
//! Special xids below `FirstNormalTransactionId` (3): 1 (bootstrap) and 2 (frozen) are
//! committed, 0 (invalid) is not. Segments are cached once read; a missing segment or one
//! too short for the xid is an error — the xid cannot be judged, and guessing could pick the
//! wrong catalog row.

use std::collections::HashMap;
use std::path::PathBuf;

use crate::config::BLCKSZ;

/// Xids per byte of the commit log (`CLOG_XACTS_PER_BYTE`).
const XACTS_PER_BYTE: u32 = 4;
/// Xids per commit-log page (`CLOG_XACTS_PER_PAGE`).
const XACTS_PER_PAGE: u32 = BLCKSZ as u32 * XACTS_PER_BYTE;
/// `SLRU_PAGES_PER_SEGMENT`.
const PAGES_PER_SEGMENT: u32 = 32;
/// Xids per segment file.
const XACTS_PER_SEGMENT: u32 = XACTS_PER_PAGE * PAGES_PER_SEGMENT;
/// `FirstNormalTransactionId`.
const FIRST_NORMAL_XID: u32 = 3;

/// What the commit log says about a transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XidStatus {
    /// Committed.
    Committed,
    /// Aborted, or never committed (in progress or sub-committed after a clean shutdown).
    NotCommitted,
}

/// A lazily read commit log.
#[derive(Debug)]
pub struct CommitLog {
    dir: PathBuf,
    segments: HashMap<u32, Vec<u8>>,
}

impl CommitLog {
    /// The commit log of the cluster at `pgdata`.
    pub fn new(pgdata: &std::path::Path) -> CommitLog {
        CommitLog {
            dir: pgdata.join("pg_xact"),
            segments: HashMap::new(),
        }
    }

    /// The status of `xid`, or why it cannot be known.
    pub fn status(&mut self, xid: u32) -> Result<XidStatus, String> {
        if xid < FIRST_NORMAL_XID {
            return Ok(if xid == 0 {
                XidStatus::NotCommitted
            } else {
                XidStatus::Committed
            });
        }
        let segno = xid / XACTS_PER_SEGMENT;
        let name = format!("{segno:04X}");
        if !self.segments.contains_key(&segno) {
            let path = self.dir.join(&name);
            let bytes = std::fs::read(&path)
                .map_err(|e| format!("the commit log segment \"pg_xact/{name}\" for transaction {xid} cannot be read ({e})"))?;
            self.segments.insert(segno, bytes);
        }
        let bytes = &self.segments[&segno];
        let byte_index = ((xid % XACTS_PER_SEGMENT) / XACTS_PER_BYTE) as usize;
        let Some(byte) = bytes.get(byte_index) else {
            return Err(format!(
                "the commit log segment \"pg_xact/{name}\" is {} bytes, too short to hold transaction {xid}",
                bytes.len()
            ));
        };
        let bits = (byte >> ((xid % XACTS_PER_BYTE) * 2)) & 0b11;
        Ok(if bits == 1 {
            XidStatus::Committed
        } else {
            XidStatus::NotCommitted
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_two_bit_statuses() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("pg_xact")).unwrap();
        let mut seg = vec![0u8; 4];
        // xid 4: committed (byte 1, bits 0-1); xid 5: aborted; xid 6: in progress.
        seg[1] = 0b0000_1001;
        std::fs::write(dir.path().join("pg_xact/0000"), &seg).unwrap();
        let mut log = CommitLog::new(dir.path());
        assert_eq!(log.status(2).unwrap(), XidStatus::Committed);
        assert_eq!(log.status(4).unwrap(), XidStatus::Committed);
        assert_eq!(log.status(5).unwrap(), XidStatus::NotCommitted);
        assert_eq!(log.status(6).unwrap(), XidStatus::NotCommitted);
        let e = log.status(100).unwrap_err();
        assert!(e.contains("pg_xact/0000") && e.contains("too short"), "{e}");
        let e = log.status(XACTS_PER_SEGMENT * 3).unwrap_err();
        assert!(e.contains("pg_xact/0003"), "{e}");
    }
}
