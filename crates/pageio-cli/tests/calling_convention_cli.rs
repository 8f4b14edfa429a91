//! One way to call every command: the data directory as `-D DIR`, `--pgdata DIR`, a
//! directory argument or `$PGDATA`; `-j/--jobs` for the thread count (old spellings kept);
//! `--help` ending with the command's page of `docs/`; a closed stdout ending quietly.

mod common;

use std::io::Read;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Bound on one command over the small fixture.
const BOUND_SECS: u64 = 120;

/// The four ways to give the data directory `dir`: extra arguments, and `$PGDATA`.
fn ways(dir: &str) -> [(&'static str, Vec<String>, Option<String>); 4] {
    [
        ("-D", vec!["-D".into(), dir.into()], None),
        ("--pgdata", vec!["--pgdata".into(), dir.into()], None),
        ("argument", vec![dir.into()], None),
        ("PGDATA", vec![], Some(dir.into())),
    ]
}

/// Runs pageio with `args`, `$PGDATA` set to `pgdata` (or removed).
fn run(args: &[String], pgdata: Option<&str>) -> Output {
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    common::pageio_bounded_with(&argv, BOUND_SECS, |c| {
        match pgdata {
            Some(dir) => c.env("PGDATA", dir),
            None => c.env_remove("PGDATA"),
        };
    })
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Whether `value` holds the string `wanted` anywhere.
fn holds_string(value: &serde_json::Value, wanted: &str) -> bool {
    match value {
        serde_json::Value::String(s) => s == wanted,
        serde_json::Value::Array(items) => items.iter().any(|v| holds_string(v, wanted)),
        serde_json::Value::Object(map) => map.values().any(|v| holds_string(v, wanted)),
        _ => false,
    }
}

#[test]
fn every_command_reads_the_data_directory_given_any_of_the_four_ways() {
    let tmp = tempfile::tempdir().unwrap();
    let data = common::unpack_fixture(tmp.path());
    let d = data.to_str().unwrap();
    let uniform = &common::fixture_facts().relation("uniform").path;
    for (way, extra, env) in ways(d) {
        let with = |command: &[&str]| {
            let mut args: Vec<String> = command.iter().map(|s| s.to_string()).collect();
            args.extend(extra.iter().cloned());
            run(&args, env.as_deref())
        };
        for command in [&["verify"][..], &["checksums", "--check"][..]] {
            let out = with(command);
            assert_eq!(
                out.status.code(),
                Some(0),
                "{command:?} {way}: {}",
                text(&out.stderr)
            );
            let stdout = text(&out.stdout);
            assert!(
                stdout.starts_with("Checksum operation completed\nFiles scanned:   ")
                    && stdout.contains("Bad checksums:  0\n"),
                "{command:?} {way}: {stdout}"
            );
        }
        let out = with(&["tables", "--json"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "tables {way}: {}",
            text(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["pgdata"], d, "tables {way}");
        assert!(
            v["tables"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["name"] == "uniform"),
            "tables {way}: {v}"
        );
        let out = with(&["scan", "--heap", uniform, "--json"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "scan {way}: {}",
            text(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["rows"], 20000, "scan {way}");
        let out = with(&["scan", "--table", "uniform", "--json"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "scan --table {way}: {}",
            text(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            v["aggregates"][0]["value"], 20000,
            "scan --table {way}: {v}"
        );
        // advise: 0, 1 or 2 by what it finds on this machine; the report names the directory.
        let out = with(&["advise", "--json"]);
        assert!(
            matches!(out.status.code(), Some(0..=2)),
            "advise {way}: {}",
            text(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(holds_string(&v, d), "advise {way} does not name {d}");
    }
}

#[test]
fn a_missing_data_directory_is_named_the_way_it_was_given() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("nonexistent");
    let m = missing.to_str().unwrap();
    for (way, extra, env) in ways(m) {
        let label = match way {
            "-D" | "--pgdata" => "--pgdata",
            "argument" => "the data directory",
            _ => "PGDATA",
        };
        let line = format!(
            "pageio: error: {label} {m}: the path does not exist; give the data directory of a PostgreSQL cluster (the one holding PG_VERSION)\n"
        );
        for command in [
            &["tables"][..],
            &["scan", "--heap", "base/5/16384"][..],
            &["scan", "--table", "t"][..],
            &["advise"][..],
            &["bench", "--table", "t", "--rows", "10"][..],
        ] {
            let mut args: Vec<String> = command.iter().map(|s| s.to_string()).collect();
            args.extend(extra.iter().cloned());
            let out = run(&args, env.as_deref());
            assert_eq!(text(&out.stderr), line, "{command:?} {way}");
            assert_eq!(out.status.code(), Some(2), "{command:?} {way}");
        }
        // pg_checksums' own line names the directory (pg_checksums 18.6: could not open
        // file ".../global/pg_control" for reading: No such file or directory, exit 1).
        for command in [&["verify"][..], &["checksums", "--enable"][..]] {
            let mut args: Vec<String> = command.iter().map(|s| s.to_string()).collect();
            args.extend(extra.iter().cloned());
            let out = run(&args, env.as_deref());
            let stderr = text(&out.stderr);
            assert!(
                stderr.starts_with(&format!(
                    "pageio: error: could not open file \"{m}/global/pg_control\" for reading: "
                )),
                "{command:?} {way}: {stderr}"
            );
            assert_eq!(out.status.code(), Some(1), "{command:?} {way}");
        }
    }
}

#[test]
fn no_data_directory_or_two_different_ones_are_refused_saying_how_to_give_one() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a");
    let b = tmp.path().join("b");
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let strings = |args: &[&str]| args.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    // pg_checksums 18.6 without -D or PGDATA: "pg_checksums: error: no data directory
    // specified" and a hint line, exit 1.
    for command in [
        &["verify"][..],
        &["checksums"][..],
        &["checksums", "--enable"][..],
    ] {
        let out = run(&strings(command), None);
        assert_eq!(
            text(&out.stderr),
            "pageio: error: no data directory specified\n\
             pageio: hint: give -D DIR, a directory argument, or set PGDATA\n",
            "{command:?}"
        );
        assert_eq!(out.status.code(), Some(1), "{command:?}");
        let mut args = strings(command);
        args.extend(["-D".to_string(), a.to_string(), b.to_string()]);
        let out = run(&args, None);
        assert_eq!(
            text(&out.stderr),
            format!(
                "pageio: error: two data directories given: -D {a} and the argument {b}\n\
                 pageio: hint: give the data directory once\n"
            ),
            "{command:?}"
        );
        assert_eq!(out.status.code(), Some(1), "{command:?}");
    }
    for (command, line) in [
        (&["tables"][..], ""),
        (
            &["scan", "--heap", "base/5/16384"][..],
            "--table, --heap and --index read a cluster: ",
        ),
        (
            &["bench", "--table", "t"][..],
            "--table, --database and --key-column name a cluster's tables: ",
        ),
    ] {
        let out = run(&strings(command), None);
        assert_eq!(
            text(&out.stderr),
            format!("pageio: error: {line}no data directory specified: give -D DIR, a directory argument, or set PGDATA\n"),
            "{command:?}"
        );
        assert_eq!(out.status.code(), Some(2), "{command:?}");
    }
    for command in [
        &["tables"][..],
        &["scan", "--heap", "base/5/16384"][..],
        &["advise"][..],
        &["bench", "--table", "t"][..],
    ] {
        let mut args = strings(command);
        args.extend(["--pgdata".to_string(), a.to_string(), b.to_string()]);
        let out = run(&args, None);
        assert_eq!(
            text(&out.stderr),
            format!("pageio: error: two data directories given: -D {a} and the argument {b}: give the data directory once\n"),
            "{command:?}"
        );
        assert_eq!(out.status.code(), Some(2), "{command:?}");
    }
    // The same directory twice is one directory.
    let out = run(&strings(&["tables", "-D", a, &format!("{a}/.")]), None);
    assert!(
        text(&out.stderr).contains(&format!("could not open file \"{a}/global/pg_control\"")),
        "{}",
        text(&out.stderr)
    );
    // A data set is not a cluster: $PGDATA does not make `scan --dataset` read one.
    let out = run(
        &strings(&["scan", "--dataset", "uniform", "--data-dir", b]),
        Some(a),
    );
    let stderr = text(&out.stderr);
    assert!(stderr.contains(&format!("{b}/uniform")), "{stderr}");
}

#[test]
fn jobs_is_the_thread_count_and_parallel_still_works_with_the_same_answer() {
    let tmp = tempfile::tempdir().unwrap();
    let data = common::unpack_fixture(tmp.path());
    let d = data.to_str().unwrap();
    let uniform = &common::fixture_facts().relation("uniform").path;
    let mut answers = Vec::new();
    for flag in ["-j", "--jobs", "--parallel"] {
        let args: Vec<String> = ["scan", "-D", d, "--heap", uniform, "--json", flag, "3"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let out = run(&args, None);
        assert_eq!(out.status.code(), Some(0), "{flag}: {}", text(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["parallel_workers"], 3, "{flag}");
        answers.push((v["rows"].clone(), v["sum_octet_length"].clone()));
    }
    assert_eq!(answers[0], (20000.into(), 1320000.into()));
    assert!(answers.iter().all(|a| *a == answers[0]), "{answers:?}");
    // --help names -j/--jobs only; the old spelling is hidden.
    let help = text(&run(&["scan".into(), "--help".into()], None).stdout);
    assert!(help.contains("  -j, --jobs <N>"), "{help}");
    assert!(!help.contains("--parallel"), "{help}");
}

#[test]
fn every_commands_help_ends_with_its_page_of_the_docs() {
    for (command, page) in [
        ("scan", "docs/SCAN.md"),
        ("verify", "docs/VERIFY.md"),
        ("checksums", "docs/CHECKSUMS.md"),
        ("tables", "docs/TABLES.md"),
        ("advise", "docs/ADVISE.md"),
        ("aios", "docs/AIOS.md"),
        ("bench", "docs/BENCH.md"),
        ("gen", "docs/GEN.md"),
        ("io-bench", "docs/IO-BENCH.md"),
    ] {
        for help in ["-h", "--help"] {
            let out = run(&[command.into(), help.into()], None);
            assert_eq!(out.status.code(), Some(0), "{command} {help}");
            let stdout = text(&out.stdout);
            assert!(
                stdout.ends_with(&format!(
                    "Documentation: {page} (in the pageio source tree)\n"
                )),
                "{command} {help}: {stdout}"
            );
        }
    }
}

/// Runs pageio with stdout a pipe whose reading end is already closed, so its first write
/// fails with EPIPE; returns the exit status and stderr.
fn with_closed_stdout(args: &[&str], cwd: &Path) -> (Option<i32>, String) {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut child = Command::new(env!("CARGO_BIN_EXE_pageio"))
        .args(args)
        .current_dir(cwd)
        .env_remove("PGDATA")
        .stdin(Stdio::null())
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr_pipe = child.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stderr_pipe.read_to_end(&mut bytes);
        bytes
    });
    let deadline = Instant::now() + Duration::from_secs(BOUND_SECS);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            panic!("pageio {args:?} did not end within {BOUND_SECS} s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status.code(), text(&stderr.join().unwrap()))
}

#[test]
fn a_closed_stdout_ends_every_command_quietly() {
    let tmp = tempfile::tempdir().unwrap();
    let data = common::unpack_fixture(tmp.path());
    let d = data.to_str().unwrap();
    let uniform = &common::fixture_facts().relation("uniform").path;
    let out = tmp.path().join("sets");
    let out = out.to_str().unwrap();
    let commands: Vec<Vec<&str>> = vec![
        vec!["--help"],
        vec!["scan", "--help"],
        vec!["methods"],
        vec!["tables", d],
        vec!["tables", d, "--json"],
        vec!["scan", d, "--heap", uniform],
        vec!["scan", d, "--heap", uniform, "--json"],
        vec!["scan", d, "--table", "uniform"],
        vec!["verify", d],
        vec!["verify", d, "--json"],
        vec!["checksums", d],
        vec!["advise", d],
        vec!["advise", d, "--json"],
        vec!["aios"],
        vec!["aios", "--json"],
        vec!["gen", "--rows", "1000", "--quiet", "--out", out],
        vec!["bench", "--dataset", "uniform", "--rows", "1000", "--plan"],
        vec![
            "bench",
            "--dataset",
            "uniform",
            "--rows",
            "1000",
            "--plan",
            "--json",
        ],
        vec!["io-bench", "--size", "1MB", "--methods", "sync"],
        vec!["io-bench", "--size", "1MB", "--methods", "sync", "--json"],
    ];
    for args in &commands {
        let (status, stderr) = with_closed_stdout(args, tmp.path());
        // advise's status is its verdict on this machine (1 when it warns): the same
        // whether or not anyone reads the report.
        let expected = if args[0] == "advise" {
            common::pageio_bounded(args, BOUND_SECS).status.code()
        } else {
            Some(0)
        };
        assert_eq!(status, expected, "{args:?}: {stderr}");
        // advise and aios may say on stderr what they could not read on this machine; no
        // command may say anything of the closed pipe.
        if matches!(args[0], "advise" | "aios" | "io-bench" | "methods") {
            assert!(
                !stderr.contains("Broken pipe") && !stderr.contains("panicked"),
                "{args:?}: {stderr}"
            );
        } else {
            assert_eq!(stderr, "", "{args:?}");
        }
    }
    // verify keeps pg_checksums' exit status for a bad block when nobody reads its summary.
    let heap = data.join(uniform);
    let mut page = std::fs::read(&heap).unwrap();
    page[8000] ^= 0xff;
    std::fs::write(&heap, &page).unwrap();
    for args in [&["verify", d][..], &["verify", d, "--json"][..]] {
        let (status, stderr) = with_closed_stdout(args, tmp.path());
        assert_eq!(status, Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.starts_with(&format!(
                "pageio: error: checksum verification failed in file \"{d}/{uniform}\", block 0: calculated checksum "
            )),
            "{args:?}: {stderr}"
        );
        assert!(
            stderr.ends_with('\n') && stderr.lines().count() == 1,
            "{stderr}"
        );
    }
    // An error reported as JSON on a closed stdout keeps its exit status and its stderr
    // lines: a failure never becomes a quiet success.
    let missing = tmp.path().join("no-such-cluster");
    let missing = missing.to_str().unwrap();
    for args in [
        &["verify", missing, "--json"][..],
        &["checksums", "--check", missing, "--json"][..],
    ] {
        let (status, stderr) = with_closed_stdout(args, tmp.path());
        assert_eq!(status, Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("pageio: error: ") && stderr.contains(missing),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
    // So does a verdict: advise's BAD (a value PostgreSQL refuses at start-up) is exit
    // status 2 whether or not anyone reads the report.
    let conf = tmp.path().join("bad.conf");
    std::fs::write(&conf, "effective_io_concurrency = 100000\n").unwrap();
    let conf = conf.to_str().unwrap();
    for args in [
        &["advise", "--config", conf][..],
        &["advise", "--config", conf, "--json"][..],
    ] {
        let (status, stderr) = with_closed_stdout(args, tmp.path());
        assert_eq!(status, Some(2), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}
