//! `pageio checksums PGDATA --check | --enable | --disable`: `pg_checksums` with
//! asynchronous reads and writes and the checksum work on every core.
//!
//! The modes, options, messages, output and exit statuses are PostgreSQL 18's
//! `pg_checksums`, and so are the refusals: a cluster that is running or was not shut down
//! cleanly ("cluster must be shut down"), `--enable` when checksums are on, `--disable` when
//! they are off, `--filenode` outside `--check`.
//!
//! ```text
//!   --check    = pageio verify (the same code, the same output)
//!   --enable   pg_control ─► refuse? ─► walk ─► rewrite_checksums (reads + write stream,
//!              `jobs` threads) ─► summary ─► "syncing data directory" (fsync | syncfs,
//!              unless --no-sync) ─► "updating control file": data_checksum_version = 1,
//!              CRC, write, fsync ─► "Checksums enabled in cluster"
//!   --disable  pg_control ─► refuse? ─► sync ─► data_checksum_version = 0 ─► "Checksums
//!              disabled in cluster" (no page is touched)
//! ```
//!
//! Exit status, as `pg_checksums`: 0 on success; 1 when the cluster is refused or a read,
//! write or sync fails — a failed run leaves `pg_control` as it was, so the cluster starts
//! with checksums still off (see `pageio::verify::enable` for why that is safe) — and on a
//! usage error (`--jobs 0`, more jobs than the descriptor limit holds, `--filenode` outside
//! `--check`). Only what `pg_checksums` has no counterpart for (a bad `--io-method`, two
//! modes at once) exits 2.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{ArgGroup, Args};
use pageio::storage::nofile_soft_limit;
use pageio::verify::enable::PG_DATA_CHECKSUM_VERSION;
use pageio::verify::{
    enable_checksums, fit_jobs_to_descriptors, sync_data_directory, verify_config, walk_cluster,
    write_control_file, ClusterFile, ControlFile, EnableObserver, EnableStep, EnableTotals,
    SyncMethod, VerifyError, RINGS_PER_ENABLE_JOB,
};
use pageio::Aio;

use crate::datadir::DataDirArgs;
use crate::settings::SettingsArgs;
use crate::verify::VerifyArgs;
use crate::CliResult;

/// Arguments of `pageio checksums`.
#[derive(Debug, Args)]
#[command(
    group(ArgGroup::new("mode").args(["check", "enable", "disable"]).multiple(false)),
    long_about = "Check, enable or disable data checksums in a stopped PostgreSQL 18 cluster, \
like pg_checksums, with asynchronous reads and writes and the checksum work spread over all \
cores.\n\n\
The cluster must be cleanly shut down. --check verifies every page (as `pageio verify`). \
--enable reads every page and rewrites those whose checksum differs (new, all-zero pages are \
skipped), syncs the data files, and only then marks checksums on in pg_control: a run that is \
interrupted or fails leaves a cluster that starts with checksums off and every row intact; run \
--enable again to finish. --disable only changes pg_control.\n\n\
Output and exit status are pg_checksums': the summary on stdout (\"Checksum operation \
completed\", \"Files scanned\", \"Blocks scanned\", \"Files written\", \"Blocks written\", \
\"Checksums enabled in cluster\"), errors on stderr, exit 1 on a refusal or failure.",
    after_help = "Examples:\n  \
pageio checksums --check /var/lib/postgresql/18/main\n  \
pageio checksums --enable -P -D /srv/pgdata          # progress with MB/s and ETA\n  \
pageio checksums --enable --sync-method syncfs /srv/pgdata\n  \
pageio checksums --disable /srv/pgdata               # only pg_control changes\n  \
pageio checksums --enable --json /srv/pgdata | jq .blocks_written\n\n\
Before pg_upgrade to PostgreSQL 18 (whose initdb enables checksums by default), stop the old \
cluster cleanly and run --enable on it.\n\n\
--enable keeps two 8 MB windows per thread read ahead while the current one is checksummed \
and written (32 MB per thread); each thread's write stream keeps up to \
--maintenance-io-concurrency writes in flight (PostgreSQL's maintenance_io_concurrency, \
default 16), combined up to --io-combine-limit. Buffered I/O (the default, --direct-io off) is the faster \
choice here: the page cache absorbs the writes and the final sync is short, while \
--direct-io on waits for every write on the device (measured in docs/BENCHMARKS.md)."
)]
pub struct ChecksumsArgs {
    #[command(flatten)]
    location: DataDirArgs,
    /// Check data checksums (the default mode)
    #[arg(short = 'c', long = "check")]
    check: bool,
    /// Enable data checksums: rewrite every page whose checksum differs, then pg_control
    #[arg(short = 'e', long = "enable")]
    enable: bool,
    /// Disable data checksums (only pg_control changes)
    #[arg(short = 'd', long = "disable")]
    disable: bool,
    /// Check only the relation with this filenode (--check only, as pg_checksums)
    #[arg(short = 'f', long = "filenode", value_name = "FILENODE")]
    filenode: Option<u32>,
    /// Show progress on stderr: MB done, MB/s, ETA
    #[arg(short = 'P', long = "progress")]
    progress: bool,
    /// Do not wait for the changes to be written safely to disk (faster; a crash of the
    /// operating system may then leave the data directory corrupt)
    #[arg(short = 'N', long = "no-sync")]
    no_sync: bool,
    /// How to sync: fsync each file, or syncfs each file system
    #[arg(long = "sync-method", value_name = "fsync|syncfs", default_value = "fsync",
          value_parser = ["fsync", "syncfs"])]
    sync_method: String,
    /// List every file processed on stderr
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,
    /// Print one JSON object on stdout instead of the text summary (on a fatal error:
    /// {"error": {"kind", "message", "hint"}})
    #[arg(long)]
    json: bool,
    /// Threads checksumming and writing, each with a reading thread of its own [default: one per CPU]
    #[arg(short = 'j', long, value_name = "N")]
    jobs: Option<usize>,
    #[command(flatten)]
    online: crate::verify::OnlineArgs,
    #[command(flatten)]
    settings: SettingsArgs,
}

/// Runs the subcommand.
pub fn run(args: ChecksumsArgs) -> CliResult {
    if !args.enable && !args.disable {
        return crate::verify::run(VerifyArgs {
            location: args.location,
            check: true,
            filenode: args.filenode,
            progress: args.progress,
            verbose: args.verbose,
            json: args.json,
            jobs: args.jobs,
            mapped_reads: "on".into(),
            online: args.online,
            settings: args.settings,
        });
    }
    let json = args.json;
    match change(&args) {
        Ok(status) => Ok(status),
        Err(Failure::Cluster(e)) => {
            if json {
                // Written, not printed: a closed stdout keeps the error's exit status.
                let _ = writeln!(
                    std::io::stdout(),
                    "{}",
                    serde_json::json!({"error": {"kind": e.kind(), "message": e.to_string(), "hint": e.hint()}})
                );
            }
            eprintln!("pageio: error: {e}");
            if let Some(hint) = e.hint() {
                eprintln!("pageio: hint: {hint}");
            }
            Ok(1)
        }
        Err(Failure::Usage(message, hint)) => {
            // pg_checksums' own usage errors exit 1 with a hint line.
            if json {
                let _ = writeln!(
                    std::io::stdout(),
                    "{}",
                    serde_json::json!({"error": {"kind": "usage", "message": message, "hint": hint}})
                );
            }
            eprintln!("pageio: error: {message}");
            eprintln!("pageio: hint: {hint}");
            Ok(1)
        }
        Err(Failure::Setup(e)) => Err(e),
    }
}

/// pg_checksums' hint after a usage error.
fn try_help() -> String {
    "Try \"pageio checksums --help\" for more information.".into()
}

enum Failure {
    /// What pg_checksums reports too: its wording, exit 1.
    Cluster(VerifyError),
    /// A usage error pg_checksums reports with exit 1: the message and the hint.
    Usage(String, String),
    /// What pg_checksums has no counterpart for: exit 2.
    Setup(Box<dyn std::error::Error>),
}

impl From<VerifyError> for Failure {
    fn from(e: VerifyError) -> Failure {
        Failure::Cluster(e)
    }
}

impl From<pageio::page::control::ControlFileError> for Failure {
    fn from(e: pageio::page::control::ControlFileError) -> Failure {
        Failure::Cluster(e.into())
    }
}

/// `--enable` or `--disable`, step by step.
fn change(args: &ChecksumsArgs) -> Result<i32, Failure> {
    if args.online.online {
        return Err(Failure::Usage(
            "option --online can only be used with --check: checksums are enabled or disabled on a stopped cluster".into(),
            try_help(),
        ));
    }
    if args.filenode.is_some() {
        return Err(Failure::Usage(
            "option -f/--filenode can only be used with --check".into(),
            try_help(),
        ));
    }
    let datadir = args
        .location
        .resolve()
        .map_err(|e| Failure::Usage(e.to_string(), e.hint().into()))?
        .path
        .into_os_string();
    let pgdata = PathBuf::from(&datadir);
    let jobs = crate::verify::jobs_flag(args.jobs)
        .map_err(|(message, hint)| Failure::Usage(message, hint))?;
    let sync_method = match args.sync_method.as_str() {
        "syncfs" => SyncMethod::Syncfs,
        _ => SyncMethod::Fsync,
    };
    let sync = !args.no_sync;
    let control = ControlFile::read(&pgdata)?;
    if args.disable {
        control.check_for_disable()?;
        // As pg_checksums: the data directory is synced first (a previous --enable may have
        // run with --no-sync), then pg_control.
        if sync {
            eprintln!("pageio: syncing data directory");
            sync_data_directory(&pgdata, sync_method)?;
        }
        eprintln!("pageio: updating control file");
        write_control_file(&pgdata, 0, sync)?;
        if args.json {
            println!(
                "{}",
                serde_json::json!({"data_checksum_version": 0, "checksums_enabled": false})
            );
        } else {
            if args.verbose {
                println!("Data checksum version: 0");
            }
            println!("Checksums disabled in cluster");
        }
        return Ok(0);
    }
    control.check_for_enable()?;
    let aio = start_engine(&args.settings, jobs)?;
    let files = walk_cluster(&datadir, None)?;
    let total_bytes: u64 = files.iter().map(|f| f.size_bytes).sum();
    let started = std::time::Instant::now();
    let mut observer = Printer {
        verbose: args.verbose,
        json: args.json,
        progress: Some(crate::verify::Progress::new(args.progress, total_bytes)),
        crash_at: std::env::var(CRASH_AT_ENV).ok(),
    };
    let result = enable_checksums(
        &aio,
        &pgdata,
        &files,
        jobs,
        sync.then_some(sync_method),
        &mut observer,
    );
    if let Some(progress) = observer.progress.take() {
        progress.finish(None);
    }
    let totals = result?;
    if args.json {
        print_json(&totals, &aio, started.elapsed().as_secs_f64(), &pgdata);
    } else {
        if args.verbose {
            println!("Data checksum version: {PG_DATA_CHECKSUM_VERSION}");
        }
        println!("Checksums enabled in cluster");
    }
    Ok(0)
}

/// A test hook: `sync` or `control` makes `--enable` kill itself with SIGKILL as that step
/// starts (after every page is rewritten, or after the data is synced and before
/// `pg_control` is written), so tests can show that a `kill -9` at exactly those points
/// leaves a cluster that starts with checksums off. Unset in normal use.
pub const CRASH_AT_ENV: &str = "PAGEIO_CHECKSUMS_CRASH_AT";

/// Prints what `pg_checksums --enable` prints between its steps.
struct Printer {
    verbose: bool,
    json: bool,
    progress: Option<crate::verify::Progress>,
    crash_at: Option<String>,
}

impl Printer {
    fn maybe_crash(&self, step: &str) {
        if self.crash_at.as_deref() == Some(step) {
            let _ = std::io::Write::flush(&mut std::io::stdout());
            // SAFETY: raising a signal has no preconditions; SIGKILL ends the process here.
            unsafe {
                libc::raise(libc::SIGKILL);
            }
        }
    }
}

impl EnableObserver for Printer {
    fn file_done(&mut self, file: &ClusterFile, _blocks_written: u64) {
        if self.verbose {
            eprintln!("pageio: checksums enabled in file \"{}\"", file.display);
        }
    }

    fn progress(&mut self, bytes_done: u64) {
        if let Some(progress) = self.progress.as_mut() {
            progress.update(bytes_done);
        }
    }

    fn step(&mut self, step: EnableStep<'_>) {
        match step {
            EnableStep::Rewritten(totals) => {
                if let Some(progress) = self.progress.take() {
                    progress.finish(Some(totals.bytes_read));
                }
                if !self.json {
                    print_enable_summary(totals);
                }
                self.maybe_crash("sync");
            }
            EnableStep::Syncing => eprintln!("pageio: syncing data directory"),
            EnableStep::UpdatingControlFile => {
                self.maybe_crash("control");
                eprintln!("pageio: updating control file");
            }
        }
    }
}

/// The settings (flags and `--config` over verify's defaults) and the engine started with
/// them; one line on stderr when `auto` did not get io_uring.
fn start_engine(settings: &SettingsArgs, jobs: usize) -> Result<Aio, Failure> {
    let settings = settings.build().map_err(|e| Failure::Setup(e.into()))?;
    let mut config = verify_config(settings.config().clone(), jobs, |name| {
        settings.is_set(name)
    });
    fit_jobs_to_descriptors(&mut config, jobs, RINGS_PER_ENABLE_JOB, nofile_soft_limit())
        .map_err(|e| Failure::Usage(e.to_string(), e.hint()))?;
    let aio = Aio::new(config).map_err(|e| Failure::Setup(e.into()))?;
    if let Some(reason) = aio.fallback_reason() {
        eprintln!("pageio: {reason}");
    }
    Ok(aio)
}

/// `pg_checksums --enable`'s summary.
fn print_enable_summary(totals: &EnableTotals) {
    println!("Checksum operation completed");
    println!("Files scanned:   {}", totals.files_scanned);
    println!("Blocks scanned:  {}", totals.blocks_scanned);
    println!("Files written:  {}", totals.files_written);
    println!("Blocks written: {}", totals.blocks_written);
}

fn print_json(totals: &EnableTotals, aio: &Aio, total_s: f64, pgdata: &Path) {
    let config = aio.config();
    let summary = serde_json::json!({
        "data_directory": pgdata.display().to_string(),
        "files_scanned": totals.files_scanned,
        "blocks_scanned": totals.blocks_scanned,
        "files_written": totals.files_written,
        "blocks_written": totals.blocks_written,
        "new_pages": totals.new_pages,
        "bytes_read": totals.bytes_read,
        "data_checksum_version": PG_DATA_CHECKSUM_VERSION,
        "checksums_enabled": true,
        "elapsed_s": total_s,
        "io_method": aio.io_method().as_str(),
        "io_workers": config.io_workers,
        "direct_io": config.direct_io,
        "io_combine_limit_blocks": config.io_combine_limit_blocks,
        "effective_io_concurrency": config.effective_io_concurrency,
        "maintenance_io_concurrency": config.maintenance_io_concurrency,
    });
    println!("{summary}");
}
