//! The records `pageio bench` reads and writes: one query plan, one row per timed run.
//!
//! The same [`RunRecord`] holds a pageio run and a PostgreSQL 18 run (written by
//! `bench/pg18-bench.py`), so both land in one table, one CSV and one chart. Queries are
//! matched across engines by `(dataset, scan, step)`: the driver takes its predicates from
//! `pageio bench --plan --json`, so step 7 of a sweep is the same `a BETWEEN lo AND hi` on
//! both sides.

use serde::{Deserialize, Serialize};

/// `effective_io_concurrency` both engines use unless told otherwise.
pub const DEFAULT_EIC: u32 = 16;

/// Cold (relation evicted from shared buffers and the page cache) or warm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Cache {
    /// Every page comes from the device.
    Cold,
    /// The previous run left the pages in shared buffers and the page cache.
    Warm,
}

impl Cache {
    /// `cold` or `warm`.
    pub fn as_str(self) -> &'static str {
        match self {
            Cache::Cold => "cold",
            Cache::Warm => "warm",
        }
    }
}

/// One query of the sweep: a scan type and a predicate `a BETWEEN lo AND hi`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedQuery {
    /// Data set (table) name.
    pub dataset: String,
    /// `seq`, `bitmap` or `index`.
    pub scan: String,
    /// Position in the full sweep (0 = one row); the same step means the same predicate.
    pub step: u32,
    /// Rows the predicate is sized to match (exact for uniform and linear in expectation).
    pub target_rows: u64,
    /// `target_rows / table_rows`.
    pub selectivity: f64,
    /// Lower bound of `a`.
    pub lo: f64,
    /// Upper bound of `a`.
    pub hi: f64,
}

/// The whole plan, as `pageio bench --plan --json` prints it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Plan {
    /// Rows of each benchmark table.
    pub table_rows: u64,
    /// Seed of the predicate positions.
    pub seed: u64,
    /// `true` for the `--quick` subset.
    pub quick: bool,
    /// Every query, in run order.
    pub queries: Vec<PlannedQuery>,
}

/// One timed execution of one query under one configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRecord {
    /// `pageio` or `postgresql`.
    pub engine: String,
    /// `pageio 0.1.0`, `PostgreSQL 18.1`, …
    pub version: String,
    /// Data set (table) name.
    pub dataset: String,
    /// Rows in the table.
    pub table_rows: u64,
    /// Heap pages in the table.
    pub table_pages: u64,
    /// `seq`, `bitmap` or `index`.
    pub scan: String,
    /// Step of the sweep (see [`PlannedQuery::step`]).
    pub step: u32,
    /// Rows the predicate was sized to match.
    pub target_rows: u64,
    /// `target_rows / table_rows`.
    pub selectivity: f64,
    /// Lower bound of `a`.
    pub lo: f64,
    /// Upper bound of `a`.
    pub hi: f64,
    /// `sync`, `worker` or `io_uring`.
    pub io_method: String,
    /// I/O worker count under `worker`.
    pub io_workers: Option<u32>,
    /// Buffered (`false`) or O_DIRECT (`true`).
    pub direct_io: bool,
    /// Cold or warm.
    pub cache: Cache,
    /// 1-based repeat number.
    pub repeat: u32,
    /// Rows the query returned (`count(*)`).
    pub rows: u64,
    /// Execution time in seconds (PostgreSQL: EXPLAIN ANALYZE's Execution Time).
    pub seconds: f64,
    /// Shared buffers hit.
    pub shared_hit: u64,
    /// Shared buffers read.
    pub shared_read: u64,
    /// Time spent waiting for reads, when the engine reports it (seconds).
    pub io_wait_seconds: Option<f64>,
    /// Read I/Os issued for the heap and index, when the engine reports them (after
    /// combining neighbouring blocks).
    #[serde(default)]
    pub ios: Option<u64>,
    /// `effective_io_concurrency`.
    pub effective_io_concurrency: u32,
    /// `io_combine_limit` in kB.
    pub io_combine_limit_kb: u32,
    /// `shared_buffers` in MB.
    pub shared_buffers_mb: u64,
    /// The device's shortest possible time for this query's reads (see `device`), filled in
    /// by the report.
    #[serde(default)]
    pub device_seconds: Option<f64>,
    /// `device_seconds / seconds`: 1.0 means the query ran at the device limit.
    #[serde(default)]
    pub vs_device: Option<f64>,
}

impl RunRecord {
    /// The method as the charts and tables name it: `sync`, `worker(3)`, `io_uring`.
    pub fn method_label(&self) -> String {
        match (self.io_method.as_str(), self.io_workers) {
            ("worker", Some(0)) => "worker(adaptive)".to_string(),
            ("worker", Some(n)) => format!("worker({n})"),
            (m, _) => m.to_string(),
        }
    }

    /// The series a run belongs to: engine, method and I/O mode
    /// (`pageio io_uring direct`, `postgresql worker(3) buffered`).
    ///
    /// A prefetch window other than the default of both engines (16) is part of the name
    /// (`pageio io_uring buffered eic=1`), so window experiments get their own lines.
    pub fn series(&self) -> String {
        let mut s = format!(
            "{} {} {}",
            self.engine,
            self.method_label(),
            if self.direct_io { "direct" } else { "buffered" }
        );
        if self.effective_io_concurrency != DEFAULT_EIC {
            s.push_str(&format!(" eic={}", self.effective_io_concurrency));
        }
        s
    }
}
