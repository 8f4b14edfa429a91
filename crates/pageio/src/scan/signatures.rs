//! Which of `count`, `sum`, `avg`, `min`, `max` and `octet_length` PostgreSQL 18 resolves
//! for a column of each built-in type, so a call PostgreSQL refuses is refused here with its
//! own message (`function octet_length(numeric) does not exist`), and one it accepts but
//! pageio does not evaluate says so instead.
//!
//! # Mechanism
//!
//! The tables below are PostgreSQL 18.6's answers, taken from a running server: for every
//! type of `pg_type` with an oid below 10000 (`FirstGenbkiObjectId`, the oids fixed in the
//! source, the same in every cluster), whether `SELECT f(NULL::type)` resolves, through the
//! parser's implicit casts (`varchar` → `text`, `name` → `text`, any array → `anyarray`).
//! A type created later (a domain, an enum, an extension's type) has no fixed oid: whether
//! PostgreSQL accepts it is not known here, and the answer says pageio does not evaluate it.
//!
//! Regenerate with, on a PostgreSQL 18 server:
//!
//! ```sql
//! -- for each pg_type row with oid < 10000 and typtype in ('b','e','r','m'), each f:
//! DO $$ ... EXECUTE format('select %s(null::%s)', f, oid::regtype) ... $$;
//! ```

/// `format_type(oid, NULL)` of the built-in types the tables below cover.
const BUILTIN_TYPE_NAMES: &[(u32, &str)] = &[
    (16, "boolean"),
    (17, "bytea"),
    (18, "\"char\""),
    (19, "name"),
    (20, "bigint"),
    (21, "smallint"),
    (22, "int2vector"),
    (23, "integer"),
    (24, "regproc"),
    (25, "text"),
    (26, "oid"),
    (27, "tid"),
    (28, "xid"),
    (29, "cid"),
    (30, "oidvector"),
    (114, "json"),
    (142, "xml"),
    (143, "xml[]"),
    (199, "json[]"),
    (210, "pg_type[]"),
    (270, "pg_attribute[]"),
    (271, "xid8[]"),
    (272, "pg_proc[]"),
    (273, "pg_class[]"),
    (600, "point"),
    (601, "lseg"),
    (602, "path"),
    (603, "box"),
    (604, "polygon"),
    (628, "line"),
    (629, "line[]"),
    (650, "cidr"),
    (651, "cidr[]"),
    (700, "real"),
    (701, "double precision"),
    (718, "circle"),
    (719, "circle[]"),
    (774, "macaddr8"),
    (775, "macaddr8[]"),
    (790, "money"),
    (791, "money[]"),
    (829, "macaddr"),
    (869, "inet"),
    (1000, "boolean[]"),
    (1001, "bytea[]"),
    (1002, "\"char\"[]"),
    (1003, "name[]"),
    (1005, "smallint[]"),
    (1006, "int2vector[]"),
    (1007, "integer[]"),
    (1008, "regproc[]"),
    (1009, "text[]"),
    (1010, "tid[]"),
    (1011, "xid[]"),
    (1012, "cid[]"),
    (1013, "oidvector[]"),
    (1014, "character[]"),
    (1015, "character varying[]"),
    (1016, "bigint[]"),
    (1017, "point[]"),
    (1018, "lseg[]"),
    (1019, "path[]"),
    (1020, "box[]"),
    (1021, "real[]"),
    (1022, "double precision[]"),
    (1027, "polygon[]"),
    (1028, "oid[]"),
    (1033, "aclitem"),
    (1034, "aclitem[]"),
    (1040, "macaddr[]"),
    (1041, "inet[]"),
    (1042, "character"),
    (1043, "character varying"),
    (1082, "date"),
    (1083, "time without time zone"),
    (1114, "timestamp without time zone"),
    (1115, "timestamp without time zone[]"),
    (1182, "date[]"),
    (1183, "time without time zone[]"),
    (1184, "timestamp with time zone"),
    (1185, "timestamp with time zone[]"),
    (1186, "interval"),
    (1187, "interval[]"),
    (1231, "numeric[]"),
    (1263, "cstring[]"),
    (1266, "time with time zone"),
    (1270, "time with time zone[]"),
    (1560, "bit"),
    (1561, "bit[]"),
    (1562, "bit varying"),
    (1563, "bit varying[]"),
    (1700, "numeric"),
    (1790, "refcursor"),
    (2201, "refcursor[]"),
    (2202, "regprocedure"),
    (2203, "regoper"),
    (2204, "regoperator"),
    (2205, "regclass"),
    (2206, "regtype"),
    (2207, "regprocedure[]"),
    (2208, "regoper[]"),
    (2209, "regoperator[]"),
    (2210, "regclass[]"),
    (2211, "regtype[]"),
    (2949, "txid_snapshot[]"),
    (2950, "uuid"),
    (2951, "uuid[]"),
    (2970, "txid_snapshot"),
    (3220, "pg_lsn"),
    (3221, "pg_lsn[]"),
    (3614, "tsvector"),
    (3615, "tsquery"),
    (3642, "gtsvector"),
    (3643, "tsvector[]"),
    (3644, "gtsvector[]"),
    (3645, "tsquery[]"),
    (3734, "regconfig"),
    (3735, "regconfig[]"),
    (3769, "regdictionary"),
    (3770, "regdictionary[]"),
    (3802, "jsonb"),
    (3807, "jsonb[]"),
    (3904, "int4range"),
    (3905, "int4range[]"),
    (3906, "numrange"),
    (3907, "numrange[]"),
    (3908, "tsrange"),
    (3909, "tsrange[]"),
    (3910, "tstzrange"),
    (3911, "tstzrange[]"),
    (3912, "daterange"),
    (3913, "daterange[]"),
    (3926, "int8range"),
    (3927, "int8range[]"),
    (4072, "jsonpath"),
    (4073, "jsonpath[]"),
    (4089, "regnamespace"),
    (4090, "regnamespace[]"),
    (4096, "regrole"),
    (4097, "regrole[]"),
    (4191, "regcollation"),
    (4192, "regcollation[]"),
    (4451, "int4multirange"),
    (4532, "nummultirange"),
    (4533, "tsmultirange"),
    (4534, "tstzmultirange"),
    (4535, "datemultirange"),
    (4536, "int8multirange"),
    (5038, "pg_snapshot"),
    (5039, "pg_snapshot[]"),
    (5069, "xid8"),
    (6150, "int4multirange[]"),
    (6151, "nummultirange[]"),
    (6152, "tsmultirange[]"),
    (6153, "tstzmultirange[]"),
    (6155, "datemultirange[]"),
    (6157, "int8multirange[]"),
];

/// Built-in type oids `sum` accepts (sorted).
const SUM_ACCEPTS: &[u32] = &[20, 21, 23, 700, 701, 790, 1083, 1186, 1700];

/// Built-in type oids `avg` accepts (sorted).
const AVG_ACCEPTS: &[u32] = &[20, 21, 23, 700, 701, 1083, 1186, 1700];

/// Built-in type oids `min` accepts (sorted).
const MIN_ACCEPTS: &[u32] = &[
    17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 30, 143, 199, 210, 270, 271, 272, 273, 629, 650,
    651, 700, 701, 719, 775, 790, 791, 869, 1000, 1001, 1002, 1003, 1005, 1006, 1007, 1008, 1009,
    1010, 1011, 1012, 1013, 1014, 1015, 1016, 1017, 1018, 1019, 1020, 1021, 1022, 1027, 1028, 1034,
    1040, 1041, 1042, 1043, 1082, 1083, 1114, 1115, 1182, 1183, 1184, 1185, 1186, 1187, 1231, 1263,
    1266, 1270, 1561, 1563, 1700, 2201, 2202, 2203, 2204, 2205, 2206, 2207, 2208, 2209, 2210, 2211,
    2949, 2951, 3220, 3221, 3643, 3644, 3645, 3734, 3735, 3769, 3770, 3807, 3905, 3907, 3909, 3911,
    3913, 3927, 4073, 4089, 4090, 4096, 4097, 4191, 4192, 5039, 5069, 6150, 6151, 6152, 6153, 6155,
    6157,
];

/// Built-in type oids `max` accepts (sorted).
const MAX_ACCEPTS: &[u32] = &[
    17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 30, 143, 199, 210, 270, 271, 272, 273, 629, 650,
    651, 700, 701, 719, 775, 790, 791, 869, 1000, 1001, 1002, 1003, 1005, 1006, 1007, 1008, 1009,
    1010, 1011, 1012, 1013, 1014, 1015, 1016, 1017, 1018, 1019, 1020, 1021, 1022, 1027, 1028, 1034,
    1040, 1041, 1042, 1043, 1082, 1083, 1114, 1115, 1182, 1183, 1184, 1185, 1186, 1187, 1231, 1263,
    1266, 1270, 1561, 1563, 1700, 2201, 2202, 2203, 2204, 2205, 2206, 2207, 2208, 2209, 2210, 2211,
    2949, 2951, 3220, 3221, 3643, 3644, 3645, 3734, 3735, 3769, 3770, 3807, 3905, 3907, 3909, 3911,
    3913, 3927, 4073, 4089, 4090, 4096, 4097, 4191, 4192, 5039, 5069, 6150, 6151, 6152, 6153, 6155,
    6157,
];

/// Built-in type oids `octet_length` accepts (sorted).
const OCTET_LENGTH_ACCEPTS: &[u32] = &[17, 18, 19, 25, 1042, 1043, 1560, 1562];

/// The first oid not fixed in PostgreSQL's source (`FirstGenbkiObjectId`).
const FIRST_UNFIXED_OID: u32 = 10_000;

/// The function a select item calls on its column, as PostgreSQL names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Function {
    /// `count(col)`.
    Count,
    /// `sum(col)`.
    Sum,
    /// `avg(col)`.
    Avg,
    /// `min(col)`.
    Min,
    /// `max(col)`.
    Max,
    /// `octet_length(col)`, inside `sum(octet_length(col))`.
    OctetLength,
}

impl Function {
    /// The SQL name.
    pub fn name(self) -> &'static str {
        match self {
            Function::Count => "count",
            Function::Sum => "sum",
            Function::Avg => "avg",
            Function::Min => "min",
            Function::Max => "max",
            Function::OctetLength => "octet_length",
        }
    }
}

/// `format_type(type_oid, NULL)` for a built-in type, else `catalog_name`.
pub fn type_display_name(type_oid: u32, catalog_name: &str) -> String {
    BUILTIN_TYPE_NAMES
        .binary_search_by_key(&type_oid, |(oid, _)| *oid)
        .map(|i| BUILTIN_TYPE_NAMES[i].1.to_string())
        .unwrap_or_else(|_| catalog_name.to_string())
}

/// PostgreSQL's answer to `f(column of type_oid)`: `Ok(true)` if it resolves, `Ok(false)`
/// if the type is not built in (PostgreSQL's answer is not known here), or PostgreSQL's
/// own error (`function octet_length(numeric) does not exist`).
pub fn resolves(function: Function, type_oid: u32, catalog_name: &str) -> Result<bool, String> {
    let accepts: &[u32] = match function {
        Function::Count => return Ok(true),
        Function::Sum => SUM_ACCEPTS,
        Function::Avg => AVG_ACCEPTS,
        Function::Min => MIN_ACCEPTS,
        Function::Max => MAX_ACCEPTS,
        Function::OctetLength => OCTET_LENGTH_ACCEPTS,
    };
    if type_oid >= FIRST_UNFIXED_OID
        || BUILTIN_TYPE_NAMES
            .binary_search_by_key(&type_oid, |(oid, _)| *oid)
            .is_err()
    {
        return Ok(false);
    }
    if accepts.binary_search(&type_oid).is_ok() {
        Ok(true)
    } else {
        Err(format!(
            "function {}({}) does not exist",
            function.name(),
            type_display_name(type_oid, catalog_name)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_sorted() {
        assert!(BUILTIN_TYPE_NAMES.windows(2).all(|w| w[0].0 < w[1].0));
        for t in [
            SUM_ACCEPTS,
            AVG_ACCEPTS,
            MIN_ACCEPTS,
            MAX_ACCEPTS,
            OCTET_LENGTH_ACCEPTS,
        ] {
            assert!(t.windows(2).all(|w| w[0] < w[1]));
        }
    }

    #[test]
    fn answers_as_postgresql_18() {
        // PostgreSQL 18.6: SELECT octet_length(1.5::numeric) →
        // ERROR:  function octet_length(numeric) does not exist
        assert_eq!(
            resolves(Function::OctetLength, 1700, "numeric").unwrap_err(),
            "function octet_length(numeric) does not exist"
        );
        // SELECT octet_length('{}'::jsonb) / octet_length('1.2.3.4'::inet): the same error.
        assert_eq!(
            resolves(Function::OctetLength, 3802, "jsonb").unwrap_err(),
            "function octet_length(jsonb) does not exist"
        );
        assert_eq!(
            resolves(Function::OctetLength, 869, "inet").unwrap_err(),
            "function octet_length(inet) does not exist"
        );
        // octet_length(varchar) and (name) resolve through the implicit cast to text.
        assert_eq!(resolves(Function::OctetLength, 1043, "varchar"), Ok(true));
        assert_eq!(resolves(Function::OctetLength, 19, "name"), Ok(true));
        // SELECT sum(now()::date) → function sum(date) does not exist
        assert_eq!(
            resolves(Function::Sum, 1082, "date").unwrap_err(),
            "function sum(date) does not exist"
        );
        // SELECT min(true) → function min(boolean) does not exist; min(bytea) exists in 18.
        assert_eq!(
            resolves(Function::Min, 16, "bool").unwrap_err(),
            "function min(boolean) does not exist"
        );
        assert_eq!(resolves(Function::Min, 17, "bytea"), Ok(true));
        // sum(money) and avg(interval) exist; sum(int4[]) does not, min(int4[]) does.
        assert_eq!(resolves(Function::Sum, 790, "money"), Ok(true));
        assert_eq!(resolves(Function::Avg, 1186, "interval"), Ok(true));
        assert_eq!(
            resolves(Function::Sum, 1007, "_int4").unwrap_err(),
            "function sum(integer[]) does not exist"
        );
        assert_eq!(resolves(Function::Max, 1007, "_int4"), Ok(true));
        // A domain or extension type: not known here.
        assert_eq!(resolves(Function::Sum, 16_385, "my_domain"), Ok(false));
        assert_eq!(resolves(Function::Count, 3802, "jsonb"), Ok(true));
    }
}
