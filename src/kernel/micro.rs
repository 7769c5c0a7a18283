//! Register-blocked micro-kernels for the two GEMMs of a tile, written once over
//! [`pulp::Simd`] and compiled for every tier.
//!
//! Layout of one tile (Br query rows padded to `ld`, a multiple of the lane count;
//! `nk` keys):
//! - `qt`: Q_i transposed, [d][ld], already multiplied by scale * log2 e;
//! - `k`: K_j straight from the input, [nk][d] (its elements are broadcast, so it needs no
//!   packing);
//! - `st`: the scores transposed, S^T = K_j Q_i^T, [nk][ld]: query rows run along the
//!   vector lanes, so the row-wise softmax (max, exp, sum) is plain lane-wise arithmetic
//!   with no horizontal reductions; after the exponential pass it holds P^T;
//! - `v`: V_j, [nk][ldv], rows 64-byte aligned, `ldv` a multiple of the lane count;
//! - `acc`: the unnormalised output O_i, [ld][ldo].
//!
//! S^T keeps `SCORE_KEYS` keys x up to 4 row vectors of accumulators in registers and
//! streams d; P V keeps `PV_ROWS` rows x up to 4 column vectors and streams the keys.
//! On AVX-512 every load feeds 2.4 (S) or 2 (P V) FMAs, inside what two load ports sustain.

use pulp::Simd;

/// Keys per S^T register block: 6 keys x 4 vectors = 24 accumulators + 4 Q^T vectors +
/// 1 broadcast = 29 of AVX-512's 32 registers (6 x 2 + 2 + 1 = 15 of AVX2's 16).
pub const SCORE_KEYS: usize = 6;

/// Keys per pass of P V over a tile: the row blocks sweep 64 keys of V_j and P^T (16 KiB
/// each at d = 64, Br = 64) before moving on, so both stay in L1 (48 KiB on the Xeon)
/// while every row block reads them, instead of streaming all of a Bc = 128 tile's V_j
/// and P^T (64 KiB) from L2 once per row block. Measured on the Xeon (family 6, model
/// 167): P V 183 -> 195 GFLOP/s on one 64 x 128 tile in L2, the whole forward at
/// N = 4096 160 -> 167 GFLOP/s (medians of 7 calls, runs alternating).
pub const PV_KEY_CHUNK: usize = 64;

/// Query rows per P V register block: 4 rows x 4 vectors = 16 accumulators on 32-register
/// tiers, 4 x 2 = 8 on 16-register ones (4 x 3 spills on AVX2: measured 93 against 120
/// GFLOP/s), at least the 8 independent FMA chains that 2 pipes x 4 cycles latency need.
pub const PV_ROWS: usize = 4;

/// Row vectors of one S^T register block on tier `S`.
#[inline(always)]
pub const fn score_vecs<S: Simd>() -> usize {
    if S::REGISTER_COUNT >= 32 { 4 } else { 2 }
}

/// Column vectors of one P V register block on tier `S`.
#[inline(always)]
pub const fn pv_vecs<S: Simd>() -> usize {
    if S::REGISTER_COUNT >= 32 { 4 } else { 2 }
}

/// f32s per 64-byte cache line.
const LINE: usize = 16;

/// Cache levels a prefetch can ask for.
#[derive(Clone, Copy)]
enum Level {
    L1,
    L2,
}

/// Ask for the cache line holding `p` in `level`. Only a hint: it never faults, so `p`
/// may point anywhere.
#[inline(always)]
fn prefetch(level: Level, p: *const f32) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0/T1 read nothing architecturally and never fault.
    unsafe {
        use core::arch::x86_64::{_MM_HINT_T0, _MM_HINT_T1, _mm_prefetch};
        match level {
            Level::L1 => _mm_prefetch::<_MM_HINT_T0>(p.cast()),
            Level::L2 => _mm_prefetch::<_MM_HINT_T1>(p.cast()),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (level, p);
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

/// Shapes and buffers of one S^T = K_j Q_i^T product.
pub struct ScoreArgs<'a> {
    /// K_j, `nk` rows of `d`.
    pub k: &'a [f32],
    pub d: usize,
    pub nk: usize,
    /// Q_i^T, `d` rows of `ld`.
    pub qt: &'a [f32],
    pub ld: usize,
    /// S^T, at least `nk` rows of `ld`.
    pub st: &'a mut [f32],
    /// Running max over keys per query row (`ld` values), updated when `fuse_max`.
    pub tmax: &'a mut [f32],
    pub fuse_max: bool,
    /// Rows to ask into L2 beside K_j's, one per key, and their stride: line i of row r
    /// is requested while line i of K row r is read. The forward passes V_j, so P V finds
    /// it in L2 instead of L3 (at N = 4096 a head's K and V outgrow L2): on the Xeon
    /// (family 6, model 167), S^T then P V over tiles streamed from L3 took 12.4 us a
    /// tile instead of 13.7, the whole forward at N = 4096 about 2.5% less. Empty for none.
    pub prefetch: &'a [f32],
    pub prefetch_ld: usize,
}

/// S^T = K_j Q_i^T for the whole tile; with `fuse_max`, also folds every score into
/// `tmax` (the tile's per-row max) while the accumulators are still in registers.
#[inline(always)]
pub fn scores<S: Simd>(s: S, a: ScoreArgs<'_>) {
    let lanes = S::F32_LANES;
    let nvec = a.ld / lanes;
    assert!(a.ld.is_multiple_of(lanes) && a.k.len() >= a.nk * a.d && a.qt.len() >= a.d * a.ld);
    assert!(a.st.len() >= a.nk * a.ld && a.tmax.len() >= a.ld);
    let nr_max = score_vecs::<S>();
    let (k, qt, st, tmax) = (
        a.k.as_ptr(),
        a.qt.as_ptr(),
        a.st.as_mut_ptr(),
        a.tmax.as_mut_ptr(),
    );
    let pf = if a.prefetch.is_empty() {
        core::ptr::null()
    } else {
        a.prefetch.as_ptr()
    };
    let pf_lines = a.prefetch_ld.div_ceil(LINE);
    let mut v0 = 0;
    while v0 < nvec {
        let nr = (nvec - v0).min(nr_max);
        let col = v0 * lanes;
        let mut key = 0;
        while key < a.nk {
            let mr = (a.nk - key).min(SCORE_KEYS);
            // SAFETY: keys key..key+mr < nk and columns col..col+nr*lanes <= ld are in
            // bounds of k, qt, st and tmax by the asserts above.
            unsafe {
                let p = ScorePtrs {
                    // Only the first pass over the keys prefetches: later ones (ld wider
                    // than one register block) would ask for the same lines again.
                    pf: if v0 == 0 {
                        pf.wrapping_add(key * a.prefetch_ld)
                    } else {
                        core::ptr::null()
                    },
                    pf_ld: a.prefetch_ld,
                    pf_lines,
                    k: k.add(key * a.d),
                    qt: qt.add(col),
                    st: st.add(key * a.ld + col),
                    tmax: tmax.add(col),
                };
                match nr {
                    1 => score_rows::<S, 1>(s, mr, p, a.d, a.ld, a.fuse_max),
                    2 => score_rows::<S, 2>(s, mr, p, a.d, a.ld, a.fuse_max),
                    3 => score_rows::<S, 3>(s, mr, p, a.d, a.ld, a.fuse_max),
                    _ => score_rows::<S, 4>(s, mr, p, a.d, a.ld, a.fuse_max),
                }
            }
            key += mr;
        }
        v0 += nr;
    }
}

#[derive(Clone, Copy)]
struct ScorePtrs {
    /// Null for no prefetch.
    pf: *const f32,
    pf_ld: usize,
    pf_lines: usize,
    k: *const f32,
    qt: *const f32,
    st: *mut f32,
    tmax: *mut f32,
}

#[inline(always)]
unsafe fn score_rows<S: Simd, const NR: usize>(
    s: S,
    mr: usize,
    p: ScorePtrs,
    d: usize,
    ld: usize,
    fuse_max: bool,
) {
    // SAFETY: forwarded from `scores`.
    unsafe {
        // Full blocks at the common head sizes get d as a constant, so the six K rows are
        // reached by fixed offsets from one pointer instead of address arithmetic in the
        // loop (scalar ops that compete with the FMAs for ports): on the Xeon (family 6,
        // model 167) S^T on one 64 x 126 tile at d = 64 went from 81% to 83% of peak.
        match (mr, d) {
            (6, 64) => return score_block::<S, 6, NR>(s, p, 64, ld, fuse_max),
            (6, 128) => return score_block::<S, 6, NR>(s, p, 128, ld, fuse_max),
            (6, 32) => return score_block::<S, 6, NR>(s, p, 32, ld, fuse_max),
            _ => {}
        }
        match mr {
            6 => score_block::<S, 6, NR>(s, p, d, ld, fuse_max),
            5 => score_block::<S, 5, NR>(s, p, d, ld, fuse_max),
            4 => score_block::<S, 4, NR>(s, p, d, ld, fuse_max),
            3 => score_block::<S, 3, NR>(s, p, d, ld, fuse_max),
            2 => score_block::<S, 2, NR>(s, p, d, ld, fuse_max),
            _ => score_block::<S, 1, NR>(s, p, d, ld, fuse_max),
        }
    }
}

/// MR keys x NR row vectors of S^T, accumulated over d in registers.
#[inline(always)]
unsafe fn score_block<S: Simd, const MR: usize, const NR: usize>(
    s: S,
    p: ScorePtrs,
    d: usize,
    ld: usize,
    fuse_max: bool,
) {
    let lanes = S::F32_LANES;
    let zero = s.splat_f32s(0.0);
    let mut acc = [[zero; NR]; MR];
    // SAFETY: `scores` checked that MR keys of d, d rows of NR vectors of Q^T, MR rows of
    // NR vectors of S^T and NR vectors of tmax lie inside their buffers.
    unsafe {
        let mut c0 = 0;
        while c0 < d {
            let c1 = (c0 + LINE).min(d);
            // The next block's K rows, one line of each per line of this block's: they
            // arrive in L1 while this block's FMAs run (the hardware prefetchers leave
            // them in L2). Forward at N = 4096 on the Xeon: about 2% faster.
            for r in 0..MR {
                prefetch(Level::L1, p.k.wrapping_add((MR + r) * d + c0));
            }
            if !p.pf.is_null() && c0 / LINE < p.pf_lines {
                for r in 0..MR {
                    prefetch(Level::L2, p.pf.wrapping_add(r * p.pf_ld + c0));
                }
            }
            for c in c0..c1 {
                let qrow = p.qt.add(c * ld);
                let mut b = [zero; NR];
                for (v, bv) in b.iter_mut().enumerate() {
                    *bv = load::<S>(qrow.add(v * lanes));
                }
                for (r, acc_r) in acc.iter_mut().enumerate() {
                    let a = s.splat_f32s(*p.k.add(r * d + c));
                    for (acc_rv, bv) in acc_r.iter_mut().zip(b) {
                        *acc_rv = s.mul_add_e_f32s(a, bv, *acc_rv);
                    }
                }
            }
            c0 = c1;
        }
        for (r, acc_r) in acc.iter().enumerate() {
            for (v, &x) in acc_r.iter().enumerate() {
                store::<S>(p.st.add(r * ld + v * lanes), x);
            }
        }
        if fuse_max {
            for v in 0..NR {
                let mut m = acc[0][v];
                for acc_r in &acc[1..] {
                    m = s.max_f32s(m, acc_r[v]);
                }
                let t = p.tmax.add(v * lanes);
                store::<S>(t, s.max_f32s(load::<S>(t), m));
            }
        }
    }
}

/// Shapes and buffers of one O_i += P V_j product.
pub struct PvArgs<'a> {
    /// P^T, at least `nk` rows of `ld`.
    pub pt: &'a [f32],
    pub ld: usize,
    pub nk: usize,
    /// V_j, `nk` rows of `ldv` (a multiple of the lane count).
    pub v: &'a [f32],
    pub ldv: usize,
    /// O_i, `ld` rows of `ldo` (a multiple of the lane count, <= ldv).
    pub acc: &'a mut [f32],
    pub ldo: usize,
}

/// O_i += P V_j over all `ld` rows (a multiple of [`PV_ROWS`]) and `ldo` columns.
#[inline(always)]
pub fn pv<S: Simd>(s: S, a: PvArgs<'_>) {
    let lanes = S::F32_LANES;
    assert!(a.ld.is_multiple_of(PV_ROWS) && a.ldo.is_multiple_of(lanes) && a.ldo <= a.ldv);
    assert!(a.pt.len() >= a.nk * a.ld && a.acc.len() >= a.ld * a.ldo);
    assert!(a.nk == 0 || a.v.len() >= (a.nk - 1) * a.ldv + a.ldo);
    let nvec = a.ldo / lanes;
    let nr_max = pv_vecs::<S>();
    let mr_max = pv_rows::<S>();
    let (pt, v, acc) = (a.pt.as_ptr(), a.v.as_ptr(), a.acc.as_mut_ptr());
    let mut k0 = 0;
    while k0 < a.nk {
        let kc = (a.nk - k0).min(PV_KEY_CHUNK);
        let mut row = 0;
        while row < a.ld {
            let mr = (a.ld - row).min(mr_max);
            let mut v0 = 0;
            while v0 < nvec {
                let nr = (nvec - v0).min(nr_max);
                let col = v0 * lanes;
                // SAFETY: rows row..row+mr <= ld, columns col..col+nr*lanes <= ldo and
                // keys k0..k0+kc <= nk are in bounds of pt, v and acc by the asserts above.
                unsafe {
                    let p = PvPtrs {
                        pt: pt.add(k0 * a.ld + row),
                        v: v.add(k0 * a.ldv + col),
                        acc: acc.add(row * a.ldo + col),
                    };
                    match nr {
                        1 => pv_rows_block::<S, 1>(s, mr, p, a.ld, kc, a.ldv, a.ldo),
                        2 => pv_rows_block::<S, 2>(s, mr, p, a.ld, kc, a.ldv, a.ldo),
                        3 => pv_rows_block::<S, 3>(s, mr, p, a.ld, kc, a.ldv, a.ldo),
                        _ => pv_rows_block::<S, 4>(s, mr, p, a.ld, kc, a.ldv, a.ldo),
                    }
                }
                v0 += nr;
            }
            row += mr;
        }
        k0 += kc;
    }
}

/// Rows of one P V register block on tier `S`: 6 rows x 4 vectors = 24 accumulators + 4
/// V vectors + 1 broadcast on 32-register tiers, so V_j streams through L1 ld/6 times
/// per tile instead of ld/4.
#[inline(always)]
pub const fn pv_rows<S: Simd>() -> usize {
    if S::REGISTER_COUNT >= 32 { 6 } else { PV_ROWS }
}

#[inline(always)]
unsafe fn pv_rows_block<S: Simd, const NR: usize>(
    s: S,
    mr: usize,
    p: PvPtrs,
    ld: usize,
    nk: usize,
    ldv: usize,
    ldo: usize,
) {
    // SAFETY: forwarded from `pv`.
    unsafe {
        match mr {
            6 => pv_block::<S, 6, NR>(s, p, ld, nk, ldv, ldo),
            5 => pv_block::<S, 5, NR>(s, p, ld, nk, ldv, ldo),
            4 => pv_block::<S, 4, NR>(s, p, ld, nk, ldv, ldo),
            3 => pv_block::<S, 3, NR>(s, p, ld, nk, ldv, ldo),
            2 => pv_block::<S, 2, NR>(s, p, ld, nk, ldv, ldo),
            _ => pv_block::<S, 1, NR>(s, p, ld, nk, ldv, ldo),
        }
    }
}

#[derive(Clone, Copy)]
struct PvPtrs {
    pt: *const f32,
    v: *const f32,
    acc: *mut f32,
}

/// MR rows x NR column vectors of O_i, accumulated over the tile's keys in registers.
#[inline(always)]
unsafe fn pv_block<S: Simd, const MR: usize, const NR: usize>(
    s: S,
    p: PvPtrs,
    ld: usize,
    nk: usize,
    ldv: usize,
    ldo: usize,
) {
    let lanes = S::F32_LANES;
    let zero = s.splat_f32s(0.0);
    let mut acc = [[zero; NR]; MR];
    // SAFETY: `pv` checked the extents of every pointer walked here.
    unsafe {
        for (r, acc_r) in acc.iter_mut().enumerate() {
            for (v, x) in acc_r.iter_mut().enumerate() {
                *x = load::<S>(p.acc.add(r * ldo + v * lanes));
            }
        }
        for key in 0..nk {
            let vrow = p.v.add(key * ldv);
            let mut b = [zero; NR];
            for (v, bv) in b.iter_mut().enumerate() {
                *bv = load::<S>(vrow.add(v * lanes));
            }
            let prow = p.pt.add(key * ld);
            for (r, acc_r) in acc.iter_mut().enumerate() {
                let a = s.splat_f32s(*prow.add(r));
                for (acc_rv, bv) in acc_r.iter_mut().zip(b) {
                    *acc_rv = s.mul_add_e_f32s(a, bv, *acc_rv);
                }
            }
        }
        for (r, acc_r) in acc.iter().enumerate() {
            for (v, &x) in acc_r.iter().enumerate() {
                store::<S>(p.acc.add(r * ldo + v * lanes), x);
            }
        }
    }
}
