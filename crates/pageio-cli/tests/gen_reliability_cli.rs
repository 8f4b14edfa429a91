//! `pageio gen` never leaves partial relation files where a scan reads them (out of space,
//! out of memory), a scan cross-checks a data set against its manifest, and every hint
//! gives a `pageio gen` command that works.

mod common;

use std::path::Path;

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn gen(out_dir: &Path, rows: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "gen",
        "--dataset",
        "uniform",
        "--rows",
        rows,
        "--quiet",
        "--out",
        out_dir.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    common::pageio_bounded(&args, 240)
}

fn scan(data_dir: &Path) -> std::process::Output {
    common::pageio_bounded(
        &[
            "scan",
            "--dataset",
            "uniform",
            "--data-dir",
            data_dir.to_str().unwrap(),
            "--kind",
            "index",
            "--json",
        ],
        120,
    )
}

/// The `pageio gen …` command a message suggests, as arguments (without `pageio`).
fn suggested_command(message: &str) -> Vec<String> {
    let at = message
        .find("pageio gen ")
        .unwrap_or_else(|| panic!("no gen command in: {message}"));
    message[at..]
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .skip(1)
        .map(str::to_string)
        .collect()
}

fn run_suggested(message: &str, extra: &[&str]) -> std::process::Output {
    let mut args = suggested_command(message);
    args.extend(extra.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    common::pageio_bounded(&refs, 240)
}

fn rows_of(out: &std::process::Output) -> u64 {
    assert!(out.status.success(), "{}", stderr(out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["rows"].as_u64().unwrap()
}

#[test]
fn hint_for_leftover_files_gives_a_command_that_works() {
    let tmp = tempfile::tempdir().unwrap();
    let sets = tmp.path().join("sets");
    // What an interrupted older gen left: relation files without a manifest.
    std::fs::create_dir_all(sets.join("uniform")).unwrap();
    std::fs::write(sets.join("uniform/16384"), vec![0u8; 8192 * 3]).unwrap();
    let out = scan(&sets);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("--force"),
        "gen refuses a non-empty directory without it: {err}"
    );
    // The suggested command, with a small row count so the test stays quick.
    let out = run_suggested(&err, &["--rows", "2000", "--quiet"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(rows_of(&scan(&sets)), 2000);
}

#[test]
fn scan_cross_checks_the_manifest_and_the_hint_regenerates() {
    let tmp = tempfile::tempdir().unwrap();
    let sets = tmp.path().join("sets");
    assert!(gen(&sets, "2000", &[]).status.success());
    assert_eq!(rows_of(&scan(&sets)), 2000);

    // A heap one page short.
    let heap = sets.join("uniform/16384");
    let len = std::fs::metadata(&heap).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&heap)
        .unwrap()
        .set_len(len - 8192)
        .unwrap();
    let out = scan(&sets);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("16384") && err.contains("does not match its manifest"),
        "{err}"
    );
    assert!(
        err.contains(&format!("{} bytes, expected {len}", len - 8192)),
        "{err}"
    );
    let cmd = suggested_command(&err).join(" ");
    assert!(
        cmd.contains("--rows 2000") && cmd.contains("--force"),
        "{cmd}"
    );
    let out = run_suggested(&err, &["--quiet"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(rows_of(&scan(&sets)), 2000);

    // The index root the manifest names is not the metapage's.
    let manifest_path = sets.join("uniform/manifest.json");
    let mut m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&manifest_path).unwrap()).unwrap();
    m["index_root"] = serde_json::json!(m["index_root"].as_u64().unwrap() + 1);
    std::fs::write(&manifest_path, serde_json::to_vec(&m).unwrap()).unwrap();
    let err = stderr(&scan(&sets));
    assert!(
        err.contains("16385") && err.contains("root block") && err.contains("index_root"),
        "{err}"
    );
}

#[test]
fn out_of_space_leaves_nothing_behind() {
    if !common::have_root("out_of_space_leaves_nothing_behind") {
        return;
    }
    let fs = common::SmallTmpfs::mount("2m");
    // 20,000 rows are 9 MB of heap: the 2 MB file system fills up.
    let out = gen(fs.path(), "20000", &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("free space"), "{}", stderr(&out));
    assert_eq!(fs.entries(), Vec::<String>::new(), "no partial data set");
    let err = stderr(&scan(fs.path()));
    assert!(err.contains("manifest.json"), "{err}");
    assert!(!err.contains("--force"), "nothing to force over: {err}");
}

#[test]
fn a_memory_limit_fails_cleanly_before_writing() {
    // 50 million rows need 800 MB for the index build; a 400 MB address-space limit refuses
    // it before any heap page is written.
    common::with_watchdog("a_memory_limit_fails_cleanly_before_writing", 120, || {
        let tmp = tempfile::tempdir().unwrap();
        let sets = tmp.path().join("sets");
        let out = std::process::Command::new("prlimit")
            .arg(format!("--as={}", 400u64 << 20))
            .arg(env!("CARGO_BIN_EXE_pageio"))
            .args([
                "gen",
                "--dataset",
                "uniform",
                "--rows",
                "50000000",
                "--quiet",
                "--out",
            ])
            .arg(&sets)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("could not allocate 800000000 bytes")
                && err.contains("50000000 rows")
                && err.contains("--rows"),
            "{err}"
        );
        let left: Vec<_> = std::fs::read_dir(&sets)
            .map(|d| d.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "left behind: {left:?}");
    });
}
