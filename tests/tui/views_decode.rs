//! The decode view: the lesson decoded step by step with a KV cache, and GQA/MQA.
//! `update` tests for its keys, the engine's numbers behind it, and snapshots at
//! 80x24 and 120x40. Accept snapshot changes with
//! `INSTA_UPDATE=always cargo test --test tui views_decode::` after checking them.

use attnviz::cli::Lang;
use attnviz::engine::config::{MaskKind, PeKind};
use attnviz::engine::kv_cache::CacheLayout;
use attnviz::engine::memory::KvSharing;
use attnviz::engine::pipeline::{ModelConfig, StageId};
use attnviz::tui::state::Source;
use attnviz::tui::views::DecodeLab;
use attnviz::tui::{Action, AppOptions, State, ViewKind, draw, update};
use ndarray::Array3;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

const SIZES: [(u16, u16); 2] = [(80, 24), (120, 40)];

const NEXT: Action = Action::ViewCommand(0);
const PREV: Action = Action::ViewCommand(1);
const FIRST: Action = Action::ViewCommand(2);
const LAST: Action = Action::ViewCommand(3);
const FEWER_KV: Action = Action::ViewCommand(4);
const MORE_KV: Action = Action::ViewCommand(5);

fn options() -> AppOptions {
    AppOptions::headless(Lang::En, None, false, "decode")
}

fn lesson(f: impl FnOnce(&mut ModelConfig)) -> State {
    let mut c = ModelConfig::example();
    f(&mut c);
    let mut s = State::for_model(c, options()).unwrap();
    update(&mut s, Action::SetView(ViewKind::Decode));
    s
}

fn lab(s: &State) -> &DecodeLab {
    s.views
        .get::<Result<DecodeLab, String>>(ViewKind::Decode)
        .expect("the view made its lab")
        .as_ref()
        .expect("the lesson decodes")
}

fn render(state: &mut State, cols: u16, rows: u16) -> String {
    update(state, Action::Resize { cols, rows });
    let mut term = Terminal::new(TestBackend::new(cols, rows)).unwrap();
    term.draw(|f| draw(state, f)).unwrap();
    term.backend().to_string()
}

#[test]
fn step_keys_move_through_the_tokens_and_stop_at_the_ends() {
    let mut s = lesson(|_| {});
    assert_eq!(s.cursor.0, 0);
    update(&mut s, NEXT);
    update(&mut s, NEXT);
    assert_eq!(s.cursor.0, 2);
    update(&mut s, PREV);
    assert_eq!(s.cursor.0, 1);
    update(&mut s, LAST);
    assert_eq!(s.cursor.0, 6);
    update(&mut s, NEXT);
    assert_eq!(s.cursor.0, 6, "no token after the last");
    update(&mut s, FIRST);
    update(&mut s, PREV);
    assert_eq!(s.cursor.0, 0);
    // The cursor keys step too: a row per decoding step.
    update(&mut s, Action::Move { rows: 1, cols: 0 });
    assert_eq!(s.cursor.0, 1);
    assert!(render(&mut s, 120, 40).contains("step 2/7  decoding 'cat' (position 1)"));
}

#[test]
fn the_cache_grows_a_row_per_step_and_costs_grow_linearly_against_quadratically() {
    let s = lesson(|c| c.mask = MaskKind::Causal);
    let l = lab(&s);
    let (h, d) = (4, 4);
    for (t, st) in l.decoding.steps.iter().enumerate() {
        assert_eq!(st.cache_len, t + 1);
        assert_eq!(st.cached_madds, (h * (t + 1) * 2 * d) as u64);
        assert_eq!(
            st.recompute_madds,
            (h * (t + 1) * (t + 2) / 2 * 2 * d) as u64
        );
        assert!(st.recompute_max_abs_diff.unwrap() < 1e-12);
    }
    assert!(l.recomputed);
    assert_eq!(l.layout, CacheLayout::Full);
}

#[test]
fn cached_decoding_gives_the_lessons_own_causal_weights() {
    let s = lesson(|c| {
        c.mask = MaskKind::Causal;
        c.pe = PeKind::Rope { base: 10000.0 };
    });
    let l = lab(&s);
    let softmax = s.pipeline.stage(StageId::Softmax).unwrap();
    for h in 0..4 {
        let w = &softmax.matrices[h].data;
        for (t, st) in l.decoding.steps.iter().enumerate() {
            for (c, &pos) in st.cache_positions.iter().enumerate() {
                assert!(
                    (st.weights[[h, c]] - w[[t, pos]]).abs() < 1e-12,
                    "head {h} step {t}"
                );
            }
        }
    }
}

#[test]
fn g_cycles_kv_heads_from_mha_to_gqa_to_mqa() {
    let mut s = lesson(|_| {});
    assert_eq!(lab(&s).kv_heads(), 4, "starts on the lesson's own KV heads");
    let mha_bytes = lab(&s).groups.choices.last().unwrap().cache_bytes;
    update(&mut s, FEWER_KV);
    let l = lab(&s);
    assert_eq!(l.kv_heads(), 2);
    let c = &l.groups.choices[l.choice];
    assert_eq!(c.sharing, KvSharing::Gqa);
    assert_eq!(c.query_heads_of, [vec![0, 1], vec![2, 3]]);
    assert_eq!(c.cache_bytes * 2, mha_bytes);
    assert!(
        c.max_abs_diff > 0.0,
        "pooling two different heads moves the output"
    );
    assert_eq!(
        l.decoding.shape.kv_heads, 2,
        "the decoding runs on the pooled K/V"
    );
    assert!(s.status.as_ref().unwrap().text.contains("GQA"));
    update(&mut s, FEWER_KV);
    assert_eq!(lab(&s).kv_heads(), 1);
    assert!(s.status.as_ref().unwrap().text.contains("MQA"));
    update(&mut s, FEWER_KV);
    assert_eq!(lab(&s).kv_heads(), 4, "wraps round to MHA");
    update(&mut s, MORE_KV);
    assert_eq!(lab(&s).kv_heads(), 1);
    // The choice survives a change of the lesson.
    update(&mut s, Action::CycleMask);
    assert_eq!(lab(&s).kv_heads(), 1);
}

#[test]
fn a_gqa_lesson_is_compared_with_its_own_kv_heads() {
    let s = lesson(|c| c.kv_heads = 2);
    let l = lab(&s);
    assert_eq!(l.kv_heads(), 2);
    // Pooling the lesson's heads back to 2 changes nothing.
    assert_eq!(l.groups.choices[l.choice].max_abs_diff, 0.0);
}

#[test]
fn a_window_mask_decodes_with_a_rolling_buffer() {
    let mut s = lesson(|c| c.mask = MaskKind::Window(3));
    let l = lab(&s);
    assert_eq!(l.layout, CacheLayout::Rolling { window: 3 });
    let st = &l.decoding.steps[5];
    assert_eq!((st.written_slot, st.evicted), (2, Some(2)));
    assert!(l.decoding.steps.iter().all(|st| st.cache_len <= 3));
    update(&mut s, Action::Select { row: 5, col: 1 });
    let screen = render(&mut s, 120, 40);
    assert!(
        screen.contains("slot 2, overwriting position 2"),
        "{screen}"
    );
    assert!(screen.contains("has left the rolling"), "{screen}");
    // The query (row 5, 'mat') is the one that cannot see the evicted key 'cat'.
    assert!(screen.contains("'cat' (position 1)"), "{screen}");
    assert!(screen.contains("'mat' cannot see it"), "{screen}");
}

#[test]
fn weights_from_a_file_cannot_be_decoded_and_the_view_says_why() {
    let source = Source::Weights {
        tokens: vec![],
        layers: vec![Array3::from_elem((2, 3, 3), 1.0 / 3.0)],
        layer: 0,
    };
    let mut s = State::new(source, options()).unwrap();
    update(&mut s, Action::SetView(ViewKind::Decode));
    let screen = render(&mut s, 80, 24);
    assert!(screen.contains("no queries, keys or values"), "{screen}");
    update(&mut s, NEXT);
    update(&mut s, FEWER_KV);
}

#[test]
fn snapshots() {
    for (c, r) in SIZES {
        let mut s = lesson(|c| c.mask = MaskKind::Causal);
        update(&mut s, Action::Select { row: 3, col: 1 });
        update(&mut s, Action::Head(2));
        insta::assert_snapshot!(format!("decode_{c}x{r}"), render(&mut s, c, r));
    }
    let mut s = lesson(|c| c.mask = MaskKind::Window(3));
    update(&mut s, FEWER_KV);
    update(&mut s, LAST);
    insta::assert_snapshot!("decode_rolling_gqa_120x40", render(&mut s, 120, 40));
}

#[test]
fn the_new_views_draw_the_smallest_and_a_long_lesson_without_trouble() {
    let tiny = |c: &mut ModelConfig| {
        c.tokens = vec!["one".into()];
        c.heads = 1;
        c.kv_heads = 1;
    };
    let long = |c: &mut ModelConfig| {
        c.tokens = (0..128).map(|i| format!("w{i}")).collect();
        c.heads = 16;
        c.kv_heads = 4;
        c.d_model = 64;
        c.mask = MaskKind::Window(5);
    };
    for f in [&tiny as &dyn Fn(&mut ModelConfig), &long] {
        let mut s = lesson(f);
        for view in [ViewKind::Decode, ViewKind::Variants, ViewKind::Scaling] {
            update(&mut s, Action::SetView(view));
            for mode in 0..3 {
                update(&mut s, LAST);
                update(&mut s, Action::Move { rows: 0, cols: 200 });
                for (c, r) in [(80, 24), (200, 60)] {
                    let screen = render(&mut s, c, r);
                    assert!(!screen.contains("preparing"), "{view} {mode}: {screen}");
                }
                if view == ViewKind::Variants {
                    update(&mut s, Action::ViewCommand(0));
                } else if view == ViewKind::Decode {
                    update(&mut s, FEWER_KV);
                }
            }
        }
    }
}
