//! The app: the pure update, key tables, views and their snapshots, real models in the views,
//! and end-to-end runs in a pseudo-terminal.

#[path = "../support/mod.rs"]
mod support;

mod busy;
mod cli;
mod e2e;
mod lens_view;
mod model;
mod model_contrib;
mod model_views;
mod model_writers;
mod patch_view;
mod real_decode_position;
mod screens;
mod soak;
mod train;
mod update;
mod views_decode;
mod views_variants;
