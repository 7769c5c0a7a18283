//! A fork-join team for the model's many short parallel steps: the calling thread and
//! `threads - 1` workers claim a job's parts as they come free; between jobs the workers
//! spin for a while (then park), so the next job starts at once.
//!
//! Written here rather than taken from rayon because a model forward is hundreds of
//! parallel steps of 20-500 microseconds each (the products of every layer, the
//! quantization of their inputs, attention), with short serial steps between them.
//! rayon's idle workers sleep after a few dozen yields, and waking one costs more than
//! such a step: measured on a 2-vCPU virtual machine (Intel Xeon, family 6 model 167), a
//! `join` of two 20 us halves took 43-95 us (median) whenever the pool had been idle for
//! 10 us or more, against 21 us when its worker was still awake. Spinning workers are how
//! llama.cpp runs its graph too. The crates that spin (fork_union, micropool) either spin
//! without ever parking or bring their own scheduler; this is the small piece needed.
//!
//! One job runs at a time on a team: [`fork`] takes the team when it is free and falls
//! back to the rayon pool of the same size when it is not (another thread's job, or a job
//! that forks again from inside), so nothing waits on a busy team and nothing deadlocks.

use std::cell::UnsafeCell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, TryLockError};
use std::time::{Duration, Instant};

use rayon::prelude::*;

use crate::error::{Error, Result};

/// How long an idle worker spins before it parks: longer than the serial steps between
/// a forward's parallel ones, short enough not to hold a core once a forward is over.
const SPIN: Duration = Duration::from_millis(2);

/// How long a waiting thread spins before it also yields its core at every check.
const HOT: Duration = Duration::from_micros(100);

/// A published job: `f(part)` for parts 0..threads. Its borrow's lifetime is erased while
/// it is published; [`Team::run`] waits until no thread can touch it before it returns.
type Job = dyn Fn(usize) + Sync + 'static;

/// `state` holds the job's epoch above these bits and its next unclaimed part in them.
const PART_BITS: u32 = 16;

fn epoch_of(state: usize) -> usize {
    state >> PART_BITS
}

struct Shared {
    /// Parts per job (the team's thread count).
    parts: usize,
    /// The current job's epoch and next unclaimed part. The caller stores a new epoch
    /// with part 0 to publish a job; any thread (the caller included) claims a part by
    /// moving the part on with a compare-exchange that also checks the epoch, so a worker
    /// that wakes late can never claim a part of a job other than the one it saw.
    state: AtomicUsize,
    /// The current job, written by the caller before it publishes the epoch (SeqCst) and
    /// read by a thread after it claimed a part of that epoch; never written while a part
    /// is running (the caller waits for `left` to reach 0 first).
    job: UnsafeCell<*const Job>,
    /// Parts of the current job not finished.
    left: AtomicUsize,
    /// A worker's part of the current job panicked.
    panicked: AtomicBool,
    /// Workers parked (or about to park) on `wake`.
    parked: AtomicUsize,
    lock: Mutex<()>,
    wake: Condvar,
}

// SAFETY: `job` follows the protocol documented on it; everything else is atomics and a
// mutex. The job it points to is `Sync`.
unsafe impl Sync for Shared {}
unsafe impl Send for Shared {}

impl Shared {
    /// Claim and run parts of epoch `epoch` until none is left; whether a part panicked
    /// on this thread is recorded, not raised, on a worker (`catch`).
    fn run_parts(&self, epoch: usize, catch: bool) {
        loop {
            let cur = self.state.load(Ordering::Acquire);
            let part = cur & ((1 << PART_BITS) - 1);
            if epoch_of(cur) != epoch || part >= self.parts {
                return;
            }
            if self
                .state
                .compare_exchange_weak(cur, cur + 1, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
            {
                continue;
            }
            // SAFETY: a part of `epoch` is claimed and not finished, so `left` is not 0
            // and the caller of that job keeps it (and the pointer to it) alive.
            let f: &Job = unsafe { &**self.job.get() };
            /// Counts the part as finished even if it unwinds.
            struct Done<'a>(&'a AtomicUsize);
            impl Drop for Done<'_> {
                fn drop(&mut self) {
                    self.0.fetch_sub(1, Ordering::Release);
                }
            }
            let _done = Done(&self.left);
            if catch {
                if catch_unwind(AssertUnwindSafe(|| f(part))).is_err() {
                    self.panicked.store(true, Ordering::Relaxed);
                }
            } else {
                f(part);
            }
        }
    }
}

/// `threads - 1` workers and the right to run one job at a time.
pub struct Team {
    threads: usize,
    shared: Arc<Shared>,
    busy: Mutex<()>,
}

impl Team {
    fn new(threads: usize) -> Result<Team> {
        assert!(threads < 1 << PART_BITS);
        let shared = Arc::new(Shared {
            parts: threads,
            state: AtomicUsize::new(0),
            job: UnsafeCell::new(std::ptr::null::<fn(usize)>() as *const Job),
            left: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
            parked: AtomicUsize::new(0),
            lock: Mutex::new(()),
            wake: Condvar::new(),
        });
        for index in 1..threads {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name(format!("attnviz-team-{index}"))
                .spawn(move || work(&shared))
                .map_err(|e| Error::Internal(format!("cannot start a worker thread: {e}")))?;
        }
        Ok(Team {
            threads,
            shared,
            busy: Mutex::new(()),
        })
    }

    /// Run `f(0)..f(threads - 1)`, the calling thread and the workers claiming the parts
    /// as they come: a worker that is not running (another program holds its core) leaves
    /// its part to the caller instead of holding it up. The caller must hold `busy`.
    fn run(&self, f: &(dyn Fn(usize) + Sync + '_)) {
        let s = &*self.shared;
        // SAFETY: no part of the previous job is running (its `left` reached 0 before the
        // previous `run` returned) and none can be claimed (all were), so no thread reads
        // `job` now. The pointer's lifetime is erased; `Wait` below keeps `f` alive until
        // no thread can touch it.
        unsafe {
            let erased: *const Job =
                std::mem::transmute::<&(dyn Fn(usize) + Sync + '_), &'static Job>(f);
            *s.job.get() = erased;
        }
        s.left.store(self.threads, Ordering::Relaxed);
        let epoch = epoch_of(s.state.load(Ordering::Relaxed)).wrapping_add(1);
        s.state.store(epoch << PART_BITS, Ordering::SeqCst);
        if s.parked.load(Ordering::SeqCst) > 0 {
            let _g = s.lock.lock().unwrap_or_else(|e| e.into_inner());
            s.wake.notify_all();
        }
        /// Waits for the parts that workers claimed, even while a panic unwinds.
        struct Wait<'a>(&'a Shared);
        impl Drop for Wait<'_> {
            fn drop(&mut self) {
                let mut spins = 0u32;
                let mut since: Option<Instant> = None;
                while self.0.left.load(Ordering::Acquire) != 0 {
                    std::hint::spin_loop();
                    spins = spins.wrapping_add(1);
                    if spins.is_multiple_of(256)
                        && since.get_or_insert_with(Instant::now).elapsed() > HOT
                    {
                        std::thread::yield_now();
                    }
                }
            }
        }
        let wait = Wait(s);
        s.run_parts(epoch, false);
        drop(wait);
        if s.panicked.swap(false, Ordering::Relaxed) {
            panic!("a worker thread of the team panicked");
        }
    }
}

/// A worker's life: wait for a new epoch (spinning, then parked), claim and run parts of
/// it while there are any, repeat.
fn work(s: &Shared) {
    let mut seen = 0;
    loop {
        let mut since: Option<Instant> = None;
        let mut spins = 0u32;
        loop {
            let e = epoch_of(s.state.load(Ordering::Acquire));
            if e != seen {
                seen = e;
                break;
            }
            std::hint::spin_loop();
            spins = spins.wrapping_add(1);
            if !spins.is_multiple_of(256) {
                continue;
            }
            let idle = since.get_or_insert_with(Instant::now).elapsed();
            if idle > HOT {
                // Let another thread that wants this core have it (a shared machine, or
                // the tests running side by side).
                std::thread::yield_now();
            }
            if idle > SPIN {
                let mut g = s.lock.lock().unwrap_or_else(|e| e.into_inner());
                s.parked.fetch_add(1, Ordering::SeqCst);
                while epoch_of(s.state.load(Ordering::SeqCst)) == seen {
                    g = s.wake.wait(g).unwrap_or_else(|e| e.into_inner());
                }
                s.parked.fetch_sub(1, Ordering::SeqCst);
                since = None;
            }
        }
        s.run_parts(seen, true);
    }
}

/// The team of `threads` (>= 2) threads, started on first use and kept.
fn team(threads: usize) -> Result<Arc<Team>> {
    static TEAMS: Mutex<Vec<Arc<Team>>> = Mutex::new(Vec::new());
    let mut teams = TEAMS
        .lock()
        .map_err(|_| Error::Internal("the team cache is poisoned".into()))?;
    if let Some(t) = teams.iter().find(|t| t.threads == threads) {
        return Ok(Arc::clone(t));
    }
    let t = Arc::new(Team::new(threads)?);
    teams.push(Arc::clone(&t));
    Ok(t)
}

/// `f(0)`, .., `f(threads - 1)`, each once, in parallel, on the team of that size (the
/// calling thread among them) when it is free, else on the rayon pool of that size. Which
/// thread runs which part is not fixed: a part is an index of work, not a thread's.
pub fn fork(threads: usize, f: &(dyn Fn(usize) + Sync)) -> Result<()> {
    if threads <= 1 {
        f(0);
        return Ok(());
    }
    let team = team(threads)?;
    match team.busy.try_lock() {
        Ok(_held) => team.run(f),
        Err(TryLockError::Poisoned(e)) => {
            let _held = e.into_inner();
            team.run(f)
        }
        Err(TryLockError::WouldBlock) => {
            super::thread_pool(threads)?.install(|| (0..threads).into_par_iter().for_each(f))
        }
    }
    Ok(())
}

/// `f(i)` for every i in 0..n, each once, on up to `threads` threads: thread t works
/// through its own contiguous share of the items first, then helps with the others'
/// (taking them one at a time), so a late or slow thread takes fewer. Contiguous shares
/// keep the outputs of neighbouring items (often in one cache line) on one thread.
pub fn for_each(threads: usize, n: usize, f: &(dyn Fn(usize) + Sync)) -> Result<()> {
    if threads <= 1 || n <= 1 {
        (0..n).for_each(f);
        return Ok(());
    }
    /// A share's next item, on a cache line of its own.
    #[repr(align(128))]
    struct Cursor(AtomicUsize);
    let threads = threads.min(n);
    let start = |t: usize| n * t / threads;
    let next: Vec<Cursor> = (0..threads)
        .map(|t| Cursor(AtomicUsize::new(start(t))))
        .collect();
    fork(threads, &|me| {
        for k in 0..threads {
            let t = (me + k) % threads;
            loop {
                let i = next[t].0.fetch_add(1, Ordering::Relaxed);
                if i >= start(t + 1) {
                    break;
                }
                f(i);
            }
        }
    })
}

/// `f(i, &mut items[i])` for every item, handed out as [`for_each`] does.
pub fn for_each_mut<T: Send>(
    threads: usize,
    items: &mut [T],
    f: &(dyn Fn(usize, &mut T) + Sync),
) -> Result<()> {
    struct Items<T>(*mut T);
    // SAFETY: each index is handed to exactly one call (for_each), so no two threads
    // touch the same item; T: Send lets an item move to another thread for that call.
    unsafe impl<T: Send> Sync for Items<T> {}
    let base = Items(items.as_mut_ptr());
    let n = items.len();
    for_each(threads, n, &|i| {
        let base = &base;
        // SAFETY: i < n, and index i is exclusive to this call (see `Items`).
        f(i, unsafe { &mut *base.0.add(i) })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn every_part_runs_once_on_as_many_threads() {
        for threads in [1, 2, 3, 5] {
            for _ in 0..50 {
                let hits: Vec<AtomicUsize> = (0..threads).map(|_| AtomicUsize::new(0)).collect();
                fork(threads, &|i| {
                    hits[i].fetch_add(1, Ordering::Relaxed);
                })
                .unwrap();
                assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
            }
        }
    }

    #[test]
    fn for_each_covers_every_item_once_from_racing_callers() {
        // Several threads share one team: the ones that find it busy take the rayon pool.
        let sum = AtomicU64::new(0);
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for round in 0..100u64 {
                        let seen: Vec<AtomicUsize> = (0..37).map(|_| AtomicUsize::new(0)).collect();
                        for_each(2, 37, &|i| {
                            seen[i].fetch_add(1, Ordering::Relaxed);
                            // A nested fork finds the team busy (or not) and still runs.
                            if i == 5 {
                                fork(2, &|_| {
                                    sum.fetch_add(round, Ordering::Relaxed);
                                })
                                .unwrap();
                            }
                        })
                        .unwrap();
                        assert!(seen.iter().all(|s| s.load(Ordering::Relaxed) == 1));
                    }
                });
            }
        });
        assert_eq!(sum.load(Ordering::Relaxed), 4 * 2 * (0..100).sum::<u64>());
    }

    #[test]
    fn for_each_mut_gives_each_item_to_one_call() {
        let mut items: Vec<Vec<usize>> = vec![Vec::new(); 101];
        for_each_mut(2, &mut items, &|i, v| v.push(i * 3)).unwrap();
        assert!(items.iter().enumerate().all(|(i, v)| v == &[i * 3]));
    }

    #[test]
    fn a_worker_that_waited_past_the_spin_parks_and_wakes() {
        fork(2, &|_| {}).unwrap();
        std::thread::sleep(SPIN * 3);
        let ran = AtomicUsize::new(0);
        fork(2, &|_| {
            ran.fetch_add(1, Ordering::Relaxed);
        })
        .unwrap();
        assert_eq!(ran.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn a_panicking_part_reaches_the_caller_and_the_team_goes_on() {
        let r = std::panic::catch_unwind(|| {
            fork(2, &|i| {
                if i == 1 {
                    panic!("part 1 fails");
                }
            })
        });
        assert!(r.is_err());
        let ran = AtomicUsize::new(0);
        fork(2, &|_| {
            ran.fetch_add(1, Ordering::Relaxed);
        })
        .unwrap();
        assert_eq!(ran.load(Ordering::Relaxed), 2);
    }
}
