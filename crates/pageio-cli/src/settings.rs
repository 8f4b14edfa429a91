//! The engine settings as command-line flags, listed once, and the settings each subcommand
//! reads.
//!
//! Flags carry PostgreSQL's names with dashes (`--io-method`, `--io-combine-limit`, …) and
//! accept PostgreSQL's units (`--io-combine-limit 256kB`, `--shared-buffers 1GB`). A
//! `--config FILE` in postgresql.conf syntax is applied first; flags override it. Every
//! value goes through [`pageio::IoConfig::set`], so a flag and a config line are checked
//! identically and fail with the same message.
//!
//! ```text
//!   SETTINGS (one row per setting: flag, value name, help, engine default)
//!   COMMAND_SETTINGS (per subcommand: the settings it reads, its own defaults)
//!        │
//!        ├─► SettingsArgs::augment_args: the subcommand's flags, each help line ending
//!        │   with that subcommand's default; a setting it does not read is no flag of it
//!        └─► SettingsArgs::build ─► SettingsBuilder: defaults ─► --config FILE ─► flags
//!                 ─► Settings { config, and where each chosen setting came from }
//! ```
//!
//! A subcommand with its own defaults (`verify`'s io_method=auto, `tables`' 32MB of
//! shared_buffers) applies them only to settings [`Settings::is_set`] says nobody chose: a
//! lookup in what the builder recorded, not a second reading of the file.

use std::collections::BTreeSet;
use std::path::PathBuf;

use clap::{Arg, ArgMatches, Args, Command, FromArgMatches};
use pageio::config::ConfigError;
use pageio::IoConfig;

/// One engine setting as a command-line flag.
#[derive(Debug)]
pub struct Setting {
    /// PostgreSQL's name, as [`IoConfig::set`] and a configuration file spell it.
    pub name: &'static str,
    /// The flag, without its dashes.
    pub flag: &'static str,
    /// What the value looks like in `--help`.
    pub value_name: &'static str,
    /// The help text, without the default.
    pub help: &'static str,
    /// The engine's default, as `--help` shows it.
    pub default: &'static str,
}

/// Every engine setting, in [`pageio::config::SETTING_NAMES`]' order.
pub const SETTINGS: [Setting; 19] = [
    Setting {
        name: "io_method",
        flag: "io-method",
        value_name: "METHOD",
        help: "How I/O is executed: sync, worker, io_uring, or auto (io_uring when the kernel \
allows it, else worker, saying why)",
        default: "worker",
    },
    Setting {
        name: "io_workers",
        flag: "io-workers",
        value_name: "N",
        help: "A fixed pool of N I/O worker threads for io_method=worker, as PostgreSQL 18 \
(1..32). Not set: the adaptive pool of PostgreSQL 19, between --io-min-workers and \
--io-max-workers",
        default: "not set, adaptive",
    },
    Setting {
        name: "io_min_workers",
        flag: "io-min-workers",
        value_name: "N",
        help: "Adaptive pool: worker threads kept even when idle (1..32)",
        default: "2",
    },
    Setting {
        name: "io_max_workers",
        flag: "io-max-workers",
        value_name: "N",
        help: "Adaptive pool: most worker threads; it grows by one per \
--io-worker-launch-interval while I/O waits in the queue and no worker is idle (1..32)",
        default: "8",
    },
    Setting {
        name: "io_worker_idle_timeout",
        flag: "io-worker-idle-timeout",
        value_name: "TIME",
        help: "Adaptive pool: idle time after which the highest-numbered worker exits, down to \
--io-min-workers (e.g. 60s, 1min; a bare number is ms)",
        default: "60s",
    },
    Setting {
        name: "io_worker_launch_interval",
        flag: "io-worker-launch-interval",
        value_name: "TIME",
        help: "Adaptive pool: least time between two worker launches (e.g. 100ms)",
        default: "100ms",
    },
    Setting {
        name: "io_max_concurrency",
        flag: "io-max-concurrency",
        value_name: "N",
        help: "AIO handles per backend (thread). A read stream keeps at most this many reads in \
flight, whatever --effective-io-concurrency asks; a completed read gives its handle back at \
once, even before its page is used",
        default: "64",
    },
    Setting {
        name: "io_combine_limit",
        flag: "io-combine-limit",
        value_name: "SIZE",
        help: "Largest single I/O, in blocks or with a unit (e.g. 256kB)",
        default: "128kB",
    },
    Setting {
        name: "effective_io_concurrency",
        flag: "effective-io-concurrency",
        value_name: "N",
        help: "Most I/Os a read stream keeps in flight (capped by --io-max-concurrency: raise \
both together past 64); 0 = synchronous",
        default: "16",
    },
    Setting {
        name: "maintenance_io_concurrency",
        flag: "maintenance-io-concurrency",
        value_name: "N",
        help: "Most I/Os a maintenance job keeps in flight: the writes of `checksums --enable` \
(PostgreSQL's maintenance_io_concurrency); 0 = one at a time",
        default: "16",
    },
    Setting {
        name: "seq_read_ahead",
        flag: "seq-read-ahead",
        value_name: "auto|SIZE",
        help: "How a buffered sequential scan reads ahead. auto: per 32MB stretch, whichever of \
the two ways below costs the scan less, measured as it goes (wall and CPU time per block; the \
kernel's way kept on a tie). A SIZE: always tell the kernel that far ahead what will be read, \
with posix_fadvise(WILLNEED), so the device gets a deep queue. 0: leave read-ahead to the \
kernel alone (as PostgreSQL does), which caches the table in large folios instead of the 4 kB \
pages the advice brings in, so later scans of it from the page cache run up to 40% faster, \
but on a virtual machine that returns free memory to its host can cost 2x cold. Ignored with \
--direct-io on",
        default: "auto",
    },
    Setting {
        name: "seq_read_in_place",
        flag: "seq-read-in-place",
        value_name: "on|off",
        help: "Read the parts of a table the page cache already holds where they lie, through \
a read-only mapping (checksums verified as the buffer pool does), instead of copying them \
into the buffer pool; off copies every page as PostgreSQL does. Sequential scans only; \
ignored with --direct-io on",
        default: "on",
    },
    Setting {
        name: "seq_map_ahead",
        flag: "seq-map-ahead",
        value_name: "auto|on|off",
        help: "While a serial sequential scan reads cached pages in place, have a helper thread map the next 32MB of them before the scan reaches them, and unmap what it is done with, so the scan does not stop to fault 4 kB pages in (the cost of a table cached in 4 kB pages, as read-ahead advice leaves it). auto: under io_method worker or io_uring on a machine with more than one CPU; on: always; off: never",
        default: "auto",
    },
    Setting {
        name: "shared_buffers",
        flag: "shared-buffers",
        value_name: "SIZE",
        help: "Buffer pool size (e.g. 128MB)",
        default: "128MB",
    },
    Setting {
        name: "huge_pages",
        flag: "huge-pages",
        value_name: "MODE",
        help: "Huge pages for the buffer pool: try, on, off",
        default: "try",
    },
    Setting {
        name: "direct_io",
        flag: "direct-io",
        value_name: "on|off",
        help: "Bypass the page cache with O_DIRECT: on or off",
        default: "off",
    },
    Setting {
        name: "max_open_files",
        flag: "max-open-files",
        value_name: "N",
        help: "Bound of the file-descriptor cache",
        default: "1000",
    },
    Setting {
        name: "aio_publish",
        flag: "aio-publish",
        value_name: "on|off",
        help: "Publish this process's AIO state for `pageio aios`: on or off",
        default: "on",
    },
    Setting {
        name: "aio_publish_dir",
        flag: "aio-publish-dir",
        value_name: "DIR",
        help: "Where to publish it (pageio aios --aio-publish-dir reads another place)",
        default: "/dev/shm",
    },
];

/// The settings every use of the engine reads: how I/O runs, the file cache, publishing.
const ENGINE: [&str; 12] = [
    "io_method",
    "io_workers",
    "io_min_workers",
    "io_max_workers",
    "io_worker_idle_timeout",
    "io_worker_launch_interval",
    "io_max_concurrency",
    "io_combine_limit",
    "direct_io",
    "max_open_files",
    "aio_publish",
    "aio_publish_dir",
];

/// The engine settings a subcommand reads, and its own defaults where they differ from the
/// engine's.
#[derive(Debug)]
pub struct CommandSettings {
    /// The subcommand, as typed (`io-bench`).
    pub command: &'static str,
    /// The settings it reads: its `--help` lists these and no others, and only these are
    /// its flags (a `--config` file may still name any).
    pub uses: &'static [&'static str],
    /// Its own defaults, as its `--help` shows them (the rest are the engine's).
    pub defaults: &'static [(&'static str, &'static str)],
}

/// `ENGINE` and then `extra`, as one list of `M` = 12 + `N` names (checked when compiled).
const fn engine_and<const N: usize, const M: usize>(extra: [&'static str; N]) -> [&'static str; M] {
    assert!(M == ENGINE.len() + N, "M must be ENGINE's length plus N");
    let mut all = [""; M];
    let mut i = 0;
    while i < ENGINE.len() {
        all[i] = ENGINE[i];
        i += 1;
    }
    let mut j = 0;
    while j < N {
        all[ENGINE.len() + j] = extra[j];
        j += 1;
    }
    all
}

/// `verify`: the engine and its read streams; verify's defaults (`pageio::verify::defaults`).
const VERIFY_USES: [&str; 13] = engine_and(["effective_io_concurrency"]);
/// `checksums`: verify's, and the write streams of `--enable`.
const CHECKSUMS_USES: [&str; 14] =
    engine_and(["effective_io_concurrency", "maintenance_io_concurrency"]);
/// `scan` and `bench`: read streams through the buffer pool, and seq-scan read-ahead.
const SCAN_USES: [&str; 18] = engine_and([
    "effective_io_concurrency",
    "seq_read_ahead",
    "seq_read_in_place",
    "seq_map_ahead",
    "shared_buffers",
    "huge_pages",
]);
/// `tables`: the catalog read through the buffer pool.
const TABLES_USES: [&str; 15] =
    engine_and(["effective_io_concurrency", "shared_buffers", "huge_pages"]);
/// `io-bench`: the engine under each of its `--methods`, keeping
/// `effective_io_concurrency` reads in flight.
const IO_BENCH_USES: [&str; 12] = [
    "io_workers",
    "io_min_workers",
    "io_max_workers",
    "io_worker_idle_timeout",
    "io_worker_launch_interval",
    "io_max_concurrency",
    "io_combine_limit",
    "effective_io_concurrency",
    "direct_io",
    "max_open_files",
    "aio_publish",
    "aio_publish_dir",
];
/// `bench`: scan's, less what its `--methods` and `--io` choose per cell (io_method,
/// io_workers, direct_io).
const BENCH_USES: [&str; 15] = [
    "io_min_workers",
    "io_max_workers",
    "io_worker_idle_timeout",
    "io_worker_launch_interval",
    "io_max_concurrency",
    "io_combine_limit",
    "max_open_files",
    "aio_publish",
    "aio_publish_dir",
    "effective_io_concurrency",
    "seq_read_ahead",
    "seq_read_in_place",
    "seq_map_ahead",
    "shared_buffers",
    "huge_pages",
];

/// verify's and `checksums`' own defaults (`pageio::verify::verify_config`).
const VERIFY_DEFAULTS: [(&str, &str); 4] = [
    ("io_method", "auto"),
    ("io_workers", "one per CPU; 32 with --direct-io on"),
    ("io_combine_limit", "128kB; 1MB with --direct-io on"),
    (
        "effective_io_concurrency",
        "16; with --direct-io on 128 reads over all jobs, at least 4 per job",
    ),
];

/// The settings each subcommand reads; a subcommand missing here takes no engine settings.
pub const COMMAND_SETTINGS: [CommandSettings; 7] = [
    CommandSettings {
        command: "verify",
        uses: &VERIFY_USES,
        defaults: &VERIFY_DEFAULTS,
    },
    CommandSettings {
        command: "checksums",
        uses: &CHECKSUMS_USES,
        defaults: &VERIFY_DEFAULTS,
    },
    CommandSettings {
        command: "scan",
        uses: &SCAN_USES,
        defaults: &[
            (
                "io_method",
                "auto for --kind seq; worker for bitmap and index (auto with one CPU)",
            ),
            (
                "effective_io_concurrency",
                "16 for --kind seq; 128 for bitmap and index",
            ),
            (
                "io_max_concurrency",
                "64, raised to --effective-io-concurrency",
            ),
        ],
    },
    CommandSettings {
        command: "bench",
        uses: &BENCH_USES,
        defaults: &[],
    },
    CommandSettings {
        command: "tables",
        uses: &TABLES_USES,
        defaults: &[("shared_buffers", "32MB")],
    },
    CommandSettings {
        command: "gen",
        uses: &ENGINE,
        defaults: &[],
    },
    CommandSettings {
        command: "io-bench",
        uses: &IO_BENCH_USES,
        defaults: &[],
    },
];

/// What `command` reads, or `None` for a subcommand that takes no engine settings.
pub fn command_settings(command: &str) -> Option<&'static CommandSettings> {
    COMMAND_SETTINGS.iter().find(|c| c.command == command)
}

/// The id of the `--config` argument.
const CONFIG_ID: &str = "config";

/// Engine settings from the command line: the flags given and `--config FILE`.
#[derive(Debug, Clone, Default)]
pub struct SettingsArgs {
    /// `(setting name, value)` for each flag given, in [`SETTINGS`]' order.
    flags: Vec<(&'static str, String)>,
    /// `--config FILE`.
    config: Option<PathBuf>,
}

impl FromArgMatches for SettingsArgs {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let mut args = SettingsArgs::default();
        args.update_from_arg_matches(matches)?;
        Ok(args)
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        // A subcommand has only the flags of the settings it reads: asking for another
        // finds no such argument, which counts as not given.
        for s in &SETTINGS {
            if let Ok(Some(value)) = matches.try_get_one::<String>(s.name) {
                self.flags.retain(|(name, _)| *name != s.name);
                self.flags.push((s.name, value.clone()));
            }
        }
        if let Ok(Some(path)) = matches.try_get_one::<PathBuf>(CONFIG_ID) {
            self.config = Some(path.clone());
        }
        Ok(())
    }
}

impl Args for SettingsArgs {
    fn augment_args(cmd: Command) -> Command {
        // clap names the subcommand before its arguments are added, so its name says
        // which settings it reads.
        let listing = command_settings(cmd.get_name());
        let mut cmd = cmd;
        for s in &SETTINGS {
            let (used, default) = match listing {
                Some(l) => (
                    l.uses.contains(&s.name),
                    l.defaults
                        .iter()
                        .find(|(name, _)| *name == s.name)
                        .map_or(s.default, |(_, d)| *d),
                ),
                None => (true, s.default),
            };
            if !used {
                continue;
            }
            cmd = cmd.arg(
                Arg::new(s.name)
                    .long(s.flag)
                    .value_name(s.value_name)
                    .help(format!("{} [default: {default}]", s.help))
                    .help_heading("Settings"),
            );
        }
        cmd.arg(
            Arg::new(CONFIG_ID)
                .long("config")
                .value_name("FILE")
                .value_parser(clap::value_parser!(PathBuf))
                .help("A postgresql.conf-syntax file setting any of the above (flags override it)")
                .help_heading("Settings"),
        )
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl SettingsArgs {
    /// The settings: defaults, then the config file, then the flags, recording which were
    /// chosen and where.
    pub fn build(&self) -> Result<Settings, ConfigError> {
        let mut builder = Settings::builder();
        if let Some(path) = &self.config {
            builder = builder.file(path)?;
        }
        for (name, value) in &self.flags {
            builder = builder.flag(name, value)?;
        }
        Ok(builder.build())
    }

    /// The settings as [`SettingsArgs::build`] makes them, for a subcommand with no
    /// defaults of its own.
    pub fn to_config(&self) -> Result<IoConfig, ConfigError> {
        Ok(self.build()?.into_config())
    }
}

/// The engine settings of a run, and which of them were chosen (the rest are defaults).
/// Nothing but a flag or a `--config` line sets an engine setting (no environment variable
/// does), so those are the two sources recorded.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The values.
    config: IoConfig,
    /// The settings chosen by a flag or a config-file line.
    chosen: BTreeSet<&'static str>,
}

impl Settings {
    /// A builder starting from the engine's defaults.
    pub fn builder() -> SettingsBuilder {
        SettingsBuilder {
            config: IoConfig::default(),
            chosen: BTreeSet::new(),
        }
    }

    /// The values.
    pub fn config(&self) -> &IoConfig {
        &self.config
    }

    /// The values, consuming the settings.
    pub fn into_config(self) -> IoConfig {
        self.config
    }

    /// True when `name` (a PostgreSQL setting name) was chosen, by a flag or a config-file
    /// line, so a subcommand with its own defaults must leave it alone.
    pub fn is_set(&self, name: &str) -> bool {
        self.chosen.contains(name)
    }
}

/// Builds [`Settings`] step by step, recording each setting chosen.
#[derive(Debug)]
pub struct SettingsBuilder {
    config: IoConfig,
    chosen: BTreeSet<&'static str>,
}

impl SettingsBuilder {
    /// Applies a postgresql.conf-syntax file (and its includes); settings pageio does not
    /// use (`max_connections`, …) are ignored, so a cluster's own file can be passed as it is.
    pub fn file(mut self, path: &std::path::Path) -> Result<Self, ConfigError> {
        let load = self.config.load_file(path)?;
        for entry in load.applied {
            if let Some(name) = pageio::config::canonical_setting_name(&entry.name) {
                self.chosen.insert(name);
            }
        }
        Ok(self)
    }

    /// Applies one flag: `name` is a PostgreSQL setting name.
    pub fn flag(mut self, name: &str, value: &str) -> Result<Self, ConfigError> {
        self.config.set(name, value)?;
        if let Some(name) = pageio::config::canonical_setting_name(name) {
            self.chosen.insert(name);
        }
        Ok(self)
    }

    /// The settings.
    pub fn build(self) -> Settings {
        Settings {
            config: self.config,
            chosen: self.chosen,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listing_holds_every_setting_the_engine_accepts_once_in_its_order() {
        let names: Vec<&str> = SETTINGS.iter().map(|s| s.name).collect();
        assert_eq!(names, pageio::config::SETTING_NAMES);
        for s in &SETTINGS {
            assert_eq!(s.flag, s.name.replace('_', "-"), "{}", s.name);
        }
    }

    #[test]
    fn every_command_listing_names_known_settings_once() {
        for c in &COMMAND_SETTINGS {
            for (i, name) in c.uses.iter().enumerate() {
                assert!(
                    SETTINGS.iter().any(|s| s.name == *name),
                    "{}: {name}",
                    c.command
                );
                assert!(!c.uses[..i].contains(name), "{}: {name} twice", c.command);
            }
            for (name, _) in c.defaults {
                assert!(
                    c.uses.contains(name),
                    "{}: default of unused {name}",
                    c.command
                );
            }
        }
    }

    #[test]
    fn the_builder_records_flags_and_file_lines_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("pageio.conf");
        std::fs::write(
            &conf,
            "max_connections = 10\nio_combine_limit = 512kB\nmax_files_per_process = 300\n",
        )
        .unwrap();
        let settings = Settings::builder()
            .file(&conf)
            .unwrap()
            .flag("io_method", "sync")
            .unwrap()
            .flag("io_combine_limit", "16")
            .unwrap()
            .build();
        assert!(settings.is_set("io_method"));
        // The flag overrides the file's line.
        assert!(settings.is_set("io_combine_limit"));
        assert_eq!(settings.config().io_combine_limit_blocks, 16);
        // Set by the file under PostgreSQL's name for it.
        assert!(settings.is_set("max_open_files"));
        assert_eq!(settings.config().max_open_files, 300);
        assert!(!settings.is_set("shared_buffers"));
        assert!(!settings.is_set("max_connections"));
        assert!(!settings.is_set("io_workers"));
    }

    #[test]
    fn a_bad_flag_value_fails_as_a_config_line_does() {
        let err = Settings::builder()
            .flag("io_method", "bogus")
            .unwrap_err()
            .to_string();
        assert!(err.contains("bogus"), "{err}");
    }
}
