//! The event loop's side of `attnviz train` at a terminal: a worker thread owns the
//! trainer and steps it as fast as it goes, sending a snapshot after each evaluation;
//! the loop carries the person's wishes (pause, resume, one more evaluation) to it and
//! turns its reports into actions. The state changes only through `update`.

use std::sync::mpsc::{self, Receiver, RecvError, Sender, TryRecvError};
use std::thread::JoinHandle;

use crate::train::Trainer;
use crate::tui::action::{Action, TrainReport};
use crate::tui::state::State;
use crate::tui::training::{Runner, train_steps};
use crate::tui::update::update;
use crate::tui::views::train::lab;

/// What the loop tells the worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Command {
    Run,
    Pause,
    /// Train to the next evaluation, then pause.
    Step,
}

struct Worker {
    commands: Sender<Command>,
    reports: Receiver<TrainReport>,
    handle: JoinHandle<()>,
    sent_paused: bool,
    sent_steps: u64,
}

/// Owns the worker while the run goes on.
#[derive(Default)]
pub struct Driver {
    worker: Option<Worker>,
}

impl Driver {
    /// True while a worker runs (the loop then wakes often to show its reports).
    pub fn busy(&self) -> bool {
        self.worker.is_some()
    }

    /// Start the worker if the state holds a trainer for one, send it what the person
    /// asked for since the last call, and feed its reports to `update`.
    pub fn sync(&mut self, state: &mut State) {
        let paused = lab(state).is_none_or(|l| l.paused);
        if self.worker.is_none()
            && let Some(Runner::Worker {
                trainer,
                eval_every,
            }) = &mut state.training
            && let Some(t) = trainer.take()
        {
            self.worker = Some(start(*t, *eval_every, paused));
        }
        let Some(w) = &mut self.worker else {
            return;
        };
        if let Some(l) = lab(state) {
            // A closed channel means the worker ended; its last reports are still read.
            if l.paused != w.sent_paused {
                let c = if l.paused {
                    Command::Pause
                } else {
                    Command::Run
                };
                let _ = w.commands.send(c);
                w.sent_paused = l.paused;
            }
            while w.sent_steps < l.step_requests {
                let _ = w.commands.send(Command::Step);
                w.sent_steps += 1;
            }
        }
        let mut reports: Vec<TrainReport> = w.reports.try_iter().collect();
        if w.handle.is_finished() {
            reports.extend(w.reports.try_iter());
            self.worker = None;
        }
        for r in reports {
            update(state, Action::TrainReport(Box::new(r)));
        }
    }
}

fn start(trainer: Trainer, eval_every: usize, paused: bool) -> Worker {
    let (commands, rx) = mpsc::channel();
    let (tx, reports) = mpsc::channel();
    let handle = std::thread::spawn(move || work(trainer, eval_every, !paused, rx, tx));
    Worker {
        commands,
        reports,
        handle,
        sent_paused: paused,
        sent_steps: 0,
    }
}

/// Step until the run ends, the loop goes away or a step fails; wait while paused.
fn work(
    mut trainer: Trainer,
    eval_every: usize,
    mut running: bool,
    commands: Receiver<Command>,
    reports: Sender<TrainReport>,
) {
    let mut stop_at_eval = false;
    while !trainer.done() {
        // Paused: block until told otherwise; running: take what came meanwhile.
        let next = if running {
            match commands.try_recv() {
                Ok(c) => Some(c),
                Err(TryRecvError::Empty) => None,
                Err(TryRecvError::Disconnected) => return,
            }
        } else {
            match commands.recv() {
                Ok(c) => Some(c),
                Err(RecvError) => return,
            }
        };
        match next {
            Some(Command::Run) => (running, stop_at_eval) = (true, false),
            Some(Command::Pause) => running = false,
            Some(Command::Step) => (running, stop_at_eval) = (true, true),
            None => {}
        }
        if !running {
            continue;
        }
        match train_steps(&mut trainer, 1, eval_every) {
            Ok(false) => {}
            Ok(true) => {
                if reports
                    .send(TrainReport::Snapshot(trainer.snapshot()))
                    .is_err()
                {
                    return;
                }
                if stop_at_eval {
                    (running, stop_at_eval) = (false, false);
                }
            }
            Err(e) => {
                let _ = reports.send(TrainReport::Failed(e.to_string()));
                return;
            }
        }
    }
}
