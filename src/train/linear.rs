//! A linear layer y = x W^T + b and its gradients, every product on the model forward's
//! register-blocked kernel ([`crate::model::gemm::matmul_nt`], y = x w^T):
//!
//! - forward: y = x W^T, W [n, k] read in place;
//! - dx = dy W = dy (W^T)^T: the same product with W^T [k, n] as its w;
//! - dW = dy^T x: the same product of dy^T [n, m] and x^T [k, m], the sum over the m
//!   tokens running in order, so the bits do not depend on the thread count.
//!
//! The transposes are O(m (n + k)) copies beside the O(m n k) products.

use crate::error::Result;
use crate::model::gemm::matmul_nt;

use super::ops::{add_col_sums, transpose};

/// Reused transpose buffers (grown on demand, never shrunk).
#[derive(Default)]
pub struct LinearScratch {
    wt: Vec<f32>,
    dyt: Vec<f32>,
    xt: Vec<f32>,
    dx: Vec<f32>,
}

fn grown(v: &mut Vec<f32>, n: usize) -> &mut [f32] {
    if v.len() < n {
        v.resize(n, 0.0);
    }
    &mut v[..n]
}

/// y [m, n] = x [m, k] W^T + b.
#[allow(clippy::too_many_arguments)]
pub fn forward(
    x: &[f32],
    m: usize,
    k: usize,
    w: &[f32],
    n: usize,
    b: Option<&[f32]>,
    y: &mut [f32],
    threads: usize,
) -> Result<()> {
    matmul_nt(x, m, k, w, n, b, y, threads)
}

/// Gradients of y = x W^T + b: adds dy W to `dx` (if given), writes dy^T x to `dw`
/// (overwrites: each weight is used once per step) and adds the column sums of dy to
/// `db`.
#[allow(clippy::too_many_arguments)]
pub fn backward(
    dy: &[f32],
    x: &[f32],
    m: usize,
    k: usize,
    w: &[f32],
    n: usize,
    dx: Option<&mut [f32]>,
    dw: &mut [f32],
    db: Option<&mut [f32]>,
    scr: &mut LinearScratch,
    threads: usize,
) -> Result<()> {
    if let Some(dx) = dx {
        let wt = grown(&mut scr.wt, k * n);
        transpose(w, n, k, wt);
        let tmp = grown(&mut scr.dx, m * k);
        matmul_nt(dy, m, n, wt, k, None, tmp, threads)?;
        for (a, &b) in dx.iter_mut().zip(tmp.iter()) {
            *a += b;
        }
    }
    let dyt = grown(&mut scr.dyt, n * m);
    transpose(dy, m, n, dyt);
    let xt = grown(&mut scr.xt, k * m);
    transpose(x, m, k, xt);
    matmul_nt(dyt, n, m, xt, k, None, dw, threads)?;
    if let Some(db) = db {
        add_col_sums(dy, n, db);
    }
    Ok(())
}
