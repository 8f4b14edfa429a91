//! The mapped area: the writer's mapping and seqlock, and the readers' copies of it.

use super::*;

/// Word indexes in the preamble.
const WORD_MAGIC: usize = 0;
const WORD_VERSION: usize = 1;
const WORD_AREA_BYTES: usize = 2;
const WORD_HEADER_LEN: usize = 3;
const WORD_SEQUENCE: usize = 4;
const WORD_SAMPLE_LEN: usize = 5;
const HEADER_WORD: usize = PREAMBLE_BYTES / 8;
const SAMPLE_WORD: usize = (PREAMBLE_BYTES + HEADER_BYTES) / 8;

/// Maps an area file its writer created `AREA_BYTES` long, read-write, as the storage
/// layer's one mapping type. (Readers do not map: they copy the words with `pread`.)
fn map_area(file: &File) -> std::io::Result<MappedRegion> {
    use std::os::fd::AsRawFd;
    MappedRegion::file(file.as_raw_fd(), 0, AREA_BYTES, MapAccess::ReadWrite)
}

/// An area's mapping as `AREA_BYTES / 8` atomic words.
fn words(map: &MappedRegion) -> &[AtomicU64] {
    debug_assert_eq!(map.len_bytes(), AREA_BYTES);
    // SAFETY: the mapping is AREA_BYTES long (`map_area`), page-aligned (so 8-byte aligned),
    // lives as long as the borrow of `map`, and AtomicU64 has the size and alignment of u64;
    // every access goes through atomic operations, so another process writing the words
    // concurrently is not a data race in this process. A read-only mapping is only ever
    // loaded from.
    unsafe { std::slice::from_raw_parts(map.as_ptr() as *const AtomicU64, AREA_BYTES / 8) }
}

fn store_bytes(words: &[AtomicU64], first_word: usize, bytes: &[u8]) {
    for (i, chunk) in bytes.chunks(8).enumerate() {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        words[first_word + i].store(u64::from_le_bytes(w), Ordering::Relaxed);
    }
}

fn load_bytes(words: &[AtomicU64], first_word: usize, len: usize, out: &mut Vec<u8>) {
    out.clear();
    for word in &words[first_word..first_word + len.div_ceil(8)] {
        out.extend_from_slice(&word.load(Ordering::Relaxed).to_le_bytes());
    }
    out.truncate(len);
}

/// The writing side of one area.
pub(super) struct AreaWriter {
    map: MappedRegion,
    pub(super) path: PathBuf,
}

impl AreaWriter {
    /// Creates `dir/pageio-aios.<pid>.<instance>` holding `header`.
    pub(super) fn create(dir: &Path, header: &AreaHeader) -> std::io::Result<AreaWriter> {
        let name = format!("{AREA_FILE_PREFIX}{}.{}", header.pid, header.instance);
        let path = dir.join(&name);
        let tmp = dir.join(format!(".{name}.tmp"));
        // A temporary name left by an earlier process with the same pid (killed while
        // creating its area): ours now, because the pid is.
        let _ = std::fs::remove_file(&tmp);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)?;
        let result = (|| {
            file.set_len(AREA_BYTES as u64)?;
            let map = map_area(&file)?;
            let words = words(&map);
            let encoded = encode_header(header);
            if encoded.len() > HEADER_BYTES {
                return Err(std::io::Error::other("header larger than HEADER_BYTES"));
            }
            store_bytes(words, HEADER_WORD, &encoded);
            words[WORD_VERSION].store(LAYOUT_VERSION, Ordering::Relaxed);
            words[WORD_AREA_BYTES].store(AREA_BYTES as u64, Ordering::Relaxed);
            words[WORD_HEADER_LEN].store(encoded.len() as u64, Ordering::Relaxed);
            words[WORD_SEQUENCE].store(0, Ordering::Relaxed);
            words[WORD_SAMPLE_LEN].store(0, Ordering::Relaxed);
            words[WORD_MAGIC].store(AREA_MAGIC, Ordering::Release);
            // A file of the same name left by a dead process with our pid (it is stale by
            // definition: the pid is ours now) is replaced.
            std::fs::rename(&tmp, &path)?;
            Ok(map)
        })();
        match result {
            Ok(map) => Ok(AreaWriter { map, path }),
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                Err(e)
            }
        }
    }

    /// Writes one sample under the seqlock.
    pub(super) fn publish(&self, sample: &[u8]) {
        let words = words(&self.map);
        let seq = words[WORD_SEQUENCE].load(Ordering::Relaxed);
        words[WORD_SEQUENCE].store(seq.wrapping_add(1), Ordering::Relaxed);
        // Readers that see the new words also see the odd sequence.
        fence(Ordering::Release);
        words[WORD_SAMPLE_LEN].store(sample.len() as u64, Ordering::Relaxed);
        store_bytes(words, SAMPLE_WORD, sample);
        words[WORD_SEQUENCE].store(seq.wrapping_add(2), Ordering::Release);
    }
}

/// Waits before retry `attempt` of a seqlock read — yielding at first, then sleeping
/// briefly — and says whether to go on: false once [`MAX_READ_WAIT`] has passed since
/// `start` (a writer that never finishes cannot hold a reader).
fn pause_before_retry(attempt: u32, start: Instant) -> bool {
    if attempt == 0 {
        return true;
    }
    if start.elapsed() >= MAX_READ_WAIT {
        return false;
    }
    if attempt < READ_RETRIES_YIELDING {
        std::thread::yield_now();
    } else {
        std::thread::sleep(READ_RETRY_SLEEP);
    }
    true
}

/// Reads the area in `path` if it is trusted by default ([`AreaTrust::OwnerOnly`]).
pub fn read_area(path: &Path) -> Result<PublishedArea, PublishError> {
    read_area_trusting(path, AreaTrust::OwnerOnly)
}

/// Reads the area in `path`, first checking its owner and mode against `trust` on the open
/// descriptor (so a file swapped in after the check is not the one read).
pub fn read_area_trusting(path: &Path, trust: AreaTrust) -> Result<PublishedArea, PublishError> {
    let io = |source| PublishError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                PublishError::NotRegular {
                    path: path.to_path_buf(),
                }
            } else {
                io(e)
            }
        })?;
    let meta = file.metadata().map_err(io)?;
    let file_type = meta.file_type();
    if !file_type.is_file() || file_type.is_fifo() {
        return Err(PublishError::NotRegular {
            path: path.to_path_buf(),
        });
    }
    if let Some(error) = distrust(trust, &meta, path) {
        return Err(error);
    }
    if meta.len() != AREA_BYTES as u64 {
        return Err(PublishError::WrongSize {
            path: path.to_path_buf(),
            size_bytes: meta.len(),
            expected_bytes: AREA_BYTES as u64,
        });
    }
    // Copied with pread, never mapped: a file that another user (or anyone who can write
    // the directory) truncates under a mapping raises SIGBUS in the reader, while a read
    // only comes up short. The seqlock works on the copy as on a mapping: the sequence word
    // is copied before the sample (pread copies in offset order), then read again after
    // it; the copy is consistent when both are the same even number.
    use std::os::unix::fs::FileExt;
    let start = Instant::now();
    let mut bytes = vec![0u8; AREA_BYTES];
    let seq_at = (WORD_SEQUENCE * 8) as u64;
    for attempt in 0u32.. {
        if !pause_before_retry(attempt, start) {
            break;
        }
        let read = |buf: &mut [u8], at: u64| {
            file.read_exact_at(buf, at).map_err(|e| {
                if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    PublishError::WrongSize {
                        path: path.to_path_buf(),
                        size_bytes: file.metadata().map(|m| m.len()).unwrap_or(0),
                        expected_bytes: AREA_BYTES as u64,
                    }
                } else {
                    io(e)
                }
            })
        };
        read(&mut bytes, 0)?;
        let copied = &bytes[seq_at as usize..seq_at as usize + 8];
        if copied[0] % 2 == 1 {
            continue;
        }
        let mut now = [0u8; 8];
        read(&mut now, seq_at)?;
        if now != copied {
            continue;
        }
        return decode_area_bytes(&bytes, path);
    }
    Err(PublishError::Busy {
        path: path.to_path_buf(),
    })
}

/// Reads an area's words: preamble checks, the header, then the sample under the seqlock.
fn read_words(words: &[AtomicU64], path: &Path) -> Result<PublishedArea, PublishError> {
    if words[WORD_MAGIC].load(Ordering::Acquire) != AREA_MAGIC {
        return Err(PublishError::BadMagic {
            path: path.to_path_buf(),
        });
    }
    let version = words[WORD_VERSION].load(Ordering::Relaxed);
    if version != LAYOUT_VERSION {
        return Err(PublishError::UnsupportedVersion {
            path: path.to_path_buf(),
            found: version,
        });
    }
    let garbled = |what: String| PublishError::Garbled {
        path: path.to_path_buf(),
        what,
    };
    let area_bytes = words[WORD_AREA_BYTES].load(Ordering::Relaxed);
    if area_bytes != AREA_BYTES as u64 {
        return Err(garbled(format!(
            "area size field is {area_bytes}, expected {AREA_BYTES}"
        )));
    }
    let header_len = words[WORD_HEADER_LEN].load(Ordering::Relaxed);
    if header_len > HEADER_BYTES as u64 {
        return Err(garbled(format!(
            "header length {header_len} is beyond its {HEADER_BYTES} bytes"
        )));
    }
    let mut buf = Vec::with_capacity(HEADER_BYTES);
    load_bytes(words, HEADER_WORD, header_len as usize, &mut buf);
    let header = decode_header(&buf, path)?;
    let sample = read_sample(words, path, &mut buf)?;
    Ok(PublishedArea {
        path: path.to_path_buf(),
        header,
        sample,
    })
}

fn read_sample(
    words: &[AtomicU64],
    path: &Path,
    buf: &mut Vec<u8>,
) -> Result<AreaSample, PublishError> {
    let start = Instant::now();
    for attempt in 0u32.. {
        if !pause_before_retry(attempt, start) {
            break;
        }
        let before = words[WORD_SEQUENCE].load(Ordering::Acquire);
        if before % 2 == 1 {
            continue;
        }
        let len = words[WORD_SAMPLE_LEN].load(Ordering::Relaxed);
        let len_ok = len <= SAMPLE_BYTES as u64;
        if len_ok {
            load_bytes(words, SAMPLE_WORD, len as usize, buf);
        }
        // The copies above happen before the second load of the sequence.
        fence(Ordering::Acquire);
        let after = words[WORD_SEQUENCE].load(Ordering::Relaxed);
        if before != after {
            continue;
        }
        if !len_ok {
            return Err(PublishError::Garbled {
                path: path.to_path_buf(),
                what: format!("sample length {len} is beyond its {SAMPLE_BYTES} bytes"),
            });
        }
        if before == 0 {
            // Created, not yet published: an empty sample, not an error.
            return Ok(AreaSample {
                sampled_at_ns: 0,
                publishes: 0,
                counters: IoCounters::default(),
                pool: None,
                depth_now: 0,
                depth_samples: 0,
                depth_histogram: [0; DEPTH_BUCKETS],
                backends: 0,
                backend_counters: Vec::new(),
                rows_total: 0,
                rows_cut: 0,
                rows: Vec::new(),
            });
        }
        return decode_sample(buf, path);
    }
    Err(PublishError::Busy {
        path: path.to_path_buf(),
    })
}

/// Decodes an area from a byte image of its file (what [`read_area`] maps): for tests and
/// tools that have the bytes already. Never panics, whatever the bytes.
pub fn decode_area_bytes(bytes: &[u8], path: &Path) -> Result<PublishedArea, PublishError> {
    if bytes.len() != AREA_BYTES {
        return Err(PublishError::WrongSize {
            path: path.to_path_buf(),
            size_bytes: bytes.len() as u64,
            expected_bytes: AREA_BYTES as u64,
        });
    }
    let words: Vec<AtomicU64> = bytes
        .chunks_exact(8)
        .map(|c| {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            AtomicU64::new(u64::from_le_bytes(w))
        })
        .collect();
    read_words(&words, path)
}
