//! Publishing the AIO state for `pageio aios` (`aio::publish`): the area's life (created
//! by `Aio::new`, filled by the publisher thread, removed on drop), what it holds per
//! io_method, stale detection, and a reader that never panics on a damaged file nor returns
//! a torn sample.

#[macro_use]
mod common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::with_watchdog;
use pageio::aio::publish::{
    self, decode_area_bytes, list_areas, read_area, AreaEntry, AreaHeader, PublishError,
    StaleReason, TestAreaWriter, AREA_BYTES, AREA_FILE_PREFIX, DEPTH_BUCKETS, MAX_ROWS,
};
use pageio::aio::{AioRow, IoBuffer, IoCounters};
use pageio::config::{IoConfig, IoMethodKind, BLCKSZ};
use pageio::storage::OpenMode;
use pageio::Aio;
use proptest::prelude::*;

const WATCHDOG_SECS: u64 = 60;

/// Longest a test waits for the publisher to show something: many publish intervals
/// (10 ms), so a loaded machine does not fail the test.
const PUBLISH_WAIT: Duration = Duration::from_secs(10);

fn publishing_aio(method: IoMethodKind, dir: &Path) -> Aio {
    Aio::new(IoConfig {
        io_method: method,
        aio_publish_dir: dir.to_path_buf(),
        ..IoConfig::default()
    })
    .unwrap_or_else(|e| panic!("{method}: {e}"))
}

/// Reads the area until `done` accepts it, or fails after [`PUBLISH_WAIT`].
fn wait_for_area(
    path: &Path,
    what: &str,
    done: impl Fn(&publish::PublishedArea) -> bool,
) -> publish::PublishedArea {
    let start = Instant::now();
    loop {
        let area = read_area(path).unwrap();
        if done(&area) {
            return area;
        }
        assert!(
            start.elapsed() < PUBLISH_WAIT,
            "{what}: not published within {PUBLISH_WAIT:?}; last sample {:?}",
            area.sample
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The area's name, header and life: created by `Aio::new` under the pid, the header
/// naming the method and settings, removed when the last clone of the `Aio` is dropped.
fn area_is_created_described_and_removed(method: IoMethodKind) {
    let dir = tempfile::tempdir().unwrap();
    let aio = publishing_aio(method, dir.path());
    let path = aio
        .publish_path()
        .expect("publishing is on by default")
        .to_path_buf();
    let name = path.file_name().unwrap().to_str().unwrap().to_string();
    let pid = std::process::id() as i32;
    assert!(
        name.starts_with(&format!("{AREA_FILE_PREFIX}{pid}.")),
        "{name}"
    );
    assert_eq!(publish::parse_area_name(&name).map(|(p, _)| p), Some(pid));
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(meta.len(), AREA_BYTES as u64);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);

    let area = wait_for_area(&path, "first publish", |a| a.sample.publishes > 0);
    let h = &area.header;
    assert_eq!(h.pid, pid);
    assert_eq!(h.io_method, method.as_str());
    assert_eq!(h.effective_io_concurrency, 16);
    assert_eq!(h.io_combine_limit_blocks, 16);
    assert_eq!(h.io_max_concurrency, 64);
    assert!(!h.direct_io);
    assert_eq!(
        Some(h.start_time_ticks),
        publish::process_start_time(pid),
        "the start time is this process's"
    );
    assert!(h.program.contains("aios_publish"), "{}", h.program);
    assert_eq!(
        area.sample.pool.is_some(),
        method == IoMethodKind::Worker,
        "the worker pool is published for the worker method only"
    );
    assert!(matches!(
        list_areas(dir.path()).unwrap().as_slice(),
        [AreaEntry::Live(a)] if a.path == path
    ));

    let clone = aio.clone();
    drop(aio);
    assert!(path.exists(), "a clone still holds the Aio");
    drop(clone);
    assert!(!path.exists(), "the area is removed with the Aio");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "no temporary file left"
    );
}

/// Handles in use, counters and the depth histogram as the engine has them: I/Os held in
/// batch mode are published as STAGED rows naming the file, and after they complete the
/// counters and the histogram's sample count have grown.
fn rows_and_counters_follow_the_engine(method: IoMethodKind) {
    let dir = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let aio = publishing_aio(method, dir.path());
    let rel = common::numbered_relation(&aio, data.path(), 64);
    let path = aio.publish_path().unwrap().to_path_buf();
    let before = wait_for_area(&path, "a publish after the writes", |a| {
        a.sample.counters.bytes == 64 * BLCKSZ as u64 && a.sample.rows.is_empty()
    });

    let mut backend = aio.backend().unwrap();
    backend.enter_batch_mode();
    let mut wrefs = Vec::new();
    for i in 0..4u64 {
        let (file, offset, target) = backend.locate(&rel, i * 8, 4, OpenMode::Read).unwrap();
        let h = backend.acquire().unwrap();
        wrefs.push(
            h.stage_read_owned(file, offset, IoBuffer::zeroed(4 * BLCKSZ), target)
                .unwrap(),
        );
    }
    let staged = wait_for_area(&path, "four staged I/Os", |a| {
        a.sample.rows.len() == 4 && a.sample.rows.iter().all(|r| r.operation == "readv")
    });
    let tid = unsafe_free_gettid();
    for (i, row) in staged.sample.rows.iter().enumerate() {
        assert_eq!(row.state, "STAGED", "{row:?}");
        assert_eq!(row.operation, "readv");
        assert_eq!(row.length, 4 * BLCKSZ as u64);
        assert_eq!(row.off % (8 * BLCKSZ as u64), 0);
        assert!(row.off < 64 * BLCKSZ as u64);
        assert_eq!(row.target, "smgr");
        assert_eq!(row.result, "UNKNOWN");
        assert_eq!(row.raw_result, None);
        assert!(row.target_desc.contains("16384"), "{}", row.target_desc);
        assert!(row.f_buffered);
        assert_eq!(row.pid, tid, "row {i}: the backend's thread id");
    }
    assert_eq!(staged.sample.rows_total, 4);
    assert_eq!(staged.sample.rows_cut, 0);
    backend.exit_batch_mode();
    for wref in wrefs {
        backend.wait(wref);
    }
    let after = wait_for_area(&path, "the completed reads", |a| {
        a.sample.rows.is_empty()
            && a.sample.counters.ios_issued >= before.sample.counters.ios_issued + 4
    });
    let (b, a) = (&before.sample, &after.sample);
    assert_eq!(a.counters.bytes - b.counters.bytes, 16 * BLCKSZ as u64);
    assert_eq!(a.counters.blocks - b.counters.blocks, 16);
    assert_eq!(a.counters.errors, 0);
    assert!(a.depth_samples > b.depth_samples, "depth sampled all along");
    assert_eq!(a.depth_histogram.iter().sum::<u64>(), a.depth_samples);
    assert!(a.sampled_at_ns > b.sampled_at_ns);
    assert_eq!(
        a.backends, 1,
        "the writer's backend slot was reused by this one"
    );
    // Per backend: one slot, held by this thread, whose counters are the sum.
    assert_eq!(a.backend_counters.len(), 1);
    let slot = a.backend_counters[0];
    assert_eq!((slot.id, slot.tid, slot.active), (0, tid, true));
    assert_eq!(slot.counters, a.counters);

    // A handle handed out again, not yet defined: as in pg_aios, no operation and no
    // target — not the target of the I/O the handle did before.
    let handle = backend.acquire().unwrap();
    let handed = wait_for_area(&path, "a handle handed out", |a| a.sample.rows.len() == 1);
    let row = &handed.sample.rows[0];
    assert_eq!(row.state, "HANDED_OUT", "{row:?}");
    assert_eq!(row.operation, "invalid", "{row:?}");
    assert_eq!((row.off, row.length), (0, 0), "{row:?}");
    assert_eq!(row.target, "invalid", "{row:?}");
    assert_eq!(row.target_desc, "", "{row:?}");
    drop(handle);
    wait_for_area(&path, "the handle released", |a| a.sample.rows.is_empty());
}

fn unsafe_free_gettid() -> i32 {
    // /proc/thread-self is this thread's /proc/<pid>/task/<tid>.
    std::fs::read_link("/proc/thread-self")
        .unwrap()
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

per_method!(
    area_is_created_described_and_removed,
    rows_and_counters_follow_the_engine
);

#[test]
fn aio_publish_off_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let aio = Aio::new(IoConfig {
        io_method: IoMethodKind::Sync,
        aio_publish: false,
        aio_publish_dir: dir.path().to_path_buf(),
        ..IoConfig::default()
    })
    .unwrap();
    assert_eq!(aio.publish_path(), None);
    assert_eq!(aio.publish_error(), None);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn an_unusable_publish_dir_is_reported_and_the_engine_still_runs() {
    with_watchdog("unusable dir", WATCHDOG_SECS, unusable_publish_dir);
}

fn unusable_publish_dir() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let aio = Aio::new(IoConfig {
        io_method: IoMethodKind::Sync,
        aio_publish_dir: missing.clone(),
        ..IoConfig::default()
    })
    .unwrap();
    assert_eq!(aio.publish_path(), None);
    let why = aio.publish_error().unwrap();
    assert!(why.contains("aio_publish_dir"), "{why}");
    assert!(why.contains(&missing.display().to_string()), "{why}");
    let data = tempfile::tempdir().unwrap();
    let rel = common::numbered_relation(&aio, data.path(), 4);
    let pages = aio
        .backend()
        .unwrap()
        .read_blocks(&rel, 0, IoBuffer::zeroed(4 * BLCKSZ))
        .unwrap();
    assert_eq!(pages.len(), 4 * BLCKSZ);
}

#[test]
fn the_settings_are_named_like_the_others() {
    let mut config = IoConfig::default();
    assert!(config.aio_publish);
    assert_eq!(config.aio_publish_dir, Path::new("/dev/shm"));
    config.set("aio_publish", "off").unwrap();
    config.set("aio-publish-dir", "/run/pageio").unwrap();
    assert!(!config.aio_publish);
    assert_eq!(config.aio_publish_dir, Path::new("/run/pageio"));
    let err = config.set("aio_publish", "maybe").unwrap_err().to_string();
    assert!(err.contains("aio_publish"), "{err}");
    let err = config.set("aio_publish_dir", "").unwrap_err().to_string();
    assert!(err.contains("aio_publish_dir"), "{err}");
}

fn header(pid: i32, start_time_ticks: u64) -> AreaHeader {
    AreaHeader {
        pid,
        start_time_ticks,
        program: "pageio scan --dataset uniform".into(),
        io_method: "worker".into(),
        effective_io_concurrency: 16,
        io_combine_limit_blocks: 16,
        io_max_concurrency: 64,
        direct_io: false,
        io_workers: 0,
        instance: 0,
    }
}

fn row(io_id: u32) -> AioRow {
    AioRow {
        pid: 7,
        io_id,
        io_generation: io_id as u64 * 3,
        state: "SUBMITTED",
        operation: "readv",
        off: io_id as u64 * 131072,
        length: 131072,
        target: "smgr",
        handle_data_len: 16,
        raw_result: Some(-5),
        result: "ERROR",
        target_desc: format!(
            "blocks {}..{} in file \"base/5/16384\"",
            io_id * 16,
            io_id * 16 + 15
        ),
        f_sync: false,
        f_localmem: true,
        f_buffered: true,
    }
}

/// A pid no process has: a child that has exited and been reaped.
fn dead_pid() -> i32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id() as i32;
    child.wait().unwrap();
    pid
}

#[test]
fn a_dead_or_reused_pid_makes_an_area_stale_and_only_areas_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let me = std::process::id() as i32;
    let my_start = publish::process_start_time(me).unwrap();
    let dead = dead_pid();
    let gone = TestAreaWriter::create(dir.path(), &header(dead, 12345)).unwrap();
    gone.publish(1, IoCounters::default(), &[0; DEPTH_BUCKETS], &[row(1)]);
    let mut reused_header = header(me, my_start + 1);
    reused_header.instance = 7;
    let reused = TestAreaWriter::create(dir.path(), &reused_header).unwrap();
    let mut live_header = header(me, my_start);
    live_header.instance = 8;
    let live = TestAreaWriter::create(dir.path(), &live_header).unwrap();
    live.publish(1, IoCounters::default(), &[0; DEPTH_BUCKETS], &[]);
    // Look-alikes that must be left alone: a garbled file with an area's name, and files
    // whose names only resemble the pattern.
    let garbled = dir.path().join(format!("{AREA_FILE_PREFIX}{dead}.1"));
    std::fs::write(&garbled, vec![0u8; AREA_BYTES]).unwrap();
    for name in [
        format!("{AREA_FILE_PREFIX}{dead}"),
        format!("{AREA_FILE_PREFIX}{dead}.2.bak"),
        format!("x{AREA_FILE_PREFIX}{dead}.3"),
    ] {
        std::fs::copy(gone.path(), dir.path().join(name)).unwrap();
    }

    let entries = list_areas(dir.path()).unwrap();
    assert_eq!(entries.len(), 4, "{entries:?}");
    let mut stale = Vec::new();
    for entry in &entries {
        match entry {
            AreaEntry::Live(area) => assert_eq!(area.path, live.path()),
            AreaEntry::Stale { area, reason } => {
                if area.path == gone.path() {
                    assert_eq!(*reason, StaleReason::ProcessGone);
                    assert_eq!(area.sample.rows.len(), 1);
                } else {
                    assert_eq!(area.path, reused.path());
                    assert_eq!(
                        *reason,
                        StaleReason::PidReused {
                            start_time_ticks: my_start
                        }
                    );
                }
                stale.push(area.clone());
            }
            AreaEntry::Unreadable { path, error } => {
                assert_eq!(path, &garbled);
                assert!(matches!(error, PublishError::BadMagic { .. }), "{error}");
            }
        }
    }
    assert_eq!(stale.len(), 2);
    for area in &stale {
        assert!(publish::remove_stale(area).unwrap());
        assert!(!area.path.exists());
    }
    assert!(live.path().exists());
    assert!(
        garbled.exists(),
        "a file without the magic is never removed"
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 5);
}

/// A valid area image to damage.
fn valid_image() -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let w = TestAreaWriter::create(dir.path(), &header(4242, 99)).unwrap();
    let counters = IoCounters {
        ios_issued: 10,
        bytes: 1310720,
        ..IoCounters::default()
    };
    let rows: Vec<AioRow> = (0..5).map(row).collect();
    w.publish(3, counters, &[1; DEPTH_BUCKETS], &rows);
    let bytes = std::fs::read(w.path()).unwrap();
    let area = decode_area_bytes(&bytes, w.path()).unwrap();
    assert_eq!(area.sample.rows.len(), 5);
    assert_eq!(area.sample.rows[2].target_desc, row(2).target_desc);
    assert_eq!(area.sample.rows[2].raw_result, Some(-5));
    assert_eq!(area.sample.counters, counters);
    bytes
}

#[test]
fn truncated_and_foreign_files_are_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let image = valid_image();
    let path = dir.path().join(format!("{AREA_FILE_PREFIX}4242.0"));
    for len in [0, 7, 64, 4096, AREA_BYTES - 8, AREA_BYTES + 8] {
        let mut bytes = image.clone();
        bytes.resize(len, 0);
        std::fs::write(&path, &bytes).unwrap();
        match read_area(&path) {
            Err(PublishError::WrongSize {
                size_bytes,
                expected_bytes,
                ..
            }) => {
                assert_eq!(size_bytes, len as u64);
                assert_eq!(expected_bytes, AREA_BYTES as u64);
            }
            other => panic!("{len} bytes: {other:?}"),
        }
    }
    let mut other_version = image.clone();
    other_version[8] = 9;
    std::fs::write(&path, &other_version).unwrap();
    let err = read_area(&path).unwrap_err();
    assert!(
        matches!(err, PublishError::UnsupportedVersion { found: 9, .. }),
        "{err}"
    );
    assert!(err.to_string().contains(&path.display().to_string()));
    // A symlink to an area is not followed.
    let real = dir.path().join("real");
    std::fs::write(&real, &image).unwrap();
    let link = dir.path().join(format!("{AREA_FILE_PREFIX}4242.1"));
    std::os::unix::fs::symlink(&real, &link).unwrap();
    assert!(matches!(
        read_area(&link),
        Err(PublishError::NotRegular { .. })
    ));
    // A writer that never finishes its write (the sequence stays odd) is reported, after a
    // bounded wait, instead of waited for.
    let mut stuck = image.clone();
    stuck[32] |= 1;
    let start = Instant::now();
    let err = decode_area_bytes(&stuck, &path).unwrap_err();
    assert!(matches!(err, PublishError::Busy { .. }), "{err}");
    assert!(start.elapsed() >= publish::MAX_READ_WAIT);
    assert!(start.elapsed() < 10 * publish::MAX_READ_WAIT);
    // A sample whose row count disagrees with its rows is garbled, not a short list.
    let mut bad_count = image.clone();
    let sample_at = 64 + publish::HEADER_BYTES;
    let rows_published_at = {
        // The fixed part: time, publishes, 11 counters, pool (flag + 4 u64 + bool + u64),
        // depth now, depth samples, the histogram, backends, the backend counters' count
        // (none here), total, cut, published.
        sample_at + 8 + 8 + 11 * 8 + 1 + 4 * 8 + 1 + 8 + 4 + 8 + DEPTH_BUCKETS * 8 + 4 + 4 + 4 + 4
    };
    bad_count[rows_published_at..rows_published_at + 4]
        .copy_from_slice(&(MAX_ROWS as u32 + 1).to_le_bytes());
    let err = decode_area_bytes(&bad_count, &path).unwrap_err();
    assert!(matches!(err, PublishError::Garbled { .. }), "{err}");
}

#[test]
fn random_damage_is_an_error_or_a_valid_area_never_a_panic() {
    let image = valid_image();
    let path = Path::new("/dev/shm/pageio-aios.4242.0");
    let mut rng_state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = || {
        rng_state ^= rng_state << 13;
        rng_state ^= rng_state >> 7;
        rng_state ^= rng_state << 17;
        rng_state
    };
    let interesting = 64 + publish::HEADER_BYTES + 2048; // preamble, header, rows' start
    let mut errors = 0;
    for _ in 0..3000 {
        let mut bytes = image.clone();
        for _ in 0..(1 + next() % 8) {
            // Mostly where the decoded fields are; sometimes anywhere.
            let at = if next() % 4 == 0 {
                (next() as usize) % bytes.len()
            } else {
                (next() as usize) % interesting
            };
            bytes[at] = next() as u8;
        }
        if decode_area_bytes(&bytes, path).is_err() {
            errors += 1;
        }
    }
    assert!(
        errors > 100,
        "the damage reached the decoded fields ({errors} errors)"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn any_bytes_decode_without_panicking(
        writes in proptest::collection::vec((0usize..(64 + publish::HEADER_BYTES + 4096), any::<u8>()), 1..32),
        len in prop_oneof![Just(AREA_BYTES), 0usize..(2 * AREA_BYTES)],
    ) {
        let mut bytes = valid_image();
        for (at, value) in writes {
            bytes[at] = value;
        }
        bytes.resize(len, 0xAB);
        let _ = decode_area_bytes(&bytes, Path::new("x"));
    }
}

/// The seqlock: a writer publishing as fast as it can, a reader checking an invariant of
/// every sample it gets (all counters equal, every histogram bucket equal to them, the row
/// count and rows matching) — a torn read would mix two samples and break it.
#[test]
fn the_reader_never_sees_a_torn_sample() {
    with_watchdog("torn", WATCHDOG_SECS, || {
        let dir = tempfile::tempdir().unwrap();
        let writer = TestAreaWriter::create(dir.path(), &header(4242, 1)).unwrap();
        let path = writer.path().to_path_buf();
        let stop = Arc::new(AtomicBool::new(false));
        let writer_thread = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let c = IoCounters {
                        ios_issued: n,
                        kernel_ios: n,
                        ios_merged: n,
                        blocks: n,
                        bytes: n,
                        io_ns: n,
                        wait_ns: n,
                        waits: n,
                        errors: n,
                        partials: n,
                        executed_by_submitter: n,
                    };
                    let rows: Vec<AioRow> = (0..(n % 40) as u32)
                        .map(|i| AioRow {
                            io_generation: n,
                            ..row(i)
                        })
                        .collect();
                    writer.publish(n, c, &[n; DEPTH_BUCKETS], &rows);
                    // Thousands of publishes a second (the publisher makes 100): a reader
                    // still meets a write in progress constantly, but not on every try.
                    std::thread::sleep(Duration::from_micros(20));
                }
                n
            })
        };
        let start = Instant::now();
        let mut reads = 0u64;
        let mut last = 0;
        while start.elapsed() < Duration::from_secs(2) {
            let s = read_area(&path).unwrap().sample;
            let n = s.publishes;
            let c = s.counters;
            for v in [
                c.ios_issued,
                c.kernel_ios,
                c.ios_merged,
                c.blocks,
                c.bytes,
                c.io_ns,
                c.wait_ns,
                c.waits,
                c.errors,
                c.partials,
                c.executed_by_submitter,
            ] {
                assert_eq!(v, n, "torn counters in sample {n}");
            }
            assert!(
                s.depth_histogram.iter().all(|&v| v == n || n == 0),
                "torn histogram"
            );
            assert_eq!(s.rows.len() as u64, n % 40, "torn rows");
            assert!(s.rows.iter().all(|r| r.io_generation == n), "torn rows");
            assert!(n >= last, "samples go forward");
            last = n;
            reads += 1;
        }
        stop.store(true, Ordering::Relaxed);
        let written = writer_thread.join().unwrap();
        assert!(
            reads > 100 && written > 100,
            "{reads} reads, {written} writes"
        );
    });
}

#[test]
fn an_unknown_start_time_is_stale_only_when_the_pid_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let me = std::process::id() as i32;
    let live = TestAreaWriter::create(dir.path(), &header(me, 0)).unwrap();
    assert_eq!(
        publish::stale_reason(&read_area(live.path()).unwrap().header),
        None
    );
    let gone = header(dead_pid(), 0);
    assert_eq!(publish::stale_reason(&gone), Some(StaleReason::ProcessGone));
}

/// A look-alike area that another writer truncates and restores over and over while it is
/// read: every read is a valid area or a typed error (short, garbled, busy), never a SIGBUS
/// (which a mapping of the file would raise, killing this test process).
#[test]
fn an_area_truncated_under_the_reader_is_an_error_never_a_signal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pageio-aios.999999.0");
    let image = valid_image();
    std::fs::write(&path, &image).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (path, stop) = (path.clone(), stop.clone());
        std::thread::spawn(move || {
            use std::os::unix::fs::FileExt;
            let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
            let mut rounds = 0u32;
            while rounds < 1000 || !stop.load(std::sync::atomic::Ordering::Relaxed) {
                f.set_len(0).unwrap();
                f.set_len(image.len() as u64 / 2).unwrap();
                f.write_all_at(&image, 0).unwrap();
                rounds += 1;
                if rounds > 100_000 {
                    break;
                }
            }
            rounds
        })
    };
    let (mut ok, mut errors) = (0u32, 0u32);
    for _ in 0..2000 {
        match read_area(&path) {
            Ok(_) => ok += 1,
            Err(
                PublishError::WrongSize { .. }
                | PublishError::BadMagic { .. }
                | PublishError::Garbled { .. }
                | PublishError::UnsupportedVersion { .. }
                | PublishError::Busy { .. },
            ) => errors += 1,
            Err(other) => panic!("unexpected error: {other}"),
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let rounds = writer.join().unwrap();
    assert!(rounds >= 1000, "the file was truncated {rounds} times");
    assert_eq!(ok + errors, 2000);
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// A valid area named for `pid`, with mode `mode`, in `dir`.
fn area_file(dir: &Path, pid: i32, mode: u32) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    // Written by a writer elsewhere, then copied: the header's pid is the name's.
    let tmp = tempfile::tempdir().unwrap();
    let w = TestAreaWriter::create(tmp.path(), &header(pid, 99)).unwrap();
    w.publish(1, IoCounters::default(), &[0; DEPTH_BUCKETS], &[row(1)]);
    let image = std::fs::read(w.path()).unwrap();
    let path = dir.join(format!("{AREA_FILE_PREFIX}{pid}.0"));
    std::fs::write(&path, &image).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path
}

/// The default trust skips an area anyone but its owner can write, with the rule it broke;
/// `AreaTrust::Anyone` reads it.
#[test]
fn a_group_or_world_writable_area_is_skipped_unless_others_are_trusted() {
    use publish::AreaTrust;
    let dir = tempfile::tempdir().unwrap();
    for (mode, who) in [
        (0o666, "every user"),
        (0o620, "its group"),
        (0o602, "every user"),
    ] {
        let path = area_file(dir.path(), 4242, mode);
        match read_area(&path) {
            Err(PublishError::Untrusted {
                mode: found, why, ..
            }) => {
                assert_eq!(found, mode);
                assert_eq!(why, format!("its mode {mode:04o} lets {who} write it"));
            }
            other => panic!("mode {mode:o}: {other:?}"),
        }
        let area = publish::read_area_trusting(&path, AreaTrust::Anyone).unwrap();
        assert_eq!(area.header.pid, 4242);
        let listed = publish::list_areas(dir.path()).unwrap();
        assert!(
            matches!(
                listed.as_slice(),
                [AreaEntry::Unreadable {
                    error: PublishError::Untrusted { .. },
                    ..
                }]
            ),
            "{listed:?}"
        );
        let listed = publish::list_areas_trusting(dir.path(), AreaTrust::Anyone).unwrap();
        assert!(
            matches!(listed.as_slice(), [AreaEntry::Stale { .. }]),
            "{listed:?}"
        );
        std::fs::remove_file(&path).unwrap();
    }
    // The owner's own 0600 and 0644 areas are read.
    for mode in [0o600, 0o644] {
        let path = area_file(dir.path(), 4242, mode);
        assert_eq!(read_area(&path).unwrap().header.pid, 4242);
        std::fs::remove_file(&path).unwrap();
    }
}

/// An area owned by another user is read only when that user runs the process it names; a
/// stale one of another user is never removed, even when others are trusted.
#[test]
fn another_users_area_is_skipped_unless_it_runs_the_process_it_names() {
    use publish::AreaTrust;
    use std::os::unix::fs::MetadataExt;
    if !is_root() {
        assert!(
            std::env::var_os("CI").is_none(),
            "this test needs root to give a file to another user; CI is set, so this is a failure"
        );
        eprintln!("SKIP: needs root to give a file to another user");
        return;
    }
    let nobody = 65534u32;
    let dir = tempfile::tempdir().unwrap();
    let me = std::process::id() as i32;
    // Named for this (root's) process, owned by nobody: a look-alike.
    let path = area_file(dir.path(), me, 0o644);
    std::os::unix::fs::chown(&path, Some(nobody), Some(nobody)).unwrap();
    match read_area(&path) {
        Err(PublishError::Untrusted { owner_uid, why, .. }) => {
            assert_eq!(owner_uid, nobody);
            assert_eq!(
                why,
                format!("it is owned by uid {nobody}, but process {me} runs as uid 0 and this reader as uid 0")
            );
        }
        other => panic!("{other:?}"),
    }
    std::fs::remove_file(&path).unwrap();
    // Named for a process that is gone: stale, but not this user's to remove.
    let dead = dead_pid();
    let path = area_file(dir.path(), dead, 0o600);
    std::os::unix::fs::chown(&path, Some(nobody), Some(nobody)).unwrap();
    match read_area(&path) {
        Err(PublishError::Untrusted { why, .. }) => assert_eq!(
            why,
            format!("it is owned by uid {nobody}, not this reader's uid 0, and process {dead} is not running")
        ),
        other => panic!("{other:?}"),
    }
    let listed = publish::list_areas_trusting(dir.path(), AreaTrust::Anyone).unwrap();
    let [AreaEntry::Stale { area, .. }] = listed.as_slice() else {
        panic!("{listed:?}")
    };
    assert!(matches!(
        publish::remove_stale(area),
        Err(PublishError::Untrusted { .. })
    ));
    assert_eq!(std::fs::metadata(&path).unwrap().uid(), nobody);
    // Named for a process nobody runs: trusted.
    let mut sleeper = std::process::Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "sleep",
            "30",
        ])
        .spawn()
        .unwrap();
    let pid = sleeper.id() as i32;
    let start = Instant::now();
    // Wait until the child has dropped root (its /proc entry is then nobody's).
    while std::fs::metadata(format!("/proc/{pid}")).unwrap().uid() != nobody {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "setpriv did not switch user"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let path = area_file(dir.path(), pid, 0o600);
    std::os::unix::fs::chown(&path, Some(nobody), Some(nobody)).unwrap();
    let area = read_area(&path);
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    assert_eq!(area.unwrap().header.pid, pid);
}
