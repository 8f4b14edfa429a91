//! MultiXact member lists (`multixact.c`'s `GetMultiXactIdMembers`), read from a stopped
//! cluster's `pg_multixact` to find a multi's updater.
//!
//! ```text
//!  offsets page  = multi / 2048, entry = multi % 2048 (4 bytes each)
//!  members       = offsets[multi] .. offsets[multi + 1]   (the newest multi: .. nextMultiOffset)
//!  member o      page = o / 1636; group = (o / 4) % 409, at byte group * 20 of the page;
//!                status byte (o % 4) of the group's first 4 bytes; xid at 4 + (o % 4) * 4
//! ```
//!
//! Multi ids and member offsets wrap at 2^32 and skip 0, which marks "not assigned": a
//! start offset of 0 is corrupt, a member slot holding xid 0 is the skipped slot and is
//! passed over (PostgreSQL's corner case 3).

use super::slru::Slru;
use super::{xid_precedes, TransactionLog, VisibilityError};

/// `MULTIXACT_OFFSETS_PER_PAGE`: 4-byte offsets on an 8 kB page.
const OFFSETS_PER_PAGE: u32 = crate::config::BLCKSZ as u32 / 4;
/// `MULTIXACT_MEMBERS_PER_MEMBERGROUP`.
const MEMBERS_PER_GROUP: u32 = 4;
/// `MULTIXACT_FLAGBYTES_PER_GROUP`.
const FLAG_BYTES_PER_GROUP: usize = 4;
/// `MULTIXACT_MEMBERGROUP_SIZE`: 4 flag bytes and 4 xids.
const GROUP_SIZE_BYTES: usize = FLAG_BYTES_PER_GROUP + MEMBERS_PER_GROUP as usize * 4;
/// `MULTIXACT_MEMBERGROUPS_PER_PAGE`.
const GROUPS_PER_PAGE: u32 = (crate::config::BLCKSZ / GROUP_SIZE_BYTES) as u32;
/// `MULTIXACT_MEMBERS_PER_PAGE`.
const MEMBERS_PER_PAGE: u32 = GROUPS_PER_PAGE * MEMBERS_PER_GROUP;

/// The most members one multi may list before its member list is called corrupt. A multi
/// holds one entry per transaction that locked or updated the row at once, so it cannot
/// list more than the server's connections and prepared transactions (`max_connections`
/// is at most 262,143); a range wider than this comes from a damaged offset, and walking it
/// would read up to 2^32 slots.
const MAX_MEMBERS: u32 = 1 << 20;

/// A member's lock mode (`MultiXactStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MultiXactStatus {
    /// `FOR KEY SHARE`.
    ForKeyShare,
    /// `FOR SHARE`.
    ForShare,
    /// `FOR NO KEY UPDATE`.
    ForNoKeyUpdate,
    /// `FOR UPDATE`.
    ForUpdate,
    /// An update that changed no key column.
    NoKeyUpdate,
    /// An update of a key column, or a delete.
    Update,
}

impl MultiXactStatus {
    /// The status stored in a member's flag byte, if it is one.
    pub fn from_raw(raw: u8) -> Option<MultiXactStatus> {
        Some(match raw {
            0 => MultiXactStatus::ForKeyShare,
            1 => MultiXactStatus::ForShare,
            2 => MultiXactStatus::ForNoKeyUpdate,
            3 => MultiXactStatus::ForUpdate,
            4 => MultiXactStatus::NoKeyUpdate,
            5 => MultiXactStatus::Update,
            _ => return None,
        })
    }

    /// `ISUPDATE_from_mxstatus`: the member updated or deleted the row.
    pub fn is_update(self) -> bool {
        matches!(self, MultiXactStatus::NoKeyUpdate | MultiXactStatus::Update)
    }
}

/// The multi after `multi`, skipping 0 on wraparound (`FirstMultiXactId` is 1).
fn next_multi(multi: u32) -> u32 {
    multi.wrapping_add(1).max(1)
}

/// The starting member offset of `multi`.
fn start_offset(offsets: &Slru, multi: u32) -> Result<u32, VisibilityError> {
    let pageno = multi / OFFSETS_PER_PAGE;
    let entry = (multi % OFFSETS_PER_PAGE) as usize * 4;
    let b = offsets.bytes_at::<4>(pageno, entry, &|| format!("MultiXact {multi}"))?;
    Ok(u32::from_le_bytes(b))
}

/// The updater among `multi`'s members, or `None` if it has only lockers (or, being older
/// than `oldestMulti`, no members any more).
pub fn update_xid(log: &TransactionLog, multi: u32) -> Result<Option<u32>, VisibilityError> {
    let h = log.horizons;
    let corrupt = |file: String, problem: String| VisibilityError::MultiXactCorrupt {
        multi,
        file,
        problem,
    };
    let offsets_file = || {
        log.offsets
            .file(multi / OFFSETS_PER_PAGE / super::slru::PAGES_PER_SEGMENT)
    };
    if multi == 0 {
        return Err(corrupt(
            offsets_file(),
            "a row's xmax is marked as a MultiXact but holds MultiXactId 0, which is never assigned".into(),
        ));
    }
    if xid_precedes(multi, h.oldest_multi) {
        return Ok(None);
    }
    if !h.in_recovery && !xid_precedes(multi, h.next_multi) {
        return Err(corrupt(
            offsets_file(),
            format!(
                "it has not been created yet: the cluster's next MultiXactId is {} (apparent wraparound)",
                h.next_multi
            ),
        ));
    }
    let start = start_offset(&log.offsets, multi)?;
    let after = next_multi(multi);
    let end = if after == h.next_multi && !h.in_recovery {
        h.next_multi_offset
    } else {
        start_offset(&log.offsets, after)?
    };
    if start == 0 || end == 0 {
        return Err(corrupt(
            offsets_file(),
            format!(
                "its member list runs from offset {start} to offset {end}, and offset 0 is never assigned"
            ),
        ));
    }
    let count = end.wrapping_sub(start);
    if count > MAX_MEMBERS {
        return Err(corrupt(
            offsets_file(),
            format!("its member list runs from offset {start} to offset {end}: {count} members, more than the {MAX_MEMBERS} any multi can hold"),
        ));
    }
    let mut updater = None;
    for i in 0..count {
        let o = start.wrapping_add(i);
        let pageno = o / MEMBERS_PER_PAGE;
        let group_at = ((o / MEMBERS_PER_GROUP) % GROUPS_PER_PAGE) as usize * GROUP_SIZE_BYTES;
        let in_group = (o % MEMBERS_PER_GROUP) as usize;
        let subject = || format!("MultiXact {multi}");
        let xid = u32::from_le_bytes(log.members.bytes_at::<4>(
            pageno,
            group_at + FLAG_BYTES_PER_GROUP + in_group * 4,
            &subject,
        )?);
        if xid == 0 {
            continue;
        }
        let [flags] = log
            .members
            .bytes_at::<1>(pageno, group_at + in_group, &subject)?;
        let member_file = || log.members.file(pageno / super::slru::PAGES_PER_SEGMENT);
        let Some(status) = MultiXactStatus::from_raw(flags) else {
            return Err(corrupt(
                member_file(),
                format!("member {i} (transaction {xid}) has lock mode {flags}, and modes run from 0 to 5"),
            ));
        };
        if status.is_update() {
            if let Some(first) = updater {
                return Err(corrupt(
                    member_file(),
                    format!("it has two updaters, transactions {first} and {xid}"),
                ));
            }
            updater = Some(xid);
        }
    }
    Ok(updater)
}
