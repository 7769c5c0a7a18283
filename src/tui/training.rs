//! The app's side of a training run (the train view reads what this writes into its
//! slot, [`TrainLab`]). Two ways to step the trainer, one run either way:
//!
//! - virtual time ([`Runner::Inline`]): a lesson, a recording or a test trains inside
//!   `update` at the lesson's pace, `rate` steps per second of virtual time, so the same
//!   lesson shows the same run at the same moments in every recording;
//! - a worker thread ([`Runner::Worker`], `attnviz train` at a terminal): the event loop's
//!   [`train_worker`](super::train_worker) steps the trainer as fast as it goes and hands
//!   each evaluation back as an action, so the screen stays responsive.
//!
//! Either way the trainer steps in order from its seed and evaluates every `eval_every`
//! steps: pausing, stepping or redrawing changes when a step happens, never what it
//! computes. Each snapshot becomes the app's source too (the probe's maps as a weights
//! file), so the heads and pipeline views show the same maps, larger.

use ndarray::Array3;

use crate::error::Result;
use crate::scene::Condition;
use crate::train::{EvalRecord, Snapshot, Trainer};
use crate::tui::action::{TrainAction, TrainReport};
use crate::tui::change::rebuild;
use crate::tui::state::{AppOptions, Source, State, StatusKind};
use crate::tui::view_kind::ViewKind;
use crate::tui::views::train::{Pace, TrainLab, lab, lab_mut};

pub use crate::tui::train_runner::Runner;

/// Train `n` steps (fewer if the run ends), evaluating every `eval_every` steps and at
/// the end. True if an evaluation happened.
pub fn train_steps(trainer: &mut Trainer, n: usize, eval_every: usize) -> Result<bool> {
    let mut evaluated = false;
    for _ in 0..n {
        if trainer.done() {
            break;
        }
        trainer.step()?;
        if trainer.step_count().is_multiple_of(eval_every) || trainer.done() {
            trainer.evaluate()?;
            evaluated = true;
        }
    }
    Ok(evaluated)
}

/// Steps from `step` to the next evaluation (at most `steps` in all).
pub fn steps_to_eval(step: usize, steps: usize, eval_every: usize) -> usize {
    let next = (step / eval_every + 1) * eval_every;
    next.min(steps).saturating_sub(step)
}

/// The probe's attention maps as the app's source: one [heads, T, T] array per layer,
/// the probe's token ids as labels.
pub fn probe_source(s: &Snapshot, layer: usize) -> Source {
    let t = s.probe.len();
    let layers = s
        .maps
        .iter()
        .map(|heads| {
            Array3::from_shape_fn((heads.len(), t, t), |(h, i, j)| heads[h][i * t + j] as f64)
        })
        .collect::<Vec<_>>();
    Source::Weights {
        tokens: s.probe.iter().map(u32::to_string).collect(),
        layer: layer.min(layers.len().saturating_sub(1)),
        layers,
    }
}

impl State {
    /// The app on a training run, in the train view. `rate`: steps per second of
    /// virtual time (stepped in `update`); None: a worker thread steps it (`app::run`).
    pub fn for_training(
        mut trainer: Trainer,
        eval_every: usize,
        rate: Option<f64>,
        options: AppOptions,
    ) -> Result<State> {
        if trainer.snapshot().history.is_empty() {
            trainer.evaluate()?;
        }
        let snapshot = trainer.snapshot();
        let vocab = trainer.config().shape.vocab;
        let other_untrained = trainer.other_untrained();
        let mut state = State::new(probe_source(&snapshot, 0), options)?;
        let (runner, pace) = match rate {
            Some(rate) => (
                Runner::Inline {
                    trainer: Box::new(trainer),
                    rate,
                    budget: 0.0,
                    eval_every,
                },
                Pace::Virtual(rate),
            ),
            None => (
                Runner::Worker {
                    trainer: Some(Box::new(trainer)),
                    eval_every,
                },
                Pace::Measured,
            ),
        };
        state.views.set(
            ViewKind::Train,
            TrainLab::new(snapshot, vocab, pace, other_untrained),
        );
        state.training = Some(runner);
        state.view = ViewKind::Train;
        state.clamp();
        Ok(state)
    }
}

/// Is the run stepping on virtual time now (so the event loop must send ticks)?
pub fn running_inline(state: &State) -> bool {
    matches!(state.training, Some(Runner::Inline { .. }))
        && lab(state).is_some_and(|l| !l.paused && !l.done() && l.failed.is_none())
}

/// The playback speed a lesson's run follows (1 without a lesson).
fn speed(state: &State) -> f64 {
    state.script.as_ref().map_or(1.0, |p| p.speed)
}

/// Milliseconds of virtual time until the next evaluation, while the run steps inline.
pub fn next_eval_in_ms(state: &State) -> Option<u64> {
    if !running_inline(state) {
        return None;
    }
    let Some(Runner::Inline {
        trainer,
        rate,
        budget,
        eval_every,
    }) = &state.training
    else {
        return None;
    };
    let c = trainer.config();
    let need = steps_to_eval(trainer.step_count(), c.steps, *eval_every) as f64 - budget;
    Some(
        (need.max(0.0) * 1000.0 / (rate * speed(state)))
            .ceil()
            .max(1.0) as u64,
    )
}

/// Virtual time passes: an inline run takes the steps it owes.
pub(crate) fn tick(state: &mut State, ms: u64) {
    if !running_inline(state) {
        return;
    }
    let speed = speed(state);
    let Some(Runner::Inline {
        trainer,
        rate,
        budget,
        eval_every,
    }) = &mut state.training
    else {
        return;
    };
    *budget += ms as f64 * speed * *rate / 1000.0;
    // A rounding hair short of a whole step still takes it (the wait was computed for it).
    let n = (*budget + 1e-9).floor();
    *budget = (*budget - n).max(0.0);
    let result = train_steps(trainer, n as usize, *eval_every);
    let snapshot = trainer.snapshot();
    finish(state, result, snapshot);
}

fn finish(state: &mut State, result: Result<bool>, snapshot: Snapshot) {
    match result {
        Ok(true) => show(state, snapshot),
        Ok(false) => {}
        Err(e) => fail(state, e.to_string()),
    }
}

/// Pause, resume or step the run.
pub(crate) fn control(state: &mut State, action: TrainAction) {
    if lab(state).is_none() {
        state.set_status(StatusKind::Warn, "no model is training here");
        return;
    }
    let Some(l) = lab_mut(state) else {
        return;
    };
    match action {
        TrainAction::PlayPause => {
            l.paused = !l.paused;
            let (paused, step) = (l.paused, l.snapshot.step);
            let text = if paused {
                format!("paused at step {step}; Space resumes, . trains to the next evaluation")
            } else {
                "training".into()
            };
            state.set_status(StatusKind::Info, text);
        }
        TrainAction::Step => {
            l.paused = true;
            l.step_requests += 1;
            if let Some(p) = state.script.as_mut() {
                p.playing = false;
            }
            if let Some(Runner::Inline {
                trainer,
                eval_every,
                budget,
                ..
            }) = &mut state.training
            {
                *budget = 0.0;
                let n = steps_to_eval(trainer.step_count(), trainer.config().steps, *eval_every);
                let result = train_steps(trainer, n, *eval_every);
                let snapshot = trainer.snapshot();
                finish(state, result, snapshot);
            }
        }
    }
}

/// The lesson paused or resumed: its run does the same.
pub(crate) fn follow_script(state: &mut State) {
    let playing = state.script.as_ref().is_some_and(|p| p.playing);
    if let Some(l) = lab_mut(state) {
        l.paused = !playing;
    }
}

/// A report of the worker thread.
pub(crate) fn report(state: &mut State, r: TrainReport) {
    match r {
        TrainReport::Snapshot(s) => show(state, s),
        TrainReport::Failed(e) => fail(state, e),
    }
}

fn fail(state: &mut State, e: String) {
    if let Some(l) = lab_mut(state) {
        l.failed = Some(e.clone());
    }
    state.set_status(StatusKind::Error, format!("training stopped: {e}"));
}

/// A new snapshot on screen: the view's, and the app's source (same layer).
fn show(state: &mut State, snapshot: Snapshot) {
    let layer = match &state.source {
        Source::Weights { layer, .. } => *layer,
        _ => 0,
    };
    let source = probe_source(&snapshot, layer);
    if let Some(l) = lab_mut(state) {
        l.snapshot = snapshot;
    }
    let (view, head, cursor) = (state.view, state.head, state.cursor);
    if rebuild(state, source) {
        state.view = view;
        state.head = head;
        state.cursor = cursor;
        state.clamp();
    }
}

/// The run's last evaluation and whether it has finished, if one trains.
pub fn last_evaluation(state: &State) -> Option<(EvalRecord, bool)> {
    let l = lab(state)?;
    let last = *l.snapshot.history.last()?;
    Some((last, l.done() || l.failed.is_some()))
}

/// What a lesson step waiting for `when` does now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Show it.
    Open,
    /// Keep the step before it on screen while the run trains on.
    Wait,
    /// The run has ended without meeting it: skip the step.
    Skip,
}

pub fn gate(state: &State, when: Option<&Condition>) -> Gate {
    let Some(c) = when else {
        return Gate::Open;
    };
    match last_evaluation(state) {
        Some((last, done)) if c.holds(&last, done) => Gate::Open,
        Some((_, true)) | None => Gate::Skip,
        Some((_, false)) => Gate::Wait,
    }
}
