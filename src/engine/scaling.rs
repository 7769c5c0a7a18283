//! The memory wall, measured on this machine: time and peak heap of the naive path
//! (which materialises the n x n scores) and of the flash kernel (which never does),
//! for n doubling, on one head of random inputs.
//!
//! The sweep runs on its own thread ([`Measurement::start`]) and reports through a
//! channel ([`Progress`]), so an app stays responsive; [`run`] is the same sweep on the
//! caller's thread. A cancel flag is checked between runs and, for the flash kernel,
//! between slices of [`FLASH_SLICE_ROWS`] query rows: without a mask every query row is
//! independent of the others, so the slices compute exactly what one call would, and
//! a cancel takes effect within one slice instead of after a whole run (n = 131072 is
//! tens of seconds on two cores).
//!
//! Peak memory is measured by the counting allocator of [`heap`] (the heap bytes the
//! call had live at its busiest, above what was live before it: the inputs are not
//! counted, its outputs and scratch are; for the flash kernel that includes one slice's
//! output on top of the gathered n x d output, at most `FLASH_SLICE_ROWS` x d floats,
//! 2 MiB at d = 64). Where the binary does not install that
//! allocator, samples carry no peak and say so; no figure is computed in its place.
//!
//! The naive path is skipped, with the reason, where its score matrix is over
//! [`limits::MAX_NAIVE_SCORE_BYTES`] or would not fit in the memory this machine has
//! available (`MemAvailable` of `/proc/meminfo`): see [`naive_skip`].

pub mod heap;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;
use std::time::Instant;

use ndarray::ArrayView4;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::engine::config::MaskKind;
use crate::engine::limits;
use crate::engine::mask::Mask;
use crate::engine::memory::{binary_bytes, decimal_bytes};
use crate::engine::naive;
use crate::engine::problem::{AttnSpec, ProblemShape};
use crate::error::{Error, Result};
use crate::kernel::{self, AlignedBuf, KernelOptions};

/// Query rows per flash call within one run (see the module docs): 128 query blocks of
/// 64, enough to keep every core busy, and 1/16 of the work at n = 131072.
pub const FLASH_SLICE_ROWS: usize = 8192;

/// A run is repeated until it has taken this long in all (or [`MAX_REPEATS`] runs) and
/// the median reported: small n are too quick for one timing to mean much.
pub const MIN_TOTAL_MS: f64 = 200.0;
pub const MAX_REPEATS: usize = 5;

/// Which path a run measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KernelKind {
    /// `engine::naive`: f32, the full n x n score matrix, one thread.
    Naive,
    /// `kernel::attention`: tiled online softmax, O(n d) memory, all threads.
    Flash,
}

impl KernelKind {
    pub fn name(self) -> &'static str {
        match self {
            KernelKind::Naive => "naive",
            KernelKind::Flash => "flash",
        }
    }
}

/// One planned run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Job {
    pub kernel: KernelKind,
    pub n: usize,
}

/// What a sweep measures.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Sequence lengths, ascending; each is run for every kernel.
    pub ns: Vec<usize>,
    /// Head width (d = dv).
    pub d: usize,
    pub kernels: Vec<KernelKind>,
    /// Threads of the flash kernel; all cores if None.
    pub flash_threads: Option<usize>,
    /// Seed of the random inputs.
    pub seed: u64,
    /// Bytes the naive path may count on; None reads MemAvailable when the sweep starts.
    pub available_bytes: Option<u64>,
    /// Query rows per flash call ([`FLASH_SLICE_ROWS`]); how soon a cancel takes effect.
    pub flash_slice_rows: usize,
}

/// The first n of the default sweep.
pub const SWEEP_FIRST_N: usize = 256;
/// The last n of the default sweep (the flash kernel reaches it; the naive path stops
/// where its matrix would not fit).
pub const SWEEP_LAST_N: usize = 131_072;

impl Plan {
    /// n = 256, 512, ..., 131072 at d = 64, both kernels.
    pub fn memory_wall() -> Plan {
        Plan {
            ns: doublings(SWEEP_FIRST_N, SWEEP_LAST_N),
            d: 64,
            kernels: vec![KernelKind::Naive, KernelKind::Flash],
            flash_threads: None,
            seed: 7,
            available_bytes: None,
            flash_slice_rows: FLASH_SLICE_ROWS,
        }
    }

    /// Every run, n by n, in the order the sweep makes them.
    pub fn jobs(&self) -> Vec<Job> {
        self.ns
            .iter()
            .flat_map(|&n| self.kernels.iter().map(move |&kernel| Job { kernel, n }))
            .collect()
    }

    fn check(&self) -> Result<()> {
        if self.d == 0 {
            return Err(Error::usage("the head width d is 0; it must be at least 1"));
        }
        if let Some(&n) = self.ns.iter().find(|&&n| n == 0) {
            return Err(Error::usage(format!(
                "n = {n} in the sweep; every length must be at least 1"
            )));
        }
        if self.flash_slice_rows == 0 {
            return Err(Error::usage(
                "flash slices of 0 rows; a slice needs at least 1 row",
            ));
        }
        if self.flash_threads == Some(0) {
            return Err(Error::usage("flash threads is 0; it must be at least 1"));
        }
        Ok(())
    }
}

/// first, 2 first, 4 first, ... up to and including `last`.
pub fn doublings(first: usize, last: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut n = first.max(1);
    while n <= last {
        out.push(n);
        n *= 2;
    }
    out
}

/// Why the naive path does not run at some n.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Skip {
    /// Its n x n f32 scores need more than the memory available.
    NoMemory { need: u64, available: u64 },
    /// They fit in memory but are over the naive path's documented limit.
    OverLimit { need: u64, limit: u64 },
}

impl std::fmt::Display for Skip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Skip::NoMemory { need, available } => write!(
                f,
                "its n x n scores need {}, more than the {} available",
                decimal_bytes(need),
                decimal_bytes(available)
            ),
            Skip::OverLimit { need, limit } => write!(
                f,
                "its n x n scores need {}, over the naive limit of {} (MAX_NAIVE_SCORE_BYTES)",
                decimal_bytes(need),
                binary_bytes(limit)
            ),
        }
    }
}

fn shape(n: usize, d: usize) -> ProblemShape {
    ProblemShape {
        batch: 1,
        heads: 1,
        kv_heads: 1,
        n_q: n,
        n_k: n,
        d,
        dv: d,
    }
}

/// Bytes the naive path holds at n on top of its inputs: the score matrix, the output
/// and its log-sum-exp.
pub fn naive_bytes(n: usize, d: usize) -> u64 {
    naive::score_bytes(&shape(n, d)) + (n as u64 * d as u64 + n as u64) * 4
}

/// The naive path's verdict at n: None if it runs. Running out of memory is the reason
/// given first (that is the wall); the documented limit next.
pub fn naive_skip(n: usize, d: usize, available: Option<u64>) -> Option<Skip> {
    let need = naive::score_bytes(&shape(n, d));
    if let Some(available) = available
        && naive_bytes(n, d) > available
    {
        return Some(Skip::NoMemory { need, available });
    }
    (need > limits::MAX_NAIVE_SCORE_BYTES).then_some(Skip::OverLimit {
        need,
        limit: limits::MAX_NAIVE_SCORE_BYTES,
    })
}

/// MemAvailable of `/proc/meminfo` in bytes, where the system has one.
pub fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_mem_available(&text)
}

/// The MemAvailable line of a meminfo text ("MemAvailable:   23578052 kB").
pub fn parse_mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let mut parts = line["MemAvailable:".len()..].split_whitespace();
    let value: u64 = parts.next()?.parse().ok()?;
    match parts.next() {
        Some("kB") => value.checked_mul(1024),
        None => Some(value),
        Some(_) => None,
    }
}

/// One measured point.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Sample {
    pub kernel: KernelKind,
    pub n: usize,
    pub d: usize,
    /// Median wall time of the runs, in milliseconds.
    pub ms: f64,
    pub runs: usize,
    /// Peak heap bytes of the call above its inputs (the most over its runs); None
    /// where the counting allocator is not installed.
    pub peak_bytes: Option<u64>,
    pub threads: usize,
    /// The SIMD tier the flash kernel ran (None for the naive path).
    pub tier: Option<&'static str>,
}

/// What the sweep reports, in order: `Started`, then per job `Working`* followed by
/// `Measured`, `Skipped` or `Failed`, and last `Finished`.
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    Started {
        jobs: Vec<Job>,
        d: usize,
        /// Bytes the naive path could count on (MemAvailable when the sweep began).
        available_bytes: Option<u64>,
        /// False where the counting allocator is not installed (no peaks then).
        heap_metered: bool,
        flash_threads: usize,
    },
    /// Job `job` (an index into `jobs`) is `fraction` done.
    Working {
        job: usize,
        fraction: f64,
    },
    Measured {
        job: usize,
        sample: Sample,
    },
    Skipped {
        job: usize,
        reason: Skip,
    },
    Failed {
        job: usize,
        message: String,
    },
    Finished {
        cancelled: bool,
    },
}

/// The random inputs of one n, shared by both kernels.
struct Inputs {
    n: usize,
    d: usize,
    q: Vec<f32>,
    k: Vec<f32>,
    /// Aligned so the kernel reads V in place instead of copying it.
    v: AlignedBuf,
}

impl Inputs {
    fn new(n: usize, d: usize, seed: u64) -> Inputs {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (n as u64).rotate_left(32));
        let mut fill =
            |len: usize| -> Vec<f32> { (0..len).map(|_| rng.random_range(-1.0f32..1.0)).collect() };
        let q = fill(n * d);
        let k = fill(n * d);
        let v = AlignedBuf::from(fill(n * d).as_slice());
        Inputs { n, d, q, k, v }
    }
}

/// Stops a run early when the sweep is cancelled.
struct Cancelled;

fn naive_once(x: &Inputs) -> Result<()> {
    let sh = shape(x.n, x.d);
    fn view(a: &[f32], n: usize, d: usize) -> Result<ArrayView4<'_, f32>> {
        ArrayView4::from_shape((1, 1, n, d), a)
            .map_err(|e| Error::Internal(format!("scaling inputs: {e}")))
    }
    let mask = Mask::resolve(&MaskKind::None, 1, 1, x.n, x.n)?;
    let spec = AttnSpec::new(&sh, mask, false, None);
    let out = naive::attention(
        &sh,
        view(&x.q, x.n, x.d)?,
        view(&x.k, x.n, x.d)?,
        view(x.v.as_slice(), x.n, x.d)?,
        &spec,
    )?;
    std::hint::black_box(&out);
    Ok(())
}

/// The flash kernel over all n queries, slice by slice; the output is gathered into one
/// n x d buffer as a single call would return it.
fn flash_once(
    x: &Inputs,
    opts: &KernelOptions,
    slice_rows: usize,
    cancel: &AtomicBool,
    on_slice: &mut dyn FnMut(f64),
) -> Result<std::result::Result<&'static str, Cancelled>> {
    let mut out = vec![0.0f32; x.n * x.d];
    let mut lse = vec![0.0f32; x.n];
    let mut tier = "";
    let mut r0 = 0;
    while r0 < x.n {
        if cancel.load(Ordering::Relaxed) {
            return Ok(Err(Cancelled));
        }
        let r1 = (r0 + slice_rows).min(x.n);
        let sh = ProblemShape {
            n_q: r1 - r0,
            ..shape(x.n, x.d)
        };
        let mask = Mask::resolve(&MaskKind::None, 1, 1, sh.n_q, sh.n_k)?;
        let spec = AttnSpec::new(&sh, mask, false, None);
        let part = kernel::attention(
            &sh,
            &x.q[r0 * x.d..r1 * x.d],
            &x.k,
            x.v.as_slice(),
            &spec,
            opts,
        )?;
        out[r0 * x.d..r1 * x.d].copy_from_slice(&part.out);
        lse[r0..r1].copy_from_slice(&part.lse);
        tier = part.tier.name();
        r0 = r1;
        on_slice(r0 as f64 / x.n as f64);
    }
    std::hint::black_box((&out, &lse));
    Ok(Ok(tier))
}

/// Run the sweep on this thread, reporting through `emit`; stops at the next check
/// after `cancel` is set.
pub fn run(plan: &Plan, cancel: &AtomicBool, emit: &mut dyn FnMut(Progress)) {
    if let Err(e) = plan.check() {
        emit(Progress::Started {
            jobs: Vec::new(),
            d: plan.d,
            available_bytes: None,
            heap_metered: heap::installed(),
            flash_threads: 0,
        });
        emit(Progress::Failed {
            job: 0,
            message: e.to_string(),
        });
        emit(Progress::Finished { cancelled: false });
        return;
    }
    let jobs = plan.jobs();
    let available = plan.available_bytes.or_else(available_memory);
    let threads = plan.flash_threads.unwrap_or_else(kernel::default_threads);
    let opts = KernelOptions {
        threads: Some(threads),
        ..Default::default()
    };
    emit(Progress::Started {
        jobs: jobs.clone(),
        d: plan.d,
        available_bytes: available,
        heap_metered: heap::installed(),
        flash_threads: threads,
    });
    // Warm up once: the kernel's thread pool and per-thread scratch are allocated on
    // first use and kept, which would otherwise land in the first sample's peak.
    if plan.kernels.contains(&KernelKind::Flash) {
        let tiny = Inputs::new(64, plan.d, plan.seed);
        let _ = flash_once(&tiny, &opts, 64, &AtomicBool::new(false), &mut |_| {});
    }
    let mut inputs: Option<Inputs> = None;
    for (index, job) in jobs.iter().enumerate() {
        if cancel.load(Ordering::Relaxed) {
            emit(Progress::Finished { cancelled: true });
            return;
        }
        if job.kernel == KernelKind::Naive
            && let Some(reason) = naive_skip(job.n, plan.d, available)
        {
            emit(Progress::Skipped { job: index, reason });
            continue;
        }
        emit(Progress::Working {
            job: index,
            fraction: 0.0,
        });
        if inputs.as_ref().is_none_or(|x| x.n != job.n) {
            drop(inputs.take()); // free the previous n's inputs before making the next
            inputs = Some(Inputs::new(job.n, plan.d, plan.seed));
        }
        let x = inputs.as_ref().expect("inputs were just made");
        let sliced = (&opts, plan.flash_slice_rows);
        match measure_job(job.kernel, x, sliced, cancel, &mut |fraction| {
            emit(Progress::Working {
                job: index,
                fraction,
            })
        }) {
            Ok(Ok(mut sample)) => {
                sample.threads = match job.kernel {
                    KernelKind::Naive => 1,
                    KernelKind::Flash => threads,
                };
                emit(Progress::Measured { job: index, sample });
            }
            Ok(Err(Cancelled)) => {
                emit(Progress::Finished { cancelled: true });
                return;
            }
            Err(e) => emit(Progress::Failed {
                job: index,
                message: e.to_string(),
            }),
        }
    }
    emit(Progress::Finished { cancelled: false });
}

/// Time one job (median of its repeats) and its peak heap (the most of its repeats).
fn measure_job(
    kernel: KernelKind,
    x: &Inputs,
    (opts, slice_rows): (&KernelOptions, usize),
    cancel: &AtomicBool,
    progress: &mut dyn FnMut(f64),
) -> Result<std::result::Result<Sample, Cancelled>> {
    let mut times = Vec::with_capacity(MAX_REPEATS);
    let mut peak: Option<u64> = None;
    let mut tier = None;
    while times.len() < MAX_REPEATS
        && (times.is_empty() || times.iter().sum::<f64>() < MIN_TOTAL_MS)
    {
        if !times.is_empty() && cancel.load(Ordering::Relaxed) {
            return Ok(Err(Cancelled));
        }
        let t0 = Instant::now();
        let (done, bytes) = heap::measure(|| -> Result<std::result::Result<(), Cancelled>> {
            match kernel {
                KernelKind::Naive => naive_once(x).map(Ok),
                KernelKind::Flash => {
                    // Only the first repeat reports slices: later ones are short.
                    let first = times.is_empty();
                    let t = flash_once(x, opts, slice_rows, cancel, &mut |f| {
                        if first {
                            progress(f)
                        }
                    })?;
                    Ok(t.map(|name| tier = Some(name)))
                }
            }
        });
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        if let Err(Cancelled) = done? {
            return Ok(Err(Cancelled));
        }
        times.push(ms);
        peak = match (peak, bytes) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }
    times.sort_by(f64::total_cmp);
    Ok(Ok(Sample {
        kernel,
        n: x.n,
        d: x.d,
        ms: times[times.len() / 2],
        runs: times.len(),
        peak_bytes: peak,
        threads: 1,
        tier,
    }))
}

/// A sweep on its own thread. Dropping it cancels the sweep (the thread ends at its
/// next check).
#[derive(Debug)]
pub struct Measurement {
    rx: Receiver<Progress>,
    cancel: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Measurement {
    /// Start `plan` on a new thread.
    pub fn start(plan: Plan) -> Result<Measurement> {
        let (tx, rx): (Sender<Progress>, Receiver<Progress>) = mpsc::channel();
        let cancel = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&cancel);
        let thread = std::thread::Builder::new()
            .name("attnviz-scaling".into())
            .spawn(move || {
                // A closed channel (the app quit) just means nobody listens any more.
                run(&plan, &flag, &mut |p| {
                    let _ = tx.send(p);
                })
            })
            .map_err(|e| Error::Internal(format!("cannot start the measuring thread: {e}")))?;
        Ok(Measurement {
            rx,
            cancel,
            thread: Some(thread),
        })
    }

    /// Ask the sweep to stop; it reports `Finished { cancelled: true }` when it has.
    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::Relaxed);
    }

    /// Everything reported since the last call, without waiting.
    pub fn poll(&self) -> Vec<Progress> {
        self.rx.try_iter().collect()
    }

    /// Wait for the next report (None once the sweep has ended and all was read).
    pub fn recv(&self) -> Option<Progress> {
        self.rx.recv().ok()
    }

    /// True once the thread has ended.
    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Wait for the thread to end.
    pub fn join(mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Measurement {
    fn drop(&mut self) {
        self.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_sweep_doubles_from_256_to_131072() {
        let p = Plan::memory_wall();
        assert_eq!(p.ns.first(), Some(&256));
        assert_eq!(p.ns.last(), Some(&131_072));
        assert!(p.ns.windows(2).all(|w| w[1] == 2 * w[0]));
        assert_eq!(p.jobs().len(), 2 * p.ns.len());
        assert_eq!(
            p.jobs()[..2],
            [
                Job {
                    kernel: KernelKind::Naive,
                    n: 256
                },
                Job {
                    kernel: KernelKind::Flash,
                    n: 256
                }
            ]
        );
    }

    #[test]
    fn mem_available_is_read_in_bytes() {
        let text = "MemTotal:       24000000 kB\nMemFree: 1 kB\nMemAvailable:   23578052 kB\n";
        assert_eq!(parse_mem_available(text), Some(23_578_052 * 1024));
        assert_eq!(parse_mem_available("MemTotal: 5 kB\n"), None);
        assert_eq!(parse_mem_available("MemAvailable: lots kB\n"), None);
    }

    #[test]
    fn without_the_counting_allocator_no_peak_is_invented() {
        // The lib's unit tests run on the system allocator.
        assert!(!heap::installed());
        let (_, peak) = heap::measure(|| vec![0u8; 1 << 20]);
        assert_eq!(peak, None);
    }
}
