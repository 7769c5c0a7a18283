//! The decoding a lesson gets: its heads' inputs, every KV-head grouping compared with
//! MHA through `engine::gqa`, and the run through `engine::kv_cache` with the chosen one.

use crate::engine::config::{MaskKind, PeKind};
use crate::engine::gqa::{self, GqaComparison};
use crate::engine::kv_cache::{self, CacheLayout, DecodeOptions, Decoding};
use crate::engine::pipeline::Pipeline;

use super::inputs::HeadInputs;
use crate::cli::Dtype;

/// The dtype the cache bytes are given in: what deployed models keep K and V in.
pub const CACHE_DTYPE: Dtype = Dtype::F16;

/// Multiply-adds of a whole run's recomputation above which it is counted but not
/// rerun (it is O(n^3 d) over a run: 128 tokens of 64 heads would take seconds).
const RECOMPUTE_BUDGET: u64 = 50_000_000;

/// What the decode view derived from the lesson through the engine.
#[derive(Debug, Clone)]
pub struct DecodeLab {
    pub tokens: Vec<String>,
    pub inputs: HeadInputs,
    /// MHA (the lesson's K/V, one head per query head) against every grouping.
    pub groups: GqaComparison,
    /// Index into `groups.choices` of the KV heads being decoded with.
    pub choice: usize,
    pub layout: CacheLayout,
    /// The run with the chosen KV heads.
    pub decoding: Decoding,
    /// False when the recomputation is only counted (over [`RECOMPUTE_BUDGET`]).
    pub recomputed: bool,
    /// What differs from the lesson's own attention, said on screen.
    pub notes: Vec<String>,
}

/// The cache layout decoding uses for a lesson's mask, and a note when the mask does
/// not carry over to decoding.
fn layout_for(mask: &MaskKind) -> (CacheLayout, Option<String>) {
    match mask {
        MaskKind::Window(w) => (
            CacheLayout::Rolling { window: *w },
            Some(format!(
                "window:{w}: a rolling buffer of {w} slots, position i in slot i mod {w}"
            )),
        ),
        MaskKind::Causal => (CacheLayout::Full, None),
        MaskKind::None => (
            CacheLayout::Full,
            Some("decoding is causal: later tokens do not exist yet (the lesson's mask none does not apply)".into()),
        ),
        other => (
            CacheLayout::Full,
            Some(format!(
                "decoding here is causal; the lesson's mask {other} is not applied"
            )),
        ),
    }
}

impl DecodeLab {
    pub fn build(p: &Pipeline, kv_heads: Option<usize>) -> Result<DecodeLab, String> {
        let inputs = HeadInputs::from_pipeline(p)?;
        let (h, n, _) = inputs.q.dim();
        if p.shape.n_q != p.shape.n_k {
            return Err(format!(
                "decoding needs one query per key; these tensors have {} queries and {} keys",
                p.shape.n_q, p.shape.n_k
            ));
        }
        let (layout, note) = layout_for(p.mask.kind());
        let mut notes: Vec<String> = note.into_iter().collect();
        if p.config.pe == PeKind::Alibi {
            notes.push("ALiBi's distance bias is not part of this decoding: weights here are softmax(q K^T) over the cache".into());
        }
        let mha_k = inputs.per_query_head(&inputs.k);
        let mha_v = inputs.per_query_head(&inputs.v);
        let mask = match layout {
            CacheLayout::Rolling { window } => MaskKind::Window(window),
            CacheLayout::Full => MaskKind::Causal,
        };
        let groups = gqa::compare(
            inputs.q.view(),
            mha_k.view(),
            mha_v.view(),
            &mask,
            Some(inputs.scale),
            CACHE_DTYPE,
        )
        .map_err(|e| e.to_string())?;
        let want = kv_heads.unwrap_or(inputs.kv_heads());
        let choice = groups
            .choices
            .iter()
            .position(|c| c.kv_heads == want)
            .unwrap_or(groups.choices.len() - 1);
        let (d, dv) = (inputs.q.dim().2, inputs.v.dim().2);
        let full_cost: u64 = (0..n)
            .map(|t| kv_cache::recompute_step_madds(h, t, layout, d, dv))
            .sum();
        let recomputed = full_cost <= RECOMPUTE_BUDGET;
        let decoding = run(&groups, choice, &inputs, layout, recomputed)?;
        Ok(DecodeLab {
            tokens: p.key_labels.clone(),
            inputs,
            groups,
            choice,
            layout,
            decoding,
            recomputed,
            notes,
        })
    }

    /// Decode again with KV-head choice `choice`.
    pub(super) fn choose(&mut self, choice: usize) -> Result<(), String> {
        self.decoding = run(
            &self.groups,
            choice,
            &self.inputs,
            self.layout,
            self.recomputed,
        )?;
        self.choice = choice;
        Ok(())
    }

    pub fn kv_heads(&self) -> usize {
        self.groups.choices[self.choice].kv_heads
    }
}

fn run(
    groups: &GqaComparison,
    choice: usize,
    inputs: &HeadInputs,
    layout: CacheLayout,
    recompute: bool,
) -> Result<Decoding, String> {
    let c = &groups.choices[choice];
    kv_cache::decode(
        inputs.q.view(),
        c.k.view(),
        c.v.view(),
        DecodeOptions {
            layout,
            scale: Some(inputs.scale),
            recompute,
        },
    )
    .map_err(|e| e.to_string())
}

/// Token `i`'s label on screen (`t{i}` past the lesson's tokens).
pub(super) fn label(tokens: &[String], i: usize) -> String {
    tokens.get(i).cloned().unwrap_or_else(|| format!("t{i}"))
}
