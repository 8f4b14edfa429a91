//! `pageio aios` warnings name an unreadable area's path once.

mod common;

#[test]
fn an_unreadable_area_is_named_once() {
    let dir = tempfile::tempdir().unwrap();
    let area = dir.path().join("pageio-aios.1.0");
    std::fs::write(&area, b"").unwrap();
    let out = common::pageio_bounded(
        &["aios", "--aio-publish-dir", dir.path().to_str().unwrap()],
        30,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(
        err.lines().collect::<Vec<_>>(),
        [format!(
            "pageio: warning: AIO area \"{}\" is 0 bytes, expected 168000: truncated or not a pageio area",
            area.display()
        )]
    );
}
