//! The fixed-width parts of the catalog rows this reader needs, at PostgreSQL 18's offsets.
//!
//! Every catalog's `FormData_pg_*` struct is the on-disk layout of its leading non-nullable
//! fixed-width columns (a catalog never has a null there, so no null bitmap shifts them),
//! aligned as the C compiler aligns them — which is PostgreSQL's `typalign`. The offsets
//! below are computed from `src/include/catalog/pg_*.h` of PostgreSQL 18 (catversion
//! 202506291): `NameData` is 64 bytes, `Oid`, `int32`, `float4` and `TransactionId` 4 bytes
//! aligned to 4, `int16` 2 aligned to 2, `bool` and `char` 1. The reader stops at the first
//! variable-length column, as the C struct does, with one exception: `pg_index.indkey`, an
//! `int2vector` inside the struct, whose 4-byte varlena header (storage `plain`, never a
//! short header) starts at offset 24. (The pg_index columns after it are read by deforming
//! the whole row, in `catalog/mod.rs`.)
//!
//! A row shorter than its catalog's fixed part is corrupt and reported as such.

/// `NAMEDATALEN`.
pub const NAMEDATALEN: usize = 64;

pub(crate) fn u32_at(d: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(d[off..off + 4].try_into().unwrap())
}
pub(crate) fn i32_at(d: &[u8], off: usize) -> i32 {
    i32::from_le_bytes(d[off..off + 4].try_into().unwrap())
}
pub(crate) fn i16_at(d: &[u8], off: usize) -> i16 {
    i16::from_le_bytes(d[off..off + 2].try_into().unwrap())
}
pub(crate) fn f32_at(d: &[u8], off: usize) -> f32 {
    f32::from_le_bytes(d[off..off + 4].try_into().unwrap())
}
/// A `NameData` at `off`: up to the first NUL of its 64 bytes.
pub(crate) fn name_at(d: &[u8], off: usize) -> String {
    let raw = &d[off..off + NAMEDATALEN];
    let end = raw.iter().position(|&b| b == 0).unwrap_or(NAMEDATALEN);
    String::from_utf8_lossy(&raw[..end]).into_owned()
}

/// `pg_database` (oid 1262): oid, datname, …, dattablespace at 92.
pub(crate) mod pg_database {
    pub const OID: u32 = 1262;
    pub const FIXED_BYTES: usize = 96;
    pub const DATNAME: usize = 4;
    pub const DATTABLESPACE: usize = 92;
}

/// `pg_tablespace` (oid 1213): oid, spcname.
pub(crate) mod pg_tablespace {
    pub const OID: u32 = 1213;
    pub const FIXED_BYTES: usize = 72;
    pub const SPCNAME: usize = 4;
}

/// `pg_authid` (oid 1260, shared, mapped): oid, rolname, seven bools (68..75), then
/// `rolconnlimit` (int4 at 76).
pub(crate) mod pg_authid {
    pub const OID: u32 = 1260;
    pub const FIXED_BYTES: usize = 80;
    pub const ROLNAME: usize = 4;
}

/// `pg_class` (oid 1259).
pub(crate) mod pg_class {
    pub const OID: u32 = 1259;
    pub const FIXED_BYTES: usize = 144;
    pub const RELNAME: usize = 4;
    pub const RELNAMESPACE: usize = 68;
    // reltype 72, reloftype 76.
    pub const RELOWNER: usize = 80;
    pub const RELAM: usize = 84;
    pub const RELFILENODE: usize = 88;
    pub const RELTABLESPACE: usize = 92;
    pub const RELPAGES: usize = 96;
    pub const RELTUPLES: usize = 100;
    // relallvisible 104, relallfrozen 108 (new in PostgreSQL 18).
    pub const RELTOASTRELID: usize = 112;
    pub const RELISSHARED: usize = 117;
    pub const RELPERSISTENCE: usize = 118;
    pub const RELKIND: usize = 119;
    pub const RELISPARTITION: usize = 131;
}

/// `pg_namespace` (oid 2615, not mapped).
pub(crate) mod pg_namespace {
    pub const OID: u32 = 2615;
    pub const FIXED_BYTES: usize = 72;
    pub const NSPNAME: usize = 4;
}

/// `pg_attribute` (oid 1249).
pub(crate) mod pg_attribute {
    pub const OID: u32 = 1249;
    pub const FIXED_BYTES: usize = 100;
    pub const ATTRELID: usize = 0;
    pub const ATTNAME: usize = 4;
    pub const ATTTYPID: usize = 68;
    pub const ATTLEN: usize = 72;
    pub const ATTNUM: usize = 74;
    pub const ATTBYVAL: usize = 82;
    pub const ATTALIGN: usize = 83;
    pub const ATTNOTNULL: usize = 86;
    pub const ATTHASMISSING: usize = 88;
    pub const ATTISDROPPED: usize = 91;
    pub const ATTCOLLATION: usize = 96;
}

/// `pg_type` (oid 1247).
pub(crate) mod pg_type {
    pub const OID: u32 = 1247;
    pub const FIXED_BYTES: usize = 148;
    pub const TYPNAME: usize = 4;
}

/// `pg_collation` (oid 3456, not mapped): oid, collname, collnamespace; the fixed part
/// ends with `collencoding` (int4 at 80).
pub(crate) mod pg_collation {
    pub const OID: u32 = 3456;
    pub const FIXED_BYTES: usize = 84;
    pub const COLLNAME: usize = 4;
}

/// `pg_index` (oid 2610, not mapped).
pub(crate) mod pg_index {
    pub const OID: u32 = 2610;
    /// Through `indkey`'s varlena header and the array header before its values.
    pub const FIXED_BYTES: usize = 24 + 24;
    pub const INDEXRELID: usize = 0;
    pub const INDRELID: usize = 4;
    pub const INDNKEYATTS: usize = 10;
    pub const INDISUNIQUE: usize = 12;
    pub const INDISPRIMARY: usize = 14;
    pub const INDISVALID: usize = 18;
    pub const INDKEY: usize = 24;
}

/// `pg_am` (oid 2601, not mapped).
pub(crate) mod pg_am {
    pub const OID: u32 = 2601;
    pub const FIXED_BYTES: usize = 73;
    pub const AMNAME: usize = 4;
}

/// The values of an `int2vector` whose varlena starts at `off`, or what is wrong with it.
pub(crate) fn int2vector_at(d: &[u8], off: usize) -> Result<Vec<i16>, String> {
    let header = u32_at(d, off);
    if header & 0b11 != 0 {
        return Err(format!(
            "indkey has varlena header {header:#x}, not the 4-byte uncompressed header an int2vector is stored with"
        ));
    }
    let len = (header >> 2) as usize;
    let ndim = i32_at(d, off + 4);
    let count = if ndim == 0 {
        0
    } else {
        i32_at(d, off + 16).max(0) as usize
    };
    if len < 24 + count * 2 || off + len > d.len() {
        return Err(format!(
            "indkey of {len} bytes with {count} values does not fit the row ({} bytes from the key)",
            d.len() - off
        ));
    }
    Ok((0..count).map(|i| i16_at(d, off + 24 + i * 2)).collect())
}
