//! PostgreSQL's `numeric` at its full precision: up to 131072 digits before the decimal
//! point and 16383 after, `NaN` and `±Infinity`.
//!
//! # Problem
//!
//! A `numeric` column holds any number of digits, and `sum`/`avg` over it must print every
//! one of them as PostgreSQL does. Almost every real value fits 38 digits, and adding i128s
//! is an order of magnitude cheaper than adding arbitrary-precision integers, so the common
//! case must not pay for the rare one.
//!
//! # Mechanism
//!
//! ```text
//!  NumericData ─► digits fit an i128 mantissa? ─ yes ─► Finite { mantissa: i128, scale }
//!                                               └ no ──► Big { BigInt mantissa, scale }
//!  a + b:  both Finite and the sum fits ─► i128 add (the fast path)
//!          otherwise                    ─► BigInt add, normalised back to Finite if it fits
//!  avg:    sum / count with select_div_scale's result scale, rounded half away from zero
//! ```
//!
//! A value is always held in the narrowest form (a `Big` never fits an i128), so two equal
//! values of the same scale are equal as Rust values too. The scale is PostgreSQL's display
//! scale (`dscale`): `1.0` and `1.00` compare equal but print differently.
//!
//! # Worked example
//!
//! `numeric '-12.50'` is stored with a short header: `0xA081` = short (0x8000), negative
//! (0x2000), dscale 2 (bits 7..12), weight 0; digits `[12, 5000]` → mantissa
//! −(12·10⁴ + 5000)·10^(2−4) = −1250 with scale 2, printed `-12.50`. `1e50` is stored as
//! weight 12, digit `[1]`: 10^48·10² needs 51 digits, so it is read as a `Big`.

use std::cmp::Ordering;

use num_bigint::BigInt;
use num_integer::Integer;
use num_traits::{Signed, ToPrimitive, Zero};

/// `NUMERIC_DSCALE_MAX`: the largest display scale a stored numeric carries.
pub const NUMERIC_DSCALE_MAX: u32 = 0x3FFF;

/// Most decimal digits before the point PostgreSQL's numeric holds: `NUMERIC_WEIGHT_MAX`
/// (32767) + 1 base-10000 digits of 4 decimal digits each.
pub const NUMERIC_MAX_INTEGER_DIGITS: u64 = 131_072;

/// `NUMERIC_MAX_DISPLAY_SCALE`: a quotient's scale is capped here by `select_div_scale`.
pub const NUMERIC_MAX_DISPLAY_SCALE: u32 = 1000;

/// `NUMERIC_MIN_SIG_DIGITS`: a quotient keeps at least this many significant digits.
const NUMERIC_MIN_SIG_DIGITS: i64 = 16;

/// Most base-10000 digits a stored numeric holds: 32768 before the point (weight up to
/// `NUMERIC_WEIGHT_MAX`) and 4096 after (dscale up to 16383). More is a damaged value, and
/// refusing it bounds the work a hostile one can ask for.
const NUMERIC_MAX_STORED_DIGITS: usize = 32_768 + 4_096;

/// Most significant digits the i128 fast path holds for every value (i128::MAX has 39
/// digits, not all 39-digit numbers fit).
const I128_SAFE_DIGITS: usize = 38;

/// A finite numeric whose mantissa does not fit an i128.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BigNumeric {
    mantissa: BigInt,
    scale: u32,
}

impl BigNumeric {
    /// The digits as an integer: the value is `mantissa / 10^scale`.
    pub fn mantissa(&self) -> &BigInt {
        &self.mantissa
    }

    /// Digits after the decimal point (PostgreSQL's dscale).
    pub fn scale(&self) -> u32 {
        self.scale
    }
}

/// An exact `numeric`: a decimal over an i128 mantissa for values of up to 38 digits, an
/// arbitrary-precision one beyond, or a special value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Numeric {
    /// `NaN`: equal to itself, above every other value (PostgreSQL's numeric order).
    NaN,
    /// `Infinity`.
    PosInf,
    /// `-Infinity`.
    NegInf,
    /// `mantissa / 10^scale`, `scale` being PostgreSQL's display scale (dscale).
    Finite {
        /// The digits as an integer.
        mantissa: i128,
        /// Digits after the decimal point.
        scale: u32,
    },
    /// A finite value whose digits do not fit an i128 (never one that does).
    Big(Box<BigNumeric>),
}

/// `10^exp`, if it fits an i128.
fn pow10(exp: u32) -> Option<i128> {
    10i128.checked_pow(exp)
}

/// Powers of ten kept per thread: a column of huge values (1e131000 has one stored digit
/// and a weight of 32750) needs the same few large powers for every row, and computing one
/// costs far more than multiplying by it.
const POW10_CACHE_ENTRIES: usize = 64;

thread_local! {
    static POW10_CACHE: std::cell::RefCell<Vec<(u32, BigInt)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// `10^exp` as a BigInt (small powers computed, large ones cached).
fn big_pow10(exp: u32) -> BigInt {
    if exp <= 38 {
        return BigInt::from(10u128.pow(exp.min(38)));
    }
    POW10_CACHE.with(|cache| {
        let mut cache = cache.borrow_mut();
        if let Some((_, p)) = cache.iter().find(|(e, _)| *e == exp) {
            return p.clone();
        }
        let p = num_traits::pow(BigInt::from(10u8), exp as usize);
        if cache.len() >= POW10_CACHE_ENTRIES {
            cache.remove(0);
        }
        cache.push((exp, p.clone()));
        p
    })
}

/// An upper bound of the decimal digits of `|m|`, from its bit length.
fn digits_upper_bound(m: &BigInt) -> u64 {
    // log10(2) < 0.30103; one more for the rounding.
    m.bits() * 30_103 / 100_000 + 1
}

impl Numeric {
    /// An integer.
    pub fn from_i128(v: i128) -> Numeric {
        Numeric::Finite {
            mantissa: v,
            scale: 0,
        }
    }

    /// `mantissa / 10^scale` in its narrowest form.
    pub fn from_big(mantissa: BigInt, scale: u32) -> Numeric {
        match mantissa.to_i128() {
            Some(m) => Numeric::Finite { mantissa: m, scale },
            None => Numeric::Big(Box::new(BigNumeric { mantissa, scale })),
        }
    }

    /// The mantissa and scale of a finite value, as a BigInt.
    fn to_big(&self) -> Option<(BigInt, u32)> {
        match self {
            Numeric::Finite { mantissa, scale } => Some((BigInt::from(*mantissa), *scale)),
            Numeric::Big(b) => Some((b.mantissa.clone(), b.scale)),
            _ => None,
        }
    }

    /// The display scale of a finite value (0 for the special values).
    pub fn scale(&self) -> u32 {
        match self {
            Numeric::Finite { scale, .. } => *scale,
            Numeric::Big(b) => b.scale,
            _ => 0,
        }
    }

    /// Decodes `NumericData` (the varlena payload, header excluded), of any length.
    pub fn decode(payload: &[u8]) -> Result<Numeric, String> {
        let u16_at = |i: usize| -> Result<u16, String> {
            payload
                .get(i..i + 2)
                .map(|b| u16::from_le_bytes([b[0], b[1]]))
                .ok_or_else(|| format!("numeric of {} bytes is truncated", payload.len()))
        };
        let header = u16_at(0)?;
        let (negative, scale, weight, digits_at) = if header & 0xC000 == 0xC000 {
            return match header & 0xF000 {
                0xC000 => Ok(Numeric::NaN),
                0xD000 => Ok(Numeric::PosInf),
                0xF000 => Ok(Numeric::NegInf),
                _ => Err(format!(
                    "numeric special header {header:#06x} is not NaN or ±Infinity"
                )),
            };
        } else if header & 0x8000 != 0 {
            let weight = if header & 0x0040 != 0 {
                (header & 0x003F) as i32 - 64
            } else {
                (header & 0x003F) as i32
            };
            (
                header & 0x2000 != 0,
                ((header & 0x1F80) >> 7) as u32,
                weight,
                2,
            )
        } else {
            let weight = u16_at(2)? as i16 as i32;
            (header & 0x4000 != 0, (header & 0x3FFF) as u32, weight, 4)
        };
        let digits = &payload[digits_at.min(payload.len())..];
        if !digits.len().is_multiple_of(2) {
            return Err(format!("numeric digits take an odd {} bytes", digits.len()));
        }
        if digits.len() / 2 > NUMERIC_MAX_STORED_DIGITS {
            return Err(format!(
                "numeric of {} base-10000 digits is longer than PostgreSQL stores ({NUMERIC_MAX_STORED_DIGITS}): the value is corrupt",
                digits.len() / 2
            ));
        }
        // The fast path: every digit's contribution fits an i128.
        let mut mantissa: i128 = 0;
        let mut fits = true;
        for (i, pair) in digits.chunks_exact(2).enumerate() {
            let d = u16::from_le_bytes([pair[0], pair[1]]) as i128;
            if d >= 10_000 {
                return Err(format!("numeric digit {d} is not a base-10000 digit"));
            }
            // Digit i is worth 10000^(weight - i); times 10^scale for the mantissa.
            let exp = 4 * (weight as i64 - i as i64) + scale as i64;
            let term = if exp >= 0 {
                u32::try_from(exp)
                    .ok()
                    .and_then(pow10)
                    .and_then(|p| d.checked_mul(p))
            } else {
                let p = u32::try_from(-exp).ok().and_then(pow10);
                match p {
                    Some(p) if d % p == 0 => Some(d / p),
                    _ if d == 0 => Some(0),
                    _ => return Err(beyond_scale(scale)),
                }
            };
            match term.and_then(|t| mantissa.checked_add(t)) {
                Some(m) => mantissa = m,
                None => {
                    fits = false;
                    break;
                }
            }
        }
        if fits {
            return Ok(Numeric::Finite {
                mantissa: if negative { -mantissa } else { mantissa },
                scale,
            });
        }
        decode_big(digits, weight, scale, negative)
    }

    /// Parses a decimal literal as `numeric_in` does: `-12.50`, `1.5e3`, `.5`, `NaN`,
    /// `Infinity`; the display scale is the digits after the point less the exponent.
    pub fn parse(text: &str) -> Result<Numeric, String> {
        let t = text.trim().trim_matches('\'');
        let invalid = || format!("invalid input syntax for type numeric: \"{t}\"");
        match t.to_ascii_lowercase().as_str() {
            "nan" => return Ok(Numeric::NaN),
            "infinity" | "+infinity" | "inf" | "+inf" => return Ok(Numeric::PosInf),
            "-infinity" | "-inf" => return Ok(Numeric::NegInf),
            _ => {}
        }
        let (negative, body) = match t.strip_prefix('-') {
            Some(b) => (true, b),
            None => (false, t.strip_prefix('+').unwrap_or(t)),
        };
        let (number, exponent) = match body.find(['e', 'E']) {
            Some(at) => {
                let e: i64 = body[at + 1..].parse().map_err(|_| invalid())?;
                (&body[..at], e)
            }
            None => (body, 0),
        };
        let (int, frac) = number.split_once('.').unwrap_or((number, ""));
        if (int.is_empty() && frac.is_empty())
            || !int.bytes().chain(frac.bytes()).all(|c| c.is_ascii_digit())
        {
            return Err(invalid());
        }
        let overflow = || format!("value overflows numeric format: \"{t}\"");
        // Bounded before any digit is materialised: a literal's exponent is a flag's number.
        let frac_len = i64::try_from(frac.len()).map_err(|_| overflow())?;
        let int_len = i64::try_from(int.len()).map_err(|_| overflow())?;
        if exponent.unsigned_abs() > 2 * NUMERIC_MAX_INTEGER_DIGITS
            || int_len.saturating_add(exponent) > NUMERIC_MAX_INTEGER_DIGITS as i64 + 1
        {
            return Err(overflow());
        }
        let scale = (frac_len - exponent).max(0);
        if scale > NUMERIC_DSCALE_MAX as i64 {
            return Err(overflow());
        }
        let scale = scale as u32;
        // digits · 10^(exponent - frac_len) at scale `scale`: digits · 10^(exponent - frac_len + scale).
        let shift = exponent - frac_len + scale as i64;
        let all: String = int.chars().chain(frac.chars()).collect();
        let digits = all.trim_start_matches('0');
        let n = if digits.len() + (shift.max(0) as usize) <= I128_SAFE_DIGITS {
            let m: i128 = if digits.is_empty() {
                0
            } else {
                digits.parse().map_err(|_| invalid())?
            };
            let m = m
                .checked_mul(pow10(shift as u32).ok_or_else(overflow)?)
                .ok_or_else(overflow)?;
            Numeric::Finite { mantissa: m, scale }
        } else {
            let m: BigInt = if digits.is_empty() {
                BigInt::zero()
            } else {
                digits.parse().map_err(|_| invalid())?
            };
            Numeric::from_big(m * big_pow10(shift as u32), scale)
        };
        Ok(if negative { n.negate() } else { n })
    }

    /// `-self`.
    fn negate(self) -> Numeric {
        match self {
            Numeric::Finite { mantissa, scale } => match mantissa.checked_neg() {
                Some(m) => Numeric::Finite { mantissa: m, scale },
                None => Numeric::from_big(-BigInt::from(mantissa), scale),
            },
            Numeric::Big(b) => Numeric::from_big(-b.mantissa, b.scale),
            Numeric::PosInf => Numeric::NegInf,
            Numeric::NegInf => Numeric::PosInf,
            Numeric::NaN => Numeric::NaN,
        }
    }

    /// `self + other` as PostgreSQL's `numeric_add`: NaN absorbs, +Inf + −Inf is NaN, the
    /// result's scale is the larger one. `None` if the sum needs more than PostgreSQL's
    /// 131072 digits before the point ("value overflows numeric format").
    pub fn checked_add(mut self, other: Numeric) -> Option<Numeric> {
        self.add_assign(&other).ok()?;
        Some(self)
    }

    /// `self += other` (see [`Numeric::checked_add`]); the error is PostgreSQL's.
    pub fn add_assign(&mut self, other: &Numeric) -> Result<(), String> {
        use Numeric::*;
        // The fast path: two i128 mantissas of the same scale, the case of a column.
        if let (
            Finite {
                mantissa: a,
                scale: sa,
            },
            Finite {
                mantissa: b,
                scale: sb,
            },
        ) = (&mut *self, other)
        {
            if *sa == *sb {
                if let Some(sum) = a.checked_add(*b) {
                    *a = sum;
                    return Ok(());
                }
            } else {
                let scale = (*sa).max(*sb);
                let up = |m: i128, s: u32| pow10(scale - s).and_then(|p| m.checked_mul(p));
                if let Some(sum) = up(*a, *sa)
                    .zip(up(*b, *sb))
                    .and_then(|(x, y)| x.checked_add(y))
                {
                    *a = sum;
                    *sa = scale;
                    return Ok(());
                }
            }
        }
        let result = match (&*self, other) {
            (NaN, _) | (_, NaN) => NaN,
            (PosInf, NegInf) | (NegInf, PosInf) => NaN,
            (PosInf, _) | (_, PosInf) => PosInf,
            (NegInf, _) | (_, NegInf) => NegInf,
            (x, y) => {
                let ((a, sa), (b, sb)) = match (x.to_big(), y.to_big()) {
                    (Some(a), Some(b)) => (a, b),
                    _ => return Err("numeric addition of a non-finite value".into()),
                };
                let scale = sa.max(sb);
                let sum = a * big_pow10(scale - sa) + b * big_pow10(scale - sb);
                let sum = Numeric::from_big(sum, scale);
                if sum.integer_digits() > NUMERIC_MAX_INTEGER_DIGITS {
                    return Err("value overflows numeric format".into());
                }
                sum
            }
        };
        *self = result;
        Ok(())
    }

    /// Decimal digits before the point (0 for a value below 1 and for the special values).
    fn integer_digits(&self) -> u64 {
        match self {
            Numeric::Big(b) => {
                // Printing a number of 100,000 digits is slow; its bit length tells almost
                // always that it is far from the limit.
                let bound = digits_upper_bound(&b.mantissa).saturating_sub(b.scale as u64);
                if bound <= NUMERIC_MAX_INTEGER_DIGITS {
                    return bound;
                }
                let len = b.mantissa.magnitude().to_string().len() as u64;
                len.saturating_sub(b.scale as u64)
            }
            _ => 0,
        }
    }

    /// PostgreSQL's numeric order: −Infinity < numbers < Infinity < NaN, NaN = NaN;
    /// numbers by value, whatever their scale (`1.0` = `1.00`).
    pub fn pg_cmp(&self, other: &Numeric) -> Ordering {
        use Numeric::*;
        let rank = |n: &Numeric| match n {
            NegInf => 0,
            Finite { .. } | Big(_) => 1,
            PosInf => 2,
            NaN => 3,
        };
        match (self, other) {
            (
                Finite {
                    mantissa: a,
                    scale: sa,
                },
                Finite {
                    mantissa: b,
                    scale: sb,
                },
            ) => {
                let scale = (*sa).max(*sb);
                let up = |m: i128, s: u32| pow10(scale - s).and_then(|p| m.checked_mul(p));
                match (up(*a, *sa), up(*b, *sb)) {
                    (Some(x), Some(y)) => x.cmp(&y),
                    _ => self.big_cmp(other),
                }
            }
            (Finite { .. } | Big(_), Finite { .. } | Big(_)) => self.big_cmp(other),
            _ => rank(self).cmp(&rank(other)),
        }
    }

    /// The order of two finite values through BigInts.
    fn big_cmp(&self, other: &Numeric) -> Ordering {
        match (self.to_big(), other.to_big()) {
            (Some((a, sa)), Some((b, sb))) => {
                // Signs first, then magnitudes far apart, before scaling to one scale.
                let sign = |m: &BigInt| m.sign() as i8;
                if sign(&a) != sign(&b) {
                    return sign(&a).cmp(&sign(&b));
                }
                let magnitude =
                    |m: &BigInt, s: u32| (m.bits() as f64 * std::f64::consts::LOG10_2) - s as f64;
                let (ma, mb) = (magnitude(&a, sa), magnitude(&b, sb));
                if !a.is_zero() && !b.is_zero() && (ma - mb).abs() > 2.0 {
                    let larger = if ma > mb {
                        Ordering::Greater
                    } else {
                        Ordering::Less
                    };
                    return if a.is_negative() {
                        larger.reverse()
                    } else {
                        larger
                    };
                }
                let scale = sa.max(sb);
                (a * big_pow10(scale - sa)).cmp(&(b * big_pow10(scale - sb)))
            }
            _ => Ordering::Equal,
        }
    }

    /// The integer value, if this is a finite numeric of scale 0 that fits an i128.
    pub fn as_integer(&self) -> Option<i128> {
        match *self {
            Numeric::Finite { mantissa, scale: 0 } => Some(mantissa),
            _ => None,
        }
    }

    /// `self / count` as PostgreSQL's `numeric_div` computes an average: the result scale
    /// from `select_div_scale` (at least 16 significant digits, at least the sum's scale,
    /// at most 1000), rounded half away from zero. Special values pass through.
    pub fn div_by_count(&self, count: i64) -> Option<Numeric> {
        if count <= 0 {
            return None;
        }
        let (mantissa, scale) = match self {
            Numeric::Finite { mantissa, scale } => (BigInt::from(*mantissa), *scale),
            Numeric::Big(b) => (b.mantissa.clone(), b.scale),
            special => return Some(special.clone()),
        };
        // Fast path: an i128 quotient at a result scale not below the sum's.
        let (weight1, first1) = weight_and_first_digit(&mantissa, scale);
        let (weight2, first2) = weight_and_first_digit(&BigInt::from(count), 0);
        let mut qweight = weight1 - weight2;
        if first1 <= first2 {
            qweight -= 1;
        }
        let rscale = (NUMERIC_MIN_SIG_DIGITS - qweight * 4)
            .max(scale as i64)
            .clamp(0, NUMERIC_MAX_DISPLAY_SCALE as i64) as u32;
        if let (Numeric::Finite { mantissa: m, .. }, true) = (self, rscale >= scale) {
            if let Some(scaled) = pow10(rscale - scale).and_then(|p| m.checked_mul(p)) {
                let n = count as i128;
                let (q, r) = (scaled / n, scaled % n);
                // Round half away from zero: |r| * 2 >= n.
                let q = if r.unsigned_abs() * 2 >= n as u128 {
                    q + scaled.signum()
                } else {
                    q
                };
                return Some(Numeric::Finite {
                    mantissa: q,
                    scale: rscale,
                });
            }
        }
        // mantissa / 10^scale / count at scale rscale = mantissa·10^rscale / (count·10^scale).
        let (num, den) = if rscale >= scale {
            (mantissa * big_pow10(rscale - scale), BigInt::from(count))
        } else {
            (mantissa, BigInt::from(count) * big_pow10(scale - rscale))
        };
        let (q, r) = num.div_rem(&den);
        let q = if r.magnitude() * 2u8 >= *den.magnitude() {
            if num.is_negative() {
                q - 1
            } else {
                q + 1
            }
        } else {
            q
        };
        Some(Numeric::from_big(q, rscale))
    }
}

/// The error for stored digits below a value's display scale.
fn beyond_scale(scale: u32) -> String {
    format!("numeric has digits beyond its display scale {scale}: the value is corrupt")
}

/// Decodes base-10000 digits whose value does not fit an i128.
fn decode_big(digits: &[u8], weight: i32, scale: u32, negative: bool) -> Result<Numeric, String> {
    // The digits as one decimal integer A; the value is A · 10^(4·(weight − n + 1)).
    let n = digits.len() / 2;
    let mut text = String::with_capacity(4 * n);
    for pair in digits.chunks_exact(2) {
        let d = u16::from_le_bytes([pair[0], pair[1]]);
        if d >= 10_000 {
            return Err(format!("numeric digit {d} is not a base-10000 digit"));
        }
        text.push_str(&format!("{d:04}"));
    }
    let a: BigInt = text.parse().unwrap_or_default();
    let exp = 4 * (weight as i64 - n as i64 + 1) + scale as i64;
    let mantissa = if exp >= 0 {
        a * big_pow10(u32::try_from(exp).map_err(|_| beyond_scale(scale))?)
    } else {
        let p = big_pow10(u32::try_from(-exp).map_err(|_| beyond_scale(scale))?);
        let (q, r) = a.div_rem(&p);
        if !r.is_zero() {
            return Err(beyond_scale(scale));
        }
        q
    };
    Ok(Numeric::from_big(
        if negative { -mantissa } else { mantissa },
        scale,
    ))
}

/// The weight (base-10000 exponent) and first base-10000 digit of `|m| / 10^scale`, as
/// PostgreSQL's `NumericVar` holds it: (0, 0) for zero.
fn weight_and_first_digit(m: &BigInt, scale: u32) -> (i64, u32) {
    if m.is_zero() {
        return (0, 0);
    }
    // Align the fraction to whole base-10000 digits.
    let pad = ((4 - scale % 4) % 4) as usize;
    let digits = m.magnitude().to_string();
    let len = digits.len() + pad;
    let fraction_groups = ((scale as u64 + pad as u64) / 4) as i64;
    let groups = ((len - 1) / 4) as i64;
    let lead = len - 4 * groups as usize;
    let mut first = format!("{digits}{}", "0".repeat(pad));
    first.truncate(lead);
    (groups - fraction_groups, first.parse().unwrap_or(0))
}

impl std::fmt::Display for Numeric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (negative, digits, scale) = match self {
            Numeric::NaN => return f.write_str("NaN"),
            Numeric::PosInf => return f.write_str("Infinity"),
            Numeric::NegInf => return f.write_str("-Infinity"),
            Numeric::Finite { mantissa, scale } => (
                *mantissa < 0,
                mantissa.unsigned_abs().to_string(),
                *scale as usize,
            ),
            Numeric::Big(b) => (
                b.mantissa.is_negative(),
                b.mantissa.magnitude().to_string(),
                b.scale as usize,
            ),
        };
        let sign = if negative { "-" } else { "" };
        if scale == 0 {
            return write!(f, "{sign}{digits}");
        }
        if digits.len() <= scale {
            write!(f, "{sign}0.{}{digits}", "0".repeat(scale - digits.len()))
        } else {
            let (int, frac) = digits.split_at(digits.len() - scale);
            write!(f, "{sign}{int}.{frac}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `numeric_send`'s digits as a stored payload (long header).
    fn long(negative: bool, weight: i16, dscale: u16, digits: &[u16]) -> Vec<u8> {
        let mut p = ((if negative { 0x4000 } else { 0 }) | dscale)
            .to_le_bytes()
            .to_vec();
        p.extend_from_slice(&weight.to_le_bytes());
        for d in digits {
            p.extend_from_slice(&d.to_le_bytes());
        }
        p
    }

    #[test]
    fn decodes_and_prints_exactly() {
        // Short header: negative, dscale 2, weight 0, digits 12, 5000 → -12.50.
        let mut p = 0xA100u16.to_le_bytes().to_vec();
        p.extend_from_slice(&12u16.to_le_bytes());
        p.extend_from_slice(&5000u16.to_le_bytes());
        assert_eq!(Numeric::decode(&p).unwrap().to_string(), "-12.50");
        assert_eq!(
            Numeric::decode(&long(false, 1, 0, &[1, 2]))
                .unwrap()
                .to_string(),
            "10002"
        );
        // Short header with negative weight: 0.0005 = weight -1, dscale 4, digit 5.
        let h: u16 = 0x8000 | (4 << 7) | 0x0040 | (64 - 1);
        let mut p = h.to_le_bytes().to_vec();
        p.extend_from_slice(&5u16.to_le_bytes());
        assert_eq!(Numeric::decode(&p).unwrap().to_string(), "0.0005");
        assert_eq!(
            Numeric::decode(&0xC000u16.to_le_bytes()).unwrap(),
            Numeric::NaN
        );
        assert_eq!(
            Numeric::decode(&0xD000u16.to_le_bytes()).unwrap(),
            Numeric::PosInf
        );
        assert_eq!(
            Numeric::decode(&0xF000u16.to_le_bytes()).unwrap(),
            Numeric::NegInf
        );
        assert!(Numeric::decode(&[1]).is_err());
        assert_eq!(Numeric::parse("0.001").unwrap().to_string(), "0.001");
        assert_eq!(Numeric::NaN.pg_cmp(&Numeric::PosInf), Ordering::Greater);
    }

    #[test]
    fn values_beyond_38_digits_are_read_whole() {
        // SELECT 1e50::numeric → 100000000000000000000000000000000000000000000000000
        // (stored: weight 12, dscale 0, digits [100]).
        let n = Numeric::decode(&long(false, 12, 0, &[100])).unwrap();
        assert_eq!(n.to_string(), format!("1{}", "0".repeat(50)));
        assert!(matches!(n, Numeric::Big(_)));
        // SELECT '1e-100'::numeric(1000,500): weight -25, digit [1], dscale 500.
        let n = Numeric::decode(&long(false, -25, 500, &[1])).unwrap();
        assert_eq!(
            n.to_string(),
            format!("0.{}1{}", "0".repeat(99), "0".repeat(400))
        );
        // Negative, the largest weight PostgreSQL stores: -1e131071.
        let n = Numeric::decode(&long(true, 32767, 0, &[1000])).unwrap();
        let text = n.to_string();
        assert_eq!(text.len(), 1 + 131_072);
        assert!(text.starts_with("-1000"));
        assert_eq!(Numeric::parse(&text).unwrap(), n);
        // More digits than PostgreSQL ever stores: corruption, refused before any work.
        let long_digits = vec![1u16; NUMERIC_MAX_STORED_DIGITS + 1];
        assert!(Numeric::decode(&long(false, 0, 0, &long_digits))
            .unwrap_err()
            .contains("longer than PostgreSQL stores"));
        // A stored digit below the display scale is corruption, not a value.
        assert!(Numeric::decode(&long(false, -25, 10, &[1]))
            .unwrap_err()
            .contains("beyond its display scale"));
    }

    #[test]
    fn parses_as_numeric_in() {
        // SELECT '1.5e3'::numeric, '1.50e1'::numeric, '1e-5'::numeric, '.5'::numeric
        //   → 1500 | 15.0 | 0.00001 | 0.5
        let p = |s: &str| Numeric::parse(s).unwrap().to_string();
        assert_eq!(p("1.5e3"), "1500");
        assert_eq!(p("1.50e1"), "15.0");
        assert_eq!(p("1e-5"), "0.00001");
        assert_eq!(p(".5"), "0.5");
        assert_eq!(p("-0.000"), "0.000");
        assert_eq!(p("1e50"), format!("1{}", "0".repeat(50)));
        assert!(Numeric::parse("1e200000")
            .unwrap_err()
            .contains("value overflows numeric format"));
        assert!(Numeric::parse("1x")
            .unwrap_err()
            .contains("invalid input syntax"));
    }

    #[test]
    fn sums_are_exact_at_any_size() {
        let p = |s: &str| Numeric::parse(s).unwrap();
        let add = |a: &str, b: &str| p(a).checked_add(p(b)).unwrap().to_string();
        assert_eq!(add("1.5", "-0.25"), "1.25");
        // SELECT 1e50::numeric + 1e-50::numeric → 1 followed by 50 zeros, a point and 1e-50.
        assert_eq!(
            add("1e50", "1e-50"),
            format!("1{}.{}1", "0".repeat(50), "0".repeat(49))
        );
        // i128 overflow goes to the BigInt path and back when it fits again.
        let max = i128::MAX.to_string();
        let s = p(&max).checked_add(p(&max)).unwrap();
        assert_eq!(s.to_string(), (BigInt::from(i128::MAX) * 2u8).to_string());
        let back = s.checked_add(p(&format!("-{max}"))).unwrap();
        assert_eq!(back, Numeric::from_i128(i128::MAX));
        // SELECT 'Infinity'::numeric + '-Infinity'::numeric → NaN
        assert_eq!(
            Numeric::PosInf.checked_add(Numeric::NegInf).unwrap(),
            Numeric::NaN
        );
        assert_eq!(
            Numeric::NaN.checked_add(Numeric::PosInf).unwrap(),
            Numeric::NaN
        );
        assert_eq!(
            p("1").checked_add(Numeric::NegInf).unwrap(),
            Numeric::NegInf
        );
        // Past 131072 integer digits: PostgreSQL's "value overflows numeric format".
        let top = Numeric::decode(&long(false, 32767, 0, &[9999])).unwrap();
        let mut twice = top.clone();
        assert_eq!(
            twice.add_assign(&top).unwrap_err(),
            "value overflows numeric format"
        );
    }

    #[test]
    fn compares_by_value_at_any_size() {
        let p = |s: &str| Numeric::parse(s).unwrap();
        assert_eq!(p("1.0").pg_cmp(&p("1.00")), Ordering::Equal);
        assert_eq!(p("1e50").pg_cmp(&p("1e-50")), Ordering::Greater);
        assert_eq!(p("-1e50").pg_cmp(&p("1")), Ordering::Less);
        assert_eq!(p("1e50").pg_cmp(&Numeric::PosInf), Ordering::Less);
        assert_eq!(
            p("1e37").pg_cmp(&p("0.00000000000000000000000000000000000001")),
            Ordering::Greater
        );
    }

    #[test]
    fn averages_have_postgresqls_scale() {
        let avg = |sum: &str, n: i64| {
            Numeric::parse(sum)
                .unwrap()
                .div_by_count(n)
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
        // SELECT avg(x) FROM (VALUES (1e50), (1e50), (1e50)) v(x) → 1e50 with 0 decimals
        // (select_div_scale: 16 − 4·12 < 0 → scale 0).
        assert_eq!(avg("3e50", 3), format!("1{}", "0".repeat(50)));
        // SELECT avg(x) FROM (VALUES ('1e-100'::numeric(1000,500)), (0)) v(x)
        //   → 0.(99 zeros)5 padded to 500 digits (the sum's scale, below 1000).
        let a = avg(&format!("0.{}1{}", "0".repeat(99), "0".repeat(400)), 2);
        assert_eq!(a, format!("0.{}5{}", "0".repeat(100), "0".repeat(399)));
        // SELECT avg(x) FROM (VALUES ('-5e-1001'::numeric + '0e-16383'::numeric)) v(x)
        //   → -0.(999 zeros)1: a sum of scale 16383, the quotient's scale capped at 1000,
        //   rounded half away from zero.
        let tiny = format!("-0.{}5{}", "0".repeat(1000), "0".repeat(16383 - 1001));
        assert_eq!(avg(&tiny, 1), format!("-0.{}1", "0".repeat(999)));
        // SELECT avg(x) FROM (VALUES (1.5), (2.25), (1e40)) v(x)
        assert_eq!(
            avg("10000000000000000000000000000000000000003.75", 3),
            "3333333333333333333333333333333333333334.58"
        );
        // SELECT avg(x) FROM (VALUES (123456789012345678901234567890123456789), (1)) v(x)
        assert_eq!(
            avg("123456789012345678901234567890123456790", 2),
            "61728394506172839450617283945061728395"
        );
        assert_eq!(avg("NaN", 3), "NaN");
        assert_eq!(avg("-Infinity", 3), "-Infinity");
    }
}
