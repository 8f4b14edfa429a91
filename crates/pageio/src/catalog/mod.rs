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
//!                        ├─► pg_tablespace (1213) ─► tablespace names
//!                        └─► pg_authid (1260) ─► role names (relations' owners)
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

mod cluster;
mod database;
pub mod node_tree;
mod read;
pub mod relmap;
mod relpath;
mod rows;

use cluster::CatalogPool;
pub use relpath::{parse_relpath, RelPathParts};

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
    /// The buffer pool to read the catalogs through could not be made.
    #[error("cannot make a buffer pool to read the cluster's catalogs: {0}")]
    Pool(#[source] crate::buffer::BufferError),
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

    /// The key columns as a list for people: `a, b`, an expression key as `(expression)`.
    pub fn key_list(&self) -> String {
        self.key_columns
            .iter()
            .map(|k| k.as_deref().unwrap_or("(expression)"))
            .collect::<Vec<_>>()
            .join(", ")
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
    /// `relowner`: the owning role's oid ([`Catalog::role_name`] names it).
    pub owner_oid: u32,
    /// `pg_am.amname` of `relam` (`heap` for a table); `None` for a relation without an
    /// access method (a partitioned table, a view), as psql's `\dt+` leaves it empty.
    pub access_method: Option<String>,
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

    /// The first valid btree over every row (not partial) whose first key is `column`,
    /// ascending: the index a scan of a key range walks in key order. A DESC or partial
    /// btree would answer other rows, an invalid one is not usable by queries.
    pub fn ascending_btree_on(&self, column: &str) -> Option<&Index> {
        self.btree_indexes().find(|i| {
            i.is_valid
                && !i.first_key_descending()
                && i.predicate.is_none()
                && i.key_columns.first().and_then(Option::as_deref) == Some(column)
        })
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
#[derive(Clone)]
struct CatalogFile {
    catalog: &'static str,
    scope: String,
    relpath: String,
}

/// The cluster-wide catalog: databases, tablespaces and roles.
pub struct Catalog<'p> {
    pgdata: PathBuf,
    pool: CatalogPool<'p>,
    catversion: u32,
    databases: Vec<Database>,
    tablespaces: Vec<Tablespace>,
    /// `pg_authid`'s file, `None` when the relation map lacks it.
    role_file: Option<CatalogFile>,
    /// `pg_authid`'s names, read the first time a caller asks (a scan never needs them, so
    /// a damaged `pg_authid` stops only what shows owners).
    roles: std::sync::OnceLock<HashMap<u32, String>>,
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
        Catalog::open_through(pgdata, CatalogPool::Lent(pool))
    }

    /// [`Catalog::open`] through a pool lent by the caller or owned by the catalog.
    fn open_through(pgdata: &Path, pool: CatalogPool<'p>) -> Result<Catalog<'p>, CatalogError> {
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
            role_file: None,
            roles: std::sync::OnceLock::new(),
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
        catalog.role_file = mapped("pg_authid", rows::pg_authid::OID).ok();
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

    /// The page checks the catalog is read with: the cluster's own
    /// ([`cluster_check_options`]), which its tables are read with unless asked otherwise.
    pub fn check_options(&self) -> PageCheckOptions {
        self.pool.check_options()
    }

    /// `pg_authid.rolname` of role `oid` (a relation's [`Relation::owner_oid`]), or `None`
    /// when the cluster has no such role. `pg_authid` is read on the first call.
    pub fn role_name(&self, oid: u32) -> Result<Option<&str>, CatalogError> {
        if self.roles.get().is_none() {
            let roles = self.read_roles()?;
            // Another thread may have set it first: both read the same rows.
            let _ = self.roles.set(roles);
        }
        Ok(self
            .roles
            .get()
            .and_then(|roles| roles.get(&oid))
            .map(String::as_str))
    }

    /// Reads `pg_authid`: every role's oid and name.
    fn read_roles(&self) -> Result<HashMap<u32, String>, CatalogError> {
        let file = self
            .role_file
            .clone()
            .ok_or_else(|| CatalogError::MissingMapping {
                path: "global/pg_filenode.map".into(),
                catalog: "pg_authid".into(),
                oid: rows::pg_authid::OID,
            })?;
        let mut roles = Vec::new();
        self.read_rows(&file, rows::pg_authid::FIXED_BYTES, |d| {
            roles.push((u32_at(d, 0), name_at(d, rows::pg_authid::ROLNAME)));
            Ok(())
        })?;
        check_unique(&file, roles.iter().map(|(oid, _)| *oid))?;
        Ok(roles.into_iter().collect())
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
    owner: u32,
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
mod tests;
