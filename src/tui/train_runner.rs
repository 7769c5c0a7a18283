//! What steps a training run the app shows: a leaf of the app's modules, so the state can
//! hold it without depending on the code that drives it ([`super::training`]).

use crate::train::Trainer;

/// What steps the trainer.
pub enum Runner {
    /// Stepped inside `update`, `rate` steps per second of (virtual) time.
    Inline {
        trainer: Box<Trainer>,
        rate: f64,
        /// Steps owed but not yet taken (a fraction of one).
        budget: f64,
        eval_every: usize,
    },
    /// Stepped by the event loop's worker thread, which takes the trainer when it
    /// starts.
    Worker {
        trainer: Option<Box<Trainer>>,
        eval_every: usize,
    },
}

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Runner::Inline { rate, .. } => write!(f, "Runner::Inline {{ rate: {rate} }}"),
            Runner::Worker { trainer, .. } => {
                write!(f, "Runner::Worker {{ started: {} }}", trainer.is_none())
            }
        }
    }
}
