//! What the server says about itself at connect (version, database, io_method), and the
//! checks `pageio aios --dsn` makes before its first sample: a server with `pg_aios`, and a
//! role that may read it.

use std::time::Duration;

use postgres::Client;
use serde::Serialize;

use super::*;

/// What the server said about itself when the connection opened.
#[derive(Debug, Clone, Serialize)]
pub(super) struct ServerFacts {
    /// Host, port, database and user.
    pub(super) target: String,
    /// `server_version`, e.g. `18.1`.
    pub(super) version: String,
    /// `server_version_num`, e.g. `180001`.
    pub(super) version_num: i32,
    /// `current_database()`.
    pub(super) database: String,
    /// Its OID.
    pub(super) database_oid: u32,
    /// `current_user`.
    pub(super) role: String,
    /// `io_method` (`worker`, `io_uring` or `sync`).
    pub(super) io_method: String,
    /// `io_workers` (the setting; the running workers are counted per sample).
    pub(super) io_workers_setting: String,
    /// `track_io_timing`: without it pg_stat_io's times stay 0, and the view says so.
    pub(super) track_io_timing: bool,
}

/// An error unless the server has `pg_aios` (PostgreSQL 18 or later).
pub(super) fn check_version(
    target: &str,
    version: &str,
    version_num: i32,
) -> Result<(), ServerError> {
    if version_num < PG_AIOS_SINCE_VERSION_NUM {
        return Err(ServerError::Version {
            target: target.to_string(),
            version: version.to_string(),
            version_num,
            needs: "the pg_aios view exists from PostgreSQL 18 on",
        });
    }
    Ok(())
}

/// Version and privilege checks, and the facts shown in every report.
pub(super) fn check_server(client: &mut Client, target: &str) -> Result<ServerFacts, ServerError> {
    let query_error = |doing: &'static str| {
        move |e: postgres::Error| ServerError::Query {
            target: target.to_string(),
            doing,
            cause: error_text(&e),
        }
    };
    // The simple (text) protocol: any PostgreSQL version answers it the same way, so the
    // version is read before anything version-specific is asked.
    let messages = client
        .simple_query(
            "SELECT current_setting('server_version_num'), current_setting('server_version'), \
                    current_database(), current_user, \
                    (SELECT oid FROM pg_database WHERE datname = current_database()), \
                    coalesce(current_setting('io_method', true), ''), \
                    coalesce(current_setting('io_workers', true), ''), \
                    coalesce(current_setting('track_io_timing', true), '')",
        )
        .map_err(query_error("reading the server version"))?;
    let Some(row) = messages.iter().find_map(|message| match message {
        postgres::SimpleQueryMessage::Row(row) => Some(row),
        _ => None,
    }) else {
        return Err(ServerError::Query {
            target: target.to_string(),
            doing: "reading the server version",
            cause: "the server returned no row".into(),
        });
    };
    let field = |i: usize| row.get(i).unwrap_or_default().to_string();
    let version = field(1);
    let version_num: i32 = field(0).parse().map_err(|_| ServerError::Query {
        target: target.to_string(),
        doing: "reading the server version",
        cause: format!("server_version_num {:?} is not a number", field(0)),
    })?;
    check_version(target, &version, version_num)?;
    let role = field(3);
    let database_oid: u32 = field(4).parse().unwrap_or(0);
    let may_read: bool = client
        .query_one(
            "SELECT has_table_privilege('pg_catalog.pg_aios', 'SELECT')",
            &[],
        )
        .map_err(query_error("checking the privilege to read pg_aios"))?
        .try_get(0)
        .map_err(query_error("checking the privilege to read pg_aios"))?;
    if !may_read {
        return Err(ServerError::Privilege {
            target: target.to_string(),
            role,
        });
    }
    Ok(ServerFacts {
        target: target.to_string(),
        version,
        version_num,
        database: field(2),
        database_oid,
        role,
        io_method: field(5),
        io_workers_setting: field(6),
        track_io_timing: field(7) == "on",
    })
}

/// The most the main thread waits for the version and privilege checks.
pub(super) fn check_bound() -> Duration {
    Duration::from_millis(STATEMENT_TIMEOUT_MS) * 2 + ROUND_TRIP_SLACK
}

/// The most the main thread waits for one sample.
pub(super) fn answer_bound() -> Duration {
    Duration::from_millis(STATEMENT_TIMEOUT_MS) * STATEMENTS_PER_SAMPLE + ROUND_TRIP_SLACK
}
