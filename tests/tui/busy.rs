//! The screen keeps answering keys while the model works: `d` (a head ablated, the model
//! run again), `w` (run again keeping the contributions), the model view's scores of
//! every head, the position view's reading of the encoding and the decode view's
//! decoding run on the event loop's worker thread, with a progress line, and Esc stops
//! them. A tiny GGUF llama written by the test, and SmolLM2 on a long text when the
//! test-model cache has it: there every key is answered (update, the driver's sync and a
//! whole frame drawn) within 100 ms while the work runs, and when its result is shown.

use crate::support;
use support::screen::on as screen;

use std::sync::Arc;
use std::time::{Duration, Instant};

use attnviz::cli::Lang;
use attnviz::model::forward::ForwardOptions;
use attnviz::model::session::ModelSession;
use attnviz::tui::keymap::action_for;
use attnviz::tui::lens_worker::{self, Driver};
use attnviz::tui::views::RealDecodeLab;
use attnviz::tui::views::model;
use attnviz::tui::views::position::real as position;
use attnviz::tui::{Action, AppOptions, Source, State, ViewKind, model_state, update};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use support::gguf::{Quant, Tiny, tiny_llama};

fn press(s: &mut State, code: KeyCode) {
    if let Some(a) = action_for(s, &KeyEvent::new(code, KeyModifiers::NONE)) {
        update(s, a);
    }
}

fn decoded(s: &State) -> bool {
    s.views.get::<RealDecodeLab>(ViewKind::Decode).is_some()
}

/// Sync the driver until `done`, failing after a minute.
fn wait(s: &mut State, driver: &mut Driver, done: impl Fn(&State) -> bool) {
    let start = Instant::now();
    while !done(s) {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the worker never reported"
        );
        std::thread::sleep(Duration::from_millis(5));
        driver.sync(s);
    }
}

/// Sync the driver until every worker, stopped ones too, has ended.
fn settle(s: &mut State, driver: &mut Driver) {
    let start = Instant::now();
    while driver.busy() {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "a worker never ended"
        );
        std::thread::sleep(Duration::from_millis(5));
        driver.sync(s);
    }
}

fn open(path: &str, text: &str) -> (State, Terminal<TestBackend>) {
    let mut s = model_state(
        path,
        Some(text),
        AppOptions::headless(Lang::En, None, false, ""),
    )
    .unwrap();
    update(
        &mut s,
        Action::Resize {
            cols: 120,
            rows: 40,
        },
    );
    update(&mut s, Action::SetView(ViewKind::Model));
    (s, Terminal::new(TestBackend::new(120, 40)).unwrap())
}

#[test]
fn esc_stops_a_run_and_a_decoding_and_the_worker_gives_what_the_headless_path_gives() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.gguf");
    tiny_llama(Tiny::new(), Quant::F32).write(&path);
    let path = path.to_str().unwrap();
    let text = "the cat sat on the mat. the cat sat on the";
    let (mut s, mut term) = open(path, text);
    let mut driver = Driver::default();
    update(&mut s, Action::Select { row: 1, col: 2 });
    // d asks for a run; nothing changes until its report comes back.
    press(&mut s, KeyCode::Char('d'));
    assert!(s.rerun.is_some());
    assert!(s.source.session().unwrap().options.ablate.is_empty());
    // Esc stops it: the report is dropped, the model on screen stays as it was.
    press(&mut s, KeyCode::Esc);
    assert!(s.rerun.is_none());
    let shown = screen(&s, &mut term);
    assert!(shown.contains("stopped (Esc)"), "{shown}");
    driver.sync(&mut s);
    settle(&mut s, &mut driver);
    assert!(s.source.session().unwrap().options.ablate.is_empty());
    // Through the worker: the same loss as the headless path.
    press(&mut s, KeyCode::Char('d'));
    driver.sync(&mut s);
    assert!(driver.busy());
    wait(&mut s, &mut driver, |s| s.rerun.is_none());
    let by_worker = s.source.session().unwrap().loss();
    assert_eq!(s.source.session().unwrap().options.ablate, vec![(1, 2)]);
    let (mut h, _) = open(path, text);
    update(&mut h, Action::Select { row: 1, col: 2 });
    press(&mut h, KeyCode::Char('d'));
    assert!(lens_worker::run_pending(&mut h));
    assert_eq!(h.source.session().unwrap().loss(), by_worker);
    // Two heads pressed before the first run reports: both are ablated.
    press(&mut s, KeyCode::Char('D'));
    driver.sync(&mut s);
    press(&mut s, KeyCode::Char('d'));
    update(&mut s, Action::Select { row: 0, col: 0 });
    press(&mut s, KeyCode::Char('d'));
    wait(&mut s, &mut driver, |s| s.rerun.is_none());
    settle(&mut s, &mut driver);
    let mut both = s.source.session().unwrap().options.ablate.clone();
    both.sort();
    assert_eq!(both, vec![(0, 0), (1, 2)]);
    // The decode view waits for its decoding; Esc stops it and says so.
    update(&mut s, Action::SetView(ViewKind::Decode));
    assert!(!decoded(&s));
    press(&mut s, KeyCode::Esc);
    driver.sync(&mut s);
    let shown = screen(&s, &mut term);
    assert!(shown.contains("decoding stopped (Esc)"), "{shown}");
    settle(&mut s, &mut driver);
    assert!(!decoded(&s));
    // Opened again, it decodes on the worker, as the headless path does.
    update(&mut s, Action::SetView(ViewKind::Model));
    update(&mut s, Action::SetView(ViewKind::Decode));
    driver.sync(&mut s);
    wait(&mut s, &mut driver, decoded);
    let tokens = |s: &State| {
        let lab = s.views.get::<RealDecodeLab>(ViewKind::Decode).unwrap();
        lab.decoding.as_ref().unwrap().tokens()
    };
    let (mut h, _) = open(path, text);
    update(&mut h, Action::Select { row: 1, col: 2 });
    press(&mut h, KeyCode::Char('d'));
    update(&mut h, Action::Select { row: 0, col: 0 });
    press(&mut h, KeyCode::Char('d'));
    lens_worker::run_pending(&mut h);
    update(&mut h, Action::SetView(ViewKind::Decode));
    assert!(lens_worker::run_pending(&mut h));
    assert_eq!(tokens(&s), tokens(&h));
}

/// Press keys while the driver's workers run until `done`: each key's update, the sync
/// (which takes in a finished worker's report: a new session shown, scores kept) and a
/// frame take under 100 ms; returns how many keys were answered while it worked and the
/// slowest. The progress line `what` must show unless the work ended within one key.
fn keys_while(
    s: &mut State,
    driver: &mut Driver,
    term: &mut Terminal<TestBackend>,
    what: &str,
    done: impl Fn(&State) -> bool,
) -> (usize, Duration) {
    let start = Instant::now();
    let (mut answered, mut slowest, mut seen) = (0, Duration::ZERO, false);
    let keys = [KeyCode::Down, KeyCode::Right, KeyCode::Up, KeyCode::Left];
    while !done(s) {
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "{what}: no report"
        );
        let t = Instant::now();
        press(s, keys[answered % keys.len()]);
        driver.sync(s);
        let shown = screen(s, term);
        slowest = slowest.max(t.elapsed());
        answered += 1;
        seen |= shown.contains(what);
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        seen || answered <= 1,
        "no progress line '{what}' while it worked"
    );
    assert!(
        slowest < Duration::from_millis(100),
        "{what}: a key took {slowest:?}"
    );
    (answered, slowest)
}

/// Apply `action` as a key would, sync the driver and draw: under 100 ms.
fn answered(
    s: &mut State,
    driver: &mut Driver,
    term: &mut Terminal<TestBackend>,
    action: Action,
) -> String {
    let t = Instant::now();
    update(s, action.clone());
    driver.sync(s);
    let shown = screen(s, term);
    let took = t.elapsed();
    assert!(
        took < Duration::from_millis(100),
        "{action:?} took {took:?}"
    );
    shown
}

fn scored(s: &State) -> bool {
    model::wanted(s).is_none()
}

#[test]
fn smollm2_answers_keys_within_100_ms_while_it_ablates_scores_and_decodes_a_long_text() {
    let Some(p) = support::smollm2() else {
        return;
    };
    // About 500 tokens: long enough that a run takes seconds.
    let text = "The cat sat on the mat while the dog slept by the door. ".repeat(38);
    let (mut s, mut term) = open(p.to_str().unwrap(), &text);
    update(&mut s, Action::SetView(ViewKind::Pipeline));
    let n = s.source.session().unwrap().n();
    assert!(n >= 450, "{n} tokens");
    let mut driver = Driver::default();
    // Opening the model view: every head's scores come from a worker; Esc stops them,
    // opening the view again asks again.
    let shown = answered(
        &mut s,
        &mut driver,
        &mut term,
        Action::SetView(ViewKind::Model),
    );
    assert!(shown.contains("computing every head's scores"), "{shown}");
    assert!(driver.busy());
    let shown = answered(&mut s, &mut driver, &mut term, Action::CancelWork);
    assert!(shown.contains("head scores stopped (Esc)"), "{shown}");
    settle(&mut s, &mut driver);
    // Stopped: nothing waits for the scores and none are shown.
    assert!(model::wanted(&s).is_none());
    let shown = screen(&s, &mut term);
    assert!(
        shown.contains("head scores stopped (Esc)") && !shown.contains("prev-token"),
        "{shown}"
    );
    answered(
        &mut s,
        &mut driver,
        &mut term,
        Action::SetView(ViewKind::Model),
    );
    let (keys, slowest) = keys_while(
        &mut s,
        &mut driver,
        &mut term,
        "scoring every head's weights",
        scored,
    );
    eprintln!("scores on {n} tokens: {keys} keys answered, slowest {slowest:?}");
    assert!(screen(&s, &mut term).contains("prev-token"));
    // d: the model runs again; the new session (and its pipeline, built by the worker)
    // is shown when the report comes, within the same 100 ms a key gets.
    press(&mut s, KeyCode::Char('d'));
    driver.sync(&mut s);
    assert!(driver.busy());
    let t = Instant::now();
    let (keys, slowest) = keys_while(
        &mut s,
        &mut driver,
        &mut term,
        "running the model again",
        |s| s.rerun.is_none(),
    );
    eprintln!(
        "ablation on {n} tokens: {:?}, {keys} keys answered, slowest {slowest:?}",
        t.elapsed()
    );
    assert!(keys > 0);
    assert_eq!(s.source.session().unwrap().options.ablate.len(), 1);
    // The position view reads the model's position encoding on a worker.
    answered(
        &mut s,
        &mut driver,
        &mut term,
        Action::SetView(ViewKind::Position),
    );
    keys_while(
        &mut s,
        &mut driver,
        &mut term,
        "reading the model's position encoding",
        |s| position::wanted(s).is_none(),
    );
    let shown = screen(&s, &mut term);
    assert!(shown.contains("RoPE, base 100,000"), "{shown}");
    update(&mut s, Action::SetView(ViewKind::Decode));
    driver.sync(&mut s);
    let (keys, slowest) = keys_while(
        &mut s,
        &mut driver,
        &mut term,
        "decoding after the",
        decoded,
    );
    eprintln!("decoding after {n} tokens: {keys} keys answered, slowest {slowest:?}");
    assert!(keys > 0);
    // w on the same model with the text's first 96 tokens (the contributions' pass is
    // the slowest: n^2 x d_model per head): the model runs again keeping them, then
    // their scores are computed.
    let session = s.source.session().unwrap();
    let short = ModelSession::from_shared(
        session.model.clone(),
        session.ids[..96].to_vec(),
        ForwardOptions::default(),
    )
    .unwrap();
    let source = Source::Real {
        session: Arc::new(short),
        layer: 0,
    };
    let mut s = State::new(source, AppOptions::headless(Lang::En, None, false, "")).unwrap();
    update(
        &mut s,
        Action::Resize {
            cols: 120,
            rows: 40,
        },
    );
    let mut driver = Driver::default();
    answered(
        &mut s,
        &mut driver,
        &mut term,
        Action::SetView(ViewKind::Model),
    );
    press(&mut s, KeyCode::Char('w'));
    driver.sync(&mut s);
    let t = Instant::now();
    let (keys, slowest) = keys_while(
        &mut s,
        &mut driver,
        &mut term,
        "to keep every head's contributions",
        |s| s.rerun.is_none(),
    );
    eprintln!(
        "contributions on 96 tokens: {:?}, {keys} keys answered, slowest {slowest:?}",
        t.elapsed()
    );
    assert!(s.source.session().unwrap().contributions.is_some());
    keys_while(
        &mut s,
        &mut driver,
        &mut term,
        "scoring every head's contributions",
        scored,
    );
    let shown = screen(&s, &mut term);
    assert!(
        shown.contains("showing contributions") && shown.contains("prev-token"),
        "{shown}"
    );
}

/// A lesson step that changes the model (attention-sinks' window mask) runs it again on
/// the worker: the step's narration shows at once with a progress line under it, the
/// lesson's clock waits for the run, and once the run is shown the narration's figure
/// (the loss under the window) is the session's and the clock goes on.
#[test]
fn a_lesson_step_runs_the_model_on_the_worker_and_its_clock_waits() {
    if support::smollm2().is_none() {
        return;
    }
    let scene = attnviz::scene::builtin("attention-sinks").unwrap();
    let steps = attnviz::tui::script::lesson(&scene, Lang::En);
    let app = AppOptions::headless(Lang::En, None, false, "sinks");
    let mut s = attnviz::tui::lesson::lesson_state(&scene, steps, app, true, 1.0).unwrap();
    update(
        &mut s,
        Action::Resize {
            cols: 100,
            rows: 30,
        },
    );
    let mut term = Terminal::new(TestBackend::new(100, 30)).unwrap();
    let mut driver = Driver::default();
    let before = s.source.session().unwrap().loss().unwrap();
    // Step 5 (index 4) sets the window mask: asked of the worker, not run here.
    update(&mut s, Action::GotoStep(4));
    assert!(
        s.rerun.is_some(),
        "the step ran the model on the event loop"
    );
    assert_eq!(s.source.session().unwrap().loss().unwrap(), before);
    driver.sync(&mut s);
    let shown = screen(&s, &mut term);
    assert!(shown.contains("A window of 6"), "{shown}");
    assert!(
        shown.contains("running the model again") && shown.contains("mask window:6"),
        "{shown}"
    );
    // The clock waits for the run.
    update(&mut s, Action::Tick { ms: 60_000 });
    let p = s.script.as_ref().unwrap();
    assert_eq!((p.index, p.elapsed_ms), (4, 0.0));
    wait(&mut s, &mut driver, |s| s.rerun.is_none());
    settle(&mut s, &mut driver);
    let session = s.source.session().unwrap();
    let after = session.loss().unwrap();
    assert!(session.options.mask.is_some() && after > before + 0.1);
    let shown = screen(&s, &mut term);
    assert!(!shown.contains("running the model again"), "{shown}");
    assert!(shown.contains(&format!("{after:.3}")), "{shown}");
    // And goes on once it is shown.
    update(&mut s, Action::Tick { ms: 60_000 });
    assert!(s.script.as_ref().unwrap().index > 4);
}
