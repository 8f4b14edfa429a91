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

use pageio::advise::units::parse_size;

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

/// Whether a recommended value and what `SHOW` printed are the same setting value.
fn same_value(recommended: &str, shown: &str) -> bool {
    if recommended.eq_ignore_ascii_case(shown) {
        return true;
    }
    if let (Ok(a), Ok(b)) = (recommended.parse::<f64>(), shown.parse::<f64>()) {
        return (a - b).abs() < 1e-9;
    }
    // Sizes: both carry units here (SHOW always prints one), so the base unit is moot.
    matches!((parse_size(recommended, 1), parse_size(shown, 1)), (Some(a), Some(b)) if a == b)
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
        matches!(code, Some(0 | 1 | 3)),
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
                    same_value(value, shown),
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
