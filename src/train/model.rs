//! The GPT-2-style model's forward pass over a batch, keeping what its backward needs,
//! and the backward: dL/dθ of the mean next-token cross-entropy, every piece on the
//! project's kernels (attention: the flash forward with its log-sum-exp, then the flash
//! backward; products: [`super::linear`]; the rest: [`super::ops`]).
//!
//! Rows are tokens, row b*T + t for sequence b, position t; attention runs on
//! [B, H, T, dh] copies ([`Heads`]).

use crate::attn::config::MaskKind;
use crate::attn::mask::Mask;
use crate::attn::problem::{AttnSpec, ProblemShape};
use crate::error::{Error, Result};
use crate::kernel::{self, BackwardInputs, KernelOptions};

use super::linear::{self, LinearScratch};
use super::ops::{self, Heads};
use super::params::Layout;

/// What one block's forward keeps for its backward.
#[derive(Default)]
struct BlockActs {
    /// The block's input (LayerNorm 1's x), [M, d].
    x_in: Vec<f32>,
    st1: Vec<[f32; 2]>,
    h1: Vec<f32>,
    /// [B, H, T, dh] each.
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    o: Vec<f32>,
    /// [B, H, T].
    lse: Vec<f32>,
    /// The heads' outputs as rows, [M, d] (c_proj's input).
    y: Vec<f32>,
    /// After the attention residual (LayerNorm 2's x), [M, d].
    x_mid: Vec<f32>,
    st2: Vec<[f32; 2]>,
    h2: Vec<f32>,
    /// MLP pre-activation and GELU output, [M, 4 d].
    f: Vec<f32>,
    g: Vec<f32>,
}

/// A batch's forward state, reused from step to step (buffers are resized, not
/// reallocated, while the batch shape stays).
#[derive(Default)]
pub struct Cache {
    batch: usize,
    tokens: Vec<u32>,
    blocks: Vec<BlockActs>,
    x_final: Vec<f32>,
    stf: Vec<[f32; 2]>,
    hf: Vec<f32>,
    /// Logits, then (after the loss) dL/dlogits, [M, vocab].
    dlogits: Vec<f32>,
    /// Per-token loss in nats, [M].
    pub losses: Vec<f32>,
    /// How many targets the last forward's mean loss was taken over.
    pub trained: usize,
    lin: LinearScratch,
}

impl Cache {
    /// Head h of sequence b's attention weights in the last forward, [T, T] row-major:
    /// A[i, j] = exp(scale q_i . k_j - lse_i) for j <= i, recomputed from the kept Q, K
    /// and log-sum-exp (the kernel never forms the matrix).
    pub fn attention(&self, layout: &Layout, layer: usize, b: usize, h: usize) -> Vec<f32> {
        let s = &layout.shape;
        let (t, dh) = (s.context, s.d_head());
        let a = &self.blocks[layer];
        let head = (b * s.heads + h) * t;
        let scale = 1.0 / (dh as f64).sqrt();
        let mut w = vec![0.0f32; t * t];
        for i in 0..t {
            let q = &a.q[(head + i) * dh..][..dh];
            let l = a.lse[head + i] as f64;
            for j in 0..=i {
                let k = &a.k[(head + j) * dh..][..dh];
                let dot: f64 = q.iter().zip(k).map(|(&x, &y)| x as f64 * y as f64).sum();
                w[i * t + j] = (scale * dot - l).exp() as f32;
            }
        }
        w
    }
}

/// `v` resized to `n` for an operation that writes every element (layer norm, the head
/// split and merge, a linear layer, GELU, the loss): its old values are left in place
/// rather than zeroed first, which was 3% of a training step.
fn sized<T: Clone + Default>(v: &mut Vec<T>, n: usize) {
    v.resize(n, T::default());
}

fn attn_problem(layout: &Layout, batch: usize) -> Result<(ProblemShape, AttnSpec)> {
    let s = &layout.shape;
    let dims = [batch, s.heads, s.context, s.d_head()];
    let shape = ProblemShape::from_dims(dims, dims, dims)?;
    let mask = Mask::resolve(&MaskKind::Causal, batch, s.heads, s.context, s.context)?;
    Ok((shape, AttnSpec::new(&shape, mask, false, None)))
}

fn kopts(threads: usize) -> KernelOptions {
    KernelOptions {
        threads: Some(threads),
        ..Default::default()
    }
}

/// The forward over `batch` sequences of `context` tokens (`tokens` [B*T]), and the mean
/// cross-entropy against `targets` [B*T] over the targets `trained` marks (all when
/// `None`; [`backward`] differentiates that mean). Keeps every activation in `cache`;
/// every token's loss in `cache.losses`.
#[allow(clippy::too_many_arguments)]
pub fn forward(
    layout: &Layout,
    p: &[f32],
    tokens: &[u32],
    targets: &[u32],
    trained: Option<&[bool]>,
    batch: usize,
    threads: usize,
    cache: &mut Cache,
) -> Result<f64> {
    forward_ablated(
        layout,
        p,
        tokens,
        targets,
        trained,
        batch,
        threads,
        cache,
        &[],
    )
}

/// [`forward`] with the heads `ablate` lists, (layer, head), zeroed: their output is
/// removed before the attention's output projection, as a forward pre-hook on GPT-2's
/// `c_proj` that zeroes the head's slice would. For measuring only: the next
/// [`backward`] would not differentiate the ablation.
#[allow(clippy::too_many_arguments)]
pub fn forward_ablated(
    layout: &Layout,
    p: &[f32],
    tokens: &[u32],
    targets: &[u32],
    trained: Option<&[bool]>,
    batch: usize,
    threads: usize,
    cache: &mut Cache,
    ablate: &[(usize, usize)],
) -> Result<f64> {
    let s = layout.shape;
    let (t, d, f, v) = (s.context, s.d_model, s.d_ff(), s.vocab);
    let m = batch * t;
    if tokens.len() != m
        || targets.len() != m
        || trained.is_some_and(|t| t.len() != m)
        || p.len() != layout.total
    {
        return Err(Error::Internal(format!(
            "train forward: {} tokens and {} targets for {batch} x {t}, {} parameters for {}",
            tokens.len(),
            targets.len(),
            p.len(),
            layout.total
        )));
    }
    if let Some(&bad) = tokens.iter().chain(targets).find(|&&x| x as usize >= v) {
        return Err(Error::Internal(format!(
            "token {bad} is outside the vocabulary of {v}"
        )));
    }
    let heads = Heads {
        batch,
        t,
        heads: s.heads,
        dh: s.d_head(),
    };
    let (shape, spec) = attn_problem(layout, batch)?;
    cache.batch = batch;
    cache.tokens.clear();
    cache.tokens.extend_from_slice(tokens);
    cache.blocks.resize_with(s.layers, BlockActs::default);
    let mut x = vec![0.0f32; m * d];
    ops::embed(
        tokens,
        &p[layout.wte.clone()],
        &p[layout.wpe.clone()],
        t,
        d,
        &mut x,
    );
    for (layer, (lr, a)) in layout
        .layers
        .iter()
        .zip(cache.blocks.iter_mut())
        .enumerate()
    {
        sized(&mut a.st1, m);
        sized(&mut a.h1, m * d);
        ops::layer_norm(
            &x,
            d,
            &p[lr.ln1_g.clone()],
            &p[lr.ln1_b.clone()],
            &mut a.h1,
            &mut a.st1,
        );
        a.x_in.clear();
        a.x_in.extend_from_slice(&x);
        let mut qkv = vec![0.0f32; m * 3 * d];
        linear::forward(
            &a.h1,
            m,
            d,
            &p[lr.qkv_w.clone()],
            3 * d,
            Some(&p[lr.qkv_b.clone()]),
            &mut qkv,
            &mut cache.lin,
            threads,
        )?;
        for (part, buf) in [&mut a.q, &mut a.k, &mut a.v].into_iter().enumerate() {
            sized(buf, m * d);
            heads.split(&qkv, 3, part, buf);
        }
        let r = kernel::attention(&shape, &a.q, &a.k, &a.v, &spec, &kopts(threads))?;
        a.o = r.out;
        a.lse = r.lse;
        sized(&mut a.y, m * d);
        heads.merge(&a.o, 1, 0, &mut a.y);
        for &(_, h) in ablate.iter().filter(|(l, _)| *l == layer) {
            let dh = s.d_head();
            for row in a.y.chunks_exact_mut(d) {
                row[h * dh..(h + 1) * dh].fill(0.0);
            }
        }
        let mut proj = vec![0.0f32; m * d];
        linear::forward(
            &a.y,
            m,
            d,
            &p[lr.proj_w.clone()],
            d,
            Some(&p[lr.proj_b.clone()]),
            &mut proj,
            &mut cache.lin,
            threads,
        )?;
        for (xv, pv) in x.iter_mut().zip(&proj) {
            *xv += pv;
        }
        a.x_mid.clear();
        a.x_mid.extend_from_slice(&x);
        sized(&mut a.st2, m);
        sized(&mut a.h2, m * d);
        ops::layer_norm(
            &x,
            d,
            &p[lr.ln2_g.clone()],
            &p[lr.ln2_b.clone()],
            &mut a.h2,
            &mut a.st2,
        );
        sized(&mut a.f, m * f);
        linear::forward(
            &a.h2,
            m,
            d,
            &p[lr.fc_w.clone()],
            f,
            Some(&p[lr.fc_b.clone()]),
            &mut a.f,
            &mut cache.lin,
            threads,
        )?;
        sized(&mut a.g, m * f);
        ops::gelu(&a.f, &mut a.g);
        linear::forward(
            &a.g,
            m,
            f,
            &p[lr.out_w.clone()],
            d,
            Some(&p[lr.out_b.clone()]),
            &mut proj,
            &mut cache.lin,
            threads,
        )?;
        for (xv, pv) in x.iter_mut().zip(&proj) {
            *xv += pv;
        }
    }
    sized(&mut cache.stf, m);
    sized(&mut cache.hf, m * d);
    ops::layer_norm(
        &x,
        d,
        &p[layout.lnf_g.clone()],
        &p[layout.lnf_b.clone()],
        &mut cache.hf,
        &mut cache.stf,
    );
    cache.x_final = x;
    sized(&mut cache.dlogits, m * v);
    linear::forward(
        &cache.hf,
        m,
        d,
        &p[layout.wte.clone()],
        v,
        None,
        &mut cache.dlogits,
        &mut cache.lin,
        threads,
    )?;
    sized(&mut cache.losses, m);
    let count =
        ops::cross_entropy_masked(&mut cache.dlogits, v, targets, trained, &mut cache.losses);
    cache.trained = count;
    let sum: f64 = match trained {
        None => cache.losses.iter().map(|&l| l as f64).sum(),
        Some(t) => cache
            .losses
            .iter()
            .zip(t)
            .filter(|(_, t)| **t)
            .map(|(&l, _)| l as f64)
            .sum(),
    };
    let mean = if count == 0 { 0.0 } else { sum / count as f64 };
    if !mean.is_finite() {
        return Err(Error::usage(format!(
            "the training loss became {mean}: the learning rate is too high for this model (try a smaller --lr)"
        )));
    }
    Ok(mean)
}

/// dL/dθ of the last [`forward`]'s mean loss, written to `grads` (same layout as the
/// parameters; overwritten).
pub fn backward(
    layout: &Layout,
    p: &[f32],
    cache: &mut Cache,
    grads: &mut [f32],
    threads: usize,
) -> Result<()> {
    let s = layout.shape;
    let (t, d, f, v) = (s.context, s.d_model, s.d_ff(), s.vocab);
    let batch = cache.batch;
    let m = batch * t;
    let heads = Heads {
        batch,
        t,
        heads: s.heads,
        dh: s.d_head(),
    };
    let (shape, spec) = attn_problem(layout, batch)?;
    grads.fill(0.0);
    let scr = &mut cache.lin;
    // Unembedding (tied): logits = hf wte^T.
    let mut dx_f = vec![0.0f32; m * d];
    linear::backward(
        &cache.dlogits,
        &cache.hf,
        m,
        d,
        &p[layout.wte.clone()],
        v,
        Some(&mut dx_f),
        &mut grads[layout.wte.clone()],
        None,
        scr,
        threads,
    )?;
    let mut dx = vec![0.0f32; m * d];
    {
        let (dg, db) = two(grads, &layout.lnf_g, &layout.lnf_b);
        ops::layer_norm_backward(
            &dx_f,
            &cache.x_final,
            d,
            &p[layout.lnf_g.clone()],
            &cache.stf,
            &mut dx,
            dg,
            db,
        );
    }
    let mut dh = vec![0.0f32; m * f];
    let mut dh_d = vec![0.0f32; m * d];
    for (lr, a) in layout.layers.iter().zip(cache.blocks.iter()).rev() {
        // MLP: x += c_proj(gelu(c_fc(ln_2(x)))).
        dh.fill(0.0);
        {
            let (dw, db) = two(grads, &lr.out_w, &lr.out_b);
            linear::backward(
                &dx,
                &a.g,
                m,
                f,
                &p[lr.out_w.clone()],
                d,
                Some(&mut dh),
                dw,
                Some(db),
                scr,
                threads,
            )?;
        }
        ops::gelu_backward(&a.f, &mut dh);
        dh_d.fill(0.0);
        {
            let (dw, db) = two(grads, &lr.fc_w, &lr.fc_b);
            linear::backward(
                &dh,
                &a.h2,
                m,
                d,
                &p[lr.fc_w.clone()],
                f,
                Some(&mut dh_d),
                dw,
                Some(db),
                scr,
                threads,
            )?;
        }
        {
            let (dg, db) = two(grads, &lr.ln2_g, &lr.ln2_b);
            ops::layer_norm_backward(
                &dh_d,
                &a.x_mid,
                d,
                &p[lr.ln2_g.clone()],
                &a.st2,
                &mut dx,
                dg,
                db,
            );
        }
        // Attention: x += c_proj(attn(c_attn(ln_1(x)))).
        let mut dy = vec![0.0f32; m * d];
        {
            let (dw, db) = two(grads, &lr.proj_w, &lr.proj_b);
            linear::backward(
                &dx,
                &a.y,
                m,
                d,
                &p[lr.proj_w.clone()],
                d,
                Some(&mut dy),
                dw,
                Some(db),
                scr,
                threads,
            )?;
        }
        let mut dout = vec![0.0f32; m * d];
        heads.split(&dy, 1, 0, &mut dout);
        let inp = BackwardInputs {
            q: &a.q,
            k: &a.k,
            v: &a.v,
            out: &a.o,
            lse: &a.lse,
            dout: &dout,
        };
        let g = kernel::attention_backward(&shape, &inp, &spec, &kopts(threads))?;
        let mut dqkv = vec![0.0f32; m * 3 * d];
        for (part, buf) in [&g.dq, &g.dk, &g.dv].into_iter().enumerate() {
            heads.merge(buf, 3, part, &mut dqkv);
        }
        dh_d.fill(0.0);
        {
            let (dw, db) = two(grads, &lr.qkv_w, &lr.qkv_b);
            linear::backward(
                &dqkv,
                &a.h1,
                m,
                d,
                &p[lr.qkv_w.clone()],
                3 * d,
                Some(&mut dh_d),
                dw,
                Some(db),
                scr,
                threads,
            )?;
        }
        {
            let (dg, db) = two(grads, &lr.ln1_g, &lr.ln1_b);
            ops::layer_norm_backward(
                &dh_d,
                &a.x_in,
                d,
                &p[lr.ln1_g.clone()],
                &a.st1,
                &mut dx,
                dg,
                db,
            );
        }
    }
    let (dwte, dwpe) = two(grads, &layout.wte, &layout.wpe);
    ops::embed_backward(&cache.tokens, &dx, t, d, dwte, dwpe);
    Ok(())
}

/// Two disjoint ranges of one slice, mutably (`a` before `b`).
fn two<'a>(
    g: &'a mut [f32],
    a: &std::ops::Range<usize>,
    b: &std::ops::Range<usize>,
) -> (&'a mut [f32], &'a mut [f32]) {
    debug_assert!(a.end <= b.start);
    let (lo, hi) = g.split_at_mut(b.start);
    (&mut lo[a.clone()], &mut hi[..b.len()])
}
