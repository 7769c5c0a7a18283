//! Criterion benches of the attention kernels (kept short: a few sizes, few samples).
//! `attnviz bench` is the tool that reports GFLOP/s against the measured FMA peak; these
//! track regressions with criterion's statistics.

use std::hint::black_box;
use std::time::Duration;

use attnviz::engine::config::MaskKind;
use attnviz::engine::mask::Mask;
use attnviz::engine::naive;
use attnviz::engine::problem::{AttnSpec, ProblemShape};
use attnviz::kernel::{self, AlignedBuf, KernelOptions};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use ndarray::ArrayView4;

const HEADS: usize = 8;
const D: usize = 64;

struct Inputs {
    shape: ProblemShape,
    q: AlignedBuf,
    k: AlignedBuf,
    v: AlignedBuf,
}

fn inputs(n: usize) -> Inputs {
    let shape =
        ProblemShape::from_dims([1, HEADS, n, D], [1, HEADS, n, D], [1, HEADS, n, D]).unwrap();
    // A cheap deterministic fill in [-1, 1).
    let fill = |salt: u32| {
        let mut b = AlignedBuf::zeros(HEADS * n * D);
        for (i, x) in b.as_mut_slice().iter_mut().enumerate() {
            let h = (i as u32 ^ salt).wrapping_mul(0x9E37_79B9).rotate_left(13);
            *x = (h as f32 / u32::MAX as f32) * 2.0 - 1.0;
        }
        b
    };
    Inputs {
        shape,
        q: fill(1),
        k: fill(2),
        v: fill(3),
    }
}

fn spec(shape: &ProblemShape, causal: bool) -> AttnSpec {
    let kind = if causal {
        MaskKind::Causal
    } else {
        MaskKind::None
    };
    let mask = Mask::resolve(&kind, 1, HEADS, shape.n_q, shape.n_k).unwrap();
    AttnSpec::new(shape, mask, false, None)
}

fn flash(c: &mut Criterion) {
    let mut g = c.benchmark_group("flash_1thread");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(300));
    let opts = KernelOptions {
        threads: Some(1),
        ..Default::default()
    };
    for n in [256, 1024] {
        let inp = inputs(n);
        for causal in [false, true] {
            let sp = spec(&inp.shape, causal);
            let flops = 4 * HEADS * n * n * D / if causal { 2 } else { 1 };
            g.throughput(Throughput::Elements(flops as u64));
            let id = BenchmarkId::new(if causal { "causal" } else { "full" }, n);
            g.bench_with_input(id, &n, |b, _| {
                b.iter(|| {
                    let o = kernel::attention(
                        &inp.shape,
                        inp.q.as_slice(),
                        inp.k.as_slice(),
                        inp.v.as_slice(),
                        &sp,
                        &opts,
                    )
                    .unwrap();
                    black_box(o.out)
                })
            });
        }
    }
    g.finish();
}

fn naive_path(c: &mut Criterion) {
    let mut g = c.benchmark_group("naive");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(300));
    let n = 256;
    let inp = inputs(n);
    let sp = spec(&inp.shape, false);
    fn view(b: &AlignedBuf, n: usize) -> ArrayView4<'_, f32> {
        ArrayView4::from_shape([1, HEADS, n, D], b.as_slice()).unwrap()
    }
    g.throughput(Throughput::Elements((4 * HEADS * n * n * D) as u64));
    g.bench_function(BenchmarkId::new("full", n), |b| {
        b.iter(|| {
            black_box(
                naive::attention(
                    &inp.shape,
                    view(&inp.q, n),
                    view(&inp.k, n),
                    view(&inp.v, n),
                    &sp,
                )
                .expect("bench inputs are in range")
                .out,
            )
        })
    });
    g.finish();
}

criterion_group!(benches, flash, naive_path);
criterion_main!(benches);
