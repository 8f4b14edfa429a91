//! `pageio scan --table NAME --select …` against a real PostgreSQL 18 cluster built here,
//! compared value for value with what PostgreSQL answers to the same SELECT.
//!
//! The cluster holds: a table of every type pageio reads (int2/4/8, real, double precision,
//! numeric with several scales and NaN, bool, date with a BC date, timestamp with
//! -infinity, timestamptz, text, varchar, char(n), bytea) plus types it only walks (jsonb,
//! uuid), NULLs in every column, a dropped column, columns added with defaults after rows
//! existed (attmissingval, fixed and varlena); a TOAST table with uncompressed external
//! values (STORAGE EXTERNAL), pglz-compressed in-line values and pglz-compressed external
//! values; a table in a non-default schema, one in a second database, one in a
//! tablespace, an unlogged table with a dropped column, a partitioned table's partitions
//! and a table rewritten by VACUUM FULL. PostgreSQL's answers are stored before the server
//! stops; then every query runs under sync, worker and io_uring and must print exactly
//! the same values. Bitmap and index scans with `--where` on an int4, a float8 and a date
//! column must give PostgreSQL's answers too. (This PostgreSQL build has no lz4: lz4
//! values are tested in the library's unit tests with blocks made by the lz4_flex crate.)
//!
//! PostgreSQL comes from `bench/setup-postgres.sh` or `$PAGEIO_PG_BIN`; without it the
//! tests print a skip line, except under `CI`, where they fail.

mod common;
use common::{chown_to_pg_user, initdb, pageio_bounded, pg_bin, pg_ok, PgServer};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Rows of the table `pageio bench --table NAME` runs on; its key `a` is
/// `g * 7919 mod 100000` for g in 1..=BENCH_ROWS, so every count is known here.
const BENCH_ROWS: u64 = 2000;

/// The longest one pageio run may take on these small tables before the test fails.
const RUN_BOUND_SECS: u64 = 120;

/// One query: the table as passed to `--table`, the database PostgreSQL runs it in, the
/// FROM clause it uses, the select list (the same text for both) and the predicate.
struct Case {
    name: &'static str,
    table: &'static str,
    database: &'static str,
    from: &'static str,
    select: &'static str,
    predicate: Option<&'static str>,
    kinds: &'static [&'static str],
}

const TYPES_SELECT: &str = "count(*), count(i2), sum(i2), min(i2), max(i2), sum(id), sum(i8), \
    min(i8), max(i8), sum(f4), min(f4), max(f4), sum(f8), min(f8), max(f8), sum(num), min(num), \
    max(num), sum(num2), max(num2), min(d), max(d), min(ts), max(ts), min(tstz), max(tstz), \
    min(t), max(t), min(vc), max(vc), min(bp), max(bp), min(by), max(by), \
    sum(octet_length(t)), sum(octet_length(vc)), sum(octet_length(bp)), sum(octet_length(by)), \
    count(flag), count(js), count(u), sum(late), min(late), count(late_t), min(late_t), \
    max(late_t), sum(octet_length(late_t)), avg(i2), avg(id), avg(i8), avg(f4), avg(f8), \
    avg(num), avg(late)";

const CASES: &[Case] = &[
    Case {
        name: "every type",
        table: "types",
        database: "postgres",
        from: "types",
        select: TYPES_SELECT,
        predicate: None,
        kinds: &["seq"],
    },
    Case {
        name: "int4 range",
        table: "public.types",
        database: "postgres",
        from: "types",
        select: "count(*), sum(i8), max(t), sum(octet_length(by)), min(tstz), sum(num)",
        predicate: Some("id between 100 and 1999"),
        kinds: &["seq", "bitmap", "index"],
    },
    Case {
        name: "float8 range",
        table: "types",
        database: "postgres",
        from: "types",
        select: "count(*), sum(f8), min(id), max(num), count(t), avg(num), avg(f8)",
        predicate: Some("f8 between -5 and 10.5"),
        kinds: &["seq", "bitmap", "index"],
    },
    Case {
        name: "date lower bound",
        table: "types",
        database: "postgres",
        from: "types",
        select: "count(*), min(d), max(d), sum(i2)",
        predicate: Some("d >= '2001-01-01'"),
        kinds: &["seq", "bitmap", "index"],
    },
    Case {
        name: "text range",
        table: "types",
        database: "postgres",
        from: "types",
        select: "count(*), sum(id), min(vc), max(vc)",
        predicate: Some("vc < '4'"),
        kinds: &["seq", "bitmap", "index"],
    },
    Case {
        name: "bpchar range",
        table: "types",
        database: "postgres",
        from: "types",
        select: "count(*), sum(id), min(bp), max(bp)",
        predicate: Some("bp between 'a' and 'c  '"),
        kinds: &["seq", "bitmap", "index"],
    },
    Case {
        name: "compressed text keys",
        table: "toasty",
        database: "postgres",
        from: "toasty",
        select: "count(*), sum(id), min(comp)",
        predicate: Some("comp >= 'abc3'"),
        kinds: &["seq", "bitmap", "index"],
    },
    Case {
        name: "TOAST: external, compressed in line, compressed external",
        table: "toasty",
        database: "postgres",
        from: "toasty",
        select: "count(*), sum(octet_length(big)), min(big), max(big), \
            sum(octet_length(comp)), min(comp), max(comp), sum(octet_length(ec)), min(ec), max(ec)",
        predicate: None,
        kinds: &["seq"],
    },
    Case {
        name: "non-default schema, column added with a default",
        table: "app.accounts",
        database: "postgres",
        from: "app.accounts",
        select: "count(*), sum(id), sum(balance), min(name), max(name), sum(extra), count(extra), min(extra)",
        predicate: Some("id between 2 and 3050"),
        kinds: &["seq", "bitmap"],
    },
    Case {
        name: "second database",
        table: "second.public.other",
        database: "second",
        from: "other",
        select: "count(*), sum(x), max(y)",
        predicate: Some("x between 10 and 500"),
        kinds: &["seq", "index"],
    },
    Case {
        name: "tablespace",
        table: "in_ts",
        database: "postgres",
        from: "in_ts",
        select: "count(*), sum(a), sum(octet_length(b))",
        predicate: None,
        kinds: &["seq"],
    },
    Case {
        name: "unlogged, dropped column",
        table: "ulog",
        database: "postgres",
        from: "ulog",
        select: "count(*), sum(a), min(b), max(b), count(b)",
        predicate: None,
        kinds: &["seq"],
    },
    Case {
        name: "partition 1",
        table: "parted_1",
        database: "postgres",
        from: "parted_1",
        select: "count(*), sum(k), max(v)",
        predicate: None,
        kinds: &["seq"],
    },
    Case {
        name: "partition 2",
        table: "parted_2",
        database: "postgres",
        from: "parted_2",
        select: "count(*), sum(k), max(v)",
        predicate: None,
        kinds: &["seq"],
    },
    Case {
        name: "rewritten by VACUUM FULL",
        table: "rewritten",
        database: "postgres",
        from: "rewritten",
        select: "count(*), sum(a), max(b)",
        predicate: Some("a between 1 and 4000"),
        kinds: &["seq", "bitmap"],
    },
    // PostgreSQL 18: SELECT count(*) FROM lits WHERE r = 0.1 → 0.
    Case {
        name: "real = numeric literal (float8 compare)",
        table: "lits",
        database: "postgres",
        from: "lits",
        select: "count(*), sum(i4), min(r), max(s), min(dt), max(tz)",
        predicate: Some("r = 0.1"),
        kinds: &["seq", "bitmap", "index"],
    },
    // PostgreSQL 18: SELECT count(*) FROM lits WHERE r = '0.1' → 1.
    Case {
        name: "real = quoted literal (real compare)",
        table: "lits",
        database: "postgres",
        from: "lits",
        select: "count(*), sum(i4), min(r), max(s), min(dt), max(tz)",
        predicate: Some("r = '0.1'"),
        kinds: &["seq", "bitmap", "index"],
    },
    // PostgreSQL 18: SELECT count(*) FROM lits WHERE r between 0.1 and 0.3 → 2.
    Case {
        name: "real between numeric literals",
        table: "lits",
        database: "postgres",
        from: "lits",
        select: "count(*), sum(i4), min(r), max(s), min(dt), max(tz)",
        predicate: Some("r between 0.1 and 0.3"),
        kinds: &["seq", "bitmap", "index"],
    },
    // PostgreSQL 18: SELECT count(*) FROM lits WHERE r >= 0.7 → 93.
    Case {
        name: "real >= numeric literal",
        table: "lits",
        database: "postgres",
        from: "lits",
        select: "count(*), sum(i4), min(r), max(s), min(dt), max(tz)",
        predicate: Some("r >= 0.7"),
        kinds: &["seq", "bitmap", "index"],
    },
    // PostgreSQL 18: SELECT count(*) FROM lits WHERE r < 1e39 → 100.
    Case {
        name: "real < literal beyond real",
        table: "lits",
        database: "postgres",
        from: "lits",
        select: "count(*), sum(i4), min(r), max(s), min(dt), max(tz)",
        predicate: Some("r < 1e39"),
        kinds: &["seq", "bitmap", "index"],
    },
    // PostgreSQL 18: SELECT count(*) FROM lits WHERE f8 > 5 → 50.
    Case {
        name: "float8 > integer literal",
        table: "lits",
        database: "postgres",
        from: "lits",
        select: "count(*), sum(i4), min(r), max(s), min(dt), max(tz)",
        predicate: Some("f8 > 5"),
        kinds: &["seq"],
    },
    // PostgreSQL 18: SELECT count(*) FROM lits WHERE i2 < 40000 → 100.
    Case {
        name: "int2 < literal beyond int2",
        table: "lits",
        database: "postgres",
        from: "lits",
        select: "count(*), sum(i4), min(r), max(s), min(dt), max(tz)",
        predicate: Some("i2 < 40000"),
        kinds: &["seq", "bitmap", "index"],
    },
    // PostgreSQL 18: SELECT count(*) FROM lits WHERE i2 = 70000 → 0.
    Case {
        name: "int2 = literal beyond int2",
        table: "lits",
        database: "postgres",
        from: "lits",
        select: "count(*), sum(i4), min(r), max(s), min(dt), max(tz)",
        predicate: Some("i2 = 70000"),
        kinds: &["seq", "bitmap", "index"],
    },
    // PostgreSQL 18: SELECT count(*) FROM lits WHERE i2 <> 70000 → 100.
    Case {
        name: "int2 <> literal beyond int2",
        table: "lits",
        database: "postgres",
        from: "lits",
        select: "count(*), sum(i4), min(r), max(s), min(dt), max(tz)",
        predicate: Some("i2 <> 70000"),
        kinds: &["seq", "bitmap", "index"],
    },
    // PostgreSQL 18: SELECT count(*) FROM lits WHERE i4 >= 5.5 → 95.
    Case {
        name: "int4 >= numeric literal",
        table: "lits",
        database: "postgres",
        from: "lits",
        select: "count(*), sum(i4), min(r), max(s), min(dt), max(tz)",
        predicate: Some("i4 >= 5.5"),
        kinds: &["seq", "bitmap", "index"],
    },
    // PostgreSQL 18: SELECT count(*) FROM lits WHERE -1e-5 < i4 → 100.
    Case {
        name: "int4 > negative numeric literal",
        table: "lits",
        database: "postgres",
        from: "lits",
        select: "count(*), sum(i4), min(r), max(s), min(dt), max(tz)",
        predicate: Some("-1e-5 < i4"),
        kinds: &["seq", "bitmap", "index"],
    },
    // PostgreSQL 18: SELECT count(*) FROM lits WHERE i4 = 99999999999 → 0.
    Case {
        name: "int4 = bigint literal",
        table: "lits",
        database: "postgres",
        from: "lits",
        select: "count(*), sum(i4), min(r), max(s), min(dt), max(tz)",
        predicate: Some("i4 = 99999999999"),
        kinds: &["seq", "bitmap", "index"],
    },
    // PostgreSQL 18: SELECT count(*) FROM lits WHERE i4 != 5 → 99.
    Case {
        name: "int4 != literal",
        table: "lits",
        database: "postgres",
        from: "lits",
        select: "count(*), sum(i4), min(r), max(s), min(dt), max(tz)",
        predicate: Some("i4 != 5"),
        kinds: &["seq", "bitmap", "index"],
    },
    // PostgreSQL 18: SELECT count(*) FROM lits WHERE i8 <= 1e30 → 100.
    Case {
        name: "int8 <= numeric literal beyond int8",
        table: "lits",
        database: "postgres",
        from: "lits",
        select: "count(*), sum(i4), min(r), max(s), min(dt), max(tz)",
        predicate: Some("i8 <= 1e30"),
        kinds: &["seq"],
    },
    // PostgreSQL 18: SELECT count(*) FROM lits WHERE n >= 1e0 → 91.
    Case {
        name: "numeric >= exponent literal",
        table: "lits",
        database: "postgres",
        from: "lits",
        select: "count(*), sum(i4), min(r), max(s), min(dt), max(tz)",
        predicate: Some("n >= 1e0"),
        kinds: &["seq"],
    },
    // PostgreSQL 18: SELECT count(*) FROM lits WHERE n < '2.5e0' → 24.
    Case {
        name: "numeric < quoted exponent literal",
        table: "lits",
        database: "postgres",
        from: "lits",
        select: "count(*), sum(i4), min(r), max(s), min(dt), max(tz)",
        predicate: Some("n < '2.5e0'"),
        kinds: &["seq"],
    },
    // PostgreSQL 18: SELECT count(*) FROM lits WHERE s between 'a and b' and 'c' → 34.
    Case {
        name: "text between literals holding and",
        table: "lits",
        database: "postgres",
        from: "lits",
        select: "count(*), sum(i4), min(r), max(s), min(dt), max(tz)",
        predicate: Some("s between 'a and b' and 'c'"),
        kinds: &["seq", "bitmap", "index"],
    },
    // PostgreSQL 18: SELECT count(*) FROM lits WHERE s > 'x=y' → 11.
    Case {
        name: "text > literal holding =",
        table: "lits",
        database: "postgres",
        from: "lits",
        select: "count(*), sum(i4), min(r), max(s), min(dt), max(tz)",
        predicate: Some("s > 'x=y'"),
        kinds: &["seq", "bitmap", "index"],
    },
    // PostgreSQL 18: SELECT count(*) FROM lits WHERE s = 'it''s' → 11.
    Case {
        name: "text = literal holding a quote",
        table: "lits",
        database: "postgres",
        from: "lits",
        select: "count(*), sum(i4), min(r), max(s), min(dt), max(tz)",
        predicate: Some("s = 'it''s'"),
        kinds: &["seq", "bitmap", "index"],
    },
    // PostgreSQL 18: SELECT count(*) FROM lits WHERE s = E'it\'s' → 11.
    Case {
        name: "text = escape-string literal",
        table: "lits",
        database: "postgres",
        from: "lits",
        select: "count(*), sum(i4), min(r), max(s), min(dt), max(tz)",
        predicate: Some("s = E'it\\'s'"),
        kinds: &["seq", "bitmap", "index"],
    },
    // PostgreSQL 18: SELECT count(*) FROM lits WHERE s <> 'Äx' → 89.
    Case {
        name: "text <> non-ASCII literal",
        table: "lits",
        database: "postgres",
        from: "lits",
        select: "count(*), sum(i4), min(r), max(s), min(dt), max(tz)",
        predicate: Some("s <> 'Äx'"),
        kinds: &["seq"],
    },
    // PostgreSQL 18: SELECT count(*) FROM lits WHERE dt < '0044-03-16 BC' → 20.
    Case {
        name: "date < BC literal",
        table: "lits",
        database: "postgres",
        from: "lits",
        select: "count(*), sum(i4), min(r), max(s), min(dt), max(tz)",
        predicate: Some("dt < '0044-03-16 BC'"),
        kinds: &["seq", "bitmap", "index"],
    },
    // PostgreSQL 18: SELECT count(*) FROM lits WHERE dt = 'infinity' → 10.
    Case {
        name: "date = infinity",
        table: "lits",
        database: "postgres",
        from: "lits",
        select: "count(*), sum(i4), min(r), max(s), min(dt), max(tz)",
        predicate: Some("dt = 'infinity'"),
        kinds: &["seq", "bitmap", "index"],
    },
    // PostgreSQL 18: SELECT count(*) FROM lits WHERE dt > '-infinity' → 90.
    Case {
        name: "date > -infinity",
        table: "lits",
        database: "postgres",
        from: "lits",
        select: "count(*), sum(i4), min(r), max(s), min(dt), max(tz)",
        predicate: Some("dt > '-infinity'"),
        kinds: &["seq", "bitmap", "index"],
    },
    // PostgreSQL 18: SELECT count(*) FROM lits WHERE dt >= '2020-03-01 05:00' → 38.
    Case {
        name: "date >= timestamp literal",
        table: "lits",
        database: "postgres",
        from: "lits",
        select: "count(*), sum(i4), min(r), max(s), min(dt), max(tz)",
        predicate: Some("dt >= '2020-03-01 05:00'"),
        kinds: &["seq", "bitmap", "index"],
    },
    // PostgreSQL 18: SELECT count(*) FROM lits WHERE tz >= '2020-01-01 05:00+02' → 98.
    Case {
        name: "timestamptz >= literal with offset",
        table: "lits",
        database: "postgres",
        from: "lits",
        select: "count(*), sum(i4), min(r), max(s), min(dt), max(tz)",
        predicate: Some("tz >= '2020-01-01 05:00+02'"),
        kinds: &["seq", "bitmap", "index"],
    },
    // PostgreSQL 18: SELECT count(*) FROM lits WHERE tz between '0044-03-15 12:00+01 BC' and 'infinity' → 100.
    Case {
        name: "timestamptz between BC and infinity",
        table: "lits",
        database: "postgres",
        from: "lits",
        select: "count(*), sum(i4), min(r), max(s), min(dt), max(tz)",
        predicate: Some("tz between '0044-03-15 12:00+01 BC' and 'infinity'"),
        kinds: &["seq", "bitmap", "index"],
    },
    // PostgreSQL 18: SELECT count(*) FROM lits WHERE dt >= timestamp '2020-01-05 05:00' → 78.
    Case {
        name: "date >= typed timestamp literal (compared as timestamps)",
        table: "lits",
        database: "postgres",
        from: "lits",
        select: "count(*), sum(i4), min(r), max(s), min(dt), max(tz)",
        predicate: Some("dt >= timestamp '2020-01-05 05:00'"),
        kinds: &["seq", "bitmap", "index"],
    },
    // PostgreSQL 18: SELECT count(*) FROM lits WHERE dt = timestamp '2020-01-05 05:00' → 0.
    Case {
        name: "date = typed timestamp literal off midnight",
        table: "lits",
        database: "postgres",
        from: "lits",
        select: "count(*), sum(i4), min(r), max(s), min(dt), max(tz)",
        predicate: Some("dt = timestamp '2020-01-05 05:00'"),
        kinds: &["seq", "bitmap", "index"],
    },
    // PostgreSQL 18: SELECT count(*) FROM lits WHERE dt = '2020-01-05 05:00' → 1.
    Case {
        name: "date = quoted timestamp literal (read as a date)",
        table: "lits",
        database: "postgres",
        from: "lits",
        select: "count(*), sum(i4), min(r), max(s), min(dt), max(tz)",
        predicate: Some("dt = '2020-01-05 05:00'"),
        kinds: &["seq", "bitmap", "index"],
    },
    // PostgreSQL 18: SELECT count(*) FROM lits WHERE dt < timestamptz '2020-01-05 00:00+00' → 21.
    Case {
        name: "date < typed timestamptz literal",
        table: "lits",
        database: "postgres",
        from: "lits",
        select: "count(*), sum(i4), min(r), max(s), min(dt), max(tz)",
        predicate: Some("dt < timestamptz '2020-01-05 00:00+00'"),
        kinds: &["seq", "bitmap", "index"],
    },
    // PostgreSQL 18: SELECT count(*) FROM lits WHERE dt <= '2020-01-05'::timestamp → 22.
    Case {
        name: "date <= cast timestamp literal",
        table: "lits",
        database: "postgres",
        from: "lits",
        select: "count(*), sum(i4), min(r), max(s), min(dt), max(tz)",
        predicate: Some("dt <= '2020-01-05'::timestamp"),
        kinds: &["seq", "bitmap", "index"],
    },
    // PostgreSQL 18: SELECT count(*) FROM lits WHERE tz > date '2020-01-02' → 76.
    Case {
        name: "timestamptz > typed date literal",
        table: "lits",
        database: "postgres",
        from: "lits",
        select: "count(*), sum(i4), min(r), max(s), min(dt), max(tz)",
        predicate: Some("tz > date '2020-01-02'"),
        kinds: &["seq", "bitmap", "index"],
    },
    // PostgreSQL 18: SELECT count(*) FROM lits WHERE tz <= timestamp without time zone '2020-01-01 10:00' → 10.
    Case {
        name: "timestamptz <= timestamp without time zone literal",
        table: "lits",
        database: "postgres",
        from: "lits",
        select: "count(*), sum(i4), min(r), max(s), min(dt), max(tz)",
        predicate: Some("tz <= timestamp without time zone '2020-01-01 10:00'"),
        kinds: &["seq", "bitmap", "index"],
    },
    // PostgreSQL 18: SELECT count(*) FROM lits WHERE dt = timestamp 'infinity' → 10.
    Case {
        name: "date = typed timestamp infinity",
        table: "lits",
        database: "postgres",
        from: "lits",
        select: "count(*), sum(i4), min(r), max(s), min(dt), max(tz)",
        predicate: Some("dt = timestamp 'infinity'"),
        kinds: &["seq", "bitmap", "index"],
    },
    // PostgreSQL 18: 3 rows, sum 6.
    Case {
        name: "unquoted --table folds to lower case",
        table: "T",
        database: "postgres",
        from: "t",
        select: "count(*), sum(x)",
        predicate: None,
        kinds: &["seq"],
    },
    // PostgreSQL 18: 5 rows, sum 15.
    Case {
        name: "quoted --table keeps its case",
        table: "\"T\"",
        database: "postgres",
        from: "\"T\"",
        select: "count(*), sum(x)",
        predicate: None,
        kinds: &["seq"],
    },
    // PostgreSQL 18: count 3, sum 9, max 4.
    Case {
        name: "dotted schema and table names, non-ASCII column",
        table: "\"s.dot\".\"t.x\"",
        database: "postgres",
        from: "\"s.dot\".\"t.x\"",
        select: "count(*), sum(Äx), max(\"Äx\")",
        predicate: Some("Äx >= 2"),
        kinds: &["seq", "bitmap", "index"],
    },
];

struct Cluster {
    _dir: tempfile::TempDir,
    data: PathBuf,
    /// Case name → PostgreSQL's values, in select-list order (NULL as "").
    answers: BTreeMap<&'static str, Vec<String>>,
}

/// Runs `sql` in `database` as one psql session (so a SET applies to what follows); the
/// fields of the result row separated by the unit separator, which no value here holds.
fn psql_row(bin: &Path, root: &Path, database: &str, sql: &[&str]) -> Vec<String> {
    let host = root.display().to_string();
    let mut args = vec![
        "-h",
        &host,
        "-U",
        "postgres",
        "-d",
        database,
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
    let out = pg_ok(bin, "psql", &args);
    out.strip_suffix('\n')
        .unwrap_or(&out)
        .split('\u{1f}')
        .map(str::to_string)
        .collect()
}

fn cluster(bin: &Path) -> &'static Cluster {
    static C: OnceLock<Cluster> = OnceLock::new();
    C.get_or_init(|| {
        let dir = common::pg_cluster_dir_for_process("pageio-scan-table-");
        let root = dir.path().to_path_buf();
        std::fs::create_dir(root.join("ts")).unwrap();
        chown_to_pg_user(&root.join("ts"));
        let data = initdb(bin, &root);
        let server = PgServer::start(bin, &root);
        server.psql(&format!(
            "CREATE TABLE types (id int4 PRIMARY KEY, i2 int2, gone text, i8 int8, f4 real,
                 f8 float8, num numeric, num2 numeric, flag bool, d date, ts timestamp,
                 tstz timestamptz, t text COLLATE \"C\", vc varchar(40) COLLATE \"C\",
                 bp char(8) COLLATE \"C\", by bytea, js jsonb, u uuid);
             INSERT INTO types SELECT g,
                 CASE WHEN g % 10 <> 1 THEN (g % 300 - 150)::int2 END,
                 'gone' || g,
                 CASE WHEN g % 10 <> 2 THEN g::int8 * 1000000007 END,
                 CASE WHEN g % 10 <> 3 THEN (g % 97) * 0.25 END,
                 CASE WHEN g % 10 <> 4 THEN (g % 101) * 0.5 - 20 END,
                 CASE WHEN g % 10 <> 5 THEN
                     CASE g % 3 WHEN 0 THEN round(g * 1.37, 2) WHEN 1 THEN g::numeric / 8
                     ELSE -g * 1000000000000::numeric END END,
                 CASE WHEN g = 77 THEN 'NaN'::numeric WHEN g % 10 <> 6 THEN g END,
                 CASE WHEN g % 10 <> 7 THEN g % 2 = 0 END,
                 CASE WHEN g = 7 THEN '0044-03-15 BC'::date
                      WHEN g % 10 <> 8 THEN date '2000-01-01' + (g * 37 % 2000 - 1000) END,
                 CASE WHEN g = 13 THEN '-infinity'::timestamp
                      WHEN g % 10 <> 9 THEN timestamp '2020-01-01' + g * interval '1 hour 17 minutes 3.25 seconds' END,
                 CASE WHEN g % 10 <> 0 THEN timestamptz '1999-12-31 23:00:00+00' + g * interval '3 days 1.5 seconds' END,
                 CASE WHEN g % 11 <> 0 THEN 'row ' || g || CASE WHEN g % 4 = 0 THEN ' é' ELSE ' Z' END END,
                 CASE WHEN g % 12 <> 0 THEN md5(g::text) END,
                 CASE WHEN g % 13 <> 0 THEN left(md5(g::text), g % 7) END,
                 CASE WHEN g % 14 <> 0 THEN decode(md5(g::text), 'hex') END,
                 CASE WHEN g % 15 <> 0 THEN jsonb_build_object('g', g) END,
                 CASE WHEN g % 16 <> 0 THEN md5(g::text)::uuid END
             FROM generate_series(1, 3000) g;
             ALTER TABLE types DROP COLUMN gone;
             ALTER TABLE types ADD COLUMN late int8 DEFAULT 42;
             ALTER TABLE types ADD COLUMN late_t text COLLATE \"C\" DEFAULT 'late default';
             INSERT INTO types (id, i2, late, late_t) SELECT g, 1, g, CASE WHEN g % 2 = 0 THEN 'v' || g END
                 FROM generate_series(3001, 3200) g;
             CREATE INDEX types_f8 ON types (f8);
             CREATE INDEX types_d ON types (d);
             CREATE INDEX types_vc ON types (vc);
             CREATE INDEX types_bp ON types (bp);
             CREATE TABLE toasty (id int, big text COLLATE \"C\", comp text COLLATE \"C\", ec text COLLATE \"C\");
             ALTER TABLE toasty ALTER COLUMN big SET STORAGE EXTERNAL;
             ALTER TABLE toasty ALTER COLUMN comp SET COMPRESSION pglz;
             ALTER TABLE toasty ALTER COLUMN ec SET COMPRESSION pglz;
             INSERT INTO toasty SELECT g, repeat(md5(g::text), 100 + g),
                 repeat('abc' || g, 700),
                 (SELECT string_agg(md5(g::text || x::text) || repeat('z', 32), '') FROM generate_series(1, 200 + g) x)
             FROM generate_series(1, 60) g;
             CREATE INDEX toasty_comp ON toasty (comp);
             CREATE SCHEMA app;
             CREATE TABLE app.accounts (id int PRIMARY KEY, name text COLLATE \"C\", balance int8);
             INSERT INTO app.accounts SELECT g, 'n' || g, g * 10 FROM generate_series(1, 3000) g;
             ALTER TABLE app.accounts ADD COLUMN extra int DEFAULT 7;
             INSERT INTO app.accounts SELECT g, 'm' || g, g, CASE WHEN g % 2 = 0 THEN g END FROM generate_series(3001, 3100) g;
             CREATE TABLESPACE ts LOCATION '{}';
             CREATE TABLE in_ts (a int8, b text) TABLESPACE ts;
             INSERT INTO in_ts SELECT g, repeat('y', g % 50) FROM generate_series(1, 2000) g;
             CREATE INDEX in_ts_b ON in_ts (b);
             CREATE UNLOGGED TABLE ulog (a int, gone text, b text COLLATE \"C\");
             INSERT INTO ulog SELECT g, 'x', 'z' || g FROM generate_series(1, 500) g;
             ALTER TABLE ulog DROP COLUMN gone;
             INSERT INTO ulog SELECT g, NULL FROM generate_series(501, 600) g;
             CREATE TABLE parted (k int, v text COLLATE \"C\") PARTITION BY RANGE (k);
             CREATE TABLE parted_1 PARTITION OF parted FOR VALUES FROM (0) TO (100);
             CREATE TABLE parted_2 PARTITION OF parted FOR VALUES FROM (100) TO (200);
             INSERT INTO parted SELECT g % 200, 'v' || g FROM generate_series(1, 4000) g;
             CREATE TABLE rewritten (a int, b text COLLATE \"C\");
             INSERT INTO rewritten SELECT g, 'r' || g FROM generate_series(1, 5000) g;
             CREATE INDEX rewritten_a ON rewritten (a);
             DELETE FROM rewritten WHERE a % 2 = 0;
             VACUUM FULL rewritten;
             CREATE TABLE bench_t (a float8, b text);
             INSERT INTO bench_t SELECT (g * 7919 % 100000)::float8, md5(g::text) FROM generate_series(1, {BENCH_ROWS}) g;
             CREATE INDEX bench_t_a ON bench_t (a);
             CREATE TABLE lits (r real, f8 float8, i2 int2, i4 int4, i8 int8, n numeric,
                 s text COLLATE \"C\", dt date, tz timestamptz);
             INSERT INTO lits SELECT (g / 10.0)::real, g / 10.0, g * 600 - 30000, g,
                 g * 100000000000, g / 10.0,
                 (ARRAY['a', 'a and b', 'b', 'c', 'd', 'x=y', 'it''s', 'Äx', 'A'])[g % 9 + 1],
                 CASE g % 10 WHEN 0 THEN '0044-03-15 BC'::date WHEN 1 THEN 'infinity'
                      WHEN 2 THEN '-infinity' ELSE date '2020-01-01' + g END,
                 timestamptz '2020-01-01 00:00+00' + g * interval '1 hour'
             FROM generate_series(1, 100) g;
             CREATE INDEX lits_r ON lits (r);
             CREATE INDEX lits_i2 ON lits (i2);
             CREATE INDEX lits_i4 ON lits (i4 DESC);
             CREATE INDEX lits_s ON lits (s);
             CREATE INDEX lits_dt ON lits (dt);
             CREATE INDEX lits_tz ON lits (tz);
             CREATE TABLE t (x int);
             INSERT INTO t VALUES (1), (2), (3);
             CREATE TABLE \"T\" (x int);
             INSERT INTO \"T\" VALUES (1), (2), (3), (4), (5);
             CREATE SCHEMA \"s.dot\";
             CREATE TABLE \"s.dot\".\"t.x\" (\"Äx\" int);
             INSERT INTO \"s.dot\".\"t.x\" VALUES (1), (2), (3), (4), (NULL);
             CREATE INDEX ON \"s.dot\".\"t.x\" (\"Äx\");
             CREATE DATABASE second",
            root.join("ts").display()
        ));
        psql_row(
            bin,
            &root,
            "second",
            &["CREATE TABLE other (x int, y text COLLATE \"C\")",
              "INSERT INTO other SELECT g, 'o' || g FROM generate_series(1, 1000) g",
              "CREATE INDEX other_x ON other (x)"],
        );
        // The value forms the TOAST case must exercise are really there.
        let forms = psql_row(
            bin,
            &root,
            "postgres",
            &["SELECT count(*) FILTER (WHERE pg_column_compression(comp) = 'pglz' AND pg_column_size(comp) < 2000),
                      count(*) FILTER (WHERE pg_column_compression(ec) = 'pglz' AND pg_column_size(ec) > 2000),
                      count(*) FILTER (WHERE pg_column_compression(big) IS NULL AND pg_column_size(big) > 2000)
               FROM toasty"],
        );
        assert_eq!(forms, ["60", "60", "60"], "in-line pglz, external pglz, external plain");
        let mut answers = BTreeMap::new();
        for case in CASES {
            let sql = format!(
                "SELECT {} FROM {}{}",
                case.select,
                case.from,
                case.predicate.map(|p| format!(" WHERE {p}")).unwrap_or_default()
            );
            // Index-only plans and parallel plans change nothing in the answers but the
            // summation order of floats; keep PostgreSQL on a plain sequential scan.
            let row = psql_row(
                bin,
                &root,
                case.database,
                &["SET TimeZone = 'UTC'", "SET max_parallel_workers_per_gather = 0", &sql],
            );
            answers.insert(case.name, row);
        }
        // No VACUUM: the tables stay as the writes and PostgreSQL's reads left them (hint
        // bits where a read set them), as on any production cluster.
        for db in ["postgres", "second"] {
            psql_row(bin, &root, db, &["CHECKPOINT"]);
        }
        drop(server);
        Cluster {
            _dir: dir,
            data,
            answers,
        }
    })
}

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

fn every_case(method: &str) {
    let Some(bin) = pg_bin() else { return };
    let c = cluster(&bin);
    for case in CASES {
        let expected = &c.answers[case.name];
        for kind in case.kinds {
            let mut args = vec![
                "--table",
                case.table,
                "--select",
                case.select,
                "--kind",
                kind,
                "--io-method",
                method,
                "--json",
            ];
            if let Some(p) = case.predicate {
                args.extend(["--where", p]);
            }
            let (code, stdout, stderr) = run(&c.data, &args);
            assert_eq!(code, 0, "{} ({kind}, {method}): {stderr}", case.name);
            let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
            let aggregates = report["aggregates"].as_array().unwrap();
            let got: Vec<String> = aggregates
                .iter()
                .map(|a| a["text"].as_str().unwrap_or("").to_string())
                .collect();
            assert_eq!(
                &got, expected,
                "{} ({kind} scan, {method}): pageio's values differ from PostgreSQL's",
                case.name
            );
            // The JSON value is the text when it is not an exact number.
            for a in aggregates {
                match &a["value"] {
                    serde_json::Value::Number(n) => {
                        let text = a["text"].as_str().unwrap();
                        if let Some(i) = n.as_i64() {
                            assert_eq!(i.to_string(), text);
                        } else {
                            assert_eq!(n.as_f64().unwrap(), text.parse::<f64>().unwrap());
                        }
                    }
                    serde_json::Value::String(s) => {
                        assert_eq!(Some(s.as_str()), a["text"].as_str())
                    }
                    // NULL: "value" null, "text" what psql prints, an empty string.
                    serde_json::Value::Null => assert_eq!(a["text"].as_str(), Some("")),
                    other => panic!("unexpected JSON value {other}"),
                }
            }
            assert_eq!(
                report["rows"].as_u64().unwrap().to_string(),
                expected[0],
                "{}: rows",
                case.name
            );
        }
    }
}

#[test]
fn every_case_sync() {
    every_case("sync");
}

#[test]
fn every_case_worker() {
    every_case("worker");
}

#[test]
fn every_case_io_uring() {
    every_case("io_uring");
}

#[test]
fn names_that_do_not_exist_are_refused_with_what_exists() {
    let Some(bin) = pg_bin() else { return };
    let c = cluster(&bin);
    let (code, _, err) = run(&c.data, &["--table", "nosuch", "--select", "count(*)"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("relation \"nosuch\" does not exist in database \"postgres\"")
            // Names that need quotes are listed quoted, so they can be pasted back.
            && err.contains("app.accounts, public.\"T\", public.bench_t")
            && err.contains("\"s.dot\".\"t.x\"")
            && err.contains("`pageio tables --pgdata"),
        "{err}"
    );
    let (code, _, err) = run(&c.data, &["--table", "ulog", "--select", "sum(nosuch)"]);
    assert_eq!(code, 2);
    assert!(
        err.contains(
            "column \"nosuch\" does not exist in table \"public.ulog\" (its columns: a, b)"
        ),
        "{err}"
    );
    let (code, _, err) = run(
        &c.data,
        &[
            "--table",
            "types",
            "--where",
            "i2 between 1 and 5",
            "--kind",
            "bitmap",
        ],
    );
    assert_eq!(code, 2);
    assert!(
        err.contains("no valid btree index whose first key column is \"i2\"")
            && err.contains("types_f8 (btree on f8)")
            && err.contains("types_pkey (btree on id)"),
        "{err}"
    );
    let (code, _, err) = run(
        &c.data,
        &[
            "--table", "types", "--index", "nosuch", "--kind", "index", "--where", "id = 3",
        ],
    );
    assert_eq!(code, 2);
    assert!(
        err.contains("index \"nosuch\" does not exist on the table"),
        "{err}"
    );
    let (code, _, err) = run(
        &c.data,
        &[
            "--table", "in_ts", "--where", "b = 'yy'", "--kind", "bitmap",
        ],
    );
    assert_eq!(code, 2);
    assert!(
        err.contains("\"in_ts_b\" orders its text keys by collation \"default\" (oid 100)"),
        "{err}"
    );
    let (code, _, err) = run(&c.data, &["--table", "types", "--select", "sum(t)"]);
    assert_eq!(code, 2);
    assert!(err.contains("function sum(text) does not exist"), "{err}");
    let (code, _, err) = run(&c.data, &["--table", "types", "--select", "max(js)"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("max(js): function max(jsonb) does not exist"),
        "{err}"
    );
    let (code, _, err) = run(&c.data, &["--table", "parted", "--select", "count(*)"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("partitioned table and has no storage"),
        "{err}"
    );
    let (code, _, err) = run(&c.data, &["--table", "types", "--database", "nosuch"]);
    assert_eq!(code, 2);
    assert!(err.contains("database \"nosuch\" does not exist"), "{err}");
    // Text output: one line per aggregate; a "C" column compares as PostgreSQL does.
    let (code, out, err) = run(
        &c.data,
        &["--table", "ulog", "--select", "count(*), max(b)"],
    );
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("WARNING"), "{err}");
    // Text of the database's default collation: byte order may differ, and it is said.
    let (code, out_ts, err) = run(
        &c.data,
        &["--table", "in_ts", "--select", "max(b)", "--json"],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("WARNING:  column \"b\" has collation \"default\" (not \"C\")"),
        "{err}"
    );
    let report: serde_json::Value = serde_json::from_str(&out_ts).unwrap();
    assert_eq!(report["warnings"].as_array().unwrap().len(), 1);
    assert!(
        out.contains("count(*) | 600\n") && out.contains("max(b)   | z99\n"),
        "{out}"
    );
}

#[test]
fn literals_postgresql_refuses_are_refused_with_its_message() {
    let Some(bin) = pg_bin() else { return };
    let c = cluster(&bin);
    // Each predicate with PostgreSQL 18's error for `SELECT count(*) FROM lits WHERE …`.
    let refused = [
        (
            "i2 = '70000'",
            "value \"70000\" is out of range for type smallint",
        ),
        (
            "i4 >= 'NaN'",
            "invalid input syntax for type integer: \"NaN\"",
        ),
        ("r < '1e39'", "\"1e39\" is out of range for type real"),
        ("s = 5", "operator does not exist: text = integer"),
        (
            "dt < '4714-11-23 BC'",
            "date out of range: \"4714-11-23 BC\"",
        ),
        (
            "dt = '2020-02-30'",
            "date/time field value out of range: \"2020-02-30\"",
        ),
        (
            "tz > '2020-01-01 05:00+16'",
            "time zone displacement out of range: \"2020-01-01 05:00+16\"",
        ),
        ("n > 1e131072", "value overflows numeric format"),
    ];
    for (predicate, message) in refused {
        let (code, _, err) = run(
            &c.data,
            &[
                "--table", "lits", "--select", "count(*)", "--where", predicate,
            ],
        );
        assert_eq!(code, 2, "{predicate}: {err}");
        assert!(err.contains(message), "{predicate}: {err}");
    }
    // f8 < 1e400: PostgreSQL 18 says "1000…0" (401 digits) is out of range for type double
    // precision.
    let (code, _, err) = run(&c.data, &["--table", "lits", "--where", "f8 < 1e400"]);
    assert_eq!(code, 2);
    assert!(
        err.contains(&format!(
            "\"1{}\" is out of range for type double precision",
            "0".repeat(400)
        )),
        "{err}"
    );
    // A column that does not exist: the ones that do, quoted where they must be.
    let (code, _, err) = run(
        &c.data,
        &["--table", "\"s.dot\".\"t.x\"", "--where", "äx = 1"],
    );
    assert_eq!(code, 2);
    assert!(
        err.contains(
            "column \"äx\" does not exist in table \"\"s.dot\".\"t.x\"\" (its columns: \"Äx\")"
        ),
        "{err}"
    );
}

#[test]
fn bench_resolves_a_table_by_name() {
    let Some(bin) = pg_bin() else { return };
    let c = cluster(&bin);
    let out = tempfile::tempdir().unwrap();
    let pgdata = c.data.display().to_string();
    let out_s = out.path().display().to_string();
    let rows = BENCH_ROWS.to_string();
    let o = pageio_bounded(
        &[
            "bench",
            "--pgdata",
            &pgdata,
            "--table",
            "bench_t",
            "--rows",
            &rows,
            "--quick",
            "--repeats",
            "1",
            "--scans",
            "seq,bitmap,index",
            "--methods",
            "sync,worker",
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
    let keys: Vec<f64> = (1..=BENCH_ROWS)
        .map(|g| (g * 7919 % 100_000) as f64)
        .collect();
    let runs = runs.as_array().unwrap();
    assert!(runs.len() >= 10, "{} records", runs.len());
    for r in runs {
        assert_eq!(r["dataset"], "bench_t", "{r}");
        let (lo, hi) = (r["lo"].as_f64().unwrap(), r["hi"].as_f64().unwrap());
        let expected = keys.iter().filter(|&&a| a >= lo && a <= hi).count() as u64;
        assert_eq!(r["rows"].as_u64().unwrap(), expected, "{r}");
    }
    // A key column that is not the first is refused, naming the first.
    let o = pageio_bounded(
        &[
            "bench",
            "--pgdata",
            &pgdata,
            "--table",
            "bench_t",
            "--key-column",
            "b",
            "--rows",
            &rows,
            "--quick",
            "--device",
            "none",
            "--no-progress",
            "--out",
            &out_s,
        ],
        RUN_BOUND_SECS,
    );
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("the first column of \"public.bench_t\" is \"a\""),
        "{err}"
    );
}

/// TOAST chunks located by one sequential read of the TOAST heap (the path for a TOAST table
/// without an index) give the same values as the index lookups the CLI uses.
#[test]
fn toast_values_without_the_toast_index() {
    use pageio::buffer::BufferPool;
    use pageio::catalog::{cluster_check_options, Catalog};
    use pageio::config::{IoConfig, IoMethodKind};
    use pageio::scan::query::{run_table_query, QuerySpec, TableQuery};
    use pageio::scan::ScanKind;
    use pageio::stream::DistancePolicy;
    use pageio::Aio;
    let Some(bin) = pg_bin() else { return };
    let c = cluster(&bin);
    let case = CASES
        .iter()
        .find(|c| c.name.starts_with("TOAST"))
        .expect("the TOAST case");
    for method in IoMethodKind::CONCRETE {
        let aio = Aio::new(IoConfig {
            io_method: method,
            ..IoConfig::default()
        })
        .unwrap();
        let pool = BufferPool::new(&aio, cluster_check_options(&c.data).unwrap()).unwrap();
        let relation = Catalog::open(&c.data, &pool)
            .unwrap()
            .resolve("toasty", "postgres")
            .unwrap();
        assert!(relation.toast.as_ref().unwrap().index_path.is_some());
        let mut query = TableQuery::plan(
            &c.data,
            &relation,
            &QuerySpec {
                select: case.select,
                predicate: None,
                kind: ScanKind::Seq,
                index: None,
            },
        )
        .unwrap();
        for by_index in [true, false] {
            query.set_toast_by_index(by_index);
            let r = run_table_query(&pool, &query, DistancePolicy::Adaptive).unwrap();
            let got: Vec<String> = r.aggregates.iter().map(|a| a.text()).collect();
            assert_eq!(
                &got, &c.answers[case.name],
                "{method}, by index: {by_index}"
            );
        }
    }
}
