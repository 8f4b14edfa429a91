//! `a BETWEEN lo AND hi` follows PostgreSQL's float8 order — NaN equals NaN and sorts above
//! every number, -0 equals 0 — in every scan type under every io_method, on a table that
//! stores NaN, ±Infinity and both zeroes, with a btree built in the opclass's order.

mod common;

use std::cmp::Ordering;

use pageio::config::{IoMethodKind, BLCKSZ};
use pageio::gen::nbtsort;
use pageio::gen::KeyKind;
use pageio::page::builder::{set_checksum, HeapTupleBuilder, PageBuilder};
use pageio::page::float8_cmp;
use pageio::page::heap::{ColumnType, Datum};
use pageio::page::ItemPointer;
use pageio::scan::{Between, Table};
use pageio::storage::RelFile;

/// The values of one page; NaN twice so NaN = NaN matters.
const VALUES: [f64; 9] = [
    f64::NEG_INFINITY,
    -1.0,
    -0.0,
    0.0,
    1.0,
    5.0,
    f64::INFINITY,
    f64::NAN,
    f64::NAN,
];

/// Pages of the table: enough index entries for several leaves and an internal level.
const PAGES: u32 = 200;

fn write_table(dir: &std::path::Path) -> Table {
    let mut heap = Vec::new();
    let mut entries = Vec::new();
    for blkno in 0..PAGES {
        let mut page = PageBuilder::new(0).unwrap();
        for (i, &a) in VALUES.iter().enumerate() {
            let tid = ItemPointer {
                block: blkno,
                offset: i as u16 + 1,
            };
            let tuple = HeapTupleBuilder::new()
                .ctid(tid)
                .build(&[Datum::Float8(a), Datum::text(b"xyz")])
                .unwrap();
            page.add_item(&tuple).unwrap();
            entries.push((a, tid));
        }
        let mut bytes = page.finish();
        set_checksum(&mut bytes, blkno);
        heap.extend_from_slice(&bytes);
    }
    std::fs::write(dir.join("16384"), &heap).unwrap();
    entries.sort_by(|a, b| {
        float8_cmp(a.0, b.0).then((a.1.block, a.1.offset).cmp(&(b.1.block, b.1.offset)))
    });
    let mut pages: Vec<(u32, Box<[u8; BLCKSZ]>)> = Vec::new();
    let shape =
        nbtsort::build::<pageio::page::PageError>(KeyKind::Float8, entries, |blkno, page| {
            pages.push((blkno, page));
            Ok(())
        })
        .unwrap();
    assert!(shape.level >= 1, "want an internal level: {shape:?}");
    let mut index = vec![0u8; shape.pages as usize * BLCKSZ];
    for (blkno, mut page) in pages {
        set_checksum(&mut page, blkno);
        let at = blkno as usize * BLCKSZ;
        index[at..at + BLCKSZ].copy_from_slice(&page[..]);
    }
    std::fs::write(dir.join("16385"), &index).unwrap();
    Table {
        heap: RelFile::new(dir.join("16384")),
        index: Some(RelFile::new(dir.join("16385"))),
        columns: vec![ColumnType::Float8, ColumnType::Text],
        transactions: None,
    }
}

#[test]
fn nan_and_zeroes_follow_postgresql_float8_order_in_every_scan_and_method() {
    let dir = tempfile::tempdir().unwrap();
    let table = write_table(dir.path());
    let per_page = |lo: f64, hi: f64| {
        VALUES
            .iter()
            .filter(|&&v| {
                float8_cmp(v, lo) != Ordering::Less && float8_cmp(v, hi) != Ordering::Greater
            })
            .count() as u64
    };
    let cases: [(&str, Between, u64); 7] = [
        ("all rows", Between::ALL, 9),
        (
            "a between 0 and 'NaN'",
            Between::parse("a between 0 and 'NaN'").unwrap(),
            7,
        ),
        (
            "a between 'NaN' and 'NaN'",
            Between::parse("a between 'NaN' and 'NaN'").unwrap(),
            2,
        ),
        (
            "a between -0 and 0",
            Between::parse("a between -0 and 0").unwrap(),
            2,
        ),
        (
            "a between '-Infinity' and 'Infinity'",
            Between::parse("a between -Infinity and Infinity").unwrap(),
            7,
        ),
        (
            "a between 1 and 'Infinity'",
            Between::parse("a between 1 and Infinity").unwrap(),
            3,
        ),
        (
            "a between 'NaN' and 0 (empty, as in PostgreSQL)",
            Between::parse("a between NaN and 0").unwrap(),
            0,
        ),
    ];
    // The expected counts are PostgreSQL's order applied to one page's values.
    for (_, p, want) in &cases {
        assert_eq!(per_page(p.lo, p.hi), *want, "{p:?}");
    }
    for method in IoMethodKind::CONCRETE {
        let aio = common::aio_for(method);
        let pool = common::checksum_pool(&aio);
        for (name, predicate, want_per_page) in &cases {
            for kind in common::SCAN_KINDS {
                let r = common::scan(&pool, &table, kind, *predicate)
                    .unwrap_or_else(|e| panic!("{method} {kind} {name}: {e}"));
                assert_eq!(
                    (r.rows, r.sum_octet_length),
                    (
                        want_per_page * PAGES as u64,
                        want_per_page * PAGES as u64 * 3
                    ),
                    "{method} {kind} {name}"
                );
            }
        }
    }
}
