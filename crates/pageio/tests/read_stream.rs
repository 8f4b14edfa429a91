//! Read streams over the shared buffer pool, once per io_method, each under a watchdog: a
//! stream waits on its own reads and on other threads' reads of the same blocks, so a
//! bookkeeping slip shows up as a hang — which must fail the test, not stall the suite. The
//! suite's profile has debug assertions on, so the stream's and the pool's invariants
//! (pins + pending ≤ pin limit, distances in bounds, pin counts) are checked on every step.

#[macro_use]
mod common;

use std::sync::Arc;

use pageio::aio::{Fault, FaultPlan, IoOp};
use pageio::buffer::{BufferError, BufferPool};
use pageio::config::{IoConfig, IoMethodKind};
use pageio::storage::RelFile;
use pageio::stream::{DistancePolicy, ReadStream, StreamOptions};
use pageio::Aio;

/// Bound on each case: each reads a few hundred blocks, in well under a second.
const WATCHDOG_SECS: u64 = 60;

/// Blocks of the test relation: several times the stream's look-ahead, with a ragged end.
const NBLOCKS: u64 = 300;

fn aio(method: IoMethodKind) -> Aio {
    let aio = Aio::new(IoConfig {
        io_method: method,
        shared_buffers_bytes: 1 << 20,
        ..IoConfig::default()
    })
    .unwrap_or_else(|e| panic!("{method}: {e}"));
    assert_eq!(aio.io_method(), method, "no silent fallback");
    aio
}

use common::numbered_page as page;

fn make_rel(aio: &Aio, dir: &std::path::Path) -> RelFile {
    common::numbered_relation(aio, dir, NBLOCKS)
}

/// Reads `blocks` through a stream; returns the blocks handed out, checking each page.
fn stream_blocks(
    aio: &Aio,
    pool: &BufferPool,
    rel: &RelFile,
    blocks: Vec<u64>,
    options: StreamOptions,
) -> Result<Vec<u64>, BufferError> {
    let mut backend = aio.backend().unwrap();
    let mut next = blocks.into_iter();
    let mut stream = ReadStream::new(pool, rel, options, move || next.next().map(|b| (b, b)));
    let mut seen = Vec::new();
    while let Some(buffer) = stream.next(&mut backend)? {
        assert_eq!(buffer.block, buffer.data);
        assert!(
            buffer.page()[..] == page(buffer.block)[..],
            "block {}",
            buffer.block
        );
        seen.push(buffer.block);
    }
    Ok(seen)
}

fn sequential_and_random_streams_hand_out_every_block_in_order(method: IoMethodKind) {
    let dir = tempfile::tempdir().unwrap();
    let aio = aio(method);
    let rel = make_rel(&aio, dir.path());
    let pool = common::checksum_pool(&aio);
    for policy in [DistancePolicy::Pg18, DistancePolicy::Adaptive] {
        for bulk_read in [false, true] {
            let options = StreamOptions {
                policy,
                bulk_read,
                ..StreamOptions::default()
            };
            let all: Vec<u64> = (0..NBLOCKS).collect();
            assert_eq!(
                stream_blocks(&aio, &pool, &rel, all.clone(), options).unwrap(),
                all
            );
            // Out of order, with repeats and gaps (an index scan's pattern), half cached.
            let mut rng = 0x9E37_79B9_7F4A_7C15u64;
            let random: Vec<u64> = (0..400)
                .map(|_| {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    rng % NBLOCKS
                })
                .collect();
            assert_eq!(
                stream_blocks(&aio, &pool, &rel, random.clone(), options).unwrap(),
                random
            );
        }
    }
}

fn a_read_error_ends_the_stream_with_the_block_named(method: IoMethodKind) {
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
    let err = stream_blocks(
        &aio,
        &pool,
        &rel,
        (0..NBLOCKS).collect(),
        StreamOptions::default(),
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("16384") && msg.contains("Input/output error"),
        "{msg}"
    );
    let target = match &err {
        BufferError::Io(e) => e.target().cloned().expect("names the blocks"),
        other => panic!("{other:?}"),
    };
    assert!(target.first_block <= 137 && 137 < target.first_block + target.nblocks as u64);
    // The failed buffers are retried by the next reader: the stream reads cleanly now.
    aio.set_fault_injector(None);
    let all: Vec<u64> = (0..NBLOCKS).collect();
    assert_eq!(
        stream_blocks(&aio, &pool, &rel, all.clone(), StreamOptions::default()).unwrap(),
        all
    );
}

fn two_streams_share_the_reads_of_the_same_blocks(method: IoMethodKind) {
    let dir = tempfile::tempdir().unwrap();
    let aio = aio(method);
    let rel = make_rel(&aio, dir.path());
    let pool = common::checksum_pool(&aio);
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let (aio, pool, rel) = (aio.clone(), pool.clone(), rel.clone());
            std::thread::spawn(move || {
                stream_blocks(
                    &aio,
                    &pool,
                    &rel,
                    (0..NBLOCKS).collect(),
                    StreamOptions::default(),
                )
                .unwrap()
            })
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap(), (0..NBLOCKS).collect::<Vec<_>>());
    }
    let counters = pool.counters();
    assert_eq!(counters.verification_failures, 0);
    assert!(counters.reads >= NBLOCKS, "{counters:?}");
}

/// Two streams reading the same blocks in different random orders at once (as concurrent
/// index scans do), many times over, each finding some blocks claimed by the other: every
/// block is handed out once per stream with its own page. Under io_uring one thread reaps
/// the other's completions while that one is still counting what it submitted — the race
/// the ring's two ever-growing counts are there for (the debug assertions of the suite's
/// profile caught the up-down count going below zero here).
fn streams_in_different_orders_share_claimed_buffers(method: IoMethodKind) {
    let dir = tempfile::tempdir().unwrap();
    let aio = aio(method);
    let rel = make_rel(&aio, dir.path());
    const ROUNDS: u64 = 40;
    for round in 0..ROUNDS {
        // A fresh pool each round, so both streams find their blocks uncached and claim them.
        let pool = common::checksum_pool(&aio);
        let threads: Vec<_> = [1u64, 2]
            .into_iter()
            .map(|stream_no| {
                let (aio, pool, rel) = (aio.clone(), pool.clone(), rel.clone());
                std::thread::spawn(move || {
                    // A Fisher-Yates shuffle of 0..NBLOCKS from a per-stream xorshift.
                    let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ (round * 31 + stream_no);
                    let mut blocks: Vec<u64> = (0..NBLOCKS).collect();
                    for i in (1..blocks.len()).rev() {
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        blocks.swap(i, (rng % (i as u64 + 1)) as usize);
                    }
                    let seen =
                        stream_blocks(&aio, &pool, &rel, blocks.clone(), StreamOptions::default())
                            .unwrap();
                    assert_eq!(seen, blocks);
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(pool.counters().verification_failures, 0);
    }
}

per_method!(
    sequential_and_random_streams_hand_out_every_block_in_order,
    a_read_error_ends_the_stream_with_the_block_named,
    two_streams_share_the_reads_of_the_same_blocks,
    streams_in_different_orders_share_claimed_buffers,
);
