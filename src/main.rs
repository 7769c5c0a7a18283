//! attnviz binary: parse arguments, dispatch, map errors to exit codes.

use attnviz::engine::scaling::heap::CountingAlloc;
use clap::Parser;

/// Counts live and peak heap bytes so the scaling view reports measured memory (see
/// `engine::scaling::heap`); otherwise the system allocator.
#[global_allocator]
static HEAP: CountingAlloc = CountingAlloc;

fn main() {
    attnviz::kernel::keep_freed_memory();
    let cli = attnviz::cli::Cli::parse();
    let code = match attnviz::commands::dispatch(cli) {
        Ok(()) => 0,
        Err(attnviz::Error::StdoutClosed) => 0,
        Err(err) => {
            eprintln!("attnviz: {err}");
            err.exit_code()
        }
    };
    std::process::exit(code);
}
