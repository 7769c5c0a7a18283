//! The train view: a run stepped through the app's pure `update` on virtual time
//! (ticks, pause, resume, step), the same run whether the UI steps it inline, on the
//! worker thread or not at all, screens at 100x30 and 120x40, and the `induction-heads`
//! lesson: its narration's conditions and numbers against the run it shows, and its
//! recording the same bytes twice.

use attnviz::cli::{Lang, TermSize};
use attnviz::record::palette::Defaults;
use std::sync::OnceLock;

use attnviz::record::{
    HeadlessOptions, Recording, animated_svg, cast, gif, play_through, play_watching, still,
};
use attnviz::scene::{self, Condition};
use attnviz::train::{AdamW, EvalRecord, ModelShape, Source, TrainConfig, Trainer};
use attnviz::tui::keymap::action_for;
use attnviz::tui::train_worker::Driver;
use attnviz::tui::views::train::{TrainLab, lab};
use attnviz::tui::{Action, AppOptions, State, ViewKind, draw, update};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

const EVAL_EVERY: usize = 5;

fn config() -> TrainConfig {
    TrainConfig {
        shape: ModelShape {
            layers: 2,
            heads: 2,
            d_model: 16,
            context: 12,
            vocab: 8,
        },
        steps: 30,
        batch: 4,
        lr: 3e-3,
        warmup: 3,
        adamw: AdamW::default(),
        clip: 1.0,
        seed: 5,
        threads: 1,
        eval_batch: 8,
    }
}

fn trainer() -> Trainer {
    Trainer::new(config(), Source::Induction { vocab: 8 }).unwrap()
}

/// The run at 10 steps per second of virtual time.
fn inline() -> State {
    let o = AppOptions::headless(Lang::En, None, false, "train test");
    State::for_training(trainer(), EVAL_EVERY, Some(10.0), o).unwrap()
}

fn the_lab(s: &State) -> &TrainLab {
    lab(s).expect("a run")
}

fn press(s: &mut State, c: char) {
    if let Some(a) = action_for(s, &KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)) {
        update(s, a);
    }
}

/// The evaluations without their wall-clock time.
fn losses(h: &[EvalRecord]) -> Vec<(usize, u64, u64, u64)> {
    h.iter()
        .map(|r| {
            (
                r.step,
                r.loss.to_bits(),
                r.loss_repeated.to_bits(),
                r.induction_max.to_bits(),
            )
        })
        .collect()
}

/// The run without any UI: step, evaluating every EVAL_EVERY steps.
fn direct() -> Vec<EvalRecord> {
    let mut t = trainer();
    t.evaluate().unwrap();
    while !t.done() {
        t.step().unwrap();
        if t.step_count().is_multiple_of(EVAL_EVERY) || t.done() {
            t.evaluate().unwrap();
        }
    }
    t.snapshot().history
}

fn screen(s: &mut State, cols: u16, rows: u16) -> String {
    update(s, Action::Resize { cols, rows });
    let mut term = Terminal::new(TestBackend::new(cols, rows)).unwrap();
    term.draw(|f| draw(s, f)).unwrap();
    term.backend().to_string()
}

#[test]
fn virtual_time_trains_at_the_rate_and_evaluates_on_schedule() {
    let mut s = inline();
    assert_eq!(s.view, ViewKind::Train);
    assert_eq!(the_lab(&s).snapshot.step, 0);
    assert_eq!(s.next_change_in_ms(), Some(500));
    update(&mut s, Action::Tick { ms: 400 });
    // Four steps taken, no evaluation yet: the screen's snapshot is still step 0.
    assert_eq!(the_lab(&s).snapshot.step, 0);
    assert_eq!(s.next_change_in_ms(), Some(100));
    update(&mut s, Action::Tick { ms: 100 });
    assert_eq!(the_lab(&s).snapshot.step, 5);
    assert_eq!(the_lab(&s).snapshot.history.len(), 2);
    update(&mut s, Action::Tick { ms: 60_000 });
    assert!(the_lab(&s).done());
    assert_eq!(s.next_change_in_ms(), None);
    assert_eq!(
        losses(&the_lab(&s).snapshot.history),
        losses(&direct()),
        "the UI changes when steps happen, never what they compute"
    );
    // The probe's maps are the app's source too: the heads view shows them.
    let snap = &the_lab(&s).snapshot;
    assert_eq!(s.pipeline.shape.n_k, snap.probe.len());
    assert_eq!(s.source.layers(), snap.maps.len());
}

#[test]
fn space_pauses_and_resumes_and_the_period_trains_to_the_next_evaluation() {
    let mut s = inline();
    press(&mut s, ' ');
    assert!(the_lab(&s).paused);
    assert_eq!(s.next_change_in_ms(), None);
    update(&mut s, Action::Tick { ms: 5_000 });
    assert_eq!(the_lab(&s).snapshot.step, 0, "paused: time passes, no step");
    press(&mut s, '.');
    assert_eq!(the_lab(&s).snapshot.step, 5);
    assert!(the_lab(&s).paused, "a step leaves the run paused");
    press(&mut s, '.');
    assert_eq!(the_lab(&s).snapshot.step, 10);
    press(&mut s, ' ');
    assert!(!the_lab(&s).paused);
    update(&mut s, Action::Tick { ms: 500 });
    assert_eq!(the_lab(&s).snapshot.step, 15);
    update(&mut s, Action::Tick { ms: 60_000 });
    assert_eq!(losses(&the_lab(&s).snapshot.history), losses(&direct()));
}

#[test]
fn the_worker_thread_trains_the_same_run_and_obeys_pause() {
    let o = AppOptions::headless(Lang::En, None, false, "worker test");
    let mut s = State::for_training(trainer(), EVAL_EVERY, None, o).unwrap();
    // Paused before the worker starts: it waits; one step trains to step 5 and stops.
    update(
        &mut s,
        Action::Train(attnviz::tui::action::TrainAction::PlayPause),
    );
    let mut driver = Driver::default();
    update(
        &mut s,
        Action::Train(attnviz::tui::action::TrainAction::Step),
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while the_lab(&s).snapshot.step < 5 {
        driver.sync(&mut s);
        assert!(std::time::Instant::now() < deadline, "no report");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    driver.sync(&mut s);
    assert_eq!(the_lab(&s).snapshot.step, 5, "paused after the step");
    update(
        &mut s,
        Action::Train(attnviz::tui::action::TrainAction::PlayPause),
    );
    while !the_lab(&s).done() {
        driver.sync(&mut s);
        assert!(std::time::Instant::now() < deadline, "the run did not end");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(losses(&the_lab(&s).snapshot.history), losses(&direct()));
}

#[test]
fn screens_at_100x30_and_120x40() {
    let mut s = inline();
    update(&mut s, Action::Tick { ms: 2_000 });
    insta::assert_snapshot!("train_step20_100x30", screen(&mut s, 100, 30));
    press(&mut s, ' ');
    insta::assert_snapshot!("train_step20_paused_120x40", screen(&mut s, 120, 40));
    update(&mut s, Action::Tick { ms: 60_000 });
    press(&mut s, ' ');
    update(&mut s, Action::Tick { ms: 60_000 });
    let done = screen(&mut s, 100, 30);
    assert!(done.contains("step 30 / 30"), "{done}");
    assert!(done.contains("done"), "{done}");
    assert!(!done.contains("left"), "no time left once done: {done}");
}

#[test]
fn the_train_view_is_only_offered_with_a_run() {
    let o = AppOptions::headless(Lang::En, None, false, "no run");
    let mut s = State::for_model(attnviz::engine::pipeline::ModelConfig::example(), o).unwrap();
    update(&mut s, Action::SetView(ViewKind::Train));
    assert_ne!(s.view, ViewKind::Train);
    assert!(s.status.as_ref().unwrap().text.contains("training run"));
}

fn lesson_options(lang: Lang) -> HeadlessOptions {
    HeadlessOptions {
        lang,
        size: TermSize {
            cols: 100,
            rows: 30,
        },
        speed: 1.0,
        theme: None,
        ascii: false,
    }
}

/// Each step shown: its index, the evaluation it quoted, whether the run had ended, and
/// its narration.
type Shown = Vec<(usize, EvalRecord, bool, String)>;

/// The lesson played once per language for every test here (its run trains 500 steps):
/// the recording, the steps as shown, and the run's whole history.
struct Played {
    recording: Recording,
    shown: Shown,
    history: Vec<EvalRecord>,
}

fn played(lang: Lang) -> &'static Played {
    static EN: OnceLock<Played> = OnceLock::new();
    static ZH: OnceLock<Played> = OnceLock::new();
    let cell = match lang {
        Lang::En => &EN,
        Lang::Zh => &ZH,
    };
    cell.get_or_init(|| play_lesson(lang))
}

fn play_lesson(lang: Lang) -> Played {
    let scene = scene::builtin("induction-heads").unwrap();
    let mut shown = Vec::new();
    let mut history = Vec::new();
    let recording = play_watching(&scene, &lesson_options(lang), |k, s| {
        let l = the_lab(s);
        shown.push((
            k,
            *l.snapshot.history.last().unwrap(),
            l.done(),
            s.narration_text(),
        ));
        history = l.snapshot.history.clone();
    })
    .unwrap();
    let (_, _, done, _) = shown.last().unwrap();
    assert!(*done, "the lesson trains its run to the end");
    Played {
        recording,
        shown,
        history,
    }
}

#[test]
fn the_lesson_narrates_what_its_run_does() {
    let scene = scene::builtin("induction-heads").unwrap();
    for lang in [Lang::En, Lang::Zh] {
        let Played { shown, history, .. } = played(lang);
        let shown_steps: Vec<usize> = shown.iter().map(|s| s.0).collect();
        for (i, step) in scene.steps.iter().enumerate() {
            match (&step.when, shown.iter().find(|s| s.0 == i)) {
                // A step that waits shows only once the run meets its condition...
                (Some(c), Some((_, last, done, _))) => {
                    assert!(c.holds(last, *done), "step {i} ({c}) at {last:?}")
                }
                // ... and is skipped only if the run never does.
                (Some(c), None) => {
                    let end = history.len() - 1;
                    for (j, r) in history.iter().enumerate() {
                        assert!(!c.holds(r, j == end), "step {i} ({c}) skipped at {r:?}");
                    }
                }
                (None, found) => assert!(found.is_some(), "step {i} not shown"),
            }
        }
        assert!(
            shown_steps.windows(2).all(|w| w[0] < w[1]),
            "{shown_steps:?}"
        );
        // The final step comes when the run is done, and quotes its last numbers.
        let (k, last, done, text) = shown.last().unwrap();
        assert_eq!(scene.steps[*k].when, Some(Condition::Done));
        assert!(done);
        assert!(
            text.contains(&format!("{:.2}", last.loss_repeated)),
            "{text}"
        );
        assert!(text.contains(&last.step.to_string()), "{text}");
        assert!(!text.contains('{'), "{text}");
    }
}

/// Every narration the lesson shows is on screen whole at 100x30, numbers filled in, in
/// some frame of the recording (the record_render test leaves the training lesson to
/// this one, which has played it already).
#[test]
fn every_narration_of_the_lesson_is_on_screen_whole() {
    let squeeze = |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
    for lang in [Lang::En, Lang::Zh] {
        let Played {
            recording, shown, ..
        } = played(lang);
        let region =
            attnviz::tui::render::regions(ratatui::layout::Rect::new(0, 0, 100, 30)).narration;
        let on_screen: Vec<String> = recording
            .frames
            .iter()
            .map(|f| {
                let text = still::text(&f.screen);
                squeeze(
                    &text
                        .lines()
                        .skip(region.y as usize)
                        .take(region.height as usize)
                        .collect::<String>(),
                )
            })
            .collect();
        for (k, _, _, narration) in shown {
            let want = squeeze(narration);
            assert!(
                on_screen.contains(&want),
                "{lang:?} step {}: not on screen whole: {narration}",
                k + 1
            );
        }
    }
}

#[test]
fn the_lesson_records_the_same_bytes_twice_in_every_format() {
    // Twice on the lesson as written but a 75-step run: the same code, a fifth of the
    // training.
    let src = include_str!("../../scenes/induction-heads.toml");
    assert_eq!(src.matches("steps = 500").count(), 1);
    let short = attnviz::scene::parse(
        "induction-heads",
        "induction-heads.toml",
        &src.replace("steps = 500", "steps = 75"),
    )
    .unwrap();
    let o = lesson_options(Lang::Zh);
    let a = play_through(&short, &o).unwrap();
    let b = play_through(&short, &o).unwrap();
    assert!(a.frames.len() > 2, "{} frames", a.frames.len());
    assert_eq!(cast(&a).unwrap(), cast(&b).unwrap());
    assert_eq!(
        animated_svg::svg(&a, Defaults::DARK),
        animated_svg::svg(&b, Defaults::DARK)
    );
    assert_eq!(
        gif::gif(&a, Defaults::LIGHT, None).unwrap().bytes,
        gif::gif(&b, Defaults::LIGHT, None).unwrap().bytes
    );
    let last = still::text(&a.frames.last().unwrap().screen);
    assert!(last.contains("75 / 75"), "{last}");

    // The whole lesson's recording.
    let scene = scene::builtin("induction-heads").unwrap();
    let full = &played(Lang::Zh).recording;
    // The curve moves: the run's frames differ beyond the narration.
    assert!(
        full.frames.len() > scene.steps.len(),
        "{} frames",
        full.frames.len()
    );
    let last = still::text(&full.frames.last().unwrap().screen);
    assert!(last.contains("500 / 500"), "{last}");
    // The curve marks where each kind of head passed the circuit score.
    assert!(last.contains("prev-token ≥ 0.3"), "{last}");
    assert!(last.contains("induction ≥ 0.3"), "{last}");
    assert!(last.contains("other (no gradient)"), "{last}");
}

/// A step waiting for what the run never reaches is not skipped in silence: the next
/// step shown begins by naming the condition, in the lesson's language.
#[test]
fn a_skipped_step_is_said_on_screen() {
    let src = r#"
version = 1
title.en = "t"
title.zh = "t"
[train]
layers = 2
heads = 2
d_model = 16
context = 16
vocab = 8
steps = 40
batch = 4
lr = 0.003
eval_every = 20
rate = 40
[[steps]]
narration.en = "start"
narration.zh = "开始"
[[steps]]
when = "induction >= 0.99"
narration.en = "never shown"
narration.zh = "不会出现"
[[steps]]
when = "done"
narration.en = "the end at step {step}"
narration.zh = "第 {step} 步结束"
"#;
    let scene = attnviz::scene::parse("t", "t.toml", src).unwrap();
    for (lang, note) in [
        (
            Lang::En,
            "(The run ended without reaching `induction >= 0.99`, so the step that waited for it is skipped.) the end at step 40",
        ),
        (
            Lang::Zh,
            "（训练结束时没有达到 `induction >= 0.99`，等待它的那一步已跳过。）第 40 步结束",
        ),
    ] {
        let mut p =
            attnviz::record::headless::Headless::new(&scene, &lesson_options(lang), true).unwrap();
        while let Some(wait) = p.next_change_in_ms() {
            p.tick(wait.max(1));
        }
        assert_eq!(p.step_index(), Some(2));
        assert_eq!(p.state().narration_text(), note);
        assert!(!p.state().narration_text().contains("never shown"));
        assert!(!p.state().narration_text().contains("不会出现"));
    }
}

#[test]
fn a_still_of_a_training_step_shows_the_run_up_to_it() {
    let scene = scene::builtin("induction-heads").unwrap();
    let o = lesson_options(Lang::En);
    let first = still::text(&attnviz::record::headless::still(&scene, &o, 1).unwrap());
    assert!(first.contains("step 0 / 500"), "{first}");
    let second = still::text(&attnviz::record::headless::still(&scene, &o, 2).unwrap());
    assert!(!second.contains("step 0 / 500"), "{second}");
}

/// A step's narration quotes the run as it stood when the step began: the run trains on
/// while the step is on screen, and the words must stay true.
#[test]
fn a_steps_numbers_are_those_of_when_it_began() {
    let src = r#"
version = 1
title.en = "t"
title.zh = "t"
[train]
layers = 2
heads = 1
d_model = 8
context = 8
vocab = 4
steps = 40
batch = 2
lr = 0.003
eval_every = 5
rate = 10
[[steps]]
dwell = 3
narration.en = "at step {step}"
narration.zh = "第 {step} 步"
[[steps]]
when = "done"
narration.en = "done at {step}"
narration.zh = "第 {step} 步结束"
"#;
    let scene = attnviz::scene::parse("t", "t.toml", src).unwrap();
    let mut p =
        attnviz::record::headless::Headless::new(&scene, &lesson_options(Lang::En), true).unwrap();
    assert_eq!(p.state().narration_text(), "at step 0");
    p.tick(2000);
    assert_eq!(p.step_index(), Some(0));
    let live = the_lab(p.state()).snapshot.history.last().unwrap().step;
    assert!(live >= 15, "the run trained on ({live})");
    assert_eq!(p.state().narration_text(), "at step 0");
    while let Some(wait) = p.next_change_in_ms() {
        p.tick(wait.max(1));
    }
    assert_eq!(p.state().narration_text(), "done at 40");
    // Every step's still from one play is the still of that step alone.
    let o = lesson_options(Lang::En);
    let all = attnviz::record::headless::stills(&scene, &o).unwrap();
    assert_eq!(all.len(), 2);
    for (i, screen) in all.iter().enumerate() {
        let alone = attnviz::record::headless::still(&scene, &o, i + 1).unwrap();
        assert_eq!(still::text(screen), still::text(&alone), "step {}", i + 1);
    }
}
