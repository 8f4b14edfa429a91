//! The data directory of a command that reads a cluster, given the way PostgreSQL's tools
//! take it: `-D DIR`, `--pgdata DIR`, a directory argument, or `$PGDATA`.
//!
//! ```text
//!   -D/--pgdata DIR ─┐
//!   DIR (argument) ──┼─► DataDirArgs::resolve ─► DataDir { path, how it was given }
//!   $PGDATA ─────────┘        (flag and argument both given and different: an error;
//!                              none given: "no data directory specified", as pg_checksums)
//! ```
//!
//! Every command flattens [`DataDirArgs`], so the spellings, their help and the errors are
//! the same everywhere. `$PGDATA` is the last resort: a command that can also read something
//! else (`scan --dataset`, `advise --config`) asks for it only when nothing else was named.

use std::path::{Path, PathBuf};

use clap::Args;

/// The ways to name the data directory.
#[derive(Debug, Clone, Default, Args)]
pub struct DataDirArgs {
    /// The data directory of the cluster (the one holding PG_VERSION) [default: $PGDATA]
    #[arg(value_name = "DATADIR")]
    pub(crate) datadir: Option<PathBuf>,
    /// The data directory, as pg_checksums and pg_ctl take it
    #[arg(short = 'D', long = "pgdata", value_name = "DATADIR")]
    pub(crate) pgdata: Option<PathBuf>,
}

/// How the data directory was given; messages name it that way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Given {
    /// `-D DIR` or `--pgdata DIR`.
    Flag,
    /// The directory argument.
    Argument,
    /// `$PGDATA`.
    Environment,
}

/// A data directory and how it was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataDir {
    /// The directory, as given.
    pub path: PathBuf,
    /// How it was given.
    pub given: Given,
}

impl DataDir {
    /// How messages name the way the directory was given: `--pgdata`, `the data directory`
    /// (the argument) or `PGDATA`.
    pub fn label(&self) -> &'static str {
        match self.given {
            Given::Flag => "--pgdata",
            Given::Argument => "the data directory",
            Given::Environment => "PGDATA",
        }
    }

    /// Refuses a path that is not a directory before anything reads it, naming what it is
    /// instead (missing, a dangling link and its target, a file).
    pub fn check(&self) -> Result<(), String> {
        crate::check_pgdata(self.label(), &self.path)
    }
}

/// Why no single data directory could be chosen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DataDirError {
    /// Neither `-D`, an argument nor `$PGDATA`.
    #[error("no data directory specified")]
    Missing,
    /// `-D` and the argument name different directories.
    #[error(
        "two data directories given: -D {} and the argument {}",
        flag.display(),
        argument.display()
    )]
    Disagree {
        /// What `-D`/`--pgdata` named.
        flag: PathBuf,
        /// What the argument named.
        argument: PathBuf,
    },
}

impl DataDirError {
    /// The fix, as one line.
    pub fn hint(&self) -> &'static str {
        match self {
            DataDirError::Missing => "give -D DIR, a directory argument, or set PGDATA",
            DataDirError::Disagree { .. } => "give the data directory once",
        }
    }

    /// The error and its fix as one line, for commands that print one.
    pub fn line(&self) -> String {
        format!("{self}: {}", self.hint())
    }
}

impl DataDirArgs {
    /// The directory named by `-D` or the argument (the same one when both are given), else
    /// `None`; `$PGDATA` is not looked at.
    pub fn explicit(&self) -> Result<Option<DataDir>, DataDirError> {
        match (&self.pgdata, &self.datadir) {
            (Some(flag), Some(argument)) if !same_directory(flag, argument) => {
                Err(DataDirError::Disagree {
                    flag: flag.clone(),
                    argument: argument.clone(),
                })
            }
            (Some(flag), _) => Ok(Some(DataDir {
                path: flag.clone(),
                given: Given::Flag,
            })),
            (None, Some(argument)) => Ok(Some(DataDir {
                path: argument.clone(),
                given: Given::Argument,
            })),
            (None, None) => Ok(None),
        }
    }

    /// The directory named by `-D` or the argument, else `$PGDATA` when set and not empty,
    /// else `None`.
    pub fn given(&self) -> Result<Option<DataDir>, DataDirError> {
        if let Some(dir) = self.explicit()? {
            return Ok(Some(dir));
        }
        Ok(std::env::var_os("PGDATA")
            .filter(|v| !v.is_empty())
            .map(|v| DataDir {
                path: PathBuf::from(v),
                given: Given::Environment,
            }))
    }

    /// The directory given, checked to be one ([`DataDir::check`]), for a command whose
    /// data directory is optional: `$PGDATA` is looked at only when `environment_counts`
    /// (when nothing else on the command line says what to read instead).
    pub fn checked(&self, environment_counts: bool) -> Result<Option<DataDir>, String> {
        let dir = if environment_counts {
            self.given()
        } else {
            self.explicit()
        }
        .map_err(|e| e.line())?;
        if let Some(dir) = &dir {
            dir.check()?;
        }
        Ok(dir)
    }

    /// The data directory, which must be given one of the three ways.
    pub fn resolve(&self) -> Result<DataDir, DataDirError> {
        self.given()?.ok_or(DataDirError::Missing)
    }
}

/// Whether two spellings name the same directory: equal as written, or (both existing) the
/// same file once links and `..` are resolved.
fn same_directory(a: &Path, b: &Path) -> bool {
    if a == b {
        return true;
    }
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(datadir: Option<&str>, pgdata: Option<&str>) -> DataDirArgs {
        DataDirArgs {
            datadir: datadir.map(PathBuf::from),
            pgdata: pgdata.map(PathBuf::from),
        }
    }

    #[test]
    fn the_flag_and_the_argument_may_name_the_same_directory_but_not_two() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().to_str().unwrap().to_string();
        let a_slash = format!("{a}/.");
        let both = args(Some(&a_slash), Some(&a)).explicit().unwrap().unwrap();
        assert_eq!(both.path, PathBuf::from(&a));
        assert_eq!(both.given, Given::Flag);
        let err = args(Some("/x"), Some("/y")).explicit().unwrap_err();
        assert_eq!(
            err.line(),
            "two data directories given: -D /y and the argument /x: give the data directory once"
        );
        let arg = args(Some("/x"), None).explicit().unwrap().unwrap();
        assert_eq!(
            (arg.given, arg.label()),
            (Given::Argument, "the data directory")
        );
        assert_eq!(args(None, None).explicit().unwrap(), None);
    }

    #[test]
    fn nothing_given_is_pg_checksums_message_with_the_three_ways() {
        assert_eq!(
            DataDirError::Missing.line(),
            "no data directory specified: give -D DIR, a directory argument, or set PGDATA"
        );
    }
}
