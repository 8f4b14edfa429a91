//! `pageio bench` end to end on a generated table: every planned query runs under every
//! method and mode, returns the rows the generator put in its range, and lands in
//! runs.json, runs.csv, summary.md and device.json; PostgreSQL's relation files can be
//! benchmarked in place; bad flags fail with a message naming the fix.

mod common;
use common::pageio;

use std::path::{Path, PathBuf};

use pageio::gen::DataSet;

fn disk_tempdir() -> tempfile::TempDir {
    // Under the target directory: on disk, where O_DIRECT works (tmpfs refuses it).
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

fn runs(out: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(out.join("runs.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

const ROWS: u64 = 20_000;

#[test]
fn quick_bench_runs_every_cell_with_correct_answers() {
    let dir = disk_tempdir();
    let data = dir.path().join("data");
    let out = dir.path().join("out");
    let o = pageio(&[
        "bench",
        "--quick",
        "--rows",
        &ROWS.to_string(),
        "--data-dir",
        data.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--device",
        "probe",
        "--device-seconds",
        "1",
        "--methods",
        "sync,worker:2,io_uring",
        "--no-progress",
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );

    let plan_out = pageio(&["bench", "--plan", "--json", "--quick", "--rows", "20000"]);
    let plan: serde_json::Value = serde_json::from_slice(&plan_out.stdout).unwrap();
    let queries = plan["queries"].as_array().unwrap();
    assert_eq!(queries.len(), 6 + 6 + 4);

    // 16 queries × 3 methods × 2 modes × (1 cold + 1 warm), one repeat.
    let rs = runs(&out);
    assert_eq!(rs.len(), 16 * 3 * 2 * 2);
    let rows: Vec<_> = DataSet::Uniform.rows(1, ROWS).map(|r| r.key()).collect();
    for q in queries {
        let (lo, hi) = (q["lo"].as_f64().unwrap(), q["hi"].as_f64().unwrap());
        let expected = rows.iter().filter(|&&a| a >= lo && a <= hi).count() as u64;
        let cell: Vec<_> = rs
            .iter()
            .filter(|r| r["scan"] == q["scan"] && r["step"] == q["step"])
            .collect();
        assert_eq!(cell.len(), 12, "{q}");
        for r in cell {
            assert_eq!(r["rows"].as_u64().unwrap(), expected, "{r}");
            assert!(r["seconds"].as_f64().unwrap() > 0.0);
            let vs = r["vs_device"].as_f64().unwrap();
            assert!(vs > 0.0 && vs.is_finite(), "{r}");
        }
    }
    // Cold runs read from storage; warm runs of small queries hit shared buffers only.
    assert!(rs
        .iter()
        .filter(|r| r["cache"] == "cold")
        .all(|r| r["shared_read"].as_u64().unwrap() > 0 || r["rows"] == 0));
    let csv = std::fs::read_to_string(out.join("runs.csv")).unwrap();
    assert_eq!(csv.lines().count(), rs.len() + 1);
    let device: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("device.json")).unwrap()).unwrap();
    assert!(device["seq_mb_s"].as_f64().unwrap() > 0.0);
    assert!(device["rand_iops_qd32"].as_f64().unwrap() > 0.0);
    let md = std::fs::read_to_string(out.join("summary.md")).unwrap();
    for needle in [
        "## Claims",
        "## uniform: bitmap heap scan, cold",
        "## uniform: index scan, warm",
        "| pageio io_uring direct |",
        "built-in O_DIRECT probe",
    ] {
        assert!(md.contains(needle), "missing {needle:?} in\n{md}");
    }
    assert!(stdout.contains("Results in"), "{stdout}");
    for scan in ["seq", "bitmap", "index"] {
        for cache in ["cold", "warm"] {
            for ext in ["svg", "png"] {
                let chart = out.join(format!("charts/uniform-{scan}-{cache}.{ext}"));
                assert!(
                    std::fs::metadata(&chart).unwrap().len() > 1000,
                    "{}",
                    chart.display()
                );
            }
            assert!(
                md.contains(&format!("charts/uniform-{scan}-{cache}.svg")),
                "{md}"
            );
        }
    }
    let svg = std::fs::read_to_string(out.join("charts/uniform-seq-cold.svg")).unwrap();
    assert!(svg.contains("pageio worker(2) direct") && svg.contains("device limit"));

    // A second run reuses the generated table (same rows and seed) instead of rewriting it.
    let heap = data.join("uniform/16384");
    let before = std::fs::metadata(&heap).unwrap().modified().unwrap();
    let o = pageio(&[
        "bench",
        "--quick",
        "--rows",
        "20000",
        "--data-dir",
        data.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--device",
        "none",
        "--methods",
        "sync",
        "--io",
        "buffered",
        "--cache",
        "warm",
        "--scans",
        "seq",
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        std::fs::metadata(&heap).unwrap().modified().unwrap(),
        before
    );
    let printed: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(printed.len(), 6);
    assert!(printed.iter().all(|r| r["device_seconds"].is_null()));
}

fn fixture() -> (tempfile::TempDir, PathBuf) {
    let dir = disk_tempdir();
    let pgdata = common::unpack_fixture(dir.path());
    (dir, pgdata)
}

#[test]
fn bench_runs_on_postgresql_relation_files_and_merges_other_records() {
    let (dir, pgdata) = fixture();
    // uniform's heap and btree, at the files PostgreSQL's pg_relation_filepath named.
    let facts = common::fixture_facts();
    let uniform_table = format!(
        "uniform={},{}",
        facts.path("uniform"),
        facts.path("uniform_a")
    );
    let uniform_pages = facts.relation("uniform").pages;
    let out = dir.path().join("out");
    // The fixture's `uniform` holds a in [0, 1000): only predicates starting below 1000 match.
    let o = pageio(&[
        "bench",
        "--pgdata",
        pgdata.to_str().unwrap(),
        "--table",
        &uniform_table,
        "--rows",
        "20000",
        "--quick",
        "--methods",
        "worker:2",
        "--io",
        "buffered",
        "--cache",
        "cold",
        "--device",
        "none",
        "--out",
        out.to_str().unwrap(),
        "--no-progress",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rs = runs(&out);
    assert_eq!(rs.len(), 16);
    assert!(rs
        .iter()
        .all(|r| r["table_pages"] == uniform_pages && r["engine"] == "pageio"));
    // The same query gives the same answer whichever scan runs it.
    for step in rs
        .iter()
        .filter(|r| r["scan"] == "index")
        .map(|r| &r["step"])
    {
        let answers: Vec<_> = rs
            .iter()
            .filter(|r| &r["step"] == step)
            .map(|r| &r["rows"])
            .collect();
        assert!(answers.windows(2).all(|w| w[0] == w[1]), "{answers:?}");
    }

    // Records of another engine join the same tables.
    let mut other: Vec<serde_json::Value> = rs.clone();
    for r in &mut other {
        r["engine"] = "postgresql".into();
        r["version"] = "PostgreSQL 18.1".into();
        r["io_workers"] = 3.into();
    }
    let other_file = dir.path().join("pg-runs.json");
    std::fs::write(&other_file, serde_json::to_string(&other).unwrap()).unwrap();
    let out2 = dir.path().join("out2");
    let o = pageio(&[
        "bench",
        "--pgdata",
        pgdata.to_str().unwrap(),
        "--table",
        &uniform_table,
        "--rows",
        "20000",
        "--quick",
        "--methods",
        "sync",
        "--io",
        "buffered",
        "--cache",
        "cold",
        "--device",
        "none",
        "--out",
        out2.to_str().unwrap(),
        "--no-progress",
        "--pg-results",
        other_file.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(runs(&out2).len(), 32);
    let md = std::fs::read_to_string(out2.join("summary.md")).unwrap();
    assert!(md.contains("postgresql worker(3) buffered"), "{md}");
    assert!(md.contains("PostgreSQL 18.1"), "{md}");
}

#[test]
fn bad_flags_fail_with_the_fix() {
    for (args, needle) in [
        (
            vec!["bench", "--methods", "turbo", "--plan"],
            "unknown method \"turbo\"",
        ),
        (
            vec!["bench", "--scans", "hash", "--plan"],
            "unknown scan \"hash\"",
        ),
        (
            vec!["bench", "--rows", "0", "--plan"],
            "--rows must be at least 1",
        ),
        (
            vec!["bench", "--pgdata", "/tmp", "--table", "t=base/1/2"],
            "--pgdata needs --rows",
        ),
        (
            vec![
                "bench", "--pgdata", "/tmp", "--table", "nonsense", "--rows", "10",
            ],
            "expected NAME=HEAP[,INDEX]",
        ),
        (
            vec![
                "bench",
                "--dataset",
                "pgbench_accounts",
                "--rows",
                "10",
                "--device",
                "none",
            ],
            "no float8 key column",
        ),
        (
            vec![
                "bench",
                "--pg-results",
                "/nonexistent.json",
                "--rows",
                "100",
                "--device",
                "none",
                "--scans",
                "seq",
                "--methods",
                "sync",
                "--io",
                "buffered",
                "--cache",
                "warm",
                "--data-dir",
                "/nonexistent-dir/x",
            ],
            "could not",
        ),
    ] {
        let o = pageio(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn from_runs_errors_name_from_runs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let missing = dir.path().join("missing").join("runs.json");
    let broken = dir.path().join("runs.json");
    std::fs::write(&broken, "{").unwrap();
    for (runs, needle) in [
        (&missing, "could not read --from-runs"),
        (&broken, "is not a JSON array of benchmark runs"),
    ] {
        let o = pageio(&[
            "bench",
            "--from-runs",
            runs.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains(needle), "{err}");
        assert!(
            err.contains(&format!("--from-runs \"{}\"", runs.display())),
            "{err}"
        );
        // The file came from --from-runs: the message must not send the user to another flag
        // or to the PostgreSQL driver.
        assert!(!err.contains("--pg-results"), "{err}");
        assert!(!err.contains("pg18-bench.py"), "{err}");
        assert!(!out.exists(), "nothing written on error");
    }
}

/// Unmounts a test mount when dropped.
struct Unmount(PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let target = std::ffi::CString::new(self.0.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: target is a valid C string naming a mount point this test created.
        unsafe { libc::umount(target.as_ptr()) };
    }
}

#[test]
fn file_system_without_direct_io_skips_direct_cells_and_the_device_limit() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        assert!(
            std::env::var_os("CI").is_none(),
            "mounting ramfs needs root, which CI has"
        );
        eprintln!("SKIP: mounting ramfs needs root");
        return;
    }
    // ramfs answers open(O_DIRECT) with EINVAL (tmpfs accepts it since Linux 6.6).
    let dir = tempfile::tempdir().unwrap();
    let target = std::ffi::CString::new(dir.path().as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: valid C strings; a null data pointer is allowed for ramfs.
    let rc = unsafe {
        libc::mount(
            c"none".as_ptr(),
            target.as_ptr(),
            c"ramfs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "mount ramfs: {}", std::io::Error::last_os_error());
    let _unmount = Unmount(dir.path().to_path_buf());
    let data = dir.path().join("data");
    let out = dir.path().join("out");
    let o = pageio(&[
        "bench",
        "--rows",
        "2000",
        "--quick",
        "--data-dir",
        data.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--methods",
        "sync",
        "--io",
        "buffered,direct",
        "--cache",
        "warm",
        "--scans",
        "seq",
        "--device-seconds",
        "1",
        "--no-progress",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("no device limit this run"), "{err}");
    assert!(err.contains("cannot be opened with O_DIRECT"), "{err}");
    let plan = pageio(&[
        "bench", "--plan", "--json", "--quick", "--rows", "2000", "--scans", "seq",
    ]);
    let plan: serde_json::Value = serde_json::from_slice(&plan.stdout).unwrap();
    let rs = runs(&out);
    assert_eq!(rs.len(), plan["queries"].as_array().unwrap().len());
    assert!(rs
        .iter()
        .all(|r| r["direct_io"] == false && r["vs_device"].is_null()));
    let md = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(md.contains("skipped uniform sync direct:"), "{md}");
    assert!(md.contains("--io buffered"), "{md}");
}
