//! An f64 reference of the trained model, written plainly (naive causal attention, every
//! op in f64) in the same parameter layout as `attnviz::train`: the truth the engine's
//! f32 forward, its backward (through central finite differences of this forward) and
//! its training step are checked against.
#![allow(dead_code)]

use attnviz::train::params::Layout;

pub const LN_EPS: f64 = 1e-5;

pub fn layer_norm(x: &[f64], d: usize, g: &[f64], b: &[f64]) -> Vec<f64> {
    let mut y = vec![0.0; x.len()];
    for (xr, yr) in x.chunks(d).zip(y.chunks_mut(d)) {
        let mean = xr.iter().sum::<f64>() / d as f64;
        let var = xr.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / d as f64;
        let r = 1.0 / (var + LN_EPS).sqrt();
        for j in 0..d {
            yr[j] = (xr[j] - mean) * r * g[j] + b[j];
        }
    }
    y
}

pub fn gelu(x: f64) -> f64 {
    let c = (2.0 / std::f64::consts::PI).sqrt();
    0.5 * x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh())
}

/// y [m, n] = x [m, k] w^T + b, w [n, k].
pub fn linear(x: &[f64], m: usize, k: usize, w: &[f64], n: usize, b: Option<&[f64]>) -> Vec<f64> {
    let mut y = vec![0.0; m * n];
    for i in 0..m {
        for o in 0..n {
            let mut s = b.map_or(0.0, |b| b[o]);
            for p in 0..k {
                s += x[i * k + p] * w[o * k + p];
            }
            y[i * n + o] = s;
        }
    }
    y
}

/// Mean cross-entropy of rows of `logits` [m, v].
pub fn cross_entropy(logits: &[f64], v: usize, targets: &[u32]) -> f64 {
    let mut total = 0.0;
    for (row, &t) in logits.chunks(v).zip(targets) {
        let max = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let lse = max + row.iter().map(|x| (x - max).exp()).sum::<f64>().ln();
        total += lse - row[t as usize];
    }
    total / targets.len() as f64
}

/// Causal multi-head attention of qkv rows [B*T, 3d] -> [B*T, d].
pub fn attention(qkv: &[f64], batch: usize, t: usize, heads: usize, dh: usize) -> Vec<f64> {
    let d = heads * dh;
    let mut y = vec![0.0; batch * t * d];
    let scale = 1.0 / (dh as f64).sqrt();
    for b in 0..batch {
        for h in 0..heads {
            let at =
                |i: usize, part: usize, c: usize| qkv[(b * t + i) * 3 * d + part * d + h * dh + c];
            for i in 0..t {
                let s: Vec<f64> = (0..=i)
                    .map(|j| scale * (0..dh).map(|c| at(i, 0, c) * at(j, 1, c)).sum::<f64>())
                    .collect();
                let max = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = s.iter().map(|x| (x - max).exp()).collect();
                let z: f64 = e.iter().sum();
                for c in 0..dh {
                    y[(b * t + i) * d + h * dh + c] = (0..=i).map(|j| e[j] / z * at(j, 2, c)).sum();
                }
            }
        }
    }
    y
}

/// The model's mean loss in f64.
pub fn loss(l: &Layout, p: &[f64], tokens: &[u32], targets: &[u32], batch: usize) -> f64 {
    loss_masked(l, p, tokens, targets, None, batch)
}

/// [`loss`] with the mean over the targets `trained` marks.
pub fn loss_masked(
    l: &Layout,
    p: &[f64],
    tokens: &[u32],
    targets: &[u32],
    trained: Option<&[bool]>,
    batch: usize,
) -> f64 {
    let s = l.shape;
    let (t, d, f, v) = (s.context, s.d_model, s.d_ff(), s.vocab);
    let m = batch * t;
    let r = |x: &std::ops::Range<usize>| &p[x.clone()];
    let mut x = vec![0.0; m * d];
    for i in 0..m {
        for c in 0..d {
            x[i * d + c] =
                p[l.wte.start + tokens[i] as usize * d + c] + p[l.wpe.start + (i % t) * d + c];
        }
    }
    for lr in &l.layers {
        let h1 = layer_norm(&x, d, r(&lr.ln1_g), r(&lr.ln1_b));
        let qkv = linear(&h1, m, d, r(&lr.qkv_w), 3 * d, Some(r(&lr.qkv_b)));
        let y = attention(&qkv, batch, t, s.heads, s.d_head());
        let a = linear(&y, m, d, r(&lr.proj_w), d, Some(r(&lr.proj_b)));
        x.iter_mut().zip(&a).for_each(|(x, a)| *x += a);
        let h2 = layer_norm(&x, d, r(&lr.ln2_g), r(&lr.ln2_b));
        let mut u = linear(&h2, m, d, r(&lr.fc_w), f, Some(r(&lr.fc_b)));
        u.iter_mut().for_each(|z| *z = gelu(*z));
        let o = linear(&u, m, f, r(&lr.out_w), d, Some(r(&lr.out_b)));
        x.iter_mut().zip(&o).for_each(|(x, o)| *x += o);
    }
    let hf = layer_norm(&x, d, r(&l.lnf_g), r(&l.lnf_b));
    let logits = linear(&hf, m, d, r(&l.wte), v, None);
    match trained {
        None => cross_entropy(&logits, v, targets),
        Some(mask) => {
            let (mut rows, mut tg) = (Vec::new(), Vec::new());
            for (i, &on) in mask.iter().enumerate() {
                if on {
                    rows.extend_from_slice(&logits[i * v..(i + 1) * v]);
                    tg.push(targets[i]);
                }
            }
            cross_entropy(&rows, v, &tg)
        }
    }
}

/// Central differences of `f` at `x`, step `eps`, for every coordinate.
pub fn numeric_grad(x: &[f64], eps: f64, f: impl Fn(&[f64]) -> f64) -> Vec<f64> {
    let mut x = x.to_vec();
    (0..x.len())
        .map(|i| {
            let x0 = x[i];
            x[i] = x0 + eps;
            let up = f(&x);
            x[i] = x0 - eps;
            let down = f(&x);
            x[i] = x0;
            (up - down) / (2.0 * eps)
        })
        .collect()
}

/// Largest |a - b| / (atol + rtol |b|) over the pairs: <= 1 passes.
pub fn worst(a: &[f32], b: &[f64], atol: f64, rtol: f64) -> (f64, usize) {
    a.iter()
        .zip(b)
        .enumerate()
        .map(|(i, (&x, &y))| ((x as f64 - y).abs() / (atol + rtol * y.abs()), i))
        .fold((0.0, 0), |m, v| if v.0 > m.0 { v } else { m })
}
