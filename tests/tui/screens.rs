//! Every view drawn through ratatui's TestBackend at 80x24 and 120x40. The numbers come
//! from the f64 reference pipeline, so the snapshots are the same on every machine and
//! SIMD tier. Accept changes with `INSTA_UPDATE=always cargo test --test tui screens::`
//! (or `cargo insta review`) after checking them.

use attnviz::cli::Lang;
use attnviz::engine::config::MaskKind;
use attnviz::engine::pipeline::{ModelConfig, StageId};
use attnviz::tui::{Action, AppOptions, State, ViewKind, draw, update};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

const SIZES: [(u16, u16); 2] = [(80, 24), (120, 40)];

fn lesson() -> State {
    let mut c = ModelConfig::example();
    c.mask = MaskKind::Causal;
    State::for_model(c, AppOptions::headless(Lang::En, None, false, "snapshot")).unwrap()
}

fn render(state: &mut State, cols: u16, rows: u16) -> String {
    update(state, Action::Resize { cols, rows });
    let mut term = Terminal::new(TestBackend::new(cols, rows)).unwrap();
    term.draw(|f| draw(state, f)).unwrap();
    term.backend().to_string()
}

fn at(stage: StageId, cursor: (usize, usize)) -> State {
    let mut s = lesson();
    update(&mut s, Action::GoStage(stage));
    update(
        &mut s,
        Action::Select {
            row: cursor.0,
            col: cursor.1,
        },
    );
    s
}

#[test]
fn pipeline_tokens() {
    for (c, r) in SIZES {
        let mut s = at(StageId::Tokens, (1, 0));
        insta::assert_snapshot!(format!("pipeline_tokens_{c}x{r}"), render(&mut s, c, r));
    }
}

#[test]
fn pipeline_projection() {
    for (c, r) in SIZES {
        let mut s = at(StageId::QkvProjection, (2, 3));
        insta::assert_snapshot!(format!("pipeline_qkv_{c}x{r}"), render(&mut s, c, r));
    }
}

#[test]
fn pipeline_scores() {
    for (c, r) in SIZES {
        let mut s = at(StageId::Scores, (4, 1));
        insta::assert_snapshot!(format!("pipeline_scores_{c}x{r}"), render(&mut s, c, r));
    }
}

#[test]
fn pipeline_softmax_masked() {
    for (c, r) in SIZES {
        let mut s = at(StageId::Softmax, (5, 2));
        insta::assert_snapshot!(format!("pipeline_softmax_{c}x{r}"), render(&mut s, c, r));
    }
}

#[test]
fn pipeline_softmax_after_scale_toggle() {
    let mut s = at(StageId::Softmax, (3, 1));
    update(&mut s, Action::ToggleScale);
    insta::assert_snapshot!("pipeline_softmax_unscaled_120x40", render(&mut s, 120, 40));
}

#[test]
fn heads_view() {
    for (c, r) in SIZES {
        let mut s = lesson();
        update(&mut s, Action::SetView(ViewKind::Heads));
        update(&mut s, Action::Head(1));
        update(&mut s, Action::Select { row: 4, col: 2 });
        insta::assert_snapshot!(format!("heads_{c}x{r}"), render(&mut s, c, r));
    }
}

#[test]
fn heads_view_gqa() {
    let mut c = ModelConfig::example();
    c.kv_heads = 2;
    let mut s = State::for_model(c, AppOptions::headless(Lang::En, None, false, "gqa")).unwrap();
    update(&mut s, Action::SetView(ViewKind::Heads));
    insta::assert_snapshot!("heads_gqa_120x40", render(&mut s, 120, 40));
}

#[test]
fn position_view() {
    for (c, r) in SIZES {
        let mut s = lesson();
        update(&mut s, Action::SetView(ViewKind::Position));
        update(&mut s, Action::Select { row: 2, col: 4 });
        insta::assert_snapshot!(format!("position_{c}x{r}"), render(&mut s, c, r));
    }
    let mut s = lesson();
    update(&mut s, Action::Resize { cols: 80, rows: 24 });
    update(&mut s, Action::SetView(ViewKind::Position));
    update(&mut s, Action::ViewCommand(3));
    insta::assert_snapshot!("position_experiments_80x24", render(&mut s, 80, 24));
}

#[test]
fn help_overlay() {
    for (c, r) in SIZES {
        let mut s = lesson();
        update(&mut s, Action::ToggleHelp);
        insta::assert_snapshot!(format!("help_{c}x{r}"), render(&mut s, c, r));
    }
}

#[test]
fn sentence_editor() {
    let mut s = lesson();
    update(&mut s, Action::Edit(attnviz::tui::EditAction::Start));
    insta::assert_snapshot!("edit_80x24", render(&mut s, 80, 24));
}

#[test]
fn too_small() {
    let mut s = lesson();
    insta::assert_snapshot!("too_small_40x10", render(&mut s, 40, 10));
}

#[test]
fn ascii_and_chinese_narration() {
    let mut c = ModelConfig::example();
    c.tokens = ModelConfig::tokens_from_text("猫坐在垫子上");
    let mut s = State::for_model(c, AppOptions::headless(Lang::Zh, None, true, "zh")).unwrap();
    update(&mut s, Action::GoStage(StageId::Softmax));
    insta::assert_snapshot!("ascii_zh_softmax_80x24", render(&mut s, 80, 24));
}
