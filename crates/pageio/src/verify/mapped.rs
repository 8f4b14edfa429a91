//! Checking page-cache-resident data in place: read-only mapping (the storage layer's
//! [`MappedRegion`]), SIGBUS guard (the residency probe, `cachestat(2)`, is
//! `storage::page_cache::residency`).
//!
//! # Problem
//!
//! When the cluster is already in the page cache, reading it is a memory copy: `pread`
//! copies every byte from the page cache into our buffer, and then the checksum reads it
//! again. Checksumming the page cache's own pages through a read-only mapping skips the
//! copy, at the price of page-table work instead: every 4 kB page is mapped on first touch
//! and unmapped afterwards. On the benchmark machine (4.7 GB cached, AVX2 checksum, two
//! scanners) that took 0.17–0.18 s against 0.26–0.27 s reading in the published runs, and
//! 0.29 s against 0.305 s (one scanner: 0.40 against 0.47 s) at a busier moment; the copy
//! always cost more than the mappings. See `docs/BENCHMARKS.md`, "pageio verify".
//!
//! A mapping is the wrong tool for data that is not cached: every miss is a synchronous page
//! fault, one read-around at a time, which is exactly the queue-depth-one behaviour the AIO
//! subsystem exists to avoid. So a window is checked in place only when the kernel says all
//! of it is resident; otherwise it goes through the AIO reads.
//!
//! # Mechanism
//!
//! ```text
//!   window of WINDOW_BYTES (16 MB, or less at the end of a file)
//!     │ within the size fstat(2) reports now, whole blocks only? ── no ─► AIO reads
//!     │ cachestat(2): every page of the range cached? ──────────── no ─► AIO reads
//!     │   (ENOSYS on kernels before 6.5: mmap, then mincore(2) instead)
//!     │   (EPERM: the caller neither owns nor may write the file, so the kernel will not
//!     │    say, and mincore would not either ─────────────────────────────► AIO reads)
//!     ▼
//!   mmap(PROT_READ, MAP_SHARED) on the O_RDONLY descriptor
//!     ▼
//!   checksum every page straight from the mapping, with this thread's SIGBUS guard armed;
//!   pages are mapped as they are touched, 16 per fault (the kernel's fault-around)
//!     │ a fault inside the window that cannot be served (file truncated, or a page
//!     │ evicted since cachestat and unreadable now) → the handler maps zero pages over the
//!     │ rest of the window and flags the thread → the window's results are discarded
//!     │                                                         ─── flagged ─► AIO reads
//!     ▼
//!   munmap; results recorded exactly as a completed read's would be
//! ```
//!
//! `MADV_POPULATE_READ` (map the whole window up front, reporting unreadable pages as an
//! error rather than SIGBUS) was tried and dropped: it maps page by page through
//! `get_user_pages`, which made mapped windows slower than reading them.
//!
//! Nothing is ever written: the mapping is `PROT_READ` on a descriptor opened `O_RDONLY`
//! (the kernel refuses `PROT_WRITE` on it), and zero pages mapped by the guard are private
//! anonymous memory. The AIO path re-reads a window that failed here, so the error a user
//! sees (errno, short read, file and block) is the one the read path produces.
//!
//! ## Why the SIGBUS guard exists, and what it does not cover
//!
//! Touching a mapped page beyond the end of a file, or one the kernel cannot read back,
//! raises SIGBUS, which by default kills the process. The window is mapped only within the
//! size `fstat` reported just before and only when all of it was cached, so this needs the
//! file to shrink, or a cached page to be evicted and then fail to read, in the millisecond
//! or so it takes to checksum a window. A cluster that verify accepts is shut down, so
//! nothing truncates its files; the guard makes even that case a clean fallback instead of a
//! crash. It is process-wide (installed once, on first use) but acts only on faults inside
//! the window the faulting thread has armed; any other SIGBUS is passed to the handler that
//! was installed before (Rust's own, which reports stack overflows) or to the default action.
//!
//! Data read through the mapping could in principle change while we read it (another
//! process writing the file); that is the same race a `pread` of a file being written has,
//! and verify refuses running clusters for this reason. A window whose guard fired is
//! discarded whole, so zeros from the guard never reach a report.
//!
//! # Worked example
//!
//! `base/5/16399` is 1 GB and fully cached. Its first window, bytes 0..16 MB, is within the
//! file, cachestat reports 4096 of 4096 pages cached, and 2048 pages are checksummed as
//! blocks 0..2047 straight from the mapping, with no copy. Drop the page cache halfway
//! through: the next window reports 0 cached pages and becomes 16 AIO reads of 1 MB (or
//! 128 of 128 kB, per `io_combine_limit`), checksummed where they complete.

use std::cell::Cell;
use std::sync::atomic::{compiler_fence, Ordering};
use std::sync::{Once, OnceLock};

use crate::storage::page_cache::page_size;
use crate::storage::{MapAccess, MappedRegion};

/// The window's checksums were interrupted by SIGBUS: discard them and read the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Faulted;

/// Maps `len_bytes` at `offset_bytes` (a multiple of the page size) of `fd`, read-only: the
/// storage layer's one mapping type, [`MappedRegion`].
pub(crate) fn map_window(
    fd: i32,
    offset_bytes: u64,
    len_bytes: usize,
) -> std::io::Result<MappedRegion> {
    debug_assert!(offset_bytes.is_multiple_of(page_size() as u64));
    debug_assert!(len_bytes > 0);
    MappedRegion::file(fd, offset_bytes, len_bytes, MapAccess::ReadOnly)
}

/// Runs `f` on the bytes of `window` (a [`map_window`] mapping) with this thread's SIGBUS
/// guard armed for it. Returns [`Faulted`] if any access faulted; `f`'s result is then
/// meaningless (part of what it saw was zeros) and is dropped.
pub(crate) fn with_guard<R>(
    window: &MappedRegion,
    f: impl FnOnce(&[u8]) -> R,
) -> Result<R, Faulted> {
    install_guard();
    let start = window.as_ptr() as usize;
    WINDOW.with(|w| w.set((start, start + window.len_bytes())));
    FAULTED.with(|x| x.set(false));
    // The handler reads WINDOW: it must be set before the first access to the mapping,
    // and the compiler must not move those accesses above it.
    compiler_fence(Ordering::SeqCst);
    // SAFETY: the window is a PROT_READ mapping of len_bytes, alive until it drops (after
    // this borrow). Its contents are the file's, which nobody writes while verify runs (see
    // the module header); if a page faults, the guard replaces it with zeros and the result
    // is thrown away.
    let bytes =
        unsafe { std::slice::from_raw_parts(window.as_ptr() as *const u8, window.len_bytes()) };
    let r = f(bytes);
    compiler_fence(Ordering::SeqCst);
    WINDOW.with(|w| w.set((0, 0)));
    if FAULTED.with(|x| x.replace(false)) {
        Err(Faulted)
    } else {
        Ok(r)
    }
}

thread_local! {
    /// The mapped window this thread is reading, `[start, end)`; (0, 0) when none. Const
    /// initialised and without a destructor, so reading it from a signal handler touches
    /// only the thread's static TLS block.
    static WINDOW: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
    /// Set by the handler when it replaced pages of this thread's window.
    static FAULTED: Cell<bool> = const { Cell::new(false) };
}

/// The SIGBUS disposition before ours, for faults that are not ours.
static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();
static INSTALL: Once = Once::new();

fn install_guard() {
    INSTALL.call_once(|| {
        // SAFETY: plain sigaction calls on zero-initialised structs; the handler is an
        // `extern "C"` function that only makes async-signal-safe system calls.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            let mut new: libc::sigaction = std::mem::zeroed();
            new.sa_sigaction = on_sigbus as *const () as usize;
            new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut new.sa_mask);
            // Record the old disposition first, so the handler can always find it.
            if libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut old) != 0 {
                return;
            }
            let _ = PREVIOUS.set(old);
            libc::sigaction(libc::SIGBUS, &new, std::ptr::null_mut());
        }
    });
}

extern "C" fn on_sigbus(signum: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let addr = unsafe { (*info).si_addr() } as usize;
    let (start, end) = WINDOW.with(|w| w.get());
    if start <= addr && addr < end {
        let page = addr & !(page_size() - 1);
        // Replace the rest of the window with private zero pages: the faulting load then
        // completes, and so does every later one, without another signal per page. mmap is
        // a plain system call, safe in a signal handler on Linux.
        // SAFETY: [page, end) lies inside this thread's own mapped window, which nothing else
        // uses; MAP_FIXED replaces exactly those pages.
        let p = unsafe {
            libc::mmap(
                page as *mut libc::c_void,
                end - page,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if p != libc::MAP_FAILED {
            FAULTED.with(|x| x.set(true));
            return;
        }
    }
    // Not ours: hand it to whoever had SIGBUS before, or restore the default action so the
    // faulting instruction, executed again on return, ends the process as it would have.
    let previous = PREVIOUS.get();
    match previous {
        Some(p) if p.sa_sigaction != libc::SIG_DFL && p.sa_sigaction != libc::SIG_IGN => {
            // SAFETY: the previous handler was installed with this signature (SA_SIGINFO) or
            // the one-argument one; we call it as it expects.
            unsafe {
                if p.sa_flags & libc::SA_SIGINFO != 0 {
                    let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                        std::mem::transmute(p.sa_sigaction);
                    f(signum, info, ctx);
                } else {
                    let f: extern "C" fn(libc::c_int) = std::mem::transmute(p.sa_sigaction);
                    f(signum);
                }
            }
        }
        _ => {
            // SAFETY: resetting a disposition to SIG_DFL is async-signal-safe.
            unsafe {
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(signum, &dfl, std::ptr::null_mut());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::page_cache::{residency, Residency};
    use std::io::Write;
    use std::os::unix::io::AsRawFd;

    fn file_of(len_bytes: usize) -> (tempfile::NamedTempFile, std::fs::File) {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        let data: Vec<u8> = (0..len_bytes).map(|i| (i % 251) as u8).collect();
        f.write_all(&data).unwrap();
        f.flush().unwrap();
        let ro = std::fs::File::open(f.path()).unwrap();
        (f, ro)
    }

    #[test]
    fn resident_after_write_and_mapping_reads_the_file() {
        let len = 64 * 8192;
        let (_f, ro) = file_of(len);
        // Just written, so cached; as the owner we may ask.
        let r = residency(ro.as_raw_fd(), 0, len);
        assert_ne!(r, Residency::NotAll);
        let m = map_window(ro.as_raw_fd(), 0, len).unwrap();
        assert!(m.all_resident());
        let sum = with_guard(&m, |b| b.iter().map(|&x| x as u64).sum::<u64>()).unwrap();
        let expect: u64 = (0..len).map(|i| (i % 251) as u64).sum();
        assert_eq!(sum, expect);
    }

    #[test]
    fn truncation_under_a_mapping_is_caught_not_fatal() {
        let len = 64 * 8192;
        let (f, ro) = file_of(len);
        let m = map_window(ro.as_raw_fd(), 0, len).unwrap();
        // Shrink the file to 10 pages after mapping: touching page 10 and later raises
        // SIGBUS, which the guard must turn into Faulted.
        f.as_file().set_len(10 * 8192).unwrap();
        let r = with_guard(&m, |b| b.iter().map(|&x| x as u64).sum::<u64>());
        assert_eq!(r, Err(Faulted));
        // The guard is disarmed again: a clean window afterwards is fine.
        let (_g, ro2) = file_of(8192);
        let m2 = map_window(ro2.as_raw_fd(), 0, 8192).unwrap();
        assert!(with_guard(&m2, |b| b.len()).is_ok());
    }
}
