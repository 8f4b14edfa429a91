//! # A stopped PostgreSQL 18 cluster's catalog, read offline
//!
//! Turns `[database.][schema.]table` into what a scan needs — the relation's file, its
//! columns with their storage properties, its TOAST table and its btree indexes with their
//! key columns — by reading the system catalogs' own heap files through the engine's buffer
//! pool and read streams (pages verified against their checksums when the cluster has
//! them, as every other read in pageio), never through a running server.
//!
//! ## Mechanism
//!
//! ```text
//!  global/pg_control ─► checksums on?  cleanly shut down?  catversion (tablespace dirs)
//!  global/pg_filenode.map ─► pg_database (1262) ─► databases: oid, name, default tablespace
//!                        └─► pg_tablespace (1213) ─► tablespace names
//!  base/<db>/pg_filenode.map ─► pg_class (1259) ─► every relation; relfilenode 0 = mapped
//!                                  │  rows of pg_namespace (2615), pg_index (2610), pg_am
//!                                  │  (2601): their files, from relfilenode or the map
//!                                  ├─► pg_attribute (1249, mapped), pg_type (1247, mapped)
//!                                  └─► pg_namespace, pg_index, pg_am
//! ```
//!
//! Each catalog row is deformed from the fixed-width part of its `FormData_pg_*` struct
//! (`catalog/rows.rs` holds the offsets); the variable-length tail (ACLs, options,
//! defaults) is never read, with two exceptions deformed with the catalog's own descriptor
//! (its pg_attribute rows): `attmissingval`, and pg_index's `indcollation`, `indoption`
//! and `indpred` — the collation and order (`DESC`, `NULLS FIRST`) of each key column and a
//! partial index's predicate ([`node_tree`]), which decide whether and how a scan may walk
//! the index. A file path is built as PostgreSQL's `relpath` builds it:
//!
//! ```text
//!  tablespace 1663 (pg_default)  base/<dboid>/<filenode>
//!  tablespace 1664 (pg_global)   global/<filenode>
//!  any other tablespace <spc>    pg_tblspc/<spc>/PG_18_<catversion>/<dboid>/<filenode>
//! ```
//!
//! where the tablespace is `pg_class.reltablespace`, or the database's `dattablespace` when
//! that is 0, and the file number is `pg_class.relfilenode`, or the relation mapper's entry
//! when that is 0 (pg_class itself, pg_attribute, pg_type, pg_database, …).
//!
//! ## Visibility
//!
//! Catalog rows are judged by the same rule as table rows, [`crate::visibility`]: what a
//! new MVCC snapshot of the cleanly shut-down cluster sees — hint bits when set, else the
//! commit log and `pg_multixact`. Hint bits alone are not enough, because a row updated by
//! `VACUUM FULL` or `ALTER TABLE` and not read since has no hint on either version. One
//! [`TransactionLog`] serves every catalog read of a [`Catalog`], and each resolved
//! [`Relation`] carries the checkpoint's [`XidHorizons`] so that its scans judge by the same
//! horizons. A status file missing where a row needs it is an error naming the catalog, the
//! file and the xid. A cluster that is not cleanly shut down is refused
//! ([`CatalogError::NotShutDown`]): its in-progress transactions and unflushed pages make any
//! answer a guess. Two visible pg_class rows for one oid are reported, never resolved by
//! picking one.
//!
//! ## Errors
//!
//! A catalog page that fails its checksum, a truncated catalog file (a partial last page
//! or a segment missing before a later one) or a row that does not parse is a
//! [`CatalogError`] naming the catalog, the database and the file, with the page-level
//! cause (block and both checksums) inside. A relation that is not there names the
//! database and what was looked for. A catalog file cut exactly at a page boundary looks
//! like a shorter catalog to any reader, PostgreSQL included; the rows other rows point to
//! (the catalogs' own pg_class rows, namespaces, access methods, TOAST tables, index
//! tables) are checked, so such a cut is reported ([`CatalogError::MissingRow`]) whenever
//! it removes one of them. Each call to [`Catalog::database`] (and [`Catalog::resolve`])
//! reads the database's catalogs afresh; keep the [`DatabaseCatalog`] to resolve many
//! names.
//!
//! ## Worked example
//!
//! The test fixture's `postgres.public.uniform`: `global/pg_filenode.map` maps 1262 to file
//! 1262, whose rows give `postgres` = oid 5 in tablespace 1663; `base/5/pg_filenode.map`
//! maps 1259 to 1259; the pg_class row named `uniform` in namespace 2200 (`public`) has
//! relfilenode 16384 and reltablespace 0, so its file is `base/5/16384` — what
//! `pg_relation_filepath('uniform')` answers — and its pg_index row names the btree
//! `uniform_a` on attribute 1, `a` (float8, attlen 8, align d, by value).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use thiserror::Error;

use crate::buffer::{BufferPool, PageCheckOptions};
use crate::page::control::{read_control_bytes, ControlFile};
use crate::page::heap::HeapTuple;
use crate::page::{LinePointerFlags, PageRef};
use crate::storage::{ForkNumber, RelFile, RELSEG_SIZE_BLOCKS};
use crate::stream::{ReadStream, StreamOptions};

pub mod node_tree;
pub mod relmap;
mod rows;

use crate::visibility::{TransactionLog, Visibility, XidHorizons};
use relmap::RelMap;
use rows::{f32_at, i16_at, i32_at, int2vector_at, name_at, u32_at};

/// `DEFAULTTABLESPACE_OID` (pg_default).
pub const DEFAULT_TABLESPACE_OID: u32 = 1663;
/// `GLOBALTABLESPACE_OID` (pg_global).
pub const GLOBAL_TABLESPACE_OID: u32 = 1664;
/// `TABLESPACE_VERSION_DIRECTORY`'s major-version part.
const TABLESPACE_VERSION_PREFIX: &str = "PG_18_";
/// Byte offset of `catalog_version_no` in `pg_control` (after `system_identifier` and
/// `pg_control_version`); the CRC that covers it is checked by [`ControlFile::parse`].
const CONTROL_OFFSET_CATVERSION: usize = 12;
/// Schemas `\dt` leaves out: the system catalogs and the SQL-standard views.
const SYSTEM_SCHEMAS: [&str; 2] = ["pg_catalog", "information_schema"];

/// Errors of the catalog reader. Each names the catalog, database and file involved.
#[derive(Debug, Error)]
pub enum CatalogError {
    /// `pg_control` is missing, not PostgreSQL 18's, or fails its CRC.
    #[error("cannot read the cluster's pg_control: {0}")]
    Control(#[from] crate::page::control::ControlFileError),
    /// The cluster was not cleanly shut down.
    #[error("the cluster at \"{pgdata}\" is {state}, not cleanly shut down: its catalogs may hold uncommitted or unflushed rows; stop the server cleanly (pg_ctl stop -m fast) and try again")]
    NotShutDown {
        /// The data directory.
        pgdata: PathBuf,
        /// `pg_controldata`'s words for its state.
        state: String,
    },
    /// A relation mapper file is missing or damaged.
    #[error("relation mapper file \"{path}\" {problem}; restore it from a backup")]
    RelMap {
        /// The file, relative to the data directory.
        path: String,
        /// What is wrong.
        problem: String,
    },
    /// The relation mapper has no entry for a mapped catalog.
    #[error("relation mapper file \"{path}\" has no entry for catalog {catalog} (oid {oid}); the file is damaged: restore it from a backup")]
    MissingMapping {
        /// The mapper file.
        path: String,
        /// The catalog.
        catalog: String,
        /// Its oid.
        oid: u32,
    },
    /// A catalog's file could not be read: a page failed verification, the file is
    /// truncated, or a read failed.
    #[error("cannot read catalog {catalog} of {scope} from \"{path}\": {source}{}", damaged_suffix(&**.source))]
    CatalogUnreadable {
        /// The catalog (`pg_class`, …).
        catalog: String,
        /// `database "postgres"`, or `the cluster` for shared catalogs.
        scope: String,
        /// Its file, relative to the data directory.
        path: String,
        /// The page-level cause, naming the block.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A catalog row does not parse, or its visibility cannot be decided.
    #[error(
        "catalog {catalog} of {scope} (\"{path}\") block {block}, line pointer {offset}: {problem}"
    )]
    CatalogRow {
        /// The catalog.
        catalog: String,
        /// `database "…"` or `the cluster`.
        scope: String,
        /// Its file.
        path: String,
        /// Block.
        block: u64,
        /// Line pointer.
        offset: u16,
        /// What is wrong.
        problem: String,
    },
    /// A row another row refers to is not in its catalog.
    #[error("catalog {catalog} of {scope} has no row for {what}; the catalogs are inconsistent (a truncated or damaged catalog file): restore the cluster from a backup")]
    MissingRow {
        /// The catalog that should hold it.
        catalog: String,
        /// `database "…"` or `the cluster`.
        scope: String,
        /// What was looked for.
        what: String,
    },
    /// Two visible rows for one oid.
    #[error("catalog {catalog} of {scope} has two visible rows for {what}; the catalog or the commit log is damaged: restore the cluster from a backup")]
    DuplicateRow {
        /// The catalog.
        catalog: String,
        /// `database "…"` or `the cluster`.
        scope: String,
        /// Whose rows (`oid 16419`, `attribute 2 of relation oid 16419`).
        what: String,
    },
    /// No database of that name.
    #[error("database \"{name}\" does not exist in the cluster (it has: {})", .available.join(", "))]
    NoDatabase {
        /// The name asked for.
        name: String,
        /// The databases there are.
        available: Vec<String>,
    },
    /// No relation of that name.
    #[error("relation \"{name}\" does not exist in database \"{database}\"")]
    NoRelation {
        /// The database.
        database: String,
        /// The name as asked (`schema.table` or `table`).
        name: String,
    },
    /// An unqualified name found in several schemas, none of them pg_catalog or public.
    #[error("relation name \"{name}\" is in several schemas of database \"{database}\" ({}): qualify it as schema.{name}", .schemas.join(", "))]
    Ambiguous {
        /// The database.
        database: String,
        /// The name.
        name: String,
        /// The schemas holding it.
        schemas: Vec<String>,
    },
    /// The pool does not check pages as the cluster's catalogs must be checked.
    #[error("the buffer pool {problem}: catalogs must be read with the cluster's own checks (pageio::catalog::cluster_check_options), never past a damaged page, which would silently lose relations")]
    PoolChecks {
        /// What differs.
        problem: String,
    },
    /// A relation name that cannot be split into `[database.][schema.]table`.
    #[error("\"{0}\" is not a relation name: expected [database.][schema.]table, a part holding dots, spaces or capitals in double quotes (public.\"My.Table\")")]
    BadName(String),
}

/// A database of the cluster (a `pg_database` row).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Database {
    /// `oid`: the directory under `base/`.
    pub oid: u32,
    /// `datname`.
    pub name: String,
    /// `dattablespace`: where its relations live unless they say otherwise.
    pub tablespace_oid: u32,
}

/// A tablespace (a `pg_tablespace` row).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Tablespace {
    /// `oid`.
    pub oid: u32,
    /// `spcname`.
    pub name: String,
}

/// A column (a `pg_attribute` row with `attnum > 0`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Column {
    /// `attnum` (1-based).
    pub attnum: i16,
    /// `attname` (`........pg.dropped.N........` for a dropped column).
    pub name: String,
    /// `pg_type.typname` of `atttypid`; `None` for a dropped column (its type is gone).
    pub type_name: Option<String>,
    /// `atttypid`.
    pub type_oid: u32,
    /// `attlen`: the fixed width in bytes, -1 varlena, -2 cstring.
    pub attlen: i16,
    /// `attalign`: `c`, `s`, `i` or `d`.
    pub attalign: char,
    /// `attbyval`.
    pub attbyval: bool,
    /// `attnotnull`.
    pub attnotnull: bool,
    /// `attisdropped`: still on disk in old rows, never shown.
    pub dropped: bool,
    /// `atthasmissing`: rows older than the column read its `attmissingval`.
    pub atthasmissing: bool,
    /// `attcollation`: the collation text comparisons use (0: not collatable, 100: the
    /// database default, 950: "C", 951: "POSIX").
    pub collation_oid: u32,
    /// `pg_collation.collname` of `attcollation` (`default`, `C`, `en_US`, …); `None` for
    /// a type without collations.
    #[serde(skip)]
    pub collation_name: Option<String>,
    /// The stored form of `attmissingval`'s one element (fixed bytes, or a varlena with
    /// its header), decoded from the `anyarray` in the row's variable-length tail; `None`
    /// when `atthasmissing` is false or the missing value is NULL.
    #[serde(skip)]
    pub missing_value: Option<Vec<u8>>,
}

/// `pg_class.relkind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RelKind {
    /// `r`.
    Table,
    /// `i`.
    Index,
    /// `S`.
    Sequence,
    /// `t`.
    ToastTable,
    /// `v`.
    View,
    /// `m`.
    MaterializedView,
    /// `c`.
    CompositeType,
    /// `f`.
    ForeignTable,
    /// `p`.
    PartitionedTable,
    /// `I`.
    PartitionedIndex,
    /// Anything else, as stored.
    Other(char),
}

impl RelKind {
    fn from_byte(b: u8) -> RelKind {
        match b {
            b'r' => RelKind::Table,
            b'i' => RelKind::Index,
            b'S' => RelKind::Sequence,
            b't' => RelKind::ToastTable,
            b'v' => RelKind::View,
            b'm' => RelKind::MaterializedView,
            b'c' => RelKind::CompositeType,
            b'f' => RelKind::ForeignTable,
            b'p' => RelKind::PartitionedTable,
            b'I' => RelKind::PartitionedIndex,
            other => RelKind::Other(other as char),
        }
    }

    /// Whether relations of this kind have files (`RELKIND_HAS_STORAGE`).
    pub fn has_storage(self) -> bool {
        matches!(
            self,
            RelKind::Table
                | RelKind::Index
                | RelKind::Sequence
                | RelKind::ToastTable
                | RelKind::MaterializedView
        )
    }

    /// How `\d` names the kind.
    pub fn describe(self) -> &'static str {
        match self {
            RelKind::Table => "table",
            RelKind::Index => "index",
            RelKind::Sequence => "sequence",
            RelKind::ToastTable => "TOAST table",
            RelKind::View => "view",
            RelKind::MaterializedView => "materialized view",
            RelKind::CompositeType => "type",
            RelKind::ForeignTable => "foreign table",
            RelKind::PartitionedTable => "partitioned table",
            RelKind::PartitionedIndex => "partitioned index",
            RelKind::Other(_) => "other",
        }
    }
}

/// An index of a table.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Index {
    /// The index's oid.
    pub oid: u32,
    /// Its name.
    pub name: String,
    /// Its schema.
    pub schema: String,
    /// `pg_am.amname` (`btree`, `hash`, …).
    pub access_method: String,
    /// Its main fork, relative to the data directory (`None` without storage).
    pub path: Option<String>,
    /// The key columns' names, in key order (`None` for an expression).
    pub key_columns: Vec<Option<String>>,
    /// `indisunique`.
    pub is_unique: bool,
    /// `indisprimary`.
    pub is_primary: bool,
    /// `indisvalid`: usable by queries.
    pub is_valid: bool,
    /// `relpages`.
    pub relpages: i32,
    /// `indoption` of each key column: [`INDOPTION_DESC`] and [`INDOPTION_NULLS_FIRST`]
    /// bits (0 for an ascending, NULLS LAST key).
    pub key_options: Vec<i16>,
    /// `indcollation` of each key column: the collation the index orders that key by (0
    /// for a type without collations).
    pub key_collations: Vec<u32>,
    /// The `pg_collation` name of each of [`Self::key_collations`] (`None` for 0 or an oid
    /// without a row).
    pub key_collation_names: Vec<Option<String>>,
    /// `indpred`: a partial index's predicate as PostgreSQL stored it (`pg_node_tree` text,
    /// see [`node_tree`]); `None` for an index of every row. A value this reader cannot
    /// read (TOASTed out of line) is kept as an empty string, which never parses, so such an
    /// index is treated as partial with a predicate that cannot be shown.
    pub predicate: Option<String>,
}

/// `INDOPTION_DESC`: the key column is stored in descending order.
pub const INDOPTION_DESC: i16 = 0x0001;
/// `INDOPTION_NULLS_FIRST`: NULL keys sort before the non-NULL ones.
pub const INDOPTION_NULLS_FIRST: i16 = 0x0002;

impl Index {
    /// A btree, the only index kind the scans walk.
    pub fn is_btree(&self) -> bool {
        self.access_method == "btree"
    }

    /// Whether the first key column is stored in descending order.
    pub fn first_key_descending(&self) -> bool {
        self.key_options
            .first()
            .is_some_and(|o| o & INDOPTION_DESC != 0)
    }

    /// Whether NULLs of the first key column sort before its other values.
    pub fn first_key_nulls_first(&self) -> bool {
        self.key_options
            .first()
            .is_some_and(|o| o & INDOPTION_NULLS_FIRST != 0)
    }
}

/// A TOAST table and its index.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Toast {
    /// The TOAST table's oid.
    pub oid: u32,
    /// Its name (`pg_toast_<table oid>`).
    pub name: String,
    /// Its main fork.
    pub path: Option<String>,
    /// Its index's main fork.
    pub index_path: Option<String>,
}

/// A relation resolved from the catalog.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Relation {
    /// The database it is in.
    pub database: String,
    /// Its oid.
    pub oid: u32,
    /// Its schema.
    pub schema: String,
    /// Its name.
    pub name: String,
    /// `relkind`.
    pub kind: RelKind,
    /// `relpersistence`: `p` permanent, `u` unlogged, `t` temporary.
    pub persistence: char,
    /// `relispartition`.
    pub is_partition: bool,
    /// `relpages` (as of the last VACUUM or ANALYZE).
    pub relpages: i32,
    /// `reltuples` (-1: never vacuumed or analyzed).
    pub reltuples: f32,
    /// The tablespace its files are in.
    pub tablespace_oid: u32,
    /// The file number (`relfilenode`, or the mapper's for a mapped catalog); 0 without
    /// storage.
    pub filenode: u32,
    /// Its main fork, relative to the data directory, as `pg_relation_filepath` gives it;
    /// `None` for relations without storage and for temporary tables (whose files are
    /// named after a backend that no longer exists).
    pub path: Option<String>,
    /// Its columns, `attnum` order, dropped ones included (flagged).
    pub columns: Vec<Column>,
    /// Its TOAST table.
    pub toast: Option<Toast>,
    /// Its indexes, by name.
    pub indexes: Vec<Index>,
    /// The transaction horizons of the cluster's last checkpoint, which a scan of the
    /// relation needs to judge its tuples ([`crate::visibility`]).
    pub horizons: XidHorizons,
}

impl Relation {
    /// `schema.name` as SQL writes it, each part quoted when it needs to be
    /// (`public."t.x"`), so the name reads back as this relation.
    pub fn qualified_name(&self) -> String {
        crate::sql::quote_qualified(&[&self.schema, &self.name])
    }

    /// The btree indexes.
    pub fn btree_indexes(&self) -> impl Iterator<Item = &Index> {
        self.indexes.iter().filter(|i| i.is_btree())
    }

    /// `pg_table_size`: the bytes of every fork of the table and of its TOAST table and
    /// TOAST index, from the files (0 for a relation without storage).
    pub fn table_size_bytes(&self, pgdata: &Path) -> u64 {
        let toast = self.toast.as_ref();
        [
            self.path.as_deref(),
            toast.and_then(|t| t.path.as_deref()),
            toast.and_then(|t| t.index_path.as_deref()),
        ]
        .into_iter()
        .flatten()
        .map(|p| relation_size_bytes(pgdata, p))
        .sum()
    }
}

/// The bytes of every fork and segment of the relation whose main fork is `relpath`.
pub fn relation_size_bytes(pgdata: &Path, relpath: &str) -> u64 {
    [
        ForkNumber::Main,
        ForkNumber::Fsm,
        ForkNumber::Vm,
        ForkNumber::Init,
    ]
    .into_iter()
    .map(|fork| {
        RelFile::in_data_dir(pgdata, relpath, fork)
            .existing_segments()
            .iter()
            .filter_map(|p| std::fs::metadata(p).ok())
            .map(|m| m.len())
            .sum::<u64>()
    })
    .sum()
}

/// The page checks a cluster's catalogs (and tables) must be read with: its checksums, if
/// `pg_control` says it has them. Refuses a cluster that is not cleanly shut down.
pub fn cluster_check_options(pgdata: &Path) -> Result<PageCheckOptions, CatalogError> {
    Ok(read_control(pgdata)?.0)
}

/// The transaction status files of the cleanly shut-down cluster at `pgdata`, for scans of
/// its relation files named by path (a table resolved by name carries its horizons in
/// [`Relation::horizons`]). Refuses a cluster that is not cleanly shut down.
pub fn cluster_transaction_log(pgdata: &Path) -> Result<Arc<TransactionLog>, CatalogError> {
    let (_, _, horizons) = read_control(pgdata)?;
    Ok(Arc::new(TransactionLog::new(pgdata, horizons)))
}

/// The page checks, the `catalog_version_no` and the transaction horizons, from one read of
/// `pg_control` whose version and CRC [`ControlFile::parse`] checked.
fn read_control(pgdata: &Path) -> Result<(PageCheckOptions, u32, XidHorizons), CatalogError> {
    let path = pgdata.join("global").join("pg_control");
    let bytes = read_control_bytes(&path)?;
    let control = ControlFile::parse(&bytes, &path)?;
    if !control.state.is_shut_down() {
        return Err(CatalogError::NotShutDown {
            pgdata: pgdata.to_path_buf(),
            state: control.state.describe(),
        });
    }
    let options = PageCheckOptions {
        checksums: control.data_checksum_version != 0,
        ..PageCheckOptions::default()
    };
    // parse() checked the file is longer than the CRC's offset, past this field.
    Ok((
        options,
        u32_at(&bytes, CONTROL_OFFSET_CATVERSION),
        control.horizons,
    ))
}

/// One catalog file to read: which catalog, in which scope, where.
struct CatalogFile {
    catalog: &'static str,
    scope: String,
    relpath: String,
}

/// The cluster-wide catalog: databases and tablespaces.
pub struct Catalog<'p> {
    pgdata: PathBuf,
    pool: &'p BufferPool,
    catversion: u32,
    databases: Vec<Database>,
    tablespaces: Vec<Tablespace>,
    transactions: Arc<TransactionLog>,
}

impl std::fmt::Debug for Catalog<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog")
            .field("pgdata", &self.pgdata)
            .field("databases", &self.databases)
            .finish()
    }
}

impl<'p> Catalog<'p> {
    /// Opens the cluster at `pgdata`, reading `pg_database` and `pg_tablespace` through
    /// `pool`, which must check pages as [`cluster_check_options`] says (else
    /// [`CatalogError::PoolChecks`]).
    pub fn open(pgdata: &Path, pool: &'p BufferPool) -> Result<Catalog<'p>, CatalogError> {
        let (wanted, catversion, horizons) = read_control(pgdata)?;
        let have = pool.check_options();
        if have != wanted {
            return Err(CatalogError::PoolChecks {
                problem: if have.zero_damaged_pages || have.ignore_checksum_failure {
                    "reads past damaged pages (zero_damaged_pages or ignore_checksum_failure)"
                        .into()
                } else if wanted.checksums {
                    "does not verify checksums, and the cluster has them".into()
                } else {
                    "verifies checksums, and the cluster has none".into()
                },
            });
        }
        let mut catalog = Catalog {
            pgdata: pgdata.to_path_buf(),
            pool,
            catversion,
            databases: Vec::new(),
            tablespaces: Vec::new(),
            transactions: Arc::new(TransactionLog::new(pgdata, horizons)),
        };
        let map_path = "global/pg_filenode.map";
        let map = RelMap::read(&pgdata.join(map_path), map_path)?;
        let mapped = |catalog: &'static str, oid: u32| {
            map.filenumber(oid)
                .map(|f| CatalogFile {
                    catalog,
                    scope: "the cluster".into(),
                    relpath: format!("global/{f}"),
                })
                .ok_or(CatalogError::MissingMapping {
                    path: map_path.into(),
                    catalog: catalog.into(),
                    oid,
                })
        };
        let db_file = mapped("pg_database", rows::pg_database::OID)?;
        let mut databases = Vec::new();
        catalog.read_rows(&db_file, rows::pg_database::FIXED_BYTES, |d| {
            databases.push(Database {
                oid: u32_at(d, 0),
                name: name_at(d, rows::pg_database::DATNAME),
                tablespace_oid: u32_at(d, rows::pg_database::DATTABLESPACE),
            });
            Ok(())
        })?;
        check_unique(&db_file, databases.iter().map(|d| d.oid))?;
        databases.sort_by(|a, b| a.name.cmp(&b.name));
        let ts_file = mapped("pg_tablespace", rows::pg_tablespace::OID)?;
        let mut tablespaces = Vec::new();
        catalog.read_rows(&ts_file, rows::pg_tablespace::FIXED_BYTES, |d| {
            tablespaces.push(Tablespace {
                oid: u32_at(d, 0),
                name: name_at(d, rows::pg_tablespace::SPCNAME),
            });
            Ok(())
        })?;
        check_unique(&ts_file, tablespaces.iter().map(|t| t.oid))?;
        catalog.databases = databases;
        catalog.tablespaces = tablespaces;
        Ok(catalog)
    }

    /// The data directory.
    pub fn pgdata(&self) -> &Path {
        &self.pgdata
    }

    /// `catalog_version_no` from `pg_control` (the `PG_18_<catversion>` of tablespace
    /// directories).
    pub fn catversion(&self) -> u32 {
        self.catversion
    }

    /// The databases, by name.
    pub fn databases(&self) -> &[Database] {
        &self.databases
    }

    /// The tablespaces.
    pub fn tablespaces(&self) -> &[Tablespace] {
        &self.tablespaces
    }

    /// Reads database `name`'s catalogs.
    pub fn database(&self, name: &str) -> Result<DatabaseCatalog, CatalogError> {
        let db = self
            .databases
            .iter()
            .find(|d| d.name == name)
            .cloned()
            .ok_or_else(|| CatalogError::NoDatabase {
                name: name.into(),
                available: self.databases.iter().map(|d| d.name.clone()).collect(),
            })?;
        DatabaseCatalog::read(self, db)
    }

    /// Resolves `[database.][schema.]table` (two parts are `schema.table`), read as SQL
    /// names are read ([`crate::sql::parse_qualified_name`]): unquoted parts fold `A`–`Z` to
    /// lower case (`T` is `t`), quoted ones are taken as written (`"T"`, `"s.dot"."t.x"`).
    /// Without a database, `default_database` is used.
    pub fn resolve(&self, spec: &str, default_database: &str) -> Result<Relation, CatalogError> {
        let owned = crate::sql::parse_qualified_name(spec, 3)
            .map_err(|_| CatalogError::BadName(spec.into()))?;
        let parts: Vec<&str> = owned.iter().map(String::as_str).collect();
        let (database, schema, table) = match parts[..] {
            [t] => (default_database, None, t),
            [s, t] => (default_database, Some(s), t),
            [d, s, t] => (d, Some(s), t),
            _ => return Err(CatalogError::BadName(spec.into())),
        };
        self.database(database)?.find(schema, table)
    }

    /// Every visible row of a catalog, with at least `fixed_bytes` of data each, handed to
    /// `row` (whose error is reported with the row's block and line pointer). Reads through the pool with a read stream; the file must hold whole pages
    /// and no segment after a missing one.
    fn read_rows(
        &self,
        file: &CatalogFile,
        fixed_bytes: usize,
        mut row: impl FnMut(&[u8]) -> Result<(), String>,
    ) -> Result<(), CatalogError> {
        self.read_tuples(file, fixed_bytes, |t| row(t.data()))
    }

    /// [`Catalog::read_rows`], handing out whole tuples (null bitmap and variable-length
    /// tail included).
    fn read_tuples(
        &self,
        file: &CatalogFile,
        fixed_bytes: usize,
        mut row: impl FnMut(&HeapTuple<'_>) -> Result<(), String>,
    ) -> Result<(), CatalogError> {
        let unreadable =
            |source: Box<dyn std::error::Error + Send + Sync>| CatalogError::CatalogUnreadable {
                catalog: file.catalog.into(),
                scope: file.scope.clone(),
                path: file.relpath.clone(),
                source,
            };
        let rel = RelFile::in_data_dir(&self.pgdata, &file.relpath, ForkNumber::Main);
        let layout = rel.segment_layout().map_err(|e| unreadable(Box::new(e)))?;
        if let Some(partial) = layout.partial_page_bytes {
            return Err(unreadable(
                format!(
                    "segment file \"{}\" is {} bytes, not a whole number of pages: its last {partial} bytes are a partial page (the file is truncated)",
                    rel.segment_display(layout.last_segno),
                    layout.last_size_bytes
                )
                .into(),
            ));
        }
        if let Some(o) = &layout.orphan {
            return Err(unreadable(
                format!(
                    "segment file \"{}\" exists after segment {} ended the relation early (of {} blocks each)",
                    rel.segment_display(o.later_segno),
                    o.ended_at_segno,
                    RELSEG_SIZE_BLOCKS
                )
                .into(),
            ));
        }
        let nblocks = layout.nblocks;
        let mut backend = self
            .pool
            .aio()
            .backend()
            .map_err(|e| unreadable(Box::new(e)))?;
        let mut next = 0u64;
        let mut stream = ReadStream::new(self.pool, &rel, StreamOptions::default(), move || {
            (next < nblocks).then(|| {
                next += 1;
                (next - 1, ())
            })
        });
        let mut visibility = Visibility::new(Some(self.transactions.clone()));
        while let Some(buf) = stream.next(&mut backend).map_err(|e| match e {
            // The pool's advice to read past a damaged page fits a table scan, not a
            // catalog: a catalog read past a damaged page silently loses relations.
            crate::buffer::BufferError::Io(crate::aio::AioError::InvalidPage {
                path,
                block,
                detail,
            }) => unreadable(
                format!(
                    "invalid page in block {block} of relation \"{path}\": {}",
                    detail
                        .split("; set ignore_checksum_failure")
                        .next()
                        .unwrap_or("")
                )
                .into(),
            ),
            other => unreadable(Box::new(other)),
        })? {
            let block = buf.block;
            let page = buf.page();
            // A new (all-zero) page holds no rows, as PostgreSQL's PageIsNew.
            if page[14..16] == [0, 0] {
                continue;
            }
            let bad_row = |offset: u16, problem: String| CatalogError::CatalogRow {
                catalog: file.catalog.into(),
                scope: file.scope.clone(),
                path: file.relpath.clone(),
                block,
                offset,
                problem,
            };
            let p = PageRef::new(page).map_err(|e| bad_row(0, e.to_string()))?;
            for (off, id) in p.item_ids() {
                if id.lp_flags != LinePointerFlags::Normal {
                    continue;
                }
                let bytes = p
                    .item_bytes(off, id)
                    .map_err(|e| bad_row(off, e.to_string()))?;
                let tuple = HeapTuple::parse(bytes).map_err(|e| bad_row(off, e.to_string()))?;
                if !visibility
                    .satisfies_mvcc(tuple.header())
                    .map_err(|e| bad_row(off, e.to_string()))?
                {
                    continue;
                }
                let data = tuple.data();
                if data.len() < fixed_bytes {
                    return Err(bad_row(
                        off,
                        format!(
                            "the row has {} bytes of data, fewer than the {fixed_bytes} of the catalog's fixed-width columns: the row is corrupt",
                            data.len()
                        ),
                    ));
                }
                row(&tuple).map_err(|problem| bad_row(off, problem))?;
            }
        }
        Ok(())
    }
}

/// Largest array dimension count (`MAXDIM`): an attmissingval claiming more is corrupt.
const ARRAY_MAXDIM: i32 = 6;

/// The one element of the `attmissingval` array in a pg_attribute row (`tuple`, whole),
/// deformed with pg_attribute's own descriptor `own`; `None` if the value or its element
/// is NULL. The array is an `ArrayType`: ndim, dataoffset (0: no null bitmap), elemtype,
/// dims[ndim], lbound[ndim], the null bitmap, then the element at the MAXALIGNed data start.
fn missing_value(
    own: &[AttRow],
    tuple: &[u8],
    element_attlen: i16,
) -> Result<Option<Vec<u8>>, String> {
    use crate::page::tuple::{AttDesc, RawDatum, TupleDesc};
    let desc = TupleDesc {
        atts: own
            .iter()
            .map(|a| AttDesc {
                name: a.column.name.clone(),
                attlen: a.column.attlen,
                align_bytes: crate::page::tuple::align_bytes_of(a.column.attalign),
                dropped: a.column.dropped,
                missing: None,
            })
            .collect(),
    };
    let index = own
        .iter()
        .position(|a| a.column.name == "attmissingval")
        .ok_or("pg_attribute has no attmissingval column")?;
    let t = HeapTuple::parse(tuple).map_err(|e| e.to_string())?;
    let mut values = Vec::new();
    desc.deform(&t, index + 1, &mut values)
        .map_err(|e| e.to_string())?;
    let array = match values.get(index) {
        None | Some(RawDatum::Null) => return Ok(None),
        Some(RawDatum::Varlena(v)) => {
            v.check_limits().map_err(|e| e.to_string())?;
            v.inline_payload()?.into_owned()
        }
        Some(other) => return Err(format!("attmissingval is {other:?}, not an array")),
    };
    array_single_element(&array, element_attlen)
}

/// The stored form of the one element of a one-element array (`array`: the varlena
/// payload, header excluded), or `None` if the element is NULL.
fn array_single_element(array: &[u8], element_attlen: i16) -> Result<Option<Vec<u8>>, String> {
    // Offsets below are those of the array with its 4-byte header; `array` lacks it.
    let int_at = |off: usize| -> Result<i32, String> {
        array
            .get(off - 4..off)
            .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(|| {
                format!(
                    "array of {} bytes is truncated at offset {off}",
                    array.len() + 4
                )
            })
    };
    let ndim = int_at(4)?;
    let dataoffset = int_at(8)?;
    if ndim != 1 {
        if !(0..=ARRAY_MAXDIM).contains(&ndim) {
            return Err(format!("array claims {ndim} dimensions"));
        }
        return Err(format!(
            "array has {ndim} dimensions, not the 1 of a missing value"
        ));
    }
    let (dim, lbound) = (int_at(16)?, int_at(20)?);
    if dim != 1 {
        return Err(format!(
            "array has {dim} elements (lower bound {lbound}), not 1"
        ));
    }
    // ARR_OVERHEAD_NONULLS(1) = MAXALIGN(16 + 8).
    let data_start = if dataoffset == 0 {
        24
    } else {
        let bitmap = *array.get(20).ok_or("array null bitmap is truncated")?;
        if bitmap & 1 == 0 {
            return Ok(None);
        }
        dataoffset as usize
    };
    let rest = array
        .get(data_start.saturating_sub(4)..)
        .filter(|_| data_start >= 24)
        .ok_or_else(|| format!("array data offset {data_start} is outside the array"))?;
    let len = match element_attlen {
        n if n > 0 => n as usize,
        -1 => {
            let (_, size) =
                crate::page::varlena::Varlena::decode(rest).map_err(|e| e.to_string())?;
            size
        }
        -2 => {
            rest.iter()
                .position(|&b| b == 0)
                .ok_or("cstring element has no NUL")?
                + 1
        }
        n => return Err(format!("element attlen {n} is invalid")),
    };
    let value = rest
        .get(..len)
        .ok_or_else(|| format!("element of {len} bytes runs past the array"))?;
    Ok(Some(value.to_vec()))
}

/// pg_index's own tuple descriptor and the positions of the columns read past `indkey`:
/// `indcollation`, `indoption` and `indpred`. `None` when pg_attribute lacks them (a
/// catalog of another version): the index is then read as ascending, NULLS LAST, in its
/// column's collation, and not partial.
struct PgIndexDesc {
    desc: crate::page::tuple::TupleDesc,
    collation: usize,
    option: usize,
    predicate: usize,
}

fn pg_index_desc(own: Option<&Vec<AttRow>>) -> Option<PgIndexDesc> {
    use crate::page::tuple::{align_bytes_of, AttDesc, TupleDesc};
    let own = own?;
    let at = |name: &str| own.iter().position(|a| a.column.name == name);
    Some(PgIndexDesc {
        collation: at("indcollation")?,
        option: at("indoption")?,
        predicate: at("indpred")?,
        desc: TupleDesc {
            atts: own
                .iter()
                .map(|a| AttDesc {
                    name: a.column.name.clone(),
                    attlen: a.column.attlen,
                    align_bytes: align_bytes_of(a.column.attalign),
                    dropped: a.column.dropped,
                    missing: None,
                })
                .collect(),
        },
    })
}

/// What a pg_index row holds past `indkey`.
#[derive(Default)]
struct IndexRowTail {
    key_options: Vec<i16>,
    key_collations: Vec<u32>,
    predicate: Option<String>,
}

/// Reads `indcollation`, `indoption` (one value per key column) and `indpred` of a
/// pg_index tuple.
fn index_row_tail(
    own: Option<&PgIndexDesc>,
    t: &HeapTuple<'_>,
    nkey: usize,
) -> Result<IndexRowTail, String> {
    use crate::page::tuple::RawDatum;
    let Some(own) = own else {
        return Ok(IndexRowTail::default());
    };
    let wanted = own.collation.max(own.option).max(own.predicate) + 1;
    let mut values = Vec::new();
    own.desc
        .deform(t, wanted, &mut values)
        .map_err(|e| e.to_string())?;
    let payload = |i: usize| -> Result<Option<Vec<u8>>, String> {
        match values.get(i) {
            None | Some(RawDatum::Null) => Ok(None),
            Some(RawDatum::Varlena(v)) => {
                v.check_limits().map_err(|e| e.to_string())?;
                match v.inline_payload() {
                    Ok(p) => Ok(Some(p.into_owned())),
                    // Out of line in pg_index's TOAST table: not read here.
                    Err(_) => Ok(Some(Vec::new())),
                }
            }
            Some(other) => Err(format!("column {} is {other:?}, not a varlena", i + 1)),
        }
    };
    let vector = |i: usize, elem_bytes: usize, what: &str| -> Result<Vec<u64>, String> {
        let Some(p) = payload(i)? else {
            return Ok(Vec::new());
        };
        let values = vector_values(&p, elem_bytes).map_err(|e| format!("{what}: {e}"))?;
        if values.len() < nkey {
            return Err(format!(
                "{what} has {} values for {nkey} key columns",
                values.len()
            ));
        }
        Ok(values.into_iter().take(nkey).collect())
    };
    Ok(IndexRowTail {
        key_options: vector(own.option, 2, "indoption")?
            .into_iter()
            .map(|v| v as u16 as i16)
            .collect(),
        key_collations: vector(own.collation, 4, "indcollation")?
            .into_iter()
            .map(|v| v as u32)
            .collect(),
        predicate: payload(own.predicate)?.map(|p| String::from_utf8_lossy(&p).into_owned()),
    })
}

/// The values of a one-dimensional `int2vector` or `oidvector` (`payload`: the varlena
/// without its header): ndim, dataoffset, elemtype, dim, lbound, then the values.
fn vector_values(payload: &[u8], elem_bytes: usize) -> Result<Vec<u64>, String> {
    let int_at = |off: usize| -> Result<i32, String> {
        payload
            .get(off..off + 4)
            .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(|| format!("vector of {} bytes is truncated", payload.len()))
    };
    let ndim = int_at(0)?;
    if ndim == 0 {
        return Ok(Vec::new());
    }
    if ndim != 1 || int_at(4)? != 0 {
        return Err(format!(
            "a vector with {ndim} dimensions or a null bitmap, not one plain dimension"
        ));
    }
    let count = usize::try_from(int_at(12)?).map_err(|_| "a negative length".to_string())?;
    let data = payload
        .get(20..)
        .filter(|d| count.checked_mul(elem_bytes).is_some_and(|n| n <= d.len()))
        .ok_or_else(|| format!("{count} values do not fit in {} bytes", payload.len()))?;
    Ok(data
        .chunks_exact(elem_bytes)
        .take(count)
        .map(|c| {
            let mut b = [0u8; 8];
            b[..c.len()].copy_from_slice(c);
            u64::from_le_bytes(b)
        })
        .collect())
}

fn check_unique(file: &CatalogFile, oids: impl Iterator<Item = u32>) -> Result<(), CatalogError> {
    let mut seen = std::collections::HashSet::new();
    for oid in oids {
        if !seen.insert(oid) {
            return Err(CatalogError::DuplicateRow {
                catalog: file.catalog.into(),
                scope: file.scope.clone(),
                what: format!("oid {oid}"),
            });
        }
    }
    Ok(())
}

#[derive(Debug, Clone)]
struct ClassRow {
    oid: u32,
    name: String,
    namespace: u32,
    am: u32,
    filenode: u32,
    tablespace: u32,
    relpages: i32,
    reltuples: f32,
    toast: u32,
    shared: bool,
    persistence: u8,
    kind: RelKind,
    is_partition: bool,
}

#[derive(Debug, Clone)]
struct AttRow {
    attnum: i16,
    column: Column,
}

#[derive(Debug, Clone)]
struct IndexRow {
    index: u32,
    table: u32,
    key_atts: Vec<i16>,
    unique: bool,
    primary: bool,
    valid: bool,
    key_options: Vec<i16>,
    key_collations: Vec<u32>,
    predicate: Option<String>,
}

/// One database's catalogs, read once: pg_class, pg_namespace, pg_attribute, pg_type,
/// pg_index and pg_am.
#[derive(Debug)]
pub struct DatabaseCatalog {
    database: Database,
    catversion: u32,
    horizons: XidHorizons,
    db_map: RelMap,
    global_map: RelMap,
    classes: HashMap<u32, ClassRow>,
    namespaces: HashMap<u32, String>,
    attributes: HashMap<u32, Vec<AttRow>>,
    type_names: HashMap<u32, String>,
    collation_names: HashMap<u32, String>,
    indexes: HashMap<u32, Vec<IndexRow>>,
    access_methods: HashMap<u32, String>,
}

impl DatabaseCatalog {
    fn read(cluster: &Catalog<'_>, database: Database) -> Result<DatabaseCatalog, CatalogError> {
        let scope = format!("database \"{}\"", database.name);
        let map_path = format!("base/{}/pg_filenode.map", database.oid);
        let db_map = RelMap::read(&cluster.pgdata.join(&map_path), &map_path)?;
        let global_path = "global/pg_filenode.map";
        let global_map = RelMap::read(&cluster.pgdata.join(global_path), global_path)?;
        let mut cat = DatabaseCatalog {
            database,
            catversion: cluster.catversion,
            horizons: cluster.transactions.horizons(),
            db_map,
            global_map,
            classes: HashMap::new(),
            namespaces: HashMap::new(),
            attributes: HashMap::new(),
            type_names: HashMap::new(),
            collation_names: HashMap::new(),
            indexes: HashMap::new(),
            access_methods: HashMap::new(),
        };
        let class_file = CatalogFile {
            catalog: "pg_class",
            scope: scope.clone(),
            relpath: cat.relpath(
                0,
                cat.db_map.filenumber(rows::pg_class::OID).ok_or_else(|| {
                    CatalogError::MissingMapping {
                        path: map_path.clone(),
                        catalog: "pg_class".into(),
                        oid: rows::pg_class::OID,
                    }
                })?,
            ),
        };
        let mut classes = Vec::new();
        cluster.read_rows(&class_file, rows::pg_class::FIXED_BYTES, |d| {
            use rows::pg_class::*;
            classes.push(ClassRow {
                oid: u32_at(d, 0),
                name: name_at(d, RELNAME),
                namespace: u32_at(d, RELNAMESPACE),
                am: u32_at(d, RELAM),
                filenode: u32_at(d, RELFILENODE),
                tablespace: u32_at(d, RELTABLESPACE),
                relpages: i32_at(d, RELPAGES),
                reltuples: f32_at(d, RELTUPLES),
                toast: u32_at(d, RELTOASTRELID),
                shared: d[RELISSHARED] != 0,
                persistence: d[RELPERSISTENCE],
                kind: RelKind::from_byte(d[RELKIND]),
                is_partition: d[RELISPARTITION] != 0,
            });
            Ok(())
        })?;
        check_unique(&class_file, classes.iter().map(|c| c.oid))?;
        cat.classes = classes.into_iter().map(|c| (c.oid, c)).collect();

        let file_of = |cat: &DatabaseCatalog, catalog: &'static str, oid: u32| {
            let path = cat
                .storage_path(oid)?
                .ok_or_else(|| CatalogError::MissingRow {
                    catalog: "pg_class".into(),
                    scope: scope.clone(),
                    what: format!("a file of catalog {catalog} (oid {oid})"),
                })?;
            Ok::<_, CatalogError>(CatalogFile {
                catalog,
                scope: scope.clone(),
                relpath: path,
            })
        };

        let file = file_of(&cat, "pg_namespace", rows::pg_namespace::OID)?;
        let mut namespaces = Vec::new();
        cluster.read_rows(&file, rows::pg_namespace::FIXED_BYTES, |d| {
            namespaces.push((u32_at(d, 0), name_at(d, rows::pg_namespace::NSPNAME)));
            Ok(())
        })?;
        check_unique(&file, namespaces.iter().map(|n| n.0))?;
        cat.namespaces = namespaces.into_iter().collect();

        let file = file_of(&cat, "pg_type", rows::pg_type::OID)?;
        let mut types = Vec::new();
        cluster.read_rows(&file, rows::pg_type::FIXED_BYTES, |d| {
            types.push((u32_at(d, 0), name_at(d, rows::pg_type::TYPNAME)));
            Ok(())
        })?;
        check_unique(&file, types.iter().map(|t| t.0))?;
        cat.type_names = types.into_iter().collect();

        let file = file_of(&cat, "pg_collation", rows::pg_collation::OID)?;
        let mut collations = Vec::new();
        cluster.read_rows(&file, rows::pg_collation::FIXED_BYTES, |d| {
            collations.push((u32_at(d, 0), name_at(d, rows::pg_collation::COLLNAME)));
            Ok(())
        })?;
        check_unique(&file, collations.iter().map(|c| c.0))?;
        cat.collation_names = collations.into_iter().collect();
        let collation_names = &cat.collation_names;

        let file = file_of(&cat, "pg_am", rows::pg_am::OID)?;
        let mut ams = Vec::new();
        cluster.read_rows(&file, rows::pg_am::FIXED_BYTES, |d| {
            ams.push((u32_at(d, 0), name_at(d, rows::pg_am::AMNAME)));
            Ok(())
        })?;
        check_unique(&file, ams.iter().map(|a| a.0))?;
        cat.access_methods = ams.into_iter().collect();

        let file = file_of(&cat, "pg_attribute", rows::pg_attribute::OID)?;
        let mut attributes: HashMap<u32, Vec<AttRow>> = HashMap::new();
        let type_names = &cat.type_names;
        // Rows with atthasmissing, whole: their attmissingval is decoded once pg_attribute's
        // own descriptor (its rows for relation 1249) has been read.
        let mut with_missing: Vec<(u32, i16, i16, Vec<u8>)> = Vec::new();
        cluster.read_tuples(&file, rows::pg_attribute::FIXED_BYTES, |t| {
            use rows::pg_attribute::*;
            let d = t.data();
            if d[ATTHASMISSING] != 0 && i16_at(d, ATTNUM) > 0 {
                with_missing.push((
                    u32_at(d, ATTRELID),
                    i16_at(d, ATTNUM),
                    i16_at(d, ATTLEN),
                    t.bytes().to_vec(),
                ));
            }
            let attnum = i16_at(d, ATTNUM);
            if attnum <= 0 {
                return Ok(()); // system columns (ctid, xmin, …)
            }
            let type_oid = u32_at(d, ATTTYPID);
            attributes
                .entry(u32_at(d, ATTRELID))
                .or_default()
                .push(AttRow {
                    attnum,
                    column: Column {
                        attnum,
                        name: name_at(d, ATTNAME),
                        type_name: type_names.get(&type_oid).cloned(),
                        type_oid,
                        attlen: i16_at(d, ATTLEN),
                        attalign: d[ATTALIGN] as char,
                        attbyval: d[ATTBYVAL] != 0,
                        attnotnull: d[ATTNOTNULL] != 0,
                        dropped: d[ATTISDROPPED] != 0,
                        atthasmissing: d[ATTHASMISSING] != 0,
                        missing_value: None,
                        collation_oid: u32_at(d, ATTCOLLATION),
                        collation_name: collation_names.get(&u32_at(d, ATTCOLLATION)).cloned(),
                    },
                });
            Ok(())
        })?;
        for (relid, atts) in attributes.iter_mut() {
            atts.sort_by_key(|a| a.attnum);
            if let Some(w) = atts.windows(2).find(|w| w[0].attnum == w[1].attnum) {
                return Err(CatalogError::DuplicateRow {
                    catalog: "pg_attribute".into(),
                    scope: scope.clone(),
                    what: format!("attribute {} of relation oid {relid}", w[0].attnum),
                });
            }
        }
        if !with_missing.is_empty() {
            let own = attributes
                .get(&rows::pg_attribute::OID)
                .cloned()
                .unwrap_or_default();
            for (relid, attnum, attlen, bytes) in with_missing {
                let bad = |problem: String| {
                    CatalogError::MissingRow {
                    catalog: "pg_attribute".into(),
                    scope: scope.clone(),
                    what: format!("a readable attmissingval of attribute {attnum} of relation oid {relid} ({problem})"),
                }
                };
                let value = missing_value(&own, &bytes, attlen).map_err(bad)?;
                if let Some(att) = attributes
                    .get_mut(&relid)
                    .and_then(|atts| atts.iter_mut().find(|a| a.attnum == attnum))
                {
                    att.column.missing_value = value;
                }
            }
        }
        cat.attributes = attributes;

        let file = file_of(&cat, "pg_index", rows::pg_index::OID)?;
        let mut indexes: HashMap<u32, Vec<IndexRow>> = HashMap::new();
        // indcollation, indoption and indpred follow indkey, so the rows are deformed with
        // pg_index's own descriptor (its pg_attribute rows).
        let own = pg_index_desc(cat.attributes.get(&rows::pg_index::OID));
        cluster.read_tuples(&file, rows::pg_index::FIXED_BYTES, |t| {
            use rows::pg_index::*;
            let d = t.data();
            let oid = u32_at(d, INDEXRELID);
            let nkey = i16_at(d, INDNKEYATTS).max(0) as usize;
            let keys = int2vector_at(d, INDKEY)
                .map_err(|problem| format!("index oid {oid}: {problem}: the row is corrupt"))?;
            let tail = index_row_tail(own.as_ref(), t, nkey)
                .map_err(|problem| format!("index oid {oid}: {problem}: the row is corrupt"))?;
            let row = IndexRow {
                index: oid,
                table: u32_at(d, INDRELID),
                key_atts: keys.into_iter().take(nkey).collect(),
                unique: d[INDISUNIQUE] != 0,
                primary: d[INDISPRIMARY] != 0,
                valid: d[INDISVALID] != 0,
                key_options: tail.key_options,
                key_collations: tail.key_collations,
                predicate: tail.predicate,
            };
            indexes.entry(row.table).or_default().push(row);
            Ok(())
        })?;
        cat.indexes = indexes;
        Ok(cat)
    }

    /// The database.
    pub fn database(&self) -> &Database {
        &self.database
    }

    fn scope(&self) -> String {
        format!("database \"{}\"", self.database.name)
    }

    /// The relative path of a relation's main fork in `tablespace` (0: the database's).
    fn relpath(&self, tablespace: u32, filenode: u32) -> String {
        let spc = if tablespace == 0 {
            self.database.tablespace_oid
        } else {
            tablespace
        };
        match spc {
            GLOBAL_TABLESPACE_OID => format!("global/{filenode}"),
            DEFAULT_TABLESPACE_OID => format!("base/{}/{filenode}", self.database.oid),
            spc => format!(
                "pg_tblspc/{spc}/{TABLESPACE_VERSION_PREFIX}{}/{}/{filenode}",
                self.catversion, self.database.oid
            ),
        }
    }

    /// The file number of a relation: its relfilenode, or the mapper's entry (0 without
    /// storage).
    fn filenode(&self, c: &ClassRow) -> Result<u32, CatalogError> {
        if c.filenode != 0 || !c.kind.has_storage() {
            return Ok(c.filenode);
        }
        let (map, path) = if c.shared {
            (&self.global_map, "global/pg_filenode.map".to_string())
        } else {
            (
                &self.db_map,
                format!("base/{}/pg_filenode.map", self.database.oid),
            )
        };
        map.filenumber(c.oid).ok_or(CatalogError::MissingMapping {
            path,
            catalog: c.name.clone(),
            oid: c.oid,
        })
    }

    /// The main fork of relation `oid`, or `None` without storage or for a temporary
    /// relation.
    fn storage_path(&self, oid: u32) -> Result<Option<String>, CatalogError> {
        let c = self.class(oid)?;
        if !c.kind.has_storage() || c.persistence == b't' {
            return Ok(None);
        }
        let filenode = self.filenode(c)?;
        Ok(Some(self.relpath(c.tablespace, filenode)))
    }

    fn class(&self, oid: u32) -> Result<&ClassRow, CatalogError> {
        self.classes
            .get(&oid)
            .ok_or_else(|| CatalogError::MissingRow {
                catalog: "pg_class".into(),
                scope: self.scope(),
                what: format!("relation oid {oid}"),
            })
    }

    fn namespace(&self, oid: u32) -> Result<&str, CatalogError> {
        self.namespaces
            .get(&oid)
            .map(|s| s.as_str())
            .ok_or_else(|| CatalogError::MissingRow {
                catalog: "pg_namespace".into(),
                scope: self.scope(),
                what: format!("namespace oid {oid}"),
            })
    }

    /// Relation `oid`, fully resolved.
    pub fn relation(&self, oid: u32) -> Result<Relation, CatalogError> {
        let c = self.class(oid)?;
        let columns: Vec<Column> = self
            .attributes
            .get(&oid)
            .map(|a| a.iter().map(|a| a.column.clone()).collect())
            .unwrap_or_default();
        let toast = if c.toast != 0 {
            let t = self.class(c.toast)?;
            let index_path = match self.indexes.get(&t.oid).and_then(|i| i.first()) {
                Some(i) => self.storage_path(i.index)?,
                None => None,
            };
            Some(Toast {
                oid: t.oid,
                name: t.name.clone(),
                path: self.storage_path(t.oid)?,
                index_path,
            })
        } else {
            None
        };
        let mut indexes = Vec::new();
        for row in self.indexes.get(&oid).into_iter().flatten() {
            let ic = self.class(row.index)?;
            let access_method = self.access_methods.get(&ic.am).cloned().ok_or_else(|| {
                CatalogError::MissingRow {
                    catalog: "pg_am".into(),
                    scope: self.scope(),
                    what: format!("access method oid {} of index \"{}\"", ic.am, ic.name),
                }
            })?;
            let key_columns = row
                .key_atts
                .iter()
                .map(|&n| {
                    columns
                        .iter()
                        .find(|col| col.attnum == n)
                        .map(|col| col.name.clone())
                })
                .collect();
            indexes.push(Index {
                oid: ic.oid,
                name: ic.name.clone(),
                schema: self.namespace(ic.namespace)?.to_string(),
                access_method,
                path: self.storage_path(ic.oid)?,
                key_columns,
                is_unique: row.unique,
                is_primary: row.primary,
                is_valid: row.valid,
                relpages: ic.relpages,
                key_options: row.key_options.clone(),
                key_collations: row.key_collations.clone(),
                key_collation_names: row
                    .key_collations
                    .iter()
                    .map(|c| self.collation_names.get(c).cloned())
                    .collect(),
                predicate: row.predicate.clone(),
            });
        }
        indexes.sort_by(|a, b| a.name.cmp(&b.name));
        let filenode = self.filenode(c)?;
        Ok(Relation {
            database: self.database.name.clone(),
            oid,
            schema: self.namespace(c.namespace)?.to_string(),
            name: c.name.clone(),
            kind: c.kind,
            persistence: c.persistence as char,
            is_partition: c.is_partition,
            relpages: c.relpages,
            reltuples: c.reltuples,
            tablespace_oid: if c.tablespace == 0 {
                self.database.tablespace_oid
            } else {
                c.tablespace
            },
            filenode,
            path: self.storage_path(oid)?,
            columns,
            toast,
            indexes,
            horizons: self.horizons,
        })
    }

    /// The relation named `name` in `schema`; without a schema, pg_catalog, then public,
    /// then the only schema holding that name (several: [`CatalogError::Ambiguous`]).
    pub fn find(&self, schema: Option<&str>, name: &str) -> Result<Relation, CatalogError> {
        let mut found: Vec<(&str, u32)> = Vec::new();
        for c in self.classes.values().filter(|c| c.name == name) {
            let nsp = self.namespace(c.namespace)?;
            if schema.is_none_or(|s| s == nsp) {
                found.push((nsp, c.oid));
            }
        }
        let not_found = || CatalogError::NoRelation {
            database: self.database.name.clone(),
            name: match schema {
                Some(s) => crate::sql::quote_qualified(&[s, name]),
                None => crate::sql::quote_identifier(name),
            },
        };
        let oid = match found.len() {
            0 => return Err(not_found()),
            1 => found[0].1,
            _ => match ["pg_catalog", "public"]
                .iter()
                .find_map(|p| found.iter().find(|(s, _)| s == p))
            {
                Some((_, oid)) => *oid,
                None => {
                    let mut schemas: Vec<String> =
                        found.iter().map(|(s, _)| s.to_string()).collect();
                    schemas.sort();
                    return Err(CatalogError::Ambiguous {
                        database: self.database.name.clone(),
                        name: name.into(),
                        schemas,
                    });
                }
            },
        };
        self.relation(oid)
    }

    /// What `\dt+ *.*` lists, system schemas left out: tables and partitioned tables
    /// (partitions included) outside pg_catalog, information_schema, pg_toast and temporary
    /// schemas, by schema and name.
    pub fn tables(&self) -> Result<Vec<Relation>, CatalogError> {
        let mut out = Vec::new();
        for c in self.classes.values() {
            if !matches!(c.kind, RelKind::Table | RelKind::PartitionedTable) {
                continue;
            }
            let nsp = self.namespace(c.namespace)?;
            if SYSTEM_SCHEMAS.contains(&nsp)
                || nsp.starts_with("pg_toast")
                || nsp.starts_with("pg_temp_")
            {
                continue;
            }
            out.push(self.relation(c.oid)?);
        }
        out.sort_by(|a, b| (&a.schema, &a.name).cmp(&(&b.schema, &b.name)));
        Ok(out)
    }
}

/// What [`CatalogError::CatalogUnreadable`] adds after its cause: a damaged page calls for a
/// backup, while a file that is missing or not a regular file (a FIFO, a directory) already
/// says what to restore, and is not damage to the catalog's pages.
fn damaged_suffix(source: &(dyn std::error::Error + Send + Sync + 'static)) -> &'static str {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(source);
    while let Some(e) = cause {
        let storage = e
            .downcast_ref::<crate::storage::StorageError>()
            .or_else(|| match e.downcast_ref::<crate::aio::AioError>() {
                Some(crate::aio::AioError::Storage(s)) => Some(&**s),
                _ => None,
            });
        if matches!(
            storage,
            Some(
                crate::storage::StorageError::NotRegularFile { .. }
                    | crate::storage::StorageError::NotFound { .. }
                    | crate::storage::StorageError::DirectoryMissing { .. }
            )
        ) {
            return "";
        }
        cause = e.source();
    }
    "; the catalog is damaged: restore the cluster from a backup (pageio verify lists every damaged page)"
}

#[cfg(test)]
mod tests {
    use super::{array_single_element, vector_values};

    /// An `int2vector` payload (header excluded) of `values`.
    fn int2vector(values: &[i16]) -> Vec<u8> {
        let mut v = Vec::new();
        for x in [1i32, 0, 21, values.len() as i32, 0] {
            v.extend_from_slice(&x.to_le_bytes());
        }
        for x in values {
            v.extend_from_slice(&x.to_le_bytes());
        }
        v
    }

    #[test]
    fn index_vectors_decode_and_garbage_is_an_error() {
        assert_eq!(vector_values(&int2vector(&[3, 0]), 2).unwrap(), [3, 0]);
        assert_eq!(
            vector_values(&int2vector(&[]), 2).unwrap(),
            Vec::<u64>::new()
        );
        let mut oids = int2vector(&[]);
        oids[12..16].copy_from_slice(&2i32.to_le_bytes());
        oids.extend_from_slice(&950u32.to_le_bytes());
        oids.extend_from_slice(&100u32.to_le_bytes());
        assert_eq!(vector_values(&oids, 4).unwrap(), [950, 100]);
        // Too many values claimed, a null bitmap, two dimensions, a negative count.
        let mut long = int2vector(&[1]);
        long[12..16].copy_from_slice(&9i32.to_le_bytes());
        assert!(vector_values(&long, 2).is_err());
        let mut nulls = int2vector(&[1]);
        nulls[4..8].copy_from_slice(&28i32.to_le_bytes());
        assert!(vector_values(&nulls, 2).is_err());
        let mut two = int2vector(&[1]);
        two[0..4].copy_from_slice(&2i32.to_le_bytes());
        assert!(vector_values(&two, 2).is_err());
        let mut negative = int2vector(&[1]);
        negative[12..16].copy_from_slice(&(-1i32).to_le_bytes());
        assert!(vector_values(&negative, 2).is_err());
        for len in 0..48 {
            let _ = vector_values(&vec![0xFF; len], 2);
            let _ = vector_values(&vec![0x01; len], 4);
        }
    }

    /// A one-dimensional array payload (header excluded): ndim, dataoffset, elemtype, dims,
    /// lbound, an optional null bitmap, then `data` at the MAXALIGNed data start.
    fn array(ndim: i32, dim: i32, bitmap: Option<u8>, data: &[u8]) -> Vec<u8> {
        let dataoffset = if bitmap.is_some() { 32 } else { 0 };
        let mut a = Vec::new();
        for v in [ndim, dataoffset, 23, dim, 1] {
            a.extend_from_slice(&v.to_le_bytes());
        }
        if let Some(b) = bitmap {
            a.push(b);
        }
        let start = if bitmap.is_some() { 32 } else { 24 } - 4;
        a.resize(start, 0);
        a.extend_from_slice(data);
        a
    }

    #[test]
    fn missing_values_decode_from_one_element_arrays() {
        let four = 7i32.to_le_bytes();
        assert_eq!(
            array_single_element(&array(1, 1, None, &four), 4).unwrap(),
            Some(four.to_vec())
        );
        assert_eq!(
            array_single_element(&array(1, 1, Some(1), &four), 4).unwrap(),
            Some(four.to_vec())
        );
        assert_eq!(
            array_single_element(&array(1, 1, Some(0), &[]), 4).unwrap(),
            None
        );
        let text = [(4 << 1) | 1, b'a', b'b', b'c'];
        assert_eq!(
            array_single_element(&array(1, 1, None, &text), -1).unwrap(),
            Some(text.to_vec())
        );
    }

    #[test]
    fn malformed_arrays_are_errors_not_panics() {
        let four = 7i32.to_le_bytes();
        let err = array_single_element(&array(2, 1, None, &four), 4).unwrap_err();
        assert!(err.contains("2 dimensions"), "{err}");
        let err = array_single_element(&array(99, 1, None, &four), 4).unwrap_err();
        assert!(err.contains("claims 99 dimensions"), "{err}");
        let err = array_single_element(&array(1, 3, None, &four), 4).unwrap_err();
        assert!(err.contains("3 elements"), "{err}");
        let err = array_single_element(&array(1, 1, None, &four[..2]), 4).unwrap_err();
        assert!(err.contains("runs past the array"), "{err}");
        let err = array_single_element(&four, 4).unwrap_err();
        assert!(err.contains("truncated"), "{err}");
        let err = array_single_element(&array(1, 1, None, &[(60 << 1) | 1]), -1).unwrap_err();
        assert!(err.contains("claims 60 bytes"), "{err}");
        for len in 0..40 {
            let _ = array_single_element(&vec![0xFF; len], -1);
            let _ = array_single_element(&vec![0x01; len], -2);
        }
    }
}
