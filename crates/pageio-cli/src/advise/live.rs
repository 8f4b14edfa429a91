//! `pageio advise --dsn CONNINFO`: the running server's live settings and run-time
//! statistics, read over a bounded read-only connection (`crate::live::Session`) into the
//! library's `pageio::advise::live::LiveFacts`, whose checks make the `live` items.
//!
//! ```text
//!   parse --dsn ─► Session::connect (≤ connect_timeout + 1 s)
//!   session.run(≤ SECTIONS × statement_timeout + slack):
//!     the version, then the head (database, role, privileges, uptime) — a failure ends it
//!     per section: START TRANSACTION READ ONLY; SELECT row_to_json(…); COMMIT
//!       pg_settings, pg_stat_database, pg_stat_checkpointer (17+), pg_stat_bgwriter,
//!       pg_stat_io (16+), pg_stat_user_tables + reloptions, pg_stat_user_indexes + pg_index,
//!       pg_stat_activity, pg_prepared_xacts
//!     a section that fails (a version without the view, a privilege) is Unavailable with
//!     the server's message, and the item that needed it says so
//! ```
//!
//! Every statement is a `SELECT` (or the transaction's start and end); the session starts
//! read-only with `statement_timeout`, `lock_timeout` and
//! `idle_in_transaction_session_timeout` in its startup packet.

use postgres::Client;
use serde::de::DeserializeOwned;

use pageio::advise::live::{
    BgwriterStats, Connections, IndexFacts, LiveFacts, PreparedXacts, Reading, TableVacuum,
};

use crate::live::{error_text, parse_dsn, ServerError, Session, SessionLimits};

/// `statement_timeout` of advise's session: the index and table queries walk every relation
/// of the database (and `pg_relation_size` opens each index), which on a database with
/// tens of thousands of relations takes seconds; more than this is a server in trouble.
const STATEMENT_TIMEOUT_MS: u64 = 10_000;

/// advise's session: its name in `pg_stat_activity`, and [`STATEMENT_TIMEOUT_MS`].
pub(crate) const SESSION: SessionLimits = SessionLimits {
    application_name: "pageio advise",
    statement_timeout_ms: STATEMENT_TIMEOUT_MS,
};

/// Statements of one run: the version and the head, then nine sections of a start, a query
/// and a commit.
const STATEMENTS: u32 = 29;

/// The oldest server whose statistics views advise reads (`pg_stat_database`'s columns,
/// `pg_settings.pending_restart`): PostgreSQL 13.
const OLDEST_VERSION_NUM: u32 = 130_000;

/// `pg_stat_checkpointer` exists from PostgreSQL 17.
const CHECKPOINTER_SINCE: u32 = 170_000;

/// `pg_stat_io` exists from PostgreSQL 16.
const STAT_IO_SINCE: u32 = 160_000;

/// Reads the server `dsn` names: every live fact, in bounded read-only transactions.
pub(crate) fn read(dsn: &str) -> Result<LiveFacts, ServerError> {
    let config = parse_dsn(dsn, &|name| std::env::var(name).ok(), SESSION)?;
    let mut session = Session::connect(config)?;
    let target = session.target().to_string();
    let bound = SESSION.bound_for(STATEMENTS);
    let facts = session.run("reading the live settings and statistics", bound, {
        let target = target.clone();
        move |client| read_all(client, target)
    })?;
    if facts.server_version_num < OLDEST_VERSION_NUM {
        return Err(ServerError::Version {
            target,
            version: facts.server_version.clone(),
            version_num: facts.server_version_num as i32,
            needs: "advise reads the statistics views as PostgreSQL 13 and later have them (PostgreSQL 17 and 18 for the checkpointer and pg_stat_io)",
        });
    }
    Ok(facts)
}

/// The head, then every section.
fn read_all(client: &mut Client, target: String) -> Result<LiveFacts, postgres::Error> {
    // The version first, alone: a server too old for the rest still answers this, and gets
    // an error naming its version rather than a failed query.
    let version = client.query_one(
        "SELECT current_setting('server_version_num')::int4, current_setting('server_version')",
        &[],
    )?;
    let version_num = version.get::<_, i32>(0).max(0) as u32;
    let mut facts = LiveFacts {
        target,
        server_version_num: version_num,
        server_version: version.get(1),
        ..Default::default()
    };
    if version_num < OLDEST_VERSION_NUM {
        return Ok(facts);
    }
    let head = client.query_one(
        "SELECT current_database()::text, current_user::text, \
                pg_catalog.pg_has_role(current_user, 'pg_read_all_stats', 'MEMBER'), \
                pg_catalog.pg_has_role(current_user, 'pg_read_all_settings', 'MEMBER'), \
                extract(epoch FROM now() - pg_catalog.pg_postmaster_start_time())::float8",
        &[],
    )?;
    facts.database = head.get(0);
    facts.role = head.get(1);
    facts.read_all_stats = head.get(2);
    facts.read_all_settings = head.get(3);
    facts.uptime_seconds = head.get(4);
    facts.settings = rows(client, SETTINGS_SQL);
    facts.databases = rows(client, DATABASES_SQL);
    facts.checkpointer = if version_num >= CHECKPOINTER_SINCE {
        one(client, CHECKPOINTER_SQL)
    } else {
        Reading::Unavailable(format!(
            "pg_stat_checkpointer exists from PostgreSQL 17; this server is {}",
            facts.server_version
        ))
    };
    facts.bgwriter = one::<BgwriterStats>(client, BGWRITER_SQL);
    facts.stat_io = if version_num >= STAT_IO_SINCE {
        rows(client, STAT_IO_SQL)
    } else {
        Reading::Unavailable(format!(
            "pg_stat_io exists from PostgreSQL 16; this server is {}",
            facts.server_version
        ))
    };
    facts.tables = rows::<TableVacuum>(client, TABLES_SQL);
    facts.indexes = rows::<IndexFacts>(client, INDEXES_SQL);
    facts.connections = one::<Connections>(client, CONNECTIONS_SQL);
    facts.prepared_xacts = one::<PreparedXacts>(client, PREPARED_SQL);
    Ok(facts)
}

/// Every row of `sql` (one `row_to_json(…)::text` column), in a read-only transaction of
/// its own: a section that fails does not abort the others.
fn rows<T: DeserializeOwned>(client: &mut Client, sql: &str) -> Reading<Vec<T>> {
    let result = (|| -> Result<Vec<T>, String> {
        let mut transaction = client
            .build_transaction()
            .read_only(true)
            .start()
            .map_err(|e| error_text(&e))?;
        let found = transaction.query(sql, &[]).map_err(|e| error_text(&e))?;
        let parsed = found
            .iter()
            .map(|row| {
                let text: String = row.get(0);
                serde_json::from_str::<T>(&text)
                    .map_err(|e| format!("a row pageio could not read ({e}): {text}"))
            })
            .collect::<Result<Vec<T>, String>>()?;
        transaction.commit().map_err(|e| error_text(&e))?;
        Ok(parsed)
    })();
    match result {
        Ok(rows) => Reading::Read(rows),
        Err(why) => Reading::Unavailable(format!("the query failed: {why}")),
    }
}

/// The one row of `sql`.
fn one<T: DeserializeOwned>(client: &mut Client, sql: &str) -> Reading<T> {
    match rows::<T>(client, sql) {
        Reading::Read(mut all) if all.len() == 1 => Reading::Read(all.remove(0)),
        Reading::Read(all) => Reading::Unavailable(format!(
            "the query returned {} rows instead of one",
            all.len()
        )),
        Reading::Unavailable(why) => Reading::Unavailable(why),
    }
}

/// `pg_settings`, every row. No `ORDER BY` here or in any section (the checks order what they list):
/// a sort larger than a small `work_mem` would spill to a temporary file and show up in the
/// very `temp files` figure advise reports.
const SETTINGS_SQL: &str = "SELECT row_to_json(s)::text FROM (\
     SELECT name, setting, unit, source, sourcefile, sourceline, pending_restart, boot_val, \
            enumvals, context FROM pg_catalog.pg_settings) s";

/// `pg_stat_database`, the databases (not the shared-objects row).
const DATABASES_SQL: &str = "SELECT row_to_json(d)::text FROM (\
     SELECT datname::text, numbackends::int8, blks_read, blks_hit, temp_files, temp_bytes, \
            stats_reset::text, extract(epoch FROM now() - stats_reset)::float8 AS stats_age_seconds \
     FROM pg_catalog.pg_stat_database WHERE datname IS NOT NULL) d";

/// `pg_stat_checkpointer` (17+).
const CHECKPOINTER_SQL: &str = "SELECT row_to_json(c)::text FROM (\
     SELECT num_timed, num_requested, buffers_written, stats_reset::text, \
            extract(epoch FROM now() - stats_reset)::float8 AS stats_age_seconds \
     FROM pg_catalog.pg_stat_checkpointer) c";

/// `pg_stat_bgwriter`.
const BGWRITER_SQL: &str = "SELECT row_to_json(b)::text FROM (\
     SELECT buffers_clean, maxwritten_clean, buffers_alloc FROM pg_catalog.pg_stat_bgwriter) b";

/// `pg_stat_io` summed per backend type (16+); `normal_writes` are shared buffers written in
/// the normal context (not a ring buffer's).
const STAT_IO_SQL: &str = "SELECT row_to_json(i)::text FROM (\
     SELECT backend_type, coalesce(sum(reads), 0)::int8 AS reads, \
            coalesce(sum(read_time), 0)::float8 AS read_time_ms, \
            coalesce(sum(writes), 0)::int8 AS writes, \
            coalesce(sum(writes) FILTER (WHERE context = 'normal' AND object = 'relation'), 0)::int8 \
              AS normal_writes, \
            coalesce(sum(write_time), 0)::float8 AS write_time_ms, \
            coalesce(sum(hits), 0)::int8 AS hits \
     FROM pg_catalog.pg_stat_io GROUP BY backend_type) i";

/// The connected database's tables with their autovacuum reloptions.
const TABLES_SQL: &str = "SELECT row_to_json(t)::text FROM (\
     SELECT quote_ident(s.schemaname) || '.' || quote_ident(s.relname) AS \"table\", \
            s.n_dead_tup, s.n_live_tup, c.reltuples::float8 AS reltuples, \
            (SELECT o.option_value::bool FROM pg_catalog.pg_options_to_table(c.reloptions) o \
              WHERE o.option_name = 'autovacuum_enabled') AS autovacuum_enabled, \
            (SELECT o.option_value::float8 FROM pg_catalog.pg_options_to_table(c.reloptions) o \
              WHERE o.option_name = 'autovacuum_vacuum_threshold') AS vacuum_threshold, \
            (SELECT o.option_value::float8 FROM pg_catalog.pg_options_to_table(c.reloptions) o \
              WHERE o.option_name = 'autovacuum_vacuum_scale_factor') AS vacuum_scale_factor, \
            s.last_autovacuum::text AS last_autovacuum \
     FROM pg_catalog.pg_stat_user_tables s JOIN pg_catalog.pg_class c ON c.oid = s.relid) t";

/// The connected database's indexes: use, size, constraint, validity, and the key that makes
/// two of them the same (method, columns, operator classes, collations, expressions,
/// predicate).
const INDEXES_SQL: &str = "SELECT row_to_json(i)::text FROM (\
     SELECT quote_ident(s.schemaname) || '.' || quote_ident(s.relname) AS \"table\", \
            quote_ident(s.schemaname) || '.' || quote_ident(s.indexrelname) AS index, \
            s.idx_scan, pg_catalog.pg_relation_size(s.indexrelid) AS size_bytes, \
            x.indisunique AS \"unique\", x.indisprimary AS \"primary\", \
            EXISTS (SELECT 1 FROM pg_catalog.pg_constraint k WHERE k.conindid = x.indexrelid) \
              AS \"constraint\", \
            x.indisvalid AS valid, \
            concat_ws(' ', am.amname, 'keys ' || x.indkey::text, 'opclasses ' || x.indclass::text, \
                      'collations ' || x.indcollation::text, \
                      'expressions ' || pg_catalog.pg_get_expr(x.indexprs, x.indrelid), \
                      'where ' || pg_catalog.pg_get_expr(x.indpred, x.indrelid)) AS key \
     FROM pg_catalog.pg_stat_user_indexes s \
     JOIN pg_catalog.pg_index x ON x.indexrelid = s.indexrelid \
     JOIN pg_catalog.pg_class ic ON ic.oid = x.indexrelid \
     JOIN pg_catalog.pg_am am ON am.oid = ic.relam) i";

/// Client backends in use, and how many of them are superusers'.
const CONNECTIONS_SQL: &str = "SELECT row_to_json(c)::text FROM (\
     SELECT count(*) FILTER (WHERE a.backend_type = 'client backend')::int8 AS client_backends, \
            count(*) FILTER (WHERE a.backend_type = 'client backend' AND r.rolsuper)::int8 \
              AS superuser_backends \
     FROM pg_catalog.pg_stat_activity a LEFT JOIN pg_catalog.pg_roles r ON r.oid = a.usesysid) c";

/// Prepared transactions and the oldest one's age.
const PREPARED_SQL: &str = "SELECT row_to_json(p)::text FROM (\
     SELECT count(*)::int8 AS count, \
            extract(epoch FROM now() - min(prepared))::float8 AS oldest_age_seconds \
     FROM pg_catalog.pg_prepared_xacts) p";
