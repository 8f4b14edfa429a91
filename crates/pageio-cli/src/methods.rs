//! `pageio methods`: which io_methods this machine can use, and why not.
//!
//! Runs the same io_uring probe the engine runs at start-up and, for a path, reports
//! whether its file system accepts O_DIRECT and with which alignment — the questions to ask
//! before choosing `--io-method` and `--direct-io`.

use std::path::PathBuf;

use clap::Args;
use pageio::storage::dio_alignment;

use crate::CliResult;

/// Arguments of `pageio methods`.
#[derive(Debug, Args)]
pub struct MethodsArgs {
    /// A directory or file whose file system to check for direct I/O
    #[arg(long, default_value = ".")]
    path: PathBuf,
    /// Print one JSON object instead of text
    #[arg(long)]
    json: bool,
}

#[derive(serde::Serialize)]
struct Report {
    sync: bool,
    worker: bool,
    io_uring: bool,
    io_uring_error: Option<String>,
    auto_chooses: &'static str,
    path: String,
    direct_io: bool,
    dio_mem_align_bytes: Option<usize>,
    dio_offset_align_bytes: Option<usize>,
    dio_alignment_from_statx: Option<bool>,
}

/// Runs the subcommand.
pub fn run(args: MethodsArgs) -> CliResult {
    let uring = pageio::aio::method::uring::probe();
    let dio = dio_alignment(&args.path)?;
    let report = Report {
        sync: true,
        worker: true,
        io_uring: uring.is_ok(),
        io_uring_error: uring.as_ref().err().map(|e| e.to_string()),
        auto_chooses: if uring.is_ok() { "io_uring" } else { "worker" },
        path: args.path.display().to_string(),
        direct_io: dio.is_some(),
        dio_mem_align_bytes: dio.map(|a| a.mem_align_bytes),
        dio_offset_align_bytes: dio.map(|a| a.offset_align_bytes),
        dio_alignment_from_statx: dio.map(|a| a.from_statx),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(0);
    }
    println!("io_method sync      available");
    println!("io_method worker    available");
    match &report.io_uring_error {
        None => println!("io_method io_uring  available"),
        Some(e) => println!("io_method io_uring  unavailable: {e}"),
    }
    println!("io_method auto      would choose {}", report.auto_chooses);
    match dio {
        Some(a) => println!(
            "direct_io on {}: supported, memory alignment {} B, offset alignment {} B ({})",
            report.path,
            a.mem_align_bytes,
            a.offset_align_bytes,
            if a.from_statx {
                "from statx"
            } else {
                "default; the kernel does not report it"
            }
        ),
        None => println!(
            "direct_io on {}: not supported by this file system; use --direct-io off",
            report.path
        ),
    }
    Ok(0)
}
