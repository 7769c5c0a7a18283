//! `attnviz trace`.

pub fn run(_args: &crate::cli::TraceArgs) -> crate::Result<()> {
    Err(super::not_yet("trace"))
}
