//! Typed values of the columns a query filters or aggregates, read and printed as
//! PostgreSQL 18 reads and prints them.
//!
//! # Problem
//!
//! A deformed attribute is bytes; a predicate compares values and an aggregate adds them,
//! and both must answer exactly what PostgreSQL answers: `sum(numeric)` to the last digit,
//! `min(text)` in byte order, a float printed with PostgreSQL's shortest-exact rules, a
//! timestamp in `DateStyle = ISO`. A value this module does not know is never guessed: its
//! type is [`TypeKind::Other`], which can be counted and measured but not compared.
//!
//! # Mechanism
//!
//! ```text
//!  pg_type oid ─► TypeKind (attlen checked: an int4 column must have attlen 4)
//!  RawDatum + TypeKind ─► Value   (varlenas detoasted by the caller first)
//!      int2/int4/int8/float4/float8/bool/date/timestamp(tz): little-endian fixed bytes
//!      numeric: NumericData: short (0x8000) or long header, NaN/±Infinity (0xC000/D000/F000),
//!               base-10000 digits ─► an exact decimal of any length (see `numeric`)
//!      text/varchar/bpchar/bytea: the payload bytes
//!  Value ─► text: float as float4out/float8out (see `float_text`: shortest digits strictly
//!           inside the rounding interval, ties to even; %e outside 1e-4 ≤ |v| < 1e15, 1e6
//!           for float4),
//!           date/timestamp ISO (BC suffix, ±infinity), timestamptz in UTC with "+00",
//!           bytea as \x hex, bool as t/f
//! ```
//!
//! # Worked example
//!
//! `numeric '-12.50'` is stored with a short header: `0xA081` = short (0x8000), negative
//! (0x2000), dscale 2 (bits 7..12), weight 0; digits `[12, 5000]` → mantissa
//! −(12·10⁴ + 5000)·10^(2−4) = −1250 with scale 2, printed `-12.50`.

use std::cmp::Ordering;

use super::float_text::{float4_text, float8_text};
pub use super::numeric::{BigNumeric, Numeric};
use super::predicate::parse_float8;
use crate::page::float8_cmp;

/// The types this module reads, by `pg_type` oid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TypeKind {
    /// `smallint`.
    Int2,
    /// `integer`.
    Int4,
    /// `bigint`.
    Int8,
    /// `real`.
    Float4,
    /// `double precision`.
    Float8,
    /// `numeric`.
    Numeric,
    /// `boolean`.
    Bool,
    /// `date`.
    Date,
    /// `timestamp without time zone`.
    Timestamp,
    /// `timestamp with time zone`.
    TimestampTz,
    /// `text`.
    Text,
    /// `character varying`.
    Varchar,
    /// `character` (blank-padded).
    Bpchar,
    /// `bytea`.
    Bytea,
    /// Anything else: walked, counted and measured, never read.
    Other,
}

impl TypeKind {
    /// The kind of `pg_type` oid `type_oid` stored with `attlen`; a known oid whose length
    /// does not match (a damaged catalog) is `Other`, so its bytes are never misread.
    pub fn of(type_oid: u32, attlen: i16) -> TypeKind {
        let (kind, want) = match type_oid {
            21 => (TypeKind::Int2, 2),
            23 => (TypeKind::Int4, 4),
            20 => (TypeKind::Int8, 8),
            700 => (TypeKind::Float4, 4),
            701 => (TypeKind::Float8, 8),
            1700 => (TypeKind::Numeric, -1),
            16 => (TypeKind::Bool, 1),
            1082 => (TypeKind::Date, 4),
            1114 => (TypeKind::Timestamp, 8),
            1184 => (TypeKind::TimestampTz, 8),
            25 => (TypeKind::Text, -1),
            1043 => (TypeKind::Varchar, -1),
            1042 => (TypeKind::Bpchar, -1),
            17 => (TypeKind::Bytea, -1),
            _ => return TypeKind::Other,
        };
        if attlen == want {
            kind
        } else {
            TypeKind::Other
        }
    }

    /// PostgreSQL's name of the type (as `format_type` prints it, short form).
    pub fn sql_name(self) -> &'static str {
        match self {
            TypeKind::Int2 => "smallint",
            TypeKind::Int4 => "integer",
            TypeKind::Int8 => "bigint",
            TypeKind::Float4 => "real",
            TypeKind::Float8 => "double precision",
            TypeKind::Numeric => "numeric",
            TypeKind::Bool => "boolean",
            TypeKind::Date => "date",
            TypeKind::Timestamp => "timestamp without time zone",
            TypeKind::TimestampTz => "timestamp with time zone",
            TypeKind::Text => "text",
            TypeKind::Varchar => "character varying",
            TypeKind::Bpchar => "character",
            TypeKind::Bytea => "bytea",
            TypeKind::Other => "other",
        }
    }

    /// True for the varlena kinds whose value needs detoasting to be read.
    pub fn is_varlena(self) -> bool {
        matches!(
            self,
            TypeKind::Numeric
                | TypeKind::Text
                | TypeKind::Varchar
                | TypeKind::Bpchar
                | TypeKind::Bytea
        )
    }
}

/// A typed value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `smallint`.
    Int2(i16),
    /// `integer`.
    Int4(i32),
    /// `bigint`.
    Int8(i64),
    /// `real`.
    Float4(f32),
    /// `double precision`.
    Float8(f64),
    /// `numeric`.
    Numeric(Numeric),
    /// `boolean`.
    Bool(bool),
    /// `date`: days since 2000-01-01 (`i32::MIN`/`MAX`: ∓infinity).
    Date(i32),
    /// `timestamp`: microseconds since 2000-01-01 00:00 (`i64::MIN`/`MAX`: ∓infinity).
    Timestamp(i64),
    /// `timestamptz`: microseconds since 2000-01-01 00:00 UTC.
    TimestampTz(i64),
    /// `text` or `varchar`: the bytes (the database encoding's).
    Text(Vec<u8>),
    /// `character`: the bytes, padding included.
    Bpchar(Vec<u8>),
    /// `bytea`.
    Bytea(Vec<u8>),
}

fn fixed<const N: usize>(b: &[u8]) -> Result<[u8; N], String> {
    b.try_into()
        .map_err(|_| format!("{}-byte value where {N} bytes are expected", b.len()))
}

impl Value {
    /// Reads a fixed-width value of `kind` from exactly its bytes.
    pub fn from_fixed(kind: TypeKind, b: &[u8]) -> Result<Value, String> {
        Ok(match kind {
            TypeKind::Int2 => Value::Int2(i16::from_le_bytes(fixed(b)?)),
            TypeKind::Int4 => Value::Int4(i32::from_le_bytes(fixed(b)?)),
            TypeKind::Int8 => Value::Int8(i64::from_le_bytes(fixed(b)?)),
            TypeKind::Float4 => Value::Float4(f32::from_le_bytes(fixed(b)?)),
            TypeKind::Float8 => Value::Float8(f64::from_le_bytes(fixed(b)?)),
            TypeKind::Bool => Value::Bool(fixed::<1>(b)?[0] != 0),
            TypeKind::Date => Value::Date(i32::from_le_bytes(fixed(b)?)),
            TypeKind::Timestamp => Value::Timestamp(i64::from_le_bytes(fixed(b)?)),
            TypeKind::TimestampTz => Value::TimestampTz(i64::from_le_bytes(fixed(b)?)),
            other => return Err(format!("{} is not a fixed-width type", other.sql_name())),
        })
    }

    /// Reads a varlena value of `kind` from its detoasted payload.
    pub fn from_varlena(kind: TypeKind, payload: &[u8]) -> Result<Value, String> {
        Ok(match kind {
            TypeKind::Numeric => Value::Numeric(Numeric::decode(payload)?),
            TypeKind::Text | TypeKind::Varchar => Value::Text(payload.to_vec()),
            TypeKind::Bpchar => Value::Bpchar(payload.to_vec()),
            TypeKind::Bytea => Value::Bytea(payload.to_vec()),
            other => return Err(format!("{} is not a varlena type", other.sql_name())),
        })
    }

    /// PostgreSQL's order for two values of the same type (`None` across types): floats
    /// with NaN last, text and bytea in byte order (the "C" collation), bpchar ignoring
    /// trailing blanks (`bpcharcmp`).
    pub fn pg_cmp(&self, other: &Value) -> Option<Ordering> {
        use Value::*;
        Some(match (self, other) {
            (Int2(a), Int2(b)) => a.cmp(b),
            (Int4(a), Int4(b)) => a.cmp(b),
            (Int8(a), Int8(b)) => a.cmp(b),
            (Float4(a), Float4(b)) => float8_cmp(*a as f64, *b as f64),
            (Float8(a), Float8(b)) => float8_cmp(*a, *b),
            (Numeric(a), Numeric(b)) => a.pg_cmp(b),
            (Bool(a), Bool(b)) => a.cmp(b),
            (Date(a), Date(b)) => a.cmp(b),
            (Timestamp(a), Timestamp(b)) | (TimestampTz(a), TimestampTz(b)) => a.cmp(b),
            (Text(a), Text(b)) | (Bytea(a), Bytea(b)) => a.cmp(b),
            (Bpchar(a), Bpchar(b)) => trim_blanks(a).cmp(trim_blanks(b)),
            _ => return None,
        })
    }

    /// The value as psql prints it (`DateStyle = ISO, MDY`, UTC, `bytea_output = hex`).
    pub fn to_pg_text(&self) -> String {
        match self {
            Value::Int2(v) => v.to_string(),
            Value::Int4(v) => v.to_string(),
            Value::Int8(v) => v.to_string(),
            Value::Float4(v) => float4_text(*v),
            Value::Float8(v) => float8_text(*v),
            Value::Numeric(n) => n.to_string(),
            Value::Bool(b) => if *b { "t" } else { "f" }.into(),
            Value::Date(d) => date_text(*d),
            Value::Timestamp(t) => timestamp_text(*t, false),
            Value::TimestampTz(t) => timestamp_text(*t, true),
            Value::Text(b) | Value::Bpchar(b) => String::from_utf8_lossy(b).into_owned(),
            Value::Bytea(b) => {
                let mut s = String::with_capacity(2 + 2 * b.len());
                s.push_str("\\x");
                for byte in b {
                    s.push_str(&format!("{byte:02x}"));
                }
                s
            }
        }
    }

    /// Parses a literal of `kind` as the type's input function would (integers as
    /// `pg_strtoint` reads them — `+5`, `1_000`, `0x1F` —, floats with `NaN`/`Infinity`,
    /// numeric, dates and timestamps in the forms of `parse_datetime_fields` — BC,
    /// `infinity`, offsets —, `'quoted text'`, `true`/`false`).
    pub fn parse(kind: TypeKind, literal: &str) -> Result<Value, String> {
        let unquoted = unquote(literal.trim());
        let int = |min: i64, max: i64, name: &str| -> Result<i64, String> {
            let v = parse_pg_int(&unquoted)
                .ok_or_else(|| format!("invalid input syntax for type {name}: \"{unquoted}\""))?;
            if v < min as i128 || v > max as i128 {
                return Err(format!(
                    "value \"{unquoted}\" is out of range for type {name}"
                ));
            }
            Ok(v as i64)
        };
        Ok(match kind {
            TypeKind::Int2 => {
                Value::Int2(int(i16::MIN as i64, i16::MAX as i64, "smallint")? as i16)
            }
            TypeKind::Int4 => Value::Int4(int(i32::MIN as i64, i32::MAX as i64, "integer")? as i32),
            TypeKind::Int8 => Value::Int8(int(i64::MIN, i64::MAX, "bigint")?),
            TypeKind::Float8 => Value::Float8(parse_float8(&unquoted)?),
            TypeKind::Float4 => {
                // float4in reads the digits with strtof: rounded once to a real, never
                // through a double (which can round differently), and with its own range.
                let v = parse_float8(&unquoted)
                    .map_err(|e| e.replace("type double precision", "type real"))?;
                if !v.is_finite() {
                    Value::Float4(v as f32)
                } else {
                    let text = unquoted.trim();
                    let out_of_range = || format!("\"{text}\" is out of range for type real");
                    let r: f32 = text.parse().map_err(|_| out_of_range())?;
                    if r.is_infinite() || (r == 0.0 && v != 0.0) {
                        return Err(out_of_range());
                    }
                    Value::Float4(r)
                }
            }
            TypeKind::Numeric => Value::Numeric(Numeric::parse(&unquoted)?),
            TypeKind::Bool => match unquoted.to_ascii_lowercase().as_str() {
                "t" | "true" | "yes" | "on" | "1" => Value::Bool(true),
                "f" | "false" | "no" | "off" | "0" => Value::Bool(false),
                _ => {
                    return Err(format!(
                        "invalid input syntax for type boolean: \"{unquoted}\""
                    ))
                }
            },
            TypeKind::Date => Value::Date(parse_date(&unquoted)?),
            TypeKind::Timestamp => Value::Timestamp(parse_timestamp(&unquoted, false)?),
            TypeKind::TimestampTz => Value::TimestampTz(parse_timestamp(&unquoted, true)?),
            TypeKind::Text | TypeKind::Varchar => Value::Text(unquoted.into_bytes()),
            TypeKind::Bpchar => Value::Bpchar(unquoted.into_bytes()),
            TypeKind::Bytea => {
                let hex = unquoted.strip_prefix("\\x").ok_or_else(|| {
                    format!("bytea literal \"{unquoted}\" must be in hex: '\\x0a1b'")
                })?;
                if !hex.len().is_multiple_of(2) {
                    return Err(format!(
                        "invalid hexadecimal data: odd number of digits in \"{unquoted}\""
                    ));
                }
                let bytes = (0..hex.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&hex[i..i + 2], 16))
                    .collect::<Result<Vec<u8>, _>>()
                    .map_err(|_| format!("invalid hexadecimal digit in \"{unquoted}\""))?;
                Value::Bytea(bytes)
            }
            TypeKind::Other => return Err("values of this type cannot be compared".into()),
        })
    }
}

/// An integer as PostgreSQL's `pg_strtoint16/32/64` read it: blanks around, an optional
/// sign, then decimal digits or a `0x`/`0o`/`0b` prefix and its digits, single underscores
/// between digits. Magnitudes beyond 2^100 saturate (every integer type's range check
/// refuses them); `None` for any other text.
fn parse_pg_int(text: &str) -> Option<i128> {
    const SATURATED: i128 = 1 << 100;
    let t = text.trim_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (negative, body) = match t.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let lower = body.to_ascii_lowercase();
    let (radix, digits) = match lower.get(..2) {
        Some("0x") => (16, &lower[2..]),
        Some("0o") => (8, &lower[2..]),
        Some("0b") => (2, &lower[2..]),
        _ => (10, lower.as_str()),
    };
    if digits.is_empty()
        || digits.starts_with('_')
        || digits.ends_with('_')
        || digits.contains("__")
    {
        return None;
    }
    let mut v: i128 = 0;
    for c in digits.chars().filter(|&c| c != '_') {
        let d = c.to_digit(radix)? as i128;
        v = (v * radix as i128 + d).min(SATURATED);
    }
    Some(if negative { -v } else { v })
}

/// A literal without its single quotes (`''` inside is one quote).
fn unquote(s: &str) -> String {
    match s.strip_prefix('\'').and_then(|t| t.strip_suffix('\'')) {
        Some(inner) => inner.replace("''", "'"),
        None => s.to_string(),
    }
}

fn trim_blanks(b: &[u8]) -> &[u8] {
    let end = b.iter().rposition(|&c| c != b' ').map_or(0, |i| i + 1);
    &b[..end]
}

/// Julian day of 2000-01-01 (`POSTGRES_EPOCH_JDATE`).
const POSTGRES_EPOCH_JDATE: i64 = 2_451_545;
/// Microseconds per day.
const USECS_PER_DAY: i64 = 86_400_000_000;

/// PostgreSQL's `j2date`: Julian day → (year, month, day); year ≤ 0 is BC (year 0 = 1 BC).
fn j2date(jd: i64) -> (i64, u32, u32) {
    let mut julian = jd + 32044;
    let mut quad = julian.div_euclid(146_097);
    let extra = (julian - quad * 146_097) * 4 + 3;
    julian += 60 + quad * 3 + extra.div_euclid(146_097);
    quad = julian.div_euclid(1461);
    julian -= quad * 1461;
    let mut y = julian * 4 / 1461;
    julian = if y != 0 {
        (julian + 305) % 365
    } else {
        (julian + 306) % 366
    } + 123;
    y += quad * 4;
    let year = y - 4800;
    let quad = julian * 2141 / 65536;
    let day = julian - 7834 * quad / 256;
    let month = (quad + 10) % 12 + 1;
    (year, month as u32, day as u32)
}

/// PostgreSQL's `date2j`.
fn date2j(mut y: i64, mut m: i64, d: i64) -> i64 {
    if m > 2 {
        m += 1;
        y += 4800;
    } else {
        m += 13;
        y += 4799;
    }
    let century = y.div_euclid(100);
    let mut julian = y * 365 - 32167;
    julian += y.div_euclid(4) - century + century.div_euclid(4);
    julian + 7834 * m / 256 + d
}

fn ymd_text(year: i64, month: u32, day: u32) -> (String, bool) {
    let bc = year <= 0;
    let shown = if bc { 1 - year } else { year };
    (format!("{shown:04}-{month:02}-{day:02}"), bc)
}

fn date_text(days: i32) -> String {
    match days {
        i32::MIN => "-infinity".into(),
        i32::MAX => "infinity".into(),
        d => {
            let (y, m, dd) = j2date(d as i64 + POSTGRES_EPOCH_JDATE);
            let (s, bc) = ymd_text(y, m, dd);
            if bc {
                format!("{s} BC")
            } else {
                s
            }
        }
    }
}

fn timestamp_text(usecs: i64, with_zone: bool) -> String {
    match usecs {
        i64::MIN => "-infinity".into(),
        i64::MAX => "infinity".into(),
        t => {
            let days = t.div_euclid(USECS_PER_DAY);
            let time = t.rem_euclid(USECS_PER_DAY);
            let (y, m, d) = j2date(days + POSTGRES_EPOCH_JDATE);
            let (date, bc) = ymd_text(y, m, d);
            let secs = time / 1_000_000;
            let frac = time % 1_000_000;
            let mut s = format!(
                "{date} {:02}:{:02}:{:02}",
                secs / 3600,
                secs / 60 % 60,
                secs % 60
            );
            if frac != 0 {
                s.push_str(format!(".{frac:06}").trim_end_matches('0'));
            }
            if with_zone {
                s.push_str("+00");
            }
            if bc {
                s.push_str(" BC");
            }
            s
        }
    }
}

/// Julian day of 5874897-12-31, the last `date` (`DATE_END_JULIAN` - 1).
const LAST_DATE_JDATE: i64 = 2_147_483_493;
/// Julian day of 294277-01-01, the first day past the last `timestamp` (`TIMESTAMP_END_JULIAN`).
const TIMESTAMP_END_JDATE: i64 = 109_203_528;
/// Largest time zone displacement PostgreSQL accepts: 15:59:59 (`MAX_TZDISP_HOUR` 15).
const MAX_TZ_DISPLACEMENT_SECS: i64 = 15 * 3600 + 59 * 60 + 59;

/// The fields of a date/time literal in the forms pageio reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct DateTimeFields {
    /// The year as written (1 and up; 0 is out of range).
    year: i64,
    /// Before Christ (`BC`): year 1 BC is astronomical year 0.
    bc: bool,
    month: i64,
    day: i64,
    /// Microseconds since midnight (up to 24:00:00 and a leap second 60).
    time_usecs: i64,
    /// Seconds east of UTC, when the literal names an offset.
    offset_secs: Option<i64>,
}

/// What a date/time literal says: a value or one of the infinities.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DateTimeLiteral {
    Infinity,
    NegInfinity,
    /// `epoch`: 1970-01-01 00:00:00 UTC.
    Epoch,
    Fields(DateTimeFields),
}

/// Reads the date/time forms pageio accepts, a subset of PostgreSQL's `ParseDateTime` /
/// `DecodeDateTime`: `infinity`, `-infinity`, `epoch`, or `Y-MM-DD` (a year of any number of
/// digits) optionally followed by ` ` or `T` and `HH:MM[:SS[.ffffff]]` (hour 24 only as
/// 24:00:00, second 60 as a leap second rolling over), a zone `Z`, `UTC`, `GMT`,
/// `±HH`, `±HH:MM[:SS]` or `±HHMM`, and `BC` or `AD` after the date or at the end. `None` for
/// any other text; field values are checked by the caller.
fn parse_datetime_fields(text: &str) -> Option<DateTimeLiteral> {
    let t = text.trim().to_ascii_lowercase();
    match t.as_str() {
        "infinity" | "+infinity" => return Some(DateTimeLiteral::Infinity),
        "-infinity" => return Some(DateTimeLiteral::NegInfinity),
        "epoch" => return Some(DateTimeLiteral::Epoch),
        _ => {}
    }
    let mut rest = t.as_str();
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    // The date.
    let date_end = rest.find([' ', 't']).unwrap_or(rest.len());
    let (date, after) = rest.split_at(date_end);
    let mut parts = date.split('-');
    let (y, m, d) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some()
        || !digits(y)
        || !digits(m)
        || !digits(d)
        || m.len() > 2
        || d.len() > 2
    {
        return None;
    }
    // A year of more than 9 digits is out of every range; saturate rather than overflow.
    let year: i64 = if y.len() > 9 {
        1_000_000_000
    } else {
        y.parse().ok()?
    };
    let (month, day): (i64, i64) = (m.parse().ok()?, d.parse().ok()?);
    rest = after;
    let take_era = |rest: &mut &str| -> Option<bool> {
        let trimmed = rest.trim_start();
        for (word, is_bc) in [("bc", true), ("ad", false)] {
            if let Some(r) = trimmed.strip_prefix(word) {
                if r.is_empty() || r.starts_with(' ') {
                    *rest = r;
                    return Some(is_bc);
                }
            }
        }
        None
    };
    let mut bc = take_era(&mut rest);
    let mut time_usecs = 0;
    let mut offset_secs = None;
    let trimmed = rest.trim_start_matches([' ', 't']);
    if trimmed.len() != rest.len() && !trimmed.is_empty() && trimmed.as_bytes()[0].is_ascii_digit()
    {
        // HH:MM[:SS[.f]]
        let end = trimmed
            .find(|c: char| !(c.is_ascii_digit() || c == ':' || c == '.'))
            .unwrap_or(trimmed.len());
        let (time, after) = trimmed.split_at(end);
        let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
        let f: Vec<&str> = hms.split(':').collect();
        if !(2..=3).contains(&f.len()) || f.iter().any(|x| !digits(x) || x.len() > 2) {
            return None;
        }
        if !frac.is_empty() && !digits(frac) {
            return None;
        }
        let (h, mi): (i64, i64) = (f[0].parse().ok()?, f[1].parse().ok()?);
        let sec: i64 = f.get(2).map_or(Some(0), |x| x.parse().ok())?;
        if h > 24
            || mi > 59
            || sec > 60
            || (h == 24 && (mi != 0 || sec != 0 || frac.bytes().any(|b| b != b'0')))
        {
            return None;
        }
        // The fraction is read as a double and rounded to the nearest microsecond, ties to
        // even (`ParseFractionalSecond`: rint(strtod(".f") * 1e6)).
        let usec = if frac.is_empty() {
            0
        } else {
            let f: f64 = format!("0.{frac}").parse().ok()?;
            (f * 1e6).round_ties_even() as i64
        };
        time_usecs = ((h * 60 + mi) * 60 + sec) * 1_000_000 + usec;
        rest = after;
        let (offset, after) = take_zone(rest)?;
        offset_secs = offset;
        rest = after;
    }
    if bc.is_none() {
        bc = take_era(&mut rest);
    }
    if !rest.trim().is_empty() {
        return None;
    }
    Some(DateTimeLiteral::Fields(DateTimeFields {
        year,
        bc: bc == Some(true),
        month,
        day,
        time_usecs,
        offset_secs,
    }))
}

/// The zone after a time, if any: `Z`, `UTC`, `GMT` (offset 0), or `±HH`, `±HH:MM[:SS]` or
/// `±HHMM`, as seconds east of UTC, with the text after it; `None` for a malformed offset.
fn take_zone(rest: &str) -> Option<(Option<i64>, &str)> {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let z = rest.trim_start();
    if let Some(r) = ["z", "utc", "gmt"].iter().find_map(|w| {
        z.strip_prefix(w)
            .filter(|r| r.is_empty() || r.starts_with(' '))
    }) {
        return Some((Some(0), r));
    } else if let Some(sign) =
        z.strip_prefix(['+', '-'])
            .map(|_| if z.starts_with('-') { -1 } else { 1 })
    {
        let body = &z[1..];
        let end = body
            .find(|c: char| !(c.is_ascii_digit() || c == ':'))
            .unwrap_or(body.len());
        let (zone, after) = body.split_at(end);
        let f: Vec<&str> = zone.split(':').collect();
        let secs = match f[..] {
            [hhmm] if digits(hhmm) && hhmm.len() == 4 => {
                hhmm[..2].parse::<i64>().ok()? * 3600 + hhmm[2..].parse::<i64>().ok()? * 60
            }
            [hh] if digits(hh) && hh.len() <= 2 => hh.parse::<i64>().ok()? * 3600,
            [hh, mm] if digits(hh) && digits(mm) && hh.len() <= 2 && mm.len() == 2 => {
                hh.parse::<i64>().ok()? * 3600 + mm.parse::<i64>().ok()? * 60
            }
            [hh, mm, ss] if [hh, mm, ss].iter().all(|x| digits(x) && x.len() <= 2) => {
                hh.parse::<i64>().ok()? * 3600
                    + mm.parse::<i64>().ok()? * 60
                    + ss.parse::<i64>().ok()?
            }
            _ => return None,
        };
        return Some((Some(sign * secs), after));
    }
    Some((None, rest))
}

/// The Julian day of checked fields, or PostgreSQL's error for `type_name`.
fn checked_julian(f: &DateTimeFields, text: &str) -> Result<i64, String> {
    // Year 0 does not exist (1 BC is written 0001 BC).
    if f.year == 0 || !(1..=12).contains(&f.month) || !(1..=31).contains(&f.day) {
        return Err(format!("date/time field value out of range: \"{text}\""));
    }
    if f.year > 10_000_000 {
        return Err(format!("date out of range: \"{text}\""));
    }
    let year = if f.bc { 1 - f.year } else { f.year };
    let jd = date2j(year, f.month, f.day);
    if j2date(jd) != (year, f.month as u32, f.day as u32) {
        return Err(format!("date/time field value out of range: \"{text}\""));
    }
    Ok(jd)
}

const DATETIME_FORMS: &str = "pageio reads 'YYYY-MM-DD[ HH:MM[:SS[.ffffff]]][+HH[:MM]][ BC]', 'infinity', '-infinity' and 'epoch'";

/// A `date` literal as `date_in` reads it (the forms of [`parse_datetime_fields`]; a time
/// and zone are read and dropped, as PostgreSQL drops them): days since 2000-01-01, or
/// `i32::MIN`/`i32::MAX` for ∓infinity.
fn parse_date(s: &str) -> Result<i32, String> {
    let fields = match parse_datetime_fields(s) {
        None => {
            return Err(format!(
                "invalid input syntax for type date: \"{s}\" ({DATETIME_FORMS})"
            ))
        }
        Some(DateTimeLiteral::Infinity) => return Ok(i32::MAX),
        Some(DateTimeLiteral::NegInfinity) => return Ok(i32::MIN),
        Some(DateTimeLiteral::Epoch) => {
            return Ok((date2j(1970, 1, 1) - POSTGRES_EPOCH_JDATE) as i32)
        }
        Some(DateTimeLiteral::Fields(f)) => f,
    };
    let jd = checked_julian(&fields, s)?;
    if !(0..=LAST_DATE_JDATE).contains(&jd) {
        return Err(format!("date out of range: \"{s}\""));
    }
    Ok((jd - POSTGRES_EPOCH_JDATE) as i32)
}

/// A `timestamp` (`with_zone`: `timestamptz`) literal as `timestamp_in`/`timestamptz_in`
/// read it: microseconds since 2000-01-01 00:00 (`i64::MIN`/`MAX`: ∓infinity). A
/// timestamptz is converted to UTC by its offset (none: UTC, the `TimeZone` pageio prints
/// in); a timestamp drops an offset, as PostgreSQL does.
fn parse_timestamp(s: &str, with_zone: bool) -> Result<i64, String> {
    let type_name = if with_zone {
        "timestamp with time zone"
    } else {
        "timestamp"
    };
    let fields = match parse_datetime_fields(s) {
        None => {
            return Err(format!(
                "invalid input syntax for type {type_name}: \"{s}\" ({DATETIME_FORMS})"
            ))
        }
        Some(DateTimeLiteral::Infinity) => return Ok(i64::MAX),
        Some(DateTimeLiteral::NegInfinity) => return Ok(i64::MIN),
        Some(DateTimeLiteral::Epoch) => {
            return Ok((date2j(1970, 1, 1) - POSTGRES_EPOCH_JDATE) * USECS_PER_DAY)
        }
        Some(DateTimeLiteral::Fields(f)) => f,
    };
    let jd = checked_julian(&fields, s)?;
    let offset = match fields.offset_secs {
        Some(o) if o.abs() > MAX_TZ_DISPLACEMENT_SECS => {
            return Err(format!("time zone displacement out of range: \"{s}\""))
        }
        Some(o) if with_zone => o,
        _ => 0,
    };
    let out_of_range = || format!("timestamp out of range: \"{s}\"");
    if !(0..TIMESTAMP_END_JDATE).contains(&jd) {
        return Err(out_of_range());
    }
    let usecs =
        (jd - POSTGRES_EPOCH_JDATE) * USECS_PER_DAY + fields.time_usecs - offset * 1_000_000;
    // The first and last representable instants (IS_VALID_TIMESTAMP).
    let min = -POSTGRES_EPOCH_JDATE * USECS_PER_DAY;
    let end = (TIMESTAMP_END_JDATE - POSTGRES_EPOCH_JDATE) * USECS_PER_DAY;
    if usecs < min || usecs >= end {
        return Err(out_of_range());
    }
    Ok(usecs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_as_postgresql_prints_them() {
        let f8 = |v: f64| Value::Float8(v).to_pg_text();
        assert_eq!(f8(1.5), "1.5");
        assert_eq!(f8(100.0), "100");
        assert_eq!(f8(1e15), "1e+15");
        assert_eq!(f8(123456789012345.0), "123456789012345");
        assert_eq!(f8(0.0001), "0.0001");
        assert_eq!(f8(0.00001234), "1.234e-05");
        assert_eq!(f8(-0.1), "-0.1");
        assert_eq!(f8(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(f8(f64::NAN), "NaN");
        assert_eq!(f8(f64::NEG_INFINITY), "-Infinity");
        assert_eq!(f8(-0.0), "-0");
        let f4 = |v: f32| Value::Float4(v).to_pg_text();
        assert_eq!(f4(1.1), "1.1");
        assert_eq!(f4(1e6), "1e+06");
        assert_eq!(f4(123456.0), "123456");
    }

    #[test]
    fn dates_and_timestamps_print_iso() {
        assert_eq!(Value::Date(0).to_pg_text(), "2000-01-01");
        assert_eq!(Value::Date(-1).to_pg_text(), "1999-12-31");
        assert_eq!(
            Value::Date(parse_date("2024-02-29").unwrap()).to_pg_text(),
            "2024-02-29"
        );
        assert_eq!(
            Value::Date(parse_date("0001-01-01").unwrap() - 1).to_pg_text(),
            "0001-12-31 BC"
        );
        assert_eq!(Value::Date(i32::MAX).to_pg_text(), "infinity");
        assert!(parse_date("2023-02-29").is_err());
        let t = parse_timestamp("2024-03-05 06:07:08.5", false).unwrap();
        assert_eq!(Value::Timestamp(t).to_pg_text(), "2024-03-05 06:07:08.5");
        assert_eq!(
            Value::TimestampTz(t).to_pg_text(),
            "2024-03-05 06:07:08.5+00"
        );
        assert_eq!(
            Value::Timestamp(-1).to_pg_text(),
            "1999-12-31 23:59:59.999999"
        );
    }

    #[test]
    fn date_and_time_literals_cover_postgresqls_range() {
        // PostgreSQL 18 (TimeZone UTC):
        //   SELECT '0044-03-15 BC'::date - '2000-01-01'::date                → -746117
        //   SELECT '4714-11-24 BC'::date - '2000-01-01'::date                → -2451545
        //   SELECT '5874897-12-31'::date - '2000-01-01'::date                → 2145031948
        //   SELECT '4714-11-23 BC'::date      → ERROR: date out of range: "4714-11-23 BC"
        //   SELECT '5874898-01-01'::date      → ERROR: date out of range: "5874898-01-01"
        //   SELECT '0000-01-01'::date → ERROR: date/time field value out of range: "0000-01-01"
        //   SELECT '2020-02-30'::date → ERROR: date/time field value out of range: "2020-02-30"
        //   SELECT '2020-01-01 05:00+02'::date → 2020-01-01;  'epoch'::date → 1970-01-01
        assert_eq!(parse_date("0044-03-15 BC").unwrap(), -746_117);
        assert_eq!(parse_date("0044-03-15 bc").unwrap(), -746_117);
        assert_eq!(Value::Date(-746_117).to_pg_text(), "0044-03-15 BC");
        assert_eq!(parse_date("4714-11-24 BC").unwrap(), -2_451_545);
        assert_eq!(parse_date("5874897-12-31").unwrap(), 2_145_031_948);
        assert_eq!(
            parse_date("4714-11-23 BC").unwrap_err(),
            "date out of range: \"4714-11-23 BC\""
        );
        assert_eq!(
            parse_date("5874898-01-01").unwrap_err(),
            "date out of range: \"5874898-01-01\""
        );
        assert_eq!(
            parse_date("0000-01-01").unwrap_err(),
            "date/time field value out of range: \"0000-01-01\""
        );
        assert_eq!(
            parse_date("2020-02-30").unwrap_err(),
            "date/time field value out of range: \"2020-02-30\""
        );
        assert_eq!(parse_date("2020-01-01 05:00+02").unwrap(), 7305);
        assert_eq!(
            Value::Date(parse_date("epoch").unwrap()).to_pg_text(),
            "1970-01-01"
        );
        assert_eq!(parse_date("Infinity").unwrap(), i32::MAX);
        assert_eq!(parse_date("-infinity").unwrap(), i32::MIN);
        assert!(parse_date("today")
            .unwrap_err()
            .starts_with("invalid input syntax for type date: \"today\""));
        // PostgreSQL 18 (TimeZone UTC):
        //   extract(epoch from '2020-01-01 05:00+02'::timestamptz)        → 1577847600
        //   extract(epoch from '2020-01-01 05:00:00.5-03:30'::timestamptz) → 1577867400.5
        //   extract(epoch from '0044-03-15 12:00+01 BC'::timestamptz)      → -63517784400
        //   '2020-01-01 05:00+02'::timestamp → 2020-01-01 05:00:00 (the offset dropped)
        //   '2020-01-01 24:00'::timestamptz  → 2020-01-02 00:00:00+00
        //   '2020-01-01 12:00:00.1234565'::timestamp → …00.123456; '….1234575' → …00.123458
        //   '2020-01-01 05:00+16'  → ERROR: time zone displacement out of range
        //   '294277-01-01'::timestamp → ERROR: timestamp out of range: "294277-01-01"
        //   '4714-11-24 00:00:00+01 BC'::timestamptz → ERROR: timestamp out of range
        let unix = |t: i64| t / 1_000_000 + 946_684_800;
        assert_eq!(
            unix(parse_timestamp("2020-01-01 05:00+02", true).unwrap()),
            1_577_847_600
        );
        let t = parse_timestamp("2020-01-01 05:00:00.5-03:30", true).unwrap();
        assert_eq!((unix(t), t % 1_000_000), (1_577_867_400, 500_000));
        assert_eq!(
            unix(parse_timestamp("0044-03-15 12:00+01 BC", true).unwrap()),
            -63_517_784_400
        );
        assert_eq!(
            Value::Timestamp(parse_timestamp("2020-01-01 05:00+02", false).unwrap()).to_pg_text(),
            "2020-01-01 05:00:00"
        );
        assert_eq!(
            Value::TimestampTz(parse_timestamp("2020-01-01 24:00", true).unwrap()).to_pg_text(),
            "2020-01-02 00:00:00+00"
        );
        assert_eq!(
            Value::Timestamp(parse_timestamp("0044-03-15 BC 12:00:00", false).unwrap())
                .to_pg_text(),
            "0044-03-15 12:00:00 BC"
        );
        assert_eq!(
            Value::Timestamp(parse_timestamp("2020-01-01 12:00:00.1234565", false).unwrap())
                .to_pg_text(),
            "2020-01-01 12:00:00.123456"
        );
        assert_eq!(
            Value::Timestamp(parse_timestamp("2020-01-01 12:00:00.1234575", false).unwrap())
                .to_pg_text(),
            "2020-01-01 12:00:00.123458"
        );
        assert_eq!(
            parse_timestamp("2020-01-01 05:00+16", true).unwrap_err(),
            "time zone displacement out of range: \"2020-01-01 05:00+16\""
        );
        assert_eq!(
            parse_timestamp("294277-01-01", false).unwrap_err(),
            "timestamp out of range: \"294277-01-01\""
        );
        assert!(parse_timestamp("4714-11-24 00:00:00+01 BC", true)
            .unwrap_err()
            .starts_with("timestamp out of range"));
        assert_eq!(parse_timestamp("infinity", true).unwrap(), i64::MAX);
    }

    #[test]
    fn text_orders_by_bytes_and_bpchar_ignores_trailing_blanks() {
        let t = |s: &str| Value::Text(s.as_bytes().to_vec());
        assert_eq!(t("B").pg_cmp(&t("a")), Some(Ordering::Less));
        let b = |s: &str| Value::Bpchar(s.as_bytes().to_vec());
        assert_eq!(b("ab  ").pg_cmp(&b("ab")), Some(Ordering::Equal));
        assert_eq!(Value::Bytea(vec![0xab]).to_pg_text(), "\\xab");
        assert_eq!(Value::parse(TypeKind::Text, "'it''s'").unwrap(), t("it's"));
        assert!(Value::parse(TypeKind::Int4, "3000000000")
            .unwrap_err()
            .contains("out of range"));
        // PostgreSQL 18: SELECT 'abc'::real → ERROR: invalid input syntax for type real:
        // "abc"; '1e-50'::real → ERROR: "1e-50" is out of range for type real; '1e-40'::real
        // → 1e-40 (a denormal); ' 1.5 '::real → 1.5.
        assert_eq!(
            Value::parse(TypeKind::Float4, "'abc'").unwrap_err(),
            "invalid input syntax for type real: \"abc\""
        );
        assert_eq!(
            Value::parse(TypeKind::Float4, "'1e-50'").unwrap_err(),
            "\"1e-50\" is out of range for type real"
        );
        assert_eq!(
            Value::parse(TypeKind::Float4, "'1e-40'").unwrap(),
            Value::Float4(1e-40)
        );
        assert_eq!(
            Value::parse(TypeKind::Float4, "' 1.5 '").unwrap(),
            Value::Float4(1.5)
        );
        // Rounded once: 1.00000005960464477539062500001 is just above the midpoint of 1 and
        // the next real, so strtof rounds up; through a double it would round to 1.
        // PostgreSQL 18: SELECT '1.00000005960464477539062500001'::real::float8 → 1.0000001192092896.
        assert_eq!(
            Value::parse(TypeKind::Float4, "'1.00000005960464477539062500001'").unwrap(),
            Value::Float4(f32::from_bits(1.0f32.to_bits() + 1))
        );
        // PostgreSQL 18: SELECT '1_000'::int4, ' +5 '::int4, '0x1F'::int4 → 1000 | 5 | 31;
        // '99999999999999999999'::int8 → ERROR: value "99999999999999999999" is out of range
        // for type bigint; '1__0'::int4 → ERROR: invalid input syntax for type integer.
        assert_eq!(
            Value::parse(TypeKind::Int4, "'1_000'").unwrap(),
            Value::Int4(1000)
        );
        assert_eq!(
            Value::parse(TypeKind::Int4, "' +5 '").unwrap(),
            Value::Int4(5)
        );
        assert_eq!(
            Value::parse(TypeKind::Int4, "'0x1F'").unwrap(),
            Value::Int4(31)
        );
        assert_eq!(
            Value::parse(TypeKind::Int8, "'99999999999999999999'").unwrap_err(),
            "value \"99999999999999999999\" is out of range for type bigint"
        );
        assert_eq!(
            Value::parse(TypeKind::Int4, "'1__0'").unwrap_err(),
            "invalid input syntax for type integer: \"1__0\""
        );
    }
}
