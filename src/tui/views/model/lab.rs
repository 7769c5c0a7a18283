//! What the model view keeps between frames (every head's scores for one session, what it
//! shows, weights or contributions, the rollout) and the head scores it can colour by;
//! read by the view and its parts.

use std::sync::Arc;

use crate::model::composition::Composition;
use crate::model::maps::AttentionMaps;
use crate::model::scores::{HeadScores, head_scores};
use crate::model::session::{Measure, ModelSession};
use crate::tui::context::Context;
use crate::tui::view_kind::ViewKind;
use crate::tui::views::contrib;

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
/// A worker computes the scores and the rollout (`tui::lens_worker`, seconds on a long
/// text); until they arrive the view says so.
pub struct ModelLab {
    /// The session (by address) the scores belong to.
    pub session: usize,
    /// scores[measure][layer * heads + head], of the weights and of the contributions,
    /// once a worker has computed them.
    pub scores: [Option<Arc<Vec<HeadScores>>>; 2],
    pub show: Show,
    /// `w`: show the contributions instead of the weights.
    pub contrib: bool,
    /// The rollout (n x n) of the weights and of the contributions, once asked for, for
    /// this model session.
    pub rollout: [Option<Arc<Vec<f64>>>; 2],
    /// `i`: the heads that write into the cursor's head, by composition score.
    pub writers: Writers,
    /// Esc stopped the worker deriving the scores or the rollout: not asked again until
    /// the view is opened (or refreshed) again.
    pub stopped: bool,
    /// `x` with a second text: the maps of the first text, of the second, or their
    /// difference.
    pub side: crate::tui::compare::Side,
}

/// The composition scores of the session's model (from its weights alone, so they
/// outlive a session) and whether the panel listing them is shown.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Writers {
    pub shown: bool,
    /// The model (address of its weights) `state` belongs to.
    pub model: usize,
    pub state: WritersState,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub enum WritersState {
    /// Not asked for yet.
    #[default]
    None,
    /// Asked for; a worker computes them.
    Pending,
    Ready(Arc<Vec<Composition>>),
    Failed(String),
}

impl ModelLab {
    /// The rollout of `m`, if made.
    pub fn rollout(&self, m: Measure) -> Option<&[f64]> {
        self.rollout[m as usize].as_ref().map(|r| r.as_slice())
    }
}

/// Every head's scores of `maps` (weights or contributions), [layer * heads + head].
pub fn scores_of(s: &ModelSession, maps: &AttentionMaps) -> Vec<HeadScores> {
    scores_until(s, maps, |_| true).unwrap_or_default()
}

/// [`scores_of`], telling `go` how many heads are scored before each next one; None if
/// `go` says stop.
pub fn scores_until(
    s: &ModelSession,
    maps: &AttentionMaps,
    mut go: impl FnMut(usize) -> bool,
) -> Option<Vec<HeadScores>> {
    let (layers, heads, n) = (s.config().layers, s.config().heads, s.n());
    let causal = s.config().causal;
    let mut scores = Vec::with_capacity(layers * heads);
    for l in 0..layers {
        for h in 0..heads {
            if !go(scores.len()) {
                return None;
            }
            let a = maps.head(l, h);
            scores.push(head_scores(&a, &s.ids, |i| if causal { i + 1 } else { n }));
        }
    }
    Some(scores)
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

/// What the view has on screen: weights, or contributions once the session keeps them.
pub fn measure(ctx: &Context) -> Measure {
    match ctx.source.session() {
        Some(s) => contrib::shown(s, lab(ctx).is_some_and(|l| l.contrib)),
        None => Measure::Weights,
    }
}

/// Score of (layer, head) in what is shown, if computed.
pub fn score(ctx: &Context, layer: usize, head: usize) -> Option<&HeadScores> {
    let heads = ctx.source.session()?.config().heads;
    let l = lab(ctx)?;
    l.scores[measure(ctx) as usize]
        .as_ref()?
        .get(layer * heads + head)
}

/// Are the scores of what is shown computed?
pub fn scores_ready(ctx: &Context) -> bool {
    lab(ctx).is_some_and(|l| l.scores[measure(ctx) as usize].is_some())
}

/// What the view waits for a worker to derive from the session on screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wanted {
    /// Every head's scores of the weights or the contributions.
    Scores(Measure),
    /// The rollout of the weights or the contributions.
    Rollout(Measure),
}

/// The session (its address) and what the view, open, waits for of it.
pub fn wanted(ctx: &Context) -> Option<(usize, Vec<Wanted>)> {
    let s = ctx.source.session()?;
    let l = lab(ctx)?;
    let key = session_key(s);
    if ctx.view != ViewKind::Model || l.session != key || l.stopped {
        return None;
    }
    let m = measure(ctx);
    let mut out = Vec::new();
    if l.scores[m as usize].is_none() {
        out.push(Wanted::Scores(m));
    }
    if l.show == Show::Rollout && l.rollout[m as usize].is_none() && super::rollout::fits(s) {
        out.push(Wanted::Rollout(m));
    }
    (!out.is_empty()).then_some((key, out))
}
