//! Storage rules: the data directory's file system and disks (the I/O scheduler, kernel
//! read-ahead, `noatime`, write barriers, O_DIRECT) and those of `pg_wal` when it is a link
//! to another file system.

use super::{Ctx, Verdict};
use crate::advise::{Status, UserInput};

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

fn storage<'a>(ctx: &Ctx<'a>) -> Option<&'a crate::host::StorageFacts> {
    ctx.facts.host.storage.as_ref()
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
        .rec("—")
        .why("the device type decides the I/O scheduler, effective_io_concurrency and random_page_cost below")
        .fix("none"),
    )
}

pub(super) fn r_scheduler(ctx: &Ctx) -> Option<Verdict> {
    let s = storage(ctx)?;
    let disks: Vec<_> = s.disks.iter().filter(|d| d.scheduler.is_some()).collect();
    if disks.is_empty() {
        return None;
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
        let want = if d.rotational == Some(true) {
            ROTATIONAL_SCHEDULER
        } else {
            FAST_DEVICE_SCHEDULER
        };
        let fine = if d.rotational == Some(true) {
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
                    "echo {w} > /sys/block/{n}/queue/scheduler; keep it with ACTION==\"add|change\", KERNEL==\"{n}\", ATTR{{queue/scheduler}}=\"{w}\" in /etc/udev/rules.d/60-io-scheduler.rules"
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    Some(
        Verdict::new(status, found.join(", "), "/sys/block/*/queue/scheduler")
            .rec("mq-deadline on rotational disks, none (or mq-deadline) on SSD/NVMe")
            .why("BFQ and kyber trade throughput for desktop fairness, and a seeking disk without a scheduler loses request merging")
            .fix(fix),
    )
}

pub(super) fn r_read_ahead(ctx: &Ctx) -> Option<Verdict> {
    let s = storage(ctx)?;
    let dev = s.device.as_ref()?;
    let kb = dev.read_ahead_kb?;
    let status = if ctx.rotational == Some(true) && kb < MIN_ROTATIONAL_READ_AHEAD_KB {
        Status::Warn
    } else {
        Status::Ok
    };
    let found = format!("{kb} kB on {}", dev.name);
    let source = format!("/sys/block/{}/queue/read_ahead_kb", dev.name);
    let rec = if ctx.rotational == Some(true) {
        format!(
            "at least {MIN_ROTATIONAL_READ_AHEAD_KB} kB (rotational; {ROTATIONAL_READ_AHEAD_FIX_KB} kB if lower)"
        )
    } else {
        format!("{kb} kB (as is: PostgreSQL 18 reads ahead itself)")
    };
    let fix = if status == Status::Ok {
        "none".to_string()
    } else {
        format!(
            "blockdev --setra {} /dev/{} ({ROTATIONAL_READ_AHEAD_FIX_KB} kB in 512-byte sectors); keep it in a udev rule",
            ROTATIONAL_READ_AHEAD_FIX_KB * SECTORS_PER_KB,
            dev.name
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

pub(super) fn r_noatime(ctx: &Ctx) -> Option<Verdict> {
    let mount = storage(ctx)?.mount.as_ref()?;
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
            "mount -o remount,noatime {}; add noatime to its options in /etc/fstab",
            mount.mount_point.display()
        )),
    )
}

pub(super) fn r_barriers(ctx: &Ctx) -> Option<Verdict> {
    let mount = storage(ctx)?.mount.as_ref()?;
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
    let probe = ctx.facts.probes.direct_io.as_ref()?;
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
    let s = ctx.facts.wal_storage.as_ref()?;
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
