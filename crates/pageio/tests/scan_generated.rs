//! Scans of generated data sets agree with an independent reference: the same seed's rows
//! computed directly by `DataSet::rows`, filtered and summed in plain Rust.

mod common;

use pageio::config::IoMethodKind;
use pageio::gen::{generate, DataSet, GenOptions};
use pageio::page::heap::ColumnType;
use pageio::scan::{Between, Table};

fn reference(ds: DataSet, opts: &GenOptions, p: Between) -> (u64, u64) {
    let n = ds.row_count(opts);
    ds.rows(opts.seed, n)
        .filter(|r| r.key() >= p.lo && r.key() <= p.hi)
        .fold((0, 0), |(c, s), r| {
            (c + 1, s + r.b().map(|b| b.len() as u64).unwrap_or(84))
        })
}

#[test]
fn generated_data_sets_scan_to_the_reference_answers() {
    let dir = tempfile::tempdir().unwrap();
    type Case = (DataSet, u64, [(f64, f64); 3]);
    let cases: [Case; 4] = [
        (
            DataSet::Uniform,
            40_000,
            [(0.0, 100_000.0), (1_000.0, 2_000.0), (50_000.0, 50_100.0)],
        ),
        (
            DataSet::Linear10,
            40_000,
            [
                (-50_000.0, 5_000.0),
                (20_000.0, 30_000.0),
                (99_000.0, 200_000.0),
            ],
        ),
        (
            DataSet::Cyclic,
            60_000,
            [(0.0, 10.0), (500.0, 1_500.0), (99_000.0, 100_000.0)],
        ),
        (
            DataSet::PgbenchAccounts,
            0,
            [(1.0, 100_000.0), (500.0, 1_499.0), (99_990.5, 120_000.0)],
        ),
    ];
    for method in [
        IoMethodKind::Worker,
        IoMethodKind::IoUring,
        IoMethodKind::Sync,
    ] {
        let aio = common::aio_for(method);
        for (ds, rows, preds) in cases {
            let opts = GenOptions {
                rows,
                seed: 7,
                scale: 1,
                overwrite: true,
            };
            let m = generate(&aio, dir.path(), ds, &opts, &|_| {}).unwrap();
            let ddir = dir.path().join(ds.name());
            let table = Table {
                heap: m.heap_file(&ddir),
                index: Some(m.index_file(&ddir)),
                columns: if ds == DataSet::PgbenchAccounts {
                    vec![
                        ColumnType::Int4,
                        ColumnType::Int4,
                        ColumnType::Int4,
                        ColumnType::Text,
                    ]
                } else {
                    vec![ColumnType::Float8, ColumnType::Text]
                },
                transactions: None,
            };
            let pool = common::checksum_pool(&aio);
            for (lo, hi) in preds {
                let p = Between { lo, hi };
                let want = reference(ds, &opts, p);
                assert!(want.0 > 0, "{ds} [{lo},{hi}] selects nothing");
                for kind in common::SCAN_KINDS {
                    let r = common::scan(&pool, &table, kind, p)
                        .unwrap_or_else(|e| panic!("{method} {ds} {kind}: {e}"));
                    assert_eq!(
                        (r.rows, r.sum_octet_length),
                        want,
                        "{method} {ds} {kind} a between {lo} and {hi}"
                    );
                }
            }
        }
    }
}
