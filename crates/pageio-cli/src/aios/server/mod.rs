//! `pageio aios --dsn …`: the live AIO view of a running PostgreSQL 18 server.
//!
//! PostgreSQL 18 shows every I/O in flight in the `pg_aios` view and counts every backend
//! type's I/O in `pg_stat_io`; a DBA watches them by re-running queries by hand. This module
//! samples both (and `pg_stat_activity`, which names the processes) over a real client
//! connection and shows them the way `pageio aios` shows pageio's own processes: one
//! snapshot of the I/Os in flight, or a live view of rates and in-flight I/O.
//!
//! ```text
//!   main thread                         connection thread (owns the postgres::Client)
//!   ───────────                         ─────────────────────────────────────────────
//!   parse --dsn, fill libpq defaults
//!   spawn ─────────────────────────────► connect (TCP and startup exchange)
//!   wait ≤ connect_timeout + 1 s ◄───── Connected             or a typed error
//!                                         check the version and the privilege
//!   wait ≤ check bound    ◄──────────── Ready(server facts)   or a typed error
//!   every interval: ask ───────────────► START TRANSACTION READ ONLY
//!                                         SELECT … pg_aios, pg_stat_activity, pg_stat_io
//!                                         SELECT … pg_filenode_relation (new files only)
//!   wait ≤ answer bound   ◄──────────── COMMIT; the rows
//!   deltas of pg_stat_io → rates; group pg_aios by backend and relation; print / draw
//! ```
//!
//! ## Never a hang, never a write
//!
//! A monitoring tool must not become the problem on a server that already has one. Every
//! statement it sends is a `SELECT`; each sample runs inside `START TRANSACTION READ ONLY …
//! COMMIT`, and the session starts with `default_transaction_read_only=on` (so the two
//! checks at connect run read-only too), `statement_timeout` and `lock_timeout` set low —
//! all in the startup packet, so not even a `SET` is sent. A catalog lock held by a long
//! DDL makes a sample fail fast instead of queueing behind it. The client library's
//! `connect_timeout` bounds only the TCP connect, not a server that accepts and then says
//! nothing, and no server-side timeout helps when the network drops packets; so the client
//! lives on its own thread and the main thread waits for each answer with a bound
//! ([`answer_bound`]). When the bound passes the command fails with an error naming the
//! server; the stuck thread dies with the process.
//!
//! ## Naming relations
//!
//! `pg_aios.target_desc` names the file, e.g. `blocks 0..15 in file "base/5/16384"`. The
//! path gives the tablespace (`base` = the database's default, `global` = pg_global,
//! `pg_tblspc/OID/…`), the database OID and the relfilenode; `pg_filenode_relation()` turns
//! that into the relation, but only for files of the connected database (a catalog can
//! only be read in its own database). So files of the connected database (and shared ones
//! in `global/`) are shown as `schema.name`; a file of another database is shown by its
//! path and relfilenode with the database's name, saying it was not resolved. Lookups are
//! cached per file ([`RELATION_CACHE_ENTRIES`]), so a steady scan costs one lookup.
//!
//! ## Output
//!
//! One sample, no `--count`/`--watch`: the in-flight I/Os as a table in pg_aios's columns
//! (or one JSON document). Repeated: `--json` prints one document per sample (JSON lines);
//! `--watch` on a terminal hands each sample to [`term::watch`] as a [`ServerView`] (full
//! screen); otherwise one plain line per sample. The JSON carries the raw rows of the
//! three views (`row_to_json`, so every column as PostgreSQL spells it) next to what was
//! derived from them.
//!
//! ## Layout
//!
//! ```text
//!  mod.rs         run: flags, one snapshot or the sampling loop
//!  facts.rs       the checks at connect (version, privilege), the bounds on every wait
//!  (crate::live)  --dsn and libpq's defaults, the session's settings, the connect bound
//!  sample.rs      the connection thread, one sample's rows, files named as relations
//!  model.rs       pg_stat_io rates, in-flight I/O by backend and relation: the Report
//!  view.rs        the snapshot table, the plain line, the full screen
//! ```
//!
//! ## Rates
//!
//! `pg_stat_io` is cumulative; a rate is the difference of two samples over the time
//! between them (measured on this side with a monotonic clock). Backends flush their
//! counters to the shared statistics at the end of a transaction and at most about once a
//! second, so a rate over a short interval is lumpy: it shows what was flushed, not exactly
//! what happened in that interval. A counter that went down (`pg_stat_reset_shared('io')`)
//! gives no rate for that interval rather than a negative one.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use super::term::{self, View};
use super::AiosArgs;

mod facts;
mod model;
mod sample;
mod view;

use crate::live::*;
use facts::*;
use model::*;
use sample::*;
use view::*;

/// `statement_timeout` of the session, in milliseconds: every query reads small in-memory
/// views (pg_aios, pg_stat_io, pg_stat_activity) or one catalog index; taking longer means
/// the server is in trouble, and the monitor should say so rather than add to it.
const STATEMENT_TIMEOUT_MS: u64 = 2_000;

/// What the monitor's session sets: its name in `pg_stat_activity`, and
/// [`STATEMENT_TIMEOUT_MS`].
pub(crate) const SESSION: SessionLimits = SessionLimits {
    application_name: "pageio aios",
    statement_timeout_ms: STATEMENT_TIMEOUT_MS,
};

/// Statements in one sample (transaction start, three views, relation lookup, commit):
/// with [`STATEMENT_TIMEOUT_MS`] each, the most a healthy but slow server can take.
const STATEMENTS_PER_SAMPLE: u32 = 6;

/// Most files whose relation is remembered: far more than a server has I/O in flight at
/// once; when full the cache starts over (a file seen again is looked up again).
const RELATION_CACHE_ENTRIES: usize = 4096;

/// Longest `--interval` accepted: a day. Longer is surely a typo (milliseconds meant?).
const MAX_INTERVAL_SECS: f64 = 86_400.0;

/// `pg_stat_activity.wait_event` of an idle I/O worker: an `io worker` waiting for
/// anything else is busy with an I/O.
const IO_WORKER_IDLE_WAIT_EVENT: &str = "IoWorkerMain";

/// The first PostgreSQL version with `pg_aios` (`server_version_num`).
const PG_AIOS_SINCE_VERSION_NUM: i32 = 180_000;

/// Runs `pageio aios --dsn …`: one snapshot, or samples every `--interval` (`--count`,
/// `--watch`). Exit status 0; every failure is an error (status 2).
pub fn run(args: &AiosArgs) -> Result<i32, Box<dyn std::error::Error>> {
    let dsn = args.dsn.as_deref().unwrap_or_default();
    if !args.interval.is_finite()
        || args.interval < term::MIN_INTERVAL.as_secs_f64()
        || args.interval > MAX_INTERVAL_SECS
    {
        return Err(ServerError::Usage(format!(
            "--interval {} is out of range: give seconds from {} to {MAX_INTERVAL_SECS}, e.g. --interval 1",
            args.interval,
            term::MIN_INTERVAL.as_secs_f64()
        ))
        .into());
    }
    let interval = Duration::from_secs_f64(args.interval);
    let config = parse_dsn(dsn, &|name| std::env::var(name).ok(), SESSION)?;
    if args.count == Some(0) {
        // Zero samples asked for, zero shown (as `--watch --count 0` does for pageio
        // processes); the DSN is checked, but no connection is needed.
        return Ok(0);
    }
    let mut sampler = Sampler::connect(config, args.pid)?;

    let repeated = args.watch || args.count.is_some();
    if !repeated {
        let view = sampler.sample()?;
        let mut out = std::io::stdout().lock();
        if args.json {
            writeln!(out, "{}", serde_json::to_string(&view.report)?)?;
        } else {
            for line in view.snapshot_lines() {
                writeln!(out, "{line}")?;
            }
        }
        return Ok(0);
    }
    if args.watch && !args.json && std::io::stdout().is_terminal() {
        term::watch(interval, args.count, || sampler.sample())?;
        return Ok(0);
    }
    lines_loop(interval, args.count, &mut sampler, args.json)?;
    Ok(0)
}

/// Samples every `interval` (fixed schedule: a slow sample does not shift the next ones)
/// and prints one line per sample — JSON with `json`, else the plain line — until `count`
/// samples, or forever; a closed pipe (`| head`) ends it quietly.
fn lines_loop(
    interval: Duration,
    count: Option<u64>,
    sampler: &mut Sampler,
    json: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    let start = Instant::now();
    let mut shown: u64 = 0;
    loop {
        let view = sampler.sample()?;
        let mut text = if json {
            serde_json::to_string(&view.report)?
        } else {
            view.plain_lines().join("\n")
        };
        text.push('\n');
        let mut out = std::io::stdout().lock();
        if out
            .write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .is_err()
        {
            return Ok(());
        }
        shown += 1;
        if count.is_some_and(|n| shown >= n) {
            return Ok(());
        }
        // The next slot of the schedule after now (an overrun skips slots, never bunches).
        let mut next = start + interval.mul_f64(shown as f64);
        let now = Instant::now();
        while next < now {
            next += interval;
        }
        std::thread::sleep(next - now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pageio::catalog::GLOBAL_TABLESPACE_OID as GLOBALTABLESPACE_OID;
    use serde_json::{Map, Value};
    use std::collections::BTreeMap;

    #[test]
    fn target_desc_file_is_found() {
        assert_eq!(
            file_of_target_desc("blocks 0..15 in file \"base/5/16384\""),
            Some("base/5/16384")
        );
        assert_eq!(
            file_of_target_desc("block 6 in file \"global/1262\""),
            Some("global/1262")
        );
        assert_eq!(file_of_target_desc("something else"), None);
    }

    #[test]
    fn relation_paths_parse_like_relpath() {
        let r = parse_relation_path("base/5/16384").unwrap();
        assert_eq!(
            (
                r.tablespace_oid,
                r.database_oid,
                r.relfilenode,
                r.fork,
                r.temporary
            ),
            (0, 5, 16384, "main", false)
        );
        let r = parse_relation_path("global/1262_vm").unwrap();
        assert_eq!(
            (r.tablespace_oid, r.database_oid, r.relfilenode, r.fork),
            (GLOBALTABLESPACE_OID, 0, 1262, "vm")
        );
        let r = parse_relation_path("pg_tblspc/16390/PG_18_202506291/5/16391_fsm").unwrap();
        assert_eq!(
            (r.tablespace_oid, r.database_oid, r.relfilenode, r.fork),
            (16390, 5, 16391, "fsm")
        );
        let r = parse_relation_path("base/5/t3_16400").unwrap();
        assert_eq!((r.relfilenode, r.temporary), (16400, true));
        assert!(parse_relation_path("base/5/16384_bogus").is_none());
        assert!(parse_relation_path("pg_wal/000000010000000000000001").is_none());
        assert!(parse_relation_path("base/x/1").is_none());
    }

    #[test]
    fn dsn_gets_read_only_session_and_defaults() {
        let env = |name: &str| match name {
            "PGUSER" => Some("alice".to_string()),
            "PGPORT" => Some("5433".to_string()),
            _ => None,
        };
        let config = parse_dsn("host=/tmp dbname=app", &env, SESSION).unwrap();
        assert_eq!(config.get_user(), Some("alice"));
        assert_eq!(config.get_ports(), &[5433]);
        assert_eq!(config.get_connect_timeout(), Some(&DEFAULT_CONNECT_TIMEOUT));
        let options = config.get_options().unwrap();
        assert!(
            options.contains("default_transaction_read_only=on"),
            "{options}"
        );
        assert!(options.contains("statement_timeout=2000"), "{options}");
        assert!(options.contains("lock_timeout=500"), "{options}");
        // Options given in the DSN are kept.
        let config =
            parse_dsn("host=/tmp user=u options='-c work_mem=1MB'", &env, SESSION).unwrap();
        assert!(config
            .get_options()
            .unwrap()
            .starts_with("-c work_mem=1MB -c default_transaction_read_only=on"));
        // connect_timeout in the DSN wins over the default.
        let config = parse_dsn("host=/tmp user=u connect_timeout=2", &env, SESSION).unwrap();
        assert_eq!(config.get_connect_timeout(), Some(&Duration::from_secs(2)));
        // The target shown in messages never holds the password.
        let config = parse_dsn(
            "host=db.example port=6000 user=u password=secret dbname=x",
            &env,
            SESSION,
        )
        .unwrap();
        let target = describe_target(&config);
        assert_eq!(target, "host=db.example port=6000 dbname=x user=u");
        let e = parse_dsn("host=/tmp bogus_key=1", &env, SESSION).unwrap_err();
        assert!(e.to_string().starts_with("invalid --dsn: "), "{e}");
    }

    /// The password file is read as libpq reads it, and a missing password says how to
    /// give one, with why the file gave none.
    #[test]
    fn a_password_comes_from_the_password_file_as_libpq_finds_it() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pgpass");
        std::fs::write(
            &file,
            "# comment\ndb.example:6000:app:alice:pa\\:ss\n*:*:*:bob:wild\nlocalhost:5432:bob:carol:sock\n",
        )
        .unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let passfile = file.display().to_string();
        let env = |name: &str| match name {
            "PGPASSFILE" => Some(passfile.clone()),
            _ => None,
        };
        let password = |dsn: &str| {
            let config = parse_dsn(dsn, &env, SESSION).unwrap();
            config
                .get_password()
                .map(|p| String::from_utf8_lossy(p).into_owned())
        };
        assert_eq!(
            password("host=db.example port=6000 dbname=app user=alice").as_deref(),
            Some("pa:ss")
        );
        assert_eq!(password("host=other user=bob").as_deref(), Some("wild"));
        // The default socket directory is matched as localhost; the database defaults to
        // the user.
        assert_eq!(
            password("host=/tmp port=5432 user=carol dbname=bob").as_deref(),
            Some("sock")
        );
        // A password in the DSN wins.
        assert_eq!(
            password("host=other user=bob password=given").as_deref(),
            Some("given")
        );
        let config = parse_dsn(
            "host=db.example port=6000 dbname=app user=dave",
            &env,
            SESSION,
        )
        .unwrap();
        assert_eq!(config.get_password(), None);
        assert_eq!(
            password_from_file(&config, &env).unwrap_err(),
            format!("{passfile} has no line for db.example:6000:app:dave")
        );
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(password("host=other user=bob"), None);
        assert_eq!(
            password_from_file(&config, &env).unwrap_err(),
            format!("{passfile} may be read by others (mode 644), so it is ignored, as libpq ignores it: chmod 600 it")
        );
        let e = ServerError::PasswordMissing {
            target: describe_target(&config),
            passfile: passfile.clone(),
            note: " (why)".into(),
        };
        assert_eq!(
            e.to_string(),
            format!("cannot connect to PostgreSQL at host=db.example port=6000 dbname=app user=dave: the server asks for a password and none was given (why); set PGPASSWORD, add a line host:port:database:user:password for it to the password file ({passfile}, mode 0600; PGPASSFILE names another), or put password=… in --dsn")
        );
    }

    #[test]
    fn rates_are_deltas_per_second_and_skip_a_reset() {
        let mut before = BTreeMap::new();
        let mut after = BTreeMap::new();
        before.insert(
            "client backend".to_string(),
            Counters {
                reads: 100.0,
                read_bytes: 800_000.0,
                hits: 10.0,
                ..Counters::default()
            },
        );
        after.insert(
            "client backend".to_string(),
            Counters {
                reads: 300.0,
                read_bytes: 2_800_000.0,
                hits: 30.0,
                ..Counters::default()
            },
        );
        before.insert(
            "checkpointer".to_string(),
            Counters {
                writes: 50.0,
                ..Counters::default()
            },
        );
        after.insert("checkpointer".to_string(), Counters::default());
        let rates = rates_between(&before, &after, 2.0);
        assert_eq!(rates.len(), 2, "{rates:?}");
        let client = &rates[0];
        assert_eq!(client.backend_type, "client backend");
        assert_eq!(client.reads_per_s, 100.0);
        assert_eq!(client.read_mb_per_s, 1.0);
        assert_eq!(client.hits_per_s, 10.0);
        assert_eq!(rates[1].backend_type, "total");
        assert_eq!(rates[1].reads_per_s, 100.0);
    }

    fn sample_view() -> ServerView {
        sample_view_of(None)
    }

    fn sample_view_of(pid_filter: Option<i32>) -> ServerView {
        let facts = ServerFacts {
            target: "host=/tmp port=5432 dbname=postgres user=postgres".into(),
            version: "18.6".into(),
            version_num: 180006,
            database: "postgres".into(),
            database_oid: 5,
            role: "postgres".into(),
            io_method: "worker".into(),
            io_workers_setting: "3".into(),
            track_io_timing: false,
        };
        let aios: Vec<Map<String, Value>> = vec![serde_json::json!({
            "pid": 4242, "io_id": 1, "io_generation": 7, "state": "SUBMITTED",
            "operation": "readv", "off": 8192, "length": 24576, "target": "smgr",
            "handle_data_len": 3, "raw_result": null, "result": "UNKNOWN",
            "target_desc": "blocks 1..3 in file \"base/5/16384\"",
            "f_sync": false, "f_localmem": false, "f_buffered": true
        })
        .as_object()
        .unwrap()
        .clone()];
        let activity: Vec<Map<String, Value>> = [
            serde_json::json!({"pid": 4242, "backend_type": "client backend", "datname": "postgres",
                "state": "active", "wait_event_type": "IO", "wait_event": "AioIoCompletion",
                "query": "\n  SELECT count(*) FROM big\n  WHERE a > 0"}),
            serde_json::json!({"pid": 10, "backend_type": "io worker", "wait_event": "IoWorkerMain"}),
            serde_json::json!({"pid": 11, "backend_type": "io worker", "wait_event": null}),
        ]
        .iter()
        .map(|v| v.as_object().unwrap().clone())
        .collect();
        let mut relation = parse_relation_path("base/5/16384").unwrap();
        relation.schema = Some("public".into());
        relation.name = Some("big".into());
        relation.oid = Some(16384);
        let rows = Rows {
            aios,
            stat_io: vec![],
            activity,
            relations: [("base/5/16384".to_string(), relation)].into(),
            sampled_at: "2026-11-23 15:52:01.123+00".into(),
            transaction_read_only: true,
            taken: Instant::now(),
        };
        let rates = Some(vec![Rates {
            backend_type: "total".into(),
            reads_per_s: 1234.0,
            read_mb_per_s: 9.6,
            read_time_ms_per_s: 0.0,
            hits_per_s: 20.0,
            writes_per_s: 0.0,
            write_mb_per_s: 0.0,
            extends_per_s: 0.0,
            evictions_per_s: 0.0,
        }]);
        ServerView {
            report: build_report(&facts, rows, BTreeMap::new(), rates, Some(1.0), pid_filter),
        }
    }

    #[test]
    fn views_name_backends_relations_and_busy_workers() {
        let view = sample_view();
        assert_eq!(view.report.io_workers.count, 2);
        assert_eq!(view.report.io_workers.busy_pids, vec![11]);
        let line = &view.plain_lines()[0];
        assert_eq!(
            line,
            "pid=server io_method=worker ios_per_s=1234 mb_per_s=9.6 depth=1 avg_io_kb=24.0 read_ms_per_s=-(track_io_timing=off) workers=2 busy=1 reads_per_s=1234 hits_per_s=20 writes_per_s=0 time=15:52:01 backends=[4242 client backend 1] relations=[public.big 1]"
        );
        let backend = &view.report.in_flight_by_backend[0];
        assert_eq!(backend.database.as_deref(), Some("postgres"));
        assert_eq!(backend.state.as_deref(), Some("active"));
        assert_eq!(backend.wait.as_deref(), Some("IO:AioIoCompletion"));
        assert_eq!(backend.query.as_deref(), Some("SELECT count(*) FROM big"));
        let snapshot = view.snapshot_lines();
        assert_eq!(snapshot[2], "1 I/O(s) in flight:");
        assert_eq!(
            snapshot[3],
            " pid  backend_type    state      operation   off  length  relation    target_desc"
        );
        assert_eq!(
            snapshot[4],
            "4242  client backend  SUBMITTED  readv      8192   24576  public.big  blocks 1..3 in file \"base/5/16384\""
        );
        assert_eq!(snapshot[5], "by backend:");
        assert_eq!(
            snapshot[6],
            "4242 client backend  database postgres  active  wait IO:AioIoCompletion  SELECT count(*) FROM big"
        );
    }

    /// The relation column takes the longest name when the screen has room, and gives way
    /// to target_desc's least width when it has not.
    #[test]
    fn the_relation_column_is_sized_from_the_screen() {
        let mut row: [String; 8] = Default::default();
        row[6] = "analytics.customer_order_line_items_2026".into();
        let cells = vec![row];
        assert_eq!(relation_column_width(&cells, 150), 40);
        assert_eq!(relation_column_width(&cells, 110), 110 - 76 - 20);
        assert_eq!(relation_column_width(&[], 150), 8);
        assert_eq!(relation_column_width(&cells, 20), 8);
    }

    #[test]
    fn pid_filter_keeps_only_that_backend() {
        let view = sample_view_of(Some(4242));
        assert_eq!(view.report.in_flight.len(), 1);
        let view = sample_view_of(Some(1));
        assert!(view.report.in_flight.is_empty());
        assert!(view.report.in_flight_by_backend.is_empty());
        assert!(view.report.in_flight_by_relation.is_empty());
        assert_eq!(view.snapshot_lines()[2], "no I/O in flight for pid 1");
        // The I/O workers are counted whatever the filter.
        assert_eq!(view.report.io_workers.count, 2);
    }

    #[test]
    fn full_screen_shows_the_columns() {
        let view = sample_view();
        let mut terminal =
            ratatui::Terminal::new(ratatui::backend::TestBackend::new(160, 40)).unwrap();
        terminal.draw(|frame| view.draw(frame)).unwrap();
        let buffer = terminal.backend().buffer();
        let screen: String = (0..buffer.area.height)
            .map(|y| {
                (0..buffer.area.width)
                    .map(|x| buffer[(x, y)].symbol().to_string())
                    .collect::<String>()
                    + "\n"
            })
            .collect();
        for expected in [
            "read ms/s: — (track_io_timing is off: SET it on to see I/O times)",
            "IO:AioIoCompletion",
            "SELECT count(*) FROM",
            "pg_stat_io, per second",
            "reads/s",
            "read MB/s",
            "hits/s",
            "in flight by backend",
            "in flight by relation",
            "public.big",
            "io workers 2 (1 busy)",
            "SUBMITTED",
            "target_desc",
            "4242",
        ] {
            assert!(
                screen.contains(expected),
                "{expected:?} missing from:\n{screen}"
            );
        }
    }
}
