//! Reading a small control file of a cluster — a commit-log segment, a MultiXact segment, a
//! two-phase state file — without trusting what sits at its path.
//!
//! A path inside a data directory may hold anything: a FIFO (a plain `open` for reading
//! blocks until a writer appears, forever), a character device such as `/dev/zero` (reads
//! never end), a link to a huge sparse file, or a file someone truncates while it is read.
//! So the file is opened non-blocking and without following a final symbolic link (for a
//! configuration file, [`read_small_file_through_links`] follows it), its type
//! is checked with `fstat` on the open descriptor (no race between the check and the read),
//! and at most `max_bytes` are read: a file larger than its format allows is refused before
//! a byte of it is read.
//!
//! ```text
//!   open(O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC)   a FIFO opens at once, a link fails
//!   fstat → regular file?                                   else NotRegular
//!   st_size ≤ max_bytes?                                    else TooLarge
//!   read up to max_bytes + 1                                 a file that grew is refused too
//! ```

use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Why a small file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SmallFileError {
    /// It does not exist.
    #[error("it does not exist")]
    Missing,
    /// It is not a regular file (a FIFO, a device, a directory, a symbolic link).
    #[error("it is {0}, not a regular file")]
    NotRegular(&'static str),
    /// It is larger than its format allows.
    #[error("it is {size_bytes} bytes, more than the {max_bytes} its format allows")]
    TooLarge {
        /// Its size.
        size_bytes: u64,
        /// The largest size accepted.
        max_bytes: u64,
    },
    /// Opening or reading failed.
    #[error("{0}")]
    Io(std::io::Error),
}

/// What a file type is called in messages, with its article: "a FIFO", "a directory".
pub fn file_type_name(t: std::fs::FileType) -> &'static str {
    if t.is_file() {
        "a regular file"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_symlink() {
        "a symbolic link"
    } else {
        "not a file"
    }
}

/// Reads the regular file at `path`, at most `max_bytes` long (see the module docs). A
/// symbolic link at `path` is refused: for the files of a data directory, where PostgreSQL
/// never makes one.
pub fn read_small_file(path: &Path, max_bytes: u64) -> Result<Vec<u8>, SmallFileError> {
    read_small(path, max_bytes, false)
}

/// [`read_small_file`] following a symbolic link at `path`, for files a link may lead to
/// (configuration files, which installations often link from `/etc`); what the link leads
/// to is checked as the file itself would be.
pub fn read_small_file_through_links(
    path: &Path,
    max_bytes: u64,
) -> Result<Vec<u8>, SmallFileError> {
    read_small(path, max_bytes, true)
}

fn read_small(path: &Path, max_bytes: u64, follow: bool) -> Result<Vec<u8>, SmallFileError> {
    let mut flags = libc::O_NONBLOCK | libc::O_CLOEXEC;
    if !follow {
        flags |= libc::O_NOFOLLOW;
    }
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(SmallFileError::Missing),
        // O_NOFOLLOW on a final symbolic link fails with ELOOP (followed, a link loop does).
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(SmallFileError::NotRegular(if follow {
                "a loop of symbolic links"
            } else {
                "a symbolic link"
            }))
        }
        Err(e) => {
            // Some kinds refuse the open itself (a socket: ENXIO): name what it is.
            let meta = if follow {
                std::fs::metadata(path)
            } else {
                std::fs::symlink_metadata(path)
            };
            if let Ok(meta) = meta {
                if !meta.file_type().is_file() {
                    return Err(SmallFileError::NotRegular(file_type_name(meta.file_type())));
                }
            }
            return Err(SmallFileError::Io(e));
        }
    };
    let meta = file.metadata().map_err(SmallFileError::Io)?;
    if !meta.file_type().is_file() {
        return Err(SmallFileError::NotRegular(file_type_name(meta.file_type())));
    }
    if meta.len() > max_bytes {
        return Err(SmallFileError::TooLarge {
            size_bytes: meta.len(),
            max_bytes,
        });
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(SmallFileError::Io)?;
    if bytes.len() as u64 > max_bytes {
        return Err(SmallFileError::TooLarge {
            size_bytes: bytes.len() as u64,
            max_bytes,
        });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_regular_files_and_refuses_everything_else() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, b"abc").unwrap();
        assert_eq!(read_small_file(&f, 3).unwrap(), b"abc");
        assert!(matches!(
            read_small_file(&f, 2),
            Err(SmallFileError::TooLarge {
                size_bytes: 3,
                max_bytes: 2
            })
        ));
        assert!(matches!(
            read_small_file(&dir.path().join("none"), 9),
            Err(SmallFileError::Missing)
        ));
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: c is a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(matches!(
            read_small_file(&fifo, 9),
            Err(SmallFileError::NotRegular("a FIFO"))
        ));
        let link = dir.path().join("link");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        assert!(matches!(
            read_small_file(&link, 9),
            Err(SmallFileError::NotRegular("a symbolic link"))
        ));
        assert!(matches!(
            read_small_file(Path::new("/dev/zero"), 9),
            Err(SmallFileError::NotRegular("a character device"))
        ));
        assert!(matches!(
            read_small_file(dir.path(), 9),
            Err(SmallFileError::NotRegular("a directory"))
        ));
    }

    /// Every kind of path, read without and with following a final link: the named error at
    /// once (a FIFO or a socket never waited on), a regular file through a link read only
    /// when links are followed.
    #[test]
    fn every_path_kind_is_named_with_and_without_following_links() {
        let dir = tempfile::tempdir().unwrap();
        let at = |name: &str| dir.path().join(name);
        std::fs::write(at("regular"), b"abc").unwrap();
        let c = std::ffi::CString::new(at("fifo").as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: c is a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let _socket = std::os::unix::net::UnixListener::bind(at("socket")).unwrap();
        std::fs::create_dir(at("dir")).unwrap();
        std::os::unix::fs::symlink(at("nowhere"), at("dangling")).unwrap();
        std::os::unix::fs::symlink(at("loop"), at("loop")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", at("zero")).unwrap();
        std::os::unix::fs::symlink(at("fifo"), at("to-fifo")).unwrap();
        std::os::unix::fs::symlink(at("regular"), at("to-regular")).unwrap();
        std::fs::File::create(at("sparse"))
            .unwrap()
            .set_len(1 << 40)
            .unwrap();
        let name = |r: Result<Vec<u8>, SmallFileError>| match r {
            Ok(bytes) => format!("read {} bytes", bytes.len()),
            Err(e) => e.to_string(),
        };
        let too_large = "it is 1099511627776 bytes, more than the 4096 its format allows";
        let cases: [(&str, &str, &str); 10] = [
            ("regular", "read 3 bytes", "read 3 bytes"),
            (
                "fifo",
                "it is a FIFO, not a regular file",
                "it is a FIFO, not a regular file",
            ),
            (
                "socket",
                "it is a socket, not a regular file",
                "it is a socket, not a regular file",
            ),
            (
                "dir",
                "it is a directory, not a regular file",
                "it is a directory, not a regular file",
            ),
            (
                "dangling",
                "it is a symbolic link, not a regular file",
                "it does not exist",
            ),
            (
                "loop",
                "it is a symbolic link, not a regular file",
                "it is a loop of symbolic links, not a regular file",
            ),
            (
                "zero",
                "it is a symbolic link, not a regular file",
                "it is a character device, not a regular file",
            ),
            (
                "to-fifo",
                "it is a symbolic link, not a regular file",
                "it is a FIFO, not a regular file",
            ),
            (
                "to-regular",
                "it is a symbolic link, not a regular file",
                "read 3 bytes",
            ),
            ("sparse", too_large, too_large),
        ];
        for (file, not_following, following) in cases {
            assert_eq!(
                name(read_small_file(&at(file), 4096)),
                not_following,
                "{file}"
            );
            assert_eq!(
                name(read_small_file_through_links(&at(file), 4096)),
                following,
                "{file} (links followed)"
            );
        }
    }
}

/// What is wrong with `path` as a directory to read, in words for a message, or `None`
/// when it is a directory (links followed): "does not exist", "is a link to \"…\", which
/// does not exist", "is a regular file, not a directory", or the OS error.
pub fn directory_problem(path: &Path) -> Option<String> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => None,
        Ok(m) => Some(format!(
            "is {}, not a directory",
            file_type_name(m.file_type())
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            match std::fs::read_link(path) {
                // The path itself is a link whose target is missing.
                Ok(target) => Some(format!(
                    "is a link to \"{}\", which does not exist",
                    target.display()
                )),
                Err(_) => Some("does not exist".to_string()),
            }
        }
        Err(e) => Some(format!("cannot be examined: {e}")),
    }
}

/// The first link on the way to `path` (its ancestors, then itself) whose target does not
/// exist, with that target: what a missing file under a dropped or unmounted tablespace
/// (`pg_tblspc/<oid>`) is really missing.
pub fn dangling_link_on_the_way(path: &Path) -> Option<(std::path::PathBuf, std::path::PathBuf)> {
    let mut ancestors: Vec<&Path> = path.ancestors().collect();
    ancestors.reverse();
    ancestors.into_iter().find_map(|p| {
        let is_link = std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink());
        // Missing, not a loop: a link that leads back to itself exists, endlessly.
        let missing = std::fs::metadata(p).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound);
        (is_link && missing)
            .then(|| std::fs::read_link(p).ok().map(|t| (p.to_path_buf(), t)))
            .flatten()
    })
}

#[cfg(test)]
mod directory_problem_tests {
    use super::*;

    #[test]
    fn each_kind_of_missing_directory_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        assert_eq!(directory_problem(d), None);
        assert_eq!(
            directory_problem(&d.join("nope")).as_deref(),
            Some("does not exist")
        );
        assert_eq!(
            directory_problem(&d.join("nope/deeper")).as_deref(),
            Some("does not exist")
        );
        std::fs::write(d.join("f"), b"x").unwrap();
        assert_eq!(
            directory_problem(&d.join("f")).as_deref(),
            Some("is a regular file, not a directory")
        );
        std::os::unix::fs::symlink("/nonexistent/ts", d.join("link")).unwrap();
        assert_eq!(
            directory_problem(&d.join("link")).as_deref(),
            Some("is a link to \"/nonexistent/ts\", which does not exist")
        );
        assert_eq!(
            dangling_link_on_the_way(&d.join("link/PG_18_1/5/16384")),
            Some((d.join("link"), "/nonexistent/ts".into()))
        );
        assert_eq!(dangling_link_on_the_way(&d.join("nope/16384")), None);
        // A link to itself is a loop, not a link to something missing.
        std::os::unix::fs::symlink(d.join("loop"), d.join("loop")).unwrap();
        assert_eq!(dangling_link_on_the_way(&d.join("loop")), None);
        assert!(directory_problem(&d.join("loop"))
            .unwrap()
            .contains("Too many levels of symbolic links"));
    }
}
