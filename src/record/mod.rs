//! Headless playback: asciicast v2 recording and SVG/text stills.
//!
//! - [`asciicast`]: the cast file, with times from a virtual clock;
//! - [`ansi`]: a frame as the terminal output that draws it;
//! - [`still`]: a frame as SVG or text;
//! - [`palette`]: terminal colours as RGB.

pub mod ansi;
pub mod asciicast;
pub mod palette;
pub mod still;

use crate::cli::{PlayArgs, SnapshotArgs};

pub fn play(_args: &PlayArgs) -> crate::Result<()> {
    Err(crate::commands::not_yet("play"))
}

pub fn snapshot(_args: &SnapshotArgs) -> crate::Result<()> {
    Err(crate::commands::not_yet("snapshot"))
}
