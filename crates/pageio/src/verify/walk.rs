//! Finding the files `pg_checksums` checks.
//!
//! # Problem
//!
//! A data directory holds relation files next to files that carry no page checksums at all
//! (`pg_filenode.map`, `PG_VERSION`, relcache init files, temporary files). Checking the
//! wrong set gives a different "Files scanned" from `pg_checksums`, or reports false
//! corruption; missing a tablespace silently skips data. We walk exactly what
//! `pg_checksums --check` walks, in the same order, and name each file as it does.
//!
//! # Mechanism
//!
//! ```text
//!   <pgdata>/global ──┐
//!   <pgdata>/base ────┼─► every entry, in readdir order, recursively:
//!   <pgdata>/pg_tblspc┘     "." ".." "pgsql_tmp*" ".DS_Store"  → skipped
//!        │                  regular file:  pg_control, pg_filenode.map, PG_VERSION (exact),
//!        │                                 pg_internal.init* (prefix)  → skipped
//!        │                                 "<node>[_fork][.<seg>]" → checked, segment <seg>
//!        │                                 (--filenode N keeps only <node> == N)
//!        │                  directory or symlink: recurse
//!        └─► pg_tblspc/<oid>: recurse into <oid>/PG_18_<catversion> only
//! ```
//!
//! Names are built as `pg_checksums` builds them — the data-directory argument, then `/`, then
//! each component — so messages compare byte for byte. The segment number is the integer
//! after the first `.`; a name whose segment part reads as 0 (`16384.0`, `foo.bar`) is an
//! error, as in `pg_checksums`.
//!
//! # Worked example
//!
//! For `pageio verify /srv/pg`, `base/5/16384.1` becomes
//! `ClusterFile { path: "/srv/pg/base/5/16384.1", segno: 1, .. }`: its block 7 is checksummed
//! as block 131072 + 7 of the relation, and reported as "block 7" of that file.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::VerifyError;
use crate::storage::SEGMENT_BYTES;

/// Names `pg_checksums` never checks (exact matches).
const SKIP_EXACT: [&str; 3] = ["pg_control", "pg_filenode.map", "PG_VERSION"];

/// Name prefixes `pg_checksums` never checks as files: relcache init files and, in
/// `EXEC_BACKEND` builds, the parameter file handed to child processes.
const SKIP_PREFIX: [&str; 2] = ["pg_internal.init", "config_exec_params"];

/// Prefix of temporary files and directories (`PG_TEMP_FILE_PREFIX`, `PG_TEMP_FILES_DIR`).
const TEMP_PREFIX: &str = "pgsql_tmp";

/// Prefix of the per-version directory inside a tablespace (`TABLESPACE_VERSION_DIRECTORY`).
const TABLESPACE_VERSION_PREFIX: &str = "PG_18_";

/// One file to check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterFile {
    /// Where to open it.
    pub path: PathBuf,
    /// How messages name it (`<pgdata>/base/5/16384`, as `pg_checksums` prints it).
    pub display: Arc<str>,
    /// Segment number: block `b` of this file is block `segno * 131072 + b` of the fork.
    pub segno: u32,
    /// Size when the walk saw it.
    pub size_bytes: u64,
}

/// Walks `global`, `base` and `pg_tblspc` of `pgdata` like `pg_checksums`, returning the
/// files to check in the order `pg_checksums` visits them. With `filenode`, only files of
/// that relfilenode are returned.
pub fn walk_cluster(
    pgdata: &OsStr,
    filenode: Option<u32>,
) -> Result<Vec<ClusterFile>, VerifyError> {
    let mut out = Vec::new();
    let only = filenode.map(|n| n.to_string());
    for top in ["global", "base", "pg_tblspc"] {
        scan_directory(pgdata, OsStr::new(top), only.as_deref(), &mut out, None)?;
    }
    Ok(out)
}

/// [`walk_cluster`] on a running cluster, whose server creates and removes files and
/// directories during the walk: an entry that is gone between `readdir` and `stat`, or a
/// database directory dropped before it is listed, is counted (the second value) instead of
/// ending the walk. Every other error ends it as in [`walk_cluster`].
pub fn walk_cluster_online(
    pgdata: &OsStr,
    filenode: Option<u32>,
) -> Result<(Vec<ClusterFile>, u64), VerifyError> {
    let mut out = Vec::new();
    let mut vanished = 0u64;
    let only = filenode.map(|n| n.to_string());
    for top in ["global", "base", "pg_tblspc"] {
        scan_directory(
            pgdata,
            OsStr::new(top),
            only.as_deref(),
            &mut out,
            Some(&mut vanished),
        )?;
    }
    Ok((out, vanished))
}

/// Whether `e` says the entry is gone (removed by the running server), counting it in
/// `vanished` when the walk tolerates that.
fn gone(e: &std::io::Error, vanished: &mut Option<&mut u64>) -> bool {
    match vanished {
        Some(count) if e.kind() == std::io::ErrorKind::NotFound => {
            **count = count.saturating_add(1);
            true
        }
        _ => false,
    }
}

fn join(base: &OsStr, name: &OsStr) -> OsString {
    let mut s = base.to_os_string();
    s.push("/");
    s.push(name);
    s
}

/// Skips what `pg_checksums`' `skipfile()` skips.
fn skip_file(name: &[u8]) -> bool {
    SKIP_EXACT.iter().any(|s| name == s.as_bytes())
        || SKIP_PREFIX.iter().any(|p| name.starts_with(p.as_bytes()))
}

/// `atoi`: leading decimal digits, 0 when there are none (saturating instead of overflowing).
fn leading_number(s: &[u8]) -> u64 {
    s.iter()
        .take_while(|b| b.is_ascii_digit())
        .fold(0u64, |n, &d| {
            n.saturating_mul(10).saturating_add((d - b'0') as u64)
        })
}

/// Lists `path`; `None` when it is gone and the walk tolerates that.
fn open_directory(
    path: &OsStr,
    vanished: &mut Option<&mut u64>,
) -> Result<Option<std::fs::ReadDir>, VerifyError> {
    match std::fs::read_dir(path) {
        Ok(entries) => Ok(Some(entries)),
        Err(e) if gone(&e, vanished) => Ok(None),
        Err(source) => Err(VerifyError::OpenDirectory {
            path: PathBuf::from(path),
            source,
        }),
    }
}

fn scan_directory(
    basedir: &OsStr,
    subdir: &OsStr,
    only_filenode: Option<&str>,
    out: &mut Vec<ClusterFile>,
    mut vanished: Option<&mut u64>,
) -> Result<(), VerifyError> {
    let path = join(basedir, subdir);
    let Some(entries) = open_directory(&path, &mut vanished)? else {
        return Ok(());
    };
    let in_tblspc = subdir.as_bytes().starts_with(b"pg_tblspc");
    for entry in entries {
        let entry = entry.map_err(|source| VerifyError::OpenDirectory {
            path: PathBuf::from(&path),
            source,
        })?;
        let name = entry.file_name();
        let name_bytes = name.as_bytes();
        if name_bytes.starts_with(TEMP_PREFIX.as_bytes()) || name_bytes == b".DS_Store" {
            continue;
        }
        let fn_path = join(&path, &name);
        let meta = match std::fs::symlink_metadata(&fn_path) {
            Ok(meta) => meta,
            Err(e) if gone(&e, &mut vanished) => continue,
            Err(source) => {
                return Err(VerifyError::Stat {
                    path: PathBuf::from(&fn_path),
                    source,
                })
            }
        };
        let ft = meta.file_type();
        if ft.is_file() {
            if skip_file(name_bytes) {
                continue;
            }
            let (stem, segno) = match name_bytes.iter().position(|&b| b == b'.') {
                Some(dot) => {
                    let n = leading_number(&name_bytes[dot + 1..]);
                    if n == 0 || n > u32::MAX as u64 {
                        return Err(VerifyError::InvalidSegmentNumber {
                            path: PathBuf::from(&fn_path),
                        });
                    }
                    (&name_bytes[..dot], n as u32)
                }
                None => (name_bytes, 0),
            };
            let node = match stem.iter().position(|&b| b == b'_') {
                Some(us) => &stem[..us],
                None => stem,
            };
            if let Some(only) = only_filenode {
                if node != only.as_bytes() {
                    continue;
                }
            }
            if meta.len() > SEGMENT_BYTES {
                return Err(VerifyError::SegmentTooBig {
                    path: PathBuf::from(&fn_path),
                    size_bytes: meta.len(),
                    max_bytes: SEGMENT_BYTES,
                });
            }
            out.push(ClusterFile {
                display: PathBuf::from(&fn_path).display().to_string().into(),
                path: PathBuf::from(fn_path),
                segno,
                size_bytes: meta.len(),
            });
        } else if ft.is_dir() || ft.is_symlink() {
            // A link that leads to something other than a directory would fail below as
            // "could not open directory … Not a directory" (as in pg_checksums): say what
            // it leads to instead.
            if ft.is_symlink() {
                if let Ok(target) = std::fs::metadata(&fn_path) {
                    if !target.is_dir() {
                        return Err(VerifyError::NotRegularFile {
                            path: PathBuf::from(&fn_path),
                            what: format!(
                                "a symbolic link to {}",
                                crate::storage::file_type_name(target.file_type())
                            ),
                        });
                    }
                }
            }
            if in_tblspc {
                // A tablespace link: only this major version's directory inside it holds our
                // data (other versions' directories may sit beside it after pg_upgrade).
                let version_dir = find_version_dir(&fn_path)?;
                scan_directory(
                    &fn_path,
                    &version_dir,
                    only_filenode,
                    out,
                    vanished.as_deref_mut(),
                )?;
            } else {
                scan_directory(&path, &name, only_filenode, out, vanished.as_deref_mut())?;
            }
        } else if !skip_file(name_bytes) {
            // A FIFO, socket or device where a relation file can be: pg_checksums passes it
            // over silently, which would report a cluster as checked with a file unread.
            return Err(VerifyError::NotRegularFile {
                path: PathBuf::from(&fn_path),
                what: crate::storage::file_type_name(ft).to_string(),
            });
        }
    }
    Ok(())
}

/// The `PG_18_<catversion>` directory of a tablespace location; the catalog version is not
/// known without the server binary, so the one directory with the PostgreSQL 18 prefix is it.
fn find_version_dir(tablespace: &OsStr) -> Result<OsString, VerifyError> {
    let entries = std::fs::read_dir(tablespace).map_err(|source| VerifyError::OpenDirectory {
        path: PathBuf::from(tablespace),
        source,
    })?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if name
            .as_bytes()
            .starts_with(TABLESPACE_VERSION_PREFIX.as_bytes())
        {
            return Ok(name);
        }
    }
    // Say what is wrong rather than "could not stat PG_18_*": name the tablespace, where it
    // leads and what is there instead (another version's directory, typically).
    let link = Path::new(tablespace);
    let location = std::fs::read_link(link)
        .map(|target| match link.parent() {
            Some(parent) if target.is_relative() => parent.join(target),
            _ => target,
        })
        .unwrap_or_else(|_| link.to_path_buf());
    let mut names = crate::storage::dir_entry_names(link);
    names.sort();
    let found = if names.is_empty() {
        "nothing".to_string()
    } else {
        names
            .iter()
            .take(TABLESPACE_NAMES_SHOWN)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ")
    };
    Err(VerifyError::NoTablespaceVersionDirectory {
        oid: link
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        location,
        found,
    })
}

/// Names listed when a tablespace holds no PostgreSQL 18 directory: enough to show which
/// version's directory is there.
const TABLESPACE_NAMES_SHOWN: usize = 5;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tablespace_of_another_version_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for sub in [
            "data/global",
            "data/base",
            "data/pg_tblspc",
            "ts/PG_17_202307071/5",
        ] {
            std::fs::create_dir_all(d.join(sub)).unwrap();
        }
        std::os::unix::fs::symlink(d.join("ts"), d.join("data/pg_tblspc/16400")).unwrap();
        let err = walk_cluster(d.join("data").as_os_str(), None)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("tablespace 16400 at")
                && err.contains("/ts\"")
                && err.contains("no PG_18_… directory")
                && err.contains("PG_17_202307071")
                && err.contains("another PostgreSQL version"),
            "{err}"
        );
        assert!(!err.contains("PG_18_*"), "{err}");
    }

    #[test]
    fn skip_list() {
        assert!(skip_file(b"pg_control"));
        assert!(skip_file(b"pg_filenode.map"));
        assert!(skip_file(b"PG_VERSION"));
        assert!(skip_file(b"pg_internal.init"));
        assert!(skip_file(b"pg_internal.init.1234"));
        assert!(!skip_file(b"PG_VERSION.1"));
        assert!(!skip_file(b"16384"));
    }

    #[test]
    fn walk_names_segments_and_filters() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for sub in ["global", "base/5/pgsql_tmp", "pg_tblspc"] {
            std::fs::create_dir_all(d.join(sub)).unwrap();
        }
        for f in [
            "global/pg_control",
            "global/1262",
            "base/5/PG_VERSION",
            "base/5/16384",
            "base/5/16384.1",
            "base/5/16384_fsm",
            "base/5/16385",
            "base/5/pgsql_tmp/x",
            "base/5/pgsql_tmp123.0",
        ] {
            std::fs::write(d.join(f), b"").unwrap();
        }
        let root = d.as_os_str();
        let all = walk_cluster(root, None).unwrap();
        let mut names: Vec<String> = all
            .iter()
            .map(|f| {
                f.display
                    .strip_prefix(&*d.display().to_string())
                    .unwrap()
                    .to_string()
            })
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "/base/5/16384",
                "/base/5/16384.1",
                "/base/5/16384_fsm",
                "/base/5/16385",
                "/global/1262"
            ]
        );
        let seg1 = all.iter().find(|f| f.display.ends_with(".1")).unwrap();
        assert_eq!(seg1.segno, 1);
        let only = walk_cluster(root, Some(16384)).unwrap();
        assert_eq!(only.len(), 3);
        std::fs::write(d.join("base/5/16386.x"), b"").unwrap();
        let e = walk_cluster(root, None).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("invalid segment number 0 in file name"),
            "{e}"
        );
    }
}
