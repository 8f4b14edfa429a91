//! Helpers shared by the CLI's integration tests: the binary, the PostgreSQL 18 fixture and
//! a PostgreSQL 18 installation.
#![allow(dead_code)] // each test file uses its own subset

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

// The fixture builder's client is the library's test helper, shared so both crates test
// against one fixture.
#[path = "../../../pageio/tests/common/fixture.rs"]
mod fixture;
#[path = "../../../pageio/tests/common/watchdog.rs"]
mod watchdog;

pub use fixture::FixtureFacts;
#[allow(unused_imports)] // each test file uses its own subset
pub use watchdog::with_watchdog;

/// The facts PostgreSQL gave about the fixture when it was built (`facts.json`, parsed once
/// per process; builds the fixture first if needed).
pub fn fixture_facts() -> &'static FixtureFacts {
    fixture::fixture_facts()
}

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

/// Copies the PostgreSQL 18 fixture's data directory into `dir` and returns it
/// (`<dir>/data`). The first call in a process builds the fixture if
/// `target/fixtures/pg18-small` is missing or stale.
pub fn unpack_fixture(dir: &Path) -> PathBuf {
    fixture::copy_fixture_into(dir)
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

/// Runs the `pageio` binary with `args`, killing it and failing the test if it runs longer
/// than `bound_secs` (a CLI that hangs must fail the test, not stall the suite).
pub fn pageio_bounded(args: &[&str], bound_secs: u64) -> Output {
    use std::io::Read;
    let mut child = Command::new(env!("CARGO_BIN_EXE_pageio"))
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Drain both pipes on their own threads: a child blocked on a full pipe would otherwise
    // look like a hang.
    let mut stdout_pipe = child.stdout.take().unwrap();
    let mut stderr_pipe = child.stderr.take().unwrap();
    let stdout_reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stdout_pipe.read_to_end(&mut bytes);
        bytes
    });
    let stderr_reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stderr_pipe.read_to_end(&mut bytes);
        bytes
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(bound_secs);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("pageio {args:?} did not finish within {bound_secs} s (hang?)");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    Output {
        status,
        stdout: stdout_reader.join().unwrap(),
        stderr: stderr_reader.join().unwrap(),
    }
}

/// True when the test may change machine-wide state (mounts, rlimits): running as root.
/// Otherwise prints why the test is skipped — or, under `CI`, fails it.
pub fn have_root(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!("{test} needs root (it mounts a small tmpfs); CI is set, so this is a failure, not a skip");
    }
    eprintln!("SKIP {test}: needs root (it mounts a small tmpfs)");
    false
}

/// A tmpfs of `size` (e.g. "2m") mounted on a fresh directory, unmounted on drop: a real
/// file system that runs out of space.
pub struct SmallTmpfs {
    dir: tempfile::TempDir,
}

impl SmallTmpfs {
    /// Mounts it (root only; see [`have_root`]).
    pub fn mount(size: &str) -> SmallTmpfs {
        let dir = tempfile::tempdir().unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .unwrap()
            .success();
        assert!(ok, "mount a {size} tmpfs on {}", dir.path().display());
        SmallTmpfs { dir }
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Names in the mount point (nothing should be left after a failed command).
    pub fn entries(&self) -> Vec<String> {
        std::fs::read_dir(self.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    }
}

impl Drop for SmallTmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}
