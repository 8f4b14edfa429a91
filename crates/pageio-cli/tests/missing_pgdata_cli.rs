//! Every command that takes a data directory says what is wrong with a path that is not
//! one — missing, a dangling link (naming its target), a file — with its exit status:
//! `verify` and `checksums` keep pg_checksums' message and status 1 and name the missing
//! directory in the hint; the others exit 2 with one line naming the flag.

mod common;
use common::pageio_bounded;

#[track_caller]
fn assert_fails(args: &[&str], status: i32, stderr: &str) {
    let out = pageio_bounded(args, 60);
    assert_eq!(String::from_utf8_lossy(&out.stderr), stderr, "{args:?}");
    assert_eq!(out.status.code(), Some(status), "{args:?}");
}

#[test]
fn a_missing_data_directory_is_called_missing_by_every_command() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("nonexistent");
    let dangling = tmp.path().join("link");
    std::os::unix::fs::symlink("/nonexistent/pgdata", &dangling).unwrap();
    let file = tmp.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    for (path, problem) in [
        (&missing, "does not exist".to_string()),
        (
            &dangling,
            "is a link to \"/nonexistent/pgdata\", which does not exist".to_string(),
        ),
        (&file, "is a regular file, not a directory".to_string()),
    ] {
        let p = path.to_str().unwrap();
        let line = format!(
            "pageio: error: --pgdata {p}: the path {problem}; give the data directory of a PostgreSQL cluster (the one holding PG_VERSION)\n"
        );
        for args in [
            &["scan", "--pgdata", p, "--table", "t"][..],
            &["scan", "--pgdata", p, "--heap", "base/5/16384"][..],
            &["tables", "--pgdata", p][..],
            &["advise", "--pgdata", p][..],
            &["bench", "--pgdata", p, "--table", "t"][..],
        ] {
            assert_fails(args, 2, &line);
        }
        // pg_checksums' own line, then the hint naming the directory (pg_checksums 18.6
        // says only: could not open file "…/global/pg_control" for reading: No such file
        // or directory, or "Not a directory" for the file, exit 1).
        let os_error = if path == &file {
            "Not a directory (os error 20)"
        } else {
            "No such file or directory (os error 2)"
        };
        let expected = format!(
            "pageio: error: could not open file \"{p}/global/pg_control\" for reading: {os_error}\n\
             pageio: hint: the data directory \"{p}\" {problem}: give the data directory of a PostgreSQL cluster (the one holding global/pg_control).\n"
        );
        for args in [
            &["verify", p][..],
            &["checksums", p][..],
            &["checksums", "--enable", "-D", p][..],
            &["checksums", "--disable", p][..],
        ] {
            assert_fails(args, 1, &expected);
        }
    }
}

/// A `pg_tblspc/<oid>` link whose tablespace directory is gone is named with its target by
/// `verify`/`checksums` (after pg_checksums' own line), by `scan --heap` through it, and in
/// advise's problems.
#[test]
fn a_dangling_tablespace_link_names_its_target() {
    let tmp = tempfile::tempdir().unwrap();
    let data = common::unpack_fixture(tmp.path());
    let link = data.join("pg_tblspc/99999");
    std::fs::create_dir_all(data.join("pg_tblspc")).unwrap();
    std::os::unix::fs::symlink("/nonexistent/tablespace", &link).unwrap();
    let d = data.to_str().unwrap();
    let hint = format!(
        "pageio: hint: \"{}\" is a link to \"/nonexistent/tablespace\", which does not exist: restore or mount the tablespace's directory there (or, for a tablespace dropped by hand, remove the link).\n",
        link.display()
    );
    for args in [&["verify", d][..], &["checksums", "--check", d][..]] {
        let out = pageio_bounded(args, 60);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.ends_with(&hint), "{args:?}: {err}");
    }
    let heap = "pg_tblspc/99999/PG_18_202506291/5/16384";
    assert_fails(
        &["scan", "--pgdata", d, "--heap", heap],
        2,
        &format!(
            "pageio: error: --heap: relation file \"{d}/{heap}\" cannot be used: \"{}\" is a link to \"/nonexistent/tablespace\", which does not exist: restore or mount the tablespace's directory there, or point at the right data directory\n",
            link.display()
        ),
    );
    let out = pageio_bounded(&["advise", "--pgdata", d, "--json"], 60);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let problems: Vec<&str> = v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    let wanted = format!(
        "{l}: not readable ({l} is a link to \"/nonexistent/tablespace\", which does not exist); the database size leaves it out",
        l = link.display()
    );
    assert!(problems.contains(&wanted.as_str()), "{problems:#?}");
}

/// A FIFO where `pg_class`'s file should be is reported as a FIFO at that path (it used to
/// read as an empty catalog: "no row for oid 2615"), at once, not as a damaged catalog.
#[test]
fn a_fifo_at_pg_class_is_named_as_a_fifo() {
    let tmp = tempfile::tempdir().unwrap();
    let data = common::unpack_fixture(tmp.path());
    let pg_class = data.join("base/5/1259");
    std::fs::remove_file(&pg_class).unwrap();
    let c = std::ffi::CString::new(pg_class.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: `c` is a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let d = data.to_str().unwrap();
    let line = format!(
        "pageio: error: cannot read catalog pg_class of database \"postgres\" from \"base/5/1259\": could not read relation file \"{}\": it is a FIFO, not a regular file; a relation's segments are regular files: restore the file, or point at the right data directory\n",
        pg_class.display()
    );
    assert_fails(
        &["tables", "--pgdata", d, "--database", "postgres"],
        2,
        &line,
    );
    assert_fails(
        &[
            "scan",
            "--pgdata",
            d,
            "--table",
            "postgres.pg_catalog.pg_class",
            "--select",
            "count(*)",
        ],
        2,
        &line,
    );
}
