//! The publisher: the thread that samples one `Aio` and writes its area.

use super::*;

/// Areas of this process not yet removed, for the `atexit` hook.
static LIVE_AREAS: Mutex<Vec<CString>> = Mutex::new(Vec::new());

/// The next instance number of this process.
static NEXT_INSTANCE: AtomicU64 = AtomicU64::new(0);

static ATEXIT: Once = Once::new();

extern "C" fn remove_areas_at_exit() {
    // try_lock: a thread that exits the process while another holds the lock must not hang.
    if let Ok(paths) = LIVE_AREAS.try_lock() {
        for path in paths.iter() {
            // SAFETY: a NUL-terminated path we own.
            unsafe {
                libc::unlink(path.as_ptr());
            }
        }
    }
}

fn register_live(path: &Path) {
    ATEXIT.call_once(|| {
        // SAFETY: registers a function that only unlinks paths; runs at exit(3).
        unsafe {
            libc::atexit(remove_areas_at_exit);
        }
    });
    if let Ok(c) = CString::new(path.as_os_str().as_bytes()) {
        LIVE_AREAS.lock().unwrap_or_else(|p| p.into_inner()).push(c);
    }
}

fn unregister_live(path: &Path) {
    let bytes = path.as_os_str().as_bytes();
    LIVE_AREAS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|c| c.as_bytes() != bytes);
}

/// The command line of this process, arguments separated by spaces.
fn own_command_line() -> String {
    match std::fs::read("/proc/self/cmdline") {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            text.trim_end_matches('\0').replace('\0', " ")
        }
        Err(_) => std::env::args().collect::<Vec<_>>().join(" "),
    }
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write; CLOCK_MONOTONIC always exists.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The publisher of one `Aio`: its area and the thread that fills it. Dropping it stops the
/// thread and removes the file.
pub(in crate::aio) struct Publisher {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Publisher {
    /// Creates the area and starts the thread.
    pub(in crate::aio) fn start(
        core: Weak<AioCore>,
        config: &crate::IoConfig,
        io_method: &str,
    ) -> std::io::Result<Publisher> {
        // SAFETY: getpid has no preconditions.
        let pid = unsafe { libc::getpid() };
        let header = AreaHeader {
            pid,
            start_time_ticks: process_start_time(pid).unwrap_or(0),
            program: own_command_line(),
            io_method: io_method.to_string(),
            effective_io_concurrency: config.effective_io_concurrency as u64,
            io_combine_limit_blocks: config.io_combine_limit_blocks as u64,
            io_max_concurrency: config.io_max_concurrency as u64,
            direct_io: config.direct_io,
            io_workers: config.io_workers as u64,
            instance: NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed),
        };
        let writer = AreaWriter::create(&config.aio_publish_dir, &header)?;
        let path = writer.path.clone();
        register_live(&path);
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("pageio-aios".into())
                .spawn(move || publisher_loop(core, writer, stop))
        };
        match thread {
            Ok(thread) => Ok(Publisher {
                path,
                stop,
                thread: Some(thread),
            }),
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                unregister_live(&path);
                Err(e)
            }
        }
    }

    /// The area's file.
    pub(in crate::aio) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            // The last `Aio` may be dropped by the publisher thread itself (it holds a
            // strong reference for the length of one publish); it cannot join itself, and
            // it exits right after this.
            if thread.thread().id() != std::thread::current().id() {
                thread.thread().unpark();
                let _ = thread.join();
            }
        }
        let _ = std::fs::remove_file(&self.path);
        unregister_live(&self.path);
    }
}

/// In-flight I/Os: handles given to the method and not yet completed.
fn in_flight_depth(core: &AioCore) -> (u32, u32) {
    let backends = core.backends.read().unwrap_or_else(|p| p.into_inner());
    let depth = backends
        .iter()
        .flat_map(|b| b.handles.iter())
        .filter(|h| h.state() == HandleState::Submitted)
        .count();
    (depth as u32, backends.len() as u32)
}

fn publisher_loop(core: Weak<AioCore>, writer: AreaWriter, stop: Arc<AtomicBool>) {
    let mut histogram = [0u64; DEPTH_BUCKETS];
    let mut samples = 0u64;
    let mut publishes = 0u64;
    let mut next_publish = Instant::now();
    // Depth samples in a row that found nothing in flight, and how many depth-sample
    // intervals the last sleep lasted (the weight of the next sample).
    let mut zero_streak = 0u64;
    let mut weight = 1u64;
    while !stop.load(Ordering::Acquire) {
        let Some(core) = core.upgrade() else { break };
        let (depth, backends) = in_flight_depth(&core);
        // A sample stands for the time since the previous one, so the histogram stays
        // weighted by time when the loop sleeps longer (below).
        histogram[depth_bucket(depth)] += weight;
        samples += weight;
        zero_streak = if depth == 0 { zero_streak + weight } else { 0 };
        let now = Instant::now();
        if now >= next_publish {
            let backend_counters = backend_counters(&core);
            let counters = backend_counters
                .iter()
                .fold(IoCounters::default(), |total, b| total + b.counters);
            let rows = crate::aio::Aio { core: core.clone() }.snapshot();
            let pool = core.method.worker_pool().map(|p| PublishedPool {
                workers: p.workers as u64,
                busy_workers: p.workers.saturating_sub(p.idle_workers) as u64,
                min_workers: p.min_workers as u64,
                max_workers: p.max_workers as u64,
                adaptive: p.adaptive,
                queued_ios: p.queued_ios as u64,
            });
            publishes += 1;
            let bytes = encode_sample(&SampleSource {
                sampled_at_ns: monotonic_ns(),
                publishes,
                counters,
                pool,
                depth_now: depth,
                depth_samples: samples,
                depth_histogram: &histogram,
                backends,
                backend_counters: &backend_counters,
                rows: &rows,
            });
            writer.publish(&bytes);
            next_publish = now + PUBLISH_INTERVAL;
        }
        drop(core);
        // Nothing in flight for a whole publish interval (an idle process): sample once per
        // publish interval until something is in flight again. At most one interval at the
        // start of a burst is then counted at the depth of its one sample.
        let idle = zero_streak >= SAMPLES_PER_PUBLISH;
        let sleep = if idle {
            PUBLISH_INTERVAL
        } else {
            DEPTH_SAMPLE_INTERVAL
        };
        weight = if idle { SAMPLES_PER_PUBLISH } else { 1 };
        std::thread::park_timeout(sleep);
    }
}

fn backend_counters(core: &AioCore) -> Vec<PublishedBackend> {
    core.backends
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .map(|b| PublishedBackend {
            id: b.id,
            tid: b.tid.load(Ordering::Relaxed),
            active: b.active.load(Ordering::Relaxed),
            counters: b.counters.snapshot(),
        })
        .collect()
}

/// Writes samples into an area file for tests: the same seqlock writer the publisher
/// thread uses, without an `Aio`.
#[doc(hidden)]
pub struct TestAreaWriter {
    writer: AreaWriter,
}

impl TestAreaWriter {
    /// Creates `dir/pageio-aios.<pid>.<instance>` with `header`.
    pub fn create(dir: &Path, header: &AreaHeader) -> std::io::Result<TestAreaWriter> {
        Ok(TestAreaWriter {
            writer: AreaWriter::create(dir, header)?,
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.writer.path
    }

    /// Publishes a sample built from `counters`, `histogram` and `rows`.
    pub fn publish(
        &self,
        publishes: u64,
        counters: IoCounters,
        histogram: &[u64; DEPTH_BUCKETS],
        rows: &[AioRow],
    ) {
        let bytes = encode_sample(&SampleSource {
            sampled_at_ns: monotonic_ns(),
            publishes,
            counters,
            pool: None,
            depth_now: rows.len() as u32,
            depth_samples: histogram.iter().sum(),
            depth_histogram: histogram,
            backends: 1,
            backend_counters: &[],
            rows,
        });
        self.writer.publish(&bytes);
    }
}
