//! `pageio io-bench --dir` writes only where it may: never into a PostgreSQL cluster or a
//! directory holding other files, only into a directory it creates (or reuses by its marker
//! with `--force`), and it removes what it wrote — also after running out of space.

mod common;

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn io_bench(dir: &std::path::Path, extra: &[&str]) -> std::process::Output {
    let mut args = common::small_io_bench_args(dir);
    args.extend_from_slice(extra);
    common::pageio_bounded(&args, 120)
}

#[test]
fn refuses_a_cluster_and_leaves_its_files_byte_identical() {
    let tmp = tempfile::tempdir().unwrap();
    let pgdata = common::unpack_fixture(tmp.path());
    let before = common::snapshot(&pgdata);
    for target in ["base/5", "base/5/new", "global", "."] {
        let out = io_bench(&pgdata.join(target), &["--force"]);
        assert_eq!(out.status.code(), Some(2), "{target}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("PostgreSQL cluster") && err.contains("PG_VERSION"),
            "{target}: {err}"
        );
    }
    assert!(!pgdata.join("base/5/new").exists());
    assert!(before == common::snapshot(&pgdata), "the cluster changed");
}

/// A tablespace is part of its cluster: io-bench refuses the cluster's `pg_tblspc/<oid>`
/// link, the tablespace's location, its `PG_18_<catversion>` directory and anything below
/// them, and writes nothing there.
#[test]
fn refuses_a_tablespace_and_leaves_it_as_it_was() {
    let tmp = tempfile::tempdir().unwrap();
    let pgdata = common::unpack_fixture(tmp.path());
    let location = tmp.path().join("ts");
    let version_dir = location.join("PG_18_202506291");
    std::fs::create_dir_all(version_dir.join("5")).unwrap();
    std::fs::write(version_dir.join("5/16391"), b"a tablespace's relation").unwrap();
    std::fs::create_dir_all(pgdata.join("pg_tblspc")).unwrap();
    std::os::unix::fs::symlink(&location, pgdata.join("pg_tblspc/16390")).unwrap();
    let before = common::snapshot(&location);
    let targets = [
        pgdata.join("pg_tblspc/16390"),
        pgdata.join("pg_tblspc/16390/PG_18_202506291/5"),
        location.clone(),
        version_dir.clone(),
        version_dir.join("new"),
        version_dir.join("5"),
    ];
    for target in &targets {
        let out = io_bench(target, &["--force"]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{}: {err}", target.display());
        assert!(
            err.contains("refusing to write inside a PostgreSQL cluster or tablespace"),
            "{}: {err}",
            target.display()
        );
    }
    assert!(!version_dir.join("new").exists());
    assert!(
        before == common::snapshot(&location),
        "the tablespace changed"
    );
    assert_eq!(
        std::fs::read(version_dir.join("5/16391")).unwrap(),
        b"a tablespace's relation"
    );
}

#[test]
fn refuses_a_directory_holding_other_files() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("16384"), b"someone else's relation").unwrap();
    let out = io_bench(&dir, &["--force"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("relation files io-bench did not make (16384)"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::read(dir.join("16384")).unwrap(),
        b"someone else's relation"
    );
}

#[test]
fn writes_into_a_directory_it_creates_and_removes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("new/bench");
    let out = io_bench(&dir, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(" 512 "),
        "all pages verified"
    );
    assert!(!dir.exists(), "the directory it created is removed");
    // An existing empty directory (a mount point) is left as found.
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let out = io_bench(&empty, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0);
    // What an interrupted run leaves inside such a directory is named, with the way out.
    let inner = empty.join("pageio-io-bench-1");
    std::fs::create_dir(&inner).unwrap();
    std::fs::write(inner.join(".pageio-io-bench"), b"").unwrap();
    let out = io_bench(&empty, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(&format!("--dir {} --force", inner.display())),
        "{}",
        stderr(&out)
    );
    let out = io_bench(&inner, &["--force"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0);
    // A directory an interrupted run left (marker and relation) is reused only with --force.
    let left = tmp.path().join("left");
    std::fs::create_dir(&left).unwrap();
    std::fs::write(left.join(".pageio-io-bench"), b"").unwrap();
    std::fs::write(left.join("16384"), vec![0u8; 8192 * 4096]).unwrap();
    let out = io_bench(&left, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--force"), "{}", stderr(&out));
    let out = io_bench(&left, &["--force"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!left.exists());
}

#[test]
fn cleans_up_after_running_out_of_space() {
    if !common::have_root("cleans_up_after_running_out_of_space") {
        return;
    }
    let fs = common::SmallTmpfs::mount("2m");
    let dir = fs.path().join("bench");
    let out = io_bench(&dir, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("16384") && err.contains("is its file system full?"),
        "{err}"
    );
    assert_eq!(fs.entries(), Vec::<String>::new(), "nothing left behind");
}
