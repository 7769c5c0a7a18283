//! Each stage on small hand-checked cases, and the lesson pipeline checked against the
//! f64 reference attention.

use ndarray::{Array2, Array3, Array4, Axis, array, s};

use super::*;
use crate::engine::problem::AttnSpec;
use crate::engine::reference;

/// A small worked example: Q, K [4 x 4], V [4 x 2], one head.
fn worked() -> (Array3<f64>, Array3<f64>, Array3<f64>) {
    let q = array![
        [1., 0., 2., 0.],
        [0., 1., 1., 0.],
        [1., 1., 0., 1.],
        [0., 2., 1., 1.]
    ];
    let k = array![
        [2., 1., 0., 0.],
        [0., 1., 1., 0.],
        [1., 0., 1., 1.],
        [0., 0., 2., 1.]
    ];
    let v = array![[1., 0.], [0., 1.], [1., 1.], [2., 1.]];
    (
        q.insert_axis(Axis(0)),
        k.insert_axis(Axis(0)),
        v.insert_axis(Axis(0)),
    )
}

fn worked_pipeline(mask: &str, pe: PeKind, scaled: bool) -> Pipeline {
    let (q, k, v) = worked();
    Pipeline::from_qkv(Vec::new(), q, k, v, &mask.parse().unwrap(), pe, scaled).unwrap()
}

fn m(p: &Pipeline, id: StageId, h: usize) -> &Array2<f64> {
    &p.stage(id).unwrap().matrices[h].data
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol || (a == b)
}

fn assert_rows_close(got: ndarray::ArrayView1<f64>, want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert!(close(*g, *w, tol), "got {got:?}, want {want:?}");
    }
}

#[test]
fn worked_example_stage_by_stage() {
    let p = worked_pipeline("none", PeKind::None, true);
    assert_eq!(p.scale, Some(0.5));
    // q0 = [1,0,2,0] against each key: 2, 2, 3, 4
    assert_rows_close(m(&p, StageId::Scores, 0).row(0), &[2., 2., 3., 4.], 0.0);
    assert_rows_close(m(&p, StageId::Scale, 0).row(0), &[1., 1., 1.5, 2.], 0.0);
    // softmax of [1, 1, 1.5, 2]: e^-1, e^-1, e^-0.5, 1 over their sum 2.3423
    assert_rows_close(
        m(&p, StageId::Softmax, 0).row(0),
        &[0.15706, 0.15706, 0.25895, 0.42693],
        1e-5,
    );
    assert_rows_close(
        m(&p, StageId::WeightedSum, 0).row(0),
        &[1.2699, 0.8429],
        1e-4,
    );
    assert_eq!(m(&p, StageId::Concat, 0), m(&p, StageId::WeightedSum, 0));
    // no RoPE, ALiBi or mask: those stages pass the matrices through
    for id in [
        StageId::Rope,
        StageId::Alibi,
        StageId::Mask,
        StageId::OutputProjection,
    ] {
        assert!(!p.stage(id).unwrap().active, "{id:?}");
    }
    assert_eq!(m(&p, StageId::Mask, 0), m(&p, StageId::Scale, 0));
    assert_eq!(
        p.stage(StageId::OutputProjection).unwrap().matrices,
        p.stage(StageId::Concat).unwrap().matrices
    );
}

#[test]
fn loaded_tensors_have_no_stages_before_split_heads() {
    let p = worked_pipeline("none", PeKind::None, true);
    assert!(p.stages.iter().map(|s| s.id).eq(StageId::ALL));
    for id in &StageId::ALL[..4] {
        let st = p.stage(*id).unwrap();
        assert!(!st.active && st.matrices.is_empty(), "{id:?}");
        assert!(st.formula.starts_with("not available"));
    }
    assert_eq!(p.source, Source::Tensors);
    assert_eq!(p.key_labels, ["t0", "t1", "t2", "t3"]);
}

#[test]
fn unscaled_scores_skip_the_scale_stage() {
    let p = worked_pipeline("none", PeKind::None, false);
    let scale = p.stage(StageId::Scale).unwrap();
    assert!(!scale.active);
    assert!(scale.formula.contains("inactive") && scale.formula.contains("sqrt"));
    assert_eq!(m(&p, StageId::Scale, 0), m(&p, StageId::Scores, 0));
    assert_eq!(p.scale, None);
}

#[test]
fn causal_mask_row_0_sees_only_key_0() {
    let p = worked_pipeline("causal", PeKind::None, true);
    let masked = m(&p, StageId::Mask, 0);
    assert_eq!(masked[[0, 0]], 1.0);
    assert!(
        masked
            .row(0)
            .iter()
            .skip(1)
            .all(|&x| x == f64::NEG_INFINITY)
    );
    let a = m(&p, StageId::Softmax, 0);
    assert_rows_close(a.row(0), &[1., 0., 0., 0.], 0.0);
    for i in 0..4 {
        for j in i + 1..4 {
            assert_eq!(a[[i, j]], 0.0);
        }
    }
    assert_rows_close(m(&p, StageId::WeightedSum, 0).row(0), &[1., 0.], 0.0);
}

#[test]
fn fully_masked_rows_are_zero_not_nan() {
    let p = worked_pipeline("padding:0", PeKind::None, true);
    assert!(m(&p, StageId::Softmax, 0).iter().all(|&w| w == 0.0));
    assert!(m(&p, StageId::WeightedSum, 0).iter().all(|&x| x == 0.0));
    let stats = p.row_stats(0);
    assert_eq!(stats.len(), 4);
    assert!(
        stats
            .iter()
            .all(|s| s.entropy == 0.0 && s.max_weight == 0.0)
    );
    let e = p.explain(StageId::Softmax, 0, 1, 2).unwrap();
    assert!(e.lines[0].contains("never NaN"), "{e:?}");
}

#[test]
fn alibi_adds_minus_slope_times_distance() {
    let p = worked_pipeline("none", PeKind::Alibi, true);
    // one head: slope 2^-8
    assert_eq!(p.alibi_slopes, Some(vec![1.0 / 256.0]));
    let scaled = m(&p, StageId::Scale, 0);
    let biased = m(&p, StageId::Alibi, 0);
    for i in 0..4 {
        for j in 0..4 {
            let want = scaled[[i, j]] - (i as f64 - j as f64).abs() / 256.0;
            assert_eq!(biased[[i, j]], want);
        }
    }
    assert!(p.stage(StageId::Alibi).unwrap().active);
}

#[test]
fn rope_rotates_by_position_times_frequency() {
    // d = 2: one pair, frequency 1; every q and k is [1, 0].
    let ones = Array3::from_shape_fn((1, 3, 2), |(_, _, c)| if c == 0 { 1.0 } else { 0.0 });
    let v = Array3::from_elem((1, 3, 1), 1.0);
    let p = Pipeline::from_qkv(
        Vec::new(),
        ones.clone(),
        ones,
        v,
        &MaskKind::None,
        PeKind::Rope { base: 10000.0 },
        false,
    )
    .unwrap();
    let q = m(&p, StageId::Rope, 0);
    // position 1 turns [1, 0] by 1 radian
    assert_rows_close(q.row(1), &[1f64.cos(), 1f64.sin()], 1e-15);
    assert_rows_close(q.row(0), &[1.0, 0.0], 0.0);
    // the score depends only on the distance: cos(i - j)
    let s = m(&p, StageId::Scores, 0);
    assert!(close(s[[1, 0]], 1f64.cos(), 1e-12));
    assert!(close(s[[2, 1]], 1f64.cos(), 1e-12));
    assert!(close(s[[2, 0]], 2f64.cos(), 1e-12));
    assert!(close(s[[2, 2]], 1.0, 1e-12));
}

#[test]
fn rope_query_positions_are_bottom_right_aligned() {
    // 1 query against 3 keys: the query stands at position 2, like the last key.
    let q = Array3::from_shape_fn((1, 1, 2), |(_, _, c)| if c == 0 { 1.0 } else { 0.0 });
    let k = Array3::from_shape_fn((1, 3, 2), |(_, _, c)| if c == 0 { 1.0 } else { 0.0 });
    let v = Array3::from_elem((1, 3, 1), 1.0);
    let p = Pipeline::from_qkv(
        vec!["a".into(), "b".into(), "c".into()],
        q,
        k,
        v,
        &MaskKind::None,
        PeKind::Rope { base: 10000.0 },
        false,
    )
    .unwrap();
    assert_rows_close(
        m(&p, StageId::Rope, 0).row(0),
        &[2f64.cos(), 2f64.sin()],
        1e-15,
    );
    assert!(close(m(&p, StageId::Scores, 0)[[0, 2]], 1.0, 1e-12));
    assert_eq!(p.query_labels, ["c"]);
}

#[test]
fn gqa_heads_read_their_group() {
    // 4 query heads, 2 KV groups: heads 0,1 read group 0 and heads 2,3 group 1.
    let q = Array3::from_shape_fn((4, 2, 2), |(h, i, c)| (h + i + c) as f64 * 0.1);
    let k = Array3::from_shape_fn((2, 3, 2), |(g, j, c)| (g * 3 + j) as f64 * 0.2 - c as f64);
    let v = Array3::from_shape_fn((2, 3, 1), |(g, j, _)| (g * 10 + j) as f64);
    let p = Pipeline::from_qkv(
        Vec::new(),
        q.clone(),
        k.clone(),
        v,
        &MaskKind::None,
        PeKind::None,
        true,
    )
    .unwrap();
    assert_eq!(
        (0..4).map(|h| p.kv_group_for(h)).collect::<Vec<_>>(),
        [0, 0, 1, 1]
    );
    for h in 0..4 {
        let g = h / 2;
        let want = q.index_axis(Axis(0), h).dot(&k.index_axis(Axis(0), g).t());
        assert_eq!(m(&p, StageId::Scores, h), &want);
        let mats = p.head_matrices(StageId::SplitHeads, h);
        assert_eq!(mats.len(), 3);
        assert_eq!(mats[1].data, k.index_axis(Axis(0), g));
    }
    // group 1's values are 10..12: its heads' outputs lie in that range
    assert!(
        m(&p, StageId::WeightedSum, 3)
            .iter()
            .all(|&x| (10.0..=12.0).contains(&x))
    );
    assert_eq!(
        p.stage(StageId::Concat).unwrap().matrices[0].data.dim(),
        (2, 4)
    );
    // Heads are numbered from 1 on screen: the concat columns and formula too.
    let concat = p.stage(StageId::Concat).unwrap();
    assert_eq!(
        concat.matrices[0].col_labels,
        ["h1.0", "h2.0", "h3.0", "h4.0"]
    );
    assert!(
        concat.formula.starts_with("concat = [O_1 | ... | O_4]"),
        "{}",
        concat.formula
    );
    // The inspector of a loaded q names head 3 (index 2 of the file's head axis).
    let e = p.explain(StageId::SplitHeads, 2, 0, 0).unwrap();
    assert_eq!(
        e.lines[0],
        "loaded from the Q file: head 3, index 2 of its head axis"
    );
}

#[test]
fn from_qkv_refuses_what_it_cannot_do() {
    let (q, k, v) = worked();
    let err = |q: Array3<f64>, k: Array3<f64>, v: Array3<f64>, pe: PeKind, mask: &str| {
        Pipeline::from_qkv(Vec::new(), q, k, v, &mask.parse().unwrap(), pe, true)
            .unwrap_err()
            .to_string()
    };
    let e = err(q.clone(), k.clone(), v.clone(), PeKind::Sinusoidal, "none");
    assert!(e.contains("none, rope[:base] or alibi"), "{e}");
    let e = err(
        q.clone(),
        k.slice(s![.., .., ..3]).to_owned(),
        v.clone(),
        PeKind::None,
        "none",
    );
    assert!(e.contains("same head dimension"), "{e}");
    let mut bad = q.clone();
    bad[[0, 2, 1]] = f64::NAN;
    let e = err(bad, k.clone(), v.clone(), PeKind::None, "none");
    assert!(e.contains("q holds NaN at [0, 2, 1]"), "{e}");
    let e = Pipeline::from_qkv(
        Vec::new(),
        q.clone(),
        k.clone(),
        v.clone(),
        &MaskKind::Window(0),
        PeKind::None,
        true,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains(">= 1"), "{e}");
    let labels = Pipeline::from_qkv(
        vec!["a".into()],
        q,
        k,
        v,
        &MaskKind::None,
        PeKind::None,
        true,
    )
    .unwrap_err()
    .to_string();
    assert!(labels.contains("4 keys"), "{labels}");
}

#[test]
fn explanations_show_the_arithmetic() {
    let p = worked_pipeline("causal", PeKind::None, true);
    let e = p.explain(StageId::Scores, 0, 0, 3).unwrap();
    assert_eq!(e.value, 4.0);
    assert_eq!(e.lines, ["q0.k3 = 1*0 + 0*0 + 2*2 + 0*1 = 4"]);
    let e = p.explain(StageId::Scale, 0, 0, 3).unwrap();
    assert!(e.lines[0].contains("4 / sqrt(4) = 4 * 0.5 = 2"), "{e:?}");
    let e = p.explain(StageId::Mask, 0, 0, 3).unwrap();
    assert!(
        e.lines[0].contains("masked") && e.lines[0].contains("causal"),
        "{e:?}"
    );
    let e = p.explain(StageId::Softmax, 0, 1, 0).unwrap();
    // row 1 sees keys 0, 1 with scaled scores 0.5 and 1
    assert!(e.lines[0].contains("exp(0.5 - 1) = 0.6065"), "{e:?}");
    assert!(e.lines[1].contains("1.607"), "{e:?}");
    assert!(close(e.value, 0.37754, 1e-5));
    let e = p.explain(StageId::WeightedSum, 0, 0, 0).unwrap();
    assert!(e.lines[0].ends_with("= 1"), "{e:?}");
    // inactive stages say why
    let e = p.explain(StageId::Alibi, 0, 0, 0).unwrap();
    assert!(e.lines[0].contains("inactive"), "{e:?}");
    // out of range
    assert!(p.explain(StageId::Scores, 1, 0, 0).is_none());
    assert!(p.explain(StageId::Scores, 0, 4, 0).is_none());
    assert!(p.explain(StageId::Scores, 0, 0, 4).is_none());
    assert!(p.explain(StageId::Tokens, 0, 0, 0).is_none());
}

#[test]
fn long_sums_are_abbreviated() {
    let p = Pipeline::build(&ModelConfig::example()).unwrap();
    let e = p.explain(StageId::QkvProjection, 0, 2, 5).unwrap();
    assert!(
        e.lines[1].contains("... +") && e.lines[1].contains("(16 terms)"),
        "{e:?}"
    );
    let want = m(&p, StageId::QkvProjection, 0)[[2, 5]];
    assert_eq!(e.value, want);
    assert!(
        e.lines[1].ends_with(&format!("= {}", num::num(want))),
        "{e:?}"
    );
}

#[test]
fn row_stats_of_loaded_weights() {
    let attn = array![[[0.25, 0.25, 0.25, 0.25], [0.0, 1.0, 0.0, 0.0]]];
    let p = Pipeline::from_weights(Vec::new(), attn).unwrap();
    let st = p.row_stats(0);
    assert!(close(st[0].entropy, 4f64.ln(), 1e-12));
    assert_eq!(st[0].max_weight, 0.25);
    assert_eq!(st[1].entropy, 0.0);
    assert_eq!(st[1].max_weight, 1.0);
    assert!(p.row_stats(1).is_empty());
    for st in &p.stages {
        assert_eq!(st.active, st.id == StageId::Softmax, "{:?}", st.id);
    }
    // two queries against four keys: the queries are the last two keys
    assert_eq!(p.query_labels, ["t2", "t3"]);
    let e = p.explain(StageId::Softmax, 0, 1, 1).unwrap();
    assert!(e.lines[0].contains("loaded"));
    let neg = Pipeline::from_weights(Vec::new(), array![[[1.5, -0.5]]]).unwrap_err();
    assert!(neg.to_string().contains("never negative"));
}

// ---- the lesson pipeline ----

fn config(pe: PeKind, mask: &str, heads: usize, kv_heads: usize) -> ModelConfig {
    ModelConfig {
        tokens: ModelConfig::tokens_from_text("the quick brown fox jumps over the dog"),
        d_model: 16,
        heads,
        kv_heads,
        seed: 7,
        pe,
        mask: mask.parse().unwrap(),
        scaled: true,
    }
}

#[test]
fn example_lesson() {
    let c = ModelConfig::example();
    assert!((6..=8).contains(&c.tokens.len()), "{:?}", c.tokens);
    assert_eq!((c.d_model, c.heads, c.kv_heads, c.seed), (16, 4, 4, 42));
    let p = Pipeline::build(&c).unwrap();
    assert!(p.stages.iter().map(|s| s.id).eq(StageId::ALL));
    let active: Vec<bool> = p.stages.iter().map(|s| s.active).collect();
    // tokens..scores on; RoPE off; scale on; ALiBi and mask off; the rest on
    assert_eq!(
        active,
        [
            true, true, true, true, true, false, true, true, false, false, true, true, true, true
        ]
    );
    for st in &p.stages {
        assert_eq!(st.per_head, st.id.is_per_head());
        if st.per_head {
            assert_eq!(st.matrices.len(), 4, "{:?}", st.id);
        }
        for mat in &st.matrices {
            assert_eq!(mat.row_labels.len(), mat.data.nrows(), "{}", mat.name);
            assert_eq!(mat.col_labels.len(), mat.data.ncols(), "{}", mat.name);
        }
    }
    let scores = &p.stage(StageId::Scores).unwrap().matrices[0];
    assert_eq!(scores.row_labels, c.tokens);
    assert_eq!(scores.col_labels, c.tokens);
    // the same build twice is the same to the bit
    let again = Pipeline::build(&c).unwrap();
    assert_eq!(p.stages, again.stages);
}

#[test]
fn embeddings_and_position_encoding() {
    let c = config(PeKind::Sinusoidal, "none", 4, 4);
    let p = Pipeline::build(&c).unwrap();
    let x = m(&p, StageId::Embeddings, 0);
    // "the" stands at 0 and 6: same embedding, different X + PE
    assert_eq!(x.row(0), x.row(6));
    let xp = m(&p, StageId::PositionEncoding, 0);
    assert_ne!(xp.row(0), xp.row(6));
    let pe_table = crate::engine::pe::sinusoidal(8, 16);
    assert!((xp - x - &pe_table).iter().all(|d| d.abs() < 1e-15));
    assert_eq!(m(&p, StageId::PositionEncoding, 1), &pe_table);

    let learned = Pipeline::build(&config(PeKind::Learned, "none", 4, 4)).unwrap();
    let table = m(&learned, StageId::PositionEncoding, 1);
    assert_eq!(table, &crate::engine::embed::learned_positions(7, 8, 16));

    for pe in [PeKind::None, PeKind::Rope { base: 10000.0 }, PeKind::Alibi] {
        let p = Pipeline::build(&config(pe, "none", 4, 4)).unwrap();
        let st = p.stage(StageId::PositionEncoding).unwrap();
        assert!(!st.active && st.formula.starts_with("inactive"), "{pe}");
        assert_eq!(
            st.matrices,
            p.stage(StageId::Embeddings).unwrap().matrices,
            "{pe}"
        );
    }
}

#[test]
fn fused_projection_and_split_heads() {
    let p = Pipeline::build(&config(PeKind::Sinusoidal, "none", 4, 2)).unwrap();
    let proj = p.stage(StageId::QkvProjection).unwrap();
    let w = &proj.matrices[3].data;
    // d_model 16, 2 KV groups of d_head 4: [16, 16 + 2*2*4]
    assert_eq!(w.dim(), (16, 32));
    let xp = m(&p, StageId::PositionEncoding, 0);
    let qkv = xp.dot(w);
    assert_eq!(proj.matrices[0].data, qkv.slice(s![.., 0..16]));
    assert_eq!(proj.matrices[1].data, qkv.slice(s![.., 16..24]));
    assert_eq!(proj.matrices[2].data, qkv.slice(s![.., 24..32]));
    let split = p.stage(StageId::SplitHeads).unwrap();
    assert_eq!(split.kv_groups.len(), 2);
    for h in 0..4 {
        assert_eq!(split.matrices[h].data, qkv.slice(s![.., 4 * h..4 * h + 4]));
    }
    assert_eq!(split.kv_groups[1][0].data, qkv.slice(s![.., 20..24]));
    assert_eq!(split.kv_groups[1][1].data, qkv.slice(s![.., 28..32]));
    let e = p.explain(StageId::QkvProjection, 1, 0, 4).unwrap();
    assert!(e.lines[0].contains("column 20 of W_qkv"), "{e:?}");
}

/// The lesson's weighted sums agree with the f64 reference attention on the lesson's
/// own q, k, v (rotated for RoPE), for every mask and position encoding.
#[test]
fn lesson_agrees_with_reference_attention() {
    let pes = [
        PeKind::None,
        PeKind::Sinusoidal,
        PeKind::Learned,
        PeKind::Rope { base: 10000.0 },
        PeKind::Alibi,
    ];
    let masks = ["none", "causal", "window:3", "padding:5", "bigbird:1,1,1,2"];
    for (heads, kv) in [(4, 4), (4, 2), (4, 1)] {
        for pe in pes {
            for mask in masks {
                let c = config(pe, mask, heads, kv);
                let p = Pipeline::build(&c).unwrap();
                let rope = p.stage(StageId::Rope).unwrap();
                let n = c.tokens.len();
                let q = Array4::from_shape_fn((1, heads, n, 4), |(_, h, i, d)| {
                    rope.matrices[h].data[[i, d]]
                });
                let k = Array4::from_shape_fn((1, kv, n, 4), |(_, g, j, d)| {
                    rope.kv_groups[g][0].data[[j, d]]
                });
                let v = Array4::from_shape_fn((1, kv, n, 4), |(_, g, j, d)| {
                    rope.kv_groups[g][1].data[[j, d]]
                });
                let shape = ProblemShape::from_dims([1, heads, n, 4], [1, kv, n, 4], [1, kv, n, 4])
                    .unwrap();
                let mask_r = Mask::resolve(&c.mask, 1, heads, n, n).unwrap();
                let spec = AttnSpec::new(&shape, mask_r, pe == PeKind::Alibi, None);
                let want = reference::attention(&shape, q.view(), k.view(), v.view(), &spec);
                for h in 0..heads {
                    let got = m(&p, StageId::WeightedSum, h);
                    let diff = (got - &want.out.slice(s![0, h, .., ..]))
                        .iter()
                        .fold(0f64, |a, x| a.max(x.abs()));
                    assert!(diff < 1e-12, "{pe} {mask} {heads}/{kv} head {h}: {diff}");
                    let sums = m(&p, StageId::Softmax, h).sum_axis(Axis(1));
                    assert!(sums.iter().all(|s| (s - 1.0).abs() < 1e-12), "{sums:?}");
                }
                let out = &p.stage(StageId::OutputProjection).unwrap().matrices;
                let concat = m(&p, StageId::Concat, 0);
                assert_eq!(out[0].data, concat.dot(&out[1].data));
            }
        }
    }
}

#[test]
fn without_pe_permuting_tokens_permutes_outputs() {
    let mut c = config(PeKind::None, "none", 4, 2);
    let base = Pipeline::build(&c).unwrap();
    let perm = [3usize, 0, 7, 5, 1, 6, 2, 4];
    c.tokens = perm.iter().map(|&i| c.tokens[i].clone()).collect();
    let permuted = Pipeline::build(&c).unwrap();
    let a = m(&base, StageId::OutputProjection, 0);
    let b = m(&permuted, StageId::OutputProjection, 0);
    for (new, &old) in perm.iter().enumerate() {
        for (x, y) in b.row(new).iter().zip(a.row(old)) {
            assert!((x - y).abs() < 1e-12);
        }
    }
    // with a position encoding the same permutation changes the outputs
    let mut c = config(PeKind::Sinusoidal, "none", 4, 2);
    let a = Pipeline::build(&c).unwrap();
    c.tokens = perm.iter().map(|&i| c.tokens[i].clone()).collect();
    let b = Pipeline::build(&c).unwrap();
    let (a, b) = (
        m(&a, StageId::OutputProjection, 0),
        m(&b, StageId::OutputProjection, 0),
    );
    assert!(
        (b.row(0).to_owned() - a.row(3))
            .iter()
            .any(|x| x.abs() > 1e-6)
    );
}

#[test]
fn validation_names_the_field_and_the_fix() {
    let base = ModelConfig::example();
    let err = |f: &dyn Fn(&mut ModelConfig)| {
        let mut c = base.clone();
        f(&mut c);
        let e = c.validate().unwrap_err();
        assert_eq!(e.exit_code(), 2);
        Pipeline::build(&c).unwrap_err();
        e.to_string()
    };
    let e = err(&|c| c.d_model = 10);
    assert!(
        e.contains("d_model") && e.contains("not divisible by heads") && e.contains("8 or 12"),
        "{e}"
    );
    let e = err(&|c| c.kv_heads = 3);
    assert!(e.contains("kv_heads") && e.contains("divisor of 4"), "{e}");
    let e = err(&|c| c.kv_heads = 0);
    assert!(e.contains("kv_heads"), "{e}");
    let e = err(&|c| c.heads = 0);
    assert!(e.contains("heads"), "{e}");
    let e = err(&|c| {
        c.d_model = 12;
        c.heads = 4;
        c.pe = PeKind::Rope { base: 10000.0 };
    });
    assert!(e.contains("odd"), "{e}");
    let e = err(&|c| c.pe = PeKind::Rope { base: 0.5 });
    assert!(e.contains("above 1"), "{e}");
    let e = err(&|c| c.tokens.clear());
    assert!(e.contains("empty"), "{e}");
    let e = err(&|c| c.tokens = vec!["a".into(); limits::MAX_MODEL_TOKENS + 1]);
    assert!(e.contains("MAX_MODEL_TOKENS"), "{e}");
    let e = err(&|c| c.d_model = limits::MAX_D_MODEL + 4);
    assert!(e.contains("MAX_D_MODEL"), "{e}");
    let e = err(&|c| c.mask = MaskKind::Padding(vec![3, 2]));
    assert!(e.contains("one sequence"), "{e}");
    let e = err(&|c| c.mask = MaskKind::Padding(vec![30]));
    assert!(e.contains("<= 7"), "{e}");
    let e = err(&|c| c.mask = MaskKind::Window(0));
    assert!(e.contains("window:0"), "{e}");
    assert!(base.validate().is_ok());
}

#[test]
fn padding_masks_keys_past_the_length() {
    let p = Pipeline::build(&config(PeKind::None, "padding:5", 2, 2)).unwrap();
    for h in 0..2 {
        let a = m(&p, StageId::Softmax, h);
        assert!(a.slice(s![.., 5..]).iter().all(|&w| w == 0.0));
        assert!(a.slice(s![.., ..5]).iter().all(|&w| w > 0.0));
    }
}

#[test]
fn every_cell_of_every_stage_can_be_explained() {
    let mut pipelines: Vec<Pipeline> = [
        config(PeKind::Sinusoidal, "causal", 4, 2),
        config(PeKind::Learned, "none", 2, 1),
        config(PeKind::Rope { base: 100.0 }, "window:2", 4, 4),
        config(PeKind::Alibi, "padding:3", 4, 1),
    ]
    .iter()
    .map(|c| Pipeline::build(c).unwrap())
    .collect();
    let q = Array3::from_shape_fn((2, 3, 4), |(h, i, c)| {
        (h * 7 + i * 3 + c) as f64 * 0.1 - 1.0
    });
    let k = Array3::from_shape_fn((1, 5, 4), |(_, j, c)| (j * 5 + c) as f64 * 0.07 - 0.5);
    let v = Array3::from_shape_fn((1, 5, 3), |(_, j, c)| (j + c) as f64);
    for pe in [PeKind::Rope { base: 10000.0 }, PeKind::Alibi] {
        pipelines.push(
            Pipeline::from_qkv(
                Vec::new(),
                q.clone(),
                k.clone(),
                v.clone(),
                &MaskKind::Causal,
                pe,
                true,
            )
            .unwrap(),
        );
    }
    pipelines.push(Pipeline::from_weights(Vec::new(), array![[[0.5, 0.5], [1.0, 0.0]]]).unwrap());
    for p in &pipelines {
        for st in &p.stages {
            for (mi, mat) in st.matrices.iter().enumerate() {
                for ((r, c), &x) in mat.data.indexed_iter() {
                    let e = p
                        .explain(st.id, mi, r, c)
                        .unwrap_or_else(|| panic!("{:?} {mi} [{r},{c}]", st.id));
                    assert!(x == e.value || (x.is_nan() && e.value.is_nan()));
                    assert!(!e.lines.is_empty() && !e.title.is_empty());
                }
            }
        }
    }
}

#[test]
fn loaded_tensors_over_the_limits_are_refused() {
    let q = Array3::zeros((1, 1, 2));
    let v = Array3::zeros((1, limits::MAX_VIEW_TOKENS + 1, 1));
    let k = Array3::zeros((1, limits::MAX_VIEW_TOKENS + 1, 2));
    let e = Pipeline::from_qkv(Vec::new(), q, k, v, &MaskKind::None, PeKind::None, true)
        .unwrap_err()
        .to_string();
    assert!(e.contains("MAX_VIEW_TOKENS"), "{e}");
    // Weights alone may hold five times a computed pipeline's score cells.
    assert!(Pipeline::from_weights(Vec::new(), Array3::zeros((2, 2048, 1100))).is_ok());
    let attn = Array3::zeros((10, 2048, 1100));
    let e = Pipeline::from_weights(Vec::new(), attn)
        .unwrap_err()
        .to_string();
    assert!(e.contains("MAX_WEIGHT_CELLS"), "{e}");
    let attn = Array3::zeros((limits::MAX_HEADS + 1, 2, 2));
    let e = Pipeline::from_weights(Vec::new(), attn)
        .unwrap_err()
        .to_string();
    assert!(e.contains("MAX_HEADS"), "{e}");
}
