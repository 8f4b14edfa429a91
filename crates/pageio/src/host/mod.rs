//! Facts about the machine, read from `/proc`, `/sys`, cgroups and the process's limits: the
//! first layer of `pageio advise`.
//!
//! # Sources
//!
//! One small reader per source, each a pure function of the files it reads:
//!
//! * [`memory`] — `/proc/meminfo` (RAM, swap, huge pages, commit accounting) and the `vm.*`
//!   sysctls that govern overcommit, swapping, dirty-page writeback and zone reclaim;
//! * [`cgroup`] — the process's cgroup from `/proc/self/cgroup` (v2 `0::/path` or the v1
//!   controller lines), and its memory, CPU-quota and cpuset limits under `/sys/fs/cgroup`,
//!   walking up the hierarchy to the tightest one; also the host's online CPUs and the
//!   *effective* resources (below);
//! * [`kernel`] — kernel release, transparent huge pages, NUMA nodes, scheduler knobs,
//!   io_uring sysctls and the process's resource limits (`/proc/self/limits`);
//! * [`storage`] — for a data directory: its mount (`/proc/self/mountinfo`), the block
//!   device behind it and, through device-mapper or md `slaves/`, the disks underneath, with
//!   their queue settings;
//! * [`disk_class`] — what kind of device those disks are (NVMe, SSD, a spinning disk, a
//!   virtual disk whose rotational flag is not to be trusted), with the evidence;
//! * [`container`] — whether the process runs in a container (`/.dockerenv`,
//!   `/run/.containerenv`, `/proc/1/cgroup`, `container=` in `/proc/1/environ`);
//! * [`process`] — the process's seccomp mode (`/proc/self/status`);
//! * [`pgbin`] — whether the PostgreSQL binaries link liburing (the ELF's `DT_NEEDED`);
//! * [`instance`] — a cluster's `PG_VERSION`, resolved configuration, checksums, size and
//!   running state;
//! * [`probe`] and [`clock`] — what must be tried live (io_uring setup, O_DIRECT, the cost of
//!   a clock read), as fields a test can inject.
//!
//! [`HostFacts::read`] gathers them all; it is `serde::Serialize` so a report can print it as
//! JSON unchanged.
//!
//! # The sysroot
//!
//! Every read goes through a [`Sysroot`]: a directory that stands for `/`. On a real machine
//! it is `/` ([`Sysroot::default`]); tests point it at a captured tree
//! (`crates/pageio/tests/hosts/<situation>/`) holding just the files a situation needs. The
//! paths the facts *report* (a cgroup directory, a mount point) are the machine's paths, not
//! the sysroot-prefixed ones, so the same report reads the same on a capture. For the same
//! reason the process's resource limits come from `/proc/self/limits` rather than
//! `getrlimit`.
//!
//! # Missing and unreadable files
//!
//! A file that does not exist is a fact too (an older kernel, no cgroup controller, a
//! container without `/sys/kernel/debug`): the value is `None`. A file that exists but cannot
//! be read, or holds something that does not parse, is also `None`, and the reason is kept in
//! [`HostFacts::problems`] as a [`HostError`] naming the file — never a panic and never a
//! made-up default.
//!
//! # Effective resources
//!
//! A process in a container sees the host's `MemTotal` and all of its CPUs, but may use only
//! what its cgroup allows. The *effective* RAM is the smaller of `MemTotal` and the tightest
//! `memory.max` (v2) / `memory.limit_in_bytes` (v1) on the way from the process's cgroup up to
//! the root; `memory.high` is a throttling threshold, not a limit, and is reported beside it.
//! The *effective* CPUs are the smallest of the online CPUs, the cpuset the cgroup may run on,
//! and the CPU quota (`cpu.max` / `cpu.cfs_quota_us ÷ cpu.cfs_period_us`, rounded up to whole
//! CPUs). Each effective value carries the [`Limit`] that decided it, printed as, e.g.,
//! `cgroup v2 memory.max at /sys/fs/cgroup/app`.

pub mod cgroup;
pub mod clock;
pub mod container;
pub mod disk_class;
pub mod instance;
pub mod kernel;
pub mod memory;
pub mod pgbin;
pub mod probe;
pub mod process;
pub mod storage;

use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;

use serde::Serialize;

pub use cgroup::{CgroupFacts, CgroupVersion, Effective, Limit, LimitKind, Resources};
pub use container::ContainerFacts;
pub use disk_class::{Classified, DiskClass};
pub use instance::{InstanceFacts, RunningState, SettingSource};
pub use kernel::{IoUringFacts, KernelFacts, NumaFacts, ProcessLimits, RlimitValue, ThpFacts};
pub use memory::MemoryFacts;
pub use pgbin::PgBinFacts;
pub use probe::Probes;
pub use process::SeccompFacts;
pub use storage::{BlockDevice, Mount, StorageFacts};

/// The largest file a reader takes in. Every source is a small text file (`/proc/self/
/// mountinfo` on a host with thousands of container mounts is the largest, well under a
/// megabyte); anything larger is not the file we expect, and reading it unbounded could take
/// the process's memory.
pub const MAX_FILE_BYTES: u64 = 4 << 20;

/// Why a fact could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The file exists but could not be read.
    #[error("cannot read {path}: {source}; check the file's permissions (or run as a user that may read it)")]
    Read {
        /// The machine's path of the file.
        path: PathBuf,
        /// What the kernel answered.
        source: std::io::Error,
    },
    /// The file was read but a value in it is not what that file holds.
    #[error("{path}: cannot parse {value:?} as {expected}; the file is not in the format this kernel interface documents")]
    Parse {
        /// The machine's path of the file.
        path: PathBuf,
        /// The text that did not parse.
        value: String,
        /// What it should have been.
        expected: &'static str,
    },
    /// The file is larger than [`MAX_FILE_BYTES`].
    #[error(
        "{path}: larger than {limit_bytes} bytes, not the small kernel interface file expected"
    )]
    TooLarge {
        /// The machine's path of the file.
        path: PathBuf,
        /// The bound that was exceeded.
        limit_bytes: u64,
    },
    /// A walk over links in `/sys` (device stacking, the cgroup hierarchy) went round in a
    /// circle or further than any real machine nests.
    #[error("{path}: {what}; the tree is corrupt or not a kernel interface")]
    Walk {
        /// Where the walk stopped.
        path: PathBuf,
        /// What went wrong.
        what: String,
    },
}

impl Serialize for HostError {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_string())
    }
}

/// The directory that stands for `/` in every read (see the module header).
#[derive(Debug)]
pub struct Sysroot {
    root: PathBuf,
    /// Files that exist but could not be read or parsed, collected as the readers go.
    problems: Mutex<Vec<HostError>>,
}

impl Default for Sysroot {
    /// The real machine: `/`.
    fn default() -> Self {
        Self::new("/")
    }
}

impl Sysroot {
    /// A sysroot at `root` (a captured tree in tests, `/` on the machine).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            problems: Mutex::new(Vec::new()),
        }
    }

    /// The directory that stands for `/`.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether this is the real machine (`/`), where paths may be resolved with the real
    /// file system.
    pub fn is_host(&self) -> bool {
        self.root == Path::new("/")
    }

    /// Where the machine's absolute path `machine_path` lives under this sysroot.
    pub fn path(&self, machine_path: impl AsRef<Path>) -> PathBuf {
        let relative: PathBuf = machine_path
            .as_ref()
            .components()
            .filter(|c| matches!(c, Component::Normal(_)))
            .collect();
        self.root.join(relative)
    }

    /// The machine's path for a path under this sysroot (the inverse of [`Sysroot::path`]),
    /// or the path unchanged when it is not under the sysroot.
    pub fn machine_path(&self, path: &Path) -> PathBuf {
        match path.strip_prefix(&self.root) {
            Ok(rest) => Path::new("/").join(rest),
            Err(_) => path.to_path_buf(),
        }
    }

    /// The text of the machine's file `machine_path`: `None` when it does not exist; when it
    /// exists but cannot be read, `None` and the reason kept in the problems.
    pub fn text(&self, machine_path: impl AsRef<Path>) -> Option<String> {
        let machine_path = machine_path.as_ref();
        match read_bounded(&self.path(machine_path)) {
            Ok(text) => Some(text),
            Err(ReadFailure::Missing) => None,
            Err(ReadFailure::Io(source)) => {
                self.note(HostError::Read {
                    path: machine_path.to_path_buf(),
                    source,
                });
                None
            }
            Err(ReadFailure::TooLarge) => {
                self.note(HostError::TooLarge {
                    path: machine_path.to_path_buf(),
                    limit_bytes: MAX_FILE_BYTES,
                });
                None
            }
        }
    }

    /// The first line of a one-value file, trimmed.
    pub fn value(&self, machine_path: impl AsRef<Path>) -> Option<String> {
        let text = self.text(machine_path)?;
        Some(text.lines().next().unwrap_or("").trim().to_string())
    }

    /// A one-number file (a sysctl), as `u64`; a value that does not parse is a problem.
    pub fn u64_value(&self, machine_path: impl AsRef<Path>) -> Option<u64> {
        let machine_path = machine_path.as_ref();
        let value = self.value(machine_path)?;
        self.parse(machine_path, &value, "an unsigned integer")
    }

    /// A one-number file that may be negative (`kernel.io_uring_group` is `-1` by default).
    pub fn i64_value(&self, machine_path: impl AsRef<Path>) -> Option<i64> {
        let machine_path = machine_path.as_ref();
        let value = self.value(machine_path)?;
        self.parse(machine_path, &value, "an integer")
    }

    /// Parses `value` read from `machine_path`, keeping a problem naming the file when it does
    /// not parse.
    pub fn parse<T: std::str::FromStr>(
        &self,
        machine_path: &Path,
        value: &str,
        expected: &'static str,
    ) -> Option<T> {
        match value.trim().parse() {
            Ok(v) => Some(v),
            Err(_) => {
                self.note(HostError::Parse {
                    path: machine_path.to_path_buf(),
                    value: value.to_string(),
                    expected,
                });
                None
            }
        }
    }

    /// Keeps a problem for the report.
    pub fn note(&self, problem: HostError) {
        self.problems
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(problem);
    }

    /// Takes the problems noted so far.
    pub fn take_problems(&self) -> Vec<HostError> {
        std::mem::take(&mut *self.problems.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

enum ReadFailure {
    Missing,
    Io(std::io::Error),
    TooLarge,
}

fn read_bounded(path: &Path) -> Result<String, ReadFailure> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory => ReadFailure::Missing,
        _ => ReadFailure::Io(e),
    })?;
    let mut bytes = Vec::new();
    // /proc and /sys files report a size of 0 or 4096, so the bound is on what is read.
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(ReadFailure::Io)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(ReadFailure::TooLarge);
    }
    String::from_utf8(bytes).map_err(|e| {
        ReadFailure::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            e.utf8_error(),
        ))
    })
}

/// The bracketed choice of a multiple-choice kernel file: `always [madvise] never` is
/// `madvise`, `mq-deadline kyber [bfq] none` is `bfq`. A file with one word and no brackets
/// (`none` for a device without a scheduler) is that word.
pub fn bracketed_choice(text: &str) -> Option<String> {
    let text = text.trim();
    if let Some(start) = text.find('[') {
        let rest = &text[start + 1..];
        let end = rest.find(']')?;
        return Some(rest[..end].to_string());
    }
    let mut words = text.split_whitespace();
    match (words.next(), words.next()) {
        (Some(only), None) => Some(only.to_string()),
        _ => None,
    }
}

/// The number of CPUs in a kernel CPU list (`0-3,8,10-11` is 7), or `None` when it is not
/// one. An empty list is 0 CPUs.
pub fn cpu_list_count(text: &str) -> Option<u32> {
    let mut count: u32 = 0;
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (lo, hi) = match part.split_once('-') {
            Some((lo, hi)) => (
                lo.trim().parse::<u32>().ok()?,
                hi.trim().parse::<u32>().ok()?,
            ),
            None => {
                let cpu = part.trim().parse::<u32>().ok()?;
                (cpu, cpu)
            }
        };
        if lo > hi {
            return None;
        }
        count = count.checked_add(hi - lo + 1)?;
    }
    Some(count)
}

/// Everything `pageio advise` reads from the machine.
#[derive(Debug, Serialize)]
pub struct HostFacts {
    /// The directory read as `/`.
    pub sysroot: PathBuf,
    /// Kernel release, THP, NUMA, scheduler, io_uring sysctls.
    pub kernel: KernelFacts,
    /// `/proc/meminfo` and the `vm.*` sysctls.
    pub memory: MemoryFacts,
    /// The process's cgroup and its limits.
    pub cgroup: CgroupFacts,
    /// Online CPUs and the effective CPUs and RAM (with the limit that applied).
    pub resources: Resources,
    /// The process's resource limits.
    pub limits: ProcessLimits,
    /// The data directory's mount and block devices, when a path was given.
    pub storage: Option<StorageFacts>,
    /// The class of the data directory's storage and the evidence for it.
    pub storage_class: Classified,
    /// Whether the process runs in a container, and what says so.
    pub container: ContainerFacts,
    /// Files that exist but could not be read or parsed, each naming the file.
    pub problems: Vec<HostError>,
}

impl HostFacts {
    /// Reads every source under `sysroot`; with `data_path`, also the storage behind it.
    /// Never fails: what cannot be read is `None`, and why is in [`HostFacts::problems`].
    ///
    /// ```
    /// use pageio::host::{HostFacts, Sysroot};
    ///
    /// let facts = HostFacts::read(&Sysroot::default(), Some(std::path::Path::new(".")));
    /// if let Some(cpus) = &facts.resources.effective_cpus {
    ///     println!("{} CPUs ({})", cpus.value, cpus.limit); // e.g. "2 CPUs (cgroup v2 cpu.max at …)"
    /// }
    /// ```
    pub fn read(sysroot: &Sysroot, data_path: Option<&Path>) -> Self {
        let kernel = kernel::read(sysroot);
        let memory = memory::read(sysroot);
        let cgroup = cgroup::read(sysroot);
        let resources = cgroup::effective(sysroot, &memory, &cgroup);
        let limits = kernel::read_limits(sysroot);
        let storage = data_path.map(|p| storage::read(sysroot, p));
        let storage_class = disk_class::classify(storage.as_ref());
        let container = container::read(sysroot);
        Self {
            storage_class,
            container,
            sysroot: sysroot.root().to_path_buf(),
            kernel,
            memory,
            cgroup,
            resources,
            limits,
            storage,
            problems: sysroot.take_problems(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bracketed_choice_takes_the_selected_word() {
        assert_eq!(
            bracketed_choice("always [madvise] never\n").as_deref(),
            Some("madvise")
        );
        assert_eq!(
            bracketed_choice("[always] madvise never").as_deref(),
            Some("always")
        );
        assert_eq!(
            bracketed_choice("mq-deadline kyber [bfq] none").as_deref(),
            Some("bfq")
        );
        assert_eq!(bracketed_choice("none\n").as_deref(), Some("none"));
        assert_eq!(bracketed_choice("a b"), None);
        assert_eq!(bracketed_choice("[open"), None);
    }

    #[test]
    fn cpu_lists_count_ranges_and_singles() {
        assert_eq!(cpu_list_count("0-3,8,10-11\n"), Some(7));
        assert_eq!(cpu_list_count("0"), Some(1));
        assert_eq!(cpu_list_count("0-63"), Some(64));
        assert_eq!(cpu_list_count(""), Some(0));
        assert_eq!(cpu_list_count("3-1"), None);
        assert_eq!(cpu_list_count("x"), None);
    }

    #[test]
    fn sysroot_maps_machine_paths_both_ways() {
        let sys = Sysroot::new("/tmp/capture");
        assert_eq!(
            sys.path("/proc/meminfo"),
            PathBuf::from("/tmp/capture/proc/meminfo")
        );
        // `..` cannot climb out of the sysroot.
        assert_eq!(
            sys.path("/../etc/passwd"),
            PathBuf::from("/tmp/capture/etc/passwd")
        );
        assert_eq!(
            sys.machine_path(Path::new("/tmp/capture/sys/fs/cgroup")),
            PathBuf::from("/sys/fs/cgroup")
        );
    }

    #[test]
    fn a_missing_file_is_none_and_a_bad_value_is_a_problem_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("proc/sys/vm")).unwrap();
        std::fs::write(dir.path().join("proc/sys/vm/swappiness"), "sixty\n").unwrap();
        let sys = Sysroot::new(dir.path());
        assert_eq!(sys.u64_value("/proc/sys/vm/dirty_ratio"), None);
        assert!(sys.take_problems().is_empty());
        assert_eq!(sys.u64_value("/proc/sys/vm/swappiness"), None);
        let problems = sys.take_problems();
        assert_eq!(problems.len(), 1);
        let message = problems[0].to_string();
        assert!(message.contains("/proc/sys/vm/swappiness"), "{message}");
        assert!(message.contains("sixty"), "{message}");
    }
}
