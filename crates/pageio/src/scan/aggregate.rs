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
//!      sum(float4) / sum(float8)     f32 / f64 in scan order        → real / double precision
//!      sum(numeric)                  exact decimal                  → numeric
//!      sum(octet_length(col))        i128, checked into i64         → bigint
//!      avg(int2|int4|int8|numeric)   exact sum / count, scale as     → numeric
//!                                    select_div_scale picks it
//!      avg(float4|float8)            f64 sum / count (float8_accum)  → double precision
//!      min(col) / max(col)           the column's Value, PostgreSQL order ("C" collation)
//! ```
//!
//! # Worked example
//!
//! `sum(aid)` over `aid` int4 1..=100000: 5000050000, a `bigint`; the same over an `int8`
//! column is the `numeric` 5000050000, which JSON carries as a number because it is an
//! integer below 2^53 (see [`AggregateResult::json_value`]).

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
    /// `avg` of float4 or float8 (result `double precision`), summed in float8 as
    /// `float8_accum` does.
    AvgFloat {
        /// The sum so far.
        sum: f64,
        /// Rows summed.
        count: i64,
    },
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
    pub fn new(
        func: AggFunc,
        kind: Option<TypeKind>,
        varlena: bool,
    ) -> Result<Accumulator, String> {
        let missing = |k: Option<TypeKind>| {
            let f = match func {
                AggFunc::Count => "count",
                AggFunc::Sum => "sum",
                AggFunc::Min => "min",
                AggFunc::Max => "max",
                AggFunc::SumOctetLength => "octet_length",
                AggFunc::Avg => "avg",
            };
            format!(
                "function {f}({}) does not exist, or is not one pageio evaluates",
                k.map_or("*", |k| k.sql_name())
            )
        };
        Ok(match (func, kind) {
            (AggFunc::Count, _) => Accumulator::Count(0),
            (AggFunc::SumOctetLength, _) if varlena => Accumulator::SumInt {
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
                Accumulator::AvgFloat { sum: 0.0, count: 0 }
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
                    let a = sum.unwrap_or(0.0);
                    *sum = Some(float_add(a, *v)?);
                }
            }
            Accumulator::SumFloat8(sum) => {
                if let Some(Value::Float8(v)) = value {
                    let a = sum.unwrap_or(0.0);
                    *sum = Some(float_add(a, *v)?);
                }
            }
            Accumulator::SumNumeric(sum) => {
                if let Some(Value::Numeric(v)) = value {
                    *sum = Some(sum.unwrap_or(Numeric::from_i128(0)).checked_add(*v).ok_or(
                        "numeric sum needs more than 38 digits, beyond what pageio keeps exactly",
                    )?);
                }
            }
            Accumulator::AvgNumeric { sum, count } => {
                let v = match value {
                    Some(Value::Int2(v)) => Numeric::from_i128(*v as i128),
                    Some(Value::Int4(v)) => Numeric::from_i128(*v as i128),
                    Some(Value::Int8(v)) => Numeric::from_i128(*v as i128),
                    Some(Value::Numeric(n)) => *n,
                    _ => return Ok(()),
                };
                *sum = sum.checked_add(v).ok_or(
                    "numeric sum needs more than 38 digits, beyond what pageio keeps exactly",
                )?;
                *count += 1;
            }
            Accumulator::AvgFloat { sum, count } => {
                match value {
                    Some(Value::Float4(v)) => *sum += *v as f64,
                    Some(Value::Float8(v)) => *sum += v,
                    _ => return Ok(()),
                }
                *count += 1;
            }
            Accumulator::Extreme { best, max } => {
                if let Some(v) = value {
                    let better = match best {
                        None => true,
                        Some(b) => match v.pg_cmp(b) {
                            Some(std::cmp::Ordering::Greater) => *max,
                            Some(std::cmp::Ordering::Less) => !*max,
                            _ => false,
                        },
                    };
                    if better {
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
            Accumulator::SumFloat4(_) | Accumulator::SumFloat8(_) | Accumulator::AvgFloat { .. }
        )
    }

    /// Combines another worker's state for the same aggregate into this one.
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
                    *a = Some(float_add(a.unwrap_or(0.0), *b)?);
                }
            }
            (Accumulator::SumFloat8(a), Accumulator::SumFloat8(b)) => {
                if let Some(b) = b {
                    *a = Some(float_add(a.unwrap_or(0.0), *b)?);
                }
            }
            (Accumulator::SumNumeric(a), Accumulator::SumNumeric(b)) => {
                if let Some(b) = b {
                    *a = Some(
                        a.unwrap_or(Numeric::from_i128(0))
                            .checked_add(*b)
                            .ok_or("numeric sum needs more than 38 digits")?,
                    );
                }
            }
            (
                Accumulator::AvgNumeric { sum, count },
                Accumulator::AvgNumeric {
                    sum: other_sum,
                    count: other_count,
                },
            ) => {
                *sum = sum
                    .checked_add(*other_sum)
                    .ok_or("numeric sum needs more than 38 digits")?;
                *count += other_count;
            }
            (
                Accumulator::AvgFloat { sum, count },
                Accumulator::AvgFloat {
                    sum: other_sum,
                    count: other_count,
                },
            ) => {
                *sum += other_sum;
                *count += other_count;
            }
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
            Accumulator::SumNumeric(s) => (s.map(Value::Numeric), "numeric"),
            Accumulator::AvgNumeric { count: 0, .. } => (None, "numeric"),
            Accumulator::AvgNumeric { sum, count } => (
                Some(Value::Numeric(numeric_div_by_count(*sum, *count).ok_or(
                    "avg needs more than 38 digits, beyond what pageio keeps exactly",
                )?)),
                "numeric",
            ),
            Accumulator::AvgFloat { count: 0, .. } => (None, "double precision"),
            Accumulator::AvgFloat { sum, count } => {
                (Some(Value::Float8(sum / *count as f64)), "double precision")
            }
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
        return Err("value out of range: overflow".into());
    }
    Ok(sum)
}

/// `NUMERIC_MIN_SIG_DIGITS`: a quotient keeps at least this many significant digits.
const NUMERIC_MIN_SIG_DIGITS: i32 = 16;

/// The weight (base-10000 exponent) and first base-10000 digit of `|m| / 10^scale`, as
/// PostgreSQL's `NumericVar` holds it: (0, 0) for zero. `None` if the digits overflow.
fn weight_and_first_digit(m: i128, scale: u32) -> Option<(i32, u128)> {
    if m == 0 {
        return Some((0, 0));
    }
    // Align the fraction to whole base-10000 digits.
    let pad = (4 - scale % 4) % 4;
    let mut x = m.unsigned_abs().checked_mul(10u128.checked_pow(pad)?)?;
    let fraction_digits = ((scale + pad) / 4) as i32;
    let mut groups = 0i32;
    while x >= 10_000 {
        x /= 10_000;
        groups += 1;
    }
    Some((groups - fraction_digits, x))
}

/// `sum / count` as PostgreSQL's `numeric_div` computes an average: the result scale from
/// `select_div_scale` (at least 16 significant digits, at least either input's scale),
/// rounded half away from zero. Special values pass through (NaN, ±Infinity).
pub fn numeric_div_by_count(sum: Numeric, count: i64) -> Option<Numeric> {
    let Numeric::Finite { mantissa, scale } = sum else {
        return Some(sum);
    };
    let (weight1, first1) = weight_and_first_digit(mantissa, scale)?;
    let (weight2, first2) = weight_and_first_digit(count as i128, 0)?;
    let mut qweight = weight1 - weight2;
    if first1 <= first2 {
        qweight -= 1;
    }
    let rscale = (NUMERIC_MIN_SIG_DIGITS - qweight * 4)
        .max(scale as i32)
        .max(0) as u32;
    let scaled = mantissa.checked_mul(10i128.checked_pow(rscale - scale)?)?;
    let n = count as i128;
    let (q, r) = (scaled / n, scaled % n);
    // Round half away from zero: |r| * 2 >= n.
    let q = if r.unsigned_abs() * 2 >= n as u128 {
        q + scaled.signum()
    } else {
        q
    };
    Some(Numeric::Finite {
        mantissa: q,
        scale: rscale,
    })
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
    fn averages_have_postgresqls_scale() {
        let avg = |sum: &str, n: i64| {
            numeric_div_by_count(Numeric::parse(sum).unwrap(), n)
                .unwrap()
                .to_string()
        };
        // SELECT avg(x) FROM (VALUES (1), (2)) v(x) → 1.5000000000000000
        assert_eq!(avg("3", 2), "1.5000000000000000");
        assert_eq!(avg("1", 3), "0.33333333333333333333");
        assert_eq!(avg("2", 3), "0.66666666666666666667");
        assert_eq!(avg("-2", 3), "-0.66666666666666666667");
        assert_eq!(avg("5000050000", 100000), "50000.500000000000");
        assert_eq!(avg("0", 5), "0.00000000000000000000");
        assert_eq!(avg("12.345", 1), "12.3450000000000000");
    }

    #[test]
    fn result_types_follow_postgresql() {
        let mut s = Accumulator::new(AggFunc::Sum, Some(TypeKind::Int4), false).unwrap();
        assert_eq!(s.finish(None).unwrap().0, None, "sum of no rows is NULL");
        s.add(Some(&Value::Int4(i32::MAX)), None).unwrap();
        s.add(Some(&Value::Int4(i32::MAX)), None).unwrap();
        assert_eq!(
            s.finish(None).unwrap(),
            (Some(Value::Int8(2 * i32::MAX as i64)), "bigint")
        );
        let mut s8 = Accumulator::new(AggFunc::Sum, Some(TypeKind::Int8), false).unwrap();
        s8.add(Some(&Value::Int8(i64::MAX)), None).unwrap();
        s8.add(Some(&Value::Int8(i64::MAX)), None).unwrap();
        let r = AggregateResult {
            expr: "sum(x)".into(),
            type_name: "numeric",
            value: s8.finish(None).unwrap().0,
        };
        assert_eq!(r.text(), "18446744073709551614");
        assert_eq!(r.json_value(), serde_json::json!("18446744073709551614"));
        let mut other = Accumulator::new(AggFunc::Sum, Some(TypeKind::Int8), false).unwrap();
        other.add(Some(&Value::Int8(2)), None).unwrap();
        s8.merge(&other).unwrap();
        assert_eq!(
            s8.finish(None).unwrap().0.unwrap().to_pg_text(),
            "18446744073709551616"
        );
        assert!(Accumulator::new(AggFunc::Sum, Some(TypeKind::Text), true)
            .unwrap_err()
            .contains("sum(text) does not exist"));
        assert!(Accumulator::new(AggFunc::Min, Some(TypeKind::Bool), false).is_err());
        let mut f4 = Accumulator::new(AggFunc::Sum, Some(TypeKind::Float4), false).unwrap();
        f4.add(Some(&Value::Float4(f32::MAX)), None).unwrap();
        let err = f4.add(Some(&Value::Float4(f32::MAX)), None).unwrap_err();
        assert_eq!(err, "value out of range: overflow");
        let mut f8 = Accumulator::new(AggFunc::Sum, Some(TypeKind::Float8), false).unwrap();
        f8.add(Some(&Value::Float8(f64::INFINITY)), None).unwrap();
        f8.add(Some(&Value::Float8(1.0)), None).unwrap();
        assert_eq!(
            f8.finish(None).unwrap().0,
            Some(Value::Float8(f64::INFINITY))
        );
        let mut mx = Accumulator::new(AggFunc::Max, Some(TypeKind::Float8), false).unwrap();
        mx.add(Some(&Value::Float8(1.0)), None).unwrap();
        mx.add(Some(&Value::Float8(f64::NAN)), None).unwrap();
        let mut mx2 = mx.clone();
        mx2.merge(&Accumulator::new(AggFunc::Max, Some(TypeKind::Float8), false).unwrap())
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
}
