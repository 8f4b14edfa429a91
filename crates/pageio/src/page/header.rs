//! The page header (`PageHeaderData`), LSNs, line pointers and a bounds-checked page view.
//!
//! # Problem
//!
//! Every other reader in this module starts from the header and the line pointer array, and
//! both come straight from disk. A single bad `pd_lower` or `lp_off` must turn into an error
//! naming the field, never into an out-of-bounds slice.
//!
//! # Mechanism
//!
//! The header is 24 bytes, little-endian (the x86 layout PostgreSQL writes on every platform
//! we target):
//!
//! ```text
//!  off  0  pd_lsn        u32 xlogid, u32 xrecoff   (shown as "xlogid/xrecoff" in hex)
//!  off  8  pd_checksum   u16
//!  off 10  pd_flags      u16   PD_HAS_FREE_LINES 1, PD_PAGE_FULL 2, PD_ALL_VISIBLE 4
//!  off 12  pd_lower      u16   end of the line pointer array
//!  off 14  pd_upper      u16   start of tuple storage
//!  off 16  pd_special    u16   start of access-method special space
//!  off 18  pd_pagesize_version u16   8192 | 4
//!  off 20  pd_prune_xid  u32
//!  off 24  ItemIdData[]  u32 each: lp_off:15 | lp_flags:2 | lp_len:15 (low bits first)
//! ```
//!
//! [`PageHeader::parse`] only decodes. [`PageRef::new`] additionally checks that the line
//! pointer array fits (`24 <= pd_lower <= BLCKSZ`, `pd_special <= BLCKSZ`) so that item
//! access afterwards can rely on those bounds; each item is then checked against them when it
//! is fetched.
//!
//! # Worked example
//!
//! `uniform` block 0 in the test fixture starts `00000000 88c7d201 dcc5 0400 6000 b018 …`:
//! LSN `0/1D2C788`, checksum 0xC5DC = 50652, flags 4 (all visible), pd_lower 0x60 = 96 (so
//! (96 − 24) / 4 = 18 line pointers), pd_upper 0x18B0 = 6320.

use std::fmt;

use super::{read_array, read_u16, read_u32, PageError, Result, BLCKSZ};

/// Size of `PageHeaderData` in bytes (`SizeOfPageHeaderData`).
pub const SIZE_OF_PAGE_HEADER: usize = 24;
/// Size of one line pointer (`ItemIdData`).
pub const SIZE_OF_ITEM_ID: usize = 4;
/// Current page layout version (`PG_PAGE_LAYOUT_VERSION`).
pub const PG_PAGE_LAYOUT_VERSION: u8 = 4;
/// `pd_flags`: there are unused line pointers before pd_lower.
pub const PD_HAS_FREE_LINES: u16 = 0x0001;
/// `pd_flags`: not enough free space for a new tuple.
pub const PD_PAGE_FULL: u16 = 0x0002;
/// `pd_flags`: all tuples visible to everyone.
pub const PD_ALL_VISIBLE: u16 = 0x0004;
/// All `pd_flags` bits PostgreSQL defines; others make the header invalid.
pub const PD_VALID_FLAG_BITS: u16 = 0x0007;

/// A write-ahead log position, stored on the page as two u32 halves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Lsn(pub u64);

impl Lsn {
    /// High 32 bits (`xlogid`).
    pub fn xlogid(self) -> u32 {
        (self.0 >> 32) as u32
    }
    /// Low 32 bits (`xrecoff`).
    pub fn xrecoff(self) -> u32 {
        self.0 as u32
    }
}

impl fmt::Display for Lsn {
    /// PostgreSQL's `%X/%X` form, e.g. `0/1D2C788`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:X}/{:X}", self.xlogid(), self.xrecoff())
    }
}

/// The decoded 24-byte page header. Fields keep PostgreSQL's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PageHeader {
    /// LSN of the last WAL record that changed this page.
    pub pd_lsn: Lsn,
    /// Stored checksum (0 when checksums are off).
    pub pd_checksum: u16,
    /// Flag bits (`PD_*`).
    pub pd_flags: u16,
    /// Offset of the end of the line pointer array.
    pub pd_lower: u16,
    /// Offset of the start of tuple storage.
    pub pd_upper: u16,
    /// Offset of the special space.
    pub pd_special: u16,
    /// Page size in bytes ORed with the layout version.
    pub pd_pagesize_version: u16,
    /// Oldest unpruned XMAX on the page, or 0.
    pub pd_prune_xid: u32,
}

impl PageHeader {
    /// Decodes the header from the first 24 bytes of `bytes`. No consistency checks.
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        let raw: [u8; SIZE_OF_PAGE_HEADER] = read_array(bytes, 0, "page header")?;
        let u16_at = |o: usize| u16::from_le_bytes([raw[o], raw[o + 1]]);
        let u32_at = |o: usize| u32::from_le_bytes([raw[o], raw[o + 1], raw[o + 2], raw[o + 3]]);
        Ok(Self {
            pd_lsn: Lsn(((u32_at(0) as u64) << 32) | u32_at(4) as u64),
            pd_checksum: u16_at(8),
            pd_flags: u16_at(10),
            pd_lower: u16_at(12),
            pd_upper: u16_at(14),
            pd_special: u16_at(16),
            pd_pagesize_version: u16_at(18),
            pd_prune_xid: u32_at(20),
        })
    }

    /// Encodes the header into its 24-byte on-disk form.
    pub fn to_bytes(&self) -> [u8; SIZE_OF_PAGE_HEADER] {
        let mut out = [0u8; SIZE_OF_PAGE_HEADER];
        out[0..4].copy_from_slice(&self.pd_lsn.xlogid().to_le_bytes());
        out[4..8].copy_from_slice(&self.pd_lsn.xrecoff().to_le_bytes());
        out[8..10].copy_from_slice(&self.pd_checksum.to_le_bytes());
        out[10..12].copy_from_slice(&self.pd_flags.to_le_bytes());
        out[12..14].copy_from_slice(&self.pd_lower.to_le_bytes());
        out[14..16].copy_from_slice(&self.pd_upper.to_le_bytes());
        out[16..18].copy_from_slice(&self.pd_special.to_le_bytes());
        out[18..20].copy_from_slice(&self.pd_pagesize_version.to_le_bytes());
        out[20..24].copy_from_slice(&self.pd_prune_xid.to_le_bytes());
        out
    }

    /// Writes the header into the first 24 bytes of `page`.
    pub fn write_to(&self, page: &mut [u8]) -> Result<()> {
        let available_bytes = page.len();
        let dst = page
            .get_mut(..SIZE_OF_PAGE_HEADER)
            .ok_or(PageError::Truncated {
                what: "page header",
                offset: 0,
                needed_bytes: SIZE_OF_PAGE_HEADER,
                available_bytes,
            })?;
        dst.copy_from_slice(&self.to_bytes());
        Ok(())
    }

    /// Page size in bytes (`PageGetPageSize`).
    pub fn page_size_bytes(&self) -> usize {
        (self.pd_pagesize_version & 0xFF00) as usize
    }

    /// Layout version (`PageGetPageLayoutVersion`), 4 since PostgreSQL 8.3.
    pub fn layout_version(&self) -> u8 {
        (self.pd_pagesize_version & 0x00FF) as u8
    }

    /// Number of line pointers implied by pd_lower (0 if pd_lower is below the header).
    pub fn item_count(&self) -> u16 {
        ((self.pd_lower as usize).saturating_sub(SIZE_OF_PAGE_HEADER) / SIZE_OF_ITEM_ID) as u16
    }

    /// Free bytes between the line pointer array and tuple storage (0 if inverted).
    pub fn free_space_bytes(&self) -> usize {
        (self.pd_upper as usize).saturating_sub(self.pd_lower as usize)
    }
}

/// State of a line pointer (`lp_flags`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinePointerFlags {
    /// `LP_UNUSED` (0): free for reuse; lp_len is 0.
    Unused,
    /// `LP_NORMAL` (1): points at a tuple.
    Normal,
    /// `LP_REDIRECT` (2): HOT redirect; lp_off holds the target offset number.
    Redirect,
    /// `LP_DEAD` (3): dead, may or may not still have storage.
    Dead,
}

impl LinePointerFlags {
    /// Decodes the 2-bit field.
    pub fn from_bits(bits: u32) -> Self {
        match bits & 3 {
            0 => Self::Unused,
            1 => Self::Normal,
            2 => Self::Redirect,
            _ => Self::Dead,
        }
    }
    /// Encodes to the 2-bit field.
    pub fn bits(self) -> u32 {
        match self {
            Self::Unused => 0,
            Self::Normal => 1,
            Self::Redirect => 2,
            Self::Dead => 3,
        }
    }
}

/// One line pointer (`ItemIdData`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ItemId {
    /// Byte offset of the item from the start of the page (15 bits).
    pub lp_off: u16,
    /// State.
    pub lp_flags: LinePointerFlags,
    /// Byte length of the item (15 bits).
    pub lp_len: u16,
}

impl ItemId {
    /// Decodes the packed 32-bit form (bitfields allocated from the low bit on x86).
    pub fn from_u32(raw: u32) -> Self {
        Self {
            lp_off: (raw & 0x7FFF) as u16,
            lp_flags: LinePointerFlags::from_bits(raw >> 15),
            lp_len: ((raw >> 17) & 0x7FFF) as u16,
        }
    }
    /// Encodes to the packed 32-bit form; offsets and lengths are truncated to 15 bits.
    pub fn to_u32(self) -> u32 {
        (self.lp_off as u32 & 0x7FFF)
            | (self.lp_flags.bits() << 15)
            | ((self.lp_len as u32 & 0x7FFF) << 17)
    }
    /// True for `LP_NORMAL`.
    pub fn is_normal(self) -> bool {
        self.lp_flags == LinePointerFlags::Normal
    }
}

/// A tuple identifier (`ItemPointerData`): block number split in two u16 halves plus offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ItemPointer {
    /// Block number (`bi_hi << 16 | bi_lo`).
    pub block: u32,
    /// Offset number (1-based line pointer index), `ip_posid`.
    pub offset: u16,
}

/// Size of an `ItemPointerData` on disk.
pub const SIZE_OF_ITEM_POINTER: usize = 6;

impl ItemPointer {
    /// Decodes 6 bytes at `offset` of `bytes`.
    pub fn parse(bytes: &[u8], offset: usize) -> Result<Self> {
        let raw: [u8; 6] = read_array(bytes, offset, "item pointer")?;
        let hi = u16::from_le_bytes([raw[0], raw[1]]) as u32;
        let lo = u16::from_le_bytes([raw[2], raw[3]]) as u32;
        Ok(Self {
            block: (hi << 16) | lo,
            offset: u16::from_le_bytes([raw[4], raw[5]]),
        })
    }
    /// Encodes to 6 bytes.
    pub fn to_bytes(self) -> [u8; 6] {
        let mut out = [0u8; 6];
        out[0..2].copy_from_slice(&((self.block >> 16) as u16).to_le_bytes());
        out[2..4].copy_from_slice(&(self.block as u16).to_le_bytes());
        out[4..6].copy_from_slice(&self.offset.to_le_bytes());
        out
    }
}

impl fmt::Display for ItemPointer {
    /// PostgreSQL's ctid form `(block,offset)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({},{})", self.block, self.offset)
    }
}

/// A bounds-checked view of one page: header plus line pointer and item access.
#[derive(Debug, Clone, Copy)]
pub struct PageRef<'a> {
    bytes: &'a [u8],
    header: PageHeader,
}

impl<'a> PageRef<'a> {
    /// Wraps `bytes` (exactly [`BLCKSZ`] long) after checking that pd_lower and pd_special
    /// lie inside the page, which every later access relies on.
    pub fn new(bytes: &'a [u8]) -> Result<Self> {
        if bytes.len() != BLCKSZ {
            return Err(PageError::WrongPageSize {
                actual_bytes: bytes.len(),
                expected_bytes: BLCKSZ,
            });
        }
        let header = PageHeader::parse(bytes)?;
        let bad = |field, value: u16, problem: String| PageError::BadHeaderField {
            field,
            value: value as u32,
            problem,
        };
        if (header.pd_lower as usize) < SIZE_OF_PAGE_HEADER {
            return Err(bad(
                "pd_lower",
                header.pd_lower,
                format!("below header size {SIZE_OF_PAGE_HEADER}"),
            ));
        }
        if header.pd_lower as usize > BLCKSZ {
            return Err(bad(
                "pd_lower",
                header.pd_lower,
                format!("beyond page size {BLCKSZ}"),
            ));
        }
        if header.pd_special as usize > BLCKSZ {
            return Err(bad(
                "pd_special",
                header.pd_special,
                format!("beyond page size {BLCKSZ}"),
            ));
        }
        if header.pd_upper as usize > BLCKSZ {
            return Err(bad(
                "pd_upper",
                header.pd_upper,
                format!("beyond page size {BLCKSZ}"),
            ));
        }
        Ok(Self { bytes, header })
    }

    /// The raw page bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The decoded header.
    pub fn header(&self) -> &PageHeader {
        &self.header
    }

    /// Number of line pointers (`PageGetMaxOffsetNumber`).
    pub fn item_count(&self) -> u16 {
        self.header.item_count()
    }

    /// Line pointer `offnum` (1-based, like `OffsetNumber`).
    pub fn item_id(&self, offnum: u16) -> Result<ItemId> {
        let count = self.item_count();
        if offnum == 0 || offnum > count {
            return Err(PageError::NoSuchItem { offnum, count });
        }
        let at = SIZE_OF_PAGE_HEADER + (offnum as usize - 1) * SIZE_OF_ITEM_ID;
        Ok(ItemId::from_u32(read_u32(self.bytes, at, "line pointer")?))
    }

    /// All line pointers with their 1-based offset numbers.
    pub fn item_ids(&self) -> impl Iterator<Item = (u16, ItemId)> + 'a {
        let bytes = self.bytes;
        (1..=self.item_count()).filter_map(move |offnum| {
            let at = SIZE_OF_PAGE_HEADER + (offnum as usize - 1) * SIZE_OF_ITEM_ID;
            read_u32(bytes, at, "line pointer")
                .ok()
                .map(|raw| (offnum, ItemId::from_u32(raw)))
        })
    }

    /// The bytes of item `offnum`, which must be `LP_NORMAL` and lie between the end of the
    /// line pointer array and pd_special (or the page end if pd_special is below pd_lower).
    pub fn item(&self, offnum: u16) -> Result<&'a [u8]> {
        let id = self.item_id(offnum)?;
        self.item_bytes(offnum, id)
    }

    /// The bytes a given line pointer points at, bounds-checked as in [`PageRef::item`].
    pub fn item_bytes(&self, offnum: u16, id: ItemId) -> Result<&'a [u8]> {
        if !id.is_normal() {
            return Err(PageError::ItemNotNormal {
                offnum,
                flags: id.lp_flags,
            });
        }
        let lower = self.header.pd_lower as usize;
        let special = self.header.pd_special as usize;
        let upper_limit = if special >= lower { special } else { BLCKSZ };
        let start = id.lp_off as usize;
        let end = start + id.lp_len as usize;
        if start < lower || end > upper_limit || id.lp_len == 0 {
            return Err(PageError::ItemOutOfBounds {
                offnum,
                lp_off: id.lp_off,
                lp_len: id.lp_len,
                lower,
                upper_limit,
            });
        }
        Ok(&self.bytes[start..end])
    }

    /// Items of every `LP_NORMAL` line pointer, each bounds-checked.
    pub fn normal_items(&self) -> impl Iterator<Item = (u16, Result<&'a [u8]>)> + 'a {
        let this = *self;
        self.item_ids()
            .filter(|(_, id)| id.is_normal())
            .map(move |(offnum, id)| (offnum, this.item_bytes(offnum, id)))
    }

    /// The special space (`pd_special..BLCKSZ`).
    pub fn special(&self) -> Result<&'a [u8]> {
        let special = self.header.pd_special as usize;
        if special < self.header.pd_lower as usize {
            return Err(PageError::BadHeaderField {
                field: "pd_special",
                value: special as u32,
                problem: format!("below pd_lower {}", self.header.pd_lower),
            });
        }
        Ok(&self.bytes[special..])
    }
}

/// Reads the u16 at `offset` of a page (helper for callers that only need one field).
pub fn page_u16(page: &[u8], offset: usize) -> Result<u16> {
    read_u16(page, offset, "page field")
}
