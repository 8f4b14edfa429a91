//! Bulk btree build, page for page as PostgreSQL's `nbtsort.c` lays it out.
//!
//! # Problem
//!
//! `CREATE INDEX` does not insert tuples one by one: it sorts them and fills the leaf level
//! left to right, building each upper level from the pages below as they complete. Page
//! boundaries, high keys, block numbers and the root location all follow from that
//! algorithm, so an index meant to look like PostgreSQL's must run the same one.
//!
//! # Mechanism
//!
//! One `LevelState` per level holds the page being filled (`_bt_pagestate`). Adding a
//! tuple to a full page (`_bt_buildadd`) moves the page's last item to a fresh page, makes a
//! high key from it (suffix-truncated on leaves: just the key, or key plus heap TID when the
//! two neighbours have equal keys), links the siblings, writes the old page out and inserts
//! its *low key* into the parent level with a downlink to it. The first data item of every
//! internal page is stored as "minus infinity" (no key). At the end (`_bt_uppershutdown`)
//! each level's rightmost page is linked into its parent and written without a high key;
//! the topmost page is the root, and the metapage goes to block 0.
//!
//! ```text
//!  level 1:            [ -inf→1 | k2→2 | k3→4 ]   block 3 (root; allocated when leaf 1 filled)
//!                        /          |        \
//!  level 0:  block 1 [hk=k2| …]→ block 2 [hk=k3| …]→ block 4 [ … ]   (btpo_next / btpo_prev)
//! ```
//!
//! "Full" is PostgreSQL's soft limit: a leaf keeps `BLCKSZ · (100 − 90) / 100 = 819` bytes
//! free (fillfactor 90), an internal page `BLCKSZ · 30 / 100 = 2457` (fillfactor 70).
//!
//! # Worked example
//!
//! 16-byte float8 leaf tuples cost 20 bytes with their line pointer. A new leaf has
//! `8176 − 28 − 4 = 8144` bytes of `PageGetFreeSpace` (the high-key slot is pre-allocated),
//! so after 367 tuples only 804 < 819 remain: the 368th tuple starts a new page, taking the
//! 367th with it, and each full leaf ends with 366 data items plus a high key. 20000 rows give
//! 55 leaves, one root (block 3) and the metapage — PostgreSQL's 57-page `uniform_a`.

use crate::page::btree::{
    BtMetaPage, BtPageOpaque, BTP_LEAF, BTP_ROOT, BTREE_MAGIC, BTREE_VERSION, INDEX_ALT_TID_MASK,
    INDEX_SIZE_MASK, SIZE_OF_BT_OPAQUE,
};
use crate::page::builder::{btree_metapage, set_checksum};
use crate::page::header::{
    ItemId, ItemPointer, LinePointerFlags, PageHeader, PG_PAGE_LAYOUT_VERSION, SIZE_OF_ITEM_ID,
    SIZE_OF_PAGE_HEADER,
};
use crate::page::{maxalign, PageError, BLCKSZ};

/// PostgreSQL's `BTREE_DEFAULT_FILLFACTOR`: leaves are filled to 90 %.
pub const BTREE_LEAF_FILLFACTOR: usize = 90;
/// PostgreSQL's `BTREE_NONLEAF_FILLFACTOR`: internal pages are filled to 70 %.
pub const BTREE_NONLEAF_FILLFACTOR: usize = 70;

/// `P_HIKEY` and `P_FIRSTKEY`.
const P_HIKEY: usize = 1;
const P_FIRSTKEY: usize = 2;
/// `BT_PIVOT_HEAP_TID_ATTR`: a pivot that ends in a heap TID.
const BT_PIVOT_HEAP_TID_ATTR: u16 = 0x1000;
/// Largest tuple this builder makes: a pivot with key and heap TID (8 + 8 + 8).
const MAX_ITEM_BYTES: usize = 24;
/// Where the special space starts on every btree page.
const PD_SPECIAL: usize = BLCKSZ - SIZE_OF_BT_OPAQUE;

/// Key column type of the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// `double precision` (opclass `float8_ops`; no deduplication).
    Float8,
    /// `integer` (opclass `int4_ops`; deduplication allowed).
    Int4,
}

/// An index tuple small enough to live inline: leaf tuple, pivot, or minus infinity.
#[derive(Debug, Clone, Copy)]
struct Item {
    bytes: [u8; MAX_ITEM_BYTES],
    len: usize,
}

impl Item {
    /// `index_form_tuple` for one key: header (heap TID, t_info = size) + MAXALIGNed key.
    fn leaf(kind: KeyKind, key: f64, tid: ItemPointer) -> Item {
        let mut bytes = [0u8; MAX_ITEM_BYTES];
        bytes[..6].copy_from_slice(&tid.to_bytes());
        bytes[6..8].copy_from_slice(&16u16.to_le_bytes());
        match kind {
            KeyKind::Float8 => bytes[8..16].copy_from_slice(&key.to_le_bytes()),
            KeyKind::Int4 => bytes[8..12].copy_from_slice(&(key as i32).to_le_bytes()),
        }
        Item { bytes, len: 16 }
    }

    fn t_info(&self) -> u16 {
        u16::from_le_bytes([self.bytes[6], self.bytes[7]])
    }

    fn set_t_info(&mut self, t_info: u16) {
        self.bytes[6..8].copy_from_slice(&t_info.to_le_bytes());
    }

    fn set_offset(&mut self, offset: u16) {
        self.bytes[4..6].copy_from_slice(&offset.to_le_bytes());
    }

    /// `BTreeTupleSetDownLink`: the block half of t_tid.
    fn set_downlink(&mut self, block: u32) {
        self.bytes[0..2].copy_from_slice(&((block >> 16) as u16).to_le_bytes());
        self.bytes[2..4].copy_from_slice(&(block as u16).to_le_bytes());
    }

    /// `BTreeTupleSetNAtts(itup, natts, heaptid)`.
    fn set_natts(&mut self, natts: u16, heap_tid: bool) {
        self.set_t_info(self.t_info() | INDEX_ALT_TID_MASK);
        self.set_offset(natts | if heap_tid { BT_PIVOT_HEAP_TID_ATTR } else { 0 });
    }

    /// The level's initial low key (`_bt_pagestate`): an 8-byte pivot with no key.
    fn minus_infinity() -> Item {
        let mut item = Item {
            bytes: [0u8; MAX_ITEM_BYTES],
            len: 8,
        };
        item.set_t_info(8);
        item.set_natts(0, false);
        item
    }

    /// `_bt_sortaddtup(…, newfirstdataitem = true)`: keep the downlink, drop the key.
    fn truncated_to_minus_infinity(&self) -> Item {
        let mut item = Item {
            bytes: [0u8; MAX_ITEM_BYTES],
            len: 8,
        };
        item.bytes[..8].copy_from_slice(&self.bytes[..8]);
        item.set_t_info(8);
        item.set_natts(0, false);
        item
    }

    fn key_bytes(&self) -> &[u8] {
        &self.bytes[8..16]
    }

    fn heap_tid_bytes(&self) -> [u8; 6] {
        let mut tid = [0u8; 6];
        tid.copy_from_slice(&self.bytes[..6]);
        tid
    }

    fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// `_bt_truncate(lastleft, firstright)` for a one-column index: the new leaf high key.
/// Distinct keys keep firstright's key only; equal keys also need lastleft's heap TID, so
/// that the key space stays split between the two pages.
fn truncate(kind: KeyKind, lastleft: &Item, firstright: &Item) -> Item {
    let equal = match kind {
        KeyKind::Float8 => {
            let l = f64::from_le_bytes(lastleft.key_bytes().try_into().unwrap_or([0; 8]));
            let r = f64::from_le_bytes(firstright.key_bytes().try_into().unwrap_or([0; 8]));
            // float8 equality is the opclass's comparator: −0 = 0 and NaN = NaN.
            crate::page::float8_cmp(l, r) == std::cmp::Ordering::Equal
        }
        KeyKind::Int4 => lastleft.key_bytes()[..4] == firstright.key_bytes()[..4],
    };
    let mut pivot = *firstright;
    if !equal {
        pivot.set_natts(1, false);
        return pivot;
    }
    // Heap TID appended in the last 6 bytes of a MAXALIGNed slot after the key.
    pivot.len = 24;
    let flags = pivot.t_info() & !INDEX_SIZE_MASK;
    pivot.set_t_info(flags | 24);
    pivot.set_natts(1, true);
    pivot.bytes[18..24].copy_from_slice(&lastleft.heap_tid_bytes());
    pivot
}

/// The page being filled on one level (`BTPageState`).
struct LevelState {
    level: u32,
    blkno: u32,
    prev_blkno: u32,
    items: Vec<Item>,
    /// Bytes of tuple storage used (sum of MAXALIGNed sizes).
    used_bytes: usize,
    lowkey: Item,
}

impl LevelState {
    fn new(level: u32, blkno: u32) -> LevelState {
        LevelState {
            level,
            blkno,
            prev_blkno: 0,
            items: Vec::new(),
            used_bytes: 0,
            lowkey: Item::minus_infinity(),
        }
    }

    /// `PageGetFreeSpace` of the page as nbtsort sees it: the high-key line pointer is
    /// already allocated (`_bt_blnewpage`), one more line pointer is subtracted.
    fn free_space_bytes(&self) -> usize {
        let lower = SIZE_OF_PAGE_HEADER + SIZE_OF_ITEM_ID * (1 + self.items.len());
        let upper = PD_SPECIAL - self.used_bytes;
        (upper.saturating_sub(lower)).saturating_sub(SIZE_OF_ITEM_ID)
    }

    fn push(&mut self, item: Item) {
        self.used_bytes += maxalign(item.len);
        self.items.push(item);
    }
}

/// Shape of the finished index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BtreeShape {
    /// Root block (0 = `P_NONE` for an empty index).
    pub root: u32,
    /// Level of the root (0 = the root is a leaf).
    pub level: u32,
    /// Pages including the metapage.
    pub pages: u32,
}

/// Builds the btree over `entries` (already sorted by key, then heap TID), handing every
/// finished, checksummed page to `emit(blkno, page)`. Pages come out in completion order,
/// which is not block order: internal pages finish after the leaves below them, and the
/// metapage (block 0) comes last.
pub fn build<E>(
    kind: KeyKind,
    entries: impl IntoIterator<Item = (f64, ItemPointer)>,
    mut emit: impl FnMut(u32, Box<[u8; BLCKSZ]>) -> Result<(), E>,
) -> Result<BtreeShape, E>
where
    E: From<PageError>,
{
    let mut builder = Builder {
        kind,
        levels: Vec::new(),
        pages_allocated: 1, // block 0 is the metapage
    };
    for (key, tid) in entries {
        if builder.levels.is_empty() {
            let blkno = builder.allocate();
            builder.levels.push(LevelState::new(0, blkno));
        }
        builder.add(0, Item::leaf(kind, key, tid), &mut emit)?;
    }
    // _bt_uppershutdown: link each level's rightmost page into its parent, bottom up.
    let mut root = 0u32;
    let mut root_level = 0u32;
    let mut lvl = 0;
    while lvl < builder.levels.len() {
        let is_root = lvl + 1 == builder.levels.len();
        let state = &mut builder.levels[lvl];
        let blkno = state.blkno;
        let level = state.level;
        let mut lowkey = state.lowkey;
        let items = std::mem::take(&mut state.items);
        let prev = state.prev_blkno;
        if is_root {
            root = blkno;
            root_level = level;
        } else {
            lowkey.set_downlink(blkno);
            builder.add(lvl + 1, lowkey, &mut emit)?;
        }
        let mut flags = if level == 0 { BTP_LEAF } else { 0 };
        if is_root {
            flags |= BTP_ROOT;
        }
        let opaque = BtPageOpaque {
            btpo_prev: prev,
            btpo_next: 0,
            btpo_level: level,
            btpo_flags: flags,
            btpo_cycleid: 0,
        };
        emit(blkno, assemble(blkno, &opaque, None, &items))?;
        lvl += 1;
    }
    let meta = BtMetaPage {
        btm_magic: BTREE_MAGIC,
        btm_version: BTREE_VERSION,
        btm_root: root,
        btm_level: root_level,
        btm_fastroot: root,
        btm_fastlevel: root_level,
        btm_last_cleanup_num_delpages: 0,
        btm_last_cleanup_num_heap_tuples: -1.0,
        // float8 cannot deduplicate (−0 and 0 are equal but not bitwise equal); int4 can.
        btm_allequalimage: kind == KeyKind::Int4,
    };
    let mut metapage = Box::new(btree_metapage(&meta)?);
    set_checksum(&mut metapage, 0);
    emit(0, metapage)?;
    Ok(BtreeShape {
        root,
        level: root_level,
        pages: builder.pages_allocated,
    })
}

struct Builder {
    kind: KeyKind,
    levels: Vec<LevelState>,
    pages_allocated: u32,
}

impl Builder {
    fn allocate(&mut self) -> u32 {
        let blkno = self.pages_allocated;
        self.pages_allocated += 1;
        blkno
    }

    /// `_bt_buildadd`: add `item` to the page being filled on level `lvl`, finishing that
    /// page first if it is full.
    fn add<E: From<PageError>>(
        &mut self,
        lvl: usize,
        item: Item,
        emit: &mut impl FnMut(u32, Box<[u8; BLCKSZ]>) -> Result<(), E>,
    ) -> Result<(), E> {
        let is_leaf = lvl == 0;
        let full_threshold_bytes = if is_leaf {
            BLCKSZ * (100 - BTREE_LEAF_FILLFACTOR) / 100
        } else {
            BLCKSZ * (100 - BTREE_NONLEAF_FILLFACTOR) / 100
        };
        let state = &self.levels[lvl];
        let free_bytes = state.free_space_bytes();
        let item_bytes = maxalign(item.len);
        let last_off = P_HIKEY + state.items.len();
        // Leaves keep room for a heap TID that suffix truncation may append to the high key.
        let reserve_bytes = if is_leaf { 8 } else { 0 };
        if free_bytes < item_bytes + reserve_bytes
            || (free_bytes < full_threshold_bytes && last_off > P_FIRSTKEY)
        {
            self.finish_page(lvl, emit)?;
        }
        let state = &mut self.levels[lvl];
        if !is_leaf && state.items.is_empty() {
            state.push(item.truncated_to_minus_infinity());
        } else {
            state.push(item);
        }
        Ok(())
    }

    /// Ends the page being filled on `lvl`: its last item moves to a new page, a high key
    /// takes its place, the page is written, and its low key goes to the parent.
    fn finish_page<E: From<PageError>>(
        &mut self,
        lvl: usize,
        emit: &mut impl FnMut(u32, Box<[u8; BLCKSZ]>) -> Result<(), E>,
    ) -> Result<(), E> {
        let is_leaf = lvl == 0;
        let new_blkno = self.allocate();
        let kind = self.kind;
        let state = &mut self.levels[lvl];
        // At least two data items are on the page (last_off > P_FIRSTKEY or a hard fit
        // failure on a page that already holds items), so there is a last item to move.
        let Some(moved) = state.items.pop() else {
            return Err(PageError::Unencodable {
                problem: "btree page full before its first item".into(),
            }
            .into());
        };
        state.used_bytes -= maxalign(moved.len);
        let high_key = match (is_leaf, state.items.last()) {
            (true, Some(lastleft)) => truncate(kind, lastleft, &moved),
            _ => moved,
        };
        let old_items = std::mem::take(&mut state.items);
        let old_blkno = state.blkno;
        let old_prev = state.prev_blkno;
        let level = state.level;
        let mut old_lowkey = std::mem::replace(&mut state.lowkey, high_key);
        state.blkno = new_blkno;
        state.prev_blkno = old_blkno;
        state.used_bytes = 0;
        state.push(if is_leaf {
            moved
        } else {
            moved.truncated_to_minus_infinity()
        });

        let opaque = BtPageOpaque {
            btpo_prev: old_prev,
            btpo_next: new_blkno,
            btpo_level: level,
            btpo_flags: if is_leaf { BTP_LEAF } else { 0 },
            btpo_cycleid: 0,
        };
        // The parent level is created when its first child finishes, after the new
        // sibling got its block number, exactly as nbtsort allocates them.
        if self.levels.len() == lvl + 1 {
            let blkno = self.allocate();
            self.levels.push(LevelState::new(level + 1, blkno));
        }
        old_lowkey.set_downlink(old_blkno);
        self.add(lvl + 1, old_lowkey, emit)?;
        emit(
            old_blkno,
            assemble(old_blkno, &opaque, Some(&high_key), &old_items),
        )
    }
}

/// Lays out one btree page as nbtsort leaves it: data items from the end of the page
/// downwards in offset order, the high key (line pointer 1) stored lowest, checksum set.
fn assemble(
    blkno: u32,
    opaque: &BtPageOpaque,
    high_key: Option<&Item>,
    items: &[Item],
) -> Box<[u8; BLCKSZ]> {
    let mut page = Box::new([0u8; BLCKSZ]);
    page[PD_SPECIAL..].copy_from_slice(&opaque.to_bytes());
    let mut upper = PD_SPECIAL;
    let mut lower = SIZE_OF_PAGE_HEADER + SIZE_OF_ITEM_ID * high_key.is_some() as usize;
    for item in items {
        upper -= maxalign(item.len);
        page[upper..upper + item.len].copy_from_slice(item.as_slice());
        let id = ItemId {
            lp_off: upper as u16,
            lp_flags: LinePointerFlags::Normal,
            lp_len: item.len as u16,
        };
        page[lower..lower + SIZE_OF_ITEM_ID].copy_from_slice(&id.to_u32().to_le_bytes());
        lower += SIZE_OF_ITEM_ID;
    }
    if let Some(hk) = high_key {
        upper -= maxalign(hk.len);
        page[upper..upper + hk.len].copy_from_slice(hk.as_slice());
        let id = ItemId {
            lp_off: upper as u16,
            lp_flags: LinePointerFlags::Normal,
            lp_len: hk.len as u16,
        };
        page[SIZE_OF_PAGE_HEADER..SIZE_OF_PAGE_HEADER + SIZE_OF_ITEM_ID]
            .copy_from_slice(&id.to_u32().to_le_bytes());
    }
    let header = PageHeader {
        pd_lower: lower as u16,
        pd_upper: upper as u16,
        pd_special: PD_SPECIAL as u16,
        pd_pagesize_version: BLCKSZ as u16 | PG_PAGE_LAYOUT_VERSION as u16,
        ..PageHeader::default()
    };
    page[..SIZE_OF_PAGE_HEADER].copy_from_slice(&header.to_bytes());
    set_checksum(&mut page, blkno);
    page
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page::builder::{index_tuple, pivot_tuple};
    use crate::page::heap::Datum;

    #[test]
    fn leaf_and_pivot_encodings_match_the_page_builders() {
        let tid = ItemPointer {
            block: 70000,
            offset: 5,
        };
        let leaf = Item::leaf(KeyKind::Float8, 42.5, tid);
        assert_eq!(
            leaf.as_slice(),
            &index_tuple(tid, &Datum::Float8(42.5)).unwrap()[..]
        );
        let leaf4 = Item::leaf(KeyKind::Int4, 7.0, tid);
        assert_eq!(
            leaf4.as_slice(),
            &index_tuple(tid, &Datum::Int4(7)).unwrap()[..]
        );
        let mut minf = Item::minus_infinity();
        minf.set_downlink(9);
        assert_eq!(minf.as_slice(), &pivot_tuple(9, None).unwrap()[..]);
        // A high key between distinct keys is firstright's key with natts = 1.
        let right = Item::leaf(KeyKind::Float8, 43.0, tid);
        let mut hk = truncate(KeyKind::Float8, &leaf, &right);
        hk.set_downlink(3);
        assert_eq!(
            hk.as_slice(),
            &pivot_tuple(3, Some(&Datum::Float8(43.0))).unwrap()[..]
        );
    }

    #[test]
    fn equal_keys_get_a_heap_tid_in_the_high_key() {
        let l = Item::leaf(
            KeyKind::Float8,
            1.0,
            ItemPointer {
                block: 1,
                offset: 2,
            },
        );
        let r = Item::leaf(
            KeyKind::Float8,
            1.0,
            ItemPointer {
                block: 1,
                offset: 3,
            },
        );
        let hk = truncate(KeyKind::Float8, &l, &r);
        assert_eq!(hk.len, 24);
        assert_eq!(hk.t_info(), 24 | INDEX_ALT_TID_MASK);
        assert_eq!(&hk.bytes[18..24], &l.heap_tid_bytes());
    }
}
