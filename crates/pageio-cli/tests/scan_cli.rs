//! `pageio scan` end to end on the real PostgreSQL 18 fixture: text and JSON output carry
//! PostgreSQL's answers; bad input fails with a message naming the fix.

mod common;
use common::pageio;

/// The file of relation `name` in the fixture (`base/5/16384`), from PostgreSQL's
/// `pg_relation_filepath` when the fixture was built.
fn rel(name: &str) -> &'static str {
    common::fixture_facts().path(name)
}

fn fixture() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let pgdata = common::unpack_fixture(dir.path());
    (dir, pgdata)
}

#[test]
fn scan_answers_in_text_and_json() {
    let (_dir, pgdata) = fixture();
    let pgdata = pgdata.to_str().unwrap();
    for (kind, method) in [("seq", "sync"), ("bitmap", "worker"), ("index", "io_uring")] {
        let out = pageio(&[
            "scan",
            "--pgdata",
            pgdata,
            "--heap",
            rel("linear_10"),
            "--index",
            rel("linear_10_a"),
            "--kind",
            kind,
            "--where",
            "a between 100 and 200",
            "--io-method",
            method,
            "--cold",
            "--json",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["rows"], 2000, "{kind}");
        assert_eq!(v["sum_octet_length"], 132000, "{kind}");
        assert_eq!(v["io_method"], method);
        assert!(v["shared_read"].as_u64().unwrap() > 0);
        assert!(v["stream"]["ios"].as_u64().unwrap() > 0);
    }
    let out = pageio(&[
        "scan",
        "--pgdata",
        pgdata,
        "--heap",
        rel("uniform"),
        "--where",
        "a between 0 and 10",
        "--parallel",
        "1",
        "--seq-read-in-place",
        "off",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with(&format!("Seq Scan on {}", rel("uniform"))),
        "{text}"
    );
    let pages = common::fixture_facts().relation("uniform").pages;
    assert_eq!(pages, 1112);
    assert!(
        text.contains(&format!("Buffers: shared hit=0 read={pages}\n")),
        "{text}"
    );
    assert!(
        text.contains("Result: rows=207 sum_octet_length=13662"),
        "{text}"
    );
    // The heap just read is in the page cache: by default the scan reads it there, in
    // place, and none of it through the buffer pool; the answer is the same.
    let out = pageio(&[
        "scan",
        "--pgdata",
        pgdata,
        "--heap",
        rel("uniform"),
        "--where",
        "a between 0 and 10",
        "--parallel",
        "1",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!(
            "Buffers: shared hit=0 read=0, in place from the page cache={pages}\n"
        )),
        "{text}"
    );
    assert!(
        text.contains("Result: rows=207 sum_octet_length=13662"),
        "{text}"
    );
}

#[test]
fn parallel_seq_scan_reports_its_workers_and_the_serial_answer() {
    let (_dir, pgdata) = fixture();
    let pgdata = pgdata.to_str().unwrap();
    for method in ["sync", "worker", "io_uring"] {
        for threads in ["1", "3"] {
            let out = pageio(&[
                "scan",
                "--pgdata",
                pgdata,
                "--heap",
                rel("uniform"),
                "--where",
                "a between 250 and 750",
                "--io-method",
                method,
                "--parallel",
                threads,
                "--json",
            ]);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(
                (v["rows"].as_u64(), v["sum_octet_length"].as_u64()),
                (Some(9917), Some(654522)),
                "{method} {threads}"
            );
            assert_eq!(v["parallel_workers"].as_u64().unwrap().to_string(), threads);
            assert_eq!(v["heap_pages"], 1112, "{method} {threads}");
        }
    }
    let out = pageio(&[
        "scan",
        "--pgdata",
        pgdata,
        "--heap",
        rel("uniform"),
        "--parallel",
        "2",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with(&format!("Parallel Seq Scan on {}", rel("uniform"))),
        "{text}"
    );
    assert!(
        text.contains("Workers Launched: 1 (and the leader: 2 threads)"),
        "{text}"
    );
    assert!(
        text.contains("Result: rows=20000 sum_octet_length=1320000"),
        "{text}"
    );
    // Only seq scans run in parallel; too many threads is refused by the flag's range.
    for (extra, wanted) in [
        (
            vec![
                "--index",
                rel("uniform_a"),
                "--kind",
                "bitmap",
                "--parallel",
                "2",
            ],
            "only seq scans run in parallel",
        ),
        (vec!["--parallel", "100000"], "--jobs"),
        (vec!["-j", "100000"], "--jobs"),
    ] {
        let mut args = vec!["scan", "--pgdata", pgdata, "--heap", rel("uniform")];
        args.extend(extra);
        let out = pageio(&args);
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(wanted), "{err}");
    }
}

#[test]
fn scan_reports_the_io_worker_pool() {
    let (dir, pgdata) = fixture();
    let pgdata = pgdata.to_str().unwrap();
    let conf = dir.path().join("pool.conf");
    std::fs::write(
        &conf,
        "io_max_workers = 4\nio_worker_launch_interval = '10ms'\n",
    )
    .unwrap();
    let base = [
        "scan",
        "--pgdata",
        pgdata,
        "--heap",
        rel("uniform"),
        "--io-method",
        "worker",
    ];
    let mut args = base.to_vec();
    args.extend(["--config", conf.to_str().unwrap(), "--json"]);
    let out = pageio(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = &v["io_worker_pool"];
    assert_eq!(
        (p["min_workers"].as_u64(), p["max_workers"].as_u64()),
        (Some(2), Some(4)),
        "{v}"
    );
    assert_eq!(p["adaptive"], true);
    let workers = p["workers"].as_u64().unwrap();
    assert!((2..=4).contains(&workers), "{v}");
    // Text: the adaptive pool with its bounds; io_workers = N is a fixed pool.
    let out = pageio(&base);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(" of 2..8, adaptive)"), "{text}");
    let mut args = base.to_vec();
    args.extend(["--io-workers", "3"]);
    let text = String::from_utf8_lossy(&pageio(&args).stdout).into_owned();
    assert!(text.contains("(io_workers=3)"), "{text}");
    // A floor above the ceiling names both settings as flags.
    let mut args = base.to_vec();
    args.extend(["--io-min-workers", "9", "--io-max-workers", "4"]);
    let out = pageio(&args);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--io-min-workers") && err.contains("--io-max-workers"),
        "{err}"
    );
    let mut args = base.to_vec();
    args.extend(["--io-worker-idle-timeout", "5 fortnights"]);
    let out = pageio(&args);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown time unit"));
}

#[test]
fn bad_input_names_the_fix() {
    let (_dir, pgdata) = fixture();
    let pgdata = pgdata.to_str().unwrap();
    let cases: [(&[&str], &str); 4] = [
        (
            &[
                "scan",
                "--pgdata",
                pgdata,
                "--heap",
                rel("uniform"),
                "--kind",
                "hash",
            ],
            "expected seq, bitmap or index",
        ),
        (
            &[
                "scan",
                "--pgdata",
                pgdata,
                "--heap",
                rel("uniform"),
                "--where",
                "a > 5",
            ],
            "a between LO and HI",
        ),
        (
            &[
                "scan",
                "--pgdata",
                pgdata,
                "--heap",
                rel("uniform"),
                "--kind",
                "index",
            ],
            "--index",
        ),
        (
            &[
                "scan",
                "--pgdata",
                pgdata,
                "--heap",
                rel("uniform"),
                "--io-workers",
                "99",
            ],
            "io_workers",
        ),
    ];
    for (args, want) in cases {
        let out = pageio(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(err.starts_with("pageio: error: "), "{err}");
    }
}

/// Scan's defaults: a seq scan runs io_method auto (io_uring when the kernel allows it, else
/// worker with the reason on stderr) with 16 reads in flight; bitmap and index scans run
/// worker (two or more CPUs) with 128 and the handles for them. An explicit flag or
/// config-file line wins; the answer is the same.
#[test]
fn scan_defaults_to_io_method_auto_unless_chosen() {
    let (dir, pgdata) = fixture();
    let pgdata = pgdata.to_str().unwrap();
    let scan = |extra: &[&str]| {
        let mut args = vec![
            "scan",
            "--pgdata",
            pgdata,
            "--heap",
            rel("uniform"),
            "--json",
        ];
        args.extend_from_slice(extra);
        let out = pageio(&args);
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.success(), "{extra:?}: {stderr}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (v, stderr)
    };
    let (v, stderr) = scan(&[]);
    let method = v["io_method"].as_str().unwrap().to_string();
    let uring_works = pageio::aio::method::uring::probe().is_ok();
    if uring_works {
        assert_eq!(method, "io_uring", "{stderr}");
    } else {
        assert_eq!(method, "worker");
        assert!(
            stderr.contains("io_uring"),
            "the fallback says why: {stderr}"
        );
    }
    assert_eq!(v["effective_io_concurrency"], 16);
    assert_eq!(v["io_max_concurrency"], 64);
    assert_eq!(v["seq_read_ahead"], "auto", "measured by default");
    assert_eq!(
        v["seq_read_ahead_bytes"],
        64 << 20,
        "64MB ahead while advising"
    );
    // Cold, measured: the fixture's uniform table (1112 blocks) is shorter than the first
    // stretch, which the kernel's own read-ahead reads, so nothing is advised.
    let (cold, _) = scan(&["--cold"]);
    assert_eq!(cold["read_ahead_advice"], 0, "{cold}");
    let choice = &cold["read_ahead_choice"];
    assert_eq!(choice["stretches_kernel"], 1, "{cold}");
    assert_eq!(choice["stretches_advised"], 0, "{cold}");
    assert!(choice["chosen"].is_null(), "one way measured: {cold}");
    // Always advising: the kernel is told about each 2 MB piece of the heap once (five).
    let (cold, _) = scan(&["--cold", "--seq-read-ahead", "64MB"]);
    assert_eq!(cold["seq_read_ahead"], "advise");
    assert_eq!(cold["read_ahead_advice"], 5, "{cold}");
    assert_eq!(cold["read_ahead_choice"]["stretches_kernel"], 0, "{cold}");
    let (cold, _) = scan(&["--cold", "--seq-read-ahead", "0"]);
    assert_eq!(cold["seq_read_ahead"], "kernel");
    assert_eq!(cold["seq_read_ahead_bytes"], 0);
    assert_eq!(cold["read_ahead_advice"], 0, "{cold}");
    // The fixture was just unpacked, so the page cache holds the heap: by default every
    // page is read in place, none through a stream.
    assert_eq!(v["seq_read_in_place"], true);
    assert_eq!(v["pages_in_place"], 1112, "{v}");
    assert_eq!(v["shared_read"], 0, "{v}");
    // The report of a parallel scan sums its streams, budget and depth included.
    let (copied, _) = scan(&["--seq-read-in-place", "off"]);
    assert_eq!(copied["seq_read_in_place"], false);
    assert_eq!(copied["pages_in_place"], 0, "{copied}");
    assert_eq!(copied["shared_read"], 1112, "{copied}");
    assert_eq!(copied["rows"], v["rows"]);
    assert_eq!(copied["sum_octet_length"], v["sum_octet_length"]);
    assert_eq!(copied["stream"]["io_budget"], 16, "{}", copied["stream"]);
    assert!(
        copied["stream"]["max_ios_in_flight"].as_u64().unwrap() >= 1,
        "{}",
        copied["stream"]
    );
    let rows = v["rows"].as_u64().unwrap();
    assert_eq!(rows, 20000);
    let (v, _) = scan(&["--io-method", "worker", "--effective-io-concurrency", "8"]);
    assert_eq!(v["io_method"], "worker");
    assert_eq!(v["effective_io_concurrency"], 8);
    assert_eq!(v["io_max_concurrency"], 64, "never lowered");
    assert_eq!(v["rows"].as_u64(), Some(rows));
    // The handle budget follows a chosen effective_io_concurrency unless it is chosen too.
    let (v, _) = scan(&["--effective-io-concurrency", "200"]);
    assert_eq!(v["io_max_concurrency"], 200);
    assert_eq!(v["rows"].as_u64(), Some(rows));
    let (v, _) = scan(&[
        "--effective-io-concurrency",
        "200",
        "--io-max-concurrency",
        "32",
        "--seq-read-in-place",
        "off",
    ]);
    assert_eq!(v["effective_io_concurrency"], 200);
    assert_eq!(v["io_max_concurrency"], 32);
    assert!(
        v["stream"]["max_ios_in_flight"].as_u64().unwrap() <= 32,
        "{}",
        v["stream"]
    );
    assert_eq!(v["rows"].as_u64(), Some(rows));
    let conf = dir.path().join("sync.conf");
    std::fs::write(&conf, "io_method = sync\n").unwrap();
    let (v, _) = scan(&["--config", conf.to_str().unwrap()]);
    assert_eq!(v["io_method"], "sync");
    assert_eq!(v["rows"].as_u64(), Some(rows));
    // Bitmap and index scans default to worker where there is a second CPU for its I/O
    // workers, with 128 reads in flight; a choice still wins.
    let two_cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2;
    let wanted = if two_cpus { "worker" } else { method.as_str() };
    let bitmap = [
        "--index",
        rel("uniform_a"),
        "--kind",
        "bitmap",
        "--where",
        "a between 250 and 750",
    ];
    let (v, stderr) = scan(&bitmap);
    assert_eq!(v["io_method"], wanted, "{stderr}");
    assert_eq!(v["effective_io_concurrency"], 128);
    assert_eq!(v["io_max_concurrency"], 128);
    let bitmap_rows = v["rows"].as_u64().unwrap();
    let index = [
        "--index",
        rel("uniform_a"),
        "--kind",
        "index",
        "--where",
        "a between 250 and 750",
    ];
    let (v, stderr) = scan(&index);
    assert_eq!(v["io_method"], wanted, "{stderr}");
    assert_eq!(v["effective_io_concurrency"], 128);
    assert_eq!(v["io_max_concurrency"], 128);
    let index_rows = v["rows"].as_u64().unwrap();
    assert!(index_rows > 0 && index_rows < rows, "{index_rows}");
    assert_eq!(
        bitmap_rows, index_rows,
        "a bitmap and an index scan of one range"
    );
    let (v, _) = scan(&[&index[..], &["--io-method", "sync"]].concat());
    assert_eq!(v["io_method"], "sync");
    assert_eq!(v["rows"].as_u64(), Some(index_rows));
}

/// `--seq-map-ahead`: a serial scan of a cached heap of three 16 MB windows has its helper
/// thread map the two after the first (`pages_mapped_ahead`), with the answer of `off`,
/// which maps nothing; the text report says so; a nonsense value names the choices.
#[test]
fn seq_map_ahead_maps_a_serial_scans_next_windows() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let gen = common::pageio_bounded(
        &[
            "gen",
            "--dataset",
            "uniform",
            "--rows",
            "100000",
            "--out",
            out,
        ],
        300,
    );
    assert!(
        gen.status.success(),
        "{}",
        String::from_utf8_lossy(&gen.stderr)
    );
    let scan = |extra: &[&str]| -> serde_json::Value {
        let mut args = vec![
            "scan",
            "--dataset",
            "uniform",
            "--data-dir",
            out,
            "--jobs",
            "1",
        ];
        args.extend_from_slice(extra);
        let o = common::pageio_bounded(&args, 120);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        if extra.contains(&"--json") {
            serde_json::from_slice(&o.stdout).unwrap()
        } else {
            serde_json::Value::String(String::from_utf8_lossy(&o.stdout).into())
        }
    };
    let heap = dir.path().join("uniform");
    // The machine may page out idle page cache: one of three tries must find all of the
    // heap cached (read just before); every answer must be the same.
    let cached = |setting: &str| {
        let mut last = serde_json::Value::Null;
        for _ in 0..3 {
            for f in std::fs::read_dir(&heap).unwrap() {
                let _ = std::fs::read(f.unwrap().path());
            }
            last = scan(&["--json", "--seq-map-ahead", setting]);
            assert_eq!(last["seq_map_ahead"], setting, "{last}");
            assert_eq!(last["rows"], 100000, "{last}");
            if last["pages_in_place"] == last["heap_pages"] {
                return last;
            }
        }
        panic!("never all in place: {last}");
    };
    let on = cached("on");
    let off = cached("off");
    let pages = on["heap_pages"].as_u64().unwrap();
    assert!(pages > 2 * 2048 && pages < 3 * 2048, "{on}");
    assert_eq!(on["pages_mapped_ahead"], pages - 2048, "{on}");
    assert_eq!(off["pages_mapped_ahead"], 0, "{off}");
    // Verified ahead only among the pages mapped ahead; nothing without the thread.
    assert!(
        on["pages_verified_ahead"].as_u64().unwrap() <= pages - 2048,
        "{on}"
    );
    assert_eq!(off["pages_verified_ahead"], 0, "{off}");
    assert_eq!(on["sum_octet_length"], off["sum_octet_length"]);
    let text = scan(&["--seq-map-ahead", "on"]);
    assert!(text.as_str().unwrap().contains("(mapped ahead="), "{text}");
    assert!(
        text.as_str().unwrap().contains(", verified ahead="),
        "{text}"
    );
    let bad = common::pageio_bounded(
        &[
            "scan",
            "--dataset",
            "uniform",
            "--data-dir",
            out,
            "--seq-map-ahead",
            "maybe",
        ],
        60,
    );
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("\"seq_map_ahead\": \"maybe\": expected one of: auto, on, off"),
        "{err}"
    );
}
