//! Host rules on memory and the virtual memory sysctls: the effective RAM and CPUs,
//! overcommit accounting, swappiness, dirty-page writeback, transparent and explicit huge
//! pages, NUMA zone reclaim.
//!
//! Kernel settings are the host's: inside a container the fix says so ([`on_host`]).

use super::super::units::{human_bytes, GB, MB};
use super::super::{Status, UserInput};
use super::{skipped, Ctx, Verdict};

/// `vm.overcommit_ratio` recommended with strict overcommit: a fifth of ordinary memory left
/// for the kernel and page cache (the default 50 wastes half the RAM without swap).
pub const OVERCOMMIT_RATIO: u64 = 80;

/// Shared memory below this is not worth huge pages (pgtune sets `huge_pages = try` from
/// 2 GB of `shared_buffers`; below, the page-table savings are small).
pub const HUGE_PAGES_WORTH_BYTES: u64 = 2 * GB;

/// Huge pages reserved above PostgreSQL's estimated shared memory: its exact size
/// (`shared_memory_size`) moves with settings and extensions, so the reservation keeps 10%
/// headroom.
pub const HUGE_PAGES_HEADROOM: f64 = 1.10;

/// `vm.overcommit_memory = 2`: strict accounting, allocations beyond the commit limit fail
/// (kernel mm/overcommit-accounting.rst; PostgreSQL docs 19.4.4 recommend it).
pub const STRICT_OVERCOMMIT: u64 = 2;

/// The kernel's default `vm.overcommit_ratio` (kernel admin-guide/sysctl/vm.rst), assumed
/// when the sysctl cannot be read.
pub const KERNEL_DEFAULT_OVERCOMMIT_RATIO: u64 = 50;

/// When what is committed would not fit under [`OVERCOMMIT_RATIO`], the ratio recommended
/// grows in steps of this many percent (up to 100): round numbers an operator recognises.
pub const OVERCOMMIT_RATIO_STEP: u64 = 5;

/// `vm.overcommit_ratio` can be at most this, all of ordinary memory (kernel
/// mm/overcommit-accounting.rst).
pub const MAX_OVERCOMMIT_RATIO: u64 = 100;

/// `vm.swappiness` above this lets the kernel swap database memory out to keep page cache
/// (Red Hat's `tuned` throughput-performance profile sets 10).
pub const MAX_SWAPPINESS: u64 = 10;

/// `vm.dirty_background_bytes` recommended with a spinning disk: it absorbs ~100 MB/s, so
/// writeback starts with under a second of its work queued (kernel admin-guide/sysctl/vm.rst;
/// PostgreSQL docs 28.5 on checkpoint fsync stalls).
pub const ROTATIONAL_DIRTY_BACKGROUND_BYTES: u64 = 64 * MB;

/// `vm.dirty_bytes` recommended with a spinning disk: writers are throttled at four times
/// the background threshold.
pub const ROTATIONAL_DIRTY_BYTES: u64 = 256 * MB;

/// `vm.dirty_background_bytes` recommended with SSDs, which absorb several times a
/// spinning disk's rate.
pub const SSD_DIRTY_BACKGROUND_BYTES: u64 = 256 * MB;

/// `vm.dirty_bytes` recommended with SSDs: four times the background threshold.
pub const SSD_DIRTY_BYTES: u64 = GB;

/// The kernel's default `vm.dirty_background_ratio` (kernel admin-guide/sysctl/vm.rst).
pub const KERNEL_DEFAULT_DIRTY_BACKGROUND_RATIO: u64 = 10;

/// The kernel's default `vm.dirty_ratio` (kernel admin-guide/sysctl/vm.rst).
pub const KERNEL_DEFAULT_DIRTY_RATIO: u64 = 20;

/// Background writeback starting above this multiple of the recommendation is WARN: below
/// it the difference from the recommendation is within a checkpoint's normal burst.
pub const DIRTY_BACKGROUND_WARN_FACTOR: u64 = 2;

/// The transparent-huge-page mode that stalls allocations on compaction (PostgreSQL docs
/// 19.4.1 huge_pages; kernel admin-guide/mm/transhuge.rst).
pub const THP_STALLING_MODE: &str = "always";

/// Zone reclaim matters only with this many NUMA nodes or more (kernel
/// admin-guide/sysctl/vm.rst zone_reclaim_mode).
pub const MIN_NUMA_NODES_FOR_ZONE_RECLAIM: usize = 2;

/// The `/proc/sys/vm` file of a sysctl.
pub(super) fn vm(name: &str) -> String {
    format!("/proc/sys/vm/{name}")
}

/// Whether this runs in a container: a marker file or variable
/// ([`crate::host::container`]), or a cgroup limiting memory or CPUs.
pub(super) fn in_container(ctx: &Ctx) -> bool {
    ctx.facts.host.container.detected()
        || ctx.facts.host.cgroup.memory_max_bytes.is_some()
        || ctx.facts.host.cgroup.cpu_quota_cpus.is_some()
}

/// The item for a host setting whose file is absent or unreadable (a kernel without it, a
/// container that hides it): said, never skipped in silence.
pub(super) fn unreadable(source: String) -> Verdict {
    skipped(
        format!("{source} gave no value here (this kernel has no such setting, a container hides it, or it did not parse: see what was not read)"),
        source,
    )
}

/// Host settings (sysctls, THP, huge pages, block queues) apply to the whole machine;
/// inside a container they are the host's, and the fix is addressed there.
pub(super) fn on_host(ctx: &Ctx) -> &'static str {
    if in_container(ctx) {
        " (set on the host: a container shares the host's kernel and devices)"
    } else {
        ""
    }
}

/// Where a sysctl set with `sysctl -w` is kept so it survives a reboot, and the host note.
pub(super) fn sysctl_persist(ctx: &Ctx) -> String {
    format!(
        "; keep it across reboots with the same lines in /etc/sysctl.d/90-postgresql.conf (the sysctl snippet, read at every boot){}",
        on_host(ctx)
    )
}

// ---- the rules ----

pub(super) fn r_effective(ctx: &Ctx) -> Option<Verdict> {
    let status = if ctx.ram == 0 {
        Status::Bad
    } else {
        Status::Ok
    };
    Some(
        Verdict::new(
            status,
            format!(
                "{} RAM, {} CPUs",
                if ctx.ram == 0 {
                    "unknown".to_string()
                } else {
                    human_bytes(ctx.ram)
                },
                ctx.cpus
            ),
            format!(
                "RAM: {}; CPUs: {}{}",
                ctx.ram_limit,
                ctx.cpu_limit,
                if ctx.facts.host.container.detected() {
                    format!(
                        "; in a container ({}): kernel settings are the host's",
                        ctx.facts.host.container.markers.join(", ")
                    )
                } else {
                    String::new()
                }
            ),
        )
        .rec("every size below is computed from these")
        .why("a container may use only what its cgroup allows, not the host's MemTotal and CPUs")
        .fix(if ctx.ram == 0 {
            format!(
                "make /proc/meminfo readable (or pass {} to a complete capture)",
                ctx.names.name(UserInput::Sysroot)
            )
        } else {
            "none".to_string()
        }),
    )
}

/// The commit-limit arithmetic of `/proc/meminfo`, before and after the huge pages advice
/// reserves.
struct Commit {
    /// `MemTotal`.
    total: u64,
    /// `SwapTotal`.
    swap: u64,
    /// Bytes in huge pages reserved now.
    huge_now: u64,
    /// Bytes in huge pages once the recommended reservation is made.
    huge_after: u64,
    /// `Committed_AS`.
    committed: u64,
}

impl Commit {
    fn read(ctx: &Ctx) -> Commit {
        let m = &ctx.facts.host.memory;
        let (hp_size, _) = ctx.hugepage_size();
        let huge_now = m.huge_pages_total.unwrap_or(0).saturating_mul(hp_size);
        let huge_after = if ctx.huge_pages_worth() {
            ctx.huge_pages_needed().saturating_mul(hp_size)
        } else {
            huge_now
        };
        Commit {
            total: m.mem_total_bytes.unwrap_or(0),
            swap: m.swap_total_bytes.unwrap_or(0),
            huge_now,
            huge_after,
            committed: m.committed_as_bytes.unwrap_or(0),
        }
    }

    /// CommitLimit = SwapTotal + (MemTotal − huge pages) × overcommit_ratio / 100
    /// (Documentation/mm/overcommit-accounting.rst): reserved huge pages leave the pool.
    fn limit(&self, ratio: u64, huge: u64) -> u64 {
        self.swap
            .saturating_add((self.total.saturating_sub(huge) / 100).saturating_mul(ratio))
    }

    /// The ratio to recommend: [`OVERCOMMIT_RATIO`], or more if what is committed now would
    /// not fit; and whether even the largest leaves it short (swap is needed first, since
    /// strict accounting would fail allocations at once).
    fn ratio(&self) -> (u64, bool) {
        let mut ratio = OVERCOMMIT_RATIO;
        while ratio < MAX_OVERCOMMIT_RATIO && self.limit(ratio, self.huge_after) < self.committed {
            ratio += OVERCOMMIT_RATIO_STEP;
        }
        (ratio, self.limit(ratio, self.huge_after) < self.committed)
    }

    /// The status and the found text for `vm.overcommit_memory = mode`.
    fn found(&self, ctx: &Ctx, mode: u64) -> (Status, String) {
        let m = &ctx.facts.host.memory;
        let (swap, total, committed) = (self.swap, self.total, self.committed);
        if mode != STRICT_OVERCOMMIT {
            return (
                Status::Warn,
                format!(
                    "{mode} ({}; swap {}, Committed_AS {}, CommitLimit {} not enforced)",
                    if mode == 0 { "heuristic" } else { "always" },
                    human_bytes(swap),
                    human_bytes(committed),
                    human_bytes(m.commit_limit_bytes.unwrap_or(0))
                ),
            );
        }
        let cur_ratio = m
            .overcommit_ratio
            .unwrap_or(KERNEL_DEFAULT_OVERCOMMIT_RATIO);
        let cur = m
            .commit_limit_bytes
            .unwrap_or_else(|| self.limit(cur_ratio, self.huge_now));
        let found = format!(
            "2, ratio {cur_ratio}: CommitLimit {} (= {} swap + ({} − {} huge pages) × {cur_ratio}%), Committed_AS {}",
            human_bytes(cur),
            human_bytes(swap),
            human_bytes(total),
            human_bytes(self.huge_now),
            human_bytes(committed)
        );
        let status = if committed > cur {
            Status::Bad
        } else if self.limit(cur_ratio, self.huge_after) < committed {
            Status::Warn
        } else {
            Status::Ok
        };
        (status, found)
    }
}

pub(super) fn r_overcommit(ctx: &Ctx) -> Option<Verdict> {
    let Some(mode) = ctx.facts.host.memory.overcommit_memory else {
        return Some(unreadable(vm("overcommit_memory")));
    };
    let commit = Commit::read(ctx);
    let (ratio, needs_swap) = commit.ratio();
    let limit = commit.limit(ratio, commit.huge_after);
    let arithmetic = format!(
        "CommitLimit = {} swap + ({} RAM − {} huge pages) × {ratio}% = {}",
        human_bytes(commit.swap),
        human_bytes(commit.total),
        human_bytes(commit.huge_after),
        human_bytes(limit)
    );
    let (status, found) = commit.found(ctx, mode);
    let rec = if needs_swap {
        format!(
            "first add at least {} of swap: Committed_AS {} exceeds even {arithmetic}; then 2",
            human_bytes(commit.committed.saturating_sub(limit)),
            human_bytes(commit.committed)
        )
    } else {
        format!("2 with vm.overcommit_ratio = {ratio} ({arithmetic})")
    };
    let mut v = Verdict::new(status, found, vm("overcommit_memory"))
        .rec(rec)
        .why(if status == Status::Bad {
            "more memory is committed than the commit limit allows, so new allocations (a backend's work_mem) fail now".to_string()
        } else {
            "without strict accounting the OOM killer, not an allocation error, answers memory pressure, and it may kill the postmaster's children or the postmaster itself".to_string()
        })
        .fix(if needs_swap {
            format!(
                "add swap (fallocate -l SIZE /swapfile; mkswap /swapfile; swapon /swapfile), then sysctl -w vm.overcommit_memory=2 vm.overcommit_ratio={ratio}{}",
                sysctl_persist(ctx)
            )
        } else {
            format!(
                "sysctl -w vm.overcommit_memory=2 vm.overcommit_ratio={ratio}{}",
                sysctl_persist(ctx)
            )
        });
    if status != Status::Ok && !needs_swap {
        v = v
            .sysctl("vm.overcommit_memory", STRICT_OVERCOMMIT)
            .sysctl("vm.overcommit_ratio", ratio);
    }
    Some(v)
}

pub(super) fn r_swappiness(ctx: &Ctx) -> Option<Verdict> {
    let m = &ctx.facts.host.memory;
    let Some(s) = m.swappiness else {
        return Some(unreadable(vm("swappiness")));
    };
    let no_swap = m.swap_total_bytes == Some(0);
    let status = if s <= MAX_SWAPPINESS || no_swap {
        Status::Ok
    } else {
        Status::Warn
    };
    let mut v = Verdict::new(
        status,
        if no_swap {
            format!("{s} (no swap configured)")
        } else {
            s.to_string()
        },
        vm("swappiness"),
    )
    .rec(format!("{MAX_SWAPPINESS}"))
    .why("a high swappiness swaps out idle backends' and shared memory to keep page cache, and a swapped-in buffer costs a disk read on the query path")
    .fix(format!("sysctl -w vm.swappiness={MAX_SWAPPINESS}{}", sysctl_persist(ctx)));
    if status != Status::Ok {
        v = v.sysctl("vm.swappiness", MAX_SWAPPINESS);
    }
    Some(v)
}

pub(super) fn r_dirty(ctx: &Ctx) -> Option<Verdict> {
    let m = &ctx.facts.host.memory;
    let Some(total) = m.mem_total_bytes else {
        return Some(unreadable("/proc/meminfo MemTotal".into()));
    };
    // A spinning disk absorbs ~100 MB/s; an SSD several times that. The class decides, not
    // the rotational flag: a virtual disk's flag says nothing about what it absorbs.
    let spins = ctx.disk.class.spins();
    let (bg_rec, dirty_rec) = if spins {
        (ROTATIONAL_DIRTY_BACKGROUND_BYTES, ROTATIONAL_DIRTY_BYTES)
    } else {
        (SSD_DIRTY_BACKGROUND_BYTES, SSD_DIRTY_BYTES)
    };
    let bg_bytes = m.dirty_background_bytes.unwrap_or(0);
    let dirty_bytes = m.dirty_bytes.unwrap_or(0);
    let bg_ratio = m
        .dirty_background_ratio
        .unwrap_or(KERNEL_DEFAULT_DIRTY_BACKGROUND_RATIO);
    let ratio = m.dirty_ratio.unwrap_or(KERNEL_DEFAULT_DIRTY_RATIO);
    let (found, effective_bg) = if bg_bytes > 0 {
        (
            format!(
                "dirty_background_bytes {}, dirty_bytes {}",
                human_bytes(bg_bytes),
                human_bytes(dirty_bytes)
            ),
            bg_bytes,
        )
    } else {
        let eff = total / 100 * bg_ratio;
        (
            format!(
                "dirty_background_ratio {bg_ratio}%, dirty_ratio {ratio}% of {} = {} / {}",
                human_bytes(total),
                human_bytes(eff),
                human_bytes(total / 100 * ratio)
            ),
            eff,
        )
    };
    let status = if effective_bg > DIRTY_BACKGROUND_WARN_FACTOR.saturating_mul(bg_rec) {
        Status::Warn
    } else {
        Status::Ok
    };
    let mut v = Verdict::new(status, found, vm("dirty_background_ratio"))
        .rec(format!(
            "vm.dirty_background_bytes = {bg_rec}, vm.dirty_bytes = {dirty_rec} ({} / {}, for storage class {}: {})",
            human_bytes(bg_rec),
            human_bytes(dirty_rec),
            ctx.disk.class.name(),
            ctx.disk.evidence
        ))
        .why("on large RAM a percentage lets gigabytes of dirty pages pile up, and the checkpoint's fsync then stalls every writer while they drain")
        .fix(format!(
            "sysctl -w vm.dirty_background_bytes={bg_rec} vm.dirty_bytes={dirty_rec}{}",
            sysctl_persist(ctx)
        ));
    if status != Status::Ok {
        v = v
            .sysctl("vm.dirty_background_bytes", bg_rec)
            .sysctl("vm.dirty_bytes", dirty_rec);
    }
    Some(v)
}

pub(super) fn r_thp(ctx: &Ctx) -> Option<Verdict> {
    let thp = &ctx.facts.host.kernel.thp;
    let Some(enabled) = thp.enabled.as_deref() else {
        return Some(unreadable(
            "/sys/kernel/mm/transparent_hugepage/enabled".into(),
        ));
    };
    let status = if enabled == THP_STALLING_MODE {
        Status::Warn
    } else {
        Status::Ok
    };
    Some(
        Verdict::new(
            status,
            format!(
                "enabled [{enabled}], defrag [{}]",
                thp.defrag.as_deref().unwrap_or("?")
            ),
            "/sys/kernel/mm/transparent_hugepage/enabled",
        )
        .rec("never (or madvise)")
        .why("transparent huge pages in 'always' mode stall allocations on compaction and are known to degrade PostgreSQL; explicit huge_pages do the useful part")
        .fix(format!(
            "echo never > /sys/kernel/mm/transparent_hugepage/enabled; keep it with transparent_hugepage=never on the kernel command line{}",
            on_host(ctx)
        )),
    )
}

pub(super) fn r_hugepages(ctx: &Ctx) -> Option<Verdict> {
    if ctx.ram == 0 {
        return Some(skipped("the effective RAM is not known", "/proc/meminfo"));
    }
    let m = &ctx.facts.host.memory;
    let total = m.huge_pages_total.unwrap_or(0);
    let (size, assumed) = ctx.hugepage_size();
    let need = ctx.huge_pages_needed();
    let worth = ctx.huge_pages_worth();
    let status = if !worth || total >= need {
        Status::Ok
    } else {
        Status::Warn
    };
    let found = format!(
        "{total} reserved ({} free, {} reserved for mappings) of {}{assumed}",
        m.huge_pages_free.unwrap_or(0),
        m.huge_pages_rsvd.unwrap_or(0),
        human_bytes(size)
    );
    let rec = if worth {
        format!(
            "{need} ({} shared_buffers + {} other shared memory, +10%, in {} pages)",
            human_bytes(ctx.shared_buffers()),
            human_bytes(ctx.shared_memory() - ctx.shared_buffers()),
            human_bytes(size)
        )
    } else {
        format!(
            "0 (shared memory {} is below {}: not worth reserving)",
            human_bytes(ctx.shared_memory()),
            human_bytes(HUGE_PAGES_WORTH_BYTES)
        )
    };
    let mut v = Verdict::new(status, found, "/proc/meminfo HugePages_Total")
        .rec(rec)
        .why("shared_buffers in huge pages cuts page-table memory per backend and TLB misses, but only if the pages are reserved before PostgreSQL starts")
        .fix(format!(
            "sysctl -w vm.nr_hugepages={need}{}; PostgreSQL tells the exact count: postgres -D PGDATA -C shared_memory_size_in_huge_pages",
            sysctl_persist(ctx)
        ));
    if status != Status::Ok {
        v = v.sysctl("vm.nr_hugepages", need);
    }
    Some(v)
}

pub(super) fn r_zone_reclaim(ctx: &Ctx) -> Option<Verdict> {
    let Some(mode) = ctx.facts.host.memory.zone_reclaim_mode else {
        return Some(unreadable(vm("zone_reclaim_mode")));
    };
    let nodes = ctx.facts.host.kernel.numa.nodes.len();
    let status = if mode == 0 || nodes < MIN_NUMA_NODES_FOR_ZONE_RECLAIM {
        Status::Ok
    } else {
        Status::Warn
    };
    let mut v = Verdict::new(
        status,
        format!("{mode} ({nodes} NUMA node{})", if nodes == 1 { "" } else { "s" }),
        vm("zone_reclaim_mode"),
    )
    .rec("0")
    .why("zone reclaim drops page cache on the local node rather than use another node's free memory, so a database's cached data is thrown away")
    .fix(format!("sysctl -w vm.zone_reclaim_mode=0{}", sysctl_persist(ctx)));
    if status != Status::Ok {
        v = v.sysctl("vm.zone_reclaim_mode", 0);
    }
    Some(v)
}
