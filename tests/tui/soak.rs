//! Every view draws at every size a person can reach, and the app survives a long storm
//! of random actions with its invariants intact.

use attnviz::cli::Lang;
use attnviz::engine::limits::MAX_MODEL_TOKENS;
use attnviz::engine::pipeline::{ModelConfig, StageId};
use attnviz::tui::action::FlashAction;
use attnviz::tui::context::StatusKind;
use attnviz::tui::{Action, AppOptions, EditAction, State, ViewKind, draw, update, views};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

use crate::support::soak::Budget;

const SIZES: [(u16, u16); 5] = [(80, 24), (100, 30), (133, 41), (200, 60), (300, 100)];

fn model(tokens: usize, heads: usize, d_model: usize) -> ModelConfig {
    let mut c = ModelConfig::example();
    let words = c.tokens.clone();
    c.tokens = (0..tokens)
        .map(|i| words[i % words.len()].clone())
        .collect();
    c.heads = heads;
    c.kv_heads = heads;
    c.d_model = d_model;
    c
}

fn screen_text(term: &Terminal<TestBackend>) -> String {
    let buf = term.backend().buffer();
    buf.content().iter().map(|c| c.symbol()).collect()
}

/// The state's invariants: what is selected exists, the cursor is inside the grid the
/// view moves it over, and the data is within the app's limits.
fn check_invariants(s: &State, context: &str) {
    let heads = s.heads();
    assert!(
        s.head < heads.max(1),
        "{context}: head {} of {heads}",
        s.head
    );
    let panes = s.panes().len();
    assert!(s.sub < panes.max(1), "{context}: pane {} of {panes}", s.sub);
    let (rows, cols) = views::current(s).grid(s);
    if rows > 0 && cols > 0 {
        assert!(
            s.cursor.0 < rows && s.cursor.1 < cols,
            "{context}: cursor {:?} outside {rows}x{cols} in {}",
            s.cursor,
            s.view
        );
    }
    assert!(views::find(s.view).is_some(), "{context}: view {}", s.view);
    let n = s.pipeline.shape.n_k;
    assert!((1..=MAX_MODEL_TOKENS).contains(&n), "{context}: {n} tokens");
    if let Some(m) = s.model() {
        assert_eq!(
            m.tokens.len(),
            n,
            "{context}: the pipeline is not the model's"
        );
    }
    if let Some(p) = &s.script {
        assert!(p.index < p.steps.len(), "{context}: step {}", p.index);
    }
    assert!(s.pipeline.stage(s.stage).is_some(), "{context}: stage");
}

#[test]
fn every_view_draws_at_every_size_and_length() {
    // Token counts around the limits (the position view once broke at 126-128), and the
    // most heads the command line allows.
    let configs = [
        model(1, 1, 8),
        model(2, 2, 16),
        model(33, 4, 32),
        model(126, 2, 16),
        model(127, 2, 16),
        model(MAX_MODEL_TOKENS, 4, 32),
        model(40, 64, 128),
    ];
    for config in configs {
        let n = config.tokens.len();
        let opts = AppOptions::headless(Lang::En, None, false, "every size");
        let mut s = State::for_model(config, opts).unwrap();
        for view in views::VIEWS {
            update(&mut s, Action::SetView(view.kind()));
            let context = format!("{n} tokens, {} heads, {}", s.heads(), view.kind());
            if let Some(st) = &s.status {
                assert_ne!(st.kind, StatusKind::Error, "{context}: {}", st.text);
            }
            for (cols, rows) in SIZES {
                update(&mut s, Action::Resize { cols, rows });
                let mut term = Terminal::new(TestBackend::new(cols, rows)).unwrap();
                term.draw(|f| draw(&s, f)).unwrap();
                let text = screen_text(&term);
                assert!(
                    !text.contains("over the limit"),
                    "{context} at {cols}x{rows}: {text}"
                );
            }
            check_invariants(&s, &context);
        }
    }
}

/// One random action, weighted so that the storm moves around a lot and changes the
/// model now and then (each change rebuilds the pipeline).
fn random_action(rng: &mut ChaCha8Rng, s: &State) -> Action {
    let editing = matches!(s.overlay, attnviz::tui::state::Overlay::Edit(_));
    if editing {
        return match rng.random_range(0..10) {
            0 => Action::Edit(EditAction::Apply),
            1 => Action::Edit(EditAction::Cancel),
            2 => Action::Edit(EditAction::Backspace),
            3 => Action::Edit(EditAction::Left),
            4 => Action::Edit(EditAction::Home),
            _ => {
                let chars = [
                    'a',
                    'z',
                    ' ',
                    '我',
                    '\u{200D}',
                    '\u{1F468}',
                    '-',
                    '.',
                    '\u{301}',
                ];
                Action::Edit(EditAction::Insert(chars[rng.random_range(0..chars.len())]))
            }
        };
    }
    let r = rng.random_range(0..1000);
    match r {
        0..250 => Action::Move {
            rows: rng.random_range(-3i32..=3) as isize,
            cols: rng.random_range(-3i32..=3) as isize,
        },
        250..300 => Action::StageNext,
        300..340 => Action::StagePrev,
        340..350 => Action::StageFirst,
        350..360 => Action::StageLast,
        360..380 => Action::GoStage(StageId::ALL[rng.random_range(0..StageId::ALL.len())]),
        380..400 => Action::NextPane,
        400..420 => Action::Select {
            row: rng.random_range(0..200),
            col: rng.random_range(0..200),
        },
        420..470 => Action::Click {
            x: rng.random_range(0..320),
            y: rng.random_range(0..110),
        },
        470..490 => {
            let (cols, rows) = SIZES[rng.random_range(0..SIZES.len())];
            Action::Resize {
                cols: cols + rng.random_range(0..8),
                rows: rows + rng.random_range(0..4),
            }
        }
        490..530 => Action::NextView,
        530..550 => Action::PrevView,
        550..570 => Action::SetView(ViewKind::ALL[rng.random_range(0..ViewKind::ALL.len())]),
        570..590 => Action::Head(rng.random_range(0..10)),
        590..600 => Action::HeadNext,
        600..605 => Action::HeadPrev,
        605..607 => Action::CycleMask,
        607..609 => Action::CyclePe,
        609..611 => Action::ToggleScale,
        // Longer more often than shorter, so the storm reaches the longest sentence.
        611..620 => Action::Longer,
        620..623 => Action::Shorter,
        623..624 => Action::Reseed,
        624..626 => Action::Edit(EditAction::Start),
        626..640 => Action::ToggleHelp,
        640..650 => Action::HelpScroll(rng.random_range(-5i32..=5) as isize),
        650..660 => Action::CloseOverlay,
        660..680 => Action::GotoStep(rng.random_range(0..12)),
        680..700 => Action::PlayPause,
        700..720 => Action::StepNext,
        720..730 => Action::StepPrev,
        730..735 => Action::Faster,
        735..740 => Action::Slower,
        740..800 => Action::Tick {
            ms: rng.random_range(0..5000),
        },
        800..900 => Action::ViewCommand(rng.random_range(0..8)),
        _ => {
            let all = [
                FlashAction::NextTile,
                FlashAction::PrevTile,
                FlashAction::FirstTile,
                FlashAction::LastTile,
                FlashAction::PlayPause,
                FlashAction::Faster,
                FlashAction::Slower,
                FlashAction::MoreRows,
                FlashAction::FewerRows,
                FlashAction::MoreKeys,
                FlashAction::FewerKeys,
                FlashAction::ToggleOrder,
            ];
            Action::Flash(all[rng.random_range(0..all.len())])
        }
    }
}

#[test]
fn a_storm_of_random_actions_keeps_the_state_sound() {
    storm(SHORT_STORM_SEED, SHORT_STORM, None);
}

const SHORT_STORM_SEED: u64 = 0x5eed;
const SHORT_STORM: usize = 20_000;

/// The long soak: up to five times the storm above, from another seed (so none of its
/// actions repeats the short storm's), for at most its time budget
/// ([`support::soak::Budget`]) but never fewer actions than the short storm.
/// `cargo test --test tui -- --ignored` runs it.
#[test]
#[ignore = "long soak: run with --ignored"]
fn a_long_storm_of_random_actions_keeps_the_state_sound() {
    const ACTIONS: usize = 5 * SHORT_STORM;
    let budget = Budget::start("the long storm", 20);
    let done = storm(SHORT_STORM_SEED + 1, ACTIONS, Some(&budget));
    budget.report(done, ACTIONS, "actions");
}

/// Up to `actions` random actions from `seed`, the state checked after each; with a
/// budget, it stops once the budget is spent and at least [`SHORT_STORM`] actions ran.
/// Returns how many actions ran.
fn storm(seed: u64, actions: usize, budget: Option<&Budget>) -> usize {
    /// Drawing every frame at up to 300x100 would dominate the run; a frame every so
    /// many actions, and after every resize, still draws every view at every size.
    const DRAW_EVERY: usize = 97;
    let scene = attnviz::scene::load("intro").unwrap();
    let opts = AppOptions::headless(Lang::En, None, false, "soak");
    let mut s = State::for_model(scene.toy().unwrap().clone(), opts)
        .unwrap()
        .with_script(attnviz::tui::script::lesson(&scene, Lang::En), false, 1.0);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut longest = 0;
    let mut views_seen = std::collections::BTreeSet::new();
    let mut done = 0;
    for k in 0..actions {
        if k >= SHORT_STORM && budget.is_some_and(Budget::spent) {
            break;
        }
        done += 1;
        let action = random_action(&mut rng, &s);
        let resized = matches!(action, Action::Resize { .. });
        let context = format!("action {k}: {action:?}");
        update(&mut s, action);
        check_invariants(&s, &context);
        assert!(!s.quit, "{context}: quit");
        longest = longest.max(s.pipeline.shape.n_k);
        views_seen.insert(s.view.name());
        if resized || k % DRAW_EVERY == 0 {
            let (cols, rows) = s.screen;
            let mut term = Terminal::new(TestBackend::new(cols, rows)).unwrap();
            term.draw(|f| draw(&s, f)).unwrap();
        }
    }
    // Every view a lesson can show (the model and tokens views need a real model).
    assert_eq!(views_seen.len(), views::shown(&s).len(), "{views_seen:?}");
    assert!(
        longest >= MAX_MODEL_TOKENS / 2,
        "the storm reached only {longest} tokens"
    );
    done
}
