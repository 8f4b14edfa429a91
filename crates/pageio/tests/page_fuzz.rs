//! No reader panics, whatever the bytes: arbitrary input and mutated real PostgreSQL pages
//! go through every parser in the page module.

mod common;

use std::sync::OnceLock;

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
