//! `--where` and `--select` read as PostgreSQL's parser reads them, and each literal typed
//! and compared as PostgreSQL's operator resolution compares it.
//!
//! # Problem
//!
//! The answer of `r = 0.1` over a `real` column holding 0.1 depends on more than the
//! digits: PostgreSQL types the unquoted `0.1` as `numeric`, finds no `real = numeric`
//! operator, and picks `real = double precision` (`float48eq`), so the column's
//! 0.100000001490116… is compared with the double 0.1: no row. `r = '0.1'` types the quoted
//! literal `unknown`, coerces it to the column's type, and compares two `real`s: one row.
//! `i2 = 70000` is `int2 = int4` and simply false, while `i2 = '70000'` is an error
//! (`value "70000" is out of range for type smallint`). Getting this wrong is a silent wrong
//! count.
//!
//! # Mechanism
//!
//! ```text
//!  --where text ─► sql::tokenize ─► parse_where: COL op LIT | LIT op COL |
//!                                   COL BETWEEN LIT AND LIT, joined by AND, one column
//!  literal type (make_const): 123 → integer, 3000000000 → bigint, 1e19 / 5.5 / 1e0 →
//!                             numeric, '…' → unknown (coerced to the column's type)
//!  comparison type (the operator PostgreSQL resolves):
//!     int2/4/8 col  vs integer literal  → by value (int24eq, int48lt, …)
//!     int2/4/8 col  vs numeric literal  → numeric (the column is cast)
//!     float4/8 col  vs any number       → float8 (float48eq; numeric → float8 rounds)
//!     numeric col   vs any number       → numeric
//!     any col       vs '…'              → the column's type (its input function)
//!  fold ─► each comparison rewritten exactly as a bound in the column's own type, or as
//!          "every non-NULL row" / "no row":
//!     int4 >= 5.5 ⇒ >= 6     i2 < 40000 ⇒ (no bound)     i2 = 70000 ⇒ no row
//!     real = 0.1 ⇒ no row (no real widens to 0.1)   real >= 0.1 ⇒ >= 0.1::real
//! ```
//!
//! Because every bound ends up in the column's type, the heap recheck, the btree walk and
//! the partial-index proofs all compare values of one type, and an index scan's bounds are
//! exactly the sequential scan's.
//!
//! # Worked example
//!
//! `--where 'r between 0.1 and 0.3'` on a `real` column: `r >= 0.1` and `r <= 0.3`, each
//! `real` vs `numeric` → float8. The smallest real whose double is ≥ 0.1 is 0.1::real
//! (0.100000001…), the largest whose double is ≤ 0.3 is 0.29999998::real (0.3::real is
//! 0.300000011…, above the double 0.3). Over 0.1, 0.2, 0.3: two rows, as PostgreSQL says.

use super::aggregate::{AggFunc, SelectItem};
use super::predicate::parse_float8;
use super::value::{Numeric, TypeKind, Value};
use crate::config::Term;
use crate::sql::{quote_identifier, tokenize, tokenize_spanned, Token};

/// The condition, as messages name it (`--where` on pageio's command line).
const WHERE: Term = Term::Where;
/// The aggregate list, as messages name it (`--select` on pageio's command line).
const SELECT: Term = Term::Select;

/// A comparison operator of `--where`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    /// `=`.
    Eq,
    /// `<>` or `!=`.
    Ne,
    /// `<`.
    Lt,
    /// `<=`.
    Le,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
}

impl CmpOp {
    fn from_token(op: &str) -> Option<CmpOp> {
        Some(match op {
            "=" => CmpOp::Eq,
            "<>" | "!=" => CmpOp::Ne,
            "<" => CmpOp::Lt,
            "<=" => CmpOp::Le,
            ">" => CmpOp::Gt,
            ">=" => CmpOp::Ge,
            _ => return None,
        })
    }

    /// The operator with its operands swapped (`5 < a` is `a > 5`).
    fn commuted(self) -> CmpOp {
        match self {
            CmpOp::Lt => CmpOp::Gt,
            CmpOp::Le => CmpOp::Ge,
            CmpOp::Gt => CmpOp::Lt,
            CmpOp::Ge => CmpOp::Le,
            other => other,
        }
    }

    /// The SQL spelling.
    pub fn sql(self) -> &'static str {
        match self {
            CmpOp::Eq => "=",
            CmpOp::Ne => "<>",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }
}

/// A literal of `--where`, typed as PostgreSQL's parser types constants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Literal {
    /// An unquoted number, sign folded in (`-5`, `5.5`, `1e0`).
    Number(String),
    /// A quoted literal (type `unknown`): its value after quotes and escapes.
    Quoted(String),
    /// A typed literal, `date '…'`, `timestamp '…'`, `timestamptz '…'` (or `'…'::type`):
    /// of that type, compared with the column as PostgreSQL's cross-type operators compare
    /// (a date is promoted to a timestamp at midnight; timestamps with and without zone
    /// meet in UTC, the `TimeZone` pageio assumes).
    Typed(TypeKind, String),
}

/// One comparison of the column with a literal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    /// The operator, the column on its left.
    pub op: CmpOp,
    /// The literal on its right.
    pub literal: Literal,
}

/// A parsed `--where`: comparisons of one column, all of which must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WhereClause {
    /// The column's name, as the lexer read it (folded unless quoted).
    pub column: String,
    /// The comparisons, `AND`ed (`BETWEEN lo AND hi` is `>= lo` and `<= hi`).
    pub conditions: Vec<Condition>,
}

const WHERE_EXPECTED: &str = "expected 'COLUMN between LO and HI' or 'COLUMN OP VALUE' (OP: =, <>, !=, <, <=, >, >=), several joined by AND on the same column; text, dates and timestamps in single quotes ('2024-01-31', 'it''s')";

/// Parses a `--where` predicate (see the module documentation for what it accepts).
pub fn parse_where(text: &str) -> Result<WhereClause, String> {
    let tokens = tokenize(text).map_err(|e| format!("in {WHERE} \"{text}\": {e}"))?;
    let mut p = Parser {
        tokens: &tokens,
        at: 0,
        text,
    };
    let mut column: Option<String> = None;
    let mut conditions = Vec::new();
    loop {
        let (name, mut conds) = p.comparison()?;
        match &column {
            Some(c) if *c != name => {
                return Err(format!(
                    "in {WHERE} \"{text}\": the comparisons are on columns {} and {}; pageio filters on one column: keep the comparisons of one of them",
                    quote_identifier(c),
                    quote_identifier(&name)
                ))
            }
            _ => column = Some(name),
        }
        conditions.append(&mut conds);
        match p.next() {
            None => break,
            Some(t) if t.is_keyword("and") => continue,
            Some(t) if t.is_keyword("or") => {
                return Err(format!(
                    "in {WHERE} \"{text}\": OR is not supported; pageio scans for one range of one column ({WHERE_EXPECTED})"
                ))
            }
            Some(t) => return Err(p.unexpected(Some(t))),
        }
    }
    Ok(WhereClause {
        column: column.unwrap_or_default(),
        conditions,
    })
}

struct Parser<'t> {
    tokens: &'t [Token],
    at: usize,
    text: &'t str,
}

enum Operand {
    Column(String),
    Literal(Literal),
}

impl<'t> Parser<'t> {
    fn next(&mut self) -> Option<&'t Token> {
        let t = self.tokens.get(self.at);
        self.at += 1;
        t
    }

    fn peek(&self) -> Option<&'t Token> {
        self.tokens.get(self.at)
    }

    fn unexpected(&self, t: Option<&Token>) -> String {
        match t {
            Some(t) => format!(
                "cannot parse {WHERE} \"{}\": syntax error at {}: {WHERE_EXPECTED}",
                self.text,
                t.describe()
            ),
            None => format!(
                "cannot parse {WHERE} \"{}\": it ends too early: {WHERE_EXPECTED}",
                self.text
            ),
        }
    }

    /// A column name or a literal (a number with its signs, or a quoted string).
    fn operand(&mut self) -> Result<Operand, String> {
        let mut negative = false;
        let mut signed = false;
        loop {
            match self.peek() {
                Some(Token::Op(o)) if o == "-" || o == "+" => {
                    negative ^= o == "-";
                    signed = true;
                    self.at += 1;
                }
                _ => break,
            }
        }
        let t = self.next();
        match t {
            Some(Token::Number(n)) => Ok(Operand::Literal(Literal::Number(if negative {
                format!("-{n}")
            } else {
                n.clone()
            }))),
            Some(Token::Str(s)) if !signed => {
                if matches!(self.peek(), Some(Token::Op(o)) if o == "::") {
                    self.at += 1;
                    let kind = self.type_name()?;
                    return Ok(Operand::Literal(Literal::Typed(kind, s.clone())));
                }
                Ok(Operand::Literal(Literal::Quoted(s.clone())))
            }
            Some(t @ Token::Ident { name, quoted }) if !signed => {
                if !quoted && name == "null" {
                    return Err(format!(
                        "in {WHERE} \"{}\": a comparison with NULL is never true (PostgreSQL returns no row); pageio compares with constants only: drop the {WHERE} clause or compare with a value",
                        self.text
                    ));
                }
                if !quoted && ["true", "false"].contains(&name.as_str()) {
                    return Err(format!(
                        "in {WHERE} \"{}\": {name} is a boolean, and pageio compares no boolean columns",
                        self.text
                    ));
                }
                let typed_next = match self.peek() {
                    Some(Token::Str(_)) => true,
                    Some(t) => {
                        name == "timestamp" && (t.is_keyword("with") || t.is_keyword("without"))
                    }
                    None => false,
                };
                if !quoted && typed_next {
                    self.at -= 1;
                    let kind = self.type_name()?;
                    return match self.next() {
                        Some(Token::Str(lit)) => {
                            Ok(Operand::Literal(Literal::Typed(kind, lit.clone())))
                        }
                        other => Err(self.unexpected(other)),
                    };
                }
                if matches!(self.peek(), Some(Token::Dot) | Some(Token::LParen)) {
                    return Err(format!(
                        "in {WHERE} \"{}\": {} is followed by {}: pageio compares a column of the table, named alone (no table prefix, function or cast), with a constant",
                        self.text,
                        t.describe(),
                        self.peek().map(Token::describe).unwrap_or_default()
                    ));
                }
                Ok(Operand::Column(name.clone()))
            }
            other => Err(self.unexpected(other)),
        }
    }

    /// The type of a typed literal: `date`, `timestamp [with[out] time zone]`,
    /// `timestamptz`; any other type is refused, saying what to write instead.
    fn type_name(&mut self) -> Result<TypeKind, String> {
        let name = match self.next() {
            Some(Token::Ident {
                name,
                quoted: false,
            }) => name.clone(),
            other => return Err(self.unexpected(other)),
        };
        match name.as_str() {
            "date" => Ok(TypeKind::Date),
            "timestamptz" => Ok(TypeKind::TimestampTz),
            "timestamp" => {
                let zone = match self.peek() {
                    Some(t) if t.is_keyword("with") => Some(TypeKind::TimestampTz),
                    Some(t) if t.is_keyword("without") => Some(TypeKind::Timestamp),
                    _ => None,
                };
                let Some(kind) = zone else {
                    return Ok(TypeKind::Timestamp);
                };
                self.at += 1;
                for word in ["time", "zone"] {
                    match self.next() {
                        Some(t) if t.is_keyword(word) => {}
                        other => return Err(self.unexpected(other)),
                    }
                }
                Ok(kind)
            }
            other => Err(format!(
                "in {WHERE} \"{}\": typed literals of type {other} are not read (only date, timestamp and timestamptz): write the literal in single quotes alone, and it takes the column's type as in PostgreSQL",
                self.text
            )),
        }
    }

    /// A literal operand.
    fn literal(&mut self) -> Result<Literal, String> {
        match self.operand()? {
            Operand::Literal(l) => {
                if let Some(Token::Op(o)) = self.peek() {
                    if o == "::" {
                        return Err(format!(
                            "in {WHERE} \"{}\": casts (::) are not read: write the literal in single quotes and it takes the column's type, as in PostgreSQL",
                            self.text
                        ));
                    }
                }
                Ok(l)
            }
            Operand::Column(c) => Err(format!(
                "in {WHERE} \"{}\": {} is a name where a constant belongs; pageio compares a column with constants (text, dates and timestamps in single quotes)",
                self.text,
                quote_identifier(&c)
            )),
        }
    }

    /// One comparison: the column's name and its conditions.
    fn comparison(&mut self) -> Result<(String, Vec<Condition>), String> {
        let left = self.operand()?;
        let op_token = self.next();
        let keyword = |kw: &str| op_token.is_some_and(|t| t.is_keyword(kw));
        if keyword("between") || keyword("not") {
            let Operand::Column(column) = left else {
                return Err(format!(
                    "in {WHERE} \"{}\": BETWEEN must follow the column's name",
                    self.text
                ));
            };
            if keyword("not") {
                return Err(format!(
                    "in {WHERE} \"{}\": NOT is not supported; pageio scans for one range of one column ({WHERE_EXPECTED})",
                    self.text
                ));
            }
            if self.peek().is_some_and(|t| t.is_keyword("symmetric")) {
                return Err(format!(
                    "in {WHERE} \"{}\": BETWEEN SYMMETRIC is not supported: write the smaller bound first and drop SYMMETRIC",
                    self.text
                ));
            }
            if self.peek().is_some_and(|t| t.is_keyword("asymmetric")) {
                self.at += 1;
            }
            let lo = self.literal()?;
            match self.next() {
                Some(t) if t.is_keyword("and") => {}
                other => return Err(self.unexpected(other)),
            }
            let hi = self.literal()?;
            return Ok((
                column,
                vec![
                    Condition {
                        op: CmpOp::Ge,
                        literal: lo,
                    },
                    Condition {
                        op: CmpOp::Le,
                        literal: hi,
                    },
                ],
            ));
        }
        let op = match op_token {
            Some(Token::Op(o)) => CmpOp::from_token(o).ok_or_else(|| {
                format!(
                    "in {WHERE} \"{}\": operator {o} is not supported: pageio compares with =, <>, !=, <, <=, >, >= and BETWEEN",
                    self.text
                )
            })?,
            other => return Err(self.unexpected(other)),
        };
        let right = self.operand()?;
        if let Some(Token::Op(o)) = self.peek() {
            if o == "::" {
                return Err(format!(
                    "in {WHERE} \"{}\": casts (::) are not read: write the literal in single quotes and it takes the column's type, as in PostgreSQL",
                    self.text
                ));
            }
        }
        match (left, right) {
            (Operand::Column(c), Operand::Literal(l)) => Ok((c, vec![Condition { op, literal: l }])),
            (Operand::Literal(l), Operand::Column(c)) => Ok((
                c,
                vec![Condition {
                    op: op.commuted(),
                    literal: l,
                }],
            )),
            (Operand::Column(a), Operand::Column(b)) => Err(format!(
                "in {WHERE} \"{}\": {} {} {} compares two columns; pageio compares a column with a constant (text, dates and timestamps in single quotes)",
                self.text,
                quote_identifier(&a),
                op.sql(),
                quote_identifier(&b)
            )),
            (Operand::Literal(_), Operand::Literal(_)) => Err(format!(
                "in {WHERE} \"{}\": both sides are constants; name a column on one side",
                self.text
            )),
        }
    }
}

/// Parses a select list: comma-separated `count(*)`, `count(col)`, `sum(col)`, `avg(col)`,
/// `min(col)`, `max(col)`, `sum(octet_length(col))` (function names in any case, column
/// names folded or quoted as PostgreSQL reads them).
pub fn parse_select(list: &str) -> Result<Vec<SelectItem>, String> {
    let expected = "expected count(*), count(col), sum(col), avg(col), min(col), max(col) or sum(octet_length(col)), comma-separated";
    let spanned = tokenize_spanned(list).map_err(|e| format!("in {SELECT} \"{list}\": {e}"))?;
    let mut items = Vec::new();
    for part in spanned.split(|(t, _)| *t == Token::Comma) {
        // The item as written, for the output's `expr`.
        let expr = match (part.first(), part.last()) {
            (Some((_, a)), Some((_, b))) => list[a.start..b.end].to_string(),
            _ => String::new(),
        };
        let part: Vec<Token> = part.iter().map(|(t, _)| t.clone()).collect();
        let bad = || {
            if part.is_empty() {
                format!("cannot parse \"{list}\" as {SELECT}: an item is empty; {expected}")
            } else {
                format!("cannot parse \"{expr}\" in {SELECT}: {expected}")
            }
        };
        let column_at = |i: usize| -> Result<String, String> {
            match part.get(i) {
                Some(Token::Ident { name, .. }) => Ok(name.clone()),
                _ => Err(bad()),
            }
        };
        let func = match part.first() {
            Some(Token::Ident {
                name,
                quoted: false,
            }) => name.as_str(),
            _ => return Err(bad()),
        };
        if part.get(1) != Some(&Token::LParen) || part.last() != Some(&Token::RParen) {
            return Err(bad());
        }
        let (func, column) = match (func, part.len()) {
            ("count", 4) if part[2] == Token::Op("*".into()) => (AggFunc::Count, None),
            ("count", 4) => (AggFunc::Count, Some(column_at(2)?)),
            ("sum", 4) => (AggFunc::Sum, Some(column_at(2)?)),
            ("sum", 7)
                if part[2].is_keyword("octet_length")
                    && part[3] == Token::LParen
                    && part[5] == Token::RParen =>
            {
                (AggFunc::SumOctetLength, Some(column_at(4)?))
            }
            ("avg", 4) => (AggFunc::Avg, Some(column_at(2)?)),
            ("min", 4) => (AggFunc::Min, Some(column_at(2)?)),
            ("max", 4) => (AggFunc::Max, Some(column_at(2)?)),
            _ => return Err(bad()),
        };
        items.push(SelectItem { expr, func, column });
    }
    Ok(items)
}

/// What one comparison leaves of a column's values, in the column's own type.
#[derive(Debug, Clone, PartialEq)]
pub enum Folded {
    /// `column op value`, `value` of the column's type.
    Bound(CmpOp, Value),
    /// Every non-NULL value (`i2 < 40000`).
    All,
    /// No value (`i2 = 70000`, `r = 0.1` on a real column).
    Nothing,
}

/// An unquoted number as an exact decimal: `±digits × 10^exp`, and the display scale
/// PostgreSQL's `numeric_in` gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Decimal {
    negative: bool,
    /// Significant digits, no leading zeros (empty for zero).
    digits: String,
    /// Power of ten of the last digit.
    exp: i64,
    /// Digits after the point as written (`numeric_in`'s dscale).
    dscale: i64,
}

/// Largest number of digits before the point of a numeric (`NUMERIC_WEIGHT_MAX` base-10000
/// digits).
const NUMERIC_MAX_INT_DIGITS: i64 = 131_072;
/// Largest display scale of a numeric (`NUMERIC_DSCALE_MAX`).
const NUMERIC_MAX_DSCALE: i64 = 16_383;

impl Decimal {
    /// Reads `[+-]digits[.digits][e[+-]digits]`; `None` for anything else.
    fn parse(text: &str) -> Option<Decimal> {
        let t = text.trim();
        let (negative, body) = match t.strip_prefix('-') {
            Some(b) => (true, b),
            None => (false, t.strip_prefix('+').unwrap_or(t)),
        };
        let (mantissa, exponent) = match body.find(['e', 'E']) {
            Some(i) => (&body[..i], Some(&body[i + 1..])),
            None => (body, None),
        };
        let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        if (int.is_empty() && frac.is_empty())
            || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
        {
            return None;
        }
        let given_exp: i64 = match exponent {
            None => 0,
            Some(e) => {
                let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
                if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                // Beyond any numeric's range whatever the digits: saturate, the range
                // check below reports it.
                e.parse::<i64>()
                    .unwrap_or(if e.starts_with('-') {
                        -(1 << 40)
                    } else {
                        1 << 40
                    })
                    .clamp(-(1 << 40), 1 << 40)
            }
        };
        let all: String = format!("{int}{frac}");
        let trimmed = all.trim_start_matches('0');
        let stripped = trimmed.trim_end_matches('0');
        let trailing = (trimmed.len() - stripped.len()) as i64;
        let frac_len = frac.len() as i64;
        Some(Decimal {
            negative: negative && !stripped.is_empty(),
            digits: stripped.to_string(),
            exp: given_exp - frac_len + trailing,
            dscale: (frac_len - given_exp).max(0),
        })
    }

    /// Digits before the point.
    fn int_digits(&self) -> i64 {
        if self.digits.is_empty() {
            0
        } else {
            (self.digits.len() as i64 + self.exp).max(0)
        }
    }

    /// PostgreSQL's range check of `numeric_in` (`value overflows numeric format`).
    fn check_numeric_range(&self) -> Result<(), String> {
        if self.int_digits() > NUMERIC_MAX_INT_DIGITS || self.dscale > NUMERIC_MAX_DSCALE {
            return Err("value overflows numeric format".into());
        }
        Ok(())
    }

    /// The value as `numeric_out` prints it: plain digits with `dscale` digits after the
    /// point. Only after [`Decimal::check_numeric_range`], which bounds its length.
    fn plain_text(&self) -> String {
        let mut s = String::new();
        if self.negative {
            s.push('-');
        }
        let int_digits = self.int_digits() as usize;
        if int_digits == 0 {
            s.push('0');
        } else {
            let have = self.digits.len().min(int_digits);
            s.push_str(&self.digits[..have]);
            s.push_str(&"0".repeat(int_digits - have));
        }
        if self.dscale > 0 {
            s.push('.');
            // Fraction digits: position k (1-based after the point) has power -k.
            let first_power = self.exp + self.digits.len() as i64 - 1;
            for k in 1..=self.dscale {
                let power = -k;
                let idx = first_power - power;
                let d = if (0..self.digits.len() as i64).contains(&idx) {
                    self.digits.as_bytes()[idx as usize] as char
                } else {
                    '0'
                };
                s.push(d);
            }
        }
        s
    }

    /// The value's floor and ceiling as integers, saturated to ±2^100 (beyond every
    /// integer column), and whether it is an integer.
    fn floor_ceil(&self) -> (i128, i128, bool) {
        const SATURATED: i128 = 1 << 100;
        if self.digits.is_empty() {
            return (0, 0, true);
        }
        if self.int_digits() > 30 {
            let v = if self.negative { -SATURATED } else { SATURATED };
            return (v, v, true);
        }
        let int_digits = self.int_digits() as usize;
        let have = self.digits.len().min(int_digits);
        let mut int: i128 = 0;
        for b in self.digits[..have].bytes() {
            int = int * 10 + (b - b'0') as i128;
        }
        for _ in have..int_digits {
            int *= 10;
        }
        let integral = self.exp >= 0;
        if self.negative {
            let v = -int;
            if integral {
                (v, v, true)
            } else {
                (v - 1, v, false)
            }
        } else if integral {
            (int, int, true)
        } else {
            (int, int + 1, false)
        }
    }

    /// The type PostgreSQL's parser gives the literal (`make_const`).
    fn literal_type(&self, text: &str) -> &'static str {
        let integer_syntax = !text.contains(['.', 'e', 'E']);
        if !integer_syntax {
            return "numeric";
        }
        let (v, _, _) = self.floor_ceil();
        if i32::try_from(v).is_ok() {
            "integer"
        } else if i64::try_from(v).is_ok() {
            "bigint"
        } else {
            "numeric"
        }
    }
}

/// The literal's value as float8, as PostgreSQL casts it (`int8` → `float8` rounds to
/// nearest; `numeric` → `float8` reads the numeric's text with `float8in`, out of range an
/// error).
fn number_as_float8(d: &Decimal, text: &str) -> Result<f64, String> {
    if d.literal_type(text) == "numeric" {
        d.check_numeric_range()?;
        parse_float8(&d.plain_text())
    } else {
        let (v, _, _) = d.floor_ceil();
        Ok(v as f64)
    }
}

/// The next float4 above `x` (toward +Infinity); `f32::next_up` without the newer Rust.
fn f32_next_up(x: f32) -> f32 {
    if x.is_nan() || x == f32::INFINITY {
        return x;
    }
    if x == 0.0 {
        return f32::from_bits(1);
    }
    let bits = x.to_bits();
    f32::from_bits(if x > 0.0 { bits + 1 } else { bits - 1 })
}

/// The next float4 below `x` (toward −Infinity).
fn f32_next_down(x: f32) -> f32 {
    -f32_next_up(-x)
}

/// A float8 bound as the exact bound on a float4 column compared in float8 (`float48*`):
/// the float4 values `x` with `(x::float8) op b` are exactly those with `x op' c`.
fn fold_float8_into_float4(op: CmpOp, b: f64) -> Folded {
    let x = b as f32;
    let widened = x as f64;
    match op {
        CmpOp::Eq | CmpOp::Ne => {
            let exact = widened == b || (b.is_nan() && x.is_nan());
            match (op, exact) {
                (CmpOp::Eq, true) => Folded::Bound(CmpOp::Eq, Value::Float4(x)),
                (CmpOp::Eq, false) => Folded::Nothing,
                (_, true) => Folded::Bound(CmpOp::Ne, Value::Float4(x)),
                (_, false) => Folded::All,
            }
        }
        CmpOp::Ge | CmpOp::Gt => {
            let c = if widened < b || (op == CmpOp::Gt && widened == b) {
                f32_next_up(x)
            } else {
                x
            };
            Folded::Bound(CmpOp::Ge, Value::Float4(c))
        }
        CmpOp::Le | CmpOp::Lt => {
            let c = if widened > b || (op == CmpOp::Lt && widened == b) {
                f32_next_down(x)
            } else {
                x
            };
            Folded::Bound(CmpOp::Le, Value::Float4(c))
        }
    }
}

/// An integer (or numeric) bound folded into an integer column's range `[min, max]`.
fn fold_into_integer(op: CmpOp, d: &Decimal, min: i64, max: i64, make: fn(i64) -> Value) -> Folded {
    let (floor, ceil, integral) = d.floor_ceil();
    let in_range = |v: i128| v >= min as i128 && v <= max as i128;
    match op {
        CmpOp::Eq | CmpOp::Ne => {
            let hit = integral && in_range(floor);
            match (op, hit) {
                (CmpOp::Eq, true) => Folded::Bound(CmpOp::Eq, make(floor as i64)),
                (CmpOp::Eq, false) => Folded::Nothing,
                (_, true) => Folded::Bound(CmpOp::Ne, make(floor as i64)),
                (_, false) => Folded::All,
            }
        }
        CmpOp::Ge | CmpOp::Gt => {
            // The smallest integer in the range.
            let lo = if op == CmpOp::Gt && integral {
                ceil + 1
            } else {
                ceil
            };
            if lo > max as i128 {
                Folded::Nothing
            } else if lo <= min as i128 {
                Folded::All
            } else {
                Folded::Bound(CmpOp::Ge, make(lo as i64))
            }
        }
        CmpOp::Le | CmpOp::Lt => {
            let hi = if op == CmpOp::Lt && integral {
                floor - 1
            } else {
                floor
            };
            if hi < min as i128 {
                Folded::Nothing
            } else if hi >= max as i128 {
                Folded::All
            } else {
                Folded::Bound(CmpOp::Le, make(hi as i64))
            }
        }
    }
}

/// Resolves one condition on a column of `kind` (`type_name` as the catalog names it) the
/// way PostgreSQL resolves the operator, folded into the column's type (see the module
/// documentation). Errors are PostgreSQL's (`invalid input syntax for type …`, `… is out
/// of range for type …`, `operator does not exist: …`).
pub fn fold(kind: TypeKind, type_name: &str, c: &Condition) -> Result<Folded, String> {
    let text = match &c.literal {
        Literal::Quoted(s) => {
            let v = match kind {
                TypeKind::Numeric => {
                    // numeric_in takes exponents; the decimal reader takes plain digits.
                    match Decimal::parse(s) {
                        Some(d) => {
                            d.check_numeric_range()?;
                            Value::Numeric(Numeric::parse(&d.plain_text())?)
                        }
                        None => Value::parse(kind, &crate::sql::quote_literal(s))?,
                    }
                }
                _ => Value::parse(kind, &crate::sql::quote_literal(s))?,
            };
            return Ok(Folded::Bound(c.op, v));
        }
        Literal::Typed(literal_kind, s) => {
            return fold_typed(kind, type_name, c.op, *literal_kind, s)
        }
        Literal::Number(n) => n,
    };
    let d = Decimal::parse(text)
        .ok_or_else(|| format!("invalid input syntax for type numeric: \"{text}\""))?;
    let literal_type = d.literal_type(text);
    Ok(match kind {
        TypeKind::Int2 => fold_into_integer(c.op, &d, i16::MIN as i64, i16::MAX as i64, |v| {
            Value::Int2(v as i16)
        }),
        TypeKind::Int4 => fold_into_integer(c.op, &d, i32::MIN as i64, i32::MAX as i64, |v| {
            Value::Int4(v as i32)
        }),
        TypeKind::Int8 => fold_into_integer(c.op, &d, i64::MIN, i64::MAX, Value::Int8),
        TypeKind::Float8 => Folded::Bound(c.op, Value::Float8(number_as_float8(&d, text)?)),
        TypeKind::Float4 => fold_float8_into_float4(c.op, number_as_float8(&d, text)?),
        TypeKind::Numeric => {
            d.check_numeric_range()?;
            Folded::Bound(c.op, Value::Numeric(Numeric::parse(&d.plain_text())?))
        }
        _ => {
            return Err(format!(
                "operator does not exist: {type_name} {} {literal_type}: write the literal in single quotes ('{}') so that it takes the column's type",
                c.op.sql(),
                text
            ))
        }
    })
}

/// Microseconds per day.
const USECS_PER_DAY: i64 = 86_400_000_000;

/// A typed date/time literal against a column of `kind`, folded into the column's type as
/// PostgreSQL's cross-type operators compare (`date_cmp_timestamp`: the date at midnight;
/// `timestamp_cmp_timestamptz`: the timestamp in `TimeZone`, UTC here).
fn fold_typed(
    kind: TypeKind,
    type_name: &str,
    op: CmpOp,
    literal_kind: TypeKind,
    text: &str,
) -> Result<Folded, String> {
    let v = Value::parse(literal_kind, &crate::sql::quote_literal(text))?;
    let usecs = |v: &Value| match v {
        Value::Timestamp(t) | Value::TimestampTz(t) => Some(*t),
        _ => None,
    };
    Ok(match (kind, &v) {
        (k, _) if k == literal_kind => Folded::Bound(op, v),
        (TypeKind::Timestamp | TypeKind::TimestampTz, Value::Date(d)) => {
            let t = match *d {
                i32::MAX => i64::MAX,
                i32::MIN => i64::MIN,
                d => (d as i64)
                    .checked_mul(USECS_PER_DAY)
                    .filter(|t| *t < i64::MAX / 2)
                    .ok_or_else(|| format!("date out of range for timestamp: \"{text}\""))?,
            };
            Folded::Bound(
                op,
                if kind == TypeKind::Timestamp {
                    Value::Timestamp(t)
                } else {
                    Value::TimestampTz(t)
                },
            )
        }
        (TypeKind::Timestamp, Value::TimestampTz(t)) => Folded::Bound(op, Value::Timestamp(*t)),
        (TypeKind::TimestampTz, Value::Timestamp(t)) => Folded::Bound(op, Value::TimestampTz(*t)),
        (TypeKind::Date, _) if usecs(&v).is_some() => {
            let t = usecs(&v).unwrap_or_default();
            match t {
                i64::MAX => Folded::Bound(op, Value::Date(i32::MAX)),
                i64::MIN => Folded::Bound(op, Value::Date(i32::MIN)),
                t => {
                    // Timestamps are within ±300000 years: their days fit a date.
                    let floor = t.div_euclid(USECS_PER_DAY) as i32;
                    let exact = t.rem_euclid(USECS_PER_DAY) == 0;
                    let date = Value::Date;
                    match (op, exact) {
                        (CmpOp::Eq, true) => Folded::Bound(CmpOp::Eq, date(floor)),
                        (CmpOp::Eq, false) => Folded::Nothing,
                        (CmpOp::Ne, true) => Folded::Bound(CmpOp::Ne, date(floor)),
                        (CmpOp::Ne, false) => Folded::All,
                        (CmpOp::Ge, true) => Folded::Bound(CmpOp::Ge, date(floor)),
                        (CmpOp::Ge, false) | (CmpOp::Gt, _) => {
                            Folded::Bound(CmpOp::Ge, date(floor + 1))
                        }
                        (CmpOp::Le, _) | (CmpOp::Lt, false) => {
                            Folded::Bound(CmpOp::Le, date(floor))
                        }
                        (CmpOp::Lt, true) => Folded::Bound(CmpOp::Le, date(floor - 1)),
                    }
                }
            }
        }
        _ => {
            return Err(format!(
                "operator does not exist: {type_name} {} {}",
                op.sql(),
                literal_kind.sql_name()
            ))
        }
    })
}

#[cfg(test)]
mod tests;
