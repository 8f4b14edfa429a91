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
use pageio::scan::{run_scan, Between, ScanKind, ScanOptions, Table};
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
}

/// An io_method with its worker count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MethodSpec {
    /// The method.
    pub method: IoMethodKind,
    /// Workers under `worker`.
    pub workers: usize,
}

impl MethodSpec {
    /// Parses `sync`, `worker`, `worker:N`, `worker:cores` or `io_uring`.
    pub fn parse(s: &str) -> Result<MethodSpec, String> {
        let s = s.trim().to_ascii_lowercase();
        let (name, arg) = match s.split_once([':', '=', '×', 'x']) {
            Some((n, a)) if n == "worker" => (n.to_string(), Some(a.to_string())),
            _ => (s.clone(), None),
        };
        let method = match name.as_str() {
            "sync" => IoMethodKind::Sync,
            "worker" => IoMethodKind::Worker,
            "io_uring" | "uring" => IoMethodKind::IoUring,
            _ => {
                return Err(format!(
                    "unknown method \"{s}\" in --methods: expected sync, worker:N, worker:cores or io_uring"
                ))
            }
        };
        let workers = match arg.as_deref() {
            None => 3,
            Some("cores") => std::thread::available_parallelism().map_or(1, |n| n.get()),
            Some(n) => match n.parse::<usize>() {
                Ok(n) if (1..=128).contains(&n) => n,
                _ => {
                    return Err(format!(
                        "\"{s}\" in --methods: the worker count must be 1…128 or \"cores\""
                    ))
                }
            },
        };
        Ok(MethodSpec { method, workers })
    }

    /// `sync`, `worker(3)`, `io_uring`.
    pub fn label(&self) -> String {
        match self.method {
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

/// Drops the page cache (root only): `sync; echo 3 > /proc/sys/vm/drop_caches`.
pub fn drop_page_cache() -> Result<(), String> {
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3")
        .map_err(|e| format!("could not write /proc/sys/vm/drop_caches: {e}"))
}

/// Is this process root?
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn evict(target: &Target, drop_caches: bool) -> Result<(), Box<dyn std::error::Error>> {
    target.table.heap.evict_from_page_cache()?;
    if let Some(i) = &target.table.index {
        i.evict_from_page_cache()?;
    }
    if drop_caches {
        drop_page_cache()?;
    }
    Ok(())
}

/// Whether the table's file system accepts O_DIRECT (tmpfs, for one, does not): the
/// message names the file, the cause and the fix.
fn direct_io_refusal(target: &Target) -> Result<(), String> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = target.table.heap.segment_path(0);
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path)
        .map(drop)
        .map_err(|e| {
            format!(
                "\"{}\" cannot be opened with O_DIRECT ({e}): its file system does not support direct I/O; put the data on a disk-backed file system (--data-dir) or leave direct out (--io buffered)",
                path.display()
            )
        })
}

/// Runs every query of `queries` (already filtered to `target`) in every cell.
pub fn run_target(
    target: &Target,
    queries: &[&PlannedQuery],
    ctx: &RunContext<'_>,
    out: &mut Vec<RunRecord>,
    skipped: &mut Vec<Skipped>,
) -> Result<(), Box<dyn std::error::Error>> {
    let version = format!("pageio {}", env!("CARGO_PKG_VERSION"));
    let check = PageCheckOptions {
        checksums: target.checksums,
        zero_damaged_pages: false,
        ignore_checksum_failure: false,
    };
    for spec in ctx.methods {
        for &direct in ctx.modes {
            let mode = if direct { "direct" } else { "buffered" };
            let cell = format!("{} {} {mode}", target.dataset, spec.label());
            if direct {
                if let Err(reason) = direct_io_refusal(target) {
                    ctx.progress
                        .suspend(|| eprintln!("pageio bench: skipping {cell}: {reason}"));
                    skipped.push(Skipped { cell, reason });
                    ctx.progress.inc(runs_per_query(ctx) * queries.len() as u64);
                    continue;
                }
            }
            let mut config = ctx.base.clone();
            config.io_method = spec.method;
            config.io_workers = spec.workers;
            config.direct_io = direct;
            let aio = match Aio::new(config.clone()) {
                Ok(a) => a,
                Err(e) => {
                    ctx.progress
                        .suspend(|| eprintln!("pageio bench: skipping {cell}: {e}"));
                    skipped.push(Skipped {
                        cell,
                        reason: e.to_string(),
                    });
                    ctx.progress.inc(runs_per_query(ctx) * queries.len() as u64);
                    continue;
                }
            };
            for q in queries {
                let kind: ScanKind = q.scan.parse()?;
                let options = ScanOptions {
                    kind,
                    predicate: Between { lo: q.lo, hi: q.hi },
                    policy: DistancePolicy::Adaptive,
                };
                ctx.progress.set_message(format!(
                    "{cell}, {} {:.4}%",
                    q.scan,
                    q.selectivity * 100.0
                ));
                let record = |cache: Cache, repeat: u32, r: &pageio::scan::ScanResult| RunRecord {
                    engine: "pageio".into(),
                    version: version.clone(),
                    dataset: target.dataset.clone(),
                    table_rows: target.rows,
                    table_pages: target.heap_pages,
                    scan: q.scan.clone(),
                    step: q.step,
                    target_rows: q.target_rows,
                    selectivity: q.selectivity,
                    lo: q.lo,
                    hi: q.hi,
                    io_method: spec.method.as_str().into(),
                    io_workers: (spec.method == IoMethodKind::Worker)
                        .then_some(spec.workers as u32),
                    direct_io: direct,
                    cache,
                    repeat,
                    rows: r.rows,
                    seconds: r.elapsed_s,
                    shared_hit: r.pool.hits,
                    shared_read: r.pool.reads,
                    io_wait_seconds: Some(r.io.wait_ns as f64 / 1e9),
                    ios: Some(r.io.kernel_ios),
                    effective_io_concurrency: config.effective_io_concurrency as u32,
                    io_combine_limit_kb: (config.io_combine_limit_blocks * 8) as u32,
                    shared_buffers_mb: (config.shared_buffers_bytes >> 20) as u64,
                    device_seconds: None,
                    vs_device: None,
                };
                for &cache in ctx.caches {
                    match cache {
                        Cache::Cold => {
                            for repeat in 1..=ctx.repeats {
                                evict(target, ctx.drop_caches)?;
                                let pool = BufferPool::new(&aio, check)?;
                                let r = run_scan(&pool, &target.table, &options)?;
                                out.push(record(cache, repeat, &r));
                                ctx.progress.inc(1);
                            }
                        }
                        Cache::Warm => {
                            let pool = BufferPool::new(&aio, check)?;
                            run_scan(&pool, &target.table, &options)?;
                            ctx.progress.inc(1);
                            for repeat in 1..=ctx.repeats {
                                let r = run_scan(&pool, &target.table, &options)?;
                                out.push(record(cache, repeat, &r));
                                ctx.progress.inc(1);
                            }
                        }
                    }
                }
            }
        }
    }
    Ok(())
}
