//! The page readers against a real PostgreSQL 18.6 data directory (`initdb -k`), checked
//! against answers PostgreSQL itself gave (see `/work/shared/fixtures/README.md`).

mod common;

use std::path::Path;

use pageio::page::btree::{BtMetaPage, BtreePage, BTREE_MAGIC};
use pageio::page::checksum::stored_checksum;
use pageio::page::heap::{ColumnType, Datum, HeapTuple};
use pageio::page::{pg_checksum_page, verify_page, PageRef, PageVerification, BLCKSZ};

const UNIFORM: &str = "base/5/16384";
const LINEAR_10: &str = "base/5/16389";
const UNIFORM_A: &str = "base/5/16394";
const LINEAR_10_A: &str = "base/5/16395";

#[test]
fn every_relation_page_verifies() {
    let (_dir, pgdata) = common::unpack_fixture();
    let files = common::relation_files(&pgdata);
    let mut blocks = 0usize;
    let mut new_pages = 0usize;
    for (path, segment) in &files {
        for (index, page) in common::read_pages(path).iter().enumerate() {
            let blkno = segment * common::RELSEG_SIZE_BLOCKS + index as u32;
            let verdict = verify_page(page, blkno, true);
            assert!(
                verdict.is_ok(),
                "{} block {blkno}: {verdict}",
                path.display()
            );
            if verdict == PageVerification::New {
                new_pages += 1;
            }
            blocks += 1;
        }
    }
    // pg_checksums -c on this directory: "Files scanned: 962", "Blocks scanned: 5159".
    assert_eq!(files.len(), 962, "relation files");
    assert_eq!(blocks, 5159, "blocks");
    eprintln!(
        "{} files, {blocks} blocks, {new_pages} new pages",
        files.len()
    );
}

#[test]
fn known_checksums_and_header() {
    let (_dir, pgdata) = common::unpack_fixture();
    let pages = common::read_pages(&pgdata.join(UNIFORM));
    assert_eq!(pages.len(), 1112);
    assert_eq!(stored_checksum(&pages[0]), 50652);
    assert_eq!(pg_checksum_page(&pages[0], 0), 50652);
    assert_eq!(stored_checksum(&pages[7]), 27548);
    assert_eq!(pg_checksum_page(&pages[7], 7), 27548);
    // The block number is part of the checksum: the same page as another block fails.
    assert_ne!(pg_checksum_page(&pages[0], 1), 50652);

    let page = PageRef::new(&pages[0]).unwrap();
    let h = page.header();
    assert_eq!(h.pd_lsn.to_string(), "0/1D2C788");
    assert_eq!(h.pd_flags, 4);
    assert_eq!(h.pd_lower, 96);
    assert_eq!(h.pd_upper, 6320);
    assert_eq!(h.pd_special, 8192);
    assert_eq!(h.page_size_bytes(), 8192);
    assert_eq!(h.layout_version(), 4);
    assert_eq!(h.pd_prune_xid, 0);
    assert_eq!(page.item_count(), 18);
}

/// (count, sum of octet_length(b)) over rows with lo <= a <= hi.
fn heap_query(path: &Path, lo: f64, hi: f64) -> (usize, usize) {
    let mut count = 0;
    let mut sum = 0;
    for page_bytes in common::read_pages(path) {
        let page = PageRef::new(&page_bytes).unwrap();
        for (offnum, item) in page.normal_items() {
            let item = item.unwrap_or_else(|e| panic!("offnum {offnum}: {e}"));
            let tuple = HeapTuple::parse(item).unwrap();
            let values = tuple
                .deform(&[ColumnType::Float8, ColumnType::Text])
                .unwrap();
            let Datum::Float8(a) = values[0] else {
                panic!("a is {:?}", values[0])
            };
            let Datum::Varlena(b) = values[1] else {
                panic!("b is {:?}", values[1])
            };
            if (lo..=hi).contains(&a) {
                count += 1;
                sum += b.octet_length();
            }
        }
    }
    (count, sum)
}

#[test]
fn heap_rows_match_postgres_answers() {
    let (_dir, pgdata) = common::unpack_fixture();
    let uniform = pgdata.join(UNIFORM);
    let linear = pgdata.join(LINEAR_10);
    let cases: &[(&Path, f64, f64, usize, usize)] = &[
        (&uniform, 0.0, 1000.0, 20000, 1320000),
        (&uniform, 0.0, 10.0, 207, 13662),
        (&uniform, 100.0, 200.0, 1984, 130944),
        (&uniform, 250.0, 750.0, 9917, 654522),
        (&uniform, 500.0, 500.5, 14, 924),
        (&uniform, 990.0, 1000.0, 227, 14982),
        (&linear, 0.0, 1000.0, 19847, 1309902),
        (&linear, -100.0, 10.0, 226, 14916),
        (&linear, 100.0, 200.0, 2000, 132000),
        (&linear, 250.0, 750.0, 10018, 661188),
        (&linear, 500.0, 500.5, 7, 462),
        (&linear, 990.0, 1100.0, 212, 13992),
    ];
    for &(path, lo, hi, count, sum) in cases {
        assert_eq!(
            heap_query(path, lo, hi),
            (count, sum),
            "{} a BETWEEN {lo} AND {hi}",
            path.display()
        );
    }
    // Every row of uniform is live and carries a 66-character `\x…` hex digest.
    assert_eq!(
        heap_query(&uniform, f64::NEG_INFINITY, f64::INFINITY),
        (20000, 1320000)
    );
}

#[test]
fn heap_tuple_header_fields() {
    let (_dir, pgdata) = common::unpack_fixture();
    let pages = common::read_pages(&pgdata.join(UNIFORM));
    let page = PageRef::new(&pages[0]).unwrap();
    let tuple = HeapTuple::parse(page.item(1).unwrap()).unwrap();
    let h = tuple.header();
    assert_eq!(h.natts(), 2);
    assert_eq!(h.t_hoff, 24);
    assert!(!h.has_nulls());
    assert!(h.xmin_committed());
    assert!(h.xmax_invalid());
    assert_eq!(h.t_ctid.block, 0);
    assert_eq!(h.t_ctid.offset, 1);
    let values = tuple
        .deform(&[ColumnType::Float8, ColumnType::Text])
        .unwrap();
    let b = values[1].as_bytes().unwrap();
    // sha256(...) printed as text: "\x" followed by 64 hex digits.
    assert_eq!(b.len(), 66);
    assert_eq!(&b[..2], b"\\x");
    assert!(b[2..].iter().all(u8::is_ascii_hexdigit));
}

/// Walks a btree from the metapage: root, downlinks to the leaves, right-links along the
/// leaf level. Returns (heap TIDs on leaves, keys in leaf order).
fn walk_btree(path: &Path) -> (usize, Vec<f64>) {
    let pages = common::read_pages(path);
    let meta = BtMetaPage::parse(&pages[0]).unwrap();
    assert_eq!(meta.btm_magic, BTREE_MAGIC);
    assert_eq!(meta.btm_version, 4);
    assert_eq!(meta.btm_root, 3);
    assert_eq!(meta.btm_level, 1);
    assert_eq!(meta.btm_fastroot, 3);

    let page = |blkno: u32| BtreePage::new(&pages[blkno as usize]).unwrap();
    let root = page(meta.btm_root);
    assert!(root.opaque().is_root());
    assert_eq!(root.opaque().btpo_level, 1);
    assert!(root.opaque().is_rightmost());
    let pivots = root.data_items().unwrap();
    // The first pivot on an internal page is "minus infinity": no key at all.
    assert_eq!(pivots[0].1.pivot_natts(), Some(0));
    assert_eq!(pivots[0].1.first_key(ColumnType::Float8).unwrap(), None);
    let downlinks: Vec<u32> = pivots.iter().map(|(_, t)| t.downlink()).collect();
    assert!(pivots.iter().all(|(_, t)| t.is_pivot()));

    let mut tids = 0;
    let mut keys = Vec::new();
    let mut leaves = Vec::new();
    let mut blkno = downlinks[0];
    loop {
        leaves.push(blkno);
        let leaf = page(blkno);
        assert!(leaf.opaque().is_leaf());
        let high_key = leaf.high_key().unwrap();
        for (_, tuple) in leaf.data_items().unwrap() {
            assert!(!tuple.is_pivot());
            tids += tuple.heap_tids().unwrap().len();
            let key = tuple.first_key(ColumnType::Float8).unwrap().unwrap();
            let key = key.as_f64().unwrap();
            if let Some(hk) = &high_key {
                if let Some(Datum::Float8(hk)) = hk.first_key(ColumnType::Float8).unwrap() {
                    assert!(key <= hk, "key {key} above high key {hk} on block {blkno}");
                }
            }
            keys.push(key);
        }
        match leaf.opaque().btpo_next {
            0 => break,
            next => {
                assert_eq!(page(next).opaque().btpo_prev, blkno);
                blkno = next;
            }
        }
    }
    assert_eq!(leaves, downlinks, "right-links and downlinks disagree");
    (tids, keys)
}

#[test]
fn btree_walk_finds_every_heap_tid_in_order() {
    let (_dir, pgdata) = common::unpack_fixture();
    for rel in [UNIFORM_A, LINEAR_10_A] {
        let (tids, keys) = walk_btree(&pgdata.join(rel));
        assert_eq!(tids, 20000, "{rel}");
        assert!(
            keys.windows(2).all(|w| w[0] <= w[1]),
            "{rel} keys out of order"
        );
    }
    let (_, keys) = walk_btree(&pgdata.join(LINEAR_10_A));
    assert_eq!(keys.first().copied(), Some(-23.754288905933002));
    assert_eq!(keys.last().copied(), Some(1025.248542729012));
}

/// Flips every byte of a page, one position at a time; each must fail verification.
fn assert_every_flip_fails(page: &[u8; BLCKSZ], blkno: u32, what: &str) {
    assert!(verify_page(page, blkno, true).is_ok());
    let mut copy = *page;
    for pos in 0..BLCKSZ {
        copy[pos] ^= 0xFF;
        let verdict = verify_page(&copy, blkno, true);
        assert!(
            !verdict.is_ok(),
            "{what}: flipping byte {pos} still verifies"
        );
        copy[pos] ^= 0xFF;
    }
}

#[test]
fn flipping_any_byte_fails_verification() {
    let (_dir, pgdata) = common::unpack_fixture();
    let heap = common::read_pages(&pgdata.join(UNIFORM));
    assert_every_flip_fails(&heap[0], 0, "uniform block 0");
    let index = common::read_pages(&pgdata.join(UNIFORM_A));
    assert_every_flip_fails(&index[3], 3, "uniform_a block 3");
    assert_every_flip_fails(&index[0], 0, "uniform_a metapage");
}
