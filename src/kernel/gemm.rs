//! One general register-blocked product C (+)= A B, written once over [`pulp::Simd`],
//! behind the five products of a backward tile (S^T, dP^T, dV += P^T dO, dK += dS^T Q,
//! dQ += dS K).
//!
//! A is read element by element (each element broadcast to a vector) at any row and
//! column stride, so the same code reads a row-major A (K_j, V_j, P^T, dS^T) and a
//! column-major one (dS, which the tile holds as dS^T); B and C are row-major with rows
//! of whole vectors. A block of [`MR`] rows x up to 4 column vectors of C stays in
//! registers while k streams: 6 x 4 = 24 accumulators + 4 B vectors + 1 broadcast on
//! 32-register tiers (6 x 2 + 2 + 1 = 15 on AVX2), 2.4 FMAs per load, as in the
//! forward's S^T block ([`super::micro`]).
//!
//! Why not the `gemm` crate: a tile's products are small (64 x 64 x 64), run inside the
//! kernel's own tier dispatch (so every tier, including the forced scalar one, is
//! tested), and read A at strides (a transposed dS) that a packed library would first
//! copy.

use pulp::Simd;

/// Rows of C per register block.
pub const MR: usize = 6;

/// The inner dimension in chunks of KC: each register block then streams KC rows of B
/// (KC x 4 vectors, 64 KiB on AVX-512) and KC elements of its A rows, which stay in L2
/// while every row block of C reuses them. A training step's weight gradient
/// dW = dy^T x runs k over all B*T tokens (2048): unchunked, every row block streamed
/// all of x from L3 (dy^T x for 64 x 256 outputs at 60 GFLOP/s on the Xeon, model 167),
/// chunked 140. The chunks of one output run in order of k, so the sums and their bits
/// are those of one pass.
pub const KC: usize = 256;

/// Column vectors of C per register block on tier `S`.
#[inline(always)]
const fn nr_max<S: Simd>() -> usize {
    if S::REGISTER_COUNT >= 32 { 4 } else { 2 }
}

#[inline(always)]
unsafe fn load<S: Simd>(p: *const f32) -> S::f32s {
    // SAFETY: the caller guarantees `F32_LANES` readable f32s at `p`.
    unsafe { core::ptr::read_unaligned(p.cast::<S::f32s>()) }
}

#[inline(always)]
unsafe fn store<S: Simd>(p: *mut f32, v: S::f32s) {
    // SAFETY: the caller guarantees `F32_LANES` writable f32s at `p`.
    unsafe { core::ptr::write_unaligned(p.cast::<S::f32s>(), v) }
}

/// A [m][k] read at `a[i * rs + p * cs]`.
#[derive(Clone, Copy)]
pub struct MatA<'a> {
    pub a: &'a [f32],
    pub rs: usize,
    pub cs: usize,
}

/// Shapes of one product: C [m][n] (+)= A [m][k] B [k][n]; `n` is a multiple of the
/// lane count, B has rows of `ldb`, C rows of `ldc`.
#[derive(Clone, Copy)]
pub struct Dims {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub ldb: usize,
    pub ldc: usize,
}

/// C = A B, or C += A B with `accumulate`.
///
/// A function of its own, never inlined into the caller: inlined into a backward tile
/// (five products, the exponential's constants and the tile's pointers live across
/// them), the AVX2 6 x 2 block kept one of its twelve accumulators on the stack, a store
/// and a load in every step of k on the FMA chain (seen in `perf annotate` on an AMD EPYC,
/// family 25 model 1). Here it runs in a body compiled for the tier alone, where its 15
/// vector registers are all it holds; the call costs nothing beside a 64 x 64 x 64 product.
#[inline(never)]
pub fn gemm<S: Simd>(s: S, a: MatA<'_>, b: &[f32], c: &mut [f32], dims: Dims, accumulate: bool) {
    s.vectorize(Product {
        a,
        b,
        c,
        dims,
        accumulate,
    });
}

/// One product as a [`pulp::WithSimd`] job: what [`gemm`] runs in its own body, and what a
/// caller dispatches to a tier itself.
pub struct Product<'a> {
    pub a: MatA<'a>,
    pub b: &'a [f32],
    pub c: &'a mut [f32],
    pub dims: Dims,
    pub accumulate: bool,
}

impl pulp::WithSimd for Product<'_> {
    type Output = ();
    #[inline(always)]
    fn with_simd<S: Simd>(self, s: S) {
        gemm_inline(s, self.a, self.b, self.c, self.dims, self.accumulate);
    }
}

/// The body of [`gemm`], compiled inside its instruction-set body.
#[inline(always)]
fn gemm_inline<S: Simd>(s: S, a: MatA<'_>, b: &[f32], c: &mut [f32], dims: Dims, accumulate: bool) {
    let lanes = S::F32_LANES;
    let Dims { m, n, k, ldb, ldc } = dims;
    if m == 0 || n == 0 {
        return;
    }
    assert!(n.is_multiple_of(lanes) && n <= ldb && n <= ldc);
    assert!(k == 0 || a.a.len() > (m - 1) * a.rs + (k - 1) * a.cs);
    assert!(k == 0 || b.len() >= (k - 1) * ldb + n);
    assert!(c.len() >= (m - 1) * ldc + n);
    let (ap, bp, cp) = (a.a.as_ptr(), b.as_ptr(), c.as_mut_ptr());
    // k in chunks of KC (at least one pass, so C = A B with k = 0 writes zeros).
    let mut k0 = 0;
    loop {
        let kc = (k - k0).min(KC);
        // SAFETY: k0 + kc <= k, so the chunk's columns of A and rows of B lie inside A
        // and B, and C is the whole of C, by the asserts above.
        unsafe {
            let (ap, bp) = (ap.add(k0 * a.cs), bp.add(k0 * ldb));
            chunk::<S>(s, (ap, bp, cp), a, dims, kc, accumulate || k0 > 0);
        }
        k0 += kc;
        if k0 >= k {
            break;
        }
    }
}

/// C (+)= A B over `k` of the inner dimension, `ap` and `bp` already offset to the chunk.
///
/// # Safety
/// `ap`, `bp` and `cp` address `m` rows of A (`k` columns at A's strides), `k` rows of
/// B (`ldb` apart, `n` wide) and `m` rows of C (`ldc` apart, `n` wide).
#[inline(always)]
unsafe fn chunk<S: Simd>(
    s: S,
    (ap, bp, cp): (*const f32, *const f32, *mut f32),
    a: MatA<'_>,
    dims: Dims,
    k: usize,
    accumulate: bool,
) {
    let lanes = S::F32_LANES;
    let Dims { m, n, ldb, ldc, .. } = dims;
    let nvec = n / lanes;
    let mut v0 = 0;
    while v0 < nvec {
        let nr = (nvec - v0).min(nr_max::<S>());
        let col = v0 * lanes;
        let mut row = 0;
        while row < m {
            let mr = (m - row).min(MR);
            // SAFETY: rows row..row+mr <= m, columns col..col+nr*lanes <= n and the
            // chunk's k are inside A, B and C by the caller's contract.
            unsafe {
                let p = Ptrs {
                    a: ap.add(row * a.rs),
                    b: bp.add(col),
                    c: cp.add(row * ldc + col),
                };
                let g = Geom {
                    rs: a.rs,
                    cs: a.cs,
                    k,
                    ldb,
                    ldc,
                    accumulate,
                };
                match nr {
                    1 => rows::<S, 1>(s, mr, p, g),
                    2 => rows::<S, 2>(s, mr, p, g),
                    3 => rows::<S, 3>(s, mr, p, g),
                    _ => rows::<S, 4>(s, mr, p, g),
                }
            }
            row += mr;
        }
        v0 += nr;
    }
}

#[derive(Clone, Copy)]
struct Ptrs {
    a: *const f32,
    b: *const f32,
    c: *mut f32,
}

#[derive(Clone, Copy)]
struct Geom {
    rs: usize,
    cs: usize,
    k: usize,
    ldb: usize,
    ldc: usize,
    accumulate: bool,
}

#[inline(always)]
unsafe fn rows<S: Simd, const NR: usize>(s: S, mr: usize, p: Ptrs, g: Geom) {
    // SAFETY: forwarded from `gemm`.
    unsafe {
        match mr {
            6 => block::<S, 6, NR>(s, p, g),
            5 => block::<S, 5, NR>(s, p, g),
            4 => block::<S, 4, NR>(s, p, g),
            3 => block::<S, 3, NR>(s, p, g),
            2 => block::<S, 2, NR>(s, p, g),
            _ => block::<S, 1, NR>(s, p, g),
        }
    }
}

/// MR rows x NR column vectors of C, accumulated over k in registers.
#[inline(always)]
unsafe fn block<S: Simd, const MR_: usize, const NR: usize>(s: S, p: Ptrs, g: Geom) {
    let lanes = S::F32_LANES;
    let zero = s.splat_f32s(0.0);
    let mut acc = [[zero; NR]; MR_];
    // SAFETY: `gemm` checked the extents of every pointer walked here.
    unsafe {
        if g.accumulate {
            for (r, acc_r) in acc.iter_mut().enumerate() {
                for (v, x) in acc_r.iter_mut().enumerate() {
                    *x = load::<S>(p.c.add(r * g.ldc + v * lanes));
                }
            }
        }
        for kk in 0..g.k {
            let brow = p.b.add(kk * g.ldb);
            let mut bv = [zero; NR];
            for (v, x) in bv.iter_mut().enumerate() {
                *x = load::<S>(brow.add(v * lanes));
            }
            let acol = p.a.add(kk * g.cs);
            for (r, acc_r) in acc.iter_mut().enumerate() {
                let x = s.splat_f32s(*acol.add(r * g.rs));
                for (acc_rv, &b) in acc_r.iter_mut().zip(&bv) {
                    *acc_rv = s.mul_add_e_f32s(x, b, *acc_rv);
                }
            }
        }
        for (r, acc_r) in acc.iter().enumerate() {
            for (v, &x) in acc_r.iter().enumerate() {
                store::<S>(p.c.add(r * g.ldc + v * lanes), x);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::{Tier, available_tiers};

    fn check(tier: Tier, m: usize, k: usize, n_cols: usize, col_major: bool, accumulate: bool) {
        let lanes = tier.lanes();
        let n = n_cols.next_multiple_of(lanes);
        let (ldb, ldc) = (n + lanes, n + 2 * lanes);
        let val = |i: usize| ((i * 7919) % 97) as f32 / 97.0 - 0.5;
        let (rs, cs) = if col_major { (1, m) } else { (k, 1) };
        let a: Vec<f32> = (0..m * k).map(val).collect();
        let b: Vec<f32> = (0..k * ldb).map(|i| val(i + 13)).collect();
        let c0: Vec<f32> = (0..m * ldc).map(|i| val(i + 29)).collect();
        let mut c = c0.clone();
        tier.dispatch(Product {
            a: MatA { a: &a, rs, cs },
            b: &b,
            c: &mut c,
            dims: Dims { m, n, k, ldb, ldc },
            accumulate,
        });
        for i in 0..m {
            for j in 0..n {
                let mut want = if accumulate {
                    c0[i * ldc + j] as f64
                } else {
                    0.0
                };
                for p in 0..k {
                    want += a[i * rs + p * cs] as f64 * b[p * ldb + j] as f64;
                }
                let got = c[i * ldc + j] as f64;
                assert!((got - want).abs() < 1e-4, "{tier} {m}x{k}x{n} ({i},{j})");
            }
            // Columns past n are untouched.
            for j in n..ldc {
                assert_eq!(c[i * ldc + j], c0[i * ldc + j]);
            }
        }
    }

    #[test]
    fn every_tier_and_remainder_against_plain_loops() {
        for tier in available_tiers() {
            for (m, k, n) in [
                (1, 1, 1),
                (7, 5, 3),
                (13, 64, 70),
                (6, 0, 16),
                (25, 17, 130),
                // k past one chunk of KC, and a last chunk shorter than KC.
                (9, 2 * KC + 37, 32),
            ] {
                for col_major in [false, true] {
                    for accumulate in [false, true] {
                        check(tier, m, k, n, col_major, accumulate);
                    }
                }
            }
        }
    }
}
