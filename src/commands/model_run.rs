//! `attnviz model run MODEL (--text T | --ids ..)`: one forward pass of a real model, its
//! tokens, next-token predictions, per-token loss, attention rollout and (with
//! `--attn-out`) every layer's attention weights as one .npy.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use super::model_input::{
    TokenJson, forward_options, input_ids, refuse_model_output, to_json, tokens_json,
};
use crate::cli::ModelRunArgs;
use crate::error::{Error, Result};
use crate::model::Site;
use crate::model::contrib::{contributions, value_norms as value_norms_of};
use crate::model::forward::{ForwardOptions, LogitRows, check_weight_budget, forward_hooked};
use crate::model::load::{non_finite_culprit, non_finite_error};
use crate::model::scores::Rollout;
use crate::model::{load, top_k};
use crate::output::OutFile;

#[derive(Serialize)]
struct TopJson {
    id: u32,
    text: String,
    logit: f32,
    prob: f64,
}

#[derive(Serialize)]
struct Timing {
    load_ms: f64,
    forward_ms: f64,
}

#[derive(Serialize)]
struct RunJson {
    model: String,
    arch: String,
    tokens: Vec<TokenJson>,
    n: usize,
    layers: usize,
    heads: usize,
    kv_heads: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_next: Option<Vec<TopJson>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    token_loss: Option<Vec<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    loss: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rollout: Option<Vec<Vec<f64>>>,
    /// Per layer, [heads][n][n] contributions (`--contrib`).
    #[serde(skip_serializing_if = "Option::is_none")]
    contrib: Option<Vec<Vec<Vec<Vec<f32>>>>>,
    timing: Timing,
}

/// Longest text `--rollout` multiplies out (n^3 per layer: 1,024 tokens on 30 layers take
/// seconds, 4,096 would take minutes).
pub const MAX_ROLLOUT_TOKENS: usize = 1024;

/// Largest `--attn-out` file written.
pub const MAX_ATTN_OUT_BYTES: u64 = 8 << 30;

pub fn run(args: &ModelRunArgs) -> Result<()> {
    let t = Instant::now();
    let m = load(&args.model)?;
    let load_ms = t.elapsed().as_secs_f64() * 1e3;
    let ids = input_ids(&m, args.input.text.as_deref(), args.input.ids.as_deref())?;
    let cfg = &m.config;
    let n = ids.len();
    let attn_out = match &args.attn_out {
        Some(out) => {
            refuse_model_output("--attn-out", out, &m)?;
            check_weight_budget(cfg, n, "--attn-out")?;
            let shape = [cfg.layers, cfg.heads, n, n];
            let bytes = shape.iter().map(|&x| x as u64).product::<u64>() * 4;
            if bytes > MAX_ATTN_OUT_BYTES {
                return Err(Error::usage(format!(
                    "--attn-out: {n} tokens give a file of {} x {} x {n} x {n} f32 weights ({} MB), over the limit of {} MB; give a shorter text",
                    cfg.layers,
                    cfg.heads,
                    bytes / 1_000_000,
                    MAX_ATTN_OUT_BYTES / 1_000_000
                )));
            }
            let file = OutFile::create(out)?;
            file.write(&crate::attn::npy::f32_header(&shape)?)?;
            Some(file)
        }
        None => None,
    };
    if args.rollout {
        if n > MAX_ROLLOUT_TOKENS {
            return Err(Error::usage(format!(
                "--rollout: the text is {n} tokens; rollout multiplies n x n matrices of every layer and takes at most {MAX_ROLLOUT_TOKENS} tokens"
            )));
        }
        check_weight_budget(cfg, n, "--rollout")?;
    }
    if args.contrib {
        check_weight_budget(cfg, n, "--contrib")?;
    }
    let opts = ForwardOptions {
        keep_attention: attn_out.is_some() || args.rollout || args.contrib,
        logits: LogitRows::LastAndLoss,
        ..forward_options(&args.forward)
    };
    let mut rollout = args.rollout.then(|| Rollout::new(n));
    let t = Instant::now();
    let value_norms = std::cell::RefCell::new(Vec::new());
    let mut contrib = args.contrib.then(Vec::new);
    let mut hook = |l: usize, site: Site, a: &mut [f32]| -> Result<()> {
        if args.contrib && site == Site::Values {
            *value_norms.borrow_mut() = value_norms_of(cfg, &m.weights.layers[l], a, n);
        }
        Ok(())
    };
    let out = forward_hooked(
        cfg,
        &m.weights,
        &ids,
        &opts,
        |_, attn| {
            if let Some(c) = contrib.as_mut() {
                let layer = contributions(attn, &value_norms.borrow(), cfg.heads, n);
                c.push(
                    layer
                        .chunks(n * n)
                        .map(|h| h.chunks(n).map(<[f32]>::to_vec).collect())
                        .collect(),
                );
            }
            if let Some(r) = rollout.as_mut() {
                r.push_layer(attn, cfg.heads);
            }
            if let Some(file) = &attn_out {
                let bytes: Vec<u8> = attn.iter().flat_map(|x| x.to_le_bytes()).collect();
                file.write(&bytes)?;
            }
            Ok(())
        },
        &mut hook,
    )
    .map_err(|e| match e {
        // Weights kept quantized are checked for NaN only when a run goes wrong (a scan at
        // every load would cost more than it saves): name the damaged tensor then.
        Error::Usage(msg) if msg.starts_with("a layer's attention") => {
            non_finite_culprit(&m).unwrap_or_else(|| Error::file(&m.path, msg))
        }
        other => other,
    })?;
    if out.logits.iter().flatten().any(|x| !x.is_finite())
        || out.token_loss.iter().flatten().any(|x| !x.is_finite())
    {
        return Err(non_finite_error(&m, "the logits"));
    }
    let forward_ms = t.elapsed().as_secs_f64() * 1e3;
    if let Some(file) = attn_out {
        file.commit()?;
    }

    let (top_next, losses) = match (&out.logits, out.token_loss) {
        (Some(logits), losses) if cfg.causal => {
            let top: Vec<TopJson> = top_k(logits, args.top_k)
                .into_iter()
                .map(|t| TopJson {
                    id: t.id,
                    text: m.tokenizer.piece(t.id),
                    logit: t.logit,
                    prob: t.prob,
                })
                .collect();
            (Some(top), losses)
        }
        _ => (None, None),
    };
    let loss = losses
        .as_ref()
        .filter(|l| !l.is_empty())
        .map(|l| l.iter().sum::<f64>() / l.len() as f64);
    let rollout = rollout.map(|r| {
        r.finish()
            .chunks(n)
            .map(<[f64]>::to_vec)
            .collect::<Vec<_>>()
    });

    let res = RunJson {
        model: m.name.clone(),
        arch: cfg.arch.name().to_string(),
        tokens: tokens_json(&m, &ids),
        n,
        layers: cfg.layers,
        heads: cfg.heads,
        kv_heads: cfg.kv_heads,
        top_next,
        token_loss: losses,
        loss,
        rollout,
        contrib,
        timing: Timing {
            load_ms,
            forward_ms,
        },
    };
    let text = if args.json {
        to_json(&res)?
    } else {
        table(&res, args.attn_out.as_deref())
    };
    crate::output::print(&text)
}

fn table(r: &RunJson, attn_out: Option<&Path>) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{} ({}, {} layers, {} heads, {} KV heads): {} tokens",
        r.model, r.arch, r.layers, r.heads, r.kv_heads, r.n
    );
    let _ = writeln!(o, "\n  POS  {:>7}  {:<20}  LOSS", "ID", "TOKEN");
    for (i, t) in r.tokens.iter().enumerate() {
        let loss = match &r.token_loss {
            Some(l) if i >= 1 => format!("{:.3}", l[i - 1]),
            _ => "-".to_string(),
        };
        let _ = writeln!(
            o,
            "  {i:>3}  {:>7}  {:<20}  {loss}",
            t.id,
            format!("{:?}", t.text)
        );
    }
    match &r.top_next {
        Some(top) => {
            let _ = writeln!(o, "\nnext token after the last:");
            for t in top {
                let _ = writeln!(
                    o,
                    "  {:>7}  {:<20}  p {:.4}  logit {:.3}",
                    t.id,
                    format!("{:?}", t.text),
                    t.prob,
                    t.logit
                );
            }
        }
        None => {
            let _ = writeln!(o, "\nan encoder: no next-token prediction");
        }
    }
    if let Some(l) = r.loss {
        let _ = writeln!(o, "\nloss {l:.4} (mean over {} tokens)", r.n - 1);
    }
    if let Some(ro) = &r.rollout {
        let _ = writeln!(o, "\nrollout, last row (what the last token draws on):");
        let last = &ro[ro.len() - 1];
        let cells: Vec<String> = last.iter().map(|v| format!("{v:.3}")).collect();
        let _ = writeln!(o, "  {}", cells.join(" "));
    }
    if let Some(p) = attn_out {
        let _ = writeln!(
            o,
            "\nwrote attention [{}, {}, {}, {}] f32 to {}",
            r.layers,
            r.heads,
            r.n,
            r.n,
            p.display()
        );
    }
    let _ = writeln!(
        o,
        "\nload {:.0} ms, forward {:.0} ms",
        r.timing.load_ms, r.timing.forward_ms
    );
    o
}
