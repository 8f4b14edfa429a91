//! Heap tuples (`HeapTupleHeaderData`) and attribute deforming.
//!
//! # Problem
//!
//! A heap row on disk is a 23-byte header, an optional null bitmap, padding up to `t_hoff`,
//! then the non-null attribute values packed with per-type alignment. Nothing in the tuple
//! says where a column starts: the reader must replay PostgreSQL's layout rules
//! (`heap_deform_tuple`) with the table's column types, and a single alignment mistake shifts
//! every later column.
//!
//! # Mechanism
//!
//! ```text
//!  0       4       8         12            18            20           22     23        t_hoff
//!  ┌───────┬───────┬─────────┬─────────────┬─────────────┬────────────┬──────┬─────────┬──────┐
//!  │t_xmin │t_xmax │t_cid    │t_ctid       │t_infomask2  │t_infomask  │t_hoff│null bits│ data │
//!  │       │       │/t_xvac  │(blk hi,lo,  │natts & 07FF │HEAP_* flags│      │(if      │      │
//!  │       │       │         │ offset)     │             │            │      │HASNULL) │      │
//!  └───────┴───────┴─────────┴─────────────┴─────────────┴────────────┴──────┴─────────┴──────┘
//! ```
//!
//! Deforming walks the columns with an offset `off` relative to `t_hoff` (which is MAXALIGNed,
//! so aligning `off` aligns the address):
//!
//! * a null column (bit clear in the bitmap) takes no space;
//! * a fixed-width column aligns `off` to its `typalign` (`d` = 8, `i` = 4, `s` = 2, `c` = 1);
//! * a varlena column is aligned *only if the byte at `off` is zero* — a pad byte — because a
//!   short (1-byte header) varlena is stored unaligned and its first byte is never zero
//!   (`att_align_pointer`);
//! * columns beyond the tuple's own `natts` (added later by `ALTER TABLE`) read as null.
//!
//! # Worked example
//!
//! A fixture row `(a float8, b text)` has t_hoff 24, no nulls: `a` at data offset 0 (8 bytes,
//! already 8-aligned), then `off` = 8; the byte there is `0x87`, non-zero, so `b` starts at 8
//! with a short header: 135 >> 1 = 67 bytes; tuple length = 24 + 8 + 67 = 99, which is the
//! lp_len of every line pointer on those pages.

use super::header::{ItemPointer, SIZE_OF_ITEM_POINTER};
use super::varlena::Varlena;
use super::{align_up, read_array, PageError, Result};

/// Size of the fixed part of a heap tuple header (`SizeofHeapTupleHeader`).
pub const SIZEOF_HEAP_TUPLE_HEADER: usize = 23;
/// Mask of the attribute count in `t_infomask2`.
pub const HEAP_NATTS_MASK: u16 = 0x07FF;
/// `t_infomask2`: tuple was HOT-updated.
pub const HEAP_HOT_UPDATED: u16 = 0x4000;
/// `t_infomask2`: tuple is a heap-only tuple.
pub const HEAP_ONLY_TUPLE: u16 = 0x8000;
/// `t_infomask2`: tuple was updated and key columns modified, or tuple deleted.
pub const HEAP_KEYS_UPDATED: u16 = 0x2000;

/// `t_infomask`: has null attribute(s).
pub const HEAP_HASNULL: u16 = 0x0001;
/// `t_infomask`: has variable-width attribute(s).
pub const HEAP_HASVARWIDTH: u16 = 0x0002;
/// `t_infomask`: has external stored attribute(s).
pub const HEAP_HASEXTERNAL: u16 = 0x0004;
/// `t_infomask`: has an object-id field (pre-12 tables only).
pub const HEAP_HASOID_OLD: u16 = 0x0008;
/// `t_infomask`: xmax is a key-share locker.
pub const HEAP_XMAX_KEYSHR_LOCK: u16 = 0x0010;
/// `t_infomask`: t_cid is a combo cid.
pub const HEAP_COMBOCID: u16 = 0x0020;
/// `t_infomask`: xmax is an exclusive locker.
pub const HEAP_XMAX_EXCL_LOCK: u16 = 0x0040;
/// `t_infomask`: xmax, if valid, is only a locker.
pub const HEAP_XMAX_LOCK_ONLY: u16 = 0x0080;
/// `t_infomask`: t_xmin committed.
pub const HEAP_XMIN_COMMITTED: u16 = 0x0100;
/// `t_infomask`: t_xmin invalid/aborted.
pub const HEAP_XMIN_INVALID: u16 = 0x0200;
/// `t_infomask`: both xmin bits: frozen.
pub const HEAP_XMIN_FROZEN: u16 = HEAP_XMIN_COMMITTED | HEAP_XMIN_INVALID;
/// `t_infomask`: t_xmax committed.
pub const HEAP_XMAX_COMMITTED: u16 = 0x0400;
/// `t_infomask`: t_xmax invalid/aborted.
pub const HEAP_XMAX_INVALID: u16 = 0x0800;
/// `t_infomask`: t_xmax is a MultiXactId.
pub const HEAP_XMAX_IS_MULTI: u16 = 0x1000;
/// `t_infomask`: this is the updated version of a row.
pub const HEAP_UPDATED: u16 = 0x2000;
/// `t_infomask`: moved off by pre-9.0 VACUUM FULL.
pub const HEAP_MOVED_OFF: u16 = 0x4000;
/// `t_infomask`: moved in by pre-9.0 VACUUM FULL.
pub const HEAP_MOVED_IN: u16 = 0x8000;

/// `FrozenTransactionId`: visible to everyone.
pub const FROZEN_TRANSACTION_ID: u32 = 2;
/// Largest attribute count a heap tuple can declare (`MaxHeapAttributeNumber`).
pub const MAX_HEAP_ATTRIBUTE_NUMBER: usize = 1600;

/// Column types the deformer understands, with PostgreSQL's length and alignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ColumnType {
    /// `double precision`: 8 bytes, align `d`.
    Float8,
    /// `real`: 4 bytes, align `i`.
    Float4,
    /// `bigint`: 8 bytes, align `d`.
    Int8,
    /// `integer`: 4 bytes, align `i`.
    Int4,
    /// `smallint`: 2 bytes, align `s`.
    Int2,
    /// `boolean`: 1 byte, align `c`.
    Bool,
    /// `oid`: 4 bytes, align `i`.
    Oid,
    /// `text`, `varchar`, `bytea`, … : varlena, align `i`.
    Text,
    /// Any other varlena with an explicit alignment in bytes (1, 2, 4 or 8).
    Varlena {
        /// `typalign` in bytes.
        align_bytes: u8,
    },
}

impl ColumnType {
    /// `typalign` in bytes.
    pub fn align_bytes(self) -> usize {
        match self {
            Self::Float8 | Self::Int8 => 8,
            Self::Float4 | Self::Int4 | Self::Oid | Self::Text => 4,
            Self::Int2 => 2,
            Self::Bool => 1,
            Self::Varlena { align_bytes } => match align_bytes {
                8 => 8,
                4 => 4,
                2 => 2,
                _ => 1,
            },
        }
    }

    /// `typlen`: the fixed width in bytes, or `None` for varlena.
    pub fn fixed_len_bytes(self) -> Option<usize> {
        match self {
            Self::Float8 | Self::Int8 => Some(8),
            Self::Float4 | Self::Int4 | Self::Oid => Some(4),
            Self::Int2 => Some(2),
            Self::Bool => Some(1),
            Self::Text | Self::Varlena { .. } => None,
        }
    }
}

/// One attribute value, borrowing varlena payloads from the page.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Datum<'a> {
    /// SQL NULL (or a column the tuple does not have).
    Null,
    /// `double precision`.
    Float8(f64),
    /// `real`.
    Float4(f32),
    /// `bigint`.
    Int8(i64),
    /// `integer`.
    Int4(i32),
    /// `smallint`.
    Int2(i16),
    /// `boolean`.
    Bool(bool),
    /// `oid`.
    Oid(u32),
    /// Any varlena value, decoded.
    Varlena(Varlena<'a>),
}

impl<'a> Datum<'a> {
    /// An uncompressed in-line varlena (e.g. a `text` value) holding `bytes`.
    pub fn text(bytes: &'a [u8]) -> Self {
        Self::Varlena(Varlena::Inline(bytes))
    }

    /// The in-line uncompressed payload of a varlena, if this is one.
    pub fn as_bytes(&self) -> Option<&'a [u8]> {
        match self {
            Self::Varlena(v) => v.inline_bytes(),
            _ => None,
        }
    }

    /// The value as f64 for numeric types (`Float8`, `Float4`, integers), else `None`.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Self::Float8(v) => Some(v),
            Self::Float4(v) => Some(v as f64),
            Self::Int8(v) => Some(v as f64),
            Self::Int4(v) => Some(v as f64),
            Self::Int2(v) => Some(v as f64),
            _ => None,
        }
    }

    /// True for [`Datum::Null`].
    pub fn is_null(&self) -> bool {
        matches!(self, Self::Null)
    }

    /// The column type a value of this kind is stored as (varlena as `Text`); `None` for null.
    pub fn column_type(&self) -> Option<ColumnType> {
        Some(match self {
            Self::Null => return None,
            Self::Float8(_) => ColumnType::Float8,
            Self::Float4(_) => ColumnType::Float4,
            Self::Int8(_) => ColumnType::Int8,
            Self::Int4(_) => ColumnType::Int4,
            Self::Int2(_) => ColumnType::Int2,
            Self::Bool(_) => ColumnType::Bool,
            Self::Oid(_) => ColumnType::Oid,
            Self::Varlena(_) => ColumnType::Text,
        })
    }
}

/// Decodes a fixed-width value of type `ty` from exactly its bytes.
pub(crate) fn fetch_fixed<'a>(ty: ColumnType, bytes: &[u8], offset: usize) -> Result<Datum<'a>> {
    const WHAT: &str = "attribute value";
    Ok(match ty {
        ColumnType::Float8 => Datum::Float8(f64::from_le_bytes(read_array(bytes, offset, WHAT)?)),
        ColumnType::Float4 => Datum::Float4(f32::from_le_bytes(read_array(bytes, offset, WHAT)?)),
        ColumnType::Int8 => Datum::Int8(i64::from_le_bytes(read_array(bytes, offset, WHAT)?)),
        ColumnType::Int4 => Datum::Int4(i32::from_le_bytes(read_array(bytes, offset, WHAT)?)),
        ColumnType::Oid => Datum::Oid(u32::from_le_bytes(read_array(bytes, offset, WHAT)?)),
        ColumnType::Int2 => Datum::Int2(i16::from_le_bytes(read_array(bytes, offset, WHAT)?)),
        ColumnType::Bool => Datum::Bool(read_array::<1>(bytes, offset, WHAT)?[0] != 0),
        ColumnType::Text | ColumnType::Varlena { .. } => {
            return Err(PageError::BadTuple {
                what: "attribute",
                problem: "varlena type passed to fixed-width fetch".into(),
            })
        }
    })
}

/// The decoded fixed part of a heap tuple header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HeapTupleHeader {
    /// Inserting transaction.
    pub t_xmin: u32,
    /// Deleting or locking transaction.
    pub t_xmax: u32,
    /// Command id, or the old VACUUM FULL xid (`t_xvac`).
    pub t_cid: u32,
    /// Current TID of this or a newer row version.
    pub t_ctid: ItemPointer,
    /// Attribute count and HOT flags.
    pub t_infomask2: u16,
    /// Visibility and layout flags (`HEAP_*`).
    pub t_infomask: u16,
    /// Offset of the user data (header, bitmap and padding).
    pub t_hoff: u8,
}

impl HeapTupleHeader {
    /// Decodes the 23-byte fixed header from the start of `bytes`.
    #[inline(always)]
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        if bytes.len() < SIZEOF_HEAP_TUPLE_HEADER {
            return Err(PageError::Truncated {
                what: "heap tuple header",
                offset: 0,
                needed_bytes: SIZEOF_HEAP_TUPLE_HEADER,
                available_bytes: bytes.len(),
            });
        }
        // The length is checked once above; every field below is a fixed slice of these
        // 23 bytes (a seq scan parses one header per row, so no per-field checks).
        let h: &[u8; SIZEOF_HEAP_TUPLE_HEADER] = bytes[..SIZEOF_HEAP_TUPLE_HEADER]
            .try_into()
            .expect("length checked above");
        let u32_at = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
        let u16_at = |i: usize| u16::from_le_bytes([h[i], h[i + 1]]);
        Ok(Self {
            t_xmin: u32_at(0),
            t_xmax: u32_at(4),
            t_cid: u32_at(8),
            t_ctid: ItemPointer {
                block: (u16_at(12) as u32) << 16 | u16_at(14) as u32,
                offset: u16_at(16),
            },
            t_infomask2: u16_at(12 + SIZE_OF_ITEM_POINTER),
            t_infomask: u16_at(20),
            t_hoff: h[22],
        })
    }

    /// Encodes the 23-byte fixed header.
    pub fn to_bytes(&self) -> [u8; SIZEOF_HEAP_TUPLE_HEADER] {
        let mut out = [0u8; SIZEOF_HEAP_TUPLE_HEADER];
        out[0..4].copy_from_slice(&self.t_xmin.to_le_bytes());
        out[4..8].copy_from_slice(&self.t_xmax.to_le_bytes());
        out[8..12].copy_from_slice(&self.t_cid.to_le_bytes());
        out[12..18].copy_from_slice(&self.t_ctid.to_bytes());
        out[18..20].copy_from_slice(&self.t_infomask2.to_le_bytes());
        out[20..22].copy_from_slice(&self.t_infomask.to_le_bytes());
        out[22] = self.t_hoff;
        out
    }

    /// Number of attributes stored in the tuple (`HeapTupleHeaderGetNatts`).
    pub fn natts(&self) -> usize {
        (self.t_infomask2 & HEAP_NATTS_MASK) as usize
    }

    /// True if the tuple has a null bitmap.
    pub fn has_nulls(&self) -> bool {
        self.t_infomask & HEAP_HASNULL != 0
    }

    /// True if `t_xmin` is marked committed (or frozen).
    pub fn xmin_committed(&self) -> bool {
        self.t_infomask & HEAP_XMIN_COMMITTED != 0
    }

    /// True if `t_xmax` is marked invalid, i.e. the row was never deleted or locked.
    pub fn xmax_invalid(&self) -> bool {
        self.t_infomask & HEAP_XMAX_INVALID != 0
    }
}

/// Bytes of null bitmap for `natts` attributes (`BITMAPLEN`).
pub fn bitmap_len_bytes(natts: usize) -> usize {
    natts.div_ceil(8)
}

/// A heap tuple: its header plus the bytes it occupies on the page.
#[derive(Debug, Clone, Copy)]
pub struct HeapTuple<'a> {
    header: HeapTupleHeader,
    bytes: &'a [u8],
}

impl<'a> HeapTuple<'a> {
    /// Parses a tuple from the bytes its line pointer covers, checking that `t_hoff` covers
    /// the header and bitmap and lies within the tuple.
    #[inline(always)]
    pub fn parse(bytes: &'a [u8]) -> Result<Self> {
        let header = HeapTupleHeader::parse(bytes)?;
        let bad = |problem: String| PageError::BadTuple {
            what: "heap tuple",
            problem,
        };
        let min_hoff = SIZEOF_HEAP_TUPLE_HEADER
            + if header.has_nulls() {
                bitmap_len_bytes(header.natts())
            } else {
                0
            };
        let t_hoff = header.t_hoff as usize;
        if t_hoff < min_hoff {
            return Err(bad(format!(
                "t_hoff {t_hoff} smaller than header and null bitmap ({min_hoff} bytes for {} attributes)",
                header.natts()
            )));
        }
        if t_hoff > bytes.len() {
            return Err(bad(format!(
                "t_hoff {t_hoff} beyond tuple length {}",
                bytes.len()
            )));
        }
        Ok(Self { header, bytes })
    }

    /// The decoded header.
    pub fn header(&self) -> &HeapTupleHeader {
        &self.header
    }

    /// All bytes of the tuple, header included.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The user data (from `t_hoff` on).
    pub fn data(&self) -> &'a [u8] {
        &self.bytes[self.header.t_hoff as usize..]
    }

    /// True if attribute `attnum` (0-based) is null according to the bitmap. Attributes
    /// beyond the tuple's `natts` count as null.
    pub fn is_null(&self, attnum: usize) -> bool {
        if attnum >= self.header.natts() {
            return true;
        }
        if !self.header.has_nulls() {
            return false;
        }
        // parse() guaranteed the bitmap lies within the header area.
        let byte = self.bytes[SIZEOF_HEAP_TUPLE_HEADER + attnum / 8];
        byte & (1 << (attnum % 8)) == 0
    }

    /// Extracts the values of the first `columns.len()` attributes, following
    /// `heap_deform_tuple`'s alignment rules. Every offset and length is checked against the
    /// tuple, so a corrupt tuple yields an error rather than a wrong value from elsewhere.
    pub fn deform(&self, columns: &[ColumnType]) -> Result<Vec<Datum<'a>>> {
        let mut values = Vec::with_capacity(columns.len());
        self.deform_into(columns, &mut values)?;
        Ok(values)
    }

    /// [`HeapTuple::deform`] into `values` (cleared first), so that a scan reuses one
    /// vector for every row instead of allocating one per row.
    pub fn deform_into(&self, columns: &[ColumnType], values: &mut Vec<Datum<'a>>) -> Result<()> {
        values.clear();
        let data = self.data();
        let mut off = 0usize;
        for (attnum, &ty) in columns.iter().enumerate() {
            if self.is_null(attnum) {
                values.push(Datum::Null);
                continue;
            }
            let bad = |problem: String| PageError::BadTuple {
                what: "heap tuple",
                problem: format!("attribute {} ({ty:?}): {problem}", attnum + 1),
            };
            match ty.fixed_len_bytes() {
                Some(len) => {
                    off = align_up(off, ty.align_bytes());
                    if off + len > data.len() {
                        return Err(bad(format!(
                            "{len} bytes at data offset {off} run past the tuple data ({} bytes)",
                            data.len()
                        )));
                    }
                    values.push(fetch_fixed(ty, data, off)?);
                    off += len;
                }
                None => {
                    // att_align_pointer: a zero byte can only be padding before an aligned
                    // 4-byte header; a non-zero byte is the start of an unaligned short one.
                    if data.get(off).copied().unwrap_or(0) == 0 {
                        off = align_up(off, ty.align_bytes());
                    }
                    let rest = data.get(off..).ok_or_else(|| {
                        bad(format!(
                            "data offset {off} past tuple data ({} bytes)",
                            data.len()
                        ))
                    })?;
                    let (value, size) = Varlena::decode(rest).map_err(|e| match e {
                        PageError::BadVarlena { problem, .. } => {
                            bad(format!("varlena at data offset {off}: {problem}"))
                        }
                        other => other,
                    })?;
                    values.push(Datum::Varlena(value));
                    off += size;
                }
            }
        }
        Ok(())
    }
}
