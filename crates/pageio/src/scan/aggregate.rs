//! Aggregates over a scan's qualifying rows, with PostgreSQL's result types.
//!
//! # Problem
//!
//! `SELECT count(abalance), sum(aid), max(filler) …` must print what PostgreSQL prints: the
//! result type follows the argument (`sum(int4)` is `bigint`, `sum(int8)` is `numeric`,
//! `sum(float4)` is `real`, accumulated in `real` as `float4pl` does), NULLs are skipped,
//! `sum`/`min`/`max` of no rows is NULL, and an exact type stays exact. A parallel scan
//! accumulates per worker and combines, so every accumulator can [`Accumulator::merge`].
//!
//! # Mechanism
//!
//! ```text
//!  "count(*), sum(octet_length(b)), max(a)"
//!      └─ parse_select ─► [SelectItem{Count, *}, SelectItem{SumOctetLength, b}, SelectItem{Max, a}]
//!  per item and column type ─► Accumulator:
//!      count(*) / count(col)         i64 count                      → bigint
//!      sum(int2|int4)                i128, checked into i64         → bigint
//!      sum(int8)                     i128                           → numeric
//!      sum(float4) / sum(float8)     f32 / f64 in scan order, the   → real / double precision
//!                                    first row's value as it is
//!                                    (`-0` stays `-0`), overflow an
//!                                    error as float4pl/float8pl
//!      sum(numeric)                  exact decimal of any size      → numeric
//!      sum(octet_length(col))        i128, checked into i64         → bigint
//!      avg(int2|int4|int8|numeric)   exact sum / count, scale as     → numeric
//!                                    select_div_scale picks it
//!      avg(float4|float8)            float8_accum's N, Sx, Sxx and   → double precision
//!                                    its overflow errors; Sx / N
//!      min(col) / max(col)           the column's Value, PostgreSQL order ("C" collation);
//!                                    on a tie the later row's value, as float8larger,
//!                                    numeric_larger, … return their second argument
//!                                    (bpchar_larger/smaller keep the first)
//! ```
//!
//! # Worked example
//!
//! `sum(aid)` over `aid` int4 1..=100000: 5000050000, a `bigint`; the same over an `int8`
//! column is the `numeric` 5000050000, which JSON carries as a number because it is an
//! integer below 2^53 (see [`AggregateResult::json_value`]).

use super::signatures::Function;
use super::value::{Numeric, TypeKind, Value};

/// The aggregate functions understood.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AggFunc {
    /// `count(*)` (no column) or `count(col)`.
    Count,
    /// `sum(col)`.
    Sum,
    /// `min(col)`.
    Min,
    /// `max(col)`.
    Max,
    /// `sum(octet_length(col))`.
    SumOctetLength,
    /// `avg(col)`.
    Avg,
}

impl AggFunc {
    /// The function PostgreSQL resolves against the column's type: `octet_length` for
    /// `sum(octet_length(col))` (its `sum` takes the integer octet_length returns).
    pub fn function(self) -> Function {
        match self {
            AggFunc::Count => Function::Count,
            AggFunc::Sum => Function::Sum,
            AggFunc::Min => Function::Min,
            AggFunc::Max => Function::Max,
            AggFunc::SumOctetLength => Function::OctetLength,
            AggFunc::Avg => Function::Avg,
        }
    }
}

/// One item of a select list, its column not yet resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectItem {
    /// The text as asked, trimmed (`count(abalance)`).
    pub expr: String,
    /// The function.
    pub func: AggFunc,
    /// The column name (identifier folded as PostgreSQL folds it); `None` for `count(*)`.
    pub column: Option<String>,
}

/// The select list's parser, which reads names and keywords as PostgreSQL's lexer does.
pub use super::clause::parse_select;

/// The running state of one aggregate.
#[derive(Debug, Clone, PartialEq)]
pub enum Accumulator {
    /// `count`.
    Count(i64),
    /// `sum` of integers, or of octet lengths; `numeric_result` for `sum(int8)`.
    SumInt {
        /// The sum so far (`None`: no row).
        sum: Option<i128>,
        /// Result is `numeric` (sum of int8) rather than `bigint`.
        numeric_result: bool,
    },
    /// `sum(float4)`, in float4.
    SumFloat4(Option<f32>),
    /// `sum(float8)`.
    SumFloat8(Option<f64>),
    /// `sum(numeric)`.
    SumNumeric(Option<Numeric>),
    /// `avg` of integers or numeric (result `numeric`): the exact sum and the count.
    AvgNumeric {
        /// The sum so far.
        sum: Numeric,
        /// Rows summed.
        count: i64,
    },
    /// `avg` of float4 or float8 (result `double precision`): `float8_accum`'s state.
    AvgFloat(Float8Accum),
    /// `min` (`max` false) or `max`.
    Extreme {
        /// The extreme so far.
        best: Option<Value>,
        /// `max` rather than `min`.
        max: bool,
    },
}

impl Accumulator {
    /// The accumulator for `func` over a column of `kind` (`None`: `count(*)`), or the
    /// error PostgreSQL gives (`function sum(text) does not exist`).
    pub fn new(func: AggFunc, kind: Option<TypeKind>) -> Result<Accumulator, String> {
        let function = func.function();
        let missing = |k: Option<TypeKind>| {
            match k {
            Some(TypeKind::Other) | None => format!(
                "{}(other) is not evaluated by pageio, which reads smallint, integer, bigint, real, double precision, numeric, boolean, date, timestamp, timestamptz, text, varchar, character and bytea columns",
                function.name()
            ),
            Some(k) => format!("function {}({}) does not exist", function.name(), k.sql_name()),
        }
        };
        Ok(match (func, kind) {
            (AggFunc::Count, _) => Accumulator::Count(0),
            (
                AggFunc::SumOctetLength,
                Some(TypeKind::Text | TypeKind::Varchar | TypeKind::Bpchar | TypeKind::Bytea),
            ) => Accumulator::SumInt {
                sum: None,
                numeric_result: false,
            },
            (AggFunc::Sum, Some(TypeKind::Int2 | TypeKind::Int4)) => Accumulator::SumInt {
                sum: None,
                numeric_result: false,
            },
            (AggFunc::Sum, Some(TypeKind::Int8)) => Accumulator::SumInt {
                sum: None,
                numeric_result: true,
            },
            (AggFunc::Sum, Some(TypeKind::Float4)) => Accumulator::SumFloat4(None),
            (AggFunc::Sum, Some(TypeKind::Float8)) => Accumulator::SumFloat8(None),
            (AggFunc::Sum, Some(TypeKind::Numeric)) => Accumulator::SumNumeric(None),
            (
                AggFunc::Avg,
                Some(TypeKind::Int2 | TypeKind::Int4 | TypeKind::Int8 | TypeKind::Numeric),
            ) => Accumulator::AvgNumeric {
                sum: Numeric::from_i128(0),
                count: 0,
            },
            (AggFunc::Avg, Some(TypeKind::Float4 | TypeKind::Float8)) => {
                Accumulator::AvgFloat(Float8Accum::default())
            }
            (AggFunc::Min | AggFunc::Max, Some(k))
                if !matches!(k, TypeKind::Bool | TypeKind::Other) =>
            {
                Accumulator::Extreme {
                    best: None,
                    max: func == AggFunc::Max,
                }
            }
            (_, k) => return Err(missing(k)),
        })
    }

    /// Adds one non-null value (`count` takes `None` for `count(*)` rows too);
    /// `octet_length` for `sum(octet_length(col))`.
    pub fn add(&mut self, value: Option<&Value>, octet_length: Option<u64>) -> Result<(), String> {
        match self {
            Accumulator::Count(n) => *n += 1,
            Accumulator::SumInt { sum, .. } => {
                let v: i128 = match (value, octet_length) {
                    (_, Some(len)) => len as i128,
                    (Some(Value::Int2(v)), _) => *v as i128,
                    (Some(Value::Int4(v)), _) => *v as i128,
                    (Some(Value::Int8(v)), _) => *v as i128,
                    _ => return Ok(()),
                };
                *sum = Some(
                    sum.unwrap_or(0)
                        .checked_add(v)
                        .ok_or("sum overflows 128 bits")?,
                );
            }
            Accumulator::SumFloat4(sum) => {
                if let Some(Value::Float4(v)) = value {
                    // The first value is the state as it is (a strict transition function
                    // with no initial value), so a sum over `-0` alone is `-0`.
                    *sum = Some(match *sum {
                        None => *v,
                        Some(a) => float_add(a, *v)?,
                    });
                }
            }
            Accumulator::SumFloat8(sum) => {
                if let Some(Value::Float8(v)) = value {
                    *sum = Some(match *sum {
                        None => *v,
                        Some(a) => float_add(a, *v)?,
                    });
                }
            }
            Accumulator::SumNumeric(sum) => {
                if let Some(Value::Numeric(v)) = value {
                    match sum {
                        None => *sum = Some(v.clone()),
                        Some(s) => s.add_assign(v)?,
                    }
                }
            }
            Accumulator::AvgNumeric { sum, count } => {
                match value {
                    Some(Value::Int2(v)) => sum.add_assign(&Numeric::from_i128(*v as i128))?,
                    Some(Value::Int4(v)) => sum.add_assign(&Numeric::from_i128(*v as i128))?,
                    Some(Value::Int8(v)) => sum.add_assign(&Numeric::from_i128(*v as i128))?,
                    Some(Value::Numeric(n)) => sum.add_assign(n)?,
                    _ => return Ok(()),
                };
                *count = count.checked_add(1).ok_or("bigint out of range")?;
            }
            Accumulator::AvgFloat(state) => match value {
                Some(Value::Float4(v)) => state.accum(*v as f64)?,
                Some(Value::Float8(v)) => state.accum(*v)?,
                _ => {}
            },
            Accumulator::Extreme { best, max } => {
                if let Some(v) = value {
                    // PostgreSQL's transition functions (float8larger, numeric_larger,
                    // text_larger, …) return the new value unless the state is strictly
                    // better; bpchar_larger/smaller keep the state on a tie.
                    let keep_on_tie = matches!(v, Value::Bpchar(_));
                    let replace = match best {
                        None => true,
                        Some(b) => match b.pg_cmp(v) {
                            Some(std::cmp::Ordering::Greater) => !*max,
                            Some(std::cmp::Ordering::Less) => *max,
                            Some(std::cmp::Ordering::Equal) => !keep_on_tie,
                            None => false,
                        },
                    };
                    if replace {
                        *best = Some(v.clone());
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether the result does not depend on the order rows are added in: true for counts,
    /// exact sums and averages, min and max; false for sums and averages of floats, whose
    /// rounding depends on the order of the additions (so a parallel scan, whose threads
    /// add their parts in an order that varies from run to run, could print a different
    /// last digit than a serial one).
    pub fn is_order_independent(&self) -> bool {
        !matches!(
            self,
            Accumulator::SumFloat4(_) | Accumulator::SumFloat8(_) | Accumulator::AvgFloat(_)
        )
    }

    /// Combines another worker's state for the same aggregate into this one, as
    /// PostgreSQL's combine functions do (`float8pl`, `float8_combine`, `numeric_add`,
    /// `float8larger`, …). `other` must hold rows that come after this state's rows in
    /// scan order: then a tie in min/max resolves as in a serial scan (the later row's
    /// value), and the answer equals the serial one for every order-independent
    /// aggregate.
    pub fn merge(&mut self, other: &Accumulator) -> Result<(), String> {
        match (self, other) {
            (Accumulator::Count(a), Accumulator::Count(b)) => *a += b,
            (Accumulator::SumInt { sum: a, .. }, Accumulator::SumInt { sum: b, .. }) => {
                if let Some(b) = b {
                    *a = Some(
                        a.unwrap_or(0)
                            .checked_add(*b)
                            .ok_or("sum overflows 128 bits")?,
                    );
                }
            }
            (Accumulator::SumFloat4(a), Accumulator::SumFloat4(b)) => {
                if let Some(b) = b {
                    *a = Some(match *a {
                        None => *b,
                        Some(x) => float_add(x, *b)?,
                    });
                }
            }
            (Accumulator::SumFloat8(a), Accumulator::SumFloat8(b)) => {
                if let Some(b) = b {
                    *a = Some(match *a {
                        None => *b,
                        Some(x) => float_add(x, *b)?,
                    });
                }
            }
            (Accumulator::SumNumeric(a), Accumulator::SumNumeric(b)) => match (a.as_mut(), b) {
                (_, None) => {}
                (None, Some(b)) => *a = Some(b.clone()),
                (Some(a), Some(b)) => a.add_assign(b)?,
            },
            (
                Accumulator::AvgNumeric { sum, count },
                Accumulator::AvgNumeric {
                    sum: other_sum,
                    count: other_count,
                },
            ) => {
                sum.add_assign(other_sum)?;
                *count = count
                    .checked_add(*other_count)
                    .ok_or("bigint out of range")?;
            }
            (Accumulator::AvgFloat(a), Accumulator::AvgFloat(b)) => a.combine(b)?,
            (me @ Accumulator::Extreme { .. }, Accumulator::Extreme { best: Some(v), .. }) => {
                me.add(Some(v), None)?;
            }
            (Accumulator::Extreme { .. }, Accumulator::Extreme { best: None, .. }) => {}
            (a, b) => {
                return Err(format!(
                    "cannot merge {a:?} with {b:?}: different aggregates"
                ))
            }
        }
        Ok(())
    }

    /// The result and its PostgreSQL type name; `column` is the argument's type.
    pub fn finish(
        &self,
        column: Option<TypeKind>,
    ) -> Result<(Option<Value>, &'static str), String> {
        Ok(match self {
            Accumulator::Count(n) => (Some(Value::Int8(*n)), "bigint"),
            Accumulator::SumInt {
                sum,
                numeric_result: true,
            } => (
                sum.map(|s| Value::Numeric(Numeric::from_i128(s))),
                "numeric",
            ),
            Accumulator::SumInt { sum, .. } => (
                match sum {
                    None => None,
                    Some(s) => Some(Value::Int8(
                        i64::try_from(*s).map_err(|_| "bigint out of range")?,
                    )),
                },
                "bigint",
            ),
            Accumulator::SumFloat4(s) => (s.map(Value::Float4), "real"),
            Accumulator::SumFloat8(s) => (s.map(Value::Float8), "double precision"),
            Accumulator::SumNumeric(s) => (s.clone().map(Value::Numeric), "numeric"),
            Accumulator::AvgNumeric { count: 0, .. } => (None, "numeric"),
            Accumulator::AvgNumeric { sum, count } => (
                Some(Value::Numeric(
                    sum.div_by_count(*count)
                        .ok_or("avg of a negative count of rows")?,
                )),
                "numeric",
            ),
            Accumulator::AvgFloat(state) => (state.avg().map(Value::Float8), "double precision"),
            Accumulator::Extreme { best, .. } => {
                (best.clone(), column.map_or("unknown", |k| k.sql_name()))
            }
        })
    }
}

/// `a + b` as `float4pl`/`float8pl`: a sum of finite values that overflows to infinity is
/// PostgreSQL's error, not an Infinity.
fn float_add<F>(a: F, b: F) -> Result<F, String>
where
    F: std::ops::Add<Output = F> + Copy + Into<f64>,
{
    let sum = a + b;
    if sum.into().is_infinite() && a.into().is_finite() && b.into().is_finite() {
        return Err(FLOAT_OVERFLOW.into());
    }
    Ok(sum)
}

/// `float8_accum`'s transition state: the count `N`, the sum `Sx` and the sum of squared
/// deviations `Sxx` (Youngs-Cramer). `avg` needs only `Sx / N`, but PostgreSQL computes
/// `Sxx` for every row and raises "value out of range: overflow" when it or `Sx` becomes
/// infinite from finite inputs, so `avg` of `1e200` and `-1e200` is that error, not `0`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Float8Accum {
    /// Rows accumulated (a float8 in PostgreSQL, exact up to 2^53 rows).
    n: f64,
    /// The sum.
    sx: f64,
    /// The sum of squared deviations from the mean.
    sxx: f64,
}

/// PostgreSQL's `float_overflow_error` text.
const FLOAT_OVERFLOW: &str = "value out of range: overflow";

impl Float8Accum {
    /// `float8_accum` with one value.
    pub fn accum(&mut self, value: f64) -> Result<(), String> {
        let old_n = self.n;
        let old_sx = self.sx;
        self.n += 1.0;
        self.sx += value;
        if old_n > 0.0 {
            let tmp = value * self.n - self.sx;
            self.sxx += tmp * tmp / (self.n * old_n);
            // An overflow is an error only when finite inputs lead to an infinite result;
            // an infinite input makes Sxx NaN, as PostgreSQL keeps it.
            if self.sx.is_infinite() || self.sxx.is_infinite() {
                if !old_sx.is_infinite() && !value.is_infinite() {
                    return Err(FLOAT_OVERFLOW.into());
                }
                self.sxx = f64::NAN;
            }
        } else if value.is_nan() || value.is_infinite() {
            self.sxx = f64::NAN;
        }
        Ok(())
    }

    /// `float8_combine`: another state's rows added to this one's.
    pub fn combine(&mut self, other: &Float8Accum) -> Result<(), String> {
        if other.n == 0.0 {
            return Ok(());
        }
        if self.n == 0.0 {
            *self = *other;
            return Ok(());
        }
        let n = self.n + other.n;
        let sx = float_add(self.sx, other.sx)?;
        let tmp = self.sx / self.n - other.sx / other.n;
        let sxx = self.sxx + other.sxx + self.n * other.n * tmp * tmp / n;
        if sxx.is_infinite() && !self.sxx.is_infinite() && !other.sxx.is_infinite() {
            return Err(FLOAT_OVERFLOW.into());
        }
        *self = Float8Accum { n, sx, sxx };
        Ok(())
    }

    /// `float8_avg`: `Sx / N`, NULL for no rows.
    pub fn avg(&self) -> Option<f64> {
        (self.n > 0.0).then(|| self.sx / self.n)
    }
}

/// Integers up to this magnitude are exact JSON numbers for every reader (2^53: the
/// largest range in which an IEEE double holds every integer).
pub const JSON_EXACT_INTEGER_MAX: i128 = 1 << 53;

/// One aggregate's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct AggregateResult {
    /// The expression as asked.
    pub expr: String,
    /// PostgreSQL's result type (`bigint`, `numeric`, …).
    pub type_name: &'static str,
    /// The value; `None` is SQL NULL.
    pub value: Option<Value>,
}

impl AggregateResult {
    /// What psql prints for the value (`psql -A`): empty for NULL.
    pub fn text(&self) -> String {
        self.value
            .as_ref()
            .map(Value::to_pg_text)
            .unwrap_or_default()
    }

    /// The value in JSON: a number when JSON carries it exactly — integers (bigint, or a
    /// numeric of scale 0) of magnitude ≤ 2^53, and finite floats (printed with the
    /// shortest digits that read back as the same float) — else PostgreSQL's text as a
    /// string (larger integers, numerics with a fraction, NaN and infinities, text, dates);
    /// `null` for NULL.
    pub fn json_value(&self) -> serde_json::Value {
        let Some(v) = &self.value else {
            return serde_json::Value::Null;
        };
        let int = |i: i128| {
            if i.abs() <= JSON_EXACT_INTEGER_MAX {
                serde_json::json!(i as i64)
            } else {
                serde_json::json!(i.to_string())
            }
        };
        match v {
            Value::Int2(i) => int(*i as i128),
            Value::Int4(i) => int(*i as i128),
            Value::Int8(i) => int(*i as i128),
            Value::Numeric(n) => match n.as_integer() {
                Some(i) => int(i),
                None => serde_json::json!(n.to_string()),
            },
            Value::Float4(f) if f.is_finite() => {
                // The shortest decimal that reads back as this float4, as a JSON number.
                serde_json::from_str(&format!("{f}"))
                    .unwrap_or_else(|_| serde_json::json!(v.to_pg_text()))
            }
            Value::Float8(f) if f.is_finite() => serde_json::json!(f),
            _ => serde_json::json!(v.to_pg_text()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn select_lists_parse_in_order() {
        let items = parse_select("count(*), SUM(octet_length(\"Big\")), max(a), count(b)").unwrap();
        assert_eq!(items.len(), 4);
        assert_eq!(items[0].func, AggFunc::Count);
        assert_eq!(items[0].column, None);
        assert_eq!(items[1].func, AggFunc::SumOctetLength);
        assert_eq!(items[1].column.as_deref(), Some("Big"));
        assert_eq!(items[1].expr, "SUM(octet_length(\"Big\"))");
        assert_eq!(items[2].column.as_deref(), Some("a"));
        assert!(parse_select("median(a)")
            .unwrap_err()
            .contains("cannot parse"));
        assert_eq!(parse_select("avg(a)").unwrap()[0].func, AggFunc::Avg);
        assert!(parse_select("sum(a").is_err());
    }

    #[test]
    fn result_types_follow_postgresql() {
        let mut s = Accumulator::new(AggFunc::Sum, Some(TypeKind::Int4)).unwrap();
        assert_eq!(s.finish(None).unwrap().0, None, "sum of no rows is NULL");
        s.add(Some(&Value::Int4(i32::MAX)), None).unwrap();
        s.add(Some(&Value::Int4(i32::MAX)), None).unwrap();
        assert_eq!(
            s.finish(None).unwrap(),
            (Some(Value::Int8(2 * i32::MAX as i64)), "bigint")
        );
        let mut s8 = Accumulator::new(AggFunc::Sum, Some(TypeKind::Int8)).unwrap();
        s8.add(Some(&Value::Int8(i64::MAX)), None).unwrap();
        s8.add(Some(&Value::Int8(i64::MAX)), None).unwrap();
        let r = AggregateResult {
            expr: "sum(x)".into(),
            type_name: "numeric",
            value: s8.finish(None).unwrap().0,
        };
        assert_eq!(r.text(), "18446744073709551614");
        assert_eq!(r.json_value(), serde_json::json!("18446744073709551614"));
        let mut other = Accumulator::new(AggFunc::Sum, Some(TypeKind::Int8)).unwrap();
        other.add(Some(&Value::Int8(2)), None).unwrap();
        s8.merge(&other).unwrap();
        assert_eq!(
            s8.finish(None).unwrap().0.unwrap().to_pg_text(),
            "18446744073709551616"
        );
        assert!(Accumulator::new(AggFunc::Sum, Some(TypeKind::Text))
            .unwrap_err()
            .contains("sum(text) does not exist"));
        assert!(Accumulator::new(AggFunc::Min, Some(TypeKind::Bool)).is_err());
        let mut f4 = Accumulator::new(AggFunc::Sum, Some(TypeKind::Float4)).unwrap();
        f4.add(Some(&Value::Float4(f32::MAX)), None).unwrap();
        let err = f4.add(Some(&Value::Float4(f32::MAX)), None).unwrap_err();
        assert_eq!(err, "value out of range: overflow");
        let mut f8 = Accumulator::new(AggFunc::Sum, Some(TypeKind::Float8)).unwrap();
        f8.add(Some(&Value::Float8(f64::INFINITY)), None).unwrap();
        f8.add(Some(&Value::Float8(1.0)), None).unwrap();
        assert_eq!(
            f8.finish(None).unwrap().0,
            Some(Value::Float8(f64::INFINITY))
        );
        let mut mx = Accumulator::new(AggFunc::Max, Some(TypeKind::Float8)).unwrap();
        mx.add(Some(&Value::Float8(1.0)), None).unwrap();
        mx.add(Some(&Value::Float8(f64::NAN)), None).unwrap();
        let mut mx2 = mx.clone();
        mx2.merge(&Accumulator::new(AggFunc::Max, Some(TypeKind::Float8)).unwrap())
            .unwrap();
        assert_eq!(
            mx2.finish(Some(TypeKind::Float8))
                .unwrap()
                .0
                .unwrap()
                .to_pg_text(),
            "NaN"
        );
    }

    /// Runs `func` over `values` in order, serially, and returns psql's text.
    fn run(func: AggFunc, kind: TypeKind, values: &[Value]) -> Result<String, String> {
        let mut acc = Accumulator::new(func, Some(kind))?;
        for v in values {
            acc.add(Some(v), None)?;
        }
        let (value, _) = acc.finish(Some(kind))?;
        Ok(value.map(|v| v.to_pg_text()).unwrap_or_default())
    }

    #[test]
    fn ties_in_min_and_max_return_the_later_row_as_postgresql() {
        let f8 = |v: f64| Value::Float8(v);
        let f4 = |v: f32| Value::Float4(v);
        // PostgreSQL 18.6: SELECT max(x), min(x) FROM (VALUES (0::float8), ('-0'::float8)) v(x)
        //   → -0 | -0; with the rows swapped → 0 | 0 (float8larger/smaller keep the later row).
        for func in [AggFunc::Max, AggFunc::Min] {
            assert_eq!(
                run(func, TypeKind::Float8, &[f8(0.0), f8(-0.0)]).unwrap(),
                "-0"
            );
            assert_eq!(
                run(func, TypeKind::Float8, &[f8(-0.0), f8(0.0)]).unwrap(),
                "0"
            );
            assert_eq!(
                run(func, TypeKind::Float4, &[f4(0.0), f4(-0.0)]).unwrap(),
                "-0"
            );
        }
        // SELECT max(x), min(x) FROM (VALUES (1.0), (1.00)) v(x) → 1.00 | 1.00; swapped → 1.0.
        let n = |s: &str| Value::Numeric(Numeric::parse(s).unwrap());
        for func in [AggFunc::Max, AggFunc::Min] {
            assert_eq!(
                run(func, TypeKind::Numeric, &[n("1.0"), n("1.00")]).unwrap(),
                "1.00"
            );
            assert_eq!(
                run(func, TypeKind::Numeric, &[n("1.00"), n("1.0")]).unwrap(),
                "1.0"
            );
        }
        // bpchar_larger/smaller keep the first on a tie:
        // SELECT octet_length(max(x)) FROM (VALUES ('a'::bpchar), ('a  '::bpchar)) v(x) → 1;
        // swapped → 3.
        let b = |s: &str| Value::Bpchar(s.as_bytes().to_vec());
        assert_eq!(
            run(AggFunc::Max, TypeKind::Bpchar, &[b("a"), b("a  ")]).unwrap(),
            "a"
        );
        assert_eq!(
            run(AggFunc::Min, TypeKind::Bpchar, &[b("a  "), b("a")]).unwrap(),
            "a  "
        );
        // Merging a later part into an earlier one gives the serial answer.
        let mut first = Accumulator::new(AggFunc::Max, Some(TypeKind::Numeric)).unwrap();
        first.add(Some(&n("1.0")), None).unwrap();
        let mut second = Accumulator::new(AggFunc::Max, Some(TypeKind::Numeric)).unwrap();
        second.add(Some(&n("1.00")), None).unwrap();
        first.merge(&second).unwrap();
        assert_eq!(first.finish(None).unwrap().0.unwrap().to_pg_text(), "1.00");
    }

    #[test]
    fn float_sums_keep_negative_zero_and_raise_overflow() {
        let f8 = |v: f64| Value::Float8(v);
        // SELECT sum(x), avg(x) FROM (VALUES ('-0'::float8)) v(x) → -0 | 0
        assert_eq!(
            run(AggFunc::Sum, TypeKind::Float8, &[f8(-0.0)]).unwrap(),
            "-0"
        );
        assert_eq!(
            run(AggFunc::Avg, TypeKind::Float8, &[f8(-0.0)]).unwrap(),
            "0"
        );
        assert_eq!(
            run(AggFunc::Sum, TypeKind::Float4, &[Value::Float4(-0.0)]).unwrap(),
            "-0"
        );
        // SELECT avg(x) FROM (VALUES (1e308::float8), (1e308::float8)) v(x)
        //   → ERROR:  value out of range: overflow (Sx)
        assert_eq!(
            run(AggFunc::Avg, TypeKind::Float8, &[f8(1e308), f8(1e308)]).unwrap_err(),
            "value out of range: overflow"
        );
        // SELECT avg(x) FROM (VALUES (1e200::float8), (-1e200::float8)) v(x)
        //   → ERROR:  value out of range: overflow (Sxx, although the mean is 0)
        assert_eq!(
            run(AggFunc::Avg, TypeKind::Float8, &[f8(1e200), f8(-1e200)]).unwrap_err(),
            "value out of range: overflow"
        );
        // SELECT avg(x) FROM (VALUES ('Infinity'::float8), (1::float8)) v(x) → Infinity
        assert_eq!(
            run(
                AggFunc::Avg,
                TypeKind::Float8,
                &[f8(f64::INFINITY), f8(1.0)]
            )
            .unwrap(),
            "Infinity"
        );
        // SELECT sum(x) FROM (VALUES (1e308::float8), (1e308::float8)) v(x) → the same error.
        assert_eq!(
            run(AggFunc::Sum, TypeKind::Float8, &[f8(1e308), f8(1e308)]).unwrap_err(),
            "value out of range: overflow"
        );
        // float8_combine raises it too.
        let mut a = Float8Accum::default();
        a.accum(1e200).unwrap();
        let mut b = Float8Accum::default();
        b.accum(-1e200).unwrap();
        assert_eq!(a.combine(&b).unwrap_err(), "value out of range: overflow");
    }

    #[test]
    fn numeric_aggregates_are_exact_beyond_38_digits() {
        let n = |s: &str| Value::Numeric(Numeric::parse(s).unwrap());
        // SELECT sum(x), avg(x) FROM (VALUES (1.5), (2.25), (1e40)) v(x)
        //   → 10000000000000000000000000000000000000003.75 | 3333333333333333333333333333333333333334.58
        let rows = [n("1.5"), n("2.25"), n("1e40")];
        assert_eq!(
            run(AggFunc::Sum, TypeKind::Numeric, &rows).unwrap(),
            "10000000000000000000000000000000000000003.75"
        );
        assert_eq!(
            run(AggFunc::Avg, TypeKind::Numeric, &rows).unwrap(),
            "3333333333333333333333333333333333333334.58"
        );
        // SELECT sum(x) FROM (VALUES ('Infinity'::numeric), ('-Infinity'::numeric)) v(x) → NaN
        let inf = [n("Infinity"), n("-Infinity")];
        assert_eq!(run(AggFunc::Sum, TypeKind::Numeric, &inf).unwrap(), "NaN");
        // SELECT avg(x) FROM (VALUES ('Infinity'::numeric), (1)) v(x) → Infinity
        assert_eq!(
            run(AggFunc::Avg, TypeKind::Numeric, &[n("Infinity"), n("1")]).unwrap(),
            "Infinity"
        );
        assert_eq!(
            run(
                AggFunc::Max,
                TypeKind::Numeric,
                &[n("1e50"), n("NaN"), n("2")]
            )
            .unwrap(),
            "NaN"
        );
    }

    #[test]
    fn signatures_are_postgresqls() {
        // SELECT sum(octet_length(x)) FROM (VALUES (1.5)) v(x)
        //   → ERROR:  function octet_length(numeric) does not exist
        assert_eq!(
            Accumulator::new(AggFunc::SumOctetLength, Some(TypeKind::Numeric)).unwrap_err(),
            "function octet_length(numeric) does not exist"
        );
        assert_eq!(
            Accumulator::new(AggFunc::Min, Some(TypeKind::Bool)).unwrap_err(),
            "function min(boolean) does not exist"
        );
        assert_eq!(
            Accumulator::new(AggFunc::Avg, Some(TypeKind::Date)).unwrap_err(),
            "function avg(date) does not exist"
        );
        for kind in [
            TypeKind::Text,
            TypeKind::Varchar,
            TypeKind::Bpchar,
            TypeKind::Bytea,
        ] {
            assert!(Accumulator::new(AggFunc::SumOctetLength, Some(kind)).is_ok());
        }
        assert!(Accumulator::new(AggFunc::Max, Some(TypeKind::Bytea)).is_ok());
        assert!(Accumulator::new(AggFunc::Sum, Some(TypeKind::Other))
            .unwrap_err()
            .contains("is not evaluated by pageio"));
    }
}
