//! The live checks at the edges of their thresholds, from rows as a PostgreSQL 18 server
//! gives them.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::checks::*;
use super::diff::{differences, same_value};
use super::*;
use crate::host::SettingSource;

fn setting(name: &str, value: &str, unit: Option<&str>) -> LiveSetting {
    LiveSetting {
        name: name.into(),
        setting: value.into(),
        unit: unit.map(str::to_string),
        source: "configuration file".into(),
        sourcefile: Some("/srv/pg/postgresql.conf".into()),
        sourceline: Some(12),
        context: "sighup".into(),
        ..Default::default()
    }
}

fn facts(settings: Vec<LiveSetting>) -> LiveFacts {
    LiveFacts {
        target: "host=/tmp port=5432 dbname=app user=postgres".into(),
        server_version: "18.6".into(),
        server_version_num: 180006,
        database: "app".into(),
        role: "postgres".into(),
        read_all_stats: true,
        read_all_settings: true,
        uptime_seconds: Some(90_000.0),
        settings: Reading::Read(settings),
        ..Default::default()
    }
}

fn find<'a>(items: &'a [Item], name: &str) -> &'a Item {
    items
        .iter()
        .find(|i| i.name == name)
        .unwrap_or_else(|| panic!("no item {name}"))
}

#[test]
fn hit_ratio_is_ok_from_98_percent_and_needs_enough_accesses() {
    let db = |hit: i64, read: i64| DatabaseStats {
        datname: "app".into(),
        blks_hit: hit,
        blks_read: read,
        ..Default::default()
    };
    assert_eq!(hit_ratio(&db(9_800, 200)).status, Status::Ok);
    let low = hit_ratio(&db(9_799, 201));
    assert_eq!(low.status, Status::Warn);
    assert_eq!(low.found, "97.99% (9799 hits, 201 reads)");
    assert_eq!(low.name, "cache hit ratio (app)");
    // 9,999 accesses: too few to say anything.
    let few = hit_ratio(&db(0, 9_999));
    assert_eq!(few.status, Status::Ok);
    assert_eq!(few.found, "9999 block accesses: too few to judge");
}

#[test]
fn checkpoints_warn_above_a_tenth_requested_and_double_max_wal_size() {
    let mut f = facts(vec![setting("max_wal_size", "32", Some("MB"))]);
    let with = |f: &mut LiveFacts, timed, requested| {
        f.checkpointer = Reading::Read(CheckpointerStats {
            num_timed: timed,
            num_requested: requested,
            ..Default::default()
        });
        checkpoints(f)
    };
    assert_eq!(with(&mut f, 9, 1).status, Status::Ok);
    assert_eq!(with(&mut f, 0, 0).status, Status::Ok);
    let warn = with(&mut f, 8, 1);
    assert_eq!(warn.status, Status::Warn);
    assert_eq!(warn.found, "1 requested, 8 timed (max_wal_size 32 MiB)");
    assert_eq!(
        warn.recommended,
        "max_wal_size = '64MB' (twice the live value)"
    );
    assert!(warn
        .fix
        .starts_with("ALTER SYSTEM SET max_wal_size = '64MB'; SELECT pg_reload_conf();"));
    f.checkpointer = Reading::Unavailable("pg_stat_checkpointer exists from PostgreSQL 17".into());
    let missing = checkpoints(&f);
    assert_eq!(missing.status, Status::Warn);
    assert_eq!(
        missing.reason,
        "this check could not run: pg_stat_checkpointer exists from PostgreSQL 17"
    );
}

#[test]
fn temp_files_warn_from_the_first_file() {
    let mut f = facts(vec![setting("work_mem", "64", Some("kB"))]);
    let db = |name: &str, files, bytes| DatabaseStats {
        datname: name.into(),
        temp_files: files,
        temp_bytes: bytes,
        ..Default::default()
    };
    f.databases = Reading::Read(vec![db("app", 0, 0), db("postgres", 0, 0)]);
    let ok = temp_files(&f);
    assert_eq!(
        (ok.status, ok.found.as_str()),
        (Status::Ok, "none (work_mem 64 kiB)")
    );
    f.databases = Reading::Read(vec![db("app", 1, 14 << 20), db("postgres", 0, 0)]);
    let warn = temp_files(&f);
    assert_eq!(warn.status, Status::Warn);
    assert_eq!(
        warn.found,
        "1 files, 14 MiB since the reset (work_mem 64 kiB): app 1 files 14 MiB"
    );
    assert_eq!(
        warn.recommended,
        "work_mem = '128kB' where these queries run"
    );
}

#[test]
fn autovacuum_threshold_follows_reloptions_and_the_18_cap() {
    let mut f = facts(vec![
        setting("autovacuum_vacuum_threshold", "50", None),
        setting("autovacuum_vacuum_scale_factor", "0.2", None),
        setting("autovacuum_vacuum_max_threshold", "100000000", None),
    ]);
    let table = |dead, reltuples: f64| TableVacuum {
        table: "public.orders".into(),
        n_dead_tup: dead,
        reltuples,
        ..Default::default()
    };
    // 50 + 0.2 × 1000 = 250; far past is more than 500.
    assert_eq!(vacuum_threshold(&table(0, 1000.0), &f), 250.0);
    // Never analyzed: reltuples -1 counts as 0.
    assert_eq!(vacuum_threshold(&table(0, -1.0), &f), 50.0);
    let mut own = table(0, 1000.0);
    own.vacuum_threshold = Some(10.0);
    own.vacuum_scale_factor = Some(0.0);
    assert_eq!(vacuum_threshold(&own, &f), 10.0);
    f.tables = Reading::Read(vec![table(500, 1000.0)]);
    assert_eq!(
        live_items(&f, &inputs())
            .iter()
            .find(|i| i.name == "autovacuum backlog")
            .unwrap()
            .status,
        Status::Ok
    );
    let mut off = table(501, 1000.0);
    off.autovacuum_enabled = Some(false);
    f.tables = Reading::Read(vec![off]);
    let items = live_items(&f, &inputs());
    let warn = find(&items, "autovacuum backlog");
    assert_eq!(warn.status, Status::Warn);
    assert_eq!(
        warn.found,
        "1 table(s) past 2× the threshold: public.orders (501 dead, threshold 250, autovacuum_enabled = false)"
    );
    // The PostgreSQL 18 cap: a billion-row table vacuums at 100M dead tuples, not 200M.
    assert_eq!(vacuum_threshold(&table(0, 1e9), &f), 1e8);
}

fn inputs() -> LiveInputs {
    LiveInputs {
        workload: Workload::Mixed,
    }
}

#[test]
fn connection_use_warns_at_70_and_is_bad_at_90_percent() {
    let conn = |n| Connections {
        client_backends: n,
        superuser_backends: 0,
    };
    // 100 − 3 − 0 = 97 slots.
    assert_eq!(
        connection_use(&conn(67), 100.0, 3.0, 0.0).status,
        Status::Ok
    );
    assert_eq!(
        connection_use(&conn(68), 100.0, 3.0, 0.0).status,
        Status::Warn
    );
    assert_eq!(
        connection_use(&conn(87), 100.0, 3.0, 0.0).status,
        Status::Warn
    );
    let bad = connection_use(&conn(88), 100.0, 3.0, 0.0);
    assert_eq!(bad.status, Status::Bad);
    assert_eq!(bad.found, "88 of 97 (91%; max_connections 100 − 3 superuser_reserved_connections − 0 reserved_connections)");
    assert_eq!(superuser_reserved(100.0, 0.0).status, Status::Bad);
    assert_eq!(superuser_reserved(100.0, 20.0).status, Status::Ok);
    assert_eq!(superuser_reserved(100.0, 21.0).status, Status::Warn);
}

#[test]
fn reliability_settings_name_their_risk() {
    let f = facts(vec![
        setting("fsync", "off", None),
        setting("full_page_writes", "on", None),
        setting("synchronous_commit", "off", None),
        setting("wal_level", "replica", None),
        setting("jit", "on", None),
        setting("wal_compression", "off", None),
        setting("autovacuum", "off", None),
    ]);
    let items = live_items(
        &f,
        &LiveInputs {
            workload: Workload::Oltp,
        },
    );
    let fsync = find(&items, "fsync");
    assert_eq!(fsync.status, Status::Bad);
    assert!(fsync
        .reason
        .starts_with("with fsync off an operating-system crash"));
    assert_eq!(fsync.source, "/srv/pg/postgresql.conf:12 (live)");
    assert_eq!(fsync.conf, Some(("fsync".into(), "on".into())));
    assert_eq!(find(&items, "full_page_writes").status, Status::Ok);
    assert_eq!(find(&items, "synchronous_commit").status, Status::Warn);
    assert_eq!(find(&items, "wal_level").status, Status::Ok);
    assert_eq!(find(&items, "jit").status, Status::Warn);
    assert_eq!(find(&items, "wal_compression").recommended, "pglz");
    assert_eq!(find(&items, "autovacuum").status, Status::Bad);
    // jit is fine for a warehouse.
    let dw = live_items(
        &f,
        &LiveInputs {
            workload: Workload::Dw,
        },
    );
    assert_eq!(find(&dw, "jit").status, Status::Ok);
}

fn index(name: &str, key: &str, scans: i64) -> IndexFacts {
    IndexFacts {
        table: "public.orders".into(),
        index: format!("public.{name}"),
        idx_scan: scans,
        size_bytes: 2 << 20,
        valid: true,
        key: key.into(),
        ..Default::default()
    }
}

#[test]
fn unused_and_duplicate_indexes_spare_constraints() {
    let mut pk = index("orders_pkey", "btree (id)", 0);
    pk.primary = true;
    pk.unique = true;
    pk.constraint = true;
    let all = vec![
        pk,
        index("orders_id_idx", "btree (id)", 5),
        index("orders_note_idx", "btree (note)", 0),
        index("orders_day_idx", "btree (day) WHERE (day > 0)", 1),
        index("orders_day_all_idx", "btree (day)", 1),
    ];
    let unused = unused_indexes(&all, "app", " over 2 d 0 h");
    assert_eq!(unused.status, Status::Warn);
    assert_eq!(
        unused.found,
        "1 never scanned over 2 d 0 h, 2.0 MiB: public.orders_note_idx on public.orders (2.0 MiB)"
    );
    let dups = duplicate_indexes(&all, "app");
    assert_eq!(dups.status, Status::Warn);
    assert_eq!(
        dups.found,
        "1 set(s): public.orders_id_idx = public.orders_pkey on public.orders"
    );
    assert!(dups
        .fix
        .starts_with("DROP INDEX CONCURRENTLY public.orders_id_idx;"));
    assert_eq!(invalid_indexes(&all, "app").status, Status::Ok);
    let clean = vec![index("a", "btree (a)", 1), index("b", "btree (b)", 1)];
    assert_eq!(unused_indexes(&clean, "app", "").status, Status::Ok);
    assert_eq!(duplicate_indexes(&clean, "app").status, Status::Ok);
}

#[test]
fn statistics_younger_than_a_day_are_a_warning() {
    let mut f = facts(vec![]);
    f.databases = Reading::Read(vec![DatabaseStats {
        datname: "app".into(),
        stats_age_seconds: Some(86_399.0),
        ..Default::default()
    }]);
    let young = stats_age(&f);
    assert_eq!(young.status, Status::Warn);
    assert_eq!(young.found, "23 h 59 min (server up 1 d 1 h)");
    f.databases = Reading::Read(vec![DatabaseStats {
        datname: "app".into(),
        stats_age_seconds: Some(86_400.0),
        ..Default::default()
    }]);
    assert_eq!(stats_age(&f).status, Status::Ok);
}

#[test]
fn a_check_that_cannot_run_says_so() {
    let mut f = facts(vec![]);
    f.read_all_stats = false;
    f.indexes = Reading::Unavailable("query failed: permission denied".into());
    let items = live_items(&f, &inputs());
    let privilege = find(&items, "privilege");
    assert_eq!(
        privilege.found,
        "role \"postgres\" lacks pg_read_all_stats (other sessions' activity and wait events)"
    );
    for name in [
        "unused indexes",
        "duplicate indexes",
        "invalid indexes",
        "pg_stat_io",
        "checkpoints",
    ] {
        let it = find(&items, name);
        assert_eq!(it.found, "not checked", "{name}");
        assert!(
            it.reason.starts_with("this check could not run: "),
            "{name}"
        );
    }
}

#[test]
fn file_values_compare_as_postgresql_holds_them() {
    let shared = setting("shared_buffers", "2048", Some("8kB"));
    assert!(same_value("'16MB'", &shared));
    assert!(same_value("16384kB", &shared));
    assert!(!same_value("32MB", &shared));
    assert!(same_value("100kB", &setting("x", "13", Some("8kB"))));
    let timeout = setting("checkpoint_timeout", "30", Some("s"));
    assert!(same_value("30s", &timeout));
    assert!(same_value("30000ms", &timeout));
    assert!(!same_value("5min", &timeout));
    assert!(same_value("yes", &setting("fsync", "on", None)));
    assert!(same_value(
        "0.90",
        &setting("checkpoint_completion_target", "0.9", None)
    ));
    assert!(same_value(
        "'Worker'",
        &setting("io_method", "worker", None)
    ));
    assert!(same_value("-1", &setting("wal_buffers", "-1", Some("8kB"))));
}

#[test]
fn a_setting_edited_and_not_reloaded_is_a_difference() {
    let mut work_mem = setting("work_mem", "64", Some("kB"));
    work_mem.source = "configuration file".into();
    let mut shared = setting("shared_buffers", "2048", Some("8kB"));
    shared.context = "postmaster".into();
    let mut port = setting("port", "5433", None);
    port.source = "command line".into();
    let f = facts(vec![work_mem, shared, port]);
    let file: BTreeMap<String, SettingSource> = [
        ("work_mem", "'2MB'", 7),
        ("shared_buffers", "16MB", 8),
        ("port", "5432", 9),
    ]
    .into_iter()
    .map(|(n, v, line)| {
        (
            n.to_string(),
            SettingSource {
                value: v.into(),
                file: PathBuf::from("/srv/pg/postgresql.conf"),
                line,
            },
        )
    })
    .collect();
    let diffs = differences(&file, &f);
    assert_eq!(diffs.len(), 1, "{diffs:?}");
    assert_eq!(diffs[0].name, "work_mem");
    let it = file_differences(&file, &f);
    assert_eq!(it.status, Status::Warn);
    assert_eq!(
        it.found,
        "work_mem: file '2MB' at /srv/pg/postgresql.conf:7 vs live 64 × kB (not reloaded)"
    );
    assert_eq!(it.fix, "SELECT pg_reload_conf(); (or pg_ctl reload)");
}

#[test]
fn live_settings_stand_for_the_files_as_a_file_would_write_them() {
    let mut shared = setting("shared_buffers", "2048", Some("8kB"));
    shared.context = "postmaster".into();
    let mut port = setting("port", "5433", None);
    port.source = "command line".into();
    port.sourcefile = None;
    port.sourceline = None;
    let mut default = setting("work_mem", "4096", Some("kB"));
    default.source = "default".into();
    let f = facts(vec![
        shared,
        setting("checkpoint_timeout", "30", Some("s")),
        port,
        default,
    ]);
    let instance = instance_from_live(&f);
    assert_eq!(instance.pg_version, Some(18));
    let shared = instance.setting("shared_buffers").unwrap();
    assert_eq!(shared.value, "16MB");
    assert_eq!(shared.location(), "/srv/pg/postgresql.conf:12");
    assert_eq!(instance.setting("checkpoint_timeout").unwrap().value, "30s");
    let port = instance.setting("port").unwrap();
    assert_eq!(
        (port.value.as_str(), port.location().as_str()),
        ("5433", "pg_settings (command line)")
    );
    // A default nobody set is not a file's setting.
    assert!(instance.setting("work_mem").is_none());
}

/// A live setting whose file this role may not see is named by its source alone, never
/// with a made-up line 0.
#[test]
fn a_source_without_a_line_is_printed_without_one() {
    let hidden = SettingSource {
        value: "4MB".into(),
        file: PathBuf::from("pg_settings (configuration file)"),
        line: 0,
    };
    assert_eq!(hidden.location(), "pg_settings (configuration file)");
    let seen = SettingSource {
        value: "4MB".into(),
        file: PathBuf::from("/srv/pg/postgresql.conf"),
        line: 12,
    };
    assert_eq!(seen.location(), "/srv/pg/postgresql.conf:12");
}
