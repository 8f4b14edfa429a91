//! Tables read by name through the catalog (`pageio::scan::query`) on the PostgreSQL 18
//! fixture: the generic deformer gives PostgreSQL's counts and sums for every recorded
//! query under every scan kind and io_method, and a tuple whose varlena header is damaged
//! (checksum recomputed, so only the tuple is wrong) is an error naming the file, block,
//! line pointer and attribute — never a panic, never a wrong sum.

mod common;

use pageio::buffer::BufferPool;
use pageio::catalog::{cluster_check_options, Catalog};
use pageio::config::{IoMethodKind, BLCKSZ};
use pageio::page::pg_checksum_page;
use pageio::scan::query::{run_table_query, QuerySpec, TableQuery};
use pageio::scan::{ScanError, ScanKind};
use pageio::stream::DistancePolicy;

/// Every query of three scan kinds under three methods; a minute means a hang.
const WATCHDOG_SECS: u64 = 120;

/// The damaged block of uniform.
const BLOCK: usize = 7;

fn query(
    pool: &BufferPool,
    pgdata: &std::path::Path,
    predicate: Option<&str>,
    kind: ScanKind,
) -> Result<Vec<String>, ScanError> {
    let relation = {
        let check = cluster_check_options(pgdata).unwrap();
        let catalog_pool = BufferPool::new(pool.aio(), check).unwrap();
        let catalog = Catalog::open(pgdata, &catalog_pool).unwrap();
        catalog.resolve("uniform", "postgres").unwrap()
    };
    let q = TableQuery::plan(
        pgdata,
        &relation,
        &QuerySpec {
            select: "count(*), sum(octet_length(b)), count(a)",
            predicate,
            kind,
            index: None,
        },
    )
    .unwrap();
    let r = run_table_query(pool, &q, DistancePolicy::Adaptive)?;
    Ok(r.aggregates.iter().map(|a| a.text()).collect())
}

#[test]
fn recorded_queries_match_postgresql_under_every_method() {
    common::with_watchdog("table queries", WATCHDOG_SECS, || {
        let (_dir, pgdata) = common::unpack_fixture();
        let facts = common::fixture_facts();
        for method in IoMethodKind::CONCRETE {
            let aio = common::aio_for(method);
            let pool = common::checksum_pool(&aio);
            for q in facts.queries.iter().filter(|q| q.table == "uniform") {
                let predicate = format!("a between {:?} and {:?}", q.lo, q.hi);
                for kind in common::SCAN_KINDS {
                    let got = query(&pool, &pgdata, Some(&predicate), kind).unwrap();
                    let sum = if q.count == 0 {
                        String::new()
                    } else {
                        q.sum_length_b.to_string()
                    };
                    assert_eq!(
                        got,
                        [q.count.to_string(), sum, q.count.to_string()],
                        "{predicate}, {kind} scan, {method}"
                    );
                }
            }
        }
    })
}

/// `select` over the fixture's `uniform`, seq scan on `threads` threads: the aggregates'
/// text and the number of threads that ran.
fn parallel_query(
    pool: &BufferPool,
    pgdata: &std::path::Path,
    select: &str,
    threads: usize,
) -> (Vec<String>, usize) {
    let (texts, scan) = common::fixture_uniform_query(pool, pgdata, select, threads);
    (texts, scan.parallel_workers)
}

#[test]
fn parallel_table_queries_merge_aggregates_to_the_serial_answer() {
    common::with_watchdog("parallel table queries", WATCHDOG_SECS, || {
        let (_dir, pgdata) = common::unpack_fixture();
        let facts = common::fixture_facts();
        let all = facts
            .queries
            .iter()
            .filter(|q| q.table == "uniform")
            .max_by_key(|q| q.count)
            .unwrap();
        // Order-independent aggregates: merged across threads.
        let exact = "count(*), count(a), sum(octet_length(b)), min(b), max(b)";
        // A float sum (rounding depends on the order of additions) and a float min (-0 and 0
        // are equal but print differently): serial, in block order.
        let float = "count(*), sum(a), avg(a), min(a)";
        for method in IoMethodKind::CONCRETE {
            let aio = common::aio_for(method);
            let pool = common::checksum_pool(&aio);
            let (serial, _) = parallel_query(&pool, &pgdata, exact, 1);
            let (serial_float, _) = parallel_query(&pool, &pgdata, float, 1);
            assert!(
                serial[0].parse::<u64>().unwrap() >= all.count,
                "{method}: {serial:?}"
            );
            for threads in [2, 3, 7] {
                let (got, ran) = parallel_query(&pool, &pgdata, exact, threads);
                assert_eq!(got, serial, "{method}, {threads} threads");
                assert_eq!(ran, threads, "{method}: threads that ran");
                let (got, ran) = parallel_query(&pool, &pgdata, float, threads);
                assert_eq!(got, serial_float, "{method}, {threads} threads, float sum");
                assert_eq!(ran, 1, "{method}: a float sum must run serially");
            }
        }
    })
}

#[test]
fn a_damaged_varlena_header_names_file_block_line_pointer_and_attribute() {
    common::with_watchdog("damaged tuple", WATCHDOG_SECS, || {
        let (_dir, pgdata) = common::unpack_fixture();
        let path = pgdata.join(common::fixture_facts().path("uniform"));
        let mut bytes = std::fs::read(&path).unwrap();
        let page = &mut bytes[BLOCK * BLCKSZ..(BLOCK + 1) * BLCKSZ];
        // Line pointer 1: lp_off is the low 15 bits of the first item id.
        let lp = u32::from_le_bytes(page[24..28].try_into().unwrap());
        let tuple = (lp & 0x7FFF) as usize;
        let t_hoff = page[tuple + 22] as usize;
        // `b` follows the 8-byte float8 `a`: a short header claiming 127 bytes, more than
        // the 99-byte tuple holds.
        assert_eq!(page[tuple + t_hoff + 8], 0x87, "the fixture's 66-byte text");
        page[tuple + t_hoff + 8] = 0xFF;
        let checksum = pg_checksum_page((&*page).try_into().unwrap(), BLOCK as u32);
        page[8..10].copy_from_slice(&checksum.to_le_bytes());
        std::fs::write(&path, &bytes).unwrap();
        for method in IoMethodKind::CONCRETE {
            let aio = common::aio_for(method);
            let pool = common::checksum_pool(&aio);
            match query(&pool, &pgdata, None, ScanKind::Seq) {
                Err(e @ ScanError::Tuple { block, offset, .. }) => {
                    assert_eq!((block, offset), (BLOCK as u64, 1), "{method}");
                    let msg = e.to_string();
                    assert!(
                        msg.contains(common::fixture_facts().path("uniform"))
                            && msg.contains("attribute 2 (\"b\", attlen -1)")
                            && msg.contains("short header claims 127 bytes"),
                        "{method}: {msg}"
                    );
                }
                other => panic!("{method}: expected a tuple error, got {other:?}"),
            }
        }
    })
}
