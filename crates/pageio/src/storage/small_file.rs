//! Reading a small control file of a cluster — a commit-log segment, a MultiXact segment, a
//! two-phase state file — without trusting what sits at its path.
//!
//! A path inside a data directory may hold anything: a FIFO (a plain `open` for reading
//! blocks until a writer appears, forever), a character device such as `/dev/zero` (reads
//! never end), a link to a huge sparse file, or a file someone truncates while it is read.
//! So the file is opened non-blocking and without following a final symbolic link, its type
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

/// Reads the regular file at `path`, at most `max_bytes` long (see the module docs).
pub fn read_small_file(path: &Path, max_bytes: u64) -> Result<Vec<u8>, SmallFileError> {
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(SmallFileError::Missing),
        // O_NOFOLLOW on a final symbolic link fails with ELOOP.
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(SmallFileError::NotRegular("a symbolic link"))
        }
        Err(e) => return Err(SmallFileError::Io(e)),
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
        (is_link && std::fs::metadata(p).is_err())
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
    }
}
