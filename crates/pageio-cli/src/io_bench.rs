//! `pageio io-bench`: the engine core, end to end, on a generated relation.
//!
//! Writes a heap relation in PostgreSQL's format — `(a double precision, b text)` rows at
//! fillfactor 25, 18 rows per page, checksums set — through the AIO subsystem, then reads it
//! back once per io_method with `effective_io_concurrency` reads of `io_combine_limit`
//! blocks in flight. Every page is verified (header and checksum) in the shared completion
//! callback, so under `worker` the checksum work runs in the I/O workers.
//!
//! ```text
//!   generate ─► write_blocks (AIO, batched) ─► fsync
//!   for method in sync, worker, io_uring:
//!       [--cold: evict with POSIX_FADV_DONTNEED]
//!       keep N reads in flight (pageio::aio::IoPipeline) ─► shared callback verifies
//!       every page ─► MB/s, counters
//! ```
//!
//! Both the writes (through `Backend::write_blocks`) and the reads run on the library's one
//! I/O pipeline, so an unwritable `--dir` or a vanished file ends the run with the error
//! naming the file, never a silent spin.
//!
//! No PostgreSQL is needed; it is the command the README runs first.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use pageio::aio::{
    AioCallbacks, AioError, IoBuffer, IoCompletion, IoOp, IoPipeline, IoStatus, IoTarget,
    PipelineDriver, PipelineIo, SharedCompletion, WaitRef,
};
use pageio::config::{IoMethodKind, BLCKSZ};
use pageio::page::builder::{set_checksum, HeapTupleBuilder, PageBuilder};
use pageio::page::heap::Datum;
use pageio::page::{verify_page, ItemPointer};
use pageio::storage::{OpenMode, RelFile};
use pageio::{Aio, Backend};

use crate::settings::SettingsArgs;
use crate::CliResult;

/// Rows per page of the published data sets: `WITH (fillfactor=25)` leaves room for 18.
const ROWS_PER_PAGE: usize = 18;

/// Pages generated per write batch (1 MB): large enough to merge into full-size I/Os.
const GEN_CHUNK_BLOCKS: usize = 128;

/// Arguments of `pageio io-bench`.
#[derive(Debug, Args)]
pub struct IoBenchArgs {
    /// Size of the generated relation (e.g. 256MB, 2GB)
    #[arg(long, default_value = "256MB")]
    size: String,
    /// Directory for the relation file [default: a temporary directory, removed afterwards]
    #[arg(long)]
    dir: Option<PathBuf>,
    /// io_methods to compare, comma-separated [default: sync,worker,io_uring when available]
    #[arg(long, value_delimiter = ',')]
    methods: Vec<String>,
    /// Evict the relation from the page cache before each read (POSIX_FADV_DONTNEED)
    #[arg(long)]
    cold: bool,
    /// Print one JSON object instead of text
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    settings: SettingsArgs,
}

#[derive(Debug, serde::Serialize)]
struct MethodResult {
    io_method: String,
    direct_io: bool,
    cold: bool,
    pages: u64,
    pages_verified: u64,
    bad_pages: u64,
    elapsed_s: f64,
    mb_per_s: f64,
    ios_issued: u64,
    kernel_ios: u64,
    ios_merged: u64,
    wait_ns: u64,
    executed_by_submitter: u64,
}

/// Verifies every page in the completing thread.
struct VerifyPages {
    verified: AtomicU64,
    bad: AtomicU64,
}

impl AioCallbacks for VerifyPages {
    fn complete_shared(&self, io: &mut SharedCompletion<'_>) {
        if io.op != IoOp::Readv || io.result.status == IoStatus::Error {
            return;
        }
        let first = io.target.first_block;
        let path = io.target.path.clone();
        for i in 0..io.result.blocks_done as usize {
            let Some(block) = io.block_mut(i) else { return };
            let Ok(page) = <&[u8; BLCKSZ]>::try_from(&*block) else {
                return;
            };
            let blkno = first + i as u64;
            let v = verify_page(page, blkno as u32, true);
            if v.is_ok() {
                self.verified.fetch_add(1, Ordering::Relaxed);
            } else {
                self.bad.fetch_add(1, Ordering::Relaxed);
                io.result.status = IoStatus::Error;
                io.result.error = Some(AioError::InvalidPage {
                    path: path.clone(),
                    block: blkno,
                    detail: v.to_string(),
                });
            }
        }
    }
}

/// Runs the subcommand.
pub fn run(args: IoBenchArgs) -> CliResult {
    let base = args.settings.to_config()?;
    let size_bytes = pageio::config::parse_size_bytes("size", &args.size)?;
    let nblocks = (size_bytes / BLCKSZ).max(1) as u64;
    let tmp;
    let dir = match &args.dir {
        Some(d) => {
            std::fs::create_dir_all(d)?;
            d.clone()
        }
        None => {
            tmp = tempfile::tempdir()?;
            tmp.path().to_path_buf()
        }
    };
    let rel = RelFile::new(dir.join("16384"));
    let methods: Vec<IoMethodKind> = if args.methods.is_empty() {
        let mut m = vec![IoMethodKind::Sync, IoMethodKind::Worker];
        match pageio::aio::method::uring::probe() {
            Ok(()) => m.push(IoMethodKind::IoUring),
            Err(e) => eprintln!("pageio: skipping io_uring: {e}"),
        }
        m
    } else {
        args.methods
            .iter()
            .map(|s| s.parse())
            .collect::<Result<_, _>>()?
    };

    generate(&base, &rel, nblocks, args.json)?;
    let mut results = Vec::new();
    for method in methods {
        let mut config = base.clone();
        config.io_method = method;
        let aio = Aio::new(config)?;
        if let Some(reason) = aio.fallback_reason() {
            eprintln!("pageio: {reason}");
        }
        if args.cold {
            rel.evict_from_page_cache()?;
        }
        results.push(read_all(&aio, &rel, nblocks, args.cold)?);
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "relation_bytes": nblocks * BLCKSZ as u64,
                "io_combine_limit_blocks": base.io_combine_limit_blocks,
                "effective_io_concurrency": base.effective_io_concurrency,
                "results": results,
            }))?
        );
    } else {
        println!(
            "relation {} MB, io_combine_limit {} blocks, effective_io_concurrency {}, {}",
            (nblocks * BLCKSZ as u64) >> 20,
            base.io_combine_limit_blocks,
            base.effective_io_concurrency,
            if args.cold { "cold" } else { "warm" }
        );
        println!(
            "{:<10} {:>10} {:>9} {:>10} {:>10} {:>8} {:>10}",
            "io_method", "MB/s", "time s", "pages ok", "I/Os", "merged", "wait ms"
        );
        for r in &results {
            println!(
                "{:<10} {:>10.0} {:>9.3} {:>10} {:>10} {:>8} {:>10.1}",
                r.io_method,
                r.mb_per_s,
                r.elapsed_s,
                r.pages_verified,
                r.kernel_ios,
                r.ios_merged,
                r.wait_ns as f64 / 1e6
            );
        }
    }
    let bad: u64 = results.iter().map(|r| r.bad_pages).sum();
    Ok(if bad > 0 { 1 } else { 0 })
}

/// Writes `nblocks` heap pages of the published data set's shape, with checksums, through
/// the AIO subsystem.
fn generate(
    config: &pageio::IoConfig,
    rel: &RelFile,
    nblocks: u64,
    quiet: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut gen_config = config.clone();
    // Writing uses the worker method whatever is being compared, so generation never
    // favours one method's cache state.
    gen_config.io_method = IoMethodKind::Worker;
    gen_config.direct_io = false;
    let aio = Aio::new(gen_config)?;
    let mut backend = aio.backend()?;
    let bar = if quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(nblocks * BLCKSZ as u64)
    };
    bar.set_style(
        ProgressStyle::with_template(
            "generating {bytes}/{total_bytes} [{bar:30}] {bytes_per_sec}, eta {eta}",
        )?
        .progress_chars("=> "),
    );
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let text = [b'x'; 64];
    let mut block = 0u64;
    while block < nblocks {
        let n = (nblocks - block).min(GEN_CHUNK_BLOCKS as u64) as usize;
        let mut chunk = IoBuffer::zeroed(n * BLCKSZ);
        for (i, out) in chunk.as_mut_slice().chunks_exact_mut(BLCKSZ).enumerate() {
            let blkno = block + i as u64;
            let mut page = PageBuilder::new(0)?;
            for row in 0..ROWS_PER_PAGE {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let a = (rng >> 11) as f64 / (1u64 << 53) as f64 * 1000.0;
                let tuple = HeapTupleBuilder::new()
                    .ctid(ItemPointer {
                        block: blkno as u32,
                        offset: row as u16 + 1,
                    })
                    .build(&[Datum::Float8(a), Datum::text(&text)])?;
                page.add_item(&tuple)?;
            }
            let mut bytes = page.finish();
            set_checksum(&mut bytes, blkno as u32);
            out.copy_from_slice(&bytes);
        }
        backend.write_blocks(rel, block, chunk)?;
        block += n as u64;
        bar.inc((n * BLCKSZ) as u64);
    }
    bar.finish_and_clear();
    let (file, _) = rel.locate(aio.files(), 0, 1, OpenMode::ReadWriteCreate)?;
    file.sync_data()?;
    for segno in 1..=((nblocks.saturating_sub(1)) / pageio::storage::RELSEG_SIZE_BLOCKS as u64) {
        let (f, _) = rel.locate(
            aio.files(),
            segno * pageio::storage::RELSEG_SIZE_BLOCKS as u64,
            1,
            OpenMode::ReadWriteCreate,
        )?;
        f.sync_data()?;
    }
    Ok(())
}

/// The pipeline driver of [`read_all`]: the relation in `io_combine_limit` pieces, each read
/// into a fresh owned buffer and verified in the shared callback.
struct ReadRelation<'r> {
    rel: &'r RelFile,
    nblocks: u64,
    combine_blocks: u64,
    next_block: u64,
    verify: Arc<VerifyPages>,
    first_error: Option<AioError>,
}

impl PipelineDriver for ReadRelation<'_> {
    type Tag = ();

    fn next_io(&mut self, _backend: &mut Backend) -> Option<PipelineIo<()>> {
        if self.next_block >= self.nblocks {
            return None;
        }
        let first_block = self.next_block;
        let nblocks = (self.nblocks - first_block)
            .min(self.combine_blocks)
            .min(RelFile::blocks_in_segment(first_block) as u64);
        self.next_block += nblocks;
        Some(PipelineIo {
            first_block,
            nblocks: nblocks as u32,
            tag: (),
        })
    }

    fn stage(&mut self, backend: &mut Backend, io: &PipelineIo<()>) -> Result<WaitRef, AioError> {
        let (file, offset) = self.rel.locate(
            backend.aio().files(),
            io.first_block,
            io.nblocks,
            OpenMode::Read,
        )?;
        let target = IoTarget {
            path: self.rel.display_name().clone(),
            first_block: io.first_block,
            nblocks: io.nblocks,
        };
        let mut handle = backend.acquire()?;
        handle.set_callbacks(self.verify.clone(), &[]);
        handle.stage_read_owned(
            file,
            offset,
            IoBuffer::zeroed(io.nblocks as usize * BLCKSZ),
            target,
        )
    }

    fn complete(&mut self, _io: &PipelineIo<()>, completion: IoCompletion) -> Result<(), AioError> {
        // PARTIAL: the pipeline re-issues the rest, whose result decides.
        if completion.result.status != IoStatus::Partial
            && !completion.result.is_ok()
            && self.first_error.is_none()
        {
            self.first_error = completion.result.error;
        }
        Ok(())
    }
}

/// Reads the whole relation keeping `effective_io_concurrency` I/Os of `io_combine_limit`
/// blocks in flight, verifying every page in the shared callback.
fn read_all(
    aio: &Aio,
    rel: &RelFile,
    nblocks: u64,
    cold: bool,
) -> Result<MethodResult, Box<dyn std::error::Error>> {
    let config = aio.config().clone();
    let combine = config.io_combine_limit_blocks as u64;
    let depth = config.effective_io_concurrency.max(1);
    let verify = Arc::new(VerifyPages {
        verified: AtomicU64::new(0),
        bad: AtomicU64::new(0),
    });
    let mut backend = aio.backend()?;
    let mut reads = ReadRelation {
        rel,
        nblocks,
        combine_blocks: combine,
        next_block: 0,
        verify: verify.clone(),
        first_error: None,
    };
    let start = Instant::now();
    // A read that cannot even be staged (the file vanished) stops the run; a read that
    // fails or finds a bad page is recorded and the rest of the relation is still read.
    IoPipeline::new(depth).run(&mut backend, &mut reads)?;
    let first_error = reads.first_error;
    let elapsed = start.elapsed().as_secs_f64();
    drop(backend);
    if let Some(e) = first_error {
        if verify.bad.load(Ordering::Relaxed) == 0 {
            return Err(e.into());
        }
        eprintln!("pageio: {e}");
    }
    let c = aio.counters();
    Ok(MethodResult {
        io_method: aio.io_method().to_string(),
        direct_io: config.direct_io,
        cold,
        pages: nblocks,
        pages_verified: verify.verified.load(Ordering::Relaxed),
        bad_pages: verify.bad.load(Ordering::Relaxed),
        elapsed_s: elapsed,
        mb_per_s: (nblocks * BLCKSZ as u64) as f64 / elapsed / 1e6,
        ios_issued: c.ios_issued,
        kernel_ios: c.kernel_ios,
        ios_merged: c.ios_merged,
        wait_ns: c.wait_ns,
        executed_by_submitter: c.executed_by_submitter,
    })
}
