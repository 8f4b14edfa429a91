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

/// Runs pageio under `prlimit --as=1G` (prlimit execs it, so the child is pageio itself)
/// and returns its output and its peak resident memory in bytes (`wait4`'s `ru_maxrss`).
// The child is reaped by `wait4` below, which also gives its resource usage.
#[allow(clippy::zombie_processes)]
fn under_1g_with_peak(args: &[&str]) -> (std::process::Output, u64) {
    use std::io::Read;
    use std::os::unix::process::ExitStatusExt;
    let mut child = std::process::Command::new("prlimit")
        .arg("--as=1073741824")
        .arg(env!("CARGO_BIN_EXE_pageio"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        out.read_to_end(&mut v).unwrap();
        v
    });
    let mut stderr_bytes = Vec::new();
    err.read_to_end(&mut stderr_bytes).unwrap();
    let stdout_bytes = reader.join().unwrap();
    let mut status = 0;
    // SAFETY: rusage is plain old data, for which all-zero bytes are a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the pid is our unreaped child; status and usage are writable.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(
        pid,
        child.id() as i32,
        "wait4: {}",
        std::io::Error::last_os_error()
    );
    let output = std::process::Output {
        status: std::process::ExitStatus::from_raw(status),
        stdout: stdout_bytes,
        stderr: stderr_bytes,
    };
    (output, usage.ru_maxrss as u64 * 1024)
}

/// A configuration file (or an include) of 2 GB, one with a 100 MB line, one of 10 MB that
/// is a single line, and an include of `/dev/zero`: `advise --config` under a 1 GB
/// address-space limit exits 2 with the limit named, a short message, and a peak resident
/// memory under 100 MB.
#[test]
fn oversized_configuration_input_is_refused_within_a_memory_bound() {
    let dir = tempfile::tempdir().unwrap();
    let at = |name: &str| dir.path().join(name);
    // 2 GB, sparse: nothing to write, everything to read if the size were not checked.
    std::fs::File::create(at("two-gb.conf"))
        .unwrap()
        .set_len(2 << 30)
        .unwrap();
    std::fs::write(
        at("includes-two-gb.conf"),
        format!("include '{}'\n", at("two-gb.conf").display()),
    )
    .unwrap();
    // Written a MB at a time: the peak measured below includes this process's own at the
    // time pageio starts (the kernel carries it over the exec), so it must stay small.
    let one_line = |name: &str, head: &str, mb: usize| {
        use std::io::Write;
        let mut f = std::io::BufWriter::new(std::fs::File::create(at(name)).unwrap());
        f.write_all(head.as_bytes()).unwrap();
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..mb {
            f.write_all(&chunk).unwrap();
        }
        f.write_all(b"'\n").unwrap();
    };
    one_line("long-line.conf", "shared_buffers = '", 100);
    one_line("ten-mb-line.conf", "work_mem = '", 10);
    std::fs::write(at("zero.conf"), "include '/dev/zero'\n").unwrap();
    let cases: [(&str, &[&str]); 5] = [
        ("two-gb.conf", &["2147483648 bytes", "CONF_FILE_MAX_BYTES"]),
        (
            "includes-two-gb.conf",
            &["2147483648 bytes", "CONF_FILE_MAX_BYTES"],
        ),
        (
            "long-line.conf",
            &["104857620 bytes", "CONF_FILE_MAX_BYTES"],
        ),
        ("ten-mb-line.conf", &["CONF_LINE_MAX_BYTES"]),
        ("zero.conf", &["/dev/zero", "a character device"]),
    ];
    for (file, wanted) in cases {
        let path = at(file);
        let start = std::time::Instant::now();
        let (out, peak_bytes) = under_1g_with_peak(&["advise", "--config", path.to_str().unwrap()]);
        let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
        assert_eq!(
            out.status.code(),
            Some(2),
            "{file}: {:?}\n{all}",
            out.status
        );
        for w in wanted {
            assert!(all.contains(w), "{file}: want {w:?} in:\n{all}");
        }
        assert!(
            all.lines().all(|l| l.len() < 2000),
            "{file}: every line short, the input never quoted whole"
        );
        assert!(
            peak_bytes < 100 << 20,
            "{file}: peak resident memory {peak_bytes} bytes"
        );
        assert!(
            start.elapsed().as_secs() < 10,
            "{file}: {:?}",
            start.elapsed()
        );
    }
}
