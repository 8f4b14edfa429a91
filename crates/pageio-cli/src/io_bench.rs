//! `pageio io-bench`: the engine core, end to end, on a generated relation.
//!
//! Writes a heap relation in PostgreSQL's format — the `uniform` data set's
//! `(a double precision, b text)` rows at fillfactor 25, 18 rows per page, checksums set,
//! built by `pageio::gen`'s page builder — through the AIO subsystem, then reads it
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
//! No PostgreSQL is needed. It writes only where it may: a temporary directory by default;
//! with `--dir`, a directory it creates (marked with a `.pageio-io-bench` file), never one
//! inside a PostgreSQL cluster or holding other files (see [`Workspace`]); and it removes
//! what it wrote when it finishes, also after an error such as running out of space.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use pageio::aio::{
    AioCallbacks, AioError, BlockRanges, IoBuffer, IoCompletion, IoOp, IoPipeline, IoStatus,
    PipelineDriver, PipelineIo, SharedCompletion, WaitRef,
};
use pageio::config::{IoMethodKind, BLCKSZ};
use pageio::gen::DataSet;
use pageio::page::verify_page;
use pageio::storage::{OpenMode, RelFile};
use pageio::{Aio, Backend};

use crate::settings::SettingsArgs;
use crate::CliResult;

/// File name of the generated relation (PostgreSQL's first user relfilenode).
const RELATION_FILE: &str = "16384";

/// Marker file io-bench writes into every directory it creates, so a later run (with
/// `--force`) can tell a directory it made from one holding someone else's data.
const MARKER_FILE: &str = ".pageio-io-bench";

/// Names shown when refusing a directory for its contents: enough to recognise it.
const NAMES_SHOWN: usize = 5;

/// The directory io-bench writes into, and the cleanup of what it created there.
///
/// ```text
///   --dir D, D missing                → create D, marker          → remove D at the end
///   --dir D, D empty                  → create D/pageio-io-bench-<pid>, marker → remove it
///   --dir D, D has the marker         → refuse, or with --force reuse → remove D at the end
///   --dir D inside a PostgreSQL cluster or tablespace (storage::enclosing_cluster) → refuse
///   --dir D holding anything else (relation files, other data)      → refuse
/// ```
struct Workspace {
    path: PathBuf,
}

impl Workspace {
    fn claim(dir: &std::path::Path, force: bool) -> Result<Workspace, Box<dyn std::error::Error>> {
        if let Some(cluster) = pageio::storage::enclosing_cluster(dir) {
            return Err(format!(
                "--dir {}: refusing to write inside a PostgreSQL cluster or tablespace ({}, known by its PG_VERSION or a tablespace's PG_<major>_<catversion> directory); io-bench writes relation files of its own and would overwrite the cluster's: choose a directory outside any cluster",
                dir.display(),
                cluster.display()
            )
            .into());
        }
        match std::fs::read_dir(dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(dir)
                    .map_err(|e| format!("--dir {}: could not create it: {e}", dir.display()))?;
                Workspace::mark(dir)
            }
            Err(e) => Err(format!("--dir {}: {e}", dir.display()).into()),
            Ok(entries) => {
                let names: Vec<String> = entries
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect();
                if names.is_empty() {
                    // An existing directory (a mount point, say) is not ours to fill or
                    // remove: work in a fresh directory inside it.
                    let inner = dir.join(format!("pageio-io-bench-{}", std::process::id()));
                    std::fs::create_dir(&inner).map_err(|e| {
                        format!("--dir {}: could not create it: {e}", inner.display())
                    })?;
                    return Workspace::mark(&inner);
                }
                if names.iter().any(|n| n == MARKER_FILE) {
                    let foreign: Vec<&String> = names
                        .iter()
                        .filter(|n| *n != MARKER_FILE && !is_relation_segment(n))
                        .collect();
                    if !foreign.is_empty() {
                        return Err(format!(
                            "--dir {}: holds files io-bench did not make ({}); choose a new directory",
                            dir.display(),
                            foreign.iter().take(NAMES_SHOWN).map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                        )
                        .into());
                    }
                    if !force {
                        return Err(format!(
                            "--dir {}: left by an earlier io-bench that did not finish; pass --force to reuse it, or choose a new directory",
                            dir.display()
                        )
                        .into());
                    }
                    // The workspace's drop removes the old relation now, so a shorter run
                    // does not leave a longer file's tail behind.
                    drop(Workspace {
                        path: dir.to_path_buf(),
                    });
                    std::fs::create_dir_all(dir).map_err(|e| {
                        format!("--dir {}: could not create it: {e}", dir.display())
                    })?;
                    return Workspace::mark(dir);
                }
                // A fresh directory an interrupted run made inside this one: say how to
                // reuse or remove it rather than calling it foreign data.
                if let Some(left) = names
                    .iter()
                    .find(|n| dir.join(n).join(MARKER_FILE).is_file())
                {
                    return Err(format!(
                        "--dir {}: holds {left}, left by an io-bench that did not finish; remove it, or reuse it with --dir {} --force",
                        dir.display(),
                        dir.join(left).display()
                    )
                    .into());
                }
                let relation_like = names.iter().any(|n| is_relation_like(n));
                Err(format!(
                    "--dir {}: holds {} io-bench did not make ({}); io-bench writes only into a directory it creates: give a new path (it will be created) or an empty directory",
                    dir.display(),
                    if relation_like { "relation files" } else { "files" },
                    names.iter().take(NAMES_SHOWN).cloned().collect::<Vec<_>>().join(", ")
                )
                .into())
            }
        }
    }

    fn mark(dir: &std::path::Path) -> Result<Workspace, Box<dyn std::error::Error>> {
        let workspace = Workspace {
            path: dir.to_path_buf(),
        };
        std::fs::write(
            dir.join(MARKER_FILE),
            "made by pageio io-bench; removed when it finishes\n",
        )
        .map_err(|e| format!("--dir {}: could not write into it: {e}", dir.display()))?;
        Ok(workspace)
    }
}

impl Drop for Workspace {
    fn drop(&mut self) {
        // Only what io-bench writes: the relation's segments and the marker. The directory
        // itself goes last and only if empty, so nothing else is ever deleted.
        if let Ok(entries) = std::fs::read_dir(&self.path) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if is_relation_segment(&name) || name == MARKER_FILE {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        }
        let _ = std::fs::remove_dir(&self.path);
    }
}

/// `16384`, `16384.1`, …: the segments io-bench writes.
fn is_relation_segment(name: &str) -> bool {
    let mut parts = name.splitn(2, '.');
    parts.next() == Some(RELATION_FILE)
        && parts
            .next()
            .is_none_or(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// A name PostgreSQL gives relation files: digits, optionally `_fsm`/`_vm`/`_init` and a
/// segment number.
fn is_relation_like(name: &str) -> bool {
    let base = name.split('.').next().unwrap_or("");
    let node = base
        .strip_suffix("_fsm")
        .or_else(|| base.strip_suffix("_vm"))
        .or_else(|| base.strip_suffix("_init"))
        .unwrap_or(base);
    !node.is_empty() && node.bytes().all(|b| b.is_ascii_digit())
}

/// The data set whose pages io-bench writes: the published benchmark's table shape.
const DATA_SET: DataSet = DataSet::Uniform;

/// Seed of the data set's `random()` (`pageio gen`'s default).
const DATA_SET_SEED: u64 = 42;

/// Pages generated per write batch (1 MB): large enough to merge into full-size I/Os.
const GEN_CHUNK_BLOCKS: usize = 128;

/// Arguments of `pageio io-bench`.
#[derive(Debug, Args)]
pub struct IoBenchArgs {
    /// Size of the generated relation (e.g. 256MB, 2GB)
    #[arg(long, default_value = "256MB")]
    size: String,
    /// Where to write the relation: a directory io-bench creates (or, given an existing
    /// empty directory, a fresh one inside it); removed afterwards. A directory inside a
    /// PostgreSQL cluster or holding other files is refused [default: a temporary directory]
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Reuse a directory an earlier, interrupted io-bench left behind (it holds io-bench's
    /// marker file)
    #[arg(long)]
    force: bool,
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
    // Removes what this run created when it ends, however it ends (an error such as ENOSPC
    // included); declared before the relation so it outlives every open file.
    let _workspace;
    let dir = match &args.dir {
        Some(d) => {
            let w = Workspace::claim(d, args.force)?;
            let path = w.path.clone();
            _workspace = w;
            path
        }
        None => {
            tmp = tempfile::tempdir()?;
            tmp.path().to_path_buf()
        }
    };
    let rel = RelFile::new(dir.join(RELATION_FILE));
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
    let mut out = String::new();
    if args.json {
        out = format!(
            "{}\n",
            serde_json::to_string_pretty(&serde_json::json!({
                "relation_bytes": nblocks * BLCKSZ as u64,
                "io_combine_limit_blocks": base.io_combine_limit_blocks,
                "effective_io_concurrency": base.effective_io_concurrency,
                "results": results,
            }))?
        );
    } else {
        use std::fmt::Write;
        let _ = writeln!(
            out,
            "relation {} MB, io_combine_limit {} blocks, effective_io_concurrency {}, {}",
            (nblocks * BLCKSZ as u64) >> 20,
            base.io_combine_limit_blocks,
            base.effective_io_concurrency,
            if args.cold { "cold" } else { "warm" }
        );
        let _ = writeln!(
            out,
            "{:<10} {:>10} {:>9} {:>10} {:>10} {:>8} {:>10}",
            "io_method", "MB/s", "time s", "pages ok", "I/Os", "merged", "wait ms"
        );
        for r in &results {
            let _ = writeln!(
                out,
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
    // Written, not printed: a closed stdout keeps a bad page's exit status.
    crate::write_stdout(&out)?;
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
    // Every page full: the relation holds exactly the rows of `nblocks` pages.
    let rows_per_page = DATA_SET.rows_per_page();
    let rows = nblocks.checked_mul(rows_per_page as u64).ok_or_else(|| {
        format!("--size: {nblocks} pages of rows overflow a row count; give a smaller size")
    })?;
    let mut block = 0u64;
    while block < nblocks {
        let n = (nblocks - block).min(GEN_CHUNK_BLOCKS as u64) as usize;
        let mut chunk = IoBuffer::try_zeroed(n * BLCKSZ).map_err(|_| {
            format!(
                "could not allocate a {} kB write buffer: out of memory (raise the memory limit, e.g. ulimit -v)",
                n * BLCKSZ / 1024
            )
        })?;
        for (i, out) in chunk.as_mut_slice().chunks_exact_mut(BLCKSZ).enumerate() {
            let blkno = u32::try_from(block + i as u64).map_err(|_| {
                format!(
                    "--size: block {} is past PostgreSQL's last block number; give a smaller size",
                    block + i as u64
                )
            })?;
            pageio::gen::heap::build_page(
                DATA_SET,
                DATA_SET_SEED,
                rows,
                rows_per_page,
                blkno,
                out,
            )?;
        }
        backend.write_blocks(rel, block, chunk).map_err(|e| {
            format!(
                "{e} (writing the {} MB relation: is its file system full?)",
                (nblocks * BLCKSZ as u64) >> 20
            )
        })?;
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
    ranges: BlockRanges,
    verify: Arc<VerifyPages>,
    first_error: Option<AioError>,
}

impl PipelineDriver for ReadRelation<'_> {
    type Tag = ();

    fn next_io(&mut self, _backend: &mut Backend) -> Option<PipelineIo<()>> {
        self.ranges.next()
    }

    fn stage(&mut self, backend: &mut Backend, io: &PipelineIo<()>) -> Result<WaitRef, AioError> {
        let (file, offset, target) =
            backend.locate(self.rel, io.first_block, io.nblocks, OpenMode::Read)?;
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
        ranges: BlockRanges::new(0, nblocks, combine),
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
