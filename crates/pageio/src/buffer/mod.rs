//! # The shared buffer pool
//!
//! `shared_buffers` worth of 8 kB buffers in one allocation, found by
//! (relation, block) and replaced by clock sweep — PostgreSQL's buffer manager, without WAL.
//! Dirty buffers and their write-back (a checkpoint's sorted, combined writes, and the
//! write of a dirty victim before it is reused) are in [`flush`].
//!
//! ```text
//!   pin(rel, block) ─► mapping partition (rel, block) → buffer id
//!        hit:  refcount+1, usage+1 ─► VALID? return it : IO_IN_PROGRESS? wait on its WaitRef
//!        miss: victim ← ring (bulk read) or clock sweep (refcount 0, usage decays to 0)
//!              evict old tag, insert new tag, flags = IO_IN_PROGRESS  ─► caller stages the read
//!
//!   read completes (any thread) ─► shared callback per block:
//!        verify header + checksum ─► ok: VALID        bad: IO_ERROR, result = ERROR
//!                                    (zero_damaged_pages: zero it, VALID; ignore_checksum_failure:
//!                                     keep it, VALID, count it — either way log one
//!                                     DamagedPage event, as PostgreSQL's WARNING)
//! ```
//!
//! **I/O in progress.** A buffer being read carries the read's [`WaitRef`]. A second thread
//! that wants the same block pins the buffer and waits on that reference instead of reading
//! the block again; when the read failed, the waiter retries it itself, as PostgreSQL's
//! `StartBufferIO` does.
//!
//! **Checksums where the I/O completes.** Verification runs in the shared completion
//! callback, so under `io_method = worker` it runs on the I/O workers and spreads over the
//! cores — the reason `worker` beats `io_uring` on cached sequential scans in PostgreSQL 18's
//! published numbers.
//!
//! **Bulk reads.** A large scan uses a [`BufferRing`] (PostgreSQL's `BULKREAD` strategy): it
//! recycles its own few buffers instead of sweeping the whole pool, so one scan of a table
//! larger than the pool does not evict everyone else's pages.
//!
//! **Pins.** A buffer's refcount counts its pins; it is never negative — unpinning a buffer
//! nobody pinned panics in debug builds and leaves the count at zero in release builds — and
//! only an unpinned buffer that no read is using can become a victim.
//!
//! **Memory.** One anonymous mapping, page-aligned (so every buffer satisfies O_DIRECT's
//! alignment), backed by huge pages under `huge_pages = try | on` when the kernel has them.
//!
//! Worked example: a pool of 128 buffers and a scan with a 32-buffer ring reading a
//! 1000-block table: the first 32 misses take buffers from the clock sweep and remember them
//! in the ring; block 32 reuses the ring's first buffer (unpinned, usage ≤ 1), and so on —
//! 96 buffers stay untouched for other scans.

pub mod flush;

pub use flush::FlushStats;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use thiserror::Error;

use crate::aio::{AioCallbacks, AioError, IoOp, IoStatus, IoTarget, SharedCompletion, WaitRef};
use crate::config::{HugePages, BLCKSZ};
use crate::page::{verify_page, PageVerification};
use crate::storage::{MappedRegion, OpenMode, PageKind, RelFile};
use crate::{Aio, Backend};

/// Largest usage count (PostgreSQL's `BM_MAX_USAGE_COUNT`): a buffer survives at most this
/// many clock-sweep passes without being used again.
pub const MAX_USAGE_COUNT: u32 = 5;

/// Mapping partitions (PostgreSQL's `NUM_BUFFER_PARTITIONS` is 128). Lookups lock one
/// partition; 64 keeps contention negligible at this engine's thread counts.
const MAPPING_PARTITIONS: usize = 64;

/// Smallest bulk-read ring, as PostgreSQL's 256 kB `BAS_BULKREAD` ring.
const MIN_RING_BUFFERS: usize = 32;

/// Polls (yielding the CPU) of a buffer another thread has claimed but not yet staged a read
/// for, before polling with sleeps: staging normally follows the claim within microseconds.
const CLAIMED_SPIN_POLLS: u32 = 64;

/// Pause between later polls of such a buffer: under io_method=sync a stream defers a
/// claimed read until the block reaches the head of its queue, which can take a while; 100
/// µs keeps the waiter responsive without keeping a core busy.
const CLAIMED_POLL_SLEEP: std::time::Duration = std::time::Duration::from_micros(100);

const FLAG_VALID: u32 = 1;
const FLAG_IO_IN_PROGRESS: u32 = 2;
const FLAG_IO_ERROR: u32 = 4;

/// Index of a buffer in the pool.
pub type BufferId = u32;

/// A registered relation fork.
pub type RelId = u32;

/// Errors of the buffer pool.
#[derive(Debug, Clone, Error)]
pub enum BufferError {
    /// The pool memory could not be mapped.
    #[error("could not map {size_bytes} bytes for shared_buffers{}: {reason}; {fix}", if *.huge { " with huge pages" } else { "" })]
    Memory {
        /// Bytes requested.
        size_bytes: usize,
        /// Whether huge pages were requested.
        huge: bool,
        /// The OS error.
        reason: String,
        /// What to do about it.
        fix: String,
    },
    /// Every buffer is pinned.
    #[error("no unpinned buffers available (shared_buffers has {nbuffers} buffers, all pinned); raise shared_buffers or lower the number of concurrent scans")]
    NoUnpinnedBuffers {
        /// Pool size.
        nbuffers: u32,
    },
    /// An I/O failed (the message names file and block).
    #[error(transparent)]
    Io(#[from] AioError),
    /// A page could not be modified now.
    #[error("could not modify buffer {buffer}: {reason}")]
    Busy {
        /// The buffer.
        buffer: BufferId,
        /// Why, and what to do.
        reason: String,
    },
}

/// How the pool treats pages that fail verification.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct PageCheckOptions {
    /// Verify checksums (PostgreSQL clusters initialised with `-k`).
    pub checksums: bool,
    /// PostgreSQL's `zero_damaged_pages`: a bad page is zeroed and used as empty.
    pub zero_damaged_pages: bool,
    /// PostgreSQL's `ignore_checksum_failure`: a checksum failure is counted, the page used.
    pub ignore_checksum_failure: bool,
}

/// Most damaged-page events the pool remembers for [`BufferPool::damaged_pages_since`]: one
/// line per page is what a DBA reads, and a relation with more damaged pages than this needs
/// a restore, not a list; the counters keep counting past it.
pub const DAMAGED_PAGE_LOG_CAPACITY: usize = 1024;

/// What the pool did with a page that failed verification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DamagedPageAction {
    /// Zeroed and used as an empty page (`zero_damaged_pages`).
    Zeroed,
    /// Used as read despite a checksum failure (`ignore_checksum_failure`).
    UsedAnyway,
}

/// One page that failed verification but was read past, as PostgreSQL's WARNING reports it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DamagedPage {
    /// Position in the pool's event sequence (see [`BufferPool::damaged_pages_since`]).
    pub seq: u64,
    /// The relation's name in messages (`base/5/16384`).
    pub path: String,
    /// Block number within the relation fork.
    pub block: u64,
    /// What was done with it.
    pub action: DamagedPageAction,
    /// Why it failed verification (the two checksums, or the header problem).
    pub detail: String,
}

impl std::fmt::Display for DamagedPage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.action {
            DamagedPageAction::Zeroed => write!(
                f,
                "invalid page in block {} of relation {}; zeroing out page ({})",
                self.block, self.path, self.detail
            ),
            DamagedPageAction::UsedAnyway => write!(
                f,
                "page verification failed in block {} of relation {}; using it anyway ({})",
                self.block, self.path, self.detail
            ),
        }
    }
}

/// Pool-wide counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct PoolCounters {
    /// Pins that found the page valid.
    pub hits: u64,
    /// Blocks read from storage.
    pub reads: u64,
    /// Pages that failed verification.
    pub verification_failures: u64,
    /// Of those, pages zeroed (`zero_damaged_pages`).
    pub pages_zeroed: u64,
    /// Buffers taken from another page by the clock sweep or a ring.
    pub evictions: u64,
    /// Times a pin waited for another thread's read of the same block.
    pub waited_on_other_io: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct BufferTag {
    rel: RelId,
    block: u64,
}

struct DescHeader {
    tag: Option<BufferTag>,
    io_wref: Option<WaitRef>,
    /// Why the last read of this buffer failed (file, block, cause), for every waiter.
    error: Option<AioError>,
}

struct BufferDesc {
    /// Pins, plus `flush::EXCLUSIVE` while [`BufferPool::modify_page`] changes the page.
    refcount: AtomicU32,
    usage: AtomicU32,
    flags: AtomicU32,
    /// The page differs from the file (`BM_DIRTY`). Kept apart from `flags`, which the read
    /// paths store whole; only valid buffers are ever dirty, and a dirty buffer is never
    /// evicted without being written first.
    dirty: AtomicBool,
    header: Mutex<DescHeader>,
}

impl BufferDesc {
    /// Claims the read of this buffer, last seen with `flags` (neither valid nor being
    /// read), like PostgreSQL's `StartBufferIO`: one compare-and-swap, so exactly one thread
    /// wins; the winner clears the wait reference and error of the buffer's last read.
    /// `false` when the flags changed meanwhile (look again).
    fn try_claim_read(&self, flags: u32) -> bool {
        if self
            .flags
            .compare_exchange(
                flags,
                FLAG_IO_IN_PROGRESS,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_err()
        {
            return false;
        }
        let mut header = self.header.lock().unwrap_or_else(|p| p.into_inner());
        header.io_wref = None;
        header.error = None;
        true
    }
}

/// The mapping that holds the buffers (shared by design: access is coordinated by pins and
/// I/O flags), and whether it got huge pages.
struct PoolMemory {
    region: MappedRegion,
    huge: bool,
}

impl PoolMemory {
    fn new(region: MappedRegion, huge: bool) -> PoolMemory {
        PoolMemory { region, huge }
    }
}

const HUGE_PAGE_BYTES: usize = 2 << 20;

fn map_memory(size_bytes: usize, huge_pages: HugePages) -> Result<PoolMemory, BufferError> {
    let try_huge = huge_pages != HugePages::Off;
    if try_huge {
        let len = size_bytes.div_ceil(HUGE_PAGE_BYTES) * HUGE_PAGE_BYTES;
        let mapped = MappedRegion::anonymous(len, PageKind::Huge);
        let error = match mapped {
            Ok(region) => return Ok(PoolMemory::new(region, true)),
            Err(e) => e,
        };
        if huge_pages == HugePages::On {
            return Err(BufferError::Memory {
                size_bytes: len,
                huge: true,
                reason: error.to_string(),
                fix: format!(
                    "reserve at least {} huge pages (sysctl -w vm.nr_hugepages={}), or set huge_pages = try",
                    len / HUGE_PAGE_BYTES,
                    len / HUGE_PAGE_BYTES
                ),
            });
        }
    }
    match MappedRegion::anonymous(size_bytes, PageKind::Normal) {
        Ok(region) => Ok(PoolMemory::new(region, false)),
        Err(e) => Err(BufferError::Memory {
            size_bytes,
            huge: false,
            reason: e.to_string(),
            fix: "lower shared_buffers, or raise the memory limit (ulimit -v)".into(),
        }),
    }
}

struct PoolInner {
    aio: Aio,
    memory: PoolMemory,
    nbuffers: u32,
    descs: Box<[BufferDesc]>,
    partitions: Box<[Mutex<HashMap<BufferTag, BufferId>>]>,
    clock: AtomicU64,
    relations: RwLock<(Vec<RelFile>, HashMap<PathBuf, RelId>)>,
    check: PageCheckOptions,
    hits: AtomicU64,
    reads: AtomicU64,
    verification_failures: AtomicU64,
    pages_zeroed: AtomicU64,
    evictions: AtomicU64,
    waited_on_other_io: AtomicU64,
    /// Dirty victims written before reuse, and such writes that failed.
    victims_written: AtomicU64,
    victim_write_failures: AtomicU64,
    /// The last [`DAMAGED_PAGE_LOG_CAPACITY`] damaged pages read past, and the next `seq`.
    damaged: Mutex<(std::collections::VecDeque<DamagedPage>, u64)>,
}

/// The shared buffer pool. Cheap to clone; clones share one pool.
#[derive(Clone)]
pub struct BufferPool {
    inner: Arc<PoolInner>,
}

impl std::fmt::Debug for BufferPool {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("BufferPool")
            .field("nbuffers", &self.inner.nbuffers)
            .field("huge_pages", &self.inner.memory.huge)
            .finish()
    }
}

/// The outcome of pinning a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pinned {
    /// The page is valid.
    Valid(BufferId),
    /// Another thread is reading it; wait with [`BufferPool::wait_for_buffer`].
    InProgress(BufferId),
    /// This caller must read it (the buffer is marked I/O in progress for it).
    NeedsRead(BufferId),
}

impl Pinned {
    /// The pinned buffer.
    pub fn buffer(self) -> BufferId {
        match self {
            Pinned::Valid(b) | Pinned::InProgress(b) | Pinned::NeedsRead(b) => b,
        }
    }
}

/// A bulk-read ring (PostgreSQL's `BAS_BULKREAD` strategy): the buffers one scan recycles.
#[derive(Debug)]
pub struct BufferRing {
    slots: Vec<Option<BufferId>>,
    current: usize,
}

impl BufferRing {
    /// A ring of `nbuffers` buffers.
    pub fn new(nbuffers: usize) -> BufferRing {
        BufferRing {
            slots: vec![None; nbuffers.max(1)],
            current: 0,
        }
    }

    /// Number of buffers in the ring.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Never true: a ring has at least one slot.
    pub fn is_empty(&self) -> bool {
        false
    }
}

impl BufferPool {
    /// Creates a pool of `shared_buffers` from the Aio's settings, verifying pages as
    /// `check` says.
    pub fn new(aio: &Aio, check: PageCheckOptions) -> Result<BufferPool, BufferError> {
        let config = aio.config();
        let nbuffers = (config.shared_buffers_bytes / BLCKSZ).max(16) as u32;
        let memory = map_memory(nbuffers as usize * BLCKSZ, config.huge_pages)?;
        let descs = (0..nbuffers)
            .map(|_| BufferDesc {
                refcount: AtomicU32::new(0),
                usage: AtomicU32::new(0),
                dirty: AtomicBool::new(false),
                flags: AtomicU32::new(0),
                header: Mutex::new(DescHeader {
                    tag: None,
                    io_wref: None,
                    error: None,
                }),
            })
            .collect();
        let partitions = (0..MAPPING_PARTITIONS)
            .map(|_| Mutex::new(HashMap::new()))
            .collect();
        Ok(BufferPool {
            inner: Arc::new(PoolInner {
                aio: aio.clone(),
                memory,
                nbuffers,
                descs,
                partitions,
                clock: AtomicU64::new(0),
                relations: RwLock::new((Vec::new(), HashMap::new())),
                check,
                hits: AtomicU64::new(0),
                reads: AtomicU64::new(0),
                verification_failures: AtomicU64::new(0),
                pages_zeroed: AtomicU64::new(0),
                evictions: AtomicU64::new(0),
                waited_on_other_io: AtomicU64::new(0),
                victims_written: AtomicU64::new(0),
                victim_write_failures: AtomicU64::new(0),
                damaged: Mutex::new((std::collections::VecDeque::new(), 0)),
            }),
        })
    }

    /// Number of buffers.
    pub fn nbuffers(&self) -> u32 {
        self.inner.nbuffers
    }

    /// Whether the pool's memory is backed by huge pages.
    pub fn huge_pages_in_use(&self) -> bool {
        self.inner.memory.huge
    }

    /// The AIO subsystem the pool reads through.
    pub fn aio(&self) -> &Aio {
        &self.inner.aio
    }

    /// How pages are checked.
    pub fn check_options(&self) -> PageCheckOptions {
        self.inner.check
    }

    /// Counters so far.
    pub fn counters(&self) -> PoolCounters {
        let inner = &self.inner;
        PoolCounters {
            hits: inner.hits.load(Ordering::Relaxed),
            reads: inner.reads.load(Ordering::Relaxed),
            verification_failures: inner.verification_failures.load(Ordering::Relaxed),
            pages_zeroed: inner.pages_zeroed.load(Ordering::Relaxed),
            evictions: inner.evictions.load(Ordering::Relaxed),
            waited_on_other_io: inner.waited_on_other_io.load(Ordering::Relaxed),
        }
    }

    /// The sequence number the next damaged-page event will get: take it before a scan and
    /// pass it to [`BufferPool::damaged_pages_since`] after.
    pub fn damaged_pages_seq(&self) -> u64 {
        self.inner
            .damaged
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .1
    }

    /// Pages that failed verification and were zeroed or used anyway, from event `seq` on
    /// (the most recent [`DAMAGED_PAGE_LOG_CAPACITY`] are kept).
    pub fn damaged_pages_since(&self, seq: u64) -> Vec<DamagedPage> {
        let log = self.inner.damaged.lock().unwrap_or_else(|p| p.into_inner());
        log.0.iter().filter(|d| d.seq >= seq).cloned().collect()
    }

    /// A bulk-read ring sized like PostgreSQL's: 256 kB, or enough for the stream's whole
    /// look-ahead (`effective_io_concurrency` × `io_combine_limit`) when that is larger,
    /// but never more than an eighth of the pool.
    pub fn bulk_read_ring(&self) -> BufferRing {
        let config = self.inner.aio.config();
        let want = (config.effective_io_concurrency.max(1) * config.io_combine_limit_blocks)
            .max(MIN_RING_BUFFERS);
        BufferRing::new(want.min((self.inner.nbuffers as usize / 8).max(1)))
    }

    /// How many buffers one backend may keep pinned: an equal share of the pool among up to
    /// eight concurrent scans (PostgreSQL divides by `MaxBackends`), at least one.
    pub fn pin_limit_per_backend(&self) -> usize {
        (self.inner.nbuffers as usize / 8).max(1)
    }

    /// Registers a relation fork and returns its id (the same id for the same path).
    pub fn register(&self, rel: &RelFile) -> RelId {
        let path = rel.path().to_path_buf();
        if let Some(&id) = self
            .inner
            .relations
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .1
            .get(&path)
        {
            return id;
        }
        let mut relations = self
            .inner
            .relations
            .write()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(&id) = relations.1.get(&path) {
            return id;
        }
        let id = relations.0.len() as RelId;
        relations.0.push(rel.clone());
        relations.1.insert(path, id);
        id
    }

    /// The relation registered as `id`.
    pub fn relation(&self, id: RelId) -> RelFile {
        self.inner
            .relations
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .0[id as usize]
            .clone()
    }

    fn partition(&self, tag: &BufferTag) -> &Mutex<HashMap<BufferTag, BufferId>> {
        let hash = (tag.rel as u64)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .wrapping_add(tag.block.wrapping_mul(0xC2B2_AE3D_27D4_EB4F));
        &self.inner.partitions[(hash >> 58) as usize % MAPPING_PARTITIONS]
    }

    fn desc(&self, id: BufferId) -> &BufferDesc {
        &self.inner.descs[id as usize]
    }

    /// Pins `block` of relation `rel`, claiming a buffer (and the duty to read it) when the
    /// block is not in the pool.
    pub fn pin(
        &self,
        rel: RelId,
        block: u64,
        ring: Option<&mut BufferRing>,
    ) -> Result<Pinned, BufferError> {
        let tag = BufferTag { rel, block };
        if let Some(p) = self.lookup(&tag) {
            return Ok(p);
        }
        let victim = self.get_victim(ring)?;
        let mut part = self
            .partition(&tag)
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(&existing) = part.get(&tag) {
            // Someone mapped the block while we looked for a victim: use theirs.
            let desc = self.desc(existing);
            desc.refcount.fetch_add(1, Ordering::AcqRel);
            drop(part);
            flush::wait_not_exclusive(desc);
            self.release_victim(victim);
            return Ok(self.classify(existing));
        }
        part.insert(tag, victim);
        let desc = self.desc(victim);
        {
            let mut header = desc.header.lock().unwrap_or_else(|p| p.into_inner());
            header.tag = Some(tag);
            header.io_wref = None;
            header.error = None;
        }
        desc.flags.store(FLAG_IO_IN_PROGRESS, Ordering::Release);
        desc.usage.store(1, Ordering::Relaxed);
        Ok(Pinned::NeedsRead(victim))
    }

    fn lookup(&self, tag: &BufferTag) -> Option<Pinned> {
        let part = self
            .partition(tag)
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let &id = part.get(tag)?;
        let desc = self.desc(id);
        desc.refcount.fetch_add(1, Ordering::AcqRel);
        drop(part);
        flush::wait_not_exclusive(desc);
        let usage = desc.usage.load(Ordering::Relaxed);
        if usage < MAX_USAGE_COUNT {
            desc.usage.store(usage + 1, Ordering::Relaxed);
        }
        Some(self.classify(id))
    }

    /// For a pinned buffer: valid, being read by someone, or ours to read (claimed with a
    /// compare-and-swap so exactly one thread starts the read, like `StartBufferIO`).
    fn classify(&self, id: BufferId) -> Pinned {
        let desc = self.desc(id);
        loop {
            let flags = desc.flags.load(Ordering::Acquire);
            if flags & FLAG_VALID != 0 {
                self.inner.hits.fetch_add(1, Ordering::Relaxed);
                return Pinned::Valid(id);
            }
            if flags & FLAG_IO_IN_PROGRESS != 0 {
                return Pinned::InProgress(id);
            }
            if desc.try_claim_read(flags) {
                return Pinned::NeedsRead(id);
            }
        }
    }

    /// Finds an unpinned buffer, pins it and strips it of its old page.
    fn get_victim(&self, ring: Option<&mut BufferRing>) -> Result<BufferId, BufferError> {
        if let Some(ring) = ring {
            let cur = ring.current;
            ring.current = (ring.current + 1) % ring.slots.len();
            if let Some(id) = ring.slots[cur] {
                if self.desc(id).usage.load(Ordering::Relaxed) <= 1 && self.try_evict(id) {
                    return Ok(id);
                }
            }
            let id = self.clock_sweep()?;
            ring.slots[cur] = Some(id);
            return Ok(id);
        }
        self.clock_sweep()
    }

    fn clock_sweep(&self) -> Result<BufferId, BufferError> {
        let nbuffers = self.inner.nbuffers as u64;
        // Every buffer can need MAX_USAGE_COUNT passes to decay; twice that without finding
        // an unpinned buffer means they are all pinned.
        let budget = nbuffers * (MAX_USAGE_COUNT as u64 + 1) * 2;
        for _ in 0..budget {
            let id = (self.inner.clock.fetch_add(1, Ordering::Relaxed) % nbuffers) as BufferId;
            let desc = self.desc(id);
            if desc.refcount.load(Ordering::Acquire) != 0 {
                continue;
            }
            let usage = desc.usage.load(Ordering::Relaxed);
            if usage > 0 {
                desc.usage.store(usage - 1, Ordering::Relaxed);
                continue;
            }
            if self.try_evict(id) {
                return Ok(id);
            }
        }
        Err(BufferError::NoUnpinnedBuffers {
            nbuffers: self.inner.nbuffers,
        })
    }

    /// Pins an unpinned buffer exclusively and removes its page from the mapping.
    fn try_evict(&self, id: BufferId) -> bool {
        let desc = self.desc(id);
        if desc
            .refcount
            .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return false;
        }
        if desc.flags.load(Ordering::Acquire) & FLAG_IO_IN_PROGRESS != 0 {
            desc.refcount.fetch_sub(1, Ordering::AcqRel);
            return false;
        }
        let old = desc.header.lock().unwrap_or_else(|p| p.into_inner()).tag;
        // Never evict a dirty page without writing it: write it now (as PostgreSQL's
        // FlushBuffer does for a dirty victim); if that fails it stays dirty and mapped.
        if desc.dirty.load(Ordering::Acquire) {
            let written = old.is_some_and(|tag| self.write_victim(id, tag));
            if !written {
                desc.refcount.fetch_sub(1, Ordering::AcqRel);
                return false;
            }
        }
        if let Some(tag) = old {
            let mut part = self
                .partition(&tag)
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            // A lookup holding this partition may have pinned it meanwhile.
            if desc.refcount.load(Ordering::Acquire) != 1 {
                drop(part);
                desc.refcount.fetch_sub(1, Ordering::AcqRel);
                return false;
            }
            part.remove(&tag);
            desc.header.lock().unwrap_or_else(|p| p.into_inner()).tag = None;
            drop(part);
            self.inner.evictions.fetch_add(1, Ordering::Relaxed);
        }
        desc.flags.store(0, Ordering::Release);
        desc.usage.store(0, Ordering::Relaxed);
        true
    }

    fn release_victim(&self, id: BufferId) {
        let desc = self.desc(id);
        debug_assert!(
            desc.refcount.load(Ordering::Acquire) >= 1,
            "releasing victim buffer {id} that holds no pin"
        );
        desc.flags.store(0, Ordering::Release);
        desc.usage.store(0, Ordering::Relaxed);
        desc.refcount.fetch_sub(1, Ordering::AcqRel);
    }

    /// Drops one pin. Unpinning a buffer nobody pinned is a caller bug: debug builds panic
    /// on it; release builds leave the count at zero rather than wrap it to 4 billion pins,
    /// which would keep the buffer from ever being evicted.
    pub fn unpin(&self, id: BufferId) {
        let refcount = &self.desc(id).refcount;
        let pins_before = refcount.fetch_sub(1, Ordering::AcqRel);
        if pins_before == 0 {
            refcount.fetch_add(1, Ordering::AcqRel);
            debug_assert!(false, "unpin of unpinned buffer {id}");
        }
    }

    /// Whether a pinned buffer holds a valid page.
    pub fn is_valid(&self, id: BufferId) -> bool {
        self.desc(id).flags.load(Ordering::Acquire) & FLAG_VALID != 0
    }

    /// The page in a pinned, valid buffer.
    pub fn page(&self, id: BufferId) -> &[u8; BLCKSZ] {
        debug_assert!(self.desc(id).refcount.load(Ordering::Relaxed) > 0);
        // SAFETY: the buffer lies inside the mapping; a pinned valid buffer is never written
        // while another pin is held (reads only go into buffers marked I/O in progress,
        // which are not valid; `modify_page` writes only under the sole pin, and new pinners
        // wait for it).
        unsafe {
            &*(self.inner.memory.region.as_ptr().add(id as usize * BLCKSZ) as *const [u8; BLCKSZ])
        }
    }

    fn buffer_ptr(&self, id: BufferId) -> *mut u8 {
        // SAFETY: inside the mapping.
        unsafe { self.inner.memory.region.as_ptr().add(id as usize * BLCKSZ) }
    }

    /// Stages one read of `buffers` (all claimed by this caller via [`Pinned::NeedsRead`],
    /// holding consecutive blocks starting at `first_block` of `rel`) on `backend`. The
    /// completion verifies every page and marks it valid or failed.
    pub fn stage_read(
        &self,
        backend: &mut Backend,
        rel: RelId,
        first_block: u64,
        buffers: &[BufferId],
    ) -> Result<WaitRef, BufferError> {
        let relfile = self.relation(rel);
        let nblocks = buffers.len() as u32;
        let located = relfile.locate(self.inner.aio.files(), first_block, nblocks, OpenMode::Read);
        let (file, offset) = match located {
            Ok(v) => v,
            Err(e) => {
                let err = AioError::from(e);
                for &b in buffers {
                    self.fail_io(b);
                }
                return Err(err.into());
            }
        };
        let iovecs: Vec<libc::iovec> = buffers
            .iter()
            .map(|&b| libc::iovec {
                iov_base: self.buffer_ptr(b).cast(),
                iov_len: BLCKSZ,
            })
            .collect();
        let ids: Vec<u64> = buffers.iter().map(|&b| b as u64).collect();
        let target = IoTarget {
            path: relfile.display_name().clone(),
            first_block,
            nblocks,
        };
        let staged = (|| {
            let mut handle = backend.acquire()?;
            handle.set_callbacks(self.inner.clone(), &ids);
            // SAFETY: the buffers are pinned by the caller and marked I/O in progress, so
            // nobody reads or writes them until the completion marks them valid or failed.
            unsafe { handle.stage(IoOp::Readv, file, offset, &iovecs, target) }
        })();
        match staged {
            Ok(wref) => {
                for &b in buffers {
                    self.desc(b)
                        .header
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .io_wref = Some(wref);
                }
                Ok(wref)
            }
            Err(e) => {
                for &b in buffers {
                    self.fail_io(b);
                }
                Err(e.into())
            }
        }
    }

    /// Gives up an I/O this caller claimed but did not start (the next pin retries it).
    pub(crate) fn fail_io(&self, id: BufferId) {
        self.desc(id)
            .flags
            .fetch_and(!FLAG_IO_IN_PROGRESS, Ordering::AcqRel);
    }

    /// Why the last read of a buffer failed, if it did.
    pub fn buffer_error(&self, id: BufferId) -> Option<AioError> {
        self.desc(id)
            .header
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .error
            .clone()
    }

    /// Waits until the read of a pinned buffer (this caller's or another thread's) has
    /// ended. Returns `Ok(true)` when the page is valid; `Ok(false)` when the read was
    /// partial and this caller now owns a retry (the buffer is claimed again, as by
    /// [`Pinned::NeedsRead`]); the read's error when it failed.
    pub fn wait_for_buffer(
        &self,
        backend: &mut Backend,
        id: BufferId,
    ) -> Result<bool, BufferError> {
        let desc = self.desc(id);
        let mut counted = false;
        let mut claimed_polls = 0u32;
        loop {
            let flags = desc.flags.load(Ordering::Acquire);
            if flags & FLAG_VALID != 0 {
                return Ok(true);
            }
            if flags & FLAG_IO_ERROR != 0 {
                if let Some(e) = self.buffer_error(id) {
                    return Err(e.into());
                }
            }
            if flags & FLAG_IO_IN_PROGRESS == 0 {
                if desc.try_claim_read(flags) {
                    return Ok(false);
                }
                continue;
            }
            let wref = desc
                .header
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .io_wref;
            match wref {
                Some(w) => {
                    if !counted && !self.inner.aio.poll(w) {
                        self.inner
                            .waited_on_other_io
                            .fetch_add(1, Ordering::Relaxed);
                        counted = true;
                    }
                    backend.wait(w);
                }
                // Claimed but not yet staged: the owner stages right after claiming — or,
                // under io_method=sync, when the block reaches the head of its stream. Back
                // off from yielding to short sleeps so a long deferral does not burn a core.
                None => {
                    claimed_polls += 1;
                    if claimed_polls < CLAIMED_SPIN_POLLS {
                        std::thread::yield_now();
                    } else {
                        std::thread::sleep(CLAIMED_POLL_SLEEP);
                    }
                }
            }
        }
    }

    /// Reads one block synchronously through the pool and returns it pinned.
    pub fn read_buffer(
        &self,
        backend: &mut Backend,
        rel: RelId,
        block: u64,
        ring: Option<&mut BufferRing>,
    ) -> Result<PinnedBuffer<'_>, BufferError> {
        let mut pinned = self.pin(rel, block, ring)?;
        loop {
            match pinned {
                Pinned::Valid(id) => return Ok(PinnedBuffer { pool: self, id }),
                Pinned::InProgress(id) => match self.wait_for_buffer(backend, id) {
                    Ok(true) => pinned = Pinned::Valid(id),
                    Ok(false) => pinned = Pinned::NeedsRead(id),
                    Err(e) => {
                        self.unpin(id);
                        return Err(e);
                    }
                },
                Pinned::NeedsRead(id) => {
                    if let Err(e) = self.stage_read(backend, rel, block, &[id]) {
                        self.unpin(id);
                        return Err(e);
                    }
                    pinned = Pinned::InProgress(id);
                }
            }
        }
    }
}

/// A pin on a valid buffer, released on drop.
pub struct PinnedBuffer<'a> {
    pool: &'a BufferPool,
    id: BufferId,
}

impl PinnedBuffer<'_> {
    /// The buffer id.
    pub fn id(&self) -> BufferId {
        self.id
    }

    /// The page.
    pub fn page(&self) -> &[u8; BLCKSZ] {
        self.pool.page(self.id)
    }
}

impl Drop for PinnedBuffer<'_> {
    fn drop(&mut self) {
        self.pool.unpin(self.id);
    }
}

impl PoolInner {
    /// Remembers a page read past, dropping the oldest event beyond the log's capacity.
    fn log_damaged(
        &self,
        path: &str,
        block: u64,
        action: DamagedPageAction,
        verdict: &PageVerification,
    ) {
        let detail = match verdict {
            PageVerification::ChecksumMismatch { stored, computed } => {
                format!("calculated checksum {computed} but expected {stored}")
            }
            other => format!("{other}"),
        };
        let mut log = self.damaged.lock().unwrap_or_else(|p| p.into_inner());
        let seq = log.1;
        log.1 += 1;
        if log.0.len() == DAMAGED_PAGE_LOG_CAPACITY {
            log.0.pop_front();
        }
        log.0.push_back(DamagedPage {
            seq,
            path: path.to_string(),
            block,
            action,
            detail,
        });
    }
}

impl AioCallbacks for PoolInner {
    fn complete_shared(&self, io: &mut SharedCompletion<'_>) {
        let done = io.result.blocks_done as usize;
        let first = io.target.first_block;
        let path = io.target.path.clone();
        let status = io.result.status;
        let mut first_failure: Option<AioError> = None;
        // The handle data outlives `io`'s borrow, so iterating it needs no copy.
        let ids: &[u64] = io.handle_data;
        for (i, &id) in ids.iter().enumerate() {
            let desc = &self.descs[id as usize];
            if i >= done {
                // Not read: the caller re-issues (PARTIAL) or reports the error (ERROR).
                if status == IoStatus::Error {
                    desc.header.lock().unwrap_or_else(|p| p.into_inner()).error =
                        io.result.error.clone();
                    desc.flags.store(FLAG_IO_ERROR, Ordering::Release);
                } else {
                    desc.flags.store(0, Ordering::Release);
                }
                continue;
            }
            self.reads.fetch_add(1, Ordering::Relaxed);
            let blkno = first + i as u64;
            let Some(page) = io
                .block_mut(i)
                .and_then(|p| <&mut [u8; BLCKSZ]>::try_from(p).ok())
            else {
                desc.flags.store(FLAG_IO_ERROR, Ordering::Release);
                continue;
            };
            let verdict = verify_page(page, blkno as u32, self.check.checksums);
            if verdict.is_ok() {
                desc.flags.store(FLAG_VALID, Ordering::Release);
                continue;
            }
            self.verification_failures.fetch_add(1, Ordering::Relaxed);
            let is_checksum = matches!(verdict, PageVerification::ChecksumMismatch { .. });
            if self.check.zero_damaged_pages {
                page.fill(0);
                self.pages_zeroed.fetch_add(1, Ordering::Relaxed);
                self.log_damaged(&path, blkno, DamagedPageAction::Zeroed, &verdict);
                desc.flags.store(FLAG_VALID, Ordering::Release);
            } else if self.check.ignore_checksum_failure && is_checksum {
                self.log_damaged(&path, blkno, DamagedPageAction::UsedAnyway, &verdict);
                desc.flags.store(FLAG_VALID, Ordering::Release);
            } else {
                let error = AioError::InvalidPage {
                    path: path.clone(),
                    block: blkno,
                    detail: match &verdict {
                        PageVerification::ChecksumMismatch { stored, computed } => format!(
                            "page verification failed, calculated checksum {computed} but expected {stored}; \
                             set ignore_checksum_failure or zero_damaged_pages to read past it"
                        ),
                        other => format!("page verification failed: {other}"),
                    },
                };
                desc.header.lock().unwrap_or_else(|p| p.into_inner()).error = Some(error.clone());
                desc.flags.store(FLAG_IO_ERROR, Ordering::Release);
                if first_failure.is_none() {
                    first_failure = Some(error);
                }
            }
        }
        if let Some(e) = first_failure {
            io.result.status = IoStatus::Error;
            io.result.error = Some(e);
        }
    }
}
