//! Changing what the app shows the numbers of: a new source built by the engine (a
//! failed build keeps the old pipeline and shows why), and a real model run again with
//! other interventions (in place for lesson playback; `update` adopts the session a
//! worker ran, with the pipeline it built).

use crate::engine::pipeline::Pipeline;
use crate::model::session::ModelSession;
use crate::tui::state::{Source, State, StatusKind};
use crate::tui::views;

/// Replace the source and pipeline if the engine builds it; otherwise keep the old one
/// and show the engine's message.
pub(crate) fn rebuild(state: &mut State, source: Source) -> bool {
    match source.build() {
        Ok(pipeline) => {
            install(state, source, pipeline);
            true
        }
        Err(e) => {
            state.set_status(StatusKind::Error, e.to_string());
            false
        }
    }
}

/// Show `source` with its pipeline, built already.
fn install(state: &mut State, source: Source, pipeline: Pipeline) {
    state.source = source;
    state.pipeline = pipeline;
    state.cache.clear();
    state.clamp();
    let view = views::current(state);
    view.refresh(state);
    state.clamp();
}

/// Show the model session `new` (the same text run again) in place of the current one,
/// on the same layer, with `built`, that layer's pipeline if a worker built it already;
/// the cursor stays where it was.
pub(crate) fn adopt(
    state: &mut State,
    new: std::sync::Arc<ModelSession>,
    built: Option<Pipeline>,
) -> bool {
    let Source::Real { layer, .. } = &state.source else {
        return false;
    };
    let source = Source::Real {
        session: new,
        layer: *layer,
    };
    let cursor = state.cursor;
    let ok = match built {
        Some(pipeline) => {
            install(state, source, pipeline);
            true
        }
        None => rebuild(state, source),
    };
    if ok {
        state.cursor = cursor;
        state.clamp();
    }
    ok
}
