//! The train view: a small model training, live. The loss curve (the targets copying
//! predicts against the rest: a plateau, then the drop when the induction circuit
//! forms), the head-score grid (previous-token and induction score of every head on the
//! probe) and every head's attention map of the probe, all from the trainer's latest
//! [`Snapshot`], with a progress line (steps/s, time left).
//!
//! The view only reads [`TrainLab`], its slot of the context, and records what the
//! person wants (pause, one more evaluation); the app steps the trainer (on the lesson's
//! virtual clock, or a worker thread at a terminal) and hands the view each snapshot.

mod draw;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;

use crate::train::Snapshot;
use crate::tui::action::{Action, TrainAction};
use crate::tui::component::View;
use crate::tui::context::Context;
use crate::tui::keys::{Binding, Group, KeyPat, When};
use crate::tui::view_kind::ViewKind;

/// How fast the run goes, as the progress line says it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pace {
    /// A lesson's: this many steps per second of lesson time (the same in a recording
    /// as at a terminal).
    Virtual(f64),
    /// Measured by the trainer: the wall time of the steps since the last evaluation
    /// (shown only where the app shows timings).
    Measured,
}

/// What the view shows of a run and what the person asked of it.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainLab {
    /// The trainer's latest snapshot (progress, every evaluation, the probe's scores and
    /// maps as of the last one).
    pub snapshot: Snapshot,
    /// Vocabulary size: the loss of a uniform guess is ln(vocab).
    pub vocab: usize,
    pub paused: bool,
    /// Steps the person asked for with `.` so far (a worker carries out the new ones).
    pub step_requests: u64,
    pub pace: Pace,
    /// Why the run stopped, if it failed.
    pub failed: Option<String>,
}

impl TrainLab {
    pub fn new(snapshot: Snapshot, vocab: usize, pace: Pace) -> TrainLab {
        TrainLab {
            snapshot,
            vocab,
            paused: false,
            step_requests: 0,
            pace,
            failed: None,
        }
    }

    pub fn done(&self) -> bool {
        self.snapshot.step >= self.snapshot.steps
    }

    /// Training steps per second, if known: the lesson's pace, or the trainer's measured
    /// one when `timings` allows wall-clock numbers on screen.
    pub fn steps_per_second(&self, timings: bool) -> Option<f64> {
        match self.pace {
            Pace::Virtual(rate) => Some(rate),
            Pace::Measured if timings => {
                let ms = self.snapshot.history.last()?.ms_per_step;
                (ms > 0.0).then(|| 1000.0 / ms)
            }
            Pace::Measured => None,
        }
    }
}

/// The run the app trains, if it trains one.
pub fn lab(ctx: &Context) -> Option<&TrainLab> {
    ctx.views.get::<TrainLab>(ViewKind::Train)
}

pub fn lab_mut(ctx: &mut Context) -> Option<&mut TrainLab> {
    ctx.views.get_mut::<TrainLab>(ViewKind::Train)
}

pub struct TrainView;

use KeyPat::Char as C;

static KEYS: &[Binding] = &[
    Binding {
        keys: &[C(' ')],
        action: Action::Train(TrainAction::PlayPause),
        desc: "pause / resume training",
        hint: Some("pause"),
        hint_keys: None,
        group: Group::ThisView,
        when: When::NoScript,
    },
    Binding {
        keys: &[C('.')],
        action: Action::Train(TrainAction::Step),
        desc: "train to the next evaluation, then pause",
        hint: Some("step"),
        hint_keys: None,
        group: Group::ThisView,
        when: When::Always,
    },
];

impl View for TrainView {
    fn kind(&self) -> ViewKind {
        ViewKind::Train
    }

    fn available(&self, ctx: &Context) -> bool {
        lab(ctx).is_some()
    }

    fn unavailable(&self) -> &'static str {
        "the train view shows a training run: attnviz train, or attnviz play induction-heads"
    }

    fn commands(&self) -> &'static [Binding] {
        KEYS
    }

    fn grid(&self, _ctx: &Context) -> (usize, usize) {
        (0, 0)
    }

    fn subtitle(&self, ctx: &Context) -> String {
        match lab(ctx) {
            Some(l) => {
                let s = &l.snapshot;
                let (layers, heads) = (s.scores.len(), s.scores.first().map_or(0, Vec::len));
                format!(
                    "training: {layers} layers x {heads} heads on the induction task (vocabulary {}, probe of {} tokens)",
                    l.vocab,
                    s.probe.len()
                )
            }
            None => String::new(),
        }
    }

    fn numbers(&self, _ctx: &Context) -> Option<String> {
        Some("numbers: attnviz's trainer (f32, every gradient its own)".into())
    }

    fn render(&self, ctx: &Context, area: Rect, buf: &mut Buffer) {
        match lab(ctx) {
            Some(l) => draw::render(ctx, l, area, buf),
            None => draw::render_missing(ctx, self.unavailable(), area, buf),
        }
    }
}
