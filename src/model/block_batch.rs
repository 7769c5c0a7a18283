//! One block over several sequences at once, each with its own KV cache: the products by
//! the block's weights (Q/K/V, W_O, the MLP) are one GEMM over every sequence's rows, so
//! the weights are read once for all of them; only attention runs per sequence. For the
//! reruns of activation patching, where hundreds of short runs go through the same block.
//! Pre-norm blocks without soft caps, head norms, post norms or a parallel residual (the
//! Llama family); [`batchable`] says when, and other blocks run one sequence at a time.

use crate::engine::config::MaskKind;
use crate::error::Result;
use crate::kernel::KernelOptions;
use crate::model::block::{add_into, split_heads};
use crate::model::cache::LayerCache;
use crate::model::cache_attention::{append_kv, cached_attention};
use crate::model::config::{ModelConfig, NormPlace, RopeStyle};
use crate::model::gemm::{linear, linears};
use crate::model::mlp::{MlpBuffers, mlp_forward};
use crate::model::norm::norm_rows;
use crate::model::rope::RopeTable;
use crate::model::weights::LayerWeights;

/// One sequence of a batch: its new rows of the residual stream [rows, d_model], and its
/// layer's cache holding `len` earlier rows (row capacity `capacity`).
pub(crate) struct Seq<'a> {
    pub x: &'a mut [f32],
    pub cache: &'a mut LayerCache,
    pub len: usize,
    pub capacity: usize,
    /// RoPE for the positions len..len + rows of this sequence.
    pub rope: Option<(&'a RopeTable, RopeStyle)>,
}

/// Whether [`blocks_forward`] computes block `lw` of this model.
pub(crate) fn batchable(cfg: &ModelConfig, lw: &LayerWeights) -> bool {
    cfg.norm_place == NormPlace::Pre
        && cfg.details.attn_softcap.is_none()
        && !cfg.details.parallel_residual
        && lw.extra.q_norm.is_none()
        && lw.extra.k_norm.is_none()
        && lw.extra.post_attn.is_none()
        && lw.extra.post_mlp.is_none()
}

/// Buffers of a batch, reused from block to block.
#[derive(Default)]
pub(crate) struct BatchBuffers {
    x: Vec<f32>,
    normed: Vec<f32>,
    q_tok: Vec<f32>,
    k_tok: Vec<f32>,
    v_tok: Vec<f32>,
    qh: Vec<f32>,
    kh: Vec<f32>,
    vh: Vec<f32>,
    concat: Vec<f32>,
    proj: Vec<f32>,
    mlp: MlpBuffers,
}

/// Block `lw` on every sequence in place (a [`batchable`] block), query heads in
/// `ablate` zeroed before W_O.
pub(crate) fn blocks_forward(
    cfg: &ModelConfig,
    lw: &LayerWeights,
    ablate: &[usize],
    mask: &MaskKind,
    seqs: &mut [Seq],
    buf: &mut BatchBuffers,
    threads: usize,
) -> Result<()> {
    let (d, dh, h, g) = (cfg.d_model, cfg.d_head, cfg.heads, cfg.kv_heads);
    let eps = cfg.norm_eps;
    let total: usize = seqs.iter().map(|s| s.x.len() / d).sum();
    buf.x.clear();
    for s in seqs.iter() {
        buf.x.extend_from_slice(s.x);
    }
    buf.normed.resize(total * d, 0.0);
    norm_rows(cfg.norm, &buf.x, d, &lw.attn_norm, eps, &mut buf.normed);
    linears(
        &buf.normed,
        total,
        &[&lw.wq, &lw.wk, &lw.wv],
        &mut [&mut buf.q_tok, &mut buf.k_tok, &mut buf.v_tok],
        threads,
    )?;
    // Attention, one sequence at a time; the heads side by side into `concat`.
    buf.concat.resize(total * h * dh, 0.0);
    let kopts = KernelOptions {
        threads: Some(1),
        ..KernelOptions::default()
    };
    let mut row = 0;
    for s in seqs.iter_mut() {
        let n = s.x.len() / d;
        split_heads(
            1,
            &buf.q_tok[row * h * dh..][..n * h * dh],
            n,
            h,
            dh,
            &mut buf.qh,
        )?;
        split_heads(
            1,
            &buf.k_tok[row * g * dh..][..n * g * dh],
            n,
            g,
            dh,
            &mut buf.kh,
        )?;
        split_heads(
            1,
            &buf.v_tok[row * g * dh..][..n * g * dh],
            n,
            g,
            dh,
            &mut buf.vh,
        )?;
        if let Some((rope, style)) = s.rope {
            rope.apply(style, &mut buf.qh);
            rope.apply(style, &mut buf.kh);
        }
        append_kv(1, s.cache, &buf.kh, &buf.vh, (g, n, dh), s.len, s.capacity)?;
        let (out, _) = cached_attention(cfg, &buf.qh, n, s.cache, s.len, s.capacity, mask, &kopts)?;
        let rows = &mut buf.concat[row * h * dh..][..n * h * dh];
        for (i, dst_row) in rows.chunks_exact_mut(h * dh).enumerate() {
            for (head, dst) in dst_row.chunks_exact_mut(dh).enumerate() {
                if ablate.contains(&head) {
                    dst.fill(0.0);
                } else {
                    dst.copy_from_slice(&out[(head * n + i) * dh..][..dh]);
                }
            }
        }
        row += n;
    }
    buf.proj.resize(total * d, 0.0);
    linear(&buf.concat, total, &lw.wo, &mut buf.proj, threads)?;
    add_into(&mut buf.x, &buf.proj);
    norm_rows(cfg.norm, &buf.x, d, &lw.mlp_norm, eps, &mut buf.normed);
    mlp_forward(
        &lw.mlp,
        cfg.act,
        &buf.normed,
        total,
        &mut buf.mlp,
        &mut buf.proj,
        threads,
    )?;
    add_into(&mut buf.x, &buf.proj);
    let mut at = 0;
    for s in seqs.iter_mut() {
        let len = s.x.len();
        s.x.copy_from_slice(&buf.x[at..at + len]);
        at += len;
    }
    Ok(())
}
