//! Helpers shared by the CLI's integration tests: the binary, the PostgreSQL 18 fixture and
//! a PostgreSQL 18 installation.
#![allow(dead_code)] // each test file uses its own subset

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The repository's root directory.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs the `pageio` binary with `args`.
pub fn pageio(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pageio"))
        .args(args)
        .output()
        .unwrap()
}

/// Unpacks the PostgreSQL 18 fixture (`pg18-small.tar.zst`) into `dir`; returns its
/// data directory.
pub fn unpack_fixture(dir: &Path) -> PathBuf {
    let archive = std::env::var_os("PAGEIO_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("../shared/fixtures"))
        .join("pg18-small.tar.zst");
    let ok = Command::new("tar")
        .args(["--zstd", "-xf"])
        .arg(&archive)
        .arg("-C")
        .arg(dir)
        .status()
        .unwrap()
        .success();
    assert!(ok, "unpack {}", archive.display());
    dir.join("data")
}

/// The PostgreSQL 18 bin directory, or `None` (with a skip line) when there is none outside
/// CI.
pub fn pg_bin() -> Option<PathBuf> {
    static BIN: OnceLock<Option<PathBuf>> = OnceLock::new();
    BIN.get_or_init(|| {
        let found = match std::env::var_os("PAGEIO_PG_BIN") {
            Some(b) => Some(PathBuf::from(b)),
            None => Command::new(repo_root().join("bench/setup-postgres.sh"))
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim())),
        };
        let found = found.filter(|b| b.join("pg_checksums").exists());
        if found.is_none() {
            if std::env::var_os("CI").is_some() {
                panic!("PostgreSQL 18 not found: run bench/setup-postgres.sh or set PAGEIO_PG_BIN (CI is set, so this is a failure, not a skip)");
            }
            eprintln!("SKIP: PostgreSQL 18 not found (run bench/setup-postgres.sh or set PAGEIO_PG_BIN)");
        }
        found
    })
    .clone()
}
