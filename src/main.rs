//! attnviz binary: parse arguments, dispatch, map errors to exit codes.

use attnviz::engine::scaling::heap::CountingAlloc;
use clap::Parser;

/// Counts live and peak heap bytes so the scaling view reports measured memory (see
/// `engine::scaling::heap`); otherwise the system allocator.
#[global_allocator]
static HEAP: CountingAlloc = CountingAlloc;

fn main() {
    keep_freed_memory();
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

/// glibc returns a freed block of more than 128 KB (raised adaptively up to 32 MB) to the
/// system, and worker threads' arenas shrink whenever their free top passes a threshold,
/// so every kernel call's packed tiles and gradient buffers came back as fresh pages: in
/// the backward at N = 1024 one call took about 4,800 page faults. Fixed thresholds keep
/// blocks of up to 32 MB in the heap for the next call (PyTorch keeps a caching
/// allocator for the same reason). Peak memory is unchanged; what is freed stays mapped.
fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator tuning; it runs before any other thread.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 512 << 20);
    }
}
