//! The screen keeps answering keys while the model works: `d` (a head ablated, the model
//! run again) and the decode view's decoding run on the event loop's worker thread,
//! with a progress line, and Esc stops them. A tiny GGUF llama written by the test, and
//! SmolLM2 on a long text when the test-model cache has it: there every key is answered
//! (update, the driver's sync and a whole frame drawn) within 100 ms while the work runs.

use crate::support;

use std::time::{Duration, Instant};

use attnviz::cli::Lang;
use attnviz::tui::keymap::action_for;
use attnviz::tui::lens_worker::{self, Driver};
use attnviz::tui::views::RealDecodeLab;
use attnviz::tui::{Action, AppOptions, State, ViewKind, draw, model_state, update};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use support::gguf::{Quant, Tiny, tiny_llama};

fn press(s: &mut State, code: KeyCode) {
    if let Some(a) = action_for(s, &KeyEvent::new(code, KeyModifiers::NONE)) {
        update(s, a);
    }
}

fn screen(s: &State, term: &mut Terminal<TestBackend>) -> String {
    term.draw(|f| draw(s, f)).unwrap();
    let buf = term.backend().buffer();
    let cols = buf.area.width as usize;
    buf.content()
        .chunks(cols)
        .map(|r| r.iter().map(|c| c.symbol()).collect::<String>() + "\n")
        .collect()
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
/// and a frame take under 100 ms; returns how many keys were answered while it worked
/// and the slowest.
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
        let took = t.elapsed();
        if driver.busy() {
            answered += 1;
            slowest = slowest.max(took);
            seen |= shown.contains(what);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(seen, "no progress line '{what}' while it worked");
    assert!(
        slowest < Duration::from_millis(100),
        "{what}: a key took {slowest:?}"
    );
    (answered, slowest)
}

#[test]
fn smollm2_answers_keys_within_100_ms_while_it_ablates_and_decodes_a_long_text() {
    let Some(p) = support::smollm2() else {
        return;
    };
    // About 500 tokens: long enough that a run takes seconds.
    let text = "The cat sat on the mat while the dog slept by the door. ".repeat(38);
    let (mut s, mut term) = open(p.to_str().unwrap(), &text);
    let n = s.source.session().unwrap().n();
    assert!(n >= 450, "{n} tokens");
    let mut driver = Driver::default();
    press(&mut s, KeyCode::Char('d'));
    driver.sync(&mut s);
    assert!(driver.busy());
    let (answered, slowest) = keys_while(
        &mut s,
        &mut driver,
        &mut term,
        "running the model again",
        |s| s.rerun.is_none(),
    );
    eprintln!("ablation on {n} tokens: {answered} keys answered, slowest {slowest:?}");
    assert!(answered > 0);
    assert_eq!(s.source.session().unwrap().options.ablate.len(), 1);
    update(&mut s, Action::SetView(ViewKind::Decode));
    driver.sync(&mut s);
    let (answered, slowest) = keys_while(
        &mut s,
        &mut driver,
        &mut term,
        "decoding after the",
        decoded,
    );
    eprintln!("decoding after {n} tokens: {answered} keys answered, slowest {slowest:?}");
    assert!(answered > 0);
}
