//! `pageio`: PostgreSQL data-directory tools on the pageio engine.
//!
//! One module per subcommand; `settings` holds the engine flags they share. Errors print as
//! one `pageio: error: …` line naming the cause and the fix, and exit with status 2 (status
//! 1 is kept for "ran fine and found something bad", as pg_checksums uses it).

// The doc comments of the argument structs are clap's --help texts, written for a terminal:
// `[database.][schema.]table` and `OUT/<dataset>/` are meant literally there, not as links
// or HTML.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

mod advise;
mod aios;
mod bench;
mod checksums;
mod datadir;
mod gen;
mod io_bench;
mod live;
mod methods;
mod scan;
mod settings;
mod tables;
mod verify;

/// Writes a command's output to stdout at once. A reader that went away (`| head`) is not
/// an error: the command goes on to its own exit status (a verdict such as advise's BAD or
/// io-bench's bad page must not turn into a quiet 0), where `print!` would panic.
pub(crate) fn write_stdout(text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// Refuses a `--pgdata` that is not a directory before anything reads it, naming what it is
/// instead (missing, a dangling link and its target, a file).
pub(crate) fn check_pgdata(flag: &str, path: &std::path::Path) -> Result<(), String> {
    match pageio::storage::directory_problem(path) {
        None => Ok(()),
        Some(problem) => Err(format!(
            "{flag} {}: the path {problem}; give the data directory of a PostgreSQL cluster (the one holding PG_VERSION)",
            path.display()
        )),
    }
}

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use pageio::config::Term;

/// PostgreSQL 18's asynchronous I/O, as a standalone engine and tools for data directories.
#[derive(Debug, Parser)]
#[command(name = "pageio", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once per process; boxing variants would only add noise.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Command {
    /// Which io_methods work on this machine, and why not
    Methods(methods::MethodsArgs),
    /// Generate a relation of PostgreSQL pages, then read it with every io_method,
    /// verifying every checksum, and compare throughput
    IoBench(io_bench::IoBenchArgs),
    /// Write the published benchmark data sets (uniform, linear, cyclic, pgbench_accounts)
    /// as PostgreSQL heap and btree files with checksums
    Gen(gen::GenArgs),
    /// Verify the page checksums of a stopped PostgreSQL 18 cluster, like
    /// pg_checksums --check, with asynchronous I/O on all cores
    Verify(verify::VerifyArgs),
    /// Check, enable or disable the data checksums of a stopped PostgreSQL 18 cluster, like
    /// pg_checksums, with asynchronous reads and writes on all cores
    Checksums(checksums::ChecksumsArgs),
    /// Scan a table (seq, bitmap or index) and report like EXPLAIN (ANALYZE, BUFFERS, IO)
    Scan(scan::ScanArgs),
    /// The PostgreSQL 18 AIO experiments: every scan type over a selectivity sweep, every
    /// io_method, cold and warm, with the device limit and PostgreSQL 18's own results
    Bench(bench::BenchArgs),
    /// List a stopped cluster's tables like psql's \dt+, read from its catalogs offline
    Tables(tables::TablesArgs),
    /// Check this machine and a cluster's configuration for PostgreSQL 17/18/19: memory,
    /// kernel, storage, io_uring and settings, with the fixes (container-aware)
    Advise(advise::AdviseArgs),
    /// The I/O in flight in pageio processes, in pg_aios's columns; --watch for a live
    /// view like top
    Aios(aios::AiosArgs),
}

/// Bytes of the most recent allocation the system allocator refused (0: none yet).
static FAILED_ALLOCATION_BYTES: AtomicUsize = AtomicUsize::new(0);

/// How many allocations the system allocator refused. With more than one, several threads
/// may be printing Rust's "memory allocation of N bytes failed" at once.
static FAILED_ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

/// Set by the first thread in [`on_abort`]; any other waits there for the process to end.
static ABORTING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Records a refused allocation of `bytes`.
fn record_failed_allocation(bytes: usize) {
    FAILED_ALLOCATION_BYTES.store(bytes, Ordering::Relaxed);
    FAILED_ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
}

/// The system allocator, remembering the size of a refused allocation.
///
/// Large allocations (the buffer pool, I/O buffers, the index build) are fallible and fail
/// with an error naming the setting or the size. Any other allocation that fails makes Rust
/// abort (status 134, a core dump); [`on_abort`] turns that, when an allocation failed, into
/// the CLI's error status 2 and one line saying what to do.
struct RecordingAllocator;

// SAFETY: every method forwards to the system allocator unchanged; the only addition is an
// atomic store when it returns null.
unsafe impl GlobalAlloc for RecordingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { System.alloc(layout) };
        if p.is_null() {
            record_failed_allocation(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { System.alloc_zeroed(layout) };
        if p.is_null() {
            record_failed_allocation(layout.size());
        }
        p
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if p.is_null() {
            record_failed_allocation(new_size);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: RecordingAllocator = RecordingAllocator;

/// SIGABRT handler: after a refused allocation, exit with status 2 and a message instead of
/// dumping core; any other abort keeps its default action. Only async-signal-safe calls.
///
/// When memory runs out, several threads may fail at once, each printing Rust's "memory
/// allocation of N bytes failed" and aborting. The first thread here silences standard
/// error for the others (it now points at /dev/null) and writes the message, on its own
/// line, to a copy of the original, so it is the last line the user sees; the others wait
/// here until the process ends.
extern "C" fn on_abort(_signal: libc::c_int) {
    let bytes = FAILED_ALLOCATION_BYTES.load(Ordering::Relaxed);
    if bytes == 0 {
        // SAFETY: restoring the default action and re-raising are async-signal-safe.
        unsafe {
            libc::signal(libc::SIGABRT, libc::SIG_DFL);
            libc::raise(libc::SIGABRT);
        }
        return;
    }
    if ABORTING.swap(true, Ordering::SeqCst) {
        loop {
            // SAFETY: pause(2) is async-signal-safe; the first thread ends the process.
            unsafe {
                libc::pause();
            }
        }
    }
    // SAFETY: dup(2), open(2) and dup2(2) are async-signal-safe; the path is a C string.
    let out = unsafe {
        let saved = libc::dup(2);
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY);
        if saved >= 0 && null >= 0 {
            libc::dup2(null, 2);
        }
        if saved >= 0 {
            saved
        } else {
            2
        }
    };
    let mut line = [0u8; 256];
    let mut len = 0;
    let mut push = |s: &[u8]| {
        for &b in s {
            if len < line.len() {
                line[len] = b;
                len += 1;
            }
        }
    };
    if FAILED_ALLOCATIONS.load(Ordering::Relaxed) > 1 {
        // Another thread's message may have been cut off mid-line.
        push(b"\n");
    }
    push(b"pageio: error: out of memory: an allocation of ");
    let mut digits = [0u8; 20];
    let mut n = bytes;
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    push(&digits[at..]);
    push(b" bytes failed; lower shared_buffers (--shared-buffers) or the data size, or raise the memory limit (ulimit -v)\n");
    // SAFETY: write(2) and _exit(2) are async-signal-safe; `line` outlives the call.
    unsafe {
        libc::write(out, line.as_ptr().cast(), len);
        libc::_exit(2);
    }
}

/// The page of `docs/` each subcommand's `--help` ends by pointing to.
const DOC_PAGES: [(&str, &str); 9] = [
    ("scan", "docs/SCAN.md"),
    ("verify", "docs/VERIFY.md"),
    ("checksums", "docs/CHECKSUMS.md"),
    ("tables", "docs/TABLES.md"),
    ("advise", "docs/ADVISE.md"),
    ("aios", "docs/AIOS.md"),
    ("bench", "docs/BENCH.md"),
    ("gen", "docs/GEN.md"),
    ("io-bench", "docs/IO-BENCH.md"),
];

/// The command line: [`Cli`], each subcommand's help ending with its page of `docs/`.
fn command() -> clap::Command {
    let mut cmd = Cli::command();
    for (name, page) in DOC_PAGES {
        cmd = cmd.mut_subcommand(name, |sub| {
            let line = format!("Documentation: {page} (in the pageio source tree)");
            let after = match sub.get_after_help() {
                Some(text) => format!("{text}\n\n{line}"),
                None => line.clone(),
            };
            let after_long = sub
                .get_after_long_help()
                .map(|text| format!("{text}\n\n{line}"));
            let sub = sub.after_help(after);
            match after_long {
                Some(text) => sub.after_long_help(text),
                None => sub,
            }
        });
    }
    cmd
}

/// Whether a panic is `print!`'s on a closed stdout ("failed printing to stdout: Broken
/// pipe (os error 32)"): the reader went away (`| head`), not a bug.
fn is_closed_stdout_panic(info: &std::panic::PanicHookInfo<'_>) -> bool {
    let payload = info.payload();
    let message = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or_default();
    message.starts_with("failed printing to stdout")
        && message.contains(&format!("(os error {})", libc::EPIPE))
}

/// Ends the process quietly with status 0 when `println!` panics because stdout was closed
/// (`pageio tables … | head -1`), as a command returning a BrokenPipe error does; any
/// other panic is reported as before.
fn end_quietly_on_closed_stdout() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if is_closed_stdout_panic(info) {
            std::process::exit(0);
        }
        report(info);
    }));
}

fn main() {
    // Library messages name the caller's inputs as terms; here they are flags.
    pageio::config::set_term_spelling(flag_spelling);
    // SAFETY: installing a handler that only calls async-signal-safe functions.
    unsafe {
        libc::signal(libc::SIGABRT, on_abort as *const () as libc::sighandler_t);
    }
    end_quietly_on_closed_stdout();
    let parsed = command()
        .try_get_matches()
        .and_then(|matches| Cli::from_arg_matches(&matches));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(e) => {
            // pg_checksums exits 1 on a usage error (an unknown option, a bad
            // --sync-method), and so does `pageio checksums`, its drop-in; the other
            // commands keep clap's 2. Help and version go to stdout and exit 0.
            if e.use_stderr() && std::env::args_os().nth(1).is_some_and(|a| a == "checksums") {
                let _ = e.print();
                std::process::exit(1);
            }
            e.exit()
        }
    };
    let result = match cli.command {
        Command::Methods(args) => methods::run(args),
        Command::Scan(args) => scan::run(args),
        Command::IoBench(args) => io_bench::run(args),
        Command::Gen(args) => gen::run(args),
        Command::Verify(args) => verify::run(args),
        Command::Checksums(args) => checksums::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Tables(args) => tables::run(args),
        Command::Advise(args) => advise::run(args),
        Command::Aios(args) => aios::run(args),
    };
    match result {
        Ok(code) => std::process::exit(code),
        // The reader of stdout went away (`| head`): it has what it wanted; end quietly.
        Err(e) if is_broken_pipe(e.as_ref()) => std::process::exit(0),
        Err(e) => {
            let message = e.to_string();
            eprintln!("pageio: error: {message}{}", flag_hint(&message));
            std::process::exit(2);
        }
    }
}

/// Whether an error is a write to a closed pipe, directly or through serde_json's writer.
fn is_broken_pipe(e: &(dyn std::error::Error + 'static)) -> bool {
    let broken = |kind: std::io::ErrorKind| kind == std::io::ErrorKind::BrokenPipe;
    e.downcast_ref::<std::io::Error>()
        .is_some_and(|io| broken(io.kind()))
        || e.downcast_ref::<serde_json::Error>()
            .and_then(serde_json::Error::io_error_kind)
            .is_some_and(broken)
}

/// The command-line spelling of the settings an error names. The library names settings as
/// PostgreSQL does (`shared_buffers`); on the command line they are flags
/// (`--shared-buffers`), so the CLI adds the flag unless the message already gives it.
fn flag_hint(message: &str) -> String {
    let is_word_char = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let flags: Vec<String> = pageio::config::SETTING_NAMES
        .iter()
        .filter(|name| {
            message.match_indices(*name).any(|(at, _)| {
                let before = message[..at].chars().next_back();
                let after = message[at + name.len()..].chars().next();
                !before.is_some_and(is_word_char) && !after.is_some_and(is_word_char)
            })
        })
        .map(|name| setting_flag(name))
        .filter(|flag| !message.contains(flag.as_str()))
        .collect();
    if flags.is_empty() {
        String::new()
    } else {
        format!(
            " (on the command line: {}, or --config FILE)",
            flags.join(", ")
        )
    }
}

/// The flag of a setting: `shared_buffers` is `--shared-buffers`.
fn setting_flag(name: &str) -> String {
    format!("--{}", name.replace('_', "-"))
}

/// The command-line spelling of a term the library's messages name: the flag (and value)
/// that gives it. Installed at start-up, so every library message made afterwards names
/// flags; the library itself speaks of the concepts ([`Term::concept`]).
fn flag_spelling(term: Term) -> String {
    match term {
        Term::Where => "--where".to_string(),
        Term::Select => "--select".to_string(),
        Term::SeqScan => "--kind seq".to_string(),
        Term::IndexByName => "--index NAME".to_string(),
        Term::Jobs => "--jobs".to_string(),
        Term::Setting(name) => setting_flag(name),
        Term::EnableChecksums => "--enable".to_string(),
        Term::DataDirectory => "--pgdata".to_string(),
        Term::AdviseDataDirectory => "advise --pgdata".to_string(),
        Term::OutputDirectory => "--out".to_string(),
        Term::OnlineCheck => "--online".to_string(),
    }
}

/// The error type of every subcommand: a message for the user.
pub type CliResult = Result<i32, Box<dyn std::error::Error>>;

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::collections::BTreeSet;

    use crate::settings::{command_settings, SETTINGS};

    /// The flags listed under "Settings:" in `help`, and each one's help text.
    fn settings_in_help(help: &str) -> Vec<(String, String)> {
        let Some((_, section)) = help.split_once("\nSettings:\n") else {
            return Vec::new();
        };
        let mut flags: Vec<(String, String)> = Vec::new();
        for line in section.lines() {
            // Long help separates the arguments by blank lines; the next heading ends them.
            if line.is_empty() {
                continue;
            }
            if !line.starts_with(' ') {
                break;
            }
            let trimmed = line.trim_start();
            if let Some(flag) = trimmed.strip_prefix("--") {
                let name = flag.split([' ', '=']).next().unwrap_or_default();
                let rest = flag[name.len()..].to_string();
                flags.push((format!("--{name}"), rest));
            } else if let Some(last) = flags.last_mut() {
                last.1.push(' ');
                last.1.push_str(trimmed);
            }
        }
        flags
    }

    #[test]
    fn each_subcommands_help_lists_exactly_the_settings_it_reads_with_its_defaults() {
        let mut cmd = super::command();
        cmd.build();
        let names: Vec<String> = cmd
            .get_subcommands()
            .map(|s| s.get_name().to_string())
            .filter(|name| name != "help")
            .collect();
        assert_eq!(names.len(), 10, "{names:?}");
        for name in &names {
            let sub = cmd.find_subcommand_mut(name).unwrap();
            let help = sub.render_long_help().to_string();
            let listed = settings_in_help(&help);
            let Some(reads) = command_settings(name) else {
                assert!(
                    listed.is_empty(),
                    "{name} takes no engine settings: {listed:?}"
                );
                continue;
            };
            let mut expected: Vec<String> = SETTINGS
                .iter()
                .filter(|s| reads.uses.contains(&s.name))
                .map(|s| format!("--{}", s.flag))
                .collect();
            expected.push("--config".into());
            let flags: Vec<String> = listed.iter().map(|(f, _)| f.clone()).collect();
            assert_eq!(flags, expected, "{name}");
            for s in SETTINGS.iter().filter(|s| reads.uses.contains(&s.name)) {
                let default = reads
                    .defaults
                    .iter()
                    .find(|(n, _)| *n == s.name)
                    .map_or(s.default, |(_, d)| *d);
                let (_, text) = listed
                    .iter()
                    .find(|(f, _)| *f == format!("--{}", s.flag))
                    .unwrap();
                assert!(
                    text.ends_with(&format!("[default: {default}]")),
                    "{name} --{}: {text}",
                    s.flag
                );
            }
        }
        // The cases the listing exists for.
        let mut help = |name: &str| {
            cmd.find_subcommand_mut(name)
                .unwrap()
                .render_long_help()
                .to_string()
        };
        assert!(!help("checksums").contains("--seq-read-ahead"));
        assert!(!help("gen").contains("--seq-read-ahead"));
        assert!(help("checksums").contains("[default: auto]"));
        assert!(help("scan").contains("--seq-read-ahead"));
    }

    /// The settings a library defaults function asks `chosen` about.
    fn asked(apply: impl FnOnce(&dyn Fn(&str) -> bool)) -> BTreeSet<String> {
        let names = RefCell::new(BTreeSet::new());
        apply(&|name: &str| {
            names.borrow_mut().insert(name.to_string());
            false
        });
        names.into_inner()
    }

    #[test]
    fn every_setting_a_command_reads_is_one_of_its_flags() {
        let uses = |command: &str| -> BTreeSet<String> {
            command_settings(command)
                .unwrap()
                .uses
                .iter()
                .map(|s| s.to_string())
                .collect()
        };
        // verify's and checksums' defaults, buffered and direct.
        for direct_io in [false, true] {
            let config = pageio::IoConfig {
                direct_io,
                ..pageio::IoConfig::default()
            };
            let read = asked(|chosen| {
                pageio::verify::verify_config(config.clone(), 4, chosen);
            });
            assert!(!read.is_empty());
            for command in ["verify", "checksums"] {
                assert!(read.is_subset(&uses(command)), "{command}: {read:?}");
            }
        }
        // scan's defaults, for every kind.
        for kind in [
            pageio::scan::ScanKind::Seq,
            pageio::scan::ScanKind::Bitmap,
            pageio::scan::ScanKind::Index,
        ] {
            let read = asked(|chosen| {
                pageio::scan::scan_config(pageio::IoConfig::default(), kind, chosen);
            });
            assert!(!read.is_empty());
            assert!(read.is_subset(&uses("scan")), "{kind}: {read:?}");
        }
        // Each command's own `is_set` questions.
        for (command, source) in [
            ("tables", include_str!("tables.rs")),
            ("scan", include_str!("scan.rs")),
            ("verify", include_str!("verify.rs")),
            ("checksums", include_str!("checksums.rs")),
            ("gen", include_str!("gen.rs")),
            ("io-bench", include_str!("io_bench.rs")),
            ("bench", include_str!("bench/mod.rs")),
        ] {
            for (at, _) in source.match_indices("is_set(\"") {
                let name = source[at + 8..].split('"').next().unwrap();
                assert!(uses(command).contains(name), "{command} reads {name}");
            }
        }
        assert!(include_str!("tables.rs").contains("is_set(\"shared_buffers\")"));
    }

    #[test]
    fn flag_hint_names_the_flags_of_the_settings_in_a_message() {
        assert_eq!(
            super::flag_hint(
                "could not map 1 bytes for shared_buffers: ENOMEM; lower shared_buffers"
            ),
            " (on the command line: --shared-buffers, or --config FILE)"
        );
        assert_eq!(super::flag_hint("io_max_combine_limit is not ours"), "");
        assert_eq!(super::flag_hint("use --direct-io off (direct_io)"), "");
    }

    #[test]
    fn library_terms_are_spelled_as_flags() {
        use pageio::config::Term;
        assert_eq!(super::flag_spelling(Term::Where), "--where");
        assert_eq!(super::flag_spelling(Term::SeqScan), "--kind seq");
        assert_eq!(super::flag_spelling(Term::IndexByName), "--index NAME");
        assert_eq!(
            super::flag_spelling(Term::Setting("io_method")),
            "--io-method"
        );
        assert_eq!(
            super::flag_spelling(Term::AdviseDataDirectory),
            "advise --pgdata"
        );
        // A message spelled for the command line gets no second hint for a flag it names.
        let message = format!(
            "use {} worker, or raise the limit",
            super::flag_spelling(Term::Setting("io_method"))
        );
        assert_eq!(super::flag_hint(&message), "");
    }
}
