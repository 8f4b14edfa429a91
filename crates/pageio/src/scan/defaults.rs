//! Scan's own defaults: the settings that differ from the engine's (PostgreSQL's) for
//! `pageio scan`, each applied only when the caller did not choose it.
//!
//! ```text
//!   setting                    engine default      scan default
//!   io_method                  worker (adaptive)   seq scans: auto — io_uring when the kernel
//!                                                  allows it, else worker with one line
//!                                                  saying why;
//!                                                  bitmap heap and index scans: worker (with
//!                                                  two or more CPUs; else auto)
//!   effective_io_concurrency   16                  seq: 16 (SEQ_SCAN_…);
//!                                                  bitmap, index: 128 (RANDOM_SCAN_…)
//!   io_max_concurrency         64                  at least effective_io_concurrency
//! ```
//!
//! Why (every number in docs/BENCHMARKS.md, "Scan defaults", "Are the scan defaults within
//! 10% of the best flags?" and "Bitmap and index scans: worker, 128 reads in flight", on the
//! 5M-row `uniform` table):
//!
//! - **Sequential scans: io_uring, 16 reads in flight.** Each read is 128 kB and the scan
//!   runs on every CPU (`--parallel`); io_uring completes a read without a thread of its own,
//!   so the scanning threads have both cores, where the I/O workers would compete with them
//!   (a warm seq scan under worker took 1.2–2× longer). More than 16 reads of 128 kB in
//!   flight bought nothing cold (the kernel's own read-ahead keeps the device busy) and cost
//!   warm (64 took 1.06–1.10× the time of 16), most likely because the pages wait longer
//!   between their copy and their use and fall out of the CPU caches.
//! - **Bitmap heap and index scans: worker, 128 reads in flight.** Their reads are single
//!   pages, scattered. A cold buffered read of one page costs the kernel more CPU than the
//!   device takes to serve it (allocating the page cache page, inserting it, copying out), so
//!   the scan keeps more reads queued: under worker, 128 against 64 took a cold 0.1% index
//!   scan from 94–118 to 80–95 ms and a cold 1% bitmap scan from 666–787 to 539–575 ms.
//!   Under `worker` that kernel work, the copy and the checksum run on the I/O workers, on
//!   the other core, while the scan walks the index and the bitmap; the workers announce the
//!   reads queued behind them to the kernel when their own read misses the page cache, so
//!   the device sees the whole queue. Under io_uring the same work runs inside the scanning
//!   thread: warm, a bitmap scan took 266–351 ms against 195–290 under worker, an index scan
//!   47–64 against 31–42 ms. With one CPU there is no second core to move the work to, so
//!   these scans keep `auto`.
//! - **The handle budget follows.** A stream never has more reads in flight than
//!   `io_max_concurrency` handles, so scan raises it to the `effective_io_concurrency` in
//!   force unless the caller chose it; a chosen budget still caps the stream.
//!
//! Buffered I/O stays the default for every kind. Direct I/O is faster on a cold index scan
//! (it skips the page cache's own work), but then no run leaves the pages in the page cache:
//! every later scan is cold again, 2–3× slower than a warm buffered one.
//!
//! The engine's own defaults stay PostgreSQL's (`worker`, 16), which is what a library user
//! gets; `pageio verify` makes its own choice for its own reasons
//! ([`crate::verify::defaults`]).
//!
//! ```
//! use pageio::config::{IoConfig, IoMethodKind};
//! use pageio::scan::{scan_config, ScanKind};
//!
//! // Nothing chosen: a seq scan runs auto with 16 reads in flight.
//! let config = scan_config(IoConfig::default(), ScanKind::Seq, |_setting| false);
//! assert_eq!(config.io_method, IoMethodKind::Auto);
//! assert_eq!(config.effective_io_concurrency, 16);
//! assert_eq!(config.io_max_concurrency, 64);
//! // A bitmap scan keeps 128 in flight, with the handles for them.
//! let config = scan_config(IoConfig::default(), ScanKind::Bitmap, |_setting| false);
//! assert_eq!(config.effective_io_concurrency, 128);
//! assert_eq!(config.io_max_concurrency, 128);
//! // An explicit choice always wins.
//! let chosen = IoConfig { io_method: IoMethodKind::Sync, io_max_concurrency: 32, ..IoConfig::default() };
//! let config = scan_config(chosen, ScanKind::Index, |setting| {
//!     setting == "io_method" || setting == "io_max_concurrency"
//! });
//! assert_eq!(config.io_method, IoMethodKind::Sync);
//! assert_eq!(config.io_max_concurrency, 32);
//! ```

use super::ScanKind;
use crate::config::{IoConfig, IoMethodKind};

/// Reads a sequential scan's stream keeps in flight when the caller does not choose
/// `effective_io_concurrency`: PostgreSQL's 16, of up to `io_combine_limit` each (2 MB at
/// 128 kB; module docs).
pub const SEQ_SCAN_EFFECTIVE_IO_CONCURRENCY: usize = 16;

/// Reads a bitmap heap scan's or an index scan's stream keeps in flight when the caller does
/// not choose `effective_io_concurrency`: their reads are mostly single pages, scattered, and
/// a buffered read through the page cache spends longer in the kernel than the device takes,
/// so more of them must be queued to keep the device busy (module docs).
pub const RANDOM_SCAN_EFFECTIVE_IO_CONCURRENCY: usize = 128;

/// `config` with scan's defaults for a `kind` scan applied: `io_method` becomes
/// [`default_io_method`]`(kind)` and `effective_io_concurrency`
/// [`default_effective_io_concurrency`]`(kind)`, each unless `chosen(name)` says the caller
/// set it (a flag, a config-file line). Unless `io_max_concurrency` was chosen too, it is
/// raised to the `effective_io_concurrency` in force (never lowered), so that the stream can
/// keep that many reads in flight; a chosen, smaller handle budget still caps the stream.
pub fn scan_config(
    mut config: IoConfig,
    kind: ScanKind,
    chosen: impl Fn(&str) -> bool,
) -> IoConfig {
    if !chosen("io_method") {
        config.io_method = default_io_method(kind);
    }
    if !chosen("effective_io_concurrency") {
        config.effective_io_concurrency = default_effective_io_concurrency(kind);
    }
    if !chosen("io_max_concurrency") {
        config.io_max_concurrency = config
            .io_max_concurrency
            .max(config.effective_io_concurrency)
            .min(crate::config::MAX_IO_MAX_CONCURRENCY);
    }
    config
}

/// The `io_method` a `kind` scan runs when the caller chose none (see the module docs):
/// `worker` for bitmap heap and index scans on a machine with two or more CPUs, `auto`
/// otherwise.
pub fn default_io_method(kind: ScanKind) -> IoMethodKind {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    match kind {
        ScanKind::Bitmap | ScanKind::Index if cpus >= 2 => IoMethodKind::Worker,
        _ => IoMethodKind::Auto,
    }
}

/// The `effective_io_concurrency` a `kind` scan runs when the caller chose none:
/// [`SEQ_SCAN_EFFECTIVE_IO_CONCURRENCY`] for sequential scans,
/// [`RANDOM_SCAN_EFFECTIVE_IO_CONCURRENCY`] for bitmap heap and index scans.
pub fn default_effective_io_concurrency(kind: ScanKind) -> usize {
    match kind {
        ScanKind::Seq => SEQ_SCAN_EFFECTIVE_IO_CONCURRENCY,
        ScanKind::Bitmap | ScanKind::Index => RANDOM_SCAN_EFFECTIVE_IO_CONCURRENCY,
    }
}
