//! `measure::run` end to end: on a disk directory and on tmpfs (a scratch file, removed
//! afterwards), on the PostgreSQL 18 fixture (read-only: the tree stays byte-identical),
//! within its time bound, under every io_method the machine allows — and io_uring refused,
//! a directory inside a cluster refused, a cancelled run cleaning up.
//!
//! The runs time the machine, so they take a lock against each other (one test binary runs
//! its tests on parallel threads) and assert only what holds on any machine: rates above
//! zero, bounds, files.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use pageio::aio::AioError;
use pageio::config::IoMethodKind;
use pageio::measure::{
    self, MeasureError, MeasureOptions, MeasureTarget, Measurement, Phase, SCRATCH_FILE_PREFIX,
};
use sha2::{Digest, Sha256};

/// Timed runs one at a time: two measurements sharing 2 cores would each see half the
/// machine and stretch each other's set-up past the slack.
static SERIAL: Mutex<()> = Mutex::new(());

/// The measurement's bound in these tests.
const SECONDS: f64 = 3.0;

/// What a run may take beyond its bound: the reads in flight at a deadline (at most 64
/// 8 kB or 32 128 kB reads), setting up one I/O method, evicting and removing the scratch
/// file — tens of milliseconds each on an idle machine; 2 s leaves room for a busy one.
const SLACK_SECONDS: f64 = 2.0;

/// Watchdog bound of one test: far beyond bound + slack, so only a hang trips it.
const WATCHDOG_SECS: u64 = 120;

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn options(target: MeasureTarget) -> MeasureOptions {
    let mut o = MeasureOptions::new(target);
    o.seconds = SECONDS;
    o
}

/// Every file under `dir` with its SHA-256, its size and its permission bits.
fn tree(dir: &Path) -> BTreeMap<PathBuf, (u64, u32, String)> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                stack.push(path.clone());
                out.insert(path, (0, meta.permissions().mode(), String::new()));
            } else {
                let bytes = std::fs::read(&path).unwrap_or_default();
                let hash = format!("{:x}", Sha256::digest(&bytes));
                out.insert(path, (meta.len(), meta.permissions().mode(), hash));
            }
        }
    }
    out
}

/// What every successful run must show.
fn assert_complete(m: &Measurement, elapsed_seconds: f64) {
    assert!(
        elapsed_seconds <= SECONDS + SLACK_SECONDS,
        "took {elapsed_seconds:.2} s for a {SECONDS} s bound"
    );
    assert!(m.elapsed_seconds <= elapsed_seconds + 0.01);
    let d = &m.device;
    assert!(d.sequential_bytes_per_second > 0.0, "{d:?}");
    assert!(d.sequential_pages_per_second > 0.0);
    assert!(d.random_reads_per_second_qd1 > 0.0);
    assert!(d.random_reads_per_second_qd32 > 0.0);
    let depths: Vec<usize> = d.random.iter().map(|r| r.queue_depth).collect();
    assert_eq!(depths, measure::DEFAULT_QUEUE_DEPTHS);
    for r in &d.random {
        assert!(
            r.reads_per_second > 0.0 && r.reads >= r.queue_depth as u64,
            "{r:?}"
        );
    }
    // sync, worker:3, worker:more, and io_uring exactly when the engine's probe allows it.
    let labels: Vec<&str> = m.relation.runs.iter().map(|r| r.label.as_str()).collect();
    assert_eq!(&labels[..2], ["sync", "worker:3"]);
    assert!(
        labels[2].starts_with("worker:") && labels[2] != "worker:3",
        "{labels:?}"
    );
    match pageio::aio::method::uring::probe() {
        Ok(()) => {
            assert_eq!(labels.len(), 4);
            assert_eq!(labels[3], "io_uring");
            assert!(m.relation.not_measured.is_empty());
        }
        Err(e) => {
            assert_eq!(labels.len(), 3);
            assert_eq!(m.relation.not_measured[0].reason, e.to_string());
        }
    }
    for run in &m.relation.runs {
        for read in [&run.sequential, &run.sparse] {
            assert!(
                read.pages_per_second > 0.0 && read.pages > 0 && read.passes > 0,
                "{run:?}"
            );
            // Cold: every pass starts with a fresh pool, so every page handed out was read.
            assert_eq!(read.pages_read, read.pages, "{run:?}");
        }
        // The sparse pattern reads about one block in 8 of each pass.
        let per_pass = run.sparse.pages as f64 / f64::from(run.sparse.passes);
        assert!(
            per_pass <= m.relation.blocks as f64 / measure::SPARSE_STRIDE_BLOCKS as f64 * 1.5 + 1.0,
            "{run:?}"
        );
    }
    // The recommendation follows from these numbers and serialises.
    let r = measure::recommend(m, m.effective_cpus);
    assert!(measure::DEFAULT_QUEUE_DEPTHS.contains(&r.effective_io_concurrency.value));
    assert!(r.maintenance_io_concurrency.value >= r.effective_io_concurrency.value);
    assert!((1.0..=4.0).contains(&r.random_page_cost.value));
    let json = serde_json::to_value(m).unwrap();
    assert!(
        json["device"]["random_reads_per_second_qd32"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    assert!(serde_json::to_value(&r).unwrap()["io_method"]["reason"].is_string());
}

fn directory_run(dir: &Path) {
    let progress: Arc<Mutex<Vec<(Phase, f64)>>> = Arc::default();
    let seen = progress.clone();
    let mut o = options(MeasureTarget::Directory(dir.to_path_buf()));
    o.progress = Some(Arc::new(move |phase, fraction| {
        seen.lock().unwrap().push((phase, fraction))
    }));
    let start = Instant::now();
    let m = measure::run(&o).expect("measure");
    let elapsed = start.elapsed().as_secs_f64();
    assert_complete(&m, elapsed);
    assert!(!m.data_directory && m.relation.generated && m.relation.checksums);
    let scratch = PathBuf::from(m.scratch_file.as_deref().expect("a scratch file"));
    assert_eq!(scratch.parent(), Some(dir));
    assert!(scratch
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .starts_with(SCRATCH_FILE_PREFIX));
    assert!(!scratch.exists(), "{} left behind", scratch.display());
    assert_eq!(
        std::fs::read_dir(dir).unwrap().count(),
        0,
        "the directory is empty again"
    );
    assert!(m.device.probed_bytes >= measure::MIN_SCRATCH_SIZE_BYTES);
    // Progress: every phase in order, fractions rising to 1 at the end.
    let progress = progress.lock().unwrap();
    assert_eq!(progress[0].0, Phase::Prepare);
    assert_eq!(progress[1].0, Phase::Sequential);
    assert_eq!(progress[2].0, Phase::Random { queue_depth: 1 });
    assert_eq!(progress.last().unwrap().0, Phase::Done);
    // Prepare, sequential, 7 depths × 2 rounds, one per method, done.
    assert_eq!(
        progress.len(),
        2 + 7 * measure::SWEEP_ROUNDS + m.relation.runs.len() + 1
    );
    assert!(
        progress.windows(2).all(|w| w[0].1 <= w[1].1),
        "{progress:?}"
    );
    assert!(progress.last().unwrap().1 > 0.9, "{progress:?}");
}

#[test]
fn a_directory_on_disk_is_measured_within_the_bound_and_left_empty() {
    common::with_watchdog("measure-disk", WATCHDOG_SECS, || {
        let _g = serial();
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        directory_run(dir.path());
    });
}

#[test]
fn a_directory_on_tmpfs_is_measured_within_the_bound_and_left_empty() {
    common::with_watchdog("measure-tmpfs", WATCHDOG_SECS, || {
        let _g = serial();
        let shm = Path::new("/dev/shm");
        if !shm.is_dir() {
            eprintln!("skipping: no /dev/shm");
            return;
        }
        let dir = tempfile::tempdir_in(shm).unwrap();
        directory_run(dir.path());
    });
}

#[test]
fn a_data_directory_is_measured_read_only_on_its_largest_heap() {
    common::with_watchdog("measure-pgdata", WATCHDOG_SECS, || {
        let (_guard, pgdata) = common::unpack_fixture();
        let before = tree(&pgdata);
        let _g = serial();
        let start = Instant::now();
        let m =
            measure::run(&options(MeasureTarget::DataDirectory(pgdata.clone()))).expect("measure");
        assert_complete(&m, start.elapsed().as_secs_f64());
        assert!(m.data_directory && !m.relation.generated && m.scratch_file.is_none());
        // The fixture's two tables have 1112 pages each, more than any catalog; the tie
        // goes to the first by path, uniform.
        let facts = common::fixture_facts();
        assert_eq!(
            PathBuf::from(&m.relation.relation),
            pgdata.join(&facts.relation("uniform").path)
        );
        assert_eq!(
            m.relation.blocks,
            u64::from(facts.relation("uniform").pages)
        );
        // The cluster has checksums; every page was verified as it arrived.
        assert!(m.relation.checksums);
        assert!(m.device.files.len() <= measure::MAX_PROBE_FILES);
        assert!(m
            .device
            .files
            .iter()
            .all(|f| Path::new(f).starts_with(&pgdata)));
        assert_eq!(tree(&pgdata), before, "nothing in PGDATA changed");
    });
}

fn refused() -> Result<(), AioError> {
    Err(AioError::UringUnavailable {
        cause: "io_uring_setup is blocked by a seccomp filter (EPERM)".into(),
        fix: "allow io_uring_setup in the container's seccomp profile, or set io_method = worker"
            .into(),
        errno: libc::EPERM,
    })
}

#[test]
fn io_uring_refused_is_not_measured_and_says_why() {
    common::with_watchdog("measure-no-uring", WATCHDOG_SECS, || {
        let _g = serial();
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let mut o = options(MeasureTarget::Directory(dir.path().to_path_buf()));
        o.seconds = 1.5;
        o.io_uring_probe = refused;
        let m = measure::run(&o).expect("measure");
        let methods: Vec<IoMethodKind> = m.relation.runs.iter().map(|r| r.io_method).collect();
        assert_eq!(
            methods,
            [
                IoMethodKind::Sync,
                IoMethodKind::Worker,
                IoMethodKind::Worker
            ]
        );
        assert_eq!(m.relation.not_measured.len(), 1);
        let skipped = &m.relation.not_measured[0];
        assert_eq!(skipped.io_method, IoMethodKind::IoUring);
        assert!(skipped.reason.contains("seccomp"), "{}", skipped.reason);
        assert!(
            skipped.reason.contains("io_method = worker"),
            "{}",
            skipped.reason
        );
        let r = measure::recommend(&m, 2);
        assert_ne!(r.io_method.value, IoMethodKind::IoUring);
        assert!(
            r.io_method
                .reason
                .contains("io_uring not measured: io_uring is unavailable"),
            "{}",
            r.io_method.reason
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    });
}

#[test]
fn a_directory_inside_a_cluster_is_refused_and_nothing_is_written() {
    let (_guard, pgdata) = common::unpack_fixture();
    let before = tree(&pgdata);
    for dir in [
        pgdata.clone(),
        pgdata.join("base/5"),
        pgdata.join("not-yet-made/deeper"),
    ] {
        let e = measure::run(&options(MeasureTarget::Directory(dir.clone()))).unwrap_err();
        match &e {
            MeasureError::InsideDataDirectory { cluster, .. } => assert_eq!(
                std::fs::canonicalize(cluster).unwrap(),
                std::fs::canonicalize(&pgdata).unwrap()
            ),
            other => panic!(
                "{}: expected InsideDataDirectory, got {other:?}",
                dir.display()
            ),
        }
        assert!(
            e.to_string().contains("measure the cluster read-only"),
            "{e}"
        );
    }
    // A tablespace's version directory is refused the same way.
    let ts = tempfile::tempdir().unwrap();
    let version_dir = ts.path().join("PG_18_202506291/16384");
    std::fs::create_dir_all(&version_dir).unwrap();
    let e = measure::run(&options(MeasureTarget::Directory(version_dir.clone()))).unwrap_err();
    assert!(
        matches!(e, MeasureError::InsideDataDirectory { .. }),
        "{e:?}"
    );
    assert_eq!(std::fs::read_dir(&version_dir).unwrap().count(), 0);
    assert_eq!(tree(&pgdata), before);
    // And a data-directory target must be one.
    let e = measure::run(&options(MeasureTarget::DataDirectory(
        ts.path().to_path_buf(),
    )))
    .unwrap_err();
    assert!(matches!(e, MeasureError::NotADataDirectory(_)), "{e:?}");
}

#[test]
fn a_cancelled_run_stops_early_and_removes_its_scratch_file() {
    common::with_watchdog("measure-cancel", WATCHDOG_SECS, || {
        let _g = serial();
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let cancel = Arc::new(AtomicBool::new(false));
        let flag = cancel.clone();
        let mut o = options(MeasureTarget::Directory(dir.path().to_path_buf()));
        o.seconds = 60.0;
        o.cancel = Some(cancel);
        let scratch_seen = Arc::new(AtomicBool::new(false));
        let seen = scratch_seen.clone();
        let watched = dir.path().to_path_buf();
        // As a Ctrl-C handler would: set the flag while a probe run is under way.
        o.progress = Some(Arc::new(move |phase, _| {
            if phase == (Phase::Random { queue_depth: 4 }) {
                seen.store(
                    std::fs::read_dir(&watched).unwrap().count() == 1,
                    Ordering::Relaxed,
                );
                flag.store(true, Ordering::Relaxed);
            }
        }));
        let start = Instant::now();
        let e = measure::run(&o).unwrap_err();
        assert!(matches!(e, MeasureError::Cancelled), "{e:?}");
        assert!(
            scratch_seen.load(Ordering::Relaxed),
            "the scratch file existed mid-run"
        );
        // Stopped within a poll interval of the flag, not at the 60 s bound.
        assert!(
            start.elapsed().as_secs_f64() < 30.0,
            "{:?}",
            start.elapsed()
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    });
}
