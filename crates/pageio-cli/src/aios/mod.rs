//! `pageio aios`: the I/O in flight in pageio processes (and, with `--dsn`, in a running
//! PostgreSQL 18 server), in the columns of PostgreSQL's `pg_aios` view.
//!
//! ```text
//!   pageio aios [--pid N] [--json] [--aio-publish-dir DIR]
//!   pageio aios --watch [--interval SECS] [--count N] [--pid N]
//!   pageio aios --dsn CONNINFO ...          (a running PostgreSQL 18: see server.rs)
//! ```
//!
//! Every process using the engine publishes its state in `DIR/pageio-aios.<pid>.<n>`
//! (`aio_publish_dir`, default `/dev/shm`; the library's `aio::publish` describes the file).
//! This command reads every such file it may read:
//!
//! * a live process's area: a summary (program, io_method, settings, counters, worker pool,
//!   depth) and its handles in `pg_aios`'s columns and spelling;
//! * a stale area (its process is gone, or the pid was reused): reported as stale and
//!   removed — only files with the exact name pattern and the area's magic;
//! * an unreadable one (truncated, garbled, another layout version): one warning naming the
//!   file and what is wrong, and the view goes on;
//! * an untrusted one (owned by another user who does not run the process it names, or
//!   writable by others than its owner): reported and skipped, read only with
//!   `--trust-others`; another user's stale area is never removed.
//!
//! `--watch` samples every `--interval` seconds through [`term::watch`]: per process, I/Os
//! per second, MB/s, in-flight depth now and its histogram over the interval, average I/O
//! size, wait time per second, the worker pool; below, the I/Os in flight. Rates are the
//! difference between two samples divided by the time between them *as the publisher
//! measured it*, so a slow refresh does not distort them.

mod server;
pub mod term;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use pageio::aio::publish::{
    self, depth_bucket_label, AreaEntry, AreaSample, AreaTrust, PublishedArea, PublishedRow,
    DEPTH_BUCKETS,
};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Row, Table};

use crate::CliResult;

/// Arguments of `pageio aios`.
#[derive(Debug, Args)]
#[command(after_long_help = "\
Every pageio process publishes its AIO state in a small shared-memory file
(aio_publish_dir/pageio-aios.<pid>.<n>, default /dev/shm; aio_publish = off turns it off).
pageio aios reads them all: one summary per process and its I/Os in pg_aios's columns.
A file left by a process that died is reported as stale and removed. A file owned by
another user (unless that user runs the process it names) or writable by anyone but its
owner is reported and skipped: --trust-others reads it anyway.

Examples:
  pageio aios                      every pageio process, once
  pageio aios --pid 4242 --json    one process, as JSON
  pageio aios --watch              a live view like top (q, Esc or Ctrl-C quits)
  pageio aios --watch | cat        one plain line per process per second
  pageio aios --dsn 'host=/var/run/postgresql user=monitor' --watch
                                   a running PostgreSQL 18: pg_aios, pg_stat_io rates")]
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
    /// PGDATABASE and PGCONNECT_TIMEOUT, a password also from PGPASSFILE or ~/.pgpass. Plain TCP or Unix-socket connections only, no TLS
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
    /// Where pageio processes publish (their aio_publish_dir setting)
    #[arg(long, value_name = "DIR", default_value = pageio::config::DEFAULT_AIO_PUBLISH_DIR)]
    pub aio_publish_dir: PathBuf,
    /// Also read areas owned by other users, or writable by others than their owner
    ///
    /// By default an area is read only when it is owned by this user or by the user running
    /// the process it names, and only its owner can write it: anyone can put a file named
    /// like an area in a shared directory such as /dev/shm. The others are reported and
    /// skipped. Reading them is safe either way (every field is checked); what they say may
    /// be made up. Stale areas of other users are never removed.
    #[arg(long)]
    pub trust_others: bool,
}

/// Runs the subcommand.
pub fn run(args: AiosArgs) -> CliResult {
    if args.dsn.is_some() {
        return server::run(&args);
    }
    if !args.interval.is_finite() || args.interval < 0.01 || args.interval > 86_400.0 {
        return Err(format!(
            "--interval {} is not a number of seconds between 0.01 and 86400 (e.g. --interval 0.5)",
            args.interval
        )
        .into());
    }
    if args.watch && args.json {
        return Err("--json prints one snapshot; use it without --watch (or --watch without --json for plain lines)".into());
    }
    let trust = if args.trust_others {
        AreaTrust::Anyone
    } else {
        AreaTrust::OwnerOnly
    };
    let scan = Scan::take(&args.aio_publish_dir, args.pid, trust)?;
    if let Some(pid) = args.pid {
        if scan.processes.is_empty() {
            return Err(nothing_published(pid, &args.aio_publish_dir).into());
        }
    }
    if args.watch {
        scan.print_warnings();
        let mut watcher = Watcher {
            dir: args.aio_publish_dir.clone(),
            pid: args.pid,
            trust,
            interval: Duration::from_secs_f64(args.interval),
            previous: HashMap::new(),
            refreshes: 0,
        };
        term::watch(
            Duration::from_secs_f64(args.interval),
            args.count,
            move || watcher.sample(),
        )?;
        return Ok(0);
    }
    // Written (not printed): a closed stdout (`| head`) is then an error main ends quietly
    // on, not a panic.
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&scan.to_json())?)?;
    } else {
        write!(out, "{}", scan.to_text(&args.aio_publish_dir))?;
        out.flush()?;
        scan.print_warnings();
    }
    Ok(0)
}

fn nothing_published(pid: i32, dir: &Path) -> String {
    format!(
        "process {pid} publishes no AIO state in \"{}\": it is not a running pageio process, runs with aio_publish = off, or publishes elsewhere (--aio-publish-dir DIR, its aio_publish_dir)",
        dir.display()
    )
}

/// A stale area found (and what became of it).
#[derive(serde::Serialize)]
struct StaleArea {
    path: PathBuf,
    pid: i32,
    reason: String,
    removed: bool,
    remove_error: Option<String>,
    header: publish::AreaHeader,
}

/// One read of the publish directory: stale areas already removed.
struct Scan {
    processes: Vec<PublishedArea>,
    stale: Vec<StaleArea>,
    unreadable: Vec<(PathBuf, String)>,
    /// Areas skipped unread because their owner or mode is not trusted.
    untrusted: Vec<Untrusted>,
    /// Areas this user may not read (another user's processes: the files are 0600).
    not_permitted: usize,
}

/// An area skipped unread (see `--trust-others`).
#[derive(serde::Serialize)]
struct Untrusted {
    path: PathBuf,
    owner_uid: u32,
    mode: String,
    why: String,
    error: String,
}

impl Scan {
    fn take(dir: &Path, pid: Option<i32>, trust: AreaTrust) -> Result<Scan, String> {
        let entries = publish::list_areas_trusting(dir, trust).map_err(|e| {
            format!(
                "could not list \"{}\": {e}; give the directory pageio processes publish in with --aio-publish-dir DIR",
                dir.display()
            )
        })?;
        let mut scan = Scan {
            processes: Vec::new(),
            stale: Vec::new(),
            unreadable: Vec::new(),
            untrusted: Vec::new(),
            not_permitted: 0,
        };
        for entry in entries {
            match entry {
                AreaEntry::Live(area) => {
                    if pid.is_none_or(|p| p == area.header.pid) {
                        scan.processes.push(area);
                    }
                }
                AreaEntry::Stale { area, reason } => {
                    let (removed, remove_error) = match publish::remove_stale(&area) {
                        Ok(removed) => (removed, None),
                        Err(e) => (false, Some(e.to_string())),
                    };
                    scan.stale.push(StaleArea {
                        pid: area.header.pid,
                        path: area.path,
                        reason: reason.to_string(),
                        removed,
                        remove_error,
                        header: area.header,
                    });
                }
                AreaEntry::Unreadable {
                    error: publish::PublishError::Io { source, .. },
                    ..
                } if source.kind() == std::io::ErrorKind::PermissionDenied => {
                    scan.not_permitted += 1;
                }
                AreaEntry::Unreadable {
                    path,
                    error: error @ publish::PublishError::Untrusted { .. },
                } => {
                    let text = error.to_string();
                    if let publish::PublishError::Untrusted {
                        owner_uid,
                        mode,
                        why,
                        ..
                    } = error
                    {
                        scan.untrusted.push(Untrusted {
                            path,
                            owner_uid,
                            mode: format!("{mode:04o}"),
                            why,
                            error: text,
                        });
                    }
                }
                AreaEntry::Unreadable { path, error } => {
                    scan.unreadable.push((path, error.to_string()));
                }
            }
        }
        Ok(scan)
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "depth_buckets": (0..DEPTH_BUCKETS).map(depth_bucket_label).collect::<Vec<_>>(),
            "processes": self.processes,
            "stale": self.stale,
            "unreadable": self.unreadable.iter().map(|(path, error)| {
                serde_json::json!({"path": path, "error": error})
            }).collect::<Vec<_>>(),
            "untrusted": self.untrusted,
            "not_permitted": self.not_permitted,
        })
    }

    /// The unreadable and untrusted areas, one warning each on stderr (the error names the
    /// file).
    fn print_warnings(&self) {
        for (_, error) in &self.unreadable {
            eprintln!("pageio: warning: {error}");
        }
        for u in &self.untrusted {
            eprintln!("pageio: warning: {} (--trust-others reads it)", u.error);
        }
    }

    fn to_text(&self, dir: &Path) -> String {
        let mut out = String::new();
        if self.processes.is_empty() {
            out.push_str(&format!(
                "no pageio process publishes its AIO state in \"{}\"\n",
                dir.display()
            ));
        }
        for area in &self.processes {
            out.push_str(&summary_text(area));
            out.push_str(&rows_table(&area.sample.rows));
            out.push('\n');
        }
        if self.not_permitted > 0 {
            out.push_str(&format!(
                "{} more process{} of other users (their files are readable by their owner and root only)\n",
                self.not_permitted,
                if self.not_permitted == 1 { "" } else { "es" }
            ));
        }
        for s in &self.stale {
            out.push_str(&format!(
                "stale: \"{}\" (pid {}: {}): {}\n",
                s.path.display(),
                s.pid,
                s.reason,
                match (&s.removed, &s.remove_error) {
                    (true, _) => "removed".to_string(),
                    (false, Some(e)) => format!("not removed: {e}"),
                    (false, None) => "not removed (it changed meanwhile)".to_string(),
                }
            ));
        }
        out
    }
}

fn on_off(v: bool) -> &'static str {
    if v {
        "on"
    } else {
        "off"
    }
}

fn pool_text(pool: &publish::PublishedPool) -> String {
    format!(
        "{} workers ({} busy, {}..{}{}), {} queued",
        pool.workers,
        pool.busy_workers,
        pool.min_workers,
        pool.max_workers,
        if pool.adaptive { ", adaptive" } else { "" },
        pool.queued_ios
    )
}

/// The per-process summary of a snapshot.
fn summary_text(area: &PublishedArea) -> String {
    let h = &area.header;
    let s = &area.sample;
    let c = &s.counters;
    let mut out = format!(
        "pid {} ({}): {}\n  io_method {}, effective_io_concurrency {}, io_combine_limit {} blocks, io_max_concurrency {}, direct_io {}\n  I/Os {} (kernel {}, merged {}), blocks {}, bytes {}, io time {:.1} ms, wait time {:.1} ms in {} waits, errors {}, partial {}\n",
        h.pid,
        area.path.display(),
        h.program,
        h.io_method,
        h.effective_io_concurrency,
        h.io_combine_limit_blocks,
        h.io_max_concurrency,
        on_off(h.direct_io),
        c.ios_issued,
        c.kernel_ios,
        c.ios_merged,
        c.blocks,
        c.bytes,
        c.io_ns as f64 / 1e6,
        c.wait_ns as f64 / 1e6,
        c.waits,
        c.errors,
        c.partials,
    );
    if let Some(pool) = &s.pool {
        out.push_str(&format!("  worker pool: {}\n", pool_text(pool)));
    }
    if s.backend_counters.len() > 1 {
        for b in &s.backend_counters {
            out.push_str(&format!(
                "  backend {} (thread {}{}): I/Os {}, bytes {}, io time {:.1} ms, wait time {:.1} ms, errors {}\n",
                b.id,
                b.tid,
                if b.active { "" } else { ", released" },
                b.counters.ios_issued,
                b.counters.bytes,
                b.counters.io_ns as f64 / 1e6,
                b.counters.wait_ns as f64 / 1e6,
                b.counters.errors
            ));
        }
    }
    out.push_str(&format!(
        "  backends {}, in flight now {}, handles in use {}{}\n",
        s.backends,
        s.depth_now,
        s.rows_total,
        if s.rows_cut > 0 {
            format!(
                " ({} not shown: at most {} are published)",
                s.rows_cut,
                publish::MAX_ROWS
            )
        } else {
            String::new()
        }
    ));
    out
}

/// `pg_aios`'s columns, in its order and spelling.
const PG_AIOS_COLUMNS: [&str; 15] = [
    "pid",
    "io_id",
    "io_generation",
    "state",
    "operation",
    "off",
    "length",
    "target",
    "handle_data_len",
    "raw_result",
    "result",
    "target_desc",
    "f_sync",
    "f_localmem",
    "f_buffered",
];

fn pg_bool(v: bool) -> String {
    if v { "t" } else { "f" }.to_string()
}

fn row_cells(r: &PublishedRow) -> [String; 15] {
    [
        r.pid.to_string(),
        r.io_id.to_string(),
        r.io_generation.to_string(),
        r.state.clone(),
        r.operation.clone(),
        r.off.to_string(),
        r.length.to_string(),
        r.target.clone(),
        r.handle_data_len.to_string(),
        r.raw_result.map(|v| v.to_string()).unwrap_or_default(),
        r.result.clone(),
        r.target_desc.clone(),
        pg_bool(r.f_sync),
        pg_bool(r.f_localmem),
        pg_bool(r.f_buffered),
    ]
}

/// The rows as psql prints a result: aligned columns, a `(N rows)` footer.
fn rows_table(rows: &[PublishedRow]) -> String {
    let cells: Vec<[String; 15]> = rows.iter().map(row_cells).collect();
    let mut widths: Vec<usize> = PG_AIOS_COLUMNS.iter().map(|c| c.len()).collect();
    for row in &cells {
        for (w, cell) in widths.iter_mut().zip(row.iter()) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| -> String {
        let parts: Vec<String> = cells
            .zip(widths.iter())
            .map(|(c, w)| format!(" {c:<w$} "))
            .collect();
        parts.join("|").trim_end().to_string()
    };
    let mut out = String::new();
    out.push_str(&line(&mut PG_AIOS_COLUMNS.iter().copied()));
    out.push('\n');
    out.push_str(
        &widths
            .iter()
            .map(|w| "-".repeat(w + 2))
            .collect::<Vec<_>>()
            .join("+"),
    );
    out.push('\n');
    for row in &cells {
        out.push_str(&line(&mut row.iter().map(String::as_str)));
        out.push('\n');
    }
    out.push_str(&format!(
        "({} row{})\n",
        rows.len(),
        if rows.len() == 1 { "" } else { "s" }
    ));
    out
}

// ---------------------------------------------------------------------------------------
// --watch
// ---------------------------------------------------------------------------------------

/// The rates of one process over one interval.
struct ProcessView {
    area: PublishedArea,
    /// `None` on the first refresh (nothing to difference yet) or after a restart.
    rates: Option<Rates>,
}

struct Rates {
    ios_per_s: f64,
    mb_per_s: f64,
    avg_io_bytes: f64,
    wait_ms_per_s: f64,
    /// Depth samples per bucket over the interval.
    depth_histogram: [u64; DEPTH_BUCKETS],
}

fn rates(before: &AreaSample, now: &AreaSample) -> Option<Rates> {
    let elapsed_ns = now.sampled_at_ns.checked_sub(before.sampled_at_ns)?;
    if elapsed_ns == 0 || now.publishes < before.publishes {
        return None;
    }
    let secs = elapsed_ns as f64 / 1e9;
    let d = |a: u64, b: u64| b.saturating_sub(a) as f64;
    let ios = d(before.counters.ios_issued, now.counters.ios_issued);
    let bytes = d(before.counters.bytes, now.counters.bytes);
    let mut depth_histogram = [0u64; DEPTH_BUCKETS];
    for (i, v) in depth_histogram.iter_mut().enumerate() {
        *v = now.depth_histogram[i].saturating_sub(before.depth_histogram[i]);
    }
    Some(Rates {
        ios_per_s: ios / secs,
        mb_per_s: bytes / secs / 1e6,
        avg_io_bytes: if ios > 0.0 { bytes / ios } else { 0.0 },
        wait_ms_per_s: d(before.counters.wait_ns, now.counters.wait_ns) / 1e6 / secs,
        depth_histogram,
    })
}

/// The depth histogram over the interval as `bucket:percent` for the non-empty buckets.
fn histogram_text(h: &[u64; DEPTH_BUCKETS]) -> String {
    let total: u64 = h.iter().sum();
    if total == 0 {
        return "-".into();
    }
    h.iter()
        .enumerate()
        .filter(|(_, &n)| n > 0)
        .map(|(i, &n)| {
            format!(
                "{}:{:.0}%",
                depth_bucket_label(i),
                n as f64 * 100.0 / total as f64
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// One refresh of `--watch`.
struct WatchView {
    dir: PathBuf,
    interval: Duration,
    processes: Vec<ProcessView>,
    notes: Vec<String>,
}

impl WatchView {
    fn process_line(p: &ProcessView) -> String {
        let h = &p.area.header;
        let s = &p.area.sample;
        let rate = |f: &dyn Fn(&Rates) -> String| p.rates.as_ref().map(f).unwrap_or("-".into());
        let mut line = format!(
            "pid={} io_method={} ios_per_s={} mb_per_s={} depth={} depth_hist={} avg_io_kb={} wait_ms_per_s={}",
            h.pid,
            h.io_method,
            rate(&|r| format!("{:.0}", r.ios_per_s)),
            rate(&|r| format!("{:.1}", r.mb_per_s)),
            s.depth_now,
            rate(&|r| histogram_text(&r.depth_histogram).replace(' ', ",")),
            rate(&|r| format!("{:.1}", r.avg_io_bytes / 1024.0)),
            rate(&|r| format!("{:.1}", r.wait_ms_per_s)),
        );
        if let Some(pool) = &s.pool {
            line.push_str(&format!(
                " workers={} busy={} queued={}",
                pool.workers, pool.busy_workers, pool.queued_ios
            ));
        }
        line.push_str(&format!(
            " ios={} in_use={} program={}",
            s.counters.ios_issued, s.rows_total, h.program
        ));
        line
    }
}

impl term::View for WatchView {
    fn draw(&self, frame: &mut ratatui::Frame) {
        let bold = Style::default().add_modifier(Modifier::BOLD);
        let mut lines = vec![Line::styled(
            format!(
                "pageio aios — {} process{} publishing in {} — every {:.1} s — q quits",
                self.processes.len(),
                if self.processes.len() == 1 { "" } else { "es" },
                self.dir.display(),
                self.interval.as_secs_f64()
            ),
            bold,
        )];
        for p in &self.processes {
            let h = &p.area.header;
            let s = &p.area.sample;
            lines.push(Line::raw(""));
            lines.push(Line::styled(
                format!("pid {} [{}] {}", h.pid, h.io_method, h.program),
                bold,
            ));
            let fmt = |f: &dyn Fn(&Rates) -> String| p.rates.as_ref().map(f).unwrap_or("-".into());
            lines.push(Line::raw(format!(
                "  I/Os/s {:>8}   MB/s {:>8}   avg I/O {:>7} kB   in flight {:>4}   wait {:>7} ms/s",
                fmt(&|r| format!("{:.0}", r.ios_per_s)),
                fmt(&|r| format!("{:.1}", r.mb_per_s)),
                fmt(&|r| format!("{:.1}", r.avg_io_bytes / 1024.0)),
                s.depth_now,
                fmt(&|r| format!("{:.1}", r.wait_ms_per_s)),
            )));
            lines.push(Line::raw(format!(
                "  depth histogram (interval): {}",
                fmt(&|r| histogram_text(&r.depth_histogram))
            )));
            lines.push(Line::raw(match &s.pool {
                Some(pool) => format!(
                    "  worker pool: {}   I/Os {}   errors {}",
                    pool_text(pool),
                    s.counters.ios_issued,
                    s.counters.errors
                ),
                None => format!(
                    "  I/Os {}   errors {}   effective_io_concurrency {}",
                    s.counters.ios_issued, s.counters.errors, h.effective_io_concurrency
                ),
            }));
        }
        for note in &self.notes {
            lines.push(Line::raw(note.clone()));
        }
        let area = frame.area();
        let top_height = (lines.len() as u16 + 1).min(area.height.saturating_sub(3));
        let [top, bottom] =
            Layout::vertical([Constraint::Length(top_height), Constraint::Min(0)]).areas(area);
        frame.render_widget(Paragraph::new(lines), top);

        const COLUMNS: [&str; 11] = [
            "pid",
            "io_id",
            "io_generation",
            "state",
            "operation",
            "off",
            "length",
            "result",
            "f_sync",
            "f_buffered",
            "target_desc",
        ];
        let rows: Vec<Row> = self
            .processes
            .iter()
            .flat_map(|p| p.area.sample.rows.iter())
            .map(|r| {
                Row::new(vec![
                    r.pid.to_string(),
                    r.io_id.to_string(),
                    r.io_generation.to_string(),
                    r.state.clone(),
                    r.operation.clone(),
                    r.off.to_string(),
                    r.length.to_string(),
                    r.result.clone(),
                    pg_bool(r.f_sync),
                    pg_bool(r.f_buffered),
                    r.target_desc.clone(),
                ])
            })
            .collect();
        let widths = [
            Constraint::Length(8),
            Constraint::Length(6),
            Constraint::Length(13),
            Constraint::Length(16),
            Constraint::Length(9),
            Constraint::Length(12),
            Constraint::Length(8),
            Constraint::Length(7),
            Constraint::Length(6),
            Constraint::Length(10),
            Constraint::Min(20),
        ];
        let table = Table::new(rows, widths).header(Row::new(COLUMNS.to_vec()).style(bold));
        frame.render_widget(table, bottom);
    }

    fn plain_lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self.processes.iter().map(WatchView::process_line).collect();
        if lines.is_empty() {
            lines.push(format!(
                "no pageio process publishes its AIO state in \"{}\"",
                self.dir.display()
            ));
        }
        lines.extend(self.notes.iter().cloned());
        lines
    }
}

/// The state `--watch` keeps between refreshes: the previous sample of each area.
struct Watcher {
    dir: PathBuf,
    pid: Option<i32>,
    trust: AreaTrust,
    interval: Duration,
    previous: HashMap<PathBuf, AreaSample>,
    refreshes: u64,
}

/// Builds with debug assertions (the test profile) panic at this refresh when it is set, so
/// a test can check that a panic leaves the terminal clean. Release builds ignore it.
const PANIC_AT_REFRESH_ENV: &str = "PAGEIO_AIOS_PANIC_AT_REFRESH";

impl Watcher {
    fn sample(&mut self) -> Result<WatchView, String> {
        self.refreshes += 1;
        if cfg!(debug_assertions)
            && std::env::var(PANIC_AT_REFRESH_ENV).ok() == Some(self.refreshes.to_string())
        {
            panic!(
                "injected panic at refresh {} ({PANIC_AT_REFRESH_ENV})",
                self.refreshes
            );
        }
        let scan = Scan::take(&self.dir, self.pid, self.trust)?;
        let mut notes = Vec::new();
        for s in &scan.stale {
            notes.push(format!(
                "stale: \"{}\" (pid {}: {}){}",
                s.path.display(),
                s.pid,
                s.reason,
                if s.removed { ": removed" } else { "" }
            ));
        }
        for (_, error) in &scan.unreadable {
            notes.push(format!("unreadable: {error}"));
        }
        for u in &scan.untrusted {
            notes.push(format!(
                "untrusted, skipped: \"{}\" (uid {}, mode {}): {}",
                u.path.display(),
                u.owner_uid,
                u.mode,
                u.why
            ));
        }
        if let Some(pid) = self.pid {
            if scan.processes.is_empty() {
                notes.push(format!("process {pid} publishes nothing (any more)"));
            }
        }
        let mut next = HashMap::new();
        let processes = scan
            .processes
            .into_iter()
            .map(|area| {
                let rates = self
                    .previous
                    .get(&area.path)
                    .and_then(|before| rates(before, &area.sample));
                next.insert(area.path.clone(), area.sample.clone());
                ProcessView { area, rates }
            })
            .collect();
        self.previous = next;
        Ok(WatchView {
            dir: self.dir.clone(),
            interval: self.interval,
            processes,
            notes,
        })
    }
}
