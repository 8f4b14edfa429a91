//! The descriptor-limit hint names the max_open_files actually in force (and its flag), and
//! a `ulimit -n` that would keep that many files open.

mod common;

#[test]
fn descriptor_limit_hint_names_max_open_files_in_force() {
    let tmp = tempfile::tempdir().unwrap();
    let pgdata = common::unpack_fixture(tmp.path());
    for (max_open_files, want_limit) in [("100", "ulimit -n 164"), ("2000", "ulimit -n 2064")] {
        let out = std::process::Command::new("prlimit")
            .arg("--nofile=40:40")
            .arg(env!("CARGO_BIN_EXE_pageio"))
            .args(["scan", "--pgdata"])
            .arg(&pgdata)
            .args([
                "--heap",
                "base/5/16384",
                "--io-method",
                "sync",
                "--max-open-files",
                max_open_files,
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("max_open_files = {max_open_files}"))
                && err.contains(want_limit)
                && err.contains("--max-open-files"),
            "{err}"
        );
    }
}
