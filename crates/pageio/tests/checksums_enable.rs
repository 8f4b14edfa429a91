//! Enabling data checksums offline, once per io_method, on a copy of the PostgreSQL 18
//! fixture whose checksums were stripped (pd_checksum zeroed, pg_control version 0): every
//! page ends with PostgreSQL's checksum and pg_control says on; pages already right are not
//! rewritten; an injected write error (EIO, ENOSPC) stops the run with file, block and cause
//! and leaves pg_control byte-for-byte untouched; reads of later windows go on while a
//! window's writes are in flight.

#[macro_use]
mod common;

use std::path::Path;
use std::sync::Arc;

use pageio::aio::{Fault, FaultInjector, FaultPlan, IoOp, IoTarget};
use pageio::config::IoMethodKind;
use pageio::page::checksum::{pg_checksum_page, stored_checksum};
use pageio::verify::{
    enable_checksums, sync_data_directory, walk_cluster, write_control_file, ControlFile,
    EnableObserver, EnableStep, SyncMethod, VerifyError,
};

/// The fixture is a few MB; 120 s means a hang.
const WATCHDOG_SECS: u64 = 120;

/// Zeroes pd_checksum of every page of every relation file and sets pg_control's checksum
/// version to 0: a cluster as `initdb --no-data-checksums` leaves it. Returns the number of
/// non-new pages (the ones --enable must rewrite).
fn strip_checksums(pgdata: &Path) -> u64 {
    let mut non_new = 0;
    for (path, _segment) in common::relation_files(pgdata) {
        let mut bytes = std::fs::read(&path).unwrap();
        for page in bytes.chunks_exact_mut(8192) {
            if page[14] != 0 || page[15] != 0 {
                non_new += 1;
            }
            page[8] = 0;
            page[9] = 0;
        }
        std::fs::write(&path, bytes).unwrap();
    }
    write_control_file(pgdata, 0, false).unwrap();
    non_new
}

/// (bad, good) pages by PostgreSQL's checksum, new pages skipped.
fn count_checksums(pgdata: &Path) -> (u64, u64) {
    let (mut bad, mut good) = (0, 0);
    for (path, segment) in common::relation_files(pgdata) {
        for (i, page) in common::read_pages(&path).iter().enumerate() {
            if page[14] == 0 && page[15] == 0 {
                continue;
            }
            let block = (i as u32).wrapping_add(segment * 131072);
            if pg_checksum_page(page, block) == stored_checksum(page) {
                good += 1;
            } else {
                bad += 1;
            }
        }
    }
    (bad, good)
}

#[derive(Default)]
struct Steps(Vec<String>, u64);

impl EnableObserver for Steps {
    fn file_done(&mut self, _file: &pageio::verify::ClusterFile, _blocks_written: u64) {
        self.1 += 1;
    }
    fn step(&mut self, step: EnableStep<'_>) {
        self.0.push(
            match step {
                EnableStep::Rewritten(_) => "rewritten",
                EnableStep::Syncing => "syncing",
                EnableStep::UpdatingControlFile => "control",
            }
            .into(),
        );
    }
}

fn enable_rewrites_every_page_then_pg_control(method: IoMethodKind) {
    let (_dir, pgdata) = common::unpack_fixture();
    let non_new = strip_checksums(&pgdata);
    assert!(non_new > 1000, "{non_new}");
    let control = ControlFile::read(&pgdata).unwrap();
    control.check_for_enable().unwrap();
    assert_eq!(count_checksums(&pgdata).1, 0, "stripped");
    let aio = common::aio_for(method);
    let files = walk_cluster(pgdata.as_os_str(), None).unwrap();
    let mut steps = Steps::default();
    let totals = enable_checksums(
        &aio,
        &pgdata,
        &files,
        2,
        Some(SyncMethod::Fsync),
        &mut steps,
    )
    .unwrap();
    assert_eq!(steps.0, ["rewritten", "syncing", "control"]);
    assert_eq!(steps.1, files.len() as u64);
    assert_eq!(totals.files_scanned, files.len() as u64);
    assert_eq!(totals.blocks_written, non_new);
    assert_eq!(totals.blocks_scanned, non_new + totals.new_pages);
    assert_eq!(count_checksums(&pgdata), (0, non_new));
    let control = ControlFile::read(&pgdata).unwrap();
    assert_eq!(control.data_checksum_version, 1);
    control.check_for_verify().unwrap();
    // Disabled again, nothing to rewrite: --enable only changes pg_control.
    write_control_file(&pgdata, 0, true).unwrap();
    let again =
        enable_checksums(&aio, &pgdata, &files, 1, Some(SyncMethod::Syncfs), &mut ()).unwrap();
    assert_eq!((again.files_written, again.blocks_written), (0, 0));
    assert_eq!(again.blocks_scanned, totals.blocks_scanned);
    assert_eq!(ControlFile::read(&pgdata).unwrap().data_checksum_version, 1);
}

/// An injected write error stops --enable before pg_control: the error names the file,
/// the blocks and the errno; pg_control is byte-for-byte what it was; the steps after the
/// rewrite never started.
fn a_failed_write_leaves_pg_control_untouched(method: IoMethodKind, errno: i32) {
    let (_dir, pgdata) = common::unpack_fixture();
    strip_checksums(&pgdata);
    let control_path = pgdata.join("global/pg_control");
    let before = std::fs::read(&control_path).unwrap();
    let aio = common::aio_for(method);
    let victim = common::fixture_facts().path("uniform").to_string();
    let plan =
        Arc::new(FaultPlan::new().on_block(IoOp::Writev, &victim, 3, Fault::Errno(errno), 1));
    aio.set_fault_injector(Some(plan.clone()));
    let files = walk_cluster(pgdata.as_os_str(), None).unwrap();
    let mut steps = Steps::default();
    let err = enable_checksums(
        &aio,
        &pgdata,
        &files,
        2,
        Some(SyncMethod::Fsync),
        &mut steps,
    )
    .unwrap_err();
    assert_eq!(plan.fired(), 1);
    assert!(steps.0.is_empty(), "{:?}", steps.0);
    assert_eq!(err.kind(), "write_failed");
    let VerifyError::WriteFailed(aio_error) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(aio_error.errno(), Some(errno));
    let target = aio_error.target().unwrap();
    assert!(target.path.ends_with(&victim), "{target}");
    assert!(target.first_block <= 3 && 3 < target.first_block + target.nblocks as u64);
    let message = err.to_string();
    assert!(message.starts_with("could not write block"), "{message}");
    assert!(message.contains(&victim), "{message}");
    assert!(
        message.contains(&std::io::Error::from_raw_os_error(errno).to_string()),
        "{message}"
    );
    assert!(err
        .hint()
        .unwrap()
        .starts_with("pg_control was not changed"));
    assert_eq!(
        std::fs::read(&control_path).unwrap(),
        before,
        "pg_control untouched"
    );
    assert_eq!(ControlFile::read(&pgdata).unwrap().data_checksum_version, 0);
    // Nothing left in flight, and a second run completes.
    aio.set_fault_injector(None);
    enable_checksums(&aio, &pgdata, &files, 2, None, &mut ()).unwrap();
    assert_eq!(count_checksums(&pgdata).0, 0);
    assert_eq!(ControlFile::read(&pgdata).unwrap().data_checksum_version, 1);
}

fn eio_leaves_pg_control_untouched(method: IoMethodKind) {
    a_failed_write_leaves_pg_control_untouched(method, libc::EIO)
}

fn enospc_leaves_pg_control_untouched(method: IoMethodKind) {
    a_failed_write_leaves_pg_control_untouched(method, libc::ENOSPC)
}

/// A file ending in a partial block is pg_checksums' "could not read block" error, before
/// anything is written.
fn a_partial_block_stops_before_any_write(method: IoMethodKind) {
    let (_dir, pgdata) = common::unpack_fixture();
    strip_checksums(&pgdata);
    let victim = pgdata.join(common::fixture_facts().path("uniform"));
    let mut bytes = std::fs::read(&victim).unwrap();
    bytes.extend_from_slice(&[1u8; 100]);
    std::fs::write(&victim, &bytes).unwrap();
    let aio = common::aio_for(method);
    let files = walk_cluster(pgdata.as_os_str(), None).unwrap();
    let err = enable_checksums(&aio, &pgdata, &files, 2, None, &mut ()).unwrap_err();
    assert_eq!(err.kind(), "short_read");
    assert!(err.to_string().ends_with("read 100 of 8192"), "{err}");
    bytes.truncate(bytes.len() - 100);
    std::fs::write(&victim, &bytes).unwrap();
    assert_eq!(count_checksums(&pgdata).1, 0, "nothing rewritten");
    assert_eq!(ControlFile::read(&pgdata).unwrap().data_checksum_version, 0);
}

/// Longest the first write is held waiting for a read of a later file: a job that reads
/// ahead completes one within milliseconds; one that reads, writes and waits in turn never
/// does, and the hold ends after this bound (the test then fails rather than hangs).
const HOLD_FIRST_WRITE_MS: u64 = 5_000;

/// Holds the completion of the first write until a read of a file later in walk order than
/// the written one has completed (or [`HOLD_FIRST_WRITE_MS`] passed), and records which.
struct HoldFirstWrite {
    /// Every relation file's path, in walk order.
    walk_order: Vec<String>,
    /// Walk positions of the files read so far.
    read_positions: std::sync::Mutex<Vec<usize>>,
    held: std::sync::atomic::AtomicBool,
    /// Set when a later file's read completed while the first write was held.
    read_ahead_seen: std::sync::atomic::AtomicBool,
}

impl HoldFirstWrite {
    fn position(&self, target: &IoTarget) -> usize {
        self.walk_order
            .iter()
            .position(|path| path.ends_with(&*target.path))
            .unwrap_or(usize::MAX)
    }
}

impl FaultInjector for HoldFirstWrite {
    fn inject(&self, op: IoOp, target: &IoTarget) -> Option<Fault> {
        use std::sync::atomic::Ordering::SeqCst;
        match op {
            IoOp::Readv => self
                .read_positions
                .lock()
                .unwrap()
                .push(self.position(target)),
            IoOp::Writev if !self.held.swap(true, SeqCst) => {
                let written = self.position(target);
                let deadline = std::time::Instant::now()
                    + std::time::Duration::from_millis(HOLD_FIRST_WRITE_MS);
                while std::time::Instant::now() < deadline {
                    let later_read = self
                        .read_positions
                        .lock()
                        .unwrap()
                        .iter()
                        .any(|&read| read != usize::MAX && read > written);
                    if later_read {
                        self.read_ahead_seen.store(true, SeqCst);
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            }
            _ => {}
        }
        None
    }
}

/// With one job, a later file is read while the first write is in flight (a job that read,
/// wrote and waited in turn read nothing until its writes completed), and the run still
/// rewrites every page and then sets pg_control.
fn reads_go_on_while_writes_are_in_flight(method: IoMethodKind) {
    let (_dir, pgdata) = common::unpack_fixture();
    let rewritten = strip_checksums(&pgdata);
    let aio = common::aio_for(method);
    let files = walk_cluster(pgdata.as_os_str(), None).unwrap();
    let injector = Arc::new(HoldFirstWrite {
        walk_order: files
            .iter()
            .map(|f| f.path.to_string_lossy().into_owned())
            .collect(),
        read_positions: std::sync::Mutex::new(Vec::new()),
        held: Default::default(),
        read_ahead_seen: Default::default(),
    });
    aio.set_fault_injector(Some(injector.clone()));
    let totals = enable_checksums(&aio, &pgdata, &files, 1, None, &mut ()).unwrap();
    aio.set_fault_injector(None);
    assert!(injector.held.load(std::sync::atomic::Ordering::SeqCst));
    assert!(
        injector
            .read_ahead_seen
            .load(std::sync::atomic::Ordering::SeqCst),
        "no later file was read while the first write was in flight"
    );
    assert_eq!(totals.blocks_written, rewritten);
    assert_eq!(count_checksums(&pgdata).0, 0);
    assert_eq!(ControlFile::read(&pgdata).unwrap().data_checksum_version, 1);
}

per_method!(
    enable_rewrites_every_page_then_pg_control,
    eio_leaves_pg_control_untouched,
    enospc_leaves_pg_control_untouched,
    a_partial_block_stops_before_any_write,
    reads_go_on_while_writes_are_in_flight,
);

/// The sync step covers the whole data directory as pg_checksums' does: every file under it,
/// pg_wal and the tablespaces through their links, and no other link; syncfs once per file
/// system; a layout nested deeper than any PostgreSQL one is an error, not an endless walk.
#[test]
fn sync_covers_the_data_directory_pg_wal_and_tablespaces() {
    let root = tempfile::tempdir().unwrap();
    let pgdata = root.path().join("data");
    let wal = root.path().join("wal");
    let space = root.path().join("space");
    let elsewhere = root.path().join("elsewhere");
    for dir in [
        pgdata.join("global"),
        pgdata.join("base/5"),
        pgdata.join("pg_tblspc"),
        wal.clone(),
        space.join("PG_18_202506291/5"),
        elsewhere.clone(),
    ] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let write = |p: &Path| std::fs::write(p, b"x").unwrap();
    write(&pgdata.join("global/pg_control"));
    write(&pgdata.join("base/5/16384"));
    write(&pgdata.join("PG_VERSION"));
    write(&wal.join("000000010000000000000001"));
    write(&space.join("PG_18_202506291/5/16400"));
    write(&elsewhere.join("not_ours"));
    std::os::unix::fs::symlink(&wal, pgdata.join("pg_wal")).unwrap();
    std::os::unix::fs::symlink(&space, pgdata.join("pg_tblspc/16500")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, pgdata.join("base/5/stray_link")).unwrap();

    let synced = sync_data_directory(&pgdata, SyncMethod::Fsync).unwrap();
    let mut files: Vec<String> = synced
        .iter()
        .filter(|p| p.is_file())
        .map(|p| p.strip_prefix(&pgdata).unwrap().display().to_string())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "PG_VERSION",
            "base/5/16384",
            "global/pg_control",
            "pg_tblspc/16500/PG_18_202506291/5/16400",
            "pg_wal/000000010000000000000001",
        ]
    );
    // Every directory too (the data directory last of its tree), never the stray link.
    assert!(synced.contains(&pgdata.join("base/5")));
    assert!(synced.contains(&pgdata.join("pg_wal")));
    assert!(synced.contains(&pgdata.join("pg_tblspc/16500/PG_18_202506291")));
    assert!(!synced
        .iter()
        .any(|p| p.starts_with(pgdata.join("base/5/stray_link"))));

    // One file system here: one syncfs.
    assert_eq!(
        sync_data_directory(&pgdata, SyncMethod::Syncfs).unwrap(),
        std::slice::from_ref(&pgdata)
    );

    // Deeper than any PostgreSQL layout: reported, naming where.
    let mut deep = pgdata.join("base");
    for i in 0..70 {
        deep.push(format!("d{i}"));
    }
    std::fs::create_dir_all(&deep).unwrap();
    let err = sync_data_directory(&pgdata, SyncMethod::Fsync).unwrap_err();
    assert_eq!(err.kind(), "sync_failed");
    assert!(
        err.to_string().contains("nested more than 64 levels"),
        "{err}"
    );
}
