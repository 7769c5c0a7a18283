//! Text generation with a KV cache: the prompt in one pass (prefill), then one token at a
//! time, each step attending over the cache through the kernel (one query row, bottom-right
//! aligned). Greedy at temperature 0; otherwise seeded sampling with temperature and top-k.

use std::time::Instant;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::engine::config::MaskKind;
use crate::error::{Error, Result};
use crate::model::block::{Buffers, Keys, LayerOpts, block_forward};
use crate::model::cache::KvCache;
use crate::model::config::ModelConfig;
use crate::model::forward::{ForwardOptions, Prepared, embed, final_hidden, lm_head};
use crate::model::predict::{TopToken, argmax, log_sum_exp, top_k};
use crate::model::weights::Weights;

/// The error of a step whose logits are NaN or infinite (a token picked from them would
/// be arbitrary); callers that know the model's file name the damaged tensor instead.
pub const NON_FINITE_LOGITS: &str = "the next-token logits came out NaN or infinite";

/// Bytes of a KV cache (K and V, f32, every layer): 4 GiB holds SmolLM2-135M at 8,192
/// tokens ten times over; past it the machine, not the model, would fail.
const MAX_KV_CACHE_BYTES: u64 = 4 << 30;

/// One pass of a decoding session over new tokens.
#[derive(Debug, Clone)]
pub struct StepOutput {
    /// Logits of the last new token [vocab].
    pub logits: Vec<f32>,
    /// Per layer, the attention weights [heads, n_k] of the last new token over every
    /// cached key (empty when `keep_attention` is off).
    pub attention: Vec<Vec<f32>>,
    /// Keys the last token saw (cache length after the step).
    pub n_k: usize,
    /// Wall time of the pass.
    pub ms: f64,
}

/// A model, its options and a KV cache: feed tokens, get the next-token logits.
pub struct Decoder<'m> {
    cfg: &'m ModelConfig,
    w: &'m Weights,
    prep: Prepared,
    keep_attention: bool,
    cache: KvCache,
    buf: Buffers,
}

impl<'m> Decoder<'m> {
    /// A session with room for `capacity` tokens. The interventions of `opts` apply to
    /// every step (ablation, RoPE base, no positions); the mask must be causal or
    /// `window:W[,S]`, the masks that a token-by-token decode can honour. `keep_attention`
    /// gives each step's attention rows; `trace_layer` and `logits` are not used (a step
    /// returns the last token's logits).
    pub fn new(
        cfg: &'m ModelConfig,
        w: &'m Weights,
        opts: &ForwardOptions,
        capacity: usize,
    ) -> Result<Self> {
        let prep = Prepared::new(cfg, w, opts)?;
        if !cfg.causal {
            return Err(Error::usage(format!(
                "generation needs a causal model; this {} model is bidirectional",
                cfg.arch.name()
            )));
        }
        for m in &prep.masks {
            match m {
                MaskKind::Causal | MaskKind::Window(_) | MaskKind::WindowSinks { .. } => {}
                other => {
                    return Err(Error::usage(format!(
                        "generation takes a causal, window:W or window:W,S mask; '{other}' would let a token see keys that decoding has not produced yet or that change with the length"
                    )));
                }
            }
        }
        let cache_bytes =
            (2 * 4 * cfg.layers * cfg.kv_heads * cfg.d_head) as u128 * capacity as u128;
        if cache_bytes > MAX_KV_CACHE_BYTES as u128 {
            return Err(Error::usage(format!(
                "a KV cache for {capacity} tokens would take {:.1} GiB, past the {} GiB attnviz allows; ask for fewer tokens",
                cache_bytes as f64 / (1u64 << 30) as f64,
                MAX_KV_CACHE_BYTES >> 30
            )));
        }
        if prep.learned_pos && capacity > cfg.context {
            return Err(Error::usage(format!(
                "{capacity} tokens (prompt + new) but the model's learned position table has {} rows; ask for fewer tokens",
                cfg.context
            )));
        }
        Ok(Decoder {
            cfg,
            w,
            prep,
            keep_attention: opts.keep_attention,
            cache: KvCache::new(cfg.layers, cfg.kv_heads, cfg.d_head, capacity),
            buf: Buffers::default(),
        })
    }

    pub fn cache(&self) -> &KvCache {
        &self.cache
    }

    /// Run `ids` at the next positions (the prompt at once, or one token), append their
    /// keys and values to the cache, and return the last token's logits.
    pub fn feed(&mut self, ids: &[u32]) -> Result<StepOutput> {
        let start = Instant::now();
        let cfg = self.cfg;
        let (n, pos0) = (ids.len(), self.cache.len);
        if pos0 + n > self.cache.capacity {
            return Err(Error::usage(format!(
                "the KV cache has room for {} tokens; {pos0} cached + {n} new do not fit",
                self.cache.capacity
            )));
        }
        let mut x = vec![0.0f32; n * cfg.d_model];
        embed(cfg, self.w, ids, pos0, self.prep.learned_pos, &mut x)?;
        let ropes = self.prep.rope_tables(cfg, pos0, n)?;
        let mut weights = vec![Vec::new(); cfg.layers];
        for (l, lw) in self.w.layers.iter().enumerate() {
            let keys = Keys::Cache {
                cache: &mut self.cache.layers[l],
                len: pos0,
                capacity: self.cache.capacity,
                mask: &self.prep.masks[l],
            };
            let ctx = self.prep.ctx(cfg, ropes.as_ref(), l);
            let lo = LayerOpts {
                ablate: &self.prep.ablate[l],
                weights: self.keep_attention.then_some(&mut weights[l]),
                last_row_only: true,
                trace: None,
                hook: None,
            };
            block_forward(&ctx, lw, &mut x, n, keys, &mut self.buf, lo)?;
            // Keep only the last query row of each head [heads, n_k]: a long prompt's
            // [heads, n, n_k] weights of every layer would not all fit in memory (the
            // block computes only that row where it can).
            if n > 1 && weights[l].len() == cfg.heads * n * (pos0 + n) {
                weights[l] = last_rows(&weights[l], n, pos0 + n);
            }
        }
        self.cache.len = pos0 + n;
        let n_k = self.cache.len;
        let last = x.split_off((n - 1) * cfg.d_model);
        let hidden = final_hidden(cfg, self.w, last);
        let logits = lm_head(cfg, self.w, &hidden, 1, self.prep.threads)?.ok_or_else(|| {
            Error::usage(format!(
                "this {} model has no LM head: it cannot predict tokens",
                cfg.arch.name()
            ))
        })?;
        Ok(StepOutput {
            logits,
            attention: weights,
            n_k,
            ms: start.elapsed().as_secs_f64() * 1e3,
        })
    }
}

/// The last query row of each head of weights [heads, n, n_k]: [heads, n_k].
fn last_rows(w: &[f32], n: usize, n_k: usize) -> Vec<f32> {
    w.chunks_exact(n * n_k)
        .flat_map(|head| head[(n - 1) * n_k..].iter().copied())
        .collect()
}

/// How tokens are picked.
#[derive(Debug, Clone)]
pub struct GenerateOptions {
    /// New tokens at most.
    pub max_tokens: usize,
    /// 0 is greedy (argmax); otherwise logits / temperature are sampled.
    pub temperature: f64,
    /// Sample among the k most likely tokens only (None or 0: all).
    pub top_k: Option<usize>,
    pub seed: u64,
    /// Generation ends after producing one of these (end-of-sequence tokens).
    pub stop: Vec<u32>,
    /// How many of the most likely next tokens each step reports.
    pub report_top: usize,
    /// Interventions and threads; `keep_attention` gives each step's attention rows.
    pub forward: ForwardOptions,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        GenerateOptions {
            max_tokens: 32,
            temperature: 0.0,
            top_k: None,
            seed: 0,
            stop: Vec::new(),
            report_top: 5,
            forward: ForwardOptions {
                keep_attention: false,
                ..ForwardOptions::default()
            },
        }
    }
}

/// One generated token and what the decode view shows about the step that produced it.
#[derive(Debug, Clone)]
pub struct Step {
    /// 0 for the first new token (produced by the prefill).
    pub index: usize,
    pub token: u32,
    /// Position the token will take in the sequence.
    pub pos: usize,
    /// Wall time of the pass that produced it (the prefill for the first).
    pub ms: f64,
    /// KV cache bytes (f32) after that pass.
    pub cache_bytes: usize,
    /// The most likely next tokens at this step, with the model's probabilities
    /// (softmax of the raw logits, before temperature and top-k).
    pub top_next: Vec<TopToken>,
    /// Per layer, the attention row [heads, n_k] of the query that predicted this token.
    pub attention: Vec<Vec<f32>>,
}

/// The result of [`generate`].
#[derive(Debug, Clone)]
pub struct Generation {
    pub prompt: Vec<u32>,
    pub steps: Vec<Step>,
    pub prefill_ms: f64,
}

impl Generation {
    pub fn tokens(&self) -> Vec<u32> {
        self.steps.iter().map(|s| s.token).collect()
    }

    /// Mean wall time per new token after the first (the decode steps); the prefill's
    /// time when only one token was made.
    pub fn ms_per_token(&self) -> f64 {
        match self.steps.len() {
            0 => 0.0,
            1 => self.steps[0].ms,
            k => self.steps[1..].iter().map(|s| s.ms).sum::<f64>() / (k - 1) as f64,
        }
    }
}

/// Generate up to `opts.max_tokens` tokens after `prompt`, calling `on_step` with each as
/// soon as it is chosen (for streaming); `on_step` returning false stops generation.
pub fn generate(
    cfg: &ModelConfig,
    w: &Weights,
    prompt: &[u32],
    opts: &GenerateOptions,
    mut on_step: impl FnMut(&Step) -> bool,
) -> Result<Generation> {
    if !(opts.temperature.is_finite() && opts.temperature >= 0.0) {
        return Err(Error::usage(format!(
            "--temperature {} must be a number >= 0 (0 is greedy)",
            opts.temperature
        )));
    }
    if prompt.is_empty() {
        return Err(Error::usage(
            "the prompt has no tokens; give a non-empty --prompt",
        ));
    }
    // Every new token but the last is cached: the cache is sized before anything runs,
    // so a count past the model's context is refused here, not in the allocator.
    let capacity = prompt
        .len()
        .saturating_add(opts.max_tokens.saturating_sub(1));
    // (A learned position table's own limit is checked by the decoder, naming its rows.)
    if capacity > cfg.context && cfg.pos != crate::model::config::PosKind::Learned {
        return Err(Error::usage(format!(
            "--max-tokens {} after a {}-token prompt passes the model's context of {} tokens; give --max-tokens {} or fewer",
            opts.max_tokens,
            prompt.len(),
            cfg.context,
            (cfg.context + 1).saturating_sub(prompt.len())
        )));
    }
    let mut dec = Decoder::new(cfg, w, &opts.forward, capacity)?;
    let mut rng = ChaCha8Rng::seed_from_u64(opts.seed);
    let mut steps: Vec<Step> = Vec::with_capacity(opts.max_tokens);
    let mut prefill_ms = 0.0;
    let mut input = prompt.to_vec();
    while steps.len() < opts.max_tokens {
        let out = dec.feed(&input)?;
        if out.logits.iter().any(|x| !x.is_finite()) {
            return Err(Error::usage(NON_FINITE_LOGITS));
        }
        if steps.is_empty() {
            prefill_ms = out.ms;
        }
        let token = pick(&out.logits, opts, &mut rng);
        let step = Step {
            index: steps.len(),
            token,
            pos: dec.cache().len(),
            ms: out.ms,
            cache_bytes: dec.cache().bytes(),
            top_next: top_k(&out.logits, opts.report_top),
            attention: out.attention,
        };
        let go_on = on_step(&step);
        steps.push(step);
        if !go_on || opts.stop.contains(&token) {
            break;
        }
        input = vec![token];
    }
    Ok(Generation {
        prompt: prompt.to_vec(),
        steps,
        prefill_ms,
    })
}

/// The next token: argmax at temperature 0 (lowest id on ties), else a draw from
/// softmax(logits / T) restricted to the top k.
pub fn pick(logits: &[f32], opts: &GenerateOptions, rng: &mut ChaCha8Rng) -> u32 {
    if opts.temperature == 0.0 {
        return argmax(logits).unwrap_or(0);
    }
    let k = match opts.top_k {
        Some(k) if k > 0 => k,
        _ => logits.len(),
    };
    let cands = top_k(logits, k);
    let scaled: Vec<f32> = cands
        .iter()
        .map(|t| (t.logit as f64 / opts.temperature) as f32)
        .collect();
    let lse = log_sum_exp(&scaled);
    let u: f64 = rng.random();
    let mut acc = 0.0;
    for (t, &s) in cands.iter().zip(&scaled) {
        acc += (s as f64 - lse).exp();
        if u < acc {
            return t.id;
        }
    }
    cands[cands.len() - 1].id
}
