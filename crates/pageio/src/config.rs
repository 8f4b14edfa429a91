//! # Settings
//!
//! Every knob of the engine, under the name a PostgreSQL user would look for
//! (`io_method`, `io_workers`, `io_max_concurrency`, `io_combine_limit`,
//! `effective_io_concurrency`, `shared_buffers`, `huge_pages`, `direct_io`,
//! `max_open_files`), with PostgreSQL's defaults and PostgreSQL's unit syntax.
//!
//! Values arrive from three places — code, command-line flags, and a `postgresql.conf`-style
//! file — so the parsing lives here once:
//!
//! ```text
//!   "128kB" ──parse_size_bytes──► 131072          (memory units: B, kB, MB, GB, TB; 1024-based)
//!   "16"    ──parse_blocks──────► 16 blocks       (a bare number of a block-valued setting is blocks,
//!   "128kB" ──parse_blocks──────► 16 blocks        as in PostgreSQL; a unit is converted to blocks)
//!   io_method = 'worker'  # comment  ──parse_conf──► ("io_method", "worker")
//! ```
//!
//! Every value is checked against the same bounds PostgreSQL uses (`io_combine_limit` at most
//! 128 blocks, `io_workers` 1..=32, …) and an out-of-range value names the setting, the bound
//! and the fix.

use std::fmt;
use std::path::Path;
use std::str::FromStr;

use thiserror::Error;

/// Size of one page (PostgreSQL's `BLCKSZ`).
pub const BLCKSZ: usize = 8192;

/// Largest `io_combine_limit`, in blocks. PostgreSQL caps it at `MAX_IO_COMBINE_LIMIT`
/// (`PG_IOV_MAX` = 128 blocks = 1 MB) because one I/O's iovec array must fit in one
/// `preadv` call and one handle's fixed-size data.
pub const MAX_IO_COMBINE_LIMIT_BLOCKS: usize = 128;

/// Largest `io_workers`; PostgreSQL's `MAX_IO_WORKERS` is 32. Beyond that, hand-off contention
/// on the one shared queue costs more than another thread gains.
pub const MAX_IO_WORKERS: usize = 32;

/// Largest `io_max_concurrency`. PostgreSQL allows up to 1024 handles per backend; every handle
/// reserves memory for `io_combine_limit` iovecs, so the bound keeps per-backend memory small.
pub const MAX_IO_MAX_CONCURRENCY: usize = 1024;

/// Largest `effective_io_concurrency` (PostgreSQL: 1000).
pub const MAX_EFFECTIVE_IO_CONCURRENCY: usize = 1000;

/// How I/O is executed (PostgreSQL's `io_method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IoMethodKind {
    /// Executed inline at submission with `preadv`/`pwritev`, like PostgreSQL 17.
    Sync,
    /// A pool of `io_workers` threads fed through a bounded shared queue.
    Worker,
    /// One io_uring per backend.
    IoUring,
    /// io_uring when the kernel allows it, otherwise worker (and one line saying why).
    Auto,
}

impl IoMethodKind {
    /// The three concrete methods, in the order the conformance suite runs them.
    pub const CONCRETE: [IoMethodKind; 3] = [
        IoMethodKind::Sync,
        IoMethodKind::Worker,
        IoMethodKind::IoUring,
    ];

    /// The setting's spelling (`sync`, `worker`, `io_uring`, `auto`).
    pub fn as_str(self) -> &'static str {
        match self {
            IoMethodKind::Sync => "sync",
            IoMethodKind::Worker => "worker",
            IoMethodKind::IoUring => "io_uring",
            IoMethodKind::Auto => "auto",
        }
    }
}

impl fmt::Display for IoMethodKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for IoMethodKind {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        match s.trim().to_ascii_lowercase().replace('-', "_").as_str() {
            "sync" => Ok(IoMethodKind::Sync),
            "worker" => Ok(IoMethodKind::Worker),
            "io_uring" | "iouring" | "uring" => Ok(IoMethodKind::IoUring),
            "auto" => Ok(IoMethodKind::Auto),
            _ => Err(ConfigError::Invalid {
                name: "io_method".into(),
                value: s.into(),
                reason: "expected one of: sync, worker, io_uring, auto".into(),
            }),
        }
    }
}

/// PostgreSQL's `huge_pages` setting for the buffer pool's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HugePages {
    /// Use huge pages when the kernel has them, otherwise normal pages.
    Try,
    /// Fail when huge pages cannot be had.
    On,
    /// Never use huge pages.
    Off,
}

impl FromStr for HugePages {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "try" => Ok(HugePages::Try),
            "on" | "true" | "yes" | "1" => Ok(HugePages::On),
            "off" | "false" | "no" | "0" => Ok(HugePages::Off),
            _ => Err(ConfigError::Invalid {
                name: "huge_pages".into(),
                value: s.into(),
                reason: "expected one of: try, on, off".into(),
            }),
        }
    }
}

/// A setting that could not be accepted.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The value does not parse or is out of range.
    #[error("invalid value for parameter \"{name}\": \"{value}\": {reason}")]
    Invalid {
        /// Setting name (PostgreSQL spelling).
        name: String,
        /// The rejected value as given.
        value: String,
        /// What is wrong and what would be accepted.
        reason: String,
    },
    /// The name is not a setting this engine knows.
    #[error("unrecognized configuration parameter \"{name}\" (known: {known})")]
    Unknown {
        /// The unknown name.
        name: String,
        /// The known names, for the message.
        known: String,
    },
    /// A configuration file could not be read or has a malformed line.
    #[error("configuration file \"{path}\" line {line}: {reason}")]
    File {
        /// File path.
        path: String,
        /// 1-based line number (0 when the file could not be opened).
        line: usize,
        /// What is wrong.
        reason: String,
    },
}

/// The engine's settings, named as in PostgreSQL. See `DESIGN.md` for the table.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct IoConfig {
    /// How I/O is executed.
    pub io_method: IoMethodKind,
    /// I/O worker threads for the worker method.
    pub io_workers: usize,
    /// AIO handles per backend.
    pub io_max_concurrency: usize,
    /// Largest single I/O, in blocks.
    pub io_combine_limit_blocks: usize,
    /// Most I/Os a read stream keeps in flight; 0 means synchronous.
    pub effective_io_concurrency: usize,
    /// Buffer pool size in bytes.
    pub shared_buffers_bytes: usize,
    /// Huge pages for the buffer pool's memory.
    pub huge_pages: HugePages,
    /// Bypass the page cache (O_DIRECT).
    pub direct_io: bool,
    /// Bound of the file-descriptor cache.
    pub max_open_files: usize,
}

impl Default for IoConfig {
    fn default() -> Self {
        IoConfig {
            io_method: IoMethodKind::Worker,
            io_workers: 3,
            io_max_concurrency: 64,
            io_combine_limit_blocks: 16,
            effective_io_concurrency: 16,
            shared_buffers_bytes: 128 * 1024 * 1024,
            huge_pages: HugePages::Try,
            direct_io: false,
            max_open_files: 1000,
        }
    }
}

/// The names [`IoConfig::set`] accepts.
pub const SETTING_NAMES: [&str; 9] = [
    "io_method",
    "io_workers",
    "io_max_concurrency",
    "io_combine_limit",
    "effective_io_concurrency",
    "shared_buffers",
    "huge_pages",
    "direct_io",
    "max_open_files",
];

impl IoConfig {
    /// Sets one setting by its PostgreSQL name (dashes are accepted for underscores), parsing
    /// the value with PostgreSQL's unit rules and checking its range.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), ConfigError> {
        let key = name.trim().to_ascii_lowercase().replace('-', "_");
        let value = value.trim();
        match key.as_str() {
            "io_method" => self.io_method = value.parse()?,
            "io_workers" => {
                self.io_workers = parse_count("io_workers", value, 1, MAX_IO_WORKERS)?;
            }
            "io_max_concurrency" => {
                self.io_max_concurrency =
                    parse_count("io_max_concurrency", value, 1, MAX_IO_MAX_CONCURRENCY)?;
            }
            "io_combine_limit" => {
                let blocks = parse_blocks("io_combine_limit", value)?;
                if !(1..=MAX_IO_COMBINE_LIMIT_BLOCKS).contains(&blocks) {
                    return Err(ConfigError::Invalid {
                        name: "io_combine_limit".into(),
                        value: value.into(),
                        reason: format!(
                            "must be between 1 and {MAX_IO_COMBINE_LIMIT_BLOCKS} blocks (8kB..1MB)"
                        ),
                    });
                }
                self.io_combine_limit_blocks = blocks;
            }
            "effective_io_concurrency" => {
                self.effective_io_concurrency = parse_count(
                    "effective_io_concurrency",
                    value,
                    0,
                    MAX_EFFECTIVE_IO_CONCURRENCY,
                )?;
            }
            "shared_buffers" => {
                // A bare number is a count of 8kB buffers, as in postgresql.conf.
                let blocks = parse_blocks("shared_buffers", value)?;
                if blocks < 16 {
                    return Err(ConfigError::Invalid {
                        name: "shared_buffers".into(),
                        value: value.into(),
                        reason: "must be at least 128kB (16 buffers)".into(),
                    });
                }
                self.shared_buffers_bytes = blocks * BLCKSZ;
            }
            "huge_pages" => self.huge_pages = value.parse()?,
            "direct_io" | "debug_io_direct" => self.direct_io = parse_bool("direct_io", value)?,
            "max_open_files" | "max_files_per_process" => {
                self.max_open_files = parse_count("max_open_files", value, 8, 1 << 20)?;
            }
            _ => {
                return Err(ConfigError::Unknown {
                    name: name.into(),
                    known: SETTING_NAMES.join(", "),
                })
            }
        }
        Ok(())
    }

    /// Applies every `name = value` line of a `postgresql.conf`-syntax file.
    pub fn load_file(&mut self, path: &Path) -> Result<(), ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::File {
            path: path.display().to_string(),
            line: 0,
            reason: e.to_string(),
        })?;
        for (index, line) in text.lines().enumerate() {
            let Some((name, value)) =
                parse_conf_line(line).map_err(|reason| ConfigError::File {
                    path: path.display().to_string(),
                    line: index + 1,
                    reason,
                })?
            else {
                continue;
            };
            self.set(&name, &value).map_err(|e| ConfigError::File {
                path: path.display().to_string(),
                line: index + 1,
                reason: e.to_string(),
            })?;
        }
        Ok(())
    }

    /// `io_combine_limit` in bytes.
    pub fn io_combine_limit_bytes(&self) -> usize {
        self.io_combine_limit_blocks * BLCKSZ
    }

    /// Checks the cross-setting invariants the per-setting parsers cannot see.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let checks: [(&str, usize, usize, usize); 4] = [
            ("io_workers", self.io_workers, 1, MAX_IO_WORKERS),
            (
                "io_max_concurrency",
                self.io_max_concurrency,
                1,
                MAX_IO_MAX_CONCURRENCY,
            ),
            (
                "io_combine_limit",
                self.io_combine_limit_blocks,
                1,
                MAX_IO_COMBINE_LIMIT_BLOCKS,
            ),
            (
                "effective_io_concurrency",
                self.effective_io_concurrency,
                0,
                MAX_EFFECTIVE_IO_CONCURRENCY,
            ),
        ];
        for (name, value, lo, hi) in checks {
            if value < lo || value > hi {
                return Err(ConfigError::Invalid {
                    name: name.into(),
                    value: value.to_string(),
                    reason: format!("must be between {lo} and {hi}"),
                });
            }
        }
        Ok(())
    }
}

/// Parses one `postgresql.conf` line into `(name, value)`; `Ok(None)` for blank and comment
/// lines. Values may be bare or single-quoted (`''` inside quotes is one quote); `=` is
/// optional, as in PostgreSQL.
pub fn parse_conf_line(line: &str) -> Result<Option<(String, String)>, String> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    let name_end = line
        .find(|c: char| c.is_whitespace() || c == '=')
        .unwrap_or(line.len());
    let name = &line[..name_end];
    let mut rest = line[name_end..].trim_start();
    if let Some(stripped) = rest.strip_prefix('=') {
        rest = stripped.trim_start();
    }
    let value = if let Some(quoted) = rest.strip_prefix('\'') {
        let mut out = String::new();
        let mut chars = quoted.chars().peekable();
        let mut closed = false;
        while let Some(c) = chars.next() {
            if c == '\'' {
                if chars.peek() == Some(&'\'') {
                    chars.next();
                    out.push('\'');
                } else {
                    closed = true;
                    break;
                }
            } else {
                out.push(c);
            }
        }
        if !closed {
            return Err(format!("unterminated quoted value for \"{name}\""));
        }
        out
    } else {
        rest.split('#').next().unwrap_or("").trim().to_string()
    };
    if name.is_empty() || value.is_empty() {
        return Err(format!("expected \"name = value\", got \"{line}\""));
    }
    Ok(Some((name.to_string(), value)))
}

/// Parses a memory size with PostgreSQL's units (`B`, `kB`, `MB`, `GB`, `TB`, 1024-based);
/// a bare number is bytes.
pub fn parse_size_bytes(name: &str, value: &str) -> Result<usize, ConfigError> {
    parse_with_unit(name, value, 1)
}

/// Parses a block-valued setting: a bare number is blocks, a memory unit is converted to
/// blocks and must be a whole number of them.
pub fn parse_blocks(name: &str, value: &str) -> Result<usize, ConfigError> {
    let bytes = parse_with_unit(name, value, BLCKSZ)?;
    if bytes % BLCKSZ != 0 {
        return Err(ConfigError::Invalid {
            name: name.into(),
            value: value.into(),
            reason: "must be a multiple of the 8kB block size".into(),
        });
    }
    Ok(bytes / BLCKSZ)
}

fn parse_with_unit(name: &str, value: &str, bare_unit_bytes: usize) -> Result<usize, ConfigError> {
    let invalid = |reason: &str| ConfigError::Invalid {
        name: name.into(),
        value: value.into(),
        reason: reason.into(),
    };
    let v = value.trim();
    let digits_end = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    if digits_end == 0 {
        return Err(invalid(
            "expected a number with an optional unit (B, kB, MB, GB, TB)",
        ));
    }
    let number: usize = v[..digits_end]
        .parse()
        .map_err(|_| invalid("number too large"))?;
    let unit = v[digits_end..].trim();
    let multiplier: usize = match unit {
        "" => bare_unit_bytes,
        "B" => 1,
        "kB" | "KB" | "k" | "K" => 1 << 10,
        "MB" | "M" => 1 << 20,
        "GB" | "G" => 1 << 30,
        "TB" | "T" => 1 << 40,
        _ => {
            return Err(invalid(
                "unknown unit: valid units are \"B\", \"kB\", \"MB\", \"GB\" and \"TB\"",
            ))
        }
    };
    number
        .checked_mul(multiplier)
        .ok_or_else(|| invalid("value too large"))
}

fn parse_count(name: &str, value: &str, lo: usize, hi: usize) -> Result<usize, ConfigError> {
    let n: usize = value.trim().parse().map_err(|_| ConfigError::Invalid {
        name: name.into(),
        value: value.into(),
        reason: "expected a whole number".into(),
    })?;
    if n < lo || n > hi {
        return Err(ConfigError::Invalid {
            name: name.into(),
            value: value.into(),
            reason: format!("must be between {lo} and {hi}"),
        });
    }
    Ok(n)
}

/// Parses a PostgreSQL boolean (`on`/`off`, `true`/`false`, `yes`/`no`, `1`/`0`).
pub fn parse_bool(name: &str, value: &str) -> Result<bool, ConfigError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "on" | "true" | "yes" | "1" | "data" => Ok(true),
        "off" | "false" | "no" | "0" | "" => Ok(false),
        _ => Err(ConfigError::Invalid {
            name: name.into(),
            value: value.into(),
            reason: "expected on or off".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_postgresql() {
        let c = IoConfig::default();
        assert_eq!(c.io_method, IoMethodKind::Worker);
        assert_eq!(c.io_workers, 3);
        assert_eq!(c.io_max_concurrency, 64);
        assert_eq!(c.io_combine_limit_bytes(), 128 * 1024);
        assert_eq!(c.effective_io_concurrency, 16);
        assert_eq!(c.shared_buffers_bytes, 128 << 20);
        assert!(c.validate().is_ok());
    }

    #[test]
    fn units() {
        assert_eq!(parse_size_bytes("x", "128kB").unwrap(), 131072);
        assert_eq!(parse_blocks("x", "128kB").unwrap(), 16);
        assert_eq!(parse_blocks("x", "32").unwrap(), 32);
        assert_eq!(parse_blocks("x", "1MB").unwrap(), 128);
        assert!(parse_blocks("x", "12kB").is_err());
        assert!(parse_blocks("x", "12 parsecs").is_err());
        assert!(parse_size_bytes("x", "").is_err());
    }

    #[test]
    fn set_and_ranges() {
        let mut c = IoConfig::default();
        c.set("io-method", "io_uring").unwrap();
        assert_eq!(c.io_method, IoMethodKind::IoUring);
        c.set("io_combine_limit", "256kB").unwrap();
        assert_eq!(c.io_combine_limit_blocks, 32);
        let err = c.set("io_combine_limit", "2MB").unwrap_err().to_string();
        assert!(
            err.contains("io_combine_limit") && err.contains("128"),
            "{err}"
        );
        assert!(c.set("io_workers", "0").is_err());
        assert!(c.set("io_method", "posix").is_err());
        let err = c.set("io_turbo", "on").unwrap_err().to_string();
        assert!(
            err.contains("unrecognized") && err.contains("io_method"),
            "{err}"
        );
        c.set("shared_buffers", "1MB").unwrap();
        assert_eq!(c.shared_buffers_bytes, 1 << 20);
    }

    #[test]
    fn conf_file_syntax() {
        assert_eq!(parse_conf_line("  # comment").unwrap(), None);
        assert_eq!(
            parse_conf_line("io_method = 'worker' # default").unwrap(),
            Some(("io_method".into(), "worker".into()))
        );
        assert_eq!(
            parse_conf_line("io_workers 8").unwrap(),
            Some(("io_workers".into(), "8".into()))
        );
        assert_eq!(
            parse_conf_line("x = 'it''s'").unwrap(),
            Some(("x".into(), "it's".into()))
        );
        assert!(parse_conf_line("x = 'open").is_err());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pageio.conf");
        std::fs::write(&path, "io_method = sync\nio_workers = 12\n").unwrap();
        let mut c = IoConfig::default();
        c.load_file(&path).unwrap();
        assert_eq!((c.io_method, c.io_workers), (IoMethodKind::Sync, 12));
        std::fs::write(&path, "io_workers = many\n").unwrap();
        let err = c.load_file(&path).unwrap_err().to_string();
        assert!(
            err.contains("line 1") && err.contains("io_workers"),
            "{err}"
        );
    }
}
