//! One module per subcommand; each takes its parsed arguments and returns a
//! [`Result`](crate::Result). `main` maps errors to exit codes.

use crate::cli::{Cli, Command, ModelCommand, SceneCommand};
use crate::error::Result;

pub mod attribute;
pub mod bench;
pub mod calc;
pub mod composition;
pub mod compute;
pub mod generate;
pub mod heads;
pub mod lens;
pub mod model_input;
pub mod model_run;
pub mod models;
pub mod patch;
pub mod scenes;
pub mod token_arg;
pub mod trace;
pub mod train;

/// Run the command line.
pub fn dispatch(cli: Cli) -> Result<()> {
    match cli.command {
        None => crate::tui::run(&cli.tui),
        Some(Command::Tui(args)) => crate::tui::run(&args),
        Some(Command::View(args)) => crate::tui::run_view(&args),
        Some(Command::Compute(args)) => compute::run(&args),
        Some(Command::Trace(args)) => trace::run(&args),
        Some(Command::Bench(args)) => bench::run(&args),
        Some(Command::Scenes(args)) => scenes::list(&args),
        Some(Command::Scene(SceneCommand::Check { files })) => scenes::check(&files),
        Some(Command::Play(args)) => crate::record::play(&args),
        Some(Command::Snapshot(args)) => crate::record::snapshot(&args),
        Some(Command::KvCache(args)) => calc::kv_cache(&args),
        Some(Command::Memory(args)) => calc::memory(&args),
        Some(Command::Models(args)) => models::list(&args),
        Some(Command::Model(ModelCommand::Info(args))) => models::info(&args),
        Some(Command::Model(ModelCommand::Run(args))) => model_run::run(&args),
        Some(Command::Generate(args)) => generate::run(&args),
        Some(Command::Heads(args)) if args.composition => composition::run(&args),
        Some(Command::Heads(args)) => heads::run(&args),
        Some(Command::Lens(args)) => lens::run(&args),
        Some(Command::Attribute(args)) => attribute::run(&args),
        Some(Command::Patch(args)) => patch::run(&args),
        Some(Command::Train(args)) => train::run(&args),
    }
}
