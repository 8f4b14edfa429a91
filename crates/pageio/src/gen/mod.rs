//! The published benchmark data sets, written in PostgreSQL's on-disk format.
//!
//! # Problem
//!
//! The PostgreSQL 18 io_method benchmarks scan `(a double precision, b text) WITH
//! (fillfactor=25)` tables of up to 10 million rows (4.5 GB) with a btree on `a`, and
//! pgbench_accounts. Reproducing them with pageio alone needs those exact files — same page
//! packing, same index shape, valid checksums — at any size, without running PostgreSQL,
//! deterministically for a seed, and fast enough that a 4.5 GB table is not a coffee break.
//!
//! # Mechanism
//!
//! ```text
//!  DataSet::row(seed, rows, i)   pure: any row, any thread, any order      (rows.rs)
//!        │
//!        ├─► heap pages: page p = rows p·k … p·k+k−1, built in parallel     (heap.rs)
//!        │     1 MB chunks ─► bounded channel ─► Backend::write_blocks ─► 16384, 16384.1, …
//!        │
//!        └─► (key, heap TID) for every row, sorted in parallel
//!              ─► nbtsort bulk build ─► pages in completion order           (nbtsort.rs)
//!              ─► batches sorted into contiguous runs ─► write_blocks ─► 16385
//!  fdatasync every segment ─► fsync directory ─► manifest.json (rename: present = complete)
//! ```
//!
//! | data set | x (i = 1..ROWS) | a |
//! |---|---|---|
//! | uniform | 100000 · random() | x |
//! | linear | 100000 · i / ROWS | x |
//! | linear_N (N = 1, 10, 25) | as linear | x + random_normal(0, N · 1000) |
//! | cyclic | 100000 · (i mod P) / P, P = ROWS / 100 (integer division) | x |
//! | cyclic_N | as cyclic | x + random_normal(0, N · 1000) |
//!
//! and `b = sha256(x::text::bytea)` in its text form (`\x` + 64 hex digits). `random()` and
//! `random_normal()` are pageio's own seeded generators (see [`rows`]): the distributions are
//! PostgreSQL's, the individual values are not. pgbench_accounts holds `100000 · scale` rows
//! `(aid, bid, 0, 84 blanks)` at fillfactor 100 with its primary key on `aid`.
//!
//! Memory stays bounded: heap generation holds [`PIPELINE_CHUNKS`] chunks of
//! [`CHUNK_BLOCKS`] pages, the index build one (key, TID) pair per row (16 bytes: 160 MB for
//! 10 million rows) plus one page per tree level and one write batch.
//!
//! # Worked example
//!
//! `generate(&aio, "out", DataSet::Uniform, &GenOptions { rows: 20000, .. })` writes
//! `out/uniform/16384` (1112 pages = ⌈20000 / 18⌉), `out/uniform/16385` (57 pages: metapage,
//! 55 leaves, root at block 3, level 1 — the shape PostgreSQL 18 builds for the same table)
//! and `out/uniform/manifest.json`.

pub mod heap;
pub mod manifest;
pub mod nbtsort;
pub mod rows;

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use rayon::prelude::*;

pub use manifest::{Manifest, MANIFEST_FILE};
pub use nbtsort::{BtreeShape, KeyKind};
pub use rows::{b_text, float8_out, Row};

use crate::aio::{AioError, Backend, IoBuffer};
use crate::page::header::ItemPointer;
use crate::page::{PageError, BLCKSZ};
use crate::storage::{OpenMode, RelFile, StorageError, RELSEG_SIZE_BLOCKS};
use crate::Aio;

/// relfilenode of every generated heap (PostgreSQL's first user relfilenode).
pub const HEAP_RELFILENODE: u32 = 16384;
/// relfilenode of every generated index.
pub const INDEX_RELFILENODE: u32 = 16385;

/// Pages per write (1 MB): large enough that the AIO layer merges them into full-size I/Os
/// of `io_combine_limit`, small enough to overlap generation with writing.
pub const CHUNK_BLOCKS: usize = 128;

/// Chunks generated ahead of the writer. Bounds memory to `PIPELINE_CHUNKS` MB plus the
/// chunks being built, while keeping every core busy between writes.
pub const PIPELINE_CHUNKS: usize = 32;

/// Largest table accepted: the index build needs 16 bytes per row in memory (16 GB here),
/// and heap block numbers must stay below 2³² − 1.
pub const MAX_ROWS: u64 = 1_000_000_000;

/// Fillfactor of the benchmark tables (`WITH (fillfactor=25)`).
pub const BENCH_FILLFACTOR: usize = 25;
/// Fillfactor of pgbench_accounts (pgbench's default, 100).
pub const ACCOUNTS_FILLFACTOR: usize = 100;

/// Errors of the generator. Each names the file or value and how to fix it.
#[derive(Debug, thiserror::Error)]
pub enum GenError {
    /// A data-set name that does not exist.
    #[error("unknown data set \"{name}\": choose from {}, or all", DataSet::ALL.map(|d| d.name()).join(", "))]
    UnknownDataSet {
        /// The name given.
        name: String,
    },
    /// The output directory lies inside a PostgreSQL cluster or tablespace.
    #[error("refusing to write a data set into \"{out}\": it lies inside the PostgreSQL cluster or tablespace \"{cluster}\", whose own files pg_checksums and verify would then fail on; choose an {} directory outside any cluster", crate::config::Term::OutputDirectory)]
    InsideCluster {
        /// The output directory asked for.
        out: PathBuf,
        /// The cluster or tablespace it lies in.
        cluster: PathBuf,
    },
    /// An option out of range.
    #[error("{problem}")]
    InvalidOptions {
        /// What is wrong and what is allowed.
        problem: String,
    },
    /// The target directory already holds files.
    #[error("\"{path}\" is not empty: generate with overwrite set to replace the data set, or choose another output directory")]
    NotEmpty {
        /// The data-set directory.
        path: PathBuf,
    },
    /// The target directory holds files the generator does not write, so replacing it would
    /// delete someone else's data.
    #[error("\"{path}\" holds files a generator does not write ({files}): it is not a data-set directory to replace; move them away or choose another output directory")]
    Foreign {
        /// The data-set directory.
        path: PathBuf,
        /// Some of the foreign file names.
        files: String,
    },
    /// Memory for a large buffer could not be had.
    #[error("could not allocate {size_bytes} bytes for {what}: out of memory (lower the row count, or raise the memory limit, e.g. ulimit -v)")]
    OutOfMemory {
        /// What the memory was for.
        what: String,
        /// How much was asked for.
        size_bytes: u64,
    },
    /// The generator's worker threads could not be started.
    #[error("could not start the generator's threads: {problem} (a memory or process limit? check ulimit -v and ulimit -u)")]
    Threads {
        /// rayon's message.
        problem: String,
    },
    /// The files of a generated data set disagree with its manifest.
    #[error("\"{path}\" does not match its manifest {manifest}: {problem} (the data set is incomplete or was changed after it was generated; generate it again)")]
    ManifestMismatch {
        /// The file that disagrees.
        path: PathBuf,
        /// The manifest.
        manifest: PathBuf,
        /// What disagrees.
        problem: String,
    },
    /// A file-system operation failed.
    #[error("could not {op} \"{path}\": {source}")]
    Io {
        /// What was being done (`create directory`, `remove`, …).
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A write through the AIO subsystem failed.
    #[error("writing {what}: {source} (check free space and permissions of the output directory)")]
    Write {
        /// "heap" or "index" and the file.
        what: String,
        /// The AIO error, naming file and blocks.
        source: AioError,
    },
    /// Opening or syncing a segment failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// A page could not be built (a bug: the generator only builds pages that fit).
    #[error("building a page failed: {0} (this is a bug in pageio gen; please report it)")]
    Page(#[from] PageError),
    /// `manifest.json` could not be read.
    #[error("could not read \"{path}\": {source} (is this a directory written by `pageio gen`?)")]
    ManifestRead {
        /// The manifest path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// `manifest.json` is not valid.
    #[error("invalid manifest \"{path}\": {problem} (generate the data set again)")]
    ManifestParse {
        /// The manifest path.
        path: PathBuf,
        /// The parser's message.
        problem: String,
    },
}

/// One of the published data sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataSet {
    /// `a = x = 100000 · random()`.
    Uniform,
    /// `a = x = 100000 · i / ROWS`.
    Linear,
    /// linear plus `random_normal(0, 1000)`.
    Linear1,
    /// linear plus `random_normal(0, 10000)`.
    Linear10,
    /// linear plus `random_normal(0, 25000)`.
    Linear25,
    /// `a = x = 100000 · (i mod P) / P`, `P = ROWS / 100`.
    Cyclic,
    /// cyclic plus `random_normal(0, 1000)`.
    Cyclic1,
    /// cyclic plus `random_normal(0, 10000)`.
    Cyclic10,
    /// cyclic plus `random_normal(0, 25000)`.
    Cyclic25,
    /// pgbench's accounts table at `--scale`.
    PgbenchAccounts,
}

impl DataSet {
    /// Every data set, in the order `all` generates them.
    pub const ALL: [DataSet; 10] = [
        DataSet::Uniform,
        DataSet::Linear,
        DataSet::Linear1,
        DataSet::Linear10,
        DataSet::Linear25,
        DataSet::Cyclic,
        DataSet::Cyclic1,
        DataSet::Cyclic10,
        DataSet::Cyclic25,
        DataSet::PgbenchAccounts,
    ];

    /// The table name (also the directory name).
    pub fn name(self) -> &'static str {
        match self {
            DataSet::Uniform => "uniform",
            DataSet::Linear => "linear",
            DataSet::Linear1 => "linear_1",
            DataSet::Linear10 => "linear_10",
            DataSet::Linear25 => "linear_25",
            DataSet::Cyclic => "cyclic",
            DataSet::Cyclic1 => "cyclic_1",
            DataSet::Cyclic10 => "cyclic_10",
            DataSet::Cyclic25 => "cyclic_25",
            DataSet::PgbenchAccounts => "pgbench_accounts",
        }
    }

    /// Parses a comma-separated list (`uniform,linear_10`, or `all`).
    pub fn parse_list(list: &str) -> Result<Vec<DataSet>, GenError> {
        let mut out = Vec::new();
        for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let sets: Vec<DataSet> = if name == "all" {
                DataSet::ALL.to_vec()
            } else {
                vec![name.parse()?]
            };
            for d in sets {
                if !out.contains(&d) {
                    out.push(d);
                }
            }
        }
        Ok(out)
    }

    /// Type of the indexed column.
    pub fn key_kind(self) -> KeyKind {
        match self {
            DataSet::PgbenchAccounts => KeyKind::Int4,
            _ => KeyKind::Float8,
        }
    }

    /// Table columns as `(name, type)`.
    pub fn columns(self) -> Vec<(String, String)> {
        let cols: &[(&str, &str)] = match self {
            DataSet::PgbenchAccounts => &[
                ("aid", "int4"),
                ("bid", "int4"),
                ("abalance", "int4"),
                ("filler", "bpchar"),
            ],
            _ => &[("a", "float8"), ("b", "text")],
        };
        cols.iter()
            .map(|(n, t)| (n.to_string(), t.to_string()))
            .collect()
    }

    /// The table's fillfactor.
    pub fn fillfactor(self) -> usize {
        match self {
            DataSet::PgbenchAccounts => ACCOUNTS_FILLFACTOR,
            _ => BENCH_FILLFACTOR,
        }
    }

    /// Name of the index PostgreSQL's scripts create.
    pub fn index_name(self) -> String {
        match self {
            DataSet::PgbenchAccounts => "pgbench_accounts_pkey".into(),
            _ => format!("{}_a", self.name()),
        }
    }

    /// Standard deviation of the noise added to `a` (0 for none).
    fn noise_sd(self) -> f64 {
        let percent = match self {
            DataSet::Linear1 | DataSet::Cyclic1 => 1.0,
            DataSet::Linear10 | DataSet::Cyclic10 => 10.0,
            DataSet::Linear25 | DataSet::Cyclic25 => 25.0,
            _ => 0.0,
        };
        percent * rows::X_RANGE / 100.0
    }

    /// Row count for `opts`: `opts.rows`, or `100000 · scale` for pgbench_accounts.
    pub fn row_count(self, opts: &GenOptions) -> u64 {
        match self {
            DataSet::PgbenchAccounts => opts.scale.saturating_mul(rows::ACCOUNTS_PER_SCALE),
            _ => opts.rows,
        }
    }

    /// Row `index` (0-based; the SQL's `i` is `index + 1`) of a table of `rows` rows.
    pub fn row(self, seed: u64, rows: u64, index: u64) -> Row {
        let i = index + 1;
        let x = match self {
            DataSet::PgbenchAccounts => {
                return Row::Account {
                    aid: i as i32,
                    bid: ((i - 1) / rows::ACCOUNTS_PER_SCALE + 1) as i32,
                    abalance: 0,
                }
            }
            DataSet::Uniform => rows::X_RANGE * rows::random(seed, index),
            DataSet::Linear | DataSet::Linear1 | DataSet::Linear10 | DataSet::Linear25 => {
                rows::X_RANGE * (i as f64 / rows.max(1) as f64)
            }
            DataSet::Cyclic | DataSet::Cyclic1 | DataSet::Cyclic10 | DataSet::Cyclic25 => {
                let period = (rows / rows::CYCLES).max(1);
                rows::X_RANGE * ((i % period) as f64 / period as f64)
            }
        };
        let sd = self.noise_sd();
        let a = if sd > 0.0 {
            x + sd * rows::random_normal(seed, index)
        } else {
            x
        };
        Row::Bench { a, x }
    }

    /// Every row in heap order: the reference the tests scan against.
    pub fn rows(self, seed: u64, rows: u64) -> impl Iterator<Item = Row> {
        (0..rows).map(move |i| self.row(seed, rows, i))
    }

    /// Rows on each heap page (PostgreSQL's packing at this data set's fillfactor).
    pub fn rows_per_page(self) -> usize {
        // Every row of a data set has the same tuple length, so row 0 stands for all.
        let tuple = heap::form_tuple(&self.row(0, 1, 0), ItemPointer::default());
        heap::rows_per_page(tuple.map(|t| t.len()).unwrap_or(BLCKSZ), self.fillfactor())
    }

    /// The heap TID of row `index`.
    pub fn tid_of(self, index: u64) -> ItemPointer {
        let k = self.rows_per_page() as u64;
        ItemPointer {
            block: (index / k) as u32,
            offset: (index % k) as u16 + 1,
        }
    }
}

impl fmt::Display for DataSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DataSet {
    type Err = GenError;

    fn from_str(s: &str) -> Result<Self, GenError> {
        DataSet::ALL
            .into_iter()
            .find(|d| d.name() == s)
            .ok_or_else(|| GenError::UnknownDataSet { name: s.into() })
    }
}

/// What to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GenOptions {
    /// Rows of the benchmark tables.
    pub rows: u64,
    /// Seed of `random()` and `random_normal()`.
    pub seed: u64,
    /// pgbench scale factor (pgbench_accounts has `100000 · scale` rows).
    pub scale: u64,
    /// Replace an existing data-set directory instead of refusing.
    pub overwrite: bool,
}

impl Default for GenOptions {
    fn default() -> Self {
        GenOptions {
            rows: 1_000_000,
            seed: 42,
            scale: 1,
            overwrite: false,
        }
    }
}

/// Bytes `generate` will write for `dataset`: the heap exactly, the index estimated from
/// full leaves (for sizing a progress bar).
pub fn estimated_bytes(dataset: DataSet, opts: &GenOptions) -> u64 {
    let rows = dataset.row_count(opts);
    let heap_pages = rows.div_ceil(dataset.rows_per_page() as u64);
    let leaves = rows.div_ceil(366);
    (heap_pages + leaves + leaves / 280 + 2) * BLCKSZ as u64
}

/// The number of rows `dataset` gets with `opts`, once the output directory is known to lie
/// outside every cluster and the count within what the generator and the key type hold.
fn checked_rows(out_dir: &Path, dataset: DataSet, opts: &GenOptions) -> Result<u64, GenError> {
    if let Some(cluster) = crate::storage::enclosing_cluster(out_dir) {
        return Err(GenError::InsideCluster {
            out: out_dir.to_path_buf(),
            cluster,
        });
    }
    let rows = dataset.row_count(opts);
    if rows > MAX_ROWS {
        return Err(GenError::InvalidOptions {
        problem: format!(
            "{dataset} would have {rows} rows; at most {MAX_ROWS} are supported (lower the row count or the scale)"
        ),
    });
    }
    if dataset == DataSet::PgbenchAccounts && rows > i32::MAX as u64 {
        return Err(GenError::InvalidOptions {
            problem: format!(
                "scale {} overflows aid (integer); use at most 21474",
                opts.scale
            ),
        });
    }
    Ok(rows)
}

/// The manifest of a data set written with `opts`: what it holds and how it was made.
fn manifest_of(
    dataset: DataSet,
    opts: &GenOptions,
    rows: u64,
    heap_pages: u64,
    shape: &nbtsort::BtreeShape,
) -> Manifest {
    Manifest {
        dataset: dataset.name().into(),
        table: dataset.name().into(),
        index: dataset.index_name(),
        rows,
        seed: opts.seed,
        scale: (dataset == DataSet::PgbenchAccounts).then_some(opts.scale),
        heap_relfilenode: HEAP_RELFILENODE,
        index_relfilenode: INDEX_RELFILENODE,
        heap_pages,
        index_pages: shape.pages as u64,
        index_root: shape.root,
        index_level: shape.level,
        key_type: match dataset.key_kind() {
            KeyKind::Float8 => "float8",
            KeyKind::Int4 => "int4",
        }
        .into(),
        columns: dataset.columns(),
        rows_per_page: dataset.rows_per_page() as u32,
        heap_fillfactor: dataset.fillfactor() as u32,
        index_fillfactor: nbtsort::BTREE_LEAF_FILLFACTOR as u32,
        data_checksums: true,
        pageio_version: env!("CARGO_PKG_VERSION").into(),
        created: manifest::now_rfc3339(),
    }
}

/// Writes `dataset` to `out_dir/<name>/`: heap `16384` (+ `.1`, … per GB), btree `16385`,
/// then `manifest.json`, all through `aio`, every segment fsynced. `progress` is called with
/// the number of bytes each completed write added.
pub fn generate(
    aio: &Aio,
    out_dir: &Path,
    dataset: DataSet,
    opts: &GenOptions,
    progress: &dyn Fn(u64),
) -> Result<Manifest, GenError> {
    let rows = checked_rows(out_dir, dataset, opts)?;
    let target = out_dir.join(dataset.name());
    check_target(&target, opts.overwrite)?;
    // Everything is written into a temporary directory next to the target and renamed into
    // place when complete: an interrupted or failed run (ENOSPC, a crash) never leaves
    // partial relation files where a scan would find them. The guard removes the temporary
    // directory on every early return.
    let staging = Staging::create(out_dir, dataset)?;
    let dir = staging.path.clone();
    // The index build holds one (key, TID) pair per row. Reserve it before writing anything,
    // so a memory limit fails at once with a message instead of aborting after the heap.
    let mut entries: Vec<(f64, u64)> = Vec::new();
    entries
        .try_reserve_exact(rows as usize)
        .map_err(|_| GenError::OutOfMemory {
            what: format!("the index build of {dataset} ({rows} rows, 16 bytes per row)"),
            size_bytes: rows.saturating_mul(16),
        })?;

    // A pool of our own rather than rayon's global one, whose failure to start threads (a
    // memory or process limit) is a panic; here it is an error with the cause.
    let pool = rayon::ThreadPoolBuilder::new()
        .thread_name(|i| format!("pageio-gen-{i}"))
        .build()
        .map_err(|e| GenError::Threads {
            problem: e.to_string(),
        })?;

    let mut backend = aio.backend().map_err(|source| GenError::Write {
        what: format!("{dataset}: no AIO backend"),
        source,
    })?;
    let heap_rel = RelFile::new(dir.join(HEAP_RELFILENODE.to_string()));
    let index_rel = RelFile::new(dir.join(INDEX_RELFILENODE.to_string()));
    let rows_per_page = dataset.rows_per_page();
    let heap_pages = write_heap(
        &pool,
        &mut backend,
        &heap_rel,
        dataset,
        opts.seed,
        rows,
        progress,
    )?;

    // (key, heap TID) of every row, sorted as the btree orders them: key, then TID.
    let k = rows_per_page as u64;
    // The capacity reserved above is enough: an indexed parallel extend writes in place.
    pool.install(|| {
        entries.par_extend((0..rows).into_par_iter().map(|i| {
            let tid = ((i / k) << 16) | (i % k + 1);
            (dataset.row(opts.seed, rows, i).key(), tid)
        }));
        // float8 btree order (NaN after every number, -0 = 0), then TID.
        entries.par_sort_unstable_by(|a, b| crate::page::float8_cmp(a.0, b.0).then(a.1.cmp(&b.1)));
    });
    let mut writer = RunWriter {
        backend: &mut backend,
        rel: &index_rel,
        pending: Vec::with_capacity(CHUNK_BLOCKS),
        progress,
    };
    let shape = nbtsort::build(
        dataset.key_kind(),
        entries.iter().map(|&(key, tid)| {
            (
                key,
                ItemPointer {
                    block: (tid >> 16) as u32,
                    offset: tid as u16,
                },
            )
        }),
        |blkno, page| writer.push(blkno, page),
    )?;
    writer.flush()?;
    drop(entries);
    drop(backend);

    sync_relation(aio, &heap_rel, heap_pages)?;
    sync_relation(aio, &index_rel, shape.pages as u64)?;
    sync_dir(&dir)?;

    let manifest = manifest_of(dataset, opts, rows, heap_pages, &shape);
    manifest.store(&dir)?;
    sync_dir(&dir)?;
    staging.commit(&target, opts.overwrite)?;
    Ok(manifest)
}

/// Is `name` a file a generator writes (a relation segment of the heap or index, or the
/// manifest and its temporary)? Only such files are ever replaced or removed.
pub fn is_generator_file(name: &str) -> bool {
    let base = name.split('.').next().unwrap_or("");
    base == HEAP_RELFILENODE.to_string()
        || base == INDEX_RELFILENODE.to_string()
        || name.starts_with(MANIFEST_FILE)
}

/// Refuses a target that holds files, unless `overwrite` is set and every file in it is one
/// a generator writes. Nothing is written by this check.
fn check_target(dir: &Path, overwrite: bool) -> Result<(), GenError> {
    let entries: Vec<String> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(GenError::Io {
                op: "read directory",
                path: dir.to_path_buf(),
                source,
            })
        }
    };
    if entries.is_empty() {
        return Ok(());
    }
    if !overwrite {
        return Err(GenError::NotEmpty {
            path: dir.to_path_buf(),
        });
    }
    let foreign: Vec<&str> = entries
        .iter()
        .map(String::as_str)
        .filter(|n| !is_generator_file(n))
        .collect();
    if !foreign.is_empty() {
        return Err(GenError::Foreign {
            path: dir.to_path_buf(),
            files: foreign
                .iter()
                .take(FOREIGN_NAMES_SHOWN)
                .copied()
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    Ok(())
}

/// How many foreign file names an error lists: enough to recognise the directory.
const FOREIGN_NAMES_SHOWN: usize = 5;

/// Prefix of the temporary directories `generate` writes in (`.<dataset>.partial-<pid>`),
/// hidden so that nothing mistakes one for a data set.
const STAGING_PREFIX: &str = ".partial-";

/// A temporary data-set directory next to the target, removed on drop unless committed.
struct Staging {
    path: PathBuf,
    committed: bool,
}

impl Staging {
    fn create(out_dir: &Path, dataset: DataSet) -> Result<Staging, GenError> {
        let io = |op: &'static str, path: &Path| {
            let path = path.to_path_buf();
            move |source| GenError::Io { op, path, source }
        };
        std::fs::create_dir_all(out_dir).map_err(io("create directory", out_dir))?;
        // Leftovers of runs that were killed (their process is gone) are ours by name.
        let prefix = format!(".{}{STAGING_PREFIX}", dataset.name());
        if let Ok(entries) = std::fs::read_dir(out_dir) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                let Some(pid) = name
                    .strip_prefix(&prefix)
                    .and_then(|p| p.parse::<i32>().ok())
                else {
                    continue;
                };
                if !process_alive(pid) {
                    remove_staging(&entry.path());
                }
            }
        }
        let path = out_dir.join(format!("{prefix}{}", std::process::id()));
        if path.exists() {
            remove_staging(&path);
        }
        std::fs::create_dir(&path).map_err(io("create directory", &path))?;
        Ok(Staging {
            path,
            committed: false,
        })
    }

    /// Renames the finished directory to `target`, replacing a previous data set there
    /// (checked by [`check_target`] to hold only generator files) when `overwrite` is set.
    fn commit(mut self, target: &Path, overwrite: bool) -> Result<(), GenError> {
        // Checked again: another process may have filled the target meanwhile.
        check_target(target, overwrite)?;
        let parent = target.parent().unwrap_or(Path::new("."));
        let old = if target.exists() {
            let old = parent.join(format!(
                ".{}.old-{}",
                target.file_name().unwrap_or_default().to_string_lossy(),
                std::process::id()
            ));
            std::fs::rename(target, &old).map_err(|source| GenError::Io {
                op: "move aside",
                path: target.to_path_buf(),
                source,
            })?;
            Some(old)
        } else {
            None
        };
        std::fs::rename(&self.path, target).map_err(|source| GenError::Io {
            op: "rename into place",
            path: target.to_path_buf(),
            source,
        })?;
        self.committed = true;
        if let Some(old) = old {
            remove_staging(&old);
        }
        sync_dir(parent)
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.committed {
            remove_staging(&self.path);
        }
    }
}

/// Removes a temporary or replaced data-set directory: only generator files in it, then the
/// directory itself (which fails, harmlessly, if anything else is there).
fn remove_staging(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if is_generator_file(&entry.file_name().to_string_lossy()) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}

/// Whether process `pid` exists (`kill(pid, 0)` succeeds or is refused for permission).
fn process_alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks for the process; nothing is delivered.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Generates the heap in parallel chunks and writes them in order through `backend`.
fn write_heap(
    pool: &rayon::ThreadPool,
    backend: &mut Backend,
    rel: &RelFile,
    dataset: DataSet,
    seed: u64,
    rows: u64,
    progress: &dyn Fn(u64),
) -> Result<u64, GenError> {
    let rows_per_page = dataset.rows_per_page();
    let heap_pages = rows.div_ceil(rows_per_page as u64);
    let chunks = heap_pages.div_ceil(CHUNK_BLOCKS as u64);
    let build_chunk = |chunk: u64| -> Result<(u64, IoBuffer), GenError> {
        let first = chunk * CHUNK_BLOCKS as u64;
        let n = (heap_pages - first).min(CHUNK_BLOCKS as u64) as usize;
        let mut buf = IoBuffer::try_zeroed(n * BLCKSZ).map_err(|_| GenError::OutOfMemory {
            what: "a heap write buffer".into(),
            size_bytes: (n * BLCKSZ) as u64,
        })?;
        for (j, out) in buf.as_mut_slice().chunks_exact_mut(BLCKSZ).enumerate() {
            heap::build_page(
                dataset,
                seed,
                rows,
                rows_per_page,
                (first + j as u64) as u32,
                out,
            )?;
        }
        Ok((first, buf))
    };
    std::thread::scope(|scope| -> Result<u64, GenError> {
        // Bounded: the generator runs at most PIPELINE_CHUNKS ahead of the writes.
        let (tx, rx) = std::sync::mpsc::sync_channel(PIPELINE_CHUNKS);
        let spawned = std::thread::Builder::new()
            .name("pageio-gen-heap".into())
            .spawn_scoped(scope, move || {
                let mut next = 0u64;
                while next < chunks {
                    let end = (next + PIPELINE_CHUNKS as u64).min(chunks);
                    let built: Vec<_> =
                        pool.install(|| (next..end).into_par_iter().map(build_chunk).collect());
                    for item in built {
                        if tx.send(item).is_err() {
                            return; // the writer stopped on an error
                        }
                    }
                    next = end;
                }
            });
        if let Err(e) = spawned {
            return Err(GenError::Threads {
                problem: e.to_string(),
            });
        }
        for item in rx {
            let (first, buf) = item?;
            let len_bytes = buf.len() as u64;
            backend
                .write_blocks(rel, first, buf)
                .map_err(|source| GenError::Write {
                    what: format!("heap {}", rel.display_name()),
                    source,
                })?;
            progress(len_bytes);
        }
        Ok(heap_pages)
    })
}

/// Collects pages finished in any order and writes them as contiguous runs.
struct RunWriter<'a> {
    backend: &'a mut Backend,
    rel: &'a RelFile,
    pending: Vec<(u32, Box<[u8; BLCKSZ]>)>,
    progress: &'a dyn Fn(u64),
}

impl RunWriter<'_> {
    fn push(&mut self, blkno: u32, page: Box<[u8; BLCKSZ]>) -> Result<(), GenError> {
        self.pending.push((blkno, page));
        if self.pending.len() >= CHUNK_BLOCKS {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), GenError> {
        self.pending.sort_unstable_by_key(|(blkno, _)| *blkno);
        let mut start = 0;
        while start < self.pending.len() {
            let mut end = start + 1;
            while end < self.pending.len() && self.pending[end].0 == self.pending[end - 1].0 + 1 {
                end += 1;
            }
            let len_bytes = (end - start) * BLCKSZ;
            let mut buf = IoBuffer::try_zeroed(len_bytes).map_err(|_| GenError::OutOfMemory {
                what: "an index write buffer".into(),
                size_bytes: len_bytes as u64,
            })?;
            for (out, (_, page)) in buf
                .as_mut_slice()
                .chunks_exact_mut(BLCKSZ)
                .zip(&self.pending[start..end])
            {
                out.copy_from_slice(&page[..]);
            }
            let len_bytes = buf.len() as u64;
            self.backend
                .write_blocks(self.rel, self.pending[start].0 as u64, buf)
                .map_err(|source| GenError::Write {
                    what: format!("index {}", self.rel.display_name()),
                    source,
                })?;
            (self.progress)(len_bytes);
            start = end;
        }
        self.pending.clear();
        Ok(())
    }
}

/// `fdatasync` every segment of a relation of `nblocks` blocks.
fn sync_relation(aio: &Aio, rel: &RelFile, nblocks: u64) -> Result<(), GenError> {
    let segments = nblocks.div_ceil(RELSEG_SIZE_BLOCKS as u64).max(1);
    for segno in 0..segments {
        let (file, _) = rel.locate(
            aio.files(),
            segno * RELSEG_SIZE_BLOCKS as u64,
            1,
            OpenMode::ReadWriteCreate,
        )?;
        file.sync_data()?;
    }
    Ok(())
}

/// fsync a directory, so the new file names survive a crash.
fn sync_dir(dir: &Path) -> Result<(), GenError> {
    std::fs::File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(|source| GenError::Io {
            op: "fsync directory",
            path: dir.to_path_buf(),
            source,
        })
}
