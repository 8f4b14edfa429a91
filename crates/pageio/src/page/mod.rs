//! PostgreSQL's on-disk page format: read it, write it, checksum it, verify it.
//!
//! # Problem
//!
//! Every relation file in a PostgreSQL data directory is a sequence of 8 kB pages with one
//! fixed layout (`src/include/storage/bufpage.h`). The I/O layers above this module move those
//! pages around without caring what is in them, but everything that *checks* or *uses* a page
//! — completion-time verification in the buffer pool, the `verify` and `scan` commands, the
//! table generator — needs the same byte-exact understanding of the format that PostgreSQL 18
//! has. The bytes come from disk, so they may be torn, truncated or simply garbage: every
//! reader here returns a [`PageError`] instead of panicking, whatever the input.
//!
//! # Mechanism
//!
//! A page is a header, a line-pointer array growing upwards, tuples growing downwards from the
//! end, and an optional "special space" owned by the access method (btree keeps its sibling
//! links there):
//!
//! ```text
//!  0          24                 pd_lower          pd_upper            pd_special     8192
//!  ┌──────────┬──────┬──────┬────┬─────────────────┬────────┬─────────┬──────────────┐
//!  │ header   │ lp 1 │ lp 2 │ …  │   free space    │ tup 2  │ tup 1   │ special      │
//!  └──────────┴──┬───┴──┬───┴────┴─────────────────┴────────┴─────────┴──────────────┘
//!                │      └──────────────────────────────┘        ▲
//!                └──────────────────────────────────────────────┘
//! ```
//!
//! The submodules follow that picture:
//!
//! * [`header`] — the 24-byte `PageHeaderData`, LSNs, line pointers ([`ItemId`]) and a bounds-
//!   checked [`PageRef`] view that hands out item bytes.
//! * [`heap`] — `HeapTupleHeaderData` and attribute deforming with PostgreSQL's alignment rules.
//! * [`varlena`] — variable-length values: short, 4-byte, inline-compressed and TOAST pointers.
//! * [`btree`] — the btree metapage, `BTPageOpaqueData`, index tuples, pivots and posting lists.
//! * [`checksum`] — `pg_checksum_page`, bit-compatible and auto-vectorised.
//! * [`control`] — `global/pg_control` (version, state, checksums, transaction horizons)
//!   and the CRC-32C that protects it.
//! * [`float8`] — PostgreSQL's order of `double precision` keys (NaN last, `-0 = 0`).
//! * [`verify`] — `PageIsVerified`: header sanity, checksum, all-zero new pages.
//! * [`builder`] — writers for all of the above, so tests and the generator can produce pages
//!   PostgreSQL itself would accept.
//!
//! # Worked example
//!
//! Build a heap page with one row `(1.5, 'hi')`, checksum it as block 0, verify it and read
//! the row back:
//!
//! ```
//! use pageio::page::{self, builder::{HeapTupleBuilder, PageBuilder}, heap::{ColumnType, Datum, HeapTuple}};
//!
//! let mut page = PageBuilder::new(0).unwrap();
//! let tuple = HeapTupleBuilder::new()
//!     .build(&[Datum::Float8(1.5), Datum::text(b"hi")])
//!     .unwrap();
//! let offnum = page.add_item(&tuple).unwrap();
//! let mut bytes = page.finish();
//! page::builder::set_checksum(&mut bytes, 0);
//! assert!(page::verify::verify_page(&bytes, 0, true).is_ok());
//!
//! let view = page::PageRef::new(&bytes).unwrap();
//! let row = HeapTuple::parse(view.item(offnum).unwrap()).unwrap();
//! let values = row.deform(&[ColumnType::Float8, ColumnType::Text]).unwrap();
//! assert_eq!(values[0], Datum::Float8(1.5));
//! assert_eq!(values[1].as_bytes(), Some(&b"hi"[..]));
//! ```

pub mod btree;
pub mod builder;
pub mod checksum;
pub mod control;
pub mod float8;
pub mod header;
pub mod heap;
pub mod tuple;
pub mod varlena;
pub mod verify;

pub use checksum::{pg_checksum_page, pg_checksum_slice};
pub use float8::float8_cmp;
pub use header::{ItemId, ItemPointer, LinePointerFlags, Lsn, PageHeader, PageRef};
pub use verify::{verify_page, PageVerification};

/// PostgreSQL's block size in bytes (`BLCKSZ`); the only size this crate supports, because
/// it is the only size a default PostgreSQL build writes and the checksum layout depends on it.
pub const BLCKSZ: usize = crate::storage::BLCKSZ;

/// `MAXIMUM_ALIGNOF` on every 64-bit platform PostgreSQL supports: tuples start on 8-byte
/// boundaries.
pub const MAXIMUM_ALIGNOF: usize = 8;

/// Rounds `len_bytes` up to a multiple of [`MAXIMUM_ALIGNOF`] (PostgreSQL's `MAXALIGN`).
pub const fn maxalign(len_bytes: usize) -> usize {
    (len_bytes + MAXIMUM_ALIGNOF - 1) & !(MAXIMUM_ALIGNOF - 1)
}

/// Rounds `offset_bytes` up to a multiple of `alignment_bytes` (a power of two).
pub(crate) const fn align_up(offset_bytes: usize, alignment_bytes: usize) -> usize {
    (offset_bytes + alignment_bytes - 1) & !(alignment_bytes - 1)
}

/// Everything that can be wrong with page bytes handed to this module.
///
/// Each variant names the field and the values involved, so a corrupt page produces a message
/// a DBA can compare against `pageinspect` output.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PageError {
    /// The buffer is not exactly one page long.
    #[error("page buffer is {actual_bytes} bytes, expected {expected_bytes}")]
    WrongPageSize {
        /// Length of the buffer that was passed in.
        actual_bytes: usize,
        /// The size this reader needs (normally [`BLCKSZ`]).
        expected_bytes: usize,
    },
    /// A structure does not fit in the bytes that are available.
    #[error("{what} needs {needed_bytes} bytes at offset {offset}, but only {available_bytes} are available")]
    Truncated {
        /// The structure being read, e.g. "heap tuple header".
        what: &'static str,
        /// Offset (within the enclosing buffer) at which it starts.
        offset: usize,
        /// Bytes the structure needs.
        needed_bytes: usize,
        /// Bytes that were actually available from `offset`.
        available_bytes: usize,
    },
    /// A page header field is inconsistent with the page (e.g. pd_lower beyond page size).
    #[error("{field} {value} {problem}")]
    BadHeaderField {
        /// Header field name, PostgreSQL spelling (`pd_lower`, …).
        field: &'static str,
        /// Value found on the page.
        value: u32,
        /// What is wrong with it, e.g. "beyond page size 8192".
        problem: String,
    },
    /// A line pointer number does not exist on this page.
    #[error("line pointer {offnum} out of range: page has {count} line pointers")]
    NoSuchItem {
        /// 1-based offset number that was asked for.
        offnum: u16,
        /// Number of line pointers on the page.
        count: u16,
    },
    /// A line pointer points outside the tuple area of the page.
    #[error("line pointer {offnum} (off {lp_off}, len {lp_len}) points outside the page data area {lower}..{upper_limit}")]
    ItemOutOfBounds {
        /// 1-based offset number.
        offnum: u16,
        /// lp_off field.
        lp_off: u16,
        /// lp_len field.
        lp_len: u16,
        /// Smallest valid start (end of the line pointer array).
        lower: usize,
        /// Largest valid end (pd_special).
        upper_limit: usize,
    },
    /// A line pointer is not `LP_NORMAL`, so it has no tuple storage to read.
    #[error("line pointer {offnum} has flags {flags:?}, not LP_NORMAL")]
    ItemNotNormal {
        /// 1-based offset number.
        offnum: u16,
        /// Its state.
        flags: header::LinePointerFlags,
    },
    /// A tuple header field is inconsistent with the tuple.
    #[error("{what}: {problem}")]
    BadTuple {
        /// Which structure, e.g. "heap tuple" or "index tuple".
        what: &'static str,
        /// What is wrong, with the offending values.
        problem: String,
    },
    /// A varlena header is malformed or claims more bytes than exist.
    #[error("varlena at offset {offset}: {problem}")]
    BadVarlena {
        /// Offset of the varlena within the buffer being decoded.
        offset: usize,
        /// What is wrong.
        problem: String,
    },
    /// A btree page or metapage is malformed.
    #[error("btree: {problem}")]
    BadBtree {
        /// What is wrong.
        problem: String,
    },
    /// A writer was asked to put more on a page than fits.
    #[error("page full: need {needed_bytes} bytes, {free_bytes} free")]
    PageFull {
        /// Bytes needed (line pointer plus MAXALIGNed item).
        needed_bytes: usize,
        /// Bytes free between pd_lower and pd_upper.
        free_bytes: usize,
    },
    /// A writer was asked to encode something the format cannot represent.
    #[error("cannot encode: {problem}")]
    Unencodable {
        /// What cannot be represented and why.
        problem: String,
    },
}

/// Result alias for this module.
pub type Result<T, E = PageError> = std::result::Result<T, E>;

/// Reads `N` bytes at `offset` from `bytes`, or reports which structure was truncated.
pub(crate) fn read_array<const N: usize>(
    bytes: &[u8],
    offset: usize,
    what: &'static str,
) -> Result<[u8; N]> {
    offset
        .checked_add(N)
        .and_then(|end| bytes.get(offset..end))
        .and_then(|s| s.try_into().ok())
        .ok_or(PageError::Truncated {
            what,
            offset,
            needed_bytes: N,
            available_bytes: bytes.len().saturating_sub(offset),
        })
}

pub(crate) fn read_u16(bytes: &[u8], offset: usize, what: &'static str) -> Result<u16> {
    read_array::<2>(bytes, offset, what).map(u16::from_le_bytes)
}

pub(crate) fn read_u32(bytes: &[u8], offset: usize, what: &'static str) -> Result<u32> {
    read_array::<4>(bytes, offset, what).map(u32::from_le_bytes)
}

/// Views a slice as exactly one page, or says how long it really was.
pub fn as_page(bytes: &[u8]) -> Result<&[u8; BLCKSZ]> {
    bytes.try_into().map_err(|_| PageError::WrongPageSize {
        actual_bytes: bytes.len(),
        expected_bytes: BLCKSZ,
    })
}
