//! The second text of a real model's session (`--compare`, `e` in the patch view): its
//! tokens, checked to be as many as the first text's, before anything runs on it; and
//! which run the model and tokens views show (`x`).

use std::sync::Arc;

use crate::error::Result;
use crate::model::forward::ForwardOptions;
use crate::model::load::LoadedModel;
use crate::model::session::ModelSession;
use crate::tui::context::{Compare, Context, StatusKind};

/// The second text's run: the model as it is (no ablation, mask or position change) on
/// its ids.
pub fn second_run(model: &Arc<LoadedModel>, ids: &[u32]) -> Result<Arc<ModelSession>> {
    ModelSession::from_shared(model.clone(), ids.to_vec(), ForwardOptions::default()).map(Arc::new)
}

/// Which run a view shows when there is a second text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Side {
    #[default]
    First,
    Second,
    /// The first run's weights minus the second's.
    Diff,
}

/// The second text's run, once made.
pub fn second(ctx: &Context) -> Option<&ModelSession> {
    ctx.compare.as_ref()?.session.as_deref()
}

/// The side after `side` (`x`): first, second, their difference. Without a second run,
/// None, and the status line says how to give one.
pub fn next_side(ctx: &mut Context, side: Side) -> Option<Side> {
    if second(ctx).is_none() {
        ctx.set_status(
            StatusKind::Warn,
            "no second text: open with --compare TEXT (as many tokens), or type one with e in the patch view",
        );
        return None;
    }
    Some(match side {
        Side::First => Side::Second,
        Side::Second => Side::Diff,
        Side::Diff => Side::First,
    })
}

/// A second text for a session: tokenized with its model's tokenizer, as many tokens as
/// the session's text, or why not (both counts and pieces).
pub fn compare_of(s: &ModelSession, text: &str) -> std::result::Result<Compare, String> {
    let ids = s.model.tokenizer.encode(text).map_err(|e| e.to_string())?;
    let pieces: Vec<String> = ids.iter().map(|&id| s.model.tokenizer.piece(id)).collect();
    if ids.len() != s.n() {
        return Err(format!(
            "the second text has {} tokens ({}) and the first {} ({}); patching needs the same number",
            ids.len(),
            pieces.join("|"),
            s.n(),
            s.pieces.join("|")
        ));
    }
    Ok(Compare {
        text: text.to_string(),
        ids,
        pieces,
        session: None,
    })
}
