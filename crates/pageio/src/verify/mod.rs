//! # Offline checksum verification of a PostgreSQL 18 cluster (`pg_checksums --check`)
//!
//! ## Problem
//!
//! A DBA who must check every page of a multi-terabyte cluster runs `pg_checksums --check`,
//! which reads one file at a time with synchronous 8 kB reads and checksums on one core. This
//! module does the same check — same files, same block numbers, same verdicts, same counts —
//! with many reads in flight through the AIO subsystem, the checksum work spread over every
//! core, and data the page cache already holds checked where it lies, without a copy.
//!
//! ## Mechanism
//!
//! ```text
//!   ControlFile::read (page)        global/pg_control: version 1800, CRC-32C, block and segment
//!        │ check_for_verify          size, "cluster must be shut down", checksums enabled
//!        ▼
//!   walk::walk_cluster              global/, base/<db>/, pg_tblspc/<oid>/PG_18_*/<db>/ in readdir
//!        │                           order with pg_checksums' skip list → [ClusterFile]
//!        ▼
//!   checker::check_files            scanner threads take 16 MB windows; a window the page cache
//!        │                           holds entirely is checksummed in place through a read-only
//!        │                           mapping (mapped), any other is read through the AIO
//!        │                           subsystem and checksummed where each read completes
//!        ▼
//!   files reported in walk order as they finish, failures sorted by block
//! ```
//!
//! The settings that suit this one long sequential read — `io_method = auto`, a scanner and
//! an I/O worker per CPU, and under direct I/O the largest reads with 128 in flight — are
//! [`defaults::verify_config`], so every caller (the `pageio verify` command or an embedding
//! program) runs with the same ones; each yields to a setting the caller chose.
//!
//! Everything is opened read-only: `pg_control` with `std::fs::read`, directories with
//! `read_dir`, relation files through the [`crate::storage::FileCache`] with
//! [`crate::storage::OpenMode::Read`] (`O_RDONLY`); mappings are `PROT_READ` on those
//! descriptors.
//!
//! ## Worked example
//!
//! On the `pg18-small` fixture: pg_control passes (shut down, checksum version 1); the walk
//! finds 962 files; the checker reads 5159 blocks and finds 0 mismatches — the same
//! "Files scanned: 962 / Blocks scanned: 5159 / Bad checksums: 0" that `pg_checksums -c`
//! prints. Flip one byte in block 7 of `base/5/16384` and the checker reports
//! `ChecksumFailure { block: 7, calculated: …, stored: 27548 }` for that file.
//!
//! ```no_run
//! use pageio::verify::{check_files, default_jobs, verify_config, walk_cluster, CheckOptions, ControlFile};
//! use pageio::{Aio, IoConfig};
//! use std::path::Path;
//!
//! let pgdata = Path::new("/var/lib/postgresql/18/main");
//! let control = ControlFile::read(pgdata)?;
//! control.check_for_verify()?;
//! let files = walk_cluster(pgdata.as_os_str(), None)?;
//! let jobs = default_jobs();
//! // Verify's defaults on top of the engine's; no setting was chosen explicitly here.
//! let aio = Aio::new(verify_config(IoConfig::default(), jobs, |_setting| false))?;
//! let options = CheckOptions { jobs, mapped_reads: true };
//! let totals = check_files(&aio, files, &options, |file, outcome| {
//!     for f in &outcome.failures {
//!         eprintln!("{}: block {} bad", file.display, f.block);
//!     }
//! }, |_bytes| {})?;
//! println!("Bad checksums:  {}", totals.bad_checksums);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod checker;
pub mod defaults;
pub mod enable;
pub(crate) mod mapped;
pub mod online;
pub mod walk;

pub use crate::page::control::{ControlFile, DbState};
pub use checker::{
    check_files, CheckOptions, CheckTotals, ChecksumFailure, FileOutcome, WINDOW_BYTES,
};
pub use defaults::{
    default_jobs, fit_jobs_to_descriptors, verify_config, TooManyJobs, RINGS_PER_CHECK_JOB,
    RINGS_PER_ENABLE_JOB,
};
pub use enable::{
    enable_checksums, rewrite_checksums, sync_data_directory, write_control_file, EnableObserver,
    EnableStep, EnableTotals, SyncMethod,
};
pub use online::{
    check_cluster_online, stable_partial_tail, start_online_check, OnlineFailure,
    OnlineFileOutcome, OnlineOptions, OnlineTotals, PartialTail, REREADS, REREAD_DELAY,
};
pub use walk::{walk_cluster, walk_cluster_online, ClusterFile};

use std::path::PathBuf;

use thiserror::Error;

use crate::aio::AioError;
use crate::page::control::ControlFileError;

/// Why verification could not run or could not finish. Messages for conditions
/// `pg_checksums` also detects use its wording, so the two tools' output can be compared;
/// [`VerifyError::hint`] says how to fix the cause.
#[derive(Debug, Error)]
pub enum VerifyError {
    /// `global/pg_control` cannot be read, is not PostgreSQL 18's, or refuses the step asked
    /// for (a running cluster, checksums off for a check, already on for `--enable`, already
    /// off for `--disable`): [`ControlFileError`] says which, in `pg_checksums`' words.
    #[error(transparent)]
    Control(#[from] ControlFileError),
    /// Writing a page back failed (EIO, ENOSPC, a write of nothing); the message names the
    /// file, the blocks and the cause.
    #[error("{0}")]
    WriteFailed(AioError),
    /// A file or directory could not be synced.
    #[error("could not fsync file \"{}\": {source}", path.display())]
    Sync {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// `global/pg_control` could not be written.
    #[error("could not write file \"{}\": {source}", path.display())]
    ControlFileWrite {
        /// Path of pg_control.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A directory of the cluster could not be listed.
    #[error("could not open directory \"{}\": {source}", path.display())]
    OpenDirectory {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A directory entry could not be examined.
    #[error("could not stat file \"{}\": {source}", path.display())]
    Stat {
        /// The entry.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A `pg_tblspc/<oid>` link leads to a location without a PostgreSQL 18 directory.
    #[error("tablespace {oid} at \"{}\" has no PG_18_… directory (it holds: {found}): is it a tablespace of another PostgreSQL version, or a link left behind by a dropped tablespace?", location.display())]
    NoTablespaceVersionDirectory {
        /// The tablespace's OID (the link's name in pg_tblspc).
        oid: String,
        /// Where the link leads.
        location: PathBuf,
        /// What the location holds instead (a few names, or "nothing").
        found: String,
    },
    /// A relation file name has a segment suffix that is not a positive number.
    #[error("invalid segment number 0 in file name \"{}\"", path.display())]
    InvalidSegmentNumber {
        /// The file.
        path: PathBuf,
    },
    /// Something other than a regular file, a directory or a link sits where a relation
    /// file can be (pg_checksums skips it without a word; its pages cannot be checked).
    #[error("\"{}\" is {what}, not a regular file: its pages cannot be checked; a relation's files are regular files: restore it from a backup, or remove it if it does not belong to the cluster", path.display())]
    NotRegularFile {
        /// The entry.
        path: PathBuf,
        /// What it is ("a FIFO", "a socket", "a symbolic link to a character device", …).
        what: String,
    },
    /// A relation segment larger than a segment can be (PostgreSQL stops with "segment too
    /// big" on it): not read, since its size is not bounded.
    #[error("relation segment \"{}\" is {size_bytes} bytes, more than a segment's {max_bytes}: it is not a relation segment, or it was damaged; restore it from a backup", path.display())]
    SegmentTooBig {
        /// The file.
        path: PathBuf,
        /// Its size.
        size_bytes: u64,
        /// A segment's size (1 GB).
        max_bytes: u64,
    },
    /// A file ends in a partial block.
    #[error(
        "could not read block {block} in file \"{path}\": read {bytes_read} of {expected_bytes}"
    )]
    ShortRead {
        /// The file, as messages name it.
        path: String,
        /// Block within the file.
        block: u64,
        /// Bytes of the block that exist.
        bytes_read: usize,
        /// 8192.
        expected_bytes: usize,
    },
    /// The kernel failed a read.
    #[error("could not read block {block} in file \"{path}\": {source}")]
    ReadFailed {
        /// The file, as messages name it.
        path: String,
        /// First block of the failed read, within the file.
        block: u64,
        /// The OS error.
        source: std::io::Error,
    },
    /// The AIO subsystem or the storage layer refused (open failure, O_DIRECT unsupported, …).
    #[error(transparent)]
    Aio(#[from] AioError),
    /// A checksum check of a cluster whose server runs (or crashed), without the online
    /// check: `pg_checksums`' refusal, with the online check named as the way to go on.
    #[error("cluster must be shut down")]
    Running {
        /// The state in pg_control.
        state: DbState,
    },
    /// An online check was asked for, but no server runs for the data directory.
    #[error("no server is running for the data directory \"{}\": postmaster.pid is missing or names no live process", pgdata.display())]
    NotRunning {
        /// The data directory.
        pgdata: PathBuf,
    },
    /// A broken internal invariant; please report it.
    #[error("internal error: {0}")]
    Internal(String),
}

impl VerifyError {
    /// The block (within its file) a read error or short read is about, if this is one.
    pub fn block(&self) -> Option<u64> {
        match self {
            VerifyError::ShortRead { block, .. } | VerifyError::ReadFailed { block, .. } => {
                Some(*block)
            }
            _ => None,
        }
    }

    /// A short, stable name of the error's kind (`cluster_running`, `short_read`, …), for
    /// programs reading a machine-readable report; the message is for people.
    pub fn kind(&self) -> &'static str {
        match self {
            VerifyError::Control(e) => e.kind(),
            VerifyError::WriteFailed(_) => "write_failed",
            VerifyError::Sync { .. } => "sync_failed",
            VerifyError::ControlFileWrite { .. } => "control_file_unwritable",
            VerifyError::OpenDirectory { .. } => "directory_unreadable",
            VerifyError::NoTablespaceVersionDirectory { .. } => {
                "tablespace_without_version_directory"
            }
            VerifyError::Stat { .. } => "stat_failed",
            VerifyError::InvalidSegmentNumber { .. } => "invalid_segment_number",
            VerifyError::NotRegularFile { .. } => "not_a_regular_file",
            VerifyError::SegmentTooBig { .. } => "segment_too_big",
            VerifyError::ShortRead { .. } => "short_read",
            VerifyError::ReadFailed { .. } => "read_failed",
            VerifyError::Aio(_) => "io",
            VerifyError::NotRunning { .. } => "cluster_not_running",
            VerifyError::Running { .. } => "cluster_running",
            VerifyError::Internal(_) => "internal",
        }
    }

    /// How to fix the cause, when there is something to say beyond the message.
    pub fn hint(&self) -> Option<String> {
        match self {
            VerifyError::Control(e) => e.hint(),
            VerifyError::WriteFailed(e) => Some(format!(
                "pg_control was not changed: the cluster still has data checksums off and starts as before. {}, then run {} again; pages already rewritten are skipped.",
                match e {
                    AioError::Short { .. } => "A write of nothing usually means the file system is full: free space on it".to_string(),
                    _ => write_cause(e.errno()),
                },
                crate::config::Term::EnableChecksums
            )),
            VerifyError::Sync { source, .. } => Some(format!(
                "pg_control was not changed: the cluster still has data checksums off. {}, then run {} again.",
                write_cause(source.raw_os_error()),
                crate::config::Term::EnableChecksums
            )),
            VerifyError::ControlFileWrite { source, .. } => Some(format!(
                "{}, then run the command again.",
                write_cause(source.raw_os_error())
            )),
            VerifyError::OpenDirectory { path, .. } | VerifyError::Stat { path, .. } => {
                crate::storage::dangling_link_on_the_way(path).map(|(link, target)| {
                    format!(
                        "\"{}\" is a link to \"{}\", which does not exist: restore or mount the tablespace's directory there (or, for a tablespace dropped by hand, remove the link).",
                        link.display(),
                        target.display()
                    )
                })
            }
            VerifyError::Running { state } => Some(format!(
                "pg_control says the cluster is {}; a running server tears pages under a reader that does not know it runs. To check it while it runs, use {}; else stop it cleanly (pg_ctl stop -D PGDATA -m fast), or if it crashed, start and stop it once so recovery completes.",
                state.describe(),
                crate::config::Term::OnlineCheck
            )),
            VerifyError::NotRunning { .. } => Some(format!(
                "the check of a running cluster ({}) reads it while its server runs; for a stopped cluster, check without {} (the offline check, as pg_checksums), or start the server first.",
                crate::config::Term::OnlineCheck,
                crate::config::Term::OnlineCheck
            )),
            VerifyError::ShortRead { .. } => Some(
                "the file's size is not a multiple of 8192 bytes: it was truncated or damaged (pg_checksums stops here too).".into(),
            ),
            _ => None,
        }
    }
}

/// The offline check's refusals (`pg_checksums --check`'s, see
/// [`ControlFile::check_for_verify`]), a running cluster's naming the online check.
pub fn check_for_offline_verify(control: &ControlFile) -> Result<(), VerifyError> {
    control.check_for_verify().map_err(|e| match e {
        ControlFileError::NotShutDown { state } => VerifyError::Running { state },
        other => VerifyError::Control(other),
    })
}

/// Why a write or sync failed, as the first half of a hint ("…, then run --enable again"),
/// from its errno: what the user must change.
fn write_cause(errno: Option<i32>) -> String {
    match errno {
        Some(libc::ENOSPC) => "The file system holding the file is full: free space on it (a rewrite needs none, but the file system refused the write)".into(),
        Some(libc::EDQUOT) => "The disk quota of this user is used up: raise it or free space".into(),
        Some(libc::EROFS) => "The file system is mounted read-only: remount it read-write (mount -o remount,rw)".into(),
        Some(libc::EACCES) => "This user may not write the file (a read-only file, or another owner): run as the cluster's owner, or make the file writable (chmod u+w)".into(),
        Some(libc::EPERM) => "Writing the file is not permitted: it may be immutable or append-only (lsattr, chattr -i), or a security policy refuses it".into(),
        Some(libc::EIO) => "The device reported an I/O error: check the kernel log (dmesg) and the disk".into(),
        Some(errno) => format!("Fix the cause ({})", std::io::Error::from_raw_os_error(errno)),
        None => "Fix the cause named above".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_a_distinct_snake_case_name() {
        let io = || std::io::Error::from_raw_os_error(libc::EIO);
        let errors = [
            VerifyError::Control(ControlFileError::Read {
                path: "p".into(),
                source: io(),
            }),
            VerifyError::Control(ControlFileError::Short {
                path: "p".into(),
                len_bytes: 1,
                expected_bytes: 2,
            }),
            VerifyError::Control(ControlFileError::Version {
                found: 1,
                expected: 1800,
            }),
            VerifyError::Control(ControlFileError::Crc {
                path: "p".into(),
                stored: 1,
                computed: 2,
            }),
            VerifyError::Control(ControlFileError::BlockSize {
                found: 1,
                expected: 8192,
            }),
            VerifyError::Control(ControlFileError::SegmentSize {
                found: 1,
                expected: 131072,
            }),
            VerifyError::Control(ControlFileError::NotShutDown {
                state: DbState::InProduction,
            }),
            VerifyError::Control(ControlFileError::ChecksumsDisabled),
            VerifyError::Control(ControlFileError::ChecksumsAlreadyEnabled),
            VerifyError::Control(ControlFileError::ChecksumsAlreadyDisabled),
            VerifyError::WriteFailed(AioError::Internal("x".into())),
            VerifyError::Sync {
                path: "p".into(),
                source: io(),
            },
            VerifyError::ControlFileWrite {
                path: "p".into(),
                source: io(),
            },
            VerifyError::OpenDirectory {
                path: "p".into(),
                source: io(),
            },
            VerifyError::Stat {
                path: "p".into(),
                source: io(),
            },
            VerifyError::InvalidSegmentNumber { path: "p".into() },
            VerifyError::ShortRead {
                path: "p".into(),
                block: 1,
                bytes_read: 1,
                expected_bytes: 8192,
            },
            VerifyError::ReadFailed {
                path: "p".into(),
                block: 1,
                source: io(),
            },
            VerifyError::NotRunning { pgdata: "p".into() },
            VerifyError::Internal("x".into()),
        ];
        let kinds: std::collections::BTreeSet<&str> = errors.iter().map(|e| e.kind()).collect();
        assert_eq!(kinds.len(), errors.len(), "{kinds:?}");
        assert!(kinds
            .iter()
            .all(|k| k.chars().all(|c| c.is_ascii_lowercase() || c == '_')));
        assert_eq!(errors[6].kind(), "cluster_running");
        assert_eq!(errors[16].kind(), "short_read");
    }

    /// Every hint that says to run again first names what to change, from the errno.
    #[test]
    fn run_again_hints_name_the_cause() {
        let target = crate::aio::IoTarget {
            path: "base/5/16384".into(),
            first_block: 3,
            nblocks: 1,
        };
        let write = |errno| {
            VerifyError::WriteFailed(AioError::Io {
                op: crate::aio::IoOp::Writev,
                errno,
                target: target.clone(),
            })
            .hint()
            .unwrap()
        };
        for (errno, cause) in [
            (libc::ENOSPC, "The file system holding the file is full"),
            (libc::EDQUOT, "The disk quota of this user is used up"),
            (
                libc::EROFS,
                "The file system is mounted read-only: remount it read-write",
            ),
            (
                libc::EACCES,
                "This user may not write the file (a read-only file, or another owner)",
            ),
            (
                libc::EPERM,
                "it may be immutable or append-only (lsattr, chattr -i)",
            ),
            (libc::EIO, "The device reported an I/O error"),
            (
                libc::EBADF,
                "Fix the cause (Bad file descriptor (os error 9))",
            ),
        ] {
            let hint = write(errno);
            assert!(hint.contains(cause), "{errno}: {hint}");
            assert!(
                hint.ends_with(", then run the enabling of checksums again; pages already rewritten are skipped."),
                "{hint}"
            );
            let sync = VerifyError::Sync {
                path: "p".into(),
                source: std::io::Error::from_raw_os_error(errno),
            }
            .hint()
            .unwrap();
            assert!(
                sync.contains(cause)
                    && sync.ends_with(", then run the enabling of checksums again."),
                "{sync}"
            );
        }
        let control = VerifyError::ControlFileWrite {
            path: "global/pg_control".into(),
            source: std::io::Error::from_raw_os_error(libc::EROFS),
        }
        .hint()
        .unwrap();
        assert_eq!(
            control,
            "The file system is mounted read-only: remount it read-write (mount -o remount,rw), then run the command again."
        );
    }
}
