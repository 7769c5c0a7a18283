//! The views of the app, one module each, and the registry Tab cycles through.
//!
//! Adding a view: write a module with a unit struct implementing
//! [`View`](crate::tui::component::View) and add one line to [`VIEWS`]. Tab, the
//! header's tabs, scripts (`view = "..."`) and the frame benchmark pick it up from there;
//! its own keys (from `View::commands`) appear in the help and the hint bar while it is
//! open. A view imports the component types (`component`, `context`, `keys`, `action`,
//! `view_kind`), the engine and the widgets; never the app's state, update or render.

pub mod attribution;
mod contrib;
pub(crate) mod decode;
pub mod flash;
mod heads;
mod inspector;
pub mod lens;
pub mod model;
pub(crate) mod panel;
pub mod patch;
mod pipeline;
pub mod position;
pub mod scaling;
pub(crate) mod tokens;
mod tokens_compare;
pub mod train;
mod variants;

use crate::tui::component::View;
use crate::tui::context::Context;
use crate::tui::view_kind::ViewKind;

pub use decode::{DecodeLab, RealDecodeLab, session_key};
pub use position::PositionLab;
pub use variants::{Mode as VariantMode, VariantsLab};

/// Every view this build has, in Tab order.
pub static VIEWS: &[&dyn View] = &[
    &pipeline::PipelineView,
    &heads::HeadsView,
    &model::ModelView,
    &tokens::TokensView,
    &lens::LensView,
    &attribution::AttributionView,
    &patch::PatchView,
    &position::PositionView,
    &flash::FlashView,
    &decode::DecodeView,
    &variants::VariantsView,
    &scaling::ScalingView,
    &train::TrainView,
];

/// The view of this kind, if this build has it (scene files name views in their own
/// terms; anything that converts into a [`ViewKind`] is accepted).
pub fn find(kind: impl Into<ViewKind>) -> Option<&'static dyn View> {
    let kind = kind.into();
    VIEWS.iter().copied().find(|v| v.kind() == kind)
}

/// The views that can show the data in `ctx`, in Tab order (the header's tabs).
pub fn shown(ctx: &Context) -> Vec<&'static dyn View> {
    VIEWS.iter().copied().filter(|v| v.available(ctx)).collect()
}

/// The view on screen (the first one if the state names one this build lacks).
pub fn current(ctx: &Context) -> &'static dyn View {
    find(ctx.view).unwrap_or(VIEWS[0])
}
