//! Runs the plan on pageio: every method × I/O mode × query × cache state × repeat.
//!
//! # Problem
//!
//! A benchmark matrix is only worth its cells if each cell measures what its name says:
//! "cold" must find nothing in shared buffers or the page cache, "warm" must find what the
//! previous run of the same query left, and a method the kernel refuses must be reported as
//! skipped with the reason, not silently replaced by another.
//!
//! # Mechanism
//!
//! ```text
//!  for table, method, mode:                   Aio::new (io_uring refused → skip + reason)
//!    for query:
//!      cold × repeats:  evict files (fadvise DONTNEED), drop caches if root,
//!                       fresh BufferPool ─► run_scan ─► record
//!      warm:            fresh BufferPool ─► run_scan (untimed) ─► run_scan × repeats
//! ```
//!
//! The method is forced (`auto` is never used): a refused method is a result too.
//!
//! # Worked example
//!
//! `--methods sync,worker:3,io_uring --io buffered --cache cold --repeats 3` on one table
//! with 16 queries makes 3 · 1 · 16 · 3 = 144 timed scans, each after an eviction.

use indicatif::{ProgressBar, ProgressStyle};
use pageio::buffer::{BufferPool, PageCheckOptions};
use pageio::scan::{run_scan, Between, ScanKind, ScanOptions, ScanResult, Table};
use pageio::storage::StorageError;
use pageio::stream::DistancePolicy;
use pageio::{Aio, IoConfig, IoMethodKind};

use super::record::{Cache, PlannedQuery, RunRecord};

/// A table to run the plan on.
#[derive(Debug, Clone)]
pub struct Target {
    /// Data set name (matches [`PlannedQuery::dataset`]).
    pub dataset: String,
    /// The relations.
    pub table: Table,
    /// Rows in the table.
    pub rows: u64,
    /// Heap pages.
    pub heap_pages: u64,
    /// Verify checksums while reading.
    pub checksums: bool,
    /// The smallest and largest key of a table read through the catalog: its queries were
    /// moved onto this range and its records carry the share of rows each really returned
    /// (`None`: a generated data set, or PostgreSQL's files of one, whose keys span the
    /// plan's range and whose records carry the planned share, as PostgreSQL's do).
    pub key_range: Option<(f64, f64)>,
}

/// An io_method with its worker count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MethodSpec {
    /// The method.
    pub method: IoMethodKind,
    /// Workers under `worker`: a fixed pool of this many, or
    /// [`pageio::config::IO_WORKERS_ADAPTIVE`] (0) for the adaptive pool.
    pub workers: usize,
}

impl MethodSpec {
    /// Parses `sync`, `worker`, `worker:N`, `worker:cores`, `worker:adaptive` or `io_uring`.
    pub fn parse(text: &str) -> Result<MethodSpec, String> {
        let spec = text.trim().to_ascii_lowercase();
        let (name, arg) = match spec.split_once([':', '=', '×', 'x']) {
            Some((name, count)) if name == "worker" => (name.to_string(), Some(count.to_string())),
            _ => (spec.clone(), None),
        };
        let method = match name.as_str() {
            "sync" => IoMethodKind::Sync,
            "worker" => IoMethodKind::Worker,
            "io_uring" | "uring" => IoMethodKind::IoUring,
            _ => {
                return Err(format!(
                    "unknown method \"{spec}\" in --methods: expected sync, worker:N, worker:cores, worker:adaptive or io_uring"
                ))
            }
        };
        let workers = match arg.as_deref() {
            None => 3,
            Some("cores") => std::thread::available_parallelism().map_or(1, |n| n.get()),
            Some("adaptive") => pageio::config::IO_WORKERS_ADAPTIVE,
            Some(n) => match n.parse::<usize>() {
                Ok(n) if (1..=128).contains(&n) => n,
                _ => {
                    return Err(format!(
                        "\"{spec}\" in --methods: the worker count must be 1…128, \"cores\" or \"adaptive\""
                    ))
                }
            },
        };
        Ok(MethodSpec { method, workers })
    }

    /// `sync`, `worker(3)`, `worker(adaptive)`, `io_uring`.
    pub fn label(&self) -> String {
        match self.method {
            IoMethodKind::Worker if self.workers == pageio::config::IO_WORKERS_ADAPTIVE => {
                "worker(adaptive)".to_string()
            }
            IoMethodKind::Worker => format!("worker({})", self.workers),
            m => m.as_str().to_string(),
        }
    }
}

/// Everything a run needs besides the queries.
pub struct RunContext<'a> {
    /// Base settings (from flags and --config); method, workers and direct I/O are set per cell.
    pub base: IoConfig,
    /// Methods.
    pub methods: &'a [MethodSpec],
    /// `false` = buffered, `true` = direct.
    pub modes: &'a [bool],
    /// Cache states.
    pub caches: &'a [Cache],
    /// Timed runs per cell.
    pub repeats: u32,
    /// Drop the whole page cache before cold runs (root only).
    pub drop_caches: bool,
    /// Progress bar (hidden when not wanted).
    pub progress: ProgressBar,
}

/// A cell that could not run, and why.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Skipped {
    /// `io_uring direct`, …
    pub cell: String,
    /// The engine's message.
    pub reason: String,
}

/// Runs (timed, plus the untimed warm-up of warm cells) one query makes in one cell.
fn runs_per_query(ctx: &RunContext<'_>) -> u64 {
    ctx.caches
        .iter()
        .map(|c| match c {
            Cache::Cold => u64::from(ctx.repeats),
            Cache::Warm => u64::from(ctx.repeats) + 1,
        })
        .sum()
}

/// Runs a plan of `queries` queries makes (for the progress bar).
pub fn count_runs(queries: usize, ctx: &RunContext<'_>) -> u64 {
    queries as u64 * ctx.methods.len() as u64 * ctx.modes.len() as u64 * runs_per_query(ctx)
}

/// The progress bar style: position, ETA and the current cell.
pub fn progress_bar(total: u64, hidden: bool) -> ProgressBar {
    if hidden {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {pos}/{len} runs, ETA {eta}  {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar
}

/// Empties the caches before a cold run: the tables' files always, the whole page cache
/// when `drop_caches` (root). Both through the storage layer, as every cold run does.
fn evict(target: &Target, drop_caches: bool) -> Result<(), Box<dyn std::error::Error>> {
    target.table.heap.evict_from_page_cache()?;
    if let Some(index) = &target.table.index {
        index.evict_from_page_cache()?;
    }
    if drop_caches {
        pageio::storage::page_cache::drop_page_cache()?;
    }
    Ok(())
}

/// Whether the table's file system accepts O_DIRECT (ramfs, for one, does not), asked of
/// the storage layer exactly as the engine will open the file: the message names the file,
/// the cause and the fix.
fn direct_io_refusal(target: &Target) -> Result<(), String> {
    let path = target.table.heap.segment_path(0);
    match pageio::storage::check_direct_io(&path) {
        Ok(_) => Ok(()),
        Err(StorageError::DirectIoUnsupported { source, .. }) => Err(format!(
            "\"{}\" cannot be opened with O_DIRECT ({source}): its file system does not support direct I/O; put the data on a disk-backed file system (--data-dir) or leave direct out (--io buffered)",
            path.display()
        )),
        Err(other) => Err(other.to_string()),
    }
}

/// One cell of the matrix on one table: a method, an I/O mode, and the engine started
/// with them.
struct Cell<'a> {
    target: &'a Target,
    spec: MethodSpec,
    direct: bool,
    aio: Aio,
    check: PageCheckOptions,
}

/// Runs every query of `queries` (already filtered to `target`) in every cell.
pub fn run_target(
    target: &Target,
    queries: &[&PlannedQuery],
    ctx: &RunContext<'_>,
    out: &mut Vec<RunRecord>,
    skipped: &mut Vec<Skipped>,
) -> Result<(), Box<dyn std::error::Error>> {
    let check = PageCheckOptions {
        checksums: target.checksums,
        zero_damaged_pages: false,
        ignore_checksum_failure: false,
    };
    for &spec in ctx.methods {
        for &direct in ctx.modes {
            let mode = if direct { "direct" } else { "buffered" };
            let name = format!("{} {} {mode}", target.dataset, spec.label());
            match start_cell(target, spec, direct, ctx) {
                Ok(aio) => {
                    let cell = Cell {
                        target,
                        spec,
                        direct,
                        aio,
                        check,
                    };
                    for query in queries {
                        run_query(&cell, &name, query, ctx, out)?;
                    }
                }
                // A cell the file system or the kernel refuses is a result too: reported
                // with the reason, never replaced by another method or mode.
                Err(reason) => {
                    ctx.progress
                        .suspend(|| eprintln!("pageio bench: skipping {name}: {reason}"));
                    skipped.push(Skipped { cell: name, reason });
                    ctx.progress.inc(runs_per_query(ctx) * queries.len() as u64);
                }
            }
        }
    }
    Ok(())
}

/// Starts the engine for one cell with the method forced (never `auto`), or says why the
/// cell cannot run: a file system without O_DIRECT, a refused io_uring.
fn start_cell(
    target: &Target,
    spec: MethodSpec,
    direct: bool,
    ctx: &RunContext<'_>,
) -> Result<Aio, String> {
    if direct {
        direct_io_refusal(target)?;
    }
    let mut config = ctx.base.clone();
    config.io_method = spec.method;
    config.io_workers = spec.workers;
    config.direct_io = direct;
    Aio::new(config).map_err(|e| e.to_string())
}

/// Runs one query in one cell: cold runs each on an emptied cache and a fresh pool, warm
/// runs on one pool after an untimed run that fills it.
fn run_query(
    cell: &Cell<'_>,
    cell_name: &str,
    query: &PlannedQuery,
    ctx: &RunContext<'_>,
    out: &mut Vec<RunRecord>,
) -> Result<(), Box<dyn std::error::Error>> {
    let options = ScanOptions {
        kind: query.scan.parse::<ScanKind>()?,
        predicate: Between {
            lo: query.lo,
            hi: query.hi,
        },
        policy: DistancePolicy::Adaptive,
        stream_order: None,
        parallel_workers: 1,
    };
    ctx.progress.set_message(format!(
        "{cell_name}, {} {:.4}%",
        query.scan,
        query.selectivity * 100.0
    ));
    let table = &cell.target.table;
    for &cache in ctx.caches {
        match cache {
            Cache::Cold => {
                for repeat in 1..=ctx.repeats {
                    evict(cell.target, ctx.drop_caches)?;
                    let pool = BufferPool::new(&cell.aio, cell.check)?;
                    let result = run_scan(&pool, table, &options)?;
                    out.push(record_of(cell, query, cache, repeat, &result));
                    ctx.progress.inc(1);
                }
            }
            Cache::Warm => {
                let pool = BufferPool::new(&cell.aio, cell.check)?;
                run_scan(&pool, table, &options)?;
                ctx.progress.inc(1);
                for repeat in 1..=ctx.repeats {
                    let result = run_scan(&pool, table, &options)?;
                    out.push(record_of(cell, query, cache, repeat, &result));
                    ctx.progress.inc(1);
                }
            }
        }
    }
    Ok(())
}

/// The record of one timed scan, with the settings it ran under.
fn record_of(
    cell: &Cell<'_>,
    query: &PlannedQuery,
    cache: Cache,
    repeat: u32,
    result: &ScanResult,
) -> RunRecord {
    let config = cell.aio.config();
    RunRecord {
        engine: "pageio".into(),
        version: format!("pageio {}", env!("CARGO_PKG_VERSION")),
        dataset: cell.target.dataset.clone(),
        table_rows: cell.target.rows,
        table_pages: cell.target.heap_pages,
        scan: query.scan.clone(),
        step: query.step,
        target_rows: query.target_rows,
        selectivity: match cell.target.key_range {
            Some(_) => result.rows as f64 / cell.target.rows.max(1) as f64,
            None => query.selectivity,
        },
        lo: query.lo,
        hi: query.hi,
        io_method: cell.spec.method.as_str().into(),
        io_workers: (cell.spec.method == IoMethodKind::Worker).then_some(cell.spec.workers as u32),
        direct_io: cell.direct,
        cache,
        repeat,
        rows: result.rows,
        seconds: result.elapsed_s,
        shared_hit: result.pool.hits,
        shared_read: result.pool.reads,
        io_wait_seconds: Some(result.io.wait_ns as f64 / 1e9),
        ios: Some(result.io.kernel_ios),
        effective_io_concurrency: config.effective_io_concurrency as u32,
        io_combine_limit_kb: (config.io_combine_limit_blocks * 8) as u32,
        shared_buffers_mb: (config.shared_buffers_bytes >> 20) as u64,
        device_seconds: None,
        vs_device: None,
    }
}
