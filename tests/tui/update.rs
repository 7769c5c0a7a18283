//! `update(&mut State, Action)` without a terminal: every key of the app, scripts and
//! their virtual clock, mouse clicks, the position experiments, other data sources.

use attnviz::cli::Lang;
use attnviz::engine::config::{MaskKind, PeKind};
use attnviz::engine::pipeline::{ModelConfig, StageId};
use attnviz::tui::keymap::action_for;
use attnviz::tui::state::{Overlay, StatusKind};
use attnviz::tui::views::PositionLab;
use attnviz::tui::{
    Action, AppOptions, EditAction, LoadedTensors, ScriptStep, Source, State, ViewKind, draw,
    update,
};
use ndarray::Array3;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

fn options() -> AppOptions {
    AppOptions::headless(Lang::En, None, false, "test")
}

fn state() -> State {
    State::for_model(ModelConfig::example(), options()).expect("the example lesson builds")
}

fn state_with(f: impl FnOnce(&mut ModelConfig)) -> State {
    let mut c = ModelConfig::example();
    f(&mut c);
    State::for_model(c, options()).expect("lesson builds")
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn press(state: &mut State, code: KeyCode) {
    press_mod(state, code, KeyModifiers::NONE);
}

fn press_mod(state: &mut State, code: KeyCode, mods: KeyModifiers) {
    if let Some(a) = action_for(state, &KeyEvent::new(code, mods)) {
        update(state, a);
    }
}

/// The screen as text after drawing at cols x rows.
fn screen(state: &State, cols: u16, rows: u16) -> Vec<String> {
    let mut term = Terminal::new(TestBackend::new(cols, rows)).unwrap();
    term.draw(|f| draw(state, f)).unwrap();
    let buf = term.backend().buffer();
    (0..rows)
        .map(|y| {
            (0..cols)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect()
        })
        .collect()
}

/// Where `needle` first appears on screen.
fn find(lines: &[String], needle: &str) -> Option<(u16, u16)> {
    lines.iter().enumerate().find_map(|(y, l)| {
        // Positions count cells, and every cell here is one char wide.
        let chars: Vec<char> = l.chars().collect();
        let n: Vec<char> = needle.chars().collect();
        (0..chars.len().saturating_sub(n.len() - 1))
            .find(|&x| chars[x..x + n.len()] == n[..])
            .map(|x| (x as u16, y as u16))
    })
}

#[test]
fn opens_on_the_first_stage_of_the_pipeline() {
    let s = state();
    assert_eq!(s.view, ViewKind::Pipeline);
    assert_eq!(s.stage, StageId::Tokens);
    assert_eq!((s.head, s.cursor, s.sub), (0, (0, 0), 0));
    assert!(!s.quit);
}

#[test]
fn stage_keys_step_over_inactive_stages() {
    let mut s = state(); // sinusoidal PE, no mask, scaled: RoPE, ALiBi and mask do nothing
    let mut seen = vec![s.stage];
    for _ in 0..20 {
        press(&mut s, KeyCode::Char('L'));
        if seen.last() != Some(&s.stage) {
            seen.push(s.stage);
        }
    }
    use StageId::*;
    assert_eq!(
        seen,
        vec![
            Tokens,
            Embeddings,
            PositionEncoding,
            QkvProjection,
            SplitHeads,
            Scores,
            Scale,
            Softmax,
            WeightedSum,
            Concat,
            OutputProjection
        ]
    );
    assert!(
        s.status
            .as_ref()
            .is_some_and(|st| st.text.contains("last stage"))
    );
    press_mod(&mut s, KeyCode::Left, KeyModifiers::SHIFT);
    assert_eq!(s.stage, Concat);
    press(&mut s, KeyCode::Home);
    assert_eq!(s.stage, Tokens);
    press(&mut s, KeyCode::End);
    assert_eq!(s.stage, OutputProjection);
    press_mod(&mut s, KeyCode::Right, KeyModifiers::SHIFT);
    assert_eq!(s.stage, OutputProjection);
}

#[test]
fn rope_and_mask_stages_become_steps_when_switched_on() {
    let mut s = state_with(|c| {
        c.pe = PeKind::Rope { base: 10000.0 };
        c.mask = MaskKind::Causal;
    });
    update(&mut s, Action::GoStage(StageId::SplitHeads));
    update(&mut s, Action::StageNext);
    assert_eq!(s.stage, StageId::Rope);
    update(&mut s, Action::GoStage(StageId::Scale));
    update(&mut s, Action::StageNext);
    assert_eq!(s.stage, StageId::Mask, "ALiBi is off, the mask is on");
}

#[test]
fn plain_keys_move_the_cursor_and_walk_into_the_next_matrix() {
    let mut s = state();
    update(&mut s, Action::GoStage(StageId::QkvProjection));
    let q_cols = s.focused().unwrap().data.ncols();
    for _ in 0..q_cols - 1 {
        press(&mut s, KeyCode::Char('l'));
    }
    assert_eq!((s.sub, s.cursor), (0, (0, q_cols - 1)));
    press(&mut s, KeyCode::Right);
    assert_eq!((s.sub, s.cursor), (1, (0, 0)), "walked from Q into K");
    assert_eq!(s.focused().unwrap().name, "K");
    press(&mut s, KeyCode::Left);
    assert_eq!((s.sub, s.cursor.1), (0, q_cols - 1));
    for _ in 0..50 {
        press(&mut s, KeyCode::Char('j'));
    }
    assert_eq!(
        s.cursor.0,
        s.focused().unwrap().data.nrows() - 1,
        "clamped at the last row"
    );
    press(&mut s, KeyCode::Up);
    press(&mut s, KeyCode::Char('k'));
    assert_eq!(s.cursor.0, s.focused().unwrap().data.nrows() - 3);
    update(&mut s, Action::NextPane);
    assert_eq!(s.sub, 1);
}

#[test]
fn digits_pick_heads_and_out_of_range_says_why() {
    let mut s = state(); // 4 heads
    press(&mut s, KeyCode::Char('3'));
    assert_eq!(s.head, 2);
    press(&mut s, KeyCode::Char('9'));
    assert_eq!(s.head, 2);
    let st = s.status.clone().expect("a message");
    assert_eq!(st.kind, StatusKind::Warn);
    assert!(st.text.contains("only 4 heads"), "{}", st.text);
    press_mod(&mut s, KeyCode::Down, KeyModifiers::SHIFT);
    assert_eq!(s.head, 3);
    press(&mut s, KeyCode::Char('J'));
    assert_eq!(s.head, 0, "wraps around");
    press(&mut s, KeyCode::Char('K'));
    assert_eq!(s.head, 3);
}

#[test]
fn m_cycles_masks_and_the_engine_zeroes_masked_weights() {
    let mut s = state();
    press(&mut s, KeyCode::Char('m'));
    assert_eq!(s.pipeline.config.mask, MaskKind::Causal);
    let w = &s.pipeline.stage(StageId::Softmax).unwrap().matrices[0].data;
    for i in 0..w.nrows() {
        for j in i + 1..w.ncols() {
            assert_eq!(w[[i, j]], 0.0);
        }
    }
    let mut kinds = vec![s.pipeline.config.mask.name()];
    for _ in 0..4 {
        press(&mut s, KeyCode::Char('m'));
        kinds.push(s.pipeline.config.mask.name());
    }
    assert_eq!(kinds, ["causal", "window", "padding", "bigbird", "none"]);
}

#[test]
fn p_cycles_position_encodings() {
    let mut s = state();
    let mut kinds = Vec::new();
    for _ in 0..5 {
        press(&mut s, KeyCode::Char('p'));
        kinds.push(s.pipeline.config.pe.name());
    }
    assert_eq!(kinds, ["learned", "rope", "alibi", "none", "sinusoidal"]);
}

#[test]
fn s_toggles_the_scale_and_compares_the_weights() {
    let mut s = state();
    let before = s.pipeline.row_stats(0);
    press(&mut s, KeyCode::Char('s'));
    assert!(!s.pipeline.config.scaled);
    let sc = s.scale_change.clone().expect("a comparison");
    assert!(sc.was_scaled);
    assert_eq!(sc.before, before);
    assert_eq!(sc.after, s.pipeline.row_stats(0));
    // Without 1/sqrt(d_k) the scores are larger, so softmax is sharper on average.
    let mean = |v: &[attnviz::engine::pipeline::RowStats]| {
        v.iter().map(|r| r.max_weight).sum::<f64>() / v.len() as f64
    };
    assert!(mean(&sc.after) > mean(&sc.before));
    // The inspector shows it at the weights stage.
    update(&mut s, Action::GoStage(StageId::Softmax));
    let text = screen(&s, 120, 40).join("\n");
    assert!(text.contains("1/sqrt(d_k) on -> off"), "{text}");
    assert!(text.contains("sharper"), "{text}");
}

#[test]
fn plus_minus_change_the_length_and_r_reseeds() {
    let mut s = state();
    let n = s.pipeline.shape.n_k;
    let last = s.pipeline.config.tokens.last().cloned();
    press(&mut s, KeyCode::Char('-'));
    assert_eq!(s.pipeline.shape.n_k, n - 1);
    press(&mut s, KeyCode::Char('+'));
    assert_eq!(s.pipeline.shape.n_k, n);
    assert_eq!(
        s.pipeline.config.tokens.last().cloned(),
        last,
        "the token comes back"
    );
    press(&mut s, KeyCode::Char('+'));
    assert_eq!(s.pipeline.shape.n_k, n + 1);
    let x = s.pipeline.stage(StageId::Embeddings).unwrap().matrices[0]
        .data
        .clone();
    press(&mut s, KeyCode::Char('r'));
    assert_eq!(s.pipeline.config.seed, 43);
    assert_ne!(
        s.pipeline.stage(StageId::Embeddings).unwrap().matrices[0].data,
        x
    );
    for _ in 0..20 {
        press(&mut s, KeyCode::Char('-'));
    }
    assert_eq!(s.pipeline.shape.n_k, 1);
    assert!(s.status.is_some());
}

#[test]
fn e_edits_the_sentence() {
    let mut s = state();
    press(&mut s, KeyCode::Char('e'));
    assert!(matches!(s.overlay, Overlay::Edit(_)));
    // Keys type into the editor now: 'q' is a letter, not quit.
    press_mod(&mut s, KeyCode::Char('u'), KeyModifiers::CONTROL);
    for c in "we love queues".chars() {
        press(&mut s, KeyCode::Char(c));
    }
    assert!(!s.quit);
    press(&mut s, KeyCode::Enter);
    assert_eq!(s.overlay, Overlay::None);
    assert_eq!(s.pipeline.config.tokens, ["we", "love", "queues"]);
    // Esc cancels without changing anything.
    press(&mut s, KeyCode::Char('e'));
    press(&mut s, KeyCode::Backspace);
    press(&mut s, KeyCode::Esc);
    assert_eq!(s.pipeline.config.tokens, ["we", "love", "queues"]);
    // An empty sentence is refused and the editor stays open.
    update(&mut s, Action::Edit(EditAction::Start));
    update(&mut s, Action::Edit(EditAction::Clear));
    update(&mut s, Action::Edit(EditAction::Apply));
    assert!(matches!(s.overlay, Overlay::Edit(_)));
    assert_eq!(s.status.as_ref().map(|st| st.kind), Some(StatusKind::Error));
}

#[test]
fn editing_measures_cjk_by_display_width() {
    let mut s = state();
    update(&mut s, Action::Edit(EditAction::Start));
    update(&mut s, Action::Edit(EditAction::Clear));
    for c in "我爱你".chars() {
        update(&mut s, Action::Edit(EditAction::Insert(c)));
    }
    let Overlay::Edit(ed) = &s.overlay else {
        panic!("editor open")
    };
    assert_eq!(ed.cursor_column(), 6);
    update(&mut s, Action::Edit(EditAction::Apply));
    assert_eq!(s.pipeline.config.tokens, ["我", "爱", "你"]);
    update(&mut s, Action::GoStage(StageId::Softmax));
    let text = screen(&s, 120, 40).join("\n");
    assert!(text.contains("我"), "{text}");
}

#[test]
fn help_opens_and_closes_and_quit_keys_quit() {
    let mut s = state();
    press(&mut s, KeyCode::Char('?'));
    assert!(matches!(s.overlay, Overlay::Help { .. }));
    let text = screen(&s, 120, 40).join("\n");
    assert!(text.contains("help: keys"));
    assert!(text.contains("Shift"));
    press(&mut s, KeyCode::Char('j'));
    assert_eq!(s.overlay, Overlay::Help { scroll: 1 });
    press(&mut s, KeyCode::Esc);
    assert_eq!(s.overlay, Overlay::None);
    press(&mut s, KeyCode::Char('q'));
    assert!(s.quit);
    let mut s = state();
    press_mod(&mut s, KeyCode::Char('c'), KeyModifiers::CONTROL);
    assert!(s.quit);
}

#[test]
fn tab_cycles_only_the_views_that_exist() {
    let mut s = state();
    let mut seen = Vec::new();
    for _ in 0..8 {
        press(&mut s, KeyCode::Tab);
        seen.push(s.view);
    }
    assert_eq!(
        seen,
        [
            ViewKind::Heads,
            ViewKind::Position,
            ViewKind::Flash,
            ViewKind::Decode,
            ViewKind::Variants,
            ViewKind::Scaling,
            ViewKind::Pipeline,
            ViewKind::Heads
        ]
    );
    press_mod(&mut s, KeyCode::BackTab, KeyModifiers::SHIFT);
    assert_eq!(s.view, ViewKind::Pipeline);
}

#[test]
fn the_heads_view_opens_on_the_weights() {
    let mut s = state();
    update(&mut s, Action::SetView(ViewKind::Heads));
    assert_eq!(s.stage, StageId::Softmax);
    update(&mut s, Action::StagePrev);
    assert_eq!(s.stage, StageId::Scale, "steps over per-head stages only");
}

#[test]
fn the_position_experiments_come_out_as_the_theory_says() {
    let mut s = state();
    update(&mut s, Action::SetView(ViewKind::Position));
    let lab = s
        .views
        .get::<PositionLab>(ViewKind::Position)
        .expect("built");
    assert!(
        lab.shuffle_nope.max_diff < 1e-9,
        "{}",
        lab.shuffle_nope.max_diff
    );
    assert!(lab.shuffle_sin.max_diff > 1e-6);
    assert!(
        lab.shift_rope.max_diff < 1e-9,
        "{}",
        lab.shift_rope.max_diff
    );
    assert!(lab.shift_sin.max_diff > 1e-6);
    let (perm, shift) = (lab.perm.clone(), lab.shift);
    press(&mut s, KeyCode::Char('x'));
    let lab = s.views.get::<PositionLab>(ViewKind::Position).unwrap();
    assert_ne!(lab.perm, perm, "x shuffles again");
    press(&mut s, KeyCode::Char('t'));
    let lab = s.views.get::<PositionLab>(ViewKind::Position).unwrap();
    assert_eq!(lab.shift, shift + 1);
    assert!(lab.shift_rope.max_diff < 1e-9);
    // A model change rebuilds the experiments for the new lesson.
    press(&mut s, KeyCode::Char('-'));
    let lab = s.views.get::<PositionLab>(ViewKind::Position).unwrap();
    assert_eq!(lab.config.tokens.len(), s.pipeline.shape.n_k);
}

fn step(stage: StageId, dwell_ms: u64, narration: &str) -> ScriptStep {
    ScriptStep {
        stage: Some(stage),
        narration: narration.into(),
        dwell_ms,
        ..Default::default()
    }
}

#[test]
fn scripts_play_on_a_virtual_clock() {
    let steps = vec![
        step(StageId::Scores, 1000, "first"),
        ScriptStep {
            view: Some(ViewKind::Heads),
            head: Some(2),
            highlight: vec![(3, 1), (2, 2)],
            ..step(StageId::Softmax, 2000, "second")
        },
        step(StageId::OutputProjection, 500, "third"),
    ];
    let mut s = state().with_script(steps, true, 1.0);
    assert_eq!(s.stage, StageId::Scores);
    assert_eq!(s.narration_text(), "first");
    assert_eq!(s.next_change_in_ms(), Some(1000));
    update(&mut s, Action::Tick { ms: 999 });
    assert_eq!(s.script.as_ref().unwrap().index, 0);
    update(&mut s, Action::Tick { ms: 1 });
    assert_eq!(s.script.as_ref().unwrap().index, 1);
    assert_eq!(
        (s.view, s.stage, s.head),
        (ViewKind::Heads, StageId::Softmax, 2)
    );
    assert_eq!(s.cursor, (3, 1), "the first highlight gets the cursor");
    assert_eq!(s.highlight, vec![(3, 1), (2, 2)]);
    // Speed 2 halves the wait.
    press(&mut s, KeyCode::Char(']'));
    assert_eq!(s.script.as_ref().unwrap().speed, 1.5);
    press(&mut s, KeyCode::Char(']'));
    assert_eq!(s.script.as_ref().unwrap().speed, 2.0);
    assert_eq!(s.next_change_in_ms(), Some(1000));
    update(&mut s, Action::Tick { ms: 1000 });
    assert_eq!(s.script.as_ref().unwrap().index, 2);
    update(&mut s, Action::Tick { ms: 10_000 });
    let p = s.script.as_ref().unwrap();
    assert!(!p.playing && p.finished());
    assert_eq!(s.next_change_in_ms(), None);
    // Space at the end plays again from the start.
    press(&mut s, KeyCode::Char(' '));
    assert_eq!(s.script.as_ref().unwrap().index, 0);
    assert!(s.script.as_ref().unwrap().playing);
    press(&mut s, KeyCode::Char(' '));
    assert!(!s.script.as_ref().unwrap().playing);
    update(&mut s, Action::Tick { ms: 5000 });
    assert_eq!(
        s.script.as_ref().unwrap().index,
        0,
        "paused: time does not move it"
    );
    press(&mut s, KeyCode::Char('n'));
    assert_eq!(s.script.as_ref().unwrap().index, 1);
    press(&mut s, KeyCode::Char('N'));
    assert_eq!(s.script.as_ref().unwrap().index, 0);
    update(&mut s, Action::GotoStep(2));
    assert_eq!(s.narration_text(), "third");
}

#[test]
fn a_step_that_does_not_fit_is_applied_in_part_and_said_so() {
    let mut s = state();
    update(
        &mut s,
        Action::ApplyStep(Box::new(ScriptStep {
            head: Some(7),
            stage: Some(StageId::Softmax),
            highlight: vec![(99, 99)],
            narration: "n".into(),
            ..Default::default()
        })),
    );
    assert_eq!(s.stage, StageId::Softmax);
    assert_eq!(s.view, ViewKind::Pipeline);
    let n = s.pipeline.shape.n_k;
    assert_eq!(s.cursor, (n - 1, n - 1), "clamped into the matrix");
    let st = s.ctx.status.expect("a warning");
    assert!(st.text.contains("head index 7"), "{}", st.text);
}

#[test]
fn script_keys_do_nothing_without_a_script() {
    let mut s = state();
    assert_eq!(action_for(&s, &key(KeyCode::Char(' '))), None);
    assert_eq!(action_for(&s, &key(KeyCode::Char('n'))), None);
    update(&mut s, Action::Tick { ms: 10_000 });
    assert_eq!(s.stage, StageId::Tokens);
}

#[test]
fn clicks_select_tabs_stages_and_cells() {
    let mut s = state();
    update(
        &mut s,
        Action::Resize {
            cols: 120,
            rows: 40,
        },
    );
    let lines = screen(&s, 120, 40);
    let (x, y) = find(&lines, "softmax").expect("breadcrumb shows softmax");
    update(&mut s, Action::Click { x: x + 1, y });
    assert_eq!(s.stage, StageId::Softmax);
    // The cell in row 'mat' (5) under column 'sat' (2).
    let lines = screen(&s, 120, 40);
    let y_mat = lines
        .iter()
        .position(|l| l.starts_with("mat "))
        .expect("row label mat") as u16;
    let (x_sat, _) = find(&lines, " sat ").expect("column label sat");
    update(
        &mut s,
        Action::Click {
            x: x_sat + 2,
            y: y_mat,
        },
    );
    assert_eq!(s.cursor, (5, 2));
    let (x, y) = find(&lines, " heads ").expect("tab");
    update(&mut s, Action::Click { x: x + 2, y });
    assert_eq!(s.view, ViewKind::Heads);
}

#[test]
fn too_small_says_what_it_has_and_needs() {
    let s = state();
    let text = screen(&s, 40, 10).join(" ");
    assert!(text.contains("80x24"), "{text}");
    assert!(text.contains("40x10"), "{text}");
}

#[test]
fn ascii_mode_draws_only_ascii() {
    let mut s = State::for_model(
        ModelConfig::example(),
        AppOptions::headless(Lang::En, None, true, "ascii"),
    )
    .unwrap();
    update(&mut s, Action::CycleMask);
    for view in [ViewKind::Pipeline, ViewKind::Heads, ViewKind::Position] {
        update(&mut s, Action::SetView(view));
        update(&mut s, Action::StageFirst);
        for _ in 0..14 {
            for line in screen(&s, 120, 40) {
                assert!(line.is_ascii(), "{view} {:?}: {line}", s.stage);
            }
            update(&mut s, Action::StageNext);
        }
    }
    update(&mut s, Action::ToggleHelp);
    for line in screen(&s, 120, 40) {
        assert!(line.is_ascii(), "help: {line}");
    }
}

#[test]
fn mono_heatmaps_carry_a_glyph_ramp() {
    let mut s = State::for_model(
        ModelConfig::example(),
        AppOptions::headless(Lang::En, Some(attnviz::cli::ThemeName::Mono), false, "mono"),
    )
    .unwrap();
    update(&mut s, Action::GoStage(StageId::Softmax));
    let text = screen(&s, 120, 40).join("\n");
    assert!(
        text.contains('░') || text.contains('▒') || text.contains('▓'),
        "{text}"
    );
}

#[test]
fn attention_files_open_on_the_weights_with_layers() {
    // Causal rows of uniform weights, three layers of two heads.
    let layer = Array3::from_shape_fn(
        (2, 4, 4),
        |(_, i, j)| {
            if j <= i { 1.0 / (i + 1) as f64 } else { 0.0 }
        },
    );
    let source = Source::Weights {
        tokens: vec!["a".into(), "b".into(), "c".into(), "d".into()],
        layers: vec![layer.clone(), layer.clone(), layer],
        layer: 0,
    };
    let mut s = State::new(source, options()).unwrap();
    assert_eq!(s.stage, StageId::Softmax);
    update(&mut s, Action::StageNext);
    assert_eq!(s.stage, StageId::Softmax, "nothing else to step to");
    update(&mut s, Action::CycleMask);
    assert_eq!(s.status.as_ref().map(|st| st.kind), Some(StatusKind::Warn));
    assert!(action_for(&s, &key(KeyCode::Char('>'))).is_some());
    update(&mut s, Action::LayerNext);
    assert!(matches!(s.source, Source::Weights { layer: 1, .. }));
    update(&mut s, Action::LayerPrev);
    update(&mut s, Action::LayerPrev);
    assert!(
        matches!(s.source, Source::Weights { layer: 2, .. }),
        "wraps"
    );
    let text = screen(&s, 120, 40).join("\n");
    assert!(text.contains("layer 3/3"), "{text}");
}

#[test]
fn tensors_from_files_support_masks_and_rope() {
    let q = Array3::from_shape_fn((2, 5, 4), |(h, i, c)| ((h + i * 3 + c) as f64).sin());
    let k = Array3::from_shape_fn((1, 5, 4), |(_, i, c)| ((i + 2 * c) as f64).cos());
    let v = Array3::from_shape_fn((1, 5, 3), |(_, i, c)| (i * c) as f64 * 0.1);
    let source = Source::Tensors(Box::new(LoadedTensors {
        tokens: Vec::new(),
        q,
        k,
        v,
        mask: MaskKind::None,
        pe: PeKind::None,
        scaled: true,
    }));
    let mut s = State::new(source, options()).unwrap();
    assert_eq!(s.stage, StageId::SplitHeads, "the first stage with data");
    update(&mut s, Action::CycleMask);
    assert_eq!(*s.pipeline.mask.kind(), MaskKind::Causal);
    update(&mut s, Action::CyclePe);
    assert!(matches!(s.pipeline.config.pe, PeKind::Rope { .. }));
    update(&mut s, Action::Edit(EditAction::Start));
    assert_eq!(s.overlay, Overlay::None, "no sentence to edit");
    let text = screen(&s, 120, 40).join("\n");
    assert!(text.contains("t0"), "default labels: {text}");
}

#[test]
fn a_one_token_matrix_keeps_its_whole_title() {
    let mut s = state_with(|c| c.tokens = vec!["solo".into()]);
    update(&mut s, Action::GoStage(StageId::Softmax));
    let text = screen(&s, 120, 40).join("\n");
    assert!(text.contains("weights (head 1)  [1 x 1]"), "{text}");
}
