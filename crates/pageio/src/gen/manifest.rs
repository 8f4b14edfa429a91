//! `manifest.json`: what a generated data-set directory holds.
//!
//! The manifest is written last, after every segment is fsynced, by a rename: a directory
//! with a manifest is complete. Other commands (`pageio scan`) open
//! `DIR/<dataset>/manifest.json` to find the heap and index files, so the field names below
//! are a stable interface — add fields, never rename or remove them:
//!
//! ```json
//! { "dataset": "uniform", "table": "uniform", "index": "uniform_a",
//!   "rows": 1000000, "seed": 42, "scale": null,
//!   "heap_relfilenode": 16384, "index_relfilenode": 16385,
//!   "heap_pages": 55556, "index_pages": 2743, "index_root": 290, "index_level": 2,
//!   "key_type": "float8", "columns": [["a", "float8"], ["b", "text"]],
//!   "rows_per_page": 18, "heap_fillfactor": 25, "index_fillfactor": 90,
//!   "data_checksums": true, "pageio_version": "0.1.0", "created": "2025-01-01T00:00:00Z" }
//! ```

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::GenError;
use crate::page::btree::BtMetaPage;
use crate::page::BLCKSZ;
use crate::storage::{RelFile, RELSEG_SIZE_BLOCKS};

/// File name of the manifest inside a data-set directory.
pub const MANIFEST_FILE: &str = "manifest.json";

/// Description of one generated data set (see the module docs for the JSON form).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Data-set name (`uniform`, …, `pgbench_accounts`).
    pub dataset: String,
    /// Table name PostgreSQL would use (same as the data set).
    pub table: String,
    /// Index name (`<dataset>_a`, or `pgbench_accounts_pkey`).
    pub index: String,
    /// Rows in the table.
    pub rows: u64,
    /// Seed of the random values.
    pub seed: u64,
    /// pgbench scale factor (pgbench_accounts only).
    pub scale: Option<u64>,
    /// File name (relfilenode) of the heap's main fork, relative to the directory.
    pub heap_relfilenode: u32,
    /// File name (relfilenode) of the btree, relative to the directory.
    pub index_relfilenode: u32,
    /// Heap pages (blocks of the heap's main fork).
    pub heap_pages: u64,
    /// Index pages, metapage included.
    pub index_pages: u64,
    /// Root block of the btree (0 if the table is empty).
    pub index_root: u32,
    /// Level of the root (0 = root is a leaf).
    pub index_level: u32,
    /// Type of the indexed key column: `float8` or `int4`.
    pub key_type: String,
    /// Table columns as `[name, type]` in order.
    pub columns: Vec<(String, String)>,
    /// Rows on every heap page but the last.
    pub rows_per_page: u32,
    /// The table's fillfactor.
    pub heap_fillfactor: u32,
    /// The index's leaf fillfactor.
    pub index_fillfactor: u32,
    /// Every page carries a valid data checksum.
    pub data_checksums: bool,
    /// Version of pageio that wrote the files.
    pub pageio_version: String,
    /// When the data set was written (UTC, RFC 3339).
    pub created: String,
}

/// The largest manifest read: a data set's manifest is a few hundred bytes of JSON.
const MANIFEST_MAX_BYTES: u64 = 1 << 20;

impl Manifest {
    /// Reads `dir/manifest.json` (`dir` is a data-set directory, e.g. `OUT/uniform`).
    pub fn load(dir: &Path) -> Result<Manifest, GenError> {
        let path = dir.join(MANIFEST_FILE);
        let bytes = crate::storage::read_small_file(&path, MANIFEST_MAX_BYTES).map_err(|e| {
            GenError::ManifestRead {
                path: path.clone(),
                source: match e {
                    crate::storage::SmallFileError::Missing => {
                        std::io::Error::from_raw_os_error(libc::ENOENT)
                    }
                    crate::storage::SmallFileError::Io(e) => e,
                    other => std::io::Error::other(other.to_string()),
                },
            }
        })?;
        let text = String::from_utf8(bytes).map_err(|e| GenError::ManifestParse {
            path: path.clone(),
            problem: format!("not UTF-8: {e}"),
        })?;
        serde_json::from_str(&text).map_err(|e| GenError::ManifestParse {
            path,
            problem: e.to_string(),
        })
    }

    /// The heap relation of the data set in `dir`.
    pub fn heap_file(&self, dir: &Path) -> RelFile {
        RelFile::new(dir.join(self.heap_relfilenode.to_string()))
    }

    /// The btree relation of the data set in `dir`.
    pub fn index_file(&self, dir: &Path) -> RelFile {
        RelFile::new(dir.join(self.index_relfilenode.to_string()))
    }

    /// Checks the files of the data set in `dir` against the manifest before they are
    /// trusted: every segment of the heap and the index has the size the page counts give
    /// (and no segment lies beyond them), and the btree metapage names the manifest's root
    /// and level. A disagreement — a truncated or partly rewritten data set — is an error
    /// naming the file.
    pub fn check_files(&self, dir: &Path) -> Result<(), GenError> {
        let manifest = dir.join(MANIFEST_FILE);
        let mismatch = |path: PathBuf, problem: String| GenError::ManifestMismatch {
            path,
            manifest: manifest.clone(),
            problem,
        };
        for (relfilenode, pages, what) in [
            (self.heap_relfilenode, self.heap_pages, "heap_pages"),
            (self.index_relfilenode, self.index_pages, "index_pages"),
        ] {
            let segment_blocks = RELSEG_SIZE_BLOCKS as u64;
            let segments = pages.div_ceil(segment_blocks).max(1);
            // One past the expected segments, to catch a longer relation.
            for segno in 0..=segments {
                let name = if segno == 0 {
                    relfilenode.to_string()
                } else {
                    format!("{relfilenode}.{segno}")
                };
                let path = dir.join(name);
                let expected_bytes = if segno < segments {
                    pages
                        .saturating_sub(segno * segment_blocks)
                        .min(segment_blocks)
                        * BLCKSZ as u64
                } else {
                    0
                };
                let actual_bytes = match std::fs::symlink_metadata(&path) {
                    Ok(m) if !m.is_file() => {
                        return Err(mismatch(
                            path,
                            format!(
                                "it is {}, not a regular file",
                                crate::storage::file_type_name(m.file_type())
                            ),
                        ))
                    }
                    Ok(m) => Some(m.len()),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                    Err(source) => {
                        return Err(GenError::Io {
                            op: "stat",
                            path,
                            source,
                        })
                    }
                };
                match actual_bytes {
                    None if segno < segments => {
                        return Err(mismatch(
                            path,
                            format!("the file is missing ({what} = {pages})"),
                        ))
                    }
                    Some(bytes)
                        if segno == segments && bytes > 0
                            || bytes != expected_bytes && segno < segments =>
                    {
                        return Err(mismatch(
                            path,
                            format!("{bytes} bytes, expected {expected_bytes} ({what} = {pages})"),
                        ))
                    }
                    _ => {}
                }
            }
        }
        let index = dir.join(self.index_relfilenode.to_string());
        let mut page = vec![0u8; BLCKSZ];
        // Opened without blocking or following a link (checked above to be a regular file;
        // the descriptor is checked again, so a FIFO swapped in since is not waited on).
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&index)
            .and_then(|f| {
                if f.metadata()?.is_file() {
                    std::os::unix::fs::FileExt::read_exact_at(&f, &mut page, 0)
                } else {
                    Err(std::io::Error::other("it is no longer a regular file"))
                }
            })
            .map_err(|source| GenError::Io {
                op: "read the metapage of",
                path: index.clone(),
                source,
            })?;
        let meta = BtMetaPage::parse(&page).map_err(|e| {
            mismatch(
                index.clone(),
                format!("block 0 is not a btree metapage: {e}"),
            )
        })?;
        if meta.btm_root != self.index_root || meta.btm_level != self.index_level {
            return Err(mismatch(
                index,
                format!(
                    "the metapage has root block {} at level {}, the manifest index_root {} at index_level {}",
                    meta.btm_root, meta.btm_level, self.index_root, self.index_level
                ),
            ));
        }
        Ok(())
    }

    /// Writes the manifest to `dir` atomically (temporary file, fsync, rename).
    pub(crate) fn store(&self, dir: &Path) -> Result<PathBuf, GenError> {
        use std::io::Write as _;
        let path = dir.join(MANIFEST_FILE);
        let tmp = dir.join(format!("{MANIFEST_FILE}.tmp"));
        let io_err = |path: &Path, op: &'static str| {
            let path = path.to_path_buf();
            move |source| GenError::Io { op, path, source }
        };
        let json = serde_json::to_string_pretty(self).map_err(|e| GenError::ManifestParse {
            path: path.clone(),
            problem: e.to_string(),
        })?;
        let mut file = std::fs::File::create(&tmp).map_err(io_err(&tmp, "create"))?;
        file.write_all(json.as_bytes())
            .and_then(|()| file.write_all(b"\n"))
            .map_err(io_err(&tmp, "write"))?;
        file.sync_all().map_err(io_err(&tmp, "fsync"))?;
        std::fs::rename(&tmp, &path).map_err(io_err(&path, "rename"))?;
        Ok(path)
    }
}

/// `SystemTime::now()` as `YYYY-MM-DDTHH:MM:SSZ`.
pub(crate) fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's days-to-civil conversion.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + (month <= 2) as i64;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
