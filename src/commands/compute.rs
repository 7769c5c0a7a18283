//! `attnviz compute`.

pub fn run(_args: &crate::cli::ComputeArgs) -> crate::Result<()> {
    Err(super::not_yet("compute"))
}
