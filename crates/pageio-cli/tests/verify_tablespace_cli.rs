//! A `pg_tblspc` link without a PostgreSQL 18 directory is named for what it is, not as a
//! failed stat of a glob.

mod common;

#[test]
fn tablespace_of_another_version_is_explained() {
    let tmp = tempfile::tempdir().unwrap();
    let pgdata = common::unpack_fixture(tmp.path());
    let location = tmp.path().join("ts17");
    std::fs::create_dir_all(location.join("PG_17_202307071/5")).unwrap();
    std::os::unix::fs::symlink(&location, pgdata.join("pg_tblspc/16400")).unwrap();
    let out = common::pageio_bounded(&["verify", pgdata.to_str().unwrap()], 60);
    assert_ne!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "tablespace 16400 at \"{}\" has no PG_18_… directory (it holds: PG_17_202307071)",
            location.display()
        )) && err.contains("another PostgreSQL version"),
        "{err}"
    );
    assert!(
        !err.contains("PG_18_*") && !err.contains("entity not found"),
        "{err}"
    );
}
