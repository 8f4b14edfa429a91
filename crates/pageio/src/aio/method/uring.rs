//! `io_method = io_uring`: one ring per backend, through the `io-uring` crate.
//!
//! Each backend gets its own submission/completion ring pair when it is created, sized to
//! its `io_max_concurrency` handles, so a submission never finds the ring full and a
//! completion never overflows. Every group (one merged kernel I/O) becomes one `READV` or
//! `WRITEV` SQE whose user data is the group's leader handle; all of a batch's SQEs go to the
//! kernel in one `io_uring_enter`.
//!
//! Completions are reaped by whichever thread waits, as in PostgreSQL: the owner waiting on
//! its own I/O, or another backend waiting on a buffer the owner is reading.
//!
//! ```text
//!   owner:   sq_lock { push SQE per group } ; io_uring_enter(to_submit = n)
//!   waiter:  cq_lock { drain CQEs → complete handles ; not done? io_uring_enter(GETEVENTS, 1) }
//! ```
//!
//! The two locks are separate so a thread sleeping in the kernel for completions never
//! blocks the owner from submitting more I/O.
//!
//! Whether io_uring may be used at all is decided at start-up by [`probe`], which turns each
//! way the kernel can refuse — `kernel.io_uring_disabled`, a seccomp filter, `RLIMIT_MEMLOCK`,
//! the descriptor limit — into an error that says which one it was and what to do.

use std::sync::{Arc, Mutex};

use io_uring::{opcode, types, IoUring, Probe};

use super::{distribute, Group, IoMethodImpl};
use crate::aio::handle::BackendShared;
use crate::aio::result::{AioError, IoOp};
use crate::config::IoMethodKind;

/// `io_uring_enter` flag asking the kernel to wait for completions (the crate keeps its
/// constant private; the value is fixed by the kernel ABI).
const IORING_ENTER_GETEVENTS: u32 = 1;

/// One backend's ring.
pub(crate) struct Ring {
    ring: IoUring,
    sq_lock: Mutex<()>,
    cq_lock: Mutex<()>,
}

impl Ring {
    /// Creates a ring with room for `handles` I/Os in flight.
    pub fn new(handles: usize) -> Result<Ring, AioError> {
        let entries = (handles.max(2) as u32).next_power_of_two();
        let ring = IoUring::builder()
            .setup_cqsize(entries * 2)
            .build(entries)
            .map_err(|e| explain_setup_error(&e))?;
        Ok(Ring {
            ring,
            sq_lock: Mutex::new(()),
            cq_lock: Mutex::new(()),
        })
    }

    /// Puts one SQE per group on the ring and submits them with one system call.
    pub fn submit_groups(&self, backend: &BackendShared, groups: &[Group]) {
        let _sq = self.sq_lock.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: sq_lock guarantees this is the only SubmissionQueue in existence.
        let mut sq = unsafe { self.ring.submission_shared() };
        let mut failed: Vec<(usize, i64)> = Vec::new();
        for (gi, group) in groups.iter().enumerate() {
            let leader = group[0];
            let mut d = backend.handles[leader as usize].lock();
            if group.len() > 1 {
                let mut all = std::mem::take(&mut d.group_iovecs);
                all.clear();
                all.extend_from_slice(&d.iovecs);
                drop(d);
                for &f in &group[1..] {
                    all.extend_from_slice(&backend.handles[f as usize].lock().iovecs);
                }
                d = backend.handles[leader as usize].lock();
                d.group_iovecs = all;
                d.group_followers.clear();
                d.group_followers.extend_from_slice(&group[1..]);
            }
            let Some(file) = d.file.as_ref() else {
                failed.push((gi, -(libc::EBADF as i64)));
                continue;
            };
            let (ptr, count) = if group.len() > 1 {
                (d.group_iovecs.as_ptr(), d.group_iovecs.len() as u32)
            } else {
                (d.iovecs.as_ptr(), d.iovecs.len() as u32)
            };
            let fd = types::Fd(file.raw_fd());
            let entry = match d.op.unwrap_or(IoOp::Readv) {
                IoOp::Readv => opcode::Readv::new(fd, ptr, count)
                    .offset(d.offset_bytes)
                    .build(),
                IoOp::Writev => opcode::Writev::new(fd, ptr, count)
                    .offset(d.offset_bytes)
                    .build(),
            }
            .user_data(leader as u64);
            // SAFETY: the iovec array and the memory it points to stay valid and untouched
            // until the CQE arrives: they belong to the leader handle, which cannot be reused
            // before it is completed, and to the issuer, who promised not to touch them.
            let pushed = unsafe { sq.push(&entry) };
            if pushed.is_err() {
                // Cannot happen: the ring has an entry per handle. Fail the I/O, not the
                // process.
                failed.push((gi, -(libc::EBUSY as i64)));
            }
        }
        sq.sync();
        drop(sq);
        loop {
            match self.ring.submitter().submit() {
                Ok(_) => break,
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => {
                    std::thread::yield_now();
                    continue;
                }
                Err(_) => break,
            }
        }
        drop(_sq);
        for (gi, raw) in failed {
            distribute(backend, &groups[gi], raw, false);
        }
    }

    /// Reaps completions until `done()` holds, sleeping in the kernel when none is ready.
    pub fn wait_for_completions(&self, backend: &BackendShared, done: impl Fn() -> bool) {
        let _cq = self.cq_lock.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            self.reap_locked(backend);
            if done() {
                return;
            }
            // SAFETY: plain io_uring_enter asking for one completion; submits nothing.
            let rc = unsafe {
                self.ring
                    .submitter()
                    .enter::<libc::sigset_t>(0, 1, IORING_ENTER_GETEVENTS, None)
            };
            if let Err(e) = rc {
                if e.raw_os_error() != Some(libc::EINTR) {
                    // Nothing sensible to do but retry after yielding; the I/O is in flight
                    // and will complete.
                    std::thread::yield_now();
                }
            }
        }
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
            for (leader, raw) in done {
                let followers = {
                    let mut d = backend.handles[leader as usize].lock();
                    std::mem::take(&mut d.group_followers)
                };
                let mut group = Vec::with_capacity(1 + followers.len());
                group.push(leader);
                group.extend_from_slice(&followers);
                distribute(backend, &group, raw, false);
            }
        }
    }
}

/// The io_uring method: submission goes to the backend's ring.
pub(crate) struct UringMethod;

impl IoMethodImpl for UringMethod {
    fn kind(&self) -> IoMethodKind {
        IoMethodKind::IoUring
    }

    fn submit(&self, backend: &Arc<BackendShared>, groups: Vec<Group>) {
        match &backend.ring {
            Some(ring) => ring.submit_groups(backend, &groups),
            None => {
                for g in &groups {
                    distribute(backend, g, -(libc::ENXIO as i64), true);
                }
            }
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
                        fix: "upgrade the kernel (5.1 or later), or use --io-method worker".into(),
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
    // SAFETY: getrlimit writes into the struct we pass.
    let mut rl: libc::rlimit = unsafe { std::mem::zeroed() };
    (unsafe { libc::getrlimit(resource, &mut rl) } == 0).then_some(rl.rlim_cur)
}

/// Turns a failed `io_uring_setup` into a message naming the cause and the fix.
pub(crate) fn explain_setup_error(e: &std::io::Error) -> AioError {
    let errno = e.raw_os_error().unwrap_or(libc::EIO);
    let worker = "or use --io-method worker (or auto)";
    let (cause, fix) = match errno {
        libc::EPERM => match read_sysctl("kernel.io_uring_disabled").as_deref() {
            Some("2") => (
                "io_uring is disabled by kernel.io_uring_disabled=2".to_string(),
                format!("set it to 0 (sysctl -w kernel.io_uring_disabled=0), {worker}"),
            ),
            Some("1") => {
                let group = read_sysctl("kernel.io_uring_group").unwrap_or_else(|| "-1".into());
                (
                    format!(
                        "io_uring is restricted by kernel.io_uring_disabled=1 to processes with \
                         CAP_SYS_ADMIN or in group kernel.io_uring_group={group}"
                    ),
                    format!("add the user to that group, set the sysctl to 0, {worker}"),
                )
            }
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
                     systemd service), lower --io-max-concurrency, {worker}"
                ),
            )
        }
        libc::EMFILE | libc::ENFILE => (
            format!(
                "no file descriptor is left for the ring (RLIMIT_NOFILE soft limit is {})",
                rlimit(libc::RLIMIT_NOFILE).unwrap_or(0)
            ),
            format!("raise it with ulimit -n, lower --max-open-files, {worker}"),
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
            assert!(msg.contains("--io-method worker"), "{msg}");
            assert_eq!(err.errno(), Some(errno));
        }
        let msg = explain_setup_error(&std::io::Error::from_raw_os_error(libc::ENOMEM)).to_string();
        assert!(msg.contains("RLIMIT_MEMLOCK"), "{msg}");
    }
}
