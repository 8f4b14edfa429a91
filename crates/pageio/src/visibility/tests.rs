//! The visibility rules, one hand-built case each, against status files written here.

use super::*;
use crate::page::heap::HEAP_XMIN_FROZEN;
use crate::page::ItemPointer;

/// Commit-log bits: 0 in progress, 1 committed, 2 aborted, 3 sub-committed.
const IN_PROGRESS: u8 = 0;
const COMMITTED: u8 = 1;
const ABORTED: u8 = 2;
const SUB_COMMITTED: u8 = 3;

/// A cluster directory with status files built by hand.
struct Cluster {
    dir: tempfile::TempDir,
    clog: Vec<u8>,
    offsets: Vec<u8>,
    members: Vec<u8>,
    horizons: XidHorizons,
}

impl Cluster {
    fn new() -> Cluster {
        Cluster {
            dir: tempfile::tempdir().unwrap(),
            clog: vec![0; 8192],
            offsets: vec![0; 8192],
            members: vec![0; 8192],
            horizons: XidHorizons {
                next_xid: 1000,
                next_xid_epoch: 0,
                oldest_xid: 3,
                next_multi: 1,
                next_multi_offset: 1,
                oldest_multi: 1,
                in_recovery: false,
            },
        }
    }

    fn set_xid(&mut self, xid: u32, bits: u8) {
        let byte = &mut self.clog[(xid / 4) as usize];
        let shift = (xid % 4) * 2;
        *byte = (*byte & !(0b11 << shift)) | (bits << shift);
    }

    /// Records a new multi with `members` (xid, status) and returns its id.
    fn add_multi(&mut self, members: &[(u32, u8)]) -> u32 {
        let multi = self.horizons.next_multi;
        let start = self.horizons.next_multi_offset;
        self.offsets[multi as usize * 4..][..4].copy_from_slice(&start.to_le_bytes());
        for (i, &(xid, status)) in members.iter().enumerate() {
            let o = start as usize + i;
            let group = (o / 4) * 20;
            self.members[group + o % 4] = status;
            self.members[group + 4 + (o % 4) * 4..][..4].copy_from_slice(&xid.to_le_bytes());
        }
        self.horizons.next_multi += 1;
        self.horizons.next_multi_offset += members.len() as u32;
        multi
    }

    fn log(&self) -> Arc<TransactionLog> {
        let p = self.dir.path();
        std::fs::create_dir_all(p.join("pg_xact")).unwrap();
        std::fs::create_dir_all(p.join("pg_multixact/offsets")).unwrap();
        std::fs::create_dir_all(p.join("pg_multixact/members")).unwrap();
        std::fs::write(p.join("pg_xact/0000"), &self.clog).unwrap();
        std::fs::write(p.join("pg_multixact/offsets/0000"), &self.offsets).unwrap();
        std::fs::write(p.join("pg_multixact/members/0000"), &self.members).unwrap();
        Arc::new(TransactionLog::new(p, self.horizons))
    }
}

fn tuple(xmin: u32, xmax: u32, infomask: u16) -> HeapTupleHeader {
    HeapTupleHeader {
        t_xmin: xmin,
        t_xmax: xmax,
        t_cid: 0,
        t_ctid: ItemPointer {
            block: 0,
            offset: 1,
        },
        t_infomask2: 2,
        t_infomask: infomask,
        t_hoff: 24,
    }
}

#[test]
fn the_rules_of_heap_tuple_satisfies_mvcc() {
    let mut c = Cluster::new();
    let (committed, aborted, crashed, sub) = (500, 501, 502, 503);
    c.set_xid(committed, COMMITTED);
    c.set_xid(aborted, ABORTED);
    c.set_xid(crashed, IN_PROGRESS);
    c.set_xid(sub, SUB_COMMITTED);
    let (locker_a, locker_b, updater_c, updater_a) = (600, 601, 602, 603);
    c.set_xid(locker_a, COMMITTED);
    c.set_xid(locker_b, COMMITTED);
    c.set_xid(updater_c, COMMITTED);
    c.set_xid(updater_a, ABORTED);
    // FOR SHARE by two transactions: lockers only.
    let lockers = c.add_multi(&[(locker_a, 1), (locker_b, 1)]);
    // FOR SHARE, then an update in a subtransaction of the same transaction (committed).
    let locked_then_updated = c.add_multi(&[(locker_a, 1), (updater_c, 4)]);
    // A locker and an updater that rolled back.
    let update_aborted = c.add_multi(&[(locker_b, 0), (updater_a, 5)]);
    let log = c.log();
    let mut v = Visibility::new(Some(log));

    let multi = HEAP_XMAX_IS_MULTI;
    let cases: &[(&str, HeapTupleHeader, bool)] = &[
        (
            "hinted insert",
            tuple(committed, 0, HEAP_XMIN_COMMITTED | HEAP_XMAX_INVALID),
            true,
        ),
        (
            "frozen",
            tuple(7, 0, HEAP_XMIN_FROZEN | HEAP_XMAX_INVALID),
            true,
        ),
        ("insert committed, no hint", tuple(committed, 0, 0), true),
        ("insert aborted, no hint", tuple(aborted, 0, 0), false),
        (
            "insert never finished (crash, or open at shutdown)",
            tuple(crashed, 0, 0),
            false,
        ),
        (
            "insert sub-committed, parent never committed",
            tuple(sub, 0, 0),
            false,
        ),
        (
            "insert hinted invalid",
            tuple(committed, 0, HEAP_XMIN_INVALID),
            false,
        ),
        (
            "insert by an xid not yet assigned",
            tuple(5000, 0, 0),
            false,
        ),
        ("super-deleted speculative insertion", tuple(0, 0, 0), false),
        ("bootstrap xid", tuple(1, 0, 0), true),
        (
            "deleted, committed, no hint",
            tuple(committed, committed, 0),
            false,
        ),
        (
            "deleted, hinted committed",
            tuple(committed, committed, HEAP_XMAX_COMMITTED),
            false,
        ),
        ("delete aborted", tuple(committed, aborted, 0), true),
        ("delete never finished", tuple(committed, crashed, 0), true),
        (
            "delete hinted invalid",
            tuple(committed, committed, HEAP_XMAX_INVALID),
            true,
        ),
        (
            "xmax only locked",
            tuple(committed, committed, HEAP_XMAX_LOCK_ONLY),
            true,
        ),
        (
            "pre-9.3 exclusive lock",
            tuple(committed, committed, HEAP_XMAX_EXCL_LOCK),
            true,
        ),
        (
            "key-share lock",
            tuple(
                committed,
                committed,
                HEAP_XMAX_KEYSHR_LOCK | HEAP_XMAX_LOCK_ONLY,
            ),
            true,
        ),
        (
            "multi of lockers",
            tuple(committed, lockers, multi | HEAP_XMAX_LOCK_ONLY),
            true,
        ),
        (
            "multi of lockers, no lock-only bit",
            tuple(committed, lockers, multi),
            true,
        ),
        (
            "multi: locked, then updated in a subtransaction",
            tuple(committed, locked_then_updated, multi),
            false,
        ),
        (
            "multi whose updater aborted",
            tuple(committed, update_aborted, multi),
            true,
        ),
        (
            "deleted by its own inserting transaction",
            tuple(committed, committed, 0),
            false,
        ),
        (
            "inserted by an aborted transaction, deleted by a committed one",
            tuple(aborted, committed, 0),
            false,
        ),
        (
            "xmin invalid wins over a committed xmax",
            tuple(aborted, committed, HEAP_XMIN_INVALID),
            false,
        ),
    ];
    for (what, h, want) in cases {
        assert_eq!(v.satisfies_mvcc(h).unwrap(), *want, "{what}");
    }
    // A multi older than oldestMulti has no members left: lockers only.
    let mut old = Cluster::new();
    old.horizons.oldest_multi = 10;
    old.horizons.next_multi = 12;
    old.set_xid(committed, COMMITTED);
    let mut ov = Visibility::new(Some(old.log()));
    assert!(ov.satisfies_mvcc(&tuple(committed, 5, multi)).unwrap());
    // The updater is what an update chain's next xmin must match.
    assert_eq!(
        v.update_xid(&tuple(committed, locked_then_updated, multi))
            .unwrap(),
        updater_c
    );
    assert_eq!(v.update_xid(&tuple(committed, lockers, multi)).unwrap(), 0);
    assert_eq!(
        v.update_xid(&tuple(committed, 77, HEAP_XMAX_LOCK_ONLY))
            .unwrap(),
        77
    );
    assert_eq!(
        v.update_xid(&tuple(committed, lockers, multi | HEAP_XMAX_LOCK_ONLY))
            .unwrap(),
        lockers
    );
    assert_eq!(v.update_xid(&tuple(committed, 77, 0)).unwrap(), 77);
}

#[test]
fn pre_9_0_vacuum_full_markers() {
    let mut c = Cluster::new();
    c.set_xid(700, COMMITTED);
    c.set_xid(701, ABORTED);
    let mut v = Visibility::new(Some(c.log()));
    let moved = |mask: u16, xvac: u32| {
        let mut h = tuple(701, 0, mask | HEAP_XMAX_INVALID);
        h.t_cid = xvac;
        h
    };
    // Moved off by a committed VACUUM FULL: gone; by an aborted one: still here (even
    // though xmin itself aborted: PostgreSQL does not look at it then).
    assert!(!v.satisfies_mvcc(&moved(HEAP_MOVED_OFF, 700)).unwrap());
    assert!(v.satisfies_mvcc(&moved(HEAP_MOVED_OFF, 701)).unwrap());
    assert!(v.satisfies_mvcc(&moved(HEAP_MOVED_IN, 700)).unwrap());
    assert!(!v.satisfies_mvcc(&moved(HEAP_MOVED_IN, 701)).unwrap());
}

#[test]
fn missing_and_short_status_files_are_errors_naming_the_file() {
    let mut c = Cluster::new();
    c.horizons.next_xid = 200_000;
    c.horizons.oldest_xid = 100;
    let log = c.log();
    let mut v = Visibility::new(Some(log));
    // Xid 40000 is on page 1 of pg_xact/0000, which holds one page.
    let e = v
        .satisfies_mvcc(&tuple(40_000, 0, 0))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("pg_xact/0000") && e.contains("too short") && e.contains("transaction 40000"),
        "{e}"
    );
    // Before oldestXid and truncated away: frozen as an xmin, an error as an xmax.
    std::fs::remove_file(c.dir.path().join("pg_xact/0000")).unwrap();
    let mut v = Visibility::new(Some(Arc::new(TransactionLog::new(
        c.dir.path(),
        c.horizons,
    ))));
    assert!(v.satisfies_mvcc(&tuple(50, 0, HEAP_XMAX_INVALID)).unwrap());
    let e = v
        .satisfies_mvcc(&tuple(50, 60, HEAP_XMIN_COMMITTED))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("pg_xact/0000") && e.contains("oldest xid 100"),
        "{e}"
    );
    let e = v.satisfies_mvcc(&tuple(150, 0, 0)).unwrap_err().to_string();
    assert!(
        e.contains("pg_xact/0000") && e.contains("does not exist"),
        "{e}"
    );
    // A FIFO in place of a segment is refused, not waited on.
    let fifo = c.dir.path().join("pg_xact/0000");
    let path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: path is a valid NUL-terminated string.
    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
    let mut v = Visibility::new(Some(Arc::new(TransactionLog::new(
        c.dir.path(),
        c.horizons,
    ))));
    let e = v.satisfies_mvcc(&tuple(150, 0, 0)).unwrap_err().to_string();
    assert!(e.contains("FIFO"), "{e}");
}

#[test]
fn impossible_multis_are_corruption() {
    let mut c = Cluster::new();
    c.set_xid(500, COMMITTED);
    let m = c.add_multi(&[(500, 5), (500, 4)]);
    let log = c.log();
    let mut v = Visibility::new(Some(log.clone()));
    let e = v
        .satisfies_mvcc(&tuple(500, m, HEAP_XMAX_IS_MULTI))
        .unwrap_err()
        .to_string();
    assert!(e.contains("two updaters"), "{e}");
    let e = v
        .satisfies_mvcc(&tuple(500, m + 5, HEAP_XMAX_IS_MULTI))
        .unwrap_err()
        .to_string();
    assert!(e.contains("has not been created yet"), "{e}");
    let e = v
        .satisfies_mvcc(&tuple(500, 0, HEAP_XMAX_IS_MULTI))
        .unwrap_err()
        .to_string();
    assert!(e.contains("MultiXactId 0"), "{e}");
    // A member with an unknown lock mode.
    let mut c = Cluster::new();
    let m = c.add_multi(&[(500, 9)]);
    let mut v = Visibility::new(Some(c.log()));
    let e = v
        .satisfies_mvcc(&tuple(500, m, HEAP_XMAX_IS_MULTI | HEAP_XMIN_COMMITTED))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("pg_multixact/members/0000") && e.contains("lock mode 9"),
        "{e}"
    );
    // A start offset of 0 (never written).
    let mut c = Cluster::new();
    c.horizons.next_multi = 3;
    let mut v = Visibility::new(Some(c.log()));
    let e = v
        .satisfies_mvcc(&tuple(500, 1, HEAP_XMAX_IS_MULTI | HEAP_XMIN_COMMITTED))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("pg_multixact/offsets/0000") && e.contains("offset 0"),
        "{e}"
    );
}

#[test]
fn without_a_log_hint_bits_decide_or_the_tuple_is_an_error() {
    let mut v = Visibility::new(None);
    assert!(v
        .satisfies_mvcc(&tuple(900, 0, HEAP_XMIN_COMMITTED | HEAP_XMAX_INVALID))
        .unwrap());
    assert!(!v.satisfies_mvcc(&tuple(900, 0, HEAP_XMIN_INVALID)).unwrap());
    let e = v.satisfies_mvcc(&tuple(900, 0, 0)).unwrap_err();
    assert!(
        matches!(e, VisibilityError::NoTransactionLog { xid: 900 }),
        "{e}"
    );
}

#[test]
fn xids_compare_modulo_2_32() {
    assert!(xid_precedes(5, 6));
    assert!(!xid_precedes(6, 5));
    assert!(
        xid_precedes(u32::MAX - 5, 10),
        "wraparound: an old xid precedes a new one"
    );
    assert!(!xid_precedes(10, u32::MAX - 5));
    // An xid assigned after wraparound is judged against nextXid the same way.
    let mut c = Cluster::new();
    c.horizons.next_xid = 10;
    c.horizons.oldest_xid = u32::MAX - 100;
    let mut v = Visibility::new(Some(c.log()));
    assert!(
        !v.satisfies_mvcc(&tuple(20, 0, 0)).unwrap(),
        "xid 20 is after nextXid 10"
    );
}

#[test]
fn a_standby_stopped_in_recovery_is_judged_by_its_status_files_alone() {
    // WAL replayed past the checkpoint: xid 1200 and multi 1 are beyond the checkpoint's
    // nextXid and nextMulti, and committed.
    let mut c = Cluster::new();
    c.set_xid(1200, COMMITTED);
    c.set_xid(1201, COMMITTED);
    let m = c.add_multi(&[(1201, 1), (1200, 5)]);
    c.offsets[(m as usize + 1) * 4..][..4]
        .copy_from_slice(&c.horizons.next_multi_offset.to_le_bytes());
    c.horizons.next_xid = 1000;
    c.horizons.next_multi = m;
    c.horizons.in_recovery = true;
    let mut v = Visibility::new(Some(c.log()));
    assert!(v
        .satisfies_mvcc(&tuple(1200, 0, HEAP_XMAX_INVALID))
        .unwrap());
    assert!(!v
        .satisfies_mvcc(&tuple(1201, m, HEAP_XMAX_IS_MULTI))
        .unwrap());
    // The same files as a primary's: beyond the horizons means not yet assigned.
    c.horizons.in_recovery = false;
    let mut v = Visibility::new(Some(c.log()));
    assert!(!v
        .satisfies_mvcc(&tuple(1200, 0, HEAP_XMAX_INVALID))
        .unwrap());
}

#[test]
fn toast_chunks_ignore_xmax() {
    assert!(satisfies_toast(&tuple(5, 6, HEAP_XMAX_COMMITTED)));
    assert!(satisfies_toast(&tuple(5, 0, 0)));
    assert!(!satisfies_toast(&tuple(5, 0, HEAP_XMIN_INVALID)));
    assert!(!satisfies_toast(&tuple(0, 0, 0)));
    assert!(satisfies_toast(&tuple(5, 0, HEAP_XMIN_FROZEN)));
}

#[test]
fn hot_updated_needs_a_live_update() {
    let mut h = tuple(5, 6, 0);
    h.t_infomask2 |= HEAP_HOT_UPDATED;
    assert!(is_hot_updated(&h));
    h.t_infomask |= HEAP_XMAX_INVALID;
    assert!(!is_hot_updated(&h));
    let mut h = tuple(5, 6, HEAP_XMIN_INVALID);
    h.t_infomask2 |= HEAP_HOT_UPDATED;
    assert!(!is_hot_updated(&h));
}
