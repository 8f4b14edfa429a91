//! `pageio advise --pgdata` on a cluster made by a real PostgreSQL 18: the postgresql.conf
//! snippet it prints is included into the cluster, the server must start with it, and
//! `SHOW` must give back every recommended value (units normalised); every key of the
//! sysctl snippet must exist under /proc/sys. Run again on the configured, running cluster,
//! every instance setting must then be OK and the server seen as running.
//!
//! PostgreSQL comes from `bench/setup-postgres.sh` or `$PAGEIO_PG_BIN`; without it the test
//! prints a skip line, except under `CI`, where it fails.

mod common;
use common::{
    chown_to_pg_user, initdb, pageio_bounded, pg_bin, pg_cluster_dir, with_watchdog, PgServer,
};

/// `name = value` pairs of a conf snippet (comments dropped, quotes removed).
fn conf_lines(snippet: &str) -> Vec<(String, String)> {
    snippet
        .lines()
        .filter(|l| !l.trim_start().starts_with('#') && l.contains('='))
        .map(|l| {
            let l = l.split('#').next().unwrap();
            let (k, v) = l.split_once('=').unwrap();
            (
                k.trim().to_string(),
                v.trim().trim_matches('\'').to_string(),
            )
        })
        .collect()
}

fn item<'a>(v: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == name)
        .unwrap_or_else(|| panic!("no item {name}"))
}

fn advise_json(args: &[&str]) -> serde_json::Value {
    let out = pageio_bounded(args, 120);
    let code = out.status.code();
    assert!(
        matches!(code, Some(0..=2)),
        "{args:?}: status {code:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let worst = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| match i["status"].as_str().unwrap() {
            "ok" => 0,
            "warn" => 1,
            _ => 2,
        })
        .max()
        .unwrap();
    assert_eq!(code, Some(worst), "the exit status is the worst item's");
    v
}

#[test]
fn the_conf_snippet_starts_postgresql_18_and_show_gives_every_value_back() {
    let Some(bin) = pg_bin() else { return };
    with_watchdog("advise_postgres", 300, move || {
        let root = pg_cluster_dir("pageio-advise-");
        let data = initdb(&bin, root.path());
        let data_s = data.display().to_string();
        let bin_s = bin.display().to_string();
        // A desktop-sized shared_buffers (RAM/16) keeps the test gentle on a shared machine;
        // the rules are the same for every workload.
        let args = [
            "advise",
            "--pgdata",
            &data_s,
            "--pg-bin",
            &bin_s,
            "--workload",
            "desktop",
            "--json",
        ];
        let v = advise_json(&args);
        assert_eq!(v["pg_version"], 18, "read from PG_VERSION");
        assert_eq!(v["facts"]["instance"]["pg_version"], 18);
        assert_eq!(v["facts"]["instance"]["data_checksums"], true, "initdb -k");
        assert_eq!(v["facts"]["instance"]["running"]["alive"], false);
        let server = item(&v, "server");
        assert!(
            server["found"]
                .as_str()
                .unwrap()
                .starts_with("stopped (pg_control: shut down); PostgreSQL 18; "),
            "{server}"
        );
        assert!(
            v["facts"]["instance"]["database_size_bytes"]
                .as_u64()
                .unwrap()
                > 1 << 20
        );
        // initdb writes max_connections = 100 into postgresql.conf; it is found there.
        assert_eq!(v["max_connections"], 100);
        assert!(v["max_connections_source"]
            .as_str()
            .unwrap()
            .contains("postgresql.conf:"));
        assert!(
            v["facts"]["pg_bin"]["liburing"].is_boolean(),
            "{}",
            v["facts"]["pg_bin"]
        );

        let snippet = v["postgresql_conf"].as_str().unwrap();
        let lines = conf_lines(snippet);
        for name in [
            "shared_buffers",
            "work_mem",
            "effective_io_concurrency",
            "io_method",
            "io_workers",
            "track_io_timing",
        ] {
            assert!(lines.iter().any(|(k, _)| k == name), "{name} in {snippet}");
        }
        std::fs::write(data.join("pageio.conf"), snippet).unwrap();
        let mut conf = std::fs::read_to_string(data.join("postgresql.conf")).unwrap();
        conf.push_str("\ninclude 'pageio.conf'\n");
        std::fs::write(data.join("postgresql.conf"), conf).unwrap();
        chown_to_pg_user(&data);

        {
            let server = PgServer::start(&bin, root.path());
            for (name, value) in &lines {
                let shown = server.psql(&format!("SHOW {name};"));
                let shown = shown.trim();
                assert!(
                    common::same_setting_value(value, shown),
                    "{name}: recommended {value}, SHOW gives {shown}"
                );
            }
            // Once applied, every instance setting is as recommended, and the running server
            // is seen.
            let again = advise_json(&args);
            assert_eq!(again["facts"]["instance"]["running"]["alive"], true);
            let server = item(&again, "server");
            assert!(
                server["found"]
                    .as_str()
                    .unwrap()
                    .starts_with("running (postmaster pid "),
                "{server}"
            );
            for item in again["items"].as_array().unwrap() {
                if item["group"] == "instance" {
                    assert_eq!(item["status"], "ok", "{item}");
                    assert!(
                        item["source"].as_str().unwrap().contains("pageio.conf:")
                            || item["name"] == "data_checksums"
                            || item["name"] == "configuration files"
                            || item["name"] == "server",
                        "{item}"
                    );
                }
            }
        }

        let sysctl = v["sysctl_conf"].as_str().unwrap();
        for (key, _) in conf_lines(sysctl) {
            let path = format!("/proc/sys/{}", key.replace('.', "/"));
            assert!(std::path::Path::new(&path).exists(), "{key}: no {path}");
        }
    });
}

/// Every value advise calls refused is refused by PostgreSQL 18 with the same message: the
/// value goes into an included file, `postgres -C` loads the configuration as the postmaster
/// does at start-up and must exit with `LOG:  <advise's message>` (and its HINT or DETAIL),
/// and a real start with one of them must fail. PostgreSQL's bounds and spellings that it
/// accepts start a real server, and advise finds nothing refused in them.
#[test]
fn postgresql_18_refuses_exactly_the_values_advise_calls_refused() {
    let Some(bin) = pg_bin() else { return };
    with_watchdog("advise_postgres refusals", 300, move || {
        let root = pg_cluster_dir("pageio-advise-refused-");
        let data = initdb(&bin, root.path());
        let data_s = data.display().to_string();
        let case_file = data.join("pageio-case.conf");
        let mut conf = std::fs::read_to_string(data.join("postgresql.conf")).unwrap();
        conf.push_str("\ninclude 'pageio-case.conf'\n");
        std::fs::write(data.join("postgresql.conf"), conf).unwrap();
        let refused = [
            ("effective_io_concurrency", "100000"),
            ("shared_buffers", "-1"),
            ("shared_buffers", "'abc'"),
            ("shared_buffers", "1kB"),
            ("shared_buffers", "'10gb'"),
            ("shared_buffers", "3000000000"),
            ("io_method", "foo"),
            ("huge_pages", "sometimes"),
            ("track_io_timing", "o"),
            ("checkpoint_completion_target", "1.5"),
            ("random_page_cost", "inf"),
            ("random_page_cost", "nan"),
            ("io_max_concurrency", "0"),
            ("io_workers", "33"),
            ("io_combine_limit", "2MB"),
            ("maintenance_work_mem", "63kB"),
            ("max_parallel_workers_per_gather", "1025"),
            ("max_connections", "0"),
            ("wal_buffers", "-2"),
            ("io_min_workers", "2"),
        ];
        for (name, value) in refused {
            std::fs::write(&case_file, format!("{name} = {value}\n")).unwrap();
            chown_to_pg_user(&data);
            let v = advise_json(&["advise", "--pgdata", &data_s, "--json"]);
            let files = item(&v, "configuration files");
            assert_eq!(files["status"], "bad", "{name} = {value}: {files}");
            let found = files["found"].as_str().unwrap();
            let at = format!("{}:1: ", case_file.display());
            let said = found
                .strip_prefix(&at)
                .unwrap_or_else(|| panic!("{name} = {value}: {found}"));
            // advise puts PostgreSQL's HINT or DETAIL in parentheses after the message.
            let (message, hint) = match said.split_once(" (") {
                Some((m, h)) if !m.contains(" is outside the valid range") => {
                    (m, h.strip_suffix(')'))
                }
                _ => (said, None),
            };
            let out = common::pg(&bin, "postgres", &["-D", &data_s, "-C", name]);
            let log = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{name} = {value} was accepted");
            assert!(
                log.contains(&format!("LOG:  {message}\n")),
                "{name} = {value}: advise says {said:?}, PostgreSQL logs {log}"
            );
            // The io_method hint lists what this build has; advise names io_uring too.
            if let Some(hint) = hint.filter(|_| name != "io_method") {
                assert!(
                    log.contains(&format!("HINT:  {hint}\n"))
                        || log.contains(&format!("DETAIL:  {hint}\n")),
                    "{name} = {value}: {log}"
                );
            }
            assert!(log.contains("FATAL:  configuration file"), "{log}");
        }
        // A real start refuses too.
        std::fs::write(&case_file, "effective_io_concurrency = 100000\n").unwrap();
        chown_to_pg_user(&data);
        let log = root.path().join("refused.log").display().to_string();
        let out = common::pg(
            &bin,
            "pg_ctl",
            &["-D", &data_s, "-l", &log, "-w", "-t", "30", "start"],
        );
        assert!(!out.status.success(), "the server started");
        let log = std::fs::read_to_string(&log).unwrap();
        assert!(
            log.contains("LOG:  100000 is outside the valid range for parameter \"effective_io_concurrency\" (0 .. 1000)"),
            "{log}"
        );
        // The bounds themselves, and spellings PostgreSQL takes, start it.
        std::fs::write(
            &case_file,
            "effective_io_concurrency = 1000\nmaintenance_io_concurrency = 0\n\
             shared_buffers = 127kB\nio_max_concurrency = -1\ncheckpoint_completion_target = 1\n\
             random_page_cost = 0\ntrack_io_timing = ye\nhuge_pages = TRY\nwal_buffers = -1\n\
             io_combine_limit = 1MB\nio_workers = 32\nwork_mem = '64 kB '\n\
             max_parallel_workers_per_gather = 1024\nmaintenance_work_mem = 64kB\n",
        )
        .unwrap();
        chown_to_pg_user(&data);
        let v = advise_json(&["advise", "--pgdata", &data_s, "--json"]);
        assert_eq!(item(&v, "configuration files")["status"], "ok");
        let server = PgServer::start(&bin, root.path());
        assert_eq!(server.psql("SHOW shared_buffers;").trim(), "128kB");
        assert_eq!(server.psql("SHOW effective_io_concurrency;").trim(), "1000");
        assert_eq!(server.psql("SHOW work_mem;").trim(), "64kB");
    });
}
