//! Dirty buffers and flushing, once per io_method: the bytes on disk after a flush (sorted,
//! combined, each file synced once), a failed write that leaves its buffers dirty with the
//! error reported, a dirty victim written before its buffer is reused, and a page that
//! cannot change under another reader.

#[macro_use]
mod common;

use std::sync::Arc;

use pageio::aio::WriteStreamOptions;
use pageio::aio::{AioError, Fault, FaultPlan, IoBuffer, IoOp};
use pageio::buffer::{BufferError, BufferPool, PageCheckOptions, PinnedBuffer};
use pageio::config::{IoConfig, IoMethodKind, BLCKSZ};
use pageio::storage::RelFile;
use pageio::{Aio, Backend};

/// Each case ends in well under a second; 60 s means a hang.
const WATCHDOG_SECS: u64 = 60;

fn aio(method: IoMethodKind, shared_buffers_blocks: usize) -> Aio {
    let aio = Aio::new(IoConfig {
        io_method: method,
        shared_buffers_bytes: shared_buffers_blocks * BLCKSZ,
        ..IoConfig::default()
    })
    .unwrap_or_else(|e| panic!("{method}: {e}"));
    assert_eq!(aio.io_method(), method);
    aio
}

fn options() -> WriteStreamOptions {
    WriteStreamOptions {
        max_ios_in_flight: 4,
        combine_limit_blocks: 16,
    }
}

/// The bytes block `b` gets when modified: 64 bytes at offset 4000.
fn patch(b: u64) -> [u8; 64] {
    let mut p = [0u8; 64];
    for (i, x) in p.iter_mut().enumerate() {
        *x = (b as u8).wrapping_mul(31).wrapping_add(i as u8) | 1;
    }
    p
}

/// A relation of `nblocks` new (all-zero) pages, and the pool reading it.
fn setup(
    method: IoMethodKind,
    nblocks: u64,
    shared_buffers_blocks: usize,
) -> (tempfile::TempDir, Aio, Backend, BufferPool, RelFile) {
    let dir = tempfile::tempdir().unwrap();
    let aio = aio(method, shared_buffers_blocks);
    let mut backend = aio.backend().unwrap();
    let rel = RelFile::new(dir.path().join("16384"));
    backend
        .write_blocks(&rel, 0, IoBuffer::zeroed(nblocks as usize * BLCKSZ))
        .unwrap();
    let pool = BufferPool::new(&aio, PageCheckOptions::default()).unwrap();
    (dir, aio, backend, pool, rel)
}

fn modify(pool: &BufferPool, backend: &mut Backend, rel: &RelFile, blocks: &[u64]) {
    let id = pool.register(rel);
    for &b in blocks {
        let mut buffer = pool.read_buffer(backend, id, b, None).unwrap();
        buffer.modify(4000, &patch(b)).unwrap();
        assert!(pool.is_dirty(buffer.id()));
    }
}

/// The file's bytes: every block zero except the patched ones.
fn expected(nblocks: u64, patched: &[u64]) -> Vec<u8> {
    let mut v = vec![0u8; nblocks as usize * BLCKSZ];
    for &b in patched {
        let at = b as usize * BLCKSZ + 4000;
        v[at..at + 64].copy_from_slice(&patch(b));
    }
    v
}

fn dirty_count(pool: &BufferPool) -> usize {
    (0..pool.nbuffers()).filter(|&i| pool.is_dirty(i)).count()
}

/// The module's worked example: 5..=40 and 50 dirty → four writes, one fsync, no buffer
/// dirty after, the file holding exactly the changes; a second flush has nothing to do.
fn flush_writes_sorted_combined_and_syncs_once(method: IoMethodKind) {
    let (_dir, _aio, mut backend, pool, rel) = setup(method, 64, 256);
    let mut blocks: Vec<u64> = (5..=40).rev().collect();
    blocks.push(50);
    modify(&pool, &mut backend, &rel, &blocks);
    // Not on disk before the flush.
    assert_eq!(std::fs::read(rel.path()).unwrap(), expected(64, &[]));
    let stats = pool.flush_dirty(&mut backend, options()).unwrap();
    assert_eq!(stats.dirty_buffers, 37);
    assert_eq!(stats.buffers_written, 37);
    assert_eq!(stats.ios, 4, "{stats:?}");
    assert_eq!(stats.files_synced, 1);
    assert_eq!(dirty_count(&pool), 0);
    assert_eq!(std::fs::read(rel.path()).unwrap(), expected(64, &blocks));
    let again = pool.flush_dirty(&mut backend, options()).unwrap();
    assert_eq!(again, Default::default());
}

/// An injected EIO on block 20: the flush reports it (file, blocks, errno), the buffers of
/// that write stay dirty, and a later flush writes them.
fn a_failed_write_leaves_the_buffers_dirty(method: IoMethodKind) {
    let (_dir, aio, mut backend, pool, rel) = setup(method, 64, 256);
    let blocks: Vec<u64> = (0..40).collect();
    modify(&pool, &mut backend, &rel, &blocks);
    let plan =
        Arc::new(FaultPlan::new().on_block(IoOp::Writev, "16384", 20, Fault::Errno(libc::EIO), 1));
    aio.set_fault_injector(Some(plan.clone()));
    let err = pool.flush_dirty(&mut backend, options()).unwrap_err();
    assert_eq!(plan.fired(), 1);
    let BufferError::Io(AioError::Io { op, errno, target }) = &err else {
        panic!("{err:?}")
    };
    assert_eq!((*op, *errno), (IoOp::Writev, libc::EIO));
    assert_eq!((target.first_block, target.nblocks), (16, 16));
    assert!(
        err.to_string()
            .starts_with("could not write blocks 16..31 in file"),
        "{err}"
    );
    let id = pool.register(&rel);
    for b in 16..32 {
        let buffer: PinnedBuffer<'_> = pool.read_buffer(&mut backend, id, b, None).unwrap();
        assert!(pool.is_dirty(buffer.id()), "block {b} must stay dirty");
    }
    assert!(dirty_count(&pool) >= 16);
    aio.set_fault_injector(None);
    let stats = pool.flush_dirty(&mut backend, options()).unwrap();
    assert!(stats.buffers_written >= 16, "{stats:?}");
    assert_eq!(dirty_count(&pool), 0);
    assert_eq!(std::fs::read(rel.path()).unwrap(), expected(64, &blocks));
}

/// A pool of 16 buffers, 10 of them dirty, then 100 other blocks read: every dirty victim
/// is written before its buffer is reused, so the file holds every change without a flush.
fn a_dirty_victim_is_written_before_reuse(method: IoMethodKind) {
    let (_dir, _aio, mut backend, pool, rel) = setup(method, 128, 16);
    let blocks: Vec<u64> = (0..10).collect();
    modify(&pool, &mut backend, &rel, &blocks);
    let id = pool.register(&rel);
    for b in 20..120 {
        drop(pool.read_buffer(&mut backend, id, b, None).unwrap());
    }
    let (written, failed) = pool.victim_writes();
    assert_eq!((written, failed), (10, 0));
    assert_eq!(dirty_count(&pool), 0);
    assert_eq!(std::fs::read(rel.path()).unwrap(), expected(128, &blocks));
}

/// A dirty victim whose write fails is not reused (and its change not lost): the sweep
/// takes another buffer; once writes work, a flush writes it.
fn a_dirty_victim_that_cannot_be_written_is_kept(method: IoMethodKind) {
    let (dir, aio, mut backend, pool, rel) = setup(method, 128, 16);
    modify(&pool, &mut backend, &rel, &[3]);
    // Root ignores file modes, so make the write fail another way: move the file away and
    // put a directory in its place (opening it for writing fails with EISDIR).
    let moved = dir.path().join("elsewhere");
    std::fs::create_dir(&moved).unwrap();
    std::fs::rename(rel.path(), moved.join("16384")).unwrap();
    std::fs::create_dir(rel.path()).unwrap();
    aio.files().clear();
    // Drive the clock sweep with reads of another relation.
    let other = RelFile::new(dir.path().join("16385"));
    backend
        .write_blocks(&other, 0, IoBuffer::zeroed(64 * BLCKSZ))
        .unwrap();
    let other_id = pool.register(&other);
    for b in 0..40 {
        drop(pool.read_buffer(&mut backend, other_id, b, None).unwrap());
    }
    let (written, failed) = pool.victim_writes();
    assert_eq!(written, 0);
    assert!(failed >= 1, "the dirty victim's write was tried and failed");
    assert_eq!(dirty_count(&pool), 1, "the change is kept");
    // The file back in place: a flush writes the change.
    std::fs::remove_dir(rel.path()).unwrap();
    std::fs::rename(moved.join("16384"), rel.path()).unwrap();
    aio.files().clear();
    let stats = pool.flush_dirty(&mut backend, options()).unwrap();
    assert_eq!(stats.buffers_written, 1);
    assert_eq!(std::fs::read(rel.path()).unwrap(), expected(128, &[3]));
}

/// A page another thread has pinned cannot be modified (it may be reading it).
fn a_page_pinned_twice_cannot_be_modified(method: IoMethodKind) {
    let (_dir, _aio, mut backend, pool, rel) = setup(method, 4, 64);
    let id = pool.register(&rel);
    let first = pool.read_buffer(&mut backend, id, 1, None).unwrap();
    let second = pool.read_buffer(&mut backend, id, 1, None).unwrap();
    let err = pool.modify_page(first.id(), 0, &[1]).unwrap_err();
    assert!(matches!(err, BufferError::Busy { .. }), "{err:?}");
    assert!(!pool.is_dirty(first.id()));
    drop(second);
    pool.modify_page(first.id(), 100, &[7]).unwrap();
    assert_eq!(first.page()[100], 7);
    let err = pool.modify_page(first.id(), 8190, &[1, 2, 3]).unwrap_err();
    assert!(err.to_string().contains("do not fit"), "{err}");
}

per_method!(
    flush_writes_sorted_combined_and_syncs_once,
    a_failed_write_leaves_the_buffers_dirty,
    a_dirty_victim_is_written_before_reuse,
    a_dirty_victim_that_cannot_be_written_is_kept,
    a_page_pinned_twice_cannot_be_modified,
);
