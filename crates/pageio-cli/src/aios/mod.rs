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
