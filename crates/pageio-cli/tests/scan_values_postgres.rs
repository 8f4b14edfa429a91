//! `pageio scan --table` prints PostgreSQL 18's values where they are easy to get wrong:
//! numerics beyond 38 digits and of scale 500, float digits PostgreSQL's Ryu prints
//! (ties to even, no interval edges), min/max ties of `-0`/`0` and `1.0`/`1.00`, a sum over
//! `-0` alone, the overflow errors of float averages, a refused `octet_length(numeric)` and
//! the JSON of a NULL. Each case is checked twice: against the answer a PostgreSQL 18.6
//! server gave, written down here, and against what the test's own server prints on the
//! same cluster after pageio has read its files.

mod common;

/// One query: table, select list, optional `--where`, and PostgreSQL 18.6's answer (the
/// aggregates' texts joined by `|`, NULL as the empty string) or the error it raises.
struct Case {
    table: &'static str,
    select: &'static str,
    predicate: Option<&'static str>,
    answer: Result<&'static str, &'static str>,
}

const CASES: &[Case] = &[
    // numeric 1e50 (51 digits) among small values: exact sum, select_div_scale's avg.
    Case {
        table: "t_num",
        select: "sum(n), avg(n), min(n), max(n), count(*)",
        predicate: Some("n >= 0"),
        answer: Ok("100000000000000000000000000000000000000000000000003.75|\
                    33333333333333333333333333333333333333333333333334.58|1.5|\
                    100000000000000000000000000000000000000000000000000|3"),
    },
    // real 345285.125 → 345285.12 (tie to even); 78860304 → 7.8860304e+07 (no interval
    // edge); float8 968.16046142578125 → 968.1604614257812; '1e23'::float8 → 9.999…e+22.
    Case {
        table: "t_flt",
        select: "min(r), max(r), sum(r), avg(r), min(d), max(d), sum(d), avg(d)",
        predicate: None,
        answer: Ok(
            "345285.12|7.8860304e+07|7.920559e+07|39602794.5625|968.1604614257812|\
                    9.999999999999999e+22|9.999999999999999e+22|4.9999999999999996e+22",
        ),
    },
    // Rows (0, 0, 1.0) then (-0, -0, 1.00): the later row wins every tie.
    Case {
        table: "t_tie",
        select: "min(z), max(z), min(y), max(y), min(n), max(n)",
        predicate: None,
        answer: Ok("-0|-0|-0|-0|1.00|1.00"),
    },
    // A sum over -0 alone is -0 (float8pl/float4pl start from the first value); avg is 0.
    Case {
        table: "t_negz",
        select: "sum(z), sum(y), avg(z)",
        predicate: None,
        answer: Ok("-0|-0|0"),
    },
    // avg of no rows: NULL.
    Case {
        table: "t_empty",
        select: "avg(d)",
        predicate: None,
        answer: Ok(""),
    },
    // 1e308 twice: float8_accum's sum overflows.
    Case {
        table: "t_ovf",
        select: "avg(d)",
        predicate: None,
        answer: Err("value out of range: overflow"),
    },
    // 1e200 and -1e200: the sum is 0, the sum of squares overflows.
    Case {
        table: "t_ovf2",
        select: "avg(d)",
        predicate: None,
        answer: Err("value out of range: overflow"),
    },
    Case {
        table: "t_num",
        select: "sum(octet_length(n))",
        predicate: None,
        answer: Err("function octet_length(numeric) does not exist"),
    },
];

/// One statement through psql on the server of `root`: its output, or its error text.
fn try_psql(bin: &std::path::Path, root: &std::path::Path, sql: &str) -> Result<String, String> {
    let host = root.display().to_string();
    let out = common::pg(
        bin,
        "psql",
        &[
            "-h",
            &host,
            "-U",
            "postgres",
            "-X",
            "-qAt",
            "-v",
            "ON_ERROR_STOP=1",
            "-c",
            sql,
        ],
    );
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn values_print_as_postgresql_18_prints_them() {
    let Some(bin) = common::pg_bin() else { return };
    common::with_watchdog("values_postgres", 300, move || {
        let dir = common::pg_cluster_dir("pageio-values-");
        let root = dir.path();
        let data = common::initdb(&bin, root).display().to_string();
        let running = common::PgServer::start(&bin, root);
        let psql = |sql: &str| running.psql(sql);
        psql("CREATE TABLE t_num (n numeric, w numeric(1000,500))");
        psql("INSERT INTO t_num VALUES (1e50, '1e-100'), (1.5, 0), (2.25, NULL)");
        psql("CREATE TABLE t_flt (r real, d float8)");
        psql(
            "INSERT INTO t_flt VALUES ('345285.125', '968.16046142578125'), \
             ('7.8860304e+07', '1e23')",
        );
        psql("CREATE TABLE t_tie (z float8, y real, n numeric)");
        psql("INSERT INTO t_tie VALUES (0, 0, 1.0), ('-0', '-0', 1.00)");
        psql("CREATE TABLE t_negz (z float8, y real)");
        psql("INSERT INTO t_negz VALUES ('-0', '-0'), ('-0', '-0')");
        psql("CREATE TABLE t_ovf (d float8)");
        psql("INSERT INTO t_ovf VALUES (1e308), (1e308)");
        psql("CREATE TABLE t_ovf2 (d float8)");
        psql("INSERT INTO t_ovf2 VALUES (1e200), (-1e200)");
        psql("CREATE TABLE t_empty (d float8)");
        drop(running);

        // pageio first, on files PostgreSQL has not read back.
        let mut got = Vec::new();
        for case in CASES {
            let mut args = vec![
                "scan",
                "--pgdata",
                &data,
                "--table",
                case.table,
                "--select",
                case.select,
                "--json",
            ];
            if let Some(p) = case.predicate {
                args.extend(["--where", p]);
            }
            let out = common::pageio_bounded(&args, 60);
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            got.push(if out.status.success() {
                let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
                let aggregates = v["aggregates"].as_array().unwrap();
                for a in aggregates {
                    // NULL: value null, text what psql prints (empty).
                    if a["value"].is_null() {
                        assert_eq!(a["text"], "", "{}: {a}", case.select);
                    }
                }
                let texts: Vec<&str> = aggregates
                    .iter()
                    .map(|a| a["text"].as_str().unwrap())
                    .collect();
                Ok(texts.join("|"))
            } else {
                Err(stderr)
            });
        }

        // The wide numeric column: every digit of 1e-100 at scale 500, read exactly.
        let out = common::pageio_bounded(
            &[
                "scan",
                "--pgdata",
                &data,
                "--table",
                "t_num",
                "--select",
                "sum(w), avg(w)",
                "--json",
            ],
            60,
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let sum_w = v["aggregates"][0]["text"].as_str().unwrap().to_string();
        let avg_w = v["aggregates"][1]["text"].as_str().unwrap().to_string();
        // SELECT sum(w), avg(w) FROM t_num → 1e-100 and 5e-101, both at scale 500.
        assert_eq!(sum_w, format!("0.{}1{}", "0".repeat(99), "0".repeat(400)));
        assert_eq!(avg_w, format!("0.{}5{}", "0".repeat(100), "0".repeat(399)));

        let running = common::PgServer::start(&bin, root);
        for (case, got) in CASES.iter().zip(&got) {
            let sql = format!(
                "SELECT concat_ws('|', {}) FROM {}{}",
                case.select
                    .split(", ")
                    .map(|e| format!("coalesce(({e})::text, '')"))
                    .collect::<Vec<_>>()
                    .join(", "),
                case.table,
                case.predicate
                    .map(|p| format!(" WHERE {p}"))
                    .unwrap_or_default()
            );
            let server = try_psql(&bin, root, &sql);
            match (&case.answer, got) {
                (Ok(want), Ok(texts)) => {
                    let want: String = want.split_whitespace().collect();
                    assert_eq!(texts, &want, "pageio: {}", case.select);
                    assert_eq!(
                        server.as_deref().map(str::trim),
                        Ok(want.as_str()),
                        "server: {sql}"
                    );
                }
                (Err(want), Err(stderr)) => {
                    assert!(stderr.contains(want), "pageio: {}: {stderr}", case.select);
                    assert!(
                        server.as_ref().is_err_and(|e| e.contains(want)),
                        "server: {sql}: {server:?}"
                    );
                }
                (want, got) => panic!("{}: PostgreSQL {want:?}, pageio {got:?}", case.select),
            }
        }
        let server_w = running.psql(
            "SELECT sum(w)::text = '0.' || repeat('0', 99) || '1' || repeat('0', 400), \
             avg(w)::text = '0.' || repeat('0', 100) || '5' || repeat('0', 399) FROM t_num",
        );
        assert_eq!(server_w.trim(), "t|t");
        drop(running);
    });
}
