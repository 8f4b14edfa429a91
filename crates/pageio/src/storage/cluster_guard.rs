//! The one rule every writer of pageio obeys: never write inside a PostgreSQL cluster.
//!
//! `gen`, `io-bench` and `advise --measure` write relation files, scratch files and data
//! sets of their own. Written inside a cluster, they would sit among (or over) the cluster's
//! own files, and `pg_checksums` or `verify` would then fail on it. So each asks
//! [`enclosing_cluster`] about its target before writing a byte, and refuses a target it
//! names. A directory belongs to a cluster when, after resolving symbolic links (so a
//! `pg_tblspc/<oid>` link leads to its tablespace):
//!
//! ```text
//!  it or an ancestor is a data directory        PG_VERSION and global/pg_control
//!  it or an ancestor holds a PG_VERSION         a database directory (base/5), or a copy
//!  it or an ancestor is a tablespace's          PG_18_202506291 (PG_<major>_<catversion>)
//!    version directory
//!  it or an ancestor is a tablespace location   holds a PG_<major>_<catversion> directory
//! ```
//!
//! A target that does not exist yet is judged by its nearest existing ancestor. Path depth
//! is bounded by `PATH_MAX`, so the walks are finite.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// The cluster or tablespace `dir` lies in, if any (see the module docs): the data
/// directory above it when there is one, else the ancestor that makes it part of a cluster.
pub fn enclosing_cluster(dir: &Path) -> Option<PathBuf> {
    let absolute = std::path::absolute(dir).ok()?;
    let mut existing = absolute.as_path();
    while !existing.exists() {
        existing = existing.parent()?;
    }
    let real = std::fs::canonicalize(existing).ok()?;
    // A database directory (base/5) holds a PG_VERSION of its own: name the cluster itself
    // when there is one.
    real.ancestors()
        .find(|a| a.join("PG_VERSION").is_file() && a.join("global/pg_control").is_file())
        .or_else(|| {
            real.ancestors().find(|a| {
                a.join("PG_VERSION").is_file()
                    || is_tablespace_version_dir(a)
                    || holds_tablespace_version_dir(a)
            })
        })
        .map(|a| a.to_path_buf())
}

/// `PG_<major>_<catversion>`, the directory PostgreSQL makes inside a tablespace location.
pub fn is_tablespace_version_dir(dir: &Path) -> bool {
    dir.file_name()
        .and_then(OsStr::to_str)
        .is_some_and(is_tablespace_version_name)
}

fn is_tablespace_version_name(name: &str) -> bool {
    let mut parts = name.split('_');
    let digits =
        |p: Option<&str>| p.is_some_and(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()));
    parts.next() == Some("PG")
        && digits(parts.next())
        && digits(parts.next())
        && parts.next().is_none()
}

/// The most entries of one directory looked at for a tablespace's version directory: a
/// tablespace location holds one per major version; a directory with more entries than this
/// is judged by its first ones (bounded work on a huge directory).
const MAX_ENTRIES_EXAMINED: usize = 10_000;

/// Whether `dir` holds a `PG_<major>_<catversion>` directory: a tablespace location.
fn holds_tablespace_version_dir(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().take(MAX_ENTRIES_EXAMINED).any(|e| {
        e.file_name()
            .to_str()
            .is_some_and(is_tablespace_version_name)
            && e.file_type().is_ok_and(|t| t.is_dir())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_part_of_a_cluster_is_recognised() {
        let root = tempfile::tempdir().unwrap();
        let pgdata = root.path().join("data");
        std::fs::create_dir_all(pgdata.join("global")).unwrap();
        std::fs::create_dir_all(pgdata.join("base/5")).unwrap();
        std::fs::create_dir_all(pgdata.join("pg_tblspc")).unwrap();
        std::fs::write(pgdata.join("PG_VERSION"), "18\n").unwrap();
        std::fs::write(pgdata.join("base/5/PG_VERSION"), "18\n").unwrap();
        std::fs::write(pgdata.join("global/pg_control"), [0u8; 8192]).unwrap();
        let location = root.path().join("ts1");
        std::fs::create_dir_all(location.join("PG_18_202506291/5")).unwrap();
        std::os::unix::fs::symlink(&location, pgdata.join("pg_tblspc/16400")).unwrap();
        let pgdata = std::fs::canonicalize(&pgdata).unwrap();
        let location = std::fs::canonicalize(&location).unwrap();
        for (dir, want) in [
            (pgdata.clone(), &pgdata),
            (pgdata.join("base/5"), &pgdata),
            (pgdata.join("base/5/new/deeper"), &pgdata),
            (pgdata.join("pg_tblspc"), &pgdata),
            (pgdata.join("pg_tblspc/16400"), &location),
            (location.clone(), &location),
            (
                location.join("PG_18_202506291/5"),
                &location.join("PG_18_202506291"),
            ),
            (location.join("new"), &location),
        ] {
            assert_eq!(
                enclosing_cluster(&dir).as_ref(),
                Some(want),
                "{}",
                dir.display()
            );
        }
        assert_eq!(enclosing_cluster(&root.path().join("elsewhere")), None);
        assert!(!is_tablespace_version_dir(Path::new("/x/PG_18")));
        assert!(!is_tablespace_version_dir(Path::new("/x/PG_18_2025x")));
    }
}
