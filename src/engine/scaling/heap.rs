//! A counting global allocator: the heap bytes live now and the most live since the
//! last reset, so the scaling view can report the peak memory a kernel call *measured*
//! rather than a figure computed from its shapes.
//!
//! It only counts where a binary installs it. `src/main.rs` does, for the `attnviz`
//! binary:
//!
//! ```ignore
//! #[global_allocator]
//! static HEAP: attnviz::engine::scaling::heap::CountingAlloc = CountingAlloc;
//! ```
//!
//! and so do the scaling test binaries (`tests/tui_views_scaling*.rs`). Elsewhere (e.g. `cargo test --lib`) nothing is
//! counted, [`installed`] says so, and the runner reports "not measured" instead of a
//! number.
//!
//! Cost: every allocation and free does one relaxed `fetch_add`/`fetch_sub`; an
//! allocation that raises the live total above the peak also does a `fetch_max`. The
//! counters are process-wide: allocations by other threads (the UI drawing frames) land
//! in them too, a few kilobytes against the megabytes a measured call allocates.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// The system allocator with live and peak byte counters.
#[derive(Debug, Clone, Copy, Default)]
pub struct CountingAlloc;

fn grew(bytes: usize) {
    let now = LIVE.fetch_add(bytes, Relaxed) + bytes;
    if now > PEAK.load(Relaxed) {
        PEAK.fetch_max(now, Relaxed);
    }
}

fn shrank(bytes: usize) {
    LIVE.fetch_sub(bytes, Relaxed);
}

// SAFETY: every call is forwarded unchanged to `System`, which upholds GlobalAlloc's
// contract; the counters are only updated after a successful allocation and before a
// free, and never touch the memory.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same layout contract as ours.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same layout contract as ours.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        shrank(layout.size());
        // SAFETY: `ptr` came from `System` with this layout (we forward every alloc).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged; `ptr` came from `System` with `layout`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                grew(new_size - layout.size());
            } else {
                shrank(layout.size() - new_size);
            }
        }
        p
    }
}

/// True if this process allocates through [`CountingAlloc`]. A running Rust program
/// always holds some heap (its arguments, the main thread's name), so the live count is
/// zero exactly when nothing is counted.
pub fn installed() -> bool {
    LIVE.load(Relaxed) > 0
}

/// Heap bytes live now.
pub fn live() -> usize {
    LIVE.load(Relaxed)
}

/// The most heap bytes live at once since the last [`reset_peak`].
pub fn peak() -> usize {
    PEAK.load(Relaxed)
}

/// Start a new peak from what is live now; returns that baseline.
pub fn reset_peak() -> usize {
    let now = LIVE.load(Relaxed);
    PEAK.store(now, Relaxed);
    now
}

/// The peak heap of `f` above what was live when it started, if the allocator is
/// installed, with `f`'s result.
pub fn measure<T>(f: impl FnOnce() -> T) -> (T, Option<u64>) {
    if !installed() {
        return (f(), None);
    }
    let base = reset_peak();
    let out = f();
    let top = peak();
    (out, Some(top.saturating_sub(base) as u64))
}
