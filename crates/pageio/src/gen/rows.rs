//! The rows of every data set, as pure functions of `(seed, rows, i)`.
//!
//! # Problem
//!
//! The writer and the tests must agree on every value without sharing state: the writer
//! builds pages in parallel and in any order, the tests recompute the same rows as an
//! independent reference. A sequential random generator would force one order on both.
//!
//! # Mechanism
//!
//! Every random draw is `SplitMix64` evaluated at a fixed position of a stream chosen by
//! `(seed, stream tag)`: draw `k` of row `i` is `finalize(base(seed, tag) + (i + 1) · γ)`, so
//! any row can be computed alone, in any thread, and always gives the same bits.
//!
//! ```text
//!   row i ─┬─ stream "uniform" at i ──────────► random()  ∈ [0, 1)
//!          ├─ stream "normal-1" at i ─┐
//!          └─ stream "normal-2" at i ─┴─ Box–Muller ──► random_normal(0, 1)
//! ```
//!
//! The values therefore differ from PostgreSQL's own `random()` sequence, but each data
//! set has PostgreSQL's distribution: uniform on [0, 100000), a line, a saw-tooth, plus
//! normal noise of the published standard deviation.
//!
//! # Worked example
//!
//! `linear` with 20000 rows: row 0 is `i = 1`, `x = 100000 · 1/20000 = 5`, `a = 5`,
//! `x::text = '5'`, `b = '\x' || sha256('5')` = `'\xef2d127de37b942baad06145e54b0c619a1f22327b2ebbcfbec78f5564afe39d'`
//! (66 characters).

use std::fmt::Write as _;

use sha2::{Digest, Sha256};

/// Range of `x`: the published SQL multiplies its fraction by 100000.
pub const X_RANGE: f64 = 100_000.0;

/// Saw-tooth periods of the cyclic data sets (the published `CYCLES = 100`).
pub const CYCLES: u64 = 100;

/// Rows of pgbench_accounts per unit of `--scale` (pgbench's `naccounts`).
pub const ACCOUNTS_PER_SCALE: u64 = 100_000;

/// Characters of `b`: `'\x'` plus 64 hex digits of a SHA-256.
pub const B_TEXT_LEN: usize = 66;

/// Characters of pgbench_accounts.filler (`char(84)`, blank-padded).
pub const FILLER_LEN: usize = 84;

const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// Stream tags, so the draws of one row never reuse each other's bits.
const STREAM_UNIFORM: u64 = 0x756e_6966_6f72_6d00;
const STREAM_NORMAL_1: u64 = 0x6e6f_726d_616c_3100;
const STREAM_NORMAL_2: u64 = 0x6e6f_726d_616c_3200;

/// SplitMix64's output function (Steele, Lea and Flood, 2014).
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Draw number `i` of the SplitMix64 stream for `(seed, tag)`, as 53 random bits in [0, 1).
fn unit(seed: u64, tag: u64, i: u64) -> f64 {
    let base = mix64(seed ^ tag);
    let z = base.wrapping_add(i.wrapping_add(1).wrapping_mul(GOLDEN_GAMMA));
    (mix64(z) >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// PostgreSQL's `random()` stand-in: uniform on [0, 1), a pure function of `(seed, i)`.
pub fn random(seed: u64, i: u64) -> f64 {
    unit(seed, STREAM_UNIFORM, i)
}

/// PostgreSQL's `random_normal(0, 1)` stand-in (Box–Muller), a pure function of `(seed, i)`.
pub fn random_normal(seed: u64, i: u64) -> f64 {
    // 1 − u lies in (0, 1], so the logarithm is finite.
    let u1 = 1.0 - unit(seed, STREAM_NORMAL_1, i);
    let u2 = unit(seed, STREAM_NORMAL_2, i);
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// PostgreSQL's `float8out` with the default `extra_float_digits = 1`: the shortest string
/// that reads back as the same double, in exponent form (`1e-05`, `1.5e+15`) when the decimal
/// exponent is below −4 or at least 15, plain otherwise (`12.5`, `45678.123456789`).
pub fn float8_out(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0" } else { "0" }.into();
    }
    // Rust's `{:e}` prints the same shortest round-trip digits as PostgreSQL's Ryu-based
    // output, e.g. "1.5e15"; only the exponent spelling differs.
    let sci = format!("{v:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..15).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.unsigned_abs())
    } else {
        format!("{v}")
    }
}

/// `sha256(x::text::bytea)` as its text form: `\x` and 64 lowercase hex digits.
pub fn b_text(x: f64) -> String {
    let digest = Sha256::digest(float8_out(x).as_bytes());
    let mut out = String::with_capacity(B_TEXT_LEN);
    out.push_str("\\x");
    for byte in digest {
        // Writing to a String cannot fail.
        let _ = write!(out, "{byte:02x}");
    }
    out
}

/// One row of a data set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Row {
    /// A row of the `(a double precision, b text)` benchmark tables. `x` is the value `b`
    /// hashes; `a` is `x` plus the data set's noise.
    Bench {
        /// Column `a`, the indexed key.
        a: f64,
        /// The noiseless value whose text form `b` hashes.
        x: f64,
    },
    /// A row of pgbench_accounts (`filler` is always 84 blanks).
    Account {
        /// `aid`, the primary key: 1..N.
        aid: i32,
        /// `bid`: `(aid − 1) / 100000 + 1`.
        bid: i32,
        /// `abalance`: 0.
        abalance: i32,
    },
}

impl Row {
    /// The indexed key (`a`, or `aid` as a double).
    pub fn key(&self) -> f64 {
        match *self {
            Row::Bench { a, .. } => a,
            Row::Account { aid, .. } => aid as f64,
        }
    }

    /// Column `b` of a benchmark row (`None` for pgbench_accounts).
    pub fn b(&self) -> Option<String> {
        match *self {
            Row::Bench { x, .. } => Some(b_text(x)),
            Row::Account { .. } => None,
        }
    }
}
