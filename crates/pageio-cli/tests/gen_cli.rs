//! `pageio gen` end to end: JSON manifests, files on disk, refusal to overwrite.

mod common;

use std::process::Command;

fn pageio() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pageio"))
}

#[test]
fn gen_writes_datasets_and_prints_manifests() {
    let dir = tempfile::tempdir().unwrap();
    let out = pageio()
        .args([
            "gen",
            "--dataset",
            "uniform,pgbench_accounts",
            "--rows",
            "2000",
        ])
        .args(["--io-method", "sync", "--json", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let sets = json.as_array().unwrap();
    assert_eq!(sets.len(), 2);
    assert_eq!(sets[0]["dataset"], "uniform");
    assert_eq!(sets[0]["rows"], 2000);
    assert_eq!(sets[0]["heap_pages"], 112);
    assert_eq!(sets[0]["key_type"], "float8");
    assert_eq!(sets[1]["dataset"], "pgbench_accounts");
    assert_eq!(sets[1]["heap_pages"], 1640);
    let heap = dir.path().join("uniform/16384");
    assert_eq!(std::fs::metadata(heap).unwrap().len(), 112 * 8192);
    assert!(dir.path().join("pgbench_accounts/manifest.json").exists());

    // A second run refuses, names the directory and the fix, and exits with status 2.
    let again = pageio()
        .args(["gen", "--dataset", "uniform", "--rows", "10", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(2));
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(err.contains("uniform") && err.contains("--force"), "{err}");

    let forced = pageio()
        .args([
            "gen",
            "--dataset",
            "uniform",
            "--rows",
            "10",
            "--force",
            "--out",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(forced.status.success());
    assert_eq!(
        std::fs::metadata(dir.path().join("uniform/16384"))
            .unwrap()
            .len(),
        8192
    );
}

#[test]
fn unknown_dataset_lists_the_valid_names() {
    let dir = tempfile::tempdir().unwrap();
    let out = pageio()
        .args(["gen", "--dataset", "zipf", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("zipf") && err.contains("cyclic_25"), "{err}");
}

/// `gen --out` anywhere inside a cluster — its data directory, a database directory,
/// `pg_tblspc` and a tablespace reached through its link, a tablespace location — is refused
/// before anything is written: the cluster's files stay byte-identical.
#[test]
fn gen_refuses_to_write_inside_a_cluster() {
    let tmp = tempfile::tempdir().unwrap();
    let pgdata = common::unpack_fixture(tmp.path());
    let location = tmp.path().join("ts1");
    std::fs::create_dir_all(location.join("PG_18_202506291")).unwrap();
    std::os::unix::fs::symlink(&location, pgdata.join("pg_tblspc/16400")).unwrap();
    let before = (common::snapshot(&pgdata), common::snapshot(&location));
    for out in [
        pgdata.clone(),
        pgdata.join("base/5"),
        pgdata.join("pg_tblspc"),
        pgdata.join("pg_tblspc/16400"),
        location.clone(),
        location.join("PG_18_202506291"),
        pgdata.join("base/5/new"),
    ] {
        let o = common::pageio_bounded(
            &[
                "gen",
                "--dataset",
                "uniform",
                "--rows",
                "100",
                "--out",
                out.to_str().unwrap(),
            ],
            60,
        );
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{}: {err}", out.display());
        assert!(
            err.contains("inside the PostgreSQL cluster or tablespace"),
            "{}: {err}",
            out.display()
        );
    }
    assert!(
        before == (common::snapshot(&pgdata), common::snapshot(&location)),
        "the cluster was written to"
    );
}
