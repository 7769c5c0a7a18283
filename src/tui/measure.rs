//! The event loop's side of the scaling view: it carries out the lab's requests (start
//! or cancel the worker thread) and turns the worker's reports into actions. It reads
//! the state and changes it only through `update`. App code: the view itself only
//! records requests and folds reports in.

use crate::engine::scaling::{Measurement, Progress};
use crate::tui::action::Action;
use crate::tui::state::State;
use crate::tui::update::update;
use crate::tui::views::scaling::{Request, lab};

/// Owns the worker of the sweep that is running, if any.
#[derive(Debug, Default)]
pub struct Driver {
    current: Option<Measurement>,
    /// The number of the last request carried out.
    handled: u64,
}

impl Driver {
    /// True while a worker runs (the event loop then wakes often to show progress).
    pub fn busy(&self) -> bool {
        self.current.is_some()
    }

    /// Carry out a new request, then feed every report that arrived since the last
    /// call to `update`.
    pub fn sync(&mut self, state: &mut State) {
        let request = lab(state)
            .and_then(|l| l.request.clone())
            .filter(|(id, _)| *id > self.handled);
        if let Some((id, request)) = request {
            self.handled = id;
            match request {
                Request::Start(plan) => {
                    // Dropping a previous worker cancels it; its reports go nowhere.
                    self.current = None;
                    match Measurement::start(plan) {
                        Ok(m) => self.current = Some(m),
                        Err(e) => {
                            update(
                                state,
                                Action::Measurement(Progress::Failed {
                                    job: usize::MAX,
                                    message: e.to_string(),
                                }),
                            );
                            update(
                                state,
                                Action::Measurement(Progress::Finished { cancelled: false }),
                            );
                        }
                    }
                }
                Request::Cancel => match &self.current {
                    Some(m) => m.cancel(),
                    // Nothing runs (it ended meanwhile): say the sweep is over.
                    None => update(
                        state,
                        Action::Measurement(Progress::Finished { cancelled: true }),
                    ),
                },
            }
        }
        let Some(m) = &self.current else {
            return;
        };
        let mut reports = m.poll();
        let finished = |r: &[Progress]| r.iter().any(|p| matches!(p, Progress::Finished { .. }));
        if !finished(&reports) && m.is_finished() {
            // The thread ended: take what it sent last; if it never said it finished, it
            // died (a panic in a run), and the view must not wait for it forever.
            reports.extend(m.poll());
            if !finished(&reports) {
                reports.push(Progress::Failed {
                    job: usize::MAX,
                    message: "the measuring thread stopped unexpectedly".into(),
                });
                reports.push(Progress::Finished { cancelled: false });
            }
        }
        let ended = finished(&reports);
        for p in reports {
            update(state, Action::Measurement(p));
        }
        if ended {
            self.current = None;
        }
    }
}
