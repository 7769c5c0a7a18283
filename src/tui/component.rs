//! The view trait: what the app needs from one screen of it, and the answer of a mouse
//! hit-test. Views implement [`View`]; the app (`update`, `render`, `layout`, `keymap`)
//! composes them through the registry in [`views`](super::views). A view sees only the
//! [`Context`] (the data, the selection, the look and its own slot in
//! [`Context::views`]), never the app's state, update or render.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;

use crate::engine::pipeline::{Stage, StageId};
use crate::tui::action::Action;
use crate::tui::context::Context;
use crate::tui::keys::Binding;
use crate::tui::view_kind::ViewKind;

/// What a click landed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hit {
    /// A cell of matrix `sub` of the current stage.
    Cell {
        sub: usize,
        row: usize,
        col: usize,
    },
    /// A cell of head `head`'s matrix (heads view).
    HeadCell {
        head: usize,
        row: usize,
        col: usize,
    },
    Stage(StageId),
    View(ViewKind),
    Head(usize),
}

/// One screen of the app (a component). Its own data lives in its slot of
/// `Context::views`, written only by its `refresh` and `update`; anything numeric comes
/// from the engine.
pub trait View: Sync {
    fn kind(&self) -> ViewKind;

    /// Can this view show the data at all? Views that only make sense on a real model
    /// say no for lessons and files; the tabs and Tab skip them, and opening one says
    /// why ([`View::unavailable`]).
    fn available(&self, _ctx: &Context) -> bool {
        true
    }

    /// Why the view cannot open here, for the status line.
    fn unavailable(&self) -> &'static str {
        "this view cannot show these data"
    }

    /// Keys only this view handles, with their help text and hints. The app looks a key
    /// up here before its global table, and builds the help overlay and the hint bar from
    /// the same entries, so they cannot drift apart.
    fn commands(&self) -> &'static [Binding] {
        &[]
    }

    /// Handle an action addressed to this view: its own commands
    /// (`Action::ViewCommand`, `Action::Flash`), time passing (`Action::Tick`, sent to
    /// every view) and reports of work it started (`Action::Measurement`). Pure, like the
    /// app's `update`.
    fn update(&self, _ctx: &mut Context, _action: Action) {}

    /// Prepare derived data after the view opens or the pipeline, head or script step
    /// changes.
    fn refresh(&self, _ctx: &mut Context) {}

    /// Positions a scripted step's `animate` plays through, in the view's own order (the
    /// flash view's tiles in loop order, the decode view's decoding steps); 0: none.
    fn frames(&self, _ctx: &Context) -> usize {
        0
    }

    /// Show position `k` (from 0) of [`View::frames`].
    fn show_frame(&self, _ctx: &mut Context, _k: usize) {}

    /// Does Shift+Left/Right stop at this stage in this view?
    fn steps_stage(&self, _stage: &Stage) -> bool {
        false
    }

    /// Rows and columns the cell cursor moves over.
    fn grid(&self, ctx: &Context) -> (usize, usize) {
        ctx.focused().map_or((0, 0), |m| m.data.dim())
    }

    /// Does the view draw its matrices at the app's zoom (`Context::zoom`)?
    fn zooms(&self) -> bool {
        false
    }

    /// True if the header shows the stage breadcrumb for this view.
    fn shows_stages(&self) -> bool {
        false
    }

    /// The header line under the tabs when there is no breadcrumb.
    fn subtitle(&self, _ctx: &Context) -> String {
        String::new()
    }

    /// What computed the numbers on screen, when it is not the f64 reference pipeline
    /// alone (the header's right end).
    fn numbers(&self, _ctx: &Context) -> Option<String> {
        None
    }

    /// Draw the view into `area` (the body between the header and the narration).
    fn render(&self, ctx: &Context, area: Rect, buf: &mut Buffer);

    /// What is under screen position (x, y) of the view's `area`.
    fn hit_test(&self, _ctx: &Context, _area: Rect, _x: u16, _y: u16) -> Option<Hit> {
        None
    }
}
