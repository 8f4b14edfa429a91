//! # Table scans over real PostgreSQL files
//!
//! The three scans of PostgreSQL's published AIO experiments, answering
//! `SELECT count(*), sum(octet_length(<last column>)) FROM t WHERE a BETWEEN lo AND hi`:
//!
//! ```text
//!   seq:     heap blocks 0..n ──────────────────────────► read stream (bulk-read ring) ─► filter
//!   bitmap:  btree range ─► TIDs ─► sort by block ─► heap blocks in order ─► read stream ─► fetch TIDs
//!   index:   btree range ─► TIDs in key order ─────────► read stream (prefetching!) ─► fetch TIDs
//! ```
//!
//! The btree is entered as PostgreSQL enters it: from the metapage's (fast) root, descending
//! through each internal page to the child whose key range may hold `lo` (the last pivot
//! with key < lo; the first, key-less item is minus infinity), then along right links from
//! leaf to leaf until a key exceeds `hi`. Posting-list tuples contribute all their TIDs.
//!
//! The index scan reads leaf pages as it goes and feeds their TIDs to a read stream, so heap
//! pages are prefetched `effective_io_concurrency` reads ahead — what PostgreSQL 18 does for
//! bitmap heap scans but not yet for index scans.
//!
//! **Visibility.** Only `LP_NORMAL` line pointers hold tuples (dead, unused and redirect
//! pointers are skipped; a redirect is followed when fetching by TID, as the start of a HOT
//! chain). A tuple is live unless its inserting transaction is marked invalid (aborted) or
//! its deleting transaction is marked committed (and was not a mere lock). Full MVCC —
//! snapshots, in-progress transactions, the commit log — is out of scope: hint bits are
//! what this engine believes, which is exact for any cleanly shut-down, vacuumed cluster.
//!
//! Worked example (the fixture's `uniform`, `a BETWEEN 250 AND 750`): the seq scan reads all
//! 1112 heap pages and keeps 9917 rows; the bitmap scan descends root block 3 to the first
//! leaf holding 250, collects 9917 TIDs, sorts them into ~1100 distinct pages (the values are
//! random, so nearly every page qualifies) and reads those; the index scan fetches the same
//! 9917 TIDs in key order, re-pinning pages many times. All three answer 9917 rows and
//! 654522 bytes, as PostgreSQL does.

use std::collections::VecDeque;
use std::time::Instant;

use thiserror::Error;

use crate::aio::IoCounters;
use crate::buffer::{BufferError, BufferPool, PoolCounters, RelId};
use crate::page::btree::{BtMetaPage, BtreePage};
use crate::page::heap::{ColumnType, Datum, HeapTuple, HEAP_HOT_UPDATED};
use crate::page::heap::{HEAP_XMAX_COMMITTED, HEAP_XMAX_INVALID, HEAP_XMAX_LOCK_ONLY};
use crate::page::heap::{HEAP_XMIN_COMMITTED, HEAP_XMIN_INVALID};
use crate::page::{ItemPointer, LinePointerFlags, PageError, PageRef};
use crate::storage::{RelFile, StorageError};
use crate::stream::{DistancePolicy, ReadStream, StreamOptions, StreamStats};
use crate::Backend;

mod predicate;
mod relpath;
pub use predicate::{float8_cmp, parse_float8};
pub use relpath::{resolve_relation_path, RelPathError, RelationKind};

/// Which scan to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ScanKind {
    /// Every heap page in order.
    Seq,
    /// TIDs from the index, sorted by block, heap pages in block order.
    Bitmap,
    /// TIDs from the index in key order, heap pages prefetched by a read stream.
    Index,
}

impl std::str::FromStr for ScanKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "seq" | "seqscan" | "sequential" => Ok(ScanKind::Seq),
            "bitmap" | "bitmapscan" | "bitmapheap" => Ok(ScanKind::Bitmap),
            "index" | "indexscan" => Ok(ScanKind::Index),
            _ => Err(format!(
                "unknown scan kind \"{s}\": expected seq, bitmap or index"
            )),
        }
    }
}

impl std::fmt::Display for ScanKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ScanKind::Seq => "seq",
            ScanKind::Bitmap => "bitmap",
            ScanKind::Index => "index",
        })
    }
}

/// `a BETWEEN lo AND hi` on the first column.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Between {
    /// Lower bound (inclusive).
    pub lo: f64,
    /// Upper bound (inclusive).
    pub hi: f64,
}

impl Between {
    /// Everything: NaN is the top of PostgreSQL's float8 order, so it is the upper bound.
    pub const ALL: Between = Between {
        lo: f64::NEG_INFINITY,
        hi: f64::NAN,
    };

    /// Parses `a between LO and HI` (see [`Between::parse_on`] for another key column).
    pub fn parse(s: &str) -> Result<Between, String> {
        Between::parse_on(s, "a")
    }

    fn matches(&self, key: &Datum<'_>) -> bool {
        match *key {
            Datum::Int4(v) => self.contains_int(v as i64),
            Datum::Int8(v) => self.contains_int(v),
            Datum::Int2(v) => self.contains_int(v as i64),
            Datum::Float8(v) => self.contains_float8(v),
            Datum::Float4(v) => self.contains_float8(v as f64),
            _ => false,
        }
    }

    fn below(&self, key: &Datum<'_>) -> bool {
        key.as_f64()
            .is_some_and(|v| float8_cmp(v, self.lo) == std::cmp::Ordering::Less)
    }

    fn above(&self, key: &Datum<'_>) -> bool {
        key.as_f64()
            .is_some_and(|v| float8_cmp(v, self.hi) == std::cmp::Ordering::Greater)
    }
}

/// A table: its heap, optionally its btree on the first column, and its column types.
#[derive(Debug, Clone)]
pub struct Table {
    /// The heap relation.
    pub heap: RelFile,
    /// The btree on the first column (needed for bitmap and index scans).
    pub index: Option<RelFile>,
    /// Column types, in order. The first is the key; the last is summed.
    pub columns: Vec<ColumnType>,
}

/// What a scan found and what it cost.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ScanResult {
    /// Qualifying live rows (`count(*)`).
    pub rows: u64,
    /// `sum(octet_length(last column))` over those rows.
    pub sum_octet_length: u64,
    /// Heap pages handed out by the stream.
    pub heap_pages: u64,
    /// Index pages read (bitmap and index scans).
    pub index_pages: u64,
    /// Pages that failed verification but were used (`ignore_checksum_failure`) or zeroed.
    pub pages_failed_verification: u64,
    /// Heap stream statistics.
    pub stream: StreamStats,
    /// Buffer-pool counters accumulated during the scan.
    pub pool: PoolCounters,
    /// AIO counters accumulated during the scan (this backend).
    pub io: IoCounters,
    /// Wall-clock time.
    pub elapsed_s: f64,
}

/// Errors of a scan.
#[derive(Debug, Error)]
pub enum ScanError {
    /// A read failed or a page failed verification.
    #[error(transparent)]
    Buffer(#[from] BufferError),
    /// The storage layer refused (missing file, …).
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// A page does not parse.
    #[error("block {block} of \"{path}\": {source}")]
    Page {
        /// File.
        path: String,
        /// Block.
        block: u64,
        /// What is wrong.
        source: PageError,
    },
    /// A bitmap or index scan without an index.
    #[error("a {0} scan needs the table's index: pass --index (the btree on the first column)")]
    NoIndex(ScanKind),
    /// The index is not a usable btree.
    #[error("\"{path}\" is not a btree this scan can use: {reason}")]
    BadIndex {
        /// File.
        path: String,
        /// Why.
        reason: String,
    },
    /// The AIO layer refused.
    #[error(transparent)]
    Aio(#[from] crate::aio::AioError),
}

/// Scan settings.
#[derive(Debug, Clone, Copy)]
pub struct ScanOptions {
    /// Which scan.
    pub kind: ScanKind,
    /// The predicate on the first column.
    pub predicate: Between,
    /// The read stream's look-ahead policy.
    pub policy: DistancePolicy,
}

fn page_err(rel: &RelFile, block: u64) -> impl FnOnce(PageError) -> ScanError + '_ {
    move |source| ScanError::Page {
        path: rel.display_name().to_string(),
        block,
        source,
    }
}

/// Is this heap tuple live by its hint bits (see the module docs)?
fn tuple_is_live(infomask: u16) -> bool {
    let xmin_aborted = infomask & HEAP_XMIN_INVALID != 0 && infomask & HEAP_XMIN_COMMITTED == 0;
    let deleted = infomask & HEAP_XMAX_COMMITTED != 0
        && infomask & HEAP_XMAX_INVALID == 0
        && infomask & HEAP_XMAX_LOCK_ONLY == 0;
    !xmin_aborted && !deleted
}

/// A "new" page (`pd_upper == 0`: never initialised, or zeroed by `zero_damaged_pages`)
/// holds no tuples, as PostgreSQL's `PageIsNew`.
fn is_new_page(page: &[u8]) -> bool {
    page.get(14..16).is_some_and(|b| b == [0, 0])
}

/// Accumulates qualifying rows.
struct Acc<'c> {
    columns: &'c [ColumnType],
    predicate: Between,
    rows: u64,
    sum: u64,
}

impl Acc<'_> {
    /// Applies the predicate to one tuple; returns whether it was live.
    fn tuple(&mut self, rel: &RelFile, block: u64, bytes: &[u8]) -> Result<bool, ScanError> {
        let t = HeapTuple::parse(bytes).map_err(page_err(rel, block))?;
        if !tuple_is_live(t.header().t_infomask) {
            return Ok(false);
        }
        let values = t.deform(self.columns).map_err(page_err(rel, block))?;
        if values.first().is_some_and(|k| self.predicate.matches(k)) {
            self.rows += 1;
            self.sum += match values.last() {
                Some(Datum::Varlena(v)) => v.octet_length() as u64,
                Some(Datum::Null) | None => 0,
                Some(d) => d
                    .column_type()
                    .and_then(|t| t.fixed_len_bytes())
                    .unwrap_or(0) as u64,
            };
        }
        Ok(true)
    }

    /// Every live tuple of a page.
    fn page(&mut self, rel: &RelFile, block: u64, page: &[u8]) -> Result<(), ScanError> {
        if is_new_page(page) {
            return Ok(());
        }
        let p = PageRef::new(page).map_err(page_err(rel, block))?;
        for (off, id) in p.item_ids() {
            if id.lp_flags != LinePointerFlags::Normal {
                continue;
            }
            let bytes = p.item_bytes(off, id).map_err(page_err(rel, block))?;
            self.tuple(rel, block, bytes)?;
        }
        Ok(())
    }

    /// The tuple at `offset`, following a HOT chain to its live member.
    fn fetch(
        &mut self,
        rel: &RelFile,
        block: u64,
        page: &[u8],
        offset: u16,
    ) -> Result<(), ScanError> {
        if is_new_page(page) {
            return Ok(());
        }
        let p = PageRef::new(page).map_err(page_err(rel, block))?;
        let mut off = offset;
        // A chain is at most as long as the page has line pointers.
        for _ in 0..=p.item_count() {
            let Ok(id) = p.item_id(off) else {
                return Ok(());
            };
            match id.lp_flags {
                LinePointerFlags::Redirect => off = id.lp_off,
                LinePointerFlags::Normal => {
                    let bytes = p.item_bytes(off, id).map_err(page_err(rel, block))?;
                    if self.tuple(rel, block, bytes)? {
                        return Ok(());
                    }
                    let t = HeapTuple::parse(bytes).map_err(page_err(rel, block))?;
                    let h = t.header();
                    if h.t_infomask2 & HEAP_HOT_UPDATED == 0 || h.t_ctid.block as u64 != block {
                        return Ok(());
                    }
                    off = h.t_ctid.offset;
                }
                _ => return Ok(()),
            }
        }
        Ok(())
    }
}

/// Runs one scan on the calling thread (which becomes an AIO backend for its duration).
pub fn run_scan(
    pool: &BufferPool,
    table: &Table,
    options: &ScanOptions,
) -> Result<ScanResult, ScanError> {
    let mut backend = pool.aio().backend()?;
    let pool_before = pool.counters();
    let io_before = backend.counters();
    let start = Instant::now();
    let mut acc = Acc {
        columns: &table.columns,
        predicate: options.predicate,
        rows: 0,
        sum: 0,
    };
    let mut result = ScanResult::default();
    match options.kind {
        ScanKind::Seq => seq_scan(pool, &mut backend, table, options, &mut acc, &mut result)?,
        ScanKind::Bitmap => bitmap_scan(pool, &mut backend, table, options, &mut acc, &mut result)?,
        ScanKind::Index => index_scan(pool, &mut backend, table, options, &mut acc, &mut result)?,
    }
    result.elapsed_s = start.elapsed().as_secs_f64();
    result.rows = acc.rows;
    result.sum_octet_length = acc.sum;
    let after = pool.counters();
    result.pool = PoolCounters {
        hits: after.hits - pool_before.hits,
        reads: after.reads - pool_before.reads,
        verification_failures: after.verification_failures - pool_before.verification_failures,
        pages_zeroed: after.pages_zeroed - pool_before.pages_zeroed,
        evictions: after.evictions - pool_before.evictions,
        waited_on_other_io: after.waited_on_other_io - pool_before.waited_on_other_io,
    };
    result.pages_failed_verification = result.pool.verification_failures;
    let io = backend.counters();
    result.io = IoCounters {
        ios_issued: io.ios_issued - io_before.ios_issued,
        kernel_ios: io.kernel_ios - io_before.kernel_ios,
        ios_merged: io.ios_merged - io_before.ios_merged,
        blocks: io.blocks - io_before.blocks,
        bytes: io.bytes - io_before.bytes,
        io_ns: io.io_ns - io_before.io_ns,
        wait_ns: io.wait_ns - io_before.wait_ns,
        waits: io.waits - io_before.waits,
        errors: io.errors - io_before.errors,
        partials: io.partials - io_before.partials,
        executed_by_submitter: io.executed_by_submitter - io_before.executed_by_submitter,
    };
    Ok(result)
}

fn seq_scan(
    pool: &BufferPool,
    backend: &mut Backend,
    table: &Table,
    options: &ScanOptions,
    acc: &mut Acc<'_>,
    result: &mut ScanResult,
) -> Result<(), ScanError> {
    let nblocks = table.heap.nblocks()?;
    let mut next = 0u64;
    let mut stream = ReadStream::new(
        pool,
        &table.heap,
        StreamOptions {
            policy: options.policy,
            bulk_read: true,
        },
        move || {
            (next < nblocks).then(|| {
                next += 1;
                (next - 1, ())
            })
        },
    );
    while let Some(buf) = stream.next(backend)? {
        acc.page(&table.heap, buf.block, buf.page())?;
        result.heap_pages += 1;
    }
    result.stream = stream.stats();
    Ok(())
}

/// Walks a btree's leaf level over `[lo, hi]`, one leaf at a time.
struct LeafWalk<'p> {
    pool: &'p BufferPool,
    index: &'p RelFile,
    rel: RelId,
    key_type: ColumnType,
    predicate: Between,
    next_leaf: Option<u64>,
    pages_read: u64,
}

impl<'p> LeafWalk<'p> {
    fn start(
        pool: &'p BufferPool,
        backend: &mut Backend,
        index: &'p RelFile,
        key_type: ColumnType,
        predicate: Between,
    ) -> Result<Self, ScanError> {
        let rel = pool.register(index);
        let bad = |reason: String| ScanError::BadIndex {
            path: index.display_name().to_string(),
            reason,
        };
        let meta_buf = pool.read_buffer(backend, rel, 0, None)?;
        let meta = BtMetaPage::parse(meta_buf.page()).map_err(|e| bad(e.to_string()))?;
        drop(meta_buf);
        let mut pages_read = 1;
        if meta.btm_fastroot == 0 && meta.btm_root == 0 {
            // An empty index has no root.
            return Ok(LeafWalk {
                pool,
                index,
                rel,
                key_type,
                predicate,
                next_leaf: None,
                pages_read,
            });
        }
        let mut block = meta.btm_fastroot as u64;
        // Bounded: a btree is at most a few dozen levels deep; more means a cycle.
        for level in 0..64 {
            let buf = pool.read_buffer(backend, rel, block, None)?;
            pages_read = 2 + level;
            let page = BtreePage::new(buf.page()).map_err(page_err(index, block))?;
            let opaque = *page.opaque();
            if opaque.is_leaf() {
                return Ok(LeafWalk {
                    pool,
                    index,
                    rel,
                    key_type,
                    predicate,
                    next_leaf: Some(block),
                    pages_read,
                });
            }
            let items = page.data_items().map_err(page_err(index, block))?;
            // The last pivot whose key is < lo; the first (key-less) item is minus infinity.
            let mut child = None;
            for (_, item) in &items {
                match item.first_key(key_type).map_err(page_err(index, block))? {
                    None => child = Some(item.downlink()),
                    Some(k) if predicate.below(&k) => child = Some(item.downlink()),
                    Some(_) => break,
                }
            }
            let Some(child) = child.or_else(|| items.first().map(|(_, i)| i.downlink())) else {
                return Err(bad(format!("internal page {block} has no items")));
            };
            block = child as u64;
        }
        Err(bad("descent did not reach a leaf within 64 levels".into()))
    }

    /// The qualifying heap TIDs of the next leaf (in key order), or `None` at the end.
    fn next_leaf(&mut self, backend: &mut Backend) -> Result<Option<Vec<ItemPointer>>, ScanError> {
        let Some(block) = self.next_leaf.take() else {
            return Ok(None);
        };
        let buf = self.pool.read_buffer(backend, self.rel, block, None)?;
        self.pages_read += 1;
        let page = BtreePage::new(buf.page()).map_err(page_err(self.index, block))?;
        let opaque = *page.opaque();
        let mut tids = Vec::new();
        let mut past_end = false;
        if !opaque.is_deleted() && opaque.btpo_flags & crate::page::btree::BTP_HALF_DEAD == 0 {
            for (_, item) in page.data_items().map_err(page_err(self.index, block))? {
                let Some(key) = item
                    .first_key(self.key_type)
                    .map_err(page_err(self.index, block))?
                else {
                    continue; // NULL keys sort last and never match BETWEEN
                };
                if self.predicate.below(&key) {
                    continue;
                }
                if self.predicate.above(&key) {
                    past_end = true;
                    break;
                }
                if self.predicate.matches(&key) {
                    tids.extend(item.heap_tids().map_err(page_err(self.index, block))?);
                }
            }
        }
        if !past_end && !opaque.is_rightmost() {
            self.next_leaf = Some(opaque.btpo_next as u64);
        }
        Ok(Some(tids))
    }
}

fn index_key_type(table: &Table) -> Result<ColumnType, ScanError> {
    match table.columns.first() {
        Some(t @ (ColumnType::Float8 | ColumnType::Int4 | ColumnType::Int8)) => Ok(*t),
        other => Err(ScanError::BadIndex {
            path: table
                .index
                .as_ref()
                .map(|i| i.display_name().to_string())
                .unwrap_or_default(),
            reason: format!("the first column must be float8, int4 or int8, not {other:?}"),
        }),
    }
}

fn bitmap_scan(
    pool: &BufferPool,
    backend: &mut Backend,
    table: &Table,
    options: &ScanOptions,
    acc: &mut Acc<'_>,
    result: &mut ScanResult,
) -> Result<(), ScanError> {
    let index = table
        .index
        .as_ref()
        .ok_or(ScanError::NoIndex(ScanKind::Bitmap))?;
    let key_type = index_key_type(table)?;
    let mut walk = LeafWalk::start(pool, backend, index, key_type, options.predicate)?;
    let mut tids = Vec::new();
    while let Some(mut leaf) = walk.next_leaf(backend)? {
        tids.append(&mut leaf);
    }
    result.index_pages = walk.pages_read;
    // The bitmap: exact TIDs grouped by heap block, blocks in order.
    tids.sort_unstable_by_key(|t| (t.block, t.offset));
    tids.dedup();
    let mut pages: VecDeque<(u64, Vec<u16>)> = VecDeque::new();
    for t in tids {
        match pages.back_mut() {
            Some((b, offs)) if *b == t.block as u64 => offs.push(t.offset),
            _ => pages.push_back((t.block as u64, vec![t.offset])),
        }
    }
    let mut stream = ReadStream::new(
        pool,
        &table.heap,
        StreamOptions {
            policy: options.policy,
            bulk_read: false,
        },
        move || pages.pop_front(),
    );
    while let Some(buf) = stream.next(backend)? {
        for &off in &buf.data {
            acc.fetch(&table.heap, buf.block, buf.page(), off)?;
        }
        result.heap_pages += 1;
    }
    result.stream = stream.stats();
    Ok(())
}

fn index_scan(
    pool: &BufferPool,
    backend: &mut Backend,
    table: &Table,
    options: &ScanOptions,
    acc: &mut Acc<'_>,
    result: &mut ScanResult,
) -> Result<(), ScanError> {
    let index = table
        .index
        .as_ref()
        .ok_or(ScanError::NoIndex(ScanKind::Index))?;
    let key_type = index_key_type(table)?;
    let mut walk = LeafWalk::start(pool, backend, index, key_type, options.predicate)?;
    // TIDs read from leaves but not yet handed to the stream. The stream's callback pulls
    // from here; the loop below tops it up one leaf at a time, so index and heap reads
    // interleave and memory stays bounded by a leaf plus the look-ahead.
    let queue = std::rc::Rc::new(std::cell::RefCell::new(VecDeque::<ItemPointer>::new()));
    let feed = queue.clone();
    let mut stream = ReadStream::new(
        pool,
        &table.heap,
        StreamOptions {
            policy: options.policy,
            bulk_read: false,
        },
        move || {
            feed.borrow_mut()
                .pop_front()
                .map(|t| (t.block as u64, t.offset))
        },
    );
    let low_water = pool.pin_limit_per_backend().max(64);
    let mut leaves_done = false;
    loop {
        while !leaves_done && queue.borrow().len() < low_water {
            match walk.next_leaf(backend)? {
                Some(tids) => queue.borrow_mut().extend(tids),
                None => leaves_done = true,
            }
        }
        if stream.is_exhausted() && !queue.borrow().is_empty() {
            stream.resume();
        }
        match stream.next(backend)? {
            Some(buf) => {
                acc.fetch(&table.heap, buf.block, buf.page(), buf.data)?;
                result.heap_pages += 1;
            }
            None if leaves_done && queue.borrow().is_empty() => break,
            None => {}
        }
    }
    result.index_pages = walk.pages_read;
    result.stream = stream.stats();
    Ok(())
}
