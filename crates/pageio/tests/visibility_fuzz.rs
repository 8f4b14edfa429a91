//! The visibility decoder never panics and never claims what the bytes cannot say: random
//! tuple headers are judged against random status files (`pg_xact`, `pg_multixact` offsets
//! and members, of random lengths) and random checkpoint horizons. Every answer is Ok or a
//! typed error naming a status file, and the rules that need no status file hold whatever
//! the files say.

use std::sync::Arc;

use pageio::page::heap::{HeapTupleHeader, HEAP_XMAX_INVALID, HEAP_XMIN_COMMITTED};
use pageio::page::heap::{HEAP_XMAX_IS_MULTI, HEAP_XMAX_LOCK_ONLY, HEAP_XMIN_INVALID};
use pageio::page::ItemPointer;
use pageio::visibility::{TransactionLog, Visibility, VisibilityError, XidHorizons};
use proptest::prelude::*;

fn header(xmin: u32, xmax: u32, cid: u32, infomask: u16) -> HeapTupleHeader {
    HeapTupleHeader {
        t_xmin: xmin,
        t_xmax: xmax,
        t_cid: cid,
        t_ctid: ItemPointer {
            block: 0,
            offset: 1,
        },
        t_infomask2: 2,
        t_infomask: infomask,
        t_hoff: 24,
    }
}

/// Small xids and multis hit the bytes of the files; large ones their ends and wraparound.
fn id() -> impl Strategy<Value = u32> {
    prop_oneof![0u32..64, 0u32..70_000, any::<u32>()]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn random_headers_against_random_status_files(
        clog in proptest::collection::vec(any::<u8>(), 0..9000),
        offsets in proptest::collection::vec(any::<u8>(), 0..9000),
        members in proptest::collection::vec(any::<u8>(), 0..9000),
        next_xid in id(), oldest_xid in id(), next_multi in id(), oldest_multi in id(),
        next_multi_offset in id(), in_recovery in any::<bool>(),
        tuples in proptest::collection::vec((id(), id(), id(), any::<u16>()), 1..40),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::create_dir_all(p.join("pg_xact")).unwrap();
        std::fs::create_dir_all(p.join("pg_multixact/offsets")).unwrap();
        std::fs::create_dir_all(p.join("pg_multixact/members")).unwrap();
        std::fs::write(p.join("pg_xact/0000"), &clog).unwrap();
        std::fs::write(p.join("pg_multixact/offsets/0000"), &offsets).unwrap();
        std::fs::write(p.join("pg_multixact/members/0000"), &members).unwrap();
        let horizons = XidHorizons {
            next_xid,
            next_xid_epoch: 0,
            oldest_xid,
            next_multi,
            next_multi_offset,
            oldest_multi,
            in_recovery,
        };
        let mut v = Visibility::new(Some(Arc::new(TransactionLog::new(p, horizons))));
        for (xmin, xmax, cid, mask) in tuples {
            let h = header(xmin, xmax, cid, mask);
            match v.satisfies_mvcc(&h) {
                Ok(visible) => {
                    // An xmin hinted invalid (and not frozen) is never visible; a hinted
                    // committed xmin with an invalid or lock-only xmax always is.
                    if mask & (HEAP_XMIN_INVALID | HEAP_XMIN_COMMITTED) == HEAP_XMIN_INVALID {
                        prop_assert!(!visible);
                    }
                    if mask & HEAP_XMIN_COMMITTED != 0
                        && (mask & HEAP_XMAX_INVALID != 0 || mask & HEAP_XMAX_LOCK_ONLY != 0)
                    {
                        prop_assert!(visible);
                    }
                }
                Err(VisibilityError::StatusUnreadable { file, .. })
                | Err(VisibilityError::MultiXactCorrupt { file, .. }) => {
                    prop_assert!(file.starts_with("pg_xact/") || file.starts_with("pg_multixact/"), "{file}");
                }
                Err(e @ VisibilityError::NoTransactionLog { .. }) => {
                    prop_assert!(false, "a log was given: {e}");
                }
            }
            let _ = v.update_xid(&h);
            if mask & HEAP_XMAX_IS_MULTI != 0 {
                let _ = v.multi_update_xid(xmax);
            }
        }
    }
}
