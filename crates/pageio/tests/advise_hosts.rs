//! `pageio advise`'s rules on captured host trees (`tests/hosts/<situation>/`), with the live
//! probes injected: each test asserts the statuses and the recommended values one situation
//! must produce, and that the snippets carry the fix.

use std::path::Path;

use pageio::advise::{self, Advice, Facts, Inputs, MeasuredIo, Sources, Status, Workload};
use pageio::config::IoMethodKind;
use pageio::host::{Probes, Sysroot};
use pageio::measure::{
    self, DepthRate, DeviceRates, Measurement, MethodRun, PatternRead, RelationRead,
};

fn tree(situation: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/hosts")
        .join(situation)
}

/// A machine where io_uring sets up and the clock is cheap (what most tests assume).
fn good_probes() -> Probes {
    Probes {
        io_uring_setup: Some(Ok(())),
        direct_io: None,
        clock_read_ns: Some(25.0),
    }
}

fn advise_on(
    root: &Path,
    storage_path: Option<&str>,
    config: Option<&Path>,
    probes: Probes,
    inputs: Inputs,
) -> (Facts, Advice) {
    let sources = Sources {
        config,
        storage_path: storage_path.map(Path::new),
        ..Default::default()
    };
    let mut facts = Facts::read(&Sysroot::new(root), &sources, probes);
    // The machine's own PostgreSQL on PATH is not part of a captured tree.
    facts.pg_bin = None;
    let problems: Vec<String> = facts
        .host
        .problems
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(problems.is_empty(), "{}: {problems:#?}", root.display());
    let advice = advise::advise(&facts, &inputs);
    (facts, advice)
}

fn simple(situation: &str, inputs: Inputs) -> Advice {
    advise_on(&tree(situation), None, None, good_probes(), inputs).1
}

#[track_caller]
fn status(a: &Advice, name: &str) -> Status {
    a.item(name)
        .unwrap_or_else(|| panic!("no item {name}"))
        .status
}

#[track_caller]
fn rec<'a>(a: &'a Advice, name: &str) -> &'a str {
    &a.item(name)
        .unwrap_or_else(|| panic!("no item {name}"))
        .recommended
}

fn conf_file(dir: &Path, text: &str) -> std::path::PathBuf {
    let p = dir.join("postgresql.conf");
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn a_4gb_2cpu_container_on_a_256gb_64cpu_host_is_sized_for_the_container() {
    let a = simple(
        "container-v2",
        Inputs {
            workload: Workload::Web,
            ..Default::default()
        },
    );
    assert_eq!(a.effective_memory_bytes, Some(4 << 30));
    assert_eq!(a.effective_cpus, 2);
    assert_eq!(
        a.memory_limit,
        "cgroup v2 memory.max at /sys/fs/cgroup/kubepods/pod1"
    );
    assert!(
        a.cpu_limit.starts_with("cgroup v2 cpu.max"),
        "{}",
        a.cpu_limit
    );
    assert_eq!(a.max_connections, 200, "pgtune's web default");
    // 25% of 4 GB, not of the host's 256 GB.
    assert_eq!(rec(&a, "shared_buffers"), "1GB");
    assert_eq!(rec(&a, "effective_cache_size"), "3GB");
    assert_eq!(rec(&a, "maintenance_work_mem"), "256MB");
    // (4096 − 1024) MB / ((200 + 8) × 3) = 5041 kB.
    assert_eq!(rec(&a, "work_mem"), "5041kB");
    assert_eq!(rec(&a, "wal_buffers"), "16MB");
    assert_eq!(rec(&a, "max_parallel_workers"), "2");
    assert_eq!(rec(&a, "max_parallel_workers_per_gather"), "1");
    assert_eq!(rec(&a, "max_worker_processes"), "8");
    assert_eq!(rec(&a, "io_workers"), "3");
    assert_eq!(rec(&a, "min_wal_size"), "1GB");
    assert_eq!(rec(&a, "max_wal_size"), "4GB");
    // Not configured: PostgreSQL's defaults are found, and 128 MB is far from 1 GB.
    let sb = a.item("shared_buffers").unwrap();
    assert_eq!((sb.status, sb.found.as_str()), (Status::Warn, "128MB"));
    assert_eq!(sb.source, "PostgreSQL 18 default");
    // Writeback thresholds are the host's: 10% of 256 GB, to be fixed on the host.
    let dirty = a.item("vm.dirty_background_bytes").unwrap();
    assert_eq!(dirty.status, Status::Warn);
    assert!(dirty.fix.contains("on the host"), "{}", dirty.fix);
    assert!(
        a.postgresql_conf.contains("shared_buffers = '1GB'"),
        "{}",
        a.postgresql_conf
    );
    assert!(
        a.sysctl_conf
            .contains("vm.dirty_background_bytes = 268435456"),
        "{}",
        a.sysctl_conf
    );
    assert_eq!(a.exit_status(), 1);
}

#[test]
fn io_uring_disabled_by_sysctl_is_a_warning_and_bad_when_the_conf_asks_for_it() {
    let a = simple("uring-disabled", Inputs::default());
    assert_eq!(status(&a, "kernel.io_uring_disabled"), Status::Warn);
    let u = a.item("io_uring").unwrap();
    assert_eq!(u.status, Status::Warn);
    assert!(
        u.found.contains("kernel.io_uring_disabled=2"),
        "{}",
        u.found
    );
    assert_eq!(rec(&a, "io_method"), "worker");
    assert!(a.sysctl_conf.contains("kernel.io_uring_disabled = 0"));

    let dir = tempfile::tempdir().unwrap();
    let conf = conf_file(dir.path(), "io_method = io_uring\n");
    let (_, a) = advise_on(
        &tree("uring-disabled"),
        None,
        Some(&conf),
        good_probes(),
        Inputs::default(),
    );
    let m = a.item("io_method").unwrap();
    assert_eq!(m.status, Status::Bad);
    assert_eq!(m.found, "io_uring");
    assert_eq!(m.source, format!("{}:1", conf.display()));
    assert!(
        m.reason.contains("kernel.io_uring_disabled=2"),
        "{}",
        m.reason
    );
    assert_eq!(status(&a, "kernel.io_uring_disabled"), Status::Bad);
    assert_eq!(a.exit_status(), 2);
}

#[test]
fn io_uring_restricted_to_a_group_names_the_group() {
    let a = simple("uring-restricted", Inputs::default());
    let s = a.item("kernel.io_uring_disabled").unwrap();
    assert_eq!(s.status, Status::Warn);
    assert!(s.found.starts_with("1 (only group -1"), "{}", s.found);
    assert_eq!(status(&a, "io_uring"), Status::Warn);
}

#[test]
fn a_seccomp_filter_refusing_io_uring_setup_is_named_as_the_cause() {
    let refused = Probes {
        io_uring_setup: Some(Err(
            "io_uring_setup was refused with EPERM, most likely by a seccomp filter".into(),
        )),
        ..good_probes()
    };
    let (facts, a) = advise_on(
        &tree("seccomp-uring"),
        None,
        None,
        refused,
        Inputs::default(),
    );
    assert_eq!(facts.seccomp.mode, Some(2));
    assert_eq!(facts.seccomp.no_new_privs, Some(1));
    let s = a.item("seccomp").unwrap();
    assert_eq!(s.status, Status::Warn);
    assert!(
        s.found
            .starts_with("Seccomp: 2 (filter); io_uring_setup fails"),
        "{}",
        s.found
    );
    assert!(s.fix.contains("--security-opt seccomp="), "{}", s.fix);
    // The sysctl allows it: the filter is the cause, not the kernel setting.
    assert_eq!(status(&a, "kernel.io_uring_disabled"), Status::Ok);
    let u = a.item("io_uring").unwrap();
    assert_eq!(u.status, Status::Warn);
    assert!(u.found.contains("io_uring_setup failed"), "{}", u.found);
    assert_eq!(rec(&a, "io_method"), "worker");
    // The same tree with the probe succeeding: no complaint.
    let (_, ok) = advise_on(
        &tree("seccomp-uring"),
        None,
        None,
        good_probes(),
        Inputs::default(),
    );
    assert_eq!(status(&ok, "seccomp"), Status::Ok);
    assert_eq!(status(&ok, "io_uring"), Status::Ok);
}

#[test]
fn transparent_huge_pages_always_is_a_warning_with_the_command() {
    let a = simple("thp-always", Inputs::default());
    let t = a.item("transparent_hugepage").unwrap();
    assert_eq!(t.status, Status::Warn);
    assert!(t.found.starts_with("enabled [always]"), "{}", t.found);
    assert!(t
        .fix
        .starts_with("echo never > /sys/kernel/mm/transparent_hugepage/enabled"));
    assert_eq!(status(&a, "clocksource"), Status::Ok);
}

#[test]
fn overcommit_heuristic_without_swap_asks_for_swap_before_strict_accounting() {
    let a = simple("overcommit-noswap", Inputs::default());
    let o = a.item("vm.overcommit_memory").unwrap();
    assert_eq!(o.status, Status::Warn);
    assert!(
        o.found
            .starts_with("0 (heuristic; swap 0 kiB, Committed_AS 6.0 GiB"),
        "{}",
        o.found
    );
    // 6 GB committed cannot fit (8 GB − the huge pages for a 2 GB shared_buffers) × 100%.
    assert!(
        o.recommended.starts_with("first add at least"),
        "{}",
        o.recommended
    );
    assert!(
        o.recommended
            .contains("CommitLimit = 0 kiB swap + (8.0 GiB RAM − 2.3 GiB huge pages) × 100%"),
        "{}",
        o.recommended
    );
    assert!(
        !a.sysctl_conf.contains("vm.overcommit_memory"),
        "{}",
        a.sysctl_conf
    );
    // No swap: swappiness does not matter.
    assert_eq!(status(&a, "vm.swappiness"), Status::Ok);
}

#[test]
fn two_numa_nodes_with_zone_reclaim_get_it_turned_off() {
    let a = simple("numa2", Inputs::default());
    let z = a.item("vm.zone_reclaim_mode").unwrap();
    assert_eq!(z.status, Status::Warn);
    assert_eq!(z.found, "1 (2 NUMA nodes)");
    assert_eq!(z.recommended, "0");
    assert!(a.sysctl_conf.contains("vm.zone_reclaim_mode = 0"));
    assert_eq!(a.effective_cpus, 32);
    assert_eq!(rec(&a, "shared_buffers"), "32GB");
    assert_eq!(rec(&a, "maintenance_work_mem"), "2GB", "capped");
    assert_eq!(rec(&a, "io_workers"), "8", "a quarter of 32 CPUs");
    assert_eq!(rec(&a, "max_parallel_workers_per_gather"), "4");
    assert_eq!(rec(&a, "max_worker_processes"), "32");
}

#[test]
fn a_rotational_disk_under_lvm_with_bfq_gets_mq_deadline_and_hdd_costs() {
    let (facts, a) = advise_on(
        &tree("lvm-rotational-bfq"),
        Some("/var/lib/postgresql/18/main"),
        None,
        good_probes(),
        Inputs::default(),
    );
    assert!(facts.host.storage.is_some());
    let s = a.item("I/O scheduler").unwrap();
    assert_eq!(s.status, Status::Warn);
    assert_eq!(s.found, "sdb [bfq]");
    assert!(
        s.fix
            .starts_with("echo mq-deadline > /sys/block/sdb/queue/scheduler"),
        "{}",
        s.fix
    );
    let d = a.item("data directory storage").unwrap();
    assert!(
        d.found
            .contains("xfs /var/lib/postgresql via dm-0 vg0-pgdata; disks: sdb (rotational)"),
        "{}",
        d.found
    );
    assert_eq!(status(&a, "noatime"), Status::Ok);
    assert_eq!(status(&a, "write barriers"), Status::Ok);
    assert_eq!(
        status(&a, "read_ahead_kb"),
        Status::Ok,
        "dm-0 reads ahead 8 MB"
    );
    assert_eq!(rec(&a, "effective_io_concurrency"), "2");
    assert_eq!(rec(&a, "random_page_cost"), "4");
    let rpc = a.item("random_page_cost").unwrap();
    assert!(
        rpc.reason.ends_with(
            "guessed from the storage class hdd (sdb: rotational=1 on a physical disk (vendor \"ATA\", model \"ST4000NM0035-1V4\"); nr_requests 64, 1 hardware queue); run with a measurement of the disk"
        ),
        "{}",
        rpc.reason
    );
    // Writeback for a spinning disk: 64 MB in the background.
    assert!(
        a.sysctl_conf
            .contains("vm.dirty_background_bytes = 67108864"),
        "{}",
        a.sysctl_conf
    );
}

#[test]
fn huge_pages_reserved_but_too_few_are_counted_and_on_without_them_is_bad() {
    let a = simple("hugepages-short", Inputs::default());
    // shared_buffers 8 GB (25% of 32 GB); shared memory 8192 + 128 + 16 + 16 MB + 173 × 64 kB
    // = 8362.8 MB, +10% = 9199.1 MB = 4600 pages of 2 MB.
    let h = a.item("vm.nr_hugepages").unwrap();
    assert_eq!(h.status, Status::Warn);
    assert!(h.recommended.starts_with("4600 "), "{}", h.recommended);
    assert!(
        h.found
            .starts_with("512 reserved (300 free, 200 reserved for mappings)"),
        "{}",
        h.found
    );
    assert!(a.sysctl_conf.contains("vm.nr_hugepages = 4600"));
    assert_eq!(rec(&a, "huge_pages"), "try");
    // Overcommit 2 at 80%: CommitLimit stays above what is committed once 4600 pages are
    // reserved, so it is fine.
    assert_eq!(status(&a, "vm.overcommit_memory"), Status::Ok);

    let dir = tempfile::tempdir().unwrap();
    let conf = conf_file(dir.path(), "shared_buffers = 8GB\nhuge_pages = on\n");
    let (_, a) = advise_on(
        &tree("hugepages-short"),
        None,
        Some(&conf),
        good_probes(),
        Inputs::default(),
    );
    let hp = a.item("huge_pages").unwrap();
    assert_eq!(hp.status, Status::Bad);
    assert!(
        hp.reason
            .contains("512 huge pages reserved of the 4600 needed"),
        "{}",
        hp.reason
    );
    assert_eq!(status(&a, "shared_buffers"), Status::Ok);
    assert_eq!(a.exit_status(), 2);
}

#[test]
fn a_cgroup_v1_container_is_sized_from_its_memory_limit() {
    let a = simple("cgroup-v1", Inputs::default());
    assert_eq!(a.effective_memory_bytes, Some(2 << 30));
    assert!(
        a.memory_limit
            .starts_with("cgroup v1 memory.limit_in_bytes"),
        "{}",
        a.memory_limit
    );
    assert_eq!(rec(&a, "shared_buffers"), "512MB");
    assert_eq!(rec(&a, "effective_cache_size"), "1536MB");
}

#[test]
fn rings_charged_to_memlock_on_linux_6_14_need_the_limit_raised() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&tree("seccomp-uring"), dir.path());
    std::fs::write(dir.path().join("proc/sys/kernel/osrelease"), "6.14.2\n").unwrap();
    let limits = std::fs::read_to_string(dir.path().join("proc/self/limits")).unwrap();
    let limits: String = limits
        .lines()
        .map(|l| {
            if l.starts_with("Max locked memory") {
                "Max locked memory         65536                65536                bytes     "
                    .to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(dir.path().join("proc/self/limits"), limits + "\n").unwrap();
    let (_, a) = advise_on(dir.path(), None, None, good_probes(), Inputs::default());
    // 173 processes × (4 kB SQ + 4 kB CQ) = 1384 kB.
    let m = a.item("RLIMIT_MEMLOCK").unwrap();
    assert_eq!(m.status, Status::Warn);
    assert!(m.recommended.starts_with("at least 1.4 MiB (100 connections + 16 autovacuum + 1 launcher + 8 workers + 10 WAL senders + 38 auxiliary = 173 processes; 8 kiB per ring), charged"), "{}", m.recommended);
    assert!(m.fix.starts_with("LimitMEMLOCK=2097152"), "{}", m.fix);
    let u = a.item("io_uring").unwrap();
    assert!(u.found.contains("RLIMIT_MEMLOCK 64 kiB"), "{}", u.found);
    // The same limit on 6.8, where rings are charged to the memory cgroup, is fine.
    let (_, a) = advise_on(
        &tree("seccomp-uring"),
        None,
        None,
        good_probes(),
        Inputs::default(),
    );
    assert_eq!(status(&a, "RLIMIT_MEMLOCK"), Status::Ok);
}

fn copy_tree(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        let meta = entry.path().symlink_metadata().unwrap();
        if meta.is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_tree(&entry.path(), &target);
        } else if meta.file_type().is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(entry.path()).unwrap(), &target).unwrap();
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

#[test]
fn versions_decide_which_io_settings_exist() {
    let a17 = simple(
        "container-v2",
        Inputs {
            pg_version: Some(17),
            ..Default::default()
        },
    );
    for name in [
        "io_method",
        "io_workers",
        "io_combine_limit",
        "io_min_workers",
        "RLIMIT_MEMLOCK",
        "seccomp",
    ] {
        assert!(a17.item(name).is_none(), "{name} for 17");
    }
    assert_eq!(
        a17.item("effective_io_concurrency").unwrap().found,
        "1",
        "17's default"
    );
    let a19 = simple(
        "container-v2",
        Inputs {
            pg_version: Some(19),
            ..Default::default()
        },
    );
    assert!(a19.item("io_workers").is_none());
    assert_eq!(rec(&a19, "io_min_workers"), "1");
    assert_eq!(rec(&a19, "io_max_workers"), "3");
    let a18 = simple("container-v2", Inputs::default());
    assert!(a18.item("io_min_workers").is_none());
    assert!(a18.item("io_workers").is_some());
}

/// A measurement with fixed numbers, as `measure::run` reports them: random 8 kB reads/s by
/// queue depth, sequential MB/s, and each io_method run as (label, sequential pages/s,
/// sparse pages/s).
fn measurement(seq_mb_s: f64, random: &[(usize, f64)], runs: &[(&str, f64, f64)]) -> Measurement {
    let at = |qd: usize| random.iter().find(|r| r.0 == qd).map_or(0.0, |r| r.1);
    let read = |pages_per_second: f64| PatternRead {
        pages_per_second,
        pages: pages_per_second as u64,
        pages_read: pages_per_second as u64,
        passes: 1,
        seconds: 1.0,
    };
    Measurement {
        target: "/data".into(),
        data_directory: true,
        scratch_file: None,
        device: DeviceRates {
            source: "fixed".into(),
            files: vec![],
            probed_bytes: 1 << 30,
            direct_io: true,
            sequential_bytes_per_second: seq_mb_s * 1e6,
            sequential_pages_per_second: seq_mb_s * 1e6 / 8192.0,
            sequential_seconds: 1.0,
            random_reads_per_second_qd1: at(1),
            random_reads_per_second_qd32: at(32),
            random: random
                .iter()
                .map(|&(queue_depth, reads_per_second)| DepthRate {
                    queue_depth,
                    reads_per_second,
                    reads: reads_per_second as u64,
                    seconds: 1.0,
                })
                .collect(),
        },
        relation: RelationRead {
            relation: "/data/base/5/16384".into(),
            generated: false,
            blocks: 32768,
            effective_io_concurrency: 16,
            checksums: true,
            runs: runs
                .iter()
                .map(|&(label, seq, sparse)| {
                    let (io_method, io_workers) = match label.split_once(':') {
                        Some((_, n)) => (IoMethodKind::Worker, Some(n.parse().unwrap())),
                        None => (label.parse().unwrap(), None),
                    };
                    MethodRun {
                        io_method,
                        io_workers,
                        label: label.into(),
                        sequential: read(seq),
                        sparse: read(sparse),
                    }
                })
                .collect(),
            not_measured: vec![],
        },
        effective_cpus: 2,
        budget_seconds: 30.0,
        elapsed_seconds: 29.8,
        notes: vec![],
    }
}

/// NVMe-like: the random rate grows to depth 32 and a little past it; 200 MB/s sequential
/// (a throttled volume); more workers help the sparse reads, io_uring nearly as much.
fn nvme_like(io_uring_sparse: f64) -> Measurement {
    measurement(
        200.0,
        &[
            (1, 10_000.0),
            (2, 19_000.0),
            (4, 36_000.0),
            (8, 80_000.0),
            (16, 160_000.0),
            (32, 300_000.0),
            (64, 310_000.0),
        ],
        &[
            ("sync", 30_000.0, 3_000.0),
            ("worker:3", 40_000.0, 6_000.0),
            ("worker:8", 41_000.0, 12_000.0),
            ("io_uring", 41_000.0, io_uring_sparse),
        ],
    )
}

#[test]
fn measured_io_replaces_the_guesses() {
    let m = nvme_like(11_800.0);
    let measured = MeasuredIo::from_measurement(&m);
    // The values are measure::recommend's, the one formula per setting.
    let r = measure::recommend(&m, m.effective_cpus);
    assert_eq!(measured.recommendations, r);
    assert_eq!(r.effective_io_concurrency.value, 32);
    assert_eq!(r.maintenance_io_concurrency.value, 64);
    assert_eq!(r.io_method.value, IoMethodKind::Worker);
    assert_eq!(r.io_workers.value, 8);
    // 200 MB/s = 24414 pages/s ÷ 10000 depth-1 reads/s = 2.44.
    assert_eq!(r.random_page_cost.value, 2.4);

    let a = simple(
        "lvm-rotational-bfq",
        Inputs {
            measured: Some(measured),
            ..Default::default()
        },
    );
    // Guessed for this rotational disk: 2, 2, 4.0; measured replaces every one.
    assert_eq!(rec(&a, "effective_io_concurrency"), "32");
    assert_eq!(rec(&a, "maintenance_io_concurrency"), "64");
    assert_eq!(rec(&a, "random_page_cost"), "2.4");
    assert_eq!(rec(&a, "io_method"), "worker");
    assert_eq!(rec(&a, "io_workers"), "8");
    for (name, reason) in [
        (
            "effective_io_concurrency",
            &r.effective_io_concurrency.reason,
        ),
        (
            "maintenance_io_concurrency",
            &r.maintenance_io_concurrency.reason,
        ),
        ("random_page_cost", &r.random_page_cost.reason),
        ("io_method", &r.io_method.reason),
        ("io_workers", &r.io_workers.reason),
    ] {
        let item = a.item(name).unwrap();
        assert!(
            item.reason.contains(&format!("measured: {reason}")),
            "{name}: {}",
            item.reason
        );
        assert!(!item.reason.contains("guessed"), "{name}: {}", item.reason);
    }
    // The numbers behind each choice are in the reason.
    let eic = &a.item("effective_io_concurrency").unwrap().reason;
    assert!(eic.contains("32: 300000"), "{eic}");
    assert!(a
        .item("io_method")
        .unwrap()
        .reason
        .contains("worker:8 41000 / 12000"));
    assert!(a.postgresql_conf.contains("effective_io_concurrency = 32"));
    assert!(a.postgresql_conf.contains("random_page_cost = 2.4"));
}

#[test]
fn measured_io_uring_falls_back_to_worker_where_postgresql_cannot_use_it() {
    // io_uring clearly fastest at sparse reads: the measurement picks it.
    let m = nvme_like(20_000.0);
    let measured = MeasuredIo::from_measurement(&m);
    assert_eq!(measured.io_method(true), IoMethodKind::IoUring);
    assert_eq!(measured.io_workers(true), None);
    // Without io_uring the same rules choose among the other runs: worker:8.
    assert_eq!(measured.io_method(false), IoMethodKind::Worker);
    assert_eq!(measured.io_workers(false), Some(8));
    let fast = simple(
        "container-v2",
        Inputs {
            measured: Some(measured.clone()),
            ..Default::default()
        },
    );
    assert_eq!(rec(&fast, "io_method"), "io_uring");
    assert!(fast
        .item("io_method")
        .unwrap()
        .reason
        .contains("measured: cold reads of 32768 blocks"));
    // io_workers is not used by io_uring: PostgreSQL 18's default, saying why.
    assert_eq!(rec(&fast, "io_workers"), "3");
    assert!(fast
        .item("io_workers")
        .unwrap()
        .reason
        .contains("used only by io_method = worker"));
    // Where the kernel refuses io_uring to PostgreSQL, the advice is the measured best of
    // the other runs, with its worker count, and says why.
    let disabled = simple(
        "uring-disabled",
        Inputs {
            measured: Some(measured),
            ..Default::default()
        },
    );
    assert_eq!(rec(&disabled, "io_method"), "worker");
    assert_eq!(rec(&disabled, "io_workers"), "8");
    let why = &disabled.item("io_method").unwrap().reason;
    assert!(
        why.contains("measured: io_uring was the best, but PostgreSQL cannot use it here (")
            && why.contains("worker:8 (score 1.00) is the best")
            && why.contains("io_uring not measured: left out, PostgreSQL cannot use it here"),
        "{why}"
    );
    let workers = &disabled.item("io_workers").unwrap().reason;
    assert!(workers.contains("measured: worker:8"), "{workers}");
}

#[test]
fn measured_workers_map_to_postgresql_19s_pool() {
    let m = nvme_like(11_800.0);
    let a = simple(
        "container-v2",
        Inputs {
            pg_version: Some(19),
            measured: Some(MeasuredIo::from_measurement(&m)),
            ..Default::default()
        },
    );
    assert!(a.item("io_workers").is_none());
    // Both keep the 8 workers one cold scan needed ready; the 2-CPU container adds nothing.
    assert_eq!(rec(&a, "io_min_workers"), "8");
    assert_eq!(rec(&a, "io_max_workers"), "8");
    let min = &a.item("io_min_workers").unwrap().reason;
    assert!(min.contains("measured: worker:8"), "{min}");
    let max = &a.item("io_max_workers").unwrap().reason;
    assert!(max.contains("measured: worker:8"), "{max}");
}

#[test]
fn settings_are_found_where_postgresql_reads_them_last() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("more.conf"),
        "work_mem = 64MB\nmax_connections = 50\n",
    )
    .unwrap();
    let conf = conf_file(
        dir.path(),
        "work_mem = 1MB\ninclude 'more.conf'\nshared_buffers = 1GB\neffective_cache_size = '3GB'\n",
    );
    let (_, a) = advise_on(
        &tree("container-v2"),
        None,
        Some(&conf),
        good_probes(),
        Inputs::default(),
    );
    assert_eq!(a.max_connections, 50);
    assert_eq!(
        a.max_connections_source,
        format!("{}:2", dir.path().join("more.conf").display())
    );
    let wm = a.item("work_mem").unwrap();
    assert_eq!(wm.found, "64MB");
    assert_eq!(
        wm.source,
        format!("{}:1", dir.path().join("more.conf").display())
    );
    let sb = a.item("shared_buffers").unwrap();
    assert_eq!(
        (sb.status, sb.source.clone()),
        (Status::Ok, format!("{}:3", conf.display()))
    );
    assert_eq!(status(&a, "effective_cache_size"), Status::Ok);
}

#[test]
fn the_json_has_the_documented_fields() {
    let a = simple("container-v2", Inputs::default());
    let v = serde_json::to_value(&a).unwrap();
    let item = &v["items"][0];
    for key in [
        "group",
        "name",
        "status",
        "found",
        "source",
        "recommended",
        "reason",
        "fix",
    ] {
        assert!(item.get(key).is_some(), "{key} in {item}");
    }
    assert_eq!(v["items"][0]["group"], "host");
    assert!(v["postgresql_conf"]
        .as_str()
        .unwrap()
        .contains("shared_buffers"));
    assert!(v["sysctl_conf"].is_string());
    let statuses: Vec<&str> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["status"].as_str().unwrap())
        .collect();
    assert!(
        statuses.iter().all(|s| ["ok", "warn", "bad"].contains(s)),
        "{statuses:?}"
    );
}

#[test]
fn a_configuration_file_postgresql_cannot_read_is_bad() {
    let dir = tempfile::tempdir().unwrap();
    let conf = conf_file(dir.path(), "shared_buffers = 1GB\ninclude 'missing.conf'\n");
    let (_, a) = advise_on(
        &tree("container-v2"),
        None,
        Some(&conf),
        good_probes(),
        Inputs::default(),
    );
    let c = a.item("configuration files").unwrap();
    assert_eq!(c.status, Status::Bad);
    assert!(c.found.contains("missing.conf"), "{}", c.found);
    assert_eq!(a.exit_status(), 2);
    // A readable one is listed.
    let conf = conf_file(dir.path(), "shared_buffers = 1GB\n");
    let (_, a) = advise_on(
        &tree("container-v2"),
        None,
        Some(&conf),
        good_probes(),
        Inputs::default(),
    );
    let c = a.item("configuration files").unwrap();
    assert_eq!(c.status, Status::Ok);
    assert_eq!(c.found, format!("1 read: {}", conf.display()));
}

#[test]
fn pg_wal_linked_elsewhere_is_examined_and_barriers_off_there_are_bad() {
    let machine = tempfile::tempdir().unwrap();
    copy_tree(&tree("thp-always"), machine.path());
    let cluster = tempfile::tempdir().unwrap();
    let wal = tempfile::tempdir().unwrap();
    let pgdata = cluster.path().join("data");
    std::fs::create_dir_all(&pgdata).unwrap();
    std::fs::write(pgdata.join("PG_VERSION"), "18\n").unwrap();
    std::os::unix::fs::symlink(wal.path(), pgdata.join("pg_wal")).unwrap();
    let sources = Sources {
        pgdata: Some(&pgdata),
        ..Default::default()
    };
    let read = |root: &Path| {
        let mut facts = Facts::read(&Sysroot::new(root), &sources, good_probes());
        facts.pg_bin = None;
        advise::advise(&facts, &Inputs::default())
    };
    let a = read(machine.path());
    let w = a.item("pg_wal storage").unwrap();
    assert_eq!(w.status, Status::Ok);
    let wal_real = std::fs::canonicalize(wal.path()).unwrap();
    assert!(
        w.found
            .starts_with(&format!("{} on ext4 / (rw,relatime)", wal_real.display())),
        "{}",
        w.found
    );
    // The same file system mounted without barriers.
    std::fs::write(
        machine.path().join("proc/self/mountinfo"),
        "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,nobarrier\n",
    )
    .unwrap();
    let a = read(machine.path());
    let w = a.item("pg_wal storage").unwrap();
    assert_eq!(w.status, Status::Bad);
    assert!(w.fix.starts_with("remove nobarrier"), "{}", w.fix);
    assert_eq!(
        status(&a, "write barriers"),
        Status::Bad,
        "PGDATA is on it too"
    );
}

#[test]
fn a_descriptor_limit_below_one_per_ring_plus_the_file_budget_is_flagged() {
    let machine = tempfile::tempdir().unwrap();
    copy_tree(&tree("overcommit-noswap"), machine.path());
    let limits = std::fs::read_to_string(machine.path().join("proc/self/limits")).unwrap();
    let limits: Vec<String> = limits
        .lines()
        .map(|l| {
            if l.starts_with("Max open files") {
                "Max open files            1024                 1024                 files     "
                    .to_string()
            } else {
                l.to_string()
            }
        })
        .collect();
    std::fs::write(
        machine.path().join("proc/self/limits"),
        limits.join("\n") + "\n",
    )
    .unwrap();
    let a = simple_at(machine.path(), Inputs::default());
    let n = a.item("RLIMIT_NOFILE").unwrap();
    assert_eq!(n.status, Status::Warn);
    assert_eq!(n.found, "soft 1024, hard 1024");
    assert!(
        n.recommended
            .starts_with("hard limit ≥ 1173 (100 connections"),
        "{}",
        n.recommended
    );
    assert!(n.fix.starts_with("LimitNOFILE=1173"), "{}", n.fix);
    // PostgreSQL 17 has no rings: its file budget fits.
    let a = simple_at(
        machine.path(),
        Inputs {
            pg_version: Some(17),
            ..Default::default()
        },
    );
    assert_eq!(status(&a, "RLIMIT_NOFILE"), Status::Ok);
}

fn simple_at(root: &Path, inputs: Inputs) -> Advice {
    advise_on(root, None, None, good_probes(), inputs).1
}

#[test]
fn a_fact_that_cannot_be_read_is_listed_not_guessed() {
    let machine = tempfile::tempdir().unwrap();
    copy_tree(&tree("thp-always"), machine.path());
    std::fs::write(machine.path().join("proc/sys/vm/swappiness"), "sixty\n").unwrap();
    let mut facts = Facts::read(
        &Sysroot::new(machine.path()),
        &Sources::default(),
        good_probes(),
    );
    facts.pg_bin = None;
    let a = advise::advise(&facts, &Inputs::default());
    let swappiness = a.item("vm.swappiness").unwrap();
    assert_eq!(
        (swappiness.status, swappiness.found.as_str()),
        (
            Status::Ok,
            "not checked: /proc/sys/vm/swappiness gave no value here (this kernel has no such setting, a container hides it, or it did not parse: see what was not read)"
        ),
        "no value made up from one that did not parse"
    );
    assert!(swappiness.sysctl.is_empty());
    assert_eq!(a.problems.len(), 1, "{:?}", a.problems);
    assert!(
        a.problems[0].contains("/proc/sys/vm/swappiness") && a.problems[0].contains("sixty"),
        "{:?}",
        a.problems
    );
    // The report's "not read" section is the command's: advise_report_cli.rs.
}

/// A machine of `ram_gib` and `cpus`, from `base` (for its disks), with no cgroup limit.
fn sized_machine(base: &str, ram_gib: u64, cpus: u32) -> tempfile::TempDir {
    let machine = tempfile::tempdir().unwrap();
    copy_tree(&tree(base), machine.path());
    std::fs::write(
        machine.path().join("proc/meminfo"),
        format!(
            "MemTotal: {} kB\nSwapTotal: 0 kB\nCommitLimit: 0 kB\nCommitted_AS: 0 kB\n\
             HugePages_Total: 0\nHugePages_Free: 0\nHugePages_Rsvd: 0\nHugepagesize: 2048 kB\n",
            ram_gib << 20
        ),
    )
    .unwrap();
    let cpu_list = format!("0-{}\n", cpus - 1);
    std::fs::write(
        machine.path().join("sys/devices/system/cpu/online"),
        &cpu_list,
    )
    .unwrap();
    std::fs::write(
        machine.path().join("sys/fs/cgroup/cpuset.cpus.effective"),
        &cpu_list,
    )
    .unwrap();
    machine
}

/// A stopped cluster's data directory under `dir` holding `data_bytes` of relation data (a
/// sparse file: its length counts, as for PostgreSQL's database size) and `conf`.
fn cluster(dir: &Path, data_bytes: u64, conf: &str) -> std::path::PathBuf {
    let pgdata = dir.join("pgdata");
    std::fs::create_dir_all(pgdata.join("base/5")).unwrap();
    std::fs::create_dir_all(pgdata.join("global")).unwrap();
    std::fs::write(pgdata.join("PG_VERSION"), "18\n").unwrap();
    std::fs::write(pgdata.join("postgresql.conf"), conf).unwrap();
    let rel = std::fs::File::create(pgdata.join("base/5/16384")).unwrap();
    rel.set_len(data_bytes).unwrap();
    pgdata
}

/// Advice on a captured machine for a cluster in `pgdata` (its storage looked up in the
/// capture's mount table).
fn advise_cluster(situation: &str, pgdata: &Path, inputs: Inputs) -> Advice {
    let sources = Sources {
        pgdata: Some(pgdata),
        ..Default::default()
    };
    let mut facts = Facts::read(&Sysroot::new(tree(situation)), &sources, good_probes());
    facts.pg_bin = None;
    let problems: Vec<String> = facts
        .host
        .problems
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(problems.is_empty(), "{situation}: {problems:#?}");
    advise::advise(&facts, &inputs)
}

const VIRTIO_EVIDENCE: &str =
    "vda: virtio disk (driver virtio_blk), rotational=1 not trusted; nr_requests 256, 1 hardware queue";

#[test]
fn a_virtio_disk_reported_rotational_is_virtual_and_never_below_postgresqls_defaults() {
    let tmp = tempfile::tempdir().unwrap();
    let pgdata = cluster(tmp.path(), 1 << 20, "");
    let a = advise_cluster("virtio-docker", &pgdata, Inputs::default());
    assert_eq!(
        rec(&a, "data directory storage"),
        format!("storage class virtual ({VIRTIO_EVIDENCE})")
    );
    for name in ["effective_io_concurrency", "maintenance_io_concurrency"] {
        let i = a.item(name).unwrap();
        assert_eq!(
            (i.status, i.recommended.as_str()),
            (Status::Ok, "16"),
            "{name}"
        );
        assert!(i.reason.contains(VIRTIO_EVIDENCE), "{}", i.reason);
    }
    // Writeback follows the class: not a spinning disk's 64 MB.
    assert!(
        a.sysctl_conf
            .contains("vm.dirty_background_bytes = 268435456"),
        "{}",
        a.sysctl_conf
    );
    assert_eq!(status(&a, "read_ahead_kb"), Status::Ok);
    assert_eq!(status(&a, "I/O scheduler"), Status::Ok);
    // 1 MiB of data in 23.5 GiB: cached, whatever the disk.
    let rpc = a.item("random_page_cost").unwrap();
    assert_eq!(rpc.recommended, "1.1");
    assert!(
        rpc.reason.ends_with(
            "data 1.0 MiB, RAM 23.5 GiB (host MemTotal at /proc/meminfo), shared_buffers 128MB: fully cached (at most 50% of the 17.7 GiB effective cache)"
        ),
        "{}",
        rpc.reason
    );
    // 16 GiB of data do not fit half of the 17.7 GiB cache: PostgreSQL's default for a
    // device whose speed is not known.
    let big = tempfile::tempdir().unwrap();
    let a = advise_cluster(
        "virtio-docker",
        &cluster(big.path(), 16 << 30, ""),
        Inputs::default(),
    );
    let rpc = a.item("random_page_cost").unwrap();
    assert_eq!(rpc.recommended, "4");
    assert!(
        rpc.reason.contains("data 16.0 GiB, RAM 23.5 GiB (host MemTotal at /proc/meminfo), shared_buffers 128MB: more than 50% of the 17.7 GiB effective cache; guessed from the storage class virtual"),
        "{}",
        rpc.reason
    );
    // A configured concurrency above the floor (an earlier measurement's) is kept and OK;
    // one below it is not.
    let conf = "effective_io_concurrency = 32\nmaintenance_io_concurrency = 2\n";
    let kept = tempfile::tempdir().unwrap();
    let a = advise_cluster(
        "virtio-docker",
        &cluster(kept.path(), 1 << 20, conf),
        Inputs::default(),
    );
    let eic = a.item("effective_io_concurrency").unwrap();
    assert_eq!(
        (eic.status, eic.recommended.as_str()),
        (Status::Ok, "32 (as configured: at least 16)")
    );
    assert!(
        a.postgresql_conf
            .contains("\neffective_io_concurrency = 32\t"),
        "{}",
        a.postgresql_conf
    );
    let mic = a.item("maintenance_io_concurrency").unwrap();
    assert_eq!((mic.status, mic.recommended.as_str()), (Status::Warn, "16"));
}

#[test]
fn a_measured_virtio_disk_follows_the_measurement_and_agrees_with_its_own_snippet() {
    let m = nvme_like(11_800.0);
    let measured = MeasuredIo::from_measurement(&m);
    let r = measured.recommendations.clone();
    let inputs = || Inputs {
        measured: Some(measured.clone()),
        ..Default::default()
    };
    let tmp = tempfile::tempdir().unwrap();
    let a = advise_cluster("virtio-docker", &cluster(tmp.path(), 1 << 20, ""), inputs());
    let eic = r.effective_io_concurrency.value.to_string();
    let mic = r.maintenance_io_concurrency.value.to_string();
    assert_eq!((eic.as_str(), mic.as_str()), ("32", "64"));
    assert_eq!(rec(&a, "effective_io_concurrency"), eic);
    assert_eq!(rec(&a, "maintenance_io_concurrency"), mic);
    // The data is cached: 1.1 whatever the disk's own ratio, which the reason quotes.
    let rpc = a.item("random_page_cost").unwrap();
    assert_eq!(rpc.recommended, "1.1");
    assert!(
        rpc.reason.contains("the disk's own ratio (measured: "),
        "{}",
        rpc.reason
    );
    // The snippet applied, advice with the same measurement flags nothing it recommended;
    // without the measurement, the I/O concurrencies stay OK (above the floor, kept).
    let snippet = a.postgresql_conf.clone();
    let again = tempfile::tempdir().unwrap();
    let pgdata = cluster(again.path(), 1 << 20, &snippet);
    let b = advise_cluster("virtio-docker", &pgdata, inputs());
    for item in b
        .items
        .iter()
        .filter(|i| i.group == advise::Group::Instance)
    {
        assert_eq!(item.status, Status::Ok, "{}: {}", item.name, item.reason);
        if let Some(first) = a.item(&item.name) {
            assert_eq!(item.recommended, first.recommended, "{}", item.name);
        }
    }
    let plain = advise_cluster("virtio-docker", &pgdata, Inputs::default());
    for name in [
        "effective_io_concurrency",
        "maintenance_io_concurrency",
        "random_page_cost",
    ] {
        assert_eq!(status(&plain, name), Status::Ok, "{name}");
    }
    assert_eq!(
        rec(&plain, "maintenance_io_concurrency"),
        "64 (as configured: at least 16)"
    );
}

#[test]
fn nvme_gets_flash_values_and_a_physical_hdd_spinning_disk_values() {
    let (_, a) = advise_on(
        &tree("nvme-64cpu"),
        Some("/srv/pgdata"),
        None,
        good_probes(),
        Inputs::default(),
    );
    assert_eq!(
        rec(&a, "data directory storage"),
        "storage class nvme (nvme1n1: NVMe (nvme1n1), rotational=0; nr_requests 1023, 64 hardware queues)"
    );
    assert_eq!(rec(&a, "effective_io_concurrency"), "200");
    assert_eq!(rec(&a, "random_page_cost"), "1.1");
    assert_eq!(status(&a, "I/O scheduler"), Status::Ok);
    assert_eq!(status(&a, "noatime"), Status::Ok);
    // 200 is the class's guess: a configured 32 (an earlier measurement's, say) is kept,
    // OK, with the guess named; 8 is below PostgreSQL 18's default and is not.
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("postgresql.conf");
    std::fs::write(
        &conf,
        "effective_io_concurrency = 32\nmaintenance_io_concurrency = 8\n",
    )
    .unwrap();
    let (_, c) = advise_on(
        &tree("nvme-64cpu"),
        Some("/srv/pgdata"),
        Some(&conf),
        good_probes(),
        Inputs::default(),
    );
    let eic = c.item("effective_io_concurrency").unwrap();
    assert_eq!(
        (eic.status, eic.recommended.as_str()),
        (
            Status::Ok,
            "32 (as configured; the storage class suggests 200, a guess: measure to compare)"
        )
    );
    let mic = c.item("maintenance_io_concurrency").unwrap();
    assert_eq!(
        (mic.status, mic.recommended.as_str()),
        (Status::Warn, "200")
    );
    let (_, h) = advise_on(
        &tree("lvm-rotational-bfq"),
        Some("/var/lib/postgresql/18/main"),
        None,
        good_probes(),
        Inputs::default(),
    );
    assert_eq!(rec(&h, "effective_io_concurrency"), "2");
    assert!(
        rec(&h, "vm.dirty_background_bytes").contains(
            "for storage class hdd: sdb: rotational=1 on a physical disk (vendor \"ATA\""
        ),
        "{}",
        rec(&h, "vm.dirty_background_bytes")
    );
}

#[test]
fn in_a_container_kernel_settings_are_the_hosts_and_skipped_checks_are_said() {
    let a = simple(
        "container-2g",
        Inputs {
            workload: Workload::Web,
            ..Default::default()
        },
    );
    assert_eq!(a.effective_memory_bytes, Some(2 << 30));
    let e = a.item("effective resources").unwrap();
    assert!(
        e.source
            .ends_with("; in a container (/.dockerenv): kernel settings are the host's"),
        "{}",
        e.source
    );
    for name in ["vm.dirty_background_bytes", "vm.overcommit_memory"] {
        let fix = &a.item(name).unwrap().fix;
        assert!(
            fix.ends_with("(the sysctl snippet, read at every boot) (set on the host: a container shares the host's kernel and devices)"),
            "{name}: {fix}"
        );
        assert!(fix.contains("/etc/sysctl.d/90-postgresql.conf"), "{fix}");
    }
    // No data directory: every storage check says why it was not made.
    for name in [
        "I/O scheduler",
        "read_ahead_kb",
        "noatime",
        "write barriers",
        "pg_wal storage",
    ] {
        let i = a.item(name).unwrap_or_else(|| panic!("no item {name}"));
        assert_eq!(
            i.found, "not checked: no data directory given (see data directory storage)",
            "{name}"
        );
    }
    assert_eq!(rec(&a, "random_page_cost"), "4");
    assert_eq!(rec(&a, "effective_io_concurrency"), "16");
    // This machine's kernel has no readable migration cost: an item says so.
    let tmp = tempfile::tempdir().unwrap();
    let v = advise_cluster(
        "virtio-docker",
        &cluster(tmp.path(), 1 << 20, ""),
        Inputs::default(),
    );
    let m = v.item("sched_migration_cost_ns").unwrap();
    assert!(
        m.found.starts_with("not checked: neither /proc/sys/kernel/sched_migration_cost_ns (gone since Linux 5.13) nor /sys/kernel/debug/sched/migration_cost_ns"),
        "{}",
        m.found
    );
    // noatime's fix is the fstab line that survives a reboot, beside the remount.
    assert!(
        v.item("noatime").unwrap().fix.contains(
            "mount -o remount,noatime /; keep it across reboots with this line in /etc/fstab (in place of the mount's line): /dev/vda / ext4 rw,noatime 0 1 (on the host"
        ),
        "{}",
        v.item("noatime").unwrap().fix
    );
}

/// A value PostgreSQL refuses at start-up is BAD with PostgreSQL's own message (what
/// PostgreSQL 18.6 logs before "FATAL: configuration file … contains errors"; the server's
/// answers for each case are in `advise::guc`'s tests and `advise_postgres.rs`), naming the
/// file and line; the configuration-files item lists it too, and the run exits 2. An
/// accepted boundary value is not refused.
#[test]
fn values_postgresql_refuses_at_start_up_are_bad_with_its_message() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "effective_io_concurrency",
            "100000",
            "100000 is outside the valid range for parameter \"effective_io_concurrency\" (0 .. 1000)",
        ),
        (
            "shared_buffers",
            "-1",
            "-1 8kB is outside the valid range for parameter \"shared_buffers\" (16 8kB .. 1073741823 8kB)",
        ),
        (
            "shared_buffers",
            "'abc'",
            "invalid value for parameter \"shared_buffers\": \"abc\"",
        ),
        (
            "io_method",
            "foo",
            "invalid value for parameter \"io_method\": \"foo\" (Available values: sync, worker, io_uring.)",
        ),
        (
            "work_mem",
            "'10gb'",
            "invalid value for parameter \"work_mem\": \"10gb\" (Valid units for this parameter are \"B\", \"kB\", \"MB\", \"GB\", and \"TB\".)",
        ),
        (
            "checkpoint_completion_target",
            "1.5",
            "1.5 is outside the valid range for parameter \"checkpoint_completion_target\" (0 .. 1)",
        ),
        (
            "random_page_cost",
            "-1",
            "-1 is outside the valid range for parameter \"random_page_cost\" (0 .. 1.79769e+308)",
        ),
        (
            "track_io_timing",
            "maybe",
            "parameter \"track_io_timing\" requires a Boolean value",
        ),
        (
            "huge_pages",
            "sometimes",
            "invalid value for parameter \"huge_pages\": \"sometimes\" (Available values: off, on, try.)",
        ),
        (
            "max_parallel_workers",
            "2000",
            "2000 is outside the valid range for parameter \"max_parallel_workers\" (0 .. 1024)",
        ),
        (
            "wal_buffers",
            "300000",
            "300000 8kB is outside the valid range for parameter \"wal_buffers\" (-1 8kB .. 262143 8kB)",
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (name, value, message) in cases {
        let conf = conf_file(dir.path(), &format!("# tuned\n{name} = {value}\n"));
        let (_, a) = advise_on(
            &tree("container-v2"),
            None,
            Some(&conf),
            good_probes(),
            Inputs {
                pg_version: Some(18),
                ..Inputs::default()
            },
        );
        let at = format!("{}:2", conf.display());
        let item = a.item(name).unwrap();
        assert_eq!(item.status, Status::Bad, "{name} = {value}");
        assert_eq!(item.source, at, "{name} = {value}");
        assert_eq!(item.found, value.trim_matches('\''), "{name} = {value}");
        assert_eq!(
            item.reason,
            format!("PostgreSQL 18 will not start with this value: {message}"),
            "{name} = {value}"
        );
        assert!(
            item.fix.starts_with(&format!("correct {at}: {name} = ")),
            "{}",
            item.fix
        );
        let files = a.item("configuration files").unwrap();
        assert_eq!(files.status, Status::Bad, "{name} = {value}");
        assert_eq!(files.found, format!("{at}: {message}"));
        assert_eq!(a.exit_status(), 2, "{name} = {value}");
    }
    // PostgreSQL 18.6 starts with each of these (its bounds, and its spellings).
    let conf = conf_file(
        dir.path(),
        "effective_io_concurrency = 1000\nmaintenance_io_concurrency = 0\nshared_buffers = 128kB\n\
         io_max_concurrency = -1\ncheckpoint_completion_target = 1\nrandom_page_cost = 0\n\
         track_io_timing = ye\nhuge_pages = TRY\nwal_buffers = -1\nmax_connections = 262143\n\
         io_combine_limit = 1MB\nwork_mem = '1 GB '\nio_method = sync\n",
    );
    let (_, a) = advise_on(
        &tree("container-v2"),
        None,
        Some(&conf),
        good_probes(),
        Inputs {
            pg_version: Some(18),
            ..Inputs::default()
        },
    );
    assert_eq!(status(&a, "configuration files"), Status::Ok);
    for item in &a.items {
        assert!(
            !item.reason.contains("will not start with this value"),
            "{}: {}",
            item.name,
            item.reason
        );
    }
    // A refused max_connections sizes nothing: the workload's default is used instead.
    let conf = conf_file(dir.path(), "max_connections = 0\n");
    let (_, a) = advise_on(
        &tree("container-v2"),
        None,
        Some(&conf),
        good_probes(),
        Inputs::default(),
    );
    assert_eq!(
        a.max_connections_source,
        "pgtune's default for the workload mixed"
    );
    assert_eq!(
        a.item("configuration files").unwrap().found,
        format!(
            "{}:1: 0 is outside the valid range for parameter \"max_connections\" (1 .. 262143)",
            conf.display()
        )
    );
}

/// Each version's own names and bounds: PostgreSQL 17 has no io_method and takes
/// io_combine_limit up to 32 blocks; PostgreSQL 18 has no io_min_workers.
#[test]
fn refusals_follow_the_version_advised_for() {
    let dir = tempfile::tempdir().unwrap();
    let conf = conf_file(dir.path(), "io_method = worker\nio_combine_limit = 512kB\n");
    let run = |pg| {
        advise_on(
            &tree("container-v2"),
            None,
            Some(&conf),
            good_probes(),
            Inputs {
                pg_version: Some(pg),
                ..Inputs::default()
            },
        )
        .1
    };
    let a = run(17);
    assert_eq!(
        a.item("configuration files").unwrap().found,
        format!(
            "{c}:2: 64 8kB is outside the valid range for parameter \"io_combine_limit\" (1 8kB .. 32 8kB); {c}:1: unrecognized configuration parameter \"io_method\" in file \"{c}\" line 1",
            c = conf.display()
        )
    );
    assert!(
        a.item("io_combine_limit").is_none(),
        "no such item before 18"
    );
    let a = run(18);
    assert_eq!(status(&a, "configuration files"), Status::Ok);
    let conf = conf_file(dir.path(), "io_min_workers = 2\n");
    let (_, a) = advise_on(
        &tree("container-v2"),
        None,
        Some(&conf),
        good_probes(),
        Inputs {
            pg_version: Some(18),
            ..Inputs::default()
        },
    );
    assert_eq!(
        a.item("configuration files").unwrap().found,
        format!(
            "{c}:1: unrecognized configuration parameter \"io_min_workers\" in file \"{c}\" line 1",
            c = conf.display()
        )
    );
}

/// A NUL byte in a setting is reported with file and line (PostgreSQL 18.6: "syntax error
/// in file … line 2"), not skipped; one in a comment is as harmless as PostgreSQL finds it.
#[test]
fn a_nul_byte_in_a_setting_is_bad_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("postgresql.conf");
    std::fs::write(&conf, b"work_mem = 8MB # x\0y\nshared_buffers = 1\0GB\n").unwrap();
    let (_, a) = advise_on(
        &tree("container-v2"),
        None,
        Some(&conf),
        good_probes(),
        Inputs::default(),
    );
    let files = a.item("configuration files").unwrap();
    assert_eq!(files.status, Status::Bad);
    assert!(
        files.found.starts_with(&format!(
            "configuration file \"{}\" line 2: the line holds a NUL byte at byte 19",
            conf.display()
        )),
        "{}",
        files.found
    );
    assert_eq!(a.exit_status(), 2);
}

/// Every piece of text the advice carries, each with where it is.
fn texts(a: &Advice) -> Vec<(String, String)> {
    let mut all = vec![
        (
            "max_connections_source".to_string(),
            a.max_connections_source.clone(),
        ),
        ("postgresql_conf".to_string(), a.postgresql_conf.clone()),
        ("sysctl_conf".to_string(), a.sysctl_conf.clone()),
    ];
    for i in &a.items {
        for (field, text) in [
            ("found", &i.found),
            ("source", &i.source),
            ("recommended", &i.recommended),
            ("reason", &i.reason),
            ("fix", &i.fix),
        ] {
            all.push((format!("{}.{field}", i.name), text.clone()));
        }
    }
    all
}

/// The library names no command-line flag: on every captured tree, for every version, with
/// and without a data directory's storage, no text holds one of `pageio advise`'s flags, and
/// the messages that point at an input say it in plain words.
#[test]
fn the_library_spells_no_flag() {
    let flags = [
        "--pgdata",
        "--config",
        "--pg-bin",
        "--pg-version",
        "--max-connections",
        "--workload",
        "--measure",
        "--seconds",
        "--sysroot",
        "--json",
        "--direct-io",
        "--save-measurement",
        "--measurement",
    ];
    let mut situations: Vec<String> = std::fs::read_dir(tree(""))
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    situations.sort();
    assert_eq!(situations.len(), 13, "{situations:?}");
    let mut pointers = 0;
    for situation in &situations {
        for (pg_version, storage) in [(17, None), (18, Some("/")), (19, None)] {
            let mut facts = Facts::read(
                &Sysroot::new(tree(situation)),
                &Sources {
                    storage_path: storage.map(Path::new),
                    ..Default::default()
                },
                Probes {
                    direct_io: Some(Err("refused".into())),
                    ..good_probes()
                },
            );
            facts.pg_bin = None;
            let a = advise::advise(
                &facts,
                &Inputs {
                    pg_version: Some(pg_version),
                    ..Default::default()
                },
            );
            for (at, text) in texts(&a) {
                for flag in flags {
                    assert!(
                        !text.contains(flag),
                        "{situation} PostgreSQL {pg_version}: {at} names {flag}: {text}"
                    );
                }
                pointers += usize::from(text.contains("a measurement of the disk"));
            }
            assert_eq!(
                a.max_connections_source,
                "pgtune's default for the workload mixed"
            );
            let liburing = a.item("liburing");
            if pg_version >= 18 {
                let liburing = liburing.unwrap();
                assert_eq!(
                    liburing.found,
                    "not checked: no postgres binary in the PostgreSQL binary directory or PATH"
                );
                assert_eq!(
                    liburing.fix,
                    "advise again with the PostgreSQL binary directory (the directory holding postgres)"
                );
            } else {
                assert!(liburing.is_none(), "PostgreSQL 17 has no io_uring items");
            }
        }
    }
    assert!(pointers > 0, "no message pointed at a measurement");
}

/// A caller's own names for the inputs (a command line's flags) reach every message that
/// points at one, and only those.
#[test]
fn messages_name_inputs_as_the_caller_spells_them() {
    struct Marked;
    impl advise::InputNames for Marked {
        fn name(&self, input: advise::UserInput) -> String {
            format!("<{input:?}>")
        }
        fn usage(&self, input: advise::UserInput) -> String {
            format!("<{input:?} VALUE>")
        }
        fn rerun(&self, input: advise::UserInput) -> String {
            format!("<again with {input:?}>")
        }
    }
    let mut facts = Facts::read(
        &Sysroot::new(tree("thp-always")),
        &Sources::default(),
        Probes {
            direct_io: Some(Ok(None)),
            ..good_probes()
        },
    );
    facts.pg_bin = None;
    let a = advise::advise_with_names(&facts, &Inputs::default(), &Marked);
    assert_eq!(
        a.max_connections_source,
        "pgtune's default for <Workload> mixed"
    );
    let storage = a.item("data directory storage").unwrap();
    assert_eq!(
        storage.recommended,
        "run with <PgData VALUE> to check PGDATA's file system and disks"
    );
    assert_eq!(storage.fix, "<again with PgData>");
    let liburing = a.item("liburing").unwrap();
    assert_eq!(
        liburing.found,
        "not checked: no postgres binary in <PgBin> or PATH"
    );
    assert_eq!(
        liburing.fix,
        "<again with PgBin> (the directory holding postgres)"
    );
    assert!(
        a.item("random_page_cost")
            .unwrap()
            .reason
            .ends_with("guessed from the storage class unknown (no data directory: its storage is not known); run with <Measure>"),
        "{}",
        a.item("random_page_cost").unwrap().reason
    );
    assert!(
        a.item("io_workers")
            .unwrap()
            .reason
            .ends_with(", at most 32 — run with <Measure>"),
        "{}",
        a.item("io_workers").unwrap().reason
    );
    let direct = a.item("O_DIRECT").unwrap();
    assert_eq!(direct.status, Status::Warn);
    assert!(
        direct
            .reason
            .starts_with("PostgreSQL's debug_io_direct and pageio's <DirectIo> need O_DIRECT"),
        "{}",
        direct.reason
    );
    let with_version = advise::advise_with_names(
        &facts,
        &Inputs {
            pg_version: Some(17),
            max_connections: Some(50),
            ..Default::default()
        },
        &Marked,
    );
    assert_eq!(with_version.max_connections_source, "<MaxConnections>");
    assert_eq!(with_version.item("io_uring").unwrap().source, "<PgVersion>");
    let mut no_ram = facts;
    no_ram.host.resources.effective_memory_bytes = None;
    let a = advise::advise_with_names(&no_ram, &Inputs::default(), &Marked);
    assert_eq!(
        a.item("effective resources").unwrap().fix,
        "make /proc/meminfo readable (or pass <Sysroot> to a complete capture)"
    );
}

/// The huge pages advised cover what PostgreSQL asks for. PostgreSQL 18.6, for
/// `shared_buffers = 1GB` and `max_connections = 100` (its other settings at their defaults):
/// `postgres -C shared_memory_size` = 1086 (MB), `-C shared_memory_size_in_huge_pages` = 543
/// (2 MB pages). pageio estimates 1082.8 MB and adds 10%: 596 pages.
#[test]
fn huge_pages_needed_cover_what_postgresql_18_asks_for() {
    const POSTGRESQL_18_HUGE_PAGES: u64 = 543;
    let machine = sized_machine("thp-always", 4, 2);
    let (_, a) = advise_on(
        machine.path(),
        None,
        None,
        good_probes(),
        Inputs {
            pg_version: Some(18),
            ..Default::default()
        },
    );
    assert_eq!(rec(&a, "shared_buffers"), "1GB");
    assert_eq!(a.max_connections, 100);
    let reason = &a.item("huge_pages").unwrap().reason;
    let needed: u64 = reason
        .strip_prefix("0 huge pages reserved, ")
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{reason}"));
    assert_eq!(needed, 596, "{reason}");
    assert!(needed >= POSTGRESQL_18_HUGE_PAGES);
}

/// Without the effective RAM, every setting sized from it is an item saying why, never
/// left out without a word.
#[test]
fn memory_settings_without_the_ram_are_items_saying_so() {
    let root = tempfile::tempdir().unwrap();
    let conf = root.path().join("postgresql.conf");
    std::fs::write(&conf, "shared_buffers = 1GB\n").unwrap();
    let sources = Sources {
        config: Some(&conf),
        ..Default::default()
    };
    let facts = Facts::read(&Sysroot::new(root.path()), &sources, good_probes());
    let a = advise::advise(&facts, &Inputs::default());
    for name in [
        "shared_buffers",
        "huge_pages",
        "effective_cache_size",
        "work_mem",
        "maintenance_work_mem",
        "wal_buffers",
    ] {
        let item = a
            .item(name)
            .unwrap_or_else(|| panic!("{name}: no item without the RAM"));
        assert_eq!(item.status, Status::Ok, "{name}");
        assert_eq!(
            item.found,
            "not checked: the effective RAM is not known, and every memory setting is sized from it",
            "{name}"
        );
    }
}
