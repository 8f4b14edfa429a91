//! io_uring refused for real, three ways: `kernel.io_uring_disabled` (a real sysctl, set
//! and restored; root only), a seccomp filter like a container runtime's (installed in one
//! thread), and a descriptor limit with no room for the ring.
//!
//! These change process-wide or machine-wide state, so they live in a test binary of their
//! own (cargo runs test binaries one after another) and take a lock against each other.

use pageio::aio::AioError;
use pageio::config::{IoConfig, IoMethodKind};
use pageio::Aio;

const SYSCTL: &str = "/proc/sys/kernel/io_uring_disabled";

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Restores the sysctl even when an assertion fails.
struct Restore(String);

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = std::fs::write(SYSCTL, &self.0);
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn io_uring_disabled_by_sysctl_gives_actionable_error_and_auto_falls_back() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
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
    assert!(msg.contains("io_method = worker"), "{msg}");

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

/// Installs, in the calling thread only, a seccomp filter that answers `io_uring_setup`
/// with `errno` — what Docker's default profile does with EPERM.
fn block_io_uring_setup_in_this_thread(errno: u32) {
    use libc::{sock_filter, sock_fprog};
    const BPF_LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const BPF_JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const BPF_RET_K: u16 = 0x06; // BPF_RET | BPF_K
    let filter = [
        // Load seccomp_data.nr (offset 0).
        sock_filter {
            code: BPF_LD_W_ABS,
            jt: 0,
            jf: 0,
            k: 0,
        },
        sock_filter {
            code: BPF_JEQ_K,
            jt: 0,
            jf: 1,
            k: libc::SYS_io_uring_setup as u32,
        },
        sock_filter {
            code: BPF_RET_K,
            jt: 0,
            jf: 0,
            k: libc::SECCOMP_RET_ERRNO | errno,
        },
        sock_filter {
            code: BPF_RET_K,
            jt: 0,
            jf: 0,
            k: libc::SECCOMP_RET_ALLOW,
        },
    ];
    let prog = sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr() as *mut sock_filter,
    };
    // SAFETY: PR_SET_NO_NEW_PRIVS takes integers only; PR_SET_SECCOMP reads `prog` and the
    // filter array it points to, both alive for the call (the kernel copies the filter). The
    // filter applies to this thread only, which the test runs on and then discards.
    unsafe {
        assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
        assert_eq!(
            libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER,
                &prog as *const sock_fprog
            ),
            0,
            "install seccomp filter: {}",
            std::io::Error::last_os_error()
        );
    }
}

#[test]
fn io_uring_blocked_by_seccomp_is_explained_and_auto_falls_back() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if std::fs::read_to_string(SYSCTL)
        .map(|v| v.trim() != "0")
        .unwrap_or(false)
    {
        panic!(
            "{SYSCTL} is not 0: io_uring is off on this machine, so seccomp cannot be told apart"
        );
    }
    for (errno, words) in [
        (libc::EPERM as u32, "seccomp filter"),
        (libc::ENOSYS as u32, "CONFIG_IO_URING"),
    ] {
        // A fresh thread per filter: seccomp filters stack and cannot be removed.
        std::thread::spawn(move || {
            block_io_uring_setup_in_this_thread(errno);
            let err = Aio::new(IoConfig {
                io_method: IoMethodKind::IoUring,
                ..IoConfig::default()
            })
            .unwrap_err();
            let msg = err.to_string();
            assert_eq!(err.errno(), Some(errno as i32), "{msg}");
            assert!(
                msg.contains(words) && msg.contains("io_method = worker"),
                "{msg}"
            );
            let aio = Aio::new(IoConfig {
                io_method: IoMethodKind::Auto,
                ..IoConfig::default()
            })
            .unwrap();
            assert_eq!(aio.io_method(), IoMethodKind::Worker);
            assert!(aio.fallback_reason().unwrap().contains(words));
        })
        .join()
        .unwrap();
    }
    // Other threads were never filtered.
    assert_eq!(
        Aio::new(IoConfig {
            io_method: IoMethodKind::Auto,
            ..IoConfig::default()
        })
        .unwrap()
        .io_method(),
        IoMethodKind::IoUring
    );
}

#[test]
fn io_uring_without_a_free_descriptor_names_the_limit() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    // SAFETY: `libc::rlimit` is two integers, for which all-zero bytes are a valid value.
    let mut old: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: getrlimit writes only into `old`, a properly sized struct we own.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut old) }, 0);
    // Build the Aio (worker pool, file cache) first, then leave no descriptor for a ring.
    let aio = Aio::new(IoConfig {
        io_method: IoMethodKind::IoUring,
        ..IoConfig::default()
    })
    .unwrap();
    let mut hog = Vec::new();
    let open_now = std::fs::read_dir("/proc/self/fd").unwrap().count() as u64;
    let tight = libc::rlimit {
        rlim_cur: open_now + 4,
        rlim_max: old.rlim_max,
    };
    // SAFETY: setrlimit reads only the rlimit we pass by reference.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &tight) }, 0);
    while let Ok(f) = std::fs::File::open("/dev/null") {
        hog.push(f);
    }
    let result = aio.backend();
    // SAFETY: setrlimit reads only the rlimit we pass by reference.
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &old) };
    drop(hog);
    let err = result.unwrap_err();
    let msg = err.to_string();
    assert_eq!(err.errno(), Some(libc::EMFILE), "{msg}");
    assert!(
        msg.contains("RLIMIT_NOFILE") && msg.contains("ulimit -n"),
        "{msg}"
    );
    // With descriptors back, the same Aio works.
    assert!(aio.backend().is_ok());
}
