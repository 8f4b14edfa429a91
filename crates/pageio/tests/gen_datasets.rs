//! `pageio::gen`: generated data sets scanned with the page module and checked against the
//! row reference computed independently from the same seed.
//!
//! The files are read with plain `std::fs` reads, not the AIO layer that wrote them, so a
//! write-path bug cannot hide behind the same bug on the read path.

use std::collections::HashSet;
use std::path::Path;

use pageio::gen::{self, DataSet, GenOptions, Manifest, Row};
use pageio::page::btree::{BtMetaPage, BtreePage, IndexTuple, BTP_LEAF, BTP_ROOT};
use pageio::page::heap::{ColumnType, Datum, HeapTuple};
use pageio::page::{verify_page, ItemPointer, PageRef, BLCKSZ};
use pageio::{Aio, IoConfig, IoMethodKind};

fn aio(method: IoMethodKind) -> Aio {
    Aio::new(IoConfig {
        io_method: method,
        ..IoConfig::default()
    })
    .unwrap()
}

fn generate(dir: &Path, dataset: DataSet, rows: u64, seed: u64) -> Manifest {
    let opts = GenOptions {
        rows,
        seed,
        scale: 1,
        overwrite: true,
    };
    gen::generate(&aio(IoMethodKind::Worker), dir, dataset, &opts, &|_| {}).unwrap()
}

/// Reads every block of a relation (all segments) and checks each checksum.
fn read_pages(path: &Path, expected_pages: u64) -> Vec<[u8; BLCKSZ]> {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(
        bytes.len() as u64,
        expected_pages * BLCKSZ as u64,
        "{path:?}"
    );
    bytes
        .chunks_exact(BLCKSZ)
        .enumerate()
        .map(|(blkno, chunk)| {
            let page: [u8; BLCKSZ] = chunk.try_into().unwrap();
            let v = verify_page(&page, blkno as u32, true);
            assert!(v.is_ok(), "{path:?} block {blkno}: {v}");
            page
        })
        .collect()
}

/// One decoded heap row: TID, key, and `b` (or the filler) as bytes.
struct HeapRow {
    tid: ItemPointer,
    row: Row,
    text: Vec<u8>,
}

fn scan_heap(dir: &Path, m: &Manifest, dataset: DataSet) -> Vec<HeapRow> {
    let pages = read_pages(&dir.join(m.heap_relfilenode.to_string()), m.heap_pages);
    let columns: Vec<ColumnType> = match dataset {
        DataSet::PgbenchAccounts => vec![
            ColumnType::Int4,
            ColumnType::Int4,
            ColumnType::Int4,
            ColumnType::Text,
        ],
        _ => vec![ColumnType::Float8, ColumnType::Text],
    };
    let mut out = Vec::new();
    for (blkno, page) in pages.iter().enumerate() {
        let view = PageRef::new(page).unwrap();
        let count = view.item_count() as u64;
        let expected = (m.rows - blkno as u64 * m.rows_per_page as u64).min(m.rows_per_page as u64);
        assert_eq!(count, expected, "rows on heap block {blkno}");
        for offnum in 1..=view.item_count() {
            let tuple = HeapTuple::parse(view.item(offnum).unwrap()).unwrap();
            let tid = ItemPointer {
                block: blkno as u32,
                offset: offnum,
            };
            assert_eq!(tuple.header().t_ctid, tid);
            let values = tuple.deform(&columns).unwrap();
            let row = match values[..] {
                [Datum::Float8(a), _] => Row::Bench { a, x: f64::NAN },
                [Datum::Int4(aid), Datum::Int4(bid), Datum::Int4(abalance), _] => {
                    Row::Account { aid, bid, abalance }
                }
                _ => panic!("unexpected values {values:?}"),
            };
            let text = values.last().unwrap().as_bytes().unwrap().to_vec();
            out.push(HeapRow { tid, row, text });
        }
    }
    out
}

/// `SELECT count(*), sum(length(b)) … WHERE a BETWEEN lo AND hi`.
fn aggregate<'a>(rows: impl Iterator<Item = (f64, usize)> + 'a, lo: f64, hi: f64) -> (u64, u64) {
    rows.filter(|(a, _)| *a >= lo && *a <= hi)
        .fold((0, 0), |(c, s), (_, len)| (c + 1, s + len as u64))
}

const PREDICATES: [(f64, f64); 6] = [
    (0.0, 100_000.0),
    (0.0, 1000.0),
    (10_000.0, 20_000.0),
    (25_000.0, 75_000.0),
    (50_000.0, 50_050.0),
    (-5_000.0, 3_000.0),
];

fn check_heap_against_reference(dir: &Path, m: &Manifest, dataset: DataSet) -> Vec<HeapRow> {
    let scanned = scan_heap(dir, m, dataset);
    let reference: Vec<Row> = dataset.rows(m.seed, m.rows).collect();
    assert_eq!(scanned.len(), reference.len());
    for (i, (got, want)) in scanned.iter().zip(&reference).enumerate() {
        assert_eq!(got.tid, dataset.tid_of(i as u64));
        assert_eq!(got.row.key(), want.key(), "row {i}");
        match want {
            Row::Bench { .. } => {
                // Hashing is slow in debug builds: every row's b has the text form of a
                // sha256, every 16th is compared in full.
                assert_eq!(got.text.len(), 66);
                assert!(got.text.starts_with(b"\\x"));
                if i % 16 == 0 {
                    assert_eq!(got.text, want.b().unwrap().into_bytes(), "row {i}");
                }
            }
            Row::Account { .. } => {
                assert_eq!(&got.row, want);
                assert_eq!(got.text, vec![b' '; 84]);
            }
        }
    }
    for (lo, hi) in PREDICATES {
        let got = aggregate(scanned.iter().map(|r| (r.row.key(), r.text.len())), lo, hi);
        let want = aggregate(
            reference.iter().map(|r| {
                (
                    r.key(),
                    if matches!(r, Row::Bench { .. }) {
                        66
                    } else {
                        84
                    },
                )
            }),
            lo,
            hi,
        );
        assert_eq!(got, want, "{dataset} a BETWEEN {lo} AND {hi}");
    }
    scanned
}

fn key_of(t: &IndexTuple<'_>, ty: ColumnType) -> f64 {
    t.first_key(ty).unwrap().unwrap().as_f64().unwrap()
}

fn tid_order(t: ItemPointer) -> u64 {
    ((t.block as u64) << 16) | t.offset as u64
}

/// Walks the btree: root → leftmost leaf via first downlinks, then right-links. Checks
/// page links, levels, high keys and ordering; returns `(key, heap TID)` in index order.
fn walk_btree(dir: &Path, m: &Manifest) -> (Vec<[u8; BLCKSZ]>, Vec<(f64, ItemPointer)>) {
    let ty = if m.key_type == "int4" {
        ColumnType::Int4
    } else {
        ColumnType::Float8
    };
    let pages = read_pages(&dir.join(m.index_relfilenode.to_string()), m.index_pages);
    let meta = BtMetaPage::parse(&pages[0]).unwrap();
    assert_eq!(meta.btm_root, m.index_root);
    assert_eq!(meta.btm_level, m.index_level);
    assert_eq!(meta.btm_fastroot, meta.btm_root);
    assert_eq!(meta.btm_allequalimage, m.key_type == "int4");
    let root = BtreePage::new(&pages[meta.btm_root as usize]).unwrap();
    assert!(root.opaque().btpo_flags & BTP_ROOT != 0);
    assert_eq!(root.opaque().btpo_level, meta.btm_level);

    // Every level: walk right from its leftmost page, checking links and high keys.
    let mut leftmost = meta.btm_root;
    let mut entries = Vec::new();
    for level in (0..=meta.btm_level).rev() {
        let mut blkno = leftmost;
        let mut prev = 0u32;
        let mut prev_high_key: Option<f64> = None;
        loop {
            let page = BtreePage::new(&pages[blkno as usize]).unwrap();
            let o = *page.opaque();
            assert_eq!(o.btpo_level, level);
            assert_eq!(o.btpo_prev, prev, "left link of block {blkno}");
            assert_eq!(o.btpo_flags & BTP_LEAF != 0, level == 0);
            let items = page.data_items().unwrap();
            assert!(items.len() >= 2 || o.is_rightmost());
            let high_key = page.high_key().unwrap().map(|h| key_of(&h, ty));
            if level > 0 {
                if prev == 0 {
                    leftmost = items[0].1.downlink();
                }
                // First item is minus infinity; the others carry increasing keys.
                assert_eq!(items[0].1.pivot_natts(), Some(0));
                let keys: Vec<f64> = items[1..].iter().map(|(_, t)| key_of(t, ty)).collect();
                assert!(keys.windows(2).all(|w| w[0] <= w[1]));
            } else {
                for (_, t) in &items {
                    assert!(!t.has_alt_tid(), "leaf tuples are plain");
                    let key = key_of(t, ty);
                    if let Some(h) = high_key {
                        assert!(key <= h, "key {key} above high key {h} on block {blkno}");
                    }
                    if let Some(p) = prev_high_key {
                        assert!(
                            key >= p,
                            "key {key} below left high key {p} on block {blkno}"
                        );
                    }
                    entries.push((key, t.t_tid));
                }
            }
            prev_high_key = high_key.or(prev_high_key);
            if o.is_rightmost() {
                break;
            }
            prev = blkno;
            blkno = o.btpo_next;
        }
    }
    // Index order is key, then heap TID, with no duplicates.
    assert!(entries
        .windows(2)
        .all(|w| (w[0].0, tid_order(w[0].1)) < (w[1].0, tid_order(w[1].1))));
    (pages, entries)
}

/// `a BETWEEN lo AND hi` through the index: descend from the root to the first leaf that
/// can hold `lo` (as `_bt_search` does), then follow right-links while keys ≤ hi.
fn index_range(pages: &[[u8; BLCKSZ]], m: &Manifest, lo: f64, hi: f64) -> Vec<ItemPointer> {
    let ty = if m.key_type == "int4" {
        ColumnType::Int4
    } else {
        ColumnType::Float8
    };
    let mut blkno = m.index_root;
    loop {
        let page = BtreePage::new(&pages[blkno as usize]).unwrap();
        if page.opaque().is_leaf() {
            break;
        }
        let items = page.data_items().unwrap();
        // The last pivot whose key is < lo (minus infinity always qualifies).
        let mut child = items[0].1.downlink();
        for (_, t) in &items[1..] {
            if key_of(t, ty) < lo {
                child = t.downlink();
            } else {
                break;
            }
        }
        blkno = child;
    }
    let mut out = Vec::new();
    loop {
        let page = BtreePage::new(&pages[blkno as usize]).unwrap();
        for (_, t) in page.data_items().unwrap() {
            let key = key_of(&t, ty);
            if key > hi {
                return out;
            }
            if key >= lo {
                out.extend(t.heap_tids().unwrap());
            }
        }
        if page.opaque().is_rightmost() {
            return out;
        }
        blkno = page.opaque().btpo_next;
    }
}

fn check_btree(dir: &Path, m: &Manifest, dataset: DataSet) {
    let (pages, entries) = walk_btree(dir, m);
    assert_eq!(entries.len() as u64, m.rows);
    let reference: Vec<Row> = dataset.rows(m.seed, m.rows).collect();
    let mut seen = HashSet::new();
    for (key, tid) in &entries {
        let i = tid.block as u64 * m.rows_per_page as u64 + tid.offset as u64 - 1;
        assert_eq!(reference[i as usize].key(), *key, "index entry for {tid:?}");
        assert!(seen.insert(tid_order(*tid)), "TID {tid:?} twice");
    }
    let ranges: Vec<(f64, f64)> = if dataset == DataSet::PgbenchAccounts {
        vec![(1.0, 1.0), (500.0, 40_000.0), (99_990.0, 200_000.0)]
    } else {
        PREDICATES.to_vec()
    };
    for (lo, hi) in ranges {
        let mut got: Vec<u64> = index_range(&pages, m, lo, hi)
            .into_iter()
            .map(tid_order)
            .collect();
        got.sort_unstable();
        let mut want: Vec<u64> = reference
            .iter()
            .enumerate()
            .filter(|(_, r)| r.key() >= lo && r.key() <= hi)
            .map(|(i, _)| tid_order(dataset.tid_of(i as u64)))
            .collect();
        want.sort_unstable();
        assert_eq!(got, want, "{dataset}: index range {lo}..={hi}");
    }
}

#[test]
fn every_dataset_scans_like_its_reference() {
    let dir = tempfile::tempdir().unwrap();
    for dataset in DataSet::ALL {
        let rows = 20_000;
        let m = generate(dir.path(), dataset, rows, 42);
        let ds_dir = dir.path().join(dataset.name());
        assert_eq!(Manifest::load(&ds_dir).unwrap(), m);
        if dataset == DataSet::PgbenchAccounts {
            // pgbench -i at scale 1: 1640 heap pages of 61 rows, a 276-page primary key.
            assert_eq!((m.rows, m.heap_pages, m.rows_per_page), (100_000, 1640, 61));
            assert_eq!((m.index_pages, m.index_level), (276, 1));
            assert_eq!(m.key_type, "int4");
        } else {
            // PostgreSQL 18 on the same table: 1112 heap pages, 57-page index, root 3.
            assert_eq!((m.rows, m.heap_pages, m.rows_per_page), (rows, 1112, 18));
            assert_eq!((m.index_pages, m.index_root, m.index_level), (57, 3, 1));
        }
        check_heap_against_reference(&ds_dir, &m, dataset);
        check_btree(&ds_dir, &m, dataset);
    }
}

#[test]
fn heap_pages_are_packed_like_postgresql() {
    let dir = tempfile::tempdir().unwrap();
    let m = generate(dir.path(), DataSet::Uniform, 100, 1);
    let pages = read_pages(&dir.path().join("uniform/16384"), m.heap_pages);
    let h = *PageRef::new(&pages[0]).unwrap().header();
    // The fixture's uniform block 0: lower 96, upper 6320, special 8192, all-visible.
    assert_eq!(
        (h.pd_lower, h.pd_upper, h.pd_special, h.pd_flags),
        (96, 6320, 8192, 4)
    );
}

#[test]
fn three_level_tree_with_duplicate_keys() {
    // cyclic repeats each key 100 times, so many leaf boundaries fall between equal keys
    // and need high keys with a heap TID; 120000 rows need two level-1 pages.
    let dir = tempfile::tempdir().unwrap();
    let m = generate(dir.path(), DataSet::Cyclic, 120_000, 7);
    assert_eq!(m.index_level, 2);
    check_btree(&dir.path().join("cyclic"), &m, DataSet::Cyclic);
}

#[test]
fn same_seed_same_bytes_with_every_io_method_and_other_seeds_differ() {
    let mut methods = vec![IoMethodKind::Sync, IoMethodKind::Worker];
    if pageio::aio::method::uring::probe().is_ok() {
        methods.push(IoMethodKind::IoUring);
    }
    let read = |dir: &Path| {
        (
            std::fs::read(dir.join("linear_10/16384")).unwrap(),
            std::fs::read(dir.join("linear_10/16385")).unwrap(),
        )
    };
    let mut first = None;
    for method in methods {
        let dir = tempfile::tempdir().unwrap();
        let opts = GenOptions {
            rows: 5000,
            seed: 3,
            ..GenOptions::default()
        };
        gen::generate(&aio(method), dir.path(), DataSet::Linear10, &opts, &|_| {}).unwrap();
        let files = read(dir.path());
        match &first {
            None => first = Some(files),
            Some(f) => assert!(f == &files, "{method:?} wrote different bytes"),
        }
    }
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path(), DataSet::Linear10, 5000, 4);
    let other = read(dir.path());
    let first = first.unwrap();
    assert_ne!(first.0, other.0);
    assert_ne!(first.1, other.1);
}

#[test]
fn refuses_to_overwrite_without_permission() {
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path(), DataSet::Linear, 1000, 1);
    let opts = GenOptions {
        rows: 500,
        ..GenOptions::default()
    };
    let err = gen::generate(
        &aio(IoMethodKind::Sync),
        dir.path(),
        DataSet::Linear,
        &opts,
        &|_| {},
    )
    .unwrap_err();
    assert!(err.to_string().contains("overwrite"), "{err}");
    // With overwrite the old, larger files are replaced, not partly overwritten.
    let m = generate(dir.path(), DataSet::Linear, 500, 1);
    let len = std::fs::metadata(dir.path().join("linear/16384"))
        .unwrap()
        .len();
    assert_eq!(len, m.heap_pages * BLCKSZ as u64);
}

#[test]
fn empty_table_has_an_empty_index() {
    let dir = tempfile::tempdir().unwrap();
    let m = generate(dir.path(), DataSet::Uniform, 0, 1);
    assert_eq!((m.heap_pages, m.index_pages, m.index_root), (0, 1, 0));
    let pages = read_pages(&dir.path().join("uniform/16385"), 1);
    assert_eq!(BtMetaPage::parse(&pages[0]).unwrap().btm_root, 0);
}

#[test]
fn float8_text_and_b_match_postgresql() {
    for (v, text) in [
        (12.5, "12.5"),
        (1e-5, "1e-05"),
        (0.0001, "0.0001"),
        (45678.123456789, "45678.123456789"),
        (100000.0, "100000"),
        (1e15, "1e+15"),
        (123456789012345.0, "123456789012345"),
        (-2.5e-7, "-2.5e-07"),
        (0.0, "0"),
        (-0.0, "-0"),
        (1e100, "1e+100"),
    ] {
        assert_eq!(gen::float8_out(v), text);
    }
    // sha256 of the text, checked against `printf 12.5 | sha256sum`.
    assert_eq!(
        gen::b_text(12.5),
        "\\xb902cc4550838229a710bfec4c38cbc7eb11082367a409df9135e7f007a96bda"
    );
    assert_eq!(
        gen::b_text(1e-5),
        "\\x5a9530d3c6d5faad6ba8afe16fb8e438df23865128370b2ec14ef622bb5f2ec9"
    );
}

#[test]
fn dataset_names_round_trip() {
    for d in DataSet::ALL {
        assert_eq!(d.to_string().parse::<DataSet>().unwrap(), d);
    }
    assert_eq!(DataSet::parse_list("all").unwrap().len(), 10);
    assert_eq!(
        DataSet::parse_list("uniform, linear_10,uniform").unwrap(),
        vec![DataSet::Uniform, DataSet::Linear10]
    );
    let err = "linear_5".parse::<DataSet>().unwrap_err().to_string();
    assert!(
        err.contains("linear_10") && err.contains("pgbench_accounts"),
        "{err}"
    );
}

#[test]
fn distributions_look_right() {
    // uniform: mean ≈ 50000; linear_10 noise: sd ≈ 10000 around x.
    let n = 50_000u64;
    let mean: f64 = DataSet::Uniform.rows(1, n).map(|r| r.key()).sum::<f64>() / n as f64;
    assert!((mean - 50_000.0).abs() < 1_000.0, "{mean}");
    let var: f64 = DataSet::Linear10
        .rows(1, n)
        .zip(DataSet::Linear.rows(1, n))
        .map(|(a, b)| (a.key() - b.key()).powi(2))
        .sum::<f64>()
        / n as f64;
    assert!((var.sqrt() - 10_000.0).abs() < 300.0, "{}", var.sqrt());
}

#[test]
fn writes_through_a_temporary_directory_and_never_deletes_foreign_files() {
    let dir = tempfile::tempdir().unwrap();
    // A leftover of a killed run (a process id that cannot be running) is cleaned up.
    let stale = dir.path().join(".uniform.partial-2147483646");
    std::fs::create_dir_all(&stale).unwrap();
    std::fs::write(stale.join("16384"), vec![0u8; 8192]).unwrap();
    let m = generate(dir.path(), DataSet::Uniform, 100, 1);
    assert!(!stale.exists(), "stale temporary directory removed");
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["uniform"], "only the finished data set is visible");
    m.check_files(&dir.path().join("uniform")).unwrap();

    // A directory holding someone else's file is not replaced, even with overwrite.
    std::fs::write(dir.path().join("uniform/notes.txt"), b"mine").unwrap();
    let opts = GenOptions {
        rows: 50,
        overwrite: true,
        ..GenOptions::default()
    };
    let err = gen::generate(
        &aio(IoMethodKind::Sync),
        dir.path(),
        DataSet::Uniform,
        &opts,
        &|_| {},
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("notes.txt") && err.contains("not a data-set directory"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(dir.path().join("uniform/notes.txt")).unwrap(),
        b"mine"
    );
    assert_eq!(
        Manifest::load(&dir.path().join("uniform")).unwrap().rows,
        100,
        "the old data set is untouched"
    );
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        ["uniform"],
        "no temporary directory left after the refusal"
    );
}
