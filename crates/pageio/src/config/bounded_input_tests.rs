use super::*;

fn err_of(dir: &Path, text: &[u8]) -> String {
    let main = dir.join("main.conf");
    std::fs::write(&main, text).unwrap();
    read_conf_file(&main).unwrap_err().to_string()
}

#[test]
fn includes_of_devices_fifos_and_huge_files_are_refused_before_reading() {
    let dir = tempfile::tempdir().unwrap();
    let e = err_of(dir.path(), b"include '/dev/zero'\n");
    assert!(
        e.contains("/dev/zero") && e.contains("a character device"),
        "{e}"
    );
    let fifo = dir.path().join("fifo.conf");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: c is a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let e = err_of(dir.path(), b"include 'fifo.conf'\n");
    assert!(e.contains("a FIFO"), "{e}");
    // A sparse 2 GB file: refused from its size, nothing read.
    let huge = dir.path().join("huge.conf");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(2 << 30)
        .unwrap();
    let e = err_of(dir.path(), b"include 'huge.conf'\n");
    assert!(
        e.contains("CONF_FILE_MAX_BYTES") && e.contains("2147483648"),
        "{e}"
    );
}

#[test]
fn includes_share_one_total_budget() {
    let dir = tempfile::tempdir().unwrap();
    // Ten files of 7 MiB each, every one under the per-file bound, 70 MiB together.
    let mut main = String::new();
    for i in 0..10 {
        let name = format!("part{i}.conf");
        let mut text = String::new();
        while text.len() < 7 << 20 {
            text.push_str("# padding padding padding padding padding padding padding\n");
        }
        std::fs::write(dir.path().join(&name), text).unwrap();
        main.push_str(&format!("include '{name}'\n"));
    }
    let e = err_of(dir.path(), main.as_bytes());
    assert!(e.contains("CONF_TOTAL_MAX_BYTES"), "{e}");
}

#[test]
fn long_lines_and_nul_bytes_are_errors_quoting_at_most_200_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let long = format!("shared_buffers = '{}'\n", "x".repeat(100 << 10));
    let e = err_of(dir.path(), long.as_bytes());
    assert!(
        e.contains("CONF_LINE_MAX_BYTES") && e.contains("line 1"),
        "{e}"
    );
    assert!(
        e.len() < 600,
        "the message quotes at most 200 bytes: {} bytes",
        e.len()
    );
    let e = err_of(dir.path(), b"io_method = 'sync'\nio_workers = 3\0\n");
    assert!(e.contains("NUL") && e.contains("line 2"), "{e}");
    assert!(e.contains("at byte 15"), "{e}");
    // A bad line of any length is quoted short.
    let junk = format!("{}\n", "= ".repeat(20 << 10));
    let e = err_of(dir.path(), junk.as_bytes());
    assert!(e.len() < 600, "{e}");
}

/// PostgreSQL 18.6 starts with a NUL byte or a Latin-1 word in a comment
/// (`work_mem = 8MB # x\0y` and `# caf\xe9` give `postgres -C work_mem` = 8192), and
/// refuses a NUL inside the value (`work_mem = 8M\0B`: "syntax error in file … line 1").
#[test]
fn comments_may_hold_any_bytes_and_the_setting_part_must_be_text() {
    let dir = tempfile::tempdir().unwrap();
    let main = dir.path().join("main.conf");
    std::fs::write(
        &main,
        b"work_mem = 8MB # x\0y\r\n# caf\xe9 comment\nio_method = 'a#b' # c\xe9\n",
    )
    .unwrap();
    let entries = read_conf_file(&main).unwrap();
    let got: Vec<(&str, &str, usize)> = entries
        .iter()
        .map(|e| (e.name.as_str(), e.value.as_str(), e.line))
        .collect();
    assert_eq!(got, [("work_mem", "8MB", 1), ("io_method", "a#b", 3)]);
    let e = err_of(dir.path(), b"# ok\nwork_mem = 8M\0B\n");
    assert_eq!(
        e,
        format!(
            "configuration file \"{}\" line 2: the line holds a NUL byte at byte 14, outside a comment, which PostgreSQL refuses too (\"syntax error\"): \"work_mem = 8M\\0B\"; remove it",
            main.display()
        )
    );
    let e = err_of(dir.path(), b"\n\napplication_name = caf\xe9\n");
    assert_eq!(
        e,
        format!(
            "configuration file \"{}\" line 3: byte 23 is not UTF-8 text, and pageio reads settings as UTF-8: \"application_name = caf\u{fffd}\"; write the value in UTF-8 (a comment may hold any bytes)",
            main.display()
        )
    );
}
