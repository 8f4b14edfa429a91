//! Verify's own defaults: the settings that differ from the engine's because verify reads
//! every byte once, front to back, and nothing else.
//!
//! The engine's defaults (PostgreSQL's) are tuned for a server mixing many small reads.
//! Verify is one long sequential read per file, measured in `docs/BENCHMARKS.md` ("pageio
//! verify"), so it changes four of them, each only when the caller did not choose it:
//!
//! ```text
//!   setting                    buffered (page cache)     direct_io = on
//!   io_method                  auto                      auto
//!   io_workers                 one per CPU               DIRECT_IO_WORKERS (32)
//!   io_combine_limit           (engine's)                1 MB, the maximum
//!   effective_io_concurrency   (engine's)                DIRECT_IO_READS_IN_FLIGHT / jobs,
//!                                                        at least DIRECT_IO_MIN_PER_SCANNER
//!   io_max_concurrency         (engine's)                at least effective_io_concurrency
//! ```
//!
//! * **`io_method = auto`**: io_uring when the kernel allows it (it keeps the device busiest
//!   cold), else worker, with one line saying why ([`crate::Aio::fallback_reason`]).
//! * **one scanner per CPU** ([`default_jobs`]): scanners checksum mapped windows (and, under
//!   sync and io_uring, every read); under worker the `io_workers` threads checksum reads,
//!   and default to one per CPU too.
//! * **with `direct_io = on`**: no page cache, so no mapped reads and no kernel read-ahead;
//!   the stream alone must keep the device busy, so `io_combine_limit` is the maximum (as
//!   PostgreSQL's) and [`DIRECT_IO_READS_IN_FLIGHT`] reads are shared by the scanners; under
//!   worker, where each worker has one read in flight, `io_workers` is [`DIRECT_IO_WORKERS`].
//!
//! # Worked example
//!
//! `pageio verify --direct-io on -j 2` on a 2-CPU machine, nothing else set: io_method auto,
//! io_combine_limit 128 blocks, effective_io_concurrency 128 / 2 = 64 per scanner,
//! io_max_concurrency max(64, 64) = 64, io_workers 32. With `-j 64`: 128 / 64 = 2, raised to
//! the minimum of 4 per scanner.
//!
//! ```
//! use pageio::verify::defaults::{default_jobs, verify_config};
//! use pageio::IoConfig;
//!
//! let base = IoConfig { direct_io: true, ..IoConfig::default() };
//! let jobs = default_jobs();
//! // Nothing chosen explicitly: every default of verify applies.
//! let config = verify_config(base, jobs, |_setting| false);
//! assert_eq!(config.io_combine_limit_blocks, pageio::config::MAX_IO_COMBINE_LIMIT_BLOCKS);
//! ```

use crate::config::{IoConfig, IoMethodKind, Term, MAX_IO_COMBINE_LIMIT_BLOCKS, MAX_IO_WORKERS};

use super::checker::MAX_JOBS;
use crate::storage::{MIN_CACHED_FILES, RESERVED_FDS};

/// Reads in flight under direct I/O, over all scanners: `effective_io_concurrency` defaults
/// to this divided by the scanner count (at least [`DIRECT_IO_MIN_PER_SCANNER`]). Without the
/// page cache's read-ahead, the stream's own reads are the device's whole queue. In paired
/// cold runs on the benchmark disk, 1 MB reads gave 1.1–1.4 GB/s with 64 in flight,
/// 1.45–2.1 GB/s with 128 and 1.5–2.0 GB/s with 256 (fio at queue depth 128: 1.1–2.2 GB/s):
/// the gain stops at 128. The buffers are 1 MB each, so this is also the memory bound —
/// 128 MB, more only beyond 32 scanners, at the minimum per scanner.
pub const DIRECT_IO_READS_IN_FLIGHT: usize = 128;

/// Least `effective_io_concurrency` per scanner under direct I/O, for very many scanners:
/// below this a scanner waits on its own reads between windows.
pub const DIRECT_IO_MIN_PER_SCANNER: usize = 4;

/// `io_workers` under direct I/O with the worker method: each worker blocks in one `preadv`,
/// so the workers are the queue depth, and PostgreSQL's maximum (32) is the most we allow.
pub const DIRECT_IO_WORKERS: usize = MAX_IO_WORKERS;

/// The CPUs this process may run on (1 when unknown).
fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Scanner threads when the caller does not choose: one per CPU (the checker runs at most
/// [`MAX_JOBS`] of them).
pub fn default_jobs() -> usize {
    cpus()
}

/// `config` with verify's defaults applied for `jobs` scanners: each of `io_method`,
/// `io_workers`, `io_combine_limit`, `effective_io_concurrency` and `io_max_concurrency` is
/// changed only when `chosen(setting_name)` is false, so an explicit choice (a flag, a
/// config-file line, a caller's field) always wins.
pub fn verify_config(mut config: IoConfig, jobs: usize, chosen: impl Fn(&str) -> bool) -> IoConfig {
    if !chosen("io_method") {
        config.io_method = IoMethodKind::Auto;
    }
    if !config.direct_io {
        if !chosen("io_workers") {
            config.io_workers = cpus().clamp(1, MAX_IO_WORKERS);
        }
        return config;
    }
    if !chosen("io_combine_limit") {
        config.io_combine_limit_blocks = MAX_IO_COMBINE_LIMIT_BLOCKS;
    }
    if !chosen("effective_io_concurrency") {
        config.effective_io_concurrency = direct_io_reads_per_scanner(jobs);
    }
    if !chosen("io_workers") {
        config.io_workers = DIRECT_IO_WORKERS;
    }
    if !chosen("io_max_concurrency") {
        // Every read in flight holds a handle: fewer handles than reads would cap the queue.
        config.io_max_concurrency = config
            .io_max_concurrency
            .max(config.effective_io_concurrency);
    }
    config
}

/// Ring descriptors one `pageio verify` scanner holds under io_uring (its backend's ring).
pub const RINGS_PER_CHECK_JOB: usize = 1;

/// Ring descriptors one `checksums --enable` job holds under io_uring: its reading and its
/// writing backend each have a ring.
pub const RINGS_PER_ENABLE_JOB: usize = 2;

/// `--jobs` asks for more threads than the descriptor limit leaves room for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} {requested}: {running} threads{} under io_uring hold {} ring descriptors ({per_job} each), which with the {RESERVED_FDS} descriptors reserved for the process and a file cache of at least {MIN_CACHED_FILES} files is more than RLIMIT_NOFILE {limit} allows: at most {allowed} jobs fit", crate::config::Term::Jobs, if *requested > *running { " (the most that run)".to_string() } else { String::new() }, running * per_job)]
pub struct TooManyJobs {
    /// The `--jobs` asked for.
    pub requested: usize,
    /// The threads that would run (at most [`MAX_JOBS`]).
    pub running: usize,
    /// Ring descriptors per thread.
    pub per_job: usize,
    /// The soft `RLIMIT_NOFILE`.
    pub limit: u64,
    /// The most jobs the limit leaves room for (0 when not even one fits).
    pub allowed: usize,
}

impl TooManyJobs {
    /// The fix: fewer jobs, the worker method, or a higher limit.
    pub fn hint(&self) -> String {
        let needed = RESERVED_FDS + MIN_CACHED_FILES + (self.running * self.per_job) as u64;
        if self.allowed == 0 {
            format!(
                "use {} worker, or raise the limit with `ulimit -n {needed}`",
                Term::Setting("io_method")
            )
        } else {
            format!(
                "give {} {} or fewer, use {} worker, or raise the limit with `ulimit -n {needed}`",
                Term::Jobs,
                self.allowed,
                Term::Setting("io_method")
            )
        }
    }
}

/// Fits `requested` jobs of `per_job` ring descriptors each into the descriptor `limit`:
/// when io_uring may run (`io_method` auto or io_uring), the rings come out of the same
/// limit as the file cache, so `max_open_files` is lowered to leave them room (otherwise a
/// large cluster fills the cache and a ring or a file finds no descriptor mid-run); when not
/// even `MIN_CACHED_FILES` (8) files would remain, the jobs are refused, naming `--jobs` and
/// how many fit.
pub fn fit_jobs_to_descriptors(
    config: &mut IoConfig,
    requested: usize,
    per_job: usize,
    limit: u64,
) -> Result<(), TooManyJobs> {
    if !matches!(config.io_method, IoMethodKind::Auto | IoMethodKind::IoUring) {
        return Ok(());
    }
    let running = requested.clamp(1, MAX_JOBS);
    let rings = (running as u64).saturating_mul(per_job as u64);
    let room = limit.saturating_sub(RESERVED_FDS).saturating_sub(rings);
    if room < MIN_CACHED_FILES {
        let spare = limit.saturating_sub(RESERVED_FDS + MIN_CACHED_FILES);
        let allowed = usize::try_from(spare / per_job.max(1) as u64)
            .unwrap_or(usize::MAX)
            .min(MAX_JOBS);
        return Err(TooManyJobs {
            requested,
            running,
            per_job,
            limit,
            allowed,
        });
    }
    let room = usize::try_from(room).unwrap_or(usize::MAX);
    config.max_open_files = config.max_open_files.min(room);
    Ok(())
}

/// `effective_io_concurrency` per scanner under direct I/O: [`DIRECT_IO_READS_IN_FLIGHT`]
/// shared by the scanners (at most [`MAX_JOBS`] of them run), at
/// least [`DIRECT_IO_MIN_PER_SCANNER`].
pub fn direct_io_reads_per_scanner(jobs: usize) -> usize {
    DIRECT_IO_READS_IN_FLIGHT
        .div_ceil(jobs.clamp(1, MAX_JOBS))
        .max(DIRECT_IO_MIN_PER_SCANNER)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nothing_chosen(_: &str) -> bool {
        false
    }

    #[test]
    fn buffered_defaults_change_only_the_method_and_workers() {
        let engine = IoConfig::default();
        let config = verify_config(engine.clone(), 2, nothing_chosen);
        assert_eq!(config.io_method, IoMethodKind::Auto);
        assert_eq!(config.io_workers, cpus().clamp(1, MAX_IO_WORKERS));
        assert_eq!(
            config.io_combine_limit_blocks,
            engine.io_combine_limit_blocks
        );
        assert_eq!(
            config.effective_io_concurrency,
            engine.effective_io_concurrency
        );
        assert_eq!(config.io_max_concurrency, engine.io_max_concurrency);
    }

    #[test]
    fn direct_io_defaults_share_the_reads_in_flight_among_scanners() {
        let base = IoConfig {
            direct_io: true,
            ..IoConfig::default()
        };
        let config = verify_config(base.clone(), 2, nothing_chosen);
        assert_eq!(config.io_method, IoMethodKind::Auto);
        assert_eq!(config.io_combine_limit_blocks, 128);
        assert_eq!(config.effective_io_concurrency, 64);
        assert_eq!(config.io_max_concurrency, 64);
        assert_eq!(config.io_workers, 32);
        // Many scanners: 128 / 64 = 2, raised to the minimum; the handles follow.
        let config = verify_config(base.clone(), 64, nothing_chosen);
        assert_eq!(config.effective_io_concurrency, DIRECT_IO_MIN_PER_SCANNER);
        assert_eq!(config.io_max_concurrency, base.io_max_concurrency);
        // One scanner takes the whole queue, and gets a handle for every read.
        let config = verify_config(base.clone(), 1, nothing_chosen);
        assert_eq!(config.effective_io_concurrency, 128);
        assert_eq!(config.io_max_concurrency, 128);
        // More scanners than run share as many as run.
        assert_eq!(direct_io_reads_per_scanner(1000), DIRECT_IO_MIN_PER_SCANNER);
        assert_eq!(direct_io_reads_per_scanner(0), 128);
        assert_eq!(direct_io_reads_per_scanner(3), 43);
    }

    #[test]
    fn chosen_settings_are_left_alone() {
        let base = IoConfig {
            direct_io: true,
            io_method: IoMethodKind::Sync,
            io_workers: 5,
            io_combine_limit_blocks: 16,
            effective_io_concurrency: 7,
            io_max_concurrency: 9,
            ..IoConfig::default()
        };
        let config = verify_config(base.clone(), 2, |_| true);
        assert_eq!(config, base);
        // Only the one chosen stays; the rest take verify's defaults.
        let config = verify_config(base, 2, |name| name == "effective_io_concurrency");
        assert_eq!(config.effective_io_concurrency, 7);
        assert_eq!(config.io_method, IoMethodKind::Auto);
        assert_eq!(config.io_max_concurrency, 9);
        assert_eq!(config.io_combine_limit_blocks, 128);
        assert_eq!(config.io_workers, 32);
    }

    #[test]
    fn jobs_are_fitted_to_the_descriptor_limit_and_refused_naming_jobs() {
        let mut config = IoConfig {
            io_method: IoMethodKind::IoUring,
            ..IoConfig::default()
        };
        // 1024 descriptors, 64 enable jobs: 128 rings, so the cache keeps 1024 - 64 - 128.
        fit_jobs_to_descriptors(&mut config, 64, RINGS_PER_ENABLE_JOB, 1024).unwrap();
        assert_eq!(config.max_open_files, 832);
        // 100 descriptors: 1000 asked, 64 would run, 64 rings; (100 - 64 - 8) / 1 = 28 fit.
        let e = fit_jobs_to_descriptors(&mut config, 1000, RINGS_PER_CHECK_JOB, 100).unwrap_err();
        assert_eq!(e.allowed, 28);
        assert_eq!(
            e.to_string(),
            "a thread count of 1000: 64 threads (the most that run) under io_uring hold 64 ring descriptors (1 each), which with the 64 descriptors reserved for the process and a file cache of at least 8 files is more than RLIMIT_NOFILE 100 allows: at most 28 jobs fit"
        );
        assert_eq!(
            e.hint(),
            "give a thread count of 28 or fewer, use io_method worker, or raise the limit with `ulimit -n 136`"
        );
        let e = fit_jobs_to_descriptors(&mut config, 20, RINGS_PER_ENABLE_JOB, 80).unwrap_err();
        assert_eq!((e.allowed, e.running), (4, 20));
        // The worker method holds no rings: nothing to fit.
        let mut worker = IoConfig::default();
        fit_jobs_to_descriptors(&mut worker, 64, RINGS_PER_ENABLE_JOB, 100).unwrap();
        assert_eq!(worker.max_open_files, IoConfig::default().max_open_files);
    }
}
