//! The offline catalog reader on the real PostgreSQL 18 fixture, once per io_method: every
//! relation resolves to the file PostgreSQL's `pg_relation_filepath` gave, with its columns
//! and btree; a catalog page with a bad checksum and a truncated pg_class are typed errors
//! naming the catalog.

mod common;

use std::os::unix::fs::FileExt;
use std::path::Path;

use pageio::buffer::BufferPool;
use pageio::catalog::{cluster_check_options, Catalog, CatalogError, RelKind};
use pageio::config::{IoConfig, IoMethodKind};
use pageio::Aio;

fn pool(pgdata: &Path, method: IoMethodKind) -> BufferPool {
    let aio = Aio::new(IoConfig {
        io_method: method,
        shared_buffers_bytes: 16 << 20,
        ..IoConfig::default()
    })
    .unwrap();
    BufferPool::new(&aio, cluster_check_options(pgdata).unwrap()).unwrap()
}

fn resolves_fixture(method: IoMethodKind) {
    common::with_watchdog("resolves_fixture", 120, move || {
        let (_dir, pgdata) = common::unpack_fixture();
        let facts = common::fixture_facts();
        let pool = pool(&pgdata, method);
        assert!(pool.check_options().checksums, "the fixture has checksums");
        let catalog = Catalog::open(&pgdata, &pool).unwrap();
        let names: Vec<&str> = catalog
            .databases()
            .iter()
            .map(|d| d.name.as_str())
            .collect();
        assert_eq!(names, ["postgres", "template0", "template1"]);
        let postgres = &catalog.databases()[0];
        assert_eq!(postgres.oid, facts.database_oid);
        assert_eq!(postgres.tablespace_oid, 1663);
        let ts: Vec<&str> = catalog
            .tablespaces()
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        assert_eq!(ts, ["pg_default", "pg_global"]);
        assert_eq!(catalog.catversion(), 202506291);

        for table in ["uniform", "linear_10"] {
            for spec in [
                table.to_string(),
                format!("public.{table}"),
                format!("postgres.public.{table}"),
            ] {
                let rel = catalog.resolve(&spec, "postgres").unwrap();
                assert_eq!(rel.path.as_deref(), Some(facts.path(table)), "{spec}");
                assert_eq!(rel.kind, RelKind::Table);
                assert_eq!(rel.schema, "public");
                assert_eq!(rel.persistence, 'p');
                let cols: Vec<(&str, Option<&str>, i16, char, bool)> = rel
                    .columns
                    .iter()
                    .map(|c| {
                        (
                            c.name.as_str(),
                            c.type_name.as_deref(),
                            c.attlen,
                            c.attalign,
                            c.attbyval,
                        )
                    })
                    .collect();
                assert_eq!(
                    cols,
                    [
                        ("a", Some("float8"), 8, 'd', true),
                        ("b", Some("text"), -1, 'i', false)
                    ]
                );
                assert!(rel.columns.iter().all(|c| !c.dropped && !c.atthasmissing));
                let btrees: Vec<_> = rel.btree_indexes().collect();
                assert_eq!(btrees.len(), 1);
                let index_name = format!("{table}_a");
                assert_eq!(btrees[0].name, index_name);
                assert_eq!(btrees[0].path.as_deref(), Some(facts.path(&index_name)));
                assert_eq!(btrees[0].key_columns, [Some("a".to_string())]);
                let toast = rel.toast.as_ref().expect("text columns have a TOAST table");
                assert_eq!(toast.name, format!("pg_toast_{}", rel.oid));
                assert!(toast.path.as_deref().unwrap().starts_with("base/5/"));
                assert!(toast.index_path.is_some());
                let heap_bytes = facts.relations[table].pages as u64 * 8192;
                assert!(rel.table_size_bytes(&pgdata) >= heap_bytes);
            }
        }
        // The catalogs themselves: pg_class is mapped, pg_namespace is not.
        let db = catalog.database("postgres").unwrap();
        let pg_class = db.find(None, "pg_class").unwrap();
        assert_eq!(pg_class.schema, "pg_catalog");
        assert_eq!(pg_class.path.as_deref(), Some("base/5/1259"));
        let pg_database = db.find(Some("pg_catalog"), "pg_database").unwrap();
        assert_eq!(pg_database.path.as_deref(), Some("global/1262"));
        let tables: Vec<String> = db
            .tables()
            .unwrap()
            .iter()
            .map(|r| r.qualified_name())
            .collect();
        assert_eq!(tables, ["public.linear_10", "public.uniform"]);

        let e = catalog.resolve("nosuch", "postgres").unwrap_err();
        assert!(matches!(e, CatalogError::NoRelation { .. }), "{e}");
        assert_eq!(
            e.to_string(),
            "relation \"nosuch\" does not exist in database \"postgres\""
        );
        let e = catalog
            .resolve("nodb.public.uniform", "postgres")
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "database \"nodb\" does not exist in the cluster (it has: postgres, template0, template1)"
        );
        assert!(matches!(
            catalog.resolve("a..b", "postgres"),
            Err(CatalogError::BadName(_))
        ));
    })
}

#[test]
fn resolves_fixture_sync() {
    resolves_fixture(IoMethodKind::Sync)
}

#[test]
fn resolves_fixture_worker() {
    resolves_fixture(IoMethodKind::Worker)
}

#[test]
fn resolves_fixture_io_uring() {
    resolves_fixture(IoMethodKind::IoUring)
}

/// A flipped byte in pg_class's block 0: the pool's checksum check fails the read, and the
/// error names the catalog, the database, the file and the block.
fn bad_checksum_in_pg_class(method: IoMethodKind) {
    common::with_watchdog("bad_checksum_in_pg_class", 120, move || {
        let (_dir, pgdata) = common::unpack_fixture();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(pgdata.join("base/5/1259"))
            .unwrap();
        let mut byte = [0u8; 1];
        file.read_exact_at(&mut byte, 4000).unwrap();
        byte[0] ^= 0x40;
        file.write_all_at(&byte, 4000).unwrap();
        drop(file);
        let pool = pool(&pgdata, method);
        let catalog = Catalog::open(&pgdata, &pool).unwrap();
        let e = catalog.resolve("uniform", "postgres").unwrap_err();
        assert!(
            matches!(&e, CatalogError::CatalogUnreadable { catalog, path, .. }
                if catalog == "pg_class" && path == "base/5/1259"),
            "{e:?}"
        );
        let msg = e.to_string();
        assert!(
            msg.starts_with(
                "cannot read catalog pg_class of database \"postgres\" from \"base/5/1259\": "
            ),
            "{msg}"
        );
        assert!(msg.contains("block 0"), "{msg}");
        assert!(msg.contains("checksum"), "{msg}");
    })
}

#[test]
fn bad_checksum_in_pg_class_sync() {
    bad_checksum_in_pg_class(IoMethodKind::Sync)
}

#[test]
fn bad_checksum_in_pg_class_worker() {
    bad_checksum_in_pg_class(IoMethodKind::Worker)
}

#[test]
fn bad_checksum_in_pg_class_io_uring() {
    bad_checksum_in_pg_class(IoMethodKind::IoUring)
}

/// pg_class cut in the middle of a page, then to no page at all: a typed error naming
/// pg_class either way, never a missing or wrong table.
fn truncated_pg_class(method: IoMethodKind) {
    common::with_watchdog("truncated_pg_class", 120, move || {
        let (_dir, pgdata) = common::unpack_fixture();
        let path = pgdata.join("base/5/1259");
        let len = std::fs::metadata(&path).unwrap().len();
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.set_len(len - 3000).unwrap();
        let pool = pool(&pgdata, method);
        let catalog = Catalog::open(&pgdata, &pool).unwrap();
        let e = catalog.resolve("uniform", "postgres").unwrap_err();
        let msg = e.to_string();
        assert!(
            matches!(&e, CatalogError::CatalogUnreadable { catalog, .. } if catalog == "pg_class"),
            "{e:?}"
        );
        assert!(msg.contains("partial page"), "{msg}");
        assert!(msg.contains("\"base/5/1259\""), "{msg}");

        file.set_len(0).unwrap();
        let e = catalog.resolve("uniform", "postgres").unwrap_err();
        assert!(
            matches!(&e, CatalogError::MissingRow { catalog, .. } if catalog == "pg_class"),
            "{e:?}"
        );
        assert!(
            e.to_string()
                .starts_with("catalog pg_class of database \"postgres\" has no row for"),
            "{e}"
        );
    })
}

#[test]
fn truncated_pg_class_sync() {
    truncated_pg_class(IoMethodKind::Sync)
}

#[test]
fn truncated_pg_class_worker() {
    truncated_pg_class(IoMethodKind::Worker)
}

#[test]
fn truncated_pg_class_io_uring() {
    truncated_pg_class(IoMethodKind::IoUring)
}

/// A damaged relation mapper file is refused, naming it.
#[test]
fn damaged_relmapper_file() {
    let (_dir, pgdata) = common::unpack_fixture();
    let path = pgdata.join("base/5/pg_filenode.map");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[9] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let pool = pool(&pgdata, IoMethodKind::Sync);
    let catalog = Catalog::open(&pgdata, &pool).unwrap();
    let e = catalog.database("postgres").unwrap_err();
    assert!(matches!(e, CatalogError::RelMap { .. }), "{e:?}");
    assert!(
        e.to_string()
            .starts_with("relation mapper file \"base/5/pg_filenode.map\" has CRC"),
        "{e}"
    );
}

/// A cluster whose pg_control says it is running is refused before any catalog is read.
#[test]
fn running_cluster_is_refused() {
    let (_dir, pgdata) = common::unpack_fixture();
    let path = pgdata.join("global/pg_control");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[16..20].copy_from_slice(&6u32.to_le_bytes()); // DB_IN_PRODUCTION
    let crc = pageio::page::control::crc32c(&bytes[..292]);
    bytes[292..296].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let e = cluster_check_options(&pgdata).unwrap_err();
    assert!(matches!(e, CatalogError::NotShutDown { .. }), "{e:?}");
    assert!(
        e.to_string()
            .contains("is in production, not cleanly shut down"),
        "{e}"
    );
}

/// A pool that does not verify checksums, or reads past damaged pages, is refused.
#[test]
fn pool_must_check_pages_as_the_cluster_says() {
    use pageio::buffer::PageCheckOptions;
    let (_dir, pgdata) = common::unpack_fixture();
    let aio = Aio::new(IoConfig {
        io_method: IoMethodKind::Sync,
        shared_buffers_bytes: 16 << 20,
        ..IoConfig::default()
    })
    .unwrap();
    for (check, says) in [
        (
            PageCheckOptions::default(),
            "does not verify checksums, and the cluster has them",
        ),
        (
            PageCheckOptions {
                checksums: true,
                zero_damaged_pages: true,
                ..PageCheckOptions::default()
            },
            "reads past damaged pages",
        ),
    ] {
        let pool = BufferPool::new(&aio, check).unwrap();
        let e = Catalog::open(&pgdata, &pool).unwrap_err();
        assert!(matches!(e, CatalogError::PoolChecks { .. }), "{e:?}");
        assert!(e.to_string().contains(says), "{e}");
    }
}

/// `Catalog::open_cluster` does in one call what a reader by name needs: the cluster's
/// checks (the fixture has checksums), its databases, a name resolved to its file; and it
/// refuses a cluster that pg_control says is running, as `cluster_check_options` does.
#[test]
fn open_cluster_reads_with_the_clusters_checks_and_refuses_a_running_one() {
    let (_dir, pgdata) = common::unpack_fixture();
    let facts = common::fixture_facts();
    let aio = Aio::new(IoConfig {
        io_method: IoMethodKind::Sync,
        shared_buffers_bytes: 16 << 20,
        ..IoConfig::default()
    })
    .unwrap();
    {
        let catalog = Catalog::open_cluster(&pgdata, &aio).unwrap();
        assert!(catalog.check_options().checksums);
        assert!(!catalog.check_options().zero_damaged_pages);
        assert!(!catalog.check_options().ignore_checksum_failure);
        assert_eq!(catalog.databases().len(), 3);
        let rel = catalog.resolve("uniform", "postgres").unwrap();
        assert_eq!(rel.path.as_deref(), Some(facts.path("uniform")));
        let e = catalog.resolve("nosuch", "postgres").unwrap_err();
        assert!(matches!(e, CatalogError::NoRelation { .. }), "{e:?}");
    }
    let path = pgdata.join("global/pg_control");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[16..20].copy_from_slice(&6u32.to_le_bytes()); // DB_IN_PRODUCTION
    let crc = pageio::page::control::crc32c(&bytes[..292]);
    bytes[292..296].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let e = Catalog::open_cluster(&pgdata, &aio).unwrap_err();
    assert!(matches!(e, CatalogError::NotShutDown { .. }), "{e:?}");
}
