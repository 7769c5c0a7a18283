//! KV-cache decoding against full causal attention of the reference path, and the GQA
//! comparison.

use attnviz::cli::Dtype;
use attnviz::engine::config::MaskKind;
use attnviz::engine::gqa;
use attnviz::engine::kv_cache::{self, CacheLayout, DecodeOptions};
use attnviz::engine::mask::Mask;
use attnviz::engine::problem::{AttnSpec, ProblemShape};
use attnviz::engine::reference;
use ndarray::{Array3, Array4, Axis};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn random(rng: &mut ChaCha8Rng, shape: (usize, usize, usize)) -> Array3<f64> {
    Array3::from_shape_fn(shape, |_| rng.random_range(-2.0..2.0))
}

/// The reference's output [H, n, dv] for one batch entry under `mask`.
fn reference_out(
    q: &Array3<f64>,
    k: &Array3<f64>,
    v: &Array3<f64>,
    mask: &MaskKind,
    scale: Option<f64>,
) -> Array3<f64> {
    let to4 = |a: &Array3<f64>| -> Array4<f64> { a.clone().insert_axis(Axis(0)) };
    let (q4, k4, v4) = (to4(q), to4(k), to4(v));
    let dims = |a: &Array4<f64>| -> [usize; 4] { a.shape().try_into().unwrap() };
    let shape = ProblemShape::from_dims(dims(&q4), dims(&k4), dims(&v4)).unwrap();
    let mask = Mask::resolve(mask, 1, shape.heads, shape.n_q, shape.n_k).unwrap();
    let spec = AttnSpec::new(&shape, mask, false, scale);
    reference::attention(&shape, q4.view(), k4.view(), v4.view(), &spec)
        .out
        .index_axis_move(Axis(0), 0)
}

fn max_abs_diff(a: &Array3<f64>, b: &Array3<f64>) -> f64 {
    assert_eq!(a.dim(), b.dim());
    a.iter()
        .zip(b.iter())
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

#[test]
fn cached_decoding_equals_full_causal_attention() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for (heads, kv_heads, n, d, dv) in [
        (1, 1, 1, 3, 3),
        (2, 2, 17, 8, 8),
        (4, 2, 23, 6, 5),
        (6, 1, 9, 4, 7),
    ] {
        let q = random(&mut rng, (heads, n, d));
        let k = random(&mut rng, (kv_heads, n, d));
        let v = random(&mut rng, (kv_heads, n, dv));
        let run = kv_cache::decode(q.view(), k.view(), v.view(), DecodeOptions::default()).unwrap();
        let want = reference_out(&q, &k, &v, &MaskKind::Causal, None);
        let diff = max_abs_diff(&run.output(), &want);
        assert!(diff < 1e-12, "H {heads} G {kv_heads} n {n}: {diff}");
        assert_eq!(run.steps.len(), n);
        assert_eq!(
            run.total_cached_madds(),
            (heads * n * (n + 1) / 2 * (d + dv)) as u64
        );
        // Without a cache every step redoes the prefix: sum over t of (t+1)(t+2)/2 rows.
        let rows: usize = (0..n).map(|t| (t + 1) * (t + 2) / 2).sum();
        assert_eq!(
            run.total_recompute_madds(),
            (heads * rows * (d + dv)) as u64
        );
        for step in &run.steps {
            assert!(step.recompute_max_abs_diff.unwrap() < 1e-12);
        }
    }
}

#[test]
fn each_step_attends_over_exactly_the_cache_it_grew() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let (q, k, v) = (
        random(&mut rng, (2, 6, 4)),
        random(&mut rng, (1, 6, 4)),
        random(&mut rng, (1, 6, 4)),
    );
    let run = kv_cache::decode(q.view(), k.view(), v.view(), DecodeOptions::default()).unwrap();
    for (t, step) in run.steps.iter().enumerate() {
        assert_eq!(step.position, t);
        assert_eq!(step.cache_positions, (0..=t).collect::<Vec<_>>());
        assert_eq!(step.weights.dim(), (2, t + 1));
        // One KV head (MQA): (t+1) rows of K and V, 4 + 4 numbers each, f64.
        assert_eq!(step.cache_elements, ((t + 1) * 8) as u64);
        assert_eq!(step.cache_bytes, ((t + 1) * 8 * 8) as u64);
        // The step's weights reproduce its output.
        let head0 = step
            .weights
            .row(0)
            .dot(&v.index_axis(Axis(0), 0).slice(ndarray::s![..=t, ..]));
        let err = (&head0 - &step.out.row(0))
            .iter()
            .fold(0.0f64, |m, x| m.max(x.abs()));
        assert!(err < 1e-12);
    }
}

#[test]
fn a_rolling_buffer_decodes_sliding_window_attention() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    for window in [1, 3, 5, 40] {
        let (q, k, v) = (
            random(&mut rng, (2, 19, 5)),
            random(&mut rng, (2, 19, 5)),
            random(&mut rng, (2, 19, 3)),
        );
        let opts = DecodeOptions {
            layout: CacheLayout::Rolling { window },
            scale: Some(0.3),
            recompute: false,
        };
        let run = kv_cache::decode(q.view(), k.view(), v.view(), opts).unwrap();
        let want = reference_out(&q, &k, &v, &MaskKind::Window(window), Some(0.3));
        assert!(max_abs_diff(&run.output(), &want) < 1e-12, "W {window}");
        for step in &run.steps {
            assert!(step.cache_len <= window);
            assert_eq!(step.written_slot, step.position % window);
            assert!(step.recompute_max_abs_diff.is_none());
            assert_eq!(
                step.recompute_madds,
                kv_cache::recompute_step_madds(2, step.position, opts.layout, 5, 3)
            );
        }
    }
}

#[test]
fn gqa_pooling_moves_the_output_more_as_groups_shrink() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let (h, n, d) = (8, 12, 4);
    let q = random(&mut rng, (h, n, d));
    let k = random(&mut rng, (h, n, d));
    let v = random(&mut rng, (h, n, d));
    let cmp = gqa::compare(
        q.view(),
        k.view(),
        v.view(),
        &MaskKind::Causal,
        None,
        Dtype::F16,
    )
    .unwrap();
    let want = reference_out(&q, &k, &v, &MaskKind::Causal, None);
    assert!(max_abs_diff(&cmp.mha_out, &want) == 0.0);
    let groups: Vec<usize> = cmp.choices.iter().map(|c| c.kv_heads).collect();
    assert_eq!(groups, [1, 2, 4, 8]);
    for c in &cmp.choices {
        // Query head h reads K/V head h / (H / g).
        for (qh, &kv) in c.kv_head_of.iter().enumerate() {
            assert_eq!(kv, qh / (h / c.kv_heads));
        }
        assert_eq!(c.cache_bytes, (n * c.kv_heads * 2 * d * 2) as u64);
        assert_eq!(c.k.dim(), (c.kv_heads, n, d));
        // The pooled K of group 0 is the mean of the heads that share it.
        let members = &c.query_heads_of[0];
        let mean = members.iter().map(|&m| k[[m, 3, 1]]).sum::<f64>() / members.len() as f64;
        assert!((c.k[[0, 3, 1]] - mean).abs() < 1e-15);
        // The grouped output is the reference on the pooled K/V.
        let direct = reference_out(&q, &c.k, &c.v, &MaskKind::Causal, None);
        assert!(max_abs_diff(&direct, &c.out) < 1e-15);
    }
    assert_eq!(cmp.choices[3].max_abs_diff, 0.0);
    assert!(cmp.choices[0].rel_diff > cmp.choices[2].rel_diff);
    assert!(cmp.choices[0].max_abs_diff > 0.01);
}
