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

/// The full-screen loop.
fn watch_screen<V: View, E: std::fmt::Display>(
    interval: Duration,
    count: Option<u64>,
    mut sample: impl FnMut() -> Result<V, E>,
) -> Result<u64, Box<dyn std::error::Error>> {
    let guard = ScreenGuard::enter()?;
    let mut terminal = Terminal::new(CrosstermBackend::new(std::io::stdout()))?;
    terminal.clear()?;
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
            match event::poll(left.min(POLL_SLICE)) {
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
    drop(terminal);
    drop(guard);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

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
