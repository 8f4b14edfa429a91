//! Fault injection.
//!
//! Error paths that only run when a disk fails are error paths that never run. Following
//! redb's countdown backend, tests install a [`FaultInjector`] on an [`crate::Aio`]; it is
//! consulted for every I/O as it completes — after the kernel answered, before the result is
//! distilled and before any callback — so the same fault behaves identically under sync,
//! worker and io_uring:
//!
//! ```text
//!   kernel result ─► injector? ─► Errno(EIO)      → raw_result = -EIO
//!                              ├► Short{bytes}     → raw_result = min(raw, bytes)
//!                              └► FlipBit{..}      → one bit of the data read is inverted
//!                 ─► distill ─► shared callback ─► waiters
//! ```
//!
//! [`FaultPlan`] is the ready-made injector: "fail the Nth read", "fail any I/O touching block
//! B of file F", each firing a set number of times.
//!
//! Submission can fail too: under io_uring, `io_uring_enter` may refuse a batch (`EAGAIN`,
//! `EBUSY`, a broken ring) or take only part of it. [`SubmitFault`]s replace the real call's
//! outcome ([`FaultPlan::on_submit`]), so the retry bound and the failing of unsubmitted I/Os
//! run in tests against the real kernel.

use std::sync::Mutex;

use super::result::{IoOp, IoTarget};

/// A fault to inject into one I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The I/O fails with this errno (e.g. `libc::EIO`).
    Errno(i32),
    /// The I/O transfers at most this many bytes.
    Short {
        /// Bytes transferred.
        bytes: usize,
    },
    /// One bit of the data read is inverted (reads only).
    FlipBit {
        /// Byte offset within the I/O.
        byte_offset: usize,
        /// Bit 0..=7.
        bit: u8,
    },
}

/// A fault in handing a batch to the kernel: what one `io_uring_enter` submitting SQEs
/// does instead of its real work. Only io_uring submits through a system call that can
/// fail this way; sync and worker never consult it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubmitFault {
    /// The call fails with this errno and submits nothing (`EAGAIN`, `EBUSY` and `EINTR` are
    /// retried a bounded number of times; anything else fails the I/Os at once).
    Errno(i32),
    /// The call submits at most this many of the SQEs waiting (the kernel accepting part
    /// of a batch); the rest stay queued for the next attempt.
    Partial {
        /// SQEs the call submits.
        submitted: u32,
    },
}

/// Decides, per completing I/O, whether to inject a fault.
pub trait FaultInjector: Send + Sync {
    /// Called once per I/O as it completes.
    fn inject(&self, op: IoOp, target: &IoTarget) -> Option<Fault>;

    /// Called once per submitting `io_uring_enter` (only under io_uring), with the number of
    /// SQEs waiting to be submitted. The default injects nothing.
    fn inject_submit(&self, waiting_sqes: usize) -> Option<SubmitFault> {
        let _ = waiting_sqes;
        None
    }
}

#[derive(Debug)]
enum Trigger {
    /// The Nth I/O of this op (1-based) counted from installation.
    Nth { op: IoOp, remaining: u64 },
    /// Any I/O of this op whose target contains this block of a file whose name ends with
    /// `path_suffix`.
    Block {
        op: IoOp,
        path_suffix: String,
        block: u64,
    },
}

#[derive(Debug)]
struct Rule {
    trigger: Trigger,
    fault: Fault,
    times_left: u64,
}

/// A list of fault rules, each firing a bounded number of times.
#[derive(Debug, Default)]
pub struct FaultPlan {
    rules: Mutex<Vec<Rule>>,
    /// Submission faults and how many more times each fires, in order.
    submit_rules: Mutex<Vec<(SubmitFault, u64)>>,
    fired: std::sync::atomic::AtomicU64,
}

impl FaultPlan {
    /// An empty plan.
    pub fn new() -> FaultPlan {
        FaultPlan::default()
    }

    /// Injects `fault` into the `n`th I/O of `op` (1-based), once.
    pub fn nth(self, op: IoOp, n: u64, fault: Fault) -> FaultPlan {
        self.push(Trigger::Nth { op, remaining: n }, fault, 1)
    }

    /// Injects `fault` into the next `times` I/Os of `op` that include `block` of a file
    /// whose name ends with `path_suffix`. For [`Fault::FlipBit`], `byte_offset` is taken
    /// relative to that block and shifted to where the block sits in the I/O.
    pub fn on_block(
        self,
        op: IoOp,
        path_suffix: &str,
        block: u64,
        fault: Fault,
        times: u64,
    ) -> FaultPlan {
        self.push(
            Trigger::Block {
                op,
                path_suffix: path_suffix.to_string(),
                block,
            },
            fault,
            times,
        )
    }

    /// Makes the next `times` submitting `io_uring_enter` calls do `fault` instead (io_uring
    /// only). Rules fire in the order they were added.
    pub fn on_submit(self, fault: SubmitFault, times: u64) -> FaultPlan {
        self.submit_rules
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((fault, times));
        self
    }

    fn push(self, trigger: Trigger, fault: Fault, times: u64) -> FaultPlan {
        self.rules
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Rule {
                trigger,
                fault,
                times_left: times,
            });
        self
    }

    /// How many faults have been injected.
    pub fn fired(&self) -> u64 {
        self.fired.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl FaultInjector for FaultPlan {
    fn inject_submit(&self, _waiting_sqes: usize) -> Option<SubmitFault> {
        let mut rules = self.submit_rules.lock().unwrap_or_else(|p| p.into_inner());
        let (fault, times_left) = rules.iter_mut().find(|(_, times_left)| *times_left > 0)?;
        *times_left -= 1;
        self.fired
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Some(*fault)
    }

    fn inject(&self, op: IoOp, target: &IoTarget) -> Option<Fault> {
        let mut rules = self.rules.lock().unwrap_or_else(|p| p.into_inner());
        let mut chosen = None;
        for rule in rules.iter_mut() {
            if rule.times_left == 0 {
                continue;
            }
            let hit = match &mut rule.trigger {
                Trigger::Nth { op: o, remaining } if *o == op => {
                    *remaining = remaining.saturating_sub(1);
                    *remaining == 0
                }
                Trigger::Nth { .. } => false,
                Trigger::Block {
                    op: o,
                    path_suffix,
                    block,
                } => {
                    *o == op
                        && target.path.ends_with(path_suffix.as_str())
                        && (target.first_block..target.first_block + target.nblocks as u64)
                            .contains(block)
                }
            };
            if hit && chosen.is_none() {
                rule.times_left -= 1;
                chosen = Some(match (rule.fault, &rule.trigger) {
                    (Fault::FlipBit { byte_offset, bit }, Trigger::Block { block, .. }) => {
                        Fault::FlipBit {
                            byte_offset: byte_offset
                                + (*block - target.first_block) as usize * crate::config::BLCKSZ,
                            bit,
                        }
                    }
                    (Fault::Short { bytes }, Trigger::Block { block, .. }) => Fault::Short {
                        bytes: bytes
                            + (*block - target.first_block) as usize * crate::config::BLCKSZ,
                    },
                    (f, _) => f,
                });
            }
        }
        if chosen.is_some() {
            self.fired
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        chosen
    }
}
