//! The activations of a quantized product as the int8 kernels take them: each row cut into
//! blocks (32 values for the 32-value weight types, 256 for the k-quants), each block
//! rounded to int8 levels of one f32 scale d = max |x| / 127, with the sums of every 16
//! levels for the weights' offsets and minimums (llama.cpp's Q8_0 / Q8_1 / Q8_K).
//!
//! The rounding is f32's `round` (half away from zero) of x / d computed as x * (1 / d);
//! [`Acts::new`] does it on AVX2 vectors where the CPU has them, with the same f32
//! operations and an exact round, so the levels are the same bits as the scalar loop's
//! (a block holding a NaN or an infinity takes the scalar loop).

use super::quant::QK_K;

/// How a kernel wants the activations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActFormat {
    /// f32 as they are.
    F32,
    /// int8 blocks of 32 values (llama.cpp's Q8_0/Q8_1, with an f32 scale).
    Q8x32,
    /// int8 blocks of 256 values (llama.cpp's Q8_K).
    Q8x256,
}

impl ActFormat {
    pub(crate) fn block(self) -> usize {
        match self {
            ActFormat::F32 => 1,
            ActFormat::Q8x32 => 32,
            ActFormat::Q8x256 => QK_K,
        }
    }
}

/// Activation rows [m, k] in one [`ActFormat`], the f32 values kept beside.
pub struct Acts<'a> {
    pub format: ActFormat,
    pub x: &'a [f32],
    pub k: usize,
    /// One scale per block.
    d: Vec<f32>,
    qs: Vec<i8>,
    /// Sum of every 16 consecutive quantized values.
    sums: Vec<i32>,
    /// Per block: its scale times the sum of its quantized values.
    ds: Vec<f32>,
}

/// One row of [`Acts`].
#[derive(Clone, Copy)]
pub struct ActRow<'a> {
    pub x: &'a [f32],
    pub d: &'a [f32],
    pub qs: &'a [i8],
    pub sums: &'a [i32],
    pub ds: &'a [f32],
}

impl<'a> Acts<'a> {
    /// Quantize the rows of x [m, k] (k a multiple of the format's block).
    pub fn new(format: ActFormat, x: &'a [f32], k: usize) -> Acts<'a> {
        let mut a = Acts {
            format,
            x,
            k,
            d: Vec::new(),
            qs: Vec::new(),
            sums: Vec::new(),
            ds: Vec::new(),
        };
        if format == ActFormat::F32 || k == 0 {
            return a;
        }
        let bl = format.block();
        assert!(k.is_multiple_of(bl) && x.len().is_multiple_of(k));
        a.d.reserve(x.len() / bl);
        a.qs.resize(x.len(), 0);
        a.sums.reserve(x.len() / 16);
        for (xb, qb) in x.chunks_exact(bl).zip(a.qs.chunks_exact_mut(bl)) {
            let d = quantize_block(xb, qb);
            a.d.push(d);
            let s0 = a.sums.len();
            a.sums.extend(
                qb.chunks_exact(16)
                    .map(|g| g.iter().map(|&q| q as i32).sum::<i32>()),
            );
            a.ds.push(d * a.sums[s0..].iter().sum::<i32>() as f32);
        }
        a
    }

    pub fn row(&self, t: usize) -> ActRow<'_> {
        let k = self.k;
        let x = &self.x[t * k..][..k];
        if self.format == ActFormat::F32 {
            return ActRow {
                x,
                d: &[],
                qs: &[],
                sums: &[],
                ds: &[],
            };
        }
        let nb = k / self.format.block();
        ActRow {
            x,
            d: &self.d[t * nb..][..nb],
            qs: &self.qs[t * k..][..k],
            sums: &self.sums[t * k / 16..][..k / 16],
            ds: &self.ds[t * nb..][..nb],
        }
    }
}

/// One block's levels into `qb` (as long as `xb`, a multiple of 16 values); returns its
/// scale d. On AVX2 vectors where the CPU has them, the same bits.
#[inline]
pub(crate) fn quantize_block(xb: &[f32], qb: &mut [i8]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 was detected; `x86::quantize` checks the lengths.
        if let Some(d) = unsafe { x86::quantize(xb, qb) } {
            return d;
        }
    }
    quantize_scalar(xb, qb)
}

/// One block's levels into `qb`; returns its scale d.
fn quantize_scalar(xb: &[f32], qb: &mut [i8]) -> f32 {
    let amax = xb.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let d = amax / 127.0;
    let id = if d > 0.0 { 1.0 / d } else { 0.0 };
    for (q, &v) in qb.iter_mut().zip(xb) {
        *q = (v * id).round().clamp(-127.0, 127.0) as i8;
    }
    d
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// [`super::quantize_scalar`] on AVX2 vectors, the same bits; None (nothing written)
    /// when the block holds a NaN or an infinity, which the scalar loop handles.
    /// `xb.len()` is a multiple of 16, and `qb` as long.
    #[target_feature(enable = "avx2")]
    #[inline]
    pub(super) unsafe fn quantize(xb: &[f32], qb: &mut [i8]) -> Option<f32> {
        assert!(xb.len().is_multiple_of(16) && qb.len() == xb.len());
        // SAFETY: every load and store below is inside xb / qb (lengths just checked).
        unsafe {
            let sign = _mm256_set1_ps(-0.0);
            let (mut big, mut nan) = (_mm256_setzero_ps(), _mm256_setzero_ps());
            for c in xb.chunks_exact(8) {
                let v = _mm256_loadu_ps(c.as_ptr());
                big = _mm256_max_ps(big, _mm256_andnot_ps(sign, v));
                nan = _mm256_or_ps(nan, _mm256_cmp_ps::<_CMP_UNORD_Q>(v, v));
            }
            let m = _mm_max_ps(_mm256_castps256_ps128(big), _mm256_extractf128_ps::<1>(big));
            let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
            let amax = _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
            if _mm256_movemask_ps(nan) != 0 || !amax.is_finite() {
                return None;
            }
            let d = amax / 127.0;
            let id = if d > 0.0 { 1.0 / d } else { 0.0 };
            let (idv, half, one) = (_mm256_set1_ps(id), _mm256_set1_ps(0.5), _mm256_set1_ps(1.0));
            let (lo, hi) = (_mm256_set1_ps(-127.0), _mm256_set1_ps(127.0));
            for (c, q) in xb.chunks_exact(16).zip(qb.chunks_exact_mut(16)) {
                let level = |v: __m256| {
                    let a = _mm256_mul_ps(v, idv);
                    // round half away from zero, exactly: t = trunc(a), a - t is exact,
                    // and |a - t| >= 0.5 moves t one away from zero.
                    let t = _mm256_round_ps::<{ _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC }>(a);
                    let frac = _mm256_andnot_ps(sign, _mm256_sub_ps(a, t));
                    let away = _mm256_and_ps(_mm256_cmp_ps::<_CMP_GE_OQ>(frac, half), one);
                    let r = _mm256_add_ps(t, _mm256_or_ps(away, _mm256_and_ps(a, sign)));
                    _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(r, lo), hi))
                };
                let i0 = level(_mm256_loadu_ps(c.as_ptr()));
                let i1 = level(_mm256_loadu_ps(c.as_ptr().add(8)));
                // i32 -> i16 -> i8 (values within +-127, no saturation); the packs work
                // per 128-bit lane, so put the lanes back in order.
                let w = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packs_epi32(i0, i1));
                let b =
                    _mm_packs_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256::<1>(w));
                _mm_storeu_si128(q.as_mut_ptr().cast(), b);
            }
            Some(d)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Blocks whose levels sit on the rounding's edges: exact halves (amax = 127 makes
    /// x * (1 / d) = x), the f32 just below a half, zeros, the largest level.
    fn edge_blocks() -> Vec<Vec<f32>> {
        let below_half = f32::from_bits(0.5f32.to_bits() - 1);
        let mut b = vec![0.0f32; 32];
        b[0] = 127.0;
        for (i, v) in [0.5, -0.5, 1.5, -2.5, 126.5, below_half, -below_half, 2.0]
            .into_iter()
            .enumerate()
        {
            b[1 + i] = v;
        }
        vec![b, vec![0.0; 32], vec![-3.0; 256]]
    }

    #[test]
    fn vector_levels_are_the_scalar_loops_bits() {
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2") {
            let mut r = ChaCha8Rng::seed_from_u64(5);
            let mut blocks = edge_blocks();
            for _ in 0..500 {
                let n = if r.random_range(0..2) == 0 { 32 } else { 256 };
                let scale = 10f32.powi(r.random_range(-6..4));
                blocks.push((0..n).map(|_| r.random_range(-1.0..1.0) * scale).collect());
            }
            for xb in &blocks {
                let (mut want, mut got) = (vec![0i8; xb.len()], vec![9i8; xb.len()]);
                let d = quantize_scalar(xb, &mut want);
                // SAFETY: AVX2 detected; lengths are multiples of 16.
                let dv = unsafe { x86::quantize(xb, &mut got) };
                assert_eq!(dv.map(f32::to_bits), Some(d.to_bits()), "{xb:?}");
                assert_eq!(got, want, "{xb:?}");
            }
            let mut nan = vec![1.0f32; 32];
            nan[7] = f32::NAN;
            // SAFETY: as above.
            assert_eq!(unsafe { x86::quantize(&nan, &mut [0; 32]) }, None);
            return;
        }
        eprintln!("skipped: no AVX2 on this CPU (the scalar loop is the only one)");
    }

    #[test]
    fn a_block_with_a_nan_takes_the_scalar_loop() {
        let mut x = vec![0.25f32; 64];
        x[40] = f32::NAN;
        let a = Acts::new(ActFormat::Q8x32, &x, 64);
        let mut want = vec![0i8; 32];
        quantize_scalar(&x[32..], &mut want);
        assert_eq!(&a.qs[32..], &want[..]);
        assert_eq!(a.d[0], 0.25 / 127.0);
    }
}
