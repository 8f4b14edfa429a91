//! Planning a query on one table, in the steps the module header draws: the row's shape
//! from the catalog ([`tuple_desc`]), the select list ([`plan_items`]), the condition
//! ([`plan_predicate`]), the index of a bitmap or index scan ([`choose_index`]), the TOAST
//! files ([`toast_files`]) and what the answer may differ from PostgreSQL's in
//! ([`collation_warnings`]).

use std::path::Path;
use std::sync::Arc;

use super::super::aggregate::{parse_select, Accumulator, AggFunc};
use super::super::clause::{fold, parse_where};
use super::super::signatures;
use super::super::value::TypeKind;
use super::super::{KeyOrder, ScanKind, Table};
use super::{
    index_problem, list_or_none, ColumnRange, Item, QueryError, QuerySpec, TableQuery, UsableIndex,
    BYTE_ORDER_COLLATIONS, INDEX_BY_NAME, WHERE,
};
use crate::catalog::{Index, Relation, INDOPTION_DESC, INDOPTION_NULLS_FIRST};
use crate::page::heap::ColumnType;
use crate::page::tuple::{align_bytes_of, AttDesc, TupleDesc};
use crate::sql::quote_identifier;
use crate::storage::{ForkNumber, RelFile};
use crate::visibility::TransactionLog;

/// The index a bitmap or index scan walks, as planned.
struct ChosenIndex {
    /// Its main fork.
    file: RelFile,
    /// Its name.
    name: String,
    /// The storage type of its first key.
    key_type: ColumnType,
    /// The order of its first key.
    key_order: KeyOrder,
}

impl TableQuery {
    /// Plans `spec` on `relation` (resolved from the catalog of the cluster at `pgdata`).
    pub fn plan(
        pgdata: &Path,
        relation: &Relation,
        spec: &QuerySpec<'_>,
    ) -> Result<TableQuery, QueryError> {
        let table_name = relation.qualified_name();
        let Some(path) = relation.path.as_deref() else {
            return Err(QueryError::NoStorage {
                table: table_name,
                kind: relation.kind.describe().into(),
            });
        };
        let desc = tuple_desc(relation, &table_name)?;
        let kinds: Vec<TypeKind> = relation
            .columns
            .iter()
            .map(|c| TypeKind::of(c.type_oid, c.attlen))
            .collect();
        let (items, items_wanted) = plan_items(relation, &table_name, &kinds, spec.select)?;
        let predicate = plan_predicate(relation, &table_name, &kinds, spec.predicate)?;
        let wanted = predicate
            .as_ref()
            .map_or(items_wanted, |p| items_wanted.max(p.column + 1));
        let chosen = if spec.kind != ScanKind::Seq || spec.index.is_some() {
            Some(choose_index(
                pgdata,
                relation,
                &table_name,
                &kinds,
                spec,
                predicate.as_ref(),
            )?)
        } else {
            None
        };
        let warnings = collation_warnings(relation, &kinds, &items, predicate.as_ref());
        let (index, index_name, key_type, key_order) = match chosen {
            Some(c) => (Some(c.file), Some(c.name), c.key_type, c.key_order),
            None => (None, None, ColumnType::Int4, KeyOrder::default()),
        };
        Ok(TableQuery {
            parallel_workers: 1,
            toast_by_index: true,
            warnings,
            table_name,
            table: Table {
                heap: RelFile::in_data_dir(pgdata, path, ForkNumber::Main),
                index,
                columns: vec![key_type],
                transactions: Some(Arc::new(TransactionLog::new(pgdata, relation.horizons))),
            },
            index_name,
            key_order,
            kind: spec.kind,
            toast: toast_files(pgdata, relation),
            cached: desc.cached_offsets(wanted),
            varlena_columns: (0..wanted.min(desc.atts.len()))
                .filter(|&c| desc.atts[c].attlen == -1)
                .collect(),
            desc,
            kinds,
            predicate,
            items,
            wanted,
        })
    }
}

/// The row's shape from `pg_attribute`: every attribute in attnum order (dropped ones
/// included, as they still take their place in old rows), with its missing value.
fn tuple_desc(relation: &Relation, table_name: &str) -> Result<TupleDesc, QueryError> {
    for (i, c) in relation.columns.iter().enumerate() {
        if c.attnum as usize != i + 1 {
            return Err(QueryError::Invalid(format!(
                "the catalog lists attribute {} of \"{table_name}\" where attribute {} belongs: pg_attribute is inconsistent",
                c.attnum,
                i + 1
            )));
        }
    }
    Ok(TupleDesc {
        atts: relation
            .columns
            .iter()
            .map(|c| AttDesc {
                name: c.name.clone(),
                attlen: c.attlen,
                align_bytes: align_bytes_of(c.attalign),
                dropped: c.dropped,
                missing: if c.atthasmissing {
                    c.missing_value.clone()
                } else {
                    None
                },
            })
            .collect(),
    })
}

/// The column named `name` (not dropped), or an error listing the table's columns.
fn find_column(relation: &Relation, table_name: &str, name: &str) -> Result<usize, QueryError> {
    relation
        .columns
        .iter()
        .position(|c| !c.dropped && c.name == name)
        .ok_or_else(|| QueryError::UnknownColumn {
            table: table_name.to_string(),
            column: name.into(),
            available: relation
                .columns
                .iter()
                .filter(|c| !c.dropped)
                .map(|c| quote_identifier(&c.name))
                .collect(),
        })
}

/// The select list resolved: one accumulator per item, each call checked as PostgreSQL
/// resolves it; with the number of attributes to deform for them (one past the last used).
fn plan_items(
    relation: &Relation,
    table_name: &str,
    kinds: &[TypeKind],
    select: &str,
) -> Result<(Vec<Item>, usize), QueryError> {
    let mut wanted = 0;
    let mut items = Vec::new();
    for item in parse_select(select).map_err(QueryError::Invalid)? {
        let column = item
            .column
            .as_deref()
            .map(|name| find_column(relation, table_name, name))
            .transpose()?;
        let kind = column.map(|c| kinds[c]);
        // A call PostgreSQL itself refuses is refused with its message.
        if let Some(c) = column {
            let col = &relation.columns[c];
            let catalog_name = col.type_name.as_deref().unwrap_or("unknown type");
            signatures::resolves(item.func.function(), col.type_oid, catalog_name)
                .map_err(|e| QueryError::Invalid(format!("{}: {e}", item.expr)))?;
        }
        let accumulator = Accumulator::new(item.func, kind).map_err(|e| {
            // A type pageio does not read is named as PostgreSQL names it.
            let e = match (kind, column) {
                (Some(TypeKind::Other), Some(c)) => e.replace(
                    "(other)",
                    &format!(
                        "({})",
                        signatures::type_display_name(
                            relation.columns[c].type_oid,
                            relation.columns[c]
                                .type_name
                                .as_deref()
                                .unwrap_or("unknown type")
                        )
                    ),
                ),
                _ => e,
            };
            QueryError::Invalid(format!("{}: {e}", item.expr))
        })?;
        if let Some(c) = column {
            wanted = wanted.max(c + 1);
        }
        items.push(Item {
            expr: item.expr,
            func: item.func,
            column,
            accumulator,
        });
    }
    Ok((items, wanted))
}

/// The condition as one range of one column, each literal folded into the column's type.
fn plan_predicate(
    relation: &Relation,
    table_name: &str,
    kinds: &[TypeKind],
    predicate: Option<&str>,
) -> Result<Option<ColumnRange>, QueryError> {
    let Some(p) = predicate else {
        return Ok(None);
    };
    let clause = parse_where(p).map_err(QueryError::Invalid)?;
    let column = find_column(relation, table_name, &clause.column)?;
    let kind = kinds[column];
    let type_name = relation.columns[column]
        .type_name
        .as_deref()
        .unwrap_or("unknown");
    if kind == TypeKind::Other || kind == TypeKind::Bool {
        return Err(QueryError::Invalid(format!(
            "{WHERE} on column {} of type {type_name}: pageio compares int2, int4, int8, float4, float8, numeric, date, timestamp, timestamptz, text, varchar, bpchar and bytea columns",
            quote_identifier(&clause.column)
        )));
    }
    let mut range = ColumnRange::unbounded(column, kind);
    for c in &clause.conditions {
        let folded = fold(kind, type_name, c)
            .map_err(|e| QueryError::Invalid(format!("in {WHERE} \"{p}\": {e}")))?;
        range.add(folded);
    }
    Ok(Some(range))
}

/// The table's indexes as error messages list them: name, access method, key columns with
/// their order, and whether partial.
fn describe_indexes(relation: &Relation) -> Vec<String> {
    relation
        .indexes
        .iter()
        .map(|i| {
            let keys: Vec<String> = i
                .key_columns
                .iter()
                .zip(i.key_options.iter().chain(std::iter::repeat(&0)))
                .map(|(k, &o)| {
                    let name = k.as_deref().map_or("(expression)".into(), quote_identifier);
                    match (o & INDOPTION_DESC != 0, o & INDOPTION_NULLS_FIRST != 0) {
                        (false, false) => name.to_string(),
                        (false, true) => format!("{name} NULLS FIRST"),
                        (true, true) => format!("{name} DESC"),
                        (true, false) => format!("{name} DESC NULLS LAST"),
                    }
                })
                .collect();
            format!(
                "{} ({} on {}{})",
                quote_identifier(&i.name),
                i.access_method,
                keys.join(", "),
                if i.predicate.is_some() {
                    ", partial"
                } else {
                    ""
                }
            )
        })
        .collect()
}

/// The btree a bitmap or index scan walks: the one the spec names, or the first (by name)
/// whose first key is the predicate's column and that can answer it; the others on the
/// column are named with the reason they cannot.
fn choose_index(
    pgdata: &Path,
    relation: &Relation,
    table_name: &str,
    kinds: &[TypeKind],
    spec: &QuerySpec<'_>,
    predicate: Option<&ColumnRange>,
) -> Result<ChosenIndex, QueryError> {
    let bad_index = |name: &str, problem: String| QueryError::BadIndex {
        table: table_name.to_string(),
        index: name.into(),
        problem,
        indexes: describe_indexes(relation),
    };
    let usable = |i| index_problem(relation, kinds, i, predicate);
    let chosen: UsableIndex<'_> = match spec.index {
        Some(written) => {
            // An index name is an SQL name, read as --table's parts are.
            let name = match crate::sql::parse_qualified_name(written, 1) {
                Ok(mut parts) => parts.pop().unwrap_or_default(),
                Err(e) => return Err(bad_index(written, e)),
            };
            let i = relation
                .indexes
                .iter()
                .find(|i| i.name == name)
                .ok_or_else(|| bad_index(&name, "does not exist on the table".into()))?;
            usable(i).map_err(|problem| bad_index(&name, problem))?
        }
        None => {
            let Some(p) = predicate else {
                return Err(QueryError::Invalid(format!(
                    "a {} scan needs {WHERE} on an indexed column, or {INDEX_BY_NAME} (the indexes of \"{table_name}\": {})",
                    spec.kind,
                    list_or_none(&describe_indexes(relation))
                )));
            };
            let column = &relation.columns[p.column].name;
            let mut refused = Vec::new();
            let mut found = None;
            let on_column = |i: &&Index| {
                i.key_columns.first().cloned().flatten().as_deref() == Some(column.as_str())
            };
            for i in relation.btree_indexes().filter(on_column) {
                match usable(i) {
                    Ok(u) => {
                        found = Some(u);
                        break;
                    }
                    Err(problem) => refused.push(format!("\"{}\" {problem}", i.name)),
                }
            }
            found.ok_or_else(|| QueryError::NoIndex {
                table: table_name.to_string(),
                column: column.clone(),
                indexes: describe_indexes(relation),
                refused,
            })?
        }
    };
    Ok(ChosenIndex {
        file: RelFile::in_data_dir(pgdata, chosen.path, ForkNumber::Main),
        name: chosen.index.name.clone(),
        key_type: chosen.key_type,
        key_order: chosen.order,
    })
}

/// The TOAST relation's heap, its index (if any) and its oid.
fn toast_files(pgdata: &Path, relation: &Relation) -> Option<(RelFile, Option<RelFile>, u32)> {
    relation.toast.as_ref().and_then(|t| {
        t.path.as_deref().map(|p| {
            (
                RelFile::in_data_dir(pgdata, p, ForkNumber::Main),
                t.index_path
                    .as_deref()
                    .map(|i| RelFile::in_data_dir(pgdata, i, ForkNumber::Main)),
                t.oid,
            )
        })
    })
}

/// Text compares bytes here; PostgreSQL compares in the column's collation, which orders
/// differently unless it is "C" or "POSIX": one warning per such column that `min`, `max`
/// or the condition compares, rather than differ silently.
fn collation_warnings(
    relation: &Relation,
    kinds: &[TypeKind],
    items: &[Item],
    predicate: Option<&ColumnRange>,
) -> Vec<String> {
    let mut compared: Vec<usize> = items
        .iter()
        .filter(|i| matches!(i.func, AggFunc::Min | AggFunc::Max))
        .filter_map(|i| i.column)
        .chain(predicate.map(|p| p.column))
        .collect();
    compared.sort_unstable();
    compared.dedup();
    compared
        .into_iter()
        .filter(|&c| {
            matches!(kinds[c], TypeKind::Text | TypeKind::Varchar | TypeKind::Bpchar)
                && !BYTE_ORDER_COLLATIONS.contains(&relation.columns[c].collation_oid)
        })
        .map(|c| {
            let column = &relation.columns[c];
            let collation = match &column.collation_name {
                Some(name) => format!("collation \"{name}\""),
                None => format!("collation oid {}", column.collation_oid),
            };
            format!(
                "column \"{}\" has {collation} (not \"C\"): pageio compares text in byte order, the \"C\" collation, so its min, max and {WHERE} may differ from PostgreSQL's (which uses the column's collation); compare with COLLATE \"C\" in SQL",
                column.name
            )
        })
        .collect()
}
