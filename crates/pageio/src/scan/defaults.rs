//! Scan's own defaults: the settings that differ from the engine's (PostgreSQL's) for
//! `pageio scan`, each applied only when the caller did not choose it.
//!
//! ```text
//!   setting                    engine default      scan default
//!   io_method                  worker (adaptive)   seq and bitmap scans: auto — io_uring when
//!                                                  the kernel allows it, else worker with one
//!                                                  line saying why;
//!                                                  index scans: worker (with two or more
//!                                                  CPUs; else auto)
//!   effective_io_concurrency   16                  SCAN_EFFECTIVE_IO_CONCURRENCY (64)
//! ```
//!
//! Why: measured on the 5M-row `uniform` table (docs/BENCHMARKS.md, "Scan defaults"), every
//! scan kind, cold and warm, ran as fast or faster under io_uring than under the adaptive
//! worker pool — a cold 1% bitmap heap scan 1.15–1.2×, whose reads reach the device as soon
//! as they are found, while a worker blocks in one `preadv` at a time and the pool starts at
//! `io_min_workers` (2). With 64 reads in flight instead of 16 the same bitmap scan went
//! from 0.80–0.97 to 0.96–1.10 of fio's random-read rate at queue depth 32, and cold seq and
//! index scans were no slower (docs/BENCHMARKS.md, "Scan defaults"); 64 is also the default
//! `io_max_concurrency`, the most one stream can have in flight without raising it too.
//!
//! Index scans are the exception. An index scan does little per heap page (one tuple, often),
//! so the per-read work of completing it — the copy out of the page cache and the checksum —
//! is a large share of its time. Under `worker` that work runs on the I/O workers, on another
//! core, while the scan walks the index; under io_uring a read found in the page cache is
//! completed inside the scanning thread. Measured (docs/BENCHMARKS.md, "Are the scan defaults
//! within 10% of the best flags?"), a warm 0.1% index scan took 32–37 ms under worker against
//! 40–48 ms under io_uring, in two sessions, and the cold one was no slower (111 against
//! 119–127 ms); the workers' read-ahead advice keeps their cold reads queued at the device.
//! With one CPU there is no second core to move the work to, so index scans keep `auto`.
//!
//! The engine's own defaults stay PostgreSQL's (`worker`), which is
//! what a library user gets; `pageio verify` makes the same choice for its own reasons
//! ([`crate::verify::defaults`]).
//!
//! ```
//! use pageio::config::{IoConfig, IoMethodKind};
//! use pageio::scan::{scan_config, ScanKind};
//!
//! // Nothing chosen: auto, 64 reads in flight.
//! let config = scan_config(IoConfig::default(), ScanKind::Seq, |_setting| false);
//! assert_eq!(config.io_method, IoMethodKind::Auto);
//! assert_eq!(config.effective_io_concurrency, 64);
//! // An explicit choice always wins.
//! let chosen = IoConfig { io_method: IoMethodKind::Sync, ..IoConfig::default() };
//! let config = scan_config(chosen, ScanKind::Index, |setting| setting == "io_method");
//! assert_eq!(config.io_method, IoMethodKind::Sync);
//! ```

use super::ScanKind;
use crate::config::{IoConfig, IoMethodKind};

/// Reads a scan's stream keeps in flight when the caller does not choose
/// `effective_io_concurrency`: the default `io_max_concurrency`, measured in the module docs.
pub const SCAN_EFFECTIVE_IO_CONCURRENCY: usize = 64;

/// `config` with scan's defaults for a `kind` scan applied: `io_method` becomes
/// [`default_io_method`]`(kind)` and `effective_io_concurrency`
/// [`SCAN_EFFECTIVE_IO_CONCURRENCY`], each unless `chosen(name)` says the caller set it (a
/// flag, a config-file line). The in-flight count never exceeds `io_max_concurrency` (a
/// stream is capped by it), so a smaller handle budget still wins.
pub fn scan_config(
    mut config: IoConfig,
    kind: ScanKind,
    chosen: impl Fn(&str) -> bool,
) -> IoConfig {
    if !chosen("io_method") {
        config.io_method = default_io_method(kind);
    }
    if !chosen("effective_io_concurrency") {
        config.effective_io_concurrency = SCAN_EFFECTIVE_IO_CONCURRENCY;
    }
    config
}

/// The `io_method` a `kind` scan runs when the caller chose none (see the module docs):
/// `worker` for index scans on a machine with two or more CPUs, `auto` otherwise.
pub fn default_io_method(kind: ScanKind) -> IoMethodKind {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    match kind {
        ScanKind::Index if cpus >= 2 => IoMethodKind::Worker,
        _ => IoMethodKind::Auto,
    }
}
