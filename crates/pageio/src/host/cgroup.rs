//! Cgroup limits and the effective CPUs and RAM.
//!
//! The process's cgroup comes from `/proc/self/cgroup`: under cgroup v2 one line `0::/path`,
//! under v1 one line per hierarchy, `N:controller[,controller]:/path` (`name=systemd` lines
//! carry no controller and are ignored). A host with v1 controller lines is read as v1 even if
//! it also mounts the v2 hierarchy (the "hybrid" layout), because that is where the memory
//! and CPU controllers then live.
//!
//! Limits are read in the cgroup's directory under `/sys/fs/cgroup` (v2) or under the
//! controller's mount `/sys/fs/cgroup/<controller>` (v1), then in each parent up to the mount
//! root: a parent's limit binds its children too, so the tightest one on the way up applies.
//! Inside a cgroup namespace (a container) the path in `/proc/self/cgroup` may not exist under
//! the container's `/sys/fs/cgroup`, whose root *is* the container's cgroup; then the walk
//! starts at the mount root.
//!
//! Files read — v2: `memory.max`, `memory.high`, `cpu.max` (`max 100000` or
//! `quota period`), `cpuset.cpus.effective`; v1: `memory.limit_in_bytes` (a value near
//! 2^63 is the kernel's "unlimited"), `cpu.cfs_quota_us` (`-1`: unlimited),
//! `cpu.cfs_period_us`, `cpuset.cpus`.

use std::fmt;
use std::path::{Component, Path, PathBuf};

use serde::Serialize;

use super::memory::{MemoryFacts, MEMINFO};
use super::{cpu_list_count, HostError, Sysroot};

/// Where the process's cgroup membership is listed.
pub const PROC_SELF_CGROUP: &str = "/proc/self/cgroup";
/// Where cgroup hierarchies are mounted.
pub const CGROUP_MOUNT: &str = "/sys/fs/cgroup";
/// The host's online CPUs.
pub const CPU_ONLINE: &str = "/sys/devices/system/cpu/online";

/// The deepest cgroup path the walk follows. systemd and container runtimes nest a handful of
/// levels (`/system.slice/docker-<id>.scope`, Kubernetes' `/kubepods/burstable/pod…/…`);
/// 64 is far beyond any real layout and keeps a corrupt path from driving an unbounded walk.
pub const MAX_CGROUP_DEPTH: usize = 64;

/// cgroup v1 reports "no memory limit" as `PAGE_COUNTER_MAX` pages in bytes
/// (9223372036854771712 with 4 kB pages); anything at or above 2^62 bytes is that, not a
/// limit any machine could hold.
pub const V1_UNLIMITED_MIN_BYTES: u64 = 1 << 62;

/// The CFS period the kernel uses when `cpu.max` gives only a quota (`cpu.max` accepts
/// `QUOTA` alone and keeps the default period, 100 ms).
pub const CPU_MAX_DEFAULT_PERIOD_US: u64 = 100_000;

/// Which cgroup version holds the process's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum CgroupVersion {
    /// The legacy per-controller hierarchies.
    V1,
    /// The unified hierarchy.
    V2,
}

/// What decided an effective value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum LimitKind {
    /// The host's RAM (`MemTotal`): no cgroup limit is tighter.
    HostMemTotal,
    /// The host's online CPUs: no cgroup limit is tighter.
    HostOnlineCpus,
    /// cgroup v2 `memory.max`.
    V2MemoryMax,
    /// cgroup v2 `memory.high` (a throttling threshold, reported, not an effective limit).
    V2MemoryHigh,
    /// cgroup v2 `cpu.max`.
    V2CpuMax,
    /// cgroup v2 `cpuset.cpus.effective`.
    V2Cpuset,
    /// cgroup v1 `memory.limit_in_bytes`.
    V1MemoryLimit,
    /// cgroup v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`.
    V1CfsQuota,
    /// cgroup v1 `cpuset.cpus`.
    V1Cpuset,
}

impl LimitKind {
    /// The label a report prints before the location.
    pub fn label(self) -> &'static str {
        match self {
            Self::HostMemTotal => "host MemTotal",
            Self::HostOnlineCpus => "host online CPUs",
            Self::V2MemoryMax => "cgroup v2 memory.max",
            Self::V2MemoryHigh => "cgroup v2 memory.high",
            Self::V2CpuMax => "cgroup v2 cpu.max",
            Self::V2Cpuset => "cgroup v2 cpuset.cpus.effective",
            Self::V1MemoryLimit => "cgroup v1 memory.limit_in_bytes",
            Self::V1CfsQuota => "cgroup v1 cpu.cfs_quota_us",
            Self::V1Cpuset => "cgroup v1 cpuset.cpus",
        }
    }
}

/// A limit and where it was read: printed as `cgroup v2 memory.max at /sys/fs/cgroup/app`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Limit {
    /// Which limit.
    pub kind: LimitKind,
    /// The machine's path it was read at: the cgroup directory, or the host file.
    pub at: PathBuf,
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at {}", self.kind.label(), self.at.display())
    }
}

/// A value and the limit that decided it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Effective<T> {
    /// The value.
    pub value: T,
    /// Where it came from.
    pub limit: Limit,
}

/// The process's cgroup and the tightest limits found walking up from it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CgroupFacts {
    /// The version holding the limits (`None`: no `/proc/self/cgroup`).
    pub version: Option<CgroupVersion>,
    /// The cgroup path per hierarchy, as `/proc/self/cgroup` lists it (`("", path)` for v2,
    /// `("cpu,cpuacct", path)` for a v1 hierarchy).
    pub paths: Vec<(String, String)>,
    /// The tightest memory limit in bytes.
    pub memory_max_bytes: Option<Effective<u64>>,
    /// The tightest `memory.high` in bytes (v2).
    pub memory_high_bytes: Option<Effective<u64>>,
    /// The tightest CPU quota, in CPUs (1.5 = 150 ms of CPU time per 100 ms period).
    pub cpu_quota_cpus: Option<Effective<f64>>,
    /// The CPUs of the cgroup's cpuset.
    pub cpuset_cpus: Option<Effective<u32>>,
}

/// The host's CPUs and the effective CPUs and RAM (see the module header of [`super`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Resources {
    /// Online CPUs on the host.
    pub online_cpus: Option<u32>,
    /// The CPUs the process can use, and which limit decided it.
    pub effective_cpus: Option<Effective<u32>>,
    /// The RAM the process can use in bytes, and which limit decided it.
    pub effective_memory_bytes: Option<Effective<u64>>,
}

/// The cgroup directories from the process's cgroup up to the mount root, deepest first (all
/// machine paths).
fn levels(sys: &Sysroot, mount: &Path, cgroup_path: &str) -> Vec<PathBuf> {
    let mut parts: Vec<_> = Path::new(cgroup_path)
        .components()
        .filter_map(|c| match c {
            Component::Normal(p) => Some(p.to_os_string()),
            _ => None,
        })
        .collect();
    if parts.len() > MAX_CGROUP_DEPTH {
        sys.note(HostError::Walk {
            path: PROC_SELF_CGROUP.into(),
            what: format!(
                "cgroup path {cgroup_path} is deeper than {MAX_CGROUP_DEPTH} levels; only \
                 the mount root's limits were read"
            ),
        });
        parts.clear();
    }
    let leaf: PathBuf = parts.iter().fold(mount.to_path_buf(), |p, c| p.join(c));
    if !sys.path(&leaf).is_dir() {
        // Inside a cgroup namespace the mount root is the process's own cgroup.
        parts.clear();
    }
    (0..=parts.len())
        .rev()
        .map(|n| {
            parts[..n]
                .iter()
                .fold(mount.to_path_buf(), |p, c| p.join(c))
        })
        .collect()
}

/// Keeps `candidate` if it is strictly tighter than what was found so far (deeper levels come
/// first, so on a tie the deepest cgroup is named).
fn tighter<T: PartialOrd>(best: &mut Option<Effective<T>>, value: T, kind: LimitKind, at: &Path) {
    if best.as_ref().is_none_or(|b| value < b.value) {
        *best = Some(Effective {
            value,
            limit: Limit {
                kind,
                at: at.to_path_buf(),
            },
        });
    }
}

/// `memory.max`/`memory.high`: `max` or bytes.
fn v2_bytes(sys: &Sysroot, file: &Path) -> Option<u64> {
    let value = sys.value(file)?;
    if value == "max" {
        return None;
    }
    sys.parse(file, &value, "`max` or a byte count")
}

/// `cpu.max`: `max PERIOD` or `QUOTA PERIOD`, in CPUs.
fn v2_cpu_max(sys: &Sysroot, file: &Path) -> Option<f64> {
    let value = sys.value(file)?;
    let mut words = value.split_whitespace();
    let quota = words.next()?;
    if quota == "max" {
        return None;
    }
    let quota: u64 = sys.parse(file, quota, "`max` or a quota in microseconds")?;
    let period = match words.next() {
        Some(p) => sys.parse(file, p, "a period in microseconds")?,
        None => CPU_MAX_DEFAULT_PERIOD_US,
    };
    (period > 0).then(|| quota as f64 / period as f64)
}

fn cpu_list(sys: &Sysroot, file: &Path) -> Option<u32> {
    let value = sys.value(file)?;
    if value.is_empty() {
        // An empty cpuset file means "inherit" (v2) or "not configured": no limit here.
        return None;
    }
    let count = cpu_list_count(&value);
    if count.is_none() {
        sys.note(HostError::Parse {
            path: file.to_path_buf(),
            value,
            expected: "a CPU list such as 0-3,8",
        });
    }
    count
}

/// Reads the process's cgroup and its limits.
pub fn read(sys: &Sysroot) -> CgroupFacts {
    let mut facts = CgroupFacts::default();
    let Some(text) = sys.text(PROC_SELF_CGROUP) else {
        return facts;
    };
    let mut v2_path = None;
    let mut v1: Vec<(String, String)> = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let mut fields = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            sys.note(HostError::Parse {
                path: PROC_SELF_CGROUP.into(),
                value: line.to_string(),
                expected: "hierarchy-id:controllers:path",
            });
            continue;
        };
        facts
            .paths
            .push((controllers.to_string(), path.to_string()));
        if id == "0" && controllers.is_empty() {
            v2_path = Some(path.to_string());
        } else if !controllers.is_empty() && !controllers.starts_with("name=") {
            v1.push((controllers.to_string(), path.to_string()));
        }
    }
    let mount = Path::new(CGROUP_MOUNT);
    if !v1.is_empty() {
        facts.version = Some(CgroupVersion::V1);
        for (controllers, path) in &v1 {
            let names: Vec<&str> = controllers.split(',').collect();
            // The hierarchy is mounted at /sys/fs/cgroup/<controller> (with a link per
            // co-mounted controller) or at /sys/fs/cgroup/<controllers as listed>.
            let root = names
                .iter()
                .map(|n| mount.join(n))
                .chain(std::iter::once(mount.join(controllers)))
                .find(|p| sys.path(p).is_dir());
            let Some(root) = root else { continue };
            for dir in levels(sys, &root, path) {
                if names.contains(&"memory") {
                    let file = dir.join("memory.limit_in_bytes");
                    if let Some(bytes) = sys.u64_value(&file) {
                        if bytes < V1_UNLIMITED_MIN_BYTES {
                            tighter(
                                &mut facts.memory_max_bytes,
                                bytes,
                                LimitKind::V1MemoryLimit,
                                &dir,
                            );
                        }
                    }
                }
                if names.contains(&"cpu") {
                    let quota = sys.i64_value(dir.join("cpu.cfs_quota_us"));
                    let period = sys.u64_value(dir.join("cpu.cfs_period_us"));
                    if let (Some(quota), Some(period)) = (quota, period) {
                        if quota > 0 && period > 0 {
                            let cpus = quota as f64 / period as f64;
                            tighter(&mut facts.cpu_quota_cpus, cpus, LimitKind::V1CfsQuota, &dir);
                        }
                    }
                }
                if names.contains(&"cpuset") {
                    if let Some(n) = cpu_list(sys, &dir.join("cpuset.cpus")) {
                        tighter(&mut facts.cpuset_cpus, n, LimitKind::V1Cpuset, &dir);
                    }
                }
            }
        }
    } else if let Some(path) = v2_path {
        facts.version = Some(CgroupVersion::V2);
        let mut cpuset_seen = false;
        for dir in levels(sys, mount, &path) {
            if let Some(bytes) = v2_bytes(sys, &dir.join("memory.max")) {
                tighter(
                    &mut facts.memory_max_bytes,
                    bytes,
                    LimitKind::V2MemoryMax,
                    &dir,
                );
            }
            if let Some(bytes) = v2_bytes(sys, &dir.join("memory.high")) {
                tighter(
                    &mut facts.memory_high_bytes,
                    bytes,
                    LimitKind::V2MemoryHigh,
                    &dir,
                );
            }
            if let Some(cpus) = v2_cpu_max(sys, &dir.join("cpu.max")) {
                tighter(&mut facts.cpu_quota_cpus, cpus, LimitKind::V2CpuMax, &dir);
            }
            // `cpuset.cpus.effective` already folds in every ancestor: the deepest one is it.
            if !cpuset_seen {
                if let Some(n) = cpu_list(sys, &dir.join("cpuset.cpus.effective")) {
                    tighter(&mut facts.cpuset_cpus, n, LimitKind::V2Cpuset, &dir);
                    cpuset_seen = true;
                }
            }
        }
    }
    facts
}

/// The effective CPUs and RAM: the host's, or a cgroup's limit when it is tighter.
pub fn effective(sys: &Sysroot, memory: &MemoryFacts, cgroup: &CgroupFacts) -> Resources {
    let online_cpus = sys.value(CPU_ONLINE).and_then(|v| {
        let n = cpu_list_count(&v);
        if n.is_none() {
            sys.note(HostError::Parse {
                path: CPU_ONLINE.into(),
                value: v,
                expected: "a CPU list such as 0-3,8",
            });
        }
        n
    });

    let mut cpus = online_cpus.map(|value| Effective {
        value,
        limit: Limit {
            kind: LimitKind::HostOnlineCpus,
            at: CPU_ONLINE.into(),
        },
    });
    if let Some(set) = &cgroup.cpuset_cpus {
        tighter(&mut cpus, set.value, set.limit.kind, &set.limit.at);
    }
    if let Some(quota) = &cgroup.cpu_quota_cpus {
        // A quota of 1.5 CPUs lets 2 threads run (each part of the time): round up, but
        // never below one CPU.
        let whole = (quota.value.ceil() as u32).max(1);
        tighter(&mut cpus, whole, quota.limit.kind, &quota.limit.at);
    }

    let mut ram = memory.mem_total_bytes.map(|value| Effective {
        value,
        limit: Limit {
            kind: LimitKind::HostMemTotal,
            at: MEMINFO.into(),
        },
    });
    if let Some(max) = &cgroup.memory_max_bytes {
        tighter(&mut ram, max.value, max.limit.kind, &max.limit.at);
    }
    Resources {
        online_cpus,
        effective_cpus: cpus,
        effective_memory_bytes: ram,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_file(text: &str, check: impl FnOnce(&Sysroot, &Path)) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), text).unwrap();
        check(&Sysroot::new(dir.path()), Path::new("/f"));
    }

    #[test]
    fn cpu_max_is_a_quota_in_cpus_or_no_limit() {
        with_file("max 100000\n", |s, f| assert_eq!(v2_cpu_max(s, f), None));
        with_file("50000 100000\n", |s, f| {
            assert_eq!(v2_cpu_max(s, f), Some(0.5))
        });
        with_file("300000\n", |s, f| assert_eq!(v2_cpu_max(s, f), Some(3.0)));
        with_file("lots 100000\n", |s, f| {
            assert_eq!(v2_cpu_max(s, f), None);
            let problems = s.take_problems();
            assert_eq!(problems.len(), 1);
            assert!(problems[0]
                .to_string()
                .starts_with("/f: cannot parse \"lots\""));
        });
    }

    #[test]
    fn memory_max_is_bytes_or_no_limit() {
        with_file("max\n", |s, f| assert_eq!(v2_bytes(s, f), None));
        with_file("4294967296\n", |s, f| {
            assert_eq!(v2_bytes(s, f), Some(4 << 30))
        });
        with_file("4G\n", |s, f| {
            assert_eq!(v2_bytes(s, f), None);
            assert_eq!(s.take_problems().len(), 1);
        });
    }

    #[test]
    fn the_deepest_of_equal_limits_is_named() {
        let mut best = None;
        tighter(
            &mut best,
            4u64,
            LimitKind::V2MemoryMax,
            Path::new("/sys/fs/cgroup/a/b"),
        );
        tighter(
            &mut best,
            4u64,
            LimitKind::V2MemoryMax,
            Path::new("/sys/fs/cgroup/a"),
        );
        assert_eq!(
            best.as_ref().unwrap().limit.at,
            PathBuf::from("/sys/fs/cgroup/a/b")
        );
        tighter(
            &mut best,
            2u64,
            LimitKind::V2MemoryMax,
            Path::new("/sys/fs/cgroup"),
        );
        assert_eq!(
            best.unwrap().limit.to_string(),
            "cgroup v2 memory.max at /sys/fs/cgroup"
        );
    }
}
