//! Reading `global/pg_control`, the way `pg_checksums` does before it touches a page.
//!
//! It is the cluster's format, not one command's: `verify` and `checksums` refuse by it, the
//! catalog reader and the scans take their transaction horizons from it, `host` and `measure`
//! ask it whether checksums are on. So it sits here with the page format, below all of them,
//! with the CRC-32C that protects it (and the relation map, `pg_filenode.map`). The file is
//! read through [`crate::storage::read_small_file`]; [`ControlFileError`] says what is wrong,
//! in `pg_checksums`' words where it has them.
//!
//! # Problem
//!
//! Checking checksums is only meaningful on a cluster that has them and that nobody is
//! writing to: a running server tears pages under the reader and every torn page looks
//! corrupt. PostgreSQL records both facts in `pg_control`, a C struct (`ControlFileData`)
//! written at the start of an 8 kB file and protected by a CRC-32C. We read the handful of
//! fields `pg_checksums` consults, check the CRC, and refuse exactly when it refuses.
//!
//! # Mechanism
//!
//! The struct layout is fixed per `pg_control_version`; for PostgreSQL 18 (version 1800,
//! x86-64/aarch64 alignment) the fields we need sit at these byte offsets, found in
//! `src/include/catalog/pg_control.h` and confirmed on a real PostgreSQL 18.6 cluster:
//!
//! ```text
//!   0   system_identifier      u64
//!   8   pg_control_version     u32   must be 1800, else the offsets below are meaningless
//!  16   state                  u32   DBState: 1 shut down, 2 shut down in recovery, 6 in production …
//!  40   checkPointCopy         CheckPoint (the last checkpoint's record), of which:
//!  40     redo                 u64   the checkpoint's redo LSN: WAL replay starts here
//!  64     nextXid              u64   FullTransactionId: epoch << 32 | xid
//!  76     nextMulti            u32   next MultiXactId to assign
//!  80     nextMultiOffset      u32   next free slot of pg_multixact/members
//!  84     oldestXid            u32   cluster-wide minimum datfrozenxid: pg_xact starts here
//!  92     oldestMulti          u32   cluster-wide minimum datminmxid
//! 216   blcksz                 u32   must be 8192
//! 220   relseg_size            u32   must be 131072
//! 252   data_checksum_version  u32   0 = off, 1 = on
//! 292   crc                    u32   CRC-32C of bytes 0..292
//! ```
//!
//! The version is checked before the CRC because a cluster of another major version has its
//! CRC at another offset: "not PostgreSQL 18" is the useful message there, not "CRC wrong".
//!
//! # Worked example
//!
//! The `pg18-small` fixture reads as version 1800, state 1 (`DB_SHUTDOWNED`), blcksz 8192,
//! relseg_size 131072, data_checksum_version 1, and the CRC over its first 292 bytes equals
//! the stored one, so [`ControlFile::check_for_verify`] passes. Start the server and `state`
//! becomes 6 (`DB_IN_PRODUCTION`): "cluster must be shut down".
//!
//! # A running server's pg_control
//!
//! The server rewrites `pg_control` in place (one `write` of the 8 kB block at every
//! checkpoint, and more often during recovery). A reader can see half of an old and half of
//! a new version; the CRC then fails. [`ControlFile::read_consistent`] re-reads until the CRC
//! validates, at most [`CONTROL_READ_ATTEMPTS`] times [`CONTROL_READ_DELAY`] apart — as
//! PostgreSQL's own `get_controlfile` callers do for a running cluster — so a torn read is
//! never taken for damage, and real damage is still reported after a bounded wait. The online
//! check takes the redo LSN of the checkpoint ([`ControlFile::redo_lsn`]) from it.

use std::path::{Path, PathBuf};

use thiserror::Error;

use super::BLCKSZ;
use crate::storage::RELSEG_SIZE_BLOCKS;

/// Why `pg_control` cannot be read, or refuses what was asked. Messages for conditions
/// `pg_checksums` also detects use its wording, so the two tools' output can be compared.
#[derive(Debug, Error)]
pub enum ControlFileError {
    /// `global/pg_control` could not be read.
    #[error("could not open file \"{path}\" for reading: {source}")]
    Read {
        /// Path of pg_control.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// `global/pg_control` is shorter than the struct.
    #[error("could not read file \"{path}\": read {len_bytes} of {expected_bytes}")]
    Short {
        /// Path of pg_control.
        path: PathBuf,
        /// Its length.
        len_bytes: usize,
        /// The length needed.
        expected_bytes: usize,
    },
    /// `pg_control_version` is not PostgreSQL 18's.
    #[error("cluster is not compatible with this version of pageio: pg_control_version is {found}, PostgreSQL 18 writes {expected}")]
    Version {
        /// Version found.
        found: u32,
        /// 1800.
        expected: u32,
    },
    /// The CRC-32C of pg_control does not match.
    #[error("pg_control CRC value is incorrect")]
    Crc {
        /// Path of pg_control.
        path: PathBuf,
        /// CRC stored in the file.
        stored: u32,
        /// CRC computed over the struct.
        computed: u32,
    },
    /// The cluster uses another block size.
    #[error("database cluster is not compatible: it was initialized with block size {found}, but pageio supports only block size {expected}")]
    BlockSize {
        /// Block size in pg_control.
        found: u32,
        /// 8192.
        expected: u32,
    },
    /// The cluster uses another segment size.
    #[error("database cluster is not compatible: it was initialized with {found} blocks per segment, but pageio supports only {expected}")]
    SegmentSize {
        /// relseg_size in pg_control.
        found: u32,
        /// 131072.
        expected: u32,
    },
    /// The server is running, or crashed and was not restarted.
    #[error("cluster must be shut down")]
    NotShutDown {
        /// The state in pg_control.
        state: DbState,
    },
    /// Data checksums are off (asked to verify them).
    #[error("data checksums are not enabled in cluster")]
    ChecksumsDisabled,
    /// Asked to enable checksums that are already on.
    #[error("data checksums are already enabled in cluster")]
    ChecksumsAlreadyEnabled,
    /// Asked to disable checksums that are already off.
    #[error("data checksums are already disabled in cluster")]
    ChecksumsAlreadyDisabled,
}

impl ControlFileError {
    /// A short, stable name of the error's kind (`cluster_running`, `control_file_crc`, …),
    /// for programs reading a machine-readable report; the message is for people.
    pub fn kind(&self) -> &'static str {
        match self {
            ControlFileError::Read { .. } => "control_file_unreadable",
            ControlFileError::Short { .. } => "control_file_short",
            ControlFileError::Version { .. } => "unsupported_version",
            ControlFileError::Crc { .. } => "control_file_crc",
            ControlFileError::BlockSize { .. } => "unsupported_block_size",
            ControlFileError::SegmentSize { .. } => "unsupported_segment_size",
            ControlFileError::NotShutDown { .. } => "cluster_running",
            ControlFileError::ChecksumsDisabled => "checksums_disabled",
            ControlFileError::ChecksumsAlreadyEnabled => "checksums_already_enabled",
            ControlFileError::ChecksumsAlreadyDisabled => "checksums_already_disabled",
        }
    }

    /// How to fix the cause, when there is something to say beyond the message.
    pub fn hint(&self) -> Option<String> {
        match self {
            ControlFileError::NotShutDown { state } => Some(format!(
                "pg_control says the cluster is {}; a running server tears pages under any reader. Stop it cleanly (pg_ctl stop -D PGDATA -m fast), or if it crashed, start and stop it once so recovery completes.",
                state.describe()
            )),
            ControlFileError::ChecksumsDisabled => Some(
                "there are no page checksums to verify; enable them with pg_checksums --enable on the stopped cluster (or initdb --data-checksums for new clusters).".into(),
            ),
            ControlFileError::Crc { stored, computed, .. } => Some(format!(
                "stored CRC {stored:08X}, computed {computed:08X}: pg_control is damaged or this is not a PostgreSQL 18 data directory."
            )),
            ControlFileError::Version { .. } => Some(
                "use the pg_checksums of the cluster's own PostgreSQL version.".into(),
            ),
            ControlFileError::Read { path, .. } => {
                // global/pg_control → the data directory: when that is what is missing, say so.
                let pgdata = path.parent().and_then(Path::parent);
                match pgdata.and_then(|d| crate::storage::directory_problem(d).map(|p| (d, p))) {
                    Some((dir, problem)) => Some(format!(
                        "the data directory \"{}\" {problem}: give the data directory of a PostgreSQL cluster (the one holding global/pg_control).",
                        dir.display()
                    )),
                    None => Some(
                        "is the argument a PostgreSQL data directory (it must contain global/pg_control), and readable by this user?".into(),
                    ),
                }
            }
            _ => None,
        }
    }
}

/// The transaction horizons of a cluster's last checkpoint (`pg_control`'s
/// `checkPointCopy`): what bounds the xids and multis a tuple may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct XidHorizons {
    /// The next xid to be assigned (`nextXid`, its low 32 bits).
    pub next_xid: u32,
    /// The epoch of `nextXid`.
    pub next_xid_epoch: u32,
    /// The oldest xid whose status `pg_xact` must still hold (`oldestXid`, the cluster's
    /// minimum `datfrozenxid`).
    pub oldest_xid: u32,
    /// The next MultiXactId to be assigned.
    pub next_multi: u32,
    /// The next free member slot (`nextMultiOffset`).
    pub next_multi_offset: u32,
    /// The oldest MultiXactId whose members `pg_multixact` still holds.
    pub oldest_multi: u32,
    /// The cluster is a standby stopped in recovery (`DB_SHUTDOWNED_IN_RECOVERY`): its
    /// pages and status files hold WAL replayed past the checkpoint these horizons come
    /// from, so `next_xid`, `next_multi` and `next_multi_offset` are not upper bounds and
    /// the status files alone decide.
    pub in_recovery: bool,
}

/// `PG_CONTROL_VERSION` of PostgreSQL 18.
pub const PG_CONTROL_VERSION: u32 = 1800;

/// Byte offset of `pg_control_version`.
const OFFSET_PG_CONTROL_VERSION: usize = 8;
/// Byte offset of `state`.
const OFFSET_STATE: usize = 16;
/// Byte offset of `time`: when pg_control was last written, seconds since 1970 (a
/// `pg_time_t`, 8 bytes; pg_controldata's "pg_control last modified").
pub(crate) const OFFSET_TIME: usize = 24;
/// Byte offset of `checkPointCopy.redo`, the redo LSN of the last checkpoint.
const OFFSET_REDO: usize = 40;
/// Byte offset of `checkPointCopy.nextXid` (a `FullTransactionId`, 8 bytes).
const OFFSET_NEXT_XID: usize = 64;
/// Byte offset of `checkPointCopy.nextMulti`.
const OFFSET_NEXT_MULTI: usize = 76;
/// Byte offset of `checkPointCopy.nextMultiOffset`.
const OFFSET_NEXT_MULTI_OFFSET: usize = 80;
/// Byte offset of `checkPointCopy.oldestXid`.
const OFFSET_OLDEST_XID: usize = 84;
/// Byte offset of `checkPointCopy.oldestMulti`.
const OFFSET_OLDEST_MULTI: usize = 92;
/// Byte offset of `blcksz`.
const OFFSET_BLCKSZ: usize = 216;
/// Byte offset of `relseg_size`.
const OFFSET_RELSEG_SIZE: usize = 220;
/// Byte offset of `data_checksum_version`.
pub(crate) const OFFSET_DATA_CHECKSUM_VERSION: usize = 252;
/// Byte offset of `crc`, which is also the number of bytes it covers.
pub(crate) const OFFSET_CRC: usize = 292;

/// PostgreSQL's `DBState`: what the server was doing when it last wrote `pg_control`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum DbState {
    /// `DB_STARTUP`.
    Startup,
    /// `DB_SHUTDOWNED`: cleanly shut down.
    Shutdowned,
    /// `DB_SHUTDOWNED_IN_RECOVERY`: a standby cleanly shut down.
    ShutdownedInRecovery,
    /// `DB_SHUTDOWNING`: shutdown in progress.
    Shutdowning,
    /// `DB_IN_CRASH_RECOVERY`.
    InCrashRecovery,
    /// `DB_IN_ARCHIVE_RECOVERY`: a running standby.
    InArchiveRecovery,
    /// `DB_IN_PRODUCTION`: running (or crashed while running).
    InProduction,
    /// A value PostgreSQL 18 does not define.
    Unknown(u32),
}

impl DbState {
    /// Decodes the on-disk value.
    pub fn from_raw(raw: u32) -> DbState {
        match raw {
            0 => DbState::Startup,
            1 => DbState::Shutdowned,
            2 => DbState::ShutdownedInRecovery,
            3 => DbState::Shutdowning,
            4 => DbState::InCrashRecovery,
            5 => DbState::InArchiveRecovery,
            6 => DbState::InProduction,
            other => DbState::Unknown(other),
        }
    }

    /// How `pg_controldata` prints the state.
    pub fn describe(self) -> String {
        match self {
            DbState::Startup => "starting up".into(),
            DbState::Shutdowned => "shut down".into(),
            DbState::ShutdownedInRecovery => "shut down in recovery".into(),
            DbState::Shutdowning => "shutting down".into(),
            DbState::InCrashRecovery => "in crash recovery".into(),
            DbState::InArchiveRecovery => "in archive recovery".into(),
            DbState::InProduction => "in production".into(),
            DbState::Unknown(v) => format!("unrecognized status code {v}"),
        }
    }

    /// True for the two states `pg_checksums` accepts.
    pub fn is_shut_down(self) -> bool {
        matches!(self, DbState::Shutdowned | DbState::ShutdownedInRecovery)
    }
}

/// The fields of `pg_control` that checksum verification needs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ControlFile {
    /// `pg_control_version` (1800 for PostgreSQL 18).
    pub pg_control_version: u32,
    /// Server state at the last `pg_control` update.
    pub state: DbState,
    /// Block size the cluster was initialised with.
    pub blcksz: u32,
    /// Blocks per segment file.
    pub relseg_size: u32,
    /// 0 when data checksums are off, 1 when on.
    pub data_checksum_version: u32,
    /// The transaction horizons of the last checkpoint: what a scan of a cleanly shut-down
    /// cluster needs to decide visibility.
    pub horizons: XidHorizons,
    /// The redo LSN of the last checkpoint (`checkPointCopy.redo`): every page the server
    /// changed after it carries a newer LSN, so a page changing under an online check is told
    /// from a damaged one by it.
    pub redo_lsn: u64,
}

/// Reads of a running server's `pg_control` before a CRC failure is believed: the server
/// writes the file with one 8 kB `write`, which takes microseconds, so two torn reads in a
/// row are already unlikely and ten that far apart mean damage.
pub const CONTROL_READ_ATTEMPTS: u32 = 10;

/// Pause between those reads: long enough for the write that tore the last one to finish.
pub const CONTROL_READ_DELAY: std::time::Duration = std::time::Duration::from_millis(20);

/// `PG_CONTROL_FILE_SIZE`: pg_control is one 8 kB block; a larger file is not one.
pub const PG_CONTROL_FILE_SIZE: u64 = 8192;

/// The bytes of the `pg_control` file at `path`, read without trusting what sits there: a
/// FIFO, a device or a file larger than [`PG_CONTROL_FILE_SIZE`] is refused before a byte is
/// read ([`crate::storage::read_small_file`]), never waited on.
pub fn read_control_bytes(path: &Path) -> Result<Vec<u8>, ControlFileError> {
    use crate::storage::{read_small_file, SmallFileError};
    read_small_file(path, PG_CONTROL_FILE_SIZE).map_err(|e| ControlFileError::Read {
        path: path.to_path_buf(),
        source: match e {
            SmallFileError::Missing => std::io::Error::from_raw_os_error(libc::ENOENT),
            SmallFileError::Io(e) => e,
            other => std::io::Error::other(other.to_string()),
        },
    })
}

impl ControlFile {
    /// Reads and validates `<pgdata>/global/pg_control`: version 1800, then the CRC. The file
    /// is opened read-only.
    pub fn read(pgdata: &Path) -> Result<ControlFile, ControlFileError> {
        let path = pgdata.join("global").join("pg_control");
        let bytes = read_control_bytes(&path)?;
        ControlFile::parse(&bytes, &path)
    }

    /// Reads `<pgdata>/global/pg_control` of a running server: like [`ControlFile::read`],
    /// but a CRC failure or a short file (a read that met the server's rewrite) is read
    /// again, up to `attempts` reads `delay` apart; the last error is returned when none
    /// validates. Other errors (no such file, another version) are returned at once.
    pub fn read_consistent(
        pgdata: &Path,
        attempts: u32,
        delay: std::time::Duration,
    ) -> Result<ControlFile, ControlFileError> {
        let mut left = attempts.max(1);
        loop {
            left -= 1;
            match ControlFile::read(pgdata) {
                Err(ControlFileError::Crc { .. } | ControlFileError::Short { .. }) if left > 0 => {
                    std::thread::sleep(delay);
                }
                other => return other,
            }
        }
    }

    /// Parses the bytes of a `pg_control` file; `path` is only used in messages.
    pub fn parse(bytes: &[u8], path: &Path) -> Result<ControlFile, ControlFileError> {
        if bytes.len() < OFFSET_CRC + 4 {
            return Err(ControlFileError::Short {
                path: path.to_path_buf(),
                len_bytes: bytes.len(),
                expected_bytes: OFFSET_CRC + 4,
            });
        }
        let u32_at = |off: usize| {
            u32::from_le_bytes([bytes[off], bytes[off + 1], bytes[off + 2], bytes[off + 3]])
        };
        let u64_at = |off: usize| (u64::from(u32_at(off + 4)) << 32) | u64::from(u32_at(off));
        let pg_control_version = u32_at(OFFSET_PG_CONTROL_VERSION);
        if pg_control_version != PG_CONTROL_VERSION {
            return Err(ControlFileError::Version {
                found: pg_control_version,
                expected: PG_CONTROL_VERSION,
            });
        }
        let stored_crc = u32_at(OFFSET_CRC);
        let computed_crc = crc32c(&bytes[..OFFSET_CRC]);
        if stored_crc != computed_crc {
            return Err(ControlFileError::Crc {
                path: path.to_path_buf(),
                stored: stored_crc,
                computed: computed_crc,
            });
        }
        Ok(ControlFile {
            pg_control_version,
            state: DbState::from_raw(u32_at(OFFSET_STATE)),
            blcksz: u32_at(OFFSET_BLCKSZ),
            relseg_size: u32_at(OFFSET_RELSEG_SIZE),
            data_checksum_version: u32_at(OFFSET_DATA_CHECKSUM_VERSION),
            horizons: XidHorizons {
                next_xid: u32_at(OFFSET_NEXT_XID),
                next_xid_epoch: u32_at(OFFSET_NEXT_XID + 4),
                oldest_xid: u32_at(OFFSET_OLDEST_XID),
                next_multi: u32_at(OFFSET_NEXT_MULTI),
                next_multi_offset: u32_at(OFFSET_NEXT_MULTI_OFFSET),
                oldest_multi: u32_at(OFFSET_OLDEST_MULTI),
                in_recovery: DbState::from_raw(u32_at(OFFSET_STATE))
                    == DbState::ShutdownedInRecovery,
            },
            redo_lsn: u64_at(OFFSET_REDO),
        })
    }

    /// Refuses, in `pg_checksums`' order, what `pg_checksums --check` refuses: another block
    /// size (or segment size), a cluster that is not cleanly shut down, checksums off.
    pub fn check_for_verify(&self) -> Result<(), ControlFileError> {
        self.check_layout_and_state()?;
        if self.data_checksum_version == 0 {
            return Err(ControlFileError::ChecksumsDisabled);
        }
        Ok(())
    }

    /// Refuses, in `pg_checksums`' order, what `pg_checksums --enable` refuses: another
    /// block or segment size, a cluster not cleanly shut down, checksums already on.
    pub fn check_for_enable(&self) -> Result<(), ControlFileError> {
        self.check_layout_and_state()?;
        if self.data_checksum_version != 0 {
            return Err(ControlFileError::ChecksumsAlreadyEnabled);
        }
        Ok(())
    }

    /// Refuses what `pg_checksums --disable` refuses: another block or segment size, a
    /// cluster not cleanly shut down, checksums already off.
    pub fn check_for_disable(&self) -> Result<(), ControlFileError> {
        self.check_layout_and_state()?;
        if self.data_checksum_version == 0 {
            return Err(ControlFileError::ChecksumsAlreadyDisabled);
        }
        Ok(())
    }

    /// Refuses what an online check cannot do: another block or segment size, checksums off.
    /// The state is not asked: the server runs (the caller checks its postmaster).
    pub fn check_for_online_verify(&self) -> Result<(), ControlFileError> {
        self.check_layout()?;
        if self.data_checksum_version == 0 {
            return Err(ControlFileError::ChecksumsDisabled);
        }
        Ok(())
    }

    fn check_layout_and_state(&self) -> Result<(), ControlFileError> {
        self.check_layout()?;
        if !self.state.is_shut_down() {
            return Err(ControlFileError::NotShutDown { state: self.state });
        }
        Ok(())
    }

    fn check_layout(&self) -> Result<(), ControlFileError> {
        if self.blcksz as usize != BLCKSZ {
            return Err(ControlFileError::BlockSize {
                found: self.blcksz,
                expected: BLCKSZ as u32,
            });
        }
        if self.relseg_size != RELSEG_SIZE_BLOCKS {
            return Err(ControlFileError::SegmentSize {
                found: self.relseg_size,
                expected: RELSEG_SIZE_BLOCKS,
            });
        }
        Ok(())
    }
}

/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as PostgreSQL's `COMP_CRC32C`.
/// Bitwise: it runs once over 292 bytes per invocation, so a table would buy nothing.
pub fn crc32c(data: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &byte in data {
        crc ^= byte as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;

    fn control_bytes(state: u32, checksums: u32) -> Vec<u8> {
        let mut b = vec![0u8; BLCKSZ];
        b[OFFSET_PG_CONTROL_VERSION..][..4].copy_from_slice(&PG_CONTROL_VERSION.to_le_bytes());
        b[OFFSET_STATE..][..4].copy_from_slice(&state.to_le_bytes());
        b[OFFSET_BLCKSZ..][..4].copy_from_slice(&8192u32.to_le_bytes());
        b[OFFSET_RELSEG_SIZE..][..4].copy_from_slice(&131072u32.to_le_bytes());
        b[OFFSET_DATA_CHECKSUM_VERSION..][..4].copy_from_slice(&checksums.to_le_bytes());
        let crc = crc32c(&b[..OFFSET_CRC]);
        b[OFFSET_CRC..][..4].copy_from_slice(&crc.to_le_bytes());
        b
    }

    #[test]
    fn redo_lsn_and_online_refusals() {
        let p = Path::new("pg_control");
        let mut b = control_bytes(6, 1);
        b[OFFSET_REDO..][..8].copy_from_slice(&0x0000_0001_2345_6789u64.to_le_bytes());
        let crc = crc32c(&b[..OFFSET_CRC]);
        b[OFFSET_CRC..][..4].copy_from_slice(&crc.to_le_bytes());
        let running = ControlFile::parse(&b, p).unwrap();
        assert_eq!(running.redo_lsn, 0x0000_0001_2345_6789);
        running.check_for_online_verify().unwrap();
        let off = ControlFile::parse(&control_bytes(6, 0), p).unwrap();
        assert_eq!(
            off.check_for_online_verify().unwrap_err().to_string(),
            "data checksums are not enabled in cluster"
        );
    }

    /// A pg_control whose CRC never validates is reported after the bounded re-reads, not
    /// waited on; one that validates is read at once.
    #[test]
    fn read_consistent_is_bounded() {
        let dir = std::env::temp_dir().join(format!("pageio-control-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("global")).unwrap();
        let mut bad = control_bytes(6, 1);
        bad[100] ^= 1;
        std::fs::write(dir.join("global/pg_control"), &bad).unwrap();
        let started = std::time::Instant::now();
        let e = ControlFile::read_consistent(&dir, 3, std::time::Duration::from_millis(10))
            .unwrap_err();
        assert_eq!(e.kind(), "control_file_crc");
        let waited = started.elapsed();
        assert!(waited >= std::time::Duration::from_millis(20), "{waited:?}");
        assert!(waited < std::time::Duration::from_secs(2), "{waited:?}");
        std::fs::write(dir.join("global/pg_control"), control_bytes(6, 1)).unwrap();
        let ok = ControlFile::read_consistent(&dir, 3, std::time::Duration::from_millis(10));
        assert_eq!(ok.unwrap().state, DbState::InProduction);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn crc32c_check_value() {
        // The standard CRC-32C check value.
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn refusals() {
        let p = Path::new("pg_control");
        let ok = ControlFile::parse(&control_bytes(1, 1), p).unwrap();
        ok.check_for_verify().unwrap();
        let running = ControlFile::parse(&control_bytes(6, 1), p).unwrap();
        let e = running.check_for_verify().unwrap_err();
        assert_eq!(e.to_string(), "cluster must be shut down");
        let off = ControlFile::parse(&control_bytes(1, 0), p).unwrap();
        let e = off.check_for_verify().unwrap_err();
        assert_eq!(e.to_string(), "data checksums are not enabled in cluster");
        let mut bad = control_bytes(1, 1);
        bad[100] ^= 1;
        let e = ControlFile::parse(&bad, p).unwrap_err();
        assert_eq!(e.to_string(), "pg_control CRC value is incorrect");
        assert!(ControlFile::parse(&bad[..10], p).is_err());
        off.check_for_enable().unwrap();
        ok.check_for_disable().unwrap();
        assert_eq!(
            ok.check_for_enable().unwrap_err().to_string(),
            "data checksums are already enabled in cluster"
        );
        assert_eq!(
            off.check_for_disable().unwrap_err().to_string(),
            "data checksums are already disabled in cluster"
        );
        assert_eq!(
            running.check_for_enable().unwrap_err().to_string(),
            "cluster must be shut down"
        );
    }
}
