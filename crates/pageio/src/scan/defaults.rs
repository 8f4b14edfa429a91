//! Scan's own defaults: the settings that differ from the engine's (PostgreSQL's) for
//! `pageio scan`, each applied only when the caller did not choose it.
//!
//! ```text
//!   setting      engine default        scan default
//!   io_method    worker (adaptive)     auto: io_uring when the kernel allows it, else
//!                                      worker with one line saying why
//! ```
//!
//! Why: measured on the 5M-row `uniform` table (docs/BENCHMARKS.md, "Scan defaults"), every
//! scan kind, cold and warm, ran as fast or faster under io_uring than under the adaptive
//! worker pool — a cold 1% bitmap heap scan 1.15–1.2×, whose reads reach the device as soon
//! as they are found, while a worker blocks in one `preadv` at a time and the pool starts at
//! `io_min_workers` (2). The engine's own default stays PostgreSQL's (`worker`), which is
//! what a library user gets; `pageio verify` makes the same choice for its own reasons
//! ([`crate::verify::defaults`]).
//!
//! ```
//! use pageio::config::{IoConfig, IoMethodKind};
//! use pageio::scan::scan_config;
//!
//! // Nothing chosen: auto.
//! let config = scan_config(IoConfig::default(), |_setting| false);
//! assert_eq!(config.io_method, IoMethodKind::Auto);
//! // An explicit choice always wins.
//! let chosen = IoConfig { io_method: IoMethodKind::Worker, ..IoConfig::default() };
//! let config = scan_config(chosen, |setting| setting == "io_method");
//! assert_eq!(config.io_method, IoMethodKind::Worker);
//! ```

use crate::config::{IoConfig, IoMethodKind};

/// `config` with scan's defaults applied: `io_method` becomes `auto` unless
/// `chosen("io_method")` says the caller set it (a flag, a config-file line).
pub fn scan_config(mut config: IoConfig, chosen: impl Fn(&str) -> bool) -> IoConfig {
    if !chosen("io_method") {
        config.io_method = IoMethodKind::Auto;
    }
    config
}
