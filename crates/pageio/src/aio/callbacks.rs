//! Completion callbacks.
//!
//! PostgreSQL runs two kinds of callback when an I/O ends, and so does this engine:
//!
//! ```text
//!   kernel done ─► shared callback   (whichever thread completes the I/O: the submitter under
//!                  │                  sync, an I/O worker under worker, any waiter under
//!                  │                  io_uring) — verify pages, mark buffers valid, wake waiters
//!                  ▼
//!   owner reclaims ─► local callback (the issuing backend, when it takes the handle back)
//!                                    — release pins, account statistics, hand results over
//! ```
//!
//! Shared work that is expensive — checksums above all — therefore runs where the I/O
//! completes, which under `io_method=worker` spreads it over the worker threads.
//!
//! A handle carries one `Arc<dyn AioCallbacks>` and a few `u64`s of handle data (PostgreSQL's
//! `handle_data`, typically buffer ids), so a caller registers its callbacks once and pays no
//! allocation per I/O.

use super::result::{IoOp, IoResult, IoTarget};
use crate::config::BLCKSZ;

/// Callbacks run when an I/O completes. Both have empty defaults.
pub trait AioCallbacks: Send + Sync {
    /// Runs in the thread that completes the I/O, before any waiter is woken. May change
    /// `io.result` (for example to an error when a page fails verification).
    fn complete_shared(&self, io: &mut SharedCompletion<'_>) {
        let _ = io;
    }

    /// Runs in the issuing backend when it reclaims the handle.
    fn complete_local(&self, io: &LocalCompletion<'_>) {
        let _ = io;
    }
}

/// What a shared callback sees.
pub struct SharedCompletion<'a> {
    /// The operation.
    pub op: IoOp,
    /// File and blocks.
    pub target: &'a IoTarget,
    /// The caller's handle data.
    pub handle_data: &'a [u64],
    /// The distilled result; the callback may downgrade it.
    pub result: &'a mut IoResult,
    pub(crate) iovecs: &'a [libc::iovec],
}

impl SharedCompletion<'_> {
    /// Block `i` of the I/O (0-based, relative to `target.first_block`) as bytes, or `None`
    /// when `i` is out of range or the iovecs are not made of whole blocks.
    ///
    /// The memory belongs to the issuer, who promised not to touch it until the I/O
    /// completes, which is now; the callback may read and modify it.
    pub fn block_mut(&mut self, i: usize) -> Option<&mut [u8]> {
        let mut skip = i * BLCKSZ;
        for iov in self.iovecs {
            if skip < iov.iov_len {
                if iov.iov_len - skip < BLCKSZ {
                    return None;
                }
                // SAFETY: the iovec describes memory the issuer handed to this I/O and does
                // not access until completion; we are inside completion and hold the
                // handle's lock, so no one else touches it.
                return Some(unsafe {
                    std::slice::from_raw_parts_mut((iov.iov_base as *mut u8).add(skip), BLCKSZ)
                });
            }
            skip -= iov.iov_len;
        }
        None
    }
}

/// What a local callback sees.
pub struct LocalCompletion<'a> {
    /// The operation.
    pub op: IoOp,
    /// File and blocks.
    pub target: &'a IoTarget,
    /// The caller's handle data.
    pub handle_data: &'a [u64],
    /// The final result.
    pub result: &'a IoResult,
}
