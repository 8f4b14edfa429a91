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

use crate::config::{IoConfig, IoMethodKind, MAX_IO_COMBINE_LIMIT_BLOCKS, MAX_IO_WORKERS};

use super::checker::MAX_JOBS;

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
}
