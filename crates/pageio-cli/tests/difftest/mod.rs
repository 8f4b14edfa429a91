//! The generator of the differential scan test: from one seed, a random schema (tables,
//! columns, btrees) and a random write history, as SQL steps tagged with the session that
//! runs them.
//!
//! Everything here is a pure function of the seed, so a seed that finds a mismatch
//! reproduces it alone (`PAGEIO_DIFF_SEED=N`): the generator never asks the server anything.
//! The values of a row are SQL expressions of its `id` (a multiplicative hash with a
//! per-column modulus: small moduli give many duplicates, hence posting lists in the btrees),
//! so an `UPDATE` writes new values with the same expressions salted differently.
//!
//! ```text
//!   seed ──► Rng ──► SeedPlan { tables (columns, indexes),
//!                               steps        (history: sessions 0..=2, run in order),
//!                               final_steps  (run after every seed's history and left
//!                                             prepared or open while the server stops) }
//! ```
//!
//! The history is made of the writes real clusters are made of: batches of inserts, HOT and
//! non-HOT updates, deletes, rolled-back transactions, savepoints rolled back and released,
//! row locks of every strength (MultiXacts: a row locked in a transaction and updated in its
//! subtransaction; two sessions sharing a lock; a key-share lock beside a no-key update),
//! `INSERT … ON CONFLICT`, two-phase commits, `VACUUM` on some tables only (sometimes
//! without index cleanup, leaving dead line pointers the index still points to), checkpoints,
//! and index scans of PostgreSQL's own that mark index entries of dead rows as killed.
//! Steps of two sessions never wait on each other's locks (a share lock beside a share lock,
//! a key-share lock beside a no-key update), so running them one after the other in the
//! order written is the interleaving.
#![allow(dead_code)] // the test uses what it needs of the plan

use std::fmt::Write as _;

/// A small seeded PRNG (splitmix64): the same seed gives the same history on every machine.
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// One element of `items` (not empty).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// The column types the test draws from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColType {
    Int2,
    Int4,
    Int8,
    Text,
    Varchar,
    Date,
    Timestamp,
    /// `real`, values from [`Column::float_expr`].
    Float4,
    /// `double precision`, values from [`Column::float_expr`].
    Float8,
    /// `numeric` (no typmod, so each value keeps its own scale), from
    /// [`Column::numeric_expr`].
    Numeric,
}

impl ColType {
    /// The type as `CREATE TABLE` writes it (text types in the "C" collation, whose byte
    /// order pageio compares in).
    pub fn sql(self) -> &'static str {
        match self {
            ColType::Int2 => "int2",
            ColType::Int4 => "int4",
            ColType::Int8 => "int8",
            ColType::Text => "text COLLATE \"C\"",
            ColType::Varchar => "varchar(40) COLLATE \"C\"",
            ColType::Date => "date",
            ColType::Timestamp => "timestamp",
            ColType::Float4 => "float4",
            ColType::Float8 => "float8",
            ColType::Numeric => "numeric",
        }
    }

    /// True for float4, float8 and numeric: summed and averaged like the integers.
    pub fn is_inexact_or_numeric(self) -> bool {
        matches!(self, ColType::Float4 | ColType::Float8 | ColType::Numeric)
    }

    /// True for int2/int4/int8.
    pub fn is_integer(self) -> bool {
        matches!(self, ColType::Int2 | ColType::Int4 | ColType::Int8)
    }

    /// True for text and varchar.
    pub fn is_text(self) -> bool {
        matches!(self, ColType::Text | ColType::Varchar)
    }
}

/// How a text column's values look.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextShape {
    /// `k0000123`: sorts like the number.
    Padded,
    /// An md5 hex string.
    Md5,
    /// Several kB of a repeated md5: compresses well (pglz, in line or external).
    WideCompressible,
    /// Several kB of distinct md5s: barely compresses (stored external).
    WideIncompressible,
}

/// One column: its type and the expression its values come from.
#[derive(Clone, Debug)]
pub struct Column {
    pub name: String,
    pub ty: ColType,
    /// Percent of rows where the column is NULL.
    pub null_percent: u64,
    /// Values are `(row * mul + add) % modulus`, mapped into the type.
    pub modulus: u64,
    pub mul: u64,
    pub add: u64,
    pub text_shape: TextShape,
    /// `ALTER COLUMN … SET STORAGE EXTERNAL`: TOAST-ed without compression.
    pub storage_external: bool,
}

impl Column {
    /// The value's number before it is mapped into the type: in `0..modulus`.
    fn base_expr(&self, row: &str, salt: u64) -> String {
        format!(
            "((({row})::int8 * {} + {}) % {})",
            self.mul,
            self.add + salt,
            self.modulus
        )
    }

    /// The SQL value for a base number expression `b`.
    fn typed(&self, b: &str) -> String {
        let half = self.modulus / 2;
        match self.ty {
            ColType::Int2 => format!("({b} - {half})::int2"),
            ColType::Int4 => format!("({b} - {})::int4", self.modulus / 3),
            ColType::Int8 => format!("({b} * 1000000007 - {half})::int8"),
            ColType::Text | ColType::Varchar => {
                let text = match self.text_shape {
                    TextShape::Padded => format!("'k' || lpad({b}::text, 7, '0')"),
                    TextShape::Md5 => format!("md5({b}::text)"),
                    TextShape::WideCompressible => {
                        format!("repeat(md5({b}::text), 60 + ({b} % 200)::int)")
                    }
                    TextShape::WideIncompressible => format!(
                        "(SELECT string_agg(md5({b}::text || x::text), '') FROM generate_series(1, 70 + ({b} % 90)::int) x)"
                    ),
                };
                if self.ty == ColType::Varchar {
                    format!("({text})::varchar(40)")
                } else {
                    text
                }
            }
            ColType::Date => format!("(date '2000-01-01' + ({b} - {half})::int)"),
            ColType::Timestamp => format!(
                "(timestamp '2020-01-01 00:00:00' + ({b} - {half}) * interval '17 minutes 3.25 seconds')"
            ),
            ColType::Float4 | ColType::Float8 => self.float_expr(b),
            ColType::Numeric => self.numeric_expr(b),
        }
    }

    /// The column's value for the row numbered by the SQL expression `row`, salted.
    pub fn value_expr(&self, row: &str, salt: u64) -> String {
        let value = self.typed(&self.base_expr(row, salt));
        if self.null_percent == 0 {
            value
        } else {
            format!(
                "CASE WHEN ((({row})::int8 * 7919 + {}) % 100) < {} THEN NULL ELSE {value} END",
                self.add % 97 + salt % 13,
                self.null_percent
            )
        }
    }

    /// A constant of the column's type for base number `base` (an SQL expression PostgreSQL
    /// folds; only for PostgreSQL's own statements, never for pageio's `--where`).
    pub fn constant_expr(&self, base: u64) -> String {
        self.typed(&format!("{}::int8", base % self.modulus))
    }

    /// The integer the column holds for base number `base` (integer columns only).
    pub fn int_value(&self, base: u64) -> i64 {
        let b = (base % self.modulus) as i64;
        match self.ty {
            ColType::Int2 => b - (self.modulus / 2) as i64,
            ColType::Int4 => b - (self.modulus / 3) as i64,
            ColType::Int8 => b * 1_000_000_007 - (self.modulus / 2) as i64,
            _ => panic!("int_value of a {:?} column", self.ty),
        }
    }

    /// The aggregates asked of this column: every one of the list PostgreSQL accepts for
    /// the type.
    pub fn aggregates(&self) -> Vec<String> {
        let c = &self.name;
        let mut list = vec![format!("count({c})")];
        if self.ty.is_integer() || self.ty.is_inexact_or_numeric() {
            list.push(format!("sum({c})"));
            list.push(format!("avg({c})"));
        }
        list.push(format!("min({c})"));
        list.push(format!("max({c})"));
        if self.ty.is_text() {
            list.push(format!("sum(octet_length({c}))"));
        }
        list
    }
}

/// The value generators of float4, float8 and numeric columns: the classes of values whose
/// printed digits, ties and special values PostgreSQL's functions decide.
impl Column {
    /// Which kind of values a float or numeric column holds, fixed by the column's own
    /// random `add` (so the generator's random stream is the same with or without it).
    pub fn value_flavor(&self) -> u64 {
        self.add % 5
    }

    /// True for a numeric column whose values are too long to pass as a `--where` literal
    /// on a command line (up to 131,000 digits).
    pub fn has_huge_values(&self) -> bool {
        self.ty == ColType::Numeric && self.value_flavor() == 3
    }

    /// float4/float8 values of base number `b`, by flavor: (0) plain fractions, whose
    /// shortest digits are long (`968.1604614257812`); (1) halves-and-quarters, ties for
    /// the printed rounding (`345285.125::real`); (2) magnitudes from 1e-30 to 1e30, whose
    /// sums depend on the order of addition; (3) NaN, ±Infinity, -0, 0 and denormals among
    /// plain values; (4) only -0 and 0, whose min, max and sum keep the sign of the row
    /// PostgreSQL's functions keep.
    pub fn float_expr(&self, b: &str) -> String {
        let half = self.modulus / 2;
        let t = if self.ty == ColType::Float4 {
            "float4"
        } else {
            "float8"
        };
        let (denormal, tiny) = if self.ty == ColType::Float4 {
            ("1e-45", "-2.5e-40")
        } else {
            ("5e-324", "-2.5e-320")
        };
        match self.value_flavor() {
            0 => format!("((({b} - {half})::float8 / 7.3)::{t})"),
            1 => format!("((({b} - {half}) * 1000 + 0.125 * ({b} % 8))::{t})"),
            2 => format!(
                "((({b} - {half})::float8 * power(10::float8, (({b} % 61) - 30)::float8))::{t})"
            ),
            3 => format!(
                "(CASE {b} % 12 WHEN 0 THEN 'NaN'::{t} WHEN 1 THEN 'Infinity'::{t} \
                 WHEN 2 THEN '-Infinity'::{t} WHEN 3 THEN '-0'::{t} WHEN 4 THEN 0::{t} \
                 WHEN 5 THEN '{denormal}'::{t} WHEN 6 THEN '{tiny}'::{t} \
                 ELSE (({b} - {half})::float8 / 3.0)::{t} END)"
            ),
            _ => format!("(CASE WHEN {b} % 3 = 1 THEN 0::{t} ELSE '-0'::{t} END)"),
        }
    }

    /// numeric values of base number `b`, by flavor: (0) cents (scale 2); (1) equal values
    /// of different scales (`1`, `1.0`, `1.00`, `1.000`), ties in min and max; (2)
    /// magnitudes from 1e-60 to 1e60 (sums beyond 38 digits); (3) now and then a value of
    /// 131,000 digits before the point or of scale 16383, among small ones; (4) NaN and
    /// ±Infinity among eighths.
    pub fn numeric_expr(&self, b: &str) -> String {
        let half = self.modulus / 2;
        match self.value_flavor() {
            0 => format!("((({b} - {half}) * 0.01)::numeric)"),
            1 => format!("round((({b} % 7) - 3)::numeric, (({b} / 7) % 4)::int)"),
            2 => format!("((({b} - {half})::text || 'e' || (({b} % 121) - 60)::text)::numeric)"),
            3 => format!(
                "((({b} - {half})::text || 'e' || (CASE {b} % 9 WHEN 0 THEN 131000 \
                 WHEN 1 THEN -16383 ELSE ({b} % 200) - 100 END)::text)::numeric)"
            ),
            _ => format!(
                "(CASE {b} % 10 WHEN 0 THEN 'NaN'::numeric WHEN 1 THEN 'Infinity'::numeric \
                 WHEN 2 THEN '-Infinity'::numeric ELSE ({b} - {half})::numeric / 8 END)"
            ),
        }
    }
}

impl TableSpec {
    /// Whether the aggregate `expr` (`sum(c2)`) answers differently when the same rows
    /// come in another order: a float sum or average (rounding), a float or numeric min or
    /// max (which of two equal values, `-0`/`0` or `1.0`/`1.00`, is returned).
    pub fn depends_on_row_order(&self, expr: &str) -> bool {
        let Some((func, rest)) = expr.split_once('(') else {
            return false;
        };
        let column = rest.trim_end_matches(')');
        let Some(col) = self.columns.iter().find(|c| c.name == column) else {
            return false;
        };
        match func {
            "sum" | "avg" => matches!(col.ty, ColType::Float4 | ColType::Float8),
            "min" | "max" => col.ty.is_inexact_or_numeric(),
            _ => false,
        }
    }
}

/// The predicate of a partial index.
#[derive(Clone, Debug)]
pub enum Partial {
    /// `WHERE col % 2 = 0` (integer column).
    Even(usize),
    /// `WHERE col > K` (integer column).
    Greater(usize, i64),
    /// `WHERE col IS NOT NULL`.
    NotNull(usize),
}

impl Partial {
    fn sql(&self, columns: &[Column]) -> String {
        match self {
            Partial::Even(c) => format!("{} % 2 = 0", columns[*c].name),
            Partial::Greater(c, k) => format!("{} > {k}", columns[*c].name),
            Partial::NotNull(c) => format!("{} IS NOT NULL", columns[*c].name),
        }
    }
}

/// One key column of a btree.
#[derive(Clone, Debug)]
pub struct IndexKey {
    pub column: usize,
    pub desc: bool,
    /// `NULLS FIRST` (true), `NULLS LAST` (false) or the default for the direction.
    pub nulls_first: Option<bool>,
}

/// One btree.
#[derive(Clone, Debug)]
pub struct IndexSpec {
    pub name: String,
    pub keys: Vec<IndexKey>,
    pub unique: bool,
    pub primary_key: bool,
    pub partial: Option<Partial>,
    /// Created right after the table (true) or somewhere in the history.
    pub before_writes: bool,
}

impl IndexSpec {
    /// The column of the first key.
    pub fn first_column(&self) -> usize {
        self.keys[0].column
    }

    /// The statement creating it on `table`.
    pub fn create_sql(&self, table: &TableSpec) -> String {
        let keys: Vec<String> = self
            .keys
            .iter()
            .map(|k| {
                let mut s = table.columns[k.column].name.clone();
                if k.desc {
                    s.push_str(" DESC");
                }
                match k.nulls_first {
                    Some(true) => s.push_str(" NULLS FIRST"),
                    Some(false) => s.push_str(" NULLS LAST"),
                    None => {}
                }
                s
            })
            .collect();
        if self.primary_key {
            return format!(
                "ALTER TABLE {} ADD CONSTRAINT {} PRIMARY KEY ({})",
                table.qualified,
                self.name,
                keys.join(", ")
            );
        }
        format!(
            "CREATE {}INDEX {} ON {} ({}){}",
            if self.unique { "UNIQUE " } else { "" },
            self.name,
            table.qualified,
            keys.join(", "),
            self.partial
                .as_ref()
                .map(|p| format!(" WHERE {}", p.sql(&table.columns)))
                .unwrap_or_default()
        )
    }
}

/// One table of a seed.
#[derive(Clone, Debug)]
pub struct TableSpec {
    /// `seedN.tK`
    pub qualified: String,
    /// Column 0 is `id`, the row number the other values are computed from.
    pub columns: Vec<Column>,
    pub indexes: Vec<IndexSpec>,
    pub fillfactor: Option<u64>,
}

impl TableSpec {
    /// The `--select` list (and PostgreSQL's select list): `count(*)` and every aggregate of
    /// every column, so a row wrongly kept or dropped shows whatever the predicate.
    pub fn select_list(&self) -> String {
        let mut list = vec!["count(*)".to_string()];
        for c in &self.columns {
            list.extend(c.aggregates());
        }
        list.join(", ")
    }

    /// Columns in some unique index: an update of one is a key update (it conflicts with
    /// FOR KEY SHARE).
    fn key_columns(&self) -> Vec<usize> {
        let mut cols: Vec<usize> = self
            .indexes
            .iter()
            .filter(|i| i.unique || i.primary_key)
            .flat_map(|i| i.keys.iter().map(|k| k.column))
            .collect();
        cols.sort_unstable();
        cols.dedup();
        cols
    }

    /// True when some unique index (created or to be created) holds `id` alone, so ids
    /// must stay unique and `ON CONFLICT (id)` has an arbiter once it exists.
    fn id_unique_spec(&self) -> Option<usize> {
        self.indexes
            .iter()
            .position(|i| (i.unique || i.primary_key) && i.keys.len() == 1 && i.keys[0].column == 0)
    }

    fn ids_must_be_unique(&self) -> bool {
        self.indexes
            .iter()
            .any(|i| (i.unique || i.primary_key) && i.keys.iter().any(|k| k.column == 0))
    }
}

/// One SQL step of the history, run by `session` (0 is the main session; 1 and 2 hold
/// locks beside it; [`OPEN_SESSION`] stays in its transaction until the server stops).
#[derive(Clone, Debug)]
pub struct Step {
    pub session: usize,
    pub sql: String,
}

/// The session of a seed whose transaction is still open when the server stops.
pub const OPEN_SESSION: usize = 3;

/// The session holding an old snapshot (`REPEATABLE READ`) across other steps, so neither
/// pruning nor `VACUUM` removes the row versions it still sees: they stay on the page with
/// their xmax (a MultiXact among them) for pageio to judge.
pub const SNAPSHOT_SESSION: usize = 4;

/// Everything a seed makes.
pub struct SeedPlan {
    pub seed: u64,
    pub schema: String,
    pub tables: Vec<TableSpec>,
    pub steps: Vec<Step>,
    pub final_steps: Vec<Step>,
}

impl SeedPlan {
    /// The whole history as one SQL script, each step marked with its session.
    pub fn script(&self) -> String {
        let mut out = format!(
            "-- pageio differential scan test, seed {}\n\
             -- Steps marked `session 1`/`session 2` run in other connections beside session 0,\n\
             -- in the order written; `session {OPEN_SESSION}` is still in its transaction when the\n\
             -- server stops (pg_ctl stop -m fast). The final steps run after every seed's history.\n\n",
            self.seed
        );
        for (title, steps) in [("history", &self.steps), ("final steps", &self.final_steps)] {
            let _ = writeln!(out, "-- ===== {title} =====");
            for s in steps {
                let _ = writeln!(out, "-- session {}\n{};", s.session, s.sql);
            }
        }
        out
    }
}

const TYPES: &[ColType] = &[
    ColType::Int2,
    ColType::Int4,
    ColType::Int4,
    ColType::Int8,
    ColType::Text,
    ColType::Varchar,
    ColType::Date,
    ColType::Timestamp,
    ColType::Float4,
    ColType::Float8,
    ColType::Float8,
    ColType::Numeric,
    ColType::Numeric,
];

fn random_column(rng: &mut Rng, name: String, allow_wide: bool) -> Column {
    let ty = *rng.pick(TYPES);
    let null_percent = *rng.pick(&[0, 0, 0, 5, 20, 60, 95]);
    let modulus = match ty {
        ColType::Int2 => *rng.pick(&[3, 40, 1000, 30000]),
        ColType::Date => *rng.pick(&[3, 40, 1000, 30000]),
        _ => *rng.pick(&[3, 40, 1000, 100_000, 2_000_000]),
    };
    let text_shape = if ty == ColType::Text && allow_wide && rng.chance(35) {
        if rng.chance(50) {
            TextShape::WideCompressible
        } else {
            TextShape::WideIncompressible
        }
    } else if rng.chance(50) {
        TextShape::Padded
    } else {
        TextShape::Md5
    };
    let wide = matches!(
        text_shape,
        TextShape::WideCompressible | TextShape::WideIncompressible
    );
    Column {
        name,
        ty,
        null_percent,
        modulus,
        // An odd multiplier coprime with the modulus most of the time: values spread.
        mul: rng.range(1, 1_000_000) * 2 + 1,
        add: rng.below(1_000_000),
        text_shape,
        storage_external: wide && rng.chance(40),
    }
}

fn random_index(rng: &mut Rng, table: &TableSpec, name: String) -> IndexSpec {
    let n = table.columns.len();
    // Small wide text keys only: a btree entry has to fit a third of a page.
    let indexable: Vec<usize> = (0..n)
        .filter(|&c| {
            !matches!(
                table.columns[c].text_shape,
                TextShape::WideCompressible | TextShape::WideIncompressible
            ) || !table.columns[c].ty.is_text()
        })
        .filter(|&c| key_type_scanned(table.columns[c].ty))
        .collect();
    let first = *rng.pick(&indexable);
    let mut keys = vec![random_key(rng, first)];
    if rng.chance(30) {
        let second = *rng.pick(&indexable);
        if second != first {
            keys.push(random_key(rng, second));
        }
    }
    let col = &table.columns[first];
    let partial = if rng.chance(30) {
        let which = rng.below(4);
        Some(match which {
            0 if col.ty.is_integer() => Partial::Even(first),
            // id holds the row numbers themselves, a few thousand of them.
            1 if first == 0 => Partial::Greater(first, rng.below(4000) as i64),
            1 if col.ty.is_integer() => Partial::Greater(first, col.int_value(rng.next_u64())),
            2 => Partial::NotNull(*rng.pick(&indexable)),
            _ => Partial::NotNull(first),
        })
    } else {
        None
    };
    IndexSpec {
        name,
        keys,
        unique: false,
        primary_key: false,
        partial,
        before_writes: rng.chance(40),
    }
}

/// Whether pageio's bitmap and index scans walk a btree with a first key of this type
/// (numeric keys are not among them, so no btree on a numeric column is made).
fn key_type_scanned(ty: ColType) -> bool {
    ty != ColType::Numeric
}

fn random_key(rng: &mut Rng, column: usize) -> IndexKey {
    IndexKey {
        column,
        desc: rng.chance(35),
        nulls_first: match rng.below(4) {
            0 => Some(true),
            1 => Some(false),
            _ => None,
        },
    }
}

fn random_table(rng: &mut Rng, schema: &str, k: usize) -> TableSpec {
    let mut columns = vec![Column {
        name: "id".into(),
        ty: if rng.chance(50) {
            ColType::Int4
        } else {
            ColType::Int8
        },
        null_percent: 0,
        modulus: u64::MAX,
        mul: 1,
        add: 0,
        text_shape: TextShape::Padded,
        storage_external: false,
    }];
    let extra = rng.range(1, 5) as usize;
    let allow_wide = rng.chance(40);
    for c in 1..=extra {
        columns.push(random_column(rng, format!("c{c}"), allow_wide));
    }
    let mut table = TableSpec {
        qualified: format!("{schema}.t{k}"),
        columns,
        indexes: Vec::new(),
        fillfactor: if rng.chance(35) {
            Some(*rng.pick(&[30, 50, 70, 90]))
        } else {
            None
        },
    };
    // A primary key or unique index on id some of the time, then random btrees.
    match rng.below(4) {
        0 => table.indexes.push(IndexSpec {
            name: format!("t{k}_pkey"),
            keys: vec![IndexKey {
                column: 0,
                desc: false,
                nulls_first: None,
            }],
            unique: false,
            primary_key: true,
            partial: None,
            before_writes: rng.chance(60),
        }),
        1 => {
            let mut keys = vec![random_key(rng, 0)];
            if rng.chance(40) && table.columns.len() > 1 {
                let c = rng.range(1, table.columns.len() as u64 - 1) as usize;
                if (!table.columns[c].ty.is_text()
                    || matches!(
                        table.columns[c].text_shape,
                        TextShape::Padded | TextShape::Md5
                    ))
                    && key_type_scanned(table.columns[c].ty)
                {
                    keys.push(random_key(rng, c));
                }
            }
            table.indexes.push(IndexSpec {
                name: format!("t{k}_uniq"),
                keys,
                unique: true,
                primary_key: false,
                partial: None,
                before_writes: rng.chance(50),
            });
        }
        _ => {}
    }
    let more = rng.range(0, 3);
    for j in 0..more {
        let idx = random_index(rng, &table, format!("t{k}_ix{j}"));
        table.indexes.push(idx);
    }
    table
}

/// What the generator knows of a table while it writes the history.
struct TableState {
    /// Ids below this have been handed out.
    next_id: u64,
    /// Which of the table's indexes exist by now.
    created: Vec<bool>,
    /// Salts of updates, so each update writes new values.
    salt: u64,
    /// Offsets of key updates of `id` so far.
    id_shifts: u64,
}

/// The plan of `seed`.
pub fn plan(seed: u64) -> SeedPlan {
    let mut rng = Rng::new(seed);
    let mut schema = format!("seed{seed}");
    let n_tables = rng.range(1, 3) as usize;
    let mut tables: Vec<TableSpec> = (1..=n_tables)
        .map(|k| random_table(&mut rng, &schema, k))
        .collect();
    apply_name_style(seed, &mut schema, &mut tables);
    let mut g = Gen {
        rng,
        steps: Vec::new(),
        seed,
        prepared: 0,
        snapshot_held: false,
    };
    g.main(format!("CREATE SCHEMA {schema}"));
    let mut states = Vec::new();
    for t in &tables {
        let cols: Vec<String> = t
            .columns
            .iter()
            .map(|c| format!("{} {}", c.name, c.ty.sql()))
            .collect();
        g.main(format!(
            "CREATE TABLE {} ({}){}",
            t.qualified,
            cols.join(", "),
            t.fillfactor
                .map(|f| format!(" WITH (fillfactor = {f})"))
                .unwrap_or_default()
        ));
        for c in &t.columns {
            if c.storage_external {
                g.main(format!(
                    "ALTER TABLE {} ALTER COLUMN {} SET STORAGE EXTERNAL",
                    t.qualified, c.name
                ));
            }
        }
        let mut created = vec![false; t.indexes.len()];
        for (i, idx) in t.indexes.iter().enumerate() {
            if idx.before_writes {
                g.main(idx.create_sql(t));
                created[i] = true;
            }
        }
        let mut st = TableState {
            next_id: 1,
            created,
            salt: 1,
            id_shifts: 0,
        };
        // Every table starts with rows.
        g.insert(t, &mut st, None);
        states.push(st);
    }
    let n_ops = g.rng.range(15, 30);
    for _ in 0..n_ops {
        let k = g.rng.below(tables.len() as u64) as usize;
        let t = &tables[k];
        let st = &mut states[k];
        // Indexes still to create appear at a random point.
        if let Some(i) = st.created.iter().position(|c| !c) {
            if g.rng.chance(25) {
                g.create_index(t, i);
                st.created[i] = true;
                continue;
            }
        }
        g.random_op(t, st);
    }
    for (t, st) in tables.iter().zip(states.iter_mut()) {
        for i in 0..t.indexes.len() {
            if !st.created[i] {
                g.create_index(t, i);
                st.created[i] = true;
            }
        }
        // Deletes and updates after the last index was built, so every index has entries
        // of dead rows, and some of them killed by PostgreSQL's own index scans.
        if g.rng.chance(70) {
            g.delete(t, st);
        }
        if g.rng.chance(50) {
            g.kill_index_entries(t);
        }
        if g.rng.chance(40) {
            g.update(t, st, false);
        }
        if g.rng.chance(30) {
            g.main(format!("VACUUM {}", t.qualified));
        }
    }
    g.release_snapshot();
    let steps = std::mem::take(&mut g.steps);
    // The final steps: a prepared transaction and a transaction still open at shutdown.
    let k = g.rng.below(tables.len() as u64) as usize;
    if g.rng.chance(60) {
        g.prepared_at_shutdown(&tables[k], &mut states[k]);
    }
    let k = g.rng.below(tables.len() as u64) as usize;
    if g.rng.chance(60) {
        g.open_at_shutdown(&tables[k], &mut states[k]);
    }
    SeedPlan {
        seed,
        schema,
        tables,
        steps,
        final_steps: g.steps,
    }
}

struct Gen {
    rng: Rng,
    steps: Vec<Step>,
    seed: u64,
    prepared: u64,
    /// True while [`SNAPSHOT_SESSION`] holds its snapshot.
    snapshot_held: bool,
}

impl Gen {
    /// Ends the held snapshot, if any: before steps that need a lock it would conflict
    /// with, and at the end of the history.
    fn release_snapshot(&mut self) {
        if self.snapshot_held {
            self.snapshot_held = false;
            self.on(SNAPSHOT_SESSION, "COMMIT".into());
        }
    }

    fn create_index(&mut self, t: &TableSpec, i: usize) {
        // ALTER TABLE … ADD PRIMARY KEY waits for every lock on the table.
        self.release_snapshot();
        self.main(t.indexes[i].create_sql(t));
    }

    fn on(&mut self, session: usize, sql: String) {
        self.steps.push(Step { session, sql });
    }

    fn main(&mut self, sql: String) {
        self.on(0, sql);
    }

    /// A set of rows by id: a residue class or a range of the ids handed out so far.
    fn rows(&mut self, st: &TableState) -> String {
        let top = st.next_id.max(2);
        match self.rng.below(3) {
            0 => {
                let m = self.rng.range(2, 9);
                format!("id % {m} = {}", self.rng.below(m))
            }
            1 => {
                let a = self.rng.range(1, top);
                let len = self.rng.range(1, (top / 4).max(2));
                format!("id BETWEEN {a} AND {}", a + len)
            }
            _ => {
                let m = self.rng.range(3, 17);
                let a = self.rng.range(1, top);
                format!("id % {m} = {} AND id >= {a}", self.rng.below(m))
            }
        }
    }

    /// An `INSERT … SELECT` of a fresh id range (or, when ids need not be unique, sometimes
    /// of ids used before), with an `ON CONFLICT` clause when `on_conflict` says so.
    fn insert_sql(
        &mut self,
        t: &TableSpec,
        st: &mut TableState,
        on_conflict: Option<&str>,
    ) -> String {
        let n = *self.rng.pick(&[50, 300, 1000, 2500]);
        let reuse = !t.ids_must_be_unique() && st.next_id > 10 && self.rng.chance(20);
        let start = if reuse || on_conflict.is_some() {
            self.rng.range(1, st.next_id)
        } else {
            st.next_id
        };
        let end = start + n - 1;
        st.next_id = st.next_id.max(end + 1);
        st.salt += 1;
        let salt = if self.rng.chance(70) { 0 } else { st.salt };
        let names: Vec<&str> = t.columns.iter().map(|c| c.name.as_str()).collect();
        let values: Vec<String> = t
            .columns
            .iter()
            .map(|c| {
                if c.name == "id" {
                    "g".to_string()
                } else {
                    c.value_expr("g", salt)
                }
            })
            .collect();
        format!(
            "INSERT INTO {} ({}) SELECT {} FROM generate_series({start}, {end}) g{}",
            t.qualified,
            names.join(", "),
            values.join(", "),
            on_conflict.unwrap_or("")
        )
    }

    fn insert(&mut self, t: &TableSpec, st: &mut TableState, on_conflict: Option<&str>) {
        let sql = self.insert_sql(t, st, on_conflict);
        self.main(sql);
    }

    /// An `UPDATE` of some rows: of an indexed column (not HOT) when `indexed`, else of a
    /// column no existing index holds (HOT when the page has room). Never a key column
    /// unless `keys_allowed`.
    fn update_sql(
        &mut self,
        t: &TableSpec,
        st: &mut TableState,
        indexed: bool,
        keys_allowed: bool,
        rows: Option<&str>,
    ) -> Option<String> {
        let key_cols = t.key_columns();
        let indexed_cols: Vec<usize> = t
            .indexes
            .iter()
            .zip(&st.created)
            .filter(|(_, c)| **c)
            .flat_map(|(i, _)| {
                let mut v: Vec<usize> = i.keys.iter().map(|k| k.column).collect();
                if let Some(Partial::NotNull(c) | Partial::Even(c) | Partial::Greater(c, _)) =
                    i.partial
                {
                    v.push(c);
                }
                v
            })
            .collect();
        let candidates: Vec<usize> = (1..t.columns.len())
            .filter(|c| indexed_cols.contains(c) == indexed)
            .filter(|c| keys_allowed || !key_cols.contains(c))
            .collect();
        if candidates.is_empty() {
            return None;
        }
        let c = *self.rng.pick(&candidates);
        st.salt += 1;
        let col = &t.columns[c];
        let value = col.value_expr("id", st.salt);
        let rows = match rows {
            Some(r) => r.to_string(),
            None => self.rows(st),
        };
        let mut set = format!("{} = {value}", col.name);
        // Sometimes a second column at once.
        if self.rng.chance(25) {
            let d = *self.rng.pick(&candidates);
            if d != c {
                let _ = write!(
                    set,
                    ", {} = {}",
                    t.columns[d].name,
                    t.columns[d].value_expr("id", st.salt + 7)
                );
            }
        }
        Some(format!("UPDATE {} SET {set} WHERE {rows}", t.qualified))
    }

    fn update(&mut self, t: &TableSpec, st: &mut TableState, indexed: bool) {
        let keys_allowed = !t.ids_must_be_unique() || self.rng.chance(50);
        if let Some(sql) = self
            .update_sql(t, st, indexed, keys_allowed, None)
            .or_else(|| self.update_sql(t, st, !indexed, keys_allowed, None))
        {
            self.main(sql);
        }
    }

    fn delete_sql(&mut self, t: &TableSpec, st: &TableState) -> String {
        let rows = self.rows(st);
        format!("DELETE FROM {} WHERE {rows}", t.qualified)
    }

    fn delete(&mut self, t: &TableSpec, st: &TableState) {
        let sql = self.delete_sql(t, st);
        self.main(sql);
    }

    /// One write of any kind, as SQL for a transaction body.
    fn any_write(&mut self, t: &TableSpec, st: &mut TableState) -> String {
        match self.rng.below(3) {
            0 => self.insert_sql(t, st, None),
            1 => {
                let indexed = self.rng.chance(50);
                self.update_sql(t, st, indexed, false, None)
                    .unwrap_or_else(|| self.delete_sql(t, st))
            }
            _ => self.delete_sql(t, st),
        }
    }

    /// PostgreSQL's own index scan over a range of an index's first key (the heap fetched
    /// for every entry): entries of rows dead to everyone are marked killed (LP_DEAD).
    fn kill_index_entries(&mut self, t: &TableSpec) {
        if t.indexes.is_empty() {
            return;
        }
        let idx = self.rng.pick(&t.indexes).clone();
        let col = &t.columns[idx.first_column()];
        let (a, b) = (self.rng.next_u64(), self.rng.next_u64());
        let range = if col.name == "id" {
            format!("id BETWEEN 1 AND {}", 1 + a % 100_000)
        } else {
            format!(
                "{} BETWEEN {} AND {}",
                col.name,
                col.constant_expr(a.min(b) % col.modulus),
                col.constant_expr(a.max(b) % col.modulus)
            )
        };
        // The partial index's own predicate, so the planner can use it.
        let extra = idx
            .partial
            .as_ref()
            .map(|p| format!(" AND {}", p.sql(&t.columns)))
            .unwrap_or_default();
        self.main(format!(
            "SET enable_seqscan = off; SET enable_bitmapscan = off; SET enable_indexonlyscan = off; \
             SELECT count(*), max(id) FROM {} WHERE {range}{extra}; \
             RESET enable_seqscan; RESET enable_bitmapscan; RESET enable_indexonlyscan",
            t.qualified
        ));
    }

    fn random_op(&mut self, t: &TableSpec, st: &mut TableState) {
        match self.rng.below(100) {
            0..=13 => self.insert(t, st, None),
            14..=23 => self.update(t, st, false),
            24..=33 => self.update(t, st, true),
            34..=43 => self.delete(t, st),
            44..=48 => {
                // A transaction rolled back.
                let w1 = self.any_write(t, st);
                let w2 = self.any_write(t, st);
                self.main(format!("BEGIN; {w1}; {w2}; ROLLBACK"));
            }
            49..=55 => {
                // Savepoints rolled back and released.
                let w: Vec<String> = (0..4).map(|_| self.any_write(t, st)).collect();
                let end = if self.rng.chance(80) {
                    "COMMIT"
                } else {
                    "ROLLBACK"
                };
                self.main(format!(
                    "BEGIN; {}; SAVEPOINT a; {}; ROLLBACK TO SAVEPOINT a; SAVEPOINT b; {}; RELEASE SAVEPOINT b; {}; {end}",
                    w[0], w[1], w[2], w[3]
                ));
            }
            56..=62 => self.lock_then_update_in_subtransaction(t, st),
            63..=67 => self.two_sessions_share(t, st),
            68..=73 => self.key_share_beside_update(t, st),
            74..=77 => self.on_conflict(t, st),
            78..=80 => self.two_phase(t, st),
            81..=85 => {
                let how = *self
                    .rng
                    .pick(&["", "", " (INDEX_CLEANUP OFF)", " (FREEZE)"]);
                self.main(format!("VACUUM{how} {}", t.qualified));
            }
            86..=87 => self.main("CHECKPOINT".into()),
            88..=91 => {
                if self.snapshot_held {
                    self.release_snapshot();
                } else {
                    self.snapshot_held = true;
                    self.on(
                        SNAPSHOT_SESSION,
                        format!(
                            "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM {}",
                            t.qualified
                        ),
                    );
                }
            }
            92..=95 => self.kill_index_entries(t),
            _ => {
                // A key update of id: the old versions' successors get new ids.
                if !t.ids_must_be_unique() || self.rng.chance(50) {
                    st.id_shifts += 1;
                    let rows = self.rows(st);
                    self.main(format!(
                        "UPDATE {} SET id = id + {} WHERE {rows}",
                        t.qualified,
                        st.id_shifts * 10_000_000
                    ));
                } else {
                    self.delete(t, st);
                }
            }
        }
    }

    /// The classic MultiXact: rows locked in a transaction and updated (or deleted) in its
    /// subtransaction, so the new xmax holds the locker and the updater.
    fn lock_then_update_in_subtransaction(&mut self, t: &TableSpec, st: &mut TableState) {
        let strength = *self.rng.pick(&[
            "FOR SHARE",
            "FOR KEY SHARE",
            "FOR UPDATE",
            "FOR NO KEY UPDATE",
        ]);
        let rows = self.rows(st);
        let indexed = self.rng.chance(50);
        let write = if self.rng.chance(75) {
            self.update_sql(t, st, indexed, false, Some(&rows))
                .unwrap_or_else(|| format!("DELETE FROM {} WHERE {rows}", t.qualified))
        } else {
            format!("DELETE FROM {} WHERE {rows}", t.qualified)
        };
        let sub_end = if self.rng.chance(75) {
            "RELEASE SAVEPOINT s"
        } else {
            "ROLLBACK TO SAVEPOINT s"
        };
        let end = if self.rng.chance(85) {
            "COMMIT"
        } else {
            "ROLLBACK"
        };
        self.main(format!(
            "BEGIN; SELECT id FROM {} WHERE {rows} {strength}; SAVEPOINT s; {write}; {sub_end}; {end}",
            t.qualified
        ));
    }

    /// Two sessions holding share locks on the same rows at once (a MultiXact of lockers
    /// only: the rows stay live), ended each its own way.
    fn two_sessions_share(&mut self, t: &TableSpec, st: &mut TableState) {
        let rows = self.rows(st);
        let q = &t.qualified;
        let s1 = *self.rng.pick(&["FOR SHARE", "FOR KEY SHARE"]);
        let s2 = *self.rng.pick(&["FOR SHARE", "FOR KEY SHARE"]);
        self.on(1, format!("BEGIN; SELECT id FROM {q} WHERE {rows} {s1}"));
        self.on(2, format!("BEGIN; SELECT id FROM {q} WHERE {rows} {s2}"));
        let e1 = *self.rng.pick(&["COMMIT", "ROLLBACK"]);
        let e2 = *self.rng.pick(&["COMMIT", "COMMIT", "ROLLBACK"]);
        if self.rng.chance(50) {
            self.on(1, e1.into());
            self.on(2, e2.into());
        } else {
            self.on(2, e2.into());
            self.on(1, e1.into());
        }
    }

    /// A key-share lock in one session while another updates non-key columns of the same
    /// rows: the new xmax is a MultiXact of a locker and an updater.
    fn key_share_beside_update(&mut self, t: &TableSpec, st: &mut TableState) {
        let rows = self.rows(st);
        let indexed = self.rng.chance(50);
        let Some(update) = self.update_sql(t, st, indexed, false, Some(&rows)) else {
            return self.two_sessions_share(t, st);
        };
        let q = &t.qualified;
        // The updater locks FOR NO KEY UPDATE first, or not at all.
        let pre = if self.rng.chance(30) {
            let rows = self.rows(st);
            format!("SELECT id FROM {q} WHERE {rows} FOR NO KEY UPDATE; ")
        } else {
            String::new()
        };
        self.on(
            1,
            format!("BEGIN; SELECT id FROM {q} WHERE {rows} FOR KEY SHARE"),
        );
        self.on(2, format!("BEGIN; {pre}{update}"));
        let e1 = *self.rng.pick(&["COMMIT", "COMMIT", "ROLLBACK"]);
        let e2 = *self.rng.pick(&["COMMIT", "COMMIT", "ROLLBACK"]);
        if self.rng.chance(50) {
            self.on(2, e2.into());
            self.on(1, e1.into());
        } else {
            self.on(1, e1.into());
            self.on(2, e2.into());
        }
    }

    fn on_conflict(&mut self, t: &TableSpec, st: &mut TableState) {
        let arbiter = t.id_unique_spec().filter(|&i| st.created[i]);
        match arbiter {
            Some(_) if self.rng.chance(70) => {
                let key_cols = t.key_columns();
                let sets: Vec<String> = t
                    .columns
                    .iter()
                    .enumerate()
                    .skip(1)
                    .filter(|(c, _)| !key_cols.contains(c))
                    .map(|(_, c)| format!("{0} = EXCLUDED.{0}", c.name))
                    .collect();
                let clause = if sets.is_empty() {
                    " ON CONFLICT (id) DO NOTHING".to_string()
                } else {
                    format!(" ON CONFLICT (id) DO UPDATE SET {}", sets.join(", "))
                };
                self.insert(t, st, Some(&clause));
            }
            Some(_) => self.insert(t, st, Some(" ON CONFLICT (id) DO NOTHING")),
            None if t.ids_must_be_unique() => {
                // A unique index to come: without an arbiter yet, only fresh ids.
                self.insert(t, st, None)
            }
            None => self.insert(t, st, Some(" ON CONFLICT DO NOTHING")),
        }
    }

    /// A prepared transaction committed or rolled back later in the history.
    fn two_phase(&mut self, t: &TableSpec, st: &mut TableState) {
        self.prepared += 1;
        let gid = format!("seed{}_{}", self.seed, self.prepared);
        let w1 = self.any_write(t, st);
        let w2 = self.any_write(t, st);
        self.main(format!("BEGIN; {w1}; {w2}; PREPARE TRANSACTION '{gid}'"));
        if self.rng.chance(50) {
            self.insert(t, st, None);
        }
        let end = *self.rng.pick(&["COMMIT PREPARED", "ROLLBACK PREPARED"]);
        self.main(format!("{end} '{gid}'"));
    }

    /// Rows written, updated, deleted and share-locked by a transaction left prepared.
    fn prepared_at_shutdown(&mut self, t: &TableSpec, st: &mut TableState) {
        let insert = self.insert_sql(t, st, None);
        let indexed = self.rng.chance(50);
        let update = self
            .update_sql(t, st, indexed, false, Some("id % 11 = 3"))
            .map(|u| format!("{u}; "))
            .unwrap_or_default();
        let q = &t.qualified;
        self.main(format!(
            "BEGIN; {insert}; {update}DELETE FROM {q} WHERE id % 11 = 5; \
             SELECT id FROM {q} WHERE id % 11 = 7 FOR SHARE; PREPARE TRANSACTION 'seed{}_open'",
            self.seed
        ));
    }

    /// Rows written, updated, deleted and key-share-locked by a transaction still open when
    /// the server stops (its rows disjoint from the prepared one's, so it never waits).
    fn open_at_shutdown(&mut self, t: &TableSpec, st: &mut TableState) {
        let insert = self.insert_sql(t, st, None);
        let indexed = self.rng.chance(50);
        let update = self
            .update_sql(t, st, indexed, false, Some("id % 11 = 4"))
            .map(|u| format!("{u}; "))
            .unwrap_or_default();
        let q = &t.qualified;
        self.on(
            OPEN_SESSION,
            format!(
                "BEGIN; {insert}; {update}DELETE FROM {q} WHERE id % 11 = 6; \
                 SELECT id FROM {q} WHERE id % 11 = 7 FOR KEY SHARE"
            ),
        );
    }
}

/// Names as SQL writes them, drawn per seed from their own generator (so the rest of the
/// plan does not change with them): plain, or quoted with capitals, dots, spaces and
/// non-ASCII letters, or unquoted capitals that both PostgreSQL and pageio fold (only the
/// ASCII ones: `ÉCol1` is the column `Écol1`). Every
/// name is kept in its SQL form (`"S.dot"."T x"`), so the statements, `--table`,
/// `--select` and `--where` all read it the same way. The `id` column keeps its name.
pub fn apply_name_style(seed: u64, schema: &mut String, tables: &mut [TableSpec]) {
    let mut rng = Rng::new(seed ^ 0x4E41_4D45_5354_594C);
    let style = rng.below(4);
    if style == 0 {
        return;
    }
    let schema_forms = [
        format!("\"Seed{seed}.dot\""),
        format!("\"séed{seed}\""),
        format!("SEED{seed}"),
    ];
    *schema = rng.pick(&schema_forms).clone();
    for (k, t) in tables.iter_mut().enumerate() {
        let k = k + 1;
        let table_forms = [
            format!("\"T{k}.x\""),
            format!("\"t{k} Ä\""),
            format!("T{k}"),
            format!("\"T{k}\""),
        ];
        t.qualified = format!("{schema}.{}", rng.pick(&table_forms));
        for (c, col) in t.columns.iter_mut().enumerate().skip(1) {
            let column_forms = [
                format!("c{c}"),
                format!("\"C{c}\""),
                format!("\"c.{c}\""),
                format!("\"Äx{c}\""),
                format!("Col{c}"),
                format!("ÉCol{c}"),
                format!("\"q\"\"{c}\""),
            ];
            col.name = rng.pick(&column_forms).clone();
        }
    }
}
