//! Dense matrix products of the forward pass: y = x w^T (+ b) for x [m, k] and w [n, k],
//! both row-major (w as `nn.Linear` stores it), with threads, on the project's own kernels
//! in [`super::dense`] and [`super::gemv`]: a register-blocked product from two rows of x on (a forward over a
//! text, a prefill, the display weights' Q K^T), a matrix-vector product for one row (a
//! decode step).
//!
//! Why not the `gemm` crate, which this module used before: on stable Rust it runs AVX2
//! kernels on an AVX-512 CPU, it copies W into packed panels on every call (13% of a
//! SmolLM2-135M forward, about as much again with its AVX-512 kernels enabled through its
//! `x86-v4` feature), and its one-row path ignores the thread count. `matrixmultiply` has
//! no AVX-512 kernels and one global thread count.
//!
//! A quantized W (a GGUF model's) goes to [`super::qmatmul`] instead, which reads its blocks
//! in place.

use crate::error::{Error, Result};
use crate::model::dense::{self, Product};
use crate::model::gemv;
use crate::model::matrix::Matrix;
use crate::model::qmatmul::{self, QProduct};
use crate::model::weights::Linear;

/// y [m, n] = x [m, k] w^T (+ b), with w [n, k] and b [n]; `threads` >= 1 workers.
#[allow(clippy::too_many_arguments)]
pub fn matmul_nt(
    x: &[f32],
    m: usize,
    k: usize,
    w: &[f32],
    n: usize,
    bias: Option<&[f32]>,
    y: &mut [f32],
    threads: usize,
) -> Result<()> {
    if x.len() != m * k || w.len() != n * k || y.len() != m * n {
        return Err(Error::Internal(format!(
            "matmul shapes: x holds {} for [{m}, {k}], w {} for [{n}, {k}], y {} for [{m}, {n}]",
            x.len(),
            w.len(),
            y.len()
        )));
    }
    if let Some(b) = bias
        && b.len() != n
    {
        return Err(Error::Internal(format!(
            "matmul bias holds {} values for {n} outputs",
            b.len()
        )));
    }
    if m == 1 && k > 0 {
        return gemv::gemv(x, w, n, bias, y, threads);
    }
    let mut p = [Product { w, n, bias, y }];
    dense::products(x, m, k, &mut p, threads)
}

/// y [m, n] = x [m, k] w^T (+ b) for a matrix w [n, k] of any storage type.
#[allow(clippy::too_many_arguments)]
pub fn matmul_matrix(
    x: &[f32],
    m: usize,
    k: usize,
    w: &Matrix,
    n: usize,
    bias: Option<&[f32]>,
    y: &mut [f32],
    threads: usize,
) -> Result<()> {
    match w {
        Matrix::F32(w) => matmul_nt(x, m, k, w, n, bias, y, threads),
        Matrix::Quant(q) => {
            if q.rows() != n || q.cols() != k {
                return Err(Error::Internal(format!(
                    "matmul shapes: a {} matrix [{}, {}] for [{n}, {k}]",
                    q.ty().name(),
                    q.rows(),
                    q.cols()
                )));
            }
            qmatmul::products(x, m, k, &mut [QProduct { w: q, bias, y }], threads)
        }
    }
}

/// y [m, out] = x [m, in] w^T + b for one linear layer.
pub fn linear(x: &[f32], m: usize, lin: &Linear, y: &mut [f32], threads: usize) -> Result<()> {
    matmul_matrix(
        x,
        m,
        lin.in_dim,
        &lin.w,
        lin.out_dim,
        lin.b.as_deref(),
        y,
        threads,
    )
}

/// Several linear layers of the same x [m, in] (Q, K and V; gate and up) in one call:
/// x is packed once and the threads share out the rows of all of them.
pub fn linears(
    x: &[f32],
    m: usize,
    layers: &[&Linear],
    ys: &mut [&mut Vec<f32>],
    threads: usize,
) -> Result<()> {
    if layers.len() != ys.len() {
        return Err(Error::Internal(format!(
            "{} linear layers but {} outputs",
            layers.len(),
            ys.len()
        )));
    }
    for (lin, y) in layers.iter().zip(ys.iter_mut()) {
        y.resize(m * lin.out_dim, 0.0);
    }
    let Some(k) = layers.first().map(|l| l.in_dim) else {
        return Ok(());
    };
    let same_k = layers.iter().all(|l| l.in_dim == k);
    let all_quant = layers.iter().all(|l| {
        l.w.as_quant()
            .is_some_and(|q| q.rows() == l.out_dim && q.cols() == l.in_dim)
    });
    if same_k && all_quant {
        // x is quantized (or packed) once for all of them.
        let mut prods: Vec<QProduct> = layers
            .iter()
            .zip(ys.iter_mut())
            .map(|(lin, y)| QProduct {
                w: lin.w.as_quant().expect("checked"),
                bias: lin.b.as_deref(),
                y: y.as_mut_slice(),
            })
            .collect();
        return qmatmul::products(x, m, k, &mut prods, threads);
    }
    let all_f32: Option<Vec<&[f32]>> = layers.iter().map(|l| l.w.as_f32()).collect();
    let Some(ws) = all_f32.filter(|_| m > 1 && same_k) else {
        for (lin, y) in layers.iter().zip(ys.iter_mut()) {
            linear(x, m, lin, y, threads)?;
        }
        return Ok(());
    };
    let mut prods: Vec<Product> = layers
        .iter()
        .zip(ws)
        .zip(ys.iter_mut())
        .map(|((lin, w), y)| Product {
            w,
            n: lin.out_dim,
            bias: lin.b.as_deref(),
            y: y.as_mut_slice(),
        })
        .collect();
    dense::products(x, m, k, &mut prods, threads)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn reference(
        x: &[f32],
        m: usize,
        k: usize,
        w: &[f32],
        n: usize,
        b: Option<&[f32]>,
    ) -> Vec<f64> {
        let mut y = vec![0.0f64; m * n];
        for i in 0..m {
            for j in 0..n {
                let mut acc = b.map_or(0.0, |b| b[j] as f64);
                for t in 0..k {
                    acc += x[i * k + t] as f64 * w[j * k + t] as f64;
                }
                y[i * n + j] = acc;
            }
        }
        y
    }

    #[test]
    fn matches_f64_loop_on_odd_shapes_and_decode() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let shapes = [
            (1, 1, 1),
            (1, 37, 129),
            (1, 576, 200),
            (3, 5, 7),
            (13, 20, 24),
            (17, 33, 65),
            (64, 64, 64),
            (129, 96, 70),
        ];
        for &(m, k, n) in &shapes {
            for with_bias in [false, true] {
                for threads in [1, 2, 3] {
                    let x: Vec<f32> = (0..m * k).map(|_| rng.random_range(-1.0..1.0)).collect();
                    let w: Vec<f32> = (0..n * k).map(|_| rng.random_range(-1.0..1.0)).collect();
                    let b: Vec<f32> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
                    let b = with_bias.then_some(b.as_slice());
                    let mut y = vec![f32::NAN; m * n];
                    matmul_nt(&x, m, k, &w, n, b, &mut y, threads).unwrap();
                    let want = reference(&x, m, k, &w, n, b);
                    for (idx, (&got, &want)) in y.iter().zip(&want).enumerate() {
                        let tol = 1e-5 * (k as f64).sqrt() * (1.0 + want.abs());
                        assert!(
                            (got as f64 - want).abs() <= tol,
                            "[{m},{k}]x[{n},{k}]^T bias {with_bias} threads {threads} at {idx}: {got} vs {want}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn zero_inner_dimension_gives_the_bias() {
        let mut y = vec![f32::NAN; 6];
        matmul_nt(&[], 2, 0, &[], 3, Some(&[1.0, 2.0, 3.0]), &mut y, 1).unwrap();
        assert_eq!(y, [1.0, 2.0, 3.0, 1.0, 2.0, 3.0]);
    }

    #[test]
    fn wrong_lengths_are_an_error_not_a_panic() {
        let mut y = vec![0.0; 4];
        assert!(matmul_nt(&[0.0; 3], 2, 2, &[0.0; 4], 2, None, &mut y, 1).is_err());
    }
}
