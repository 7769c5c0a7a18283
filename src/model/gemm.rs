//! Dense matrix products of the forward pass: y = x w^T (+ b) for x [m, k] and w [n, k],
//! both row-major (w as `nn.Linear` stores it), with threads.
//!
//! Built on the `gemm` crate rather than the kernel's own micro-kernels or
//! `matrixmultiply`: the kernel's micro-kernels are shaped for one attention tile (a
//! query block against a key block, d <= a few hundred) and have no packing of large
//! operands, while a model's projections are [128, 576] x [576, 1536] and its LM head
//! [128, 576] x [576, 49152]; `gemm` packs both operands into cache-sized panels, dispatches
//! AVX-512 / AVX2+FMA / NEON micro-kernels at run time, and splits the work over rayon
//! threads, which `matrixmultiply` does only with a global thread count and without
//! AVX-512. Its m = 1 path (a decode step) is a threaded matrix-vector product.

use gemm::Parallelism;

use crate::error::{Error, Result};
use crate::kernel::thread_pool;
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
    if m == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        fill_bias(y, n, bias);
        return Ok(());
    }
    let read_dst = bias.is_some();
    if read_dst {
        fill_bias(y, n, bias);
    }
    let mut run = |par: Parallelism| {
        // SAFETY: the lengths were checked above: x is [m, k] (row stride k, column
        // stride 1), w^T is read as [k, n] through w's [n, k] (row stride 1, column
        // stride k), y is [m, n] (row stride n); the three do not overlap (y is a unique
        // borrow). dst := 1 * dst + 1 * x w^T when a bias was written, else x w^T.
        unsafe {
            gemm::gemm(
                m,
                n,
                k,
                y.as_mut_ptr(),
                1,
                n as isize,
                read_dst,
                x.as_ptr(),
                1,
                k as isize,
                w.as_ptr(),
                k as isize,
                1,
                1.0f32,
                1.0f32,
                false,
                false,
                false,
                par,
            )
        }
    };
    if threads <= 1 {
        run(Parallelism::None);
    } else {
        // `gemm` splits its work over the current rayon pool: run it in the kernel's
        // pool of this many threads, not in rayon's global one (all cores).
        thread_pool(threads)?.install(|| run(Parallelism::Rayon(threads)));
    }
    Ok(())
}

/// y [m, out] = x [m, in] w^T + b for one linear layer.
pub fn linear(x: &[f32], m: usize, lin: &Linear, y: &mut [f32], threads: usize) -> Result<()> {
    matmul_nt(
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

fn fill_bias(y: &mut [f32], n: usize, bias: Option<&[f32]>) {
    match bias {
        Some(b) => y.chunks_mut(n).for_each(|row| row.copy_from_slice(b)),
        None => y.fill(0.0),
    }
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
