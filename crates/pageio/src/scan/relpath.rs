//! # Relation paths under a data directory
//!
//! A scan is told `--pgdata DIR --heap base/5/16384`. Taken literally, that path could name
//! anything — `../../etc/passwd`, `/etc/shadow`, a FIFO that blocks the first `open(2)`
//! forever, a device — and a file that is not a heap "scans" to zero rows with success. The
//! policy here turns a relation path into a file the scan may read, or an error saying why
//! not:
//!
//! ```text
//!   PGDATA/relpath ──canonicalize (all symlinks)──► real path
//!       inside canonical PGDATA?                     ok
//!       relpath = pg_tblspc/<oid>/… and real path
//!         inside canonical PGDATA/pg_tblspc/<oid>?   ok (a tablespace link)
//!       otherwise                                    OutsideDataDirectory
//!   regular file?  (not a directory, FIFO, socket or device — checked before any open)
//!   size a whole number of 8 kB blocks?
//!   block 0: valid page header, and
//!       heap:  no special space              (a btree has 16 bytes of it, the
//!       index: btree metapage magic 0x053162  metapage says BTREE_MAGIC)
//! ```
//!
//! Block 0 identifies the kind: PostgreSQL's heap pages have no special space
//! (`pd_special = BLCKSZ`), a btree's block 0 is its metapage and every other btree page
//! carries a 16-byte `BTPageOpaqueData`. An all-zero block 0 (a new page) and an empty file
//! are an empty heap, as PostgreSQL reads them.

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

use thiserror::Error;

use crate::page::btree::BTREE_MAGIC;
use crate::page::header::{PageHeader, PD_VALID_FLAG_BITS, PG_PAGE_LAYOUT_VERSION};
use crate::page::BLCKSZ;

/// What a relation path should hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelationKind {
    /// A heap (table) main fork.
    Heap,
    /// A btree index main fork.
    Btree,
}

impl RelationKind {
    fn as_str(self) -> &'static str {
        match self {
            RelationKind::Heap => "heap",
            RelationKind::Btree => "btree index",
        }
    }
}

/// Why a relation path was refused. Each names the path and what is wrong.
#[derive(Debug, Error)]
pub enum RelPathError {
    /// The path does not exist or cannot be resolved.
    #[error("relation file \"{path}\" cannot be used: {source}")]
    Resolve {
        /// The path as given, joined to the data directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A link on the way to the file (a tablespace's `pg_tblspc/<oid>`) leads nowhere.
    #[error("relation file \"{path}\" cannot be used: \"{link}\" is a link to \"{target}\", which does not exist: restore or mount the tablespace's directory there, or point at the right data directory")]
    DanglingLink {
        /// The path as given, joined to the data directory.
        path: PathBuf,
        /// The link.
        link: PathBuf,
        /// Where it points.
        target: PathBuf,
    },
    /// The path resolves outside the data directory (and not through a tablespace link).
    #[error("relation file \"{given}\" resolves to \"{resolved}\", outside the data directory \"{pgdata}\": relation paths must stay inside it (tablespaces through pg_tblspc/<oid>)")]
    OutsideDataDirectory {
        /// The path as given.
        given: String,
        /// Where it leads.
        resolved: PathBuf,
        /// The data directory.
        pgdata: PathBuf,
    },
    /// The path is not a regular file.
    #[error("relation file \"{path}\" is {what}, not a regular file")]
    NotRegularFile {
        /// The resolved path.
        path: PathBuf,
        /// "a directory", "a FIFO", …
        what: &'static str,
    },
    /// The file's contents are not the expected kind of relation.
    #[error("\"{path}\" is not a {expected}: {reason}")]
    WrongKind {
        /// The resolved path.
        path: PathBuf,
        /// What was asked for.
        expected: &'static str,
        /// What the file looks like instead.
        reason: String,
    },
}

/// Resolves `relpath` (relative to `pgdata`, e.g. `base/5/16384`) to the real path of a
/// regular file inside the data directory — or inside the tablespace a `pg_tblspc/<oid>`
/// link leads to — whose block 0 shows it is a relation of `kind`.
pub fn resolve_relation_path(
    pgdata: &Path,
    relpath: &str,
    kind: RelationKind,
) -> Result<PathBuf, RelPathError> {
    let joined = pgdata.join(relpath);
    let resolve = |p: &Path| {
        std::fs::canonicalize(p).map_err(|source| {
            match crate::storage::dangling_link_on_the_way(p) {
                Some((link, target)) => RelPathError::DanglingLink {
                    path: p.to_path_buf(),
                    link,
                    target,
                },
                None => RelPathError::Resolve {
                    path: p.to_path_buf(),
                    source,
                },
            }
        })
    };
    let real_pgdata = resolve(pgdata)?;
    let real = resolve(&joined)?;
    let inside = real.starts_with(&real_pgdata) || through_tablespace(pgdata, relpath, &real);
    if !inside {
        return Err(RelPathError::OutsideDataDirectory {
            given: relpath.to_string(),
            resolved: real,
            pgdata: real_pgdata,
        });
    }
    // The canonical path is the file itself (no link left to follow). It is opened without
    // blocking (a FIFO would otherwise wait for a writer forever) and checked on the open
    // descriptor, so what is read is what was checked.
    let cannot = |source| RelPathError::Resolve {
        path: real.clone(),
        source,
    };
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&real)
    {
        Ok(file) => file,
        Err(e) => {
            // Some kinds refuse the open itself (a socket: ENXIO): name what it is.
            if let Ok(meta) = std::fs::symlink_metadata(&real) {
                if !meta.file_type().is_file() {
                    let what = crate::storage::file_type_name(meta.file_type());
                    return Err(RelPathError::NotRegularFile { path: real, what });
                }
            }
            return Err(cannot(e));
        }
    };
    let meta = file.metadata().map_err(cannot)?;
    let file_type = meta.file_type();
    if !file_type.is_file() {
        let what = crate::storage::file_type_name(file_type);
        return Err(RelPathError::NotRegularFile { path: real, what });
    }
    if meta.len() > crate::storage::SEGMENT_BYTES {
        return Err(RelPathError::WrongKind {
            path: real,
            expected: kind.as_str(),
            reason: format!(
                "it is {} bytes, more than a relation segment's {} (1 GB): it is not a relation segment, or it was damaged",
                meta.len(),
                crate::storage::SEGMENT_BYTES
            ),
        });
    }
    check_kind(&real, &file, meta.len(), kind)?;
    Ok(real)
}

/// Whether `relpath` is `pg_tblspc/<oid>/…` (no `..`) and `real` lies inside what that
/// tablespace link points to.
fn through_tablespace(pgdata: &Path, relpath: &str, real: &Path) -> bool {
    let components: Vec<Component<'_>> = Path::new(relpath).components().collect();
    let plain = components.iter().all(|c| matches!(c, Component::Normal(_)));
    match components.as_slice() {
        [Component::Normal(top), Component::Normal(oid), ..] if plain && *top == "pg_tblspc" => {
            std::fs::canonicalize(pgdata.join("pg_tblspc").join(oid))
                .is_ok_and(|location| real.starts_with(location))
        }
        _ => false,
    }
}

/// Looks at block 0 of a regular file of `len_bytes` to tell a heap from a btree from
/// something else.
fn check_kind(
    path: &Path,
    file: &std::fs::File,
    len_bytes: u64,
    kind: RelationKind,
) -> Result<(), RelPathError> {
    let wrong = |reason: String| RelPathError::WrongKind {
        path: path.to_path_buf(),
        expected: kind.as_str(),
        reason,
    };
    // A size that is not a whole number of pages is a truncated or damaged relation, not a
    // different kind of file: the scan reports it, naming the file, its size and the page
    // size. Only a file too short to hold block 0 cannot be told apart here.
    if len_bytes < BLCKSZ as u64 {
        return match kind {
            RelationKind::Heap => Ok(()),
            RelationKind::Btree => Err(wrong(format!(
                "the file is {len_bytes} bytes, shorter than one {BLCKSZ}-byte page (no metapage)"
            ))),
        };
    }
    let mut page = vec![0u8; BLCKSZ];
    std::os::unix::fs::FileExt::read_exact_at(file, &mut page, 0).map_err(|source| {
        RelPathError::Resolve {
            path: path.to_path_buf(),
            source,
        }
    })?;
    if page.iter().all(|&b| b == 0) {
        // A new page: PostgreSQL treats it as empty.
        return match kind {
            RelationKind::Heap => Ok(()),
            RelationKind::Btree => Err(wrong("block 0 is all zeroes (no metapage)".into())),
        };
    }
    let header = PageHeader::parse(&page).map_err(|e| wrong(e.to_string()))?;
    if let Some(problem) = header_problem(&header) {
        return Err(wrong(format!(
            "block 0 has an invalid page header ({problem}); it is not a PostgreSQL relation file"
        )));
    }
    let special_bytes = BLCKSZ - header.pd_special as usize;
    let btree_magic = page
        .get(24..28)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        == Some(BTREE_MAGIC);
    match kind {
        RelationKind::Heap if special_bytes == 0 => Ok(()),
        RelationKind::Heap if btree_magic => Err(wrong(
            "it is a btree index (block 0 is a btree metapage): pass it as the index, and the table's heap file as the heap".into(),
        )),
        RelationKind::Heap => Err(wrong(format!(
            "its pages have a {special_bytes}-byte special space, as index pages do; heap pages have none"
        ))),
        RelationKind::Btree if btree_magic && special_bytes > 0 => Ok(()),
        RelationKind::Btree if special_bytes == 0 => Err(wrong(
            "it is a heap (its pages have no special space): pass the table's btree file as the index".into(),
        )),
        RelationKind::Btree => Err(wrong(format!(
            "block 0 is not a btree metapage (magic {:#x}, expected {BTREE_MAGIC:#x}); is it another kind of index?",
            u32::from_le_bytes([page[24], page[25], page[26], page[27]])
        ))),
    }
}

/// PostgreSQL's `PageHeaderIsValid`, as the reason it fails.
fn header_problem(h: &PageHeader) -> Option<String> {
    let blcksz = BLCKSZ as u16;
    if h.pd_flags & !PD_VALID_FLAG_BITS != 0 {
        return Some(format!("pd_flags {:#x} has unknown bits", h.pd_flags));
    }
    if !(h.pd_lower <= h.pd_upper && h.pd_upper <= h.pd_special && h.pd_special <= blcksz) {
        return Some(format!(
            "pd_lower {} / pd_upper {} / pd_special {} out of order",
            h.pd_lower, h.pd_upper, h.pd_special
        ));
    }
    if !h.pd_special.is_multiple_of(8) {
        return Some(format!("pd_special {} is not aligned", h.pd_special));
    }
    if h.page_size_bytes() != BLCKSZ || h.layout_version() != PG_PAGE_LAYOUT_VERSION {
        return Some(format!(
            "page size {} / layout version {}, expected {BLCKSZ} / {PG_PAGE_LAYOUT_VERSION}",
            h.page_size_bytes(),
            h.layout_version()
        ));
    }
    None
}
