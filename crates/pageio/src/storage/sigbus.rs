//! # The SIGBUS guard of read-only file mappings
//!
//! Two readers walk page-cache-resident relation files where they lie instead of copying
//! them: `verify` (checksums, `verify::mapped`) and buffered sequential scans
//! (`scan::in_place`). Both map a window of a file read-only ([`map_window`]) and read it
//! under this guard ([`with_guard`]), because touching a mapped page the kernel cannot serve
//! — past the end of a file truncated since the mapping was made, or a page evicted and then
//! unreadable — raises SIGBUS, which by default kills the process.
//!
//! ```text
//!   with_guard(window, f)
//!     arm: this thread's WINDOW = [start, end), FAULTED = false
//!     f(bytes) ── a load faults inside WINDOW ─► handler: private zero pages over
//!      │                                         [faulting page, end), FAULTED = true,
//!      │                                         the load completes (reads zeros)
//!      ▼
//!     disarm ─► FAULTED ? Err(Faulted) : Ok(f's result)
//! ```
//!
//! The handler is process-wide (installed once, on first use) but acts only on faults inside
//! the window the faulting thread has armed; any other SIGBUS goes to the handler installed
//! before (Rust's own, which reports stack overflows) or to the default action. A caller
//! never uses what `f` computed from a faulted window: zeros from the guard must not reach an
//! answer (verify reads the window again; a scan reports the file and block).
//!
//! A mapping read by two threads (a serial scan's, which its map-ahead thread verifies
//! ahead of it) is read by the second under [`with_shared_guard`]: its fault sets a flag the
//! first checks, before the zeros go in.
//!
//! Worked example: a scan maps blocks 0..2047 of `base/5/16399` (16 MB), and another process
//! truncates the file to 10 blocks. The first load of block 10 faults; the handler maps zeros
//! over blocks 10..2047 and flags the thread; `with_guard` returns `Err(Faulted)` and the
//! scan's message names the file and block 10.

use std::cell::Cell;
use std::sync::atomic::{compiler_fence, AtomicBool, Ordering};
use std::sync::{Once, OnceLock};

use crate::storage::page_cache::page_size;
use crate::storage::{MapAccess, MappedRegion};

/// An access to the guarded window faulted: what was computed from it is meaningless.
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
    // this borrow). Its contents are the file's, which its readers (verify, a scan) read from
    // a stopped cluster; if a page faults, the guard replaces it with zeros and the caller
    // throws the result away (see the module header).
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

/// Runs `f` as [`with_guard`] does, for a `window` that other threads read too: a fault
/// sets `poisoned` before the zeros are mapped over the rest of the window, so that a
/// reader of the same mapping who checks `poisoned` after reading knows it may have read
/// zeros ([`with_guard`] alone tells only the faulting thread).
pub(crate) fn with_shared_guard<R>(
    window: &MappedRegion,
    poisoned: &AtomicBool,
    f: impl FnOnce(&[u8]) -> R,
) -> Result<R, Faulted> {
    POISON.with(|p| p.set(poisoned as *const AtomicBool));
    let r = with_guard(window, f);
    POISON.with(|p| p.set(std::ptr::null()));
    r
}

thread_local! {
    /// The flag [`with_shared_guard`] sets on a fault, before the zeros go in; null when
    /// none. Const initialised and without a destructor, like `WINDOW`.
    static POISON: Cell<*const AtomicBool> = const { Cell::new(std::ptr::null()) };
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
        let poison = POISON.with(|p| p.get());
        if !poison.is_null() {
            // SAFETY: with_shared_guard set the pointer from a reference that outlives its
            // call, during which alone this fault can happen; an atomic store is
            // async-signal-safe.
            unsafe { (*poison).store(true, Ordering::SeqCst) };
        }
        // Replace the rest of the window with private zero pages: the faulting load then
        // completes, and so does every later one, without another signal per page. mmap is
        // a plain system call, safe in a signal handler on Linux.
        // SAFETY: [page, end) lies inside the window this thread armed; another thread reads
        // it only if this one armed it through with_shared_guard, whose flag is set above, so
        // that reader never takes these zeros for data. MAP_FIXED replaces exactly those
        // pages.
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
