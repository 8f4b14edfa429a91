//! Btree index pages: metapage, page opaque data, index tuples, pivots and posting lists.
//!
//! # Problem
//!
//! Index scans and the verifier need to walk PostgreSQL btrees straight from disk: find the
//! root in the metapage, follow downlinks to the leaves, follow right-links along the leaf
//! level and read every heap TID, including the compressed posting lists that deduplication
//! (PostgreSQL 13+) creates. Pivot tuples, high keys and posting lists all reuse the same
//! 8-byte `IndexTupleData` header with different meanings, so the decoder has to apply
//! `nbtree.h`'s rules exactly.
//!
//! # Mechanism
//!
//! ```text
//!  block 0: metapage        header | BTMetaPageData @24 (magic 0x053162, version, root…) | opaque
//!  other blocks:            header | line pointers | … tuples … | BTPageOpaqueData (16 bytes)
//!                                                                 prev, next, level, flags, cycleid
//!
//!  offnum 1 on a page with a right sibling (btpo_next != 0) is the high key;
//!  data items start at P_FIRSTDATAKEY = 2 there, at 1 on the rightmost page.
//!  On internal pages the first data item is the "minus infinity" pivot with no key.
//!
//!  IndexTupleData: t_tid (6 bytes) | t_info u16 = size & 0x1FFF | ALT_TID 0x2000 | VAR 0x4000 | NULL 0x8000
//!    plain leaf tuple: t_tid = heap TID, key at MAXALIGN(8) (or 16 with a null bitmap)
//!    pivot (ALT_TID, !BT_IS_POSTING in ip_posid): t_tid.block = downlink, ip_posid & 0x0FFF = natts
//!    posting (ALT_TID, BT_IS_POSTING): t_tid.block = byte offset of the TID array,
//!                                      ip_posid & 0x0FFF = number of 6-byte heap TIDs
//! ```
//!
//! # Worked example
//!
//! The fixture's `uniform_a` metapage reads magic 0x053162, version 4, root 3, level 1. Block
//! 3 is the root (`BTP_ROOT`, level 1): its items are pivots whose `t_tid.block` is a leaf
//! block; the first is minus infinity. Each leaf holds plain 16-byte tuples (8-byte header +
//! one float8 key) and, after deduplication of equal keys, posting tuples.

use super::header::{ItemPointer, LinePointerFlags, PageRef, SIZE_OF_PAGE_HEADER};
use super::heap::{fetch_fixed, ColumnType, Datum};
use super::varlena::Varlena;
use super::{align_up, maxalign, read_array, read_u16, read_u32, PageError, Result, BLCKSZ};

/// Magic number in `btm_magic`.
pub const BTREE_MAGIC: u32 = 0x053162;
/// Current btree version (PostgreSQL 13+).
pub const BTREE_VERSION: u32 = 4;
/// Oldest btree version PostgreSQL 18 still reads.
pub const BTREE_MIN_VERSION: u32 = 2;
/// Oldest version with the PostgreSQL 12+ "heapkeyspace" layout.
pub const BTREE_NOVAC_VERSION: u32 = 3;
/// Size of `BTPageOpaqueData`.
pub const SIZE_OF_BT_OPAQUE: usize = 16;
/// Bytes of `BTMetaPageData` (with its f64 aligned to 8 and tail padding).
pub const SIZE_OF_BT_META: usize = 48;

/// `btpo_flags`: leaf page.
pub const BTP_LEAF: u16 = 1 << 0;
/// `btpo_flags`: root page.
pub const BTP_ROOT: u16 = 1 << 1;
/// `btpo_flags`: page has been deleted from the tree.
pub const BTP_DELETED: u16 = 1 << 2;
/// `btpo_flags`: metapage.
pub const BTP_META: u16 = 1 << 3;
/// `btpo_flags`: empty, but still in tree.
pub const BTP_HALF_DEAD: u16 = 1 << 4;
/// `btpo_flags`: rightmost page of split group.
pub const BTP_SPLIT_END: u16 = 1 << 5;
/// `btpo_flags`: page has LP_DEAD tuples.
pub const BTP_HAS_GARBAGE: u16 = 1 << 6;
/// `btpo_flags`: right sibling's downlink is missing.
pub const BTP_INCOMPLETE_SPLIT: u16 = 1 << 7;
/// `btpo_flags`: deleted page stores a full transaction id.
pub const BTP_HAS_FULLXID: u16 = 1 << 8;

/// `t_info`: mask of the tuple size.
pub const INDEX_SIZE_MASK: u16 = 0x1FFF;
/// `t_info`: pivot or posting tuple (alternative meaning of t_tid).
pub const INDEX_ALT_TID_MASK: u16 = 0x2000;
/// `t_info`: has variable-width attribute(s).
pub const INDEX_VAR_MASK: u16 = 0x4000;
/// `t_info`: has null attribute(s), so a bitmap follows the header.
pub const INDEX_NULL_MASK: u16 = 0x8000;
/// `ip_posid` bits holding a count (natts of a pivot, TIDs of a posting list).
pub const BT_OFFSET_MASK: u16 = 0x0FFF;
/// `ip_posid` bit: pivot carries a heap TID tiebreaker at its end.
pub const BT_PIVOT_HEAP_TID_ATTR: u16 = 0x1000;
/// `ip_posid` bit: tuple is a posting list.
pub const BT_IS_POSTING: u16 = 0x2000;
/// Size of `IndexTupleData`.
pub const SIZE_OF_INDEX_TUPLE: usize = 8;
/// Size of `IndexAttributeBitMapData` (INDEX_MAX_KEYS = 32 bits).
pub const SIZE_OF_INDEX_NULL_BITMAP: usize = 4;
/// `P_HIKEY`: offset number of the high key.
pub const P_HIKEY: u16 = 1;

/// The btree metapage contents (`BTMetaPageData`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BtMetaPage {
    /// Should be [`BTREE_MAGIC`].
    pub btm_magic: u32,
    /// Btree version, 2..=4.
    pub btm_version: u32,
    /// Current root block.
    pub btm_root: u32,
    /// Tree level of the root (0 = root is a leaf).
    pub btm_level: u32,
    /// Current "fast" root location.
    pub btm_fastroot: u32,
    /// Tree level of the fast root.
    pub btm_fastlevel: u32,
    /// Deleted pages counted by the last cleanup.
    pub btm_last_cleanup_num_delpages: u32,
    /// Heap tuples counted by the last cleanup (-1 if unknown).
    pub btm_last_cleanup_num_heap_tuples: f64,
    /// Whether every opclass supports deduplication.
    pub btm_allequalimage: bool,
}

impl BtMetaPage {
    /// Decodes the metapage from a whole page, checking magic and version as `_bt_getmeta`
    /// does.
    pub fn parse(page: &[u8]) -> Result<Self> {
        let base = SIZE_OF_PAGE_HEADER;
        let u32_at = |i: usize| read_u32(page, base + 4 * i, "btree metapage");
        let meta = Self {
            btm_magic: u32_at(0)?,
            btm_version: u32_at(1)?,
            btm_root: u32_at(2)?,
            btm_level: u32_at(3)?,
            btm_fastroot: u32_at(4)?,
            btm_fastlevel: u32_at(5)?,
            btm_last_cleanup_num_delpages: u32_at(6)?,
            btm_last_cleanup_num_heap_tuples: f64::from_le_bytes(read_array(
                page,
                base + 32,
                "btree metapage",
            )?),
            btm_allequalimage: read_array::<1>(page, base + 40, "btree metapage")?[0] != 0,
        };
        if meta.btm_magic != BTREE_MAGIC {
            return Err(PageError::BadBtree {
                problem: format!(
                    "metapage magic {:#x}, expected {:#x}",
                    meta.btm_magic, BTREE_MAGIC
                ),
            });
        }
        if !(BTREE_MIN_VERSION..=BTREE_VERSION).contains(&meta.btm_version) {
            return Err(PageError::BadBtree {
                problem: format!(
                    "metapage version {} outside supported {}..={}",
                    meta.btm_version, BTREE_MIN_VERSION, BTREE_VERSION
                ),
            });
        }
        Ok(meta)
    }

    /// Encodes to the bytes stored at offset 24 of the metapage.
    pub fn to_bytes(&self) -> [u8; SIZE_OF_BT_META] {
        let mut out = [0u8; SIZE_OF_BT_META];
        let fields = [
            self.btm_magic,
            self.btm_version,
            self.btm_root,
            self.btm_level,
            self.btm_fastroot,
            self.btm_fastlevel,
            self.btm_last_cleanup_num_delpages,
        ];
        for (i, v) in fields.iter().enumerate() {
            out[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
        }
        out[32..40].copy_from_slice(&self.btm_last_cleanup_num_heap_tuples.to_le_bytes());
        out[40] = self.btm_allequalimage as u8;
        out
    }
}

/// Per-page btree data kept in the special space (`BTPageOpaqueData`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BtPageOpaque {
    /// Left sibling, or 0 (`P_NONE`) if leftmost.
    pub btpo_prev: u32,
    /// Right sibling, or 0 if rightmost.
    pub btpo_next: u32,
    /// Tree level (0 = leaf).
    pub btpo_level: u32,
    /// `BTP_*` flags.
    pub btpo_flags: u16,
    /// Vacuum cycle id of the latest split.
    pub btpo_cycleid: u16,
}

impl BtPageOpaque {
    /// Decodes 16 bytes of special space.
    pub fn parse(special: &[u8]) -> Result<Self> {
        if special.len() != SIZE_OF_BT_OPAQUE {
            return Err(PageError::BadBtree {
                problem: format!(
                    "special space is {} bytes, expected {SIZE_OF_BT_OPAQUE}",
                    special.len()
                ),
            });
        }
        Ok(Self {
            btpo_prev: read_u32(special, 0, "btree opaque")?,
            btpo_next: read_u32(special, 4, "btree opaque")?,
            btpo_level: read_u32(special, 8, "btree opaque")?,
            btpo_flags: read_u16(special, 12, "btree opaque")?,
            btpo_cycleid: read_u16(special, 14, "btree opaque")?,
        })
    }

    /// Encodes to 16 bytes.
    pub fn to_bytes(&self) -> [u8; SIZE_OF_BT_OPAQUE] {
        let mut out = [0u8; SIZE_OF_BT_OPAQUE];
        out[0..4].copy_from_slice(&self.btpo_prev.to_le_bytes());
        out[4..8].copy_from_slice(&self.btpo_next.to_le_bytes());
        out[8..12].copy_from_slice(&self.btpo_level.to_le_bytes());
        out[12..14].copy_from_slice(&self.btpo_flags.to_le_bytes());
        out[14..16].copy_from_slice(&self.btpo_cycleid.to_le_bytes());
        out
    }

    /// `P_ISLEAF`.
    pub fn is_leaf(&self) -> bool {
        self.btpo_flags & BTP_LEAF != 0
    }
    /// `P_ISROOT`.
    pub fn is_root(&self) -> bool {
        self.btpo_flags & BTP_ROOT != 0
    }
    /// `P_ISMETA`.
    pub fn is_meta(&self) -> bool {
        self.btpo_flags & BTP_META != 0
    }
    /// `P_ISDELETED`.
    pub fn is_deleted(&self) -> bool {
        self.btpo_flags & BTP_DELETED != 0
    }
    /// `P_RIGHTMOST`: no right sibling.
    pub fn is_rightmost(&self) -> bool {
        self.btpo_next == 0
    }
    /// `P_FIRSTDATAKEY`: 1 on the rightmost page, else 2 (after the high key).
    pub fn first_data_offnum(&self) -> u16 {
        if self.is_rightmost() {
            P_HIKEY
        } else {
            P_HIKEY + 1
        }
    }
}

/// One index tuple (`IndexTupleData` plus key and, for posting tuples, the TID array).
#[derive(Debug, Clone, Copy)]
pub struct IndexTuple<'a> {
    /// `t_tid` as stored (meaning depends on the tuple kind).
    pub t_tid: ItemPointer,
    /// `t_info` as stored.
    pub t_info: u16,
    bytes: &'a [u8],
}

impl<'a> IndexTuple<'a> {
    /// Decodes a tuple from the bytes its line pointer covers, checking that the size in
    /// `t_info` covers the header and fits in those bytes.
    pub fn parse(bytes: &'a [u8]) -> Result<Self> {
        let t_tid = ItemPointer::parse(bytes, 0)?;
        let t_info = read_u16(bytes, 6, "index tuple header")?;
        let size = (t_info & INDEX_SIZE_MASK) as usize;
        if size < SIZE_OF_INDEX_TUPLE || size > bytes.len() {
            return Err(PageError::BadTuple {
                what: "index tuple",
                problem: format!(
                    "size {size} in t_info outside {SIZE_OF_INDEX_TUPLE}..={} (item length)",
                    bytes.len()
                ),
            });
        }
        Ok(Self {
            t_tid,
            t_info,
            bytes: &bytes[..size],
        })
    }

    /// Bytes of the tuple (`IndexTupleSize`).
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Size from `t_info`.
    pub fn size_bytes(&self) -> usize {
        self.bytes.len()
    }

    /// True if `INDEX_NULL_MASK` is set.
    pub fn has_nulls(&self) -> bool {
        self.t_info & INDEX_NULL_MASK != 0
    }

    /// True if `INDEX_ALT_TID_MASK` is set.
    pub fn has_alt_tid(&self) -> bool {
        self.t_info & INDEX_ALT_TID_MASK != 0
    }

    /// `BTreeTupleIsPosting`.
    pub fn is_posting(&self) -> bool {
        self.has_alt_tid() && self.t_tid.offset & BT_IS_POSTING != 0
    }

    /// `BTreeTupleIsPivot`.
    pub fn is_pivot(&self) -> bool {
        self.has_alt_tid() && self.t_tid.offset & BT_IS_POSTING == 0
    }

    /// Number of key attributes a pivot keeps (`BTreeTupleGetNAtts`); `None` for non-pivots
    /// (whose attribute count comes from the index definition).
    pub fn pivot_natts(&self) -> Option<u16> {
        self.is_pivot()
            .then_some(self.t_tid.offset & BT_OFFSET_MASK)
    }

    /// The child block a pivot on an internal page points to (`BTreeTupleGetDownLink`).
    pub fn downlink(&self) -> u32 {
        self.t_tid.block
    }

    /// Offset of the key data (`IndexInfoFindDataOffset`).
    pub fn data_offset(&self) -> usize {
        if self.has_nulls() {
            maxalign(SIZE_OF_INDEX_TUPLE + SIZE_OF_INDEX_NULL_BITMAP)
        } else {
            maxalign(SIZE_OF_INDEX_TUPLE)
        }
    }

    /// Number of TIDs in a posting list (0 for other tuples).
    pub fn posting_count(&self) -> usize {
        if self.is_posting() {
            (self.t_tid.offset & BT_OFFSET_MASK) as usize
        } else {
            0
        }
    }

    /// Byte offset of the posting list (`BTreeTupleGetPostingOffset`), for posting tuples.
    pub fn posting_offset(&self) -> Option<usize> {
        self.is_posting().then_some(self.t_tid.block as usize)
    }

    /// The heap TIDs of a posting tuple, bounds-checked.
    pub fn posting_list(&self) -> Result<Vec<ItemPointer>> {
        let Some(start) = self.posting_offset() else {
            return Ok(Vec::new());
        };
        let count = self.posting_count();
        let end = start + count * 6;
        if start < self.data_offset() || end > self.bytes.len() {
            return Err(PageError::BadTuple {
                what: "posting list tuple",
                problem: format!(
                    "{count} TIDs at offset {start} do not fit in tuple of {} bytes",
                    self.bytes.len()
                ),
            });
        }
        (0..count)
            .map(|i| ItemPointer::parse(self.bytes, start + 6 * i))
            .collect()
    }

    /// Heap TIDs this tuple points to: the posting list, `t_tid` for a plain leaf tuple,
    /// nothing for a pivot.
    pub fn heap_tids(&self) -> Result<Vec<ItemPointer>> {
        if self.is_posting() {
            self.posting_list()
        } else if self.is_pivot() {
            Ok(Vec::new())
        } else {
            Ok(vec![self.t_tid])
        }
    }

    /// End of the key area: the posting list start for posting tuples, else the tuple size.
    fn key_end(&self) -> usize {
        self.posting_offset()
            .unwrap_or(self.bytes.len())
            .min(self.bytes.len())
    }

    /// The first key column decoded as `ty`. `Ok(None)` if the key is NULL or the tuple is a
    /// pivot whose keys were truncated away (minus infinity / suffix truncation).
    pub fn first_key(&self, ty: ColumnType) -> Result<Option<Datum<'a>>> {
        if self.pivot_natts() == Some(0) {
            return Ok(None);
        }
        if self.has_nulls() {
            let bitmap = read_array::<1>(self.bytes, SIZE_OF_INDEX_TUPLE, "index null bitmap")?;
            if bitmap[0] & 1 == 0 {
                return Ok(None);
            }
        }
        let off = self.data_offset();
        let key = self.bytes.get(..self.key_end()).unwrap_or(&[]);
        match ty.fixed_len_bytes() {
            Some(len) => {
                let off = align_up(off, ty.align_bytes());
                if off + len > key.len() {
                    return Err(PageError::BadTuple {
                        what: "index tuple",
                        problem: format!(
                            "key of {len} bytes at offset {off} beyond key area of {} bytes",
                            key.len()
                        ),
                    });
                }
                fetch_fixed(ty, key, off).map(Some)
            }
            None => {
                let rest = key.get(off..).unwrap_or(&[]);
                let (v, _) = Varlena::decode(rest)?;
                Ok(Some(Datum::Varlena(v)))
            }
        }
    }
}

/// A btree page (not the metapage): bounds-checked page view plus its opaque data.
#[derive(Debug, Clone, Copy)]
pub struct BtreePage<'a> {
    page: PageRef<'a>,
    opaque: BtPageOpaque,
}

impl<'a> BtreePage<'a> {
    /// Wraps a page, requiring exactly 16 bytes of special space.
    pub fn new(bytes: &'a [u8]) -> Result<Self> {
        let page = PageRef::new(bytes)?;
        let opaque = BtPageOpaque::parse(page.special()?)?;
        Ok(Self { page, opaque })
    }

    /// The underlying page view.
    pub fn page(&self) -> &PageRef<'a> {
        &self.page
    }

    /// The special-space data.
    pub fn opaque(&self) -> &BtPageOpaque {
        &self.opaque
    }

    /// The high key, if the page has a right sibling.
    pub fn high_key(&self) -> Result<Option<IndexTuple<'a>>> {
        if self.opaque.is_rightmost() {
            return Ok(None);
        }
        IndexTuple::parse(self.page.item(P_HIKEY)?).map(Some)
    }

    /// The data items of a leaf that scans read, in key order: [`BtreePage::data_items`]
    /// without the items marked `LP_DEAD`. PostgreSQL's index scans set `LP_DEAD` on leaf
    /// items whose heap rows are dead to every transaction (`kill_prior_tuple`, then
    /// `_bt_killitems`) and `_bt_readpage` skips them; such an item keeps its bytes until
    /// the page is cleaned up, so it is a normal state of a page, not damage.
    pub fn live_data_items(&self) -> Result<Vec<(u16, IndexTuple<'a>)>> {
        let first = self.opaque.first_data_offnum();
        let mut items = Vec::new();
        for offnum in first..=self.page.item_count() {
            let id = self.page.item_id(offnum)?;
            if id.lp_flags == LinePointerFlags::Dead {
                continue;
            }
            items.push((
                offnum,
                IndexTuple::parse(self.page.item_bytes(offnum, id)?)?,
            ));
        }
        Ok(items)
    }

    /// The data items (high key excluded) with their offset numbers, in key order.
    pub fn data_items(&self) -> Result<Vec<(u16, IndexTuple<'a>)>> {
        let first = self.opaque.first_data_offnum();
        (first..=self.page.item_count())
            .map(|offnum| Ok((offnum, IndexTuple::parse(self.page.item(offnum)?)?)))
            .collect()
    }
}

/// Special-space size check shared with the builder: btree pages end with the opaque data.
pub const BTREE_SPECIAL_OFFSET: usize = BLCKSZ - SIZE_OF_BT_OPAQUE;
