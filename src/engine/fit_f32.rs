//! f64 tensors brought into the f32 paths (naive, flash) without losing what f32 can
//! represent: Q, K and V outside f32's comfortable range (an f64 file holding 1e100 or
//! 1e-300) are scaled by exact powers of two before the cast, and the scale and the
//! output are corrected by the same powers, so the result is what the f64 inputs mean.
//!
//! - Q by 2^-a and K by 2^-b leave every logit the same once the scale is multiplied by
//!   2^(a+b): scale q.k = (scale 2^(a+b)) (2^-a q).(2^-b k). Powers of two are exact, so
//!   within f32's normal range this changes no bit of the result.
//! - V by 2^-e scales the output by 2^-e (softmax weights times V is linear in V); the
//!   output is multiplied back by 2^e in f64.
//!
//! A tensor is rescaled only when its largest magnitude is outside [2^-60, 2^60] (or,
//! for V, when the sums of Nk values could overflow), so ordinary inputs go through
//! untouched. What is left, scores that truly overflow f32, is refused by
//! [`crate::attn::range::check`] with a message naming the limit.

use ndarray::{Array4, ArrayBase, ArrayView4, Data, Ix4};

use crate::attn::problem::{AttnSpec, ProblemShape};
use crate::attn::range::{self, Magnitudes, PathKind};
use crate::error::Result;

/// Largest magnitudes left as they are: 2^-60 to 2^60.
const UNTOUCHED: std::ops::RangeInclusive<f64> = 8.673617379884035e-19..=1.152921504606847e18;

/// Q, K and V in f32, ready for `path`, and how to read its output.
pub struct F32Problem {
    pub q: Array4<f32>,
    pub k: Array4<f32>,
    pub v: Array4<f32>,
    /// The spec with the scale corrected for Q's and K's powers of two.
    pub spec: AttnSpec,
    /// V's power of two: the path's output times 2^this is the answer ([`F32Problem::output`]).
    pub out_exponent: i32,
}

impl F32Problem {
    /// One value of the path's output, as the answer for the f64 inputs.
    pub fn output(&self, x: f32) -> f64 {
        times_pow2(x as f64, self.out_exponent)
    }

    /// [`F32Problem::output`] without the tensors, for once the path has run: the f32
    /// copies of Q, K and V are freed before the output is converted.
    pub fn into_output(self) -> impl Fn(f32) -> f64 {
        let e = self.out_exponent;
        move |x| times_pow2(x as f64, e)
    }
}

/// The exponent e with max_abs * 2^-e in [0.5, 1), for max_abs > 0.
fn exponent(max_abs: f64) -> i32 {
    max_abs.log2().floor() as i32 + 1
}

/// x * 2^e, exactly while the result is a normal f64, in steps of at most 2^±1000 so no
/// factor leaves f64's range (x may be subnormal and e up to 2100).
fn times_pow2(mut x: f64, mut e: i32) -> f64 {
    while e != 0 {
        let step = e.clamp(-1000, 1000);
        x *= 2f64.powi(step);
        e -= step;
    }
    x
}

fn max_abs(a: ArrayView4<f64>) -> f64 {
    a.iter().fold(0.0f64, |m, x| m.max(x.abs()))
}

/// Bring Q, K and V into f32 for `path` (Naive or Flash) and check that every value the
/// path computes fits ([`range::check`]).
pub fn fit(
    path: PathKind,
    shape: &ProblemShape,
    q: ArrayView4<f64>,
    k: ArrayView4<f64>,
    v: ArrayView4<f64>,
    spec: &AttnSpec,
) -> Result<F32Problem> {
    let factor = |m: f64| {
        if m == 0.0 || UNTOUCHED.contains(&m) {
            0
        } else {
            exponent(m)
        }
    };
    let (a, b) = (factor(max_abs(q)), factor(max_abs(k)));
    let v_abs = max_abs(v);
    let sums_overflow = v_abs * shape.n_k as f64 > path.limit();
    let e = if v_abs > 0.0 && (sums_overflow || !UNTOUCHED.contains(&v_abs)) {
        exponent(v_abs)
    } else {
        0
    };
    let cast = |x: ArrayView4<f64>, e: i32| x.mapv(|y| times_pow2(y, -e) as f32);
    let (q, k, v) = (cast(q, a), cast(k, b), cast(v, e));
    let mut spec = spec.clone();
    spec.scale = times_pow2(spec.scale, a + b);
    let m = Magnitudes::of_rows(rows_f64(&q), rows_f64(&k), rows_f64(&v))?;
    range::check(path, shape, &m, &spec)?;
    Ok(F32Problem {
        q,
        k,
        v,
        spec,
        out_exponent: e,
    })
}

/// The rows of a tensor as f64 values, read in place (no copy of the tensor).
fn rows_f64<S, A>(x: &ArrayBase<S, Ix4>) -> impl Iterator<Item = impl Iterator<Item = f64> + '_>
where
    S: Data<Elem = A>,
    A: Copy + Into<f64>,
{
    x.rows()
        .into_iter()
        .map(|r| r.into_iter().map(|&y| y.into()))
}

/// Check that the f64 reference path holds every value of this problem.
pub fn check_reference(
    shape: &ProblemShape,
    q: ArrayView4<f64>,
    k: ArrayView4<f64>,
    v: ArrayView4<f64>,
    spec: &AttnSpec,
) -> Result<()> {
    let m = Magnitudes::of_rows(rows_f64(&q), rows_f64(&k), rows_f64(&v))?;
    range::check(PathKind::Reference, shape, &m, spec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attn::mask::Mask;

    #[test]
    fn powers_of_two_are_exact_across_the_f64_range() {
        for e in [-1074, -1000, -60, 0, 60, 1000, 1023] {
            assert_eq!(times_pow2(1.0, e).log2(), e as f64, "{e}");
        }
        let tiniest = times_pow2(1.0, -1074);
        assert_eq!(times_pow2(tiniest, 1074), 1.0);
        assert_eq!(times_pow2(f64::MAX, -2000).log2().round(), 1024.0 - 2000.0);
        assert_eq!(exponent(1.0), 1);
        assert_eq!(exponent(0.75), 0);
        assert_eq!(exponent(1e100), 333);
    }

    #[test]
    fn f64_inputs_outside_f32_are_brought_in_exactly() {
        let shape = ProblemShape::from_dims([1, 1, 1, 2], [1, 1, 2, 2], [1, 1, 2, 1]).unwrap();
        let q = Array4::from_shape_vec((1, 1, 1, 2), vec![1e100, 0.0]).unwrap();
        let k = Array4::from_shape_vec((1, 1, 2, 2), vec![1e-100, 0.0, 0.0, 2e-100]).unwrap();
        let v = Array4::from_shape_vec((1, 1, 2, 1), vec![1e300, -1e300]).unwrap();
        let mask = Mask::resolve(&Default::default(), 1, 1, 1, 2).unwrap();
        let spec = AttnSpec::new(&shape, mask, false, Some(1.0));
        let p = fit(PathKind::Flash, &shape, q.view(), k.view(), v.view(), &spec).unwrap();
        assert!(p.q.iter().chain(&p.k).chain(&p.v).all(|x| x.is_finite()));
        // The logits are the same: 1e100 * 1e-100 = 1 and 0.
        let logit = p.spec.scale * p.q[[0, 0, 0, 0]] as f64 * p.k[[0, 0, 0, 0]] as f64;
        assert!((logit - 1.0).abs() < 1e-6, "{logit}");
        assert!((p.output(p.v[[0, 0, 0, 0]]) - 1e300).abs() < 1e293);
        // A K whose values span more than f32 can hold next to a huge Q: the bound on
        // the scores is what decides, and it is refused, naming the limit.
        let k = Array4::from_shape_vec((1, 1, 2, 2), vec![1e-100, 0.0, 0.0, 1.0]).unwrap();
        let Err(err) = fit(PathKind::Flash, &shape, q.view(), k.view(), v.view(), &spec) else {
            panic!("a K spanning more than f32 next to a huge Q was accepted");
        };
        assert!(err.to_string().contains("scores"), "{err}");
    }
}
