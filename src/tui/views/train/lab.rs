//! The train view's slot of the context: the run's latest snapshot and what the person
//! asked of it. The app writes it ([`crate::tui::training`]); the view reads it.

use crate::train::Snapshot;
use crate::tui::context::Context;
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
    /// The other tokens' loss is measured, not trained (the induction task).
    pub other_untrained: bool,
}

impl TrainLab {
    pub fn new(snapshot: Snapshot, vocab: usize, pace: Pace, other_untrained: bool) -> TrainLab {
        TrainLab {
            snapshot,
            vocab,
            paused: false,
            step_requests: 0,
            pace,
            failed: None,
            other_untrained,
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
