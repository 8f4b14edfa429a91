//! The terminal loop of `pageio aios --watch`, shared by every source of samples.
//!
//! A watch samples something (the areas pageio processes publish, or a PostgreSQL server's
//! `pg_aios` and `pg_stat_io`) every `interval` and shows each sample. Where it shows it
//! depends on stdout:
//!
//! ```text
//!   stdout is a terminal ──► raw mode + alternate screen, ratatui draws View::draw
//!                            between samples: keys (q, Esc, Ctrl-C quit), resize redraws
//!   otherwise (a pipe, a file, a CI log)
//!                        ──► View::plain_lines printed once per sample, flushed;
//!                            Ctrl-C / SIGTERM, `count` or a closed pipe stop it
//! ```
//!
//! ## Leaving the terminal clean
//!
//! A full-screen program that dies in raw mode leaves a shell that echoes nothing and a
//! screen that is not the user's. So the terminal is put back (alternate screen left, raw
//! mode off, cursor shown) on every way out: a normal return (the guard's `Drop`), an error
//! from the sampler (the same), a panic anywhere in the loop (a panic hook restores the
//! terminal *before* the panic message prints, so the message lands on the normal screen
//! and stays readable), and SIGTERM / SIGHUP (caught while the watch runs: the handler only
//! sets a flag, the loop sees it within one [`POLL_SLICE`] and returns normally). Ctrl-C
//! in raw mode is a key, not a signal, and quits like `q`. Restoring twice is harmless:
//! the guard remembers whether it already did.
//!
//! ## Timing
//!
//! Samples are taken on a fixed schedule (`start + n × interval`), not `interval` after the
//! previous draw, so a slow sample does not make the rate columns drift; a sample that
//! overruns its slot is followed at once by the next, never by a burst of catch-up samples.
//! `count` bounds the refreshes shown; without it the loop runs until a key or a signal.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use crossterm::{cursor, execute, terminal};
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;

/// What one refresh shows.
pub trait View {
    /// Draws the full-screen view (ratatui).
    fn draw(&self, frame: &mut ratatui::Frame);
    /// The plain lines printed per interval when stdout is not a terminal.
    fn plain_lines(&self) -> Vec<String>;
}

/// Longest the loop sleeps or waits for a key before looking at the stop flag and the
/// clock again: short enough that SIGTERM and Ctrl-C end the watch without a visible delay,
/// long enough that an idle watch costs nothing measurable.
pub const POLL_SLICE: Duration = Duration::from_millis(50);

/// Longest a stop signal may go unanswered in the full-screen loop before the process ends
/// anyway: the bound on a wait inside the terminal library (see [`wait_for_input`]).
pub const STOP_GRACE: Duration = Duration::from_secs(2);

/// Shortest interval accepted: below it the sampling itself (reading every published area,
/// or a round trip to a server) becomes the load being watched.
pub const MIN_INTERVAL: Duration = Duration::from_millis(10);

/// Set by the signal handler (SIGINT, SIGTERM, SIGHUP) while a watch runs.
static STOP_REQUESTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop_signal(_signal: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    STOP_REQUESTED.store(true, Ordering::SeqCst);
}

/// The signals that end a watch, and the handlers they had before it.
struct StopSignals {
    previous: Vec<(libc::c_int, libc::sigaction)>,
}

impl StopSignals {
    const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

    fn install() -> StopSignals {
        STOP_REQUESTED.store(false, Ordering::SeqCst);
        let mut previous = Vec::new();
        for signal in Self::SIGNALS {
            // SAFETY: a zeroed sigaction is a valid "no flags, empty mask" value; the handler
            // only stores to an atomic, which is async-signal-safe; `old` is a valid place
            // for the kernel to write the previous action.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_stop_signal as *const () as libc::sighandler_t;
                libc::sigemptyset(&mut action.sa_mask);
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(signal, &action, &mut old) == 0 {
                    previous.push((signal, old));
                }
            }
        }
        StopSignals { previous }
    }
}

impl Drop for StopSignals {
    fn drop(&mut self) {
        for (signal, old) in &self.previous {
            // SAFETY: `old` is the action the kernel returned for this signal, restored as is.
            unsafe {
                libc::sigaction(*signal, old, std::ptr::null_mut());
            }
        }
    }
}

/// The panic hook in force before the watch, put back when it ends.
type PanicHook = Box<dyn Fn(&std::panic::PanicHookInfo<'_>) + Sync + Send + 'static>;

/// Owns the terminal state while the full-screen view runs; puts it back on drop and from
/// the panic hook.
struct ScreenGuard {
    restored: Arc<AtomicBool>,
    previous_hook: Arc<Mutex<Option<PanicHook>>>,
}

/// Leaves the alternate screen, shows the cursor, turns raw mode off. Errors are ignored:
/// this runs on the way out (possibly during a panic) and each step is worth trying alone.
fn restore_terminal() {
    let mut stdout = std::io::stdout();
    let _ = execute!(stdout, terminal::LeaveAlternateScreen, cursor::Show);
    let _ = terminal::disable_raw_mode();
    let _ = stdout.flush();
}

impl ScreenGuard {
    fn enter() -> std::io::Result<ScreenGuard> {
        let restored = Arc::new(AtomicBool::new(false));
        let previous_hook: Arc<Mutex<Option<PanicHook>>> =
            Arc::new(Mutex::new(Some(std::panic::take_hook())));
        {
            let restored = restored.clone();
            let previous_hook = previous_hook.clone();
            std::panic::set_hook(Box::new(move |info| {
                if !restored.swap(true, Ordering::SeqCst) {
                    restore_terminal();
                }
                if let Some(hook) = previous_hook
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .as_ref()
                {
                    hook(info);
                }
            }));
        }
        let guard = ScreenGuard {
            restored,
            previous_hook,
        };
        // From here on the guard undoes whatever part succeeded.
        terminal::enable_raw_mode()?;
        execute!(
            std::io::stdout(),
            terminal::EnterAlternateScreen,
            cursor::Hide
        )?;
        Ok(guard)
    }
}

impl Drop for ScreenGuard {
    fn drop(&mut self) {
        if !self.restored.swap(true, Ordering::SeqCst) {
            restore_terminal();
        }
        // Put the previous hook back, unless a panic is running it right now (then the
        // process is unwinding and ours, which only forwards, is as good).
        if !std::thread::panicking() {
            let previous = self
                .previous_hook
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take();
            if let Some(previous) = previous {
                let _ = std::panic::take_hook();
                std::panic::set_hook(previous);
            }
        }
    }
}

/// Samples every `interval` and shows each sample: full screen on a terminal (q, Esc or
/// Ctrl-C quits), plain lines otherwise (Ctrl-C/SIGTERM or `count` stops). Restores the
/// terminal on every exit path, panics included. Returns the number of refreshes shown.
///
/// A sample that fails ends the watch with that error (after the terminal is restored).
pub fn watch<V: View, E: std::fmt::Display>(
    interval: std::time::Duration,
    count: Option<u64>,
    sample: impl FnMut() -> Result<V, E>,
) -> Result<u64, Box<dyn std::error::Error>> {
    if interval < MIN_INTERVAL {
        return Err(format!(
            "--interval must be at least {} s (the sampling itself would be the load)",
            MIN_INTERVAL.as_secs_f64()
        )
        .into());
    }
    if count == Some(0) {
        return Ok(0);
    }
    let _signals = StopSignals::install();
    if std::io::stdout().is_terminal() {
        watch_screen(interval, count, sample)
    } else {
        watch_plain(interval, count, sample, &mut std::io::stdout().lock())
    }
}

/// True once a stop signal arrived.
fn stop_requested() -> bool {
    STOP_REQUESTED.load(Ordering::SeqCst)
}

/// The plain loop: one block of lines per sample, flushed so a reader of the pipe sees it
/// at once.
fn watch_plain<V: View, E: std::fmt::Display>(
    interval: Duration,
    count: Option<u64>,
    mut sample: impl FnMut() -> Result<V, E>,
    out: &mut impl Write,
) -> Result<u64, Box<dyn std::error::Error>> {
    let start = Instant::now();
    let mut shown = 0u64;
    loop {
        if stop_requested() {
            return Ok(shown);
        }
        let view = sample().map_err(|e| e.to_string())?;
        let mut text = String::new();
        for line in view.plain_lines() {
            text.push_str(&line);
            text.push('\n');
        }
        if out
            .write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .is_err()
        {
            // The reader went away (`| head`): nothing more can be shown.
            return Ok(shown);
        }
        shown += 1;
        if count.is_some_and(|n| shown >= n) {
            return Ok(shown);
        }
        let next = next_deadline(start, interval, shown);
        while let Some(left) = next.checked_duration_since(Instant::now()) {
            if stop_requested() {
                return Ok(shown);
            }
            std::thread::sleep(left.min(POLL_SLICE));
        }
    }
}

/// When sample number `shown` (0-based) is due: the next slot of the fixed schedule after
/// now, so an overrun skips slots instead of bunching samples.
fn next_deadline(start: Instant, interval: Duration, shown: u64) -> Instant {
    let mut next = start + interval.saturating_mul(shown.min(u32::MAX as u64) as u32);
    let now = Instant::now();
    if next < now {
        let behind = now.duration_since(next).as_nanos() / interval.as_nanos().max(1);
        next += interval.saturating_mul((behind as u32).saturating_add(1));
    }
    next
}

/// What a key asks for.
fn is_quit_key(key: &KeyEvent) -> bool {
    if key.kind == KeyEventKind::Release {
        return false;
    }
    match key.code {
        KeyCode::Char('q') | KeyCode::Char('Q') | KeyCode::Esc => true,
        KeyCode::Char('c') | KeyCode::Char('C') => key.modifiers.contains(KeyModifiers::CONTROL),
        _ => false,
    }
}

/// What waiting for a key on the terminal found.
#[derive(Debug, PartialEq, Eq)]
enum Input {
    /// Nothing within the time given.
    Nothing,
    /// Bytes to read.
    Ready,
    /// The terminal is gone (its window closed, the ssh session dropped, the multiplexer
    /// killed): nothing will ever arrive, and nobody sees the screen.
    HungUp,
}

/// Waits up to `timeout` for input on the terminal descriptor `fd`, telling a hung-up
/// terminal from input. crossterm (0.28) reads a hung-up terminal in a loop that never ends
/// (each read returns 0 bytes), so it is asked for an event only when there are bytes.
fn wait_for_input(fd: std::os::fd::BorrowedFd<'_>, timeout: Duration) -> std::io::Result<Input> {
    use std::os::fd::AsRawFd;
    let mut pollfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let millis = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: `pollfd` is one initialised pollfd we own for the call, and the count is 1.
    let ready = unsafe { libc::poll(&mut pollfd, 1, millis) };
    if ready < 0 {
        let error = std::io::Error::last_os_error();
        return if error.kind() == std::io::ErrorKind::Interrupted {
            Ok(Input::Nothing)
        } else {
            Err(error)
        };
    }
    if ready == 0 {
        return Ok(Input::Nothing);
    }
    if pollfd.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
        return Ok(Input::HungUp);
    }
    Ok(Input::Ready)
}

/// The terminal crossterm reads keys from: standard input when it is a terminal, else
/// `/dev/tty` (as crossterm chooses).
enum KeySource {
    Stdin,
    Tty(std::fs::File),
}

impl KeySource {
    fn open() -> std::io::Result<KeySource> {
        if std::io::stdin().is_terminal() {
            Ok(KeySource::Stdin)
        } else {
            std::fs::File::open("/dev/tty").map(KeySource::Tty)
        }
    }

    fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        match self {
            // SAFETY: descriptor 0 stays open for the life of the process here (nothing
            // in pageio closes standard input), and the borrow does not outlive `self`.
            KeySource::Stdin => unsafe { std::os::fd::BorrowedFd::borrow_raw(0) },
            KeySource::Tty(file) => file.as_fd(),
        }
    }
}

/// Ends the process if a stop signal goes unanswered for [`STOP_GRACE`] while the screen
/// loop runs (the loop sets `done` when it returns): a hang-up that lands inside the
/// terminal library's read, between [`wait_for_input`] and the read, must not leave a
/// process spinning on a terminal nobody sees.
fn spawn_stop_watchdog(done: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        let mut stopped_at: Option<Instant> = None;
        while !done.load(Ordering::SeqCst) {
            if stop_requested() {
                let at = *stopped_at.get_or_insert_with(Instant::now);
                if at.elapsed() >= STOP_GRACE && !done.load(Ordering::SeqCst) {
                    restore_terminal();
                    std::process::exit(0);
                }
            }
            std::thread::sleep(POLL_SLICE);
        }
    });
}

/// The full-screen loop.
fn watch_screen<V: View, E: std::fmt::Display>(
    interval: Duration,
    count: Option<u64>,
    mut sample: impl FnMut() -> Result<V, E>,
) -> Result<u64, Box<dyn std::error::Error>> {
    let keys = KeySource::open()?;
    let guard = ScreenGuard::enter()?;
    let mut terminal = Terminal::new(CrosstermBackend::new(std::io::stdout()))?;
    terminal.clear()?;
    let done = Arc::new(AtomicBool::new(false));
    spawn_stop_watchdog(done.clone());
    let start = Instant::now();
    let mut shown = 0u64;
    let result: Result<u64, Box<dyn std::error::Error>> = 'watch: loop {
        if stop_requested() {
            break Ok(shown);
        }
        let view = match sample() {
            Ok(view) => view,
            Err(e) => break Err(e.to_string().into()),
        };
        if let Err(e) = terminal.draw(|frame| view.draw(frame)) {
            break Err(e.into());
        }
        shown += 1;
        if count.is_some_and(|n| shown >= n) {
            break Ok(shown);
        }
        let next = next_deadline(start, interval, shown);
        while let Some(left) = next.checked_duration_since(Instant::now()) {
            if stop_requested() {
                break 'watch Ok(shown);
            }
            match wait_for_input(keys.fd(), left.min(POLL_SLICE)) {
                Ok(Input::Nothing) => continue,
                Ok(Input::HungUp) => break 'watch Ok(shown),
                Ok(Input::Ready) => {}
                Err(e) => break 'watch Err(e.into()),
            }
            match event::poll(Duration::ZERO) {
                Ok(false) => {}
                Ok(true) => match event::read() {
                    Ok(Event::Key(key)) if is_quit_key(&key) => break 'watch Ok(shown),
                    Ok(Event::Resize(_, _)) => {
                        if let Err(e) = terminal.draw(|frame| view.draw(frame)) {
                            break 'watch Err(e.into());
                        }
                    }
                    Ok(_) => {}
                    Err(e) => break 'watch Err(e.into()),
                },
                Err(e) => break 'watch Err(e.into()),
            }
        }
    };
    done.store(true, Ordering::SeqCst);
    drop(terminal);
    drop(guard);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pipe's read end stands in for the terminal: empty is nothing, bytes are input,
    /// and with its write end closed it is hung up (POLLHUP), as a terminal whose other
    /// side went away.
    #[test]
    fn waiting_for_a_key_tells_input_from_a_hang_up() {
        use std::os::fd::{AsFd, FromRawFd, OwnedFd};
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors pipe writes.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: pipe returned two new descriptors that nothing else owns.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let short = Duration::from_millis(20);
        assert_eq!(wait_for_input(read.as_fd(), short).unwrap(), Input::Nothing);
        let mut writer = std::fs::File::from(write);
        writer.write_all(b"q").unwrap();
        assert_eq!(wait_for_input(read.as_fd(), short).unwrap(), Input::Ready);
        drop(writer);
        assert_eq!(wait_for_input(read.as_fd(), short).unwrap(), Input::HungUp);
    }

    struct Lines(Vec<String>);

    impl View for Lines {
        fn draw(&self, _frame: &mut ratatui::Frame) {}
        fn plain_lines(&self) -> Vec<String> {
            self.0.clone()
        }
    }

    #[test]
    fn plain_loop_prints_each_sample_and_stops_after_count() {
        let mut out = Vec::new();
        let mut n = 0;
        let shown = watch_plain(
            Duration::from_millis(10),
            Some(3),
            || -> Result<Lines, String> {
                n += 1;
                Ok(Lines(vec![format!("sample {n}")]))
            },
            &mut out,
        )
        .unwrap();
        assert_eq!(shown, 3);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "sample 1\nsample 2\nsample 3\n"
        );
    }

    #[test]
    fn a_failed_sample_ends_the_plain_loop_with_its_message() {
        let mut out = Vec::new();
        let err = watch_plain(
            Duration::from_millis(10),
            None,
            || -> Result<Lines, String> { Err("server went away".into()) },
            &mut out,
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "server went away");
        assert!(out.is_empty());
    }

    #[test]
    fn quit_keys() {
        let key = |code, modifiers| KeyEvent::new(code, modifiers);
        assert!(is_quit_key(&key(KeyCode::Char('q'), KeyModifiers::NONE)));
        assert!(is_quit_key(&key(KeyCode::Esc, KeyModifiers::NONE)));
        assert!(is_quit_key(&key(KeyCode::Char('c'), KeyModifiers::CONTROL)));
        assert!(!is_quit_key(&key(KeyCode::Char('c'), KeyModifiers::NONE)));
        assert!(!is_quit_key(&key(KeyCode::Char('x'), KeyModifiers::NONE)));
    }

    #[test]
    fn the_schedule_skips_slots_after_an_overrun_instead_of_bunching() {
        let interval = Duration::from_millis(100);
        let start = Instant::now() - Duration::from_millis(350);
        let next = next_deadline(start, interval, 1);
        // Slot 1 (100 ms) is long past; the next slot after now is 400 ms.
        assert_eq!(next, start + Duration::from_millis(400));
    }
}
