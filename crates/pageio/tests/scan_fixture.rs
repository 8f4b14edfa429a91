//! Scans of the real PostgreSQL 18 fixture give PostgreSQL 18's answers: every query the
//! fixture builder asks PostgreSQL (`scripts/build-fixture.py`) × every scan type × every
//! io_method × buffered and direct I/O.

mod common;

use std::sync::Arc;

use pageio::config::{IoConfig, IoMethodKind};
use pageio::page::heap::ColumnType;
use pageio::scan::{run_scan, Between, ScanKind, ScanOptions, Table};
use pageio::storage::{ForkNumber, RelFile};
use pageio::stream::DistancePolicy;
use pageio::Aio;

#[test]
fn answers_are_postgres_answers() {
    common::assert_fixture_answers_are_postgres_answers();
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
        transactions: Some(pageio::catalog::cluster_transaction_log(pgdata).unwrap()),
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
    for kind in common::SCAN_KINDS {
        // A fresh pool per scan kind, so every kind really reads from storage.
        let pool = common::checksum_pool(&aio);
        let mut pages_in_place = 0;
        for (name, lo, hi, rows, sum) in common::FIXTURE_ANSWERS {
            let r = common::scan(&pool, &table(&pgdata, name), kind, Between { lo, hi })
                .unwrap_or_else(|e| {
                    panic!("{method} direct={direct} {kind} {name} [{lo},{hi}]: {e}")
                });
            assert_eq!(
                (r.rows, r.sum_octet_length),
                (rows, sum),
                "{method} direct={direct} {kind} scan of {name} where a between {lo} and {hi}"
            );
            assert_eq!(r.pages_failed_verification, 0);
            pages_in_place += r.pages_in_place;
        }
        // A buffered seq scan reads what the page cache holds in place (the fixture was
        // just unpacked); direct I/O and the other kinds always read through the pool.
        if direct || kind != ScanKind::Seq {
            assert_eq!(
                pages_in_place, 0,
                "{kind} direct={direct}: nothing in place"
            );
        }
        assert!(
            pool.counters().reads + pages_in_place > 0,
            "{kind}: nothing was read"
        );
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
        let pool = common::checksum_pool(&aio);
        for kind in common::SCAN_KINDS {
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
                    stream_order: None,
                    parallel_workers: 1,
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
    let pool = common::checksum_pool(&aio);
    assert_eq!(pool.nbuffers(), 128);
    let pgdata = Arc::new(pgdata);
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let (pool, pgdata) = (pool.clone(), pgdata.clone());
            std::thread::spawn(move || {
                for round in 0..3 {
                    let kind = common::SCAN_KINDS[(t + round) % 3];
                    let answers = common::FIXTURE_ANSWERS;
                    let (name, lo, hi, rows, sum) = answers[(t * 5 + round * 3) % answers.len()];
                    let r = common::scan(&pool, &table(&pgdata, name), kind, Between { lo, hi })
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
