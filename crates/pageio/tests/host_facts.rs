//! Host facts read from captured machine trees (`tests/hosts/<situation>/`, described in
//! `tests/hosts/README.md`) and from the real machine.
//!
//! Each captured tree holds the few `/proc` and `/sys` files one situation needs; the tests
//! read it through a `Sysroot` and assert every parsed value and the effective CPUs and RAM
//! with the limit that applied. The real-machine test asserts shapes only.

mod common;

use std::path::{Path, PathBuf};

use pageio::host::kernel::{Rlimit, RlimitValue};
use pageio::host::{CgroupVersion, HostError, HostFacts, LimitKind, Sysroot};

const GIB: u64 = 1 << 30;

fn capture(situation: &str) -> Sysroot {
    Sysroot::new(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/hosts")
            .join(situation),
    )
}

/// Reads a captured tree and checks that nothing in it was unreadable or malformed.
fn read(situation: &str, data_path: Option<&str>) -> HostFacts {
    let facts = HostFacts::read(&capture(situation), data_path.map(Path::new));
    let problems: Vec<String> = facts.problems.iter().map(ToString::to_string).collect();
    assert!(problems.is_empty(), "{situation}: {problems:#?}");
    facts
}

#[test]
fn container_v2_gets_two_cpus_and_four_gib_from_the_tightest_cgroup_limits() {
    let facts = read("container-v2", Some("/var/lib/postgresql/data"));
    assert_eq!(facts.memory.mem_total_bytes, Some(256 * GIB));
    assert_eq!(facts.resources.online_cpus, Some(64));
    assert_eq!(facts.cgroup.version, Some(CgroupVersion::V2));
    assert_eq!(
        facts.cgroup.paths,
        vec![(String::new(), "/kubepods/pod1/ctr".to_string())]
    );

    // memory.max is 8 GiB on the container but 4 GiB on its pod: the pod's binds.
    let ram = facts.resources.effective_memory_bytes.as_ref().unwrap();
    assert_eq!(ram.value, 4 * GIB);
    assert_eq!(ram.limit.kind, LimitKind::V2MemoryMax);
    assert_eq!(
        ram.limit.to_string(),
        "cgroup v2 memory.max at /sys/fs/cgroup/kubepods/pod1"
    );
    // memory.high is reported beside it, not taken as the limit.
    let high = facts.cgroup.memory_high_bytes.as_ref().unwrap();
    assert_eq!(high.value, 3758096384);
    assert_eq!(
        high.limit.at,
        PathBuf::from("/sys/fs/cgroup/kubepods/pod1/ctr")
    );

    // cpu.max 200000/100000 on the container is tighter than 4 CPUs on the pod.
    let quota = facts.cgroup.cpu_quota_cpus.as_ref().unwrap();
    assert_eq!(quota.value, 2.0);
    let cpus = facts.resources.effective_cpus.as_ref().unwrap();
    assert_eq!(cpus.value, 2);
    assert_eq!(
        cpus.limit.to_string(),
        "cgroup v2 cpu.max at /sys/fs/cgroup/kubepods/pod1/ctr"
    );
    assert_eq!(facts.cgroup.cpuset_cpus.as_ref().unwrap().value, 64);

    // The container's root file system is an overlay: a mount, no block device.
    let storage = facts.storage.as_ref().unwrap();
    let mount = storage.mount.as_ref().unwrap();
    assert_eq!(mount.mount_point, PathBuf::from("/"));
    assert_eq!(mount.fs_type, "overlay");
    assert!(!mount.noatime());
    assert_eq!(storage.device, None);
    assert!(storage.disks.is_empty());
    assert_eq!(
        facts.limits.nofile,
        Some(Rlimit {
            soft: RlimitValue::Limited(1048576),
            hard: RlimitValue::Limited(1048576)
        })
    );
}

#[test]
fn a_container_in_a_cgroup_namespace_reads_its_limits_at_the_mount_root() {
    // Inside a cgroup namespace /proc/self/cgroup says `0::/` (or names a path the
    // container's /sys/fs/cgroup does not have) and the limits are at the mount root.
    let dir = tempfile::tempdir().unwrap();
    let put = |path: &str, text: &str| {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    put("proc/meminfo", "MemTotal:       268435456 kB\n");
    put(
        "proc/self/cgroup",
        "0::/../../system.slice/docker-abc.scope\n",
    );
    put("sys/devices/system/cpu/online", "0-63\n");
    put("sys/fs/cgroup/cgroup.controllers", "cpu memory\n");
    put("sys/fs/cgroup/memory.max", "1073741824\n");
    put("sys/fs/cgroup/cpu.max", "150000 100000\n");
    let facts = HostFacts::read(&Sysroot::new(dir.path()), None);
    assert!(facts.problems.is_empty(), "{:?}", facts.problems);
    let ram = facts.resources.effective_memory_bytes.unwrap();
    assert_eq!(ram.value, GIB);
    assert_eq!(
        ram.limit.to_string(),
        "cgroup v2 memory.max at /sys/fs/cgroup"
    );
    // 1.5 CPUs of quota let two threads run: rounded up.
    let cpus = facts.resources.effective_cpus.unwrap();
    assert_eq!(cpus.value, 2);
    assert_eq!(cpus.limit.kind, LimitKind::V2CpuMax);
}

#[test]
fn cgroup_v1_limits_come_from_each_controller_hierarchy() {
    let facts = read("cgroup-v1", None);
    assert_eq!(facts.cgroup.version, Some(CgroupVersion::V1));
    assert_eq!(facts.resources.online_cpus, Some(16));
    let ram = facts.resources.effective_memory_bytes.as_ref().unwrap();
    assert_eq!(ram.value, 2 * GIB);
    assert_eq!(
        ram.limit.to_string(),
        "cgroup v1 memory.limit_in_bytes at /sys/fs/cgroup/memory/docker/abc"
    );
    // cpuset 0-3 (4 CPUs) is looser than a 1.5-CPU quota, rounded up to 2.
    assert_eq!(facts.cgroup.cpuset_cpus.as_ref().unwrap().value, 4);
    let cpus = facts.resources.effective_cpus.as_ref().unwrap();
    assert_eq!(cpus.value, 2);
    assert_eq!(
        cpus.limit.to_string(),
        "cgroup v1 cpu.cfs_quota_us at /sys/fs/cgroup/cpu,cpuacct/docker/abc"
    );
    // An old kernel: the migration cost is a sysctl, and there is no io_uring sysctl.
    assert_eq!(facts.kernel.version, Some((4, 18)));
    assert_eq!(facts.kernel.sched_migration_cost_ns, Some(5_000_000));
    assert_eq!(
        facts.kernel.sched_migration_cost_source,
        Some(PathBuf::from("/proc/sys/kernel/sched_migration_cost_ns"))
    );
    assert_eq!(facts.kernel.io_uring.disabled, None);
    assert_eq!(facts.kernel.io_uring.refused_cause, None);
}

#[test]
fn a_host_without_cgroup_limits_is_limited_by_itself() {
    let facts = read("thp-always", None);
    assert_eq!(facts.cgroup.version, Some(CgroupVersion::V2));
    let ram = facts.resources.effective_memory_bytes.as_ref().unwrap();
    assert_eq!(ram.value, 16 * GIB);
    assert_eq!(ram.limit.to_string(), "host MemTotal at /proc/meminfo");
    let cpus = facts.resources.effective_cpus.as_ref().unwrap();
    assert_eq!(cpus.value, 8);
    // The cpuset equals the online CPUs: the host is named, not the cgroup.
    assert_eq!(
        cpus.limit.to_string(),
        "host online CPUs at /sys/devices/system/cpu/online"
    );
}

#[test]
fn io_uring_disabled_by_sysctl_is_explained() {
    let facts = read("uring-disabled", None);
    let uring = &facts.kernel.io_uring;
    assert_eq!(uring.disabled, Some(2));
    assert_eq!(
        uring.refused_cause.as_deref(),
        Some("io_uring is disabled by kernel.io_uring_disabled=2")
    );
    assert!(uring
        .refused_fix
        .as_deref()
        .unwrap()
        .contains("sysctl -w kernel.io_uring_disabled=0"));
}

#[test]
fn io_uring_restricted_to_no_group_names_cap_sys_admin() {
    let facts = read("uring-restricted", None);
    let uring = &facts.kernel.io_uring;
    assert_eq!(uring.disabled, Some(1));
    assert_eq!(uring.group, Some(-1));
    let cause = uring.refused_cause.as_deref().unwrap();
    assert!(cause.contains("CAP_SYS_ADMIN"), "{cause}");
    assert!(cause.contains("kernel.io_uring_group is -1"), "{cause}");
    assert!(uring
        .refused_fix
        .as_deref()
        .unwrap()
        .contains("kernel.io_uring_group=GID"));
    // Allowed hosts have no refusal.
    assert_eq!(read("thp-always", None).kernel.io_uring.refused_cause, None);
}

#[test]
fn thp_always_and_the_kernel_basics_are_read() {
    let facts = read("thp-always", None);
    assert_eq!(facts.kernel.thp.enabled.as_deref(), Some("always"));
    assert_eq!(facts.kernel.thp.defrag.as_deref(), Some("always"));
    assert_eq!(facts.kernel.release.as_deref(), Some("6.8.0-45-generic"));
    assert_eq!(facts.kernel.version, Some((6, 8)));
    assert_eq!(facts.kernel.sched_autogroup_enabled, Some(1));
    assert_eq!(facts.kernel.sched_migration_cost_ns, Some(500_000));
    assert_eq!(
        facts.kernel.sched_migration_cost_source,
        Some(PathBuf::from("/sys/kernel/debug/sched/migration_cost_ns"))
    );
    assert_eq!(facts.kernel.clocksource.as_deref(), Some("tsc"));
    assert_eq!(
        facts.kernel.available_clocksources,
        ["tsc", "hpet", "acpi_pm"]
    );
    // The default elsewhere is madvise.
    assert_eq!(
        read("numa2", None).kernel.thp.enabled.as_deref(),
        Some("madvise")
    );
}

#[test]
fn overcommit_zero_without_swap_is_read_with_commit_accounting() {
    let m = read("overcommit-noswap", None).memory;
    assert_eq!(m.mem_total_bytes, Some(8 * GIB));
    assert_eq!(m.swap_total_bytes, Some(0));
    assert_eq!(m.overcommit_memory, Some(0));
    assert_eq!(m.overcommit_ratio, Some(50));
    assert_eq!(m.commit_limit_bytes, Some(4 * GIB));
    assert_eq!(m.committed_as_bytes, Some(6 * GIB));
    assert_eq!(m.swappiness, Some(60));
    assert_eq!(m.dirty_ratio, Some(20));
    assert_eq!(m.dirty_background_ratio, Some(10));
    assert_eq!(m.dirty_bytes, Some(0));
    assert_eq!(m.dirty_background_bytes, Some(0));
}

#[test]
fn two_numa_nodes_with_zone_reclaim() {
    let facts = read("numa2", None);
    assert_eq!(facts.memory.zone_reclaim_mode, Some(1));
    let nodes = &facts.kernel.numa.nodes;
    assert_eq!(nodes.len(), 2);
    assert_eq!((nodes[0].id, nodes[0].mem_total_bytes), (0, Some(64 * GIB)));
    assert_eq!((nodes[1].id, nodes[1].mem_total_bytes), (1, Some(64 * GIB)));
    assert_eq!(facts.resources.effective_cpus.as_ref().unwrap().value, 32);
    // A tree without /sys/devices/system/node has no nodes (unknown), not one.
    assert!(read("thp-always", None).kernel.numa.nodes.is_empty());
}

#[test]
fn a_rotational_bfq_disk_is_found_behind_an_lvm_volume() {
    let facts = read(
        "lvm-rotational-bfq",
        Some("/var/lib/postgresql/18/main/base"),
    );
    let storage = facts.storage.as_ref().unwrap();
    assert_eq!(
        storage.path,
        PathBuf::from("/var/lib/postgresql/18/main/base")
    );
    let mount = storage.mount.as_ref().unwrap();
    assert_eq!(mount.mount_point, PathBuf::from("/var/lib/postgresql"));
    assert_eq!(mount.fs_type, "xfs");
    assert_eq!(mount.source, "/dev/mapper/vg0-pgdata");
    assert_eq!((mount.major, mount.minor), (253, 0));
    assert!(mount.noatime());
    assert!(mount.has_option("inode64"));

    let dm = storage.device.as_ref().unwrap();
    assert_eq!(dm.name, "dm-0");
    assert_eq!(dm.dm_name.as_deref(), Some("vg0-pgdata"));
    assert_eq!(
        dm.sys_path,
        PathBuf::from("/sys/devices/virtual/block/dm-0")
    );
    assert_eq!(dm.scheduler.as_deref(), Some("none"));
    assert_eq!(dm.read_ahead_kb, Some(8192));
    assert_eq!(dm.slaves, vec!["sdb1".to_string()]);

    // The partition's queue is its disk's.
    assert_eq!(storage.disks.len(), 1);
    let disk = &storage.disks[0];
    assert_eq!(disk.name, "sdb1");
    assert_eq!(disk.partition_of.as_deref(), Some("sdb"));
    assert_eq!(disk.rotational, Some(true));
    assert_eq!(disk.scheduler.as_deref(), Some("bfq"));
    assert_eq!(disk.read_ahead_kb, Some(128));

    // The root file system of the same host has no captured device.
    let root = read("lvm-rotational-bfq", Some("/home/pg"))
        .storage
        .unwrap();
    assert_eq!(root.mount.unwrap().mount_point, PathBuf::from("/"));
}

#[test]
fn a_cycle_in_slaves_is_reported_naming_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("proc/self")).unwrap();
    std::fs::write(
        root.join("proc/self/mountinfo"),
        "1 0 253:0 / / rw - xfs /dev/mapper/a rw\n",
    )
    .unwrap();
    for (dev, other) in [("dm-0", "dm-1"), ("dm-1", "dm-0")] {
        let d = root.join("sys/devices/virtual/block").join(dev);
        std::fs::create_dir_all(d.join("slaves")).unwrap();
        std::os::unix::fs::symlink(format!("../../{other}"), d.join("slaves").join(other)).unwrap();
    }
    std::fs::create_dir_all(root.join("sys/dev/block")).unwrap();
    std::os::unix::fs::symlink(
        "../../devices/virtual/block/dm-0",
        root.join("sys/dev/block/253:0"),
    )
    .unwrap();
    let facts = common::with_watchdog("slave cycle", 60, {
        let root = root.to_path_buf();
        move || HostFacts::read(&Sysroot::new(root), Some(Path::new("/data")))
    });
    let storage = facts.storage.unwrap();
    assert_eq!(storage.device.unwrap().slaves, vec!["dm-1".to_string()]);
    assert!(storage.disks.is_empty());
    assert_eq!(facts.problems.len(), 1, "{:?}", facts.problems);
    let HostError::Walk { path, what } = &facts.problems[0] else {
        panic!("{:?}", facts.problems)
    };
    assert_eq!(
        path,
        &PathBuf::from("/sys/devices/virtual/block/dm-1/slaves/dm-0")
    );
    assert!(what.contains("cycle"), "{what}");
}

#[test]
fn huge_pages_reserved_but_fewer_than_needed() {
    let facts = read("hugepages-short", None);
    let m = &facts.memory;
    assert_eq!(m.hugepage_size_bytes, Some(2 << 20));
    assert_eq!(m.nr_hugepages, Some(512));
    assert_eq!(m.nr_overcommit_hugepages, Some(0));
    assert_eq!(m.huge_pages_total, Some(512));
    assert_eq!(m.huge_pages_free, Some(300));
    assert_eq!(m.huge_pages_rsvd, Some(200));
    // 300 free, 200 of them promised: 100 pages (200 MiB) for a new mapping.
    assert_eq!(m.huge_pages_available(), Some(100));
    assert_eq!(m.overcommit_memory, Some(2));
    assert_eq!(m.overcommit_ratio, Some(80));
    assert_eq!(
        facts.limits.memlock_bytes,
        Some(Rlimit {
            soft: RlimitValue::Unlimited,
            hard: RlimitValue::Unlimited
        })
    );
}

#[test]
fn malformed_files_are_problems_naming_the_file_not_values() {
    let dir = tempfile::tempdir().unwrap();
    let put = |path: &str, text: &str| {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    put("proc/meminfo", "MemTotal:       lots kB\nSwapTotal: 0 kB\n");
    put("proc/sys/vm/swappiness", "high\n");
    put("sys/devices/system/cpu/online", "7-3\n");
    put(
        "sys/kernel/mm/transparent_hugepage/enabled",
        "always madvise never\n",
    );
    let facts = HostFacts::read(&Sysroot::new(dir.path()), None);
    assert_eq!(facts.memory.mem_total_bytes, None);
    assert_eq!(facts.memory.swap_total_bytes, Some(0));
    assert_eq!(facts.memory.swappiness, None);
    assert_eq!(facts.resources.online_cpus, None);
    assert_eq!(facts.resources.effective_cpus, None);
    assert_eq!(facts.kernel.thp.enabled, None);
    let messages: Vec<String> = facts.problems.iter().map(ToString::to_string).collect();
    assert_eq!(messages.len(), 4, "{messages:#?}");
    for file in [
        "/proc/meminfo",
        "/proc/sys/vm/swappiness",
        "/sys/devices/system/cpu/online",
        "/sys/kernel/mm/transparent_hugepage/enabled",
    ] {
        assert!(
            messages.iter().any(|m| m.starts_with(file)),
            "{file} in {messages:#?}"
        );
    }
    // An empty sysroot is all unknown, and not a problem.
    let empty = tempfile::tempdir().unwrap();
    let facts = HostFacts::read(&Sysroot::new(empty.path()), Some(Path::new("/x")));
    assert!(facts.problems.is_empty(), "{:?}", facts.problems);
    assert_eq!(facts.memory.mem_total_bytes, None);
    assert_eq!(facts.cgroup.version, None);
    assert_eq!(facts.storage.unwrap().mount, None);
}

#[test]
fn facts_serialize_as_json_with_the_limit_that_applied() {
    let facts = read("container-v2", None);
    let json = serde_json::to_value(&facts).unwrap();
    assert_eq!(json["resources"]["effective_cpus"]["value"], 2);
    assert_eq!(
        json["resources"]["effective_cpus"]["limit"]["kind"],
        "V2CpuMax"
    );
    assert_eq!(json["memory"]["mem_total_bytes"], 256 * GIB);
    assert_eq!(json["limits"]["nofile"]["soft"], 1048576);
    let hugepages = serde_json::to_value(read("hugepages-short", None).limits).unwrap();
    assert_eq!(hugepages["memlock_bytes"]["hard"], "unlimited");
    assert_eq!(json["storage"], serde_json::Value::Null);
}

#[test]
fn the_real_machine_reads_with_plausible_shapes() {
    let tmp = tempfile::tempdir().unwrap();
    let tmp_path = tmp.path().to_path_buf();
    let facts = common::with_watchdog("real machine", 60, move || {
        HostFacts::read(&Sysroot::default(), Some(&tmp_path))
    });
    assert!(facts.memory.mem_total_bytes.unwrap() > 0);
    let online = facts.resources.online_cpus.unwrap();
    assert!(online >= 1);
    let cpus = facts.resources.effective_cpus.as_ref().unwrap();
    assert!(cpus.value >= 1 && cpus.value <= online, "{cpus:?}");
    let ram = facts.resources.effective_memory_bytes.as_ref().unwrap();
    assert!(ram.value > 0 && Some(ram.value) <= facts.memory.mem_total_bytes);
    assert!(facts.kernel.version.unwrap().0 >= 3);
    assert!(matches!(facts.limits.nofile, Some(Rlimit { .. })));
    let storage = facts.storage.as_ref().unwrap();
    let mount = storage.mount.as_ref().unwrap();
    assert!(storage.path.starts_with(&mount.mount_point), "{storage:?}");
    assert!(!mount.fs_type.is_empty());
    // The facts serialize, whatever this machine holds.
    serde_json::to_string(&facts).unwrap();
}

#[test]
fn a_virtio_disk_is_read_with_its_driver_queues_and_the_container_markers() {
    let facts = read("virtio-docker", Some("/srv/pgdata"));
    let storage = facts.storage.as_ref().unwrap();
    let vda = &storage.disks[0];
    assert_eq!(vda.name, "vda");
    assert_eq!(vda.rotational, Some(true));
    assert_eq!(vda.driver.as_deref(), Some("virtio_blk"));
    assert_eq!(vda.vendor.as_deref(), Some("0x1af4"));
    assert_eq!(vda.model, None);
    assert_eq!((vda.nr_requests, vda.hw_queues), (Some(256), Some(1)));
    assert_eq!(facts.storage_class.class, pageio::host::DiskClass::Virtual);
    assert_eq!(facts.container.markers, ["/.dockerenv"]);

    let sdb = read("lvm-rotational-bfq", Some("/var/lib/postgresql/18/main"));
    let disk = &sdb.storage.as_ref().unwrap().disks[0];
    assert_eq!(disk.driver.as_deref(), Some("sd"));
    assert_eq!(disk.vendor.as_deref(), Some("ATA"));
    assert_eq!(disk.model.as_deref(), Some("ST4000NM0035-1V4"));
    assert_eq!(sdb.storage_class.class, pageio::host::DiskClass::Hdd);
    assert!(!sdb.container.detected());

    let nvme = read("nvme-64cpu", Some("/srv/pgdata"));
    let disk = &nvme.storage.as_ref().unwrap().disks[0];
    assert_eq!((disk.name.as_str(), disk.hw_queues), ("nvme1n1", Some(64)));
    assert_eq!(nvme.storage_class.class, pageio::host::DiskClass::Nvme);
}
