//! The PostgreSQL memory settings: `shared_buffers`, `huge_pages`, `effective_cache_size`,
//! `work_mem` and `maintenance_work_mem`, sized from the effective RAM (the formulas are
//! [`Ctx`]'s: pgtune's, with PostgreSQL's documented starting points).

use super::super::units::{human_bytes, parse_size, round_down, BLOCK, KB, MB};
use super::settings::{size_setting, word_setting};
use super::{Ctx, Verdict};
use crate::advise::{Status, Workload};

/// `shared_buffers` above this share of the effective RAM is BAD: with the backends' own
/// memory on top the cgroup or the OOM killer ends the server.
pub const MAX_SHARED_BUFFERS_SHARE: f64 = 0.8;

/// `effective_cache_size` is the effective RAM divided by this, times
/// [`EFFECTIVE_CACHE_SIZE_RAM_QUARTERS`]: three quarters (pgtune; PostgreSQL docs 19.7.2),
/// what `shared_buffers` and the page cache together can hold.
pub const EFFECTIVE_CACHE_SIZE_RAM_DIVISOR: u64 = 4;

/// See [`EFFECTIVE_CACHE_SIZE_RAM_DIVISOR`]: 3 of 4 quarters (pgtune).
pub const EFFECTIVE_CACHE_SIZE_RAM_QUARTERS: u64 = 3;

/// On a desktop `effective_cache_size` is one quarter of the RAM (pgtune).
pub const DESKTOP_EFFECTIVE_CACHE_SIZE_RAM_DIVISOR: u64 = 4;

/// The memory settings are sized from the effective RAM: without it, each says so.
pub(super) fn ram_unknown() -> Verdict {
    super::skipped(
        "the effective RAM is not known, and every memory setting is sized from it",
        "/proc/meminfo and the cgroup memory limit, unread: see the effective resources item",
    )
}

pub(super) fn r_shared_buffers(ctx: &Ctx) -> Option<Verdict> {
    if ctx.ram == 0 {
        return Some(ram_unknown());
    }
    let rec = ctx.shared_buffers();
    let mut v = size_setting(
        ctx,
        "shared_buffers",
        BLOCK,
        rec,
        format!(
            "{} of the {} effective RAM ({}); the kernel's page cache holds the rest",
            if ctx.workload() == Workload::Desktop {
                "1/16"
            } else {
                "25%"
            },
            human_bytes(ctx.ram),
            ctx.ram_limit
        ),
    );
    let (found, _) = ctx.current("shared_buffers");
    if parse_size(&found, BLOCK)
        .is_some_and(|f| f as f64 > ctx.ram as f64 * MAX_SHARED_BUFFERS_SHARE)
    {
        v.status = Some(Status::Bad);
        v.reason = format!(
            "{found} is more than {:.0}% of the {} effective RAM ({}): the server will be killed or fail to allocate",
            MAX_SHARED_BUFFERS_SHARE * 100.0,
            human_bytes(ctx.ram),
            ctx.ram_limit
        );
    }
    Some(v)
}

pub(super) fn r_huge_pages_setting(ctx: &Ctx) -> Option<Verdict> {
    if ctx.ram == 0 {
        return Some(ram_unknown());
    }
    let total = ctx.facts.host.memory.huge_pages_total.unwrap_or(0);
    let need = ctx.huge_pages_needed();
    let enough = total >= need;
    let rec = if enough { "on" } else { "try" };
    let mut v = word_setting(
        ctx,
        "huge_pages",
        rec,
        if enough {
            format!("{total} huge pages are reserved, enough for the {need} needed: 'on' fails loudly if they go missing")
        } else {
            format!("{total} huge pages reserved, {need} needed: 'try' falls back to normal pages instead of refusing to start")
        },
    );
    let (found, _) = ctx.current("huge_pages");
    if found.trim_matches('\'') == "on" && !enough {
        v.status = Some(Status::Bad);
        v.reason = format!(
            "huge_pages = on with {total} huge pages reserved of the {need} needed: the server will not start"
        );
    }
    Some(v)
}

impl Ctx<'_> {
    /// `effective_cache_size` (pgtune): three quarters of the effective RAM — a container's
    /// memory limit when there is one —, a quarter on a desktop; in whole MB.
    pub fn effective_cache_size(&self) -> u64 {
        if self.workload() == Workload::Desktop {
            round_down(self.ram / DESKTOP_EFFECTIVE_CACHE_SIZE_RAM_DIVISOR, MB)
        } else {
            round_down(
                self.ram / EFFECTIVE_CACHE_SIZE_RAM_DIVISOR * EFFECTIVE_CACHE_SIZE_RAM_QUARTERS,
                MB,
            )
        }
    }
}

pub(super) fn r_effective_cache_size(ctx: &Ctx) -> Option<Verdict> {
    if ctx.ram == 0 {
        return Some(ram_unknown());
    }
    let rec = ctx.effective_cache_size();
    Some(size_setting(
        ctx,
        "effective_cache_size",
        BLOCK,
        rec,
        format!(
            "{} of the {} effective RAM ({}) = {}: what shared_buffers and the page cache together can hold, for the planner's index costs",
            if ctx.workload() == Workload::Desktop { "25%" } else { "75%" },
            human_bytes(ctx.ram),
            ctx.ram_limit,
            human_bytes(rec)
        ),
    ))
}

pub(super) fn r_work_mem(ctx: &Ctx) -> Option<Verdict> {
    if ctx.ram == 0 {
        return Some(ram_unknown());
    }
    let rec = ctx.work_mem();
    Some(size_setting(
        ctx,
        "work_mem",
        KB,
        rec,
        format!(
            "({} RAM − {} shared_buffers) / (({} connections + {} worker processes) × 3){}, at least 4 MB: several sorts and hashes per query must fit at once",
            human_bytes(ctx.ram),
            human_bytes(ctx.shared_buffers()),
            ctx.max_connections.0,
            ctx.max_worker_processes(),
            match ctx.workload() {
                Workload::Dw | Workload::Mixed => " / 2",
                Workload::Desktop => " / 6",
                _ => "",
            }
        ),
    ))
}

pub(super) fn r_maintenance_work_mem(ctx: &Ctx) -> Option<Verdict> {
    if ctx.ram == 0 {
        return Some(ram_unknown());
    }
    Some(size_setting(
        ctx,
        "maintenance_work_mem",
        KB,
        ctx.maintenance_work_mem(),
        format!(
            "RAM/{} capped at 2 GB: each autovacuum worker may take it",
            if ctx.workload() == Workload::Dw {
                8
            } else {
                16
            }
        ),
    ))
}
