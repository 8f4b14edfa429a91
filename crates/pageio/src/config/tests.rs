use super::*;

#[test]
fn defaults_match_postgresql() {
    let c = IoConfig::default();
    assert_eq!(c.io_method, IoMethodKind::Worker);
    // io_workers not set: PostgreSQL 19's adaptive pool with its defaults.
    assert_eq!(c.io_workers, IO_WORKERS_ADAPTIVE);
    assert_eq!((c.io_min_workers, c.io_max_workers), (2, 8));
    assert_eq!(c.io_worker_bounds(), (2, 8));
    assert_eq!(c.io_worker_idle_timeout_ms, 60_000);
    assert_eq!(c.io_worker_launch_interval_ms, 100);
    assert_eq!(c.io_max_concurrency, 64);
    assert_eq!(c.io_combine_limit_bytes(), 128 * 1024);
    assert_eq!(c.effective_io_concurrency, 16);
    assert_eq!(c.maintenance_io_concurrency, 16);
    assert_eq!(c.shared_buffers_bytes, 128 << 20);
    assert!(c.validate().is_ok());
}

#[test]
fn maintenance_io_concurrency_is_a_setting() {
    let mut c = IoConfig::default();
    c.set("maintenance-io-concurrency", "48").unwrap();
    assert_eq!(c.maintenance_io_concurrency, 48);
    assert_eq!(
        c.effective_io_concurrency, 16,
        "the other setting is untouched"
    );
    let err = c.set("maintenance_io_concurrency", "5000").unwrap_err();
    assert!(
        err.to_string().contains("maintenance_io_concurrency"),
        "{err}"
    );
    c.maintenance_io_concurrency = 5000;
    assert!(c.validate().is_err());
}

#[test]
fn units() {
    assert_eq!(parse_size_bytes("x", "128kB").unwrap(), 131072);
    assert_eq!(parse_blocks("x", "128kB").unwrap(), 16);
    assert_eq!(parse_blocks("x", "32").unwrap(), 32);
    assert_eq!(parse_blocks("x", "1MB").unwrap(), 128);
    assert!(parse_blocks("x", "12kB").is_err());
    assert!(parse_blocks("x", "12 parsecs").is_err());
    assert!(parse_size_bytes("x", "").is_err());
}

#[test]
fn worker_pool_settings() {
    let mut c = IoConfig::default();
    c.set("io_worker_idle_timeout", "90s").unwrap();
    c.set("io-worker-launch-interval", "250").unwrap();
    assert_eq!(
        (c.io_worker_idle_timeout_ms, c.io_worker_launch_interval_ms),
        (90_000, 250)
    );
    c.set("io_worker_idle_timeout", "1min").unwrap();
    assert_eq!(c.io_worker_idle_timeout_ms, 60_000);
    c.set("io_worker_launch_interval", "0").unwrap();
    assert_eq!(c.io_worker_launch_interval_ms, 0);
    let err = c.set("io_worker_idle_timeout", "5 fortnights").unwrap_err();
    assert!(err.to_string().contains("unknown time unit"), "{err}");
    assert!(c.set("io_worker_idle_timeout", "1000d").is_err());
    c.set("io_min_workers", "4").unwrap();
    c.set("io_max_workers", "16").unwrap();
    assert_eq!(c.io_worker_bounds(), (4, 16));
    assert!(c.set("io_max_workers", "33").is_err());
    assert!(c.set("io_min_workers", "0").is_err());
    // io_workers = N is a fixed pool, as in PostgreSQL 18.
    c.set("io_workers", "3").unwrap();
    assert_eq!(c.io_worker_bounds(), (3, 3));
    c.io_min_workers = 9;
    c.io_max_workers = 8;
    let err = c.validate().unwrap_err().to_string();
    assert!(
        err.contains("io_min_workers") && err.contains("io_max_workers"),
        "{err}"
    );
}

#[test]
fn set_and_ranges() {
    let mut c = IoConfig::default();
    c.set("io-method", "io_uring").unwrap();
    assert_eq!(c.io_method, IoMethodKind::IoUring);
    c.set("io_combine_limit", "256kB").unwrap();
    assert_eq!(c.io_combine_limit_blocks, 32);
    let err = c.set("io_combine_limit", "2MB").unwrap_err().to_string();
    assert!(
        err.contains("io_combine_limit") && err.contains("128"),
        "{err}"
    );
    // seq_read_ahead: block-valued (a bare number is blocks), 0 (off) to 1GB.
    assert_eq!(c.seq_read_ahead_blocks, 8192, "64MB by default");
    assert!(c.seq_read_ahead_auto, "auto by default");
    c.set("seq_read_ahead", "16MB").unwrap();
    assert_eq!(c.seq_read_ahead_blocks, 2048);
    assert!(!c.seq_read_ahead_auto, "a size always advises");
    c.set("seq_read_ahead", " AUTO ").unwrap();
    assert!(c.seq_read_ahead_auto);
    assert_eq!(c.seq_read_ahead_blocks, 8192, "auto advises 64MB ahead");
    c.set("seq_read_ahead", "16MB").unwrap();
    c.set("seq-read-ahead", "256").unwrap();
    assert_eq!(c.seq_read_ahead_blocks, 256);
    c.set("seq_read_ahead", "0").unwrap();
    assert_eq!(c.seq_read_ahead_blocks, 0);
    assert!(!c.seq_read_ahead_auto, "0 never advises");
    let err = c.set("seq_read_ahead", "2GB").unwrap_err().to_string();
    assert!(
        err.contains("seq_read_ahead") && err.contains("1GB"),
        "{err}"
    );
    assert!(c.set("seq_read_ahead", "-1").is_err());
    let err = c.set("seq_read_ahead", "fast").unwrap_err().to_string();
    assert!(
        err.contains("seq_read_ahead") && err.contains("auto") && err.contains("fast"),
        "{err}"
    );
    assert!(c.set("seq_read_ahead", "3kB").is_err(), "not a whole block");
    assert!(c.set("io_workers", "0").is_err());
    assert!(c.set("io_method", "posix").is_err());
    let err = c.set("io_turbo", "on").unwrap_err().to_string();
    assert!(
        err.contains("unrecognized") && err.contains("io_method"),
        "{err}"
    );
    c.set("shared_buffers", "1MB").unwrap();
    assert_eq!(c.shared_buffers_bytes, 1 << 20);
}

#[test]
fn conf_file_syntax() {
    assert_eq!(parse_conf_line("  # comment").unwrap(), None);
    assert_eq!(
        parse_conf_line("io_method = 'worker' # default").unwrap(),
        Some(("io_method".into(), "worker".into()))
    );
    assert_eq!(
        parse_conf_line("io_workers 8").unwrap(),
        Some(("io_workers".into(), "8".into()))
    );
    assert_eq!(
        parse_conf_line("x = 'it''s'").unwrap(),
        Some(("x".into(), "it's".into()))
    );
    assert!(parse_conf_line("x = 'open").is_err());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pageio.conf");
    std::fs::write(&path, "io_method = sync\nio_workers = 12\n").unwrap();
    let mut c = IoConfig::default();
    c.load_file(&path).unwrap();
    assert_eq!((c.io_method, c.io_workers), (IoMethodKind::Sync, 12));
    std::fs::write(&path, "io_workers = many\n").unwrap();
    let err = c.load_file(&path).unwrap_err().to_string();
    assert!(
        err.contains("line 1") && err.contains("io_workers"),
        "{err}"
    );
}

#[test]
fn conf_file_like_postgresql() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("conf.d")).unwrap();
    std::fs::create_dir_all(d.join("sub")).unwrap();
    std::fs::write(
        d.join("postgresql.conf"),
        "max_connections = 100\t\t\t# (change requires restart)\n\
         shared_buffers = 128MB\n\
         log_timezone = 'Etc/UTC'\n\
         shared_preload_libraries = ''\n\
         io_workers 5\n\
         include 'sub/extra.conf'\n\
         include_if_exists 'missing.conf'\n\
         include_dir 'conf.d'\n",
    )
    .unwrap();
    // Relative to the including file (sub/), not to the working directory.
    std::fs::write(d.join("sub/extra.conf"), "include 'deeper.conf'\n").unwrap();
    std::fs::write(d.join("sub/deeper.conf"), "io_method = 'sync'\n").unwrap();
    std::fs::write(d.join("conf.d/01-a.conf"), "io_workers = 7\n").unwrap();
    std::fs::write(d.join("conf.d/02-b.conf"), "io_workers = 9 # last wins\n").unwrap();
    std::fs::write(d.join("conf.d/.hidden.conf"), "io_workers = 1\n").unwrap();
    std::fs::write(d.join("conf.d/notes.txt"), "io_workers = 2\n").unwrap();
    let mut c = IoConfig::default();
    let report = c.load_file(&d.join("postgresql.conf")).unwrap();
    assert_eq!(c.io_workers, 9);
    assert_eq!(c.io_method, IoMethodKind::Sync);
    assert_eq!(c.shared_buffers_bytes, 128 << 20);
    let ignored: Vec<&str> = report.ignored.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(
        ignored,
        [
            "max_connections",
            "log_timezone",
            "shared_preload_libraries"
        ]
    );
    assert_eq!(report.applied.len(), 5);
    assert_eq!(report.applied[1].line, 5);
    assert!(report.applied[2].path.ends_with("sub/deeper.conf"));
}

#[test]
fn conf_file_errors_name_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A missing file: no "line 0".
    let err = IoConfig::default()
        .load_file(&d.join("nope.conf"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("could not open configuration file") && err.contains("nope.conf"),
        "{err}"
    );
    assert!(!err.contains("line 0"), "{err}");
    // A missing include names the including file and line.
    std::fs::write(d.join("a.conf"), "# first\ninclude 'gone.conf'\n").unwrap();
    let err = IoConfig::default()
        .load_file(&d.join("a.conf"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("gone.conf"), "{err}");
    assert!(err.contains("a.conf\" line 2"), "{err}");
    // A cycle is named as one.
    std::fs::write(d.join("x.conf"), "include 'y.conf'\n").unwrap();
    std::fs::write(d.join("y.conf"), "io_workers = 4\ninclude 'x.conf'\n").unwrap();
    let err = IoConfig::default()
        .load_file(&d.join("x.conf"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("include cycle"), "{err}");
    assert!(err.contains("y.conf\" line 2"), "{err}");
    // Nesting: ten levels of includes are fine, as in PostgreSQL, eleven are not.
    for i in 0..10 {
        std::fs::write(
            d.join(format!("ok{i}.conf")),
            format!("include 'ok{}.conf'\n", i + 1),
        )
        .unwrap();
    }
    std::fs::write(d.join("ok10.conf"), "io_workers = 6\n").unwrap();
    let mut c = IoConfig::default();
    c.load_file(&d.join("ok0.conf")).unwrap();
    assert_eq!(c.io_workers, 6);
    for i in 0..12 {
        std::fs::write(
            d.join(format!("n{i}.conf")),
            format!("include 'n{}.conf'\n", i + 1),
        )
        .unwrap();
    }
    std::fs::write(d.join("n12.conf"), "io_workers = 4\n").unwrap();
    let err = IoConfig::default()
        .load_file(&d.join("n0.conf"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("maximum nesting depth of 10"), "{err}");
    // A misspelt pageio setting is an error, not silently ignored.
    std::fs::write(d.join("typo.conf"), "io_wrokers = 4\n").unwrap();
    let err = IoConfig::default()
        .load_file(&d.join("typo.conf"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("line 1") && err.contains("did you mean \"io_workers\""),
        "{err}"
    );
    // Junk after a quoted value.
    assert!(parse_conf_line("io_method = 'sync' extra").is_err());
    assert_eq!(
        parse_conf_line("x = ''").unwrap(),
        Some(("x".into(), String::new()))
    );
}
