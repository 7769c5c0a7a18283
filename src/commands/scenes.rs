//! `attnviz scenes` and `attnviz scene check`.

use std::path::PathBuf;

use crate::cli::ScenesArgs;

pub fn list(_args: &ScenesArgs) -> crate::Result<()> {
    Err(super::not_yet("scenes"))
}

pub fn check(_files: &[PathBuf]) -> crate::Result<()> {
    Err(super::not_yet("scene check"))
}
