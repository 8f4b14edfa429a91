//! Shared helpers for integration tests: the real PostgreSQL 18 fixture (built by
//! `scripts/build-fixture.py`, see `fixture.rs`) and PostgreSQL's answers on it, page and
//! relation-file readers, the set-up of a scan (subsystem, checking pool, options), and a
//! watchdog for tests that could hang.
#![allow(dead_code)]

mod fixture;
mod watchdog;

use std::path::{Path, PathBuf};

use pageio::buffer::{BufferPool, PageCheckOptions};
use pageio::config::{IoConfig, IoMethodKind};
use pageio::scan::{run_scan, Between, ScanError, ScanKind, ScanOptions, ScanResult, Table};
use pageio::stream::DistancePolicy;
use pageio::Aio;
use tempfile::TempDir;

pub use fixture::FixtureFacts;
#[allow(unused_imports)] // each test file uses its own subset
pub use watchdog::with_watchdog;

/// The facts PostgreSQL gave about the fixture when it was built (`facts.json`, parsed once
/// per process; builds the fixture first if needed).
pub fn fixture_facts() -> &'static FixtureFacts {
    fixture::fixture_facts()
}

/// `SELECT count(*), sum(length(b)) FROM <table> WHERE a BETWEEN lo AND hi` as PostgreSQL 18
/// answers it on the fixture: (table, lo, hi, count, sum). The fixture's SQL seeds its random
/// numbers, so these never change; the builder fails if PostgreSQL computes anything else,
/// and [`assert_fixture_answers_are_postgres_answers`] checks that these constants are the
/// ones PostgreSQL gave for this build.
pub const FIXTURE_ANSWERS: [(&str, f64, f64, u64, u64); 12] = [
    ("uniform", 0.0, 1000.0, 20000, 1320000),
    ("uniform", 0.0, 10.0, 207, 13662),
    ("uniform", 100.0, 200.0, 1984, 130944),
    ("uniform", 250.0, 750.0, 9917, 654522),
    ("uniform", 500.0, 500.5, 14, 924),
    ("uniform", 990.0, 1000.0, 227, 14982),
    ("linear_10", 0.0, 1000.0, 19847, 1309902),
    ("linear_10", -100.0, 10.0, 226, 14916),
    ("linear_10", 100.0, 200.0, 2000, 132000),
    ("linear_10", 250.0, 750.0, 10018, 661188),
    ("linear_10", 500.0, 500.5, 7, 462),
    ("linear_10", 990.0, 1100.0, 212, 13992),
];

/// Asserts that [`FIXTURE_ANSWERS`] are the answers PostgreSQL gave when this build of the
/// fixture was made (`facts.json`).
pub fn assert_fixture_answers_are_postgres_answers() {
    let from_postgres: Vec<(&str, f64, f64, u64, u64)> = fixture_facts()
        .queries
        .iter()
        .map(|q| (q.table.as_str(), q.lo, q.hi, q.count, q.sum_length_b))
        .collect();
    assert_eq!(from_postgres, FIXTURE_ANSWERS);
}

/// Every scan kind, in the order the tests run them.
pub const SCAN_KINDS: [ScanKind; 3] = [ScanKind::Seq, ScanKind::Bitmap, ScanKind::Index];

/// A subsystem for `method`, every other setting at its default.
pub fn aio_for(method: IoMethodKind) -> Aio {
    Aio::new(IoConfig {
        io_method: method,
        ..IoConfig::default()
    })
    .unwrap_or_else(|e| panic!("{method}: {e}"))
}

/// A buffer pool on `aio` that verifies every page's checksum as it is read.
pub fn checksum_pool(aio: &Aio) -> BufferPool {
    BufferPool::new(
        aio,
        PageCheckOptions {
            checksums: true,
            ..PageCheckOptions::default()
        },
    )
    .unwrap()
}

/// A `kind` scan of `table` for `predicate` through `pool`, with the adaptive distance
/// policy (the default).
pub fn scan(
    pool: &BufferPool,
    table: &Table,
    kind: ScanKind,
    predicate: Between,
) -> Result<ScanResult, ScanError> {
    run_scan(
        pool,
        table,
        &ScanOptions {
            kind,
            predicate,
            policy: DistancePolicy::Adaptive,
            stream_order: None,
            parallel_workers: 1,
        },
    )
}

/// Copies the fixture data directory into a fresh temporary directory and returns the
/// directory guard (keep it alive) and the PGDATA path inside it. The first call in a process
/// builds the fixture if `target/fixtures/pg18-small` is missing or stale.
pub fn unpack_fixture() -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("create temp dir");
    let pgdata = fixture::copy_fixture_into(dir.path());
    (dir, pgdata)
}

/// Reads a whole relation segment file and splits it into pages.
pub fn read_pages(path: &Path) -> Vec<[u8; 8192]> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    assert_eq!(
        bytes.len() % 8192,
        0,
        "{} is not whole pages",
        path.display()
    );
    bytes
        .chunks_exact(8192)
        .map(|c| c.try_into().unwrap())
        .collect()
}

/// If `name` is a relation segment file name (`16384`, `16384_fsm`, `1259_vm.1`, …),
/// returns its segment number.
pub fn relation_segment(name: &str) -> Option<u32> {
    let (stem, segment) = match name.split_once('.') {
        Some((stem, seg)) => (stem, seg.parse::<u32>().ok()?),
        None => (name, 0),
    };
    let digits = match stem.split_once('_') {
        Some((digits, "fsm" | "vm" | "init")) => digits,
        Some(_) => return None,
        None => stem,
    };
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())).then_some(segment)
}

/// All relation segment files under `base/*/` and `global/`, with segment numbers.
pub fn relation_files(pgdata: &Path) -> Vec<(PathBuf, u32)> {
    let mut dirs = vec![pgdata.join("global")];
    for entry in std::fs::read_dir(pgdata.join("base")).unwrap() {
        dirs.push(entry.unwrap().path());
    }
    let mut files = Vec::new();
    for dir in dirs {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if let Some(segment) = relation_segment(&name) {
                files.push((path, segment));
            }
        }
    }
    files.sort();
    files
}

/// Blocks per 1 GB segment file.
pub const RELSEG_SIZE_BLOCKS: u32 = 131072;

/// Runs one conformance case for `method` under the watchdog (`secs`), named
/// `method:name`, so a hang fails the test instead of the suite.
pub fn watched(name: &str, method: IoMethodKind, secs: u64, case: fn(IoMethodKind)) {
    with_watchdog(&format!("{method}:{name}"), secs, move || case(method));
}

/// The conformance pattern: one test per io_method (`sync::case`, `worker::case`,
/// `io_uring::case`) for each named `fn case(IoMethodKind)` of the calling file, each under
/// the watchdog with the file's `WATCHDOG_SECS`. Use it with `#[macro_use] mod common;`.
#[allow(unused_macros)] // each test file uses its own subset of these helpers
macro_rules! per_method {
    ($($name:ident),* $(,)?) => {
        mod sync {
            $( #[test] fn $name() {
                crate::common::watched(stringify!($name), pageio::IoMethodKind::Sync, super::WATCHDOG_SECS, super::$name)
            } )*
        }
        mod worker {
            $( #[test] fn $name() {
                crate::common::watched(stringify!($name), pageio::IoMethodKind::Worker, super::WATCHDOG_SECS, super::$name)
            } )*
        }
        mod io_uring {
            $( #[test] fn $name() {
                crate::common::watched(stringify!($name), pageio::IoMethodKind::IoUring, super::WATCHDOG_SECS, super::$name)
            } )*
        }
    };
}

/// A valid page with a checksum whose one item is its own block number: a relation of these
/// lets a stream test check that every page it was handed is the block it was asked for.
pub fn numbered_page(block: u64) -> [u8; pageio::config::BLCKSZ] {
    let mut builder = pageio::page::builder::PageBuilder::new(0).unwrap();
    builder.add_item(&block.to_le_bytes()).unwrap();
    let mut page = builder.finish();
    pageio::page::builder::set_checksum(&mut page, block as u32);
    page
}

/// Writes `nblocks` [`numbered_page`]s as relation file `16384` in `dir`, through the AIO
/// subsystem.
pub fn numbered_relation(aio: &Aio, dir: &Path, nblocks: u64) -> pageio::storage::RelFile {
    let rel = pageio::storage::RelFile::new(dir.join("16384"));
    let mut bytes = Vec::with_capacity(nblocks as usize * pageio::config::BLCKSZ);
    for block in 0..nblocks {
        bytes.extend_from_slice(&numbered_page(block));
    }
    aio.backend()
        .unwrap()
        .write_blocks(&rel, 0, pageio::aio::IoBuffer::from_slice(&bytes))
        .unwrap();
    rel
}

/// `select` over the fixture's `uniform` (unpacked at `pgdata`), by name as `pageio scan
/// --table` reads it, seq scan on `threads` threads through `pool`: the aggregates' text and
/// the scan's result.
pub fn fixture_uniform_query(
    pool: &BufferPool,
    pgdata: &Path,
    select: &str,
    threads: usize,
) -> (Vec<String>, ScanResult) {
    use pageio::catalog::{cluster_check_options, Catalog};
    use pageio::scan::query::{run_table_query, QuerySpec, TableQuery};
    let relation = {
        let check = cluster_check_options(pgdata).unwrap();
        let catalog_pool = BufferPool::new(pool.aio(), check).unwrap();
        let catalog = Catalog::open(pgdata, &catalog_pool).unwrap();
        catalog.resolve("uniform", "postgres").unwrap()
    };
    let mut q = TableQuery::plan(
        pgdata,
        &relation,
        &QuerySpec {
            select,
            predicate: None,
            kind: ScanKind::Seq,
            index: None,
        },
    )
    .unwrap();
    q.parallel_workers = threads;
    let r = run_table_query(pool, &q, DistancePolicy::Adaptive).unwrap();
    (r.aggregates.iter().map(|a| a.text()).collect(), r.scan)
}
