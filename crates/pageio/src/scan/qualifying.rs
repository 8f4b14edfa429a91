//! The sink of the fixed-shape scans (`scan --dataset`, `bench`, `--heap` with column
//! types): for each live row, the first column tested against the `Between` predicate,
//! `count(*)` and the bytes of the last column (the published queries' `count(*)` and
//! `sum(octet_length(...))`) accumulated.
//!
//! Every varlena's claimed size is checked before it is summed, as PostgreSQL could never
//! have written a larger one. One vector of values is reused for every row of a thread
//! ([`crate::page::heap::HeapTuple::deform_into`]), emptied between rows so that it
//! borrows from no page.

use super::{live_tuple, recycle, tuple_err, Between, ScanError, Table, TupleSink};
use crate::page::heap::{ColumnType, Datum};
use crate::page::PageError;
use crate::storage::RelFile;
use crate::visibility::Visibility;

/// The rows that satisfy the predicate so far: their count and the bytes of their last
/// column (the published queries' `count(*)` and `sum(octet_length(...))`).
pub(super) struct QualifyingRows<'c> {
    columns: &'c [ColumnType],
    predicate: Between,
    visibility: Visibility,
    /// Rows that qualified.
    pub(super) rows: u64,
    /// Bytes of their last column.
    pub(super) sum: u64,
    /// The deformed-values buffer, kept empty between tuples so its allocation is reused.
    scratch: Vec<Datum<'static>>,
}

impl<'c> QualifyingRows<'c> {
    /// Nothing counted yet, for `table`'s columns under `predicate`.
    pub(super) fn new(table: &'c Table, predicate: Between) -> QualifyingRows<'c> {
        QualifyingRows {
            columns: &table.columns,
            predicate,
            visibility: table.visibility(),
            rows: 0,
            sum: 0,
            scratch: Vec::new(),
        }
    }

    /// Checks a live row's values and counts it if it qualifies.
    fn row(
        &mut self,
        values: &[Datum<'_>],
        tuple_err: &dyn Fn(PageError) -> ScanError,
    ) -> Result<(), ScanError> {
        // A size PostgreSQL could never have written would be summed as if real.
        for (attnum, value) in values.iter().enumerate() {
            if let Datum::Varlena(v) = value {
                v.check_limits().map_err(|e| {
                    tuple_err(PageError::BadTuple {
                        what: "heap tuple",
                        problem: format!(
                            "attribute {} ({:?}): {}",
                            attnum + 1,
                            self.columns[attnum],
                            match e {
                                PageError::BadVarlena { problem, .. } => problem,
                                other => other.to_string(),
                            }
                        ),
                    })
                })?;
            }
        }
        if values
            .first()
            .is_some_and(|k| self.predicate.matches_key(k))
        {
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
        Ok(())
    }
}

impl TupleSink for QualifyingRows<'_> {
    /// Applies the predicate to one tuple; returns whether it was live.
    fn tuple(
        &mut self,
        rel: &RelFile,
        block: u64,
        offset: u16,
        bytes: &[u8],
    ) -> Result<bool, ScanError> {
        let tuple_err = tuple_err(rel, block, offset);
        let Some(t) = live_tuple(&mut self.visibility, rel, block, offset, bytes)? else {
            return Ok(false);
        };
        let mut values = recycle(std::mem::take(&mut self.scratch), || Datum::Null);
        let result = t
            .deform_into(self.columns, &mut values)
            .map_err(&tuple_err)
            .and_then(|()| self.row(&values, &tuple_err));
        self.scratch = recycle(values, || Datum::Null);
        result?;
        Ok(true)
    }

    fn visibility(&mut self) -> &mut Visibility {
        &mut self.visibility
    }
}
