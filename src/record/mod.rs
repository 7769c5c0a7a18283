//! Headless playback: asciicast v2 recording and SVG/text stills.

use crate::cli::{PlayArgs, SnapshotArgs};

pub fn play(_args: &PlayArgs) -> crate::Result<()> {
    Err(crate::commands::not_yet("play"))
}

pub fn snapshot(_args: &SnapshotArgs) -> crate::Result<()> {
    Err(crate::commands::not_yet("snapshot"))
}
