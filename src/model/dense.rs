//! The forward's projections over many tokens: y = x W^T (+ b), x [m, k] and W [n, k]
//! row-major (W as `nn.Linear` stores it), several products of the same x in one call
//! (Q, K, V; gate, up), threads splitting W's rows.
//!
//! Written here rather than left to the `gemm` crate (which [`super::gemm`] still uses
//! for a few rows, e.g. a decode step): on stable Rust that crate runs its AVX2 kernels
//! on an AVX-512 CPU, it packs W into panels on every call (a separate pass over every
//! weight, 13% of a SmolLM2 forward in a profile), and each call wakes its threads anew.
//! Here W is never copied: a block of [`MR`] rows of W is read in place, each element
//! broadcast, against a panel of x^T (tokens along the vector lanes; x^T is packed once
//! per call, m x k values, which every row of W then reuses). The register block is
//! MR x 4 vectors of tokens on 32-register tiers (6 x 4 = 24 accumulators + 4 panel
//! vectors + 1 broadcast; AVX-512: 6 weights x 64 tokens), MR x 2 on AVX2 (15 of 16). Each
//! panel load feeds 6 FMAs, each broadcast 4 (AVX2: 2). The block is stored through a
//! small transpose into y's rows.
//!
//! Every sum runs over k in order 0..k whatever the tier's block shape or the thread
//! count, so 1 and N threads give the same bits.
//!
//! One row of x (a decode step) is a matrix-vector product instead: [`super::gemv`].

use pulp::{Simd, WithSimd};

use crate::error::{Error, Result};
use crate::kernel::{AlignedBuf, Tier, team};

/// Rows of W per register block.
pub const MR: usize = 6;

/// Column vectors (of tokens) per register block on tier `S`.
#[inline(always)]
const fn nv_max<S: Simd>() -> usize {
    if S::REGISTER_COUNT >= 32 { 4 } else { 2 }
}

/// Tokens per x^T panel on tier `S`.
#[inline(always)]
const fn panel_width<S: Simd>() -> usize {
    nv_max::<S>() * S::F32_LANES
}

/// Bytes of x^T above which [`rows_into`] runs a tile's row blocks one panel at a time.
pub(crate) const XT_STREAMED: usize = 512 * 1024;

/// Panels of x^T each row block of a tile runs over before the next block starts. When
/// x^T fits in L2 (a short text), all of them: each block of W rows stays in L1 while
/// the panels pass. When it does not, one: the panel, read from L3 once per tile, serves
/// every row block of the tile (the tile itself is in L2), where block by block x^T came
/// from L3 once per block. On a Zen 3, prefill of 512 tokens went from 2246 to 1991 ms
/// (SmolLM2, one thread) and from 2145 to 1941 ms (Gemma 3 270M), medians of 7
/// alternating runs.
#[inline(always)]
fn group_panels<S: Simd>(m: usize, k: usize) -> usize {
    let npanels = m.div_ceil(panel_width::<S>());
    if m * k * size_of::<f32>() > XT_STREAMED {
        1
    } else {
        npanels
    }
}

/// The widest panel of any tier (AVX-512: 4 x 16), the size of the transpose buffer.
const MAX_PANEL: usize = 64;

/// One product of a call: y [m, n] = x W^T (+ bias), W [n, k], bias [n].
pub struct Product<'a> {
    pub w: &'a [f32],
    pub n: usize,
    pub bias: Option<&'a [f32]>,
    pub y: &'a mut [f32],
}

/// Every product of x [m, k] in `prods`, with `threads` workers.
pub fn products(
    x: &[f32],
    m: usize,
    k: usize,
    prods: &mut [Product<'_>],
    threads: usize,
) -> Result<()> {
    if x.len() != m * k {
        return Err(Error::Internal(format!(
            "dense product: x holds {} values for [{m}, {k}]",
            x.len()
        )));
    }
    for p in prods.iter() {
        if p.w.len() != p.n * k || p.y.len() != m * p.n || p.bias.is_some_and(|b| b.len() != p.n) {
            return Err(Error::Internal(format!(
                "dense product: W holds {} for [{}, {k}], y {} for [{m}, {}], bias {:?}",
                p.w.len(),
                p.n,
                p.y.len(),
                p.n,
                p.bias.map(<[f32]>::len)
            )));
        }
    }
    if m == 0 || prods.iter().all(|p| p.n == 0) {
        return Ok(());
    }
    if k == 0 {
        for p in prods.iter_mut() {
            for row in p.y.chunks_mut(p.n.max(1)) {
                match p.bias {
                    Some(b) => row.copy_from_slice(b),
                    None => row.fill(0.0),
                }
            }
        }
        return Ok(());
    }
    let tier = Tier::detect();
    let xt = tier.dispatch(Pack { x, m, k });
    let jobs: Vec<Job> = prods
        .iter_mut()
        .map(|p| Job {
            w: p.w.as_ptr(),
            n: p.n,
            bias: p.bias.map_or(std::ptr::null(), <[f32]>::as_ptr),
            y: p.y.as_mut_ptr(),
        })
        .collect();
    let units: usize = jobs.iter().map(|j| j.n.div_ceil(MR)).sum();
    let threads = threads.clamp(1, units);
    let run = |units: std::ops::Range<usize>| {
        let chunk = Chunk {
            xt: xt.as_slice(),
            m,
            k,
            jobs: &jobs,
            units,
        };
        tier.dispatch(chunk);
    };
    if threads == 1 {
        run(0..units);
        return Ok(());
    }
    // Units handed out as threads come free, each thread starting on its own share.
    team::for_each(threads, units, &|u| run(u..u + 1))
}

/// x [m, k] -> x^T in panels of `panel_width` tokens: panel c holds [k][width] (token
/// c * width + lane), zero past m.
struct Pack<'a> {
    x: &'a [f32],
    m: usize,
    k: usize,
}

impl WithSimd for Pack<'_> {
    type Output = AlignedBuf;
    #[inline(always)]
    fn with_simd<S: Simd>(self, _s: S) -> AlignedBuf {
        let pw = panel_width::<S>();
        let (m, k) = (self.m, self.k);
        let mut xt = AlignedBuf::zeros(m.div_ceil(pw) * k * pw);
        let dst = xt.as_mut_slice();
        for (t, row) in self.x.chunks_exact(k).enumerate() {
            let panel = &mut dst[(t / pw) * k * pw..][..k * pw];
            let lane = t % pw;
            for (p, &v) in row.iter().enumerate() {
                panel[p * pw + lane] = v;
            }
        }
        xt
    }
}

/// One product as raw parts, shared by the workers: each writes only the columns of y of
/// the W rows its units cover.
#[derive(Clone, Copy)]
struct Job {
    w: *const f32,
    n: usize,
    /// Null without a bias.
    bias: *const f32,
    y: *mut f32,
}

// SAFETY: a Job is read by several workers, which read W and the bias (shared, never
// written during the call) and write disjoint sets of y's elements (the columns of their
// own row blocks of W), while the borrows behind the pointers are held by `products`.
unsafe impl Send for Job {}
unsafe impl Sync for Job {}

/// The row blocks `units` (numbered across the jobs in order) of one call.
struct Chunk<'a> {
    xt: &'a [f32],
    m: usize,
    k: usize,
    jobs: &'a [Job],
    units: std::ops::Range<usize>,
}

impl WithSimd for Chunk<'_> {
    type Output = ();
    #[inline(always)]
    fn with_simd<S: Simd>(self, s: S) {
        let (m, k) = (self.m, self.k);
        let mut first = 0;
        for job in self.jobs {
            let blocks = job.n.div_ceil(MR);
            let lo = self.units.start.max(first);
            let hi = self.units.end.min(first + blocks);
            for b in lo..hi {
                let j0 = (b - first) * MR;
                let r = MR.min(job.n - j0);
                // SAFETY: rows j0..j0 + r < n of W (k each) exist; the block writes
                // y[..m][j0..j0 + r], inside y [m, n], which no other unit writes.
                unsafe {
                    let bias = (!job.bias.is_null()).then(|| job.bias.add(j0));
                    row_block(
                        s,
                        self.xt,
                        m,
                        k,
                        job.w.add(j0 * k),
                        r,
                        bias,
                        job.y.add(j0),
                        job.n,
                        0..m.div_ceil(panel_width::<S>()),
                    );
                }
            }
            first += blocks;
        }
    }
}

/// r <= MR rows of W from `w` (row stride k) against every panel of `xt`: y[t * ldy + i]
/// for the m tokens t and rows i < r, plus the bias.
///
/// # Safety
/// r rows of k values at `w`, r bias values if any, and m rows of y (stride `ldy`) with r
/// values each that no one else writes during the call.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn row_block<S: Simd>(
    s: S,
    xt: &[f32],
    m: usize,
    k: usize,
    w: *const f32,
    r: usize,
    bias: Option<*const f32>,
    y: *mut f32,
    ldy: usize,
    panels: std::ops::Range<usize>,
) {
    let lanes = S::F32_LANES;
    let pw = panel_width::<S>();
    debug_assert!(pw <= MAX_PANEL && xt.len() >= m.div_ceil(pw) * k * pw);
    for (c, panel) in xt
        .chunks_exact(k * pw)
        .enumerate()
        .take(panels.end)
        .skip(panels.start)
    {
        let t0 = c * pw;
        let valid = pw.min(m - t0);
        let nv = valid.div_ceil(lanes);
        // SAFETY: the panel's k x pw values exist; the rest is the caller's.
        unsafe {
            let blk = Block {
                xt: panel.as_ptr(),
                pw,
                w,
                k,
                y: y.add(t0 * ldy),
                ldy,
                bias,
                valid,
            };
            match nv {
                1 => rows::<S, 1>(s, r, blk),
                2 => rows::<S, 2>(s, r, blk),
                3 => rows::<S, 3>(s, r, blk),
                _ => rows::<S, 4>(s, r, blk),
            }
        }
    }
}

/// x^T packed once (as [`products`] packs it) for [`rows_into`]: a quantized W,
/// dequantized a tile of rows at a time, reuses one packing for all its tiles.
pub(crate) struct PackedX {
    tier: Tier,
    xt: AlignedBuf,
    m: usize,
    k: usize,
}

pub(crate) fn pack_x(tier: Tier, x: &[f32], m: usize, k: usize) -> PackedX {
    PackedX {
        tier,
        xt: tier.dispatch(Pack { x, m, k }),
        m,
        k,
    }
}

/// y[t * ldy + i] = w[i] . x[t] (+ bias[i]) for the rows i of `w` ([rows, k]) and the m
/// tokens t of `p`, on p's tier.
///
/// # Safety
/// `y` points at m rows of stride `ldy` holding w's row count of values each, which no one
/// else reads or writes during the call.
pub(crate) unsafe fn rows_into(
    p: &PackedX,
    w: &[f32],
    bias: Option<&[f32]>,
    y: *mut f32,
    ldy: usize,
) {
    let rows = w.len() / p.k.max(1);
    assert!(w.len() == rows * p.k && bias.is_none_or(|b| b.len() == rows) && p.k > 0);
    p.tier.dispatch(RowsInto {
        xt: p.xt.as_slice(),
        m: p.m,
        k: p.k,
        w,
        rows,
        bias,
        y,
        ldy,
    });
}

struct RowsInto<'a> {
    xt: &'a [f32],
    m: usize,
    k: usize,
    w: &'a [f32],
    rows: usize,
    bias: Option<&'a [f32]>,
    y: *mut f32,
    ldy: usize,
}

impl WithSimd for RowsInto<'_> {
    type Output = ();
    #[inline(always)]
    fn with_simd<S: Simd>(self, s: S) {
        let npanels = self.m.div_ceil(panel_width::<S>());
        let group = group_panels::<S>(self.m, self.k).max(1);
        for g0 in (0..npanels).step_by(group) {
            for j0 in (0..self.rows).step_by(MR) {
                let r = MR.min(self.rows - j0);
                // SAFETY: rows j0..j0 + r of w exist (checked by rows_into); y is the caller's.
                unsafe {
                    row_block(
                        s,
                        self.xt,
                        self.m,
                        self.k,
                        self.w.as_ptr().add(j0 * self.k),
                        r,
                        self.bias.map(|b| b.as_ptr().add(j0)),
                        self.y.add(j0),
                        self.ldy,
                        g0..(g0 + group).min(npanels),
                    );
                }
            }
        }
    }
}

/// One register block's operands: `r` rows of W from `w` (row stride k), the panel `xt`
/// ([k][pw]), and where its `valid` tokens x r outputs go in y (row stride `ldy`).
#[derive(Clone, Copy)]
struct Block {
    xt: *const f32,
    pw: usize,
    w: *const f32,
    k: usize,
    y: *mut f32,
    ldy: usize,
    bias: Option<*const f32>,
    valid: usize,
}

#[inline(always)]
unsafe fn rows<S: Simd, const NV: usize>(s: S, r: usize, b: Block) {
    // SAFETY: forwarded from the caller.
    unsafe {
        match r {
            6 => block::<S, 6, NV>(s, b),
            5 => block::<S, 5, NV>(s, b),
            4 => block::<S, 4, NV>(s, b),
            3 => block::<S, 3, NV>(s, b),
            2 => block::<S, 2, NV>(s, b),
            _ => block::<S, 1, NV>(s, b),
        }
    }
}

#[inline(always)]
unsafe fn load<S: Simd>(p: *const f32) -> S::f32s {
    // SAFETY: the caller guarantees `F32_LANES` readable f32s at `p`.
    unsafe { core::ptr::read_unaligned(p.cast::<S::f32s>()) }
}

/// R rows of W x NV vectors of tokens, accumulated over k in registers, then stored
/// transposed (token-major) into y with the bias added.
#[inline(always)]
unsafe fn block<S: Simd, const R: usize, const NV: usize>(s: S, b: Block) {
    let lanes = S::F32_LANES;
    let zero = s.splat_f32s(0.0);
    let mut acc = [[zero; NV]; R];
    // SAFETY: the caller checked that R rows of k weights, k panel rows of pw >= NV * lanes
    // values, and `valid` token rows of y at the given strides are in bounds.
    unsafe {
        let mut wr = [b.w; R];
        for (i, p) in wr.iter_mut().enumerate() {
            *p = b.w.add(i * b.k);
        }
        for kk in 0..b.k {
            let prow = b.xt.add(kk * b.pw);
            let mut xv = [zero; NV];
            for (v, x) in xv.iter_mut().enumerate() {
                *x = load::<S>(prow.add(v * lanes));
            }
            for (acc_r, w) in acc.iter_mut().zip(&wr) {
                let a = s.splat_f32s(*w.add(kk));
                for (acc_rv, &x) in acc_r.iter_mut().zip(&xv) {
                    *acc_rv = s.mul_add_e_f32s(a, x, *acc_rv);
                }
            }
        }
        let mut tmp = [[0.0f32; MAX_PANEL]; R];
        for (t_r, acc_r) in tmp.iter_mut().zip(&acc) {
            let lanes_of: &[f32] = pulp::bytemuck::cast_slice(acc_r.as_slice());
            t_r[..NV * lanes].copy_from_slice(lanes_of);
        }
        let mut bias = [0.0f32; R];
        if let Some(bp) = b.bias {
            for (i, x) in bias.iter_mut().enumerate() {
                *x = *bp.add(i);
            }
        }
        for t in 0..b.valid {
            let dst = b.y.add(t * b.ldy);
            for (i, (row, &bi)) in tmp.iter().zip(&bias).enumerate() {
                *dst.add(i) = row[t] + bi;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::available_tiers;

    fn reference(
        x: &[f32],
        m: usize,
        k: usize,
        w: &[f32],
        n: usize,
        b: Option<&[f32]>,
    ) -> Vec<f64> {
        let mut y = vec![0.0f64; m * n];
        for i in 0..m {
            for j in 0..n {
                let mut acc = b.map_or(0.0, |b| b[j] as f64);
                for t in 0..k {
                    acc += x[i * k + t] as f64 * w[j * k + t] as f64;
                }
                y[i * n + j] = acc;
            }
        }
        y
    }

    fn val(i: usize, salt: usize) -> f32 {
        (((i * 7919 + salt * 104_729) % 211) as f32 / 211.0) - 0.5
    }

    /// Every tier (forced through ATTNVIZ_SIMD is not possible inside one process, so each
    /// tier's chunk runs directly), odd shapes, several products, bias or not, 1-3 threads.
    #[test]
    fn matches_f64_on_every_tier_odd_shapes_and_threads() {
        let shapes = [
            (1, 1, 1),
            (1, 9, 7),
            (5, 3, 13),
            (16, 16, 6),
            (17, 33, 65),
            (63, 20, 7),
            (64, 64, 64),
            (65, 70, 97),
            (130, 96, 30),
        ];
        for tier in available_tiers() {
            for &(m, k, n) in &shapes {
                let x: Vec<f32> = (0..m * k).map(|i| val(i, 1)).collect();
                let w1: Vec<f32> = (0..n * k).map(|i| val(i, 2)).collect();
                let w2: Vec<f32> = (0..(n + 5) * k).map(|i| val(i, 3)).collect();
                let b2: Vec<f32> = (0..n + 5).map(|i| val(i, 4)).collect();
                let want1 = reference(&x, m, k, &w1, n, None);
                let want2 = reference(&x, m, k, &w2, n + 5, Some(&b2));
                for threads in [1, 2, 3] {
                    let mut y1 = vec![f32::NAN; m * n];
                    let mut y2 = vec![f32::NAN; m * (n + 5)];
                    run_on(
                        tier,
                        &x,
                        m,
                        k,
                        &mut [
                            Product {
                                w: &w1,
                                n,
                                bias: None,
                                y: &mut y1,
                            },
                            Product {
                                w: &w2,
                                n: n + 5,
                                bias: Some(&b2),
                                y: &mut y2,
                            },
                        ],
                        threads,
                    );
                    for (y, want) in [(&y1, &want1), (&y2, &want2)] {
                        for (idx, (&got, &want)) in y.iter().zip(want.iter()).enumerate() {
                            let tol = 1e-6 * (k as f64).sqrt() * (1.0 + want.abs());
                            assert!(
                                (got as f64 - want).abs() <= tol,
                                "{tier} [{m},{k}] n {n} threads {threads} at {idx}: {got} vs {want}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// `products` on a given tier (the public entry takes Tier::detect()).
    fn run_on(
        tier: Tier,
        x: &[f32],
        m: usize,
        k: usize,
        prods: &mut [Product<'_>],
        threads: usize,
    ) {
        let xt = tier.dispatch(Pack { x, m, k });
        let jobs: Vec<Job> = prods
            .iter_mut()
            .map(|p| Job {
                w: p.w.as_ptr(),
                n: p.n,
                bias: p.bias.map_or(std::ptr::null(), <[f32]>::as_ptr),
                y: p.y.as_mut_ptr(),
            })
            .collect();
        let units: usize = jobs.iter().map(|j| j.n.div_ceil(MR)).sum();
        for t in 0..threads {
            tier.dispatch(Chunk {
                xt: xt.as_slice(),
                m,
                k,
                jobs: &jobs,
                units: units * t / threads..units * (t + 1) / threads,
            });
        }
    }

    #[test]
    fn threads_give_the_same_bits_and_bad_lengths_are_errors() {
        let (m, k, n) = (37, 50, 29);
        let x: Vec<f32> = (0..m * k).map(|i| val(i, 5)).collect();
        let w: Vec<f32> = (0..n * k).map(|i| val(i, 6)).collect();
        let mut one = vec![0.0; m * n];
        let mut two = vec![0.0; m * n];
        products(
            &x,
            m,
            k,
            &mut [Product {
                w: &w,
                n,
                bias: None,
                y: &mut one,
            }],
            1,
        )
        .unwrap();
        products(
            &x,
            m,
            k,
            &mut [Product {
                w: &w,
                n,
                bias: None,
                y: &mut two,
            }],
            2,
        )
        .unwrap();
        assert_eq!(one, two);
        let mut short = vec![0.0; m * n - 1];
        assert!(
            products(
                &x,
                m,
                k,
                &mut [Product {
                    w: &w,
                    n,
                    bias: None,
                    y: &mut short
                }],
                1
            )
            .is_err()
        );
        let mut y = vec![f32::NAN; 6];
        products(
            &[],
            2,
            0,
            &mut [Product {
                w: &[],
                n: 3,
                bias: Some(&[1.0, 2.0, 3.0]),
                y: &mut y,
            }],
            1,
        )
        .unwrap();
        assert_eq!(y, [1.0, 2.0, 3.0, 1.0, 2.0, 3.0]);
    }
}
