//! `pageio advise`: the host and instance configuration PostgreSQL 17/18/19 needs on this
//! machine, checked against what is there.
//!
//! ```text
//!   pageio advise [--pgdata DIR | --config FILE] [--pg-bin DIR] [--workload W]
//!                 [--max-connections N] [--pg-version 17|18|19] [--measure [--seconds N]]
//!                 [--json] [--sysroot DIR] [--dsn CONNINFO]
//! ```
//!
//! The library reads the facts (`pageio::host`, with the live probes run here: io_uring
//! setup, O_DIRECT on PGDATA, the clock's cost) and evaluates the rule table
//! (`pageio::advise::rules::RULES`), naming our flags where a message points at one
//! ([`names::Flags`]); this module parses flags, prints the report ([`report`]) or JSON,
//! and turns the worst status into the exit status. `--measure` goes through
//! [`measure_io`]: `pageio::measure::run` on the cluster (read-only), with progress on
//! stderr and SIGINT passed to its cancel flag; its [`Measurement`] becomes
//! `advise::MeasuredIo` (the settings `pageio::measure::recommend` chooses) and, with
//! `--json`, the report's `"measurement"` object. `--dsn` goes through [`live`]: the running
//! server's settings and statistics, read over a bounded read-only session, become the
//! library's `advise::live::LiveFacts`, whose items join the advice (and, with `--json`, the
//! report's `"live"` object); without files, the live settings stand for them.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use pageio::advise::{self, Facts, Inputs, MeasuredIo, Sources, Workload};
use pageio::host::{Probes, Sysroot};
use pageio::measure::{self, MeasureOptions, MeasureTarget, Measurement, Phase};

use crate::datadir::DataDirArgs;
use crate::CliResult;

mod live;
mod names;
mod report;

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

Exit status: 0 nothing to fix, 1 warnings, 2 something BAD (a setting that fails or risks
data as configured). advise also exits 2 when it could not run (a bad flag, an unreadable
--pgdata or --config), and then prints an error and no report.

Examples:
  pageio advise --pgdata /var/lib/postgresql/18/main --workload oltp
  pageio advise --pgdata /var/lib/postgresql/18/main --measure --seconds 30 --json
  pageio advise --max-connections 500 --pg-version 19 --json
  pageio advise --pgdata /var/lib/postgresql/18/main --dsn 'host=/var/run/postgresql user=postgres'";

/// Arguments of `pageio advise`.
#[derive(Debug, Args)]
#[command(after_help = AFTER_HELP)]
pub struct AdviseArgs {
    /// The cluster's data directory: its PG_VERSION, postgresql.conf + postgresql.auto.conf
    /// (with includes), checksums, size and storage are checked. -D DIR, --pgdata DIR, a
    /// directory argument, or (without --config) $PGDATA
    #[command(flatten)]
    location: DataDirArgs,
    /// The data directory `location` names, set by `run`.
    #[arg(skip)]
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
    /// Measure the cluster's disk instead of guessing effective_io_concurrency,
    /// maintenance_io_concurrency, random_page_cost, io_method and the worker count from the
    /// device type: random 8 kB reads at queue depths 1-64, sequential bandwidth, and the
    /// largest table read cold under each io_method. Read-only, on --pgdata (or the
    /// data_directory of --config); progress on stderr, Ctrl-C stops it
    #[arg(long)]
    measure: bool,
    /// How long --measure may run, in seconds [default: 30]
    #[arg(long, value_name = "N", requires = "measure", value_parser = clap::value_parser!(u64).range(1..=MAX_MEASURE_SECONDS))]
    seconds: Option<u64>,
    /// Print one JSON object: items, postgresql_conf, sysctl_conf, facts
    #[arg(long)]
    json: bool,
    /// Read /proc and /sys under DIR instead of / (a captured machine tree); live probes
    /// are skipped
    #[arg(long, value_name = "DIR")]
    sysroot: Option<PathBuf>,
    /// Save --measure's numbers to FILE (JSON, written to a temporary name and renamed;
    /// never inside a cluster, never over a file that is not a saved measurement), for
    /// --measurement in later runs
    #[arg(long, value_name = "FILE", requires = "measure")]
    save_measurement: Option<PathBuf>,
    /// Advise from a measurement saved with --save-measurement instead of measuring again:
    /// the same values as the run that measured
    #[arg(long, value_name = "FILE", conflicts_with = "measure")]
    measurement: Option<PathBuf>,
    /// A running server to read as well (libpq key=value pairs): its live settings (value,
    /// source, file:line, pending_restart) and run-time statistics — cache hit ratio,
    /// checkpoints, temp files, autovacuum, connections, unused and duplicate indexes,
    /// pg_stat_io. Read-only and bounded; with --pgdata, the files are compared with the
    /// live values
    #[arg(long, value_name = "CONNINFO")]
    dsn: Option<String>,
}

/// Why `--measure` could not run.
#[derive(Debug, thiserror::Error)]
pub enum MeasureError {
    /// Neither `--pgdata` nor a `--config` naming a `data_directory`.
    #[error("--measure reads a cluster's relation files: give --pgdata DIR (the data directory holding PG_VERSION), or --config FILE with a data_directory line{0}")]
    NoDataDirectory(String),
    /// The directory to measure is not a cluster's data directory.
    #[error("--measure: {} (data_directory, {location}) is not a PostgreSQL data directory (no PG_VERSION); fix data_directory or give --pgdata DIR", dir.display())]
    NotACluster {
        /// The directory.
        dir: PathBuf,
        /// Where its name came from (`conf:line`).
        location: String,
    },
    /// `--sysroot` describes another machine.
    #[error("--measure reads this machine's disk and cannot be combined with --sysroot (a captured tree of another machine); drop one of them")]
    WithSysroot,
    /// Ctrl-C.
    #[error("--measure cancelled (Ctrl-C) after {0:.1} s; nothing was written to the cluster; run again with fewer --seconds to finish sooner")]
    Cancelled(f64),
    /// The measurement failed.
    #[error("--measure on {}: {source}", dir.display())]
    Failed {
        /// The data directory measured.
        dir: PathBuf,
        /// The measurement's error (names the file and the fix).
        source: measure::MeasureError,
    },
}

/// The data directory `--measure` reads: `--pgdata`, else the `data_directory` of
/// `--config` (relative to the configuration file's directory, as an operator reading the
/// file would take it).
fn measure_target(pgdata: Option<&Path>, facts: &Facts) -> Result<PathBuf, MeasureError> {
    if let Some(dir) = pgdata {
        return Ok(dir.to_path_buf());
    }
    let Some(setting) = facts
        .instance
        .as_ref()
        .and_then(|i| i.setting("data_directory"))
    else {
        let why = match &facts.instance {
            Some(_) => " (the configuration sets none)".to_string(),
            None => String::new(),
        };
        return Err(MeasureError::NoDataDirectory(why));
    };
    let named = PathBuf::from(setting.value.trim_matches('\''));
    let dir = match setting.file.parent() {
        Some(base) if named.is_relative() => base.join(named),
        _ => named,
    };
    if !dir.join("PG_VERSION").is_file() {
        return Err(MeasureError::NotACluster {
            dir,
            location: setting.location(),
        });
    }
    Ok(dir)
}

/// Set by SIGINT while a measurement runs; [`measure_io`]'s watcher passes it on to the
/// measurement's cancel flag.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

/// How often the watcher looks for Ctrl-C: well under a human's notice, and the
/// measurement itself checks its cancel flag every few milliseconds.
const CANCEL_POLL: Duration = Duration::from_millis(20);

/// Resolution of the progress bar: the fraction of the time bound, in thousandths.
const PROGRESS_STEPS: u64 = 1000;

/// Progress on stderr: a bar on a terminal, one plain line per phase otherwise (a log or
/// a test captures them readably).
fn progress(budget: Duration) -> (measure::ProgressFn, Option<ProgressBar>) {
    if std::io::stderr().is_terminal() {
        let bar = ProgressBar::with_draw_target(Some(PROGRESS_STEPS), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("measuring {bar:30} {percent:>3}% of {prefix} s  {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar.set_prefix(budget.as_secs().to_string());
        let shown = bar.clone();
        let f: measure::ProgressFn = Arc::new(move |phase: Phase, fraction: f64| {
            shown.set_position((fraction * PROGRESS_STEPS as f64) as u64);
            shown.set_message(phase.to_string());
        });
        (f, Some(bar))
    } else {
        let f: measure::ProgressFn = Arc::new(move |phase: Phase, fraction: f64| {
            eprintln!("pageio: measure: [{:3.0}%] {phase}", fraction * 100.0);
        });
        (f, None)
    }
}

/// Measures the cluster in `dir` for at most `budget` (read-only, `measure::run` on its
/// largest relation files and heap), with progress on stderr and Ctrl-C cancelling: the one
/// entry point of the I/O measurement behind `--measure`.
pub fn measure_io(
    dir: &Path,
    budget: Duration,
    effective_cpus: Option<usize>,
) -> Result<Measurement, MeasureError> {
    let mut options = MeasureOptions::new(MeasureTarget::DataDirectory(dir.to_path_buf()));
    options.seconds = budget.as_secs_f64();
    options.effective_cpus = effective_cpus;
    let cancel = Arc::new(AtomicBool::new(false));
    options.cancel = Some(Arc::clone(&cancel));
    let (report, bar) = progress(budget);
    options.progress = Some(report);

    INTERRUPTED.store(false, Ordering::Relaxed);
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_sigint as *const () as libc::sighandler_t);
    }
    // A signal handler may do no more than store to an atomic; this thread passes Ctrl-C on
    // to the measurement's cancel flag, and ends when the measurement does.
    let done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (cancel, done) = (Arc::clone(&cancel), Arc::clone(&done));
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                if INTERRUPTED.load(Ordering::Relaxed) {
                    cancel.store(true, Ordering::Relaxed);
                    return;
                }
                std::thread::sleep(CANCEL_POLL);
            }
        })
    };
    let started = Instant::now();
    let result = measure::run(&options);
    done.store(true, Ordering::Relaxed);
    let _ = watcher.join();
    // SAFETY: restoring the default action; Ctrl-C after the measurement ends the process.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_DFL);
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    match result {
        Ok(m) => {
            eprintln!(
                "pageio: measure: {} in {:.1} s of {} s",
                dir.display(),
                m.elapsed_seconds,
                budget.as_secs()
            );
            Ok(m)
        }
        Err(measure::MeasureError::Cancelled) => {
            Err(MeasureError::Cancelled(started.elapsed().as_secs_f64()))
        }
        Err(source) => Err(MeasureError::Failed {
            dir: dir.to_path_buf(),
            source,
        }),
    }
}

#[derive(serde::Serialize)]
struct JsonReport<'a> {
    #[serde(flatten)]
    advice: &'a advise::Advice,
    /// `--measure`'s numbers, as `measure::run` reported them.
    #[serde(skip_serializing_if = "Option::is_none")]
    measurement: Option<&'a Measurement>,
    facts: &'a Facts,
    /// `--dsn`'s live settings and statistics, as read.
    #[serde(skip_serializing_if = "Option::is_none")]
    live: Option<&'a pageio::advise::live::LiveFacts>,
}

fn check_dir(flag: &str, path: &Path, what: &str) -> Result<(), Box<dyn std::error::Error>> {
    if let Some(problem) = pageio::storage::directory_problem(path) {
        return Err(format!("{flag} {}: the path {problem}; give {what}", path.display()).into());
    }
    Ok(())
}

/// Runs the subcommand.
pub fn run(mut args: AdviseArgs) -> CliResult {
    // $PGDATA counts only when no --config names the configuration instead.
    if let Some(dir) = args.location.checked(args.config.is_none())? {
        if !dir.path.join("PG_VERSION").is_file() {
            return Err(format!(
                "{} {}: no PG_VERSION; give the data directory of a PostgreSQL cluster (initdb makes one), or --config FILE for a configuration file alone",
                dir.label(),
                dir.path.display()
            )
            .into());
        }
        args.pgdata = Some(dir.path);
    }
    if let Some(file) = &args.config {
        let problem = match std::fs::metadata(file) {
            Ok(m) if m.is_file() => None,
            Ok(m) => Some(format!(
                "is {}, not a regular file",
                pageio::storage::file_type_name(m.file_type())
            )),
            Err(_) => pageio::storage::directory_problem(file),
        };
        if let Some(problem) = problem {
            return Err(format!(
                "--config {}: the path {problem}; give a postgresql.conf",
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
    if args.measure && args.sysroot.is_some() {
        return Err(MeasureError::WithSysroot.into());
    }
    let sources = Sources {
        pgdata: args.pgdata.as_deref(),
        config: args.config.as_deref(),
        pg_bin: args.pg_bin.as_deref(),
        storage_path: None,
    };
    let live = match &args.dsn {
        Some(dsn) => Some(live::read(dsn)?),
        None => None,
    };
    let mut facts = match &args.sysroot {
        Some(root) => Facts::read(&Sysroot::new(root), &sources, Probes::default()),
        None => Facts::read_live(&sources),
    };
    if let (Some(live), None) = (&live, &facts.instance) {
        // No files given: the server's own settings stand for them.
        facts.instance = Some(pageio::advise::live::instance_from_live(live));
    }
    if let Some(file) = &args.save_measurement {
        measure::saved::check_writable(file)?;
    }
    let measurement = if args.measure {
        let dir = measure_target(args.pgdata.as_deref(), &facts)?;
        let budget = Duration::from_secs(args.seconds.unwrap_or(advise::DEFAULT_MEASURE.as_secs()));
        let cpus = facts
            .host
            .resources
            .effective_cpus
            .as_ref()
            .map(|e| e.value as usize);
        let m = measure_io(&dir, budget, cpus)?;
        if let Some(file) = &args.save_measurement {
            measure::saved::save(file, &m)?;
            eprintln!("pageio: measure: saved to {}", file.display());
        }
        Some(m)
    } else if let Some(file) = &args.measurement {
        Some(measure::saved::load(file)?)
    } else {
        None
    };
    let measured = measurement.as_ref().map(MeasuredIo::from_measurement);
    let inputs = Inputs {
        workload: args.workload.into(),
        max_connections: args.max_connections,
        pg_version: args.pg_version,
        measured,
    };
    let mut advice = advise::advise_with_names(&facts, &inputs, &names::Flags);
    if let Some(live) = &live {
        let mut items = advise::live::live_items(
            live,
            &advise::live::LiveInputs {
                workload: inputs.workload,
            },
        );
        if let Some(instance) = facts
            .instance
            .as_ref()
            .filter(|i| !i.config_files.is_empty())
        {
            items.insert(0, advise::live::file_differences(&instance.settings, live));
        }
        advice.add_live(items);
    }
    if args.json {
        let report = JsonReport {
            advice: &advice,
            measurement: measurement.as_ref(),
            facts: &facts,
            live: live.as_ref(),
        };
        crate::write_stdout(&format!("{}\n", serde_json::to_string_pretty(&report)?))?;
    } else {
        let mut text = report::report(&advice);
        if let Some(live) = &live {
            text.insert_str(
                0,
                &format!(
                    "live: PostgreSQL {} at {} (database {}, role {})\n",
                    live.server_version, live.target, live.database, live.role
                ),
            );
        }
        crate::write_stdout(&text)?;
    }
    Ok(advice.exit_status())
}
