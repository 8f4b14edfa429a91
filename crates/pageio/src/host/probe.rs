//! The facts that cannot be read from a file and must be tried live: whether
//! `io_uring_setup` succeeds (a seccomp filter, an LSM or `kernel.io_uring_disabled` may
//! refuse it), whether PGDATA's file system accepts O_DIRECT and with which alignment, and
//! what reading the clock costs.
//!
//! Each is a field, so a test on a captured host tree injects the outcome it needs
//! ([`Probes::default`] is "not probed") and the advice rules never call the kernel
//! themselves. [`Probes::live`] runs them on this machine, reusing the engine's own checks:
//! [`crate::aio::method::uring::probe`] (what `pageio methods` and `io_method = auto` run)
//! and [`crate::storage::dio_alignment`].

use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use crate::storage::DioAlignment;

/// The outcome of one probe: `Ok` with what was found, or the error's text.
pub type ProbeResult<T> = Result<T, String>;

/// Live probe results (see the module header).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Probes {
    /// Whether an io_uring could be set up here (with READV/WRITEV support); `None`: not
    /// probed.
    pub io_uring_setup: Option<ProbeResult<()>>,
    /// O_DIRECT on the data directory's file system: its alignment, `Ok(None)` when the file
    /// system refuses direct I/O; `None`: not probed.
    pub direct_io: Option<ProbeResult<Option<DioAlignment>>>,
    /// Nanoseconds one `clock_gettime(CLOCK_MONOTONIC)` costs; `None`: not measured.
    pub clock_read_ns: Option<f64>,
}

impl Probes {
    /// Runs every probe on this machine; `data_path` is the directory whose file system is
    /// asked about O_DIRECT.
    pub fn live(data_path: Option<&Path>, clock_probe: Duration) -> Probes {
        Probes {
            io_uring_setup: Some(crate::aio::method::uring::probe().map_err(|e| e.to_string())),
            direct_io: data_path.map(direct_io),
            clock_read_ns: Some(super::clock::measure_clock_read_ns(clock_probe)),
        }
    }
}

/// O_DIRECT on `path`'s file system. In a data directory `PG_VERSION` is opened with
/// O_DIRECT exactly as the engine opens relation files ([`crate::storage::check_direct_io`]),
/// which proves it; elsewhere `statx(STATX_DIOALIGN)` is asked.
fn direct_io(path: &Path) -> ProbeResult<Option<DioAlignment>> {
    let version = path.join("PG_VERSION");
    if version.is_file() {
        return match crate::storage::check_direct_io(&version) {
            Ok(a) => Ok(Some(a)),
            Err(crate::storage::StorageError::DirectIoUnsupported { .. }) => Ok(None),
            Err(e) => Err(e.to_string()),
        };
    }
    crate::storage::dio_alignment(path).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn direct_io_in_a_data_directory_opens_pg_version_with_o_direct() {
        // Whatever the temporary directory's file system, opening with O_DIRECT and asking
        // statx must agree on whether it takes direct I/O.
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("PG_VERSION"), "18\n").unwrap();
        let via_open = direct_io(dir.path());
        std::fs::remove_file(dir.path().join("PG_VERSION")).unwrap();
        let via_statx = direct_io(dir.path());
        // Both ways agree on whether it is supported.
        assert_eq!(
            via_open.as_ref().map(Option::is_some),
            via_statx.as_ref().map(Option::is_some),
            "{via_open:?} vs {via_statx:?}"
        );
    }
}
