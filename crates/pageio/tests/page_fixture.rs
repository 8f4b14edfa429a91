//! The page readers against a real PostgreSQL 18 data directory (`initdb -k`), checked
//! against answers PostgreSQL itself gave: the fixture is built by `scripts/build-fixture.py`
//! from `tests/fixtures/pg18-small.sql`, and every fact that depends on the build (relation
//! files, LSNs, checksums, pg_checksums totals) comes from the `facts.json` PostgreSQL
//! produced then (`common::fixture_facts()`).

mod common;

use std::path::Path;

use pageio::page::btree::{BtMetaPage, BtreePage, BTREE_MAGIC};
use pageio::page::checksum::stored_checksum;
use pageio::page::heap::{ColumnType, Datum, HeapTuple};
use pageio::page::{pg_checksum_page, verify_page, PageRef, PageVerification, BLCKSZ};

/// min(a) and max(a) of linear_10, as PostgreSQL prints them.
const LINEAR_10_RANGE: (f64, f64) = (-23.754288905933002, 1025.248542729012);

/// The file of relation `name` in the fixture, from PostgreSQL's `pg_relation_filepath`.
fn rel(name: &str) -> &'static str {
    common::fixture_facts().path(name)
}

#[test]
fn known_answers_are_postgres_answers() {
    common::assert_fixture_answers_are_postgres_answers();
    let facts = common::fixture_facts();
    let range: (f64, f64) = (
        facts.linear_10_a_min.parse().unwrap(),
        facts.linear_10_a_max.parse().unwrap(),
    );
    assert_eq!(range, LINEAR_10_RANGE);
}

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
    // What pg_checksums -c printed on this directory ("Files scanned", "Blocks scanned").
    let totals = &common::fixture_facts().pg_checksums;
    assert_eq!(files.len() as u64, totals.files_scanned, "relation files");
    assert_eq!(blocks as u64, totals.blocks_scanned, "blocks");
    assert_eq!(totals.bad_checksums, 0);
    assert!(
        blocks > 5000,
        "a whole cluster, not a few files: {blocks} blocks"
    );
    eprintln!(
        "{} files, {blocks} blocks, {new_pages} new pages",
        files.len()
    );
}

#[test]
fn known_checksums_and_header() {
    let facts = common::fixture_facts();
    let (_dir, pgdata) = common::unpack_fixture();
    let pages = common::read_pages(&pgdata.join(rel("uniform")));
    assert_eq!(pages.len() as u32, facts.relation("uniform").pages);
    // 20,000 rows at 18 rows per page (fillfactor 25).
    assert_eq!(pages.len(), 1112);
    for block in [0u32, 7] {
        let known = facts.heap_block(block);
        let page_bytes = &pages[block as usize];
        // The checksum stored on the page, what PostgreSQL's page_checksum() computes for
        // it, and what pageio computes are one value.
        assert_eq!(known.checksum, known.computed_checksum, "block {block}");
        assert_eq!(stored_checksum(page_bytes), known.checksum, "block {block}");
        assert_eq!(
            pg_checksum_page(page_bytes, block),
            known.computed_checksum,
            "block {block}"
        );
        // The block number is part of the checksum: the same page as another block fails.
        assert_ne!(pg_checksum_page(page_bytes, block + 1), known.checksum);

        let page = PageRef::new(page_bytes).unwrap();
        let h = page.header();
        assert_eq!(h.pd_lsn.to_string(), known.lsn, "block {block}");
        assert_eq!(h.pd_checksum, known.checksum);
        assert_eq!(h.pd_flags, known.flags);
        assert_eq!(h.pd_lower, known.lower);
        assert_eq!(h.pd_upper, known.upper);
        assert_eq!(h.pd_special, known.special);
        assert_eq!(h.page_size_bytes(), known.pagesize as usize);
        assert_eq!(h.layout_version(), known.version);
        assert_eq!(h.pd_prune_xid, known.prune_xid);
        assert_eq!(page.item_count(), known.items);
        // What PostgreSQL reports for any full, all-visible page of this table.
        assert_eq!(
            (
                h.pd_flags,
                h.pd_lower,
                h.pd_upper,
                h.pd_special,
                page.item_count()
            ),
            (4, 96, 6320, 8192, 18),
            "block {block}"
        );
        assert_eq!(h.page_size_bytes(), 8192);
        assert_eq!(h.layout_version(), 4);
    }
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
    for (table, lo, hi, count, sum) in common::FIXTURE_ANSWERS {
        let path = pgdata.join(rel(table));
        assert_eq!(
            heap_query(&path, lo, hi),
            (count as usize, sum as usize),
            "{table} ({}) a BETWEEN {lo} AND {hi}",
            path.display()
        );
    }
    // Every row of uniform is live and carries a 66-character `\x…` hex digest.
    assert_eq!(
        heap_query(
            &pgdata.join(rel("uniform")),
            f64::NEG_INFINITY,
            f64::INFINITY
        ),
        (20000, 1320000)
    );
}

#[test]
fn heap_tuple_header_fields() {
    let (_dir, pgdata) = common::unpack_fixture();
    let pages = common::read_pages(&pgdata.join(rel("uniform")));
    let page = PageRef::new(&pages[0]).unwrap();
    let item = page.item(1).unwrap();
    let tuple = HeapTuple::parse(item).unwrap();
    let h = tuple.header();
    // Line pointer 1 as PostgreSQL's heap_page_items reported it.
    let known = &common::fixture_facts().heap_block(0).first_tuple;
    assert_eq!(item.len(), known.lp_len as usize);
    assert_eq!(h.t_infomask, known.t_infomask);
    assert_eq!(h.t_infomask2, known.t_infomask2);
    assert_eq!(h.t_hoff, known.t_hoff);
    assert_eq!(
        format!("({},{})", h.t_ctid.block, h.t_ctid.offset),
        known.t_ctid
    );
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
fn walk_btree(pgdata: &Path, index: &str) -> (usize, Vec<f64>) {
    let facts = common::fixture_facts();
    let pages = common::read_pages(&pgdata.join(rel(index)));
    assert_eq!(pages.len() as u32, facts.relation(index).pages, "{index}");
    // The metapage as PostgreSQL's bt_metap reported it.
    let known = facts.btree(index);
    let meta = BtMetaPage::parse(&pages[0]).unwrap();
    assert_eq!(meta.btm_magic, BTREE_MAGIC);
    assert_eq!(meta.btm_magic, known.magic);
    assert_eq!(meta.btm_version, known.version);
    assert_eq!(meta.btm_root, known.root);
    assert_eq!(meta.btm_level, known.level);
    assert_eq!(meta.btm_fastroot, known.fastroot);
    assert_eq!(meta.btm_fastlevel, known.fastlevel);
    // 20,000 float8 keys fit a root over leaves.
    assert_eq!((meta.btm_version, meta.btm_level), (4, 1));

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
    for index in ["uniform_a", "linear_10_a"] {
        let (tids, keys) = walk_btree(&pgdata, index);
        assert_eq!(tids, 20000, "{index}");
        assert!(
            keys.windows(2).all(|w| w[0] <= w[1]),
            "{index} keys out of order"
        );
    }
    let (_, keys) = walk_btree(&pgdata, "linear_10_a");
    assert_eq!(keys.first().copied(), Some(LINEAR_10_RANGE.0));
    assert_eq!(keys.last().copied(), Some(LINEAR_10_RANGE.1));
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
    let heap = common::read_pages(&pgdata.join(rel("uniform")));
    assert_every_flip_fails(&heap[0], 0, "uniform block 0");
    let index = common::read_pages(&pgdata.join(rel("uniform_a")));
    let root = common::fixture_facts().btree("uniform_a").root;
    assert_every_flip_fails(&index[root as usize], root, "uniform_a root");
    assert_every_flip_fails(&index[0], 0, "uniform_a metapage");
}
