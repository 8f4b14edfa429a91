//! Writers: pages, heap tuples, btree tuples and pages, metapages, checksums.
//!
//! # Problem
//!
//! Tests, benchmarks and the table generator need pages PostgreSQL itself would accept —
//! the same layout `PageInit`/`PageAddItem`/`heap_form_tuple`/`index_form_tuple` produce —
//! without running PostgreSQL. Getting the writers wrong would hide reader bugs (a reader and
//! writer sharing one mistake round-trip happily), so each writer mirrors the PostgreSQL
//! function it stands for and the tests check the readers against real PostgreSQL pages too.
//!
//! # Mechanism
//!
//! ```text
//!  PageBuilder::new(special)   PageInit: zero page, pd_lower = 24,
//!                              pd_upper = pd_special = 8192 − MAXALIGN(special)
//!  add_item(bytes)             PageAddItem: line pointer at pd_lower (+4),
//!                              item at pd_upper − MAXALIGN(len) (grows downwards)
//!  HeapTupleBuilder::build     heap_form_tuple: header, null bitmap, t_hoff = MAXALIGN,
//!                              values with typalign padding, short varlena headers ≤ 127 B
//!  index_tuple / pivot_tuple / posting_tuple       index_form_tuple and nbtree's pivot forms
//!  BtreePageBuilder / btree_metapage               _bt_pageinit / _bt_initmetapage
//!  set_checksum(page, blkno)   PageSetChecksumInplace
//! ```
//!
//! # Worked example
//!
//! A leaf page with one float8 key 42.0 pointing at heap TID (0,1): the tuple is
//! 8 header bytes + 8 key bytes = 16 bytes, `t_info` = 16; the page gets 16 bytes of special
//! space, so pd_special = pd_upper-before-insert = 8176 and the item lands at 8160.
//!
//! ```
//! use pageio::page::builder::{index_tuple, BtreePageBuilder};
//! use pageio::page::btree::{BtPageOpaque, BtreePage, BTP_LEAF, BTP_ROOT};
//! use pageio::page::heap::{ColumnType, Datum};
//! use pageio::page::ItemPointer;
//!
//! let opaque = BtPageOpaque { btpo_flags: BTP_LEAF | BTP_ROOT, ..Default::default() };
//! let mut page = BtreePageBuilder::new(opaque).unwrap();
//! let tuple = index_tuple(ItemPointer { block: 0, offset: 1 }, &Datum::Float8(42.0)).unwrap();
//! assert_eq!(page.add_tuple(&tuple).unwrap(), 1);
//! let bytes = page.finish();
//! let leaf = BtreePage::new(&bytes).unwrap();
//! let items = leaf.data_items().unwrap();
//! assert_eq!(items[0].1.first_key(ColumnType::Float8).unwrap(), Some(Datum::Float8(42.0)));
//! ```

use super::btree::{
    BtMetaPage, BtPageOpaque, BTP_META, BT_IS_POSTING, BT_OFFSET_MASK, INDEX_ALT_TID_MASK,
    INDEX_NULL_MASK, INDEX_SIZE_MASK, INDEX_VAR_MASK, SIZE_OF_BT_META, SIZE_OF_BT_OPAQUE,
    SIZE_OF_INDEX_NULL_BITMAP, SIZE_OF_INDEX_TUPLE,
};
use super::checksum::{pg_checksum_page, PD_CHECKSUM_OFFSET};
use super::header::{
    ItemId, ItemPointer, LinePointerFlags, Lsn, PageHeader, PG_PAGE_LAYOUT_VERSION,
    SIZE_OF_ITEM_ID, SIZE_OF_PAGE_HEADER,
};
use super::heap::{
    bitmap_len_bytes, Datum, HeapTupleHeader, FROZEN_TRANSACTION_ID, HEAP_HASEXTERNAL,
    HEAP_HASNULL, HEAP_HASVARWIDTH, HEAP_XMAX_INVALID, HEAP_XMIN_COMMITTED,
    MAX_HEAP_ATTRIBUTE_NUMBER, SIZEOF_HEAP_TUPLE_HEADER,
};
use super::varlena::Varlena;
use super::{align_up, maxalign, PageError, Result, BLCKSZ};

/// Largest item `PageAddItem` accepts: lp_len has 15 bits and the item must fit on a page.
pub const MAX_ITEM_SIZE_BYTES: usize = BLCKSZ - SIZE_OF_PAGE_HEADER - SIZE_OF_ITEM_ID;

/// Builds one page the way `PageInit` and `PageAddItem` do.
#[derive(Debug, Clone)]
pub struct PageBuilder {
    page: Box<[u8; BLCKSZ]>,
    header: PageHeader,
}

impl PageBuilder {
    /// `PageInit(page, BLCKSZ, special_size_bytes)`: an empty page with MAXALIGNed special
    /// space at the end.
    pub fn new(special_size_bytes: usize) -> Result<Self> {
        let special = maxalign(special_size_bytes);
        if special > BLCKSZ - SIZE_OF_PAGE_HEADER {
            return Err(PageError::Unencodable {
                problem: format!("special space of {special_size_bytes} bytes does not fit a page"),
            });
        }
        let pd_special = (BLCKSZ - special) as u16;
        let header = PageHeader {
            pd_lower: SIZE_OF_PAGE_HEADER as u16,
            pd_upper: pd_special,
            pd_special,
            pd_pagesize_version: BLCKSZ as u16 | PG_PAGE_LAYOUT_VERSION as u16,
            ..PageHeader::default()
        };
        Ok(Self {
            page: Box::new([0u8; BLCKSZ]),
            header,
        })
    }

    /// The header as it will be written.
    pub fn header(&self) -> &PageHeader {
        &self.header
    }

    /// Sets pd_lsn.
    pub fn set_lsn(&mut self, lsn: Lsn) {
        self.header.pd_lsn = lsn;
    }

    /// Sets pd_flags (e.g. [`super::header::PD_ALL_VISIBLE`]).
    pub fn set_flags(&mut self, flags: u16) {
        self.header.pd_flags = flags;
    }

    /// Sets pd_prune_xid.
    pub fn set_prune_xid(&mut self, xid: u32) {
        self.header.pd_prune_xid = xid;
    }

    /// The special space, for the access method to fill in.
    pub fn special_mut(&mut self) -> &mut [u8] {
        &mut self.page[self.header.pd_special as usize..]
    }

    /// Free bytes between the line pointer array and tuple storage.
    pub fn free_space_bytes(&self) -> usize {
        self.header.free_space_bytes()
    }

    /// True if an item of `len_bytes` (plus its line pointer) still fits.
    pub fn fits(&self, len_bytes: usize) -> bool {
        len_bytes <= MAX_ITEM_SIZE_BYTES
            && SIZE_OF_ITEM_ID + maxalign(len_bytes) <= self.free_space_bytes()
    }

    /// `PageAddItem` at the next offset number: appends a `LP_NORMAL` line pointer and copies
    /// `item` to the MAXALIGNed position just below pd_upper. Returns the 1-based offset
    /// number.
    pub fn add_item(&mut self, item: &[u8]) -> Result<u16> {
        let needed_bytes = SIZE_OF_ITEM_ID + maxalign(item.len());
        if item.is_empty() || !self.fits(item.len()) {
            return Err(PageError::PageFull {
                needed_bytes,
                free_bytes: self.free_space_bytes(),
            });
        }
        let upper = self.header.pd_upper as usize - maxalign(item.len());
        let lower = self.header.pd_lower as usize;
        self.page[upper..upper + item.len()].copy_from_slice(item);
        let id = ItemId {
            lp_off: upper as u16,
            lp_flags: LinePointerFlags::Normal,
            lp_len: item.len() as u16,
        };
        self.page[lower..lower + SIZE_OF_ITEM_ID].copy_from_slice(&id.to_u32().to_le_bytes());
        self.header.pd_lower = (lower + SIZE_OF_ITEM_ID) as u16;
        self.header.pd_upper = upper as u16;
        Ok(self.header.item_count())
    }

    /// The finished page (checksum not set; see [`set_checksum`]).
    pub fn finish(mut self) -> [u8; BLCKSZ] {
        let header = self.header.to_bytes();
        self.page[..SIZE_OF_PAGE_HEADER].copy_from_slice(&header);
        *self.page
    }
}

/// Computes the checksum of `page` as block `blkno` and stores it in pd_checksum
/// (`PageSetChecksumInplace`). All-zero new pages are left alone, as PostgreSQL does.
pub fn set_checksum(page: &mut [u8; BLCKSZ], blkno: u32) {
    if page[14] == 0 && page[15] == 0 {
        // pd_upper == 0: a new page carries no checksum.
        return;
    }
    let checksum = pg_checksum_page(page, blkno);
    page[PD_CHECKSUM_OFFSET..PD_CHECKSUM_OFFSET + 2].copy_from_slice(&checksum.to_le_bytes());
}

/// Appends the bytes of one non-null value at the next correctly aligned offset of `data`
/// (offsets relative to the start of the value area, which is MAXALIGNed on disk).
fn append_value(data: &mut Vec<u8>, value: &Datum<'_>) -> Result<()> {
    let Some(ty) = value.column_type() else {
        return Ok(());
    };
    if let Datum::Varlena(v) = value {
        // Short (1-byte header) varlenas are stored unaligned; heap_fill_tuple converts every
        // value that fits to that form, so only 4-byte headers get padding.
        if !v.encodes_unaligned() {
            data.resize(align_up(data.len(), ty.align_bytes()), 0);
        }
        return v.encode(data);
    }
    data.resize(align_up(data.len(), ty.align_bytes()), 0);
    match *value {
        Datum::Float8(v) => data.extend_from_slice(&v.to_le_bytes()),
        Datum::Float4(v) => data.extend_from_slice(&v.to_le_bytes()),
        Datum::Int8(v) => data.extend_from_slice(&v.to_le_bytes()),
        Datum::Int4(v) => data.extend_from_slice(&v.to_le_bytes()),
        Datum::Int2(v) => data.extend_from_slice(&v.to_le_bytes()),
        Datum::Bool(v) => data.push(v as u8),
        Datum::Oid(v) => data.extend_from_slice(&v.to_le_bytes()),
        Datum::Null | Datum::Varlena(_) => {}
    }
    Ok(())
}

/// Forms heap tuples like `heap_form_tuple`, with visibility fields chosen by the caller
/// (default: frozen and committed, never deleted).
#[derive(Debug, Clone, Copy)]
pub struct HeapTupleBuilder {
    /// Inserting transaction; default `FrozenTransactionId` (2).
    pub xmin: u32,
    /// Deleting transaction; default 0 (invalid).
    pub xmax: u32,
    /// Command id; default 0.
    pub cid: u32,
    /// t_ctid; default (0,0) — set it to the tuple's own TID for a live row.
    pub ctid: ItemPointer,
    /// Extra infomask bits ORed into the computed ones (default
    /// `HEAP_XMIN_COMMITTED | HEAP_XMAX_INVALID`).
    pub infomask: u16,
}

impl Default for HeapTupleBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl HeapTupleBuilder {
    /// A builder for frozen, committed, live rows.
    pub fn new() -> Self {
        Self {
            xmin: FROZEN_TRANSACTION_ID,
            xmax: 0,
            cid: 0,
            ctid: ItemPointer::default(),
            infomask: HEAP_XMIN_COMMITTED | HEAP_XMAX_INVALID,
        }
    }

    /// Sets t_ctid (normally the tuple's own block and offset number).
    pub fn ctid(mut self, ctid: ItemPointer) -> Self {
        self.ctid = ctid;
        self
    }

    /// Forms the tuple bytes for `values` (one per column, in column order).
    pub fn build(&self, values: &[Datum<'_>]) -> Result<Vec<u8>> {
        let natts = values.len();
        if natts > MAX_HEAP_ATTRIBUTE_NUMBER {
            return Err(PageError::Unencodable {
                problem: format!(
                    "{natts} attributes exceed MaxHeapAttributeNumber {MAX_HEAP_ATTRIBUTE_NUMBER}"
                ),
            });
        }
        let has_nulls = values.iter().any(Datum::is_null);
        let mut infomask = self.infomask;
        if has_nulls {
            infomask |= HEAP_HASNULL;
        }
        for v in values {
            if let Datum::Varlena(var) = v {
                infomask |= HEAP_HASVARWIDTH;
                if matches!(var, Varlena::External { .. }) {
                    infomask |= HEAP_HASEXTERNAL;
                }
            }
        }
        let bitmap_len = if has_nulls {
            bitmap_len_bytes(natts)
        } else {
            0
        };
        let t_hoff = maxalign(SIZEOF_HEAP_TUPLE_HEADER + bitmap_len);
        let header = HeapTupleHeader {
            t_xmin: self.xmin,
            t_xmax: self.xmax,
            t_cid: self.cid,
            t_ctid: self.ctid,
            t_infomask2: natts as u16,
            t_infomask: infomask,
            t_hoff: t_hoff as u8,
        };
        let mut tuple = Vec::with_capacity(t_hoff + 16 * natts);
        tuple.extend_from_slice(&header.to_bytes());
        if has_nulls {
            let mut bitmap = vec![0u8; bitmap_len];
            for (i, v) in values.iter().enumerate() {
                if !v.is_null() {
                    bitmap[i / 8] |= 1 << (i % 8);
                }
            }
            tuple.extend_from_slice(&bitmap);
        }
        tuple.resize(t_hoff, 0);
        let mut data = Vec::new();
        for v in values {
            append_value(&mut data, v)?;
        }
        tuple.extend_from_slice(&data);
        if tuple.len() > MAX_ITEM_SIZE_BYTES {
            return Err(PageError::Unencodable {
                problem: format!(
                    "heap tuple of {} bytes exceeds the largest item {MAX_ITEM_SIZE_BYTES}",
                    tuple.len()
                ),
            });
        }
        Ok(tuple)
    }
}

/// Key bytes (from the data offset on) and the matching t_info flag bits for one key.
fn index_key(key: &Datum<'_>) -> Result<(Vec<u8>, u16)> {
    let mut data = Vec::new();
    let mut flags = 0;
    if key.is_null() {
        flags |= INDEX_NULL_MASK;
    } else {
        append_value(&mut data, key)?;
        if matches!(key, Datum::Varlena(_)) {
            flags |= INDEX_VAR_MASK;
        }
    }
    Ok((data, flags))
}

/// Assembles header + (null bitmap) + key + tail, MAXALIGNs it and stores the size in t_info.
fn assemble_index_tuple(
    t_tid: ItemPointer,
    flags: u16,
    key_data: &[u8],
    tail: &[u8],
) -> Result<Vec<u8>> {
    let data_offset = if flags & INDEX_NULL_MASK != 0 {
        maxalign(SIZE_OF_INDEX_TUPLE + SIZE_OF_INDEX_NULL_BITMAP)
    } else {
        maxalign(SIZE_OF_INDEX_TUPLE)
    };
    let key_end = maxalign(data_offset + key_data.len());
    let size = maxalign(key_end + tail.len());
    if size > INDEX_SIZE_MASK as usize {
        return Err(PageError::Unencodable {
            problem: format!("index tuple of {size} bytes exceeds t_info's 13-bit size"),
        });
    }
    let mut out = vec![0u8; size];
    out[..6].copy_from_slice(&t_tid.to_bytes());
    out[6..8].copy_from_slice(&(size as u16 | flags).to_le_bytes());
    // A null bitmap, when present, is all zeros for the single (null) key column.
    out[data_offset..data_offset + key_data.len()].copy_from_slice(key_data);
    out[key_end..key_end + tail.len()].copy_from_slice(tail);
    Ok(out)
}

/// A plain leaf tuple (`index_form_tuple`) with one key column pointing at `heap_tid`.
pub fn index_tuple(heap_tid: ItemPointer, key: &Datum<'_>) -> Result<Vec<u8>> {
    let (data, flags) = index_key(key)?;
    assemble_index_tuple(heap_tid, flags, &data, &[])
}

/// A pivot tuple: a high key (`downlink` ignored, conventionally 0) or an internal-page
/// downlink to block `downlink`. `key: None` gives the key-less "minus infinity" pivot.
pub fn pivot_tuple(downlink: u32, key: Option<&Datum<'_>>) -> Result<Vec<u8>> {
    let (data, flags, natts) = match key {
        Some(k) => {
            let (d, f) = index_key(k)?;
            (d, f, 1)
        }
        None => (Vec::new(), 0, 0),
    };
    let t_tid = ItemPointer {
        block: downlink,
        offset: natts & BT_OFFSET_MASK,
    };
    assemble_index_tuple(t_tid, flags | INDEX_ALT_TID_MASK, &data, &[])
}

/// A deduplicated posting-list tuple (`_bt_form_posting`): one key, `heap_tids` in order.
pub fn posting_tuple(key: &Datum<'_>, heap_tids: &[ItemPointer]) -> Result<Vec<u8>> {
    if heap_tids.len() < 2 || heap_tids.len() > BT_OFFSET_MASK as usize {
        return Err(PageError::Unencodable {
            problem: format!(
                "posting list needs 2..={} TIDs, got {}",
                BT_OFFSET_MASK,
                heap_tids.len()
            ),
        });
    }
    let (data, flags) = index_key(key)?;
    let data_offset = if flags & INDEX_NULL_MASK != 0 { 16 } else { 8 };
    let posting_offset = maxalign(data_offset + data.len());
    let tail: Vec<u8> = heap_tids.iter().flat_map(|t| t.to_bytes()).collect();
    let t_tid = ItemPointer {
        block: posting_offset as u32,
        offset: BT_IS_POSTING | heap_tids.len() as u16,
    };
    assemble_index_tuple(t_tid, flags | INDEX_ALT_TID_MASK, &data, &tail)
}

/// Builds a btree page: `_bt_pageinit` plus the opaque data, then tuples in offset order.
/// For a page with a right sibling, add the high key first (it becomes offset 1).
#[derive(Debug, Clone)]
pub struct BtreePageBuilder {
    page: PageBuilder,
}

impl BtreePageBuilder {
    /// An empty btree page with `opaque` in its special space.
    pub fn new(opaque: BtPageOpaque) -> Result<Self> {
        let mut page = PageBuilder::new(SIZE_OF_BT_OPAQUE)?;
        page.special_mut().copy_from_slice(&opaque.to_bytes());
        Ok(Self { page })
    }

    /// Adds one index tuple at the next offset number and returns it.
    pub fn add_tuple(&mut self, tuple: &[u8]) -> Result<u16> {
        self.page.add_item(tuple)
    }

    /// True if a tuple of `len_bytes` still fits.
    pub fn fits(&self, len_bytes: usize) -> bool {
        self.page.fits(len_bytes)
    }

    /// The underlying page builder (for LSN or flags).
    pub fn page_mut(&mut self) -> &mut PageBuilder {
        &mut self.page
    }

    /// The finished page (checksum not set).
    pub fn finish(self) -> [u8; BLCKSZ] {
        self.page.finish()
    }
}

/// A btree metapage (`_bt_initmetapage`): `meta` after the header, pd_lower just past it,
/// and opaque data flagged `BTP_META`.
pub fn btree_metapage(meta: &BtMetaPage) -> Result<[u8; BLCKSZ]> {
    let mut builder = PageBuilder::new(SIZE_OF_BT_OPAQUE)?;
    let opaque = BtPageOpaque {
        btpo_flags: BTP_META,
        ..BtPageOpaque::default()
    };
    builder.special_mut().copy_from_slice(&opaque.to_bytes());
    builder.header.pd_lower = (SIZE_OF_PAGE_HEADER + SIZE_OF_BT_META) as u16;
    let mut page = builder.finish();
    page[SIZE_OF_PAGE_HEADER..SIZE_OF_PAGE_HEADER + SIZE_OF_BT_META]
        .copy_from_slice(&meta.to_bytes());
    Ok(page)
}
