//! `pageio advise`'s text report and JSON on captured host trees, byte for byte: the files
//! in `tests/advise_snapshots/` are the exact output of the commands below (the tree's path
//! in JSON written as `@SYSROOT@`), so any change to the report, the snippets or a rule's
//! text shows here as a diff. The messages that point at one of advise's own inputs name
//! our flags (`--measure`, `--pgdata DIR`), which the library leaves to the command line.

mod common;
use common::pageio_bounded;

use std::path::{Path, PathBuf};

fn tree(situation: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../pageio/tests/hosts")
        .join(situation)
        .display()
        .to_string()
}

fn snapshot(name: &str) -> String {
    let path: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/advise_snapshots")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Runs `pageio advise ARGS --pg-bin EMPTY` (an empty directory, so the PostgreSQL on this
/// machine's PATH is not part of the answer) and returns its exit status and stdout.
fn advise(args: &[&str]) -> (Option<i32>, String) {
    let no_binaries = tempfile::tempdir().unwrap();
    let mut all = vec!["advise", "--pg-bin", no_binaries.path().to_str().unwrap()];
    all.extend_from_slice(args);
    let out = pageio_bounded(&all, 60);
    assert!(
        out.stderr.is_empty(),
        "{all:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        out.status.code(),
        String::from_utf8(out.stdout).expect("the report is UTF-8"),
    )
}

#[track_caller]
fn same_as_snapshot(name: &str, output: &str) {
    let expected = snapshot(name);
    if output != expected {
        let first = output
            .lines()
            .zip(expected.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| output.lines().count().min(expected.lines().count()));
        panic!(
            "{name}: differs from line {}:\n  got:      {:?}\n  expected: {:?}\nwhole output:\n{output}",
            first + 1,
            output.lines().nth(first),
            expected.lines().nth(first)
        );
    }
}

#[test]
fn a_container_report_is_byte_identical_to_its_snapshot() {
    let (code, out) = advise(&["--sysroot", &tree("container-v2"), "--workload", "web"]);
    assert_eq!(code, Some(1), "warnings, nothing bad");
    same_as_snapshot("container-v2-web.txt", &out);
}

#[test]
fn a_postgresql_17_desktop_report_is_byte_identical_to_its_snapshot() {
    let (code, out) = advise(&[
        "--sysroot",
        &tree("cgroup-v1"),
        "--pg-version",
        "17",
        "--workload",
        "desktop",
    ]);
    assert_eq!(code, Some(1));
    same_as_snapshot("cgroup-v1-pg17-desktop.txt", &out);
}

#[test]
fn the_json_is_byte_identical_to_its_snapshot() {
    let root = tree("seccomp-uring");
    let (code, out) = advise(&[
        "--sysroot",
        &root,
        "--pg-version",
        "19",
        "--max-connections",
        "500",
        "--json",
    ]);
    assert_eq!(code, Some(1));
    same_as_snapshot("seccomp-uring-pg19.json", &out.replace(&root, "@SYSROOT@"));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["max_connections_source"], "--max-connections");
}

/// A sysroot with nothing in it: every message that sends the user to one of advise's
/// inputs is in this report, each spelled as our flag.
#[test]
fn messages_name_the_flags_that_give_what_is_missing() {
    let root = tempfile::tempdir().unwrap();
    let (code, out) = advise(&["--sysroot", root.path().to_str().unwrap()]);
    assert_eq!(code, Some(2), "no RAM known is BAD");
    same_as_snapshot("empty-sysroot.txt", &out);
    for line in [
        "         fix: make /proc/meminfo readable (or pass --sysroot to a complete capture)\n",
        "         recommended: run with --pgdata DIR to check PGDATA's file system and disks\n",
        "  [OK  ] liburing: not checked: no postgres binary in --pg-bin or PATH  (PATH)\n",
        "; io_uring is usable here — run with --measure to see whether it is faster on this disk\n",
    ] {
        assert!(out.contains(line), "{line:?} in\n{out}");
    }
    let (_, json) = advise(&["--sysroot", root.path().to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let item = |name: &str| {
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["name"] == name)
            .unwrap_or_else(|| panic!("no item {name}"))
            .clone()
    };
    assert_eq!(
        item("data directory storage")["fix"],
        "pageio advise --pgdata DIR"
    );
    assert_eq!(
        item("liburing")["fix"],
        "pageio advise --pg-bin DIR (the directory holding postgres)"
    );
    assert_eq!(
        v["max_connections_source"],
        "pgtune's default for --workload mixed"
    );
}

/// A fact that could not be read is listed under its own heading, after the counts.
#[test]
fn a_fact_that_cannot_be_read_is_listed_in_the_report() {
    let root = tempfile::tempdir().unwrap();
    let vm = root.path().join("proc/sys/vm");
    std::fs::create_dir_all(&vm).unwrap();
    std::fs::write(vm.join("swappiness"), "sixty\n").unwrap();
    let (code, out) = advise(&["--sysroot", root.path().to_str().unwrap()]);
    assert_eq!(code, Some(2));
    assert!(
        out.contains(
            "\n35 OK, 6 WARN, 1 BAD\n\nnot read (the items that needed these are missing or say unknown):\n  /proc/sys/vm/swappiness: cannot parse \"sixty\" as an unsigned integer; the file is not in the format this kernel interface documents\n\n---- postgresql.conf ----\n"
        ),
        "{out}"
    );
    assert!(
        out.contains("\n  [OK  ] vm.swappiness: not checked: /proc/sys/vm/swappiness gave no value here (this kernel has no such setting, a container hides it, or it did not parse: see what was not read)  (/proc/sys/vm/swappiness)\n"),
        "an item says the check was not made, with no value made up: {out}"
    );
}
