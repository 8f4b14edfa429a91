//! No reader panics, whatever the bytes: arbitrary input and mutated real PostgreSQL pages
//! go through every parser in the page module — and whole small relations (a generated heap
//! and its btree) with random byte and field mutations across pages, checksums recomputed so
//! the structure is what gets exercised, go through every scan kind, which must return Ok or
//! a typed error within a time bound (never panic, never hang).

mod common;

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use pageio::page::btree::{BtMetaPage, BtPageOpaque, BtreePage, IndexTuple};
use pageio::page::heap::{ColumnType, HeapTuple, HeapTupleHeader};
use pageio::page::varlena::Varlena;
use pageio::page::verify::verify_slice;
use pageio::page::{pg_checksum_slice, verify_page, ItemId, PageHeader, PageRef, BLCKSZ};
use proptest::prelude::*;

/// Column lists exercised against every tuple: the fixture's own and some awkward ones.
const SCHEMAS: &[&[ColumnType]] = &[
    &[ColumnType::Float8, ColumnType::Text],
    &[ColumnType::Text, ColumnType::Text, ColumnType::Text],
    &[
        ColumnType::Bool,
        ColumnType::Int2,
        ColumnType::Int4,
        ColumnType::Int8,
        ColumnType::Text,
        ColumnType::Float8,
    ],
    &[ColumnType::Varlena { align_bytes: 8 }, ColumnType::Int8],
];

const KEY_TYPES: &[ColumnType] = &[
    ColumnType::Float8,
    ColumnType::Int4,
    ColumnType::Int8,
    ColumnType::Text,
];

/// Calls every parser on `bytes`; results are ignored, only panics matter.
fn exercise(bytes: &[u8]) {
    let _ = PageHeader::parse(bytes);
    let _ = pg_checksum_slice(bytes, 7);
    let _ = verify_slice(bytes, 7, true);
    let _ = verify_slice(bytes, 7, false);
    let _ = BtMetaPage::parse(bytes);
    let _ = BtPageOpaque::parse(bytes);
    let _ = HeapTupleHeader::parse(bytes);
    exercise_item(bytes);
    for start in (0..bytes.len().min(64)).step_by(3) {
        let _ = Varlena::decode(&bytes[start..]);
    }
    if let Ok(page) = PageRef::new(bytes) {
        let _ = page.special();
        for (offnum, id) in page.item_ids() {
            let _ = ItemId::from_u32(id.to_u32());
            if let Ok(item) = page.item_bytes(offnum, id) {
                exercise_item(item);
            }
        }
        let _ = page.item(0);
        let _ = page.item(u16::MAX);
    }
    if let Ok(btree) = BtreePage::new(bytes) {
        let _ = btree.high_key();
        let _ = btree.data_items();
    }
}

/// Interprets `item` as a heap tuple and as an index tuple.
fn exercise_item(item: &[u8]) {
    if let Ok(tuple) = HeapTuple::parse(item) {
        for schema in SCHEMAS {
            let _ = tuple.deform(schema);
        }
    }
    if let Ok(tuple) = IndexTuple::parse(item) {
        let _ = tuple.posting_list();
        let _ = tuple.heap_tids();
        let _ = tuple.pivot_natts();
        for &ty in KEY_TYPES {
            let _ = tuple.first_key(ty);
        }
    }
}

/// Real pages: heap, btree metapage, btree root and a btree leaf, read once per process.
fn real_pages() -> &'static [[u8; BLCKSZ]] {
    static PAGES: OnceLock<Vec<[u8; BLCKSZ]>> = OnceLock::new();
    PAGES.get_or_init(|| {
        let (_dir, pgdata) = common::unpack_fixture();
        let facts = common::fixture_facts();
        let heap = common::read_pages(&pgdata.join(facts.path("uniform")));
        let index = common::read_pages(&pgdata.join(facts.path("uniform_a")));
        vec![heap[0], heap[500], index[0], index[3], index[1], index[20]]
    })
}

fn mutations() -> impl Strategy<Value = Vec<(usize, u8)>> {
    // Half of the mutations land in the header and line pointers, where one byte changes
    // the meaning of the whole page; the rest anywhere.
    let position = prop_oneof![0usize..200, 0usize..BLCKSZ];
    prop::collection::vec((position, any::<u8>()), 1..24)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        exercise(&bytes);
        // And as the start of a full page, so the page-level readers get past the size check.
        let mut page = [0u8; BLCKSZ];
        page[..bytes.len()].copy_from_slice(&bytes);
        exercise(&page);
    }

    #[test]
    fn mutated_real_pages_never_panic(which in 0usize..6, edits in mutations()) {
        let mut page = real_pages()[which];
        for (pos, value) in edits {
            page[pos] = value;
        }
        exercise(&page);
        let _ = verify_page(&page, 0, true);
    }

    #[test]
    fn mutated_tuples_never_panic(which in 0usize..6, offnum in 1u16..20, edits in prop::collection::vec((0usize..64, any::<u8>()), 1..8), cut in 0usize..120) {
        let page = &real_pages()[which];
        let Ok(view) = PageRef::new(page) else { return Ok(()) };
        let Ok(item) = view.item(offnum) else { return Ok(()) };
        let mut item = item.to_vec();
        for (pos, value) in edits {
            if pos < item.len() {
                item[pos] = value;
            }
        }
        item.truncate(item.len().saturating_sub(cut % (item.len() + 1)));
        exercise_item(&item);
    }
}

// ---------------------------------------------------------------------------------------
// Whole relations: a generated `uniform` table of RELATION_ROWS rows (67 heap pages, a btree
// of a root over 4 leaves), mutated and scanned.

use pageio::config::{IoConfig, IoMethodKind};
use pageio::gen::{generate, DataSet, GenOptions};
use pageio::page::builder::set_checksum;
use pageio::scan::{Between, ScanKind, Table};
use pageio::storage::RelFile;
use pageio::Aio;
use proptest::test_runner::{Config as RunnerConfig, TestRunner};

/// Rows of the fuzzed table: enough for a two-level btree (366 TIDs per leaf), small enough
/// that one case (write the files, three scans) takes a few milliseconds.
const RELATION_ROWS: u64 = 1200;
/// Cases per run: a few hundred keeps the whole suite fast.
const RELATION_CASES: u32 = 300;
/// One case scans 67 heap pages three times; a second means something loops.
const CASE_BOUND: Duration = Duration::from_secs(5);
/// The whole run, under the watchdog: far above RELATION_CASES × a few ms.
const RUN_BOUND_SECS: u64 = 120;

/// The generated heap and btree, as bytes.
fn relation() -> &'static (Vec<u8>, Vec<u8>) {
    static REL: OnceLock<(Vec<u8>, Vec<u8>)> = OnceLock::new();
    REL.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let aio = Aio::new(IoConfig::default()).unwrap();
        let opts = GenOptions {
            rows: RELATION_ROWS,
            seed: 11,
            scale: 1,
            overwrite: true,
        };
        let m = generate(&aio, dir.path(), DataSet::Uniform, &opts, &|_| {}).unwrap();
        let ddir = dir.path().join(DataSet::Uniform.name());
        let heap = std::fs::read(m.heap_file(&ddir).path()).unwrap();
        let index = std::fs::read(m.index_file(&ddir).path()).unwrap();
        (heap, index)
    })
}

/// One mutation of the relation's files.
#[derive(Debug, Clone)]
enum Edit {
    /// Any byte of either file (`index` picks the btree).
    Byte { index: bool, pos: usize, value: u8 },
    /// A btree page's right link.
    RightLink { block: u32, to: u32 },
    /// A btree page's level.
    Level { block: u32, level: u32 },
    /// A btree page's flags (leaf, root, deleted, half-dead, …).
    Flags { block: u32, flags: u16 },
    /// A downlink (or heap TID) of a btree item.
    ItemTid { block: u32, offnum: u16, to: u32 },
    /// The metapage's root and level.
    MetaRoot { root: u32, level: u32 },
    /// A heap line pointer rewritten with these flags and target (redirects, dead, unused).
    LinePointer {
        block: u32,
        offnum: u16,
        flags: u8,
        target: u16,
    },
    /// A heap tuple made HOT-updated-and-dead with its successor at `next`.
    HotChain { block: u32, offnum: u16, next: u16 },
    /// The first bytes of a heap tuple's `b` value (varlena header and sizes).
    Value {
        block: u32,
        offnum: u16,
        bytes: [u8; 8],
    },
}

fn edits(
    heap_blocks: u32,
    index_blocks: u32,
    heap_len: usize,
    index_len: usize,
) -> impl Strategy<Value = Vec<Edit>> {
    // Links aim mostly inside the relation (cycles, wrong levels) and sometimes just past it.
    let ib = 0..index_blocks;
    let to = 0..index_blocks + 3;
    let hb = 0..heap_blocks;
    let edit = prop_oneof![
        (any::<bool>(), any::<prop::sample::Index>(), any::<u8>()).prop_map(
            move |(index, at, value)| Edit::Byte {
                index,
                pos: at.index(if index { index_len } else { heap_len }),
                value
            }
        ),
        (ib.clone(), to.clone()).prop_map(|(block, to)| Edit::RightLink { block, to }),
        (ib.clone(), 0u32..4).prop_map(|(block, level)| Edit::Level { block, level }),
        (ib.clone(), 0u16..0x200).prop_map(|(block, flags)| Edit::Flags { block, flags }),
        (ib.clone(), 1u16..8, to.clone()).prop_map(|(block, offnum, to)| Edit::ItemTid {
            block,
            offnum,
            to
        }),
        (to.clone(), 0u32..4).prop_map(|(root, level)| Edit::MetaRoot { root, level }),
        (hb.clone(), 1u16..20, 0u8..4, 0u16..22).prop_map(|(block, offnum, flags, target)| {
            Edit::LinePointer {
                block,
                offnum,
                flags,
                target,
            }
        }),
        (hb.clone(), 1u16..20, 0u16..22).prop_map(|(block, offnum, next)| Edit::HotChain {
            block,
            offnum,
            next
        }),
        (hb, 1u16..20, any::<[u8; 8]>()).prop_map(|(block, offnum, bytes)| Edit::Value {
            block,
            offnum,
            bytes
        }),
    ];
    prop::collection::vec(edit, 1..6)
}

fn page_mut(file: &mut [u8], block: u32) -> Option<&mut [u8; BLCKSZ]> {
    let at = block as usize * BLCKSZ;
    file.get_mut(at..at + BLCKSZ)
        .and_then(|p| p.try_into().ok())
}

/// Byte offset of line pointer `offnum`'s item, if the line pointer exists.
fn item_offset(page: &[u8], offnum: u16) -> Option<usize> {
    let lower = u16::from_le_bytes([page[12], page[13]]) as usize;
    let at = 24 + 4 * (offnum as usize - 1);
    if at + 4 > lower.min(BLCKSZ) {
        return None;
    }
    let raw = u32::from_le_bytes(page[at..at + 4].try_into().unwrap());
    let off = (raw & 0x7FFF) as usize;
    (off >= 24 && off + 40 <= BLCKSZ).then_some(off)
}

/// Applies the edits; returns the (file, block) pages touched, for checksums.
fn apply(heap: &mut [u8], index: &mut [u8], edits: &[Edit]) -> Vec<(bool, u32)> {
    let mut touched = Vec::new();
    let put32 = |p: &mut [u8], at: usize, v: u32| p[at..at + 4].copy_from_slice(&v.to_le_bytes());
    let put16 = |p: &mut [u8], at: usize, v: u16| p[at..at + 2].copy_from_slice(&v.to_le_bytes());
    let opaque = BLCKSZ - 16;
    for e in edits {
        match *e {
            Edit::Byte {
                index: is_index,
                pos,
                value,
            } => {
                let file: &mut [u8] = if is_index { index } else { heap };
                file[pos] = value;
                touched.push((is_index, (pos / BLCKSZ) as u32));
            }
            Edit::RightLink { block, to } => {
                if let Some(p) = page_mut(index, block) {
                    put32(p, opaque + 4, to);
                    touched.push((true, block));
                }
            }
            Edit::Level { block, level } => {
                if let Some(p) = page_mut(index, block) {
                    put32(p, opaque + 8, level);
                    touched.push((true, block));
                }
            }
            Edit::Flags { block, flags } => {
                if let Some(p) = page_mut(index, block) {
                    put16(p, opaque + 12, flags);
                    touched.push((true, block));
                }
            }
            Edit::ItemTid { block, offnum, to } => {
                if let Some(p) = page_mut(index, block) {
                    if let Some(at) = item_offset(p, offnum) {
                        put16(p, at, (to >> 16) as u16);
                        put16(p, at + 2, to as u16);
                        touched.push((true, block));
                    }
                }
            }
            Edit::MetaRoot { root, level } => {
                if let Some(p) = page_mut(index, 0) {
                    put32(p, 24 + 8, root);
                    put32(p, 24 + 12, level);
                    put32(p, 24 + 16, root);
                    put32(p, 24 + 20, level);
                    touched.push((true, 0));
                }
            }
            Edit::LinePointer {
                block,
                offnum,
                flags,
                target,
            } => {
                if let Some(p) = page_mut(heap, block) {
                    let lower = u16::from_le_bytes([p[12], p[13]]) as usize;
                    let at = 24 + 4 * (offnum as usize - 1);
                    if at + 4 <= lower.min(BLCKSZ) {
                        let old = u32::from_le_bytes(p[at..at + 4].try_into().unwrap());
                        let raw = match flags {
                            // LP_REDIRECT: lp_off is the target, no length.
                            2 => target as u32 | (2 << 15),
                            f => (old & !(3 << 15)) | ((f as u32) << 15),
                        };
                        put32(p, at, raw);
                        touched.push((false, block));
                    }
                }
            }
            Edit::HotChain {
                block,
                offnum,
                next,
            } => {
                if let Some(p) = page_mut(heap, block) {
                    if let Some(at) = item_offset(p, offnum) {
                        put16(p, at + 12, (block >> 16) as u16);
                        put16(p, at + 14, block as u16);
                        put16(p, at + 16, next);
                        let mask2 = u16::from_le_bytes([p[at + 18], p[at + 19]]) | 0x4000;
                        put16(p, at + 18, mask2);
                        // xmax committed, not invalid: the tuple is dead, so chains are followed.
                        let mask =
                            (u16::from_le_bytes([p[at + 20], p[at + 21]]) | 0x0400) & !0x0800;
                        put16(p, at + 20, mask);
                        touched.push((false, block));
                    }
                }
            }
            Edit::Value {
                block,
                offnum,
                bytes,
            } => {
                if let Some(p) = page_mut(heap, block) {
                    if let Some(at) = item_offset(p, offnum) {
                        p[at + 32..at + 40].copy_from_slice(&bytes);
                        touched.push((false, block));
                    }
                }
            }
        }
    }
    touched
}

#[test]
fn mutated_relations_scan_to_ok_or_error_in_bounded_time() {
    common::with_watchdog("relation fuzz", RUN_BOUND_SECS, || {
        let (heap0, index0) = relation();
        let heap_blocks = (heap0.len() / BLCKSZ) as u32;
        let index_blocks = (index0.len() / BLCKSZ) as u32;
        assert!(index_blocks >= 4, "the btree has a root over leaves");
        // One AIO instance per method for the whole run; a small pool per case.
        let aios: Vec<Aio> = IoMethodKind::CONCRETE
            .iter()
            .map(|&m| {
                Aio::new(IoConfig {
                    io_method: m,
                    shared_buffers_bytes: 2 << 20,
                    ..IoConfig::default()
                })
                .unwrap()
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let mut runner = TestRunner::new(RunnerConfig {
            cases: RELATION_CASES,
            failure_persistence: None,
            ..RunnerConfig::default()
        });
        let strategy = (
            0usize..aios.len(),
            edits(heap_blocks, index_blocks, heap0.len(), index0.len()),
        );
        let case_no = std::sync::atomic::AtomicU64::new(0);
        // Outcomes, to check the mutations reach both the happy and the error paths.
        let (oks, errs) = (
            std::sync::atomic::AtomicU64::new(0),
            std::sync::atomic::AtomicU64::new(0),
        );
        runner
            .run(&strategy, |(method, edits)| {
                let case_no = case_no.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let mut heap = heap0.clone();
                let mut index = index0.clone();
                for (is_index, block) in apply(&mut heap, &mut index, &edits) {
                    let file: &mut [u8] = if is_index { &mut index } else { &mut heap };
                    if let Some(p) = page_mut(file, block) {
                        set_checksum(p, block);
                    }
                }
                let case_dir = dir.path().join(case_no.to_string());
                std::fs::create_dir(&case_dir).unwrap();
                std::fs::write(case_dir.join("16384"), &heap).unwrap();
                std::fs::write(case_dir.join("16385"), &index).unwrap();
                let table = Table {
                    heap: RelFile::new(case_dir.join("16384")),
                    index: Some(RelFile::new(case_dir.join("16385"))),
                    columns: vec![ColumnType::Float8, ColumnType::Text],
                    transactions: None,
                };
                let pool = common::checksum_pool(&aios[method]);
                let start = Instant::now();
                for kind in [ScanKind::Seq, ScanKind::Bitmap, ScanKind::Index] {
                    // Ok or a typed error are both fine; a panic fails the case.
                    let outcome = common::scan(&pool, &table, kind, Between::ALL);
                    let counter = if outcome.is_ok() { &oks } else { &errs };
                    counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                let elapsed = start.elapsed();
                prop_assert!(
                    elapsed < CASE_BOUND,
                    "three scans took {elapsed:?} on {edits:?}"
                );
                std::fs::remove_dir_all(&case_dir).unwrap();
                Ok(())
            })
            .unwrap();
        let (oks, errs) = (oks.into_inner(), errs.into_inner());
        assert!(oks > 0 && errs > 0, "{oks} scans succeeded, {errs} failed");
    })
}
