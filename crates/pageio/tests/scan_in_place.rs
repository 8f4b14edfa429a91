//! Sequential scans reading cached pages in place (`seq_read_in_place`, `scan::in_place`)
//! give the answers of scans that copy every page into the buffer pool, under every
//! io_method, serially and in parallel: on the PostgreSQL 18 fixture (whose recorded answers
//! are PostgreSQL's), for the fixed-shape scans and for tables read by name with every kind
//! of aggregate; on a generated heap only partly cached, where the two paths alternate. A
//! page failing its checksum is handled by the buffer pool's rules either way.

#[macro_use]
mod common;

use pageio::buffer::{BufferPool, PageCheckOptions};
use pageio::config::{IoConfig, IoMethodKind, BLCKSZ};
use pageio::gen::{generate, DataSet, GenOptions};
use pageio::page::heap::ColumnType;
use pageio::scan::{run_scan, Between, ScanKind, ScanOptions, ScanResult, Table};
use pageio::storage::{ForkNumber, RelFile};
use pageio::stream::{DistancePolicy, StreamOrder};
use pageio::Aio;

/// A few scans of a 9 MB fixture per case; two minutes means a hang.
const WATCHDOG_SECS: u64 = 120;

/// Serial, the caller plus one, and an odd count.
const THREADS: [usize; 3] = [1, 2, 3];

fn aio(method: IoMethodKind, in_place: bool) -> Aio {
    Aio::new(IoConfig {
        io_method: method,
        seq_read_in_place: in_place,
        ..IoConfig::default()
    })
    .unwrap_or_else(|e| panic!("{method}: {e}"))
}

fn seq(
    pool: &BufferPool,
    table: &Table,
    predicate: Between,
    threads: usize,
    order: Option<StreamOrder>,
) -> ScanResult {
    run_scan(
        pool,
        table,
        &ScanOptions {
            kind: ScanKind::Seq,
            predicate,
            policy: DistancePolicy::Adaptive,
            parallel_workers: threads,
            stream_order: order,
        },
    )
    .unwrap_or_else(|e| panic!("{threads} threads: {e}"))
}

/// A pool that checks checksums and zeroes a damaged page (`zero_damaged_pages`).
fn zeroing_pool(aio: &Aio) -> BufferPool {
    BufferPool::new(
        aio,
        PageCheckOptions {
            checksums: true,
            zero_damaged_pages: true,
            ..PageCheckOptions::default()
        },
    )
    .unwrap()
}

/// The blocks a scan reported damaged, in order.
fn damaged_blocks(r: &ScanResult) -> Vec<u64> {
    r.damaged_pages.iter().map(|d| d.block).collect()
}

/// Reads a file whole, so the page cache holds it (the test's "warm").
fn warm(path: &std::path::Path) {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

fn fixture_table(pgdata: &std::path::Path) -> Table {
    Table {
        heap: RelFile::in_data_dir(
            pgdata,
            common::fixture_facts().path("uniform"),
            ForkNumber::Main,
        ),
        index: None,
        columns: vec![ColumnType::Float8, ColumnType::Text],
        transactions: Some(pageio::catalog::cluster_transaction_log(pgdata).unwrap()),
    }
}

/// The fixture, cached: every page read in place gives PostgreSQL's recorded answers and
/// the copied scan's, page for page; with in-place reading off nothing is read in place.
fn fixture_in_place_equals_copied(method: IoMethodKind) {
    let (_dir, pgdata) = common::unpack_fixture();
    let table = fixture_table(&pgdata);
    let pages = common::fixture_facts().relation("uniform").pages as u64;
    let (aio_in, aio_copy) = (aio(method, true), aio(method, false));
    for threads in THREADS {
        let pool_in = common::checksum_pool(&aio_in);
        let pool_copy = common::checksum_pool(&aio_copy);
        for (name, lo, hi, rows, sum) in common::FIXTURE_ANSWERS {
            if name != "uniform" {
                continue;
            }
            for order in [None, Some(StreamOrder::BlockOrder)] {
                warm(table.heap.path());
                let a = seq(&pool_in, &table, Between { lo, hi }, threads, order);
                let b = seq(&pool_copy, &table, Between { lo, hi }, threads, order);
                let what = format!("{method} {threads} threads {order:?}, a between {lo} and {hi}");
                // PostgreSQL 18's answer (recorded with the fixture), both ways.
                assert_eq!(
                    (a.rows, a.sum_octet_length),
                    (rows, sum),
                    "{what}: in place"
                );
                assert_eq!((b.rows, b.sum_octet_length), (rows, sum), "{what}: copied");
                assert_eq!((a.heap_pages, b.heap_pages), (pages, pages), "{what}");
                assert_eq!(
                    a.pages_in_place, pages,
                    "{what}: the cached heap read in place"
                );
                assert_eq!(a.pool.reads + a.pool.hits, 0, "{what}: no pool buffer used");
                assert_eq!(b.pages_in_place, 0, "{what}: in-place reading off");
                assert_eq!(
                    b.pool.reads + b.pool.hits,
                    pages,
                    "{what}: every page through the pool"
                );
            }
        }
        // Tables by name: order-free aggregates (merged across threads) and order-dependent
        // ones (a float sum and min, serial in block order), text for text.
        for select in [
            "count(*), count(a), sum(octet_length(b)), min(b), max(b)",
            "count(*), sum(a), avg(a), min(a), max(a)",
        ] {
            warm(table.heap.path());
            let (a, sa) = common::fixture_uniform_query(&pool_in, &pgdata, select, threads);
            let (b, sb) = common::fixture_uniform_query(&pool_copy, &pgdata, select, threads);
            assert_eq!(a, b, "{method} {threads} threads: {select}");
            assert_eq!(a[0], "20000", "{method}: PostgreSQL's count(*) of uniform");
            assert_eq!(sa.pages_in_place, pages, "{method} {threads}: {select}");
            assert_eq!(sb.pages_in_place, 0, "{method} {threads}: {select}");
        }
        assert_eq!(
            common::fixture_uniform_query(
                &pool_in,
                &pgdata,
                "count(*), sum(octet_length(b))",
                threads
            )
            .0,
            ["20000", "1320000"],
            "{method} {threads}: PostgreSQL's answer"
        );
    }
}

/// A generated heap of about 5,400 blocks (three 16 MB windows) of which only the first
/// window and the last are cached: the first is read in place, the second through the
/// stream, and the third through the stream too, because the scan's own read-ahead may have
/// cached it (it lies within the read-ahead's reach of the second, and the window one reach
/// further on is not cached: past the heap's end); every row counted once, in block order
/// and in completion order. Cold, nothing is read in place.
/// A `uniform` heap of `rows` rows generated with `seed` in `dir`, as a table, and the
/// answer to `count(*), sum(octet_length(b))` its rows give.
fn generated_uniform(dir: &std::path::Path, rows: u64, seed: u64) -> (Table, (u64, u64)) {
    let opts = GenOptions {
        rows,
        seed,
        scale: 1,
        overwrite: true,
    };
    let setup = aio(IoMethodKind::Sync, false);
    let m = generate(&setup, dir, DataSet::Uniform, &opts, &|_| {}).unwrap();
    let table = Table {
        heap: m.heap_file(&dir.join(DataSet::Uniform.name())),
        index: None,
        columns: vec![ColumnType::Float8, ColumnType::Text],
        transactions: None,
    };
    let expected = DataSet::Uniform
        .rows(opts.seed, DataSet::Uniform.row_count(&opts))
        .fold((0, 0), |(c, s), r| {
            (c + 1, s + r.b().map(|b| b.len() as u64).unwrap_or(0))
        });
    (table, expected)
}

fn partly_cached_heap_alternates(method: IoMethodKind) {
    let dir = tempfile::tempdir().unwrap();
    let (table, expected) = generated_uniform(dir.path(), 100_000, 7);
    let heap = table.heap.clone();
    let nblocks = heap.nblocks().unwrap();
    assert!(
        nblocks > 2 * 2048 && nblocks < 3 * 2048,
        "{nblocks} blocks: three windows"
    );
    let aio_in = aio(method, true);
    for order in [None, Some(StreamOrder::BlockOrder)] {
        heap.evict_from_page_cache().unwrap();
        // Cache window 0 (blocks 0..2048) and window 2 (4096..end), not window 1.
        let file = std::fs::File::open(heap.path()).unwrap();
        let mut buf = vec![0u8; 2048 * BLCKSZ];
        std::os::unix::fs::FileExt::read_exact_at(&file, &mut buf, 0).unwrap();
        let tail = (nblocks - 4096) as usize * BLCKSZ;
        std::os::unix::fs::FileExt::read_exact_at(&file, &mut buf[..tail], 4096 * BLCKSZ as u64)
            .unwrap();
        let pool = common::checksum_pool(&aio_in);
        let r = seq(&pool, &table, Between::ALL, 1, order);
        assert_eq!((r.rows, r.sum_octet_length), expected, "{method} {order:?}");
        assert_eq!(r.heap_pages, nblocks, "{method} {order:?}");
        assert_eq!(
            r.pages_in_place, 2048,
            "{method} {order:?}: window 0 in place"
        );
        assert_eq!(
            r.pool.reads,
            nblocks - 2048,
            "{method} {order:?}: the rest read"
        );
        // Cold: the advice reads the heap in, and the scan reads it all through the stream.
        heap.evict_from_page_cache().unwrap();
        let pool = common::checksum_pool(&aio_in);
        let r = seq(&pool, &table, Between::ALL, 2, order);
        assert_eq!(
            (r.rows, r.sum_octet_length),
            expected,
            "{method} {order:?} cold"
        );
        assert_eq!(
            r.pages_in_place, 0,
            "{method} {order:?}: cold, nothing in place"
        );
        assert_eq!(r.pool.reads, nblocks, "{method} {order:?}: cold");
    }
}

/// A cached page whose checksum fails is not used in place: the pool's rules apply, so the
/// error (and, under `zero_damaged_pages`, the damage report) is the copied scan's.
fn a_damaged_page_follows_the_pools_rules(method: IoMethodKind) {
    let (_dir, pgdata) = common::unpack_fixture();
    let table = fixture_table(&pgdata);
    let path = table.heap.path().to_path_buf();
    let mut bytes = std::fs::read(&path).unwrap();
    // A byte of block 7's tuple data, checksum left as it was.
    bytes[7 * BLCKSZ + 8000] ^= 0x55;
    std::fs::write(&path, &bytes).unwrap();
    let (aio_in, aio_copy) = (aio(method, true), aio(method, false));
    let err_in = run_scan(
        &common::checksum_pool(&aio_in),
        &table,
        &ScanOptions {
            kind: ScanKind::Seq,
            predicate: Between::ALL,
            policy: DistancePolicy::Adaptive,
            parallel_workers: 1,
            stream_order: None,
        },
    )
    .unwrap_err()
    .to_string();
    warm(&path);
    let err_copy = run_scan(
        &common::checksum_pool(&aio_copy),
        &table,
        &ScanOptions {
            kind: ScanKind::Seq,
            predicate: Between::ALL,
            policy: DistancePolicy::Adaptive,
            parallel_workers: 1,
            stream_order: None,
        },
    )
    .unwrap_err()
    .to_string();
    assert_eq!(err_in, err_copy, "{method}");
    assert!(
        err_in.contains("block 7") && err_in.contains(common::fixture_facts().path("uniform")),
        "{method}: {err_in}"
    );
    // zero_damaged_pages: block 7 is zeroed and reported once; blocks 0..7 were read in
    // place, the rest of the window through the pool.
    warm(&path);
    let a = seq(&zeroing_pool(&aio_in), &table, Between::ALL, 1, None);
    let b = seq(&zeroing_pool(&aio_copy), &table, Between::ALL, 1, None);
    assert_eq!(
        (a.rows, a.sum_octet_length),
        (b.rows, b.sum_octet_length),
        "{method}"
    );
    assert!(a.rows < 20000, "{method}: block 7's rows are gone");
    assert_eq!(a.pages_in_place, 7, "{method}: blocks 0..7 in place");
    assert_eq!(damaged_blocks(&a), [7], "{method}");
    assert_eq!(damaged_blocks(&b), [7], "{method}");
}

/// A cached heap of about 8,600 blocks (five windows) with a hole (window 1, blocks
/// 2048..4096, evicted), read with 2 MB of advice (a read-ahead reach of 256 blocks): the
/// hole is read through the stream, and the windows after it in place again, because the
/// window one reach past each is cached too, which the scan's read-ahead cannot have done.
/// The same answer as the copied scan, serial in block and completion order and on two
/// threads (whose 2 MB chunks the advice may read in before they reach them); with the
/// read-ahead reaching past the heap's end (64 MB), the scan cannot tell, and reads what
/// follows the hole through the stream.
fn a_hole_in_a_cached_heap_costs_only_the_hole(method: IoMethodKind) {
    let dir = tempfile::tempdir().unwrap();
    let (table, expected) = generated_uniform(dir.path(), 160_000, 11);
    let heap = table.heap.clone();
    let nblocks = heap.nblocks().unwrap();
    assert!(
        nblocks > 4 * 2048 && nblocks < 5 * 2048,
        "{nblocks} blocks: five windows"
    );
    let with_advice = |window: &str| {
        let mut config = IoConfig {
            io_method: method,
            ..IoConfig::default()
        };
        config.set("seq_read_ahead", window).unwrap();
        Aio::new(config).unwrap_or_else(|e| panic!("{method}: {e}"))
    };
    let copied = {
        warm(heap.path());
        let pool = common::checksum_pool(&aio(method, false));
        let r = seq(&pool, &table, Between::ALL, 1, None);
        (r.rows, r.sum_octet_length)
    };
    assert_eq!(copied, expected, "{method}: the generator's answer");
    let punch_hole = || {
        warm(heap.path());
        let file = std::fs::File::open(heap.path()).unwrap();
        // SAFETY: a plain system call on a descriptor this test owns.
        let rc = unsafe {
            libc::posix_fadvise(
                std::os::fd::AsRawFd::as_raw_fd(&file),
                2048 * BLCKSZ as libc::off_t,
                2048 * BLCKSZ as libc::off_t,
                libc::POSIX_FADV_DONTNEED,
            )
        };
        assert_eq!(rc, 0, "posix_fadvise(DONTNEED)");
    };
    let aio_2mb = with_advice("2MB");
    for (threads, order) in [(1, None), (1, Some(StreamOrder::BlockOrder)), (2, None)] {
        punch_hole();
        let r = seq(
            &common::checksum_pool(&aio_2mb),
            &table,
            Between::ALL,
            threads,
            order,
        );
        let what = format!("{method}, {threads} threads, {order:?}");
        assert_eq!((r.rows, r.sum_octet_length), copied, "{what}");
        assert_eq!(r.heap_pages, nblocks, "{what}");
        if threads == 1 {
            assert_eq!(r.pool.reads, 2048, "{what}: only the hole read");
            assert_eq!(
                r.pages_in_place,
                nblocks - 2048,
                "{what}: the rest in place"
            );
        } else {
            // Two threads read 2 MB chunks, and the advice, which follows them through
            // cached chunks too, may have read the hole's chunks in by the time they get
            // there: at most the hole and its neighbours are read, the rest in place.
            assert_eq!(r.pool.reads + r.pages_in_place, nblocks, "{what}: {r:?}");
            assert!(r.pool.reads < 4096, "{what}: {r:?}");
        }
    }
    punch_hole();
    let r = seq(
        &common::checksum_pool(&with_advice("64MB")),
        &table,
        Between::ALL,
        1,
        None,
    );
    assert_eq!((r.rows, r.sum_octet_length), copied, "{method}, 64MB");
    assert_eq!(r.pages_in_place, 2048, "{method}, 64MB: window 0 in place");
    assert_eq!(
        r.pool.reads,
        nblocks - 2048,
        "{method}, 64MB: the rest read"
    );
}

/// Map-ahead (`seq_map_ahead`, `scan::map_ahead`): a helper thread maps the windows a
/// serial in-place scan reads next. On, off and auto give the copied scan's answer, page
/// for page; on, it maps exactly what follows the first window of a cached heap (the first
/// window is the scanning thread's own, and populating 32 MB ahead covers the other two);
/// off, and for a parallel scan, nothing; auto follows `io_method` and the CPUs.
fn map_ahead_maps_what_the_scan_reads_next(method: IoMethodKind) {
    let dir = tempfile::tempdir().unwrap();
    let (table, expected) = generated_uniform(dir.path(), 100_000, 5);
    let nblocks = table.heap.nblocks().unwrap();
    assert!(
        nblocks > 2 * 2048 && nblocks < 3 * 2048,
        "{nblocks}: three windows"
    );
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    for setting in ["on", "off", "auto"] {
        let mut config = IoConfig {
            io_method: method,
            ..IoConfig::default()
        };
        config.set("seq_map_ahead", setting).unwrap();
        let aio = Aio::new(config).unwrap_or_else(|e| panic!("{method}: {e}"));
        let ahead = match setting {
            "on" => true,
            "off" => false,
            _ => aio.io_method() != IoMethodKind::Sync && cpus > 1,
        };
        for (threads, order) in [(1, None), (1, Some(StreamOrder::BlockOrder)), (2, None)] {
            let what = format!("{method} seq_map_ahead={setting}, {threads} threads {order:?}");
            // The machine may page out idle page cache between warming and scanning: one
            // of three tries must find the heap all cached; every answer must be right.
            let mut clean = None;
            for _ in 0..3 {
                warm(table.heap.path());
                let r = seq(
                    &common::checksum_pool(&aio),
                    &table,
                    Between::ALL,
                    threads,
                    order,
                );
                assert_eq!((r.rows, r.sum_octet_length), expected, "{what}");
                assert_eq!(r.heap_pages, nblocks, "{what}");
                assert!(r.pages_mapped_ahead <= r.pages_in_place, "{what}: {r:?}");
                // Verified ahead only where mapped ahead (the same thread, the same jobs).
                assert!(
                    r.pages_verified_ahead <= r.pages_mapped_ahead,
                    "{what}: {r:?}"
                );
                if r.pages_in_place == nblocks {
                    clean = Some(r);
                    break;
                }
            }
            let r = clean.unwrap_or_else(|| panic!("{what}: never all in place"));
            let want = if ahead && threads == 1 {
                nblocks - 2048
            } else {
                0
            };
            assert_eq!(r.pages_mapped_ahead, want, "{what}");
        }
    }
}

/// A damaged page where the map-ahead thread verifies ahead of the scan (block 3,000, in
/// the second of three windows of a cached heap, serial, `seq_map_ahead = on`): the thread's
/// check stops at it, the scanning thread checks it itself, and the pool's rules apply as in
/// the copied scan: the same error naming the block, and under `zero_damaged_pages` the same
/// answer and the one damaged page reported. Pages the thread verified are counted, and only
/// among those read in place.
fn a_damaged_page_ahead_of_the_scan_follows_the_pools_rules(method: IoMethodKind) {
    let dir = tempfile::tempdir().unwrap();
    let (table, _) = generated_uniform(dir.path(), 100_000, 5);
    let nblocks = table.heap.nblocks().unwrap();
    assert!(nblocks > 2 * 2048, "{nblocks}: three windows");
    let path = table.heap.path().to_path_buf();
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[3000 * BLCKSZ + 8000] ^= 0x55;
    std::fs::write(&path, &bytes).unwrap();
    let make = |in_place: bool| {
        let mut config = IoConfig {
            io_method: method,
            seq_read_in_place: in_place,
            ..IoConfig::default()
        };
        config.set("seq_map_ahead", "on").unwrap();
        Aio::new(config).unwrap_or_else(|e| panic!("{method}: {e}"))
    };
    let (aio_in, aio_copy) = (make(true), make(false));
    let options = ScanOptions {
        kind: ScanKind::Seq,
        predicate: Between::ALL,
        policy: DistancePolicy::Adaptive,
        parallel_workers: 1,
        stream_order: None,
    };
    warm(&path);
    let err_in = run_scan(&common::checksum_pool(&aio_in), &table, &options)
        .unwrap_err()
        .to_string();
    let err_copy = run_scan(&common::checksum_pool(&aio_copy), &table, &options)
        .unwrap_err()
        .to_string();
    assert_eq!(err_in, err_copy, "{method}");
    assert!(err_in.contains("block 3000"), "{method}: {err_in}");
    warm(&path);
    let b = seq(&zeroing_pool(&aio_copy), &table, Between::ALL, 1, None);
    assert_eq!(damaged_blocks(&b), [3000], "{method}");
    // The machine may page out idle page cache between warming and scanning: every answer
    // must be right, and one of three tries must read the heap in place but for the rest
    // of the damaged page's window.
    let mut clean = false;
    for _ in 0..3 {
        warm(&path);
        let a = seq(&zeroing_pool(&aio_in), &table, Between::ALL, 1, None);
        assert_eq!(
            (a.rows, a.sum_octet_length, a.heap_pages),
            (b.rows, b.sum_octet_length, b.heap_pages),
            "{method}"
        );
        assert_eq!(damaged_blocks(&a), [3000], "{method}");
        assert!(
            a.pages_verified_ahead <= a.pages_mapped_ahead,
            "{method}: {a:?}"
        );
        if a.pages_in_place == nblocks - (4096 - 3000) {
            clean = true;
            break;
        }
    }
    assert!(clean, "{method}: never in place but for blocks 3000..4096");
}

per_method!(
    a_damaged_page_ahead_of_the_scan_follows_the_pools_rules,
    map_ahead_maps_what_the_scan_reads_next,
    fixture_in_place_equals_copied,
    partly_cached_heap_alternates,
    a_hole_in_a_cached_heap_costs_only_the_hole,
    a_damaged_page_follows_the_pools_rules
);
