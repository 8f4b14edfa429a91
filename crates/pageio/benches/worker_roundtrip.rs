//! Backend ↔ I/O-worker round trips per second.
//!
//! One backend submits a single 8 kB read of a page-cache-resident file and waits for it,
//! over and over: each iteration is one hand-off to a worker and one completion back. The
//! same loop under `io_method=sync` (no hand-off at all) and `io_uring` is measured in the
//! same run, so the cost of the hand-off is the difference. Criterion reports elements/s,
//! i.e. round trips per second. PostgreSQL's signal-based worker hand-off manages roughly
//! 250k–500k per second.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use pageio::aio::{IoBuffer, IoTarget};
use pageio::config::{IoConfig, IoMethodKind, BLCKSZ};
use pageio::storage::{OpenMode, RelFile};
use pageio::Aio;

fn roundtrip(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let rel = RelFile::new(dir.path().join("16384"));
    let mut group = c.benchmark_group("roundtrip_8kB_cached_read");
    group.throughput(Throughput::Elements(1));
    let cases: [(&str, IoMethodKind, usize); 4] = [
        ("sync_inline", IoMethodKind::Sync, 1),
        ("worker_x1", IoMethodKind::Worker, 1),
        ("worker_x3", IoMethodKind::Worker, 3),
        ("io_uring", IoMethodKind::IoUring, 1),
    ];
    for (name, method, io_workers) in cases {
        let aio = Aio::new(IoConfig {
            io_method: method,
            io_workers,
            ..IoConfig::default()
        })
        .unwrap();
        let mut backend = aio.backend().unwrap();
        backend
            .write_blocks(&rel, 0, IoBuffer::zeroed(BLCKSZ))
            .unwrap();
        let (file, offset) = rel.locate(aio.files(), 0, 1, OpenMode::Read).unwrap();
        let target = IoTarget {
            path: rel.display_name().clone(),
            first_block: 0,
            nblocks: 1,
        };
        let mut buffer = Some(IoBuffer::zeroed(BLCKSZ));
        group.bench_function(name, |b| {
            b.iter(|| {
                let h = backend.acquire().unwrap();
                let wref = h
                    .stage_read_owned(file.clone(), offset, buffer.take().unwrap(), target.clone())
                    .unwrap();
                let done = backend.wait(wref).unwrap();
                assert!(done.result.is_ok());
                buffer = done.buffer;
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_secs(1))
        .measurement_time(std::time::Duration::from_secs(3));
    targets = roundtrip
}
criterion_main!(benches);
