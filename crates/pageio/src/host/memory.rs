//! Memory facts: `/proc/meminfo` and the `vm.*` sysctls that decide overcommit, swapping,
//! huge pages, dirty-page writeback and zone reclaim.
//!
//! `/proc/meminfo` gives sizes in kB (the kernel's "kB" is KiB) and huge-page counts bare;
//! sizes are turned into bytes here so no later layer has to remember the unit.

use serde::Serialize;

use super::Sysroot;

/// Where `/proc/meminfo` lives on the machine.
pub const MEMINFO: &str = "/proc/meminfo";

/// What `/proc/meminfo` and `/proc/sys/vm/*` say about memory. Each value is `None` when its
/// file or line is absent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MemoryFacts {
    /// `MemTotal`: the RAM the kernel manages, in bytes.
    pub mem_total_bytes: Option<u64>,
    /// `SwapTotal`, in bytes (0: no swap).
    pub swap_total_bytes: Option<u64>,
    /// `Hugepagesize`: the default huge page size, in bytes.
    pub hugepage_size_bytes: Option<u64>,
    /// `HugePages_Total`: huge pages in the pool.
    pub huge_pages_total: Option<u64>,
    /// `HugePages_Free`: huge pages not yet faulted in by anyone.
    pub huge_pages_free: Option<u64>,
    /// `HugePages_Rsvd`: free huge pages promised to mappings that have not touched them yet.
    pub huge_pages_rsvd: Option<u64>,
    /// `CommitLimit`, in bytes (what `vm.overcommit_memory=2` allows).
    pub commit_limit_bytes: Option<u64>,
    /// `Committed_AS`, in bytes (what is committed now).
    pub committed_as_bytes: Option<u64>,
    /// `vm.nr_hugepages`.
    pub nr_hugepages: Option<u64>,
    /// `vm.nr_overcommit_hugepages`.
    pub nr_overcommit_hugepages: Option<u64>,
    /// `vm.overcommit_memory` (0 heuristic, 1 always, 2 strict).
    pub overcommit_memory: Option<u64>,
    /// `vm.overcommit_ratio`, percent of RAM counted in `CommitLimit` under mode 2.
    pub overcommit_ratio: Option<u64>,
    /// `vm.swappiness`.
    pub swappiness: Option<u64>,
    /// `vm.dirty_ratio`, percent.
    pub dirty_ratio: Option<u64>,
    /// `vm.dirty_background_ratio`, percent.
    pub dirty_background_ratio: Option<u64>,
    /// `vm.dirty_bytes` (0: `dirty_ratio` applies).
    pub dirty_bytes: Option<u64>,
    /// `vm.dirty_background_bytes` (0: `dirty_background_ratio` applies).
    pub dirty_background_bytes: Option<u64>,
    /// `vm.zone_reclaim_mode`.
    pub zone_reclaim_mode: Option<u64>,
}

impl MemoryFacts {
    /// Huge pages that are free and not promised to anyone: what a new mapping can get.
    pub fn huge_pages_available(&self) -> Option<u64> {
        Some(self.huge_pages_free?.saturating_sub(self.huge_pages_rsvd?))
    }
}

/// One `/proc/meminfo` value: `Key:   123 kB` (bytes, from KiB) or `Key:   123` (a count).
pub fn meminfo_value(text: &str, key: &str) -> Option<Result<u64, String>> {
    let line = text
        .lines()
        .find(|l| l.split(':').next().map(str::trim) == Some(key))?;
    let value = line.split_once(':')?.1.trim();
    let mut words = value.split_whitespace();
    let number = words.next().unwrap_or("");
    let parsed = number.parse::<u64>().map_err(|_| value.to_string());
    Some(match words.next() {
        None => parsed,
        Some("kB") => parsed.and_then(|kib| kib.checked_mul(1024).ok_or(value.to_string())),
        Some(_) => Err(value.to_string()),
    })
}

/// Reads the memory facts.
pub fn read(sys: &Sysroot) -> MemoryFacts {
    let meminfo = sys.text(MEMINFO).unwrap_or_default();
    let get = |key: &str| match meminfo_value(&meminfo, key)? {
        Ok(v) => Some(v),
        Err(value) => {
            sys.note(super::HostError::Parse {
                path: MEMINFO.into(),
                value: format!("{key}: {value}"),
                expected: "a number, optionally in kB",
            });
            None
        }
    };
    let vm = |name: &str| sys.u64_value(format!("/proc/sys/vm/{name}"));
    MemoryFacts {
        mem_total_bytes: get("MemTotal"),
        swap_total_bytes: get("SwapTotal"),
        hugepage_size_bytes: get("Hugepagesize"),
        huge_pages_total: get("HugePages_Total"),
        huge_pages_free: get("HugePages_Free"),
        huge_pages_rsvd: get("HugePages_Rsvd"),
        commit_limit_bytes: get("CommitLimit"),
        committed_as_bytes: get("Committed_AS"),
        nr_hugepages: vm("nr_hugepages"),
        nr_overcommit_hugepages: vm("nr_overcommit_hugepages"),
        overcommit_memory: vm("overcommit_memory"),
        overcommit_ratio: vm("overcommit_ratio"),
        swappiness: vm("swappiness"),
        dirty_ratio: vm("dirty_ratio"),
        dirty_background_ratio: vm("dirty_background_ratio"),
        dirty_bytes: vm("dirty_bytes"),
        dirty_background_bytes: vm("dirty_background_bytes"),
        zone_reclaim_mode: vm("zone_reclaim_mode"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "MemTotal:        4030120 kB\nSwapTotal:             0 kB\n\
                          HugePages_Total:      16\nHugepagesize:       2048 kB\nOdd: x kB\n";

    #[test]
    fn meminfo_sizes_are_bytes_and_counts_are_bare() {
        assert_eq!(meminfo_value(SAMPLE, "MemTotal"), Some(Ok(4030120 * 1024)));
        assert_eq!(meminfo_value(SAMPLE, "SwapTotal"), Some(Ok(0)));
        assert_eq!(meminfo_value(SAMPLE, "HugePages_Total"), Some(Ok(16)));
        assert_eq!(meminfo_value(SAMPLE, "Hugepagesize"), Some(Ok(2 << 20)));
        assert_eq!(meminfo_value(SAMPLE, "Missing"), None);
        assert_eq!(meminfo_value(SAMPLE, "Odd"), Some(Err("x kB".to_string())));
        // A key is matched whole, not as a prefix.
        assert_eq!(meminfo_value(SAMPLE, "Mem"), None);
    }
}
