//! `io_method = worker`: a pool of I/O threads fed through one bounded queue — a fixed pool
//! (`io_workers = N`, PostgreSQL 18) or an adaptive one (PostgreSQL 19's `io_min_workers`,
//! `io_max_workers`, `io_worker_idle_timeout`, `io_worker_launch_interval`).
//!
//! PostgreSQL's I/O workers are processes woken by signals (latches); a hand-off and its
//! completion cost a few microseconds each way, capping one backend at roughly 250k–500k
//! round trips per second. Here the workers are threads and the hand-off is a futex-class
//! park/unpark, helped by short spinning on both sides:
//!
//! ```text
//!   backend: lock queue, push group, pick one parked worker (unless one is already
//!            spinning on the queue), unlock, unpark it
//!   worker:  pop → preadv → complete (shared callback, e.g. checksums, runs here)
//!            queue empty → spin ≤ WORKER_SPIN (one spinner at a time) → park
//! ```
//!
//! At most one idle worker spins at a time, so an idle pool costs one briefly busy core, not
//! `io_workers` of them. When the queue is full the submitter executes the I/O itself, as
//! PostgreSQL does: back-pressure without blocking, and a queue bound that is real.
//!
//! ## The adaptive pool
//!
//! PostgreSQL 18's fixed `io_workers = 3` is too few for random reads: each worker has one
//! blocking read in flight, so three workers give a queue depth of three. PostgreSQL 19 sizes
//! the pool from the load, and so does this method, with the same rules and defaults:
//!
//! ```text
//!   grow:   a submission (or a worker taking a job) sees a backlog — queued I/Os that no
//!           idle or spinning worker will take — and no idle worker, the pool is below
//!           io_max_workers (8), and no worker was launched in the last
//!           io_worker_launch_interval (100ms)              → launch worker number `workers`
//!   shrink: the highest-numbered worker has been idle for io_worker_idle_timeout (60s),
//!           the queue is empty and the pool is above io_min_workers (2)
//!                                                          → it exits; the next highest
//!                                                            starts its own idle period
//! ```
//!
//! Workers are numbered `0..workers` with no gaps: only the highest one ever exits, so the
//! numbers stay dense and "the highest" is always defined. A worker exits only between I/Os
//! — when it holds no job and the queue is empty — so no I/O is ever stranded on a retiring
//! worker. `io_workers = N` is the same machinery with `io_min_workers = io_max_workers = N`:
//! it never grows or shrinks.
//!
//! Worked example (defaults, a bitmap heap scan keeping 16 random reads queued): the pool
//! starts with workers 0 and 1; the first submission finds both busy and 14 reads waiting, so
//! worker 2 starts at once; the pool then grows by one per 100 ms while the backlog lasts —
//! 3 workers at 0 ms, 4 at 100 ms, …, 8 at 500 ms, and never more. A minute after the scan
//! ends, worker 7 exits; a minute later worker 6; …; the pool is back at 2 workers after six
//! minutes.
//!
//! ## Read-ahead advice
//!
//! A worker has one blocking read in flight, so a pool of N workers alone gives the device a
//! queue depth of N, whatever `effective_io_concurrency` asks for: a scan keeping 64 random
//! reads queued gets 8 at a time from the default pool's ceiling. For buffered files the
//! pool closes that gap with the kernel's own asynchronous read path: a worker that takes a
//! job and sees reads queued behind it with no idle worker to take them announces each of
//! them (at most 64, each once) with `posix_fadvise(WILLNEED)` before its own `preadv`. The
//! kernel starts those reads into the page cache at once; when a worker later reaches one,
//! its `preadv` finds the pages read or in flight and waits only for what is left.
//!
//! ```text
//!   queue:  [r1 r2 r3 … r40]      workers 0..7 busy, none idle
//!   worker 3 takes r1:  fadvise(r2) … fadvise(r40)  → 39 reads in the device's queue
//!                       preadv(r1)                  → its own read
//!   worker 5 takes r2:  (r2..r40 already advised)   → preadv(r2): pages in flight or read
//! ```
//!
//! Advice is only worth its system calls when the pages are not cached: on a warm scan
//! every `posix_fadvise` finds its page already there. So a worker about to advise, whose
//! own job is a buffered read nobody has advised yet, first tries that read with
//! `preadv2(RWF_NOWAIT)`, which succeeds only if the page cache
//! holds every byte: then the read is done, without blocking, and the backlog is left for a
//! worker whose read misses (the pool's `cached_reads` counts these). On a miss it advises
//! the backlog as above and reads with a plain `preadv`; the probe cost one system call, and
//! started the kernel's read of its own pages. Once a file system refuses `RWF_NOWAIT`
//! (`EOPNOTSUPP`), the pool stops probing and advises as before.
//!
//! ```text
//!   worker 3 takes r1 (backlog, none idle):  preadv2(r1, RWF_NOWAIT)
//!       all cached → r1 done; no advice      EAGAIN/short → fadvise(r2..r40), preadv(r1)
//! ```
//!
//! This is what PostgreSQL's `sync` method does in the backend (the read stream's advice)
//! and what its pre-18 bitmap heap scans did; here the advising runs on the workers, so the
//! submitting backend's CPU time is unchanged. Writes and direct I/O (which bypasses the page
//! cache the advice fills) are never advised; the advice is a hint, so if the kernel refuses
//! it the worker's read still reads the blocks. The pool's `advised_ios` counts the reads
//! announced.
//!
//! Time comes from a [`PoolClock`]: the monotonic clock in production, a [`ManualClock`] in
//! tests, which then drive the rules with [`crate::Aio::adjust_io_workers`] and assert the
//! pool's size after each step instead of sleeping.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

use super::{execute_group_sync, try_read_group_cached, CacheProbe, Group, IoMethodImpl};
use crate::aio::handle::{spin_until, BackendShared};
use crate::aio::result::{AioError, IoOp};
use crate::config::{IoConfig, IoMethodKind, MAX_IO_WORKERS};
use crate::storage::SegmentFile;

/// Queue capacity in kernel I/Os. PostgreSQL sizes its worker submission queue at 64 entries
/// per worker-pool; with merged I/Os of up to 1 MB each, 256 entries keep a fast device's
/// queue full from any number of backends while bounding what a crashed pool can strand.
pub(crate) const WORKER_QUEUE_CAPACITY: usize = 256;

/// How long an idle worker spins on an empty queue before parking. A backend that waits for
/// one I/O submits the next within a few µs; catching it spinning saves a futex wake-up.
const WORKER_SPIN: Duration = Duration::from_micros(30);

/// Longest single sleep of an idle worker that may retire: it wakes this often to look at the
/// clock, so an injected clock that jumps ahead is noticed within a second, and a worker never
/// sleeps unboundedly past its idle timeout.
const IDLE_CHECK_SLICE: Duration = Duration::from_secs(1);

/// Shortest sleep of a worker waiting out its idle timeout: keeps a clock that reports the
/// timeout as already passed (but the worker not yet allowed to exit) from turning the wait
/// into a busy loop.
const IDLE_CHECK_MIN: Duration = Duration::from_millis(1);

/// Most queued reads one worker announces to the kernel (`posix_fadvise(WILLNEED)`) before
/// its own read: a bound on the time its own job waits behind the advice it gives.
const ADVISE_AHEAD: usize = 64;

/// Idle peers a worker wakes when it takes a job and sees more queued (PostgreSQL's
/// `IO_WORKER_WAKEUP_FANOUT`). A submitter wakes no one for the job a spinning worker will
/// take; if that spinner is descheduled while more jobs arrive, the chain of wake-ups from
/// the worker that finally takes one is what gets the rest of the pool going.
const WORKER_WAKEUP_FANOUT: usize = 2;

/// Where the pool's rules read the time: nanoseconds since an arbitrary start, never going
/// backwards.
pub trait PoolClock: Send + Sync + std::fmt::Debug {
    /// Now, in nanoseconds since the clock's start.
    fn now_ns(&self) -> u64;
}

/// The monotonic clock (`Instant`), the clock of every pool outside tests.
#[derive(Debug)]
pub struct MonotonicClock {
    start: Instant,
}

impl MonotonicClock {
    /// A clock starting now.
    pub fn new() -> MonotonicClock {
        MonotonicClock {
            start: Instant::now(),
        }
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        MonotonicClock::new()
    }
}

impl PoolClock for MonotonicClock {
    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }
}

/// A clock that moves only when told to: tests advance it and then apply the pool's rules
/// with [`crate::Aio::adjust_io_workers`].
#[derive(Debug, Default)]
pub struct ManualClock {
    now_ns: AtomicU64,
}

impl ManualClock {
    /// A clock at 0.
    pub fn new() -> ManualClock {
        ManualClock::default()
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        self.now_ns
            .fetch_add(by.as_nanos() as u64, Ordering::SeqCst);
    }
}

impl PoolClock for ManualClock {
    fn now_ns(&self) -> u64 {
        self.now_ns.load(Ordering::SeqCst)
    }
}

/// The pool's bounds and timings, from the settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolSettings {
    /// Threads kept even when idle.
    pub min_workers: usize,
    /// Most threads.
    pub max_workers: usize,
    /// Idle time after which the highest-numbered worker exits, in nanoseconds.
    pub idle_timeout_ns: u64,
    /// Least time between two launches, in nanoseconds.
    pub launch_interval_ns: u64,
}

impl PoolSettings {
    /// The pool the settings ask for: fixed when `io_workers` is set, else adaptive (see
    /// [`IoConfig::io_worker_bounds`]).
    pub fn from_config(config: &IoConfig) -> PoolSettings {
        let (min_workers, max_workers) = config.io_worker_bounds();
        PoolSettings {
            min_workers: min_workers.clamp(1, MAX_IO_WORKERS),
            max_workers: max_workers.clamp(min_workers.clamp(1, MAX_IO_WORKERS), MAX_IO_WORKERS),
            idle_timeout_ns: config.io_worker_idle_timeout_ms.saturating_mul(1_000_000),
            launch_interval_ns: config
                .io_worker_launch_interval_ms
                .saturating_mul(1_000_000),
        }
    }

    /// Whether the pool can change size at all.
    pub fn is_adaptive(&self) -> bool {
        self.min_workers < self.max_workers
    }
}

/// The pool's state right now: the worker count the `pg_aios`-style views and the scan
/// report show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct WorkerPoolStatus {
    /// Worker threads running (workers `0..workers`).
    pub workers: usize,
    /// Of those, parked waiting for work.
    pub idle_workers: usize,
    /// The floor (`io_min_workers`, or `io_workers` for a fixed pool).
    pub min_workers: usize,
    /// The ceiling (`io_max_workers`, or `io_workers` for a fixed pool).
    pub max_workers: usize,
    /// Whether the pool grows and shrinks (false for `io_workers = N`).
    pub adaptive: bool,
    /// Kernel I/Os waiting in the queue.
    pub queued_ios: usize,
    /// Workers started beyond the initial `min_workers`, since the pool started.
    pub launches: u64,
    /// Workers that exited after their idle timeout, since the pool started.
    pub retirements: u64,
    /// Queued reads announced to the kernel with `posix_fadvise(WILLNEED)` while they
    /// waited for a worker, since the pool started (see "Read-ahead advice").
    pub advised_ios: u64,
    /// Reads that a worker about to give advice found whole in the page cache
    /// (`preadv2(RWF_NOWAIT)`), completed without blocking and without advising the reads
    /// queued behind them, since the pool started (see "Read-ahead advice").
    pub cached_reads: u64,
}

struct Job {
    backend: Arc<BackendShared>,
    group: Group,
    /// The read to announce to the kernel while the job waits (see "Read-ahead advice");
    /// taken when given, so each job is advised at most once.
    advice: Option<Advice>,
}

/// A queued read's byte range, for `posix_fadvise(WILLNEED)`.
struct Advice {
    file: Arc<SegmentFile>,
    offset: u64,
    len_bytes: u64,
}

impl Advice {
    /// The advice for `group` of `backend`: its whole byte range, for a read of a buffered
    /// file (the page cache is what the advice fills; direct I/O bypasses it).
    fn for_group(backend: &BackendShared, group: &[u32]) -> Option<Advice> {
        if backend.direct {
            return None;
        }
        let (file, offset, mut len_bytes) = {
            let data = backend.handles[group[0] as usize].lock();
            if data.op != Some(IoOp::Readv) {
                return None;
            }
            (
                data.file.clone()?,
                data.offset_bytes,
                data.len_bytes() as u64,
            )
        };
        for &index in &group[1..] {
            len_bytes += backend.handles[index as usize].lock().len_bytes() as u64;
        }
        Some(Advice {
            file,
            offset,
            len_bytes,
        })
    }
}

/// A worker slot's life: empty, running, or told to exit and not yet gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Empty,
    Running,
    Retiring,
}

struct QueueState {
    jobs: VecDeque<Job>,
    /// Parked workers, by index.
    idle: Vec<usize>,
    is_idle: Vec<bool>,
    /// When each idle worker last became idle (clock ns).
    idle_since_ns: Vec<u64>,
    slots: Vec<Slot>,
    /// Workers `0..workers` are running; only the highest ever exits.
    workers: usize,
    last_launch_ns: Option<u64>,
    launches: u64,
    retirements: u64,
    advised_ios: u64,
    /// Join handles by slot; a slot's old handle is joined when the slot is reused or the
    /// pool shuts down.
    joins: Vec<Option<JoinHandle<()>>>,
    shutdown: bool,
}

struct PoolShared {
    queue: Mutex<QueueState>,
    queued: AtomicUsize,
    spinning: AtomicBool,
    /// [`WorkerPoolStatus::cached_reads`].
    cached_reads: AtomicU64,
    /// Set once a file system refused `RWF_NOWAIT`: from then on the workers advise without
    /// probing the page cache first.
    no_cache_probe: AtomicBool,
    threads: Mutex<Vec<Option<Thread>>>,
    settings: PoolSettings,
    clock: Arc<dyn PoolClock>,
}

/// The worker method: the pool and its threads.
pub(crate) struct WorkerMethod {
    pool: Arc<PoolShared>,
}

impl WorkerMethod {
    /// Starts `settings.min_workers` threads.
    pub fn start(
        settings: PoolSettings,
        clock: Arc<dyn PoolClock>,
    ) -> Result<WorkerMethod, AioError> {
        let max = settings.max_workers;
        let pool = Arc::new(PoolShared {
            queue: Mutex::new(QueueState {
                jobs: VecDeque::with_capacity(WORKER_QUEUE_CAPACITY),
                idle: Vec::with_capacity(max),
                is_idle: vec![false; max],
                idle_since_ns: vec![0; max],
                slots: vec![Slot::Empty; max],
                workers: 0,
                last_launch_ns: None,
                launches: 0,
                retirements: 0,
                advised_ios: 0,
                joins: (0..max).map(|_| None).collect(),
                shutdown: false,
            }),
            queued: AtomicUsize::new(0),
            spinning: AtomicBool::new(false),
            cached_reads: AtomicU64::new(0),
            no_cache_probe: AtomicBool::new(false),
            threads: Mutex::new(vec![None; max]),
            settings,
            clock,
        });
        let method = WorkerMethod { pool };
        {
            let mut queue = lock(&method.pool);
            for worker_index in 0..settings.min_workers {
                // On failure, dropping `method` shuts down the workers already started.
                spawn_worker(&method.pool, &mut queue, worker_index)?;
            }
        }
        Ok(method)
    }

    fn status(&self) -> WorkerPoolStatus {
        let queue = lock(&self.pool);
        let settings = self.pool.settings;
        WorkerPoolStatus {
            workers: queue.workers,
            idle_workers: queue.idle.len(),
            min_workers: settings.min_workers,
            max_workers: settings.max_workers,
            adaptive: settings.is_adaptive(),
            queued_ios: queue.jobs.len(),
            launches: queue.launches,
            retirements: queue.retirements,
            advised_ios: queue.advised_ios,
            cached_reads: self.pool.cached_reads.load(Ordering::Relaxed),
        }
    }
}

fn lock(pool: &PoolShared) -> std::sync::MutexGuard<'_, QueueState> {
    pool.queue.lock().unwrap_or_else(|p| p.into_inner())
}

/// Starts worker `worker_index` in its (empty) slot, with the queue locked: the slot, the
/// count and the thread become visible together. A slot's previous thread has already said
/// it is leaving (`Slot::Empty`), so joining it cannot wait on this lock.
fn spawn_worker(
    pool: &Arc<PoolShared>,
    queue: &mut QueueState,
    worker_index: usize,
) -> Result<(), AioError> {
    debug_assert_eq!(queue.slots[worker_index], Slot::Empty);
    debug_assert_eq!(queue.workers, worker_index, "workers are numbered densely");
    if let Some(old) = queue.joins[worker_index].take() {
        let _ = old.join();
    }
    let pool_for_worker = pool.clone();
    let join = std::thread::Builder::new()
        .name(format!("io worker {worker_index}"))
        .spawn(move || worker_loop(pool_for_worker, worker_index))
        .map_err(|e| AioError::MethodStart {
            method: "worker",
            reason: format!("could not start I/O worker thread {worker_index}: {e}"),
        })?;
    pool.threads.lock().unwrap_or_else(|p| p.into_inner())[worker_index] =
        Some(join.thread().clone());
    queue.joins[worker_index] = Some(join);
    queue.slots[worker_index] = Slot::Running;
    queue.is_idle[worker_index] = false;
    queue.workers = worker_index + 1;
    Ok(())
}

/// The growth rule (see the module docs), with the queue locked: launches one worker when
/// `backlog` queued I/Os have no idle worker to take them, the pool is below its ceiling and
/// the last launch is at least `io_worker_launch_interval` ago. A thread that cannot be
/// started leaves the pool as it was; the queue is still served by the running workers.
fn maybe_grow(pool: &Arc<PoolShared>, queue: &mut QueueState, backlog: usize, now_ns: u64) {
    let settings = pool.settings;
    if backlog == 0
        || !queue.idle.is_empty()
        || queue.shutdown
        || queue.workers >= settings.max_workers
        || queue.slots[queue.workers] != Slot::Empty
    {
        return;
    }
    if let Some(last) = queue.last_launch_ns {
        if now_ns.saturating_sub(last) < settings.launch_interval_ns {
            return;
        }
    }
    let worker_index = queue.workers;
    if spawn_worker(pool, queue, worker_index).is_ok() {
        queue.last_launch_ns = Some(now_ns);
        queue.launches += 1;
    }
}

/// The shrink rule (see the module docs), with the queue locked: retires the highest worker
/// if it has idled for the timeout, holds no job (it is parked) and the queue is empty.
/// Returns the retired worker's index; the caller wakes it so it exits.
fn maybe_retire(pool: &PoolShared, queue: &mut QueueState, now_ns: u64) -> Option<usize> {
    let settings = pool.settings;
    if queue.workers <= settings.min_workers || !queue.jobs.is_empty() {
        return None;
    }
    let highest = queue.workers - 1;
    if !queue.is_idle[highest]
        || now_ns.saturating_sub(queue.idle_since_ns[highest]) < settings.idle_timeout_ns
    {
        return None;
    }
    queue.idle.retain(|&w| w != highest);
    queue.is_idle[highest] = false;
    queue.slots[highest] = Slot::Retiring;
    queue.workers = highest;
    queue.retirements += 1;
    // The next highest starts its own idle period now, so the pool shrinks by at most one
    // worker per io_worker_idle_timeout, as it grows by at most one per launch interval.
    if let Some(next) = highest.checked_sub(1) {
        if queue.is_idle[next] {
            queue.idle_since_ns[next] = now_ns;
        }
    }
    Some(highest)
}

fn unpark(pool: &PoolShared, workers: &[usize]) {
    if workers.is_empty() {
        return;
    }
    let threads = pool.threads.lock().unwrap_or_else(|p| p.into_inner());
    for &worker in workers {
        if let Some(thread) = &threads[worker] {
            thread.unpark();
        }
    }
}

/// Takes the advice of up to [`ADVISE_AHEAD`] queued reads no spinning worker is about to
/// take (each job's advice is taken once), counting them in `advised_ios`.
fn take_advice(queue: &mut QueueState, spinner: usize, advice: &mut Vec<Advice>) {
    let before = advice.len();
    for waiting in queue.jobs.iter_mut().skip(spinner) {
        if advice.len() == ADVISE_AHEAD {
            break;
        }
        if let Some(a) = waiting.advice.take() {
            advice.push(a);
        }
    }
    queue.advised_ios += (advice.len() - before) as u64;
}

/// Runs one job taken from the queue: when reads wait behind it (`waiting`) and its own
/// read may be cached, first a probe of the page cache (a hit completes the job with no
/// read), else advice for the waiting reads; then the job's I/O.
fn run_job(pool: &PoolShared, job: &Job, waiting: bool, advice: &mut Vec<Advice>) {
    if waiting && job.advice.is_some() {
        if !pool.no_cache_probe.load(Ordering::Relaxed) {
            match try_read_group_cached(&job.backend, &job.group) {
                CacheProbe::Cached => {
                    pool.cached_reads.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                CacheProbe::Missed => {}
                // A file system without RWF_NOWAIT: advise as before, every time.
                CacheProbe::Unsupported => pool.no_cache_probe.store(true, Ordering::Relaxed),
            }
        }
        let mut queue = lock(pool);
        let spinner = usize::from(pool.spinning.load(Ordering::Acquire));
        if queue.jobs.len() > spinner && queue.idle.is_empty() {
            take_advice(&mut queue, spinner, advice);
        }
    }
    for a in advice.drain(..) {
        // A hint: if the kernel refuses it, the worker's read still reads the blocks.
        let _ = a.file.advise_willneed(a.offset, a.len_bytes);
    }
    execute_group_sync(&job.backend, &job.group, false);
}

/// Ends worker `worker_index`, whose slot is being retired: frees the slot, hands a job a
/// submitter may have counted on it for to an idle worker, and wakes the new highest worker
/// so it starts watching its own idle time.
fn retire(
    pool: &PoolShared,
    mut queue: std::sync::MutexGuard<'_, QueueState>,
    worker_index: usize,
) {
    queue.slots[worker_index] = Slot::Empty;
    // A submitter may have counted on this worker while it spun (a spinner takes
    // one job by itself, so nobody was woken for it): hand that job to an idle
    // worker, or it would wait for the next submission.
    let mut wake = Vec::with_capacity(2);
    if !queue.jobs.is_empty() {
        if let Some(worker) = queue.idle.pop() {
            queue.is_idle[worker] = false;
            wake.push(worker);
        }
    }
    // The new highest worker (if idle) starts watching its own idle time.
    if let Some(next) = worker_index.checked_sub(1) {
        wake.push(next);
    }
    drop(queue);
    unpark(pool, &wake);
}

fn worker_loop(pool_arc: Arc<PoolShared>, worker_index: usize) {
    let pool = &*pool_arc;
    // Whether this worker waits out idle timeouts (it might be the highest above the floor).
    let may_retire = |queue: &QueueState| {
        worker_index + 1 == queue.workers && queue.workers > pool.settings.min_workers
    };
    let mut peers: Vec<usize> = Vec::with_capacity(WORKER_WAKEUP_FANOUT);
    let mut advice: Vec<Advice> = Vec::with_capacity(ADVISE_AHEAD);
    loop {
        peers.clear();
        advice.clear();
        let job = {
            let mut queue = lock(pool);
            if queue.slots[worker_index] == Slot::Retiring {
                retire(pool, queue, worker_index);
                return;
            }
            match queue.jobs.pop_front() {
                Some(job) => {
                    pool.queued.fetch_sub(1, Ordering::Relaxed);
                    // Woken by a timeout rather than a submitter: no longer idle.
                    if queue.is_idle[worker_index] {
                        queue.is_idle[worker_index] = false;
                        queue.idle.retain(|&w| w != worker_index);
                    }
                    // More queued: wake idle peers to help, as PostgreSQL's workers do.
                    while peers.len() < WORKER_WAKEUP_FANOUT.min(queue.jobs.len()) {
                        let Some(peer) = queue.idle.pop() else {
                            break;
                        };
                        queue.is_idle[peer] = false;
                        peers.push(peer);
                    }
                    // Still a backlog after taking this job, and nobody idle to take it:
                    // the growth rule, checked by the worker as PostgreSQL 19's do.
                    let spinner = usize::from(pool.spinning.load(Ordering::Acquire));
                    let backlog = queue.jobs.len().saturating_sub(spinner);
                    if backlog > 0 && queue.idle.is_empty() && pool.settings.is_adaptive() {
                        let now_ns = pool.clock.now_ns();
                        maybe_grow(&pool_arc, &mut queue, backlog, now_ns);
                    }
                    // Reads that will wait for a busy worker: announce them to the kernel
                    // (see "Read-ahead advice"): after this job's read missed the page cache
                    // when it is a buffered read nobody advised yet, else at once — a write
                    // or a direct read cannot be probed, and a read another worker advised
                    // is being read by the kernel already, so a probe would only miss.
                    let waiting = backlog > 0 && queue.idle.is_empty();
                    if waiting && job.advice.is_none() {
                        take_advice(&mut queue, spinner, &mut advice);
                    }
                    Some((job, waiting))
                }
                None if queue.shutdown => return,
                None => None,
            }
        };
        unpark(pool, &peers);
        if let Some((job, waiting)) = job {
            run_job(pool, &job, waiting, &mut advice);
            continue;
        }
        if pool
            .spinning
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            spin_until(WORKER_SPIN, || pool.queued.load(Ordering::Acquire) > 0);
            pool.spinning.store(false, Ordering::Release);
            if pool.queued.load(Ordering::Acquire) > 0 {
                continue;
            }
        }
        let park_for = {
            let mut queue = lock(pool);
            if !queue.jobs.is_empty() || queue.shutdown {
                continue;
            }
            if queue.slots[worker_index] == Slot::Retiring {
                continue;
            }
            let now_ns = pool.clock.now_ns();
            if !queue.is_idle[worker_index] {
                queue.is_idle[worker_index] = true;
                queue.idle_since_ns[worker_index] = now_ns;
                queue.idle.push(worker_index);
            }
            if may_retire(&queue) {
                if maybe_retire(pool, &mut queue, now_ns) == Some(worker_index) {
                    continue; // exits at the top of the loop
                }
                let idle_ns = now_ns.saturating_sub(queue.idle_since_ns[worker_index]);
                let left =
                    Duration::from_nanos(pool.settings.idle_timeout_ns.saturating_sub(idle_ns));
                Some(left.clamp(IDLE_CHECK_MIN, IDLE_CHECK_SLICE))
            } else {
                None
            }
        };
        // A wake-up that raced ahead of this park left a token, so park returns at once.
        match park_for {
            Some(timeout) => std::thread::park_timeout(timeout),
            None => std::thread::park(),
        }
    }
}

impl IoMethodImpl for WorkerMethod {
    fn kind(&self) -> IoMethodKind {
        IoMethodKind::Worker
    }

    fn submit(&self, backend: &Arc<BackendShared>, groups: Vec<Group>) {
        let mut overflow: Vec<Group> = Vec::new();
        let mut wake: Vec<usize> = Vec::new();
        // Read from the handles before the queue is locked.
        let jobs: Vec<(Group, Option<Advice>)> = groups
            .into_iter()
            .map(|group| {
                let advice = Advice::for_group(backend, &group);
                (group, advice)
            })
            .collect();
        {
            let mut queue = lock(&self.pool);
            let mut pushed = 0usize;
            for (group, advice) in jobs {
                if queue.jobs.len() >= WORKER_QUEUE_CAPACITY || queue.shutdown {
                    overflow.push(group);
                } else {
                    queue.jobs.push_back(Job {
                        backend: backend.clone(),
                        group,
                        advice,
                    });
                    pushed += 1;
                }
            }
            self.pool.queued.fetch_add(pushed, Ordering::Release);
            // A spinning worker picks up one job by itself; every further job wakes one more
            // parked worker, so a batch spreads over the pool.
            let spinner = usize::from(self.pool.spinning.load(Ordering::Acquire));
            let mut want = pushed.saturating_sub(spinner);
            while want > 0 {
                let Some(worker) = queue.idle.pop() else {
                    break;
                };
                queue.is_idle[worker] = false;
                wake.push(worker);
                want -= 1;
            }
            // What no woken, spinning or idle worker will take: the backlog that grows the pool.
            let backlog = queue.jobs.len().saturating_sub(wake.len() + spinner);
            if backlog > 0 && queue.idle.is_empty() && self.pool.settings.is_adaptive() {
                let now_ns = self.pool.clock.now_ns();
                maybe_grow(&self.pool, &mut queue, backlog, now_ns);
            }
        }
        unpark(&self.pool, &wake);
        for group in overflow {
            backend
                .counters
                .executed_by_submitter
                .fetch_add(1, Ordering::Relaxed);
            execute_group_sync(backend, &group, true);
        }
    }

    fn worker_pool(&self) -> Option<WorkerPoolStatus> {
        Some(self.status())
    }

    fn adjust_workers(&self) -> Option<WorkerPoolStatus> {
        let retired = {
            let mut queue = lock(&self.pool);
            let now_ns = self.pool.clock.now_ns();
            let spinner = usize::from(self.pool.spinning.load(Ordering::Acquire));
            let backlog = queue.jobs.len().saturating_sub(spinner);
            maybe_grow(&self.pool, &mut queue, backlog, now_ns);
            maybe_retire(&self.pool, &mut queue, now_ns)
        };
        if let Some(worker) = retired {
            unpark(&self.pool, &[worker]);
        }
        Some(self.status())
    }
}

impl Drop for WorkerMethod {
    fn drop(&mut self) {
        let joins: Vec<JoinHandle<()>> = {
            let mut queue = lock(&self.pool);
            queue.shutdown = true;
            queue.joins.iter_mut().filter_map(Option::take).collect()
        };
        for thread in self
            .pool
            .threads
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .flatten()
        {
            thread.unpark();
        }
        for join in joins {
            let _ = join.join();
        }
    }
}
