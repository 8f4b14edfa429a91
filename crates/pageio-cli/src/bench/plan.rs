//! The selectivity sweep of the published benchmarks, and the predicates that realise it.
//!
//! The sweep starts at one row and grows by `max(1, min(cnt / 2, 10000))` rows per step up
//! to about 97% of the table: 1, 2, 3, 4, 6, 9, 13, 19, 28, …, 9841, 14761, 24761, 34761, …
//! `--quick` keeps the first step at or above each of 1 row, 0.01%, 0.1%, 1%, 10% and the
//! last step, and stops index scans at 1% (an index scan over most of a table is
//! the published charts' slowest line by far, and tells nothing new).
//!
//! Every data set spreads `a` over `[0, 100000)`, so a query sized to `cnt` rows of `rows`
//! is `a BETWEEN lo AND lo + 100000 · cnt / rows`, with `lo` drawn uniformly from the range
//! that keeps the interval inside `[0, 100000)` by a seeded generator: the same seed gives
//! the same predicates to pageio and to PostgreSQL. On uniform and linear the expected
//! match is `cnt` rows; on the noisy and cyclic sets it is close to it.

use super::record::{Plan, PlannedQuery};

/// Range of `a` in every benchmark data set.
pub const KEY_RANGE: f64 = 100_000.0;

/// Largest step of the sweep, in rows.
pub const MAX_STEP_ROWS: u64 = 10_000;

/// The sweep stops at this fraction of the table.
pub const SWEEP_END: f64 = 0.97;

/// Selectivities `--quick` keeps (plus the last step).
pub const QUICK_POINTS: [f64; 4] = [0.0001, 0.001, 0.01, 0.1];

/// Index scans in `--quick` stop at this selectivity.
pub const QUICK_INDEX_MAX: f64 = 0.01;

/// The full sweep for a table of `rows` rows: row counts, step 0 first.
pub fn sweep(rows: u64) -> Vec<u64> {
    let end = ((rows as f64) * SWEEP_END).floor() as u64;
    let mut out = Vec::new();
    let mut cnt = 1u64;
    while cnt <= end.max(1) {
        out.push(cnt);
        cnt += (cnt / 2).clamp(1, MAX_STEP_ROWS);
    }
    out
}

/// The steps (indexes into [`sweep`]) `--quick` keeps.
pub fn quick_steps(sweep: &[u64], rows: u64) -> Vec<usize> {
    let mut steps = vec![0];
    for frac in QUICK_POINTS {
        let want = (rows as f64 * frac).ceil() as u64;
        if let Some(i) = sweep.iter().position(|&c| c >= want) {
            steps.push(i);
        }
    }
    if !sweep.is_empty() {
        steps.push(sweep.len() - 1);
    }
    steps.sort_unstable();
    steps.dedup();
    steps
}

/// Thins a sweep to about `points` steps spread evenly on a log scale (always keeping the
/// first and the last).
pub fn thin_steps(sweep: &[u64], points: usize) -> Vec<usize> {
    if points == 0 || sweep.len() <= points {
        return (0..sweep.len()).collect();
    }
    let first = sweep[0].max(1) as f64;
    let last = *sweep.last().unwrap_or(&1) as f64;
    let mut steps: Vec<usize> = (0..points)
        .map(|k| {
            let want = first * (last / first).powf(k as f64 / (points - 1) as f64);
            sweep
                .iter()
                .position(|&c| c as f64 >= want)
                .unwrap_or(sweep.len() - 1)
        })
        .collect();
    steps.dedup();
    steps
}

/// SplitMix64: a tiny, well-mixed seeded generator for the predicate positions.
fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The predicate of step `step` (`cnt` rows of `rows`): `(lo, hi)`.
pub fn predicate(seed: u64, step: u32, cnt: u64, rows: u64) -> (f64, f64) {
    let width = KEY_RANGE * cnt as f64 / rows.max(1) as f64;
    let room = (KEY_RANGE - width).max(0.0);
    let u = (splitmix(seed ^ (u64::from(step) << 32)) >> 11) as f64 / (1u64 << 53) as f64;
    let lo = room * u;
    (lo, lo + width)
}

/// What to plan.
#[derive(Debug, Clone)]
pub struct PlanOptions {
    /// Data set names.
    pub datasets: Vec<String>,
    /// Scan types (`seq`, `bitmap`, `index`).
    pub scans: Vec<String>,
    /// Rows per table.
    pub rows: u64,
    /// The `--quick` subset.
    pub quick: bool,
    /// Thin the sweep to about this many steps (0 = every step).
    pub points: usize,
    /// Predicate seed.
    pub seed: u64,
}

/// Builds the plan: for each data set and scan, the chosen steps of the sweep.
pub fn build(opts: &PlanOptions) -> Plan {
    let full = sweep(opts.rows);
    let steps = if opts.quick {
        quick_steps(&full, opts.rows)
    } else {
        thin_steps(&full, opts.points)
    };
    // The step that reaches QUICK_INDEX_MAX is the last index step `--quick` keeps.
    let index_cap = full
        .iter()
        .copied()
        .find(|&c| c as f64 >= opts.rows as f64 * QUICK_INDEX_MAX)
        .unwrap_or(u64::MAX);
    let mut queries = Vec::new();
    for dataset in &opts.datasets {
        for scan in &opts.scans {
            for &i in &steps {
                let cnt = full[i];
                let selectivity = cnt as f64 / opts.rows.max(1) as f64;
                if opts.quick && scan == "index" && cnt > index_cap {
                    continue;
                }
                let (lo, hi) = predicate(opts.seed, i as u32, cnt, opts.rows);
                queries.push(PlannedQuery {
                    dataset: dataset.clone(),
                    scan: scan.clone(),
                    step: i as u32,
                    target_rows: cnt,
                    selectivity,
                    lo,
                    hi,
                });
            }
        }
    }
    Plan {
        table_rows: opts.rows,
        seed: opts.seed,
        quick: opts.quick,
        queries,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweep_follows_the_published_rule() {
        let s = sweep(10_000_000);
        assert_eq!(&s[..10], &[1, 2, 3, 4, 6, 9, 13, 19, 28, 42]);
        // Steps are capped at 10000 rows once cnt/2 exceeds it.
        let big: Vec<_> = s.windows(2).filter(|w| w[0] >= 20_000).collect();
        assert!(big.iter().all(|w| w[1] - w[0] == 10_000));
        let last = *s.last().unwrap();
        assert!(last <= 9_700_000 && last > 9_690_000, "{last}");
    }

    #[test]
    fn quick_keeps_one_row_the_decades_and_the_end() {
        let rows = 1_000_000;
        let s = sweep(rows);
        let q = quick_steps(&s, rows);
        let counts: Vec<u64> = q.iter().map(|&i| s[i]).collect();
        assert_eq!(counts[0], 1);
        assert!(counts[1] >= 100 && counts[1] < 150, "{counts:?}");
        assert!(counts[3] >= 10_000 && counts[3] < 15_000, "{counts:?}");
        assert_eq!(*counts.last().unwrap(), *s.last().unwrap());
        assert_eq!(q.len(), 6);
    }

    #[test]
    fn predicates_are_deterministic_sized_and_inside_the_range() {
        for step in 0..50u32 {
            let (lo, hi) = predicate(42, step, 1000, 1_000_000);
            assert_eq!((lo, hi), predicate(42, step, 1000, 1_000_000));
            assert!(lo >= 0.0 && hi <= KEY_RANGE);
            assert!((hi - lo - 100.0).abs() < 1e-9);
        }
        assert_ne!(predicate(1, 3, 10, 100), predicate(2, 3, 10, 100));
    }

    #[test]
    fn quick_plan_caps_index_scans() {
        let plan = build(&PlanOptions {
            datasets: vec!["uniform".into()],
            scans: vec!["seq".into(), "index".into()],
            rows: 1_000_000,
            quick: true,
            points: 0,
            seed: 1,
        });
        let seq = plan.queries.iter().filter(|q| q.scan == "seq").count();
        let index: Vec<_> = plan.queries.iter().filter(|q| q.scan == "index").collect();
        assert_eq!(seq, 6);
        assert_eq!(index.len(), 4);
        assert!(index.iter().all(|q| q.selectivity < 1.5 * QUICK_INDEX_MAX));
    }

    #[test]
    fn thinning_keeps_ends_and_is_monotonic() {
        let s = sweep(1_000_000);
        let t = thin_steps(&s, 12);
        assert_eq!(t[0], 0);
        assert_eq!(*t.last().unwrap(), s.len() - 1);
        assert!(t.windows(2).all(|w| w[0] < w[1]));
        assert!(t.len() <= 12 && t.len() >= 8);
    }
}
