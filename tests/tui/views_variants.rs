//! The variants view: sliding window, BigBird and linear attention on the lesson's
//! inputs. `update` tests for its keys, the engine's numbers behind it, and snapshots
//! of each variant at 80x24 and 120x40. Accept snapshot changes with
//! `INSTA_UPDATE=always cargo test --test tui views_variants::` after checking them.

use attnviz::cli::Lang;
use attnviz::engine::config::MaskKind;
use attnviz::engine::pipeline::{ModelConfig, StageId};
use attnviz::engine::variants::{CellKind, receptive_span};
use attnviz::tui::views::{VariantMode, VariantsLab};
use attnviz::tui::{Action, AppOptions, State, ViewKind, draw, update};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

const SIZES: [(u16, u16); 2] = [(80, 24), (120, 40)];

const MODE: Action = Action::ViewCommand(0);
const WIDER: Action = Action::ViewCommand(1);
const NARROWER: Action = Action::ViewCommand(2);
const DEEPER: Action = Action::ViewCommand(3);
const SHALLOWER: Action = Action::ViewCommand(4);
const CAUSAL: Action = Action::ViewCommand(5);

fn lesson(f: impl FnOnce(&mut ModelConfig)) -> State {
    let mut c = ModelConfig::example();
    f(&mut c);
    let opts = AppOptions::headless(Lang::En, None, false, "variants");
    let mut s = State::for_model(c, opts).unwrap();
    update(&mut s, Action::SetView(ViewKind::Variants));
    s
}

fn lab(s: &State) -> &VariantsLab {
    s.views.get::<VariantsLab>(ViewKind::Variants).unwrap()
}

fn render(state: &mut State, cols: u16, rows: u16) -> String {
    update(state, Action::Resize { cols, rows });
    let mut term = Terminal::new(TestBackend::new(cols, rows)).unwrap();
    term.draw(|f| draw(state, f)).unwrap();
    term.backend().to_string()
}

#[test]
fn v_cycles_the_variants_and_settings_survive_a_lesson_change() {
    let mut s = lesson(|_| {});
    assert_eq!(lab(&s).settings.mode, VariantMode::Window);
    update(&mut s, MODE);
    assert_eq!(lab(&s).settings.mode, VariantMode::BigBird);
    assert!(s.status.as_ref().unwrap().text.contains("BigBird"));
    update(&mut s, MODE);
    assert_eq!(lab(&s).settings.mode, VariantMode::Linear);
    update(&mut s, Action::Longer);
    assert_eq!(
        lab(&s).settings.mode,
        VariantMode::Linear,
        "kept across a rebuild"
    );
    assert_eq!(lab(&s).tokens.len(), 8);
    update(&mut s, MODE);
    assert_eq!(lab(&s).settings.mode, VariantMode::Window);
}

#[test]
fn window_and_layer_keys_are_clamped_and_the_reach_grows_by_w_minus_1() {
    let mut s = lesson(|_| {});
    // Seven tokens: W starts at a third of the sentence, two layers.
    assert_eq!((lab(&s).settings.window, lab(&s).settings.layers), (3, 2));
    for _ in 0..20 {
        update(&mut s, WIDER);
    }
    assert_eq!(lab(&s).settings.window, 7, "at most n");
    for _ in 0..20 {
        update(&mut s, NARROWER);
    }
    assert_eq!(lab(&s).settings.window, 1);
    update(&mut s, WIDER);
    update(&mut s, WIDER);
    update(&mut s, DEEPER);
    update(&mut s, SHALLOWER);
    update(&mut s, SHALLOWER);
    update(&mut s, SHALLOWER);
    assert_eq!(lab(&s).settings.layers, 1, "at least one layer");
    update(&mut s, DEEPER);
    update(&mut s, DEEPER);
    let l = lab(&s);
    let sw = l.sliding.as_ref().unwrap();
    assert_eq!((sw.window, sw.layers.len()), (3, 3));
    // Layer 1 is the band; the layer a key first reaches a query at is
    // ceil((i - j) / (W - 1)), and none past L layers.
    for i in 0..7usize {
        for j in 0..7usize {
            let want = if j > i {
                0
            } else if i == j {
                1
            } else {
                (i - j).div_ceil(2)
            };
            let want = if want > 3 { 0 } else { want };
            assert_eq!(l.first_layer[[i, j]] as usize, want, "({i},{j})");
        }
    }
    for layer in &sw.layers {
        assert_eq!(layer.span, receptive_span(3, layer.layer, 7));
    }
}

#[test]
fn bigbird_counts_every_cell_once() {
    let mut s = lesson(|c| c.mask = MaskKind::BigBird(attnviz::engine::config::BIGBIRD_DEFAULT));
    // On a BigBird mask the view opens on the BigBird pattern, not the sliding window.
    assert_eq!(
        lab(&s).settings.mode,
        attnviz::tui::views::VariantMode::BigBird
    );
    let bb = lab(&s).bigbird.as_ref().unwrap();
    assert_eq!(bb.global + bb.local + bb.random + bb.masked, 49);
    assert_eq!(
        bb.cells.iter().filter(|&&k| k == CellKind::Masked).count(),
        bb.masked
    );
    assert_eq!(
        bb.tiles.skipped + bb.tiles.full + bb.tiles.partial,
        bb.tiles.total
    );
    // The pattern is the lesson's mask: masked cells have zero weight in the pipeline.
    let w = &s.pipeline.stage(StageId::Softmax).unwrap().matrices[0].data;
    for ((i, j), k) in bb.cells.indexed_iter() {
        assert_eq!(*k == CellKind::Masked, w[[i, j]] == 0.0, "({i},{j})");
    }
    update(&mut s, WIDER);
    assert_eq!(lab(&s).settings.bigbird.window, 2);
}

#[test]
fn linear_attention_is_compared_per_head_and_c_toggles_causal() {
    let mut s = lesson(|_| {});
    update(&mut s, MODE);
    update(&mut s, MODE);
    let l = lab(&s);
    let cmp = l.linear.as_ref().unwrap();
    assert_eq!(cmp.len(), 4);
    assert!(!cmp[0].causal, "the lesson has no mask");
    assert_eq!((cmp[0].state_elements, cmp[0].matrix_elements), (16, 49));
    // Softmax weights are the pipeline's.
    let w = &s.pipeline.stage(StageId::Softmax).unwrap().matrices[1].data;
    let diff = (&cmp[1].softmax_weights - w)
        .iter()
        .fold(0.0f64, |m, x| m.max(x.abs()));
    assert!(diff < 1e-12, "{diff}");
    update(&mut s, CAUSAL);
    let cmp = lab(&s).linear.as_ref().unwrap();
    assert!(cmp[0].causal);
    assert_eq!(cmp[0].linear_weights[[0, 1]], 0.0);
    let screen = render(&mut s, 120, 40);
    assert!(screen.contains("prefix sums for causal"), "{screen}");
}

#[test]
fn snapshots() {
    for (c, r) in SIZES {
        let mut s = lesson(|c| c.mask = MaskKind::Causal);
        update(&mut s, Action::Select { row: 5, col: 2 });
        insta::assert_snapshot!(format!("variants_window_{c}x{r}"), render(&mut s, c, r));
        update(&mut s, MODE);
        insta::assert_snapshot!(format!("variants_bigbird_{c}x{r}"), render(&mut s, c, r));
        update(&mut s, MODE);
        update(&mut s, Action::Head(1));
        insta::assert_snapshot!(format!("variants_linear_{c}x{r}"), render(&mut s, c, r));
    }
}
