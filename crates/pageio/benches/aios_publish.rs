//! What publishing the AIO state for `pageio aios` (`aio_publish`) costs the I/O path:
//! the same reads with publishing on and off.
//!
//! ```text
//! cargo bench -p pageio --bench aios_publish            # ROUNDS=41 by default
//! ```
//!
//! Three workloads:
//!
//! * `small_reads_sync`: 2048 reads of 8 kB one at a time under `sync`, the relation in
//!   the page cache — the most I/Os per second, so any per-I/O cost shows most;
//! * `warm_64MB_worker`: a 64 MB relation read with `read_blocks` (every handle in flight,
//!   128 kB I/Os) under `worker`, the default method, from the page cache;
//! * `cold_64MB_worker`: the same after evicting the relation (`POSIX_FADV_DONTNEED`).
//!
//! Why a loop and not criterion: on a shared machine the noise between two criterion runs
//! a few seconds apart (±15% here) dwarfs the 2% in question. So each round builds a fresh
//! `Aio` with publishing off, then one with it on (the order alternating between rounds),
//! times one pass each, and the rounds' medians and minima are compared. Wall time counts
//! everything, including the publisher thread competing for a CPU; the reading thread's own
//! CPU time (`CLOCK_THREAD_CPUTIME_ID`) isolates what the reading thread itself pays.
//!
//! Two controls, by environment variable:
//!
//! * `AA=1` runs "on" passes with publishing off too: the ratios then show the noise;
//! * `SECOND_THREAD=1` starts one idle thread for the whole run. `sync` is the only method
//!   without threads of its own, so with publishing off a `sync` process is single-threaded
//!   and the publisher is its first other thread; this separates what a second thread costs
//!   a single-threaded process from what the publisher's work costs.
//!
//! ```text
//! cargo bench -p pageio --bench aios_publish -- small     # one workload (substring)
//! AA=1 cargo bench -p pageio --bench aios_publish
//! SECOND_THREAD=1 cargo bench -p pageio --bench aios_publish
//! ```

use std::time::Instant;

use pageio::aio::IoBuffer;
use pageio::config::{IoConfig, IoMethodKind, BLCKSZ};
use pageio::storage::RelFile;
use pageio::Aio;

/// Blocks of the relation: 64 MB, large enough that one pass is hundreds of I/Os of 128 kB,
/// small enough that a cold pass takes well under a second on an SSD.
const RELATION_BLOCKS: u64 = 8192;

/// 8 kB reads per `small_reads_sync` pass: about 3 ms, a few hundred publisher wake-ups.
const SMALL_READS: u64 = 2048;

fn aio(method: IoMethodKind, publish: bool, publish_dir: &std::path::Path) -> Aio {
    let aio = Aio::new(IoConfig {
        io_method: method,
        aio_publish: publish,
        aio_publish_dir: publish_dir.to_path_buf(),
        ..IoConfig::default()
    })
    .unwrap();
    assert_eq!(
        aio.publish_path().is_some(),
        publish,
        "{:?}",
        aio.publish_error()
    );
    aio
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write; the clock exists on every Linux.
    unsafe {
        libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts);
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// One pass of `workload` on a fresh `Aio`: (wall ns, this thread's CPU ns).
fn pass(workload: &str, rel: &RelFile, publish: bool, publish_dir: &std::path::Path) -> (u64, u64) {
    let bytes = RELATION_BLOCKS as usize * BLCKSZ;
    let method = if workload == "small_reads_sync" {
        IoMethodKind::Sync
    } else {
        IoMethodKind::Worker
    };
    let aio = aio(method, publish, publish_dir);
    let mut backend = aio.backend().unwrap();
    // Let the publisher start and the worker pool settle before timing.
    std::thread::sleep(std::time::Duration::from_millis(20));
    if workload == "cold_64MB_worker" {
        rel.evict_from_page_cache().unwrap();
    }
    let wall = Instant::now();
    let cpu = thread_cpu_ns();
    if workload == "small_reads_sync" {
        let mut buf = IoBuffer::zeroed(BLCKSZ);
        for block in 0..SMALL_READS {
            buf = backend
                .read_blocks(rel, block, std::mem::replace(&mut buf, IoBuffer::zeroed(0)))
                .unwrap();
        }
    } else {
        let buf = backend
            .read_blocks(rel, 0, IoBuffer::zeroed(bytes))
            .unwrap();
        std::hint::black_box(buf.len());
    }
    (wall.elapsed().as_nanos() as u64, thread_cpu_ns() - cpu)
}

fn median(v: &mut [u64]) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

fn main() {
    // `cargo bench` passes --bench; a filter argument picks workloads.
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(41);
    if std::env::var_os("SECOND_THREAD").is_some() {
        std::thread::spawn(|| loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        });
    }
    let data = tempfile::tempdir().unwrap();
    let publish_dir = tempfile::tempdir().unwrap();
    let rel = RelFile::new(data.path().join("16384"));
    aio(IoMethodKind::Sync, false, publish_dir.path())
        .backend()
        .unwrap()
        .write_blocks(&rel, 0, IoBuffer::zeroed(RELATION_BLOCKS as usize * BLCKSZ))
        .unwrap();
    println!("{rounds} rounds per workload, off and on alternating; ratio = on / off");
    println!(
        "{:<18} {:>12} {:>12} {:>7} {:>12} {:>12} {:>7} {:>12} {:>12} {:>7}",
        "workload",
        "off med µs",
        "on med µs",
        "ratio",
        "off min µs",
        "on min µs",
        "ratio",
        "off cpu µs",
        "on cpu µs",
        "ratio"
    );
    for workload in ["small_reads_sync", "warm_64MB_worker", "cold_64MB_worker"] {
        if !filter.is_empty() && !filter.iter().any(|f| workload.contains(f.as_str())) {
            continue;
        }
        // One untimed pass each: page cache, allocator, worker threads.
        pass(workload, &rel, false, publish_dir.path());
        pass(workload, &rel, true, publish_dir.path());
        let (mut off_wall, mut on_wall, mut off_cpu, mut on_cpu) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for round in 0..rounds {
            for publish in if round % 2 == 0 {
                [false, true]
            } else {
                [true, false]
            } {
                let really = publish && std::env::var_os("AA").is_none();
                let (wall, cpu) = pass(workload, &rel, really, publish_dir.path());
                if publish {
                    on_wall.push(wall);
                    on_cpu.push(cpu);
                } else {
                    off_wall.push(wall);
                    off_cpu.push(cpu);
                }
            }
        }
        let (off_min, on_min) = (
            *off_wall.iter().min().unwrap(),
            *on_wall.iter().min().unwrap(),
        );
        let (off_med, on_med) = (median(&mut off_wall), median(&mut on_wall));
        let (off_c, on_c) = (median(&mut off_cpu), median(&mut on_cpu));
        let us = |ns: u64| ns as f64 / 1000.0;
        println!(
            "{workload:<18} {:>12.0} {:>12.0} {:>7.3} {:>12.0} {:>12.0} {:>7.3} {:>12.0} {:>12.0} {:>7.3}",
            us(off_med),
            us(on_med),
            on_med as f64 / off_med as f64,
            us(off_min),
            us(on_min),
            on_min as f64 / off_min as f64,
            us(off_c),
            us(on_c),
            on_c as f64 / off_c as f64,
        );
    }
}
