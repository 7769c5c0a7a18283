//! The scaling view: Enter and Esc only record requests (update stays pure), the
//! worker's reports are folded in as actions, and the charts are drawn from a fixed,
//! injected set of samples so the snapshots are the same on every machine. One test
//! runs the real driver on a tiny sweep. Accept snapshot changes with
//! `INSTA_UPDATE=always cargo test --test scaling view::` after checking them.

use std::time::{Duration, Instant};

use attnviz::cli::Lang;
use attnviz::engine::pipeline::ModelConfig;
use attnviz::engine::scaling::{Job, KernelKind, Plan, Progress, Sample, Skip};
use attnviz::tui::measure::Driver;
use attnviz::tui::views::scaling::{Outcome, Phase, Request, ScalingLab, lab};
use attnviz::tui::{Action, AppOptions, State, ViewKind, draw, update};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

const SIZES: [(u16, u16); 2] = [(80, 24), (120, 40)];
const START: Action = Action::ViewCommand(0);
const CANCEL: Action = Action::ViewCommand(1);

fn scaling_state(ascii: bool) -> State {
    let opts = AppOptions::headless(Lang::En, None, ascii, "scaling");
    let mut s = State::for_model(ModelConfig::example(), opts).unwrap();
    update(&mut s, Action::SetView(ViewKind::Scaling));
    s
}

fn the_lab(s: &State) -> &ScalingLab {
    lab(s).expect("the view made its lab")
}

fn render(state: &mut State, cols: u16, rows: u16) -> String {
    update(state, Action::Resize { cols, rows });
    let mut term = Terminal::new(TestBackend::new(cols, rows)).unwrap();
    term.draw(|f| draw(state, f)).unwrap();
    term.backend().to_string()
}

fn jobs() -> Vec<Job> {
    [256, 512, 1024, 2048, 4096, 8192, 16384, 32768]
        .into_iter()
        .flat_map(|n| {
            [KernelKind::Naive, KernelKind::Flash]
                .into_iter()
                .map(move |kernel| Job { kernel, n })
        })
        .collect()
}

/// A fixed sweep: naive time ~ n^2 and memory n^2 * 4 B; flash time ~ n^2 / 8 and
/// memory n * 256 B; the naive path skipped from 16384.
fn feed(state: &mut State, through_job: usize) {
    let jobs = jobs();
    update(
        state,
        Action::Measurement(Progress::Started {
            jobs: jobs.clone(),
            d: 64,
            available_bytes: Some(24_000_000_000),
            heap_metered: true,
            flash_threads: 2,
        }),
    );
    for (job, j) in jobs.iter().enumerate().take(through_job) {
        let n = j.n as f64;
        let p = match j.kernel {
            KernelKind::Naive if j.n >= 16384 => Progress::Skipped {
                job,
                reason: Skip::OverLimit {
                    need: (j.n * j.n * 4) as u64,
                    limit: 512 << 20,
                },
            },
            KernelKind::Naive => Progress::Measured {
                job,
                sample: sample(j, n * n / 80_000.0, (n * n * 4.0) as u64),
            },
            KernelKind::Flash => Progress::Measured {
                job,
                sample: sample(j, n * n / 640_000.0, (n * 256.0) as u64),
            },
        };
        update(state, Action::Measurement(p));
    }
}

fn sample(j: &Job, ms: f64, peak: u64) -> Sample {
    Sample {
        kernel: j.kernel,
        n: j.n,
        d: 64,
        ms,
        runs: 5,
        peak_bytes: Some(peak),
        threads: if j.kernel == KernelKind::Flash { 2 } else { 1 },
        tier: (j.kernel == KernelKind::Flash).then_some("avx512"),
    }
}

#[test]
fn opening_the_view_measures_nothing() {
    let _turn = crate::turn();
    let mut s = scaling_state(false);
    let l = the_lab(&s);
    assert_eq!(l.phase, Phase::Idle);
    assert_eq!(l.request, None);
    // Cursor keys, ticks and redraws do not start it either.
    update(&mut s, Action::Move { rows: 1, cols: 1 });
    update(&mut s, Action::Tick { ms: 1000 });
    let screen = render(&mut s, 120, 40);
    assert_eq!(the_lab(&s).request, None);
    assert!(
        screen.contains("Enter measures n = 256 ... 131072"),
        "{screen}"
    );
    assert!(screen.contains("no measurements yet"), "{screen}");
}

#[test]
fn enter_requests_a_sweep_once_and_esc_requests_its_cancel() {
    let _turn = crate::turn();
    let mut s = scaling_state(false);
    update(&mut s, CANCEL);
    assert_eq!(the_lab(&s).request, None, "nothing to cancel");
    assert!(
        s.status
            .as_ref()
            .unwrap()
            .text
            .contains("nothing is being measured")
    );
    update(&mut s, START);
    let l = the_lab(&s);
    assert_eq!(l.phase, Phase::Starting);
    assert!(matches!(&l.request, Some((1, Request::Start(p))) if *p == Plan::memory_wall()));
    update(&mut s, START);
    assert_eq!(
        the_lab(&s).request.as_ref().unwrap().0,
        1,
        "one sweep at a time"
    );
    assert!(s.status.as_ref().unwrap().text.contains("Esc cancels"));
    update(&mut s, CANCEL);
    let l = the_lab(&s);
    assert_eq!(l.phase, Phase::Cancelling);
    assert_eq!(l.request, Some((2, Request::Cancel)));
    // The worker's answer ends it.
    update(
        &mut s,
        Action::Measurement(Progress::Finished { cancelled: true }),
    );
    assert_eq!(the_lab(&s).phase, Phase::Finished { cancelled: true });
    update(&mut s, START);
    assert!(matches!(the_lab(&s).request, Some((3, Request::Start(_)))));
}

#[test]
fn reports_fill_the_outcomes_and_the_progress_bar() {
    let _turn = crate::turn();
    let mut s = scaling_state(false);
    update(&mut s, START);
    feed(&mut s, 3);
    update(
        &mut s,
        Action::Measurement(Progress::Working {
            job: 3,
            fraction: 0.5,
        }),
    );
    let l = the_lab(&s);
    assert_eq!(l.phase, Phase::Running);
    assert_eq!(l.outcomes.len(), 16);
    assert!(matches!(l.outcomes[0], Outcome::Measured(_)));
    assert_eq!(l.outcomes[3], Outcome::Running(0.5));
    assert!((l.fraction() - 3.5 / 16.0).abs() < 1e-12);
    assert_eq!(l.samples(KernelKind::Naive).len(), 2);
    let screen = render(&mut s, 120, 40);
    assert!(
        screen.contains(" 22%  3/16 runs  flash n = 512 (50%)"),
        "{screen}"
    );
    // A report of the measurement does not clear the person's status line.
    assert!(s.status.is_some());
    update(
        &mut s,
        Action::Measurement(Progress::Failed {
            job: 3,
            message: "out of memory".into(),
        }),
    );
    update(
        &mut s,
        Action::Measurement(Progress::Finished { cancelled: false }),
    );
    let l = the_lab(&s);
    assert_eq!(l.phase, Phase::Finished { cancelled: false });
    assert!(
        s.status
            .as_ref()
            .unwrap()
            .text
            .contains("3 measured, 1 failed")
    );
    assert!(render(&mut s, 120, 40).contains("flash n = 512 failed: out of memory"));
}

#[test]
fn a_cancel_mid_run_leaves_that_run_unmeasured() {
    let _turn = crate::turn();
    let mut s = scaling_state(false);
    update(&mut s, START);
    feed(&mut s, 2);
    update(
        &mut s,
        Action::Measurement(Progress::Working {
            job: 2,
            fraction: 0.25,
        }),
    );
    update(&mut s, CANCEL);
    update(
        &mut s,
        Action::Measurement(Progress::Finished { cancelled: true }),
    );
    let l = the_lab(&s);
    assert_eq!(l.outcomes[2], Outcome::Pending);
    assert!(render(&mut s, 80, 24).contains("cancelled: 2/16 runs"));
}

#[test]
fn snapshots_with_injected_samples() {
    let _turn = crate::turn();
    for (c, r) in SIZES {
        let mut s = scaling_state(false);
        insta::assert_snapshot!(format!("scaling_idle_{c}x{r}"), render(&mut s, c, r));
        update(&mut s, START);
        feed(&mut s, 13);
        update(
            &mut s,
            Action::Measurement(Progress::Working {
                job: 13,
                fraction: 0.75,
            }),
        );
        insta::assert_snapshot!(format!("scaling_running_{c}x{r}"), render(&mut s, c, r));
        feed(&mut s, 16);
        update(
            &mut s,
            Action::Measurement(Progress::Finished { cancelled: false }),
        );
        insta::assert_snapshot!(format!("scaling_done_{c}x{r}"), render(&mut s, c, r));
    }
}

#[test]
fn ascii_mode_draws_the_charts_in_ascii() {
    let _turn = crate::turn();
    let mut s = scaling_state(true);
    update(&mut s, START);
    feed(&mut s, 16);
    let screen = render(&mut s, 120, 40);
    assert!(screen.is_ascii(), "{screen}");
    assert!(
        screen.contains("o naive") && screen.contains("* flash"),
        "{screen}"
    );
}

/// What Enter will measure (the lab lives as long as the state; its request numbers
/// keep counting, so it is changed in place).
fn plan_of(s: &mut State, plan: Plan) {
    s.views
        .get_mut::<ScalingLab>(ViewKind::Scaling)
        .expect("the view made its lab")
        .plan = plan;
}

#[test]
fn the_driver_runs_a_sweep_off_the_ui_thread_and_feeds_it_back() {
    let _turn = crate::turn();
    let mut s = scaling_state(false);
    let tiny = Plan {
        ns: vec![64, 128],
        d: 16,
        flash_threads: Some(1),
        flash_slice_rows: 32,
        ..Plan::memory_wall()
    };
    plan_of(&mut s, tiny);
    update(&mut s, START);
    let mut driver = Driver::default();
    let until = Instant::now() + Duration::from_secs(60);
    // (A tiny sweep may be over by the time the first sync returns.)
    driver.sync(&mut s);
    while the_lab(&s).phase != (Phase::Finished { cancelled: false }) {
        assert!(Instant::now() < until, "the sweep did not finish");
        std::thread::sleep(Duration::from_millis(5));
        driver.sync(&mut s);
    }
    assert!(!driver.busy());
    let l = the_lab(&s);
    assert_eq!(l.heap_metered, Some(true));
    assert_eq!(l.samples(KernelKind::Naive).len(), 2);
    let flash = l.samples(KernelKind::Flash);
    assert_eq!(flash.len(), 2);
    assert!(
        flash
            .iter()
            .all(|f| f.peak_bytes.is_some() && f.tier.is_some())
    );
    // Carried-out requests are not carried out again.
    driver.sync(&mut s);
    assert!(!driver.busy());

    // Esc through the driver: a long sweep stops.
    plan_of(
        &mut s,
        Plan {
            ns: vec![64, 128, 256, 512, 1024, 2048, 4096],
            d: 16,
            flash_threads: Some(1),
            flash_slice_rows: 64,
            ..Plan::memory_wall()
        },
    );
    update(&mut s, START);
    driver.sync(&mut s);
    update(&mut s, CANCEL);
    while the_lab(&s).phase.is_busy() {
        assert!(Instant::now() < until, "the cancel did not stop the sweep");
        std::thread::sleep(Duration::from_millis(5));
        driver.sync(&mut s);
    }
    assert_eq!(the_lab(&s).phase, Phase::Finished { cancelled: true });
    assert!(!driver.busy());
}
