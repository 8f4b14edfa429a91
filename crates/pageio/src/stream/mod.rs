//! # Read streams
//!
//! A read stream turns "the next block I will need" into pinned, verified pages, keeping
//! enough reads in flight to hide the device's latency — PostgreSQL's `read_stream.c`.
//!
//! ```text
//!   callback ─► block numbers (+ per-buffer data)
//!      │
//!      ▼   look ahead up to `distance` blocks
//!   pending run  b, b+1, … (≤ io_combine_limit, consecutive)      ─┐
//!      │  can't extend / full                                       │ pins ≤ pin limit
//!      ▼                                                            │ I/Os ≤ the handle budget
//!   start: pin each block ─► hit: ready   miss: claim ─► one read   │
//!      │                                                            │
//!      ▼                                                           ─┘
//!   queue (callback order) ─► hand out (one of the two orders below)
//! ```
//!
//! ## Two orders
//!
//! [`StreamOrder::BlockOrder`] (the default, PostgreSQL's) hands out the head of the queue
//! and waits for its read when it is not ready. [`StreamOrder::Completion`] hands out
//! whichever entry is ready — a cached hit at once, then reads as they finish — and when none
//! is, waits for *any* of its reads ([`Backend::wait_any`]) instead of the oldest:
//!
//! ```text
//!   queue        12 ready   40 reading (slow)   41 ready   97 reading   98 ready
//!
//!   BlockOrder   12 │ wait for 40 ............ │ 40 41 │ wait 97 │ 97 98
//!                     the device idles behind 40 once 41, 97, 98 are done
//!
//!   Completion   12 41 98 │ refill: 99 100 … │ 97 │ … │ 40 (when it lands)
//!                every slot freed is refilled at once; 40 holds one slot, not the queue
//! ```
//!
//! Each buffer still carries its callback data `D`, so a consumer that needs to know which
//! request a page answers (a bitmap's offsets) still does. Under `io_uring` and `worker`
//! completion order is real; under `sync` reads complete as they are started (deferred to
//! when nothing else is ready), so it comes out in block order. Seq scans (a count and a
//! sum) and bitmap heap scans (an unordered result) use completion order; index scans keep
//! key order.
//!
//! ## The handle budget
//!
//! A read holds an AIO handle from staging until the stream takes in its completion. The
//! stream never has more reads in flight than `min(effective_io_concurrency,
//! io_max_concurrency)` ([`StreamStats::io_budget`]): more would make `Backend::acquire`
//! wait for the backend's oldest read. And when the budget is spent it first takes in every
//! read that has completed — marking its buffers ready and giving the handle back — so a
//! completed read waiting to be consumed holds a pin, never a handle, and never blocks the
//! next submission. Worked example (`effective_io_concurrency` 16, one-block random reads,
//! one of them slow): in block order the stream stops at 16 reads once the slow one reaches
//! the head; in completion order the 15 other slots keep cycling through the relation, and
//! the slow block is handed out when it lands.
//!
//! ## The look-ahead distance
//!
//! How far ahead to look is the whole game: too short and the device idles, too long and
//! pins are wasted on data that was cached anyway. Two policies are implemented and measured
//! against each other (`docs/BENCHMARKS.md`):
//!
//! * [`DistancePolicy::Pg18`] — PostgreSQL 18: start at 1; double on every read that needed
//!   I/O; minus one on every hit.
//! * [`DistancePolicy::Adaptive`] — PostgreSQL 19's refinements: the read-ahead distance
//!   doubles only when the stream actually had to *wait* for a read at the head of the queue
//!   (in completion order: for any read, nothing being ready) — I/O that completed in time
//!   needs no more depth; it decays only after a run of
//!   `io_combine_limit` consecutive hits, not on every hit; and a separate *combine distance*
//!   lets sequential runs reach a full `io_combine_limit` I/O even while hits keep the
//!   read-ahead distance short. It also stops growing at twice the blocks its reads in
//!   flight cover at the average read size seen so far (`adaptive_cap`): a stream of
//!   one-page reads with 128 in flight pins about 256 buffers, not 128 × `io_combine_limit`,
//!   since more pins would start no more reads and only spread the pages between their read
//!   and their use over more memory than the CPU caches hold.
//!
//! Worked example (Pg18, io_combine_limit 16): a cold sequential scan starts with distance
//! 1 → reads block 0 alone, distance 2 → blocks 1..2, 4, 8, 16 → from then on 16-block reads,
//! with up to `effective_io_concurrency` of them in flight once the distance grows past 16.
//! A fully cached scan keeps distance 1: every block is a hit, and the only cost per page is
//! one pin.
//!
//! ## Methods
//!
//! Under `io_method = sync` there is no asynchrony to exploit, so as PostgreSQL does the
//! stream *defers* each read to the moment its first buffer reaches the head, and for
//! non-sequential runs of buffered files tells the kernel what is coming with
//! `posix_fadvise(WILLNEED)`. Under `worker` and `io_uring`, reads are staged in batches as
//! soon as they are known. With direct I/O the stream is the only read-ahead there is.
//!
//! ## Invariants
//!
//! As `read_stream.c` asserts them, and checked the same way (debug builds, which the test
//! suite's profile enables): the buffers the stream pins (its queue) plus the blocks of its
//! pending run never exceed its pin limit (`max_distance`); the pending run never exceeds
//! `io_combine_limit`; both distances stay between 1 and their bound; a read is only ever
//! started for entries inside the queue; the reads in flight never exceed the handle budget.
//! Every wait is on a read some thread has started — this stream's (started before it
//! waits, and `wait_any` submits staged reads first), or another thread's buffer I/O — so a
//! stall always ends.

pub mod readahead;

pub use readahead::SeqReadAhead;

use std::collections::VecDeque;
use std::time::Instant;

use crate::aio::{BatchHold, WaitRef};
use crate::buffer::{BufferError, BufferId, BufferPool, BufferRing, Pinned, RelId};
use crate::config::{IoMethodKind, BLCKSZ};
use crate::storage::{OpenMode, RelFile};
use crate::Backend;

/// How the look-ahead distance adapts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DistancePolicy {
    /// PostgreSQL 18: ×2 on a miss, −1 on a hit.
    Pg18,
    /// Grow only on stalls, decay after a run of hits, separate combine distance.
    #[default]
    Adaptive,
}

/// In which order a stream hands out its buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamOrder {
    /// In the order the callback named the blocks (PostgreSQL's read streams): for
    /// consumers whose result depends on the order — an index scan returning key order.
    #[default]
    BlockOrder,
    /// Whichever buffer is ready first: cached hits at once, then reads as they complete,
    /// the window refilled after each. For consumers whose result does not depend on the
    /// order (a bitmap heap scan, a count, a checksum pass): one slow read no longer holds
    /// back every read queued behind it.
    Completion,
}

/// Options of one stream.
#[derive(Debug, Clone, Copy)]
pub struct StreamOptions {
    /// Look-ahead policy.
    pub policy: DistancePolicy,
    /// Recycle a bulk-read ring of buffers (sequential scans) instead of sweeping the pool.
    pub bulk_read: bool,
    /// Block order, or completion order.
    pub order: StreamOrder,
}

impl Default for StreamOptions {
    fn default() -> Self {
        StreamOptions {
            policy: DistancePolicy::Adaptive,
            bulk_read: false,
            order: StreamOrder::BlockOrder,
        }
    }
}

/// What a stream did, in the vocabulary of PostgreSQL 19's `EXPLAIN (IO)`.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct StreamStats {
    /// Buffers handed out.
    pub buffers: u64,
    /// Blocks found valid in the pool (`Buffers: shared hit`).
    pub shared_hit: u64,
    /// Blocks this stream read (`Buffers: shared read`).
    pub shared_read: u64,
    /// Reads issued.
    pub ios: u64,
    /// Average read size in blocks.
    pub avg_io_blocks: f64,
    /// Times the head of the queue was not ready and the stream blocked.
    pub stalls: u64,
    /// Average number of this stream's reads in flight when it stalled.
    pub avg_ios_in_progress_at_stall: f64,
    /// Time spent blocked, in nanoseconds.
    pub wait_ns: u64,
    /// Average look-ahead distance (blocks), sampled at every buffer handed out.
    pub distance_avg: f64,
    /// Largest look-ahead distance reached.
    pub distance_max: u64,
    /// The most the distance could grow to (the pin limit).
    pub distance_capacity: u64,
    /// `posix_fadvise(WILLNEED)` calls (sync method only).
    pub advice: u64,
    /// Most reads (AIO handles) the stream may have in flight: `effective_io_concurrency`,
    /// capped by `io_max_concurrency`.
    pub io_budget: u64,
    /// Most of this stream's reads in flight (submitted, completion not yet seen) at once;
    /// never above `io_budget`.
    pub max_ios_in_flight: u64,
    /// Buffers handed out ahead of one named earlier that was still being read
    /// (completion order only): how often the order-free mode went around a slow read.
    pub out_of_order: u64,
    #[serde(skip)]
    distance_sum: u64,
    #[serde(skip)]
    in_progress_sum: u64,
    #[serde(skip)]
    io_blocks: u64,
}

impl StreamStats {
    fn finish(&mut self) {
        self.avg_io_blocks = if self.ios > 0 {
            self.io_blocks as f64 / self.ios as f64
        } else {
            0.0
        };
        self.avg_ios_in_progress_at_stall = if self.stalls > 0 {
            self.in_progress_sum as f64 / self.stalls as f64
        } else {
            0.0
        };
        self.distance_avg = if self.buffers > 0 {
            self.distance_sum as f64 / self.buffers as f64
        } else {
            0.0
        };
    }

    /// Adds another stream's statistics (for parallel scans).
    pub fn merge(&mut self, other: &StreamStats) {
        self.buffers += other.buffers;
        self.shared_hit += other.shared_hit;
        self.shared_read += other.shared_read;
        self.ios += other.ios;
        self.stalls += other.stalls;
        self.wait_ns += other.wait_ns;
        self.distance_max = self.distance_max.max(other.distance_max);
        self.distance_capacity = self.distance_capacity.max(other.distance_capacity);
        self.advice += other.advice;
        self.io_budget = self.io_budget.max(other.io_budget);
        self.max_ios_in_flight = self.max_ios_in_flight.max(other.max_ios_in_flight);
        self.out_of_order += other.out_of_order;
        self.distance_sum += other.distance_sum;
        self.in_progress_sum += other.in_progress_sum;
        self.io_blocks += other.io_blocks;
        self.finish();
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EntryState {
    /// Valid page.
    Ready,
    /// Being read by this stream's I/O with this sequence number.
    OwnIo(u64),
    /// Being read by another thread.
    OtherIo,
    /// Claimed by this stream, read not yet started (sync method).
    Deferred,
}

struct Entry<D> {
    block: u64,
    buffer: BufferId,
    data: D,
    state: EntryState,
}

struct StreamIo {
    seq: u64,
    wref: WaitRef,
}

/// A buffer handed out by a stream: pinned until dropped.
pub struct StreamBuffer<'p, D> {
    pool: &'p BufferPool,
    /// Block number.
    pub block: u64,
    /// The pinned buffer.
    pub buffer: BufferId,
    /// The per-buffer data the callback attached to this block.
    pub data: D,
}

impl<D> StreamBuffer<'_, D> {
    /// The page.
    pub fn page(&self) -> &[u8; BLCKSZ] {
        self.pool.page(self.buffer)
    }
}

impl<D> Drop for StreamBuffer<'_, D> {
    fn drop(&mut self) {
        self.pool.unpin(self.buffer);
    }
}

/// A read stream over one relation fork. `F` yields the next block number and its data.
pub struct ReadStream<'p, D, F: FnMut() -> Option<(u64, D)>> {
    pool: &'p BufferPool,
    rel: RelId,
    relfile: RelFile,
    next_block: F,
    ring: Option<BufferRing>,
    queue: VecDeque<Entry<D>>,
    ios: VecDeque<StreamIo>,
    /// Reads that have completed and given their handle back, whose entries are not yet
    /// marked ready (see `collect_completed`).
    unsettled: Vec<u64>,
    pending: Vec<(u64, D)>,
    /// The previous pending run's vector, kept for its capacity: a fully cached stream
    /// starts one run per page, and must not allocate for each.
    spare: Vec<(u64, D)>,
    exhausted: bool,
    policy: DistancePolicy,
    order: StreamOrder,
    distance: usize,
    combine_distance: usize,
    max_distance: usize,
    combine_limit: usize,
    max_ios: usize,
    hit_run: usize,
    sync_method: bool,
    advise: bool,
    last_read_end: Option<u64>,
    next_seq: u64,
    stats: StreamStats,
    /// Kernel read-ahead advice for the blocks the callback yields (sequential scans).
    read_ahead: Option<&'p SeqReadAhead>,
}

impl<'p, D, F: FnMut() -> Option<(u64, D)>> ReadStream<'p, D, F> {
    /// A stream reading `rel` through `pool`, asking `next_block` for what comes next.
    pub fn new(pool: &'p BufferPool, rel: &RelFile, options: StreamOptions, next_block: F) -> Self {
        let config = pool.aio().config();
        let combine_limit = config.io_combine_limit_blocks.max(1);
        let eic = config.effective_io_concurrency;
        // effective_io_concurrency = 0 means synchronous: one block at a time, no look-ahead.
        // The handle budget: never more reads in flight than the backend has handles
        // (io_max_concurrency), or `Backend::acquire` would wait for the oldest read — the
        // stall this cap exists to avoid. Completed reads give their handle back as soon as
        // the stream sees them (`reap`), not when their buffer is consumed, so the budget
        // counts only reads the device still holds.
        let handles = config.io_max_concurrency.max(1);
        let (max_ios, max_distance) = if eic == 0 {
            (1, 1)
        } else {
            let pins = pool.pin_limit_per_backend();
            (eic.min(handles), (eic * combine_limit).min(pins).max(1))
        };
        let sync_method = pool.aio().io_method() == IoMethodKind::Sync;
        let ring = options.bulk_read.then(|| pool.bulk_read_ring());
        let max_distance = match &ring {
            // A ring smaller than the look-ahead would recycle buffers still in the queue.
            Some(r) => max_distance.min(r.len()).max(1),
            None => max_distance,
        };
        ReadStream {
            pool,
            rel: pool.register(rel),
            relfile: rel.clone(),
            next_block,
            ring,
            queue: VecDeque::new(),
            ios: VecDeque::new(),
            unsettled: Vec::new(),
            pending: Vec::with_capacity(combine_limit),
            spare: Vec::with_capacity(combine_limit),
            exhausted: false,
            policy: options.policy,
            order: options.order,
            distance: 1,
            combine_distance: 1,
            max_distance,
            combine_limit: combine_limit.min(max_distance),
            max_ios,
            hit_run: 0,
            sync_method,
            advise: sync_method && !config.direct_io && eic > 0,
            last_read_end: None,
            next_seq: 0,
            stats: StreamStats {
                distance_capacity: max_distance as u64,
                io_budget: max_ios as u64,
                ..StreamStats::default()
            },
            read_ahead: None,
        }
    }

    /// Advises the kernel `seq_read_ahead` ahead of each block the callback yields, through
    /// `advice`, which all streams of one sequential scan share ([`readahead`]): the advice
    /// follows the blocks the stream is given, whichever thread's stream is given them.
    pub fn with_read_ahead(mut self, advice: &'p SeqReadAhead) -> Self {
        self.read_ahead = Some(advice);
        self
    }

    /// Whether the callback has reported the end.
    pub fn is_exhausted(&self) -> bool {
        self.exhausted
    }

    /// Asks the callback again after it reported the end: for producers that had nothing
    /// *yet* (an index scan between two leaf pages), like PostgreSQL's stream reset.
    pub fn resume(&mut self) {
        self.exhausted = false;
    }

    /// Statistics so far.
    pub fn stats(&self) -> StreamStats {
        let mut stats = self.stats;
        stats.finish();
        stats
    }

    /// The adaptive policy's ceiling for the look-ahead distance: the blocks the handle
    /// budget's reads cover at the average read size seen so far, twice over (one set in
    /// flight, one completed and not yet consumed), never below one full combined read and
    /// never above the pin limit; before the first read, the pin limit. A stream of
    /// single-page reads (a bitmap heap or index scan) so pins about `2 × max_ios` buffers
    /// rather than `max_ios × io_combine_limit`: more pins would find no more reads to
    /// start, and only spread the pages between their read and their use over more memory
    /// than the CPU caches hold.
    fn adaptive_cap(&self) -> usize {
        if self.stats.ios == 0 {
            return self.max_distance;
        }
        let per_io = self.stats.io_blocks as f64 / self.stats.ios as f64;
        let want = (2.0 * self.max_ios as f64 * per_io).ceil() as usize;
        want.max(self.combine_limit).min(self.max_distance).max(1)
    }

    fn window(&self) -> usize {
        match self.policy {
            DistancePolicy::Pg18 => self.distance,
            DistancePolicy::Adaptive => self.distance.max(self.combine_distance),
        }
    }

    /// The next pinned, verified buffer, or `None` at the end of the stream: the next in
    /// block order, or under [`StreamOrder::Completion`] whichever is ready first.
    pub fn next(
        &mut self,
        backend: &mut Backend,
    ) -> Result<Option<StreamBuffer<'p, D>>, BufferError> {
        match self.order {
            StreamOrder::BlockOrder => self.next_in_block_order(backend),
            StreamOrder::Completion => self.next_completed(backend),
        }
    }

    fn hand_out(&mut self, entry: Entry<D>) -> StreamBuffer<'p, D> {
        self.stats.buffers += 1;
        self.stats.distance_sum += self.window() as u64;
        StreamBuffer {
            pool: self.pool,
            block: entry.block,
            buffer: entry.buffer,
            data: entry.data,
        }
    }

    fn next_in_block_order(
        &mut self,
        backend: &mut Backend,
    ) -> Result<Option<StreamBuffer<'p, D>>, BufferError> {
        loop {
            self.look_ahead(backend)?;
            let Some(head) = self.queue.front() else {
                if self.exhausted && self.pending.is_empty() {
                    return Ok(None);
                }
                continue;
            };
            match head.state {
                EntryState::Ready => {
                    let entry = self.queue.pop_front().expect("head exists");
                    return Ok(Some(self.hand_out(entry)));
                }
                EntryState::OwnIo(seq) => self.wait_own_io(backend, seq)?,
                EntryState::OtherIo => self.wait_other_io(backend, 0)?,
                EntryState::Deferred => self.issue_deferred(backend, 0)?,
            }
        }
    }

    /// The order-free loop: hand out any ready entry (the earliest-named one, so a cached
    /// stream still runs in block order), refilling the window right after; with none
    /// ready, start deferred reads (sync), else wait for *any* of this stream's reads, else
    /// for another thread's.
    fn next_completed(
        &mut self,
        backend: &mut Backend,
    ) -> Result<Option<StreamBuffer<'p, D>>, BufferError> {
        loop {
            self.look_ahead(backend)?;
            if self.ready_position().is_none() {
                self.reap(backend)?;
            }
            if let Some(position) = self.ready_position() {
                let entry = self.queue.remove(position).expect("position is valid");
                if position > 0 {
                    self.stats.out_of_order += 1;
                }
                // Owned by the StreamBuffer from here, so an error below still unpins it.
                let buffer = self.hand_out(entry);
                // The slot just freed is refilled now, before the consumer works on the
                // page, so the device has the next read while the CPU has this one.
                self.look_ahead(backend)?;
                return Ok(Some(buffer));
            }
            if self.queue.is_empty() {
                if self.exhausted && self.pending.is_empty() {
                    return Ok(None);
                }
                continue;
            }
            if let Some(position) = self
                .queue
                .iter()
                .position(|entry| entry.state == EntryState::Deferred)
            {
                self.issue_deferred(backend, position)?;
            } else if !self.ios.is_empty() {
                self.stall_any(backend)?;
            } else {
                let position = self
                    .queue
                    .iter()
                    .position(|entry| entry.state == EntryState::OtherIo)
                    .ok_or_else(|| {
                        BufferError::Io(crate::aio::AioError::Internal(
                            "read stream has entries that are neither ready nor being read".into(),
                        ))
                    })?;
                self.wait_other_io(backend, position)?;
            }
        }
    }

    /// The first entry ready to hand out.
    fn ready_position(&self) -> Option<usize> {
        self.queue
            .iter()
            .position(|entry| entry.state == EntryState::Ready)
    }

    /// Blocks until any of this stream's reads completes, then takes in every completed one.
    fn stall_any(&mut self, backend: &mut Backend) -> Result<(), BufferError> {
        self.stats.stalls += 1;
        self.stats.in_progress_sum += self.ios.len() as u64;
        let wrefs: Vec<WaitRef> = self.ios.iter().map(|io| io.wref).collect();
        let start = Instant::now();
        backend.wait_any(&wrefs);
        self.stats.wait_ns += start.elapsed().as_nanos() as u64;
        if self.policy == DistancePolicy::Adaptive {
            self.distance = (self.distance * 2).min(self.adaptive_cap());
        }
        self.reap(backend)
    }

    /// Takes in every read of this stream that has completed, without waiting: its handle
    /// goes back to the backend and its entries become ready (or, for a short read, the
    /// rest is read again). This is what keeps completed-but-unconsumed reads from counting
    /// against the handle budget.
    fn reap(&mut self, backend: &mut Backend) -> Result<(), BufferError> {
        self.collect_completed(backend);
        // Settling may start reads (the rest of a short read), which may collect more.
        while let Some(seq) = self.unsettled.pop() {
            self.finish_io(backend, seq)?;
        }
        if self.order == StreamOrder::Completion {
            for entry in self.queue.iter_mut() {
                if entry.state == EntryState::OtherIo && self.pool.is_valid(entry.buffer) {
                    entry.state = EntryState::Ready;
                }
            }
        }
        Ok(())
    }

    /// Moves every completed read out of `ios` (reclaiming its handle) onto `unsettled`,
    /// without touching the queue — so it is safe in the middle of starting a read.
    fn collect_completed(&mut self, backend: &mut Backend) {
        if self.ios.is_empty() {
            return;
        }
        backend.reclaim_completed();
        let aio = self.pool.aio();
        let mut position = 0;
        while position < self.ios.len() {
            if !aio.poll(self.ios[position].wref) {
                position += 1;
                continue;
            }
            let io = self.ios.remove(position).expect("position is valid");
            // Completed: this only reclaims the handle if that has not happened yet.
            backend.wait(io.wref);
            self.unsettled.push(io.seq);
        }
    }

    /// Makes room in the handle budget for one more read: takes in completed reads, and if
    /// every read in the budget is still in flight, waits for any of them. Every path that
    /// starts a read comes here — a pending run split by hits into several reads, the rest
    /// of a short read, another thread's failed read — so the budget is never exceeded.
    fn make_room(&mut self, backend: &mut Backend) {
        while self.ios.len() >= self.max_ios {
            self.collect_completed(backend);
            if self.ios.len() < self.max_ios {
                break;
            }
            self.stats.stalls += 1;
            self.stats.in_progress_sum += self.ios.len() as u64;
            let wrefs: Vec<WaitRef> = self.ios.iter().map(|io| io.wref).collect();
            let start = Instant::now();
            backend.wait_any(&wrefs);
            self.stats.wait_ns += start.elapsed().as_nanos() as u64;
        }
    }

    /// Waits for another thread's read of queue entry `position`; if that read failed
    /// part-way, this stream owns the retry and starts it.
    fn wait_other_io(&mut self, backend: &mut Backend, position: usize) -> Result<(), BufferError> {
        let id = self.queue[position].buffer;
        let start = Instant::now();
        let valid = self.pool.wait_for_buffer(backend, id)?;
        self.stats.wait_ns += start.elapsed().as_nanos() as u64;
        if valid {
            self.queue[position].state = EntryState::Ready;
        } else {
            let block = self.queue[position].block;
            self.issue(backend, position, 1, block)?;
        }
        Ok(())
    }

    /// Starts the deferred (sync method) run beginning at queue entry `position`: the
    /// following deferred entries holding consecutive blocks, as one read. Entries of
    /// separate pending runs can line up (a random pattern naming 141, then 142 later), so
    /// the read is capped at `io_combine_limit` and at the segment's end, as a pending run
    /// is.
    fn issue_deferred(
        &mut self,
        backend: &mut Backend,
        position: usize,
    ) -> Result<(), BufferError> {
        let block = self.queue[position].block;
        let most = self
            .combine_limit
            .min(RelFile::blocks_in_segment(block) as usize)
            .min(self.queue.len() - position);
        let nblocks = (1..most)
            .take_while(|&offset| {
                let entry = &self.queue[position + offset];
                entry.state == EntryState::Deferred && entry.block == block + offset as u64
            })
            .count()
            + 1;
        self.issue(backend, position, nblocks, block)
    }

    /// Starts the read of queue entries `at..at+n` (consecutive blocks from `block`).
    fn issue(
        &mut self,
        backend: &mut Backend,
        at: usize,
        nblocks: usize,
        block: u64,
    ) -> Result<(), BufferError> {
        debug_assert!(
            nblocks >= 1 && at + nblocks <= self.queue.len(),
            "read stream issue of queue entries {at}..{} outside the queue of {}",
            at + nblocks,
            self.queue.len()
        );
        self.make_room(backend);
        let buffers: Vec<BufferId> = self
            .queue
            .range(at..at + nblocks)
            .map(|entry| entry.buffer)
            .collect();
        let wref = self.pool.stage_read(backend, self.rel, block, &buffers)?;
        let seq = self.next_seq;
        self.next_seq += 1;
        for entry in self.queue.range_mut(at..at + nblocks) {
            entry.state = EntryState::OwnIo(seq);
        }
        self.ios.push_back(StreamIo { seq, wref });
        debug_assert!(
            self.ios.len() <= self.max_ios,
            "read stream has {} reads in flight, over its handle budget {}",
            self.ios.len(),
            self.max_ios
        );
        self.stats.max_ios_in_flight = self.stats.max_ios_in_flight.max(self.ios.len() as u64);
        self.stats.ios += 1;
        self.stats.io_blocks += nblocks as u64;
        self.stats.shared_read += nblocks as u64;
        self.last_read_end = Some(block + nblocks as u64);
        Ok(())
    }

    fn wait_own_io(&mut self, backend: &mut Backend, seq: u64) -> Result<(), BufferError> {
        if let Some(position) = self.unsettled.iter().position(|&done| done == seq) {
            // Completed and collected while another read was being started.
            self.unsettled.swap_remove(position);
            return self.finish_io(backend, seq);
        }
        let Some(pos) = self.ios.iter().position(|io| io.seq == seq) else {
            return Err(BufferError::Io(crate::aio::AioError::Internal(
                "stream lost track of a read".into(),
            )));
        };
        let io = self.ios.remove(pos).expect("position is valid");
        if !self.pool.aio().poll(io.wref) {
            self.stats.stalls += 1;
            self.stats.in_progress_sum += self.ios.len() as u64 + 1;
            let start = Instant::now();
            backend.wait(io.wref);
            self.stats.wait_ns += start.elapsed().as_nanos() as u64;
            if self.policy == DistancePolicy::Adaptive {
                self.distance = (self.distance * 2).min(self.adaptive_cap());
            }
        } else {
            // Done already: reclaim it so the handle returns to the pool.
            backend.wait(io.wref);
        }
        self.finish_io(backend, seq)
    }

    /// Settles the entries of the completed read `seq`: each is now valid, failed (the
    /// error, naming file and block, is returned), or — after a short read — claimed by
    /// this stream again, in which case the rest of the run is read again.
    fn finish_io(&mut self, backend: &mut Backend, seq: u64) -> Result<(), BufferError> {
        let mut position = 0;
        while position < self.queue.len() {
            if self.queue[position].state != EntryState::OwnIo(seq) {
                position += 1;
                continue;
            }
            let id = self.queue[position].buffer;
            if self.pool.is_valid(id) {
                self.queue[position].state = EntryState::Ready;
                position += 1;
                continue;
            }
            match self.pool.wait_for_buffer(backend, id)? {
                true => {
                    self.queue[position].state = EntryState::Ready;
                    position += 1;
                }
                false => {
                    // A short read: re-issue the rest of the run from here.
                    let block = self.queue[position].block;
                    let mut nblocks = 1;
                    while position + nblocks < self.queue.len()
                        && self.queue[position + nblocks].state == EntryState::OwnIo(seq)
                        && self.queue[position + nblocks].block == block + nblocks as u64
                    {
                        let next = self.queue[position + nblocks].buffer;
                        if self.pool.wait_for_buffer(backend, next)? {
                            break;
                        }
                        nblocks += 1;
                    }
                    self.issue(backend, position, nblocks, block)?;
                    position += nblocks;
                }
            }
        }
        Ok(())
    }

    fn look_ahead(&mut self, backend: &mut Backend) -> Result<(), BufferError> {
        // Random reads go to the device as they are found, contiguous ones still merge
        // (see the AIO module's "What a batch holds back").
        backend.enter_batch_mode_with(BatchHold::Contiguous);
        let looked = self.look_ahead_batched(backend);
        backend.exit_batch_mode();
        self.assert_bookkeeping();
        looked
    }

    /// The stream's invariants, as `read_stream.c` asserts them: the buffers it pins plus
    /// the blocks of the pending run never exceed the pin limit (`max_distance`), and both
    /// distances stay within their bounds. Debug builds only; the checks are O(1).
    fn assert_bookkeeping(&self) {
        debug_assert!(
            self.queue.len() + self.pending.len() <= self.max_distance,
            "read stream holds {} pinned buffers + {} pending blocks, over its pin limit {}",
            self.queue.len(),
            self.pending.len(),
            self.max_distance
        );
        debug_assert!(
            (1..=self.max_distance).contains(&self.distance),
            "read stream distance {} outside 1..={}",
            self.distance,
            self.max_distance
        );
        debug_assert!(
            (1..=self.combine_limit.max(1)).contains(&self.combine_distance),
            "read stream combine distance {} outside 1..={}",
            self.combine_distance,
            self.combine_limit
        );
        debug_assert!(
            self.pending.len() <= self.combine_limit,
            "read stream pending run of {} blocks over io_combine_limit {}",
            self.pending.len(),
            self.combine_limit
        );
    }

    fn look_ahead_batched(&mut self, backend: &mut Backend) -> Result<(), BufferError> {
        if self.ios.len() >= self.max_ios {
            // The budget is spent: reads that have completed but whose buffers are not yet
            // consumed must not hold it (one slow read would otherwise idle the queue).
            self.reap(backend)?;
        }
        while !self.exhausted
            && self.queue.len() + self.pending.len() < self.window()
            && self.ios.len() < self.max_ios
        {
            let Some((block, data)) = (self.next_block)() else {
                self.exhausted = true;
                break;
            };
            if let Some(advice) = self.read_ahead {
                advice.advance(self.pool, &self.relfile, block);
            }
            let extends = self.pending.last().is_some_and(|&(b, _)| b + 1 == block)
                && self.pending.len() < self.combine_limit
                && RelFile::blocks_in_segment(self.pending[0].0) as usize > self.pending.len();
            if !extends && !self.pending.is_empty() {
                self.start_pending(backend)?;
            }
            self.pending.push((block, data));
            if self.pending.len() >= self.combine_limit {
                self.start_pending(backend)?;
            }
        }
        // Start the pending run only when it is full, when nothing is queued (the consumer
        // would otherwise wait for blocks nobody has asked the device for), or at the end.
        // A run cut short merely because the window is full would otherwise become a stream
        // of one-block reads as the consumer frees one slot at a time; PostgreSQL's
        // read_stream_look_ahead waits for the same reason.
        if !self.pending.is_empty()
            && (self.pending.len() >= self.combine_limit || self.queue.is_empty() || self.exhausted)
            && (self.ios.len() < self.max_ios || self.queue.is_empty())
        {
            self.start_pending(backend)?;
        }
        Ok(())
    }

    /// Pins the pending run's blocks and starts reads for the ones not in the pool.
    fn start_pending(&mut self, backend: &mut Backend) -> Result<(), BufferError> {
        let mut run = std::mem::take(&mut self.spare);
        std::mem::swap(&mut run, &mut self.pending);
        let mut needs_io = false;
        let mut all_hits = true;
        let mut claimed_from: Option<usize> = None;
        for (block, data) in run.drain(..) {
            let pinned = self.pool.pin(self.rel, block, self.ring.as_mut())?;
            let (state, claimed) = match pinned {
                Pinned::Valid(_) => {
                    self.stats.shared_hit += 1;
                    (EntryState::Ready, false)
                }
                Pinned::InProgress(_) => {
                    all_hits = false;
                    (EntryState::OtherIo, false)
                }
                Pinned::NeedsRead(_) => {
                    all_hits = false;
                    needs_io = true;
                    (EntryState::Deferred, true)
                }
            };
            if !claimed {
                if let Some(from) = claimed_from.take() {
                    self.start_claimed(backend, from)?;
                }
            }
            self.queue.push_back(Entry {
                block,
                buffer: pinned.buffer(),
                data,
                state,
            });
            if claimed && claimed_from.is_none() {
                claimed_from = Some(self.queue.len() - 1);
            }
        }
        self.spare = run;
        if let Some(from) = claimed_from {
            self.start_claimed(backend, from)?;
        }
        self.adapt(needs_io, all_hits);
        Ok(())
    }

    /// Starts (or, under sync, defers and advises) the read of the claimed entries from
    /// queue position `from` to the end.
    fn start_claimed(&mut self, backend: &mut Backend, from: usize) -> Result<(), BufferError> {
        let nblocks = self.queue.len() - from;
        let block = self.queue[from].block;
        if self.sync_method {
            let sequential = self.last_read_end == Some(block);
            if self.advise && !sequential {
                if let Ok((file, offset)) = self.relfile.locate(
                    self.pool.aio().files(),
                    block,
                    nblocks as u32,
                    OpenMode::Read,
                ) {
                    if file
                        .advise_willneed(offset, (nblocks * BLCKSZ) as u64)
                        .is_ok()
                    {
                        self.stats.advice += 1;
                    }
                }
            }
            self.last_read_end = Some(block + nblocks as u64);
            return Ok(());
        }
        self.issue(backend, from, nblocks, block)
    }

    fn adapt(&mut self, needs_io: bool, all_hits: bool) {
        match self.policy {
            DistancePolicy::Pg18 => {
                if needs_io {
                    self.distance = (self.distance * 2).min(self.max_distance);
                } else if all_hits {
                    self.distance = self.distance.saturating_sub(1).max(1);
                }
            }
            DistancePolicy::Adaptive => {
                if needs_io {
                    self.hit_run = 0;
                    // Sequential reads should always reach a full combined I/O.
                    self.combine_distance = self.combine_limit;
                    if self.distance < self.combine_limit.min(self.max_distance)
                        && self.ios.len() <= 1
                    {
                        // Before the first stall, grow like PostgreSQL 18 so a cold start
                        // reaches useful depth at once.
                        self.distance = (self.distance * 2).min(self.adaptive_cap());
                    }
                } else if all_hits {
                    self.hit_run += 1;
                    if self.hit_run >= self.combine_limit {
                        self.hit_run = 0;
                        self.distance = self.distance.saturating_sub(1).max(1);
                        self.combine_distance = self.combine_distance.saturating_sub(1).max(1);
                    }
                }
            }
        }
        self.stats.distance_max = self.stats.distance_max.max(self.window() as u64);
    }
}

impl<D, F: FnMut() -> Option<(u64, D)>> Drop for ReadStream<'_, D, F> {
    fn drop(&mut self) {
        for entry in self.queue.drain(..) {
            if entry.state == EntryState::Deferred {
                self.pool.fail_io(entry.buffer);
            }
            // Reads still in flight finish on their own and mark the buffer; dropping our
            // pin now cannot hand the buffer to anyone before that (an I/O-in-progress
            // buffer is never a victim).
            self.pool.unpin(entry.buffer);
        }
    }
}
