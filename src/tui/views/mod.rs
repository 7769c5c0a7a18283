//! The views of the app, one module each, and the registry Tab cycles through.
//!
//! Adding a view: write a module with a unit struct implementing [`View`] and add one
//! line to [`VIEWS`]. Tab, the header's tabs, scripts (`view = "..."`) and the frame
//! benchmark pick it up from there; its own keys (from [`View::bindings`]) appear in the
//! help and the hint bar while it is open.

mod decode;
pub mod flash;
mod heads;
mod inspector;
pub(crate) mod panel;
mod pipeline;
mod position;
pub mod scaling;
mod variants;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;

use crate::engine::pipeline::Stage;
use crate::tui::ViewKind;
use crate::tui::keymap::Binding;
use crate::tui::render::Hit;
use crate::tui::state::State;

pub use decode::DecodeLab;
pub use position::PositionLab;
pub use variants::{Mode as VariantMode, VariantsLab};

/// One screen of the app. Views read the state (and so the engine's pipeline); the
/// only state they change is their own derived data, in `refresh` and `command`.
pub trait View: Sync {
    fn kind(&self) -> ViewKind;

    /// Keys only this view handles (`Action::ViewCommand(id)`).
    fn bindings(&self) -> &'static [Binding] {
        &[]
    }

    /// Handle one of this view's own commands.
    fn command(&self, _state: &mut State, _id: u8) {}

    /// Prepare derived data after the view opens or the pipeline changes. Anything
    /// numeric must come from the engine (e.g. extra pipelines built with it).
    fn refresh(&self, _state: &mut State) {}

    /// Does Shift+Left/Right stop at this stage in this view?
    fn steps_stage(&self, _stage: &Stage) -> bool {
        false
    }

    /// Rows and columns the cell cursor moves over.
    fn grid(&self, state: &State) -> (usize, usize) {
        state.focused().map_or((0, 0), |m| m.data.dim())
    }

    /// True if the header shows the stage breadcrumb for this view.
    fn shows_stages(&self) -> bool {
        false
    }

    /// The header line under the tabs when there is no breadcrumb.
    fn subtitle(&self, _state: &State) -> String {
        String::new()
    }

    /// What computed the numbers on screen, when it is not the f64 reference pipeline
    /// alone (the header's right end).
    fn numbers(&self, _state: &State) -> Option<String> {
        None
    }

    fn render(&self, state: &State, area: Rect, buf: &mut Buffer);

    /// What is under screen position (x, y) of the view's `area`.
    fn hit_test(&self, _state: &State, _area: Rect, _x: u16, _y: u16) -> Option<Hit> {
        None
    }
}

/// Every view this build has, in Tab order.
pub static VIEWS: &[&dyn View] = &[
    &pipeline::PipelineView,
    &heads::HeadsView,
    &position::PositionView,
    &flash::FlashView,
    &decode::DecodeView,
    &variants::VariantsView,
    &scaling::ScalingView,
];

pub fn find(kind: ViewKind) -> Option<&'static dyn View> {
    VIEWS.iter().copied().find(|v| v.kind() == kind)
}

/// The view on screen (the first one if the state names one this build lacks).
pub fn current(state: &State) -> &'static dyn View {
    find(state.view).unwrap_or(VIEWS[0])
}
