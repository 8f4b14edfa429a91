//! Buffer-pool refusals a user can meet: every buffer pinned, and huge_pages=on on a machine
//! without reserved huge pages. Both name the cause and the fix.

mod common;

use pageio::buffer::{BufferError, BufferPool, PageCheckOptions, Pinned};
use pageio::config::{HugePages, IoConfig, BLCKSZ};
use pageio::storage::RelFile;
use pageio::Aio;

/// Bound on each test: both finish in milliseconds; a pin or wait that never ends fails.
const WATCHDOG_SECS: u64 = 60;

#[test]
fn all_buffers_pinned_is_an_error_not_a_hang() {
    common::with_watchdog(
        "all_buffers_pinned_is_an_error_not_a_hang",
        WATCHDOG_SECS,
        all_buffers_pinned,
    );
}

fn all_buffers_pinned() {
    let dir = tempfile::tempdir().unwrap();
    let aio = Aio::new(IoConfig {
        shared_buffers_bytes: 16 * BLCKSZ,
        ..IoConfig::default()
    })
    .unwrap();
    let rel = RelFile::new(dir.path().join("1"));
    let mut backend = aio.backend().unwrap();
    backend
        .write_blocks(&rel, 0, pageio::aio::IoBuffer::zeroed(17 * BLCKSZ))
        .unwrap();
    let pool = BufferPool::new(&aio, PageCheckOptions::default()).unwrap();
    assert_eq!(pool.nbuffers(), 16);
    let id = pool.register(&rel);
    let pins: Vec<_> = (0..16)
        .map(|b| pool.read_buffer(&mut backend, id, b, None).unwrap())
        .collect();
    let err = pool.pin(id, 16, None).unwrap_err();
    assert!(
        matches!(err, BufferError::NoUnpinnedBuffers { nbuffers: 16 }),
        "{err:?}"
    );
    assert!(err.to_string().contains("raise shared_buffers"), "{err}");
    drop(pins);
    // With the pins gone the same block can be read.
    assert!(matches!(
        pool.pin(id, 16, None).unwrap(),
        Pinned::NeedsRead(_)
    ));
}

#[test]
fn huge_pages_on_without_reserved_pages_names_the_sysctl() {
    common::with_watchdog(
        "huge_pages_on_without_reserved_pages_names_the_sysctl",
        WATCHDOG_SECS,
        huge_pages_on_without_reserved_pages,
    );
}

fn huge_pages_on_without_reserved_pages() {
    let reserved: u64 = std::fs::read_to_string("/proc/sys/vm/nr_hugepages")
        .map(|s| s.trim().parse().unwrap_or(0))
        .unwrap_or(0);
    let aio = Aio::new(IoConfig {
        huge_pages: HugePages::On,
        shared_buffers_bytes: 64 << 20,
        ..IoConfig::default()
    })
    .unwrap();
    if reserved >= 32 {
        let pool = BufferPool::new(&aio, PageCheckOptions::default()).unwrap();
        assert!(pool.huge_pages_in_use());
        return;
    }
    let err = BufferPool::new(&aio, PageCheckOptions::default()).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("huge pages")
            && msg.contains("vm.nr_hugepages")
            && msg.contains("huge_pages = try"),
        "{msg}"
    );
    // `try` falls back to normal pages and says so.
    let aio = Aio::new(IoConfig {
        huge_pages: HugePages::Try,
        shared_buffers_bytes: 64 << 20,
        ..IoConfig::default()
    })
    .unwrap();
    assert!(!BufferPool::new(&aio, PageCheckOptions::default())
        .unwrap()
        .huge_pages_in_use());
}

/// Unpinning a buffer nobody pinned: debug builds (the suite's profile) panic on the broken
/// invariant, naming the buffer.
#[cfg(debug_assertions)]
#[test]
#[should_panic(expected = "unpin of unpinned buffer 3")]
fn unpinning_an_unpinned_buffer_panics_in_debug_builds() {
    let aio = Aio::new(IoConfig {
        shared_buffers_bytes: 16 * BLCKSZ,
        ..IoConfig::default()
    })
    .unwrap();
    let pool = BufferPool::new(&aio, PageCheckOptions::default()).unwrap();
    pool.unpin(3);
}
