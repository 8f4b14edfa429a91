//! The area's encoding: header and sample as small length-prefixed little-endian records,
//! every field a reader decodes bounds-checked, so a garbled file is a [`PublishError`].

use super::*;

struct Encoder {
    buf: Vec<u8>,
}

impl Encoder {
    fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    fn i32(&mut self, v: i32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    fn bool(&mut self, v: bool) {
        self.buf.push(v as u8);
    }
    /// A string cut to `max_bytes` at a character boundary.
    fn str(&mut self, s: &str, max_bytes: usize) {
        let mut end = s.len().min(max_bytes);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.u32(end as u32);
        self.buf.extend_from_slice(&s.as_bytes()[..end]);
    }
}

struct Decoder<'a> {
    buf: &'a [u8],
    at: usize,
    path: &'a Path,
}

impl<'a> Decoder<'a> {
    fn garbled(&self, what: impl Into<String>) -> PublishError {
        PublishError::Garbled {
            path: self.path.to_path_buf(),
            what: what.into(),
        }
    }
    fn take(&mut self, n: usize, field: &str) -> Result<&'a [u8], PublishError> {
        let end = self.at.checked_add(n).filter(|&end| end <= self.buf.len());
        match end {
            Some(end) => {
                let s = &self.buf[self.at..end];
                self.at = end;
                Ok(s)
            }
            None => Err(self.garbled(format!(
                "{field} runs past the end ({n} bytes at offset {})",
                self.at
            ))),
        }
    }
    fn u64(&mut self, field: &str) -> Result<u64, PublishError> {
        let mut w = [0u8; 8];
        w.copy_from_slice(self.take(8, field)?);
        Ok(u64::from_le_bytes(w))
    }
    fn u32(&mut self, field: &str) -> Result<u32, PublishError> {
        let mut w = [0u8; 4];
        w.copy_from_slice(self.take(4, field)?);
        Ok(u32::from_le_bytes(w))
    }
    fn i32(&mut self, field: &str) -> Result<i32, PublishError> {
        Ok(self.u32(field)? as i32)
    }
    fn bool(&mut self, field: &str) -> Result<bool, PublishError> {
        match self.take(1, field)?[0] {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(self.garbled(format!("{field} is {v}, not a boolean"))),
        }
    }
    fn str(&mut self, field: &str, max_bytes: usize) -> Result<String, PublishError> {
        let len = self.u32(field)? as usize;
        if len > max_bytes {
            return Err(self.garbled(format!(
                "{field} is {len} bytes long, at most {max_bytes} are written"
            )));
        }
        let bytes = self.take(len, field)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| self.garbled(format!("{field} is not UTF-8")))
    }
}

/// Longest short word published (a state, an operation, a result, a method name).
const MAX_WORD_BYTES: usize = 32;

pub(super) fn encode_header(h: &AreaHeader) -> Vec<u8> {
    let mut e = Encoder { buf: Vec::new() };
    e.i32(h.pid);
    e.u64(h.start_time_ticks);
    e.str(&h.program, MAX_PROGRAM_BYTES);
    e.str(&h.io_method, MAX_WORD_BYTES);
    e.u64(h.effective_io_concurrency);
    e.u64(h.io_combine_limit_blocks);
    e.u64(h.io_max_concurrency);
    e.bool(h.direct_io);
    e.u64(h.io_workers);
    e.u64(h.instance);
    e.buf
}

pub(super) fn decode_header(buf: &[u8], path: &Path) -> Result<AreaHeader, PublishError> {
    let mut d = Decoder { buf, at: 0, path };
    Ok(AreaHeader {
        pid: d.i32("header pid")?,
        start_time_ticks: d.u64("header start time")?,
        program: d.str("header program", MAX_PROGRAM_BYTES)?,
        io_method: d.str("header io_method", MAX_WORD_BYTES)?,
        effective_io_concurrency: d.u64("header effective_io_concurrency")?,
        io_combine_limit_blocks: d.u64("header io_combine_limit")?,
        io_max_concurrency: d.u64("header io_max_concurrency")?,
        direct_io: d.bool("header direct_io")?,
        io_workers: d.u64("header io_workers")?,
        instance: d.u64("header instance")?,
    })
}

fn encode_counters(e: &mut Encoder, c: &IoCounters) {
    for v in [
        c.ios_issued,
        c.kernel_ios,
        c.ios_merged,
        c.blocks,
        c.bytes,
        c.io_ns,
        c.wait_ns,
        c.waits,
        c.errors,
        c.partials,
        c.executed_by_submitter,
    ] {
        e.u64(v);
    }
}

fn decode_counters(d: &mut Decoder<'_>) -> Result<IoCounters, PublishError> {
    Ok(IoCounters {
        ios_issued: d.u64("counter ios_issued")?,
        kernel_ios: d.u64("counter kernel_ios")?,
        ios_merged: d.u64("counter ios_merged")?,
        blocks: d.u64("counter blocks")?,
        bytes: d.u64("counter bytes")?,
        io_ns: d.u64("counter io_ns")?,
        wait_ns: d.u64("counter wait_ns")?,
        waits: d.u64("counter waits")?,
        errors: d.u64("counter errors")?,
        partials: d.u64("counter partials")?,
        executed_by_submitter: d.u64("counter executed_by_submitter")?,
    })
}

fn encode_row(e: &mut Encoder, r: &AioRow) {
    e.i32(r.pid);
    e.u32(r.io_id);
    e.u64(r.io_generation);
    e.str(r.state, MAX_WORD_BYTES);
    e.str(r.operation, MAX_WORD_BYTES);
    e.u64(r.off);
    e.u64(r.length);
    e.str(r.target, MAX_WORD_BYTES);
    e.u32(r.handle_data_len);
    e.bool(r.raw_result.is_some());
    e.u64(r.raw_result.unwrap_or(0) as u64);
    e.str(r.result, MAX_WORD_BYTES);
    e.str(&r.target_desc, MAX_TARGET_DESC_BYTES);
    e.bool(r.f_sync);
    e.bool(r.f_localmem);
    e.bool(r.f_buffered);
}

fn decode_row(d: &mut Decoder<'_>) -> Result<PublishedRow, PublishError> {
    Ok(PublishedRow {
        pid: d.i32("row pid")?,
        io_id: d.u32("row io_id")?,
        io_generation: d.u64("row io_generation")?,
        state: d.str("row state", MAX_WORD_BYTES)?,
        operation: d.str("row operation", MAX_WORD_BYTES)?,
        off: d.u64("row off")?,
        length: d.u64("row length")?,
        target: d.str("row target", MAX_WORD_BYTES)?,
        handle_data_len: d.u32("row handle_data_len")?,
        raw_result: {
            let known = d.bool("row raw_result flag")?;
            let v = d.u64("row raw_result")? as i64;
            known.then_some(v)
        },
        result: d.str("row result", MAX_WORD_BYTES)?,
        target_desc: d.str("row target_desc", MAX_TARGET_DESC_BYTES)?,
        f_sync: d.bool("row f_sync")?,
        f_localmem: d.bool("row f_localmem")?,
        f_buffered: d.bool("row f_buffered")?,
    })
}

/// The most bytes one encoded row can take.
const MAX_ROW_BYTES: usize =
    4 + 4 + 8 + 8 + 8 + 4 + 1 + 8 + 3 + 5 * 4 + 4 * MAX_WORD_BYTES + MAX_TARGET_DESC_BYTES;

/// What the publisher encodes: the sample's fixed part and the snapshot's rows.
pub(super) struct SampleSource<'a> {
    pub(super) sampled_at_ns: u64,
    pub(super) publishes: u64,
    pub(super) counters: IoCounters,
    pub(super) pool: Option<PublishedPool>,
    pub(super) depth_now: u32,
    pub(super) depth_samples: u64,
    pub(super) depth_histogram: &'a [u64; DEPTH_BUCKETS],
    pub(super) backends: u32,
    pub(super) backend_counters: &'a [PublishedBackend],
    pub(super) rows: &'a [AioRow],
}

pub(super) fn encode_sample(s: &SampleSource<'_>) -> Vec<u8> {
    let mut e = Encoder {
        buf: Vec::with_capacity(1024 + s.rows.len().min(MAX_ROWS) * 128),
    };
    e.u64(s.sampled_at_ns);
    e.u64(s.publishes);
    encode_counters(&mut e, &s.counters);
    e.bool(s.pool.is_some());
    let pool = s.pool.unwrap_or(PublishedPool {
        workers: 0,
        busy_workers: 0,
        min_workers: 0,
        max_workers: 0,
        adaptive: false,
        queued_ios: 0,
    });
    e.u64(pool.workers);
    e.u64(pool.busy_workers);
    e.u64(pool.min_workers);
    e.u64(pool.max_workers);
    e.bool(pool.adaptive);
    e.u64(pool.queued_ios);
    e.u32(s.depth_now);
    e.u64(s.depth_samples);
    for &v in s.depth_histogram {
        e.u64(v);
    }
    e.u32(s.backends);
    let backend_counters =
        &s.backend_counters[..s.backend_counters.len().min(crate::aio::MAX_BACKENDS)];
    e.u32(backend_counters.len() as u32);
    for b in backend_counters {
        e.u32(b.id);
        e.i32(b.tid);
        e.bool(b.active);
        encode_counters(&mut e, &b.counters);
    }
    e.u32(s.rows.len() as u32);
    // Rows published: as many as fit both MAX_ROWS and the area (every row is checked
    // against its worst-case size, so the count written before them is exact).
    let fixed_end = e.buf.len() + 8;
    let room_rows = (SAMPLE_BYTES - fixed_end) / MAX_ROW_BYTES;
    let published = s.rows.len().min(MAX_ROWS).min(room_rows);
    e.u32((s.rows.len() - published) as u32);
    e.u32(published as u32);
    for r in &s.rows[..published] {
        encode_row(&mut e, r);
    }
    debug_assert!(e.buf.len() <= SAMPLE_BYTES);
    e.buf
}

pub(super) fn decode_sample(buf: &[u8], path: &Path) -> Result<AreaSample, PublishError> {
    let mut d = Decoder { buf, at: 0, path };
    let sampled_at_ns = d.u64("sample time")?;
    let publishes = d.u64("sample publishes")?;
    let counters = decode_counters(&mut d)?;
    let has_pool = d.bool("pool flag")?;
    let pool = PublishedPool {
        workers: d.u64("pool workers")?,
        busy_workers: d.u64("pool busy workers")?,
        min_workers: d.u64("pool min workers")?,
        max_workers: d.u64("pool max workers")?,
        adaptive: d.bool("pool adaptive")?,
        queued_ios: d.u64("pool queued I/Os")?,
    };
    let depth_now = d.u32("depth now")?;
    let depth_samples = d.u64("depth samples")?;
    let mut depth_histogram = [0u64; DEPTH_BUCKETS];
    for v in depth_histogram.iter_mut() {
        *v = d.u64("depth histogram")?;
    }
    let backends = d.u32("backends")?;
    let backend_count = d.u32("backend counters")? as usize;
    if backend_count > crate::aio::MAX_BACKENDS {
        return Err(d.garbled(format!(
            "{backend_count} backends' counters, at most {} are written",
            crate::aio::MAX_BACKENDS
        )));
    }
    let mut backend_counters = Vec::with_capacity(backend_count);
    for _ in 0..backend_count {
        backend_counters.push(PublishedBackend {
            id: d.u32("backend id")?,
            tid: d.i32("backend tid")?,
            active: d.bool("backend active")?,
            counters: decode_counters(&mut d)?,
        });
    }
    let rows_total = d.u32("rows total")?;
    let rows_cut = d.u32("rows cut")?;
    let published = d.u32("rows published")? as usize;
    if published > MAX_ROWS || published as u64 + rows_cut as u64 != rows_total as u64 {
        return Err(d.garbled(format!(
            "{published} rows published and {rows_cut} cut do not add up to {rows_total} (at most {MAX_ROWS} are published)"
        )));
    }
    let mut rows = Vec::with_capacity(published);
    for _ in 0..published {
        rows.push(decode_row(&mut d)?);
    }
    Ok(AreaSample {
        sampled_at_ns,
        publishes,
        counters,
        pool: has_pool.then_some(pool),
        depth_now,
        depth_samples,
        depth_histogram,
        backends,
        backend_counters,
        rows_total,
        rows_cut,
        rows,
    })
}
