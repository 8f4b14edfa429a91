//! The adaptive I/O worker pool, driven by a manual clock: it grows under a backlog by one
//! worker per `io_worker_launch_interval`, never beyond `io_max_workers`, shrinks back to
//! `io_min_workers` one worker per `io_worker_idle_timeout`, and every I/O completes with the
//! right bytes across growth and retirement. `io_workers = N` stays a fixed pool of N.
//!
//! Workers are held busy by a fault injector that blocks each completion (on the worker that
//! executes it) until the test opens a gate, so the backlog is real and its size known. No
//! assertion depends on how long something took: time moves only when the test moves it.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use pageio::aio::{
    Fault, FaultInjector, IoBuffer, IoOp, IoStatus, IoTarget, ManualClock, WaitRef,
    WorkerPoolStatus,
};
use pageio::config::{IoConfig, IoMethodKind, BLCKSZ};
use pageio::storage::{OpenMode, RelFile};
use pageio::{Aio, Backend};

/// Bound of every test here; each runs in well under a second.
const WATCHDOG_SECS: u64 = 60;

/// Longest a completion waits at a closed gate: a test that forgets to open it fails its
/// reads' byte checks instead of hanging.
const GATE_BOUND: Duration = Duration::from_secs(30);

/// Longest the test waits for the pool to reach a state it has already caused (workers
/// parking after their last I/O).
const SETTLE_BOUND: Duration = Duration::from_secs(20);

/// Blocks every completing I/O until opened.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    opened: Condvar,
    entered: AtomicUsize,
}

impl Gate {
    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }
}

impl FaultInjector for Gate {
    fn inject(&self, _op: IoOp, _target: &IoTarget) -> Option<Fault> {
        self.entered.fetch_add(1, Ordering::SeqCst);
        let open = self.open.lock().unwrap();
        let _unused = self
            .opened
            .wait_timeout_while(open, GATE_BOUND, |open| !*open);
        None
    }
}

fn block_bytes(block: u64) -> Vec<u8> {
    (0..BLCKSZ)
        .map(|i| (block as usize * 31 + i * 7) as u8)
        .collect()
}

fn make_rel(backend: &mut Backend, dir: &std::path::Path, nblocks: u64) -> RelFile {
    let rel = RelFile::new(dir.join("16384"));
    let image: Vec<u8> = (0..nblocks).flat_map(block_bytes).collect();
    backend
        .write_blocks(&rel, 0, IoBuffer::from_slice(&image))
        .unwrap();
    rel
}

/// Submits a one-block read of `block` (every other block, so reads never merge).
fn read(backend: &mut Backend, rel: &RelFile, block: u64) -> WaitRef {
    let (file, offset, target) = backend.locate(rel, block, 1, OpenMode::Read).unwrap();
    let handle = backend.acquire().unwrap();
    let wref = handle
        .stage_read_owned(file, offset, IoBuffer::zeroed(BLCKSZ), target)
        .unwrap();
    backend.submit_staged();
    wref
}

fn check(backend: &mut Backend, reads: Vec<(WaitRef, u64)>) {
    for (wref, block) in reads {
        let done = backend.wait(wref).expect("the owner keeps the result");
        assert_eq!(done.result.status, IoStatus::Ok, "block {block}");
        assert_eq!(
            done.buffer.unwrap().as_slice(),
            &block_bytes(block)[..],
            "block {block}"
        );
    }
}

/// Waits (bounded) until the pool satisfies `cond`, for states the test has already caused.
fn settle(aio: &Aio, what: &str, cond: impl Fn(&WorkerPoolStatus) -> bool) -> WorkerPoolStatus {
    let start = Instant::now();
    loop {
        let status = aio.io_worker_pool().unwrap();
        if cond(&status) {
            return status;
        }
        assert!(
            start.elapsed() < SETTLE_BOUND,
            "pool never reached: {what}; now {status:?}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Applies the pool's rules at the current (frozen) clock until the pool has `want` workers.
/// The clock does not move, so at most one launch can happen here: repeating only waits out
/// threads that are still getting to the state the rules look at (a worker not yet woken, a
/// retired worker not yet gone) — the size is asserted never to pass `want`.
fn adjusted_to(aio: &Aio, want: usize, what: &str) -> WorkerPoolStatus {
    let start = Instant::now();
    loop {
        let status = aio.adjust_io_workers().unwrap();
        assert!(status.workers <= want, "{what}: {status:?}");
        if status.workers == want {
            return status;
        }
        assert!(
            start.elapsed() < SETTLE_BOUND,
            "{what}: stuck at {status:?}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn pool_config(io_workers: usize) -> IoConfig {
    IoConfig {
        io_method: IoMethodKind::Worker,
        io_workers,
        io_min_workers: 2,
        io_max_workers: 4,
        io_worker_launch_interval_ms: 100,
        io_worker_idle_timeout_ms: 60_000,
        // Enough handles for every read the tests keep in flight.
        io_max_concurrency: 128,
        ..IoConfig::default()
    }
}

#[test]
fn grows_one_per_interval_up_to_max_and_shrinks_to_min() {
    common::with_watchdog("adaptive pool", WATCHDOG_SECS, adaptive_body)
}

fn adaptive_body() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new());
    let aio = Aio::with_worker_clock(pool_config(0), clock.clone()).unwrap();
    let mut backend = aio.backend().unwrap();
    let rel = make_rel(&mut backend, dir.path(), 256);
    let status = settle(&aio, "both initial workers parked", |s| s.idle_workers == 2);
    assert_eq!(
        (status.workers, status.min_workers, status.max_workers),
        (2, 2, 4)
    );
    assert!(status.adaptive);

    let gate = Arc::new(Gate::default());
    aio.set_fault_injector(Some(gate.clone()));
    // 16 reads at t = 0: both workers take one and block at the gate; the rest is a backlog
    // with no idle worker, so one worker is launched — one, because the next launch must
    // wait for the launch interval.
    let mut reads: Vec<(WaitRef, u64)> = (0..16)
        .map(|i| (read(&mut backend, &rel, i * 2), i * 2))
        .collect();
    adjusted_to(&aio, 3, "t=0");
    clock.advance(Duration::from_millis(50));
    assert_eq!(aio.adjust_io_workers().unwrap().workers, 3, "t=50ms");
    clock.advance(Duration::from_millis(50));
    adjusted_to(&aio, 4, "t=100ms");
    clock.advance(Duration::from_millis(100));
    assert_eq!(
        aio.adjust_io_workers().unwrap().workers,
        4,
        "t=200ms: at io_max_workers"
    );
    // More backlog, more time: still the ceiling.
    reads.extend((16..32).map(|i| (read(&mut backend, &rel, i * 2), i * 2)));
    clock.advance(Duration::from_secs(1));
    let status = aio.adjust_io_workers().unwrap();
    assert_eq!((status.workers, status.launches), (4, 2), "{status:?}");
    // Every worker holds one read at the gate; the other 28 wait in the queue.
    settle(&aio, "four workers at the gate", |_| {
        gate.entered.load(Ordering::SeqCst) == 4
    });
    gate.open();
    check(&mut backend, reads);

    // Idle: the pool shrinks one worker per idle timeout, highest first, down to the floor.
    let status = settle(&aio, "all four workers parked", |s| s.idle_workers == 4);
    assert_eq!(status.queued_ios, 0);
    clock.advance(Duration::from_secs(59));
    assert_eq!(aio.adjust_io_workers().unwrap().workers, 4, "59 s idle");
    clock.advance(Duration::from_secs(1));
    assert_eq!(aio.adjust_io_workers().unwrap().workers, 3, "60 s idle");
    assert_eq!(
        aio.adjust_io_workers().unwrap().workers,
        3,
        "one per timeout"
    );
    clock.advance(Duration::from_secs(60));
    assert_eq!(aio.adjust_io_workers().unwrap().workers, 2, "120 s idle");
    clock.advance(Duration::from_secs(600));
    let status = aio.adjust_io_workers().unwrap();
    assert_eq!((status.workers, status.retirements), (2, 2), "{status:?}");

    // The retired slots are reused: under a new backlog the pool grows again, and every read
    // still lands.
    let gate = Arc::new(Gate::default());
    aio.set_fault_injector(Some(gate.clone()));
    settle(&aio, "the two workers parked", |s| s.idle_workers == 2);
    let reads: Vec<(WaitRef, u64)> = (0..24)
        .map(|i| (read(&mut backend, &rel, i * 2 + 1), i * 2 + 1))
        .collect();
    adjusted_to(&aio, 3, "a new backlog, long after the last launch");
    clock.advance(Duration::from_millis(100));
    let status = adjusted_to(&aio, 4, "100 ms later");
    assert_eq!(status.launches, 4, "{status:?}");
    gate.open();
    check(&mut backend, reads);
    aio.set_fault_injector(None);
    // A long request through the pool after all that: every byte right.
    let all = backend
        .read_blocks(&rel, 0, IoBuffer::zeroed(256 * BLCKSZ))
        .unwrap();
    let want: Vec<u8> = (0..256).flat_map(block_bytes).collect();
    assert!(all.as_slice() == &want[..]);
    assert!(aio.snapshot().is_empty(), "nothing left in flight");
}

#[test]
fn io_workers_set_is_a_fixed_pool() {
    common::with_watchdog("fixed pool", WATCHDOG_SECS, fixed_body)
}

fn fixed_body() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new());
    let aio = Aio::with_worker_clock(pool_config(3), clock.clone()).unwrap();
    let mut backend = aio.backend().unwrap();
    let rel = make_rel(&mut backend, dir.path(), 64);
    let status = settle(&aio, "three workers parked", |s| s.idle_workers == 3);
    assert_eq!(
        (status.workers, status.min_workers, status.max_workers),
        (3, 3, 3)
    );
    assert!(!status.adaptive);
    let gate = Arc::new(Gate::default());
    aio.set_fault_injector(Some(gate.clone()));
    let reads: Vec<(WaitRef, u64)> = (0..20)
        .map(|i| (read(&mut backend, &rel, i * 2), i * 2))
        .collect();
    for _ in 0..5 {
        clock.advance(Duration::from_secs(1));
        assert_eq!(aio.adjust_io_workers().unwrap().workers, 3, "never grows");
    }
    gate.open();
    check(&mut backend, reads);
    settle(&aio, "three workers parked", |s| s.idle_workers == 3);
    clock.advance(Duration::from_secs(3600));
    let status = aio.adjust_io_workers().unwrap();
    assert_eq!(
        (status.workers, status.launches, status.retirements),
        (3, 0, 0)
    );
}

#[test]
fn other_methods_have_no_worker_pool() {
    for method in [IoMethodKind::Sync, IoMethodKind::IoUring] {
        let aio = common::aio_for(method);
        assert!(aio.io_worker_pool().is_none(), "{method}");
        assert!(aio.adjust_io_workers().is_none(), "{method}");
    }
}

#[test]
fn reads_waiting_for_a_busy_pool_are_advised_once() {
    common::with_watchdog("read-ahead advice", WATCHDOG_SECS, || {
        // Buffered, not cached: the reads queued behind two busy workers are announced to
        // the kernel, each at most once; every byte still right. The first read is taken
        // from an empty queue and never waits; the second may wait briefly for the second
        // worker; 18 wait at the gate, and the first worker back finds its own read not in
        // the page cache and advises all but the one it takes and any a spinning peer is
        // about to take.
        let (advised, _) = advice_run(false, Cache::Evicted);
        assert!(
            (16..=19).contains(&advised),
            "18 reads waited behind the two busy workers; {advised} advised"
        );
        // Buffered and cached (the relation was just written): each worker with a backlog
        // finds its read whole in the page cache, so it gives no advice at all.
        let (advised, cached) = advice_run(false, Cache::Kept);
        assert_eq!(advised, 0, "nothing to announce: every page is cached");
        assert!(
            (16..=19).contains(&cached),
            "the reads taken with a backlog behind them were found cached: {cached}"
        );
        // Direct I/O bypasses the page cache the advice fills: nothing is advised or probed.
        assert_eq!(advice_run(true, Cache::Evicted), (0, 0));
    })
}

/// Whether [`advice_run`] evicts the relation from the page cache before reading it.
#[derive(Clone, Copy, PartialEq)]
enum Cache {
    Evicted,
    Kept,
}

/// 20 one-block reads through a fixed pool of two workers held at the gate: two are taken
/// at once, 18 queue behind them. Returns the pool's `advised_ios` and `cached_reads` after
/// all are checked.
fn advice_run(direct_io: bool, cache: Cache) -> (u64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new());
    let aio = Aio::with_worker_clock(
        IoConfig {
            direct_io,
            ..pool_config(2)
        },
        clock,
    )
    .unwrap();
    let mut backend = aio.backend().unwrap();
    let rel = make_rel(&mut backend, dir.path(), 64);
    if cache == Cache::Evicted {
        rel.evict_from_page_cache().unwrap();
    }
    settle(&aio, "two workers parked", |s| s.idle_workers == 2);
    // The writes above are never advised.
    assert_eq!(aio.io_worker_pool().unwrap().advised_ios, 0);
    let gate = Arc::new(Gate::default());
    aio.set_fault_injector(Some(gate.clone()));
    let reads: Vec<(WaitRef, u64)> = (0..20)
        .map(|i| (read(&mut backend, &rel, i * 2), i * 2))
        .collect();
    settle(&aio, "both workers at the gate", |_| {
        gate.entered.load(Ordering::SeqCst) == 2
    });
    let status = aio.io_worker_pool().unwrap();
    assert_eq!(status.queued_ios, 18, "{status:?}");
    gate.open();
    check(&mut backend, reads);
    aio.set_fault_injector(None);
    let status = aio.io_worker_pool().unwrap();
    (status.advised_ios, status.cached_reads)
}
