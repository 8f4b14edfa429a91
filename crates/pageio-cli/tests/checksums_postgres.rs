//! `pageio checksums` against a real PostgreSQL 18 and its own `pg_checksums`, on clusters
//! made with `initdb --no-data-checksums` holding pgbench data and a table with TOAST:
//!
//! * `--enable` under every io_method prints what `pg_checksums --enable` prints on an
//!   identical copy, exits the same, and leaves byte-for-byte the same relation files;
//!   `pg_checksums --check` then finds no bad block, the server starts with
//!   `data_checksums = on` and every query answers as before;
//! * the refusals (running cluster, not cleanly shut down, already enabled, already
//!   disabled, `--filenode` with `--enable`) and `--disable` print the same lines with the
//!   same exit status as `pg_checksums`;
//! * `kill -9` during `--enable` — mid-rewrite, after every page is written, and after the
//!   data is synced but before `pg_control` — leaves a cluster that starts with checksums off
//!   and answers every query as before, and `--enable` run again completes;
//! * a copy on a tmpfs filled to the last byte still gets its checksums (in-place
//!   overwrites allocate nothing).
//!
//! PostgreSQL comes from `bench/setup-postgres.sh` or `$PAGEIO_PG_BIN`; without it the tests
//! print a skip line, except under `CI`, where they fail.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

use common::{
    chown_to_pg_user, pageio_bounded, pageio_bounded_with, pg, pg_bin, pg_cluster_dir, pg_ok,
    with_watchdog, PgServer,
};

/// Bound on one `pageio checksums` run over a ~30 MB cluster (well under a second normally).
const RUN_BOUND_SECS: u64 = 120;
/// Bound on a whole test (a few server starts and stops).
const WATCHDOG_SECS: u64 = 300;

/// The queries whose answers must not change, one line each.
const QUERIES: &str = "SELECT count(*), sum(abalance), sum(bid) FROM pgbench_accounts;
SELECT count(*), sum(bbalance) FROM pgbench_branches;
SELECT count(*), sum(length(body)), md5(string_agg(md5(body), ',' ORDER BY id)) FROM toasty;
SELECT count(*) FROM pg_class;";

/// A stopped cluster without data checksums, built once per process, and the answers to
/// [`QUERIES`] on it.
struct Template {
    _dir: tempfile::TempDir,
    data: PathBuf,
    answers: String,
}

fn template(bin: &Path) -> &'static Template {
    static TEMPLATE: OnceLock<Template> = OnceLock::new();
    TEMPLATE.get_or_init(|| {
        let dir = common::pg_cluster_dir_for_process("pageio-checksums-template");
        let data = dir.path().join("data");
        pg_ok(
            bin,
            "initdb",
            &[
                "--no-data-checksums",
                "-U",
                "postgres",
                "-D",
                &data.display().to_string(),
            ],
        );
        let answers = {
            let server = PgServer::start(bin, dir.path());
            let host = dir.path().display().to_string();
            pg_ok(
                bin,
                "pgbench",
                &["-i", "-s", "2", "-q", "-h", &host, "-U", "postgres", "postgres"],
            );
            server.psql(
                "CREATE TABLE toasty (id int PRIMARY KEY, body text);
                 ALTER TABLE toasty ALTER COLUMN body SET STORAGE EXTERNAL;
                 INSERT INTO toasty SELECT g, repeat(md5(g::text), 200 + g % 50) FROM generate_series(1, 3000) g;
                 CHECKPOINT;",
            );
            server.psql(QUERIES)
        };
        assert!(answers.contains("200000|"), "{answers}");
        Template {
            _dir: dir,
            data,
            answers,
        }
    })
}

/// A fresh copy of the template cluster: (guard, root for PgServer, data directory).
fn copy_of_template(bin: &Path, prefix: &str) -> (tempfile::TempDir, PathBuf) {
    let t = template(bin);
    let dir = pg_cluster_dir(prefix);
    let ok = std::process::Command::new("cp")
        .args(["-a"])
        .arg(&t.data)
        .arg(dir.path().join("data"))
        .status()
        .unwrap()
        .success();
    assert!(ok);
    chown_to_pg_user(dir.path());
    let data = dir.path().join("data");
    (dir, data)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// stderr with the program name taken out, to compare pageio's lines with pg_checksums'.
fn stderr_lines(out: &Output, program: &str) -> Vec<String> {
    text(&out.stderr)
        .lines()
        .filter(|l| !l.contains("hint:"))
        .map(|l| l.replacen(&format!("{program}: "), "", 1))
        .collect()
}

fn pageio_checksums(args: &[&str], data: &Path) -> Output {
    let mut all = vec!["checksums"];
    all.extend_from_slice(args);
    let data = data.display().to_string();
    all.extend_from_slice(&["-D", &data]);
    pageio_bounded(&all, RUN_BOUND_SECS)
}

fn pg_checksums(bin: &Path, args: &[&str], data: &Path) -> Output {
    let data = data.display().to_string();
    let mut all: Vec<&str> = args.to_vec();
    all.extend_from_slice(&["-D", &data]);
    pg(bin, "pg_checksums", &all)
}

/// Asserts both tools printed the same stdout and stderr lines (program names aside) and
/// exited alike.
fn assert_same_outcome(ours: &Output, theirs: &Output, what: &str) {
    assert_eq!(
        ours.status.code(),
        theirs.status.code(),
        "{what}: exit status\npageio: {}{}\npg_checksums: {}{}",
        text(&ours.stdout),
        text(&ours.stderr),
        text(&theirs.stdout),
        text(&theirs.stderr)
    );
    assert_eq!(text(&ours.stdout), text(&theirs.stdout), "{what}: stdout");
    assert_eq!(
        stderr_lines(ours, "pageio"),
        stderr_lines(theirs, "pg_checksums"),
        "{what}: stderr"
    );
}

/// Every relation file of a cluster, relative path → bytes.
fn relation_files(data: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut dirs = vec![data.join("global")];
    for e in std::fs::read_dir(data.join("base")).unwrap() {
        dirs.push(e.unwrap().path());
    }
    for dir in dirs {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if name.starts_with(|c: char| c.is_ascii_digit()) {
                out.push((
                    p.strip_prefix(data).unwrap().display().to_string(),
                    std::fs::read(&p).unwrap(),
                ));
            }
        }
    }
    out.sort();
    out
}

/// Starts the cluster, checks `data_checksums` and the answers, stops it.
fn assert_starts_with(bin: &Path, root: &Path, checksums: &str) {
    let server = PgServer::start(bin, root);
    assert_eq!(server.psql("SHOW data_checksums;").trim(), checksums);
    assert_eq!(
        server.psql(QUERIES),
        template(bin).answers,
        "every row intact"
    );
}

/// `ControlFileData.time`'s bytes ("pg_control last modified").
const CONTROL_TIME: std::ops::Range<usize> = 24..32;
/// `ControlFileData.crc`'s bytes (after the 292 bytes it covers).
const CONTROL_CRC: std::ops::Range<usize> = 292..296;

fn control_time_s(control: &[u8]) -> i64 {
    i64::from_le_bytes(control[CONTROL_TIME].try_into().unwrap())
}

fn unix_now_s() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn enable_matches_pg_checksums(method: &str) {
    let Some(bin) = pg_bin() else { return };
    let (ours_dir, ours) = copy_of_template(&bin, "pageio-checksums-ours");
    let (_theirs_dir, theirs) = copy_of_template(&bin, "pageio-checksums-theirs");
    let control_before = std::fs::read(ours.join("global/pg_control")).unwrap();
    if control_time_s(&control_before) >= unix_now_s() {
        // The template was shut down this second: wait, so a time left unchanged shows.
        std::thread::sleep(std::time::Duration::from_millis(1100));
    }
    let started_s = unix_now_s();
    let out = pageio_checksums(&["--enable", "--io-method", method], &ours);
    let reference = pg_checksums(&bin, &["--enable"], &theirs);
    let ended_s = unix_now_s();
    assert_same_outcome(&out, &reference, "--enable");
    let stdout = text(&out.stdout);
    assert!(
        stdout.starts_with("Checksum operation completed\nFiles scanned:"),
        "{stdout}"
    );
    assert!(
        stdout.ends_with("Checksums enabled in cluster\n"),
        "{stdout}"
    );
    // The very same pages: pg_checksums and pageio wrote identical files.
    let (a, b) = (relation_files(&ours), relation_files(&theirs));
    assert_eq!(a.len(), b.len());
    for ((name_a, bytes_a), (name_b, bytes_b)) in a.iter().zip(&b) {
        assert_eq!(name_a, name_b);
        assert!(
            bytes_a == bytes_b,
            "{name_a} differs from pg_checksums' result"
        );
    }
    // pg_control too, "last modified" time included: both set it while they ran (it was the
    // template's before), and with pg_checksums' time in its place (the two ran seconds
    // apart) every byte, the CRC included, is pg_checksums'.
    let mut control = std::fs::read(ours.join("global/pg_control")).unwrap();
    let reference_control = std::fs::read(theirs.join("global/pg_control")).unwrap();
    for (name, c) in [("ours", &control), ("pg_checksums'", &reference_control)] {
        let time_s = control_time_s(c);
        assert!(
            (started_s..=ended_s).contains(&time_s),
            "{name} pg_control time {time_s} outside the run {started_s}..={ended_s}"
        );
    }
    assert!(control_time_s(&control_before) < started_s);
    let our_time = control_time_s(&control);
    control[CONTROL_TIME].copy_from_slice(&reference_control[CONTROL_TIME]);
    if control != reference_control {
        // Equal times must give equal CRCs: only then is the rest compared with the CRC.
        assert_ne!(our_time, control_time_s(&reference_control));
        let crc = CONTROL_CRC;
        assert_eq!(control[..crc.start], reference_control[..crc.start]);
        assert_eq!(control[crc.end..], reference_control[crc.end..]);
    }
    let check = pg_checksums(&bin, &["--check"], &ours);
    assert_eq!(check.status.code(), Some(0), "{}", text(&check.stderr));
    assert!(text(&check.stdout).contains("Bad checksums:  0\n"));
    assert_starts_with(&bin, ours_dir.path(), "on");
    // And our own --check agrees, through the same code as `pageio verify`.
    let our_check = pageio_checksums(&["--check", "--io-method", method], &ours);
    assert_same_outcome(
        &our_check,
        &pg_checksums(&bin, &["--check"], &ours),
        "--check",
    );
}

fn enable_matches_pg_checksums_sync() {
    enable_matches_pg_checksums("sync")
}
fn enable_matches_pg_checksums_worker() {
    enable_matches_pg_checksums("worker")
}
fn enable_matches_pg_checksums_io_uring() {
    enable_matches_pg_checksums("io_uring")
}

fn refusals_and_disable_match_pg_checksums() {
    let Some(bin) = pg_bin() else { return };
    let (dir, data) = copy_of_template(&bin, "pageio-checksums-refusals");
    // Already disabled.
    assert_same_outcome(
        &pageio_checksums(&["--disable"], &data),
        &pg_checksums(&bin, &["--disable"], &data),
        "--disable when disabled",
    );
    // --filenode outside --check.
    let ours = pageio_checksums(&["--enable", "-f", "1259"], &data);
    assert_same_outcome(
        &ours,
        &pg_checksums(&bin, &["--enable", "-f", "1259"], &data),
        "--enable --filenode",
    );
    assert!(text(&ours.stderr).contains("option -f/--filenode can only be used with --check"));
    // Usage errors exit as pg_checksums' do (1), each message naming what was wrong.
    for (args, named) in [
        (&["--enable", "--sync-method", "bogus"][..], "bogus"),
        (&["--enable", "--no-such-option"][..], "--no-such-option"),
    ] {
        let ours = pageio_checksums(args, &data);
        let theirs = pg_checksums(&bin, args, &data);
        assert_eq!(ours.status.code(), theirs.status.code(), "{args:?}");
        assert_eq!(ours.status.code(), Some(1), "{args:?}");
        assert!(text(&ours.stderr).contains(named), "{}", text(&ours.stderr));
    }
    // Running.
    {
        let _server = PgServer::start(&bin, dir.path());
        let ours = pageio_checksums(&["--enable"], &data);
        assert_same_outcome(
            &ours,
            &pg_checksums(&bin, &["--enable"], &data),
            "--enable on a running cluster",
        );
        assert!(text(&ours.stderr).contains("error: cluster must be shut down"));
        assert_same_outcome(
            &pageio_checksums(&["--disable"], &data),
            &pg_checksums(&bin, &["--disable"], &data),
            "--disable on a running cluster",
        );
    }
    // Enabled, then enabling again, then disabling (verbose: the version line too).
    assert_eq!(
        pageio_checksums(&["--enable"], &data).status.code(),
        Some(0)
    );
    assert_same_outcome(
        &pageio_checksums(&["--enable"], &data),
        &pg_checksums(&bin, &["--enable"], &data),
        "--enable when enabled",
    );
    let ours = pageio_checksums(&["--disable", "-v"], &data);
    assert_eq!(
        text(&ours.stdout),
        "Data checksum version: 0\nChecksums disabled in cluster\n"
    );
    assert_eq!(
        stderr_lines(&ours, "pageio"),
        ["syncing data directory", "updating control file"]
    );
    assert_starts_with(&bin, dir.path(), "off");
    // Not cleanly shut down: a server killed with SIGKILL.
    let server = PgServer::start(&bin, dir.path());
    let pid: i32 = std::fs::read_to_string(data.join("postmaster.pid"))
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SAFETY: a plain kill(2) of the postmaster this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let ours = pageio_checksums(&["--enable"], &data);
    assert_same_outcome(
        &ours,
        &pg_checksums(&bin, &["--enable"], &data),
        "--enable after a crash",
    );
    assert_eq!(ours.status.code(), Some(1));
    // The postmaster is gone (its children exit when they notice): nothing to stop.
    std::mem::forget(server);
}

/// `kill -9` at a step: the cluster starts with checksums off and every row intact, and
/// `--enable` then completes.
fn killed_at(step: Option<&str>) {
    let Some(bin) = pg_bin() else { return };
    let (dir, data) = copy_of_template(&bin, "pageio-checksums-kill");
    let control_before = std::fs::read(data.join("global/pg_control")).unwrap();
    let data_arg = data.display().to_string();
    // A killed process leaves its `pageio aios` area behind (stale, by design): keep it in
    // this test's directory, removed with it, rather than in the shared /dev/shm.
    let publish_dir = dir.path().join("aios");
    std::fs::create_dir(&publish_dir).unwrap();
    let publish_arg = publish_dir.display().to_string();
    let out = match step {
        Some(step) => pageio_bounded_with(
            &[
                "checksums",
                "--enable",
                "--aio-publish-dir",
                &publish_arg,
                "-D",
                &data_arg,
            ],
            RUN_BOUND_SECS,
            |c| {
                c.env("PAGEIO_CHECKSUMS_CRASH_AT", step);
            },
        ),
        None => {
            // Mid-rewrite: one thread, one write at a time, direct I/O (slow enough to
            // be caught in the middle), killed after 150 ms.
            let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_pageio"))
                .args([
                    "checksums",
                    "--enable",
                    "-j",
                    "1",
                    "--io-method",
                    "sync",
                    "--effective-io-concurrency",
                    "1",
                    "--io-combine-limit",
                    "1",
                    "--direct-io",
                    "on",
                    "--aio-publish-dir",
                    &publish_arg,
                    "-D",
                    &data_arg,
                ])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            std::thread::sleep(std::time::Duration::from_millis(150));
            let _ = child.kill();
            child.wait_with_output().unwrap()
        }
    };
    use std::os::unix::process::ExitStatusExt;
    if step.is_some() {
        assert_eq!(
            out.status.signal(),
            Some(libc::SIGKILL),
            "{}",
            text(&out.stderr)
        );
        assert_eq!(
            std::fs::read(data.join("global/pg_control")).unwrap(),
            control_before,
            "pg_control untouched"
        );
    }
    let killed = out.status.signal() == Some(libc::SIGKILL);
    if killed {
        assert_starts_with(&bin, dir.path(), "off");
        let again = pageio_checksums(&["--enable"], &data);
        assert_eq!(again.status.code(), Some(0), "{}", text(&again.stderr));
    } else {
        eprintln!("the run finished before the kill; checking the completed cluster");
    }
    let check = pg_checksums(&bin, &["--check"], &data);
    assert_eq!(check.status.code(), Some(0), "{}", text(&check.stderr));
    assert_starts_with(&bin, dir.path(), "on");
}

fn killed_mid_rewrite() {
    killed_at(None)
}
fn killed_after_every_page_is_written() {
    killed_at(Some("sync"))
}
fn killed_after_sync_before_pg_control() {
    killed_at(Some("control"))
}

/// A copy of the cluster on a tmpfs filled to the last byte: `--enable` overwrites pages
/// in place, which allocates nothing, so it completes (a real full file system cannot make
/// it fail; the ENOSPC path is tested by fault injection in the library's
/// `checksums_enable` tests) — and the result passes `pg_checksums --check`.
fn a_full_file_system_does_not_stop_enable() {
    let Some(bin) = pg_bin() else { return };
    if !common::have_root("a_full_file_system_does_not_stop_enable") {
        return;
    }
    let t = template(&bin);
    let tmpfs = common::SmallTmpfs::mount("200m");
    let data = tmpfs.path().join("data");
    let ok = std::process::Command::new("cp")
        .arg("-a")
        .arg(&t.data)
        .arg(&data)
        .status()
        .unwrap()
        .success();
    assert!(ok);
    // Fill what is left: dd stops with ENOSPC.
    let _ = std::process::Command::new("dd")
        .args(["if=/dev/zero", "bs=1M", "status=none"])
        .arg(format!("of={}", tmpfs.path().join("filler").display()))
        .status();
    // SAFETY: statvfs writes into the struct it is given.
    let free_bytes = unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        let path = std::ffi::CString::new(tmpfs.path().to_str().unwrap()).unwrap();
        assert_eq!(libc::statvfs(path.as_ptr(), &mut st), 0);
        st.f_bavail * st.f_frsize
    };
    assert!(free_bytes < 1 << 20, "{free_bytes} bytes still free");
    let out = pageio_checksums(&["--enable"], &data);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).ends_with("Checksums enabled in cluster\n"));
    std::fs::set_permissions(
        tmpfs.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    chown_to_pg_user(&data);
    let check = pg_checksums(&bin, &["--check"], &data);
    assert_eq!(check.status.code(), Some(0), "{}", text(&check.stderr));
}

/// Each case on its own thread with a bound, so a hang fails the test.
macro_rules! watched {
    ($($name:ident),* $(,)?) => {
        mod watched {
            $( #[test] fn $name() { super::with_watchdog(stringify!($name), super::WATCHDOG_SECS, super::$name) } )*
        }
    };
}

watched!(
    enable_matches_pg_checksums_sync,
    enable_matches_pg_checksums_worker,
    enable_matches_pg_checksums_io_uring,
    refusals_and_disable_match_pg_checksums,
    killed_mid_rewrite,
    killed_after_every_page_is_written,
    killed_after_sync_before_pg_control,
    a_full_file_system_does_not_stop_enable,
);
