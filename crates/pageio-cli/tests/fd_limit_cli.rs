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

fn pageio_with_nofile(nofile: &str, args: &[&str]) -> std::process::Output {
    std::process::Command::new("prlimit")
        .arg(format!("--nofile={nofile}:{nofile}"))
        .arg(env!("CARGO_BIN_EXE_pageio"))
        .args(args)
        .output()
        .unwrap()
}

/// `--jobs` that the descriptor limit cannot hold blames `--jobs` and says how many fit;
/// `--jobs 0` is a usage error. Both exit 1, as pg_checksums' usage errors do.
#[test]
fn jobs_beyond_the_descriptor_limit_blame_jobs_and_exit_1() {
    let tmp = tempfile::tempdir().unwrap();
    let pgdata = common::unpack_fixture(tmp.path());
    let pgdata = pgdata.to_str().unwrap();
    for mode in ["--check", "--enable"] {
        let out = pageio_with_nofile("100", &["checksums", mode, "-j", "1000", pgdata]);
        let err = String::from_utf8_lossy(&out.stderr);
        if mode == "--enable" && err.contains("already enabled") {
            // The fixture has checksums on: --disable first (only pg_control changes).
            let off = pageio_with_nofile("100", &["checksums", "--disable", pgdata]);
            assert_eq!(off.status.code(), Some(0));
            let out = pageio_with_nofile("100", &["checksums", mode, "-j", "1000", pgdata]);
            assert_jobs_refused(&out, 2, 14);
            continue;
        }
        assert_jobs_refused(&out, 1, 28);
    }
    for args in [
        &["checksums", "-j", "0", pgdata][..],
        &["checksums", "--enable", "-j", "0", pgdata][..],
        &["verify", "--jobs", "0", pgdata][..],
    ] {
        let out = pageio_with_nofile("1024", args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(
            lines[0], "pageio: error: --jobs 0: at least one thread must read and checksum",
            "{args:?}"
        );
        assert!(
            lines[1].starts_with("pageio: hint: give --jobs 1 or more (default: one per CPU, "),
            "{err}"
        );
    }
}

#[track_caller]
fn assert_jobs_refused(out: &std::process::Output, per_job: usize, allowed: usize) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(
        err,
        format!(
            "pageio: error: --jobs 1000: 64 threads (the most that run) under io_uring hold {} ring descriptors ({per_job} each), which with the 64 descriptors reserved for the process and a file cache of at least 8 files is more than RLIMIT_NOFILE 100 allows: at most {allowed} jobs fit\n\
             pageio: hint: give --jobs {allowed} or fewer, use --io-method worker, or raise the limit with `ulimit -n {}`\n",
            64 * per_job,
            72 + 64 * per_job
        )
    );
}
