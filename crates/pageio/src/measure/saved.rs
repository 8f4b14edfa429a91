//! A [`Measurement`] saved to a file and read back, so a later run of advice agrees with
//! the one that measured.
//!
//! The file is JSON: `{"format": "pageio-measurement", "version": 1, "measurement": {…}}`.
//! Writing is done where asked only: never inside a PostgreSQL data directory or tablespace
//! ([`crate::storage::enclosing_cluster`]), never over a file that is not a saved
//! measurement (an existing file is read first and must be one of ours), and never half:
//! the JSON goes to a temporary name beside the file, is synced, and is renamed over it.
//! Reading is bounded ([`MAX_SAVED_BYTES`], through [`crate::storage::read_small_file`]: a
//! FIFO or a device is refused before a byte is read) and every way the file can be wrong —
//! not JSON, another format, a version this build does not know — is an error naming the
//! file, the cause and the fix.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Measurement;

/// The `format` field of a saved measurement.
pub const SAVED_FORMAT: &str = "pageio-measurement";

/// The version of the saved format this build writes and reads.
pub const SAVED_VERSION: u32 = 1;

/// The largest saved measurement read: one holds a few dozen rates and method runs, a few
/// kB; 1 MiB leaves ample room and bounds what a wrong path can make us read.
pub const MAX_SAVED_BYTES: u64 = 1 << 20;

/// Why a saved measurement could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum SavedError {
    /// The file could not be read.
    #[error("measurement file {}: cannot read it: {source}; give the file a measuring run saved", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: crate::storage::SmallFileError,
    },
    /// The file is not a saved measurement.
    #[error("measurement file {}: not a saved pageio measurement ({cause}); give the file a measuring run saved, or measure again", path.display())]
    NotOurs {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        cause: String,
    },
    /// The file was saved by a newer or older format.
    #[error("measurement file {}: format version {found}, this build reads version {SAVED_VERSION}; measure again with this build", path.display())]
    Version {
        /// The file.
        path: PathBuf,
        /// The version found.
        found: u64,
    },
    /// The file would be written inside a cluster.
    #[error("refusing to write the measurement file {} inside the PostgreSQL data directory or tablespace {}; save it outside the cluster", path.display(), cluster.display())]
    InsideCluster {
        /// The file.
        path: PathBuf,
        /// The cluster holding it.
        cluster: PathBuf,
    },
    /// An existing file at the path is not a saved measurement.
    #[error("refusing to overwrite {}: it exists and is not a saved pageio measurement ({cause}); choose another file name", path.display())]
    WouldOverwrite {
        /// The file.
        path: PathBuf,
        /// What it is.
        cause: String,
    },
    /// Writing failed.
    #[error("measurement file {}: could not {action} it: {source}; choose a writable directory", path.display())]
    Write {
        /// The file (or its temporary name).
        path: PathBuf,
        /// What failed.
        action: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
}

#[derive(Serialize)]
struct SavedOut<'a> {
    format: &'static str,
    version: u32,
    measurement: &'a Measurement,
}

/// Reads the saved measurement in `path`.
pub fn load(path: &Path) -> Result<Measurement, SavedError> {
    let bytes =
        crate::storage::read_small_file_through_links(path, MAX_SAVED_BYTES).map_err(|source| {
            SavedError::Read {
                path: path.to_path_buf(),
                source,
            }
        })?;
    parse(path, &bytes)
}

/// Parses a saved measurement's bytes (`path` names it in errors).
pub fn parse(path: &Path, bytes: &[u8]) -> Result<Measurement, SavedError> {
    let not_ours = |cause: String| SavedError::NotOurs {
        path: path.to_path_buf(),
        cause,
    };
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| not_ours(format!("not JSON: {e}")))?;
    let format = value.get("format").and_then(|f| f.as_str());
    if format != Some(SAVED_FORMAT) {
        return Err(not_ours(format!(
            "its \"format\" is {}, not \"{SAVED_FORMAT}\"",
            format.map_or("missing".to_string(), |f| format!("{f:?}"))
        )));
    }
    let version = value
        .get("version")
        .and_then(|v| v.as_u64())
        .ok_or_else(|| not_ours("no numeric \"version\"".into()))?;
    if version != u64::from(SAVED_VERSION) {
        return Err(SavedError::Version {
            path: path.to_path_buf(),
            found: version,
        });
    }
    let m = value
        .get("measurement")
        .ok_or_else(|| not_ours("no \"measurement\"".into()))?;
    Measurement::deserialize(m).map_err(|e| not_ours(format!("its \"measurement\": {e}")))
}

/// The directory `path` is written in.
fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Whether a measurement may be saved to `path`: not inside a cluster, and not over a file
/// that is not a saved measurement. [`save`] checks again; a caller checks first so a
/// measurement is not made only to be refused.
pub fn check_writable(path: &Path) -> Result<(), SavedError> {
    let dir = parent_dir(path);
    if let Some(cluster) = crate::storage::enclosing_cluster(&dir) {
        return Err(SavedError::InsideCluster {
            path: path.to_path_buf(),
            cluster,
        });
    }
    match std::fs::symlink_metadata(path) {
        Ok(_) => {
            if let Err(e) = load(path) {
                return Err(SavedError::WouldOverwrite {
                    path: path.to_path_buf(),
                    cause: match e {
                        SavedError::Read { source, .. } => source.to_string(),
                        SavedError::NotOurs { cause, .. } => cause,
                        other => other.to_string(),
                    },
                });
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => {
            return Err(SavedError::Write {
                path: path.to_path_buf(),
                action: "examine",
                source,
            })
        }
    }
    Ok(())
}

/// Saves `m` to `path` (see the module header for what is refused).
pub fn save(path: &Path, m: &Measurement) -> Result<(), SavedError> {
    check_writable(path)?;
    let dir = parent_dir(path);
    let json = serde_json::to_vec_pretty(&SavedOut {
        format: SAVED_FORMAT,
        version: SAVED_VERSION,
        measurement: m,
    })
    .map_err(|e| SavedError::Write {
        path: path.to_path_buf(),
        action: "encode",
        source: std::io::Error::other(e),
    })?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "measurement".into());
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    let write = |action, source| SavedError::Write {
        path: tmp.clone(),
        action,
        source,
    };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(|e| write("create", e))?;
    let result = file
        .write_all(&json)
        .and_then(|()| file.write_all(b"\n"))
        .map_err(|e| write("write", e))
        .and_then(|()| file.sync_all().map_err(|e| write("sync", e)))
        .and_then(|()| std::fs::rename(&tmp, path).map_err(|e| write("rename", e)));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Measurement {
        let text = r#"{"target":"/data","data_directory":true,"scratch_file":null,
            "device":{"source":"fixed","files":[],"probed_bytes":8192,"direct_io":true,
            "sequential_bytes_per_second":1.0,"sequential_pages_per_second":1.0,
            "sequential_seconds":1.0,"random_reads_per_second_qd1":1.0,
            "random_reads_per_second_qd32":1.0,"random":[]},
            "relation":{"relation":"/data/base/5/1","generated":false,"blocks":1,
            "effective_io_concurrency":16,"checksums":true,"runs":[],"not_measured":[]},
            "effective_cpus":2,"budget_seconds":1.0,"elapsed_seconds":1.0,"notes":[]}"#;
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn a_saved_measurement_reads_back_equal_and_bad_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("m.json");
        let m = sample();
        save(&file, &m).unwrap();
        assert_eq!(load(&file).unwrap(), m);
        // Saving again over our own file is fine; nothing is left at a temporary name.
        save(&file, &m).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);

        let other = dir.path().join("notes.txt");
        std::fs::write(&other, "my notes").unwrap();
        let e = save(&other, &m).unwrap_err().to_string();
        assert!(e.starts_with(&format!("refusing to overwrite {}: it exists and is not a saved pageio measurement (not JSON: ", other.display())), "{e}");
        assert_eq!(std::fs::read_to_string(&other).unwrap(), "my notes");
        let e = load(&other).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!(
                "measurement file {}: not a saved pageio measurement (not JSON",
                other.display()
            )),
            "{e}"
        );

        let newer = br#"{"format":"pageio-measurement","version":9,"measurement":{}}"#;
        let e = parse(Path::new("f.json"), newer).unwrap_err().to_string();
        assert_eq!(e, "measurement file f.json: format version 9, this build reads version 1; measure again with this build");
        let foreign = br#"{"format":"something","version":1}"#;
        let e = parse(Path::new("f.json"), foreign).unwrap_err().to_string();
        assert_eq!(e, "measurement file f.json: not a saved pageio measurement (its \"format\" is \"something\", not \"pageio-measurement\"); give the file a measuring run saved, or measure again");
    }

    #[test]
    fn a_measurement_is_never_saved_inside_a_cluster() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("PG_VERSION"), "18\n").unwrap();
        std::fs::create_dir_all(dir.path().join("global")).unwrap();
        std::fs::create_dir_all(dir.path().join("base")).unwrap();
        let file = dir.path().join("m.json");
        let e = save(&file, &sample()).unwrap_err();
        assert!(matches!(e, SavedError::InsideCluster { .. }), "{e}");
        assert!(!file.exists());
    }
}
