//! `io_method = sync`: every I/O executes at submission, in the submitting thread, with
//! `preadv`/`pwritev` — PostgreSQL 17's behaviour. There is nothing to wait for afterwards;
//! read-ahead comes only from the kernel (and from `posix_fadvise(WILLNEED)`, which the read
//! stream issues for its look-ahead under this method).

use std::sync::Arc;

use super::{execute_group_sync, Group, IoMethodImpl};
use crate::aio::handle::BackendShared;
use crate::config::IoMethodKind;

/// The synchronous method.
pub(crate) struct SyncMethod;

impl IoMethodImpl for SyncMethod {
    fn kind(&self) -> IoMethodKind {
        IoMethodKind::Sync
    }

    fn submit(&self, backend: &Arc<BackendShared>, groups: Vec<Group>) {
        for group in &groups {
            execute_group_sync(backend, group, true);
        }
    }
}
