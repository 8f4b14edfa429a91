//! The built-in device probe: O_DIRECT `pread`s from one thread per queue slot.
//!
//! # Problem
//!
//! What the disk under the data delivers — random 8 kB reads per second at a given queue
//! depth, sequential bandwidth — has to be measured on the file system that holds the data,
//! without writing to it, in a fixed time, and with nothing installed: fio is not on every
//! host, and a library should not depend on a program being on the PATH.
//!
//! # Mechanism
//!
//! ```text
//!   ProbeFiles: the files to read, laid end to end (each a whole number of reads)
//!        │  one thread per queue slot (queue depth 32 = 32 threads, each one pread at a time)
//!        ▼
//!   random:     offset = uniform block of the whole range (xorshift64*, per-thread seed)
//!   sequential: offset = shared cursor, advanced atomically, wrapping at the end
//!        │  O_DIRECT: the page cache is not involved, so every read reaches the device
//!        ▼
//!   stop at the deadline (or on cancel) → reads / elapsed seconds
//! ```
//!
//! fio is not used here, though `pageio bench` runs it for its device limit when installed:
//! the depth sweep is 15 runs in about half of a 30 s bound, fio's runtime is set in whole
//! seconds and each run starts a process, and a library should not shell out.
//!
//! A thread per slot is how the device sees a queue depth of N from synchronous reads: N
//! reads outstanding at any moment. It costs a context switch per read, so on a fast NVMe
//! device and few cores it can under-report the deepest queues; `docs/BENCHMARKS.md`
//! compares it with fio on the same disk.
//!
//! When the file system refuses O_DIRECT (ramfs; tmpfs before Linux 6.6), the files are read
//! buffered after evicting them from the page cache; the caller records that the numbers
//! are then the page cache's as soon as a block is read twice.
//!
//! # Worked example
//!
//! `probe(files, Pattern::Random, 8192, 32, 2 s)` on a disk doing 60000 IOPS at depth 32:
//! 32 threads each complete ~3750 reads → 120000 reads / 2.0 s = 60000 reads/s.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::storage::{open_direct, FileCache, IoBuffer, OpenMode, SegmentFile, StorageError};

/// How often the timing thread wakes to check the deadline and the cancel flag: short
/// enough that a run ends within a few milliseconds of its deadline (a 3 s measurement
/// with 8 runs must not overrun by more than a sliver), long enough to cost nothing.
const POLL_INTERVAL: Duration = Duration::from_millis(5);

/// Most reader threads one run starts: the deepest queue PostgreSQL's
/// `effective_io_concurrency` advice needs to see is well below this (the default sweep
/// stops at 64), and a thread per slot beyond it would measure the scheduler, not the disk.
pub const MAX_QUEUE_DEPTH: usize = 256;

/// Access pattern of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    /// Uniformly random offsets (an index or bitmap-heap scan's reads).
    Random,
    /// Consecutive offsets shared by all threads (a sequential scan with read-ahead).
    Sequential,
}

/// What one run measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProbeRate {
    /// Reads completed.
    pub reads: u64,
    /// Wall-clock seconds the run took.
    pub seconds: f64,
    /// Reads per second.
    pub reads_per_second: f64,
    /// Bytes per second (reads × read size).
    pub bytes_per_second: f64,
}

/// One file of a probe, opened for reading.
struct ProbeFile {
    file: Arc<SegmentFile>,
    size_bytes: u64,
}

/// The files a probe reads, laid end to end, opened read-only — with O_DIRECT when the file
/// system allows it.
pub struct ProbeFiles {
    files: Vec<ProbeFile>,
    total_bytes: u64,
    direct: bool,
}

impl ProbeFiles {
    /// Opens `paths` read-only. With `direct` the files are opened with O_DIRECT as the
    /// engine opens relation files under `direct_io = on`; a file system that refuses it is
    /// [`StorageError::DirectIoUnsupported`] (the caller may retry buffered). Empty files are
    /// skipped.
    pub fn open(paths: &[PathBuf], direct: bool) -> Result<ProbeFiles, StorageError> {
        let cache = FileCache::new(paths.len().max(1), false)?;
        let mut files = Vec::new();
        let mut total_bytes = 0u64;
        for path in paths {
            let file = if direct {
                open_direct(path)?
            } else {
                cache.open(path, path.display().to_string().into(), OpenMode::Read)?
            };
            let size_bytes = std::fs::metadata(path)
                .map_err(|source| StorageError::Syscall {
                    call: "stat",
                    path: path.clone(),
                    source,
                })?
                .len();
            if size_bytes == 0 {
                continue;
            }
            total_bytes += size_bytes;
            files.push(ProbeFile { file, size_bytes });
        }
        Ok(ProbeFiles {
            files,
            total_bytes,
            direct,
        })
    }

    /// Total bytes of all files.
    pub fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    /// Whether the files were opened with O_DIRECT.
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    /// The files' paths.
    pub fn paths(&self) -> Vec<&Path> {
        self.files.iter().map(|f| f.file.path()).collect()
    }

    /// Reads of `read_size_bytes` that fit: a read never straddles two files.
    fn slots(&self, read_size_bytes: u64) -> Vec<u64> {
        self.files
            .iter()
            .map(|f| f.size_bytes / read_size_bytes)
            .collect()
    }
}

/// Runs one probe: `queue_depth` threads reading `read_size_bytes` at a time in `pattern`
/// until `duration` has passed or `cancel` is set. Every thread completes at least one read,
/// so a run that succeeds always has a rate above zero.
///
/// Errors: a failed `pread` names the file, the offset and the errno; files too small for
/// one read are an error naming the read size.
pub fn probe(
    files: &ProbeFiles,
    pattern: Pattern,
    read_size_bytes: usize,
    queue_depth: usize,
    duration: Duration,
    cancel: &AtomicBool,
) -> Result<ProbeRate, ProbeError> {
    let slots = files.slots(read_size_bytes as u64);
    let total_slots: u64 = slots.iter().sum();
    if total_slots == 0 || read_size_bytes == 0 {
        return Err(ProbeError::TooSmall {
            total_bytes: files.total_bytes,
            read_size_bytes,
        });
    }
    // Slot `s` of the whole range → (file index, offset). Precomputed cumulative slot counts
    // keep the per-read cost to one binary search.
    let mut slot_starts = Vec::with_capacity(slots.len());
    let mut acc = 0u64;
    for s in &slots {
        slot_starts.push(acc);
        acc += s;
    }
    let locate = |slot: u64| -> (&ProbeFile, u64) {
        let i = match slot_starts.binary_search(&slot) {
            Ok(i) => i,
            // Err(0) cannot happen: slot_starts[0] == 0 and slot >= 0.
            Err(i) => i - 1,
        };
        // Files with no whole slot have slots[i] == 0 and the same start as the next file;
        // binary_search may land on either, so skip forward past empty ones.
        let mut i = i;
        while slots[i] == 0 {
            i += 1;
        }
        (
            &files.files[i],
            (slot - slot_starts[i]) * read_size_bytes as u64,
        )
    };
    let depth = queue_depth.clamp(1, MAX_QUEUE_DEPTH);
    let cursor = AtomicU64::new(0);
    let done = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let error: Mutex<Option<ProbeError>> = Mutex::new(None);
    let start = Instant::now();
    std::thread::scope(|scope| {
        for thread_no in 0..depth {
            let (cursor, done, stop, error, locate) = (&cursor, &done, &stop, &error, &locate);
            scope.spawn(move || {
                // The storage layer's aligned buffer: O_DIRECT needs memory aligned to the
                // device's block size, which IoBuffer always is.
                let mut buf = IoBuffer::zeroed(read_size_bytes);
                let mut rng_state = 0x9E37_79B9_7F4A_7C15u64 ^ ((thread_no as u64 + 1) << 17);
                loop {
                    let slot = match pattern {
                        Pattern::Random => {
                            // xorshift64*: cheap, uniform enough for offsets.
                            rng_state ^= rng_state >> 12;
                            rng_state ^= rng_state << 25;
                            rng_state ^= rng_state >> 27;
                            rng_state.wrapping_mul(0x2545_F491_4F6C_DD1D) % total_slots
                        }
                        Pattern::Sequential => cursor.fetch_add(1, Ordering::Relaxed) % total_slots,
                    };
                    let (file, offset) = locate(slot);
                    match file.file.pread(buf.as_mut_slice(), offset) {
                        Ok(n) if n > 0 => {
                            done.fetch_add(1, Ordering::Relaxed);
                        }
                        // A file truncated under us: end of file is not a read, and not
                        // an error worth stopping for; the deadline still ends the run.
                        Ok(_) => {}
                        Err(e) => {
                            let mut slot = error.lock().unwrap_or_else(|p| p.into_inner());
                            if slot.is_none() {
                                *slot = Some(ProbeError::Read {
                                    file: file.file.path().to_path_buf(),
                                    offset,
                                    source: e,
                                });
                            }
                            stop.store(true, Ordering::Relaxed);
                        }
                    }
                    // Checked after the read, so every thread completes at least one.
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                }
            });
        }
        while start.elapsed() < duration && !stop.load(Ordering::Relaxed) {
            if cancel.load(Ordering::Relaxed) {
                break;
            }
            std::thread::sleep(POLL_INTERVAL.min(duration.saturating_sub(start.elapsed())));
        }
        stop.store(true, Ordering::Relaxed);
    });
    if let Some(e) = error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    if cancel.load(Ordering::Relaxed) {
        return Err(ProbeError::Cancelled);
    }
    let seconds = start.elapsed().as_secs_f64().max(1e-9);
    let reads = done.load(Ordering::Relaxed);
    Ok(ProbeRate {
        reads,
        seconds,
        reads_per_second: reads as f64 / seconds,
        bytes_per_second: reads as f64 * read_size_bytes as f64 / seconds,
    })
}

/// Why a probe run failed.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The files hold no whole read.
    #[error("the files to probe hold {total_bytes} bytes, less than one {read_size_bytes}-byte read: probe a larger file")]
    TooSmall {
        /// Their total size.
        total_bytes: u64,
        /// The read size asked for.
        read_size_bytes: usize,
    },
    /// A read failed.
    #[error("device probe: could not read \"{}\" at offset {offset}: {source}", file.display())]
    Read {
        /// The file.
        file: PathBuf,
        /// Byte offset of the failed read.
        offset: u64,
        /// The errno.
        source: std::io::Error,
    },
    /// The caller's cancel flag was set.
    #[error("device probe cancelled")]
    Cancelled,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_reads_across_files_and_reports_rates() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        let empty = dir.path().join("empty");
        std::fs::write(&a, vec![1u8; 1 << 20]).unwrap();
        std::fs::write(&b, vec![2u8; (1 << 20) + 4096]).unwrap();
        std::fs::write(&empty, b"").unwrap();
        let files = ProbeFiles::open(&[a, empty, b], false).unwrap();
        assert_eq!(files.total_bytes(), (2 << 20) + 4096);
        assert_eq!(files.paths().len(), 2);
        let never = AtomicBool::new(false);
        for pattern in [Pattern::Random, Pattern::Sequential] {
            let rate =
                probe(&files, pattern, 8192, 4, Duration::from_millis(50), &never).expect("probe");
            assert!(
                rate.reads >= 4,
                "every thread reads at least once: {rate:?}"
            );
            assert!(rate.reads_per_second > 0.0 && rate.bytes_per_second > 0.0);
        }
        let e = probe(&files, Pattern::Random, 4 << 20, 1, Duration::ZERO, &never).unwrap_err();
        assert!(matches!(e, ProbeError::TooSmall { .. }), "{e}");
        let cancelled = AtomicBool::new(true);
        let e = probe(
            &files,
            Pattern::Random,
            8192,
            2,
            Duration::from_secs(60),
            &cancelled,
        )
        .unwrap_err();
        assert!(matches!(e, ProbeError::Cancelled), "{e}");
    }
}
