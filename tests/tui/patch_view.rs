//! The patch view on a real model with a second text (`--compare`, `e`): its cells are the
//! sweep `model::patching::patch_sweep` gives for the same texts, answer and foil (the
//! clean run's top-1 against the corrupt run's), `p` cycles the four kinds of site, Enter
//! opens the layer under the cursor, `e` types the second text (a wrong token count is
//! an error naming both counts), and without a second text the view says how to give
//! one. On a tiny GGUF llama written by the test; the command line refuses texts of
//! different lengths with exit code 2.

use crate::support;
use support::screen::screen;

use assert_cmd::Command;
use attnviz::cli::Lang;
use attnviz::model::patching::{LogitPair, PatchWhat, patch_sweep};
use attnviz::tui::keymap::action_for;
use attnviz::tui::views::patch::{PatchState, lab};
use attnviz::tui::{
    Action, AppOptions, EditAction, State, ViewKind, lens_worker, model_state, update, with_compare,
};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use support::gguf::{Quant, Tiny, tiny_llama};

const TEXT: &str = "the cat sat on the mat. the cat sat on the";
const OTHER: &str = "the mat sat on the cat. the cat sat on the";

fn key(s: &mut State, code: KeyCode) {
    let a = action_for(s, &KeyEvent::new(code, KeyModifiers::NONE))
        .unwrap_or_else(|| panic!("{code:?} is not bound in the {} view", s.view));
    update(s, a);
    lens_worker::run_pending(s);
}

fn model(dir: &tempfile::TempDir) -> String {
    let path = dir.path().join("tiny.gguf");
    let mut t = Tiny::new();
    t.context = 64;
    tiny_llama(t, Quant::F32).write(&path);
    path.to_str().unwrap().to_string()
}

/// The app on the tiny model with the second text, on the patch view, at `cols` x `rows`.
fn app(dir: &tempfile::TempDir, compare: Option<&str>, cols: u16, rows: u16) -> State {
    let opts = AppOptions::headless(Lang::En, None, false, "");
    let mut s = model_state(&model(dir), Some(TEXT), opts).unwrap();
    if let Some(c) = compare {
        s = with_compare(s, c).unwrap();
    }
    update(&mut s, Action::Resize { cols, rows });
    update(&mut s, Action::SetView(ViewKind::Patch));
    lens_worker::run_pending(&mut s);
    s
}

fn outcome(s: &State) -> std::sync::Arc<attnviz::tui::action::PatchOutcome> {
    match &lab(s).expect("the patch view's lab").state {
        PatchState::Ready(o) => o.clone(),
        other => panic!("no sweep: {other:?}"),
    }
}

#[test]
fn the_cells_are_the_sweep_of_the_two_texts() {
    let dir = tempfile::tempdir().unwrap();
    let s = app(&dir, Some(OTHER), 120, 40);
    let o = outcome(&s);
    let session = s.source.session().unwrap();
    let compare = s.compare.as_ref().unwrap();
    let run = compare.session.as_ref().expect("the second text's run");
    // The answer: the clean run's top-1; the foil: the corrupt run's, or the clean top-2.
    assert_eq!(o.target.id, session.top_next[0].id);
    let foil = if run.top_next[0].id != o.target.id {
        run.top_next[0].id
    } else {
        session.top_next[1].id
    };
    assert_eq!(o.foil.id, foil);
    let m = &session.model;
    let want = patch_sweep(
        &m.config,
        &m.weights,
        &session.ids,
        &compare.ids,
        LogitPair {
            target: o.target.id,
            foil,
        },
        PatchWhat::Resid,
        Some(1),
        &mut |_, _| Ok(()),
    )
    .unwrap();
    for (got, want) in o
        .result
        .rows
        .iter()
        .flatten()
        .zip(want.rows.iter().flatten())
    {
        assert!((got - want).abs() <= 1e-4, "{got} against {want}");
    }
    // The cursor starts on the first position where the texts differ, at layer 1.
    let first = (0..session.n())
        .find(|&i| session.ids[i] != compare.ids[i])
        .unwrap();
    assert_eq!(s.cursor, (0, first));
    let text = screen(&s, 120, 40);
    assert!(
        text.contains(&format!("clean {:.3}", want.clean_ld))
            && text.contains(&format!("corrupt {:.3}", want.corrupt_ld)),
        "{text}"
    );
    assert!(
        text.contains(&format!("{:.3}", want.rows[0][first])),
        "{text}"
    );
    // The patched run's top tokens under the cursor.
    let top = &o.tops[0][first][0];
    let piece = attnviz::tui::views::lens::token_label(&m.tokenizer.piece(top.id));
    assert!(
        text.contains(&format!("{piece} {:.0}%", top.prob * 100.0)),
        "{text}"
    );
}

#[test]
fn p_cycles_the_sites_and_enter_opens_the_layer() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = app(&dir, Some(OTHER), 80, 24);
    let heads = s.source.session().unwrap().config().heads;
    let n = s.source.session().unwrap().n();
    let layers = s.source.session().unwrap().config().layers;
    for (what, cols) in [
        (PatchWhat::Heads, heads),
        (PatchWhat::AttnOut, n),
        (PatchWhat::MlpOut, n),
        (PatchWhat::Resid, n),
    ] {
        key(&mut s, KeyCode::Char('p'));
        let o = outcome(&s);
        assert_eq!(o.result.what, what);
        assert_eq!(o.result.rows.len(), layers);
        assert!(o.result.rows.iter().all(|r| r.len() == cols));
        let text = screen(&s, 80, 24);
        assert!(text.contains("logit("), "{what:?}: {text}");
        if what == PatchWhat::Heads {
            assert!(
                text.contains("h1") && text.contains(&format!("h{heads}")),
                "{text}"
            );
        }
    }
    // Enter on layer 2 opens it in the tokens view.
    key(&mut s, KeyCode::Down);
    key(&mut s, KeyCode::Enter);
    assert_eq!(s.view, ViewKind::Tokens);
    assert_eq!(s.layer(), 1);
}

#[test]
fn e_types_the_second_text_and_a_wrong_count_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = app(&dir, None, 120, 40);
    let text = screen(&s, 120, 40);
    assert!(
        text.contains("--compare TEXT") && text.contains("press e"),
        "{text}"
    );
    key(&mut s, KeyCode::Char('e'));
    let n = s.source.session().unwrap().n();
    // A text too short: the error names both counts, and the editor stays open.
    update(&mut s, Action::Edit(EditAction::Clear));
    for c in "the cat".chars() {
        key(&mut s, KeyCode::Char(c));
    }
    key(&mut s, KeyCode::Enter);
    let status = s.status.as_ref().expect("an error").text.clone();
    let k = s
        .source
        .session()
        .unwrap()
        .model
        .tokenizer
        .encode("the cat")
        .unwrap()
        .len();
    assert!(
        status.contains(&format!("has {k} tokens")) && status.contains(&format!("the first {n}")),
        "{status}"
    );
    assert!(s.compare.is_none());
    // The right count: the sweep of the new pair.
    key(&mut s, KeyCode::Esc);
    key(&mut s, KeyCode::Char('e'));
    update(&mut s, Action::Edit(EditAction::Clear));
    for c in OTHER.chars() {
        key(&mut s, KeyCode::Char(c));
    }
    key(&mut s, KeyCode::Enter);
    assert_eq!(s.compare.as_ref().unwrap().text, OTHER);
    let o = outcome(&s);
    assert_eq!(o.result.rows[0].len(), n);
}

#[test]
fn the_command_line_refuses_texts_of_different_lengths() {
    let dir = tempfile::tempdir().unwrap();
    let m = model(&dir);
    let out = Command::cargo_bin("attnviz")
        .unwrap()
        .args(["--model", &m, "--tokens", TEXT, "--compare", "the cat"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--compare: the second text has ") && err.contains("the same number"),
        "{err}"
    );
}

#[test]
fn x_in_the_tokens_view_shows_the_second_run_and_the_difference() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = app(&dir, Some(OTHER), 120, 40);
    update(&mut s, Action::SetView(ViewKind::Tokens));
    let (first, second) = {
        let c = s.compare.as_ref().unwrap();
        (
            match &s.source {
                attnviz::tui::Source::Real { session, .. } => session.clone(),
                _ => unreachable!("a real model"),
            },
            c.session.clone().expect("--compare runs the second text"),
        )
    };
    let n = first.n();
    key(&mut s, KeyCode::Up);
    let i = s.cursor.0;
    assert!(screen(&s, 120, 40).contains("the first text · "));
    key(&mut s, KeyCode::Char('x'));
    let text = screen(&s, 120, 40);
    assert!(text.contains("the second text · "), "{text}");
    let w2 = second.row_weights(s.layer(), s.head, i);
    assert!(text.contains(&format!("{:.3}", w2[0])), "{text}");
    key(&mut s, KeyCode::Char('x'));
    let text = screen(&s, 120, 40);
    assert!(text.contains("first minus second text"), "{text}");
    let w1 = first.row_weights(s.layer(), s.head, i);
    for j in 0..n.min(30) {
        let line = format!("{:>6.3}  {:>6.3}  {:>+7.3}", w1[j], w2[j], w1[j] - w2[j]);
        assert!(text.contains(&line), "key {j}: {line}\n{text}");
    }
    key(&mut s, KeyCode::Char('x'));
    assert!(screen(&s, 120, 40).contains("the first text · "));
}

#[test]
fn x_in_the_model_view_draws_the_second_runs_maps_and_the_difference() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = app(&dir, Some(OTHER), 120, 40);
    update(&mut s, Action::SetView(ViewKind::Model));
    lens_worker::run_pending(&mut s);
    let text = screen(&s, 120, 40);
    assert!(
        text.contains("maps: the first text") && text.contains("scale 0..1"),
        "{text}"
    );
    key(&mut s, KeyCode::Char('x'));
    let text = screen(&s, 120, 40);
    assert!(text.contains("maps: the second text's weights"), "{text}");
    key(&mut s, KeyCode::Char('x'));
    let text = screen(&s, 120, 40);
    assert!(
        text.contains("maps: first minus second text")
            && text.contains("the first text's weights minus the second's")
            && text.contains("scale -1..1"),
        "{text}"
    );
    key(&mut s, KeyCode::Char('x'));
    assert!(screen(&s, 120, 40).contains("maps: the first text"));
    // Without a second text, x says how to give one.
    let dir = tempfile::tempdir().unwrap();
    let mut s = app(&dir, None, 120, 40);
    update(&mut s, Action::SetView(ViewKind::Model));
    key(&mut s, KeyCode::Char('x'));
    assert!(s.status.as_ref().unwrap().text.contains("--compare TEXT"));
}

#[test]
fn a_kind_of_site_gone_back_to_shows_the_sweep_it_had() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = app(&dir, Some(OTHER), 120, 40);
    let first = outcome(&s);
    assert_eq!(first.result.what, PatchWhat::Resid);
    for _ in 0..PatchWhat::ALL.len() {
        key(&mut s, KeyCode::Char('p'));
        assert_ne!(outcome(&s).result.what, PatchWhat::Resid);
        if outcome(&s).result.what == PatchWhat::MlpOut {
            break;
        }
    }
    key(&mut s, KeyCode::Char('p'));
    // The same sweep, kept: not run again.
    assert!(std::sync::Arc::ptr_eq(&outcome(&s), &first));
    // Another model with the same texts is not served that sweep.
    let dir2 = tempfile::tempdir().unwrap();
    let other = app(&dir2, Some(OTHER), 120, 40);
    assert!(!std::sync::Arc::ptr_eq(&outcome(&other), &first));
}

#[test]
fn esc_stops_a_running_sweep_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let opts = AppOptions::headless(Lang::En, None, false, "");
    let mut s = with_compare(model_state(&model(&dir), Some(TEXT), opts).unwrap(), OTHER).unwrap();
    update(
        &mut s,
        Action::Resize {
            cols: 120,
            rows: 40,
        },
    );
    update(&mut s, Action::SetView(ViewKind::Patch));
    // The sweep waits for the worker: Esc is the stop key now, not a view's key.
    assert_eq!(lab(&s).unwrap().state, PatchState::Pending);
    let esc = action_for(&s, &KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
    assert_eq!(esc, Some(Action::CancelWork));
    update(&mut s, Action::CancelWork);
    match &lab(&s).unwrap().state {
        PatchState::Failed(e) => assert!(e.contains("stopped (Esc)"), "{e}"),
        other => panic!("not stopped: {other:?}"),
    }
    // Nothing waits any more, and p runs it again.
    assert!(!lens_worker::run_pending(&mut s));
    key(&mut s, KeyCode::Char('p'));
    assert!(matches!(lab(&s).unwrap().state, PatchState::Ready(_)));
}
