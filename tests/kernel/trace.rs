//! The instrumented run (engine::flash::trace): the worked example, every event against
//! an independent online softmax, and its output against the fast kernel and the
//! reference.

use attnviz::engine::config::MaskKind;
use attnviz::engine::flash::{self, FlashTrace, LoopOrder, TraceOptions};
use attnviz::engine::mask::Mask;
use attnviz::engine::problem::{AttnSpec, ProblemShape};
use attnviz::engine::reference;
use attnviz::kernel::{self, BLOCK_K, BLOCK_Q, KernelOptions, available_tiers};
use ndarray::{Array2, Array4};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn worked_example() -> (Array2<f32>, Array2<f32>, Array2<f32>) {
    let q = Array2::from_shape_vec(
        (4, 4),
        vec![
            1., 0., 2., 0., 0., 1., 1., 0., 1., 1., 0., 1., 0., 2., 1., 1.,
        ],
    );
    let k = Array2::from_shape_vec(
        (4, 4),
        vec![
            2., 1., 0., 0., 0., 1., 1., 0., 1., 0., 1., 1., 0., 0., 2., 1.,
        ],
    );
    let v = Array2::from_shape_vec((4, 2), vec![1., 0., 0., 1., 1., 1., 2., 1.]);
    (q.unwrap(), k.unwrap(), v.unwrap())
}

fn spec(kind: &MaskKind, n_q: usize, n_k: usize, scale: f64) -> AttnSpec {
    AttnSpec {
        mask: Mask::resolve(kind, 1, 1, n_q, n_k).unwrap(),
        alibi: None,
        scale,
    }
}

fn run(
    q: &Array2<f32>,
    k: &Array2<f32>,
    v: &Array2<f32>,
    sp: &AttnSpec,
    br: usize,
    bc: usize,
    lo: LoopOrder,
) -> FlashTrace {
    let opts = TraceOptions {
        br,
        bc,
        loop_order: lo,
        tier: None,
    };
    flash::trace(q.view(), k.view(), v.view(), sp, opts).unwrap()
}

#[test]
fn worked_example_row_0_with_bc_2() {
    let (q, k, v) = worked_example();
    let sp = spec(&MaskKind::None, 4, 4, 0.5);
    for lo in [LoopOrder::Fa2, LoopOrder::Fa1] {
        for br in [1, 2, 4] {
            let t = run(&q, &k, &v, &sp, br, 2, lo);
            let row0: Vec<_> = t.events.iter().filter(|e| e.q_block == 0).collect();
            assert_eq!(row0.len(), 2);
            let (first, second) = (row0[0], row0[1]);
            assert_eq!((first.k_block, second.k_block), (0, 1));
            // Scores of row 0: 1, 1 | 1.5, 2.
            assert!((first.m[0] - 1.0).abs() < 1e-6, "{:?}", first.m);
            assert!((first.l[0] - 2.0).abs() < 1e-6, "{:?}", first.l);
            assert!((second.m[0] - 2.0).abs() < 1e-6, "{:?}", second.m);
            assert!((second.l[0] - 2.3423).abs() < 1e-4, "{:?}", second.l);
            assert!(
                (second.alpha[0] - (-1.0f64).exp()).abs() < 1e-6,
                "{:?}",
                second.alpha
            );
            // o after the first block: the mean of V rows 0 and 1; at the end the result.
            assert!((first.o[0][0] - 0.5).abs() < 1e-6 && (first.o[0][1] - 0.5).abs() < 1e-6);
            assert!(
                (second.o[0][0] - 1.2699).abs() < 1e-4 && (second.o[0][1] - 0.8429).abs() < 1e-4
            );
            assert!((t.out[0][0] - 1.2699).abs() < 1e-4 && (t.out[0][1] - 0.8429).abs() < 1e-4);
        }
    }
}

/// An online softmax computed independently, in f64, over the keys of blocks 0..=kb.
fn expected_state(
    q: &Array2<f32>,
    k: &Array2<f32>,
    v: &Array2<f32>,
    sp: &AttnSpec,
    i: usize,
    keys_seen: usize,
) -> (f64, f64, Vec<f64>) {
    let scores: Vec<(usize, f64)> = (0..keys_seen)
        .filter_map(|j| {
            let bias = sp.mask.bias(0, 0, i, j);
            (bias != f64::NEG_INFINITY).then(|| {
                let dot: f64 = (0..q.ncols())
                    .map(|c| q[[i, c]] as f64 * k[[j, c]] as f64)
                    .sum();
                (j, dot * sp.scale + bias)
            })
        })
        .collect();
    let m = scores.iter().map(|s| s.1).fold(f64::NEG_INFINITY, f64::max);
    if m == f64::NEG_INFINITY {
        return (m, 0.0, vec![0.0; v.ncols()]);
    }
    let l: f64 = scores.iter().map(|s| (s.1 - m).exp()).sum();
    let o = (0..v.ncols())
        .map(|c| {
            scores
                .iter()
                .map(|&(j, s)| (s - m).exp() * v[[j, c]] as f64)
                .sum::<f64>()
                / l
        })
        .collect();
    (m, l, o)
}

fn random(
    n_q: usize,
    n_k: usize,
    d: usize,
    dv: usize,
    seed: u64,
) -> (Array2<f32>, Array2<f32>, Array2<f32>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut fill =
        |r: usize, c: usize| Array2::from_shape_fn((r, c), |_| rng.random_range(-2.0f32..2.0));
    (fill(n_q, d), fill(n_k, d), fill(n_k, dv))
}

#[test]
fn every_event_is_an_online_softmax_over_the_keys_seen() {
    let masks = ["none", "causal", "window:3", "padding:5", "bigbird:1,1,1,3"];
    let mut seed = 1;
    for mask in masks {
        for (n_q, n_k, br, bc) in [(9, 11, 4, 3), (13, 7, 5, 2), (6, 6, 1, 1)] {
            for lo in [LoopOrder::Fa2, LoopOrder::Fa1] {
                seed += 1;
                let (q, k, v) = random(n_q, n_k, 5, 3, seed);
                let sp = spec(&mask.parse().unwrap(), n_q, n_k, 0.6);
                let t = run(&q, &k, &v, &sp, br, bc, lo);
                assert_eq!(t.events.len(), t.q_blocks() * t.k_blocks());
                let mut last_m = vec![f64::NEG_INFINITY; n_q];
                for e in &t.events {
                    let seen = ((e.k_block + 1) * bc).min(n_k);
                    for (r, i) in e.rows.clone().enumerate() {
                        let (m, l, o) = expected_state(&q, &k, &v, &sp, i, seen);
                        let ctx = format!(
                            "{mask} {n_q}x{n_k} {lo:?} tile ({},{}) row {i}",
                            e.q_block, e.k_block
                        );
                        if m == f64::NEG_INFINITY {
                            assert_eq!(e.m[r], f64::NEG_INFINITY, "{ctx}");
                            assert_eq!(e.l[r], 0.0, "{ctx}");
                        } else {
                            assert!(
                                (e.m[r] - m).abs() <= 1e-5 * (1.0 + m.abs()),
                                "{ctx}: m {} vs {m}",
                                e.m[r]
                            );
                            assert!((e.l[r] - l).abs() <= 1e-5 * l, "{ctx}: l {} vs {l}", e.l[r]);
                        }
                        for (a, b) in e.o[r].iter().zip(&o) {
                            assert!(
                                (a - b).abs() <= 2e-5 * 2.0,
                                "{ctx}: o {:?} vs {o:?}",
                                e.o[r]
                            );
                        }
                        // The rescale factor links consecutive states of the row.
                        let want_alpha = if e.skipped || last_m[i] == e.m[r] {
                            1.0
                        } else {
                            (last_m[i] - e.m[r]).exp()
                        };
                        assert!(
                            (e.alpha[r] - want_alpha).abs() <= 1e-5,
                            "{ctx}: alpha {} vs {want_alpha}",
                            e.alpha[r]
                        );
                        last_m[i] = e.m[r];
                    }
                    // The tile's scores, as an independent dot product with the bias.
                    let cols = e.k_block * bc..((e.k_block + 1) * bc).min(n_k);
                    match &e.s {
                        None => assert!(e.skipped),
                        Some(tile) => {
                            assert_eq!(tile.len(), e.rows.len());
                            for (r, i) in e.rows.clone().enumerate() {
                                for (jj, j) in cols.clone().enumerate() {
                                    let bias = sp.mask.bias(0, 0, i, j);
                                    let got = tile[r][jj];
                                    if bias == f64::NEG_INFINITY {
                                        assert_eq!(got, f64::NEG_INFINITY, "{mask} s[{i}][{j}]");
                                    } else {
                                        let dot: f64 = (0..5)
                                            .map(|c| q[[i, c]] as f64 * k[[j, c]] as f64)
                                            .sum();
                                        let want = dot * sp.scale + bias;
                                        assert!(
                                            (got - want).abs() < 1e-5 * (1.0 + want.abs()),
                                            "{mask} s[{i}][{j}] {got} vs {want}"
                                        );
                                    }
                                }
                            }
                        }
                    }
                    if e.skipped {
                        assert_eq!(
                            sp.mask.tile_class(
                                0,
                                0,
                                e.rows.clone(),
                                e.k_block * bc..((e.k_block + 1) * bc).min(n_k)
                            ),
                            attnviz::engine::mask::TileClass::Empty
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn causal_tiles_above_the_diagonal_are_skipped() {
    let (q, k, v) = random(8, 8, 4, 4, 3);
    let sp = spec(&MaskKind::Causal, 8, 8, 0.5);
    let t = run(&q, &k, &v, &sp, 2, 2, LoopOrder::Fa2);
    for e in &t.events {
        assert_eq!(
            e.skipped,
            e.k_block > e.q_block,
            "tile ({},{})",
            e.q_block,
            e.k_block
        );
    }
    assert_eq!(t.events.iter().filter(|e| e.skipped).count(), 6);
}

#[test]
fn instrumented_output_equals_the_fast_kernel_and_the_reference() {
    for mask in [MaskKind::None, MaskKind::Causal, MaskKind::Window(40)] {
        let (n_q, n_k, d) = (150, 200, 32);
        let (q, k, v) = random(n_q, n_k, d, d, 9);
        let sp = spec(&mask, n_q, n_k, 1.0 / (d as f64).sqrt());
        let shape =
            ProblemShape::from_dims([1, 1, n_q, d], [1, 1, n_k, d], [1, 1, n_k, d]).unwrap();
        let to4 = |a: &Array2<f32>| {
            Array4::from_shape_vec(
                (1, 1, a.nrows(), a.ncols()),
                a.iter().map(|&x| x as f64).collect(),
            )
            .unwrap()
        };
        let r = reference::attention(&shape, to4(&q).view(), to4(&k).view(), to4(&v).view(), &sp);
        for tier in available_tiers() {
            let opts = KernelOptions {
                tier: Some(tier),
                threads: Some(1),
                ..Default::default()
            };
            let fast = kernel::attention(
                &shape,
                q.as_slice().unwrap(),
                k.as_slice().unwrap(),
                v.as_slice().unwrap(),
                &sp,
                &opts,
            )
            .unwrap();
            for lo in [LoopOrder::Fa2, LoopOrder::Fa1] {
                let to = TraceOptions {
                    br: BLOCK_Q,
                    bc: BLOCK_K,
                    loop_order: lo,
                    tier: Some(tier),
                };
                let t = flash::trace(q.view(), k.view(), v.view(), &sp, to).unwrap();
                // Same tiles, same code, same order per row: the same bits.
                let traced: Vec<f32> = t.out.iter().flatten().map(|&x| x as f32).collect();
                assert_eq!(traced, fast.out, "{tier} {lo:?} {mask}");
                let traced_lse: Vec<f32> = t.lse.iter().map(|&x| x as f32).collect();
                assert_eq!(traced_lse, fast.lse, "{tier} {lo:?} {mask}");
                // And the last event of each block is the block's output.
                for e in t.events.iter().filter(|e| e.k_block + 1 == t.k_blocks()) {
                    for (r, i) in e.rows.clone().enumerate() {
                        assert_eq!(
                            e.o[r].iter().map(|&x| x as f32).collect::<Vec<_>>(),
                            t.out[i].iter().map(|&x| x as f32).collect::<Vec<_>>()
                        );
                    }
                }
            }
            // Other block sizes: other rounding, same answer.
            let to = TraceOptions {
                br: 7,
                bc: 13,
                loop_order: LoopOrder::Fa1,
                tier: Some(tier),
            };
            let t = flash::trace(q.view(), k.view(), v.view(), &sp, to).unwrap();
            let err = t
                .out
                .iter()
                .flatten()
                .zip(r.out.iter())
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            assert!(err < 2e-5, "{tier}: {err:e}");
        }
    }
}

#[test]
fn bad_blocks_and_shapes_are_usage_errors() {
    let (q, k, v) = worked_example();
    let sp = spec(&MaskKind::None, 4, 4, 0.5);
    let opts = TraceOptions {
        br: 0,
        bc: 2,
        loop_order: LoopOrder::Fa2,
        tier: None,
    };
    let err = flash::trace(q.view(), k.view(), v.view(), &sp, opts).unwrap_err();
    assert_eq!(err.exit_code(), 2, "{err}");
    let opts = TraceOptions {
        br: 2,
        bc: 2,
        loop_order: LoopOrder::Fa2,
        tier: None,
    };
    let err =
        flash::trace(q.view(), k.slice(ndarray::s![.., ..3]), v.view(), &sp, opts).unwrap_err();
    assert_eq!(err.exit_code(), 2, "{err}");
}
