//! Shared helpers for integration tests: the real PostgreSQL 18 fixture (built by
//! `scripts/build-fixture.py`, see `fixture.rs`), page and relation-file readers, and a
//! watchdog for tests that could hang.
#![allow(dead_code)]

mod fixture;
mod watchdog;

use std::path::{Path, PathBuf};

use tempfile::TempDir;

pub use fixture::FixtureFacts;
#[allow(unused_imports)] // each test file uses its own subset
pub use watchdog::with_watchdog;

/// The facts PostgreSQL gave about the fixture when it was built (`facts.json`, parsed once
/// per process; builds the fixture first if needed).
pub fn fixture_facts() -> &'static FixtureFacts {
    fixture::fixture_facts()
}

/// Copies the fixture data directory into a fresh temporary directory and returns the
/// directory guard (keep it alive) and the PGDATA path inside it. The first call in a process
/// builds the fixture if `target/fixtures/pg18-small` is missing or stale.
pub fn unpack_fixture() -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("create temp dir");
    let pgdata = fixture::copy_fixture_into(dir.path());
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
