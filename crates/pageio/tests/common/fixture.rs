//! The real PostgreSQL 18 fixture, built by the project itself.
//!
//! `scripts/build-fixture.py` makes a cluster with `initdb -k` from
//! `tests/fixtures/pg18-small.sql`, asks PostgreSQL for the facts the tests check (query
//! answers, relation files, page counts, btree metapages, page headers and checksums,
//! `pg_checksums -c` totals), and caches both under `target/fixtures/pg18-small/` as `data/`
//! and `facts.json`. The first test of a process that needs the fixture runs the builder (it
//! returns at once when the cache matches the SQL and the builder, and serialises concurrent
//! builds with a file lock); every test then copies the cached data directory into its own
//! temporary directory, so tests may damage their copy freely.
//!
//! This file is shared by both crates' test helpers (the CLI's `tests/common/mod.rs` includes
//! it by path), so the library and the binary are tested against one fixture.

use std::collections::BTreeMap;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde::Deserialize;

/// Longest wait for the builder: a build takes seconds (plus a PostgreSQL install from PyPI on
/// a fresh machine), and the builder bounds its own lock wait at 900 s; past this the build is
/// stuck and the test fails with the builder's output instead of hanging.
const BUILD_BOUND_SECS: u64 = 1200;

/// Longest wait for the fixture's shared lock while another process swaps a rebuilt fixture
/// into place (a rename, or a whole build when the SQL changed under a running suite).
const LOCK_BOUND_SECS: u64 = 1200;

/// The repository's root directory.
fn repository_root() -> PathBuf {
    // Both crates live at <repo>/crates/<name>.
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Where the builder caches the fixtures: `<repo>/target/fixtures`.
fn cache_dir() -> PathBuf {
    repository_root().join("target/fixtures")
}

/// One of the query answers PostgreSQL gave while building the fixture:
/// `SELECT count(*), sum(length(b)) FROM <table> WHERE a BETWEEN lo AND hi`.
#[derive(Debug, Clone, Deserialize)]
pub struct QueryFacts {
    pub table: String,
    pub lo: f64,
    pub hi: f64,
    pub count: u64,
    pub sum_length_b: u64,
}

/// A relation: its file relative to the data directory and its size in pages.
#[derive(Debug, Clone, Deserialize)]
pub struct RelationFacts {
    pub path: String,
    pub pages: u32,
}

/// A btree metapage as pageinspect's `bt_metap` reports it.
#[derive(Debug, Clone, Deserialize)]
pub struct BtreeFacts {
    pub magic: u32,
    pub version: u32,
    pub root: u32,
    pub level: u32,
    pub fastroot: u32,
    pub fastlevel: u32,
}

/// Line pointer 1 of a heap page as pageinspect's `heap_page_items` reports it.
#[derive(Debug, Clone, Deserialize)]
pub struct TupleFacts {
    /// `(block,offset)`.
    pub t_ctid: String,
    pub t_infomask: u16,
    pub t_infomask2: u16,
    pub t_hoff: u8,
    pub lp_len: u16,
}

/// A heap page as pageinspect's `page_header`, `page_checksum` and `heap_page_items` report
/// it (checksums as unsigned 16-bit values).
#[derive(Debug, Clone, Deserialize)]
pub struct HeapBlockFacts {
    pub relation: String,
    pub block: u32,
    /// `X/X`, as PostgreSQL prints an LSN.
    pub lsn: String,
    /// pd_checksum as stored on the page.
    pub checksum: u16,
    /// What PostgreSQL's `page_checksum()` computes for the page at this block.
    pub computed_checksum: u16,
    pub flags: u16,
    pub lower: u16,
    pub upper: u16,
    pub special: u16,
    pub pagesize: u32,
    pub version: u8,
    pub prune_xid: u32,
    /// Line pointers on the page.
    pub items: u16,
    pub first_tuple: TupleFacts,
}

/// The totals `pg_checksums -c` printed on the cleanly shut down data directory.
#[derive(Debug, Clone, Deserialize)]
pub struct ChecksumTotals {
    pub files_scanned: u64,
    pub blocks_scanned: u64,
    pub bad_checksums: u64,
    pub data_checksum_version: u32,
}

/// Everything PostgreSQL said about the fixture while the builder made it (`facts.json`).
#[derive(Debug, Clone, Deserialize)]
pub struct FixtureFacts {
    pub postgres_version: String,
    pub database_oid: u32,
    pub relations: BTreeMap<String, RelationFacts>,
    pub btrees: BTreeMap<String, BtreeFacts>,
    pub heap_blocks: Vec<HeapBlockFacts>,
    pub queries: Vec<QueryFacts>,
    /// `min(a)::text` of linear_10 (parse with `str::parse`, which rounds exactly).
    pub linear_10_a_min: String,
    /// `max(a)::text` of linear_10.
    pub linear_10_a_max: String,
    pub pg_checksums: ChecksumTotals,
}

impl FixtureFacts {
    /// The relation named `name` (uniform, linear_10, uniform_a, linear_10_a).
    pub fn relation(&self, name: &str) -> &RelationFacts {
        self.relations
            .get(name)
            .unwrap_or_else(|| panic!("facts.json has no relation {name}"))
    }

    /// The file of relation `name`, relative to the data directory (`base/5/16384`).
    pub fn path(&self, name: &str) -> &str {
        &self.relation(name).path
    }

    /// The btree metapage of index `name`.
    pub fn btree(&self, name: &str) -> &BtreeFacts {
        self.btrees
            .get(name)
            .unwrap_or_else(|| panic!("facts.json has no btree {name}"))
    }

    /// The facts of uniform's block `block` (0 and 7 are recorded).
    pub fn heap_block(&self, block: u32) -> &HeapBlockFacts {
        self.heap_blocks
            .iter()
            .find(|b| b.relation == "uniform" && b.block == block)
            .unwrap_or_else(|| panic!("facts.json has no uniform block {block}"))
    }
}

/// Runs the builder once per process and returns the cached fixture's directory.
fn built() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let root = repository_root();
        let builder = root.join("scripts/build-fixture.py");
        let logs = tempfile::tempdir().expect("temp dir for the builder's output");
        let stdout_path = logs.path().join("stdout");
        let stderr_path = logs.path().join("stderr");
        let mut child = Command::new("python3")
            .arg(&builder)
            .arg("--out")
            .arg(cache_dir())
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout_path).unwrap())
            .stderr(std::fs::File::create(&stderr_path).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("run python3 {}: {e}", builder.display()));
        let deadline = Instant::now() + Duration::from_secs(BUILD_BOUND_SECS);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "{} did not finish within {BUILD_BOUND_SECS} s:\n{}",
                    builder.display(),
                    std::fs::read_to_string(&stderr_path).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
        assert!(
            status.success(),
            "building the PostgreSQL 18 fixture failed ({status}): {}\n{stderr}",
            builder.display()
        );
        let dir = std::fs::read_to_string(&stdout_path).unwrap();
        let dir = PathBuf::from(dir.trim());
        assert!(
            dir.join("stamp").exists() && dir.join("data/PG_VERSION").exists(),
            "{} reported {} but it holds no complete fixture\n{stderr}",
            builder.display(),
            dir.display()
        );
        dir
    })
}

/// A shared flock on the fixture's lock file, held while a test copies the cache: the
/// builder swaps a rebuilt fixture into place only under the exclusive lock, so a copy never
/// mixes two builds.
struct SharedLock(std::fs::File);

impl SharedLock {
    fn take() -> SharedLock {
        let path = cache_dir().join("pg18-small.lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
        let deadline = Instant::now() + Duration::from_secs(LOCK_BOUND_SECS);
        loop {
            // SAFETY: flock on a descriptor this function owns (`file` outlives the call);
            // LOCK_NB makes it return at once instead of blocking without a bound.
            let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) };
            if rc == 0 {
                return SharedLock(file);
            }
            let err = std::io::Error::last_os_error();
            assert_eq!(
                err.raw_os_error(),
                Some(libc::EWOULDBLOCK),
                "flock {}: {err}",
                path.display()
            );
            assert!(
                Instant::now() < deadline,
                "{} held exclusively for more than {LOCK_BOUND_SECS} s (a stuck build?)",
                path.display()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for SharedLock {
    fn drop(&mut self) {
        // SAFETY: unlocks the descriptor this guard owns; closing it would release the lock
        // too, this only makes the release explicit.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

/// Copies `from` (a directory) to `to` recursively, keeping permissions and symbolic links.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir(to).unwrap_or_else(|e| panic!("create {}: {e}", to.display()));
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            copy_tree(&src, &dst);
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src).unwrap(), &dst).unwrap();
        } else {
            std::fs::copy(&src, &dst)
                .unwrap_or_else(|e| panic!("copy {} to {}: {e}", src.display(), dst.display()));
        }
    }
    std::fs::set_permissions(to, std::fs::metadata(from).unwrap().permissions()).unwrap();
}

/// Copies the fixture's data directory to `<dir>/data` (builds the fixture first if the cache
/// is missing or stale) and returns that path.
pub fn copy_fixture_into(dir: &Path) -> PathBuf {
    let cached = built();
    let pgdata = dir.join("data");
    let _lock = SharedLock::take();
    copy_tree(&cached.join("data"), &pgdata);
    assert!(
        pgdata.join("PG_VERSION").exists(),
        "fixture did not copy to {}",
        pgdata.display()
    );
    pgdata
}

/// The facts PostgreSQL gave about the fixture when it was built (parsed once per process).
pub fn fixture_facts() -> &'static FixtureFacts {
    static FACTS: OnceLock<FixtureFacts> = OnceLock::new();
    FACTS.get_or_init(|| {
        let path = built().join("facts.json");
        let _lock = SharedLock::take();
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("parse {}: {e}", path.display()))
    })
}
