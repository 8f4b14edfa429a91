//! `pageio io-bench` and `pageio gen` on a data-set directory that exists but is not
//! writable: both used to busy-loop without a word (the write loop spun on the open error,
//! with nothing in flight); now each exits 2 at once with one line naming the file and the
//! cause.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// How long either command may take: both fail at their first write, in milliseconds.
const BOUND: Duration = Duration::from_secs(60);

/// Runs `pageio args` as a user the directory's permissions apply to (root ignores them, so
/// as root the child runs as `nobody`), killing it if it outlives [`BOUND`].
fn pageio_unprivileged(args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_pageio"));
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        command.uid(65534).gid(65534);
    }
    let mut child = command.spawn().expect("run pageio");
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > BOUND {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "pageio {args:?} did not finish within {BOUND:?} (hang?); stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A directory anyone can enter and list but nobody (but root) can write.
fn locked_dir() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let locked = dir.path().join("datasets");
    std::fs::create_dir(&locked).unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o555)).unwrap();
    (dir, locked)
}

#[test]
fn io_bench_into_an_unwritable_directory_fails_at_once() {
    let (_dir, locked) = locked_dir();
    let out = pageio_unprivileged(&[
        "io-bench",
        "--size",
        "4MB",
        "--methods",
        "sync",
        "--dir",
        locked.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("datasets") && stderr.contains("Permission denied"),
        "{stderr}"
    );
    assert!(!locked.join("16384").exists());
}

#[test]
fn gen_into_an_unwritable_directory_fails_at_once() {
    // The data set's own directory exists (an earlier run made it) but cannot be written:
    // gen must stop at its first write (today: creating its temporary directory beside the
    // data set) with the path and the cause.
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let locked = dir.path().join("datasets");
    std::fs::create_dir_all(locked.join("uniform")).unwrap();
    for path in [locked.join("uniform"), locked.clone()] {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o555)).unwrap();
    }
    let out = pageio_unprivileged(&[
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
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("datasets") && stderr.contains("Permission denied"),
        "{stderr}"
    );
    assert!(!locked.join("uniform/16384").exists());
}
