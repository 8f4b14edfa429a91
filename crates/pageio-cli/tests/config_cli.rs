//! `--config FILE`: a real PostgreSQL 18 `postgresql.conf` (as `initdb` writes it) is
//! accepted as it is — settings pageio does not use are ignored, includes are followed
//! relative to the including file — and real errors name the file and line.

mod common;

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn initdb_postgresql_conf_with_includes_is_accepted() {
    let Some(bin) = common::pg_bin() else { return };
    common::with_watchdog("config_cli", 120, move || {
        let dir = common::pg_cluster_dir("pageio-config-");
        let data = common::initdb(&bin, dir.path());
        let conf = data.join("postgresql.conf");
        let text = std::fs::read_to_string(&conf).unwrap();
        assert!(
            text.contains("max_connections = 100"),
            "initdb's file changed?"
        );
        // Includes relative to the including file, as PostgreSQL resolves them.
        std::fs::create_dir_all(data.join("conf.d")).unwrap();
        std::fs::write(
            data.join("conf.d/10-io.conf"),
            "io_method = 'sync'\neffective_io_concurrency = 4\n",
        )
        .unwrap();
        std::fs::write(
            data.join("pageio.conf"),
            "io_combine_limit 64kB   # blocks or units\n",
        )
        .unwrap();
        std::fs::write(
            &conf,
            format!("{text}\ninclude_dir 'conf.d'\ninclude_if_exists 'absent.conf'\ninclude 'pageio.conf'\n"),
        )
        .unwrap();

        let tmp = tempfile::tempdir().unwrap();
        let pgdata = common::unpack_fixture(tmp.path());
        // A scan of the fixture's `uniform` heap with `extra` arguments and `--config`.
        let scan = |extra: &[&str]| {
            let mut args = vec![
                "scan",
                "--pgdata",
                pgdata.to_str().unwrap(),
                "--heap",
                "base/5/16384",
            ];
            args.extend_from_slice(extra);
            args.extend(["--config", conf.to_str().unwrap()]);
            common::pageio_bounded(&args, 60)
        };
        let out = scan(&["--json"]);
        assert!(out.status.success(), "{}", stderr(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["io_method"], "sync");
        assert_eq!(v["effective_io_concurrency"], 4);
        assert_eq!(v["io_combine_limit_blocks"], 8);
        assert_eq!(v["shared_buffers_bytes"], 128u64 << 20);
        assert_eq!(v["rows"], 20000);

        // A real error names the file and the line; the flag hint is added by the CLI.
        std::fs::write(data.join("pageio.conf"), "# io\nio_combine_limit = 4MB\n").unwrap();
        let out = scan(&[]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains("pageio.conf\" line 2"), "{err}");
        assert!(err.contains("io_combine_limit"), "{err}");
    });
}

#[test]
fn missing_config_file_is_named_without_line_zero() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nowhere.conf");
    let out = common::pageio_bounded(
        &[
            "scan",
            "--dataset",
            "uniform",
            "--config",
            missing.to_str().unwrap(),
        ],
        60,
    );
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("could not open configuration file")
            && err.contains("nowhere.conf")
            && err.contains("No such file"),
        "{err}"
    );
    assert!(!err.contains("line 0"), "{err}");
}

/// A configuration file that includes `/dev/zero` (which once grew `advise` to 24 GB until
/// the OOM killer ended it) is refused at once by every command that reads one.
#[test]
fn an_include_of_dev_zero_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("z.conf");
    std::fs::write(&conf, "include '/dev/zero'\n").unwrap();
    let conf = conf.to_str().unwrap();
    for args in [
        vec!["advise", "--config", conf],
        vec!["scan", "--dataset", "uniform", "--config", conf],
    ] {
        let start = std::time::Instant::now();
        let out = common::pageio_bounded(&args, 60);
        // advise reports the unreadable file as a BAD item of its report (stdout); scan
        // stops with the error (stderr).
        assert_ne!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
        let line = all
            .lines()
            .find(|l| l.contains("/dev/zero"))
            .unwrap_or_else(|| panic!("{args:?}: no line names /dev/zero: {all}"));
        assert!(line.contains("a character device"), "{args:?}: {line}");
        assert!(
            line.len() < 2000,
            "{args:?}: a short message, not the file: {line}"
        );
        assert!(start.elapsed().as_secs() < 10, "{args:?}");
    }
}
