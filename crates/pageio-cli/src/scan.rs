//! `pageio scan`: one table scan, reported like `EXPLAIN (ANALYZE, BUFFERS, IO)`.
//!
//! ```text
//!   pageio scan --pgdata DIR --heap base/5/16384 --index base/5/16394 --kind bitmap \
//!               --where 'a between 100 and 200'
//!   pageio scan --dataset uniform --data-dir DIR --kind index --where 'a between 0 and 50'
//! ```
//!
//! Answers `count(*)` and `sum(octet_length(<last column>))` for `a BETWEEN lo AND hi` on
//! the first column, and shows where the time went: buffers hit and read, I/O time and wait
//! time, and the read stream's prefetch statistics. `--cold` evicts the relation files from
//! the page cache first (and with `--drop-caches`, as root, drops the whole page cache).
//! Each page read past under `--zero-damaged-pages` or `--ignore-checksum-failure` is printed
//! as PostgreSQL's WARNING is (`invalid page in block 7 of relation base/5/16384; zeroing out
//! page`) on stderr, and the summary says what was done (`zeroed` or `used anyway`).
//!
//! What is read is checked first, by the library: `--heap`/`--index` paths resolve inside
//! `--pgdata` (or a tablespace linked from `pg_tblspc`) to regular files of the right kind
//! (`pageio::scan::resolve_relation_path`); a data set's files must match its manifest
//! (`Manifest::check_files`), and when they do not, or the data set is missing, the hint is
//! a `pageio gen` command that works as given (with `--force` when the directory holds
//! files). The predicate is parsed as PostgreSQL would (`Between::parse_on`): float8
//! literals, NaN at the top of the order, and the key column named.

use std::path::PathBuf;

use clap::Args;
use pageio::buffer::{BufferPool, PageCheckOptions};
use pageio::catalog::{Catalog, CatalogError};
use pageio::page::heap::ColumnType;
use pageio::scan::query::{run_table_query, QuerySpec, TableQuery};
use pageio::scan::{
    resolve_relation_path, run_scan, Between, RelationKind, ScanKind, ScanOptions, ScanResult,
    Table,
};
use pageio::storage::{ForkNumber, RelFile};
use pageio::stream::DistancePolicy;
use pageio::Aio;

use crate::datadir::DataDirArgs;
use crate::settings::SettingsArgs;
use crate::CliResult;

/// Arguments of `pageio scan`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    pageio scan --pgdata /var/lib/postgresql/18/main --table pgbench_accounts --select 'count(abalance)'\n  \
    pageio scan --pgdata DIR --table mydb.public.t --select 'count(*), sum(x), max(name)' --where 'id between 1 and 1000' --kind bitmap --json\n  \
    pageio scan --pgdata /var/lib/postgresql/18/main --heap base/5/16384 --kind seq\n  \
    pageio scan --pgdata DIR --heap base/5/16384 --index base/5/16394 --kind index --where 'a between 100 and 200' --cold\n  \
    pageio scan --dataset uniform --data-dir ./datasets --kind bitmap --io-method io_uring --json\n\n\
Scan's own defaults, each only when neither a flag nor a --config line sets it. Seq scans: \
io_method=auto (io_uring when the kernel allows it, else worker with one line saying why) and \
effective_io_concurrency=16, read-ahead measured per 32MB stretch: the kernel told 64MB ahead what the scan will read, or left to read ahead on its own, whichever costs the scan less (--seq-read-ahead auto; not under --direct-io on), and what the page cache already holds read in place instead of copied (--seq-read-in-place; not under --direct-io on). Bitmap and index scans: io_method=worker (its I/O workers do the \
kernel's page cache work, the copy and the checksum on another core while the scan walks the \
index; auto with one CPU) and effective_io_concurrency=128. io_max_concurrency is raised to \
effective_io_concurrency unless set. Measured in docs/BENCHMARKS.md (\"Scan defaults\", \"Are the \
scan defaults within 10% of the best flags?\"). PostgreSQL's own defaults are worker and 16; \
pass --io-method worker --effective-io-concurrency 16 to compare.")]
pub struct ScanArgs {
    /// PostgreSQL data directory holding the relation files: -D DIR, --pgdata DIR, a
    /// directory argument, or $PGDATA (unless --dataset is given)
    #[command(flatten)]
    location: DataDirArgs,
    /// The data directory `location` names, set by `run`.
    #[arg(skip)]
    pgdata: Option<PathBuf>,
    /// A table of the stopped cluster at --pgdata, by name: [database.][schema.]table, read
    /// as SQL reads names (T is t; '"T"' keeps its case; '"s.dot"."t.x"' holds dots),
    /// resolved through the cluster's catalog (columns, TOAST table and indexes included)
    #[arg(long, value_name = "NAME", conflicts_with_all = ["heap", "columns", "key_column"])]
    table: Option<String>,
    /// With --table: the database the name is looked up in
    #[arg(
        long,
        value_name = "NAME",
        default_value = "postgres",
        requires = "table"
    )]
    database: String,
    /// With --table: the aggregates to compute, comma-separated: count(*), count(col),
    /// sum(col), avg(col), min(col), max(col), sum(octet_length(col)); column names as SQL
    /// reads them (A-Z folded to lower case unless "Quoted"). Results have
    /// PostgreSQL's types (sum(int4) is bigint, sum(int8), sum(numeric) and avg of integers
    /// or numeric are exact numeric, sum(real) is real, avg of floats double precision); min/max of text compare bytes, i.e. the "C" collation; dates and timestamps
    /// print as DateStyle ISO, timestamptz in UTC (+00)
    #[arg(
        long,
        value_name = "LIST",
        default_value = "count(*)",
        requires = "table"
    )]
    select: String,
    /// Heap relation file, relative to --pgdata (e.g. base/5/16384)
    #[arg(long, value_name = "PATH")]
    heap: Option<String>,
    /// Btree on the first column, relative to --pgdata (needed for bitmap and index scans);
    /// with --table, the index's name [default: the valid btree whose first key column is
    /// the --where column]
    #[arg(long, value_name = "PATH|NAME")]
    index: Option<String>,
    /// A data set written by `pageio gen` (uniform, linear, linear_10, cyclic, pgbench_accounts, …)
    #[arg(long, value_name = "NAME", conflicts_with_all = ["pgdata", "datadir"])]
    dataset: Option<String>,
    /// Where `pageio gen` wrote its data sets
    #[arg(long, value_name = "DIR", default_value = "datasets")]
    data_dir: PathBuf,
    /// Scan type: seq, bitmap or index
    #[arg(long, default_value = "seq")]
    kind: String,
    /// Predicate on the first column: 'a between LO and HI' [default: all rows]. Bounds are
    /// float8 literals ('NaN' and 'Infinity' included, ordered as PostgreSQL orders them).
    /// With --table: 'COL between LO and HI', 'COL = V', 'COL <> V' (!=, <, <=, >, >= too,
    /// either side), several joined by AND on one column of type int2/4/8, float4/8,
    /// numeric, date, timestamp(tz), text, varchar, bpchar or bytea. Literals are typed and
    /// compared as PostgreSQL does: 5 is integer, 5.5 and 1e0 numeric, a quoted literal takes
    /// the column's type ('2024-01-31', 'it''s', E'it\'s', '0044-03-15 BC', 'infinity',
    /// '2020-01-01 05:00+02'); a real column against a number compares in double precision
    /// (r = 0.1 finds no real 0.1, r = '0.1' does); integers compare by value (i2 < 40000 is
    /// every row); NULLs never qualify; text compares bytes (the "C" collation: a WARNING
    /// says when the column's differs); timestamptz literals without an offset are UTC;
    /// typed date/time literals (timestamp '…', date '…', '…'::timestamptz) compare as
    /// PostgreSQL's cross-type operators do (a date against a timestamp at midnight)
    #[arg(long = "where", value_name = "PREDICATE", allow_hyphen_values = true)]
    predicate: Option<String>,
    /// Name of the first column, the one --where filters, for --pgdata tables [default: a;
    /// a data set's from its manifest]
    #[arg(long, value_name = "NAME")]
    key_column: Option<String>,
    /// Column types in order (float8, int4, int8, int2, bool, text, …); the first is the key,
    /// the last is summed [default: float8,text, or the data set's]
    #[arg(long, value_delimiter = ',')]
    columns: Vec<String>,
    /// Evict the relation files from the page cache before scanning (POSIX_FADV_DONTNEED)
    #[arg(long)]
    cold: bool,
    /// With --cold, also drop the whole page cache (root only: echo 3 > /proc/sys/vm/drop_caches)
    #[arg(long, requires = "cold")]
    drop_caches: bool,
    /// Read-stream look-ahead policy: adaptive (grow on stalls) or pg18 (×2 on miss, −1 on hit)
    #[arg(long, default_value = "adaptive")]
    distance_policy: String,
    /// Verify checksums: on, off, or auto (from pg_control for --pgdata; on for data sets)
    #[arg(long, default_value = "auto")]
    checksums: String,
    /// Use pages whose checksum fails, counting them (PostgreSQL's ignore_checksum_failure)
    #[arg(long)]
    ignore_checksum_failure: bool,
    /// Treat pages that fail verification as empty (PostgreSQL's zero_damaged_pages)
    #[arg(long)]
    zero_damaged_pages: bool,
    /// Threads for a seq scan, this one included, as PostgreSQL's parallel seq scan with the
    /// leader participating: they share the heap in chunks (large first, smaller near the end
    /// so all finish together), each with its own read stream and AIO handles, and their
    /// counts are combined — the answer is the serial scan's. 0 or 1 scans serially
    /// [default: the CPUs this process may use, at most 8, like max_parallel_workers]
    #[arg(short = 'j', long = "jobs", alias = "parallel", value_name = "N", value_parser = clap::value_parser!(u16).range(0..=pageio::scan::MAX_PARALLEL_WORKERS as i64))]
    parallel: Option<u16>,
    /// Print one JSON object instead of text. With --table, "aggregates" lists
    /// {"expr", "type", "value", "text"} in the order asked: "value" is a JSON number when
    /// JSON holds it exactly (integers up to 2^53 in magnitude, finite floats), else
    /// PostgreSQL's text as a string (larger bigint/numeric sums, fractions of numeric,
    /// NaN, Infinity, text, dates), null for NULL; "text" is what psql prints (an empty
    /// string for NULL)
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    settings: SettingsArgs,
}

/// Whether a cluster has checksums, and its transaction status files.
pub(crate) type ClusterFilesFacts = (
    bool,
    Option<std::sync::Arc<pageio::visibility::TransactionLog>>,
);

/// What relation files of the cluster at `pgdata` are read with: whether it has checksums
/// (assumed on when `pg_control` cannot be read, so a damaged page is never believed) and
/// its transaction status files for tuples whose hint bits do not decide. A cluster that
/// `pg_control` says is running or crashed is refused: its pages and status files are not
/// final. Without a readable `pg_control` the files are judged by hint bits alone, and a
/// tuple they do not decide is an error.
pub(crate) fn cluster_files_facts(
    pgdata: &std::path::Path,
) -> Result<ClusterFilesFacts, Box<dyn std::error::Error>> {
    match pageio::page::control::ControlFile::read(pgdata) {
        Ok(c) => {
            let log = pageio::catalog::cluster_transaction_log(pgdata)?;
            Ok((c.data_checksum_version != 0, Some(log)))
        }
        Err(_) => Ok((true, None)),
    }
}

fn parse_column(s: &str) -> Result<ColumnType, String> {
    Ok(match s.trim().to_ascii_lowercase().as_str() {
        "float8" | "double precision" | "double" => ColumnType::Float8,
        "float4" | "real" => ColumnType::Float4,
        "int8" | "bigint" => ColumnType::Int8,
        "int4" | "integer" | "int" => ColumnType::Int4,
        "int2" | "smallint" => ColumnType::Int2,
        "bool" | "boolean" => ColumnType::Bool,
        "oid" => ColumnType::Oid,
        "text" | "varchar" | "bytea" | "bpchar" | "char" => ColumnType::Text,
        other => {
            return Err(format!(
                "unknown column type \"{other}\": expected float8, float4, int8, int4, int2, bool, oid or text"
            ))
        }
    })
}

/// The table to scan, whether its cluster has checksums, its label and its key column.
struct Resolved {
    table: Table,
    checksums: bool,
    label: String,
    key_column: String,
}

/// The command that (re)generates a data set into `data_dir`, with `--force` when the
/// directory already holds files (gen refuses a non-empty directory without it).
fn gen_command(name: &str, data_dir: &std::path::Path, rows_seed: Option<(u64, u64)>) -> String {
    let dir = data_dir.join(name);
    let names = pageio::storage::dir_entry_names(&dir);
    let non_empty = !names.is_empty();
    let mut cmd = String::new();
    if names.iter().any(|n| !pageio::gen::is_generator_file(n)) {
        // gen --force replaces only generator files; anything else must go first.
        cmd.push_str(&format!(
            "move the files gen did not write out of {}, then run ",
            dir.display()
        ));
    }
    cmd.push_str(&format!("pageio gen --dataset {name}"));
    if let Some((rows, seed)) = rows_seed {
        cmd.push_str(&format!(" --rows {rows} --seed {seed}"));
    }
    cmd.push_str(&format!(
        " --out {}",
        shell_quote(&data_dir.display().to_string())
    ));
    if non_empty {
        cmd.push_str(" --force");
    }
    cmd
}

/// Quotes a path for a shell when it needs it.
fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:,@".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

fn resolve_table(args: &ScanArgs) -> Result<Resolved, Box<dyn std::error::Error>> {
    let explicit: Vec<ColumnType> = args
        .columns
        .iter()
        .map(|c| parse_column(c))
        .collect::<Result<_, _>>()?;
    if let Some(pgdata) = &args.pgdata {
        let heap = args
            .heap
            .as_deref()
            .ok_or("--pgdata needs --heap (the heap's file, e.g. base/5/16384)")?;
        let (checksums, transactions) = cluster_files_facts(pgdata)?;
        let columns = if explicit.is_empty() {
            vec![ColumnType::Float8, ColumnType::Text]
        } else {
            explicit
        };
        // Relation paths must lead to regular files inside PGDATA (or a tablespace linked
        // from pg_tblspc) holding the right kind of relation.
        // Once checked, the relations are named in messages as PostgreSQL names them:
        // relative to the data directory (`base/5/16384`).
        resolve_relation_path(pgdata, heap, RelationKind::Heap)
            .map_err(|e| format!("--heap: {e}"))?;
        let index = match args.index.as_deref() {
            Some(i) => {
                resolve_relation_path(pgdata, i, RelationKind::Btree)
                    .map_err(|e| format!("--index: {e}"))?;
                Some(RelFile::in_data_dir(pgdata, i, ForkNumber::Main))
            }
            None => None,
        };
        return Ok(Resolved {
            table: Table {
                heap: RelFile::in_data_dir(pgdata, heap, ForkNumber::Main),
                index,
                columns,
                transactions,
            },
            checksums,
            label: heap.to_string(),
            key_column: args.key_column.clone().unwrap_or_else(|| "a".into()),
        });
    }
    let name = args.dataset.as_deref().ok_or(
        "say what to scan: --pgdata DIR --heap PATH, or --dataset NAME (from `pageio gen`)",
    )?;
    let dir = args.data_dir.join(name);
    let manifest = pageio::gen::Manifest::load(&dir).map_err(|e| {
        format!(
            "{e}; generate the data set first: {}",
            gen_command(name, &args.data_dir, None)
        )
    })?;
    // The files must be the ones the manifest describes: a truncated or partly rewritten
    // data set would otherwise scan to a plausible wrong answer.
    manifest.check_files(&dir).map_err(|e| {
        format!(
            "{e}: {}",
            gen_command(name, &args.data_dir, Some((manifest.rows, manifest.seed)))
        )
    })?;
    let columns = if explicit.is_empty() {
        manifest
            .columns
            .iter()
            .map(|(_, t)| parse_column(t))
            .collect::<Result<_, _>>()?
    } else {
        explicit
    };
    let key_column = manifest
        .columns
        .first()
        .map(|(n, _)| n.clone())
        .unwrap_or_else(|| "a".into());
    if let Some(k) = &args.key_column {
        if !k.eq_ignore_ascii_case(&key_column) {
            return Err(format!(
                "--key-column {k}: the first column of data set {name} is \"{key_column}\""
            )
            .into());
        }
    }
    Ok(Resolved {
        table: Table {
            heap: manifest.heap_file(&dir),
            index: Some(manifest.index_file(&dir)),
            columns,
            // A generated data set's tuples are all hinted committed: no status files.
            transactions: None,
        },
        checksums: manifest.data_checksums,
        label: name.to_string(),
        key_column,
    })
}

fn drop_caches() -> Result<(), Box<dyn std::error::Error>> {
    pageio::storage::page_cache::drop_page_cache().map_err(|e| {
        format!("--drop-caches: {e}; run without --drop-caches to evict only the relation's files")
            .into()
    })
}

/// Evicts a relation's segments from the page cache.
pub fn evict(rel: &RelFile) -> Result<(), Box<dyn std::error::Error>> {
    rel.evict_from_page_cache()?;
    Ok(())
}

/// Runs the subcommand.
pub fn run(mut args: ScanArgs) -> CliResult {
    let wants_cluster = args.table.is_some() || args.heap.is_some() || args.index.is_some();
    // $PGDATA counts only when no data set was named.
    if let Some(dir) = args.location.checked(args.dataset.is_none())? {
        args.pgdata = Some(dir.path);
    } else if wants_cluster {
        return Err(format!(
            "--table, --heap and --index read a cluster: {}",
            crate::datadir::DataDirError::Missing.line()
        )
        .into());
    }
    if args.table.is_some() {
        return run_table(args);
    }
    let kind: ScanKind = args.kind.parse()?;
    let settings = args.settings.build()?;
    let config = pageio::scan::scan_config(settings.config().clone(), kind, |name| {
        settings.is_set(name)
    });

    let policy = parse_policy(&args.distance_policy)?;
    let Resolved {
        table,
        checksums: cluster_checksums,
        label,
        key_column,
    } = resolve_table(&args)?;
    if kind != ScanKind::Seq && table.index.is_none() {
        return Err(format!(
            "a {kind} scan needs the table's index: pass --index (the btree on the first column)"
        )
        .into());
    }
    let predicate = match &args.predicate {
        Some(p) => Between::parse_on(p, &key_column).map_err(|e| {
            if args.pgdata.is_some()
                && args.key_column.is_none()
                && e.starts_with("the predicate is on column")
            {
                format!("{e} (name the table's first column with --key-column)")
            } else {
                e
            }
        })?,
        None => Between::ALL,
    };
    let parallel_workers = parallel_workers(kind, args.parallel)?;
    let checksums = match args.checksums.as_str() {
        "auto" => cluster_checksums,
        v => pageio::config::parse_bool("checksums", v)?,
    };
    let aio = Aio::new(config)?;
    if let Some(reason) = aio.fallback_reason() {
        eprintln!("pageio: {reason}");
    }
    if args.cold {
        evict(&table.heap)?;
        if let Some(i) = &table.index {
            evict(i)?;
        }
        if args.drop_caches {
            drop_caches()?;
        }
    }
    let pool = BufferPool::new(
        &aio,
        PageCheckOptions {
            checksums,
            zero_damaged_pages: args.zero_damaged_pages,
            ignore_checksum_failure: args.ignore_checksum_failure,
        },
    )?;
    let result = run_scan(
        &pool,
        &table,
        &ScanOptions {
            kind,
            predicate,
            policy,
            stream_order: None,
            parallel_workers,
        },
    )?;
    // One line per page read past, as PostgreSQL's WARNING; on stderr so --json stays clean.
    for page in &result.damaged_pages {
        eprintln!("WARNING:  {page}");
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json_report(
                &aio, &pool, &label, kind, &predicate, checksums, args.cold, &result
            ))?
        );
    } else {
        let filter = args
            .predicate
            .is_some()
            .then_some((key_column.as_str(), &predicate));
        print_text(&aio, &pool, &label, kind, filter, &result);
    }
    Ok(0)
}

fn parse_policy(s: &str) -> Result<DistancePolicy, String> {
    match s.to_ascii_lowercase().as_str() {
        "adaptive" | "pg19" => Ok(DistancePolicy::Adaptive),
        "pg18" => Ok(DistancePolicy::Pg18),
        other => Err(format!(
            "unknown --distance-policy \"{other}\": expected adaptive or pg18"
        )),
    }
}

/// `--table`: the relation, its columns and indexes from the catalog; the aggregates of
/// `--select` over the rows `--where` keeps.
/// Threads for the scan from `--jobs` (or its old name `--parallel`): the default for seq scans, refused above 1 for
/// the others.
fn parallel_workers(kind: ScanKind, parallel: Option<u16>) -> Result<usize, String> {
    Ok(match (kind, parallel) {
        (ScanKind::Seq, Some(n)) => usize::from(n).max(1),
        (ScanKind::Seq, None) => pageio::scan::default_parallel_workers(),
        (_, Some(n)) if n > 1 => {
            return Err(format!(
                "--jobs {n}: only seq scans run in parallel ({} {kind} scan reads the pages its index names, in one stream); drop --jobs or use --kind seq",
                if kind == ScanKind::Index { "an" } else { "a" }
            ))
        }
        _ => 1,
    })
}

fn run_table(args: ScanArgs) -> CliResult {
    let kind: ScanKind = args.kind.parse()?;
    let settings = args.settings.build()?;
    let config = pageio::scan::scan_config(settings.config().clone(), kind, |name| {
        settings.is_set(name)
    });
    let policy = parse_policy(&args.distance_policy)?;
    let pgdata = args.pgdata.clone().ok_or("--table needs --pgdata")?;
    let spec = args.table.clone().unwrap_or_default();
    let aio = Aio::new(config)?;
    if let Some(reason) = aio.fallback_reason() {
        eprintln!("pageio: {reason}");
    }
    // The catalog is read with the cluster's own checks, never past a damaged page; the
    // table itself with what the flags ask, through a pool of its own.
    let (relation, cluster_checks) = {
        let catalog = Catalog::open_cluster(&pgdata, &aio)?;
        match catalog.resolve(&spec, &args.database) {
            Ok(r) => (r, catalog.check_options()),
            Err(e @ CatalogError::NoRelation { .. }) => {
                return Err(no_relation_hint(&catalog, &e, &pgdata).into())
            }
            Err(e) => return Err(e.into()),
        }
    };
    let parallel_workers = parallel_workers(kind, args.parallel)?;
    let mut query = TableQuery::plan(
        &pgdata,
        &relation,
        &QuerySpec {
            select: &args.select,
            predicate: args.predicate.as_deref(),
            kind,
            index: args.index.as_deref(),
        },
    )?;
    query.parallel_workers = parallel_workers;
    let checksums = match args.checksums.as_str() {
        "auto" => cluster_checks.checksums,
        v => pageio::config::parse_bool("checksums", v)?,
    };
    if args.cold {
        evict(&query.table.heap)?;
        if let Some(i) = &query.table.index {
            evict(i)?;
        }
        if let Some(t) = relation.toast.as_ref().and_then(|t| t.path.as_deref()) {
            evict(&RelFile::in_data_dir(&pgdata, t, ForkNumber::Main))?;
        }
        if args.drop_caches {
            drop_caches()?;
        }
    }
    let pool = BufferPool::new(
        &aio,
        PageCheckOptions {
            checksums,
            zero_damaged_pages: args.zero_damaged_pages,
            ignore_checksum_failure: args.ignore_checksum_failure,
        },
    )?;
    for w in query.warnings() {
        eprintln!("WARNING:  {w}");
    }
    let result = run_table_query(&pool, &query, policy)?;
    for page in &result.scan.damaged_pages {
        eprintln!("WARNING:  {page}");
    }
    let label = format!("{}.{}", relation.database, query.table_name);
    if args.json {
        let mut report = json_report(
            &aio,
            &pool,
            &label,
            kind,
            &Between::ALL,
            checksums,
            args.cold,
            &result.scan,
        );
        if let Some(object) = report.as_object_mut() {
            object.remove("lo");
            object.remove("hi");
            object.remove("sum_octet_length");
            object.insert("database".into(), relation.database.clone().into());
            object.insert("table".into(), query.table_name.clone().into());
            object.insert(
                "path".into(),
                query.table.heap.display_name().to_string().into(),
            );
            object.insert("where".into(), args.predicate.clone().into());
            object.insert("index".into(), query.index_name.clone().into());
            object.insert("warnings".into(), query.warnings().to_vec().into());
            object.insert(
                "aggregates".into(),
                result
                    .aggregates
                    .iter()
                    .map(|a| {
                        serde_json::json!({
                            "expr": a.expr,
                            "type": a.type_name,
                            "value": a.json_value(),
                            "text": a.text(),
                        })
                    })
                    .collect::<Vec<_>>()
                    .into(),
            );
        }
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let node = match kind {
            ScanKind::Seq => "Seq Scan".to_string(),
            ScanKind::Bitmap => format!(
                "Bitmap Heap Scan (index {})",
                query.index_name.as_deref().unwrap_or("?")
            ),
            ScanKind::Index => format!(
                "Index Scan using {}",
                query.index_name.as_deref().unwrap_or("?")
            ),
        };
        let r = &result.scan;
        println!(
            "{node} on {label}  (actual time={:.3} ms rows={})",
            r.elapsed_s * 1e3,
            r.rows
        );
        if let Some(p) = &args.predicate {
            match kind {
                ScanKind::Seq => println!("  Filter: ({p})"),
                _ => println!("  Index Cond: ({p})  (index pages read={})", r.index_pages),
            }
        }
        print_buffers_and_io(r);
        // One line per aggregate, as psql's expanded display prints a row.
        let width = result
            .aggregates
            .iter()
            .map(|a| a.expr.len())
            .max()
            .unwrap_or(0);
        for a in &result.aggregates {
            println!("{:width$} | {}", a.expr, a.text());
        }
    }
    Ok(0)
}

/// Most table names an unknown-table error lists; `pageio tables` lists them all.
const TABLES_LISTED_MAX: usize = 20;

/// An unknown table's error, with the tables the database has and the command that lists
/// them all.
fn no_relation_hint(catalog: &Catalog<'_>, e: &CatalogError, pgdata: &std::path::Path) -> String {
    let CatalogError::NoRelation { database, .. } = e else {
        return e.to_string();
    };
    let names: Vec<String> = catalog
        .database(database)
        .and_then(|db| db.tables())
        .map(|t| t.iter().map(|r| r.qualified_name()).collect())
        .unwrap_or_default();
    let shown = names
        .iter()
        .take(TABLES_LISTED_MAX)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    let more = names.len().saturating_sub(TABLES_LISTED_MAX);
    format!(
        "{e} (its tables: {}{}); `pageio tables --pgdata {} --database {database}` lists them",
        if names.is_empty() {
            "none".into()
        } else {
            shown
        },
        if more > 0 {
            format!(", and {more} more")
        } else {
            String::new()
        },
        shell_quote(&pgdata.display().to_string())
    )
}

/// A bound in JSON: a number, or PostgreSQL's spelling for NaN and the infinities (JSON has
/// no such numbers).
fn json_float8(v: f64) -> serde_json::Value {
    if v.is_finite() {
        serde_json::json!(v)
    } else {
        serde_json::json!(float8_text(v).trim_matches('\''))
    }
}

#[allow(clippy::too_many_arguments)]
fn json_report(
    aio: &Aio,
    pool: &BufferPool,
    label: &str,
    kind: ScanKind,
    predicate: &Between,
    checksums: bool,
    cold: bool,
    r: &ScanResult,
) -> serde_json::Value {
    let c = aio.config();
    let bytes = (r.pool.reads + r.pool.hits + r.pages_in_place) * 8192;
    serde_json::json!({
        "relation": label,
        "scan": kind,
        "lo": json_float8(predicate.lo),
        "hi": json_float8(predicate.hi),
        "rows": r.rows,
        "sum_octet_length": r.sum_octet_length,
        "heap_pages": r.heap_pages,
        "index_pages": r.index_pages,
        "shared_hit": r.pool.hits,
        "shared_read": r.pool.reads,
        "pages_in_place": r.pages_in_place,
        "io_read_ms": r.io.io_ns as f64 / 1e6,
        "io_wait_ms": r.io.wait_ns as f64 / 1e6,
        "stream": r.stream,
        "pages_failed_verification": r.pages_failed_verification,
        "pages_zeroed": r.pool.pages_zeroed,
        "damaged_pages": r.damaged_pages,
        "parallel_workers": r.parallel_workers,
        "elapsed_ms": r.elapsed_s * 1e3,
        "mb_per_s": bytes as f64 / r.elapsed_s.max(1e-9) / 1e6,
        "io_method": aio.io_method(),
        "io_workers": c.io_workers,
        // The pool as the scan left it (worker method): its size and bounds.
        "io_worker_pool": aio.io_worker_pool(),
        "io_combine_limit_blocks": c.io_combine_limit_blocks,
        "effective_io_concurrency": c.effective_io_concurrency,
        "io_max_concurrency": c.io_max_concurrency,
        // Seq scans of buffered files: auto (measured) or not, how far ahead the kernel is
        // told what will be read while advising (0 under direct I/O, where nothing is
        // advised), the posix_fadvise calls made, and under auto the 32 MB stretches read
        // each way.
        "seq_read_ahead": if c.direct_io {
            "off"
        } else if c.seq_read_ahead_auto {
            "auto"
        } else if c.seq_read_ahead_blocks > 0 {
            "advise"
        } else {
            "kernel"
        },
        "seq_read_ahead_bytes": if c.direct_io { 0 } else { c.seq_read_ahead_blocks * 8192 },
        "read_ahead_advice": r.read_ahead_advice,
        "read_ahead_choice": read_ahead_json(&r.read_ahead),
        "seq_read_in_place": c.seq_read_in_place && !c.direct_io,
        // A serial scan's helper thread mapping cached windows ahead (auto, on, off), and
        // the pages it mapped before the scan reached them.
        "seq_map_ahead": c.seq_map_ahead,
        "pages_mapped_ahead": r.pages_mapped_ahead,
        "pages_verified_ahead": r.pages_verified_ahead,
        "direct_io": c.direct_io,
        "shared_buffers_bytes": c.shared_buffers_bytes,
        "huge_pages_in_use": pool.huge_pages_in_use(),
        "checksums": checksums,
        "cold": cold,
    })
}

/// A float8 as PostgreSQL prints it (`NaN`, `Infinity`, `-Infinity`, or the number).
fn float8_text(v: f64) -> String {
    if v.is_nan() {
        "'NaN'".into()
    } else if v.is_infinite() {
        if v > 0.0 { "'Infinity'" } else { "'-Infinity'" }.into()
    } else {
        v.to_string()
    }
}

fn print_text(
    aio: &Aio,
    pool: &BufferPool,
    label: &str,
    kind: ScanKind,
    filter: Option<(&str, &Between)>,
    r: &ScanResult,
) {
    let node = match kind {
        ScanKind::Seq if r.parallel_workers > 1 => "Parallel Seq Scan",
        ScanKind::Seq => "Seq Scan",
        ScanKind::Bitmap => "Bitmap Heap Scan",
        ScanKind::Index => "Index Scan",
    };
    let ms = r.elapsed_s * 1e3;
    println!(
        "{node} on {label}  (actual time={ms:.3} ms rows={})",
        r.rows
    );
    if r.parallel_workers > 1 {
        // PostgreSQL counts the workers beside the leader, which scans too.
        println!(
            "  Workers Launched: {} (and the leader: {} threads)",
            r.parallel_workers - 1,
            r.parallel_workers
        );
    }
    if let Some((column, predicate)) = filter {
        let cond = format!(
            "({column} >= {} AND {column} <= {})",
            float8_text(predicate.lo),
            float8_text(predicate.hi)
        );
        match kind {
            ScanKind::Seq => println!("  Filter: {cond}"),
            _ => println!("  Index Cond: {cond}  (index pages read={})", r.index_pages),
        }
    }
    print_buffers_and_io(r);
    let s = &r.stream;
    println!(
        "  Prefetch: distance avg={:.1} max={} capacity={}",
        s.distance_avg, s.distance_max, s.distance_capacity
    );
    println!(
        "  I/O: count={} avg size={:.1} blocks, stalls={} (in progress at stall avg={:.1}){}",
        s.ios,
        s.avg_io_blocks,
        s.stalls,
        s.avg_ios_in_progress_at_stall,
        if s.advice > 0 {
            format!(", fadvise={}", s.advice)
        } else {
            String::new()
        }
    );
    if r.pages_failed_verification > 0 {
        let zeroed = r.pool.pages_zeroed;
        let used = r.pages_failed_verification - zeroed;
        let what = match (zeroed, used) {
            (_, 0) => "zeroed".to_string(),
            (0, _) => "used anyway".to_string(),
            (z, u) => format!("{z} zeroed, {u} used anyway"),
        };
        println!(
            "  Pages failing verification: {} ({what})",
            r.pages_failed_verification
        );
    }
    let c = aio.config();
    let bytes = (r.pool.reads + r.pool.hits + r.pages_in_place) * 8192;
    println!(
        "Result: rows={} sum_octet_length={}",
        r.rows, r.sum_octet_length
    );
    println!(
        "Execution Time: {ms:.3} ms ({:.0} MB/s); io_method={}{}, {}, io_combine_limit={}kB, effective_io_concurrency={}, shared_buffers={}MB{}",
        bytes as f64 / r.elapsed_s.max(1e-9) / 1e6,
        aio.io_method(),
        worker_pool_text(aio),
        if c.direct_io { "direct" } else { "buffered" },
        c.io_combine_limit_blocks * 8,
        c.effective_io_concurrency,
        c.shared_buffers_bytes >> 20,
        if pool.huge_pages_in_use() { ", huge pages" } else { "" }
    );
}

/// The worker pool for the summary line: ` (io_workers=3)` for a fixed pool, or
/// ` (io workers: 5 of 2..8, adaptive)` — how many the scan left running.
fn worker_pool_text(aio: &Aio) -> String {
    match aio.io_worker_pool() {
        Some(p) if p.adaptive => format!(
            " (io workers: {} of {}..{}, adaptive)",
            p.workers, p.min_workers, p.max_workers
        ),
        Some(p) => format!(" (io_workers={})", p.workers),
        None => String::new(),
    }
}

/// The `Buffers:` and `I/O Timings:` lines of the text report, as EXPLAIN (ANALYZE, BUFFERS)
/// prints them.
fn print_buffers_and_io(r: &ScanResult) {
    // Pages read in place from the page cache (seq_read_in_place) went through no buffer.
    let in_place = if r.pages_mapped_ahead > 0 {
        format!(
            ", in place from the page cache={} (mapped ahead={}, verified ahead={})",
            r.pages_in_place, r.pages_mapped_ahead, r.pages_verified_ahead
        )
    } else if r.pages_in_place > 0 {
        format!(", in place from the page cache={}", r.pages_in_place)
    } else {
        String::new()
    };
    println!(
        "  Buffers: shared hit={} read={}{in_place}",
        r.pool.hits, r.pool.reads
    );
    println!(
        "  I/O Timings: read={:.3} wait={:.3}",
        r.io.io_ns as f64 / 1e6,
        r.io.wait_ns as f64 / 1e6
    );
    // The measured read-ahead (seq_read_ahead = auto) of a buffered seq scan.
    let ra = &r.read_ahead;
    if ra.stretches_advised + ra.stretches_kernel > 0 {
        let chosen = match ra.chosen {
            Some(pageio::stream::readahead::ReadAheadMode::Advise) => "advice",
            Some(pageio::stream::readahead::ReadAheadMode::Kernel) => "the kernel's",
            None => "none yet (the heap ended before the two ways were compared)",
        };
        println!(
            "  Read-ahead: auto, 32MB stretches advised={} kernel={}, chosen: {chosen}",
            ra.stretches_advised, ra.stretches_kernel
        );
    }
}

/// The measured read-ahead's account (`seq_read_ahead = auto`): stretches each way, the way
/// chosen, and the latest cost of each in nanoseconds per 8 kB block (wall, process CPU).
fn read_ahead_json(r: &pageio::stream::readahead::ReadAheadReport) -> serde_json::Value {
    use pageio::stream::readahead::ReadAheadMode;
    let cost = |c: Option<pageio::stream::readahead::StretchCost>| {
        c.map(|c| serde_json::json!({"wall_ns_per_block": c.wall * 1e9, "cpu_ns_per_block": c.cpu * 1e9}))
    };
    serde_json::json!({
        "stretches_advised": r.stretches_advised,
        "stretches_kernel": r.stretches_kernel,
        "chosen": r.chosen.map(|m| match m {
            ReadAheadMode::Advise => "advise",
            ReadAheadMode::Kernel => "kernel",
        }),
        "advised": cost(r.advised),
        "kernel": cost(r.kernel),
    })
}
