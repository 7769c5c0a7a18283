//! Worker threads of the kernel: one local rayon pool per thread count, built on first
//! use and kept, so a benchmark loop does not pay for spawning threads on every call and
//! the global rayon pool is left alone.

use std::sync::{Arc, Mutex};

use rayon::{ThreadPool, ThreadPoolBuilder};

use crate::error::{Error, Result};

/// All cores this process may use.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The pool of `threads` workers (>= 2; one thread runs on the caller instead).
pub(crate) fn pool(threads: usize) -> Result<Arc<ThreadPool>> {
    static POOLS: Mutex<Vec<(usize, Arc<ThreadPool>)>> = Mutex::new(Vec::new());
    let mut pools = POOLS
        .lock()
        .map_err(|_| Error::Internal("kernel thread-pool cache poisoned".into()))?;
    if let Some((_, p)) = pools.iter().find(|(n, _)| *n == threads) {
        return Ok(Arc::clone(p));
    }
    let p = ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("attnviz-kernel-{i}"))
        .build()
        .map_err(|e| Error::Internal(format!("cannot start {threads} kernel threads: {e}")))?;
    let p = Arc::new(p);
    pools.push((threads, Arc::clone(&p)));
    Ok(p)
}
