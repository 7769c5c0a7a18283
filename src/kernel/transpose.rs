//! Q_i^T for a tile's score product: a block's query rows turned into columns and scaled,
//! `dst[c * ld + r] = src[r * d + c] * scale`.
//!
//! Written by hand because pulp's portable [`pulp::Simd`] has no two-source lane
//! permutes, and the plain loop's 4,096 strided scalar stores per 64-row block at d = 64
//! cost about 3 us on the Xeon (family 6, model 167): a fifth of a 128-key tile, so a
//! tenth of a whole block at N = 256. On AVX-512 whole 16 x 16 squares go through
//! registers instead: 16 row loads, four rounds of 16 `vpermt2ps` (each round swaps the
//! off-diagonal halves of every 2s x 2s block, s = 8, 4, 2, 1) and 16 column stores. The
//! rest of the block (rows or columns past the last whole square), and every other tier,
//! take the scalar loop. Both give the same bits: each value is one f32 product.

use pulp::Simd;

/// `dst[c * ld + r] = src[r * d + c] * scale` for `r < rows`, `c < d`; other entries of
/// `dst` are left as they are.
#[inline(always)]
pub(crate) fn transpose_scaled<S: Simd>(
    src: &[f32],
    rows: usize,
    d: usize,
    scale: f32,
    dst: &mut [f32],
    ld: usize,
) {
    assert!(src.len() >= rows * d && ld >= rows);
    assert!(d == 0 || dst.len() >= (d - 1) * ld + rows);
    let (mut rows_done, mut cols_done) = (0, d);
    #[cfg(target_arch = "x86_64")]
    if S::F32_LANES == 16 && std::arch::is_x86_feature_detected!("avx512f") {
        rows_done = rows / 16 * 16;
        cols_done = d / 16 * 16;
        for r0 in (0..rows_done).step_by(16) {
            for c0 in (0..cols_done).step_by(16) {
                // SAFETY: AVX-512F is available (checked above); rows r0..r0+16 <= rows
                // of columns c0..c0+16 <= d lie in `src`, and columns c0..c0+16 of rows
                // r0..r0+16 <= rows <= ld lie in `dst`, by the asserts above.
                unsafe {
                    square16(
                        src.as_ptr().add(r0 * d + c0),
                        d,
                        dst.as_mut_ptr().add(c0 * ld + r0),
                        ld,
                        scale,
                    );
                }
            }
        }
    }
    let scalar = |r: usize, c: usize, dst: &mut [f32]| dst[c * ld + r] = src[r * d + c] * scale;
    // Columns past the last whole square, for the rows the squares covered.
    for r in 0..rows_done {
        for c in cols_done..d {
            scalar(r, c, dst);
        }
    }
    // Rows past the last whole square, every column.
    for r in rows_done..rows {
        for c in 0..d {
            scalar(r, c, dst);
        }
    }
}

/// One 16 x 16 square: rows of `src` (stride `sld`) to columns of `dst` (stride `dld`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn square16(src: *const f32, sld: usize, dst: *mut f32, dld: usize, scale: f32) {
    use core::arch::x86_64::*;
    // SAFETY: the caller guarantees 16 rows of 16 readable f32s at `src` and 16 rows of
    // 16 writable f32s at `dst`.
    unsafe {
        let f = _mm512_set1_ps(scale);
        let mut m: [__m512; 16] =
            core::array::from_fn(|i| _mm512_mul_ps(_mm512_loadu_ps(src.add(i * sld)), f));
        // Round s: rows a = i, b = i + s (bit s of i clear) become
        // a' = [a[j] where bit s of j is clear, else b[j - s]],
        // b' = [a[j + s] where bit s of j is clear, else b[j]];
        // after s = 8, 4, 2, 1 the square is transposed.
        for s in [8usize, 4, 2, 1] {
            let lo: [i32; 16] =
                core::array::from_fn(|j| if j & s == 0 { j } else { 16 + j - s } as i32);
            let hi: [i32; 16] =
                core::array::from_fn(|j| if j & s == 0 { j + s } else { 16 + j } as i32);
            let (lo, hi) = (
                _mm512_loadu_si512(lo.as_ptr().cast()),
                _mm512_loadu_si512(hi.as_ptr().cast()),
            );
            for i in (0..16).filter(|i| i & s == 0) {
                let (a, b) = (m[i], m[i + s]);
                m[i] = _mm512_permutex2var_ps(a, lo, b);
                m[i + s] = _mm512_permutex2var_ps(a, hi, b);
            }
        }
        for (i, row) in m.iter().enumerate() {
            _mm512_storeu_ps(dst.add(i * dld), *row);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Run<'a> {
        src: &'a [f32],
        rows: usize,
        d: usize,
        ld: usize,
    }

    impl pulp::WithSimd for Run<'_> {
        type Output = Vec<f32>;
        fn with_simd<S: Simd>(self, _: S) -> Vec<f32> {
            let mut dst = vec![-7.0; self.d * self.ld];
            transpose_scaled::<S>(self.src, self.rows, self.d, 0.37, &mut dst, self.ld);
            dst
        }
    }

    #[test]
    fn every_tier_matches_the_scalar_definition_bit_for_bit() {
        for tier in crate::kernel::available_tiers() {
            for (rows, d) in [
                (64usize, 64usize),
                (16, 16),
                (17, 33),
                (5, 64),
                (64, 7),
                (48, 128),
                (0, 8),
            ] {
                let ld = rows.next_multiple_of(16) + 16;
                let src: Vec<f32> = (0..rows * d).map(|i| (i as f32 * 0.731).sin()).collect();
                let got = tier.dispatch(Run {
                    src: &src,
                    rows,
                    d,
                    ld,
                });
                for c in 0..d {
                    for r in 0..ld {
                        let want = if r < rows {
                            src[r * d + c] * 0.37
                        } else {
                            -7.0
                        };
                        assert_eq!(
                            got[c * ld + r].to_bits(),
                            want.to_bits(),
                            "{tier:?} rows {rows} d {d}: entry (c {c}, r {r})"
                        );
                    }
                }
            }
        }
    }
}
