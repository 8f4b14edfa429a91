//! `pageio io-bench` and `pageio gen` on a data-set directory that exists but is not
//! writable: both used to busy-loop without a word (the write loop spun on the open error,
//! with nothing in flight); now each exits 2 at once with one line naming the file and the
//! cause.

mod common;

use std::os::unix::fs::PermissionsExt;

/// How long either command may take: both fail at their first write, in milliseconds.
const BOUND_SECS: u64 = 60;

/// A directory `datasets` anyone can enter and list but nobody (but root) can write, with
/// the subdirectories `subdirs` (locked likewise).
fn locked_dir(subdirs: &[&str]) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let locked = dir.path().join("datasets");
    std::fs::create_dir(&locked).unwrap();
    for sub in subdirs {
        std::fs::create_dir(locked.join(sub)).unwrap();
        std::fs::set_permissions(locked.join(sub), std::fs::Permissions::from_mode(0o555)).unwrap();
    }
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o555)).unwrap();
    (dir, locked)
}

/// Runs `pageio args` as a user the directory's permissions apply to and asserts that it
/// exits 2 with a message naming the directory and the cause.
fn assert_refused_at_once(args: &[&str]) {
    let out = common::pageio_bounded_unprivileged(args, BOUND_SECS);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("datasets") && stderr.contains("Permission denied"),
        "{stderr}"
    );
}

#[test]
fn io_bench_into_an_unwritable_directory_fails_at_once() {
    let (_dir, locked) = locked_dir(&[]);
    assert_refused_at_once(&common::small_io_bench_args(&locked));
    assert!(!locked.join("16384").exists());
}

#[test]
fn gen_into_an_unwritable_directory_fails_at_once() {
    // The data set's own directory exists (an earlier run made it) but cannot be written:
    // gen must stop at its first write (today: creating its temporary directory beside the
    // data set) with the path and the cause.
    let (_dir, locked) = locked_dir(&["uniform"]);
    assert_refused_at_once(&[
        "gen",
        "--dataset",
        "uniform",
        "--rows",
        "2000",
        "--io-method",
        "sync",
        "--out",
        locked.to_str().unwrap(),
    ]);
    assert!(!locked.join("uniform/16384").exists());
}
