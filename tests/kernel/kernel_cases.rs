//! Random attention problems for the kernel tests (forward in `kernel_vs_reference.rs`,
//! backward in `kernel_backward.rs`): odd lengths and head dims (not multiples of the tile
//! or the vector width), Nq != Nk, every mask kind (windows with and without sinks, file masks written to a temporary
//! .npy), ALiBi, GQA/MQA, random block sizes; inputs uniform in [-1, 1) from the case's
//! seed.
#![allow(dead_code)]

use std::path::Path;

use attnviz::engine::config::{BigBird, MaskKind};
use attnviz::engine::mask::Mask;
use attnviz::engine::problem::{AttnSpec, ProblemShape};
use ndarray::{Array4, ArrayD, IxDyn};
use ndarray_npy::WriteNpyExt;
use proptest::prelude::*;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[derive(Debug, Clone)]
pub enum MaskChoice {
    None,
    Causal,
    Window(usize),
    /// A window of W plus the first S keys (attention sinks).
    WindowSinks(usize, usize),
    /// Valid length per batch entry, as a fraction of Nk in quarters (0 = fully masked).
    Padding(Vec<u8>),
    BigBird(BigBird),
    /// A file mask: a 0/1 keep-mask, or additive biases with some -inf.
    FileKeep,
    FileAdditive,
}

#[derive(Debug, Clone)]
pub struct Case {
    pub batch: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub n_q: usize,
    pub n_k: usize,
    pub d: usize,
    pub dv: usize,
    pub mask: MaskChoice,
    pub alibi: bool,
    pub block_q: Option<usize>,
    pub block_k: Option<usize>,
    pub seed: u64,
}

/// How large a suite's cases may be.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Work of one case (B*H*Nq*Nk*(d+dv)); larger draws get smaller head dims so the
    /// f64 reference (unoptimised in test builds) keeps the suite fast.
    pub budget: usize,
    /// Largest Nq and Nk.
    pub max_n: usize,
    /// Largest d and dv.
    pub max_dim: usize,
    /// Largest explicit Bc (Br is below 80).
    pub max_block_k: usize,
}

/// The masks that are a band per row (the kernel masks their tiles lane-wise).
pub fn band_mask() -> BoxedStrategy<MaskChoice> {
    prop_oneof![
        Just(MaskChoice::None),
        Just(MaskChoice::Causal),
        (1usize..40).prop_map(MaskChoice::Window),
        (1usize..40, 1usize..20).prop_map(|(w, s)| MaskChoice::WindowSinks(w, s)),
        proptest::collection::vec(0u8..=4, 2).prop_map(MaskChoice::Padding),
    ]
    .boxed()
}

/// Block-sparse and file masks (masked element by element).
pub fn sparse_mask() -> BoxedStrategy<MaskChoice> {
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

/// Every mask kind.
pub fn any_mask() -> BoxedStrategy<MaskChoice> {
    prop_oneof![band_mask(), sparse_mask()].boxed()
}

pub fn case(masks: BoxedStrategy<MaskChoice>, lim: Limits) -> impl Strategy<Value = Case> {
    (
        (
            1usize..=2,
            prop_oneof![Just(1usize), Just(2), Just(3), Just(4)],
            0usize..3,
        ),
        (
            1usize..=lim.max_n,
            1usize..=lim.max_n,
            1usize..=lim.max_dim,
            1usize..=lim.max_dim,
        ),
        masks,
        any::<bool>(),
        (
            prop_oneof![Just(None), (1usize..80).prop_map(Some)],
            prop_oneof![Just(None), (1usize..lim.max_block_k).prop_map(Some)],
        ),
        any::<u64>(),
    )
        .prop_map(
            move |((batch, heads, group_pick), (n_q, n_k, d, dv), mask, alibi, (bq, bk), seed)| {
                // GQA: kv_heads divides heads (MHA, MQA or in between).
                let divisors: Vec<usize> = (1..=heads).filter(|g| heads % g == 0).collect();
                let kv_heads = divisors[group_pick % divisors.len()];
                let pairs = batch * heads * n_q * n_k;
                let room = (lim.budget / pairs).max(2);
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

/// A case's inputs: Q, K, V and an output gradient dO, and its resolved mask.
pub struct Problem {
    pub shape: ProblemShape,
    pub q: Vec<f32>,
    pub k: Vec<f32>,
    pub v: Vec<f32>,
    pub dout: Vec<f32>,
    pub spec: AttnSpec,
    /// Holds a file mask's folder until the problem is dropped.
    pub _dir: Option<tempfile::TempDir>,
}

pub fn uniform(rng: &mut ChaCha8Rng, n: usize) -> Vec<f32> {
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

pub fn problem(c: &Case) -> Problem {
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
        MaskChoice::WindowSinks(window, sinks) => MaskKind::WindowSinks {
            window: *window,
            sinks: *sinks,
        },
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
    let dout = uniform(&mut rng, c.batch * c.heads * c.n_q * c.dv);
    let mask = Mask::resolve(&kind, c.batch, c.heads, c.n_q, c.n_k).unwrap();
    let spec = AttnSpec::new(&shape, mask, c.alibi, None);
    Problem {
        shape,
        q,
        k,
        v,
        dout,
        spec,
        _dir: dir,
    }
}

pub fn to4(x: &[f32], dims: [usize; 4]) -> Array4<f64> {
    Array4::from_shape_vec(dims, x.iter().map(|&v| v as f64).collect()).unwrap()
}
