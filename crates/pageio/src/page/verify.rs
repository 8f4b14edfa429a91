//! Page verification as PostgreSQL does it on every read (`PageIsVerified`, bufpage.c).
//!
//! # Problem
//!
//! A page read from disk may be torn, zeroed by a crash during relation extension, or
//! silently corrupted. PostgreSQL decides on every read whether to accept it; we must reach
//! the same verdict for the same bytes, and explain a rejection precisely enough to act on.
//!
//! # Mechanism
//!
//! ```text
//!            pd_upper == 0 ? ──yes──► every byte zero ? ──yes──► New (valid: extension, not yet written)
//!                 │ no                      │ no
//!                 │                         └──► NonZeroNewPage
//!                 ▼
//!       checksums on and pd_checksum != computed ? ──yes──► ChecksumMismatch   (reported first,
//!                 │ no                                                         like PostgreSQL)
//!                 ▼
//!       PageHeaderIsValid ? ──no──► BadHeader { reason }
//!                 │ yes
//!                 ▼
//!               Valid
//! ```
//!
//! `PageHeaderIsValid` requires: no flag bits beyond `PD_VALID_FLAG_BITS`,
//! `pd_lower <= pd_upper <= pd_special <= BLCKSZ`, and `pd_special` MAXALIGNed.
//!
//! # Worked example
//!
//! Fixture block 0 of `uniform` stores checksum 50652 and computes 50652, its header is sane:
//! `Valid`. Flip its pd_flags to 0x0008 and the checksum no longer matches:
//! `ChecksumMismatch { stored: 50652, computed: … }` — the header problem is only reported
//! when checksums are off.

use super::checksum::{pg_checksum_page, stored_checksum};
use super::header::{PageHeader, PD_VALID_FLAG_BITS};
use super::{maxalign, BLCKSZ};

/// Outcome of [`verify_page`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PageVerification {
    /// Header sane and (if enabled) checksum correct.
    Valid,
    /// All-zero page: a "new" page PostgreSQL accepts without a checksum.
    New,
    /// Stored checksum differs from the computed one.
    ChecksumMismatch {
        /// `pd_checksum` on the page.
        stored: u16,
        /// What `pg_checksum_page` computes for this block number.
        computed: u16,
    },
    /// Checksum fine (or disabled) but the header fails `PageHeaderIsValid`.
    BadHeader {
        /// Which check failed, with the values.
        reason: String,
    },
    /// pd_upper is 0 (a "new" page) but the page has non-zero bytes.
    NonZeroNewPage {
        /// Offset of the first non-zero byte.
        first_nonzero_offset: usize,
    },
}

impl PageVerification {
    /// True if PostgreSQL would accept the page (`Valid` or `New`).
    pub fn is_ok(&self) -> bool {
        matches!(self, Self::Valid | Self::New)
    }
}

impl std::fmt::Display for PageVerification {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Valid => write!(f, "valid"),
            Self::New => write!(f, "new (all zero)"),
            Self::ChecksumMismatch { stored, computed } => {
                write!(f, "checksum mismatch: stored {stored}, computed {computed}")
            }
            Self::BadHeader { reason } => write!(f, "invalid page header: {reason}"),
            Self::NonZeroNewPage {
                first_nonzero_offset,
            } => write!(
                f,
                "pd_upper is 0 but byte {first_nonzero_offset} is non-zero"
            ),
        }
    }
}

/// Why a header fails `PageHeaderIsValid`, or `None` if it passes.
pub fn header_problem(header: &PageHeader) -> Option<String> {
    let h = header;
    if h.pd_flags & !PD_VALID_FLAG_BITS != 0 {
        return Some(format!(
            "pd_flags {:#06x} has bits outside {PD_VALID_FLAG_BITS:#06x}",
            h.pd_flags
        ));
    }
    if h.pd_lower > h.pd_upper {
        return Some(format!(
            "pd_lower {} beyond pd_upper {}",
            h.pd_lower, h.pd_upper
        ));
    }
    if h.pd_upper > h.pd_special {
        return Some(format!(
            "pd_upper {} beyond pd_special {}",
            h.pd_upper, h.pd_special
        ));
    }
    if h.pd_special as usize > BLCKSZ {
        return Some(format!(
            "pd_special {} beyond page size {BLCKSZ}",
            h.pd_special
        ));
    }
    if h.pd_special as usize != maxalign(h.pd_special as usize) {
        return Some(format!("pd_special {} not MAXALIGNed", h.pd_special));
    }
    None
}

/// Verifies `page` as block `blkno` the way `PageIsVerified` does; `checksums_enabled`
/// mirrors the cluster's `data_checksums`.
pub fn verify_page(page: &[u8; BLCKSZ], blkno: u32, checksums_enabled: bool) -> PageVerification {
    // parse() cannot fail on a full page; the fallback keeps this function panic-free anyway.
    let header = PageHeader::parse(page).unwrap_or_default();
    if header.pd_upper == 0 {
        return match page.iter().position(|&b| b != 0) {
            None => PageVerification::New,
            Some(first_nonzero_offset) => PageVerification::NonZeroNewPage {
                first_nonzero_offset,
            },
        };
    }
    if checksums_enabled {
        let stored = stored_checksum(page);
        let computed = pg_checksum_page(page, blkno);
        if stored != computed {
            return PageVerification::ChecksumMismatch { stored, computed };
        }
    }
    match header_problem(&header) {
        Some(reason) => PageVerification::BadHeader { reason },
        None => PageVerification::Valid,
    }
}

/// Like [`verify_page`] for a slice; a slice that is not exactly one page is reported as a
/// bad header.
pub fn verify_slice(page: &[u8], blkno: u32, checksums_enabled: bool) -> PageVerification {
    match super::as_page(page) {
        Ok(page) => verify_page(page, blkno, checksums_enabled),
        Err(e) => PageVerification::BadHeader {
            reason: e.to_string(),
        },
    }
}
