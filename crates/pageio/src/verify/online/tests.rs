//! The online rule on pages whose reads are scripted: torn pages, pages that change between
//! reads, damaged pages, files that go away.

use super::*;
use crate::page::checksum::pg_checksum_page;

const REDO: u64 = 0x0000_0001_0300_0028;
const OLD_LSN: u64 = 0x0000_0001_01A2_B3C0;
const NEW_LSN: u64 = 0x0000_0001_0310_0000;

/// A heap-like page with `lsn` and a valid checksum for relation block `blkno`, its body
/// filled with `fill`.
fn page(lsn: u64, fill: u8, blkno: u32) -> Box<[u8; BLCKSZ]> {
    let mut p = Box::new([fill; BLCKSZ]);
    p[0..4].copy_from_slice(&((lsn >> 32) as u32).to_le_bytes());
    p[4..8].copy_from_slice(&(lsn as u32).to_le_bytes());
    p[8..10].copy_from_slice(&[0, 0]);
    p[12..14].copy_from_slice(&40u16.to_le_bytes()); // pd_lower
    p[14..16].copy_from_slice(&8000u16.to_le_bytes()); // pd_upper
    p[16..18].copy_from_slice(&8192u16.to_le_bytes()); // pd_special
    let sum = pg_checksum_page(&p, blkno);
    p[8..10].copy_from_slice(&sum.to_le_bytes());
    p
}

/// The first half of `a` and the second of `b`: what a read racing a write sees.
fn torn(a: &[u8; BLCKSZ], b: &[u8; BLCKSZ]) -> Box<[u8; BLCKSZ]> {
    let mut p = Box::new(*a);
    p[BLCKSZ / 2..].copy_from_slice(&b[BLCKSZ / 2..]);
    p
}

/// Hands out the scripted reads of one block in order; the last repeats.
struct Script {
    reads: Vec<PageRead>,
    served: usize,
}

impl Script {
    fn pages(pages: Vec<Box<[u8; BLCKSZ]>>) -> Script {
        Script {
            reads: pages.into_iter().map(PageRead::Page).collect(),
            served: 0,
        }
    }
}

impl PageSource for Script {
    fn read_page(&mut self, _block: u32) -> Result<PageRead, std::io::Error> {
        let i = self.served.min(self.reads.len() - 1);
        self.served += 1;
        Ok(match &self.reads[i] {
            PageRead::Page(p) => PageRead::Page(p.clone()),
            PageRead::Vanished => PageRead::Vanished,
            PageRead::PastEnd => PageRead::PastEnd,
        })
    }
}

/// The first pass's failure for `p` as block 3.
fn first_failure(p: &[u8; BLCKSZ]) -> ChecksumFailure {
    check_page(p, 3, 0, true).expect("the first read fails")
}

fn judge_one(first: &[u8; BLCKSZ], mut script: Script) -> (Verdict, usize) {
    let failure = first_failure(first);
    let v = recheck_pages(
        &mut script,
        &[failure],
        0,
        REDO,
        REREADS,
        Duration::from_millis(1),
    )
    .unwrap();
    (v.into_iter().next().unwrap(), script.served)
}

#[test]
fn a_torn_page_with_a_new_lsn_is_skipped_as_modified() {
    let old = page(OLD_LSN, 0x11, 3);
    let new = page(NEW_LSN, 0x22, 3);
    // The new half first (the header with the new LSN), the old half after: every read
    // tears the same way, as a server rewriting the page again and again would show.
    let t = torn(&new, &old);
    let (verdict, served) = judge_one(&t, Script::pages(vec![t.clone()]));
    assert_eq!(verdict, Verdict::Modified);
    assert_eq!(served, REREADS as usize);
}

#[test]
fn a_page_failing_with_an_old_lsn_on_every_read_is_corrupt() {
    let mut bad = page(OLD_LSN, 0x11, 3);
    bad[5000] ^= 0x40;
    let (verdict, served) = judge_one(&bad, Script::pages(vec![bad.clone()]));
    assert_eq!(served, REREADS as usize);
    let Verdict::Corrupt(f) = verdict else {
        panic!("{verdict:?}")
    };
    assert_eq!(f.block, 3);
    assert_eq!(f.page_lsn, OLD_LSN);
    assert_eq!(f.reads, 1 + REREADS);
    assert_eq!(f.reads_agreed, 1 + REREADS);
    assert_eq!(f.stored, first_failure(&bad).stored);
    assert_ne!(f.calculated, f.stored);
}

#[test]
fn a_torn_page_with_an_old_lsn_that_stays_torn_is_corrupt() {
    // Old header and LSN, a body that is not the one the checksum was computed over.
    let old = page(OLD_LSN, 0x11, 3);
    let other = page(OLD_LSN, 0x33, 3);
    let t = torn(&old, &other);
    let (verdict, _) = judge_one(&t, Script::pages(vec![t.clone()]));
    assert!(
        matches!(verdict, Verdict::Corrupt(ref f) if f.page_lsn == OLD_LSN),
        "{verdict:?}"
    );
}

#[test]
fn a_page_that_fails_once_then_reads_clean_is_reread_not_corrupt() {
    let old = page(OLD_LSN, 0x11, 3);
    let new = page(NEW_LSN, 0x22, 3);
    // Torn with the old header first: the LSN alone would call it corrupt; the re-read
    // finds the finished write.
    let t = torn(&old, &new);
    let (verdict, served) = judge_one(&t, Script::pages(vec![new.clone()]));
    assert_eq!(verdict, Verdict::ReRead);
    assert_eq!(served, 1);
}

#[test]
fn reads_that_disagree_are_counted() {
    let mut a = page(OLD_LSN, 0x11, 3);
    a[5000] ^= 1;
    let mut b = page(OLD_LSN, 0x11, 3);
    b[6000] ^= 1;
    let (verdict, _) = judge_one(&a, Script::pages(vec![a.clone(), a.clone(), b.clone()]));
    let Verdict::Corrupt(f) = verdict else {
        panic!("{verdict:?}")
    };
    // Reads: a (first pass), a, a, b, b: the last two agree.
    assert_eq!((f.reads, f.reads_agreed), (5, 2));
}

#[test]
fn a_file_gone_or_shortened_during_the_recheck_is_not_corrupt() {
    let mut bad = page(OLD_LSN, 0x11, 3);
    bad[100] ^= 1;
    let gone = Script {
        reads: vec![PageRead::Vanished],
        served: 0,
    };
    assert_eq!(judge_one(&bad, gone).0, Verdict::Vanished);
    let short = Script {
        reads: vec![PageRead::PastEnd],
        served: 0,
    };
    assert_eq!(judge_one(&bad, short).0, Verdict::Shrunk);
}

#[test]
fn new_pages_follow_page_is_verified() {
    let zero = [0u8; BLCKSZ];
    assert_eq!(check_page(&zero, 0, 0, true), None);
    // A zeroed header over live data: new by pg_checksums' rule, a failure by
    // PageIsVerified's, which the online check uses.
    let mut p = page(OLD_LSN, 0x11, 0);
    p[..24].fill(0);
    assert_eq!(check_page(&p, 0, 0, false), None);
    let f = check_page(&p, 0, 0, true).expect("a zeroed header over data fails");
    assert_eq!(f.stored, 0);
    assert_eq!(page_lsn(&p), 0);
}

#[test]
fn every_page_is_judged_in_one_round_per_reread() {
    let mut bad = page(OLD_LSN, 0x11, 3);
    bad[100] ^= 1;
    let failures = vec![first_failure(&bad); 50];
    let started = std::time::Instant::now();
    let verdicts = recheck_pages(
        &mut Script::pages(vec![bad.clone()]),
        &failures,
        0,
        REDO,
        REREADS,
        Duration::from_millis(20),
    )
    .unwrap();
    let waited = started.elapsed();
    assert_eq!(verdicts.len(), 50);
    assert!(verdicts.iter().all(|v| matches!(v, Verdict::Corrupt(_))));
    // Four rounds of 20 ms, not 50 × 4.
    assert!(waited < Duration::from_millis(600), "{waited:?}");
}

#[test]
fn lsns_print_as_postgresql_prints_them() {
    assert_eq!(format_lsn(REDO), "1/3000028");
    assert_eq!(format_lsn(0), "0/0");
    assert_eq!(page_lsn(&page(REDO, 0, 0)), REDO);
}

#[test]
fn unlogged_and_temporary_relations_are_left_out() {
    let file = |p: &str| ClusterFile {
        path: PathBuf::from(p),
        display: p.into(),
        segno: 0,
        size_bytes: 8192,
    };
    let mut files = vec![
        file("/d/base/5/16384"),
        file("/d/base/5/16390"),
        file("/d/base/5/16390_fsm"),
        file("/d/base/5/16390.1"),
        file("/d/base/5/16390_init"),
        file("/d/base/6/16390"),
        file("/d/base/5/t3_16400"),
        file("/d/base/5/t3_16400_fsm"),
        file("/d/base/5/t3x"),
    ];
    assert_eq!(drop_unlogged(&mut files), 5);
    let kept: Vec<&str> = files.iter().map(|f| &*f.display).collect();
    assert_eq!(
        kept,
        [
            "/d/base/5/16384",
            "/d/base/5/16390_init",
            "/d/base/6/16390",
            "/d/base/5/t3x"
        ]
    );
}

#[test]
fn a_stopped_cluster_is_refused() {
    let dir = std::env::temp_dir().join(format!("pageio-online-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let e = start_online_check(&dir).unwrap_err();
    assert_eq!(e.kind(), "cluster_not_running");
    // A PID file left by a crashed server names no live process.
    std::fs::write(dir.join("postmaster.pid"), "2147483646\n/d\n").unwrap();
    assert_eq!(running_postmaster(&dir), None);
    std::fs::write(
        dir.join("postmaster.pid"),
        format!("{}\n/d\n", std::process::id()),
    )
    .unwrap();
    assert_eq!(running_postmaster(&dir), Some(std::process::id() as i32));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A file cut mid-page and left so is reported; one that reaches a whole block while it is
/// watched (an extension caught half-copied), a whole-block file and a gone one are not.
#[test]
fn a_partial_block_that_stays_is_damage_and_one_that_moves_on_is_not() {
    use crate::verify::stable_partial_tail;
    let dir = tempfile::tempdir().unwrap();
    let cut = dir.path().join("16384");
    std::fs::write(&cut, vec![0u8; 3 * BLCKSZ + 100]).unwrap();
    let delay = Duration::from_millis(5);
    assert_eq!(
        stable_partial_tail(&cut, 4, delay).unwrap(),
        Some(crate::verify::PartialTail {
            block: 3,
            bytes: 100,
            size_bytes: 3 * BLCKSZ as u64 + 100,
        })
    );
    let whole = dir.path().join("16385");
    std::fs::write(&whole, vec![0u8; 2 * BLCKSZ]).unwrap();
    assert_eq!(stable_partial_tail(&whole, 4, delay).unwrap(), None);
    assert_eq!(
        stable_partial_tail(&dir.path().join("gone"), 4, delay).unwrap(),
        None
    );
    let growing = dir.path().join("16386");
    std::fs::write(&growing, vec![0u8; BLCKSZ + 4096]).unwrap();
    let extend = {
        let growing = growing.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(&growing)
                .unwrap();
            f.set_len(2 * BLCKSZ as u64).unwrap();
        })
    };
    assert_eq!(
        stable_partial_tail(&growing, 10, Duration::from_millis(10)).unwrap(),
        None
    );
    extend.join().unwrap();
}
