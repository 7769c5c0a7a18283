//! The selection and what is on screen: stepping through stages, choosing a head,
//! moving the cursor (or clicking), switching views and zooming. Nothing here rebuilds
//! the lesson's numbers; a view that derives data per head refreshes itself.

use crate::engine::pipeline::StageId;
use crate::tui::component::Hit;
use crate::tui::layout;
use crate::tui::state::{Overlay, State, StatusKind};
use crate::tui::view_kind::ViewKind;
use crate::tui::views;

pub(super) fn step_stage(state: &mut State, delta: isize) {
    let view = views::current(state);
    let steps: Vec<StageId> = state
        .pipeline
        .stages
        .iter()
        .filter(|s| view.steps_stage(s))
        .map(|s| s.id)
        .collect();
    if steps.is_empty() {
        state.set_status(
            StatusKind::Info,
            format!("the {} view has no stages to step through", state.view),
        );
        return;
    }
    let here = state.stage.index() as isize;
    let target = if delta > 0 {
        // The delta-th steppable stage after the current one (or the last).
        let later: Vec<StageId> = steps
            .iter()
            .copied()
            .filter(|s| s.index() as isize > here)
            .collect();
        later.get(delta as usize - 1).or(later.last()).copied()
    } else {
        let earlier: Vec<StageId> = steps
            .iter()
            .copied()
            .filter(|s| (s.index() as isize) < here)
            .collect();
        let k = (-delta) as usize;
        earlier
            .len()
            .checked_sub(k)
            .map(|i| earlier[i])
            .or(earlier.first().copied())
    };
    match target {
        Some(id) => {
            state.narration = None;
            state.stage = id;
            state.clamp();
        }
        None => {
            let edge = if delta > 0 { "last" } else { "first" };
            state.set_status(StatusKind::Info, format!("this is the {edge} stage"));
        }
    }
}

pub(super) fn go_stage(state: &mut State, id: StageId) {
    if state.pipeline.stage(id).is_some() {
        state.narration = None;
        state.stage = id;
        state.clamp();
    }
}

pub(super) fn select_head(state: &mut State, h: usize) {
    let n = state.heads();
    if h < n {
        state.head = h;
        // Views that derive data per head (flash) follow the new head.
        views::current(state).refresh(state);
        state.clamp();
    } else {
        state.set_status(
            StatusKind::Warn,
            format!(
                "there {} only {n} head{}: pick 1-{n}",
                if n == 1 { "is" } else { "are" },
                if n == 1 { "" } else { "s" }
            ),
        );
    }
}

pub(super) fn move_cursor(state: &mut State, rows: isize, cols: isize) {
    let view = views::current(state);
    let (n_rows, n_cols) = view.grid(state);
    if n_rows == 0 || n_cols == 0 {
        return;
    }
    // Zoomed out, a step moves by one screen cell: a block of entries.
    let p = if view.zooms() {
        state.zoom.per_cell as isize
    } else {
        1
    };
    let (rows, cols) = (rows * p, cols * p);
    let (r, c) = state.cursor;
    let r = (r as isize + rows).clamp(0, n_rows as isize - 1) as usize;
    let c = c as isize + cols;
    // In the pipeline view the cursor walks on into the next (or previous) matrix of
    // the stage, e.g. from Q into K.
    let panes = if state.view == ViewKind::Pipeline {
        state.panes().len()
    } else {
        1
    };
    if c >= n_cols as isize && state.sub + 1 < panes {
        state.sub += 1;
        state.cursor = (r, 0);
    } else if c < 0 && state.sub > 0 {
        state.sub -= 1;
        let last = state
            .focused()
            .map_or(0, |m| m.data.ncols().saturating_sub(1));
        state.cursor = (r, last);
    } else {
        state.cursor = (r, c.clamp(0, n_cols as isize - 1) as usize);
    }
    state.clamp();
}

pub(super) fn cycle_view(state: &mut State, delta: isize) {
    let all = views::shown(state);
    let here = all.iter().position(|v| v.kind() == state.view).unwrap_or(0) as isize;
    let n = all.len() as isize;
    let next = all[((here + delta) % n + n) as usize % all.len()].kind();
    state.narration = None;
    set_view(state, next);
}

/// Open a view if this build has it; the view prepares what it needs.
pub(crate) fn set_view(state: &mut State, kind: ViewKind) {
    match views::find(kind) {
        Some(view) if !view.available(state) => {
            state.set_status(StatusKind::Warn, view.unavailable());
        }
        Some(view) => {
            state.view = kind;
            view.refresh(state);
            state.clamp();
        }
        None => state.set_status(
            StatusKind::Warn,
            format!("the {kind} view is not in this build"),
        ),
    }
}

pub(super) fn click(state: &mut State, x: u16, y: u16) {
    if state.overlay != Overlay::None {
        return;
    }
    match layout::hit_test(state, x, y) {
        Some(Hit::Cell { sub, row, col }) => {
            state.sub = sub;
            state.cursor = (row, col);
            state.clamp();
        }
        Some(Hit::Stage(id)) => go_stage(state, id),
        Some(Hit::View(kind)) => {
            state.narration = None;
            set_view(state, kind);
        }
        Some(Hit::HeadCell { head, row, col }) => {
            select_head(state, head);
            state.cursor = (row, col);
            state.clamp();
        }
        Some(Hit::Head(h)) => select_head(state, h),
        None => {}
    }
}

/// Largest zoom: the longest side of the n x n map still spans 4 cells.
fn max_zoom(state: &State) -> usize {
    let n = state
        .pipeline
        .shape
        .n_q
        .max(state.pipeline.shape.n_k)
        .max(1);
    (n / 4)
        .max(1)
        .next_power_of_two()
        .min(n.next_power_of_two())
}

pub(super) fn zoom(state: &mut State, out: bool) {
    if !state.zoomable() {
        state.set_status(
            StatusKind::Info,
            format!(
                "zoom is for long texts ({} tokens or more) and real models",
                crate::tui::context::ZOOM_TOKENS
            ),
        );
        return;
    }
    let p = state.zoom.per_cell;
    state.zoom.per_cell = if out {
        (p * 2).min(max_zoom(state))
    } else {
        (p / 2).max(1)
    };
    let p = state.zoom.per_cell;
    let text = if p == 1 {
        "zoom: one entry per cell".to_string()
    } else {
        format!(
            "zoom: a cell is the {} of {p}x{p} entries (b: mean/max)",
            state.zoom.pool.name()
        )
    };
    state.set_status(StatusKind::Info, text);
}
