//! `pageio scan --where` gives PostgreSQL 18's own answers where float8 ordering is unusual:
//! a table holding NaN, ±Infinity, -0 and 0 (with a btree), written as production tables are
//! (updated, deleted from, a rolled-back insert, never read or vacuumed), is scanned by
//! pageio on the stopped cluster's files with every scan type and io_method, and only then
//! queried by PostgreSQL (whose reads would set the hint bits pageio must do without).

mod common;

/// The predicates, as SQL and as pageio's --where.
const PREDICATES: [&str; 8] = [
    "a between 0 and 'NaN'",
    "a between 'NaN' and 'NaN'",
    "a between '-0' and '0'",
    "a between '-Infinity' and 'Infinity'",
    "a between 'Infinity' and 'NaN'",
    "a between 5 and 500",
    "a between 'NaN' and 0",
    "a between '-Infinity' and '-0'",
];

#[test]
fn nan_infinity_and_zeroes_scan_to_postgresqls_answers() {
    let Some(bin) = common::pg_bin() else { return };
    common::with_watchdog("nan_postgres", 300, move || {
        let dir = common::pg_cluster_dir("pageio-nan-");
        let root = dir.path();
        let data = common::initdb(&bin, root).display().to_string();
        let running = common::PgServer::start(&bin, root);
        let psql = |sql: &str| running.psql(sql);
        psql("CREATE TABLE t (a double precision, b text) WITH (fillfactor = 25)");
        psql("CREATE INDEX t_a ON t (a)");
        psql(
            "INSERT INTO t SELECT CASE g % 10 \
               WHEN 0 THEN 'NaN'::float8 WHEN 1 THEN '-Infinity' WHEN 2 THEN '-0' \
               WHEN 3 THEN '0' WHEN 4 THEN 'Infinity' WHEN 5 THEN 'NaN' \
               ELSE g END, 'xyz' FROM generate_series(1, 5000) g",
        );
        psql("CHECKPOINT");
        // Writes after the checkpoint, none of them read back: deleted rows, new versions
        // of updated rows (old ones left behind), and a rolled-back insert of NaNs.
        psql("DELETE FROM t WHERE b = 'xyz' AND a::text LIKE '%7'");
        psql("UPDATE t SET b = 'abc' WHERE a::text LIKE '%8'");
        psql("BEGIN; INSERT INTO t SELECT 'NaN', 'gone' FROM generate_series(1, 300); ROLLBACK");
        let paths = psql("SELECT pg_relation_filepath('t') || ' ' || pg_relation_filepath('t_a')");
        let mut it = paths.split_whitespace();
        let (heap, index) = (
            it.next().unwrap().to_string(),
            it.next().unwrap().to_string(),
        );
        drop(running);
        let mut got = Vec::new();
        for p in PREDICATES {
            for (kind, method) in [("seq", "sync"), ("bitmap", "worker"), ("index", "io_uring")] {
                let out = common::pageio_bounded(
                    &[
                        "scan",
                        "--pgdata",
                        &data,
                        "--heap",
                        &heap,
                        "--index",
                        &index,
                        "--kind",
                        kind,
                        "--io-method",
                        method,
                        "--where",
                        p,
                        "--json",
                    ],
                    60,
                );
                assert!(
                    out.status.success(),
                    "{p} {kind}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
                got.push((p, kind, method, v["rows"].as_u64()));
            }
        }
        // Only now does PostgreSQL read the table.
        let running = common::PgServer::start(&bin, root);
        let psql = |sql: &str| running.psql(sql);
        let answers: Vec<u64> = PREDICATES
            .iter()
            .map(|p| {
                psql(&format!("SELECT count(*) FROM t WHERE {p}"))
                    .trim()
                    .parse()
                    .unwrap()
            })
            .collect();
        drop(running);
        // PostgreSQL's own answers show the order: NaN on top, -0 = 0.
        assert_eq!(answers[1], 1000, "two NaN per ten rows");
        assert_eq!(answers[2], 1000, "-0 and 0");
        for (p, want) in PREDICATES.iter().zip(&answers) {
            for (q, kind, method, rows) in &got {
                if q == p {
                    assert_eq!(*rows, Some(*want), "{p} ({kind}, {method})");
                }
            }
        }
    });
}
