//! The read stream's fast path: streaming a relation that is entirely in the buffer pool
//! against the floor, one bare pin + unpin per page. Criterion reports pages per second.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use pageio::buffer::{BufferPool, PageCheckOptions, Pinned};
use pageio::config::IoConfig;
use pageio::gen::{generate, DataSet, GenOptions};
use pageio::stream::{ReadStream, StreamOptions};
use pageio::Aio;

fn cached_stream(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let aio = Aio::new(IoConfig::default()).unwrap();
    let opts = GenOptions {
        rows: 100_000,
        seed: 1,
        scale: 1,
        overwrite: true,
    };
    let m = generate(&aio, dir.path(), DataSet::Uniform, &opts, &|_| {}).unwrap();
    let heap = m.heap_file(&dir.path().join("uniform"));
    let pages = m.heap_pages;
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
    // Warm the pool: every page read once.
    for b in 0..pages {
        drop(pool.read_buffer(&mut backend, rel, b, None).unwrap());
    }
    let mut group = c.benchmark_group("cached_pages");
    group.throughput(Throughput::Elements(pages));
    group.bench_function("pin_unpin_floor", |bench| {
        bench.iter(|| {
            for b in 0..pages {
                match pool.pin(rel, b, None).unwrap() {
                    Pinned::Valid(id) => pool.unpin(id),
                    other => panic!("not cached: {other:?}"),
                }
            }
        })
    });
    group.bench_function("read_stream", |bench| {
        bench.iter(|| {
            let mut next = 0u64;
            let mut stream = ReadStream::new(&pool, &heap, StreamOptions::default(), || {
                (next < pages).then(|| {
                    next += 1;
                    (next - 1, ())
                })
            });
            let mut n = 0u64;
            while let Some(buf) = stream.next(&mut backend).unwrap() {
                // Touch the page so the loop cannot be optimised into nothing.
                std::hint::black_box(buf.page()[0]);
                n += 1;
            }
            assert_eq!(n, pages);
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_secs(1))
        .measurement_time(std::time::Duration::from_secs(3));
    targets = cached_stream
}
criterion_main!(benches);
