//! What `pageio advise --measure` measured on PGDATA's file system, and how the rules use it.
//!
//! The measurement itself lives outside this module (it runs the engine against the disk for
//! a bounded time); the rules only need its results. When present they replace the guesses
//! made from the device type:
//!
//! * `effective_io_concurrency` / `maintenance_io_concurrency` — by Little's law the
//!   concurrency a device needs to deliver its queue-depth-32 rate at its queue-depth-1
//!   latency is `rate(QD32) ÷ rate(QD1)`; doubled for headroom (several streams share the
//!   device and a stream's look-ahead ramps up), within 2..=[`MAX_MEASURED_EIC`];
//! * `random_page_cost` — the time of a random 8 kB read relative to a sequential one,
//!   `(sequential bytes/s ÷ 8192) ÷ random reads/s at QD32` (PostgreSQL 18 issues the random
//!   reads of bitmap and index scans ahead, so the queued rate is the one queries see),
//!   within 1.0..=4.0 (4 is PostgreSQL's default, which already assumes a mostly cached
//!   working set);
//! * `io_method` and the worker count — the fastest configuration measured.

use serde::{Deserialize, Serialize};

/// The largest `effective_io_concurrency` a measurement recommends: past a few hundred
/// I/Os in flight per stream no device measured on gains, and PostgreSQL caps it at 1000.
pub const MAX_MEASURED_EIC: u32 = 256;

/// One io_method's read rate in the measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MethodRate {
    /// `sync`, `worker` or `io_uring`.
    pub method: String,
    /// I/O workers, for `worker`.
    pub workers: Option<u32>,
    /// Bytes read per second.
    pub read_bytes_per_s: f64,
}

/// The measured I/O behaviour of PGDATA's storage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeasuredIo {
    /// Random 8 kB reads per second with one in flight.
    pub random_reads_per_s_qd1: f64,
    /// Random 8 kB reads per second with 32 in flight.
    pub random_reads_per_s_qd32: f64,
    /// Sequential read bandwidth.
    pub seq_read_bytes_per_s: f64,
    /// Read rate per io_method (and worker count).
    pub methods: Vec<MethodRate>,
    /// The fastest io_method.
    pub best_method: String,
    /// Its worker count, when it is `worker`.
    pub best_workers: Option<u32>,
    /// How long the measurement took.
    pub seconds: f64,
}

impl MeasuredIo {
    /// `effective_io_concurrency` from the queue-depth scaling (see the module header).
    pub fn effective_io_concurrency(&self) -> u32 {
        let scaling = if self.random_reads_per_s_qd1 > 0.0 {
            self.random_reads_per_s_qd32 / self.random_reads_per_s_qd1
        } else {
            1.0
        };
        ((scaling.ceil() * 2.0) as u32).clamp(2, MAX_MEASURED_EIC)
    }

    /// `random_page_cost` from the random/sequential ratio (see the module header).
    pub fn random_page_cost(&self) -> f64 {
        if self.random_reads_per_s_qd32 <= 0.0 {
            return 4.0;
        }
        let ratio = (self.seq_read_bytes_per_s / 8192.0) / self.random_reads_per_s_qd32;
        ((ratio * 10.0).round() / 10.0).clamp(1.0, 4.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(qd1: f64, qd32: f64, seq: f64) -> MeasuredIo {
        MeasuredIo {
            random_reads_per_s_qd1: qd1,
            random_reads_per_s_qd32: qd32,
            seq_read_bytes_per_s: seq,
            methods: vec![],
            best_method: "worker".into(),
            best_workers: Some(3),
            seconds: 30.0,
        }
    }

    #[test]
    fn a_disk_that_scales_gets_more_concurrency_and_a_lower_page_cost() {
        // NVMe-like: 10k/s at QD1, 300k/s at QD32, 3 GB/s sequential.
        let nvme = m(10_000.0, 300_000.0, 3e9);
        assert_eq!(nvme.effective_io_concurrency(), 60);
        assert_eq!(nvme.random_page_cost(), 1.2);
        // A single spinning disk: 150/s → 300/s, 150 MB/s.
        let hdd = m(150.0, 300.0, 150e6);
        assert_eq!(hdd.effective_io_concurrency(), 4);
        assert_eq!(hdd.random_page_cost(), 4.0);
    }
}
