//! What the narration says about the numbers on screen holds for the numbers the engine
//! computes for that scene's model. (The figures the narration quotes are checked in
//! builtins.rs.)

use attnviz::engine::pipeline::{ModelConfig, Pipeline, StageId};
use attnviz::scene;
use ndarray::Array2;

use crate::support::headless::options_at;
use crate::support::soak::Budget;

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
    // Lessons on trained models have no seeded model: tests/scene/real.rs plays them.
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

// ---- what each step shows, as the app plays it ------------------------------------

mod screens {
    use attnviz::cli::{Lang, TermSize};
    use attnviz::engine::pipeline::StageId;
    use attnviz::record::still::text;
    use attnviz::record::{HeadlessOptions, still};
    use attnviz::scene::{self, Scene};
    use attnviz::tui::views::flash::{self, current_tile};
    use attnviz::tui::views::{VariantMode, VariantsLab};
    use attnviz::tui::{Action, AppOptions, State, ViewKind, script, update};

    /// The app at step `k` (from 1) of `scene`, as a person sees it after jumping there.
    fn at(scene: &Scene, k: usize) -> State {
        let app = AppOptions::headless(Lang::En, None, false, "claims");
        let mut s = State::for_model(scene.toy().unwrap().clone(), app)
            .unwrap()
            .with_script(script::lesson(scene, Lang::En), false, 1.0);
        update(
            &mut s,
            Action::Resize {
                cols: 120,
                rows: 40,
            },
        );
        update(&mut s, Action::GotoStep(k - 1));
        s
    }

    fn builtin(name: &str) -> Scene {
        scene::builtin(name).unwrap()
    }

    fn screen(scene: &Scene, k: usize, lang: Lang, cols: u16, rows: u16) -> String {
        let opts = HeadlessOptions {
            lang,
            size: TermSize { cols, rows },
            speed: 1.0,
            theme: None,
            ascii: false,
        };
        text(&still(scene, &opts, k).unwrap())
    }

    fn mode(s: &State) -> VariantMode {
        s.views
            .get::<VariantsLab>(ViewKind::Variants)
            .expect("the variants view has its lab")
            .settings
            .mode
    }

    #[test]
    fn linear_attention_steps_show_the_linear_panel() {
        let sc = builtin("linear-attention");
        for k in 2..=5 {
            let s = at(&sc, k);
            assert_eq!(s.view, ViewKind::Variants, "step {k}");
            assert_eq!(mode(&s), VariantMode::Linear, "step {k}");
            let t = screen(&sc, k, Lang::En, 120, 40);
            assert!(
                t.contains("linear attention: linear attention"),
                "step {k}:\n{t}"
            );
        }
    }

    #[test]
    fn bigbird_step_4_shows_the_bigbird_pattern() {
        let sc = builtin("bigbird");
        let s = at(&sc, 4);
        assert_eq!(
            (s.view, mode(&s)),
            (ViewKind::Variants, VariantMode::BigBird)
        );
        assert!(screen(&sc, 4, Lang::En, 120, 40).contains("BigBird pattern"));
        // "every row but the global ones has a constant number of keys": the global
        // row sees all keys, the others fewer, and the same count where the band is whole.
        let w = super::weights(&super::pipeline("bigbird"), 0);
        let n = w.ncols();
        let keys: Vec<usize> = w
            .rows()
            .into_iter()
            .map(|r| r.iter().filter(|&&x| x > 0.0).count())
            .collect();
        assert_eq!(keys[0], n, "the global row");
        assert!(keys[1..].iter().all(|&k| k < n), "{keys:?}");
    }

    /// A scene of our own on a BigBird mask, opening the variants view with no variant.
    #[test]
    fn the_variants_view_opens_on_bigbird_for_a_bigbird_mask_and_a_step_can_choose() {
        let src = |mask: &str, variant: &str| {
            format!(
                "version = 1\n[title]\nen = \"t\"\nzh = \"t\"\n[model]\ntokens = \"a b c d e f g h\"\nd_model = 8\nheads = 2\nmask = \"{mask}\"\n[[steps]]\nview = \"variants\"\n{variant}\nnarration.en = \"x\"\nnarration.zh = \"x\"\n"
            )
        };
        let open = |mask: &str, variant: &str| {
            let sc = scene::parse("t", "t.toml", &src(mask, variant)).unwrap();
            mode(&at(&sc, 1))
        };
        assert_eq!(open("bigbird:1,1,1", ""), VariantMode::BigBird);
        assert_eq!(open("causal", ""), VariantMode::Window);
        assert_eq!(open("causal", "variant = \"linear\""), VariantMode::Linear);
        assert_eq!(
            open("bigbird:1,1,1", "variant = \"window\""),
            VariantMode::Window
        );
    }

    #[test]
    fn heads_steps_show_the_weights_they_talk_about() {
        for (name, k) in [("multi-head", 3), ("intro", 8)] {
            let s = at(&builtin(name), k);
            assert_eq!(s.view, ViewKind::Heads, "{name} step {k}");
            assert_eq!(s.stage, StageId::Softmax, "{name} step {k}");
            let t = screen(&builtin(name), k, Lang::En, 120, 40);
            assert!(t.contains("-> key '"), "{name} step {k}:\n{t}");
        }
    }

    #[test]
    fn the_heads_view_names_a_dimension_a_dimension() {
        let src = "version = 1\n[title]\nen = \"t\"\nzh = \"t\"\n[model]\ntokens = \"the cat sat on the mat\"\nd_model = 16\nheads = 4\n[[steps]]\nview = \"heads\"\nstage = \"split_heads\"\nhighlight = [[1, 0]]\nnarration.en = \"x\"\nnarration.zh = \"x\"\n";
        let sc = scene::parse("t", "t.toml", src).unwrap();
        let t = screen(&sc, 1, Lang::En, 120, 40);
        assert!(
            t.contains("cell [1,0]") && t.contains("token 'cat', dim 0"),
            "{t}"
        );
        assert!(!t.contains("-> '0'"), "{t}");
    }

    #[test]
    fn flash_tiling_rescales_on_the_tile_its_narration_names() {
        let sc = builtin("flash-tiling");
        let s = at(&sc, 3);
        let lab = flash::lab(&s).expect("the flash lab");
        let tile = current_tile(&s, lab);
        assert_eq!(tile, sc.steps[2].tiles[0]);
        let e = lab.event(lab.index_of(tile));
        // "row 0's max grows and its rescale drops below 1; row 1's ... stays 1".
        assert!(e.alpha[0] > 0.0 && e.alpha[0] < 1.0, "{:?}", e.alpha);
        assert_eq!(e.alpha[1], 1.0, "{:?}", e.alpha);
        // The tile before it in the block only started the rows (m was -inf).
        let first = lab.event(lab.index_of((0, 0)));
        assert!(first.alpha.iter().all(|&a| a == 0.0), "{:?}", first.alpha);
    }

    #[test]
    fn flash_tiling_says_when_the_saving_holds() {
        let sc = builtin("flash-tiling");
        let s = at(&sc, 6);
        let lab = flash::lab(&s).unwrap();
        let d = lab.q.ncols() as u64;
        let m = lab.sram_elements;
        let text = &sc.steps[5].narration;
        for t in [&text.en, &text.zh] {
            assert!(t.contains(&format!("M = {m}")), "{t}");
            assert!(t.contains(&format!("d² = {}", d * d)), "{t}");
        }
        // M close to d²: the table shows FlashAttention moving more than standard.
        assert!(m < 2 * d * d);
        let traffic = lab.traffic();
        let flash_total = traffic.after.last().unwrap().total();
        assert!(flash_total > traffic.standard.total());
    }

    #[test]
    fn heads_count_from_one_on_every_screen_and_in_every_narration() {
        for sc in scene::builtins().unwrap() {
            for (i, step) in sc.steps.iter().enumerate() {
                for t in [&step.narration.en, &step.narration.zh] {
                    for bad in ["head 0", "heads 0", "头 0", "KV 头 0", "m_0", "q_0"] {
                        assert!(!t.contains(bad), "{} step {}: {bad}: {t}", sc.name, i + 1);
                    }
                }
            }
        }
        // gqa step 3 shows head index 5 of the file: head 6 on screen, q_6 in the inspector.
        let sc = builtin("gqa");
        let t = screen(&sc, 3, Lang::En, 120, 40);
        assert!(t.contains("q_6["), "{t}");
        assert!(!t.contains("q_5["), "{t}");
    }

    #[test]
    fn the_inspector_compares_entropy_with_the_visible_keys() {
        let src = "version = 1\n[title]\nen = \"t\"\nzh = \"t\"\n[model]\ntokens = \"to be or not to be\"\nd_model = 8\nheads = 1\nmask = \"causal\"\n[[steps]]\nstage = \"softmax\"\nhighlight = [[2, 0]]\nnarration.en = \"x\"\nnarration.zh = \"x\"\n";
        let sc = scene::parse("t", "t.toml", src).unwrap();
        let t = screen(&sc, 1, Lang::En, 140, 40);
        assert!(t.contains("3 visible keys (of 6)"), "{t}");
        assert!(t.contains("ln 3 = 1.099"), "{t}");
    }
}

#[test]
fn alibi_header_states_the_rule_the_engine_uses_for_any_head_count() {
    for heads in [4, 6] {
        let mut c = scene::builtin("alibi").unwrap().toy().unwrap().clone();
        c.heads = heads;
        c.kv_heads = heads;
        c.d_model = 4 * heads;
        let p = Pipeline::build(&c).unwrap();
        let f = &p.stage(StageId::Alibi).unwrap().formula;
        assert!(
            f.contains(&attnviz::attn::alibi::alibi_slope_rule(heads)),
            "{f}"
        );
        assert_eq!(f.contains("not a power of two"), heads == 6, "{f}");
    }
}

#[test]
fn scaled_dot_raw_scores_spread_enough_to_saturate() {
    let config = scene::builtin("scaled-dot").unwrap().toy().unwrap().clone();
    let scaled = Pipeline::build(&config).unwrap();
    let raw = Pipeline::build(&ModelConfig {
        scaled: false,
        ..config
    })
    .unwrap();
    let spread = |m: &Array2<f64>| -> Vec<f64> {
        m.rows()
            .into_iter()
            .map(|r| r.fold(f64::MIN, |a, &b| a.max(b)) - r.fold(f64::MAX, |a, &b| a.min(b)))
            .collect()
    };
    // "raw scores differ by up to about 10 within a row"; scaled, "below 1".
    let s = spread(&matrix(&scaled, StageId::Scores, 0));
    let widest = s.iter().copied().fold(0.0, f64::max);
    assert!((9.0..11.0).contains(&widest), "{s:?}");
    assert!(
        spread(&matrix(&scaled, StageId::Scale, 0))
            .iter()
            .all(|&x| x < 1.0)
    );
    // Unscaled, most of a row's weight lands on one key; scaled, every row stays spread.
    let raw_max = raw
        .row_stats(0)
        .iter()
        .map(|r| r.max_weight)
        .fold(0.0, f64::max);
    assert!(raw_max > 0.8, "{raw_max}");
    assert!(scaled.row_stats(0).iter().all(|r| r.max_weight < 0.3));
}

#[test]
fn row_stats_count_the_keys_the_mask_leaves() {
    let p = pipeline("causal-mask");
    for (i, r) in p.row_stats(0).iter().enumerate() {
        assert_eq!(r.visible, i + 1);
    }
    let p = pipeline("padding-mask");
    assert!(p.row_stats(0).iter().all(|r| r.visible == 4));
}

/// Chinese line breaking (UAX #14): on every zh screen of every built-in lesson, at 80,
/// 100 and 120 columns, no line of text (nor of a panel, between its borders) starts
/// with closing punctuation.
#[test]
fn no_zh_screen_line_starts_with_closing_punctuation() {
    let (screens, _) = zh_lines_start_well(false, None);
    assert!(screens >= 3 * 96, "{screens} screens");
}

/// The same on the lessons that run on trained models: each screen loads and runs the
/// model, so this is the long tier (`cargo test --test scene -- --ignored`), within its
/// time budget ([`crate::support::soak::Budget`]).
#[test]
#[ignore = "long soak: run with --ignored"]
fn no_zh_screen_line_starts_with_closing_punctuation_on_trained_models() {
    let budget = Budget::start("zh screens on trained models", 20);
    let (checked, total) = zh_lines_start_well(true, Some(&budget));
    budget.report(checked, total, "screens");
}

/// Checks every zh screen of the built-in lessons on seeded models (`trained` false) or
/// on trained ones (true, where the model is here), until `budget` is spent; returns how
/// many screens it checked of how many there are.
fn zh_lines_start_well(trained: bool, budget: Option<&Budget>) -> (usize, usize) {
    use attnviz::cli::{Lang, TermSize};
    use attnviz::record::{headless::stills, still::text as screen_text};
    const CLOSING: &str = "。，、：；！？）」』】》〉”’";
    const SIZES: [(u16, u16); 3] = [(80, 24), (100, 30), (120, 40)];
    let mut scenes = Vec::new();
    for sc in scene::builtins().unwrap() {
        if sc.pretrained().is_some() != trained {
            continue;
        }
        if let Some(p) = sc.pretrained()
            && attnviz::model::find::resolve(&p.model).is_err()
        {
            eprintln!("skipped {}: {} is not here", sc.name, p.model);
            continue;
        }
        scenes.push(sc);
    }
    // A training lesson trains for a minute each time it plays: it is checked at the
    // narrowest size, where its lines wrap most.
    let sizes = |sc: &scene::Scene| {
        if sc.train().is_some() {
            &SIZES[..1]
        } else {
            &SIZES[..]
        }
    };
    let total = scenes
        .iter()
        .map(|sc| sizes(sc).len() * sc.steps.len())
        .sum();
    let mut bad = Vec::new();
    let mut screens = 0;
    'all: for sc in &scenes {
        for &(cols, rows) in sizes(sc) {
            let opts = options_at(Lang::Zh, TermSize { cols, rows }, 1.0);
            if budget.is_some_and(Budget::spent) {
                break 'all;
            }
            for (i, screen) in stills(sc, &opts).unwrap().iter().enumerate() {
                let k = i + 1;
                let t = screen_text(screen);
                screens += 1;
                for line in t.lines() {
                    for part in line.split(['│', '║', '┃']) {
                        if let Some(c) = part.trim_start().chars().next()
                            && CLOSING.contains(c)
                        {
                            bad.push(format!("{} step {k} at {cols}x{rows}: {line}", sc.name));
                        }
                    }
                }
            }
        }
    }
    assert!(bad.is_empty(), "{} lines:\n{}", bad.len(), bad.join("\n"));
    (screens, total)
}

#[test]
fn linear_attention_describes_the_recurrence_as_what_a_mask_it_lacks_would_do() {
    let sc = scene::builtin("linear-attention").unwrap();
    assert_eq!(
        sc.toy().unwrap().mask,
        attnviz::engine::config::MaskKind::None
    );
    let n = &sc.steps[3].narration;
    assert!(n.en.contains("recurrence"), "{}", n.en);
    assert!(
        n.en.contains("no mask") && n.en.contains("causal mask (not shown)"),
        "{}",
        n.en
    );
    assert!(
        n.zh.contains("没有掩码") && n.zh.contains("因果掩码（此处未演示）"),
        "{}",
        n.zh
    );
}

/// The course's Chinese terms: 当前最大值 (running max), 已处理词元 (tokens processed so
/// far), 随机猜测 (random guessing).
#[test]
fn chinese_narration_uses_the_courses_terms() {
    for sc in scene::builtins().unwrap() {
        for (i, step) in sc.steps.iter().enumerate() {
            for bad in ["滑动最大值", "已生成词元", "瞎猜"] {
                assert!(
                    !step.narration.zh.contains(bad) && !sc.title.zh.contains(bad),
                    "{} step {}: {bad}",
                    sc.name,
                    i + 1
                );
            }
        }
    }
    let said = |name: &str, k: usize| {
        scene::builtin(name).unwrap().steps[k - 1]
            .narration
            .zh
            .clone()
    };
    assert!(said("flash-backward", 3).contains("当前最大值"));
    assert!(said("gqa-real", 3).contains("已处理词元"));
    assert!(said("induction-heads", 2).contains("随机猜测"));
}
