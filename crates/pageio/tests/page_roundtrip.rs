//! Writers produce what the readers (and PostgreSQL) expect: build → parse → same values.

use pageio::page::btree::{
    BtMetaPage, BtPageOpaque, BtreePage, BTP_LEAF, BTP_ROOT, BTREE_MAGIC, BTREE_VERSION,
};
use pageio::page::builder::{
    btree_metapage, index_tuple, pivot_tuple, posting_tuple, set_checksum, BtreePageBuilder,
    HeapTupleBuilder, PageBuilder,
};
use pageio::page::header::{LinePointerFlags, PD_ALL_VISIBLE};
use pageio::page::heap::{ColumnType, Datum, HeapTuple, HEAP_HASNULL, HEAP_HASVARWIDTH};
use pageio::page::varlena::{CompressionMethod, Varlena};
use pageio::page::{
    maxalign, verify_page, ItemPointer, Lsn, PageError, PageHeader, PageRef, PageVerification,
    BLCKSZ,
};

#[test]
fn empty_page_is_page_init() {
    let page = PageBuilder::new(0).unwrap().finish();
    let h = PageHeader::parse(&page).unwrap();
    assert_eq!((h.pd_lower, h.pd_upper, h.pd_special), (24, 8192, 8192));
    assert_eq!(h.pd_pagesize_version, 0x2004);
    // Same bytes as PostgreSQL's PageInit, so the same checksum as the reference vector.
    assert_eq!(pageio::page::pg_checksum_page(&page, 0), 25952);
}

#[test]
fn header_roundtrip() {
    let h = PageHeader {
        pd_lsn: Lsn((1 << 32) | 0x1D2C788),
        pd_checksum: 0xBEEF,
        pd_flags: 5,
        pd_lower: 40,
        pd_upper: 800,
        pd_special: 8176,
        pd_pagesize_version: 0x2004,
        pd_prune_xid: 77,
    };
    assert_eq!(PageHeader::parse(&h.to_bytes()).unwrap(), h);
    assert_eq!(h.pd_lsn.to_string(), "1/1D2C788");
}

#[test]
fn heap_rows_roundtrip_with_alignment_and_nulls() {
    let long_text = vec![b'L'; 300];
    let rows: Vec<Vec<Datum>> = vec![
        vec![Datum::Float8(1.5), Datum::text(b"hello")],
        vec![
            Datum::Bool(true),
            Datum::Int8(-9_000_000_000),
            Datum::Int2(-3),
            Datum::Int4(123_456),
            Datum::text(&long_text),
            Datum::Float8(f64::MAX),
        ],
        vec![
            Datum::Int2(7),
            Datum::Null,
            Datum::text(b""),
            Datum::Null,
            Datum::Int4(-1),
            Datum::Null,
            Datum::Null,
            Datum::Null,
            Datum::Float8(-0.25),
        ],
        vec![
            Datum::Bool(false),
            Datum::Varlena(Varlena::Compressed {
                raw_size_bytes: 5000,
                method: CompressionMethod::Pglz,
                data: &[1, 2, 3, 4],
            }),
            Datum::Varlena(Varlena::External {
                raw_size_bytes: 70_004,
                ext_size_bytes: 70_000,
                method: CompressionMethod::Pglz,
                value_id: 99,
                toast_relid: 16_400,
            }),
        ],
    ];
    let mut page = PageBuilder::new(0).unwrap();
    page.set_flags(PD_ALL_VISIBLE);
    page.set_lsn(Lsn(0x1D2C788));
    let mut offnums = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        let tuple = HeapTupleBuilder::new()
            .ctid(ItemPointer {
                block: 5,
                offset: i as u16 + 1,
            })
            .build(row)
            .unwrap();
        offnums.push(page.add_item(&tuple).unwrap());
    }
    let mut bytes = page.finish();
    set_checksum(&mut bytes, 5);
    assert_eq!(verify_page(&bytes, 5, true), PageVerification::Valid);
    assert!(!verify_page(&bytes, 6, true).is_ok());

    let view = PageRef::new(&bytes).unwrap();
    assert_eq!(view.header().pd_lsn, Lsn(0x1D2C788));
    for ((row, offnum), i) in rows.iter().zip(&offnums).zip(1u16..) {
        assert_eq!(*offnum, i);
        let id = view.item_id(*offnum).unwrap();
        assert_eq!(id.lp_flags, LinePointerFlags::Normal);
        assert_eq!(id.lp_off as usize % 8, 0, "tuples are MAXALIGNed");
        let tuple = HeapTuple::parse(view.item(*offnum).unwrap()).unwrap();
        let h = tuple.header();
        assert_eq!(h.natts(), row.len());
        assert_eq!(h.t_xmin, 2);
        assert_eq!(
            h.t_ctid,
            ItemPointer {
                block: 5,
                offset: i
            }
        );
        assert_eq!(h.t_hoff as usize, maxalign(h.t_hoff as usize));
        assert_eq!(
            h.t_infomask & HEAP_HASNULL != 0,
            row.iter().any(Datum::is_null)
        );
        assert_eq!(
            h.t_infomask & HEAP_HASVARWIDTH != 0,
            row.iter().any(|d| matches!(d, Datum::Varlena(_)))
        );
        let types: Vec<ColumnType> = row
            .iter()
            .map(|d| d.column_type().unwrap_or(ColumnType::Int8))
            .collect();
        assert_eq!(&tuple.deform(&types).unwrap(), row);
        // Columns beyond the tuple's natts (added by ALTER TABLE) read as NULL.
        let mut wider = types.clone();
        wider.push(ColumnType::Int4);
        assert_eq!(tuple.deform(&wider).unwrap().last(), Some(&Datum::Null));
    }
}

#[test]
fn page_full_is_an_error() {
    let mut page = PageBuilder::new(0).unwrap();
    let item = vec![1u8; 1000];
    let mut added = 0;
    loop {
        match page.add_item(&item) {
            Ok(_) => added += 1,
            Err(PageError::PageFull { .. }) => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(added, (BLCKSZ - 24) / (1000usize.next_multiple_of(8) + 4));
}

#[test]
fn btree_pages_roundtrip() {
    // A two-level tree: root (block 3) → leaves 1 and 2, like PostgreSQL's layout.
    let meta = BtMetaPage {
        btm_magic: BTREE_MAGIC,
        btm_version: BTREE_VERSION,
        btm_root: 3,
        btm_level: 1,
        btm_fastroot: 3,
        btm_fastlevel: 1,
        btm_last_cleanup_num_delpages: 0,
        btm_last_cleanup_num_heap_tuples: -1.0,
        btm_allequalimage: true,
    };
    let mut meta_page = btree_metapage(&meta).unwrap();
    set_checksum(&mut meta_page, 0);
    assert_eq!(BtMetaPage::parse(&meta_page).unwrap(), meta);
    assert_eq!(PageHeader::parse(&meta_page).unwrap().pd_lower, 72);
    assert!(verify_page(&meta_page, 0, true).is_ok());
    let meta_opaque = BtreePage::new(&meta_page).unwrap();
    assert!(meta_opaque.opaque().is_meta());

    let tid = |block, offset| ItemPointer { block, offset };
    // Leaf 1 (has right sibling 2): high key 10.0, then keys 1.0, 5.0 (posting), 10.0.
    let mut leaf1 = BtreePageBuilder::new(BtPageOpaque {
        btpo_next: 2,
        btpo_flags: BTP_LEAF,
        ..Default::default()
    })
    .unwrap();
    leaf1
        .add_tuple(&pivot_tuple(0, Some(&Datum::Float8(10.0))).unwrap())
        .unwrap();
    leaf1
        .add_tuple(&index_tuple(tid(0, 1), &Datum::Float8(1.0)).unwrap())
        .unwrap();
    let posting = posting_tuple(&Datum::Float8(5.0), &[tid(0, 2), tid(0, 3), tid(1, 1)]).unwrap();
    leaf1.add_tuple(&posting).unwrap();
    leaf1
        .add_tuple(&index_tuple(tid(1, 2), &Datum::Float8(10.0)).unwrap())
        .unwrap();
    let leaf1 = leaf1.finish();

    let mut leaf2 = BtreePageBuilder::new(BtPageOpaque {
        btpo_prev: 1,
        btpo_flags: BTP_LEAF,
        ..Default::default()
    })
    .unwrap();
    leaf2
        .add_tuple(&index_tuple(tid(1, 3), &Datum::Float8(20.0)).unwrap())
        .unwrap();
    leaf2
        .add_tuple(&index_tuple(tid(1, 4), &Datum::Null).unwrap())
        .unwrap();
    let leaf2 = leaf2.finish();

    let mut root = BtreePageBuilder::new(BtPageOpaque {
        btpo_level: 1,
        btpo_flags: BTP_ROOT,
        ..Default::default()
    })
    .unwrap();
    root.add_tuple(&pivot_tuple(1, None).unwrap()).unwrap();
    root.add_tuple(&pivot_tuple(2, Some(&Datum::Float8(10.0))).unwrap())
        .unwrap();
    let root = root.finish();

    let root = BtreePage::new(&root).unwrap();
    assert!(root.high_key().unwrap().is_none());
    let pivots = root.data_items().unwrap();
    assert_eq!(pivots.len(), 2);
    assert_eq!(pivots[0].1.downlink(), 1);
    assert_eq!(pivots[0].1.pivot_natts(), Some(0));
    assert_eq!(pivots[0].1.size_bytes(), 8);
    assert_eq!(pivots[1].1.downlink(), 2);
    assert_eq!(
        pivots[1].1.first_key(ColumnType::Float8).unwrap(),
        Some(Datum::Float8(10.0))
    );

    let leaf1 = BtreePage::new(&leaf1).unwrap();
    assert_eq!(leaf1.opaque().first_data_offnum(), 2);
    let hk = leaf1.high_key().unwrap().unwrap();
    assert!(hk.is_pivot());
    assert_eq!(
        hk.first_key(ColumnType::Float8).unwrap(),
        Some(Datum::Float8(10.0))
    );
    let items = leaf1.data_items().unwrap();
    let keys: Vec<_> = items
        .iter()
        .map(|(_, t)| t.first_key(ColumnType::Float8).unwrap())
        .collect();
    assert_eq!(
        keys,
        vec![
            Some(Datum::Float8(1.0)),
            Some(Datum::Float8(5.0)),
            Some(Datum::Float8(10.0))
        ]
    );
    let posting = &items[1].1;
    assert!(posting.is_posting());
    assert_eq!(posting.posting_count(), 3);
    assert_eq!(posting.posting_offset(), Some(16));
    assert_eq!(
        posting.heap_tids().unwrap(),
        vec![tid(0, 2), tid(0, 3), tid(1, 1)]
    );
    assert_eq!(items[0].1.heap_tids().unwrap(), vec![tid(0, 1)]);

    let leaf2 = BtreePage::new(&leaf2).unwrap();
    assert_eq!(leaf2.opaque().first_data_offnum(), 1);
    let items = leaf2.data_items().unwrap();
    assert!(items[1].1.has_nulls());
    assert_eq!(items[1].1.first_key(ColumnType::Float8).unwrap(), None);
    assert_eq!(items[1].1.heap_tids().unwrap(), vec![tid(1, 4)]);
}

#[test]
fn verify_reports_each_failure_kind() {
    let mut page = PageBuilder::new(0).unwrap().finish();
    set_checksum(&mut page, 0);
    assert_eq!(verify_page(&page, 0, true), PageVerification::Valid);

    let zero = [0u8; BLCKSZ];
    assert_eq!(verify_page(&zero, 0, true), PageVerification::New);

    let mut new_but_dirty = zero;
    new_but_dirty[4000] = 1;
    assert_eq!(
        verify_page(&new_but_dirty, 0, true),
        PageVerification::NonZeroNewPage {
            first_nonzero_offset: 4000
        }
    );

    // Bad header with a matching checksum is reported as a bad header.
    let mut bad_special = page;
    bad_special[16..18].copy_from_slice(&8190u16.to_le_bytes());
    bad_special[14..16].copy_from_slice(&8000u16.to_le_bytes());
    set_checksum(&mut bad_special, 0);
    assert!(matches!(
        verify_page(&bad_special, 0, true),
        PageVerification::BadHeader { reason } if reason.contains("MAXALIGN")
    ));

    // With a stale checksum the checksum failure wins, as in PostgreSQL.
    let mut bad_flags = page;
    bad_flags[10] = 0x08;
    assert!(matches!(
        verify_page(&bad_flags, 0, true),
        PageVerification::ChecksumMismatch { .. }
    ));
    assert!(matches!(
        verify_page(&bad_flags, 0, false),
        PageVerification::BadHeader { .. }
    ));

    let mut lower_above_upper = page;
    lower_above_upper[12..14].copy_from_slice(&9000u16.to_le_bytes());
    match verify_page(&lower_above_upper, 0, false) {
        PageVerification::BadHeader { reason } => {
            assert_eq!(reason, "pd_lower 9000 beyond pd_upper 8192")
        }
        other => panic!("{other:?}"),
    }
    match PageRef::new(&lower_above_upper) {
        Err(e) => assert_eq!(e.to_string(), "pd_lower 9000 beyond page size 8192"),
        Ok(_) => panic!("accepted pd_lower 9000"),
    }
}
