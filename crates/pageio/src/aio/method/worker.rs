//! `io_method = worker`: a pool of `io_workers` I/O threads fed through one bounded queue.
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

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{JoinHandle, Thread};
use std::time::Duration;

use super::{execute_group_sync, Group, IoMethodImpl};
use crate::aio::handle::{spin_until, BackendShared};
use crate::aio::result::AioError;
use crate::config::IoMethodKind;

/// Queue capacity in kernel I/Os. PostgreSQL sizes its worker submission queue at 64 entries
/// per worker-pool; with merged I/Os of up to 1 MB each, 256 entries keep a fast device's
/// queue full from any number of backends while bounding what a crashed pool can strand.
pub(crate) const WORKER_QUEUE_CAPACITY: usize = 256;

/// How long an idle worker spins on an empty queue before parking. A backend that waits for
/// one I/O submits the next within a few µs; catching it spinning saves a futex wake-up.
const WORKER_SPIN: Duration = Duration::from_micros(30);

struct Job {
    backend: Arc<BackendShared>,
    group: Group,
}

struct QueueState {
    jobs: VecDeque<Job>,
    /// Parked workers, by index.
    idle: Vec<usize>,
    is_idle: Vec<bool>,
    shutdown: bool,
}

struct PoolShared {
    queue: Mutex<QueueState>,
    queued: AtomicUsize,
    spinning: AtomicBool,
    threads: Mutex<Vec<Thread>>,
}

/// The worker method: the pool and its threads.
pub(crate) struct WorkerMethod {
    pool: Arc<PoolShared>,
    joins: Mutex<Vec<JoinHandle<()>>>,
}

impl WorkerMethod {
    /// Starts `io_workers` threads.
    pub fn start(io_workers: usize) -> Result<WorkerMethod, AioError> {
        let pool = Arc::new(PoolShared {
            queue: Mutex::new(QueueState {
                jobs: VecDeque::with_capacity(WORKER_QUEUE_CAPACITY),
                idle: Vec::with_capacity(io_workers),
                is_idle: vec![false; io_workers],
                shutdown: false,
            }),
            queued: AtomicUsize::new(0),
            spinning: AtomicBool::new(false),
            threads: Mutex::new(Vec::new()),
        });
        let mut joins = Vec::with_capacity(io_workers);
        for worker_index in 0..io_workers {
            let pool_for_worker = pool.clone();
            let join = std::thread::Builder::new()
                .name(format!("io worker {worker_index}"))
                .spawn(move || worker_loop(&pool_for_worker, worker_index))
                .map_err(|e| AioError::MethodStart {
                    method: "worker",
                    reason: format!("could not start I/O worker thread {worker_index}: {e}"),
                })?;
            pool.threads
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(join.thread().clone());
            joins.push(join);
        }
        Ok(WorkerMethod {
            pool,
            joins: Mutex::new(joins),
        })
    }
}

fn lock(pool: &PoolShared) -> std::sync::MutexGuard<'_, QueueState> {
    pool.queue.lock().unwrap_or_else(|p| p.into_inner())
}

fn worker_loop(pool: &PoolShared, worker_index: usize) {
    loop {
        let job = {
            let mut queue = lock(pool);
            match queue.jobs.pop_front() {
                Some(job) => {
                    pool.queued.fetch_sub(1, Ordering::Relaxed);
                    Some(job)
                }
                None if queue.shutdown => return,
                None => None,
            }
        };
        if let Some(job) = job {
            execute_group_sync(&job.backend, &job.group, false);
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
        {
            let mut queue = lock(pool);
            if !queue.jobs.is_empty() || queue.shutdown {
                continue;
            }
            if !queue.is_idle[worker_index] {
                queue.is_idle[worker_index] = true;
                queue.idle.push(worker_index);
            }
        }
        // A wake-up that raced ahead of this park left a token, so park returns at once.
        std::thread::park();
    }
}

impl IoMethodImpl for WorkerMethod {
    fn kind(&self) -> IoMethodKind {
        IoMethodKind::Worker
    }

    fn submit(&self, backend: &Arc<BackendShared>, groups: Vec<Group>) {
        let mut overflow: Vec<Group> = Vec::new();
        let mut wake: Vec<usize> = Vec::new();
        {
            let mut queue = lock(&self.pool);
            let mut pushed = 0usize;
            for group in groups {
                if queue.jobs.len() >= WORKER_QUEUE_CAPACITY || queue.shutdown {
                    overflow.push(group);
                } else {
                    queue.jobs.push_back(Job {
                        backend: backend.clone(),
                        group,
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
        }
        if !wake.is_empty() {
            let threads = self.pool.threads.lock().unwrap_or_else(|p| p.into_inner());
            for worker in wake {
                threads[worker].unpark();
            }
        }
        for group in overflow {
            backend
                .counters
                .executed_by_submitter
                .fetch_add(1, Ordering::Relaxed);
            execute_group_sync(backend, &group, true);
        }
    }
}

impl Drop for WorkerMethod {
    fn drop(&mut self) {
        lock(&self.pool).shutdown = true;
        for thread in self
            .pool
            .threads
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            thread.unpark();
        }
        for job in self
            .joins
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            let _ = job.join();
        }
    }
}
