//! `attnviz heads MODEL --composition [--layers A,B]`: q, k and v composition scores of
//! every pair of heads in different layers (DESIGN.md "Contributions, attribution and the
//! logit lens"), computed from the weights alone.

use std::fmt::Write as _;

use super::model_input::to_json;
use crate::cli::HeadsArgs;
use crate::error::{Error, Result};
use crate::kernel::default_threads;
use crate::model::composition::composition_scores;
use crate::model::load;

pub fn run(args: &HeadsArgs) -> Result<()> {
    let m = load(&args.model)?;
    let cfg = &m.config;
    let layers: Vec<usize> = match &args.layers {
        Some(ls) => {
            let mut v = ls.clone();
            v.sort_unstable();
            v.dedup();
            if v.len() < 2 {
                return Err(Error::usage(format!(
                    "--layers {}: give at least two different layers (from 0, e.g. --layers 17,18)",
                    ls.iter()
                        .map(|l| l.to_string())
                        .collect::<Vec<_>>()
                        .join(",")
                )));
            }
            v
        }
        None => (0..cfg.layers).collect(),
    };
    let threads = args.threads.unwrap_or_else(default_threads);
    let rows = composition_scores(cfg, &m.weights, &layers, threads)?;
    if args.json {
        return crate::output::print(&to_json(&rows)?);
    }
    let mut sorted = rows.clone();
    sorted.sort_by(|a, b| b.k.max(b.q).max(b.v).total_cmp(&a.k.max(a.q).max(a.v)));
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{}: composition scores of {} pairs of heads (LAYER.HEAD from 0), strongest first (by the largest of q, k, v)",
        m.name,
        rows.len()
    );
    let _ = writeln!(o, "\n  WRITER  READER      Q      K      V");
    for r in sorted.iter().take(40) {
        let _ = writeln!(
            o,
            "  {:>6}  {:>6}  {:.3}  {:.3}  {:.3}",
            format!("{}.{}", r.layer_a, r.head_a),
            format!("{}.{}", r.layer_b, r.head_b),
            r.q,
            r.k,
            r.v
        );
    }
    crate::output::print(&o)
}
