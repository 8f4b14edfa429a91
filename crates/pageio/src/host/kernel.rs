//! Kernel facts: release, transparent huge pages, NUMA, scheduler knobs, io_uring sysctls,
//! and the process's resource limits.
//!
//! * release: `/proc/sys/kernel/osrelease` (`6.8.0-45-generic` → 6.8);
//! * THP: `/sys/kernel/mm/transparent_hugepage/{enabled,defrag}`, the bracketed choice;
//! * NUMA: `/sys/devices/system/node/node<N>/meminfo` (`Node N MemTotal: … kB`);
//! * scheduler: `kernel.sched_autogroup_enabled`, and the migration cost, a sysctl
//!   (`kernel.sched_migration_cost_ns`) before Linux 5.13 and a debugfs file
//!   (`/sys/kernel/debug/sched/migration_cost_ns`) since — whichever exists is read, and the
//!   file it came from is kept;
//! * io_uring: `kernel.io_uring_disabled` (0 allowed, 1 restricted to CAP_SYS_ADMIN or
//!   `kernel.io_uring_group`, 2 disabled) — the cause and fix come from the same wording the
//!   io_uring method uses when the kernel refuses a ring;
//! * clock source: `/sys/devices/system/clocksource/clocksource0/current_clocksource` (a
//!   slow one such as `xen` or `hpet` makes every clock read — and `track_io_timing` — costly);
//! * limits: `/proc/self/limits` (soft and hard `Max open files`, `Max locked memory`),
//!   parsed rather than asked of `getrlimit` so a captured tree can stand in for it.

use std::path::PathBuf;

use serde::Serialize;

use super::{bracketed_choice, HostError, Sysroot};

/// The kernel release.
pub const OSRELEASE: &str = "/proc/sys/kernel/osrelease";
/// The NUMA node directories.
pub const NODE_DIR: &str = "/sys/devices/system/node";
/// The migration cost sysctl (before Linux 5.13).
pub const MIGRATION_COST_SYSCTL: &str = "/proc/sys/kernel/sched_migration_cost_ns";
/// The migration cost in debugfs (Linux 5.13 and later).
pub const MIGRATION_COST_DEBUGFS: &str = "/sys/kernel/debug/sched/migration_cost_ns";
/// The clock source in use.
pub const CURRENT_CLOCKSOURCE: &str =
    "/sys/devices/system/clocksource/clocksource0/current_clocksource";
/// The clock sources the kernel could use.
pub const AVAILABLE_CLOCKSOURCE: &str =
    "/sys/devices/system/clocksource/clocksource0/available_clocksource";
/// The process's resource limits.
pub const PROC_SELF_LIMITS: &str = "/proc/self/limits";

/// The most NUMA nodes read. Linux's `MAX_NUMNODES` is at most 2^10 (`CONFIG_NODES_SHIFT`
/// ≤ 10); a directory listing more is not sysfs.
pub const MAX_NUMA_NODES: usize = 1 << 10;

/// Transparent huge pages.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ThpFacts {
    /// `enabled`: `always`, `madvise` or `never`.
    pub enabled: Option<String>,
    /// `defrag`: `always`, `defer`, `defer+madvise`, `madvise` or `never`.
    pub defrag: Option<String>,
}

/// One NUMA node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NumaNode {
    /// The node number.
    pub id: u32,
    /// `Node N MemTotal`, in bytes.
    pub mem_total_bytes: Option<u64>,
}

/// NUMA nodes (an empty list: no `/sys/devices/system/node`, i.e. not known).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NumaFacts {
    /// The nodes, by number.
    pub nodes: Vec<NumaNode>,
}

/// The io_uring sysctls and what they mean for a process that wants a ring.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct IoUringFacts {
    /// `kernel.io_uring_disabled` (absent before Linux 6.6).
    pub disabled: Option<u64>,
    /// `kernel.io_uring_group` (`-1`: no group).
    pub group: Option<i64>,
    /// When the sysctls refuse rings: the cause, in one sentence.
    pub refused_cause: Option<String>,
    /// When the sysctls refuse rings: the fix.
    pub refused_fix: Option<String>,
}

/// Kernel facts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct KernelFacts {
    /// `kernel.osrelease`, as written.
    pub release: Option<String>,
    /// The release's major and minor version.
    pub version: Option<(u32, u32)>,
    /// Transparent huge pages.
    pub thp: ThpFacts,
    /// NUMA nodes.
    pub numa: NumaFacts,
    /// `kernel.sched_autogroup_enabled`.
    pub sched_autogroup_enabled: Option<u64>,
    /// The scheduler's migration cost, in nanoseconds.
    pub sched_migration_cost_ns: Option<u64>,
    /// The file the migration cost was read from.
    pub sched_migration_cost_source: Option<PathBuf>,
    /// io_uring sysctls.
    pub io_uring: IoUringFacts,
    /// The clock source in use (`tsc`, `kvm-clock`, `xen`, `hpet`…).
    pub clocksource: Option<String>,
    /// The clock sources available.
    pub available_clocksources: Vec<String>,
}

/// A resource limit's value. Serialized as the number, or the string `"unlimited"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RlimitValue {
    /// `unlimited`.
    Unlimited,
    /// A number, in the limit's unit (descriptors, bytes).
    Limited(u64),
}

impl Serialize for RlimitValue {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Unlimited => serializer.serialize_str("unlimited"),
            Self::Limited(n) => serializer.serialize_u64(*n),
        }
    }
}

/// A soft and hard limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Rlimit {
    /// What the process gets now.
    pub soft: RlimitValue,
    /// What it may raise the soft limit to.
    pub hard: RlimitValue,
}

/// The process's resource limits that matter to an I/O engine.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ProcessLimits {
    /// `Max open files` (RLIMIT_NOFILE), descriptors.
    pub nofile: Option<Rlimit>,
    /// `Max locked memory` (RLIMIT_MEMLOCK), bytes.
    pub memlock_bytes: Option<Rlimit>,
}

/// `6.8.0-45-generic` → (6, 8).
pub fn parse_release(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.trim().split(['.', '-']);
    let major = parts.next()?.parse().ok()?;
    let minor_text: String = parts
        .next()?
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    Some((major, minor_text.parse().ok()?))
}

/// Reads the kernel facts.
pub fn read(sys: &Sysroot) -> KernelFacts {
    let release = sys.value(OSRELEASE);
    let version = release.as_deref().and_then(|r| {
        let v = parse_release(r);
        if v.is_none() {
            sys.note(HostError::Parse {
                path: OSRELEASE.into(),
                value: r.to_string(),
                expected: "a kernel release such as 6.8.0",
            });
        }
        v
    });
    let thp_file = |name: &str| {
        let path = format!("/sys/kernel/mm/transparent_hugepage/{name}");
        let text = sys.text(&path)?;
        let choice = bracketed_choice(&text);
        if choice.is_none() {
            sys.note(HostError::Parse {
                path: path.into(),
                value: text.trim().to_string(),
                expected: "a list of choices with the selected one in brackets",
            });
        }
        choice
    };
    let (sched_migration_cost_ns, sched_migration_cost_source) =
        match sys.u64_value(MIGRATION_COST_SYSCTL) {
            Some(ns) => (Some(ns), Some(MIGRATION_COST_SYSCTL.into())),
            None => match sys.u64_value(MIGRATION_COST_DEBUGFS) {
                Some(ns) => (Some(ns), Some(MIGRATION_COST_DEBUGFS.into())),
                None => (None, None),
            },
        };
    KernelFacts {
        release,
        version,
        thp: ThpFacts {
            enabled: thp_file("enabled"),
            defrag: thp_file("defrag"),
        },
        numa: read_numa(sys),
        sched_autogroup_enabled: sys.u64_value("/proc/sys/kernel/sched_autogroup_enabled"),
        sched_migration_cost_ns,
        sched_migration_cost_source,
        io_uring: read_io_uring(sys),
        clocksource: sys.value(CURRENT_CLOCKSOURCE),
        available_clocksources: sys
            .value(AVAILABLE_CLOCKSOURCE)
            .map(|v| v.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default(),
    }
}

/// Reads the NUMA nodes.
pub fn read_numa(sys: &Sysroot) -> NumaFacts {
    let Ok(entries) = std::fs::read_dir(sys.path(NODE_DIR)) else {
        return NumaFacts::default();
    };
    let mut ids: Vec<u32> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.strip_prefix("node")?.parse().ok())
        .take(MAX_NUMA_NODES + 1)
        .collect();
    if ids.len() > MAX_NUMA_NODES {
        sys.note(HostError::Walk {
            path: NODE_DIR.into(),
            what: format!("more than {MAX_NUMA_NODES} node directories; only the first read"),
        });
        ids.truncate(MAX_NUMA_NODES);
    }
    ids.sort_unstable();
    let nodes = ids
        .into_iter()
        .map(|id| {
            let path = format!("{NODE_DIR}/node{id}/meminfo");
            let mem_total_bytes = sys.text(&path).and_then(|text| {
                // `Node 0 MemTotal:  123 kB`: the key is the third word.
                let line = text
                    .lines()
                    .find(|l| l.split_whitespace().nth(2) == Some("MemTotal:"))?;
                let kib = line.split_whitespace().nth(3)?;
                sys.parse::<u64>(path.as_ref(), kib, "a size in kB")
                    .map(|k| k * 1024)
            });
            NumaNode {
                id,
                mem_total_bytes,
            }
        })
        .collect();
    NumaFacts { nodes }
}

/// Reads the io_uring sysctls and explains a refusal.
pub fn read_io_uring(sys: &Sysroot) -> IoUringFacts {
    let disabled = sys.u64_value("/proc/sys/kernel/io_uring_disabled");
    let group_text = sys.value("/proc/sys/kernel/io_uring_group");
    let group = group_text
        .as_deref()
        .and_then(|g| sys.parse("/proc/sys/kernel/io_uring_group".as_ref(), g, "a group id"));
    let (refused_cause, refused_fix) = match disabled {
        Some(2) => (
            Some("io_uring is disabled by kernel.io_uring_disabled=2".to_string()),
            Some(
                "set it to 0 (sysctl -w kernel.io_uring_disabled=0), or set io_method = worker \
                 (or auto)"
                    .to_string(),
            ),
        ),
        Some(1) => {
            let (cause, fix) =
                crate::aio::method::uring::restricted_by_sysctl(group_text.as_deref());
            (Some(cause), Some(fix))
        }
        _ => (None, None),
    };
    IoUringFacts {
        disabled,
        group,
        refused_cause,
        refused_fix,
    }
}

/// One limit of `/proc/self/limits`: the line starting with `name`, then soft, hard, unit.
pub fn parse_limit(text: &str, name: &str) -> Option<Result<Rlimit, String>> {
    let line = text.lines().find(|l| l.starts_with(name))?;
    let rest = &line[name.len()..];
    let mut words = rest.split_whitespace();
    let value = |w: Option<&str>| match w {
        Some("unlimited") => Ok(RlimitValue::Unlimited),
        Some(n) => n
            .parse()
            .map(RlimitValue::Limited)
            .map_err(|_| line.to_string()),
        None => Err(line.to_string()),
    };
    Some(value(words.next()).and_then(|soft| {
        Ok(Rlimit {
            soft,
            hard: value(words.next())?,
        })
    }))
}

/// Reads the process's resource limits.
pub fn read_limits(sys: &Sysroot) -> ProcessLimits {
    let Some(text) = sys.text(PROC_SELF_LIMITS) else {
        return ProcessLimits::default();
    };
    let get = |name: &str| match parse_limit(&text, name)? {
        Ok(limit) => Some(limit),
        Err(line) => {
            sys.note(HostError::Parse {
                path: PROC_SELF_LIMITS.into(),
                value: line,
                expected: "a limit line: name, soft, hard, units",
            });
            None
        }
    };
    ProcessLimits {
        nofile: get("Max open files"),
        memlock_bytes: get("Max locked memory"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_parse_to_major_and_minor() {
        assert_eq!(parse_release("6.8.0-45-generic\n"), Some((6, 8)));
        assert_eq!(parse_release("5.4.0"), Some((5, 4)));
        assert_eq!(parse_release("6.14-rc1"), Some((6, 14)));
        assert_eq!(parse_release("6.1+"), Some((6, 1)));
        assert_eq!(parse_release("linux"), None);
    }

    #[test]
    fn limits_lines_parse_soft_and_hard() {
        let text = "Limit                     Soft Limit           Hard Limit           Units     \n\
                    Max open files            1024                 524288               files     \n\
                    Max locked memory         8388608              unlimited            bytes     \n\
                    Max msgqueue size         bad                  819200               bytes     \n";
        assert_eq!(
            parse_limit(text, "Max open files"),
            Some(Ok(Rlimit {
                soft: RlimitValue::Limited(1024),
                hard: RlimitValue::Limited(524288)
            }))
        );
        assert_eq!(
            parse_limit(text, "Max locked memory"),
            Some(Ok(Rlimit {
                soft: RlimitValue::Limited(8 << 20),
                hard: RlimitValue::Unlimited
            }))
        );
        assert!(matches!(
            parse_limit(text, "Max msgqueue size"),
            Some(Err(_))
        ));
        assert_eq!(parse_limit(text, "Max processes"), None);
    }
}
