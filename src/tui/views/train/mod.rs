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
mod lab;

pub use lab::{Pace, TrainLab, lab, lab_mut};

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;

use crate::tui::action::{Action, TrainAction};
use crate::tui::component::View;
use crate::tui::context::Context;
use crate::tui::keys::{Binding, Group, KeyPat, When};
use crate::tui::view_kind::ViewKind;

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
