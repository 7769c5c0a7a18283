//! What the app derives from its state and a training run: the narration line (with the
//! run's numbers filled in), when the next timer fires, and whether a lesson waits for the
//! run. Kept out of `state.rs`, which the training code itself builds on.

use crate::tui::narration;
use crate::tui::state::State;
use crate::tui::training;
use crate::tui::views;

impl State {
    /// The narration line: a script's, or the current view's or stage's own.
    pub fn narration_text(&self) -> String {
        if let Some(n) = &self.narration {
            // A training lesson's narration quotes the run's evaluation as of when the
            // step began (the run trains on while it is on screen).
            let quoted = self.script.as_ref().and_then(|p| p.quoted);
            return match quoted.or_else(|| training::last_evaluation(self).map(|(l, _)| l)) {
                Some(last) => crate::scene::train::fill(n, &last),
                None => n.clone(),
            };
        }
        if self.source.session().is_some()
            && let Some(n) = narration::view_on_model(self.view, self.options.lang)
        {
            return n.to_string();
        }
        if let Some(n) = narration::view(self.view, self.options.lang) {
            return n.to_string();
        }
        narration::stage(self.stage, self.options.lang).to_string()
    }

    /// Milliseconds of scene time until autoplay changes the step, if it is playing.
    pub fn next_change_in_ms(&self) -> Option<u64> {
        let waiting = self.waits_for_training();
        let script = self
            .script
            .as_ref()
            .filter(|p| p.playing && !p.finished() && !waiting)
            .map(|p| {
                // The step's end, or its animation's next position if that comes first.
                let mut until = p.dwell_ms(p.index) as f64;
                if let Some((a, k)) = p.animation_now()
                    && k < a.to
                {
                    until = until.min(a.time_of(k + 1));
                }
                let left = until - p.elapsed_ms;
                (left.max(0.0) / p.speed).ceil() as u64
            });
        // The flash view's tiles animate on their own clock, a training run on its own.
        let tiles = views::flash::next_tile_in_ms(&self.ctx);
        let training = training::next_eval_in_ms(self);
        [script, tiles, training].into_iter().flatten().min()
    }

    /// Is the lesson holding its step until the training run meets the next step's
    /// `when`?
    pub fn waits_for_training(&self) -> bool {
        let Some(p) = &self.script else {
            return false;
        };
        p.elapsed_ms >= p.dwell_ms(p.index) as f64
            && p.steps
                .get(p.index + 1)
                .is_some_and(|s| training::gate(self, s.when.as_ref()) == training::Gate::Wait)
    }
}
