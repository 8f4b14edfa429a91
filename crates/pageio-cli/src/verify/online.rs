//! `pageio verify --online PGDATA` (and `pageio checksums --check --online`): the checksums
//! of a running cluster, with no downtime and no false alarm.
//!
//! The rule that tells a page being written from a damaged one, its bounds and what it cannot
//! see are the library's (`pageio::verify::online`); this module holds the flags and the
//! printing:
//!
//! ```text
//!   --ionice ─► ioprio_set on this thread (the engine's threads, started after, inherit it)
//!   start_online_check: a live postmaster, pg_control (CRC re-read), checksums on
//!   --dsn: connect (read-only, bounded); --checkpoint: CHECKPOINT on a session of its own,
//!          then pg_control read again for the new redo LSN
//!   check_cluster_online (--max-rate, --jobs) ─► per file: corrupt pages on stderr, named
//!          through pg_filenode_relation with --dsn; progress with the counts
//!   summary (text or --json), exit 1 when a page is corrupt
//! ```
//!
//! With `--dsn` the statements sent are exactly: one `SELECT` of `pg_database` at the start,
//! one `SELECT pg_filenode_relation(…)` per corrupt page (on a connection to that page's
//! database), and `CHECKPOINT` only with `--checkpoint`.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use pageio::verify::online::format_lsn;
use pageio::verify::{
    check_cluster_online, start_online_check, ClusterFile, ControlFile, OnlineFailure,
    OnlineFileOutcome, OnlineOptions, OnlineTotals, PartialTail,
};
use pageio::Aio;

use super::{data_directory, jobs_flag, print_summary, start_engine, Fatal, Progress, VerifyArgs};
use crate::live::{parse_dsn, Session, SessionLimits};

/// The flags of a check of a running cluster.
#[derive(Debug, Args, Default)]
pub struct OnlineArgs {
    /// Check a running cluster: a page that fails is re-read, and one that keeps failing but
    /// is newer than the last checkpoint is skipped as being written (as pg_basebackup does)
    #[arg(long)]
    pub(crate) online: bool,
    /// With --online: a connection (libpq key=value) to name the relations of corrupt pages
    /// and to run CHECKPOINT with --checkpoint; read-only, every wait bounded
    #[arg(long, value_name = "DSN", requires = "online")]
    pub(crate) dsn: Option<String>,
    /// With --dsn: run CHECKPOINT first (as pg_basebackup --checkpoint=fast), so fewer pages
    /// are newer than the redo point; needs superuser or the pg_checkpoint role
    #[arg(long, requires = "dsn")]
    pub(crate) checkpoint: bool,
    /// With --online: the most to read per second, as pg_basebackup's --max-rate: kB/s, or
    /// with a suffix k (kB/s) or M (MB/s); 32k to 1024M
    #[arg(long, value_name = "RATE", requires = "online")]
    pub(crate) max_rate: Option<String>,
    /// The I/O priority of the check (ioprio_set(2), as ionice(1)): idle, or best-effort[:N]
    /// with N from 0 (highest) to 7; honoured by the bfq and mq-deadline schedulers
    #[arg(long, value_name = "idle|best-effort[:N]")]
    pub(crate) ionice: Option<String>,
}

/// `pg_basebackup`'s bounds on `--max-rate`, in kB/s (`MAX_RATE_LOWER`, `MAX_RATE_UPPER`).
const MAX_RATE_LOWER_KB: f64 = 32.0;
const MAX_RATE_UPPER_KB: f64 = 1_048_576.0;

/// Statement timeout of the naming session: a `SELECT` of one catalog row.
const NAMING_SESSION: SessionLimits = SessionLimits {
    application_name: "pageio verify --online",
    statement_timeout_ms: 5_000,
};

/// Statement timeout of the session that runs `CHECKPOINT`: it writes every dirty buffer of
/// the server at full speed, which on a large `shared_buffers` over a slow disk takes
/// minutes; 10 minutes is far past that and still ends a wait that would never end.
const CHECKPOINT_SESSION: SessionLimits = SessionLimits {
    application_name: "pageio verify --online",
    statement_timeout_ms: 600_000,
};

/// `--max-rate` as `pg_basebackup` reads it, in bytes per second: a number (a fraction is
/// allowed) of kB/s, or with the suffix `k` (kB/s) or `M` (MB/s), within 32 kB/s..1 GB/s.
pub(crate) fn parse_max_rate(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (number, unit_kb) = match t.strip_suffix('M') {
        Some(n) => (n, 1024.0),
        None => (t.strip_suffix('k').unwrap_or(t), 1.0),
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("--max-rate {text}: not a number of kB/s with an optional k or M suffix (e.g. 512k, 100M)"))?;
    let kb = value * unit_kb;
    if !kb.is_finite() || kb <= 0.0 {
        return Err(format!(
            "--max-rate {text}: the rate must be greater than zero"
        ));
    }
    if !(MAX_RATE_LOWER_KB..=MAX_RATE_UPPER_KB).contains(&kb) {
        return Err(format!(
            "--max-rate {text}: out of range; give 32k to 1024M, as pg_basebackup accepts"
        ));
    }
    Ok((kb * 1024.0) as u64)
}

/// `ioprio_set(2)`'s "which" for one thread (or process) and its priority classes.
const IOPRIO_WHO_PROCESS: libc::c_int = 1;
const IOPRIO_CLASS_SHIFT: u32 = 13;
const IOPRIO_CLASS_BE: u32 = 2;
const IOPRIO_CLASS_IDLE: u32 = 3;

/// `--ionice` as an ioprio value.
pub(crate) fn parse_ionice(text: &str) -> Result<u32, String> {
    let bad = || format!("--ionice {text}: give idle, or best-effort[:N] with N from 0 to 7");
    match text.split_once(':') {
        None if text == "idle" => Ok(IOPRIO_CLASS_IDLE << IOPRIO_CLASS_SHIFT),
        None if text == "best-effort" => Ok((IOPRIO_CLASS_BE << IOPRIO_CLASS_SHIFT) | 4),
        Some(("best-effort", level)) => match level.parse::<u32>() {
            Ok(n) if n <= 7 => Ok((IOPRIO_CLASS_BE << IOPRIO_CLASS_SHIFT) | n),
            _ => Err(bad()),
        },
        _ => Err(bad()),
    }
}

/// Sets the I/O priority of this thread (threads started later inherit it) and reads it
/// back, so the report says what the kernel holds.
pub(super) fn set_ionice(ioprio: u32) -> Result<u32, Fatal> {
    // SAFETY: ioprio_set and ioprio_get take integers only; who = 0 is the calling thread.
    let (set, got) = unsafe {
        (
            libc::syscall(
                libc::SYS_ioprio_set,
                IOPRIO_WHO_PROCESS,
                0,
                ioprio as libc::c_int,
            ),
            libc::syscall(libc::SYS_ioprio_get, IOPRIO_WHO_PROCESS, 0),
        )
    };
    if set != 0 || got < 0 {
        return Err(Fatal::usage(
            format!(
                "--ionice: the kernel refused the I/O priority: {}",
                std::io::Error::last_os_error()
            ),
            "run without --ionice, or with ionice(1) around the command",
        ));
    }
    Ok(got as u32)
}

/// `idle` or `best-effort:N`, from an ioprio value.
fn describe_ioprio(ioprio: u32) -> String {
    match ioprio >> IOPRIO_CLASS_SHIFT {
        IOPRIO_CLASS_IDLE => "idle".into(),
        IOPRIO_CLASS_BE => format!("best-effort:{}", ioprio & 7),
        1 => format!("realtime:{}", ioprio & 7),
        _ => "none".into(),
    }
}

/// A usage error naming the flag, exit 1 (as `pg_checksums`' usage errors).
fn usage(message: String) -> Fatal {
    Fatal::usage(message, "see pageio verify --help")
}

/// An error of the server connection: exit 2 (pg_checksums has no counterpart).
fn server(e: impl std::error::Error + 'static) -> Fatal {
    Fatal::Setup {
        kind: "server",
        error: Box::new(e),
    }
}

/// The whole online run; exit status 0 when no page is corrupt, 1 when one is.
pub(crate) fn verify_online(args: VerifyArgs) -> Result<i32, Fatal> {
    let datadir = PathBuf::from(data_directory(&args)?);
    let jobs = jobs_flag(args.jobs).map_err(|(m, h)| Fatal::usage(m, h))?;
    let online = &args.online;
    let max_rate = online
        .max_rate
        .as_deref()
        .map(parse_max_rate)
        .transpose()
        .map_err(usage)?;
    let ionice = match online.ionice.as_deref() {
        Some(text) => Some(set_ionice(parse_ionice(text).map_err(usage)?)?),
        None => None,
    };
    let mut control = start_online_check(&datadir)?;
    let mut namer = match &online.dsn {
        Some(dsn) => Some(Namer::connect(dsn).map_err(server)?),
        None => None,
    };
    if online.checkpoint {
        if let Some(dsn) = &online.dsn {
            checkpoint(dsn)?;
            control = start_online_check(&datadir)?;
        }
    }
    let aio = start_engine(&args.settings, jobs)?;
    let options = OnlineOptions {
        jobs,
        max_rate_bytes_per_s: max_rate,
        redo_lsn: control.redo_lsn,
        filenode: args.filenode,
    };
    let started = Instant::now();
    let total_bytes = pageio::verify::walk_cluster_online(datadir.as_os_str(), args.filenode)
        .map(|(files, _)| files.iter().map(|f| f.size_bytes).sum())
        .unwrap_or(0);
    let checked = run_check(&aio, &datadir, &options, &args, namer.as_mut(), total_bytes);
    if let Some(namer) = namer {
        namer.close();
    }
    let (totals, findings) = checked?;
    let elapsed_s = started.elapsed().as_secs_f64();
    if args.json {
        print_json(
            &totals, &findings, &control, &aio, &options, ionice, elapsed_s,
        )?;
    } else {
        print_text(&totals, &control);
    }
    Ok(
        if totals.bad_checksums > 0 || totals.files_partial_block > 0 {
            1
        } else {
            0
        },
    )
}

/// A corrupt page as reported: the file, the library's finding and the relation's name.
struct Corrupt {
    file: String,
    failure: OnlineFailure,
    database: Option<String>,
    relation: Option<String>,
}

/// A file cut mid-page, as reported: the file, the partial block and the relation's name.
struct Cut {
    file: String,
    tail: PartialTail,
    database: Option<String>,
    relation: Option<String>,
}

/// What a run found besides the totals: the corrupt pages, the files cut mid-page.
struct Findings {
    corrupt: Vec<Corrupt>,
    cut: Vec<Cut>,
}

/// What a run found.
type Found = (OnlineTotals, Findings);

/// Runs the check, printing each corrupt page and each file cut mid-page on stderr as its
/// file finishes, and the progress with the counts.
fn run_check(
    aio: &Aio,
    datadir: &Path,
    options: &OnlineOptions,
    args: &VerifyArgs,
    mut namer: Option<&mut Namer>,
    total_bytes: u64,
) -> Result<Found, Fatal> {
    let progress = std::cell::RefCell::new(Progress::new(args.progress, total_bytes));
    let bar = progress.borrow().bar.clone();
    let mut corrupt = Vec::new();
    let mut cut = Vec::new();
    let mut counts = OnlineTotals::default();
    let redo = options.redo_lsn;
    let result = check_cluster_online(
        aio,
        datadir,
        options,
        |file: &ClusterFile, outcome: &OnlineFileOutcome| {
            counts.blocks_scanned += outcome.blocks_scanned;
            counts.pages_reread += outcome.pages_reread;
            counts.pages_skipped += outcome.pages_skipped;
            counts.bad_checksums += outcome.corrupt.len() as u64;
            if let Some(tail) = &outcome.partial_tail {
                let (database, relation) = match namer.as_deref_mut() {
                    Some(namer) => namer.name(&file.path),
                    None => (None, None),
                };
                let line = partial_line(&file.display, tail, relation.as_deref());
                bar.suspend(|| {
                    let _ = writeln!(std::io::stderr(), "{line}");
                });
                cut.push(Cut {
                    file: file.display.to_string(),
                    tail: tail.clone(),
                    database,
                    relation,
                });
            }
            for failure in &outcome.corrupt {
                let (database, relation) = match namer.as_deref_mut() {
                    Some(namer) => namer.name(&file.path),
                    None => (None, None),
                };
                let line = failure_line(&file.display, failure, redo, relation.as_deref());
                bar.suspend(|| {
                    let _ = writeln!(std::io::stderr(), "{line}");
                });
                corrupt.push(Corrupt {
                    file: file.display.to_string(),
                    failure: failure.clone(),
                    database,
                    relation,
                });
            }
            if args.verbose && outcome.corrupt.is_empty() && !outcome.vanished {
                bar.suspend(|| {
                    let _ = writeln!(
                        std::io::stderr(),
                        "pageio: checksums verified in file \"{}\"",
                        file.display
                    );
                });
            }
            progress.borrow_mut().set_counts(format!(
                "{} pages checked, {} re-read, {} skipped, {} corrupt",
                counts.blocks_scanned,
                counts.pages_reread,
                counts.pages_skipped,
                counts.bad_checksums
            ));
        },
        |bytes| progress.borrow_mut().update(bytes),
    );
    progress
        .into_inner()
        .finish(result.as_ref().ok().map(|t| t.bytes_read));
    Ok((result?, Findings { corrupt, cut }))
}

/// The line for a file cut mid-page.
fn partial_line(file: &str, tail: &PartialTail, relation: Option<&str>) -> String {
    let named = relation
        .map(|r| format!(" (relation {r})"))
        .unwrap_or_default();
    format!(
        "pageio: error: file \"{file}\"{named} ends in a partial block: block {} has {} of 8192 bytes, and the size ({} bytes) did not change over {} re-checks {} ms apart; the server writes whole blocks, so the file was cut mid-page (the rest of that page and any later rows are lost): restore the relation from a backup",
        tail.block,
        tail.bytes,
        tail.size_bytes,
        pageio::verify::REREADS,
        pageio::verify::REREAD_DELAY.as_millis()
    )
}

/// `pg_checksums`' failure line, with what the online rule saw.
fn failure_line(file: &str, f: &OnlineFailure, redo_lsn: u64, relation: Option<&str>) -> String {
    let named = relation
        .map(|r| format!(" (relation {r})"))
        .unwrap_or_default();
    format!(
        "pageio: error: checksum verification failed in file \"{file}\"{named}, block {}: calculated checksum {:X} but block contains {:X}; page LSN {} is older than the redo LSN {}, {} of {} reads agreed",
        f.block,
        f.calculated,
        f.stored,
        format_lsn(f.page_lsn),
        format_lsn(redo_lsn),
        f.reads_agreed,
        f.reads
    )
}

/// Runs `CHECKPOINT` on a session of its own, whose statement timeout and wait are long
/// enough for a checkpoint (see [`CHECKPOINT_SESSION`]). PostgreSQL runs it in a read-only
/// transaction (it changes no table), so the session stays read-only.
fn checkpoint(dsn: &str) -> Result<(), Fatal> {
    let config =
        parse_dsn(dsn, &|name| std::env::var(name).ok(), CHECKPOINT_SESSION).map_err(server)?;
    let mut session = Session::connect(config).map_err(server)?;
    let bound = CHECKPOINT_SESSION.bound_for(1);
    let result = session.run("running CHECKPOINT", bound, |client| {
        client.batch_execute("CHECKPOINT")
    });
    let target = session.target().to_string();
    session.close(CLOSE_BOUND);
    match result {
        Ok(()) => Ok(()),
        Err(e) if e.to_string().contains("42501") || e.to_string().contains("permission denied") => {
            Err(usage(format!(
                "PostgreSQL at {target} refused CHECKPOINT: the role of --dsn is neither superuser nor a member of pg_checkpoint; GRANT pg_checkpoint TO it, or run without --checkpoint ({e})"
            )))
        }
        Err(e) => Err(server(e)),
    }
}

/// Names relations through the server: `pg_filenode_relation` on a connection to each
/// page's database (a relation's filenode means something only in its own database).
struct Namer {
    dsn: String,
    /// Database OID → (name, accepts connections).
    databases: HashMap<u32, (String, bool)>,
    sessions: HashMap<u32, Session>,
    first: Option<Session>,
}

/// The most the run waits for a session to close cleanly at its end.
const CLOSE_BOUND: std::time::Duration = std::time::Duration::from_secs(2);

/// The `pg_tblspc/<oid>` of a shared relation's tablespace (`pg_global`).
const GLOBALTABLESPACE_OID: u32 = 1664;

impl Namer {
    fn connect(dsn: &str) -> Result<Namer, crate::live::ServerError> {
        let config = parse_dsn(dsn, &|name| std::env::var(name).ok(), NAMING_SESSION)?;
        let mut session = Session::connect(config)?;
        let rows = session.run(
            "reading pg_database",
            NAMING_SESSION.bound_for(1),
            |client| client.query("SELECT oid, datname, datallowconn FROM pg_database", &[]),
        )?;
        let databases = rows
            .iter()
            .map(|row| {
                let oid: u32 = row.get(0);
                let name: String = row.get(1);
                let allow: bool = row.get(2);
                (oid, (name, allow))
            })
            .collect();
        Ok(Namer {
            dsn: dsn.to_string(),
            databases,
            sessions: HashMap::new(),
            first: Some(session),
        })
    }

    /// (database, relation) of a relation file, as far as the server can say; a lookup that
    /// fails leaves the name out (the page is reported all the same).
    fn name(&mut self, path: &Path) -> (Option<String>, Option<String>) {
        let Some((database, tablespace, filenode)) = locate(path) else {
            return (None, None);
        };
        let db_name = database.and_then(|oid| self.databases.get(&oid).map(|(n, _)| n.clone()));
        let session = match database {
            None => self.first.as_mut(),
            Some(oid) => self.session_for(oid),
        };
        let Some(session) = session else {
            return (db_name, None);
        };
        let relation = session
            .run(
                "naming a relation",
                NAMING_SESSION.bound_for(1),
                move |client| {
                    client
                        .query_one(
                            "SELECT pg_filenode_relation($1, $2)::regclass::text",
                            &[&tablespace, &filenode],
                        )
                        .map(|row| row.get::<_, Option<String>>(0))
                },
            )
            .ok()
            .flatten();
        (db_name, relation)
    }

    /// Closes every session (see [`Session::close`]).
    fn close(self) {
        for session in self.first.into_iter().chain(self.sessions.into_values()) {
            session.close(CLOSE_BOUND);
        }
    }

    /// A session connected to database `oid`, if it accepts connections.
    fn session_for(&mut self, oid: u32) -> Option<&mut Session> {
        if !self.sessions.contains_key(&oid) {
            let (name, allow) = self.databases.get(&oid)?;
            if !allow {
                return None;
            }
            let mut config =
                parse_dsn(&self.dsn, &|name| std::env::var(name).ok(), NAMING_SESSION).ok()?;
            config.dbname(name);
            let session = Session::connect(config).ok()?;
            self.sessions.insert(oid, session);
        }
        self.sessions.get_mut(&oid)
    }
}

/// (database OID — none for `global/` —, tablespace OID as `pg_filenode_relation` takes it,
/// filenode) of a relation file's path: `global/N`, `base/D/N`, `pg_tblspc/T/PG_18_*/D/N`.
fn locate(path: &Path) -> Option<(Option<u32>, u32, u32)> {
    let parts: Vec<&str> = path.iter().filter_map(|p| p.to_str()).collect();
    let n = parts.len();
    let name = parts.get(n.checked_sub(1)?)?;
    let digits: String = name.chars().take_while(char::is_ascii_digit).collect();
    let filenode: u32 = digits.parse().ok()?;
    let parent = *parts.get(n.checked_sub(2)?)?;
    if parent == "global" {
        return Some((None, GLOBALTABLESPACE_OID, filenode));
    }
    let database: u32 = parent.parse().ok()?;
    if parts.get(n.checked_sub(3)?) == Some(&"base") {
        return Some((Some(database), 0, filenode));
    }
    if parts.get(n.checked_sub(5)?) == Some(&"pg_tblspc") {
        let tablespace: u32 = parts.get(n - 4)?.parse().ok()?;
        return Some((Some(database), tablespace, filenode));
    }
    None
}

/// The summary on stdout: `pg_checksums`' lines, then what the online rule counted.
fn print_text(totals: &OnlineTotals, control: &ControlFile) {
    print_summary(&format!(
        "Checksum operation completed\n\
         Files scanned:   {}\n\
         Blocks scanned:  {}\n\
         Bad checksums:  {}\n\
         Data checksum version: {}\n\
         Redo LSN:  {}\n\
         Pages re-read:  {}\n\
         Pages skipped (modified during the check):  {}\n\
         Files vanished:  {}\n\
         Files shrunk:  {}\n\
         Files cut mid-page:  {}\n\
         Files created during the check (not checked):  {}\n\
         Files of unlogged and temporary relations (not checked):  {}\n",
        totals.files_scanned,
        totals.blocks_scanned,
        totals.bad_checksums,
        control.data_checksum_version,
        format_lsn(totals.redo_lsn),
        totals.pages_reread,
        totals.pages_skipped,
        totals.files_vanished,
        totals.files_shrunk,
        totals.files_partial_block,
        totals.files_new,
        totals.files_unlogged_skipped,
    ));
}

/// The summary as one JSON object on stdout.
fn print_json(
    totals: &OnlineTotals,
    findings: &Findings,
    control: &ControlFile,
    aio: &Aio,
    options: &OnlineOptions,
    ionice: Option<u32>,
    elapsed_s: f64,
) -> Result<(), Fatal> {
    let failures: Vec<serde_json::Value> = findings
        .corrupt
        .iter()
        .map(|c| {
            serde_json::json!({
                "file": c.file,
                "block": c.failure.block,
                "calculated": c.failure.calculated,
                "stored": c.failure.stored,
                "page_lsn": format_lsn(c.failure.page_lsn),
                "reads": c.failure.reads,
                "reads_agreed": c.failure.reads_agreed,
                "database": c.database,
                "relation": c.relation,
            })
        })
        .collect();
    let partial_blocks: Vec<serde_json::Value> = findings
        .cut
        .iter()
        .map(|c| {
            serde_json::json!({
                "file": c.file,
                "block": c.tail.block,
                "bytes": c.tail.bytes,
                "size_bytes": c.tail.size_bytes,
                "database": c.database,
                "relation": c.relation,
            })
        })
        .collect();
    let summary = serde_json::json!({
        "online": true,
        "files_scanned": totals.files_scanned,
        "blocks_scanned": totals.blocks_scanned,
        "bad_checksums": totals.bad_checksums,
        "data_checksum_version": control.data_checksum_version,
        "redo_lsn": format_lsn(totals.redo_lsn),
        "pages_reread": totals.pages_reread,
        "pages_skipped": totals.pages_skipped,
        "files_vanished": totals.files_vanished,
        "files_shrunk": totals.files_shrunk,
        "files_partial_block": totals.files_partial_block,
        "partial_blocks": partial_blocks,
        "files_new": totals.files_new,
        "files_unlogged_skipped": totals.files_unlogged_skipped,
        "failures": failures,
        "bytes_read": totals.bytes_read,
        "elapsed_s": elapsed_s,
        "mb_per_s": totals.bytes_read as f64 / elapsed_s.max(1e-9) / 1e6,
        "max_rate_bytes_per_s": options.max_rate_bytes_per_s,
        "ionice": ionice.map(describe_ioprio),
        "io_method": aio.io_method().as_str(),
        "jobs": options.jobs,
        "rereads": pageio::verify::REREADS,
        "reread_delay_ms": pageio::verify::REREAD_DELAY.as_millis() as u64,
    });
    let text = serde_json::to_string_pretty(&summary).map_err(|e| Fatal::Setup {
        kind: "internal",
        error: e.into(),
    })?;
    print_summary(&format!("{text}\n"));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_rate_reads_as_pg_basebackup_reads_it() {
        assert_eq!(parse_max_rate("32"), Ok(32 * 1024));
        assert_eq!(parse_max_rate("512k"), Ok(512 * 1024));
        assert_eq!(parse_max_rate("100M"), Ok(100 * 1024 * 1024));
        assert_eq!(parse_max_rate("1024M"), Ok(1 << 30));
        assert!(parse_max_rate("31").unwrap_err().contains("out of range"));
        assert!(parse_max_rate("1025M")
            .unwrap_err()
            .contains("out of range"));
        assert!(parse_max_rate("0")
            .unwrap_err()
            .contains("greater than zero"));
        assert!(parse_max_rate("fast")
            .unwrap_err()
            .starts_with("--max-rate fast: not a number"));
    }

    #[test]
    fn ionice_classes() {
        assert_eq!(parse_ionice("idle"), Ok(3 << 13));
        assert_eq!(parse_ionice("best-effort:7"), Ok((2 << 13) | 7));
        assert_eq!(parse_ionice("best-effort"), Ok((2 << 13) | 4));
        assert!(parse_ionice("best-effort:8").is_err());
        assert!(parse_ionice("realtime").is_err());
        assert_eq!(describe_ioprio((2 << 13) | 7), "best-effort:7");
    }

    #[test]
    fn relation_files_locate_their_database_and_tablespace() {
        assert_eq!(
            locate(Path::new("/d/global/1262")),
            Some((None, 1664, 1262))
        );
        assert_eq!(
            locate(Path::new("/d/base/5/16384.2")),
            Some((Some(5), 0, 16384))
        );
        assert_eq!(
            locate(Path::new("/d/pg_tblspc/16500/PG_18_202506291/5/16390_fsm")),
            Some((Some(5), 16500, 16390))
        );
        assert_eq!(locate(Path::new("/d/other/5/16384")), None);
    }
}
