//! `io_method = io_uring`: one ring per backend, through the `io-uring` crate.
//!
//! The rings belong to this method, indexed by backend id — PostgreSQL's
//! `pgaio_uring_contexts`, one per process — so the generic AIO layer never sees one. Each is
//! created when its backend slot is first used, sized to the slot's `io_max_concurrency`
//! handles, so a submission never finds the ring full and a completion never overflows.
//! Every group (one merged kernel I/O) becomes one `READV` or `WRITEV` SQE whose user data is
//! the group's leader handle; all of a batch's SQEs go to the kernel in one `io_uring_enter`.
//!
//! Completions are reaped by whichever thread waits, as in PostgreSQL: the owner waiting on
//! its own I/O, or another backend waiting on a buffer the owner is reading.
//!
//! ```text
//!   owner:   sq_lock { push SQE per group ; io_uring_enter(to_submit = n), retried ≤ bound }
//!            SQEs the kernel did not take → those I/Os fail with the errno; ring retired
//!   waiter:  loop { cq_lock { drain CQEs → complete handles }
//!                   done? return
//!                   SQEs in the kernel? io_uring_enter(GETEVENTS, 1, timeout WAIT_SLICE)
//!                   else              sleep on the handle ≤ WAIT_SLICE (owner is submitting) }
//! ```
//!
//! The two locks are separate so a thread sleeping in the kernel for completions never
//! blocks the owner from submitting more I/O.
//!
//! ## Submission failures
//!
//! `io_uring_enter` can refuse a batch (`EAGAIN`: no memory for requests; `EBUSY`: the
//! completion queue is backed up; `EINTR`) or take only part of it. An SQE left in the ring
//! is an I/O nobody will ever complete — and a waiter asking the kernel for its completion
//! would sleep forever — so a submission is retried at most [`MAX_SUBMIT_ATTEMPTS`] times
//! without progress (with a short back-off, reaping completions in between to make room),
//! and whatever the kernel still has not taken is failed with the errno (`raw_result =
//! -errno`, an `AioError::Io` naming file and blocks). Those SQEs cannot be taken back out
//! of the ring, and a later `io_uring_enter` would submit them with iovecs that no longer
//! belong to them, so the ring is *retired*: it submits nothing more, its in-flight I/O is
//! reaped as usual, and the next submission on that backend first drains it and replaces it
//! with a fresh ring.
//!
//! ## Bounded waits
//!
//! A waiter sleeps in the kernel only while some SQE of the ring is in the kernel (counted
//! from what `io_uring_enter` reports consumed until its CQE is reaped), and then for at most
//! [`WAIT_SLICE`] (`IORING_ENTER_EXT_ARG` timeouts, Linux 5.11+). With nothing in the kernel
//! the I/O it waits for is still with its owner (staged, or being submitted or failed), so it
//! sleeps on the handle for at most a slice and looks again — never a kernel wait that
//! nothing can end.
//!
//! Whether io_uring may be used at all is decided at start-up by [`probe`], which turns each
//! way the kernel can refuse — `kernel.io_uring_disabled`, a seccomp filter, `RLIMIT_MEMLOCK`,
//! the descriptor limit — into an error that says which one it was and what to do.

use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use io_uring::{opcode, types, IoUring, Probe};

use super::{distribute, Group, IoMethodImpl};
use crate::aio::fault::SubmitFault;
use crate::aio::handle::BackendShared;
use crate::aio::result::{AioError, IoOp};
use crate::config::IoMethodKind;

/// `io_uring_enter` flag asking the kernel to wait for completions (the crate keeps its
/// constant private; the value is fixed by the kernel ABI).
const IORING_ENTER_GETEVENTS: u32 = 1;

/// `io_uring_enter` flag saying the argument is an `io_uring_getevents_arg` (with a timeout)
/// rather than a signal mask; kernel ABI value, Linux 5.11+.
const IORING_ENTER_EXT_ARG: u32 = 8;

/// Most attempts to hand a batch to the kernel without progress before the I/Os it has not
/// taken are failed. `EAGAIN`/`EBUSY` mean the kernel is short of memory or its completion
/// queue is backed up; a few attempts with reaping in between ride out a transient squeeze,
/// while a persistent one fails the I/O within about [`MAX_SUBMIT_BACKOFF`] × attempts
/// instead of stalling the caller. PostgreSQL PANICs on the first failure; a library cannot.
pub const MAX_SUBMIT_ATTEMPTS: u32 = 8;

/// Longest pause between two submission attempts; the pause doubles from
/// [`FIRST_SUBMIT_BACKOFF`], so all attempts together wait well under 50 ms.
pub const MAX_SUBMIT_BACKOFF: Duration = Duration::from_millis(8);

/// First pause after a refused submission: long enough for in-flight I/O to complete and
/// free completion-queue room on a fast device.
pub const FIRST_SUBMIT_BACKOFF: Duration = Duration::from_micros(100);

/// Longest single sleep of a waiter, in the kernel or on a handle, before it looks again.
/// Completions wake a kernel sleeper at once, so the slice only bounds how long a waiter
/// can miss a change the kernel does not signal (its I/O failed or submitted by its owner);
/// 10 ms costs nothing when I/O is flowing and bounds the rare miss.
pub const WAIT_SLICE: Duration = Duration::from_millis(10);

/// One backend's ring.
pub(crate) struct Ring {
    ring: IoUring,
    sq_lock: Mutex<()>,
    cq_lock: Mutex<()>,
    /// SQEs the kernel has taken, ever. With `reaped_cqes`, tells how many are still in the
    /// kernel ([`Ring::in_kernel`]). Two ever-growing counts rather than one up-down count:
    /// the submitter adds what the kernel took only after `io_uring_enter` returns, by which
    /// time another thread may already have reaped some of those completions.
    submitted_sqes: AtomicUsize,
    /// Completions reaped, ever.
    reaped_cqes: AtomicUsize,
    /// 0 while usable; the errno that retired the ring when SQEs had to be abandoned in it.
    retired_errno: AtomicI32,
    /// SQEs left in a retired ring, never to be submitted.
    abandoned_sqes: AtomicUsize,
    /// Whether `io_uring_enter` accepts a timeout (`IORING_FEAT_EXT_ARG`).
    timed_waits: bool,
}

impl Ring {
    /// Creates a ring with room for `handles` I/Os in flight.
    pub fn new(handles: usize) -> Result<Ring, AioError> {
        let entries = (handles.max(2) as u32).next_power_of_two();
        let ring = IoUring::builder()
            .setup_cqsize(entries * 2)
            .build(entries)
            .map_err(|e| explain_setup_error(&e))?;
        let timed_waits = ring.params().is_feature_ext_arg();
        Ok(Ring {
            ring,
            sq_lock: Mutex::new(()),
            cq_lock: Mutex::new(()),
            submitted_sqes: AtomicUsize::new(0),
            reaped_cqes: AtomicUsize::new(0),
            retired_errno: AtomicI32::new(0),
            abandoned_sqes: AtomicUsize::new(0),
            timed_waits,
        })
    }

    /// SQEs pushed but not yet taken by the kernel. Call with `sq_lock` held.
    fn sqes_waiting(&self) -> usize {
        // SAFETY: the caller holds sq_lock, so this is the only SubmissionQueue in existence;
        // it is only read.
        unsafe { self.ring.submission_shared() }.len()
    }

    /// Puts one SQE per group on the ring and hands them to the kernel, retrying a bounded
    /// number of times; I/Os the kernel did not take are failed with the errno.
    pub fn submit_groups(&self, backend: &BackendShared, groups: &[Group]) {
        let sq_guard = self.sq_lock.lock().unwrap_or_else(|p| p.into_inner());
        // Groups failed before reaching the kernel, with their raw result (-errno).
        let mut failed: Vec<(usize, i64)> = Vec::new();
        // Groups whose SQE is in the ring, in ring order.
        let mut pushed: Vec<usize> = Vec::with_capacity(groups.len());
        {
            // SAFETY: sq_lock guarantees this is the only SubmissionQueue in existence.
            let mut sq = unsafe { self.ring.submission_shared() };
            for (group_index, group) in groups.iter().enumerate() {
                let leader = group[0];
                let mut data = backend.handles[leader as usize].lock();
                if group.len() > 1 {
                    let mut all = std::mem::take(&mut data.group_iovecs);
                    all.clear();
                    all.extend_from_slice(&data.iovecs);
                    drop(data);
                    for &follower in &group[1..] {
                        all.extend_from_slice(&backend.handles[follower as usize].lock().iovecs);
                    }
                    data = backend.handles[leader as usize].lock();
                    data.group_iovecs = all;
                    data.group_followers.clear();
                    data.group_followers.extend_from_slice(&group[1..]);
                }
                let Some(file) = data.file.as_ref() else {
                    failed.push((group_index, -(libc::EBADF as i64)));
                    continue;
                };
                let (iovecs_ptr, iovec_count) = if group.len() > 1 {
                    (data.group_iovecs.as_ptr(), data.group_iovecs.len() as u32)
                } else {
                    (data.iovecs.as_ptr(), data.iovecs.len() as u32)
                };
                let fd = types::Fd(file.raw_fd());
                let entry = match data.op.unwrap_or(IoOp::Readv) {
                    IoOp::Readv => opcode::Readv::new(fd, iovecs_ptr, iovec_count)
                        .offset(data.offset_bytes)
                        .build(),
                    IoOp::Writev => opcode::Writev::new(fd, iovecs_ptr, iovec_count)
                        .offset(data.offset_bytes)
                        .build(),
                }
                .user_data(leader as u64);
                // SAFETY: the iovec array and the memory it points to stay valid and
                // untouched until the CQE arrives: they belong to the leader handle, which
                // cannot be reused before it is completed, and to the issuer, who promised
                // not to touch them. An SQE the kernel never takes is never submitted later
                // either (the ring is retired, see `submit_pushed`).
                let pushed_ok = unsafe { sq.push(&entry) }.is_ok();
                if pushed_ok {
                    pushed.push(group_index);
                } else {
                    // Cannot happen: the ring has an entry per handle. Fail the I/O, not the
                    // process.
                    failed.push((group_index, -(libc::EBUSY as i64)));
                }
            }
            sq.sync();
        }
        let (abandoned, errno) = self.submit_pushed(backend);
        if abandoned > 0 {
            // The kernel takes SQEs in ring order: the last `abandoned` never reached it.
            for &group_index in &pushed[pushed.len() - abandoned..] {
                failed.push((group_index, -(errno as i64)));
            }
        }
        drop(sq_guard);
        for (group_index, raw) in failed {
            // Fail each handle with the errno itself: re-executing a merged group handle by
            // handle (what `distribute` does with a failed merged I/O) would turn a refused
            // submission into silent synchronous I/O.
            for &index in &groups[group_index] {
                backend.complete(index, raw, false);
            }
        }
    }

    /// Hands the SQEs waiting in the ring to the kernel. Returns how many it could not hand
    /// over after the bounded retries (0 normally) and the errno that stopped it; in that
    /// case the ring is retired. Call with `sq_lock` held.
    fn submit_pushed(&self, backend: &BackendShared) -> (usize, i32) {
        let retired = self.retired_errno.load(Ordering::Acquire);
        if retired != 0 {
            // Never enter a retired ring with SQEs in it: those abandoned earlier would go
            // to the kernel with iovecs that are no longer theirs.
            return (
                self.sqes_waiting().saturating_sub(self.abandoned()),
                retired,
            );
        }
        let mut fruitless_attempts = 0u32;
        let mut backoff = FIRST_SUBMIT_BACKOFF;
        let mut last_errno = libc::EAGAIN;
        loop {
            let waiting = self.sqes_waiting();
            if waiting == 0 {
                return (0, 0);
            }
            if fruitless_attempts >= MAX_SUBMIT_ATTEMPTS {
                self.retire(last_errno, waiting);
                return (waiting, last_errno);
            }
            let injected = backend
                .hooks
                .fault
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .as_ref()
                .and_then(|injector| injector.inject_submit(waiting));
            let outcome = match injected {
                Some(SubmitFault::Errno(errno)) => Err(std::io::Error::from_raw_os_error(errno)),
                Some(SubmitFault::Partial { submitted }) => {
                    // SAFETY: a plain io_uring_enter submitting `submitted` (≤ waiting) of
                    // the SQEs this thread pushed under sq_lock; no argument pointer.
                    unsafe {
                        self.ring.submitter().enter::<libc::sigset_t>(
                            submitted.min(waiting as u32),
                            0,
                            0,
                            None,
                        )
                    }
                }
                None => self.ring.submitter().submit(),
            };
            match outcome {
                Ok(taken) if taken > 0 => {
                    self.submitted_sqes.fetch_add(taken, Ordering::AcqRel);
                    fruitless_attempts = 0;
                }
                Ok(_) => {
                    // The kernel took nothing without saying why: treat as a transient
                    // shortage, like EAGAIN.
                    fruitless_attempts += 1;
                    last_errno = libc::EAGAIN;
                    self.back_off(backend, &mut backoff);
                }
                Err(e) => {
                    let errno = e.raw_os_error().unwrap_or(libc::EIO);
                    fruitless_attempts += 1;
                    last_errno = errno;
                    match errno {
                        libc::EINTR => {}
                        libc::EAGAIN | libc::EBUSY => self.back_off(backend, &mut backoff),
                        _ => {
                            let waiting = self.sqes_waiting();
                            self.retire(errno, waiting);
                            return (waiting, errno);
                        }
                    }
                }
            }
        }
    }

    /// Between two refused submissions: reap what completed (which frees completion-queue
    /// room, the usual cause of EBUSY) and pause, doubling the pause up to a bound.
    fn back_off(&self, backend: &BackendShared, backoff: &mut Duration) {
        self.reap(backend);
        std::thread::sleep(*backoff);
        *backoff = (*backoff * 2).min(MAX_SUBMIT_BACKOFF);
    }

    /// Retires the ring: `abandoned` SQEs stay in it forever, so nothing is ever submitted
    /// through it again.
    fn retire(&self, errno: i32, abandoned: usize) {
        self.abandoned_sqes.store(abandoned, Ordering::Release);
        self.retired_errno.store(errno.max(1), Ordering::Release);
    }

    fn abandoned(&self) -> usize {
        self.abandoned_sqes.load(Ordering::Acquire)
    }

    /// The errno that retired the ring, if it was.
    fn retired(&self) -> Option<i32> {
        match self.retired_errno.load(Ordering::Acquire) {
            0 => None,
            errno => Some(errno),
        }
    }

    /// Reaps completions, then, if `done()` still does not hold, sleeps in the kernel for
    /// at most [`WAIT_SLICE`] — but only when some SQE is in the kernel to wake it. Returns
    /// whether `done()` holds; `false` leaves the caller to sleep elsewhere and call again.
    pub fn wait_for_completions(&self, backend: &BackendShared, done: impl Fn() -> bool) -> bool {
        let _cq = self.cq_lock.lock().unwrap_or_else(|p| p.into_inner());
        self.reap_locked(backend);
        if done() {
            return true;
        }
        if self.in_kernel() == 0 {
            return false;
        }
        let rc = if self.timed_waits {
            let timeout = types::Timespec::from(WAIT_SLICE);
            let args = types::SubmitArgs::new().timespec(&timeout);
            // SAFETY: io_uring_enter submitting nothing and waiting for one completion, with
            // an io_uring_getevents_arg (SubmitArgs is its transparent wrapper) that outlives
            // the call.
            unsafe {
                self.ring.submitter().enter(
                    0,
                    1,
                    IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG,
                    Some(&args),
                )
            }
        } else {
            // SAFETY: plain io_uring_enter asking for one completion; submits nothing. An SQE
            // is in the kernel, so a completion will come and end the sleep.
            unsafe {
                self.ring
                    .submitter()
                    .enter::<libc::sigset_t>(0, 1, IORING_ENTER_GETEVENTS, None)
            }
        };
        // ETIME (the slice ended) and EINTR just mean "look again". Any other error of a
        // wait that submits nothing leaves the I/O in flight; yield so that looking again
        // does not become a busy loop while it completes.
        if let Err(e) = rc {
            if !matches!(e.raw_os_error(), Some(libc::ETIME) | Some(libc::EINTR)) {
                std::thread::yield_now();
            }
        }
        self.reap_locked(backend);
        done()
    }

    /// SQEs the kernel has taken whose completion has not been reaped. It may read low —
    /// briefly 0 while a submitter has not yet counted what the kernel took and a reaper
    /// already counted some of its completions; waiters then sleep on the handle for a
    /// bounded slice — but never high, which would send a waiter to sleep in the kernel
    /// with nothing there to wake it: `submitted` is read before `reaped`.
    fn in_kernel(&self) -> usize {
        let submitted = self.submitted_sqes.load(Ordering::Acquire);
        submitted.saturating_sub(self.reaped_cqes.load(Ordering::Acquire))
    }

    /// Drains every available completion without waiting.
    pub fn reap(&self, backend: &BackendShared) {
        if let Ok(_cq) = self.cq_lock.try_lock() {
            self.reap_locked(backend);
        }
    }

    fn reap_locked(&self, backend: &BackendShared) {
        loop {
            let mut done: Vec<(u32, i64)> = Vec::new();
            {
                // SAFETY: cq_lock is held, so this is the only CompletionQueue.
                let mut cq = unsafe { self.ring.completion_shared() };
                cq.sync();
                for cqe in &mut cq {
                    done.push((cqe.user_data() as u32, cqe.result() as i64));
                }
            }
            if done.is_empty() {
                return;
            }
            self.reaped_cqes.fetch_add(done.len(), Ordering::AcqRel);
            for (leader, raw) in done {
                let followers = {
                    let mut data = backend.handles[leader as usize].lock();
                    std::mem::take(&mut data.group_followers)
                };
                let mut group = Vec::with_capacity(1 + followers.len());
                group.push(leader);
                group.extend_from_slice(&followers);
                distribute(backend, &group, raw, false);
            }
        }
    }

    /// Waits (in slices) until nothing this ring submitted is still in the kernel.
    fn drain(&self, backend: &BackendShared) {
        while self.in_kernel() > 0 {
            self.wait_for_completions(backend, || false);
        }
    }
}

/// The io_uring method: the rings of every backend, by backend id.
pub(crate) struct UringMethod {
    /// Ring of backend slot `i` at index `i`; `None` until the slot is first used.
    rings: RwLock<Vec<Option<Arc<Ring>>>>,
    /// Handles per backend (`io_max_concurrency`): every ring's size.
    handles_per_backend: usize,
}

impl UringMethod {
    /// The method for backends of `handles_per_backend` handles; rings come per backend.
    pub fn new(handles_per_backend: usize) -> UringMethod {
        UringMethod {
            rings: RwLock::new(Vec::new()),
            handles_per_backend,
        }
    }

    fn ring(&self, backend_id: u32) -> Option<Arc<Ring>> {
        self.rings
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(backend_id as usize)
            .cloned()
            .flatten()
    }

    /// The ring to submit on: the backend's own, or — when it was retired — a fresh one,
    /// once everything the old one had in the kernel has completed.
    fn ring_for_submit(&self, backend: &BackendShared) -> Result<Arc<Ring>, i32> {
        let ring = self.ring(backend.id).ok_or(libc::ENXIO)?;
        if ring.retired().is_none() {
            return Ok(ring);
        }
        ring.drain(backend);
        let fresh = Arc::new(
            Ring::new(self.handles_per_backend).map_err(|e| e.errno().unwrap_or(libc::EIO))?,
        );
        let mut rings = self.rings.write().unwrap_or_else(|p| p.into_inner());
        rings[backend.id as usize] = Some(fresh.clone());
        Ok(fresh)
    }
}

impl IoMethodImpl for UringMethod {
    fn kind(&self) -> IoMethodKind {
        IoMethodKind::IoUring
    }

    fn attach_backend(&self, backend: &BackendShared) -> Result<(), AioError> {
        let mut rings = self.rings.write().unwrap_or_else(|p| p.into_inner());
        let slot = backend.id as usize;
        if rings.len() <= slot {
            rings.resize(slot + 1, None);
        }
        if rings[slot].is_none() {
            rings[slot] = Some(Arc::new(Ring::new(self.handles_per_backend)?));
        }
        Ok(())
    }

    fn submit(&self, backend: &Arc<BackendShared>, groups: Vec<Group>) {
        match self.ring_for_submit(backend) {
            Ok(ring) => ring.submit_groups(backend, &groups),
            Err(errno) => {
                for group in &groups {
                    for &index in group {
                        backend.complete(index, -(errno as i64), false);
                    }
                }
            }
        }
    }

    fn wait_for(&self, backend: &BackendShared, index: u32, generation: u64) {
        let handle = &backend.handles[index as usize];
        // Under io_uring nothing changes the state until someone reaps the ring, so spinning
        // would only delay that: reap (and if need be sleep in the kernel) at once.
        while !handle.is_done(generation) {
            let Some(ring) = self.ring(backend.id) else {
                backend.wait_done(index, generation);
                return;
            };
            if ring.wait_for_completions(backend, || handle.is_done(generation)) {
                return;
            }
            if ring.in_kernel() == 0 {
                // The I/O is still with its owner (staged, being submitted, or being failed):
                // the owner's completion wakes this sleep, the slice bounds it.
                backend.wait_done_timeout(index, generation, WAIT_SLICE);
            }
        }
    }

    fn wait_any(&self, backend: &BackendShared, ios: &[(u32, u64)]) {
        // As `wait_for`: nothing completes until someone reaps the ring, so reap and sleep
        // in the kernel, which wakes at the first completion of any of this ring's SQEs.
        // An empty list has nothing to wait for (and `any_done` of it is false).
        while !ios.is_empty() && !backend.any_done(ios) {
            let Some(ring) = self.ring(backend.id) else {
                backend.wait_any_done_timeout(ios, WAIT_SLICE);
                continue;
            };
            if ring.wait_for_completions(backend, || backend.any_done(ios)) {
                return;
            }
            if ring.in_kernel() == 0 {
                // Still with the owner (staged or being failed): its completion wakes this
                // sleep, and the slice bounds it.
                backend.wait_any_done_timeout(ios, WAIT_SLICE);
            }
        }
    }

    fn reap(&self, backend: &BackendShared) {
        if let Some(ring) = self.ring(backend.id) {
            ring.reap(backend);
        }
    }
}

/// Checks that io_uring can be used: a ring can be set up, and it supports vectored reads
/// and writes. The error says why not and what to do.
pub fn probe() -> Result<(), AioError> {
    let ring = IoUring::new(8).map_err(|e| explain_setup_error(&e))?;
    let mut probe = Probe::new();
    match ring.submitter().register_probe(&mut probe) {
        Ok(()) => {
            for (code, name) in [
                (opcode::Readv::CODE, "READV"),
                (opcode::Writev::CODE, "WRITEV"),
            ] {
                if !probe.is_supported(code) {
                    return Err(AioError::UringUnavailable {
                        cause: format!("the kernel's io_uring does not support {name}"),
                        fix: "upgrade the kernel (5.1 or later), or set io_method = worker".into(),
                        errno: libc::EOPNOTSUPP,
                    });
                }
            }
        }
        // Kernels before 5.6 cannot be probed but support READV/WRITEV since 5.1.
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
        Err(e) => return Err(explain_setup_error(&e)),
    }
    Ok(())
}

fn read_sysctl(name: &str) -> Option<String> {
    std::fs::read_to_string(format!("/proc/sys/{}", name.replace('.', "/")))
        .ok()
        .map(|s| s.trim().to_string())
}

fn rlimit(resource: libc::__rlimit_resource_t) -> Option<u64> {
    // SAFETY: an all-zero rlimit is a valid value of this plain C struct.
    let mut limit: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: getrlimit only writes into the struct we pass, which lives for the call.
    let ok = unsafe { libc::getrlimit(resource, &mut limit) } == 0;
    ok.then_some(limit.rlim_cur)
}

/// The cause and fix when `kernel.io_uring_disabled=1` refused the ring, given the value of
/// `kernel.io_uring_group` (`None` when it cannot be read).
///
/// With `io_uring_disabled=1` the kernel lets a process create rings only if it has
/// CAP_SYS_ADMIN or belongs to the group `io_uring_group` names. The group's default, `-1`,
/// names no group at all: then only CAP_SYS_ADMIN helps, and "add the user to group -1"
/// would be nonsense.
pub(crate) fn restricted_by_sysctl(io_uring_group: Option<&str>) -> (String, String) {
    let worker = "or set io_method = worker (or auto)";
    match io_uring_group.and_then(|g| g.trim().parse::<i64>().ok()) {
        Some(gid) if gid >= 0 => (
            format!(
                "io_uring is restricted by kernel.io_uring_disabled=1 to processes with \
                 CAP_SYS_ADMIN or in group {gid} (kernel.io_uring_group)"
            ),
            format!(
                "add the user to group {gid}, set kernel.io_uring_disabled=0 (sysctl -w \
                 kernel.io_uring_disabled=0), {worker}"
            ),
        ),
        _ => (
            "io_uring is restricted by kernel.io_uring_disabled=1 to processes with \
             CAP_SYS_ADMIN: kernel.io_uring_group is -1 (no group may create rings)"
                .to_string(),
            format!(
                "set kernel.io_uring_disabled=0 (sysctl -w kernel.io_uring_disabled=0), or \
                 allow a group with sysctl -w kernel.io_uring_group=GID and add the user to \
                 it, or run with CAP_SYS_ADMIN, {worker}"
            ),
        ),
    }
}

/// Turns a failed `io_uring_setup` into a message naming the cause and the fix.
pub(crate) fn explain_setup_error(e: &std::io::Error) -> AioError {
    let errno = e.raw_os_error().unwrap_or(libc::EIO);
    let worker = "or set io_method = worker (or auto)";
    let (cause, fix) = match errno {
        libc::EPERM => match read_sysctl("kernel.io_uring_disabled").as_deref() {
            Some("2") => (
                "io_uring is disabled by kernel.io_uring_disabled=2".to_string(),
                format!("set it to 0 (sysctl -w kernel.io_uring_disabled=0), {worker}"),
            ),
            Some("1") => restricted_by_sysctl(read_sysctl("kernel.io_uring_group").as_deref()),
            _ => (
                "io_uring_setup was refused with EPERM, most likely by a seccomp filter \
                 (container runtimes such as Docker block io_uring by default)"
                    .to_string(),
                format!(
                    "allow io_uring_setup, io_uring_enter and io_uring_register in the \
                     container's seccomp profile, {worker}"
                ),
            ),
        },
        libc::ENOSYS => (
            "io_uring_setup is not available (a kernel built without CONFIG_IO_URING, or a \
             seccomp filter answering ENOSYS)"
                .to_string(),
            format!("run on a kernel with io_uring, {worker}"),
        ),
        libc::ENOMEM => {
            let memlock = rlimit(libc::RLIMIT_MEMLOCK)
                .map(|v| {
                    if v == libc::RLIM_INFINITY {
                        "unlimited".to_string()
                    } else {
                        format!("{v} bytes")
                    }
                })
                .unwrap_or_else(|| "unknown".into());
            (
                format!(
                    "the kernel could not allocate or lock memory for the ring \
                     (RLIMIT_MEMLOCK is {memlock}; kernels before 5.12 charge rings to it)"
                ),
                format!(
                    "raise the limit (ulimit -l unlimited, or LimitMEMLOCK=infinity for a \
                     systemd service), lower io_max_concurrency, {worker}"
                ),
            )
        }
        libc::EMFILE | libc::ENFILE => (
            format!(
                "no file descriptor is left for the ring (RLIMIT_NOFILE soft limit is {})",
                rlimit(libc::RLIMIT_NOFILE).unwrap_or(0)
            ),
            format!("raise it with ulimit -n, lower max_open_files, {worker}"),
        ),
        _ => (
            format!("io_uring_setup failed: {e}"),
            format!("check the kernel's io_uring support, {worker}"),
        ),
    };
    AioError::UringUnavailable { cause, fix, errno }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_refusal_names_cause_and_fix() {
        for errno in [
            libc::EPERM,
            libc::ENOSYS,
            libc::ENOMEM,
            libc::EMFILE,
            libc::EINVAL,
        ] {
            let err = explain_setup_error(&std::io::Error::from_raw_os_error(errno));
            let msg = err.to_string();
            assert!(msg.starts_with("io_uring is unavailable: "), "{msg}");
            assert!(msg.contains("io_method = worker"), "{msg}");
            assert_eq!(err.errno(), Some(errno));
        }
        let msg = explain_setup_error(&std::io::Error::from_raw_os_error(libc::ENOMEM)).to_string();
        assert!(msg.contains("RLIMIT_MEMLOCK"), "{msg}");
    }

    #[test]
    fn restricted_by_sysctl_names_the_group_or_cap_sys_admin() {
        // The default group, -1, is no group: only CAP_SYS_ADMIN may create rings.
        for unset in [Some("-1"), Some("-1\n"), None, Some("garbage")] {
            let (cause, fix) = restricted_by_sysctl(unset);
            assert_eq!(
                cause,
                "io_uring is restricted by kernel.io_uring_disabled=1 to processes with \
                 CAP_SYS_ADMIN: kernel.io_uring_group is -1 (no group may create rings)"
            );
            assert!(!fix.contains("group -1"), "{fix}");
            assert!(
                fix.contains("sysctl -w kernel.io_uring_disabled=0")
                    && fix.contains("kernel.io_uring_group=GID")
                    && fix.contains("CAP_SYS_ADMIN")
                    && fix.contains("io_method = worker"),
                "{fix}"
            );
        }
        let (cause, fix) = restricted_by_sysctl(Some("1001"));
        assert_eq!(
            cause,
            "io_uring is restricted by kernel.io_uring_disabled=1 to processes with \
             CAP_SYS_ADMIN or in group 1001 (kernel.io_uring_group)"
        );
        assert!(fix.starts_with("add the user to group 1001, "), "{fix}");
        assert!(fix.contains("io_method = worker"), "{fix}");
    }
}
