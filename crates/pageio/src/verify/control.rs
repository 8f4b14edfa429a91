//! `pg_control` as `verify` and `checksums` report it.
//!
//! The file's format, its CRC-32C and its refusals are the page format's
//! ([`crate::page::control`]), shared with the catalog reader, `host` and `measure`. Here its
//! errors become [`VerifyError`]s, one variant each with the same message, so that `verify`
//! and `checksums` give every failure one kind ([`VerifyError::kind`]) and one hint
//! ([`VerifyError::hint`]) whichever step met it.

use super::VerifyError;
use crate::page::control::ControlFileError;

impl From<ControlFileError> for VerifyError {
    fn from(e: ControlFileError) -> VerifyError {
        match e {
            ControlFileError::Read { path, source } => {
                VerifyError::ControlFileRead { path, source }
            }
            ControlFileError::Short {
                path,
                len_bytes,
                expected_bytes,
            } => VerifyError::ControlFileShort {
                path,
                len_bytes,
                expected_bytes,
            },
            ControlFileError::Version { found, expected } => {
                VerifyError::ControlVersion { found, expected }
            }
            ControlFileError::Crc {
                path,
                stored,
                computed,
            } => VerifyError::ControlCrc {
                path,
                stored,
                computed,
            },
            ControlFileError::BlockSize { found, expected } => {
                VerifyError::BlockSize { found, expected }
            }
            ControlFileError::SegmentSize { found, expected } => {
                VerifyError::SegmentSize { found, expected }
            }
            ControlFileError::NotShutDown { state } => VerifyError::NotShutDown { state },
            ControlFileError::ChecksumsDisabled => VerifyError::ChecksumsDisabled,
            ControlFileError::ChecksumsAlreadyEnabled => VerifyError::ChecksumsAlreadyEnabled,
            ControlFileError::ChecksumsAlreadyDisabled => VerifyError::ChecksumsAlreadyDisabled,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::page::control::DbState;

    /// Every error of pg_control reads the same as a `VerifyError`, with its own kind.
    #[test]
    fn every_control_file_error_keeps_its_message_and_gets_its_kind() {
        let path = PathBuf::from("/data/global/pg_control");
        let cases: Vec<(ControlFileError, &str)> = vec![
            (
                ControlFileError::Read {
                    path: path.clone(),
                    source: std::io::Error::from_raw_os_error(libc::ENOENT),
                },
                "control_file_unreadable",
            ),
            (
                ControlFileError::Short {
                    path: path.clone(),
                    len_bytes: 10,
                    expected_bytes: 296,
                },
                "control_file_short",
            ),
            (
                ControlFileError::Version {
                    found: 1700,
                    expected: 1800,
                },
                "unsupported_version",
            ),
            (
                ControlFileError::Crc {
                    path: path.clone(),
                    stored: 1,
                    computed: 2,
                },
                "control_file_crc",
            ),
            (
                ControlFileError::BlockSize {
                    found: 16384,
                    expected: 8192,
                },
                "unsupported_block_size",
            ),
            (
                ControlFileError::SegmentSize {
                    found: 1,
                    expected: 131072,
                },
                "unsupported_segment_size",
            ),
            (
                ControlFileError::NotShutDown {
                    state: DbState::InProduction,
                },
                "cluster_running",
            ),
            (ControlFileError::ChecksumsDisabled, "checksums_disabled"),
            (
                ControlFileError::ChecksumsAlreadyEnabled,
                "checksums_already_enabled",
            ),
            (
                ControlFileError::ChecksumsAlreadyDisabled,
                "checksums_already_disabled",
            ),
        ];
        for (e, kind) in cases {
            let message = e.to_string();
            let verify = VerifyError::from(e);
            assert_eq!(verify.to_string(), message);
            assert_eq!(verify.kind(), kind, "{message}");
        }
    }
}
