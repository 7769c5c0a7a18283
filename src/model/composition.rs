//! Composition scores (Elhage et al. 2021): how much an earlier head's output is read by
//! a later head's queries, keys or values, ||W_A W_B||_F / (||W_A||_F ||W_B||_F), with
//! W_A = W_V^a W_O^a and W_B = W_Q^b W_K^b^T (q), its transpose (k) or W_V^b W_O^b (v),
//! in the row-vector convention x -> x W (every W d_model x d_model). The scale of the
//! norm in front of each layer is folded into its W_Q, W_K and W_V; RoPE is left out.
//!
//! Every score of every pair is one inner product of two d x d Gram matrices:
//! ||V O Q K^T||_F^2 = tr((O^T V^T V O)(Q K^T K Q^T)) = <A_a, B_b>, with A_a = O^T G_V O
//! and B_b = Q G_K Q^T for G the dh x dh Grams. A_a is computed once per head, B_b once
//! per head and kind, and the scores of a layer's heads against all earlier heads are
//! one product of packed upper triangles: d^2/2 multiply-adds a pair instead of the
//! dh^2 d of multiplying the factors out.

use crate::error::{Error, Result};
use crate::model::config::{ModelConfig, NormPlace};
use crate::model::gemm::matmul_nt;
use crate::model::weights::{Norm, Weights};

/// Most f32 values the packed Gram matrices of the earlier heads may take (1 GB).
pub const MAX_GRAM_VALUES: u64 = 256 << 20;

/// One pair's three scores.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Composition {
    pub layer_a: usize,
    pub head_a: usize,
    pub layer_b: usize,
    pub head_b: usize,
    pub q: f64,
    pub k: f64,
    pub v: f64,
}

/// One head's factors, each [d_model, d_head] (columns are the head's dimensions): the
/// norm-folded W_Q, W_K, W_V and W_O^T.
struct HeadFactors {
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    o_t: Vec<f32>,
}

/// The scale of the norm in front of layer l's attention (pre-norm: its own norm;
/// post-norm: the norm that wrote its input).
fn norm_before<'a>(cfg: &ModelConfig, w: &'a Weights, l: usize) -> Option<&'a Norm> {
    match cfg.norm_place {
        NormPlace::Pre => Some(&w.layers[l].attn_norm),
        NormPlace::Post if l == 0 => w.embed_norm.as_ref(),
        NormPlace::Post => Some(&w.layers[l - 1].mlp_norm),
    }
}

/// Rows r0..r0+dh of a linear's weight [out, d] as [d, dh], scaled per input row.
fn columns(wt: &[f32], d: usize, r0: usize, dh: usize, scale: Option<&[f32]>) -> Vec<f32> {
    let mut out = vec![0.0f32; d * dh];
    for c in 0..dh {
        let row = &wt[(r0 + c) * d..][..d];
        for (i, &x) in row.iter().enumerate() {
            out[i * dh + c] = x * scale.map_or(1.0, |s| s[i]);
        }
    }
    out
}

fn layer_factors(cfg: &ModelConfig, w: &Weights, l: usize) -> Vec<HeadFactors> {
    let (d, dh) = (cfg.d_model, cfg.d_head);
    let lw = &w.layers[l];
    let scale = norm_before(cfg, w, l).map(|n| n.w.as_slice());
    let (wq, wk, wv, wo) = (
        lw.wq.w.to_f32(),
        lw.wk.w.to_f32(),
        lw.wv.w.to_f32(),
        lw.wo.w.to_f32(),
    );
    let hd = cfg.heads * dh;
    (0..cfg.heads)
        .map(|h| {
            let g = cfg.kv_head_for(h);
            // W_O^h as [d, dh]: row j of wo, columns h*dh..
            let mut o_t = vec![0.0f32; d * dh];
            for j in 0..d {
                o_t[j * dh..][..dh].copy_from_slice(&wo[j * hd + h * dh..][..dh]);
            }
            HeadFactors {
                q: columns(&wq, d, h * dh, dh, scale),
                k: columns(&wk, d, g * dh, dh, scale),
                v: columns(&wv, d, g * dh, dh, scale),
                o_t,
            }
        })
        .collect()
}

/// G = X^T X [dh, dh] for X [d, dh].
fn gram(x: &[f32], d: usize, dh: usize, threads: usize) -> Result<Vec<f32>> {
    let xt = transpose(x, d, dh);
    let mut g = vec![0.0f32; dh * dh];
    matmul_nt(&xt, dh, d, &xt, dh, None, &mut g, threads)?;
    Ok(g)
}

fn transpose(x: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut t = vec![0.0f32; rows * cols];
    for (i, row) in x.chunks_exact(cols).enumerate() {
        for (j, &v) in row.iter().enumerate() {
            t[j * rows + i] = v;
        }
    }
    t
}

/// X G X^T for X [d, dh], G [dh, dh] symmetric, packed as the upper triangle with the
/// off-diagonal entries times sqrt 2 (so a plain dot product of two packed matrices is
/// <A, B>_F), and its trace.
fn sandwich(x: &[f32], g: &[f32], d: usize, dh: usize, threads: usize) -> Result<(Vec<f32>, f64)> {
    // Y = X G = X G^T [d, dh]
    let mut y = vec![0.0f32; d * dh];
    matmul_nt(x, d, dh, g, dh, None, &mut y, threads)?;
    let mut full = vec![0.0f32; d * d];
    matmul_nt(&y, d, dh, x, d, None, &mut full, threads)?;
    let mut packed = Vec::with_capacity(d * (d + 1) / 2);
    let r2 = std::f32::consts::SQRT_2;
    let mut trace = 0.0;
    for i in 0..d {
        trace += full[i * d + i] as f64;
        packed.push(full[i * d + i]);
        for j in i + 1..d {
            packed.push(0.5 * (full[i * d + j] + full[j * d + i]) * r2);
        }
    }
    Ok((packed, trace))
}

/// Every pair of heads in `layers` (ascending, distinct), layer_a < layer_b.
pub fn composition_scores(
    cfg: &ModelConfig,
    w: &Weights,
    layers: &[usize],
    threads: usize,
) -> Result<Vec<Composition>> {
    let (d, dh, h) = (cfg.d_model, cfg.d_head, cfg.heads);
    if let Some(&bad) = layers.iter().find(|&&l| l >= cfg.layers) {
        return Err(Error::usage(format!(
            "--layers {bad}: the model has layers 0..{}",
            cfg.layers - 1
        )));
    }
    let packed = (d * (d + 1) / 2) as u64;
    let earlier = layers.len().saturating_sub(1) as u64 * h as u64;
    if earlier * packed > MAX_GRAM_VALUES {
        let fit = (MAX_GRAM_VALUES / (packed * h as u64)).max(1) + 1;
        return Err(Error::usage(format!(
            "heads --composition: {} layers of {h} heads need {} MB of Gram matrices, over the limit of {} MB; give at most {fit} layers with --layers A,B,..",
            layers.len(),
            earlier * packed * 4 / 1_000_000,
            MAX_GRAM_VALUES * 4 / 1_000_000
        )));
    }
    let p = packed as usize;
    // Packed A_a of the earlier heads, their traces and (layer, head).
    let mut a_stack: Vec<f32> = Vec::with_capacity(earlier as usize * p);
    let mut a_trace: Vec<f64> = Vec::new();
    let mut a_who: Vec<(usize, usize)> = Vec::new();
    let mut out = Vec::new();
    for (li, &lb) in layers.iter().enumerate() {
        let f = layer_factors(cfg, w, lb);
        if li > 0 && !a_who.is_empty() {
            let na = a_who.len();
            // The three kinds' packed B_b stacked: one product streams the earlier heads'
            // stack (up to 170 MB on SmolLM2) once per layer rather than once per kind.
            let mut traces = [vec![0.0f64; h], vec![0.0f64; h], vec![0.0f64; h]];
            let mut b_stack = Vec::with_capacity(3 * h * p);
            for (kind, kind_traces) in traces.iter_mut().enumerate() {
                for (hb, hf) in f.iter().enumerate() {
                    // q: Q G_K Q^T; k: K G_Q K^T; v: V (O O^T) V^T, O^T = o_t [d, dh].
                    let (x, g) = match kind {
                        0 => (&hf.q, gram(&hf.k, d, dh, threads)?),
                        1 => (&hf.k, gram(&hf.q, d, dh, threads)?),
                        _ => (&hf.v, gram(&hf.o_t, d, dh, threads)?),
                    };
                    let (b, t) = sandwich(x, &g, d, dh, threads)?;
                    b_stack.extend_from_slice(&b);
                    kind_traces[hb] = t;
                }
            }
            let mut all = vec![0.0f32; 3 * h * na];
            matmul_nt(&b_stack, 3 * h, p, &a_stack, na, None, &mut all, threads)?;
            let scores: Vec<&[f32]> = all.chunks_exact(h * na).collect();
            for hb in 0..h {
                for (ia, &(la, ha)) in a_who.iter().enumerate() {
                    let s = |kind: usize| -> f64 {
                        let num = scores[kind][hb * na + ia].max(0.0) as f64;
                        let den = a_trace[ia] * traces[kind][hb];
                        if den > 0.0 { (num / den).sqrt() } else { 0.0 }
                    };
                    out.push(Composition {
                        layer_a: la,
                        head_a: ha,
                        layer_b: lb,
                        head_b: hb,
                        q: s(0),
                        k: s(1),
                        v: s(2),
                    });
                }
            }
        }
        if li + 1 < layers.len() {
            // A_a = O^T G_V O: o_t [d, dh] with G_V = V^T V.
            for (ha, hf) in f.iter().enumerate() {
                let (a, t) = sandwich(&hf.o_t, &gram(&hf.v, d, dh, threads)?, d, dh, threads)?;
                a_stack.extend_from_slice(&a);
                a_trace.push(t);
                a_who.push((lb, ha));
            }
        }
    }
    out.sort_by_key(|c| (c.layer_a, c.head_a, c.layer_b, c.head_b));
    Ok(out)
}
