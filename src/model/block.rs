//! One Transformer block over n tokens: norms, Q/K/V, RoPE, attention through the flash
//! kernel, the display weights, W_O, residuals and the MLP, in pre- or post-norm order.
//! Every product over the n tokens is one GEMM; the N x N weights are computed only when
//! asked for (display or trace).

use rayon::prelude::*;

use crate::attn::range::KvBounds;
use crate::engine::config::MaskKind;
use crate::engine::mask::Mask;
use crate::engine::problem::{AttnSpec, ProblemShape};
use crate::error::{Error, Result};
use crate::kernel::exp::exp2_slice;
use crate::kernel::{self, KernelOptions, Tier, thread_pool};
use crate::model::cache::LayerCache;
use crate::model::cache_attention::{append_kv, cached_attention};
use crate::model::checks::model_attention;
use crate::model::config::{ModelConfig, NormKind, NormPlace, RopeStyle};
use crate::model::gemm::{linear, linears, matmul_nt};
use crate::model::mlp::{MlpBuffers, mlp_forward};
use crate::model::norm::{norm_rows, norm_rows_on};
use crate::model::rope::RopeTable;
use crate::model::rows::{self, rows_mut};
use crate::model::softcap::{KeyValueRows, capped_attention};
use crate::model::trace::LayerTrace;
use crate::model::weights::LayerWeights;

/// Below this many multiply-adds (q . k over every head, query and key) attention runs on
/// the calling thread: about 20 microseconds of work.
const SERIAL_ATTENTION_MACS: usize = 1 << 20;

/// What every block of one pass shares.
pub(crate) struct BlockCtx<'a> {
    pub cfg: &'a ModelConfig,
    pub threads: usize,
    /// RoPE for the positions of this pass's tokens; None without RoPE or with `no_pe`.
    pub rope: Option<(&'a RopeTable, RopeStyle)>,
}

/// Where the keys come from.
pub(crate) enum Keys<'a> {
    /// The pass's own n tokens (a full forward); `spec` is resolved for [H, n, n].
    Own { spec: &'a AttnSpec },
    /// A KV cache holding `len` earlier tokens (row capacity `capacity`): the new keys and
    /// values are written after them and the queries attend to all `len + n`.
    Cache {
        cache: &'a mut LayerCache,
        len: usize,
        capacity: usize,
        mask: &'a MaskKind,
    },
}

/// A point inside a block where a [`Hook`] reads, or replaces, an activation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Site {
    /// The residual stream entering the block [n, d_model] (called by the forward pass,
    /// before the block runs).
    ResidPre,
    /// The values [kv_heads, n, d_head] after their projection (and RoPE-free: values
    /// carry no position), before attention reads them.
    Values,
    /// The heads' outputs side by side, before W_O [n, heads * d_head] (ablated heads
    /// already zeroed): head h's output at position i is `[i, h*d_head..(h+1)*d_head]`.
    HeadOut,
    /// The attention output added to the residual stream [n, d_model]: concat W_O^T + b_O,
    /// after the post-attention norm of models that have one.
    AttnOut,
    /// The MLP output added to the residual stream [n, d_model], after the post-MLP norm
    /// of models that have one.
    MlpOut,
}

/// Called at each [`Site`] of a block with the activation there; it may read it or
/// overwrite it in place (activation patching), and the block goes on with what it holds.
pub type Hook<'a> = &'a mut dyn FnMut(Site, &mut [f32]) -> Result<()>;

/// Per-layer options.
pub(crate) struct LayerOpts<'a> {
    /// Query heads whose outputs are zeroed before W_O.
    pub ablate: &'a [usize],
    /// Where to write the attention weights [H, n, n_k], if wanted.
    pub weights: Option<&'a mut Vec<f32>>,
    /// Only the last query's weights [H, 1, n_k] (a decoding step shows no other; a long
    /// prompt's [H, n, n_k] would take gigabytes). Cached keys without a soft cap only.
    pub last_row_only: bool,
    pub trace: Option<&'a mut LayerTrace>,
    /// Reads or replaces activations at each [`Site`] (full passes over own keys).
    pub hook: Option<Hook<'a>>,
}

/// Buffers of one pass, sized on first use and reused by every layer.
#[derive(Default)]
pub(crate) struct Buffers {
    normed: Vec<f32>,
    q_tok: Vec<f32>,
    k_tok: Vec<f32>,
    v_tok: Vec<f32>,
    qh: Vec<f32>,
    kh: Vec<f32>,
    vh: Vec<f32>,
    concat: Vec<f32>,
    proj: Vec<f32>,
    scores: Vec<f32>,
    /// The attention output of a parallel block, waiting for the MLP's.
    parallel: Vec<f32>,
    mlp: MlpBuffers,
}

/// Run block `lw` on the residual stream x [n, d_model] in place.
pub(crate) fn block_forward(
    ctx: &BlockCtx,
    lw: &LayerWeights,
    x: &mut [f32],
    n: usize,
    keys: Keys,
    buf: &mut Buffers,
    mut lo: LayerOpts,
) -> Result<()> {
    let cfg = ctx.cfg;
    let (d, dh, h, g) = (cfg.d_model, cfg.d_head, cfg.heads, cfg.kv_heads);
    let t = ctx.threads;
    let eps = cfg.norm_eps;
    let post = cfg.norm_place == NormPlace::Post;
    if let Some(tr) = lo.trace.as_deref_mut() {
        tr.push(
            "block_input",
            "the residual stream entering the block",
            &[n, d],
            x,
        );
    }

    // Attention's input: norm(x) before it (pre-norm) or x itself (post-norm).
    buf.normed.resize(n * d, 0.0);
    if !post {
        norm_rows_on(t, cfg.norm, x, d, &lw.attn_norm, eps, &mut buf.normed)?;
        if let Some(tr) = lo.trace.as_deref_mut() {
            tr.push("attn_norm", "norm(block_input)", &[n, d], &buf.normed);
        }
    } else {
        buf.normed.copy_from_slice(x);
    }

    linears(
        &buf.normed,
        n,
        &[&lw.wq, &lw.wk, &lw.wv],
        &mut [&mut buf.q_tok, &mut buf.k_tok, &mut buf.v_tok],
        t,
    )?;
    split_heads(t, &buf.q_tok, n, h, dh, &mut buf.qh)?;
    split_heads(t, &buf.k_tok, n, g, dh, &mut buf.kh)?;
    split_heads(t, &buf.v_tok, n, g, dh, &mut buf.vh)?;
    if let Some(hook) = lo.hook.as_mut() {
        hook(Site::Values, &mut buf.vh)?;
    }
    if let Some(tr) = lo.trace.as_deref_mut() {
        tr.push("q", "x W_q^T + b_q, split into heads", &[h, n, dh], &buf.qh);
        tr.push(
            "k",
            "x W_k^T + b_k, split into KV heads",
            &[g, n, dh],
            &buf.kh,
        );
        tr.push(
            "v",
            "x W_v^T + b_v, split into KV heads",
            &[g, n, dh],
            &buf.vh,
        );
    }
    let head_norms = [
        (&lw.extra.q_norm, &mut buf.qh),
        (&lw.extra.k_norm, &mut buf.kh),
    ];
    for (i, (norm, x)) in head_norms.into_iter().enumerate() {
        if let Some(norm) = norm {
            let raw = x.clone();
            norm_rows_on(t, NormKind::Rms, &raw, dh, norm, eps, x)?;
            if let Some(tr) = lo.trace.as_deref_mut() {
                let (name, what, heads) = if i == 0 {
                    ("q_norm", "RMSNorm of each query head", h)
                } else {
                    ("k_norm", "RMSNorm of each key head", g)
                };
                tr.push(name, what, &[heads, n, dh], x);
            }
        }
    }
    if let Some((rope, style)) = ctx.rope {
        // Whole heads to each part: the table holds every position of a head.
        for x in [&mut buf.qh, &mut buf.kh] {
            rows_mut(t, x, n * dh, &|_, heads| rope.apply(style, heads))?;
        }
        if let Some(tr) = lo.trace.as_deref_mut() {
            tr.push("q_rope", "RoPE(q, position)", &[h, n, dh], &buf.qh);
            tr.push("k_rope", "RoPE(k, position)", &[g, n, dh], &buf.kh);
        }
    }

    // Attention through the kernel; the display weights from the same q, k and its lse.
    let n_k = match &keys {
        Keys::Own { .. } => n,
        Keys::Cache { len, .. } => len + n,
    };
    // A decode step's attention (one query row per head) is a few microseconds of work:
    // waking the workers for it costs more than it saves.
    let attn_threads = if n * n_k * h * dh < SERIAL_ATTENTION_MACS {
        1
    } else {
        t
    };
    let kopts = KernelOptions {
        threads: Some(attn_threads),
        ..KernelOptions::default()
    };
    let want_weights = lo.weights.is_some() || lo.trace.is_some();
    let cap = cfg.details.attn_softcap;
    let out = match (keys, cap) {
        (Keys::Own { spec }, Some(cap)) => {
            let kv = KeyValueRows {
                k: &buf.kh,
                v: &buf.vh,
                stride: n,
                len: n,
            };
            let (out, p) = capped_attention(cfg, &buf.qh, n, &kv, spec, cap, attn_threads)?;
            buf.scores = p;
            if let Some(tr) = lo.trace.as_deref_mut() {
                let keys = KeyRows {
                    k: &buf.kh,
                    stride: n,
                    len: n,
                };
                trace_scores(cfg, &buf.qh, n, &keys, spec, tr)?;
            }
            out
        }
        (Keys::Own { spec }, None) => {
            let shape = shape(cfg, n, n);
            let r = kernel::attention(&shape, &buf.qh, &buf.kh, &buf.vh, spec, &kopts)
                .map_err(model_attention)?;
            if want_weights {
                let kv = KeyRows {
                    k: &buf.kh,
                    stride: n,
                    len: n,
                };
                display_weights(cfg, &buf.qh, n, &kv, &r.lse, spec, t, &mut buf.scores)?;
                if let Some(tr) = lo.trace.as_deref_mut() {
                    trace_scores(cfg, &buf.qh, n, &kv, spec, tr)?;
                }
            }
            r.out
        }
        (
            Keys::Cache {
                cache,
                len,
                capacity,
                mask,
            },
            cap,
        ) => {
            let n_k = len + n;
            if n_k > capacity {
                return Err(Error::usage(format!(
                    "the KV cache holds {capacity} tokens; {len} cached + {n} new do not fit"
                )));
            }
            append_kv(t, cache, &buf.kh, &buf.vh, (g, n, dh), len, capacity)?;
            if let Some(cap) = cap {
                let full = Mask::resolve(mask, 1, h, n, n_k)?;
                let spec = AttnSpec::new(&shape(cfg, n, n_k), full, false, Some(cfg.attn_scale()));
                let kv = KeyValueRows {
                    k: cache.k.as_slice(),
                    v: cache.v.as_slice(),
                    stride: capacity,
                    len: n_k,
                };
                let (out, p) = capped_attention(cfg, &buf.qh, n, &kv, &spec, cap, attn_threads)?;
                buf.scores = p;
                if let Some(tr) = lo.trace.as_deref_mut() {
                    let keys = KeyRows {
                        k: cache.k.as_slice(),
                        stride: capacity,
                        len: n_k,
                    };
                    trace_scores(cfg, &buf.qh, n, &keys, &spec, tr)?;
                }
                out
            } else {
                let (out, lse) = if len == 0 {
                    // An empty cache holds just the block's own keys, contiguous per KV
                    // head in kh and vh: one call over every head gives the workers all of
                    // them to share.
                    let own = shape(cfg, n, n);
                    let full = Mask::resolve(mask, 1, h, n, n)?;
                    let spec = AttnSpec::new(&own, full, false, Some(cfg.attn_scale()));
                    let bounds = (0..g).fold(KvBounds::default(), |b, kv| {
                        b.max(cache.bounds(kv, capacity, n))
                    });
                    let kopts = KernelOptions {
                        kv_bounds: Some(bounds),
                        ..kopts
                    };
                    let r = kernel::attention(&own, &buf.qh, &buf.kh, &buf.vh, &spec, &kopts)
                        .map_err(model_attention)?;
                    (r.out, r.lse)
                } else {
                    cached_attention(cfg, &buf.qh, n, cache, len, capacity, mask, &kopts)?
                };
                let kv = KeyRows {
                    k: cache.k.as_slice(),
                    stride: capacity,
                    len: n_k,
                };
                if want_weights && lo.last_row_only && lo.trace.is_none() {
                    // The last query of each head alone: bottom-right alignment makes its
                    // one-row mask the same as its row of the full one.
                    let last = Mask::resolve(mask, 1, h, 1, n_k)?;
                    let spec =
                        AttnSpec::new(&shape(cfg, 1, n_k), last, false, Some(cfg.attn_scale()));
                    let q_last: Vec<f32> = buf
                        .qh
                        .chunks_exact(n * dh)
                        .flat_map(|head| head[(n - 1) * dh..].iter().copied())
                        .collect();
                    let lse_last: Vec<f32> = lse.chunks_exact(n).map(|l| l[n - 1]).collect();
                    display_weights(cfg, &q_last, 1, &kv, &lse_last, &spec, t, &mut buf.scores)?;
                } else if want_weights {
                    let full = Mask::resolve(mask, 1, h, n, n_k)?;
                    let spec =
                        AttnSpec::new(&shape(cfg, n, n_k), full, false, Some(cfg.attn_scale()));
                    display_weights(cfg, &buf.qh, n, &kv, &lse, &spec, t, &mut buf.scores)?;
                    if let Some(tr) = lo.trace.as_deref_mut() {
                        trace_scores(cfg, &buf.qh, n, &kv, &spec, tr)?;
                    }
                }
                out
            }
        }
    };
    if let Some(tr) = lo.trace.as_deref_mut() {
        let n_k = buf.scores.len() / (h * n);
        tr.push(
            "weights",
            "exp(masked_scores - lse)",
            &[h, n, n_k],
            &buf.scores,
        );
        tr.push("head_out", "weights V per head", &[h, n, dh], &out);
    }
    if let Some(wout) = lo.weights.take() {
        wout.clear();
        wout.extend_from_slice(&buf.scores);
    }

    // Heads side by side (ablated ones zeroed), W_O, residual.
    buf.concat.resize(n * h * dh, 0.0);
    let ablate = &lo.ablate;
    rows_mut(t, &mut buf.concat, h * dh, &|r, chunk| {
        for (i, row) in r.zip(chunk.chunks_exact_mut(h * dh)) {
            for (head, dst) in row.chunks_exact_mut(dh).enumerate() {
                if ablate.contains(&head) {
                    dst.fill(0.0);
                } else {
                    dst.copy_from_slice(&out[(head * n + i) * dh..][..dh]);
                }
            }
        }
    })?;
    if let Some(hook) = lo.hook.as_mut() {
        hook(Site::HeadOut, &mut buf.concat)?;
    }
    buf.proj.resize(n * d, 0.0);
    linear(&buf.concat, n, &lw.wo, &mut buf.proj, t)?;
    if let Some(tr) = lo.trace.as_deref_mut() {
        tr.push(
            "concat",
            "heads side by side (ablated heads zeroed)",
            &[n, h * dh],
            &buf.concat,
        );
        tr.push("attn_out", "concat W_o^T + b_o", &[n, d], &buf.proj);
    }
    if let Some(norm) = &lw.extra.post_attn {
        let raw = buf.proj.clone();
        norm_rows_on(t, cfg.norm, &raw, d, norm, eps, &mut buf.proj)?;
        if let Some(tr) = lo.trace.as_deref_mut() {
            tr.push("post_attn_norm", "norm(attn_out)", &[n, d], &buf.proj);
        }
    }
    if let Some(hook) = lo.hook.as_mut() {
        hook(Site::AttnOut, &mut buf.proj)?;
    }
    let parallel = cfg.details.parallel_residual;
    if parallel {
        // The MLP reads the block's input too: the attention output waits beside it.
        buf.parallel.clear();
        buf.parallel.extend_from_slice(&buf.proj);
        if let Some(tr) = lo.trace.as_deref_mut() {
            let mut r = x.to_vec();
            add_into(&mut r, &buf.proj);
            tr.push("attn_residual", "block_input + attn_out", &[n, d], &r);
        }
    } else {
        rows::add_into(t, x, &buf.proj)?;
        if let Some(tr) = lo.trace.as_deref_mut() {
            tr.push("attn_residual", "block_input + attn_out", &[n, d], x);
        }
    }
    if post {
        buf.normed.copy_from_slice(x);
        norm_rows(cfg.norm, &buf.normed, d, &lw.attn_norm, eps, x);
        if let Some(tr) = lo.trace.as_deref_mut() {
            tr.push("attn_norm", "norm(attn_residual)", &[n, d], x);
        }
    }

    // MLP on norm(x) (pre-norm) or x (post-norm), residual.
    if post {
        buf.normed.copy_from_slice(x);
    } else {
        norm_rows_on(t, cfg.norm, x, d, &lw.mlp_norm, eps, &mut buf.normed)?;
        if let Some(tr) = lo.trace.as_deref_mut() {
            let what = if parallel {
                "norm(block_input), in parallel with attention"
            } else {
                "norm(attn_residual)"
            };
            tr.push("mlp_norm", what, &[n, d], &buf.normed);
        }
    }
    mlp_forward(
        &lw.mlp,
        cfg.act,
        &buf.normed,
        n,
        &mut buf.mlp,
        &mut buf.proj,
        t,
    )?;
    if let Some(norm) = &lw.extra.post_mlp {
        let raw = buf.proj.clone();
        norm_rows_on(t, cfg.norm, &raw, d, norm, eps, &mut buf.proj)?;
    }
    if let Some(hook) = lo.hook.as_mut() {
        hook(Site::MlpOut, &mut buf.proj)?;
    }
    rows::add_into(t, x, &buf.proj)?;
    if parallel {
        rows::add_into(t, x, &buf.parallel)?;
    }
    if let Some(tr) = lo.trace.as_deref_mut() {
        let ff = buf.mlp.hidden.len() / n;
        tr.push(
            "mlp_pre_act",
            "gate x (gated MLP) or up x, before the activation",
            &[n, ff],
            &buf.mlp.pre_act,
        );
        if !buf.mlp.up.is_empty() {
            tr.push("mlp_up", "up x", &[n, ff], &buf.mlp.up);
        }
        tr.push(
            "mlp_hidden",
            "act(gate x) * up x, or act(up x)",
            &[n, ff],
            &buf.mlp.hidden,
        );
        let what = if lw.extra.post_mlp.is_some() {
            "norm(mlp_hidden W_down^T + b)"
        } else {
            "mlp_hidden W_down^T + b"
        };
        tr.push("mlp_out", what, &[n, d], &buf.proj);
        let what = if parallel {
            "block_input + attn_out + mlp_out"
        } else {
            "MLP input residual + mlp_out"
        };
        tr.push("mlp_residual", what, &[n, d], x);
    }
    if post {
        buf.normed.copy_from_slice(x);
        norm_rows(cfg.norm, &buf.normed, d, &lw.mlp_norm, eps, x);
        if let Some(tr) = lo.trace.as_deref_mut() {
            tr.push("mlp_norm", "norm(mlp_residual)", &[n, d], x);
        }
    }
    if let Some(tr) = lo.trace.as_deref_mut() {
        tr.push(
            "block_output",
            "the residual stream leaving the block",
            &[n, d],
            x,
        );
    }
    Ok(())
}

/// The block's attention problem, batch 1.
fn shape(cfg: &ModelConfig, n_q: usize, n_k: usize) -> ProblemShape {
    ProblemShape {
        batch: 1,
        heads: cfg.heads,
        kv_heads: cfg.kv_heads,
        n_q,
        n_k,
        d: cfg.d_head,
        dv: cfg.d_head,
    }
}

/// Keys [G, stride, d_head] of which rows 0..len are used.
struct KeyRows<'a> {
    k: &'a [f32],
    stride: usize,
    len: usize,
}

/// P[h, i, j] = exp(scale q_h,i . k_g,j + bias(i, j) - lse_h,i) into `out` [H, n_q, n_k]:
/// the softmax the kernel computed, recomputed from its lse (0 where masked or where the
/// row sees no key at all).
#[allow(clippy::too_many_arguments)]
fn display_weights(
    cfg: &ModelConfig,
    q: &[f32],
    n_q: usize,
    keys: &KeyRows,
    lse: &[f32],
    spec: &AttnSpec,
    threads: usize,
    out: &mut Vec<f32>,
) -> Result<()> {
    let (dh, n_k) = (cfg.d_head, keys.len);
    out.clear();
    out.resize(cfg.heads * n_q * n_k, 0.0);
    let scale = spec.scale as f32;
    let mask = &spec.mask;
    let tier = Tier::detect();
    let one_head = |(head, p): (usize, &mut [f32])| -> Result<()> {
        let kv = cfg.kv_head_for(head);
        let k = &keys.k[kv * keys.stride * dh..][..n_k * dh];
        matmul_nt(
            &q[head * n_q * dh..][..n_q * dh],
            n_q,
            dh,
            k,
            n_k,
            None,
            p,
            1,
        )?;
        for (i, row) in p.chunks_exact_mut(n_k).enumerate() {
            let l = lse[head * n_q + i];
            if l == f32::NEG_INFINITY {
                row.fill(0.0);
                continue;
            }
            match mask.band(0, i) {
                Some(vis) => {
                    // Inside the band and its sinks: 2^((scale s - lse) log2 e) on the
                    // kernel's tier; 0 elsewhere.
                    let (lo, hi) = (
                        vis.keys.start.min(n_k),
                        vis.keys.end.clamp(vis.keys.start.min(n_k), n_k),
                    );
                    let sinks = vis.sink_keys().end.min(lo);
                    row[sinks..lo].fill(0.0);
                    row[hi..].fill(0.0);
                    for part in [0..sinks, lo..hi] {
                        let band = &mut row[part];
                        for s in band.iter_mut() {
                            *s = (scale * *s - l) * std::f32::consts::LOG2_E;
                        }
                        exp2_slice(tier, band);
                    }
                }
                None => {
                    for (j, s) in row.iter_mut().enumerate() {
                        let bias = mask.bias(0, head, i, j);
                        *s = if bias == f64::NEG_INFINITY {
                            0.0
                        } else {
                            ((scale * *s) as f64 + bias - l as f64).exp() as f32
                        };
                    }
                }
            }
        }
        Ok(())
    };
    let per_head = n_q * n_k;
    if threads <= 1 {
        out.chunks_mut(per_head).enumerate().try_for_each(one_head)
    } else {
        thread_pool(threads)?.install(|| {
            out.par_chunks_mut(per_head)
                .enumerate()
                .try_for_each(one_head)
        })
    }
}

/// The trace's `scores` (scale q.k) and `masked_scores` (plus the mask's bias), [H, n_q, n_k].
fn trace_scores(
    cfg: &ModelConfig,
    q: &[f32],
    n_q: usize,
    keys: &KeyRows,
    spec: &AttnSpec,
    tr: &mut LayerTrace,
) -> Result<()> {
    let (dh, n_k) = (cfg.d_head, keys.len);
    let mut scores = vec![0.0f32; cfg.heads * n_q * n_k];
    for (head, s) in scores.chunks_exact_mut(n_q * n_k).enumerate() {
        let kv = cfg.kv_head_for(head);
        let k = &keys.k[kv * keys.stride * dh..][..n_k * dh];
        matmul_nt(
            &q[head * n_q * dh..][..n_q * dh],
            n_q,
            dh,
            k,
            n_k,
            None,
            s,
            1,
        )?;
        match cfg.details.attn_softcap {
            Some(cap) => s
                .iter_mut()
                .for_each(|v| *v = (cap * (spec.scale * *v as f64 / cap).tanh()) as f32),
            None => s.iter_mut().for_each(|v| *v *= spec.scale as f32),
        }
    }
    let mut masked = scores.clone();
    for (head, m) in masked.chunks_exact_mut(n_q * n_k).enumerate() {
        for (i, row) in m.chunks_exact_mut(n_k).enumerate() {
            for (j, v) in row.iter_mut().enumerate() {
                *v = (*v as f64 + spec.mask.bias(0, head, i, j)) as f32;
            }
        }
    }
    let shape = [cfg.heads, n_q, n_k];
    let what = match cfg.details.attn_softcap {
        Some(_) => "cap tanh(scale q . k / cap), the soft-capped scores",
        None if cfg.details.attn_scale.is_some() => "scale q . k (the model's own scale)",
        None => "scale q . k (scale = 1/sqrt(d_head))",
    };
    tr.push("scores", what, &shape, &scores);
    tr.push(
        "masked_scores",
        "scores + mask (-inf where masked)",
        &shape,
        &masked,
    );
    Ok(())
}

/// [n, heads * dh] (token-major, as a projection writes it) -> [heads, n, dh], the heads
/// shared out over `threads`.
pub(crate) fn split_heads(
    threads: usize,
    tok: &[f32],
    n: usize,
    heads: usize,
    dh: usize,
    out: &mut Vec<f32>,
) -> Result<()> {
    out.resize(heads * n * dh, 0.0);
    rows_mut(threads, out, n * dh, &|r, chunk| {
        for (head, dst) in r.zip(chunk.chunks_exact_mut(n * dh)) {
            for (i, row) in dst.chunks_exact_mut(dh).enumerate() {
                row.copy_from_slice(&tok[(i * heads + head) * dh..][..dh]);
            }
        }
    })
}

pub(crate) fn add_into(x: &mut [f32], y: &[f32]) {
    x.iter_mut().zip(y).for_each(|(a, b)| *a += b);
}
