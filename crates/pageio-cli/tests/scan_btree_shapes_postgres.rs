//! Bitmap and index scans through btrees of every shape a real cluster has, compared
//! exactly with PostgreSQL 18's answers.
//!
//! The cluster is written as an application writes it, autovacuum off, never vacuumed or
//! frozen: a table whose keys arrive in scrambled order, with its indexes created first and
//! then rows inserted, updated (indexed columns and not), deleted and inserted by a rolled-
//! back transaction. Its btrees are ASC and DESC, NULLS FIRST and LAST, on int4, int8,
//! float8 (with -0, NaN and ±Infinity), text "C", date, a NULL-heavy int4 (2,000 NULL keys
//! beside the keys 1–2000) and a text column of the default collation indexed
//! `COLLATE "C"`; multi-column btrees, whose first key alone is constrained; a key of five
//! values, whose leaves hold deduplicated posting lists. A second table has leaf items
//! killed by PostgreSQL's own index scans after a delete (`LP_DEAD`, `BTP_HAS_GARBAGE`); a
//! third only partial indexes, used when `--where` implies their predicate and refused,
//! with the predicate shown, when it does not.
//!
//! Every table is read once by a sequential scan in PostgreSQL before the server stops, as
//! any real cluster's tables are: that sets the hint bits the scans' visibility rule reads,
//! so the answers here depend on the index walk alone. Every case runs `--kind seq`, bitmap
//! and index scans through the index pageio picks, and bitmap and index scans through each
//! index named with `--index`, for `=`, `<`, `<=`, `>`, `>=`, `BETWEEN` and no predicate,
//! the io_methods taking turns. Run against the code before these shapes were handled, 268
//! of those scans differed from PostgreSQL (DESC walks answering 0 rows, NULL pivots taken
//! for minus infinity, NULL keys dropped from full scans), killed items stopped the scan
//! as damage, and partial indexes answered for rows they do not hold.
//!
//! `pageio bench --pgdata --table NAME` runs on a table whose keys are 1..3000, far from the
//! generated data sets' [0, 100000): its queries must land on the table's own keys and its
//! rows be labelled with the share they really returned.
//!
//! PostgreSQL comes from `bench/setup-postgres.sh` or `$PAGEIO_PG_BIN`; without it the
//! tests print a skip line, except under `CI`, where they fail.

mod common;
use common::{initdb, pageio_bounded, pg_bin, pg_cluster_dir, pg_ok, PgServer};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The longest one pageio run may take on these small tables before the test fails.
const RUN_BOUND_SECS: u64 = 120;

/// The io_methods the scans take turns with.
const IO_METHODS: [&str; 3] = ["sync", "worker", "io_uring"];

/// A key column of `shapes` and the btrees whose first key it is.
struct Key {
    column: &'static str,
    /// Indexes to run bitmap and index scans through with `--index`.
    indexes: &'static [&'static str],
    /// The select list, the same text for PostgreSQL and pageio.
    select: &'static str,
    /// `=`, `<`, `<=`, `>`, `>=`, `BETWEEN` (`None`: no predicate, a full index scan).
    predicates: &'static [Option<&'static str>],
    /// PostgreSQL compares this column in `COLLATE "C"` (pageio compares bytes).
    collate_c: bool,
}

const KEYS: &[Key] = &[
    Key {
        column: "i4",
        indexes: &["i4_asc", "i4_desc", "i4_asc_nf", "i4_desc_nl"],
        select: "count(*), sum(id), min(i4), max(i4)",
        predicates: &[
            Some("i4 = 17"),
            Some("i4 < -1900"),
            Some("i4 <= -1900"),
            Some("i4 > 1900"),
            Some("i4 >= 1900"),
            Some("i4 between 10 and 20"),
            None,
        ],
        collate_c: false,
    },
    Key {
        column: "i8",
        indexes: &["i8_asc", "i8_desc", "i8_asc_nf", "i8_desc_nl"],
        select: "count(*), sum(id), min(i8), max(i8)",
        predicates: &[
            Some("i8 = 17000000119"),
            Some("i8 < -1900000013300"),
            Some("i8 <= -1900000013300"),
            Some("i8 > 1900000013300"),
            Some("i8 >= 1900000013300"),
            Some("i8 between 10000000070 and 20000000140"),
            None,
        ],
        collate_c: false,
    },
    Key {
        column: "f8",
        indexes: &["f8_asc", "f8_desc", "f8_asc_nf", "f8_desc_nl"],
        // min and max of float8 would depend on which of -0 and 0 is met first.
        select: "count(*), sum(id), count(f8)",
        predicates: &[
            Some("f8 = 0"),
            Some("f8 < -240"),
            Some("f8 <= -0"),
            Some("f8 > 240"),
            Some("f8 >= 'NaN'"),
            Some("f8 between -5.5 and 10.25"),
            None,
        ],
        collate_c: false,
    },
    Key {
        column: "t",
        indexes: &["t_asc", "t_desc", "t_asc_nf", "t_desc_nl"],
        select: "count(*), sum(id), min(t), max(t)",
        predicates: &[
            Some("t = 'k17'"),
            Some("t < 'k1005'"),
            Some("t <= 'k1005'"),
            Some("t > 'k3990'"),
            Some("t >= 'k3990'"),
            Some("t between 'k2' and 'k21'"),
            None,
        ],
        collate_c: false,
    },
    Key {
        column: "d",
        indexes: &["d_asc", "d_desc", "d_asc_nf", "d_desc_nl"],
        select: "count(*), sum(id), min(d), max(d)",
        predicates: &[
            Some("d = '2000-01-18'"),
            Some("d < '1994-10-01'"),
            Some("d <= '1994-10-01'"),
            Some("d > '2005-03-01'"),
            Some("d >= '2005-03-01'"),
            Some("d between '2000-01-11' and '2000-01-21'"),
            None,
        ],
        collate_c: false,
    },
    Key {
        column: "nk",
        indexes: &["nk_asc", "nk_desc", "nk_asc_nf", "nk_desc_nl"],
        select: "count(*), sum(id), min(nk), max(nk), count(nk)",
        predicates: &[
            Some("nk = 2000"),
            Some("nk < 5"),
            Some("nk <= 5"),
            Some("nk > 1990"),
            Some("nk >= 1990"),
            Some("nk between 500 and 510"),
            None,
        ],
        collate_c: false,
    },
    Key {
        column: "tc",
        // tc_a_default (the column's collation) comes first by name and cannot be walked:
        // the picked index must be a "C" one.
        indexes: &["tc_b_c", "tc_c_c_desc"],
        select: "count(*), sum(id), count(tc)",
        predicates: &[
            Some("tc = 'k17'"),
            Some("tc < 'k1005'"),
            Some("tc <= 'k1005'"),
            Some("tc > 'k3990'"),
            Some("tc >= 'k3990'"),
            Some("tc between 'k2' and 'k21'"),
            None,
        ],
        collate_c: true,
    },
    Key {
        column: "b",
        indexes: &["b_i4", "b_desc_t"],
        select: "count(*), sum(id), min(b), max(b), sum(i4)",
        predicates: &[
            Some("b = 3"),
            Some("b < 1"),
            Some("b <= 1"),
            Some("b > 5"),
            Some("b >= 5"),
            Some("b between 2 and 4"),
            None,
        ],
        collate_c: false,
    },
    Key {
        column: "dup",
        indexes: &["dup_asc", "dup_desc_nl"],
        select: "count(*), sum(id), min(dup), max(dup), count(dup)",
        predicates: &[
            Some("dup = 3"),
            Some("dup < 1"),
            Some("dup <= 1"),
            Some("dup > 3"),
            Some("dup >= 3"),
            Some("dup between 1 and 2"),
            None,
        ],
        collate_c: false,
    },
];

/// Cases of the table with killed index items: `--where` for every scan kind through both
/// of its indexes.
const KILLED_PREDICATES: &[Option<&str>] = &[
    Some("a = 1500"),
    Some("a < 4000"),
    Some("a <= 4000"),
    Some("a > 2500"),
    Some("a >= 2500"),
    Some("a between 500 and 5000"),
    None,
];
const KILLED_INDEXES: &[&str] = &["killed_a", "killed_a_desc"];
const KILLED_SELECT: &str = "count(*), sum(id), min(a), max(a)";

/// What a partial-index case expects: PostgreSQL's answer, or a refusal holding these
/// fragments.
enum Expect {
    Answer,
    Refused(&'static [&'static str]),
}

/// A scan of the table `part`, whose btrees are all partial.
struct PartialCase {
    index: Option<&'static str>,
    predicate: Option<&'static str>,
    expect: Expect,
}

const PART_SELECT: &str = "count(*), sum(id), min(a), max(a)";

const PARTIAL_CASES: &[PartialCase] = &[
    // Neither partial index on `a` covers 10..20: no index, and each one's reason.
    PartialCase {
        index: None,
        predicate: Some("a between 10 and 20"),
        expect: Expect::Refused(&[
            "no valid btree index whose first key column is \"a\"",
            "\"part_a_even\" is a partial index (WHERE a % 2 = 0)",
            "\"part_a_pos\" is a partial index (WHERE a > 100 AND a IS NOT NULL)",
        ]),
    },
    // a > 100 AND a IS NOT NULL is implied: part_a_pos (DESC) is picked.
    PartialCase {
        index: None,
        predicate: Some("a between 150 and 300"),
        expect: Expect::Answer,
    },
    PartialCase {
        index: None,
        predicate: Some("a > 2990"),
        expect: Expect::Answer,
    },
    PartialCase {
        index: Some("part_a_pos"),
        predicate: Some("a >= 101"),
        expect: Expect::Answer,
    },
    PartialCase {
        index: Some("part_a_pos"),
        predicate: Some("a > 100"),
        expect: Expect::Answer,
    },
    PartialCase {
        index: Some("part_a_pos"),
        predicate: Some("a = 200"),
        expect: Expect::Answer,
    },
    PartialCase {
        index: Some("part_a_pos"),
        predicate: Some("a >= 100"),
        expect: Expect::Refused(&[
            "index \"part_a_pos\" is a partial index (WHERE a > 100 AND a IS NOT NULL)",
            "--where does not imply the predicate",
        ]),
    },
    PartialCase {
        index: Some("part_a_pos"),
        predicate: None,
        expect: Expect::Refused(&[
            "index \"part_a_pos\" is a partial index",
            "a scan without --where would miss the others",
        ]),
    },
    PartialCase {
        index: Some("part_a_even"),
        predicate: Some("a between 10 and 20"),
        expect: Expect::Refused(&["index \"part_a_even\" is a partial index (WHERE a % 2 = 0)"]),
    },
    // IN (…) is a ScalarArrayOpExpr: never proved, and shown as not showable.
    PartialCase {
        index: Some("part_b_in"),
        predicate: Some("b = 2"),
        expect: Expect::Refused(&[
            "index \"part_b_in\" is a partial index (a predicate pageio cannot show",
        ]),
    },
    // b >= 0 is stored as b >= 0 on int4: implied by b between 2 and 3 and by b = 0.
    PartialCase {
        index: Some("part_b_nonneg"),
        predicate: Some("b between 2 and 3"),
        expect: Expect::Answer,
    },
    PartialCase {
        index: Some("part_b_nonneg"),
        predicate: Some("b = 0"),
        expect: Expect::Answer,
    },
    // f > 1.5 is stored as f > float8(1.5::numeric): a cast of a numeric constant.
    PartialCase {
        index: None,
        predicate: Some("f between 2 and 3.5"),
        expect: Expect::Answer,
    },
    PartialCase {
        index: Some("part_f_big"),
        predicate: Some("f >= 1.5"),
        expect: Expect::Refused(&["index \"part_f_big\" is a partial index (WHERE f > 1.5)"]),
    },
    // Text in the "C" collation, on a DESC index.
    PartialCase {
        index: None,
        predicate: Some("t between 'k3' and 'k4'"),
        expect: Expect::Answer,
    },
    PartialCase {
        index: Some("part_t_from_k2"),
        predicate: Some("t > 'k1'"),
        expect: Expect::Refused(&["index \"part_t_from_k2\" is a partial index (WHERE t >= 'k2')"]),
    },
];

struct Cluster {
    _dir: tempfile::TempDir,
    data: PathBuf,
    /// PostgreSQL's answer to each SQL query (NULL as "").
    answers: BTreeMap<String, Vec<String>>,
    /// Relative paths of the indexes, by name.
    index_paths: BTreeMap<String, String>,
}

/// Runs `sql` in one psql session (a SET applies to what follows); one line per row, its
/// fields separated by the unit separator, which no value here holds.
fn psql_rows(bin: &Path, root: &Path, sql: &[String]) -> Vec<Vec<String>> {
    let host = root.display().to_string();
    let mut args = vec![
        "-h",
        &host,
        "-U",
        "postgres",
        "-d",
        "postgres",
        "-X",
        "-qAt",
        "-F",
        "\u{1f}",
        "-v",
        "ON_ERROR_STOP=1",
    ];
    for stmt in sql {
        args.push("-c");
        args.push(stmt);
    }
    pg_ok(bin, "psql", &args)
        .lines()
        .map(|l| l.split('\u{1f}').map(str::to_string).collect())
        .collect()
}

/// The SQL PostgreSQL answers for a select list and predicate on `table`.
fn sql_of(table: &str, select: &str, predicate: Option<&str>, collate_c: Option<&str>) -> String {
    let predicate = predicate.map(|p| match collate_c {
        // `tc < 'k1'` compared as pageio compares it: tc COLLATE "C" < 'k1'.
        Some(column) => format!("{column} COLLATE \"C\"{}", &p[column.len()..]),
        None => p.to_string(),
    });
    format!(
        "SELECT {select} FROM {table}{}",
        predicate.map(|p| format!(" WHERE {p}")).unwrap_or_default()
    )
}

fn every_sql() -> Vec<String> {
    let mut sql = Vec::new();
    for key in KEYS {
        for p in key.predicates {
            sql.push(sql_of(
                "shapes",
                key.select,
                *p,
                key.collate_c.then_some(key.column),
            ));
        }
    }
    for p in KILLED_PREDICATES {
        sql.push(sql_of("killed", KILLED_SELECT, *p, None));
    }
    for case in PARTIAL_CASES {
        sql.push(sql_of("part", PART_SELECT, case.predicate, None));
    }
    sql.sort();
    sql.dedup();
    sql
}

const SETUP: &str = "
CREATE TABLE shapes (id int4, i4 int4, i8 int8, f8 float8, t text COLLATE \"C\", d date,
    nk int4, tc text, b int4, dup int4, pad text) WITH (fillfactor = 80, autovacuum_enabled = off);
CREATE INDEX i4_asc ON shapes (i4);
CREATE INDEX i4_desc ON shapes (i4 DESC);
CREATE INDEX i4_asc_nf ON shapes (i4 NULLS FIRST);
CREATE INDEX i4_desc_nl ON shapes (i4 DESC NULLS LAST);
CREATE INDEX i8_asc ON shapes (i8);
CREATE INDEX i8_desc ON shapes (i8 DESC);
CREATE INDEX i8_asc_nf ON shapes (i8 NULLS FIRST);
CREATE INDEX i8_desc_nl ON shapes (i8 DESC NULLS LAST);
CREATE INDEX f8_asc ON shapes (f8);
CREATE INDEX f8_desc ON shapes (f8 DESC);
CREATE INDEX f8_asc_nf ON shapes (f8 NULLS FIRST);
CREATE INDEX f8_desc_nl ON shapes (f8 DESC NULLS LAST);
CREATE INDEX t_asc ON shapes (t);
CREATE INDEX t_desc ON shapes (t DESC);
CREATE INDEX t_asc_nf ON shapes (t NULLS FIRST);
CREATE INDEX t_desc_nl ON shapes (t DESC NULLS LAST);
CREATE INDEX d_asc ON shapes (d);
CREATE INDEX d_desc ON shapes (d DESC);
CREATE INDEX d_asc_nf ON shapes (d NULLS FIRST);
CREATE INDEX d_desc_nl ON shapes (d DESC NULLS LAST);
CREATE INDEX nk_asc ON shapes (nk);
CREATE INDEX nk_desc ON shapes (nk DESC);
CREATE INDEX nk_asc_nf ON shapes (nk NULLS FIRST);
CREATE INDEX nk_desc_nl ON shapes (nk DESC NULLS LAST);
CREATE INDEX tc_a_default ON shapes (tc);
CREATE INDEX tc_b_c ON shapes (tc COLLATE \"C\");
CREATE INDEX tc_c_c_desc ON shapes (tc COLLATE \"C\" DESC);
CREATE INDEX b_i4 ON shapes (b, i4);
CREATE INDEX b_desc_t ON shapes (b DESC, t);
CREATE INDEX dup_asc ON shapes (dup);
CREATE INDEX dup_desc_nl ON shapes (dup DESC NULLS LAST);
INSERT INTO shapes
    SELECT g, CASE WHEN g % 17 <> 0 THEN p - 2000 END,
        CASE WHEN g % 19 <> 0 THEN (p - 2000)::int8 * 1000000007 END,
        CASE g WHEN 5 THEN '-0' WHEN 6 THEN '0' WHEN 7 THEN 'NaN' WHEN 8 THEN 'Infinity'
            WHEN 9 THEN '-Infinity' WHEN 10 THEN 'NaN'
            ELSE CASE WHEN g % 23 <> 0 THEN (p - 2000) / 8.0 END END,
        CASE WHEN g % 29 <> 0 THEN 'k' || p || CASE WHEN g % 4 = 0 THEN 'é' ELSE '' END END,
        CASE WHEN g % 31 <> 0 THEN date '2000-01-01' + (p - 2000) END,
        CASE WHEN g % 2 = 0 THEN (g / 2 * 1919) % 2000 + 1 END,
        CASE WHEN g % 37 <> 0 THEN 'k' || p || CASE WHEN g % 3 = 0 THEN 'Z' ELSE 'a' END END,
        g % 7, CASE WHEN g % 41 <> 0 THEN g % 5 END, 'p' || g
    FROM (SELECT g, (g * 7919) % 4001 AS p FROM generate_series(1, 4000) g) s;
INSERT INTO shapes
    SELECT g, (g * 31) % 997 - 500, g::int8 * -3, g / 3.0, 'm' || (g * 31) % 997, date '2010-01-01' - g,
        NULL, 'm' || g, g % 7, g % 5, 'q' || g
    FROM generate_series(4001, 5000) g;
UPDATE shapes SET i4 = i4 + 1, f8 = -f8, t = t || 'u' WHERE id % 10 = 3;
UPDATE shapes SET pad = pad || 'x' WHERE id % 10 = 4;
DELETE FROM shapes WHERE id % 10 = 5;
BEGIN;
INSERT INTO shapes SELECT g, 15, 17000000119, 0, 'k17', '2000-01-18', 2000, 'k17', 3, 3, 'r'
    FROM generate_series(6001, 6100) g;
ROLLBACK;
CREATE TABLE killed (id int4, a int4, pad text) WITH (autovacuum_enabled = off);
INSERT INTO killed SELECT g, (g * 7919) % 20000, repeat('k', g % 50) FROM generate_series(1, 20000) g;
CREATE INDEX killed_a ON killed (a);
CREATE INDEX killed_a_desc ON killed (a DESC);
INSERT INTO killed SELECT g, (g * 13) % 20000, 'late' FROM generate_series(20001, 22000) g;
DELETE FROM killed WHERE a BETWEEN 1000 AND 3000 OR a % 7 = 0;
CREATE TABLE part (id int4, a int4, b int4, f float8, t text COLLATE \"C\")
    WITH (autovacuum_enabled = off);
CREATE INDEX part_a_even ON part (a) WHERE a % 2 = 0;
CREATE INDEX part_a_pos ON part (a DESC) WHERE a > 100 AND a IS NOT NULL;
CREATE INDEX part_b_in ON part (b) WHERE b IN (1, 2, 3);
CREATE INDEX part_b_nonneg ON part (b) WHERE b >= 0;
CREATE INDEX part_f_big ON part (f) WHERE f > 1.5;
CREATE INDEX part_t_from_k2 ON part (t DESC) WHERE t >= 'k2';
INSERT INTO part SELECT g, CASE WHEN g % 50 <> 0 THEN (g * 7919) % 3001 END, g % 10 - 2,
        ((g * 7919) % 3001) / 400.0, 'k' || (g * 7919) % 3001
    FROM generate_series(1, 3000) g;
DELETE FROM part WHERE id % 9 = 4;
CREATE TABLE bench_keys (a int4, b text) WITH (autovacuum_enabled = off);
CREATE INDEX bench_keys_0desc ON bench_keys (a DESC);
CREATE INDEX bench_keys_a ON bench_keys (a);
INSERT INTO bench_keys SELECT (g * 7919) % 3001, md5(g::text) FROM generate_series(1, 3000) g;
";

fn cluster(bin: &Path) -> &'static Cluster {
    static C: OnceLock<Cluster> = OnceLock::new();
    C.get_or_init(|| {
        let dir = common::pg_cluster_dir_for_process("pageio-btree-shapes-");
        let root = dir.path().to_path_buf();
        let data = initdb(bin, &root);
        let server = PgServer::start(bin, &root);
        server.psql(SETUP);
        let as_sql = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        // A sequential read of every table, as any real cluster's tables get: it sets the
        // hint bits of the rows written above (and may prune pages).
        psql_rows(
            bin,
            &root,
            &as_sql(&[
                "SET enable_indexscan = off",
                "SET enable_bitmapscan = off",
                "SELECT count(*) FROM shapes",
                "SELECT count(*) FROM killed",
                "SELECT count(*) FROM part",
                "SELECT count(*) FROM bench_keys",
            ]),
        );
        // PostgreSQL's own index scans over the deleted keys mark their leaf items dead
        // (kill_prior_tuple); run twice so both the read and the kill happen.
        let scan = "SELECT count(*), sum(id) FROM killed WHERE a BETWEEN 0 AND 6000";
        let desc = "SELECT count(*), sum(id) FROM (SELECT id FROM killed WHERE a BETWEEN 0 AND 6000 ORDER BY a DESC) s";
        psql_rows(
            bin,
            &root,
            &as_sql(&[
                "SET enable_seqscan = off",
                "SET enable_bitmapscan = off",
                "SET max_parallel_workers_per_gather = 0",
                scan,
                scan,
                desc,
                desc,
            ]),
        );
        let mut setup = as_sql(&[
            "SET max_parallel_workers_per_gather = 0",
            "SET TimeZone = 'UTC'",
        ]);
        let queries = every_sql();
        setup.extend(queries.iter().cloned());
        let rows = psql_rows(bin, &root, &setup);
        assert_eq!(rows.len(), queries.len(), "one row per query: {rows:?}");
        let answers = queries.into_iter().zip(rows).collect();
        let index_paths = psql_rows(
            bin,
            &root,
            &as_sql(&["SELECT relname, pg_relation_filepath(oid) FROM pg_class WHERE relkind = 'i' AND relnamespace = 'public'::regnamespace"]),
        )
        .into_iter()
        .map(|r| (r[0].clone(), r[1].clone()))
        .collect();
        psql_rows(bin, &root, &as_sql(&["CHECKPOINT"]));
        drop(server);
        Cluster {
            _dir: dir,
            data,
            answers,
            index_paths,
        }
    })
}

/// Runs `pageio scan` on the cluster; exit code, stdout, stderr.
fn run(data: &Path, args: &[&str]) -> (i32, String, String) {
    let pgdata = data.display().to_string();
    let mut all = vec!["scan", "--pgdata", &pgdata];
    all.extend_from_slice(args);
    let out = pageio_bounded(&all, RUN_BOUND_SECS);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// One scan: its aggregates' texts (NULL as ""), or the exit code and stderr of a refusal.
fn scan(
    c: &Cluster,
    table: &str,
    select: &str,
    predicate: Option<&str>,
    kind: &str,
    index: Option<&str>,
) -> Result<Vec<String>, (i32, String)> {
    // The io_methods take turns, so each meets every shape without tripling the runs (the
    // shapes are the index walk's business; the methods' own suite is aio_conformance).
    static TURN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let method = IO_METHODS[TURN.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 3];
    let mut args = vec![
        "--table",
        table,
        "--select",
        select,
        "--kind",
        kind,
        "--json",
        "--io-method",
        method,
    ];
    if let Some(p) = predicate {
        args.extend(["--where", p]);
    }
    if let Some(i) = index {
        args.extend(["--index", i]);
    }
    let (code, stdout, stderr) = run(&c.data, &args);
    if code != 0 {
        return Err((code, stderr));
    }
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    Ok(report["aggregates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["text"].as_str().unwrap_or("").to_string())
        .collect())
}

/// Checks one scan against PostgreSQL's answer; returns a line describing a mismatch.
fn check(
    c: &Cluster,
    table: &str,
    select: &str,
    predicate: Option<&str>,
    kind: &str,
    index: Option<&str>,
    collate_c: Option<&str>,
) -> Option<String> {
    let sql = sql_of(table, select, predicate, collate_c);
    let expected = &c.answers[&sql];
    let what = format!(
        "{sql} (--kind {kind}{})",
        index.map(|i| format!(" --index {i}")).unwrap_or_default()
    );
    match scan(c, table, select, predicate, kind, index) {
        Ok(got) if &got == expected => None,
        Ok(got) => Some(format!("{what}: pageio {got:?}, PostgreSQL {expected:?}")),
        Err((code, stderr)) => Some(format!("{what}: exit {code}: {stderr}")),
    }
}

/// (LP_DEAD items, posting-list tuples) on the leaf pages of the btree file at `path`, read
/// straight from the bytes (`ItemIdData`: lp_off 15 bits, lp_flags 2, lp_len 15).
fn leaf_item_states(path: &Path) -> (usize, usize) {
    let bytes = std::fs::read(path).unwrap();
    let (mut dead, mut posting) = (0, 0);
    for page in bytes.chunks_exact(8192).skip(1) {
        let flags = u16::from_le_bytes([page[8192 - 4], page[8192 - 3]]);
        if flags & 1 == 0 {
            continue; // not a leaf
        }
        let lower = u16::from_le_bytes([page[12], page[13]]) as usize;
        for lp in page[24..lower.min(8192)].chunks_exact(4) {
            let raw = u32::from_le_bytes([lp[0], lp[1], lp[2], lp[3]]);
            let (off, lp_flags, len) = ((raw & 0x7fff) as usize, (raw >> 15) & 3, raw >> 17);
            if lp_flags == 3 {
                dead += 1;
            }
            if lp_flags == 1 && len >= 8 && off + 8 <= 8192 {
                let posid = u16::from_le_bytes([page[off + 4], page[off + 5]]);
                let info = u16::from_le_bytes([page[off + 6], page[off + 7]]);
                if info & 0x2000 != 0 && posid & 0x2000 != 0 {
                    posting += 1;
                }
            }
        }
    }
    (dead, posting)
}

#[test]
fn every_btree_shape_gives_postgres_answers() {
    let Some(bin) = pg_bin() else { return };
    let c = cluster(&bin);
    // The shapes this test is about are really on disk.
    let (_, posting) = leaf_item_states(&c.data.join(&c.index_paths["dup_asc"]));
    assert!(posting > 0, "dup_asc has no posting lists");
    let mut failures = Vec::new();
    for key in KEYS {
        let collate = key.collate_c.then_some(key.column);
        for &p in key.predicates {
            let mut runs: Vec<(&str, Option<&str>)> = vec![("seq", None)];
            if p.is_some() {
                // The index pageio picks for --where.
                runs.push(("bitmap", None));
                runs.push(("index", None));
            }
            for index in key.indexes {
                runs.push(("bitmap", Some(index)));
                runs.push(("index", Some(index)));
            }
            for (kind, index) in runs {
                failures.extend(check(c, "shapes", key.select, p, kind, index, collate));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} scans differ from PostgreSQL:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn killed_index_items_are_skipped_not_reported() {
    let Some(bin) = pg_bin() else { return };
    let c = cluster(&bin);
    let dead: usize = KILLED_INDEXES
        .iter()
        .map(|i| leaf_item_states(&c.data.join(&c.index_paths[*i])).0)
        .sum();
    assert!(
        dead > 0,
        "PostgreSQL's index scans killed no index items: the case tests nothing"
    );
    let mut failures = Vec::new();
    for &p in KILLED_PREDICATES {
        failures.extend(check(c, "killed", KILLED_SELECT, p, "seq", None, None));
        for index in KILLED_INDEXES {
            for kind in ["bitmap", "index"] {
                failures.extend(check(
                    c,
                    "killed",
                    KILLED_SELECT,
                    p,
                    kind,
                    Some(index),
                    None,
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn partial_indexes_are_used_only_when_implied() {
    let Some(bin) = pg_bin() else { return };
    let c = cluster(&bin);
    let mut failures = Vec::new();
    for case in PARTIAL_CASES {
        failures.extend(check(
            c,
            "part",
            PART_SELECT,
            case.predicate,
            "seq",
            None,
            None,
        ));
        for kind in ["bitmap", "index"] {
            match &case.expect {
                Expect::Answer => failures.extend(check(
                    c,
                    "part",
                    PART_SELECT,
                    case.predicate,
                    kind,
                    case.index,
                    None,
                )),
                Expect::Refused(fragments) => {
                    match scan(c, "part", PART_SELECT, case.predicate, kind, case.index) {
                        Err((2, stderr)) if fragments.iter().all(|f| stderr.contains(f)) => {}
                        other => failures.push(format!(
                            "{:?} --index {:?} (--kind {kind}): expected a refusal holding {fragments:?}, got {other:?}",
                            case.predicate, case.index
                        )),
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn an_index_of_another_collation_is_refused_by_name() {
    let Some(bin) = pg_bin() else { return };
    let c = cluster(&bin);
    match scan(
        c,
        "shapes",
        "count(*)",
        Some("tc < 'k2'"),
        "bitmap",
        Some("tc_a_default"),
    ) {
        Err((2, stderr)) => assert!(
            stderr.contains(
                "index \"tc_a_default\" orders its text keys by collation \"default\" (oid 100)"
            ),
            "{stderr}"
        ),
        other => panic!("tc_a_default was used: {other:?}"),
    }
}

#[test]
fn predicate_operators_are_postgres_operators() {
    let Some(bin) = pg_bin() else { return };
    let dir = pg_cluster_dir("pageio-btree-ops-");
    initdb(&bin, dir.path());
    let server = PgServer::start(&bin, dir.path());
    let known = pageio::scan::PREDICATE_OPERATORS;
    let list: Vec<String> = known.iter().map(|(oid, _)| oid.to_string()).collect();
    let out = server.psql(&format!(
        "SELECT oid || ' ' || oprname FROM pg_operator WHERE oid IN ({}) ORDER BY oid",
        list.join(", ")
    ));
    drop(server);
    let mut want: Vec<String> = known.iter().map(|(o, n)| format!("{o} {n}")).collect();
    want.sort_by_key(|s| s.split(' ').next().unwrap().parse::<u32>().unwrap());
    let got: Vec<String> = out.lines().map(str::to_string).collect();
    assert_eq!(got, want);
}

/// Rows of `bench_keys`: its keys `(g * 7919) % 3001` are 1..=3000, each once.
const BENCH_KEYS_ROWS: u64 = 3000;

#[test]
fn bench_on_a_table_sweeps_its_own_keys_and_labels_what_came_back() {
    let Some(bin) = pg_bin() else { return };
    let c = cluster(&bin);
    let out = tempfile::tempdir().unwrap();
    let pgdata = c.data.display().to_string();
    let out_s = out.path().display().to_string();
    let rows = BENCH_KEYS_ROWS.to_string();
    let o = pageio_bounded(
        &[
            "bench",
            "--pgdata",
            &pgdata,
            "--table",
            "bench_keys",
            "--rows",
            &rows,
            "--quick",
            "--repeats",
            "1",
            "--scans",
            "seq,bitmap",
            "--methods",
            "sync",
            "--io",
            "buffered",
            "--cache",
            "warm",
            "--device",
            "none",
            "--no-progress",
            "--out",
            &out_s,
        ],
        RUN_BOUND_SECS * 3,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let runs: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("runs.json")).unwrap())
            .unwrap();
    let runs = runs.as_array().unwrap();
    let mut by_step: BTreeMap<(String, u64), u64> = BTreeMap::new();
    let mut last_step = 0;
    for r in runs {
        let got = r["rows"].as_u64().unwrap();
        let (lo, hi) = (r["lo"].as_f64().unwrap(), r["hi"].as_f64().unwrap());
        let expected = (1..=BENCH_KEYS_ROWS)
            .filter(|&k| k as f64 >= lo && k as f64 <= hi)
            .count() as u64;
        assert_eq!(got, expected, "{r}");
        assert_eq!(r["table_rows"].as_u64(), Some(BENCH_KEYS_ROWS), "{r}");
        // The record says the share it returned, not the share it was planned for.
        let share = r["selectivity"].as_f64().unwrap();
        assert!(
            (share - got as f64 / BENCH_KEYS_ROWS as f64).abs() < 1e-12,
            "{r}"
        );
        // Moved onto the keys 1..=3000, each query returns about the rows it was planned
        // for (the range is the planned share of the key range; keys are whole numbers).
        let target = r["target_rows"].as_u64().unwrap();
        assert!(
            got.abs_diff(target) <= 2,
            "planned {target} rows, got {got}: {r}"
        );
        let step = r["step"].as_u64().unwrap();
        last_step = last_step.max(step);
        by_step.insert((r["scan"].as_str().unwrap().to_string(), step), got);
    }
    // The sweep's last step reads most of the table, and the bitmap scan (through the
    // ascending btree, not the DESC one named first) agrees with the sequential scan at
    // every step.
    let last = by_step[&("seq".to_string(), last_step)];
    assert!(
        last >= BENCH_KEYS_ROWS * 3 / 4,
        "the last step returned {last} of {BENCH_KEYS_ROWS} rows"
    );
    for ((scan, step), got) in &by_step {
        if scan == "bitmap" {
            assert_eq!(
                Some(got),
                by_step.get(&("seq".to_string(), *step)),
                "step {step}"
            );
        }
    }
    // summary.md labels each row with the share its rows are of the table, and prints no
    // claim that these runs cannot answer (one method, no index scans).
    let summary = std::fs::read_to_string(out.path().join("summary.md")).unwrap();
    let mut labelled = 0;
    for line in summary
        .lines()
        .filter(|l| l.starts_with("| ") && l.contains('%'))
    {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let (Some(label), Some(Ok(rows))) = (cells.get(1), cells.get(2).map(|r| r.parse::<f64>()))
        else {
            continue;
        };
        assert_eq!(
            *label,
            format!("{:.4}%", rows / BENCH_KEYS_ROWS as f64 * 100.0),
            "{line}"
        );
        labelled += 1;
    }
    assert!(labelled >= 10, "{labelled} labelled rows in\n{summary}");
    // (Claims 4 and 5 say how to measure them: that is not an empty heading.)
    for heading in ["**1. ", "**2. ", "**3. "] {
        assert!(
            !summary.contains(heading),
            "empty claim {heading} in\n{summary}"
        );
    }
}
