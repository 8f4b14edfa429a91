//! # Write streams
//!
//! A write stream is the read stream's mirror: a callback yields the next `(block, page)` to
//! write to one relation, and the stream combines consecutive blocks into vectored writes of
//! up to `io_combine_limit`, keeping up to `effective_io_concurrency` (or, for maintenance
//! work, `maintenance_io_concurrency` — the caller's choice of
//! [`WriteStreamOptions::max_ios_in_flight`]) of them in flight through the AIO subsystem,
//! under every io_method, buffered or direct.
//!
//! It lives in `aio`, beside the [`IoPipeline`] it is built on, and not with the read
//! streams: it owns its pages (no buffer pool), and the buffer pool's checkpoint
//! ([`crate::buffer::BufferPool::flush_dirty`]) writes through it, so it must sit below the
//! pool.
//!
//! ```text
//!   callback ─► (block, page) (block, page) …   pages are owned IoBuffers of BLCKSZ bytes
//!      │
//!      ▼   consecutive blocks, same segment, ≤ io_combine_limit
//!   pending run  b, b+1, …, b+k          ─► one writev (one iovec per page)
//!      │                                       │ ≤ max_ios_in_flight (the IoPipeline)
//!      ▼                                       ▼
//!   IoPipeline: stage ─► in flight ─► wait oldest ─► OK: pages handed back (`written`)
//!                                                    PARTIAL: the rest re-issued
//!                                                    ERROR: stop, drain, return the error
//! ```
//!
//! ## What is durable when
//!
//! ```text
//!   callback yields page ─► write staged ─► write completes ─► stream ends ─► fsync(file)
//!        (in memory)          (in flight)     │                                  │
//!                                             ├ buffered: in the page cache      └ durable
//!                                             └ direct: on the device, but the
//!                                               device's cache and the file's
//!                                               size/metadata may not be durable
//! ```
//!
//! * **Nothing is durable until the file is fsynced.** The stream never syncs: syncing once
//!   per file at the end (as a checkpoint does) is far cheaper than once per write, so it is
//!   the caller's step ([`crate::storage::SegmentFile::sync_data`], or a whole-file-system
//!   `syncfs`). A crash before that step may keep any subset of the writes.
//! * **A completed write** is in the page cache (buffered), or was handed to the device
//!   (`O_DIRECT`); a later read by anyone sees it.
//! * **Order between writes is not guaranteed.** Up to `max_ios_in_flight` writes run at
//!   once and the kernel may complete (and, after a crash, keep) them in any order. A caller
//!   that needs "A before B" (a WAL record before the page, data before `pg_control`) must
//!   end the stream and fsync between them — `pageio checksums --enable` does exactly that:
//!   every data page, then fsync, and only then `pg_control`.
//!
//! ## Errors
//!
//! A write that fails (EIO, ENOSPC, a write that transferred nothing) stops the stream: it
//! asks the callback for nothing more, waits for every write still in flight, and returns
//! the error of the lowest block (the one a sequential writer would have met first), which
//! names the file, the blocks and the cause. A short write that transferred whole blocks is
//! re-issued for the rest, as PostgreSQL's `mdwritev` does; one that transferred nothing is
//! an error (the kernel says that for a full file system). The pages of a write that failed
//! are not handed back: the caller must treat them as not written.
//!
//! ## Worked example
//!
//! With `io_combine_limit = 16` and the callback yielding blocks 0..40 then 100..102 of
//! `base/5/16384`: the stream stages writes of 0..15, 16..31, 32..39 and 100..101 — four
//! I/Os for 42 pages — with up to `max_ios_in_flight` in flight, and hands each page back
//! to `written` once its write completed.

use std::collections::HashMap;

use super::{AioError, Backend, IoCompletion, IoOp, IoStatus, PipelineDriver, PipelineIo};
use super::{IoBuffer, IoPipeline, WaitRef};
use crate::config::BLCKSZ;
use crate::storage::{OpenMode, RelFile};

/// How a [`write_stream`] runs.
#[derive(Debug, Clone, Copy)]
pub struct WriteStreamOptions {
    /// Most writes in flight at once (`effective_io_concurrency`, or
    /// `maintenance_io_concurrency` for maintenance work); 0 means one at a time.
    pub max_ios_in_flight: usize,
    /// Largest single write in blocks (`io_combine_limit`); also capped by the subsystem's
    /// own `io_combine_limit`.
    pub combine_limit_blocks: usize,
}

impl WriteStreamOptions {
    /// The subsystem's own `effective_io_concurrency` and `io_combine_limit`.
    pub fn from_backend(backend: &Backend) -> WriteStreamOptions {
        let config = backend.aio().config().clone();
        WriteStreamOptions {
            max_ios_in_flight: config.effective_io_concurrency,
            combine_limit_blocks: config.io_combine_limit_blocks,
        }
    }

    /// For maintenance work (`checksums --enable`): the subsystem's
    /// `maintenance_io_concurrency` and `io_combine_limit`.
    pub fn for_maintenance(backend: &Backend) -> WriteStreamOptions {
        let config = backend.aio().config().clone();
        WriteStreamOptions {
            max_ios_in_flight: config.maintenance_io_concurrency,
            combine_limit_blocks: config.io_combine_limit_blocks,
        }
    }
}

/// What a write stream did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteStreamStats {
    /// Pages the callback yielded.
    pub pages: u64,
    /// Pages whose write completed.
    pub pages_written: u64,
    /// Writes staged (after combining; re-issued rests of short writes count again).
    pub ios: u64,
    /// Most writes that were in flight at once.
    pub max_ios_in_flight_seen: usize,
}

/// One run of consecutive pages, written by one I/O (and its re-issued rests).
struct Run {
    first_block: u64,
    pages: Vec<IoBuffer>,
    /// Blocks of the run whose write has not completed yet.
    remaining_blocks: u32,
}

struct WriteDriver<'r, N, W> {
    rel: &'r RelFile,
    next: N,
    written: W,
    combine_limit_blocks: u32,
    /// A page the callback yielded that did not fit the run being built.
    peeked: Option<(u64, IoBuffer)>,
    /// Runs staged and not yet fully written, by id. Their pages are the memory the I/Os
    /// read; the driver outlives the pipeline run, which waits for every I/O.
    runs: HashMap<u64, Run>,
    next_run_id: u64,
    finished: bool,
    stats: WriteStreamStats,
    in_flight: usize,
    /// A page the callback yielded that is not a whole block: reported as the stream's error.
    bad_page: Option<AioError>,
}

impl<N, W> WriteDriver<'_, N, W>
where
    N: FnMut() -> Option<(u64, IoBuffer)>,
    W: FnMut(u64, IoBuffer),
{
    fn pull(&mut self) -> Option<(u64, IoBuffer)> {
        if let Some(page) = self.peeked.take() {
            return Some(page);
        }
        if self.finished || self.bad_page.is_some() {
            return None;
        }
        match (self.next)() {
            Some((block, page)) => {
                if page.len() != BLCKSZ {
                    self.bad_page = Some(AioError::InvalidRequest(format!(
                        "the page for block {block} of \"{}\" is {} bytes, not {BLCKSZ}",
                        self.rel.display_name(),
                        page.len()
                    )));
                    self.finished = true;
                    return None;
                }
                self.stats.pages += 1;
                Some((block, page))
            }
            None => {
                self.finished = true;
                None
            }
        }
    }
}

impl<N, W> PipelineDriver for WriteDriver<'_, N, W>
where
    N: FnMut() -> Option<(u64, IoBuffer)>,
    W: FnMut(u64, IoBuffer),
{
    type Tag = u64;

    fn next_io(&mut self, _backend: &mut Backend) -> Option<PipelineIo<u64>> {
        let (first_block, first_page) = self.pull()?;
        // A run never crosses a segment boundary: one write goes to one segment file.
        let limit = self
            .combine_limit_blocks
            .min(RelFile::blocks_in_segment(first_block))
            .max(1);
        let mut pages = vec![first_page];
        while (pages.len() as u32) < limit {
            match self.pull() {
                Some((block, page)) if block == first_block + pages.len() as u64 => {
                    pages.push(page)
                }
                Some(other) => {
                    self.peeked = Some(other);
                    break;
                }
                None => break,
            }
        }
        let id = self.next_run_id;
        self.next_run_id += 1;
        let nblocks = pages.len() as u32;
        self.runs.insert(
            id,
            Run {
                first_block,
                pages,
                remaining_blocks: nblocks,
            },
        );
        Some(PipelineIo {
            first_block,
            nblocks,
            tag: id,
        })
    }

    fn stage(&mut self, backend: &mut Backend, io: &PipelineIo<u64>) -> Result<WaitRef, AioError> {
        let run = self.runs.get(&io.tag).ok_or_else(|| {
            AioError::Internal(format!("write run {} staged after it ended", io.tag))
        })?;
        let (file, offset, target) = backend.locate(
            self.rel,
            io.first_block,
            io.nblocks,
            OpenMode::ReadWriteCreate,
        )?;
        let skip = (io.first_block - run.first_block) as usize;
        let iovecs: Vec<libc::iovec> = run.pages[skip..skip + io.nblocks as usize]
            .iter()
            .map(|page| libc::iovec {
                // The kernel only reads this memory (a write); the cast to *mut is what
                // iovec's type asks for, not a licence to write.
                iov_base: page.as_slice().as_ptr() as *mut libc::c_void,
                iov_len: BLCKSZ,
            })
            .collect();
        let mut handle = backend.acquire()?;
        handle.keep_result();
        handle.set_local_memory(true);
        // SAFETY: the pages are owned by `self.runs`, which is neither dropped nor has a run
        // removed until that run's last write completed (see `complete`), and the pipeline
        // waits for every I/O before it returns or unwinds; nothing writes the pages
        // meanwhile (the driver only moves the IoBuffer values, not their allocations).
        let wref = unsafe { handle.stage(IoOp::Writev, file, offset, &iovecs, target) }?;
        self.stats.ios += 1;
        self.in_flight += 1;
        self.stats.max_ios_in_flight_seen = self.stats.max_ios_in_flight_seen.max(self.in_flight);
        Ok(wref)
    }

    fn complete(&mut self, io: &PipelineIo<u64>, completion: IoCompletion) -> Result<(), AioError> {
        self.in_flight = self.in_flight.saturating_sub(1);
        let blocks_done = match completion.result.status {
            IoStatus::Ok => io.nblocks,
            // The pipeline re-issues the rest of the run.
            IoStatus::Partial => completion.result.blocks_done,
            IoStatus::Error | IoStatus::Unknown => {
                return Err(completion.result.error.unwrap_or_else(|| {
                    AioError::Internal("a write failed without saying why".into())
                }))
            }
        };
        self.stats.pages_written += blocks_done as u64;
        let done = match self.runs.get_mut(&io.tag) {
            Some(run) => {
                run.remaining_blocks = run.remaining_blocks.saturating_sub(blocks_done);
                run.remaining_blocks == 0
            }
            None => false,
        };
        if done {
            if let Some(run) = self.runs.remove(&io.tag) {
                for (i, page) in run.pages.into_iter().enumerate() {
                    (self.written)(run.first_block + i as u64, page);
                }
            }
        }
        Ok(())
    }
}

/// Writes the pages `next` yields to `rel` (creating segment files as needed): consecutive
/// blocks combined up to `options.combine_limit_blocks` (and the subsystem's
/// `io_combine_limit`), at most `options.max_ios_in_flight` writes in flight. Each page must
/// be one block (`BLCKSZ` bytes; aligned for direct I/O, which [`IoBuffer`] is). Every page
/// whose write completed is handed to `written` with its block, to reuse or drop.
///
/// Returns when `next` returned `None` and every write completed, or with the first error
/// (in block order) after every write in flight completed; see the module documentation for
/// what is durable when.
pub fn write_stream(
    backend: &mut Backend,
    rel: &RelFile,
    options: WriteStreamOptions,
    next: impl FnMut() -> Option<(u64, IoBuffer)>,
    written: impl FnMut(u64, IoBuffer),
) -> Result<WriteStreamStats, AioError> {
    let subsystem_limit = backend.aio().config().io_combine_limit_blocks;
    let mut driver = WriteDriver {
        rel,
        next,
        written,
        combine_limit_blocks: options.combine_limit_blocks.min(subsystem_limit).max(1) as u32,
        peeked: None,
        runs: HashMap::new(),
        next_run_id: 0,
        finished: false,
        stats: WriteStreamStats::default(),
        in_flight: 0,
        bad_page: None,
    };
    let result = IoPipeline::new(options.max_ios_in_flight.max(1)).run(backend, &mut driver);
    result?;
    if let Some(error) = driver.bad_page.take() {
        return Err(error);
    }
    Ok(driver.stats)
}
