//! The scan benchmarks' drivers, `bench/scan-ab.py`, `bench/defaults-matrix.py` and
//! `bench/page-cache-fill.py`, end to end on a small generated `uniform` table: they run the
//! real binary, drop the page cache (so they need root) and must report every configuration
//! with the rows every run counted (every fill with the whole heap cached).

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::{Mutex, MutexGuard};

/// The drivers drop the whole page cache, so they run one at a time: one driver's drop must
/// not empty the cache another is measuring (page-cache-fill.py counts what a fill cached).
static DRIVERS: Mutex<()> = Mutex::new(());

/// Holds [`DRIVERS`] for the rest of a test (a failed test does not block the others).
fn one_driver_at_a_time() -> MutexGuard<'static, ()> {
    DRIVERS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// True when the drivers can run here: they drop the page cache, which needs root. Under
/// `CI` a missing root is a failure, not a skip.
fn root_for(test: &str) -> bool {
    if common::is_root() {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!("{test} needs root (the driver drops the page cache); CI is set, so this is a failure, not a skip");
    }
    eprintln!("SKIP {test}: needs root (the driver drops the page cache)");
    false
}

/// A 60,000-row `uniform` table in `dir` (`dir/uniform`).
fn small_uniform(dir: &Path) {
    let out = common::pageio_bounded(
        &[
            "gen",
            "--dataset",
            "uniform",
            "--rows",
            "60000",
            "--out",
            dir.to_str().unwrap(),
            "--quiet",
        ],
        120,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `python3 bench/SCRIPT ARGS --bin <this pageio>`, bounded.
fn run_driver(script: &str, args: &[&str]) -> std::process::Output {
    let mut command = Command::new("python3");
    command
        .arg(common::repo_root().join("bench").join(script))
        .args(args)
        .arg("--bin")
        .arg(env!("CARGO_BIN_EXE_pageio"));
    common::run_bounded(command, script, 300)
}

/// [`run_driver`], which must succeed.
fn driver(script: &str, args: &[&str]) -> std::process::Output {
    let out = run_driver(script, args);
    assert!(
        out.status.success(),
        "{script} exited {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn scan_ab_reports_every_configuration_with_the_same_rows() {
    if !root_for("scan_ab_reports_every_configuration_with_the_same_rows") {
        return;
    }
    let _drivers = one_driver_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    small_uniform(dir.path());
    let json = dir.path().join("ab.json");
    // a is uniform over [0, 100000): the index scan's 0.1% range holds about 60 of the
    // 60,000 rows, the bitmap scan's 1% about 600.
    for (kind, temp, expected) in [("index", "warm", 30..=120), ("bitmap", "cold", 300..=1200)] {
        driver(
            "scan-ab.py",
            &[
                dir.path().to_str().unwrap(),
                "--kind",
                kind,
                "--temp",
                temp,
                "--rounds",
                "2",
                "--json",
                json.to_str().unwrap(),
                "defaults=",
                "sync=--io-method sync --effective-io-concurrency 4",
            ],
        );
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        assert_eq!(v["kind"], kind);
        assert_eq!(v["temp"], temp);
        let rows = v["rows"].as_u64().unwrap();
        assert!(expected.contains(&rows), "{kind}: {rows} rows");
        let configs = v["configs"].as_array().unwrap();
        let names: Vec<_> = configs
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["defaults", "sync"]);
        for c in configs {
            let runs = c["runs_ms"].as_array().unwrap();
            assert_eq!(runs.len(), 2, "{c}");
            assert!(runs.iter().all(|ms| ms.as_f64().unwrap() > 0.0), "{c}");
        }
    }
    // A flag pageio refuses ends the run with pageio's own message, not a traceback.
    let out = run_driver(
        "scan-ab.py",
        &[
            dir.path().to_str().unwrap(),
            "--kind",
            "seq",
            "--temp",
            "cold",
            "--rounds",
            "1",
            "bad=--no-such-flag",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("--no-such-flag"), "{stderr}");
    assert!(!stderr.contains("Traceback"), "{stderr}");
    // A configuration without NAME= is refused before anything runs.
    let out = run_driver(
        "scan-ab.py",
        &[
            dir.path().to_str().unwrap(),
            "--kind",
            "seq",
            "--temp",
            "cold",
            "--io-method sync",
        ],
    );
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("expected NAME=FLAGS"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn defaults_matrix_covers_every_combination_and_temperature() {
    if !root_for("defaults_matrix_covers_every_combination_and_temperature") {
        return;
    }
    let _drivers = one_driver_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    small_uniform(dir.path());
    let json = dir.path().join("matrix.json");
    driver(
        "defaults-matrix.py",
        &[
            dir.path().to_str().unwrap(),
            "--rounds",
            "1",
            "--kinds",
            "index",
            "--json",
            json.to_str().unwrap(),
        ],
    );
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    // An unknown scan kind is named, with the choices, before anything runs.
    let out = run_driver(
        "defaults-matrix.py",
        &[dir.path().to_str().unwrap(), "--kinds", "index,heap"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("unknown scan kind heap; choose from seq, bitmap, index"),
        "{stderr}"
    );
    let cells = v.as_array().unwrap();
    let temps: Vec<_> = cells.iter().map(|c| c["temp"].as_str().unwrap()).collect();
    assert_eq!(temps, ["cold", "warm"]);
    for cell in cells {
        assert_eq!(cell["kind"], "index");
        let runs = cell["runs_ms"].as_object().unwrap();
        // The defaults and 3 methods x 3 in-flight counts x buffered/direct.
        assert_eq!(runs.len(), 19, "{:?}", runs.keys().collect::<Vec<_>>());
        assert!(runs.contains_key("defaults"));
        assert!(runs.contains_key("worker eic=128 direct=on"));
        for stat in ["best", "median"] {
            let ratio = cell[stat]["ratio"].as_f64().unwrap();
            assert!(ratio > 0.0, "{cell}");
            let top = cell[stat]["top"].as_str().unwrap();
            assert!(runs.contains_key(top) && top != "defaults", "{top}");
        }
    }
}

#[test]
fn page_cache_fill_reports_every_fill_with_its_folios_and_warm_scans() {
    if !root_for("page_cache_fill_reports_every_fill_with_its_folios_and_warm_scans") {
        return;
    }
    let _drivers = one_driver_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    small_uniform(dir.path());
    let json = dir.path().join("fill.json");
    driver(
        "page-cache-fill.py",
        &[
            dir.path().to_str().unwrap(),
            "--rounds",
            "1",
            "--warm-scans",
            "2",
            "--json",
            json.to_str().unwrap(),
        ],
    );
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let pages = v["pages"].as_u64().unwrap();
    // 60,000 rows at 18 a page: 3,334 heap blocks of 8 kB.
    assert_eq!(v["bytes"].as_u64().unwrap(), 3334 * 8192);
    let results = v["results"].as_object().unwrap();
    let fills: Vec<_> = results.keys().map(String::as_str).collect();
    assert_eq!(
        fills,
        ["pageio", "pageio-no-advice", "read", "sendfile", "willneed"]
    );
    for (fill, r) in results {
        // Every fill brings the whole heap in, and the share is of those pages.
        assert_eq!(r["cached_pages"][0].as_u64().unwrap(), pages, "{fill}: {r}");
        let share = r["large_share"][0].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&share), "{fill}: {r}");
        assert!(r["fill_s"][0].as_f64().unwrap() > 0.0, "{fill}: {r}");
        let warm = r["warm_ms"][0].as_array().unwrap();
        assert_eq!(warm.len(), 2, "{fill}: {r}");
        assert!(
            warm.iter().all(|ms| ms.as_f64().unwrap() > 0.0),
            "{fill}: {r}"
        );
    }
    // An unknown fill is named, with the choices, before anything runs.
    let out = run_driver(
        "page-cache-fill.py",
        &[dir.path().to_str().unwrap(), "--fills", "read,mmap"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("unknown fill 'mmap'"), "{stderr}");
    assert!(!stderr.contains("Traceback"), "{stderr}");
}
