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
use super::predicate::{float8_cmp, parse_float8};

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

    /// Parses a literal of `kind` as the type's input function would (integers, floats with
    /// `NaN`/`Infinity`, numeric, `'YYYY-MM-DD'`, `'YYYY-MM-DD HH:MM:SS[.ffffff][+00]'`,
    /// `'quoted text'`, `true`/`false`).
    pub fn parse(kind: TypeKind, literal: &str) -> Result<Value, String> {
        let unquoted = unquote(literal.trim());
        let int = |min: i64, max: i64, name: &str| -> Result<i64, String> {
            let v: i64 = unquoted
                .trim()
                .parse()
                .map_err(|_| format!("invalid input syntax for type {name}: \"{unquoted}\""))?;
            if v < min || v > max {
                return Err(format!(
                    "value \"{unquoted}\" is out of range for type {name}"
                ));
            }
            Ok(v)
        };
        Ok(match kind {
            TypeKind::Int2 => {
                Value::Int2(int(i16::MIN as i64, i16::MAX as i64, "smallint")? as i16)
            }
            TypeKind::Int4 => Value::Int4(int(i32::MIN as i64, i32::MAX as i64, "integer")? as i32),
            TypeKind::Int8 => Value::Int8(int(i64::MIN, i64::MAX, "bigint")?),
            TypeKind::Float8 => Value::Float8(parse_float8(&unquoted)?),
            TypeKind::Float4 => {
                let v = parse_float8(&unquoted)?;
                if v.is_finite() && (v as f32).is_infinite() {
                    return Err(format!("\"{unquoted}\" is out of range for type real"));
                }
                Value::Float4(v as f32)
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

fn parse_date(s: &str) -> Result<i32, String> {
    let invalid = || format!("invalid input syntax for type date: \"{s}\" (expected YYYY-MM-DD)");
    match s.trim().to_ascii_lowercase().as_str() {
        "infinity" => return Ok(i32::MAX),
        "-infinity" => return Ok(i32::MIN),
        _ => {}
    }
    let parts: Vec<&str> = s.trim().split('-').collect();
    let [y, m, d] = parts[..] else {
        return Err(invalid());
    };
    let (y, m, d): (i64, i64, i64) = (
        y.parse().map_err(|_| invalid())?,
        m.parse().map_err(|_| invalid())?,
        d.parse().map_err(|_| invalid())?,
    );
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || y < 1 {
        return Err(invalid());
    }
    let jd = date2j(y, m, d);
    if j2date(jd) != (y, m as u32, d as u32) {
        return Err(format!("date/time field value out of range: \"{s}\""));
    }
    Ok((jd - POSTGRES_EPOCH_JDATE) as i32)
}

fn parse_timestamp(s: &str, with_zone: bool) -> Result<i64, String> {
    let t = s.trim();
    match t.to_ascii_lowercase().as_str() {
        "infinity" => return Ok(i64::MAX),
        "-infinity" => return Ok(i64::MIN),
        _ => {}
    }
    let invalid = || {
        format!("invalid input syntax for type timestamp: \"{s}\" (expected 'YYYY-MM-DD HH:MM:SS[.ffffff]'{})",
            if with_zone { ", in UTC, optionally with +00" } else { "" })
    };
    let t = if with_zone {
        t.strip_suffix("+00")
            .or_else(|| t.strip_suffix("Z"))
            .unwrap_or(t)
    } else {
        t
    };
    let (date, time) = t.split_once([' ', 'T']).unwrap_or((t, "00:00:00"));
    let days = parse_date(date).map_err(|_| invalid())? as i64;
    let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
    let parts: Vec<&str> = hms.split(':').collect();
    let [h, m, sec] = parts[..] else {
        return Err(invalid());
    };
    let (h, m, sec): (i64, i64, i64) = (
        h.parse().map_err(|_| invalid())?,
        m.parse().map_err(|_| invalid())?,
        sec.parse().map_err(|_| invalid())?,
    );
    if !(0..24).contains(&h)
        || !(0..60).contains(&m)
        || !(0..60).contains(&sec)
        || frac.len() > 6
        || !frac.chars().all(|c| c.is_ascii_digit())
    {
        return Err(invalid());
    }
    let usec: i64 = if frac.is_empty() {
        0
    } else {
        format!("{frac:0<6}").parse().map_err(|_| invalid())?
    };
    Ok(days * USECS_PER_DAY + ((h * 60 + m) * 60 + sec) * 1_000_000 + usec)
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
    }
}
