//! The scaling view and its measurement runner. This binary installs the counting allocator,
//! as the `attnviz` binary does; every test takes its turn at the heap counters (`turn`).

use std::sync::{Mutex, MutexGuard};

use attnviz::engine::scaling::heap::CountingAlloc;

// The `attnviz` binary counts heap bytes this way too.
#[global_allocator]
static HEAP: CountingAlloc = CountingAlloc;

/// The heap counters are process-wide: every test here takes its turn so one test's
/// allocations do not land in another's peak.
static METERED: Mutex<()> = Mutex::new(());

fn turn() -> MutexGuard<'static, ()> {
    METERED.lock().unwrap_or_else(|e| e.into_inner())
}

mod runner;
mod view;
