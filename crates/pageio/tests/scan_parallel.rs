//! Parallel sequential scans give the serial scan's answers: on the PostgreSQL 18 fixture
//! (PostgreSQL's own answers), on generated tables large enough for multi-block chunks and
//! their ramp-down, and on tables with fewer blocks than threads — every io_method, 1, 2, 3
//! and 7 threads, with and without a predicate. A damaged page ends the scan on every thread
//! with the error naming the file and block.

mod common;

use pageio::buffer::{BufferPool, PageCheckOptions};
use pageio::config::{IoConfig, IoMethodKind, BLCKSZ};
use pageio::gen::{generate, DataSet, GenOptions};
use pageio::page::heap::ColumnType;
use pageio::scan::{run_scan, Between, ScanError, ScanKind, ScanOptions, ScanResult, Table};
use pageio::storage::{ForkNumber, RelFile};
use pageio::stream::DistancePolicy;
use pageio::Aio;

/// Thread counts every case runs with: serial, the caller plus one, an odd count, and more
/// threads than the machine has cores.
const THREADS: [usize; 4] = [1, 2, 3, 7];

/// The fixture's scans take well under a second each; a minute means a hang.
const WATCHDOG_SECS: u64 = 120;

fn seq(pool: &BufferPool, table: &Table, predicate: Between, threads: usize) -> ScanResult {
    run_scan(
        pool,
        table,
        &ScanOptions {
            kind: ScanKind::Seq,
            predicate,
            policy: DistancePolicy::Adaptive,
            parallel_workers: threads,
            stream_order: None,
        },
    )
    .unwrap_or_else(|e| panic!("{threads} threads: {e}"))
}

fn fixture_table(pgdata: &std::path::Path, name: &str) -> Table {
    Table {
        heap: RelFile::in_data_dir(pgdata, common::fixture_facts().path(name), ForkNumber::Main),
        index: None,
        columns: vec![ColumnType::Float8, ColumnType::Text],
        transactions: Some(pageio::catalog::cluster_transaction_log(pgdata).unwrap()),
    }
}

fn fixture_answers(method: IoMethodKind) {
    let (_dir, pgdata) = common::unpack_fixture();
    // Through the buffer pool: the just-unpacked fixture is cached, and would otherwise be
    // read in place (tests/scan_in_place.rs covers that path).
    let aio = Aio::new(IoConfig {
        io_method: method,
        seq_read_in_place: false,
        ..IoConfig::default()
    })
    .unwrap();
    for threads in THREADS {
        // A fresh pool per thread count, so every run reads from storage.
        let pool = common::checksum_pool(&aio);
        for (name, lo, hi, rows, sum) in common::FIXTURE_ANSWERS {
            let table = fixture_table(&pgdata, name);
            let r = seq(&pool, &table, Between { lo, hi }, threads);
            assert_eq!(
                (r.rows, r.sum_octet_length),
                (rows, sum),
                "{method} {threads} threads: {name} where a between {lo} and {hi}"
            );
            let pages = common::fixture_facts().relation(name).pages;
            assert_eq!(
                r.heap_pages, pages as u64,
                "{method} {threads}: every page once"
            );
            assert_eq!(r.stream.buffers, pages as u64, "{method} {threads}");
            assert_eq!(r.parallel_workers, threads.max(1), "{method}");
        }
        // No predicate: every row of the table.
        let r = seq(
            &pool,
            &fixture_table(&pgdata, "uniform"),
            Between::ALL,
            threads,
        );
        assert_eq!(
            (r.rows, r.sum_octet_length),
            (20000, 1320000),
            "{method} {threads}"
        );
        assert!(
            pool.counters().reads > 0,
            "{method} {threads}: nothing was read"
        );
    }
}

#[test]
fn fixture_answers_sync() {
    common::with_watchdog("parallel sync", WATCHDOG_SECS, || {
        fixture_answers(IoMethodKind::Sync)
    })
}

#[test]
fn fixture_answers_worker() {
    common::with_watchdog("parallel worker", WATCHDOG_SECS, || {
        fixture_answers(IoMethodKind::Worker)
    })
}

#[test]
fn fixture_answers_io_uring() {
    common::with_watchdog("parallel io_uring", WATCHDOG_SECS, || {
        fixture_answers(IoMethodKind::IoUring)
    })
}

/// A reference answer computed from the generator's rows, not from the files.
fn reference(ds: DataSet, opts: &GenOptions, p: Between) -> (u64, u64) {
    ds.rows(opts.seed, ds.row_count(opts))
        .filter(|r| r.key() >= p.lo && r.key() <= p.hi)
        .fold((0, 0), |(c, s), r| {
            (c + 1, s + r.b().map(|b| b.len() as u64).unwrap_or(0))
        })
}

#[test]
fn generated_tables_give_the_serial_answers() {
    common::with_watchdog("parallel generated", 300, generated_body)
}

fn generated_body() {
    let dir = tempfile::tempdir().unwrap();
    // 20 rows: 2 heap blocks, fewer than the threads; 90,000 rows: about 5,000 blocks, so
    // chunks start at 4 blocks and ramp down to 1 (PARALLEL_SEQSCAN_NCHUNKS = 2048).
    type Case = (u64, u64, [(f64, f64); 2]);
    let cases: [Case; 2] = [
        (20, 2, [(0.0, 50_000.0), (1.0e9, 2.0e9)]),
        (90_000, 4096, [(1_000.0, 2_000.0), (50_000.0, 90_000.0)]),
    ];
    let aio_sync = common::aio_for(IoMethodKind::Sync);
    for (rows, min_blocks, preds) in cases {
        let opts = GenOptions {
            rows,
            seed: 11,
            scale: 1,
            overwrite: true,
        };
        let out = dir.path().join(format!("rows{rows}"));
        let m = generate(&aio_sync, &out, DataSet::Uniform, &opts, &|_| {}).unwrap();
        let ddir = out.join(DataSet::Uniform.name());
        let table = Table {
            heap: m.heap_file(&ddir),
            index: None,
            columns: vec![ColumnType::Float8, ColumnType::Text],
            transactions: None,
        };
        for method in IoMethodKind::CONCRETE {
            let aio = common::aio_for(method);
            let pool = common::checksum_pool(&aio);
            let serial_all = seq(&pool, &table, Between::ALL, 1);
            assert_eq!(serial_all.rows, rows, "{method}: every row");
            if rows < 100 {
                assert!(
                    serial_all.heap_pages <= min_blocks,
                    "{method}: a tiny table"
                );
            } else {
                assert!(
                    serial_all.heap_pages > min_blocks,
                    "{method}: chunks > 1 block"
                );
            }
            for threads in THREADS {
                let r = seq(&pool, &table, Between::ALL, threads);
                assert_eq!(
                    (r.rows, r.sum_octet_length, r.heap_pages),
                    (
                        serial_all.rows,
                        serial_all.sum_octet_length,
                        serial_all.heap_pages
                    ),
                    "{method} {threads} threads, no predicate, {rows} rows"
                );
                for (lo, hi) in preds {
                    let p = Between { lo, hi };
                    let r = seq(&pool, &table, p, threads);
                    assert_eq!(
                        (r.rows, r.sum_octet_length),
                        reference(DataSet::Uniform, &opts, p),
                        "{method} {threads} threads, a between {lo} and {hi}, {rows} rows"
                    );
                }
            }
        }
    }
}

/// A generated `uniform` table of `rows` rows under `dir` (float8 and text columns), and the
/// options it was made with.
fn uniform_table(dir: &std::path::Path, rows: u64, seed: u64) -> (Table, GenOptions) {
    let opts = GenOptions {
        rows,
        seed,
        scale: 1,
        overwrite: true,
    };
    let out = dir.join("t");
    let m = generate(
        &common::aio_for(IoMethodKind::Sync),
        &out,
        DataSet::Uniform,
        &opts,
        &|_| {},
    )
    .unwrap();
    let table = Table {
        heap: m.heap_file(&out.join(DataSet::Uniform.name())),
        index: None,
        columns: vec![ColumnType::Float8, ColumnType::Text],
        transactions: None,
    };
    (table, opts)
}

/// Read-ahead advice (`seq_read_ahead`): a cold buffered seq scan advises each 2 MB piece
/// of the heap exactly once, serially and on three threads, whatever the window, under every
/// io_method; a heap the page cache holds, `seq_read_ahead = 0` and direct I/O advise
/// nothing, and the measured default reads a heap of two stretches with the kernel's
/// read-ahead. The answers never change.
#[test]
fn read_ahead_advice_covers_each_piece_once() {
    common::with_watchdog("read-ahead advice", 300, read_ahead_body)
}

fn read_ahead_body() {
    use pageio::stream::readahead::{ADVICE_PIECE_BLOCKS, STRETCH_BLOCKS};
    let dir = tempfile::tempdir().unwrap();
    let (table, opts) = uniform_table(dir.path(), 90_000, 5);
    // The serial scan's answer, no advice involved: every row.
    let want = {
        let pool = common::checksum_pool(&common::aio_for(IoMethodKind::Sync));
        let r = seq(&pool, &table, Between::ALL, 1);
        assert_eq!(r.rows, opts.rows);
        (r.rows, r.sum_octet_length)
    };
    let run = |settings: &[(&str, &str)], threads: usize, cold: bool| -> ScanResult {
        // Every block through the stream, which gives the advice: a window the advice has
        // already cached would otherwise be read in place, its pieces never advised.
        let mut config = IoConfig {
            seq_read_in_place: false,
            ..IoConfig::default()
        };
        for (name, value) in settings {
            config.set(name, value).unwrap();
        }
        let aio = Aio::new(config).unwrap();
        // A fresh pool: every page comes from storage (the page cache, or the device).
        let pool = common::checksum_pool(&aio);
        if cold {
            table.heap.evict_from_page_cache().unwrap();
        } else {
            // Cached: read whole just before, so that memory pressure from elsewhere on the
            // machine has had no time to evict a piece of it.
            std::fs::read(table.heap.path()).unwrap();
        }
        let r = seq(&pool, &table, Between::ALL, threads);
        assert_eq!((r.rows, r.sum_octet_length), want, "{settings:?} {threads}");
        r
    };
    // A cached heap advises nothing. This machine pages out memory left idle for a moment
    // under load (DAMON's pageout scheme), page cache included, so a piece read just
    // before may be gone again: one of three tries must advise nothing, and a scan that
    // advised cached pieces every time still fails.
    let cached_advice = |settings: &[(&str, &str)], threads: usize| -> u64 {
        let mut advice = 0;
        for _ in 0..3 {
            advice = run(settings, threads, false).read_ahead_advice;
            if advice == 0 {
                break;
            }
        }
        advice
    };
    let pages = run(&[], 1, false).heap_pages;
    // More than a few pieces, so a 4 MB window (two pieces) moves many times.
    assert!(pages > 8 * ADVICE_PIECE_BLOCKS, "{pages} pages");
    let pieces = pages.div_ceil(ADVICE_PIECE_BLOCKS);
    for method in IoMethodKind::CONCRETE {
        let m = method.to_string();
        for window in ["4MB", "64MB"] {
            for threads in [1, 3] {
                let settings = [("io_method", m.as_str()), ("seq_read_ahead", window)];
                let r = run(&settings, threads, true);
                assert_eq!(
                    r.read_ahead_advice, pieces,
                    "{method}, {window} ahead, {threads} threads: each piece once"
                );
                assert_eq!(
                    cached_advice(&settings, threads),
                    0,
                    "{method}, {window} ahead, {threads} threads: the heap is cached"
                );
            }
        }
        let off = [("io_method", m.as_str()), ("seq_read_ahead", "0")];
        assert_eq!(run(&off, 3, true).read_ahead_advice, 0, "{method}: off");
        // Measured (the default): a heap of two stretches is read by the kernel's own
        // read-ahead (the warm-up and the first measured stretch), nothing advised; longer
        // heaps in `measured_read_ahead_advises_its_third_stretch`.
        assert!(pages <= 2 * STRETCH_BLOCKS, "{pages} pages");
        for threads in [1, 3] {
            let auto = [("io_method", m.as_str()), ("seq_read_ahead", "auto")];
            let r = run(&auto, threads, true);
            let why = format!("{method}, auto, {threads} threads: {:?}", r.read_ahead);
            assert_eq!(r.read_ahead_advice, 0, "{why}");
            assert_eq!(
                (
                    r.read_ahead.stretches_kernel,
                    r.read_ahead.stretches_advised
                ),
                (pages.div_ceil(STRETCH_BLOCKS), 0),
                "{why}"
            );
        }
        let direct = [("io_method", m.as_str()), ("direct_io", "on")];
        assert_eq!(
            run(&direct, 3, true).read_ahead_advice,
            0,
            "{method}: direct I/O"
        );
    }
}

/// The measured read-ahead (`seq_read_ahead = auto`) over a heap of three stretches: the
/// kernel's read-ahead reads the first two (the warm-up and the first measured), advice the
/// third, each stretch begun once whatever the threads, under every io_method; each piece of
/// the third is advised at most once; a cached heap is advised nothing; the answers never
/// change.
#[test]
fn measured_read_ahead_advises_its_third_stretch() {
    common::with_watchdog("measured read-ahead", 300, measured_read_ahead_body)
}

fn measured_read_ahead_body() {
    use pageio::stream::readahead::{ADVICE_PIECE_BLOCKS, STRETCH_BLOCKS};
    // Beyond what the kernel's own read-ahead of stretch 1 can have reached (two windows of
    // read_ahead_kb, 16 MB at the common 8 MB or less), the third stretch's pieces are
    // advised; with a larger window on some device they may all be cached already.
    let kernel_window_kb = std::fs::read_dir("/sys/block")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|d| std::fs::read_to_string(d.path().join("queue/read_ahead_kb")).ok())
        .filter_map(|v| v.trim().parse::<u64>().ok())
        .max()
        .unwrap_or(0);
    let dir = tempfile::tempdir().unwrap();
    let (table, opts) = uniform_table(dir.path(), 220_000, 6);
    // One scan, its stretches checked; cold or after reading the heap whole.
    let scan = |method: IoMethodKind, threads: usize, cold: bool| -> (ScanResult, String) {
        let mut config = IoConfig {
            seq_read_in_place: false,
            ..IoConfig::default()
        };
        config.set("io_method", &method.to_string()).unwrap();
        assert!(config.seq_read_ahead_auto, "the default");
        let pool = common::checksum_pool(&Aio::new(config).unwrap());
        if cold {
            table.heap.evict_from_page_cache().unwrap();
        } else {
            std::fs::read(table.heap.path()).unwrap();
        }
        let r = seq(&pool, &table, Between::ALL, threads);
        let why = format!(
            "{method}, {threads} threads, cold {cold}: {:?}",
            r.read_ahead
        );
        assert_eq!(r.rows, opts.rows, "{why}");
        let pages = r.heap_pages;
        assert!(
            pages > 2 * STRETCH_BLOCKS && pages <= 3 * STRETCH_BLOCKS,
            "{pages} pages: three stretches"
        );
        assert_eq!(
            (
                r.read_ahead.stretches_kernel,
                r.read_ahead.stretches_advised
            ),
            (2, 1),
            "{why}"
        );
        assert!(r.read_ahead.kernel.is_some(), "stretch 1 measured: {why}");
        assert_eq!(r.read_ahead.chosen, None, "stretch 2 never closed: {why}");
        (r, why)
    };
    for method in IoMethodKind::CONCRETE {
        for threads in [1, 3] {
            let (r, why) = scan(method, threads, true);
            let third = (r.heap_pages - 2 * STRETCH_BLOCKS).div_ceil(ADVICE_PIECE_BLOCKS);
            assert!(
                r.read_ahead_advice <= third,
                "{} calls; {why}",
                r.read_ahead_advice
            );
            if kernel_window_kb <= 8192 {
                assert!(r.read_ahead_advice > 0, "the third stretch advised: {why}");
            }
            // Cached: nothing advised, in one of three tries (this machine pages out idle
            // page cache under load; see `read_ahead_body`).
            let mut advice = u64::MAX;
            for _ in 0..3 {
                advice = scan(method, threads, false).0.read_ahead_advice;
                if advice == 0 {
                    break;
                }
            }
            assert_eq!(advice, 0, "cached, {method}, {threads} threads");
        }
    }
}

#[test]
fn a_damaged_page_stops_every_thread_and_is_named() {
    common::with_watchdog("parallel damaged page", WATCHDOG_SECS, damaged_body)
}

fn damaged_body() {
    const BLOCK: usize = 7;
    let (_dir, pgdata) = common::unpack_fixture();
    let name = common::fixture_facts().path("uniform");
    let path = pgdata.join(name);
    let mut bytes = std::fs::read(&path).unwrap();
    // A byte in the page's free space: only the checksum betrays it.
    bytes[BLOCK * BLCKSZ + 3000] ^= 0x5A;
    std::fs::write(&path, &bytes).unwrap();
    for method in IoMethodKind::CONCRETE {
        let aio = Aio::new(IoConfig {
            io_method: method,
            ..IoConfig::default()
        })
        .unwrap();
        for threads in [2, 3, 7] {
            let pool = BufferPool::new(
                &aio,
                PageCheckOptions {
                    checksums: true,
                    ..PageCheckOptions::default()
                },
            )
            .unwrap();
            let err = run_scan(
                &pool,
                &fixture_table(&pgdata, "uniform"),
                &ScanOptions {
                    kind: ScanKind::Seq,
                    predicate: Between::ALL,
                    policy: DistancePolicy::Adaptive,
                    parallel_workers: threads,
                    stream_order: None,
                },
            )
            .unwrap_err();
            assert!(
                matches!(err, ScanError::Buffer(_)),
                "{method} {threads}: {err:?}"
            );
            let msg = err.to_string();
            assert!(msg.contains(name), "{method} {threads}: {msg}");
            assert!(msg.contains("block 7"), "{method} {threads}: {msg}");
            assert!(msg.contains("ignore_checksum_failure"), "{msg}");
            // Every thread has let go of its backend: the subsystem serves new ones.
            assert!(
                aio.snapshot().is_empty(),
                "{method} {threads}: I/O left behind"
            );
        }
    }
}
