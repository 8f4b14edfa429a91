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
//! ## Rates
//!
//! `pg_stat_io` is cumulative; a rate is the difference of two samples over the time
//! between them (measured on this side with a monotonic clock). Backends flush their
//! counters to the shared statistics at the end of a transaction and at most about once a
//! second, so a rate over a short interval is lumpy: it shows what was flushed, not exactly
//! what happened in that interval. A counter that went down (`pg_stat_reset_shared('io')`)
//! gives no rate for that interval rather than a negative one.

use std::collections::{BTreeMap, HashMap};
use std::io::{IsTerminal, Write};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use postgres::config::Host;
use postgres::{Client, Config, NoTls};
use serde::Serialize;
use serde_json::{Map, Value};

use super::term::{self, View};
use super::AiosArgs;

/// Connect timeout when `--dsn` gives none: a live server on a LAN answers in
/// milliseconds, and a DBA waiting for a monitor should hear within seconds that the
/// address is wrong.
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// `statement_timeout` of the session, in milliseconds: every query reads small in-memory
/// views (pg_aios, pg_stat_io, pg_stat_activity) or one catalog index; taking longer means
/// the server is in trouble, and the monitor should say so rather than add to it.
const STATEMENT_TIMEOUT_MS: u64 = 2_000;

/// `lock_timeout` of the session, in milliseconds: resolving a relation reads pg_class,
/// which a running `VACUUM FULL` or DDL may lock; a monitor must not queue behind it.
const LOCK_TIMEOUT_MS: u64 = 500;

/// `idle_in_transaction_session_timeout` of the session, in milliseconds: the monitor
/// commits each sample at once; if this process is stopped mid-sample (SIGSTOP, a debugger)
/// the server ends the session instead of keeping a snapshot open.
const IDLE_IN_TRANSACTION_TIMEOUT_MS: u64 = 10_000;

/// Statements in one sample (transaction start, three views, relation lookup, commit):
/// with [`STATEMENT_TIMEOUT_MS`] each, the most a healthy but slow server can take.
const STATEMENTS_PER_SAMPLE: u32 = 6;

/// Slack on top of the server-side timeouts for the round trips themselves.
const ROUND_TRIP_SLACK: Duration = Duration::from_secs(2);

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

/// The tablespace OID of `pg_global` (shared catalogs, files under `global/`).
const GLOBALTABLESPACE_OID: u32 = 1664;

/// Why `pageio aios --dsn` could not show the server.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The connection string does not parse.
    #[error("invalid --dsn: {cause}; write it as libpq key=value pairs, e.g. --dsn 'host=/var/run/postgresql port=5432 user=postgres dbname=postgres'")]
    Dsn {
        /// What the parser said.
        cause: String,
    },
    /// The server could not be reached or refused the connection.
    #[error("cannot connect to PostgreSQL at {target}: {cause}; check that the server runs and accepts connections there (host, port, pg_hba.conf, password), or fix --dsn")]
    Connect {
        /// Host, port, database and user (never the password).
        target: String,
        /// What the client library said.
        cause: String,
    },
    /// The server asks for a password and none was given.
    #[error("cannot connect to PostgreSQL at {target}: the server asks for a password and none was given{note}; set PGPASSWORD, add a line host:port:database:user:password for it to the password file ({passfile}, mode 0600; PGPASSFILE names another), or put password=… in --dsn")]
    PasswordMissing {
        /// Host, port, database and user (never the password).
        target: String,
        /// The password file looked in.
        passfile: String,
        /// Why the password file gave none (`: … has no line for …`), or nothing.
        note: String,
    },
    /// No answer within the bound.
    #[error("PostgreSQL at {target} did not answer within {bound_secs} s while {doing}; the server is overloaded or unreachable (a firewall dropping packets?): {fix}")]
    Timeout {
        /// Host, port, database and user.
        target: String,
        /// What the command was waiting for.
        doing: &'static str,
        /// The bound, in seconds.
        bound_secs: u64,
        /// What to do about it.
        fix: &'static str,
    },
    /// The server has no `pg_aios`.
    #[error("PostgreSQL at {target} is version {version} (server_version_num {version_num}): the pg_aios view exists from PostgreSQL 18 on; point --dsn at a PostgreSQL 18 server")]
    Version {
        /// Host, port, database and user.
        target: String,
        /// `server_version`.
        version: String,
        /// `server_version_num`.
        version_num: i32,
    },
    /// The role may not read `pg_aios`.
    #[error("role \"{role}\" may not read pg_aios on {target} (it needs the pg_read_all_stats role, or superuser): as a superuser run GRANT pg_read_all_stats TO \"{role}\"; or connect as such a role")]
    Privilege {
        /// Host, port, database and user.
        target: String,
        /// The connected role.
        role: String,
    },
    /// A query failed.
    #[error("PostgreSQL at {target} failed while {doing}: {cause}")]
    Query {
        /// Host, port, database and user.
        target: String,
        /// What the command was doing.
        doing: &'static str,
        /// The server's message (with its SQLSTATE).
        cause: String,
    },
    /// A flag is out of range.
    #[error("{0}")]
    Usage(String),
}

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
    let config = parse_dsn(dsn, &|name| std::env::var(name).ok())?;
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

/// Parses `dsn` (libpq key=value pairs) and fills what it leaves out as libpq does: from
/// `PGHOST`, `PGPORT`, `PGUSER`, `PGPASSWORD`, `PGDATABASE`, `PGCONNECT_TIMEOUT`, else
/// the local socket directory and the login name. Then adds the session settings that make
/// the connection read-only and fast to give up (see the module docs).
fn parse_dsn(dsn: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Config, ServerError> {
    let mut config: Config = dsn.parse().map_err(|e: postgres::Error| ServerError::Dsn {
        cause: error_text(&e),
    })?;
    if config.get_hosts().is_empty() {
        let host = env("PGHOST").unwrap_or_else(|| {
            // libpq's default socket directory is a build option: Debian's packages use
            // /var/run/postgresql, the source default is /tmp.
            if std::path::Path::new("/var/run/postgresql").is_dir() {
                "/var/run/postgresql".to_string()
            } else {
                "/tmp".to_string()
            }
        });
        for one in host.split(',') {
            config.host(one);
        }
    }
    if config.get_ports().is_empty() {
        if let Some(port) = env("PGPORT") {
            let port: u16 = port.parse().map_err(|_| ServerError::Dsn {
                cause: format!("PGPORT={port} is not a port number"),
            })?;
            config.port(port);
        }
    }
    if config.get_user().is_none() {
        let user = env("PGUSER")
            .or_else(|| env("USER"))
            .unwrap_or_else(|| "postgres".to_string());
        config.user(&user);
    }
    if config.get_password().is_none() {
        if let Some(password) = env("PGPASSWORD") {
            config.password(password);
        }
    }
    if config.get_dbname().is_none() {
        if let Some(dbname) = env("PGDATABASE") {
            config.dbname(&dbname);
        }
    }
    if config.get_password().is_none() {
        // As libpq: the password file, when nothing else gave a password.
        if let Ok(password) = password_from_file(&config, env) {
            config.password(password);
        }
    }
    if config.get_connect_timeout().is_none() {
        let from_env = env("PGCONNECT_TIMEOUT")
            .and_then(|s| s.parse::<u64>().ok())
            .filter(|&secs| secs > 0)
            .map(Duration::from_secs);
        config.connect_timeout(from_env.unwrap_or(DEFAULT_CONNECT_TIMEOUT));
    }
    if config.get_application_name().is_none() {
        config.application_name("pageio aios");
    }
    let session = format!(
        "-c default_transaction_read_only=on -c statement_timeout={STATEMENT_TIMEOUT_MS} \
         -c lock_timeout={LOCK_TIMEOUT_MS} \
         -c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_TIMEOUT_MS}"
    );
    let options = match config.get_options() {
        Some(given) if !given.trim().is_empty() => format!("{given} {session}"),
        _ => session,
    };
    config.options(&options);
    Ok(config)
}

/// The most bytes of a password file read: a few lines per server; more is not one.
const PASSFILE_MAX_BYTES: u64 = 1 << 20;

/// The password file libpq reads: `PGPASSFILE`, else `~/.pgpass`.
fn passfile_path(env: &dyn Fn(&str) -> Option<String>) -> std::path::PathBuf {
    match env("PGPASSFILE") {
        Some(p) => p.into(),
        None => std::path::Path::new(&env("HOME").unwrap_or_else(|| "~".into())).join(".pgpass"),
    }
}

/// The password for `config`'s first host from the password file, as libpq matches it:
/// `host:port:database:user:password` lines, `*` matching anything, `\:` and `\\`
/// escaped, a socket directory matched as `localhost` when it is the default one; a file
/// others may read is ignored, as libpq ignores it. `Err` says why there is none.
fn password_from_file(
    config: &Config,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, String> {
    use std::os::unix::fs::PermissionsExt;
    let path = passfile_path(env);
    let meta =
        std::fs::metadata(&path).map_err(|e| format!("{} cannot be read: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(format!(
            "{} may be read by others (mode {:o}), so it is ignored, as libpq ignores it: chmod 600 it",
            path.display(),
            meta.permissions().mode() & 0o777
        ));
    }
    let bytes = pageio::storage::read_small_file(&path, PASSFILE_MAX_BYTES)
        .map_err(|e| format!("{} cannot be read: {e}", path.display()))?;
    let text = String::from_utf8_lossy(&bytes);
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(name)) => name.clone(),
        Some(Host::Unix(dir))
            if dir == std::path::Path::new("/var/run/postgresql")
                || dir == std::path::Path::new("/tmp") =>
        {
            "localhost".into()
        }
        Some(Host::Unix(dir)) => dir.display().to_string(),
        None => "localhost".into(),
    };
    let port = config
        .get_ports()
        .first()
        .copied()
        .unwrap_or(5432)
        .to_string();
    let user = config.get_user().unwrap_or_default().to_string();
    let dbname = config
        .get_dbname()
        .map_or_else(|| user.clone(), str::to_string);
    let wanted = [host.as_str(), port.as_str(), dbname.as_str(), user.as_str()];
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let fields = split_passfile_line(line);
        if fields.len() < 5 {
            continue;
        }
        if fields[..4]
            .iter()
            .zip(wanted)
            .all(|(field, want)| field == "*" || field == want)
        {
            return Ok(fields[4..].join(":"));
        }
    }
    Err(format!(
        "{} has no line for {host}:{port}:{dbname}:{user}",
        path.display()
    ))
}

/// The fields of a password-file line: `:` separates, `\` escapes the next character.
fn split_passfile_line(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let (Some(next), Some(f)) = (chars.next(), fields.last_mut()) {
                    f.push(next);
                }
            }
            ':' if fields.len() < 5 => fields.push(String::new()),
            c => {
                if let Some(f) = fields.last_mut() {
                    f.push(c)
                }
            }
        }
    }
    fields
}

/// The error for a failed connection: a missing password says how to give one.
fn connect_error(e: &postgres::Error, config: &Config, target: String) -> ServerError {
    let cause = error_text(e);
    if config.get_password().is_none() && cause.contains("password missing") {
        let env = |name: &str| std::env::var(name).ok();
        let note = match password_from_file(config, &env) {
            Err(why) => format!(" ({why})"),
            Ok(_) => String::new(),
        };
        return ServerError::PasswordMissing {
            target,
            passfile: passfile_path(&env).display().to_string(),
            note,
        };
    }
    ServerError::Connect { target, cause }
}

/// Host, port, database and user of `config`, for messages (never the password).
fn describe_target(config: &Config) -> String {
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .map(|h| match h {
            Host::Tcp(name) => name.clone(),
            Host::Unix(path) => path.display().to_string(),
        })
        .collect();
    let mut text = format!("host={}", hosts.join(","));
    if let Some(port) = config.get_ports().first() {
        text.push_str(&format!(" port={port}"));
    }
    let user = config.get_user().unwrap_or("?");
    text.push_str(&format!(
        " dbname={} user={user}",
        config.get_dbname().unwrap_or(user)
    ));
    text
}

/// The most the main thread waits for the connection: like libpq's `connect_timeout`, it
/// covers the TCP connect and the startup exchange (authentication), once per host tried
/// (the client library's own timeout covers only the TCP connect).
fn connect_bound(config: &Config) -> Duration {
    config
        .get_connect_timeout()
        .copied()
        .unwrap_or(DEFAULT_CONNECT_TIMEOUT)
        .saturating_mul(config.get_hosts().len().max(1) as u32)
        + CONNECT_SLACK
}

/// Slack on top of `connect_timeout` for the startup exchange on a server that answered
/// the TCP connect.
const CONNECT_SLACK: Duration = Duration::from_secs(1);

/// The most the main thread waits for the version and privilege checks.
fn check_bound() -> Duration {
    Duration::from_millis(STATEMENT_TIMEOUT_MS) * 2 + ROUND_TRIP_SLACK
}

/// The most the main thread waits for one sample.
fn answer_bound() -> Duration {
    Duration::from_millis(STATEMENT_TIMEOUT_MS) * STATEMENTS_PER_SAMPLE + ROUND_TRIP_SLACK
}

/// What the server said about itself when the connection opened.
#[derive(Debug, Clone, Serialize)]
struct ServerFacts {
    /// Host, port, database and user.
    target: String,
    /// `server_version`, e.g. `18.1`.
    version: String,
    /// `server_version_num`, e.g. `180001`.
    version_num: i32,
    /// `current_database()`.
    database: String,
    /// Its OID.
    database_oid: u32,
    /// `current_user`.
    role: String,
    /// `io_method` (`worker`, `io_uring` or `sync`).
    io_method: String,
    /// `io_workers` (the setting; the running workers are counted per sample).
    io_workers_setting: String,
}

/// The rows of one sample, as the connection thread read them.
struct Rows {
    /// `pg_aios`, every column, as `row_to_json` gave them.
    aios: Vec<Map<String, Value>>,
    /// `pg_stat_io`, every column.
    stat_io: Vec<Map<String, Value>>,
    /// `pg_stat_activity`: pid, backend_type, datname, usename, state, wait_event_type,
    /// wait_event, query_start, backend_start.
    activity: Vec<Map<String, Value>>,
    /// Each file named in `aios`, resolved.
    relations: HashMap<String, RelationRef>,
    /// `clock_timestamp()` on the server when the sample started.
    sampled_at: String,
    /// `transaction_read_only` inside the sample's transaction (always `on`).
    transaction_read_only: bool,
    /// When the rows arrived (this side's monotonic clock).
    taken: Instant,
}

/// What the connection thread sends back.
enum Answer {
    /// The startup exchange finished.
    Connected,
    /// The checks passed; the server's facts.
    Ready(ServerFacts),
    /// One sample.
    Sample(Box<Rows>),
}

/// The main thread's end of the connection: asks for samples, waits with a bound, and
/// turns consecutive samples into views.
struct Sampler {
    requests: mpsc::Sender<()>,
    answers: mpsc::Receiver<Result<Answer, ServerError>>,
    facts: ServerFacts,
    pid: Option<i32>,
    previous: Option<(Instant, BTreeMap<String, Counters>)>,
}

impl Sampler {
    /// Connects on a new thread and waits (bounded) until the server is known to have
    /// `pg_aios` readable by this role.
    fn connect(config: Config, pid: Option<i32>) -> Result<Sampler, ServerError> {
        let target = describe_target(&config);
        let bound = connect_bound(&config);
        let (request_tx, request_rx) = mpsc::channel::<()>();
        let (answer_tx, answer_rx) = mpsc::channel();
        let thread_target = target.clone();
        std::thread::Builder::new()
            .name("pg-connection".into())
            .spawn(move || serve(config, thread_target, request_rx, answer_tx))
            .map_err(|e| ServerError::Connect {
                target: target.clone(),
                cause: format!("cannot start the connection thread: {e}"),
            })?;
        let mut facts = None;
        for (bound, doing) in [
            (bound, "connecting"),
            (check_bound(), "checking the version and privileges"),
        ] {
            match wait_answer(&answer_rx, bound, &target, doing)? {
                Answer::Connected => {}
                Answer::Ready(ready) => facts = Some(ready),
                Answer::Sample(_) => {}
            }
        }
        let facts = facts.ok_or_else(|| ServerError::Query {
            target: target.clone(),
            doing: "connecting",
            cause: "the connection thread answered out of order".into(),
        })?;
        Ok(Sampler {
            requests: request_tx,
            answers: answer_rx,
            facts,
            pid,
            previous: None,
        })
    }

    /// Takes one sample and makes its view (rates against the previous sample, if any).
    fn sample(&mut self) -> Result<ServerView, ServerError> {
        let target = self.facts.target.clone();
        self.requests.send(()).map_err(|_| ServerError::Query {
            target: target.clone(),
            doing: "sampling",
            cause: "the connection closed".into(),
        })?;
        let rows = match wait_answer(&self.answers, answer_bound(), &target, "sampling")? {
            Answer::Sample(rows) => rows,
            Answer::Connected | Answer::Ready(_) => {
                return Err(ServerError::Query {
                    target,
                    doing: "sampling",
                    cause: "the connection thread answered out of order".into(),
                })
            }
        };
        let counters = counters_by_backend_type(&rows.stat_io);
        let rates = self.previous.as_ref().map(|(when, before)| {
            let elapsed_s = rows.taken.duration_since(*when).as_secs_f64();
            rates_between(before, &counters, elapsed_s)
        });
        let interval_s = self
            .previous
            .as_ref()
            .map(|(when, _)| rows.taken.duration_since(*when).as_secs_f64());
        self.previous = Some((rows.taken, counters.clone()));
        Ok(ServerView {
            report: build_report(&self.facts, *rows, counters, rates, interval_s, self.pid),
        })
    }
}

/// Waits up to `bound` for the connection thread's next answer.
fn wait_answer(
    answers: &mpsc::Receiver<Result<Answer, ServerError>>,
    bound: Duration,
    target: &str,
    doing: &'static str,
) -> Result<Answer, ServerError> {
    match answers.recv_timeout(bound) {
        Ok(answer) => answer,
        Err(mpsc::RecvTimeoutError::Timeout) => Err(ServerError::Timeout {
            target: target.to_string(),
            doing,
            bound_secs: bound.as_secs_f64().ceil() as u64,
            fix: if doing == "connecting" {
                "check the host and port, or give a slow server longer with connect_timeout=SECS in --dsn"
            } else {
                "check the server's load (pg_stat_activity, the host's CPU and disks) and the network, then run again"
            },
        }),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(ServerError::Query {
            target: target.to_string(),
            doing,
            cause: "the connection thread ended without an answer".into(),
        }),
    }
}

/// The connection thread: connect, check, then one sample per request until the main
/// thread hangs up.
fn serve(
    config: Config,
    target: String,
    requests: mpsc::Receiver<()>,
    answers: mpsc::Sender<Result<Answer, ServerError>>,
) {
    let mut client = match config.connect(NoTls) {
        Ok(client) => client,
        Err(e) => {
            let _ = answers.send(Err(connect_error(&e, &config, target)));
            return;
        }
    };
    if answers.send(Ok(Answer::Connected)).is_err() {
        return;
    }
    let facts = match check_server(&mut client, &target) {
        Ok(facts) => facts,
        Err(e) => {
            let _ = answers.send(Err(e));
            return;
        }
    };
    let mut cache = RelationCache::default();
    let database_oid = facts.database_oid;
    if answers.send(Ok(Answer::Ready(facts))).is_err() {
        return;
    }
    while requests.recv().is_ok() {
        let answer = take_rows(&mut client, &target, database_oid, &mut cache)
            .map(|rows| Answer::Sample(Box::new(rows)));
        let failed = answer.is_err();
        if answers.send(answer).is_err() || failed {
            return;
        }
    }
}

/// The server's message with its SQLSTATE (the client library's `Display` hides the
/// detail behind "db error").
fn error_text(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!(
            "{}: {} (SQLSTATE {})",
            db.severity(),
            db.message(),
            db.code().code()
        ),
        None => {
            let mut text = e.to_string();
            let mut source = std::error::Error::source(e);
            while let Some(cause) = source {
                let more = cause.to_string();
                if !text.contains(&more) {
                    text.push_str(": ");
                    text.push_str(&more);
                }
                source = cause.source();
            }
            text
        }
    }
}

/// An error unless the server has `pg_aios` (PostgreSQL 18 or later).
fn check_version(target: &str, version: &str, version_num: i32) -> Result<(), ServerError> {
    if version_num < PG_AIOS_SINCE_VERSION_NUM {
        return Err(ServerError::Version {
            target: target.to_string(),
            version: version.to_string(),
            version_num,
        });
    }
    Ok(())
}

/// Version and privilege checks, and the facts shown in every report.
fn check_server(client: &mut Client, target: &str) -> Result<ServerFacts, ServerError> {
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
                    coalesce(current_setting('io_workers', true), '')",
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
    })
}

/// Every row of `sql` (which selects one `row_to_json(…)::text` column) as a JSON object.
fn json_rows(
    transaction: &mut postgres::Transaction<'_>,
    sql: &str,
    target: &str,
    doing: &'static str,
) -> Result<Vec<Map<String, Value>>, ServerError> {
    let rows = transaction
        .query(sql, &[])
        .map_err(|e| ServerError::Query {
            target: target.to_string(),
            doing,
            cause: error_text(&e),
        })?;
    rows.iter()
        .map(|row| {
            let text: String = row.get(0);
            match serde_json::from_str::<Value>(&text) {
                Ok(Value::Object(map)) => Ok(map),
                _ => Err(ServerError::Query {
                    target: target.to_string(),
                    doing,
                    cause: format!("row_to_json gave something that is not an object: {text}"),
                }),
            }
        })
        .collect()
}

/// One sample: pg_aios, pg_stat_activity and pg_stat_io in one read-only transaction, and
/// the relation of every file pg_aios names.
fn take_rows(
    client: &mut Client,
    target: &str,
    database_oid: u32,
    cache: &mut RelationCache,
) -> Result<Rows, ServerError> {
    let query_error = |doing: &'static str| {
        move |e: postgres::Error| ServerError::Query {
            target: target.to_string(),
            doing,
            cause: error_text(&e),
        }
    };
    let mut transaction = client
        .build_transaction()
        .read_only(true)
        .start()
        .map_err(query_error("starting a read-only transaction"))?;
    let head = transaction
        .query_one(
            "SELECT clock_timestamp()::text, current_setting('transaction_read_only') = 'on'",
            &[],
        )
        .map_err(query_error("reading the clock"))?;
    // pg_aios first: its rows are the most transient.
    let aios = json_rows(
        &mut transaction,
        "SELECT row_to_json(a)::text FROM pg_catalog.pg_aios a ORDER BY a.pid, a.io_id",
        target,
        "reading pg_aios",
    )?;
    let activity = json_rows(
        &mut transaction,
        "SELECT row_to_json(s)::text FROM (SELECT pid, backend_type, datname, usename, state, \
             wait_event_type, wait_event, query_start, backend_start \
             FROM pg_catalog.pg_stat_activity ORDER BY pid) s",
        target,
        "reading pg_stat_activity",
    )?;
    let stat_io = json_rows(
        &mut transaction,
        "SELECT row_to_json(s)::text FROM pg_catalog.pg_stat_io s",
        target,
        "reading pg_stat_io",
    )?;
    let relations = cache.resolve(&mut transaction, &aios, database_oid, target)?;
    let sampled_at: String = head.get(0);
    let transaction_read_only: bool = head.get(1);
    transaction
        .commit()
        .map_err(query_error("ending the read-only transaction"))?;
    Ok(Rows {
        aios,
        stat_io,
        activity,
        relations,
        sampled_at,
        transaction_read_only,
        taken: Instant::now(),
    })
}

/// A file named by `pg_aios.target_desc` and, where the catalog could say, its relation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RelationRef {
    /// The path relative to the data directory, as pg_aios gives it (`base/5/16384`).
    pub file: String,
    /// The fork: `main`, `fsm`, `vm` or `init`.
    pub fork: &'static str,
    /// The tablespace OID (`0`: the database's default tablespace, `1664`: pg_global).
    pub tablespace_oid: u32,
    /// The database OID (`0` for shared relations).
    pub database_oid: u32,
    /// The file's number (`pg_class.relfilenode`, or the relation mapper's).
    pub relfilenode: u32,
    /// True for a temporary relation's file (`t3_16384`).
    pub temporary: bool,
    /// The database's name, if it still exists.
    pub database: Option<String>,
    /// The relation's OID, when resolved.
    pub oid: Option<u32>,
    /// Its schema, when resolved.
    pub schema: Option<String>,
    /// Its name, when resolved.
    pub name: Option<String>,
    /// Why the name is missing, when it is.
    pub note: Option<String>,
}

impl RelationRef {
    /// `schema.name` when resolved, else the file (and its database, when known: a file
    /// of another database is the usual reason for no name).
    pub fn label(&self) -> String {
        match (&self.schema, &self.name, &self.database) {
            (Some(schema), Some(name), _) => format!("{schema}.{name}"),
            (_, _, Some(database)) => format!("file {} (database {database})", self.file),
            _ => format!("file {}", self.file),
        }
    }
}

/// The file path inside `target_desc` (`blocks 0..15 in file "base/5/16384"`).
pub fn file_of_target_desc(target_desc: &str) -> Option<&str> {
    let start = target_desc.find("in file \"")? + "in file \"".len();
    let rest = &target_desc[start..];
    let end = rest.rfind('"')?;
    Some(&rest[..end])
}

/// Tablespace, database, relfilenode, fork and temporariness of a relation path as
/// PostgreSQL's `relpath()` writes it, or `None` for a path of another shape.
pub fn parse_relation_path(file: &str) -> Option<RelationRef> {
    let parts: Vec<&str> = file.split('/').collect();
    let (tablespace_oid, database_oid, last) = match parts.as_slice() {
        ["global", last] => (GLOBALTABLESPACE_OID, 0, *last),
        ["base", db, last] => (0, db.parse().ok()?, *last),
        ["pg_tblspc", spc, version, db, last] if version.starts_with("PG_") => {
            (spc.parse().ok()?, db.parse().ok()?, *last)
        }
        _ => return None,
    };
    // A segment number (`.1`) is not part of relpath(), but take it off if present.
    let last = last.split('.').next()?;
    let (temporary, rest) = match last.strip_prefix('t') {
        Some(after) => {
            let (_proc_number, node) = after.split_once('_')?;
            (true, node)
        }
        None => (false, last),
    };
    let (node, fork) = match rest.split_once('_') {
        None => (rest, "main"),
        Some((node, "fsm")) => (node, "fsm"),
        Some((node, "vm")) => (node, "vm"),
        Some((node, "init")) => (node, "init"),
        Some(_) => return None,
    };
    Some(RelationRef {
        file: file.to_string(),
        fork,
        tablespace_oid,
        database_oid,
        relfilenode: node.parse().ok()?,
        temporary,
        database: None,
        oid: None,
        schema: None,
        name: None,
        note: None,
    })
}

/// Relations already looked up, by file path, and database names by OID.
#[derive(Default)]
struct RelationCache {
    by_file: HashMap<String, RelationRef>,
    databases: HashMap<u32, String>,
}

impl RelationCache {
    /// The relation of every file that `aios` names: from the cache, else looked up in one
    /// query for all new files of the connected database (or shared).
    fn resolve(
        &mut self,
        transaction: &mut postgres::Transaction<'_>,
        aios: &[Map<String, Value>],
        connected_database_oid: u32,
        target: &str,
    ) -> Result<HashMap<String, RelationRef>, ServerError> {
        let query_error = |doing: &'static str| {
            move |e: postgres::Error| ServerError::Query {
                target: target.to_string(),
                doing,
                cause: error_text(&e),
            }
        };
        let files: Vec<&str> = aios
            .iter()
            .filter_map(|row| row.get("target_desc").and_then(Value::as_str))
            .filter_map(file_of_target_desc)
            .collect();
        let mut new: Vec<RelationRef> = Vec::new();
        for file in &files {
            if self.by_file.contains_key(*file) || new.iter().any(|r| r.file == *file) {
                continue;
            }
            match parse_relation_path(file) {
                Some(relation) => new.push(relation),
                None => {
                    // A path of a shape this version does not know: shown as it is.
                    self.by_file.insert(
                        file.to_string(),
                        RelationRef {
                            file: file.to_string(),
                            fork: "main",
                            tablespace_oid: 0,
                            database_oid: 0,
                            relfilenode: 0,
                            temporary: false,
                            database: None,
                            oid: None,
                            schema: None,
                            name: None,
                            note: Some("not a relation path pageio knows".into()),
                        },
                    );
                }
            }
        }
        if !new.is_empty() {
            if new
                .iter()
                .any(|r| r.database_oid != 0 && !self.databases.contains_key(&r.database_oid))
            {
                let rows = transaction
                    .query(
                        "SELECT oid::int8, datname::text FROM pg_catalog.pg_database",
                        &[],
                    )
                    .map_err(query_error("reading pg_database"))?;
                self.databases = rows
                    .iter()
                    .map(|row| (row.get::<_, i64>(0) as u32, row.get::<_, String>(1)))
                    .collect();
            }
            let here: Vec<usize> = (0..new.len())
                .filter(|&i| {
                    new[i].database_oid == connected_database_oid || new[i].database_oid == 0
                })
                .collect();
            if !here.is_empty() {
                let tablespaces: Vec<i64> =
                    here.iter().map(|&i| new[i].tablespace_oid as i64).collect();
                let nodes: Vec<i64> = here.iter().map(|&i| new[i].relfilenode as i64).collect();
                let rows = transaction
                    .query(
                        "SELECT f.ord::int8, c.oid::int8, n.nspname::text, c.relname::text \
                         FROM unnest($1::int8[], $2::int8[]) WITH ORDINALITY AS f(spc, node, ord) \
                         LEFT JOIN pg_catalog.pg_class c \
                           ON c.oid = pg_catalog.pg_filenode_relation(f.spc::oid, f.node::oid) \
                         LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace",
                        &[&tablespaces, &nodes],
                    )
                    .map_err(query_error("resolving relations with pg_filenode_relation"))?;
                for row in rows {
                    let ord = row.get::<_, i64>(0) as usize;
                    let Some(&i) = ord.checked_sub(1).and_then(|o| here.get(o)) else {
                        continue;
                    };
                    let relation = &mut new[i];
                    relation.oid = row.get::<_, Option<i64>>(1).map(|oid| oid as u32);
                    relation.schema = row.get(2);
                    relation.name = row.get(3);
                }
            }
            let connected_name = self.databases.get(&connected_database_oid).cloned();
            for mut relation in new {
                relation.database = self.databases.get(&relation.database_oid).cloned();
                if relation.name.is_none() {
                    relation.note = Some(unresolved_note(
                        &relation,
                        connected_database_oid,
                        connected_name.as_deref(),
                    ));
                }
                if self.by_file.len() >= RELATION_CACHE_ENTRIES {
                    self.by_file.clear();
                }
                self.by_file.insert(relation.file.clone(), relation);
            }
        }
        let found: HashMap<String, RelationRef> = files
            .iter()
            .filter_map(|file| {
                self.by_file
                    .get(*file)
                    .map(|r| (file.to_string(), r.clone()))
            })
            .collect();
        // Unresolved files of the connected database are not kept: a relation created in a
        // transaction that has not committed yet gets its name once it has.
        self.by_file
            .retain(|_, r| r.name.is_some() || r.database_oid != connected_database_oid);
        Ok(found)
    }
}

/// Why a file's relation has no name.
fn unresolved_note(
    relation: &RelationRef,
    connected_database_oid: u32,
    connected_name: Option<&str>,
) -> String {
    if relation.database_oid != 0 && relation.database_oid != connected_database_oid {
        let database = match &relation.database {
            Some(name) => format!("database \"{name}\" (OID {})", relation.database_oid),
            None => format!("database OID {} (dropped?)", relation.database_oid),
        };
        return format!(
            "relfilenode {} in {database}, not the connected database \"{}\": a catalog can only be read from its own database, so it is shown by file; connect to that database to see its name",
            relation.relfilenode,
            connected_name.unwrap_or("?")
        );
    }
    if relation.temporary {
        return format!(
            "temporary relfilenode {} of another session: not in pg_filenode_relation's reach",
            relation.relfilenode
        );
    }
    format!(
        "relfilenode {} has no relation in pg_class now (created by a transaction not yet committed, or dropped or rewritten since)",
        relation.relfilenode
    )
}

/// The `pg_stat_io` counters summed per backend type (over every object and context).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
struct Counters {
    reads: f64,
    read_bytes: f64,
    read_time_ms: f64,
    writes: f64,
    write_bytes: f64,
    extends: f64,
    hits: f64,
    evictions: f64,
}

/// A column of a JSON row as a number (`null`, missing: 0 — pg_stat_io leaves counters of
/// impossible combinations NULL).
fn number(row: &Map<String, Value>, column: &str) -> f64 {
    row.get(column).and_then(Value::as_f64).unwrap_or(0.0)
}

/// A column of a JSON row as text.
fn text<'a>(row: &'a Map<String, Value>, column: &str) -> Option<&'a str> {
    row.get(column).and_then(Value::as_str)
}

fn counters_by_backend_type(stat_io: &[Map<String, Value>]) -> BTreeMap<String, Counters> {
    let mut sums: BTreeMap<String, Counters> = BTreeMap::new();
    for row in stat_io {
        let Some(backend_type) = text(row, "backend_type") else {
            continue;
        };
        let sum = sums.entry(backend_type.to_string()).or_default();
        sum.reads += number(row, "reads");
        sum.read_bytes += number(row, "read_bytes");
        sum.read_time_ms += number(row, "read_time");
        sum.writes += number(row, "writes");
        sum.write_bytes += number(row, "write_bytes");
        sum.extends += number(row, "extends");
        sum.hits += number(row, "hits");
        sum.evictions += number(row, "evictions");
    }
    sums
}

/// Per-second rates of one backend type over one interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rates {
    /// `pg_stat_io.backend_type`, or `total`.
    pub backend_type: String,
    /// Read I/Os per second.
    pub reads_per_s: f64,
    /// Megabytes (10^6 bytes) read per second.
    pub read_mb_per_s: f64,
    /// Milliseconds spent reading per second (needs track_io_timing; else 0).
    pub read_time_ms_per_s: f64,
    /// Shared-buffer hits per second.
    pub hits_per_s: f64,
    /// Write I/Os per second.
    pub writes_per_s: f64,
    /// Megabytes written per second.
    pub write_mb_per_s: f64,
    /// Relation extensions per second.
    pub extends_per_s: f64,
    /// Buffers evicted per second.
    pub evictions_per_s: f64,
}

/// Rates per backend type between two samples `elapsed_s` apart, and a `total` row.
/// A backend type whose counters went down (statistics reset) has no rate this interval.
fn rates_between(
    before: &BTreeMap<String, Counters>,
    after: &BTreeMap<String, Counters>,
    elapsed_s: f64,
) -> Vec<Rates> {
    let elapsed_s = elapsed_s.max(1e-6);
    let mut total = Counters::default();
    let mut rates = Vec::new();
    let make = |backend_type: &str, d: &Counters| Rates {
        backend_type: backend_type.to_string(),
        reads_per_s: d.reads / elapsed_s,
        read_mb_per_s: d.read_bytes / 1e6 / elapsed_s,
        read_time_ms_per_s: d.read_time_ms / elapsed_s,
        hits_per_s: d.hits / elapsed_s,
        writes_per_s: d.writes / elapsed_s,
        write_mb_per_s: d.write_bytes / 1e6 / elapsed_s,
        extends_per_s: d.extends / elapsed_s,
        evictions_per_s: d.evictions / elapsed_s,
    };
    for (backend_type, now) in after {
        let then = before.get(backend_type).copied().unwrap_or_default();
        let d = Counters {
            reads: now.reads - then.reads,
            read_bytes: now.read_bytes - then.read_bytes,
            read_time_ms: now.read_time_ms - then.read_time_ms,
            writes: now.writes - then.writes,
            write_bytes: now.write_bytes - then.write_bytes,
            extends: now.extends - then.extends,
            hits: now.hits - then.hits,
            evictions: now.evictions - then.evictions,
        };
        let fields = [
            d.reads,
            d.read_bytes,
            d.read_time_ms,
            d.writes,
            d.write_bytes,
            d.extends,
            d.hits,
            d.evictions,
        ];
        if fields.iter().any(|&v| v < 0.0) {
            continue;
        }
        total.reads += d.reads;
        total.read_bytes += d.read_bytes;
        total.read_time_ms += d.read_time_ms;
        total.writes += d.writes;
        total.write_bytes += d.write_bytes;
        total.extends += d.extends;
        total.hits += d.hits;
        total.evictions += d.evictions;
        rates.push(make(backend_type, &d));
    }
    rates.push(make("total", &total));
    rates
}

/// One in-flight I/O: pg_aios's row as the server gave it, with names.
#[derive(Debug, Clone, Serialize)]
struct InFlight {
    /// Every column of `pg_aios`, spelled as there.
    pg_aios: Map<String, Value>,
    /// `pg_stat_activity.backend_type` of `pid` (null if the backend is gone).
    backend_type: Option<String>,
    /// The file of `target_desc`, resolved.
    relation: Option<RelationRef>,
}

/// In-flight I/Os of one backend.
#[derive(Debug, Clone, Serialize)]
struct ByBackend {
    pid: i64,
    backend_type: Option<String>,
    ios: u64,
    bytes: u64,
    /// How many I/Os are in each pg_aios state.
    states: BTreeMap<String, u64>,
}

/// In-flight I/Os on one relation (or unresolved file).
#[derive(Debug, Clone, Serialize)]
struct ByRelation {
    relation: String,
    file: Option<String>,
    ios: u64,
    bytes: u64,
}

/// The I/O workers (`backend_type = 'io worker'`).
#[derive(Debug, Clone, Serialize)]
struct IoWorkers {
    count: u64,
    busy: u64,
    /// pid and wait_event of each busy worker.
    busy_pids: Vec<i64>,
}

/// Everything one sample shows; `--json` prints it as it is.
#[derive(Debug, Clone, Serialize)]
struct Report {
    server: ServerFacts,
    /// `clock_timestamp()` on the server.
    sampled_at: String,
    /// Seconds since the previous sample (null for the first).
    interval_s: Option<f64>,
    /// `transaction_read_only` of the transaction the sample ran in.
    transaction_read_only: bool,
    /// `--pid`, if given: only that backend's I/Os are listed.
    pid_filter: Option<i32>,
    in_flight: Vec<InFlight>,
    in_flight_by_backend: Vec<ByBackend>,
    in_flight_by_relation: Vec<ByRelation>,
    io_workers: IoWorkers,
    /// Per backend type and `total`, from pg_stat_io deltas (null for the first sample).
    rates: Option<Vec<Rates>>,
    /// pg_stat_io summed per backend type (cumulative since the last reset).
    pg_stat_io_totals: BTreeMap<String, Counters>,
    /// The raw rows.
    pg_stat_io: Vec<Map<String, Value>>,
    pg_stat_activity: Vec<Map<String, Value>>,
}

fn build_report(
    facts: &ServerFacts,
    rows: Rows,
    totals: BTreeMap<String, Counters>,
    rates: Option<Vec<Rates>>,
    interval_s: Option<f64>,
    pid_filter: Option<i32>,
) -> Report {
    let backend_types: HashMap<i64, String> = rows
        .activity
        .iter()
        .filter_map(|row| {
            Some((
                row.get("pid")?.as_i64()?,
                text(row, "backend_type")?.to_string(),
            ))
        })
        .collect();
    let in_flight: Vec<InFlight> = rows
        .aios
        .into_iter()
        .filter(|row| {
            pid_filter.is_none_or(|pid| row.get("pid").and_then(Value::as_i64) == Some(pid as i64))
        })
        .map(|row| {
            let pid = row.get("pid").and_then(Value::as_i64).unwrap_or(0);
            let relation = text(&row, "target_desc")
                .and_then(file_of_target_desc)
                .and_then(|file| rows.relations.get(file).cloned());
            InFlight {
                backend_type: backend_types.get(&pid).cloned(),
                relation,
                pg_aios: row,
            }
        })
        .collect();
    let mut by_backend: BTreeMap<i64, ByBackend> = BTreeMap::new();
    let mut by_relation: BTreeMap<String, ByRelation> = BTreeMap::new();
    for io in &in_flight {
        let pid = io.pg_aios.get("pid").and_then(Value::as_i64).unwrap_or(0);
        let length = io
            .pg_aios
            .get("length")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let entry = by_backend.entry(pid).or_insert_with(|| ByBackend {
            pid,
            backend_type: io.backend_type.clone(),
            ios: 0,
            bytes: 0,
            states: BTreeMap::new(),
        });
        entry.ios += 1;
        entry.bytes += length;
        let state = text(&io.pg_aios, "state").unwrap_or("?").to_string();
        *entry.states.entry(state).or_default() += 1;
        let label = match &io.relation {
            Some(relation) => relation.label(),
            None => text(&io.pg_aios, "target_desc")
                .filter(|s| !s.is_empty())
                .unwrap_or("(no target)")
                .to_string(),
        };
        let entry = by_relation
            .entry(label.clone())
            .or_insert_with(|| ByRelation {
                relation: label,
                file: io.relation.as_ref().map(|r| r.file.clone()),
                ios: 0,
                bytes: 0,
            });
        entry.ios += 1;
        entry.bytes += length;
    }
    let mut in_flight_by_relation: Vec<ByRelation> = by_relation.into_values().collect();
    in_flight_by_relation.sort_by(|a, b| b.ios.cmp(&a.ios).then(a.relation.cmp(&b.relation)));
    let workers: Vec<&Map<String, Value>> = rows
        .activity
        .iter()
        .filter(|row| text(row, "backend_type") == Some("io worker"))
        .collect();
    let busy_pids: Vec<i64> = workers
        .iter()
        .filter(|row| text(row, "wait_event") != Some(IO_WORKER_IDLE_WAIT_EVENT))
        .filter_map(|row| row.get("pid").and_then(Value::as_i64))
        .collect();
    Report {
        server: facts.clone(),
        sampled_at: rows.sampled_at,
        interval_s,
        transaction_read_only: rows.transaction_read_only,
        pid_filter,
        in_flight,
        in_flight_by_backend: by_backend.into_values().collect(),
        in_flight_by_relation,
        io_workers: IoWorkers {
            count: workers.len() as u64,
            busy: busy_pids.len() as u64,
            busy_pids,
        },
        rates,
        pg_stat_io_totals: totals,
        pg_stat_io: rows.stat_io,
        pg_stat_activity: rows.activity,
    }
}

/// What one sample shows, on a screen or as lines.
pub struct ServerView {
    report: Report,
}

/// The columns of the in-flight table, in pg_aios's spelling.
const IN_FLIGHT_COLUMNS: [&str; 8] = [
    "pid",
    "backend_type",
    "state",
    "operation",
    "off",
    "length",
    "relation",
    "target_desc",
];

impl ServerView {
    /// The in-flight rows as text cells, in [`IN_FLIGHT_COLUMNS`] order.
    fn in_flight_cells(&self) -> Vec<[String; 8]> {
        self.report
            .in_flight
            .iter()
            .map(|io| {
                let column = |name: &str| match io.pg_aios.get(name) {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Null) | None => String::new(),
                    Some(other) => other.to_string(),
                };
                [
                    column("pid"),
                    io.backend_type.clone().unwrap_or_default(),
                    column("state"),
                    column("operation"),
                    column("off"),
                    column("length"),
                    io.relation
                        .as_ref()
                        .map(RelationRef::label)
                        .unwrap_or_default(),
                    column("target_desc"),
                ]
            })
            .collect()
    }

    /// The header line: server, version, time.
    fn header(&self) -> String {
        let r = &self.report;
        format!(
            "PostgreSQL {} at {} (io_method={}), sampled {}",
            r.server.version, r.server.target, r.server.io_method, r.sampled_at
        )
    }

    /// The one-snapshot text: header, I/O workers, the in-flight I/Os as a table.
    fn snapshot_lines(&self) -> Vec<String> {
        let r = &self.report;
        let mut lines = vec![self.header(), self.workers_text()];
        let cells = self.in_flight_cells();
        if cells.is_empty() {
            lines.push(match r.pid_filter {
                Some(pid) => format!("no I/O in flight for pid {pid}"),
                None => "no I/O in flight".to_string(),
            });
            return lines;
        }
        lines.push(format!("{} I/O(s) in flight:", cells.len()));
        let mut widths = IN_FLIGHT_COLUMNS.map(str::len);
        for row in &cells {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        let numeric = [true, false, false, false, true, true, false, false];
        let format_row = |row: &[String]| {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
                if i + 1 == row.len() {
                    line.push_str(cell);
                } else if numeric[i] {
                    line.push_str(&format!("{cell:>w$}  ", w = widths[i]));
                } else {
                    line.push_str(&format!("{cell:<w$}  ", w = widths[i]));
                }
            }
            line.trim_end().to_string()
        };
        let header: Vec<String> = IN_FLIGHT_COLUMNS.iter().map(|s| s.to_string()).collect();
        lines.push(format_row(&header));
        for row in &cells {
            lines.push(format_row(row));
        }
        lines
    }

    /// `io workers 3 (1 busy)`.
    fn workers_text(&self) -> String {
        let w = &self.report.io_workers;
        format!("io workers {} ({} busy)", w.count, w.busy)
    }

    /// The `total` rates, if this sample has rates.
    fn total_rates(&self) -> Option<&Rates> {
        self.report
            .rates
            .as_ref()
            .and_then(|rates| rates.iter().find(|r| r.backend_type == "total"))
    }
}

/// Seconds-resolution time of a server timestamp (`2026-11-23 15:52:01.123+00` → `15:52:01`).
fn clock_of(timestamp: &str) -> &str {
    timestamp
        .split(' ')
        .nth(1)
        .and_then(|t| t.get(..8))
        .unwrap_or(timestamp)
}

impl View for ServerView {
    fn draw(&self, frame: &mut ratatui::Frame) {
        use ratatui::layout::{Constraint, Layout};
        use ratatui::style::{Modifier, Style};
        use ratatui::widgets::{Block, Borders, Paragraph, Row, Table};

        let r = &self.report;
        let bold = Style::default().add_modifier(Modifier::BOLD);
        // Only the backend types that did I/O this interval (and the total): a server has
        // fifteen, most of them idle, and the screen is for what moves.
        let rates: Vec<&Rates> = r
            .rates
            .iter()
            .flatten()
            .filter(|rate| {
                rate.backend_type == "total"
                    || [
                        rate.reads_per_s,
                        rate.hits_per_s,
                        rate.writes_per_s,
                        rate.extends_per_s,
                        rate.evictions_per_s,
                    ]
                    .iter()
                    .any(|&v| v > 0.0)
            })
            .collect();
        let rates_height = (rates.len() as u16).max(1) + 3;
        let backends_height = (r.in_flight_by_backend.len() as u16).clamp(1, 8) + 3;
        let relations_height = (r.in_flight_by_relation.len() as u16).clamp(1, 8) + 3;
        let [head, rates_area, middle, ios_area] = Layout::vertical([
            Constraint::Length(2),
            Constraint::Length(rates_height),
            Constraint::Length(backends_height.max(relations_height)),
            Constraint::Min(3),
        ])
        .areas(frame.area());
        let [backends_area, relations_area] =
            Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)])
                .areas(middle);

        frame.render_widget(
            Paragraph::new(vec![
                self.header().into(),
                format!(
                    "{} · {} I/O(s) in flight · q quits",
                    self.workers_text(),
                    r.in_flight.len()
                )
                .into(),
            ]),
            head,
        );

        let number = |v: f64| format!("{v:.1}");
        let rate_rows: Vec<Row> = if rates.is_empty() {
            vec![Row::new(vec![
                "(rates from the second sample on)".to_string()
            ])]
        } else {
            rates
                .iter()
                .map(|rate| {
                    Row::new(vec![
                        rate.backend_type.clone(),
                        number(rate.reads_per_s),
                        number(rate.read_mb_per_s),
                        number(rate.hits_per_s),
                        number(rate.writes_per_s),
                        number(rate.write_mb_per_s),
                        number(rate.extends_per_s),
                        number(rate.read_time_ms_per_s),
                    ])
                })
                .collect()
        };
        frame.render_widget(
            Table::new(
                rate_rows,
                [
                    Constraint::Length(28),
                    Constraint::Length(10),
                    Constraint::Length(10),
                    Constraint::Length(10),
                    Constraint::Length(10),
                    Constraint::Length(10),
                    Constraint::Length(10),
                    Constraint::Length(14),
                ],
            )
            .header(
                Row::new(vec![
                    "backend_type",
                    "reads/s",
                    "read MB/s",
                    "hits/s",
                    "writes/s",
                    "write MB/s",
                    "extends/s",
                    "read ms/s",
                ])
                .style(bold),
            )
            .block(
                Block::default()
                    .borders(Borders::ALL)
                    .title(" pg_stat_io, per second "),
            ),
            rates_area,
        );

        let backend_rows: Vec<Row> = r
            .in_flight_by_backend
            .iter()
            .map(|b| {
                let states: Vec<String> =
                    b.states.iter().map(|(s, n)| format!("{s} {n}")).collect();
                Row::new(vec![
                    b.pid.to_string(),
                    b.backend_type.clone().unwrap_or_default(),
                    b.ios.to_string(),
                    (b.bytes / 1024).to_string(),
                    states.join(", "),
                ])
            })
            .collect();
        frame.render_widget(
            Table::new(
                backend_rows,
                [
                    Constraint::Length(8),
                    Constraint::Length(16),
                    Constraint::Length(4),
                    Constraint::Length(7),
                    Constraint::Min(10),
                ],
            )
            .header(Row::new(vec!["pid", "backend_type", "ios", "kB", "states"]).style(bold))
            .block(
                Block::default()
                    .borders(Borders::ALL)
                    .title(" in flight by backend "),
            ),
            backends_area,
        );

        let relation_rows: Vec<Row> = r
            .in_flight_by_relation
            .iter()
            .map(|rel| {
                Row::new(vec![
                    rel.relation.clone(),
                    rel.ios.to_string(),
                    (rel.bytes / 1024).to_string(),
                ])
            })
            .collect();
        frame.render_widget(
            Table::new(
                relation_rows,
                [
                    Constraint::Min(20),
                    Constraint::Length(4),
                    Constraint::Length(7),
                ],
            )
            .header(Row::new(vec!["relation", "ios", "kB"]).style(bold))
            .block(
                Block::default()
                    .borders(Borders::ALL)
                    .title(" in flight by relation "),
            ),
            relations_area,
        );

        let io_rows: Vec<Row> = self
            .in_flight_cells()
            .into_iter()
            .map(|cells| Row::new(cells.to_vec()))
            .collect();
        frame.render_widget(
            Table::new(
                io_rows,
                [
                    Constraint::Length(8),
                    Constraint::Length(16),
                    Constraint::Length(16),
                    Constraint::Length(9),
                    Constraint::Length(11),
                    Constraint::Length(7),
                    Constraint::Length(20),
                    Constraint::Min(20),
                ],
            )
            .header(Row::new(IN_FLIGHT_COLUMNS.to_vec()).style(bold))
            .block(Block::default().borders(Borders::ALL).title(" pg_aios ")),
            ios_area,
        );
    }

    fn plain_lines(&self) -> Vec<String> {
        let r = &self.report;
        let rates = match self.total_rates() {
            Some(t) => format!(
                "reads/s {:.0} read MB/s {:.1} hits/s {:.0} writes/s {:.0}",
                t.reads_per_s, t.read_mb_per_s, t.hits_per_s, t.writes_per_s
            ),
            None => "reads/s - read MB/s - hits/s - writes/s -".to_string(),
        };
        let backends: Vec<String> = r
            .in_flight_by_backend
            .iter()
            .map(|b| {
                format!(
                    "{} {} {}",
                    b.pid,
                    b.backend_type.as_deref().unwrap_or("?"),
                    b.ios
                )
            })
            .collect();
        let relations: Vec<String> = r
            .in_flight_by_relation
            .iter()
            .map(|rel| format!("{} {}", rel.relation, rel.ios))
            .collect();
        vec![format!(
            "{}  {rates}  in flight {} [{}]  by relation [{}]  {}",
            clock_of(&r.sampled_at),
            r.in_flight.len(),
            backends.join(", "),
            relations.join(", "),
            self.workers_text()
        )]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let config = parse_dsn("host=/tmp dbname=app", &env).unwrap();
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
        let config = parse_dsn("host=/tmp user=u options='-c work_mem=1MB'", &env).unwrap();
        assert!(config
            .get_options()
            .unwrap()
            .starts_with("-c work_mem=1MB -c default_transaction_read_only=on"));
        // connect_timeout in the DSN wins over the default.
        let config = parse_dsn("host=/tmp user=u connect_timeout=2", &env).unwrap();
        assert_eq!(config.get_connect_timeout(), Some(&Duration::from_secs(2)));
        // The target shown in messages never holds the password.
        let config = parse_dsn(
            "host=db.example port=6000 user=u password=secret dbname=x",
            &env,
        )
        .unwrap();
        let target = describe_target(&config);
        assert_eq!(target, "host=db.example port=6000 dbname=x user=u");
        let e = parse_dsn("host=/tmp bogus_key=1", &env).unwrap_err();
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
            let config = parse_dsn(dsn, &env).unwrap();
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
        let config = parse_dsn("host=db.example port=6000 dbname=app user=dave", &env).unwrap();
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
            serde_json::json!({"pid": 4242, "backend_type": "client backend", "wait_event": "AioIoCompletion"}),
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
            "15:52:01  reads/s 1234 read MB/s 9.6 hits/s 20 writes/s 0  in flight 1 [4242 client backend 1]  by relation [public.big 1]  io workers 2 (1 busy)"
        );
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
