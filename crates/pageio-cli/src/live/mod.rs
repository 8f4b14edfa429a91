//! A running PostgreSQL server, reached over a client connection (`--dsn`): what every
//! command that talks to one shares.
//!
//! A command that reads a live server must never become the problem on a server that already
//! has one, and must never hang the terminal of the DBA who ran it. So every connection:
//!
//! - is **read-only**: the session starts with `default_transaction_read_only=on`, set in the
//!   startup packet together with the timeouts below, so not even a `SET` is sent;
//! - **gives up quickly**: `statement_timeout` (per command, [`SessionLimits`]),
//!   `lock_timeout` ([`LOCK_TIMEOUT_MS`]: a catalog lock held by a long DDL makes a query fail
//!   fast instead of queueing behind it) and `idle_in_transaction_session_timeout`
//!   ([`IDLE_IN_TRANSACTION_TIMEOUT_MS`]: a stopped client never holds a snapshot open);
//! - is **bounded on this side too**: the client library's `connect_timeout` covers only the
//!   TCP connect, not a server that accepts and then says nothing, and no server-side timeout
//!   helps when the network drops packets. So the client lives on its own thread
//!   ([`Session`]) and the calling thread waits for every answer with a bound; when it passes
//!   the command fails with an error naming the server, and the stuck thread dies with the
//!   process.
//!
//! ```text
//!   calling thread                          connection thread (owns the postgres::Client)
//!   ──────────────                          ─────────────────────────────────────────────
//!   parse --dsn, fill libpq's defaults
//!   Session::connect ─────────────────────► connect (TCP and startup exchange)
//!   wait ≤ connect_timeout + 1 s ◄───────── connected, or a typed error
//!   session.run(doing, bound, job) ────────► job(&mut client)
//!   wait ≤ bound                 ◄───────── the job's answer
//! ```
//!
//! `pageio advise --dsn` reads through a [`Session`]; `pageio aios --dsn` keeps its own
//! sampling thread (it predates [`Session`]) on the same connection string and bounds.
//!
//! ## Layout
//!
//! ```text
//!  mod.rs         the error type, the session limits, Session (a bounded connection thread)
//!  connection.rs  --dsn and libpq's defaults (environment, password file), the connect bound
//! ```

use std::any::Any;
use std::sync::mpsc;
use std::time::Duration;

use postgres::{Client, Config, NoTls};

mod connection;

pub(crate) use connection::*;

/// Connect timeout when `--dsn` gives none: a live server on a LAN answers in
/// milliseconds, and a DBA waiting for a tool should hear within seconds that the address
/// is wrong.
pub(crate) const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// `lock_timeout` of every session, in milliseconds: reading a catalog (pg_class, to name a
/// relation) may meet a lock held by a running `VACUUM FULL` or DDL; a tool must not queue
/// behind it, and so must not make the DDL's other waiters queue behind the tool.
pub(crate) const LOCK_TIMEOUT_MS: u64 = 500;

/// `idle_in_transaction_session_timeout` of every session, in milliseconds: the tools
/// commit each transaction at once; if the process is stopped mid-transaction (SIGSTOP, a
/// debugger) the server ends the session instead of keeping a snapshot open.
pub(crate) const IDLE_IN_TRANSACTION_TIMEOUT_MS: u64 = 10_000;

/// Slack on top of the server-side timeouts for the round trips themselves.
pub(crate) const ROUND_TRIP_SLACK: Duration = Duration::from_secs(2);

/// What a command sets for its session, in the startup packet.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SessionLimits {
    /// `application_name`, so a DBA sees in `pg_stat_activity` who is connected.
    pub(crate) application_name: &'static str,
    /// `statement_timeout`, in milliseconds.
    pub(crate) statement_timeout_ms: u64,
}

impl SessionLimits {
    /// The most the calling thread waits for a job of `statements` statements: each may
    /// take the statement timeout, plus the round trips.
    pub(crate) fn bound_for(&self, statements: u32) -> Duration {
        Duration::from_millis(self.statement_timeout_ms).saturating_mul(statements.max(1))
            + ROUND_TRIP_SLACK
    }
}

/// Why a command could not read the server.
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
    /// The server is too old for what the command reads.
    #[error("PostgreSQL at {target} is version {version} (server_version_num {version_num}): {needs}; point --dsn at a PostgreSQL 18 server")]
    Version {
        /// Host, port, database and user.
        target: String,
        /// `server_version`.
        version: String,
        /// `server_version_num`.
        version_num: i32,
        /// What needs a newer server (`the pg_aios view exists from PostgreSQL 18 on`).
        needs: &'static str,
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

/// The fix named when a wait for the server passes its bound.
pub(crate) fn timeout_fix(doing: &str) -> &'static str {
    if doing == "connecting" {
        "check the host and port, or give a slow server longer with connect_timeout=SECS in --dsn"
    } else {
        "check the server's load (pg_stat_activity, the host's CPU and disks) and the network, then run again"
    }
}

/// One job for the connection thread: runs on the client, answers with its result boxed.
type Job = Box<dyn FnOnce(&mut Client) -> Box<dyn Any + Send> + Send>;

/// A connection on its own thread; the caller waits for every answer with a bound (see the
/// module docs). After a wait has timed out, the thread may still be busy with that job, so
/// the session refuses further jobs rather than pairing a late answer with a new question.
pub(crate) struct Session {
    jobs: mpsc::Sender<Job>,
    answers: mpsc::Receiver<Box<dyn Any + Send>>,
    /// Signalled by the connection thread once the client is closed.
    closed: mpsc::Receiver<()>,
    target: String,
    broken: bool,
}

impl Session {
    /// Connects to the server `config` names on a new thread, waiting at most the
    /// connect bound ([`connect_bound`]).
    pub(crate) fn connect(config: Config) -> Result<Session, ServerError> {
        let target = describe_target(&config);
        let bound = connect_bound(&config);
        let (jobs_tx, jobs_rx) = mpsc::channel::<Job>();
        let (answers_tx, answers_rx) = mpsc::channel::<Box<dyn Any + Send>>();
        let (connected_tx, connected_rx) = mpsc::channel::<Result<(), ServerError>>();
        let (closed_tx, closed_rx) = mpsc::channel::<()>();
        let thread_target = target.clone();
        std::thread::Builder::new()
            .name("pg-session".into())
            .spawn(move || {
                let mut client = match config.connect(NoTls) {
                    Ok(client) => client,
                    Err(e) => {
                        let _ = connected_tx.send(Err(connect_error(&e, &config, thread_target)));
                        return;
                    }
                };
                if connected_tx.send(Ok(())).is_err() {
                    return;
                }
                while let Ok(job) = jobs_rx.recv() {
                    if answers_tx.send(job(&mut client)).is_err() {
                        return;
                    }
                }
                // The caller is done: end the session politely (a Terminate message), so the
                // server logs no connection reset.
                let _ = client.close();
                let _ = closed_tx.send(());
            })
            .map_err(|e| ServerError::Connect {
                target: target.clone(),
                cause: format!("cannot start the connection thread: {e}"),
            })?;
        match connected_rx.recv_timeout(bound) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                return Err(ServerError::Timeout {
                    target,
                    doing: "connecting",
                    bound_secs: bound.as_secs_f64().ceil() as u64,
                    fix: timeout_fix("connecting"),
                })
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(ServerError::Connect {
                    target,
                    cause: "the connection thread ended without an answer".into(),
                })
            }
        }
        Ok(Session {
            jobs: jobs_tx,
            answers: answers_rx,
            closed: closed_rx,
            target,
            broken: false,
        })
    }

    /// Ends the session: the connection thread closes the client (the server sees a clean
    /// Terminate, not a reset) and the caller waits for that at most `bound`.
    pub(crate) fn close(self, bound: Duration) {
        let Session { jobs, closed, .. } = self;
        drop(jobs);
        let _ = closed.recv_timeout(bound);
    }

    /// Host, port, database and user, for messages (never the password).
    pub(crate) fn target(&self) -> &str {
        &self.target
    }

    /// Runs `job` on the connection and waits at most `bound` for its result. `doing` names
    /// the work in errors ("reading pg_settings").
    pub(crate) fn run<T, F>(
        &mut self,
        doing: &'static str,
        bound: Duration,
        job: F,
    ) -> Result<T, ServerError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Client) -> Result<T, postgres::Error> + Send + 'static,
    {
        let gone = |target: &str| ServerError::Query {
            target: target.to_string(),
            doing,
            cause: "the connection was lost or an earlier request timed out".into(),
        };
        if self.broken {
            return Err(gone(&self.target));
        }
        let boxed: Job = Box::new(move |client| Box::new(job(client)));
        if self.jobs.send(boxed).is_err() {
            self.broken = true;
            return Err(gone(&self.target));
        }
        match self.answers.recv_timeout(bound) {
            Ok(answer) => match answer.downcast::<Result<T, postgres::Error>>() {
                Ok(result) => (*result).map_err(|e| ServerError::Query {
                    target: self.target.clone(),
                    doing,
                    cause: error_text(&e),
                }),
                Err(_) => {
                    self.broken = true;
                    Err(gone(&self.target))
                }
            },
            Err(mpsc::RecvTimeoutError::Timeout) => {
                self.broken = true;
                Err(ServerError::Timeout {
                    target: self.target.clone(),
                    doing,
                    bound_secs: bound.as_secs_f64().ceil() as u64,
                    fix: timeout_fix(doing),
                })
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                self.broken = true;
                Err(gone(&self.target))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    const LIMITS: SessionLimits = SessionLimits {
        application_name: "pageio test",
        statement_timeout_ms: 1_000,
    };

    /// A server that accepts the TCP connection and then says nothing: the connect fails
    /// within `connect_timeout` + the slack, naming the server, never hangs.
    #[test]
    fn a_silent_server_times_out_within_the_bound() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let config = parse_dsn(
            &format!("host=127.0.0.1 port={port} user=u dbname=d connect_timeout=1"),
            &|_| None,
            LIMITS,
        )
        .unwrap();
        let started = Instant::now();
        let e = Session::connect(config)
            .err()
            .expect("a silent server connects");
        let waited = started.elapsed();
        assert!(waited < Duration::from_secs(5), "waited {waited:?}");
        assert!(
            matches!(
                e,
                ServerError::Timeout {
                    doing: "connecting",
                    ..
                }
            ),
            "{e}"
        );
        assert!(
            e.to_string()
                .starts_with(&format!("PostgreSQL at host=127.0.0.1 port={port} dbname=d user=u did not answer within 2 s while connecting")),
            "{e}"
        );
        drop(listener);
    }

    /// A port nobody listens on: a connect error naming the server, at once.
    #[test]
    fn a_refused_connection_names_the_server() {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let config = parse_dsn(
            &format!("host=127.0.0.1 port={port} user=u dbname=d"),
            &|_| None,
            LIMITS,
        )
        .unwrap();
        let e = Session::connect(config).err().expect("nobody listens");
        assert!(matches!(e, ServerError::Connect { .. }), "{e}");
        assert!(
            e.to_string().starts_with(&format!(
                "cannot connect to PostgreSQL at host=127.0.0.1 port={port} dbname=d user=u: "
            )),
            "{e}"
        );
    }

    #[test]
    fn limits_bound_every_statement_plus_the_round_trips() {
        assert_eq!(
            LIMITS.bound_for(3),
            Duration::from_secs(3) + ROUND_TRIP_SLACK
        );
        assert_eq!(
            LIMITS.bound_for(0),
            Duration::from_secs(1) + ROUND_TRIP_SLACK
        );
        let config = parse_dsn("host=/tmp user=u", &|_| None, LIMITS).unwrap();
        assert_eq!(config.get_application_name(), Some("pageio test"));
        assert!(config
            .get_options()
            .unwrap()
            .contains("-c default_transaction_read_only=on -c statement_timeout=1000 "));
    }
}
