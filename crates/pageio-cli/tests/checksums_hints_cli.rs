//! `checksums --enable` that cannot write says why before it says "run --enable again": a
//! file this user may not write, an immutable file, a read-only file system. Each exits 1
//! (pg_checksums' status for a failed run) and leaves pg_control as it was.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

/// A copy of the fixture cluster under `dir` with checksums off and page 0 of `pg_class`
/// carrying a wrong checksum, so `--enable` must rewrite it; returns (data directory,
/// relation file).
fn cluster_needing_a_write(dir: &Path) -> (PathBuf, PathBuf) {
    let data = common::unpack_fixture(dir);
    let data_s = data.to_str().unwrap();
    let off = common::pageio_bounded(&["checksums", "--disable", "--no-sync", data_s], 60);
    assert_eq!(off.status.code(), Some(0), "{:?}", off);
    let file = data.join("base/5/1259");
    let mut bytes = std::fs::read(&file).unwrap();
    // pd_checksum is bytes 8..10 of the page header.
    bytes[8] ^= 0xff;
    std::fs::write(&file, bytes).unwrap();
    (data, file)
}

fn enable(data: &Path) -> (Option<i32>, String) {
    let out = common::pageio_bounded(
        &["checksums", "--enable", "--no-sync", data.to_str().unwrap()],
        120,
    );
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn an_immutable_file_and_a_read_only_file_system_are_named_in_the_hint() {
    if !common::have_root("an_immutable_file_and_a_read_only_file_system_are_named_in_the_hint") {
        return;
    }
    // An immutable file (chattr +i): EPERM even for root.
    let tmp = tempfile::tempdir().unwrap();
    let (data, file) = cluster_needing_a_write(tmp.path());
    let control = std::fs::read(data.join("global/pg_control")).unwrap();
    let immutable = Command::new("chattr").arg("+i").arg(&file).status();
    if immutable.is_ok_and(|s| s.success()) {
        let (code, err) = enable(&data);
        let _ = Command::new("chattr").arg("-i").arg(&file).status();
        assert_eq!(code, Some(1), "{err}");
        assert!(
            err.contains(&format!(
                "could not open file \"{}\": Operation not permitted",
                file.display()
            )),
            "{err}"
        );
        assert!(
            err.contains("pageio: hint: pg_control was not changed: the cluster still has data checksums off and starts as before. Writing the file is not permitted: it may be immutable or append-only (lsattr, chattr -i), or a security policy refuses it, then run --enable again"),
            "{err}"
        );
        assert_eq!(
            std::fs::read(data.join("global/pg_control")).unwrap(),
            control
        );
    } else {
        eprintln!("chattr +i is not supported here: the immutable case is skipped");
    }
    // A read-only file system: EROFS.
    let fs = common::SmallTmpfs::mount("160m");
    let (data, _) = cluster_needing_a_write(fs.path());
    let ok = Command::new("mount")
        .args(["-o", "remount,ro"])
        .arg(fs.path())
        .status()
        .unwrap()
        .success();
    assert!(ok, "remount read-only");
    let (code, err) = enable(&data);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("Read-only file system")
            && err.contains("The file system is mounted read-only: remount it read-write (mount -o remount,rw), then run --enable again"),
        "{err}"
    );
}

/// A file this user may not write (mode 0444, the run as another user): EACCES.
#[test]
fn a_file_this_user_may_not_write_is_named_in_the_hint() {
    if !common::is_root() {
        eprintln!("SKIP: the file's owner must differ from the user running pageio (run as root)");
        return;
    }
    let tmp = common::pg_reachable_dir("pageio-checksums-eacces-");
    let (data, file) = cluster_needing_a_write(tmp.path());
    // Everything readable by nobody, the relation file not writable.
    let ok = Command::new("chmod")
        .args(["-R", "a+rX,a+w"])
        .arg(tmp.path())
        .status()
        .unwrap()
        .success();
    assert!(ok);
    std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o444)).unwrap();
    let out = common::pageio_bounded_unprivileged(
        &["checksums", "--enable", "--no-sync", data.to_str().unwrap()],
        120,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("Permission denied"), "{err}");
    assert!(
        err.contains("This user may not write the file (a read-only file, or another owner): run as the cluster's owner, or make the file writable (chmod u+w), then run --enable again"),
        "{err}"
    );
}
