//! `real` and `double precision` printed as PostgreSQL 18's `float4out`/`float8out` print
//! them with the default `extra_float_digits = 1`.
//!
//! # Problem
//!
//! PostgreSQL prints the shortest decimal that reads back as the same float (its copy of
//! Ryu), and among the shortest the one nearest the float, a tie going to the even digit.
//! Its copy accepts only decimals strictly inside the float's rounding interval, never one
//! on its edge: `real 78860304` is `7.8860304e+07`, although `7.88603e+07` reads back as the
//! same float (it lies exactly half-way, and the tie goes to this float's even mantissa).
//! Rust's own shortest formatting takes such edge decimals and breaks ties away from the
//! even digit (`345285.125::real` → `345285.13`, PostgreSQL `345285.12`), so it cannot be
//! used as it is.
//!
//! # Mechanism
//!
//! ```text
//!  v = m·2^e  ─►  interval (v − low, v + high), exclusive: half the gap to each neighbour
//!  for k = ⌊log10 v⌋+1, ⌊log10 v⌋, …  (fewer digits first):
//!      candidates D·10^k strictly inside the interval?  none ─► next k
//!      else D = v/10^k rounded half-even, clamped into the candidates ─► digits of D
//!  digits, exponent ─► fixed notation when −4 ≤ exponent < 15 (float8) or 6 (float4),
//!                      else d.ddde±XX
//! ```
//!
//! Every comparison is exact (big integers), so no case is left to floating-point luck; it
//! runs once per printed value, never per row.
//!
//! # Worked example
//!
//! `real 345285.125`: the gap between neighbouring floats there is 1/32, so the interval is
//! ±1/64. With two decimals the candidates are 345285.12 and 345285.13 (both within 1/64),
//! the float lies exactly half-way, and the tie goes to the even `…12`.

use num_bigint::BigInt;
use num_integer::Integer;
use num_traits::Zero;

/// A float's exact value `mantissa · 2^exponent` and whether the gap to the float below is
/// half the gap above (a power of two whose lower neighbour has a smaller exponent).
struct Exact {
    mantissa: u64,
    exponent: i32,
    lower_closer: bool,
}

fn exact_f64(v: f64) -> Exact {
    let bits = v.to_bits();
    let biased = ((bits >> 52) & 0x7FF) as i32;
    let fraction = bits & ((1u64 << 52) - 1);
    if biased == 0 {
        Exact {
            mantissa: fraction,
            exponent: -1074,
            lower_closer: false,
        }
    } else {
        Exact {
            mantissa: fraction | (1u64 << 52),
            exponent: biased - 1075,
            lower_closer: fraction == 0 && biased > 1,
        }
    }
}

fn exact_f32(v: f32) -> Exact {
    let bits = v.to_bits();
    let biased = ((bits >> 23) & 0xFF) as i32;
    let fraction = (bits & ((1u32 << 23) - 1)) as u64;
    if biased == 0 {
        Exact {
            mantissa: fraction,
            exponent: -149,
            lower_closer: false,
        }
    } else {
        Exact {
            mantissa: fraction | (1u64 << 23),
            exponent: biased - 150,
            lower_closer: fraction == 0 && biased > 1,
        }
    }
}

fn pow(base: u32, exp: u32) -> BigInt {
    num_traits::pow(BigInt::from(base), exp as usize)
}

/// The shortest digits (no trailing zeros) and decimal exponent of the first digit of a
/// finite, non-zero `|v|`, as Ryu without edge acceptance finds them.
fn shortest(x: Exact, approx_log10: f64) -> (String, i32) {
    // Work in units of 2^(exponent − 2) so the interval's edges are integers.
    let unit_exp = x.exponent - 2;
    let v = BigInt::from(x.mantissa) * 4u8;
    let (lo, hi) = (&v - if x.lower_closer { 1u8 } else { 2u8 }, &v + 2u8);
    let guess = approx_log10.floor() as i32;
    // Start above the float's own decade so an estimate off by one loses nothing.
    let mut k = guess + 1;
    loop {
        // value / 10^k = V·2^unit_exp / 10^k = (V·s) / p with integers s and p.
        let two_up = unit_exp.max(0) as u32;
        let two_down = (-unit_exp).max(0) as u32;
        let ten_up = (-k).max(0) as u32;
        let ten_down = k.max(0) as u32;
        let s = pow(2, two_up) * pow(10, ten_up);
        let p = pow(10, ten_down) * pow(2, two_down);
        let (vs, los, his) = (&v * &s, &lo * &s, &hi * &s);
        // Strictly inside: D·p > lo·s and D·p < hi·s.
        let d_lo = los.div_floor(&p) + 1u8;
        let (q_hi, r_hi) = his.div_rem(&p);
        let d_hi = if r_hi.is_zero() { q_hi - 1u8 } else { q_hi };
        if d_lo <= d_hi {
            let (q, r) = vs.div_rem(&p);
            let twice = &r * 2u8;
            let round_up = twice > p || (twice == p && q.is_odd());
            let d = if round_up { q + 1u8 } else { q };
            let d = d.clamp(d_lo, d_hi);
            let text = d.to_string();
            let trimmed = text.trim_end_matches('0');
            let zeros = (text.len() - trimmed.len()) as i32;
            let exponent = k + zeros + trimmed.len() as i32 - 1;
            return (trimmed.to_string(), exponent);
        }
        k -= 1;
        debug_assert!(k > -400, "a float always has a shortest decimal");
        if k < -400 {
            // Unreachable for a finite float: 17 digits always fit its interval.
            return ("0".into(), 0);
        }
    }
}

/// Formats digits and the first digit's decimal exponent as `float8out`/`float4out` do:
/// fixed notation for `−4 ≤ exponent < fixed_below`, else `d.ddde±XX`.
fn layout(negative: bool, digits: &str, exp: i32, fixed_below: i32) -> String {
    let sign = if negative { "-" } else { "" };
    if exp < -4 || exp >= fixed_below {
        let (first, rest) = digits.split_at(1);
        let dot = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let esign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{first}{dot}e{esign}{:02}", exp.abs());
    }
    if exp < 0 {
        format!("{sign}0.{}{digits}", "0".repeat((-exp - 1) as usize))
    } else {
        let point = exp as usize + 1;
        if digits.len() <= point {
            format!("{sign}{digits}{}", "0".repeat(point - digits.len()))
        } else {
            format!("{sign}{}.{}", &digits[..point], &digits[point..])
        }
    }
}

/// `float8out` with `extra_float_digits = 1`.
pub fn float8_text(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let (digits, exp) = shortest(exact_f64(v.abs()), v.abs().log10());
    layout(v.is_sign_negative(), &digits, exp, 15)
}

/// `float4out` with `extra_float_digits = 1`.
pub fn float4_text(v: f32) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let (digits, exp) = shortest(exact_f32(v.abs()), (v.abs() as f64).log10());
    layout(v.is_sign_negative(), &digits, exp, 6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    // The literals are the exact values stored, written out in full on purpose.
    #[allow(clippy::excessive_precision)]
    fn float8_as_postgresql_18_prints_it() {
        // Each answer from PostgreSQL 18.6: SELECT <value>::float8 (extra_float_digits 1).
        let cases: &[(f64, &str)] = &[
            (968.16046142578125, "968.1604614257812"),
            (1.5, "1.5"),
            (100.0, "100"),
            (1e15, "1e+15"),
            (123456789012345.0, "123456789012345"),
            (0.0001, "0.0001"),
            (0.00001234, "1.234e-05"),
            (-0.1, "-0.1"),
            (0.1 + 0.2, "0.30000000000000004"),
            (-0.0, "-0"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (f64::MIN_POSITIVE, "2.2250738585072014e-308"),
            (2.2250738585072009e-308, "2.225073858507201e-308"),
            (9007199254740993.0, "9.007199254740992e+15"),
            // '1e23'::float8 is the float below 1e23 (1e23 lies exactly half-way between
            // two floats); "1e+23" is on the interval's edge, so PostgreSQL does not take it.
            (1e23, "9.999999999999999e+22"),
            (f64::NAN, "NaN"),
            (f64::NEG_INFINITY, "-Infinity"),
        ];
        for (v, want) in cases {
            assert_eq!(float8_text(*v), *want, "float8 {v:e}");
        }
    }

    #[test]
    #[allow(clippy::excessive_precision)]
    fn float4_as_postgresql_18_prints_it() {
        // Each answer from PostgreSQL 18.6: SELECT <value>::real.
        let cases: &[(f32, &str)] = &[
            (345285.125, "345285.12"),
            (78860304.0, "7.8860304e+07"),
            (1.1, "1.1"),
            (1e6, "1e+06"),
            (123456.0, "123456"),
            (-0.0, "-0"),
            (1e-45, "1e-45"),
            (f32::MAX, "3.4028235e+38"),
            (f32::MIN_POSITIVE, "1.1754944e-38"),
            (0.1, "0.1"),
        ];
        for (v, want) in cases {
            assert_eq!(float4_text(*v), *want, "float4 {v:e}");
        }
    }
}
