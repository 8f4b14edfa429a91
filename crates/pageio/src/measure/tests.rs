use super::*;

#[test]
fn tablespace_version_directories_are_recognised() {
    use crate::storage::is_tablespace_version_dir;
    assert!(is_tablespace_version_dir(Path::new("/ts/PG_18_202506291")));
    assert!(!is_tablespace_version_dir(Path::new("/ts/PG_18")));
    assert!(!is_tablespace_version_dir(Path::new("/ts/PG_18_x")));
    assert!(!is_tablespace_version_dir(Path::new("/ts/data")));
}

#[test]
fn budget_gives_early_finishers_time_to_later_runs() {
    let mut b = Budget {
        start: Instant::now(),
        total: Duration::from_secs(16),
        weight_left: 16.0,
    };
    let first = b.slice(2.0);
    assert!((first.as_secs_f64() - 2.0).abs() < 0.05, "{first:?}");
    // Nothing was spent: the remaining 14 weights share all 16 s.
    let next = b.slice(1.0);
    assert!((next.as_secs_f64() - 16.0 / 14.0).abs() < 0.05, "{next:?}");
}

#[test]
fn options_are_checked() {
    let mut o = MeasureOptions::new(MeasureTarget::Directory(PathBuf::from("/nonexistent")));
    o.seconds = 0.0;
    assert!(matches!(
        run(&o),
        Err(MeasureError::InvalidOption {
            name: "seconds",
            ..
        })
    ));
    o.seconds = 1.0;
    o.queue_depths = vec![1, 2, 4];
    let e = run(&o).unwrap_err();
    assert!(e.to_string().contains("including 1 and 32"), "{e}");
}
