//! The fast fp32 path: one tiled online-softmax algorithm (FlashAttention-2 order), its
//! vector operations dispatched at run time (AVX-512, AVX2+FMA, NEON, scalar), threads.
//!
//! - [`tier`]: which instruction sets exist here, `ATTNVIZ_SIMD`, dispatch;
//! - [`exp`]: the vectorised 2^x and its error bound;
//! - [`micro`]: the register-blocked GEMM micro-kernels of a tile;
//! - [`tile`]: the algorithm itself (block state, one tile, both loop orders, observers);
//! - [`transpose`]: a query block's rows turned into the columns the score product reads;
//! - [`gemm`], [`backward`]: FlashAttention-2's backward pass (dQ, dK, dV) and the
//!   general register-blocked product its tiles use;
//! - [`peak`]: this CPU's fp32 FMA peak, measured;
//! - [`pool`]: worker threads; [`team`]: spinning ones for the model's short steps.
//!
//! Threads split the work by (batch, head, query block); every output row is computed by
//! exactly one task, in the same tile order whatever the thread count, so results are
//! bit-identical for 1 or N threads. Memory is O(N d): per-thread scratch of one tile,
//! never a score matrix.

use std::cell::RefCell;

use pulp::{Simd, WithSimd};

use crate::attn::problem::{AttnSpec, ProblemShape};
use crate::attn::range::{self, KvBounds, Magnitudes, PathKind};
use crate::error::{Error, Result};

pub mod backward;
mod backward_tile;
mod buf;
pub mod exp;
pub mod gemm;
pub mod micro;
pub mod peak;
mod pool;
pub(crate) mod team;
pub mod tier;
pub mod tile;
pub(crate) mod transpose;

pub use backward::{
    BWD_BLOCK_K, BWD_BLOCK_Q, BWD_KEY_GROUP, BackwardInputs, FlashGrads, GradObserver, GradView,
    NoGradObserver, attention_backward, attention_backward_observed,
};
pub use buf::{AlignedBuf, keep_freed_memory};
pub use pool::default_threads;
pub(crate) use pool::pool as thread_pool;
pub use tier::{SIMD_ENV, Tier, available_tiers};
pub use tile::{BlockView, NoObserver, ScoresView, TileObserver};

/// Query rows per block (Br). 64 rows are one AVX-512 S^T register block wide (4 vectors
/// of 16 lanes), and Q_i^T at d = 64 is 16 KB, which stays in L1 while the keys stream by.
pub const BLOCK_Q: usize = 64;

/// Keys per block (Bc). The tile's scores, 64 x 128 x 4 B = 32 KB, and V_j at dv = 64
/// (32 KB) stay in L2 next to each other; longer tiles spread the per-tile costs (the max
/// update, the rescale, reloading the output accumulators) over more work.
pub const BLOCK_K: usize = 128;

/// Inputs (q, k and v values) from which their range check runs on the workers too.
const PARALLEL_SCAN: usize = 1 << 22;

/// Options of one kernel call.
#[derive(Debug, Clone, Default)]
pub struct KernelOptions {
    /// Worker threads; all cores if None.
    pub threads: Option<usize>,
    /// SIMD tier; `ATTNVIZ_SIMD` or the best available if None.
    pub tier: Option<Tier>,
    /// Query rows per block; [`BLOCK_Q`] if None.
    pub block_q: Option<usize>,
    /// Keys per block; [`BLOCK_K`] if None.
    pub block_k: Option<usize>,
    /// Bounds on K and V the caller already knows (see [`KvBounds`]): the range check
    /// then reads only Q. None: it scans K and V too.
    pub kv_bounds: Option<KvBounds>,
}

/// The kernel's result: out [B,H,Nq,dv], lse [B,H,Nq] (natural log; -inf for a row
/// whose keys are all masked), and the tier that ran.
#[derive(Debug, Clone)]
pub struct FlashOutput {
    pub out: Vec<f32>,
    pub lse: Vec<f32>,
    pub tier: Tier,
}

/// Loop order of the tiled algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LoopOrder {
    /// FlashAttention-1: key/value blocks outer, query blocks inner.
    Fa1,
    /// FlashAttention-2: query blocks outer, key/value blocks inner.
    #[default]
    Fa2,
}

/// softmax(scale Q K^T + ALiBi + mask) V with the tiled kernel.
///
/// q: [B,H,Nq,d], k: [B,G,Nk,d], v: [B,G,Nk,dv], row-major and contiguous. RoPE, if any,
/// is applied to q and k before the call; ALiBi and masks come from `spec`.
pub fn attention(
    shape: &ProblemShape,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    spec: &AttnSpec,
    opts: &KernelOptions,
) -> Result<FlashOutput> {
    let threads = opts.threads.unwrap_or_else(default_threads);
    if threads == 0 {
        return Err(Error::usage("--threads must be at least 1"));
    }
    check_problem(shape, q, k, v, spec)?;
    let tier = Tier::resolve(opts.tier, "kernel tier")?;
    let (br, bc) = block_sizes(opts)?;
    let s = *shape;
    let (vbuf, ldv) = aligned_v(tier, v, s.dv);
    let vbuf: &[f32] = &vbuf;
    let mut out = vec![0.0f32; s.batch * s.heads * s.n_q * s.dv];
    let mut lse = vec![0.0f32; s.batch * s.heads * s.n_q];

    let job = |bh: usize, qb: usize, o: &mut [f32], l: &mut [f32]| {
        let head = head_view(&s, bh, q, k, vbuf, ldv, spec, br, bc);
        SCRATCH.with_borrow_mut(|(state, scr)| {
            tier.dispatch(BlockJob {
                head: &head,
                qb,
                state,
                scr,
                out: o,
                lse: l,
            })
        });
    };
    let head_out = s.n_q * s.dv;
    if let Some(kv) = &opts.kv_bounds {
        range::check(
            PathKind::Flash,
            &s,
            &Magnitudes::of_q_f32(q, s.d, kv)?,
            spec,
        )?;
    } else if threads == 1 || q.len() + k.len() + v.len() < PARALLEL_SCAN {
        check_range(&s, q, k, v, spec, false)?;
    } else {
        pool::pool(threads)?.install(|| check_range(&s, q, k, v, spec, true))?;
    }
    if threads == 1 {
        for (bh, (oh, lh)) in out
            .chunks_mut(head_out)
            .zip(lse.chunks_mut(s.n_q))
            .enumerate()
        {
            for (qb, (o, l)) in oh.chunks_mut(br * s.dv).zip(lh.chunks_mut(br)).enumerate() {
                job(bh, qb, o, l);
            }
        }
    } else {
        // The (head, query block) tasks on the team, each writing its own rows.
        let mut tasks: Vec<(usize, usize, &mut [f32], &mut [f32])> = Vec::new();
        for (bh, (oh, lh)) in out
            .chunks_mut(head_out)
            .zip(lse.chunks_mut(s.n_q))
            .enumerate()
        {
            for (qb, (o, l)) in oh.chunks_mut(br * s.dv).zip(lh.chunks_mut(br)).enumerate() {
                tasks.push((bh, qb, o, l));
            }
        }
        team::for_each_mut(threads, &mut tasks, &|_, (bh, qb, o, l)| {
            job(*bh, *qb, o, l)
        })?;
    }
    Ok(FlashOutput { out, lse, tier })
}

/// One head (B = H = 1) through the same tiled code as [`attention`], in `order`, with
/// `observer` called after every tile: the instrumented run behind `attnviz trace` and
/// the flash view. Returns out [Nq, dv] and lse [Nq].
#[allow(clippy::too_many_arguments)]
pub fn attention_observed<O: TileObserver>(
    shape: &ProblemShape,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    spec: &AttnSpec,
    tier: Option<Tier>,
    br: usize,
    bc: usize,
    order: LoopOrder,
    observer: &mut O,
) -> Result<(Vec<f32>, Vec<f32>, Tier)> {
    if shape.batch != 1 || shape.heads != 1 {
        return Err(Error::usage(format!(
            "the instrumented run takes one head; got batch {} x {} heads",
            shape.batch, shape.heads
        )));
    }
    check_problem(shape, q, k, v, spec)?;
    check_range(shape, q, k, v, spec, false)?;
    if br == 0 || bc == 0 {
        return Err(Error::usage(format!(
            "block sizes must be at least 1; got Br = {br}, Bc = {bc}"
        )));
    }
    let tier = Tier::resolve(tier, "kernel tier")?;
    let (vbuf, ldv) = aligned_v(tier, v, shape.dv);
    let head = head_view(shape, 0, q, k, &vbuf, ldv, spec, br, bc);
    let mut out = vec![0.0f32; shape.n_q * shape.dv];
    let mut lse = vec![0.0f32; shape.n_q];
    tier.dispatch(ObservedJob {
        head: &head,
        order,
        out: &mut out,
        lse: &mut lse,
        observer,
    });
    Ok((out, lse, tier))
}

fn block_sizes(opts: &KernelOptions) -> Result<(usize, usize)> {
    let br = opts.block_q.unwrap_or(BLOCK_Q);
    let bc = opts.block_k.unwrap_or(BLOCK_K);
    if br == 0 || bc == 0 {
        return Err(Error::usage(format!(
            "block sizes must be at least 1; got {br} query rows x {bc} keys"
        )));
    }
    Ok((br, bc))
}

/// Shapes, mask and slopes of a call ([`check_range`] scans the values).
fn check_problem(s: &ProblemShape, q: &[f32], k: &[f32], v: &[f32], spec: &AttnSpec) -> Result<()> {
    let dims = [s.batch, s.heads, s.kv_heads, s.n_q, s.n_k, s.d, s.dv];
    if dims.contains(&0) || !s.heads.is_multiple_of(s.kv_heads) {
        return Err(Error::usage(format!(
            "bad problem shape {s:?}: every size must be >= 1 and heads a multiple of kv_heads"
        )));
    }
    let want = [
        ("Q", q.len(), s.batch * s.heads * s.n_q * s.d, "[B,H,Nq,d]"),
        (
            "K",
            k.len(),
            s.batch * s.kv_heads * s.n_k * s.d,
            "[B,G,Nk,d]",
        ),
        (
            "V",
            v.len(),
            s.batch * s.kv_heads * s.n_k * s.dv,
            "[B,G,Nk,dv]",
        ),
    ];
    for (name, have, need, layout) in want {
        if have != need {
            return Err(Error::usage(format!(
                "{name} holds {have} values but {layout} of {s:?} needs {need}"
            )));
        }
    }
    let m = &spec.mask;
    if (m.batch(), m.heads(), m.n_q(), m.n_k()) != (s.batch, s.heads, s.n_q, s.n_k) {
        return Err(Error::usage(format!(
            "the mask was resolved for batch {}, {} heads, {} x {} but the problem is batch {}, {} heads, {} x {}",
            m.batch(),
            m.heads(),
            m.n_q(),
            m.n_k(),
            s.batch,
            s.heads,
            s.n_q,
            s.n_k
        )));
    }
    if let Some(slopes) = &spec.alibi
        && slopes.len() != s.heads
    {
        return Err(Error::usage(format!(
            "ALiBi has {} slopes for {} heads",
            slopes.len(),
            s.heads
        )));
    }
    Ok(())
}

/// Every intermediate value must stay finite in f32 (see attn::range): an input that would
/// overflow is refused, naming the limit, rather than giving NaN or zeros. With `parallel`
/// the scan is shared out over the current rayon pool (called inside the kernel's own
/// `install`, so a call wakes its threads once).
fn check_range(
    s: &ProblemShape,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    spec: &AttnSpec,
    parallel: bool,
) -> Result<()> {
    let m = if parallel {
        Magnitudes::of_f32_parallel(q, k, v, s.d, s.dv)?
    } else {
        Magnitudes::of_f32(q, k, v, s.d, s.dv)?
    };
    range::check(PathKind::Flash, s, &m, spec)
}

/// V as the P V micro-kernel reads it: rows aligned to the vector width and a row length
/// that is a whole number of vectors. Used in place when it already is (the usual case
/// for dv = 64 and an aligned allocation), else copied once with zero padding.
fn aligned_v(tier: Tier, v: &[f32], dv: usize) -> (VRows<'_>, usize) {
    let lanes = tier.lanes();
    let ldv = dv.next_multiple_of(lanes);
    if ldv == dv && (v.as_ptr() as usize).is_multiple_of(lanes * 4) {
        return (VRows::Borrowed(v), dv);
    }
    let rows = v.len() / dv;
    let mut buf = AlignedBuf::zeros(rows * ldv);
    for (dst, src) in buf.as_mut_slice().chunks_mut(ldv).zip(v.chunks(dv)) {
        dst[..dv].copy_from_slice(src);
    }
    (VRows::Owned(buf), ldv)
}

/// V in place, or its aligned, padded copy.
enum VRows<'a> {
    Borrowed(&'a [f32]),
    Owned(AlignedBuf),
}

impl std::ops::Deref for VRows<'_> {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        match self {
            VRows::Borrowed(v) => v,
            VRows::Owned(b) => b.as_slice(),
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn head_view<'a>(
    s: &ProblemShape,
    bh: usize,
    q: &'a [f32],
    k: &'a [f32],
    v: &'a [f32],
    ldv: usize,
    spec: &'a AttnSpec,
    br: usize,
    bc: usize,
) -> tile::Head<'a> {
    let (b, h) = (bh / s.heads, bh % s.heads);
    let g = b * s.kv_heads + s.kv_head_for(h);
    let log2e = std::f64::consts::LOG2_E;
    tile::Head {
        b,
        h,
        q: &q[bh * s.n_q * s.d..][..s.n_q * s.d],
        k: &k[g * s.n_k * s.d..][..s.n_k * s.d],
        v: &v[g * s.n_k * ldv..][..s.n_k * ldv],
        ldv,
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

thread_local! {
    /// Each worker's block state and tile scratch, reused across tasks and calls.
    static SCRATCH: RefCell<(tile::BlockState, tile::TileScratch)> = RefCell::default();
}

struct BlockJob<'a, 'h> {
    head: &'a tile::Head<'h>,
    qb: usize,
    state: &'a mut tile::BlockState,
    scr: &'a mut tile::TileScratch,
    out: &'a mut [f32],
    lse: &'a mut [f32],
}

impl WithSimd for BlockJob<'_, '_> {
    type Output = ();
    #[inline(always)]
    fn with_simd<S: Simd>(self, s: S) {
        tile::fa2_block(
            s,
            self.head,
            self.qb,
            self.state,
            self.scr,
            self.out,
            self.lse,
            &mut NoObserver,
        );
    }
}

struct ObservedJob<'a, 'h, O> {
    head: &'a tile::Head<'h>,
    order: LoopOrder,
    out: &'a mut [f32],
    lse: &'a mut [f32],
    observer: &'a mut O,
}

impl<O: TileObserver> WithSimd for ObservedJob<'_, '_, O> {
    type Output = ();
    #[inline(always)]
    fn with_simd<S: Simd>(self, s: S) {
        let mut scr = tile::TileScratch::default();
        match self.order {
            LoopOrder::Fa2 => {
                let mut state = tile::BlockState::default();
                for qb in 0..self.head.q_blocks() {
                    let rows = self.head.q_rows(qb);
                    let dv = self.head.dv;
                    tile::fa2_block(
                        s,
                        self.head,
                        qb,
                        &mut state,
                        &mut scr,
                        &mut self.out[rows.start * dv..rows.end * dv],
                        &mut self.lse[rows],
                        self.observer,
                    );
                }
            }
            LoopOrder::Fa1 => {
                tile::fa1_head(s, self.head, &mut scr, self.out, self.lse, self.observer)
            }
        }
    }
}
