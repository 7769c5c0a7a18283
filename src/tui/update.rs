//! `update(&mut State, Action)`: the only place the state changes. It reads no clock,
//! no terminal and no environment; model changes go through the engine
//! (`Source::build`), and a failed rebuild leaves the old pipeline on screen with the
//! engine's message in the status line.
//!
//! This file dispatches each action and routes view commands and their requests;
//! [`navigate`] moves the selection and switches views, [`inputs`] changes what the
//! lesson computes (mask, position encoding, scale, tokens, layer).

mod inputs;
mod navigate;

pub use inputs::mask_cycle;
pub(crate) use navigate::set_view;

use crate::engine::pipeline::StageId;
use crate::tui::action::{Action, DerivedReport, TrainAction, WorkReport};
use crate::tui::change::{adopt, rebuild};
use crate::tui::component::View;
use crate::tui::context::Request;
use crate::tui::playback::{apply_step, change_speed, goto_step, play_pause, tick};
use crate::tui::state::{Overlay, PendingRerun, Source, State, StatusKind};
use crate::tui::training;
use crate::tui::view_kind::ViewKind;
use crate::tui::views;
use crate::tui::views::decode::session_key;
use inputs::{
    change_layer, change_length, cycle_mask, cycle_pe, edit, model_or_explain, toggle_scale,
};
use navigate::{click, cycle_view, go_stage, move_cursor, select_head, step_stage, zoom};

pub fn update(state: &mut State, action: Action) {
    if !matches!(
        action,
        Action::Tick { .. }
            | Action::Resize { .. }
            | Action::Measurement(_)
            | Action::TrainReport(_)
            | Action::Lens(_)
            | Action::Attribution(_)
            | Action::Patch(_)
            | Action::Work(_)
            | Action::Composition(_)
            | Action::Derived(_)
    ) {
        state.status = None;
    }
    match action {
        Action::Quit => state.quit = true,
        Action::StageNext => step_stage(state, 1),
        Action::StagePrev => step_stage(state, -1),
        Action::StageFirst => step_stage(state, -(StageId::ALL.len() as isize)),
        Action::StageLast => step_stage(state, StageId::ALL.len() as isize),
        Action::GoStage(id) => go_stage(state, id),
        Action::Move { rows, cols } => move_cursor(state, rows, cols),
        Action::NextPane => {
            let n = state.panes().len().max(1);
            state.sub = (state.sub + 1) % n;
            state.clamp();
        }
        Action::Select { row, col } => {
            state.cursor = (row, col);
            state.clamp();
        }
        Action::Click { x, y } => click(state, x, y),
        Action::Resize { cols, rows } => state.screen = (cols, rows),
        Action::NextView => cycle_view(state, 1),
        Action::PrevView => cycle_view(state, -1),
        Action::SetView(kind) => {
            state.narration = None;
            set_view(state, kind);
        }
        Action::Head(h) => select_head(state, h),
        Action::HeadNext => {
            let h = (state.head + 1) % state.heads().max(1);
            select_head(state, h);
        }
        Action::HeadPrev => {
            let n = state.heads().max(1);
            select_head(state, (state.head + n - 1) % n);
        }
        Action::CycleMask => cycle_mask(state),
        Action::CyclePe => cycle_pe(state),
        Action::ToggleScale => toggle_scale(state),
        Action::Longer => change_length(state, 1),
        Action::Shorter => change_length(state, -1),
        Action::Reseed => {
            if let Some(mut config) = model_or_explain(state, "reseeding") {
                config.seed = config.seed.wrapping_add(1);
                let seed = config.seed;
                if rebuild(state, Source::Model(config)) {
                    state.set_status(
                        StatusKind::Info,
                        format!("seed {seed}: new embeddings and weights"),
                    );
                }
            }
        }
        Action::LayerPrev => change_layer(state, -1),
        Action::LayerNext => change_layer(state, 1),
        Action::ZoomOut => zoom(state, true),
        Action::ZoomIn => zoom(state, false),
        Action::TogglePool => {
            state.zoom.pool = state.zoom.pool.toggled();
            let name = state.zoom.pool.name();
            state.set_status(
                StatusKind::Info,
                format!("a zoomed-out cell shows its block's {name}"),
            );
        }
        Action::Edit(e) => edit(state, e),
        Action::ToggleHelp => {
            state.overlay = match state.overlay {
                Overlay::Help { .. } => Overlay::None,
                _ => Overlay::Help { scroll: 0 },
            }
        }
        Action::HelpScroll(d) => {
            if let Overlay::Help { scroll } = &mut state.overlay {
                *scroll = (*scroll as isize + d).max(0) as u16;
            }
        }
        Action::CloseOverlay => state.overlay = Overlay::None,
        Action::ApplyStep(step) => apply_step(state, &step),
        Action::GotoStep(k) => goto_step(state, k),
        Action::PlayPause => play_pause(state),
        Action::StepNext => {
            let k = state.script.as_ref().map(|p| p.index + 1);
            if let Some(k) = k {
                goto_step(state, k);
            }
        }
        Action::StepPrev => {
            let k = state.script.as_ref().map(|p| p.index.saturating_sub(1));
            if let Some(k) = k {
                goto_step(state, k);
            }
        }
        Action::Faster => change_speed(state, 1),
        Action::Slower => change_speed(state, -1),
        Action::Tick { ms } => {
            // Time passes for every view (the flash view's tiles play on their own clock).
            for view in views::VIEWS {
                view.update(state, Action::Tick { ms });
            }
            // A training run first, so that a lesson step waiting for it sees the
            // evaluation this tick made.
            training::tick(state, ms);
            tick(state, ms);
        }
        // In a lesson the run follows the lesson: Space plays or pauses the lesson.
        Action::Train(TrainAction::PlayPause)
            if state.script.is_some() && views::train::lab(state).is_some() =>
        {
            play_pause(state)
        }
        Action::Train(a) => training::control(state, a),
        Action::TrainReport(r) => training::report(state, *r),
        Action::ViewCommand(_) => to_view(state, views::current(state), action),
        Action::Measurement(_) => to_view(state, views::find(ViewKind::Scaling), action),
        Action::Flash(_) => to_view(state, views::find(ViewKind::Flash), action),
        Action::Lens(_) => to_view(state, views::find(ViewKind::Lens), action),
        Action::Attribution(_) => to_view(state, views::find(ViewKind::Attribution), action),
        Action::Patch(_) => to_view(state, views::find(ViewKind::Patch), action),
        Action::Work(report) => work(state, *report),
        Action::CancelWork => {
            if state.rerun.take().is_some() {
                state.set_status(
                    StatusKind::Info,
                    "the run with the other heads was stopped (Esc)",
                );
            }
            for kind in [
                ViewKind::Decode,
                ViewKind::Model,
                ViewKind::Position,
                ViewKind::Patch,
            ] {
                to_view(state, views::find(kind), Action::CancelWork);
            }
        }
        Action::Composition(_) => to_view(state, views::find(ViewKind::Model), action),
        Action::Derived(ref report) => {
            let kind = match **report {
                DerivedReport::HeadScores { .. } | DerivedReport::Rollout { .. } => ViewKind::Model,
                DerivedReport::Position { .. } => ViewKind::Position,
            };
            to_view(state, views::find(kind), action)
        }
    }
}

/// A worker's report: the progress line, the model run again, or a decoding (for the
/// decode view).
fn work(state: &mut State, report: WorkReport) {
    match report {
        WorkReport::Progress(line) => state.progress = line,
        WorkReport::Rerun {
            base,
            options,
            contributions,
            session,
            pipeline,
        } => {
            let now = state.source.session().map(session_key);
            let for_lesson = state.rerun.as_ref().is_some_and(|p| p.for_lesson);
            let wanted = PendingRerun {
                base,
                options,
                contributions,
                for_lesson,
            };
            if state.rerun.as_ref() != Some(&wanted) || now.as_ref() != Some(&wanted.base) {
                // Stopped with Esc, or asked again with other heads: dropped.
                return;
            }
            state.rerun = None;
            let (kept_before, ablated_before) =
                state.source.session().map_or((false, Vec::new()), |s| {
                    (s.contributions.is_some(), s.options.ablate.clone())
                });
            match session {
                Ok(new) => {
                    // The worker built the layer's pipeline too, unless the layer changed.
                    let built =
                        pipeline
                            .filter(|(layer, _)| *layer == state.layer())
                            .map(|(_, p)| {
                                std::sync::Arc::try_unwrap(p.0).unwrap_or_else(|p| (*p).clone())
                            });
                    if adopt(state, new.0, built) && !for_lesson {
                        let s = state.source.session();
                        let kept = s.and_then(|s| s.contributions.as_ref());
                        match kept {
                            Some(c)
                                if !kept_before
                                    && s.is_some_and(|s| s.options.ablate == ablated_before) =>
                            {
                                kept_status(state, c.bytes())
                            }
                            _ => ablated_status(state),
                        }
                    }
                }
                Err(e) => state.set_status(StatusKind::Error, e),
            }
        }
        WorkReport::Decoded { .. } => to_view(
            state,
            views::find(ViewKind::Decode),
            Action::Work(Box::new(report)),
        ),
    }
}

fn kept_status(state: &mut State, bytes: usize) {
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

fn ablated_status(state: &mut State) {
    let Some(session) = state.source.session() else {
        return;
    };
    let n = session.options.ablate.len();
    let loss = session
        .loss()
        .map_or(String::new(), |l| format!("; loss {l:.3}"));
    state.set_status(StatusKind::Info, format!("{n} head(s) ablated{loss}"));
}

/// Hand an action to the view it is for; the view changes only its own data and the
/// selection, and the app keeps the selection inside what is on screen.
fn to_view<'v>(state: &mut State, view: impl Into<Option<&'v dyn View>>, action: Action) {
    if let Some(view) = view.into() {
        view.update(state, action);
        state.clamp();
    }
    if let Some(request) = state.request.take() {
        handle_request(state, request);
    }
}

fn handle_request(state: &mut State, request: Request) {
    match request {
        Request::Ablate { heads, toggle } => {
            let Some(session) = state.source.session() else {
                return;
            };
            let base = session_key(session);
            // Heads ablated while a run is on its way add to the heads that run ablates.
            let (mut options, contributions) = match &state.rerun {
                Some(p) if p.base == base => (p.options.clone(), p.contributions),
                _ => (session.options.clone(), false),
            };
            if toggle {
                for h in heads {
                    if let Some(i) = options.ablate.iter().position(|&x| x == h) {
                        options.ablate.remove(i);
                    } else {
                        options.ablate.push(h);
                    }
                }
            } else {
                options.ablate = heads;
            }
            let keep = contributions && session.contributions.is_none();
            if session.options == options && !keep {
                // Back to what is on screen: nothing to run.
                state.rerun = None;
                ablated_status(state);
                return;
            }
            // A worker runs the model (the event loop's, or `lens_worker::run_pending`
            // for headless drivers); its report comes back as `Action::Work`.
            state.rerun = Some(PendingRerun {
                base,
                options,
                contributions: keep,
                for_lesson: false,
            });
        }
        Request::KeepContributions => {
            // The same: run on a worker, keeping the contributions, with the heads an
            // awaited run ablates.
            let Some(session) = state.source.session() else {
                return;
            };
            if session.contributions.is_some() {
                return;
            }
            let base = session_key(session);
            let options = match &state.rerun {
                Some(p) if p.base == base => p.options.clone(),
                _ => session.options.clone(),
            };
            state.rerun = Some(PendingRerun {
                base,
                options,
                contributions: true,
                for_lesson: false,
            });
        }
        Request::OpenHead { layer, head, view } => {
            if let Source::Real {
                session,
                layer: now,
            } = &state.source
                && *now != layer
            {
                let new = Source::Real {
                    session: session.clone(),
                    layer,
                };
                if !rebuild(state, new) {
                    return;
                }
            }
            state.head = head;
            state.narration = None;
            set_view(state, view);
            // The head's weights: the stage every view with stages can show.
            if views::current(state).shows_stages()
                && state.pipeline.stage(StageId::Softmax).is_some()
            {
                state.stage = StageId::Softmax;
                state.sub = 0;
            }
            state.clamp();
            let layers = state.source.layers();
            state.set_status(
                StatusKind::Info,
                format!("layer {} of {layers}, head {}", layer + 1, head + 1),
            );
        }
    }
}
