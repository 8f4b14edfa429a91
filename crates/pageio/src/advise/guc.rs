//! The values PostgreSQL refuses at start-up, with its own error text.
//!
//! A `postgresql.conf` line whose value the server cannot take stops it from starting:
//! the postmaster logs the reason and then `FATAL: configuration file "…" contains errors`.
//! `advise` must call such a line BAD, not a tuning warning, and say what PostgreSQL will
//! say. This module is that check for every setting `advise` reads.
//!
//! # Mechanism
//!
//! [`GUCS`] is one row per setting and range of versions: the type (integer with its unit,
//! real, Boolean, enum) and the bounds of PostgreSQL's `guc_tables.c`. [`check`] parses a
//! value as `guc.c` does and returns the message PostgreSQL logs:
//!
//! ```text
//!   value ─► parse_int  (strtol base 0, else strtod; whitespace; unit → base unit; rint)
//!         ─► parse_real (strtod; NaN refused)
//!         ─► parse_bool (prefixes of true/false/yes/no, on/off from two letters, 1/0)
//!         ─► enum       (case-insensitive)
//!         ─► range      ("… is outside the valid range for parameter …")
//!         ─► check hook (io_max_concurrency: -1 or > 0)
//! ```
//!
//! A name the version does not know (`io_method` on 17, `io_min_workers` on 18) is refused
//! too: PostgreSQL only accepts unknown names with a dot (extension settings).
//!
//! # Sources
//!
//! PostgreSQL 18's rows were read from a PostgreSQL 18.6 server's `pg_settings` (`vartype`,
//! `unit`, `min_val`, `max_val`, `enumvals`), and every message format from its log with
//! such values (see the tests). PostgreSQL 17's rows differ where `REL_17_STABLE`'s
//! `guc_tables.c` differs (`maintenance_work_mem` from 1024 kB, `io_combine_limit` up to 32
//! blocks, no `io_method`, `io_workers` or `io_max_concurrency`); PostgreSQL 19's are 18's
//! plus the adaptive worker pool (`io_min_workers`, `io_max_workers`, 1..32), whose bounds
//! come from the development branch and may still change. `io_method = io_uring` is
//! accepted: whether a build has it is the `liburing` item's question.
//!
//! Not modelled: the configuration file's lexer (PostgreSQL calls an unquoted `10 GB` or
//! `1e10` a syntax error; pageio's reader takes them as values), the start-up checks that
//! combine settings (`min_wal_size` against the WAL segment size, the sum of process
//! slots), and hexadecimal floating-point values.

/// Where a value is converted to: the base unit of an integer setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// No unit: a bare count.
    None,
    /// Kilobytes (`work_mem`).
    Kb,
    /// Megabytes (`max_wal_size`).
    Mb,
    /// 8 kB data blocks (`shared_buffers`).
    Blocks,
    /// 8 kB WAL blocks (`wal_buffers`).
    WalBlocks,
}

impl Unit {
    /// The unit as PostgreSQL prints it in a range message (`8kB` for blocks).
    pub fn name(self) -> Option<&'static str> {
        match self {
            Unit::None => None,
            Unit::Kb => Some("kB"),
            Unit::Mb => Some("MB"),
            Unit::Blocks | Unit::WalBlocks => Some("8kB"),
        }
    }

    /// How many base units one kB is (`guc.c`'s `memory_unit_conversion_table`, with 8 kB
    /// blocks).
    fn per_kb(self) -> f64 {
        match self {
            Unit::None => 1.0,
            Unit::Kb => 1.0,
            Unit::Mb => 1.0 / 1024.0,
            Unit::Blocks | Unit::WalBlocks => 1.0 / 8.0,
        }
    }
}

/// A setting's type and bounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// An integer, with its base unit and inclusive bounds.
    Int {
        /// The base unit.
        unit: Unit,
        /// Least value.
        min: i64,
        /// Greatest value.
        max: i64,
    },
    /// A real number with inclusive bounds.
    Real {
        /// Least value.
        min: f64,
        /// Greatest value.
        max: f64,
    },
    /// `on`/`off` and the other Boolean spellings.
    Bool,
    /// One of these words, any case (the hidden aliases included).
    Enum {
        /// The values PostgreSQL lists in its hint.
        shown: &'static [&'static str],
        /// Aliases it accepts without listing them.
        hidden: &'static [&'static str],
    },
}

/// One row of [`GUCS`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Guc {
    /// The setting's name.
    pub name: &'static str,
    /// The first major version the row holds for.
    pub from: u32,
    /// The last major version the row holds for.
    pub to: u32,
    /// Type and bounds.
    pub kind: Kind,
}

/// `INT_MAX`, the bound of most sizes.
const INT_MAX: i64 = i32::MAX as i64;
/// `MAX_BACKENDS` (2^18 − 1).
const MAX_BACKENDS: i64 = 262_143;
/// `MAX_PARALLEL_WORKER_LIMIT`.
const MAX_PARALLEL_WORKER_LIMIT: i64 = 1024;
/// `MAX_IO_CONCURRENCY`.
const MAX_IO_CONCURRENCY: i64 = 1000;
/// `MAX_IO_WORKERS`.
const MAX_IO_WORKERS: i64 = 32;
/// The newest version advise knows.
const LAST: u32 = 19;

const fn int(name: &'static str, from: u32, to: u32, unit: Unit, min: i64, max: i64) -> Guc {
    Guc {
        name,
        from,
        to,
        kind: Kind::Int { unit, min, max },
    }
}

/// Every setting `advise` reads, with PostgreSQL's type and bounds per version (see the
/// module header for where each comes from).
pub const GUCS: &[Guc] = &[
    int("shared_buffers", 17, LAST, Unit::Blocks, 16, INT_MAX / 2),
    Guc {
        name: "huge_pages",
        from: 17,
        to: LAST,
        kind: Kind::Enum {
            shown: &["off", "on", "try"],
            hidden: &["true", "false", "yes", "no", "1", "0"],
        },
    },
    int("effective_cache_size", 17, LAST, Unit::Blocks, 1, INT_MAX),
    int("work_mem", 17, LAST, Unit::Kb, 64, INT_MAX),
    int("maintenance_work_mem", 17, 17, Unit::Kb, 1024, INT_MAX),
    int("maintenance_work_mem", 18, LAST, Unit::Kb, 64, INT_MAX),
    int("wal_buffers", 17, LAST, Unit::WalBlocks, -1, INT_MAX / 8192),
    int("min_wal_size", 17, LAST, Unit::Mb, 2, INT_MAX),
    int("max_wal_size", 17, LAST, Unit::Mb, 2, INT_MAX),
    Guc {
        name: "checkpoint_completion_target",
        from: 17,
        to: LAST,
        kind: Kind::Real { min: 0.0, max: 1.0 },
    },
    Guc {
        name: "random_page_cost",
        from: 17,
        to: LAST,
        kind: Kind::Real {
            min: 0.0,
            max: f64::MAX,
        },
    },
    int(
        "effective_io_concurrency",
        17,
        LAST,
        Unit::None,
        0,
        MAX_IO_CONCURRENCY,
    ),
    int(
        "maintenance_io_concurrency",
        17,
        LAST,
        Unit::None,
        0,
        MAX_IO_CONCURRENCY,
    ),
    int("io_combine_limit", 17, 17, Unit::Blocks, 1, 32),
    int("io_combine_limit", 18, LAST, Unit::Blocks, 1, 128),
    Guc {
        name: "io_method",
        from: 18,
        to: LAST,
        kind: Kind::Enum {
            shown: &["sync", "worker", "io_uring"],
            hidden: &[],
        },
    },
    int("io_workers", 18, 18, Unit::None, 1, MAX_IO_WORKERS),
    int("io_min_workers", 19, LAST, Unit::None, 1, MAX_IO_WORKERS),
    int("io_max_workers", 19, LAST, Unit::None, 1, MAX_IO_WORKERS),
    int("io_max_concurrency", 18, LAST, Unit::None, -1, 1024),
    int("max_connections", 17, LAST, Unit::None, 1, MAX_BACKENDS),
    int(
        "max_worker_processes",
        17,
        LAST,
        Unit::None,
        0,
        MAX_BACKENDS,
    ),
    int(
        "max_parallel_workers",
        17,
        LAST,
        Unit::None,
        0,
        MAX_PARALLEL_WORKER_LIMIT,
    ),
    int(
        "max_parallel_workers_per_gather",
        17,
        LAST,
        Unit::None,
        0,
        MAX_PARALLEL_WORKER_LIMIT,
    ),
    int(
        "max_parallel_maintenance_workers",
        17,
        LAST,
        Unit::None,
        0,
        MAX_PARALLEL_WORKER_LIMIT,
    ),
    Guc {
        name: "track_io_timing",
        from: 17,
        to: LAST,
        kind: Kind::Bool,
    },
];

/// Why PostgreSQL refuses a value, in its words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The `LOG:` line (`100000 is outside the valid range for parameter …`).
    pub message: String,
    /// The `HINT:` or `DETAIL:` line that follows it, when PostgreSQL gives one.
    pub hint: Option<String>,
}

impl Refusal {
    fn invalid(name: &str, value: &str, hint: Option<&str>) -> Refusal {
        Refusal {
            message: format!("invalid value for parameter \"{name}\": \"{value}\""),
            hint: hint.map(str::to_string),
        }
    }
}

/// The row for `name` in version `pg`, if advise checks it there.
pub fn lookup(name: &str, pg: u32) -> Option<&'static Guc> {
    GUCS.iter()
        .find(|g| g.name.eq_ignore_ascii_case(name) && (g.from..=g.to).contains(&pg))
}

/// Whether `name` is a setting of another version that `pg` does not have, so the server
/// refuses to start on it. `io_workers` is not called unknown to PostgreSQL 19: whether the
/// adaptive pool keeps it is not settled.
pub fn unknown_in(name: &str, pg: u32) -> bool {
    let of_some_version = GUCS.iter().any(|g| g.name.eq_ignore_ascii_case(name));
    of_some_version
        && lookup(name, pg).is_none()
        && !(pg == 19 && name.eq_ignore_ascii_case("io_workers"))
}

/// PostgreSQL's message for a name it does not know, at `file` line `line`.
pub fn unknown_message(name: &str, file: &str, line: usize) -> String {
    format!("unrecognized configuration parameter \"{name}\" in file \"{file}\" line {line}")
}

/// Checks `value` (as written, unquoted) for setting `name` in version `pg` as PostgreSQL
/// does at start-up. `Ok` for a value it takes and for settings advise does not check.
pub fn check(name: &str, value: &str, pg: u32) -> Result<(), Refusal> {
    let Some(guc) = lookup(name, pg) else {
        return Ok(());
    };
    let name = guc.name;
    match guc.kind {
        Kind::Int { unit, min, max } => {
            let v = parse_int(value, unit).map_err(|hint| Refusal::invalid(name, value, hint))?;
            if v < min || v > max {
                let (sp, u) = match unit.name() {
                    Some(u) => (" ", u),
                    None => ("", ""),
                };
                return Err(Refusal {
                    message: format!(
                        "{v}{sp}{u} is outside the valid range for parameter \"{name}\" ({min}{sp}{u} .. {max}{sp}{u})"
                    ),
                    hint: None,
                });
            }
            // check_io_max_concurrency: -1 (automatic) or a positive count.
            if name == "io_max_concurrency" && v == 0 {
                return Err(Refusal {
                    message: format!("invalid value for parameter \"{name}\": {v}"),
                    hint: Some("Only -1 or values bigger than 0 are valid.".into()),
                });
            }
            Ok(())
        }
        Kind::Real { min, max } => {
            let v = parse_real(value).map_err(|hint| Refusal::invalid(name, value, hint))?;
            if v < min || v > max {
                return Err(Refusal {
                    message: format!(
                        "{} is outside the valid range for parameter \"{name}\" ({} .. {})",
                        format_g(v),
                        format_g(min),
                        format_g(max)
                    ),
                    hint: None,
                });
            }
            Ok(())
        }
        Kind::Bool => match parse_bool(value) {
            Some(_) => Ok(()),
            None => Err(Refusal {
                message: format!("parameter \"{name}\" requires a Boolean value"),
                hint: None,
            }),
        },
        Kind::Enum { shown, hidden } => {
            if shown
                .iter()
                .chain(hidden.iter())
                .any(|w| w.eq_ignore_ascii_case(value))
            {
                Ok(())
            } else {
                Err(Refusal::invalid(
                    name,
                    value,
                    Some(&format!("Available values: {}.", shown.join(", "))),
                ))
            }
        }
    }
}

/// The hint PostgreSQL gives for a unit it does not know on a memory setting.
const MEMORY_UNITS_HINT: &str =
    "Valid units for this parameter are \"B\", \"kB\", \"MB\", \"GB\", and \"TB\".";

/// C's `isspace` in the "C" locale.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

/// `strtol(s, &end, 0)` on a 64-bit `long`: the value (`None` on overflow: ERANGE) and the
/// bytes consumed (0 when no number starts `s`).
fn strtol(s: &[u8]) -> (Option<i64>, usize) {
    let mut i = 0;
    while i < s.len() && is_c_space(s[i]) {
        i += 1;
    }
    let negative = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let (radix, start) = if s.get(i) == Some(&b'0')
        && matches!(s.get(i + 1), Some(b'x' | b'X'))
        && s.get(i + 2).is_some_and(u8::is_ascii_hexdigit)
    {
        (16, i + 2)
    } else if s.get(i) == Some(&b'0') {
        (8, i)
    } else {
        (10, i)
    };
    let mut end = start;
    while end < s.len() && (s[end] as char).is_digit(radix) {
        end += 1;
    }
    if end == start {
        return (Some(0), 0);
    }
    let digits = std::str::from_utf8(&s[start..end]).unwrap_or("0");
    let value = i64::from_str_radix(digits, radix).ok().and_then(|v| {
        if negative {
            v.checked_neg()
        } else {
            Some(v)
        }
    });
    (value, end)
}

/// `strtod(s, &end)` for decimal numbers, `inf`/`infinity` and `nan`: the value (`None` on
/// overflow or underflow: ERANGE) and the bytes consumed (0 when no number starts `s`).
fn strtod(s: &[u8]) -> (Option<f64>, usize) {
    let mut i = 0;
    while i < s.len() && is_c_space(s[i]) {
        i += 1;
    }
    let sign_at = i;
    if matches!(s.get(i), Some(b'-' | b'+')) {
        i += 1;
    }
    let negative = s.get(sign_at) == Some(&b'-');
    let rest = &s[i..];
    let starts = |word: &str| {
        rest.len() >= word.len() && rest[..word.len()].eq_ignore_ascii_case(word.as_bytes())
    };
    if starts("infinity") {
        let v = if negative {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        };
        return (Some(v), i + 8);
    }
    if starts("inf") {
        let v = if negative {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        };
        return (Some(v), i + 3);
    }
    if starts("nan") {
        return (Some(f64::NAN), i + 3);
    }
    let mut end = i;
    let mut digits = 0;
    while end < s.len() && s[end].is_ascii_digit() {
        end += 1;
        digits += 1;
    }
    if s.get(end) == Some(&b'.') {
        end += 1;
        while end < s.len() && s[end].is_ascii_digit() {
            end += 1;
            digits += 1;
        }
    }
    if digits == 0 {
        return (Some(0.0), 0);
    }
    if matches!(s.get(end), Some(b'e' | b'E')) {
        let mut e = end + 1;
        if matches!(s.get(e), Some(b'-' | b'+')) {
            e += 1;
        }
        if s.get(e).is_some_and(u8::is_ascii_digit) {
            while e < s.len() && s[e].is_ascii_digit() {
                e += 1;
            }
            end = e;
        }
    }
    let text = std::str::from_utf8(&s[sign_at..end]).unwrap_or("0");
    let value: f64 = text.parse().unwrap_or(0.0);
    let mantissa_nonzero = s[i..end]
        .iter()
        .take_while(|b| !matches!(b, b'e' | b'E'))
        .any(|b| (b'1'..=b'9').contains(b));
    let out_of_range = value.is_infinite() || (value == 0.0 && mantissa_nonzero);
    ((!out_of_range).then_some(value), end)
}

/// `guc.c`'s `parse_int`: `Err(hint)` when PostgreSQL says "invalid value", with the hint
/// it adds, if any.
fn parse_int(value: &str, unit: Unit) -> Result<i64, Option<&'static str>> {
    let s = value.as_bytes();
    let (int, mut end) = strtol(s);
    let mut val = int.map(|v| v as f64);
    if matches!(s.get(end), Some(b'.' | b'e' | b'E')) || int.is_none() {
        let (real, real_end) = strtod(s);
        val = real;
        end = real_end;
    }
    let Some(mut val) = val else {
        return Err(None);
    };
    if end == 0 || val.is_nan() {
        return Err(None);
    }
    while end < s.len() && is_c_space(s[end]) {
        end += 1;
    }
    if end < s.len() {
        if unit == Unit::None {
            return Err(None);
        }
        val = to_base_unit(val, &s[end..], unit).ok_or(Some(MEMORY_UNITS_HINT))?;
    }
    let val = val.round_ties_even();
    if !(i32::MIN as f64..=i32::MAX as f64).contains(&val) {
        return Err(Some("Value exceeds integer range."));
    }
    Ok(val as i64)
}

/// `guc.c`'s `convert_to_base_unit` for memory units: at most three letters, then only
/// whitespace; a fraction is rounded to the next smaller unit.
fn to_base_unit(value: f64, rest: &[u8], unit: Unit) -> Option<f64> {
    let word_len = rest.iter().take(3).take_while(|b| !is_c_space(**b)).count();
    let (word, tail) = rest.split_at(word_len);
    if !tail.iter().all(|b| is_c_space(*b)) {
        return None;
    }
    let per_kb = unit.per_kb();
    // Largest first, as the table: each unit's multiplier and the next smaller one's.
    let table: [(&[u8], f64); 5] = [
        (b"TB", 1024.0 * 1024.0 * 1024.0 * per_kb),
        (b"GB", 1024.0 * 1024.0 * per_kb),
        (b"MB", 1024.0 * per_kb),
        (b"kB", per_kb),
        (b"B", per_kb / 1024.0),
    ];
    let at = table.iter().position(|(w, _)| *w == word)?;
    let mut converted = value * table[at].1;
    if let Some((_, smaller)) = table.get(at + 1) {
        converted = (converted / smaller).round_ties_even() * smaller;
    }
    Some(converted)
}

/// `guc.c`'s `parse_real` for settings without a unit.
fn parse_real(value: &str) -> Result<f64, Option<&'static str>> {
    let s = value.as_bytes();
    let (val, mut end) = strtod(s);
    let Some(val) = val else {
        return Err(None);
    };
    if end == 0 || val.is_nan() {
        return Err(None);
    }
    while end < s.len() && is_c_space(s[end]) {
        end += 1;
    }
    if end < s.len() {
        return Err(None);
    }
    Ok(val)
}

/// PostgreSQL's `parse_bool`: prefixes of `true`, `false`, `yes`, `no`; `on` and `off` from
/// two letters; `1`, `0`; any case.
pub fn parse_bool(value: &str) -> Option<bool> {
    let v = value.to_ascii_lowercase();
    let prefix_of = |word: &str, least: usize| {
        v.len() >= least && v.len() <= word.len() && word.starts_with(v.as_str())
    };
    match v.as_bytes().first()? {
        b't' if prefix_of("true", 1) => Some(true),
        b'f' if prefix_of("false", 1) => Some(false),
        b'y' if prefix_of("yes", 1) => Some(true),
        b'n' if prefix_of("no", 1) => Some(false),
        b'o' if prefix_of("on", 2) => Some(true),
        b'o' if prefix_of("off", 2) => Some(false),
        b'1' if v.len() == 1 => Some(true),
        b'0' if v.len() == 1 => Some(false),
        _ => None,
    }
}

/// C's `%g` as PostgreSQL's `snprintf` prints it: six significant digits, trailing zeros
/// dropped, an exponent below 1e-4 and from 1e6 on; `Infinity` and `-Infinity`.
pub fn format_g(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0" } else { "0" }.into();
    }
    // Rounded to six significant digits first: the exponent is the rounded value's.
    let sci = format!("{v:.5e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let trim = |s: String| {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if !(-4..6).contains(&exp) {
        let m = trim(mantissa.to_string());
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{m}e{sign}{:02}", exp.unsigned_abs())
    } else {
        let decimals = usize::try_from(5 - exp).unwrap_or(0);
        trim(format!("{v:.decimals$}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each value with what PostgreSQL 18.6 logged for it at start-up (`postgres -C name`
    /// with the line in an included file; the FATAL line that follows is "configuration
    /// file … contains errors"), or `None` where it started and printed the value shown in
    /// the comment.
    #[test]
    fn values_are_judged_as_postgresql_18_judges_them() {
        let cases: &[(&str, &str, Option<&str>, Option<&str>)] = &[
            ("effective_io_concurrency", "100000", Some("100000 is outside the valid range for parameter \"effective_io_concurrency\" (0 .. 1000)"), None),
            ("shared_buffers", "-1", Some("-1 8kB is outside the valid range for parameter \"shared_buffers\" (16 8kB .. 1073741823 8kB)"), None),
            ("shared_buffers", "abc", Some("invalid value for parameter \"shared_buffers\": \"abc\""), None),
            // This server was built without liburing and listed "sync, worker"; a build
            // with it lists io_uring too, and advise accepts io_uring (see the header).
            ("io_method", "foo", Some("invalid value for parameter \"io_method\": \"foo\""), Some("Available values: sync, worker, io_uring.")),
            ("shared_buffers", "1kB", Some("0 8kB is outside the valid range for parameter \"shared_buffers\" (16 8kB .. 1073741823 8kB)"), None),
            ("shared_buffers", "10gb", Some("invalid value for parameter \"shared_buffers\": \"10gb\""), Some(MEMORY_UNITS_HINT)),
            ("shared_buffers", "1GBX", Some("invalid value for parameter \"shared_buffers\": \"1GBX\""), Some(MEMORY_UNITS_HINT)),
            ("shared_buffers", "3000000000", Some("invalid value for parameter \"shared_buffers\": \"3000000000\""), Some("Value exceeds integer range.")),
            ("shared_buffers", "8TB", Some("1073741824 8kB is outside the valid range for parameter \"shared_buffers\" (16 8kB .. 1073741823 8kB)"), None),
            ("shared_buffers", "1.5", Some("2 8kB is outside the valid range for parameter \"shared_buffers\" (16 8kB .. 1073741823 8kB)"), None),
            ("random_page_cost", "inf", Some("Infinity is outside the valid range for parameter \"random_page_cost\" (0 .. 1.79769e+308)"), None),
            ("random_page_cost", "-1", Some("-1 is outside the valid range for parameter \"random_page_cost\" (0 .. 1.79769e+308)"), None),
            ("random_page_cost", "nan", Some("invalid value for parameter \"random_page_cost\": \"nan\""), None),
            ("random_page_cost", "1e400", Some("invalid value for parameter \"random_page_cost\": \"1e400\""), None),
            ("checkpoint_completion_target", "1.5", Some("1.5 is outside the valid range for parameter \"checkpoint_completion_target\" (0 .. 1)"), None),
            ("checkpoint_completion_target", "0.5 s", Some("invalid value for parameter \"checkpoint_completion_target\": \"0.5 s\""), None),
            ("track_io_timing", "maybe", Some("parameter \"track_io_timing\" requires a Boolean value"), None),
            ("track_io_timing", "o", Some("parameter \"track_io_timing\" requires a Boolean value"), None),
            ("huge_pages", "sometimes", Some("invalid value for parameter \"huge_pages\": \"sometimes\""), Some("Available values: off, on, try.")),
            ("io_max_concurrency", "0", Some("invalid value for parameter \"io_max_concurrency\": 0"), Some("Only -1 or values bigger than 0 are valid.")),
            ("effective_io_concurrency", "1MB", Some("invalid value for parameter \"effective_io_concurrency\": \"1MB\""), None),
            ("effective_io_concurrency", "", Some("invalid value for parameter \"effective_io_concurrency\": \"\""), None),
            ("wal_buffers", "300000", Some("300000 8kB is outside the valid range for parameter \"wal_buffers\" (-1 8kB .. 262143 8kB)"), None),
            ("maintenance_work_mem", "63kB", Some("63 kB is outside the valid range for parameter \"maintenance_work_mem\" (64 kB .. 2147483647 kB)"), None),
            // Accepted: SHOW gives 16, 16, 16, 2, on, try, on, 262143, 5, 131072, 1073741824 (kB).
            ("shared_buffers", "0x10", None, None),
            ("shared_buffers", "127kB", None, None),
            ("shared_buffers", "128kB", None, None),
            ("effective_io_concurrency", "1.5", None, None),
            ("track_io_timing", "ye", None, None),
            ("huge_pages", "TRY", None, None),
            ("huge_pages", "1", None, None),
            ("max_connections", "262143", None, None),
            ("effective_io_concurrency", " 5 ", None, None),
            ("shared_buffers", "1 GB ", None, None),
            ("work_mem", "1TB", None, None),
            ("min_wal_size", "2", None, None),
        ];
        for (name, value, message, hint) in cases {
            let got = check(name, value, 18);
            match message {
                Some(m) => {
                    let r = got.expect_err(&format!("{name} = {value:?} is refused"));
                    assert_eq!(r.message, *m, "{name} = {value:?}");
                    assert_eq!(r.hint.as_deref(), *hint, "{name} = {value:?}");
                }
                None => assert_eq!(got, Ok(()), "{name} = {value:?}"),
            }
        }
    }

    #[test]
    fn every_checked_setting_has_a_row_for_each_version_it_exists_in() {
        for pg in crate::advise::PG_VERSIONS {
            for g in GUCS {
                let rows = GUCS
                    .iter()
                    .filter(|r| r.name == g.name && (r.from..=r.to).contains(&pg))
                    .count();
                assert!(rows <= 1, "{} has {rows} rows for {pg}", g.name);
            }
        }
        // Where versions differ.
        assert!(check("maintenance_work_mem", "512kB", 17).is_err());
        assert_eq!(check("maintenance_work_mem", "512kB", 18), Ok(()));
        assert_eq!(
            check("io_combine_limit", "64", 17).unwrap_err().message,
            "64 8kB is outside the valid range for parameter \"io_combine_limit\" (1 8kB .. 32 8kB)"
        );
        assert_eq!(check("io_combine_limit", "1MB", 18), Ok(()));
        assert!(unknown_in("io_method", 17));
        assert!(!unknown_in("io_method", 18));
        assert!(unknown_in("io_min_workers", 18));
        assert!(!unknown_in("io_min_workers", 19));
        assert!(!unknown_in("io_workers", 19));
        assert!(!unknown_in("max_connections", 17));
        assert!(!unknown_in("application_name", 18));
    }

    #[test]
    fn g_formats_as_c_does() {
        for (v, s) in [
            (0.0, "0"),
            (1.0, "1"),
            (1.5, "1.5"),
            (0.9, "0.9"),
            (100000.0, "100000"),
            (1e6, "1e+06"),
            (f64::MAX, "1.79769e+308"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-1.0, "-1"),
            (123456.7, "123457"),
            (f64::INFINITY, "Infinity"),
        ] {
            assert_eq!(format_g(v), s, "{v}");
        }
    }
}
