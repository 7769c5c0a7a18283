//! `attnviz models` (the real models found) and `attnviz model info MODEL`.

use std::fmt::Write as _;

use serde::Serialize;

use crate::cli::{ModelInfoArgs, ModelsArgs};
use crate::error::{Error, Result};
use crate::model::ModelInfo;
use crate::model::config::ModelConfig;
use crate::model::{find, load};

fn to_json<T: Serialize>(v: &T) -> Result<String> {
    let mut s = serde_json::to_string_pretty(v)
        .map_err(|e| Error::Internal(format!("cannot write JSON: {e}")))?;
    s.push('\n');
    Ok(s)
}

pub fn list(args: &ModelsArgs) -> Result<()> {
    let mut infos = Vec::new();
    for f in find::discover() {
        match load::inspect_found(&f) {
            Ok(i) => infos.push(i),
            // One unreadable file does not hide the others.
            Err(e) => eprintln!("skipped: {e}"),
        }
    }
    let out = if args.json {
        to_json(&infos)?
    } else {
        table(&infos)
    };
    print!("{out}");
    Ok(())
}

/// Millions of parameters, megabytes.
fn millions(n: u64) -> String {
    format!("{:.1}M", n as f64 / 1e6)
}

fn table(infos: &[ModelInfo]) -> String {
    let mut out = String::new();
    if infos.is_empty() {
        let roots: Vec<String> = find::roots()
            .iter()
            .map(|(r, _)| r.display().to_string())
            .collect();
        let _ = writeln!(out, "No models found. Searched: {}", roots.join(", "));
        let _ = writeln!(
            out,
            "Put .gguf files or Hugging Face folders in one of them, or set ATTNVIZ_MODELS=DIR:DIR."
        );
        return out;
    }
    let name_w = infos.iter().map(|i| i.name.len()).max().unwrap_or(4).max(4);
    let _ = writeln!(
        out,
        "{:<name_w$}  {:<4}  {:<5}  {:>6}  {:>5}  {:>3}  {:>7}  {:>6}  {:>6}  {:>7}  {:>9}  {:>8}  {:>8}  PATH",
        "NAME",
        "FMT",
        "ARCH",
        "LAYERS",
        "HEADS",
        "KV",
        "D_MODEL",
        "D_HEAD",
        "VOCAB",
        "CONTEXT",
        "ROPE_BASE",
        "PARAMS",
        "FILE_MB",
    );
    for i in infos {
        let rope = i
            .rope_base
            .map_or_else(|| "-".to_string(), |b| format!("{b}"));
        let _ = writeln!(
            out,
            "{:<name_w$}  {:<4}  {:<5}  {:>6}  {:>5}  {:>3}  {:>7}  {:>6}  {:>6}  {:>7}  {:>9}  {:>8}  {:>8.1}  {}",
            i.name,
            i.format.name(),
            i.arch,
            i.layers,
            i.heads,
            i.kv_heads,
            i.d_model,
            i.d_head,
            i.vocab,
            i.context,
            rope,
            millions(i.params),
            i.file_bytes as f64 / 1e6,
            i.path.display(),
        );
    }
    out
}

#[derive(Serialize)]
struct Special {
    text: String,
    id: u32,
}

#[derive(Serialize)]
struct Info<'a> {
    #[serde(flatten)]
    info: &'a ModelInfo,
    tokenizer: &'a str,
    tokenizer_vocab: usize,
    bos_id: Option<u32>,
    eos_id: Option<u32>,
    special_tokens: Vec<Special>,
    config: &'a ModelConfig,
}

pub fn info(args: &ModelInfoArgs) -> Result<()> {
    let f = find::resolve(&args.model)?;
    let info = load::inspect_found(&f)?;
    let tok = load::tokenizer(&f)?;
    let specials: Vec<Special> = tok
        .special_tokens()
        .into_iter()
        .map(|(text, id)| Special { text, id })
        .collect();
    if args.json {
        print!(
            "{}",
            to_json(&Info {
                info: &info,
                tokenizer: tok.kind(),
                tokenizer_vocab: tok.vocab_size(),
                bos_id: tok.bos_id(),
                eos_id: tok.eos_id(),
                special_tokens: specials,
                config: &info.config,
            })?
        );
        return Ok(());
    }
    let c = &info.config;
    let mut out = String::new();
    let _ = writeln!(out, "name        {}", info.name);
    let _ = writeln!(out, "path        {}", info.path.display());
    let _ = writeln!(out, "format      {}", info.format.name());
    let _ = writeln!(out, "arch        {}", info.arch);
    let _ = writeln!(
        out,
        "shape       {} layers, {} heads, {} KV heads, d_model {}, d_head {}, d_ff {}",
        c.layers, c.heads, c.kv_heads, c.d_model, c.d_head, c.d_ff
    );
    let _ = writeln!(out, "vocab       {}", info.vocab);
    let _ = writeln!(out, "context     {}", info.context);
    let pos = match info.rope_base {
        Some(b) => format!("RoPE, base {b}"),
        None => "learned absolute".to_string(),
    };
    let pos = match (c.details.rope_dims, c.details.local_rope_base) {
        (Some(d), _) if info.rope_base.is_some() => format!("{pos}, on {d} of {} dims", c.d_head),
        (_, Some(b)) if info.rope_base.is_some() => format!("{pos} (sliding layers {b})"),
        _ => pos,
    };
    let pos = if c.details.rope_divisors.is_empty() {
        pos
    } else {
        format!("{pos}, scaled frequencies")
    };
    let _ = writeln!(out, "positions   {pos}");
    let _ = writeln!(out, "attention   {}", attention_runs(c));
    let mut extras = Vec::new();
    if let Some(s) = c.details.attn_scale {
        extras.push(format!("score scale {s:.4}"));
    }
    if let Some(cap) = c.details.attn_softcap {
        extras.push(format!("scores capped at {cap}"));
    }
    if let Some(cap) = c.details.final_softcap {
        extras.push(format!("logits capped at {cap}"));
    }
    if let Some(s) = c.details.embed_scale {
        extras.push(format!("embeddings x {s:.2}"));
    }
    if c.details.parallel_residual {
        extras.push("attention and MLP in parallel".into());
    }
    if !extras.is_empty() {
        let _ = writeln!(out, "also        {}", extras.join(", "));
    }
    let _ = writeln!(
        out,
        "blocks      {:?}-norm {:?}Norm (eps {:.1e}), {:?}, {}",
        c.norm_place,
        c.norm,
        c.norm_eps,
        c.act,
        if c.causal { "causal" } else { "bidirectional" }
    );
    let _ = writeln!(
        out,
        "lm head     {}",
        if c.tied_embeddings {
            "tied to the token embeddings"
        } else if c.causal {
            "its own weights"
        } else {
            "none (an encoder)"
        }
    );
    let _ = writeln!(
        out,
        "params      {} ({})",
        info.params,
        millions(info.params)
    );
    let _ = writeln!(out, "file bytes  {}", info.file_bytes);
    let _ = writeln!(
        out,
        "tokenizer   {} ({} tokens), bos {}, eos {}",
        tok.kind(),
        tok.vocab_size(),
        tok.bos_id().map_or("-".into(), |i| i.to_string()),
        tok.eos_id().map_or("-".into(), |i| i.to_string())
    );
    let _ = writeln!(out, "special     {}", special_list(&specials));
    print!("{out}");
    Ok(())
}

/// Layer attention kinds as runs: "global x30", "window:512 x5, global, ...".
fn attention_runs(c: &ModelConfig) -> String {
    let name = |l: usize| match c.window(l) {
        Some(w) => format!("window:{w}"),
        None if c.causal => "causal".to_string(),
        None => "bidirectional".to_string(),
    };
    let mut runs: Vec<(String, usize)> = Vec::new();
    for l in 0..c.layers {
        let n = name(l);
        match runs.last_mut() {
            Some((last, k)) if *last == n => *k += 1,
            _ => runs.push((n, 1)),
        }
    }
    let all_same = runs.len() == 1;
    let text: Vec<String> = runs
        .iter()
        .take(12)
        .map(|(n, k)| {
            if *k > 1 {
                format!("{n} x{k}")
            } else {
                n.clone()
            }
        })
        .collect();
    let more = if runs.len() > 12 { ", ..." } else { "" };
    if all_same {
        format!("{} on every layer", runs[0].0)
    } else {
        format!("{}{more} (layer 0 first)", text.join(", "))
    }
}

/// The special tokens, placeholder runs (`<unused0>`..) folded, at most 24 shown.
fn special_list(specials: &[Special]) -> String {
    const SHOWN: usize = 24;
    let placeholder = |t: &str| t.starts_with("<unused") || t.starts_with("<|reserved");
    let mut items: Vec<String> = Vec::new();
    let mut held = 0usize;
    for s in specials {
        if placeholder(&s.text) {
            held += 1;
            continue;
        }
        items.push(format!("{} {}", s.id, s.text));
    }
    let total = items.len();
    let mut text = items.into_iter().take(SHOWN).collect::<Vec<_>>().join(", ");
    if total > SHOWN {
        text.push_str(&format!(", ... ({} more)", total - SHOWN));
    }
    if held > 0 {
        text.push_str(&format!(" and {held} unused placeholders"));
    }
    text
}
