//! `pageio aios --dsn …` against a real PostgreSQL 18 server built here.
//!
//! A cluster with `shared_buffers=16MB` and a table `big` of ~135 MB (larger than
//! shared_buffers, so a sequential scan reads through a ring buffer and every block is an
//! I/O), the page cache dropped (as root), and a psql session scanning `big` in a loop:
//! `pageio aios --dsn … --json --interval 0.1 --count N` must show `pg_aios` rows of that
//! session's pid with the relation resolved to `public.big`, and `pg_stat_io` read counts
//! that grow across samples. The in-flight I/O is transient, so sampling is retried within
//! a bound. Under every io_method this PostgreSQL build has (worker, sync; io_uring only
//! when built with liburing). The server logs every statement (`log_statement=all`), and
//! every statement the command sent must be a SELECT inside a read-only transaction.
//!
//! A second session scans a table in another database: its I/Os are shown by file and
//! relfilenode with that database's name, saying why the relation has no name.
//! Under worker, `--watch` runs full screen in tmux: its panels and columns show, it
//! refreshes, and `q` ends it.
//!
//! Errors: a server older than 18 (a fake speaking the protocol as PostgreSQL 17), an
//! unreachable server (a refused port, and a port that accepts but never
//! answers: bounded by connect_timeout, no hang), a role without pg_read_all_stats, a bad
//! DSN: exit 2 with a message naming the cause and the fix.
//!
//! PostgreSQL comes from `bench/setup-postgres.sh` or `$PAGEIO_PG_BIN`; without it the
//! tests print a skip line, except under `CI`, where they fail.

mod common;
use common::{
    chown_to_pg_user, initdb, is_root, pageio_bounded, pg_bin, pg_cluster_dir, with_watchdog,
    PgServer,
};

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Rows of `big`: 1M rows of ~130 bytes is ~135 MB, eight times shared_buffers.
const BIG_ROWS: u64 = 1_000_000;

/// How long the test keeps sampling for an in-flight I/O of the scanning session before it
/// fails: a cold scan of 135 MB keeps I/Os in flight most of the time, so a few attempts
/// suffice; the bound only stops a broken build from looping.
const SAMPLING_BOUND: Duration = Duration::from_secs(90);

/// The settings of the test cluster: small shared_buffers, every statement logged with the
/// application name in front, so the command's statements can be picked out.
fn configure(data: &Path, io_method: &str) {
    let conf = data.join("postgresql.auto.conf");
    let text = format!(
        "shared_buffers = '16MB'\nio_method = '{io_method}'\nautovacuum = off\n\
         log_statement = 'all'\nlog_line_prefix = '%a|'\nmax_parallel_workers_per_gather = 0\n"
    );
    std::fs::write(&conf, text).unwrap();
    chown_to_pg_user(&conf);
}

/// The DSN of a server listening on a socket in `root`.
fn dsn(root: &Path, user: &str) -> String {
    format!(
        "host={} port=5432 user={user} dbname=postgres",
        root.display()
    )
}

/// Runs `sql` in the database `other`.
fn other_psql(bin: &Path, root: &Path, sql: &str) {
    let host = root.display().to_string();
    let out = Command::new(bin.join("psql"))
        .args([
            "-h",
            &host,
            "-U",
            "postgres",
            "-d",
            "other",
            "-X",
            "-qAt",
            "-v",
            "ON_ERROR_STOP=1",
            "-c",
            sql,
        ])
        .current_dir("/tmp")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Empties the page cache (root only), so the scan reads from the device.
fn drop_caches() {
    if is_root() {
        let _ = Command::new("sync").status();
        let _ = std::fs::write("/proc/sys/vm/drop_caches", "3\n");
    }
}

/// A psql session scanning `big` over and over, killed when dropped.
struct Scanner {
    child: Child,
    pid: i64,
}

impl Scanner {
    /// Starts the session and reads its backend pid (the first line it prints).
    fn start(bin: &Path, root: &Path, database: &str, table: &str) -> Scanner {
        let host = root.display().to_string();
        let mut args: Vec<String> = [
            "-h",
            &host,
            "-U",
            "postgres",
            "-d",
            database,
            "-X",
            "-qAt",
            "-c",
            "SELECT pg_backend_pid()",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        // Far more scans than the sampling needs; the session is killed at the end.
        for _ in 0..500 {
            args.push("-c".into());
            args.push(format!("SELECT count(*) FROM {table}"));
        }
        let mut child = Command::new(bin.join("psql"))
            .args(&args)
            .env("PGAPPNAME", "scanner")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .current_dir("/tmp")
            .spawn()
            .unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut first)
            .unwrap();
        let pid = first.trim().parse().unwrap_or_else(|_| {
            let _ = child.kill();
            panic!("psql did not print its backend pid: {first:?}")
        });
        // Keep draining its output so it never blocks on a full pipe.
        let mut stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        Scanner { child, pid }
    }
}

impl Drop for Scanner {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The JSON documents `pageio aios --json --count N` printed, one per line.
fn samples(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

/// `pg_stat_io` reads summed over every backend type.
fn total_reads(sample: &Value) -> f64 {
    sample["pg_stat_io"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["reads"].as_f64().unwrap_or(0.0))
        .sum()
}

/// The whole scenario under one io_method.
fn sees_a_cold_scan(bin: &Path, io_method: &str) {
    let dir = pg_cluster_dir("pageio-aios-");
    let root = dir.path().to_path_buf();
    let data = initdb(bin, &root);
    configure(&data, io_method);
    let server = PgServer::start(bin, &root);
    assert_eq!(server.psql("SHOW io_method").trim(), io_method);
    server.psql(&format!(
        "CREATE TABLE big AS SELECT g AS a, repeat('x', 100) AS b FROM generate_series(1, {BIG_ROWS}) g; \
         CHECKPOINT"
    ));
    let size_bytes: u64 = server
        .psql("SELECT pg_table_size('big')")
        .trim()
        .parse()
        .unwrap();
    assert!(size_bytes > 100 << 20, "big is only {size_bytes} bytes");
    let file = server
        .psql("SELECT pg_relation_filepath('big')")
        .trim()
        .to_string();
    // A table in another database: its I/O is shown by file, saying why it has no name.
    server.psql("CREATE DATABASE other");
    other_psql(
        bin,
        &root,
        "CREATE TABLE elsewhere AS SELECT g AS a, repeat('y', 100) AS b FROM generate_series(1, 300000) g",
    );
    let other_oid = server
        .psql("SELECT oid FROM pg_database WHERE datname = 'other'")
        .trim()
        .to_string();
    drop_caches();
    let scanner = Scanner::start(bin, &root, "postgres", "big");
    let other_scanner = Scanner::start(bin, &root, "other", "elsewhere");
    let mut seen_other: Option<Value> = None;

    let dsn = dsn(&root, "postgres");
    let deadline = Instant::now() + SAMPLING_BOUND;
    let mut seen: Option<Value> = None;
    let mut reads_grew = false;
    let mut attempts = 0;
    let wanted = |seen: &Option<Value>, seen_other: &Option<Value>, reads_grew: bool| {
        reads_grew && (io_method == "sync" || (seen.is_some() && seen_other.is_some()))
    };
    while !wanted(&seen, &seen_other, reads_grew) && Instant::now() < deadline {
        attempts += 1;
        let out = pageio_bounded(
            &[
                "aios",
                "--dsn",
                &dsn,
                "--json",
                "--interval",
                "0.1",
                "--count",
                "20",
            ],
            60,
        );
        assert!(
            out.status.success(),
            "pageio aios failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let docs = samples(&out.stdout);
        assert_eq!(docs.len(), 20, "one JSON document per sample");
        for (i, doc) in docs.iter().enumerate() {
            assert_eq!(doc["server"]["version_num"].as_i64().unwrap() / 10_000, 18);
            assert_eq!(doc["server"]["io_method"], io_method);
            assert_eq!(doc["transaction_read_only"], true);
            // The first sample has nothing to compare with; every later one has rates.
            assert_eq!(
                doc["rates"].is_null(),
                i == 0,
                "sample {i}: {}",
                doc["rates"]
            );
            for io in doc["in_flight"].as_array().unwrap() {
                // Every pg_aios column is there, spelled as in the view.
                for column in [
                    "pid",
                    "io_id",
                    "io_generation",
                    "state",
                    "operation",
                    "off",
                    "length",
                    "target",
                    "handle_data_len",
                    "raw_result",
                    "result",
                    "target_desc",
                    "f_sync",
                    "f_localmem",
                    "f_buffered",
                ] {
                    assert!(
                        io["pg_aios"].get(column).is_some(),
                        "{column} missing: {io}"
                    );
                }
                if io["pg_aios"]["pid"].as_i64() == Some(scanner.pid)
                    && io["relation"]["name"] == "big"
                {
                    assert_eq!(io["relation"]["schema"], "public", "{io}");
                    assert_eq!(io["relation"]["file"], file.as_str(), "{io}");
                    assert_eq!(io["backend_type"], "client backend", "{io}");
                    assert_eq!(io["pg_aios"]["operation"], "readv", "{io}");
                    assert!(
                        io["pg_aios"]["target_desc"]
                            .as_str()
                            .unwrap()
                            .ends_with(&format!("in file \"{file}\"")),
                        "{io}"
                    );
                    let by_relation = doc["in_flight_by_relation"].as_array().unwrap();
                    assert!(
                        by_relation
                            .iter()
                            .any(|r| r["relation"] == "public.big"
                                && r["ios"].as_u64().unwrap() >= 1),
                        "{by_relation:?}"
                    );
                    let by_backend = doc["in_flight_by_backend"].as_array().unwrap();
                    let backend = by_backend
                        .iter()
                        .find(|b| b["pid"].as_i64() == Some(scanner.pid))
                        .unwrap_or_else(|| panic!("{by_backend:?}"));
                    // Who the backend is and what it runs, from pg_stat_activity.
                    assert_eq!(backend["database"], "postgres", "{backend}");
                    assert!(
                        backend["query"]
                            .as_str()
                            .unwrap_or_default()
                            .contains("big"),
                        "{backend}"
                    );
                    seen.get_or_insert_with(|| io.clone());
                }
                // A handle just handed out has no target yet (pg_aios shows it all the
                // same): nothing to name.
                if io["pg_aios"]["target_desc"].is_null() {
                    assert!(io["relation"].is_null(), "{io}");
                    continue;
                }
                // (That session also reads shared catalogs, in global/: named as usual.)
                if io["pg_aios"]["pid"].as_i64() == Some(other_scanner.pid)
                    && io["relation"]["database_oid"].as_u64() == other_oid.parse().ok()
                {
                    let relation = &io["relation"];
                    assert_eq!(relation["database"], "other", "{io}");
                    assert!(relation["name"].is_null(), "{io}");
                    let note = relation["note"].as_str().unwrap();
                    assert!(
                        note.contains(&format!("in database \"other\" (OID {other_oid}), not the connected database \"postgres\"")),
                        "{note}"
                    );
                    let by_relation = doc["in_flight_by_relation"].as_array().unwrap();
                    let label = format!(
                        "file {} (database other)",
                        relation["file"].as_str().unwrap()
                    );
                    assert!(
                        by_relation.iter().any(|r| r["relation"] == label.as_str()),
                        "{label} not in {by_relation:?}"
                    );
                    seen_other.get_or_insert_with(|| io.clone());
                }
            }
            if io_method == "worker" {
                assert!(
                    doc["io_workers"]["count"].as_u64().unwrap() >= 1,
                    "{}",
                    doc["io_workers"]
                );
            }
        }
        let first = total_reads(&docs[0]);
        let last = total_reads(&docs[docs.len() - 1]);
        assert!(
            last >= first,
            "pg_stat_io reads went down: {first} → {last}"
        );
        if last > first {
            reads_grew = true;
            let rates = docs[docs.len() - 1]["rates"].as_array().unwrap();
            assert!(
                rates.iter().any(|r| r["backend_type"] == "client backend"),
                "{rates:?}"
            );
        }
        drop_caches();
    }
    eprintln!("{io_method}: {attempts} sampling run(s)");
    assert!(
        reads_grew,
        "{io_method}: pg_stat_io reads never grew while big was scanned"
    );
    // With io_method=sync an I/O is in pg_aios only while the scanning backend itself is in
    // the read system call; the worker method (and io_uring) keep them in flight.
    if io_method != "sync" {
        let io = seen.unwrap_or_else(|| {
            panic!(
                "{io_method}: no pg_aios row of pid {} on big within {SAMPLING_BOUND:?}",
                scanner.pid
            )
        });
        eprintln!("{io_method}: saw {io}");
        let io = seen_other.unwrap_or_else(|| {
            panic!(
                "{io_method}: no pg_aios row of pid {} (database other) within {SAMPLING_BOUND:?}",
                other_scanner.pid
            )
        });
        eprintln!("{io_method}: saw in another database {io}");
    }
    if io_method == "worker" {
        full_screen_under_tmux(&dsn);
    }
    drop(scanner);
    drop(other_scanner);

    // The plain one-snapshot view and the plain line per interval.
    let out = pageio_bounded(&["aios", "--dsn", &dsn], 60);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("PostgreSQL 18"), "{text}");
    assert!(text.contains(&format!("(io_method={io_method})")), "{text}");
    let out = pageio_bounded(
        &["aios", "--dsn", &dsn, "--interval", "0.1", "--count", "3"],
        60,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    // The plain line follows the local `aios --watch` line's fields and order.
    assert!(
        lines[0].starts_with(&format!(
            "pid=server io_method={io_method} ios_per_s=- mb_per_s=- depth="
        )),
        "{text}"
    );
    assert!(
        lines[0].contains(" read_ms_per_s=-(track_io_timing=off) workers="),
        "{text}"
    );
    assert!(
        lines[2].contains(" ios_per_s=") && !lines[2].contains(" ios_per_s=- "),
        "{text}"
    );

    // Only SELECTs, in read-only transactions.
    let statements = common::logged_statements(&root, "pageio aios");
    assert!(
        statements.len() > 20,
        "too few statements logged: {statements:?}"
    );
    for sql in &statements {
        assert!(
            sql.starts_with("SELECT ") || sql == "START TRANSACTION READ ONLY" || sql == "COMMIT",
            "pageio aios sent a statement that is not a SELECT: {sql}"
        );
    }
    assert!(statements.iter().any(|s| s.contains("pg_aios")));
    assert!(statements
        .iter()
        .any(|s| s.contains("pg_filenode_relation")));
    drop(server);
}

/// A tmux session, killed when dropped (a failing check leaves no session behind).
struct Tmux(String);

impl Tmux {
    fn capture(&self) -> String {
        let out = Command::new("tmux")
            .args(["capture-pane", "-p", "-t", &self.0])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn alive(&self) -> bool {
        Command::new("tmux")
            .args(["has-session", "-t", &self.0])
            .stderr(Stdio::null())
            .status()
            .unwrap()
            .success()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.0])
            .stderr(Stdio::null())
            .status();
    }
}

/// `--watch` on a real terminal (tmux): the full-screen view shows its panels and columns,
/// refreshes, and quits on `q`.
fn full_screen_under_tmux(dsn: &str) {
    if Command::new("tmux").arg("-V").output().is_err() {
        assert!(
            std::env::var_os("CI").is_none(),
            "tmux is missing (CI is set: a failure)"
        );
        eprintln!("SKIP the full-screen check: no tmux");
        return;
    }
    let tmux = Tmux(format!("pageio-aios-dsn-{}", std::process::id()));
    let command = format!(
        "{} aios --dsn '{dsn}' --watch --interval 0.2",
        env!("CARGO_BIN_EXE_pageio")
    );
    let ok = Command::new("tmux")
        .args([
            "new-session",
            "-d",
            "-s",
            &tmux.0,
            "-x",
            "160",
            "-y",
            "45",
            &command,
        ])
        .status()
        .unwrap()
        .success();
    assert!(ok, "tmux new-session");
    let wait_for = |what: &dyn Fn(&str) -> bool, bound: Duration| -> String {
        let deadline = Instant::now() + bound;
        loop {
            let screen = tmux.capture();
            if what(&screen) {
                return screen;
            }
            assert!(Instant::now() < deadline, "screen never matched:\n{screen}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let columns = [
        "pg_stat_io, per second",
        "backend_type",
        "reads/s",
        "read MB/s",
        "hits/s",
        "in flight by backend",
        "in flight by relation",
        "io workers",
        "pg_aios",
        "target_desc",
        "client backend",
    ];
    let first = wait_for(
        &|screen| columns.iter().all(|c| screen.contains(c)),
        Duration::from_secs(20),
    );
    let stamp = |screen: &str| {
        screen
            .lines()
            .next()
            .and_then(|line| line.split("sampled ").nth(1))
            .unwrap_or_default()
            .to_string()
    };
    let first_stamp = stamp(&first);
    assert!(!first_stamp.is_empty(), "{first}");
    wait_for(
        &|screen| !stamp(screen).is_empty() && stamp(screen) != first_stamp,
        Duration::from_secs(20),
    );
    let ok = Command::new("tmux")
        .args(["send-keys", "-t", &tmux.0, "q"])
        .status()
        .unwrap()
        .success();
    assert!(ok, "tmux send-keys");
    let deadline = Instant::now() + Duration::from_secs(10);
    while tmux.alive() {
        assert!(Instant::now() < deadline, "q did not end the watch");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn aios_dsn_sees_a_cold_seq_scan_under_each_io_method() {
    let Some(bin) = pg_bin() else { return };
    with_watchdog("aios_dsn_sees_a_cold_seq_scan", 600, move || {
        for io_method in common::server_io_methods(&bin) {
            sees_a_cold_scan(&bin, io_method);
        }
    });
}

/// Exit status 2 and stderr naming `needles`, within `bound_secs`.
fn fails_with(args: &[&str], bound_secs: u64, needles: &[&str]) -> String {
    let started = Instant::now();
    let out = pageio_bounded(args, bound_secs);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(
        out.stdout.is_empty(),
        "{args:?} printed: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    for needle in needles {
        assert!(stderr.contains(needle), "{needle:?} missing from: {stderr}");
    }
    eprintln!("{args:?} → {stderr} ({:?})", started.elapsed());
    stderr
}

#[test]
fn aios_dsn_unreachable_server_is_a_bounded_error() {
    with_watchdog("aios_dsn_unreachable", 120, || {
        // Nobody listens: refused at once.
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let refused = format!("host=127.0.0.1 port={port} user=u dbname=d");
        fails_with(
            &["aios", "--dsn", &refused],
            30,
            &[
                &format!("pageio: error: cannot connect to PostgreSQL at host=127.0.0.1 port={port} dbname=d user=u"),
                "check that the server runs",
            ],
        );
        // Something accepts and never answers: the startup exchange would wait forever
        // without the bound.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let holder = std::thread::spawn(move || {
            let held: Vec<_> = listener.incoming().take(1).collect();
            std::thread::sleep(Duration::from_secs(20));
            drop(held);
        });
        let silent = format!("host=127.0.0.1 port={port} user=u dbname=d connect_timeout=1");
        let started = Instant::now();
        fails_with(
            &["aios", "--dsn", &silent],
            15,
            &[
                "did not answer within 2 s while connecting",
                "connect_timeout",
            ],
        );
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
        drop(holder);
        // A DSN that does not parse.
        fails_with(
            &["aios", "--dsn", "host=/tmp bogus=1"],
            15,
            &["invalid --dsn", "e.g. --dsn 'host="],
        );
        fails_with(
            &["aios", "--dsn", "host=/tmp", "--interval", "0"],
            15,
            &["--interval 0 is out of range"],
        );
    });
}

#[test]
fn aios_dsn_role_without_pg_read_all_stats_is_told_what_to_grant() {
    let Some(bin) = pg_bin() else { return };
    with_watchdog("aios_dsn_privilege", 300, move || {
        let dir = pg_cluster_dir("pageio-aios-role-");
        let root = dir.path().to_path_buf();
        initdb(&bin, &root);
        let server = PgServer::start(&bin, &root);
        server.psql("CREATE ROLE watcher LOGIN");
        let dsn = dsn(&root, "watcher");
        fails_with(
            &["aios", "--dsn", &dsn],
            60,
            &[
                "role \"watcher\" may not read pg_aios",
                "pg_read_all_stats",
                "GRANT pg_read_all_stats TO \"watcher\"",
            ],
        );
        // The fix the message gives works.
        server.psql("GRANT pg_read_all_stats TO watcher");
        let out = pageio_bounded(&["aios", "--dsn", &dsn, "--json"], 60);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(doc["server"]["role"], "watcher");
        // The I/O workers are named (pg_read_all_stats shows their wait events).
        assert!(doc["io_workers"]["count"].as_u64().unwrap() >= 1, "{doc}");
        drop(server);
    });
}

/// Appends one backend message: its type byte, its length (which counts itself) and body.
fn message(out: &mut Vec<u8>, kind: u8, body: &[u8]) {
    out.push(kind);
    out.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
    out.extend_from_slice(body);
}

/// A server speaking just enough of the PostgreSQL protocol (v3) to claim a version:
/// it trusts the startup, answers each simple query with one row of `values` (text
/// columns), and stops at the client's Terminate or end of stream. Returns the port and a
/// handle yielding the queries it was sent.
fn fake_server(values: Vec<&'static str>) -> (u16, std::thread::JoinHandle<Vec<String>>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut length = [0u8; 4];
        stream.read_exact(&mut length).unwrap();
        let mut startup = vec![0u8; u32::from_be_bytes(length) as usize - 4];
        stream.read_exact(&mut startup).unwrap();
        let mut out = Vec::new();
        message(&mut out, b'R', &0u32.to_be_bytes()); // AuthenticationOk
        let mut key = 4242u32.to_be_bytes().to_vec();
        key.extend_from_slice(&7u32.to_be_bytes());
        message(&mut out, b'K', &key);
        message(&mut out, b'Z', b"I");
        stream.write_all(&out).unwrap();
        let mut queries = Vec::new();
        loop {
            let mut kind = [0u8; 1];
            if stream.read_exact(&mut kind).is_err() {
                break;
            }
            stream.read_exact(&mut length).unwrap();
            let mut body = vec![0u8; u32::from_be_bytes(length) as usize - 4];
            stream.read_exact(&mut body).unwrap();
            match kind[0] {
                b'Q' => {
                    queries.push(String::from_utf8_lossy(&body[..body.len() - 1]).into_owned());
                    let mut out = Vec::new();
                    let mut description = (values.len() as u16).to_be_bytes().to_vec();
                    for i in 0..values.len() {
                        description.extend_from_slice(format!("c{i}\0").as_bytes());
                        description.extend_from_slice(&0u32.to_be_bytes()); // table
                        description.extend_from_slice(&0u16.to_be_bytes()); // column
                        description.extend_from_slice(&25u32.to_be_bytes()); // text
                        description.extend_from_slice(&(-1i16).to_be_bytes());
                        description.extend_from_slice(&(-1i32).to_be_bytes());
                        description.extend_from_slice(&0u16.to_be_bytes());
                    }
                    message(&mut out, b'T', &description);
                    let mut row = (values.len() as u16).to_be_bytes().to_vec();
                    for value in &values {
                        row.extend_from_slice(&(value.len() as u32).to_be_bytes());
                        row.extend_from_slice(value.as_bytes());
                    }
                    message(&mut out, b'D', &row);
                    message(&mut out, b'C', b"SELECT 1\0");
                    message(&mut out, b'Z', b"I");
                    stream.write_all(&out).unwrap();
                }
                b'X' => break,
                other => panic!(
                    "the fake server only speaks the simple protocol, got {:?}",
                    other as char
                ),
            }
        }
        queries
    });
    (port, handle)
}

#[test]
fn aios_dsn_server_older_than_18_is_named() {
    with_watchdog("aios_dsn_old_server", 60, || {
        let (port, server) = fake_server(vec!["170002", "17.2", "postgres", "u", "5", "", ""]);
        let dsn = format!("host=127.0.0.1 port={port} user=u dbname=postgres");
        fails_with(
            &["aios", "--dsn", &dsn],
            30,
            &[&format!(
                "pageio: error: PostgreSQL at host=127.0.0.1 port={port} dbname=postgres user=u is version 17.2 (server_version_num 170002): the pg_aios view exists from PostgreSQL 18 on; point --dsn at a PostgreSQL 18 server"
            )],
        );
        // Only the version was asked, nothing version-specific.
        let queries = server.join().unwrap();
        assert_eq!(queries.len(), 1, "{queries:?}");
        assert!(
            queries[0].starts_with("SELECT current_setting('server_version_num')"),
            "{queries:?}"
        );
    });
}
