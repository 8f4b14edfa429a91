//! A bound on tests that could hang, shared by both crates' integration tests.

/// Runs `body` on its own thread and fails the test if it has not finished within
/// `bound_secs`: a test of something that could deadlock (waits on I/O, worker pools, walks
/// over on-disk links) must fail with a message instead of hanging the suite. A panic in
/// `body` is re-raised with its own message.
pub fn with_watchdog<T: Send + 'static>(
    name: &str,
    bound_secs: u64,
    body: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let worker = std::thread::Builder::new()
        .name(format!("watchdog:{name}"))
        .spawn(move || {
            let result = body();
            // The receiver is gone only when the watchdog already fired.
            let _ = done_tx.send(());
            result
        })
        .expect("spawn the watched test thread");
    match done_rx.recv_timeout(std::time::Duration::from_secs(bound_secs)) {
        Ok(()) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => match worker.join() {
            Ok(result) => result,
            Err(panic) => std::panic::resume_unwind(panic),
        },
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("{name}: did not finish within {bound_secs} s (hang?)")
        }
    }
}
