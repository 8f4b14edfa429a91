//! `pageio scan` refuses what it must not read — paths outside `--pgdata`, devices, FIFOs,
//! directories, files that are not the asked-for kind of relation — and reads predicates as
//! PostgreSQL does: float8 literals, NaN at the top of the order, the column named.

mod common;

use std::path::Path;

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn scan(pgdata: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["scan", "--pgdata", pgdata.to_str().unwrap()];
    args.extend_from_slice(extra);
    // Bounded: opening a FIFO would block forever.
    common::pageio_bounded(&args, 60)
}

fn refused(pgdata: &Path, extra: &[&str], wanted: &[&str]) {
    let out = scan(pgdata, extra);
    assert_eq!(out.status.code(), Some(2), "{extra:?}: {}", stderr(&out));
    let err = stderr(&out);
    for w in wanted {
        assert!(err.contains(w), "{extra:?}: want {w:?} in: {err}");
    }
}

fn json_rows(out: &std::process::Output) -> u64 {
    assert!(out.status.success(), "{}", stderr(out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["rows"].as_u64().unwrap()
}

#[test]
fn relation_paths_stay_inside_pgdata_and_are_regular_relation_files() {
    let tmp = tempfile::tempdir().unwrap();
    let pgdata = common::unpack_fixture(tmp.path());
    // Targets that exist, so a refusal is the policy and not a missing file.
    std::fs::create_dir_all(tmp.path().join("etc")).unwrap();
    std::fs::copy(pgdata.join("base/5/16384"), tmp.path().join("etc/passwd")).unwrap();
    std::os::unix::fs::symlink(tmp.path().join("etc/passwd"), pgdata.join("base/5/99999")).unwrap();
    let fifo = pgdata.join("base/5/fifo");
    let ok = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success();
    assert!(ok);
    std::fs::write(pgdata.join("base/5/junk"), vec![0x5a; 8192 * 2]).unwrap();

    refused(
        &pgdata,
        &["--heap", "/etc/shadow"],
        &["outside the data directory", "--heap"],
    );
    refused(
        &pgdata,
        &["--heap", "../etc/passwd"],
        &["outside the data directory"],
    );
    refused(
        &pgdata,
        &["--heap", "base/5/99999"],
        &["outside the data directory"],
    );
    refused(
        &pgdata,
        &["--heap", "base/5/fifo"],
        &["is a FIFO, not a regular file"],
    );
    refused(&pgdata, &["--heap", "base/5"], &["is a directory"]);
    refused(
        &pgdata,
        &["--heap", "base/5/16394"],
        &["is not a heap", "btree index"],
    );
    refused(
        &pgdata,
        &["--heap", "base/5/junk"],
        &["is not a heap", "invalid page header"],
    );
    refused(
        &pgdata,
        &[
            "--heap",
            "base/5/16384",
            "--index",
            "base/5/16389",
            "--kind",
            "index",
        ],
        &["--index", "is not a btree index", "it is a heap"],
    );
    refused(
        &pgdata,
        &["--heap", "PG_VERSION"],
        &["\"PG_VERSION\" is 3 bytes, not a multiple of the 8192-byte page size"],
    );

    // A tablespace: the link in pg_tblspc may lead outside PGDATA.
    let location = tmp.path().join("ts");
    std::fs::create_dir_all(location.join("PG_18_202506291/5")).unwrap();
    std::fs::copy(
        pgdata.join("base/5/16384"),
        location.join("PG_18_202506291/5/16384"),
    )
    .unwrap();
    std::os::unix::fs::symlink(&location, pgdata.join("pg_tblspc/16500")).unwrap();
    let out = scan(
        &pgdata,
        &[
            "--heap",
            "pg_tblspc/16500/PG_18_202506291/5/16384",
            "--json",
        ],
    );
    assert_eq!(json_rows(&out), 20000);
    // …but not to climb out of the tablespace.
    refused(
        &pgdata,
        &["--heap", "pg_tblspc/16500/../etc/passwd"],
        &["outside the data directory"],
    );
}

#[test]
fn character_devices_are_refused() {
    if !common::have_root("character_devices_are_refused") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let pgdata = common::unpack_fixture(tmp.path());
    let ok = std::process::Command::new("mknod")
        .arg(pgdata.join("base/5/zero"))
        .args(["c", "1", "5"])
        .status()
        .unwrap()
        .success();
    assert!(ok);
    refused(
        &pgdata,
        &["--heap", "base/5/zero"],
        &["is a character device, not a regular file"],
    );
}

#[test]
fn predicates_follow_postgresql() {
    let tmp = tempfile::tempdir().unwrap();
    let pgdata = common::unpack_fixture(tmp.path());
    let base = ["--heap", "base/5/16384", "--index", "base/5/16394"];
    let with = |kind: &str, predicate: &str| {
        let mut args = base.to_vec();
        args.extend_from_slice(&["--kind", kind, "--where", predicate, "--json"]);
        scan(&pgdata, &args)
    };
    for kind in ["seq", "bitmap", "index"] {
        // NaN is above every number: 'NaN' as the upper bound includes everything from lo.
        assert_eq!(
            json_rows(&with(kind, "a between 990 and 'NaN'")),
            227,
            "{kind}"
        );
        assert_eq!(
            json_rows(&with(kind, "a between -Infinity and NaN")),
            20000,
            "{kind}"
        );
        // The fixture stores no NaN.
        assert_eq!(json_rows(&with(kind, "a between NaN and NaN")), 0, "{kind}");
        assert_eq!(json_rows(&with(kind, "A BETWEEN 0 AND 10")), 207, "{kind}");
    }
    let out = with("seq", "a between 1 and 1e400");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("\"1e400\" is out of range for type double precision"),
        "{}",
        stderr(&out)
    );
    let out = with("seq", "b between 1 and 2");
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("column \"b\"") && err.contains("\"a\"") && err.contains("--key-column"),
        "{err}"
    );
    // Naming the key column makes another name valid.
    let mut args = base.to_vec();
    args.extend_from_slice(&[
        "--key-column",
        "k",
        "--where",
        "k between 0 and 10",
        "--json",
    ]);
    assert_eq!(json_rows(&scan(&pgdata, &args)), 207);
}

/// A table read by name whose file has been replaced by a FIFO, a link to `/dev/zero` or a
/// directory is refused by every scan kind within the bound (a seq scan once counted 0 rows
/// and exited 0; a bitmap scan hung).
#[test]
fn tables_by_name_whose_files_are_not_regular_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let pgdata = common::unpack_fixture(tmp.path());
    let file = pgdata.join(common::fixture_facts().path("uniform"));
    let replace = |make: &dyn Fn(&Path)| {
        if file.is_dir() {
            std::fs::remove_dir(&file).unwrap();
        } else {
            std::fs::remove_file(&file).unwrap();
        }
        make(&file);
    };
    type Make<'a> = &'a dyn Fn(&Path);
    let kinds: [(&str, Make); 3] = [
        ("a FIFO", &|p: &Path| {
            let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: c is a valid NUL-terminated path.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        }),
        ("a character device", &|p: &Path| {
            std::os::unix::fs::symlink("/dev/zero", p).unwrap()
        }),
        ("a directory", &|p: &Path| std::fs::create_dir(p).unwrap()),
    ];
    for (what, make) in kinds {
        replace(make);
        for kind in ["seq", "bitmap", "index"] {
            refused(
                &pgdata,
                &[
                    "--table",
                    "uniform",
                    "--select",
                    "count(*)",
                    "--kind",
                    kind,
                    "--where",
                    "a between 1 and 2",
                ],
                &[what, "not a regular file", "base/"],
            );
        }
    }
}
