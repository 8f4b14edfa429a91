//! The device limit: what the disk under the data delivers, measured in the same run.
//!
//! # Problem
//!
//! "pageio is fast" means nothing on its own, and on shared or virtual disks yesterday's
//! figure is not today's. Every benchmark result is therefore also shown against the
//! device's limit measured minutes earlier on the very file being scanned.
//!
//! # Mechanism
//!
//! ```text
//!   fio installed?  ── yes ─► fio --direct=1 --readonly --ioengine=io_uring (libaio if refused)
//!        │                       seq 128 kB QD32 · rand 8 kB QD1 · rand 8 kB QD32, JSON parsed
//!        no
//!        └─► built-in probe (the library's `pageio::measure::device`, which `advise
//!            --measure` uses too): O_DIRECT preads from N threads (N = queue depth), aligned
//!            buffers, offsets sequential (shared cursor) or uniformly random, fixed duration
//! ```
//!
//! A query's device time is the shortest time the device could deliver its reads in:
//! `max(bytes / sequential bandwidth, random I/Os / random IOPS at QD32)`, where a seq scan
//! has no random I/Os. It is a lower bound: `vs_device = device time / measured time`
//! reaches 1.0 only when a scan runs at the device limit.
//!
//! # Worked example
//!
//! A bitmap scan that read 12000 pages in 11000 I/Os on a 1100 MB/s, 60000-IOPS disk:
//! `max(12000 · 8192 / 1.1e9, 11000 / 60000) = max(0.089, 0.183) = 0.183 s`; measured
//! 0.25 s → 73% of the device.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use pageio::measure::device::{probe, Pattern, ProbeFiles};
use pageio::storage::StorageError;
use serde::{Deserialize, Serialize};

/// The device's limits.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeviceLimit {
    /// How they were measured (`fio-3.33, io_uring, O_DIRECT` or `built-in O_DIRECT probe`).
    pub source: String,
    /// File the measurements read.
    pub file: String,
    /// Sequential 128 kB reads at queue depth 32, MB/s (10⁶ bytes).
    pub seq_mb_s: f64,
    /// Random 8 kB reads at queue depth 1, per second.
    pub rand_iops_qd1: f64,
    /// Random 8 kB reads at queue depth 32, per second.
    pub rand_iops_qd32: f64,
    /// Seconds per measurement.
    pub seconds: u32,
}

impl DeviceLimit {
    /// The device's shortest time for `bytes` read in `random_ios` random I/Os.
    pub fn device_seconds(&self, bytes: u64, random_ios: u64) -> f64 {
        let seq = bytes as f64 / (self.seq_mb_s.max(1e-9) * 1e6);
        let rand = random_ios as f64 / self.rand_iops_qd32.max(1e-9);
        seq.max(rand)
    }
}

/// One measurement: pattern, block size, queue depth.
#[derive(Debug, Clone, Copy)]
struct Job {
    random: bool,
    block: usize,
    depth: usize,
}

const SEQ: Job = Job {
    random: false,
    block: 128 * 1024,
    depth: 32,
};
const RAND1: Job = Job {
    random: true,
    block: 8192,
    depth: 1,
};
const RAND32: Job = Job {
    random: true,
    block: 8192,
    depth: 32,
};

/// Is fio on the PATH?
pub fn fio_available() -> bool {
    Command::new("fio")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs one fio job; returns (bytes/s, IOPS).
fn fio_job(file: &Path, job: Job, engine: &str, seconds: u32) -> Result<(f64, f64), String> {
    let out = Command::new("fio")
        .args([
            "--output-format=json",
            "--name=pageio-device",
            "--direct=1",
            "--readonly",
            "--time_based",
            "--norandommap",
        ])
        .arg(format!("--filename={}", file.display()))
        .arg(format!("--ioengine={engine}"))
        .arg(format!("--runtime={seconds}"))
        .arg(format!(
            "--rw={}",
            if job.random { "randread" } else { "read" }
        ))
        .arg(format!("--bs={}", job.block))
        .arg(format!("--iodepth={}", job.depth))
        .output()
        .map_err(|e| format!("could not run fio: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "fio ({engine}) failed on \"{}\": {}",
            file.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    // fio may print notes before the JSON document.
    let json = text.find('{').map(|i| &text[i..]).unwrap_or(&text);
    let report: serde_json::Value = serde_json::from_str(json)
        .map_err(|e| format!("could not parse fio's JSON output: {e}"))?;
    let read = &report["jobs"][0]["read"];
    let bw = read["bw_bytes"].as_f64().unwrap_or(0.0);
    let iops = read["iops"].as_f64().unwrap_or(0.0);
    if bw <= 0.0 || iops <= 0.0 {
        return Err(format!(
            "fio ({engine}) read nothing from \"{}\"",
            file.display()
        ));
    }
    Ok((bw, iops))
}

/// fio's version string.
fn fio_version() -> String {
    Command::new("fio")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|_| "fio".into())
}

/// Measures with fio (io_uring engine, libaio when io_uring is refused).
pub fn measure_fio(
    file: &Path,
    seconds: u32,
    before_each: &dyn Fn(),
) -> Result<DeviceLimit, String> {
    let mut engine = "io_uring";
    before_each();
    let seq = match fio_job(file, SEQ, engine, seconds) {
        Ok(r) => r,
        Err(_) => {
            engine = "libaio";
            before_each();
            fio_job(file, SEQ, engine, seconds)?
        }
    };
    before_each();
    let r1 = fio_job(file, RAND1, engine, seconds)?;
    before_each();
    let r32 = fio_job(file, RAND32, engine, seconds)?;
    Ok(DeviceLimit {
        source: format!("{}, {engine}, O_DIRECT", fio_version()),
        file: file.display().to_string(),
        seq_mb_s: seq.0 / 1e6,
        rand_iops_qd1: r1.1,
        rand_iops_qd32: r32.1,
        seconds,
    })
}

/// Runs one job with the library's built-in probe (`pageio::measure::device`); returns
/// (bytes/s, IOPS).
fn probe_job(files: &ProbeFiles, job: Job, seconds: u32) -> Result<(f64, f64), String> {
    let never = AtomicBool::new(false);
    let pattern = if job.random {
        Pattern::Random
    } else {
        Pattern::Sequential
    };
    let duration = Duration::from_secs(u64::from(seconds.max(1)));
    let rate =
        probe(files, pattern, job.block, job.depth, duration, &never).map_err(|e| e.to_string())?;
    Ok((rate.bytes_per_second, rate.reads_per_second))
}

/// Measures with the built-in O_DIRECT probe.
pub fn measure_probe(
    file: &Path,
    seconds: u32,
    before_each: &dyn Fn(),
) -> Result<DeviceLimit, String> {
    // Opened as the engine opens relation files under direct_io = on, so the probe and the
    // scans it is compared with accept and refuse the same file systems.
    let files = ProbeFiles::open(&[file.to_path_buf()], true).map_err(|e| match e {
        StorageError::DirectIoUnsupported { source, .. } => format!(
            "could not open \"{}\" with O_DIRECT for the device probe: {source}; the file system may not support direct I/O (ramfs does not, tmpfs only since Linux 6.6) — put the data on the disk to measure, or pass --device none",
            file.display()
        ),
        other => format!("device probe: {other}"),
    })?;
    let ctx = |e: String| format!("device probe on \"{}\": {e}", file.display());
    before_each();
    let seq = probe_job(&files, SEQ, seconds).map_err(ctx)?;
    before_each();
    let r1 = probe_job(&files, RAND1, seconds).map_err(ctx)?;
    before_each();
    let r32 = probe_job(&files, RAND32, seconds).map_err(ctx)?;
    Ok(DeviceLimit {
        source: "built-in O_DIRECT probe (pread, one thread per queue slot)".into(),
        file: file.display().to_string(),
        seq_mb_s: seq.0 / 1e6,
        rand_iops_qd1: r1.1,
        rand_iops_qd32: r32.1,
        seconds,
    })
}

/// Measures the device holding `file`: `mode` is `auto`, `fio` or `probe`.
pub fn measure(
    file: &Path,
    mode: &str,
    seconds: u32,
    before_each: &dyn Fn(),
) -> Result<DeviceLimit, String> {
    match mode {
        "fio" => measure_fio(file, seconds, before_each),
        "probe" => measure_probe(file, seconds, before_each),
        "auto" if fio_available() => measure_fio(file, seconds, before_each)
            .or_else(|_| measure_probe(file, seconds, before_each)),
        "auto" => measure_probe(file, seconds, before_each),
        other => Err(format!(
            "unknown --device \"{other}\": expected auto, fio, probe or none"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_time_is_the_larger_of_bandwidth_and_iops_bounds() {
        let d = DeviceLimit {
            source: String::new(),
            file: String::new(),
            seq_mb_s: 1100.0,
            rand_iops_qd1: 27000.0,
            rand_iops_qd32: 60000.0,
            seconds: 1,
        };
        let t = d.device_seconds(12000 * 8192, 11000);
        assert!((t - 11000.0 / 60000.0).abs() < 1e-9);
        let t = d.device_seconds(1_100_000_000, 0);
        assert!((t - 1.0).abs() < 1e-9);
    }

    #[test]
    fn probe_reads_a_real_file() {
        // /var/tmp is disk-backed on most systems; ramfs refuses O_DIRECT, which is a
        // clean error, not a failure of the probe.
        let dir = tempfile::tempdir_in("/var/tmp").expect("tempdir");
        let path = dir.path().join("f");
        std::fs::write(&path, vec![7u8; 4 << 20]).expect("write");
        match measure_probe(&path, 1, &|| {}) {
            Ok(d) => {
                assert!(d.seq_mb_s > 0.0 && d.rand_iops_qd1 > 0.0 && d.rand_iops_qd32 > 0.0);
            }
            Err(e) => assert!(e.contains("O_DIRECT"), "{e}"),
        }
        let e = measure(&path, "nonsense", 1, &|| {}).unwrap_err();
        assert!(e.contains("expected auto, fio, probe or none"), "{e}");
    }
}
