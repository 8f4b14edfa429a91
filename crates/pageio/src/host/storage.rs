//! Storage facts for a data directory: its mount and the block devices behind it.
//!
//! The mount is the entry of `/proc/self/mountinfo` whose mount point is the longest
//! component-wise prefix of the path (the last such entry when one mount shadows another at
//! the same point). Its `major:minor` leads to `/sys/dev/block/M:m`, a link to the device's
//! sysfs directory. A partition (a directory with a `partition` file) takes its queue from
//! the whole disk, its parent directory. A device-mapper (LVM, dm-crypt) or md device lists
//! what it is built on in `slaves/`; the walk follows those down to the disks — at most
//! [`MAX_STACK_DEPTH`] levels and [`MAX_DEVICES`] devices, and a device that is its own
//! ancestor is reported as a broken tree naming the directory. Overlay, tmpfs and network file
//! systems have no block device (`major` 0): their device is `None`.
//!
//! Per device: `queue/rotational`, `queue/scheduler` (the bracketed choice),
//! `queue/read_ahead_kb` and `queue/nr_requests`, the hardware queues (`mq/*`), the driver
//! (the last component of the `device/driver` link: `virtio_blk`, `sd`, `nvme`), the SCSI
//! `device/vendor` and `device/model`, plus `dm/name` or `md/level` when present. What kind
//! of device that makes (NVMe, SSD, a spinning disk, a virtual disk whose rotational flag
//! means nothing) is [`super::disk_class`]'s decision.

use std::path::{Component, Path, PathBuf};

use serde::Serialize;

use super::{bracketed_choice, HostError, Sysroot};

/// The mount table of the process's mount namespace.
pub const MOUNTINFO: &str = "/proc/self/mountinfo";

/// The deepest device stack followed. Real stacks are a few levels (LVM on md on partitions
/// on disks, perhaps under dm-crypt: 4); 16 leaves room and bounds a broken tree.
pub const MAX_STACK_DEPTH: usize = 16;

/// The most devices visited under one mount: an md array or LVM volume group over many disks
/// stays well below this, and it bounds the walk over a broken tree.
pub const MAX_DEVICES: usize = 256;

/// The most hardware queues counted under `mq/`: NVMe has at most one per CPU (and a few
/// more for polling), so 4096 covers any machine and bounds the directory read.
pub const MAX_HW_QUEUES: usize = 4096;

/// One mount of `/proc/self/mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mount {
    /// Where it is mounted.
    pub mount_point: PathBuf,
    /// The file system type (`ext4`, `xfs`, `overlay`…).
    pub fs_type: String,
    /// The mount source (`/dev/mapper/vg-data`, `overlay`…).
    pub source: String,
    /// The device number's major.
    pub major: u32,
    /// The device number's minor.
    pub minor: u32,
    /// Per-mount options (`rw,noatime`).
    pub mount_options: Vec<String>,
    /// The file system's own options (`rw,data=ordered`).
    pub super_options: Vec<String>,
}

impl Mount {
    /// Whether access times are not written on reads (`noatime`). `relatime` still writes
    /// them now and then and is not counted.
    pub fn noatime(&self) -> bool {
        self.has_option("noatime")
    }

    /// Whether the mount or the file system has `option` (as written, or as `key=value`).
    pub fn has_option(&self, option: &str) -> bool {
        self.mount_options
            .iter()
            .chain(&self.super_options)
            .any(|o| o == option)
    }
}

/// One block device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BlockDevice {
    /// The kernel's name (`sda2`, `dm-0`, `md127`, `nvme0n1p1`).
    pub name: String,
    /// Its sysfs directory (the machine's path).
    pub sys_path: PathBuf,
    /// The whole disk when this is a partition.
    pub partition_of: Option<String>,
    /// The device-mapper name (`vg-data`), for a dm device.
    pub dm_name: Option<String>,
    /// The RAID level (`raid1`), for an md device.
    pub md_level: Option<String>,
    /// `queue/rotational`: a spinning disk.
    pub rotational: Option<bool>,
    /// `queue/scheduler`: the I/O scheduler in use.
    pub scheduler: Option<String>,
    /// `queue/read_ahead_kb`.
    pub read_ahead_kb: Option<u64>,
    /// The devices it is built on (`slaves/`), by name.
    pub slaves: Vec<String>,
    /// `queue/nr_requests`: requests the block layer queues per hardware queue.
    pub nr_requests: Option<u64>,
    /// Hardware queues (entries of `mq/`): one on a SATA disk, one per CPU or more on NVMe.
    pub hw_queues: Option<u64>,
    /// The driver bound to the disk: the last component of the `device/driver` link
    /// (`virtio_blk`, `sd`, `nvme`, `vbd`).
    pub driver: Option<String>,
    /// The SCSI vendor (`device/vendor`: `ATA`, `QEMU`, `VMware`, `Msft`, `Google`).
    pub vendor: Option<String>,
    /// The model (`device/model`: `Virtual disk`, `Amazon Elastic Block Store`).
    pub model: Option<String>,
}

/// The storage behind a path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StorageFacts {
    /// The path asked about (made absolute, and resolved on the real machine).
    pub path: PathBuf,
    /// Its mount.
    pub mount: Option<Mount>,
    /// The device the file system is on (`None` for a file system without one).
    pub device: Option<BlockDevice>,
    /// The devices at the bottom of the stack: disks, or partitions (which carry their disk's
    /// queue settings); the device itself when nothing is under it.
    pub disks: Vec<BlockDevice>,
}

/// Undoes mountinfo's octal escapes (`\040` is a space).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            if let Some(b) = field
                .get(i + 1..i + 4)
                .and_then(|d| u8::from_str_radix(d, 8).ok())
            {
                out.push(b);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses one mountinfo line.
pub fn parse_mountinfo_line(line: &str) -> Option<Mount> {
    let fields: Vec<&str> = line.split(' ').collect();
    let dash = fields.iter().position(|f| *f == "-")?;
    if dash < 6 || fields.len() < dash + 3 {
        return None;
    }
    let (major, minor) = fields[2].split_once(':')?;
    let split = |s: &str| s.split(',').map(str::to_string).collect::<Vec<_>>();
    Some(Mount {
        mount_point: PathBuf::from(unescape(fields[4])),
        fs_type: fields[dash + 1].to_string(),
        source: unescape(fields[dash + 2]),
        major: major.parse().ok()?,
        minor: minor.parse().ok()?,
        mount_options: split(fields[5]),
        super_options: fields.get(dash + 3).map(|s| split(s)).unwrap_or_default(),
    })
}

/// The mount holding `path`: the longest mount point that is a prefix of it.
pub fn mount_for(mounts: &[Mount], path: &Path) -> Option<Mount> {
    let mut best: Option<&Mount> = None;
    for m in mounts.iter().filter(|m| path.starts_with(&m.mount_point)) {
        let longer = best.is_none_or(|b| {
            m.mount_point.components().count() >= b.mount_point.components().count()
        });
        if longer {
            best = Some(m);
        }
    }
    best.cloned()
}

/// `path` made absolute and free of `.`/`..` without touching the file system.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::ParentDir => {
                out.pop();
            }
            _ => {}
        }
    }
    out
}

/// Reads the storage facts for `data_path` (a path on the machine).
pub fn read(sys: &Sysroot, data_path: &Path) -> StorageFacts {
    let path = if sys.is_host() {
        std::fs::canonicalize(data_path).unwrap_or_else(|_| {
            lexical(&std::env::current_dir().unwrap_or_default().join(data_path))
        })
    } else {
        lexical(data_path)
    };
    let mut mounts = Vec::new();
    for line in sys.text(MOUNTINFO).unwrap_or_default().lines() {
        if line.trim().is_empty() {
            continue;
        }
        match parse_mountinfo_line(line) {
            Some(m) => mounts.push(m),
            None => sys.note(HostError::Parse {
                path: MOUNTINFO.into(),
                value: line.to_string(),
                expected: "a mountinfo line (id parent major:minor root point options … - type source options)",
            }),
        }
    }
    let mount = mount_for(&mounts, &path);
    let mut facts = StorageFacts {
        path,
        mount,
        device: None,
        disks: Vec::new(),
    };
    let Some(m) = &facts.mount else { return facts };
    if m.major == 0 {
        return facts;
    }
    let link = sys.path(format!("/sys/dev/block/{}:{}", m.major, m.minor));
    let Ok(dir) = std::fs::canonicalize(&link) else {
        return facts;
    };
    let root = std::fs::canonicalize(sys.root()).unwrap_or_else(|_| sys.root().to_path_buf());
    let mut walk = Walk {
        sys,
        root,
        visited: 0,
        disks: Vec::new(),
    };
    let device = walk.device(&dir);
    let mut ancestors = vec![dir.clone()];
    walk.descend(&dir, &device, &mut ancestors);
    facts.device = Some(device);
    facts.disks = walk.disks;
    facts
}

struct Walk<'a> {
    sys: &'a Sysroot,
    /// The sysroot, resolved, so resolved sysfs paths can be named as the machine's.
    root: PathBuf,
    visited: usize,
    disks: Vec<BlockDevice>,
}

impl Walk<'_> {
    fn machine(&self, dir: &Path) -> PathBuf {
        match dir.strip_prefix(&self.root) {
            Ok(rest) => Path::new("/").join(rest),
            Err(_) => dir.to_path_buf(),
        }
    }

    /// The facts of the device whose (resolved) sysfs directory is `dir`.
    fn device(&mut self, dir: &Path) -> BlockDevice {
        self.visited += 1;
        let sys = self.sys;
        let machine = self.machine(dir);
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let is_partition = dir.join("partition").exists();
        let disk_dir = if is_partition {
            machine.parent().unwrap_or(&machine)
        } else {
            &machine
        };
        let partition_of = is_partition
            .then(|| {
                disk_dir
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
            })
            .flatten();
        let rotational = sys
            .u64_value(disk_dir.join("queue/rotational"))
            .map(|r| r != 0);
        let scheduler = sys.text(disk_dir.join("queue/scheduler")).and_then(|t| {
            let choice = bracketed_choice(&t);
            if choice.is_none() {
                sys.note(HostError::Parse {
                    path: disk_dir.join("queue/scheduler"),
                    value: t.trim().to_string(),
                    expected: "a list of schedulers with the selected one in brackets",
                });
            }
            choice
        });
        let mut slaves: Vec<String> = std::fs::read_dir(dir.join("slaves"))
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .take(MAX_DEVICES + 1)
                    .collect()
            })
            .unwrap_or_default();
        slaves.sort();
        // The driver link's target need not exist in a captured tree: only its name counts.
        let driver = std::fs::read_link(sys.path(disk_dir.join("device/driver")))
            .ok()
            .and_then(|t| t.file_name().map(|n| n.to_string_lossy().into_owned()));
        let hw_queues = std::fs::read_dir(sys.path(disk_dir.join("mq")))
            .ok()
            .map(|entries| entries.take(MAX_HW_QUEUES).count() as u64);
        BlockDevice {
            nr_requests: sys.u64_value(disk_dir.join("queue/nr_requests")),
            hw_queues,
            driver,
            vendor: sys.value(disk_dir.join("device/vendor")),
            model: sys.value(disk_dir.join("device/model")),
            name,
            partition_of,
            dm_name: sys.value(machine.join("dm/name")),
            md_level: sys.value(machine.join("md/level")),
            rotational,
            scheduler,
            read_ahead_kb: sys.u64_value(disk_dir.join("queue/read_ahead_kb")),
            slaves,
            sys_path: machine,
        }
    }

    /// Follows `device`'s slaves down to the disks.
    fn descend(&mut self, dir: &Path, device: &BlockDevice, ancestors: &mut Vec<PathBuf>) {
        if device.slaves.is_empty() {
            self.disks.push(device.clone());
            return;
        }
        if ancestors.len() > MAX_STACK_DEPTH {
            self.sys.note(HostError::Walk {
                path: self.machine(dir),
                what: format!(
                    "device stack deeper than {MAX_STACK_DEPTH} levels; not followed further"
                ),
            });
            return;
        }
        for slave in &device.slaves {
            if self.visited >= MAX_DEVICES {
                self.sys.note(HostError::Walk {
                    path: self.machine(dir),
                    what: format!(
                        "more than {MAX_DEVICES} devices under one mount; not followed further"
                    ),
                });
                return;
            }
            let by_class = self.sys.path(format!("/sys/class/block/{slave}"));
            let resolved = std::fs::canonicalize(&by_class)
                .or_else(|_| std::fs::canonicalize(dir.join("slaves").join(slave)));
            let Ok(slave_dir) = resolved else {
                self.sys.note(HostError::Walk {
                    path: self.machine(&dir.join("slaves").join(slave)),
                    what: format!("slave {slave} has no sysfs directory"),
                });
                continue;
            };
            if ancestors.contains(&slave_dir) {
                self.sys.note(HostError::Walk {
                    path: self.machine(&dir.join("slaves").join(slave)),
                    what: format!("device {slave} is built on itself (a cycle in slaves/)"),
                });
                continue;
            }
            let slave_device = self.device(&slave_dir);
            ancestors.push(slave_dir.clone());
            self.descend(&slave_dir, &slave_device, ancestors);
            ancestors.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines_parse_with_optional_fields_and_escapes() {
        let line = "36 35 253:0 / /srv/pg\\040data rw,noatime shared:1 master:2 - xfs /dev/mapper/vg-data rw,attr2";
        let m = parse_mountinfo_line(line).unwrap();
        assert_eq!(m.mount_point, PathBuf::from("/srv/pg data"));
        assert_eq!((m.major, m.minor), (253, 0));
        assert_eq!(m.fs_type, "xfs");
        assert_eq!(m.source, "/dev/mapper/vg-data");
        assert!(m.noatime());
        assert!(m.has_option("attr2"));
        assert!(parse_mountinfo_line("garbage").is_none());
    }

    #[test]
    fn the_longest_mount_point_wins_and_prefixes_are_whole_components() {
        let mounts: Vec<Mount> = [
            "1 0 8:1 / / rw - ext4 /dev/sda1 rw",
            "2 1 8:2 / /srv rw - ext4 /dev/sda2 rw",
            "3 1 8:3 / /srv/pg rw - xfs /dev/sda3 rw",
        ]
        .iter()
        .map(|l| parse_mountinfo_line(l).unwrap())
        .collect();
        let at = |p: &str| mount_for(&mounts, Path::new(p)).unwrap().mount_point;
        assert_eq!(at("/srv/pg/base/5"), PathBuf::from("/srv/pg"));
        assert_eq!(at("/srv/pgdata"), PathBuf::from("/srv"));
        assert_eq!(at("/home"), PathBuf::from("/"));
    }

    #[test]
    fn lexical_paths_are_absolute_and_normal() {
        assert_eq!(
            lexical(Path::new("/srv/./pg/../pg2")),
            PathBuf::from("/srv/pg2")
        );
        assert_eq!(lexical(Path::new("data")), PathBuf::from("/data"));
    }
}
