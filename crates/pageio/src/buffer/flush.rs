//! # Dirty buffers and flushing
//!
//! A caller changes a page in the pool with [`BufferPool::modify_page`], which marks the
//! buffer dirty (`BM_DIRTY`). Dirty pages reach the file in one of two ways:
//!
//! ```text
//!   modify_page ─► dirty ──┬─► flush_dirty (a checkpoint): every dirty buffer pinned,
//!                          │     sorted by (file, block), one write stream per relation
//!                          │     (consecutive blocks combined, many writes in flight),
//!                          │     each buffer marked clean as its write completes,
//!                          │     then fsync once per touched segment file
//!                          │
//!                          └─► eviction: the clock sweep picks a dirty victim ─► written
//!                                synchronously before the buffer is reused; a failed write
//!                                keeps the buffer dirty and mapped (never lost)
//! ```
//!
//! **Why sorted.** As PostgreSQL's checkpointer does (`BufferSync` sorts by tablespace,
//! relation, fork, block), writing in file and block order lets consecutive dirty blocks
//! combine into one I/O of up to `io_combine_limit` and keeps the device sequential.
//!
//! **Exclusive access.** Readers look at a pinned valid page without a lock. So that a page
//! never changes under a reader, [`BufferPool::modify_page`] only proceeds when the caller's
//! pin is the only one, and marks the refcount `EXCLUSIVE` for the copy; a thread that
//! pins the buffer meanwhile waits for the mark to go (a copy of at most 8 kB, no caller
//! code runs while it is set). A flush holds a pin on every buffer it writes, so a page
//! cannot change between the copy that is written and the buffer being marked clean.
//!
//! **Failures.** A write that fails leaves its buffers dirty (they are marked clean only
//! when their write completed) and the flush returns the error — file, blocks, cause — after
//! every write in flight completed; nothing is synced then. A later flush writes them again.
//!
//! Worked example: pages 5..=40 and 50 of one relation dirtied with `io_combine_limit = 16`:
//! the flush writes 5..20, 21..36, 37..40 and 50 — four I/Os for 37 buffers — fsyncs the
//! segment file once, and leaves no buffer dirty.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::Ordering;

use super::{BufferDesc, BufferError, BufferId, BufferPool, BufferTag, RelId};
use crate::aio::{write_stream, AioError, IoBuffer, WriteStreamOptions};
use crate::config::BLCKSZ;
use crate::storage::{OpenMode, RelFile};
use crate::Backend;

/// Bit of a buffer's refcount set while [`BufferPool::modify_page`] copies into the page.
/// Far above any real pin count (one per thread and stream slot).
pub(super) const EXCLUSIVE: u32 = 1 << 31;

/// Polls (yielding the CPU) of a buffer being modified before sleeping between polls: the
/// modification is one copy of at most 8 kB.
const EXCLUSIVE_SPIN_POLLS: u32 = 1000;

/// Waits until no [`BufferPool::modify_page`] is copying into the buffer. Always ends: the
/// mark is held only for one bounded copy, with no caller code running.
pub(super) fn wait_not_exclusive(desc: &BufferDesc) {
    let mut polls = 0u32;
    while desc.refcount.load(Ordering::Acquire) & EXCLUSIVE != 0 {
        polls += 1;
        if polls < EXCLUSIVE_SPIN_POLLS {
            std::thread::yield_now();
        } else {
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
    }
}

/// What [`BufferPool::flush_dirty`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct FlushStats {
    /// Dirty buffers found.
    pub dirty_buffers: u64,
    /// Buffers written (and marked clean).
    pub buffers_written: u64,
    /// Write I/Os issued (after combining).
    pub ios: u64,
    /// Segment files fsynced (each once).
    pub files_synced: u64,
}

impl BufferPool {
    /// Copies `bytes` into the page of buffer `id` at `offset_bytes` and marks it dirty.
    /// The caller must hold a pin on the valid buffer, and it must be the only pin:
    /// otherwise another thread may be reading the page, and this returns
    /// [`BufferError::Busy`] (drop the other pins, or try again later). The caller must
    /// not hold a reference from [`BufferPool::page`] to this buffer across the call;
    /// [`super::PinnedBuffer::modify`] lets the borrow checker enforce that.
    pub fn modify_page(
        &self,
        id: BufferId,
        offset_bytes: usize,
        bytes: &[u8],
    ) -> Result<(), BufferError> {
        if offset_bytes
            .checked_add(bytes.len())
            .is_none_or(|end| end > BLCKSZ)
        {
            return Err(BufferError::Busy {
                buffer: id,
                reason: format!(
                    "{} bytes at offset {offset_bytes} do not fit in a {BLCKSZ}-byte page",
                    bytes.len()
                ),
            });
        }
        let desc = self.desc(id);
        if !self.is_valid(id) {
            return Err(BufferError::Busy {
                buffer: id,
                reason: "the buffer holds no valid page (pin it and wait for its read)".into(),
            });
        }
        if desc
            .refcount
            .compare_exchange(1, 1 | EXCLUSIVE, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(BufferError::Busy {
                buffer: id,
                reason: "other pins are held on it (another reader, or a flush writing it)".into(),
            });
        }
        // SAFETY: the buffer lies inside the mapping; the caller's pin is the only one and
        // EXCLUSIVE makes every new pinner wait, so nobody reads the page during the copy;
        // the range was checked to lie inside the page.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.buffer_ptr(id).add(offset_bytes),
                bytes.len(),
            );
        }
        desc.dirty.store(true, Ordering::Release);
        desc.refcount.fetch_and(!EXCLUSIVE, Ordering::AcqRel);
        Ok(())
    }

    /// Whether buffer `id` holds changes not yet written.
    pub fn is_dirty(&self, id: BufferId) -> bool {
        self.desc(id).dirty.load(Ordering::Acquire)
    }

    /// Dirty victims written before their buffer was reused, and such writes that failed
    /// (the buffer then stayed dirty and another victim was chosen).
    pub fn victim_writes(&self) -> (u64, u64) {
        (
            self.inner.victims_written.load(Ordering::Relaxed),
            self.inner.victim_write_failures.load(Ordering::Relaxed),
        )
    }

    /// Writes the dirty victim `id` (pinned exclusively by the clock sweep) synchronously;
    /// `true` when it is on its way to the file and may be reused.
    pub(super) fn write_victim(&self, id: BufferId, tag: BufferTag) -> bool {
        let rel = self.relation(tag.rel);
        let write = || -> Result<(), AioError> {
            let (file, offset_bytes) = rel.locate(
                self.inner.aio.files(),
                tag.block,
                1,
                OpenMode::ReadWriteCreate,
            )?;
            // A direct-I/O file needs aligned memory: the pool's buffers are page-aligned.
            let page = self.page(id);
            let written = file.pwrite(page, offset_bytes).map_err(|e| AioError::Io {
                op: crate::aio::IoOp::Writev,
                errno: e.raw_os_error().unwrap_or(libc::EIO),
                target: crate::aio::IoTarget {
                    path: rel.display_name().clone(),
                    first_block: tag.block,
                    nblocks: 1,
                },
            })?;
            if written != BLCKSZ {
                return Err(AioError::Short {
                    op: crate::aio::IoOp::Writev,
                    target: crate::aio::IoTarget {
                        path: rel.display_name().clone(),
                        first_block: tag.block,
                        nblocks: 1,
                    },
                    bytes: written,
                    expected_bytes: BLCKSZ,
                });
            }
            Ok(())
        };
        match write() {
            Ok(()) => {
                self.desc(id).dirty.store(false, Ordering::Release);
                self.inner.victims_written.fetch_add(1, Ordering::Relaxed);
                true
            }
            Err(_) => {
                self.inner
                    .victim_write_failures
                    .fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }

    /// Writes every dirty buffer back, as a checkpoint does: sorted by file and block, one
    /// write stream per relation (`options`: writes in flight and combining), each buffer
    /// marked clean when its write completed, then one fsync per segment file written.
    /// On a failed write, the error (file, blocks, cause) is returned once nothing is in
    /// flight; the buffers not written stay dirty and nothing is synced.
    pub fn flush_dirty(
        &self,
        backend: &mut Backend,
        options: WriteStreamOptions,
    ) -> Result<FlushStats, BufferError> {
        let mut stats = FlushStats::default();
        // Pin every dirty buffer: it can then neither be modified nor evicted until written.
        let mut pinned: Vec<BufferId> = Vec::new();
        let mut by_rel: BTreeMap<(std::path::PathBuf, RelId), Vec<(u64, BufferId)>> =
            BTreeMap::new();
        for id in 0..self.inner.nbuffers {
            let desc = self.desc(id);
            if !desc.dirty.load(Ordering::Acquire) {
                continue;
            }
            desc.refcount.fetch_add(1, Ordering::AcqRel);
            wait_not_exclusive(desc);
            pinned.push(id);
            let tag = desc.header.lock().unwrap_or_else(|p| p.into_inner()).tag;
            if let (true, Some(tag)) = (desc.dirty.load(Ordering::Acquire), tag) {
                let path = self.relation(tag.rel).path().to_path_buf();
                by_rel
                    .entry((path, tag.rel))
                    .or_default()
                    .push((tag.block, id));
            }
        }
        let result = self.write_sorted(backend, options, &mut by_rel, &mut stats);
        for id in pinned {
            self.unpin(id);
        }
        result.map(|()| stats)
    }

    fn write_sorted(
        &self,
        backend: &mut Backend,
        options: WriteStreamOptions,
        by_rel: &mut BTreeMap<(std::path::PathBuf, RelId), Vec<(u64, BufferId)>>,
        stats: &mut FlushStats,
    ) -> Result<(), BufferError> {
        let mut touched: Vec<(RelFile, BTreeSet<u32>)> = Vec::new();
        for ((_, rel_id), blocks) in by_rel.iter_mut() {
            blocks.sort_unstable();
            stats.dirty_buffers += blocks.len() as u64;
            let rel = self.relation(*rel_id);
            let ids: HashMap<u64, BufferId> = blocks.iter().copied().collect();
            let mut pages = blocks.iter().map(|&(block, id)| {
                // The flush holds a pin: the page cannot change while it is copied.
                (block, IoBuffer::from_slice(self.page(id)))
            });
            let mut segments = BTreeSet::new();
            let mut written = 0u64;
            let result = write_stream(
                backend,
                &rel,
                options,
                || pages.next(),
                |block, _page| {
                    if let Some(&id) = ids.get(&block) {
                        self.desc(id).dirty.store(false, Ordering::Release);
                    }
                    segments.insert(RelFile::segment_of(block).0);
                    written += 1;
                },
            );
            stats.buffers_written += written;
            let stream_stats = result?;
            stats.ios += stream_stats.ios;
            touched.push((rel, segments));
        }
        // Everything is written: now one fsync per segment file, as a checkpoint syncs
        // each file it wrote once, at the end.
        for (rel, segments) in touched {
            for segno in segments {
                let first_block = segno as u64 * crate::storage::RELSEG_SIZE_BLOCKS as u64;
                let (file, _) = rel
                    .locate(
                        self.inner.aio.files(),
                        first_block,
                        1,
                        OpenMode::ReadWriteCreate,
                    )
                    .map_err(AioError::from)?;
                file.sync_data().map_err(AioError::from)?;
                stats.files_synced += 1;
            }
        }
        Ok(())
    }
}

impl super::PinnedBuffer<'_> {
    /// [`BufferPool::modify_page`] of this buffer: taking `&mut self` guarantees no
    /// reference from [`super::PinnedBuffer::page`] is alive while the page changes.
    pub fn modify(&mut self, offset_bytes: usize, bytes: &[u8]) -> Result<(), BufferError> {
        self.pool.modify_page(self.id, offset_bytes, bytes)
    }
}
