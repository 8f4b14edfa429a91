//! Scans of the real PostgreSQL 18 fixture give PostgreSQL 18's answers: every query the
//! fixture builder asks PostgreSQL (`scripts/build-fixture.py`) × every scan type × every
//! io_method × buffered and direct I/O.

mod common;

use std::sync::Arc;

use pageio::buffer::{BufferPool, PageCheckOptions};
use pageio::config::{IoConfig, IoMethodKind};
use pageio::page::heap::ColumnType;
use pageio::scan::{run_scan, Between, ScanKind, ScanOptions, Table};
use pageio::storage::{ForkNumber, RelFile};
use pageio::stream::DistancePolicy;
use pageio::Aio;

/// `SELECT count(*), sum(length(b)) FROM <table> WHERE a BETWEEN lo AND hi`, as PostgreSQL
/// 18 answers it on the fixture (deterministic: the SQL seeds its random numbers; the builder
/// fails if PostgreSQL computes anything else, and `answers_are_postgres_answers` checks these
/// constants against what PostgreSQL said for this build).
const ANSWERS: [(&str, f64, f64, u64, u64); 12] = [
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

#[test]
fn answers_are_postgres_answers() {
    let from_postgres: Vec<(&str, f64, f64, u64, u64)> = common::fixture_facts()
        .queries
        .iter()
        .map(|q| (q.table.as_str(), q.lo, q.hi, q.count, q.sum_length_b))
        .collect();
    assert_eq!(from_postgres, ANSWERS);
}

/// Table `name` of the fixture (uniform or linear_10) with its btree on `a`, at the files
/// PostgreSQL's `pg_relation_filepath` named.
fn table(pgdata: &std::path::Path, name: &str) -> Table {
    let facts = common::fixture_facts();
    let heap = facts.path(name);
    let index = facts.path(&format!("{name}_a"));
    Table {
        heap: RelFile::in_data_dir(pgdata, heap, ForkNumber::Main),
        index: Some(RelFile::in_data_dir(pgdata, index, ForkNumber::Main)),
        columns: vec![ColumnType::Float8, ColumnType::Text],
    }
}

fn check_all(method: IoMethodKind, direct: bool) {
    let (_dir, pgdata) = common::unpack_fixture();
    let aio = Aio::new(IoConfig {
        io_method: method,
        direct_io: direct,
        ..IoConfig::default()
    })
    .unwrap();
    let checks = PageCheckOptions {
        checksums: true,
        ..PageCheckOptions::default()
    };
    for kind in [ScanKind::Seq, ScanKind::Bitmap, ScanKind::Index] {
        // A fresh pool per scan kind, so every kind really reads from storage.
        let pool = BufferPool::new(&aio, checks).unwrap();
        for (name, lo, hi, rows, sum) in ANSWERS {
            let r = run_scan(
                &pool,
                &table(&pgdata, name),
                &ScanOptions {
                    kind,
                    predicate: Between { lo, hi },
                    policy: DistancePolicy::Adaptive,
                },
            )
            .unwrap_or_else(|e| panic!("{method} direct={direct} {kind} {name} [{lo},{hi}]: {e}"));
            assert_eq!(
                (r.rows, r.sum_octet_length),
                (rows, sum),
                "{method} direct={direct} {kind} scan of {name} where a between {lo} and {hi}"
            );
            assert_eq!(r.pages_failed_verification, 0);
        }
        assert!(pool.counters().reads > 0, "{kind}: nothing was read");
    }
}

#[test]
fn fixture_answers_sync_buffered() {
    check_all(IoMethodKind::Sync, false)
}
#[test]
fn fixture_answers_sync_direct() {
    check_all(IoMethodKind::Sync, true)
}
#[test]
fn fixture_answers_worker_buffered() {
    check_all(IoMethodKind::Worker, false)
}
#[test]
fn fixture_answers_worker_direct() {
    check_all(IoMethodKind::Worker, true)
}
#[test]
fn fixture_answers_io_uring_buffered() {
    check_all(IoMethodKind::IoUring, false)
}
#[test]
fn fixture_answers_io_uring_direct() {
    check_all(IoMethodKind::IoUring, true)
}

#[test]
fn both_distance_policies_agree() {
    let (_dir, pgdata) = common::unpack_fixture();
    let aio = Aio::new(IoConfig::default()).unwrap();
    for policy in [DistancePolicy::Pg18, DistancePolicy::Adaptive] {
        let pool = BufferPool::new(
            &aio,
            PageCheckOptions {
                checksums: true,
                ..Default::default()
            },
        )
        .unwrap();
        for kind in [ScanKind::Seq, ScanKind::Bitmap, ScanKind::Index] {
            let r = run_scan(
                &pool,
                &table(&pgdata, "uniform"),
                &ScanOptions {
                    kind,
                    predicate: Between {
                        lo: 250.0,
                        hi: 750.0,
                    },
                    policy,
                },
            )
            .unwrap();
            assert_eq!(
                (r.rows, r.sum_octet_length),
                (9917, 654522),
                "{policy:?} {kind}"
            );
        }
    }
}

#[test]
fn four_threads_through_a_one_megabyte_pool() {
    let (_dir, pgdata) = common::unpack_fixture();
    let aio = Aio::new(IoConfig {
        shared_buffers_bytes: 1 << 20,
        ..IoConfig::default()
    })
    .unwrap();
    let pool = BufferPool::new(
        &aio,
        PageCheckOptions {
            checksums: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(pool.nbuffers(), 128);
    let pgdata = Arc::new(pgdata);
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let (pool, pgdata) = (pool.clone(), pgdata.clone());
            std::thread::spawn(move || {
                for round in 0..3 {
                    let kind = [ScanKind::Seq, ScanKind::Bitmap, ScanKind::Index][(t + round) % 3];
                    let (name, lo, hi, rows, sum) = ANSWERS[(t * 5 + round * 3) % ANSWERS.len()];
                    let r = run_scan(
                        &pool,
                        &table(&pgdata, name),
                        &ScanOptions {
                            kind,
                            predicate: Between { lo, hi },
                            policy: DistancePolicy::Adaptive,
                        },
                    )
                    .unwrap_or_else(|e| panic!("thread {t} {kind}: {e}"));
                    assert_eq!(
                        (r.rows, r.sum_octet_length),
                        (rows, sum),
                        "thread {t} {kind} {name}"
                    );
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // The pool is far smaller than the 2 × 1112-page tables: it must have evicted.
    assert!(pool.counters().evictions > 1000, "{:?}", pool.counters());
}
