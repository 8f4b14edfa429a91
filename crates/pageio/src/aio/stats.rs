//! Per-backend I/O counters.
//!
//! Every backend counts what it asked for and what the kernel was asked to do; the gap
//! between the two is the merging. Counters are atomics because the thread that completes an
//! I/O (a worker, or another backend reaping a ring) updates the issuing backend's counters.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Live counters of one backend.
#[derive(Debug, Default)]
pub struct BackendCounters {
    pub(crate) ios_issued: AtomicU64,
    pub(crate) kernel_ios: AtomicU64,
    pub(crate) ios_merged: AtomicU64,
    pub(crate) blocks: AtomicU64,
    pub(crate) bytes: AtomicU64,
    pub(crate) io_ns: AtomicU64,
    pub(crate) wait_ns: AtomicU64,
    pub(crate) waits: AtomicU64,
    pub(crate) errors: AtomicU64,
    pub(crate) partials: AtomicU64,
    pub(crate) executed_by_submitter: AtomicU64,
}

/// A snapshot of one backend's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct IoCounters {
    /// I/Os (handles) submitted.
    pub ios_issued: u64,
    /// Kernel I/Os performed after merging (≤ `ios_issued`).
    pub kernel_ios: u64,
    /// Handles merged into a neighbour's kernel I/O.
    pub ios_merged: u64,
    /// Blocks transferred.
    pub blocks: u64,
    /// Bytes transferred.
    pub bytes: u64,
    /// Sum over I/Os of the time from submission to completion.
    pub io_ns: u64,
    /// Time the backend spent waiting for I/O.
    pub wait_ns: u64,
    /// Number of waits that had to block or spin.
    pub waits: u64,
    /// I/Os that ended in ERROR.
    pub errors: u64,
    /// I/Os that ended PARTIAL.
    pub partials: u64,
    /// Worker-method I/Os the submitter executed itself because the queue was full.
    pub executed_by_submitter: u64,
}

impl BackendCounters {
    /// Takes a snapshot.
    pub fn snapshot(&self) -> IoCounters {
        IoCounters {
            ios_issued: self.ios_issued.load(Relaxed),
            kernel_ios: self.kernel_ios.load(Relaxed),
            ios_merged: self.ios_merged.load(Relaxed),
            blocks: self.blocks.load(Relaxed),
            bytes: self.bytes.load(Relaxed),
            io_ns: self.io_ns.load(Relaxed),
            wait_ns: self.wait_ns.load(Relaxed),
            waits: self.waits.load(Relaxed),
            errors: self.errors.load(Relaxed),
            partials: self.partials.load(Relaxed),
            executed_by_submitter: self.executed_by_submitter.load(Relaxed),
        }
    }
}

impl std::ops::Add for IoCounters {
    type Output = IoCounters;
    fn add(self, o: IoCounters) -> IoCounters {
        IoCounters {
            ios_issued: self.ios_issued + o.ios_issued,
            kernel_ios: self.kernel_ios + o.kernel_ios,
            ios_merged: self.ios_merged + o.ios_merged,
            blocks: self.blocks + o.blocks,
            bytes: self.bytes + o.bytes,
            io_ns: self.io_ns + o.io_ns,
            wait_ns: self.wait_ns + o.wait_ns,
            waits: self.waits + o.waits,
            errors: self.errors + o.errors,
            partials: self.partials + o.partials,
            executed_by_submitter: self.executed_by_submitter + o.executed_by_submitter,
        }
    }
}
