//! Under a small address-space limit (`ulimit -v`, here `prlimit --as`) the CLI fails
//! cleanly — exit status 2 and a line saying what ran out and what to change — instead of
//! aborting with status 134.

mod common;

fn under_limit(limit_bytes: u64, args: &[&str]) -> std::process::Output {
    // A process that runs out of memory exits through the abort handler, which cannot run
    // exit-time clean-up: its `pageio aios` area stays behind (stale). Keep it in a
    // directory of this run, removed with it, not in the shared /dev/shm.
    let publish_dir = tempfile::tempdir().unwrap();
    std::process::Command::new("prlimit")
        .arg(format!("--as={limit_bytes}"))
        .arg(env!("CARGO_BIN_EXE_pageio"))
        .args(args)
        .arg("--aio-publish-dir")
        .arg(publish_dir.path())
        .output()
        .unwrap()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn buffer_pool_too_large_names_shared_buffers_and_the_flag() {
    let tmp = tempfile::tempdir().unwrap();
    let pgdata = common::unpack_fixture(tmp.path());
    let out = under_limit(
        400 << 20,
        &[
            "scan",
            "--pgdata",
            pgdata.to_str().unwrap(),
            "--heap",
            "base/5/16384",
            "--shared-buffers",
            "1GB",
            "--huge-pages",
            "off",
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("could not map 1073741824 bytes for shared_buffers")
            && err.contains("lower shared_buffers")
            && err.contains("--shared-buffers"),
        "{err}"
    );
}

#[test]
fn gen_under_any_small_limit_exits_2_with_a_message() {
    common::with_watchdog("gen_under_any_small_limit", 300, || {
        // Limits from "the runtime barely starts" to "enough for some threads but not all":
        // each fails somewhere else (a small allocation, a thread stack, a write buffer).
        for limit_mb in [30u64, 60, 100, 150, 200, 300] {
            let tmp = tempfile::tempdir().unwrap();
            let sets = tmp.path().join("sets");
            let out = under_limit(
                limit_mb << 20,
                &[
                    "gen",
                    "--dataset",
                    "uniform",
                    "--rows",
                    "200000",
                    "--quiet",
                    "--out",
                    sets.to_str().unwrap(),
                ],
            );
            let err = stderr(&out);
            match out.status.code() {
                Some(0) => assert!(sets.join("uniform/manifest.json").exists()),
                Some(2) => {
                    let last = err.lines().last().unwrap_or("");
                    assert!(
                        last.starts_with("pageio: error: ")
                            && (last.contains("memory") || last.contains("threads")),
                        "{limit_mb} MB: {err}"
                    );
                    assert!(
                        !sets.join("uniform").exists(),
                        "{limit_mb} MB: a partial data set is visible"
                    );
                }
                other => panic!("{limit_mb} MB: exit {other:?} (134 is an abort): {err}"),
            }
        }
    });
}
