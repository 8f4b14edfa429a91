//! Write streams, once per io_method (sync, worker, io_uring), buffered and direct: the bytes
//! on disk after the stream ends, combining (how many I/Os), the in-flight bound, injected
//! EIO / ENOSPC / short writes, and a real file system running out of space.

#[macro_use]
mod common;

use std::cell::Cell;
use std::path::Path;
use std::sync::Arc;

use pageio::aio::{write_stream, WriteStreamOptions, WriteStreamStats};
use pageio::aio::{AioError, Fault, FaultPlan, IoBuffer, IoOp};
use pageio::config::{IoConfig, IoMethodKind, BLCKSZ};
use pageio::storage::RelFile;
use pageio::{Aio, Backend};

/// A write stream of a few hundred pages ends in well under a second; 60 s means a hang.
const WATCHDOG_SECS: u64 = 60;

fn aio(method: IoMethodKind, direct: bool) -> Aio {
    let aio = Aio::new(IoConfig {
        io_method: method,
        direct_io: direct,
        ..IoConfig::default()
    })
    .unwrap_or_else(|e| panic!("{method}: {e}"));
    assert_eq!(aio.io_method(), method, "no silent fallback");
    aio
}

/// Deterministic content of block `b`: every 8-byte word differs.
fn page(b: u64) -> IoBuffer {
    let mut buf = IoBuffer::zeroed(BLCKSZ);
    for (i, w) in buf.as_mut_slice().chunks_exact_mut(8).enumerate() {
        let v = b
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .wrapping_add(i as u64 + 1);
        w.copy_from_slice(&v.to_le_bytes());
    }
    buf
}

/// FNV-1a over a byte string: a checksum to compare files by.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The expected file after writing `blocks` (others zero, up to the highest block).
fn expected_image(blocks: &[u64]) -> Vec<u8> {
    let end = blocks.iter().max().map_or(0, |b| b + 1);
    let mut v = vec![0u8; end as usize * BLCKSZ];
    for &b in blocks {
        v[b as usize * BLCKSZ..(b as usize + 1) * BLCKSZ].copy_from_slice(page(b).as_slice());
    }
    v
}

fn options(max_ios_in_flight: usize, combine_limit_blocks: usize) -> WriteStreamOptions {
    WriteStreamOptions {
        max_ios_in_flight,
        combine_limit_blocks,
    }
}

/// Runs a write stream of `blocks` (in that order) to `rel`; returns its result and the
/// blocks handed back as written.
fn run(
    backend: &mut Backend,
    rel: &RelFile,
    opts: WriteStreamOptions,
    blocks: &[u64],
) -> (Result<WriteStreamStats, AioError>, Vec<u64>, usize) {
    let mut it = blocks.iter();
    let yielded = Cell::new(0usize);
    let mut written = Vec::new();
    let result = write_stream(
        backend,
        rel,
        opts,
        || {
            let b = *it.next()?;
            yielded.set(yielded.get() + 1);
            Some((b, page(b)))
        },
        |b, buf| {
            assert_eq!(buf.as_slice(), page(b).as_slice(), "page {b} handed back");
            written.push(b)
        },
    );
    (result, written, yielded.get())
}

fn assert_nothing_pending(backend: &Backend, aio: &Aio) {
    assert_eq!(backend.in_flight(), 0, "I/O left in flight");
    assert_eq!(backend.idle_handles(), aio.config().io_max_concurrency);
    assert!(aio.snapshot().is_empty(), "{:?}", aio.snapshot());
}

fn inject(aio: &Aio, plan: FaultPlan) -> Arc<FaultPlan> {
    let plan = Arc::new(plan);
    aio.set_fault_injector(Some(plan.clone()));
    plan
}

/// Every page lands, byte for byte, in order and out of order, buffered and direct.
fn bytes_on_disk(method: IoMethodKind, direct: bool) {
    let dir = tempfile::tempdir().unwrap();
    let aio = aio(method, direct);
    let mut backend = aio.backend().unwrap();
    let rel = RelFile::new(dir.path().join("16384"));
    // 300 consecutive blocks, then a descending tail with holes, then a revisit.
    let mut blocks: Vec<u64> = (0..300).collect();
    blocks.extend((310..330).rev().step_by(2));
    let (result, mut written, yielded) = run(&mut backend, &rel, options(8, 16), &blocks);
    let stats = result.unwrap();
    assert_eq!(yielded, blocks.len());
    assert_eq!(stats.pages, blocks.len() as u64);
    assert_eq!(stats.pages_written, blocks.len() as u64);
    written.sort_unstable();
    let mut want = blocks.clone();
    want.sort_unstable();
    assert_eq!(written, want, "every page handed back once");
    let on_disk = std::fs::read(rel.path()).unwrap();
    let expected = expected_image(&blocks);
    assert_eq!(on_disk.len(), expected.len());
    assert_eq!(fnv(&on_disk), fnv(&expected), "file checksum");
    assert_eq!(on_disk, expected);
    assert_eq!(backend.counters().errors, 0);
    assert_nothing_pending(&backend, &aio);
}

fn bytes_on_disk_buffered(method: IoMethodKind) {
    bytes_on_disk(method, false)
}

fn bytes_on_disk_direct(method: IoMethodKind) {
    bytes_on_disk(method, true)
}

/// The module's worked example: 0..40 and 100..102 with io_combine_limit 16 are four
/// writes (16 + 16 + 8 + 2 blocks); with a limit of 1 they are 42; the in-flight bound holds.
fn consecutive_blocks_are_combined(method: IoMethodKind) {
    let dir = tempfile::tempdir().unwrap();
    let aio = aio(method, false);
    let mut backend = aio.backend().unwrap();
    let rel = RelFile::new(dir.path().join("16384"));
    let mut blocks: Vec<u64> = (0..40).collect();
    blocks.extend([100, 101]);
    let before = backend.counters();
    let (result, written, _) = run(&mut backend, &rel, options(2, 16), &blocks);
    let stats = result.unwrap();
    assert_eq!(stats.ios, 4, "{stats:?}");
    assert_eq!(stats.pages_written, 42);
    assert!(stats.max_ios_in_flight_seen <= 2, "{stats:?}");
    assert_eq!(written.len(), 42);
    let after = backend.counters();
    assert_eq!(after.ios_issued - before.ios_issued, 4, "{after:?}");
    assert_eq!(after.blocks - before.blocks, 42, "{after:?}");
    // Without combining: one write per page.
    let rel2 = RelFile::new(dir.path().join("16385"));
    let (result, _, _) = run(&mut backend, &rel2, options(4, 1), &blocks);
    let stats = result.unwrap();
    assert_eq!(stats.ios, 42);
    assert!(stats.max_ios_in_flight_seen <= 4, "{stats:?}");
    assert!(stats.max_ios_in_flight_seen >= 2, "{stats:?}");
    assert_eq!(
        std::fs::read(rel.path()).unwrap(),
        std::fs::read(rel2.path()).unwrap()
    );
    // A stream of nothing does nothing.
    let (result, written, _) = run(&mut backend, &rel2, options(4, 16), &[]);
    assert_eq!(result.unwrap(), WriteStreamStats::default());
    assert!(written.is_empty());
    assert_nothing_pending(&backend, &aio);
}

/// An injected error (EIO, ENOSPC) in the middle of a long stream stops it: the error names
/// the file, the blocks and the errno; the stream stops asking for pages; nothing is left in
/// flight; the pages of the failed write are not handed back as written.
fn injected_errno_stops_the_stream(method: IoMethodKind, errno: i32) {
    let dir = tempfile::tempdir().unwrap();
    let aio = aio(method, false);
    let mut backend = aio.backend().unwrap();
    let rel = RelFile::new(dir.path().join("16384"));
    let plan = inject(
        &aio,
        FaultPlan::new().on_block(IoOp::Writev, "16384", 37, Fault::Errno(errno), 1),
    );
    let blocks: Vec<u64> = (0..2000).collect();
    let (result, written, yielded) = run(&mut backend, &rel, options(4, 8), &blocks);
    let err = result.unwrap_err();
    assert_eq!(plan.fired(), 1);
    match &err {
        AioError::Io {
            op,
            errno: got,
            target,
        } => {
            assert_eq!((*op, *got), (IoOp::Writev, errno));
            assert_eq!((target.first_block, target.nblocks), (32, 8));
            assert!(target.path.ends_with("16384"), "{target}");
        }
        other => panic!("expected an I/O error, got {other:?}"),
    }
    let message = err.to_string();
    assert!(
        message.starts_with("could not write blocks 32..39 in file"),
        "{message}"
    );
    assert!(
        message.contains(&std::io::Error::from_raw_os_error(errno).to_string()),
        "{message}"
    );
    // Stopped: at most the in-flight window past the failed write was asked for.
    assert!(
        yielded < 32 + 8 * 8,
        "asked for {yielded} pages after the error"
    );
    assert!(written.iter().all(|b| !(32..40).contains(b)), "{written:?}");
    assert_nothing_pending(&backend, &aio);
    // The backend still works afterwards.
    aio.set_fault_injector(None);
    let (result, _, _) = run(&mut backend, &rel, options(4, 8), &[32, 33]);
    result.unwrap();
}

fn injected_eio_stops_the_stream(method: IoMethodKind) {
    injected_errno_stops_the_stream(method, libc::EIO)
}

fn injected_enospc_stops_the_stream(method: IoMethodKind) {
    injected_errno_stops_the_stream(method, libc::ENOSPC)
}

/// A short write of whole blocks is re-issued for the rest (blocks 0..15 stop after block 8:
/// 8..15 go again, and the file ends up complete); a write that transfers nothing is an error naming the blocks.
fn short_writes_are_reissued_or_named(method: IoMethodKind) {
    let dir = tempfile::tempdir().unwrap();
    let aio = aio(method, false);
    let mut backend = aio.backend().unwrap();
    let rel = RelFile::new(dir.path().join("16384"));
    inject(
        &aio,
        FaultPlan::new().on_block(
            IoOp::Writev,
            "16384",
            5,
            Fault::Short {
                bytes: 3 * BLCKSZ + 100,
            },
            1,
        ),
    );
    let blocks: Vec<u64> = (0..32).collect();
    let (result, written, _) = run(&mut backend, &rel, options(4, 16), &blocks);
    let stats = result.unwrap();
    assert_eq!(stats.pages_written, 32);
    assert_eq!(stats.ios, 3, "two writes and one re-issued rest: {stats:?}");
    assert_eq!(written.len(), 32);
    assert_eq!(backend.counters().partials, 1);
    assert_eq!(std::fs::read(rel.path()).unwrap(), expected_image(&blocks));

    let rel2 = RelFile::new(dir.path().join("16385"));
    inject(
        &aio,
        // Relative to block 16, the first of its write: nothing of that write lands.
        FaultPlan::new().on_block(IoOp::Writev, "16385", 16, Fault::Short { bytes: 0 }, 1),
    );
    let (result, written, _) = run(&mut backend, &rel2, options(4, 16), &blocks);
    let err = result.unwrap_err();
    assert!(
        matches!(&err, AioError::Short { op: IoOp::Writev, target, bytes: 0, .. }
            if target.first_block == 16 && target.path.ends_with("16385")),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "could not write blocks 16..31 in file \"{}\": wrote only 0 of 131072 bytes",
            rel2.display_name()
        )
    );
    assert!(written.iter().all(|b| *b < 16), "{written:?}");
    assert_nothing_pending(&backend, &aio);
}

/// A page that is not one block is refused, not written short.
fn a_page_of_the_wrong_size_is_refused(method: IoMethodKind) {
    let dir = tempfile::tempdir().unwrap();
    let aio = aio(method, false);
    let mut backend = aio.backend().unwrap();
    let rel = RelFile::new(dir.path().join("16384"));
    let mut n = 0u64;
    let err = write_stream(
        &mut backend,
        &rel,
        options(4, 16),
        || {
            n += 1;
            match n {
                1 => Some((0, page(0))),
                2 => Some((1, IoBuffer::zeroed(100))),
                _ => None,
            }
        },
        |_, _| {},
    )
    .unwrap_err();
    assert!(
        matches!(&err, AioError::InvalidRequest(m) if m.contains("block 1") && m.contains("100 bytes")),
        "{err:?}"
    );
    assert_nothing_pending(&backend, &aio);
}

fn mount_small_tmpfs(size: &str) -> Option<tempfile::TempDir> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        if std::env::var_os("CI").is_some() {
            panic!("the full-file-system test needs root to mount a tmpfs");
        }
        eprintln!("SKIP: needs root (mounts a small tmpfs)");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let ok = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
        .arg(dir.path())
        .status()
        .unwrap()
        .success();
    assert!(ok, "mount a tmpfs on {}", dir.path().display());
    Some(dir)
}

fn umount(path: &Path) {
    let _ = std::process::Command::new("umount").arg(path).status();
}

/// A real file system that fills up: the stream ends with ENOSPC (or a write of nothing,
/// which is how the kernel reports it for a short vectored write) naming the file and the
/// blocks, with nothing in flight, and never reports more pages written than are on disk.
fn a_full_file_system_stops_the_stream(method: IoMethodKind) {
    let Some(mount) = mount_small_tmpfs("1m") else {
        return;
    };
    let outcome = std::panic::catch_unwind(|| {
        let aio = aio(method, false);
        let mut backend = aio.backend().unwrap();
        let rel = RelFile::new(mount.path().join("16384"));
        // 4 MB into a 1 MB file system.
        let blocks: Vec<u64> = (0..512).collect();
        let (result, written, _) = run(&mut backend, &rel, options(4, 16), &blocks);
        let err = result.unwrap_err();
        let enospc =
            matches!(&err, AioError::Io { op: IoOp::Writev, errno, .. } if *errno == libc::ENOSPC);
        let nothing = matches!(
            &err,
            AioError::Short {
                op: IoOp::Writev,
                bytes: 0,
                ..
            }
        );
        assert!(enospc || nothing, "{err:?}");
        let target = err.target().unwrap();
        assert!(target.path.ends_with("16384"), "{target}");
        assert!(err.to_string().contains("could not write block"), "{err}");
        let size_bytes = std::fs::metadata(rel.path()).unwrap().len();
        assert!(
            (written.len() * BLCKSZ) as u64 <= size_bytes,
            "{} pages reported written, {size_bytes} bytes on disk",
            written.len()
        );
        assert!(written.len() < 512);
        assert_nothing_pending(&backend, &aio);
    });
    umount(mount.path());
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

/// Maintenance work takes its in-flight bound from `maintenance_io_concurrency`, not from
/// `effective_io_concurrency`: with 3 against 16, a stream of one-block writes never has more
/// than 3 in flight.
fn maintenance_streams_use_maintenance_io_concurrency(method: IoMethodKind) {
    let dir = tempfile::tempdir().unwrap();
    let aio = Aio::new(IoConfig {
        io_method: method,
        effective_io_concurrency: 16,
        maintenance_io_concurrency: 3,
        io_combine_limit_blocks: 1,
        ..IoConfig::default()
    })
    .unwrap();
    let mut backend = aio.backend().unwrap();
    let opts = WriteStreamOptions::for_maintenance(&backend);
    assert_eq!(opts.max_ios_in_flight, 3);
    assert_eq!(
        WriteStreamOptions::from_backend(&backend).max_ios_in_flight,
        16
    );
    let rel = RelFile::new(dir.path().join("16384"));
    let blocks: Vec<u64> = (0..64).collect();
    let (result, written, _) = run(&mut backend, &rel, opts, &blocks);
    let stats = result.unwrap();
    assert_eq!(stats.ios, 64, "{stats:?}");
    assert!(stats.max_ios_in_flight_seen <= 3, "{stats:?}");
    assert_eq!(written.len(), 64);
    assert_eq!(std::fs::read(rel.path()).unwrap(), expected_image(&blocks));
}

per_method!(
    bytes_on_disk_buffered,
    maintenance_streams_use_maintenance_io_concurrency,
    bytes_on_disk_direct,
    consecutive_blocks_are_combined,
    injected_eio_stops_the_stream,
    injected_enospc_stops_the_stream,
    short_writes_are_reissued_or_named,
    a_page_of_the_wrong_size_is_refused,
    a_full_file_system_stops_the_stream,
);
