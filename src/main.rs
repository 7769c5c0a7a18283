//! attnviz binary: parse arguments, dispatch, map errors to exit codes.

use clap::Parser;

fn main() {
    let cli = attnviz::cli::Cli::parse();
    let code = match attnviz::commands::dispatch(cli) {
        Ok(()) => 0,
        Err(err) => {
            eprintln!("attnviz: {err}");
            err.exit_code()
        }
    };
    std::process::exit(code);
}
