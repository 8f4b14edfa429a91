//! Storage rules: the data directory's file system and disks (the I/O scheduler, kernel
//! read-ahead, `noatime`, write barriers, O_DIRECT) and those of `pg_wal` when it is a link
//! to another file system.

use super::memory::{in_container, on_host};
use super::{skipped, Ctx, Verdict};
use crate::advise::{Status, UserInput};
use crate::host::disk_class::classify_disk;
use crate::host::Mount;

/// `read_ahead_kb` below this on a spinning disk leaves sequential scans seek-bound.
pub const MIN_ROTATIONAL_READ_AHEAD_KB: u64 = 1024;

/// The read-ahead the fix sets on a spinning disk when it is below
/// [`MIN_ROTATIONAL_READ_AHEAD_KB`]: 4 MB, a few of PostgreSQL's combined reads ahead of the
/// scan (kernel Documentation/block/queue-sysfs.rst read_ahead_kb).
pub const ROTATIONAL_READ_AHEAD_FIX_KB: u64 = 4096;

/// `blockdev --setra` counts 512-byte sectors: this many per kB.
const SECTORS_PER_KB: u64 = 2;

/// The scheduler for a seeking disk: mq-deadline bounds latency and merges requests
/// (kernel Documentation/block/deadline-iosched.rst).
pub const ROTATIONAL_SCHEDULER: &str = "mq-deadline";

/// The scheduler recommended for SSD and NVMe: fast devices need none.
pub const FAST_DEVICE_SCHEDULER: &str = "none";

/// Schedulers fine on SSD and NVMe: none, or mq-deadline's small cost. BFQ and kyber trade
/// throughput for desktop fairness at a high per-request CPU cost (kernel
/// Documentation/block/bfq-iosched.rst).
pub const FAST_DEVICE_SCHEDULERS: [&str; 2] = [FAST_DEVICE_SCHEDULER, ROTATIONAL_SCHEDULER];

/// Mount options that drop write barriers or the ordering of data before metadata, so a
/// power loss can reorder the WAL's flush past the data it protects (PostgreSQL docs 28.1
/// Reliability; ext4(5)).
pub const UNSAFE_MOUNT_OPTIONS: [&str; 3] = ["nobarrier", "barrier=0", "data=writeback"];

/// Why a storage check was not made without a data directory.
const NO_DATA_DIRECTORY: &str = "no data directory given (see data directory storage)";

/// The udev rules file the fixes for block queue settings (scheduler, read-ahead) name: a
/// rule there applies the setting each time the disk appears, so it survives a reboot.
pub const UDEV_RULES_FILE: &str = "/etc/udev/rules.d/60-postgresql-queue.rules";

/// Access-time options `noatime` replaces in an fstab line.
const ATIME_OPTIONS: [&str; 4] = ["relatime", "strictatime", "atime", "lazytime"];

fn storage<'a>(ctx: &Ctx<'a>) -> Option<&'a crate::host::StorageFacts> {
    ctx.facts.host.storage.as_ref()
}

/// The `/etc/fstab` line that mounts `m` as it is now, with `noatime` in place of the
/// access-time option: `source mount-point type options dump pass` (fstab(5); pass 1 for
/// the root file system, 2 for the others).
pub fn fstab_line(m: &Mount) -> String {
    let mut options: Vec<&str> = m
        .mount_options
        .iter()
        .map(String::as_str)
        .filter(|o| !ATIME_OPTIONS.contains(o))
        .collect();
    options.push("noatime");
    let escape = |s: &str| s.replace(' ', "\\040");
    format!(
        "{} {} {} {} 0 {}",
        escape(&m.source),
        escape(&m.mount_point.to_string_lossy()),
        m.fs_type,
        options.join(","),
        if m.mount_point == std::path::Path::new("/") {
            1
        } else {
            2
        }
    )
}

pub(super) fn r_device(ctx: &Ctx) -> Option<Verdict> {
    let Some(s) = storage(ctx) else {
        return Some(
            Verdict::new(Status::Ok, "not checked", "no data directory")
                .rec(format!(
                    "run with {} to check PGDATA's file system and disks",
                    ctx.names.usage(UserInput::PgData)
                ))
                .why("the storage checks need to know which file system holds the data")
                .fix(ctx.names.rerun(UserInput::PgData)),
        );
    };
    let mount = s.mount.as_ref();
    let disks: Vec<String> = s
        .disks
        .iter()
        .map(|d| {
            format!(
                "{} ({})",
                d.partition_of.clone().unwrap_or_else(|| d.name.clone()),
                match d.rotational {
                    Some(true) => "rotational",
                    Some(false) => "non-rotational",
                    None => "rotational unknown",
                }
            )
        })
        .collect();
    let via = s
        .device
        .as_ref()
        .map(|d| {
            let mut v = d.name.clone();
            if let Some(n) = &d.dm_name {
                v.push_str(&format!(" {n}"));
            }
            if let Some(l) = &d.md_level {
                v.push_str(&format!(" {l}"));
            }
            v
        })
        .unwrap_or_else(|| "no block device".into());
    Some(
        Verdict::new(
            Status::Ok,
            format!(
                "{} on {} {} via {via}; disks: {}",
                s.path.display(),
                mount.map(|m| m.fs_type.as_str()).unwrap_or("?"),
                mount
                    .map(|m| m.mount_point.display().to_string())
                    .unwrap_or_default(),
                if disks.is_empty() {
                    "none".into()
                } else {
                    disks.join(", ")
                }
            ),
            crate::host::storage::MOUNTINFO,
        )
        .rec(format!(
            "storage class {} ({})",
            ctx.disk.class.name(),
            ctx.disk.evidence
        ))
        .why("the storage class, not the rotational flag alone, decides the I/O scheduler, read-ahead, dirty writeback, effective_io_concurrency and random_page_cost below")
        .fix("none"),
    )
}

pub(super) fn r_scheduler(ctx: &Ctx) -> Option<Verdict> {
    let Some(s) = storage(ctx) else {
        return Some(skipped(NO_DATA_DIRECTORY, "/sys/block/*/queue/scheduler"));
    };
    let disks: Vec<_> = s.disks.iter().filter(|d| d.scheduler.is_some()).collect();
    if disks.is_empty() {
        return Some(skipped(
            "no disk under the data directory reports an I/O scheduler (no block device, or queue/scheduler not readable)",
            "/sys/block/*/queue/scheduler",
        ));
    }
    let mut bad = Vec::new();
    let mut found = Vec::new();
    for d in &disks {
        let name = d.partition_of.clone().unwrap_or_else(|| d.name.clone());
        let sched = d.scheduler.clone().unwrap_or_default();
        found.push(format!("{name} [{sched}]"));
        // Kernel Documentation/block: mq-deadline bounds latency and merges for seeking
        // disks; BFQ targets interactive desktops at a high per-request CPU cost; fast
        // devices need no scheduler ("none").
        let spins = classify_disk(d).class.spins();
        let want = if spins {
            ROTATIONAL_SCHEDULER
        } else {
            FAST_DEVICE_SCHEDULER
        };
        let fine = if spins {
            sched == ROTATIONAL_SCHEDULER
        } else {
            FAST_DEVICE_SCHEDULERS.contains(&sched.as_str())
        };
        if !fine {
            bad.push((name, want));
        }
    }
    let status = if bad.is_empty() {
        Status::Ok
    } else {
        Status::Warn
    };
    let fix = if bad.is_empty() {
        "none".to_string()
    } else {
        bad.iter()
            .map(|(n, w)| {
                format!(
                    "echo {w} > /sys/block/{n}/queue/scheduler; keep it with ACTION==\"add|change\", KERNEL==\"{n}\", ATTR{{queue/scheduler}}=\"{w}\" in {UDEV_RULES_FILE}{}",
                    on_host(ctx)
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    Some(
        Verdict::new(status, found.join(", "), "/sys/block/*/queue/scheduler")
            .rec("mq-deadline on spinning disks, none (or mq-deadline) on SSD, NVMe and virtual disks")
            .why("BFQ and kyber trade throughput for desktop fairness, and a seeking disk without a scheduler loses request merging")
            .fix(fix),
    )
}

pub(super) fn r_read_ahead(ctx: &Ctx) -> Option<Verdict> {
    let source = "/sys/block/*/queue/read_ahead_kb";
    let Some(s) = storage(ctx) else {
        return Some(skipped(NO_DATA_DIRECTORY, source));
    };
    let Some(dev) = s.device.as_ref() else {
        return Some(skipped(
            "the data directory's file system has no block device",
            source,
        ));
    };
    let Some(kb) = dev.read_ahead_kb else {
        return Some(skipped(
            format!("{} reports no read_ahead_kb", dev.name),
            source,
        ));
    };
    let spins = ctx.disk.class.spins();
    let status = if spins && kb < MIN_ROTATIONAL_READ_AHEAD_KB {
        Status::Warn
    } else {
        Status::Ok
    };
    let found = format!("{kb} kB on {}", dev.name);
    let source = format!("/sys/block/{}/queue/read_ahead_kb", dev.name);
    let rec = if spins {
        format!(
            "at least {MIN_ROTATIONAL_READ_AHEAD_KB} kB (a spinning disk; {ROTATIONAL_READ_AHEAD_FIX_KB} kB if lower)"
        )
    } else {
        format!(
            "{kb} kB (as is: storage class {}, and PostgreSQL 18 reads ahead itself)",
            ctx.disk.class.name()
        )
    };
    let fix = if status == Status::Ok {
        "none".to_string()
    } else {
        let disk = dev.partition_of.as_deref().unwrap_or(&dev.name);
        format!(
            "blockdev --setra {} /dev/{} ({ROTATIONAL_READ_AHEAD_FIX_KB} kB in 512-byte sectors); keep it with ACTION==\"add|change\", KERNEL==\"{disk}\", ATTR{{queue/read_ahead_kb}}=\"{ROTATIONAL_READ_AHEAD_FIX_KB}\" in {UDEV_RULES_FILE}{}",
            ROTATIONAL_READ_AHEAD_FIX_KB * SECTORS_PER_KB,
            dev.name,
            on_host(ctx)
        )
    };
    let why = "sequential scans on a seeking disk need large kernel read-ahead between \
               PostgreSQL's own combined reads";
    Some(
        Verdict::new(status, found, source)
            .rec(rec)
            .why(why)
            .fix(fix),
    )
}

/// The mount of the data directory, or the item saying why it is not known.
fn data_mount<'a>(ctx: &Ctx<'a>) -> Result<&'a Mount, Box<Verdict>> {
    let source = crate::host::storage::MOUNTINFO;
    match storage(ctx) {
        None => Err(Box::new(skipped(NO_DATA_DIRECTORY, source))),
        Some(s) => s
            .mount
            .as_ref()
            .ok_or_else(|| Box::new(skipped("no mount found for the data directory", source))),
    }
}

pub(super) fn r_noatime(ctx: &Ctx) -> Option<Verdict> {
    let mount = match data_mount(ctx) {
        Ok(m) => m,
        Err(v) => return Some(*v),
    };
    let status = if mount.noatime() {
        Status::Ok
    } else {
        Status::Warn
    };
    Some(
        Verdict::new(
            status,
            format!("{} {} ({})", mount.fs_type, mount.mount_point.display(), mount.mount_options.join(",")),
            crate::host::storage::MOUNTINFO,
        )
        .rec("noatime")
        .why("relation files are written all the time, so with relatime almost every first read after a write also writes the inode's access time")
        .fix(format!(
            "mount -o remount,noatime {}; keep it across reboots with this line in /etc/fstab (in place of the mount's line): {}{}",
            mount.mount_point.display(),
            fstab_line(mount),
            if in_container(ctx) {
                " (on the host, for the volume the container's data directory is on)"
            } else {
                ""
            }
        )),
    )
}

pub(super) fn r_barriers(ctx: &Ctx) -> Option<Verdict> {
    let mount = match data_mount(ctx) {
        Ok(m) => m,
        Err(v) => return Some(*v),
    };
    let unsafe_opts: Vec<&str> = UNSAFE_MOUNT_OPTIONS
        .into_iter()
        .filter(|o| mount.has_option(o))
        .collect();
    let status = if unsafe_opts.is_empty() {
        Status::Ok
    } else {
        Status::Bad
    };
    Some(
        Verdict::new(
            status,
            if unsafe_opts.is_empty() {
                "barriers on".to_string()
            } else {
                unsafe_opts.join(",")
            },
            crate::host::storage::MOUNTINFO,
        )
        .rec("write barriers on (no nobarrier, data=ordered)")
        .why("without barriers a power loss can reorder the WAL's flush past the data it protects, which PostgreSQL cannot repair (PostgreSQL docs, Reliability)")
        .fix(if unsafe_opts.is_empty() {
            "none".to_string()
        } else {
            format!(
                "remove {} from {}'s options in /etc/fstab and remount",
                unsafe_opts.join(","),
                mount.mount_point.display()
            )
        }),
    )
}

pub(super) fn r_direct_io(ctx: &Ctx) -> Option<Verdict> {
    let Some(probe) = ctx.facts.probes.direct_io.as_ref() else {
        return Some(skipped(
            "not probed (no data directory, or a captured tree: O_DIRECT is tried live only)",
            "open(O_DIRECT) on the data directory",
        ));
    };
    let (status, found) = match probe {
        Ok(Some(a)) => (
            Status::Ok,
            format!(
                "supported, memory alignment {} B, offset alignment {} B{}",
                a.mem_align_bytes,
                a.offset_align_bytes,
                if a.from_statx {
                    ""
                } else {
                    " (assumed; statx does not report it)"
                }
            ),
        ),
        Ok(None) => (
            Status::Warn,
            "not supported by this file system".to_string(),
        ),
        Err(e) => (Status::Warn, format!("not probed: {e}")),
    };
    let source = "open(O_DIRECT) of PG_VERSION, else statx(STATX_DIOALIGN), on the data directory";
    let why = format!(
        "PostgreSQL's debug_io_direct and pageio's {} need O_DIRECT; without it every read \
         goes through the page cache",
        ctx.names.name(UserInput::DirectIo)
    );
    let fix = if status == Status::Ok {
        "none"
    } else {
        "put PGDATA on ext4 or xfs (tmpfs and some network file systems refuse O_DIRECT)"
    };
    Some(
        Verdict::new(status, found, source)
            .rec("supported")
            .why(why)
            .fix(fix),
    )
}

pub(super) fn r_wal_storage(ctx: &Ctx) -> Option<Verdict> {
    let Some(s) = ctx.facts.wal_storage.as_ref() else {
        let inside = ctx
            .facts
            .instance
            .as_ref()
            .is_some_and(|i| i.pgdata.is_some());
        return Some(skipped(
            if inside {
                "pg_wal is not a link: it shares the data directory's file system, checked above"
            } else {
                NO_DATA_DIRECTORY
            },
            "pg_wal link",
        ));
    };
    let mount = s.mount.as_ref();
    let unsafe_opts: Vec<&str> = UNSAFE_MOUNT_OPTIONS
        .into_iter()
        .filter(|o| mount.is_some_and(|m| m.has_option(o)))
        .collect();
    let disks: Vec<String> = s
        .disks
        .iter()
        .map(|d| {
            format!(
                "{}{}",
                d.partition_of.clone().unwrap_or_else(|| d.name.clone()),
                match d.rotational {
                    Some(true) => " (rotational)",
                    Some(false) => " (non-rotational)",
                    None => "",
                }
            )
        })
        .collect();
    let status = if unsafe_opts.is_empty() {
        Status::Ok
    } else {
        Status::Bad
    };
    Some(
        Verdict::new(
            status,
            format!(
                "{} on {} {} ({}); disks: {}",
                s.path.display(),
                mount.map(|m| m.fs_type.as_str()).unwrap_or("?"),
                mount.map(|m| m.mount_point.display().to_string()).unwrap_or_default(),
                mount.map(|m| m.mount_options.join(",")).unwrap_or_default(),
                if disks.is_empty() { "none".to_string() } else { disks.join(", ") }
            ),
            "pg_wal link, /proc/self/mountinfo",
        )
        .rec("write barriers on")
        .why(if unsafe_opts.is_empty() {
            "WAL on its own file system: its flushes do not queue behind data writes"
        } else {
            "the WAL's flush is what makes a commit durable; without barriers a power loss can lose committed transactions"
        })
        .fix(if unsafe_opts.is_empty() {
            "none".to_string()
        } else {
            format!("remove {} from the WAL file system's options in /etc/fstab and remount", unsafe_opts.join(","))
        }),
    )
}
