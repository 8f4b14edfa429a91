//! `pageio advise` flags: bad ones exit 2 with the fix, `--help` teaches the exit statuses,
//! and a captured tree gives the same JSON the library does.

mod common;
use common::pageio_bounded;

use std::path::Path;

fn tree(situation: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../pageio/tests/hosts")
        .join(situation)
        .display()
        .to_string()
}

#[track_caller]
fn fails_with(args: &[&str], needle: &str) {
    let out = pageio_bounded(args, 60);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(stderr.contains(needle), "{args:?}: {stderr}");
    assert!(out.stdout.is_empty(), "{args:?} printed a report");
    // advise has no engine flags: no hint may point at one.
    assert!(
        !stderr.contains("on the command line:"),
        "{args:?}: {stderr}"
    );
}

#[test]
fn bad_flags_exit_2_with_the_fix() {
    fails_with(
        &["advise", "--workload", "batch"],
        "possible values: oltp, web, dw, mixed, desktop",
    );
    fails_with(&["advise", "--pg-version", "16"], "16 is not in 17..=19");
    fails_with(
        &["advise", "--max-connections", "0"],
        "0 is not in 1..=262143",
    );
    fails_with(&["advise", "--seconds", "5"], "--measure");
    fails_with(
        &["advise", "--measure", "--seconds", "0"],
        "0 is not in 1..=600",
    );
    fails_with(
        &["advise", "--pgdata", "/nonexistent/pgdata"],
        "--pgdata /nonexistent/pgdata: the path does not exist; give the data directory",
    );
    let empty = tempfile::tempdir().unwrap();
    let empty = empty.path().display().to_string();
    fails_with(&["advise", "--pgdata", &empty], "no PG_VERSION");
    fails_with(
        &["advise", "--config", "/nonexistent.conf"],
        "--config /nonexistent.conf: the path does not exist; give a postgresql.conf",
    );
    fails_with(
        &["advise", "--config", "/dev/null"],
        "--config /dev/null: the path is a character device, not a regular file; give a postgresql.conf",
    );
    fails_with(
        &["advise", "--pg-bin", "/nonexistent/bin"],
        "pg_config --bindir",
    );
    fails_with(
        &["advise", "--measure", "--sysroot", &tree("container-v2")],
        "--measure reads this machine's disk and cannot be combined with --sysroot",
    );
}

#[test]
fn help_teaches_the_exit_statuses() {
    let out = pageio_bounded(&["advise", "--help"], 60);
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.contains("0 nothing to fix, 1 warnings, 2 something BAD"),
        "{help}"
    );
    assert!(help.contains("could not run (a bad flag"), "{help}");
    assert!(help.contains("--workload"), "{help}");
}

#[test]
fn a_captured_container_reports_its_limits_and_exits_1_for_warnings() {
    let root = tree("container-v2");
    let out = pageio_bounded(
        &["advise", "--sysroot", &root, "--workload", "web", "--json"],
        60,
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let sb = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "shared_buffers")
        .unwrap();
    assert_eq!(sb["recommended"], "1GB");
    assert_eq!(sb["status"], "warn");
    assert_eq!(v["effective_cpus"], 2);
    assert_eq!(v["facts"]["host"]["resources"]["online_cpus"], 64);
    assert!(v["postgresql_conf"]
        .as_str()
        .unwrap()
        .contains("shared_buffers = '1GB'"));
    assert!(v["sysctl_conf"]
        .as_str()
        .unwrap()
        .contains("vm.dirty_bytes"));

    let text = pageio_bounded(&["advise", "--sysroot", &root, "--workload", "web"], 60);
    let report = String::from_utf8_lossy(&text.stdout);
    for heading in ["\nhost\n", "\nstorage\n", "\nio_uring\n", "\ninstance\n"] {
        assert!(report.contains(heading), "{heading:?} in {report}");
    }
    assert!(
        report.contains("[WARN] shared_buffers: 128MB  (PostgreSQL 18 default)"),
        "{report}"
    );
    assert!(report.contains("---- postgresql.conf ----"), "{report}");
    assert!(
        report.contains("---- /etc/sysctl.d/90-postgresql.conf ----"),
        "{report}"
    );
}
