//! io_uring refused by `kernel.io_uring_disabled`: a real sysctl, set and restored.
//!
//! Root only. It lives in a test binary of its own: cargo runs test binaries one after
//! another, so no other test's ring creation can race with the sysctl being off.

use pageio::aio::AioError;
use pageio::config::{IoConfig, IoMethodKind};
use pageio::Aio;

const SYSCTL: &str = "/proc/sys/kernel/io_uring_disabled";

/// Restores the sysctl even when an assertion fails.
struct Restore(String);

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = std::fs::write(SYSCTL, &self.0);
    }
}

fn is_root() -> bool {
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn io_uring_disabled_by_sysctl_gives_actionable_error_and_auto_falls_back() {
    if !is_root() || !std::path::Path::new(SYSCTL).exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs as root on a kernel with {SYSCTL}; this test must run there"
        );
        eprintln!("skipping: needs root and {SYSCTL}");
        return;
    }
    let old = std::fs::read_to_string(SYSCTL).unwrap().trim().to_string();
    let _restore = Restore(old.clone());
    std::fs::write(SYSCTL, "2").expect("set kernel.io_uring_disabled=2");

    let err = Aio::new(IoConfig {
        io_method: IoMethodKind::IoUring,
        ..IoConfig::default()
    })
    .unwrap_err();
    match &err {
        AioError::UringUnavailable { errno, .. } => assert_eq!(*errno, libc::EPERM),
        other => panic!("expected UringUnavailable, got {other:?}"),
    }
    let msg = err.to_string();
    assert!(msg.contains("kernel.io_uring_disabled=2"), "{msg}");
    assert!(
        msg.contains("sysctl -w kernel.io_uring_disabled=0"),
        "{msg}"
    );
    assert!(msg.contains("--io-method worker"), "{msg}");

    let aio = Aio::new(IoConfig {
        io_method: IoMethodKind::Auto,
        ..IoConfig::default()
    })
    .expect("auto falls back");
    assert_eq!(aio.io_method(), IoMethodKind::Worker);
    let reason = aio.fallback_reason().expect("auto says why");
    assert!(reason.contains("io_method=auto chose worker"), "{reason}");
    assert!(reason.contains("kernel.io_uring_disabled=2"), "{reason}");
    // The fallback really works.
    let dir = tempfile::tempdir().unwrap();
    let rel = pageio::storage::RelFile::new(dir.path().join("1"));
    let mut b = aio.backend().unwrap();
    b.write_blocks(&rel, 0, pageio::aio::IoBuffer::zeroed(8192))
        .unwrap();
    drop(b);

    // With the sysctl restored, io_uring works again.
    std::fs::write(SYSCTL, &old).unwrap();
    let aio = Aio::new(IoConfig {
        io_method: IoMethodKind::Auto,
        ..IoConfig::default()
    })
    .unwrap();
    assert_eq!(aio.io_method(), IoMethodKind::IoUring);
    assert!(aio.fallback_reason().is_none());
}
