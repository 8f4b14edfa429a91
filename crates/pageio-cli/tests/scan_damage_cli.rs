//! `pageio scan` on damaged relations: what `--zero-damaged-pages` and
//! `--ignore-checksum-failure` did, page by page, as PostgreSQL's WARNING says it; and a
//! structurally corrupt index ends with one error line naming the index and block, exit 2.

mod common;
use common::pageio_bounded;

/// A scan of the fixture's 20,000 rows takes well under a second; a minute is a hang.
const BOUND_SECS: u64 = 60;

fn fixture() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let pgdata = common::unpack_fixture(dir.path());
    (dir, pgdata)
}

/// `pageio scan` of `uniform`'s heap in the fixture at `pgdata`, with `extra` arguments,
/// bounded.
fn scan_uniform(pgdata: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["scan", "--pgdata", pgdata, "--heap", "base/5/16384"];
    args.extend_from_slice(extra);
    pageio_bounded(&args, BOUND_SECS)
}

/// Flips a byte in the free space of `uniform`'s blocks 7 and 9: the rows are intact, the
/// checksums fail.
fn damage_two_pages(pgdata: &std::path::Path) {
    let path = pgdata.join("base/5/16384");
    let mut bytes = std::fs::read(&path).unwrap();
    for block in [7, 9] {
        bytes[block * 8192 + 3000] ^= 0x5A;
    }
    std::fs::write(&path, &bytes).unwrap();
}

#[test]
fn zeroed_pages_are_reported_per_page_under_every_method() {
    let (_dir, pgdata) = fixture();
    damage_two_pages(&pgdata);
    let pgdata = pgdata.to_str().unwrap();
    for method in ["sync", "worker", "io_uring"] {
        let out = scan_uniform(pgdata, &["--zero-damaged-pages", "--io-method", method]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{method}: {stderr}");
        for block in [7, 9] {
            assert!(
                stderr.contains(&format!(
                    "WARNING:  invalid page in block {block} of relation base/5/16384; zeroing out page"
                )),
                "{method}: {stderr}"
            );
        }
        assert!(
            stdout.contains("Pages failing verification: 2 (zeroed)"),
            "{method}: {stdout}"
        );
        assert!(!stdout.contains("used anyway"), "{method}: {stdout}");
        assert!(
            stdout.contains("Result: rows=19964 sum_octet_length=1317624"),
            "{method}: 2 × 18 rows are gone: {stdout}"
        );
    }
    // The JSON report lists the same events.
    let out = scan_uniform(pgdata, &["--ignore-checksum-failure", "--json"]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["rows"], 20000);
    assert_eq!(v["pages_zeroed"], 0);
    let pages = v["damaged_pages"].as_array().unwrap();
    let blocks: Vec<u64> = pages.iter().map(|p| p["block"].as_u64().unwrap()).collect();
    assert_eq!(blocks, [7, 9]);
    assert!(pages.iter().all(|p| p["action"] == "used_anyway"));
    assert!(String::from_utf8_lossy(&out.stderr).contains(
        "WARNING:  page verification failed in block 7 of relation base/5/16384; using it anyway"
    ));
}

#[test]
fn a_right_link_cycle_is_one_error_line_naming_index_and_block() {
    let (_dir, pgdata) = fixture();
    // Leaf 10 of uniform_a links to itself; its checksum is recomputed, so only the
    // structure is wrong.
    let path = pgdata.join("base/5/16394");
    let mut bytes = std::fs::read(&path).unwrap();
    let page: &mut [u8; 8192] = (&mut bytes[10 * 8192..11 * 8192]).try_into().unwrap();
    page[8192 - 12..8192 - 8].copy_from_slice(&10u32.to_le_bytes());
    pageio::page::builder::set_checksum(page, 10);
    std::fs::write(&path, &bytes).unwrap();
    let pgdata = pgdata.to_str().unwrap();
    for kind in ["bitmap", "index"] {
        let out = scan_uniform(pgdata, &["--index", "base/5/16394", "--kind", kind]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{kind}: {stderr}");
        assert!(
            stderr.contains("index \"base/5/16394\" is corrupt at block 10"),
            "{kind}: {stderr}"
        );
        assert!(stderr.contains("Please REINDEX it."), "{kind}: {stderr}");
        assert!(
            out.stdout.is_empty(),
            "{kind}: no partial result is printed"
        );
    }
}

#[test]
fn a_partial_page_and_an_orphan_segment_fail_the_scan() {
    let (_dir, pgdata) = fixture();
    let heap = pgdata.join("base/5/16384");
    let size = std::fs::metadata(&heap).unwrap().len();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&heap)
        .unwrap();
    std::io::Write::write_all(&mut f, &[0x55; 100]).unwrap();
    drop(f);
    let pgdata_s = pgdata.to_str().unwrap();
    let out = scan_uniform(pgdata_s, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "file \"base/5/16384\" is {} bytes, not a multiple of the 8192-byte page size",
            size + 100
        )),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "no partial result is printed");
    // Whole pages again, but a segment 2 after a short segment 0.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&heap)
        .unwrap()
        .set_len(size)
        .unwrap();
    std::fs::write(pgdata.join("base/5/16384.2"), [0u8; 8192]).unwrap();
    let out = scan_uniform(pgdata_s, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("relation \"base/5/16384\" has segment file \"base/5/16384\" of 9109504 bytes, shorter than a full segment"), "{stderr}");
    assert!(
        stderr.contains("later segment file \"base/5/16384.2\""),
        "{stderr}"
    );
}
