//! `pageio aios`: the I/O in flight in pageio processes (and, with `--dsn`, in a running
//! PostgreSQL 18 server), in the columns of PostgreSQL's `pg_aios` view.

mod server;
// Used by the pageio-process view below and by the server view.
#[allow(dead_code)]
pub mod term;

use clap::Args;

use crate::CliResult;

/// Arguments of `pageio aios`.
#[derive(Debug, Args)]
pub struct AiosArgs {
    /// Only the pageio process with this pid
    #[arg(long, value_name = "PID")]
    pub pid: Option<i32>,
    /// Print one JSON document instead of text
    #[arg(long)]
    pub json: bool,
    /// Refresh every --interval seconds, like top: full screen on a terminal (q, Esc or
    /// Ctrl-C quits), one plain line per process per interval otherwise
    #[arg(long)]
    pub watch: bool,
    /// Seconds between two refreshes of --watch
    #[arg(long, value_name = "SECS", default_value_t = 1.0)]
    pub interval: f64,
    /// Stop --watch after this many refreshes
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
    /// A running PostgreSQL 18 server to watch instead of pageio processes
    /// (libpq connection string, e.g. 'host=/tmp dbname=postgres')
    ///
    /// CONNINFO is libpq key=value pairs: host (a name, an address, or a socket directory),
    /// port, user, password, dbname, connect_timeout (default 5 s), options,
    /// application_name; what it leaves out comes from PGHOST, PGPORT, PGUSER, PGPASSWORD,
    /// PGDATABASE and PGCONNECT_TIMEOUT. Plain TCP or Unix-socket connections only, no TLS
    /// (sslmode=require fails). Example: --dsn 'host=/var/run/postgresql port=5432
    /// user=monitor dbname=app'.
    ///
    /// Privilege: pg_aios is readable by superusers and members of pg_read_all_stats (GRANT
    /// pg_read_all_stats TO monitor). Read-only: only SELECTs, in read-only transactions,
    /// with statement_timeout 2 s and lock_timeout 0.5 s; no answer within the bound is an
    /// error, never a hang.
    ///
    /// One snapshot lists the I/Os in flight in pg_aios's columns: pid (the backend that
    /// owns the I/O, also when an io worker executes it), backend_type (pg_stat_activity),
    /// state (HANDED_OUT, DEFINED, STAGED, SUBMITTED, COMPLETED_IO, COMPLETED_SHARED,
    /// COMPLETED_LOCAL), operation (readv, writev), off and length (bytes into the file),
    /// relation (schema.name via pg_filenode_relation; a file of another database is shown
    /// by its path and relfilenode, saying so) and target_desc (the blocks and the file).
    ///
    /// With --count or --watch, per interval: reads/s, read MB/s, hits/s and writes/s per
    /// backend type from pg_stat_io deltas; in-flight I/Os by backend and by relation; the
    /// io workers and how many are busy (wait_event other than IoWorkerMain). --json prints
    /// one JSON document per sample (JSON lines): the raw pg_aios, pg_stat_io and
    /// pg_stat_activity rows with the resolved names and the rates.
    #[arg(long, value_name = "CONNINFO")]
    pub dsn: Option<String>,
}

/// Runs the subcommand.
pub fn run(args: AiosArgs) -> CliResult {
    if args.dsn.is_some() {
        return server::run(&args);
    }
    Err("pageio aios for pageio processes is not built yet".into())
}
