//! Storage refusals the user can meet, with real kernels and file systems: O_DIRECT on a
//! file system that refuses it, and a descriptor limit too low to work with.
//!
//! Two change process-wide state (a mount, RLIMIT_NOFILE), so they live in a binary of
//! their own, and every test here (each opens descriptors) runs one after the other under
//! a lock.

use std::sync::Mutex;

use pageio::aio::{AioError, IoBuffer};
use pageio::config::{IoConfig, IoMethodKind};
use pageio::storage::{FileCache, OpenMode, RelFile, StorageError};
use pageio::Aio;

static SERIAL: Mutex<()> = Mutex::new(());

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

struct Unmount(std::path::PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let c = std::ffi::CString::new(self.0.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: `c` is a NUL-terminated path that outlives the call; umount reads only it.
        unsafe { libc::umount(c.as_ptr()) };
    }
}

#[test]
fn o_direct_refused_by_the_file_system_names_path_and_fix() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if !is_root() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs as root; this test must run there"
        );
        eprintln!("skipping: mounting ramfs needs root");
        return;
    }
    // ramfs has no direct-I/O support: open(O_DIRECT) answers EINVAL, like tmpfs did before
    // Linux 6.6.
    let dir = tempfile::tempdir().unwrap();
    let target = std::ffi::CString::new(dir.path().as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: every pointer is a NUL-terminated string that outlives the call (or null for
    // the unused data argument); mount reads only them.
    let rc = unsafe {
        libc::mount(
            c"none".as_ptr(),
            target.as_ptr(),
            c"ramfs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "mount ramfs: {}", std::io::Error::last_os_error());
    let _unmount = Unmount(dir.path().to_path_buf());
    let path = dir.path().join("16384");
    std::fs::write(&path, vec![0u8; 8192]).unwrap();

    for method in IoMethodKind::CONCRETE {
        let aio = Aio::new(IoConfig {
            io_method: method,
            direct_io: true,
            ..IoConfig::default()
        })
        .unwrap();
        let mut backend = aio.backend().unwrap();
        let err = backend
            .read_blocks(&RelFile::new(&path), 0, IoBuffer::zeroed(8192))
            .unwrap_err();
        match &err {
            AioError::Storage(e) => {
                assert!(
                    matches!(**e, StorageError::DirectIoUnsupported { .. }),
                    "{e:?}"
                )
            }
            other => panic!("{method}: expected DirectIoUnsupported, got {other:?}"),
        }
        let msg = err.to_string();
        assert!(msg.contains(&*path.to_string_lossy()), "{msg}");
        assert!(msg.contains("direct_io = off"), "{msg}");
    }
    // Buffered I/O on the same file system works: nothing silently changed.
    let cache = FileCache::new(8, false).unwrap();
    let mut buf = vec![1u8; 8192];
    RelFile::new(&path)
        .read_blocks_sync(&cache, 0, &mut buf)
        .unwrap();
    assert!(buf.iter().all(|&b| b == 0));
}

struct RestoreLimit(libc::rlimit);

impl Drop for RestoreLimit {
    fn drop(&mut self) {
        // SAFETY: setrlimit reads only the rlimit we pass by reference.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &self.0) };
    }
}

#[test]
fn descriptor_limits_too_low_are_explained() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    // SAFETY: `libc::rlimit` is two integers, for which all-zero bytes are a valid value.
    let mut old: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: getrlimit writes only into `old`, a properly sized struct we own.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut old) }, 0);
    let _restore = RestoreLimit(old);

    // A soft limit that leaves no room after the reserve: refused up front.
    let low = libc::rlimit {
        rlim_cur: 40,
        rlim_max: old.rlim_max,
    };
    // SAFETY: setrlimit reads only the rlimit we pass by reference.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &low) }, 0);
    let err = FileCache::new(1000, false).unwrap_err();
    assert!(
        matches!(err, StorageError::FdLimitTooLow { limit: 40, .. }),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("max_open_files = 1000")
            && err.to_string().contains("ulimit -n 1064"),
        "{err}"
    );
    let err = FileCache::new(100, false).unwrap_err().to_string();
    assert!(
        err.contains("max_open_files = 100") && err.contains("ulimit -n 164"),
        "{err}"
    );
    let err = Aio::new(IoConfig {
        io_method: IoMethodKind::Sync,
        ..IoConfig::default()
    })
    .unwrap_err();
    assert!(err.to_string().contains("RLIMIT_NOFILE"), "{err}");

    // A limit that is fine at start but exhausted by the rest of the process: the cache
    // closes what it holds, and when even that is not enough, says EMFILE with the fix.
    let dir = tempfile::tempdir().unwrap();
    let paths: Vec<_> = (0..4).map(|i| dir.path().join(format!("f{i}"))).collect();
    for p in &paths {
        std::fs::write(p, b"x").unwrap();
    }
    // SAFETY: setrlimit reads only the rlimit we pass by reference.
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &old) };
    let cache = FileCache::new(1000, false).unwrap();
    cache.open(&paths[0], "f0".into(), OpenMode::Read).unwrap();
    // Use up every descriptor below a limit just above what is open now.
    let mut hog = Vec::new();
    let current = std::fs::read_dir("/proc/self/fd").unwrap().count() as u64;
    let tight = libc::rlimit {
        rlim_cur: current + 8,
        rlim_max: old.rlim_max,
    };
    // SAFETY: setrlimit reads only the rlimit we pass by reference.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &tight) }, 0);
    while let Ok(f) = std::fs::File::open(&paths[3]) {
        hog.push(f);
    }
    // The cached file is given up so the new one can open.
    cache.open(&paths[1], "f1".into(), OpenMode::Read).unwrap();
    assert_eq!(cache.len(), 1);
    assert_eq!(cache.counters(), (2, 1));
    // With nothing cached to give up and no descriptor free: EMFILE, explained.
    cache.clear();
    while let Ok(f) = std::fs::File::open(&paths[3]) {
        hog.push(f);
    }
    let err = cache
        .open(&paths[2], "f2".into(), OpenMode::Read)
        .unwrap_err();
    assert!(
        matches!(err, StorageError::TooManyOpenFiles { .. }),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("f2")
            && msg.contains("ulimit -n")
            && msg.contains("max_open_files = 1000")
            && msg.contains("keeps up to"),
        "{msg}"
    );
    drop(hog);
}

/// `write_blocks` into a directory that does not exist says so (and names it), under every
/// io_method, and creates nothing; a read of a missing file in an existing directory keeps
/// the missing-file message.
#[test]
fn writing_into_a_missing_directory_names_the_directory() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("base/5");
    let path = missing.join("16384");
    for method in IoMethodKind::CONCRETE {
        let aio = Aio::new(IoConfig {
            io_method: method,
            ..IoConfig::default()
        })
        .unwrap();
        let mut backend = aio.backend().unwrap();
        let err = backend
            .write_blocks(&RelFile::new(&path), 0, IoBuffer::zeroed(8192))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "could not open file \"{}\": its directory \"{}\" does not exist: create the directory first (a relation is written into an existing database or tablespace directory), or check the path",
                path.display(),
                missing.display()
            ),
            "{method}"
        );
        assert_eq!(err.errno(), Some(libc::ENOENT), "{method}");
        assert!(
            !dir.path().join("base").exists(),
            "{method}: nothing created"
        );
        let err = backend
            .read_blocks(
                &RelFile::new(dir.path().join("16384")),
                0,
                IoBuffer::zeroed(8192),
            )
            .unwrap_err();
        assert!(
            err.to_string().ends_with("No such file or directory (is the relation's path right, and was it not truncated?)"),
            "{method}: {err}"
        );
    }
}
