//! `pageio verify --online` against a real PostgreSQL 18 server under write load.
//!
//! - Under load: a pgbench database (`pgbench -i -s 5`), `pgbench -c 8` running updates,
//!   and a second client creating, filling, truncating, rewriting (`VACUUM FULL`) and
//!   dropping tables in a loop, with `shared_buffers=16MB` and `checkpoint_timeout=30s` so
//!   pages are written while we read. `verify --online` runs again and again, cycling
//!   pageio's io_method (sync, worker, io_uring), under each server io_method this build has:
//!   0 corrupt pages in every run, exit 0; the re-read, skipped and changed-file counts are
//!   printed.
//! - Damage in relations the server is not writing (written, checkpointed, the server
//!   restarted so none of their pages is in shared buffers, autovacuum off for them): a
//!   flipped byte, a zeroed page header, a wrong stored checksum. Each is reported with its
//!   file, block and relation name (`--dsn`), the page LSN older than the redo LSN, and
//!   every read agreeing; exit 1. The server is unaffected: the files the check read are
//!   byte-identical after it, its log has no ERROR or FATAL, and the statements the check
//!   sent are only its SELECTs (and CHECKPOINT only with `--checkpoint`).
//! - Refusals: `--online` on a stopped cluster, no `--online` on a running one (the hint
//!   names `--online`), data checksums off.
//!
//! PostgreSQL comes from `bench/setup-postgres.sh` or `$PAGEIO_PG_BIN`; without it the tests
//! print a skip line, except under `CI`, where they fail.

mod common;
use common::{
    chown_to_pg_user, initdb, pageio_bounded, pg, pg_bin, pg_cluster_dir, pg_ok, with_watchdog,
    PgServer,
};

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

/// Online runs per server io_method in the load test: with two or three server methods,
/// at least 20 runs in all.
const RUNS_PER_SERVER_METHOD: usize = 10;

/// The application name the command's sessions carry.
const APP: &str = "pageio verify --online";

/// The settings of a test cluster: pages written while we read (a small shared_buffers, a
/// short checkpoint_timeout), every statement logged with the application name in front.
fn configure(data: &Path, io_method: &str) {
    let conf = data.join("postgresql.auto.conf");
    let text = format!(
        "shared_buffers = '16MB'\ncheckpoint_timeout = '30s'\nio_method = '{io_method}'\n\
         log_statement = 'all'\nlog_line_prefix = '%a|'\n"
    );
    std::fs::write(&conf, text).unwrap();
    chown_to_pg_user(&conf);
}

fn dsn(root: &Path) -> String {
    format!(
        "host={} port=5432 user=postgres dbname=postgres",
        root.display()
    )
}

/// A client process killed (and reaped) when dropped.
struct Load(Child);

impl Drop for Load {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs PostgreSQL's `program` with `args` in the background as the server's user.
fn spawn_pg(bin: &Path, program: &str, args: &[&str]) -> Load {
    let mut c = if common::is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", common::PG_USER, "--"]).arg(bin.join(program));
        c
    } else {
        Command::new(bin.join(program))
    };
    c.args(args)
        .current_dir("/tmp")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    Load(c.spawn().unwrap())
}

/// `pgbench -c 8` of updates for `secs` seconds.
fn pgbench_load(bin: &Path, root: &Path, secs: u32) -> Load {
    let host = root.display().to_string();
    let t = secs.to_string();
    spawn_pg(
        bin,
        "pgbench",
        &[
            "-h", &host, "-U", "postgres", "-n", "-c", "8", "-T", &t, "postgres",
        ],
    )
}

/// A second client changing the set of files: tables created, filled, truncated, rewritten
/// and dropped, over and over (a psql script of many rounds, killed when dropped).
fn ddl_load(bin: &Path, root: &Path) -> Load {
    let mut script = String::from("\\set ON_ERROR_STOP 0\n");
    for i in 0..400 {
        script.push_str(&format!(
            "CREATE TABLE churn_{i} AS SELECT g AS id, repeat('x', 200) AS pad FROM generate_series(1, 2000) g;\n\
             TRUNCATE churn_{i};\n\
             INSERT INTO churn_{i} SELECT g, repeat('y', 100) FROM generate_series(1, 500) g;\n\
             VACUUM FULL pgbench_tellers;\n\
             DROP TABLE churn_{i};\n"
        ));
    }
    let path = root.join("churn.sql");
    std::fs::write(&path, script).unwrap();
    chown_to_pg_user(&path);
    let host = root.display().to_string();
    let file = path.display().to_string();
    spawn_pg(
        bin,
        "psql",
        &[
            "-h", &host, "-U", "postgres", "-X", "-q", "-f", &file, "postgres",
        ],
    )
}

/// A cluster with a pgbench database, started with `io_method`.
fn pgbench_cluster(
    bin: &Path,
    prefix: &str,
    io_method: &str,
    scale: &str,
) -> (tempfile::TempDir, PgServer, PathBuf) {
    let root = pg_cluster_dir(prefix);
    let data = initdb(bin, root.path());
    configure(&data, io_method);
    let server = PgServer::start(bin, root.path());
    let host = root.path().display().to_string();
    pg_ok(
        bin,
        "pgbench",
        &[
            "-h", &host, "-U", "postgres", "-i", "-q", "-s", scale, "postgres",
        ],
    );
    (root, server, data)
}

/// Runs `verify --online … --json` and returns (exit status, the object).
fn online_json(data: &Path, extra: &[&str]) -> (i32, Value, String) {
    let data = data.display().to_string();
    let mut args = vec!["verify", "--online", "--json"];
    args.extend_from_slice(extra);
    args.push(&data);
    let out = pageio_bounded(&args, 120);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let json: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}\nstderr: {stderr}"));
    (out.status.code().unwrap_or(-1), json, stderr)
}

/// The lines of the server's log written by the command's sessions.
fn our_log_lines(root: &Path) -> Vec<String> {
    std::fs::read_to_string(root.join("log"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with(&format!("{APP}|")))
        .map(str::to_string)
        .collect()
}

#[test]
fn online_check_under_write_load_finds_no_corruption() {
    let Some(bin) = pg_bin() else { return };
    with_watchdog("verify --online under load", 600, move || {
        let mut runs = 0;
        for server_method in common::server_io_methods(&bin) {
            let (root, server, data) =
                pgbench_cluster(&bin, "pageio-online-load", server_method, "5");
            let _pgbench = pgbench_load(&bin, root.path(), 60);
            let _ddl = ddl_load(&bin, root.path());
            std::thread::sleep(Duration::from_millis(500));
            let (mut reread, mut skipped, mut changed) = (0, 0, 0);
            for i in 0..RUNS_PER_SERVER_METHOD {
                let method = ["sync", "worker", "io_uring"][i % 3];
                let mut extra = vec!["--io-method", method];
                let dsn = dsn(root.path());
                if i == 0 {
                    extra.extend(["--dsn", &dsn, "--checkpoint"]);
                }
                let (status, json, stderr) = online_json(&data, &extra);
                eprintln!(
                    "server {server_method}, pageio {method}: {} blocks, {} re-read, {} skipped, {} corrupt; files vanished {}, shrunk {}, new {}, unlogged {}; {:.0} MB/s",
                    json["blocks_scanned"], json["pages_reread"], json["pages_skipped"],
                    json["bad_checksums"], json["files_vanished"], json["files_shrunk"],
                    json["files_new"], json["files_unlogged_skipped"], json["mb_per_s"].as_f64().unwrap_or(0.0)
                );
                assert_eq!(status, 0, "{json}\n{stderr}");
                assert_eq!(json["bad_checksums"], 0, "{json}\n{stderr}");
                assert_eq!(json["failures"].as_array().map(Vec::len), Some(0));
                assert!(
                    json["blocks_scanned"].as_u64().unwrap() > 5 * 1600,
                    "{json}"
                );
                reread += json["pages_reread"].as_u64().unwrap();
                skipped += json["pages_skipped"].as_u64().unwrap();
                changed += json["files_vanished"].as_u64().unwrap()
                    + json["files_shrunk"].as_u64().unwrap()
                    + json["files_new"].as_u64().unwrap();
                runs += 1;
            }
            eprintln!("server {server_method}: {reread} pages re-read, {skipped} skipped, {changed} files changed over {RUNS_PER_SERVER_METHOD} runs");
            // The one run with --checkpoint sent exactly its SELECT and CHECKPOINT; the
            // others sent nothing; the server logged no error caused by the check.
            let ours = our_log_lines(root.path());
            let statements: Vec<&String> = ours.iter().filter(|l| l.contains("LOG:  ")).collect();
            assert_eq!(statements.len(), 2, "{ours:#?}");
            assert!(
                statements[0].ends_with("SELECT oid, datname, datallowconn FROM pg_database"),
                "{ours:#?}"
            );
            assert!(
                statements[1].ends_with("statement: CHECKPOINT"),
                "{ours:#?}"
            );
            assert!(
                !ours
                    .iter()
                    .any(|l| l.contains("ERROR") || l.contains("FATAL") || l.contains("reset")),
                "{ours:#?}"
            );
            drop(server);
        }
        assert!(runs >= 20, "{runs} runs");
    });
}

/// `pg_relation_filepath` of a table, as a path under the data directory.
fn file_of(server: &PgServer, data: &Path, table: &str) -> PathBuf {
    let rel = server.psql(&format!("SELECT pg_relation_filepath('{table}')"));
    data.join(rel.trim())
}

/// Changes bytes of block `block` of `file` in place (the server does not hold that page).
fn damage(file: &Path, block: u64, change: impl FnOnce(&mut [u8])) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(file)
        .unwrap();
    let mut page = vec![0u8; 8192];
    f.read_exact_at(&mut page, block * 8192).unwrap();
    change(&mut page);
    f.write_all_at(&page, block * 8192).unwrap();
    f.sync_all().unwrap();
}

#[test]
fn damage_in_cold_relations_is_reported_with_file_block_and_name() {
    let Some(bin) = pg_bin() else { return };
    with_watchdog("verify --online damage", 300, move || {
        let (root, server, data) = pgbench_cluster(&bin, "pageio-online-damage", "worker", "1");
        for t in ["cold_a", "cold_b", "cold_c", "cold_d"] {
            server.psql(&format!(
                "CREATE TABLE {t} (id int, note text) WITH (autovacuum_enabled = off);\
                 INSERT INTO {t} SELECT g, md5(g::text) FROM generate_series(1, 1000) g"
            ));
        }
        let files: Vec<PathBuf> = ["cold_a", "cold_b", "cold_c", "cold_d"]
            .iter()
            .map(|t| file_of(&server, &data, t))
            .collect();
        server.psql("CHECKPOINT");
        // A restart empties shared buffers: the server holds none of the cold pages, and
        // nothing reads them again, so it never writes them back.
        drop(server);
        let server = PgServer::start(&bin, root.path());
        damage(&files[0], 1, |p| p[4000] ^= 0x10);
        damage(&files[1], 0, |p| p[..24].fill(0));
        damage(&files[2], 2, |p| p[8] ^= 0xFF);
        // cold_d cut mid-page: block 2 keeps 3000 of its 8192 bytes.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&files[3])
            .unwrap()
            .set_len(2 * 8192 + 3000)
            .unwrap();
        let before: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
        let _pgbench = pgbench_load(&bin, root.path(), 30);
        let dsn = dsn(root.path());
        let (status, json, stderr) = online_json(&data, &["--dsn", &dsn]);
        assert_eq!(status, 1, "{json}\n{stderr}");
        assert_eq!(json["bad_checksums"], 3, "{json}");
        assert_eq!(json["files_partial_block"], 1, "{json}");
        let cut = &json["partial_blocks"][0];
        assert_eq!(
            (
                cut["file"].as_str(),
                &cut["block"],
                &cut["bytes"],
                cut["relation"].as_str()
            ),
            (
                Some(files[3].display().to_string().as_str()),
                &Value::from(2),
                &Value::from(3000),
                Some("cold_d")
            ),
            "{json}"
        );
        let failures = json["failures"].as_array().unwrap();
        let found: Vec<(String, u64, String)> = failures
            .iter()
            .map(|f| {
                (
                    f["file"].as_str().unwrap().to_string(),
                    f["block"].as_u64().unwrap(),
                    f["relation"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect();
        let expect: Vec<(String, u64, String)> =
            [(0, 1, "cold_a"), (1, 0, "cold_b"), (2, 2, "cold_c")]
                .iter()
                .map(|&(i, b, n)| (files[i].display().to_string(), b, n.to_string()))
                .collect();
        let mut found_sorted = found.clone();
        found_sorted.sort();
        let mut expect_sorted = expect.clone();
        expect_sorted.sort();
        assert_eq!(found_sorted, expect_sorted, "{json}");
        let redo = json["redo_lsn"].as_str().unwrap();
        for f in failures {
            assert_eq!(f["database"], "postgres", "{f}");
            assert_eq!(f["reads"], 5, "{f}");
            assert_eq!(f["reads_agreed"], 5, "{f}");
            assert_ne!(f["page_lsn"].as_str().unwrap(), redo, "{f}");
        }
        // The text form: one line per page naming the relation.
        let text = pageio_bounded(
            &[
                "verify",
                "--online",
                "--dsn",
                &dsn,
                &data.display().to_string(),
            ],
            120,
        );
        assert_eq!(text.status.code(), Some(1));
        let err = String::from_utf8_lossy(&text.stderr);
        let line = format!(
            "pageio: error: checksum verification failed in file \"{}\" (relation cold_b), block 0: calculated checksum",
            files[1].display()
        );
        assert!(err.contains(&line), "{err}");
        assert!(
            err.contains("is older than the redo LSN") && err.contains("5 of 5 reads agreed"),
            "{err}"
        );
        let stdout = String::from_utf8_lossy(&text.stdout);
        assert!(stdout.contains("Bad checksums:  3\n"), "{stdout}");
        assert!(stdout.contains("Files cut mid-page:  1\n"), "{stdout}");
        let cut_line = format!(
            "pageio: error: file \"{}\" (relation cold_d) ends in a partial block: block 2 has 3000 of 8192 bytes",
            files[3].display()
        );
        assert!(err.contains(&cut_line), "{err}");
        // Nothing was written: the cold files are as the damage left them.
        let after: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
        assert_eq!(before, after);
        let ours = our_log_lines(root.path());
        assert!(!ours.iter().any(|l| l.contains("CHECKPOINT")), "{ours:#?}");
        assert!(
            ours.iter()
                .filter(|l| l.contains("LOG:  "))
                .all(|l| l.contains("execute") && l.contains("SELECT ")),
            "{ours:#?}"
        );
        assert!(
            !ours
                .iter()
                .any(|l| l.contains("ERROR") || l.contains("FATAL")),
            "{ours:#?}"
        );
        drop(server);
    });
}

#[test]
fn online_refusals_name_the_fix() {
    let Some(bin) = pg_bin() else { return };
    with_watchdog("verify --online refusals", 120, move || {
        let root = pg_cluster_dir("pageio-online-refusals");
        let data = initdb(&bin, root.path());
        let d = data.display().to_string();
        // Stopped: --online refuses and names the offline check.
        let out = pageio_bounded(&["verify", "--online", &d], 60);
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!(
                "pageio: error: no server is running for the data directory \"{d}\""
            )),
            "{err}"
        );
        assert!(err.contains("check without --online"), "{err}");
        let server = PgServer::start(&bin, root.path());
        // Running: without --online, refused as before, the hint naming --online.
        let out = pageio_bounded(&["verify", &d], 60);
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("pageio: error: cluster must be shut down"),
            "{err}"
        );
        assert!(err.contains("use --online"), "{err}");
        let out = pageio_bounded(&["checksums", "--enable", "--online", &d], 60);
        assert_eq!(out.status.code(), Some(1));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("--online can only be used with --check")
        );
        // Pacing and priority: the report says what was asked and what the kernel holds.
        let out = pageio_bounded(
            &[
                "verify",
                "--online",
                "--json",
                "--max-rate",
                "100M",
                "--ionice",
                "best-effort:7",
                &d,
            ],
            60,
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let json: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(json["max_rate_bytes_per_s"], 100 * 1024 * 1024, "{json}");
        assert_eq!(json["ionice"], "best-effort:7", "{json}");
        let out = pageio_bounded(&["verify", "--online", "--max-rate", "1025M", &d], 60);
        assert_eq!(out.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&out.stderr)
            .contains("--max-rate 1025M: out of range; give 32k to 1024M"));
        // --checkpoint by a role that may not: an error naming the grant.
        server.psql("CREATE ROLE plain LOGIN");
        let plain = format!(
            "host={} port=5432 user=plain dbname=postgres",
            root.path().display()
        );
        let out = pageio_bounded(
            &["verify", "--online", "--dsn", &plain, "--checkpoint", &d],
            60,
        );
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("refused CHECKPOINT") && err.contains("GRANT pg_checkpoint TO it"),
            "{err}"
        );
        // checksums --check --online is the same check.
        let out = pageio_bounded(&["checksums", "--check", "--online", &d], 60);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout)
            .contains("Bad checksums:  0\nData checksum version: 1\nRedo LSN:  "));
        drop(server);
        // Checksums off: refused while running.
        let off = pg_cluster_dir("pageio-online-nosum");
        let off_data = off.path().join("data");
        pg_ok(
            &bin,
            "initdb",
            &[
                "--no-data-checksums",
                "-U",
                "postgres",
                "-D",
                &off_data.display().to_string(),
            ],
        );
        let server = PgServer::start(&bin, off.path());
        let out = pageio_bounded(
            &[
                "verify",
                "--online",
                "--json",
                &off_data.display().to_string(),
            ],
            60,
        );
        assert_eq!(out.status.code(), Some(1));
        let json: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(json["error"]["kind"], "checksums_disabled", "{json}");
        assert_eq!(
            json["error"]["message"],
            "data checksums are not enabled in cluster"
        );
        drop(server);
        let _ = pg(&bin, "pg_controldata", &[&d]);
    });
}
