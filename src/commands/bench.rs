//! `attnviz bench`.

pub fn run(_args: &crate::cli::BenchArgs) -> crate::Result<()> {
    Err(super::not_yet("bench"))
}
