//! This CPU's fp32 FMA peak, measured: every thread runs independent chains of
//! `a = a * m + c` in vector registers, enough chains to cover the FMA latency on every
//! FMA pipe, so the figure is the throughput limit that a GEMM can approach.

use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use pulp::{Simd, WithSimd};

use super::Tier;

/// Independent accumulator chains on tiers with 32 vector registers: 16 chains keep
/// 2 FMA pipes x 4 cycles latency busy twice over.
const CHAINS_32: usize = 16;
/// ... and on 16-register tiers (AVX2, scalar): 12, leaving room for the two constants.
const CHAINS_16: usize = 12;

/// Repetitions measured. The highest is reported: on a shared machine other programs can
/// only slow a repetition down, never speed it up.
const REPS: usize = 11;

/// Wall time each repetition aims at.
const TARGET: Duration = Duration::from_millis(40);

struct FmaLoop {
    iters: u64,
}

impl WithSimd for FmaLoop {
    type Output = (f32, usize);
    #[inline(always)]
    fn with_simd<S: Simd>(self, s: S) -> (f32, usize) {
        if S::REGISTER_COUNT >= 32 {
            (
                chains::<S, CHAINS_32>(s, self.iters),
                CHAINS_32 * S::F32_LANES,
            )
        } else {
            (
                chains::<S, CHAINS_16>(s, self.iters),
                CHAINS_16 * S::F32_LANES,
            )
        }
    }
}

#[inline(always)]
fn chains<S: Simd, const C: usize>(s: S, iters: u64) -> f32 {
    let m = s.splat_f32s(black_box(0.999_999));
    let c = s.splat_f32s(black_box(1e-7));
    let mut acc: [S::f32s; C] = core::array::from_fn(|i| s.splat_f32s(1.0 + i as f32 * 0.01));
    for _ in 0..iters {
        for a in acc.iter_mut() {
            *a = s.mul_add_e_f32s(*a, m, c);
        }
    }
    let mut sum = s.splat_f32s(0.0);
    for a in acc {
        sum = s.add_f32s(sum, a);
    }
    s.reduce_sum_f32s(sum)
}

/// One timed run: `threads` threads start together, each runs `iters` iterations and
/// times itself (a thread that the OS runs late must not shorten the measurement);
/// returns (flops, seconds of the slowest thread).
fn run(tier: Tier, threads: usize, iters: u64) -> (f64, f64) {
    let barrier = Barrier::new(threads);
    let per_thread: Vec<(usize, f64)> = std::thread::scope(|sc| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                sc.spawn(|| {
                    barrier.wait();
                    let t0 = Instant::now();
                    let (sink, lanes) = tier.dispatch(FmaLoop { iters });
                    let secs = t0.elapsed().as_secs_f64();
                    black_box(sink);
                    (lanes, secs)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or((0, 0.0)))
            .collect()
    });
    let lanes = per_thread.iter().map(|p| p.0).min().unwrap_or(0);
    let secs = per_thread.iter().map(|p| p.1).fold(0.0, f64::max);
    let flops = 2.0 * lanes as f64 * iters as f64 * threads as f64;
    (flops, secs)
}

/// fp32 FMA peak of `tier` on `threads` threads, in GFLOP/s: the best of [`REPS`] runs,
/// after calibration runs that also wake the cores up.
pub fn fma_peak_gflops(tier: Tier, threads: usize) -> f64 {
    let threads = threads.max(1);
    // Calibrate: grow the probe until it runs long enough to time.
    let mut probe: u64 = 100_000;
    let mut secs = run(tier, threads, probe).1;
    while secs < 0.005 && probe < (1 << 40) {
        probe *= 4;
        secs = run(tier, threads, probe).1;
    }
    let iters = ((probe as f64 * TARGET.as_secs_f64() / secs.max(1e-9)) as u64).max(1000);
    (0..REPS)
        .map(|_| {
            let (flops, secs) = run(tier, threads, iters);
            flops / secs / 1e9
        })
        .fold(0.0, f64::max)
}
