//! A catalog column as the fixed-layout scans read it.
//!
//! The scans of a [`Table`](super::Table) (sequential, bitmap-heap and index scans on a
//! key range) read each row's columns by storage type: the key column by value, the others
//! only walked, which their length and alignment decide. A table resolved from the catalog
//! gives `pg_attribute` rows; these functions turn them into the storage types, with the
//! type knowledge of [`TypeKind`]:
//!
//! ```text
//!  key column:   int2, int4, int8, float4, float8 (pg_type oid and attlen agree)
//!  other column: attlen 1 ─► 1 byte; 2/s, 4/i, 8/d ─► fixed width; -1 ─► varlena at attalign
//! ```

use crate::catalog::Column;
use crate::page::heap::ColumnType;
use crate::page::tuple::align_bytes_of;
use crate::scan::value::TypeKind;

/// The storage type of `column` as a scan's key, which is compared by value: the integer
/// and floating-point types, whose `pg_type` oid and `attlen` agree; `None` for any other.
pub fn key_column_type(column: &Column) -> Option<ColumnType> {
    Some(match TypeKind::of(column.type_oid, column.attlen) {
        TypeKind::Int2 => ColumnType::Int2,
        TypeKind::Int4 => ColumnType::Int4,
        TypeKind::Int8 => ColumnType::Int8,
        TypeKind::Float4 => ColumnType::Float4,
        TypeKind::Float8 => ColumnType::Float8,
        _ => return None,
    })
}

/// The storage type `column` is walked over with when its value is not read: its length
/// and alignment (`attlen`, `attalign`); `None` for a layout the scans cannot walk (a
/// cstring, or a fixed width other than 1, 2/s, 4/i, 8/d).
pub fn walked_column_type(column: &Column) -> Option<ColumnType> {
    match (column.attlen, column.attalign) {
        (1, _) => Some(ColumnType::Bool),
        (2, 's') => Some(ColumnType::Int2),
        (4, 'i') => Some(ColumnType::Int4),
        (8, 'd') => Some(ColumnType::Int8),
        // align_bytes_of gives 1, 2, 4 or 8.
        (-1, align) => Some(ColumnType::Varlena {
            align_bytes: align_bytes_of(align) as u8,
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::{key_column_type, walked_column_type};
    use crate::catalog::Column;
    use crate::page::heap::ColumnType;

    fn column(type_oid: u32, attlen: i16, attalign: char) -> Column {
        Column {
            attnum: 1,
            name: "c".into(),
            type_name: None,
            type_oid,
            attlen,
            attalign,
            attbyval: attlen > 0,
            attnotnull: false,
            dropped: false,
            atthasmissing: false,
            collation_oid: 0,
            collation_name: None,
            missing_value: None,
        }
    }

    #[test]
    fn keys_are_the_numeric_types_whose_length_agrees() {
        let cases = [
            (21, 2, 's', Some(ColumnType::Int2)),
            (23, 4, 'i', Some(ColumnType::Int4)),
            (20, 8, 'd', Some(ColumnType::Int8)),
            (700, 4, 'i', Some(ColumnType::Float4)),
            (701, 8, 'd', Some(ColumnType::Float8)),
            // A damaged catalog: float8's oid with 4 bytes is never read as float8.
            (701, 4, 'i', None),
            (25, -1, 'i', None),
            (1082, 4, 'i', None),
            (1700, -1, 'i', None),
            (16, 1, 'c', None),
        ];
        for (oid, attlen, align, want) in cases {
            assert_eq!(key_column_type(&column(oid, attlen, align)), want, "{oid}");
        }
    }

    #[test]
    fn other_columns_are_walked_by_length_and_alignment() {
        let cases = [
            (16, 1, 'c', Some(ColumnType::Bool)),
            (21, 2, 's', Some(ColumnType::Int2)),
            (1082, 4, 'i', Some(ColumnType::Int4)),
            (1184, 8, 'd', Some(ColumnType::Int8)),
            (25, -1, 'i', Some(ColumnType::Varlena { align_bytes: 4 })),
            (1700, -1, 's', Some(ColumnType::Varlena { align_bytes: 2 })),
            (17, -1, 'c', Some(ColumnType::Varlena { align_bytes: 1 })),
            (1231, -1, 'd', Some(ColumnType::Varlena { align_bytes: 8 })),
            // uuid (16 bytes, align c), cstring and mis-aligned widths are not walked.
            (2950, 16, 'c', None),
            (2275, -2, 'c', None),
            (20, 8, 'i', None),
        ];
        for (oid, attlen, align, want) in cases {
            assert_eq!(
                walked_column_type(&column(oid, attlen, align)),
                want,
                "{oid}"
            );
        }
    }
}
