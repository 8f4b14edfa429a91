//! `pageio`: PostgreSQL data-directory tools on the pageio engine.
//!
//! One module per subcommand; `settings` holds the engine flags they share. Errors print as
//! one `pageio: error: …` line naming the cause and the fix, and exit with status 2 (status
//! 1 is kept for "ran fine and found something bad", as pg_checksums uses it).

mod bench;
mod gen;
mod io_bench;
mod methods;
mod scan;
mod settings;
mod verify;

use clap::{Parser, Subcommand};

/// PostgreSQL 18's asynchronous I/O, as a standalone engine and tools for data directories.
#[derive(Debug, Parser)]
#[command(name = "pageio", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once per process; boxing variants would only add noise.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Command {
    /// Which io_methods work on this machine, and why not
    Methods(methods::MethodsArgs),
    /// Generate a relation of PostgreSQL pages, then read it with every io_method,
    /// verifying every checksum, and compare throughput
    IoBench(io_bench::IoBenchArgs),
    /// Write the published benchmark data sets (uniform, linear, cyclic, pgbench_accounts)
    /// as PostgreSQL heap and btree files with checksums
    Gen(gen::GenArgs),
    /// Verify the page checksums of a stopped PostgreSQL 18 cluster, like
    /// pg_checksums --check, with asynchronous I/O on all cores
    Verify(verify::VerifyArgs),
    /// Scan a table (seq, bitmap or index) and report like EXPLAIN (ANALYZE, BUFFERS, IO)
    Scan(scan::ScanArgs),
    /// The PostgreSQL 18 AIO experiments: every scan type over a selectivity sweep, every
    /// io_method, cold and warm, with the device limit and PostgreSQL 18's own results
    Bench(bench::BenchArgs),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Methods(args) => methods::run(args),
        Command::Scan(args) => scan::run(args),
        Command::IoBench(args) => io_bench::run(args),
        Command::Gen(args) => gen::run(args),
        Command::Verify(args) => verify::run(args),
        Command::Bench(args) => bench::run(args),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("pageio: error: {e}");
            std::process::exit(2);
        }
    }
}

/// The error type of every subcommand: a message for the user.
pub type CliResult = Result<i32, Box<dyn std::error::Error>>;
