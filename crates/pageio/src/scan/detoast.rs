//! Detoasting: compressed and out-of-line varlena values made whole again.
//!
//! # Problem
//!
//! A text, bytea or numeric value may be stored compressed in line (pglz or lz4, said by
//! `va_tcinfo`), or out of line in the table's TOAST relation as chunks of at most
//! `TOAST_MAX_CHUNK_SIZE` bytes, themselves possibly compressed (`va_extinfo`). Reading the
//! value means undoing both, from bytes that may be damaged: a decompressor that trusts its
//! input writes out of bounds or loops; a chunk list that trusts its sequence numbers
//! returns a value with a hole in it.
//!
//! # Mechanism
//!
//! ```text
//!  Inline                → the payload
//!  Compressed{pglz}      → pglz_decompress(data, raw size), complete-check as PostgreSQL's
//!                          toast_decompress_datum: every input byte used, exactly raw bytes out
//!  Compressed{lz4}       → lz4 block decompression (lz4_flex), exactly raw bytes out
//!  External{value id}    → the TOAST heap's live chunks of that id, located through the
//!                          TOAST index on (chunk_id, chunk_seq) — the same bounded btree
//!                          walk as index scans, keys compared as oids — or, for a TOAST
//!                          table without an index, by one sequential read of its heap
//!                          that keeps block/line pointer per chunk (16 bytes a chunk),
//!                          chunk_seq 0, 1, … without a gap, total = va_extinfo's size;
//!                          compressed (external size < raw − 4): first 4 bytes are va_tcinfo,
//!                          the rest decompressed as above
//! ```
//!
//! Output is bounded before anything is allocated: the raw size was checked against
//! `MaxAllocSize` and the method's largest expansion ([`Varlena::check_limits`]).
//!
//! # Worked example
//!
//! pglz `[0x02, b'a', 0x10, 0x00]` with raw size 5: control byte `0b10` → item 0 a literal
//! `a`, item 1 a tag `0x10 0x00`: length (0x10 & 0x0f) + 3 = 3, offset ((0x10 & 0xf0) << 4)
//! | 0x00 = 256 → past the output written so far: corrupt, as PostgreSQL says.

use std::borrow::Cow;
use std::collections::HashMap;

use super::{KeyRange, LeafWalk};
use crate::buffer::{BufferPool, RelId};
use crate::page::heap::HeapTuple;
use crate::page::heap::{ColumnType, Datum};
use crate::page::tuple::{AttDesc, RawDatum, TupleDesc};
use crate::page::varlena::{CompressionMethod, Varlena, VARHDRSZ};
use crate::page::{LinePointerFlags, PageRef};
use crate::storage::RelFile;
use crate::stream::{ReadStream, StreamOptions};
use crate::Backend;

/// Decompresses a pglz stream into exactly `raw_size_bytes` bytes, as PostgreSQL's
/// `pglz_decompress(…, check_complete = true)`: every control bit consumed in order, a
/// back-reference must point into what was already written, and the input must end exactly
/// where the output is complete. Bounded by the output size; never panics.
pub fn pglz_decompress(src: &[u8], raw_size_bytes: usize) -> Result<Vec<u8>, String> {
    let mut out: Vec<u8> = Vec::with_capacity(raw_size_bytes);
    let mut sp = 0usize;
    while sp < src.len() && out.len() < raw_size_bytes {
        let mut ctrl = src[sp];
        sp += 1;
        for _ in 0..8 {
            if sp >= src.len() || out.len() >= raw_size_bytes {
                break;
            }
            if ctrl & 1 != 0 {
                // A tag: 4 bits of length (+3), 12 bits of offset, an extra length byte at 18.
                let (Some(&b0), Some(&b1)) = (src.get(sp), src.get(sp + 1)) else {
                    return Err(format!("pglz tag at input byte {sp} is truncated"));
                };
                let mut len = (b0 & 0x0f) as usize + 3;
                let off = (((b0 & 0xf0) as usize) << 4) | b1 as usize;
                sp += 2;
                if len == 18 {
                    let extra = *src
                        .get(sp)
                        .ok_or_else(|| format!("pglz tag at input byte {} is truncated", sp - 2))?;
                    len += extra as usize;
                    sp += 1;
                }
                if off == 0 || off > out.len() {
                    return Err(format!(
                        "pglz back-reference at input byte {} has offset {off} with only {} bytes decompressed",
                        sp.saturating_sub(3),
                        out.len()
                    ));
                }
                let len = len.min(raw_size_bytes - out.len());
                // Overlapping copies repeat the pattern, as memcpy of the C loop does.
                let start = out.len() - off;
                for i in 0..len {
                    let b = out[start + i];
                    out.push(b);
                }
            } else {
                out.push(src[sp]);
                sp += 1;
            }
            ctrl >>= 1;
        }
    }
    if out.len() != raw_size_bytes || sp != src.len() {
        return Err(format!(
            "pglz data decompresses to {} bytes using {sp} of {} input bytes, not the {raw_size_bytes} bytes the header claims",
            out.len(),
            src.len()
        ));
    }
    Ok(out)
}

/// Decompresses `data` with `method` into exactly `raw_size_bytes` bytes.
pub fn decompress(
    method: CompressionMethod,
    data: &[u8],
    raw_size_bytes: usize,
) -> Result<Vec<u8>, String> {
    match method {
        CompressionMethod::Pglz => pglz_decompress(data, raw_size_bytes),
        CompressionMethod::Lz4 => {
            let out = lz4_flex::block::decompress(data, raw_size_bytes)
                .map_err(|e| format!("lz4 data does not decompress: {e}"))?;
            if out.len() != raw_size_bytes {
                return Err(format!(
                    "lz4 data decompresses to {} bytes, not the {raw_size_bytes} bytes the header claims",
                    out.len()
                ));
            }
            Ok(out)
        }
        CompressionMethod::Other(id) => Err(format!(
            "compression method id {id} is invalid (PostgreSQL knows 0 = pglz and 1 = lz4)"
        )),
    }
}

/// A TOAST relation, ready to locate chunks and reassemble values.
pub struct ToastReader<'p> {
    pool: &'p BufferPool,
    rel: RelFile,
    relid: RelId,
    toast_oid: u32,
    /// The TOAST index on (chunk_id, chunk_seq); without it, `chunks` locates them.
    index: Option<RelFile>,
    /// value id → (chunk_seq, block, line pointer) of its live chunks (no index only).
    chunks: HashMap<u32, Vec<(i32, u64, u16)>>,
    desc: TupleDesc,
    backend: Backend,
    live: fn(&crate::page::heap::HeapTupleHeader) -> bool,
}

/// `chunk_id = value_id` on the TOAST index's first key (an oid, compared unsigned as
/// `btoidcmp` does).
struct ChunkIdEquals(u32);

impl KeyRange for ChunkIdEquals {
    fn below(&self, key: &Datum<'_>) -> bool {
        matches!(*key, Datum::Oid(k) if k < self.0)
    }
    fn above(&self, key: &Datum<'_>) -> bool {
        matches!(*key, Datum::Oid(k) if k > self.0)
    }
    fn matches(&self, key: &Datum<'_>) -> bool {
        matches!(*key, Datum::Oid(k) if k == self.0)
    }
}

impl std::fmt::Debug for ToastReader<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToastReader")
            .field("rel", &self.rel.display_name())
            .field("values", &self.chunks.len())
            .finish()
    }
}

/// The TOAST relation's columns: `chunk_id oid, chunk_seq int4, chunk_data bytea`.
fn toast_desc() -> TupleDesc {
    TupleDesc {
        atts: vec![
            AttDesc::new("chunk_id", 4, 'i'),
            AttDesc::new("chunk_seq", 4, 'i'),
            AttDesc::new("chunk_data", -1, 'i'),
        ],
    }
}

fn u32_of(d: &RawDatum<'_>) -> Option<u32> {
    match d {
        RawDatum::Fixed(b) if b.len() == 4 => Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        _ => None,
    }
}

impl<'p> ToastReader<'p> {
    /// A reader of TOAST relation `toast_oid` stored in `rel` (of `nblocks` blocks), through
    /// `pool` with its own AIO backend, so it can fetch while a scan's stream holds pins.
    /// With `index` (the TOAST index) each value's chunks are looked up in it; without,
    /// every live chunk is located now by one sequential read of the heap. `live` decides
    /// visibility by hint bits, as the scan does.
    pub fn open(
        pool: &'p BufferPool,
        rel: RelFile,
        index: Option<RelFile>,
        toast_oid: u32,
        nblocks: u64,
        live: fn(&crate::page::heap::HeapTupleHeader) -> bool,
    ) -> Result<ToastReader<'p>, String> {
        let name = rel.display_name().to_string();
        let mut backend = pool.aio().backend().map_err(|e| e.to_string())?;
        let desc = toast_desc();
        let mut chunks: HashMap<u32, Vec<(i32, u64, u16)>> = HashMap::new();
        if index.is_none() {
            let mut next = 0u64;
            let mut stream = ReadStream::new(pool, &rel, StreamOptions::default(), move || {
                (next < nblocks).then(|| {
                    next += 1;
                    (next - 1, ())
                })
            });
            while let Some(buf) = stream
                .next(&mut backend)
                .map_err(|e| format!("TOAST relation \"{name}\": {e}"))?
            {
                let page = buf.page();
                if page[14..16] == [0, 0] {
                    continue;
                }
                let block = buf.block;
                let at = |off: u16| {
                    format!("TOAST relation \"{name}\" block {block}, line pointer {off}")
                };
                let p = PageRef::new(page)
                    .map_err(|e| format!("TOAST relation \"{name}\" block {block}: {e}"))?;
                let mut values = Vec::with_capacity(3);
                for (off, id) in p.item_ids() {
                    if id.lp_flags != LinePointerFlags::Normal {
                        continue;
                    }
                    let bytes = p
                        .item_bytes(off, id)
                        .map_err(|e| format!("{}: {e}", at(off)))?;
                    let t = HeapTuple::parse(bytes).map_err(|e| format!("{}: {e}", at(off)))?;
                    if !live(t.header()) {
                        continue;
                    }
                    desc.deform(&t, 2, &mut values)
                        .map_err(|e| format!("{}: {e}", at(off)))?;
                    let (Some(id), Some(seq)) = (
                        values.first().and_then(u32_of),
                        values.get(1).and_then(u32_of),
                    ) else {
                        return Err(format!("{}: chunk_id or chunk_seq is NULL", at(off)));
                    };
                    chunks.entry(id).or_default().push((seq as i32, block, off));
                }
            }
        }
        for list in chunks.values_mut() {
            list.sort_unstable();
        }
        let relid = pool.register(&rel);
        Ok(ToastReader {
            pool,
            rel,
            relid,
            toast_oid,
            index,
            chunks,
            desc,
            backend,
            live,
        })
    }

    /// (chunk_seq, block, line pointer) of value `value_id`'s live chunks, in chunk order.
    fn locate(&mut self, value_id: u32) -> Result<Vec<(i32, u64, u16)>, String> {
        let name = self.rel.display_name().to_string();
        let Some(index) = &self.index else {
            return Ok(self.chunks.get(&value_id).cloned().unwrap_or_default());
        };
        let index_name = index.display_name().to_string();
        let range = ChunkIdEquals(value_id);
        let mut tids = Vec::new();
        {
            let mut walk =
                LeafWalk::start(self.pool, &mut self.backend, index, ColumnType::Oid, &range)
                    .map_err(|e| format!("TOAST index \"{index_name}\": {e}"))?;
            while let Some(mut leaf) = walk
                .next_leaf(&mut self.backend)
                .map_err(|e| format!("TOAST index \"{index_name}\": {e}"))?
            {
                tids.append(&mut leaf);
            }
        }
        let mut found = Vec::with_capacity(tids.len());
        for tid in tids {
            let (block, off) = (tid.block as u64, tid.offset);
            let at = format!("TOAST relation \"{name}\" block {block}, line pointer {off}");
            let buf = self
                .pool
                .read_buffer(&mut self.backend, self.relid, block, None)
                .map_err(|e| format!("TOAST relation \"{name}\": {e}"))?;
            let p = PageRef::new(buf.page()).map_err(|e| format!("{at}: {e}"))?;
            if off == 0 || off > p.item_count() {
                continue; // an index entry past the page's line pointers: no row, as heap fetch
            }
            let id = p.item_id(off).map_err(|e| format!("{at}: {e}"))?;
            if id.lp_flags != LinePointerFlags::Normal {
                continue; // dead or unused: the chunk of a deleted value, not yet vacuumed
            }
            let bytes = p.item_bytes(off, id).map_err(|e| format!("{at}: {e}"))?;
            let t = HeapTuple::parse(bytes).map_err(|e| format!("{at}: {e}"))?;
            if !(self.live)(t.header()) {
                continue;
            }
            let mut values = Vec::with_capacity(2);
            self.desc
                .deform(&t, 2, &mut values)
                .map_err(|e| format!("{at}: {e}"))?;
            let (Some(id), Some(seq)) = (
                values.first().and_then(u32_of),
                values.get(1).and_then(u32_of),
            ) else {
                return Err(format!("{at}: chunk_id or chunk_seq is NULL"));
            };
            if id != value_id {
                return Err(format!(
                    "{at}: TOAST index \"{index_name}\" has an entry for chunk_id {value_id} pointing to a chunk of value {id}: the index is corrupt; REINDEX it"
                ));
            }
            found.push((seq as i32, block, off));
        }
        found.sort_unstable();
        Ok(found)
    }

    /// The stored bytes of value `value_id`: its chunks in order, `ext_size_bytes` in all.
    fn fetch(&mut self, value_id: u32, ext_size_bytes: usize) -> Result<Vec<u8>, String> {
        let name = self.rel.display_name().to_string();
        let list = self.locate(value_id)?;
        if list.is_empty() {
            return Err(format!("TOAST value {value_id} is missing from TOAST relation \"{name}\" (no live chunk has that chunk_id)"));
        }
        let mut out = Vec::with_capacity(ext_size_bytes);
        for (expected, &(seq, block, off)) in list.iter().enumerate() {
            if seq != expected as i32 {
                return Err(format!(
                    "TOAST value {value_id} in \"{name}\": chunk {expected} is missing (found chunk_seq {seq} at block {block}, line pointer {off})"
                ));
            }
            let buf = self
                .pool
                .read_buffer(&mut self.backend, self.relid, block, None)
                .map_err(|e| format!("TOAST relation \"{name}\": {e}"))?;
            let at = format!("TOAST relation \"{name}\" block {block}, line pointer {off}");
            let p = PageRef::new(buf.page()).map_err(|e| format!("{at}: {e}"))?;
            let id = p.item_id(off).map_err(|e| format!("{at}: {e}"))?;
            let bytes = p.item_bytes(off, id).map_err(|e| format!("{at}: {e}"))?;
            let t = HeapTuple::parse(bytes).map_err(|e| format!("{at}: {e}"))?;
            let mut values = Vec::with_capacity(3);
            self.desc
                .deform(&t, 3, &mut values)
                .map_err(|e| format!("{at}: {e}"))?;
            match values.get(2) {
                Some(RawDatum::Varlena(Varlena::Inline(data))) => {
                    if out.len() + data.len() > ext_size_bytes {
                        return Err(format!(
                            "TOAST value {value_id} in \"{name}\": chunks hold more than the {ext_size_bytes} bytes its pointer claims"
                        ));
                    }
                    out.extend_from_slice(data)
                }
                other => {
                    return Err(format!(
                        "{at}: chunk_data of TOAST value {value_id} is {other:?}, not an uncompressed in-line bytea"
                    ))
                }
            }
        }
        if out.len() != ext_size_bytes {
            return Err(format!(
                "TOAST value {value_id} in \"{name}\": chunks hold {} bytes, its pointer claims {ext_size_bytes} (a chunk is missing)",
                out.len()
            ));
        }
        Ok(out)
    }
}

/// The whole payload of a varlena: decompressed, fetched from `toast` when external.
/// The caller has checked the value's sizes ([`Varlena::check_limits`]).
pub fn detoast<'a>(
    value: &Varlena<'a>,
    toast: Option<&mut ToastReader<'_>>,
) -> Result<Cow<'a, [u8]>, String> {
    match *value {
        Varlena::Inline(p) => Ok(Cow::Borrowed(p)),
        Varlena::Compressed {
            raw_size_bytes,
            method,
            data,
        } => decompress(method, data, raw_size_bytes as usize).map(Cow::Owned),
        Varlena::External {
            raw_size_bytes,
            ext_size_bytes,
            value_id,
            toast_relid,
            ..
        } => {
            let toast = toast.ok_or_else(|| {
                format!("TOAST value {value_id} points to TOAST relation oid {toast_relid}, but the table has no TOAST relation")
            })?;
            if toast_relid != toast.toast_oid {
                return Err(format!(
                    "TOAST value {value_id} points to TOAST relation oid {toast_relid}, not the table's ({})",
                    toast.toast_oid
                ));
            }
            let stored = toast.fetch(value_id, ext_size_bytes as usize)?;
            let raw = (raw_size_bytes.max(0) as usize).saturating_sub(VARHDRSZ);
            if value.is_compressed() {
                let tcinfo = stored
                    .get(..4)
                    .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .ok_or_else(|| {
                        format!(
                            "TOAST value {value_id} is compressed but shorter than its va_tcinfo"
                        )
                    })?;
                let method = CompressionMethod::from_id(tcinfo >> 30);
                decompress(method, &stored[4..], raw).map(Cow::Owned)
            } else {
                Ok(Cow::Owned(stored))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A minimal pglz compressor (literals and greedy matches) to produce valid streams.
    fn pglz_compress(input: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < input.len() {
            let ctrl_at = out.len();
            out.push(0);
            let mut ctrl = 0u8;
            for bit in 0..8 {
                if i >= input.len() {
                    break;
                }
                let mut best = (0usize, 0usize);
                for off in 1..=i.min(4095) {
                    let mut len = 0;
                    while len < 273
                        && i + len < input.len()
                        && input[i + len - off] == input[i + len]
                    {
                        len += 1;
                    }
                    if len > best.1 {
                        best = (off, len);
                    }
                }
                if best.1 >= 3 {
                    let (off, len) = best;
                    ctrl |= 1 << bit;
                    if len >= 18 {
                        out.push((((off >> 4) & 0xf0) | 0x0f) as u8);
                        out.push((off & 0xff) as u8);
                        out.push((len - 18) as u8);
                    } else {
                        out.push((((off >> 4) & 0xf0) | (len - 3)) as u8);
                        out.push((off & 0xff) as u8);
                    }
                    i += len;
                } else {
                    out.push(input[i]);
                    i += 1;
                }
            }
            out[ctrl_at] = ctrl;
        }
        out
    }

    #[test]
    fn pglz_round_trips_and_refuses_bad_offsets() {
        let input: Vec<u8> = b"abcabcabcabcabcabcabcabcabcXYZabcabc".repeat(20);
        let c = pglz_compress(&input);
        assert!(c.len() < input.len());
        assert_eq!(pglz_decompress(&c, input.len()).unwrap(), input);
        let err = pglz_decompress(&[0x02, b'a', 0x10, 0x00], 5).unwrap_err();
        assert!(err.contains("offset 256"), "{err}");
        let err = pglz_decompress(&c, input.len() + 1).unwrap_err();
        assert!(err.contains("not the"), "{err}");
    }

    #[test]
    fn lz4_values_decompress_exactly() {
        // This PostgreSQL build has no lz4, so the lz4 path is tested with a block made by
        // the same crate: PostgreSQL stores LZ4_compress_default's raw block format.
        let input = b"pageio lz4 pageio lz4 pageio lz4 pageio lz4".repeat(10);
        let block = lz4_flex::block::compress(&input);
        assert_eq!(
            decompress(CompressionMethod::Lz4, &block, input.len()).unwrap(),
            input
        );
        let err = decompress(CompressionMethod::Lz4, &block, input.len() + 3).unwrap_err();
        assert!(err.contains("lz4"), "{err}");
        let err = decompress(
            CompressionMethod::Lz4,
            &block[..block.len() / 2],
            input.len(),
        )
        .unwrap_err();
        assert!(err.contains("lz4"), "{err}");
        // An inline-compressed varlena with method lz4 is detoasted through the same path.
        let v = Varlena::Compressed {
            raw_size_bytes: input.len() as u32,
            method: CompressionMethod::Lz4,
            data: &block,
        };
        assert_eq!(detoast(&v, None).unwrap().as_ref(), &input[..]);
    }

    proptest! {
        /// Random input never panics and never produces more than the claimed size.
        #[test]
        fn pglz_random_input_is_ok_or_err(src in proptest::collection::vec(any::<u8>(), 0..300), raw in 0usize..2000) {
            if let Ok(out) = pglz_decompress(&src, raw) {
                prop_assert_eq!(out.len(), raw);
            }
            if let Ok(out) = decompress(CompressionMethod::Lz4, &src, raw) {
                prop_assert_eq!(out.len(), raw);
            }
        }

        #[test]
        fn pglz_round_trips(input in proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), any::<u8>()], 0..600)) {
            let c = pglz_compress(&input);
            prop_assert_eq!(pglz_decompress(&c, input.len()).unwrap(), input);
        }
    }
}
