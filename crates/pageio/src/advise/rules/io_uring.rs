//! Whether PostgreSQL 18 can use `io_method = io_uring` here: the kernel's
//! `io_uring_disabled` sysctl, a seccomp filter, a server built without liburing, and the
//! limits the postmaster's rings need (RLIMIT_MEMLOCK for the ring memory, RLIMIT_NOFILE for
//! one descriptor per ring). A problem is BAD when the configuration asks for io_uring (the
//! server will not start), else WARN.

use super::super::units::{human_bytes, KB, MB};
use super::ctx::AIO_SINCE_PG;
use super::{Ctx, Verdict};
use crate::advise::{Status, UserInput};

/// PostgreSQL's per-process file budget (`max_files_per_process` default).
pub const MAX_FILES_PER_PROCESS: u64 = 1000;

/// Entries of one io_uring when `io_max_concurrency` is automatic: PostgreSQL 18 takes
/// `min(64, NBuffers / processes)`, 64 for any realistic `shared_buffers`.
pub const DEFAULT_URING_ENTRIES: u64 = 64;

/// The kernel's page size, for ring memory.
const PAGE: u64 = 4096;

/// Bytes of one submission queue entry (`struct io_uring_sqe`, io_uring_setup(2)).
const SQE_BYTES: u64 = 64;

/// Bytes of one completion queue entry (`struct io_uring_cqe`).
const CQE_BYTES: u64 = 16;

/// The completion queue has twice the submission queue's entries (io_uring_setup(2)
/// without IORING_SETUP_CQSIZE).
const CQ_ENTRIES_PER_SQ_ENTRY: u64 = 2;

/// Bytes of the rings' shared header (`struct io_rings`, its heads, tails and flags) in
/// the completion queue's mapping.
const RING_HEADER_BYTES: u64 = 320;

/// Bytes per entry of the submission queue's index array (a `u32` per entry).
const SQ_INDEX_BYTES: u64 = 4;

/// `Seccomp: 2` in `/proc/self/status`: a BPF filter is installed (seccomp(2)
/// SECCOMP_MODE_FILTER), which may refuse the io_uring system calls.
const SECCOMP_MODE_FILTER: u64 = 2;

/// Kernels from this version charge io_uring rings to the memory cgroup, not to
/// RLIMIT_MEMLOCK (Linux 5.12, "io_uring: use memcg accounting").
pub const MEMLOCK_UNCHARGED_FROM: (u32, u32) = (5, 12);

/// Kernels from this version charge rings to RLIMIT_MEMLOCK again (Linux 6.14).
pub const MEMLOCK_CHARGED_AGAIN_FROM: (u32, u32) = (6, 14);

impl Ctx<'_> {
    /// Whether io_uring can work for PostgreSQL here, and if not every cause.
    pub fn uring_causes(&self) -> Vec<String> {
        let f = self.facts;
        let mut causes = Vec::new();
        if self.pg < AIO_SINCE_PG {
            causes.push(format!("PostgreSQL {} has no io_method", self.pg));
            return causes;
        }
        if let Some(cause) = &f.host.kernel.io_uring.refused_cause {
            causes.push(cause.clone());
        } else if let Some(Err(e)) = &f.probes.io_uring_setup {
            causes.push(format!("io_uring_setup failed: {e}"));
        }
        if let Some(bin) = &f.pg_bin {
            if bin.liburing == Some(false) {
                causes.push(format!(
                    "{} was built without liburing ({})",
                    bin.postgres.display(),
                    bin.how
                ));
            }
        }
        if let Some((need, have)) = self.memlock_short() {
            causes.push(format!(
                "RLIMIT_MEMLOCK {} is below the {} the rings need",
                human_bytes(have),
                human_bytes(need)
            ));
        }
        causes
    }

    /// Whether io_uring rings are charged to RLIMIT_MEMLOCK on this kernel: before 5.12
    /// (before rings moved to memcg accounting) and again from 6.14.
    pub(super) fn memlock_charged(&self) -> Option<bool> {
        self.facts
            .host
            .kernel
            .version
            .map(|v| !(MEMLOCK_UNCHARGED_FROM..MEMLOCK_CHARGED_AGAIN_FROM).contains(&v))
    }

    /// Bytes of the rings PostgreSQL creates, all in the postmaster: one per process, each
    /// an SQ of 64-byte entries and a CQ of twice as many 16-byte entries plus the index
    /// array, page-rounded.
    pub fn ring_bytes(&self) -> u64 {
        let entries = self
            .setting("io_max_concurrency")
            .and_then(|s| s.value.parse::<i64>().ok())
            .filter(|v| *v > 0)
            .map(|v| (v as u64).next_power_of_two())
            .unwrap_or(DEFAULT_URING_ENTRIES);
        let sq = (entries * SQE_BYTES).div_ceil(PAGE) * PAGE;
        let cq = (RING_HEADER_BYTES
            + CQ_ENTRIES_PER_SQ_ENTRY * entries * CQE_BYTES
            + entries * SQ_INDEX_BYTES)
            .div_ceil(PAGE)
            * PAGE;
        self.processes().0 * (sq + cq)
    }

    /// `(needed, soft limit)` when the memlock limit is too low for the rings.
    pub(super) fn memlock_short(&self) -> Option<(u64, u64)> {
        use crate::host::RlimitValue;
        if self.memlock_charged() != Some(true) {
            return None;
        }
        let soft = self.facts.host.limits.memlock_bytes?.soft;
        let need = self.ring_bytes();
        match soft {
            RlimitValue::Limited(have) if have < need => Some((need, have)),
            _ => None,
        }
    }

    /// Whether the configuration asks for io_uring.
    pub(super) fn wants_uring(&self) -> bool {
        self.setting("io_method")
            .is_some_and(|s| s.value.trim_matches('\'') == "io_uring")
    }
}

/// Whether the version advised for has `io_method` at all.
fn pg18_uring(ctx: &Ctx) -> bool {
    ctx.pg >= AIO_SINCE_PG
}

/// The status of an io_uring problem: BAD when the configuration asks for io_uring (the
/// server will not start), else WARN.
fn uring_problem(ctx: &Ctx) -> Status {
    if ctx.wants_uring() {
        Status::Bad
    } else {
        Status::Warn
    }
}

pub(super) fn r_uring_sysctl(ctx: &Ctx) -> Option<Verdict> {
    if !pg18_uring(ctx) {
        return None;
    }
    let u = &ctx.facts.host.kernel.io_uring;
    let disabled = u.disabled?;
    let status = if disabled == 0 {
        Status::Ok
    } else {
        uring_problem(ctx)
    };
    let found = match disabled {
        1 => format!(
            "1 (only group {} may create rings)",
            u.group.map(|g| g.to_string()).unwrap_or_else(|| "?".into())
        ),
        d => d.to_string(),
    };
    let mut v = Verdict::new(status, found, "/proc/sys/kernel/io_uring_disabled")
        .rec("0 (or 1 with kernel.io_uring_group = the postgres user's group)")
        .why(
            u.refused_cause
                .clone()
                .unwrap_or_else(|| "io_uring is allowed for every process".into()),
        )
        .fix(u.refused_fix.clone().unwrap_or_else(|| "none".into()));
    if status != Status::Ok {
        v = v.sysctl("kernel.io_uring_disabled", 0);
    }
    Some(v)
}

pub(super) fn r_seccomp(ctx: &Ctx) -> Option<Verdict> {
    if !pg18_uring(ctx) {
        return None;
    }
    let sc = &ctx.facts.seccomp;
    let probe = ctx.facts.probes.io_uring_setup.as_ref();
    let sysctl_off = ctx.facts.host.kernel.io_uring.disabled.unwrap_or(0) != 0;
    let refused =
        sc.mode == Some(SECCOMP_MODE_FILTER) && matches!(probe, Some(Err(_))) && !sysctl_off;
    let status = if refused {
        uring_problem(ctx)
    } else {
        Status::Ok
    };
    let probe_text = match probe {
        None => "io_uring_setup not probed".to_string(),
        Some(Ok(())) => "io_uring_setup succeeds".to_string(),
        Some(Err(e)) => format!("io_uring_setup fails: {e}"),
    };
    Some(
        Verdict::new(
            status,
            format!("Seccomp: {} ({}); {probe_text}", sc.mode.map(|m| m.to_string()).unwrap_or_else(|| "-".into()), sc.mode_name()),
            format!("{} and a live io_uring_setup", crate::host::process::PROC_SELF_STATUS),
        )
        .rec("no filter refusing io_uring_setup, io_uring_enter, io_uring_register")
        .why(if refused {
            "a seccomp filter (Docker's and containerd's default profiles block io_uring) refuses io_uring_setup, so PostgreSQL with io_method = io_uring fails at start"
        } else {
            "nothing filters the io_uring system calls"
        })
        .fix(if refused {
            "run the container with a seccomp profile that allows io_uring_setup, io_uring_enter and io_uring_register (docker run --security-opt seccomp=PROFILE.json; Kubernetes securityContext.seccompProfile), or set io_method = worker"
        } else {
            "none"
        }),
    )
}

pub(super) fn r_liburing(ctx: &Ctx) -> Option<Verdict> {
    if !pg18_uring(ctx) {
        return None;
    }
    let Some(bin) = &ctx.facts.pg_bin else {
        return Some(
            Verdict::new(
                Status::Ok,
                format!(
                    "not checked: no postgres binary in {} or PATH",
                    ctx.names.name(UserInput::PgBin)
                ),
                "PATH",
            )
            .rec("built --with-liburing (for io_method = io_uring)")
            .why("PostgreSQL accepts io_method = io_uring only when built with liburing")
            .fix(format!(
                "{} (the directory holding postgres)",
                ctx.names.rerun(UserInput::PgBin)
            )),
        );
    };
    let status = match bin.liburing {
        Some(false) => uring_problem(ctx),
        _ => Status::Ok,
    };
    Some(
        Verdict::new(
            status,
            match bin.liburing {
                Some(true) => "linked with liburing".to_string(),
                Some(false) => "built without liburing".to_string(),
                None => "unknown".to_string(),
            },
            bin.how.clone(),
        )
        .rec("built --with-liburing (for io_method = io_uring)")
        .why("PostgreSQL accepts io_method = io_uring only when built with liburing, and refuses to start otherwise")
        .fix(if status == Status::Ok { "none" } else { "install a PostgreSQL build configured --with-liburing (meson -Dliburing=enabled), or keep io_method = worker" }),
    )
}

pub(super) fn r_memlock(ctx: &Ctx) -> Option<Verdict> {
    if !pg18_uring(ctx) {
        return None;
    }
    let Some(limit) = ctx.facts.host.limits.memlock_bytes else {
        return Some(super::skipped(
            "the process's limits give no Max locked memory line",
            "/proc/self/limits",
        ));
    };
    let need = ctx.ring_bytes();
    let (procs, arithmetic) = ctx.processes();
    let charged = ctx.memlock_charged();
    let short = ctx.memlock_short();
    let status = if short.is_some() {
        uring_problem(ctx)
    } else {
        Status::Ok
    };
    let show = |v: crate::host::RlimitValue| match v {
        crate::host::RlimitValue::Unlimited => "unlimited".to_string(),
        crate::host::RlimitValue::Limited(b) => human_bytes(b),
    };
    Some(
        Verdict::new(
            status,
            format!("soft {}, hard {}", show(limit.soft), show(limit.hard)),
            "/proc/self/limits Max locked memory (this process; the server's comes from its service unit)",
        )
        .rec(format!(
            "at least {} ({arithmetic}; {} per ring){}",
            human_bytes(need),
            human_bytes(need / procs.max(1)),
            match charged {
                Some(true) => ", charged to RLIMIT_MEMLOCK on this kernel",
                Some(false) => ", not charged on this kernel (5.12–6.13 charge rings to the memory cgroup)",
                None => "",
            }
        ))
        .why("the postmaster creates every backend's io_uring before forking, and where rings count against RLIMIT_MEMLOCK a low limit makes io_uring_setup fail with ENOMEM at start")
        .fix(if status == Status::Ok {
            "none".to_string()
        } else {
            format!(
                "LimitMEMLOCK={} in the PostgreSQL service (systemctl edit postgresql), or ulimit -l {} before pg_ctl start",
                need.div_ceil(MB) * MB,
                need.div_ceil(KB)
            )
        }),
    )
}

pub(super) fn r_nofile(ctx: &Ctx) -> Option<Verdict> {
    use crate::host::RlimitValue;
    let Some(limit) = ctx.facts.host.limits.nofile else {
        return Some(super::skipped(
            "the process's limits give no Max open files line",
            "/proc/self/limits",
        ));
    };
    let (procs, arithmetic) = ctx.processes();
    // From PostgreSQL 18 one descriptor per ring (all held by the postmaster) plus its own
    // file budget; before, the file budget alone.
    let uring = ctx.pg >= AIO_SINCE_PG;
    let need = if uring {
        procs + MAX_FILES_PER_PROCESS
    } else {
        MAX_FILES_PER_PROCESS
    };
    let hard_ok = match limit.hard {
        RlimitValue::Unlimited => true,
        RlimitValue::Limited(h) => h >= need,
    };
    let status = if hard_ok {
        Status::Ok
    } else if ctx.wants_uring() && ctx.pg >= AIO_SINCE_PG {
        Status::Bad
    } else {
        Status::Warn
    };
    let show = |v: RlimitValue| match v {
        RlimitValue::Unlimited => "unlimited".to_string(),
        RlimitValue::Limited(n) => n.to_string(),
    };
    Some(
        Verdict::new(
            status,
            format!("soft {}, hard {}", show(limit.soft), show(limit.hard)),
            "/proc/self/limits Max open files (this process; the server's comes from its service unit)",
        )
        .rec(if uring {
            format!(
                "hard limit ≥ {need} ({arithmetic}, one descriptor each for its io_uring, + max_files_per_process {MAX_FILES_PER_PROCESS})"
            )
        } else {
            format!("hard limit ≥ {need} (max_files_per_process)")
        })
        .why(if uring {
            "with io_method = io_uring the postmaster holds one ring descriptor per possible process (PostgreSQL 18 raises its soft limit to the hard one for them), on top of its own files"
        } else {
            "each backend may keep max_files_per_process files open"
        })
        .fix(if hard_ok {
            "none".to_string()
        } else {
            format!("LimitNOFILE={need} in the PostgreSQL service (systemctl edit postgresql), or ulimit -n {need}")
        }),
    )
}

pub(super) fn r_uring(ctx: &Ctx) -> Option<Verdict> {
    let causes = ctx.uring_causes();
    if ctx.pg < AIO_SINCE_PG {
        return Some(
            Verdict::new(
                Status::Ok,
                format!("not used by PostgreSQL {}", ctx.pg),
                ctx.names.name(UserInput::PgVersion),
            )
            .rec("—")
            .why("asynchronous I/O and io_method arrived in PostgreSQL 18")
            .fix("none"),
        );
    }
    let status = if causes.is_empty() {
        Status::Ok
    } else {
        uring_problem(ctx)
    };
    Some(
        Verdict::new(
            status,
            if causes.is_empty() {
                "usable".to_string()
            } else {
                format!("not usable: {}", causes.join("; "))
            },
            "the io_uring checks above",
        )
        .rec(if causes.is_empty() {
            "io_method = io_uring is possible"
        } else {
            "io_method = worker until the causes are fixed"
        })
        .why(if status == Status::Bad {
            "postgresql.conf sets io_method = io_uring, which fails at start here"
        } else if causes.is_empty() {
            "the kernel, the process's limits and the PostgreSQL build all allow io_uring"
        } else {
            "io_method = io_uring would fail here; worker works everywhere"
        })
        .fix(if causes.is_empty() {
            "none".to_string()
        } else {
            "fix the io_uring items above, or set io_method = worker".to_string()
        }),
    )
}
