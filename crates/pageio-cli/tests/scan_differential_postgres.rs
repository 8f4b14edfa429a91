//! A seeded differential test of `pageio scan --table` against a real PostgreSQL 18: random
//! schemas, random btrees and random write histories, every aggregate compared as text with
//! what psql prints for the same query.
//!
//! For each seed the generator (`difftest/mod.rs`) makes 1–3 tables of int2/int4/int8,
//! text and varchar (collation "C"), date and timestamp, float4/float8 and numeric columns —
//! some NULL-heavy, some with few distinct values, some TOAST-able; floats with NaN,
//! ±Infinity, -0 and denormals, numerics from 1e-16383 to 1e131000 and equal values of
//! different scales (`1.0`, `1.00`) — with btrees ASC and DESC, NULLS FIRST and LAST,
//! partial, multi-column, unique and primary keys, built before or in the middle of the
//! writes; then a history of inserts, HOT and non-HOT updates, deletes, rollbacks,
//! savepoints, row locks that make MultiXacts (a row locked in a transaction and updated in
//! its subtransaction, two sessions sharing a lock, a key-share lock beside an update),
//! `INSERT … ON CONFLICT`, two-phase commits, `VACUUM` on some tables only, checkpoints and
//! PostgreSQL index scans that kill index entries. At the end a transaction of some seeds
//! stays prepared and one stays open while the server stops. Nothing is vacuumed or frozen
//! to make an answer come out: pageio reads the rows as PostgreSQL left them, hint bits
//! unset and all.
//!
//! ```text
//!  initdb -k (one cluster for every seed)      seed N: CREATE SCHEMA seedN; tables, history
//!        │                                             (sessions 0..2 over the postgres crate)
//!        ▼                                     then every seed's final steps: PREPARE
//!  pg_ctl stop -m fast  ──►  cp -a data copy   TRANSACTION, an open BEGIN … left running
//!        │                         │
//!        ▼                         ▼
//!  pageio scan on `data`     PostgreSQL on `copy` (its reads set hint bits there only):
//!  (never started again)     sampled predicate bounds, then psql -X -At per query
//!        └──────────── compare every aggregate's text ──────────┘
//! ```
//!
//! Each table is asked with no predicate and with predicates on its indexed columns and a
//! few others (`between` with bounds drawn from the values, `=` on an existing value, `<`,
//! `<=`, `>`, `>=`), as a serial and a 2-thread parallel seq scan, and as a bitmap and an
//! index scan through every btree whose first key is the predicate column (and through the
//! one pageio picks itself). The io_method rotates over sync, worker and io_uring from run
//! to run, so every seed runs each of them; `PAGEIO_DIFF_ALL_METHODS=1` runs every query
//! under all three. A partial btree whose predicate the query does not imply cannot answer
//! it: pageio may refuse it with a message naming the partial index or its predicate
//! (counted as "refused"), but an answer through it must be right.
//!
//! Seeds: `PAGEIO_DIFF_SEED=N` runs seed N alone; `PAGEIO_DIFF_SEEDS=K` runs K seeds
//! starting at `PAGEIO_DIFF_SEED_START` (default 1); the default is 20 seeds (about two
//! minutes on two cores). A longer run, for a change to visibility, btrees or the scans:
//!
//! ```sh
//! PAGEIO_DIFF_SEEDS=200 cargo test --profile test-opt -p pageio-cli --test scan_differential_postgres -- --nocapture
//! ```
//!
//! (About 30 minutes on two cores shared with other builds; the pageio scans are most of
//! it.) Every mismatch prints the seed, table, query, scan kind, index (with the statement
//! that made it), io_method and both answers; the seed's whole SQL history is written to
//! `<target>/difftest/seed-N.sql`, every mismatch to `<target>/difftest/mismatches.txt`,
//! and the command that reruns only that seed is printed. `PAGEIO_DIFF_KEEP=1` keeps the
//! cluster and its copy (their paths are printed) to rerun `pageio scan` by hand. The test
//! fails on any mismatch or pageio error; `PAGEIO_DIFF_EXPECT_MISMATCHES=1` reports them
//! without failing (for work in progress only: the suite runs without it).
//!
//! PostgreSQL comes from `bench/setup-postgres.sh` or `$PAGEIO_PG_BIN`; without it the test
//! prints a skip line, except under `CI`, where it fails.

mod common;
mod difftest;

use common::{chown_to_pg_user, initdb, pg, pg_bin, pg_cluster_dir, run_bounded, with_watchdog};
use difftest::{ColType, Partial, Rng, SeedPlan, TableSpec, OPEN_SESSION};

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The longest one `pageio scan` of these small tables may take before the test fails.
const RUN_BOUND_SECS: u64 = 120;

/// The longest one psql query may take (the tables hold a few thousand rows).
const PSQL_BOUND_SECS: u64 = 60;

/// The whole test's bound: a fixed part for initdb and the copy, and a part per seed
/// (a seed takes 5–9 s on two shared cores; the bound is several times that).
fn test_bound_secs(seeds: u64) -> u64 {
    300 + 30 * seeds
}

/// A server statement may run this long (every statement here takes well under a second)
/// and wait this long for a lock (two sessions never wait on each other by design, so a
/// wait is a generator bug that must fail, not hang).
const SESSION_OPTIONS: &str = "-c statement_timeout=60000 -c lock_timeout=20000";

/// The text psql prints for NULL here, and what pageio's JSON null is compared as.
const NULL_TEXT: &str = "[NULL]";

/// psql's field separator: the unit separator, which no generated value holds (a `|` could
/// one day be in a text value).
const FIELD_SEPARATOR: &str = "\u{1f}";

const METHODS: [&str; 3] = ["sync", "worker", "io_uring"];

/// Data directories of servers this test started and has not stopped yet: stopped
/// (immediate) when the watchdog fires, whose thread would otherwise leave them running.
static RUNNING: Mutex<Vec<(PathBuf, PathBuf)>> = Mutex::new(Vec::new());

fn stop_immediate(bin: &Path, data: &Path) {
    let data = data.display().to_string();
    let _ = pg(
        bin,
        "pg_ctl",
        &["-D", &data, "-m", "immediate", "-w", "-t", "60", "stop"],
    );
}

/// A PostgreSQL server on `<root>/data`, listening on a socket in `root` only; stopped
/// (immediate) when dropped unless [`Server::stop`] stopped it cleanly.
struct Server {
    bin: PathBuf,
    root: PathBuf,
    running: bool,
}

impl Server {
    fn start(bin: &Path, root: &Path) -> Server {
        let data = root.join("data");
        let opts = format!("-k {} -c listen_addresses='' -c port=5432", root.display());
        let log = root.join("log").display().to_string();
        let out = pg(
            bin,
            "pg_ctl",
            &[
                "-D",
                &data.display().to_string(),
                "-o",
                &opts,
                "-l",
                &log,
                "-w",
                "-t",
                "120",
                "start",
            ],
        );
        assert!(
            out.status.success(),
            "pg_ctl start {}: {}{}\n{}",
            data.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(root.join("log")).unwrap_or_default()
        );
        RUNNING.lock().unwrap().push((bin.to_path_buf(), data));
        Server {
            bin: bin.to_path_buf(),
            root: root.to_path_buf(),
            running: true,
        }
    }

    /// `pg_ctl stop -m fast`: open sessions are terminated, a prepared transaction stays.
    fn stop(&mut self) {
        let data = self.root.join("data");
        let out = pg(
            &self.bin,
            "pg_ctl",
            &[
                "-D",
                &data.display().to_string(),
                "-m",
                "fast",
                "-w",
                "-t",
                "120",
                "stop",
            ],
        );
        assert!(
            out.status.success(),
            "pg_ctl stop: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.running = false;
        RUNNING.lock().unwrap().retain(|(_, d)| d != &data);
    }

    /// A new session (the postgres crate over the socket), with bounded statements and
    /// lock waits.
    fn connect(&self) -> postgres::Client {
        let mut config = postgres::Config::new();
        config
            .host_path(&self.root)
            .port(5432)
            .user("postgres")
            .dbname("postgres")
            .options(SESSION_OPTIONS)
            .connect_timeout(Duration::from_secs(30));
        config
            .connect(postgres::NoTls)
            .unwrap_or_else(|e| panic!("connect to {}: {e}", self.root.display()))
    }

    /// One query's single row through psql, as psql prints it: `-X -At`, fields split on
    /// [`FIELD_SEPARATOR`], NULL as [`NULL_TEXT`].
    fn psql_row(&self, sql: &str) -> Result<Vec<String>, String> {
        let mut cmd = Command::new(self.bin.join("psql"));
        cmd.args(["-X", "-q", "-A", "-t", "-F", FIELD_SEPARATOR, "-P"])
            .arg(format!("null={NULL_TEXT}"))
            .args([
                "-v",
                "ON_ERROR_STOP=1",
                "-U",
                "postgres",
                "-d",
                "postgres",
                "-h",
            ])
            .arg(&self.root)
            .args(["-c", "SET DateStyle = 'ISO, MDY'"])
            .args(["-c", "SET max_parallel_workers_per_gather = 0"])
            // A sequential scan: rows in block and line-pointer order, the order pageio's
            // seq scans add them in (a bitmap heap scan returns a HOT chain's row at its
            // root's place): float sums and min/max ties depend on it.
            .args(["-c", "SET enable_bitmapscan = off"])
            .args(["-c", "SET enable_indexscan = off"])
            .args(["-c", "SET enable_indexonlyscan = off"])
            .args(["-c", sql]);
        let out = run_bounded(cmd, &format!("psql -c {sql:?}"), PSQL_BOUND_SECS);
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let line = text.strip_suffix('\n').unwrap_or(&text);
        Ok(line.split(FIELD_SEPARATOR).map(str::to_string).collect())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.running {
            let data = self.root.join("data");
            stop_immediate(&self.bin, &data);
            RUNNING.lock().unwrap().retain(|(_, d)| d != &data);
        }
    }
}

/// Which seeds, and how.
#[derive(Clone)]
struct RunConfig {
    seeds: Vec<u64>,
    expect_mismatches: bool,
    all_methods: bool,
    keep: bool,
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number"))
    })
}

fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.is_empty() && v != "0")
}

impl RunConfig {
    fn from_env() -> RunConfig {
        let seeds = match env_u64("PAGEIO_DIFF_SEED") {
            Some(n) => vec![n],
            None => {
                let start = env_u64("PAGEIO_DIFF_SEED_START").unwrap_or(1);
                let count = env_u64("PAGEIO_DIFF_SEEDS").unwrap_or(20);
                (start..start + count).collect()
            }
        };
        RunConfig {
            seeds,
            expect_mismatches: env_flag("PAGEIO_DIFF_EXPECT_MISMATCHES"),
            all_methods: env_flag("PAGEIO_DIFF_ALL_METHODS"),
            keep: env_flag("PAGEIO_DIFF_KEEP"),
        }
    }
}

/// Where the seeds' SQL and the mismatch list go: `<target>/difftest`.
fn report_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .map(|p| p.join("difftest"))
        .unwrap_or_else(|| PathBuf::from("target/difftest"));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A predicate's comparison, for the totals.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Op {
    None,
    Between,
    Eq,
    Lt,
    Le,
    Gt,
    Ge,
    Ne,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::None => "none",
            Op::Between => "between",
            Op::Eq => "=",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Ne => "<>",
        }
    }
}

/// One predicate on one column.
struct Predicate {
    column: usize,
    op: Op,
    /// Integer bounds, for deciding whether a partial index's predicate is implied.
    ints: Vec<i64>,
    sql: String,
}

/// One query of a table and PostgreSQL's answer to it.
struct Query {
    seed: u64,
    table: usize,
    predicate: Option<Predicate>,
    expected: Result<Vec<String>, String>,
}

/// One `pageio scan` of a query.
struct Variant {
    kind: &'static str,
    index: Option<String>,
    parallel: Option<u32>,
    method: &'static str,
    /// False when the index named cannot answer the query (a partial index whose
    /// predicate the query does not imply, or pageio's own pick when every candidate is
    /// such): a refusal is then right.
    answerable: bool,
    /// The named index's shape, for the totals (`desc+partial`, `asc`, …).
    shape: Option<String>,
    /// The statements that made the candidate indexes, for a mismatch's report.
    definitions: Vec<String>,
}

/// An index's shape: the direction of its first key, then what else sets it apart.
fn index_shape(i: &difftest::IndexSpec) -> String {
    let mut parts = vec![if i.keys[0].desc { "desc" } else { "asc" }];
    if i.keys[0].nulls_first.is_some() {
        parts.push("nulls-spec");
    }
    if i.keys.len() > 1 {
        parts.push("multi-column");
    }
    if i.unique || i.primary_key {
        parts.push("unique");
    }
    if i.partial.is_some() {
        parts.push("partial");
    }
    parts.join("+")
}

#[derive(Default, Clone, Copy)]
struct Tally {
    runs: u64,
    matched: u64,
    mismatched: u64,
    errors: u64,
    refused: u64,
    aggregates: u64,
}

impl Tally {
    fn add(&mut self, outcome: Outcome, aggregates: u64) {
        self.runs += 1;
        self.aggregates += aggregates;
        match outcome {
            Outcome::Matched => self.matched += 1,
            Outcome::Mismatched => self.mismatched += 1,
            Outcome::Error => self.errors += 1,
            Outcome::Refused => self.refused += 1,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Matched,
    Mismatched,
    Error,
    Refused,
}

#[derive(Default)]
struct Totals {
    all: Tally,
    by_class: BTreeMap<(String, String), Tally>,
    failing_seeds: BTreeMap<u64, u64>,
    details: Vec<String>,
}

impl Totals {
    fn record(&mut self, seed: u64, v: &Variant, op: Op, outcome: Outcome, aggregates: u64) {
        self.all.add(outcome, aggregates);
        let mut classes = vec![
            ("kind".to_string(), v.kind.to_string()),
            ("io_method".to_string(), v.method.to_string()),
            ("predicate".to_string(), op.name().to_string()),
        ];
        if let Some(p) = v.parallel {
            classes.push(("seq --parallel".to_string(), p.to_string()));
        }
        if let Some(shape) = &v.shape {
            classes.push(("index shape".to_string(), shape.clone()));
        }
        if v.kind != "seq" {
            classes.push((
                "index".to_string(),
                if v.index.is_some() {
                    "named"
                } else {
                    "pageio's pick"
                }
                .to_string(),
            ));
        }
        for c in classes {
            self.by_class.entry(c).or_default().add(outcome, aggregates);
        }
        if matches!(outcome, Outcome::Mismatched | Outcome::Error) {
            *self.failing_seeds.entry(seed).or_default() += 1;
        }
    }
}

/// The operator with its operands swapped (`5 < a` is `a > 5`).
fn commuted(op: &str) -> &str {
    match op {
        "<" => ">",
        "<=" => ">=",
        ">" => "<",
        ">=" => "<=",
        other => other,
    }
}

/// A literal for a value psql printed, in one of the forms PostgreSQL reads it in, and
/// whether it still stands for that value. Integers: bare (`int4`, `int8` or `numeric` by
/// size), quoted (coerced to the column's type), `5.0` and `5e0` (numeric), `5.5` (a
/// numeric between two values), or a constant out of the column's range (`i2 < 40000`,
/// `= 99999999999`, `1e30`). Text: quoted with `''`, as `E'…'` with `\'`, or one of the
/// constants that hold `and`, `=`, a quote or non-ASCII letters. Dates and timestamps:
/// ISO, or a BC date, `infinity` or `-infinity`; a timestamp with an offset (which a
/// `timestamp` drops, as PostgreSQL does); typed literals of the other type (`timestamp
/// '… 12:00'` against a date, `date '…'` against a timestamp, `'…'::timestamptz`).
fn literal_variant(rng: &mut Rng, ty: ColType, text: &str) -> (String, bool) {
    let quoted = |s: &str| format!("'{}'", s.replace('\'', "''"));
    match ty {
        ColType::Int2 | ColType::Int4 | ColType::Int8 => match rng.below(10) {
            0 => (quoted(text), true),
            1 => (format!("{text}.0"), true),
            2 => (format!("{text}e0"), true),
            3 => (format!("{text}.5"), false),
            4 => (
                rng.pick(&[
                    "40000",
                    "-40000",
                    "70000",
                    "99999999999",
                    "-99999999999",
                    "1e30",
                    "-1e30",
                    "99999999999999999999",
                    "-2147483648",
                ])
                .to_string(),
                false,
            ),
            _ => (text.to_string(), true),
        },
        ColType::Text | ColType::Varchar => match rng.below(8) {
            0 => (
                format!("E'{}'", text.replace('\\', "\\\\").replace('\'', "\\'")),
                true,
            ),
            1 => (
                quoted(rng.pick::<&str>(&[
                    "k0000500 and k0000900",
                    "x=y",
                    "it's",
                    "Äx",
                    "k0000100 AND",
                    "a' or 'b",
                ])),
                false,
            ),
            _ => (quoted(text), true),
        },
        ColType::Date | ColType::Timestamp => match rng.below(10) {
            0 => (
                quoted(rng.pick::<&str>(&[
                    "infinity",
                    "-infinity",
                    "0044-03-15 BC",
                    "4714-11-24 BC",
                    "1999-12-31 BC",
                ])),
                false,
            ),
            1 if ty == ColType::Timestamp && !text.contains("BC") => {
                (quoted(&format!("{text}+02")), true)
            }
            // Typed literals: a date column against a timestamp compares as timestamps, a
            // timestamp column against a date meets it at midnight.
            2 if ty == ColType::Date => (
                format!("timestamp {}", quoted(&format!("{text} 12:00"))),
                false,
            ),
            3 if ty == ColType::Date => (format!("{}::timestamptz", quoted(text)), true),
            2 if ty == ColType::Timestamp => {
                let day = text.split(' ').next().unwrap_or(text);
                let era = if text.ends_with("BC") { " BC" } else { "" };
                (format!("date {}", quoted(&format!("{day}{era}"))), false)
            }
            _ => (quoted(text), true),
        },
        // Numbers as psql printed them. Unquoted, a decimal is a numeric literal: against a
        // real column it is compared in double precision, so the bound moves; against a
        // double or a numeric it is the same value. NaN and the infinities exist only
        // quoted. The special values stand in for a bound as constants of their own.
        ColType::Float4 | ColType::Float8 | ColType::Numeric => {
            let number = text.parse::<f64>().is_ok_and(|v| v.is_finite())
                && !text.eq_ignore_ascii_case("infinity");
            match rng.below(8) {
                0..=2 if number => (text.to_string(), ty != ColType::Float4),
                3 => (
                    quoted(rng.pick::<&str>(&["NaN", "Infinity", "-Infinity", "-0", "0"])),
                    false,
                ),
                4 if number && ty == ColType::Numeric => (format!("{text}e0"), true),
                _ => (quoted(text), true),
            }
        }
    }
}

/// True when `index` can answer a query with `predicate`: it has no partial predicate, or
/// the query's rows all satisfy it.
fn index_answers(index: &difftest::IndexSpec, predicate: &Predicate) -> bool {
    match &index.partial {
        None => true,
        Some(Partial::NotNull(c)) => *c == predicate.column,
        Some(Partial::Even(_)) => false,
        Some(Partial::Greater(c, k)) => {
            *c == predicate.column
                && match (predicate.op, predicate.ints.as_slice()) {
                    (Op::Between, [lo, _]) => lo > k,
                    (Op::Eq | Op::Ge, [v]) => v > k,
                    (Op::Gt, [v]) => v >= k,
                    _ => false,
                }
        }
    }
}

/// Counts and sampled values of a column, read on the copy.
fn sample_values(
    client: &mut postgres::Client,
    table: &str,
    column: &str,
    rng: &mut Rng,
    n: usize,
) -> Vec<String> {
    let count: u64 = simple_value(client, &format!("SELECT count({column}) FROM {table}"))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    if count == 0 {
        return Vec::new();
    }
    (0..n)
        .filter_map(|_| {
            let offset = rng.below(count);
            simple_value(
                client,
                &format!(
                    "SELECT {column}::text FROM {table} WHERE {column} IS NOT NULL ORDER BY {column} OFFSET {offset} LIMIT 1"
                ),
            )
        })
        .collect()
}

fn simple_value(client: &mut postgres::Client, sql: &str) -> Option<String> {
    let messages = client
        .simple_query(&format!("SET DateStyle = 'ISO, MDY'; {sql}"))
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    messages.into_iter().find_map(|m| match m {
        postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_string),
        _ => None,
    })
}

/// The predicates asked of a table: none, then on every column some btree starts with and
/// on up to two others, with bounds drawn from the column's values.
fn plan_predicates(
    client: &mut postgres::Client,
    plan: &SeedPlan,
    k: usize,
    t: &TableSpec,
) -> Vec<Option<Predicate>> {
    let mut rng = Rng::new(plan.seed.wrapping_mul(0x9E37_79B9) ^ ((k as u64) << 48) ^ 0xD1FF);
    let mut columns: Vec<usize> = t.indexes.iter().map(|i| i.first_column()).collect();
    let mut others: Vec<usize> = (0..t.columns.len())
        .filter(|c| !columns.contains(c))
        // A numeric of 131,000 digits does not fit a command line as a literal.
        .filter(|&c| !t.columns[c].has_huge_values())
        .filter(|&c| {
            !matches!(
                t.columns[c].text_shape,
                difftest::TextShape::WideCompressible | difftest::TextShape::WideIncompressible
            ) || !t.columns[c].ty.is_text()
        })
        .collect();
    for _ in 0..2 {
        if !others.is_empty() {
            let i = rng.below(others.len() as u64) as usize;
            columns.push(others.remove(i));
        }
    }
    columns.sort_unstable();
    columns.dedup();
    let mut predicates: Vec<Option<Predicate>> = vec![None];
    for (n, &c) in columns.iter().enumerate() {
        let col = &t.columns[c];
        let values = sample_values(client, &t.qualified, &col.name, &mut rng, 4);
        if values.is_empty() {
            continue;
        }
        let ops_here: Vec<Op> = if n == 0 {
            vec![Op::Eq, Op::Between]
        } else {
            let mut v = vec![Op::Between];
            v.push(*rng.pick(&[Op::Eq, Op::Lt, Op::Le, Op::Gt, Op::Ge, Op::Ne]));
            v
        };
        for op in ops_here {
            let mut pick = || values[rng.below(values.len() as u64) as usize].clone();
            let mut texts = match op {
                Op::Between => vec![pick(), pick()],
                _ => vec![pick()],
            };
            if op == Op::Between && col.ty.is_integer() {
                // Sorted most of the time; an empty range (lo > hi) now and then.
                let mut ints: Vec<i64> = texts.iter().map(|s| s.parse().unwrap()).collect();
                if rng.chance(90) {
                    ints.sort_unstable();
                }
                texts = ints.iter().map(i64::to_string).collect();
            } else if op == Op::Between && texts[0] > texts[1] && col.ty.is_text() {
                texts.swap(0, 1);
            } else if op == Op::Between && texts[0] > texts[1] && rng.chance(90) {
                // ISO dates and timestamps of one era sort as text.
                texts.swap(0, 1);
            }
            let mut ints: Vec<i64> = if col.ty.is_integer() {
                texts.iter().map(|s| s.parse().unwrap()).collect()
            } else {
                Vec::new()
            };
            let mut literals: Vec<String> = Vec::new();
            for text in &texts {
                let (l, same_value) = literal_variant(&mut rng, col.ty, text);
                if !same_value {
                    // The bound moved: no partial index is taken to be implied.
                    ints.clear();
                }
                literals.push(l);
            }
            let op_sql = match op {
                Op::Ne if rng.chance(50) => "!=",
                _ => op.name(),
            };
            let sql = match op {
                Op::Between => format!(
                    "{} {} {} {} {}",
                    col.name,
                    rng.pick(&["between", "BETWEEN", "Between"]),
                    literals[0],
                    rng.pick(&["and", "AND"]),
                    literals[1]
                ),
                _ if rng.chance(15) => format!("{} {} {}", literals[0], commuted(op_sql), col.name),
                _ => format!("{} {op_sql} {}", col.name, literals[0]),
            };
            predicates.push(Some(Predicate {
                column: c,
                op,
                ints,
                sql,
            }));
        }
    }
    predicates
}

/// The scans of one query: seq serial and parallel, and bitmap and index scans through
/// each btree on the predicate column and through pageio's own pick.
fn variants(
    t: &TableSpec,
    predicate: Option<&Predicate>,
    counter: &mut usize,
    all_methods: bool,
) -> Vec<Variant> {
    type Shape<'a> = (
        &'static str,
        Option<&'a difftest::IndexSpec>,
        Option<u32>,
        bool,
    );
    let mut shapes: Vec<Shape> = vec![("seq", None, Some(1), true), ("seq", None, Some(2), true)];
    let mut definitions = Vec::new();
    if let Some(p) = predicate {
        let candidates: Vec<&difftest::IndexSpec> = t
            .indexes
            .iter()
            .filter(|i| i.first_column() == p.column)
            .collect();
        definitions = candidates.iter().map(|i| i.create_sql(t)).collect();
        if !candidates.is_empty() {
            let any_answers = candidates.iter().any(|i| index_answers(i, p));
            for kind in ["bitmap", "index"] {
                shapes.push((kind, None, None, any_answers));
                for i in &candidates {
                    shapes.push((kind, Some(*i), None, index_answers(i, p)));
                }
            }
        }
    }
    let mut out = Vec::new();
    for (kind, index, parallel, answerable) in shapes {
        let methods: Vec<&'static str> = if all_methods {
            METHODS.to_vec()
        } else {
            *counter += 1;
            vec![METHODS[*counter % 3]]
        };
        for method in methods {
            out.push(Variant {
                kind,
                index: index.map(|i| i.name.clone()),
                parallel,
                method,
                answerable,
                shape: index.map(index_shape),
                definitions: if kind == "seq" {
                    Vec::new()
                } else {
                    definitions.clone()
                },
            });
        }
    }
    out
}

/// Runs one scan and compares it.
#[allow(clippy::too_many_arguments)]
fn run_variant(
    data: &Path,
    plan: &SeedPlan,
    t: &TableSpec,
    q: &Query,
    v: &Variant,
    totals: &mut Totals,
    keep_hint: &str,
) {
    let pgdata = data.display().to_string();
    let select = t.select_list();
    let mut args: Vec<String> = vec![
        "scan".into(),
        "--pgdata".into(),
        pgdata,
        "--table".into(),
        t.qualified.clone(),
        "--select".into(),
        select.clone(),
        "--kind".into(),
        v.kind.into(),
        "--io-method".into(),
        v.method.into(),
        "--json".into(),
    ];
    if let Some(p) = &q.predicate {
        args.push("--where".into());
        args.push(p.sql.clone());
    }
    if let Some(i) = &v.index {
        args.push("--index".into());
        args.push(i.clone());
    }
    if let Some(n) = v.parallel {
        args.push("--parallel".into());
        args.push(n.to_string());
    }
    let arg_refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = common::pageio_bounded(&arg_refs, RUN_BOUND_SECS);
    let op = q.predicate.as_ref().map_or(Op::None, |p| p.op);
    let expected = match &q.expected {
        Ok(e) => e,
        // PostgreSQL's float aggregates raise "value out of range: overflow" where a sum
        // or float8_accum's sum of squares overflows: pageio must fail with it too.
        Err(e) if e.contains("value out of range") => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            if !out.status.success() && stderr.contains("value out of range") {
                totals.record(plan.seed, v, op, Outcome::Matched, 1);
            } else {
                totals.record(plan.seed, v, op, Outcome::Mismatched, 1);
                totals.details.push(format!(
                    "MISMATCH seed {} table {}: PostgreSQL {} pageio exit {:?} {}",
                    plan.seed,
                    t.qualified,
                    e.trim(),
                    out.status.code(),
                    shorten(&String::from_utf8_lossy(&out.stdout))
                ));
            }
            return;
        }
        Err(_) => return,
    };
    let aggregates = expected.len() as u64;
    let shell_args: Vec<String> = args
        .iter()
        .map(|a| {
            if a.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect();
    let header = format!(
        "seed {} table {} query [{}] kind {}{} io_method {}{}",
        plan.seed,
        t.qualified,
        q.predicate
            .as_ref()
            .map_or("no predicate", |p| p.sql.as_str()),
        v.kind,
        v.index
            .as_ref()
            .map(|i| format!(" --index {i}"))
            .unwrap_or_default(),
        v.method,
        v.parallel
            .map(|p| format!(" --parallel {p}"))
            .unwrap_or_default(),
    );
    let mut command = format!("pageio {}{keep_hint}", shell_args.join(" "));
    for d in &v.definitions {
        let _ = write!(command, "\n  index: {d}");
    }
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        // A refusal of an index that cannot answer must say why; any other failure (a
        // damaged-page error, say) is an error even there.
        let lower = stderr.to_lowercase();
        if !v.answerable
            && ["partial", "predicate", "where"]
                .iter()
                .any(|w| lower.contains(w))
        {
            totals.record(plan.seed, v, op, Outcome::Refused, aggregates);
            return;
        }
        totals.record(plan.seed, v, op, Outcome::Error, aggregates);
        totals.details.push(format!(
            "PAGEIO ERROR {header}\n  exit {:?}: {stderr}\n  PostgreSQL: {}\n  {command}",
            out.status.code(),
            shorten(&expected.join(" | "))
        ));
        return;
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let got: Result<Vec<String>, String> = serde_json::from_str::<serde_json::Value>(&stdout)
        .map_err(|e| format!("not JSON ({e}): {}", shorten(&stdout)))
        .and_then(|report| {
            report["aggregates"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|x| match (&x["value"], x["text"].as_str()) {
                            // "value" null is SQL NULL; "text" then is psql's empty string.
                            (serde_json::Value::Null, Some("")) => NULL_TEXT.to_string(),
                            (_, Some(text)) => text.to_string(),
                            (_, None) => format!("no \"text\" in {x}"),
                        })
                        .collect()
                })
                .ok_or_else(|| format!("no \"aggregates\": {}", shorten(&stdout)))
        });
    let got = match got {
        Ok(g) => g,
        Err(e) => {
            totals.record(plan.seed, v, op, Outcome::Error, aggregates);
            totals
                .details
                .push(format!("PAGEIO ERROR {header}\n  {e}\n  {command}"));
            return;
        }
    };
    let exprs: Vec<&str> = select.split(", ").collect();
    let mut diffs = String::new();
    if got.len() != expected.len() {
        let _ = write!(
            diffs,
            "\n  {} aggregates from pageio, {} from PostgreSQL",
            got.len(),
            expected.len()
        );
    }
    for (i, (g, e)) in got.iter().zip(expected).enumerate() {
        // PostgreSQL's answer comes from a sequential scan; a bitmap or index scan feeds
        // rows in another order (key order; a HOT chain's row at its root's place), which
        // changes a float sum's rounding and which of two tied values (`-0`/`0`,
        // `1.0`/`1.00`) min and max return: those are compared for seq scans only.
        let order_bound =
            v.kind != "seq" && exprs.get(i).is_some_and(|x| t.depends_on_row_order(x));
        if g != e && !order_bound {
            let _ = write!(
                diffs,
                "\n  {}: PostgreSQL {} pageio {}",
                exprs.get(i).unwrap_or(&"?"),
                shorten(e),
                shorten(g)
            );
        }
    }
    if diffs.is_empty() {
        totals.record(plan.seed, v, op, Outcome::Matched, aggregates);
    } else {
        totals.record(plan.seed, v, op, Outcome::Mismatched, aggregates);
        totals
            .details
            .push(format!("MISMATCH {header}{diffs}\n  {command}"));
    }
}

/// A value for a message: long TOAST-ed text cut to its start and length.
fn shorten(s: &str) -> String {
    if s.chars().count() <= 120 {
        s.to_string()
    } else {
        let head: String = s.chars().take(60).collect();
        format!("{head}… ({} bytes)", s.len())
    }
}

fn run_sessions(
    server: &Server,
    plan: &SeedPlan,
    steps: &[difftest::Step],
    sessions: &mut HashMap<usize, postgres::Client>,
) {
    for step in steps {
        let client = sessions
            .entry(step.session)
            .or_insert_with(|| server.connect());
        if let Err(e) = client.batch_execute(&step.sql) {
            let why = e
                .as_db_error()
                .map(|d| format!("{}: {}", d.severity(), d.message()))
                .unwrap_or_else(|| e.to_string());
            panic!(
                "seed {}: session {} failed ({why}) running:\n{}\n(the seed's SQL is in {})",
                plan.seed,
                step.session,
                step.sql,
                report_dir()
                    .join(format!("seed-{}.sql", plan.seed))
                    .display()
            );
        }
    }
}

fn differential(bin: PathBuf, config: RunConfig) {
    let started = Instant::now();
    let reports = report_dir();
    let plans: Vec<SeedPlan> = config.seeds.iter().map(|&s| difftest::plan(s)).collect();
    for p in &plans {
        std::fs::write(reports.join(format!("seed-{}.sql", p.seed)), p.script()).unwrap();
    }

    // One cluster for every seed.
    let dir = pg_cluster_dir("pageio-difftest-");
    let root = dir.path().to_path_buf();
    let data = initdb(&bin, &root);
    let max_prepared = 10 + config.seeds.len();
    // fsync off: nothing here survives a machine crash anyway, and the clean shutdown
    // writes every page. synchronous_commit off, as many production servers run: a reader
    // may not set a hint bit for a commit whose WAL is not flushed yet, so more rows reach
    // the files without hints. autovacuum off, so no vacuum comes from elsewhere.
    let mut conf = std::fs::OpenOptions::new()
        .append(true)
        .open(data.join("postgresql.conf"))
        .unwrap();
    std::io::Write::write_all(
        &mut conf,
        format!(
            "\nautovacuum = off\nmax_prepared_transactions = {max_prepared}\nfsync = off\n\
             synchronous_commit = off\nmax_connections = {}\n",
            50 + config.seeds.len()
        )
        .as_bytes(),
    )
    .unwrap();
    drop(conf);
    let mut server = Server::start(&bin, &root);
    let setup_time = started.elapsed();

    let mut open_sessions: Vec<postgres::Client> = Vec::new();
    for p in &plans {
        let mut sessions = HashMap::new();
        run_sessions(&server, p, &p.steps, &mut sessions);
    }
    for p in &plans {
        let mut sessions = HashMap::new();
        run_sessions(&server, p, &p.final_steps, &mut sessions);
        if let Some(open) = sessions.remove(&OPEN_SESSION) {
            open_sessions.push(open);
        }
    }
    let history_time = started.elapsed();
    // Open transactions are still open here: the fast shutdown ends them.
    server.stop();
    drop(open_sessions);

    // PostgreSQL answers from a copy: its reads set hint bits and prune pages, and none of
    // that may reach the files pageio reads.
    let copy_dir = pg_cluster_dir("pageio-difftest-copy-");
    let copy_root = copy_dir.path().to_path_buf();
    let ok = Command::new("cp")
        .arg("-a")
        .arg(&data)
        .arg(copy_root.join("data"))
        .status()
        .unwrap()
        .success();
    assert!(ok, "cp -a {} {}", data.display(), copy_root.display());
    chown_to_pg_user(&copy_root);
    let mut copy = Server::start(&bin, &copy_root);
    let mut client = copy.connect();
    let mut queries: Vec<Query> = Vec::new();
    for p in &plans {
        for (k, t) in p.tables.iter().enumerate() {
            for predicate in plan_predicates(&mut client, p, k, t) {
                let sql = format!(
                    "SELECT {} FROM {}{}",
                    t.select_list(),
                    t.qualified,
                    predicate
                        .as_ref()
                        .map(|p| format!(" WHERE {}", p.sql))
                        .unwrap_or_default()
                );
                let expected = copy.psql_row(&sql);
                queries.push(Query {
                    seed: p.seed,
                    table: k,
                    predicate,
                    expected,
                });
            }
        }
    }
    drop(client);
    copy.stop();
    let answers_time = started.elapsed();

    let keep_hint = if config.keep {
        ""
    } else {
        "  (PAGEIO_DIFF_KEEP=1 keeps the cluster)"
    };
    let mut totals = Totals::default();
    let mut postgres_errors = Vec::new();
    let mut counter = 0usize;
    for q in &queries {
        let plan = plans.iter().find(|p| p.seed == q.seed).unwrap();
        let t = &plan.tables[q.table];
        if let Err(e) = &q.expected {
            postgres_errors.push(format!("seed {} {}: {e}", q.seed, t.qualified));
            continue;
        }
        for v in variants(t, q.predicate.as_ref(), &mut counter, config.all_methods) {
            run_variant(&data, plan, t, q, &v, &mut totals, keep_hint);
        }
    }
    let scan_time = started.elapsed();

    // The report.
    let mut report = String::new();
    for d in &totals.details {
        let _ = writeln!(report, "{d}");
    }
    std::fs::write(reports.join("mismatches.txt"), &report).unwrap();
    const PRINTED: usize = 60;
    for d in totals.details.iter().take(PRINTED) {
        eprintln!("{d}");
    }
    if totals.details.len() > PRINTED {
        eprintln!(
            "… and {} more in {}",
            totals.details.len() - PRINTED,
            reports.join("mismatches.txt").display()
        );
    }
    let a = totals.all;
    eprintln!(
        "\ndifferential scan test: seeds {:?}, {} tables, {} queries, {} scans compared ({} aggregates): \
         {} matched, {} mismatched, {} pageio errors, {} refused (partial index that cannot answer)",
        (config.seeds.first().unwrap(), config.seeds.last().unwrap()),
        plans.iter().map(|p| p.tables.len()).sum::<usize>(),
        queries.len(),
        a.runs,
        a.aggregates,
        a.matched,
        a.mismatched,
        a.errors,
        a.refused
    );
    eprintln!(
        "{:<16} {:<14} {:>6} {:>8} {:>10} {:>7} {:>8}",
        "class", "value", "scans", "matched", "mismatched", "errors", "refused"
    );
    for ((class, value), t) in &totals.by_class {
        eprintln!(
            "{class:<16} {value:<14} {:>6} {:>8} {:>10} {:>7} {:>8}",
            t.runs, t.matched, t.mismatched, t.errors, t.refused
        );
    }
    for (seed, n) in &totals.failing_seeds {
        eprintln!(
            "seed {seed}: {n} failing scans; its SQL: {}; rerun it alone: \
             PAGEIO_DIFF_SEED={seed} cargo test --profile test-opt -p pageio-cli --test scan_differential_postgres -- --nocapture",
            reports.join(format!("seed-{seed}.sql")).display()
        );
    }
    eprintln!(
        "time: setup {:.1} s, histories {:.1} s, PostgreSQL's answers {:.1} s, pageio scans {:.1} s, total {:.1} s",
        setup_time.as_secs_f64(),
        (history_time - setup_time).as_secs_f64(),
        (answers_time - history_time).as_secs_f64(),
        (scan_time - answers_time).as_secs_f64(),
        scan_time.as_secs_f64()
    );
    if config.keep {
        eprintln!(
            "kept: the cluster pageio read at {} and PostgreSQL's copy at {}",
            data.display(),
            copy_root.join("data").display()
        );
        let _ = dir.keep();
        let _ = copy_dir.keep();
    }
    assert!(
        postgres_errors.is_empty(),
        "PostgreSQL refused queries the test made (a test bug):\n{}",
        postgres_errors.join("\n")
    );
    assert!(a.runs > 0, "no scan ran");
    let failing = a.mismatched + a.errors;
    if failing > 0 && config.expect_mismatches {
        eprintln!(
            "PAGEIO_DIFF_EXPECT_MISMATCHES is set: {failing} failing scans reported, not failed"
        );
        return;
    }
    assert_eq!(
        failing,
        0,
        "{} scans disagree with PostgreSQL and {} failed (see above and {})",
        a.mismatched,
        a.errors,
        reports.join("mismatches.txt").display()
    );
}

#[test]
fn scan_agrees_with_postgres_on_random_histories() {
    let Some(bin) = pg_bin() else { return };
    let config = RunConfig::from_env();
    let bound = test_bound_secs(config.seeds.len() as u64);
    let result = std::panic::catch_unwind(|| {
        with_watchdog("scan_differential_postgres", bound, move || {
            differential(bin, config)
        })
    });
    if let Err(panic) = result {
        // The watchdog fired or the body failed: no server may outlive the test.
        for (bin, data) in RUNNING.lock().unwrap().drain(..) {
            stop_immediate(&bin, &data);
        }
        std::panic::resume_unwind(panic);
    }
}

/// The generator makes a plan for every seed of a long run without PostgreSQL: a seed that
/// panics in the generator would otherwise show only in a long run.
#[test]
fn literal_variants_cover_every_form() {
    let mut rng = Rng::new(7);
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..2000 {
        for (ty, text) in [
            (ColType::Int2, "-5"),
            (ColType::Text, "it's"),
            (ColType::Date, "2020-01-01"),
            (ColType::Timestamp, "2020-01-01 05:00:00"),
        ] {
            let (l, _) = literal_variant(&mut rng, ty, text);
            seen.insert(l);
        }
    }
    for form in [
        "-5",
        "'-5'",
        "-5.0",
        "-5e0",
        "-5.5",
        "40000",
        "99999999999999999999",
        "1e30",
        "'it''s'",
        "E'it\\'s'",
        "'x=y'",
        "'k0000500 and k0000900'",
        "'Äx'",
        "'0044-03-15 BC'",
        "'infinity'",
        "'-infinity'",
        "'2020-01-01 05:00:00+02'",
        "timestamp '2020-01-01 12:00'",
        "'2020-01-01'::timestamptz",
        "date '2020-01-01'",
    ] {
        assert!(seen.contains(form), "{form} never drawn: {seen:?}");
    }
}

#[test]
fn generator_plans_many_seeds() {
    for seed in 1..=5000 {
        let plan = difftest::plan(seed);
        assert!(
            !plan.tables.is_empty() && !plan.steps.is_empty(),
            "seed {seed}"
        );
        assert!(plan
            .script()
            .contains(&format!("CREATE SCHEMA {}", plan.schema)));
    }
}
