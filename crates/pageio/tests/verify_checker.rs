//! The checksum checker on the real PostgreSQL 18 fixture: the same report whichever way a
//! block is checked — every io_method, mapped reads on and off, direct I/O — and read errors
//! that name the file and the block, through the engine's fault injection.

mod common;

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pageio::aio::{Fault, FaultPlan, IoOp};
use pageio::config::{IoConfig, IoMethodKind, BLCKSZ};
use pageio::page::builder::set_checksum;
use pageio::verify::{check_files, walk_cluster, CheckOptions, CheckTotals, VerifyError};
use pageio::Aio;

/// Every method, so the three can never disagree about a verdict.
const METHODS: [IoMethodKind; 3] = [
    IoMethodKind::Sync,
    IoMethodKind::Worker,
    IoMethodKind::IoUring,
];

/// The file of relation `name` in the fixture (`base/5/16384`), from PostgreSQL's
/// `pg_relation_filepath` when the fixture was built.
fn rel(name: &str) -> &'static str {
    common::fixture_facts().path(name)
}

/// What a run reported, in the order it reported it: one line per file and per failure, with
/// names relative to the data directory so runs on different copies compare.
#[derive(Debug)]
struct Run {
    lines: Vec<String>,
    result: Result<CheckTotals, VerifyError>,
}

fn run(
    pgdata: &Path,
    method: IoMethodKind,
    mapped_reads: bool,
    direct_io: bool,
    faults: Option<Arc<FaultPlan>>,
) -> Run {
    let config = IoConfig {
        io_method: method,
        direct_io,
        // Small reads, so a window of the 1112-block heaps is many reads (and a fault on one
        // block is a read of several).
        io_combine_limit_blocks: 16,
        ..IoConfig::default()
    };
    let aio = Aio::new(config).unwrap_or_else(|e| panic!("{method}: {e}"));
    if let Some(f) = faults {
        aio.set_fault_injector(Some(f));
    }
    let files = walk_cluster(pgdata.as_os_str(), None).unwrap();
    let prefix = format!("{}/", pgdata.display());
    let mut lines = Vec::new();
    let options = CheckOptions {
        jobs: 2,
        mapped_reads,
    };
    let result = check_files(
        &aio,
        files,
        &options,
        |file, outcome| {
            let name = file.display.strip_prefix(&prefix).unwrap().to_string();
            for f in &outcome.failures {
                lines.push(format!(
                    "{name} block {} calculated {:X} stored {:X}",
                    f.block, f.calculated, f.stored
                ));
            }
            lines.push(format!(
                "{name}: {} blocks, {} new{}",
                outcome.blocks_scanned,
                outcome.new_pages,
                outcome
                    .error
                    .as_ref()
                    .map(|e| format!(", error: {e}"))
                    .unwrap_or_default()
            ));
        },
        |_| {},
    );
    Run { lines, result }
}

/// Reads every file of the tree, so the page cache holds it and mapped reads apply.
fn warm(pgdata: &Path) {
    for f in walk_cluster(pgdata.as_os_str(), None).unwrap() {
        std::fs::read(&f.path).unwrap();
    }
}

/// The fields of the totals every path must agree on (bytes_mapped differs by design).
fn summary(t: &CheckTotals) -> (u64, u64, u64, u64, u64) {
    (
        t.files_scanned,
        t.blocks_scanned,
        t.new_pages,
        t.bad_checksums,
        t.bytes_read,
    )
}

/// Runs mapped reads on a warm tree, retrying when something else evicted pages between the
/// warm-up and the run (machines running benchmarks drop the page cache), so the mapped
/// path is known to have run.
fn run_mapped(pgdata: &Path, method: IoMethodKind) -> Run {
    for _ in 0..5 {
        warm(pgdata);
        let r = run(pgdata, method, true, false, None);
        let mapped = r.result.as_ref().map_or(0, |t| t.bytes_mapped);
        if mapped > 0 {
            return r;
        }
    }
    panic!("{method}: mapped reads never applied on a freshly read tree");
}

fn read_block(path: &Path, block: u64) -> [u8; BLCKSZ] {
    let mut b = [0u8; BLCKSZ];
    std::fs::File::open(path)
        .unwrap()
        .read_exact_at(&mut b, block * BLCKSZ as u64)
        .unwrap();
    b
}

fn write_block(path: &Path, block: u64, page: &[u8; BLCKSZ]) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .write_all_at(page, block * BLCKSZ as u64)
        .unwrap();
}

fn flip_byte(path: &Path, block: u64, offset: usize) {
    let mut p = read_block(path, block);
    p[offset] ^= 0xFF;
    write_block(path, block, &p);
}

#[test]
fn verify_clean_fixture_same_report_every_way() {
    let (_dir, pgdata) = common::unpack_fixture();
    let reference = run(&pgdata, IoMethodKind::Sync, false, false, None);
    let totals = reference.result.as_ref().unwrap();
    // The counts pg_checksums -c printed for this fixture when it was built.
    let pg = &common::fixture_facts().pg_checksums;
    assert_eq!(
        (totals.files_scanned, totals.blocks_scanned),
        (pg.files_scanned, pg.blocks_scanned)
    );
    assert_eq!(totals.bad_checksums, 0);
    assert_eq!(pg.bad_checksums, 0);
    for method in METHODS {
        let mapped = run_mapped(&pgdata, method);
        assert_eq!(mapped.lines, reference.lines, "{method}, mapped");
        let t = mapped.result.as_ref().unwrap();
        assert_eq!(summary(t), summary(totals), "{method}, mapped");
        assert!(t.bytes_mapped <= t.bytes_read);
        for direct in [false, true] {
            let read = run(&pgdata, method, false, direct, None);
            assert_eq!(read.lines, reference.lines, "{method}, direct {direct}");
            let t = read.result.as_ref().unwrap();
            assert_eq!(summary(t), summary(totals), "{method}, direct {direct}");
            assert_eq!(t.bytes_mapped, 0, "mapped reads off, or direct I/O");
        }
        // Direct I/O bypasses the page cache: mapped reads are never used, even when asked.
        let direct = run(&pgdata, method, true, true, None);
        assert_eq!(direct.result.as_ref().unwrap().bytes_mapped, 0);
        assert_eq!(direct.lines, reference.lines);
    }
}

#[test]
fn verify_damage_reported_identically_mapped_and_read() {
    let (_dir, pgdata) = common::unpack_fixture();
    let heap = pgdata.join(rel("uniform"));
    let index = pgdata.join(rel("uniform_a"));
    flip_byte(&heap, 3, 5000);
    flip_byte(&heap, 1100, 100);
    flip_byte(&index, 1, 4000);
    // A torn page: the first half of block 5 with the second half of block 6.
    let mut torn = read_block(&heap, 5);
    torn[4096..].copy_from_slice(&read_block(&heap, 6)[4096..]);
    write_block(&heap, 5, &torn);
    // An all-zero page is a new page: counted, never reported.
    write_block(&heap, 10, &[0u8; BLCKSZ]);
    // A second segment: block b of `<heap>.1` is block 131072 + b of the relation, and is
    // checksummed (and reported) as such.
    let seg1 = PathBuf::from(format!("{}.1", heap.display()));
    std::fs::File::create(&seg1).unwrap();
    for b in 0..4u64 {
        let mut page = read_block(&heap, 20 + b);
        set_checksum(&mut page, (131072 + b) as u32);
        write_block(&seg1, b, &page);
    }
    flip_byte(&seg1, 2, 7000);

    let reference = run(&pgdata, IoMethodKind::Sync, false, false, None);
    let bad: Vec<&String> = reference
        .lines
        .iter()
        .filter(|l| l.contains(" calculated "))
        .collect();
    // Files come in readdir order; within a file, by block.
    let mut blocks: Vec<String> = bad
        .iter()
        .map(|l| l.split(" calculated").next().unwrap().to_string())
        .collect();
    blocks.sort();
    let (h, i) = (rel("uniform"), rel("uniform_a"));
    let mut expected = [
        format!("{h} block 1100"),
        format!("{h} block 3"),
        format!("{h} block 5"),
        format!("{h}.1 block 2"),
        format!("{i} block 1"),
    ];
    expected.sort();
    assert_eq!(blocks, expected);
    assert_eq!(bad.len(), 5, "{bad:#?}");
    let totals = reference.result.as_ref().unwrap();
    assert_eq!(totals.bad_checksums, 5);
    assert!(totals.new_pages >= 1);
    for method in METHODS {
        let mapped = run_mapped(&pgdata, method);
        assert_eq!(mapped.lines, reference.lines, "{method}, mapped");
        assert_eq!(
            summary(mapped.result.as_ref().unwrap()),
            summary(totals),
            "{method}, mapped"
        );
        let read = run(&pgdata, method, false, false, None);
        assert_eq!(read.lines, reference.lines, "{method}, read");
    }
}

#[test]
fn verify_injected_eio_names_the_file_and_the_exact_block() {
    let (_dir, pgdata) = common::unpack_fixture();
    let linear = rel("linear_10");
    let heap = pgdata.join(linear);
    // A mismatch before the unreadable block is reported; one after it is not, because
    // pg_checksums stops at the block it cannot read.
    flip_byte(&heap, 2, 3000);
    flip_byte(&heap, 40, 3000);
    for method in METHODS {
        // Every read touching block 37 fails: first the 16-block read (32..48), then the
        // one-block retry that pins the error to block 37.
        let plan = Arc::new(FaultPlan::new().on_block(
            IoOp::Readv,
            linear,
            37,
            Fault::Errno(libc::EIO),
            u64::MAX,
        ));
        let r = run(&pgdata, method, false, false, Some(plan.clone()));
        assert!(plan.fired() >= 2, "{method}: fired {}", plan.fired());
        let e = r.result.expect_err("an unreadable block ends the run");
        match &e {
            VerifyError::ReadFailed {
                path,
                block,
                source,
            } => {
                assert!(path.ends_with(&format!("/{linear}")), "{method}: {path}");
                assert_eq!(*block, 37, "{method}");
                assert_eq!(source.raw_os_error(), Some(libc::EIO), "{method}");
            }
            other => panic!("{method}: unexpected error {other:?}"),
        }
        assert_eq!(
            e.to_string(),
            format!(
                "could not read block 37 in file \"{}\": {}",
                heap.display(),
                std::io::Error::from_raw_os_error(libc::EIO)
            )
        );
        // The file is reported (with its error) and is the last one reported.
        let last = r.lines.last().unwrap();
        assert!(
            last.starts_with(&format!("{linear}: "))
                && last.contains("error: could not read block 37"),
            "{method}: {last}"
        );
        let failures: Vec<&String> = r
            .lines
            .iter()
            .filter(|l| l.contains(" calculated "))
            .collect();
        assert_eq!(failures.len(), 1, "{method}: {failures:#?}");
        assert!(
            failures[0].starts_with(&format!("{linear} block 2 ")),
            "{method}"
        );
    }
}

#[test]
fn verify_a_file_that_shrank_after_the_walk_reads_the_same_both_ways() {
    let (_dir, pgdata) = common::unpack_fixture();
    let heap = pgdata.join(rel("uniform"));
    assert!(common::fixture_facts().relation("uniform").pages > 1000);
    let files = walk_cluster(pgdata.as_os_str(), None).unwrap();
    // Shrink to 1000 whole blocks after the walk saw 1112: both paths stop at the new end
    // (pg_checksums takes a read of 0 bytes as the end of the file), neither maps past it.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&heap)
        .unwrap()
        .set_len(1000 * BLCKSZ as u64)
        .unwrap();
    let mut reports = Vec::new();
    for mapped_reads in [false, true] {
        warm(&pgdata);
        let aio = Aio::new(IoConfig::default()).unwrap();
        let mut blocks_of_heap = None;
        let totals = check_files(
            &aio,
            files.clone(),
            &CheckOptions {
                jobs: 2,
                mapped_reads,
            },
            |file, outcome| {
                if file.path == heap {
                    blocks_of_heap = Some(outcome.blocks_scanned);
                }
            },
            |_| {},
        )
        .unwrap();
        assert_eq!(blocks_of_heap, Some(1000));
        reports.push(summary(&totals));
    }
    assert_eq!(reports[0], reports[1]);
}
