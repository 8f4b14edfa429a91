//! A scan that meets a corrupt page: an error naming file, block and both checksums; with
//! ignore_checksum_failure it finishes and counts the page; with zero_damaged_pages the page
//! reads as empty — and each such page is reported with what was done to it. Every scan
//! type × every io_method.

mod common;

use pageio::buffer::{BufferPool, DamagedPageAction, PageCheckOptions};
use pageio::config::{IoConfig, IoMethodKind, BLCKSZ};
use pageio::page::heap::ColumnType;
use pageio::page::pg_checksum_page;
use pageio::scan::{Between, ScanError, ScanKind, Table};
use pageio::storage::{ForkNumber, RelFile};
use pageio::Aio;

const BLOCK: u64 = 7;

/// pd_checksum of uniform's block 7, as PostgreSQL reported it when the fixture was built.
fn stored() -> u16 {
    let known = common::fixture_facts().heap_block(BLOCK as u32);
    assert_eq!(known.checksum, known.computed_checksum);
    known.checksum
}

/// The file of relation `name` in the fixture (`base/5/16384`), from `pg_relation_filepath`.
fn rel(name: &str) -> &'static str {
    common::fixture_facts().path(name)
}

/// Flips a byte in the free space of uniform's block 7 (between pd_lower 96 and pd_upper),
/// so the rows are intact and only the checksum betrays the damage. Returns the checksum
/// PostgreSQL would compute for the damaged page.
fn corrupt(pgdata: &std::path::Path) -> u16 {
    let path = pgdata.join(rel("uniform"));
    let mut bytes = std::fs::read(&path).unwrap();
    let page = &mut bytes[BLOCK as usize * BLCKSZ..(BLOCK as usize + 1) * BLCKSZ];
    page[3000] ^= 0x5A;
    let computed = pg_checksum_page((&*page).try_into().unwrap(), BLOCK as u32);
    // The flip left pd_checksum alone: the page still claims PostgreSQL's checksum.
    assert_eq!(
        pageio::page::checksum::stored_checksum((&*page).try_into().unwrap()),
        stored()
    );
    assert_ne!(computed, stored());
    std::fs::write(&path, &bytes).unwrap();
    computed
}

fn scan(
    aio: &Aio,
    pgdata: &std::path::Path,
    kind: ScanKind,
    check: PageCheckOptions,
) -> Result<pageio::scan::ScanResult, ScanError> {
    let pool = BufferPool::new(aio, check).unwrap();
    let table = Table {
        heap: RelFile::in_data_dir(pgdata, rel("uniform"), ForkNumber::Main),
        index: Some(RelFile::in_data_dir(
            pgdata,
            rel("uniform_a"),
            ForkNumber::Main,
        )),
        columns: vec![ColumnType::Float8, ColumnType::Text],
        transactions: Some(pageio::catalog::cluster_transaction_log(pgdata).unwrap()),
    };
    common::scan(&pool, &table, kind, Between::ALL)
}

/// Nine scans of 20,000 rows per check; a minute means a hang.
const WATCHDOG_SECS: u64 = 60;

#[test]
fn corrupt_page_is_reported_ignored_or_zeroed_under_every_method() {
    common::with_watchdog("corrupt page", WATCHDOG_SECS, corrupt_page_body)
}

fn corrupt_page_body() {
    let (_dir, pgdata) = common::unpack_fixture();
    let computed = corrupt(&pgdata);
    for method in IoMethodKind::CONCRETE {
        let aio = Aio::new(IoConfig {
            io_method: method,
            ..IoConfig::default()
        })
        .unwrap();
        for kind in [ScanKind::Seq, ScanKind::Bitmap, ScanKind::Index] {
            let checks = PageCheckOptions {
                checksums: true,
                ..Default::default()
            };
            let err = scan(&aio, &pgdata, kind, checks).unwrap_err();
            let msg = err.to_string();
            assert!(msg.contains(rel("uniform")), "{method} {kind}: {msg}");
            assert!(msg.contains("block 7"), "{method} {kind}: {msg}");
            assert!(
                msg.contains(&format!(
                    "calculated checksum {computed} but expected {}",
                    stored()
                )),
                "{method} {kind}: {msg}"
            );
            assert!(
                msg.contains("ignore_checksum_failure"),
                "the fix is named: {msg}"
            );

            let r = scan(
                &aio,
                &pgdata,
                kind,
                PageCheckOptions {
                    ignore_checksum_failure: true,
                    ..checks
                },
            )
            .unwrap();
            assert_eq!(
                (r.rows, r.sum_octet_length),
                (20000, 1320000),
                "{method} {kind}"
            );
            assert_eq!(r.pages_failed_verification, 1, "{method} {kind}");
            assert_eq!(r.damaged_pages.len(), 1, "{method} {kind}");
            assert_eq!(
                (r.damaged_pages[0].block, r.damaged_pages[0].action),
                (BLOCK, DamagedPageAction::UsedAnyway),
                "{method} {kind}"
            );

            let r = scan(
                &aio,
                &pgdata,
                kind,
                PageCheckOptions {
                    zero_damaged_pages: true,
                    ..checks
                },
            )
            .unwrap();
            assert_eq!(r.pages_failed_verification, 1);
            assert_eq!(r.pool.pages_zeroed, 1);
            // The library reports what it did, per page, as PostgreSQL's WARNING does.
            assert_eq!(r.damaged_pages.len(), 1, "{method} {kind}");
            let event = &r.damaged_pages[0];
            assert_eq!(
                (event.path.as_str(), event.block, event.action),
                (rel("uniform"), BLOCK, DamagedPageAction::Zeroed),
                "{method} {kind}"
            );
            let line = event.to_string();
            assert!(
                line.starts_with(&format!(
                    "invalid page in block 7 of relation {}; zeroing out page",
                    rel("uniform")
                )),
                "{line}"
            );
            assert!(
                line.contains(&format!(
                    "calculated checksum {computed} but expected {}",
                    stored()
                )),
                "{line}"
            );
            assert_eq!(
                r.rows,
                20000 - 18,
                "{method} {kind}: block 7's 18 rows are gone"
            );
        }
    }
    // Nothing was written back: the file still holds the damaged page, no more, no less.
    let bytes = std::fs::read(pgdata.join(rel("uniform"))).unwrap();
    let page: &[u8; BLCKSZ] = bytes[7 * BLCKSZ..8 * BLCKSZ].try_into().unwrap();
    assert_eq!(pg_checksum_page(page, 7), computed);
}

#[test]
fn missing_index_and_missing_files_are_explained() {
    common::with_watchdog("missing files", WATCHDOG_SECS, missing_files_body)
}

fn missing_files_body() {
    let (_dir, pgdata) = common::unpack_fixture();
    let aio = Aio::new(IoConfig::default()).unwrap();
    let pool = BufferPool::new(&aio, PageCheckOptions::default()).unwrap();
    let mut table = Table {
        heap: RelFile::in_data_dir(&pgdata, rel("uniform"), ForkNumber::Main),
        index: None,
        columns: vec![ColumnType::Float8, ColumnType::Text],
        transactions: Some(pageio::catalog::cluster_transaction_log(&pgdata).unwrap()),
    };
    let err = common::scan(&pool, &table, ScanKind::Index, Between::ALL).unwrap_err();
    assert!(matches!(err, ScanError::NoIndex(ScanKind::Index)));
    assert!(err.to_string().contains("needs the table's index"), "{err}");
    table.heap = RelFile::in_data_dir(&pgdata, "base/5/99999", ForkNumber::Main);
    let err = common::scan(&pool, &table, ScanKind::Seq, Between::ALL).unwrap_err();
    assert!(err.to_string().contains("base/5/99999"), "{err}");
    // An index that is not a btree (the heap itself) is refused with a reason.
    table.heap = RelFile::in_data_dir(&pgdata, rel("uniform"), ForkNumber::Main);
    table.index = Some(RelFile::in_data_dir(
        &pgdata,
        rel("linear_10"),
        ForkNumber::Main,
    ));
    let err = common::scan(&pool, &table, ScanKind::Bitmap, Between::ALL).unwrap_err();
    let relfilenode = rel("linear_10").rsplit('/').next().unwrap();
    assert!(err.to_string().contains(relfilenode), "{err}");
}
