//! The per-row cost of the value-exact aggregates, with no scan around them: `avg(float8)`
//! (PostgreSQL's `float8_accum` step: count, sum and sum of squared deviations) and
//! `sum(numeric)` of cents (the i128 path), against a plain `sum += v; count += 1` loop.
//!
//! Each case adds 10,000,000 values through [`Accumulator::add`] five times and prints the
//! median time and the time per row.
//!
//!   cargo bench -p pageio --bench aggregate_values

use std::hint::black_box;
use std::time::Instant;

use pageio::scan::aggregate::{Accumulator, AggFunc};
use pageio::scan::value::{Numeric, TypeKind, Value};

const ROWS: usize = 10_000_000;
const REPEATS: usize = 5;

fn median_ms(mut run: impl FnMut() -> f64) -> f64 {
    let mut times: Vec<f64> = (0..REPEATS).map(|_| run()).collect();
    times.sort_by(f64::total_cmp);
    times[REPEATS / 2]
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` would pass nothing: run only when benchmarking.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let floats: Vec<Value> = (0..ROWS as u64)
        .map(|i| Value::Float8(((i * 2_654_435_761) % 1_000_003) as f64 / 1000.0))
        .collect();
    let cents: Vec<Value> = (0..ROWS as i128)
        .map(|i| {
            Value::Numeric(Numeric::Finite {
                mantissa: (i * 7919) % 200_000_001 - 100_000_000,
                scale: 2,
            })
        })
        .collect();
    let accumulate = |func: AggFunc, kind: TypeKind, values: &[Value]| {
        median_ms(|| {
            let start = Instant::now();
            let mut acc = Accumulator::new(func, Some(kind)).unwrap();
            for v in values {
                acc.add(Some(black_box(v)), None).unwrap();
            }
            black_box(acc.finish(Some(kind)).unwrap());
            start.elapsed().as_secs_f64() * 1000.0
        })
    };
    let plain = median_ms(|| {
        let start = Instant::now();
        let (mut sum, mut count) = (0.0f64, 0i64);
        for v in &floats {
            if let Value::Float8(f) = black_box(v) {
                sum += f;
                count += 1;
            }
        }
        black_box(sum / count as f64);
        start.elapsed().as_secs_f64() * 1000.0
    });
    let avg = accumulate(AggFunc::Avg, TypeKind::Float8, &floats);
    let sum = accumulate(AggFunc::Sum, TypeKind::Numeric, &cents);
    println!("| case | median ms for {ROWS} rows | ns per row |");
    println!("|---|---|---|");
    for (name, ms) in [
        ("plain sum += v; count += 1 (float8)", plain),
        ("avg(float8): float8_accum", avg),
        ("sum(numeric) of cents", sum),
    ] {
        println!("| {name} | {ms:.1} | {:.2} |", ms * 1e6 / ROWS as f64);
    }
}
