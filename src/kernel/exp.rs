//! A vectorised 2^x of our own, written once for every SIMD tier.
//!
//! The kernel works in base 2 (scores are pre-multiplied by log2 e), so softmax needs
//! 2^x for x <= 0 only: x = s - max, and the rescale factor m_old - m_new.
//!
//! Method: x = n + f with n = round(x) and f in [-1/2, 1/2]; 2^n is built in the exponent
//! bits, 2^f is a degree-5 polynomial with its constant term fixed at 1 (so 2^0 = 1
//! exactly and the largest score of a row contributes exactly 1). The coefficients
//! minimise the maximum relative error on [-1/2, 1/2] (Lawson's iteration, in f64).
//!
//! Error bound (checked by the tests below against f64 on a dense grid, on every tier):
//! - for -126 <= x <= 0: |exp2(x) / 2^x - 1| <= [`EXP2_MAX_REL_ERROR`] (2.0e-7, about
//!   1.7 ulp: 0.9e-7 from the polynomial, the rest from f32 rounding in Horner's rule);
//! - for x < -126.5, and for x = -inf (a masked score): exactly 0, never a denormal
//!   garbage value, never NaN; between the two, a subnormal result within 2^-149.
//! - inputs above 0 are clamped at 127 (the kernel never passes any).

use pulp::Simd;

/// Largest relative error of [`exp2`] on [-126, 0].
pub const EXP2_MAX_REL_ERROR: f64 = 2.0e-7;

/// 1.5 * 2^23 + 127: adding it to |x| <= 127 rounds x to an integer held in the low
/// mantissa bits, already offset by the exponent bias, so `bits << 23` is 2^round(x).
const ROUND_MAGIC: f32 = 12_582_912.0 + 127.0;

/// Degree-5 minimax coefficients of 2^f - 1 on [-1/2, 1/2], highest power first.
const C5: f32 = 0.001_326_472_8;
const C4: f32 = 0.009_671_513;
const C3: f32 = 0.055_507_336;
const C2: f32 = 0.240_222_42;
// The fitted first-order coefficient: close to ln 2 but not ln 2, which the fit trades
// against the higher terms.
#[allow(clippy::approx_constant)]
const C1: f32 = 0.693_147;

/// 2^x lane by lane; see the module docs for the error bound.
#[inline(always)]
pub fn exp2<S: Simd>(s: S, x: S::f32s) -> S::f32s {
    exp2_nonpositive(s, s.min_f32s(x, s.splat_f32s(127.0)))
}

/// [`exp2`] without the clamp from above, for the kernel's softmax loops, where every
/// input is a score minus a running max or log-sum-exp (so at most 0, or a rounding
/// error above it): one vector operation fewer per exponential, with the same results
/// for every x <= 127.
#[inline(always)]
pub fn exp2_nonpositive<S: Simd>(s: S, x: S::f32s) -> S::f32s {
    // -127 makes the exponent field 0, so the result is +0.0 exactly (also for -inf).
    let x = s.max_f32s(x, s.splat_f32s(-127.0));
    let t = s.add_f32s(x, s.splat_f32s(ROUND_MAGIC));
    let n = s.sub_f32s(t, s.splat_f32s(ROUND_MAGIC));
    let f = s.sub_f32s(x, n);
    let mut p = s.splat_f32s(C5);
    p = s.mul_add_e_f32s(p, f, s.splat_f32s(C4));
    p = s.mul_add_e_f32s(p, f, s.splat_f32s(C3));
    p = s.mul_add_e_f32s(p, f, s.splat_f32s(C2));
    p = s.mul_add_e_f32s(p, f, s.splat_f32s(C1));
    p = s.mul_add_e_f32s(p, f, s.splat_f32s(1.0));
    let two_n = s.wrapping_dyn_shl_u32s(s.transmute_u32s_f32s(t), s.splat_u32s(23));
    s.mul_f32s(p, s.transmute_f32s_u32s(two_n))
}

/// 2^x of one value with the same arithmetic as [`exp2`] on `S`.
#[inline(always)]
pub fn exp2_one<S: Simd>(s: S, x: f32) -> f32 {
    let v = exp2(s, s.splat_f32s(x));
    let lanes: &[f32] = bytemuck_lanes::<S>(&v);
    lanes[0]
}

#[inline(always)]
fn bytemuck_lanes<S: Simd>(v: &S::f32s) -> &[f32] {
    pulp::bytemuck::cast_slice(core::slice::from_ref(v))
}

/// 2^x in place over a slice, on `tier` (for tests and small callers).
pub fn exp2_slice(tier: super::Tier, xs: &mut [f32]) {
    struct Op<'a>(&'a mut [f32]);
    impl pulp::WithSimd for Op<'_> {
        type Output = ();
        #[inline(always)]
        fn with_simd<S: Simd>(self, s: S) {
            let (head, tail) = S::as_mut_simd_f32s(self.0);
            for v in head {
                *v = exp2(s, *v);
            }
            for x in tail {
                *x = exp2_one(s, *x);
            }
        }
    }
    tier.dispatch(Op(xs));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::available_tiers;

    #[test]
    fn error_bound_holds_on_every_tier() {
        // Dense grid on [-126, 0] plus every integer and half-integer (the ends of f).
        let mut xs: Vec<f32> = (0..=1_260_000).map(|i| -(i as f32) * 1e-4).collect();
        xs.extend((0..=252).map(|i| -(i as f32) * 0.5));
        for tier in available_tiers() {
            let mut ys = xs.clone();
            exp2_slice(tier, &mut ys);
            let worst = xs
                .iter()
                .zip(&ys)
                .map(|(&x, &y)| (y as f64 / (x as f64).exp2() - 1.0).abs())
                .fold(0.0, f64::max);
            assert!(worst <= EXP2_MAX_REL_ERROR, "{tier}: worst rel {worst:e}");
        }
    }

    #[test]
    fn the_unclamped_form_gives_the_same_bits_up_to_127() {
        struct Both(Vec<f32>);
        impl pulp::WithSimd for Both {
            type Output = Vec<(f32, f32)>;
            #[inline(always)]
            fn with_simd<S: Simd>(self, s: S) -> Vec<(f32, f32)> {
                let lanes = S::F32_LANES;
                let mut out = Vec::new();
                for chunk in self.0.chunks(lanes) {
                    let mut buf = vec![0.0f32; lanes];
                    buf[..chunk.len()].copy_from_slice(chunk);
                    let (v, _) = S::as_simd_f32s(&buf);
                    let (a, b) = (exp2(s, v[0]), exp2_nonpositive(s, v[0]));
                    let (a, b) = (bytemuck_lanes::<S>(&a), bytemuck_lanes::<S>(&b));
                    out.extend(a.iter().zip(b).take(chunk.len()).map(|(&x, &y)| (x, y)));
                }
                out
            }
        }
        let mut xs: Vec<f32> = (0..=254_000).map(|i| 127.0 - i as f32 * 1e-3).collect();
        xs.extend([f32::NEG_INFINITY, -500.0, -0.0]);
        for tier in available_tiers() {
            for ((a, b), x) in tier.dispatch(Both(xs.clone())).into_iter().zip(&xs) {
                assert_eq!(a.to_bits(), b.to_bits(), "{tier}: x = {x}");
            }
        }
    }

    #[test]
    fn exact_points_and_underflow() {
        for tier in available_tiers() {
            let mut ys = vec![0.0, -1.0, -10.0, -126.6, -127.0, -500.0, f32::NEG_INFINITY];
            exp2_slice(tier, &mut ys);
            assert_eq!(ys[0], 1.0, "{tier}: 2^0");
            assert_eq!(ys[1], 0.5, "{tier}: 2^-1");
            assert!((ys[2] as f64 - 2f64.powi(-10)).abs() < 1e-10, "{tier}");
            for &y in &ys[3..] {
                assert_eq!(y, 0.0, "{tier}: underflow must be exactly 0");
            }
        }
    }
}
