//! The WAL settings: `wal_buffers`, `min_wal_size` / `max_wal_size` and
//! `checkpoint_completion_target`.

use super::super::units::{BLOCK, GB, MB};
use super::settings::{number_setting, size_setting, CHECKPOINT_TARGET_TOLERANCE};
use super::{Ctx, Verdict};
use crate::advise::{Status, Workload};

/// `checkpoint_completion_target` recommended: PostgreSQL 14's default, 0.9 (release notes;
/// pgtune), spreading checkpoint writes over 90% of the interval.
pub const CHECKPOINT_COMPLETION_TARGET: f64 = 0.9;

/// pgtune's `min_wal_size` / `max_wal_size` per workload.
pub fn wal_sizes(w: Workload) -> (u64, u64) {
    match w {
        Workload::Web | Workload::Mixed => (GB, 4 * GB),
        Workload::Oltp => (2 * GB, 8 * GB),
        Workload::Dw => (4 * GB, 16 * GB),
        Workload::Desktop => (100 * MB, 2 * GB),
    }
}

pub(super) fn r_wal_buffers(ctx: &Ctx) -> Option<Verdict> {
    if ctx.ram == 0 {
        return Some(super::memory_settings::ram_unknown());
    }
    let rec = ctx.wal_buffers();
    let mut v = size_setting(
        ctx,
        "wal_buffers",
        BLOCK,
        rec,
        "shared_buffers/32 up to one 16 MB WAL segment — what PostgreSQL's automatic -1 picks, written out".into(),
    );
    if ctx.current("wal_buffers").0.trim_matches('\'') == "-1" {
        v.status = Some(Status::Ok);
    }
    Some(v)
}

pub(super) fn r_min_wal(ctx: &Ctx) -> Option<Verdict> {
    Some(size_setting(
        ctx,
        "min_wal_size",
        MB,
        wal_sizes(ctx.workload()).0,
        format!(
            "pgtune's value for {}: WAL kept for reuse instead of recreated",
            ctx.workload().name()
        ),
    ))
}

pub(super) fn r_max_wal(ctx: &Ctx) -> Option<Verdict> {
    Some(size_setting(
        ctx,
        "max_wal_size",
        MB,
        wal_sizes(ctx.workload()).1,
        format!(
            "pgtune's value for {}: checkpoints by time, not forced by WAL volume",
            ctx.workload().name()
        ),
    ))
}

pub(super) fn r_checkpoint_target(ctx: &Ctx) -> Option<Verdict> {
    Some(number_setting(
        ctx,
        "checkpoint_completion_target",
        CHECKPOINT_COMPLETION_TARGET,
        CHECKPOINT_TARGET_TOLERANCE,
        CHECKPOINT_COMPLETION_TARGET.to_string(),
        "spread checkpoint writes over 90% of the interval (PostgreSQL 14's default)".into(),
    ))
}
