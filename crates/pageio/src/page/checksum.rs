//! PostgreSQL's data page checksum (`pg_checksum_page`), bit for bit.
//!
//! # Problem
//!
//! With data checksums on (`initdb -k`, the default since PostgreSQL 18) every page carries a
//! 16-bit checksum in `pd_checksum`. We must compute exactly the value PostgreSQL computes —
//! otherwise every real page looks corrupt — and we must do it at device speed, because
//! verification runs on the completion path of every read.
//!
//! # Mechanism
//!
//! PostgreSQL's algorithm (`src/include/storage/checksum_impl.h`) is a variant of FNV-1a that
//! runs 32 independent hash lanes over the page viewed as a 64 × 32 matrix of little-endian
//! `u32` words. Lane `j` folds in column `j`, row by row:
//!
//! ```text
//!            lane 0     lane 1           lane 31
//!  row 0   [ w0       , w1       , … , w31      ]   ← w2's low half is pd_checksum: treated as 0
//!  row 1   [ w32      , w33      , … , w63      ]
//!   …
//!  row 63  [ w2016    , w2017    , … , w2047    ]
//!          then two rounds of 0 into every lane, XOR the 32 lanes together,
//!          XOR in the block number, reduce to 1..=65535
//! ```
//!
//! Each step is `tmp = sum ^ word; sum = tmp * FNV_PRIME ^ (tmp >> 17)`. The 32 lanes are
//! independent, so we keep them in a `[u32; 32]` and update the whole array per row with a
//! straight-line loop over fixed-size arrays: LLVM turns that into SIMD multiplies
//! (`pmulld`/`vpmulld`), which is where the speed comes from. The stored checksum must not
//! influence the result; PostgreSQL zeroes it transiently, we mask it out of row 0 instead so
//! the input can stay immutable.
//!
//! The baseline x86-64 target has no 32-bit vector multiply (SSE4.1's `pmulld`), so compiled
//! for it the loop emulates one with shuffles: 17 GiB/s on one core of the benchmark machine
//! (`cargo bench --bench checksum`, the "portable" row). The same source compiled with AVX2
//! enabled runs at 51 GiB/s there, so on x86-64 [`pg_checksum_page`] checks once (cached in
//! an atomic) whether the CPU has AVX2 and, if so, calls a copy of the function compiled for
//! it. Both copies are the same Rust code, so they cannot disagree; a test checks it on
//! random pages anyway. An AVX-512 copy was measured too and was no faster than AVX2 on this
//! CPU, so there is none.
//!
//! # Worked example
//!
//! A page exactly as `PageInit` leaves it (pd_lower 24, pd_upper = pd_special = 8192,
//! pd_pagesize_version 0x2004) checksums to 25952 as block 0 and 25951 as block 1 — the
//! block number is XORed in before the final reduction, so neighbouring blocks differ.
//!
//! ```
//! let mut page = [0u8; pageio::page::BLCKSZ];
//! page[12..14].copy_from_slice(&24u16.to_le_bytes());
//! page[14..16].copy_from_slice(&8192u16.to_le_bytes());
//! page[16..18].copy_from_slice(&8192u16.to_le_bytes());
//! page[18..20].copy_from_slice(&0x2004u16.to_le_bytes());
//! assert_eq!(pageio::page::pg_checksum_page(&page, 0), 25952);
//! assert_eq!(pageio::page::pg_checksum_page(&page, 1), 25951);
//! ```

use super::{PageError, Result, BLCKSZ};

/// Number of parallel FNV lanes. Part of the on-disk algorithm: changing it changes every
/// checksum.
pub const N_SUMS: usize = 32;

/// FNV-1a 32-bit prime.
pub const FNV_PRIME: u32 = 16_777_619;

/// Bytes in one matrix row: 32 lanes × 4 bytes.
const ROW_BYTES: usize = N_SUMS * 4;

/// Initial value of each lane, so the lanes start in different states (PostgreSQL's
/// `checksumBaseOffsets`).
const BASE_OFFSETS: [u32; N_SUMS] = [
    0x5B1F36E9, 0xB8525960, 0x02AB50AA, 0x1DE66D2A, 0x79FF467A, 0x9BB9F8A3, 0x217E7CD2, 0x83E13D2C,
    0xF8D4474F, 0xE39EB970, 0x42C6AE16, 0x993216FA, 0x7B093B5D, 0x98DAFF3C, 0xF718902A, 0x0B1C9CDB,
    0xE58F764B, 0x187636BC, 0x5D7B3BB1, 0xE73DE7DE, 0x92BEC979, 0xCCA6C0B2, 0x304A0979, 0x85AA43D4,
    0x783125BB, 0x6CA8EAA2, 0xE407EAC6, 0x4B5CFC3E, 0x9FBF8C76, 0x15CA20BE, 0xF2CA9FD3, 0x959BD756,
];

/// Byte offset of `pd_checksum` in the page header.
pub const PD_CHECKSUM_OFFSET: usize = 8;

/// One FNV round on all 32 lanes. Written over whole arrays so the compiler vectorises it.
#[inline(always)]
fn mix_row(sums: &mut [u32; N_SUMS], row: &[u32; N_SUMS]) {
    for (sum, &value) in sums.iter_mut().zip(row.iter()) {
        let tmp = *sum ^ value;
        *sum = tmp.wrapping_mul(FNV_PRIME) ^ (tmp >> 17);
    }
}

/// Loads one 128-byte row as 32 little-endian words.
#[inline(always)]
fn load_row(bytes: &[u8]) -> [u32; N_SUMS] {
    let mut row = [0u32; N_SUMS];
    for (word, chunk) in row.iter_mut().zip(bytes.chunks_exact(4)) {
        *word = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
    }
    row
}

/// The 32-bit block hash (`pg_checksum_block`) with `pd_checksum` read as zero. Inlined into
/// each of the per-CPU-feature copies below.
#[inline(always)]
fn checksum_block(page: &[u8; BLCKSZ]) -> u32 {
    let mut sums = BASE_OFFSETS;

    // Row 0 holds the header. Word 2 is pd_checksum (low half) and pd_flags (high half); the
    // checksum must hash as zero so the stored value does not feed into its own computation.
    let mut first = load_row(&page[..ROW_BYTES]);
    first[PD_CHECKSUM_OFFSET / 4] &= 0xFFFF_0000;
    mix_row(&mut sums, &first);

    for row_bytes in page[ROW_BYTES..].chunks_exact(ROW_BYTES) {
        let row = load_row(row_bytes);
        mix_row(&mut sums, &row);
    }

    // Two rounds of zeros give the last rows' high bits time to avalanche into low bits.
    let zeros = [0u32; N_SUMS];
    mix_row(&mut sums, &zeros);
    mix_row(&mut sums, &zeros);

    sums.iter().fold(0, |acc, &s| acc ^ s)
}

/// Computes PostgreSQL's checksum of `page` as block `blkno` (block number within the
/// relation fork, i.e. `segment * 131072 + block_in_segment`).
///
/// The stored `pd_checksum` is ignored, so the result can be compared with it directly. The
/// result is never 0: PostgreSQL reserves 0 and reduces into `1..=65535`.
pub fn pg_checksum_page(page: &[u8; BLCKSZ], blkno: u32) -> u16 {
    #[cfg(target_arch = "x86_64")]
    {
        if x86::has_avx2() {
            // SAFETY: the CPU supports AVX2, checked just above.
            return unsafe { x86::pg_checksum_page_avx2(page, blkno) };
        }
    }
    pg_checksum_page_portable(page, blkno)
}

/// [`pg_checksum_page`] compiled for the build target only, without CPU-feature dispatch.
/// Public so tests and benchmarks can compare the two.
#[inline]
pub fn pg_checksum_page_portable(page: &[u8; BLCKSZ], blkno: u32) -> u16 {
    finish(checksum_block(page), blkno)
}

/// Folds in the block number and reduces to PostgreSQL's range.
#[inline(always)]
fn finish(block_hash: u32, blkno: u32) -> u16 {
    let checksum = block_hash ^ blkno;
    // The modulus is 65535, not 65536: PostgreSQL adds one afterwards so 0 never appears,
    // and 65535 keeps the result inside u16.
    ((checksum % 65535) + 1) as u16
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::sync::atomic::{AtomicU8, Ordering};

    use super::{checksum_block, finish, BLCKSZ};

    /// 0 = not probed yet, 1 = no AVX2, 2 = AVX2. Probing is a `cpuid`, cheap but not free
    /// at 8 kB granularity, hence the cache.
    static AVX2: AtomicU8 = AtomicU8::new(0);

    #[inline]
    pub(super) fn has_avx2() -> bool {
        match AVX2.load(Ordering::Relaxed) {
            2 => true,
            1 => false,
            _ => {
                let yes = std::arch::is_x86_feature_detected!("avx2");
                AVX2.store(if yes { 2 } else { 1 }, Ordering::Relaxed);
                yes
            }
        }
    }

    /// The portable code, compiled with AVX2 enabled (`vpmulld` on 8 lanes at a time).
    ///
    /// # Safety
    ///
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn pg_checksum_page_avx2(page: &[u8; BLCKSZ], blkno: u32) -> u16 {
        finish(checksum_block(page), blkno)
    }
}

/// Like [`pg_checksum_page`] for a slice, which must be exactly [`BLCKSZ`] bytes.
pub fn pg_checksum_slice(page: &[u8], blkno: u32) -> Result<u16> {
    let page: &[u8; BLCKSZ] = page.try_into().map_err(|_| PageError::WrongPageSize {
        actual_bytes: page.len(),
        expected_bytes: BLCKSZ,
    })?;
    Ok(pg_checksum_page(page, blkno))
}

/// Reads the stored `pd_checksum` of a page.
pub fn stored_checksum(page: &[u8; BLCKSZ]) -> u16 {
    u16::from_le_bytes([page[PD_CHECKSUM_OFFSET], page[PD_CHECKSUM_OFFSET + 1]])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn init_page() -> [u8; BLCKSZ] {
        let mut page = [0u8; BLCKSZ];
        page[12..14].copy_from_slice(&24u16.to_le_bytes());
        page[14..16].copy_from_slice(&8192u16.to_le_bytes());
        page[16..18].copy_from_slice(&8192u16.to_le_bytes());
        page[18..20].copy_from_slice(&0x2004u16.to_le_bytes());
        page
    }

    #[test]
    fn postgres_initialised_page() {
        let page = init_page();
        assert_eq!(pg_checksum_page(&page, 0), 25952);
        assert_eq!(pg_checksum_page(&page, 1), 25951);
    }

    #[test]
    fn stored_checksum_is_ignored() {
        let mut page = init_page();
        page[8] = 0xAB;
        page[9] = 0xCD;
        assert_eq!(pg_checksum_page(&page, 0), 25952);
    }

    #[test]
    fn dispatched_equals_portable_on_random_pages() {
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        for blkno in 0..200u32 {
            let mut page = [0u8; BLCKSZ];
            for chunk in page.chunks_exact_mut(8) {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                chunk.copy_from_slice(&state.to_le_bytes());
            }
            let blkno = blkno.wrapping_mul(0x9E37_79B9);
            assert_eq!(
                pg_checksum_page(&page, blkno),
                pg_checksum_page_portable(&page, blkno)
            );
        }
    }

    #[test]
    fn slice_length_checked() {
        assert!(pg_checksum_slice(&[0u8; 100], 0).is_err());
        assert_eq!(pg_checksum_slice(&init_page(), 0), Ok(25952));
    }
}
