//! Look-ahead policies on partly cached data: PostgreSQL 18's (×2 on a miss, −1 on a hit)
//! against the adaptive one, on the same relation, in one run.
//!
//! A 1M-row `uniform` heap (55556 pages) is generated; for each pattern and policy a fresh
//! buffer pool is pre-warmed with part of the table, the file is evicted from the page
//! cache, and the whole table is streamed with io_uring and direct I/O (so the only
//! read-ahead is the stream's). Prints a markdown table.
//!
//!   cargo bench -p pageio --bench distance_policy

use std::time::Instant;

use pageio::buffer::{BufferPool, PageCheckOptions};
use pageio::config::{IoConfig, IoMethodKind};
use pageio::gen::{generate, DataSet, GenOptions};
use pageio::stream::{DistancePolicy, ReadStream, StreamOptions};
use pageio::Aio;

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` would pass nothing: run only when benchmarking.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let gen_aio = Aio::new(IoConfig::default()).unwrap();
    let opts = GenOptions {
        rows: 1_000_000,
        seed: 3,
        scale: 1,
        overwrite: true,
    };
    let m = generate(&gen_aio, dir.path(), DataSet::Uniform, &opts, &|_| {}).unwrap();
    let heap = m.heap_file(&dir.path().join("uniform"));
    let pages = m.heap_pages;
    type Pattern = (&'static str, fn(u64) -> bool);
    let patterns: [Pattern; 4] = [
        ("nothing cached", |_| false),
        ("every other page cached", |b| b % 2 == 0),
        ("3 of 4 pages cached, scattered", |b| {
            (b.wrapping_mul(2654435761) >> 7) % 4 != 0
        }),
        ("cached 512-page runs between uncached 64-page runs", |b| {
            b % 576 < 512
        }),
    ];
    println!("| cached | policy | time s | I/Os | avg I/O blocks | stalls | distance avg |");
    println!("|---|---|---:|---:|---:|---:|---:|");
    for (name, cached) in patterns {
        for policy in [DistancePolicy::Pg18, DistancePolicy::Adaptive] {
            let aio = Aio::new(IoConfig {
                io_method: IoMethodKind::IoUring,
                direct_io: true,
                shared_buffers_bytes: 1 << 30,
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
            let mut backend = aio.backend().unwrap();
            let rel = pool.register(&heap);
            for b in (0..pages).filter(|&b| cached(b)) {
                drop(pool.read_buffer(&mut backend, rel, b, None).unwrap());
            }
            heap.evict_from_page_cache().unwrap();
            let mut next = 0u64;
            let mut stream = ReadStream::new(
                &pool,
                &heap,
                StreamOptions {
                    policy,
                    bulk_read: false,
                    ..StreamOptions::default()
                },
                || {
                    (next < pages).then(|| {
                        next += 1;
                        (next - 1, ())
                    })
                },
            );
            let start = Instant::now();
            let mut n = 0u64;
            while let Some(buf) = stream.next(&mut backend).unwrap() {
                std::hint::black_box(buf.page()[0]);
                n += 1;
            }
            let t = start.elapsed().as_secs_f64();
            assert_eq!(n, pages);
            let s = stream.stats();
            println!(
                "| {name} | {policy:?} | {t:.3} | {} | {:.1} | {} | {:.1} |",
                s.ios, s.avg_io_blocks, s.stalls, s.distance_avg
            );
        }
    }
}
