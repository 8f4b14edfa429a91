//! `pageio advise`: the host and instance configuration PostgreSQL 17/18/19 needs on this
//! machine, checked against what is there.
//!
//! ```text
//!   pageio advise [--pgdata DIR | --config FILE] [--pg-bin DIR] [--workload W]
//!                 [--max-connections N] [--pg-version 17|18|19] [--measure [--seconds N]]
//!                 [--json] [--sysroot DIR]
//! ```
//!
//! The library reads the facts (`pageio::host`, with the live probes run here: io_uring
//! setup, O_DIRECT on PGDATA, the clock's cost) and evaluates the rule table
//! (`pageio::advise::rules::RULES`); this module parses flags, prints the report or JSON,
//! and turns the worst status into the exit status. `--measure` goes through
//! [`measure_io`], the one place the I/O measurement plugs in.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, ValueEnum};
use pageio::advise::{self, Facts, Inputs, MeasuredIo, Sources, Workload};
use pageio::host::{Probes, Sysroot};

use crate::CliResult;

/// Longest `--measure` run accepted: the measurement reads the disk for this long, and an
/// advice run should never take longer than a short benchmark.
pub const MAX_MEASURE_SECONDS: u64 = 600;

/// Workloads, as pgtune names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WorkloadArg {
    /// Many short transactions (300 connections by default)
    Oltp,
    /// A web application (200 connections)
    Web,
    /// A data warehouse: few connections, big sorts (40)
    Dw,
    /// A mix (100)
    Mixed,
    /// A developer machine running other programs too (20)
    Desktop,
}

impl From<WorkloadArg> for Workload {
    fn from(w: WorkloadArg) -> Workload {
        match w {
            WorkloadArg::Oltp => Workload::Oltp,
            WorkloadArg::Web => Workload::Web,
            WorkloadArg::Dw => Workload::Dw,
            WorkloadArg::Mixed => Workload::Mixed,
            WorkloadArg::Desktop => Workload::Desktop,
        }
    }
}

const AFTER_HELP: &str = "\
Every item prints OK, WARN or BAD, the value found and where (file, sysctl, conf file:line),
the recommendation, why, and the exact fix; then a postgresql.conf snippet (include it with
include 'pageio.conf') and a /etc/sysctl.d/ snippet, both ready to apply.

Sizes come from the effective RAM and CPUs: a cgroup's memory.max / cpu.max / cpuset when
the process runs in a container, and the report names the limit that applied.

Exit status: 0 nothing to fix, 1 warnings, 3 something BAD (a setting that fails or risks
data as configured), 2 advise could not run (a bad flag, an unreadable --pgdata or --config).

Examples:
  pageio advise --pgdata /var/lib/postgresql/18/main --workload oltp
  pageio advise --max-connections 500 --pg-version 19 --json";

/// Arguments of `pageio advise`.
#[derive(Debug, Args)]
#[command(after_help = AFTER_HELP)]
pub struct AdviseArgs {
    /// The cluster's data directory: its PG_VERSION, postgresql.conf + postgresql.auto.conf
    /// (with includes), checksums, size and storage are checked
    #[arg(long, value_name = "DIR")]
    pgdata: Option<PathBuf>,
    /// A postgresql.conf to check instead of (or without) the data directory's
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Where the PostgreSQL binaries are (to check they were built with liburing); default:
    /// PATH
    #[arg(long, value_name = "DIR")]
    pg_bin: Option<PathBuf>,
    /// What the server mostly does
    #[arg(long, value_enum, default_value = "mixed")]
    workload: WorkloadArg,
    /// Connections to size work_mem and the process limits for (default: the
    /// configuration's max_connections, else the workload's)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=262_143))]
    max_connections: Option<u32>,
    /// The PostgreSQL major version to advise for (default: PG_VERSION of --pgdata, else 18)
    #[arg(long, value_name = "17|18|19", value_parser = clap::value_parser!(u32).range(17..=19))]
    pg_version: Option<u32>,
    /// Measure the disk (random reads at QD1 and QD32, sequential bandwidth, each
    /// io_method) instead of guessing effective_io_concurrency, random_page_cost, io_method
    /// and the worker count from the device type
    #[arg(long)]
    measure: bool,
    /// How long --measure may run, in seconds
    #[arg(long, value_name = "N", requires = "measure", value_parser = clap::value_parser!(u64).range(1..=MAX_MEASURE_SECONDS))]
    seconds: Option<u64>,
    /// Print one JSON object: items, postgresql_conf, sysctl_conf, facts
    #[arg(long)]
    json: bool,
    /// Read /proc and /sys under DIR instead of / (a captured machine tree); live probes
    /// are skipped
    #[arg(long, value_name = "DIR")]
    sysroot: Option<PathBuf>,
}

/// Why `--measure` could not run.
#[derive(Debug, thiserror::Error)]
pub enum MeasureError {
    /// This build has no measurement.
    #[error("--measure is not available in this build; run without --measure, and the I/O concurrency, page costs and method are guessed from the device type")]
    Unavailable,
}

/// Measures PGDATA's storage for at most `budget`: the one entry point of the I/O
/// measurement behind `--measure`.
pub fn measure_io(_pgdata: Option<&Path>, _budget: Duration) -> Result<MeasuredIo, MeasureError> {
    Err(MeasureError::Unavailable)
}

#[derive(serde::Serialize)]
struct JsonReport<'a> {
    #[serde(flatten)]
    advice: &'a advise::Advice,
    facts: &'a Facts,
}

fn check_dir(flag: &str, path: &Path, what: &str) -> Result<(), Box<dyn std::error::Error>> {
    if !path.is_dir() {
        return Err(format!("{flag} {}: not a directory; give {what}", path.display()).into());
    }
    Ok(())
}

/// Runs the subcommand.
pub fn run(args: AdviseArgs) -> CliResult {
    if let Some(dir) = &args.pgdata {
        check_dir(
            "--pgdata",
            dir,
            "the data directory of a PostgreSQL cluster (the one holding PG_VERSION)",
        )?;
        if !dir.join("PG_VERSION").is_file() {
            return Err(format!(
                "--pgdata {}: no PG_VERSION; give the data directory of a PostgreSQL cluster (initdb makes one), or --config FILE for a configuration file alone",
                dir.display()
            )
            .into());
        }
    }
    if let Some(file) = &args.config {
        if !file.is_file() {
            return Err(format!(
                "--config {}: not a file; give a postgresql.conf",
                file.display()
            )
            .into());
        }
    }
    if let Some(dir) = &args.pg_bin {
        check_dir(
            "--pg-bin",
            dir,
            "the directory holding the postgres binary (pg_config --bindir)",
        )?;
    }
    if let Some(dir) = &args.sysroot {
        check_dir(
            "--sysroot",
            dir,
            "a directory standing for / (a captured /proc and /sys tree)",
        )?;
    }
    let measured = if args.measure {
        let budget = Duration::from_secs(args.seconds.unwrap_or(advise::DEFAULT_MEASURE.as_secs()));
        Some(measure_io(args.pgdata.as_deref(), budget)?)
    } else {
        None
    };
    let sources = Sources {
        pgdata: args.pgdata.as_deref(),
        config: args.config.as_deref(),
        pg_bin: args.pg_bin.as_deref(),
        storage_path: None,
    };
    let facts = match &args.sysroot {
        Some(root) => Facts::read(&Sysroot::new(root), &sources, Probes::default()),
        None => Facts::read_live(&sources),
    };
    let inputs = Inputs {
        workload: args.workload.into(),
        max_connections: args.max_connections,
        pg_version: args.pg_version,
        measured,
    };
    let advice = advise::advise(&facts, &inputs);
    if args.json {
        let report = JsonReport {
            advice: &advice,
            facts: &facts,
        };
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", advise::render::report(&advice));
    }
    Ok(advice.exit_status())
}
