//! Partial indexes: when a `--where` range implies an index's predicate, and how the
//! predicate reads.
//!
//! # Problem
//!
//! `CREATE INDEX ON t (a) WHERE a % 2 = 0` holds only the even rows. A bitmap or index scan
//! of `a BETWEEN 10 AND 20` through it silently loses the odd ones (6 rows instead of 11).
//! PostgreSQL uses a partial index only when the query's conditions prove its predicate
//! (`predicate_implied_by`, optimizer/util/predtest.c); so must pageio.
//!
//! # Mechanism
//!
//! The predicate (`pg_index.indpred`, parsed by [`crate::catalog::node_tree`]) is split into
//! its `AND`ed clauses, and every clause must be proved from the range alone — a
//! deliberately small subset of predtest.c's rules, each exact:
//!
//! ```text
//!  clause                         proved when the range on the same column …
//!  col IS NOT NULL                is a --where range (a comparison never admits NULL)
//!  col <  k  /  col <= k          has an upper bound below k (or equal to k, when allowed)
//!  col >  k  /  col >= k          has a lower bound above k (or equal to k, when allowed)
//!  col =  k                       is exactly [k, k]
//!  col <> k                       lies wholly below or wholly above k
//!  k op col                       as col op' k, op' the commutator
//! ```
//!
//! Operators are recognised by their `pg_operator` oid, from a table of PostgreSQL's
//! built-in btree comparison operators of the types the walk reads ([`OPERATORS`]); `k` is a
//! constant, or a widening cast of one (`5::bigint` is stored as `int8(5)`). Text is
//! compared only under the "C" and "POSIX" collations, which are byte order. Anything else —
//! another column, an `OR`, a function of the column, an unknown operator — is "not
//! implied", and the planner picks another index or says why it cannot use this one.
//!
//! # Worked example
//!
//! `WHERE a > 5 AND a IS NOT NULL AND 100 >= a` is three clauses. `--where 'a between 10 and
//! 20'` proves `a > 5` (lower bound 10 > 5), `a IS NOT NULL` (the range has bounds) and
//! `100 >= a` (read as `a <= 100`: upper bound 20 ≤ 100): the index is used.
//! `--where 'a >= 5'` fails `a > 5` (5 is not above 5): it is not.

use std::cmp::Ordering;

use super::detoast::detoast;
use super::float8_cmp;
use super::query::ColumnRange;
use super::value::{TypeKind, Value};
use crate::catalog::node_tree::{BoolOp, Const, Expr};
use crate::page::varlena::Varlena;

/// A comparison, as the range is tested against it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cmp {
    Lt,
    Le,
    Eq,
    Ge,
    Gt,
    Ne,
}

impl Cmp {
    /// The comparison with its operands swapped (`k < col` is `col > k`).
    fn commuted(self) -> Cmp {
        match self {
            Cmp::Lt => Cmp::Gt,
            Cmp::Le => Cmp::Ge,
            Cmp::Gt => Cmp::Lt,
            Cmp::Ge => Cmp::Le,
            c => c,
        }
    }
}

/// PostgreSQL's built-in operators that partial-index predicates are proved or shown with:
/// `pg_operator` oid and name (from `pg_operator.dat`; a test checks them against a real
/// PostgreSQL 18). The
/// comparisons cover int2, int4 and int8 (and their mixes), float4 and float8 (and their
/// mixes), date, timestamp, timestamptz, text and bpchar; the arithmetic ones are only
/// shown.
pub const OPERATORS: &[(u32, &str)] = &[
    // int2 × int2, int4 × int4, int8 × int8
    (94, "="),
    (95, "<"),
    (522, "<="),
    (520, ">"),
    (524, ">="),
    (519, "<>"),
    (96, "="),
    (97, "<"),
    (523, "<="),
    (521, ">"),
    (525, ">="),
    (518, "<>"),
    (410, "="),
    (412, "<"),
    (414, "<="),
    (413, ">"),
    (415, ">="),
    (411, "<>"),
    // int2 × int4, int4 × int2
    (532, "="),
    (534, "<"),
    (540, "<="),
    (536, ">"),
    (542, ">="),
    (538, "<>"),
    (533, "="),
    (535, "<"),
    (541, "<="),
    (537, ">"),
    (543, ">="),
    (539, "<>"),
    // int2 × int8, int8 × int2
    (1862, "="),
    (1864, "<"),
    (1866, "<="),
    (1865, ">"),
    (1867, ">="),
    (1863, "<>"),
    (1868, "="),
    (1870, "<"),
    (1872, "<="),
    (1871, ">"),
    (1873, ">="),
    (1869, "<>"),
    // int4 × int8, int8 × int4
    (15, "="),
    (37, "<"),
    (80, "<="),
    (76, ">"),
    (82, ">="),
    (36, "<>"),
    (416, "="),
    (418, "<"),
    (420, "<="),
    (419, ">"),
    (430, ">="),
    (417, "<>"),
    // float4 × float4, float8 × float8, float4 × float8, float8 × float4
    (620, "="),
    (622, "<"),
    (624, "<="),
    (623, ">"),
    (625, ">="),
    (621, "<>"),
    (670, "="),
    (672, "<"),
    (673, "<="),
    (674, ">"),
    (675, ">="),
    (671, "<>"),
    (1120, "="),
    (1122, "<"),
    (1124, "<="),
    (1123, ">"),
    (1125, ">="),
    (1121, "<>"),
    (1130, "="),
    (1132, "<"),
    (1134, "<="),
    (1133, ">"),
    (1135, ">="),
    (1131, "<>"),
    // date, timestamp, timestamptz, text, bpchar
    (1093, "="),
    (1095, "<"),
    (1096, "<="),
    (1097, ">"),
    (1098, ">="),
    (1094, "<>"),
    (2060, "="),
    (2062, "<"),
    (2063, "<="),
    (2064, ">"),
    (2065, ">="),
    (2061, "<>"),
    (1320, "="),
    (1322, "<"),
    (1323, "<="),
    (1324, ">"),
    (1325, ">="),
    (1321, "<>"),
    (98, "="),
    (664, "<"),
    (665, "<="),
    (666, ">"),
    (667, ">="),
    (531, "<>"),
    (1054, "="),
    (1058, "<"),
    (1059, "<="),
    (1060, ">"),
    (1061, ">="),
    (1057, "<>"),
    // arithmetic, shown only: int2, int4, int8 %, +, -, *, /
    (529, "%"),
    (530, "%"),
    (439, "%"),
    (550, "+"),
    (551, "+"),
    (684, "+"),
    (554, "-"),
    (555, "-"),
    (685, "-"),
    (526, "*"),
    (514, "*"),
    (686, "*"),
    (527, "/"),
    (528, "/"),
    (687, "/"),
];

/// The name of a known operator.
fn operator_name(opno: u32) -> Option<&'static str> {
    OPERATORS
        .iter()
        .find(|(oid, _)| *oid == opno)
        .map(|(_, name)| *name)
}

/// The comparison a known comparison operator makes.
fn comparison(opno: u32) -> Option<Cmp> {
    Some(match operator_name(opno)? {
        "<" => Cmp::Lt,
        "<=" => Cmp::Le,
        "=" => Cmp::Eq,
        ">=" => Cmp::Ge,
        ">" => Cmp::Gt,
        "<>" => Cmp::Ne,
        _ => return None,
    })
}

/// `C_COLLATION_OID` and `POSIX_COLLATION_OID`: byte order.
const BYTE_ORDER_COLLATIONS: [u32; 2] = [950, 951];

/// The value of a constant, if it is one of the types compared here.
fn const_value(c: &Const) -> Option<Value> {
    if c.is_null {
        return None;
    }
    let kind = TypeKind::of(c.type_oid, c.len);
    match c.len {
        n if n > 0 => Value::from_fixed(kind, &c.bytes).ok(),
        -1 => {
            let (v, _) = Varlena::decode(&c.bytes).ok()?;
            let payload = detoast(&v, None).ok()?;
            Value::from_varlena(kind, &payload).ok()
        }
        _ => None,
    }
}

/// The value of a constant expression: a constant, or a widening cast of one (the casts
/// PostgreSQL stores for `5::bigint` or a float8 column compared with `1.5`).
fn constant(e: &Expr) -> Option<Value> {
    match e {
        Expr::Const(c) => const_value(c),
        Expr::Relabel(inner) => constant(inner),
        Expr::Func { funcid, args } if args.len() == 1 => {
            let v = constant(&args[0])?;
            let as_f64 = |v: &Value| -> Option<f64> {
                match v {
                    Value::Int2(x) => Some(*x as f64),
                    Value::Int4(x) => Some(*x as f64),
                    Value::Int8(x) => Some(*x as f64),
                    Value::Float4(x) => Some(*x as f64),
                    // numeric → float8 goes through the numeric's text, as float8(numeric).
                    Value::Numeric(n) => n.to_string().parse().ok(),
                    _ => None,
                }
            };
            Some(match (funcid, &v) {
                (481, Value::Int4(x)) => Value::Int8(*x as i64),
                (754, Value::Int2(x)) => Value::Int8(*x as i64),
                (313, Value::Int2(x)) => Value::Int4(*x as i32),
                (235 | 316 | 482 | 311 | 1746, _) => Value::Float8(as_f64(&v)?),
                _ => return None,
            })
        }
        _ => None,
    }
}

/// `Some(attno)` if the expression is a column of the table (through a relabelling).
fn column(e: &Expr) -> Option<i16> {
    match e {
        Expr::Var(n) => Some(*n),
        Expr::Relabel(inner) => column(inner),
        _ => None,
    }
}

/// Compares two values of possibly different numeric types as PostgreSQL's cross-type
/// operators do (integers exactly, floats as float8); other types only with their own.
fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    let int = |v: &Value| match v {
        Value::Int2(x) => Some(*x as i64),
        Value::Int4(x) => Some(*x as i64),
        Value::Int8(x) => Some(*x),
        _ => None,
    };
    let float = |v: &Value| match v {
        Value::Float4(x) => Some(*x as f64),
        Value::Float8(x) => Some(*x),
        _ => None,
    };
    if let (Some(x), Some(y)) = (int(a), int(b)) {
        return Some(x.cmp(&y));
    }
    if let (Some(x), Some(y)) = (float(a), float(b)) {
        return Some(float8_cmp(x, y));
    }
    a.pg_cmp(b)
}

/// Whether every value of `range` satisfies `value cmp k`.
fn range_satisfies(range: &ColumnRange, cmp: Cmp, k: &Value) -> bool {
    let below_k = || match &range.hi {
        Some((hi, inclusive)) => match compare(hi, k) {
            Some(Ordering::Less) => true,
            Some(Ordering::Equal) => !inclusive,
            _ => false,
        },
        None => false,
    };
    let at_most_k = || {
        range
            .hi
            .as_ref()
            .is_some_and(|(hi, _)| matches!(compare(hi, k), Some(Ordering::Less | Ordering::Equal)))
    };
    let above_k = || match &range.lo {
        Some((lo, inclusive)) => match compare(lo, k) {
            Some(Ordering::Greater) => true,
            Some(Ordering::Equal) => !inclusive,
            _ => false,
        },
        None => false,
    };
    let at_least_k = || {
        range.lo.as_ref().is_some_and(|(lo, _)| {
            matches!(compare(lo, k), Some(Ordering::Greater | Ordering::Equal))
        })
    };
    match cmp {
        Cmp::Lt => below_k(),
        Cmp::Le => at_most_k(),
        Cmp::Gt => above_k(),
        Cmp::Ge => at_least_k(),
        Cmp::Ne => below_k() || above_k(),
        Cmp::Eq => match (&range.lo, &range.hi) {
            (Some((lo, true)), Some((hi, true))) => {
                compare(lo, k) == Some(Ordering::Equal) && compare(hi, k) == Some(Ordering::Equal)
            }
            _ => false,
        },
    }
}

/// Whether `range`, a range on the table's column `attno` (NULLs never in it unless it has
/// no bound at all), implies the partial-index predicate `predicate` (see the module docs
/// for the rules). `None` for the range — no `--where` — implies nothing.
pub(crate) fn implied_by(predicate: &Expr, range: Option<&ColumnRange>, attno: i16) -> bool {
    let Some(range) = range else {
        return false;
    };
    // A range no value is in implies anything (and no row is read through the index).
    range.empty || clause_implied(predicate, range, attno, 0)
}

/// The deepest `AND` nesting followed (the node tree's own depth bound is larger).
const MAX_AND_DEPTH: usize = 16;

fn clause_implied(clause: &Expr, range: &ColumnRange, attno: i16, depth: usize) -> bool {
    match clause {
        Expr::Bool {
            op: BoolOp::And,
            args,
        } if depth < MAX_AND_DEPTH => {
            !args.is_empty()
                && args
                    .iter()
                    .all(|a| clause_implied(a, range, attno, depth + 1))
        }
        Expr::NullTest {
            arg,
            is_not_null: true,
        } => column(arg) == Some(attno) && !range.null_qualifies,
        Expr::Op {
            opno,
            collation,
            args,
        } if args.len() == 2 => {
            let Some(cmp) = comparison(*opno) else {
                return false;
            };
            let (cmp, k) = match (column(&args[0]), column(&args[1])) {
                (Some(a), None) if a == attno => (cmp, constant(&args[1])),
                (None, Some(a)) if a == attno => (cmp.commuted(), constant(&args[0])),
                _ => return false,
            };
            let Some(k) = k else {
                return false;
            };
            // Text orders by the operator's collation; only byte order is compared here.
            if matches!(k, Value::Text(_) | Value::Bpchar(_))
                && !BYTE_ORDER_COLLATIONS.contains(collation)
            {
                return false;
            }
            range_satisfies(range, cmp, &k)
        }
        _ => false,
    }
}

/// The SQL text of a constant.
fn const_text(v: &Value) -> String {
    match v {
        Value::Int2(_)
        | Value::Int4(_)
        | Value::Int8(_)
        | Value::Float4(_)
        | Value::Float8(_)
        | Value::Numeric(_) => v.to_pg_text(),
        other => format!("'{}'", other.to_pg_text().replace('\'', "''")),
    }
}

/// What an operand is rendered inside, for its parentheses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Parent {
    /// `AND`, `OR`.
    Bool,
    /// `=`, `<`, … .
    Comparison,
    /// `%`, `+`, …, `NOT`, `IS NULL`: anything but a plain value is parenthesised.
    Arithmetic,
}

/// The deepest expression rendered (the node tree's own depth bound is larger).
const MAX_RENDER_DEPTH: usize = 16;

/// The predicate as SQL (`a % 2 = 0`), with `column_name` naming attribute numbers; `None`
/// when it holds anything beyond columns, constants, the known operators, `AND`, `OR`,
/// `NOT` and `IS [NOT] NULL`.
pub(crate) fn render(e: &Expr, column_name: &dyn Fn(i16) -> Option<String>) -> Option<String> {
    render_at(e, column_name, 0)
}

fn render_at(
    e: &Expr,
    column_name: &dyn Fn(i16) -> Option<String>,
    depth: usize,
) -> Option<String> {
    if depth > MAX_RENDER_DEPTH {
        return None;
    }
    // Operands are bare where SQL's precedence reads them right (`a % 2 = 0`, `a > 5 AND
    // a IS NOT NULL`) and parenthesised elsewhere.
    let operand = |a: &Expr, parent: Parent| -> Option<String> {
        let text = render_at(a, column_name, depth + 1)?;
        let bare = match a {
            Expr::Op { opno, .. } if comparison(*opno).is_some() => parent == Parent::Bool,
            Expr::Op { .. } => parent == Parent::Comparison,
            Expr::NullTest { .. } => parent == Parent::Bool,
            Expr::Bool { .. } => false,
            _ => true,
        };
        Some(if bare { text } else { format!("({text})") })
    };
    Some(match e {
        Expr::Var(n) => column_name(*n)?,
        Expr::Const(c) if c.is_null => "NULL".into(),
        Expr::Const(_) | Expr::Func { .. } => const_text(&constant(e)?),
        Expr::Relabel(inner) => render_at(inner, column_name, depth + 1)?,
        Expr::Op { opno, args, .. } if args.len() == 2 => {
            let name = operator_name(*opno)?;
            let parent = if comparison(*opno).is_some() {
                Parent::Comparison
            } else {
                Parent::Arithmetic
            };
            format!(
                "{} {name} {}",
                operand(&args[0], parent)?,
                operand(&args[1], parent)?
            )
        }
        Expr::Bool { op, args } if !args.is_empty() => match op {
            BoolOp::Not if args.len() == 1 => {
                format!("NOT {}", operand(&args[0], Parent::Arithmetic)?)
            }
            BoolOp::Not => return None,
            BoolOp::And | BoolOp::Or => {
                let parts: Option<Vec<String>> =
                    args.iter().map(|a| operand(a, Parent::Bool)).collect();
                parts?.join(if *op == BoolOp::And { " AND " } else { " OR " })
            }
        },
        Expr::NullTest { arg, is_not_null } => format!(
            "{} IS {}NULL",
            operand(arg, Parent::Arithmetic)?,
            if *is_not_null { "NOT " } else { "" }
        ),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::node_tree::Expr;

    fn var(n: i16) -> Expr {
        Expr::Var(n)
    }
    fn int4(v: i32) -> Expr {
        Expr::Const(Const {
            type_oid: 23,
            len: 4,
            is_null: false,
            bytes: v.to_le_bytes().to_vec(),
        })
    }
    fn text(s: &str) -> Expr {
        let mut bytes = (((4 + s.len()) as u32) << 2).to_le_bytes().to_vec();
        bytes.extend_from_slice(s.as_bytes());
        Expr::Const(Const {
            type_oid: 25,
            len: -1,
            is_null: false,
            bytes,
        })
    }
    fn op(opno: u32, a: Expr, b: Expr) -> Expr {
        Expr::Op {
            opno,
            collation: 0,
            args: vec![a, b],
        }
    }
    fn and(args: Vec<Expr>) -> Expr {
        Expr::Bool {
            op: BoolOp::And,
            args,
        }
    }
    fn range(lo: Option<(i32, bool)>, hi: Option<(i32, bool)>) -> ColumnRange {
        ColumnRange {
            lo: lo.map(|(v, i)| (Value::Int4(v), i)),
            hi: hi.map(|(v, i)| (Value::Int4(v), i)),
            ..ColumnRange::unbounded(0, TypeKind::Int4)
        }
    }

    #[test]
    fn simple_clauses_are_proved_from_the_range() {
        let between = range(Some((10, true)), Some((20, true)));
        let r = Some(&between);
        // a > 5, a >= 10, a < 21, a <= 20, a <> 30, a IS NOT NULL.
        for clause in [
            op(521, var(1), int4(5)),
            op(525, var(1), int4(10)),
            op(97, var(1), int4(21)),
            op(523, var(1), int4(20)),
            op(518, var(1), int4(30)),
            op(518, var(1), int4(9)),
            Expr::NullTest {
                arg: Box::new(var(1)),
                is_not_null: true,
            },
            // 100 >= a is a <= 100.
            op(525, int4(100), var(1)),
        ] {
            assert!(implied_by(&clause, r, 1), "{clause:?}");
        }
        // a > 10, a < 20, a = 15, a <> 15, a IS NULL, a on another column, b > 5.
        for clause in [
            op(521, var(1), int4(10)),
            op(97, var(1), int4(20)),
            op(96, var(1), int4(15)),
            op(518, var(1), int4(15)),
            Expr::NullTest {
                arg: Box::new(var(1)),
                is_not_null: false,
            },
            op(521, var(2), int4(5)),
            op(521, var(1), var(2)),
            // a % 2 = 0: a function of the column.
            op(96, op(530, var(1), int4(2)), int4(0)),
            // An unknown operator.
            op(99999, var(1), int4(5)),
            Expr::Other("SUBPLAN".into()),
        ] {
            assert!(!implied_by(&clause, r, 1), "{clause:?}");
        }
        // A conjunction needs every clause; OR is never proved; no range proves nothing.
        let both = and(vec![op(521, var(1), int4(5)), op(97, var(1), int4(100))]);
        assert!(implied_by(&both, r, 1));
        let one = and(vec![op(521, var(1), int4(5)), op(97, var(1), int4(15))]);
        assert!(!implied_by(&one, r, 1));
        let or = Expr::Bool {
            op: BoolOp::Or,
            args: vec![op(521, var(1), int4(5))],
        };
        assert!(!implied_by(&or, r, 1));
        assert!(!implied_by(&and(vec![]), r, 1));
        assert!(!implied_by(&op(521, var(1), int4(5)), None, 1));
        // Exclusive bounds: a < 20 is proved by a < 20 but not by a <= 20.
        let open = range(None, Some((20, false)));
        assert!(implied_by(&op(97, var(1), int4(20)), Some(&open), 1));
        let eq = range(Some((15, true)), Some((15, true)));
        assert!(implied_by(&op(96, var(1), int4(15)), Some(&eq), 1));
        // int4 column, int8 constant cast: a > 5::bigint.
        let cast = Expr::Func {
            funcid: 481,
            args: vec![int4(5)],
        };
        assert!(implied_by(&op(76, var(1), cast), r, 1));
    }

    #[test]
    fn text_is_proved_only_in_byte_order() {
        let r = ColumnRange {
            lo: Some((Value::Text(b"b".to_vec()), true)),
            ..ColumnRange::unbounded(0, TypeKind::Text)
        };
        let c = |collation| Expr::Op {
            opno: 667,
            collation,
            args: vec![var(3), text("abc")],
        };
        assert!(implied_by(&c(950), Some(&r), 3));
        assert!(!implied_by(&c(100), Some(&r), 3));
    }

    #[test]
    fn predicates_render_as_sql() {
        let name = |n: i16| (n == 1).then(|| "a".to_string());
        let even = op(96, op(530, var(1), int4(2)), int4(0));
        assert_eq!(render(&even, &name).as_deref(), Some("a % 2 = 0"));
        let e = and(vec![
            op(521, var(1), int4(5)),
            Expr::NullTest {
                arg: Box::new(var(1)),
                is_not_null: true,
            },
            Expr::Bool {
                op: BoolOp::Or,
                args: vec![op(97, var(1), int4(1)), op(667, var(1), text("it's"))],
            },
        ]);
        assert_eq!(
            render(&e, &name).as_deref(),
            Some("a > 5 AND a IS NOT NULL AND (a < 1 OR a >= 'it''s')")
        );
        assert_eq!(render(&op(99999, var(1), int4(1)), &name), None);
        assert_eq!(render(&op(96, var(2), int4(1)), &name), None);
        assert_eq!(render(&Expr::Other("SUBLINK".into()), &name), None);
        // Garbage constants render as nothing, never panic.
        let bad = Expr::Const(Const {
            type_oid: 25,
            len: -1,
            is_null: false,
            bytes: vec![0xff, 1],
        });
        assert_eq!(render(&op(98, var(1), bad), &name), None);
    }
}
