//! The inverse of PostgreSQL's `relpath()`: a relation file's path, relative to the data
//! directory, back to the relation it belongs to.
//!
//! PostgreSQL names a relation's files by where they live and which file number they
//! carry (`GetRelationPath` in `common/relpath.c`); [`DatabaseCatalog`] builds these
//! names forwards, and tools that are handed a path — `pg_aios.target_desc`, a checksum
//! failure's message, a file found on disk — need them read backwards:
//!
//! ```text
//!  global/<filenode>[_fork][.segno]                                 pg_global (1664), database 0
//!  base/<dboid>/[t<proc>_]<filenode>[_fork][.segno]                 pg_default (1663)
//!  pg_tblspc/<spc>/PG_18_<catversion>/<dboid>/[t<proc>_]<filenode>[_fork][.segno]
//! ```
//!
//! `_fork` is `_fsm`, `_vm` or `_init` (none for the main fork), `.segno` the 1 GB segment
//! after the first (segment 0 has no suffix, so `.0` is never written), and `t<proc>_` marks
//! a temporary relation's file, named after the backend (its proc number) that made it.
//! Every number is written by PostgreSQL as a plain decimal: a path with a sign, a leading
//! zero, an OID 0 or anything after the name is not one PostgreSQL writes, and is `None`.
//!
//! Worked example: `pg_tblspc/16390/PG_18_202506291/5/16391_fsm.2` is the free-space map's
//! third segment of file 16391 in database 5, tablespace 16390.
//!
//! [`DatabaseCatalog`]: super::DatabaseCatalog

use super::{DEFAULT_TABLESPACE_OID, GLOBAL_TABLESPACE_OID, TABLESPACE_VERSION_PREFIX};
use crate::storage::{ForkNumber, MAX_SEGMENTS};

/// A relation file's path read back into what names it (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct RelPathParts {
    /// The tablespace: [`DEFAULT_TABLESPACE_OID`] for `base/`, [`GLOBAL_TABLESPACE_OID`]
    /// for `global/`, else the OID under `pg_tblspc/`.
    pub tablespace_oid: u32,
    /// The database's OID (0 for a shared relation in `global/`).
    pub database_oid: u32,
    /// The file number (`pg_class.relfilenode`, or the relation mapper's).
    pub relfilenode: u32,
    /// The fork.
    pub fork: ForkNumber,
    /// The segment (0 for the file without a `.N` suffix).
    pub segment: u32,
    /// The proc number of the backend a temporary relation's file (`t3_16384`) belongs to.
    pub temp_proc_number: Option<u32>,
}

/// Reads a relation file's path relative to the data directory (`base/5/16384.2`,
/// `global/1262_vm`, `pg_tblspc/16390/PG_18_202506291/5/16391_fsm`) as PostgreSQL's
/// `relpath()` writes it, or `None` for a path of any other shape.
pub fn parse_relpath(path: &str) -> Option<RelPathParts> {
    let parts: Vec<&str> = path.split('/').collect();
    let (tablespace_oid, database_oid, file) = match parts.as_slice() {
        ["global", file] => (GLOBAL_TABLESPACE_OID, 0, *file),
        ["base", db, file] => (DEFAULT_TABLESPACE_OID, oid(db)?, *file),
        ["pg_tblspc", spc, version, db, file] if is_version_dir(version) => {
            (oid(spc)?, oid(db)?, *file)
        }
        _ => return None,
    };
    let (name, segment) = match file.split_once('.') {
        None => (file, 0),
        Some((name, segno)) => {
            let segment = decimal(segno)?;
            if segment == 0 || segment >= MAX_SEGMENTS {
                return None;
            }
            (name, segment)
        }
    };
    let (temp_proc_number, name) = match name.strip_prefix('t') {
        Some(rest) => {
            // Temporary files live only in a database's directory, never in global/.
            if tablespace_oid == GLOBAL_TABLESPACE_OID {
                return None;
            }
            let (proc_number, name) = rest.split_once('_')?;
            (Some(decimal(proc_number)?), name)
        }
        None => (None, name),
    };
    let (node, fork) = match name.split_once('_') {
        None => (name, ForkNumber::Main),
        Some((node, "fsm")) => (node, ForkNumber::Fsm),
        Some((node, "vm")) => (node, ForkNumber::Vm),
        Some((node, "init")) => (node, ForkNumber::Init),
        Some(_) => return None,
    };
    Some(RelPathParts {
        tablespace_oid,
        database_oid,
        relfilenode: oid(node)?,
        fork,
        segment,
        temp_proc_number,
    })
}

/// `PG_18_<catversion>`: the version directory of a PostgreSQL 18 tablespace.
fn is_version_dir(name: &str) -> bool {
    name.strip_prefix(TABLESPACE_VERSION_PREFIX)
        .is_some_and(|catversion| decimal(catversion).is_some())
}

/// A decimal number as PostgreSQL prints one: digits only, no leading zero (but `0`).
fn decimal(s: &str) -> Option<u32> {
    let canonical =
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
    if canonical {
        s.parse().ok()
    } else {
        None
    }
}

/// An OID in a path: a decimal other than 0 (`InvalidOid` names no file or directory).
fn oid(s: &str) -> Option<u32> {
    decimal(s).filter(|&v| v != 0)
}

#[cfg(test)]
mod tests {
    use super::{parse_relpath, RelPathParts};
    use crate::storage::ForkNumber::{self, Fsm, Init, Main, Vm};

    fn parts(
        tablespace_oid: u32,
        database_oid: u32,
        relfilenode: u32,
        fork: ForkNumber,
        segment: u32,
        temp_proc_number: Option<u32>,
    ) -> Option<RelPathParts> {
        Some(RelPathParts {
            tablespace_oid,
            database_oid,
            relfilenode,
            fork,
            segment,
            temp_proc_number,
        })
    }

    #[test]
    fn every_shape_relpath_writes_reads_back() {
        let spc = "pg_tblspc/16390/PG_18_202506291";
        let cases = [
            ("base/5/16384", parts(1663, 5, 16384, Main, 0, None)),
            ("base/5/16384_fsm", parts(1663, 5, 16384, Fsm, 0, None)),
            ("base/5/16384_vm", parts(1663, 5, 16384, Vm, 0, None)),
            ("base/5/16384_init", parts(1663, 5, 16384, Init, 0, None)),
            ("base/5/16384.2", parts(1663, 5, 16384, Main, 2, None)),
            ("base/5/16384_fsm.1", parts(1663, 5, 16384, Fsm, 1, None)),
            (
                "base/16400/16384.32767",
                parts(1663, 16400, 16384, Main, 32767, None),
            ),
            ("base/5/t3_16400", parts(1663, 5, 16400, Main, 0, Some(3))),
            (
                "base/5/t0_16400_vm.1",
                parts(1663, 5, 16400, Vm, 1, Some(0)),
            ),
            ("global/1262", parts(1664, 0, 1262, Main, 0, None)),
            ("global/1262_vm", parts(1664, 0, 1262, Vm, 0, None)),
            ("global/1213_fsm.3", parts(1664, 0, 1213, Fsm, 3, None)),
            (
                &format!("{spc}/5/16391"),
                parts(16390, 5, 16391, Main, 0, None),
            ),
            (
                &format!("{spc}/5/16391_fsm"),
                parts(16390, 5, 16391, Fsm, 0, None),
            ),
            (
                &format!("{spc}/5/16391_init.4"),
                parts(16390, 5, 16391, Init, 4, None),
            ),
            (
                &format!("{spc}/5/t12_16391"),
                parts(16390, 5, 16391, Main, 0, Some(12)),
            ),
        ];
        for (path, want) in cases {
            assert_eq!(parse_relpath(path), want, "{path}");
        }
    }

    #[test]
    fn paths_postgresql_never_writes_are_none() {
        let malformed = [
            "",
            "16384",
            "base",
            "base/5",
            "base/5/",
            "base/x/1",
            "base/5/x",
            "base/0/16384",
            "base/5/0",
            "base/05/16384",
            "base/5/+16384",
            "base/5/-16384",
            "base/5/16384_bogus",
            "base/5/16384_",
            "base/5/16384_fsm_vm",
            "base/5/16384.0",
            "base/5/16384.",
            "base/5/16384.01",
            "base/5/16384.x",
            "base/5/16384.1.2",
            "base/5/16384.32768",
            "base/5/16384 ",
            "base/5/4294967296",
            "base/5/t_16384",
            "base/5/tx_16384",
            "base/5/t3",
            "base/5/16384/1",
            "/base/5/16384",
            "global/t3_1262",
            "global/1262/1",
            "pg_wal/000000010000000000000001",
            "pg_tblspc/16390/5/16391",
            "pg_tblspc/16390/PG_17_202307071/5/16391",
            "pg_tblspc/16390/PG_18_/5/16391",
            "pg_tblspc/16390/PG_18_2025x/5/16391",
            "pg_tblspc/0/PG_18_202506291/5/16391",
            "pg_tblspc/16390/PG_18_202506291/16391",
        ];
        for path in malformed {
            assert_eq!(parse_relpath(path), None, "{path:?}");
        }
    }
}
