//! Relation forks as chains of segment files.
//!
//! A [`RelFile`] names one fork of one relation by the path of its first segment
//! (`base/5/16384`, `base/5/16384_fsm`, or any file a generator created). Everything else —
//! segment paths, block-to-segment arithmetic, the relation's length — is derived from that
//! path and [`RELSEG_SIZE_BLOCKS`], exactly as PostgreSQL's `md.c` derives them.
//!
//! # Walking the segments
//!
//! `mdnblocks` counts segments until the first one that is missing or shorter than 1 GB, and
//! [`RelFile::nblocks`] does the same. That count is blind to two kinds of damage a reader
//! must not paper over, so [`RelFile::segment_layout`] also reports them:
//!
//! ```text
//!   16384 (1 GB)   16384.1 (missing)   16384.2 (present)   → orphan: segment 2 after the end
//!   16384 (1 GB)   16384.1 (5 MB)      16384.2 (present)   → orphan: a short segment before it
//!   16384 (8000 bytes)                                      → partial page: 8000 % 8192 ≠ 0
//! ```
//!
//! Both walks are bounded by [`MAX_SEGMENTS`]: a fork never has more segments than
//! PostgreSQL's block numbers can address, so a longer chain is not a relation.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{FileCache, OpenMode, SegmentFile, StorageError, BLCKSZ, RELSEG_SIZE_BLOCKS};

/// Most segment files one fork can have: PostgreSQL's block numbers are 32 bits
/// (`MaxBlockNumber` = 0xFFFFFFFE), so a fork holds fewer than 2^32 blocks, i.e. at most
/// `MaxBlockNumber`: the largest block number of a relation (`0xFFFFFFFF` is
/// `InvalidBlockNumber`). Every I/O is checked against it before a segment number is derived,
/// so a block number from a corrupt page or a caller can never wrap onto block 0.
pub const MAX_BLOCK_NUMBER: u64 = 0xFFFF_FFFE;

/// Bytes in a full segment (1 GB): no segment file of a relation is larger.
pub const SEGMENT_BYTES: u64 = RELSEG_SIZE_BLOCKS as u64 * BLCKSZ as u64;

/// 2^32 / `RELSEG_SIZE` = 32768 segments. Every walk over segment files stops there.
pub const MAX_SEGMENTS: u32 = ((1u64 << 32) / RELSEG_SIZE_BLOCKS as u64) as u32;

/// What [`RelFile::segment_layout`] found: the length `mdnblocks` would report, plus the
/// damage that length hides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentLayout {
    /// Whole blocks up to the first missing or short segment (what `mdnblocks` counts).
    pub nblocks: u64,
    /// Number of the last segment counted (the one that ended the walk, if present).
    pub last_segno: u32,
    /// Size of that last segment in bytes.
    pub last_size_bytes: u64,
    /// Set when the last segment's size is not a whole number of pages: the trailing
    /// `last_size_bytes % BLCKSZ` bytes are a partial page `nblocks` does not count.
    pub partial_page_bytes: Option<u64>,
    /// A segment file that exists after the end of the walk (a missing or short segment
    /// before it), whose blocks `nblocks` does not count.
    pub orphan: Option<OrphanSegment>,
}

/// A segment file found beyond the segment that ended the walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrphanSegment {
    /// The segment that ended the walk: missing, or shorter than a full segment.
    pub ended_at_segno: u32,
    /// Its size in bytes, or `None` if the file is missing.
    pub ended_at_size_bytes: Option<u64>,
    /// The first later segment file that exists.
    pub later_segno: u32,
}

/// A relation fork (PostgreSQL's `ForkNumber`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum ForkNumber {
    /// The main data fork (no suffix).
    Main,
    /// Free-space map (`_fsm`).
    Fsm,
    /// Visibility map (`_vm`).
    Vm,
    /// Init fork of unlogged relations (`_init`).
    Init,
}

impl ForkNumber {
    /// The file-name suffix of the fork (`""`, `"_fsm"`, `"_vm"`, `"_init"`).
    pub fn suffix(self) -> &'static str {
        match self {
            ForkNumber::Main => "",
            ForkNumber::Fsm => "_fsm",
            ForkNumber::Vm => "_vm",
            ForkNumber::Init => "_init",
        }
    }

    /// The fork's name as PostgreSQL spells it (`forkNames`: `main`, `fsm`, `vm`, `init`).
    pub fn name(self) -> &'static str {
        match self {
            ForkNumber::Main => "main",
            ForkNumber::Fsm => "fsm",
            ForkNumber::Vm => "vm",
            ForkNumber::Init => "init",
        }
    }
}

/// One fork of one relation: the path of its segment 0 plus a display name for messages.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct RelFile {
    base: PathBuf,
    display: Arc<str>,
}

impl fmt::Debug for RelFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RelFile({})", self.display)
    }
}

impl fmt::Display for RelFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.display)
    }
}

impl RelFile {
    /// A relation fork whose first segment is at `path`; messages show the path as given.
    pub fn new(path: impl Into<PathBuf>) -> RelFile {
        let base = path.into();
        let display: Arc<str> = base.display().to_string().into();
        RelFile { base, display }
    }

    /// A relation fork inside a data directory: `relpath` is relative to `pgdata`
    /// (`base/5/16384`), and messages show `relpath`, as PostgreSQL's do.
    pub fn in_data_dir(pgdata: &Path, relpath: &str, fork: ForkNumber) -> RelFile {
        let name = format!("{relpath}{}", fork.suffix());
        RelFile {
            base: pgdata.join(&name),
            display: name.into(),
        }
    }

    /// The name used in messages.
    pub fn display_name(&self) -> &Arc<str> {
        &self.display
    }

    /// Path of segment 0.
    pub fn path(&self) -> &Path {
        &self.base
    }

    /// Path of segment `segno` (`<base>` for 0, `<base>.N` after).
    pub fn segment_path(&self, segno: u32) -> PathBuf {
        if segno == 0 {
            self.base.clone()
        } else {
            let mut s = self.base.clone().into_os_string();
            s.push(format!(".{segno}"));
            PathBuf::from(s)
        }
    }

    /// Display name of segment `segno`.
    pub fn segment_display(&self, segno: u32) -> Arc<str> {
        if segno == 0 {
            self.display.clone()
        } else {
            format!("{}.{segno}", self.display).into()
        }
    }

    /// The segment holding `block` and the block's index inside it.
    pub fn segment_of(block: u64) -> (u32, u32) {
        (
            (block / RELSEG_SIZE_BLOCKS as u64) as u32,
            (block % RELSEG_SIZE_BLOCKS as u64) as u32,
        )
    }

    /// How many blocks, starting at `block`, fit before the segment ends
    /// (PostgreSQL's `smgrmaxcombine`): an I/O may combine at most this many.
    pub fn blocks_in_segment(block: u64) -> u32 {
        RELSEG_SIZE_BLOCKS - (block % RELSEG_SIZE_BLOCKS as u64) as u32
    }

    /// Opens (through the cache) the segment holding `block` and returns it with the byte
    /// offset of `block` inside it. `nblocks` must not cross the segment's end.
    pub fn locate(
        &self,
        cache: &FileCache,
        block: u64,
        nblocks: u32,
        mode: OpenMode,
    ) -> Result<(Arc<SegmentFile>, u64), StorageError> {
        self.check_block_range(block, nblocks as u64)?;
        if nblocks > Self::blocks_in_segment(block) {
            return Err(StorageError::CrossesSegment {
                path: self.base.clone(),
                block,
                nblocks,
            });
        }
        let (segno, in_seg) = Self::segment_of(block);
        let file = cache.open(&self.segment_path(segno), self.segment_display(segno), mode)?;
        if file.size_at_open() > SEGMENT_BYTES {
            return Err(StorageError::SegmentTooBig {
                path: self.segment_path(segno),
                size_bytes: file.size_at_open(),
            });
        }
        Ok((file, in_seg as u64 * BLCKSZ as u64))
    }

    /// Number of blocks in the fork, like PostgreSQL's `mdnblocks`: segments are counted
    /// until the first one that is shorter than a full segment or missing. A missing segment
    /// 0 is an error.
    pub fn nblocks(&self) -> Result<u64, StorageError> {
        self.walk_segments().map(|(total, _, _, _)| total)
    }

    /// The `mdnblocks` walk, bounded by [`MAX_SEGMENTS`]: the block count, the segment that
    /// ended it, that segment's size (`None` if missing) and the size of the last segment
    /// counted.
    fn walk_segments(&self) -> Result<(u64, u32, Option<u64>, u64), StorageError> {
        let mut total = 0u64;
        let mut last_size_bytes = 0u64;
        for segno in 0..MAX_SEGMENTS {
            let path = self.segment_path(segno);
            let len = match std::fs::metadata(&path) {
                // A FIFO or a device has no length worth counting: counting it as 0 blocks
                // would report an empty relation, and reading it would hang or never end.
                Ok(m) if !m.is_file() => {
                    return Err(StorageError::NotRegularFile {
                        path,
                        what: super::file_type_name(m.file_type()),
                    })
                }
                Ok(m) => m.len(),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && segno > 0 => {
                    return Ok((total, segno, None, last_size_bytes))
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(StorageError::NotFound { path })
                }
                Err(source) => return Err(StorageError::Open { path, source }),
            };
            if len > SEGMENT_BYTES {
                return Err(StorageError::SegmentTooBig {
                    path,
                    size_bytes: len,
                });
            }
            last_size_bytes = len;
            let blocks = len / BLCKSZ as u64;
            total += blocks;
            if blocks < RELSEG_SIZE_BLOCKS as u64 {
                return Ok((total, segno, Some(len), last_size_bytes));
            }
        }
        // Every possible segment was full: the fork is as long as block numbers allow.
        Ok((total, MAX_SEGMENTS, None, last_size_bytes))
    }

    /// The segment walk of [`RelFile::nblocks`] plus what it hides: a partial page at the
    /// end of the last segment, and segment files after a missing or short one (see the
    /// module docs). Listing the directory finds a later segment wherever it is, so a gap of
    /// any width is seen.
    pub fn segment_layout(&self) -> Result<SegmentLayout, StorageError> {
        let (nblocks, ended_at, ended_size, last_size_bytes) = self.walk_segments()?;
        let last_segno = if ended_size.is_some() {
            ended_at
        } else {
            ended_at.saturating_sub(1)
        };
        let partial = last_size_bytes % BLCKSZ as u64;
        let later_segno = self.later_segment_files(ended_at)?.into_iter().min();
        Ok(SegmentLayout {
            nblocks,
            last_segno,
            last_size_bytes,
            partial_page_bytes: (partial != 0).then_some(partial),
            orphan: later_segno.map(|later_segno| OrphanSegment {
                ended_at_segno: ended_at,
                ended_at_size_bytes: ended_size,
                later_segno,
            }),
        })
    }

    /// Numbers of the segment files (`<name>.N`) in the fork's directory with N > `after`.
    fn later_segment_files(&self, after: u32) -> Result<Vec<u32>, StorageError> {
        let Some(name) = self
            .base
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
        else {
            return Ok(Vec::new());
        };
        let dir = match self.base.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let entries = std::fs::read_dir(&dir).map_err(|source| StorageError::Open {
            path: dir.clone(),
            source,
        })?;
        let prefix = format!("{name}.");
        let mut later = Vec::new();
        for entry in entries.flatten() {
            let file = entry.file_name();
            let file = file.to_string_lossy();
            let Some(digits) = file.strip_prefix(&prefix) else {
                continue;
            };
            // `16384.1` yes; `16384.1.tmp`, `16384.01` or `16384.x` are not segments.
            if digits.is_empty()
                || digits.starts_with('0')
                || !digits.bytes().all(|b| b.is_ascii_digit())
            {
                continue;
            }
            if let Ok(segno) = digits.parse::<u32>() {
                if segno > after && segno < MAX_SEGMENTS {
                    later.push(segno);
                }
            }
        }
        Ok(later)
    }

    /// Paths of the segments that exist, in order (at most [`MAX_SEGMENTS`]).
    pub fn existing_segments(&self) -> Vec<PathBuf> {
        (0..MAX_SEGMENTS)
            .map(|s| self.segment_path(s))
            .take_while(|p| p.exists())
            .collect()
    }

    /// Reads `buf.len() / BLCKSZ` blocks starting at `block` with plain `pread`, splitting at
    /// segment boundaries. Meant for tools and tests; the engine reads through [`crate::aio`].
    pub fn read_blocks_sync(
        &self,
        cache: &FileCache,
        block: u64,
        buf: &mut [u8],
    ) -> Result<(), StorageError> {
        self.for_each_run(block, buf.len(), |blk, nblocks, range| {
            let (file, offset) = self.locate(cache, blk, nblocks, OpenMode::Read)?;
            let chunk = &mut buf[range];
            let mut done = 0;
            while done < chunk.len() {
                let n = file
                    .pread(&mut chunk[done..], offset + done as u64)
                    .map_err(|source| StorageError::Io {
                        op: "read",
                        path: file.path().to_path_buf(),
                        block: blk + (done / BLCKSZ) as u64,
                        source,
                    })?;
                if n == 0 {
                    return Err(StorageError::ShortRead {
                        path: file.path().to_path_buf(),
                        block: blk + (done / BLCKSZ) as u64,
                        bytes_read: done % BLCKSZ,
                        expected_bytes: BLCKSZ,
                    });
                }
                done += n;
            }
            Ok(())
        })
    }

    /// Writes whole blocks starting at `block` with plain `pwrite`, splitting at segment
    /// boundaries and creating segment files as needed.
    pub fn write_blocks_sync(
        &self,
        cache: &FileCache,
        block: u64,
        buf: &[u8],
    ) -> Result<(), StorageError> {
        self.for_each_run(block, buf.len(), |blk, nblocks, range| {
            let (file, offset) = self.locate(cache, blk, nblocks, OpenMode::ReadWriteCreate)?;
            let chunk = &buf[range];
            let mut done = 0;
            while done < chunk.len() {
                let n = file
                    .pwrite(&chunk[done..], offset + done as u64)
                    .map_err(|source| StorageError::Io {
                        op: "write",
                        path: file.path().to_path_buf(),
                        block: blk + (done / BLCKSZ) as u64,
                        source,
                    })?;
                done += n;
            }
            Ok(())
        })
    }

    /// Whether `nblocks` blocks from `block` stay within [`MAX_BLOCK_NUMBER`]; an error naming
    /// the relation if not.
    pub fn check_block_range(&self, block: u64, nblocks: u64) -> Result<(), StorageError> {
        match block.checked_add(nblocks) {
            Some(end) if end <= MAX_BLOCK_NUMBER + 1 => Ok(()),
            _ => Err(StorageError::BlockOutOfRange {
                path: self.base.clone(),
                block,
                nblocks,
                max_block: MAX_BLOCK_NUMBER,
            }),
        }
    }

    /// Calls `f(first_block, nblocks, byte_range)` once per segment the range touches.
    fn for_each_run(
        &self,
        block: u64,
        len_bytes: usize,
        mut f: impl FnMut(u64, u32, std::ops::Range<usize>) -> Result<(), StorageError>,
    ) -> Result<(), StorageError> {
        debug_assert_eq!(len_bytes % BLCKSZ, 0, "whole blocks only");
        let total_blocks = (len_bytes / BLCKSZ) as u64;
        self.check_block_range(block, total_blocks)?;
        let mut done = 0u64;
        while done < total_blocks {
            let blk = block + done;
            let n = (Self::blocks_in_segment(blk) as u64).min(total_blocks - done) as u32;
            let start = done as usize * BLCKSZ;
            f(blk, n, start..start + n as usize * BLCKSZ)?;
            done += n as u64;
        }
        Ok(())
    }

    /// Evicts every segment of the fork from the page cache (`POSIX_FADV_DONTNEED`), for cold
    /// runs. Dirty pages are written first (`fdatasync`), since DONTNEED skips them.
    pub fn evict_from_page_cache(&self) -> Result<(), StorageError> {
        // One file open at a time: each segment is advised and closed before the next opens.
        let cache = FileCache::new(1, false)?;
        for (segno, path) in (0u32..).zip(self.existing_segments()) {
            let file = cache.open(&path, self.segment_display(segno), OpenMode::Read)?;
            // Best effort: a file that cannot be synced still has its clean pages evicted.
            let _ = file.sync_data();
            file.advise_dontneed()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_arithmetic() {
        assert_eq!(RelFile::segment_of(0), (0, 0));
        assert_eq!(RelFile::segment_of(131071), (0, 131071));
        assert_eq!(RelFile::segment_of(200000), (1, 200000 - 131072));
        assert_eq!(RelFile::blocks_in_segment(131070), 2);
        assert_eq!(RelFile::blocks_in_segment(131072), 131072);
        let r = RelFile::in_data_dir(Path::new("/pg"), "base/5/16384", ForkNumber::Fsm);
        assert_eq!(r.segment_path(0), PathBuf::from("/pg/base/5/16384_fsm"));
        assert_eq!(r.segment_path(2), PathBuf::from("/pg/base/5/16384_fsm.2"));
        assert_eq!(&*r.segment_display(1), "base/5/16384_fsm.1");
    }

    #[test]
    fn sync_io_splits_at_segment_boundaries() {
        let dir = tempfile::tempdir().unwrap();
        let rel = RelFile::new(dir.path().join("16384"));
        let cache = FileCache::new(16, false).unwrap();
        // Four blocks straddling the first boundary; the files are sparse, so this is cheap.
        let first = RELSEG_SIZE_BLOCKS as u64 - 2;
        let mut data = vec![0u8; 4 * BLCKSZ];
        for (i, chunk) in data.chunks_mut(BLCKSZ).enumerate() {
            chunk.fill(i as u8 + 1);
        }
        rel.write_blocks_sync(&cache, first, &data).unwrap();
        assert_eq!(
            std::fs::metadata(rel.segment_path(0)).unwrap().len(),
            RELSEG_SIZE_BLOCKS as u64 * BLCKSZ as u64
        );
        assert_eq!(
            std::fs::metadata(rel.segment_path(1)).unwrap().len(),
            2 * BLCKSZ as u64
        );
        assert_eq!(rel.nblocks().unwrap(), RELSEG_SIZE_BLOCKS as u64 + 2);
        let mut back = vec![0u8; 4 * BLCKSZ];
        rel.read_blocks_sync(&cache, first, &mut back).unwrap();
        assert_eq!(back, data);
        // Reading past the end is a short read naming the block.
        let mut past = vec![0u8; 2 * BLCKSZ];
        let err = rel
            .read_blocks_sync(&cache, RELSEG_SIZE_BLOCKS as u64 + 1, &mut past)
            .unwrap_err();
        assert!(
            matches!(err, StorageError::ShortRead { block, .. } if block == RELSEG_SIZE_BLOCKS as u64 + 2),
            "{err}"
        );
        let err = rel.locate(&cache, first, 4, OpenMode::Read).unwrap_err();
        assert!(matches!(err, StorageError::CrossesSegment { .. }));
        // Block numbers past MaxBlockNumber are refused before they can wrap onto block 0.
        for block in [1u64 << 49, MAX_BLOCK_NUMBER, u64::MAX] {
            let err = rel.write_blocks_sync(&cache, block, &data).unwrap_err();
            assert!(matches!(err, StorageError::BlockOutOfRange { .. }), "{err}");
            let err = rel.read_blocks_sync(&cache, block, &mut back).unwrap_err();
            assert!(matches!(err, StorageError::BlockOutOfRange { .. }), "{err}");
            let err = rel.locate(&cache, block, 1, OpenMode::Read);
            assert!(block == MAX_BLOCK_NUMBER || err.is_err());
        }
        rel.read_blocks_sync(&cache, first, &mut back).unwrap();
        assert_eq!(back, data, "nothing was overwritten");
    }

    #[test]
    fn layout_reports_gaps_short_segments_and_partial_pages() {
        let dir = tempfile::tempdir().unwrap();
        let rel = RelFile::new(dir.path().join("16384"));
        let full = RELSEG_SIZE_BLOCKS as u64 * BLCKSZ as u64;
        // Sparse files: a full segment 0, no segment 1, a segment 2 of two pages.
        std::fs::File::create(rel.segment_path(0))
            .unwrap()
            .set_len(full)
            .unwrap();
        std::fs::File::create(rel.segment_path(2))
            .unwrap()
            .set_len(2 * BLCKSZ as u64)
            .unwrap();
        // Not segments: a temporary name, a leading zero.
        std::fs::write(dir.path().join("16384.3.tmp"), b"x").unwrap();
        std::fs::write(dir.path().join("16384.05"), b"x").unwrap();
        let layout = rel.segment_layout().unwrap();
        assert_eq!(layout.nblocks, RELSEG_SIZE_BLOCKS as u64);
        assert_eq!(layout.partial_page_bytes, None);
        assert_eq!(
            layout.orphan,
            Some(OrphanSegment {
                ended_at_segno: 1,
                ended_at_size_bytes: None,
                later_segno: 2
            })
        );
        // A short segment 1 before segment 2.
        std::fs::File::create(rel.segment_path(1))
            .unwrap()
            .set_len(5 * BLCKSZ as u64 + 100)
            .unwrap();
        let layout = rel.segment_layout().unwrap();
        assert_eq!(layout.nblocks, RELSEG_SIZE_BLOCKS as u64 + 5);
        assert_eq!(layout.last_segno, 1);
        assert_eq!(layout.partial_page_bytes, Some(100));
        assert_eq!(
            layout
                .orphan
                .map(|o| (o.ended_at_segno, o.ended_at_size_bytes, o.later_segno)),
            Some((1, Some(5 * BLCKSZ as u64 + 100), 2))
        );
        // Whole: segment 1 full, segment 2 last.
        std::fs::File::create(rel.segment_path(1))
            .unwrap()
            .set_len(full)
            .unwrap();
        let layout = rel.segment_layout().unwrap();
        assert_eq!(layout.nblocks, 2 * RELSEG_SIZE_BLOCKS as u64 + 2);
        assert_eq!((layout.last_segno, layout.orphan), (2, None));
    }

    #[test]
    fn missing_relation_is_named() {
        let rel = RelFile::new("/nonexistent/base/1/2");
        let err = rel.nblocks().unwrap_err();
        assert!(err.to_string().contains("/nonexistent/base/1/2"), "{err}");
    }
}
