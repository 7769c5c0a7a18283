//! The views only a real model has (model: every layer x head; tokens: where one token
//! looks), the zoom over long n x n maps, and the header's tabs, on a tiny GGUF llama
//! written by the test (2 layers, 4 heads over 2 KV heads). Expected numbers are computed
//! here from the session's own weights, independently of the views.

use crate::support;
use support::screen::screen;

use attnviz::cli::Lang;
use attnviz::engine::pipeline::{ModelConfig, StageId};
use attnviz::model::scores::head_scores;
use attnviz::tui::{Action, AppOptions, State, ViewKind, lens_worker, model_state, update, views};
use support::gguf::{Quant, Tiny, tiny_llama};

fn opts() -> AppOptions {
    AppOptions::headless(Lang::En, None, false, "")
}

/// The app on a tiny model (in a temp dir kept alive by the caller).
fn tiny(text: &str, context: usize) -> (tempfile::TempDir, State) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.gguf");
    let mut t = Tiny::new();
    t.context = context;
    tiny_llama(t, Quant::F32).write(&path);
    let mut s = model_state(path.to_str().unwrap(), Some(text), opts()).unwrap();
    update(
        &mut s,
        Action::Resize {
            cols: 120,
            rows: 40,
        },
    );
    (dir, s)
}

#[test]
fn the_model_view_shows_every_layer_and_head_and_opens_one() {
    let (_dir, mut s) = tiny("the cat sat on the mat. the cat sat on the", 64);
    update(&mut s, Action::SetView(ViewKind::Model));
    lens_worker::run_pending(&mut s);
    assert_eq!(s.view, ViewKind::Model);
    let text = screen(&s, 120, 40);
    for label in ["L1", "L2", "h1", "h4"] {
        assert!(text.contains(label), "{label} missing:\n{text}");
    }
    // The line over the maps names the head under the cursor with its scores, which
    // equal the scores of that head's weights computed here.
    update(&mut s, Action::Move { rows: 1, cols: 2 });
    assert_eq!(s.cursor, (1, 2));
    let session = s.source.session().unwrap();
    let n = session.n();
    let sc = head_scores(&session.head_weights(1, 2), &session.ids, |i| i + 1);
    let text = screen(&s, 120, 40);
    assert!(text.contains("layer 2/2 · head 3/4 · kv 2"), "{text}");
    assert!(
        text.contains(&format!("prev-token {:.2}", sc.prev_token)),
        "{text}"
    );
    assert!(
        text.contains(&format!("first-token {:.2}", sc.first_token)),
        "{text}"
    );
    assert!(
        text.contains(&format!("entropy {:.2}", sc.entropy)),
        "{text}"
    );
    assert!(n > 4);
    // Enter opens that head: layer 2, head 3, its weights in the pipeline view.
    update(&mut s, Action::ViewCommand(0));
    lens_worker::run_pending(&mut s);
    assert_eq!(s.view, ViewKind::Pipeline);
    assert_eq!((s.layer(), s.head), (1, 2));
    assert_eq!(s.stage, StageId::Softmax);
    let soft = &s.pipeline.stage(StageId::Softmax).unwrap().matrices[2];
    let w = s.source.session().unwrap().head_weights(1, 2);
    assert!((soft.data[[n - 1, 0]] - w[(n - 1) * n] as f64).abs() < 1e-5);
}

#[test]
fn a_click_on_a_map_selects_its_layer_and_head() {
    let (_dir, mut s) = tiny("one two three four five six", 64);
    update(&mut s, Action::SetView(ViewKind::Model));
    lens_worker::run_pending(&mut s);
    // Find the cell where map (layer 2, head 4) starts: under the "h4" label, on the
    // row of "L2".
    let text = screen(&s, 120, 40);
    let lines: Vec<&str> = text.lines().collect();
    let col_of = |line: &str, pat: &str| {
        line.find(pat)
            .map(|b| unicode_width::UnicodeWidthStr::width(&line[..b]) as u16)
    };
    let (hy, hx) = lines
        .iter()
        .enumerate()
        .find_map(|(y, l)| col_of(l, "h4").map(|x| (y as u16, x)))
        .expect("h4 label");
    let ly = lines
        .iter()
        .enumerate()
        .skip(hy as usize)
        .find_map(|(y, l)| l.starts_with("L2").then_some(y as u16))
        .expect("L2 label");
    update(&mut s, Action::Click { x: hx, y: ly });
    assert_eq!(s.cursor, (1, 3), "{text}");
}

#[test]
fn the_tokens_view_lists_where_the_selected_token_looks() {
    let (_dir, mut s) = tiny("the cat sat on the mat. the cat sat on the", 64);
    update(&mut s, Action::SetView(ViewKind::Tokens));
    lens_worker::run_pending(&mut s);
    assert_eq!(s.view, ViewKind::Tokens);
    let n = s.source.session().unwrap().n();
    update(&mut s, Action::Select { row: n - 1, col: 0 });
    update(&mut s, Action::Head(1));
    let session = s.source.session().unwrap();
    let row = &session.head_weights(0, 1)[(n - 1) * n..n * n];
    let (best, w) = row
        .iter()
        .copied()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap();
    let piece = session.pieces[best].replace(' ', "␣");
    let text = screen(&s, 120, 40);
    assert!(text.contains(&format!("token {n}/{n}")), "{text}");
    assert!(text.contains("bars: head 2"), "{text}");
    assert!(
        text.contains(&format!("strongest: '{piece}' {w:.2}")),
        "expected '{piece}' {w:.2}:\n{text}"
    );
    // `a`: the bars show the mean over the heads.
    update(&mut s, Action::ViewCommand(0));
    lens_worker::run_pending(&mut s);
    let text = screen(&s, 120, 40);
    assert!(text.contains("bars: mean of the heads"), "{text}");
    // Every query token's row draws, also at the smallest size.
    for (cols, rows) in [(80, 24), (200, 60)] {
        update(&mut s, Action::Resize { cols, rows });
        assert!(screen(&s, cols, rows).contains("strongest"));
    }
}

#[test]
fn lessons_have_no_model_or_tokens_view() {
    let mut s = State::for_model(ModelConfig::example(), opts()).unwrap();
    update(&mut s, Action::SetView(ViewKind::Model));
    lens_worker::run_pending(&mut s);
    assert_eq!(s.view, ViewKind::Pipeline);
    assert!(
        s.status
            .as_ref()
            .is_some_and(|st| st.text.contains("--model")),
        "{:?}",
        s.status
    );
    let mut seen = Vec::new();
    for _ in 0..20 {
        update(&mut s, Action::NextView);
        seen.push(s.view);
    }
    assert!(!seen.contains(&ViewKind::Model) && !seen.contains(&ViewKind::Tokens));
    assert!(seen.contains(&ViewKind::Scaling));
}

#[test]
fn the_open_tab_is_on_screen_at_80_columns() {
    let (_dir, mut s) = tiny("the cat sat", 64);
    update(&mut s, Action::Resize { cols: 80, rows: 24 });
    let shown: Vec<ViewKind> = views::shown(&s).iter().map(|v| v.kind()).collect();
    // Every view but the train view, which needs a training run.
    assert_eq!(shown.len(), views::VIEWS.len() - 1);
    assert!(!shown.contains(&ViewKind::Train));
    for kind in shown {
        update(&mut s, Action::SetView(kind));
        lens_worker::run_pending(&mut s);
        let text = screen(&s, 80, 24);
        let first = text.lines().next().unwrap();
        assert!(first.contains(&format!(" {kind} ")), "{kind}: {first}");
    }
}

#[test]
fn zoomed_out_maps_show_block_means_and_maxima() {
    let text = "a b c d e f g h i j ".repeat(6);
    let (_dir, mut s) = tiny(&text, 128);
    let n = s.source.session().unwrap().n();
    assert!(n >= 48, "{n} tokens");
    update(&mut s, Action::GoStage(StageId::Softmax));
    update(&mut s, Action::ZoomOut);
    assert_eq!(s.zoom.per_cell, 2);
    let screen_text = screen(&s, 120, 40);
    let blocks = n.div_ceil(2);
    assert!(
        screen_text.contains(&format!(
            "weights (head 1) · mean of 2x2  [{blocks} x {blocks}]"
        )),
        "{screen_text}"
    );
    // A step of the cursor covers a block.
    update(&mut s, Action::Select { row: 10, col: 4 });
    update(&mut s, Action::Move { rows: 1, cols: 0 });
    assert_eq!(s.cursor, (12, 4));
    update(&mut s, Action::TogglePool);
    assert!(screen(&s, 120, 40).contains("max of 2x2"));
    // Zoomed in again, the matrix is itself.
    update(&mut s, Action::ZoomIn);
    assert_eq!(s.zoom.per_cell, 1);
    assert!(screen(&s, 120, 40).contains(&format!("[{n} x {n}]")));
    // The heads view zooms the same way.
    update(&mut s, Action::ZoomOut);
    update(&mut s, Action::SetView(ViewKind::Heads));
    lens_worker::run_pending(&mut s);
    assert!(screen(&s, 200, 60).contains("max 2x2"));
}

#[test]
fn a_short_lesson_does_not_zoom() {
    let mut s = State::for_model(ModelConfig::example(), opts()).unwrap();
    update(&mut s, Action::ZoomOut);
    assert_eq!(s.zoom.per_cell, 1);
    assert!(
        s.status
            .as_ref()
            .is_some_and(|st| st.text.contains("long texts")),
        "{:?}",
        s.status
    );
}

#[test]
fn the_score_grid_colours_every_head_and_shows_each_layers_sink() {
    let (_dir, mut s) = tiny("the cat sat on the mat. the cat sat on the", 64);
    update(&mut s, Action::SetView(ViewKind::Model));
    lens_worker::run_pending(&mut s);
    // c: maps -> previous-token scores.
    update(&mut s, Action::ViewCommand(1));
    lens_worker::run_pending(&mut s);
    let text = screen(&s, 120, 40);
    assert!(
        text.contains("the prev-token score of every head"),
        "{text}"
    );
    assert!(text.contains("on 1st token"), "{text}");
    // Layer 1's sink: the mean over heads of the first-token score.
    let session = s.source.session().unwrap();
    let heads = session.config().heads;
    let sink: f64 = (0..heads)
        .map(|h| head_scores(&session.head_weights(0, h), &session.ids, |i| i + 1).first_token)
        .sum::<f64>()
        / heads as f64;
    let l1 = text.lines().find(|l| l.starts_with("L1 ")).unwrap();
    assert!(
        l1.contains(&format!("{:>3.0}%", sink * 100.0)),
        "{sink}: {l1}"
    );
    // The cell of head 3 shows its score.
    let p = head_scores(&session.head_weights(0, 2), &session.ids, |i| i + 1).prev_token;
    let num = format!("{p:.2}");
    assert!(l1.contains(num.trim_start_matches('0')), "{num}: {l1}");
    // Four more: the other scores, then the rollout, then the maps again.
    for _ in 0..4 {
        update(&mut s, Action::ViewCommand(1));
        lens_worker::run_pending(&mut s);
    }
    assert!(screen(&s, 120, 40).contains("the entropy score"));
    update(&mut s, Action::ViewCommand(1));
    lens_worker::run_pending(&mut s);
    let text = screen(&s, 120, 40);
    assert!(text.contains("rollout over 2 layers"), "{text}");
    update(&mut s, Action::ViewCommand(1));
    lens_worker::run_pending(&mut s);
    assert!(screen(&s, 120, 40).contains("every head's weights"));
}

#[test]
fn ablating_a_head_runs_the_model_again_and_compares_its_predictions() {
    let (_dir, mut s) = tiny("the cat sat on the mat. the cat sat on the", 64);
    update(&mut s, Action::SetView(ViewKind::Model));
    lens_worker::run_pending(&mut s);
    let before = s.source.session().unwrap().loss().unwrap();
    update(&mut s, Action::Select { row: 1, col: 2 });
    update(&mut s, Action::ViewCommand(2));
    lens_worker::run_pending(&mut s);
    let session = s.source.session().unwrap();
    assert_eq!(session.options.ablate, vec![(1, 2)]);
    let baseline = session.baseline.as_ref().expect("a baseline");
    assert_eq!(baseline.loss, Some(before));
    // The same forward pass, called directly with the head ablated.
    let opts = attnviz::model::forward::ForwardOptions {
        ablate: vec![(1, 2)],
        ..Default::default()
    };
    let out = attnviz::model::forward::forward(
        &session.model.config,
        &session.model.weights,
        &session.ids,
        &opts,
    )
    .unwrap();
    let v = session.model.config.vocab;
    let direct = attnviz::model::predict::token_loss(out.logits.as_ref().unwrap(), v, &session.ids);
    let direct = direct.iter().sum::<f64>() / direct.len() as f64;
    let after = session.loss().unwrap();
    assert!((after - direct).abs() < 1e-9, "{after} vs {direct}");
    assert_ne!(after, before, "ablating a head changed nothing");
    let text = screen(&s, 120, 40);
    assert!(
        text.contains(&format!("{before:.3} -> {after:.3}")),
        "{text}"
    );
    assert!(text.contains("ablated: L2 h3"), "{text}");
    assert!(text.contains("Δloss"), "{text}");
    // d again brings it back; D brings every head back.
    update(&mut s, Action::ViewCommand(2));
    lens_worker::run_pending(&mut s);
    let session = s.source.session().unwrap();
    assert!(session.options.ablate.is_empty() && session.baseline.is_none());
    update(&mut s, Action::ViewCommand(2));
    lens_worker::run_pending(&mut s);
    update(&mut s, Action::Select { row: 0, col: 0 });
    update(&mut s, Action::ViewCommand(2));
    lens_worker::run_pending(&mut s);
    assert_eq!(s.source.session().unwrap().options.ablate.len(), 2);
    update(&mut s, Action::ViewCommand(3));
    lens_worker::run_pending(&mut s);
    assert!(s.source.session().unwrap().options.ablate.is_empty());
    assert_eq!(s.source.session().unwrap().loss(), Some(before));
}

#[test]
fn the_frame_bench_times_every_view_on_a_long_real_text() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.gguf");
    let mut t = Tiny::new();
    t.context = 256;
    tiny_llama(t, Quant::F32).write(&path);
    let records =
        attnviz::tui::frame_bench::measure_model(path.to_str().unwrap(), 200, 120, 40).unwrap();
    for kind in [
        ViewKind::Model,
        ViewKind::Tokens,
        ViewKind::Pipeline,
        ViewKind::Heads,
    ] {
        assert!(
            records
                .iter()
                .any(|r| r.view == kind.name() && r.tokens == 200),
            "no record of the {kind} view at 200 tokens"
        );
    }
    // The views that zoom are timed zoomed out too.
    assert!(records.iter().any(|r| r.view == "heads" && r.zoom == 4));
    assert!(
        records
            .iter()
            .all(|r| r.ms_per_frame > 0.0 && r.ms_per_frame.is_finite())
    );
    let err = attnviz::tui::frame_bench::measure_model(path.to_str().unwrap(), 5000, 120, 40)
        .unwrap_err();
    assert!(err.to_string().contains("--ui-tokens"), "{err}");
}
