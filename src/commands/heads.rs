//! `attnviz heads MODEL [--text T | --ids ..]`: the head scores of every layer and head
//! (DESIGN.md "Real models"), by default on a seeded repeated random sequence, the
//! standard probe for induction heads (Olsson et al. 2022).

use std::fmt::Write as _;

use serde::Serialize;

use super::model_input::{input_ids, to_json};
use crate::cli::{HeadSort, HeadsArgs};
use crate::error::{Error, Result};
use crate::model::forward::{ForwardOptions, LogitRows, check_weight_budget, forward_with};
use crate::model::load;
use crate::model::load::LoadedModel;
use crate::model::probe::{REPEAT_T, repeated_random};
use crate::model::scores::{HeadScores, head_scores};

#[derive(Debug, Clone, Serialize)]
struct HeadJson {
    layer: usize,
    head: usize,
    kv_head: usize,
    #[serde(flatten)]
    scores: HeadScores,
}

fn probe(m: &LoadedModel, args: &HeadsArgs) -> Result<Vec<u32>> {
    if args.text.is_some() || args.ids.is_some() {
        input_ids(m, args.text.as_deref(), args.ids.as_deref())
    } else {
        {
            // A learned position table has no rows past its context (a small model that
            // `attnviz train` wrote); RoPE models take any n. One place is kept for a BOS.
            let t = match m.config.pos {
                crate::model::PosKind::Learned => {
                    REPEAT_T.min(m.config.context.saturating_sub(1) / 2).max(1)
                }
                _ => REPEAT_T,
            };
            repeated_random(&m.tokenizer, m.config.vocab, t, args.seed)
        }
    }
}

fn key(s: &HeadScores, by: HeadSort) -> f64 {
    match by {
        HeadSort::PrevToken => s.prev_token,
        HeadSort::FirstToken => s.first_token,
        HeadSort::Duplicate => s.duplicate,
        HeadSort::Induction => s.induction,
        HeadSort::Entropy => s.entropy,
    }
}

fn sort_name(by: HeadSort) -> &'static str {
    match by {
        HeadSort::PrevToken => "prev_token",
        HeadSort::FirstToken => "first_token",
        HeadSort::Duplicate => "duplicate",
        HeadSort::Induction => "induction",
        HeadSort::Entropy => "entropy",
    }
}

pub fn run(args: &HeadsArgs) -> Result<()> {
    if args.threads == Some(0) {
        return Err(Error::usage("--threads must be at least 1"));
    }
    let m = load(&args.model)?;
    let ids = probe(&m, args)?;
    let cfg = &m.config;
    let opts = ForwardOptions {
        threads: args.threads,
        logits: LogitRows::Last,
        ..ForwardOptions::default()
    };
    let n = ids.len();
    check_weight_budget(cfg, n, "heads")?;
    // The model's own mask: causal rows see i + 1 keys, bidirectional rows all n.
    let causal = cfg.causal;
    let group = cfg.heads / cfg.kv_heads.max(1);
    let mut rows = Vec::with_capacity(cfg.layers * cfg.heads);
    forward_with(cfg, &m.weights, &ids, &opts, |layer, attn| {
        for head in 0..cfg.heads {
            let a = &attn[head * n * n..(head + 1) * n * n];
            let scores = head_scores(a, &ids, |i| if causal { i + 1 } else { n });
            rows.push(HeadJson {
                layer,
                head,
                kv_head: head / group.max(1),
                scores,
            });
        }
        Ok(())
    })
    .map_err(|e| match e {
        // Weights kept quantized are checked for NaN only when a run goes wrong.
        Error::Usage(msg) if msg.starts_with("a layer's attention") => {
            crate::model::load::non_finite_culprit(&m).unwrap_or_else(|| Error::file(&m.path, msg))
        }
        other => other,
    })?;
    if args.json {
        return crate::output::print(&to_json(&rows)?);
    }
    rows.sort_by(|a, b| {
        key(&b.scores, args.sort)
            .total_cmp(&key(&a.scores, args.sort))
            .then((a.layer, a.head).cmp(&(b.layer, b.head)))
    });
    let mut o = String::new();
    let probe = if args.text.is_some() || args.ids.is_some() {
        format!("{n} tokens")
    } else {
        format!(
            "a repeated random sequence ({n} tokens: {} random ids twice, seed {})",
            n / 2,
            args.seed
        )
    };
    let _ = writeln!(
        o,
        "{}: {} layers x {} heads on {probe}; sorted by {}, highest first",
        m.name,
        cfg.layers,
        cfg.heads,
        sort_name(args.sort)
    );
    let _ = writeln!(
        o,
        "\nLAYER  HEAD  KV  PREV_TOKEN  FIRST_TOKEN  DUPLICATE  INDUCTION  ENTROPY"
    );
    for r in &rows {
        let s = &r.scores;
        let _ = writeln!(
            o,
            "{:>5}  {:>4}  {:>2}  {:>10.3}  {:>11.3}  {:>9.3}  {:>9.3}  {:>7.3}",
            r.layer,
            r.head,
            r.kv_head,
            s.prev_token,
            s.first_token,
            s.duplicate,
            s.induction,
            s.entropy
        );
    }
    crate::output::print(&o)
}
