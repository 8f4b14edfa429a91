//! Scans of a table read by name: `SELECT <aggregates> FROM t [WHERE <range on a column>]`.
//!
//! # Problem
//!
//! `pageio scan --table pgbench_accounts --select 'count(abalance)'` must work on any table
//! of a stopped cluster, whatever its columns: the shape comes from the catalog
//! ([`crate::catalog::Relation`]), not from flags, and the answer must be PostgreSQL's to
//! the last digit.
//!
//! # Mechanism
//!
//! ```text
//!  Relation (catalog) ──► TableQuery::plan
//!      columns ─► TupleDesc (attlen, attalign, dropped, attmissingval) + TypeKind per column
//!      --select ─► SelectItems ─► one Accumulator each (PostgreSQL's result types)
//!      --where  ─► clause::parse_where ─► ColumnRange on one column (between, =, <>, <, <=,
//!                  >, >=, ANDed), each literal typed and folded into the column's type
//!                  (clause::fold), a range nothing fits read as no row
//!      --kind bitmap|index ─► the first btree (by name, or --index) that can answer it
//!                             (index_problem): valid, first key = the predicate's column,
//!                             a key type the walk compares, text ordered by the index's
//!                             own byte-order collation, a partial index's predicate
//!                             implied by the range (partial.rs); its indoption gives the
//!                             walk's order (DESC, NULLS FIRST)
//!  run_table_query ─► the same seq / bitmap / index scans as run_scan, with a QuerySink:
//!      live tuple ─► deform the columns used ─► predicate (NULL never qualifies) ─► accumulate
//!      varlena values detoasted on demand: pglz / lz4 in line, TOAST chunks via ToastReader
//! ```
//!
//! Only the attributes up to the last one the query uses are deformed
//! (`slot_getsomeattrs`), so a `count(aid)` never walks the rest of the row.
//!
//! # Worked example
//!
//! `--table pgbench_accounts --select 'count(abalance), sum(abalance)' --where 'aid between 1
//! and 1000' --kind bitmap`: columns aid int4, bid int4, abalance int4, filler bpchar; the
//! range is on `aid` (column 0); the btree `pgbench_accounts_pkey` has `aid` first, so its
//! leaves give 1000 TIDs; each tuple is deformed to column 2 and gives
//! `count = 1000`, `sum = 0` (a `bigint`).

use std::cmp::Ordering;

use thiserror::Error;

use super::aggregate::{Accumulator, AggFunc, AggregateResult};
use super::clause::{CmpOp, Folded};
use super::detoast::{detoast, ToastReader};
use super::value::{TypeKind, Value};
use super::{
    checked_nblocks, live_tuple, recycle, run_with, tuple_err, Between, KeyOrder, KeyRange,
    ScanError, ScanKind, ScanOptions, ScanResult, Table, TupleSink,
};
use crate::buffer::BufferPool;
use crate::catalog::node_tree::Expr;
use crate::catalog::{Index, Relation};
use crate::config::Term;
use crate::page::heap::{ColumnType, Datum, HeapTuple};
use crate::page::tuple::{CachedOffsets, RawDatum, TupleDesc};
use crate::page::varlena::Varlena;
use crate::page::PageError;
use crate::storage::RelFile;
use crate::stream::{DistancePolicy, StreamOrder};
use crate::visibility::{satisfies_toast, Visibility};
mod plan;

/// The scan's condition, as messages name it (`--where` on pageio's command line).
const WHERE: Term = Term::Where;
/// The fix for an index that cannot answer (`--kind seq` on pageio's command line).
const SEQ_SCAN: Term = Term::SeqScan;
/// Naming the index to use (`--index NAME` on pageio's command line).
const INDEX_BY_NAME: Term = Term::IndexByName;

/// Why a query cannot be planned: each names what was looked for and what exists.
#[derive(Debug, Error)]
pub enum QueryError {
    /// The relation has no storage of its own.
    #[error("relation \"{table}\" is a {kind} and has no storage of its own: scan its partitions or underlying tables instead (pageio tables lists them)")]
    NoStorage {
        /// `schema.table`.
        table: String,
        /// What it is (`partitioned table`, `view`).
        kind: String,
    },
    /// No column of that name.
    #[error("column \"{column}\" does not exist in table \"{table}\" (its columns: {})", .available.join(", "))]
    UnknownColumn {
        /// `schema.table`.
        table: String,
        /// The name asked for.
        column: String,
        /// The table's columns.
        available: Vec<String>,
    },
    /// No btree fits the predicate's column.
    #[error("table \"{table}\" has no valid btree index whose first key column is \"{column}\" and that can answer this {} (its indexes: {}{}): use {}, or create one", Term::Where, list_or_none(.indexes), refused_list(.refused), Term::SeqScan)]
    NoIndex {
        /// `schema.table`.
        table: String,
        /// The predicate's column.
        column: String,
        /// The table's indexes and their key columns.
        indexes: Vec<String>,
        /// The btrees on the column that were passed over, each with the reason.
        refused: Vec<String>,
    },
    /// `--index NAME` names no index of the table, or one that cannot be used.
    #[error("index \"{index}\" {problem} (the indexes of table \"{table}\": {})", list_or_none(.indexes))]
    BadIndex {
        /// `schema.table`.
        table: String,
        /// The name asked for.
        index: String,
        /// What is wrong.
        problem: String,
        /// The table's indexes and their key columns.
        indexes: Vec<String>,
    },
    /// The select list or predicate does not parse, or asks what cannot be answered.
    #[error("{0}")]
    Invalid(String),
}

fn refused_list(items: &[String]) -> String {
    if items.is_empty() {
        String::new()
    } else {
        format!("; not usable: {}", items.join("; "))
    }
}

fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "none".into()
    } else {
        items.join(", ")
    }
}

/// A range on one column, its bounds values of the column's own type (the `--where`
/// literals folded into it, see [`super::clause`]): `lo` and `hi` with inclusiveness, values
/// `<>` leaves out, and whether nothing can qualify. NULLs qualify only in the range of a
/// scan without a predicate.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnRange {
    /// Index of the column in the table's attributes.
    pub column: usize,
    /// Its type.
    pub kind: TypeKind,
    /// Lower bound and whether it is inclusive.
    pub lo: Option<(Value, bool)>,
    /// Upper bound and whether it is inclusive.
    pub hi: Option<(Value, bool)>,
    /// Values left out (`<>`).
    pub excluded: Vec<Value>,
    /// No value qualifies (`i2 = 70000`, `r = 0.1` on a real column, `a > 5 and a < 3`).
    pub empty: bool,
    /// NULL qualifies: only for the range of a scan without a predicate.
    pub null_qualifies: bool,
}

impl ColumnRange {
    /// A range on `column` with no bound, no NULL: every non-NULL value.
    pub fn unbounded(column: usize, kind: TypeKind) -> ColumnRange {
        ColumnRange {
            column,
            kind,
            lo: None,
            hi: None,
            excluded: Vec::new(),
            empty: false,
            null_qualifies: false,
        }
    }

    /// Narrows the range by one folded comparison.
    pub fn add(&mut self, folded: Folded) {
        let tighter = |old: &Option<(Value, bool)>, new: (Value, bool), want: Ordering| match old {
            None => Some(new),
            Some((v, inclusive)) => match new.0.pg_cmp(v) {
                Some(o) if o == want => Some(new),
                Some(Ordering::Equal) => Some((new.0, new.1 && *inclusive)),
                _ => old.clone(),
            },
        };
        match folded {
            Folded::All => {}
            Folded::Nothing => self.empty = true,
            Folded::Bound(op, v) => match op {
                CmpOp::Eq => {
                    self.lo = tighter(&self.lo, (v.clone(), true), Ordering::Greater);
                    self.hi = tighter(&self.hi, (v, true), Ordering::Less);
                }
                CmpOp::Ne => self.excluded.push(v),
                CmpOp::Ge | CmpOp::Gt => {
                    self.lo = tighter(&self.lo, (v, op == CmpOp::Ge), Ordering::Greater)
                }
                CmpOp::Le | CmpOp::Lt => {
                    self.hi = tighter(&self.hi, (v, op == CmpOp::Le), Ordering::Less)
                }
            },
        }
        if let (Some((lo, lo_inclusive)), Some((hi, hi_inclusive))) = (&self.lo, &self.hi) {
            let point_excluded = || {
                self.excluded
                    .iter()
                    .any(|e| e.pg_cmp(lo) == Some(Ordering::Equal))
            };
            self.empty |= match lo.pg_cmp(hi) {
                Some(Ordering::Greater) => true,
                Some(Ordering::Equal) => !(*lo_inclusive && *hi_inclusive) || point_excluded(),
                _ => false,
            };
        }
    }

    /// Whether `v` is in the range, in PostgreSQL's order for the type.
    pub fn contains(&self, v: &Value) -> bool {
        !self.empty
            && !self.below_value(v)
            && !self.above_value(v)
            && !self
                .excluded
                .iter()
                .any(|e| v.pg_cmp(e) == Some(Ordering::Equal))
    }

    fn below_value(&self, v: &Value) -> bool {
        match &self.lo {
            None => false,
            Some((lo, inclusive)) => match v.pg_cmp(lo) {
                Some(Ordering::Less) => true,
                Some(Ordering::Equal) => !inclusive,
                Some(Ordering::Greater) => false,
                None => true,
            },
        }
    }

    fn above_value(&self, v: &Value) -> bool {
        match &self.hi {
            None => false,
            Some((hi, inclusive)) => match v.pg_cmp(hi) {
                Some(Ordering::Greater) => true,
                Some(Ordering::Equal) => !inclusive,
                Some(Ordering::Less) => false,
                None => true,
            },
        }
    }

    /// A btree key (read as the index's storage type) as a value of the column's type.
    fn key_value(&self, key: &Datum<'_>) -> Option<Value> {
        Some(match (self.kind, *key) {
            (TypeKind::Int2, Datum::Int2(v)) => Value::Int2(v),
            (TypeKind::Int4, Datum::Int4(v)) => Value::Int4(v),
            (TypeKind::Date, Datum::Int4(v)) => Value::Date(v),
            (TypeKind::Int8, Datum::Int8(v)) => Value::Int8(v),
            (TypeKind::Timestamp, Datum::Int8(v)) => Value::Timestamp(v),
            (TypeKind::TimestampTz, Datum::Int8(v)) => Value::TimestampTz(v),
            (TypeKind::Float4, Datum::Float4(v)) => Value::Float4(v),
            (TypeKind::Float8, Datum::Float8(v)) => Value::Float8(v),
            (TypeKind::Text | TypeKind::Varchar, Datum::Varlena(v)) => {
                Value::Text(detoast(&v, None).ok()?.into_owned())
            }
            (TypeKind::Bpchar, Datum::Varlena(v)) => {
                Value::Bpchar(detoast(&v, None).ok()?.into_owned())
            }
            _ => return None,
        })
    }
}

/// A key that cannot be read as the column's type (a damaged compressed text key) is
/// neither below nor above the range and is kept: every row the index yields is checked
/// against the predicate again on its heap value, so such a key costs a fetch, never a row.
impl KeyRange for ColumnRange {
    fn below(&self, key: &Datum<'_>) -> bool {
        self.key_value(key).is_some_and(|v| self.below_value(&v))
    }
    fn admits_null(&self) -> bool {
        self.null_qualifies
    }
    fn above(&self, key: &Datum<'_>) -> bool {
        self.key_value(key).is_some_and(|v| self.above_value(&v))
    }
    fn matches(&self, key: &Datum<'_>) -> bool {
        self.key_value(key).is_none_or(|v| self.contains(&v))
    }
}

/// The storage type a btree on a column of `kind` keeps its keys in, if the walk can
/// compare them.
fn index_key_column_type(kind: TypeKind) -> Option<ColumnType> {
    Some(match kind {
        TypeKind::Int2 => ColumnType::Int2,
        TypeKind::Int4 | TypeKind::Date => ColumnType::Int4,
        TypeKind::Int8 | TypeKind::Timestamp | TypeKind::TimestampTz => ColumnType::Int8,
        TypeKind::Float4 => ColumnType::Float4,
        TypeKind::Float8 => ColumnType::Float8,
        TypeKind::Text | TypeKind::Varchar | TypeKind::Bpchar => ColumnType::Text,
        _ => return None,
    })
}

/// `C_COLLATION_OID` and `POSIX_COLLATION_OID`: byte order, which pageio compares in.
const BYTE_ORDER_COLLATIONS: [u32; 2] = [950, 951];

/// An index a query can walk, and how.
struct UsableIndex<'r> {
    index: &'r Index,
    /// Its main fork, relative to the data directory.
    path: &'r str,
    /// The storage type of its first key.
    key_type: ColumnType,
    /// The order of its first key.
    order: KeyOrder,
}

/// Whether the btree `i` of `relation` can answer a scan with `predicate` (none: a full
/// index scan), or why not. It must be a valid btree with storage, whose first key is the
/// predicate's column, of a type the walk compares, ordered (for text) by a byte-order
/// collation of its own (`indcollation`, not the column's), and, if partial, with a
/// predicate the range implies (see [`super::partial`]).
fn index_problem<'r>(
    relation: &'r Relation,
    kinds: &[TypeKind],
    i: &'r Index,
    predicate: Option<&ColumnRange>,
) -> Result<UsableIndex<'r>, String> {
    if !i.is_btree() {
        return Err(format!(
            "is a {} index, and only btrees are walked",
            i.access_method
        ));
    }
    if !i.is_valid {
        return Err("is not valid (indisvalid is false): REINDEX it".into());
    }
    let first = i.key_columns.first().cloned().flatten();
    let Some(key_column) = first.as_deref().and_then(|f| {
        relation
            .columns
            .iter()
            .position(|c| !c.dropped && c.name == f)
    }) else {
        return Err("has an expression as its first key".into());
    };
    if let Some(p) = predicate {
        if p.column != key_column {
            return Err(format!(
                "has first key column \"{}\", not the predicate's column \"{}\"",
                relation.columns[key_column].name, relation.columns[p.column].name
            ));
        }
    }
    let column = &relation.columns[key_column];
    let Some(key_type) = index_key_column_type(kinds[key_column]) else {
        return Err(format!(
            "has keys of type {}, which the btree walk does not compare (it compares int2, int4, int8, float4, float8, date, timestamp, timestamptz, text, varchar and bpchar): use {SEQ_SCAN}",
            column.type_name.as_deref().unwrap_or("unknown")
        ));
    };
    // A text btree is ordered by the index's own collation (`CREATE INDEX … (t COLLATE
    // "C")` on a column of another collation is common); the walk compares bytes, which is
    // that order only for "C" and "POSIX".
    let collation = i
        .key_collations
        .first()
        .copied()
        .unwrap_or(column.collation_oid);
    if key_type == ColumnType::Text && !BYTE_ORDER_COLLATIONS.contains(&collation) {
        let name = match i.key_collations.first() {
            Some(_) => i.key_collation_names.first().cloned().flatten(),
            None => column.collation_name.clone(),
        };
        let named = match name {
            Some(name) => format!("collation \"{name}\" (oid {collation})"),
            None => format!("collation oid {collation}"),
        };
        return Err(format!(
            "orders its text keys by {named}, and the btree walk compares bytes (the \"C\" collation): use {SEQ_SCAN}, or an index on the column COLLATE \"C\""
        ));
    }
    if let Some(text) = &i.predicate {
        let name = |attno: i16| {
            relation
                .columns
                .iter()
                .find(|c| c.attnum == attno && !c.dropped)
                .map(|c| c.name.clone())
        };
        let parsed = Expr::parse(text).ok();
        let implied = parsed
            .as_ref()
            .is_some_and(|e| super::partial::implied_by(e, predicate, column.attnum));
        if !implied {
            let shown = match parsed
                .as_ref()
                .and_then(|e| super::partial::render(e, &name))
            {
                Some(sql) => format!("WHERE {sql}"),
                None => "a predicate pageio cannot show (see pg_get_indexdef)".into(),
            };
            return Err(format!(
                "is a partial index ({shown}) and holds only the rows its predicate accepts; {}: use {SEQ_SCAN}, or another index",
                match predicate {
                    None => format!("a scan without {WHERE} would miss the others"),
                    Some(_) => format!("{WHERE} does not imply the predicate, so rows it asks for may be missing from the index"),
                }
            ));
        }
    }
    let path = i
        .path
        .as_deref()
        .ok_or_else(|| "has no storage".to_string())?;
    Ok(UsableIndex {
        index: i,
        path,
        key_type,
        order: KeyOrder {
            descending: i.first_key_descending(),
            nulls_first: i.first_key_nulls_first(),
        },
    })
}

/// What to ask of the table.
#[derive(Debug, Clone, Copy)]
pub struct QuerySpec<'a> {
    /// The select list (`count(*), sum(abalance)`).
    pub select: &'a str,
    /// The predicate (`aid between 1 and 1000`), if any.
    pub predicate: Option<&'a str>,
    /// Which scan.
    pub kind: ScanKind,
    /// The btree to use for bitmap and index scans (default: chosen from the catalog).
    pub index: Option<&'a str>,
}

/// One select item, resolved.
#[derive(Debug, Clone)]
struct Item {
    expr: String,
    func: AggFunc,
    column: Option<usize>,
    accumulator: Accumulator,
}

/// A planned query on one table.
#[derive(Debug, Clone)]
pub struct TableQuery {
    /// `schema.table`.
    pub table_name: String,
    /// The heap, its chosen btree (bitmap and index scans) and the key's storage type.
    pub table: Table,
    /// The chosen index's name.
    pub index_name: Option<String>,
    /// The chosen index's order of its first key (`DESC`, `NULLS FIRST`).
    pub key_order: KeyOrder,
    /// Which scan.
    pub kind: ScanKind,
    /// The TOAST relation, its index (if any) and its oid.
    toast: Option<(RelFile, Option<RelFile>, u32)>,
    /// Locate TOAST chunks through the TOAST index (else one sequential read).
    toast_by_index: bool,
    desc: TupleDesc,
    kinds: Vec<TypeKind>,
    predicate: Option<ColumnRange>,
    items: Vec<Item>,
    /// Attributes to deform: one past the last used.
    wanted: usize,
    /// Where the leading fixed-width attributes among `wanted` lie in a row without NULLs.
    cached: CachedOffsets,
    /// The varlena attributes among `wanted`: the only ones whose stored sizes need checking.
    varlena_columns: Vec<usize>,
    /// What the answer may differ from PostgreSQL's in, said before the scan.
    warnings: Vec<String>,
    /// Threads for a sequential scan, the caller included (see `scan::parallel`); 0 or 1
    /// scans serially. A query whose answer depends on the order rows are added in (a sum or
    /// average of floats, see `answer_depends_on_order`) runs serially in block order
    /// whatever this says, so that its answer is the same from run to run; bitmap and index
    /// scans are always serial.
    pub parallel_workers: usize,
}

impl TableQuery {
    /// The select items' expressions, in order.
    pub fn expressions(&self) -> Vec<&str> {
        self.items.iter().map(|i| i.expr.as_str()).collect()
    }

    /// What the answer may differ from PostgreSQL's in (text compared in byte order on a
    /// column with another collation).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Whether TOAST chunks are located through the TOAST index (the default: a lookup per
    /// value) or, with `false`, by one sequential read of the TOAST heap before the scan
    /// (cheaper when nearly every value is read anyway).
    pub fn set_toast_by_index(&mut self, by_index: bool) {
        self.toast_by_index = by_index;
    }

    /// The predicate, if any.
    pub fn predicate(&self) -> Option<&ColumnRange> {
        self.predicate.as_ref()
    }

    /// Whether reading the query's values may need the TOAST relation: a varlena column's
    /// value is compared or aggregated (counting and `octet_length` need only the header).
    fn needs_values_of_varlena(&self) -> bool {
        let varlena = |c: usize| self.kinds[c].is_varlena();
        self.predicate.as_ref().is_some_and(|p| varlena(p.column))
            || self.items.iter().any(|i| {
                matches!(i.func, AggFunc::Sum | AggFunc::Min | AggFunc::Max)
                    && i.column.is_some_and(varlena)
            })
    }
}

/// What a table query found, and what the scan cost.
#[derive(Debug, Clone)]
pub struct QueryResult {
    /// The scan's counters (`rows` = qualifying rows).
    pub scan: ScanResult,
    /// The aggregates, in the order asked.
    pub aggregates: Vec<AggregateResult>,
}

/// The sink of a table query: predicate, then accumulators.
struct QuerySink<'q, 'p> {
    query: &'q TableQuery,
    visibility: Visibility,
    accumulators: Vec<Accumulator>,
    toast: Option<ToastReader<'p>>,
    rows: u64,
    /// The deformed-values buffer, kept empty between tuples so its allocation is reused.
    scratch: Vec<RawDatum<'static>>,
}

impl QuerySink<'_, '_> {
    /// The typed value of a non-null attribute.
    fn value(&mut self, column: usize, raw: &RawDatum<'_>) -> Result<Value, String> {
        let kind = self.query.kinds[column];
        match raw {
            RawDatum::Fixed(b) => Value::from_fixed(kind, b),
            RawDatum::Varlena(v) => {
                let payload = detoast(v, self.toast.as_mut())?;
                Value::from_varlena(kind, &payload)
            }
            RawDatum::Cstring(_) | RawDatum::Null => Err(format!(
                "{} value read as a cstring or NULL",
                kind.sql_name()
            )),
        }
    }
}

impl TupleSink for QuerySink<'_, '_> {
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
        let mut values = recycle(std::mem::take(&mut self.scratch), || RawDatum::Null);
        let result = self.row(self.query, &t, &mut values, &tuple_err);
        self.scratch = recycle(values, || RawDatum::Null);
        result
    }

    fn visibility(&mut self) -> &mut Visibility {
        &mut self.visibility
    }
}

impl QuerySink<'_, '_> {
    /// Deforms a live tuple into `values` (or reads it at cached offsets), applies the
    /// predicate and accumulates.
    fn row<'c>(
        &mut self,
        q: &'c TableQuery,
        t: &HeapTuple<'c>,
        values: &mut Vec<RawDatum<'c>>,
        tuple_err: &dyn Fn(PageError) -> ScanError,
    ) -> Result<bool, ScanError> {
        let n = q.cached.len();
        if q.wanted <= n {
            if let Some(cached) = q.desc.cached_row(&q.cached, t, q.wanted) {
                let value = |c| cached.get(c);
                check_varlena_sizes(q, value, tuple_err)?;
                return self.accumulate(q, value, tuple_err);
            }
        } else if let Some((cached, last)) = q.desc.cached_row_then(&q.cached, t, q.wanted) {
            let value = |c| if c == n { last } else { cached.get(c) };
            check_varlena_sizes(q, value, tuple_err)?;
            return self.accumulate(q, value, tuple_err);
        }
        q.desc
            .deform_cached(&q.cached, t, q.wanted, values)
            .map_err(tuple_err)?;
        let values = &*values;
        let value = |c: usize| values.get(c).copied().unwrap_or(RawDatum::Null);
        check_varlena_sizes(q, value, tuple_err)?;
        self.accumulate(q, value, tuple_err)
    }

    /// Applies the predicate to a live row whose attribute `c` is `value(c)`, and adds it
    /// to the accumulators if it qualifies.
    fn accumulate<'c>(
        &mut self,
        q: &'c TableQuery,
        value: impl Fn(usize) -> RawDatum<'c>,
        tuple_err: &dyn Fn(PageError) -> ScanError,
    ) -> Result<bool, ScanError> {
        if let Some(p) = &q.predicate {
            let raw = value(p.column);
            if raw.is_null() {
                return Ok(true);
            }
            let v = self
                .value(p.column, &raw)
                .map_err(|e| att_err(q, tuple_err, p.column, e))?;
            if !p.contains(&v) {
                return Ok(true);
            }
        }
        self.rows += 1;
        for (i, item) in q.items.iter().enumerate() {
            let added = match item.column {
                None => self.accumulators[i].add(None, None),
                Some(c) => {
                    let raw = value(c);
                    match (item.func, &raw) {
                        (_, RawDatum::Null) => Ok(()),
                        (AggFunc::Count, _) => self.accumulators[i].add(None, None),
                        (AggFunc::SumOctetLength, RawDatum::Varlena(v)) => {
                            self.accumulators[i].add(None, Some(v.octet_length() as u64))
                        }
                        (AggFunc::SumOctetLength, RawDatum::Cstring(b)) => {
                            self.accumulators[i].add(None, Some(b.len() as u64))
                        }
                        _ => {
                            let v = self
                                .value(c, &raw)
                                .map_err(|e| att_err(q, tuple_err, c, e))?;
                            self.accumulators[i].add(Some(&v), None)
                        }
                    }
                }
            };
            added.map_err(|problem| ScanError::Aggregate {
                expr: item.expr.clone(),
                problem,
            })?;
        }
        Ok(true)
    }
}

/// Checks the claimed sizes of a row's compressed and external values (`value(c)` is
/// attribute `c`): a size PostgreSQL could never have written would be summed or read as
/// if real. An uncompressed value in line claims no size it does not hold.
fn check_varlena_sizes<'c>(
    q: &TableQuery,
    value: impl Fn(usize) -> RawDatum<'c>,
    tuple_err: &dyn Fn(PageError) -> ScanError,
) -> Result<(), ScanError> {
    for &column in &q.varlena_columns {
        if let RawDatum::Varlena(v @ (Varlena::Compressed { .. } | Varlena::External { .. })) =
            value(column)
        {
            v.check_limits().map_err(|e| {
                att_err(
                    q,
                    tuple_err,
                    column,
                    match e {
                        PageError::BadVarlena { problem, .. } => problem,
                        other => other.to_string(),
                    },
                )
            })?;
        }
    }
    Ok(())
}

/// The error of a bad value of attribute `column` (0-based) of a row.
fn att_err(
    q: &TableQuery,
    tuple_err: &dyn Fn(PageError) -> ScanError,
    column: usize,
    problem: String,
) -> ScanError {
    tuple_err(PageError::BadTuple {
        what: "heap tuple",
        problem: format!(
            "attribute {} (\"{}\"): {problem}",
            column + 1,
            q.desc.atts.get(column).map_or("?", |a| a.name.as_str())
        ),
    })
}

impl TableQuery {
    /// Whether the answer depends on the order rows reach the accumulators: a sum or average
    /// of floats (rounding depends on the order of additions), or a min/max of a type whose
    /// equal values print differently (`-0` and `0`, numeric `1.0` and `1.00`, bpchar
    /// `'a'` and `'a  '`: PostgreSQL's transition functions return the later row's value on
    /// a tie, bpchar's the earlier one's). Such a query reads its pages in block
    /// order on one thread, as PostgreSQL's serial scans do, so its answer is the same from
    /// run to run.
    fn answer_depends_on_order(&self) -> bool {
        self.items.iter().any(|item| {
            !item.accumulator.is_order_independent()
                || (matches!(item.accumulator, Accumulator::Extreme { .. })
                    && item.column.is_some_and(|c| {
                        matches!(
                            self.kinds[c],
                            TypeKind::Float4
                                | TypeKind::Float8
                                | TypeKind::Numeric
                                | TypeKind::Bpchar
                        )
                    }))
        })
    }

    /// Whether this query's sequential scan runs on several threads: asked for
    /// ([`TableQuery::parallel_workers`] > 1), a seq scan, and an answer that does not depend
    /// on the order rows are added in.
    fn runs_in_parallel(&self) -> bool {
        self.parallel_workers > 1 && self.kind == ScanKind::Seq && !self.answer_depends_on_order()
    }
}

/// The key range of a scan without a predicate: every key, NULL included.
fn all_keys() -> ColumnRange {
    ColumnRange {
        null_qualifies: true,
        ..ColumnRange::unbounded(0, TypeKind::Other)
    }
}

/// A sink for `query` on the calling thread, with its own TOAST reader when the query reads
/// varlena values (the reader holds this thread's AIO backend).
fn query_sink<'q, 'p>(
    pool: &'p BufferPool,
    query: &'q TableQuery,
) -> Result<QuerySink<'q, 'p>, ScanError> {
    let toast = match &query.toast {
        Some((rel, index, oid)) if query.needs_values_of_varlena() => {
            let nblocks = checked_nblocks(rel)?;
            let index = index.clone().filter(|_| query.toast_by_index);
            Some(
                ToastReader::open(pool, rel.clone(), index, *oid, nblocks, satisfies_toast)
                    .map_err(ScanError::Toast)?,
            )
        }
        _ => None,
    };
    Ok(QuerySink {
        query,
        visibility: query.table.visibility(),
        accumulators: query.items.iter().map(|i| i.accumulator.clone()).collect(),
        toast,
        rows: 0,
        scratch: Vec::new(),
    })
}

/// The parallel sequential scan of a query: one sink per thread, their rows added and
/// their accumulators merged (each aggregate's `merge`).
fn scan_in_parallel(
    pool: &BufferPool,
    query: &TableQuery,
    options: &ScanOptions,
) -> Result<(ScanResult, Vec<Accumulator>), ScanError> {
    let make = || query_sink(pool, query);
    let finish = |sink: QuerySink<'_, '_>| (sink.rows, sink.accumulators);
    let (mut scan, parts) = super::parallel::parallel_seq_scan_with(
        pool,
        &query.table,
        options,
        query.parallel_workers,
        &make,
        &finish,
    )?;
    let mut accumulators: Vec<Accumulator> =
        query.items.iter().map(|i| i.accumulator.clone()).collect();
    for (rows, part) in parts {
        scan.rows += rows;
        for ((item, acc), other) in query.items.iter().zip(&mut accumulators).zip(&part) {
            acc.merge(other).map_err(|problem| ScanError::Aggregate {
                expr: item.expr.clone(),
                problem,
            })?;
        }
    }
    Ok((scan, accumulators))
}

/// Runs a planned query: a sequential scan on [`TableQuery::parallel_workers`] threads when
/// its answer allows (see there), else on the calling thread.
pub fn run_table_query(
    pool: &BufferPool,
    query: &TableQuery,
    policy: DistancePolicy,
) -> Result<QueryResult, ScanError> {
    let options = ScanOptions {
        kind: query.kind,
        predicate: Between::ALL,
        policy,
        parallel_workers: 1,
        // Pages in completion order when the answer does not depend on it (the scan's
        // choice), else in block order.
        stream_order: query
            .answer_depends_on_order()
            .then_some(StreamOrder::BlockOrder),
    };
    let (scan, accumulators) = if query.predicate.as_ref().is_some_and(|p| p.empty) {
        // No value can satisfy the predicate (`i2 = 70000`): PostgreSQL's answer is that of
        // no row, and no page needs reading to give it.
        (
            ScanResult {
                parallel_workers: 1,
                ..ScanResult::default()
            },
            query.items.iter().map(|i| i.accumulator.clone()).collect(),
        )
    } else if query.runs_in_parallel() {
        scan_in_parallel(pool, query, &options)?
    } else {
        let mut sink = query_sink(pool, query)?;
        let all = all_keys();
        let range: &dyn KeyRange = match &query.predicate {
            Some(p) => p,
            None => &all,
        };
        let mut scan = run_with(
            pool,
            &query.table,
            &options,
            range,
            query.key_order,
            &mut sink,
        )?;
        scan.rows = sink.rows;
        (scan, sink.accumulators)
    };
    let mut aggregates = Vec::with_capacity(query.items.len());
    for (item, acc) in query.items.iter().zip(&accumulators) {
        let (value, type_name) =
            acc.finish(item.column.map(|c| query.kinds[c]))
                .map_err(|problem| ScanError::Aggregate {
                    expr: item.expr.clone(),
                    problem: problem.to_string(),
                })?;
        aggregates.push(AggregateResult {
            expr: item.expr.clone(),
            type_name,
            value,
        });
    }
    Ok(QueryResult { scan, aggregates })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_compare_keys_in_the_columns_type() {
        let r = ColumnRange {
            lo: Some((Value::Date(10), true)),
            hi: Some((Value::Date(20), false)),
            ..ColumnRange::unbounded(0, TypeKind::Date)
        };
        assert!(r.matches(&Datum::Int4(10)));
        assert!(!r.matches(&Datum::Int4(20)));
        assert!(r.below(&Datum::Int4(9)));
        assert!(r.above(&Datum::Int4(20)));
        // A key that cannot be read as the column's type is kept for the heap recheck.
        let odd = Datum::Float8(15.0);
        assert!(r.matches(&odd) && !r.below(&odd) && !r.above(&odd));
    }
}
