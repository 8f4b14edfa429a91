//! Heap pages of the data sets: `heap_insert` packing, computed instead of simulated.
//!
//! # Problem
//!
//! PostgreSQL fills a heap page until adding the next tuple would leave less than
//! `BLCKSZ · (100 − fillfactor) / 100` bytes free (`RelationGetBufferForTuple`). Replaying
//! that page by page would serialise generation; but every tuple of a data set has the same
//! length (`b` is always 66 characters, pgbench's filler always 84 blanks), so the number of
//! rows per page is one constant and page `p` holds rows `p·k … p·k + k − 1`.
//!
//! # Mechanism
//!
//! ```text
//!  tuple length L ─► rows_per_page(L, fillfactor) = k      (same rule as PostgreSQL)
//!  page p:  PageInit ─► for i in p·k .. p·k+k: heap_form_tuple(row(i)), ctid = (p, n)
//!           ─► PD_ALL_VISIBLE ─► checksum(p)
//! ```
//!
//! # Worked example
//!
//! A benchmark row is a 24-byte header (23 + padding), an 8-byte float8 and a 67-byte short
//! varlena: 99 bytes, 104 MAXALIGNed, 108 with its line pointer. Fillfactor 25 keeps 6144
//! bytes free; `104 + 6144 ≤ 8164 − 108·k` holds for k ≤ 17, so each page takes 18 rows
//! (pd_lower 96, pd_upper 6320, as in PostgreSQL). pgbench_accounts rows are 121 bytes (128
//! aligned) at fillfactor 100: 61 per page, 1640 pages at scale 1.

use super::rows::{Row, FILLER_LEN};
use super::DataSet;
use crate::page::builder::{set_checksum, HeapTupleBuilder, PageBuilder};
use crate::page::header::{ItemPointer, PD_ALL_VISIBLE, SIZE_OF_ITEM_ID, SIZE_OF_PAGE_HEADER};
use crate::page::heap::Datum;
use crate::page::{maxalign, PageError, BLCKSZ};

/// PostgreSQL's `MaxHeapTuplesPerPage` for 8 kB pages.
const MAX_HEAP_TUPLES_PER_PAGE: usize = 291;

/// pgbench_accounts.filler: `char(84)` stores the blank-padded empty string.
const FILLER: [u8; FILLER_LEN] = [b' '; FILLER_LEN];

/// How many tuples of `tuple_len_bytes` PostgreSQL puts on one heap page at `fillfactor`
/// (`RelationGetBufferForTuple` with `PageGetHeapFreeSpace`).
pub fn rows_per_page(tuple_len_bytes: usize, fillfactor: usize) -> usize {
    let save_free_bytes = BLCKSZ * (100 - fillfactor.min(100)) / 100;
    let item_bytes = maxalign(tuple_len_bytes);
    let mut free_bytes = BLCKSZ - SIZE_OF_PAGE_HEADER;
    let mut rows = 0;
    while rows < MAX_HEAP_TUPLES_PER_PAGE {
        let heap_free_bytes = free_bytes.saturating_sub(SIZE_OF_ITEM_ID);
        // An empty page always takes one tuple; after that the fillfactor reserve counts.
        if rows > 0 && item_bytes + save_free_bytes > heap_free_bytes {
            break;
        }
        if item_bytes + SIZE_OF_ITEM_ID > free_bytes {
            break;
        }
        free_bytes -= item_bytes + SIZE_OF_ITEM_ID;
        rows += 1;
    }
    rows
}

/// The tuple bytes of `row` stored at `tid`.
pub fn form_tuple(row: &Row, tid: ItemPointer) -> Result<Vec<u8>, PageError> {
    let builder = HeapTupleBuilder::new().ctid(tid);
    match *row {
        Row::Bench { a, x } => {
            let b = super::rows::b_text(x);
            builder.build(&[Datum::Float8(a), Datum::text(b.as_bytes())])
        }
        Row::Account { aid, bid, abalance } => builder.build(&[
            Datum::Int4(aid),
            Datum::Int4(bid),
            Datum::Int4(abalance),
            Datum::text(&FILLER),
        ]),
    }
}

/// Builds heap page `blkno` of `dataset` (rows `blkno · rows_per_page …`), checksummed.
pub fn build_page(
    dataset: DataSet,
    seed: u64,
    rows: u64,
    rows_per_page: usize,
    blkno: u32,
    out: &mut [u8],
) -> Result<(), PageError> {
    let mut page = PageBuilder::new(0)?;
    page.set_flags(PD_ALL_VISIBLE);
    let first = blkno as u64 * rows_per_page as u64;
    let last = (first + rows_per_page as u64).min(rows);
    for i in first..last {
        let tid = ItemPointer {
            block: blkno,
            offset: (i - first) as u16 + 1,
        };
        let tuple = form_tuple(&dataset.row(seed, rows, i), tid)?;
        page.add_item(&tuple)?;
    }
    let mut bytes = page.finish();
    set_checksum(&mut bytes, blkno);
    out.copy_from_slice(&bytes);
    Ok(())
}
