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
//! Defaults differ from the engine's on purpose, because verify reads every byte once,
//! front to back, and nothing else (measured in `docs/BENCHMARKS.md`, "pageio verify"):
//!
//! * **mapped reads on**: a 16 MB window the page cache holds entirely is checksummed in
//!   place through a read-only mapping, with no copy (`pageio::verify`'s `mapped` module);
//!   only windows that are not cached are read. `--mapped-reads off` reads everything.
//! * **`io_method=auto`**: io_uring when the kernel allows it (it keeps the device busiest
//!   cold), else worker, with one line on stderr saying why.
//! * **`--jobs` = one scanner per CPU**: scanners checksum mapped windows (and, under sync
//!   and io_uring, every read), so there is one per CPU; under worker the `io_workers`
//!   threads checksum reads, and default to one per CPU too.
//! * **with `--direct-io on`**: no page cache, so no mapped reads and no kernel read-ahead;
//!   the stream alone must keep the device busy, so `io_combine_limit` defaults to 1 MB (the
//!   maximum, as PostgreSQL's) and `effective_io_concurrency` to
//!   [`DIRECT_IO_READS_IN_FLIGHT`] shared by the scanners; under worker, where each worker
//!   has one read in flight, `io_workers` defaults to [`DIRECT_IO_WORKERS`].
//!
//! Every one of these yields to a flag or a `--config` line that sets it.
//!
//! `--progress` draws a bar on a terminal; when stderr is not a terminal it prints a plain
//! line every [`PROGRESS_LINE_INTERVAL`] instead (MB done, MB/s, ETA), like
//! `pg_checksums --progress` does.

use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use pageio::config::IoMethodKind;
use pageio::verify::{check_files, walk_cluster, CheckOptions, ControlFile, VerifyError};
use pageio::Aio;

use crate::settings::SettingsArgs;
use crate::CliResult;

/// Reads in flight under direct I/O, over all scanners: `effective_io_concurrency` defaults
/// to this divided by `--jobs` (at least [`DIRECT_IO_MIN_PER_SCANNER`]). Without the page
/// cache's read-ahead, the stream's own reads are the device's whole queue. In paired cold
/// runs on the benchmark disk, 1 MB reads gave 1.1–1.4 GB/s with 64 in flight, 1.45–2.1 GB/s
/// with 128 and 1.5–2.0 GB/s with 256 (fio at queue depth 128: 1.1–2.2 GB/s): the gain stops
/// at 128. The buffers are 1 MB each, so this is also the memory bound — 128 MB, more only
/// beyond 32 scanners, at the minimum per scanner.
pub const DIRECT_IO_READS_IN_FLIGHT: usize = 128;

/// Least `effective_io_concurrency` per scanner under direct I/O, for very many `--jobs`.
pub const DIRECT_IO_MIN_PER_SCANNER: usize = 4;

/// `io_workers` under direct I/O with the worker method: each worker blocks in one `preadv`,
/// so the workers are the queue depth, and PostgreSQL's maximum (32) is the most we allow.
pub const DIRECT_IO_WORKERS: usize = pageio::config::MAX_IO_WORKERS;

/// How often `--progress` prints a line when stderr is not a terminal (pg_checksums: 1 s).
pub const PROGRESS_LINE_INTERVAL: Duration = Duration::from_secs(1);

/// Arguments of `pageio verify`.
#[derive(Debug, Args)]
#[command(
    long_about = "Verify the data checksums of every page of a stopped PostgreSQL 18 cluster, \
like `pg_checksums --check`, with asynchronous I/O, the checksum work spread over all cores, and \
data already in the page cache checked in place without copying it.\n\n\
The cluster must be cleanly shut down and have data checksums enabled (initdb -k, the default \
since PostgreSQL 18). Every file is opened read-only. The output and exit status are those of \
pg_checksums: one line per bad block on stderr, then a summary on stdout; exit 1 if any block is \
bad or a file cannot be read in full.",
    after_help = "Examples:\n  \
pageio verify /var/lib/postgresql/18/main\n  \
pageio verify -P /srv/pgdata                      # progress with MB/s and ETA\n  \
pageio verify --filenode 16384 /srv/pgdata        # one relation, all forks and segments\n  \
pageio verify --json /srv/pgdata | jq .bad_checksums\n  \
pageio verify --direct-io on /srv/pgdata          # bypass the page cache\n\n\
Verify's own defaults, where they differ from the settings' listed above: io_method=auto, \
io_workers = one per CPU; with --direct-io on, io_combine_limit=1MB, 128 reads in flight over \
all scanners (effective_io_concurrency = 128 / jobs) and io_workers=32."
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
    /// Show progress on stderr: MB done, MB/s, ETA (a bar on a terminal, else a line a second)
    #[arg(short = 'P', long = "progress")]
    progress: bool,
    /// List every file checked ("checksums verified in file …") on stderr
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,
    /// Print one JSON object on stdout instead of the text summary
    #[arg(long)]
    json: bool,
    /// Scanner threads: each checks cached windows in place and keeps reads in flight
    /// [default: one per CPU]
    #[arg(short = 'j', long, value_name = "N")]
    jobs: Option<usize>,
    /// Check windows the page cache holds entirely through a read-only mapping, without
    /// copying them (never under --direct-io on)
    #[arg(long, value_name = "on|off", default_value = "on", value_parser = ["on", "off"])]
    mapped_reads: String,
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

    let jobs = args.jobs.unwrap_or_else(cpus);
    if jobs == 0 {
        return Err("--jobs must be at least 1".into());
    }
    let mut config = args.settings.to_config()?;
    // Verify's own defaults (see the module comment), each unless the user chose the setting.
    let set = |name: &str| args.settings.is_set(name);
    if !set("io_method") {
        config.io_method = IoMethodKind::Auto;
    }
    if config.direct_io {
        if !set("io_combine_limit") {
            config.io_combine_limit_blocks = pageio::config::MAX_IO_COMBINE_LIMIT_BLOCKS;
        }
        if !set("effective_io_concurrency") {
            config.effective_io_concurrency = DIRECT_IO_READS_IN_FLIGHT
                .div_ceil(jobs.min(pageio::verify::checker::MAX_JOBS))
                .max(DIRECT_IO_MIN_PER_SCANNER);
        }
        if !set("io_workers") {
            config.io_workers = DIRECT_IO_WORKERS;
        }
        if !set("io_max_concurrency") {
            config.io_max_concurrency = config
                .io_max_concurrency
                .max(config.effective_io_concurrency);
        }
    } else if !set("io_workers") {
        config.io_workers = cpus().clamp(1, pageio::config::MAX_IO_WORKERS);
    }
    let aio = Aio::new(config)?;
    if let Some(reason) = aio.fallback_reason() {
        eprintln!("pageio: {reason}");
    }
    let options = CheckOptions {
        jobs,
        mapped_reads: args.mapped_reads == "on",
    };

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

    let on_terminal = std::io::stderr().is_terminal();
    let bar = if args.progress && on_terminal {
        ProgressBar::with_draw_target(Some(total_bytes), ProgressDrawTarget::stderr())
    } else {
        ProgressBar::hidden()
    };
    let mut lines = (args.progress && !on_terminal).then(|| ProgressLines::new(total_bytes));
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
        &options,
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
        |bytes| {
            bar.set_position(bytes);
            if let Some(l) = lines.as_mut() {
                l.update(bytes, false);
            }
        },
    );
    let elapsed_s = started.elapsed().as_secs_f64();
    bar.finish_and_clear();
    if let (Some(l), Ok(t)) = (lines.as_mut(), &result) {
        l.update(t.bytes_read, true);
    }
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
                "mapped_reads": options.mapped_reads && !config.direct_io,
                "bytes_mapped": totals.bytes_mapped,
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

/// `--progress` when stderr is not a terminal: one plain line per [`PROGRESS_LINE_INTERVAL`],
/// as `pg_checksums --progress` prints to a file or pipe, with the rate and time left.
struct ProgressLines {
    total_bytes: u64,
    started: Instant,
    last_line: Instant,
}

impl ProgressLines {
    fn new(total_bytes: u64) -> ProgressLines {
        let now = Instant::now();
        ProgressLines {
            total_bytes,
            started: now,
            last_line: now,
        }
    }

    /// Prints a line if one is due (or `last`, at the end of a successful run).
    fn update(&mut self, done_bytes: u64, last: bool) {
        let now = Instant::now();
        if !last && now.duration_since(self.last_line) < PROGRESS_LINE_INTERVAL {
            return;
        }
        self.last_line = now;
        eprintln!(
            "{}",
            progress_line(
                done_bytes,
                self.total_bytes,
                now.duration_since(self.started)
            )
        );
    }
}

/// `1234/4727 MB (26%) computed, 5123 MB/s, eta 1s`.
fn progress_line(done_bytes: u64, total_bytes: u64, elapsed: Duration) -> String {
    let mb = |b: u64| b / 1_000_000;
    let percent = (done_bytes * 100).checked_div(total_bytes).unwrap_or(100);
    let secs = elapsed.as_secs_f64().max(1e-3);
    let rate_bytes_per_s = done_bytes as f64 / secs;
    let eta = if rate_bytes_per_s > 0.0 {
        let left_s = total_bytes.saturating_sub(done_bytes) as f64 / rate_bytes_per_s;
        format!("{}s", left_s.ceil() as u64)
    } else {
        "unknown".to_string()
    };
    format!(
        "{}/{} MB ({percent}%) computed, {:.0} MB/s, eta {eta}",
        mb(done_bytes),
        mb(total_bytes),
        rate_bytes_per_s / 1e6
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_line_format() {
        assert_eq!(
            progress_line(1_234_000_000, 4_727_000_000, Duration::from_millis(500)),
            "1234/4727 MB (26%) computed, 2468 MB/s, eta 2s"
        );
        assert_eq!(
            progress_line(0, 0, Duration::from_secs(1)),
            "0/0 MB (100%) computed, 0 MB/s, eta unknown"
        );
    }
}
