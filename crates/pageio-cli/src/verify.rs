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
//! run cannot be done (cluster running, checksums off, a short read, an unreadable file) or
//! on a usage error (no data directory given, `--jobs 0`, more jobs than the descriptor
//! limit leaves room for: each names the flag and the fix). Only errors `pg_checksums` has
//! no counterpart for — a bad `--io-method` and the like — exit 2, like every other pageio
//! subcommand.
//!
//! Verify runs with its own defaults where they differ from the engine's (`io_method=auto`,
//! a scanner and an I/O worker per CPU, mapped reads on; under `--direct-io on` 1 MB reads
//! with 128 in flight over all scanners and 32 I/O workers). They are the library's
//! ([`pageio::verify::defaults`], which explains and measures each), so a program embedding
//! the checker gets the same; every one yields to a flag or a `--config` line that sets it.
//! `--mapped-reads off` reads everything instead of checking cached windows in place.
//!
//! With `--json`, stdout carries one JSON object whatever happens: the summary, or on a
//! fatal error `{"error": {"kind", "message", "hint"}}` (see `Fatal`), with the same exit
//! status as without `--json`.
//!
//! ```text
//!   run ─► verify: data_directory ─► start_engine ─► read_control ─► walk_cluster
//!                  ─► check_cluster (failure lines, progress)
//!                  ─► print_text_summary | print_json_summary
//!       └► Fatal::report: error + hint on stderr (and the JSON object), exit 1 or 2
//! ```
//!
//! `--progress` draws a bar on a terminal; when stderr is not a terminal it prints a plain
//! line every [`PROGRESS_LINE_INTERVAL`] instead (MB done, MB/s, ETA), like
//! `pg_checksums --progress` does.

use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use pageio::storage::nofile_soft_limit;
use pageio::verify::{
    check_files, default_jobs, fit_jobs_to_descriptors, verify_config, walk_cluster, CheckOptions,
    CheckTotals, ChecksumFailure, ClusterFile, ControlFile, VerifyError, RINGS_PER_CHECK_JOB,
};
use pageio::Aio;

mod online;

pub(crate) use online::OnlineArgs;

use crate::datadir::DataDirArgs;
use crate::settings::SettingsArgs;
use crate::CliResult;

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
With --json, stdout is one JSON object: the summary, or on a fatal error \
{\"error\": {\"kind\": …, \"message\": …, \"hint\": …}} (kind is a stable name such as \
cluster_running, checksums_disabled, short_read, settings, usage); the exit status is the same \
as without --json.\n\n\
Verify's own defaults, where they differ from the settings' listed above: io_method=auto, \
io_workers = one per CPU; with --direct-io on, io_combine_limit=1MB, 128 reads in flight over \
all scanners (effective_io_concurrency = 128 / jobs) and io_workers=32."
)]
pub struct VerifyArgs {
    #[command(flatten)]
    pub(crate) location: DataDirArgs,
    /// Accepted for pg_checksums compatibility: checking is the only mode
    #[arg(short = 'c', long = "check")]
    pub(crate) check: bool,
    /// Check only the relation with this filenode (all its forks and segments)
    #[arg(short = 'f', long = "filenode", value_name = "FILENODE")]
    pub(crate) filenode: Option<u32>,
    /// Show progress on stderr: MB done (of 1024 * 1024 bytes, as pg_checksums), MB/s, ETA (a
    /// bar on a terminal, else a line a second)
    #[arg(short = 'P', long = "progress")]
    pub(crate) progress: bool,
    /// List every file checked ("checksums verified in file …") on stderr
    #[arg(short = 'v', long = "verbose")]
    pub(crate) verbose: bool,
    /// Print one JSON object on stdout instead of the text summary (on a fatal error:
    /// {"error": {"kind", "message", "hint"}})
    #[arg(long)]
    pub(crate) json: bool,
    /// Scanner threads: each checks cached windows in place and keeps reads in flight
    /// [default: one per CPU]
    #[arg(short = 'j', long, value_name = "N")]
    pub(crate) jobs: Option<usize>,
    /// Check windows the page cache holds entirely through a read-only mapping, without
    /// copying them (never under --direct-io on)
    #[arg(long, value_name = "on|off", default_value = "on", value_parser = ["on", "off"])]
    pub(crate) mapped_reads: String,
    #[command(flatten)]
    pub(crate) online: OnlineArgs,
    #[command(flatten)]
    pub(crate) settings: SettingsArgs,
}

#[derive(serde::Serialize)]
struct JsonFailure<'a> {
    file: &'a str,
    block: u32,
    calculated: u16,
    stored: u16,
}

/// Why a run stopped before its summary.
#[derive(Debug)]
enum Fatal {
    /// A condition `pg_checksums` reports too (cluster running, checksums off, a short
    /// read, …): its wording and a hint on stderr, exit status 1, as `pg_checksums`.
    Cluster(VerifyError),
    /// A usage error — no data directory given, a `--jobs` that cannot run: exit status 1
    /// with a hint line, as `pg_checksums`' own usage errors.
    Usage {
        /// What was wrong, naming the flag.
        message: String,
        /// The fix.
        hint: String,
    },
    /// What `pg_checksums` has no counterpart for — a bad setting, an engine that cannot
    /// start: exit status 2, like every pageio subcommand's errors.
    Setup {
        /// Stable name for `--json` (`usage`, `settings`, `io`).
        kind: &'static str,
        /// The message, naming the cause and the fix.
        error: Box<dyn std::error::Error>,
    },
}

impl From<VerifyError> for Fatal {
    fn from(e: VerifyError) -> Fatal {
        Fatal::Cluster(e)
    }
}

impl Fatal {
    fn usage(message: impl Into<String>, hint: impl Into<String>) -> Fatal {
        Fatal::Usage {
            message: message.into(),
            hint: hint.into(),
        }
    }

    /// `{"error": {"kind": …, "message": …, "hint": …}}`: what `--json` prints on stdout
    /// instead of the summary.
    fn json(&self) -> serde_json::Value {
        let (kind, message, hint) = match self {
            Fatal::Cluster(e) => (e.kind(), e.to_string(), e.hint()),
            Fatal::Usage { message, hint } => ("usage", message.clone(), Some(hint.clone())),
            Fatal::Setup { kind, error } => (*kind, error.to_string(), None),
        };
        serde_json::json!({ "error": { "kind": kind, "message": message, "hint": hint } })
    }

    /// Reports the error — on stderr always, and as a JSON object on stdout with `--json` —
    /// and ends the run with its exit status.
    fn report(self, json: bool) -> CliResult {
        if json {
            // A closed stdout must not turn the error into a quiet success: the error is
            // also on stderr, and the exit status below stands.
            let _ = writeln!(
                std::io::stdout(),
                "{}",
                serde_json::to_string_pretty(&self.json())?
            );
        }
        match self {
            Fatal::Cluster(e) => {
                eprintln!("pageio: error: {e}");
                if let Some(hint) = e.hint() {
                    eprintln!("pageio: hint: {hint}");
                }
                Ok(1)
            }
            Fatal::Usage { message, hint } => {
                eprintln!("pageio: error: {message}");
                eprintln!("pageio: hint: {hint}");
                Ok(1)
            }
            // main prints the one error line and exits 2.
            Fatal::Setup { error, .. } => Err(error),
        }
    }
}

/// Runs the subcommand.
pub fn run(args: VerifyArgs) -> CliResult {
    let json = args.json;
    match verify(args) {
        Ok(status) => Ok(status),
        Err(fatal) => fatal.report(json),
    }
}

/// The whole run, step by step; exit status 0 when every block is good, 1 when one is bad.
fn verify(args: VerifyArgs) -> Result<i32, Fatal> {
    if args.online.online {
        return online::verify_online(args);
    }
    if let Some(text) = args.online.ionice.as_deref() {
        online::set_ionice(
            online::parse_ionice(text).map_err(|m| Fatal::usage(m, "see pageio verify --help"))?,
        )?;
    }
    let datadir = data_directory(&args)?;
    let jobs = jobs_flag(args.jobs).map_err(|(m, h)| Fatal::usage(m, h))?;
    let aio = start_engine(&args.settings, jobs)?;
    let options = CheckOptions {
        jobs,
        mapped_reads: args.mapped_reads == "on",
    };
    let control = read_control(&PathBuf::from(&datadir))?;
    let files = walk_cluster(&datadir, args.filenode)?;
    let total_bytes: u64 = files.iter().map(|f| f.size_bytes).sum();
    let progress = Progress::new(args.progress, total_bytes);
    let output = FileLines {
        // pg_checksums prints failure lines only for the checksum version it knows; a future
        // version's failures are still counted.
        failures: control.data_checksum_version == 1,
        verified: args.verbose,
        collect: args.json,
    };
    let started = Instant::now();
    let (result, failures) = check_cluster(&aio, files, &options, &output, progress);
    let totals = result?;
    let elapsed_s = started.elapsed().as_secs_f64();
    if args.json {
        print_json_summary(&totals, &failures, &control, &aio, &options, elapsed_s)?;
    } else {
        print_text_summary(&totals, &control);
    }
    Ok(if totals.bad_checksums > 0 { 1 } else { 0 })
}

/// The data directory: `-D`, the argument, or `$PGDATA`.
fn data_directory(args: &VerifyArgs) -> Result<OsString, Fatal> {
    args.location
        .resolve()
        .map(|dir| dir.path.into_os_string())
        .map_err(|e| Fatal::usage(e.to_string(), e.hint()))
}

/// `--jobs`, or one per CPU: 0 is a usage error (exit 1, as `pg_checksums`' usage errors),
/// returned as (message, hint).
pub(crate) fn jobs_flag(jobs: Option<usize>) -> Result<usize, (String, String)> {
    match jobs {
        Some(0) => Err((
            "--jobs 0: at least one thread must read and checksum".into(),
            format!(
                "give --jobs 1 or more (default: one per CPU, {} here)",
                default_jobs()
            ),
        )),
        Some(n) => Ok(n),
        None => Ok(default_jobs()),
    }
}

/// The settings (flags and `--config` over verify's defaults for `jobs` scanners) and the
/// engine started with them; one line on stderr when `auto` did not get io_uring.
fn start_engine(settings: &SettingsArgs, jobs: usize) -> Result<Aio, Fatal> {
    let settings = settings.build().map_err(|e| Fatal::Setup {
        kind: "settings",
        error: e.into(),
    })?;
    let mut config = verify_config(settings.config().clone(), jobs, |name| {
        settings.is_set(name)
    });
    fit_jobs_to_descriptors(&mut config, jobs, RINGS_PER_CHECK_JOB, nofile_soft_limit())
        .map_err(|e| Fatal::usage(e.to_string(), e.hint()))?;
    let aio = Aio::new(config).map_err(|e| Fatal::Setup {
        kind: "io",
        error: e.into(),
    })?;
    if let Some(reason) = aio.fallback_reason() {
        eprintln!("pageio: {reason}");
    }
    Ok(aio)
}

/// `global/pg_control`, refusing what `pg_checksums --check` refuses.
fn read_control(pgdata: &std::path::Path) -> Result<ControlFile, VerifyError> {
    let control = ControlFile::read(pgdata)?;
    pageio::verify::check_for_offline_verify(&control)?;
    Ok(control)
}

/// What to print per file while checking.
struct FileLines {
    /// One stderr line per bad block, as `pg_checksums`.
    failures: bool,
    /// "checksums verified in file …" for each good file (`--verbose`).
    verified: bool,
    /// Keep every failure for the JSON summary.
    collect: bool,
}

/// A checksum failure with the file it was found in (as messages name the file).
type FileFailure = (Arc<str>, ChecksumFailure);

/// Checks every file, printing per-file lines as each finishes and showing progress.
/// Returns the totals (or the fatal error) and the failures kept for `--json`.
fn check_cluster(
    aio: &Aio,
    files: Vec<ClusterFile>,
    options: &CheckOptions,
    output: &FileLines,
    mut progress: Progress,
) -> (Result<CheckTotals, VerifyError>, Vec<FileFailure>) {
    let mut kept_failures = Vec::new();
    let stderr = std::io::stderr();
    let bar = progress.bar.clone();
    let result = check_files(
        aio,
        files,
        options,
        |file, outcome| {
            let mut err = stderr.lock();
            bar.suspend(|| {
                for failure in &outcome.failures {
                    if output.failures {
                        let _ = writeln!(
                            err,
                            "pageio: error: checksum verification failed in file \"{}\", block {}: calculated checksum {:X} but block contains {:X}",
                            file.display, failure.block, failure.calculated, failure.stored
                        );
                    }
                    if output.collect {
                        kept_failures.push((file.display.clone(), failure.clone()));
                    }
                }
                if output.verified && outcome.error.is_none() {
                    let _ = writeln!(err, "pageio: checksums verified in file \"{}\"", file.display);
                }
            });
        },
        |bytes| progress.update(bytes),
    );
    progress.finish(result.as_ref().ok().map(|totals| totals.bytes_read));
    (result, kept_failures)
}

/// The `pg_checksums` summary on stdout.
fn print_text_summary(totals: &CheckTotals, control: &ControlFile) {
    let summary = format!(
        "Checksum operation completed\n\
         Files scanned:   {}\n\
         Blocks scanned:  {}\n\
         Bad checksums:  {}\n\
         Data checksum version: {}\n",
        totals.files_scanned,
        totals.blocks_scanned,
        totals.bad_checksums,
        control.data_checksum_version
    );
    print_summary(&summary);
}

/// Writes the summary to stdout. A reader that went away (`| head -1`) has what it wanted,
/// and the exit status must still say whether a block was bad, so a failed write is not an
/// error here (the failure lines went to stderr).
fn print_summary(summary: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout
        .write_all(summary.as_bytes())
        .and_then(|()| stdout.flush());
}

/// The summary as one JSON object on stdout, with the settings the run used.
fn print_json_summary(
    totals: &CheckTotals,
    failures: &[FileFailure],
    control: &ControlFile,
    aio: &Aio,
    options: &CheckOptions,
    elapsed_s: f64,
) -> Result<(), Fatal> {
    let failures: Vec<JsonFailure> = failures
        .iter()
        .map(|(file, failure)| JsonFailure {
            file,
            block: failure.block,
            calculated: failure.calculated,
            stored: failure.stored,
        })
        .collect();
    let config = aio.config();
    let mb_per_s = totals.bytes_read as f64 / elapsed_s.max(1e-9) / 1e6;
    let summary = serde_json::json!({
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
        "jobs": options.jobs,
        "mapped_reads": options.mapped_reads && !config.direct_io,
        "bytes_mapped": totals.bytes_mapped,
        "direct_io": config.direct_io,
        "io_combine_limit_blocks": config.io_combine_limit_blocks,
        "effective_io_concurrency": config.effective_io_concurrency,
    });
    let text = serde_json::to_string_pretty(&summary).map_err(|e| Fatal::Setup {
        kind: "internal",
        error: e.into(),
    })?;
    print_summary(&format!("{text}\n"));
    Ok(())
}

/// `--progress`: a bar on a terminal, plain lines otherwise, nothing without the flag.
pub(crate) struct Progress {
    bar: ProgressBar,
    lines: Option<ProgressLines>,
}

/// The bar's template: pg_checksums' MB, the rate, the time left, and a message (the online
/// check's counts).
const BAR_TEMPLATE: &str =
    "{bytes}/{total_bytes} ({percent}%) computed, {bytes_per_sec}, eta {eta} {msg}";

impl Progress {
    pub(crate) fn new(wanted: bool, total_bytes: u64) -> Progress {
        let on_terminal = std::io::stderr().is_terminal();
        let bar = if wanted && on_terminal {
            ProgressBar::with_draw_target(Some(total_bytes), ProgressDrawTarget::stderr())
        } else {
            ProgressBar::hidden()
        };
        // The template is a constant: it cannot fail to parse, but a bar is not worth a
        // panic, so a bad one falls back to the default style.
        bar.set_style(
            ProgressStyle::with_template(BAR_TEMPLATE)
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar.enable_steady_tick(Duration::from_millis(200));
        Progress {
            bar,
            lines: (wanted && !on_terminal).then(|| ProgressLines::new(total_bytes)),
        }
    }

    /// Counts shown after the rate (on the bar, and at the end of each plain line).
    pub(crate) fn set_counts(&mut self, counts: String) {
        if let Some(lines) = self.lines.as_mut() {
            lines.counts = format!(", {counts}");
        }
        self.bar.set_message(counts);
    }

    pub(crate) fn update(&mut self, done_bytes: u64) {
        self.bar.set_position(done_bytes);
        if let Some(lines) = self.lines.as_mut() {
            lines.update(done_bytes, false);
        }
    }

    /// Clears the bar; prints the last line (100%) when the run completed.
    pub(crate) fn finish(mut self, completed_bytes: Option<u64>) {
        self.bar.finish_and_clear();
        if let (Some(lines), Some(done_bytes)) = (self.lines.as_mut(), completed_bytes) {
            lines.update(done_bytes, true);
        }
    }
}

/// `--progress` when stderr is not a terminal: one plain line per [`PROGRESS_LINE_INTERVAL`],
/// as `pg_checksums --progress` prints to a file or pipe, with the rate and time left.
struct ProgressLines {
    total_bytes: u64,
    started: Instant,
    last_line: Instant,
    /// Appended to each line (the online check's counts), or empty.
    counts: String,
}

impl ProgressLines {
    fn new(total_bytes: u64) -> ProgressLines {
        let now = Instant::now();
        ProgressLines {
            total_bytes,
            started: now,
            last_line: now,
            counts: String::new(),
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
            "{}{}",
            progress_line(
                done_bytes,
                self.total_bytes,
                now.duration_since(self.started)
            ),
            self.counts
        );
    }
}

/// Bytes in the "MB" pg_checksums' progress counts: it divides by 1024 * 1024.
const PROGRESS_MB_BYTES: u64 = 1024 * 1024;

/// `1234/4727 MB (26%) computed, 5123 MB/s, eta 1s`, in pg_checksums' MB of
/// [`PROGRESS_MB_BYTES`] (the rate too).
fn progress_line(done_bytes: u64, total_bytes: u64, elapsed: Duration) -> String {
    let mb = |b: u64| b / PROGRESS_MB_BYTES;
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
        rate_bytes_per_s / PROGRESS_MB_BYTES as f64
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_line_format() {
        // pg_checksums 18: "%lld/%lld MB (%d%%) computed" of current_size / (1024 * 1024).
        assert_eq!(
            progress_line(1 << 30, 4 << 30, Duration::from_millis(500)),
            "1024/4096 MB (25%) computed, 2048 MB/s, eta 2s"
        );
        assert_eq!(
            progress_line(1_234_000_000, 4_727_000_000, Duration::from_millis(500)),
            "1176/4508 MB (26%) computed, 2354 MB/s, eta 2s"
        );
        // One byte short of a MiB is still 0 MB, as pg_checksums truncates.
        assert_eq!(
            progress_line(1_048_575, 1_048_576, Duration::from_secs(1)),
            "0/1 MB (99%) computed, 1 MB/s, eta 1s"
        );
        assert_eq!(
            progress_line(0, 0, Duration::from_secs(1)),
            "0/0 MB (100%) computed, 0 MB/s, eta unknown"
        );
    }
}
