//! From a [`Measurement`] to settings, each with the numbers behind it.
//!
//! | setting | rule |
//! |---|---|
//! | `effective_io_concurrency` | the smallest measured queue depth whose random 8 kB rate reaches 90% of the depth-32 rate |
//! | `maintenance_io_concurrency` | the smallest depth reaching 97% of the best rate at any depth, and never below `effective_io_concurrency` |
//! | `io_method`, `io_workers` | each run's score is the geometric mean of its sequential and sparse rates relative to the best of each; the simplest run within 5% of the best score: `worker` with 3 workers, then more workers, then `io_uring`, then `sync` |
//! | `random_page_cost` | sequential pages/s ÷ random depth-1 reads/s, clamped to [1.0, 4.0] |
//!
//! Worked example (a 2-core virtual machine): depth 1 = 2600 reads/s, 8 = 14000, 16 =
//! 21000, 32 = 22500 → 90% of 22500 is 20250, first reached at 16 → `effective_io_concurrency
//! = 16`; sequential 420 MB/s = 51270 pages/s ÷ 2600 = 19.7 → `random_page_cost = 4.0`.

use serde::Serialize;

use super::{Measurement, MethodRun};
use crate::config::IoMethodKind;

/// Share of the depth-32 random rate that `effective_io_concurrency` must reach. Past the
/// knee of the rate-vs-depth curve each doubling of the depth buys less than the last ~10%,
/// while every I/O in flight costs a pinned buffer per backend; PostgreSQL's own guidance
/// ("the number of concurrent requests the storage can usefully serve") is the knee.
/// Depth 32 is the reference because it saturates all but the largest NVMe arrays.
pub const EIC_KNEE_FRACTION: f64 = 0.90;

/// Share of the best rate (at any depth) that `maintenance_io_concurrency` must reach:
/// maintenance work (VACUUM, CREATE INDEX, recovery prefetch) runs in few processes at a
/// time and may take nearly the whole device, so it is set close to the peak.
pub const MAINTENANCE_PEAK_FRACTION: f64 = 0.97;

/// Two methods whose rates differ by less than this share are treated as equal: repeated
/// cold reads on shared and virtual disks vary by a few percent between runs, and a setting
/// changed from its default must earn its keep by more than the noise.
pub const METHOD_TIE_FRACTION: f64 = 0.05;

/// PostgreSQL 18's default `io_workers`.
pub const DEFAULT_IO_WORKERS: usize = 3;

/// PostgreSQL 18's defaults of `effective_io_concurrency` and `maintenance_io_concurrency`,
/// used when the depths they are chosen from were not measured.
pub const DEFAULT_IO_CONCURRENCY: usize = 16;

/// Most I/O workers recommended per effective CPU: the measurement runs one stream, while a
/// server's backends compete with the workers for the same CPUs, so a count that only a
/// lone stream profits from is capped.
pub const MAX_IO_WORKERS_PER_CPU: usize = 4;

/// Lower bound of `random_page_cost`: PostgreSQL's documentation asks for
/// `random_page_cost >= seq_page_cost` (1.0), since the planner's model has no notion of a
/// random read being cheaper than a sequential one.
pub const RANDOM_PAGE_COST_MIN: f64 = 1.0;

/// Upper bound of `random_page_cost`: PostgreSQL's default, 4.0, which its documentation
/// derives from random reads being ~40× slower than sequential on disks while ~90% of them
/// are cache hits. A measured device ratio above 4 (every cold device read, SSDs included,
/// is slower at depth 1 than streaming) would ignore that caching, and drive the planner
/// away from index scans that the cache makes cheap.
pub const RANDOM_PAGE_COST_MAX: f64 = 4.0;

/// A recommended value and the numbers it was chosen from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recommendation<T> {
    /// The value to set.
    pub value: T,
    /// Why, with the measured numbers.
    pub reason: String,
}

/// The settings chosen from a measurement.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recommendations {
    /// `effective_io_concurrency`.
    pub effective_io_concurrency: Recommendation<usize>,
    /// `maintenance_io_concurrency`.
    pub maintenance_io_concurrency: Recommendation<usize>,
    /// `io_method`.
    pub io_method: Recommendation<IoMethodKind>,
    /// `io_workers` (used under `io_method = worker`).
    pub io_workers: Recommendation<usize>,
    /// `random_page_cost` (with `seq_page_cost = 1.0`).
    pub random_page_cost: Recommendation<f64>,
}

/// Chooses settings from `m`. `effective_cpus` is the CPUs the server may use (a
/// container's limit), which caps the worker count.
pub fn recommend(m: &Measurement, effective_cpus: usize) -> Recommendations {
    let (effective_io_concurrency, maintenance_io_concurrency) = concurrency(m);
    let (io_method, io_workers) = method(m, effective_cpus.max(1));
    Recommendations {
        effective_io_concurrency,
        maintenance_io_concurrency,
        io_method,
        io_workers,
        random_page_cost: random_page_cost(m),
    }
}

fn concurrency(m: &Measurement) -> (Recommendation<usize>, Recommendation<usize>) {
    let mut rates: Vec<(usize, f64)> = m
        .device
        .random
        .iter()
        .filter(|r| r.reads_per_second > 0.0)
        .map(|r| (r.queue_depth, r.reads_per_second))
        .collect();
    rates.sort_by_key(|r| r.0);
    let qd32 = m.device.random_reads_per_second_qd32;
    let curve = rates
        .iter()
        .map(|(d, r)| format!("{d}: {r:.0}"))
        .collect::<Vec<_>>()
        .join(", ");
    if qd32 <= 0.0 || rates.is_empty() {
        let reason =
            "random reads at depth 32 were not measured: PostgreSQL 18's default".to_string();
        return (
            Recommendation {
                value: DEFAULT_IO_CONCURRENCY,
                reason: reason.clone(),
            },
            Recommendation {
                value: DEFAULT_IO_CONCURRENCY,
                reason,
            },
        );
    }
    let knee_target = EIC_KNEE_FRACTION * qd32;
    let (eic, eic_rate) = rates
        .iter()
        .copied()
        .find(|&(_, r)| r >= knee_target)
        .unwrap_or((32, qd32));
    let eic_reason = format!(
        "random 8 kB reads/s by queue depth ({curve}): depth {eic} ({eic_rate:.0}/s) is the smallest reaching {:.0}% of depth 32 ({qd32:.0}/s); deeper queues add less than {:.0}%",
        EIC_KNEE_FRACTION * 100.0,
        (1.0 - EIC_KNEE_FRACTION) * 100.0
    );
    let (best_depth, best) =
        rates
            .iter()
            .copied()
            .fold((0, 0.0f64), |acc, r| if r.1 > acc.1 { r } else { acc });
    let peak_target = MAINTENANCE_PEAK_FRACTION * best;
    let (peak_depth, peak_rate) = rates
        .iter()
        .copied()
        .find(|&(_, r)| r >= peak_target)
        .unwrap_or((best_depth, best));
    let maintenance = peak_depth.max(eic);
    let maintenance_reason = if maintenance == peak_depth {
        format!(
            "depth {peak_depth} ({peak_rate:.0}/s) is the smallest reaching {:.0}% of the best measured rate ({best:.0}/s at depth {best_depth}); maintenance runs in few processes and may use the whole device",
            MAINTENANCE_PEAK_FRACTION * 100.0
        )
    } else {
        format!(
            "the device peaks early (depth {peak_depth} reaches {:.0}% of the best, {best:.0}/s), so maintenance keeps effective_io_concurrency's {eic}",
            MAINTENANCE_PEAK_FRACTION * 100.0
        )
    };
    (
        Recommendation {
            value: eic,
            reason: eic_reason,
        },
        Recommendation {
            value: maintenance,
            reason: maintenance_reason,
        },
    )
}

/// Simplicity rank of a run, lower first (see the module header): `worker` with the
/// default 3 workers changes nothing; more workers change one setting; `io_uring` needs the
/// kernel's permission (io_uring_disabled, seccomp, RLIMIT_MEMLOCK) and a ring and
/// descriptors per backend; `sync` gives up asynchrony, which one cold sequential stream
/// (helped by the kernel's read-ahead) hides but concurrent index and bitmap scans do not.
fn simplicity_rank(run: &MethodRun) -> (u8, usize) {
    match (run.io_method, run.io_workers) {
        (IoMethodKind::Worker, Some(DEFAULT_IO_WORKERS)) => (0, 0),
        (IoMethodKind::Worker, workers) => (1, workers.unwrap_or(DEFAULT_IO_WORKERS)),
        (IoMethodKind::IoUring, _) => (2, 0),
        _ => (3, 0),
    }
}

/// A run's score: the geometric mean of its sequential and sparse rates, each relative to
/// the best run of that pattern (1.0 = the best at both). The geometric mean, as benchmark
/// suites average ratios, so a method cannot buy a poor random rate with a great
/// sequential one.
fn score(run: &MethodRun, best_sequential: f64, best_sparse: f64) -> f64 {
    let seq = run.sequential.pages_per_second / best_sequential.max(f64::MIN_POSITIVE);
    let sparse = run.sparse.pages_per_second / best_sparse.max(f64::MIN_POSITIVE);
    (seq * sparse).sqrt()
}

fn method(
    m: &Measurement,
    effective_cpus: usize,
) -> (Recommendation<IoMethodKind>, Recommendation<usize>) {
    let cap = (effective_cpus * MAX_IO_WORKERS_PER_CPU).max(DEFAULT_IO_WORKERS);
    let runs: Vec<&MethodRun> = m
        .relation
        .runs
        .iter()
        .filter(|r| r.sequential.pages_per_second > 0.0 && r.sparse.pages_per_second > 0.0)
        .filter(|r| r.io_method != IoMethodKind::Worker || r.io_workers.unwrap_or(0) <= cap)
        .collect();
    let skipped: String = m
        .relation
        .not_measured
        .iter()
        .map(|s| format!("; {} not measured: {}", s.io_method, s.reason))
        .collect();
    let best_sequential = runs
        .iter()
        .map(|r| r.sequential.pages_per_second)
        .fold(0.0, f64::max);
    let best_sparse = runs
        .iter()
        .map(|r| r.sparse.pages_per_second)
        .fold(0.0, f64::max);
    let scored: Vec<(&MethodRun, f64)> = runs
        .iter()
        .map(|&r| (r, score(r, best_sequential, best_sparse)))
        .collect();
    let Some(&(fastest, best_score)) = scored.iter().max_by(|a, b| a.1.total_cmp(&b.1)) else {
        let reason = format!("no io_method run was measured: PostgreSQL 18's default{skipped}");
        return (
            Recommendation {
                value: IoMethodKind::Worker,
                reason: reason.clone(),
            },
            Recommendation {
                value: DEFAULT_IO_WORKERS,
                reason,
            },
        );
    };
    let floor = best_score * (1.0 - METHOD_TIE_FRACTION);
    let (chosen, chosen_score) = scored
        .iter()
        .copied()
        .filter(|&(_, sc)| sc >= floor)
        .min_by_key(|(r, _)| simplicity_rank(r))
        .unwrap_or((fastest, best_score));
    let table = scored
        .iter()
        .map(|(r, sc)| {
            format!(
                "{} {:.0} / {:.0} (score {sc:.2})",
                r.label, r.sequential.pages_per_second, r.sparse.pages_per_second
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    let why = if chosen.label == fastest.label {
        "the best".to_string()
    } else {
        format!(
            "within {:.0}% of the best ({} {best_score:.2}) and simpler",
            METHOD_TIE_FRACTION * 100.0,
            fastest.label
        )
    };
    let method_reason = format!(
        "cold reads of {} blocks, sequential / sparse pages/s ({table}): {} (score {chosen_score:.2}) is {why}{skipped}",
        m.relation.blocks, chosen.label
    );
    let workers = match (chosen.io_method, chosen.io_workers) {
        (IoMethodKind::Worker, Some(n)) => Recommendation {
            value: n,
            reason: format!(
                "{} (score {chosen_score:.2}) is {why} among the measured runs; at most {cap} for {effective_cpus} CPUs",
                chosen.label
            ),
        },
        (method, _) => Recommendation {
            value: DEFAULT_IO_WORKERS,
            reason: format!(
                "io_workers is used only by io_method = worker; with {method} it keeps PostgreSQL 18's default"
            ),
        },
    };
    (
        Recommendation {
            value: chosen.io_method,
            reason: method_reason,
        },
        workers,
    )
}

/// `random_page_cost` is the planner's cost of fetching one page non-sequentially, in units
/// of `seq_page_cost` (1.0, one page fetched sequentially) — PostgreSQL's documentation,
/// "Planner Cost Constants". The measured price of each is the time per page: a random
/// page costs `1 / random depth-1 reads/s` (an index scan without prefetch waits for one
/// read at a time) and a sequential page `1 / sequential pages/s`, so their ratio is
/// `sequential pages/s ÷ random depth-1 reads/s`. Clamped to [1.0, 4.0]: see
/// [`RANDOM_PAGE_COST_MIN`] and [`RANDOM_PAGE_COST_MAX`]. Rounded to 0.1, the precision the
/// planner's choices are sensitive to.
fn random_page_cost(m: &Measurement) -> Recommendation<f64> {
    let seq = m.device.sequential_pages_per_second;
    let qd1 = m.device.random_reads_per_second_qd1;
    if seq <= 0.0 || qd1 <= 0.0 {
        return Recommendation {
            value: RANDOM_PAGE_COST_MAX,
            reason: "the sequential or depth-1 random rate was not measured: PostgreSQL's default"
                .into(),
        };
    }
    let ratio = seq / qd1;
    let value = (ratio.clamp(RANDOM_PAGE_COST_MIN, RANDOM_PAGE_COST_MAX) * 10.0).round() / 10.0;
    let clamp = if ratio > RANDOM_PAGE_COST_MAX {
        format!(
            ", capped at {RANDOM_PAGE_COST_MAX:.1} (PostgreSQL's default, which already assumes most random reads are cache hits)"
        )
    } else if ratio < RANDOM_PAGE_COST_MIN {
        format!(", raised to {RANDOM_PAGE_COST_MIN:.1} (a random page never costs less than a sequential one)")
    } else {
        String::new()
    };
    Recommendation {
        value,
        reason: format!(
            "sequential {:.0} MB/s = {seq:.0} pages/s ÷ random depth-1 {qd1:.0} reads/s = {ratio:.2}{clamp}",
            m.device.sequential_bytes_per_second / 1e6
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{DepthRate, DeviceRates, MethodSkipped, PatternRead, RelationRead};
    use super::*;

    /// A measurement with fixed numbers; each run is (label, sequential pages/s, sparse
    /// pages/s).
    fn measurement(
        seq_mb_s: f64,
        random: &[(usize, f64)],
        runs: &[(&str, f64, f64)],
    ) -> Measurement {
        let at = |qd: usize| random.iter().find(|r| r.0 == qd).map_or(0.0, |r| r.1);
        Measurement {
            target: "/data".into(),
            data_directory: false,
            scratch_file: None,
            device: DeviceRates {
                source: "fixed".into(),
                files: vec![],
                probed_bytes: 1 << 30,
                direct_io: true,
                sequential_bytes_per_second: seq_mb_s * 1e6,
                sequential_pages_per_second: seq_mb_s * 1e6 / 8192.0,
                sequential_seconds: 1.0,
                random_reads_per_second_qd1: at(1),
                random_reads_per_second_qd32: at(32),
                random: random
                    .iter()
                    .map(|&(queue_depth, reads_per_second)| DepthRate {
                        queue_depth,
                        reads_per_second,
                        reads: reads_per_second as u64,
                        seconds: 1.0,
                    })
                    .collect(),
            },
            relation: RelationRead {
                relation: "/data/16384".into(),
                generated: true,
                blocks: 32768,
                effective_io_concurrency: 16,
                checksums: true,
                runs: runs
                    .iter()
                    .map(|&(label, seq, sparse)| {
                        let (io_method, io_workers) = match label.split_once(':') {
                            Some((_, n)) => (IoMethodKind::Worker, Some(n.parse().unwrap())),
                            None => (label.parse().unwrap(), None),
                        };
                        let read = |pages_per_second: f64| PatternRead {
                            pages_per_second,
                            pages: pages_per_second as u64,
                            pages_read: pages_per_second as u64,
                            passes: 1,
                            seconds: 1.0,
                        };
                        MethodRun {
                            io_method,
                            io_workers,
                            label: label.into(),
                            sequential: read(seq),
                            sparse: read(sparse),
                        }
                    })
                    .collect(),
                not_measured: vec![],
            },
            effective_cpus: 2,
            budget_seconds: 30.0,
            elapsed_seconds: 30.0,
            notes: vec![],
        }
    }

    #[test]
    fn rotational_disk() {
        // One 7200 rpm disk: ~150 reads/s alone, a little more with a queue to reorder
        // (NCQ), 150 MB/s streaming; every method is limited by the same seeks.
        let m = measurement(
            150.0,
            &[
                (1, 150.0),
                (2, 180.0),
                (4, 210.0),
                (8, 250.0),
                (16, 265.0),
                (32, 270.0),
                (64, 272.0),
            ],
            &[
                ("sync", 17_000.0, 900.0),
                ("worker:3", 18_000.0, 1_000.0),
                ("worker:6", 18_100.0, 1_010.0),
                ("io_uring", 18_200.0, 1_020.0),
            ],
        );
        let r = recommend(&m, 2);
        // 90% of 270 = 243: depth 8 (250) is the first to reach it.
        assert_eq!(r.effective_io_concurrency.value, 8);
        assert!(
            r.effective_io_concurrency
                .reason
                .contains("depth 8 (250/s)"),
            "{}",
            r.effective_io_concurrency.reason
        );
        // 97% of 272 = 263.8: depth 16 (265).
        assert_eq!(r.maintenance_io_concurrency.value, 16);
        // Scores: io_uring 1.00, worker:6 0.99, worker:3 √(0.989 × 0.980) = 0.98, sync
        // √(0.934 × 0.882) = 0.91: all but sync within 5%, and worker with 3 is simplest.
        assert_eq!(r.io_method.value, IoMethodKind::Worker);
        assert_eq!(r.io_workers.value, 3);
        assert!(
            r.io_method
                .reason
                .contains("worker:3 (score 0.98) is within 5% of the best (io_uring 1.00)"),
            "{}",
            r.io_method.reason
        );
        // 150e6 / 8192 = 18311 pages/s ÷ 150 = 122 → capped at 4.
        assert_eq!(r.random_page_cost.value, 4.0);
        assert!(
            r.random_page_cost
                .reason
                .contains("= 122.07, capped at 4.0"),
            "{}",
            r.random_page_cost.reason
        );
    }

    #[test]
    fn nvme_drive() {
        let m = measurement(
            3000.0,
            &[
                (1, 12_000.0),
                (2, 23_000.0),
                (4, 45_000.0),
                (8, 85_000.0),
                (16, 160_000.0),
                (32, 290_000.0),
                (64, 420_000.0),
            ],
            &[
                ("sync", 150_000.0, 20_000.0),
                ("worker:3", 200_000.0, 30_000.0),
                ("worker:6", 260_000.0, 60_000.0),
                ("io_uring", 300_000.0, 90_000.0),
            ],
        );
        let r = recommend(&m, 8);
        // 90% of 290000 = 261000: only depth 32 reaches it.
        assert_eq!(r.effective_io_concurrency.value, 32);
        // Still growing at 64: maintenance takes 64.
        assert_eq!(r.maintenance_io_concurrency.value, 64);
        // io_uring is best at both; worker:6 scores √(0.867 × 0.667) = 0.76.
        assert_eq!(r.io_method.value, IoMethodKind::IoUring);
        assert!(
            r.io_method
                .reason
                .contains("io_uring (score 1.00) is the best"),
            "{}",
            r.io_method.reason
        );
        assert_eq!(r.io_workers.value, 3);
        assert!(r.io_workers.reason.contains("only by io_method = worker"));
        assert_eq!(r.random_page_cost.value, 4.0);
    }

    #[test]
    fn this_virtual_machine() {
        // Shaped like the 2-core VM the benchmarks run on (docs/BENCHMARKS.md, "Measured
        // I/O settings"): a virtio disk whose random rate grows to depth 16 and flattens,
        // where 3 workers fall behind on sparse reads and 6 keep up with io_uring.
        let m = measurement(
            420.0,
            &[
                (1, 2_600.0),
                (2, 4_900.0),
                (4, 8_700.0),
                (8, 14_000.0),
                (16, 21_000.0),
                (32, 22_500.0),
                (64, 22_800.0),
            ],
            &[
                ("sync", 40_000.0, 9_000.0),
                ("worker:3", 52_000.0, 10_000.0),
                ("worker:6", 57_000.0, 14_000.0),
                ("io_uring", 55_000.0, 14_500.0),
            ],
        );
        let r = recommend(&m, 2);
        assert_eq!(r.effective_io_concurrency.value, 16);
        // 97% of 22800 = 22116: depth 32.
        assert_eq!(r.maintenance_io_concurrency.value, 32);
        // Scores: worker:6 √(1 × 0.966) = 0.983, io_uring √(0.965 × 1) = 0.982 (in either
        // order, more workers are simpler than io_uring), worker:3 0.79 (out).
        assert_eq!(r.io_method.value, IoMethodKind::Worker);
        assert_eq!(r.io_workers.value, 6);
        assert!(
            r.io_workers
                .reason
                .contains("worker:6 (score 0.98) is the best"),
            "{}",
            r.io_workers.reason
        );
        assert_eq!(r.random_page_cost.value, 4.0);
    }

    #[test]
    fn cached_or_memory_backed_device_gets_the_floor_cost_and_a_skipped_method_is_named() {
        let mut m = measurement(
            400.0,
            &[(1, 80_000.0), (2, 81_000.0), (32, 82_000.0)],
            &[
                ("sync", 100_000.0, 50_000.0),
                ("worker:3", 98_000.0, 49_500.0),
            ],
        );
        m.relation.not_measured.push(MethodSkipped {
            io_method: IoMethodKind::IoUring,
            reason: "io_uring is disabled by kernel.io_uring_disabled=2".into(),
        });
        let r = recommend(&m, 1);
        // Flat curve: depth 1 already reaches 90% of depth 32.
        assert_eq!(r.effective_io_concurrency.value, 1);
        assert_eq!(r.maintenance_io_concurrency.value, 1);
        // 48828 pages/s ÷ 80000 = 0.61 → raised to 1.0.
        assert_eq!(r.random_page_cost.value, 1.0);
        assert!(r.random_page_cost.reason.contains("raised to 1.0"));
        // worker:3 scores 0.985 against sync's 1.0: the default wins the tie.
        assert_eq!(r.io_method.value, IoMethodKind::Worker);
        assert!(
            r.io_method.reason.contains(
                "io_uring not measured: io_uring is disabled by kernel.io_uring_disabled=2"
            ),
            "{}",
            r.io_method.reason
        );
    }

    #[test]
    fn a_ratio_inside_the_bounds_is_kept_and_worker_counts_are_capped_by_cpus() {
        let m = measurement(
            100.0,
            &[(1, 5_000.0), (32, 30_000.0)],
            &[
                ("worker:3", 10_000.0, 3_000.0),
                ("worker:32", 20_000.0, 9_000.0),
                ("worker:6", 12_000.0, 4_000.0),
            ],
        );
        let r = recommend(&m, 2);
        // 12207 pages/s ÷ 5000 = 2.44 → 2.4.
        assert_eq!(r.random_page_cost.value, 2.4);
        // 32 workers exceed 4 per CPU on 2 CPUs (8): the fastest allowed is worker:6.
        assert_eq!(r.io_workers.value, 6);
        let empty = measurement(100.0, &[], &[]);
        let r = recommend(&empty, 2);
        assert_eq!(r.effective_io_concurrency.value, DEFAULT_IO_CONCURRENCY);
        assert_eq!(r.io_method.value, IoMethodKind::Worker);
        assert_eq!(r.random_page_cost.value, 4.0);
    }
}
