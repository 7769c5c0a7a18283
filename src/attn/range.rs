//! The range of numbers each attention path can hold, checked before it runs: every path
//! gives the right answer for any finite input it accepts, and refuses the rest with a
//! message that names the limit. Never NaN, never a silent full mask.
//!
//! Why this is sound. A path goes wrong only when an intermediate value overflows its
//! float type: a score (inf - inf = NaN), a packed query (q * scale * log2 e in the
//! kernel), a running sum of V, or the log-sum-exp. Each is bounded before the run, in
//! f64, from the inputs' magnitudes:
//! - a score: |scale q_i . k_j| <= |scale| max|q_i| max|k_j| (Cauchy-Schwarz, which also
//!   bounds every partial sum of the dot product), plus ALiBi's |m_h| max(Nq, Nk);
//! - a file mask's biases are shifted per row by the row's largest finite bias
//!   ([`crate::attn::mask::Mask::row_shift`]), which leaves the softmax as it is, so
//!   every shifted bias lies in [-inf, 0]. A shifted bias too negative for f32 becomes
//!   -inf, and that is exact: a key whose logit is below the row's best by more than
//!   2^127 has weight exp(-2^127) = 0 in any precision, as long as scores stay below the
//!   limit (2^125, an eighth of f32's range) checked here;
//! - the log-sum-exp is at most the score bound + ln Nk + the largest row shift, and must
//!   round to a finite value of the path's type;
//! - O's accumulator holds at most Nk max|v| (unnormalised weights are <= 1).
//!
//! If the bounds hold, nothing overflows, so the result is the correctly rounded
//! softmax of the (rounded) logits; if not, the f32 paths refuse and name the limit, and
//! `compute --kernel auto` takes the f64 reference path instead, whose own limits are
//! those of f64 (about 1e307). Inputs merely outside f32's range (f64 files holding 1e100 or
//! 1e-300) are first brought into it by exact powers of two (see
//! `engine::fit_f32`), so only scores that truly overflow are refused.

use crate::attn::problem::{AttnSpec, ProblemShape};
use crate::error::{Error, Result};

/// The path a range check is for: its float type and the order of its operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathKind {
    /// f64 loops: dot product first, then the scale.
    Reference,
    /// f32 score matrix: dot product first, then the scale.
    Naive,
    /// The f32 tiled kernel: Q is multiplied by scale * log2 e first, work in base 2.
    Flash,
}

impl PathKind {
    fn name(self) -> &'static str {
        match self {
            PathKind::Reference => "the f64 reference path",
            PathKind::Naive => "the f32 naive path",
            PathKind::Flash => "the f32 flash kernel",
        }
    }

    /// The largest magnitude an intermediate may have: an eighth of the type's range,
    /// so that the sums and differences of two such values stay finite.
    pub fn limit(self) -> f64 {
        match self {
            PathKind::Reference => f64::MAX / 8.0,
            PathKind::Naive | PathKind::Flash => f32::MAX as f64 / 8.0,
        }
    }
}

/// The magnitudes of Q, K and V that the bounds need.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Magnitudes {
    /// max |q_ic| and max_i ||q_i||.
    pub q_abs: f64,
    pub q_norm: f64,
    pub k_abs: f64,
    pub k_norm: f64,
    pub v_abs: f64,
}

/// max |x| and the largest Euclidean norm of the rows; Err names the first value that is
/// not finite.
pub fn abs_and_norm<R, I>(rows: R) -> std::result::Result<(f64, f64), f64>
where
    R: IntoIterator<Item = I>,
    I: IntoIterator<Item = f64>,
{
    let (mut abs, mut norm) = (0.0f64, 0.0f64);
    for row in rows {
        let mut ss = 0.0f64;
        // A scale keeps the sum of squares finite for any finite row (up to f64::MAX).
        let row: Vec<f64> = row.into_iter().collect();
        if let Some(&x) = row.iter().find(|x| !x.is_finite()) {
            return Err(x);
        }
        let big = row.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        if big > 0.0 {
            for x in &row {
                ss += (x / big) * (x / big);
            }
        }
        abs = abs.max(big);
        norm = norm.max(big * ss.sqrt());
    }
    Ok((abs, norm))
}

/// Bounds on K and V that a caller knows from when it wrote their rows (the model's KV
/// cache bounds each run of rows as they come): the largest |k|, the largest key row norm
/// and the largest |v|. Each must be at least the true value, or the range check could
/// pass an input that overflows.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct KvBounds {
    pub k_abs: f64,
    pub k_norm: f64,
    pub v_abs: f64,
}

impl KvBounds {
    /// The bounds of K [.., d] and V [.., dv] rows; Err names a value that is not finite.
    pub fn of_f32(k: &[f32], v: &[f32], d: usize, dv: usize) -> Result<KvBounds> {
        let (k_abs, k_norm) = slice_abs_and_norm(k, d).map_err(|x| not_finite("K", x))?;
        let (v_abs, _) = slice_abs_and_norm(v, dv).map_err(|x| not_finite("V", x))?;
        Ok(KvBounds {
            k_abs,
            k_norm,
            v_abs,
        })
    }

    /// Bounds of both: the larger of each.
    pub fn max(self, other: KvBounds) -> KvBounds {
        KvBounds {
            k_abs: self.k_abs.max(other.k_abs),
            k_norm: self.k_norm.max(other.k_norm),
            v_abs: self.v_abs.max(other.v_abs),
        }
    }
}

fn not_finite(name: &str, x: impl std::fmt::Display) -> Error {
    Error::usage(format!(
        "{name} holds {x}; every value must be a finite number"
    ))
}

/// [`abs_and_norm`] of rows of `width` f32 values, without copying them (f32 squares
/// cannot overflow f64).
fn slice_abs_and_norm(x: &[f32], width: usize) -> std::result::Result<(f64, f64), f32> {
    // Every kernel call scans its whole input here, so the common case runs in f32
    // vectors, compiled for the best instruction set this CPU has (pulp's run-time
    // dispatch): a serial f64 loop in baseline x86-64 was a quarter of a 256-token call.
    // Values far from 1 could overflow or underflow an f32 square; those inputs take the
    // plain f64 loop.
    let fast = pulp::Arch::new().dispatch(Scan { x, width });
    match fast {
        Some((abs, norm)) if (1e-15..=1e15).contains(&abs) && norm.is_finite() => Ok((abs, norm)),
        Some((0.0, _)) => Ok((0.0, 0.0)),
        _ => scan_f64(x, width),
    }
}

/// The vectorised scan: the largest |x| and the largest row norm, or None if some value
/// is not finite. Squares are summed in f32 (relative error at most width * 2^-24), so the
/// norm is raised by that much to stay an upper bound.
struct Scan<'a> {
    x: &'a [f32],
    width: usize,
}

impl pulp::WithSimd for Scan<'_> {
    type Output = Option<(f64, f64)>;

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, s: S) -> Self::Output {
        let zero = s.splat_f32s(0.0);
        let (mut big, mut nonfinite) = (zero, zero);
        let mut norm2 = 0.0f64;
        for row in self.x.chunks(self.width.max(1)) {
            let (head, tail) = S::as_simd_f32s(row);
            let mut ss = zero;
            for &v in head {
                big = s.max_f32s(big, s.abs_f32s(v));
                // x * 0 is 0 for a finite x and NaN for an infinite or NaN one.
                nonfinite = s.add_f32s(nonfinite, s.mul_f32s(v, zero));
                ss = s.mul_add_e_f32s(v, v, ss);
            }
            let mut row2 = s.reduce_sum_f32s(ss) as f64;
            for &y in tail {
                if !y.is_finite() {
                    return None;
                }
                big = s.max_f32s(big, s.splat_f32s(y.abs()));
                row2 += y as f64 * y as f64;
            }
            norm2 = norm2.max(row2);
        }
        if s.reduce_sum_f32s(nonfinite).is_nan() {
            return None;
        }
        let slack = 1.0 + self.width as f64 * f64::from(f32::EPSILON);
        Some((s.reduce_max_f32s(big) as f64, norm2.sqrt() * slack))
    }
}

/// The plain f64 scan, and the first value that is not a finite number.
fn scan_f64(x: &[f32], width: usize) -> std::result::Result<(f64, f64), f32> {
    let (mut abs, mut norm2) = (0.0f64, 0.0f64);
    for row in x.chunks(width.max(1)) {
        let mut ss = 0.0f64;
        for &y in row {
            if !y.is_finite() {
                return Err(y);
            }
            let y = y as f64;
            abs = abs.max(y.abs());
            ss += y * y;
        }
        norm2 = norm2.max(ss);
    }
    Ok((abs, norm2.sqrt()))
}

/// [`slice_abs_and_norm`] over chunks of whole rows on the current rayon pool.
fn slice_abs_and_norm_par(x: &[f32], width: usize) -> std::result::Result<(f64, f64), f32> {
    use rayon::prelude::*;
    let width = width.max(1);
    let rows = (PAR_CHUNK / width).max(1);
    x.par_chunks(rows * width)
        .map(|c| slice_abs_and_norm(c, width))
        .try_reduce(|| (0.0, 0.0), |a, b| Ok((a.0.max(b.0), a.1.max(b.1))))
}

/// Values a task of the parallel scan reads (64 KB).
const PAR_CHUNK: usize = 1 << 14;

impl Magnitudes {
    /// [`Magnitudes::of_f32`], the scan shared out over the current rayon pool.
    pub fn of_f32_parallel(
        q: &[f32],
        k: &[f32],
        v: &[f32],
        d: usize,
        dv: usize,
    ) -> Result<Magnitudes> {
        Self::of_f32_with(q, k, v, d, dv, slice_abs_and_norm_par)
    }

    /// From row-major Q [.., d] and bounds on K and V known beforehand: only Q is read.
    pub fn of_q_f32(q: &[f32], d: usize, kv: &KvBounds) -> Result<Magnitudes> {
        let (q_abs, q_norm) = slice_abs_and_norm(q, d).map_err(|x| not_finite("Q", x))?;
        Ok(Magnitudes {
            q_abs,
            q_norm,
            k_abs: kv.k_abs,
            k_norm: kv.k_norm,
            v_abs: kv.v_abs,
        })
    }

    /// From row-major Q [.., d], K [.., d], V [.., dv] slices.
    pub fn of_f32(q: &[f32], k: &[f32], v: &[f32], d: usize, dv: usize) -> Result<Magnitudes> {
        Self::of_f32_with(q, k, v, d, dv, slice_abs_and_norm)
    }

    fn of_f32_with(
        q: &[f32],
        k: &[f32],
        v: &[f32],
        d: usize,
        dv: usize,
        slice_abs_and_norm: impl Fn(&[f32], usize) -> std::result::Result<(f64, f64), f32>,
    ) -> Result<Magnitudes> {
        let (q_abs, q_norm) = slice_abs_and_norm(q, d).map_err(|x| not_finite("Q", x))?;
        let (k_abs, k_norm) = slice_abs_and_norm(k, d).map_err(|x| not_finite("K", x))?;
        let (v_abs, _) = slice_abs_and_norm(v, dv).map_err(|x| not_finite("V", x))?;
        Ok(Magnitudes {
            q_abs,
            q_norm,
            k_abs,
            k_norm,
            v_abs,
        })
    }

    /// From Q, K and V given as rows.
    pub fn of_rows<R, I>(q: R, k: R, v: R) -> Result<Magnitudes>
    where
        R: IntoIterator<Item = I>,
        I: IntoIterator<Item = f64>,
    {
        let (q_abs, q_norm) = abs_and_norm(q).map_err(|x| not_finite("Q", x))?;
        let (k_abs, k_norm) = abs_and_norm(k).map_err(|x| not_finite("K", x))?;
        let (v_abs, _) = abs_and_norm(v).map_err(|x| not_finite("V", x))?;
        Ok(Magnitudes {
            q_abs,
            q_norm,
            k_abs,
            k_norm,
            v_abs,
        })
    }
}

/// True if `x` is a number no larger than `limit` (NaN and infinity are not).
fn within(x: f64, limit: f64) -> bool {
    x <= limit
}

/// The bound on |score| (natural units, ALiBi included) for these magnitudes.
pub fn score_bound(shape: &ProblemShape, m: &Magnitudes, spec: &AttnSpec) -> f64 {
    let alibi = spec.alibi.as_ref().map_or(0.0, |slopes| {
        let steepest = slopes.iter().fold(0.0f64, |a, s| a.max(s.abs()));
        steepest * shape.n_q.max(shape.n_k) as f64
    });
    spec.scale.abs() * m.q_norm * m.k_norm + alibi
}

/// Check that `path` holds every intermediate value of this problem (see the module
/// comment); the error names the quantity, its bound and the limit.
pub fn check(path: PathKind, shape: &ProblemShape, m: &Magnitudes, spec: &AttnSpec) -> Result<()> {
    let limit = path.limit();
    let base2 = if path == PathKind::Flash {
        std::f64::consts::LOG2_E
    } else {
        1.0
    };
    let hint = match path {
        PathKind::Reference => "scale the inputs down".to_string(),
        _ => format!(
            "the f64 reference path (--kernel reference, or auto) holds up to {:.1e}",
            PathKind::Reference.limit()
        ),
    };
    let refuse = |what: String, bound: f64| {
        Err(Error::usage(format!(
            "{what} could reach {bound:.3e}, beyond the {limit:.3e} that {} holds without overflow; {hint}",
            path.name()
        )))
    };
    if !spec.scale.is_finite() {
        return refuse("the scale".into(), spec.scale.abs());
    }
    let scores = score_bound(shape, m, spec);
    if !within(scores * base2, limit) {
        return refuse(
            format!(
                "the scores (|scale| {:.3e} x max |q_i| {:.3e} x max |k_j| {:.3e}, plus ALiBi)",
                spec.scale.abs(),
                m.q_norm,
                m.k_norm
            ),
            scores,
        );
    }
    match path {
        PathKind::Flash => {
            let packed = m.q_abs * spec.scale.abs() * base2;
            if !within(packed, limit) {
                return refuse("Q times the scale".into(), packed);
            }
        }
        PathKind::Naive | PathKind::Reference => {
            let dot = m.q_norm * m.k_norm;
            if !within(dot, limit) {
                return refuse("the unscaled dot products q . k".into(), dot);
            }
        }
    }
    // A row's log-sum-exp is its shift plus at most the score bound and ln Nk; it is
    // written in the path's type, so that sum must round to a finite value there (the
    // float32 minimum, -3.4e38, as the shift of a row PyTorch masked whole, does).
    let lse = scores + (shape.n_k as f64).ln() + spec.mask.max_row_shift();
    let lse_fits = match path {
        PathKind::Reference => lse.is_finite(),
        PathKind::Naive | PathKind::Flash => (lse as f32).is_finite(),
    };
    if !lse_fits {
        return refuse("the log-sum-exp of a row".into(), lse);
    }
    let sums = match path {
        // The kernel's accumulator holds unnormalised weights (each <= 1) times V.
        PathKind::Flash | PathKind::Reference => m.v_abs * shape.n_k as f64,
        // The naive path multiplies normalised weights by V.
        PathKind::Naive => m.v_abs,
    };
    if !within(sums, limit) {
        return refuse("the weighted sums of V".into(), sums);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attn::mask::Mask;

    fn spec(shape: &ProblemShape, scale: f64) -> AttnSpec {
        let mask = Mask::resolve(&Default::default(), 1, 1, shape.n_q, shape.n_k).unwrap();
        AttnSpec::new(shape, mask, false, Some(scale))
    }

    /// The vectorised scan, serial and shared out over two threads, against plain f64
    /// loops, on widths that are not multiples of its lanes and lengths over a chunk.
    #[test]
    fn the_f32_scan_matches_plain_loops_and_finds_every_bad_value() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        for (rows, width) in [(1, 1), (3, 7), (50, 64), (700, 33), (300, 130)] {
            let x: Vec<f32> = (0..rows * width)
                .map(|i| ((i * 7919 % 1013) as f32 - 506.0) * 1e-3 * (1 + i % 5) as f32)
                .collect();
            let (mut abs, mut norm) = (0.0f64, 0.0f64);
            for row in x.chunks(width) {
                let ss: f64 = row.iter().map(|&y| y as f64 * y as f64).sum();
                norm = norm.max(ss.sqrt());
                abs = row.iter().fold(abs, |m, &y| m.max(y.abs() as f64));
            }
            for (got_abs, got_norm) in [
                slice_abs_and_norm(&x, width).unwrap(),
                pool.install(|| slice_abs_and_norm_par(&x, width)).unwrap(),
            ] {
                assert_eq!(got_abs, abs, "{rows}x{width}");
                // An upper bound, within the f32 sum's error.
                let slack = 2.0 * width as f64 * f64::from(f32::EPSILON);
                assert!(
                    got_norm >= norm && got_norm <= norm * (1.0 + slack),
                    "{rows}x{width}"
                );
            }
            for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
                let mut y = x.clone();
                let at = y.len() * 2 / 3;
                y[at] = bad;
                for got in [
                    slice_abs_and_norm(&y, width),
                    pool.install(|| slice_abs_and_norm_par(&y, width)),
                ] {
                    let e = got.unwrap_err();
                    assert!(e.is_nan() == bad.is_nan() && (bad.is_nan() || e == bad));
                }
            }
        }
    }

    #[test]
    fn norms_hold_for_any_finite_row() {
        let (abs, norm) = abs_and_norm([vec![3.0, -4.0], vec![1.0, 0.0]]).unwrap();
        assert_eq!((abs, norm), (4.0, 5.0));
        let (_, norm) = abs_and_norm([vec![f64::MAX, f64::MAX]]).unwrap();
        assert!(norm.is_infinite() || norm > f64::MAX / 2.0);
        assert!(abs_and_norm([vec![1.0, f64::NAN]]).unwrap_err().is_nan());
    }

    #[test]
    fn scores_that_overflow_f32_are_refused_by_the_f32_paths_only() {
        let shape = ProblemShape::from_dims([1, 1, 1, 1], [1, 1, 2, 1], [1, 1, 2, 1]).unwrap();
        let m = Magnitudes::of_rows(
            vec![vec![3e19]],
            vec![vec![3e19], vec![1e19]],
            vec![vec![1.0], vec![2.0]],
        )
        .unwrap();
        let sp = spec(&shape, 1.0);
        for path in [PathKind::Naive, PathKind::Flash] {
            let err = check(path, &shape, &m, &sp).unwrap_err().to_string();
            assert!(
                err.contains("scores") && err.contains("--kernel reference"),
                "{err}"
            );
        }
        check(PathKind::Reference, &shape, &m, &sp).unwrap();
        let small = Magnitudes::of_rows(
            vec![vec![3.0]],
            vec![vec![3.0], vec![1.0]],
            vec![vec![1.0], vec![2.0]],
        )
        .unwrap();
        check(PathKind::Flash, &shape, &small, &sp).unwrap();
        let err = check(PathKind::Flash, &shape, &small, &spec(&shape, 1e38)).unwrap_err();
        assert!(err.to_string().contains("limit") || err.to_string().contains("beyond"));
    }
}
