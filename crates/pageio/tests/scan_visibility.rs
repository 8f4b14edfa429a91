//! Every scan kind, serial and parallel, under every io_method, counts the rows PostgreSQL's
//! `HeapTupleSatisfiesMVCC` would, on hand-built heap pages whose tuples carry no hint bits:
//! their fate is in status files written here (`pg_xact`, `pg_multixact`). Each page holds
//! one tuple per rule, and a HOT chain whose root's xmax is a MultiXact with a committed
//! updater, reached from the index through the chain.

mod common;

use std::sync::Arc;

use pageio::config::{IoMethodKind, BLCKSZ};
use pageio::gen::nbtsort;
use pageio::gen::KeyKind;
use pageio::page::builder::{set_checksum, HeapTupleBuilder, PageBuilder};
use pageio::page::heap::{ColumnType, Datum, HEAP_XMAX_INVALID, HEAP_XMAX_IS_MULTI};
use pageio::page::heap::{HEAP_HOT_UPDATED, HEAP_ONLY_TUPLE, HEAP_XMAX_LOCK_ONLY};
use pageio::page::ItemPointer;
use pageio::scan::{Between, ScanError, ScanKind, ScanOptions, Table};
use pageio::storage::RelFile;
use pageio::stream::DistancePolicy;
use pageio::visibility::{TransactionLog, VisibilityError, XidHorizons};

const PAGES: u32 = 60;
/// Committed transactions.
const C1: u32 = 600;
const C2: u32 = 601;
/// The committed updater inside the MultiXact.
const UPDATER: u32 = 602;
/// A transaction that rolled back.
const ABORTED: u32 = 603;
/// A transaction still prepared (or open) when the cluster stopped.
const PREPARED: u32 = 604;
/// MultiXacts: two lockers; a locker and the committed updater.
const MULTI_LOCKERS: u32 = 1;
const MULTI_UPDATED: u32 = 2;

/// One page's tuples: (key, xmin, xmax, infomask, infomask2, visible).
fn page_tuples(blkno: u32) -> Vec<(f64, u32, u32, u16, u16, bool)> {
    let k = |i: u32| f64::from(blkno * 100 + i);
    vec![
        (k(1), C1, 0, HEAP_XMAX_INVALID, 0, true),
        (k(2), ABORTED, 0, HEAP_XMAX_INVALID, 0, false),
        (k(3), PREPARED, 0, HEAP_XMAX_INVALID, 0, false),
        (k(4), C1, C2, 0, 0, false),
        (k(5), C1, ABORTED, 0, 0, true),
        (k(6), C1, C2, HEAP_XMAX_LOCK_ONLY, 0, true),
        (k(7), C1, MULTI_LOCKERS, HEAP_XMAX_IS_MULTI, 0, true),
        (k(8), C1, PREPARED, 0, 0, true),
        // The chain: root updated (in a MultiXact) to a heap-only version at offset 10.
        (
            k(9),
            C1,
            MULTI_UPDATED,
            HEAP_XMAX_IS_MULTI,
            HEAP_HOT_UPDATED,
            false,
        ),
        (k(9), UPDATER, 0, HEAP_XMAX_INVALID, HEAP_ONLY_TUPLE, true),
    ]
}

fn write_status_files(dir: &std::path::Path) -> XidHorizons {
    let mut clog = vec![0u8; BLCKSZ];
    for (xid, bits) in [
        (C1, 1u8),
        (C2, 1),
        (UPDATER, 1),
        (ABORTED, 2),
        (PREPARED, 0),
    ] {
        clog[(xid / 4) as usize] |= bits << ((xid % 4) * 2);
    }
    // Multi 1: offsets 1..3 (two FOR SHARE lockers); multi 2: offsets 3..5 (a FOR SHARE
    // locker and a no-key update).
    let mut offsets = vec![0u8; BLCKSZ];
    offsets[4..8].copy_from_slice(&1u32.to_le_bytes());
    offsets[8..12].copy_from_slice(&3u32.to_le_bytes());
    let mut members = vec![0u8; BLCKSZ];
    for (o, xid, status) in [(1usize, C1, 1u8), (2, C2, 1), (3, C1, 1), (4, UPDATER, 4)] {
        let group = (o / 4) * 20;
        members[group + o % 4] = status;
        members[group + 4 + (o % 4) * 4..][..4].copy_from_slice(&xid.to_le_bytes());
    }
    std::fs::create_dir_all(dir.join("pg_xact")).unwrap();
    std::fs::create_dir_all(dir.join("pg_multixact/offsets")).unwrap();
    std::fs::create_dir_all(dir.join("pg_multixact/members")).unwrap();
    std::fs::write(dir.join("pg_xact/0000"), &clog).unwrap();
    std::fs::write(dir.join("pg_multixact/offsets/0000"), &offsets).unwrap();
    std::fs::write(dir.join("pg_multixact/members/0000"), &members).unwrap();
    XidHorizons {
        next_xid: 700,
        next_xid_epoch: 0,
        oldest_xid: 3,
        next_multi: 3,
        next_multi_offset: 5,
        oldest_multi: 1,
        in_recovery: false,
    }
}

/// Writes the heap, its btree (one entry per tuple an index would hold: not the heap-only
/// one) and the status files; returns the table and the expected (rows, key sum bytes).
fn write_table(dir: &std::path::Path) -> (Table, u64) {
    let horizons = write_status_files(dir);
    let mut heap = Vec::new();
    let mut entries = Vec::new();
    let mut visible = 0;
    for blkno in 0..PAGES {
        let mut page = PageBuilder::new(0).unwrap();
        let tuples = page_tuples(blkno);
        for (i, &(key, xmin, xmax, infomask, infomask2, shows)) in tuples.iter().enumerate() {
            let offset = i as u16 + 1;
            let tid = ItemPointer {
                block: blkno,
                offset,
            };
            // A HOT-updated root's t_ctid names its successor, the next line pointer.
            let ctid = if infomask2 & HEAP_HOT_UPDATED != 0 {
                ItemPointer {
                    block: blkno,
                    offset: offset + 1,
                }
            } else {
                tid
            };
            let mut b = HeapTupleBuilder::new().ctid(ctid);
            b.xmin = xmin;
            b.xmax = xmax;
            b.infomask = infomask;
            let mut tuple = b.build(&[Datum::Float8(key), Datum::text(b"xyz")]).unwrap();
            // t_infomask2 is at byte 18: the attribute count plus the HOT flags.
            let mask2 = u16::from_le_bytes([tuple[18], tuple[19]]) | infomask2;
            tuple[18..20].copy_from_slice(&mask2.to_le_bytes());
            page.add_item(&tuple).unwrap();
            if infomask2 & HEAP_ONLY_TUPLE == 0 {
                entries.push((key, tid));
            }
            visible += u64::from(shows);
        }
        let mut bytes = page.finish();
        set_checksum(&mut bytes, blkno);
        heap.extend_from_slice(&bytes);
    }
    std::fs::write(dir.join("16384"), &heap).unwrap();
    entries.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let mut pages = Vec::new();
    let shape =
        nbtsort::build::<pageio::page::PageError>(KeyKind::Float8, entries, |blkno, page| {
            pages.push((blkno, page));
            Ok(())
        })
        .unwrap();
    let mut index = vec![0u8; shape.pages as usize * BLCKSZ];
    for (blkno, mut page) in pages {
        set_checksum(&mut page, blkno);
        index[blkno as usize * BLCKSZ..][..BLCKSZ].copy_from_slice(&page[..]);
    }
    std::fs::write(dir.join("16385"), &index).unwrap();
    let table = Table {
        heap: RelFile::new(dir.join("16384")),
        index: Some(RelFile::new(dir.join("16385"))),
        columns: vec![ColumnType::Float8, ColumnType::Text],
        transactions: Some(Arc::new(TransactionLog::new(dir, horizons))),
    };
    (table, visible)
}

#[test]
fn every_scan_counts_what_a_new_snapshot_sees() {
    let dir = tempfile::tempdir().unwrap();
    let (table, visible) = write_table(dir.path());
    assert_eq!(visible, u64::from(PAGES) * 6, "six visible rows a page");
    for method in IoMethodKind::CONCRETE {
        let aio = common::aio_for(method);
        let pool = common::checksum_pool(&aio);
        for kind in common::SCAN_KINDS {
            let r = common::scan(&pool, &table, kind, Between::ALL)
                .unwrap_or_else(|e| panic!("{method} {kind}: {e}"));
            assert_eq!(r.rows, visible, "{method} {kind}");
            assert_eq!(r.sum_octet_length, visible * 3, "{method} {kind}");
        }
        // One page's keys 1..9: the range 5..9 keeps keys 5, 6, 7, 8 and the chain's 9.
        let p = Between { lo: 5.0, hi: 9.0 };
        for kind in common::SCAN_KINDS {
            let r = common::scan(&pool, &table, kind, p).unwrap();
            assert_eq!(r.rows, 5, "{method} {kind} between 5 and 9");
        }
        let r = pageio::scan::run_scan(
            &pool,
            &table,
            &ScanOptions {
                kind: ScanKind::Seq,
                predicate: Between::ALL,
                policy: DistancePolicy::Adaptive,
                stream_order: None,
                parallel_workers: 2,
            },
        )
        .unwrap();
        assert_eq!(r.rows, visible, "{method} parallel seq");
    }
}

#[test]
fn without_status_files_an_undecided_tuple_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let (mut table, _) = write_table(dir.path());
    table.transactions = None;
    let aio = common::aio_for(IoMethodKind::Sync);
    let pool = common::checksum_pool(&aio);
    let e = common::scan(&pool, &table, ScanKind::Seq, Between::ALL).unwrap_err();
    match &e {
        ScanError::Visibility {
            block: 0,
            offset: 1,
            source: VisibilityError::NoTransactionLog { xid: C1 },
            ..
        } => {}
        other => panic!("{other}"),
    }
    // And with the commit log gone, the error names its file and the transaction.
    std::fs::remove_file(dir.path().join("pg_xact/0000")).unwrap();
    let (table, _) = {
        let t = Table {
            transactions: Some(Arc::new(TransactionLog::new(
                dir.path(),
                XidHorizons {
                    next_xid: 700,
                    oldest_xid: 3,
                    next_multi: 3,
                    next_multi_offset: 5,
                    oldest_multi: 1,
                    ..XidHorizons::default()
                },
            ))),
            ..table
        };
        (t, ())
    };
    let e = common::scan(&pool, &table, ScanKind::Seq, Between::ALL)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("pg_xact/0000") && e.contains("transaction 600"),
        "{e}"
    );
}
