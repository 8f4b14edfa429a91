//! The corruption suite: btrees and heaps from the real PostgreSQL 18 fixture, broken in
//! their *structure* (links, levels, flags, sizes — every patched page gets a correct
//! checksum, so the pool accepts it), scanned by every scan kind under every io_method.
//! Each scan must either give PostgreSQL's answer for the damaged files or fail with a typed
//! error naming the file and the block — within a time bound, never a hang, never a
//! different count reported as success.

mod common;

use std::path::{Path, PathBuf};

use pageio::config::{IoMethodKind, BLCKSZ};
use pageio::page::btree::{BtreePage, BTP_DELETED, BTP_HALF_DEAD};
use pageio::page::builder::set_checksum;
use pageio::page::heap::{
    ColumnType, HEAP_HOT_UPDATED, HEAP_ONLY_TUPLE, HEAP_XMAX_COMMITTED, HEAP_XMAX_INVALID,
};
use pageio::scan::{Between, ScanError, ScanKind, Table};
use pageio::storage::{ForkNumber, RelFile, RELSEG_SIZE_BLOCKS};

const HEAP: &str = "base/5/16384";
const INDEX: &str = "base/5/16394";
/// `uniform`: 20,000 rows, each `b` 66 bytes (fixture README).
const ROWS: u64 = 20000;
const B_BYTES: u64 = 66;
/// uniform_a: metapage 0, root 3 (level 1), leaves 1, 2, 4, 5, …, 56 left to right.
const ROOT: u32 = 3;
/// Each case's scans (3 kinds × 3 methods on 20,000 rows) take well under a second; a
/// minute means a hang.
const WATCHDOG_SECS: u64 = 60;

/// What a scan must do on a damaged relation.
#[derive(Debug, Clone)]
enum Want {
    /// Succeed with exactly these rows and bytes (PostgreSQL's answer for these files).
    Answer(u64, u64),
    /// Fail with an error of this kind whose message holds every one of these strings.
    Error(ErrorKind, Vec<String>),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum ErrorKind {
    IndexCorrupt,
    IndexZeroPage,
    HeapCorrupt,
    Tuple,
    PartialPage,
    SegmentGap,
}

fn kind_of(e: &ScanError) -> Option<ErrorKind> {
    Some(match e {
        ScanError::IndexCorrupt { .. } => ErrorKind::IndexCorrupt,
        ScanError::IndexZeroPage { .. } => ErrorKind::IndexZeroPage,
        ScanError::HeapCorrupt { .. } => ErrorKind::HeapCorrupt,
        ScanError::Tuple { .. } => ErrorKind::Tuple,
        ScanError::PartialPage { .. } => ErrorKind::PartialPage,
        ScanError::SegmentGap { .. } => ErrorKind::SegmentGap,
        _ => return None,
    })
}

fn err(kind: ErrorKind, parts: &[&str]) -> Want {
    Want::Error(kind, parts.iter().map(|s| s.to_string()).collect())
}

fn all_rows() -> Want {
    Want::Answer(ROWS, ROWS * B_BYTES)
}

/// A fresh directory holding copies of the fixture's `uniform` heap and btree, laid out as
/// in the data directory (`base/5/…`), so each case damages its own files.
struct Rel {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Rel {
    fn new(pgdata: &Path) -> Rel {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        std::fs::create_dir_all(root.join("base/5")).unwrap();
        for f in [HEAP, INDEX] {
            std::fs::copy(pgdata.join(f), root.join(f)).unwrap();
        }
        Rel { _dir: dir, root }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    fn page(&self, rel: &str, block: u32) -> [u8; BLCKSZ] {
        let bytes = std::fs::read(self.path(rel)).unwrap();
        let at = block as usize * BLCKSZ;
        bytes[at..at + BLCKSZ].try_into().unwrap()
    }

    /// Rewrites one page and gives it the checksum PostgreSQL would compute, so the damage
    /// is structural, not a checksum failure.
    fn patch(&self, rel: &str, block: u32, edit: impl FnOnce(&mut [u8; BLCKSZ])) {
        let path = self.path(rel);
        let mut bytes = std::fs::read(&path).unwrap();
        let at = block as usize * BLCKSZ;
        let page: &mut [u8; BLCKSZ] = (&mut bytes[at..at + BLCKSZ]).try_into().unwrap();
        edit(page);
        set_checksum(page, block);
        std::fs::write(&path, &bytes).unwrap();
    }

    fn table(&self) -> Table {
        Table {
            heap: RelFile::in_data_dir(&self.root, HEAP, ForkNumber::Main),
            index: Some(RelFile::in_data_dir(&self.root, INDEX, ForkNumber::Main)),
            columns: vec![ColumnType::Float8, ColumnType::Text],
            transactions: None,
        }
    }

    /// Heap TIDs stored on a btree leaf (what a scan of that leaf contributes).
    fn leaf_tids(&self, block: u32) -> u64 {
        let page = self.page(INDEX, block);
        let page = BtreePage::new(&page).unwrap();
        page.data_items()
            .unwrap()
            .iter()
            .map(|(_, t)| t.heap_tids().unwrap().len() as u64)
            .sum()
    }
}

fn put_u32(page: &mut [u8], at: usize, v: u32) {
    page[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
fn put_u16(page: &mut [u8], at: usize, v: u16) {
    page[at..at + 2].copy_from_slice(&v.to_le_bytes());
}
fn get_u16(page: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([page[at], page[at + 1]])
}

/// Btree opaque fields (`BTPageOpaqueData` at the end of the page).
const OPAQUE: usize = BLCKSZ - 16;
fn set_next(page: &mut [u8; BLCKSZ], next: u32) {
    put_u32(page, OPAQUE + 4, next);
}
fn set_level(page: &mut [u8; BLCKSZ], level: u32) {
    put_u32(page, OPAQUE + 8, level);
}
fn add_flags(page: &mut [u8; BLCKSZ], flags: u16) {
    let f = get_u16(page, OPAQUE + 12) | flags;
    put_u16(page, OPAQUE + 12, f);
}
/// Metapage fields (`BTMetaPageData` at offset 24): magic, version, root, level, fastroot,
/// fastlevel.
fn set_meta(page: &mut [u8; BLCKSZ], root: u32, level: u32) {
    put_u32(page, 24 + 8, root);
    put_u32(page, 24 + 12, level);
    put_u32(page, 24 + 16, root);
    put_u32(page, 24 + 20, level);
}

/// Byte offset of line pointer `offnum`'s item.
fn item_at(page: &[u8], offnum: u16) -> usize {
    let raw = u32::from_le_bytes(
        page[24 + 4 * (offnum as usize - 1)..][..4]
            .try_into()
            .unwrap(),
    );
    (raw & 0x7FFF) as usize
}
/// Sets the downlink of an internal page's item (`t_tid.block` of the pivot).
fn set_downlink(page: &mut [u8; BLCKSZ], offnum: u16, child: u32) {
    let at = item_at(page, offnum);
    put_u16(page, at, (child >> 16) as u16);
    put_u16(page, at + 2, child as u16);
}
/// Rewrites line pointer `offnum` as `LP_REDIRECT` to `target`.
fn set_redirect(page: &mut [u8; BLCKSZ], offnum: u16, target: u16) {
    let raw = (target as u32 & 0x7FFF) | (2 << 15);
    put_u32(page, 24 + 4 * (offnum as usize - 1), raw);
}
/// Marks the heap tuple at `offnum` as HOT-updated by a committed transaction (so it is
/// dead) with its successor at `next` on the same page. The updater is the transaction that
/// inserted every fixture row, so the successor's xmin matches this xmax and PostgreSQL's
/// chain rules would follow the link.
fn hot_updated_to(page: &mut [u8; BLCKSZ], block: u32, offnum: u16, next: u16) {
    let at = item_at(page, offnum);
    let xmin = u32::from_le_bytes(page[at..at + 4].try_into().unwrap());
    put_u32(page, at + 4, xmin); // t_xmax
    put_u16(page, at + 12, (block >> 16) as u16);
    put_u16(page, at + 14, block as u16);
    put_u16(page, at + 16, next);
    let mask2 = get_u16(page, at + 18) | HEAP_HOT_UPDATED;
    put_u16(page, at + 18, mask2);
    let mask = (get_u16(page, at + 20) | HEAP_XMAX_COMMITTED) & !HEAP_XMAX_INVALID;
    put_u16(page, at + 20, mask);
}
/// Rewrites the `b` value of the tuple at `offnum` (a 67-byte short varlena at data offset 8)
/// in place with the bytes `value` (at most 67 bytes, the rest zero-padded).
fn set_b(page: &mut [u8; BLCKSZ], offnum: u16, value: &[u8]) {
    let at = item_at(page, offnum) + 24 + 8;
    assert!(value.len() <= 67);
    page[at..at + 67].fill(0);
    page[at..at + value.len()].copy_from_slice(value);
}
/// An inline-compressed varlena of 67 bytes claiming `raw` bytes.
fn compressed(raw: u32, method: u32) -> Vec<u8> {
    let mut v = ((67u32 << 2) | 0x02).to_le_bytes().to_vec();
    v.extend_from_slice(&(raw | (method << 30)).to_le_bytes());
    v.resize(67, 0xAB);
    v
}
/// An on-disk TOAST pointer.
fn toast_pointer(rawsize: i32, extsize: u32, method: u32) -> Vec<u8> {
    let mut v = vec![0x01, 18];
    v.extend_from_slice(&rawsize.to_le_bytes());
    v.extend_from_slice(&(extsize | (method << 30)).to_le_bytes());
    v.extend_from_slice(&77_000u32.to_le_bytes());
    v.extend_from_slice(&16_400u32.to_le_bytes());
    v
}

/// Runs every scan kind under every io_method over `rel` and checks each against `want`.
fn check(case: &str, rel: &Rel, want: impl Fn(ScanKind) -> Want) {
    for method in IoMethodKind::CONCRETE {
        let aio = common::aio_for(method);
        for kind in common::SCAN_KINDS {
            // A fresh pool: every scan reads the damaged files from storage.
            let pool = common::checksum_pool(&aio);
            let got = common::scan(&pool, &rel.table(), kind, Between::ALL);
            let what = format!("{case}: {method} {kind} scan");
            match (want(kind), got) {
                (Want::Answer(rows, sum), Ok(r)) => {
                    assert_eq!((r.rows, r.sum_octet_length), (rows, sum), "{what}")
                }
                (Want::Answer(rows, sum), Err(e)) => {
                    panic!("{what}: expected {rows} rows / {sum} bytes, got error: {e}")
                }
                (Want::Error(kind, _), Ok(r)) => panic!(
                    "{what}: expected a {kind:?} error, got success with {} rows / {} bytes",
                    r.rows, r.sum_octet_length
                ),
                (Want::Error(want_kind, parts), Err(e)) => {
                    let msg = e.to_string();
                    assert_eq!(kind_of(&e), Some(want_kind), "{what}: {msg}");
                    for p in &parts {
                        assert!(msg.contains(p.as_str()), "{what}: {p:?} not in: {msg}");
                    }
                }
            }
        }
    }
}

/// Unpacks the fixture once per test and runs `body` under the watchdog.
fn suite(name: &'static str, body: impl FnOnce(&Path) + Send + 'static) {
    common::with_watchdog(name, WATCHDOG_SECS, move || {
        let (_dir, pgdata) = common::unpack_fixture();
        body(&pgdata);
    })
}

/// For index-only damage: the seq scan does not read the index and gives every row.
fn index_err(kind: ErrorKind, parts: &'static [&'static str]) -> impl Fn(ScanKind) -> Want {
    move |k| match k {
        ScanKind::Seq => all_rows(),
        _ => err(kind, parts),
    }
}

#[test]
fn right_link_cycles_are_reported_not_followed() {
    suite("right link cycles", |pgdata| {
        // A leaf that links to itself.
        let rel = Rel::new(pgdata);
        rel.patch(INDEX, 10, |p| set_next(p, 10));
        check(
            "self-cycle",
            &rel,
            index_err(
                ErrorKind::IndexCorrupt,
                &[
                    "index \"base/5/16394\" is corrupt at block 10",
                    "right link of block 10 points back to block 10",
                    "cycle",
                    "REINDEX",
                ],
            ),
        );
        // A leaf that links back to an earlier leaf: 20 → 5 → … → 20.
        let rel = Rel::new(pgdata);
        rel.patch(INDEX, 20, |p| set_next(p, 5));
        check(
            "longer cycle",
            &rel,
            index_err(
                ErrorKind::IndexCorrupt,
                &["at block 20", "points back to block 5", "cycle"],
            ),
        );
    });
}

#[test]
fn right_links_to_wrong_pages_are_reported() {
    suite("right links to wrong pages", |pgdata| {
        // To the root: an internal page on the leaf level.
        let rel = Rel::new(pgdata);
        rel.patch(INDEX, 30, |p| set_next(p, ROOT));
        check(
            "right link to the root",
            &rel,
            index_err(
                ErrorKind::IndexCorrupt,
                &[
                    "at block 30",
                    "points to block 3, which is not a leaf (level 1",
                ],
            ),
        );
        // Past the end of the index.
        let rel = Rel::new(pgdata);
        rel.patch(INDEX, 40, |p| set_next(p, 999));
        check(
            "right link past the end",
            &rel,
            index_err(
                ErrorKind::IndexCorrupt,
                &[
                    "at block 40",
                    "block 999, past the end of the index (57 blocks)",
                ],
            ),
        );
        // To a later leaf, skipping leaves 11..=19 (their rows would silently go missing).
        let rel = Rel::new(pgdata);
        rel.patch(INDEX, 10, |p| set_next(p, 20));
        check(
            "right link skipping leaves",
            &rel,
            index_err(
                ErrorKind::IndexCorrupt,
                &[
                    "at block 10",
                    "points to block 20, whose left link (btpo_prev 19) does not point back",
                ],
            ),
        );
        // To a page whose level says it is not a leaf.
        let rel = Rel::new(pgdata);
        rel.patch(INDEX, 12, |p| set_level(p, 2));
        check(
            "right link to a page of another level",
            &rel,
            index_err(
                ErrorKind::IndexCorrupt,
                &[
                    "at block 11",
                    "points to block 12, which is not a leaf (level 2",
                ],
            ),
        );
    });
}

#[test]
fn a_right_link_of_zero_ends_the_level_as_in_postgresql() {
    suite("P_NONE right link", |pgdata| {
        // PostgreSQL's _bt_readnextpage stops at btpo_next = P_NONE: leaves 1, 2, 4..=10 are
        // read, the rest silently not (documented in the scan module).
        let rel = Rel::new(pgdata);
        rel.patch(INDEX, 10, |p| set_next(p, 0));
        let rows: u64 = [1, 2]
            .into_iter()
            .chain(4..=10)
            .map(|b| rel.leaf_tids(b))
            .sum();
        assert!(rows < ROWS);
        check("right link 0", &rel, |k| match k {
            ScanKind::Seq => all_rows(),
            _ => Want::Answer(rows, rows * B_BYTES),
        });
    });
}

#[test]
fn deleted_and_half_dead_leaves_are_stepped_over() {
    suite("deleted and half-dead leaves", |pgdata| {
        let rel = Rel::new(pgdata);
        rel.patch(INDEX, 10, |p| add_flags(p, BTP_DELETED));
        rel.patch(INDEX, 11, |p| add_flags(p, BTP_HALF_DEAD));
        // The rightmost leaf too: the walk ends there.
        rel.patch(INDEX, 56, |p| add_flags(p, BTP_DELETED));
        let rows = ROWS - rel.leaf_tids(10) - rel.leaf_tids(11) - rel.leaf_tids(56);
        check("deleted leaves", &rel, |k| match k {
            ScanKind::Seq => all_rows(),
            _ => Want::Answer(rows, rows * B_BYTES),
        });
        // A deleted leaf whose right link cycles is still a cycle.
        let rel = Rel::new(pgdata);
        rel.patch(INDEX, 10, |p| {
            add_flags(p, BTP_DELETED);
            set_next(p, 10)
        });
        check(
            "deleted leaf linking to itself",
            &rel,
            index_err(ErrorKind::IndexCorrupt, &["at block 10", "cycle"]),
        );
    });
}

#[test]
fn downlink_damage_is_reported() {
    suite("downlinks", |pgdata| {
        // The root's first downlink (minus infinity, the one every scan of ALL takes) to the
        // root itself.
        let rel = Rel::new(pgdata);
        rel.patch(INDEX, ROOT, |p| set_downlink(p, 1, ROOT));
        check(
            "downlink self-cycle",
            &rel,
            index_err(
                ErrorKind::IndexCorrupt,
                &[
                    "at block 3",
                    "downlink in block 3 points back to block 3",
                    "cycle",
                ],
            ),
        );
        // A longer cycle: the root (now level 2) → block 1 (made a level-1 copy of the
        // root) → back to the root.
        let rel = Rel::new(pgdata);
        let root = rel.page(INDEX, ROOT);
        rel.patch(INDEX, 0, |p| set_meta(p, ROOT, 2));
        rel.patch(INDEX, ROOT, |p| set_level(p, 2));
        rel.patch(INDEX, 1, |p| {
            *p = root;
            set_level(p, 1);
            set_downlink(p, 1, ROOT);
        });
        check(
            "downlink cycle over two levels",
            &rel,
            index_err(
                ErrorKind::IndexCorrupt,
                &[
                    "at block 1",
                    "downlink in block 1 points back to block 3",
                    "cycle",
                ],
            ),
        );
        // The root's first downlink to a leaf in the middle of the level: the leaves before
        // it would silently go missing.
        let rel = Rel::new(pgdata);
        rel.patch(INDEX, ROOT, |p| set_downlink(p, 1, 30));
        check(
            "first downlink to a middle leaf",
            &rel,
            index_err(
                ErrorKind::IndexCorrupt,
                &["at block 3", "must lead to the leftmost page of its level, but block 30 has a left sibling (btpo_prev 29)"],
            ),
        );
        // Past the end.
        let rel = Rel::new(pgdata);
        rel.patch(INDEX, ROOT, |p| set_downlink(p, 1, 5000));
        check(
            "downlink past the end",
            &rel,
            index_err(
                ErrorKind::IndexCorrupt,
                &[
                    "at block 3",
                    "block 5000, past the end of the index (57 blocks)",
                ],
            ),
        );
        // To the metapage.
        let rel = Rel::new(pgdata);
        rel.patch(INDEX, ROOT, |p| set_downlink(p, 1, 0));
        check(
            "downlink to the metapage",
            &rel,
            index_err(
                ErrorKind::IndexCorrupt,
                &["at block 3", "block 0, the metapage"],
            ),
        );
        // A root that claims level 2 over leaves: the child has the wrong level.
        let rel = Rel::new(pgdata);
        rel.patch(INDEX, 0, |p| set_meta(p, ROOT, 2));
        rel.patch(INDEX, ROOT, |p| set_level(p, 2));
        check(
            "downlink to the wrong level",
            &rel,
            index_err(
                ErrorKind::IndexCorrupt,
                &["at block 1", "a page of level 0, expected level 1"],
            ),
        );
    });
}

#[test]
fn bogus_roots_are_reported() {
    suite("bogus roots", |pgdata| {
        let rel = Rel::new(pgdata);
        rel.patch(INDEX, 0, |p| set_meta(p, 9999, 1));
        check(
            "root past the end",
            &rel,
            index_err(
                ErrorKind::IndexCorrupt,
                &[
                    "at block 0",
                    "metapage's root points to block 9999, past the end",
                ],
            ),
        );
        // A leaf named as the level-1 root.
        let rel = Rel::new(pgdata);
        rel.patch(INDEX, 0, |p| set_meta(p, 5, 1));
        check(
            "leaf as root",
            &rel,
            index_err(
                ErrorKind::IndexCorrupt,
                &["at block 5", "a page of level 0, expected level 1"],
            ),
        );
        // A deleted root with no right sibling: no live root.
        let rel = Rel::new(pgdata);
        rel.patch(INDEX, ROOT, |p| add_flags(p, BTP_DELETED));
        check(
            "deleted root",
            &rel,
            index_err(ErrorKind::IndexCorrupt, &["at block 3", "no live page"]),
        );
    });
}

#[test]
fn zero_btree_pages_say_what_postgresql_says() {
    suite("zero btree pages", |pgdata| {
        for block in [0u32, ROOT, 10] {
            let rel = Rel::new(pgdata);
            // All-zero pages are valid "new" pages to verification (no checksum).
            rel.patch(INDEX, block, |p| p.fill(0));
            let msg =
                format!("index \"base/5/16394\" contains unexpected zero page at block {block}");
            check(&format!("zero page {block}"), &rel, move |k| match k {
                ScanKind::Seq => all_rows(),
                _ => Want::Error(
                    ErrorKind::IndexZeroPage,
                    vec![msg.clone(), "Please REINDEX it.".into()],
                ),
            });
        }
    });
}

#[test]
fn impossible_value_sizes_are_reported_with_the_tuple() {
    suite("value sizes", |pgdata| {
        // Block 5, line pointer 3's `b` becomes an inline-compressed value claiming 826 MB
        // from 59 bytes: every scan reaches it (ALL), and none may sum it.
        let cases: Vec<(&str, Vec<u8>, &str)> = vec![
            (
                "826 MB from 59 pglz bytes",
                compressed(826_000_000, 0),
                "more than Pglz can expand to",
            ),
            (
                "raw size beyond MaxAllocSize",
                compressed(0x3FFF_FFFF, 1),
                "MaxAllocSize",
            ),
            (
                "invalid compression method",
                compressed(1000, 2),
                "invalid compression method id 2",
            ),
            (
                "TOAST raw size negative",
                toast_pointer(-5, 10, 0),
                "va_rawsize -5",
            ),
            (
                "TOAST raw size beyond 1 GB",
                toast_pointer(0x4000_0000, 10, 0),
                "va_rawsize 1073741824",
            ),
            (
                "TOAST external larger than raw",
                toast_pointer(1004, 5000, 0),
                "external size 5000 exceeds the raw size 1000",
            ),
            (
                "TOAST compressed beyond expansion",
                toast_pointer(800_000_004, 10, 1),
                "more than Lz4 can expand to",
            ),
        ];
        for (case, value, part) in cases {
            let rel = Rel::new(pgdata);
            rel.patch(HEAP, 5, |p| set_b(p, 3, &value));
            check(case, &rel, |_| {
                err(
                    ErrorKind::Tuple,
                    &[
                        "block 5, line pointer 3 of \"base/5/16384\"",
                        "attribute 2",
                        part,
                    ],
                )
            });
        }
        // Sizes PostgreSQL could have written are summed as PostgreSQL's octet_length does.
        let rel = Rel::new(pgdata);
        rel.patch(HEAP, 5, |p| set_b(p, 3, &compressed(5000, 0)));
        rel.patch(HEAP, 5, |p| set_b(p, 4, &toast_pointer(100_004, 40_000, 1)));
        let sum = ROWS * B_BYTES - 2 * B_BYTES + 5000 + 100_000;
        check("plausible sizes", &rel, |_| Want::Answer(ROWS, sum));
    });
}

#[test]
fn hot_chain_and_redirect_cycles_are_reported() {
    suite("HOT chains", |pgdata| {
        // Heap block 5: line pointer 1 is HOT-updated to itself.
        let rel = Rel::new(pgdata);
        rel.patch(HEAP, 5, |p| hot_updated_to(p, 5, 1, 1));
        let dead_one = Want::Answer(ROWS - 1, (ROWS - 1) * B_BYTES);
        let chain_err = |parts: &'static [&'static str], seq: Want| {
            move |k| match k {
                // The seq scan does not follow chains: it sees the dead tuple as dead.
                ScanKind::Seq => seq.clone(),
                _ => err(ErrorKind::HeapCorrupt, parts),
            }
        };
        check(
            "HOT self-cycle",
            &rel,
            chain_err(
                &[
                    "heap \"base/5/16384\" is corrupt at block 5, line pointer 1",
                    "points back to line pointer 1",
                    "cycle",
                ],
                dead_one.clone(),
            ),
        );
        // 1 → 2 → 1, both dead.
        let rel = Rel::new(pgdata);
        rel.patch(HEAP, 5, |p| {
            hot_updated_to(p, 5, 1, 2);
            hot_updated_to(p, 5, 2, 1);
        });
        check(
            "HOT two-cycle",
            &rel,
            chain_err(
                &["at block 5, line pointer", "cycle"],
                Want::Answer(ROWS - 2, (ROWS - 2) * B_BYTES),
            ),
        );
        // A HOT successor beyond the page's line pointers.
        let rel = Rel::new(pgdata);
        rel.patch(HEAP, 5, |p| hot_updated_to(p, 5, 1, 300));
        check(
            "HOT successor past the line pointers",
            &rel,
            chain_err(
                &[
                    "line pointer 1",
                    "points to line pointer 300, but the page has 18",
                ],
                dead_one.clone(),
            ),
        );
        // A chain whose next member was inserted by another transaction is broken: as in
        // PostgreSQL the search ends there without a row (it used to count line pointer 2
        // twice — once through 1's chain, once through its own index entry — and 1 never).
        let rel = Rel::new(pgdata);
        rel.patch(HEAP, 5, |p| {
            hot_updated_to(p, 5, 1, 2);
            let at = item_at(p, 1);
            put_u32(p, at + 4, 1000); // t_xmax: not the xmin of line pointer 2
        });
        check("broken HOT chain", &rel, |_| dead_one.clone());
        // An index entry straight to a heap-only tuple finds nothing (PostgreSQL's rule);
        // the seq scan still counts it, as PostgreSQL's does.
        let rel = Rel::new(pgdata);
        rel.patch(HEAP, 5, |p| {
            let at = item_at(p, 4);
            let mask2 = get_u16(p, at + 18) | HEAP_ONLY_TUPLE;
            put_u16(p, at + 18, mask2);
        });
        check("index entry to a heap-only tuple", &rel, |k| match k {
            ScanKind::Seq => all_rows(),
            _ => Want::Answer(ROWS - 1, (ROWS - 1) * B_BYTES),
        });
        // A redirect to itself (its tuple is gone from the seq scan's view).
        let rel = Rel::new(pgdata);
        rel.patch(HEAP, 5, |p| set_redirect(p, 1, 1));
        check(
            "redirect self-cycle",
            &rel,
            chain_err(
                &[
                    "line pointer 1",
                    "redirect points back to line pointer 1",
                    "cycle",
                ],
                dead_one.clone(),
            ),
        );
        // Redirect → redirect → back.
        let rel = Rel::new(pgdata);
        rel.patch(HEAP, 5, |p| {
            set_redirect(p, 1, 2);
            set_redirect(p, 2, 1);
        });
        check(
            "redirect two-cycle",
            &rel,
            chain_err(
                &[
                    "line pointer 1",
                    "which is a redirect (PostgreSQL redirects only to the chain's first tuple)",
                ],
                Want::Answer(ROWS - 2, (ROWS - 2) * B_BYTES),
            ),
        );
    });
}

#[test]
fn a_partial_last_page_is_an_error() {
    suite("partial page", |pgdata| {
        let rel = Rel::new(pgdata);
        let path = rel.path(HEAP);
        let size = std::fs::metadata(&path).unwrap().len();
        // Append 100 bytes: the seq scan used to drop them silently.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut f, &[0x55; 100]).unwrap();
        drop(f);
        let size_s = format!("is {} bytes", size + 100);
        check("partial page", &rel, move |_| {
            Want::Error(
                ErrorKind::PartialPage,
                vec![
                    "file \"base/5/16384\"".into(),
                    size_s.clone(),
                    "not a multiple of the 8192-byte page size".into(),
                    "last 100 bytes".into(),
                ],
            )
        });
    });
}

#[test]
fn a_missing_middle_segment_is_an_error() {
    suite("missing segment", |pgdata| {
        // Segment 0 a full 1 GB (sparse: the tail reads as zero pages), no 16384.1, a
        // 16384.2: the blocks of .2 were silently ignored.
        let rel = Rel::new(pgdata);
        let full = RELSEG_SIZE_BLOCKS as u64 * BLCKSZ as u64;
        std::fs::OpenOptions::new()
            .write(true)
            .open(rel.path(HEAP))
            .unwrap()
            .set_len(full)
            .unwrap();
        let seg2 = rel.root.join(format!("{HEAP}.2"));
        std::fs::write(&seg2, rel.page(HEAP, 0)).unwrap();
        check("missing 16384.1", &rel, |_| {
            err(
                ErrorKind::SegmentGap,
                &[
                    "relation \"base/5/16384\" has no segment file \"base/5/16384.1\"",
                    "later segment file \"base/5/16384.2\"",
                ],
            )
        });
        // A short segment 0 followed by a segment 1.
        let rel = Rel::new(pgdata);
        std::fs::write(rel.root.join(format!("{HEAP}.1")), rel.page(HEAP, 0)).unwrap();
        check("short segment before another", &rel, |_| {
            err(
                ErrorKind::SegmentGap,
                &[
                    "segment file \"base/5/16384\" of 9109504 bytes, shorter than a full segment",
                    "\"base/5/16384.1\"",
                ],
            )
        });
        // The same for the index: seq scans do not read it, the others refuse.
        let rel = Rel::new(pgdata);
        std::fs::write(rel.root.join(format!("{INDEX}.3")), rel.page(INDEX, 0)).unwrap();
        check(
            "index with an orphan segment",
            &rel,
            index_err(
                ErrorKind::SegmentGap,
                &["relation \"base/5/16394\"", "\"base/5/16394.3\""],
            ),
        );
    });
}
