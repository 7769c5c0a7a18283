//! `attnviz lens MODEL --text T [--top K]`: the logit lens (DESIGN.md "Contributions,
//! attribution and the logit lens").

use std::fmt::Write as _;

use serde::Serialize;

use super::model_input::{TokenJson, input_ids, to_json, tokens_json};
use super::token_arg::token_id;
use crate::cli::LensArgs;
use crate::error::{Error, Result};
use crate::model::lens::logit_lens;
use crate::model::load;

/// Most tokens a cell lists.
const MAX_TOP: usize = 100;

#[derive(Serialize)]
struct TopJson {
    id: u32,
    text: String,
    prob: f64,
}

#[derive(Serialize)]
struct TargetJson {
    rank: usize,
    prob: f64,
}

#[derive(Serialize)]
struct PosJson {
    pos: usize,
    top: Vec<TopJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    target: Option<TargetJson>,
}

#[derive(Serialize)]
struct LayerJson {
    layer: usize,
    positions: Vec<PosJson>,
}

#[derive(Serialize)]
struct LensJson {
    tokens: Vec<TokenJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    target: Option<TokenJson>,
    layers: Vec<LayerJson>,
}

pub fn run(args: &LensArgs) -> Result<()> {
    if args.top == 0 || args.top > MAX_TOP {
        return Err(Error::usage(format!(
            "--top {}: give 1..{MAX_TOP} tokens a cell",
            args.top
        )));
    }
    let m = load(&args.model)?;
    let ids = input_ids(&m, args.input.text.as_deref(), args.input.ids.as_deref())?;
    let target = args
        .target
        .as_deref()
        .map(|t| token_id(&m, "--target", t))
        .transpose()?;
    let cells = logit_lens(&m.config, &m.weights, &ids, args.top, target, args.threads)?;
    let res = LensJson {
        tokens: tokens_json(&m, &ids),
        target: target.map(|id| TokenJson {
            id,
            text: m.tokenizer.piece(id),
        }),
        layers: cells
            .into_iter()
            .enumerate()
            .map(|(layer, row)| LayerJson {
                layer,
                positions: row
                    .into_iter()
                    .enumerate()
                    .map(|(pos, c)| PosJson {
                        pos,
                        top: c
                            .top
                            .iter()
                            .map(|t| TopJson {
                                id: t.id,
                                text: m.tokenizer.piece(t.id),
                                prob: t.prob,
                            })
                            .collect(),
                        target: c.target.map(|(rank, prob)| TargetJson { rank, prob }),
                    })
                    .collect(),
            })
            .collect(),
    };
    if args.json {
        return crate::output::print(&to_json(&res)?);
    }
    crate::output::print(&table(&res))
}

fn table(r: &LensJson) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "the logit lens: each layer's residual stream through the final norm and the unembedding; top token and its probability per position (layer 0: the embeddings; the last: the model's output)"
    );
    let head: Vec<String> = r
        .tokens
        .iter()
        .map(|t| format!("{:>14}", clip(&t.text)))
        .collect();
    let _ = writeln!(o, "\nLAYER {}", head.join(" "));
    for l in &r.layers {
        let cells: Vec<String> = l
            .positions
            .iter()
            .map(|p| {
                let t = &p.top[0];
                format!("{:>9} {:.2}", clip(&t.text), t.prob)
            })
            .collect();
        let _ = writeln!(o, "{:>5} {}", l.layer, cells.join(" "));
    }
    if let Some(t) = &r.target {
        let _ = writeln!(o, "\nrank of {:?} (0 = top) at the last position:", t.text);
        for l in &r.layers {
            if let Some(tg) = l.positions.last().and_then(|p| p.target.as_ref()) {
                let _ = writeln!(
                    o,
                    "  layer {:>2}: rank {:>6}  p {:.4}",
                    l.layer, tg.rank, tg.prob
                );
            }
        }
    }
    o
}

/// A token's text quoted and cut to fit a column.
fn clip(s: &str) -> String {
    let q = format!("{s:?}");
    if q.chars().count() > 9 {
        q.chars().take(8).collect::<String>() + "…"
    } else {
        q
    }
}
