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
//! Those scans know their tables' shape from the caller ([`Table::columns`]). A table of a
//! stopped cluster read by name runs through the same three scans with another sink: its
//! shape comes from the catalog ([`query`]: planning and the per-tuple work), its rows are
//! deformed generically ([`crate::page::tuple`]), its values typed and printed as
//! PostgreSQL prints them ([`value`]), decompressed and fetched from TOAST ([`detoast`]) and
//! aggregated with PostgreSQL's result types ([`aggregate`]).
//!
//! # The btree walk, rule by rule
//!
//! The btree is entered as PostgreSQL enters it and read as PostgreSQL reads it; each rule
//! below mirrors the function beside it (nbtsearch.c, nbtutils.c):
//!
//! ```text
//!  rule                                                     PostgreSQL
//!  ────                                                     ──────────
//!  start at the metapage's fast root; root 0 = empty index  _bt_getroot
//!  on an internal page follow the last pivot whose first    _bt_binsrch on an internal
//!    key sorts before the range in the index's order; the     page, _bt_compare (a pivot
//!    first item, its keys truncated away, is minus infinity   with no keys is -infinity)
//!  the index's order is its first key's indoption: DESC     _bt_compare with the scan
//!    stores the largest key first, so "before the range"      keys' SK_BT_DESC and
//!    means above hi and the walk meets hi first; a NULL key   SK_BT_NULLS_FIRST flags
//!    is a key like any other: after every value (NULLS
//!    LAST, ASC's default), before them (NULLS FIRST, DESC's)
//!  a deleted or half-dead page: step right over it          _bt_moveright, _bt_readnextpage
//!  on a leaf, skip items marked LP_DEAD: earlier scans      _bt_readpage
//!    killed them (their heap rows are dead to everyone)       (ignore_killed_tuples)
//!  skip keys before the range, keep keys in it, stop at     _bt_readpage, _bt_checkkeys
//!    the first key after it                                   (continuescan = false)
//!  a range never holds NULL; a scan without bounds (a full  btree operators are strict;
//!    index scan, --index without --where) returns every       _bt_first without keys starts
//!    item, NULL keys included                                 at the first leaf
//!  a posting list gives every one of its TIDs               _bt_setuppostingitems
//!  follow right links leaf to leaf; a link of 0 ends it     _bt_readnextpage (P_NONE)
//!  only the first key column is constrained: later key      _bt_first's leading key
//!    columns and INCLUDE columns are never read
//! ```
//!
//! Which btree a table query walks — its column, its collation, a partial index's predicate
//! — is the planner's choice ([`query`]; partial indexes in `partial.rs`).
//!
//! Worked example of a DESC walk: `a BETWEEN 10 AND 20` on `(a DESC)` (so NULLS FIRST). The
//! root's pivots, in stored order, are minus infinity, NULL, 3000, 2000, 1000, 5: NULL and
//! every value above 20 sort before the range, 5 after it, so the descent follows the pivot
//! 1000 to the leaf whose keys start at 1000; the leaf walk steps over 1000 … 21 (along
//! right links as needed), keeps 20 down to 10, and stops at 9, the first key after the
//! range. Read as ascending, the walk took the NULL pivot for minus infinity, entered the
//! NULL keys' leaf, met 3000 > 20 as its first value and stopped: 0 rows.
//!
//! The index scan reads leaf pages as it goes and feeds their TIDs to a read stream, so heap
//! pages are prefetched `effective_io_concurrency` reads ahead — what PostgreSQL 18 does for
//! bitmap heap scans but not yet for index scans.
//!
//! **Visibility.** Only `LP_NORMAL` line pointers hold tuples (dead, unused and redirect
//! pointers are skipped; a redirect is followed when fetching by TID, as the start of a HOT
//! chain). Whether a tuple counts is decided by [`crate::visibility`] — PostgreSQL's
//! `HeapTupleSatisfiesMVCC` for a new snapshot of the cleanly stopped cluster: hint bits
//! when set, else the commit log (`pg_xact`) and, for a MultiXact xmax, `pg_multixact`.
//! Every scan kind, serial or parallel, asks the same rule through its sink's
//! [`Visibility`], one per thread, sharing the table's [`TransactionLog`]. A table without a
//! log (a generated data set, whose tuples are all hinted) is read by hint bits, and a tuple
//! they do not decide is an error, never a guess. A fetch by TID walks the HOT chain as
//! `heap_hot_search_buffer` does and returns its first visible member: the chain goes on
//! while a member is HOT-updated (`HeapTupleHeaderIsHotUpdated`) and the next member's xmin
//! equals its updater (`HeapTupleHeaderGetUpdateXid`, a MultiXact resolved to its updater).
//!
//! # Bounds, and what is reported as corruption
//!
//! Every link read from disk may be garbage, so every walk over links is bounded and a link
//! that cannot be right ends the scan with an error naming the file and the block — never a
//! hang, never a partial answer reported as success:
//!
//! ```text
//!  walk             bound                                   reported as corruption
//!  ────             ─────                                   ──────────────────────
//!  metapage root    root < index blocks                     root past the end, root level ≠
//!                                                           btm_fastlevel, root with a left
//!                                                           sibling, fast root 0 under a root
//!  downlinks        each block once (a visited set for the  cycle, child past the end or the
//!                   descent), child level = parent − 1      metapage, child of the wrong level,
//!                                                           first downlink of a leftmost page
//!                                                           (or the root) to a page that has a
//!                                                           left sibling
//!  right links      each block once (the leaf level's own   cycle, link past the end, link to a
//!                   visited set): at most the index's size  page that is not a leaf (level 0),
//!                                                           sibling whose btpo_prev disagrees
//!                                                           (a link skipping leaves; amcheck's
//!                                                           check too)
//!  deleted and      stepped right over, as PostgreSQL       a dead page with no right sibling
//!  half-dead pages  does, inside the same visited set       where a live page must follow
//!  HOT chains and   each line pointer once (bitset of the   cycle, redirect to a redirect or to
//!  redirects        page's ≤ 2042 line pointers)            an unused or missing line pointer,
//!                                                           HOT successor beyond the page
//!  segment files    MAX_SEGMENTS (32768)                    a later segment after a missing or
//!                                                           short one; a partial last page
//!  partial-index    the predicate's text ≤ 1 MB, nesting    nothing: a predicate that does not
//!  predicates       ≤ 64 levels (catalog::node_tree)        parse is "not implied", the index
//!                                                           is not used
//! ```
//!
//! An all-zero btree page says what PostgreSQL says: `index "…" contains unexpected zero page
//! at block N`, "Please REINDEX it." Values whose claimed size PostgreSQL could never have
//! written (an inline-compressed or TOAST-pointer raw size beyond `MaxAllocSize`, or beyond
//! what the compressed bytes can expand to) are reported with file, block, line pointer and
//! attribute instead of being summed. Pages read past under `zero_damaged_pages` or
//! `ignore_checksum_failure` are listed in [`ScanResult::damaged_pages`], one event per page,
//! as PostgreSQL's WARNING lists them.
//!
//! Where PostgreSQL itself returns fewer rows without complaint, so does this scan: a right
//! link of 0 (`P_NONE`) ends the leaf level; a metapage root of 0 is an empty index; a leaf
//! item marked `LP_DEAD` (with `BTP_HAS_GARBAGE` on its page) is a killed entry, not damage; an
//! index TID whose line pointer is beyond the heap page's, dead or unused, or that points
//! straight at a heap-only tuple, yields no row; a HOT chain ends at a successor on another
//! page or one whose xmin is not its predecessor's xmax. These are the answers `_bt_getroot`,
//! `_bt_readnextpage` and `heap_hot_search_buffer` give.
//!
//! Worked example of a corrupt walk: leaf 10 of the fixture's `uniform_a` rewritten with
//! `btpo_next` = 10 (checksum recomputed, so only the structure is wrong). A bitmap scan of
//! every row descends root 3 to leaf 1, enters leaves 1, 2, 4, …, 10 — each goes into the
//! leaf level's visited set — and then finds the right link of 10 naming block 10, already
//! in the set: `index "base/5/16394" is corrupt at block 10: the right link of block 10
//! points back to block 10, already visited: the links form a cycle; Please REINDEX it.`
//! Before these bounds the scan spun on block 10 forever, its TID list growing.
//!
//! Worked example (the fixture's `uniform`, `a BETWEEN 250 AND 750`): the seq scan reads all
//! 1112 heap pages and keeps 9917 rows; the bitmap scan descends root block 3 to the first
//! leaf holding 250, collects 9917 TIDs, sorts them into ~1100 distinct pages (the values are
//! random, so nearly every page qualifies) and reads those; the index scan fetches the same
//! 9917 TIDs in key order, re-pinning pages many times. All three answer 9917 rows and
//! 654522 bytes, as PostgreSQL does.

use std::collections::{HashSet, VecDeque};
use std::time::Instant;

use thiserror::Error;

use crate::aio::IoCounters;
use crate::buffer::{BufferError, BufferPool, DamagedPage, PinnedBuffer, PoolCounters, RelId};
use crate::page::btree::{BtMetaPage, BtPageOpaque, BtreePage, BTP_HALF_DEAD};
use crate::page::heap::{ColumnType, Datum, HeapTuple, HEAP_ONLY_TUPLE, HEAP_XMIN_FROZEN};
use crate::page::{float8_cmp, ItemPointer, LinePointerFlags, PageError, PageRef};
use crate::storage::{RelFile, StorageError, RELSEG_SIZE_BLOCKS};
use crate::stream::{
    readahead, DistancePolicy, ReadStream, StreamOptions, StreamOrder, StreamStats,
};
use crate::visibility::{is_hot_updated, TransactionLog, Visibility, VisibilityError};
use crate::Backend;
use std::sync::Arc;

pub mod aggregate;
pub mod clause;
pub mod columns;
mod defaults;
pub mod detoast;
mod float_text;
pub mod in_place;
mod map_ahead;
mod numeric;
mod parallel;
mod partial;
mod predicate;
pub mod query;
mod relpath;
pub mod signatures;
pub use parallel::{
    combine_partial, default_parallel_workers, BlockAllocator, WorkerBlocks,
    DEFAULT_PARALLEL_WORKERS_LIMIT, MAX_PARALLEL_WORKERS,
};
pub mod value;
pub use defaults::{
    default_effective_io_concurrency, default_io_method, scan_config,
    RANDOM_SCAN_EFFECTIVE_IO_CONCURRENCY, SEQ_SCAN_EFFECTIVE_IO_CONCURRENCY,
};
pub use partial::OPERATORS as PREDICATE_OPERATORS;
pub use predicate::parse_float8;
pub use relpath::{resolve_relation_path, RelPathError, RelationKind};
mod leaf_walk;
use leaf_walk::LeafWalk;
mod qualifying;
use qualifying::QualifyingRows;

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

    fn matches_key(&self, key: &Datum<'_>) -> bool {
        match *key {
            Datum::Int4(v) => self.contains_int(v as i64),
            Datum::Int8(v) => self.contains_int(v),
            Datum::Int2(v) => self.contains_int(v as i64),
            Datum::Float8(v) => self.contains_float8(v),
            Datum::Float4(v) => self.contains_float8(v as f64),
            _ => false,
        }
    }

    fn below_key(&self, key: &Datum<'_>) -> bool {
        key.as_f64()
            .is_some_and(|v| float8_cmp(v, self.lo) == std::cmp::Ordering::Less)
    }

    fn above_key(&self, key: &Datum<'_>) -> bool {
        key.as_f64()
            .is_some_and(|v| float8_cmp(v, self.hi) == std::cmp::Ordering::Greater)
    }
}

/// A range of key values, as the btree walk asks about it, in the values' own (ascending)
/// order: `below` and `above` say a value is outside the range on that side, `matches`
/// that it is in it. The walk turns these into the index's order ([`KeyOrder`]): in a
/// descending index `above` comes first.
trait KeyRange {
    /// The key sorts before the range.
    fn below(&self, key: &Datum<'_>) -> bool;
    /// The key sorts after the range.
    fn above(&self, key: &Datum<'_>) -> bool;
    /// The key is in the range.
    fn matches(&self, key: &Datum<'_>) -> bool;
    /// Whether a NULL key is in the range: only for a range without bounds (a full index
    /// scan, which must return every row); a bound never admits NULL, as in SQL.
    fn admits_null(&self) -> bool {
        false
    }
}

/// How a btree orders its first key column: `pg_index.indoption`'s `INDOPTION_DESC` and
/// `INDOPTION_NULLS_FIRST` bits. The default is PostgreSQL's default, ascending with NULLs
/// last.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct KeyOrder {
    /// Keys are stored from the largest to the smallest (`DESC`).
    pub descending: bool,
    /// NULL keys come before the others (`NULLS FIRST`, the default of `DESC`).
    pub nulls_first: bool,
}

/// Where a key sits relative to the range, in the index's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Before the range: the walk steps over it.
    Before,
    /// Possibly in the range (`matches` decides for non-NULL keys).
    Within,
    /// After the range: the walk stops.
    After,
}

impl KeyOrder {
    /// Where `key` (`None`: NULL) sits relative to `range` in this order, as
    /// `_bt_compare` with the scan keys' `SK_BT_DESC` / `SK_BT_NULLS_FIRST` flags decides.
    fn place(self, range: &dyn KeyRange, key: Option<&Datum<'_>>) -> Place {
        match key {
            None if range.admits_null() => Place::Within,
            None if self.nulls_first => Place::Before,
            None => Place::After,
            Some(k) => {
                let (before, after) = if self.descending {
                    (range.above(k), range.below(k))
                } else {
                    (range.below(k), range.above(k))
                };
                if before {
                    Place::Before
                } else if after {
                    Place::After
                } else {
                    Place::Within
                }
            }
        }
    }
}

impl KeyRange for Between {
    fn below(&self, key: &Datum<'_>) -> bool {
        self.below_key(key)
    }
    fn above(&self, key: &Datum<'_>) -> bool {
        self.above_key(key)
    }
    fn matches(&self, key: &Datum<'_>) -> bool {
        self.matches_key(key)
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
    /// The cluster's transaction status files, for tuples whose hint bits do not decide
    /// their visibility; `None` for files outside a cluster (a generated data set, whose
    /// tuples are all hinted): such a tuple is then an error.
    pub transactions: Option<Arc<TransactionLog>>,
}

impl Table {
    /// A visibility view of this table's transaction status, for one thread.
    pub fn visibility(&self) -> Visibility {
        Visibility::new(self.transactions.clone())
    }
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
    /// Those pages of this scan's relations, one event each: block, what was done
    /// (zeroed or used anyway) and why it failed. An event is logged when the page is read
    /// from storage, so a damaged page another scan already brought into the pool is not
    /// listed again, and a concurrent scan of the same relation through the same pool may
    /// contribute its own events. Listed in (relation, block) order, whatever order the
    /// reads completed in.
    pub damaged_pages: Vec<DamagedPage>,
    /// Heap stream statistics.
    pub stream: StreamStats,
    /// `posix_fadvise(WILLNEED)` calls of a buffered sequential scan's read-ahead
    /// (`seq_read_ahead`, see [`readahead`]): one per 2 MB piece of the heap that was not
    /// already in the page cache; 0 for other scans and under direct I/O.
    pub read_ahead_advice: u64,
    /// What the measured read-ahead of a buffered sequential scan (`seq_read_ahead = auto`)
    /// did: stretches read each way, the costs measured, the way chosen; empty for other
    /// scans and settings.
    pub read_ahead: readahead::ReadAheadReport,
    /// Buffer-pool counters accumulated during the scan.
    pub pool: PoolCounters,
    /// AIO counters accumulated during the scan (this backend).
    pub io: IoCounters,
    /// Wall-clock time.
    pub elapsed_s: f64,
    /// Threads that scanned (1 for a serial scan; see [`ScanOptions::parallel_workers`]).
    pub parallel_workers: usize,
    /// Heap pages of a sequential scan read in place from the page cache
    /// (`seq_read_in_place`, see `scan::in_place`): verified and walked where the kernel
    /// holds them, not copied into the buffer pool, so counted in `heap_pages` but neither
    /// as pool hits nor as reads.
    pub pages_in_place: u64,
    /// Pages of [`ScanResult::pages_in_place`] a helper thread mapped before the scanning
    /// thread reached them (`scan::map_ahead`): a serial scan with a CPU to spare.
    pub pages_mapped_ahead: u64,
    /// Pages of [`ScanResult::pages_in_place`] the same helper thread verified (header and
    /// checksum, the pool's check) before the scanning thread reached them, which then only
    /// walked them.
    pub pages_verified_ahead: u64,
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
    /// A tuple's visibility cannot be decided.
    #[error("block {block} of \"{path}\", line pointer {offset}: {source}")]
    Visibility {
        /// The heap file.
        path: String,
        /// Block.
        block: u64,
        /// Line pointer.
        offset: u16,
        /// Why.
        source: VisibilityError,
    },
    /// A bitmap or index scan without an index.
    #[error(
        "a {0} scan needs the table's index (the btree on its first column), and none was given"
    )]
    NoIndex(ScanKind),
    /// The index is not a usable btree.
    #[error("\"{path}\" is not a btree this scan can use: {reason}")]
    BadIndex {
        /// File.
        path: String,
        /// Why.
        reason: String,
    },
    /// An all-zero page where the btree needs a page (PostgreSQL's `_bt_checkpage`).
    #[error(
        "index \"{index}\" contains unexpected zero page at block {block}; Please REINDEX it."
    )]
    IndexZeroPage {
        /// The index file.
        index: String,
        /// The zero page.
        block: u64,
    },
    /// The btree's links or pages are inconsistent: a cycle, a link past the end or to a
    /// page of the wrong kind or level.
    #[error("index \"{index}\" is corrupt at block {block}: {problem}; Please REINDEX it.")]
    IndexCorrupt {
        /// The index file.
        index: String,
        /// The block holding the bad link or the bad page.
        block: u64,
        /// What is wrong, with the blocks involved.
        problem: String,
    },
    /// A heap page's line pointers or HOT chain are inconsistent.
    #[error("heap \"{path}\" is corrupt at block {block}, line pointer {offset}: {problem}; check the table with amcheck's verify_heapam and restore the page from a backup")]
    HeapCorrupt {
        /// The heap file.
        path: String,
        /// Block.
        block: u64,
        /// The line pointer holding the bad link.
        offset: u16,
        /// What is wrong.
        problem: String,
    },
    /// A tuple does not decode, or claims sizes PostgreSQL could not have written.
    #[error("block {block}, line pointer {offset} of \"{path}\": {source}; the tuple is corrupt: check the table with amcheck's verify_heapam and restore the page from a backup")]
    Tuple {
        /// File.
        path: String,
        /// Block.
        block: u64,
        /// Line pointer (offset number) of the tuple.
        offset: u16,
        /// What is wrong, naming the attribute.
        source: PageError,
    },
    /// The last segment file of a relation ends in a partial page.
    #[error("file \"{path}\" is {size_bytes} bytes, not a multiple of the {BLCKSZ_BYTES}-byte page size: its last {partial_bytes} bytes are a partial page the scan cannot read (a truncated copy, or a file still being written); restore the file from a backup")]
    PartialPage {
        /// The segment file.
        path: String,
        /// Its size.
        size_bytes: u64,
        /// Bytes past the last whole page.
        partial_bytes: u64,
    },
    /// A segment file exists after a missing or short one, so its blocks would be ignored.
    #[error("relation \"{relation}\" has {missing}, but a later segment file \"{later}\" exists: the blocks from there on would be silently ignored; restore the missing segment from a backup")]
    SegmentGap {
        /// The relation (segment 0).
        relation: String,
        /// The segment that ends the relation early: `no segment file "…"` or
        /// `segment file "…" of N bytes, shorter than a full segment`.
        missing: String,
        /// The later segment file found.
        later: String,
    },
    /// The AIO layer refused.
    #[error(transparent)]
    Aio(#[from] crate::aio::AioError),
    /// An aggregate's result does not fit its type (PostgreSQL's `bigint out of range`).
    #[error("{expr}: {problem}")]
    Aggregate {
        /// The aggregate as asked (`sum(aid)`).
        expr: String,
        /// What went wrong.
        problem: String,
    },
    /// A heap file changed under a scan reading it in place: truncated, or a page that could
    /// no longer be read back (see `scan::in_place`).
    #[error("file \"{path}\" changed while the scan read it, at block {block}: {problem}; the answer would be incomplete: nothing may write a cluster while it is scanned, so stop the server (or scan a copy of the cluster) and run the scan again")]
    FileChanged {
        /// The segment file.
        path: String,
        /// The first block gone (relation block number).
        block: u64,
        /// What changed.
        problem: String,
    },
    /// The TOAST relation a value points to cannot be read.
    #[error("{0}; check the table with amcheck's verify_heapam and restore it from a backup")]
    Toast(String),
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
    /// The heap stream's order; `None` lets the scan choose: completion order for seq and
    /// bitmap scans (their count and sum do not depend on the order in which pages come),
    /// block order for index scans (key order).
    pub stream_order: Option<StreamOrder>,
    /// Threads for a sequential scan, the caller included (PostgreSQL's parallel seq scan:
    /// a shared block allocator, one read stream per thread, results combined; see the
    /// `parallel` module). 0 or 1 scans serially; bitmap and index scans are always serial.
    pub parallel_workers: usize,
}

/// PostgreSQL's `FrozenTransactionId`: what a frozen tuple's xmin reads as.
const FROZEN_TRANSACTION_ID: u32 = 2;

/// `BLCKSZ`, for messages.
const BLCKSZ_BYTES: usize = crate::page::BLCKSZ;

/// The most line pointers a page can hold: `(BLCKSZ - header) / sizeof(ItemIdData)`. A HOT
/// chain visits each at most once, so a bitset of this many bits bounds the walk.
const MAX_LINE_POINTERS_PER_PAGE: usize = (BLCKSZ_BYTES - 24) / 4;

/// Words of the per-fetch visited bitset (2048 bits ≥ 2043 offset numbers, 0 unused).
const LINE_POINTER_BITSET_WORDS: usize = MAX_LINE_POINTERS_PER_PAGE.div_ceil(64) + 1;

fn page_err(rel: &RelFile, block: u64) -> impl FnOnce(PageError) -> ScanError + '_ {
    move |source| ScanError::Page {
        path: rel.display_name().to_string(),
        block,
        source,
    }
}

/// An empty vector of values of another lifetime (the sinks' per-row buffers), reusing
/// `v`'s allocation: the element types have one layout, so collecting an empty `IntoIter`
/// back into a `Vec` keeps the buffer (in-place collection), without a per-row allocation
/// and without `unsafe`. `null` is never called: `v` is emptied first.
fn recycle<T, U>(mut v: Vec<T>, null: impl Fn() -> U) -> Vec<U> {
    v.clear();
    v.into_iter().map(|_| null()).collect()
}

/// The error of a malformed tuple at line pointer `offset` of `block` of `rel`.
fn tuple_err(rel: &RelFile, block: u64, offset: u16) -> impl Fn(PageError) -> ScanError + '_ {
    move |source| ScanError::Tuple {
        path: rel.display_name().to_string(),
        block,
        offset,
        source,
    }
}

/// The error for a tuple whose visibility cannot be decided.
fn visibility_err(
    rel: &RelFile,
    block: u64,
    offset: u16,
) -> impl FnOnce(VisibilityError) -> ScanError + '_ {
    move |source| ScanError::Visibility {
        path: rel.display_name().to_string(),
        block,
        offset,
        source,
    }
}

/// Puts damaged-page events in (relation, block) order: reads complete in any order under
/// concurrent I/O and parallel workers, and a report lists pages as a DBA looks them up.
pub(crate) fn sort_damaged_pages(pages: &mut [DamagedPage]) {
    pages.sort_by(|a, b| (&a.path, a.block, a.seq).cmp(&(&b.path, b.block, b.seq)));
}

/// The tuple at line pointer `offset` of `block`, parsed, if `visibility` finds it live;
/// a malformed header or an undecidable visibility is an error naming the file, the block
/// and the line pointer. Always inlined: returned through memory, the tuple costs a
/// store-forwarding stall on every row of a warm scan.
#[inline(always)]
fn live_tuple<'b>(
    visibility: &mut Visibility,
    rel: &RelFile,
    block: u64,
    offset: u16,
    bytes: &'b [u8],
) -> Result<Option<HeapTuple<'b>>, ScanError> {
    let t = HeapTuple::parse(bytes).map_err(tuple_err(rel, block, offset))?;
    let live = visibility
        .satisfies_mvcc(t.header())
        .map_err(visibility_err(rel, block, offset))?;
    Ok(live.then_some(t))
}

/// A "new" page (`pd_upper == 0`: never initialised, or zeroed by `zero_damaged_pages`)
/// holds no tuples, as PostgreSQL's `PageIsNew`.
fn is_new_page(page: &[u8]) -> bool {
    page.get(14..16).is_some_and(|b| b == [0, 0])
}

/// What a scan does with each tuple it reaches: [`QualifyingRows`] for the fixed-shape
/// scans, `query::QuerySink` for tables read by name. `page` and `fetch` are the walks over
/// a heap page (every tuple) and a HOT chain (one TID); both hand tuples to `tuple`.
trait TupleSink {
    /// Handles one tuple (visible or not); returns whether it was visible.
    fn tuple(
        &mut self,
        rel: &RelFile,
        block: u64,
        offset: u16,
        bytes: &[u8],
    ) -> Result<bool, ScanError>;

    /// The visibility view `tuple` decides by (the HOT-chain walk asks it for updaters).
    fn visibility(&mut self) -> &mut Visibility;

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
            self.tuple(rel, block, off, bytes)?;
        }
        Ok(())
    }

    /// The tuple at `offset`, following a redirect and a HOT chain to its first visible
    /// member, as `heap_hot_search_buffer` does — each line pointer at most once (see the
    /// module docs).
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
        let count = p.item_count();
        let corrupt = |at: u16, problem: String| ScanError::HeapCorrupt {
            path: rel.display_name().to_string(),
            block,
            offset: at,
            problem,
        };
        let mut visited = [0u64; LINE_POINTER_BITSET_WORDS];
        // The line pointer whose link led to `off`, once past the chain's start.
        let mut came_from: Option<(u16, LinePointerFlags)> = None;
        // The xmax of the last chain member, which the next member's xmin must equal.
        let mut prev_xmax: Option<u32> = None;
        let mut off = offset;
        loop {
            if off == 0 || off > count {
                return match came_from {
                    // An index TID beyond the page's line pointers: PostgreSQL finds no row.
                    None => Ok(()),
                    Some((from, flags)) => Err(corrupt(
                        from,
                        format!(
                            "{} points to line pointer {off}, but the page has {count}",
                            link_name(flags)
                        ),
                    )),
                };
            }
            let (word, bit) = (off as usize / 64, 1u64 << (off % 64));
            if visited[word] & bit != 0 {
                let (from, flags) = came_from.unwrap_or((offset, LinePointerFlags::Normal));
                return Err(corrupt(
                    from,
                    format!(
                        "{} points back to line pointer {off}: the chain starting at line pointer {offset} is a cycle",
                        link_name(flags)
                    ),
                ));
            }
            visited[word] |= bit;
            let id = p.item_id(off).map_err(page_err(rel, block))?;
            match id.lp_flags {
                LinePointerFlags::Redirect => {
                    if let Some((from, flags)) = came_from {
                        return Err(corrupt(
                            from,
                            format!(
                                "{} points to line pointer {off}, which is a redirect (PostgreSQL redirects only to the chain's first tuple)",
                                link_name(flags)
                            ),
                        ));
                    }
                    came_from = Some((off, LinePointerFlags::Redirect));
                    off = id.lp_off;
                }
                LinePointerFlags::Normal => {
                    let bytes = p.item_bytes(off, id).map_err(page_err(rel, block))?;
                    let (h, xmin) = chain_member_header(rel, block, off, bytes)?;
                    // PostgreSQL's chain rules: an index entry never points straight at a
                    // heap-only tuple, and a member whose xmin is not its predecessor's xmax
                    // belongs to another chain — both end the search without a row.
                    if came_from.is_none() && h.t_infomask2 & HEAP_ONLY_TUPLE != 0 {
                        return Ok(());
                    }
                    if prev_xmax.is_some_and(|xmax| xmax != xmin) {
                        return Ok(());
                    }
                    if self.tuple(rel, block, off, bytes)? {
                        return Ok(());
                    }
                    if !is_hot_updated(&h) || h.t_ctid.block as u64 != block {
                        return Ok(());
                    }
                    // The next member's xmin must be this member's updater (a MultiXact
                    // xmax resolved to its updating member). An invalid (0) updater checks
                    // nothing, as `TransactionIdIsValid` says.
                    let updater = self
                        .visibility()
                        .update_xid(&h)
                        .map_err(visibility_err(rel, block, off))?;
                    prev_xmax = (updater != 0).then_some(updater);
                    came_from = Some((off, LinePointerFlags::Normal));
                    off = h.t_ctid.offset;
                }
                LinePointerFlags::Unused => {
                    if let Some((from, flags)) = came_from {
                        return Err(corrupt(
                            from,
                            format!(
                                "{} points to line pointer {off}, which is unused",
                                link_name(flags)
                            ),
                        ));
                    }
                    return Ok(());
                }
                // A dead member ends the chain (pruning left only its stub).
                LinePointerFlags::Dead => return Ok(()),
            }
        }
    }
}

/// The header of the HOT chain member at `offset` (its tuple `bytes`), and its xmin as
/// `HeapTupleHeaderGetXmin` reads it: a frozen xmin reads as FrozenTransactionId.
fn chain_member_header(
    rel: &RelFile,
    block: u64,
    offset: u16,
    bytes: &[u8],
) -> Result<(crate::page::heap::HeapTupleHeader, u32), ScanError> {
    let h = *HeapTuple::parse(bytes)
        .map_err(tuple_err(rel, block, offset))?
        .header();
    let xmin = if h.t_infomask & HEAP_XMIN_FROZEN == HEAP_XMIN_FROZEN {
        FROZEN_TRANSACTION_ID
    } else {
        h.t_xmin
    };
    Ok((h, xmin))
}

/// How a chain link is named in messages.
fn link_name(flags: LinePointerFlags) -> &'static str {
    match flags {
        LinePointerFlags::Redirect => "its redirect",
        _ => "its HOT-updated tuple's t_ctid",
    }
}

/// The block count of a relation, or an error if its files hide blocks: a partial page at
/// the end, or a segment file after a missing or short one (see the module docs).
fn checked_nblocks(rel: &RelFile) -> Result<u64, ScanError> {
    let layout = rel.segment_layout()?;
    if let Some(o) = &layout.orphan {
        let ended = rel.segment_display(o.ended_at_segno);
        return Err(ScanError::SegmentGap {
            relation: rel.display_name().to_string(),
            missing: match o.ended_at_size_bytes {
                None => format!("no segment file \"{ended}\""),
                Some(size) => format!(
                    "segment file \"{ended}\" of {size} bytes, shorter than a full segment ({} bytes)",
                    RELSEG_SIZE_BLOCKS as u64 * BLCKSZ_BYTES as u64
                ),
            },
            later: rel.segment_display(o.later_segno).to_string(),
        });
    }
    if let Some(partial_bytes) = layout.partial_page_bytes {
        return Err(ScanError::PartialPage {
            path: rel.segment_display(layout.last_segno).to_string(),
            size_bytes: layout.last_size_bytes,
            partial_bytes,
        });
    }
    Ok(layout.nblocks)
}

/// Runs one scan on the calling thread (which becomes an AIO backend for its duration).
pub fn run_scan(
    pool: &BufferPool,
    table: &Table,
    options: &ScanOptions,
) -> Result<ScanResult, ScanError> {
    if options.kind == ScanKind::Seq && options.parallel_workers > 1 {
        return parallel::parallel_seq_scan(pool, table, options, options.parallel_workers);
    }
    let mut acc = QualifyingRows::new(table, options.predicate);
    // `Between` compares numbers: under a text key it would match nothing, silently.
    if options.kind != ScanKind::Seq && table.columns.first() == Some(&ColumnType::Text) {
        return Err(ScanError::BadIndex {
            path: table
                .index
                .as_ref()
                .map(|i| i.display_name().to_string())
                .unwrap_or_default(),
            reason: "the first column must be float8, float4, int2, int4 or int8 for a numeric range, not Text".into(),
        });
    }
    let range = options.predicate;
    let mut result = run_with(pool, table, options, &range, KeyOrder::default(), &mut acc)?;
    result.rows = acc.rows;
    result.sum_octet_length = acc.sum;
    Ok(result)
}

/// Runs one scan of `table`, handing its tuples to `acc`; `range` bounds the btree walk of
/// bitmap and index scans, `order` is the btree's order of its first key. Fills in
/// everything of the result but the sink's own answers.
fn run_with(
    pool: &BufferPool,
    table: &Table,
    options: &ScanOptions,
    range: &dyn KeyRange,
    order: KeyOrder,
    acc: &mut impl TupleSink,
) -> Result<ScanResult, ScanError> {
    let mut backend = pool.aio().backend()?;
    let pool_before = pool.counters();
    let damaged_before = pool.damaged_pages_seq();
    let io_before = backend.counters();
    let start = Instant::now();
    let mut result = ScanResult {
        parallel_workers: 1,
        ..ScanResult::default()
    };
    match options.kind {
        ScanKind::Seq => seq_scan(pool, &mut backend, table, options, acc, &mut result)?,
        ScanKind::Bitmap => bitmap_scan(
            pool,
            &mut backend,
            table,
            options,
            (range, order),
            acc,
            &mut result,
        )?,
        ScanKind::Index => index_scan(
            pool,
            &mut backend,
            table,
            options,
            (range, order),
            acc,
            &mut result,
        )?,
    }
    result.elapsed_s = start.elapsed().as_secs_f64();
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
    let ours = |path: &str| {
        *table.heap.display_name().as_ref() == *path
            || table
                .index
                .as_ref()
                .is_some_and(|i| *i.display_name().as_ref() == *path)
    };
    result.damaged_pages = pool
        .damaged_pages_since(damaged_before)
        .into_iter()
        .filter(|d| ours(&d.path))
        .collect();
    sort_damaged_pages(&mut result.damaged_pages);
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
    acc: &mut impl TupleSink,
    result: &mut ScanResult,
) -> Result<(), ScanError> {
    let nblocks = checked_nblocks(&table.heap)?;
    let read_ahead = readahead::for_scan(pool, nblocks);
    in_place::scan_blocks(
        pool,
        backend,
        table,
        options,
        in_place::Blocks::Serial { next: 0, nblocks },
        &read_ahead,
        acc,
        result,
        None,
    )?;
    result.read_ahead_advice = read_ahead.calls();
    result.read_ahead = read_ahead.report();
    Ok(())
}

fn index_key_type(table: &Table) -> Result<ColumnType, ScanError> {
    match table.columns.first() {
        Some(
            t @ (ColumnType::Float8
            | ColumnType::Float4
            | ColumnType::Int2
            | ColumnType::Int4
            | ColumnType::Int8
            | ColumnType::Text),
        ) => Ok(*t),
        other => Err(ScanError::BadIndex {
            path: table
                .index
                .as_ref()
                .map(|i| i.display_name().to_string())
                .unwrap_or_default(),
            reason: format!(
                "the first column must be float8, float4, int2, int4, int8 or text, not {other:?}"
            ),
        }),
    }
}

fn bitmap_scan(
    pool: &BufferPool,
    backend: &mut Backend,
    table: &Table,
    options: &ScanOptions,
    (range, order): (&dyn KeyRange, KeyOrder),
    acc: &mut impl TupleSink,
    result: &mut ScanResult,
) -> Result<(), ScanError> {
    let index = table
        .index
        .as_ref()
        .ok_or(ScanError::NoIndex(ScanKind::Bitmap))?;
    let key_type = index_key_type(table)?;
    // The heap's files must hold whole pages and no orphaned segment, whatever the TIDs say.
    checked_nblocks(&table.heap)?;
    let mut walk = LeafWalk::start_in_order(pool, backend, index, key_type, range, order)?;
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
            // A bitmap heap scan's result is unordered.
            order: options.stream_order.unwrap_or(StreamOrder::Completion),
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
    (range, order): (&dyn KeyRange, KeyOrder),
    acc: &mut impl TupleSink,
    result: &mut ScanResult,
) -> Result<(), ScanError> {
    let index = table
        .index
        .as_ref()
        .ok_or(ScanError::NoIndex(ScanKind::Index))?;
    let key_type = index_key_type(table)?;
    // The heap's files must hold whole pages and no orphaned segment, whatever the TIDs say.
    checked_nblocks(&table.heap)?;
    let mut walk = LeafWalk::start_in_order(pool, backend, index, key_type, range, order)?;
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
            // Key order is the index scan's contract.
            order: options.stream_order.unwrap_or(StreamOrder::BlockOrder),
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

#[cfg(test)]
mod tests;
