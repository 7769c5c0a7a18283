//! `attnviz bench`: kernel throughput in GFLOP/s and as a share of this CPU's fp32 FMA
//! peak, which the command measures itself at every thread count it runs.

use std::time::{Duration, Instant};

use ndarray::{Array4, ArrayView4};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::Serialize;

use crate::cli::BenchArgs;
use crate::engine::config::MaskKind;
use crate::engine::mask::Mask;
use crate::engine::problem::{AttnSpec, ProblemShape};
use crate::engine::{limits, naive, reference, reference_backward};
use crate::error::{Error, Result};
use crate::kernel::{self, AlignedBuf, KernelOptions, Tier, peak};

/// The smallest number of timed runs behind a median (DESIGN.md).
const MIN_REPS: usize = 5;

/// Short cases repeat until their timed runs fill about this long, for a stable median.
const TIMED_SPAN: Duration = Duration::from_millis(300);

/// ... but never more than this many timed runs.
const MAX_REPS: usize = 200;

/// Warm-up calls repeat until they fill this long (at least one call): on a shared VM
/// the first fraction of a second of a process runs slower.
const WARMUP_SPAN: Duration = Duration::from_millis(500);

/// The f64 reference is plain loops at about 4 G multiply-adds/s: beyond this many per
/// call (N = 1024 at H = 8, d = 64 is 1.07 G, 0.3 s) it is skipped with a note.
const REFERENCE_BUDGET: f64 = 1.2e9;

/// The naive path holds one N x N f32 score matrix per worker; beyond this it is skipped.
const NAIVE_SCORE_BYTES: f64 = 2.0 * 1024.0 * 1024.0 * 1024.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KernelName {
    Flash,
    Naive,
    Reference,
}

impl KernelName {
    fn parse(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "flash" => Ok(KernelName::Flash),
            "naive" => Ok(KernelName::Naive),
            "reference" => Ok(KernelName::Reference),
            other => Err(Error::usage(format!(
                "--kernels: unknown kernel '{other}'; expected a list of flash, naive, reference"
            ))),
        }
    }

    fn name(self) -> &'static str {
        match self {
            KernelName::Flash => "flash",
            KernelName::Naive => "naive",
            KernelName::Reference => "reference",
        }
    }
}

/// One measured case, with the JSON fields of DESIGN.md (and a few extra).
#[derive(Debug, Clone, Serialize)]
pub struct BenchRecord {
    pub kernel: &'static str,
    /// "forward", or "backward" (dQ, dK, dV from the saved log-sum-exp).
    pub pass: &'static str,
    pub n: usize,
    pub d: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub causal: bool,
    pub threads: usize,
    /// Median wall time of one call.
    pub ms: f64,
    /// 4 B H N^2 d flops (10 for the backward; halved for causal) per second, / 1e9.
    pub gflops: f64,
    /// This CPU's fp32 FMA peak at `threads` threads (best tier), measured by bench.
    pub peak_gflops: f64,
    pub pct_peak: f64,
    /// The instruction set that ran.
    pub simd: String,
    pub batch: usize,
    pub reps: usize,
    pub ms_min: f64,
    pub ms_max: f64,
}

struct Inputs {
    shape: ProblemShape,
    q: AlignedBuf,
    k: AlignedBuf,
    v: AlignedBuf,
    spec: AttnSpec,
}

pub fn run(args: &BenchArgs) -> Result<()> {
    if args.ui {
        if args.backward {
            return Err(Error::usage(
                "--ui times the app's views and --backward the kernels' backward pass; give one of them",
            ));
        }
        return crate::tui::frame_bench::bench_ui(args);
    }
    let plan = Plan::from_args(args)?;
    // A run whose every kernel is skipped would print an empty table: say why instead.
    let reasons: Vec<String> = plan
        .ns
        .iter()
        .flat_map(|&n| plan.kernels.iter().map(move |&k| (k, n)))
        .map(|(k, n)| plan.skip_reason(k, n))
        .collect::<Option<_>>()
        .unwrap_or_default();
    if !reasons.is_empty() {
        let mut unique = reasons;
        unique.dedup();
        return Err(Error::usage(format!(
            "nothing to time: {}",
            unique.join("; ")
        )));
    }
    let flash_tier = Tier::resolve(None, kernel::SIMD_ENV)?;
    let best = Tier::best();
    // The peak is measured before and after the kernels and the higher figure kept:
    // another process that takes a core for a moment can only lower a measurement, and
    // a peak measured low would inflate every kernel's share of it.
    let measure_peaks = || -> Vec<f64> {
        plan.threads
            .iter()
            .map(|&t| peak::fma_peak_gflops(best, peak_threads(t)))
            .collect()
    };
    let before = measure_peaks();
    let mut records = Vec::new();
    for &n in &plan.ns {
        let inputs = make_inputs(&plan, n)?;
        for &kern in &plan.kernels {
            if let Some(why) = plan.skip_reason(kern, n) {
                eprintln!("note: {why}");
                continue;
            }
            for (&threads, &peak_gflops) in plan.threads.iter().zip(&before) {
                records.push(measure(
                    &plan,
                    &inputs,
                    kern,
                    threads,
                    flash_tier,
                    peak_gflops,
                )?);
            }
        }
    }
    let peaks: Vec<(usize, f64)> = plan
        .threads
        .iter()
        .copied()
        .zip(before.iter().zip(measure_peaks()).map(|(a, b)| a.max(b)))
        .collect();
    for r in &mut records {
        if let Some(&(_, p)) = peaks.iter().find(|(t, _)| *t == r.threads) {
            r.peak_gflops = p;
            r.pct_peak = 100.0 * r.gflops / p;
        }
    }
    if !args.json {
        let list: Vec<String> = peaks
            .iter()
            .map(|(t, p)| format!("{t} thread{}: {p:.1}", if *t == 1 { "" } else { "s" }))
            .collect();
        let mut text = format!(
            "fp32 FMA peak of this CPU ({best}, measured before and after, the higher kept), GFLOP/s: {}\n{}\n",
            list.join(", "),
            table_header()
        );
        for r in &records {
            text.push_str(&table_row(r));
            text.push('\n');
        }
        crate::output::print(&text)?;
    }
    if args.json {
        let text = serde_json::to_string_pretty(&records)
            .map_err(|e| Error::Internal(format!("cannot write bench JSON: {e}")))?;
        crate::output::println(&text)?;
    }
    Ok(())
}

struct Plan {
    ns: Vec<usize>,
    d: usize,
    heads: usize,
    kv_heads: usize,
    batch: usize,
    causal: bool,
    threads: Vec<usize>,
    kernels: Vec<KernelName>,
    reps: usize,
    backward: bool,
}

impl Plan {
    fn from_args(a: &BenchArgs) -> Result<Plan> {
        if a.n.is_empty() || a.n.contains(&0) {
            return Err(Error::usage(
                "--n needs sequence lengths >= 1, e.g. --n 256,1024",
            ));
        }
        if a.d == 0 || a.heads == 0 {
            return Err(Error::usage("--d and --heads must be at least 1"));
        }
        let kv_heads = a.kv_heads.unwrap_or(a.heads);
        if kv_heads == 0 || !a.heads.is_multiple_of(kv_heads) {
            return Err(Error::usage(format!(
                "--kv-heads {kv_heads} must divide --heads {} (GQA/MQA)",
                a.heads
            )));
        }
        let batch = a.batch.unwrap_or(1);
        if batch == 0 {
            return Err(Error::usage("--batch must be at least 1"));
        }
        if a.reps < MIN_REPS {
            return Err(Error::usage(format!(
                "--reps {} is too few for a median; give at least {MIN_REPS}",
                a.reps
            )));
        }
        let mut threads = if a.threads.is_empty() {
            vec![1, kernel::default_threads()]
        } else {
            a.threads.clone()
        };
        if let Some(t) = threads
            .iter()
            .find(|&&t| !(1..=limits::max_threads()).contains(&t))
        {
            return Err(Error::usage(format!(
                "--threads {t}: give counts between 1 and {} (MAX_THREADS: {} per core here)",
                limits::max_threads(),
                limits::THREADS_PER_CORE
            )));
        }
        let mut seen = Vec::new();
        threads.retain(|t| {
            let first = !seen.contains(t);
            seen.push(*t);
            first
        });
        let mut kernels = Vec::new();
        for k in &a.kernels {
            let k = KernelName::parse(k)?;
            if !kernels.contains(&k) {
                kernels.push(k);
            }
        }
        if kernels.is_empty() {
            return Err(Error::usage(
                "--kernels needs at least one of flash, naive, reference",
            ));
        }
        for &n in &a.n {
            check_tensor_size(batch, a.heads, n, a.d)?;
        }
        let plan = Plan {
            ns: a.n.clone(),
            d: a.d,
            heads: a.heads,
            kv_heads,
            batch,
            causal: a.causal,
            threads,
            kernels,
            reps: a.reps,
            backward: a.backward,
        };
        for &n in &plan.ns {
            let flops = plan.flops(n);
            if flops > MAX_CALL_FLOPS {
                return Err(Error::usage(format!(
                    "--n {n}: one {} call is {flops:.1e} flops ({} B H N^2 d{}), past the {MAX_CALL_FLOPS:.0e} a benchmark times (minutes a call on a CPU, and it makes at least {} calls); give a smaller --n, e.g. {}",
                    if plan.backward { "backward" } else { "forward" },
                    if plan.backward { 10 } else { 4 },
                    if plan.causal {
                        ", halved for causal"
                    } else {
                        ""
                    },
                    MIN_REPS + 1,
                    largest_n(&plan)
                )));
            }
        }
        Ok(plan)
    }

    fn flops(&self, n: usize) -> f64 {
        // The backward's five products against the forward's two (DESIGN.md).
        let per = if self.backward { 10.0 } else { 4.0 };
        let full = per * (self.batch * self.heads) as f64 * (n as f64).powi(2) * self.d as f64;
        if self.causal { full / 2.0 } else { full }
    }

    fn skip_reason(&self, k: KernelName, n: usize) -> Option<String> {
        let mut work = (self.batch * self.heads) as f64 * (n as f64).powi(2) * (2 * self.d) as f64;
        if self.backward {
            work *= 2.5;
        }
        match k {
            KernelName::Naive if self.backward => Some(
                "naive skipped with --backward: it has no backward pass (flash and reference do)"
                    .to_string(),
            ),
            KernelName::Reference if work > REFERENCE_BUDGET => Some(format!(
                "reference skipped at n = {n}: {work:.2e} f64 multiply-adds per call is too slow to time; it runs for small n (e.g. --n 1024)"
            )),
            KernelName::Naive if (n as f64).powi(2) * 4.0 > NAIVE_SCORE_BYTES => Some(format!(
                "naive skipped at n = {n}: its {n} x {n} f32 score matrix needs {:.1} GiB per head",
                (n as f64).powi(2) * 4.0 / (1u64 << 30) as f64
            )),
            _ => None,
        }
    }
}

/// Flops of one timed call: 1e13 is some tens of seconds at a laptop's 200-500 GFLOP/s,
/// and a benchmark makes at least [`MIN_REPS`] + 1 of them.
const MAX_CALL_FLOPS: f64 = 1e13;

/// The largest power-of-two n whose call stays within [`MAX_CALL_FLOPS`] (for the hint).
fn largest_n(plan: &Plan) -> usize {
    let mut n = 1usize;
    while plan.flops(n * 2) <= MAX_CALL_FLOPS && n < 1 << 30 {
        n *= 2;
    }
    n
}

/// Threads the FMA peak is measured with for a run on `threads`: no more than the cores
/// this process may use, since more threads than cores add no FLOPs, only time-sharing
/// (whose start-up skew would let a short run report far more than the hardware does).
fn peak_threads(threads: usize) -> usize {
    threads.clamp(1, kernel::default_threads())
}

/// Q, K and V of one size as compute would read them: at most MAX_TENSOR_ELEMENTS each,
/// so a huge --n is refused before anything is allocated.
fn check_tensor_size(batch: usize, heads: usize, n: usize, d: usize) -> Result<()> {
    let elements = [batch, heads, n, d]
        .iter()
        .try_fold(1u64, |acc, &x| acc.checked_mul(x as u64));
    match elements {
        Some(e) if e <= limits::MAX_TENSOR_ELEMENTS => Ok(()),
        _ => Err(Error::usage(format!(
            "--n {n}: Q of batch {batch} x {heads} heads x {n} x d {d} has {} elements, over the limit of {} (MAX_TENSOR_ELEMENTS, the limit compute reads); give a smaller --n, --heads or --d",
            elements.map_or("more than 2^64".to_string(), |e| e.to_string()),
            limits::MAX_TENSOR_ELEMENTS
        ))),
    }
}

fn make_inputs(p: &Plan, n: usize) -> Result<Inputs> {
    let shape = ProblemShape::from_dims(
        [p.batch, p.heads, n, p.d],
        [p.batch, p.kv_heads, n, p.d],
        [p.batch, p.kv_heads, n, p.d],
    )?;
    let mut rng = ChaCha8Rng::seed_from_u64(0x00BE_AC11 ^ n as u64);
    let mut fill = |len: usize| {
        let mut b = AlignedBuf::zeros(len);
        for x in b.as_mut_slice() {
            *x = rng.random_range(-1.0f32..1.0);
        }
        b
    };
    let q = fill(p.batch * p.heads * n * p.d);
    let k = fill(p.batch * p.kv_heads * n * p.d);
    let v = fill(p.batch * p.kv_heads * n * p.d);
    let kind = if p.causal {
        MaskKind::Causal
    } else {
        MaskKind::None
    };
    let mask = Mask::resolve(&kind, p.batch, p.heads, n, n)?;
    let spec = AttnSpec::new(&shape, mask, false, None);
    Ok(Inputs {
        shape,
        q,
        k,
        v,
        spec,
    })
}

fn measure(
    plan: &Plan,
    inp: &Inputs,
    kern: KernelName,
    threads: usize,
    flash_tier: Tier,
    peak_gflops: f64,
) -> Result<BenchRecord> {
    let n = inp.shape.n_q;
    let (samples, simd) = match kern {
        KernelName::Flash if plan.backward => (
            backward_flash(plan, inp, threads, flash_tier)?,
            flash_tier.to_string(),
        ),
        KernelName::Reference if plan.backward => (
            backward_reference(plan, inp, threads)?,
            "scalar-f64".to_string(),
        ),
        KernelName::Flash => {
            let opts = KernelOptions {
                threads: Some(threads),
                tier: Some(flash_tier),
                ..Default::default()
            };
            let s = &inp.shape;
            let call = || {
                kernel::attention(
                    s,
                    inp.q.as_slice(),
                    inp.k.as_slice(),
                    inp.v.as_slice(),
                    &inp.spec,
                    &opts,
                )
                .map(|o| std::hint::black_box(o.out.len()))
            };
            (time_calls(plan.reps, call)?, flash_tier.to_string())
        }
        KernelName::Naive => {
            let heads = per_head(inp)?;
            let pool = bench_pool(threads)?;
            let call = || {
                pool.install(|| {
                    heads.par_iter().try_for_each(|h| {
                        let o = naive::attention(
                            &h.shape,
                            h.q.view(),
                            h.k.view(),
                            h.v.view(),
                            &h.spec,
                        )?;
                        std::hint::black_box(o.out.len());
                        Ok(())
                    })
                })
            };
            (time_calls(plan.reps, call)?, "matrixmultiply".to_string())
        }
        KernelName::Reference => {
            let heads = per_head(inp)?;
            let as64 = |a: &Array4<f32>| a.mapv(f64::from);
            let heads64: Vec<_> = heads
                .iter()
                .map(|h| (as64(&h.q), as64(&h.k), as64(&h.v)))
                .collect();
            let pool = bench_pool(threads)?;
            let call = || {
                pool.install(|| {
                    heads.par_iter().zip(&heads64).for_each(|(h, (q, k, v))| {
                        let o =
                            reference::attention(&h.shape, q.view(), k.view(), v.view(), &h.spec);
                        std::hint::black_box(o.out.len());
                    })
                });
                Ok(())
            };
            (time_calls(plan.reps, call)?, "scalar-f64".to_string())
        }
    };
    let ms = median(&samples);
    let gflops = plan.flops(n) / (ms * 1e6);
    Ok(BenchRecord {
        kernel: kern.name(),
        pass: if plan.backward { "backward" } else { "forward" },
        n,
        d: plan.d,
        heads: plan.heads,
        kv_heads: plan.kv_heads,
        causal: plan.causal,
        threads,
        ms,
        gflops,
        peak_gflops,
        pct_peak: 100.0 * gflops / peak_gflops,
        simd,
        batch: plan.batch,
        reps: samples.len(),
        ms_min: samples.iter().copied().fold(f64::INFINITY, f64::min),
        ms_max: samples.iter().copied().fold(0.0, f64::max),
    })
}

/// dO of the backward benchmarks: seeded, like the inputs.
fn grad_out(inp: &Inputs) -> AlignedBuf {
    let s = inp.shape;
    let mut rng = ChaCha8Rng::seed_from_u64(0x00D0_0D0D ^ s.n_q as u64);
    let mut b = AlignedBuf::zeros(s.batch * s.heads * s.n_q * s.dv);
    for x in b.as_mut_slice() {
        *x = rng.random_range(-1.0f32..1.0);
    }
    b
}

/// The flash backward alone: the forward runs once, untimed, for O and the
/// log-sum-exp the backward reads.
fn backward_flash(plan: &Plan, inp: &Inputs, threads: usize, tier: Tier) -> Result<Vec<f64>> {
    let opts = KernelOptions {
        threads: Some(threads),
        tier: Some(tier),
        ..Default::default()
    };
    let (q, k, v) = (inp.q.as_slice(), inp.k.as_slice(), inp.v.as_slice());
    let fwd = kernel::attention(&inp.shape, q, k, v, &inp.spec, &opts)?;
    let dout = grad_out(inp);
    let bwd = kernel::BackwardInputs {
        q,
        k,
        v,
        out: &fwd.out,
        lse: &fwd.lse,
        dout: dout.as_slice(),
    };
    time_calls(plan.reps, || {
        kernel::attention_backward(&inp.shape, &bwd, &inp.spec, &opts)
            .map(|g| std::hint::black_box(g.dq.len()))
    })
}

/// The f64 reference gradients, one (batch, head) per call on a pool of `threads`.
fn backward_reference(plan: &Plan, inp: &Inputs, threads: usize) -> Result<Vec<f64>> {
    let heads = per_head(inp)?;
    let dout = grad_out(inp);
    let s = inp.shape;
    let per = s.n_q * s.dv;
    let as64 = |a: &Array4<f32>| a.mapv(f64::from);
    let heads64: Vec<_> = heads
        .iter()
        .enumerate()
        .map(|(bh, h)| {
            let g = Array4::from_shape_fn((1, 1, s.n_q, s.dv), |(_, _, i, c)| {
                dout.as_slice()[bh * per + i * s.dv + c] as f64
            });
            (as64(&h.q), as64(&h.k), as64(&h.v), g)
        })
        .collect();
    let pool = bench_pool(threads)?;
    time_calls(plan.reps, || {
        pool.install(|| {
            heads
                .par_iter()
                .zip(&heads64)
                .for_each(|(h, (q, k, v, g))| {
                    let r = reference_backward::attention_backward(
                        &h.shape,
                        q.view(),
                        k.view(),
                        v.view(),
                        g.view(),
                        &h.spec,
                    );
                    std::hint::black_box(r.dq.len());
                })
        });
        Ok(())
    })
}

/// Warm-up calls for [`WARMUP_SPAN`], then at least `reps` timed calls (more for short
/// calls); ms each.
fn time_calls<T>(reps: usize, mut call: impl FnMut() -> Result<T>) -> Result<Vec<f64>> {
    let t0 = Instant::now();
    let mut warm = 0u32;
    while warm == 0 || t0.elapsed() < WARMUP_SPAN {
        call()?;
        warm += 1;
    }
    let first = (t0.elapsed() / warm).max(Duration::from_micros(1));
    let fit = (TIMED_SPAN.as_secs_f64() / first.as_secs_f64()) as usize;
    let count = reps.max(fit.min(MAX_REPS));
    let mut ms = Vec::with_capacity(count);
    for _ in 0..count {
        let t = Instant::now();
        call()?;
        ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(ms)
}

fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// The naive and reference paths are single-threaded per call; bench runs one call per
/// (batch, head) on a pool of `threads` workers so they use the same cores as flash.
fn bench_pool(threads: usize) -> Result<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| Error::Internal(format!("cannot start {threads} bench threads: {e}")))
}

struct OneHead {
    shape: ProblemShape,
    q: Array4<f32>,
    k: Array4<f32>,
    v: Array4<f32>,
    spec: AttnSpec,
}

fn per_head(inp: &Inputs) -> Result<Vec<OneHead>> {
    let s = inp.shape;
    let q = ArrayView4::from_shape([s.batch, s.heads, s.n_q, s.d], inp.q.as_slice())
        .map_err(|e| Error::Internal(e.to_string()))?;
    let k = ArrayView4::from_shape([s.batch, s.kv_heads, s.n_k, s.d], inp.k.as_slice())
        .map_err(|e| Error::Internal(e.to_string()))?;
    let v = ArrayView4::from_shape([s.batch, s.kv_heads, s.n_k, s.dv], inp.v.as_slice())
        .map_err(|e| Error::Internal(e.to_string()))?;
    let one = ProblemShape::from_dims([1, 1, s.n_q, s.d], [1, 1, s.n_k, s.d], [1, 1, s.n_k, s.dv])?;
    let mut heads = Vec::new();
    for b in 0..s.batch {
        for h in 0..s.heads {
            let g = s.kv_head_for(h);
            let take = |a: &ArrayView4<f32>, hh: usize| {
                a.slice(ndarray::s![b..b + 1, hh..hh + 1, .., ..])
                    .to_owned()
            };
            let mask = Mask::resolve(inp.spec.mask.kind(), 1, 1, s.n_q, s.n_k)?;
            heads.push(OneHead {
                shape: one,
                q: take(&q, h),
                k: take(&k, g),
                v: take(&v, g),
                spec: AttnSpec::new(&one, mask, false, Some(inp.spec.scale)),
            });
        }
    }
    Ok(heads)
}

fn table_header() -> String {
    format!(
        "{:<10} {:>8} {:>6} {:>4} {:>5} {:>4} {:>6} {:>7} {:>10} {:>9} {:>7}  {}",
        "kernel",
        "pass",
        "n",
        "d",
        "heads",
        "kv",
        "causal",
        "threads",
        "ms",
        "GFLOP/s",
        "% peak",
        "simd"
    )
}

fn table_row(r: &BenchRecord) -> String {
    format!(
        "{:<10} {:>8} {:>6} {:>4} {:>5} {:>4} {:>6} {:>7} {:>10.3} {:>9.1} {:>6.1}%  {}",
        r.kernel,
        r.pass,
        r.n,
        r.d,
        r.heads,
        r.kv_heads,
        if r.causal { "yes" } else { "no" },
        r.threads,
        r.ms,
        r.gflops,
        r.pct_peak,
        r.simd
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }

    #[test]
    fn flops_follow_the_contract() {
        let args = BenchArgs {
            n: vec![4096],
            d: 64,
            heads: 8,
            kv_heads: None,
            batch: None,
            causal: true,
            threads: vec![1],
            kernels: vec!["flash".into()],
            reps: 5,
            backward: false,
            ui: false,
            model: None,
            ui_tokens: 1024,
            json: true,
        };
        let p = Plan::from_args(&args).unwrap();
        assert_eq!(p.flops(4096), 4.0 * 8.0 * 4096.0 * 4096.0 * 64.0 / 2.0);
        assert!(p.skip_reason(KernelName::Reference, 4096).is_some());
        assert!(p.skip_reason(KernelName::Reference, 1024).is_none());
    }

    #[test]
    fn the_peak_never_runs_more_threads_than_cores() {
        let cores = kernel::default_threads();
        for t in [1, 2, cores, cores + 1, 64, limits::MAX_THREADS] {
            let p = peak_threads(t);
            assert!(p >= 1 && p <= cores && p <= t, "{t} threads -> {p}");
        }
    }

    #[test]
    fn sizes_past_compute_limits_are_refused_before_allocating() {
        assert!(check_tensor_size(1, 8, 4096, 64).is_ok());
        let err = check_tensor_size(1, 8, 99_999_999_999, 64).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("MAX_TENSOR_ELEMENTS"), "{err}");
        assert!(check_tensor_size(usize::MAX, usize::MAX, 2, 2).is_err());
    }
}
