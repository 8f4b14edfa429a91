//! `pageio aios` across processes: a child process reads a relation in a loop (cold, so
//! its I/Os take the device's time) and publishes its AIO state; `pageio aios` from another
//! process sees its handles and growing counters, reports its area as stale after a
//! SIGKILL and removes it. `--watch` is driven in a real terminal under tmux: the screen
//! shows the columns and changing values, and `q` / Ctrl-C leave the terminal clean.
//!
//! The child is this test binary itself, started with [`CHILD_ENV`] set: it runs only
//! [`child_process_entry`], which reads forever until killed; in the normal run that test
//! runs the same body for two passes and checks what it read.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{pageio_bounded, with_watchdog};
use pageio::aio::IoBuffer;
use pageio::config::{IoConfig, IoMethodKind, BLCKSZ};
use pageio::storage::RelFile;
use pageio::Aio;

/// Set in the child's environment: `<io_method>:<publish dir>:<data dir>`.
const CHILD_ENV: &str = "PAGEIO_AIOS_TEST_CHILD";

/// The child's relation: 32 MB, so one cold pass is many I/Os long.
const CHILD_RELATION_BLOCKS: u64 = 4096;

const WATCHDOG_SECS: u64 = 120;

/// Longest a step waits for the child to be seen doing something.
const SEEN_WITHIN: Duration = Duration::from_secs(30);

/// `pg_aios`'s states.
const PG_AIOS_STATES: [&str; 7] = [
    "HANDED_OUT",
    "DEFINED",
    "STAGED",
    "SUBMITTED",
    "COMPLETED_IO",
    "COMPLETED_SHARED",
    "COMPLETED_LOCAL",
];

/// The child's entry: when this binary runs as the child ([`CHILD_ENV`] set), [`child_body`]
/// reads until killed. In the normal test run the same body runs here for two passes, and
/// must publish its area and read every byte of both.
#[test]
fn child_process_entry() {
    if let Ok(spec) = std::env::var(CHILD_ENV) {
        child_body(&spec, None);
        unreachable!("the child reads until it is killed");
    }
    let publish = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let spec = format!(
        "worker:{}:{}",
        publish.path().display(),
        data.path().display()
    );
    let bytes = child_body(&spec, Some(2));
    assert_eq!(bytes, 2 * CHILD_RELATION_BLOCKS * BLCKSZ as u64);
    // Its area was removed when its engine was dropped.
    assert_eq!(std::fs::read_dir(publish.path()).unwrap().count(), 0);
}

/// The child's body for `spec` (`<io_method>:<publish dir>:<data dir>`, or `exit:<publish
/// dir>`): write a relation, then read it cold `passes` times (for ever when `None`);
/// returns the bytes read. Fails unless the engine publishes its area.
fn child_body(spec: &str, passes: Option<u64>) -> u64 {
    if let Some(publish_dir) = spec.strip_prefix("exit:") {
        // Publish, then leave through exit(3) without dropping the Aio.
        let aio = Aio::new(IoConfig {
            io_method: IoMethodKind::Worker,
            aio_publish_dir: PathBuf::from(publish_dir),
            ..IoConfig::default()
        })
        .unwrap();
        assert!(aio.publish_path().unwrap().exists());
        std::process::exit(0);
    }
    let mut parts = spec.splitn(3, ':');
    let method: IoMethodKind = parts.next().unwrap().parse().unwrap();
    let publish_dir = PathBuf::from(parts.next().unwrap());
    let data_dir = PathBuf::from(parts.next().unwrap());
    let aio = Aio::new(IoConfig {
        io_method: method,
        aio_publish_dir: publish_dir,
        ..IoConfig::default()
    })
    .unwrap();
    assert!(aio.publish_error().is_none(), "{:?}", aio.publish_error());
    assert!(aio.publish_path().unwrap().exists());
    let rel = RelFile::new(data_dir.join("16384"));
    let bytes = CHILD_RELATION_BLOCKS as usize * BLCKSZ;
    let mut backend = aio.backend().unwrap();
    backend
        .write_blocks(&rel, 0, IoBuffer::from_slice(&vec![0x5a; bytes]))
        .unwrap();
    let mut buf = IoBuffer::zeroed(bytes);
    let mut read = 0u64;
    for _ in 0..passes.unwrap_or(u64::MAX) {
        rel.evict_from_page_cache().unwrap();
        buf.as_mut_slice().fill(0);
        buf = backend.read_blocks(&rel, 0, buf).unwrap();
        assert!(buf.as_slice().iter().all(|&b| b == 0x5a));
        read += bytes as u64;
    }
    read
}

/// The child process, killed when dropped (a failing test leaves no reader behind).
struct ChildReader {
    child: Child,
    data: tempfile::TempDir,
}

impl ChildReader {
    fn start(method: IoMethodKind, publish_dir: &Path) -> ChildReader {
        let data = tempfile::tempdir().unwrap();
        let child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "child_process_entry",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(
                CHILD_ENV,
                format!(
                    "{method}:{}:{}",
                    publish_dir.display(),
                    data.path().display()
                ),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        ChildReader { child, data }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    fn relation_path(&self) -> PathBuf {
        self.data.path().join("16384")
    }

    fn kill(&mut self) {
        let _ = self.child.kill(); // SIGKILL
        let _ = self.child.wait();
    }
}

impl Drop for ChildReader {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `pageio aios --json` on `dir`, parsed.
fn aios_json(dir: &Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["aios", "--json", "--aio-publish-dir", dir.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = pageio_bounded(&args, 30);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The child's process entry in a `--json` document.
fn child_entry(doc: &serde_json::Value, pid: i32) -> Option<serde_json::Value> {
    doc["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["header"]["pid"] == pid)
        .cloned()
}

fn counter(entry: &serde_json::Value, name: &str) -> u64 {
    entry["sample"]["counters"][name].as_u64().unwrap()
}

/// A child reading under `method` is seen by `pageio aios --json` with its handles and
/// growing counters; killed with SIGKILL, its area is stale, reported, and removed.
fn cross_process_view_and_stale_cleanup(method: IoMethodKind) {
    let publish = tempfile::tempdir().unwrap();
    let mut child = ChildReader::start(method, publish.path());
    let pid = child.pid();
    let relation = child.relation_path();
    let relation_bytes = CHILD_RELATION_BLOCKS * BLCKSZ as u64;

    // Until a snapshot shows reads in flight (the first ones may be the writes).
    let start = Instant::now();
    let first = loop {
        let doc = aios_json(publish.path(), &[]);
        assert_eq!(doc["unreadable"], serde_json::json!([]), "{doc}");
        if let Some(entry) = child_entry(&doc, pid) {
            let rows = entry["sample"]["rows"].as_array().unwrap();
            if rows.iter().any(|r| r["operation"] == "readv") {
                break entry;
            }
        }
        assert!(
            start.elapsed() < SEEN_WITHIN,
            "{method}: no read of the child seen within {SEEN_WITHIN:?}: {doc}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(first["header"]["io_method"], method.as_str());
    assert!(
        first["header"]["program"]
            .as_str()
            .unwrap()
            .contains("child_process_entry"),
        "{first}"
    );
    for row in first["sample"]["rows"].as_array().unwrap() {
        let state = row["state"].as_str().unwrap();
        assert!(PG_AIOS_STATES.contains(&state), "{row}");
        let off = row["off"].as_u64().unwrap();
        let length = row["length"].as_u64().unwrap();
        if state == "HANDED_OUT" {
            // As in pg_aios: a handle handed out but not yet defined has no operation yet.
            assert_eq!(row["operation"], "invalid", "{row}");
            assert_eq!((off, length), (0, 0), "{row}");
            assert_eq!(row["target"], "invalid", "{row}");
            assert_eq!(row["target_desc"], "", "{row}");
            continue;
        }
        assert!(length > 0 && off + length <= relation_bytes, "{row}");
        assert!(
            row["target_desc"]
                .as_str()
                .unwrap()
                .contains(&relation.display().to_string()),
            "{row}"
        );
        assert_eq!(row["target"], "smgr");
        assert_eq!(row["f_buffered"], true);
    }
    // Per-backend counters: the reading thread's slot, the pid of its rows.
    let backends = first["sample"]["backend_counters"].as_array().unwrap();
    let row_tid = &first["sample"]["rows"][0]["pid"];
    assert!(
        backends
            .iter()
            .any(|b| &b["tid"] == row_tid && b["counters"]["ios_issued"].as_u64() > Some(0)),
        "{first}"
    );
    if method == IoMethodKind::Worker {
        let workers = first["sample"]["pool"]["workers"].as_u64().unwrap();
        assert!(workers >= 2, "{first}");
    } else {
        assert!(first["sample"]["pool"].is_null());
    }

    // The counters grow between two snapshots.
    let start = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(200));
        let doc = aios_json(publish.path(), &["--pid", &pid.to_string()]);
        let entry = child_entry(&doc, pid).expect("the child is still publishing");
        assert_eq!(doc["processes"].as_array().unwrap().len(), 1);
        if counter(&entry, "ios_issued") > counter(&first, "ios_issued")
            && counter(&entry, "bytes") > counter(&first, "bytes")
        {
            assert!(
                entry["sample"]["depth_samples"].as_u64()
                    > first["sample"]["depth_samples"].as_u64()
            );
            break;
        }
        assert!(
            start.elapsed() < SEEN_WITHIN,
            "{method}: the counters did not grow: {entry}"
        );
    }

    // The text view names the columns and the process.
    let out = pageio_bounded(
        &[
            "aios",
            "--aio-publish-dir",
            publish.path().to_str().unwrap(),
        ],
        30,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0));
    assert!(text.contains(&format!("pid {pid} ")), "{text}");
    let header: Vec<&str> = text
        .lines()
        .find(|l| l.trim_start().starts_with("pid ") && l.contains('|'))
        .unwrap_or_else(|| panic!("no column header: {text}"))
        .split('|')
        .map(str::trim)
        .collect();
    assert_eq!(
        header,
        [
            "pid",
            "io_id",
            "io_generation",
            "state",
            "operation",
            "off",
            "length",
            "target",
            "handle_data_len",
            "raw_result",
            "result",
            "target_desc",
            "f_sync",
            "f_localmem",
            "f_buffered"
        ]
    );
    assert!(text.contains(&format!("io_method {method}")), "{text}");

    // SIGKILL: no chance to remove the area.
    let area = PathBuf::from(first["path"].as_str().unwrap());
    child.kill();
    assert!(area.exists(), "a killed process leaves its area");
    let doc = aios_json(publish.path(), &[]);
    assert_eq!(doc["processes"], serde_json::json!([]), "{doc}");
    let stale = doc["stale"].as_array().unwrap();
    assert_eq!(stale.len(), 1, "{doc}");
    assert_eq!(stale[0]["pid"], pid);
    assert_eq!(stale[0]["reason"], "the process is gone");
    assert_eq!(stale[0]["removed"], true);
    assert!(!area.exists(), "the stale area is removed");
    let doc = aios_json(publish.path(), &[]);
    assert_eq!(doc["stale"], serde_json::json!([]), "reported once: {doc}");

    // --pid of a process that publishes nothing: exit 2 and the fix.
    let out = pageio_bounded(
        &[
            "aios",
            "--pid",
            &pid.to_string(),
            "--aio-publish-dir",
            publish.path().to_str().unwrap(),
        ],
        30,
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("process {pid} publishes no AIO state"))
            && err.contains("--aio-publish-dir"),
        "{err}"
    );
}

mod sync {
    #[test]
    fn cross_process_view_and_stale_cleanup() {
        super::with_watchdog("sync", super::WATCHDOG_SECS, || {
            super::cross_process_view_and_stale_cleanup(pageio::IoMethodKind::Sync)
        });
    }
}

mod worker {
    #[test]
    fn cross_process_view_and_stale_cleanup() {
        super::with_watchdog("worker", super::WATCHDOG_SECS, || {
            super::cross_process_view_and_stale_cleanup(pageio::IoMethodKind::Worker)
        });
    }
}

mod io_uring {
    #[test]
    fn cross_process_view_and_stale_cleanup() {
        super::with_watchdog("io_uring", super::WATCHDOG_SECS, || {
            super::cross_process_view_and_stale_cleanup(pageio::IoMethodKind::IoUring)
        });
    }
}

#[test]
fn plain_watch_prints_one_line_per_process_per_interval() {
    with_watchdog("plain watch", WATCHDOG_SECS, || {
        let publish = tempfile::tempdir().unwrap();
        let child = ChildReader::start(IoMethodKind::Worker, publish.path());
        wait_until_published(publish.path(), child.pid());
        let out = pageio_bounded(
            &[
                "aios",
                "--watch",
                "--interval",
                "0.2",
                "--count",
                "3",
                "--pid",
                &child.pid().to_string(),
                "--aio-publish-dir",
                publish.path().to_str().unwrap(),
            ],
            30,
        );
        assert_eq!(out.status.code(), Some(0));
        let text = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        let prefix = format!("pid={} io_method=worker ios_per_s=", child.pid());
        for line in &lines {
            assert!(line.starts_with(&prefix), "{line}");
            assert!(line.contains(" workers="), "{line}");
        }
        // The first line has no rate yet; the next ones do.
        assert!(lines[0].contains("ios_per_s=- "), "{}", lines[0]);
        assert!(!lines[2].contains("ios_per_s=- "), "{}", lines[2]);
    });
}

/// A process that calls exit(3) while its `Aio` is alive leaves no area behind.
#[test]
fn exit_removes_the_area_of_a_live_aio() {
    with_watchdog("exit", WATCHDOG_SECS, || {
        let publish = tempfile::tempdir().unwrap();
        let status = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "child_process_entry",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, format!("exit:{}", publish.path().display()))
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
        let left: Vec<_> = std::fs::read_dir(publish.path()).unwrap().collect();
        assert!(left.is_empty(), "{left:?}");
    });
}

#[test]
fn the_publish_settings_are_flags_of_every_engine_command() {
    let dir = tempfile::tempdir().unwrap();
    let (bench, bench2) = (dir.path().join("bench"), dir.path().join("bench2"));
    let mut args = common::small_io_bench_args(&bench);
    args.extend(["--aio-publish", "maybe"]);
    let out = pageio_bounded(&args, 60);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("aio_publish") && err.contains("--aio-publish"),
        "{err}"
    );
    let publish = tempfile::tempdir().unwrap();
    let mut args = common::small_io_bench_args(&bench2);
    args.extend(["--aio-publish-dir", publish.path().to_str().unwrap()]);
    let out = pageio_bounded(&args, 60);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_dir(publish.path()).unwrap().count(),
        0,
        "removed at the end"
    );
}

#[test]
fn bad_flags_exit_2_with_the_fix() {
    for (args, expect) in [
        (vec!["aios", "--interval", "0"], "--interval"),
        (vec!["aios", "--interval", "nan"], "--interval"),
        (vec!["aios", "--watch", "--json"], "--json"),
    ] {
        let out = pageio_bounded(&args, 30);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expect), "{args:?}: {err}");
    }
}

fn wait_until_published(dir: &Path, pid: i32) {
    let start = Instant::now();
    loop {
        let doc = aios_json(dir, &[]);
        if child_entry(&doc, pid)
            .is_some_and(|e| e["sample"]["counters"]["ios_issued"].as_u64() > Some(0))
        {
            return;
        }
        assert!(
            start.elapsed() < SEEN_WITHIN,
            "the child never published: {doc}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

// ---------------------------------------------------------------------------------------
// --watch in a real terminal (tmux)
// ---------------------------------------------------------------------------------------

/// A tmux server of our own (its own socket), killed when dropped.
struct Tmux {
    socket: String,
}

impl Tmux {
    /// Starts a detached 160x48 session running a plain bash with a known prompt, or `None`
    /// (after a SKIP line) when tmux is missing outside CI. Under CI a missing tmux fails.
    fn start(name: &str) -> Option<Tmux> {
        if Command::new("tmux").arg("-V").output().is_err() {
            assert!(
                std::env::var_os("CI").is_none(),
                "tmux is not installed; scripts/test.sh installs it (apt-get install -y tmux)"
            );
            println!("SKIP {name}: tmux is not installed (apt-get install -y tmux)");
            return None;
        }
        let tmux = Tmux {
            socket: format!("pageio-aios-test-{}-{name}", std::process::id()),
        };
        let status = tmux
            .command()
            .args(["new-session", "-d", "-s", "aios", "-x", "160", "-y", "48"])
            .args([
                "env",
                "PS1=aios-test$ ",
                "TERM=xterm-256color",
                "bash",
                "--norc",
                "--noprofile",
            ])
            .status()
            .unwrap();
        assert!(status.success());
        Some(tmux)
    }

    fn command(&self) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.socket]);
        c
    }

    fn send_keys(&self, keys: &[&str]) {
        let status = self
            .command()
            .args(["send-keys", "-t", "aios"])
            .args(keys)
            .status()
            .unwrap();
        assert!(status.success());
    }

    fn capture(&self) -> String {
        let out = self
            .command()
            .args(["capture-pane", "-p", "-t", "aios"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A tmux format variable of the pane (`alternate_on`, `cursor_flag`, …).
    fn pane(&self, format: &str) -> String {
        let out = self
            .command()
            .args(["display-message", "-p", "-t", "aios", format])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Waits until the screen satisfies `ok`; fails with the screen after `bound`.
    fn wait_for(&self, what: &str, bound: Duration, ok: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.capture();
            if ok(&screen) {
                return screen;
            }
            assert!(
                start.elapsed() < bound,
                "{what}: not shown within {bound:?}:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.command().arg("kill-server").status();
    }
}

/// The line of the screen with the process's rates.
fn rates_line(screen: &str) -> String {
    screen
        .lines()
        .find(|l| l.contains("I/Os/s"))
        .unwrap_or_default()
        .to_string()
}

/// After the view ended: the shell's prompt on the normal screen, no leftover of the view,
/// the cursor shown, the terminal in canonical mode with echo.
fn assert_terminal_clean(tmux: &Tmux) -> String {
    let after = tmux.wait_for("the shell again", Duration::from_secs(10), |s| {
        s.trim_end().ends_with("aios-test$")
    });
    assert_eq!(tmux.pane("#{alternate_on}"), "0", "alternate screen left");
    assert_eq!(tmux.pane("#{cursor_flag}"), "1", "cursor shown");
    for leftover in ["io_generation", "I/Os/s", "depth histogram", "q quits"] {
        assert!(
            !after.contains(leftover),
            "{leftover} left on the screen:\n{after}"
        );
    }
    // A raw-mode terminal left behind would be saved and restored by bash around the next
    // command: stty run from the prompt shows what the program left.
    tmux.send_keys(&[
        "stty -a | tr ' ' '\\n' | grep -x -e icanon -e echo | tr '\\n' ,; echo",
        "Enter",
    ]);
    tmux.wait_for("stty after the watch", Duration::from_secs(10), |s| {
        s.contains("icanon,echo,") || s.contains("echo,icanon,")
    });
    after
}

/// `pageio aios --watch` under tmux: columns and changing values on the screen, then
/// `quit_key` ends it and the terminal is the shell's again.
fn watch_under_tmux_quits_cleanly(quit_key: &'static str) {
    let Some(tmux) = Tmux::start(if quit_key == "q" { "q" } else { "ctrl-c" }) else {
        return;
    };
    let publish = tempfile::tempdir().unwrap();
    let child = ChildReader::start(IoMethodKind::Worker, publish.path());
    wait_until_published(publish.path(), child.pid());
    tmux.wait_for("the prompt", Duration::from_secs(10), |s| {
        s.contains("aios-test$")
    });
    let command = format!(
        "{} aios --watch --interval 0.3 --aio-publish-dir {}",
        env!("CARGO_BIN_EXE_pageio"),
        publish.path().display()
    );
    tmux.send_keys(&[&command, "Enter"]);
    let columns = [
        "io_id",
        "io_generation",
        "state",
        "operation",
        "target_desc",
        "I/Os/s",
        "MB/s",
        "in flight",
        "depth histogram",
        "worker pool",
    ];
    let first = tmux.wait_for("the watch view", Duration::from_secs(20), |s| {
        columns.iter().all(|c| s.contains(c)) && !rates_line(s).contains(" - ")
    });
    assert_eq!(
        tmux.pane("#{alternate_on}"),
        "1",
        "the view is on the alternate screen"
    );
    assert!(first.contains(&format!("pid {}", child.pid())), "{first}");
    let before = rates_line(&first);
    tmux.wait_for("a changed value", Duration::from_secs(20), |s| {
        let now = rates_line(s);
        !now.is_empty() && now != before
    });

    tmux.send_keys(&[quit_key]);
    assert_terminal_clean(&tmux);
}

#[test]
fn watch_under_tmux_quits_on_q() {
    with_watchdog("tmux q", WATCHDOG_SECS, || {
        watch_under_tmux_quits_cleanly("q")
    });
}

#[test]
fn watch_under_tmux_quits_on_ctrl_c() {
    with_watchdog("tmux C-c", WATCHDOG_SECS, || {
        watch_under_tmux_quits_cleanly("C-c")
    });
}

/// A panic inside the view (injected at the third refresh; test builds only) restores the
/// terminal before the panic message prints, so the message stays readable.
#[test]
fn watch_under_tmux_restores_the_terminal_on_panic() {
    with_watchdog("tmux panic", WATCHDOG_SECS, || {
        let Some(tmux) = Tmux::start("panic") else {
            return;
        };
        let publish = tempfile::tempdir().unwrap();
        tmux.wait_for("the prompt", Duration::from_secs(10), |s| {
            s.contains("aios-test$")
        });
        let command = format!(
            "PAGEIO_AIOS_PANIC_AT_REFRESH=3 {} aios --watch --interval 0.2 --aio-publish-dir {}; echo status=$?",
            env!("CARGO_BIN_EXE_pageio"),
            publish.path().display()
        );
        tmux.send_keys(&[&command, "Enter"]);
        // The command's own end first: right after the keys are sent the screen may still
        // end with the prompt they were typed at, before the view has even started.
        // (Its echo, not the typed `status=$?`: a line that starts with status and a digit.)
        tmux.wait_for("the command's exit status", Duration::from_secs(20), |s| {
            s.lines().any(|l| {
                l.strip_prefix("status=")
                    .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
            })
        });
        let after = assert_terminal_clean(&tmux);
        assert!(after.contains("injected panic at refresh 3"), "{after}");
        assert!(after.contains("status=101"), "{after}");
    });
}

/// A watch whose terminal goes away (the window closed, the multiplexer killed) ends within
/// a few seconds instead of spinning on a terminal nobody sees, whether the hang-up is
/// seen before or inside the terminal library's read; it is the session leader here, as
/// under `ssh host pageio aios --watch`.
#[test]
fn watch_ends_when_its_terminal_hangs_up() {
    with_watchdog("tmux hang-up", WATCHDOG_SECS, || {
        let Some(tmux) = Tmux::start("hangup") else {
            return;
        };
        let publish = tempfile::tempdir().unwrap();
        let pid_file = publish.path().join("watch.pid");
        tmux.wait_for("the prompt", Duration::from_secs(10), |s| {
            s.contains("aios-test$")
        });
        let command = format!(
            "echo $$ > {}; exec {} aios --watch --interval 0.2 --aio-publish-dir {}",
            pid_file.display(),
            env!("CARGO_BIN_EXE_pageio"),
            publish.path().display()
        );
        tmux.send_keys(&[&command, "Enter"]);
        let start = Instant::now();
        while tmux.pane("#{alternate_on}") != "1" {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "the watch did not start:\n{}",
                tmux.capture()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let pid: i32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        /// Kills the watch if the test fails while it still runs, so no process is left
        /// spinning behind a failed run.
        struct KillOnDrop(i32);
        impl Drop for KillOnDrop {
            fn drop(&mut self) {
                // SAFETY: kill has no memory effects; the pid is the watch this test started.
                unsafe { libc::kill(self.0, libc::SIGKILL) };
            }
        }
        let _kill = KillOnDrop(pid);
        let proc_dir = std::path::PathBuf::from(format!("/proc/{pid}"));
        assert!(proc_dir.exists(), "the watch runs as pid {pid}");
        drop(tmux); // kill-server: the terminal hangs up
        let hung_up = Instant::now();
        // A zombie (state Z) has ended too: only its parent has not reaped it yet.
        let running = || {
            std::fs::read_to_string(proc_dir.join("stat"))
                .map(|stat| {
                    stat.rsplit_once(") ")
                        .is_some_and(|(_, rest)| !rest.starts_with('Z'))
                })
                .unwrap_or(false)
        };
        while running() {
            assert!(
                hung_up.elapsed() < Duration::from_secs(10),
                "pid {pid} still runs {:?} after its terminal hung up",
                hung_up.elapsed()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    });
}

/// The header of an area published for this test process (pid and start time its own).
fn own_area_header() -> pageio::aio::publish::AreaHeader {
    let me = std::process::id() as i32;
    pageio::aio::publish::AreaHeader {
        pid: me,
        start_time_ticks: pageio::aio::publish::process_start_time(me).unwrap(),
        program: "aios_cli".into(),
        io_method: "sync".into(),
        effective_io_concurrency: 16,
        io_combine_limit_blocks: 16,
        io_max_concurrency: 64,
        direct_io: false,
        io_workers: 0,
        instance: 0,
    }
}

/// Another user's area (mode 0600) is counted, not warned about: the view is of the
/// processes this user may see.
#[test]
fn other_users_areas_are_counted_not_reported_as_damaged() {
    if !common::have_root("other_users_areas_are_counted_not_reported_as_damaged") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let publish = tempfile::tempdir().unwrap();
    std::fs::set_permissions(publish.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let header = own_area_header();
    let _area = pageio::aio::publish::TestAreaWriter::create(publish.path(), &header).unwrap();
    let dir = publish.path().to_str().unwrap();
    let out =
        common::pageio_bounded_unprivileged(&["aios", "--json", "--aio-publish-dir", dir], 30);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["not_permitted"], 1, "{doc}");
    assert_eq!(doc["unreadable"], serde_json::json!([]), "{doc}");
    assert_eq!(doc["processes"], serde_json::json!([]), "{doc}");
    let out = common::pageio_bounded_unprivileged(&["aios", "--aio-publish-dir", dir], 30);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("1 more process of other users"), "{text}");
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Root sees it.
    let doc = aios_json(publish.path(), &[]);
    assert_eq!(doc["processes"].as_array().unwrap().len(), 1, "{doc}");
    assert_eq!(doc["not_permitted"], 0);
}

/// In a shared directory (mode 1777, as /dev/shm), another user makes a file named like this
/// process's area and truncates and rewrites it 1,000 times while `pageio aios` reads the
/// directory: every run exits 0 (never a signal), and the file is reported as untrusted and
/// skipped; with `--trust-others` it is read, as a live area or a damaged one.
#[test]
fn another_users_look_alike_area_never_crashes_the_reader() {
    if !common::have_root("another_users_look_alike_area_never_crashes_the_reader") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    with_watchdog("look-alike", WATCHDOG_SECS, || {
        let publish = tempfile::tempdir().unwrap();
        std::fs::set_permissions(publish.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
        let me = std::process::id() as i32;
        let header = own_area_header();
        let elsewhere = tempfile::tempdir().unwrap();
        let writer =
            pageio::aio::publish::TestAreaWriter::create(elsewhere.path(), &header).unwrap();
        let image = publish.path().join("image");
        std::fs::copy(writer.path(), &image).unwrap();
        std::fs::set_permissions(&image, std::fs::Permissions::from_mode(0o644)).unwrap();
        let area = publish.path().join(format!("pageio-aios.{me}.0"));
        // As nobody: create the look-alike, then truncate it and write it back 1,000 times.
        let script = format!(
            "cat '{img}' > '{area}' && echo ready && i=0; while [ $i -lt 1000 ]; do \
             truncate -s 100 '{area}'; truncate -s 0 '{area}'; cat '{img}' > '{area}'; i=$((i+1)); done",
            img = image.display(),
            area = area.display()
        );
        let mut other = Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "sh",
                "-c",
            ])
            .arg(&script)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut ready = String::new();
        use std::io::BufRead;
        std::io::BufReader::new(other.stdout.take().unwrap())
            .read_line(&mut ready)
            .unwrap();
        assert_eq!(ready.trim(), "ready");
        let dir = publish.path().to_str().unwrap();
        let (mut runs, mut live, mut damaged) = (0u32, 0u32, 0u32);
        loop {
            let finished = other.try_wait().unwrap().is_some();
            for trust in [false, true] {
                let mut args = vec!["aios", "--json", "--aio-publish-dir", dir];
                if trust {
                    args.push("--trust-others");
                }
                let out = pageio_bounded(&args, 30);
                runs += 1;
                assert_eq!(
                    out.status.code(),
                    Some(0),
                    "run {runs} {args:?}: {:?} {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                );
                let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
                if trust {
                    let seen = doc["processes"].as_array().unwrap().len();
                    let bad = doc["unreadable"].as_array().unwrap().len();
                    assert_eq!(seen + bad, 1, "{doc}");
                    live += seen as u32;
                    damaged += bad as u32;
                } else {
                    assert_eq!(doc["processes"], serde_json::json!([]), "{doc}");
                    let untrusted = doc["untrusted"].as_array().unwrap();
                    assert_eq!(untrusted.len(), 1, "{doc}");
                    assert_eq!(untrusted[0]["owner_uid"], 65534, "{doc}");
                    assert_eq!(untrusted[0]["path"], area.to_str().unwrap(), "{doc}");
                    let error = untrusted[0]["error"].as_str().unwrap();
                    assert!(error.contains("skipped unread"), "{error}");
                }
            }
            if finished {
                break;
            }
        }
        assert!(other.wait().unwrap().success());
        assert!(runs >= 4, "{runs} runs");
        // The last run came after the writer's last full write.
        assert!(live >= 1, "{live} live of {runs} runs ({damaged} damaged)");
        // In text, one warning naming the file, its owner and the flag.
        let out = pageio_bounded(&["aios", "--aio-publish-dir", dir], 30);
        assert_eq!(out.status.code(), Some(0));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        for part in [
            area.to_str().unwrap(),
            "owned by uid 65534",
            "--trust-others reads it",
        ] {
            assert!(stderr.contains(part), "{part}: {stderr}");
        }
        drop(writer);
    });
}

/// `pageio aios | head -c 1`: a reader that goes away before the output is written ends the
/// command quietly (exit 0, nothing on stderr), not with "Broken pipe" or a panic.
#[test]
fn a_closed_stdout_ends_quietly() {
    use std::io::Read;
    let publish = tempfile::tempdir().unwrap();
    // Enough areas, each with rows, that the output is far larger than a pipe's buffer.
    let mut header = own_area_header();
    let rows: Vec<pageio::aio::AioRow> = (0..64)
        .map(|io_id| pageio::aio::AioRow {
            pid: header.pid,
            io_id,
            io_generation: 1,
            state: "SUBMITTED",
            operation: "readv",
            off: io_id as u64 * 131072,
            length: 131072,
            target: "smgr",
            handle_data_len: 16,
            raw_result: None,
            result: "UNKNOWN",
            target_desc: format!(
                "blocks {}..{} in file \"base/5/16384\"",
                io_id * 16,
                io_id * 16 + 15
            ),
            f_sync: false,
            f_localmem: false,
            f_buffered: true,
        })
        .collect();
    let mut writers = Vec::new();
    for instance in 0..40 {
        header.instance = instance;
        let w = pageio::aio::publish::TestAreaWriter::create(publish.path(), &header).unwrap();
        w.publish(
            1,
            Default::default(),
            &[0; pageio::aio::publish::DEPTH_BUCKETS],
            &rows,
        );
        writers.push(w);
    }
    for args in [&["--json"][..], &[][..]] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_pageio"))
            .arg("aios")
            .args(args)
            .arg("--aio-publish-dir")
            .arg(publish.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = [0u8; 1];
        child.stdout.take().unwrap().read_exact(&mut first).unwrap();
        // The read end is closed here (dropped): every later write fails with EPIPE.
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(0), "{args:?}: {status:?} {stderr}");
        assert_eq!(stderr, "", "{args:?}");
    }
    drop(writers);
}
