//! The interactive app: state, actions and `update`, the event loop, one module per view.

pub mod script;
pub mod view_kind;

pub use view_kind::ViewKind;

use crate::cli::{TuiArgs, ViewArgs};

pub fn run(_args: &TuiArgs) -> crate::Result<()> {
    Err(crate::commands::not_yet("tui"))
}

pub fn run_view(_args: &ViewArgs) -> crate::Result<()> {
    Err(crate::commands::not_yet("view"))
}
