//! Properties of the engine on random inputs: softmax rows, causal zeros, RoPE's
//! relative positions, and .npy round trips in every rank and dtype.

use attnviz::commands::compute::apply_rope;
use attnviz::engine::config::{MaskKind, PeKind};
use attnviz::engine::npy::{self, NpyDtype};
use attnviz::engine::pe;
use attnviz::engine::pipeline::{ModelConfig, Pipeline, StageId};
use attnviz::engine::tensors;
use ndarray::{Array2, Array3, Array4, ArrayD, Dimension, IxDyn, s};
use proptest::prelude::*;

const WORDS: [&str; 10] = [
    "the", "cat", "sat", "on", "mat", "dog", "ran", "far", "注", "意",
];

fn mask_strategy() -> impl Strategy<Value = MaskKind> {
    prop_oneof![
        Just(MaskKind::None),
        Just(MaskKind::Causal),
        (1usize..5).prop_map(MaskKind::Window),
        (0usize..4).prop_map(|l| MaskKind::Padding(vec![l])),
        Just("bigbird:1,1,1,2".parse().unwrap()),
    ]
}

fn pe_strategy() -> impl Strategy<Value = PeKind> {
    prop_oneof![
        Just(PeKind::None),
        Just(PeKind::Sinusoidal),
        Just(PeKind::Learned),
        (2.0f64..20000.0).prop_map(|base| PeKind::Rope { base }),
        Just(PeKind::Alibi),
    ]
}

fn config_strategy() -> impl Strategy<Value = ModelConfig> {
    (
        prop::collection::vec(0usize..WORDS.len(), 4..10),
        prop_oneof![
            Just((1usize, 1usize)),
            Just((2, 1)),
            Just((4, 2)),
            Just((4, 4)),
            Just((6, 3))
        ],
        prop_oneof![Just(2usize), Just(4)],
        any::<u64>(),
        pe_strategy(),
        mask_strategy(),
        any::<bool>(),
    )
        .prop_map(
            |(words, (heads, kv_heads), d_head, seed, pe, mask, scaled)| ModelConfig {
                tokens: words.iter().map(|&w| WORDS[w].to_string()).collect(),
                d_model: heads * d_head,
                heads,
                kv_heads,
                seed,
                pe,
                mask,
                scaled,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Every row of weights sums to 1, or is all zeros when every key is masked;
    /// masked keys get exactly 0; causal and window never look ahead.
    #[test]
    fn softmax_rows_and_masks(c in config_strategy()) {
        let p = Pipeline::build(&c).unwrap();
        let n = c.tokens.len();
        for h in 0..c.heads {
            let a = &p.stage(StageId::Softmax).unwrap().matrices[h].data;
            for i in 0..n {
                let row = a.row(i);
                let sum: f64 = row.sum();
                let any_seen = (0..n).any(|j| !p.mask.is_masked(0, h, i, j));
                if any_seen {
                    prop_assert!((sum - 1.0).abs() < 1e-12, "row {i} sums to {sum}");
                } else {
                    prop_assert!(row.iter().all(|&w| w == 0.0));
                }
                for j in 0..n {
                    prop_assert!(row[j].is_finite() && row[j] >= 0.0);
                    if p.mask.is_masked(0, h, i, j) {
                        prop_assert_eq!(row[j], 0.0);
                    }
                    if matches!(c.mask, MaskKind::Causal | MaskKind::Window(_)) && j > i {
                        prop_assert_eq!(row[j], 0.0, "future key {} of query {}", j, i);
                    }
                }
            }
        }
        let out = &p.stage(StageId::OutputProjection).unwrap().matrices[0].data;
        prop_assert!(out.iter().all(|x| x.is_finite()));
        prop_assert_eq!(out.dim(), (n, c.d_model));
    }

    /// Under RoPE, moving every query and key by the same offset leaves q.k unchanged:
    /// the score depends only on the distance.
    #[test]
    fn rope_scores_depend_only_on_distance(
        seed in any::<u64>(),
        shift in -50i32..500,
        base in prop_oneof![Just(10000.0f64), 2.0f64..1e6],
    ) {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let q = Array2::from_shape_simple_fn((5, 8), || rng.random_range(-1.0..1.0));
        let k = Array2::from_shape_simple_fn((7, 8), || rng.random_range(-1.0..1.0));
        let scores = |offset: f64| {
            let (mut q, mut k) = (q.clone(), k.clone());
            pe::rope_rows(q.view_mut(), 2.0 + offset, base);
            pe::rope_rows(k.view_mut(), offset, base);
            q.dot(&k.t())
        };
        let (a, b) = (scores(0.0), scores(f64::from(shift)));
        let diff = (&a - &b).iter().fold(0f64, |m, x| m.max(x.abs()));
        prop_assert!(diff < 1e-9, "shift {shift}: {diff}");
    }
}

#[test]
fn compute_rope_aligns_queries_bottom_right() {
    let q0 = Array4::from_shape_fn((1, 2, 3, 4), |(_, h, i, c)| (h + i + c) as f64 * 0.3 - 1.0);
    let k0 = Array4::from_shape_fn((1, 1, 5, 4), |(_, _, j, c)| (j * c) as f64 * 0.1 - 0.5);
    let (mut q, mut k) = (q0.clone(), k0.clone());
    apply_rope(&mut q, &mut k, 10000.0);
    for h in 0..2 {
        let mut want = q0.slice(s![0, h, .., ..]).to_owned();
        // 3 queries against 5 keys: they stand at positions 2, 3, 4
        pe::rope_rows(want.view_mut(), 2.0, 10000.0);
        assert_eq!(q.slice(s![0, h, .., ..]), want);
    }
    let mut want = k0.slice(s![0, 0, .., ..]).to_owned();
    pe::rope_rows(want.view_mut(), 0.0, 10000.0);
    assert_eq!(k.slice(s![0, 0, .., ..]), want);
}

#[test]
fn npy_round_trips_in_every_rank_and_dtype() {
    let dir = tempfile::tempdir().unwrap();
    for rank in 2..=4 {
        for dtype in [NpyDtype::F32, NpyDtype::F64] {
            let shape: Vec<usize> = [2, 3, 5, 4][4 - rank..].to_vec();
            let a = ArrayD::from_shape_fn(IxDyn(&shape), |ix| {
                ix.as_array_view().iter().sum::<usize>() as f64 * 0.25 - 1.0
            });
            let path = dir.path().join(format!("t{rank}{dtype:?}.npy"));
            npy::write(&path, &a, dtype).unwrap();
            let info = npy::read_info(&path).unwrap();
            assert_eq!((info.dtype, info.shape.clone()), (dtype, shape.clone()));
            let t = tensors::load(&path, "--q").unwrap();
            assert_eq!((t.rank, t.dtype), (rank, dtype));
            assert_eq!(t.data.len(), a.len());
            assert_eq!(
                t.data.iter().copied().collect::<Vec<_>>(),
                a.iter().copied().collect::<Vec<_>>()
            );
            // outputs come back in the rank and dtype of the tensor they are "like"
            let out = dir.path().join("out.npy");
            tensors::write_like(&out, t.data.clone(), &t).unwrap();
            let back = npy::read(&out).unwrap();
            assert_eq!((back.dtype, back.data.shape()), (dtype, &shape[..]));
            let rows = dir.path().join("rows.npy");
            let (b, h, n, _) = t.data.dim();
            let lse = Array3::from_elem((b, h, n), f64::NEG_INFINITY);
            tensors::write_rows_like(&rows, lse, &t).unwrap();
            let back = npy::read(&rows).unwrap();
            assert_eq!(back.data.shape(), &shape[..rank - 1]);
            assert!(back.data.iter().all(|&x| x == f64::NEG_INFINITY));
        }
    }
}

#[test]
fn single_sequence_refuses_a_batch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b.npy");
    npy::write(&path, &ArrayD::zeros(IxDyn(&[2, 1, 3, 4])), NpyDtype::F32).unwrap();
    let t = tensors::load(&path, "--q").unwrap();
    let e = t.single_sequence("--q").unwrap_err().to_string();
    assert!(e.contains("b.npy") && e.contains("batch of 2"), "{e}");
    npy::write(&path, &ArrayD::zeros(IxDyn(&[3, 4])), NpyDtype::F32).unwrap();
    let t = tensors::load(&path, "--q").unwrap();
    assert_eq!(t.single_sequence("--q").unwrap().dim(), (1, 3, 4));
}

#[test]
fn attention_weights_load_per_layer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.npy");
    let a = ArrayD::from_shape_fn(IxDyn(&[2, 3, 4, 4]), |ix| ix[0] as f64 + 0.1 * ix[1] as f64);
    npy::write(&path, &a, NpyDtype::F32).unwrap();
    let layers = tensors::load_attention(&path).unwrap();
    assert_eq!(layers.len(), 2);
    assert_eq!(layers[1].dim(), (3, 4, 4));
    assert!((layers[1][[2, 0, 0]] - 1.2).abs() < 1e-6);
    npy::write(&path, &ArrayD::zeros(IxDyn(&[4, 4])), NpyDtype::F64).unwrap();
    assert_eq!(tensors::load_attention(&path).unwrap()[0].dim(), (1, 4, 4));
    npy::write(&path, &ArrayD::zeros(IxDyn(&[4])), NpyDtype::F64).unwrap();
    let e = tensors::load_attention(&path).unwrap_err().to_string();
    assert!(
        e.contains("--attn has rank 1") && e.contains("[layers,H,n,n]"),
        "{e}"
    );
}
