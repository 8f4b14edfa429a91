//! `pageio verify PGDATA`: `pg_checksums --check` at device speed.
//!
//! Same scope, rules, output and exit status as `pg_checksums --check` of PostgreSQL 18,
//! with the reads issued through the AIO subsystem and the checksums computed in parallel
//! (see `pageio::verify` for the mechanism):
//!
//! ```text
//!   pg_control ─► refuse? (running, checksums off, not PG 18) ─► exit 1, one error + one hint
//!   walk global/ base/ pg_tblspc/ ─► check_files ─► per file, in walk order:
//!        stderr: pageio: error: checksum verification failed in file "…", block N: calculated checksum X but block contains Y
//!        stderr: pageio: checksums verified in file "…"            (--verbose)
//!   stdout: Checksum operation completed / Files scanned / Blocks scanned / Bad checksums /
//!           Data checksum version      (or one JSON object with --json)
//! ```
//!
//! Exit status, as `pg_checksums`: 0 when every block is good, 1 when a block is bad or the
//! run cannot be done (cluster running, checksums off, a short read, an unreadable file).
//! Only errors `pg_checksums` has no counterpart for — a bad `--io-method` and the like —
//! exit 2, like every other pageio subcommand.
//!
//! Defaults differ from the engine's on purpose: `io_method=worker` with one I/O worker per
//! CPU, because the checksum runs in the worker that completes each read, so the worker pool
//! is also the checksum pool; under `sync` and `io_uring` the checksum runs in the submitting
//! thread, so `--jobs` defaults to one scanner per CPU there.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use pageio::config::IoMethodKind;
use pageio::verify::{check_files, walk_cluster, ControlFile, VerifyError};
use pageio::Aio;

use crate::settings::SettingsArgs;
use crate::CliResult;

/// Arguments of `pageio verify`.
#[derive(Debug, Args)]
#[command(
    long_about = "Verify the data checksums of every page of a stopped PostgreSQL 18 cluster, \
like `pg_checksums --check`, with asynchronous I/O and the checksum work spread over all cores.\n\n\
The cluster must be cleanly shut down and have data checksums enabled (initdb -k, the default \
since PostgreSQL 18). Every file is opened read-only. The output and exit status are those of \
pg_checksums: one line per bad block on stderr, then a summary on stdout; exit 1 if any block is \
bad or a file cannot be read in full.",
    after_help = "Examples:\n  \
pageio verify /var/lib/postgresql/18/main\n  \
pageio verify -P /srv/pgdata                      # progress with MB/s and ETA\n  \
pageio verify --filenode 16384 /srv/pgdata        # one relation, all forks and segments\n  \
pageio verify --json /srv/pgdata | jq .bad_checksums\n  \
pageio verify --io-method io_uring --direct-io on /srv/pgdata   # bypass the page cache"
)]
pub struct VerifyArgs {
    /// The data directory [default: $PGDATA]
    #[arg(value_name = "PGDATA")]
    datadir: Option<OsString>,
    /// The data directory, as pg_checksums -D spells it
    #[arg(
        short = 'D',
        long = "pgdata",
        value_name = "PGDATA",
        conflicts_with = "datadir"
    )]
    pgdata: Option<OsString>,
    /// Accepted for pg_checksums compatibility: checking is the only mode
    #[arg(short = 'c', long = "check")]
    check: bool,
    /// Check only the relation with this filenode (all its forks and segments)
    #[arg(short = 'f', long = "filenode", value_name = "FILENODE")]
    filenode: Option<u32>,
    /// Show progress on stderr: MB done, MB/s, ETA
    #[arg(short = 'P', long = "progress")]
    progress: bool,
    /// List every file checked ("checksums verified in file …") on stderr
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,
    /// Print one JSON object on stdout instead of the text summary
    #[arg(long)]
    json: bool,
    /// Scanner threads issuing reads [default: 1 under io_method=worker, one per CPU otherwise]
    #[arg(short = 'j', long, value_name = "N")]
    jobs: Option<usize>,
    #[command(flatten)]
    settings: SettingsArgs,
}

#[derive(serde::Serialize)]
struct JsonFailure<'a> {
    file: &'a str,
    block: u32,
    calculated: u16,
    stored: u16,
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Prints a pg_checksums-style fatal error (and its hint) and returns exit status 1.
fn fatal(e: &VerifyError) -> i32 {
    eprintln!("pageio: error: {e}");
    if let Some(h) = e.hint() {
        eprintln!("pageio: hint: {h}");
    }
    1
}

/// Runs the subcommand.
pub fn run(args: VerifyArgs) -> CliResult {
    let datadir = match args
        .pgdata
        .or(args.datadir)
        .or_else(|| std::env::var_os("PGDATA"))
    {
        Some(d) => d,
        None => return Err("no data directory specified: pass PGDATA or set $PGDATA".into()),
    };
    let pgdata = PathBuf::from(&datadir);
    let _ = args.check;

    let mut config = args.settings.to_config()?;
    // Verify's own defaults (see the module comment): the worker pool is the checksum pool.
    if args.settings.io_method.is_none() {
        config.io_method = IoMethodKind::Worker;
    }
    if args.settings.io_workers.is_none() {
        config.io_workers = cpus().clamp(1, pageio::config::MAX_IO_WORKERS);
    }
    let aio = Aio::new(config)?;
    if let Some(reason) = aio.fallback_reason() {
        eprintln!("pageio: {reason}");
    }
    let jobs = args.jobs.unwrap_or(match aio.io_method() {
        IoMethodKind::Worker => 1,
        _ => cpus(),
    });
    if jobs == 0 {
        return Err("--jobs must be at least 1".into());
    }

    let control = match ControlFile::read(&pgdata).and_then(|c| {
        c.check_for_verify()?;
        Ok(c)
    }) {
        Ok(c) => c,
        Err(e) => return Ok(fatal(&e)),
    };
    let files = match walk_cluster(&datadir, args.filenode) {
        Ok(f) => f,
        Err(e) => return Ok(fatal(&e)),
    };
    let total_bytes: u64 = files.iter().map(|f| f.size_bytes).sum();

    let bar = if args.progress {
        ProgressBar::with_draw_target(Some(total_bytes), ProgressDrawTarget::stderr())
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(ProgressStyle::with_template(
        "{bytes}/{total_bytes} ({percent}%) computed, {bytes_per_sec}, eta {eta}",
    )?);
    bar.enable_steady_tick(Duration::from_millis(200));

    // pg_checksums prints failure lines only for the checksum version it knows; a future
    // version's failures are still counted.
    let print_failures = control.data_checksum_version == 1;
    let mut failures_json = Vec::new();
    let started = Instant::now();
    let stderr = std::io::stderr();
    let result = check_files(
        &aio,
        files,
        jobs,
        |file, outcome| {
            let mut err = stderr.lock();
            bar.suspend(|| {
                for f in &outcome.failures {
                    if print_failures {
                        let _ = writeln!(
                            err,
                            "pageio: error: checksum verification failed in file \"{}\", block {}: calculated checksum {:X} but block contains {:X}",
                            file.display, f.block, f.calculated, f.stored
                        );
                    }
                    if args.json {
                        failures_json.push((file.display.clone(), f.clone()));
                    }
                }
                if args.verbose && outcome.error.is_none() {
                    let _ = writeln!(err, "pageio: checksums verified in file \"{}\"", file.display);
                }
            });
        },
        |bytes| bar.set_position(bytes),
    );
    let elapsed_s = started.elapsed().as_secs_f64();
    bar.finish_and_clear();
    let totals = match result {
        Ok(t) => t,
        Err(e) => return Ok(fatal(&e)),
    };
    let mb_per_s = totals.bytes_read as f64 / elapsed_s.max(1e-9) / 1e6;
    if args.json {
        let failures: Vec<JsonFailure> = failures_json
            .iter()
            .map(|(file, f)| JsonFailure {
                file,
                block: f.block,
                calculated: f.calculated,
                stored: f.stored,
            })
            .collect();
        let config = aio.config();
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "files_scanned": totals.files_scanned,
                "blocks_scanned": totals.blocks_scanned,
                "bad_checksums": totals.bad_checksums,
                "new_pages": totals.new_pages,
                "data_checksum_version": control.data_checksum_version,
                "failures": failures,
                "bytes_read": totals.bytes_read,
                "elapsed_s": elapsed_s,
                "mb_per_s": mb_per_s,
                "io_method": aio.io_method().as_str(),
                "io_workers": config.io_workers,
                "jobs": jobs,
                "direct_io": config.direct_io,
                "io_combine_limit_blocks": config.io_combine_limit_blocks,
                "effective_io_concurrency": config.effective_io_concurrency,
            }))?
        );
    } else {
        println!("Checksum operation completed");
        println!("Files scanned:   {}", totals.files_scanned);
        println!("Blocks scanned:  {}", totals.blocks_scanned);
        println!("Bad checksums:  {}", totals.bad_checksums);
        println!("Data checksum version: {}", control.data_checksum_version);
    }
    Ok(if totals.bad_checksums > 0 { 1 } else { 0 })
}
