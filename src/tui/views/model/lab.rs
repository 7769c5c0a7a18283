//! What the model view keeps between frames (every head's scores for one session, what it
//! shows, the rollout) and the head scores it can colour by; read by the view and its
//! parts.

use crate::model::scores::HeadScores;
use crate::model::session::ModelSession;
use crate::tui::context::Context;
use crate::tui::view_kind::ViewKind;

/// What the view shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Show {
    #[default]
    Maps,
    Score(Score),
    Rollout,
}

/// The head scores the grid can colour by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Score {
    PrevToken,
    FirstToken,
    Duplicate,
    Induction,
    Entropy,
}

impl Score {
    pub const ALL: [Score; 5] = [
        Score::PrevToken,
        Score::FirstToken,
        Score::Duplicate,
        Score::Induction,
        Score::Entropy,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Score::PrevToken => "prev-token",
            Score::FirstToken => "first-token",
            Score::Duplicate => "duplicate",
            Score::Induction => "induction",
            Score::Entropy => "entropy",
        }
    }

    pub fn of(self, s: &HeadScores) -> f64 {
        match self {
            Score::PrevToken => s.prev_token,
            Score::FirstToken => s.first_token,
            Score::Duplicate => s.duplicate,
            Score::Induction => s.induction,
            Score::Entropy => s.entropy,
        }
    }
}

impl Show {
    pub fn next(self) -> Show {
        match self {
            Show::Maps => Show::Score(Score::ALL[0]),
            Show::Score(s) => match Score::ALL.iter().position(|&x| x == s) {
                Some(i) if i + 1 < Score::ALL.len() => Show::Score(Score::ALL[i + 1]),
                _ => Show::Rollout,
            },
            Show::Rollout => Show::Maps,
        }
    }
}

/// What the view keeps: every head's scores for the session they were computed for.
pub struct ModelLab {
    /// The session (by address) the scores belong to.
    pub session: usize,
    /// scores[layer * heads + head].
    pub scores: Vec<HeadScores>,
    pub show: Show,
    /// The rollout (n x n), once asked for, for this model session.
    pub rollout: Option<Vec<f64>>,
}

pub fn session_key(s: &ModelSession) -> usize {
    s as *const ModelSession as usize
}

pub fn lab(ctx: &Context) -> Option<&ModelLab> {
    ctx.views.get::<ModelLab>(ViewKind::Model)
}

pub fn show(ctx: &Context) -> Show {
    lab(ctx).map_or(Show::Maps, |l| l.show)
}

/// Score of (layer, head), if computed.
pub fn score(ctx: &Context, layer: usize, head: usize) -> Option<&HeadScores> {
    let heads = ctx.source.session()?.config().heads;
    lab(ctx)?.scores.get(layer * heads + head)
}
