//! `attnviz attribute MODEL --text T --target TOKEN [--foil TOKEN] [--pos P]`: direct
//! logit attribution (DESIGN.md "Contributions, attribution and the logit lens").

use std::fmt::Write as _;

use serde::Serialize;

use super::model_input::{TokenJson, input_ids, to_json, tokens_json};
use super::token_arg::token_id;
use crate::cli::AttributeArgs;
use crate::error::{Error, Result};
use crate::model::attribution::attribute;
use crate::model::load;

#[derive(Serialize)]
struct AttributeJson {
    tokens: Vec<TokenJson>,
    target: TokenJson,
    foil: Option<TokenJson>,
    pos: usize,
    total: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    capped_total: Option<f64>,
    /// The parts added up: a check against `total`.
    sum: f64,
    embed: f64,
    heads: Vec<Vec<f64>>,
    attn_bias: Vec<f64>,
    mlp: Vec<f64>,
    norm_bias: f64,
}

pub fn run(args: &AttributeArgs) -> Result<()> {
    let m = load(&args.model)?;
    let ids = input_ids(&m, args.input.text.as_deref(), args.input.ids.as_deref())?;
    let target = token_id(&m, "--target", &args.target)?;
    let foil = args
        .foil
        .as_deref()
        .map(|f| token_id(&m, "--foil", f))
        .transpose()?;
    let pos = args.pos.unwrap_or(ids.len() - 1);
    let a = attribute(&m.config, &m.weights, &ids, pos, target, foil, args.threads)?;
    if !a.total.is_finite() || !a.sum().is_finite() {
        return Err(Error::usage(format!(
            "{}: the run gave non-finite numbers; the model file is damaged",
            m.name
        )));
    }
    let tok = |id: u32| TokenJson {
        id,
        text: m.tokenizer.piece(id),
    };
    let res = AttributeJson {
        tokens: tokens_json(&m, &ids),
        target: tok(target),
        foil: foil.map(tok),
        pos,
        total: a.total,
        capped_total: a.capped_total,
        sum: a.sum(),
        embed: a.embed,
        heads: a.heads.clone(),
        attn_bias: a.attn_bias.clone(),
        mlp: a.mlp.clone(),
        norm_bias: a.norm_bias,
    };
    if args.json {
        return crate::output::print(&to_json(&res)?);
    }
    crate::output::print(&table(&res))
}

fn table(r: &AttributeJson) -> String {
    let mut o = String::new();
    let what = match &r.foil {
        Some(f) => format!("logit({:?}) - logit({:?})", r.target.text, f.text),
        None => format!("logit({:?})", r.target.text),
    };
    let _ = writeln!(
        o,
        "{what} at position {} ({:?}): {:.4}; the parts add up to {:.4}",
        r.pos, r.tokens[r.pos].text, r.total, r.sum
    );
    let _ = writeln!(
        o,
        "\nembeddings {:+.3}   final norm shift {:+.3}",
        r.embed, r.norm_bias
    );
    let _ = writeln!(o, "\nLAYER      MLP  ATTN_BIAS  HEADS");
    for (l, hs) in r.heads.iter().enumerate() {
        let cells: Vec<String> = hs.iter().map(|v| format!("{v:+7.3}")).collect();
        let _ = writeln!(
            o,
            "{l:>5}  {:+7.3}  {:+9.3}  {}",
            r.mlp[l],
            r.attn_bias[l],
            cells.join(" ")
        );
    }
    let mut top: Vec<(usize, usize, f64)> = r
        .heads
        .iter()
        .enumerate()
        .flat_map(|(l, hs)| hs.iter().enumerate().map(move |(h, &v)| (l, h, v)))
        .collect();
    top.sort_by(|a, b| b.2.abs().total_cmp(&a.2.abs()));
    let _ = writeln!(o, "\nlargest heads (LAYER.HEAD from 0):");
    for (l, h, v) in top.iter().take(5) {
        let _ = writeln!(o, "  {l}.{h}  {v:+.3}");
    }
    o
}
