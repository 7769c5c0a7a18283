//! The command line: every subcommand's flags, outputs and errors, recordings, the import
//! rules of src/, and the terminal being restored.

#[path = "../support/mod.rs"]
mod support;

mod backward;
mod bench;
mod calc;
mod compute;
mod compute_outputs;
mod doc_commands;
mod imports;
mod limits;
mod numbers;
mod numerics;
mod output;
mod parser_props;
mod record_cast;
mod record_cli;
mod record_formats;
mod record_play_tmux;
mod record_render;
mod terminal_restore;
mod trace;
mod view_inputs;
