//! FlashAttention-2's backward pass: dQ, dK, dV of sum(O * dO) from Q, K, V, the
//! forward's O and log-sum-exp, and dO, tile by tile ([`super::backward_tile`]), with
//! no N x N matrix: memory is O(N d).
//!
//! Loop order and threads. Key blocks are outer: a task owns the dK_j, dV_j
//! accumulators of its key blocks (one Bc x d tile each, in cache for the whole pass
//! over the query blocks) and streams the query blocks by, adding to dQ_i; it takes
//! [`BWD_KEY_GROUP`] key blocks per pass, so each query block is read once for that many
//! tiles (the observed run behind the animation takes one at a time: same sums, same
//! bits). The other
//! order (query blocks outer, as PyTorch's CPU kernel does) keeps dQ_i on chip instead
//! and must read and write two tiles (dK_j and dV_j) per tile instead of one; it also
//! needs per-task dK, dV copies for GQA, since a group's heads share them. (The choice
//! rests on that count of accumulator traffic; the two orders have not been timed
//! against each other.)
//!
//! A task is (batch entry, K/V group, key-block chunk): it loops over the heads of its
//! group, so dK and dV are summed over the group's heads inside one task and no two
//! tasks ever write the same dK, dV row; no atomics. Chunk c takes the key blocks
//! kb = c, c + C, c + 2C, ... (interleaved, so a causal mask's uneven work per key
//! block is shared evenly), and each chunk adds into its own dQ buffer; the C buffers
//! are summed in chunk order at the end. C depends on the shape only (enough tasks for
//! [`MIN_TASKS`] threads), never on the thread count, so results are bit-identical for
//! 1 or N threads.

use pulp::{Simd, WithSimd};
use rayon::prelude::*;

use super::backward_tile::{self, BwdScratch, KvBlock, QBlock, TileGrads};
use super::buf::AlignedBuf;
use super::tier::Tier;
use super::tile::{self, Head, ScoresView};
use super::transpose::transpose_scaled;
use super::{KernelOptions, check_problem, check_range, default_threads, pool};
use crate::engine::mask::TileClass;
use crate::engine::problem::{AttnSpec, ProblemShape};
use crate::error::{Error, Result};

/// Query rows per block of the backward (Br): 64 rows are 4 AVX-512 vectors, and the
/// query block's four packed copies (Q^T, Q, dO^T, dO at d = 64, 16 KB each) stay in L1
/// and L2 while a tile's five products run.
pub const BWD_BLOCK_Q: usize = 64;

/// Keys per block of the backward (Bc): P^T and dS^T (64 x 64 x 4 B = 16 KB each) and
/// the dK_j, dV_j accumulators (16 KB each at d = 64) fit in L2 beside the query block.
pub const BWD_BLOCK_K: usize = 64;

/// Key blocks that a task takes together in one pass over the query blocks: each query
/// block's packed inputs (Q^T, Q, dO^T, dO: 64 KB at d = 64) and its dQ_i are read from
/// L3 once for four tiles instead of once a tile, while the four key blocks' dK_j, dV_j
/// and K_j (144 KB) stay in L2. The dQ, dK and dV sums keep their order (key blocks
/// ascending for dQ_i, query blocks ascending for dK_j, dV_j), so the bits are those of
/// one block at a time. On an AMD EPYC (family 25 model 1, AVX2, 512 KB L2), N = 4096
/// unmasked, medians of 4 and 5 `bench` runs alternating 1 and 4: 1241 -> 1120 ms and
/// 1308 -> 1155 ms on 1 thread, 714 -> 617 and 708 -> 619 ms on 2; a third such run
/// found no difference outside the noise, and 8 was no better than 4.
pub const BWD_KEY_GROUP: usize = 4;

/// The backward splits a (batch, group) into key-block chunks until there are at least
/// this many tasks, so a problem of one head still keeps a few cores busy.
pub const MIN_TASKS: usize = 4;

/// The backward's result: dq [B,H,Nq,d], dk [B,G,Nk,d], dv [B,G,Nk,dv], the row terms
/// D = rowsum(dO * O) [B,H,Nq], and the tier that ran.
#[derive(Debug, Clone)]
pub struct FlashGrads {
    pub dq: Vec<f32>,
    pub dk: Vec<f32>,
    pub dv: Vec<f32>,
    pub d: Vec<f32>,
    pub tier: Tier,
}

/// The forward's results the backward reads, and the gradient of the output.
#[derive(Clone, Copy)]
pub struct BackwardInputs<'a> {
    pub q: &'a [f32],
    pub k: &'a [f32],
    pub v: &'a [f32],
    /// O [B,H,Nq,dv] of the forward.
    pub out: &'a [f32],
    /// Log-sum-exp [B,H,Nq] of the forward (natural log, -inf for a fully masked row).
    pub lse: &'a [f32],
    /// dO [B,H,Nq,dv].
    pub dout: &'a [f32],
}

/// A read-only view of the gradients after one tile, for observers.
pub struct GradView<'a> {
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
    computed: std::ops::Range<usize>,
    ld: usize,
    ldq: usize,
    ldo: usize,
    d: usize,
    dv: usize,
    dq: &'a [f32],
    dk: &'a [f32],
    dvv: &'a [f32],
    pt: &'a [f32],
    dst: &'a [f32],
}

impl GradView<'_> {
    /// Absolute query rows of the block (the rows of dQ this tile updated).
    pub fn rows(&self) -> std::ops::Range<usize> {
        self.rows.clone()
    }

    /// Absolute keys of the block (the rows of dK and dV this tile updated).
    pub fn cols(&self) -> std::ops::Range<usize> {
        self.cols.clone()
    }

    /// dQ row `r` (relative to the block) so far.
    pub fn dq(&self, r: usize) -> Vec<f64> {
        widen(&self.dq[r * self.ldq..][..self.d])
    }

    /// dK row of key `jj` (relative to the key block) so far.
    pub fn dk(&self, jj: usize) -> Vec<f64> {
        widen(&self.dk[jj * self.ldq..][..self.d])
    }

    /// dV row of key `jj` (relative to the key block) so far.
    pub fn dv(&self, jj: usize) -> Vec<f64> {
        widen(&self.dvv[jj * self.ldo..][..self.dv])
    }

    /// P of block row `r` and absolute key `j`, as this tile recomputed it from L.
    pub fn p(&self, r: usize, j: usize) -> f64 {
        if self.computed.contains(&j) {
            self.pt[(j - self.computed.start) * self.ld + r] as f64
        } else {
            0.0
        }
    }

    /// scale * dS = scale * P (dP - D) of block row `r` and absolute key `j`.
    pub fn ds(&self, r: usize, j: usize) -> f64 {
        if self.computed.contains(&j) {
            self.dst[(j - self.computed.start) * self.ld + r] as f64
        } else {
            0.0
        }
    }
}

fn widen(xs: &[f32]) -> Vec<f64> {
    xs.iter().map(|&x| x as f64).collect()
}

/// Called after every tile of the backward. [`NoGradObserver`] compiles to nothing.
pub trait GradObserver {
    /// Whether [`GradObserver::scores`] wants the tile's recomputed scores (the fast
    /// path's observer does not, so it never builds them).
    const WANTS_SCORES: bool = false;

    /// The scores S of tile (q_block, k_block) of query head `h` as the backward
    /// recomputed them, before P = exp(S - L); only called when `WANTS_SCORES`.
    fn scores(&mut self, _h: usize, _q_block: usize, _k_block: usize, _s: ScoresView<'_>) {}

    /// After tile (q_block, k_block) of query head `h`: what it updated, or that the
    /// tile was skipped (then `view` shows the unchanged state).
    fn tile(&mut self, h: usize, q_block: usize, k_block: usize, skipped: bool, view: GradView<'_>);
}

/// The observer of the fast path: records nothing.
pub struct NoGradObserver;

impl GradObserver for NoGradObserver {
    #[inline(always)]
    fn tile(&mut self, _: usize, _: usize, _: usize, _: bool, _: GradView<'_>) {}
}

/// dQ, dK, dV of sum(O * dO) with the tiled kernel. q, k, v as for
/// [`super::attention`] (RoPE, if any, already applied: the gradients are with respect
/// to the rotated q and k); `inp.out` and `inp.lse` from the forward.
pub fn attention_backward(
    shape: &ProblemShape,
    inp: &BackwardInputs<'_>,
    spec: &AttnSpec,
    opts: &KernelOptions,
) -> Result<FlashGrads> {
    backward_grouped(shape, inp, spec, opts, BWD_KEY_GROUP)
}

/// [`attention_backward`] taking `kb_group` key blocks per pass over the query blocks.
fn backward_grouped(
    shape: &ProblemShape,
    inp: &BackwardInputs<'_>,
    spec: &AttnSpec,
    opts: &KernelOptions,
    kb_group: usize,
) -> Result<FlashGrads> {
    let threads = opts.threads.unwrap_or_else(default_threads);
    if threads == 0 {
        return Err(Error::usage("--threads must be at least 1"));
    }
    check_problem(shape, inp.q, inp.k, inp.v, spec)?;
    check_forward(shape, inp)?;
    let tier = Tier::resolve(opts.tier, "kernel tier")?;
    let br = opts.block_q.unwrap_or(BWD_BLOCK_Q);
    let bc = opts.block_k.unwrap_or(BWD_BLOCK_K);
    if br == 0 || bc == 0 {
        return Err(Error::usage(format!(
            "block sizes must be at least 1; got {br} query rows x {bc} keys"
        )));
    }
    let s = *shape;
    let geo = Geometry::new(tier, &s, spec, br, bc);
    let groups = s.batch * s.kv_heads;
    let chunks = MIN_TASKS.div_ceil(groups).clamp(1, geo.k_blocks);
    let heads: Vec<Head<'_>> = (0..s.batch * s.heads)
        .map(|bh| head_of(&s, bh, inp, spec, geo.br, geo.bc))
        .collect();
    // Packing runs under the tier's instruction set (its transposes and the D sums are
    // plain loops that the compiler vectorises only there).
    let pack = |bh: usize| {
        tier.dispatch(PackJob {
            geo: &geo,
            head: &heads[bh],
            inp,
            bh,
        })
    };
    let task = |packs: &[HeadPack], t: usize| {
        tier.dispatch(TaskJob {
            geo: &geo,
            heads: &heads,
            packs,
            bg: t / chunks,
            chunk: t % chunks,
            chunks,
            kb_group,
            observer: &mut NoGradObserver,
        })
    };
    let mut grads = Grads::zeros(&s);
    if threads == 1 {
        check_range(&s, inp.q, inp.k, inp.v, spec, false)?;
        let packs: Vec<HeadPack> = (0..heads.len()).map(pack).collect();
        let outs: Vec<TaskOut> = (0..groups * chunks).map(|t| task(&packs, t)).collect();
        let asm = Assembly::new(&geo, &s, &packs, &outs, chunks);
        grads.per_head().for_each(|(bh, h)| asm.head(bh, h));
        grads.per_group().for_each(|(bg, g)| asm.group(bg, g));
    } else {
        pool::pool(threads)?.install(|| -> Result<()> {
            check_range(&s, inp.q, inp.k, inp.v, spec, true)?;
            let packs: Vec<HeadPack> = (0..heads.len()).into_par_iter().map(pack).collect();
            let outs: Vec<TaskOut> = (0..groups * chunks)
                .into_par_iter()
                .map(|t| task(&packs, t))
                .collect();
            // The gradients are gathered from the tasks' buffers in parallel too: a serial
            // copy was a tenth of a 2-thread call at N = 1024.
            let asm = Assembly::new(&geo, &s, &packs, &outs, chunks);
            grads.per_head_par().for_each(|(bh, h)| asm.head(bh, h));
            grads.per_group_par().for_each(|(bg, g)| asm.group(bg, g));
            Ok(())
        })?;
    }
    Ok(grads.finish(tier))
}

/// The dispatch of [`HeadPack::new`].
struct PackJob<'a, 'h> {
    geo: &'a Geometry,
    head: &'a Head<'h>,
    inp: &'a BackwardInputs<'h>,
    bh: usize,
}

impl WithSimd for PackJob<'_, '_> {
    type Output = HeadPack;
    #[inline(always)]
    fn with_simd<S: Simd>(self, _: S) -> HeadPack {
        HeadPack::new::<S>(self.geo, self.head, self.inp, self.bh)
    }
}

/// One head (B = H = 1) through the same tiled backward as [`attention_backward`], in
/// one task (key blocks outer, query blocks inner), with `observer` called after every
/// tile: the instrumented run behind `attnviz trace --backward`.
#[allow(clippy::too_many_arguments)]
pub fn attention_backward_observed<O: GradObserver>(
    shape: &ProblemShape,
    inp: &BackwardInputs<'_>,
    spec: &AttnSpec,
    tier: Option<Tier>,
    br: usize,
    bc: usize,
    observer: &mut O,
) -> Result<FlashGrads> {
    if shape.batch != 1 || shape.heads != 1 {
        return Err(Error::usage(format!(
            "the instrumented backward takes one head; got batch {} x {} heads",
            shape.batch, shape.heads
        )));
    }
    check_problem(shape, inp.q, inp.k, inp.v, spec)?;
    check_range(shape, inp.q, inp.k, inp.v, spec, false)?;
    check_forward(shape, inp)?;
    if br == 0 || bc == 0 {
        return Err(Error::usage(format!(
            "block sizes must be at least 1; got Br = {br}, Bc = {bc}"
        )));
    }
    let tier = Tier::resolve(tier, "kernel tier")?;
    let geo = Geometry::new(tier, shape, spec, br, bc);
    let heads = vec![head_of(shape, 0, inp, spec, geo.br, geo.bc)];
    let packs = vec![tier.dispatch(PackJob {
        geo: &geo,
        head: &heads[0],
        inp,
        bh: 0,
    })];
    let out = tier.dispatch(TaskJob {
        geo: &geo,
        heads: &heads,
        packs: &packs,
        bg: 0,
        chunk: 0,
        chunks: 1,
        kb_group: 1,
        observer,
    });
    let outs = [out];
    let asm = Assembly::new(&geo, shape, &packs, &outs, 1);
    let mut grads = Grads::zeros(shape);
    grads.per_head().for_each(|(bh, h)| asm.head(bh, h));
    grads.per_group().for_each(|(bg, g)| asm.group(bg, g));
    Ok(grads.finish(tier))
}

fn check_forward(s: &ProblemShape, inp: &BackwardInputs<'_>) -> Result<()> {
    let rows = s.batch * s.heads * s.n_q;
    let want = [
        ("O", inp.out.len(), rows * s.dv, "[B,H,Nq,dv]"),
        ("lse", inp.lse.len(), rows, "[B,H,Nq]"),
        ("dO", inp.dout.len(), rows * s.dv, "[B,H,Nq,dv]"),
    ];
    for (name, have, need, layout) in want {
        if have != need {
            return Err(Error::usage(format!(
                "{name} holds {have} values but {layout} of {s:?} needs {need}"
            )));
        }
    }
    if let Some(i) = inp
        .lse
        .iter()
        .position(|x| x.is_nan() || *x == f32::INFINITY)
    {
        return Err(Error::usage(format!(
            "lse[{i}] is {}; a log-sum-exp is finite or -inf (a fully masked row)",
            inp.lse[i]
        )));
    }
    Ok(())
}

fn head_of<'a>(
    s: &ProblemShape,
    bh: usize,
    inp: &BackwardInputs<'a>,
    spec: &'a AttnSpec,
    br: usize,
    bc: usize,
) -> Head<'a> {
    let (b, h) = (bh / s.heads, bh % s.heads);
    let g = b * s.kv_heads + s.kv_head_for(h);
    let log2e = std::f64::consts::LOG2_E;
    Head {
        b,
        h,
        q: &inp.q[bh * s.n_q * s.d..][..s.n_q * s.d],
        k: &inp.k[g * s.n_k * s.d..][..s.n_k * s.d],
        v: &inp.v[g * s.n_k * s.dv..][..s.n_k * s.dv],
        ldv: s.dv,
        n_q: s.n_q,
        n_k: s.n_k,
        d: s.d,
        dv: s.dv,
        scale2: (spec.scale * log2e) as f32,
        alibi2: spec.alibi.as_ref().map(|sl| (sl[h] * log2e) as f32),
        mask: &spec.mask,
        br,
        bc,
    }
}

/// Padded sizes shared by every buffer of one call.
struct Geometry {
    /// The score scale (natural units), by which dS is multiplied.
    scale: f32,
    br: usize,
    bc: usize,
    /// Padded rows of a query block (whole vectors).
    ld: usize,
    /// d and dv padded to whole vectors.
    ldq: usize,
    ldo: usize,
    q_blocks: usize,
    k_blocks: usize,
    heads_per_group: usize,
    heads: usize,
    kv_heads: usize,
}

impl Geometry {
    fn new(tier: Tier, s: &ProblemShape, spec: &AttnSpec, br: usize, bc: usize) -> Self {
        let lanes = tier.lanes();
        let br = br.min(s.n_q);
        let bc = bc.min(s.n_k);
        Geometry {
            scale: spec.scale as f32,
            br,
            bc,
            ld: br.next_multiple_of(lanes),
            ldq: s.d.next_multiple_of(lanes),
            ldo: s.dv.next_multiple_of(lanes),
            q_blocks: s.n_q.div_ceil(br),
            k_blocks: s.n_k.div_ceil(bc),
            heads_per_group: s.heads / s.kv_heads,
            heads: s.heads,
            kv_heads: s.kv_heads,
        }
    }
}

/// Every query block of one (batch, head), packed as the tiles read it.
struct HeadPack {
    qt: AlignedBuf,
    qr: AlignedBuf,
    dot: AlignedBuf,
    dor: AlignedBuf,
    l2: AlignedBuf,
    dd: AlignedBuf,
    qpos: AlignedBuf,
    banded: bool,
    band_lo: AlignedBuf,
    band_hi: AlignedBuf,
    band_union: Vec<std::ops::Range<usize>>,
}

impl HeadPack {
    #[inline(always)]
    fn new<S: Simd>(geo: &Geometry, head: &Head<'_>, inp: &BackwardInputs<'_>, bh: usize) -> Self {
        let (ld, ldq, ldo, nb) = (geo.ld, geo.ldq, geo.ldo, geo.q_blocks);
        let (d, dv, n_q) = (head.d, head.dv, head.n_q);
        let out = &inp.out[bh * n_q * dv..][..n_q * dv];
        let dout = &inp.dout[bh * n_q * dv..][..n_q * dv];
        let lse = &inp.lse[bh * n_q..][..n_q];
        let mut p = HeadPack {
            qt: AlignedBuf::zeros(nb * d * ld),
            qr: AlignedBuf::zeros(nb * ld * ldq),
            dot: AlignedBuf::zeros(nb * dv * ld),
            dor: AlignedBuf::zeros(nb * ld * ldo),
            l2: AlignedBuf::zeros(nb * ld),
            dd: AlignedBuf::zeros(nb * ld),
            qpos: AlignedBuf::zeros(nb * ld),
            banded: head.mask.band(head.b, 0).is_some(),
            band_lo: AlignedBuf::new(),
            band_hi: AlignedBuf::new(),
            band_union: Vec::new(),
        };
        p.l2.as_mut_slice().fill(f32::INFINITY);
        if p.banded {
            p.band_lo = AlignedBuf::zeros(nb * ld);
            p.band_hi = AlignedBuf::zeros(nb * ld);
            // Padding rows see everything (their P is 0 through L2 = +inf anyway).
            p.band_hi.as_mut_slice().fill(f32::INFINITY);
        }
        let offset = head.n_k as f32 - n_q as f32;
        let log2e = std::f64::consts::LOG2_E;
        for qb in 0..nb {
            let rows = head.q_rows(qb);
            let qt = &mut p.qt.as_mut_slice()[qb * d * ld..][..d * ld];
            let qr = &mut p.qr.as_mut_slice()[qb * ld * ldq..][..ld * ldq];
            let dot = &mut p.dot.as_mut_slice()[qb * dv * ld..][..dv * ld];
            let dor = &mut p.dor.as_mut_slice()[qb * ld * ldo..][..ld * ldo];
            let l2 = &mut p.l2.as_mut_slice()[qb * ld..][..ld];
            let dd = &mut p.dd.as_mut_slice()[qb * ld..][..ld];
            let qpos = &mut p.qpos.as_mut_slice()[qb * ld..][..ld];
            for (r, qp) in qpos.iter_mut().enumerate() {
                *qp = (rows.start + r) as f32 + offset;
            }
            let (q_rows, do_rows) = (
                &head.q[rows.start * d..rows.end * d],
                &dout[rows.start * dv..rows.end * dv],
            );
            transpose_scaled::<S>(q_rows, rows.len(), d, head.scale2, qt, ld);
            transpose_scaled::<S>(do_rows, rows.len(), dv, 1.0, dot, ld);
            for (r, i) in rows.clone().enumerate() {
                let qrow = &head.q[i * d..][..d];
                qr[r * ldq..][..d].copy_from_slice(qrow);
                let grow = &dout[i * dv..][..dv];
                dor[r * ldo..][..dv].copy_from_slice(grow);
                let orow = &out[i * dv..][..dv];
                dd[r] = grow
                    .iter()
                    .zip(orow)
                    .map(|(&g, &o)| g as f64 * o as f64)
                    .sum::<f64>() as f32;
                // A fully masked row (lse = -inf) gets L2 = +inf: its P is exactly 0. The
                // tile's biases are shifted by the row's largest file-mask bias (see
                // tile::apply_biases), and the forward added that shift to lse: take it out.
                if lse[i] != f32::NEG_INFINITY {
                    let shift = head.mask.row_shift(head.b, head.h, i);
                    l2[r] = ((lse[i] as f64 - shift) * log2e) as f32;
                }
            }
            // The union of the bands; empty if every row is fully masked (or no band).
            let union = if p.banded {
                let lo = &mut p.band_lo.as_mut_slice()[qb * ld..][..ld];
                let hi = &mut p.band_hi.as_mut_slice()[qb * ld..][..ld];
                tile::fill_bands(head, rows.clone(), lo, hi)
            } else {
                0..0
            };
            p.band_union.push(union);
        }
        p
    }

    fn block(&self, geo: &Geometry, head: &Head<'_>, qb: usize) -> QBlock<'_> {
        let (ld, ldq, ldo) = (geo.ld, geo.ldq, geo.ldo);
        let (d, dv) = (head.d, head.dv);
        QBlock {
            rows: head.q_rows(qb),
            ld,
            qt: &self.qt.as_slice()[qb * d * ld..][..d * ld],
            qr: &self.qr.as_slice()[qb * ld * ldq..][..ld * ldq],
            dot: &self.dot.as_slice()[qb * dv * ld..][..dv * ld],
            dor: &self.dor.as_slice()[qb * ld * ldo..][..ld * ldo],
            l2: &self.l2.as_slice()[qb * ld..][..ld],
            dd: &self.dd.as_slice()[qb * ld..][..ld],
            qpos: &self.qpos.as_slice()[qb * ld..][..ld],
            band: self.banded.then(|| {
                (
                    &self.band_lo.as_slice()[qb * ld..][..ld],
                    &self.band_hi.as_slice()[qb * ld..][..ld],
                )
            }),
            band_union: self.band_union[qb].clone(),
        }
    }
}

/// What one task computed: dQ of its group's heads (its own copy, [hpg][q_blocks][ld]
/// [ldq]) and dK, dV of its key blocks ([its blocks][bc][ldq | ldo]).
struct TaskOut {
    dq: AlignedBuf,
    dk: AlignedBuf,
    dv: AlignedBuf,
}

struct TaskJob<'a, 'h, O> {
    geo: &'a Geometry,
    heads: &'a [Head<'h>],
    packs: &'a [HeadPack],
    /// batch * kv_heads + group.
    bg: usize,
    chunk: usize,
    chunks: usize,
    /// Key blocks a pass over the query blocks takes together ([`BWD_KEY_GROUP`] on the
    /// fast path, 1 on the observed one).
    kb_group: usize,
    observer: &'a mut O,
}

impl<O: GradObserver> WithSimd for TaskJob<'_, '_, O> {
    type Output = TaskOut;
    #[inline(always)]
    fn with_simd<S: Simd>(self, s: S) -> TaskOut {
        let geo = self.geo;
        let packs = self.packs;
        let (ld, ldq, ldo, bc, hpg) = (geo.ld, geo.ldq, geo.ldo, geo.bc, geo.heads_per_group);
        let (b, g) = (self.bg / geo.kv_heads, self.bg % geo.kv_heads);
        let my_blocks: Vec<usize> = (self.chunk..geo.k_blocks).step_by(self.chunks).collect();
        let dq_head = geo.q_blocks * ld * ldq;
        let mut out = TaskOut {
            dq: AlignedBuf::zeros(hpg * dq_head),
            dk: AlignedBuf::zeros(my_blocks.len() * bc * ldq),
            dv: AlignedBuf::zeros(my_blocks.len() * bc * ldo),
        };
        let mut scr = BwdScratch::default();
        let group = self.kb_group.max(1);
        let mut kpad = AlignedBuf::zeros(group * bc * ldq);
        let first = &self.heads[b * geo.heads + g * hpg];
        let (d, scale) = (first.d, geo.scale);
        for (gi, kbs) in my_blocks.chunks(group).enumerate() {
            let slot0 = gi * group;
            {
                let kp = kpad.as_mut_slice();
                for (i, &kb) in kbs.iter().enumerate() {
                    for (jj, j) in first.k_cols(kb).enumerate() {
                        kp[(i * bc + jj) * ldq..][..d].copy_from_slice(&first.k[j * d..][..d]);
                    }
                }
            }
            for hh in 0..hpg {
                let bh = b * geo.heads + g * hpg + hh;
                let head = &self.heads[bh];
                let pack = &packs[bh];
                for qb in 0..geo.q_blocks {
                    let qblk = pack.block(geo, head, qb);
                    let dq = &mut out.dq.as_mut_slice()[hh * dq_head + qb * ld * ldq..][..ld * ldq];
                    for (i, &kb) in kbs.iter().enumerate() {
                        let slot = slot0 + i;
                        let cols = first.k_cols(kb);
                        let dk = &mut out.dk.as_mut_slice()[slot * bc * ldq..][..bc * ldq];
                        let dv = &mut out.dv.as_mut_slice()[slot * bc * ldo..][..bc * ldo];
                        let kv = KvBlock {
                            cols: cols.clone(),
                            kpad: &kpad.as_slice()[i * bc * ldq..][..bc * ldq],
                            ldq,
                            ldo,
                        };
                        let class = head.class(qb, kb);
                        let skipped = class == TileClass::Empty;
                        if !skipped {
                            let observer = &mut *self.observer;
                            let on_scores = |st: &[f32], computed: std::ops::Range<usize>| {
                                if O::WANTS_SCORES {
                                    let shift: Vec<f64> = qblk
                                        .rows
                                        .clone()
                                        .map(|i| head.mask.row_shift(head.b, head.h, i))
                                        .collect();
                                    observer.scores(
                                        head.h,
                                        qb,
                                        kb,
                                        ScoresView::new(
                                            qblk.rows.len(),
                                            cols.clone(),
                                            computed,
                                            st,
                                            ld,
                                            &shift,
                                        ),
                                    );
                                }
                            };
                            backward_tile::backward_tile(
                                s,
                                head,
                                &qblk,
                                &kv,
                                class,
                                scale,
                                &mut scr,
                                TileGrads {
                                    dq: &mut *dq,
                                    dk: &mut *dk,
                                    dv: &mut *dv,
                                },
                                on_scores,
                            );
                        } else {
                            scr.computed = 0..0;
                        }
                        self.observer.tile(
                            head.h,
                            qb,
                            kb,
                            skipped,
                            GradView {
                                rows: qblk.rows.clone(),
                                cols: cols.clone(),
                                computed: scr.computed.clone(),
                                ld,
                                ldq,
                                ldo,
                                d,
                                dv: head.dv,
                                dq: &*dq,
                                dk,
                                dvv: dv,
                                pt: scr.pt.as_slice(),
                                dst: scr.dst.as_slice(),
                            },
                        );
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
#[path = "backward_tests.rs"]
mod tests;

/// The call's gradients, written head by head (dQ, D) and K/V group by group (dK, dV).
struct Grads {
    dq: Vec<f32>,
    dk: Vec<f32>,
    dv: Vec<f32>,
    dd: Vec<f32>,
    /// Elements of one head's dQ and D, and of one group's dK and dV.
    q_len: usize,
    n_q: usize,
    k_len: usize,
    v_len: usize,
}

/// One head's dQ rows and D values.
type HeadGrads<'a> = (&'a mut [f32], &'a mut [f32]);
/// One group's dK and dV rows.
type GroupGrads<'a> = (&'a mut [f32], &'a mut [f32]);

impl Grads {
    fn zeros(s: &ProblemShape) -> Self {
        Grads {
            dq: vec![0.0; s.batch * s.heads * s.n_q * s.d],
            dk: vec![0.0; s.batch * s.kv_heads * s.n_k * s.d],
            dv: vec![0.0; s.batch * s.kv_heads * s.n_k * s.dv],
            dd: vec![0.0; s.batch * s.heads * s.n_q],
            q_len: s.n_q * s.d,
            n_q: s.n_q,
            k_len: s.n_k * s.d,
            v_len: s.n_k * s.dv,
        }
    }

    fn per_head(&mut self) -> impl Iterator<Item = (usize, HeadGrads<'_>)> {
        self.dq
            .chunks_mut(self.q_len)
            .zip(self.dd.chunks_mut(self.n_q))
            .enumerate()
    }

    fn per_group(&mut self) -> impl Iterator<Item = (usize, GroupGrads<'_>)> {
        self.dk
            .chunks_mut(self.k_len)
            .zip(self.dv.chunks_mut(self.v_len))
            .enumerate()
    }

    fn per_head_par(&mut self) -> impl ParallelIterator<Item = (usize, HeadGrads<'_>)> {
        self.dq
            .par_chunks_mut(self.q_len)
            .zip(self.dd.par_chunks_mut(self.n_q))
            .enumerate()
    }

    fn per_group_par(&mut self) -> impl ParallelIterator<Item = (usize, GroupGrads<'_>)> {
        self.dk
            .par_chunks_mut(self.k_len)
            .zip(self.dv.par_chunks_mut(self.v_len))
            .enumerate()
    }

    fn finish(self, tier: Tier) -> FlashGrads {
        FlashGrads {
            dq: self.dq,
            dk: self.dk,
            dv: self.dv,
            d: self.dd,
            tier,
        }
    }
}

/// Gathers the gradients from the tasks' padded buffers: dQ summed over a group's
/// key-block chunks in chunk order (the same order whatever the thread count), dK and dV
/// copied from the task that owns each key block.
struct Assembly<'a> {
    geo: &'a Geometry,
    s: &'a ProblemShape,
    packs: &'a [HeadPack],
    outs: &'a [TaskOut],
    chunks: usize,
}

impl<'a> Assembly<'a> {
    fn new(
        geo: &'a Geometry,
        s: &'a ProblemShape,
        packs: &'a [HeadPack],
        outs: &'a [TaskOut],
        chunks: usize,
    ) -> Self {
        Assembly {
            geo,
            s,
            packs,
            outs,
            chunks,
        }
    }

    /// dQ and D of head `bh` (batch * heads + head).
    fn head(&self, bh: usize, (dst, dd): HeadGrads<'_>) {
        let (geo, s) = (self.geo, self.s);
        let (ld, ldq, d) = (geo.ld, geo.ldq, s.d);
        let (b, h) = (bh / geo.heads, bh % geo.heads);
        let (g, hh) = (h / geo.heads_per_group, h % geo.heads_per_group);
        let bg = b * geo.kv_heads + g;
        let dq_head = geo.q_blocks * ld * ldq;
        for c in 0..self.chunks {
            let src = &self.outs[bg * self.chunks + c].dq.as_slice()[hh * dq_head..][..dq_head];
            for (i, out) in dst.chunks_mut(d).enumerate() {
                let (qb, r) = (i / geo.br, i % geo.br);
                let row = &src[(qb * ld + r) * ldq..][..d];
                if c == 0 {
                    out.copy_from_slice(row);
                } else {
                    for (y, &x) in out.iter_mut().zip(row) {
                        *y += x;
                    }
                }
            }
        }
        let pack = &self.packs[bh];
        for (i, x) in dd.iter_mut().enumerate() {
            let (qb, r) = (i / geo.br, i % geo.br);
            *x = pack.dd.as_slice()[qb * ld + r];
        }
    }

    /// dK and dV of K/V group `bg` (batch * kv_heads + group).
    fn group(&self, bg: usize, (dk, dv): GroupGrads<'_>) {
        let (geo, s) = (self.geo, self.s);
        let (ldq, ldo, bc, d, dvw) = (geo.ldq, geo.ldo, geo.bc, s.d, s.dv);
        for c in 0..self.chunks {
            let o = &self.outs[bg * self.chunks + c];
            for (slot, kb) in (c..geo.k_blocks).step_by(self.chunks).enumerate() {
                let keys = kb * bc..((kb + 1) * bc).min(s.n_k);
                for (jj, j) in keys.enumerate() {
                    dk[j * d..][..d]
                        .copy_from_slice(&o.dk.as_slice()[(slot * bc + jj) * ldq..][..d]);
                    dv[j * dvw..][..dvw]
                        .copy_from_slice(&o.dv.as_slice()[(slot * bc + jj) * ldo..][..dvw]);
                }
            }
        }
    }
}
