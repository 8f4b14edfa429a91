//! I/O methods: how a batch of staged I/Os reaches the kernel.
//!
//! The AIO layer hands a method a batch of handles, already grouped: every group is one
//! kernel I/O, made of handles that read (or write) contiguous byte ranges of the same file,
//! in order. Merging is done once, here, so the three methods cannot disagree about it:
//!
//! ```text
//!   staged:  A: 16384 blocks 0..15   B: 16384 blocks 16..31   C: 16389 blocks 0..15
//!   groups:  [A, B] → one preadv of 32 iovec-blocks at offset 0      [C] → one preadv
//! ```
//!
//! After the kernel answers a group, the bytes are handed back handle by handle. If a
//! merged I/O comes back short or failed, each of its handles is executed again on its own,
//! so every handle gets exactly the result it would have had unmerged (the EOF, the EIO, the
//! partial block all land on the right handle).
//!
//! * [`sync`] executes at submission, in the submitting thread.
//! * [`worker`] queues groups for a pool of I/O threads.
//! * [`uring`] puts each group on the backend's io_uring as one SQE.
//!
//! The AIO layer calls a method only through `IoMethodImpl`: `attach_backend` when a
//! backend slot is first used (io_uring creates the slot's ring — method state is the
//! method's own, by backend id), `submit`, `wait_for` (bounded sleeps; the default sleeps on
//! the handle, woken by the completing thread) and `reap` (io_uring drains completions).
//! Whatever happens in `submit`, every handle ends up completed — by the kernel, or failed
//! with an errno — never stranded in SUBMITTED.

pub mod sync;
pub mod uring;
pub mod worker;

use std::sync::Arc;

use super::handle::{BackendShared, HandleState};
use super::result::{AioError, IoOp};
use crate::config::IoMethodKind;

/// Most iovecs in one kernel I/O. The kernel's `IOV_MAX` is 1024; merging stops there.
pub(crate) const MAX_IOVECS_PER_IO: usize = 1024;

/// Longest single sleep of [`IoMethodImpl::wait_any`] before it looks at the handles again.
/// Completions wake the sleep at once; the slice only bounds the cost of a wake-up lost to a
/// bug, and 10 ms is short against a stalled scan yet long enough not to spin.
pub(crate) const WAIT_ANY_SLICE: std::time::Duration = std::time::Duration::from_millis(10);

/// One kernel I/O: a leader handle and the handles merged behind it, in file order.
pub(crate) type Group = Vec<u32>;

/// The interface between the AIO layer and a method. The generic layer knows nothing of
/// rings or queues: per-backend state a method needs (io_uring's ring) is the method's own,
/// indexed by backend id, as PostgreSQL keeps `pgaio_uring_contexts` per process.
pub(crate) trait IoMethodImpl: Send + Sync {
    /// Which method this is.
    fn kind(&self) -> IoMethodKind;

    /// Prepares whatever the method keeps per backend for the backend in slot
    /// `backend.id` (called when a thread registers; slots are reused).
    fn attach_backend(&self, backend: &BackendShared) -> Result<(), AioError> {
        let _ = backend;
        Ok(())
    }

    /// Starts execution of `groups` of `backend`'s handles (all in state SUBMITTED). Every
    /// handle ends up completed — by the kernel, or failed with an errno — never stranded.
    fn submit(&self, backend: &Arc<BackendShared>, groups: Vec<Group>);

    /// Waits until the I/O `(index, generation)` of `backend` has completed shared. Every
    /// sleep inside is bounded; the loop ends because the I/O completes (it was submitted,
    /// or is being submitted by its owner, who never waits on another backend before
    /// submitting its own staged I/O).
    fn wait_for(&self, backend: &BackendShared, index: u32, generation: u64) {
        backend.wait_done(index, generation);
    }

    /// Waits until any of `backend`'s I/Os `ios` (`(index, generation)` pairs) has completed
    /// shared — what an order-free read stream needs: the first read to finish, whichever
    /// it is. Bounded like [`IoMethodImpl::wait_for`]: every I/O in `ios` was submitted, so
    /// one of them completes; the sleep is sliced so that a missed wake costs a slice, not a
    /// hang.
    fn wait_any(&self, backend: &BackendShared, ios: &[(u32, u64)]) {
        while !backend.wait_any_done_timeout(ios, WAIT_ANY_SLICE) {}
    }

    /// The worker pool's state (worker method only).
    fn worker_pool(&self) -> Option<worker::WorkerPoolStatus> {
        None
    }

    /// Applies the worker pool's grow and shrink rules now and returns its state (worker
    /// method only; the pool also applies them by itself on submissions and idle timeouts).
    fn adjust_workers(&self) -> Option<worker::WorkerPoolStatus> {
        None
    }

    /// Completes whatever has finished without waiting (io_uring: drains the ring's
    /// completion queue). Nothing to do for methods whose completer is the executing thread.
    fn reap(&self, backend: &BackendShared) {
        let _ = backend;
    }
}

/// Merges `staged` (handle indices, in staging order) into groups of contiguous same-file,
/// same-operation I/Os. Only neighbours in staging order merge: streams stage in block
/// order, and keeping the order keeps completion order predictable.
pub(crate) fn plan_groups(backend: &BackendShared, staged: &[u32]) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::with_capacity(staged.len());
    // (fd, op, end offset, iovec count) of the group being built.
    let mut open: Option<(i32, IoOp, u64, usize)> = None;
    for &index in staged {
        let data = backend.handles[index as usize].lock();
        let fd = data.file.as_ref().map(|f| f.raw_fd()).unwrap_or(-1);
        let op = data.op.unwrap_or(IoOp::Readv);
        let len = data.len_bytes() as u64;
        let n_iov = data.iovecs.len();
        let start = data.offset_bytes;
        drop(data);
        match (&mut open, groups.last_mut()) {
            (Some((gfd, gop, gend, giov)), Some(group))
                if *gfd == fd
                    && *gop == op
                    && *gend == start
                    && *giov + n_iov <= MAX_IOVECS_PER_IO =>
            {
                group.push(index);
                *gend += len;
                *giov += n_iov;
            }
            _ => {
                groups.push(vec![index]);
                open = Some((fd, op, start + len, n_iov));
            }
        }
    }
    groups
}

thread_local! {
    /// Per-thread iovec array for building a group's kernel I/O: reused for every I/O the
    /// thread executes, so the hot path allocates nothing.
    static IOVEC_SCRATCH: std::cell::RefCell<Vec<libc::iovec>> =
        std::cell::RefCell::new(Vec::with_capacity(MAX_IOVECS_PER_IO));
}

/// Runs `f` with the one kernel I/O `group` is: the first handle's file, operation and byte
/// offset, and the iovecs of all its handles in order, gathered into the thread's scratch
/// array.
fn with_group_io<R>(
    backend: &BackendShared,
    group: &[u32],
    f: impl FnOnce(Option<&crate::storage::SegmentFile>, Option<IoOp>, u64, &[libc::iovec]) -> R,
) -> R {
    IOVEC_SCRATCH.with(|scratch| {
        // A completion callback could in principle execute I/O re-entrantly; fall back to a
        // fresh array rather than panic on the RefCell.
        let mut fresh = Vec::new();
        let mut borrowed = scratch.try_borrow_mut();
        let iovecs = match borrowed.as_mut() {
            Ok(v) => &mut **v,
            Err(_) => &mut fresh,
        };
        iovecs.clear();
        let (file, op, offset) = {
            let data = backend.handles[group[0] as usize].lock();
            iovecs.extend_from_slice(&data.iovecs);
            (data.file.clone(), data.op, data.offset_bytes)
        };
        for &index in &group[1..] {
            iovecs.extend_from_slice(&backend.handles[index as usize].lock().iovecs);
        }
        f(file.as_deref(), op, offset, iovecs)
    })
}

/// Executes one group with `preadv`/`pwritev` in the calling thread and completes its
/// handles. Used by sync, by the workers, and by io_uring to re-run a short merged I/O.
pub(crate) fn execute_group_sync(backend: &BackendShared, group: &[u32], executed_sync: bool) {
    let raw = with_group_io(backend, group, |file, op, offset, iovecs| match file {
        Some(file) => vectored_io(file.raw_fd(), op.unwrap_or(IoOp::Readv), offset, iovecs),
        None => -(libc::EBADF as i64),
    });
    distribute(backend, group, raw, executed_sync);
}

/// What [`try_read_group_cached`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CacheProbe {
    /// The page cache held every byte: the group is complete.
    Cached,
    /// Not all cached (`EAGAIN`, a short count), an error, or not a read: nothing completed.
    Missed,
    /// The file system refuses `RWF_NOWAIT` (`EOPNOTSUPP`): nothing completed, and probing
    /// this file again is pointless.
    Unsupported,
}

/// Tries a read group without waiting for the device: one `preadv2(RWF_NOWAIT)` of the whole
/// group, which succeeds only when the page cache holds every byte. Then the group is
/// completed as [`execute_group_sync`] would and this returns [`CacheProbe::Cached`].
/// Anything else — a page not cached (`EAGAIN`, or a short count), a file system without
/// `RWF_NOWAIT`, an error, a write — completes nothing: the caller runs the group with
/// [`execute_group_sync`], which reads everything again and reports any error.
pub(crate) fn try_read_group_cached(backend: &BackendShared, group: &[u32]) -> CacheProbe {
    let done = with_group_io(backend, group, |file, op, offset, iovecs| {
        let (Some(file), Some(IoOp::Readv)) = (file, op) else {
            return Err(CacheProbe::Missed);
        };
        let want: usize = iovecs.iter().map(|v| v.iov_len).sum();
        // SAFETY: the iovecs describe memory handed to this read by its issuer, which
        // stays theirs until the group completes; a refused or short read leaves them to
        // the full read that follows.
        let rc = unsafe {
            libc::preadv2(
                file.raw_fd(),
                iovecs.as_ptr(),
                iovecs.len() as i32,
                offset as libc::off_t,
                libc::RWF_NOWAIT,
            )
        };
        if rc >= 0 && rc as usize == want {
            return Ok(rc as i64);
        }
        let unsupported =
            rc < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EOPNOTSUPP);
        Err(if unsupported {
            CacheProbe::Unsupported
        } else {
            CacheProbe::Missed
        })
    });
    match done {
        Ok(bytes) => {
            distribute(backend, group, bytes, false);
            CacheProbe::Cached
        }
        Err(probe) => probe,
    }
}

/// Hands a group's kernel result to its handles. A group that came back whole is split by
/// length; a short or failed group is re-executed handle by handle.
pub(crate) fn distribute(backend: &BackendShared, group: &[u32], raw: i64, executed_sync: bool) {
    if group.len() == 1 {
        backend.complete(group[0], raw, executed_sync);
        return;
    }
    let lens: Vec<i64> = group
        .iter()
        .map(|&i| backend.handles[i as usize].lock().len_bytes() as i64)
        .collect();
    let total: i64 = lens.iter().sum();
    if raw == total {
        for (&index, &len) in group.iter().zip(&lens) {
            backend.complete(index, len, executed_sync);
        }
        return;
    }
    for &index in group {
        execute_group_sync(backend, &[index], true);
    }
}

/// `preadv`/`pwritev` of the whole iovec list, retrying `EINTR`; returns bytes or `-errno`.
pub(crate) fn vectored_io(fd: i32, op: IoOp, offset: u64, iovecs: &[libc::iovec]) -> i64 {
    loop {
        // SAFETY: the iovecs describe memory handed to this I/O by its issuer.
        let rc = unsafe {
            match op {
                IoOp::Readv => libc::preadv(
                    fd,
                    iovecs.as_ptr(),
                    iovecs.len() as i32,
                    offset as libc::off_t,
                ),
                IoOp::Writev => libc::pwritev(
                    fd,
                    iovecs.as_ptr(),
                    iovecs.len() as i32,
                    offset as libc::off_t,
                ),
            }
        };
        if rc >= 0 {
            return rc as i64;
        }
        let errno = std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO);
        if errno != libc::EINTR {
            return -(errno as i64);
        }
    }
}

/// Marks the handles of `groups` as submitted (the method may complete them at once).
pub(crate) fn mark_submitted(backend: &BackendShared, groups: &[Group], now_ns: u64) {
    for group in groups {
        for &index in group {
            let handle = &backend.handles[index as usize];
            let mut data = handle.lock();
            debug_assert_eq!(handle.state(), HandleState::Staged);
            data.submit_ns = now_ns;
            handle.set_state(HandleState::Submitted);
        }
    }
}
