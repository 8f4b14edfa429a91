//! # The scan predicate's numbers, as PostgreSQL's float8 treats them
//!
//! `a BETWEEN lo AND hi` must give PostgreSQL's answer, including for the values IEEE 754
//! orders differently from PostgreSQL:
//!
//! ```text
//!   IEEE 754:    NaN is unordered (NaN <= x is false for every x), -0 == 0
//!   PostgreSQL:  -Infinity < … < -0 = 0 < … < Infinity < NaN, and NaN = NaN
//!                (float8_cmp_internal; the btree opclass sorts NaN last)
//! ```
//!
//! so `a BETWEEN 0 AND 'NaN'` keeps every non-negative row and every NaN, and a stored NaN
//! matches `BETWEEN 'NaN' AND 'NaN'`. [`float8_cmp`] (in [`crate::page::float8`]) is that order, and every comparison of
//! a key with a bound goes through it.
//!
//! Literals are read as `float8in` reads them ([`parse_float8`]): `NaN`, `Infinity`, `inf`
//! (any case, optional sign) and decimal numbers; a number that overflows to infinity or
//! underflows to zero is an error (`"1e400" is out of range for type double precision`),
//! not a silent ±Infinity or 0.
//!
//! The predicate names its column: [`Between::parse_on`] refuses `b between …` when the
//! scan's key is `a`, instead of silently filtering `a`.

use std::cmp::Ordering;

use super::Between;
use crate::page::float8_cmp;

/// Parses a float8 literal as PostgreSQL's `float8in` does: optional single quotes (`'NaN'`),
/// `NaN`, `[+-]Infinity`, `[+-]inf` (any case), or a decimal number; out-of-range numbers
/// are an error with PostgreSQL's message.
pub fn parse_float8(literal: &str) -> Result<f64, String> {
    let trimmed = literal.trim();
    let text = trimmed
        .strip_prefix('\'')
        .and_then(|t| t.strip_suffix('\''))
        .unwrap_or(trimmed)
        .trim();
    let invalid = || format!("invalid input syntax for type double precision: \"{text}\"");
    let lower = text.to_ascii_lowercase();
    let unsigned = lower.trim_start_matches(['+', '-']);
    if unsigned.len() + 1 < lower.len() {
        return Err(invalid()); // more than one sign
    }
    match unsigned {
        "nan" if unsigned.len() == lower.len() => return Ok(f64::NAN),
        "infinity" | "inf" => {
            return Ok(if lower.starts_with('-') {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            })
        }
        _ => {}
    }
    // Only digits, one point, and an exponent: Rust would also accept "nan" or "infinity"
    // spellings PostgreSQL does not, and those were handled above.
    if unsigned.is_empty()
        || !unsigned
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | '+' | '-'))
    {
        return Err(invalid());
    }
    let value: f64 = text.parse().map_err(|_| invalid())?;
    let mantissa = unsigned.split('e').next().unwrap_or("");
    let nonzero_mantissa = mantissa.chars().any(|c| matches!(c, '1'..='9'));
    if value.is_infinite() || (value == 0.0 && nonzero_mantissa) {
        return Err(format!(
            "\"{text}\" is out of range for type double precision"
        ));
    }
    Ok(value)
}

impl Between {
    /// Parses `COLUMN between LO and HI` (keywords in any case), where `COLUMN` must be
    /// `key_column` — the scan's key, its first column — so a predicate on another column is
    /// refused rather than silently applied to the key. `LO` and `HI` are float8 literals
    /// ([`parse_float8`]).
    pub fn parse_on(s: &str, key_column: &str) -> Result<Between, String> {
        let words: Vec<&str> = s.split_whitespace().collect();
        let bad = || {
            format!(
                "cannot parse \"{s}\": expected '{key_column} between LO and HI', e.g. '{key_column} between 100 and 200'"
            )
        };
        if words.len() != 5
            || !words[1].eq_ignore_ascii_case("between")
            || !words[3].eq_ignore_ascii_case("and")
        {
            return Err(bad());
        }
        let column = words[0].trim_matches('"');
        if !column.eq_ignore_ascii_case(key_column) {
            return Err(format!(
                "the predicate is on column \"{column}\", but a scan filters only its key, the first column \"{key_column}\": write '{key_column} between LO and HI'"
            ));
        }
        let lo = parse_float8(words[2]).map_err(|e| format!("in \"{s}\": {e}"))?;
        let hi = parse_float8(words[4]).map_err(|e| format!("in \"{s}\": {e}"))?;
        Ok(Between { lo, hi })
    }

    /// Whether a float key lies in `[lo, hi]` in PostgreSQL's float8 order.
    pub(crate) fn contains_float8(&self, v: f64) -> bool {
        float8_cmp(v, self.lo) != Ordering::Less && float8_cmp(v, self.hi) != Ordering::Greater
    }

    /// Whether an integer key lies in `[lo, hi]`. PostgreSQL compares an integer column with
    /// a non-integer bound as numeric, where NaN is above every number: a NaN lower bound
    /// admits nothing, a NaN upper bound no limit. Integers compare exactly against the
    /// bounds rounded inward.
    pub(crate) fn contains_int(&self, v: i64) -> bool {
        if self.lo.is_nan() {
            return false;
        }
        let lo = self.lo.ceil();
        let lo_ok = lo <= i64::MIN as f64 || v >= lo as i64;
        let hi_ok = self.hi.is_nan() || {
            let hi = self.hi.floor();
            hi >= i64::MAX as f64 || (hi >= i64::MIN as f64 && v <= hi as i64)
        };
        lo_ok && hi_ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_are_read_as_float8in_reads_them() {
        assert!(parse_float8("NaN").unwrap().is_nan());
        assert!(parse_float8("'nan'").unwrap().is_nan());
        assert_eq!(parse_float8("-Infinity").unwrap(), f64::NEG_INFINITY);
        assert_eq!(parse_float8("inf").unwrap(), f64::INFINITY);
        assert_eq!(parse_float8("1.5e3").unwrap(), 1500.0);
        assert_eq!(parse_float8("-0").unwrap(), 0.0);
        assert_eq!(parse_float8("0e10").unwrap(), 0.0);
        assert_eq!(
            parse_float8("1e400").unwrap_err(),
            "\"1e400\" is out of range for type double precision"
        );
        assert!(parse_float8("-1e400").unwrap_err().contains("out of range"));
        assert!(parse_float8("1e-400").unwrap_err().contains("out of range"));
        assert!(parse_float8("1e-310").unwrap() > 0.0); // denormals are accepted
        assert!(parse_float8("ten")
            .unwrap_err()
            .contains("invalid input syntax"));
        assert!(parse_float8("--1").is_err());
    }

    #[test]
    fn between_names_its_column_and_orders_nan_last() {
        let p = Between::parse_on("a BETWEEN 0 and 'NaN'", "a").unwrap();
        assert!(p.contains_float8(5.0) && p.contains_float8(f64::NAN));
        assert!(p.contains_float8(-0.0) && !p.contains_float8(-1.0));
        assert!(p.contains_float8(f64::INFINITY));
        let only_nan = Between::parse_on("a between NaN and NaN", "a").unwrap();
        assert!(only_nan.contains_float8(f64::NAN));
        assert!(!only_nan.contains_float8(f64::INFINITY));
        let zero = Between::parse_on("a between -0 and 0", "a").unwrap();
        assert!(zero.contains_float8(0.0) && zero.contains_float8(-0.0));
        let err = Between::parse_on("b between 1 and 2", "a").unwrap_err();
        assert!(err.contains("\"b\"") && err.contains("\"a\""), "{err}");
        let err = Between::parse_on("a between 1 and 1e400", "a").unwrap_err();
        assert!(err.contains("\"1e400\" is out of range"), "{err}");
        assert!(Between::parse_on("aid between 1 and 10", "aid").is_ok());
        // Integer keys: a NaN upper bound is no bound, a NaN lower bound admits nothing.
        let p = Between::parse_on("aid between 5 and NaN", "aid").unwrap();
        assert!(p.contains_int(i64::MAX) && !p.contains_int(4));
        let p = Between::parse_on("aid between NaN and NaN", "aid").unwrap();
        assert!(!p.contains_int(0));
        assert!(Between::ALL.contains_int(i64::MIN) && Between::ALL.contains_float8(f64::NAN));
    }
}
