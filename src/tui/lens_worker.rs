//! The event loop's side of the lens and attribution views: when one of them waits for
//! its numbers of the text on screen (the logit lens: an unembedding per layer and
//! position, seconds on a long text; the attribution: a forward pass), a worker thread
//! computes them, as it does the model view's composition scores of every pair of heads
//! (from the weights; seconds on a model of hundreds of heads), and the report comes back as an action, so the screen never freezes.
//! Headless drivers (recordings, tests) compute them in place with [`run_pending`]. The
//! state changes only through `update`.

use std::sync::Arc;
use std::sync::mpsc::{self, Receiver};
use std::thread::JoinHandle;

use crate::kernel::default_threads;
use crate::model::attribution::attribute;
use crate::model::composition::composition_scores;
use crate::model::lens::{TextLens, text_lens};
use crate::model::load::LoadedModel;
use crate::tui::action::{Action, AttributionReport, CompositionReport, LensReport};
use crate::tui::state::State;
use crate::tui::update::update;
use crate::tui::views::attribution;
use crate::tui::views::lens::{self, LensKey, TOP, final_top};
use crate::tui::views::model::writers;

/// What a job computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum What {
    /// The lens, with the last position's target.
    Lens { last: Option<u32> },
    /// The attribution of logit(target) - logit(foil) at the last position.
    Attribution { target: u32, foil: u32 },
    /// The composition scores of every pair of heads of the model (the key's ids empty).
    Composition,
}

/// One job: what, for which model and text.
struct Job {
    key: LensKey,
    what: What,
    model: Arc<LoadedModel>,
}

/// The jobs the views wait for now, lens first.
fn jobs(state: &State) -> Vec<Job> {
    let Some(s) = state.source.session() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if let Some(key) = lens::wanted(state) {
        out.push(Job {
            key,
            what: What::Lens { last: final_top(s) },
            model: s.model.clone(),
        });
    }
    if let Some((key, target, foil)) = attribution::wanted(state) {
        out.push(Job {
            key,
            what: What::Attribution { target, foil },
            model: s.model.clone(),
        });
    }
    if let Some(model) = writers::wanted(state) {
        out.push(Job {
            key: LensKey {
                model,
                ids: Vec::new(),
            },
            what: What::Composition,
            model: s.model.clone(),
        });
    }
    out
}

fn compute(job: &Job) -> Action {
    let m = &job.model;
    let ids = &job.key.ids;
    let key = (job.key.model, ids.clone());
    match job.what {
        What::Lens { last } => Action::Lens(Box::new(LensReport {
            key,
            lens: text_lens(&m.config, &m.weights, ids, TOP, last, None)
                .map(Arc::new)
                .map_err(|e| e.to_string()),
        })),
        What::Attribution { target, foil } => Action::Attribution(Box::new(AttributionReport {
            key,
            attribution: attribute(
                &m.config,
                &m.weights,
                ids,
                ids.len().saturating_sub(1),
                target,
                Some(foil),
                None,
            )
            .map(Arc::new)
            .map_err(|e| e.to_string()),
        })),
        What::Composition => {
            let layers: Vec<usize> = (0..m.config.layers).collect();
            Action::Composition(Box::new(CompositionReport {
                model: job.key.model,
                scores: composition_scores(&m.config, &m.weights, &layers, default_threads())
                    .map(Arc::new)
                    .map_err(|e| e.to_string()),
            }))
        }
    }
}

/// The report of a job whose thread ended without one (it panicked).
fn stopped(key: &LensKey, what: What) -> Action {
    let key = (key.model, key.ids.clone());
    let e = "the worker thread stopped unexpectedly".to_string();
    match what {
        What::Lens { .. } => Action::Lens(Box::new(LensReport { key, lens: Err(e) })),
        What::Attribution { .. } => Action::Attribution(Box::new(AttributionReport {
            key,
            attribution: Err(e),
        })),
        What::Composition => Action::Composition(Box::new(CompositionReport {
            model: key.0,
            scores: Err(e),
        })),
    }
}

struct Running {
    key: LensKey,
    what: What,
    report: Receiver<Action>,
    handle: JoinHandle<()>,
}

/// Owns the workers of the numbers being computed.
#[derive(Default)]
pub struct Driver {
    running: Vec<Running>,
}

impl Driver {
    /// True while a worker runs (the loop then wakes often to take its report).
    pub fn busy(&self) -> bool {
        !self.running.is_empty()
    }

    /// Start a worker for each job a view waits for that no worker computes, and feed
    /// finished workers' reports to `update`.
    pub fn sync(&mut self, state: &mut State) {
        for j in jobs(state) {
            if self
                .running
                .iter()
                .any(|r| r.key == j.key && r.what == j.what)
            {
                continue;
            }
            // A worker for another text is left to finish; its report is dropped by the
            // view, which no longer waits for it.
            let (tx, report) = mpsc::channel();
            let (key, what) = (j.key.clone(), j.what);
            let handle = std::thread::spawn(move || {
                let _ = tx.send(compute(&j));
            });
            self.running.push(Running {
                key,
                what,
                report,
                handle,
            });
        }
        let mut reports = Vec::new();
        self.running.retain(|r| match r.report.try_recv() {
            Ok(a) => {
                reports.push(a);
                false
            }
            Err(_) if r.handle.is_finished() => {
                reports.push(
                    r.report
                        .try_recv()
                        .unwrap_or_else(|_| stopped(&r.key, r.what)),
                );
                false
            }
            Err(_) => true,
        });
        for a in reports {
            update(state, a);
        }
    }
}

/// Compute what the views wait for here and now (for headless drivers); false if they
/// wait for nothing.
pub fn run_pending(state: &mut State) -> bool {
    let jobs = jobs(state);
    for j in &jobs {
        update(state, compute(j));
    }
    !jobs.is_empty()
}

/// The lens the lens view shows, once computed.
pub fn lens(state: &State) -> Option<Arc<TextLens>> {
    match &lens::lab(state)?.state {
        lens::LensState::Ready(l) => Some(l.clone()),
        _ => None,
    }
}
