//! AIO handles: the state machine every I/O walks through.
//!
//! Each backend owns `io_max_concurrency` handles, allocated once. A handle is reused for
//! I/O after I/O; its generation number is bumped on every reuse so that a stale
//! [`WaitRef`] — (backend, handle index, generation) — can tell at once that the I/O it
//! refers to is long finished.
//!
//! ```text
//!   IDLE ─acquire─► HANDED_OUT ─define─► DEFINED ─stage─► STAGED ─submit─► SUBMITTED
//!    ▲                  │ (released unused)                                   │ kernel done
//!    │                  ▼                                                     ▼
//!    └──generation+1── COMPLETED_LOCAL ◄─owner reclaims── COMPLETED_SHARED ◄─ COMPLETED_IO
//!                      (local callback)                  (shared callback, waiters woken)
//! ```
//!
//! Who may touch what: while a handle is HANDED_OUT or DEFINED only its owner writes it;
//! from SUBMITTED until COMPLETED_SHARED the executing side (the method, a worker, a reaper)
//! completes it; after that only the owner reclaims it. The per-handle mutex makes every one
//! of those hand-overs a plain lock acquisition; the atomic `state` and `generation` let
//! waiters poll without taking it.
//!
//! Every transition goes through `HandleShared::set_state`, which in debug builds asserts it
//! is one of PostgreSQL's (`HandleState::can_become`): a slip shows up at once, naming both
//! states, rather than later as a hang or a buffer reused under the kernel.
//!
//! Completion (`BackendShared::complete`) always reaches COMPLETED_SHARED: the fault injector
//! and the shared callback run under `catch_unwind`, and a panic there becomes the I/O's
//! error, so no waiter is left waiting on a handle nobody will complete.
//!
//! Waiting (for sync and worker; io_uring waits through its ring) spins briefly first: a
//! cached 8 kB read completes in about a microsecond, far less than a futex sleep and wake-up
//! costs, so most waits never sleep. Only then does the waiter sleep on the handle's
//! condition variable, and the completer pays for a wake-up only when someone is actually
//! asleep. The completer is a running thread (the submitter, an I/O worker), so the sleep
//! always ends.

use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::callbacks::{AioCallbacks, SharedCompletion};
use super::fault::{Fault, FaultInjector};
use super::result::{AioError, IoOp, IoResult, IoStatus, IoTarget};
use super::stats::BackendCounters;
use crate::storage::{IoBuffer, SegmentFile};

/// How long a waiter spins before sleeping. Long enough to cover a page-cache hit handed to
/// a worker and back (a few µs), short enough not to burn a core a device read would idle.
pub(crate) const WAIT_SPIN: Duration = Duration::from_micros(20);

/// The state of a handle (PostgreSQL's `PgAioHandleState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[repr(u8)]
pub enum HandleState {
    /// Free.
    Idle = 0,
    /// Given to a caller that has not yet defined an I/O.
    HandedOut = 1,
    /// The operation is defined.
    Defined = 2,
    /// Staged for submission (batch mode holds it back).
    Staged = 3,
    /// Given to the I/O method.
    Submitted = 4,
    /// The kernel answered; shared completion is running.
    CompletedIo = 5,
    /// Shared completion done; waiters may proceed.
    CompletedShared = 6,
    /// The owner ran the local callback and is about to free the handle.
    CompletedLocal = 7,
}

impl HandleState {
    pub(crate) fn from_u8(v: u8) -> HandleState {
        match v {
            0 => HandleState::Idle,
            1 => HandleState::HandedOut,
            2 => HandleState::Defined,
            3 => HandleState::Staged,
            4 => HandleState::Submitted,
            5 => HandleState::CompletedIo,
            6 => HandleState::CompletedShared,
            _ => HandleState::CompletedLocal,
        }
    }

    /// Whether a handle may go from `self` to `to` — PostgreSQL's `pgaio_io_update_state`
    /// transitions as this engine uses them:
    ///
    /// * IDLE → HANDED_OUT (acquire); HANDED_OUT → IDLE (released without staging);
    /// * HANDED_OUT → DEFINED → STAGED → SUBMITTED (DEFINED → SUBMITTED directly too: PostgreSQL
    ///   submits an I/O it executes synchronously without staging it);
    /// * SUBMITTED → COMPLETED_IO → COMPLETED_SHARED (the completer);
    /// * COMPLETED_SHARED → COMPLETED_LOCAL → IDLE (the owner reclaims).
    pub fn can_become(self, to: HandleState) -> bool {
        use HandleState::*;
        matches!(
            (self, to),
            (Idle, HandedOut)
                | (HandedOut, Defined)
                | (HandedOut, Idle)
                | (Defined, Staged)
                | (Defined, Submitted)
                | (Staged, Submitted)
                | (Submitted, CompletedIo)
                | (CompletedIo, CompletedShared)
                | (CompletedShared, CompletedLocal)
                | (CompletedLocal, Idle)
        )
    }

    /// `pg_aios.state` spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            HandleState::Idle => "IDLE",
            HandleState::HandedOut => "HANDED_OUT",
            HandleState::Defined => "DEFINED",
            HandleState::Staged => "STAGED",
            HandleState::Submitted => "SUBMITTED",
            HandleState::CompletedIo => "COMPLETED_IO",
            HandleState::CompletedShared => "COMPLETED_SHARED",
            HandleState::CompletedLocal => "COMPLETED_LOCAL",
        }
    }
}

/// A reference to one I/O that any thread can wait on or poll: (backend, handle, generation).
/// Once the handle has been reused, waiting on the reference returns at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WaitRef {
    pub(crate) backend_id: u32,
    pub(crate) index: u32,
    pub(crate) generation: u64,
}

impl WaitRef {
    /// The handle's index within its backend.
    pub fn handle_index(&self) -> u32 {
        self.index
    }

    /// The generation the reference was taken at.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The backend slot that issued the I/O.
    pub fn backend_id(&self) -> u32 {
        self.backend_id
    }
}

/// Everything about one I/O that the owner defines and the completer reads.
pub(crate) struct HandleData {
    pub op: Option<IoOp>,
    pub file: Option<Arc<SegmentFile>>,
    pub offset_bytes: u64,
    pub iovecs: Vec<libc::iovec>,
    pub target: IoTarget,
    pub callbacks: Option<Arc<dyn AioCallbacks>>,
    pub handle_data: Vec<u64>,
    pub owned_buffer: Option<IoBuffer>,
    pub keep_result: bool,
    pub result: IoResult,
    pub f_sync: bool,
    pub f_localmem: bool,
    /// When merged with followers, the combined iovec array the kernel sees (io_uring needs
    /// it to stay put until completion).
    pub group_iovecs: Vec<libc::iovec>,
    /// Handle indices merged behind this one.
    pub group_followers: Vec<u32>,
    pub submit_ns: u64,
    /// Threads sleeping on the condition variable.
    pub sleepers: u32,
}

// SAFETY: the raw pointers in `iovecs` point into memory whose owner handed it to this I/O
// and promised not to use it until completion; moving the description between threads is
// the whole point of asynchronous I/O.
unsafe impl Send for HandleData {}

impl HandleData {
    fn new(iovec_capacity: usize) -> HandleData {
        HandleData {
            op: None,
            file: None,
            offset_bytes: 0,
            iovecs: Vec::with_capacity(iovec_capacity),
            target: IoTarget {
                path: "".into(),
                first_block: 0,
                nblocks: 0,
            },
            callbacks: None,
            handle_data: Vec::new(),
            owned_buffer: None,
            keep_result: false,
            result: IoResult::unknown(),
            f_sync: false,
            f_localmem: false,
            group_iovecs: Vec::new(),
            group_followers: Vec::new(),
            submit_ns: 0,
            sleepers: 0,
        }
    }

    /// Forgets the finished I/O (keeps allocations for the next one).
    pub fn reset(&mut self) {
        self.op = None;
        self.file = None;
        self.offset_bytes = 0;
        self.iovecs.clear();
        self.callbacks = None;
        self.handle_data.clear();
        self.owned_buffer = None;
        self.keep_result = false;
        self.result = IoResult::unknown();
        self.f_sync = false;
        self.f_localmem = false;
        self.group_iovecs.clear();
        self.group_followers.clear();
        self.submit_ns = 0;
    }

    /// Total bytes the iovecs describe.
    pub fn len_bytes(&self) -> usize {
        self.iovecs.iter().map(|v| v.iov_len).sum()
    }
}

/// One handle, shared between its owner and whoever completes or waits on it.
pub(crate) struct HandleShared {
    pub state: AtomicU8,
    pub generation: AtomicU64,
    pub data: Mutex<HandleData>,
    pub cond: Condvar,
}

impl HandleShared {
    pub fn lock(&self) -> MutexGuard<'_, HandleData> {
        // A panic in a user callback while this lock is held must not wedge every later
        // waiter; the data is reset on reuse anyway.
        self.data.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn state(&self) -> HandleState {
        HandleState::from_u8(self.state.load(Ordering::Acquire))
    }

    /// Moves the handle to state `to`. Debug builds check the transition against the state
    /// machine ([`HandleState::can_become`]): an illegal one is a bookkeeping bug that would
    /// otherwise surface much later as a hang or a reused buffer.
    pub fn set_state(&self, to: HandleState) {
        let from = self.state();
        debug_assert!(
            from.can_become(to),
            "illegal AIO handle state transition {} -> {}",
            from.as_str(),
            to.as_str()
        );
        self.state.store(to as u8, Ordering::Release);
    }

    /// True when the I/O of `generation` no longer needs waiting for.
    pub fn is_done(&self, generation: u64) -> bool {
        if self.generation.load(Ordering::Acquire) != generation {
            return true;
        }
        matches!(
            self.state(),
            HandleState::CompletedShared | HandleState::CompletedLocal | HandleState::Idle
        )
    }
}

/// Process-wide hooks every backend can reach without a reference cycle to the `Aio`.
pub(crate) struct AioHooks {
    pub fault: std::sync::RwLock<Option<Arc<dyn FaultInjector>>>,
    pub epoch: Instant,
}

impl AioHooks {
    pub fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }
}

/// The part of a backend other threads can see: its handles and counters. Method-specific
/// state (io_uring's ring) belongs to the method, indexed by `id`.
pub(crate) struct BackendShared {
    pub id: u32,
    pub handles: Box<[HandleShared]>,
    pub counters: BackendCounters,
    pub hooks: Arc<AioHooks>,
    pub tid: AtomicI32,
    pub active: std::sync::atomic::AtomicBool,
    pub direct: bool,
    /// Threads sleeping in [`BackendShared::wait_any_done_timeout`]: a completion takes
    /// `any_lock` and wakes `any_cond` only when there is one, so the common case (nobody
    /// waiting for "any") costs one atomic load per completion.
    pub any_sleepers: AtomicU32,
    pub any_lock: Mutex<()>,
    pub any_cond: Condvar,
}

impl BackendShared {
    pub fn new(
        id: u32,
        handle_count: usize,
        iovec_capacity: usize,
        hooks: Arc<AioHooks>,
        direct: bool,
    ) -> BackendShared {
        let handles = (0..handle_count)
            .map(|_| HandleShared {
                state: AtomicU8::new(HandleState::Idle as u8),
                generation: AtomicU64::new(0),
                data: Mutex::new(HandleData::new(iovec_capacity)),
                cond: Condvar::new(),
            })
            .collect();
        BackendShared {
            id,
            handles,
            counters: BackendCounters::default(),
            hooks,
            tid: AtomicI32::new(0),
            active: std::sync::atomic::AtomicBool::new(false),
            direct,
            any_sleepers: AtomicU32::new(0),
            any_lock: Mutex::new(()),
            any_cond: Condvar::new(),
        }
    }

    /// Completes handle `index` with the kernel's `raw_result`: applies injected faults,
    /// distils the result, runs the shared callback and wakes waiters. Runs in whichever
    /// thread finished the I/O.
    pub fn complete(&self, index: u32, raw_result: i64, executed_sync: bool) {
        let handle = &self.handles[index as usize];
        let mut data = handle.lock();
        debug_assert_eq!(
            handle.state(),
            HandleState::Submitted,
            "completing a handle twice"
        );
        handle.set_state(HandleState::CompletedIo);
        let op = data.op.unwrap_or(IoOp::Readv);
        data.f_sync |= executed_sync;
        // The fault injector and the shared callback are caller code running in whichever
        // thread completes the I/O — an I/O worker, another backend reaping a ring. A panic
        // there must not leave the handle short of COMPLETED_SHARED (every waiter would hang)
        // nor kill an I/O worker: it becomes this I/O's error instead.
        let shared_work = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.run_shared_completion(&mut data, op, raw_result)
        }));
        let (result, raw) = match shared_work {
            Ok(done) => done,
            Err(panic) => {
                let error = AioError::CallbackPanicked {
                    target: data.target.clone(),
                    message: panic_message(&*panic),
                };
                (
                    IoResult {
                        status: IoStatus::Error,
                        raw_result,
                        blocks_done: 0,
                        error: Some(error),
                    },
                    raw_result,
                )
            }
        };
        let counters = &self.counters;
        match result.status {
            IoStatus::Error => {
                counters.errors.fetch_add(1, Ordering::Relaxed);
            }
            IoStatus::Partial => {
                counters.partials.fetch_add(1, Ordering::Relaxed);
            }
            _ => {}
        }
        if raw > 0 {
            counters.bytes.fetch_add(raw as u64, Ordering::Relaxed);
        }
        counters
            .blocks
            .fetch_add(result.blocks_done as u64, Ordering::Relaxed);
        counters.io_ns.fetch_add(
            self.hooks.now_ns().saturating_sub(data.submit_ns),
            Ordering::Relaxed,
        );
        data.result = result;
        handle.set_state(HandleState::CompletedShared);
        if data.sleepers > 0 {
            handle.cond.notify_all();
        }
        drop(data);
        // Pairs with the fence in `wait_any_done_timeout`: either that waiter sees this
        // handle done, or this completion sees the waiter counted and wakes it under the lock
        // (the waiter checks the handles under the same lock, so the wake cannot fall between
        // its check and its sleep).
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.any_sleepers.load(Ordering::Relaxed) > 0 {
            let _guard = self.any_lock.lock().unwrap_or_else(|p| p.into_inner());
            self.any_cond.notify_all();
        }
    }

    /// Applies an injected fault, distils the result and runs the shared callback; returns
    /// the result and the raw result as (possibly) changed by the fault.
    fn run_shared_completion(
        &self,
        data: &mut HandleData,
        op: IoOp,
        raw_result: i64,
    ) -> (IoResult, i64) {
        let mut raw = raw_result;
        let injector = self
            .hooks
            .fault
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(injector) = injector {
            match injector.inject(op, &data.target) {
                Some(Fault::Errno(e)) => raw = -(e as i64),
                Some(Fault::Short { bytes }) if raw >= 0 => raw = raw.min(bytes as i64),
                Some(Fault::FlipBit { byte_offset, bit })
                    if op == IoOp::Readv && raw > byte_offset as i64 =>
                {
                    flip_bit(&data.iovecs, byte_offset, bit);
                }
                _ => {}
            }
        }
        let mut result = IoResult::distill(op, &data.target, raw);
        if let Some(callbacks) = data.callbacks.clone() {
            let mut ctx = SharedCompletion {
                op,
                target: &data.target,
                handle_data: &data.handle_data,
                result: &mut result,
                iovecs: &data.iovecs,
            };
            callbacks.complete_shared(&mut ctx);
        }
        (result, raw)
    }

    /// Waits until the I/O `(index, generation)` has completed shared: spins first, then
    /// sleeps on the handle's condition variable until the completer wakes it. For methods
    /// whose completer is a running thread (sync, worker); io_uring waits through its ring.
    pub fn wait_done(&self, index: u32, generation: u64) {
        let handle = &self.handles[index as usize];
        if handle.is_done(generation) {
            return;
        }
        if spin_until(WAIT_SPIN, || handle.is_done(generation)) {
            return;
        }
        let mut data = handle.lock();
        while !handle.is_done(generation) {
            data.sleepers += 1;
            data = handle.cond.wait(data).unwrap_or_else(|p| p.into_inner());
            data.sleepers -= 1;
        }
    }

    /// True when any of the I/Os `(index, generation)` no longer needs waiting for (false
    /// for an empty list: callers check for one first).
    pub fn any_done(&self, ios: &[(u32, u64)]) -> bool {
        ios.iter()
            .any(|&(index, generation)| self.handles[index as usize].is_done(generation))
    }

    /// Sleeps until any of the I/Os `ios` has completed shared or `timeout` has passed;
    /// returns whether one is done. An empty list is "done" (there is nothing to wait for).
    /// Completions of this backend's handles wake the sleep (see [`BackendShared::complete`]).
    pub fn wait_any_done_timeout(&self, ios: &[(u32, u64)], timeout: Duration) -> bool {
        if ios.is_empty() || self.any_done(ios) {
            return true;
        }
        let deadline = Instant::now() + timeout;
        self.any_sleepers.fetch_add(1, Ordering::Relaxed);
        std::sync::atomic::fence(Ordering::SeqCst);
        let mut guard = self.any_lock.lock().unwrap_or_else(|p| p.into_inner());
        let done = loop {
            if self.any_done(ios) {
                break true;
            }
            let now = Instant::now();
            if now >= deadline {
                break false;
            }
            guard = self
                .any_cond
                .wait_timeout(guard, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        };
        drop(guard);
        self.any_sleepers.fetch_sub(1, Ordering::Relaxed);
        done
    }

    /// Sleeps on the handle's condition variable until the I/O `(index, generation)` has
    /// completed shared or `timeout` has passed; returns whether it is done. For waiters
    /// that must re-check something else now and then (io_uring: whether anything is in
    /// the kernel to wait for).
    pub fn wait_done_timeout(&self, index: u32, generation: u64, timeout: Duration) -> bool {
        let handle = &self.handles[index as usize];
        let deadline = Instant::now() + timeout;
        let mut data = handle.lock();
        while !handle.is_done(generation) {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            data.sleepers += 1;
            data = handle
                .cond
                .wait_timeout(data, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
            data.sleepers -= 1;
        }
        true
    }
}

/// How long a spinner busy-waits before it starts yielding the CPU between polls.
const PURE_SPIN: Duration = Duration::from_micros(2);

/// Polls `done` for up to `budget`: busy-waiting for the first [`PURE_SPIN`], then yielding
/// the CPU between polls. Returns whether `done` became true.
///
/// Why yield: on a machine with fewer cores than runnable threads (2 cores, a backend and
/// three I/O workers), a pure spinner can hold the core the completing thread needs for a
/// whole scheduler time slice; yielding hands it over at once while still reacting within
/// microseconds.
pub(crate) fn spin_until(budget: Duration, done: impl Fn() -> bool) -> bool {
    let start = Instant::now();
    let mut polls = 0u32;
    let mut yielding = false;
    loop {
        if done() {
            return true;
        }
        polls = polls.wrapping_add(1);
        if yielding {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
        if yielding || polls.is_multiple_of(32) {
            let elapsed = start.elapsed();
            if elapsed > budget {
                return done();
            }
            yielding = elapsed > PURE_SPIN;
        }
    }
}

/// The text of a caught panic (`panic!` payloads are `&str` or `String`).
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "(a panic without a message)".to_string()
    }
}

fn flip_bit(iovecs: &[libc::iovec], byte_offset: usize, bit: u8) {
    let mut skip = byte_offset;
    for iov in iovecs {
        if skip < iov.iov_len {
            // SAFETY: the iovec's memory belongs to this I/O until completion.
            unsafe {
                let p = (iov.iov_base as *mut u8).add(skip);
                *p ^= 1 << (bit & 7);
            }
            return;
        }
        skip -= iov.iov_len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bare_handle() -> HandleShared {
        HandleShared {
            state: AtomicU8::new(HandleState::Idle as u8),
            generation: AtomicU64::new(0),
            data: Mutex::new(HandleData::new(1)),
            cond: Condvar::new(),
        }
    }

    #[test]
    fn a_handle_walks_the_state_machine() {
        use HandleState::*;
        let handle = bare_handle();
        // Read completed asynchronously, then released unused.
        for state in [
            HandedOut,
            Defined,
            Staged,
            Submitted,
            CompletedIo,
            CompletedShared,
            CompletedLocal,
            Idle,
            HandedOut,
            Idle,
        ] {
            handle.set_state(state);
            assert_eq!(handle.state(), state);
        }
        // Every state can be left, and none goes back to where the owner cannot follow.
        assert!(
            Defined.can_become(Submitted),
            "PostgreSQL's synchronous path"
        );
        assert!(
            !Submitted.can_become(Idle),
            "an I/O in flight is never just dropped"
        );
        assert!(
            !CompletedShared.can_become(Idle),
            "the owner reclaims first"
        );
        assert!(!Idle.can_become(Submitted));
        assert!(!Staged.can_become(Staged));
    }

    /// Proves debug assertions run: an illegal transition through the test-only path (a
    /// bare handle) panics naming both states.
    #[cfg(debug_assertions)]
    #[test]
    #[should_panic(expected = "illegal AIO handle state transition IDLE -> SUBMITTED")]
    fn an_illegal_transition_panics_in_debug_builds() {
        bare_handle().set_state(HandleState::Submitted);
    }
}
