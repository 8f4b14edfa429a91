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
        let wanted = wanted.min(self.atts.len());
        let data = tuple.data();
        let stored = tuple.header().natts().min(wanted);
        let mut off = 0usize;
        for (attnum, att) in self.atts[..stored].iter().enumerate() {
            if tuple.is_null(attnum) {
                out.push(RawDatum::Null);
                continue;
            }
            if att.attlen > 0 {
                // Fixed width, the common case, without going through `fetch`: its
                // `Result<(RawDatum, usize), String>` costs more to move than the value
                // itself, and a seq scan does this for every attribute of every row.
                let len = att.attlen as usize;
                let aligned = align_up(off, att.align_bytes);
                if let Some(v) = data.get(aligned..aligned + len) {
                    off = aligned + len;
                    out.push(if att.dropped {
                        RawDatum::Null
                    } else {
                        RawDatum::Fixed(v)
                    });
                    continue;
                }
                // Past the end: the general path below names the problem.
            } else if att.attlen == -1 {
                // A varlena with a 1-byte header (odd first byte, 0x01 being a TOAST
                // pointer), the common case for short text, stored unaligned: decoded here
                // for the same reason. `total` counts the header byte, so it is at least 1.
                if let Some(&first) = data.get(off) {
                    if first & 0x01 == 0x01 && first != 0x01 {
                        let total = (first >> 1) as usize;
                        if let Some(payload) = data.get(off + 1..off + total) {
                            off += total;
                            out.push(if att.dropped {
                                RawDatum::Null
                            } else {
                                RawDatum::Varlena(Varlena::Inline(payload))
                            });
                            continue;
                        }
                    }
                }
                // Any other header, or a value past the end: the general path.
            }
            let at = off;
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
            let aligned = if att.attlen == -1 && data.get(off).is_some_and(|&b| b != 0) {
                off
            } else {
                align_up(off, att.align_bytes)
            };
            let rest = data
                .get(aligned..)
                .ok_or_else(|| bad(format!("offset past the tuple data ({} bytes)", data.len())))?;
            off = aligned;
            let (value, size) = Self::fetch(att, rest).map_err(bad)?;
            off += size;
            out.push(if att.dropped { RawDatum::Null } else { value });
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
