//! Throughput of `pg_checksum_page`, in bytes per second on one core.
//!
//! The pages are filled with pseudo-random bytes (a fixed xorshift seed) so the multiplier
//! sees realistic input, and there are 1024 of them (8 MiB) so the working set is larger than
//! L2 like a real verify pass, but still cache-friendly enough to measure the hash, not DRAM.
//!
//! Run: `cargo bench --bench checksum -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use pageio::page::checksum::pg_checksum_page_portable;
use pageio::page::{pg_checksum_page, BLCKSZ};

/// Pages per iteration.
const PAGE_COUNT: usize = 1024;

fn make_pages() -> Vec<[u8; BLCKSZ]> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    (0..PAGE_COUNT)
        .map(|_| {
            let mut page = [0u8; BLCKSZ];
            for chunk in page.chunks_exact_mut(8) {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                chunk.copy_from_slice(&state.to_le_bytes());
            }
            page
        })
        .collect()
}

fn bench_checksum(c: &mut Criterion) {
    let pages = make_pages();
    let mut group = c.benchmark_group("pg_checksum_page");
    group.throughput(Throughput::Bytes((PAGE_COUNT * BLCKSZ) as u64));
    group.bench_function("1024 pages", |b| {
        b.iter(|| {
            let mut acc = 0u32;
            for (blkno, page) in pages.iter().enumerate() {
                acc = acc.wrapping_add(pg_checksum_page(black_box(page), blkno as u32) as u32);
            }
            black_box(acc)
        })
    });
    // The same hash compiled for the baseline target only (no AVX2 dispatch), for comparison.
    group.bench_function("1024 pages, portable", |b| {
        b.iter(|| {
            let mut acc = 0u32;
            for (blkno, page) in pages.iter().enumerate() {
                acc = acc
                    .wrapping_add(pg_checksum_page_portable(black_box(page), blkno as u32) as u32);
            }
            black_box(acc)
        })
    });
    group.finish();
}

criterion_group!(benches, bench_checksum);
criterion_main!(benches);
