//! y = W x (+ b) for one row of tokens (a decode step): rows of W dotted with x along the
//! vector lanes, [`GEMV_ROWS`] rows x 2 accumulators at a time (8 independent FMA chains),
//! threads splitting W's rows. The product is bound by reading W (every weight once per
//! token), so a second thread adds memory bandwidth; each row is summed by one thread in
//! one order, so 1 and N threads give the same bits.

use pulp::{Simd, WithSimd};

use crate::error::{Error, Result};
use crate::kernel::{Tier, team};

/// Rows of W per matrix-vector block.
const GEMV_ROWS: usize = 4;

/// Below this many weights a matrix-vector product stays on one thread: waking the
/// workers costs more than it saves.
const GEMV_PAR_MIN: usize = 1 << 16;

/// y [n] = W [n, k] x [k] (+ bias), W row-major, with `threads` workers.
pub fn gemv(
    x: &[f32],
    w: &[f32],
    n: usize,
    bias: Option<&[f32]>,
    y: &mut [f32],
    threads: usize,
) -> Result<()> {
    let k = x.len();
    if w.len() != n * k || y.len() != n || bias.is_some_and(|b| b.len() != n) {
        return Err(Error::Internal(format!(
            "matrix-vector product: W holds {} for [{n}, {k}], y {} for [{n}], bias {:?}",
            w.len(),
            y.len(),
            bias.map(<[f32]>::len)
        )));
    }
    if n == 0 {
        return Ok(());
    }
    let tier = Tier::detect();
    let threads = if n * k < GEMV_PAR_MIN {
        1
    } else {
        threads.clamp(1, n.div_ceil(GEMV_ROWS))
    };
    let run = |(t, yc): (usize, &mut [f32])| {
        let j0 = t * per_thread(n, threads);
        tier.dispatch(Gemv {
            x,
            w: &w[j0 * k..(j0 + yc.len()) * k],
            bias: bias.map(|b| &b[j0..j0 + yc.len()]),
            y: yc,
        });
    };
    if threads == 1 {
        run((0, y));
    } else {
        let per = per_thread(n, threads);
        let mut parts: Vec<&mut [f32]> = y.chunks_mut(per).collect();
        team::for_each_mut(threads, &mut parts, &|t, yc| run((t, yc)))?;
    }
    Ok(())
}

/// Rows per thread: a whole number of blocks, all threads but the last the same.
fn per_thread(n: usize, threads: usize) -> usize {
    n.div_ceil(threads).next_multiple_of(GEMV_ROWS)
}

/// y = W x (+ bias) for the rows of `w` (y.len() of them, x.len() values each).
struct Gemv<'a> {
    x: &'a [f32],
    w: &'a [f32],
    bias: Option<&'a [f32]>,
    y: &'a mut [f32],
}

impl WithSimd for Gemv<'_> {
    type Output = ();
    #[inline(always)]
    fn with_simd<S: Simd>(self, s: S) {
        let k = self.x.len();
        let (xv, xtail) = S::as_simd_f32s(self.x);
        let zero = s.splat_f32s(0.0);
        for (blk, yb) in self.y.chunks_mut(GEMV_ROWS).enumerate() {
            let j0 = blk * GEMV_ROWS;
            // GEMV_ROWS rows x 2 accumulators: 8 independent FMA chains.
            let mut acc = [[zero; 2]; GEMV_ROWS];
            let rows: [&[f32]; GEMV_ROWS] = std::array::from_fn(|r| {
                if r < yb.len() {
                    &self.w[(j0 + r) * k..][..k]
                } else {
                    &self.w[j0 * k..][..k]
                }
            });
            let wv: [&[S::f32s]; GEMV_ROWS] = std::array::from_fn(|r| S::as_simd_f32s(rows[r]).0);
            let pairs = xv.len() / 2;
            for i in 0..pairs {
                let (x0, x1) = (xv[2 * i], xv[2 * i + 1]);
                for (a, w) in acc.iter_mut().zip(&wv) {
                    a[0] = s.mul_add_e_f32s(w[2 * i], x0, a[0]);
                    a[1] = s.mul_add_e_f32s(w[2 * i + 1], x1, a[1]);
                }
            }
            if xv.len() % 2 == 1 {
                let i = xv.len() - 1;
                for (a, w) in acc.iter_mut().zip(&wv) {
                    a[0] = s.mul_add_e_f32s(w[i], xv[i], a[0]);
                }
            }
            let tail0 = k - xtail.len();
            for (r, y) in yb.iter_mut().enumerate() {
                let mut sum = s.reduce_sum_f32s(s.add_f32s(acc[r][0], acc[r][1]));
                for (wt, xt) in rows[r][tail0..].iter().zip(xtail) {
                    sum += wt * xt;
                }
                *y = sum + self.bias.map_or(0.0, |b| b[j0 + r]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::available_tiers;

    fn val(i: usize, salt: usize) -> f32 {
        (((i * 7919 + salt * 104_729) % 211) as f32 / 211.0) - 0.5
    }

    fn reference(x: &[f32], w: &[f32], n: usize, b: &[f32]) -> Vec<f64> {
        let k = x.len();
        (0..n)
            .map(|j| {
                b[j] as f64
                    + (0..k)
                        .map(|t| x[t] as f64 * w[j * k + t] as f64)
                        .sum::<f64>()
            })
            .collect()
    }

    #[test]
    fn gemv_matches_f64_on_every_tier_and_threads() {
        for tier in available_tiers() {
            for &(k, n) in &[
                (1, 1),
                (7, 5),
                (16, 4),
                (33, 9),
                (64, 64),
                (100, 700),
                (576, 130),
            ] {
                let x: Vec<f32> = (0..k).map(|i| val(i, 7)).collect();
                let w: Vec<f32> = (0..n * k).map(|i| val(i, 8)).collect();
                let b: Vec<f32> = (0..n).map(|i| val(i, 9)).collect();
                let want = reference(&x, &w, n, &b);
                let mut y = vec![f32::NAN; n];
                tier.dispatch(Gemv {
                    x: &x,
                    w: &w,
                    bias: Some(&b),
                    y: &mut y,
                });
                for (j, (&got, &want)) in y.iter().zip(&want).enumerate() {
                    let tol = 1e-6 * (k as f64).sqrt() * (1.0 + want.abs());
                    assert!(
                        (got as f64 - want).abs() <= tol,
                        "{tier} [{n},{k}] at {j}: {got} vs {want}"
                    );
                }
                for threads in [1, 2, 3] {
                    let mut yt = vec![f32::NAN; n];
                    gemv(&x, &w, n, Some(&b), &mut yt, threads).unwrap();
                    let mut y1 = vec![f32::NAN; n];
                    gemv(&x, &w, n, Some(&b), &mut y1, 1).unwrap();
                    assert_eq!(yt, y1, "[{n},{k}] threads {threads}");
                }
            }
        }
        assert!(gemv(&[1.0; 3], &[0.0; 5], 2, None, &mut [0.0; 2], 1).is_err());
    }
}
