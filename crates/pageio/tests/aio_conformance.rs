//! The AIO conformance suite: every I/O behaviour, run once per io_method.
//!
//! Each behaviour is one function taking the method; the `conformance!` macro at the bottom
//! instantiates all of them for `sync`, `worker` and `io_uring` (buffered), plus a direct-I/O
//! round for each method, so the three methods cannot drift apart.

mod common;

use std::sync::{Arc, Barrier};

use pageio::aio::{
    AioCallbacks, AioError, BatchHold, BlockRanges, Fault, FaultPlan, IoBuffer, IoOp, IoPipeline,
    IoStatus, IoTarget, PipelineDriver, PipelineIo, SharedCompletion, SubmitFault,
};
use pageio::config::{IoConfig, IoMethodKind, BLCKSZ};
use pageio::storage::{OpenMode, RelFile, StorageError};
use pageio::{Aio, Backend};
use tempfile::TempDir;

fn config(method: IoMethodKind) -> IoConfig {
    IoConfig {
        io_method: method,
        ..IoConfig::default()
    }
}

fn aio(method: IoMethodKind) -> Aio {
    let aio = Aio::new(config(method)).unwrap_or_else(|e| panic!("{method}: {e}"));
    assert_eq!(aio.io_method(), method, "no silent fallback");
    aio
}

/// Deterministic content of block `b` at generation `g`: every 8-byte word differs.
fn fill_block(out: &mut [u8], b: u64, g: u64) {
    for (i, w) in out.chunks_exact_mut(8).enumerate() {
        let v = b
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .wrapping_add(i as u64)
            .wrapping_add(g << 48);
        w.copy_from_slice(&v.to_le_bytes());
    }
}

fn image(nblocks: u64) -> Vec<u8> {
    let mut v = vec![0u8; nblocks as usize * BLCKSZ];
    for (b, chunk) in v.chunks_exact_mut(BLCKSZ).enumerate() {
        fill_block(chunk, b as u64, 0);
    }
    v
}

/// Creates `name` with `nblocks` blocks of the reference image, written through the AIO
/// subsystem itself.
fn make_rel(backend: &mut Backend, dir: &std::path::Path, name: &str, nblocks: u64) -> RelFile {
    let rel = RelFile::new(dir.join(name));
    backend
        .write_blocks(&rel, 0, IoBuffer::from_slice(&image(nblocks)))
        .unwrap();
    rel
}

/// Makes `plan` the subsystem's fault injector and returns it, to ask what fired.
fn inject(aio: &Aio, plan: FaultPlan) -> Arc<FaultPlan> {
    let plan = Arc::new(plan);
    aio.set_fault_injector(Some(plan.clone()));
    plan
}

/// Whether `target` covers `block`.
fn covers(target: &IoTarget, block: u64) -> bool {
    target.first_block <= block && block < target.first_block + target.nblocks as u64
}

/// Asserts that `err` is an EIO of a read covering `block`, and returns the read's target.
fn assert_read_eio_at(err: &AioError, block: u64) -> &IoTarget {
    match err {
        AioError::Io { op, errno, target } => {
            assert_eq!((*op, *errno), (IoOp::Readv, libc::EIO));
            assert!(covers(target, block), "{target}");
            target
        }
        other => panic!("expected an I/O error, got {other:?}"),
    }
}

/// Asserts that `err` is a read of `block` onward that got nothing (the end of the file, or
/// an injected empty read).
fn assert_nothing_read_at(err: &AioError, block: u64) {
    assert!(
        matches!(err, AioError::Short { target, bytes: 0, .. } if target.first_block == block),
        "{err:?}"
    );
}

/// A fresh subsystem for `method`, a backend of it, and relation `16384` of `nblocks`
/// blocks of the reference image written through it into a fresh directory (the guard,
/// returned first: keep it alive).
fn aio_with_rel(method: IoMethodKind, nblocks: u64) -> (TempDir, Aio, Backend, RelFile) {
    let dir = tempfile::tempdir().unwrap();
    let aio = aio(method);
    let mut backend = aio.backend().unwrap();
    let rel = make_rel(&mut backend, dir.path(), "16384", nblocks);
    (dir, aio, backend, rel)
}

fn stage_read(
    backend: &mut Backend,
    rel: &RelFile,
    block: u64,
    nblocks: u32,
) -> pageio::aio::WaitRef {
    try_stage_read(backend, rel, block, nblocks).unwrap()
}

/// Stages a read of `nblocks` blocks from `block` into a fresh owned buffer (what the test
/// pipeline drivers stage).
fn try_stage_read(
    backend: &mut Backend,
    rel: &RelFile,
    block: u64,
    nblocks: u32,
) -> Result<pageio::aio::WaitRef, AioError> {
    let (file, offset, target) = backend.locate(rel, block, nblocks, OpenMode::Read)?;
    backend.acquire()?.stage_read_owned(
        file,
        offset,
        IoBuffer::zeroed(nblocks as usize * BLCKSZ),
        target,
    )
}

fn writes_and_reads_land_the_right_bytes(method: IoMethodKind, direct: bool) {
    let dir = tempfile::tempdir().unwrap();
    let aio = Aio::new(IoConfig {
        direct_io: direct,
        ..config(method)
    })
    .unwrap();
    let mut backend = aio.backend().unwrap();
    // 70 blocks: more than four io_combine_limits, with a ragged tail.
    let rel = make_rel(&mut backend, dir.path(), "16384", 70);
    assert_eq!(std::fs::read(rel.path()).unwrap(), image(70));
    let back = backend
        .read_blocks(&rel, 0, IoBuffer::zeroed(70 * BLCKSZ))
        .unwrap();
    assert_eq!(back.as_slice(), &image(70)[..]);
    // Overwrite a middle range and read an unaligned window around it.
    let mut patch = IoBuffer::zeroed(3 * BLCKSZ);
    for (i, chunk) in patch.as_mut_slice().chunks_exact_mut(BLCKSZ).enumerate() {
        fill_block(chunk, 20 + i as u64, 1);
    }
    backend.write_blocks(&rel, 20, patch).unwrap();
    let window = backend
        .read_blocks(&rel, 18, IoBuffer::zeroed(7 * BLCKSZ))
        .unwrap();
    for (i, chunk) in window.as_slice().chunks_exact(BLCKSZ).enumerate() {
        let b = 18 + i as u64;
        let mut want = vec![0u8; BLCKSZ];
        fill_block(&mut want, b, u64::from((20..23).contains(&b)));
        assert_eq!(chunk, &want[..], "block {b}");
    }
    let c = backend.counters();
    assert_eq!(c.errors, 0);
    assert!(c.blocks >= 70 + 70 + 3 + 7, "{c:?}");
}

fn merging_happens_and_shows_in_counters(method: IoMethodKind) {
    let (dir, _aio, mut backend, rel) = aio_with_rel(method, 64);
    let other = make_rel(&mut backend, dir.path(), "16389", 64);
    let before = backend.counters();
    backend.enter_batch_mode();
    // Four contiguous reads of 4 blocks → one kernel I/O; then a gap, then another file.
    let mut refs: Vec<_> = (0..4)
        .map(|i| (stage_read(&mut backend, &rel, i * 4, 4), i * 4))
        .collect();
    refs.push((stage_read(&mut backend, &rel, 40, 4), 40));
    let other_ref = stage_read(&mut backend, &other, 0, 4);
    assert_eq!(
        backend.counters().ios_issued,
        before.ios_issued,
        "batch holds I/O back"
    );
    backend.exit_batch_mode();
    for (wref, first) in refs {
        let c = backend.wait(wref).expect("kept result");
        assert_eq!(c.result.status, IoStatus::Ok);
        assert_eq!(
            c.buffer.unwrap().as_slice(),
            &image(64)[first as usize * BLCKSZ..(first as usize + 4) * BLCKSZ]
        );
    }
    assert!(backend.wait(other_ref).unwrap().result.is_ok());
    let after = backend.counters();
    assert_eq!(after.ios_issued - before.ios_issued, 6);
    assert_eq!(after.kernel_ios - before.kernel_ios, 3, "{after:?}");
    assert_eq!(after.ios_merged - before.ios_merged, 3);
    assert_eq!(after.blocks - before.blocks, 24);
}

/// A batch entered with `BatchHold::Contiguous` (what read streams use) holds a read back
/// only while the next one continues it: contiguous reads still merge into one kernel I/O,
/// and a read anywhere else sends what is staged to the kernel at once.
fn contiguous_batches_send_other_reads_at_once(method: IoMethodKind) {
    let (dir, _aio, mut backend, rel) = aio_with_rel(method, 64);
    let other = make_rel(&mut backend, dir.path(), "16389", 64);
    let before = backend.counters();
    let issued = |backend: &Backend| backend.counters().ios_issued - before.ios_issued;
    backend.enter_batch_mode_with(BatchHold::Contiguous);
    let mut refs = vec![(stage_read(&mut backend, &rel, 0, 4), 0)];
    refs.push((stage_read(&mut backend, &rel, 4, 4), 4));
    assert_eq!(issued(&backend), 0, "contiguous reads wait to merge");
    refs.push((stage_read(&mut backend, &rel, 40, 4), 40));
    assert_eq!(issued(&backend), 2, "a gap sends the staged run at once");
    let other_ref = stage_read(&mut backend, &other, 0, 4);
    assert_eq!(issued(&backend), 3, "another file sends block 40 at once");
    backend.exit_batch_mode();
    assert_eq!(issued(&backend), 4);
    for (wref, first) in refs {
        let c = backend.wait(wref).expect("kept result");
        assert_eq!(c.result.status, IoStatus::Ok);
        assert_eq!(
            c.buffer.unwrap().as_slice(),
            &image(64)[first as usize * BLCKSZ..(first as usize + 4) * BLCKSZ]
        );
    }
    assert!(backend.wait(other_ref).unwrap().result.is_ok());
    let after = backend.counters();
    assert_eq!(after.kernel_ios - before.kernel_ios, 3, "{after:?}");
    assert_eq!(after.ios_merged - before.ios_merged, 1, "{after:?}");
    assert_eq!(after.blocks - before.blocks, 16);
    // A plain batch still holds everything back.
    let before = backend.counters();
    backend.enter_batch_mode();
    let a = stage_read(&mut backend, &rel, 0, 4);
    let b = stage_read(&mut backend, &rel, 40, 4);
    assert_eq!(backend.counters().ios_issued, before.ios_issued);
    backend.exit_batch_mode();
    assert!(backend.wait(a).unwrap().result.is_ok());
    assert!(backend.wait(b).unwrap().result.is_ok());
}

fn read_past_eof_is_partial_then_error(method: IoMethodKind) {
    let (_dir, _aio, mut backend, rel) = aio_with_rel(method, 10);
    let first = {
        let w = stage_read(&mut backend, &rel, 8, 4);
        backend.wait(w)
    }
    .unwrap();
    assert_eq!(first.result.status, IoStatus::Partial);
    assert_eq!(first.result.blocks_done, 2);
    assert_eq!(first.result.raw_result, 2 * BLCKSZ as i64);
    assert_eq!(
        &first.buffer.unwrap().as_slice()[..2 * BLCKSZ],
        &image(10)[8 * BLCKSZ..]
    );
    // The caller re-issues the rest, which lies wholly past the end.
    let rest = {
        let w = stage_read(&mut backend, &rel, 10, 2);
        backend.wait(w)
    }
    .unwrap();
    assert_eq!(rest.result.status, IoStatus::Error);
    let err = rest.result.error.unwrap();
    assert!(matches!(err, AioError::Short { bytes: 0, .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("blocks 10..11")
            && msg.contains("16384")
            && msg.contains("read only 0 of 16384 bytes"),
        "{msg}"
    );
    // The high-level read turns the same situation into one error naming the blocks.
    let err = backend
        .read_blocks(&rel, 8, IoBuffer::zeroed(4 * BLCKSZ))
        .unwrap_err();
    assert!(err.to_string().contains("blocks 10..11"), "{err}");
    let c = backend.counters();
    assert!(c.partials >= 2 && c.errors >= 2, "{c:?}");
}

fn injected_eio_is_a_typed_error_naming_file_and_block(method: IoMethodKind) {
    let (_dir, aio, mut backend, rel) = aio_with_rel(method, 32);
    let plan = inject(
        &aio,
        FaultPlan::new().on_block(IoOp::Readv, "16384", 21, Fault::Errno(libc::EIO), 1),
    );
    let err = backend
        .read_blocks(&rel, 0, IoBuffer::zeroed(32 * BLCKSZ))
        .unwrap_err();
    assert_eq!(plan.fired(), 1);
    assert!(assert_read_eio_at(&err, 21).path.ends_with("16384"));
    let msg = err.to_string();
    assert!(
        msg.contains("could not read blocks 16..31") && msg.contains("Input/output error"),
        "{msg}"
    );
    // Writes fail the same way.
    inject(
        &aio,
        FaultPlan::new().nth(IoOp::Writev, 1, Fault::Errno(libc::ENOSPC)),
    );
    let err = backend
        .write_blocks(&rel, 3, IoBuffer::zeroed(BLCKSZ))
        .unwrap_err();
    assert_eq!(err.errno(), Some(libc::ENOSPC));
    assert!(err.to_string().contains("could not write block 3"), "{err}");
    aio.set_fault_injector(None);
    // The fault fires after the kernel answered, so block 3 may hold the failed write (as
    // after a real EIO); every other block is intact.
    let back = backend
        .read_blocks(&rel, 0, IoBuffer::zeroed(32 * BLCKSZ))
        .unwrap();
    assert_eq!(back.as_slice()[..3 * BLCKSZ], image(32)[..3 * BLCKSZ]);
    assert_eq!(back.as_slice()[4 * BLCKSZ..], image(32)[4 * BLCKSZ..]);
}

fn injected_short_reads_are_partial_and_reissued(method: IoMethodKind) {
    let (_dir, aio, mut backend, rel) = aio_with_rel(method, 8);
    // Once: the read of blocks 0..7 stops after block 4 → PARTIAL(5); the re-issue works.
    inject(
        &aio,
        FaultPlan::new().on_block(IoOp::Readv, "16384", 5, Fault::Short { bytes: 0 }, 1),
    );
    let before = backend.counters();
    let back = backend
        .read_blocks(&rel, 0, IoBuffer::zeroed(8 * BLCKSZ))
        .unwrap();
    assert_eq!(back.as_slice(), &image(8)[..]);
    assert_eq!(backend.counters().partials - before.partials, 1);
    // Twice: the re-issued read of 5..7 gets nothing → ERROR naming block 5.
    inject(
        &aio,
        FaultPlan::new().on_block(IoOp::Readv, "16384", 5, Fault::Short { bytes: 0 }, 2),
    );
    let err = backend
        .read_blocks(&rel, 0, IoBuffer::zeroed(8 * BLCKSZ))
        .unwrap_err();
    assert_nothing_read_at(&err, 5);
    // A short read inside a block: 100 bytes of block 2 → PARTIAL with 2 whole blocks.
    inject(
        &aio,
        FaultPlan::new().nth(
            IoOp::Readv,
            1,
            Fault::Short {
                bytes: 2 * BLCKSZ + 100,
            },
        ),
    );
    let c = {
        let w = stage_read(&mut backend, &rel, 0, 4);
        backend.wait(w)
    }
    .unwrap();
    assert_eq!(
        (c.result.status, c.result.blocks_done),
        (IoStatus::Partial, 2)
    );
}

/// A shared callback that checks every block against the reference image, as the buffer
/// pool checks checksums: proves a flipped bit becomes an error naming file and block.
struct VerifyAgainstImage;

impl AioCallbacks for VerifyAgainstImage {
    fn complete_shared(&self, io: &mut SharedCompletion<'_>) {
        if io.op != IoOp::Readv || io.result.status != IoStatus::Ok {
            return;
        }
        let (path, first) = (io.target.path.clone(), io.target.first_block);
        for i in 0..io.target.nblocks as usize {
            let mut want = vec![0u8; BLCKSZ];
            fill_block(&mut want, first + i as u64, 0);
            let got = io.block_mut(i).expect("whole blocks");
            if got != &want[..] {
                let at = got.iter().zip(&want).position(|(a, b)| a != b).unwrap();
                io.result.status = IoStatus::Error;
                io.result.error = Some(AioError::InvalidPage {
                    path,
                    block: first + i as u64,
                    detail: format!("byte {at} differs"),
                });
                return;
            }
        }
    }
}

fn bit_flips_surface_through_the_shared_callback(method: IoMethodKind) {
    let (_dir, aio, mut backend, rel) = aio_with_rel(method, 16);
    let plan = inject(
        &aio,
        FaultPlan::new().on_block(
            IoOp::Readv,
            "16384",
            9,
            Fault::FlipBit {
                byte_offset: 4000,
                bit: 3,
            },
            1,
        ),
    );
    let (file, offset) = rel.locate(aio.files(), 8, 4, OpenMode::Read).unwrap();
    let mut h = backend.acquire().unwrap();
    h.set_callbacks(Arc::new(VerifyAgainstImage), &[8, 9, 10, 11]);
    let target = IoTarget {
        path: rel.display_name().clone(),
        first_block: 8,
        nblocks: 4,
    };
    let wref = h
        .stage_read_owned(file, offset, IoBuffer::zeroed(4 * BLCKSZ), target)
        .unwrap();
    let c = backend.wait(wref).unwrap();
    assert_eq!(plan.fired(), 1);
    assert_eq!(c.result.status, IoStatus::Error);
    let err = c.result.error.unwrap();
    assert!(
        matches!(err, AioError::InvalidPage { block: 9, .. }),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("block 9") && err.to_string().contains("byte 4000"),
        "{err}"
    );
    // The flip happened in memory only; the file is intact.
    assert_eq!(std::fs::read(rel.path()).unwrap(), image(16));
}

fn a_thread_waits_on_another_threads_io(method: IoMethodKind) {
    let (_dir, aio, mut owner, rel) = aio_with_rel(method, 64);
    for round in 0..50u64 {
        let wref = stage_read(&mut owner, &rel, (round % 4) * 16, 16);
        let barrier = Arc::new(Barrier::new(2));
        let waiter = {
            let aio = aio.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                // A backend of its own, waiting on the owner's I/O by reference.
                let mut other = aio.backend().unwrap();
                barrier.wait();
                assert!(other.wait(wref).is_none(), "results belong to the owner");
                assert!(aio.poll(wref));
            })
        };
        barrier.wait();
        waiter.join().unwrap();
        let c = owner.wait(wref).unwrap();
        assert!(c.result.is_ok());
        let first = ((round % 4) * 16) as usize;
        assert_eq!(
            c.buffer.unwrap().as_slice(),
            &image(64)[first * BLCKSZ..(first + 16) * BLCKSZ]
        );
    }
}

fn handle_exhaustion_does_not_deadlock(method: IoMethodKind) {
    let dir = tempfile::tempdir().unwrap();
    let aio = Aio::new(IoConfig {
        io_max_concurrency: 4,
        ..config(method)
    })
    .unwrap();
    let mut backend = aio.backend().unwrap();
    let rel = make_rel(&mut backend, dir.path(), "16384", 100);
    backend.enter_batch_mode();
    let refs: Vec<_> = (0..100)
        .map(|b| (stage_read(&mut backend, &rel, b, 1), b))
        .collect();
    backend.exit_batch_mode();
    assert!(backend.in_flight() <= 4);
    let reference = image(100);
    for (wref, b) in refs {
        let c = backend
            .wait(wref)
            .or_else(|| backend.take_completion(wref))
            .expect("kept");
        assert!(c.result.is_ok(), "{:?}", c.result);
        assert_eq!(
            c.buffer.unwrap().as_slice(),
            &reference[b as usize * BLCKSZ..(b as usize + 1) * BLCKSZ]
        );
    }
    assert_eq!(backend.idle_handles(), 4);
}

fn old_wait_ref_to_recycled_handle_returns_at_once(method: IoMethodKind) {
    let dir = tempfile::tempdir().unwrap();
    let aio = Aio::new(IoConfig {
        io_max_concurrency: 1,
        ..config(method)
    })
    .unwrap();
    let mut backend = aio.backend().unwrap();
    let rel = make_rel(&mut backend, dir.path(), "16384", 4);
    let old = stage_read(&mut backend, &rel, 0, 1);
    assert!(backend.wait(old).unwrap().result.is_ok());
    let new = stage_read(&mut backend, &rel, 1, 1);
    assert_eq!(new.handle_index(), old.handle_index(), "one handle, reused");
    assert!(new.generation() > old.generation());
    assert!(aio.poll(old), "recycled handle reads as done");
    let t = std::time::Instant::now();
    aio.wait(old);
    assert!(backend.wait(old).is_none());
    assert!(t.elapsed() < std::time::Duration::from_secs(1));
    assert!(backend.wait(new).unwrap().result.is_ok());
}

fn eight_threads_ten_thousand_random_ios_every_byte_checked(method: IoMethodKind) {
    const THREADS: u64 = 8;
    const IOS_PER_THREAD: u64 = 10_000;
    const SHARED_BLOCKS: u64 = 256;
    const PRIVATE_BLOCKS: u64 = 32;
    let dir = tempfile::tempdir().unwrap();
    let aio = aio(method);
    let rel = {
        let mut b = aio.backend().unwrap();
        make_rel(
            &mut b,
            dir.path(),
            "16384",
            SHARED_BLOCKS + THREADS * PRIVATE_BLOCKS,
        )
    };
    let reference = Arc::new(image(SHARED_BLOCKS));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let (aio, rel, reference) = (aio.clone(), rel.clone(), reference.clone());
            std::thread::spawn(move || {
                let mut backend = aio.backend().unwrap();
                let mine = SHARED_BLOCKS + t * PRIVATE_BLOCKS;
                // What this thread's private blocks hold: start with the image, then track
                // every write.
                let mut private = image(SHARED_BLOCKS + THREADS * PRIVATE_BLOCKS)
                    [mine as usize * BLCKSZ..(mine + PRIVATE_BLOCKS) as usize * BLCKSZ]
                    .to_vec();
                let mut rng = 0x2545_F491_4F6C_DD1Du64 ^ (t + 1);
                let mut next = || {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    rng
                };
                let mut checked_bytes = 0u64;
                for n in 0..IOS_PER_THREAD {
                    let r = next();
                    let len = 1 + r % 8;
                    match r % 3 {
                        0 | 1 => {
                            // Read shared or private range and check every byte.
                            let private_read = r % 3 == 1;
                            let (base, span) = if private_read {
                                (mine, PRIVATE_BLOCKS)
                            } else {
                                (0, SHARED_BLOCKS)
                            };
                            let start = next() % (span - len + 1);
                            let buf = backend
                                .read_blocks(
                                    &rel,
                                    base + start,
                                    IoBuffer::zeroed(len as usize * BLCKSZ),
                                )
                                .unwrap();
                            let want = if private_read {
                                &private[start as usize * BLCKSZ..(start + len) as usize * BLCKSZ]
                            } else {
                                &reference[start as usize * BLCKSZ..(start + len) as usize * BLCKSZ]
                            };
                            assert!(
                                buf.as_slice() == want,
                                "thread {t} io {n}: read of {len} blocks at {} differs",
                                base + start
                            );
                            checked_bytes += buf.len() as u64;
                        }
                        _ => {
                            let start = next() % (PRIVATE_BLOCKS - len + 1);
                            let mut buf = IoBuffer::zeroed(len as usize * BLCKSZ);
                            for (i, chunk) in
                                buf.as_mut_slice().chunks_exact_mut(BLCKSZ).enumerate()
                            {
                                fill_block(chunk, mine + start + i as u64, n + 1);
                            }
                            private[start as usize * BLCKSZ..(start + len) as usize * BLCKSZ]
                                .copy_from_slice(buf.as_slice());
                            backend.write_blocks(&rel, mine + start, buf).unwrap();
                        }
                    }
                }
                // Finally the private region as a whole.
                let all = backend
                    .read_blocks(
                        &rel,
                        mine,
                        IoBuffer::zeroed(PRIVATE_BLOCKS as usize * BLCKSZ),
                    )
                    .unwrap();
                assert!(
                    all.as_slice() == &private[..],
                    "thread {t}: private region differs"
                );
                checked_bytes + all.len() as u64
            })
        })
        .collect();
    let checked: u64 = threads.into_iter().map(|h| h.join().unwrap()).sum();
    assert!(checked > THREADS * IOS_PER_THREAD / 2 * BLCKSZ as u64);
    let c = aio.counters();
    assert_eq!(c.errors, 0);
    assert!(c.ios_issued >= THREADS * IOS_PER_THREAD, "{c:?}");
}

fn snapshot_shows_ios_in_flight_like_pg_aios(method: IoMethodKind) {
    let dir = tempfile::tempdir().unwrap();
    let aio = aio(method);
    let mut backend = aio.backend().unwrap();
    let rel = RelFile::in_data_dir(
        dir.path(),
        "base/16440/16456",
        pageio::storage::ForkNumber::Main,
    );
    std::fs::create_dir_all(dir.path().join("base/16440")).unwrap();
    backend
        .write_blocks(&rel, 0, IoBuffer::from_slice(&image(32)))
        .unwrap();
    backend.enter_batch_mode();
    let wref = stage_read(&mut backend, &rel, 16, 16);
    // Staged, not yet submitted: visible with its target description.
    let rows = aio.snapshot();
    assert_eq!(rows.len(), 1, "{rows:?}");
    let row = &rows[0];
    assert_eq!(row.state, "STAGED");
    assert_eq!(row.operation, "readv");
    assert_eq!(
        (row.off, row.length),
        (16 * BLCKSZ as u64, 16 * BLCKSZ as u64)
    );
    assert_eq!(
        row.target_desc,
        "blocks 16..31 in file \"base/16440/16456\""
    );
    assert_eq!(row.result, "UNKNOWN");
    assert!(row.f_buffered && row.f_localmem);
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    assert_eq!(row.pid, tid);
    backend.exit_batch_mode();
    // Completed but not reclaimed: COMPLETED_SHARED with its raw result.
    aio.wait(wref);
    let rows = aio.snapshot();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].state, "COMPLETED_SHARED");
    assert_eq!(rows[0].raw_result, Some(16 * BLCKSZ as i64));
    assert_eq!(rows[0].result, "OK");
    assert!(backend.wait(wref).is_some());
    assert!(aio.snapshot().is_empty());
}

fn direct_io_rejects_misaligned_memory(method: IoMethodKind) {
    let dir = tempfile::tempdir().unwrap();
    let aio = Aio::new(IoConfig {
        direct_io: true,
        ..config(method)
    })
    .unwrap();
    let mut backend = aio.backend().unwrap();
    let rel = make_rel(&mut backend, dir.path(), "16384", 4);
    let (file, offset) = rel.locate(aio.files(), 0, 1, OpenMode::Read).unwrap();
    assert!(file.is_direct());
    let mut mem = IoBuffer::zeroed(2 * BLCKSZ);
    // SAFETY: 513 bytes into a buffer of two blocks stays inside it.
    let misaligned = unsafe { mem.as_mut_ptr().add(512 + 1) };
    let iov = libc::iovec {
        iov_base: misaligned.cast(),
        iov_len: BLCKSZ,
    };
    let target = IoTarget {
        path: rel.display_name().clone(),
        first_block: 0,
        nblocks: 1,
    };
    let handle = backend.acquire().unwrap();
    // SAFETY: the staging is refused before any I/O starts (the memory is misaligned), and
    // `mem` outlives the call anyway.
    let err = unsafe { handle.stage(IoOp::Readv, file, offset, &[iov], target) }.unwrap_err();
    match &err {
        AioError::Storage(e) => assert!(matches!(**e, StorageError::Misaligned { .. }), "{e:?}"),
        other => panic!("{other:?}"),
    }
    assert!(
        err.to_string().contains("direct I/O") && err.to_string().contains("16384"),
        "{err}"
    );
    // The refused handle went back to the pool.
    assert_eq!(backend.idle_handles(), aio.config().io_max_concurrency);
    drop(mem);
}

fn concurrent_backend_registration_never_shares_a_slot(method: IoMethodKind) {
    let aio = aio(method);
    // Free slots exist once backends have come and gone; then many threads register at once.
    for round in 0..50 {
        drop((0..8).map(|_| aio.backend().unwrap()).collect::<Vec<_>>());
        let barrier = Arc::new(Barrier::new(8));
        let ids: Vec<u32> = (0..8)
            .map(|_| {
                let (aio, barrier) = (aio.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    let b = aio.backend().unwrap();
                    let id = b.id();
                    // Hold the slot until every thread has registered.
                    barrier.wait();
                    id
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().unwrap())
            .collect();
        let mut unique = ids.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(
            unique.len(),
            ids.len(),
            "round {round}: slots shared: {ids:?}"
        );
    }
}

/// Seconds any one conformance test may take before the watchdog fails it: the slowest (eight
/// threads × 10,000 I/Os) takes a few seconds on 2 cores; a hang is caught well before the
/// harness would notice.
const WATCHDOG_SECS: u64 = 120;

/// Runs a conformance case under the watchdog, named after the method and the case.
fn watched(name: &str, method: IoMethodKind, case: fn(IoMethodKind)) {
    common::with_watchdog(&format!("{method}:{name}"), WATCHDOG_SECS, move || {
        case(method)
    });
}

/// After a failed request, nothing of it may be left behind: no handle in flight, every
/// handle idle, and the backend still able to do I/O.
fn assert_nothing_pending(backend: &Backend, aio: &Aio) {
    assert_eq!(backend.in_flight(), 0, "I/O left in flight");
    assert_eq!(backend.idle_handles(), aio.config().io_max_concurrency);
    assert!(aio.snapshot().is_empty(), "{:?}", aio.snapshot());
}

/// The README's own example on a file that does not exist: it used to spin forever.
fn block_numbers_past_max_block_number_are_refused_never_wrapped(method: IoMethodKind) {
    let (_dir, _aio, mut backend, rel) = aio_with_rel(method, 4);
    let before = rel_bytes(&rel);
    // 1 << 49 is a multiple of the segment size whose low 32 bits are 0: wrapped, it is
    // block 0. u64::MAX - 1 overflows any sum.
    for block in [
        1u64 << 49,
        1 << 32,
        pageio::storage::MAX_BLOCK_NUMBER,
        u64::MAX - 1,
    ] {
        let buf = IoBuffer::zeroed(2 * BLCKSZ);
        let e = backend
            .read_blocks(&rel, block, buf)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("reaches past block 4294967294"),
            "{method} read at {block}: {e}"
        );
        let buf = IoBuffer::from_slice(&[0xAB; 2 * BLCKSZ]);
        let e = backend
            .write_blocks(&rel, block, buf)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("reaches past block 4294967294"),
            "{method} write at {block}: {e}"
        );
    }
    assert_eq!(rel_bytes(&rel), before, "{method}: nothing was written");
    assert_nothing_pending(&backend, &_aio);
}

fn non_regular_relation_files_are_refused_not_read(method: IoMethodKind) {
    let dir = tempfile::tempdir().unwrap();
    let aio = aio(method);
    let mut backend = aio.backend().unwrap();
    let fifo = dir.path().join("fifo");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: c is a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let zero = dir.path().join("zero");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    let subdir = dir.path().join("subdir");
    std::fs::create_dir(&subdir).unwrap();
    let socket = dir.path().join("socket");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let dangling = dir.path().join("dangling");
    std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
    let looping = dir.path().join("looping");
    std::os::unix::fs::symlink(&looping, &looping).unwrap();
    // A sparse file of 2^40 bytes: more than a segment can be.
    let huge = dir.path().join("huge");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(1 << 40)
        .unwrap();
    for (path, what) in [
        (&fifo, "it is a FIFO, not a regular file"),
        (&zero, "it is a character device, not a regular file"),
        (&subdir, "it is a directory, not a regular file"),
        (&socket, "it is a socket, not a regular file"),
        (&dangling, "No such file or directory"),
        (&looping, "Too many levels of symbolic links"),
        (&huge, "is 1099511627776 bytes, more than a segment's"),
    ] {
        let rel = RelFile::new(path.clone());
        let e = backend
            .read_blocks(&rel, 0, IoBuffer::zeroed(BLCKSZ))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(what) && e.contains(path.to_str().unwrap()),
            "{method} read {what}: {e}"
        );
        if path != &dangling {
            // (A write through a dangling link creates its target, as PostgreSQL's would.)
            let e = backend
                .write_blocks(&rel, 0, IoBuffer::from_slice(&[1; BLCKSZ]))
                .unwrap_err()
                .to_string();
            assert!(e.contains(what), "{method} write {what}: {e}");
        }
        let e = rel.nblocks().unwrap_err().to_string();
        assert!(e.contains(what), "{method} nblocks {what}: {e}");
    }
    assert_eq!(std::fs::metadata(&huge).unwrap().len(), 1 << 40);
    assert_nothing_pending(&backend, &aio);
}

/// A relation path that another process swaps between a regular file and a FIFO (by
/// rename, so each is whole) is read or refused, never waited on: the type is checked on
/// the descriptor, which was opened without blocking.
fn a_file_swapped_for_a_fifo_is_refused_not_waited_on(method: IoMethodKind) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("16384");
    let regular = dir.path().join("regular");
    std::fs::write(&regular, vec![7u8; BLCKSZ]).unwrap();
    let fifo = dir.path().join("fifo");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: c is a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    std::fs::hard_link(&regular, &path).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapper = {
        let (path, regular, fifo, stop) =
            (path.clone(), regular.clone(), fifo.clone(), stop.clone());
        std::thread::spawn(move || {
            let staged = path.with_extension("staged");
            let mut swaps = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let from = if swaps.is_multiple_of(2) {
                    &fifo
                } else {
                    &regular
                };
                let _ = std::fs::remove_file(&staged);
                std::fs::hard_link(from, &staged).unwrap();
                std::fs::rename(&staged, &path).unwrap();
                swaps += 1;
            }
            swaps
        })
    };
    let (mut read, mut refused) = (0u32, 0u32);
    for _ in 0..200 {
        // A new engine each time: the file cache would otherwise keep the first descriptor.
        let aio = aio(method);
        let mut backend = aio.backend().unwrap();
        let rel = RelFile::new(path.clone());
        match backend.read_blocks(&rel, 0, IoBuffer::zeroed(BLCKSZ)) {
            Ok(buf) => {
                assert!(buf.as_slice().iter().all(|&b| b == 7), "{method}");
                read += 1;
            }
            Err(e) => {
                assert!(e.to_string().contains("it is a FIFO"), "{method}: {e}");
                refused += 1;
            }
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    // Both kinds were met (the swapper runs all the time, so 200 opens see each often).
    assert!(
        swaps > 0 && read > 0 && refused > 0 && read + refused == 200,
        "{method}: {swaps} swaps, {read} read, {refused} refused"
    );
}

/// Every byte of the relation's files, in segment order.
fn rel_bytes(rel: &RelFile) -> Vec<u8> {
    std::fs::read(rel.path()).unwrap()
}

fn read_of_a_missing_file_is_an_error_not_a_hang(method: IoMethodKind) {
    let dir = tempfile::tempdir().unwrap();
    let aio = aio(method);
    let mut backend = aio.backend().unwrap();
    let rel = RelFile::new(dir.path().join("missing"));
    let err = backend
        .read_blocks(&rel, 0, IoBuffer::zeroed(64 * BLCKSZ))
        .unwrap_err();
    assert_eq!(err.errno(), Some(libc::ENOENT), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("could not open file") && msg.contains("missing"),
        "{msg}"
    );
    assert_nothing_pending(&backend, &aio);
    // The first range of a longer request failing to open is the same error, not a hang.
    let err = backend
        .write_blocks(
            &RelFile::new(dir.path().join("no/such/dir/16384")),
            0,
            IoBuffer::zeroed(40 * BLCKSZ),
        )
        .unwrap_err();
    assert_eq!(err.errno(), Some(libc::ENOENT), "{err:?}");
    assert_nothing_pending(&backend, &aio);
}

/// Restores the thread's file-system uid (root's) when dropped.
struct FsUidGuard(Option<libc::uid_t>);

impl Drop for FsUidGuard {
    fn drop(&mut self) {
        if let Some(uid) = self.0 {
            // SAFETY: setfsuid has no memory-safety preconditions; it affects this thread.
            unsafe { libc::setfsuid(uid) };
        }
    }
}

/// `pageio gen` / `io-bench --dir D` with D existing but not writable used to busy-loop.
fn write_into_an_unwritable_directory_is_an_error_not_a_hang(method: IoMethodKind) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let locked = dir.path().join("datasets");
    std::fs::create_dir(&locked).unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o555)).unwrap();
    let aio = aio(method);
    let mut backend = aio.backend().unwrap();
    // Root ignores directory permissions; a file-system uid of nobody (this thread only —
    // files are opened by the thread that stages the I/O) makes them count.
    // SAFETY: geteuid/setfsuid have no memory-safety preconditions.
    let _fsuid = FsUidGuard(
        (unsafe { libc::geteuid() } == 0).then(|| unsafe { libc::setfsuid(65534) } as libc::uid_t),
    );
    let rel = RelFile::new(locked.join("16384"));
    let err = backend
        .write_blocks(&rel, 0, IoBuffer::from_slice(&image(48)))
        .unwrap_err();
    assert_eq!(err.errno(), Some(libc::EACCES), "{err:?}");
    assert!(
        err.to_string().contains("datasets/16384"),
        "names the file: {err}"
    );
    assert_nothing_pending(&backend, &aio);
    assert!(!locked.join("16384").exists(), "nothing written");
}

/// An EIO in the middle of a 600-block request: the error names the failing range, the
/// ranges already in flight are waited for, and nothing is left pending.
fn an_error_in_the_middle_of_a_long_request_stops_it_cleanly(method: IoMethodKind) {
    let (_dir, aio, mut backend, rel) = aio_with_rel(method, 600);
    let plan = inject(
        &aio,
        FaultPlan::new().on_block(IoOp::Readv, "16384", 300, Fault::Errno(libc::EIO), 1),
    );
    let before = backend.counters();
    let err = backend
        .read_blocks(&rel, 0, IoBuffer::zeroed(600 * BLCKSZ))
        .unwrap_err();
    assert_eq!(plan.fired(), 1);
    assert_read_eio_at(&err, 300);
    assert!(err.to_string().contains("Input/output error"), "{err}");
    assert_eq!(backend.counters().errors - before.errors, 1);
    assert_nothing_pending(&backend, &aio);
    // Writes stop the same way.
    inject(
        &aio,
        FaultPlan::new().on_block(IoOp::Writev, "16384", 450, Fault::Errno(libc::ENOSPC), 1),
    );
    let err = backend
        .write_blocks(&rel, 0, IoBuffer::from_slice(&image(600)))
        .unwrap_err();
    assert_eq!(err.errno(), Some(libc::ENOSPC), "{err:?}");
    assert!(err.target().is_some_and(|t| covers(t, 450)));
    assert_nothing_pending(&backend, &aio);
    aio.set_fault_injector(None);
    let back = backend
        .read_blocks(&rel, 0, IoBuffer::zeroed(600 * BLCKSZ))
        .unwrap();
    assert!(
        back.as_slice() == &image(600)[..],
        "the backend still reads"
    );
}

/// Short reads in a long request: re-issued (and then complete), or — when the re-issue
/// gets nothing — an error naming the first missing block; a request past the end of the
/// file names the blocks that are not there.
fn partial_reads_in_a_long_request_are_reissued_or_named(method: IoMethodKind) {
    let (_dir, aio, mut backend, rel) = aio_with_rel(method, 200);
    // Three ranges come back short once each; every rest is re-issued and succeeds.
    let plan = inject(
        &aio,
        FaultPlan::new()
            .on_block(IoOp::Readv, "16384", 37, Fault::Short { bytes: 0 }, 1)
            .on_block(IoOp::Readv, "16384", 101, Fault::Short { bytes: 100 }, 1)
            .on_block(IoOp::Readv, "16384", 190, Fault::Short { bytes: 0 }, 1),
    );
    let before = backend.counters();
    let back = backend
        .read_blocks(&rel, 0, IoBuffer::zeroed(200 * BLCKSZ))
        .unwrap();
    assert_eq!(plan.fired(), 3);
    assert!(back.as_slice() == &image(200)[..]);
    assert_eq!(backend.counters().partials - before.partials, 3);
    assert_nothing_pending(&backend, &aio);
    // Block 101 never arrives: the re-issue of 101.. gets nothing either.
    inject(
        &aio,
        FaultPlan::new().on_block(IoOp::Readv, "16384", 101, Fault::Short { bytes: 0 }, 2),
    );
    let err = backend
        .read_blocks(&rel, 0, IoBuffer::zeroed(200 * BLCKSZ))
        .unwrap_err();
    assert_nothing_read_at(&err, 101);
    assert_nothing_pending(&backend, &aio);
    aio.set_fault_injector(None);
    // A real end of file in the middle of the request.
    let err = backend
        .read_blocks(&rel, 150, IoBuffer::zeroed(100 * BLCKSZ))
        .unwrap_err();
    assert_nothing_read_at(&err, 200);
    assert!(err.to_string().contains("16384"), "{err}");
    assert_nothing_pending(&backend, &aio);
}

/// A fault injector that panics on one I/O, as a buggy shared callback would.
struct PanicOnBlock(u64);

impl pageio::aio::FaultInjector for PanicOnBlock {
    fn inject(&self, _op: IoOp, target: &IoTarget) -> Option<Fault> {
        let range = target.first_block..target.first_block + target.nblocks as u64;
        if range.contains(&self.0) {
            panic!("injected panic at block {}", self.0);
        }
        None
    }
}

/// A panic in completion (in whichever thread completes the I/O) fails that I/O with an
/// error naming it; the request stops cleanly and the memory and the backend stay usable.
fn a_panicking_completion_fails_the_io_and_leaves_nothing_pending(method: IoMethodKind) {
    let (_dir, aio, mut backend, rel) = aio_with_rel(method, 100);
    aio.set_fault_injector(Some(Arc::new(PanicOnBlock(70))));
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        backend.read_blocks(&rel, 0, IoBuffer::zeroed(100 * BLCKSZ))
    }));
    let err = outcome
        .expect("the panic is turned into an I/O error")
        .unwrap_err();
    match &err {
        AioError::CallbackPanicked { target, message } => {
            assert!(covers(target, 70));
            assert_eq!(message, "injected panic at block 70");
        }
        other => panic!("expected CallbackPanicked, got {other:?}"),
    }
    assert!(err.to_string().contains("panicked"), "{err}");
    assert_nothing_pending(&backend, &aio);
    aio.set_fault_injector(None);
    let back = backend
        .read_blocks(&rel, 0, IoBuffer::zeroed(100 * BLCKSZ))
        .unwrap();
    assert!(back.as_slice() == &image(100)[..]);
    // Under worker the panic ran on an I/O worker: the pool is still whole.
    assert_eq!(aio.counters().errors, 1);
}

/// A pipeline driver that reads 4-block ranges into borrowed memory and panics when the
/// second completion arrives — while the other ranges are still in flight.
struct PanickingDriver<'a> {
    rel: &'a RelFile,
    memory: &'a mut [u8],
    ranges: BlockRanges,
    completed: usize,
}

impl PipelineDriver for PanickingDriver<'_> {
    type Tag = ();

    fn next_io(&mut self, _backend: &mut Backend) -> Option<PipelineIo<()>> {
        self.ranges.next()
    }

    fn stage(
        &mut self,
        backend: &mut Backend,
        io: &PipelineIo<()>,
    ) -> Result<pageio::aio::WaitRef, AioError> {
        let (file, offset, target) =
            backend.locate(self.rel, io.first_block, io.nblocks, OpenMode::Read)?;
        let at = io.first_block as usize * BLCKSZ;
        let iov = libc::iovec {
            iov_base: self.memory[at..at + io.nblocks as usize * BLCKSZ]
                .as_mut_ptr()
                .cast(),
            iov_len: io.nblocks as usize * BLCKSZ,
        };
        let mut handle = backend.acquire()?;
        handle.keep_result();
        // SAFETY: `memory` outlives the pipeline run, which waits for every I/O before it
        // returns or unwinds; nothing touches it meanwhile.
        unsafe { handle.stage(IoOp::Readv, file, offset, &[iov], target) }
    }

    fn complete(
        &mut self,
        _io: &PipelineIo<()>,
        completion: pageio::aio::IoCompletion,
    ) -> Result<(), AioError> {
        assert!(completion.result.is_ok());
        self.completed += 1;
        if self.completed == 2 {
            panic!("driver panicked with I/O in flight");
        }
        Ok(())
    }
}

/// The pipeline's guard: a panic while I/Os into borrowed memory are in flight unwinds only
/// after every one of them has completed, so the memory is never freed under the kernel.
fn a_panicking_pipeline_driver_unwinds_only_after_its_ios_end(method: IoMethodKind) {
    let (_dir, aio, mut backend, rel) = aio_with_rel(method, 64);
    let mut memory = vec![0u8; 64 * BLCKSZ];
    let mut driver = PanickingDriver {
        rel: &rel,
        memory: &mut memory,
        ranges: BlockRanges::new(0, 64, 4),
        completed: 0,
    };
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        IoPipeline::new(16).run(&mut backend, &mut driver)
    }));
    let panic = outcome.expect_err("the driver's panic reaches the caller");
    assert_eq!(
        panic.downcast_ref::<&str>(),
        Some(&"driver panicked with I/O in flight")
    );
    assert_eq!(
        driver.ranges.next_block(),
        64,
        "all sixteen ranges were staged"
    );
    // Every range staged was waited for before the unwind passed: all bytes are there.
    assert_nothing_pending(&backend, &aio);
    assert!(
        memory == image(64),
        "every staged read landed before the unwind"
    );
    // And the backend is not stuck in batch mode: a lone staged read goes out at once.
    let wref = stage_read(&mut backend, &rel, 0, 1);
    assert!(aio.snapshot().iter().all(|row| row.state != "STAGED"));
    assert!(backend.wait(wref).unwrap().result.is_ok());
}

/// Stages one-block reads of blocks 0, 2, 4, 6 in one batch: four kernel I/Os (nothing to
/// merge), four SQEs under io_uring, submitted together when the batch ends.
fn stage_four_separate_reads(backend: &mut Backend, rel: &RelFile) -> Vec<pageio::aio::WaitRef> {
    backend.enter_batch_mode();
    (0..4).map(|i| stage_read(backend, rel, i * 2, 1)).collect()
}

/// Stages [`stage_four_separate_reads`], submits them and returns their outcomes.
fn read_four_separately(backend: &mut Backend, rel: &RelFile) -> Vec<(IoStatus, Option<i32>)> {
    let refs = stage_four_separate_reads(backend, rel);
    backend.exit_batch_mode();
    outcomes(backend, &refs)
}

/// A plan that refuses the next `times` submissions (`io_uring_enter`) with `errno`.
fn refuse_submissions(errno: i32, times: u64) -> FaultPlan {
    FaultPlan::new().on_submit(SubmitFault::Errno(errno), times)
}

/// The outcome of each of `refs`, in order: the status and the errno.
fn outcomes(backend: &mut Backend, refs: &[pageio::aio::WaitRef]) -> Vec<(IoStatus, Option<i32>)> {
    refs.iter()
        .map(|&wref| {
            let c = backend.wait(wref).expect("kept result");
            (c.result.status, c.result.error.and_then(|e| e.errno()))
        })
        .collect()
}

/// A refused `io_uring_enter` (injected through the fault plan, after the SQEs are really in
/// the ring) fails the I/Os with its errno instead of leaving them pending; transient
/// refusals are retried within a bound; a partial submission submits the rest or fails
/// exactly the SQEs the kernel did not take; and the backend goes on working afterwards.
/// Sync and worker submit without a system call and never consult the hook.
fn refused_submissions_fail_the_ios_with_the_errno(method: IoMethodKind) {
    use pageio::aio::method::uring::MAX_SUBMIT_ATTEMPTS;
    let (_dir, aio, mut backend, rel) = aio_with_rel(method, 8);
    let uring = method == IoMethodKind::IoUring;
    let ok = (IoStatus::Ok, None);
    let failed = |errno| (IoStatus::Error, Some(errno));

    // A hard error: every I/O of the batch fails with it, at once.
    let plan = inject(&aio, refuse_submissions(libc::EINVAL, 1));
    let got = read_four_separately(&mut backend, &rel);
    if uring {
        assert_eq!(got, vec![failed(libc::EINVAL); 4]);
        assert_eq!(plan.fired(), 1);
        // The error names file and block like any I/O error.
        let wref = {
            let refs = stage_four_separate_reads(&mut backend, &rel);
            inject(&aio, refuse_submissions(libc::EINVAL, 1));
            backend.exit_batch_mode();
            refs
        };
        let c = backend.wait(wref[1]).unwrap();
        let msg = c.result.error.unwrap().to_string();
        assert!(
            msg.contains("could not read block 2 in file") && msg.contains("Invalid argument"),
            "{msg}"
        );
        for &other in &wref {
            backend.wait(other);
        }
    } else {
        assert_eq!(got, vec![ok; 4]);
        assert_eq!(plan.fired(), 0, "{method} has no submission system call");
    }
    assert_nothing_pending(&backend, &aio);

    // Transient refusals are retried: three EAGAINs, then the kernel takes the batch.
    let plan = inject(&aio, refuse_submissions(libc::EAGAIN, 3));
    assert_eq!(read_four_separately(&mut backend, &rel), vec![ok; 4]);
    assert_eq!(plan.fired(), if uring { 3 } else { 0 });

    // A refusal that persists is retried a bounded number of times, then fails the I/Os.
    let plan = inject(&aio, refuse_submissions(libc::EBUSY, 1000));
    let got = read_four_separately(&mut backend, &rel);
    if uring {
        assert_eq!(got, vec![failed(libc::EBUSY); 4]);
        assert_eq!(plan.fired(), MAX_SUBMIT_ATTEMPTS as u64);
    } else {
        assert_eq!(got, vec![ok; 4]);
    }
    assert_nothing_pending(&backend, &aio);

    // The kernel takes one SQE, then (no more faults) the rest.
    inject(
        &aio,
        FaultPlan::new().on_submit(SubmitFault::Partial { submitted: 1 }, 1),
    );
    assert_eq!(read_four_separately(&mut backend, &rel), vec![ok; 4]);

    // The kernel takes two SQEs, then refuses: exactly the two it never saw fail.
    inject(
        &aio,
        FaultPlan::new()
            .on_submit(SubmitFault::Partial { submitted: 2 }, 1)
            .on_submit(SubmitFault::Errno(libc::ENOMEM), 1),
    );
    let got = read_four_separately(&mut backend, &rel);
    if uring {
        assert_eq!(
            got,
            vec![ok, ok, failed(libc::ENOMEM), failed(libc::ENOMEM)]
        );
    } else {
        assert_eq!(got, vec![ok; 4]);
    }
    assert_nothing_pending(&backend, &aio);

    // A kernel that keeps taking nothing: bounded, then EAGAIN.
    inject(
        &aio,
        FaultPlan::new().on_submit(SubmitFault::Partial { submitted: 0 }, 1000),
    );
    let got = read_four_separately(&mut backend, &rel);
    if uring {
        assert_eq!(got, vec![failed(libc::EAGAIN); 4]);
    } else {
        assert_eq!(got, vec![ok; 4]);
    }

    // Afterwards the backend reads normally (under io_uring, on a fresh ring).
    aio.set_fault_injector(None);
    let back = backend
        .read_blocks(&rel, 0, IoBuffer::zeroed(8 * BLCKSZ))
        .unwrap();
    assert_eq!(back.as_slice(), &image(8)[..]);
    assert_nothing_pending(&backend, &aio);
}

/// Another thread waits on I/O the owner has only staged; the owner's submission is then
/// refused. The waiter must return (the I/O failed) instead of sleeping in the kernel for a
/// completion of an SQE that never reached it — and when the owner's submission works, the
/// waiter returns as soon as the read is done.
fn a_waiter_on_an_unsubmitted_io_returns(method: IoMethodKind) {
    let (_dir, aio, mut owner, rel) = aio_with_rel(method, 8);
    for refuse in [true, false] {
        if refuse {
            inject(&aio, refuse_submissions(libc::EINVAL, 1));
        } else {
            aio.set_fault_injector(None);
        }
        let refs = stage_four_separate_reads(&mut owner, &rel);
        let started = Arc::new(Barrier::new(2));
        let waiter = {
            let (aio, started, wref) = (aio.clone(), started.clone(), refs[3]);
            std::thread::spawn(move || {
                started.wait();
                // Nothing is in the kernel yet: the I/O is staged in the owner's batch.
                aio.wait(wref);
                assert!(aio.poll(wref));
            })
        };
        started.wait();
        std::thread::sleep(std::time::Duration::from_millis(30));
        owner.exit_batch_mode();
        waiter.join().unwrap();
        let got = outcomes(&mut owner, &refs);
        let want = if refuse && method == IoMethodKind::IoUring {
            (IoStatus::Error, Some(libc::EINVAL))
        } else {
            (IoStatus::Ok, None)
        };
        assert_eq!(got, vec![want; 4], "refuse={refuse}");
    }
    aio.set_fault_injector(None);
    assert_nothing_pending(&owner, &aio);
}

/// Reads two 8-block ranges of a 4-block file into owned buffers; staging the second fails.
struct FailsToStageSecond<'a> {
    rel: &'a RelFile,
    ranges: BlockRanges,
}

impl PipelineDriver for FailsToStageSecond<'_> {
    type Tag = ();

    fn next_io(&mut self, _backend: &mut Backend) -> Option<PipelineIo<()>> {
        self.ranges.next()
    }

    fn stage(
        &mut self,
        backend: &mut Backend,
        io: &PipelineIo<()>,
    ) -> Result<pageio::aio::WaitRef, AioError> {
        if io.first_block == 8 {
            return Err(AioError::InvalidRequest("cannot stage block 8".into()));
        }
        try_stage_read(backend, self.rel, io.first_block, io.nblocks)
    }

    fn complete(
        &mut self,
        _io: &PipelineIo<()>,
        completion: pageio::aio::IoCompletion,
    ) -> Result<(), AioError> {
        match completion.result.status {
            IoStatus::Ok | IoStatus::Partial => Ok(()),
            _ => Err(completion.result.error.unwrap()),
        }
    }
}

/// The pipeline reports the error a sequential reader would meet first: blocks 0..7 of a
/// 4-block file come back PARTIAL after staging 8..15 already failed; the rest, 4..7, is
/// still re-issued (it lies below the error) and its end of file is what is returned.
fn the_pipeline_reports_the_lowest_error(method: IoMethodKind) {
    let (_dir, aio, mut backend, rel) = aio_with_rel(method, 4);
    let mut driver = FailsToStageSecond {
        rel: &rel,
        ranges: BlockRanges::new(0, 16, 8),
    };
    let err = IoPipeline::new(4)
        .run(&mut backend, &mut driver)
        .unwrap_err();
    assert_nothing_read_at(&err, 4);
    assert_eq!(backend.counters().partials, 1);
    assert_nothing_pending(&backend, &aio);
}

/// Delays the completion of any I/O covering block 0 by [`SLOW_IO`], in whichever thread
/// completes it (an I/O worker under worker: a slow device read).
struct SlowBlockZero;

/// How long [`SlowBlockZero`] holds its I/O: long against a cached 8 kB read.
const SLOW_IO: std::time::Duration = std::time::Duration::from_millis(400);

impl pageio::aio::FaultInjector for SlowBlockZero {
    fn inject(&self, _op: IoOp, target: &IoTarget) -> Option<pageio::aio::Fault> {
        if covers(target, 0) {
            std::thread::sleep(SLOW_IO);
        }
        None
    }
}

/// `Backend::wait_any` returns once any of the I/Os is done (the staged ones are submitted
/// first, so it cannot wait forever), reclaims the completed handles, and returns at once for
/// an empty list. Under worker, with the read of block 0 slow, it returns on one of the
/// others, well before the slow one lands.
fn wait_any_returns_on_the_first_completion(method: IoMethodKind) {
    let (_dir, aio, mut backend, rel) = aio_with_rel(method, 16);
    backend.wait_any(&[]);
    // Staged in batch mode and not yet submitted: wait_any submits them.
    backend.enter_batch_mode();
    let refs: Vec<_> = (0..4)
        .map(|i| stage_read(&mut backend, &rel, i * 2, 1))
        .collect();
    backend.wait_any(&refs);
    backend.exit_batch_mode();
    assert!(
        refs.iter().any(|&wref| aio.poll(wref)),
        "{method}: nothing done"
    );
    for wref in refs {
        let c = backend
            .wait(wref)
            .or_else(|| backend.take_completion(wref))
            .expect("kept");
        assert!(c.result.is_ok(), "{:?}", c.result);
    }
    assert_nothing_pending(&backend, &aio);

    aio.set_fault_injector(Some(Arc::new(SlowBlockZero)));
    // One batch, so the pool spreads it over its workers: the fast reads cannot queue behind
    // the slow one on a single worker.
    backend.enter_batch_mode();
    let fast: Vec<_> = (1..4)
        .map(|i| stage_read(&mut backend, &rel, i * 4, 1))
        .collect();
    let slow = stage_read(&mut backend, &rel, 0, 1);
    let mut all = vec![slow];
    all.extend(&fast);
    let start = std::time::Instant::now();
    backend.wait_any(&all);
    let waited = start.elapsed();
    backend.exit_batch_mode();
    if method == IoMethodKind::Worker {
        assert!(
            waited < SLOW_IO / 2,
            "worker: wait_any waited {waited:?} for the slow read"
        );
        assert!(fast.iter().any(|&wref| aio.poll(wref)));
    }
    for wref in all {
        let c = backend
            .wait(wref)
            .or_else(|| backend.take_completion(wref))
            .expect("kept");
        assert!(c.result.is_ok(), "{:?}", c.result);
    }
    aio.set_fault_injector(None);
    assert_nothing_pending(&backend, &aio);
}

/// Hands a pipeline the 4-block ranges of a 64-block relation with no two neighbours in a row
/// (0, 8, 16, … 56, then 4, 12, … 60), so the I/Os of one batch never merge and each can
/// complete on its own; checks every block handed over against the reference image and
/// counts how often each was.
struct ReadEveryBlock<'a> {
    rel: &'a RelFile,
    ranges: std::vec::IntoIter<u64>,
    /// Per block: how many times its bytes were handed to `complete`.
    seen: Vec<u32>,
    /// First block of each range `complete` was given, in the order it was given them.
    order: Vec<u64>,
}

impl<'a> ReadEveryBlock<'a> {
    fn new(rel: &'a RelFile) -> ReadEveryBlock<'a> {
        let ranges: Vec<u64> = (0..8)
            .map(|i| i * 8)
            .chain((0..8).map(|i| i * 8 + 4))
            .collect();
        ReadEveryBlock {
            rel,
            ranges: ranges.into_iter(),
            seen: vec![0; 64],
            order: Vec::new(),
        }
    }
}

impl PipelineDriver for ReadEveryBlock<'_> {
    type Tag = ();

    fn next_io(&mut self, _backend: &mut Backend) -> Option<PipelineIo<()>> {
        self.ranges.next().map(|first_block| PipelineIo {
            first_block,
            nblocks: 4,
            tag: (),
        })
    }

    fn stage(
        &mut self,
        backend: &mut Backend,
        io: &PipelineIo<()>,
    ) -> Result<pageio::aio::WaitRef, AioError> {
        try_stage_read(backend, self.rel, io.first_block, io.nblocks)
    }

    fn complete(
        &mut self,
        io: &PipelineIo<()>,
        completion: pageio::aio::IoCompletion,
    ) -> Result<(), AioError> {
        self.order.push(io.first_block);
        let done = completion.result.blocks_done.min(io.nblocks) as usize;
        let buffer = completion
            .buffer
            .as_ref()
            .expect("an owned buffer comes back");
        let reference = image(64);
        for i in 0..done {
            let block = io.first_block as usize + i;
            assert_eq!(
                buffer.as_slice()[i * BLCKSZ..(i + 1) * BLCKSZ],
                reference[block * BLCKSZ..(block + 1) * BLCKSZ],
                "block {block}"
            );
            self.seen[block] += 1;
        }
        match completion.result.status {
            IoStatus::Ok | IoStatus::Partial => Ok(()),
            _ => Err(completion
                .result
                .error
                .expect("a failed I/O names its error")),
        }
    }
}

/// [`SlowBlockZero`], then a fault plan.
struct SlowZeroThen(FaultPlan);

impl pageio::aio::FaultInjector for SlowZeroThen {
    fn inject(&self, op: IoOp, target: &IoTarget) -> Option<pageio::aio::Fault> {
        pageio::aio::FaultInjector::inject(&SlowBlockZero, op, target);
        pageio::aio::FaultInjector::inject(&self.0, op, target)
    }
}

/// A pipeline in completion order hands over every block exactly once, re-issues the rest of
/// a short read, and of two failed reads returns the lower one, whichever failed first.
/// Under worker, with the read of block 0 slow, the reads behind it are handed over first
/// (in order, block 0 comes first: the contrast run shows it).
fn a_completion_order_pipeline_hands_over_every_block_once(method: IoMethodKind) {
    let (_dir, aio, mut backend, rel) = aio_with_rel(method, 64);

    // In staging order: block 0 first, however slow.
    aio.set_fault_injector(Some(Arc::new(SlowZeroThen(FaultPlan::new()))));
    let mut driver = ReadEveryBlock::new(&rel);
    IoPipeline::new(8).run(&mut backend, &mut driver).unwrap();
    assert_eq!(driver.seen, vec![1; 64]);
    assert_eq!(driver.order[0], 0);

    // Completion order, the read of 20..23 short once, ending with block 21: 22..23 read again.
    let plan =
        FaultPlan::new().on_block(IoOp::Readv, "16384", 21, Fault::Short { bytes: BLCKSZ }, 1);
    aio.set_fault_injector(Some(Arc::new(SlowZeroThen(plan))));
    let before = backend.counters();
    let mut driver = ReadEveryBlock::new(&rel);
    let pipeline = IoPipeline::new(8).completion_order();
    assert!(pipeline.is_completion_order());
    pipeline.run(&mut backend, &mut driver).unwrap();
    assert_eq!(
        driver.seen,
        vec![1; 64],
        "{method}: every block exactly once"
    );
    assert_eq!(backend.counters().partials - before.partials, 1);
    assert_eq!(
        driver.order.iter().filter(|&&b| b == 22).count(),
        1,
        "the rest, once: {:?}",
        driver.order
    );
    if method == IoMethodKind::Worker {
        assert_ne!(
            driver.order[0], 0,
            "worker: the slow read of block 0 held up the others: {:?}",
            driver.order
        );
    }
    assert_nothing_pending(&backend, &aio);

    // Two failed reads: 44..47, then 12..15 (staged later, in the second pass). Whichever
    // completes first, the error returned is the lower one's.
    let plan = FaultPlan::new()
        .on_block(IoOp::Readv, "16384", 44, Fault::Errno(libc::EIO), 1)
        .on_block(IoOp::Readv, "16384", 12, Fault::Errno(libc::EIO), 1);
    aio.set_fault_injector(Some(Arc::new(plan)));
    let mut driver = ReadEveryBlock::new(&rel);
    let err = IoPipeline::new(16)
        .completion_order()
        .run(&mut backend, &mut driver)
        .unwrap_err();
    assert_read_eio_at(&err, 12);
    assert!(driver.seen.iter().all(|&n| n <= 1), "{:?}", driver.seen);
    aio.set_fault_injector(None);
    assert_nothing_pending(&backend, &aio);
}

macro_rules! conformance {
    ($($name:ident),* $(,)?) => {
        mod sync {
            $( #[test] fn $name() {
                super::watched(stringify!($name), pageio::IoMethodKind::Sync, super::$name)
            } )*
            #[test] fn writes_and_reads_land_the_right_bytes_direct() {
                super::watched("direct", pageio::IoMethodKind::Sync, super::writes_and_reads_land_the_right_bytes_direct)
            }
        }
        mod worker {
            $( #[test] fn $name() {
                super::watched(stringify!($name), pageio::IoMethodKind::Worker, super::$name)
            } )*
            #[test] fn writes_and_reads_land_the_right_bytes_direct() {
                super::watched("direct", pageio::IoMethodKind::Worker, super::writes_and_reads_land_the_right_bytes_direct)
            }
        }
        mod io_uring {
            $( #[test] fn $name() {
                super::watched(stringify!($name), pageio::IoMethodKind::IoUring, super::$name)
            } )*
            #[test] fn writes_and_reads_land_the_right_bytes_direct() {
                super::watched("direct", pageio::IoMethodKind::IoUring, super::writes_and_reads_land_the_right_bytes_direct)
            }
        }
    };
}

fn writes_and_reads_land_the_right_bytes_buffered(method: IoMethodKind) {
    writes_and_reads_land_the_right_bytes(method, false)
}

fn writes_and_reads_land_the_right_bytes_direct(method: IoMethodKind) {
    writes_and_reads_land_the_right_bytes(method, true)
}

conformance!(
    writes_and_reads_land_the_right_bytes_buffered,
    merging_happens_and_shows_in_counters,
    contiguous_batches_send_other_reads_at_once,
    read_past_eof_is_partial_then_error,
    injected_eio_is_a_typed_error_naming_file_and_block,
    injected_short_reads_are_partial_and_reissued,
    bit_flips_surface_through_the_shared_callback,
    a_thread_waits_on_another_threads_io,
    handle_exhaustion_does_not_deadlock,
    old_wait_ref_to_recycled_handle_returns_at_once,
    eight_threads_ten_thousand_random_ios_every_byte_checked,
    snapshot_shows_ios_in_flight_like_pg_aios,
    direct_io_rejects_misaligned_memory,
    concurrent_backend_registration_never_shares_a_slot,
    read_of_a_missing_file_is_an_error_not_a_hang,
    block_numbers_past_max_block_number_are_refused_never_wrapped,
    non_regular_relation_files_are_refused_not_read,
    a_file_swapped_for_a_fifo_is_refused_not_waited_on,
    write_into_an_unwritable_directory_is_an_error_not_a_hang,
    an_error_in_the_middle_of_a_long_request_stops_it_cleanly,
    partial_reads_in_a_long_request_are_reissued_or_named,
    a_panicking_completion_fails_the_io_and_leaves_nothing_pending,
    a_panicking_pipeline_driver_unwinds_only_after_its_ios_end,
    refused_submissions_fail_the_ios_with_the_errno,
    a_waiter_on_an_unsubmitted_io_returns,
    the_pipeline_reports_the_lowest_error,
    wait_any_returns_on_the_first_completion,
    a_completion_order_pipeline_hands_over_every_block_once,
);
