//! The event loop's side of the lens view: when the view waits for the logit lens of
//! the text on screen, a worker thread computes it (an unembedding per layer and
//! position: seconds on a long text) and its report comes back as an action, so the
//! screen never freezes. Headless drivers (recordings, tests) compute it in place with
//! [`run_pending`]. The state changes only through `update`.

use std::sync::Arc;
use std::sync::mpsc::{self, Receiver};
use std::thread::JoinHandle;

use crate::model::lens::{TextLens, text_lens};
use crate::model::load::LoadedModel;
use crate::tui::action::{Action, LensReport};
use crate::tui::state::State;
use crate::tui::update::update;
use crate::tui::views::lens::{LensKey, TOP, final_top, wanted};

/// What one lens needs: the model, the text's ids and the last position's target.
struct Job {
    key: LensKey,
    model: Arc<LoadedModel>,
    last: Option<u32>,
}

fn job(state: &State) -> Option<Job> {
    let key = wanted(state)?;
    let s = state.source.session()?;
    Some(Job {
        key,
        model: s.model.clone(),
        last: final_top(s),
    })
}

fn compute(job: &Job) -> LensReport {
    let m = &job.model;
    let lens = text_lens(&m.config, &m.weights, &job.key.ids, TOP, job.last, None)
        .map(Arc::new)
        .map_err(|e| e.to_string());
    LensReport {
        key: (job.key.model, job.key.ids.clone()),
        lens,
    }
}

struct Running {
    key: LensKey,
    report: Receiver<LensReport>,
    handle: JoinHandle<()>,
}

/// Owns the worker of the lens being computed, if any.
#[derive(Default)]
pub struct Driver {
    running: Option<Running>,
}

impl Driver {
    /// True while a worker runs (the loop then wakes often to take its report).
    pub fn busy(&self) -> bool {
        self.running.is_some()
    }

    /// Start a worker if the view waits for a lens no worker computes, and feed a
    /// finished worker's report to `update`.
    pub fn sync(&mut self, state: &mut State) {
        if let Some(j) = job(state)
            && self.running.as_ref().is_none_or(|r| r.key != j.key)
        {
            // A worker for another text is left to finish; its report goes nowhere.
            let (tx, report) = mpsc::channel();
            let key = j.key.clone();
            let handle = std::thread::spawn(move || {
                let _ = tx.send(compute(&j));
            });
            self.running = Some(Running {
                key,
                report,
                handle,
            });
        }
        let Some(r) = &self.running else {
            return;
        };
        let report = match r.report.try_recv() {
            Ok(report) => report,
            Err(_) if r.handle.is_finished() => match r.report.try_recv() {
                Ok(report) => report,
                // It ended without a word: it panicked. Say so rather than wait forever.
                Err(_) => LensReport {
                    key: (r.key.model, r.key.ids.clone()),
                    lens: Err("the lens thread stopped unexpectedly".into()),
                },
            },
            Err(_) => return,
        };
        self.running = None;
        update(state, Action::Lens(Box::new(report)));
    }
}

/// Compute the lens the view waits for here and now (for headless drivers); false if it
/// waits for none.
pub fn run_pending(state: &mut State) -> bool {
    let Some(j) = job(state) else {
        return false;
    };
    update(state, Action::Lens(Box::new(compute(&j))));
    true
}

/// The lens the view shows, once computed.
pub fn lens(state: &State) -> Option<Arc<TextLens>> {
    match &crate::tui::views::lens::lab(state)?.state {
        crate::tui::views::lens::LensState::Ready(l) => Some(l.clone()),
        _ => None,
    }
}
