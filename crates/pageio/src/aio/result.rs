//! What an I/O was for and how it ended.
//!
//! The kernel answers an I/O with one number: bytes transferred, or `-errno`. PostgreSQL
//! keeps that raw number (`pg_aios.raw_result`) and distils it into a status the caller can
//! act on; so does this module:
//!
//! ```text
//!   raw_result ≥ expected bytes            → Ok
//!   0 < raw_result < expected, k ≥ 1 whole → Partial { blocks_done: k }   caller re-issues the rest
//!   raw_result < one block (incl. 0)       → Error (ShortRead: "read only 0 of 8192 bytes")
//!   raw_result = -errno                    → Error (Io: "Input/output error")
//! ```
//!
//! A shared completion callback may turn an `Ok` into an `Error` (a page that fails its
//! checksum); it never turns an error into success.

use std::fmt;
use std::sync::Arc;

use thiserror::Error;

use crate::config::{ConfigError, BLCKSZ};
use crate::storage::StorageError;

/// The operation of an I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IoOp {
    /// Vectored read (`preadv`).
    Readv,
    /// Vectored write (`pwritev`).
    Writev,
}

impl IoOp {
    /// `"readv"` / `"writev"`, as in `pg_aios.operation`.
    pub fn as_str(self) -> &'static str {
        match self {
            IoOp::Readv => "readv",
            IoOp::Writev => "writev",
        }
    }

    fn verb(self) -> &'static str {
        match self {
            IoOp::Readv => "read",
            IoOp::Writev => "write",
        }
    }

    /// The past tense, as PostgreSQL words a short transfer ("wrote only 0 of 8192 bytes").
    fn past(self) -> &'static str {
        match self {
            IoOp::Readv => "read",
            IoOp::Writev => "wrote",
        }
    }
}

/// What an I/O touches: a range of blocks of one relation file, for messages and `pg_aios`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct IoTarget {
    /// The file's name in messages (segment 0's relative path, as PostgreSQL prints it).
    pub path: Arc<str>,
    /// First block, numbered within the relation fork (not the segment).
    pub first_block: u64,
    /// Number of blocks.
    pub nblocks: u32,
}

impl IoTarget {
    /// Describes the target like `pg_aios.target_desc`:
    /// `blocks 200752..200767 in file "base/16440/16456"` (the range is inclusive).
    pub fn desc(&self) -> String {
        if self.nblocks <= 1 {
            format!("block {} in file \"{}\"", self.first_block, self.path)
        } else {
            format!(
                "blocks {}..{} in file \"{}\"",
                self.first_block,
                self.first_block + self.nblocks as u64 - 1,
                self.path
            )
        }
    }

    /// Total bytes of the target.
    pub fn len_bytes(&self) -> usize {
        self.nblocks as usize * BLCKSZ
    }
}

impl fmt::Display for IoTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.desc())
    }
}

/// PostgreSQL's distilled I/O status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum IoStatus {
    /// Not completed yet.
    Unknown,
    /// Every byte transferred and verified.
    Ok,
    /// Some whole blocks transferred; the caller re-issues the rest.
    Partial,
    /// Nothing usable: see the error.
    Error,
}

impl IoStatus {
    /// `pg_aios.result` spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            IoStatus::Unknown => "UNKNOWN",
            IoStatus::Ok => "OK",
            IoStatus::Partial => "PARTIAL",
            IoStatus::Error => "ERROR",
        }
    }
}

/// The outcome of one I/O.
#[derive(Debug, Clone)]
pub struct IoResult {
    /// Distilled status.
    pub status: IoStatus,
    /// Bytes transferred, or `-errno`, as the kernel (or a fault) reported it.
    pub raw_result: i64,
    /// Whole blocks transferred and good.
    pub blocks_done: u32,
    /// Why the status is `Error` (or, for `Partial`, why the rest is missing).
    pub error: Option<AioError>,
}

impl IoResult {
    /// A result not yet known.
    pub fn unknown() -> IoResult {
        IoResult {
            status: IoStatus::Unknown,
            raw_result: 0,
            blocks_done: 0,
            error: None,
        }
    }

    /// Distils a raw kernel result for an I/O on `target`.
    pub fn distill(op: IoOp, target: &IoTarget, raw_result: i64) -> IoResult {
        let expected = target.len_bytes() as i64;
        if raw_result < 0 {
            let errno = (-raw_result) as i32;
            return IoResult {
                status: IoStatus::Error,
                raw_result,
                blocks_done: 0,
                error: Some(AioError::Io {
                    op,
                    errno,
                    target: target.clone(),
                }),
            };
        }
        if raw_result >= expected {
            return IoResult {
                status: IoStatus::Ok,
                raw_result,
                blocks_done: target.nblocks,
                error: None,
            };
        }
        let blocks_done = (raw_result as usize / BLCKSZ) as u32;
        let short = AioError::Short {
            op,
            target: target.clone(),
            bytes: raw_result as usize,
            expected_bytes: expected as usize,
        };
        IoResult {
            status: if blocks_done == 0 {
                IoStatus::Error
            } else {
                IoStatus::Partial
            },
            raw_result,
            blocks_done,
            error: Some(short),
        }
    }

    /// True for `Ok`.
    pub fn is_ok(&self) -> bool {
        self.status == IoStatus::Ok
    }

    /// `Ok(())` for `Ok`; the error for `Error`; a `Short` error for an unresolved `Partial`.
    pub fn into_result(self) -> Result<(), AioError> {
        match self.status {
            IoStatus::Ok => Ok(()),
            _ => Err(self
                .error
                .unwrap_or(AioError::Internal("I/O ended without a result".into()))),
        }
    }
}

/// Errors of the AIO layer. Each message names the file, the blocks, the cause and the fix.
#[derive(Debug, Clone, Error)]
pub enum AioError {
    /// The kernel failed the I/O.
    #[error("could not {} {target}: {}", .op.verb(), std::io::Error::from_raw_os_error(*.errno))]
    Io {
        /// Operation.
        op: IoOp,
        /// The errno.
        errno: i32,
        /// File and blocks.
        target: IoTarget,
    },
    /// The I/O transferred less than a whole block of what was asked (end of file).
    #[error("could not {} {target}: {} only {bytes} of {expected_bytes} bytes", .op.verb(), .op.past())]
    Short {
        /// Operation.
        op: IoOp,
        /// File and blocks.
        target: IoTarget,
        /// Bytes transferred.
        bytes: usize,
        /// Bytes asked for.
        expected_bytes: usize,
    },
    /// A page failed verification in a completion callback.
    #[error("invalid page in block {block} of relation \"{path}\": {detail}")]
    InvalidPage {
        /// File name.
        path: Arc<str>,
        /// Block number within the relation fork.
        block: u64,
        /// What is wrong (e.g. the two checksums).
        detail: String,
    },
    /// The storage layer refused (open failure, O_DIRECT unsupported, misalignment, …).
    #[error(transparent)]
    Storage(#[from] Arc<StorageError>),
    /// io_uring cannot be used here.
    #[error("io_uring is unavailable: {cause}; {fix}")]
    UringUnavailable {
        /// What the kernel said and why.
        cause: String,
        /// How to make it work, or what to use instead.
        fix: String,
        /// The errno of the failed probe.
        errno: i32,
    },
    /// A setting is out of range.
    #[error(transparent)]
    Config(#[from] Arc<ConfigError>),
    /// A request the engine cannot express (too many blocks, wrong lengths).
    #[error("invalid I/O request: {0}")]
    InvalidRequest(String),
    /// Every backend slot is in use.
    #[error("too many backends: at most {0} threads can use one Aio at once")]
    TooManyBackends(usize),
    /// A worker or ring could not be started.
    #[error("could not start I/O method {method}: {reason}")]
    MethodStart {
        /// The method.
        method: &'static str,
        /// What failed.
        reason: String,
    },
    /// A fault injector or shared completion callback panicked while completing an I/O;
    /// the I/O is failed with this error so no waiter hangs and no I/O worker dies.
    #[error("could not complete the I/O of {target}: a completion callback panicked: {message}")]
    CallbackPanicked {
        /// File and blocks.
        target: IoTarget,
        /// The panic's message.
        message: String,
    },
    /// An invariant broke; a bug, reported rather than panicking.
    #[error("internal error: {0}")]
    Internal(String),
}

impl From<StorageError> for AioError {
    fn from(e: StorageError) -> AioError {
        AioError::Storage(Arc::new(e))
    }
}

impl From<ConfigError> for AioError {
    fn from(e: ConfigError) -> AioError {
        AioError::Config(Arc::new(e))
    }
}

impl AioError {
    /// The errno behind the error, if any.
    pub fn errno(&self) -> Option<i32> {
        match self {
            AioError::Io { errno, .. } | AioError::UringUnavailable { errno, .. } => Some(*errno),
            AioError::Storage(e) => e.raw_os_error(),
            _ => None,
        }
    }

    /// The target of the failed I/O, when the error is about one.
    pub fn target(&self) -> Option<&IoTarget> {
        match self {
            AioError::Io { target, .. }
            | AioError::Short { target, .. }
            | AioError::CallbackPanicked { target, .. } => Some(target),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(n: u32) -> IoTarget {
        IoTarget {
            path: "base/5/16384".into(),
            first_block: 10,
            nblocks: n,
        }
    }

    #[test]
    fn distill_follows_postgresql() {
        let t = target(4);
        assert_eq!(
            IoResult::distill(IoOp::Readv, &t, 4 * 8192).status,
            IoStatus::Ok
        );
        let p = IoResult::distill(IoOp::Readv, &t, 2 * 8192 + 100);
        assert_eq!((p.status, p.blocks_done), (IoStatus::Partial, 2));
        let z = IoResult::distill(IoOp::Readv, &t, 0);
        assert_eq!(z.status, IoStatus::Error);
        assert_eq!(
            z.error.unwrap().to_string(),
            "could not read blocks 10..13 in file \"base/5/16384\": read only 0 of 32768 bytes"
        );
        let e = IoResult::distill(IoOp::Writev, &target(1), -5);
        let msg = e.error.clone().unwrap().to_string();
        assert!(
            msg.starts_with(
                "could not write block 10 in file \"base/5/16384\": Input/output error"
            ),
            "{msg}"
        );
        assert_eq!(e.error.unwrap().errno(), Some(5));
    }
}
