use super::*;

fn cond(op: CmpOp, n: &str) -> Condition {
    Condition {
        op,
        literal: Literal::Number(n.into()),
    }
}

fn quoted(op: CmpOp, s: &str) -> Condition {
    Condition {
        op,
        literal: Literal::Quoted(s.into()),
    }
}

#[test]
fn where_splits_outside_literals() {
    // PostgreSQL 18: over s in ('a','a and b','b','c','d'),
    // SELECT count(*) WHERE s BETWEEN 'a and b' AND 'c' → 3 ('a and b', 'b', 'c').
    let w = parse_where("s between 'a and b' and 'c'").unwrap();
    assert_eq!(w.column, "s");
    assert_eq!(
        w.conditions,
        vec![quoted(CmpOp::Ge, "a and b"), quoted(CmpOp::Le, "c")]
    );
    let w = parse_where("s > 'x=y'").unwrap();
    assert_eq!(w.conditions, vec![quoted(CmpOp::Gt, "x=y")]);
    let w = parse_where("S != 'it''s'").unwrap();
    assert_eq!((w.column.as_str(), w.conditions[0].op), ("s", CmpOp::Ne));
    assert_eq!(w.conditions[0].literal, Literal::Quoted("it's".into()));
    let w = parse_where("\"Äx\" <> -5").unwrap();
    assert_eq!(w.column, "Äx");
    assert_eq!(w.conditions, vec![cond(CmpOp::Ne, "-5")]);
    let w = parse_where("10 >= a and a > - -3").unwrap();
    assert_eq!(
        w.conditions,
        vec![cond(CmpOp::Le, "10"), cond(CmpOp::Gt, "3")]
    );
    let w = parse_where("a BETWEEN 1 AND 1e3").unwrap();
    assert_eq!(
        w.conditions,
        vec![cond(CmpOp::Ge, "1"), cond(CmpOp::Le, "1e3")]
    );
    assert!(parse_where("a = 1 and b = 2")
        .unwrap_err()
        .contains("one column"));
    assert!(parse_where("a ~ 1").unwrap_err().contains("operator ~"));
    assert!(parse_where("a = b").unwrap_err().contains("two columns"));
    assert!(parse_where("a between 1")
        .unwrap_err()
        .contains("ends too early"));
    assert!(parse_where("a = NULL").unwrap_err().contains("NULL"));
    assert!(parse_where("a = 1 or a = 2").unwrap_err().contains("OR"));
    assert!(parse_where("t.a = 1").unwrap_err().contains("alone"));
    assert!(parse_where("a = '1'::int")
        .unwrap_err()
        .contains("typed literals of type int are not read"));
    let typed = |w: &str| parse_where(w).map(|c| c.conditions[0].literal.clone());
    assert_eq!(
        typed("d >= timestamp '2020-03-01 05:00'").unwrap(),
        Literal::Typed(TypeKind::Timestamp, "2020-03-01 05:00".into())
    );
    assert_eq!(
        typed("d >= TIMESTAMP WITH TIME ZONE '2020-03-01'").unwrap(),
        Literal::Typed(TypeKind::TimestampTz, "2020-03-01".into())
    );
    assert_eq!(
        typed("d < '2020-03-01'::date").unwrap(),
        Literal::Typed(TypeKind::Date, "2020-03-01".into())
    );
    assert!(typed("i = int '5'")
        .unwrap_err()
        .contains("typed literals of type int are not read"));
    assert!(parse_where("i = 5::int").unwrap_err().contains("casts"));
}

#[test]
fn select_reads_quoted_and_folded_names() {
    let items =
        parse_select("count(*), SUM(octet_length(\"Big\")), max(A), Count(\"t.x\")").unwrap();
    assert_eq!(items.len(), 4);
    assert_eq!(items[1].func, AggFunc::SumOctetLength);
    assert_eq!(items[1].column.as_deref(), Some("Big"));
    assert_eq!(items[1].expr, "SUM(octet_length(\"Big\"))");
    assert_eq!(items[2].column.as_deref(), Some("a"));
    assert_eq!(items[3].column.as_deref(), Some("t.x"));
    // Only ASCII is folded: PostgreSQL 18 reads sum(Äx) as the column "Äx".
    assert_eq!(
        parse_select("sum(Äx)").unwrap()[0].column.as_deref(),
        Some("Äx")
    );
    assert!(parse_select("median(a)").unwrap_err().contains("median(a)"));
    assert!(parse_select("sum(a").is_err());
    assert!(parse_select("count(*),").is_err());
}

#[test]
fn integer_columns_compare_by_value_with_any_number() {
    // PostgreSQL 18, i2 smallint holding -32768, 0, 5, 6, 32767:
    //   i2 = 70000 → 0 rows;  i2 < 40000 → 5;  i2 > -40000 → 5;  i2 >= 5.5 → 2;
    //   i2 <= 5.5 → 3;  i2 = 5.0 → 1;  i2 <> 70000 → 5;  i2 = '70000' → ERROR: value
    //   "70000" is out of range for type smallint.
    let i2 = |op, n| fold(TypeKind::Int2, "smallint", &cond(op, n)).unwrap();
    assert_eq!(i2(CmpOp::Eq, "70000"), Folded::Nothing);
    assert_eq!(i2(CmpOp::Lt, "40000"), Folded::All);
    assert_eq!(i2(CmpOp::Gt, "-40000"), Folded::All);
    assert_eq!(
        i2(CmpOp::Ge, "5.5"),
        Folded::Bound(CmpOp::Ge, Value::Int2(6))
    );
    assert_eq!(
        i2(CmpOp::Le, "5.5"),
        Folded::Bound(CmpOp::Le, Value::Int2(5))
    );
    assert_eq!(i2(CmpOp::Gt, "5"), Folded::Bound(CmpOp::Ge, Value::Int2(6)));
    assert_eq!(
        i2(CmpOp::Lt, "-5.5"),
        Folded::Bound(CmpOp::Le, Value::Int2(-6))
    );
    assert_eq!(
        i2(CmpOp::Eq, "5.0"),
        Folded::Bound(CmpOp::Eq, Value::Int2(5))
    );
    assert_eq!(i2(CmpOp::Eq, "5.5"), Folded::Nothing);
    assert_eq!(i2(CmpOp::Ne, "70000"), Folded::All);
    assert_eq!(
        i2(CmpOp::Ge, "32767"),
        Folded::Bound(CmpOp::Ge, Value::Int2(32767))
    );
    assert_eq!(i2(CmpOp::Gt, "32767"), Folded::Nothing);
    assert_eq!(
        i2(CmpOp::Le, "-32768"),
        Folded::Bound(CmpOp::Le, Value::Int2(-32768))
    );
    assert_eq!(i2(CmpOp::Ge, "-32768"), Folded::All);
    assert_eq!(
        fold(TypeKind::Int2, "smallint", &quoted(CmpOp::Eq, "70000")).unwrap_err(),
        "value \"70000\" is out of range for type smallint"
    );
    // PostgreSQL 18: i4 = 99999999999 → 0 rows; i8 < 1e30 → every row; i4 >= 1e0 as
    // i4 >= 1.
    let i4 = |op, n| fold(TypeKind::Int4, "integer", &cond(op, n)).unwrap();
    assert_eq!(i4(CmpOp::Eq, "99999999999"), Folded::Nothing);
    assert_eq!(
        i4(CmpOp::Ge, "1e0"),
        Folded::Bound(CmpOp::Ge, Value::Int4(1))
    );
    assert_eq!(
        i4(CmpOp::Ge, "1e-5"),
        Folded::Bound(CmpOp::Ge, Value::Int4(1))
    );
    assert_eq!(
        i4(CmpOp::Gt, "-1e-5"),
        Folded::Bound(CmpOp::Ge, Value::Int4(0))
    );
    let i8 = |op, n| fold(TypeKind::Int8, "bigint", &cond(op, n)).unwrap();
    assert_eq!(i8(CmpOp::Lt, "1e30"), Folded::All);
    assert_eq!(i8(CmpOp::Gt, "99999999999999999999"), Folded::Nothing);
    assert_eq!(i8(CmpOp::Ge, "-9223372036854775808"), Folded::All);
    assert_eq!(
        i8(CmpOp::Le, "9223372036854775806.5"),
        Folded::Bound(CmpOp::Le, Value::Int8(9223372036854775806))
    );
}

#[test]
fn float4_columns_compare_in_float8_with_numbers() {
    // PostgreSQL 18, r real holding 0.1, 0.2, 0.3: r = 0.1 → 0 rows; r = '0.1' → 1;
    // r between 0.1 and 0.3 → 2; r = 1 → 0; r < 1e39 → 3; r < '1e39' → ERROR: "1e39" is
    // out of range for type real.
    let r = |op, n| fold(TypeKind::Float4, "real", &cond(op, n)).unwrap();
    assert_eq!(r(CmpOp::Eq, "0.1"), Folded::Nothing);
    assert_eq!(r(CmpOp::Ne, "0.1"), Folded::All);
    assert_eq!(
        r(CmpOp::Eq, "0.5"),
        Folded::Bound(CmpOp::Eq, Value::Float4(0.5))
    );
    assert_eq!(
        r(CmpOp::Ge, "0.1"),
        Folded::Bound(CmpOp::Ge, Value::Float4(0.1))
    );
    let Folded::Bound(CmpOp::Le, Value::Float4(hi)) = r(CmpOp::Le, "0.3") else {
        panic!()
    };
    assert!(hi < 0.3f32 && (hi as f64) <= 0.3 && (f32_next_up(hi) as f64) > 0.3);
    // Every finite real is below the double 1e39, and Infinity is not.
    assert_eq!(
        r(CmpOp::Lt, "1e39"),
        Folded::Bound(CmpOp::Le, Value::Float4(f32::MAX))
    );
    assert_eq!(
        r(CmpOp::Ge, "1e39"),
        Folded::Bound(CmpOp::Ge, Value::Float4(f32::INFINITY))
    );
    assert_eq!(
        r(CmpOp::Lt, "0"),
        Folded::Bound(CmpOp::Le, Value::Float4(-f32::from_bits(1)))
    );
    assert_eq!(
        r(CmpOp::Gt, "0.5"),
        Folded::Bound(CmpOp::Ge, Value::Float4(f32_next_up(0.5)))
    );
    assert_eq!(
        fold(TypeKind::Float4, "real", &quoted(CmpOp::Eq, "0.1")).unwrap(),
        Folded::Bound(CmpOp::Eq, Value::Float4(0.1))
    );
    assert_eq!(
        fold(TypeKind::Float4, "real", &quoted(CmpOp::Lt, "1e39")).unwrap_err(),
        "\"1e39\" is out of range for type real"
    );
    // PostgreSQL 18: d float8 < 1e400 → ERROR: "1000…0" (401 digits) is out of range
    // for type double precision.
    let e = fold(
        TypeKind::Float8,
        "double precision",
        &cond(CmpOp::Lt, "1e400"),
    )
    .unwrap_err();
    assert_eq!(
        e,
        format!(
            "\"1{}\" is out of range for type double precision",
            "0".repeat(400)
        )
    );
    assert_eq!(
        fold(
            TypeKind::Float8,
            "double precision",
            &cond(CmpOp::Eq, "9007199254740993")
        )
        .unwrap(),
        Folded::Bound(CmpOp::Eq, Value::Float8(9007199254740992.0))
    );
}

#[test]
fn typed_date_time_literals_compare_as_postgresql_promotes() {
    // PostgreSQL 18 over dt date holding 2020-01-05: dt = timestamp '2020-01-05 05:00' →
    // 0 rows, dt = '2020-01-05 05:00' → 1 (read as a date), dt >= timestamp
    // '2020-01-05 05:00' leaves it out, dt = timestamp 'infinity' finds date 'infinity'.
    let typed = |kind: TypeKind, op, lit: TypeKind, s: &str| {
        fold(
            kind,
            kind.sql_name(),
            &Condition {
                op,
                literal: Literal::Typed(lit, s.into()),
            },
        )
        .unwrap()
    };
    let jan5 = Value::Date(7309);
    let ts = TypeKind::Timestamp;
    assert_eq!(
        typed(TypeKind::Date, CmpOp::Eq, ts, "2020-01-05 05:00"),
        Folded::Nothing
    );
    assert_eq!(
        typed(TypeKind::Date, CmpOp::Ne, ts, "2020-01-05 05:00"),
        Folded::All
    );
    assert_eq!(
        typed(TypeKind::Date, CmpOp::Eq, ts, "2020-01-05"),
        Folded::Bound(CmpOp::Eq, jan5.clone())
    );
    assert_eq!(
        typed(TypeKind::Date, CmpOp::Ge, ts, "2020-01-05 05:00"),
        Folded::Bound(CmpOp::Ge, Value::Date(7310))
    );
    assert_eq!(
        typed(TypeKind::Date, CmpOp::Gt, ts, "2020-01-05"),
        Folded::Bound(CmpOp::Ge, Value::Date(7310))
    );
    assert_eq!(
        typed(TypeKind::Date, CmpOp::Lt, ts, "2020-01-05"),
        Folded::Bound(CmpOp::Le, Value::Date(7308))
    );
    assert_eq!(
        typed(TypeKind::Date, CmpOp::Le, ts, "2020-01-05 05:00"),
        Folded::Bound(CmpOp::Le, jan5)
    );
    assert_eq!(
        typed(TypeKind::Date, CmpOp::Eq, ts, "infinity"),
        Folded::Bound(CmpOp::Eq, Value::Date(i32::MAX))
    );
    // A BC timestamp: days round toward −infinity.
    assert_eq!(
        typed(TypeKind::Date, CmpOp::Le, ts, "0044-03-15 12:00 BC"),
        Folded::Bound(CmpOp::Le, Value::Date(-746_117))
    );
    assert_eq!(
        typed(
            TypeKind::TimestampTz,
            CmpOp::Gt,
            TypeKind::Date,
            "2020-01-02"
        ),
        Folded::Bound(CmpOp::Gt, Value::TimestampTz(7306 * USECS_PER_DAY))
    );
    assert_eq!(
        fold(
            TypeKind::Text,
            "text",
            &Condition {
                op: CmpOp::Eq,
                literal: Literal::Typed(TypeKind::Date, "2020-01-01".into())
            }
        )
        .unwrap_err(),
        "operator does not exist: text = date"
    );
}

#[test]
fn numeric_literals_follow_numeric_in() {
    // PostgreSQL 18: SELECT 1.5e3, 15e-1, 1e0, 0e5 → 1500 | 1.5 | 1 | 0;
    // 1e131072 and 1e-16384 → ERROR: value overflows numeric format.
    let text = |s: &str| {
        let d = Decimal::parse(s).unwrap();
        d.check_numeric_range().map(|_| d.plain_text())
    };
    assert_eq!(text("1.5e3").unwrap(), "1500");
    assert_eq!(text("15e-1").unwrap(), "1.5");
    assert_eq!(text("1e0").unwrap(), "1");
    assert_eq!(text("0e5").unwrap(), "0");
    assert_eq!(text("-0.0100").unwrap(), "-0.0100");
    assert_eq!(text("1.50e-3").unwrap(), "0.00150");
    assert_eq!(text("1e131071").unwrap().len(), 131_072);
    assert_eq!(
        text("1e131072").unwrap_err(),
        "value overflows numeric format"
    );
    assert_eq!(
        text("1e-16384").unwrap_err(),
        "value overflows numeric format"
    );
    assert_eq!(
        text("1e-99999999999999999999").unwrap_err(),
        "value overflows numeric format"
    );
    // PostgreSQL 18: n >= 1e0 compares as numeric.
    assert_eq!(
        fold(TypeKind::Numeric, "numeric", &cond(CmpOp::Ge, "1e0")).unwrap(),
        Folded::Bound(CmpOp::Ge, Value::Numeric(Numeric::parse("1").unwrap()))
    );
    assert_eq!(
        fold(TypeKind::Numeric, "numeric", &quoted(CmpOp::Ge, "2.5e1")).unwrap(),
        Folded::Bound(CmpOp::Ge, Value::Numeric(Numeric::parse("25").unwrap()))
    );
    assert_eq!(
        fold(TypeKind::Numeric, "numeric", &quoted(CmpOp::Ge, "NaN")).unwrap(),
        Folded::Bound(CmpOp::Ge, Value::Numeric(Numeric::NaN))
    );
    // PostgreSQL 18: SELECT pg_typeof(2147483648), pg_typeof(-2147483648) → bigint, integer.
    assert_eq!(
        Decimal::parse("2147483648")
            .unwrap()
            .literal_type("2147483648"),
        "bigint"
    );
    assert_eq!(
        Decimal::parse("-2147483648")
            .unwrap()
            .literal_type("-2147483648"),
        "integer"
    );
    assert_eq!(
        fold(TypeKind::Text, "text", &cond(CmpOp::Eq, "5")).unwrap_err(),
        "operator does not exist: text = integer: write the literal in single quotes ('5') so that it takes the column's type"
    );
}
