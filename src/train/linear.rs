//! A linear layer y = x W^T + b and its gradients on the project's register-blocked
//! products:
//!
//! - forward: y = b + x W^T on the same product, x read in place (A, each element
//!   broadcast) against W^T (B, a transposed copy of the small weight); the model
//!   forward's kernel ([`crate::model::gemm::matmul_nt`]) would first pack all of x;
//! - backward: the backward tile's general product C (+)= A B ([`crate::kernel::gemm`]),
//!   which reads A at any stride: dx += dy W (A = dy, B = W) and dW = dy^T x (A = dy read
//!   column by column, B = x), with no transposed copies; the rows of C are shared out
//!   among the threads, and every sum runs over its inner index in order, so the bits do
//!   not depend on the thread count.
//!
//! That product needs rows of whole vectors (the forward: n a multiple of the SIMD width;
//! the backward: k); other shapes (tiny test shapes) take the model forward's kernel,
//! on transposed copies for the backward.

use rayon::prelude::*;

use crate::error::Result;
use crate::kernel::gemm::{Dims, MatA, Product};
use crate::kernel::{Tier, thread_pool};
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
    scr: &mut LinearScratch,
    threads: usize,
) -> Result<()> {
    let tier = Tier::detect();
    if !n.is_multiple_of(tier.lanes()) {
        return matmul_nt(x, m, k, w, n, b, y, threads);
    }
    // y [m, n] = b + x [m, k] W^T [k, n]: W^T is small (n x k), x is read in place.
    let wt = grown(&mut scr.wt, k * n);
    transpose(w, n, k, wt);
    let y = &mut y[..m * n];
    match b {
        Some(b) => y
            .chunks_exact_mut(n.max(1))
            .for_each(|row| row.copy_from_slice(b)),
        None => y.fill(0.0),
    }
    let a = MatA { a: x, rs: k, cs: 1 };
    let dims = Dims {
        m,
        n,
        k,
        ldb: n,
        ldc: n,
    };
    product(tier, a, wt, y, dims, true, threads)
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
    let tier = Tier::detect();
    if k.is_multiple_of(tier.lanes()) {
        if let Some(dx) = dx {
            // dx [m, k] += dy [m, n] W [n, k].
            let a = MatA {
                a: dy,
                rs: n,
                cs: 1,
            };
            product(
                tier,
                a,
                w,
                dx,
                Dims {
                    m,
                    n: k,
                    k: n,
                    ldb: k,
                    ldc: k,
                },
                true,
                threads,
            )?;
        }
        // dW [n, k] = dy^T [n, m] x [m, k].
        let a = MatA {
            a: dy,
            rs: 1,
            cs: n,
        };
        product(
            tier,
            a,
            x,
            dw,
            Dims {
                m: n,
                n: k,
                k: m,
                ldb: k,
                ldc: k,
            },
            false,
            threads,
        )?;
        if let Some(db) = db {
            add_col_sums(dy, n, db);
        }
        return Ok(());
    }
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

/// C (+)= A B with the rows of C split among `threads` workers.
fn product(
    tier: Tier,
    a: MatA<'_>,
    b: &[f32],
    c: &mut [f32],
    dims: Dims,
    accumulate: bool,
    threads: usize,
) -> Result<()> {
    if dims.m == 0 {
        return Ok(());
    }
    let parts = threads.clamp(1, dims.m.div_ceil(6));
    let rows = dims.m.div_ceil(parts);
    let job = |(i, c): (usize, &mut [f32])| {
        let r0 = i * rows;
        let m = rows.min(dims.m - r0);
        tier.dispatch(Product {
            a: MatA {
                a: &a.a[r0 * a.rs..],
                ..a
            },
            b,
            c,
            dims: Dims { m, ..dims },
            accumulate,
        });
    };
    let c = &mut c[..dims.m * dims.ldc];
    if parts == 1 {
        job((0, c));
    } else {
        thread_pool(parts)?.install(|| c.par_chunks_mut(rows * dims.ldc).enumerate().for_each(job));
    }
    Ok(())
}
