//! The engine settings as command-line flags, shared by every subcommand.
//!
//! Flags carry PostgreSQL's names with dashes (`--io-method`, `--io-combine-limit`, …) and
//! accept PostgreSQL's units (`--io-combine-limit 256kB`, `--shared-buffers 1GB`). A
//! `--config FILE` in postgresql.conf syntax is applied first; flags override it. Every
//! value goes through [`pageio::IoConfig::set`], so a flag and a config line are checked
//! identically and fail with the same message.

use std::path::PathBuf;

use clap::Args;
use pageio::IoConfig;

/// Engine settings (PostgreSQL names).
#[derive(Debug, Clone, Args, Default)]
pub struct SettingsArgs {
    /// How I/O is executed: sync, worker, io_uring, or auto (io_uring when the kernel allows
    /// it, else worker, saying why) [default: worker]
    #[arg(long, value_name = "METHOD", help_heading = "Settings")]
    pub io_method: Option<String>,
    /// A fixed pool of N I/O worker threads for io_method=worker, as PostgreSQL 18 (1..32).
    /// Not set: the adaptive pool of PostgreSQL 19, between --io-min-workers and
    /// --io-max-workers [default: not set, adaptive]
    #[arg(long, value_name = "N", help_heading = "Settings")]
    pub io_workers: Option<String>,
    /// Adaptive pool: worker threads kept even when idle (1..32) [default: 2]
    #[arg(long, value_name = "N", help_heading = "Settings")]
    pub io_min_workers: Option<String>,
    /// Adaptive pool: most worker threads; it grows by one per --io-worker-launch-interval
    /// while I/O waits in the queue and no worker is idle (1..32) [default: 8]
    #[arg(long, value_name = "N", help_heading = "Settings")]
    pub io_max_workers: Option<String>,
    /// Adaptive pool: idle time after which the highest-numbered worker exits, down to
    /// --io-min-workers (e.g. 60s, 1min; a bare number is ms) [default: 60s]
    #[arg(long, value_name = "TIME", help_heading = "Settings")]
    pub io_worker_idle_timeout: Option<String>,
    /// Adaptive pool: least time between two worker launches (e.g. 100ms) [default: 100ms]
    #[arg(long, value_name = "TIME", help_heading = "Settings")]
    pub io_worker_launch_interval: Option<String>,
    /// AIO handles per backend (thread). A read stream keeps at most this many reads in
    /// flight, whatever --effective-io-concurrency asks; a completed read gives its handle
    /// back at once, even before its page is used [default: 64]
    #[arg(long, value_name = "N", help_heading = "Settings")]
    pub io_max_concurrency: Option<String>,
    /// Largest single I/O, in blocks or with a unit (e.g. 256kB) [default: 128kB]
    #[arg(long, value_name = "SIZE", help_heading = "Settings")]
    pub io_combine_limit: Option<String>,
    /// Most I/Os a read stream keeps in flight (capped by --io-max-concurrency: raise both
    /// together past 64); 0 = synchronous [default: 16]
    #[arg(long, value_name = "N", help_heading = "Settings")]
    pub effective_io_concurrency: Option<String>,
    /// Most I/Os a maintenance job keeps in flight: the writes of `checksums --enable`
    /// (PostgreSQL's maintenance_io_concurrency); 0 = one at a time [default: 16]
    #[arg(long, value_name = "N", help_heading = "Settings")]
    pub maintenance_io_concurrency: Option<String>,
    /// How far ahead of a buffered sequential scan (scan --kind seq, a table by name) to
    /// tell the kernel what will be read, with posix_fadvise(WILLNEED), so the device gets a
    /// deep queue; 0 leaves read-ahead to the kernel alone (as PostgreSQL does): slower cold,
    /// but the kernel then caches the table in large folios instead of the 4 kB pages the
    /// advice brings in, and later scans of it from the page cache run up to 40% faster.
    /// Ignored with --direct-io on [default: 64MB]
    #[arg(long, value_name = "SIZE", help_heading = "Settings")]
    pub seq_read_ahead: Option<String>,
    /// Buffer pool size (e.g. 128MB) [default: 128MB]
    #[arg(long, value_name = "SIZE", help_heading = "Settings")]
    pub shared_buffers: Option<String>,
    /// Huge pages for the buffer pool: try, on, off [default: try]
    #[arg(long, value_name = "MODE", help_heading = "Settings")]
    pub huge_pages: Option<String>,
    /// Bypass the page cache with O_DIRECT: on or off [default: off]
    #[arg(long, value_name = "on|off", help_heading = "Settings")]
    pub direct_io: Option<String>,
    /// Bound of the file-descriptor cache [default: 1000]
    #[arg(long, value_name = "N", help_heading = "Settings")]
    pub max_open_files: Option<String>,
    /// Publish this process's AIO state for `pageio aios`: on or off [default: on]
    #[arg(long, value_name = "on|off", help_heading = "Settings")]
    pub aio_publish: Option<String>,
    /// Where to publish it (pageio aios --aio-publish-dir reads another place)
    /// [default: /dev/shm]
    #[arg(long, value_name = "DIR", help_heading = "Settings")]
    pub aio_publish_dir: Option<String>,
    /// A postgresql.conf-syntax file setting any of the above (flags override it)
    #[arg(long, value_name = "FILE", help_heading = "Settings")]
    pub config: Option<PathBuf>,
}

impl SettingsArgs {
    /// The settings: defaults, then the config file, then the flags.
    pub fn to_config(&self) -> Result<IoConfig, pageio::config::ConfigError> {
        let mut c = IoConfig::default();
        if let Some(path) = &self.config {
            // Settings pageio does not use (max_connections, …) are ignored, so a cluster's
            // own postgresql.conf can be passed as it is.
            c.load_file(path)?;
        }
        let flags: [(&str, &Option<String>); 17] = [
            ("io_method", &self.io_method),
            ("io_workers", &self.io_workers),
            ("io_min_workers", &self.io_min_workers),
            ("io_max_workers", &self.io_max_workers),
            ("io_worker_idle_timeout", &self.io_worker_idle_timeout),
            ("io_worker_launch_interval", &self.io_worker_launch_interval),
            ("io_max_concurrency", &self.io_max_concurrency),
            ("io_combine_limit", &self.io_combine_limit),
            ("effective_io_concurrency", &self.effective_io_concurrency),
            (
                "maintenance_io_concurrency",
                &self.maintenance_io_concurrency,
            ),
            ("seq_read_ahead", &self.seq_read_ahead),
            ("shared_buffers", &self.shared_buffers),
            ("huge_pages", &self.huge_pages),
            ("direct_io", &self.direct_io),
            ("max_open_files", &self.max_open_files),
            ("aio_publish", &self.aio_publish),
            ("aio_publish_dir", &self.aio_publish_dir),
        ];
        for (name, value) in flags {
            if let Some(v) = value {
                c.set(name, v)?;
            }
        }
        Ok(c)
    }

    /// True when the user chose `name` (a PostgreSQL setting name), by flag or by a line of
    /// the `--config` file, so a subcommand with its own defaults must leave it alone.
    pub fn is_set(&self, name: &str) -> bool {
        let flag = match name {
            "io_method" => &self.io_method,
            "io_workers" => &self.io_workers,
            "io_min_workers" => &self.io_min_workers,
            "io_max_workers" => &self.io_max_workers,
            "io_worker_idle_timeout" => &self.io_worker_idle_timeout,
            "io_worker_launch_interval" => &self.io_worker_launch_interval,
            "io_max_concurrency" => &self.io_max_concurrency,
            "io_combine_limit" => &self.io_combine_limit,
            "effective_io_concurrency" => &self.effective_io_concurrency,
            "maintenance_io_concurrency" => &self.maintenance_io_concurrency,
            "seq_read_ahead" => &self.seq_read_ahead,
            "shared_buffers" => &self.shared_buffers,
            "huge_pages" => &self.huge_pages,
            "direct_io" => &self.direct_io,
            "max_open_files" => &self.max_open_files,
            "aio_publish" => &self.aio_publish,
            "aio_publish_dir" => &self.aio_publish_dir,
            _ => &None,
        };
        if flag.is_some() {
            return true;
        }
        let Some(path) = &self.config else {
            return false;
        };
        // The file (and its includes) has already been read successfully by to_config;
        // a failure here simply does not count.
        pageio::config::read_conf_file(path).is_ok_and(|entries| {
            entries
                .iter()
                .any(|e| pageio::config::canonical_setting_name(&e.name) == Some(name))
        })
    }
}
