//! `attnviz generate MODEL --prompt TEXT`: text generation with a KV cache, the new text
//! streamed to stdout as each token is chosen; `--json` prints one object at the end.
//! `--chat TEXT` instead wraps TEXT in the model's chat template and stops at the end of
//! the model's turn.

use std::io::Write as _;

use serde::Serialize;

use super::model_input::{TokenJson, to_json, tokens_json};
use crate::cli::GenerateArgs;
use crate::error::{Error, Result};
use crate::model::chat::chat_prompt;
use crate::model::forward::ForwardOptions;
use crate::model::generate::{GenerateOptions, NON_FINITE_LOGITS, generate};
use crate::model::load;
use crate::model::load::{non_finite_culprit, non_finite_error};
use crate::output;

#[derive(Serialize)]
struct GenerateJson {
    prompt_tokens: Vec<TokenJson>,
    new_tokens: Vec<TokenJson>,
    text: String,
    ms_per_token: f64,
}

pub fn run(args: &GenerateArgs) -> Result<()> {
    // Flags first, so a bad value is refused before the model is read.
    if !(args.temperature.is_finite() && args.temperature >= 0.0) {
        return Err(Error::usage(format!(
            "--temperature {} must be a number >= 0 (0 is greedy)",
            args.temperature
        )));
    }
    if args.threads == Some(0) {
        return Err(Error::usage("--threads must be at least 1"));
    }
    // Every weight is read once per new token: on huge pages that stream runs faster
    // (model::resident).
    let m = load::load_with(&args.model, load::Residency::HugePages)?;
    if !m.config.causal {
        return Err(Error::usage(format!(
            "{} is an encoder ({}, bidirectional attention, no LM head): it cannot generate text; use `attnviz model run` or a causal model (llama, gpt2)",
            m.name,
            m.config.arch.name()
        )));
    }
    let (prompt, stop) = match (&args.chat, &args.prompt) {
        (Some(message), _) => {
            let c = chat_prompt(&m.tokenizer, message)?;
            (c.ids, c.stop)
        }
        (None, Some(text)) => (
            m.tokenizer.encode(text)?,
            m.tokenizer.eos_id().into_iter().collect(),
        ),
        (None, None) => return Err(Error::usage("give --prompt TEXT or --chat TEXT")),
    };
    if prompt.is_empty() {
        return Err(Error::usage(
            "--prompt gives no tokens; give a word or two, e.g. --prompt \"Once upon a time\"",
        ));
    }
    let opts = GenerateOptions {
        max_tokens: args.max_tokens,
        temperature: args.temperature,
        top_k: args.top_k,
        seed: args.seed,
        stop: stop.clone(),
        report_top: 1,
        forward: ForwardOptions {
            threads: args.threads,
            keep_attention: false,
            ..ForwardOptions::default()
        },
    };
    // Streaming: decode all new tokens so far and print what was not printed yet, so a
    // character split over byte tokens appears whole once its last byte arrives.
    let mut shown: Vec<u32> = Vec::new();
    let mut printed = String::new();
    let mut io_err = None;
    let stream = !args.json;
    let g = generate(&m.config, &m.weights, &prompt, &opts, |step| {
        if stop.contains(&step.token) {
            return true;
        }
        shown.push(step.token);
        if stream {
            let now = m.tokenizer.decode(&shown);
            if let Some(new) = now.strip_prefix(printed.as_str())
                && !new.ends_with('\u{fffd}')
            {
                let mut out = std::io::stdout().lock();
                if let Err(e) = out.write_all(new.as_bytes()).and_then(|()| out.flush()) {
                    io_err = Some(e);
                    return false;
                }
                printed = now;
            }
        }
        true
    })
    .map_err(|e| match e {
        // Weights kept quantized are checked for NaN only when a run goes wrong.
        Error::Usage(msg) if msg == NON_FINITE_LOGITS => non_finite_error(&m, &msg),
        Error::Usage(msg) if msg.starts_with("a layer's attention") => {
            non_finite_culprit(&m).unwrap_or_else(|| Error::file(&m.path, msg))
        }
        other => other,
    })?;
    if let Some(e) = io_err {
        return Err(output::stdout_error(e));
    }
    let new: Vec<u32> = g
        .tokens()
        .into_iter()
        .filter(|t| !stop.contains(t))
        .collect();
    let text = m.tokenizer.decode(&new);
    if new.is_empty()
        && let Some(&end) = g.tokens().first()
        && stop.contains(&end)
    {
        // Otherwise the person would see nothing at all and not know why.
        eprintln!(
            "note: generation stopped at once: the model's first new token was its end-of-turn token {:?} (#{end}), so there is no new text",
            m.tokenizer.piece(end)
        );
    }
    if args.json {
        let res = GenerateJson {
            prompt_tokens: tokens_json(&m, &prompt),
            new_tokens: tokens_json(&m, &new),
            text,
            ms_per_token: g.ms_per_token(),
        };
        return output::print(&to_json(&res)?);
    }
    // What streaming held back (an unfinished character) and the closing newline.
    output::println(&text[common_prefix(&printed, &text)..])
}

/// Bytes of the longest common prefix of `a` and `b` that ends on a character boundary.
fn common_prefix(a: &str, b: &str) -> usize {
    a.char_indices()
        .zip(b.chars())
        .find(|((_, x), y)| x != y)
        .map_or(a.len().min(b.len()), |((i, _), _)| i)
}
