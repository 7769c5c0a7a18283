//! The decode view's numbers on a real model: [`generate`] run greedily after a session's
//! text, every step kept with what the view shows about it: the token chosen and the
//! most likely candidates, the newest token's attention over the cache in every layer,
//! the cache's size in bytes (and what multi-head attention would need), and what the
//! step cost in multiply-adds with the cache against recomputing the whole prefix.
//!
//! No terminal code: the app computes this once when its decode view opens and draws it.

use crate::engine::config::MaskKind;
use crate::error::{Error, Result};
use crate::model::config::ModelConfig;
use crate::model::forward::ForwardOptions;
use crate::model::generate::{GenerateOptions, generate};
use crate::model::predict::TopToken;
use crate::model::session::ModelSession;

/// New tokens the app decodes after the text: enough to watch the cache grow, few enough
/// to open at once (SmolLM2-135M takes ~30 ms a token on one core).
pub const APP_NEW_TOKENS: usize = 16;

/// Candidates each step reports.
pub const APP_TOP: usize = 5;

/// The shape of a model's KV cache: per layer, K and V of every KV head, d_head each,
/// in the element type the cache holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheGeometry {
    pub layers: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub d_head: usize,
    /// Bytes per cached number.
    pub elem_bytes: usize,
    /// Its name ("f32").
    pub dtype: &'static str,
}

impl CacheGeometry {
    /// The cache attnviz keeps for `cfg` ([`crate::model::cache::KvCache`]): f32.
    pub fn of(cfg: &ModelConfig) -> CacheGeometry {
        CacheGeometry {
            layers: cfg.layers,
            heads: cfg.heads,
            kv_heads: cfg.kv_heads,
            d_head: cfg.d_head,
            elem_bytes: std::mem::size_of::<f32>(),
            dtype: "f32",
        }
    }

    /// Bytes one token adds to one layer: 2 (K and V) x kv_heads x d_head x elem_bytes.
    pub fn layer_bytes_per_token(&self) -> usize {
        2 * self.kv_heads * self.d_head * self.elem_bytes
    }

    /// Bytes one token adds to the whole cache: layers x 2 x kv_heads x d_head x elem_bytes.
    pub fn bytes_per_token(&self) -> usize {
        self.layers * self.layer_bytes_per_token()
    }

    /// The same with one K/V head per query head (multi-head attention).
    pub fn mha_bytes_per_token(&self) -> usize {
        2 * self.layers * self.heads * self.d_head * self.elem_bytes
    }

    pub fn bytes(&self, tokens: usize) -> usize {
        tokens * self.bytes_per_token()
    }
}

/// Multiply-adds of the model's matrix products (norms, RoPE and softmax are a few per
/// number and left out).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Madds {
    /// Q, K, V, W_O and the MLP of every layer, and the LM head.
    pub dense: u64,
    /// Attention: q.k over the visible keys and the weighted sum of their values.
    pub attention: u64,
}

impl Madds {
    pub fn total(&self) -> u64 {
        self.dense + self.attention
    }
}

/// What one step cost: feeding its tokens with the cache, against running the whole
/// prefix again without one (what a model without a cache does for every token).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StepCost {
    pub cached: Madds,
    pub recompute: Madds,
}

/// Multiply-adds of one token's trip through the dense layers of every block
/// (projections and MLP), without attention and the LM head.
pub fn token_dense_madds(cfg: &ModelConfig) -> u64 {
    let (d, dh) = (cfg.d_model as u64, cfg.d_head as u64);
    let (h, g) = (cfg.heads as u64, cfg.kv_heads as u64);
    let qkv = d * (h + 2 * g) * dh;
    let wo = h * dh * d;
    let mlp_mats = match cfg.arch {
        // gate, up, down
        crate::model::config::Arch::Llama => 3,
        _ => 2,
    };
    (qkv + wo + mlp_mats * d * cfg.d_ff as u64) * cfg.layers as u64
}

/// Multiply-adds of the LM head for one row.
pub fn lm_head_madds(cfg: &ModelConfig) -> u64 {
    (cfg.vocab * cfg.d_model) as u64
}

/// Keys the query at `pos` sees under `mask` (causal, or a window of W, with S sinks).
pub fn visible_keys(mask: &MaskKind, pos: usize) -> usize {
    match mask {
        MaskKind::Window(w) => (pos + 1).min(*w),
        MaskKind::WindowSinks { window, sinks } => (pos + 1).min(window + sinks),
        _ => pos + 1,
    }
}

/// Attention multiply-adds of the query at `pos` in every layer: heads x keys x 2 d_head.
pub fn query_attention_madds(cfg: &ModelConfig, mask: &MaskKind, pos: usize) -> u64 {
    (cfg.layers * cfg.heads * visible_keys(mask, pos) * 2 * cfg.d_head) as u64
}

/// The cost of a pass over positions `from..to` (the prompt, or one new token), with a
/// cache holding positions 0..from; and of computing positions 0..to from nothing. Both
/// end with the LM head on the last row.
pub fn step_cost(cfg: &ModelConfig, mask: &MaskKind, from: usize, to: usize) -> StepCost {
    let pass = |a: usize| Madds {
        dense: token_dense_madds(cfg) * (to - a) as u64 + lm_head_madds(cfg),
        attention: (a..to).map(|p| query_attention_madds(cfg, mask, p)).sum(),
    };
    StepCost {
        cached: pass(from),
        recompute: pass(0),
    }
}

/// A candidate next token with its text.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub top: TopToken,
    pub text: String,
}

/// One decoding step: a pass over the fed tokens, and the token it chose.
#[derive(Debug, Clone)]
pub struct DecodeStep {
    /// The tokens this pass fed: the whole prompt for the first step, then the token the
    /// step before chose.
    pub fed: Vec<u32>,
    /// The chosen token (greedy: the most likely) and its text.
    pub token: u32,
    pub text: String,
    /// The position it takes in the sequence (the cache's length after the pass).
    pub pos: usize,
    /// The most likely next tokens, with softmax probabilities of the raw logits.
    pub candidates: Vec<Candidate>,
    /// Per layer, the attention [heads, pos] of the query that chose the token (the last
    /// fed token) over every cached key.
    pub attention: Vec<Vec<f32>>,
    /// KV cache bytes after the pass.
    pub cache_bytes: usize,
    pub cost: StepCost,
    /// Wall time of the pass.
    pub ms: f64,
    /// The token ends the text (the model's end-of-sequence token): decoding stopped.
    pub stop: bool,
}

impl DecodeStep {
    /// Layer `layer`'s attention row of head `h` over the cache ([pos] keys; empty if
    /// there is no such layer or head).
    pub fn row(&self, layer: usize, h: usize) -> &[f32] {
        self.attention
            .get(layer)
            .and_then(|a| a.get(h * self.pos..(h + 1) * self.pos))
            .unwrap_or(&[])
    }
}

/// `generate` after a session's text, step by step, and the model's cache geometry.
#[derive(Debug, Clone)]
pub struct Decoding {
    pub geometry: CacheGeometry,
    /// The mask decoding honours (the model's causal mask or a window).
    pub mask: MaskKind,
    pub prompt: Vec<u32>,
    pub prompt_text: Vec<String>,
    pub steps: Vec<DecodeStep>,
    /// New tokens asked for (fewer steps when the model ended the text).
    pub max_new: usize,
}

impl Decoding {
    /// Decode up to `max_new` tokens greedily after the session's tokens, with the
    /// session's interventions, keeping every step's attention rows. Stops after the
    /// model's end-of-sequence token, as `attnviz generate` does.
    pub fn run(session: &ModelSession, max_new: usize) -> Result<Decoding> {
        Decoding::run_with(session, max_new, |_| true)
    }

    /// [`Decoding::run`], calling `on_step` with the number of tokens decoded so far
    /// after each step (for a progress line); `on_step` returning false stops the
    /// decoding with an error saying so.
    pub fn run_with(
        session: &ModelSession,
        max_new: usize,
        mut on_step: impl FnMut(usize) -> bool,
    ) -> Result<Decoding> {
        let cfg = session.config();
        if !cfg.causal {
            return Err(Error::usage(format!(
                "{} is an encoder ({}, bidirectional attention): it reads a whole text at once and does not generate, so there is no KV cache to grow; open a causal model (llama, gpt2) to watch decoding",
                session.model.name,
                cfg.arch.name()
            )));
        }
        if max_new == 0 {
            return Err(Error::usage("decoding needs at least one new token"));
        }
        let prompt = session.ids.clone();
        // A learned position table has `context` rows: decode no further than it reaches.
        let room = match cfg.pos {
            crate::model::config::PosKind::Learned if !session.options.no_pe => {
                (cfg.context + 1).saturating_sub(prompt.len())
            }
            _ => max_new,
        };
        let max_tokens = max_new.min(room);
        if max_tokens == 0 {
            return Err(Error::usage(format!(
                "the text fills the model's {} learned positions: no room to decode; open a shorter --tokens",
                cfg.context
            )));
        }
        let mask = session.mask();
        let tok = &session.model.tokenizer;
        let stop = session.stop.clone();
        let opts = GenerateOptions {
            max_tokens,
            temperature: 0.0,
            top_k: None,
            seed: 0,
            stop: stop.clone(),
            report_top: APP_TOP,
            forward: ForwardOptions {
                keep_attention: true,
                trace_layer: None,
                ..session.options.clone()
            },
        };
        let mut go_on = true;
        // The model's own numbers, as `model run` computes them (not int8 activations).
        let g = crate::model::qmatmul::exact(|| {
            generate(cfg, &session.model.weights, &prompt, &opts, |s| {
                go_on = on_step(s.index + 1);
                go_on
            })
        })?;
        if !go_on {
            return Err(Error::usage("the decoding was stopped before its end"));
        }
        let geometry = CacheGeometry::of(cfg);
        let mut steps = Vec::with_capacity(g.steps.len());
        for s in g.steps {
            let fed = if s.index == 0 {
                prompt.clone()
            } else {
                vec![steps.last().map_or(0, |p: &DecodeStep| p.token)]
            };
            let from = s.pos - fed.len();
            steps.push(DecodeStep {
                cost: step_cost(cfg, &mask, from, s.pos),
                fed,
                token: s.token,
                text: tok.piece(s.token),
                pos: s.pos,
                candidates: s
                    .top_next
                    .iter()
                    .map(|t| Candidate {
                        top: *t,
                        text: tok.piece(t.id),
                    })
                    .collect(),
                attention: s.attention,
                cache_bytes: geometry.bytes(s.pos),
                ms: s.ms,
                stop: stop.contains(&s.token),
            });
        }
        Ok(Decoding {
            geometry,
            mask,
            prompt_text: session.pieces.clone(),
            prompt,
            steps,
            max_new,
        })
    }

    pub fn tokens(&self) -> Vec<u32> {
        self.steps.iter().map(|s| s.token).collect()
    }

    /// The texts of the keys step `t`'s query sees: the prompt, then the tokens chosen
    /// before step t.
    pub fn key_texts(&self, t: usize) -> Vec<String> {
        let mut v = self.prompt_text.clone();
        v.extend(self.steps[..t].iter().map(|s| s.text.clone()));
        v
    }

    /// Multiply-adds of steps 0..=t, with and without the cache.
    pub fn cost_so_far(&self, t: usize) -> (u64, u64) {
        self.steps[..=t.min(self.steps.len().saturating_sub(1))]
            .iter()
            .fold((0, 0), |(c, r), s| {
                (c + s.cost.cached.total(), r + s.cost.recompute.total())
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::config::{Act, Arch, NormKind, NormPlace, PosKind, RopeStyle};

    fn cfg() -> ModelConfig {
        ModelConfig {
            arch: Arch::Llama,
            layers: 2,
            heads: 4,
            kv_heads: 2,
            d_model: 8,
            d_head: 2,
            d_ff: 16,
            vocab: 10,
            context: 64,
            norm: NormKind::Rms,
            norm_place: NormPlace::Pre,
            norm_eps: 1e-5,
            act: Act::Silu,
            pos: PosKind::Rope {
                base: 10000.0,
                style: RopeStyle::Interleaved,
            },
            causal: true,
            tied_embeddings: false,
            details: Default::default(),
        }
    }

    #[test]
    fn cache_bytes_count_k_and_v_of_every_kv_head_and_layer() {
        let g = CacheGeometry::of(&cfg());
        assert_eq!(g.bytes_per_token(), 2 * 2 * 2 * 2 * 4);
        assert_eq!(g.mha_bytes_per_token(), 2 * 2 * 4 * 2 * 4);
        assert_eq!(g.bytes(5), 5 * 64);
    }

    #[test]
    fn a_cached_step_costs_one_row_and_recomputing_costs_the_prefix() {
        let c = cfg();
        // per token dense: qkv 8*(4+4)*2 = 128, wo 4*2*8 = 64, mlp 3*8*16 = 384; x2 layers
        assert_eq!(token_dense_madds(&c), 2 * (128 + 64 + 384));
        let s = step_cost(&c, &MaskKind::Causal, 3, 4);
        assert_eq!(s.cached.dense, token_dense_madds(&c) + 80);
        // the query at position 3 sees 4 keys: 2 layers x 4 heads x 4 x 2 x 2
        assert_eq!(s.cached.attention, 2 * 4 * 4 * 4);
        assert_eq!(s.recompute.dense, 4 * token_dense_madds(&c) + 80);
        assert_eq!(s.recompute.attention, 2 * 4 * 4 * (1 + 2 + 3 + 4));
        // a window of 2 caps the keys
        let w = step_cost(&c, &MaskKind::Window(2), 3, 4);
        assert_eq!(w.cached.attention, 2 * 4 * 2 * 4);
        assert_eq!(w.recompute.attention, 2 * 4 * 4 * (1 + 2 + 2 + 2));
        // and a sink adds the first key once the window has left it
        let sinks = MaskKind::WindowSinks {
            window: 2,
            sinks: 1,
        };
        let ws = step_cost(&c, &sinks, 3, 4);
        assert_eq!(ws.recompute.attention, 2 * 4 * 4 * (1 + 2 + 3 + 3));
        // the prefill is the same either way
        let p = step_cost(&c, &MaskKind::Causal, 0, 4);
        assert_eq!(p.cached, p.recompute);
    }
}
