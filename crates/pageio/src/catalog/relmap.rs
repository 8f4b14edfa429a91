//! `pg_filenode.map`: the relation mapper's file (`src/backend/utils/cache/relmapper.c`).
//!
//! A handful of catalogs (pg_class, pg_attribute, pg_type, pg_proc, pg_database, …) must be
//! found before pg_class can be read, so their `pg_class.relfilenode` is 0 and their file
//! numbers live here instead: `global/pg_filenode.map` for shared catalogs, and
//! `base/<dboid>/pg_filenode.map` for each database's own.
//!
//! ```text
//!   0   magic         i32   0x592717 (RELMAPPER_FILEMAGIC)
//!   4   num_mappings  i32   0..=64   (MAX_MAPPINGS)
//!   8   mappings[64]        (mapoid u32, mapfilenumber u32), unused slots zero
//! 520   crc           u32   CRC-32C of bytes 0..520
//! ```
//!
//! The file is exactly 524 bytes; anything else, a wrong magic, a count past 64 or a CRC
//! that does not match is an error naming the file — a mapper file that cannot be trusted
//! would send every later lookup to the wrong file.

use std::path::Path;

use super::CatalogError;
use crate::page::control::crc32c;

/// `RELMAPPER_FILEMAGIC`.
pub const RELMAPPER_FILEMAGIC: u32 = 0x0059_2717;
/// `MAX_MAPPINGS`: slots in the file (fixed, so the file has a fixed size).
pub const MAX_MAPPINGS: usize = 64;
/// Byte offset of the CRC, which is also the number of bytes it covers.
const OFFSET_CRC: usize = 8 + MAX_MAPPINGS * 8;
/// `RELMAPPER_FILESIZE`.
pub const RELMAPPER_FILESIZE_BYTES: usize = OFFSET_CRC + 4;

/// The mappings of one `pg_filenode.map`: catalog oid → file number.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RelMap {
    /// `(mapoid, mapfilenumber)` pairs, in file order.
    pub mappings: Vec<(u32, u32)>,
}

/// The most bytes read of a mapper file: a page, well above its 512 bytes, so a wrong size
/// is reported by the parser with the size found.
const RELMAP_READ_MAX_BYTES: u64 = 8192;

impl RelMap {
    /// Reads and checks `path` (relative name `display` is used in messages).
    pub fn read(path: &Path, display: &str) -> Result<RelMap, CatalogError> {
        // The mapper file is 512 bytes; anything at its path that is not a small regular
        // file (a FIFO would block the read forever) is refused before it is read.
        let bytes = crate::storage::read_small_file(path, RELMAP_READ_MAX_BYTES).map_err(|e| {
            CatalogError::RelMap {
                path: display.to_string(),
                problem: format!("cannot be read: {e}"),
            }
        })?;
        RelMap::parse(&bytes, display)
    }

    /// Parses the bytes of a mapper file; `display` names it in messages.
    pub fn parse(bytes: &[u8], display: &str) -> Result<RelMap, CatalogError> {
        let bad = |problem: String| CatalogError::RelMap {
            path: display.to_string(),
            problem,
        };
        if bytes.len() != RELMAPPER_FILESIZE_BYTES {
            return Err(bad(format!(
                "is {} bytes, not the {RELMAPPER_FILESIZE_BYTES} bytes of a relation mapper file",
                bytes.len()
            )));
        }
        let u32_at = |off: usize| u32::from_le_bytes(bytes[off..off + 4].try_into().unwrap());
        let magic = u32_at(0);
        if magic != RELMAPPER_FILEMAGIC {
            return Err(bad(format!(
                "has magic {magic:#x}, not {RELMAPPER_FILEMAGIC:#x}: not a PostgreSQL relation mapper file"
            )));
        }
        let stored = u32_at(OFFSET_CRC);
        let computed = crc32c(&bytes[..OFFSET_CRC]);
        if stored != computed {
            return Err(bad(format!(
                "has CRC {stored:#010x} but its contents give {computed:#010x}: the file is corrupt"
            )));
        }
        let n = u32_at(4) as usize;
        if n > MAX_MAPPINGS {
            return Err(bad(format!(
                "claims {n} mappings, more than the {MAX_MAPPINGS} it can hold"
            )));
        }
        let mappings = (0..n)
            .map(|i| (u32_at(8 + i * 8), u32_at(12 + i * 8)))
            .collect();
        Ok(RelMap { mappings })
    }

    /// The file number mapped for catalog `oid`.
    pub fn filenumber(&self, oid: u32) -> Option<u32> {
        self.mappings
            .iter()
            .find(|(o, _)| *o == oid)
            .map(|(_, f)| *f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(mappings: &[(u32, u32)]) -> Vec<u8> {
        let mut b = vec![0u8; RELMAPPER_FILESIZE_BYTES];
        b[0..4].copy_from_slice(&RELMAPPER_FILEMAGIC.to_le_bytes());
        b[4..8].copy_from_slice(&(mappings.len() as u32).to_le_bytes());
        for (i, (o, f)) in mappings.iter().enumerate() {
            b[8 + i * 8..12 + i * 8].copy_from_slice(&o.to_le_bytes());
            b[12 + i * 8..16 + i * 8].copy_from_slice(&f.to_le_bytes());
        }
        let crc = crc32c(&b[..OFFSET_CRC]);
        b[OFFSET_CRC..].copy_from_slice(&crc.to_le_bytes());
        b
    }

    #[test]
    fn parses_and_refuses() {
        let good = file(&[(1259, 1259), (1249, 16999)]);
        let map = RelMap::parse(&good, "m").unwrap();
        assert_eq!(map.filenumber(1249), Some(16999));
        assert_eq!(map.filenumber(1), None);
        let mut flipped = good.clone();
        flipped[12] ^= 1;
        let e = RelMap::parse(&flipped, "global/pg_filenode.map").unwrap_err();
        assert!(e.to_string().contains("global/pg_filenode.map"), "{e}");
        assert!(e.to_string().contains("CRC"), "{e}");
        assert!(RelMap::parse(&good[..100], "m")
            .unwrap_err()
            .to_string()
            .contains("100 bytes"));
        let mut magic = good.clone();
        magic[0] = 0;
        assert!(RelMap::parse(&magic, "m")
            .unwrap_err()
            .to_string()
            .contains("magic"));
        let mut many = file(&[]);
        many[4..8].copy_from_slice(&65u32.to_le_bytes());
        let crc = crc32c(&many[..OFFSET_CRC]);
        many[OFFSET_CRC..].copy_from_slice(&crc.to_le_bytes());
        assert!(RelMap::parse(&many, "m")
            .unwrap_err()
            .to_string()
            .contains("65 mappings"));
    }
}
