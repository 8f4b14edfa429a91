//! # The I/O pipeline: up to N owned I/Os in flight over a list of block ranges
//!
//! Three callers need the same loop — [`Backend::read_blocks`] / [`Backend::write_blocks`],
//! the checksum verifier's scanners and `pageio io-bench`: take the next block range, stage
//! it, keep up to `depth` of them in flight, wait for the oldest, act on its result, repeat.
//! The loop is easy to get subtly wrong (a staging error that leaves ranges queued with
//! nothing in flight used to spin forever), so it lives here once.
//!
//! ```text
//!             retry queue (rests of partial I/Os) ─┐
//!   driver.next_io() ──────────────────────────────┴─► stage (batch mode) ─► in flight ≤ depth
//!                                                                                 │ oldest, or
//!                                                                                 │ first done
//!   driver.complete(io, completion) ◄── wait ◄────────────────────────────────────┘
//!        OK       → done
//!        PARTIAL  → the rest (first_block + blocks_done ..) goes to the retry queue
//!        Err(e)   → stop: start nothing new, wait for everything in flight, return e
//! ```
//!
//! ## In order or in completion order
//!
//! By default the pipeline waits for the oldest I/O: a driver that consumes data in the
//! order it asked for it ([`Backend::read_blocks`] filling one buffer front to back) needs
//! that. A driver whose completions are independent — the checksum verifier, which sorts
//! what it found by block before reporting — asks for [`IoPipeline::completion_order`]:
//! the pipeline then waits for *any* I/O in flight ([`Backend::wait_any`]) and acts on the
//! oldest of those that are done, so one slow read never keeps the others' slots from being
//! refilled — the same reason read streams have [`crate::stream::StreamOrder::Completion`].
//!
//! ```text
//!   in flight:  [0..15 slow] [16..31 done] [32..47 done] [48..63]
//!   in order:          wait for 0..15 ──► 16..31 and 32..47 sit done, their slots idle
//!   completion order:  16..31, then 32..47 handed back; two new reads staged at once
//! ```
//!
//! Nothing else changes: partial I/Os are re-issued the same way, and the error returned is
//! still the one of the lowest range (see [`PipelineDriver::complete`]), whatever order the
//! I/Os completed in.
//!
//! ## Why it always ends
//!
//! Every turn of the loop either stages an I/O, or takes one off the in-flight queue and
//! waits for it, or returns: with nothing in flight after the staging step (because the
//! driver has no more ranges, or the pipeline is stopping) there is nothing left to wait for,
//! so it returns. A partial I/O is re-issued with strictly fewer blocks (PARTIAL means at
//! least one whole block arrived), so re-issues of one range are bounded by its length. After
//! the first error nothing new is started: only the rests of partial I/Os that lie below the
//! error are still re-issued (they may hold an earlier error, which is the one to report), so
//! the drain is bounded by what was in flight and its re-issues. The only unbounded thing is
//! the driver's own list of ranges, which is finite for every caller.
//!
//! ## Why it is safe to unwind
//!
//! I/Os in flight point into memory the caller owns (a buffer lent to
//! [`Backend::read_blocks`], or an owned buffer the handle holds). If anything panics while
//! they are in flight — the driver, a local completion callback — the pipeline's guard waits
//! for every one of them before the stack unwinds past the memory, and leaves batch mode, so
//! the backend is left with nothing pending.
//!
//! ## Worked example
//!
//! `read_blocks(rel, 0, 70 blocks)` with `io_combine_limit = 16`: the driver yields 0..15,
//! 16..31, 32..47, 48..63, 64..69; all five are staged in one batch (five handles, fewer than
//! the depth), and waited for in order. Had the file held only 40 blocks, the read of 32..47
//! would come back PARTIAL with 8 blocks; 40..47 is re-issued and fails "read only 0 of 65536
//! bytes"; the pipeline stops, waits for 48..63 and 64..69, and returns that error.

use std::collections::VecDeque;

use super::{AioError, Backend, IoCompletion, IoStatus, WaitRef};
use crate::storage::RelFile;

/// One range a pipeline stages: `nblocks` blocks from `first_block` (numbered as the driver
/// likes — within the relation fork for every caller here) and the driver's own data.
#[derive(Debug, Clone)]
pub struct PipelineIo<T> {
    /// First block of the range.
    pub first_block: u64,
    /// Number of blocks (at least 1).
    pub nblocks: u32,
    /// The driver's data for this range (which file, which buffer slot, …).
    pub tag: T,
}

/// Blocks `first_block..first_block + total_blocks` of one relation cut into the ranges a
/// driver hands its pipeline, in order: each at most `combine_blocks` long (the caller's
/// `io_combine_limit`) and never crossing a segment boundary, since one I/O reads or writes
/// one segment file. [`Backend::read_blocks`] and `pageio io-bench` cut their requests with
/// it.
///
/// `BlockRanges::new(131_070, 20, 16)` yields 131070..131071 (segment 0 ends there),
/// 131072..131087 and 131088..131089.
#[derive(Debug, Clone)]
pub struct BlockRanges {
    /// Block of the relation the request starts at.
    first_block: u64,
    total_blocks: u64,
    /// Blocks of the request already handed out.
    next_offset_blocks: u64,
    combine_blocks: u64,
}

impl BlockRanges {
    /// The ranges of `total_blocks` blocks from `first_block`, at most `combine_blocks` (at
    /// least 1) each.
    pub fn new(first_block: u64, total_blocks: u64, combine_blocks: u64) -> BlockRanges {
        BlockRanges {
            first_block,
            total_blocks,
            next_offset_blocks: 0,
            combine_blocks: combine_blocks.max(1),
        }
    }

    /// The first block not yet handed out (`first_block + total_blocks` once all are).
    pub fn next_block(&self) -> u64 {
        self.first_block + self.next_offset_blocks
    }
}

impl Iterator for BlockRanges {
    type Item = PipelineIo<()>;

    fn next(&mut self) -> Option<PipelineIo<()>> {
        if self.next_offset_blocks >= self.total_blocks {
            return None;
        }
        let first_block = self.next_block();
        let nblocks = (self.total_blocks - self.next_offset_blocks)
            .min(self.combine_blocks)
            .min(RelFile::blocks_in_segment(first_block) as u64);
        self.next_offset_blocks += nblocks;
        Some(PipelineIo {
            first_block,
            nblocks: nblocks as u32,
            tag: (),
        })
    }
}

/// What a pipeline asks of its caller: ranges, how to stage one, what a completion means.
pub trait PipelineDriver {
    /// The driver's data attached to each range; cloned when a partial I/O is re-issued.
    type Tag: Clone;

    /// The next range to stage, or `None` when there is none (for now or for good: the
    /// pipeline ends once nothing is in flight either). Must eventually return `None`.
    fn next_io(&mut self, backend: &mut Backend) -> Option<PipelineIo<Self::Tag>>;

    /// Stages `io` on `backend` (acquire a handle, define the I/O, stage it) and returns its
    /// wait reference. The I/O must keep its result ([`super::AioHandle::keep_result`], or
    /// an owned buffer).
    fn stage(
        &mut self,
        backend: &mut Backend,
        io: &PipelineIo<Self::Tag>,
    ) -> Result<WaitRef, AioError>;

    /// `stage` failed for `io`. Returning the error stops the pipeline (the default);
    /// returning `Ok` drops the range and goes on.
    fn stage_failed(&mut self, io: PipelineIo<Self::Tag>, error: AioError) -> Result<(), AioError> {
        let _ = io;
        Err(error)
    }

    /// The I/O of `io` completed. For `IoStatus::Partial` the pipeline has already queued
    /// the rest of the range again (with the same tag) — unless it is stopping and the rest
    /// starts at or after the error it will return. Returning an
    /// error stops the pipeline; completions drained while stopping still arrive here. Of
    /// several errors the pipeline returns the one of the range with the lowest
    /// `first_block` — the one a sequential reader would have met first — so the answer does
    /// not depend on which I/O happened to complete first.
    fn complete(
        &mut self,
        io: &PipelineIo<Self::Tag>,
        completion: IoCompletion,
    ) -> Result<(), AioError>;
}

/// Runs a [`PipelineDriver`] with up to `depth` I/Os in flight.
#[derive(Debug, Clone, Copy)]
pub struct IoPipeline {
    depth: usize,
    completion_order: bool,
}

impl IoPipeline {
    /// A pipeline keeping up to `depth` I/Os in flight (at least 1), completing them in the
    /// order they were staged.
    pub fn new(depth: usize) -> IoPipeline {
        IoPipeline {
            depth: depth.max(1),
            completion_order: false,
        }
    }

    /// The same pipeline handing I/Os to [`PipelineDriver::complete`] as they finish
    /// instead of oldest first (see the module docs), for drivers whose completions do not
    /// depend on each other's order.
    pub fn completion_order(self) -> IoPipeline {
        IoPipeline {
            completion_order: true,
            ..self
        }
    }

    /// The in-flight bound.
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// Whether I/Os are completed as they finish rather than oldest first.
    pub fn is_completion_order(&self) -> bool {
        self.completion_order
    }

    /// Runs `driver` to the end: every range staged and completed, or the first error
    /// returned after every I/O in flight has completed. Never returns (or unwinds) with an
    /// I/O of the pipeline still in flight.
    pub fn run<D: PipelineDriver>(
        &self,
        backend: &mut Backend,
        driver: &mut D,
    ) -> Result<(), AioError> {
        let mut guard = InFlightGuard {
            backend,
            in_flight: VecDeque::with_capacity(self.depth),
            in_batch: false,
        };
        let mut retry: VecDeque<PipelineIo<D::Tag>> = VecDeque::new();
        // The wait references of the I/Os in flight, for `wait_any` (completion order).
        let mut wrefs: Vec<WaitRef> = Vec::new();
        // The error to return, with the first block of its range: of several, the one a
        // sequential reader would have met first, whatever order the I/Os completed in.
        let mut first_error: Option<(u64, AioError)> = None;
        loop {
            guard.backend.enter_batch_mode();
            guard.in_batch = true;
            while guard.in_flight.len() < self.depth {
                // Once stopping, only re-issues of ranges below the error are staged: they
                // may hold an earlier error (see `keep_lowest`). Nothing new is started.
                let io = match retry.pop_front() {
                    Some(io) => io,
                    None if first_error.is_some() => break,
                    None => match driver.next_io(guard.backend) {
                        Some(io) => io,
                        None => break,
                    },
                };
                match driver.stage(guard.backend, &io) {
                    Ok(wref) => guard.in_flight.push_back((wref, io)),
                    Err(error) => {
                        let first_block = io.first_block;
                        if let Err(error) = driver.stage_failed(io, error) {
                            keep_lowest(&mut first_error, first_block, error);
                            prune_retries(&mut retry, &first_error);
                        }
                    }
                }
            }
            guard.in_batch = false;
            guard.backend.exit_batch_mode();
            let next = if self.completion_order && guard.in_flight.len() > 1 {
                wrefs.clear();
                wrefs.extend(guard.in_flight.iter().map(|(wref, _)| *wref));
                // Returns once one of them is done (or at once if one already is).
                guard.backend.wait_any(&wrefs);
                let backend = &*guard.backend;
                // The oldest of those done; should none be (it cannot: wait_any returned),
                // the oldest, waited for below.
                let position = guard
                    .in_flight
                    .iter()
                    .position(|(wref, _)| backend.is_done(*wref))
                    .unwrap_or(0);
                guard.in_flight.remove(position)
            } else {
                guard.in_flight.pop_front()
            };
            let Some((wref, io)) = next else {
                // Nothing in flight and nothing more to stage: either every range is done,
                // or the pipeline stopped and has drained.
                break;
            };
            let completion = guard
                .backend
                .wait(wref)
                .or_else(|| guard.backend.take_completion(wref));
            let Some(completion) = completion else {
                keep_lowest(
                    &mut first_error,
                    io.first_block,
                    AioError::Internal(format!(
                        "the completion of the I/O of blocks {}..{} went missing (was it staged \
                         without keep_result?)",
                        io.first_block,
                        io.first_block + io.nblocks as u64
                    )),
                );
                prune_retries(&mut retry, &first_error);
                continue;
            };
            let blocks_done = completion.result.blocks_done;
            if completion.result.status == IoStatus::Partial
                && blocks_done > 0
                && blocks_done < io.nblocks
            {
                // Strictly fewer blocks than before: re-issues of one range are bounded.
                retry.push_front(PipelineIo {
                    first_block: io.first_block + blocks_done as u64,
                    nblocks: io.nblocks - blocks_done,
                    tag: io.tag.clone(),
                });
            }
            if let Err(error) = driver.complete(&io, completion) {
                keep_lowest(&mut first_error, io.first_block, error);
            }
            prune_retries(&mut retry, &first_error);
        }
        debug_assert!(guard.in_flight.is_empty() && retry.is_empty());
        match first_error {
            Some((_, error)) => Err(error),
            None => Ok(()),
        }
    }
}

/// Once stopping, drops the re-issues that can only end at or after the error already kept:
/// whatever they find, it would not be returned.
fn prune_retries<T>(retry: &mut VecDeque<PipelineIo<T>>, first_error: &Option<(u64, AioError)>) {
    if let Some((error_block, _)) = first_error {
        retry.retain(|io| io.first_block < *error_block);
    }
}

/// Keeps, of the errors seen, the one whose range starts lowest (the earlier one on a tie).
fn keep_lowest(kept: &mut Option<(u64, AioError)>, first_block: u64, error: AioError) {
    let lower = match kept {
        Some((kept_block, _)) => first_block < *kept_block,
        None => true,
    };
    if lower {
        *kept = Some((first_block, error));
    }
}

/// Waits for every I/O still listed when dropped: on the normal path the list is empty; on
/// unwinding it keeps the memory those I/Os point into alive until the kernel is done.
struct InFlightGuard<'b, T> {
    backend: &'b mut Backend,
    in_flight: VecDeque<(WaitRef, PipelineIo<T>)>,
    in_batch: bool,
}

impl<T> Drop for InFlightGuard<'_, T> {
    fn drop(&mut self) {
        if self.in_batch {
            self.backend.exit_batch_mode();
        }
        for (wref, _) in self.in_flight.drain(..) {
            // The completion (and an owned buffer in it) is dropped only after the I/O ended.
            if self.backend.wait(wref).is_none() {
                self.backend.take_completion(wref);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::BlockRanges;
    use crate::storage::RELSEG_SIZE_BLOCKS;

    fn ranges(first_block: u64, total_blocks: u64, combine_blocks: u64) -> Vec<(u64, u32)> {
        BlockRanges::new(first_block, total_blocks, combine_blocks)
            .map(|io| (io.first_block, io.nblocks))
            .collect()
    }

    #[test]
    fn block_ranges_stop_at_io_combine_limit_and_segment_ends() {
        assert_eq!(
            ranges(0, 70, 16),
            [(0, 16), (16, 16), (32, 16), (48, 16), (64, 6)]
        );
        let seg = RELSEG_SIZE_BLOCKS as u64;
        assert_eq!(
            ranges(seg - 2, 20, 16),
            [(seg - 2, 2), (seg, 16), (seg + 16, 2)]
        );
        assert_eq!(ranges(5, 0, 16), []);
        // A limit of zero still makes progress, one block at a time.
        assert_eq!(ranges(7, 2, 0), [(7, 1), (8, 1)]);
        let mut r = BlockRanges::new(10, 5, 4);
        assert_eq!(r.next_block(), 10);
        r.by_ref().for_each(drop);
        assert_eq!(r.next_block(), 15);
    }
}
