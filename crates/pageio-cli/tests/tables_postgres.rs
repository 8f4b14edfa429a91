//! The catalog reader and `pageio tables` against a real PostgreSQL 18 cluster built here:
//! a table in a non-default schema (with a column added with a default after rows existed),
//! one in a second database, one in a tablespace, an unlogged table (with a dropped
//! column), a partitioned table's partitions, and a table rewritten by VACUUM FULL (new
//! relfilenode, for it and its index), a table owned by a second role and one never
//! analysed (`reltuples` -1). Every relation must resolve to the file PostgreSQL's
//! `pg_relation_filepath()` gave, and `pageio tables` must list what `\dt+ *.*` lists
//! outside the system schemas — names, owners, access methods, files, pages, rows and
//! sizes — under every io_method.
//!
//! PostgreSQL comes from `bench/setup-postgres.sh` or `$PAGEIO_PG_BIN`; without it the
//! tests print a skip line, except under `CI`, where they fail.

mod common;
use common::{pg_bin, with_watchdog};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use pageio::buffer::BufferPool;
use pageio::catalog::{cluster_check_options, Catalog, RelKind};
use pageio::config::{IoConfig, IoMethodKind};
use pageio::Aio;

const PG_USER: &str = "pgtest";

fn is_root() -> bool {
    // SAFETY: getuid has no preconditions.
    unsafe { libc_getuid() == 0 }
}

extern "C" {
    #[link_name = "getuid"]
    fn libc_getuid() -> u32;
}

fn pg_ok(bin: &Path, program: &str, args: &[&str]) -> String {
    let exe = bin.join(program);
    let mut cmd = if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", PG_USER, "--"]).arg(&exe);
        c
    } else {
        Command::new(&exe)
    };
    let out = cmd.args(args).current_dir("/tmp").output().unwrap();
    assert!(
        out.status.success(),
        "{program} {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn chown_to_pg_user(path: &Path) {
    if is_root() {
        let st = Command::new("chown")
            .args(["-R", PG_USER])
            .arg(path)
            .status()
            .unwrap();
        assert!(st.success());
    }
}

/// Each `;`-terminated statement as its own `-c` (CREATE DATABASE, CREATE TABLESPACE and
/// VACUUM may not run inside a transaction block).
fn psql(bin: &Path, root: &Path, db: &str, sql: &str) -> String {
    let host = root.display().to_string();
    let mut args = vec![
        "-h",
        &host,
        "-U",
        "postgres",
        "-d",
        db,
        "-X",
        "-qAt",
        "-v",
        "ON_ERROR_STOP=1",
    ];
    for stmt in sql
        .split_terminator(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        args.push("-c");
        args.push(stmt);
    }
    pg_ok(bin, "psql", &args)
}

/// What PostgreSQL said about one relation: its file, pages and `pg_table_size`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PgRel {
    path: Option<String>,
    pages: i32,
    size_bytes: u64,
    /// `reltuples` as PostgreSQL prints it (`-1`: never vacuumed or analysed).
    reltuples: String,
}

/// One row of `\dt+ *.*` as psql printed it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct DtRow {
    schema: String,
    name: String,
    owner: String,
    access_method: String,
    size: String,
}

struct Cluster {
    _dir: tempfile::TempDir,
    data: PathBuf,
    /// (database, schema.name) → PostgreSQL's answer, for every table and index made here.
    facts: BTreeMap<(String, String), PgRel>,
    /// `\dt+ *.*` outside the system schemas, per database.
    dt: BTreeMap<String, Vec<DtRow>>,
    /// The rewritten table's file before VACUUM FULL.
    before_vacuum_full: String,
}

const FACTS_SQL: &str = "SELECT current_database(), n.nspname || '.' || c.relname, \
    coalesce(pg_relation_filepath(c.oid), '-'), c.relpages, pg_table_size(c.oid), \
    c.reltuples \
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
    WHERE c.relkind IN ('r', 'p', 'i') AND n.nspname IN ('public', 'app')";

fn cluster(bin: &Path) -> &'static Cluster {
    static C: OnceLock<Cluster> = OnceLock::new();
    C.get_or_init(|| {
        let dir = common::pg_cluster_dir_for_process("pageio-tables-");
        let root = dir.path().to_path_buf();
        std::fs::create_dir(root.join("ts")).unwrap();
        chown_to_pg_user(&root);
        let data = root.join("data");
        let data_s = data.display().to_string();
        pg_ok(bin, "initdb", &["-k", "-U", "postgres", "-D", &data_s]);
        let opts = format!("-k {} -c listen_addresses='' -c autovacuum=off", root.display());
        let log = root.join("log").display().to_string();
        pg_ok(
            bin,
            "pg_ctl",
            &["-D", &data_s, "-o", &opts, "-l", &log, "-w", "start"],
        );
        struct Stop<'a>(&'a Path, String);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                pg_ok(self.0, "pg_ctl", &["-D", &self.1, "-m", "fast", "-w", "stop"]);
            }
        }
        let stop = Stop(bin, data_s.clone());
        psql(
            bin,
            &root,
            "postgres",
            &format!(
                "CREATE SCHEMA app;
                 CREATE TABLE app.accounts (id int PRIMARY KEY, name text, balance int8);
                 INSERT INTO app.accounts SELECT g, 'n' || g, g * 10 FROM generate_series(1, 3000) g;
                 ALTER TABLE app.accounts ADD COLUMN extra int DEFAULT 7;
                 CREATE TABLESPACE ts LOCATION '{}';
                 CREATE TABLE in_ts (a int8, b text) TABLESPACE ts;
                 INSERT INTO in_ts SELECT g, repeat('y', 50) FROM generate_series(1, 2000) g;
                 CREATE INDEX in_ts_a ON in_ts (a) TABLESPACE ts;
                 CREATE UNLOGGED TABLE ulog (a int, gone text, b text);
                 INSERT INTO ulog SELECT g, 'x', 'z' FROM generate_series(1, 500) g;
                 ALTER TABLE ulog DROP COLUMN gone;
                 CREATE TABLE parted (k int, v text) PARTITION BY RANGE (k);
                 CREATE TABLE parted_1 PARTITION OF parted FOR VALUES FROM (0) TO (100);
                 CREATE TABLE parted_2 PARTITION OF parted FOR VALUES FROM (100) TO (200);
                 INSERT INTO parted SELECT g % 200, 'v' FROM generate_series(1, 4000) g;
                 CREATE TABLE rewritten (a int, b text);
                 INSERT INTO rewritten SELECT g, 'r' FROM generate_series(1, 5000) g;
                 CREATE INDEX rewritten_a ON rewritten (a);
                 DELETE FROM rewritten WHERE a % 2 = 0;
                 CREATE ROLE app_owner;
                 CREATE TABLE app.owned (a int, b text);
                 INSERT INTO app.owned SELECT g, 'o' FROM generate_series(1, 700) g;
                 ALTER TABLE app.owned OWNER TO app_owner;
                 CREATE DATABASE second",
                root.join("ts").display()
            ),
        );
        let before_vacuum_full = psql(
            bin,
            &root,
            "postgres",
            "SELECT pg_relation_filepath('rewritten')",
        )
        .trim()
        .to_string();
        psql(
            bin,
            &root,
            "postgres",
            "VACUUM FULL rewritten; ANALYZE; CHECKPOINT",
        );
        // Rows, but never a VACUUM, ANALYZE or CREATE INDEX (each sets reltuples).
        psql(
            bin,
            &root,
            "postgres",
            "CREATE TABLE never_analysed (a int, b text);
             INSERT INTO never_analysed SELECT g, 'n' FROM generate_series(1, 300) g",
        );
        psql(
            bin,
            &root,
            "second",
            "CREATE TABLE other (x int, y text);
             INSERT INTO other SELECT g, 'o' FROM generate_series(1, 1000) g;
             CREATE INDEX other_x ON other (x);
             ANALYZE",
        );
        let mut facts = BTreeMap::new();
        let mut dt = BTreeMap::new();
        for db in ["postgres", "second"] {
            for line in psql(bin, &root, db, FACTS_SQL).lines() {
                let f: Vec<&str> = line.split('|').collect();
                facts.insert(
                    (f[0].to_string(), f[1].to_string()),
                    PgRel {
                        path: (f[2] != "-").then(|| f[2].to_string()),
                        pages: f[3].parse().unwrap(),
                        size_bytes: f[4].parse().unwrap(),
                        reltuples: f[5].to_string(),
                    },
                );
            }
            let listing = psql(bin, &root, db, "\\dt+ *.*");
            let rows = listing
                .lines()
                .map(|l| l.split('|').collect::<Vec<_>>())
                .filter(|f| !["pg_catalog", "information_schema"].contains(&f[0]))
                .filter(|f| !f[0].starts_with("pg_toast"))
                // Schema | Name | Type | Owner | Persistence | Access method | Size | Description
                .map(|f| DtRow {
                    schema: f[0].to_string(),
                    name: f[1].to_string(),
                    owner: f[3].to_string(),
                    access_method: f[5].to_string(),
                    size: f[6].to_string(),
                })
                .collect();
            dt.insert(db.to_string(), rows);
        }
        drop(stop);
        Cluster {
            _dir: dir,
            data,
            facts,
            dt,
            before_vacuum_full,
        }
    })
}

fn resolve_every_relation(method: IoMethodKind) {
    let Some(bin) = pg_bin() else { return };
    let c = cluster(&bin);
    let data = c.data.clone();
    let facts = c.facts.clone();
    let before = c.before_vacuum_full.clone();
    with_watchdog("resolve_every_relation", 120, move || {
        let aio = Aio::new(IoConfig {
            io_method: method,
            shared_buffers_bytes: 16 << 20,
            ..IoConfig::default()
        })
        .unwrap();
        let pool = BufferPool::new(&aio, cluster_check_options(&data).unwrap()).unwrap();
        assert!(pool.check_options().checksums);
        let catalog = Catalog::open(&data, &pool).unwrap();
        assert!(catalog.databases().iter().any(|d| d.name == "second"));
        assert!(catalog.tablespaces().iter().any(|t| t.name == "ts"));
        for ((db, qualified), pg) in &facts {
            let rel = catalog
                .resolve(&format!("{db}.{qualified}"), "postgres")
                .unwrap_or_else(|e| panic!("{db}.{qualified}: {e}"));
            if rel.kind == RelKind::Index {
                continue; // checked through their tables below
            }
            assert_eq!(rel.path, pg.path, "{db}.{qualified}");
            assert_eq!(rel.relpages, pg.pages, "{db}.{qualified}");
            assert_eq!(rel.reltuples.to_string(), pg.reltuples, "{db}.{qualified}");
            let owner = catalog.role_name(rel.owner_oid).unwrap();
            let want = if qualified == "app.owned" {
                "app_owner"
            } else {
                "postgres"
            };
            assert_eq!(owner, Some(want), "{db}.{qualified}");
            assert_eq!(
                rel.table_size_bytes(&data),
                pg.size_bytes,
                "{db}.{qualified}"
            );
            for index in &rel.indexes {
                let key = (db.clone(), format!("{}.{}", index.schema, index.name));
                assert_eq!(index.path, facts[&key].path, "{key:?}");
            }
        }
        // Every relation made above was found (indexes included).
        assert_eq!(facts.len(), 14, "{facts:?}");

        let in_ts = catalog.resolve("in_ts", "postgres").unwrap();
        let path = in_ts.path.as_deref().unwrap();
        assert!(path.starts_with("pg_tblspc/"), "{path}");
        assert!(
            path.contains(&format!("/PG_18_{}/", catalog.catversion())),
            "{path}"
        );
        assert_eq!(
            in_ts.btree_indexes().next().unwrap().key_columns,
            [Some("a".into())]
        );

        let ulog = catalog.resolve("public.ulog", "postgres").unwrap();
        assert_eq!(ulog.persistence, 'u');
        let dropped: Vec<bool> = ulog.columns.iter().map(|c| c.dropped).collect();
        assert_eq!(dropped, [false, true, false]);
        assert_eq!(ulog.columns[1].type_name, None);
        assert_eq!(ulog.columns[2].name, "b");

        let accounts = catalog
            .resolve("postgres.app.accounts", "postgres")
            .unwrap();
        let cols: Vec<(&str, &str, bool, bool)> = accounts
            .columns
            .iter()
            .map(|c| {
                (
                    c.name.as_str(),
                    c.type_name.as_deref().unwrap(),
                    c.attnotnull,
                    c.atthasmissing,
                )
            })
            .collect();
        assert_eq!(
            cols,
            [
                ("id", "int4", true, false),
                ("name", "text", false, false),
                ("balance", "int8", false, false),
                ("extra", "int4", false, true)
            ]
        );
        let pkey = &accounts.indexes[0];
        assert_eq!(pkey.name, "accounts_pkey");
        assert!(pkey.is_primary && pkey.is_unique && pkey.is_btree());
        assert!(
            catalog.resolve("accounts", "postgres").is_ok(),
            "the only accounts"
        );

        let parted = catalog.resolve("parted", "postgres").unwrap();
        assert_eq!(parted.kind, RelKind::PartitionedTable);
        assert_eq!(parted.path, None);
        let p1 = catalog.resolve("parted_1", "postgres").unwrap();
        assert!(p1.is_partition && p1.kind == RelKind::Table);

        let rewritten = catalog.resolve("rewritten", "postgres").unwrap();
        assert_ne!(rewritten.path.as_deref(), Some(before.as_str()));

        let other = catalog.resolve("second.public.other", "postgres").unwrap();
        assert!(other.path.as_deref().unwrap().starts_with("base/"));
        assert_eq!(other.database, "second");
        // A name in another database only is not found in this one.
        assert!(catalog.resolve("other", "postgres").is_err());
    });
}

#[test]
fn resolve_every_relation_sync() {
    resolve_every_relation(IoMethodKind::Sync)
}

#[test]
fn resolve_every_relation_worker() {
    resolve_every_relation(IoMethodKind::Worker)
}

#[test]
fn resolve_every_relation_io_uring() {
    resolve_every_relation(IoMethodKind::IoUring)
}

fn pageio_json(args: &[&str]) -> serde_json::Value {
    let out: Output = common::pageio_bounded(args, 60);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn tables_lists_dt(method: &str) {
    let Some(bin) = pg_bin() else { return };
    let c = cluster(&bin);
    let data = c.data.display().to_string();
    // PostgreSQL 18.6's `\dt+` and pg_class for the cases this test is about: a second
    // role's table, a partitioned table (no access method), a table never analysed.
    let dt_of = |name: &str| c.dt["postgres"].iter().find(|r| r.name == name).unwrap();
    assert_eq!(
        (
            dt_of("owned").owner.as_str(),
            dt_of("owned").access_method.as_str()
        ),
        ("app_owner", "heap")
    );
    assert_eq!(
        (
            dt_of("parted").owner.as_str(),
            dt_of("parted").access_method.as_str()
        ),
        ("postgres", "")
    );
    let reltuples = |name: &str| &c.facts[&("postgres".to_string(), name.to_string())].reltuples;
    assert_eq!(reltuples("public.never_analysed"), "-1");
    assert_eq!(reltuples("app.owned"), "700");
    for db in ["postgres", "second"] {
        let json = pageio_json(&[
            "tables",
            "--pgdata",
            &data,
            "--database",
            db,
            "--json",
            "--io-method",
            method,
        ]);
        let tables = json["tables"].as_array().unwrap();
        let listed: Vec<(String, String)> = tables
            .iter()
            .map(|t| {
                (
                    t["schema"].as_str().unwrap().to_string(),
                    t["name"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let expected: Vec<(String, String)> = c.dt[db]
            .iter()
            .map(|r| (r.schema.clone(), r.name.clone()))
            .collect();
        assert_eq!(listed, expected, "{db}");
        for t in tables {
            let key = (
                db.to_string(),
                format!(
                    "{}.{}",
                    t["schema"].as_str().unwrap(),
                    t["name"].as_str().unwrap()
                ),
            );
            let pg = &c.facts[&key];
            assert_eq!(t["path"].as_str().map(str::to_string), pg.path, "{key:?}");
            assert_eq!(t["pages"].as_i64().unwrap(), pg.pages as i64, "{key:?}");
            assert_eq!(t["size_bytes"].as_u64().unwrap(), pg.size_bytes, "{key:?}");
            // reltuples -1 (never analysed) is null; any other value is PostgreSQL's.
            match pg.reltuples.as_str() {
                "-1" => assert!(t["rows"].is_null(), "{key:?}: {}", t["rows"]),
                n => assert_eq!(t["rows"].as_f64(), n.parse().ok(), "{key:?}"),
            }
            let dt = c.dt[db]
                .iter()
                .find(|r| key.1 == format!("{}.{}", r.schema, r.name))
                .unwrap();
            assert_eq!(t["owner"].as_str(), Some(dt.owner.as_str()), "{key:?}");
            assert_eq!(
                t["access_method"].as_str().unwrap_or(""),
                dt.access_method,
                "{key:?}"
            );
        }
        // The text form shows \dt+'s sizes, as pg_size_pretty prints them.
        let out = common::pageio_bounded(
            &[
                "tables",
                "--pgdata",
                &data,
                "--database",
                db,
                "--io-method",
                method,
            ],
            60,
        );
        assert!(out.status.success());
        let text = String::from_utf8_lossy(&out.stdout);
        let header: Vec<&str> = text
            .lines()
            .nth(1)
            .unwrap()
            .split('|')
            .map(str::trim)
            .collect();
        assert_eq!(
            header,
            [
                "Schema",
                "Name",
                "Type",
                "Owner",
                "Persistence",
                "Access method",
                "Rows",
                "Pages",
                "Size",
                "File",
                "Indexes"
            ]
        );
        for DtRow {
            schema,
            name,
            owner,
            access_method,
            size,
        } in &c.dt[db]
        {
            let line = text
                .lines()
                .find(|l| {
                    let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                    cells.len() > 2 && cells[0] == schema && cells[1] == name
                })
                .unwrap_or_else(|| panic!("{schema}.{name} not in:\n{text}"));
            assert!(line.contains(&format!("| {size} ")), "{size}: {line}");
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            assert_eq!(
                (cells[3], cells[5]),
                (owner.as_str(), access_method.as_str())
            );
            let reltuples = &c.facts[&(db.to_string(), format!("{schema}.{name}"))].reltuples;
            if reltuples == "-1" {
                assert_eq!(cells[6], "unknown", "{line}");
            } else {
                assert_eq!(cells[6], reltuples, "{line}");
            }
        }
        assert!(text.contains(&format!("({} rows)", c.dt[db].len())) || c.dt[db].len() == 1);
    }
    let out = common::pageio_bounded(&["tables", "--pgdata", &data, "--database", "nope"], 60);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr)
        .starts_with("pageio: error: database \"nope\" does not exist in the cluster"));
}

#[test]
fn tables_lists_dt_sync() {
    tables_lists_dt("sync")
}

#[test]
fn tables_lists_dt_worker() {
    tables_lists_dt("worker")
}

#[test]
fn tables_lists_dt_io_uring() {
    tables_lists_dt("io_uring")
}

/// Hint bits are set lazily, so a catalog row may carry none after a clean shutdown. With
/// every commit hint removed from pg_class (checksums recomputed), the old pg_class row of
/// the table VACUUM FULL rewrote is told from the new one by the commit log alone: the
/// reader still resolves the new file, never the old one and never two.
#[test]
fn commit_log_decides_unhinted_catalog_rows() {
    use pageio::page::builder::set_checksum;
    use pageio::page::heap::{HEAP_XMAX_COMMITTED, HEAP_XMIN_COMMITTED, HEAP_XMIN_FROZEN};
    use pageio::page::PageRef;
    let Some(bin) = pg_bin() else { return };
    let c = cluster(&bin);
    let copy = tempfile::tempdir().unwrap();
    let st = Command::new("cp")
        .arg("-a")
        .arg(&c.data)
        .arg(copy.path().join("data"))
        .status()
        .unwrap();
    assert!(st.success());
    let data = copy.path().join("data");
    let expected = c.facts[&("postgres".to_string(), "public.rewritten".to_string())]
        .path
        .clone();
    let before = c.before_vacuum_full.clone();
    with_watchdog("commit_log_decides_unhinted_catalog_rows", 120, move || {
        let resolve = |data: &Path| {
            let aio = Aio::new(IoConfig {
                io_method: IoMethodKind::Sync,
                shared_buffers_bytes: 16 << 20,
                ..IoConfig::default()
            })
            .unwrap();
            let pool = BufferPool::new(&aio, cluster_check_options(data).unwrap()).unwrap();
            let catalog = Catalog::open(data, &pool).unwrap();
            let pg_class = catalog
                .database("postgres")
                .unwrap()
                .find(Some("pg_catalog"), "pg_class")
                .unwrap()
                .path
                .unwrap();
            (
                catalog.resolve("rewritten", "postgres").map(|r| r.path),
                pg_class,
            )
        };
        let (path, pg_class) = resolve(&data);
        assert_eq!(path.unwrap(), expected);

        let file = data.join(&pg_class);
        let mut bytes = std::fs::read(&file).unwrap();
        let mut cleared = 0;
        for (blkno, page) in bytes.chunks_exact_mut(8192).enumerate() {
            let offsets: Vec<usize> = {
                let p = PageRef::new(page).unwrap();
                p.item_ids()
                    .filter(|(_, id)| id.is_normal())
                    .map(|(_, id)| id.lp_off as usize)
                    .collect()
            };
            for off in offsets {
                let at = off + 20; // t_infomask
                let mut mask = u16::from_le_bytes([page[at], page[at + 1]]);
                let before_mask = mask;
                if mask & HEAP_XMIN_FROZEN != HEAP_XMIN_FROZEN {
                    mask &= !HEAP_XMIN_COMMITTED;
                }
                mask &= !HEAP_XMAX_COMMITTED;
                if mask != before_mask {
                    cleared += 1;
                }
                page[at..at + 2].copy_from_slice(&mask.to_le_bytes());
            }
            let page: &mut [u8; 8192] = page.try_into().unwrap();
            set_checksum(page, blkno as u32);
        }
        assert!(cleared > 0, "pg_class had commit hints to remove");
        std::fs::write(&file, &bytes).unwrap();
        let (path, _) = resolve(&data);
        let path = path.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(path, expected);
        assert_ne!(path.as_deref(), Some(before.as_str()));
    });
}

/// `pageio tables` on the fixture with a flipped byte in pg_class: exit status 2 and one
/// line naming the catalog, the database, the file and the block, under every io_method.
#[test]
fn damaged_pg_class_is_an_error_naming_it() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let data = common::unpack_fixture(dir.path());
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(data.join("base/5/1259"))
        .unwrap();
    let mut byte = [0u8; 1];
    file.read_exact_at(&mut byte, 8192 + 5000).unwrap();
    byte[0] ^= 0x01;
    file.write_all_at(&byte, 8192 + 5000).unwrap();
    let data = data.display().to_string();
    for method in ["sync", "worker", "io_uring"] {
        let out = common::pageio_bounded(&["tables", "--pgdata", &data, "--io-method", method], 60);
        assert_eq!(out.status.code(), Some(2), "{method}");
        assert!(out.stdout.is_empty(), "{method}: nothing listed");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with(
                "pageio: error: cannot read catalog pg_class of database \"postgres\" from \"base/5/1259\": "
            ),
            "{method}: {err}"
        );
        assert!(err.contains("block 1"), "{method}: {err}");
        assert!(err.contains("calculated checksum"), "{method}: {err}");
        // Reading past a damaged catalog page would silently lose tables: no such advice.
        assert!(!err.contains("ignore_checksum_failure"), "{method}: {err}");
        assert_eq!(err.lines().count(), 1, "{method}: {err}");
    }
}
