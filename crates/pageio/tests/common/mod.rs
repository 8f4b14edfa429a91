//! Shared helpers for integration tests: unpacking the real PostgreSQL 18 fixture.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;

/// Directory holding `pg18-small.tar.zst`: `$PAGEIO_FIXTURES`, else `/work/shared/fixtures`
/// reached relative to the crate (`<repo>/../shared/fixtures`).
pub fn fixtures_dir() -> PathBuf {
    match std::env::var_os("PAGEIO_FIXTURES") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures"),
    }
}

/// Unpacks the fixture data directory into a fresh temporary directory and returns the
/// directory guard (keep it alive) and the PGDATA path inside it.
pub fn unpack_fixture() -> (TempDir, PathBuf) {
    let archive = fixtures_dir().join("pg18-small.tar.zst");
    assert!(
        archive.exists(),
        "fixture {} not found: set PAGEIO_FIXTURES to the directory holding pg18-small.tar.zst",
        archive.display()
    );
    let dir = tempfile::tempdir().expect("create temp dir");
    let status = Command::new("tar")
        .arg("--zstd")
        .arg("-xf")
        .arg(&archive)
        .arg("-C")
        .arg(dir.path())
        .status()
        .expect("run tar (needs zstd support)");
    assert!(
        status.success(),
        "tar --zstd -xf {} failed",
        archive.display()
    );
    let pgdata = dir.path().join("data");
    assert!(
        pgdata.join("PG_VERSION").exists(),
        "fixture did not unpack to data/"
    );
    (dir, pgdata)
}

/// Reads a whole relation segment file and splits it into pages.
pub fn read_pages(path: &Path) -> Vec<[u8; 8192]> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    assert_eq!(
        bytes.len() % 8192,
        0,
        "{} is not whole pages",
        path.display()
    );
    bytes
        .chunks_exact(8192)
        .map(|c| c.try_into().unwrap())
        .collect()
}

/// If `name` is a relation segment file name (`16384`, `16384_fsm`, `1259_vm.1`, …),
/// returns its segment number.
pub fn relation_segment(name: &str) -> Option<u32> {
    let (stem, segment) = match name.split_once('.') {
        Some((stem, seg)) => (stem, seg.parse::<u32>().ok()?),
        None => (name, 0),
    };
    let digits = match stem.split_once('_') {
        Some((digits, "fsm" | "vm" | "init")) => digits,
        Some(_) => return None,
        None => stem,
    };
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())).then_some(segment)
}

/// All relation segment files under `base/*/` and `global/`, with segment numbers.
pub fn relation_files(pgdata: &Path) -> Vec<(PathBuf, u32)> {
    let mut dirs = vec![pgdata.join("global")];
    for entry in std::fs::read_dir(pgdata.join("base")).unwrap() {
        dirs.push(entry.unwrap().path());
    }
    let mut files = Vec::new();
    for dir in dirs {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if let Some(segment) = relation_segment(&name) {
                files.push((path, segment));
            }
        }
    }
    files.sort();
    files
}

/// Blocks per 1 GB segment file.
pub const RELSEG_SIZE_BLOCKS: u32 = 131072;

/// Runs `body` on its own thread and fails the test if it has not finished within
/// `bound_secs`: a test of something that could deadlock (waits on I/O, worker pools, walks
/// over on-disk links) must fail with a message instead of hanging the suite. A panic in
/// `body` is re-raised with its own message.
pub fn with_watchdog<T: Send + 'static>(
    name: &str,
    bound_secs: u64,
    body: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let worker = std::thread::Builder::new()
        .name(format!("watchdog:{name}"))
        .spawn(move || {
            let result = body();
            // The receiver is gone only when the watchdog already fired.
            let _ = done_tx.send(());
            result
        })
        .expect("spawn the watched test thread");
    match done_rx.recv_timeout(std::time::Duration::from_secs(bound_secs)) {
        Ok(()) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => match worker.join() {
            Ok(result) => result,
            Err(panic) => std::panic::resume_unwind(panic),
        },
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("{name}: did not finish within {bound_secs} s (hang?)")
        }
    }
}
