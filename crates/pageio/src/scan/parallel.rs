//! # Parallel sequential scans
//!
//! A sequential scan is CPU-bound as soon as the device is fast: every page is copied,
//! checksummed and walked tuple by tuple on the thread that consumes the stream. PostgreSQL
//! answers with a *parallel* seq scan: several processes share one heap, each takes the next
//! *chunk* of blocks from a shared counter, and a Gather node combines their partial
//! aggregates. This module does the same with threads:
//!
//! ```text
//!   BlockAllocator (one atomic: blocks handed out so far)
//!     │ fetch_add(chunk)          │ fetch_add(chunk)           │ …
//!     ▼                           ▼                            ▼
//!   thread 0 (the caller)       thread 1                     thread N−1
//!   own Backend (AIO handles,   own Backend                  own Backend
//!   its own io_uring ring)      ReadStream(bulk-read ring)   ReadStream
//!   ReadStream(bulk-read ring)  its own tuple sink           its own tuple sink
//!   its own tuple sink
//!     │ partial ScanResult        │                            │
//!     │ + the sink's answers      │                            │
//!     └──────────────► combine_partial (ScanResult::merge) ◄───┘
//!                      + the caller merges the sinks' answers
//! ```
//!
//! **Chunks** follow PostgreSQL's `table_block_parallelscan_startblock_init` /
//! `table_block_parallelscan_nextpage`: a worker's chunk size starts at
//! `nblocks / PARALLEL_SEQSCAN_NCHUNKS` rounded up to a power of two (at least 1, at most
//! `PARALLEL_SEQSCAN_MAX_CHUNK_SIZE` blocks), so a heap is cut into about 2048 chunks — large
//! enough that each worker's stream sees long runs to combine into `io_combine_limit` reads,
//! small enough to share the work. Once fewer than `PARALLEL_SEQSCAN_RAMPDOWN_CHUNKS` chunks'
//! worth of blocks remain, each worker halves its chunk size at every allocation, down to one
//! block, so the workers finish at about the same time instead of one of them reading the
//! last large chunk alone. Every block is handed out exactly once: the only shared state is
//! the counter of blocks allocated, advanced with one `fetch_add` per chunk.
//!
//! **Worked example.** A 1112-block heap (the fixture's `uniform`): 1112 / 2048 = 0 → chunk
//! size 1, so blocks go out one at a time, as PostgreSQL does for small tables. A 5M-row
//! `uniform` table of 280,000 blocks: 280000 / 2048 = 136 → chunk 256 blocks (2 MB, sixteen
//! 128 kB reads); ramp-down starts when fewer than 256 × 64 = 16,384 blocks remain, and the
//! last chunks are 128, 64, …, 1 blocks.
//!
//! **Threads and backends.** A [`crate::Backend`] belongs to one thread (it owns that
//! thread's AIO handles and, under io_uring, its ring), so each scanning thread registers its
//! own and reads through its own [`ReadStream`] with its own bulk-read ring; the buffer pool
//! and the I/O method (the worker pool) are shared. The calling thread scans too, as
//! PostgreSQL's leader does with `parallel_leader_participation = on`, so `--parallel 2` is
//! the caller plus one more thread. A thread that cannot be started is simply not there: the
//! others take its chunks.
//!
//! **Combining.** Each thread produces a partial [`ScanResult`] (its pages, stream statistics
//! and I/O counters) and its tuple sink's answers; [`combine_partial`] folds the partial
//! results into the total, and the caller combines the answers: rows and byte sums for the
//! fixed-shape scans, each aggregate's `merge` for a table read by name
//! (`query::run_table_query`, which keeps a query whose answer depends on the order of
//! additions — a float sum — on one thread). Counters
//! that belong to the whole pool (hits, reads, damaged pages) are taken once, before and after
//! all threads.
//!
//! **Errors.** The first thread to fail (a damaged page, a failed read) stops the allocator:
//! every other thread's next request for a block gets none and its loop checks the same flag
//! after each page, so all threads finish their in-flight reads and return within one
//! look-ahead window. The scan then returns that first error, which names the file and the
//! block as in a serial scan.

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use super::{
    checked_nblocks, QualifyingRows, ScanError, ScanOptions, ScanResult, Table, TupleSink,
};
use crate::aio::IoCounters;
use crate::buffer::{BufferPool, PoolCounters};
use crate::stream::readahead::{self, SeqReadAhead};
use crate::stream::StreamStats;

/// PostgreSQL's `PARALLEL_SEQSCAN_NCHUNKS`: the heap is cut into about this many chunks, so
/// that work can be shared out finely while each chunk stays a long sequential run.
pub const PARALLEL_SEQSCAN_NCHUNKS: u64 = 2048;

/// PostgreSQL's `PARALLEL_SEQSCAN_RAMPDOWN_CHUNKS`: chunks shrink once fewer than this many
/// chunks' worth of blocks remain, so all workers finish together.
pub const PARALLEL_SEQSCAN_RAMPDOWN_CHUNKS: u64 = 64;

/// PostgreSQL's `PARALLEL_SEQSCAN_MAX_CHUNK_SIZE` (8192 blocks = 64 MB): beyond this a worker
/// would hold a large share of even a huge table, and the ramp-down would start too early.
pub const PARALLEL_SEQSCAN_MAX_CHUNK_SIZE: u64 = 8192;

/// Most threads one parallel scan runs. PostgreSQL bounds `max_parallel_workers_per_gather`
/// by `max_worker_processes`; here each thread takes one of the AIO subsystem's
/// [`crate::aio::MAX_BACKENDS`] slots and its `io_max_concurrency` handles, so a quarter of
/// them leaves room for the other scans sharing the subsystem.
pub const MAX_PARALLEL_WORKERS: usize = crate::aio::MAX_BACKENDS / 4;

/// Most threads the default uses: PostgreSQL's `max_parallel_workers` default (8). Beyond a
/// handful of threads a seq scan is limited by the device, not by per-page work.
pub const DEFAULT_PARALLEL_WORKERS_LIMIT: usize = 8;

/// The default number of scanning threads: the CPUs this process may use
/// (`std::thread::available_parallelism`, which honours affinity masks and cgroup quotas),
/// at most [`DEFAULT_PARALLEL_WORKERS_LIMIT`].
pub fn default_parallel_workers() -> usize {
    std::thread::available_parallelism()
        .map(NonZeroUsize::get)
        .unwrap_or(1)
        .clamp(1, DEFAULT_PARALLEL_WORKERS_LIMIT)
}

/// The shared block allocator of one parallel scan (PostgreSQL's
/// `ParallelBlockTableScanDescData`): the heap's size and how many blocks have been handed out.
#[derive(Debug)]
pub struct BlockAllocator {
    nblocks: u64,
    nallocated: AtomicU64,
    stopped: AtomicBool,
}

impl BlockAllocator {
    /// An allocator over blocks `0..nblocks`.
    pub fn new(nblocks: u64) -> BlockAllocator {
        BlockAllocator {
            nblocks,
            nallocated: AtomicU64::new(0),
            stopped: AtomicBool::new(false),
        }
    }

    /// The heap's size in blocks.
    pub fn nblocks(&self) -> u64 {
        self.nblocks
    }

    /// A worker's view: its own chunk size and what is left of its current chunk
    /// (PostgreSQL's `ParallelBlockTableScanWorkerData`).
    pub fn worker(&self) -> WorkerBlocks<'_> {
        // pg_nextpower2_32(Max(nblocks / NCHUNKS, 1)), capped.
        let chunk_size_blocks = (self.nblocks / PARALLEL_SEQSCAN_NCHUNKS)
            .max(1)
            .next_power_of_two()
            .min(PARALLEL_SEQSCAN_MAX_CHUNK_SIZE);
        WorkerBlocks {
            allocator: self,
            chunk_size_blocks,
            chunk_remaining_blocks: 0,
            next_block: 0,
        }
    }

    /// Stops the scan: no block is handed out after this (a thread failed).
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
    }

    /// Whether [`BlockAllocator::stop`] was called.
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }
}

/// One worker's share of a [`BlockAllocator`]: hands out the blocks of its current chunk and
/// takes the next chunk when it runs out.
#[derive(Debug)]
pub struct WorkerBlocks<'a> {
    allocator: &'a BlockAllocator,
    chunk_size_blocks: u64,
    chunk_remaining_blocks: u64,
    next_block: u64,
}

impl WorkerBlocks<'_> {
    /// The next block for this worker, or `None` when every block has been handed out (or
    /// the scan was stopped).
    pub fn next_block(&mut self) -> Option<u64> {
        if self.allocator.is_stopped() {
            return None;
        }
        let nblocks = self.allocator.nblocks;
        if self.chunk_remaining_blocks > 0 {
            self.chunk_remaining_blocks -= 1;
            self.next_block += 1;
        } else {
            // Ramp down near the end: once fewer than RAMPDOWN_CHUNKS chunks remain, each
            // allocation halves this worker's chunk, so the last chunks are small and the
            // workers run out of work at about the same moment.
            let ramp_start =
                nblocks.saturating_sub(self.chunk_size_blocks * PARALLEL_SEQSCAN_RAMPDOWN_CHUNKS);
            if self.chunk_size_blocks > 1
                && self.allocator.nallocated.load(Ordering::Relaxed) > ramp_start
            {
                self.chunk_size_blocks >>= 1;
            }
            self.next_block = self
                .allocator
                .nallocated
                .fetch_add(self.chunk_size_blocks, Ordering::Relaxed);
            self.chunk_remaining_blocks = self.chunk_size_blocks - 1;
        }
        if self.next_block >= nblocks {
            // Every later block is past the end too: end this worker's chunk here.
            self.chunk_remaining_blocks = 0;
            return None;
        }
        Some(self.next_block)
    }

    /// The next run of consecutive blocks for this worker: the rest of its current chunk,
    /// or the next chunk, cut at the heap's end; `None` as [`WorkerBlocks::next_block`]. The
    /// same blocks, in the same order, as calling `next_block` until the chunk runs out.
    pub fn next_range(&mut self) -> Option<std::ops::Range<u64>> {
        let first = self.next_block()?;
        // next_block returned a block below nblocks, so this does not underflow.
        let rest = self
            .chunk_remaining_blocks
            .min(self.allocator.nblocks - first - 1);
        self.next_block += rest;
        self.chunk_remaining_blocks -= rest;
        Some(first..first + 1 + rest)
    }

    /// This worker's current chunk size in blocks.
    pub fn chunk_size_blocks(&self) -> u64 {
        self.chunk_size_blocks
    }
}

/// Folds one thread's partial result into the total: the one place partial results of a
/// parallel scan meet (see the module docs). Pool-wide counters are not summed here: they
/// are measured once around the whole scan.
pub fn combine_partial(total: &mut ScanResult, partial: &ScanResult) {
    total.merge(partial);
}

impl ScanResult {
    /// Adds another part of the same scan: rows, sums, pages, stream statistics (averages
    /// weighted by what they average over) and this part's I/O counters.
    pub fn merge(&mut self, other: &ScanResult) {
        self.rows += other.rows;
        self.sum_octet_length += other.sum_octet_length;
        self.heap_pages += other.heap_pages;
        self.pages_in_place += other.pages_in_place;
        self.pages_mapped_ahead += other.pages_mapped_ahead;
        self.pages_verified_ahead += other.pages_verified_ahead;
        self.index_pages += other.index_pages;
        merge_stream_stats(&mut self.stream, &other.stream);
        self.io = add_io_counters(&self.io, &other.io);
    }
}

fn weighted(avg_a: f64, n_a: u64, avg_b: f64, n_b: u64) -> f64 {
    let n = n_a + n_b;
    if n == 0 {
        0.0
    } else {
        (avg_a * n_a as f64 + avg_b * n_b as f64) / n as f64
    }
}

fn merge_stream_stats(into: &mut StreamStats, other: &StreamStats) {
    into.avg_io_blocks = weighted(into.avg_io_blocks, into.ios, other.avg_io_blocks, other.ios);
    into.avg_ios_in_progress_at_stall = weighted(
        into.avg_ios_in_progress_at_stall,
        into.stalls,
        other.avg_ios_in_progress_at_stall,
        other.stalls,
    );
    into.distance_avg = weighted(
        into.distance_avg,
        into.buffers,
        other.distance_avg,
        other.buffers,
    );
    into.buffers += other.buffers;
    into.shared_hit += other.shared_hit;
    into.shared_read += other.shared_read;
    into.ios += other.ios;
    into.stalls += other.stalls;
    into.wait_ns += other.wait_ns;
    into.distance_max = into.distance_max.max(other.distance_max);
    into.distance_capacity = into.distance_capacity.max(other.distance_capacity);
    into.advice += other.advice;
    into.io_budget = into.io_budget.max(other.io_budget);
    into.max_ios_in_flight = into.max_ios_in_flight.max(other.max_ios_in_flight);
    into.out_of_order += other.out_of_order;
}

fn add_io_counters(a: &IoCounters, b: &IoCounters) -> IoCounters {
    IoCounters {
        ios_issued: a.ios_issued + b.ios_issued,
        kernel_ios: a.kernel_ios + b.kernel_ios,
        ios_merged: a.ios_merged + b.ios_merged,
        blocks: a.blocks + b.blocks,
        bytes: a.bytes + b.bytes,
        io_ns: a.io_ns + b.io_ns,
        wait_ns: a.wait_ns + b.wait_ns,
        waits: a.waits + b.waits,
        errors: a.errors + b.errors,
        partials: a.partials + b.partials,
        executed_by_submitter: a.executed_by_submitter + b.executed_by_submitter,
    }
}

pub(super) fn io_counters_delta(before: &IoCounters, after: &IoCounters) -> IoCounters {
    IoCounters {
        ios_issued: after.ios_issued - before.ios_issued,
        kernel_ios: after.kernel_ios - before.kernel_ios,
        ios_merged: after.ios_merged - before.ios_merged,
        blocks: after.blocks - before.blocks,
        bytes: after.bytes - before.bytes,
        io_ns: after.io_ns - before.io_ns,
        wait_ns: after.wait_ns - before.wait_ns,
        waits: after.waits - before.waits,
        errors: after.errors - before.errors,
        partials: after.partials - before.partials,
        executed_by_submitter: after.executed_by_submitter - before.executed_by_submitter,
    }
}

/// One thread's share of the scan: its own backend and stream over the blocks the allocator
/// gives it, its tuples handed to the sink `make` builds on this thread (so a sink may hold
/// thread-bound state, such as a TOAST reader's backend), whose answers `finish` takes out.
/// Stops the allocator when it fails, so the other threads end too.
fn scan_part<S: TupleSink, O>(
    pool: &BufferPool,
    table: &Table,
    options: &ScanOptions,
    allocator: &BlockAllocator,
    read_ahead: &SeqReadAhead,
    make: &(dyn Fn() -> Result<S, ScanError> + Sync),
    finish: &(dyn Fn(S) -> O + Sync),
) -> Result<(ScanResult, O), ScanError> {
    let outcome = (|| {
        let mut backend = pool.aio().backend()?;
        let io_before = backend.counters();
        let mut sink = make()?;
        let mut part = ScanResult::default();
        super::in_place::scan_blocks(
            pool,
            &mut backend,
            table,
            options,
            super::in_place::Blocks::Parallel(allocator.worker()),
            read_ahead,
            &mut sink,
            &mut part,
            Some(allocator),
        )?;
        part.io = io_counters_delta(&io_before, &backend.counters());
        Ok((part, finish(sink)))
    })();
    if outcome.is_err() {
        allocator.stop();
    }
    outcome
}

/// Runs a sequential scan on `workers` threads (the caller and `workers - 1` more) and
/// combines their results; see the module docs.
pub(super) fn parallel_seq_scan(
    pool: &BufferPool,
    table: &Table,
    options: &ScanOptions,
    workers: usize,
) -> Result<ScanResult, ScanError> {
    let make = || Ok(QualifyingRows::new(table, options.predicate));
    let finish = |acc: QualifyingRows<'_>| (acc.rows, acc.sum);
    let (mut total, parts) = parallel_seq_scan_with(pool, table, options, workers, &make, &finish)?;
    for (rows, sum) in parts {
        total.rows += rows;
        total.sum_octet_length += sum;
    }
    Ok(total)
}

/// [`parallel_seq_scan`] for any tuple sink: each thread builds its own with `make` and
/// hands its answers out through `finish`; the caller combines those (`parts`, one per
/// thread that ran). The returned [`ScanResult`] holds everything but the sinks' answers.
pub(super) fn parallel_seq_scan_with<S: TupleSink, O: Send>(
    pool: &BufferPool,
    table: &Table,
    options: &ScanOptions,
    workers: usize,
    make: &(dyn Fn() -> Result<S, ScanError> + Sync),
    finish: &(dyn Fn(S) -> O + Sync),
) -> Result<(ScanResult, Vec<O>), ScanError> {
    let workers = workers.clamp(1, MAX_PARALLEL_WORKERS);
    let nblocks = checked_nblocks(&table.heap)?;
    let pool_before = pool.counters();
    let damaged_before = pool.damaged_pages_seq();
    let start = Instant::now();
    let allocator = BlockAllocator::new(nblocks);
    let read_ahead = readahead::for_scan(pool, nblocks);
    // The first error wins: later ones are usually threads stopped by it.
    let first_error: Mutex<Option<ScanError>> = Mutex::new(None);
    let record = |outcome: Result<(ScanResult, O), ScanError>| -> Option<(ScanResult, O)> {
        match outcome {
            Ok(part) => Some(part),
            Err(e) => {
                let mut slot = first_error.lock().unwrap_or_else(|p| p.into_inner());
                if slot.is_none() {
                    *slot = Some(e);
                }
                None
            }
        }
    };
    let mut total = ScanResult::default();
    let mut outputs = Vec::with_capacity(workers);
    let mut launched = 1usize;
    std::thread::scope(|scope| {
        let mut joins = Vec::with_capacity(workers.saturating_sub(1));
        for worker_index in 1..workers {
            let spawned = std::thread::Builder::new()
                .name(format!("parallel seq scan {worker_index}"))
                .spawn_scoped(scope, || {
                    scan_part(pool, table, options, &allocator, &read_ahead, make, finish)
                });
            // A thread that cannot be started leaves its chunks to the others.
            if let Ok(join) = spawned {
                joins.push(join);
                launched += 1;
            }
        }
        if let Some((part, out)) = record(scan_part(
            pool,
            table,
            options,
            &allocator,
            &read_ahead,
            make,
            finish,
        )) {
            combine_partial(&mut total, &part);
            outputs.push(out);
        }
        for join in joins {
            match join.join() {
                Ok(outcome) => {
                    if let Some((part, out)) = record(outcome) {
                        combine_partial(&mut total, &part);
                        outputs.push(out);
                    }
                }
                // A panic in a scanning thread is a bug; surface it on the caller's thread.
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
    });
    if let Some(e) = first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    total.parallel_workers = launched;
    total.read_ahead_advice = read_ahead.calls();
    total.read_ahead = read_ahead.report();
    total.elapsed_s = start.elapsed().as_secs_f64();
    total.pool = pool_counters_delta(&pool_before, &pool.counters());
    total.pages_failed_verification = total.pool.verification_failures;
    let heap_name = table.heap.display_name().to_string();
    total.damaged_pages = pool
        .damaged_pages_since(damaged_before)
        .into_iter()
        .filter(|d| *d.path == *heap_name)
        .collect();
    super::sort_damaged_pages(&mut total.damaged_pages);
    Ok((total, outputs))
}

pub(super) fn pool_counters_delta(before: &PoolCounters, after: &PoolCounters) -> PoolCounters {
    PoolCounters {
        hits: after.hits - before.hits,
        reads: after.reads - before.reads,
        verification_failures: after.verification_failures - before.verification_failures,
        pages_zeroed: after.pages_zeroed - before.pages_zeroed,
        evictions: after.evictions - before.evictions,
        waited_on_other_io: after.waited_on_other_io - before.waited_on_other_io,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn drain(allocator: &BlockAllocator) -> Vec<u64> {
        let mut worker = allocator.worker();
        std::iter::from_fn(|| worker.next_block()).collect()
    }

    #[test]
    fn chunk_size_follows_postgresql() {
        assert_eq!(BlockAllocator::new(0).worker().chunk_size_blocks(), 1);
        assert_eq!(BlockAllocator::new(1112).worker().chunk_size_blocks(), 1);
        assert_eq!(
            BlockAllocator::new(280_000).worker().chunk_size_blocks(),
            256
        );
        assert_eq!(
            BlockAllocator::new(1 << 40).worker().chunk_size_blocks(),
            PARALLEL_SEQSCAN_MAX_CHUNK_SIZE
        );
    }

    #[test]
    fn one_worker_gets_every_block_in_order() {
        for nblocks in [0u64, 1, 7, 2048, 100_000] {
            let got = drain(&BlockAllocator::new(nblocks));
            assert_eq!(got, (0..nblocks).collect::<Vec<_>>(), "nblocks {nblocks}");
        }
    }

    #[test]
    fn chunks_ramp_down_to_one_block_at_the_end() {
        let allocator = BlockAllocator::new(280_000);
        let mut worker = allocator.worker();
        let mut sizes = Vec::new();
        while worker.next_block().is_some() {
            if worker.chunk_remaining_blocks + 1 == worker.chunk_size_blocks {
                sizes.push(worker.chunk_size_blocks);
            }
        }
        assert_eq!(sizes[0], 256);
        assert_eq!(*sizes.last().unwrap(), 1);
        assert!(sizes.windows(2).all(|w| w[1] <= w[0]), "never grows");
    }

    #[test]
    fn threads_share_every_block_exactly_once() {
        for (nblocks, threads) in [(1u64, 3usize), (5, 7), (10_000, 2), (300_001, 7)] {
            let allocator = BlockAllocator::new(nblocks);
            let parts: Vec<Vec<u64>> = std::thread::scope(|s| {
                let joins: Vec<_> = (0..threads)
                    .map(|_| s.spawn(|| drain(&allocator)))
                    .collect();
                joins.into_iter().map(|j| j.join().unwrap()).collect()
            });
            let total: usize = parts.iter().map(Vec::len).sum();
            let distinct: HashSet<u64> = parts.iter().flatten().copied().collect();
            assert_eq!(total as u64, nblocks);
            assert_eq!(distinct.len() as u64, nblocks);
            assert!(distinct.iter().all(|&b| b < nblocks));
        }
    }

    #[test]
    fn ranges_hand_out_the_same_blocks_as_single_blocks() {
        for nblocks in [0u64, 1, 7, 2048, 100_000, 300_001] {
            let allocator = BlockAllocator::new(nblocks);
            let mut worker = allocator.worker();
            let mut got = Vec::new();
            let mut longest = 0;
            while let Some(r) = worker.next_range() {
                assert!(!r.is_empty() && r.end <= nblocks, "{r:?} of {nblocks}");
                longest = longest.max(r.end - r.start);
                got.extend(r);
            }
            assert_eq!(
                got,
                drain(&BlockAllocator::new(nblocks)),
                "nblocks {nblocks}"
            );
            // Whole chunks: 300,001 blocks / 2048 → chunks of 256.
            if nblocks == 300_001 {
                assert_eq!(longest, 256);
            }
        }
    }

    #[test]
    fn a_stopped_allocator_hands_out_nothing() {
        let allocator = BlockAllocator::new(100);
        let mut worker = allocator.worker();
        assert_eq!(worker.next_block(), Some(0));
        allocator.stop();
        assert_eq!(worker.next_block(), None);
    }
}
