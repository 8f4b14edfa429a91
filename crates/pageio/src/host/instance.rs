//! Facts about a PostgreSQL instance, read from its data directory or configuration file.
//!
//! * `PG_VERSION` — the major version the cluster was initialised by;
//! * the settings as PostgreSQL resolves them at start: `postgresql.conf` with its
//!   `include`, `include_if_exists` and `include_dir` lines (through
//!   [`crate::config::read_conf_file`]), then `postgresql.auto.conf` (what `ALTER SYSTEM`
//!   writes), which PostgreSQL reads last so it wins; within them the last line setting a
//!   name wins. Each setting keeps the file and line it came from, for the report;
//! * data checksums, from `global/pg_control` read and CRC-checked by
//!   [`crate::page::control::ControlFile`] (PostgreSQL 18's layout; an older cluster's control
//!   file is reported as unreadable, not guessed);
//! * the database size: the bytes of every file under `base/`, `global/` and each
//!   tablespace linked from `pg_tblspc/` (what `pg_database_size` sums over all databases);
//! * whether a server is running: `postmaster.pid` names a process that exists (as
//!   `pg_ctl status` decides), beside pg_control's state.
//!
//! Nothing here writes, and nothing waits: every file is read once, and the directory walk
//! is bounded in depth and entries.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// Deepest directory level the size walk descends to below `base/`, `global/` or a
/// tablespace: relation files sit two levels down (`base/<db>/<file>`, or
/// `<tablespace>/PG_18_<catversion>/<db>/<file>` three down); anything deeper is not
/// PostgreSQL's and is not counted.
pub const MAX_SIZE_WALK_DEPTH: usize = 4;

/// Most directory entries the size walk visits: a cluster with millions of relation
/// segments is possible, beyond this the size is reported as at least what was counted.
pub const MAX_SIZE_WALK_ENTRIES: u64 = 10_000_000;

/// One setting's value and where it was set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SettingSource {
    /// The value as written (unquoted).
    pub value: String,
    /// The file that set it last.
    pub file: PathBuf,
    /// Its line; 0 when the source is not a line of a file (a running server's
    /// `pg_settings` row whose file this role may not see).
    pub line: usize,
}

impl SettingSource {
    /// `file:line`, as the report prints the source; just the source when there is no line.
    pub fn location(&self) -> String {
        if self.line == 0 {
            self.file.display().to_string()
        } else {
            format!("{}:{}", self.file.display(), self.line)
        }
    }
}

/// Whether the cluster's server is running.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunningState {
    /// The pid on `postmaster.pid`'s first line, when the file exists.
    pub postmaster_pid: Option<i32>,
    /// Whether that process exists.
    pub alive: bool,
    /// pg_control's state (`shut down`, `in production`, …), when readable.
    pub control_state: Option<String>,
}

/// What was read about one instance.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct InstanceFacts {
    /// The data directory, when given.
    pub pgdata: Option<PathBuf>,
    /// The configuration files read, in order.
    pub config_files: Vec<PathBuf>,
    /// `PG_VERSION`'s major version.
    pub pg_version: Option<u32>,
    /// Effective settings by lower-case name.
    pub settings: BTreeMap<String, SettingSource>,
    /// Whether data checksums are on (pg_control's `data_checksum_version`).
    pub data_checksums: Option<bool>,
    /// Bytes under `base/`, `global/` and the tablespaces.
    pub database_size_bytes: Option<u64>,
    /// Whether a server is running, with a data directory.
    pub running: Option<RunningState>,
    /// Configuration files that could not be read or parsed (PostgreSQL would refuse to
    /// start), each naming the file, the line and the cause.
    pub config_problems: Vec<String>,
    /// Anything else that could not be read, each naming the file and the cause.
    pub problems: Vec<String>,
}

impl InstanceFacts {
    /// A setting's value and source, by name (any case).
    pub fn setting(&self, name: &str) -> Option<&SettingSource> {
        self.settings.get(&name.to_ascii_lowercase())
    }

    /// Reads an instance from its data directory and/or a configuration file. With both,
    /// `config` replaces `pgdata/postgresql.conf` (as `postgres -c config_file=…` does) and
    /// `pgdata/postgresql.auto.conf` is still read after it.
    pub fn read(pgdata: Option<&Path>, config: Option<&Path>) -> InstanceFacts {
        let mut facts = InstanceFacts {
            pgdata: pgdata.map(Path::to_path_buf),
            ..Default::default()
        };
        let main_conf = config
            .map(Path::to_path_buf)
            .or_else(|| pgdata.map(|d| d.join("postgresql.conf")));
        if let Some(conf) = main_conf {
            facts.read_conf(&conf, true);
        }
        if let Some(dir) = pgdata {
            facts.read_conf(&dir.join("postgresql.auto.conf"), false);
            facts.pg_version = match read_small_text(&dir.join("PG_VERSION")) {
                Ok(text) => match text.trim().parse() {
                    Ok(v) => Some(v),
                    Err(_) => {
                        facts.problems.push(format!(
                            "{}: {:?} is not a major version number; the data directory is damaged or not PostgreSQL's",
                            dir.join("PG_VERSION").display(),
                            text.trim()
                        ));
                        None
                    }
                },
                Err(e) => {
                    facts.problems.push(format!(
                        "{}: {e}; is {} a PostgreSQL data directory (initdb makes one)?",
                        dir.join("PG_VERSION").display(),
                        dir.display()
                    ));
                    None
                }
            };
            let control = crate::page::control::ControlFile::read(dir);
            let control_state = match &control {
                Ok(c) => {
                    facts.data_checksums = Some(c.data_checksum_version != 0);
                    Some(c.state.describe())
                }
                Err(e) => {
                    facts.problems.push(e.to_string());
                    None
                }
            };
            facts.running = Some(running_state(dir, control_state));
            facts.database_size_bytes = Some(database_size_bytes(dir, &mut facts.problems));
        }
        facts
    }

    fn read_conf(&mut self, path: &Path, required: bool) {
        if !required && !path.exists() {
            return;
        }
        match crate::config::read_conf_file(path) {
            Ok(entries) => {
                self.config_files.push(path.to_path_buf());
                for e in entries {
                    if !self.config_files.contains(&e.path) {
                        self.config_files.push(e.path.clone());
                    }
                    self.settings.insert(
                        e.name.to_ascii_lowercase(),
                        SettingSource {
                            value: e.value,
                            file: e.path,
                            line: e.line,
                        },
                    );
                }
            }
            Err(e) => self.config_problems.push(e.to_string()),
        }
    }
}

/// The most bytes read of `PG_VERSION` or `postmaster.pid` (a few lines each).
const SMALL_TEXT_MAX_BYTES: u64 = 4096;

/// A small text file of a data directory, read without trusting its type or size (a FIFO
/// there would block a plain read forever).
fn read_small_text(path: &Path) -> Result<String, String> {
    let bytes =
        crate::storage::read_small_file(path, SMALL_TEXT_MAX_BYTES).map_err(|e| e.to_string())?;
    String::from_utf8(bytes).map_err(|e| e.to_string())
}

/// Whether `postmaster.pid` names a live process.
fn running_state(pgdata: &Path, control_state: Option<String>) -> RunningState {
    let postmaster_pid = read_small_text(&pgdata.join("postmaster.pid"))
        .ok()
        .and_then(|t| t.lines().next()?.trim().parse::<i32>().ok())
        .filter(|pid| *pid > 0);
    let alive = postmaster_pid.is_some_and(|pid| {
        // SAFETY: kill with signal 0 sends nothing; it only asks whether `pid` exists.
        let rc = unsafe { libc::kill(pid, 0) };
        rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
    });
    RunningState {
        postmaster_pid,
        alive,
        control_state,
    }
}

/// Sums file sizes under `base/`, `global/` and each tablespace in `pg_tblspc/`.
fn database_size_bytes(pgdata: &Path, problems: &mut Vec<String>) -> u64 {
    let mut roots = vec![pgdata.join("base"), pgdata.join("global")];
    if let Ok(links) = std::fs::read_dir(pgdata.join("pg_tblspc")) {
        roots.extend(links.flatten().map(|e| e.path()));
    }
    let mut total = 0u64;
    let mut entries = 0u64;
    for root in roots {
        // A tablespace link is followed once, at the top; nothing below is followed.
        let mut stack = vec![(root, 0usize)];
        while let Some((dir, depth)) = stack.pop() {
            let list = match std::fs::read_dir(&dir) {
                Ok(list) => list,
                Err(e) => {
                    let why = match crate::storage::dangling_link_on_the_way(&dir) {
                        Some((link, target)) => format!(
                            "{} is a link to \"{}\", which does not exist",
                            link.display(),
                            target.display()
                        ),
                        None => e.to_string(),
                    };
                    problems.push(format!(
                        "{}: not readable ({why}); the database size leaves it out",
                        dir.display()
                    ));
                    continue;
                }
            };
            for entry in list.flatten() {
                entries += 1;
                if entries > MAX_SIZE_WALK_ENTRIES {
                    problems.push(format!(
                        "{}: more than {MAX_SIZE_WALK_ENTRIES} files; the database size counts the first only",
                        pgdata.display()
                    ));
                    return total;
                }
                let Ok(meta) = entry.path().symlink_metadata() else {
                    continue;
                };
                if meta.is_file() {
                    total = total.saturating_add(meta.len());
                } else if meta.is_dir() && depth < MAX_SIZE_WALK_DEPTH {
                    stack.push((entry.path(), depth + 1));
                }
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_conf_wins_and_each_setting_keeps_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(
            d.join("postgresql.conf"),
            "shared_buffers = 128MB\ninclude 'extra.conf'\nwork_mem = 8MB\n",
        )
        .unwrap();
        std::fs::write(
            d.join("extra.conf"),
            "work_mem = 4MB\nio_method = io_uring\n",
        )
        .unwrap();
        std::fs::write(
            d.join("postgresql.auto.conf"),
            "# ALTER SYSTEM\nshared_buffers = '1GB'\n",
        )
        .unwrap();
        std::fs::write(d.join("PG_VERSION"), "18\n").unwrap();
        std::fs::create_dir_all(d.join("base/5")).unwrap();
        std::fs::write(d.join("base/5/16384"), vec![0u8; 8192 * 3]).unwrap();
        std::fs::create_dir_all(d.join("global")).unwrap();
        std::fs::write(d.join("global/1262"), vec![0u8; 8192]).unwrap();
        let f = InstanceFacts::read(Some(d), None);
        assert_eq!(f.pg_version, Some(18));
        let sb = f.setting("SHARED_BUFFERS").unwrap();
        assert_eq!(sb.value, "1GB");
        assert_eq!(sb.line, 2);
        assert!(sb.file.ends_with("postgresql.auto.conf"));
        let wm = f.setting("work_mem").unwrap();
        assert_eq!((wm.value.as_str(), wm.line), ("8MB", 3));
        assert!(f.setting("io_method").unwrap().file.ends_with("extra.conf"));
        assert_eq!(f.database_size_bytes, Some(8192 * 4));
        let running = f.running.unwrap();
        assert_eq!((running.postmaster_pid, running.alive), (None, false));
        // No pg_control here: reported, not guessed.
        assert_eq!(f.data_checksums, None);
        assert!(
            f.problems.iter().any(|p| p.contains("pg_control")),
            "{:?}",
            f.problems
        );
    }

    #[test]
    fn a_live_postmaster_pid_means_running_and_a_stale_one_does_not() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("postmaster.pid"),
            format!("{}\n/data\n", std::process::id()),
        )
        .unwrap();
        assert!(running_state(dir.path(), None).alive);
        // pid_max is at most 2^22, so this pid cannot exist.
        std::fs::write(dir.path().join("postmaster.pid"), "2147483646\n").unwrap();
        let s = running_state(dir.path(), None);
        assert_eq!((s.postmaster_pid, s.alive), (Some(2147483646), false));
    }
}
