//! What the narration says about the numbers on screen holds for the numbers the engine
//! computes for that scene's model. (The figures the narration quotes are checked in
//! scene_builtins.rs.)

use attnviz::engine::pipeline::{ModelConfig, Pipeline, StageId};
use attnviz::scene;
use ndarray::Array2;

fn pipeline(name: &str) -> Pipeline {
    Pipeline::build(scene::builtin(name).unwrap().toy().unwrap()).unwrap()
}

fn matrix(p: &Pipeline, id: StageId, m: usize) -> Array2<f64> {
    p.stage(id).unwrap().matrices[m].data.clone()
}

fn weights(p: &Pipeline, head: usize) -> Array2<f64> {
    matrix(p, StageId::Softmax, head)
}

#[test]
fn every_built_in_builds_in_the_engine() {
    // Lessons on trained models have no seeded model: tests/scene_real.rs plays them.
    for s in scene::builtins()
        .unwrap()
        .iter()
        .filter(|s| s.toy().is_some())
    {
        let p = Pipeline::build(s.toy().unwrap()).unwrap();
        assert_eq!(p.stages.len(), StageId::ALL.len(), "{}", s.name);
    }
}

#[test]
fn intro_has_six_tokens_and_rows_of_weights_sum_to_one() {
    let p = pipeline("intro");
    assert_eq!(p.config.tokens.len(), 6);
    assert_eq!(p.config.tokens[1], "cat");
    assert_eq!(p.config.tokens[2], "sat");
    for h in 0..p.config.heads {
        for row in weights(&p, h).rows() {
            assert!((row.sum() - 1.0).abs() < 1e-12);
            assert!(row.iter().all(|&w| w > 0.0));
        }
    }
}

#[test]
fn qkv_names_the_tokens_it_points_at() {
    let p = pipeline("qkv");
    assert_eq!(p.config.tokens, ["time", "flies", "like", "an", "arrow"]);
    assert_eq!((p.config.d_model, p.config.d_head()), (8, 4));
}

#[test]
fn without_scaling_every_row_is_sharper() {
    let config = scene::builtin("scaled-dot").unwrap().toy().unwrap().clone();
    let scaled = Pipeline::build(&config).unwrap();
    let raw = Pipeline::build(&ModelConfig {
        scaled: false,
        ..config
    })
    .unwrap();
    for (s, r) in scaled.row_stats(0).iter().zip(raw.row_stats(0)) {
        assert!(r.entropy < s.entropy, "{} !< {}", r.entropy, s.entropy);
        assert!(r.max_weight > s.max_weight);
    }
    // Scaling keeps the order within each row.
    let (a, b) = (
        matrix(&scaled, StageId::Scores, 0),
        matrix(&scaled, StageId::Scale, 0),
    );
    for i in 0..a.nrows() {
        for j in 0..a.ncols() {
            for k in 0..a.ncols() {
                assert_eq!(a[[i, j]] < a[[i, k]], b[[i, j]] < b[[i, k]]);
            }
        }
    }
}

#[test]
fn padding_keys_get_exactly_zero_and_real_tokens_are_unchanged() {
    let p = pipeline("padding-mask");
    assert_eq!(&p.config.tokens[4..], ["PAD", "PAD"]);
    for h in 0..p.config.heads {
        let w = weights(&p, h);
        for row in w.rows() {
            assert_eq!(row[4], 0.0);
            assert_eq!(row[5], 0.0);
            assert!((row.sum() - 1.0).abs() < 1e-12);
        }
        // PAD rows still attend to the real tokens.
        assert!(w.row(5).iter().take(4).all(|&x| x > 0.0));
    }
    // "exactly as if there were no padding at all": the real tokens alone.
    let mut alone = p.config.clone();
    alone.tokens.truncate(4);
    alone.mask = attnviz::engine::config::MaskKind::None;
    let q = Pipeline::build(&alone).unwrap();
    let (with, without) = (
        matrix(&p, StageId::OutputProjection, 0),
        matrix(&q, StageId::OutputProjection, 0),
    );
    for i in 0..4 {
        for j in 0..with.ncols() {
            assert!((with[[i, j]] - without[[i, j]]).abs() < 1e-12);
        }
    }
}

#[test]
fn causal_rows_see_only_the_past() {
    let p = pipeline("causal-mask");
    let w = weights(&p, 0);
    assert_eq!(w[[0, 0]], 1.0);
    for i in 0..w.nrows() {
        for j in i + 1..w.ncols() {
            assert_eq!(w[[i, j]], 0.0);
        }
    }
    assert_eq!(&p.config.tokens[..3], ["to", "be", "or"]);
    assert_eq!(p.config.tokens.len(), 6);
}

#[test]
fn no_two_heads_agree_even_with_random_weights() {
    let p = pipeline("multi-head");
    for a in 0..p.config.heads {
        for b in a + 1..p.config.heads {
            assert_ne!(weights(&p, a), weights(&p, b));
        }
    }
}

#[test]
fn without_position_the_two_thes_are_identical() {
    let p = pipeline("why-position");
    assert_eq!(p.config.tokens[0], "the");
    assert_eq!(p.config.tokens[3], "the");
    for id in [StageId::Embeddings, StageId::OutputProjection] {
        let m = matrix(&p, id, 0);
        assert_eq!(m.row(0), m.row(3), "{id:?}");
    }
    for h in 0..p.config.heads {
        let m = matrix(&p, StageId::WeightedSum, h);
        assert_eq!(m.row(0), m.row(3));
    }
}

#[test]
fn the_first_sinusoid_turns_one_radian_per_position() {
    let p = pipeline("sinusoidal");
    let pe = matrix(&p, StageId::PositionEncoding, 1);
    for pos in 0..pe.nrows() {
        assert!((pe[[pos, 0]] - (pos as f64).sin()).abs() < 1e-12);
        assert!((pe[[pos, 1]] - (pos as f64).cos()).abs() < 1e-12);
    }
}

#[test]
fn rope_leaves_position_zero_and_lengths_unchanged() {
    let p = pipeline("rope");
    let (before, after) = (
        matrix(&p, StageId::SplitHeads, 0),
        matrix(&p, StageId::Rope, 0),
    );
    assert_eq!(before.row(0), after.row(0));
    for i in 0..before.nrows() {
        let (a, b) = (
            before.row(i).dot(&before.row(i)),
            after.row(i).dot(&after.row(i)),
        );
        assert!((a - b).abs() < 1e-9 * a.max(1.0));
    }
}

#[test]
fn alibi_penalises_distance_more_in_the_first_head() {
    let p = pipeline("alibi");
    let (scale, alibi) = (StageId::Scale, StageId::Alibi);
    let bias =
        |h: usize, i: usize, j: usize| matrix(&p, alibi, h)[[i, j]] - matrix(&p, scale, h)[[i, j]];
    // -m_h |i - j| with m_0 = 1/4 and m_3 = 1/256, at distance 5.
    assert!((bias(0, 5, 0) + 5.0 / 4.0).abs() < 1e-12);
    assert!((bias(3, 5, 0) + 5.0 / 256.0).abs() < 1e-12);
}

#[test]
fn the_last_query_sees_every_key() {
    let p = pipeline("kv-cache");
    let w = weights(&p, 0);
    let last = w.nrows() - 1;
    assert_eq!(last, 7);
    assert!(w.row(last).iter().all(|&x| x > 0.0));
}

#[test]
fn gqa_has_eight_query_heads_and_two_kv_groups() {
    let p = pipeline("gqa");
    let split = p.stage(StageId::SplitHeads).unwrap();
    assert_eq!(split.matrices.len(), 8);
    assert_eq!(split.kv_groups.len(), 2);
    let groups: Vec<usize> = (0..8).map(|h| p.kv_group_for(h)).collect();
    assert_eq!(groups, [0, 0, 0, 0, 1, 1, 1, 1]);
}

#[test]
fn the_window_keeps_itself_and_two_before() {
    let p = pipeline("sliding-window");
    let w = weights(&p, 0);
    for i in 0..w.nrows() {
        for j in 0..w.ncols() {
            let inside = j <= i && i - j < 3;
            assert_eq!(w[[i, j]] > 0.0, inside, "[{i}, {j}]");
        }
    }
}

#[test]
fn bigbird_keeps_the_band_and_the_global_token() {
    let p = pipeline("bigbird");
    let w = weights(&p, 0);
    let n = w.nrows();
    for i in 0..n {
        // The band: neighbours within one block either side.
        for j in i.saturating_sub(1)..(i + 2).min(n) {
            assert!(w[[i, j]] > 0.0, "band [{i}, {j}]");
        }
        // The first token is global: it sees all and all see it.
        assert!(w[[i, 0]] > 0.0 && w[[0, i]] > 0.0, "global {i}");
    }
    // And it is sparse: most pairs are masked.
    let kept = w.iter().filter(|&&x| x > 0.0).count();
    assert!(kept < n * n / 2, "{kept} of {}", n * n);
}
