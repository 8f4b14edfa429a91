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
//!  Inline, Compressed    → Varlena::inline_payload (page::varlena, no I/O): pglz complete-
//!                          checked as PostgreSQL's toast_decompress_datum (every input byte
//!                          used, exactly raw bytes out), lz4 by lz4_flex, exactly raw bytes out
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
//! Decompression is pure (bytes in, bytes out) and lives with the varlena format in
//! [`crate::page::varlena`], so the catalog reader uses it without this module; this module
//! adds what needs I/O: locating and reassembling a TOAST relation's chunks.

use std::borrow::Cow;
use std::collections::HashMap;

use super::{KeyRange, LeafWalk};
use crate::buffer::{BufferPool, RelId};
use crate::page::heap::HeapTuple;
use crate::page::heap::{ColumnType, Datum};
use crate::page::tuple::{AttDesc, RawDatum, TupleDesc};
use crate::page::varlena::{decompress, CompressionMethod, Varlena, VARHDRSZ};
use crate::page::{LinePointerFlags, PageRef};
use crate::storage::RelFile;
use crate::stream::{ReadStream, StreamOptions};
use crate::Backend;

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
    // A value in the tuple itself needs no I/O; without a TOAST relation, a TOAST pointer
    // is the error `inline_payload` names.
    let Some(toast) = toast else {
        return value.inline_payload();
    };
    match *value {
        Varlena::Inline(_) | Varlena::Compressed { .. } => value.inline_payload(),
        Varlena::External {
            raw_size_bytes,
            ext_size_bytes,
            value_id,
            toast_relid,
            ..
        } => {
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
