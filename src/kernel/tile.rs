//! The one tiled FlashAttention algorithm: a query block's online-softmax state, the
//! processing of one (query block, key block) tile, and the two loop orders over tiles.
//! The fast kernel runs [`fa2_block`] with a no-op observer; the instrumented run
//! (`engine::flash`, which sits above the kernel) runs the same functions with an observer that records the
//! state after every tile, in either loop order.
//!
//! Work happens in base 2: Q is multiplied by scale * log2 e when it is packed, biases
//! by log2 e when they are added, so every exponential is a cheap [`exp2`]; the
//! log-sum-exp is converted back to natural units at the end.

use std::ops::Range;

use pulp::Simd;

use super::buf::AlignedBuf;
use super::exp::{exp2, exp2_nonpositive};
use super::micro::{self, PV_ROWS, PvArgs, ScoreArgs};
use super::transpose::transpose_scaled;
use crate::attn::mask::{Mask, TileClass};

/// Rows of the padded block for `rows` query rows on a tier with `lanes` lanes: whole
/// vectors, and whole P V register blocks.
pub(crate) fn padded_rows(rows: usize, lanes: usize) -> usize {
    rows.next_multiple_of(lanes.max(PV_ROWS))
}

/// One head of one batch entry, as the tile code reads it.
pub(crate) struct Head<'a> {
    pub b: usize,
    pub h: usize,
    /// Q of this head, `n_q` rows of `d`.
    pub q: &'a [f32],
    /// K of this head's K/V group, `n_k` rows of `d`.
    pub k: &'a [f32],
    /// V of the group, `n_k` rows of `ldv` (a multiple of the lane count, rows aligned).
    pub v: &'a [f32],
    pub ldv: usize,
    pub n_q: usize,
    pub n_k: usize,
    pub d: usize,
    pub dv: usize,
    /// scale * log2 e.
    pub scale2: f32,
    /// ALiBi slope of this head * log2 e.
    pub alibi2: Option<f32>,
    pub mask: &'a Mask,
    pub br: usize,
    pub bc: usize,
}

impl Head<'_> {
    pub fn q_blocks(&self) -> usize {
        self.n_q.div_ceil(self.br)
    }

    pub fn k_blocks(&self) -> usize {
        self.n_k.div_ceil(self.bc)
    }

    pub fn q_rows(&self, qb: usize) -> Range<usize> {
        qb * self.br..((qb + 1) * self.br).min(self.n_q)
    }

    pub fn k_cols(&self, kb: usize) -> Range<usize> {
        kb * self.bc..((kb + 1) * self.bc).min(self.n_k)
    }

    /// What the mask does to tile (qb, kb).
    pub fn class(&self, qb: usize, kb: usize) -> TileClass {
        self.mask
            .tile_class(self.b, self.h, self.q_rows(qb), self.k_cols(kb))
    }
}

/// What FlashAttention keeps on chip for one query block Q_i: Q_i itself (transposed and
/// scaled), and per row the running max m, the running sum l, the last rescale factor
/// and the unnormalised output.
#[derive(Clone, Default)]
pub struct BlockState {
    pub(crate) rows: Range<usize>,
    /// Padded row count: the leading dimension of `qt` and the rows of `acc`.
    pub(crate) ld: usize,
    /// Padded output columns: the leading dimension of `acc`.
    pub(crate) ldo: usize,
    pub(crate) dv: usize,
    pub(crate) qt: AlignedBuf,
    /// Query positions i' = i + Nk - Nq, for ALiBi.
    pub(crate) qpos: AlignedBuf,
    /// For band masks (none, causal, window, padding): the keys each row sees are
    /// band_lo <= j < band_hi, and the keys j < `sinks` below band_hi (a window's
    /// attention sinks), so a Partial tile is masked lane-wise.
    pub(crate) banded: bool,
    pub(crate) band_lo: AlignedBuf,
    pub(crate) band_hi: AlignedBuf,
    pub(crate) sinks: usize,
    /// The union of the rows' bands: keys outside it are masked for the whole block.
    pub(crate) band: Range<usize>,
    /// Per row, the mask's row shift (a file mask's largest finite bias, subtracted from
    /// the row's biases and added back to m and lse); empty when every shift is 0.
    pub(crate) shift: Vec<f64>,
    pub(crate) m: AlignedBuf,
    pub(crate) l: AlignedBuf,
    pub(crate) alpha: AlignedBuf,
    pub(crate) acc: AlignedBuf,
}

/// Scratch of one tile, reused from tile to tile.
#[derive(Clone, Default)]
pub struct TileScratch {
    st: AlignedBuf,
    tmax: AlignedBuf,
    shift: AlignedBuf,
    lsum: AlignedBuf,
}

/// A read-only view of a block's state after a tile, in natural units, for observers.
pub struct BlockView<'a> {
    state: &'a BlockState,
    skipped: bool,
}

impl BlockState {
    /// The row shift of block row `r` (0 unless a file mask shifts it).
    fn shift_of(&self, r: usize) -> f64 {
        self.shift.get(r).copied().unwrap_or(0.0)
    }
}

impl BlockView<'_> {
    /// Absolute query rows of the block.
    pub fn rows(&self) -> Range<usize> {
        self.state.rows.clone()
    }

    /// Running max of row `r` (relative to the block) of the scaled, biased scores seen
    /// so far; -inf while the row has seen no unmasked key.
    pub fn m(&self, r: usize) -> f64 {
        self.state.m.as_slice()[r] as f64 * std::f64::consts::LN_2 + self.state.shift_of(r)
    }

    /// Running sum of exp(score - m).
    pub fn l(&self, r: usize) -> f64 {
        self.state.l.as_slice()[r] as f64
    }

    /// The factor exp(m_old - m_new) this tile applied to the row (1 for a skipped tile).
    pub fn alpha(&self, r: usize) -> f64 {
        if self.skipped {
            1.0
        } else {
            self.state.alpha.as_slice()[r] as f64
        }
    }

    /// The output of row `r` normalised by the running sum: softmax over the keys seen so
    /// far, times V (zeros while l is 0).
    pub fn o(&self, r: usize) -> Vec<f64> {
        let l = self.l(r);
        let row = &self.state.acc.as_slice()[r * self.state.ldo..][..self.state.dv];
        if l == 0.0 {
            vec![0.0; row.len()]
        } else {
            row.iter().map(|&x| x as f64 / l).collect()
        }
    }
}

/// Called after every tile of the tiled loop. The fast path uses [`NoObserver`], which
/// compiles to nothing.
pub trait TileObserver {
    /// After tile (q_block, k_block): the block's state, or that the tile was skipped.
    fn tile(&mut self, q_block: usize, k_block: usize, skipped: bool, state: BlockView<'_>);

    /// During a computed tile, once its scores S = scale Q_i K_j^T + biases are complete
    /// and before the softmax uses them.
    fn scores(&mut self, _q_block: usize, _k_block: usize, _scores: ScoresView<'_>) {}
}

/// The scores of one tile, in natural units, as the kernel computed them.
pub struct ScoresView<'a> {
    rows: usize,
    cols: Range<usize>,
    /// The keys actually computed (a band mask trims the rest, which are masked).
    computed: Range<usize>,
    st: &'a [f32],
    ld: usize,
    /// Per row, the row shift to add back (empty if none).
    shift: &'a [f64],
}

impl<'a> ScoresView<'a> {
    /// Scores held transposed as `st` [keys of `computed`][ld] in base 2, less the row
    /// shift `shift` (per row; empty if none).
    pub(crate) fn new(
        rows: usize,
        cols: Range<usize>,
        computed: Range<usize>,
        st: &'a [f32],
        ld: usize,
        shift: &'a [f64],
    ) -> Self {
        ScoresView {
            rows,
            cols,
            computed,
            st,
            ld,
            shift,
        }
    }

    /// Rows of the query block.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Keys of the tile.
    pub fn cols(&self) -> Range<usize> {
        self.cols.clone()
    }

    /// Score of block row `r` against key `j` (absolute); -inf where masked.
    pub fn s(&self, r: usize, j: usize) -> f64 {
        if self.computed.contains(&j) {
            self.st[(j - self.computed.start) * self.ld + r] as f64 * std::f64::consts::LN_2
                + self.shift.get(r).copied().unwrap_or(0.0)
        } else {
            f64::NEG_INFINITY
        }
    }
}

/// The observer of the fast path: records nothing.
pub struct NoObserver;

impl TileObserver for NoObserver {
    #[inline(always)]
    fn tile(&mut self, _: usize, _: usize, _: bool, _: BlockView<'_>) {}
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

/// Load Q_i into `state` (transposed, scaled into base 2) and reset m, l and O.
#[inline(always)]
pub(crate) fn begin_block<S: Simd>(head: &Head<'_>, qb: usize, state: &mut BlockState) {
    let lanes = S::F32_LANES;
    let rows = head.q_rows(qb);
    let ld = padded_rows(rows.len(), lanes);
    let ldo = head.dv.next_multiple_of(lanes);
    state.ld = ld;
    state.ldo = ldo;
    state.dv = head.dv;
    state.qt.resize_zeroed(head.d * ld);
    transpose_scaled::<S>(
        &head.q[rows.start * head.d..rows.end * head.d],
        rows.len(),
        head.d,
        head.scale2,
        state.qt.as_mut_slice(),
        ld,
    );
    state.qpos.resize_zeroed(ld);
    let offset = head.n_k as f32 - head.n_q as f32;
    for (r, p) in state.qpos.as_mut_slice().iter_mut().enumerate() {
        *p = (rows.start + r) as f32 + offset;
    }
    state.banded = head.mask.band(head.b, rows.start).is_some();
    state.sinks = head.mask.sinks();
    if state.banded {
        state.band_lo.resize_zeroed(ld);
        state.band_hi.resize_zeroed(ld);
        let (lo, hi) = (state.band_lo.as_mut_slice(), state.band_hi.as_mut_slice());
        // Padding rows see everything, so they stay finite.
        hi.fill(f32::INFINITY);
        state.band = fill_bands(head, rows.clone(), lo, hi);
    }
    state.shift.clear();
    if head.mask.max_row_shift() != 0.0 {
        let (b, h) = (head.b, head.h);
        state
            .shift
            .extend(rows.clone().map(|i| head.mask.row_shift(b, h, i)));
    }
    state.m.resize_zeroed(ld);
    state.m.as_mut_slice().fill(f32::NEG_INFINITY);
    state.l.resize_zeroed(ld);
    state.alpha.resize_zeroed(ld);
    state.alpha.as_mut_slice().fill(1.0);
    state.acc.resize_zeroed(ld * ldo);
    state.rows = rows;
}

/// Each row's band lo <= j < hi into `lo[r]`, `hi[r]` for the rows `rows` of a band mask
/// (r from 0), and the union of the rows' spans (their sinks included), which stays empty
/// if every row is fully masked.
pub(crate) fn fill_bands(
    head: &Head<'_>,
    rows: Range<usize>,
    lo: &mut [f32],
    hi: &mut [f32],
) -> Range<usize> {
    let (mut first, mut last) = (usize::MAX, 0);
    for (r, i) in rows.enumerate() {
        if let Some(band) = head.mask.band(head.b, i) {
            lo[r] = band.keys.start as f32;
            hi[r] = band.keys.end as f32;
            let span = band.span();
            if !span.is_empty() {
                first = first.min(span.start);
                last = last.max(span.end);
            }
        }
    }
    first..last
}

/// Process tile (Q_i, K_j) for the columns `cols`, which the mask classed `class`
/// (never Empty: empty tiles are skipped by the loops).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn process_tile<S: Simd, O: TileObserver>(
    s: S,
    head: &Head<'_>,
    (qb, kb): (usize, usize),
    state: &mut BlockState,
    scr: &mut TileScratch,
    class: TileClass,
    observer: &mut O,
) {
    let lanes = S::F32_LANES;
    let tile_cols = head.k_cols(kb);
    let cols = tile_cols.clone();
    // A band mask masks the keys outside the union of the rows' bands for every row of
    // the block: a diagonal tile computes only the keys some row sees. Those keys would
    // add exactly 0 to every sum, so the result is the same.
    let cols = if class == TileClass::Partial && state.banded {
        cols.start.max(state.band.start)..cols.end.min(state.band.end)
    } else {
        cols
    };
    if cols.is_empty() {
        state.alpha.as_mut_slice().fill(1.0);
        return;
    }
    let (ld, nk) = (state.ld, cols.len());
    let nvec = ld / lanes;
    scr.st.ensure(head.bc.max(nk) * ld);
    for buf in [&mut scr.tmax, &mut scr.shift, &mut scr.lsum] {
        buf.ensure(ld);
    }
    scr.tmax.as_mut_slice()[..ld].fill(f32::NEG_INFINITY);

    // 1. S^T = K_j Q_i^T in base 2. Without biases the tile max comes for free from the
    //    accumulators; otherwise add the biases first and take the max after.
    let plain = class == TileClass::Full && head.alibi2.is_none();
    micro::scores(
        s,
        ScoreArgs {
            k: &head.k[cols.start * head.d..cols.end * head.d],
            d: head.d,
            nk,
            qt: state.qt.as_slice(),
            ld,
            st: scr.st.as_mut_slice(),
            tmax: scr.tmax.as_mut_slice(),
            fuse_max: plain,
            // V_j into L2 while S^T is computed, for P V after the softmax.
            prefetch: &head.v[cols.start * head.ldv..],
            prefetch_ld: head.ldv,
        },
    );
    if !plain {
        add_biases::<S>(s, head, state, scr, cols.clone(), class);
    }
    observer.scores(
        qb,
        kb,
        ScoresView {
            rows: state.rows.len(),
            cols: tile_cols,
            computed: cols.clone(),
            st: scr.st.as_slice(),
            ld,
            shift: &state.shift,
        },
    );

    // 2. The online-softmax update of m, and the shift each score is taken against.
    online_softmax_step::<S>(s, state, scr, nvec);

    // 3. P = 2^(S - shift) in place, and its row sums; l = alpha l + rowsum(P).
    exp_and_sum::<S>(s, scr, ld, nk, nvec);
    update_running_sum::<S>(s, state, scr);

    // 4. O = alpha O for rows whose max moved, then O += P V_j.
    rescale_rows::<S>(s, state);
    micro::pv(
        s,
        PvArgs {
            pt: scr.st.as_slice(),
            ld,
            nk,
            v: &head.v[cols.start * head.ldv..],
            ldv: head.ldv,
            acc: state.acc.as_mut_slice(),
            ldo: state.ldo,
        },
    );
}

/// Add ALiBi (lane-wise, every tile) and the mask's per-element biases (Partial tiles
/// only) to S^T, then take the per-row tile max.
#[inline(always)]
fn add_biases<S: Simd>(
    s: S,
    head: &Head<'_>,
    state: &BlockState,
    scr: &mut TileScratch,
    cols: Range<usize>,
    class: TileClass,
) {
    let lanes = S::F32_LANES;
    let ld = state.ld;
    let nvec = ld / lanes;
    let st = scr.st.as_mut_slice();
    let rows = RowBias {
        rows: state.rows.clone(),
        qpos: state.qpos.as_slice(),
        band: state
            .banded
            .then(|| (state.band_lo.as_slice(), state.band_hi.as_slice())),
        sinks: state.sinks,
    };
    apply_biases(s, head, &rows, st, ld, cols.clone(), class);
    let tmax = scr.tmax.as_mut_slice();
    let (tv, _) = S::as_mut_simd_f32s(&mut tmax[..ld]);
    for jj in 0..cols.len() {
        let (rv, _) = S::as_simd_f32s(&st[jj * ld..][..ld]);
        for (t, &x) in tv.iter_mut().zip(rv) {
            *t = s.max_f32s(*t, x);
        }
    }
    debug_assert_eq!(tv.len(), nvec);
}

/// What the bias code needs to know about a query block's rows: their absolute range,
/// their positions on the key axis (for ALiBi) and, for band masks, each row's band
/// band_lo <= j < band_hi (`ld` values each, padding rows seeing everything) and the
/// sinks j < `sinks` every row sees below its band_hi.
pub(crate) struct RowBias<'a> {
    pub rows: Range<usize>,
    pub qpos: &'a [f32],
    pub band: Option<(&'a [f32], &'a [f32])>,
    pub sinks: usize,
}

/// Add ALiBi (lane-wise) and the mask (Partial tiles only: lane-wise for band masks,
/// else element by element) to the base-2 scores S^T [keys of `cols`][ld]; shared by
/// the forward and the backward, so both see exactly the same scores.
#[inline(always)]
pub(crate) fn apply_biases<S: Simd>(
    s: S,
    head: &Head<'_>,
    rows: &RowBias<'_>,
    st: &mut [f32],
    ld: usize,
    cols: Range<usize>,
    class: TileClass,
) {
    if let Some(slope2) = head.alibi2 {
        let neg = s.splat_f32s(-slope2);
        for (jj, j) in cols.clone().enumerate() {
            let key = s.splat_f32s(j as f32);
            let row = &mut st[jj * ld..][..ld];
            let (rv, _) = S::as_mut_simd_f32s(row);
            let (qv, _) = S::as_simd_f32s(&rows.qpos[..ld]);
            for (x, &p) in rv.iter_mut().zip(qv) {
                let dist = s.abs_f32s(s.sub_f32s(p, key));
                *x = s.mul_add_e_f32s(neg, dist, *x);
            }
        }
    }
    if class != TileClass::Partial {
        return;
    }
    if let Some((lo, hi)) = rows.band {
        let ninf = s.splat_f32s(f32::NEG_INFINITY);
        let (lo, _) = S::as_simd_f32s(&lo[..ld]);
        let (hi, _) = S::as_simd_f32s(&hi[..ld]);
        for (jj, j) in cols.clone().enumerate() {
            let key = s.splat_f32s(j as f32);
            let (rv, _) = S::as_mut_simd_f32s(&mut st[jj * ld..][..ld]);
            if j < rows.sinks {
                // A sink: seen by every row whose band reaches past it.
                for (x, &hi) in rv.iter_mut().zip(hi) {
                    let outside = s.greater_than_or_equal_f32s(key, hi);
                    *x = s.select_f32s(outside, ninf, *x);
                }
                continue;
            }
            for ((x, &lo), &hi) in rv.iter_mut().zip(lo).zip(hi) {
                let outside = s.or_m32s(
                    s.less_than_f32s(key, lo),
                    s.greater_than_or_equal_f32s(key, hi),
                );
                *x = s.select_f32s(outside, ninf, *x);
            }
        }
    } else {
        for (r, i) in rows.rows.clone().enumerate() {
            for (jj, j) in cols.clone().enumerate() {
                // Shifted by the row's largest finite bias, so in [-inf, 0]: a bias too
                // negative for f32 becomes -inf, which is exact (see attn::range).
                let bias = head.mask.shifted_bias(head.b, head.h, i, j);
                if bias != 0.0 {
                    st[jj * ld + r] += (bias * std::f64::consts::LOG2_E) as f32;
                }
            }
        }
    }
}

/// The online-softmax update shared by every loop order, lane-wise over the block's rows:
/// m_new = max(m_old, tile max); alpha = 2^(m_old - m_new) (1 if the max did not move,
/// including a row still at -inf); the shift for the exponentials is m_new, or 0 while
/// m_new is -inf so that masked scores give 2^-inf = 0 instead of NaN.
#[inline(always)]
fn online_softmax_step<S: Simd>(s: S, state: &mut BlockState, scr: &mut TileScratch, nvec: usize) {
    let lanes = S::F32_LANES;
    let one = s.splat_f32s(1.0);
    let zero = s.splat_f32s(0.0);
    let ninf = s.splat_f32s(f32::NEG_INFINITY);
    // SAFETY: every buffer holds at least `ld` = nvec * lanes values.
    unsafe {
        let (m, alpha) = (
            state.m.as_mut_slice().as_mut_ptr(),
            state.alpha.as_mut_slice().as_mut_ptr(),
        );
        let (tmax, shift) = (
            scr.tmax.as_slice().as_ptr(),
            scr.shift.as_mut_slice().as_mut_ptr(),
        );
        for v in 0..nvec {
            let o = v * lanes;
            let m_old = load::<S>(m.add(o));
            let m_new = s.max_f32s(m_old, load::<S>(tmax.add(o)));
            let a = s.select_f32s(
                s.equal_f32s(m_old, m_new),
                one,
                exp2(s, s.sub_f32s(m_old, m_new)),
            );
            store::<S>(m.add(o), m_new);
            store::<S>(alpha.add(o), a);
            store::<S>(
                shift.add(o),
                s.select_f32s(s.equal_f32s(m_new, ninf), zero, m_new),
            );
        }
    }
}

/// The second half of the online-softmax update: l = alpha l + (row sums of this tile).
#[inline(always)]
fn update_running_sum<S: Simd>(s: S, state: &mut BlockState, scr: &TileScratch) {
    let ld = state.ld;
    let (l, _) = S::as_mut_simd_f32s(&mut state.l.as_mut_slice()[..ld]);
    let (alpha, _) = S::as_simd_f32s(&state.alpha.as_slice()[..ld]);
    let (lsum, _) = S::as_simd_f32s(&scr.lsum.as_slice()[..ld]);
    for ((l, &a), &t) in l.iter_mut().zip(alpha).zip(lsum) {
        *l = s.mul_add_e_f32s(*l, a, t);
    }
}

/// P^T = 2^(S^T - shift) in place over the tile's keys, and the row sums into `lsum`.
#[inline(always)]
fn exp_and_sum<S: Simd>(s: S, scr: &mut TileScratch, ld: usize, nk: usize, nvec: usize) {
    let lanes = S::F32_LANES;
    let zero = s.splat_f32s(0.0);
    // SAFETY: st holds nk rows of ld; shift and lsum hold ld values.
    unsafe {
        let st = scr.st.as_mut_slice().as_mut_ptr();
        let (shift, lsum) = (
            scr.shift.as_slice().as_ptr(),
            scr.lsum.as_mut_slice().as_mut_ptr(),
        );
        for v in 0..nvec {
            let o = v * lanes;
            let m = load::<S>(shift.add(o));
            // Two sums, so consecutive keys do not wait on one add chain.
            let (mut s0, mut s1) = (zero, zero);
            let mut j = 0;
            while j + 2 <= nk {
                let p0 = st.add(j * ld + o);
                let p1 = st.add((j + 1) * ld + o);
                let e0 = exp2_nonpositive(s, s.sub_f32s(load::<S>(p0), m));
                let e1 = exp2_nonpositive(s, s.sub_f32s(load::<S>(p1), m));
                store::<S>(p0, e0);
                store::<S>(p1, e1);
                s0 = s.add_f32s(s0, e0);
                s1 = s.add_f32s(s1, e1);
                j += 2;
            }
            if j < nk {
                let p0 = st.add(j * ld + o);
                let e0 = exp2_nonpositive(s, s.sub_f32s(load::<S>(p0), m));
                store::<S>(p0, e0);
                s0 = s.add_f32s(s0, e0);
            }
            store::<S>(lsum.add(o), s.add_f32s(s0, s1));
        }
    }
}

/// O_r *= alpha_r for the rows whose running max moved in this tile.
#[inline(always)]
fn rescale_rows<S: Simd>(s: S, state: &mut BlockState) {
    let ldo = state.ldo;
    let alpha = state.alpha.as_slice();
    let acc = state.acc.as_mut_slice();
    for (r, &a) in alpha.iter().enumerate().take(state.ld) {
        if a != 1.0 {
            let f = s.splat_f32s(a);
            let (row, _) = S::as_mut_simd_f32s(&mut acc[r * ldo..][..ldo]);
            for x in row {
                *x = s.mul_f32s(*x, f);
            }
        }
    }
}

/// Write the block's rows: O = acc / l and lse = m + ln l in natural units; a row that saw
/// no unmasked key gets zeros and lse = -inf.
#[inline(always)]
pub(crate) fn finish_block(state: &BlockState, out: &mut [f32], lse: &mut [f32]) {
    let dv = state.dv;
    let (m, l, acc) = (state.m.as_slice(), state.l.as_slice(), state.acc.as_slice());
    for r in 0..state.rows.len() {
        let o = &mut out[r * dv..][..dv];
        if l[r] == 0.0 {
            o.fill(0.0);
            lse[r] = f32::NEG_INFINITY;
            continue;
        }
        for (y, &x) in o.iter_mut().zip(&acc[r * state.ldo..][..dv]) {
            *y = x / l[r];
        }
        let lse2 = m[r] as f64 + (l[r] as f64).log2();
        lse[r] = (lse2 * std::f64::consts::LN_2 + state.shift_of(r)) as f32;
    }
}

/// FlashAttention-2 order for one query block: every key block in turn, skipping the
/// tiles the mask empties, then the block's output rows.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn fa2_block<S: Simd, O: TileObserver>(
    s: S,
    head: &Head<'_>,
    qb: usize,
    state: &mut BlockState,
    scr: &mut TileScratch,
    out: &mut [f32],
    lse: &mut [f32],
    observer: &mut O,
) {
    begin_block::<S>(head, qb, state);
    for kb in 0..head.k_blocks() {
        let class = head.class(qb, kb);
        let skipped = class == TileClass::Empty;
        if !skipped {
            process_tile(s, head, (qb, kb), state, scr, class, observer);
        }
        observer.tile(qb, kb, skipped, BlockView { state, skipped });
    }
    finish_block(state, out, lse);
}

/// FlashAttention-1 order for a whole head: key blocks outer, query blocks inner, every
/// query block's state kept across key blocks (in HBM, in the paper's terms).
#[inline(always)]
pub(crate) fn fa1_head<S: Simd, O: TileObserver>(
    s: S,
    head: &Head<'_>,
    scr: &mut TileScratch,
    out: &mut [f32],
    lse: &mut [f32],
    observer: &mut O,
) {
    let mut states: Vec<BlockState> = (0..head.q_blocks())
        .map(|qb| {
            let mut st = BlockState::default();
            begin_block::<S>(head, qb, &mut st);
            st
        })
        .collect();
    for kb in 0..head.k_blocks() {
        for (qb, state) in states.iter_mut().enumerate() {
            let class = head.class(qb, kb);
            let skipped = class == TileClass::Empty;
            if !skipped {
                process_tile(s, head, (qb, kb), state, scr, class, observer);
            }
            observer.tile(qb, kb, skipped, BlockView { state, skipped });
        }
    }
    for state in &states {
        let rows = state.rows.clone();
        finish_block(
            state,
            &mut out[rows.start * head.dv..rows.end * head.dv],
            &mut lse[rows],
        );
    }
}
