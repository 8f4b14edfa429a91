//! `pg_node_tree` text, as `nodeToString` writes it into `pg_index.indpred`, read back into
//! the few expression nodes a partial index's predicate is usually made of.
//!
//! # Problem
//!
//! A partial index holds only the rows its predicate accepts, so a scan may use it only when
//! the query's own condition implies that predicate (PostgreSQL's `predicate_implied_by`).
//! The predicate is stored as the planner's node tree in text form, not as SQL:
//!
//! ```text
//!  CREATE INDEX ON t (a) WHERE a % 2 = 0  stores
//!  {OPEXPR :opno 96 … :args ({OPEXPR :opno 530 … :args ({VAR :varno 1 :varattno 1 …}
//!      {CONST :consttype 23 … :constlen 4 :constbyval true :constisnull false
//!       :constvalue 4 [ 2 0 0 0 0 0 0 0 ]}) …} {CONST … :constvalue 4 [ 0 0 0 0 0 0 0 0 ]}) …}
//! ```
//!
//! # Mechanism
//!
//! The text is tokenised as PostgreSQL's `pg_strtok` does — `(`, `)`, `{`, `}` are tokens of
//! their own, everything else is split at white space, a backslash escapes the next
//! character — and parsed into a generic tree ([`Item`]): a node (`{LABEL :field value …}`)
//! holds fields, a field's value is the items up to the next `:field`, a list is `( … )` and
//! a datum's bytes are `N [ b0 b1 … ]`. [`Expr::from_item`] then reads the node kinds a
//! simple predicate uses (`OPEXPR`, `BOOLEXPR`, `NULLTEST`, `VAR`, `CONST`, `RELABELTYPE`,
//! and `FUNCEXPR` for casts of constants); any other node is [`Expr::Other`], which the
//! planner treats as "not implied" and cannot show.
//!
//! The input is hostile: its length ([`MAX_NODE_TREE_BYTES`]) and nesting depth
//! ([`MAX_NODE_DEPTH`]) are bounded, and anything malformed is an error string, never a
//! panic.
//!
//! # Worked example
//!
//! The tree above parses to `Op { opno: 96, args: [Op { opno: 530, args: [Var(1),
//! Const(int4 2)] }, Const(int4 0)] }`, which the planner renders as `a % 2 = 0`.

/// The longest node tree read: a predicate's text is a few kilobytes at most; anything
/// beyond this is not a predicate PostgreSQL wrote for an index.
pub const MAX_NODE_TREE_BYTES: usize = 1 << 20;

/// The deepest nesting of nodes and lists followed. Each level is one recursive call, so
/// this bounds the stack; real predicates nest a handful of levels.
pub const MAX_NODE_DEPTH: usize = 64;

/// One element of a parsed node tree.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// `{LABEL :field value …}`.
    Node {
        /// The node's label (`OPEXPR`, `VAR`, …).
        label: String,
        /// Its fields in order, each with the items of its value.
        fields: Vec<(String, Vec<Item>)>,
    },
    /// `( … )`.
    List(Vec<Item>),
    /// `[ b0 b1 … ]`: the bytes of a datum.
    Bytes(Vec<u8>),
    /// Any other token (a number, a word, `<>` for NULL).
    Atom(String),
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Open(char),
    Close(char),
    Word(String),
}

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    if text.len() > MAX_NODE_TREE_BYTES {
        return Err(format!(
            "the node tree is {} bytes, more than the {MAX_NODE_TREE_BYTES} a predicate can be",
            text.len()
        ));
    }
    let mut tokens = Vec::new();
    let mut word = String::new();
    let mut chars = text.chars();
    let flush = |word: &mut String, tokens: &mut Vec<Token>| {
        if !word.is_empty() {
            tokens.push(Token::Word(std::mem::take(word)));
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(escaped) => word.push(escaped),
                None => return Err("the node tree ends in a lone backslash".into()),
            },
            '(' | '{' | '[' => {
                flush(&mut word, &mut tokens);
                tokens.push(Token::Open(c));
            }
            ')' | '}' | ']' => {
                flush(&mut word, &mut tokens);
                tokens.push(Token::Close(c));
            }
            c if c.is_whitespace() => flush(&mut word, &mut tokens),
            c => word.push(c),
        }
    }
    flush(&mut word, &mut tokens);
    Ok(tokens)
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn next(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.at).cloned();
        self.at += 1;
        t
    }

    fn item(&mut self, depth: usize) -> Result<Item, String> {
        if depth > MAX_NODE_DEPTH {
            return Err(format!(
                "the node tree nests deeper than {MAX_NODE_DEPTH} levels"
            ));
        }
        match self.next() {
            Some(Token::Open('{')) => {
                let label = match self.next() {
                    Some(Token::Word(w)) => w,
                    other => return Err(format!("a node starts with {other:?}, not a label")),
                };
                let mut fields: Vec<(String, Vec<Item>)> = Vec::new();
                loop {
                    match self.peek() {
                        Some(Token::Close('}')) => {
                            self.at += 1;
                            return Ok(Item::Node { label, fields });
                        }
                        Some(Token::Word(w)) if w.starts_with(':') => {
                            let name = w[1..].to_string();
                            self.at += 1;
                            fields.push((name, Vec::new()));
                        }
                        Some(_) => {
                            let value = self.item(depth + 1)?;
                            match fields.last_mut() {
                                Some((_, items)) => items.push(value),
                                None => {
                                    return Err(format!(
                                        "node {label} has a value before its first field"
                                    ))
                                }
                            }
                        }
                        None => return Err(format!("node {label} is not closed")),
                    }
                }
            }
            Some(Token::Open('(')) => {
                let mut items = Vec::new();
                loop {
                    match self.peek() {
                        Some(Token::Close(')')) => {
                            self.at += 1;
                            return Ok(Item::List(items));
                        }
                        Some(_) => items.push(self.item(depth + 1)?),
                        None => return Err("a list is not closed".into()),
                    }
                }
            }
            Some(Token::Open('[')) => {
                let mut bytes = Vec::new();
                loop {
                    match self.next() {
                        Some(Token::Close(']')) => return Ok(Item::Bytes(bytes)),
                        // Datum bytes are printed as signed chars (-128..=127).
                        Some(Token::Word(w)) => match w.parse::<i16>() {
                            Ok(v) if (-128..=255).contains(&v) => bytes.push(v as u8),
                            _ => return Err(format!("datum byte \"{w}\" is not a byte")),
                        },
                        other => return Err(format!("datum bytes hold {other:?}")),
                    }
                }
            }
            Some(Token::Word(w)) => Ok(Item::Atom(w)),
            Some(Token::Open(c) | Token::Close(c)) => Err(format!("unexpected \"{c}\"")),
            None => Err("the node tree ends early".into()),
        }
    }
}

/// Parses the whole text of a `pg_node_tree` value into one item.
pub fn parse(text: &str) -> Result<Item, String> {
    let mut p = Parser {
        tokens: tokenize(text)?,
        at: 0,
    };
    let item = p.item(0)?;
    if p.at != p.tokens.len() {
        return Err("the node tree has text after its end".into());
    }
    Ok(item)
}

/// A constant of a predicate (`CONST`).
#[derive(Debug, Clone, PartialEq)]
pub struct Const {
    /// `consttype`.
    pub type_oid: u32,
    /// `constlen`: bytes, -1 varlena, -2 cstring.
    pub len: i16,
    /// `constisnull`.
    pub is_null: bool,
    /// The datum's bytes: for a by-value type the `Datum` (8 bytes, little-endian), for a
    /// varlena the value with its header.
    pub bytes: Vec<u8>,
}

/// `BoolExpr.boolop`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoolOp {
    /// `AND`.
    And,
    /// `OR`.
    Or,
    /// `NOT`.
    Not,
}

/// The expression nodes of a simple predicate.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A column of the table (`VAR`, `varattno`).
    Var(i16),
    /// A constant.
    Const(Const),
    /// An operator (`OPEXPR`): its `pg_operator` oid, the collation it compares in
    /// (`inputcollid`) and its arguments.
    Op {
        /// `opno`.
        opno: u32,
        /// `inputcollid`.
        collation: u32,
        /// The operands.
        args: Vec<Expr>,
    },
    /// `AND`, `OR`, `NOT`.
    Bool {
        /// Which.
        op: BoolOp,
        /// The operands.
        args: Vec<Expr>,
    },
    /// `arg IS [NOT] NULL` (`NULLTEST`).
    NullTest {
        /// The tested expression.
        arg: Box<Expr>,
        /// `IS NOT NULL` (`nulltesttype` 1) rather than `IS NULL` (0).
        is_not_null: bool,
    },
    /// A binary-compatible relabelling (`RELABELTYPE`, `varchar` read as `text`).
    Relabel(Box<Expr>),
    /// A function call (`FUNCEXPR`): casts of constants are the common case.
    Func {
        /// `funcid`.
        funcid: u32,
        /// The arguments.
        args: Vec<Expr>,
    },
    /// Any other node, by label.
    Other(String),
}

fn field<'i>(fields: &'i [(String, Vec<Item>)], name: &str) -> Option<&'i [Item]> {
    fields
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_slice())
}

fn atom<'i>(fields: &'i [(String, Vec<Item>)], name: &str) -> Result<&'i str, String> {
    match field(fields, name) {
        Some([Item::Atom(a)]) => Ok(a),
        _ => Err(format!("field :{name} is missing or not a single word")),
    }
}

fn number<T: std::str::FromStr>(fields: &[(String, Vec<Item>)], name: &str) -> Result<T, String> {
    let a = atom(fields, name)?;
    a.parse()
        .map_err(|_| format!("field :{name} is \"{a}\", not a number"))
}

fn args(fields: &[(String, Vec<Item>)], depth: usize) -> Result<Vec<Expr>, String> {
    match field(fields, "args") {
        Some([Item::List(items)]) => items
            .iter()
            .map(|i| Expr::from_item_at(i, depth + 1))
            .collect(),
        Some([]) | None => Ok(Vec::new()),
        Some([Item::Atom(a)]) if a == "<>" => Ok(Vec::new()),
        _ => Err("field :args is not a list".into()),
    }
}

impl Expr {
    /// Reads the expression an item holds. Node kinds a simple predicate does not use are
    /// [`Expr::Other`]; the kinds it does use must have their fields, or it is an error.
    pub fn from_item(item: &Item) -> Result<Expr, String> {
        Expr::from_item_at(item, 0)
    }

    fn from_item_at(item: &Item, depth: usize) -> Result<Expr, String> {
        if depth > MAX_NODE_DEPTH {
            return Err(format!(
                "the expression nests deeper than {MAX_NODE_DEPTH} levels"
            ));
        }
        let Item::Node { label, fields } = item else {
            return Ok(Expr::Other(format!("{item:?}").chars().take(40).collect()));
        };
        Ok(match label.as_str() {
            "VAR" => {
                // A predicate's columns are those of the index's table: level 0, varno 1.
                if number::<i64>(fields, "varlevelsup")? != 0 {
                    return Ok(Expr::Other("VAR of an outer query".into()));
                }
                Expr::Var(number(fields, "varattno")?)
            }
            "CONST" => {
                let is_null = atom(fields, "constisnull")? == "true";
                let len: i16 = number(fields, "constlen")?;
                let by_val = atom(fields, "constbyval")? == "true";
                let bytes = match field(fields, "constvalue") {
                    _ if is_null => Vec::new(),
                    Some([Item::Atom(n), Item::Bytes(b)]) => {
                        let n: usize = n
                            .parse()
                            .map_err(|_| format!(":constvalue length \"{n}\" is not a number"))?;
                        if by_val {
                            // The Datum is printed whole; its value is its first `len` bytes
                            // (little-endian).
                            let want = usize::try_from(len).unwrap_or(0);
                            if want == 0 || want > b.len() {
                                return Err(format!(
                                    "by-value constant of length {len} with {} datum bytes",
                                    b.len()
                                ));
                            }
                            b[..want].to_vec()
                        } else {
                            if n != b.len() {
                                return Err(format!(
                                    "constant claims {n} bytes and has {}",
                                    b.len()
                                ));
                            }
                            b.clone()
                        }
                    }
                    _ => return Err("field :constvalue is not LENGTH [ bytes ]".into()),
                };
                Expr::Const(Const {
                    type_oid: number(fields, "consttype")?,
                    len,
                    is_null,
                    bytes,
                })
            }
            "OPEXPR" => Expr::Op {
                opno: number(fields, "opno")?,
                collation: number(fields, "inputcollid")?,
                args: args(fields, depth)?,
            },
            "BOOLEXPR" => Expr::Bool {
                op: match atom(fields, "boolop")? {
                    "and" => BoolOp::And,
                    "or" => BoolOp::Or,
                    "not" => BoolOp::Not,
                    other => return Err(format!("boolop \"{other}\" is not and, or, not")),
                },
                args: args(fields, depth)?,
            },
            "NULLTEST" => {
                let arg = match field(fields, "arg") {
                    Some([a]) => Expr::from_item_at(a, depth + 1)?,
                    _ => return Err("NULLTEST has no :arg".into()),
                };
                // A row-valued test (`ROW(...) IS NULL`) is not a column test.
                if atom(fields, "argisrow")? == "true" {
                    return Ok(Expr::Other("NULLTEST of a row".into()));
                }
                Expr::NullTest {
                    arg: Box::new(arg),
                    is_not_null: number::<i32>(fields, "nulltesttype")? == 1,
                }
            }
            "RELABELTYPE" => match field(fields, "arg") {
                Some([a]) => Expr::Relabel(Box::new(Expr::from_item_at(a, depth + 1)?)),
                _ => return Err("RELABELTYPE has no :arg".into()),
            },
            "FUNCEXPR" => Expr::Func {
                funcid: number(fields, "funcid")?,
                args: args(fields, depth)?,
            },
            other => Expr::Other(other.to_string()),
        })
    }

    /// Parses a whole `pg_node_tree` text as an expression.
    pub fn parse(text: &str) -> Result<Expr, String> {
        Expr::from_item(&parse(text)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVEN: &str = "{OPEXPR :opno 96 :opfuncid 65 :opresulttype 16 :opretset false :opcollid 0 :inputcollid 0 :args ({OPEXPR :opno 530 :opfuncid 156 :opresulttype 23 :opretset false :opcollid 0 :inputcollid 0 :args ({VAR :varno 1 :varattno 1 :vartype 23 :vartypmod -1 :varcollid 0 :varnullingrels (b) :varlevelsup 0 :varreturningtype 0 :varnosyn 1 :varattnosyn 1 :location -1} {CONST :consttype 23 :consttypmod -1 :constcollid 0 :constlen 4 :constbyval true :constisnull false :location -1 :constvalue 4 [ 2 0 0 0 0 0 0 0 ]}) :location -1} {CONST :consttype 23 :consttypmod -1 :constcollid 0 :constlen 4 :constbyval true :constisnull false :location -1 :constvalue 4 [ 0 0 0 0 0 0 0 0 ]}) :location -1}";

    fn int4(v: i32) -> Expr {
        Expr::Const(Const {
            type_oid: 23,
            len: 4,
            is_null: false,
            bytes: v.to_le_bytes().to_vec(),
        })
    }

    #[test]
    fn postgres_predicates_parse() {
        let e = Expr::parse(EVEN).unwrap();
        assert_eq!(
            e,
            Expr::Op {
                opno: 96,
                collation: 0,
                args: vec![
                    Expr::Op {
                        opno: 530,
                        collation: 0,
                        args: vec![Expr::Var(1), int4(2)]
                    },
                    int4(0)
                ]
            }
        );
        // Text constants keep their varlena header; negative bytes are signed chars.
        let text = "{OPEXPR :opno 667 :opfuncid 743 :opresulttype 16 :opretset false :opcollid 0 :inputcollid 950 :args ({VAR :varno 1 :varattno 3 :vartype 25 :vartypmod -1 :varcollid 950 :varnullingrels (b) :varlevelsup 0 :varreturningtype 0 :varnosyn 1 :varattnosyn 3 :location -1} {CONST :consttype 1082 :consttypmod -1 :constcollid 100 :constlen -1 :constbyval false :constisnull false :location -1 :constvalue 7 [ 28 0 0 0 97 -98 99 ]}) :location -1}";
        let Expr::Op {
            args, collation, ..
        } = Expr::parse(text).unwrap()
        else {
            panic!("not an operator")
        };
        assert_eq!(collation, 950);
        assert_eq!(
            args[1],
            Expr::Const(Const {
                type_oid: 1082,
                len: -1,
                is_null: false,
                bytes: vec![28, 0, 0, 0, 97, 158, 99]
            })
        );
        let and = "{BOOLEXPR :boolop and :args ({NULLTEST :arg {VAR :varno 1 :varattno 2 :varlevelsup 0} :nulltesttype 1 :argisrow false :location -1} {SUBPLAN :x 1}) :location -1}";
        assert_eq!(
            Expr::parse(and).unwrap(),
            Expr::Bool {
                op: BoolOp::And,
                args: vec![
                    Expr::NullTest {
                        arg: Box::new(Expr::Var(2)),
                        is_not_null: true
                    },
                    Expr::Other("SUBPLAN".into())
                ]
            }
        );
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for bad in [
            "",
            "{",
            "}",
            "{OPEXPR",
            "{OPEXPR :opno}",
            "{OPEXPR :opno x :inputcollid 0}",
            "{CONST :consttype 23 :constlen 4 :constbyval true :constisnull false :constvalue 4 [ 1 2 ]}",
            "{CONST :consttype 23 :constlen 4 :constbyval true :constisnull false :constvalue 4 [ 999 ]}",
            "{CONST :consttype 25 :constlen -1 :constbyval false :constisnull false :constvalue 9 [ 1 ]}",
            "{VAR :varattno 1 :varlevelsup 0} extra",
            "{ 1 2 }",
            "(((",
            "\\",
            "{NULLTEST :arg}",
        ] {
            assert!(Expr::parse(bad).is_err(), "{bad:?} parsed");
        }
        let deep = "(".repeat(10_000) + &")".repeat(10_000);
        assert!(parse(&deep).is_err());
        let deep_nodes = "{A :x ".repeat(5_000) + &"}".repeat(5_000);
        assert!(parse(&deep_nodes).is_err());
        // Every prefix and some mutations of a real tree: errors or trees, never panics.
        for end in 0..EVEN.len() {
            if EVEN.is_char_boundary(end) {
                let _ = Expr::parse(&EVEN[..end]);
            }
        }
        for (i, c) in EVEN.char_indices().step_by(7) {
            for with in ['{', '}', '(', ')', '[', ']', '\\', ' ', '-', '9'] {
                let mut s = EVEN.to_string();
                s.replace_range(i..i + c.len_utf8(), &with.to_string());
                let _ = Expr::parse(&s);
            }
        }
    }
}
