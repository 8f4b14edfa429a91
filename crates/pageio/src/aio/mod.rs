//! # The asynchronous I/O subsystem
//!
//! PostgreSQL 18's AIO design, as a library. A *backend* is a thread using the engine; each
//! owns a fixed pool of `io_max_concurrency` *handles*. An I/O is defined on a handle, staged,
//! submitted in a batch to the *I/O method*, completed by whichever thread finishes it, and
//! finally reclaimed by its owner:
//!
//! ```text
//!  Backend::acquire ─► AioHandle ─stage_readv─► WaitRef
//!        │                 (at most one handed out: the borrow checker enforces it)
//!        │  batch mode: up to MAX_BATCH_IOS staged I/Os wait here, then go together
//!        │  (BatchHold::Contiguous: only while they continue each other)
//!        ▼
//!  submit ─► plan_groups (merge contiguous same-file I/Os) ─► method
//!        sync:     preadv now, in this thread
//!        worker:   bounded queue ─► a pool of I/O threads (fixed io_workers, or adaptive
//!                  between io_min_workers and io_max_workers) ─► preadv
//!        io_uring: one SQE per group on this backend's ring
//!        ▼
//!  complete (shared callback, waiters woken) ─► owner reclaims (local callback) ─► IDLE
//! ```
//!
//! ## Rules that keep it from deadlocking
//!
//! * A backend holds at most one handed-out handle ([`Backend::acquire`] borrows the backend
//!   mutably), so it can never wait for a handle while sitting on one it has not defined.
//! * With no idle handle, `acquire` first reclaims completed ones, then submits staged ones,
//!   then waits for the oldest in flight — it always makes progress.
//! * Before waiting on another backend's I/O, a backend submits its own staged I/O: the other
//!   backend might be waiting on it.
//! * A batch is bounded ([`MAX_BATCH_IOS`]) and is flushed early whenever a wait needs it.
//! * Every wait ends: the method's `wait_for` sleeps only while something can wake it, and
//!   io_uring sleeps in slices ([`method::uring::WAIT_SLICE`]); a submission the kernel
//!   refuses fails its I/Os with the errno rather than leaving them pending.
//! * A panic in a fault injector or shared callback fails that I/O
//!   ([`AioError::CallbackPanicked`]) instead of leaving it short of COMPLETED_SHARED; a
//!   panic in a local callback reaches the owner after the handle is back in the pool.
//!
//! ## What a batch holds back
//!
//! [`Backend::enter_batch_mode`] holds back every staged I/O until the batch ends or fills,
//! as PostgreSQL's batch mode does. [`Backend::enter_batch_mode_with`]`(BatchHold::Contiguous)`
//! — what read streams use — holds back only I/Os that may still merge: while each staged
//! I/O starts where the previous one ends (same file, same operation) they wait and go to
//! the kernel as one larger I/O; an I/O that starts anywhere else submits the batch so far
//! at once. Holding back I/Os that cannot merge saves a system call or a queue lock per I/O
//! but delays the first of them by the whole batch and groups their completions into
//! bursts; measured on random reads (a 1% bitmap heap scan, cold, io_uring) submitting
//! them at once kept the device busier and made the scan about 1.25× faster, while
//! sequential scans, whose reads are contiguous, still merge as before (docs/BENCHMARKS.md,
//! "Batches hold back only what can merge").
//!
//! ## Keeping N I/Os in flight
//!
//! Callers that read or write a list of ranges — [`Backend::read_blocks`] /
//! [`Backend::write_blocks`], the checksum verifier, `pageio io-bench` — all run the same
//! loop, [`IoPipeline`]: stage up to N, wait for the oldest, re-issue the rest of a partial
//! I/O, stop at the first error after waiting for everything in flight. It never loops
//! without progress, and its guard waits for every I/O before unwinding past the memory they
//! use (see the `pipeline` module).
//!
//! The generic layer talks to the method only through its interface (`submit`, `wait_for`,
//! `reap`, `attach_backend`); per-backend method state such as io_uring's ring lives in the
//! method, by backend id.
//!
//! ## A worked example
//!
//! A stream reads blocks 0..31 of `base/5/16384` with `io_combine_limit = 16`: it enters
//! batch mode, stages handle 0 (blocks 0..15, 128 kB at offset 0) and handle 1 (blocks
//! 16..31 at offset 131072), and leaves batch mode. The batch becomes one group — the same
//! file, contiguous — so the method issues one 256 kB `preadv`; `kernel_ios` counts 1 and
//! `ios_merged` 1. Completion splits the 262144 bytes 131072/131072 and both handles are
//! `OK`. Had the file ended at block 20, the merged read would have returned 163840 bytes;
//! each handle is then re-executed alone, so handle 0 is `OK` and handle 1 is `PARTIAL`
//! with 5 blocks done, and the caller (the pipeline, for `read_blocks`) re-issues blocks
//! 21..31 and gets `ERROR` ("read only 0 of 90112 bytes"), exactly as without merging.

pub mod callbacks;
pub mod fault;
mod handle;
pub mod method;
pub mod pipeline;
pub mod publish;
pub mod result;
pub mod stats;
mod write_stream;

pub use callbacks::{AioCallbacks, LocalCompletion, SharedCompletion};
pub use fault::{Fault, FaultInjector, FaultPlan, SubmitFault};
pub use handle::{HandleState, WaitRef};
pub use method::worker::{ManualClock, MonotonicClock, PoolClock, WorkerPoolStatus};
pub use pipeline::{BlockRanges, IoPipeline, PipelineDriver, PipelineIo};
pub use result::{AioError, IoOp, IoResult, IoStatus, IoTarget};
pub use stats::IoCounters;
pub use write_stream::{write_stream, WriteStreamOptions, WriteStreamStats};

pub use crate::storage::IoBuffer;
mod row;
pub use row::AioRow;

use std::collections::{HashMap, VecDeque};
use std::marker::PhantomData;
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock};
use std::time::Instant;

use handle::{AioHooks, BackendShared, HandleData};
use method::{Group, IoMethodImpl};

use crate::config::{IoConfig, IoMethodKind, BLCKSZ};
use crate::storage::{FileCache, OpenMode, RelFile, SegmentFile, StorageError};

/// Most I/Os staged before a batch is submitted (PostgreSQL's `PGAIO_SUBMIT_BATCH_SIZE`):
/// enough to merge a sequential run into large kernel I/Os and amortise one system call or
/// queue lock over them, small enough that the first I/O of a batch is not held back long.
/// Under [`BatchHold::Contiguous`] only contiguous I/Os wait (see "What a batch holds
/// back" above).
pub const MAX_BATCH_IOS: usize = 32;

/// What a batch ([`Backend::enter_batch_mode_with`]) holds back until it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchHold {
    /// Every staged I/O (PostgreSQL's batch mode): the fewest system calls.
    All,
    /// Only I/Os that continue the previous staged one (same file and operation, starting
    /// where it ends), which can merge into one kernel I/O; any other I/O first submits what
    /// is staged. The least delay for random I/O, the same merging for sequential I/O.
    Contiguous,
}

/// Most backends (threads) one [`Aio`] serves at once. Every backend reserves
/// `io_max_concurrency` handles and, under io_uring, a ring and its descriptor; the bound keeps
/// a runaway thread pool from exhausting memory and descriptors.
pub const MAX_BACKENDS: usize = 256;

/// The AIO subsystem: the chosen method, the file cache and every backend's handles.
/// Cheap to clone; all clones share one subsystem.
#[derive(Clone)]
pub struct Aio {
    core: Arc<AioCore>,
}

struct AioCore {
    config: IoConfig,
    method: Box<dyn IoMethodImpl>,
    method_kind: IoMethodKind,
    fallback_reason: Option<String>,
    files: FileCache,
    hooks: Arc<AioHooks>,
    backends: RwLock<Vec<Arc<BackendShared>>>,
    /// The area other processes read with `pageio aios` (see [`publish`]), once started;
    /// or why it could not be created.
    publisher: std::sync::OnceLock<Result<publish::Publisher, String>>,
}

impl std::fmt::Debug for Aio {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Aio")
            .field("io_method", &self.core.method_kind)
            .finish()
    }
}

impl Aio {
    /// Starts the subsystem: validates the settings, probes io_uring when asked for (or for
    /// `auto`), starts the worker pool for `worker`.
    ///
    /// With `io_method = auto`, io_uring is used when the probe passes; otherwise worker,
    /// and [`Aio::fallback_reason`] says why (callers print it as one line).
    pub fn new(config: IoConfig) -> Result<Aio, AioError> {
        Aio::with_worker_clock(config, Arc::new(method::worker::MonotonicClock::new()))
    }

    /// [`Aio::new`] with the clock the worker pool's grow and shrink rules read
    /// (`io_worker_launch_interval`, `io_worker_idle_timeout`): tests pass a
    /// [`method::worker::ManualClock`] and step the pool with [`Aio::adjust_io_workers`].
    pub fn with_worker_clock(
        config: IoConfig,
        clock: Arc<dyn method::worker::PoolClock>,
    ) -> Result<Aio, AioError> {
        config.validate()?;
        let (method_kind, fallback_reason) = match config.io_method {
            IoMethodKind::Auto => match method::uring::probe() {
                Ok(()) => (IoMethodKind::IoUring, None),
                Err(e) => (
                    IoMethodKind::Worker,
                    Some(format!("io_method=auto chose worker: {e}")),
                ),
            },
            IoMethodKind::IoUring => {
                method::uring::probe()?;
                (IoMethodKind::IoUring, None)
            }
            other => (other, None),
        };
        let method: Box<dyn IoMethodImpl> = match method_kind {
            IoMethodKind::Sync => Box::new(method::sync::SyncMethod),
            IoMethodKind::Worker => Box::new(method::worker::WorkerMethod::start(
                method::worker::PoolSettings::from_config(&config),
                clock,
            )?),
            IoMethodKind::IoUring | IoMethodKind::Auto => {
                Box::new(method::uring::UringMethod::new(config.io_max_concurrency))
            }
        };
        debug_assert_eq!(method.kind(), method_kind);
        let files = FileCache::new(config.max_open_files, config.direct_io)?;
        let aio = Aio {
            core: Arc::new(AioCore {
                config,
                method,
                method_kind,
                fallback_reason,
                files,
                hooks: Arc::new(AioHooks {
                    fault: RwLock::new(None),
                    epoch: Instant::now(),
                }),
                backends: RwLock::new(Vec::new()),
                publisher: std::sync::OnceLock::new(),
            }),
        };
        if aio.core.config.aio_publish {
            // Publishing is for watching, never a reason not to run: a directory that cannot
            // hold the area leaves the engine working, and `publish_error` says why.
            let started = publish::Publisher::start(
                Arc::downgrade(&aio.core),
                &aio.core.config,
                aio.core.method_kind.as_str(),
            )
            .map_err(|e| {
                format!(
                    "could not publish the AIO state in \"{}\" (aio_publish_dir): {e}; set aio_publish_dir to a writable directory or aio_publish = off",
                    aio.core.config.aio_publish_dir.display()
                )
            });
            let _ = aio.core.publisher.set(started);
        }
        Ok(aio)
    }

    /// The file this `Aio` publishes its state in for `pageio aios` (`aio_publish`), if it
    /// does.
    pub fn publish_path(&self) -> Option<&std::path::Path> {
        match self.core.publisher.get() {
            Some(Ok(publisher)) => Some(publisher.path()),
            _ => None,
        }
    }

    /// Why publishing was asked for (`aio_publish = on`) but could not start.
    pub fn publish_error(&self) -> Option<&str> {
        match self.core.publisher.get() {
            Some(Err(e)) => Some(e),
            _ => None,
        }
    }

    /// The method in use (never `Auto`).
    pub fn io_method(&self) -> IoMethodKind {
        self.core.method_kind
    }

    /// Why `auto` did not choose io_uring, if it did not.
    pub fn fallback_reason(&self) -> Option<&str> {
        self.core.fallback_reason.as_deref()
    }

    /// The settings in force.
    pub fn config(&self) -> &IoConfig {
        &self.core.config
    }

    /// The shared file-descriptor cache.
    pub fn files(&self) -> &FileCache {
        &self.core.files
    }

    /// Installs (or with `None` removes) a fault injector consulted at every completion.
    pub fn set_fault_injector(&self, injector: Option<Arc<dyn FaultInjector>>) {
        *self
            .core
            .hooks
            .fault
            .write()
            .unwrap_or_else(|p| p.into_inner()) = injector;
    }

    /// Registers the calling thread as a backend. Each thread that issues I/O needs one; it
    /// is released (after waiting for its I/O) when dropped.
    pub fn backend(&self) -> Result<Backend, AioError> {
        let shared = {
            let mut slots = self
                .core
                .backends
                .write()
                .unwrap_or_else(|p| p.into_inner());
            // Claim a free slot while still holding the registry lock: two threads that
            // register at the same moment must never share one slot's handles.
            let free = slots
                .iter()
                .find(|backend_shared| {
                    backend_shared
                        .active
                        .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                        .is_ok()
                })
                .cloned();
            match free {
                Some(backend_shared) => backend_shared,
                None => {
                    if slots.len() >= MAX_BACKENDS {
                        return Err(AioError::TooManyBackends(MAX_BACKENDS));
                    }
                    let backend_shared = Arc::new(BackendShared::new(
                        slots.len() as u32,
                        self.core.config.io_max_concurrency,
                        self.core.config.io_combine_limit_blocks,
                        self.core.hooks.clone(),
                        self.core.config.direct_io,
                    ));
                    // The method's per-backend state (io_uring: the ring) for this new slot.
                    self.core.method.attach_backend(&backend_shared)?;
                    backend_shared.active.store(true, Ordering::Release);
                    slots.push(backend_shared.clone());
                    backend_shared
                }
            }
        };
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        shared.tid.store(tid, Ordering::Relaxed);
        let handle_count = shared.handles.len() as u32;
        Ok(Backend {
            core: self.core.clone(),
            shared,
            idle: (0..handle_count).rev().collect(),
            in_flight: VecDeque::with_capacity(handle_count as usize),
            staged: Vec::with_capacity(MAX_BATCH_IOS),
            staged_end: None,
            batch_depth: 0,
            batch_hold: BatchHold::All,
            handle_waits: 0,
            kept: HashMap::new(),
            _not_send: PhantomData,
        })
    }

    fn backend_shared(&self, id: u32) -> Option<Arc<BackendShared>> {
        self.core
            .backends
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(id as usize)
            .cloned()
    }

    /// Waits for the I/O behind `wref` from any thread, backend or not. Returns at once when
    /// the handle has since been reused. A thread that is a backend should call
    /// [`Backend::wait`] instead, which first submits its own staged I/O.
    pub fn wait(&self, wref: WaitRef) {
        if let Some(backend_shared) = self.backend_shared(wref.backend_id) {
            self.core
                .method
                .wait_for(&backend_shared, wref.index, wref.generation);
        }
    }

    /// True when the I/O behind `wref` needs no more waiting (completed or recycled).
    pub fn poll(&self, wref: WaitRef) -> bool {
        match self.backend_shared(wref.backend_id) {
            Some(backend_shared) => {
                backend_shared.handles[wref.index as usize].is_done(wref.generation)
            }
            None => true,
        }
    }

    /// The I/O worker pool's state — workers running and idle, its bounds, queued I/Os —
    /// under `io_method = worker`; `None` for the other methods.
    pub fn io_worker_pool(&self) -> Option<WorkerPoolStatus> {
        self.core.method.worker_pool()
    }

    /// Applies the worker pool's rules now — launch a worker for a backlog (at most one per
    /// `io_worker_launch_interval`), retire the highest-numbered worker after
    /// `io_worker_idle_timeout` — and returns the pool's state. The pool applies them by
    /// itself as I/O is submitted and as workers idle; this is for a caller that drives the
    /// clock ([`Aio::with_worker_clock`]). `None` for the other methods.
    pub fn adjust_io_workers(&self) -> Option<WorkerPoolStatus> {
        self.core.method.adjust_workers()
    }

    /// Every handle in use, with the columns of PostgreSQL's `pg_aios` view.
    pub fn snapshot(&self) -> Vec<AioRow> {
        let backends = self
            .core
            .backends
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let per_backend = self.core.config.io_max_concurrency;
        let mut rows = Vec::new();
        for backend_shared in backends {
            for (i, handle) in backend_shared.handles.iter().enumerate() {
                if handle.state() == HandleState::Idle {
                    continue;
                }
                let data = handle.lock();
                let state = handle.state();
                if state == HandleState::Idle {
                    continue;
                }
                rows.push(AioRow::from_handle(
                    &backend_shared,
                    (backend_shared.id as usize * per_backend + i) as u32,
                    handle.generation.load(Ordering::Acquire),
                    state,
                    &data,
                ));
            }
        }
        rows
    }

    /// Counters summed over every backend that ever ran.
    pub fn counters(&self) -> IoCounters {
        self.core
            .backends
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|backend_shared| backend_shared.counters.snapshot())
            .fold(IoCounters::default(), |total, counters| total + counters)
    }
}

/// What the owner gets back from an I/O it asked to keep the result of.
#[derive(Debug)]
pub struct IoCompletion {
    /// The outcome.
    pub result: IoResult,
    /// The owned buffer, for I/Os staged with one.
    pub buffer: Option<IoBuffer>,
    /// What the I/O touched.
    pub target: IoTarget,
}

/// A thread's view of the subsystem: its handles, its batch, its counters.
///
/// Not `Send`: a backend is a thread, as in PostgreSQL.
pub struct Backend {
    core: Arc<AioCore>,
    shared: Arc<BackendShared>,
    idle: Vec<u32>,
    in_flight: VecDeque<u32>,
    staged: Vec<u32>,
    /// Where the last staged I/O ends — (descriptor, operation, end offset) — so the next
    /// one is held back only if it continues it; `None` with nothing staged.
    staged_end: Option<(i32, IoOp, u64)>,
    batch_depth: u32,
    /// What the current batch holds back (set by the outermost `enter_batch_mode*`).
    batch_hold: BatchHold,
    /// See [`Backend::handle_waits`].
    handle_waits: u64,
    kept: HashMap<(u32, u64), IoCompletion>,
    _not_send: PhantomData<*const ()>,
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend")
            .field("id", &self.shared.id)
            .field("idle", &self.idle.len())
            .field("in_flight", &self.in_flight.len())
            .finish()
    }
}

impl Backend {
    /// The backend's slot number.
    pub fn id(&self) -> u32 {
        self.shared.id
    }

    /// The subsystem this backend belongs to.
    pub fn aio(&self) -> Aio {
        Aio {
            core: self.core.clone(),
        }
    }

    /// Opens (through the file cache) the segment of `rel` holding blocks
    /// `first_block..first_block + nblocks` and returns it with the byte offset of
    /// `first_block` in it and the [`IoTarget`] naming the range in messages and `pg_aios`:
    /// what staging one I/O of a relation takes. The range must not cross a segment
    /// boundary ([`BlockRanges`] never yields one that does).
    pub fn locate(
        &self,
        rel: &RelFile,
        first_block: u64,
        nblocks: u32,
        mode: OpenMode,
    ) -> Result<(Arc<SegmentFile>, u64, IoTarget), AioError> {
        let (file, offset_bytes) = rel.locate(&self.core.files, first_block, nblocks, mode)?;
        let target = IoTarget {
            path: rel.display_name().clone(),
            first_block,
            nblocks,
        };
        Ok((file, offset_bytes, target))
    }

    /// This backend's counters.
    pub fn counters(&self) -> IoCounters {
        self.shared.counters.snapshot()
    }

    /// I/Os staged or in flight (not yet reclaimed).
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Handles free right now.
    pub fn idle_handles(&self) -> usize {
        self.idle.len()
    }

    /// Hands out a handle. With none idle: reclaims completed ones, submits staged ones, or
    /// waits for the oldest in flight — never blocks forever.
    pub fn acquire(&mut self) -> Result<AioHandle<'_>, AioError> {
        loop {
            if let Some(index) = self.idle.pop() {
                let handle = &self.shared.handles[index as usize];
                debug_assert_eq!(handle.state(), HandleState::Idle);
                handle.set_state(HandleState::HandedOut);
                return Ok(AioHandle {
                    backend: self,
                    index,
                    staged: false,
                });
            }
            self.reclaim_completed();
            if !self.idle.is_empty() {
                continue;
            }
            if !self.staged.is_empty() {
                self.submit_staged();
                continue;
            }
            let Some(&oldest) = self.in_flight.front() else {
                return Err(AioError::Internal(
                    "no idle handle and nothing in flight".into(),
                ));
            };
            let gen = self.shared.handles[oldest as usize]
                .generation
                .load(Ordering::Acquire);
            // Every handle is in flight: a caller asked for more concurrent I/Os than
            // io_max_concurrency. Counted, because a stream sized to its handle budget never
            // gets here (see `stream`): it would stall behind the oldest I/O.
            self.handle_waits += 1;
            self.wait_local(oldest, gen);
        }
    }

    /// Times [`Backend::acquire`] found every handle in flight and had to wait for the oldest
    /// I/O: how often callers asked for more I/Os than `io_max_concurrency` allows.
    pub fn handle_waits(&self) -> u64 {
        self.handle_waits
    }

    /// True when the I/O behind `wref` needs no more waiting: completed (reclaimed or not) or
    /// its handle since reused. Never blocks. For another backend's I/O, as [`Aio::poll`].
    pub fn is_done(&self, wref: WaitRef) -> bool {
        if wref.backend_id != self.shared.id {
            return self.aio().poll(wref);
        }
        self.shared
            .handles
            .get(wref.index as usize)
            .is_none_or(|handle| handle.is_done(wref.generation))
    }

    /// Waits until any of `wrefs` — this backend's own I/Os — needs no more waiting, and
    /// reclaims every handle whose I/O has completed. Staged I/O is submitted first, so the
    /// wait always ends. Returns at once if `wrefs` is empty or one is already done. For
    /// consumers that can use whichever I/O finishes first (an order-free read stream).
    pub fn wait_any(&mut self, wrefs: &[WaitRef]) {
        self.submit_staged();
        let own = self.shared.id;
        let ios: Vec<(u32, u64)> = wrefs
            .iter()
            .filter(|wref| wref.backend_id == own)
            .map(|wref| (wref.index, wref.generation))
            .collect();
        if ios.len() != wrefs.len() {
            debug_assert!(false, "wait_any on another backend's I/O");
        }
        if !ios.is_empty() && !self.shared.any_done(&ios) {
            let start = Instant::now();
            self.core.method.wait_any(&self.shared, &ios);
            self.account_wait(start);
        }
        self.reclaim_completed();
    }

    /// Enters batch mode: staged I/Os are held back (up to [`MAX_BATCH_IOS`]) and submitted
    /// together by [`Backend::exit_batch_mode`]. Nests.
    pub fn enter_batch_mode(&mut self) {
        self.enter_batch_mode_with(BatchHold::All);
    }

    /// Enters batch mode holding back what `hold` says; a nested call keeps the outer
    /// batch's choice. Pair with [`Backend::exit_batch_mode`].
    pub fn enter_batch_mode_with(&mut self, hold: BatchHold) {
        if self.batch_depth == 0 {
            self.batch_hold = hold;
        }
        self.batch_depth += 1;
    }

    /// Leaves batch mode; at the outermost level, submits everything staged.
    pub fn exit_batch_mode(&mut self) {
        debug_assert!(self.batch_depth > 0, "exit_batch_mode without enter");
        self.batch_depth = self.batch_depth.saturating_sub(1);
        if self.batch_depth == 0 {
            self.submit_staged();
        }
    }

    /// Submits every staged I/O now.
    pub fn submit_staged(&mut self) {
        if self.staged.is_empty() {
            return;
        }
        let staged = std::mem::take(&mut self.staged);
        self.staged_end = None;
        let groups: Vec<Group> = method::plan_groups(&self.shared, &staged);
        let counters = &self.shared.counters;
        counters
            .ios_issued
            .fetch_add(staged.len() as u64, Ordering::Relaxed);
        counters
            .kernel_ios
            .fetch_add(groups.len() as u64, Ordering::Relaxed);
        counters
            .ios_merged
            .fetch_add((staged.len() - groups.len()) as u64, Ordering::Relaxed);
        method::mark_submitted(&self.shared, &groups, self.shared.hooks.now_ns());
        self.core.method.submit(&self.shared, groups);
        self.staged = staged;
        self.staged.clear();
    }

    /// Waits for `wref`. For this backend's own I/O the handle is reclaimed (local callback
    /// run) and, if the I/O was staged with [`AioHandle::keep_result`], its completion is
    /// returned. Waiting on another backend's I/O first submits this backend's staged I/O.
    pub fn wait(&mut self, wref: WaitRef) -> Option<IoCompletion> {
        if wref.backend_id == self.shared.id {
            self.wait_local(wref.index, wref.generation);
            return self.kept.remove(&(wref.index, wref.generation));
        }
        self.submit_staged();
        let start = Instant::now();
        self.aio().wait(wref);
        self.account_wait(start);
        None
    }

    /// Waits for every I/O of this backend and reclaims all handles.
    pub fn wait_all(&mut self) {
        self.submit_staged();
        while let Some(&index) = self.in_flight.front() {
            let gen = self.shared.handles[index as usize]
                .generation
                .load(Ordering::Acquire);
            self.wait_local(index, gen);
            if self.in_flight.front() == Some(&index)
                && self.shared.handles[index as usize].state() == HandleState::Idle
            {
                // An idle handle listed as in flight is a bookkeeping bug; spinning on it
                // forever would turn it into a hang, so drop the entry (and say so in debug
                // builds).
                debug_assert!(false, "idle handle {index} listed as in flight");
                self.in_flight.pop_front();
            }
        }
    }

    /// Takes the kept completion of an I/O that was reclaimed earlier (for example while
    /// acquiring a handle), if any.
    pub fn take_completion(&mut self, wref: WaitRef) -> Option<IoCompletion> {
        self.kept.remove(&(wref.index, wref.generation))
    }

    fn account_wait(&self, start: Instant) {
        let counters = &self.shared.counters;
        counters
            .wait_ns
            .fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
        counters.waits.fetch_add(1, Ordering::Relaxed);
    }

    fn wait_local(&mut self, index: u32, generation: u64) {
        let shared = self.shared.clone();
        let handle = &shared.handles[index as usize];
        if handle.generation.load(Ordering::Acquire) != generation {
            return;
        }
        if handle.state() == HandleState::Staged {
            self.submit_staged();
        }
        if !handle.is_done(generation) {
            let start = Instant::now();
            self.core.method.wait_for(&self.shared, index, generation);
            self.account_wait(start);
        }
        if handle.generation.load(Ordering::Acquire) == generation
            && handle.state() == HandleState::CompletedShared
        {
            self.reclaim(index);
        }
    }

    /// Reclaims every handle whose I/O has completed shared.
    pub fn reclaim_completed(&mut self) {
        self.core.method.reap(&self.shared);
        let ready: Vec<u32> = self
            .in_flight
            .iter()
            .copied()
            .filter(|&i| self.shared.handles[i as usize].state() == HandleState::CompletedShared)
            .collect();
        for index in ready {
            self.reclaim(index);
        }
    }

    fn reclaim(&mut self, index: u32) {
        let handle = &self.shared.handles[index as usize];
        debug_assert_eq!(handle.state(), HandleState::CompletedShared);
        let generation = handle.generation.load(Ordering::Acquire);
        let (callbacks, result, target, op, handle_data, buffer, keep) = {
            let mut data = handle.lock();
            (
                data.callbacks.take(),
                data.result.clone(),
                data.target.clone(),
                data.op.unwrap_or(IoOp::Readv),
                std::mem::take(&mut data.handle_data),
                data.owned_buffer.take(),
                data.keep_result,
            )
        };
        // The local callback is the owner's code, run in the owner's thread: a panic in it
        // goes on to the owner — but only after the handle is back in the pool, so the
        // backend's bookkeeping stays whole for whoever catches it.
        let local_callback = callbacks.as_ref().and_then(|callbacks| {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                callbacks.complete_local(&LocalCompletion {
                    op,
                    target: &target,
                    handle_data: &handle_data,
                    result: &result,
                })
            }))
            .err()
        });
        {
            let mut data = handle.lock();
            handle.set_state(HandleState::CompletedLocal);
            data.reset();
            data.handle_data = handle_data;
            data.handle_data.clear();
            handle.generation.fetch_add(1, Ordering::AcqRel);
            handle.set_state(HandleState::Idle);
        }
        if let Some(pos) = self.in_flight.iter().position(|&i| i == index) {
            self.in_flight.remove(pos);
        }
        self.idle.push(index);
        if keep {
            self.kept.insert(
                (index, generation),
                IoCompletion {
                    result,
                    buffer,
                    target,
                },
            );
        }
        if let Some(panic) = local_callback {
            std::panic::resume_unwind(panic);
        }
    }

    /// Reads `buf.len() / BLCKSZ` blocks of `rel` starting at `block` through the AIO
    /// subsystem — split at segment boundaries and `io_combine_limit`, kept in flight by the
    /// [`IoPipeline`] (up to every handle of the backend), partial reads re-issued — and
    /// returns the filled buffer. Any block that cannot be read (a file that cannot be
    /// opened, an I/O error, the end of the file) is an error naming the file (and, for I/O
    /// errors, the blocks): the first one in block order, returned after every I/O into `buf`
    /// has completed, with nothing left in flight.
    pub fn read_blocks(
        &mut self,
        rel: &RelFile,
        block: u64,
        buf: IoBuffer,
    ) -> Result<IoBuffer, AioError> {
        self.blocks_io(IoOp::Readv, rel, block, buf)
    }

    /// Writes whole blocks of `buf` to `rel` at `block` through the AIO subsystem (creating
    /// segment files as needed) and returns the buffer. Errors as for
    /// [`Backend::read_blocks`]: a directory that cannot be written, or a failed write, ends
    /// the request with the error once nothing is in flight.
    pub fn write_blocks(
        &mut self,
        rel: &RelFile,
        block: u64,
        buf: IoBuffer,
    ) -> Result<IoBuffer, AioError> {
        self.blocks_io(IoOp::Writev, rel, block, buf)
    }

    fn blocks_io(
        &mut self,
        op: IoOp,
        rel: &RelFile,
        block: u64,
        mut buf: IoBuffer,
    ) -> Result<IoBuffer, AioError> {
        if !buf.len().is_multiple_of(BLCKSZ) {
            return Err(AioError::InvalidRequest(format!(
                "buffer of {} bytes is not a whole number of {BLCKSZ}-byte blocks",
                buf.len()
            )));
        }
        // Before any arithmetic on the range: a block number past MaxBlockNumber would wrap
        // onto another block.
        rel.check_block_range(block, (buf.len() / BLCKSZ) as u64)?;
        let mut driver = BlocksIo {
            op,
            rel,
            first_block: block,
            ranges: BlockRanges::new(
                block,
                (buf.len() / BLCKSZ) as u64,
                self.core.config.io_combine_limit_blocks as u64,
            ),
            base: buf.as_mut_ptr(),
        };
        // Every handle may be in flight at once; the pipeline waits for all of them before
        // returning or unwinding, so `buf` outlives every I/O into it.
        let depth = self.shared.handles.len();
        IoPipeline::new(depth).run(self, &mut driver)?;
        Ok(buf)
    }
}

/// The pipeline driver behind [`Backend::read_blocks`] and [`Backend::write_blocks`]: the
/// request split at segment boundaries and `io_combine_limit`, each piece staged straight
/// into (or out of) the caller's buffer.
struct BlocksIo<'r> {
    op: IoOp,
    rel: &'r RelFile,
    /// Block of `rel` at the start of the buffer.
    first_block: u64,
    /// The request, cut at segment boundaries and `io_combine_limit`.
    ranges: BlockRanges,
    /// Start of the caller's buffer; it outlives the pipeline run.
    base: *mut u8,
}

impl PipelineDriver for BlocksIo<'_> {
    type Tag = ();

    fn next_io(&mut self, _backend: &mut Backend) -> Option<PipelineIo<()>> {
        self.ranges.next()
    }

    fn stage(&mut self, backend: &mut Backend, io: &PipelineIo<()>) -> Result<WaitRef, AioError> {
        let mode = match self.op {
            IoOp::Readv => OpenMode::Read,
            IoOp::Writev => OpenMode::ReadWriteCreate,
        };
        let (file, offset, target) = backend.locate(self.rel, io.first_block, io.nblocks, mode)?;
        let offset_in_buffer_bytes = (io.first_block - self.first_block) as usize * BLCKSZ;
        let iov = libc::iovec {
            // SAFETY: the range lies inside the caller's buffer (the driver never yields a
            // block past `total_blocks`, and a re-issued rest lies inside its range).
            iov_base: unsafe { self.base.add(offset_in_buffer_bytes) }.cast(),
            iov_len: io.nblocks as usize * BLCKSZ,
        };
        let mut handle = backend.acquire()?;
        handle.keep_result();
        handle.set_local_memory(true);
        // SAFETY: the buffer outlives every I/O into it — the pipeline waits for all of them
        // before `blocks_io` returns or unwinds — and nothing reads or writes it meanwhile.
        unsafe { handle.stage(self.op, file, offset, &[iov], target) }
    }

    fn complete(&mut self, _io: &PipelineIo<()>, completion: IoCompletion) -> Result<(), AioError> {
        match completion.result.status {
            // PARTIAL: the pipeline re-issues the rest.
            IoStatus::Ok | IoStatus::Partial => Ok(()),
            IoStatus::Error | IoStatus::Unknown => Err(completion
                .result
                .error
                .unwrap_or_else(|| AioError::Internal("an I/O failed without saying why".into()))),
        }
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        // I/O in flight points into memory its issuer owns; the backend must not go away
        // (and let its handles be reused) before the kernel is done with it.
        self.wait_all();
        self.kept.clear();
        self.shared.active.store(false, Ordering::Release);
    }
}

/// A handle handed out to a caller, who defines and stages one I/O on it. Dropping it
/// unstaged returns it to the pool.
pub struct AioHandle<'a> {
    backend: &'a mut Backend,
    index: u32,
    staged: bool,
}

impl AioHandle<'_> {
    /// The handle's index within its backend.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// The generation of the I/O that will run on this handle.
    pub fn generation(&self) -> u64 {
        self.shared().generation.load(Ordering::Acquire)
    }

    fn shared(&self) -> &handle::HandleShared {
        &self.backend.shared.handles[self.index as usize]
    }

    /// Registers completion callbacks and their handle data (at most `io_combine_limit`
    /// values, typically buffer ids).
    pub fn set_callbacks(&mut self, callbacks: Arc<dyn AioCallbacks>, handle_data: &[u64]) {
        let mut data = self.shared().lock();
        data.callbacks = Some(callbacks);
        data.handle_data.clear();
        data.handle_data.extend_from_slice(handle_data);
    }

    /// Asks for the completion to be kept for [`Backend::wait`] / [`Backend::take_completion`].
    pub fn keep_result(&mut self) {
        self.shared().lock().keep_result = true;
    }

    /// Marks the memory as backend-local (`pg_aios.f_localmem`).
    pub fn set_local_memory(&mut self, local: bool) {
        self.shared().lock().f_localmem = local;
    }

    /// Defines and stages a vectored read or write of `target` at `offset_bytes` of `file`.
    ///
    /// # Safety
    ///
    /// The memory the iovecs describe must stay valid, and must not be read (for reads) or
    /// written (for either) by anyone else, until the I/O has completed — that is, until a
    /// wait on the returned [`WaitRef`] has returned, or the shared callback ran.
    pub unsafe fn stage(
        mut self,
        op: IoOp,
        file: Arc<SegmentFile>,
        offset_bytes: u64,
        iovecs: &[libc::iovec],
        target: IoTarget,
    ) -> Result<WaitRef, AioError> {
        let combine_bytes = self.backend.core.config.io_combine_limit_bytes();
        let len: usize = iovecs.iter().map(|iov| iov.iov_len).sum();
        if len != target.len_bytes() || len == 0 {
            return Err(AioError::InvalidRequest(format!(
                "{} covers {} bytes but its iovecs describe {len}",
                target.desc(),
                target.len_bytes()
            )));
        }
        if len > combine_bytes {
            return Err(AioError::InvalidRequest(format!(
                "{} is larger than io_combine_limit ({} blocks)",
                target.desc(),
                combine_bytes / BLCKSZ
            )));
        }
        if op == IoOp::Writev && !file.is_writable() {
            return Err(AioError::InvalidRequest(format!(
                "{} is a write to a file opened read-only",
                target.desc()
            )));
        }
        if file.is_direct() {
            check_direct_alignment(&file, offset_bytes, iovecs)?;
        }
        let fd = file.raw_fd();
        let wref = {
            let handle = self.shared();
            let mut data = handle.lock();
            data.op = Some(op);
            data.file = Some(file);
            data.offset_bytes = offset_bytes;
            data.iovecs.clear();
            data.iovecs.extend_from_slice(iovecs);
            data.target = target;
            data.result = IoResult::unknown();
            handle.set_state(HandleState::Defined);
            handle.set_state(HandleState::Staged);
            WaitRef {
                backend_id: self.backend.shared.id,
                index: self.index,
                generation: handle.generation.load(Ordering::Acquire),
            }
        };
        self.staged = true;
        let index = self.index;
        let backend = &mut *self.backend;
        if backend.batch_hold == BatchHold::Contiguous
            && !backend.staged.is_empty()
            && backend.staged_end != Some((fd, op, offset_bytes))
        {
            // Cannot merge with what is staged: holding those back gains nothing more.
            backend.submit_staged();
        }
        backend.staged.push(index);
        backend.staged_end = Some((fd, op, offset_bytes + len as u64));
        backend.in_flight.push_back(index);
        if backend.batch_depth == 0 || backend.staged.len() >= MAX_BATCH_IOS {
            backend.submit_staged();
        }
        Ok(wref)
    }

    /// Stages a read of `target` into an owned buffer (returned in the [`IoCompletion`];
    /// implies [`AioHandle::keep_result`]). Safe: the handle owns the memory meanwhile.
    pub fn stage_read_owned(
        mut self,
        file: Arc<SegmentFile>,
        offset_bytes: u64,
        buffer: IoBuffer,
        target: IoTarget,
    ) -> Result<WaitRef, AioError> {
        self.stage_owned(IoOp::Readv, file, offset_bytes, buffer, target)
    }

    /// Stages a write of an owned buffer (returned in the [`IoCompletion`]).
    pub fn stage_write_owned(
        mut self,
        file: Arc<SegmentFile>,
        offset_bytes: u64,
        buffer: IoBuffer,
        target: IoTarget,
    ) -> Result<WaitRef, AioError> {
        self.stage_owned(IoOp::Writev, file, offset_bytes, buffer, target)
    }

    fn stage_owned(
        &mut self,
        op: IoOp,
        file: Arc<SegmentFile>,
        offset_bytes: u64,
        mut buffer: IoBuffer,
        target: IoTarget,
    ) -> Result<WaitRef, AioError> {
        let iov = libc::iovec {
            iov_base: buffer.as_mut_ptr().cast(),
            iov_len: buffer.len(),
        };
        {
            let mut data = self.shared().lock();
            data.keep_result = true;
            data.f_localmem = true;
            // The buffer's heap allocation does not move when the IoBuffer value moves.
            data.owned_buffer = Some(buffer);
        }
        // Re-borrow self as an owned handle for `stage` without dropping it twice.
        let handle = AioHandle {
            backend: &mut *self.backend,
            index: self.index,
            staged: false,
        };
        // Ownership of the handle moves to `handle`.
        self.staged = true;
        // SAFETY: the memory is owned by the handle until the owner reclaims it. On error
        // `stage` releases the handle, which drops the buffer with the handle data.
        unsafe { handle.stage(op, file, offset_bytes, &[iov], target) }
    }
}

impl Drop for AioHandle<'_> {
    fn drop(&mut self) {
        if self.staged {
            return;
        }
        // Released without staging (or staging failed): back to idle, like
        // pgaio_io_release().
        let handle = &self.backend.shared.handles[self.index as usize];
        {
            let mut data = handle.lock();
            data.reset();
            handle.generation.fetch_add(1, Ordering::AcqRel);
            handle.set_state(HandleState::Idle);
        }
        self.backend.idle.push(self.index);
    }
}

fn check_direct_alignment(
    file: &SegmentFile,
    offset_bytes: u64,
    iovecs: &[libc::iovec],
) -> Result<(), AioError> {
    let alignment = file.alignment();
    let bad_offset = !offset_bytes.is_multiple_of(alignment.offset_align_bytes as u64);
    let bad_iov = iovecs.iter().find(|iov| {
        !(iov.iov_base as usize).is_multiple_of(alignment.mem_align_bytes)
            || iov.iov_len % alignment.offset_align_bytes != 0
    });
    if bad_offset || bad_iov.is_some() {
        let iov = bad_iov.unwrap_or(&iovecs[0]);
        let addr = iov.iov_base as usize;
        return Err(StorageError::Misaligned {
            path: file.path().to_path_buf(),
            mem_align: alignment.mem_align_bytes,
            offset_align: alignment.offset_align_bytes,
            got_addr_align: if addr == 0 {
                0
            } else {
                1 << addr.trailing_zeros()
            },
            offset: offset_bytes,
            len_bytes: iov.iov_len,
        }
        .into());
    }
    Ok(())
}
