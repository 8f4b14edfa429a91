//! Measures the device and the engine under each io_method, then prints the recommended
//! settings with the numbers behind them.
//!
//! ```sh
//! cargo run --release -p pageio --example measure -- DIR [SECONDS] [--json]
//! cargo run --release -p pageio --example measure -- --pgdata PGDATA [SECONDS] [--json]
//! ```
//!
//! `DIR` is a directory on the file system to measure (a scratch file is written there and
//! removed, also on Ctrl-C); `--pgdata` reads a cluster's own files and writes nothing.
//! `SECONDS` bounds the whole run (default 30).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use pageio::measure::{self, MeasureOptions, MeasureTarget, Phase};

/// Set by SIGINT: the measurement stops at its next check and removes its scratch file.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

fn usage() -> ! {
    eprintln!(
        "usage: measure DIR [SECONDS] [--json]   |   measure --pgdata PGDATA [SECONDS] [--json]"
    );
    std::process::exit(2);
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut target = None;
    let mut seconds = measure::DEFAULT_SECONDS;
    let mut json = false;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--json" => json = true,
            "--pgdata" => {
                let Some(dir) = args.next() else { usage() };
                target = Some(MeasureTarget::DataDirectory(PathBuf::from(dir)));
            }
            "-h" | "--help" => usage(),
            other if target.is_none() => {
                target = Some(MeasureTarget::Directory(PathBuf::from(other)))
            }
            other => match other.parse() {
                Ok(s) => seconds = s,
                Err(_) => usage(),
            },
        }
    }
    let Some(target) = target else { usage() };

    let cancel = Arc::new(AtomicBool::new(false));
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_sigint as *const () as libc::sighandler_t);
    }
    let mut options = MeasureOptions::new(target);
    options.seconds = seconds;
    options.cancel = Some(cancel);
    options.progress = Some(Arc::new(move |phase: Phase, fraction: f64| {
        eprintln!("[{:3.0}%] {phase}", fraction * 100.0);
    }));
    // A signal handler may not do more than store to an atomic; this thread passes Ctrl-C
    // on to the measurement's cancel flag within one of its naps.
    let watched = options.cancel.clone().expect("set above");
    std::thread::spawn(move || loop {
        if INTERRUPTED.load(Ordering::Relaxed) {
            watched.store(true, Ordering::Relaxed);
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    });

    let m = match measure::run(&options) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("measure: {e}");
            std::process::exit(2);
        }
    };
    let r = measure::recommend(&m, m.effective_cpus);
    if json {
        let doc = serde_json::json!({ "measurement": m, "recommendations": r });
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).expect("serialisable")
        );
        return;
    }
    let d = &m.device;
    println!(
        "device ({}; {} MB read from {} file(s))",
        d.source,
        d.probed_bytes >> 20,
        d.files.len()
    );
    println!(
        "  sequential 128 kB, depth 32: {:8.1} MB/s ({:.0} pages/s)",
        d.sequential_bytes_per_second / 1e6,
        d.sequential_pages_per_second
    );
    for r in &d.random {
        println!(
            "  random 8 kB, depth {:3}:      {:8.0} reads/s",
            r.queue_depth, r.reads_per_second
        );
    }
    println!(
        "relation {} ({} blocks, cold, effective_io_concurrency {})",
        m.relation.relation, m.relation.blocks, m.relation.effective_io_concurrency
    );
    println!(
        "  {:10} {:>16} {:>16}",
        "io_method", "sequential", "sparse 1 in 8"
    );
    for run in &m.relation.runs {
        println!(
            "  {:10} {:9.0} pages/s {:9.0} pages/s",
            run.label, run.sequential.pages_per_second, run.sparse.pages_per_second
        );
    }
    for s in &m.relation.not_measured {
        println!("  {:10} not measured: {}", s.io_method, s.reason);
    }
    for note in &m.notes {
        println!("note: {note}");
    }
    println!(
        "took {:.1} s of {:.0} s\n",
        m.elapsed_seconds, m.budget_seconds
    );
    println!(
        "effective_io_concurrency = {}    # {}",
        r.effective_io_concurrency.value, r.effective_io_concurrency.reason
    );
    println!(
        "maintenance_io_concurrency = {}  # {}",
        r.maintenance_io_concurrency.value, r.maintenance_io_concurrency.reason
    );
    println!(
        "io_method = {}                   # {}",
        r.io_method.value, r.io_method.reason
    );
    println!(
        "io_workers = {}                  # {}",
        r.io_workers.value, r.io_workers.reason
    );
    println!(
        "random_page_cost = {:.1}         # {}",
        r.random_page_cost.value, r.random_page_cost.reason
    );
}
