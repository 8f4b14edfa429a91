//! # PostgreSQL's order of `double precision` values
//!
//! IEEE 754 leaves NaN unordered (`NaN <= x` is false for every `x`); PostgreSQL orders it,
//! so that a btree over a float column has one place for every value:
//!
//! ```text
//!   IEEE 754:    NaN is unordered, -0 == 0
//!   PostgreSQL:  -Infinity < … < -0 = 0 < … < Infinity < NaN, and NaN = NaN
//!                (float8_cmp_internal; the btree opclass sorts NaN last)
//! ```
//!
//! The order belongs to the on-disk format: a btree page of `float8` keys is sorted by it,
//! so both the generator that writes such pages and the scans that search them use
//! [`float8_cmp`] from here.

use std::cmp::Ordering;

/// PostgreSQL's float8 order (`float8_cmp_internal`): NaN equals NaN and sorts above every
/// number, `-0` equals `0`, everything else as IEEE 754.
pub fn float8_cmp(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        // Neither is NaN, so partial_cmp is total here (and -0 == 0).
        (false, false) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_is_postgresqls() {
        let nan = f64::NAN;
        assert_eq!(float8_cmp(nan, nan), Ordering::Equal);
        assert_eq!(float8_cmp(nan, f64::INFINITY), Ordering::Greater);
        assert_eq!(float8_cmp(f64::INFINITY, nan), Ordering::Less);
        assert_eq!(float8_cmp(-0.0, 0.0), Ordering::Equal);
        assert_eq!(float8_cmp(-1.0, 0.0), Ordering::Less);
    }
}
