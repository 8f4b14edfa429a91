//! # Which heap tuples a new snapshot of a stopped cluster sees
//!
//! ## Problem
//!
//! A heap page holds every version of every row that VACUUM has not yet removed: rows of
//! transactions that rolled back, rows of a transaction still open (or prepared) when the
//! server stopped, the old version of every updated row, deleted rows. Which of them a query
//! sees is decided per tuple by `HeapTupleSatisfiesMVCC` (`heapam_visibility.c`). Hint bits
//! (`HEAP_XMIN_COMMITTED`, `HEAP_XMAX_INVALID`, …) cache the outcome, but PostgreSQL sets
//! them lazily, on the first read after the transaction ended: a table written and never
//! read again before a clean shutdown has none, and its truth is in the transaction status
//! files — `pg_xact` (the commit log) and `pg_multixact` (row lockers and updaters sharing
//! one xmax). Believing hint bits alone counts every rolled-back insert, every deleted row
//! and both versions of every updated row.
//!
//! ## Mechanism
//!
//! For a cleanly shut-down cluster this module answers what a new MVCC snapshot sees after
//! a restart. Nothing is running then, so "in progress" means only: a transaction left
//! prepared (`PREPARE TRANSACTION`), and its subtransactions. Neither has committed in
//! `pg_xact`, and a transaction that was open at shutdown was aborted or never marked at all;
//! for a new snapshot all of these look the same — not committed — so one question decides
//! every case: *did this xid commit?* (`TransactionIdDidCommit`).
//!
//! ```text
//!  HeapTupleSatisfiesMVCC, for a cleanly stopped cluster           PostgreSQL's function
//!  ─────────────────────────────────────────────────────           ─────────────────────
//!  xmin  XMIN_COMMITTED (or FROZEN) set      → inserted             HeapTupleHeaderXminCommitted
//!        XMIN_INVALID set                    → not visible          HeapTupleHeaderXminInvalid
//!        MOVED_OFF: xvac committed           → not visible          (pre-9.0 VACUUM FULL)
//!        MOVED_IN:  xvac not committed       → not visible
//!        else pg_xact(xmin) committed?       → inserted, else not   TransactionIdDidCommit
//!  xmax  XMAX_INVALID set                    → visible
//!        lock only (LOCK_ONLY, or a pre-9.3  → visible              HEAP_XMAX_IS_LOCKED_ONLY
//!          EXCL_LOCK without IS_MULTI)
//!        IS_MULTI: the updater member of     → visible unless it    HeapTupleGetUpdateXid
//!          pg_multixact (none: lockers only)    committed
//!        XMAX_COMMITTED set                  → not visible
//!        else pg_xact(xmax) committed?       → not visible, else visible
//! ```
//!
//! `TransactionIdDidCommit` here: xids 1 (bootstrap) and 2 (frozen) committed, 0 (invalid —
//! a super-deleted speculative insertion) not; an xid at or past the checkpoint's `nextXid`
//! not (a new snapshot counts it as in progress); else the two status bits in `pg_xact`
//! (1 = committed; 0 in progress, 2 aborted, 3 sub-committed are all "not", since a
//! subtransaction's bits become committed only with its top-level transaction's). An xid
//! before the cluster's `oldestXid` whose `pg_xact` page VACUUM has already removed was
//! frozen by that VACUUM (it removes status only below every table's `relfrozenxid`): as an
//! xmin it reads as committed; as an xmax it cannot be judged, and is an error.
//!
//! A standby stopped in recovery has replayed WAL past its last checkpoint, so the
//! checkpoint's `nextXid` and `nextMulti` are not bounds there: only the status files decide,
//! and a multi whose end the offsets do not record is an error.
//!
//! MultiXacts (`GetMultiXactIdMembers`): the member list of multi `m` starts at
//! `offsets[m]` and ends where `offsets[m + 1]` starts (for the newest multi, at the
//! checkpoint's `nextMultiOffset`); a member slot holding xid 0 is the unused slot 0 of a
//! wrapped members area and is skipped. A member whose status is `NoKeyUpdate` or `Update`
//! is the updater. A multi before `oldestMulti` has no members any more (only lockers could
//! have been left, so the tuple is visible), one at or past `nextMulti` was never created
//! (corruption).
//!
//! TOAST chunks are read with `HeapTupleSatisfiesToast`: a chunk is valid unless its xmin is
//! marked invalid, is InvalidTransactionId, or was moved off — xmax is never consulted,
//! because a live row's value may sit in chunks whose deletion has not been vacuumed.
//!
//! ## Layout of the status files (PostgreSQL 18, 8 kB pages, 32 pages per segment file)
//!
//! ```text
//!  pg_xact/SSSS              2 bits per xid, 4 xids a byte, 32768 a page, 1048576 a segment
//!  pg_multixact/offsets/SSSS 4-byte member offset per multi, 2048 a page, 65536 a segment
//!  pg_multixact/members/SSSS groups of 20 bytes: 4 status bytes, then 4 member xids;
//!                            409 groups (1636 members) a page, 52352 members a segment
//! ```
//!
//! Segments are read whole when first needed (at most 256 kB each, through
//! [`crate::storage::read_small_file`]: a FIFO, a device or an oversized file at their path
//! is refused), shared by every thread of a scan and kept for the life of the
//! [`TransactionLog`]. Each thread asks through its own [`Visibility`], which remembers the
//! last xid and the last multi it resolved: a table written by a few large transactions
//! costs one comparison per tuple.
//!
//! A segment missing or too short where an xid's status is needed, a member list that is
//! impossible, a cluster not cleanly shut down: each is an error naming the file, the
//! transaction and the fix — never a guess, since a guess is a wrong row count.
//!
//! ## Worked example
//!
//! `insert` 100,000 rows (xid 750, committed), `checkpoint`, `update t set b = b + 1 where
//! a <= 50000` (xid 751), `delete from t where a > 90000` (xid 752), `begin; insert 1,000
//! rows; rollback` (xid 753), stop. No tuple of the last three carries a hint bit. The 50,000
//! old versions have xmax 751 → committed → not visible; the 50,000 new ones xmin 751 →
//! visible; the 10,000 deleted rows xmax 752 → not visible; the 1,000 rolled-back rows xmin
//! 753 → aborted → not visible. 90,000 rows remain, as PostgreSQL counts them.

mod multixact;
mod slru;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::page::heap::{HeapTupleHeader, HEAP_XMAX_EXCL_LOCK, HEAP_XMAX_LOCK_ONLY};
use crate::page::heap::{HEAP_HOT_UPDATED, HEAP_XMIN_COMMITTED, HEAP_XMIN_INVALID};
use crate::page::heap::{HEAP_MOVED_IN, HEAP_MOVED_OFF, HEAP_XMAX_IS_MULTI, HEAP_XMAX_KEYSHR_LOCK};
use crate::page::heap::{HEAP_XMAX_COMMITTED, HEAP_XMAX_INVALID};

pub use multixact::MultiXactStatus;
use slru::{Slru, SlruKind};

/// `FirstNormalTransactionId`: xids below it are special (0 invalid, 1 bootstrap, 2 frozen).
pub const FIRST_NORMAL_XID: u32 = 3;

pub use crate::page::control::XidHorizons;

/// Why a tuple's visibility cannot be decided. Every variant names the file and the fix.
#[derive(Debug, Clone, thiserror::Error)]
pub enum VisibilityError {
    /// A status file needed for an xid or a multi cannot be read, or does not reach it.
    #[error("the status of {subject} is needed to decide whether a row is visible, but \"{file}\" {problem}: the cluster's transaction status files are incomplete or damaged; start PostgreSQL on the cluster to see whether it reports the same file, and restore pg_xact/pg_multixact (or the cluster) from a backup if so")]
    StatusUnreadable {
        /// `transaction 1234` or `MultiXact 17`.
        subject: String,
        /// The status file, relative to the data directory.
        file: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A MultiXact's recorded members are impossible.
    #[error("MultiXact {multi} is corrupt in \"{file}\": {problem}; run VACUUM on the table with the server running (PostgreSQL will report the same), or restore the cluster from a backup")]
    MultiXactCorrupt {
        /// The multi.
        multi: u32,
        /// The file that holds the impossible value.
        file: String,
        /// What is impossible.
        problem: String,
    },
    /// No status files are available and the hint bits do not decide.
    #[error("the row's visibility depends on whether transaction {xid} committed, which only a cluster's pg_xact can tell, and these files come without one: read them with {} as part of a cluster", crate::config::Term::DataDirectory)]
    NoTransactionLog {
        /// The xid whose status was needed.
        xid: u32,
    },
}

/// `TransactionIdPrecedes` for normal xids and multis: modulo-2^32 order, as PostgreSQL
/// compares them (an xid is "before" another if it is less than 2^31 behind it).
pub fn xid_precedes(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// `HEAP_XMAX_IS_LOCKED_ONLY`: the xmax only locked the row. Besides `HEAP_XMAX_LOCK_ONLY`,
/// a tuple written before 9.3 (kept by `pg_upgrade`) marks a plain exclusive lock with
/// `HEAP_XMAX_EXCL_LOCK` alone.
pub fn xmax_is_locked_only(infomask: u16) -> bool {
    infomask & HEAP_XMAX_LOCK_ONLY != 0
        || infomask & (HEAP_XMAX_IS_MULTI | HEAP_XMAX_EXCL_LOCK | HEAP_XMAX_KEYSHR_LOCK)
            == HEAP_XMAX_EXCL_LOCK
}

/// `HeapTupleHeaderIsHotUpdated`: the tuple was HOT-updated and that update was not
/// known to abort (`heap_hot_search_buffer` follows the chain only then).
pub fn is_hot_updated(h: &HeapTupleHeader) -> bool {
    h.t_infomask2 & HEAP_HOT_UPDATED != 0
        && h.t_infomask & HEAP_XMAX_INVALID == 0
        && !(h.t_infomask & HEAP_XMIN_INVALID != 0 && h.t_infomask & HEAP_XMIN_COMMITTED == 0)
}

/// `HeapTupleSatisfiesToast`: whether a TOAST chunk is valid (see the module docs). Needs no
/// status file.
pub fn satisfies_toast(h: &HeapTupleHeader) -> bool {
    let mask = h.t_infomask;
    if mask & HEAP_XMIN_COMMITTED != 0 {
        return true;
    }
    if mask & HEAP_XMIN_INVALID != 0 {
        return false;
    }
    // Pre-9.0 VACUUM FULL: PostgreSQL asks the commit log about xvac here; a cluster
    // upgraded with such tuples still in TOAST tables has had them vacuumed by every
    // supported release, so only the moved-off marker is honoured.
    if mask & HEAP_MOVED_OFF != 0 {
        return false;
    }
    // A super-deleted speculative insertion leaves xmin InvalidTransactionId.
    h.t_xmin != 0
}

/// The status files of one stopped cluster, shared by every thread of every scan of it.
#[derive(Debug)]
pub struct TransactionLog {
    horizons: XidHorizons,
    clog: Slru,
    offsets: Slru,
    members: Slru,
}

impl TransactionLog {
    /// The status files of the cluster at `pgdata`, whose last checkpoint had `horizons`.
    /// Reads nothing until a status is needed.
    pub fn new(pgdata: &Path, horizons: XidHorizons) -> TransactionLog {
        TransactionLog {
            horizons,
            clog: Slru::new(pgdata, SlruKind::Xact),
            offsets: Slru::new(pgdata, SlruKind::MultiXactOffsets),
            members: Slru::new(pgdata, SlruKind::MultiXactMembers),
        }
    }

    /// The horizons this log judges by.
    pub fn horizons(&self) -> XidHorizons {
        self.horizons
    }

    /// The data directory whose status files these are.
    pub fn pgdata(&self) -> &Path {
        self.clog.pgdata()
    }
}

/// The outcome of a transaction, as a new snapshot sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Committed.
    Committed,
    /// Aborted, never finished, prepared, or not yet assigned.
    NotCommitted,
    /// Before `oldestXid`, and its status already removed by VACUUM.
    Truncated,
}

/// One thread's view of a cluster's transaction status: [`Visibility::satisfies_mvcc`]
/// decides a tuple, asking the shared [`TransactionLog`] only when hint bits do not.
#[derive(Debug, Clone)]
pub struct Visibility {
    log: Option<Arc<TransactionLog>>,
    /// The last xid resolved and its outcome.
    last_xid: Option<(u32, Outcome)>,
    /// The last multi resolved and its updater.
    last_multi: Option<(u32, Option<u32>)>,
}

impl Visibility {
    /// A view of `log`; `None` decides by hint bits alone and reports a tuple they do not
    /// decide as [`VisibilityError::NoTransactionLog`] (generated data sets, whose tuples
    /// are all hinted).
    pub fn new(log: Option<Arc<TransactionLog>>) -> Visibility {
        Visibility {
            log,
            last_xid: None,
            last_multi: None,
        }
    }

    /// The log this view asks, if any.
    pub fn log(&self) -> Option<&Arc<TransactionLog>> {
        self.log.as_ref()
    }

    /// Whether `xid` committed (`TransactionIdDidCommit` for a cleanly stopped cluster).
    fn outcome(&mut self, xid: u32) -> Result<Outcome, VisibilityError> {
        if xid < FIRST_NORMAL_XID {
            // 1 (bootstrap) and 2 (frozen) committed; 0 is no transaction at all.
            return Ok(if xid == 0 {
                Outcome::NotCommitted
            } else {
                Outcome::Committed
            });
        }
        if let Some((last, outcome)) = self.last_xid {
            if last == xid {
                return Ok(outcome);
            }
        }
        let Some(log) = &self.log else {
            return Err(VisibilityError::NoTransactionLog { xid });
        };
        let h = log.horizons;
        let outcome = if !h.in_recovery && !xid_precedes(xid, h.next_xid) {
            // Not yet assigned when the cluster stopped: a new snapshot's xmax is nextXid,
            // so this xid counts as in progress.
            Outcome::NotCommitted
        } else {
            match log.clog.xact_status(xid) {
                Ok(1) => Outcome::Committed,
                Ok(_) => Outcome::NotCommitted,
                Err(_) if xid_precedes(xid, h.oldest_xid) => Outcome::Truncated,
                Err(e) => return Err(e),
            }
        };
        self.last_xid = Some((xid, outcome));
        Ok(outcome)
    }

    /// `TransactionIdDidCommit(xid)` for an xmin: a truncated status reads as committed
    /// (frozen; see the module docs).
    fn xmin_committed(&mut self, xid: u32) -> Result<bool, VisibilityError> {
        Ok(self.outcome(xid)? != Outcome::NotCommitted)
    }

    /// `TransactionIdDidCommit(xid)` for an xmax or xvac: a truncated status is an error.
    fn committed(&mut self, xid: u32) -> Result<bool, VisibilityError> {
        match self.outcome(xid)? {
            Outcome::Committed => Ok(true),
            Outcome::NotCommitted => Ok(false),
            Outcome::Truncated => {
                let log = self.log.as_ref().expect("Truncated comes from a log");
                Err(log.clog.truncated_error(xid, log.horizons.oldest_xid))
            }
        }
    }

    /// The updater of multi `multi` (`MultiXactIdGetUpdateXid`), or `None` if it holds
    /// only lockers.
    pub fn multi_update_xid(&mut self, multi: u32) -> Result<Option<u32>, VisibilityError> {
        if let Some((last, updater)) = self.last_multi {
            if last == multi {
                return Ok(updater);
            }
        }
        let Some(log) = &self.log else {
            return Err(VisibilityError::NoTransactionLog { xid: multi });
        };
        let updater = multixact::update_xid(log, multi)?;
        self.last_multi = Some((multi, updater));
        Ok(updater)
    }

    /// `HeapTupleHeaderGetUpdateXid`: the xmax, except that a MultiXact xmax that is not
    /// lock-only is resolved to its updating member (0 if it has none). Like PostgreSQL's
    /// macro, a plain xmax is returned as it is, lock-only or not: the HOT-chain walk that
    /// uses it has already checked the tuple was HOT-updated.
    pub fn update_xid(&mut self, h: &HeapTupleHeader) -> Result<u32, VisibilityError> {
        let mask = h.t_infomask;
        if mask & HEAP_XMAX_INVALID == 0
            && mask & HEAP_XMAX_IS_MULTI != 0
            && mask & HEAP_XMAX_LOCK_ONLY == 0
        {
            return Ok(self.multi_update_xid(h.t_xmax)?.unwrap_or(0));
        }
        Ok(h.t_xmax)
    }

    /// `HeapTupleSatisfiesMVCC` for a new snapshot of a cleanly stopped cluster (the table
    /// in the module docs).
    pub fn satisfies_mvcc(&mut self, h: &HeapTupleHeader) -> Result<bool, VisibilityError> {
        let mask = h.t_infomask;
        // The common case first: hinted committed xmin and invalid xmax.
        if mask & (HEAP_XMIN_COMMITTED | HEAP_XMAX_INVALID)
            == HEAP_XMIN_COMMITTED | HEAP_XMAX_INVALID
        {
            return Ok(true);
        }
        if mask & HEAP_XMIN_COMMITTED == 0 {
            if mask & HEAP_XMIN_INVALID != 0 {
                return Ok(false);
            }
            if mask & HEAP_MOVED_OFF != 0 {
                // Moved away by a pre-9.0 VACUUM FULL: gone if that VACUUM committed.
                if self.committed(h.t_cid)? {
                    return Ok(false);
                }
            } else if mask & HEAP_MOVED_IN != 0 {
                // Moved here by a pre-9.0 VACUUM FULL: present only if it committed.
                if !self.committed(h.t_cid)? {
                    return Ok(false);
                }
            } else if !self.xmin_committed(h.t_xmin)? {
                return Ok(false);
            }
        }
        if mask & HEAP_XMAX_INVALID != 0 || xmax_is_locked_only(mask) {
            return Ok(true);
        }
        if mask & HEAP_XMAX_IS_MULTI != 0 {
            return Ok(match self.multi_update_xid(h.t_xmax)? {
                // Lockers only (PostgreSQL asserts an updater here; without one the tuple
                // stands, which is what its release builds answer too).
                None => true,
                Some(updater) => !self.committed(updater)?,
            });
        }
        if mask & HEAP_XMAX_COMMITTED != 0 {
            return Ok(false);
        }
        Ok(!self.committed(h.t_xmax)?)
    }
}

/// The display form of a status file path: `pg_xact/0000`.
fn status_file(dir: &str, segno: u32) -> String {
    format!("{dir}/{segno:04X}")
}

/// Where a data directory's status files are, for messages and reads.
fn status_dir(pgdata: &Path, dir: &str) -> PathBuf {
    pgdata.join(dir)
}

#[cfg(test)]
mod tests;
