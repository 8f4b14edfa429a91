//! `pageio gen`: write the published benchmark data sets in PostgreSQL's format.
//!
//! ```text
//!   pageio gen --dataset uniform,linear_10 --rows 10000000 --out /data/sets
//!     /data/sets/uniform/16384, 16384.1, …   heap, 18 rows per page, checksums
//!     /data/sets/uniform/16385               btree on a, as CREATE INDEX builds it
//!     /data/sets/uniform/manifest.json       what `pageio scan` reads
//! ```
//!
//! Each data set is written into a hidden temporary directory next to its target
//! (`OUT/.<dataset>.partial-<pid>`) and renamed into place only when every file and the
//! manifest are written and fsynced; a failure (out of space, out of memory, an I/O error)
//! removes it, so an interrupted run never leaves partial relation files where a scan would
//! read them. `--force` replaces an existing data set, but only a directory holding nothing
//! but generator files.
//!
//! Each data set is written through the AIO subsystem with the `--io-method` and other
//! settings flags, in 1 MB batches, fsynced at the end; one progress bar on stderr covers
//! all of them. The library module `pageio::gen` explains the data and the layout.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use pageio::gen::{self, DataSet, GenOptions};
use pageio::Aio;

use crate::settings::SettingsArgs;
use crate::CliResult;

/// Arguments of `pageio gen`.
#[derive(Debug, Args)]
pub struct GenArgs {
    /// Data sets, comma-separated: uniform, linear, linear_1, linear_10, linear_25, cyclic,
    /// cyclic_1, cyclic_10, cyclic_25, pgbench_accounts, or all
    #[arg(long, value_name = "NAMES", default_value = "uniform")]
    dataset: String,
    /// Rows of the benchmark tables (10000000 is the 4.5 GB table of the published runs)
    #[arg(long, default_value_t = 1_000_000)]
    rows: u64,
    /// pgbench scale factor for pgbench_accounts (100000 rows each)
    #[arg(long, default_value_t = 1)]
    scale: u64,
    /// Seed of the random values: the same seed writes byte-identical relation files
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Output directory; each data set goes to OUT/<dataset>/
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Replace data sets that already exist in OUT
    #[arg(long)]
    force: bool,
    /// Print the manifests as JSON instead of a summary
    #[arg(long)]
    json: bool,
    /// No progress bar
    #[arg(long)]
    quiet: bool,
    #[command(flatten)]
    settings: SettingsArgs,
}

#[derive(serde::Serialize)]
struct Timed<'a> {
    #[serde(flatten)]
    manifest: &'a gen::Manifest,
    elapsed_s: f64,
    mb_per_s: f64,
}

/// Runs the subcommand.
pub fn run(args: GenArgs) -> CliResult {
    let datasets = DataSet::parse_list(&args.dataset)?;
    if datasets.is_empty() {
        return Err("no data set given: pass --dataset NAME[,NAME…] or --dataset all".into());
    }
    let opts = GenOptions {
        rows: args.rows,
        seed: args.seed,
        scale: args.scale,
        overwrite: args.force,
    };
    // Refuse before writing anything, so a typo in --out does not half-overwrite.
    if !args.force {
        for d in &datasets {
            let dir = args.out.join(d.name());
            let non_empty = std::fs::read_dir(&dir)
                .map(|mut e| e.next().is_some())
                .unwrap_or(false);
            if non_empty {
                return Err(format!(
                    "\"{}\" is not empty: pass --force to replace the data set, or choose another --out directory",
                    dir.display()
                )
                .into());
            }
        }
    }
    let aio = Aio::new(args.settings.to_config()?)?;
    if let Some(reason) = aio.fallback_reason() {
        eprintln!("pageio: {reason}");
    }
    let total_bytes: u64 = datasets
        .iter()
        .map(|d| gen::estimated_bytes(*d, &opts))
        .sum();
    let bar = if args.quiet || !std::io::stderr().is_terminal() {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(total_bytes)
    };
    bar.set_style(
        ProgressStyle::with_template(
            "{msg:>16} {bytes}/{total_bytes} [{bar:30}] {bytes_per_sec}, eta {eta}",
        )?
        .progress_chars("=> "),
    );
    let mut results = Vec::new();
    for d in &datasets {
        bar.set_message(d.name());
        let start = Instant::now();
        let manifest =
            gen::generate(&aio, &args.out, *d, &opts, &|bytes| bar.inc(bytes)).map_err(|e| {
                bar.finish_and_clear();
                match e {
                    gen::GenError::NotEmpty { path } => format!(
                        "\"{}\" is not empty: pass --force to replace the data set, or choose another --out directory",
                        path.display()
                    ),
                    gen::GenError::OutOfMemory { .. } => {
                        format!("{e}; on the command line: --rows, --scale")
                    }
                    other => other.to_string(),
                }
            })?;
        let elapsed_s = start.elapsed().as_secs_f64();
        let bytes = (manifest.heap_pages + manifest.index_pages) * pageio::page::BLCKSZ as u64;
        results.push((
            manifest,
            elapsed_s,
            bytes as f64 / elapsed_s.max(1e-9) / 1e6,
        ));
    }
    bar.finish_and_clear();
    if args.json {
        let out: Vec<Timed<'_>> = results
            .iter()
            .map(|(manifest, elapsed_s, mb_per_s)| Timed {
                manifest,
                elapsed_s: *elapsed_s,
                mb_per_s: *mb_per_s,
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!(
            "{:<17} {:>11} {:>10} {:>10} {:>6} {:>9} {:>8}",
            "dataset", "rows", "heap pg", "index pg", "level", "time s", "MB/s"
        );
        for (m, elapsed_s, mb_per_s) in &results {
            println!(
                "{:<17} {:>11} {:>10} {:>10} {:>6} {:>9.2} {:>8.0}",
                m.dataset, m.rows, m.heap_pages, m.index_pages, m.index_level, elapsed_s, mb_per_s
            );
        }
        println!(
            "written to {} (io_method {}, seed {})",
            args.out.display(),
            aio.io_method(),
            args.seed
        );
    }
    Ok(0)
}
