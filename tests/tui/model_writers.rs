//! The model view's writers panel (`i`): for the head under the cursor, the earlier heads
//! ranked by their q, k and v composition scores, on a tiny GGUF llama written by the test.
//! The ranking on screen is compared with `model::composition::composition_scores` run
//! here on the session's own weights; the scores come from the headless `run_pending`.

use crate::support;
use support::screen::sized as screen;

use attnviz::cli::Lang;
use attnviz::model::composition::composition_scores;
use attnviz::tui::lens_worker;
use attnviz::tui::{Action, AppOptions, State, ViewKind, model_state, update};
use support::gguf::{Quant, Tiny, tiny_llama};

const WRITERS: Action = Action::ViewCommand(5);

fn tiny(lang: Lang) -> (tempfile::TempDir, State) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.gguf");
    tiny_llama(Tiny::new(), Quant::F32).write(&path);
    let s = model_state(
        path.to_str().unwrap(),
        Some("the cat sat on the mat. the cat"),
        AppOptions::headless(lang, None, false, ""),
    )
    .unwrap();
    (dir, s)
}

/// The line of the panel that starts with `kind` ("q ", "k ", "v ").
fn kind_line<'a>(text: &'a str, kind: &str) -> &'a str {
    text.lines()
        .find(|l| l.starts_with(kind) && l.contains(" h"))
        .unwrap_or_else(|| panic!("no {kind:?} line in\n{text}"))
}

#[test]
fn i_lists_the_earlier_heads_by_composition_score_strongest_first() {
    let (_dir, mut s) = tiny(Lang::En);
    update(&mut s, Action::SetView(ViewKind::Model));
    assert_eq!(s.view, ViewKind::Model);
    update(&mut s, WRITERS);
    let text = screen(&mut s, 120, 40);
    assert!(text.contains("computing the composition scores"), "{text}");
    assert!(lens_worker::run_pending(&mut s));
    assert!(!lens_worker::run_pending(&mut s), "computed once");

    // Layer 1 (from 0), head 0: every head of layer 0 writes into it.
    update(&mut s, Action::Move { rows: 1, cols: 0 });
    assert_eq!(s.cursor.0, 1);
    let head = s.cursor.1;
    let text = screen(&mut s, 120, 40);
    assert!(
        text.contains(&format!("writing into L2 h{}", head + 1)),
        "{text}"
    );
    let sess = s.source.session().unwrap();
    let cfg = &sess.model.config;
    let layers: Vec<usize> = (0..cfg.layers).collect();
    let all = composition_scores(cfg, &sess.model.weights, &layers, 1).unwrap();
    for (kind, of) in [
        (
            "q ",
            (|c: &attnviz::model::composition::Composition| c.q) as fn(&_) -> f64,
        ),
        ("k ", |c| c.k),
        ("v ", |c| c.v),
    ] {
        let mut rows: Vec<_> = all
            .iter()
            .filter(|c| c.layer_b == 1 && c.head_b == head)
            .collect();
        assert_eq!(rows.len(), cfg.heads, "every head of layer 0");
        rows.sort_by(|a, b| of(b).total_cmp(&of(a)));
        let want: String = rows
            .iter()
            .map(|c| format!("L{} h{} {:.3}  ", c.layer_a + 1, c.head_a + 1, of(c)))
            .collect();
        let line = kind_line(&text, kind);
        assert!(
            line.starts_with(&format!("{kind}{}", want.trim_end())),
            "{kind}: want {want:?}\n got {line:?}"
        );
    }

    // Layer 0 has no earlier heads; `i` hides the panel.
    update(&mut s, Action::Move { rows: -1, cols: 0 });
    let text = screen(&mut s, 120, 40);
    assert!(text.contains("no earlier heads"), "{text}");
    update(&mut s, WRITERS);
    let text = screen(&mut s, 120, 40);
    assert!(!text.contains("writing into"), "{text}");
    // Shown again: the scores are kept, nothing to compute.
    update(&mut s, WRITERS);
    assert!(!lens_worker::run_pending(&mut s));
    let text = screen(&mut s, 80, 24);
    assert!(text.contains("writing into L1"), "{text}");
}

#[test]
fn the_writers_panel_speaks_chinese() {
    let (_dir, mut s) = tiny(Lang::Zh);
    update(&mut s, Action::SetView(ViewKind::Model));
    update(&mut s, WRITERS);
    lens_worker::run_pending(&mut s);
    update(&mut s, Action::Move { rows: 1, cols: 0 });
    let text = screen(&mut s, 120, 40);
    // Wide characters take two cells; the test backend leaves the second blank.
    assert!(text.replace(' ', "").contains("组合分数"), "{text}");
    kind_line(&text, "k ");
}
