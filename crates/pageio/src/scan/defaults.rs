//! Scan's own defaults: the settings that differ from the engine's (PostgreSQL's) for
//! `pageio scan`, each applied only when the caller did not choose it.
//!
//! ```text
//!   setting                    engine default      scan default
//!   io_method                  worker (adaptive)   auto: io_uring when the kernel allows it,
//!                                                  else worker with one line saying why
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
//! The engine's own defaults stay PostgreSQL's (`worker`), which is
//! what a library user gets; `pageio verify` makes the same choice for its own reasons
//! ([`crate::verify::defaults`]).
//!
//! ```
//! use pageio::config::{IoConfig, IoMethodKind};
//! use pageio::scan::scan_config;
//!
//! // Nothing chosen: auto, 64 reads in flight.
//! let config = scan_config(IoConfig::default(), |_setting| false);
//! assert_eq!(config.io_method, IoMethodKind::Auto);
//! assert_eq!(config.effective_io_concurrency, 64);
//! // An explicit choice always wins.
//! let chosen = IoConfig { io_method: IoMethodKind::Worker, ..IoConfig::default() };
//! let config = scan_config(chosen, |setting| setting == "io_method");
//! assert_eq!(config.io_method, IoMethodKind::Worker);
//! ```

use crate::config::{IoConfig, IoMethodKind};

/// Reads a scan's stream keeps in flight when the caller does not choose
/// `effective_io_concurrency`: the default `io_max_concurrency`, measured in the module docs.
pub const SCAN_EFFECTIVE_IO_CONCURRENCY: usize = 64;

/// `config` with scan's defaults applied: `io_method` becomes `auto` and
/// `effective_io_concurrency` [`SCAN_EFFECTIVE_IO_CONCURRENCY`], each unless `chosen(name)`
/// says the caller set it (a flag, a config-file line). The in-flight count never exceeds
/// `io_max_concurrency` (a stream is capped by it), so a smaller handle budget still wins.
pub fn scan_config(mut config: IoConfig, chosen: impl Fn(&str) -> bool) -> IoConfig {
    if !chosen("io_method") {
        config.io_method = IoMethodKind::Auto;
    }
    if !chosen("effective_io_concurrency") {
        config.effective_io_concurrency = SCAN_EFFECTIVE_IO_CONCURRENCY;
    }
    config
}
