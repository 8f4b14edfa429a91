//! SQL text as PostgreSQL's lexer (`scan.l`) reads it: the tokens of `--where`, `--select`
//! and `--table`.
//!
//! # Problem
//!
//! `s between 'a and b' and 'c'` has one `and` inside a literal; `s > 'x=y'` has an `=`
//! inside one; `"s.dot"."t.x"` has dots inside names. Splitting such text on words or
//! characters reads it differently from PostgreSQL, silently. Every piece of SQL pageio
//! takes is therefore cut into tokens first, the way PostgreSQL's lexer cuts it, and only
//! then parsed.
//!
//! # Mechanism
//!
//! ```text
//!  "\"T\".x >= E'it\\'s' and y<>-5"
//!    ─► Ident("T", quoted) Dot Ident("x") Op(">=") Str("it's") Ident("and") Ident("y")
//!       Op("<>") Op("-") Number("5")
//! ```
//!
//! - Unquoted identifiers fold ASCII `A`–`Z` to lower case and nothing else: in a UTF-8
//!   database `downcase_identifier` leaves every other character alone (`Äx` stays `Äx`, so
//!   it names a column `Äx`, not `äx`). Quoted identifiers (`"Mixed ""q"""`) keep their
//!   case and double their quotes; both are truncated to 63 bytes (`NAMEDATALEN - 1`) on a
//!   character boundary, as `truncate_identifier` does.
//! - String literals `'…'` double their quotes (`'it''s'`); with `standard_conforming_strings`
//!   on (PostgreSQL's default), a backslash is an ordinary character there. `E'…'` takes C
//!   escapes: `\n \t \b \f \r \v \\ \'`, octal `\ooo`, hex `\xhh`, `\uXXXX`, `\UXXXXXXXX`.
//! - Numbers: integers (`42`, `1_000`, `0x1F`, `0o17`, `0b101`), decimals (`5.5`, `.5`,
//!   `5.`) and exponents (`1e0`, `1.5E-3`); a number running into a letter is an error
//!   (`12abc`: "trailing junk after numeric literal"), as in PostgreSQL 15+.
//! - Operators are the longest run of operator characters, with PostgreSQL's rule that a
//!   run of more than one character does not end in `+` or `-` unless it also holds one of
//!   `~ ! @ # ^ & | ` ? %` (so `a>-5` is `a > -5`); `--` and `/* */` start comments.
//!
//! [`quote_identifier`] is the way back: a name written so this lexer (and PostgreSQL)
//! reads it as itself, quoted only when needed, as `quote_ident` does.

/// `NAMEDATALEN - 1`: the longest identifier in bytes; longer ones are truncated.
pub const MAX_IDENTIFIER_BYTES: usize = 63;

/// The most tokens one piece of SQL may hold: the flags take a predicate, a select list or
/// a name, never a program, and a bound keeps a hostile argument from costing memory.
pub const MAX_TOKENS: usize = 10_000;

/// One token of SQL text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token {
    /// An identifier or keyword: unquoted ones folded (ASCII only), quoted ones as written.
    Ident {
        /// The name, folded and truncated.
        name: String,
        /// Written in double quotes (never a keyword then).
        quoted: bool,
    },
    /// A string literal, its escapes resolved.
    Str(String),
    /// A number as written, underscores removed, a hex/octal/binary integer converted to
    /// decimal digits.
    Number(String),
    /// An operator (`=`, `<>`, `!=`, `<`, `<=`, `>`, `>=`, `-`, `+`, `*`, `::`, …).
    Op(String),
    /// `(`.
    LParen,
    /// `)`.
    RParen,
    /// `,`.
    Comma,
    /// `.`.
    Dot,
}

impl Token {
    /// True for the unquoted keyword `kw` (any case: keywords are folded identifiers).
    pub fn is_keyword(&self, kw: &str) -> bool {
        matches!(self, Token::Ident { name, quoted: false } if name.eq_ignore_ascii_case(kw))
    }

    /// The token as it could be written back (for messages).
    pub fn describe(&self) -> String {
        match self {
            Token::Ident { name, quoted } => {
                if *quoted {
                    quote_identifier(name)
                } else {
                    name.clone()
                }
            }
            Token::Str(s) => quote_literal(s),
            Token::Number(n) => n.clone(),
            Token::Op(o) => o.clone(),
            Token::LParen => "(".into(),
            Token::RParen => ")".into(),
            Token::Comma => ",".into(),
            Token::Dot => ".".into(),
        }
    }
}

/// Characters PostgreSQL's lexer groups into operators (`op_chars` in scan.l).
fn is_op_char(c: char) -> bool {
    "~!@#^&|`?+-*/%<>=".contains(c)
}

/// Characters that may start an identifier: ASCII letters, `_`, and every non-ASCII
/// character (`ident_start`: `[A-Za-z\200-\377_]`).
fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || !c.is_ascii()
}

/// Characters that may continue an identifier (`ident_cont`, with digits and `$`).
fn is_ident_cont(c: char) -> bool {
    is_ident_start(c) || c.is_ascii_digit() || c == '$'
}

/// Whitespace as the lexer skips it (`space`: space, tab, newline, CR, form feed, VT).
fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0c' | '\x0b')
}

/// `name` cut to [`MAX_IDENTIFIER_BYTES`] on a character boundary (`truncate_identifier`).
fn truncate_identifier(mut name: String) -> String {
    if name.len() > MAX_IDENTIFIER_BYTES {
        let mut end = MAX_IDENTIFIER_BYTES;
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        name.truncate(end);
    }
    name
}

/// Cuts `text` into tokens as PostgreSQL's lexer does (see the module documentation).
pub fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    Ok(tokenize_spanned(text)?
        .into_iter()
        .map(|(t, _)| t)
        .collect())
}

/// [`tokenize`], with each token's byte range in `text`.
pub fn tokenize_spanned(text: &str) -> Result<Vec<(Token, std::ops::Range<usize>)>, String> {
    let chars: Vec<char> = text.chars().collect();
    // Byte offset of each character, and of the end.
    let offsets: Vec<usize> = text
        .char_indices()
        .map(|(b, _)| b)
        .chain(std::iter::once(text.len()))
        .collect();
    let mut spanned: Vec<(Token, std::ops::Range<usize>)> = Vec::new();
    let mut tokens: Vec<Token> = Vec::new();
    let mut i = 0;
    let mut start = 0;
    loop {
        // The tokens pushed since the last turn started at `start` and end at `i`.
        for t in tokens.drain(..) {
            spanned.push((t, offsets[start]..offsets[i.min(chars.len())]));
        }
        if i >= chars.len() {
            break;
        }
        start = i;
        if spanned.len() >= MAX_TOKENS {
            return Err(format!(
                "more than {MAX_TOKENS} tokens: pageio takes one predicate, select list or name"
            ));
        }
        let c = chars[i];
        if is_space(c) {
            i += 1;
            continue;
        }
        // Comments: `--` to the end of the line, `/* … */` nested.
        if c == '-' && chars.get(i + 1) == Some(&'-') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '/' && chars.get(i + 1) == Some(&'*') {
            i = skip_block_comment(&chars, i)?;
            continue;
        }
        match c {
            '(' => tokens.push(Token::LParen),
            ')' => tokens.push(Token::RParen),
            ',' => tokens.push(Token::Comma),
            '\'' => {
                let (s, next) = string_body(&chars, i + 1, false)?;
                tokens.push(Token::Str(s));
                i = next;
                continue;
            }
            '"' => {
                let (name, next) = quoted_identifier(&chars, i)?;
                tokens.push(name);
                i = next;
                continue;
            }
            '.' if !chars.get(i + 1).is_some_and(char::is_ascii_digit) => {
                tokens.push(Token::Dot);
            }
            ':' if chars.get(i + 1) == Some(&':') => {
                tokens.push(Token::Op("::".into()));
                i += 2;
                continue;
            }
            c if c.is_ascii_digit() || c == '.' => {
                let (number, next) = number(&chars, i)?;
                tokens.push(Token::Number(number));
                i = next;
                continue;
            }
            c if (c == 'e' || c == 'E') && chars.get(i + 1) == Some(&'\'') => {
                let (s, next) = string_body(&chars, i + 2, true)?;
                tokens.push(Token::Str(s));
                i = next;
                continue;
            }
            c if is_ident_start(c) => {
                let mut j = i;
                while j < chars.len() && is_ident_cont(chars[j]) {
                    j += 1;
                }
                let name: String = chars[i..j]
                    .iter()
                    .map(|c| c.to_ascii_lowercase())
                    .collect();
                tokens.push(Token::Ident {
                    name: truncate_identifier(name),
                    quoted: false,
                });
                i = j;
                continue;
            }
            c if is_op_char(c) => {
                let op = operator(&chars, i);
                i += op.chars().count();
                tokens.push(Token::Op(op));
                continue;
            }
            other => {
                return Err(format!(
                    "syntax error at \"{other}\": expected a name, a 'quoted literal', a number or an operator"
                ))
            }
        }
        i += 1;
    }
    Ok(spanned)
}

/// Skips a `/* … */` comment (nested, as PostgreSQL's are) starting at `chars[i]`;
/// returns the index after it.
fn skip_block_comment(chars: &[char], mut i: usize) -> Result<usize, String> {
    let mut depth = 0usize;
    loop {
        match (chars.get(i), chars.get(i + 1)) {
            (Some('/'), Some('*')) => {
                depth += 1;
                i += 2;
            }
            (Some('*'), Some('/')) => {
                depth -= 1;
                i += 2;
                if depth == 0 {
                    return Ok(i);
                }
            }
            (Some(_), _) => i += 1,
            (None, _) => return Err("unterminated /* comment".into()),
        }
    }
}

/// The `"quoted"` identifier starting at `chars[i]` (`""` is one `"`); returns its token and
/// the index after the closing quote.
fn quoted_identifier(chars: &[char], i: usize) -> Result<(Token, usize), String> {
    let mut name = String::new();
    let mut j = i + 1;
    loop {
        match (chars.get(j), chars.get(j + 1)) {
            (Some('"'), Some('"')) => {
                name.push('"');
                j += 2;
            }
            (Some('"'), _) => break,
            (Some(&ch), _) => {
                name.push(ch);
                j += 1;
            }
            (None, _) => return Err("unterminated quoted identifier: a \" is missing".into()),
        }
    }
    if name.is_empty() {
        return Err(
            "zero-length delimited identifier (\"\"): write a name between the double quotes"
                .into(),
        );
    }
    let token = Token::Ident {
        name: truncate_identifier(name),
        quoted: true,
    };
    Ok((token, j + 1))
}

/// The operator starting at `chars[i]`, cut as scan.l cuts it: a comment start ends it, and
/// a multi-character operator may not end in + or - unless it holds one of ~ ! @ # ^ & |
/// ` ? % (so `>-5` is `>` then `-5`).
fn operator(chars: &[char], i: usize) -> String {
    let mut j = i;
    while j < chars.len() && is_op_char(chars[j]) {
        // A comment start ends the operator (scan.l's `self`/`operator` rule).
        if j > i
            && ((chars[j] == '-' && chars.get(j + 1) == Some(&'-'))
                || (chars[j] == '/' && chars.get(j + 1) == Some(&'*')))
        {
            break;
        }
        j += 1;
    }
    let mut op: String = chars[i..j].iter().collect();
    if op.len() > 1 && !op.contains(['~', '!', '@', '#', '^', '&', '|', '`', '?', '%']) {
        while op.len() > 1 && op.ends_with(['+', '-']) {
            op.pop();
        }
    }
    op
}

/// The body of a string literal starting after its opening quote; `escapes` for `E'…'`.
/// Returns the value and the index after the closing quote.
fn string_body(chars: &[char], mut i: usize, escapes: bool) -> Result<(String, usize), String> {
    let mut s = String::new();
    loop {
        match chars.get(i) {
            None => return Err(
                "unterminated quoted string: a ' is missing (write a quote inside a literal as '')"
                    .into(),
            ),
            Some('\'') if chars.get(i + 1) == Some(&'\'') => {
                s.push('\'');
                i += 2;
            }
            Some('\'') => return Ok((s, i + 1)),
            Some('\\') if escapes => {
                let (ch, next) = escape(chars, i + 1)?;
                s.push(ch);
                i = next;
            }
            Some(&c) => {
                s.push(c);
                i += 1;
            }
        }
    }
}

/// One escape of an `E'…'` literal, starting after its backslash.
fn escape(chars: &[char], i: usize) -> Result<(char, usize), String> {
    let Some(&c) = chars.get(i) else {
        return Err("unterminated quoted string: it ends in a backslash".into());
    };
    let digits = |from: usize, max: usize, radix: u32| -> (u32, usize) {
        let mut v = 0u32;
        let mut n = 0;
        while n < max {
            match chars.get(from + n).and_then(|c| c.to_digit(radix)) {
                Some(d) => {
                    v = v * radix + d;
                    n += 1;
                }
                None => break,
            }
        }
        (v, n)
    };
    let byte = |v: u32| {
        char::from_u32(v).filter(|c| c.is_ascii() && *c != '\0').ok_or_else(|| {
            format!("escape \\{v:o} is not an ASCII character other than NUL: pageio reads E'' escapes of ASCII and \\u/\\U characters only")
        })
    };
    Ok(match c {
        'b' => ('\u{8}', i + 1),
        'f' => ('\u{c}', i + 1),
        'n' => ('\n', i + 1),
        'r' => ('\r', i + 1),
        't' => ('\t', i + 1),
        'v' => ('\u{b}', i + 1),
        '0'..='7' => {
            let (v, n) = digits(i, 3, 8);
            (byte(v)?, i + n)
        }
        'x' if chars.get(i + 1).is_some_and(char::is_ascii_hexdigit) => {
            let (v, n) = digits(i + 1, 2, 16);
            (byte(v)?, i + 1 + n)
        }
        'u' | 'U' => {
            let want = if c == 'u' { 4 } else { 8 };
            let (v, n) = digits(i + 1, want, 16);
            if n != want {
                return Err(format!(
                    "invalid Unicode escape: \\{c} must be followed by {want} hexadecimal digits"
                ));
            }
            let ch = char::from_u32(v)
                .filter(|c| *c != '\0')
                .ok_or_else(|| format!("invalid Unicode escape value \\{c}{v:X}"))?;
            (ch, i + 1 + n)
        }
        other => (other, i + 1),
    })
}

/// A number starting at `i`: its text (decimal digits, `.`, exponent) and the index after.
fn number(chars: &[char], start: usize) -> Result<(String, usize), String> {
    let junk = |at: usize| -> Result<(), String> {
        match chars.get(at) {
            Some(&c) if is_ident_cont(c) => {
                let shown: String = chars[start..(at + 1).min(chars.len())].iter().collect();
                Err(format!(
                    "trailing junk after numeric literal at or near \"{shown}\""
                ))
            }
            _ => Ok(()),
        }
    };
    // Digits with single underscores between them (PostgreSQL 16+).
    let run = |from: usize, radix: u32| -> Result<(String, usize), String> {
        let mut s = String::new();
        let mut j = from;
        while let Some(&c) = chars.get(j) {
            if c.is_digit(radix) {
                s.push(c);
                j += 1;
            } else if c == '_'
                && !s.is_empty()
                && chars.get(j + 1).is_some_and(|d| d.is_digit(radix))
            {
                j += 1;
            } else {
                break;
            }
        }
        Ok((s, j))
    };
    if chars[start] == '0' {
        let radix = match chars.get(start + 1) {
            Some('x' | 'X') => Some(16),
            Some('o' | 'O') => Some(8),
            Some('b' | 'B') => Some(2),
            _ => None,
        };
        if let Some(radix) = radix {
            let (digits, j) = run(start + 2, radix)?;
            if digits.is_empty() {
                return Err(junk(start + 1)
                    .err()
                    .unwrap_or_else(|| "invalid number".into()));
            }
            junk(j)?;
            let mut v: u128 = 0;
            for d in digits.chars() {
                v = v
                    .checked_mul(radix as u128)
                    .and_then(|v| v.checked_add(d.to_digit(radix).unwrap_or(0) as u128))
                    .ok_or_else(|| {
                        format!("integer literal 0{} is too large: pageio reads hexadecimal, octal and binary literals up to 128 bits", chars[start + 1])
                    })?;
            }
            return Ok((v.to_string(), j));
        }
    }
    let (int, mut j) = run(start, 10)?;
    let mut text = int;
    if chars.get(j) == Some(&'.') && chars.get(j + 1) != Some(&'.') {
        text.push('.');
        let (frac, k) = run(j + 1, 10)?;
        text.push_str(&frac);
        j = k;
    }
    if text == "." {
        return Err("syntax error at \".\"".into());
    }
    if matches!(chars.get(j), Some('e' | 'E')) {
        let mut k = j + 1;
        let mut exp = String::from("e");
        if let Some(&s @ ('+' | '-')) = chars.get(k) {
            exp.push(s);
            k += 1;
        }
        let (digits, k) = run(k, 10)?;
        if digits.is_empty() {
            junk(j)?;
        } else {
            exp.push_str(&digits);
            text.push_str(&exp);
            j = k;
        }
    }
    junk(j)?;
    Ok((text, j))
}

/// PostgreSQL's reserved keywords (and the column-name and type-function keywords that
/// `quote_ident` also quotes), lower case, sorted: a name spelled like one of these must be
/// quoted to be read as a name.
const QUOTED_KEYWORDS: &[&str] = &[
    "all",
    "analyse",
    "analyze",
    "and",
    "any",
    "array",
    "as",
    "asc",
    "asymmetric",
    "authorization",
    "between",
    "bigint",
    "binary",
    "bit",
    "boolean",
    "both",
    "case",
    "cast",
    "char",
    "character",
    "check",
    "coalesce",
    "collate",
    "collation",
    "column",
    "concurrently",
    "constraint",
    "create",
    "cross",
    "current_catalog",
    "current_date",
    "current_role",
    "current_schema",
    "current_time",
    "current_timestamp",
    "current_user",
    "dec",
    "decimal",
    "default",
    "deferrable",
    "desc",
    "distinct",
    "do",
    "else",
    "end",
    "except",
    "exists",
    "extract",
    "false",
    "fetch",
    "float",
    "for",
    "foreign",
    "freeze",
    "from",
    "full",
    "grant",
    "greatest",
    "group",
    "grouping",
    "having",
    "ilike",
    "in",
    "initially",
    "inner",
    "inout",
    "int",
    "integer",
    "intersect",
    "interval",
    "into",
    "is",
    "isnull",
    "join",
    "json",
    "json_array",
    "json_arrayagg",
    "json_exists",
    "json_object",
    "json_objectagg",
    "json_query",
    "json_scalar",
    "json_serialize",
    "json_table",
    "json_value",
    "lateral",
    "leading",
    "least",
    "left",
    "like",
    "limit",
    "localtime",
    "localtimestamp",
    "merge_action",
    "national",
    "natural",
    "nchar",
    "none",
    "normalize",
    "not",
    "notnull",
    "null",
    "nullif",
    "numeric",
    "offset",
    "on",
    "only",
    "or",
    "order",
    "out",
    "outer",
    "overlaps",
    "overlay",
    "placing",
    "position",
    "precision",
    "primary",
    "real",
    "references",
    "returning",
    "right",
    "row",
    "select",
    "session_user",
    "setof",
    "similar",
    "smallint",
    "some",
    "substring",
    "symmetric",
    "system_user",
    "table",
    "tablesample",
    "then",
    "time",
    "timestamp",
    "to",
    "trailing",
    "treat",
    "trim",
    "true",
    "union",
    "unique",
    "user",
    "using",
    "values",
    "varchar",
    "variadic",
    "verbose",
    "when",
    "where",
    "window",
    "with",
    "xmlattributes",
    "xmlconcat",
    "xmlelement",
    "xmlexists",
    "xmlforest",
    "xmlnamespaces",
    "xmlparse",
    "xmlpi",
    "xmlroot",
    "xmlserialize",
    "xmltable",
];

/// `name` as SQL writes it so that it reads back as itself: bare when it is lower-case
/// ASCII letters, digits and `_` (not starting with a digit) and not a keyword, else in
/// double quotes with `"` doubled (PostgreSQL's `quote_identifier`).
pub fn quote_identifier(name: &str) -> String {
    let plain = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && QUOTED_KEYWORDS.binary_search(&name).is_err();
    if plain {
        name.to_string()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

/// `s` as an SQL string literal: in single quotes, `'` doubled (`quote_literal`; a
/// backslash needs nothing under `standard_conforming_strings`).
pub fn quote_literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// A dotted name (`[database.][schema.]table`, `"s.dot"."t.x"`) split into its parts
/// outside quotes, each folded or kept as the lexer reads it; at most `max_parts`.
pub fn parse_qualified_name(text: &str, max_parts: usize) -> Result<Vec<String>, String> {
    let bad = |why: &str| {
        format!(
            "cannot read \"{text}\" as a name: {why} (write [database.][schema.]table; quote a part holding dots, spaces or capitals in double quotes, e.g. '\"My.Schema\".\"T\"')"
        )
    };
    let tokens = tokenize(text).map_err(|e| bad(&e))?;
    let mut parts = Vec::new();
    let mut expect_name = true;
    for t in &tokens {
        match (expect_name, t) {
            (true, Token::Ident { name, .. }) => {
                parts.push(name.clone());
                expect_name = false;
            }
            (false, Token::Dot) => expect_name = true,
            (_, other) => {
                return Err(bad(&format!("unexpected {}", other.describe())));
            }
        }
    }
    if parts.is_empty() || expect_name {
        return Err(bad("a name part is missing"));
    }
    if parts.len() > max_parts {
        return Err(bad(&format!("more than {max_parts} dotted parts")));
    }
    Ok(parts)
}

/// Parts of a qualified name written back as SQL (`public."t.x"`).
pub fn quote_qualified(parts: &[&str]) -> String {
    parts
        .iter()
        .map(|p| quote_identifier(p))
        .collect::<Vec<_>>()
        .join(".")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ident(name: &str, quoted: bool) -> Token {
        Token::Ident {
            name: name.into(),
            quoted,
        }
    }

    #[test]
    fn keywords_list_is_sorted_for_binary_search() {
        assert!(QUOTED_KEYWORDS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn literals_keep_what_is_inside_their_quotes() {
        // PostgreSQL 18: SELECT 'a and b', 'x=y', 'it''s', E'it\'s\n', 'back\slash'.
        assert_eq!(
            tokenize("s between 'a and b' and 'c'").unwrap(),
            vec![
                ident("s", false),
                ident("between", false),
                Token::Str("a and b".into()),
                ident("and", false),
                Token::Str("c".into()),
            ]
        );
        assert_eq!(
            tokenize("s > 'x=y'").unwrap(),
            vec![
                ident("s", false),
                Token::Op(">".into()),
                Token::Str("x=y".into())
            ]
        );
        assert_eq!(
            tokenize("'it''s'").unwrap(),
            vec![Token::Str("it's".into())]
        );
        assert_eq!(
            tokenize(r"E'it\'s\n\x41\101\u00e9' 'back\slash'").unwrap(),
            vec![
                Token::Str("it's\nAAé".into()),
                Token::Str(r"back\slash".into())
            ]
        );
        assert!(tokenize("'open").unwrap_err().contains("unterminated"));
    }

    #[test]
    fn identifiers_fold_only_ascii_capitals() {
        // PostgreSQL 18 (UTF-8): CREATE TABLE t ("Äx" int) then SELECT Äx FROM t works, and
        // SELECT äx FROM t fails with 'column "äx" does not exist'.
        assert_eq!(tokenize("Äx").unwrap(), vec![ident("Äx", false)]);
        assert_eq!(tokenize("MiXed").unwrap(), vec![ident("mixed", false)]);
        assert_eq!(tokenize("\"Mi\"\"x\"").unwrap(), vec![ident("Mi\"x", true)]);
        assert!(tokenize("\"\"").unwrap_err().contains("zero-length"));
        // 70 bytes are cut to 63, on a character boundary.
        let long = "é".repeat(35);
        match &tokenize(&long).unwrap()[0] {
            Token::Ident { name, .. } => assert_eq!(name.len(), 62),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn numbers_and_operators_split_as_postgresql_splits_them() {
        assert_eq!(
            tokenize("a>-5").unwrap(),
            vec![
                ident("a", false),
                Token::Op(">".into()),
                Token::Op("-".into()),
                Token::Number("5".into())
            ]
        );
        assert_eq!(
            tokenize("a<>1.5e3 b!=.5 c<=5.").unwrap(),
            vec![
                ident("a", false),
                Token::Op("<>".into()),
                Token::Number("1.5e3".into()),
                ident("b", false),
                Token::Op("!=".into()),
                Token::Number(".5".into()),
                ident("c", false),
                Token::Op("<=".into()),
                Token::Number("5.".into()),
            ]
        );
        assert_eq!(
            tokenize("0x1F 1_000 0b101").unwrap(),
            vec![
                Token::Number("31".into()),
                Token::Number("1000".into()),
                Token::Number("5".into())
            ]
        );
        assert_eq!(
            tokenize("12abc").unwrap_err(),
            "trailing junk after numeric literal at or near \"12a\""
        );
        assert_eq!(
            tokenize("a = 1 -- comment\n/* x /* y */ */").unwrap().len(),
            3
        );
    }

    #[test]
    fn names_split_outside_quotes_and_quote_back() {
        assert_eq!(
            parse_qualified_name("\"s.dot\".\"t.x\"", 3).unwrap(),
            vec!["s.dot", "t.x"]
        );
        assert_eq!(parse_qualified_name("T", 3).unwrap(), vec!["t"]);
        assert_eq!(parse_qualified_name("\"T\"", 3).unwrap(), vec!["T"]);
        assert_eq!(
            parse_qualified_name("db.public.t", 3).unwrap(),
            vec!["db", "public", "t"]
        );
        assert!(parse_qualified_name("a.b.c.d", 3).is_err());
        assert!(parse_qualified_name("a..b", 3).is_err());
        assert!(parse_qualified_name("a.", 3).is_err());
        assert_eq!(quote_identifier("t.x"), "\"t.x\"");
        assert_eq!(quote_identifier("T"), "\"T\"");
        assert_eq!(quote_identifier("äx"), "\"äx\"");
        assert_eq!(quote_identifier("select"), "\"select\"");
        assert_eq!(quote_identifier("a\"b"), "\"a\"\"b\"");
        assert_eq!(quote_identifier("pgbench_accounts"), "pgbench_accounts");
        assert_eq!(quote_qualified(&["s.dot", "t.x"]), "\"s.dot\".\"t.x\"");
        // Every quoted form reads back as the name.
        for name in ["t.x", "T", "a\"b", "select", "x y", "1a"] {
            assert_eq!(
                parse_qualified_name(&quote_identifier(name), 1).unwrap(),
                vec![name]
            );
        }
    }
}
