//! Order-free read streams (`StreamOrder::Completion`) and the stream's handle budget, once
//! per io_method, each under a watchdog: an order-free stream waits for *any* of its reads,
//! so a lost wake-up or a read nobody takes in shows up as a hang — which must fail the test,
//! not stall the suite. The suite's profile has debug assertions on, so the stream's
//! invariants (pins + pending ≤ pin limit, distances in bounds) are checked on every step.
//!
//! What is asserted: every block named is handed out exactly once, with the per-block data
//! the callback attached to it and the right page — for sequential, random and repeated
//! patterns, with part of the relation cached; with injected short reads (re-read, nothing
//! lost or duplicated) and errors (surfacing with file and block); the stream never has
//! more reads in flight than `io_max_concurrency` handles and never makes the backend wait
//! for a handle; the adaptive distance pins about two reads per handle, not the whole pin
//! limit, when the reads are single pages; one slow read does not hold back the others
//! (worker, where a slow read is a real thread sleeping); and scans of the PostgreSQL 18
//! fixture answer the same in both orders.

#[macro_use]
mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pageio::aio::{Fault, FaultInjector, FaultPlan, IoOp, IoTarget};
use pageio::buffer::{BufferError, BufferPool};
use pageio::config::{IoConfig, IoMethodKind, BLCKSZ};
use pageio::page::heap::ColumnType;
use pageio::scan::{run_scan, Between, ScanOptions, Table};
use pageio::storage::{ForkNumber, RelFile};
use pageio::stream::{DistancePolicy, ReadStream, StreamOptions, StreamOrder, StreamStats};
use pageio::Aio;

/// Bound on each case: each reads a few thousand blocks, in well under a second (the slow
/// read case sleeps [`SLOW_READ`] once).
const WATCHDOG_SECS: u64 = 60;

/// Blocks of the test relation: several times the stream's look-ahead, with a ragged end.
const NBLOCKS: u64 = 300;

/// How long the injected slow read takes: long against a cached 8 kB read (microseconds),
/// short enough to keep the test quick.
const SLOW_READ: Duration = Duration::from_millis(300);

fn aio_with(method: IoMethodKind, config: IoConfig) -> Aio {
    let aio = Aio::new(IoConfig {
        io_method: method,
        ..config
    })
    .unwrap_or_else(|e| panic!("{method}: {e}"));
    assert_eq!(aio.io_method(), method, "no silent fallback");
    aio
}

fn aio(method: IoMethodKind) -> Aio {
    aio_with(
        method,
        IoConfig {
            shared_buffers_bytes: 1 << 20,
            ..IoConfig::default()
        },
    )
}

use common::numbered_page as page;

fn make_rel(aio: &Aio, dir: &std::path::Path) -> RelFile {
    common::numbered_relation(aio, dir, NBLOCKS)
}

/// What one stream run handed out: `(position in the request, block)` in the order handed
/// out, the stream's statistics, and the backend's handle waits.
struct Run {
    handed_out: Vec<(usize, u64)>,
    stats: StreamStats,
    handle_waits: u64,
}

/// Reads `blocks` through a stream whose per-block data is the block's position in the
/// request; checks each page as it comes. On an error, returns what was handed out before
/// it with the error.
fn run(
    aio: &Aio,
    pool: &BufferPool,
    rel: &RelFile,
    blocks: &[u64],
    options: StreamOptions,
) -> Result<Run, (Vec<(usize, u64)>, BufferError)> {
    let mut backend = aio.backend().unwrap();
    let request: Vec<(u64, usize)> = blocks
        .iter()
        .enumerate()
        .map(|(position, &block)| (block, position))
        .collect();
    let mut next = request.into_iter();
    let mut stream = ReadStream::new(pool, rel, options, move || next.next());
    let mut handed_out = Vec::new();
    loop {
        match stream.next(&mut backend) {
            Ok(Some(buffer)) => {
                assert_eq!(
                    blocks[buffer.data], buffer.block,
                    "the data of request position {} belongs to block {}",
                    buffer.data, blocks[buffer.data]
                );
                assert!(
                    buffer.page()[..] == page(buffer.block)[..],
                    "block {} has another block's page",
                    buffer.block
                );
                handed_out.push((buffer.data, buffer.block));
            }
            Ok(None) => break,
            Err(e) => return Err((handed_out, e)),
        }
    }
    Ok(Run {
        handed_out,
        stats: stream.stats(),
        handle_waits: backend.handle_waits(),
    })
}

/// Every request position handed out exactly once.
fn assert_exactly_once(blocks: &[u64], handed_out: &[(usize, u64)], what: &str) {
    let mut positions: Vec<usize> = handed_out.iter().map(|&(position, _)| position).collect();
    positions.sort_unstable();
    assert_eq!(
        positions,
        (0..blocks.len()).collect::<Vec<_>>(),
        "{what}: every block exactly once"
    );
}

fn completion() -> StreamOptions {
    StreamOptions {
        order: StreamOrder::Completion,
        ..StreamOptions::default()
    }
}

/// A xorshift sequence of `n` blocks (with repeats and gaps).
fn random_blocks(n: usize, seed: u64) -> Vec<u64> {
    let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ seed;
    (0..n)
        .map(|_| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % NBLOCKS
        })
        .collect()
}

fn every_block_exactly_once_with_its_data(method: IoMethodKind) {
    let dir = tempfile::tempdir().unwrap();
    let aio = aio(method);
    let rel = make_rel(&aio, dir.path());
    let sequential: Vec<u64> = (0..NBLOCKS).collect();
    let random = random_blocks(600, 1);
    // Runs of the same block and short runs revisited: a bitmap of a skewed column, an
    // index scan over duplicates.
    let repeated: Vec<u64> = (0..NBLOCKS / 3)
        .flat_map(|i| [i * 3, i * 3, i * 3, i * 3 + 1, i * 3, (i * 7) % NBLOCKS])
        .collect();
    for policy in [DistancePolicy::Pg18, DistancePolicy::Adaptive] {
        for bulk_read in [false, true] {
            for (name, blocks) in [
                ("sequential", &sequential),
                ("random", &random),
                ("repeated", &repeated),
            ] {
                for cached in ["cold", "every third block cached"] {
                    let pool = common::checksum_pool(&aio);
                    if cached != "cold" {
                        let warm: Vec<u64> = (0..NBLOCKS).step_by(3).collect();
                        run(&aio, &pool, &rel, &warm, StreamOptions::default())
                            .unwrap_or_else(|(_, e)| panic!("warming: {e}"));
                    }
                    let options = StreamOptions {
                        policy,
                        bulk_read,
                        order: StreamOrder::Completion,
                    };
                    let what = format!("{method} {policy:?} bulk_read={bulk_read} {name} {cached}");
                    let done = run(&aio, &pool, &rel, blocks, options)
                        .unwrap_or_else(|(_, e)| panic!("{what}: {e}"));
                    assert_exactly_once(blocks, &done.handed_out, &what);
                    assert_eq!(done.stats.buffers, blocks.len() as u64, "{what}");
                    assert!(
                        done.stats.max_ios_in_flight <= done.stats.io_budget,
                        "{what}: {:?}",
                        done.stats
                    );
                    if cached != "cold" {
                        assert!(done.stats.shared_hit > 0, "{what}: {:?}", done.stats);
                    }
                    assert_eq!(pool.counters().verification_failures, 0, "{what}");
                }
            }
        }
    }
}

fn short_reads_are_read_again_and_nothing_is_lost(method: IoMethodKind) {
    let dir = tempfile::tempdir().unwrap();
    let aio = aio(method);
    let rel = make_rel(&aio, dir.path());
    let pool = common::checksum_pool(&aio);
    // The read covering block 40 stops 3 blocks past it, and the re-read of the rest stops
    // after block 44 (a short read of a short read's rest); the read covering block 201
    // stops 3 blocks past it too. The stream must re-read each rest and neither lose nor
    // repeat a block.
    let short = |block: u64, blocks_past: usize| {
        (
            block,
            Fault::Short {
                bytes: blocks_past * BLCKSZ,
            },
        )
    };
    let plan = [short(40, 3), short(44, 1), short(201, 3)]
        .into_iter()
        .fold(FaultPlan::new(), |plan, (block, fault)| {
            plan.on_block(IoOp::Readv, "16384", block, fault, 1)
        });
    let plan = Arc::new(plan);
    aio.set_fault_injector(Some(plan.clone()));
    let blocks: Vec<u64> = (0..NBLOCKS).collect();
    let done = run(&aio, &pool, &rel, &blocks, completion())
        .unwrap_or_else(|(_, e)| panic!("{method}: {e}"));
    assert_eq!(plan.fired(), 3, "{method}: every short read was injected");
    assert_exactly_once(&blocks, &done.handed_out, &format!("{method} short reads"));
    assert!(done.stats.ios > 0);
    assert_eq!(pool.counters().verification_failures, 0);
}

fn a_read_error_surfaces_with_file_and_block(method: IoMethodKind) {
    let dir = tempfile::tempdir().unwrap();
    let aio = aio(method);
    let rel = make_rel(&aio, dir.path());
    let pool = common::checksum_pool(&aio);
    aio.set_fault_injector(Some(Arc::new(FaultPlan::new().on_block(
        IoOp::Readv,
        "16384",
        137,
        Fault::Errno(libc::EIO),
        1,
    ))));
    let blocks: Vec<u64> = (0..NBLOCKS).collect();
    let Err((before, err)) = run(&aio, &pool, &rel, &blocks, completion()) else {
        panic!("{method}: the injected error was lost");
    };
    let msg = err.to_string();
    assert!(
        msg.contains("16384") && msg.contains("Input/output error"),
        "{msg}"
    );
    let target = match &err {
        BufferError::Io(e) => e.target().cloned().expect("names the blocks"),
        other => panic!("{other:?}"),
    };
    assert!(
        target.first_block <= 137 && 137 < target.first_block + target.nblocks as u64,
        "{target:?}"
    );
    // Nothing handed out before the error is repeated, and none of it is a failed block.
    let mut positions: Vec<usize> = before.iter().map(|&(position, _)| position).collect();
    positions.sort_unstable();
    positions.dedup();
    assert_eq!(
        positions.len(),
        before.len(),
        "{method}: a block handed out twice"
    );
    assert!(
        before.iter().all(|&(_, block)| !(target.first_block
            ..target.first_block + target.nblocks as u64)
            .contains(&block)),
        "{method}: a block of the failed read was handed out"
    );
    // The failed buffers are retried by the next reader: a new stream reads everything.
    aio.set_fault_injector(None);
    let done = run(&aio, &pool, &rel, &blocks, completion())
        .unwrap_or_else(|(_, e)| panic!("{method}: {e}"));
    assert_exactly_once(
        &blocks,
        &done.handed_out,
        &format!("{method} after the error"),
    );
}

/// `effective_io_concurrency` 128 asks for far more reads than 8 handles: the stream's
/// budget is the handles, so it never has more than 8 reads in flight and the backend never
/// waits for a handle (before the budget, the stream asked for 128 and every read past the
/// 8th waited in `acquire` for the oldest). Both orders, one-block reads of a random
/// pattern so that every block is its own read.
fn the_stream_never_holds_more_handles_than_the_budget(method: IoMethodKind) {
    const HANDLES: usize = 8;
    let dir = tempfile::tempdir().unwrap();
    let aio = aio_with(
        method,
        IoConfig {
            shared_buffers_bytes: 8 << 20,
            effective_io_concurrency: 128,
            io_max_concurrency: HANDLES,
            io_combine_limit_blocks: 1,
            ..IoConfig::default()
        },
    );
    let rel = make_rel(&aio, dir.path());
    let blocks = random_blocks(2000, 2);
    for order in [StreamOrder::BlockOrder, StreamOrder::Completion] {
        let pool = common::checksum_pool(&aio);
        // PostgreSQL 18's policy doubles the distance on every read, whether or not the
        // stream had to wait (cached files complete at once under io_uring), so the stream
        // really asks for more than the budget.
        let options = StreamOptions {
            order,
            policy: DistancePolicy::Pg18,
            ..StreamOptions::default()
        };
        let done = run(&aio, &pool, &rel, &blocks, options)
            .unwrap_or_else(|(_, e)| panic!("{method} {order:?}: {e}"));
        assert_exactly_once(&blocks, &done.handed_out, &format!("{method} {order:?}"));
        if order == StreamOrder::BlockOrder {
            let in_order: Vec<u64> = done.handed_out.iter().map(|&(_, block)| block).collect();
            assert_eq!(in_order, blocks, "{method}: block order is kept");
        }
        assert_eq!(done.stats.io_budget, HANDLES as u64, "{method} {order:?}");
        assert!(
            done.stats.max_ios_in_flight <= HANDLES as u64,
            "{method} {order:?}: {:?}",
            done.stats
        );
        assert_eq!(
            done.handle_waits, 0,
            "{method} {order:?}: waited for a handle"
        );
        if method != IoMethodKind::Sync {
            // The budget is used: reads really overlap (sync reads one at a time).
            assert!(
                done.stats.max_ios_in_flight > 1,
                "{method} {order:?}: {:?}",
                done.stats
            );
        }
    }
}

/// Slows every read of `16384` a little, in whichever thread completes it, so that the
/// stream has to wait for its reads and its adaptive distance grows.
struct EveryReadSlow;

impl FaultInjector for EveryReadSlow {
    fn inject(&self, op: IoOp, target: &IoTarget) -> Option<Fault> {
        if op == IoOp::Readv && target.path.ends_with("16384") {
            std::thread::sleep(Duration::from_micros(200));
        }
        None
    }
}

/// The adaptive policy pins what its reads need, not the whole pin limit: with one-block
/// reads (a bitmap heap or an index scan) the distance stays within two reads per handle
/// (`2 × 8` blocks) though the pin limit is `8 × 16`; with sequential 16-block reads it still
/// grows past that (worker). Every block is handed out exactly once either way.
fn the_adaptive_distance_pins_two_reads_per_handle(method: IoMethodKind) {
    const HANDLES: usize = 8;
    let dir = tempfile::tempdir().unwrap();
    let aio = aio_with(
        method,
        IoConfig {
            shared_buffers_bytes: 8 << 20,
            effective_io_concurrency: HANDLES,
            io_max_concurrency: HANDLES,
            io_combine_limit_blocks: 16,
            ..IoConfig::default()
        },
    );
    let rel = make_rel(&aio, dir.path());
    aio.set_fault_injector(Some(Arc::new(EveryReadSlow)));
    // Every other block, shuffled: no two neighbours, so every read is one block.
    let mut scattered: Vec<u64> = (0..NBLOCKS).step_by(2).collect();
    let order = random_blocks(scattered.len(), 5);
    let n = scattered.len();
    for (i, &j) in order.iter().enumerate() {
        scattered.swap(i, j as usize % n);
    }
    let sequential: Vec<u64> = (0..NBLOCKS).collect();
    for order in [StreamOrder::BlockOrder, StreamOrder::Completion] {
        let options = StreamOptions {
            order,
            policy: DistancePolicy::Adaptive,
            ..StreamOptions::default()
        };
        let pool = common::checksum_pool(&aio);
        let done = run(&aio, &pool, &rel, &scattered, options)
            .unwrap_or_else(|(_, e)| panic!("{method} {order:?}: {e}"));
        assert_exactly_once(&scattered, &done.handed_out, &format!("{method} {order:?}"));
        let stats = done.stats;
        assert_eq!(stats.distance_capacity, (HANDLES * 16) as u64, "{stats:?}");
        assert_eq!(stats.avg_io_blocks, 1.0, "{method} {order:?}: {stats:?}");
        assert!(
            stats.distance_max <= 2 * HANDLES as u64,
            "{method} {order:?}: one-block reads pinned {} blocks ahead: {stats:?}",
            stats.distance_max
        );
        let pool = common::checksum_pool(&aio);
        let done = run(&aio, &pool, &rel, &sequential, options)
            .unwrap_or_else(|(_, e)| panic!("{method} {order:?}: {e}"));
        assert_exactly_once(
            &sequential,
            &done.handed_out,
            &format!("{method} {order:?}"),
        );
        let stats = done.stats;
        assert!(stats.avg_io_blocks > 8.0, "{method} {order:?}: {stats:?}");
        if method == IoMethodKind::Worker {
            // Only under worker is the slowed read really in flight while the stream runs
            // on (an I/O worker sleeps): sync reads when the head needs the block, and
            // io_uring completes a cached read and its injected delay inside the stream's
            // own thread, so neither ever waits — and the distance grows only on waits.
            assert!(
                stats.distance_max > 2 * HANDLES as u64,
                "{method} {order:?}: 16-block reads may look further ahead: {stats:?}"
            );
        }
    }
    aio.set_fault_injector(None);
}

/// Delays the first read covering one block of `16384`, in whichever thread completes it:
/// under worker that is an I/O worker, so the read is really slow while others complete.
struct SlowBlock {
    block: u64,
    fired: AtomicBool,
}

impl FaultInjector for SlowBlock {
    fn inject(&self, op: IoOp, target: &IoTarget) -> Option<Fault> {
        let covers = op == IoOp::Readv
            && target.path.ends_with("16384")
            && target.first_block <= self.block
            && self.block < target.first_block + target.nblocks as u64;
        if covers && !self.fired.swap(true, Ordering::AcqRel) {
            std::thread::sleep(SLOW_READ);
        }
        None
    }
}

/// One slow read does not idle the queue: in completion order the stream goes around it,
/// refilling its window, and hands it out last; in block order it waits for it. Only under
/// worker is the slow read slow for the device alone (sync reads complete at submission, and
/// io_uring completes reads in the reaping thread, which is the stream's own) — under those
/// two the test checks only that every block comes exactly once.
fn a_slow_read_does_not_hold_back_the_others(method: IoMethodKind) {
    const SLOW_BLOCK: u64 = 5;
    let dir = tempfile::tempdir().unwrap();
    let aio = aio_with(
        method,
        IoConfig {
            shared_buffers_bytes: 2 << 20,
            effective_io_concurrency: 4,
            io_combine_limit_blocks: 1,
            ..IoConfig::default()
        },
    );
    let rel = make_rel(&aio, dir.path());
    let blocks: Vec<u64> = (0..NBLOCKS).collect();
    for order in [StreamOrder::BlockOrder, StreamOrder::Completion] {
        let pool = common::checksum_pool(&aio);
        aio.set_fault_injector(Some(Arc::new(SlowBlock {
            block: SLOW_BLOCK,
            fired: AtomicBool::new(false),
        })));
        let options = StreamOptions {
            order,
            ..StreamOptions::default()
        };
        let done = run(&aio, &pool, &rel, &blocks, options)
            .unwrap_or_else(|(_, e)| panic!("{method} {order:?}: {e}"));
        aio.set_fault_injector(None);
        assert_exactly_once(&blocks, &done.handed_out, &format!("{method} {order:?}"));
        let slow_at = done
            .handed_out
            .iter()
            .position(|&(_, block)| block == SLOW_BLOCK)
            .unwrap();
        match (order, method) {
            (StreamOrder::BlockOrder, _) => {
                assert_eq!(slow_at, SLOW_BLOCK as usize, "{method}: block order");
                assert_eq!(done.stats.out_of_order, 0);
            }
            (StreamOrder::Completion, IoMethodKind::Worker) => {
                // 4 reads in flight, the slow one among them: the other three slots keep
                // reading, so (nearly) the whole relation passes the slow read.
                assert!(
                    slow_at > NBLOCKS as usize / 2,
                    "the slow read of block {SLOW_BLOCK} came out at position {slow_at}: {:?}",
                    done.stats
                );
                assert!(done.stats.out_of_order > 0, "{:?}", done.stats);
                assert!(done.stats.max_ios_in_flight <= 4, "{:?}", done.stats);
            }
            (StreamOrder::Completion, _) => {}
        }
    }
}

/// Table `name` of the fixture with its btree on `a`.
fn fixture_table(pgdata: &std::path::Path, name: &str) -> Table {
    let facts = common::fixture_facts();
    Table {
        heap: RelFile::in_data_dir(pgdata, facts.path(name), ForkNumber::Main),
        index: Some(RelFile::in_data_dir(
            pgdata,
            facts.path(&format!("{name}_a")),
            ForkNumber::Main,
        )),
        columns: vec![ColumnType::Float8, ColumnType::Text],
        transactions: Some(pageio::catalog::cluster_transaction_log(pgdata).unwrap()),
    }
}

/// Every scan kind answers PostgreSQL's answers in block order, in completion order and
/// with the scan's own choice, each through a fresh pool. Sequential scans read every page
/// through the stream here (`seq_read_in_place` off: the fixture was just unpacked, so the
/// page cache holds it); `scan_in_place` covers reading it in place, in both orders.
fn scans_answer_the_same_in_both_orders(method: IoMethodKind) {
    let (_dir, pgdata) = common::unpack_fixture();
    let aio = Aio::new(IoConfig {
        io_method: method,
        seq_read_in_place: false,
        ..IoConfig::default()
    })
    .unwrap_or_else(|e| panic!("{method}: {e}"));
    for kind in common::SCAN_KINDS {
        for order in [
            None,
            Some(StreamOrder::BlockOrder),
            Some(StreamOrder::Completion),
        ] {
            let pool = common::checksum_pool(&aio);
            for (name, lo, hi, rows, sum) in common::FIXTURE_ANSWERS {
                let r = run_scan(
                    &pool,
                    &fixture_table(&pgdata, name),
                    &ScanOptions {
                        kind,
                        predicate: Between { lo, hi },
                        policy: DistancePolicy::Adaptive,
                        stream_order: order,
                        parallel_workers: 1,
                    },
                )
                .unwrap_or_else(|e| panic!("{method} {kind} {order:?} {name}: {e}"));
                assert_eq!(
                    (r.rows, r.sum_octet_length),
                    (rows, sum),
                    "{method} {kind} scan in {order:?} of {name} where a between {lo} and {hi}"
                );
                assert_eq!(r.pages_failed_verification, 0);
            }
            assert!(pool.counters().reads > 0, "{kind} {order:?}: nothing read");
        }
    }
}

per_method!(
    every_block_exactly_once_with_its_data,
    short_reads_are_read_again_and_nothing_is_lost,
    a_read_error_surfaces_with_file_and_block,
    the_stream_never_holds_more_handles_than_the_budget,
    the_adaptive_distance_pins_two_reads_per_handle,
    a_slow_read_does_not_hold_back_the_others,
    scans_answer_the_same_in_both_orders,
);
