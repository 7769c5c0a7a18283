//! Every SIMD tier this machine has, against the f64 reference, on random problems:
//! odd lengths, Nq != Nk, every mask kind, ALiBi, GQA/MQA, random block sizes; plus
//! bit-identical results for 1 and 2 threads, huge logits, and fully masked rows.

use std::path::Path;

use attnviz::engine::config::{BigBird, MaskKind};
use attnviz::engine::mask::Mask;
use attnviz::engine::problem::{AttnSpec, ProblemShape};
use attnviz::engine::reference;
use attnviz::kernel::{self, KernelOptions, Tier, available_tiers};
use ndarray::{Array4, ArrayD, IxDyn};
use ndarray_npy::WriteNpyExt;
use proptest::prelude::*;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Largest error allowed, relative to the output scale max |V|.
const TOLERANCE: f64 = 2e-5;

/// Work of one random case (B*H*Nq*Nk*(d+dv)); larger draws get smaller head dims so
/// the f64 reference (unoptimised in test builds) keeps the suite fast.
const CASE_BUDGET: usize = 1_200_000;

#[derive(Debug, Clone)]
enum MaskChoice {
    None,
    Causal,
    Window(usize),
    /// Valid length per batch entry, as a fraction of Nk (0 = fully masked rows).
    Padding(Vec<u8>),
    BigBird(BigBird),
    /// A file mask: a 0/1 keep-mask, or additive biases with some -inf.
    FileKeep,
    FileAdditive,
}

#[derive(Debug, Clone)]
struct Case {
    batch: usize,
    heads: usize,
    kv_heads: usize,
    n_q: usize,
    n_k: usize,
    d: usize,
    dv: usize,
    mask: MaskChoice,
    alibi: bool,
    block_q: Option<usize>,
    block_k: Option<usize>,
    seed: u64,
}

/// The masks that are a band per row (the kernel masks their tiles lane-wise).
fn band_mask() -> BoxedStrategy<MaskChoice> {
    prop_oneof![
        Just(MaskChoice::None),
        Just(MaskChoice::Causal),
        (1usize..40).prop_map(MaskChoice::Window),
        proptest::collection::vec(0u8..=4, 2).prop_map(MaskChoice::Padding),
    ]
    .boxed()
}

/// Block-sparse and file masks (masked element by element).
fn sparse_mask() -> BoxedStrategy<MaskChoice> {
    prop_oneof![
        (0usize..2, 0usize..2, 0usize..3, 1usize..40).prop_map(
            |(window, globals, random, block)| {
                MaskChoice::BigBird(BigBird {
                    window,
                    globals,
                    random,
                    block,
                })
            }
        ),
        Just(MaskChoice::FileKeep),
        Just(MaskChoice::FileAdditive),
    ]
    .boxed()
}

fn case(masks: BoxedStrategy<MaskChoice>) -> impl Strategy<Value = Case> {
    (
        (
            1usize..=2,
            prop_oneof![Just(1usize), Just(2), Just(3), Just(4)],
            0usize..3,
        ),
        (1usize..=300, 1usize..=300, 1usize..=160, 1usize..=160),
        masks,
        any::<bool>(),
        (
            prop_oneof![Just(None), (1usize..80).prop_map(Some)],
            prop_oneof![Just(None), (1usize..160).prop_map(Some)],
        ),
        any::<u64>(),
    )
        .prop_map(
            |((batch, heads, group_pick), (n_q, n_k, d, dv), mask, alibi, (bq, bk), seed)| {
                // GQA: kv_heads divides heads (MHA, MQA or in between).
                let divisors: Vec<usize> = (1..=heads).filter(|g| heads % g == 0).collect();
                let kv_heads = divisors[group_pick % divisors.len()];
                let pairs = batch * heads * n_q * n_k;
                let room = (CASE_BUDGET / pairs).max(2);
                let (d, dv) = if d + dv > room {
                    ((d * room / (d + dv)).max(1), (dv * room / (d + dv)).max(1))
                } else {
                    (d, dv)
                };
                Case {
                    batch,
                    heads,
                    kv_heads,
                    n_q,
                    n_k,
                    d,
                    dv,
                    mask,
                    alibi,
                    block_q: bq,
                    block_k: bk,
                    seed,
                }
            },
        )
}

struct Problem {
    shape: ProblemShape,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    spec: AttnSpec,
    _dir: Option<tempfile::TempDir>,
}

fn uniform(rng: &mut ChaCha8Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect()
}

fn write_mask(path: &Path, c: &Case, rng: &mut ChaCha8Rng, keep: bool) {
    // Broadcast shapes too: [Nq,Nk], [H,Nq,Nk] or [B,H,Nq,Nk].
    let shape: Vec<usize> = match rng.random_range(0..3) {
        0 => vec![c.n_q, c.n_k],
        1 => vec![c.heads, c.n_q, c.n_k],
        _ => vec![c.batch, c.heads, c.n_q, c.n_k],
    };
    let len: usize = shape.iter().product();
    let data: Vec<f64> = (0..len)
        .map(|_| {
            if keep {
                if rng.random_range(0.0..1.0) < 0.6 {
                    1.0
                } else {
                    0.0
                }
            } else if rng.random_range(0.0..1.0) < 0.3 {
                f64::NEG_INFINITY
            } else {
                rng.random_range(-3.0..3.0)
            }
        })
        .collect();
    let mut data = ArrayD::from_shape_vec(IxDyn(&shape), data).unwrap();
    if keep {
        // At least one 1, so the file reads as a keep-mask, not as additive zeros.
        data.as_slice_mut().unwrap()[0] = 1.0;
    }
    data.write_npy(std::fs::File::create(path).unwrap())
        .unwrap();
}

fn problem(c: &Case) -> Problem {
    let mut rng = ChaCha8Rng::seed_from_u64(c.seed);
    let shape = ProblemShape::from_dims(
        [c.batch, c.heads, c.n_q, c.d],
        [c.batch, c.kv_heads, c.n_k, c.d],
        [c.batch, c.kv_heads, c.n_k, c.dv],
    )
    .unwrap();
    let q = uniform(&mut rng, c.batch * c.heads * c.n_q * c.d);
    let k = uniform(&mut rng, c.batch * c.kv_heads * c.n_k * c.d);
    let v = uniform(&mut rng, c.batch * c.kv_heads * c.n_k * c.dv);
    let mut dir = None;
    let kind = match &c.mask {
        MaskChoice::None => MaskKind::None,
        MaskChoice::Causal => MaskKind::Causal,
        MaskChoice::Window(w) => MaskKind::Window(*w),
        MaskChoice::Padding(f) => MaskKind::Padding(
            (0..c.batch)
                .map(|b| c.n_k * f[b % f.len()] as usize / 4)
                .collect(),
        ),
        MaskChoice::BigBird(bb) => MaskKind::BigBird(*bb),
        MaskChoice::FileKeep | MaskChoice::FileAdditive => {
            let d = tempfile::tempdir().unwrap();
            let path = d.path().join("mask.npy");
            write_mask(&path, c, &mut rng, matches!(c.mask, MaskChoice::FileKeep));
            dir = Some(d);
            MaskKind::File(path)
        }
    };
    let mask = Mask::resolve(&kind, c.batch, c.heads, c.n_q, c.n_k).unwrap();
    let spec = AttnSpec::new(&shape, mask, c.alibi, None);
    Problem {
        shape,
        q,
        k,
        v,
        spec,
        _dir: dir,
    }
}

fn to4(x: &[f32], dims: [usize; 4]) -> Array4<f64> {
    Array4::from_shape_vec(dims, x.iter().map(|&v| v as f64).collect()).unwrap()
}

fn reference(p: &Problem) -> reference::AttnOutput {
    let s = p.shape;
    let q = to4(&p.q, [s.batch, s.heads, s.n_q, s.d]);
    let k = to4(&p.k, [s.batch, s.kv_heads, s.n_k, s.d]);
    let v = to4(&p.v, [s.batch, s.kv_heads, s.n_k, s.dv]);
    reference::attention(&s, q.view(), k.view(), v.view(), &p.spec)
}

/// Max abs error of out, relative to max |V|, and of lse; -inf rows must match exactly.
fn errors(
    p: &Problem,
    r: &reference::AttnOutput,
    k: &kernel::FlashOutput,
) -> Result<(f64, f64), String> {
    let vmax =
        p.v.iter()
            .fold(0.0f64, |a, &x| a.max(x.abs() as f64))
            .max(1e-30);
    let mut out_err = 0.0f64;
    for (a, &b) in r.out.iter().zip(&k.out) {
        if !b.is_finite() {
            return Err(format!("non-finite output {b}"));
        }
        out_err = out_err.max((a - b as f64).abs() / vmax);
    }
    let mut lse_err = 0.0f64;
    for (i, (&a, &b)) in r.lse.iter().zip(&k.lse).enumerate() {
        if a == f64::NEG_INFINITY || b == f32::NEG_INFINITY {
            if !(a == f64::NEG_INFINITY && b == f32::NEG_INFINITY) {
                return Err(format!("lse row {i}: reference {a}, kernel {b}"));
            }
            continue;
        }
        if b.is_nan() {
            return Err(format!("lse row {i} is NaN"));
        }
        lse_err = lse_err.max((a - b as f64).abs() / a.abs().max(1.0));
    }
    Ok((out_err, lse_err))
}

fn run(p: &Problem, tier: Tier, threads: usize, c: &Case) -> kernel::FlashOutput {
    let opts = KernelOptions {
        threads: Some(threads),
        tier: Some(tier),
        block_q: c.block_q,
        block_k: c.block_k,
    };
    kernel::attention(&p.shape, &p.q, &p.k, &p.v, &p.spec, &opts).unwrap()
}

fn check_case(c: &Case) -> Result<(), TestCaseError> {
    let p = problem(c);
    let r = reference(&p);
    let tiers = available_tiers();
    for &tier in &tiers {
        let k = run(&p, tier, 1, c);
        prop_assert_eq!(k.tier, tier);
        let (out_err, lse_err) =
            errors(&p, &r, &k).map_err(|e| TestCaseError::fail(format!("{tier}: {e}")))?;
        prop_assert!(out_err <= TOLERANCE, "{}: output error {:e}", tier, out_err);
        prop_assert!(lse_err <= TOLERANCE, "{}: lse error {:e}", tier, lse_err);
    }
    // Threads change who computes a row, never how: the same bits.
    let best = *tiers.last().unwrap();
    let one = run(&p, best, 1, c);
    let two = run(&p, best, 2, c);
    prop_assert!(
        bits(&one.out) == bits(&two.out) && bits(&one.lse) == bits(&two.lse),
        "1 vs 2 threads differ"
    );
    Ok(())
}

fn bits(x: &[f32]) -> Vec<u32> {
    x.iter().map(|v| v.to_bits()).collect()
}

proptest! {
    // 2 x 500 = 1,000 cases (two functions, so the two cores share them), each on every
    // available tier (scalar, AVX2 and AVX-512 on an AVX-512 x86 machine: 3,000 tier
    // checks), and on 2 threads for the best tier.
    #![proptest_config(ProptestConfig {
        cases: 500,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_tier_matches_the_reference_with_band_masks(c in case(band_mask())) {
        check_case(&c)?;
    }

    #[test]
    fn every_tier_matches_the_reference_with_sparse_and_file_masks(c in case(sparse_mask())) {
        check_case(&c)?;
    }
}

fn fixed(n_q: usize, n_k: usize, d: usize, dv: usize, mask: MaskChoice, alibi: bool) -> Case {
    Case {
        batch: 1,
        heads: 2,
        kv_heads: 1,
        n_q,
        n_k,
        d,
        dv,
        mask,
        alibi,
        block_q: None,
        block_k: None,
        seed: 7,
    }
}

#[test]
fn largest_head_dims_match() {
    for (d, dv) in [(256, 256), (160, 8), (3, 256)] {
        check_case(&fixed(70, 131, d, dv, MaskChoice::Causal, true)).unwrap();
    }
}

#[test]
fn huge_logits_stay_finite() {
    // scale 40 at d = 160: scores in the hundreds, exp(score) far beyond f32.
    let c = fixed(200, 300, 160, 64, MaskChoice::Causal, false);
    let mut p = problem(&c);
    p.spec.scale = 40.0;
    let r = reference(&p);
    for tier in available_tiers() {
        let k = run(&p, tier, 1, &c);
        assert!(k.out.iter().chain(&k.lse).all(|x| x.is_finite()), "{tier}");
        let (out_err, _) = errors(&p, &r, &k).unwrap();
        // The softmax is nearly one-hot here, so f32 score rounding barely shows.
        assert!(out_err < 1e-3, "{tier}: {out_err:e}");
    }
}

#[test]
fn fully_masked_rows_are_zero_with_lse_minus_inf() {
    // Nq > Nk with causal: the first Nq - Nk queries see no key at all.
    let c = fixed(50, 20, 16, 16, MaskChoice::Causal, true);
    let p = problem(&c);
    for tier in available_tiers() {
        let k = run(&p, tier, 2, &c);
        for h in 0..2 {
            for i in 0..30 {
                assert_eq!(k.lse[h * 50 + i], f32::NEG_INFINITY, "{tier} row {i}");
                assert!(k.out[(h * 50 + i) * 16..][..16].iter().all(|&x| x == 0.0));
            }
            assert!(k.lse[h * 50 + 30].is_finite());
        }
    }
    // padding:0 masks every key of the sequence.
    let c = fixed(9, 9, 5, 5, MaskChoice::Padding(vec![0]), false);
    let p = problem(&c);
    for tier in available_tiers() {
        let k = run(&p, tier, 1, &c);
        assert!(k.out.iter().all(|&x| x == 0.0) && k.lse.iter().all(|&x| x == f32::NEG_INFINITY));
    }
}

#[test]
fn causal_skips_are_exact_for_decode_shapes() {
    // One query against many keys (KV-cache decoding) and many queries against one key.
    for (n_q, n_k) in [(1, 300), (300, 1), (2, 257)] {
        for mask in [MaskChoice::Causal, MaskChoice::Window(5), MaskChoice::None] {
            check_case(&fixed(n_q, n_k, 64, 64, mask, false)).unwrap();
        }
    }
}

#[test]
fn bad_inputs_are_usage_errors() {
    let c = fixed(4, 4, 8, 8, MaskChoice::None, false);
    let p = problem(&c);
    let opts = KernelOptions::default();
    let err = kernel::attention(&p.shape, &p.q[1..], &p.k, &p.v, &p.spec, &opts).unwrap_err();
    assert!(err.to_string().contains("Q holds"), "{err}");
    let opts = KernelOptions {
        threads: Some(0),
        ..Default::default()
    };
    let err = kernel::attention(&p.shape, &p.q, &p.k, &p.v, &p.spec, &opts).unwrap_err();
    assert!(err.to_string().contains("--threads"), "{err}");
    assert_eq!(err.exit_code(), 2);
}
