//! Generic tuple deforming: any heap tuple, walked with a descriptor built from the catalog.
//!
//! # Problem
//!
//! [`super::heap::HeapTuple::deform`] knows a handful of hand-typed column kinds. A table
//! read by name has whatever columns its `pg_attribute` rows say: fixed-width types of any
//! length, varlenas in every header form, cstrings, dropped columns that still occupy space
//! in old rows, and columns added after the row was written. A single wrong step shifts
//! every later column, so the walk must replay PostgreSQL's `heap_deform_tuple` /
//! `slot_deform_heap_tuple` exactly, driven only by `attlen`, `attalign` and `attbyval`.
//!
//! # Mechanism
//!
//! ```text
//!  for attnum in 0..min(natts(tuple), wanted):
//!      null bit clear (HEAP_HASNULL)   → Null, no space
//!      attlen > 0                      → off = align(off, attalign); attlen bytes
//!      attlen = -1 (varlena)           → byte at off == 0 ? off = align(off, attalign) : as is
//!                                        (att_align_pointer: a non-zero byte starts a 1-byte
//!                                        header, stored unaligned); header says the size
//!      attlen = -2 (cstring)           → off = align(off, attalign); bytes up to the NUL + 1
//!  for attnum in natts(tuple)..wanted:  → the column's attmissingval, else Null
//! ```
//!
//! Like PostgreSQL's `attcacheoff`, [`TupleDesc::cached_offsets`] computes once where the
//! leading fixed-width attributes lie in a tuple without NULLs; [`TupleDesc::deform_cached`]
//! takes those spans as they are when the tuple has no null bitmap, holds every wanted
//! attribute and is long enough for them, and walks only the rest; when every wanted
//! attribute has a cached offset, [`TupleDesc::cached_row`] reads them without filling a
//! vector at all, and when all but a last varlena or cstring do,
//! [`TupleDesc::cached_row_then`] reads that one from where the cached ones end.
//! Any other tuple takes the walk above from its first attribute, so all three give the
//! same values and the same errors.
//!
//! A dropped column is walked like any other (its attlen and attalign stay in pg_attribute)
//! and reported as [`RawDatum::Null`], because its values must never be shown. Every length
//! and offset is checked against the tuple: a malformed value is a
//! [`PageError::BadTuple`] naming the attribute, never a read from elsewhere or a panic.
//!
//! # Worked example
//!
//! `(a int4, b text, c int8)` with `b` NULL: t_infomask has HEAP_HASNULL, bitmap byte `0b101`;
//! `a` at data offset 0 (4 bytes), `b` takes no space, `c` aligns 4 → 8 and takes 8 bytes:
//! the data area is 16 bytes.

use super::heap::HeapTuple;
use super::varlena::Varlena;
use super::{align_up, PageError, Result};

/// One attribute of a [`TupleDesc`]: how it is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttDesc {
    /// Column name, for messages.
    pub name: String,
    /// `attlen`: fixed width in bytes, -1 varlena, -2 cstring.
    pub attlen: i16,
    /// `attalign` in bytes (1, 2, 4 or 8).
    pub align_bytes: usize,
    /// `attisdropped`: walked, never shown.
    pub dropped: bool,
    /// The stored form of `attmissingval` (fixed bytes, or a whole varlena with its header),
    /// read by rows written before the column was added; `None`: such rows read NULL.
    pub missing: Option<Vec<u8>>,
}

impl AttDesc {
    /// An attribute with PostgreSQL's `attalign` letter (`c`, `s`, `i`, `d`).
    pub fn new(name: &str, attlen: i16, attalign: char) -> AttDesc {
        AttDesc {
            name: name.to_string(),
            attlen,
            align_bytes: align_bytes_of(attalign),
            dropped: false,
            missing: None,
        }
    }
}

/// `attalign` letter to bytes; an unknown letter (corrupt catalog) aligns as `c`.
pub fn align_bytes_of(attalign: char) -> usize {
    match attalign {
        'd' => 8,
        'i' => 4,
        's' => 2,
        _ => 1,
    }
}

/// A tuple descriptor: the table's attributes in `attnum` order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TupleDesc {
    /// The attributes, dropped ones included.
    pub atts: Vec<AttDesc>,
}

/// Where the leading fixed-width attributes of a descriptor lie in the data area of a tuple
/// without NULLs (PostgreSQL's `attcacheoff`), from [`TupleDesc::cached_offsets`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CachedOffsets {
    /// `(offset, end)` in the data area of attributes `0..spans.len()`, each fixed width.
    spans: Vec<(usize, usize)>,
}

impl CachedOffsets {
    /// How many leading attributes have a cached offset.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// True when no attribute has a cached offset (the first one is not fixed width).
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }
}

/// The leading fixed-width attributes of one tuple, read at their cached offsets (from
/// [`TupleDesc::cached_row`] and [`TupleDesc::cached_row_then`]).
#[derive(Debug, Clone, Copy)]
pub struct CachedRow<'a> {
    atts: &'a [AttDesc],
    spans: &'a [(usize, usize)],
    /// The data area up to the end of the last span.
    data: &'a [u8],
}

impl<'a> CachedRow<'a> {
    /// Attribute `attnum` (0-based): its bytes, or NULL for a dropped attribute or one past
    /// the row's attributes.
    pub fn get(&self, attnum: usize) -> RawDatum<'a> {
        match (self.atts.get(attnum), self.spans.get(attnum)) {
            (Some(att), Some(&(start, end))) if !att.dropped => {
                // Every span ends within `data` (checked by `cached_row`).
                self.data
                    .get(start..end)
                    .map_or(RawDatum::Null, RawDatum::Fixed)
            }
            _ => RawDatum::Null,
        }
    }
}

/// One attribute's stored value, borrowing from the tuple (or the descriptor's missing value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawDatum<'a> {
    /// NULL, a dropped column, or a column the row predates without a missing value.
    Null,
    /// A fixed-width value: exactly `attlen` bytes.
    Fixed(&'a [u8]),
    /// A varlena, decoded header (payload still possibly compressed or external).
    Varlena(Varlena<'a>),
    /// A cstring without its terminating NUL.
    Cstring(&'a [u8]),
}

impl RawDatum<'_> {
    /// True for [`RawDatum::Null`].
    pub fn is_null(&self) -> bool {
        matches!(self, RawDatum::Null)
    }
}

impl TupleDesc {
    /// Decodes one stored value of attribute `att` from the start of `bytes` (already
    /// aligned), returning it and its stored size.
    fn fetch<'a>(
        att: &AttDesc,
        bytes: &'a [u8],
    ) -> std::result::Result<(RawDatum<'a>, usize), String> {
        match att.attlen {
            len if len > 0 => {
                let len = len as usize;
                let v = bytes.get(..len).ok_or_else(|| {
                    format!(
                        "{len}-byte value runs past the tuple data ({} bytes left)",
                        bytes.len()
                    )
                })?;
                Ok((RawDatum::Fixed(v), len))
            }
            -1 => {
                let (v, size) = Varlena::decode(bytes).map_err(|e| match e {
                    PageError::BadVarlena { problem, .. } => format!("varlena: {problem}"),
                    other => other.to_string(),
                })?;
                Ok((RawDatum::Varlena(v), size))
            }
            -2 => {
                let end = bytes
                    .iter()
                    .position(|&b| b == 0)
                    .ok_or("cstring has no terminating NUL within the tuple")?;
                Ok((RawDatum::Cstring(&bytes[..end]), end + 1))
            }
            other => Err(format!(
                "attlen {other} is not a valid length (>0, -1 or -2)"
            )),
        }
    }

    /// The offsets of the leading fixed-width attributes among the first `wanted`, as a
    /// tuple without NULLs stores them (for [`TupleDesc::deform_cached`]).
    pub fn cached_offsets(&self, wanted: usize) -> CachedOffsets {
        let mut spans = Vec::new();
        let mut off = 0usize;
        for att in self.atts.iter().take(wanted) {
            if att.attlen <= 0 {
                break;
            }
            let start = align_up(off, att.align_bytes);
            off = start + att.attlen as usize;
            spans.push((start, off));
        }
        CachedOffsets { spans }
    }

    /// The first `wanted` attributes of `tuple` at their cached offsets, without a walk:
    /// `Some` when every one of them has a cached offset (`wanted` at most `cached.len()`),
    /// the tuple has no null bitmap, holds them all and is long enough for them. The values
    /// are those [`TupleDesc::deform`] gives; any other tuple is `None` (deform it).
    pub fn cached_row<'a>(
        &'a self,
        cached: &'a CachedOffsets,
        tuple: &HeapTuple<'a>,
        wanted: usize,
    ) -> Option<CachedRow<'a>> {
        let wanted = wanted.min(self.atts.len());
        if wanted == 0 || wanted > cached.spans.len() {
            return None;
        }
        let header = tuple.header();
        if header.has_nulls() || header.natts() < wanted {
            return None;
        }
        let data = tuple.data().get(..cached.spans[wanted - 1].1)?;
        Some(CachedRow {
            atts: &self.atts[..wanted],
            spans: &cached.spans[..wanted],
            data,
        })
    }

    /// The first `wanted` attributes of `tuple` when all but the last have a cached offset
    /// (`wanted` is `cached.len() + 1`): those as [`TupleDesc::cached_row`] reads them, and
    /// attribute `cached.len()` (a varlena or cstring, since a fixed-width one would have
    /// an offset) read from where they end, as the walk reads it. `None` for any other
    /// `wanted`, a tuple with a null bitmap or fewer attributes, or a last value the walk
    /// would not read (deform it, which reports what is wrong). Apart from
    /// [`TupleDesc::cached_row`] so that rows of fixed columns alone keep its smaller result.
    pub fn cached_row_then<'a>(
        &'a self,
        cached: &'a CachedOffsets,
        tuple: &HeapTuple<'a>,
        wanted: usize,
    ) -> Option<(CachedRow<'a>, RawDatum<'a>)> {
        let n = cached.spans.len();
        let wanted = wanted.min(self.atts.len());
        if wanted != n + 1 {
            return None;
        }
        let header = tuple.header();
        if header.has_nulls() || header.natts() < wanted {
            return None;
        }
        let end = cached.spans.last().map_or(0, |&(_, end)| end);
        let data = tuple.data().get(..end)?;
        let mut off = end;
        let last = Self::walk(n, &self.atts[n], tuple.data(), &mut off).ok()?;
        let row = CachedRow {
            atts: &self.atts[..n],
            spans: &cached.spans,
            data,
        };
        Some((row, last))
    }

    /// [`TupleDesc::deform`] with the offsets `cached` (from [`TupleDesc::cached_offsets`]
    /// of this descriptor): the leading fixed-width attributes of a tuple without a null
    /// bitmap that holds all `wanted` attributes are taken at their cached offsets, the rest
    /// walked. The values and errors are those of [`TupleDesc::deform`].
    pub fn deform_cached<'a>(
        &'a self,
        cached: &CachedOffsets,
        tuple: &HeapTuple<'a>,
        wanted: usize,
        out: &mut Vec<RawDatum<'a>>,
    ) -> Result<()> {
        let wanted = wanted.min(self.atts.len());
        let n = cached.spans.len().min(wanted);
        let header = tuple.header();
        let data = tuple.data();
        let end = n.checked_sub(1).map_or(0, |last| cached.spans[last].1);
        if n == 0 || header.has_nulls() || header.natts() < wanted || data.len() < end {
            return self.deform(tuple, wanted, out);
        }
        out.clear();
        // Every span ends at or before `end`, checked against the data above.
        let data_prefix = &data[..end];
        for (att, &(start, stop)) in self.atts[..n].iter().zip(&cached.spans) {
            out.push(if att.dropped {
                RawDatum::Null
            } else {
                RawDatum::Fixed(&data_prefix[start..stop])
            });
        }
        self.deform_from(tuple, wanted, out, n, end)
    }

    /// Deforms the first `wanted` attributes of `tuple` into `out` (cleared first), as
    /// `slot_deform_heap_tuple` does. Attributes past the tuple's own count read their
    /// missing value or NULL; dropped attributes read NULL.
    pub fn deform<'a>(
        &'a self,
        tuple: &HeapTuple<'a>,
        wanted: usize,
        out: &mut Vec<RawDatum<'a>>,
    ) -> Result<()> {
        out.clear();
        self.deform_from(tuple, wanted.min(self.atts.len()), out, 0, 0)
    }

    /// One stored, non-null attribute `att` (0-based `attnum`) at data offset `*off`:
    /// aligned as `heap_deform_tuple` aligns it, decoded, and `*off` moved past it. A
    /// dropped attribute reads [`RawDatum::Null`].
    #[inline(always)]
    fn walk<'a>(
        attnum: usize,
        att: &AttDesc,
        data: &'a [u8],
        off: &mut usize,
    ) -> Result<RawDatum<'a>> {
        if att.attlen > 0 {
            // Fixed width, the common case, without going through `fetch`: its
            // `Result<(RawDatum, usize), String>` costs more to move than the value
            // itself, and a seq scan does this for every attribute of every row.
            let len = att.attlen as usize;
            let aligned = align_up(*off, att.align_bytes);
            if let Some(v) = data.get(aligned..aligned + len) {
                *off = aligned + len;
                return Ok(if att.dropped {
                    RawDatum::Null
                } else {
                    RawDatum::Fixed(v)
                });
            }
            // Past the end: the general path below names the problem.
        } else if att.attlen == -1 {
            // A varlena with a 1-byte header (odd first byte, 0x01 being a TOAST
            // pointer), the common case for short text, stored unaligned: decoded here
            // for the same reason. `total` counts the header byte, so it is at least 1.
            if let Some(&first) = data.get(*off) {
                if first & 0x01 == 0x01 && first != 0x01 {
                    let total = (first >> 1) as usize;
                    if let Some(payload) = data.get(*off + 1..*off + total) {
                        *off += total;
                        return Ok(if att.dropped {
                            RawDatum::Null
                        } else {
                            RawDatum::Varlena(Varlena::Inline(payload))
                        });
                    }
                }
            }
            // Any other header, or a value past the end: the general path.
        }
        let at = *off;
        let bad = |problem: String| PageError::BadTuple {
            what: "heap tuple",
            problem: format!(
                "attribute {} (\"{}\", attlen {}): {problem} at data offset {at}",
                attnum + 1,
                att.name,
                att.attlen
            ),
        };
        // att_align_pointer: for a varlena, a non-zero byte is the first byte of a
        // 1-byte header (never padding), stored without alignment.
        let aligned = if att.attlen == -1 && data.get(*off).is_some_and(|&b| b != 0) {
            *off
        } else {
            align_up(*off, att.align_bytes)
        };
        let rest = data
            .get(aligned..)
            .ok_or_else(|| bad(format!("offset past the tuple data ({} bytes)", data.len())))?;
        *off = aligned;
        let (value, size) = Self::fetch(att, rest).map_err(bad)?;
        *off += size;
        Ok(if att.dropped { RawDatum::Null } else { value })
    }

    /// Deforms attributes `first..wanted` (`wanted` at most the descriptor's count) onto
    /// `out`, attribute `first` starting its walk at data offset `off`.
    fn deform_from<'a>(
        &'a self,
        tuple: &HeapTuple<'a>,
        wanted: usize,
        out: &mut Vec<RawDatum<'a>>,
        first: usize,
        mut off: usize,
    ) -> Result<()> {
        let data = tuple.data();
        let stored = tuple.header().natts().min(wanted);
        debug_assert!(first <= stored, "cached attributes are stored ones");
        for (attnum, att) in self.atts[..stored].iter().enumerate().skip(first) {
            if tuple.is_null(attnum) {
                out.push(RawDatum::Null);
                continue;
            }
            let value = Self::walk(attnum, att, data, &mut off)?;
            out.push(value);
        }
        for att in &self.atts[stored..wanted] {
            out.push(match (&att.missing, att.dropped) {
                (Some(bytes), false) => {
                    Self::fetch(att, bytes).map(|(v, _)| v).map_err(|problem| {
                        PageError::BadTuple {
                            what: "attmissingval",
                            problem: format!("attribute \"{}\": {problem}", att.name),
                        }
                    })?
                }
                _ => RawDatum::Null,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page::heap::{HeapTupleHeader, HEAP_HASNULL, SIZEOF_HEAP_TUPLE_HEADER};
    use proptest::prelude::*;

    /// A tuple with `natts` attributes, an optional null bitmap and `data`.
    fn tuple_bytes(natts: u16, nulls: Option<&[u8]>, data: &[u8]) -> Vec<u8> {
        let bitmap = nulls.unwrap_or(&[]);
        let hoff = align_up(SIZEOF_HEAP_TUPLE_HEADER + bitmap.len(), 8);
        let h = HeapTupleHeader {
            t_infomask2: natts,
            t_infomask: if nulls.is_some() { HEAP_HASNULL } else { 0 },
            t_hoff: hoff as u8,
            ..Default::default()
        };
        let mut out = h.to_bytes().to_vec();
        out.extend_from_slice(bitmap);
        out.resize(hoff, 0);
        out.extend_from_slice(data);
        out
    }

    fn desc() -> TupleDesc {
        TupleDesc {
            atts: vec![
                AttDesc::new("a", 4, 'i'),
                AttDesc::new("b", -1, 'i'),
                AttDesc::new("c", 8, 'd'),
                AttDesc::new("d", -2, 'c'),
            ],
        }
    }

    /// pgbench_accounts' shape: three int4 columns before a bpchar. A row without NULLs
    /// reads its int4s at the cached offsets 0, 4, 8; a row with a NULL, a row that
    /// predates a column, and a row too short for its columns do not, and a dropped column
    /// reads NULL either way.
    #[test]
    fn cached_offsets_of_fixed_leading_columns() {
        let mut d = TupleDesc {
            atts: vec![
                AttDesc::new("aid", 4, 'i'),
                AttDesc::new("bid", 4, 'i'),
                AttDesc::new("abalance", 4, 'i'),
                AttDesc::new("filler", -1, 'i'),
            ],
        };
        let cached = d.cached_offsets(4);
        assert_eq!(cached.len(), 3);
        let mut data = Vec::new();
        for v in [7i32, 8, -9] {
            data.extend_from_slice(&v.to_le_bytes());
        }
        data.extend_from_slice(&[(3 << 1) | 1, b'h', b'i']);
        let bytes = tuple_bytes(4, None, &data);
        let t = HeapTuple::parse(&bytes).unwrap();
        let row = d
            .cached_row(&cached, &t, 3)
            .expect("no NULLs, every column stored");
        assert_eq!(row.get(2), RawDatum::Fixed(&(-9i32).to_le_bytes()));
        // The varlena has no cached offset: not a cached row, but the one after them, read
        // from where abalance ends.
        assert!(d.cached_row(&cached, &t, 4).is_none());
        assert!(
            d.cached_row_then(&cached, &t, 3).is_none(),
            "no attribute past them"
        );
        let (row, last) = d
            .cached_row_then(&cached, &t, 4)
            .expect("the varlena after them");
        assert_eq!(last, RawDatum::Varlena(Varlena::Inline(b"hi")));
        assert_eq!(row.get(2), RawDatum::Fixed(&(-9i32).to_le_bytes()));
        assert_eq!(row.get(3), RawDatum::Null);
        // Two attributes past the cached ones: no row, whatever the tuple holds.
        let mut wider = d.clone();
        wider.atts.push(AttDesc::new("note", -1, 'i'));
        let mut data5 = data.clone();
        data5.extend_from_slice(&[(3 << 1) | 1, b'y', b'o']);
        let bytes5 = tuple_bytes(5, None, &data5);
        let t5 = HeapTuple::parse(&bytes5).unwrap();
        assert_eq!(wider.cached_offsets(5).len(), 3);
        assert!(
            wider.cached_row_then(&cached, &t5, 5).is_none(),
            "only one attribute past the cached ones"
        );
        assert!(wider.cached_row_then(&cached, &t5, 4).is_some());
        // A varlena header claiming more than the tuple holds: no row (the walk reports it).
        let cut = tuple_bytes(4, None, &data[..data.len() - 1]);
        let t_cut = HeapTuple::parse(&cut).unwrap();
        assert!(d.cached_row_then(&cached, &t_cut, 4).is_none());
        assert!(d
            .deform_cached(&cached, &t_cut, 4, &mut Vec::new())
            .is_err());
        let mut out = Vec::new();
        d.deform_cached(&cached, &t, 4, &mut out).unwrap();
        assert_eq!(out[3], RawDatum::Varlena(Varlena::Inline(b"hi")));

        // A NULL bid: abalance moves to offset 4, so the cached offsets do not apply.
        let mut data = Vec::new();
        for v in [7i32, -9] {
            data.extend_from_slice(&v.to_le_bytes());
        }
        let with_null = tuple_bytes(3, Some(&[0b101]), &data);
        let t = HeapTuple::parse(&with_null).unwrap();
        assert!(d.cached_row(&cached, &t, 3).is_none());
        d.deform_cached(&cached, &t, 3, &mut out).unwrap();
        assert_eq!(out[1], RawDatum::Null);
        assert_eq!(out[2], RawDatum::Fixed(&(-9i32).to_le_bytes()));

        // Written before abalance was added: its missing value, through the walk.
        d.atts[2].missing = Some(5i32.to_le_bytes().to_vec());
        let old_row = tuple_bytes(2, None, &[1, 0, 0, 0, 2, 0, 0, 0]);
        let t = HeapTuple::parse(&old_row).unwrap();
        assert!(d.cached_row(&cached, &t, 3).is_none());
        let mut out = Vec::new();
        d.deform_cached(&cached, &t, 3, &mut out).unwrap();
        assert_eq!(out[2], RawDatum::Fixed(&5i32.to_le_bytes()));

        // Shorter than its three int4s: the walk's error, naming the attribute.
        let short = tuple_bytes(3, None, &[1, 0, 0, 0, 2, 0, 0, 0, 3]);
        let t = HeapTuple::parse(&short).unwrap();
        assert!(d.cached_row(&cached, &t, 3).is_none());
        let err = d
            .deform_cached(&cached, &t, 3, &mut Vec::new())
            .unwrap_err();
        assert!(
            err.to_string().contains("attribute 3 (\"abalance\""),
            "{err}"
        );

        // A dropped bid reads NULL at its cached offset too.
        d.atts[1].dropped = true;
        let t = HeapTuple::parse(&bytes).unwrap();
        let row = d.cached_row(&cached, &t, 3).unwrap();
        assert_eq!(row.get(1), RawDatum::Null);
        assert_eq!(row.get(0), RawDatum::Fixed(&7i32.to_le_bytes()));
    }

    #[test]
    fn nulls_alignment_short_varlena_and_cstring() {
        // a = 7, b = 'hi' (short header, unaligned at 4), c at 8, d = "xy".
        let mut data = 7i32.to_le_bytes().to_vec();
        data.extend_from_slice(&[(3 << 1) | 1, b'h', b'i']);
        data.resize(8, 0);
        data.extend_from_slice(&42i64.to_le_bytes());
        data.extend_from_slice(b"xy\0");
        let bytes = tuple_bytes(4, None, &data);
        let t = HeapTuple::parse(&bytes).unwrap();
        let d = desc();
        let mut out = Vec::new();
        d.deform(&t, 4, &mut out).unwrap();
        assert_eq!(out[0], RawDatum::Fixed(&7i32.to_le_bytes()));
        assert_eq!(out[1], RawDatum::Varlena(Varlena::Inline(b"hi")));
        assert_eq!(out[2], RawDatum::Fixed(&42i64.to_le_bytes()));
        assert_eq!(out[3], RawDatum::Cstring(b"xy"));

        // b NULL: c follows a directly after alignment.
        let mut data = 7i32.to_le_bytes().to_vec();
        data.resize(8, 0);
        data.extend_from_slice(&42i64.to_le_bytes());
        let bytes = tuple_bytes(3, Some(&[0b101]), &data);
        let t = HeapTuple::parse(&bytes).unwrap();
        d.deform(&t, 4, &mut out).unwrap();
        assert_eq!(out[1], RawDatum::Null);
        assert_eq!(out[2], RawDatum::Fixed(&42i64.to_le_bytes()));
        assert_eq!(
            out[3],
            RawDatum::Null,
            "beyond natts without a missing value"
        );
    }

    #[test]
    fn missing_values_and_dropped_columns() {
        let mut d = desc();
        d.atts[1].dropped = true;
        d.atts[2].missing = Some(99i64.to_le_bytes().to_vec());
        let mut data = 1i32.to_le_bytes().to_vec();
        data.extend_from_slice(&[(2 << 1) | 1, b'z']);
        let bytes = tuple_bytes(2, None, &data);
        let t = HeapTuple::parse(&bytes).unwrap();
        let mut out = Vec::new();
        d.deform(&t, 4, &mut out).unwrap();
        assert_eq!(out[1], RawDatum::Null, "dropped columns are never shown");
        assert_eq!(out[2], RawDatum::Fixed(&99i64.to_le_bytes()));
        assert_eq!(out[3], RawDatum::Null);
    }

    #[test]
    fn malformed_values_name_the_attribute() {
        let d = desc();
        let mut data = 1i32.to_le_bytes().to_vec();
        data.extend_from_slice(&[(60 << 1) | 1, b'z']); // claims 60 bytes
        let bytes = tuple_bytes(2, None, &data);
        let t = HeapTuple::parse(&bytes).unwrap();
        let err = d.deform(&t, 4, &mut Vec::new()).unwrap_err().to_string();
        assert!(err.contains("attribute 2 (\"b\""), "{err}");
        assert!(err.contains("short header claims 60 bytes"), "{err}");
        // A 4-byte header claiming 16 bytes with 4 left.
        let bytes = tuple_bytes(4, None, &[1, 0, 0, 0, 0x40, 0, 0, 0]);
        let t = HeapTuple::parse(&bytes).unwrap();
        let err = d.deform(&t, 4, &mut Vec::new()).unwrap_err().to_string();
        assert!(
            err.contains("attribute 2") && err.contains("claims 16 bytes"),
            "{err}"
        );
        // An empty short varlena (0x03), then an int8 with no bytes left.
        let bytes = tuple_bytes(4, None, &[1, 0, 0, 0, 3]);
        let t = HeapTuple::parse(&bytes).unwrap();
        let err = d.deform(&t, 4, &mut Vec::new()).unwrap_err().to_string();
        assert!(
            err.contains("attribute 3 (\"c\", attlen 8): offset past the tuple data"),
            "{err}"
        );
    }

    fn att_strategy() -> impl Strategy<Value = AttDesc> {
        (
            prop_oneof![
                Just(1i16),
                Just(2),
                Just(4),
                Just(8),
                Just(16),
                Just(-1),
                Just(-2),
                Just(0),
                Just(-7)
            ],
            prop_oneof![Just('c'), Just('s'), Just('i'), Just('d')],
            any::<bool>(),
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..12)),
        )
            .prop_map(|(len, align, dropped, missing)| AttDesc {
                name: "x".into(),
                attlen: len,
                align_bytes: align_bytes_of(align),
                dropped,
                missing,
            })
    }

    proptest! {
        /// Every short (1-byte header) varlena after a fixed column, the form the deform
        /// loop decodes itself, reads exactly as `Varlena::decode` reads it; a header that
        /// claims more bytes than the tuple holds is an error naming the attribute.
        #[test]
        fn short_varlenas_read_as_decode_reads_them(
            payload in proptest::collection::vec(any::<u8>(), 0..126),
            cut in 0usize..4,
        ) {
            let d = TupleDesc { atts: vec![AttDesc::new("a", 4, 'i'), AttDesc::new("b", -1, 'i')] };
            let mut stored = vec![(((payload.len() + 1) << 1) | 1) as u8];
            stored.extend_from_slice(&payload);
            let mut data = 7i32.to_le_bytes().to_vec();
            data.extend_from_slice(&stored[..stored.len().saturating_sub(cut)]);
            let bytes = tuple_bytes(2, None, &data);
            let t = HeapTuple::parse(&bytes).unwrap();
            let mut out = Vec::new();
            match d.deform(&t, 2, &mut out) {
                Ok(()) => {
                    prop_assert_eq!(cut.min(stored.len() - 1), 0, "a cut value must not read");
                    let (want, size) = Varlena::decode(&stored).unwrap();
                    prop_assert_eq!(size, stored.len());
                    prop_assert_eq!(out[1], RawDatum::Varlena(want));
                }
                Err(e) => {
                    prop_assert!(cut > 0, "{}", e);
                    prop_assert!(e.to_string().contains("attribute 2 (\"b\""), "{}", e);
                }
            }
        }

        /// Reading at cached offsets gives what the walk gives, the same values or the same
        /// error, for every tuple and every number of wanted attributes; a row read without
        /// a walk reads every wanted attribute as the walk does.
        #[test]
        fn cached_offsets_read_as_the_walk_reads(
            atts in proptest::collection::vec(att_strategy(), 0..12),
            natts in 0u16..16,
            nulls in proptest::option::of(proptest::collection::vec(any::<u8>(), 2)),
            data in proptest::collection::vec(any::<u8>(), 0..200),
            wanted in 0usize..14,
        ) {
            let d = TupleDesc { atts };
            let bytes = tuple_bytes(natts, nulls.as_deref(), &data);
            if let Ok(t) = HeapTuple::parse(&bytes) {
                let cached = d.cached_offsets(wanted);
                let (mut walked, mut fast) = (Vec::new(), Vec::new());
                let walk = d.deform(&t, wanted, &mut walked).map_err(|e| e.to_string());
                let quick = d
                    .deform_cached(&cached, &t, wanted, &mut fast)
                    .map_err(|e| e.to_string());
                prop_assert_eq!(&walk, &quick);
                if walk.is_ok() {
                    prop_assert_eq!(&walked, &fast);
                }
                if let Some(row) = d.cached_row(&cached, &t, wanted) {
                    prop_assert!(walk.is_ok());
                    for (c, want) in walked.iter().enumerate() {
                        prop_assert_eq!(row.get(c), *want);
                    }
                    prop_assert_eq!(row.get(walked.len()), RawDatum::Null);
                }
                if let Some((row, last)) = d.cached_row_then(&cached, &t, wanted) {
                    prop_assert!(walk.is_ok());
                    let n = cached.len();
                    prop_assert_eq!(walked.len(), n + 1);
                    for (c, want) in walked[..n].iter().enumerate() {
                        prop_assert_eq!(row.get(c), *want);
                    }
                    prop_assert_eq!(last, walked[n]);
                }
            }
        }

        /// Fixed-width columns followed by a varlena (short or 4-byte header) or a cstring,
        /// as PostgreSQL stores them: `deform_cached` takes the fixed ones at their cached
        /// offsets and walks the last from where they end, and every value is the walk's;
        /// the fixed ones alone read without a vector.
        #[test]
        fn cached_offsets_then_a_walk_read_as_the_walk_reads(
            prefix in proptest::collection::vec(
                (
                    prop_oneof![Just(1i16), Just(2), Just(4), Just(8), Just(16)],
                    prop_oneof![Just('c'), Just('s'), Just('i'), Just('d')],
                    any::<bool>(),
                ),
                0..5,
            ),
            tail in 0u8..3,
            payload in proptest::collection::vec(1u8..=255, 0..40),
            garbage in proptest::collection::vec(any::<u8>(), 0..8),
        ) {
            let mut atts: Vec<AttDesc> = prefix
                .iter()
                .map(|&(len, align, dropped)| AttDesc {
                    dropped,
                    ..AttDesc::new("f", len, align)
                })
                .collect();
            // cstring aligns as `c`, varlena as `i` (a short header unaligned).
            atts.push(if tail == 2 {
                AttDesc::new("t", -2, 'c')
            } else {
                AttDesc::new("t", -1, 'i')
            });
            let d = TupleDesc { atts };
            let wanted = d.atts.len();
            let cached = d.cached_offsets(wanted);
            prop_assert_eq!(cached.len(), prefix.len());
            let mut data = Vec::new();
            for att in &d.atts[..prefix.len()] {
                while data.len() % att.align_bytes != 0 {
                    data.push(0);
                }
                for _ in 0..att.attlen {
                    data.push((data.len() * 7 + 1) as u8);
                }
            }
            match tail {
                0 => {
                    data.push((((payload.len() + 1) << 1) | 1) as u8);
                    data.extend_from_slice(&payload);
                }
                1 => {
                    while data.len() % 4 != 0 {
                        data.push(0);
                    }
                    data.extend_from_slice(&(((payload.len() + 4) as u32) << 2).to_le_bytes());
                    data.extend_from_slice(&payload);
                }
                _ => {
                    data.extend_from_slice(&payload);
                    data.push(0);
                }
            }
            data.extend_from_slice(&garbage);
            let bytes = tuple_bytes(wanted as u16, None, &data);
            let t = HeapTuple::parse(&bytes).unwrap();
            let mut walked = Vec::new();
            d.deform(&t, wanted, &mut walked).unwrap();
            let mut fast = Vec::new();
            d.deform_cached(&cached, &t, wanted, &mut fast).unwrap();
            prop_assert_eq!(&fast, &walked);
            let last = if tail == 2 {
                RawDatum::Cstring(&payload)
            } else {
                RawDatum::Varlena(Varlena::Inline(&payload))
            };
            prop_assert_eq!(fast[prefix.len()], last);
            // The whole row without a vector: the fixed ones at their offsets, the last one
            // read from where they end.
            prop_assert!(d.cached_row(&cached, &t, wanted).is_none());
            let row = d.cached_row_then(&cached, &t, wanted);
            prop_assert!(row.is_some(), "a well-formed row without NULLs");
            let (row, last) = row.unwrap();
            for (c, want) in walked[..prefix.len()].iter().enumerate() {
                prop_assert_eq!(row.get(c), *want, "attribute {}", c);
            }
            prop_assert_eq!(last, walked[prefix.len()]);
            prop_assert_eq!(row.get(prefix.len()), RawDatum::Null);
            if !prefix.is_empty() {
                let row = d.cached_row(&cached, &t, prefix.len());
                prop_assert!(row.is_some(), "a well-formed row without NULLs");
                let row = row.unwrap();
                for (c, want) in walked[..prefix.len()].iter().enumerate() {
                    prop_assert_eq!(row.get(c), *want, "attribute {}", c);
                }
            }
        }

        /// Random tuple bytes with a random descriptor: Ok or Err, never a panic, and every
        /// value returned lies within the tuple or the descriptor.
        #[test]
        fn random_tuples_never_panic(
            atts in proptest::collection::vec(att_strategy(), 0..12),
            natts in 0u16..16,
            nulls in proptest::option::of(proptest::collection::vec(any::<u8>(), 2)),
            data in proptest::collection::vec(any::<u8>(), 0..200),
        ) {
            let d = TupleDesc { atts };
            let bytes = tuple_bytes(natts, nulls.as_deref(), &data);
            if let Ok(t) = HeapTuple::parse(&bytes) {
                let mut out = Vec::new();
                if d.deform(&t, d.atts.len(), &mut out).is_ok() {
                    prop_assert_eq!(out.len(), d.atts.len());
                }
            }
        }
    }
}
