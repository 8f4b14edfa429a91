//! PostgreSQL's memory units, as `postgresql.conf` and `SHOW` write them.
//!
//! A size setting has a base unit (`shared_buffers` counts 8 kB blocks, `work_mem` kB,
//! `max_wal_size` MB); a bare number is in that unit, and a number with `kB`, `MB`, `GB` or
//! `TB` (1024-based, case as PostgreSQL writes them) is converted. [`format_size`] writes a
//! byte count the way `SHOW` does: in the largest unit that divides it exactly.

/// 1 kB.
pub const KB: u64 = 1024;
/// 1 MB.
pub const MB: u64 = 1024 * KB;
/// 1 GB.
pub const GB: u64 = 1024 * MB;
/// 1 TB.
pub const TB: u64 = 1024 * GB;
/// PostgreSQL's block size (the base unit of `shared_buffers`, `effective_cache_size`,
/// `wal_buffers`, `io_combine_limit`).
pub const BLOCK: u64 = 8 * KB;

/// Bytes of a size value whose bare numbers are in `base_bytes`; `None` when it is not a
/// size (a typo, `-1`).
pub fn parse_size(value: &str, base_bytes: u64) -> Option<u64> {
    let v = value.trim().trim_matches('\'');
    let split = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(v.len());
    let (number, unit) = v.split_at(split);
    let number: f64 = number.parse().ok()?;
    let unit_bytes = match unit.trim() {
        "" => base_bytes,
        "B" => 1,
        "kB" => KB,
        "MB" => MB,
        "GB" => GB,
        "TB" => TB,
        _ => return None,
    };
    let bytes = number * unit_bytes as f64;
    (bytes.is_finite() && bytes >= 0.0).then_some(bytes as u64)
}

/// A byte count as `SHOW` prints it: the largest of TB, GB, MB, kB that divides it exactly
/// (`1GB`, `1536MB`, `4369kB`), else bytes.
pub fn format_size(bytes: u64) -> String {
    for (unit, name) in [(TB, "TB"), (GB, "GB"), (MB, "MB"), (KB, "kB")] {
        if bytes >= unit && bytes.is_multiple_of(unit) {
            return format!("{}{name}", bytes / unit);
        }
    }
    format!("{bytes}B")
}

/// A byte count for people: `4.0 GiB`, `512 MiB`.
pub fn human_bytes(bytes: u64) -> String {
    let b = bytes as f64;
    if bytes >= GB {
        format!("{:.1} GiB", b / GB as f64)
    } else if bytes >= 10 * MB {
        format!("{:.0} MiB", b / MB as f64)
    } else if bytes >= MB {
        format!("{:.1} MiB", b / MB as f64)
    } else {
        format!("{:.0} kiB", b / KB as f64)
    }
}

/// Rounds down to a whole multiple of `unit` (at least one `unit`).
pub fn round_down(bytes: u64, unit: u64) -> u64 {
    (bytes / unit).max(1) * unit
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_in_their_base_unit_and_print_like_show() {
        assert_eq!(parse_size("16384", BLOCK), Some(128 * MB));
        assert_eq!(parse_size("'1GB'", BLOCK), Some(GB));
        assert_eq!(parse_size("4MB", KB), Some(4 * MB));
        assert_eq!(parse_size("4096", KB), Some(4 * MB));
        assert_eq!(parse_size("-1", BLOCK), None);
        assert_eq!(parse_size("1 GB", MB), Some(GB));
        assert_eq!(parse_size("1gb", MB), None);
        assert_eq!(format_size(GB), "1GB");
        assert_eq!(format_size(1536 * MB), "1536MB");
        assert_eq!(format_size(4369 * KB), "4369kB");
        assert_eq!(format_size(100), "100B");
    }
}
