//! `pageio advise --dsn` against a real PostgreSQL 18 built here, started once.
//!
//! A small server (shared_buffers 16MB, max_wal_size 32MB, checkpoint_timeout 30s, work_mem
//! 64kB, every statement logged with its application name) and a workload that leaves what a
//! DBA looks for: more WAL than max_wal_size (requested checkpoints), a sort far larger than
//! work_mem (temporary files), a table with autovacuum off whose rows were all deleted (past
//! its autovacuum threshold), an index nothing reads and an index that repeats the primary
//! key. Then `work_mem` is changed in postgresql.conf without a reload.
//!
//! `advise --dsn … --pgdata … --json` must report each as its item with the expected status
//! and figures, the unreloaded setting as a difference between file and live value, exit
//! with the worst status; the server's log must hold only read-only statements from
//! `pageio advise`; and the postgresql.conf snippet (with the live items' lines) must load:
//! `postgres -C` gives back every value it sets.

mod common;
use common::{
    chown_to_pg_user, initdb, pageio_bounded, pg, pg_bin, pg_cluster_dir, with_watchdog, PgServer,
};

use pageio::advise::units::parse_size;
use std::path::Path;

use serde_json::Value;

fn item<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == name)
        .unwrap_or_else(|| panic!("no item {name} in {}", v["items"]))
}

/// The status and the found text of item `name`.
fn verdict(v: &Value, name: &str) -> (String, String) {
    let it = item(v, name);
    (
        it["status"].as_str().unwrap().to_string(),
        it["found"].as_str().unwrap().to_string(),
    )
}

fn run(bin: &Path) {
    let dir = pg_cluster_dir("pageio-advise-live-");
    let root = dir.path().to_path_buf();
    let data = initdb(bin, &root);
    let conf = data.join("postgresql.conf");
    let mut text = std::fs::read_to_string(&conf).unwrap();
    text.push_str(
        "shared_buffers = 16MB\nmax_wal_size = 32MB\nmin_wal_size = 32MB\n\
         checkpoint_timeout = 30s\nwork_mem = 64kB\nlog_statement = 'all'\n\
         log_line_prefix = '%a|'\n",
    );
    std::fs::write(&conf, &text).unwrap();
    let server = PgServer::start(bin, &root);
    // The workload: ~60 MB of WAL (checkpoints requested by volume), a 250k-row sort in
    // 64 kB of work_mem, a table emptied with autovacuum off for it, an unused index and a
    // copy of the primary key.
    server.psql(
        "CREATE TABLE orders (id int PRIMARY KEY, note text, day int); \
         INSERT INTO orders SELECT g, md5(g::text), g % 100 FROM generate_series(1, 250000) g; \
         CREATE INDEX orders_note_idx ON orders (note); \
         CREATE INDEX orders_id_copy ON orders (id); \
         CREATE TABLE events (a int) WITH (autovacuum_enabled = false); \
         INSERT INTO events SELECT generate_series(1, 50000); \
         ANALYZE events; \
         DELETE FROM events; \
         SELECT count(*) FROM (SELECT * FROM orders ORDER BY day, md5(note)) s",
    );
    // Edited, not reloaded.
    text.push_str("work_mem = 2MB\n");
    std::fs::write(&conf, &text).unwrap();
    chown_to_pg_user(&conf);

    let dsn = format!(
        "host={} port=5432 user=postgres dbname=postgres",
        root.display()
    );
    let data_arg = data.display().to_string();
    let out = pageio_bounded(
        &["advise", "--dsn", &dsn, "--pgdata", &data_arg, "--json"],
        120,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    assert_eq!(
        v["live"]["server_version_num"].as_u64().unwrap() / 10_000,
        18
    );
    assert_eq!(v["live"]["role"], "postgres");

    let (status, found) = verdict(&v, "checkpoints");
    assert_eq!(status, "warn", "{found}");
    assert!(found.ends_with("timed (max_wal_size 32 MiB)"), "{found}");
    let requested: u64 = found.split(' ').next().unwrap().parse().unwrap();
    assert!(requested >= 1, "{found}");
    assert_eq!(
        item(&v, "checkpoints")["recommended"],
        "max_wal_size = '64MB' (twice the live value)"
    );

    let (status, found) = verdict(&v, "temp files");
    assert_eq!(status, "warn", "{found}");
    assert!(found.contains("(work_mem 64 kiB): postgres "), "{found}");

    let (status, found) = verdict(&v, "autovacuum backlog");
    assert_eq!(status, "warn", "{found}");
    assert_eq!(
        found,
        "1 table(s) past 2× the threshold: public.events (50000 dead, threshold 10050, autovacuum_enabled = false)"
    );

    let (status, found) = verdict(&v, "unused indexes");
    assert_eq!(status, "warn", "{found}");
    assert!(found.starts_with("2 never scanned"), "{found}");
    assert!(
        found.contains("public.orders_note_idx on public.orders"),
        "{found}"
    );
    assert!(
        found.contains("public.orders_id_copy on public.orders"),
        "{found}"
    );
    assert!(!found.contains("orders_pkey"), "{found}");

    let (status, found) = verdict(&v, "duplicate indexes");
    assert_eq!(status, "warn", "{found}");
    assert_eq!(
        found,
        "1 set(s): public.orders_id_copy = public.orders_pkey on public.orders"
    );

    let (status, found) = verdict(&v, "configuration reloaded");
    assert_eq!(status, "warn", "{found}");
    assert_eq!(
        found,
        format!(
            "work_mem: file 2MB at {}:{} vs live 64 × kB (not reloaded)",
            conf.display(),
            text.lines().count()
        )
    );
    for (name, status) in [
        ("fsync", "ok"),
        ("full_page_writes", "ok"),
        ("synchronous_commit", "ok"),
        ("autovacuum", "ok"),
        ("pending_restart", "ok"),
        ("invalid indexes", "ok"),
        ("prepared transactions", "ok"),
        ("wal_compression", "warn"),
        ("statistics age", "warn"),
    ] {
        assert_eq!(verdict(&v, name).0, status, "{name}: {}", item(&v, name));
    }
    let (_, found) = verdict(&v, "pg_stat_io");
    assert!(found.starts_with("client backend "), "{found}");
    assert!(
        found.ends_with("(track_io_timing is off: no I/O times)"),
        "{found}"
    );
    // The exit status is the worst item's.
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
    assert_eq!(out.status.code(), Some(worst), "{stderr}");

    // The text report says which server it read.
    let out = pageio_bounded(&["advise", "--dsn", &dsn], 120);
    let report = String::from_utf8_lossy(&out.stdout);
    let first = report.lines().next().unwrap_or_default();
    assert!(first.starts_with("live: PostgreSQL 18."), "{report}");
    assert!(
        first.ends_with(&format!(
            " at host={} port=5432 dbname=postgres user=postgres (database postgres, role postgres)",
            root.display()
        )),
        "{report}"
    );
    assert!(
        report.contains("\nlive\n  [OK  ] pending_restart"),
        "{report}"
    );
    assert!(report.contains("  [WARN] checkpoints: "), "{report}");
    // Without files, the live settings stand for them, each with pg_settings' file:line;
    // work_mem is the live 64kB, not the file's unreloaded 2MB.
    let line_of = |wanted: &str| text.lines().position(|l| l == wanted).unwrap() + 1;
    for (name, value, line) in [
        ("shared_buffers", "16MB", "shared_buffers = 16MB"),
        ("work_mem", "64kB", "work_mem = 64kB"),
    ] {
        let shown = format!("] {name}: {value}  ({}:{})", conf.display(), line_of(line));
        assert!(report.contains(&shown), "{shown} not in {report}");
    }

    // A role without pg_read_all_stats and pg_read_all_settings is told what it misses, and
    // the checks still run.
    server.psql("CREATE ROLE monitor LOGIN");
    let monitor_dsn = dsn.replace("user=postgres", "user=monitor");
    let out = pageio_bounded(&["advise", "--dsn", &monitor_dsn, "--json"], 120);
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(
        verdict(&v, "privilege"),
        (
            "warn".to_string(),
            "role \"monitor\" lacks pg_read_all_stats (other sessions' activity and wait events) and pg_read_all_settings (the file and line of each live setting)".to_string()
        )
    );
    assert_eq!(
        item(&v, "privilege")["fix"],
        "as a superuser: GRANT pg_read_all_stats, pg_read_all_settings TO \"monitor\""
    );
    assert_eq!(item(&v, "checkpoints")["status"], "warn");
    assert_eq!(item(&v, "fsync")["source"], "default (live)");

    // Only read-only statements reached the server.
    let statements = common::logged_statements(&root, "pageio advise");
    let mut kinds: Vec<&str> = statements
        .iter()
        .map(|s| {
            if s.starts_with("SELECT ") {
                "SELECT"
            } else {
                s.as_str()
            }
        })
        .collect();
    kinds.sort();
    kinds.dedup();
    eprintln!(
        "pageio advise sent: {kinds:?} ({} statements)",
        statements.len()
    );
    assert_eq!(kinds, ["COMMIT", "SELECT", "START TRANSACTION READ ONLY"]);
    assert!(statements
        .iter()
        .any(|s| s.contains("pg_stat_checkpointer")));

    // The snippet, live lines included, loads: postgres -C gives back every value.
    let snippet = v["postgresql_conf"].as_str().unwrap();
    assert!(snippet.contains("\nwal_compression = "), "{snippet}");
    std::fs::write(data.join("pageio.conf"), snippet).unwrap();
    text.push_str("include 'pageio.conf'\n");
    std::fs::write(&conf, &text).unwrap();
    chown_to_pg_user(&data);
    let mut checked = 0;
    for line in snippet
        .lines()
        .filter(|l| !l.starts_with('#') && l.contains('='))
    {
        let setting = line.split('#').next().unwrap();
        let (name, value) = setting.split_once('=').unwrap();
        let (name, value) = (name.trim(), value.trim().trim_matches('\''));
        let out = pg(bin, "postgres", &["-D", &data_arg, "-C", name]);
        assert!(
            out.status.success(),
            "postgres -C {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // postgres -C prints the value in the setting's base unit, without it.
        let mut shown = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let unit = v["live"]["settings"]["read"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .and_then(|s| s["unit"].as_str());
        if let Some(unit) = unit {
            let blocks = unit.starts_with('8');
            if let Some(bytes) = parse_size(&format!("{shown}{}", unit.trim_start_matches('8')), 1)
            {
                shown = format!("{}B", if blocks { bytes * 8 } else { bytes });
            }
        }
        assert!(
            common::same_setting_value(value, &shown),
            "{name}: snippet {value}, postgres -C {shown}"
        );
        checked += 1;
    }
    assert!(checked >= 10, "{snippet}");
    drop(server);
}

#[test]
fn advise_dsn_reports_what_only_a_running_server_knows() {
    let Some(bin) = pg_bin() else { return };
    with_watchdog(
        "advise_dsn_reports_what_only_a_running_server_knows",
        300,
        move || run(&bin),
    );
}
