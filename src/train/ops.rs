//! The element-wise and row-wise pieces of the model with their gradients: LayerNorm,
//! GELU (GPT-2's tanh form), softmax cross-entropy, embeddings, and the reshapes between
//! token rows [B*T, H*dh] and the attention kernel's heads [B, H, T, dh].
//!
//! Rows are independent, so every function here gives the same bits whatever the
//! thread count (they run on the calling thread: at these sizes they are a few percent
//! of a step).

use pulp::{Simd, WithSimd};

use crate::kernel::Tier;
use crate::kernel::exp::exp2;

/// LayerNorm epsilon, GPT-2's (`layer_norm_epsilon` in config.json).
pub const LN_EPS: f32 = 1e-5;

/// y = g * (x - mean) / sqrt(var + eps) + b per row of `d`; keeps mean and 1/std per row
/// for the backward.
pub fn layer_norm(
    x: &[f32],
    d: usize,
    g: &[f32],
    b: &[f32],
    y: &mut [f32],
    stats: &mut [[f32; 2]],
) {
    for ((xr, yr), st) in x
        .chunks_exact(d)
        .zip(y.chunks_exact_mut(d))
        .zip(stats.iter_mut())
    {
        let mean = xr.iter().map(|&v| v as f64).sum::<f64>() / d as f64;
        let var = xr.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / d as f64;
        let rstd = 1.0 / (var + LN_EPS as f64).sqrt();
        let (mean, rstd) = (mean as f32, rstd as f32);
        for (((yv, &xv), &gv), &bv) in yr.iter_mut().zip(xr).zip(g).zip(b) {
            *yv = (xv - mean) * rstd * gv + bv;
        }
        *st = [mean, rstd];
    }
}

/// Adds dL/dx to `dx`, and dL/dg, dL/db to `dg`, `db`, from dy and the forward's x and
/// statistics: dx = rstd (dxh - mean(dxh) - xh mean(dxh xh)), dxh = dy g.
#[allow(clippy::too_many_arguments)]
pub fn layer_norm_backward(
    dy: &[f32],
    x: &[f32],
    d: usize,
    g: &[f32],
    stats: &[[f32; 2]],
    dx: &mut [f32],
    dg: &mut [f32],
    db: &mut [f32],
) {
    let mut dgs = vec![0.0f64; d];
    let mut dbs = vec![0.0f64; d];
    for (((dyr, xr), dxr), st) in dy
        .chunks_exact(d)
        .zip(x.chunks_exact(d))
        .zip(dx.chunks_exact_mut(d))
        .zip(stats)
    {
        let [mean, rstd] = *st;
        let (mut s1, mut s2) = (0.0f32, 0.0f32);
        for j in 0..d {
            let xh = (xr[j] - mean) * rstd;
            let dxh = dyr[j] * g[j];
            s1 += dxh;
            s2 += dxh * xh;
            dgs[j] += (dyr[j] * xh) as f64;
            dbs[j] += dyr[j] as f64;
        }
        let (m1, m2) = (s1 / d as f32, s2 / d as f32);
        for j in 0..d {
            let xh = (xr[j] - mean) * rstd;
            dxr[j] += rstd * (dyr[j] * g[j] - m1 - xh * m2);
        }
    }
    for j in 0..d {
        dg[j] += dgs[j] as f32;
        db[j] += dbs[j] as f32;
    }
}

const GELU_C: f32 = 0.797_884_6; // sqrt(2 / pi)
const GELU_A: f32 = 0.044_715;

/// GPT-2's GELU (`gelu_new`): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), vectorised
/// (tanh from the kernel's 2^x; libm's tanhf was a quarter of a training step).
pub fn gelu(x: &[f32], y: &mut [f32]) {
    Tier::detect().dispatch(Gelu {
        x,
        g: y,
        backward: false,
    });
}

/// dx = dy * gelu'(x), in place over `dy`:
/// gelu' = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 0.044715 x^2).
pub fn gelu_backward(x: &[f32], dy: &mut [f32]) {
    Tier::detect().dispatch(Gelu {
        x,
        g: dy,
        backward: true,
    });
}

struct Gelu<'a> {
    x: &'a [f32],
    /// The output (forward) or dy, overwritten with dx (backward).
    g: &'a mut [f32],
    backward: bool,
}

impl WithSimd for Gelu<'_> {
    type Output = ();
    #[inline(always)]
    fn with_simd<S: Simd>(self, s: S) {
        let lanes = S::F32_LANES;
        let n = self.x.len().min(self.g.len());
        let (c, a) = (s.splat_f32s(GELU_C), s.splat_f32s(GELU_A));
        let (one, half) = (s.splat_f32s(1.0), s.splat_f32s(0.5));
        let zero = s.splat_f32s(0.0);
        let m2log2e = s.splat_f32s(-2.0 * std::f32::consts::LOG2_E);
        let a3 = s.splat_f32s(3.0 * GELU_A);
        let mut i = 0;
        while i < n {
            let w = lanes.min(n - i);
            let x = s.partial_load_f32s(&self.x[i..i + w]);
            let x2 = s.mul_f32s(x, x);
            let u = s.mul_f32s(c, s.mul_add_e_f32s(s.mul_f32s(a, x2), x, x));
            // tanh u = sign(u) (1 - e) / (1 + e), e = exp(-2 |u|) <= 1: no overflow.
            let e = exp2(s, s.mul_f32s(s.abs_f32s(u), m2log2e));
            let t = s.div_f32s(s.sub_f32s(one, e), s.add_f32s(one, e));
            let t = s.select_f32s(s.greater_than_or_equal_f32s(u, zero), t, s.neg_f32s(t));
            let out = if self.backward {
                let dy = s.partial_load_f32s(&self.g[i..i + w]);
                let dt = s.mul_f32s(
                    s.mul_f32s(s.sub_f32s(one, s.mul_f32s(t, t)), c),
                    s.mul_add_e_f32s(a3, x2, one),
                );
                let d = s.mul_f32s(half, s.add_f32s(s.add_f32s(one, t), s.mul_f32s(x, dt)));
                s.mul_f32s(dy, d)
            } else {
                s.mul_f32s(s.mul_f32s(half, x), s.add_f32s(one, t))
            };
            s.partial_store_f32s(&mut self.g[i..i + w], out);
            i += w;
        }
    }
}

/// Softmax cross-entropy of each row of `logits` [m, v] against `targets`: writes each
/// row's loss (nats) to `losses`, and overwrites `logits` with dL/dlogits of the mean
/// loss, (softmax - onehot) / m.
pub fn cross_entropy(logits: &mut [f32], v: usize, targets: &[u32], losses: &mut [f32]) {
    cross_entropy_masked(logits, v, targets, None, losses);
}

/// [`cross_entropy`] with the mean taken over the rows `trained` marks (all rows when
/// `None`): every row's loss is written to `losses`, but only the marked rows carry
/// gradient, (softmax - onehot) / (marked rows); the others' gradient is 0. Returns the
/// number of marked rows.
pub fn cross_entropy_masked(
    logits: &mut [f32],
    v: usize,
    targets: &[u32],
    trained: Option<&[bool]>,
    losses: &mut [f32],
) -> usize {
    let m = targets.len();
    let on = |i: usize| trained.is_none_or(|t| t[i]);
    let count = (0..m).filter(|&i| on(i)).count();
    let inv = if count == 0 { 0.0 } else { 1.0 / count as f32 };
    for (i, ((row, &t), loss)) in logits
        .chunks_exact_mut(v)
        .zip(targets)
        .zip(losses.iter_mut())
        .enumerate()
    {
        let max = row.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
        let t = t as usize;
        let zt = (row[t] - max) as f64;
        let mut sum = 0.0f64;
        for x in row.iter_mut() {
            *x = (*x - max).exp();
            sum += *x as f64;
        }
        // -ln p_t = ln(sum) - (x_t - max).
        *loss = (sum.ln() - zt) as f32;
        if !on(i) {
            row.fill(0.0);
            continue;
        }
        let s = (1.0 / sum) as f32;
        for x in row.iter_mut() {
            *x *= s * inv;
        }
        row[t] -= inv;
    }
    count
}

/// x[t] = wte[token t] + wpe[position t mod context] for rows of `d`.
pub fn embed(tokens: &[u32], wte: &[f32], wpe: &[f32], t_len: usize, d: usize, x: &mut [f32]) {
    for (i, (xr, &tok)) in x.chunks_exact_mut(d).zip(tokens).enumerate() {
        let e = &wte[tok as usize * d..][..d];
        let p = &wpe[(i % t_len) * d..][..d];
        for ((xv, &a), &b) in xr.iter_mut().zip(e).zip(p) {
            *xv = a + b;
        }
    }
}

/// Adds the embedding's gradients: each row of dx to its token's row of dwte and its
/// position's row of dwpe.
pub fn embed_backward(
    tokens: &[u32],
    dx: &[f32],
    t_len: usize,
    d: usize,
    dwte: &mut [f32],
    dwpe: &mut [f32],
) {
    for (i, (dr, &tok)) in dx.chunks_exact(d).zip(tokens).enumerate() {
        for (a, &g) in dwte[tok as usize * d..][..d].iter_mut().zip(dr) {
            *a += g;
        }
        for (a, &g) in dwpe[(i % t_len) * d..][..d].iter_mut().zip(dr) {
            *a += g;
        }
    }
}

/// a [rows, cols] -> a^T [cols, rows].
pub fn transpose(a: &[f32], rows: usize, cols: usize, out: &mut [f32]) {
    const B: usize = 16;
    for r0 in (0..rows).step_by(B) {
        for c0 in (0..cols).step_by(B) {
            for r in r0..(r0 + B).min(rows) {
                for c in c0..(c0 + B).min(cols) {
                    out[c * rows + r] = a[r * cols + c];
                }
            }
        }
    }
}

/// Sums of the columns of a [rows, n], added to `out` [n] (a bias's gradient).
pub fn add_col_sums(a: &[f32], n: usize, out: &mut [f32]) {
    let mut s = vec![0.0f64; n];
    for row in a.chunks_exact(n) {
        for (acc, &v) in s.iter_mut().zip(row) {
            *acc += v as f64;
        }
    }
    for (o, v) in out.iter_mut().zip(s) {
        *o += v as f32;
    }
}

/// Geometry of the reshapes between token rows and heads.
#[derive(Debug, Clone, Copy)]
pub struct Heads {
    pub batch: usize,
    pub t: usize,
    pub heads: usize,
    pub dh: usize,
}

impl Heads {
    /// Part `part` (0 = Q, 1 = K, 2 = V) of rows [B*T, parts*H*dh] -> [B, H, T, dh].
    pub fn split(&self, rows: &[f32], parts: usize, part: usize, out: &mut [f32]) {
        let Heads {
            batch,
            t,
            heads,
            dh,
        } = *self;
        let w = parts * heads * dh;
        for b in 0..batch {
            for h in 0..heads {
                for i in 0..t {
                    let src = &rows[(b * t + i) * w + (part * heads + h) * dh..][..dh];
                    out[((b * heads + h) * t + i) * dh..][..dh].copy_from_slice(src);
                }
            }
        }
    }

    /// [B, H, T, dh] -> part `part` of rows [B*T, parts*H*dh] (the inverse of `split`).
    pub fn merge(&self, x: &[f32], parts: usize, part: usize, rows: &mut [f32]) {
        let Heads {
            batch,
            t,
            heads,
            dh,
        } = *self;
        let w = parts * heads * dh;
        for b in 0..batch {
            for h in 0..heads {
                for i in 0..t {
                    let src = &x[((b * heads + h) * t + i) * dh..][..dh];
                    rows[(b * t + i) * w + (part * heads + h) * dh..][..dh].copy_from_slice(src);
                }
            }
        }
    }
}
