//! What kind of device a disk is, decided from all its sysfs facts rather than one flag.
//!
//! `queue/rotational` is what the driver says, and virtual disks say anything: virtio-blk
//! reports `1` unless the hypervisor sets a flag most do not set, so a disk that serves
//! 50 000 random reads a second reads as a spinning disk. Advice built on that flag alone
//! (two I/Os in flight, `random_page_cost = 4`, tiny writeback limits) is worse than
//! PostgreSQL's own defaults. So the class comes from the evidence, strongest first:
//!
//! ```text
//!   name nvme*, driver nvme            → nvme     (unless the model is a cloud volume → virtual)
//!   driver virtio_blk, vd*, under virtio*,
//!   driver vbd / xvd* (Xen),
//!   vendor/model of a hypervisor or a cloud volume
//!     (QEMU, VMware, Msft Virtual Disk, Amazon EBS, Google PersistentDisk, VBOX)
//!                                      → virtual  (the rotational flag is not to be trusted)
//!   a virtual block device (loop, zram) → virtual
//!   rotational=0                        → ssd
//!   rotational=1 and a physical vendor
//!     (device/vendor present: ATA, SEAGATE…) → hdd
//!   rotational=1 with nothing else known → unknown (the flag alone is not trusted)
//!   nothing readable                    → unknown
//! ```
//!
//! A file system without a block device (overlay, NFS, tmpfs) is `network` when it is a
//! network file system and `unknown` otherwise. [`classify`] returns the class with the
//! evidence that decided it, so the advice can say why.

use serde::Serialize;

use super::storage::{BlockDevice, StorageFacts};

/// Vendor or model strings of virtual disks: hypervisors and cloud block volumes, whose
/// rotational flag says nothing about the medium underneath (compared case-insensitively as
/// substrings of `device/vendor` and `device/model`).
pub const VIRTUAL_DISK_MARKERS: [&str; 9] = [
    "qemu",
    "vmware",
    "msft virtual disk",
    "virtual disk",
    "amazon elastic block store",
    "amazon ebs",
    "persistentdisk",
    "vbox",
    "xen",
];

/// The PCI vendor id virtio devices carry in `device/vendor` (Red Hat, 0x1af4).
pub const VIRTIO_PCI_VENDOR: &str = "0x1af4";

/// File systems whose data is on another machine.
pub const NETWORK_FILE_SYSTEMS: [&str; 8] = [
    "nfs",
    "nfs4",
    "cifs",
    "smb3",
    "ceph",
    "glusterfs",
    "fuse.sshfs",
    "9p",
];

/// A device's class (see the module header).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DiskClass {
    /// An NVMe device.
    Nvme,
    /// A solid-state disk behind SATA/SAS (rotational=0 on a physical device).
    Ssd,
    /// A virtual disk (virtio, Xen, a hypervisor's or a cloud's volume): its rotational
    /// flag is not to be trusted, and its speed is whatever the host gives it.
    Virtual,
    /// A network file system.
    Network,
    /// Not enough evidence.
    Unknown,
    /// A spinning disk: rotational on a physical SATA/SAS device.
    Hdd,
}

impl DiskClass {
    /// The class's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            DiskClass::Nvme => "nvme",
            DiskClass::Ssd => "ssd",
            DiskClass::Virtual => "virtual",
            DiskClass::Network => "network",
            DiskClass::Unknown => "unknown",
            DiskClass::Hdd => "hdd",
        }
    }

    /// Whether the device is known to be fast at random reads (flash).
    pub fn is_flash(self) -> bool {
        matches!(self, DiskClass::Nvme | DiskClass::Ssd)
    }

    /// Whether the device is known to seek (a spinning disk).
    pub fn spins(self) -> bool {
        self == DiskClass::Hdd
    }
}

/// A class and the evidence that decided it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Classified {
    /// The class.
    pub class: DiskClass,
    /// The facts that decided it, in words ("driver virtio_blk; rotational=1 not trusted").
    pub evidence: String,
}

fn lower(v: &Option<String>) -> String {
    v.as_deref().unwrap_or("").to_ascii_lowercase()
}

/// The class of one disk (a device at the bottom of the stack).
pub fn classify_disk(d: &BlockDevice) -> Classified {
    let name = d.partition_of.as_deref().unwrap_or(&d.name);
    let driver = d.driver.as_deref().unwrap_or("");
    let (vendor, model) = (lower(&d.vendor), lower(&d.model));
    let path = d.sys_path.to_string_lossy();
    let rot = match d.rotational {
        Some(true) => "rotational=1",
        Some(false) => "rotational=0",
        None => "rotational unknown",
    };
    let mut queue = Vec::new();
    if let Some(n) = d.nr_requests {
        queue.push(format!("nr_requests {n}"));
    }
    if let Some(q) = d.hw_queues {
        queue.push(format!(
            "{q} hardware queue{}",
            if q == 1 { "" } else { "s" }
        ));
    }
    let queue = if queue.is_empty() {
        String::new()
    } else {
        format!("; {}", queue.join(", "))
    };
    let make = |class, what: String| Classified {
        class,
        evidence: format!("{name}: {what}{queue}"),
    };
    let marker = VIRTUAL_DISK_MARKERS
        .iter()
        .find(|m| vendor.contains(*m) || model.contains(*m));
    let shown = |v: &Option<String>| v.clone().unwrap_or_default();
    if name.starts_with("nvme") || driver == "nvme" {
        if let Some(m) = marker {
            return make(
                DiskClass::Virtual,
                format!("NVMe but model {:?} ({m}: a cloud volume)", shown(&d.model)),
            );
        }
        return make(DiskClass::Nvme, format!("NVMe ({name}), {rot}"));
    }
    if driver == "virtio_blk" || path.contains("/virtio") || vendor == VIRTIO_PCI_VENDOR {
        return make(
            DiskClass::Virtual,
            format!(
                "virtio disk (driver {}), {rot} not trusted",
                if driver.is_empty() { "virtio" } else { driver }
            ),
        );
    }
    if driver == "vbd" || name.starts_with("xvd") {
        return make(
            DiskClass::Virtual,
            format!("Xen virtual disk, {rot} not trusted"),
        );
    }
    if let Some(m) = marker {
        return make(
            DiskClass::Virtual,
            format!(
                "vendor {:?} model {:?} ({m}: a virtual disk), {rot} not trusted",
                shown(&d.vendor),
                shown(&d.model)
            ),
        );
    }
    if path.contains("/devices/virtual/") {
        return make(
            DiskClass::Virtual,
            format!("a virtual block device (loop, zram), {rot}"),
        );
    }
    match d.rotational {
        Some(false) => make(DiskClass::Ssd, format!("{rot}, not virtual")),
        Some(true) if d.vendor.is_some() => make(
            DiskClass::Hdd,
            format!(
                "{rot} on a physical disk (vendor {:?}, model {:?})",
                shown(&d.vendor),
                shown(&d.model)
            ),
        ),
        Some(true) => make(
            DiskClass::Unknown,
            format!("{rot} but no vendor or driver to confirm a spinning disk"),
        ),
        None => make(DiskClass::Unknown, "no queue facts".into()),
    }
}

/// The class of a data directory's storage: its disks' classes combined, the most cautious
/// winning (a spinning disk among SSDs makes the whole volume seek), with every disk's
/// evidence.
pub fn classify(storage: Option<&StorageFacts>) -> Classified {
    let Some(s) = storage else {
        return Classified {
            class: DiskClass::Unknown,
            evidence: "no data directory: its storage is not known".into(),
        };
    };
    if s.disks.is_empty() {
        let fs = s.mount.as_ref().map(|m| m.fs_type.as_str()).unwrap_or("?");
        let class = if NETWORK_FILE_SYSTEMS.contains(&fs) {
            DiskClass::Network
        } else {
            DiskClass::Unknown
        };
        return Classified {
            class,
            evidence: format!("{fs} has no block device"),
        };
    }
    let each: Vec<Classified> = s.disks.iter().map(classify_disk).collect();
    let class = each
        .iter()
        .map(|c| c.class)
        .max()
        .unwrap_or(DiskClass::Unknown);
    Classified {
        class,
        evidence: each
            .into_iter()
            .map(|c| c.evidence)
            .collect::<Vec<_>>()
            .join("; "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn disk(name: &str, path: &str) -> BlockDevice {
        BlockDevice {
            name: name.into(),
            sys_path: PathBuf::from(path),
            partition_of: None,
            dm_name: None,
            md_level: None,
            rotational: Some(true),
            scheduler: None,
            read_ahead_kb: None,
            slaves: Vec::new(),
            nr_requests: None,
            hw_queues: None,
            driver: None,
            vendor: None,
            model: None,
        }
    }

    #[test]
    fn the_rotational_flag_alone_never_makes_a_spinning_disk() {
        let mut d = disk(
            "vda",
            "/sys/devices/pci0000:00/0000:00:02.0/virtio1/block/vda",
        );
        d.driver = Some("virtio_blk".into());
        let c = classify_disk(&d);
        assert_eq!(c.class, DiskClass::Virtual);
        assert_eq!(
            c.evidence,
            "vda: virtio disk (driver virtio_blk), rotational=1 not trusted"
        );
        let mut d = disk("sda", "/sys/devices/pci0000:00/host0/block/sda");
        d.vendor = Some("VMware".into());
        d.model = Some("Virtual disk".into());
        assert_eq!(classify_disk(&d).class, DiskClass::Virtual);
        d.vendor = Some("ATA".into());
        d.model = Some("ST4000NM0035".into());
        assert_eq!(classify_disk(&d).class, DiskClass::Hdd);
        d.vendor = None;
        assert_eq!(classify_disk(&d).class, DiskClass::Unknown);
        let mut x = disk("xvda", "/sys/devices/vbd-51712/block/xvda");
        x.driver = Some("vbd".into());
        assert_eq!(classify_disk(&x).class, DiskClass::Virtual);
        let mut n = disk("nvme0n1", "/sys/devices/pci/nvme/nvme0/nvme0n1");
        n.rotational = Some(false);
        assert_eq!(classify_disk(&n).class, DiskClass::Nvme);
        n.model = Some("Amazon Elastic Block Store".into());
        assert_eq!(classify_disk(&n).class, DiskClass::Virtual);
        let mut s = disk("sdb", "/sys/devices/pci/ata2/host1/block/sdb");
        s.rotational = Some(false);
        s.vendor = Some("ATA".into());
        assert_eq!(classify_disk(&s).class, DiskClass::Ssd);
    }

    #[test]
    fn the_most_cautious_disk_decides_a_volume() {
        let mut ssd = disk("sda", "/sys/devices/pci/block/sda");
        ssd.rotational = Some(false);
        let mut hdd = disk("sdb", "/sys/devices/pci/block/sdb");
        hdd.vendor = Some("ATA".into());
        let facts = StorageFacts {
            path: PathBuf::from("/srv"),
            mount: None,
            device: None,
            disks: vec![ssd, hdd],
        };
        assert_eq!(classify(Some(&facts)).class, DiskClass::Hdd);
        assert_eq!(classify(None).class, DiskClass::Unknown);
    }
}
