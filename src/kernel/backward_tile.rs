//! One tile of FlashAttention-2's backward (Dao 2023, Algorithm 2) on the query block
//! Q_i and key block K_j, V_j, in the forward's layout (query rows along the vector
//! lanes, scores held transposed as [keys][ld]) and its base-2 units:
//!
//! 1. S^T = K_j (scale log2e Q_i)^T, plus ALiBi and the mask, exactly as the forward
//!    computes them ([`super::tile::apply_biases`]);
//! 2. P^T = 2^(S^T - L2_i), recomputed from the saved log-sum-exp (L2 = lse log2 e;
//!    +inf for a fully masked row and for padding rows, so their P is exactly 0);
//! 3. dV_j += P^T dO_i;
//! 4. dP^T = V_j dO_i^T;
//! 5. dS^T = scale P^T * (dP^T - D_i), D_i = rowsum(dO_i * O_i);
//! 6. dQ_i += dS K_j and dK_j += dS^T Q_i.
//!
//! Every product is the one [`super::gemm`] micro-kernel; nothing larger than a tile
//! is ever held.

use std::ops::Range;

use pulp::Simd;

use super::buf::AlignedBuf;
use super::exp::exp2_nonpositive;
use super::gemm::{self, Dims, MatA};
use super::tile::{self, Head, RowBias};
use crate::engine::mask::TileClass;

/// A query block as the backward reads it, packed once per head and shared by every
/// key block (all buffers padded to `ld` rows; padding rows are zeros, L2 = +inf).
pub(crate) struct QBlock<'a> {
    pub rows: Range<usize>,
    pub ld: usize,
    /// Q_i^T * scale * log2 e, [d][ld].
    pub qt: &'a [f32],
    /// Q_i, [ld][ldq].
    pub qr: &'a [f32],
    /// dO_i^T, [dv][ld].
    pub dot: &'a [f32],
    /// dO_i, [ld][ldo].
    pub dor: &'a [f32],
    /// lse * log2 e per row.
    pub l2: &'a [f32],
    /// D = rowsum(dO * O) per row.
    pub dd: &'a [f32],
    pub qpos: &'a [f32],
    pub band: Option<(&'a [f32], &'a [f32])>,
    /// The union of the rows' bands (band masks only).
    pub band_union: Range<usize>,
}

/// The key block K_j, V_j of a tile.
pub(crate) struct KvBlock<'a> {
    pub cols: Range<usize>,
    /// K_j, [nk][ldq] (rows padded with zeros to whole vectors).
    pub kpad: &'a [f32],
    pub ldq: usize,
    pub ldo: usize,
}

/// Scratch of one tile: P^T and dS^T, [bc][ld] each.
#[derive(Default)]
pub(crate) struct BwdScratch {
    pub pt: AlignedBuf,
    pub dst: AlignedBuf,
    /// The keys the last tile computed (a band mask trims the rest, whose P is 0).
    pub computed: Range<usize>,
}

/// What one tile updates: the block's dQ rows and the key block's dK, dV rows.
pub(crate) struct TileGrads<'a> {
    /// dQ_i, [ld][ldq].
    pub dq: &'a mut [f32],
    /// dK_j, [bc][ldq] (row 0 is key `cols.start`).
    pub dk: &'a mut [f32],
    /// dV_j, [bc][ldo].
    pub dv: &'a mut [f32],
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

/// Process tile (Q_i, K_j), which the mask classed `class` (never Empty).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn backward_tile<S: Simd>(
    s: S,
    head: &Head<'_>,
    qblk: &QBlock<'_>,
    kv: &KvBlock<'_>,
    class: TileClass,
    scale: f32,
    scr: &mut BwdScratch,
    g: TileGrads<'_>,
    on_scores: impl FnOnce(&[f32], Range<usize>),
) {
    let tile_cols = kv.cols.clone();
    // As in the forward: a band mask masks the keys outside the union of the rows' bands
    // for every row, so their P is 0 and they add nothing anywhere.
    let cols = if class == TileClass::Partial && qblk.band.is_some() {
        tile_cols.start.max(qblk.band_union.start)..tile_cols.end.min(qblk.band_union.end)
    } else {
        tile_cols.clone()
    };
    scr.computed = cols.clone();
    if cols.is_empty() {
        return;
    }
    let (ld, nk, nrows) = (qblk.ld, cols.len(), qblk.rows.len());
    let off = cols.start - tile_cols.start;
    let (d, dv) = (head.d, head.dv);
    scr.pt.ensure(head.bc * ld);
    scr.dst.ensure(head.bc * ld);
    let (pt, dst) = (scr.pt.as_mut_slice(), scr.dst.as_mut_slice());

    // 1. S^T = K_j Q_i^T (base 2), biases.
    gemm::gemm(
        s,
        MatA {
            a: &head.k[cols.start * d..cols.end * d],
            rs: d,
            cs: 1,
        },
        qblk.qt,
        pt,
        Dims {
            m: nk,
            n: ld,
            k: d,
            ldb: ld,
            ldc: ld,
        },
        false,
    );
    if class == TileClass::Partial || head.alibi2.is_some() {
        let rows = RowBias {
            rows: qblk.rows.clone(),
            qpos: qblk.qpos,
            band: qblk.band,
            sinks: head.mask.sinks(),
        };
        tile::apply_biases(s, head, &rows, pt, ld, cols.clone(), class);
    }
    // An observer sees S as recomputed, before it turns into P in place.
    on_scores(pt, cols.clone());

    // 2. P^T = 2^(S^T - L2).
    exp_minus_lse::<S>(s, pt, qblk.l2, ld, nk);

    // 3. dV_j += P^T dO_i.
    gemm::gemm(
        s,
        MatA {
            a: pt,
            rs: ld,
            cs: 1,
        },
        qblk.dor,
        &mut g.dv[off * kv.ldo..],
        Dims {
            m: nk,
            n: kv.ldo,
            k: nrows,
            ldb: kv.ldo,
            ldc: kv.ldo,
        },
        true,
    );

    // 4. dP^T = V_j dO_i^T.
    gemm::gemm(
        s,
        MatA {
            a: &head.v[cols.start * head.ldv..],
            rs: head.ldv,
            cs: 1,
        },
        qblk.dot,
        dst,
        Dims {
            m: nk,
            n: ld,
            k: dv,
            ldb: ld,
            ldc: ld,
        },
        false,
    );

    // 5. dS^T = scale P^T (dP^T - D).
    ds_from_dp::<S>(s, pt, dst, qblk.dd, scale, ld, nk);

    // 6. dQ_i += dS K_j (dS read column-major out of dS^T); dK_j += dS^T Q_i.
    gemm::gemm(
        s,
        MatA {
            a: dst,
            rs: 1,
            cs: ld,
        },
        &kv.kpad[off * kv.ldq..],
        g.dq,
        Dims {
            m: nrows,
            n: kv.ldq,
            k: nk,
            ldb: kv.ldq,
            ldc: kv.ldq,
        },
        true,
    );
    gemm::gemm(
        s,
        MatA {
            a: dst,
            rs: ld,
            cs: 1,
        },
        qblk.qr,
        &mut g.dk[off * kv.ldq..],
        Dims {
            m: nk,
            n: kv.ldq,
            k: nrows,
            ldb: kv.ldq,
            ldc: kv.ldq,
        },
        true,
    );
}

/// P^T[j][r] = 2^(S^T[j][r] - L2[r]) in place over `nk` keys.
#[inline(always)]
fn exp_minus_lse<S: Simd>(s: S, pt: &mut [f32], l2: &[f32], ld: usize, nk: usize) {
    let lanes = S::F32_LANES;
    assert!(pt.len() >= nk * ld && l2.len() >= ld && ld.is_multiple_of(lanes));
    // SAFETY: pt holds nk rows of ld and l2 holds ld values (asserted above).
    unsafe {
        let (p, l) = (pt.as_mut_ptr(), l2.as_ptr());
        for v in (0..ld).step_by(lanes) {
            let lv = load::<S>(l.add(v));
            for j in 0..nk {
                let x = p.add(j * ld + v);
                store::<S>(x, exp2_nonpositive(s, s.sub_f32s(load::<S>(x), lv)));
            }
        }
    }
}

/// dS^T[j][r] = scale P^T[j][r] (dP^T[j][r] - D[r]) in place of dP^T.
#[inline(always)]
fn ds_from_dp<S: Simd>(
    s: S,
    pt: &[f32],
    dst: &mut [f32],
    dd: &[f32],
    scale: f32,
    ld: usize,
    nk: usize,
) {
    let lanes = S::F32_LANES;
    assert!(pt.len() >= nk * ld && dst.len() >= nk * ld && dd.len() >= ld);
    assert!(ld.is_multiple_of(lanes));
    let sc = s.splat_f32s(scale);
    // SAFETY: pt and dst hold nk rows of ld, dd holds ld values (asserted above).
    unsafe {
        let (p, q, dp) = (pt.as_ptr(), dst.as_mut_ptr(), dd.as_ptr());
        for v in (0..ld).step_by(lanes) {
            let dv = load::<S>(dp.add(v));
            for j in 0..nk {
                let o = j * ld + v;
                let pv = s.mul_f32s(load::<S>(p.add(o)), sc);
                store::<S>(
                    q.add(o),
                    s.mul_f32s(pv, s.sub_f32s(load::<S>(q.add(o)), dv)),
                );
            }
        }
    }
}
