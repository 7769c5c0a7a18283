//! Changing what the app shows the numbers of: a new source built by the engine (a
//! failed build keeps the old pipeline and shows why), and a real model run again with
//! other interventions. Both `update` and lesson playback change the model this way.

use crate::model::forward::ForwardOptions;
use crate::model::session::{Measure, ModelSession};
use crate::tui::state::{Source, State, StatusKind};
use crate::tui::views;

/// Replace the source and pipeline if the engine builds it; otherwise keep the old one
/// and show the engine's message.
pub(crate) fn rebuild(state: &mut State, source: Source) -> bool {
    match source.build() {
        Ok(pipeline) => {
            state.source = source;
            state.pipeline = pipeline;
            state.cache.clear();
            state.clamp();
            let view = views::current(state);
            view.refresh(state);
            state.clamp();
            true
        }
        Err(e) => {
            state.set_status(StatusKind::Error, e.to_string());
            false
        }
    }
}

/// Run the real model again with other interventions (same text, same layer); the
/// cursor stays where it was. False (with the error on the status line) if it failed.
pub(crate) fn rerun(state: &mut State, options: ForwardOptions) -> bool {
    let Source::Real { session, .. } = &state.source else {
        return false;
    };
    if session.options == options {
        return true;
    }
    match session.intervened(options) {
        Ok(new) => adopt(state, std::sync::Arc::new(new)),
        Err(e) => {
            state.set_status(StatusKind::Error, e.to_string());
            false
        }
    }
}

/// Show the model session `new` (the same text run again) in place of the current one,
/// on the same layer; the cursor stays where it was.
pub(crate) fn adopt(state: &mut State, new: std::sync::Arc<ModelSession>) -> bool {
    let Source::Real { layer, .. } = &state.source else {
        return false;
    };
    let source = Source::Real {
        session: new,
        layer: *layer,
    };
    let cursor = state.cursor;
    let ok = rebuild(state, source);
    if ok {
        state.cursor = cursor;
        state.clamp();
    }
    ok
}

/// Run the real model again keeping every layer's contributions (the first time a view
/// shows them; a model session that has them is kept as it is). False (with the error on
/// the status line) if it failed.
pub(crate) fn keep_contributions(state: &mut State) -> bool {
    let Source::Real { session, layer } = &state.source else {
        return false;
    };
    if session.maps(Measure::Contributions).is_some() {
        return true;
    }
    let layer = *layer;
    match session.with_contributions() {
        Ok(new) => {
            let bytes = new.contributions.as_ref().map_or(0, |c| c.bytes());
            let source = Source::Real {
                session: std::sync::Arc::new(new),
                layer,
            };
            let cursor = state.cursor;
            let ok = rebuild(state, source);
            if ok {
                state.cursor = cursor;
                state.clamp();
                let size = if bytes >= 1_000_000 {
                    format!("{:.1} MB", bytes as f64 / 1e6)
                } else {
                    format!("{:.1} kB", bytes as f64 / 1e3)
                };
                state.set_status(
                    StatusKind::Info,
                    format!("contributions of every layer kept ({size} beside the weights)"),
                );
            }
            ok
        }
        Err(e) => {
            state.set_status(StatusKind::Error, e.to_string());
            false
        }
    }
}
