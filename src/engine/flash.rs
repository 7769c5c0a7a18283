//! FlashAttention block by block, recorded: the instrumented run behind `attnviz trace`
//! and the flash view.
//!
//! It is not a model of the algorithm but the kernel's own tiled code
//! ([`crate::kernel::tile`]): the same tile order, the same online-softmax update, the
//! same tile skipping, run with an observer that copies each query block's state after
//! every tile. So what a view animates converges to exactly what the kernel returns.

use std::ops::Range;

use ndarray::ArrayView2;

use crate::engine::problem::{AttnSpec, ProblemShape};
use crate::error::Result;
use crate::kernel::{self, BlockView, ScoresView, Tier, TileObserver};

pub use crate::kernel::LoopOrder;

/// The state of one query block after one tile.
#[derive(Debug, Clone, PartialEq)]
pub struct TileEvent {
    pub q_block: usize,
    pub k_block: usize,
    /// The mask empties this tile, so it was not computed and the state is unchanged.
    pub skipped: bool,
    /// Query rows of the block.
    pub rows: Range<usize>,
    /// Per row: running max of the scaled, biased, masked scores seen so far
    /// (-inf while the row has seen no unmasked key).
    pub m: Vec<f64>,
    /// Per row: running sum of exp(score - m).
    pub l: Vec<f64>,
    /// Per row: the rescale factor exp(m_old - m_new) this tile applied (1 if skipped).
    pub alpha: Vec<f64>,
    /// Per row: the output so far, normalised by l (softmax over the keys seen, times V).
    pub o: Vec<Vec<f64>>,
    /// The tile's scores S = scale Q_i K_j^T + biases, [rows][keys of the tile], -inf
    /// where masked, as the kernel computed them; None for a skipped tile.
    pub s: Option<Vec<Vec<f64>>>,
}

/// Every tile event of one head, and the result.
#[derive(Debug, Clone)]
pub struct FlashTrace {
    pub n_q: usize,
    pub n_k: usize,
    pub d: usize,
    pub dv: usize,
    pub br: usize,
    pub bc: usize,
    pub loop_order: LoopOrder,
    pub scale: f64,
    /// The SIMD tier the run used.
    pub tier: Tier,
    pub events: Vec<TileEvent>,
    /// [n_q][dv]
    pub out: Vec<Vec<f64>>,
    /// Per row; -inf for a row whose keys are all masked.
    pub lse: Vec<f64>,
}

impl FlashTrace {
    /// Query blocks Tr = ceil(n_q / Br).
    pub fn q_blocks(&self) -> usize {
        self.n_q.div_ceil(self.br)
    }

    /// Key blocks Tc = ceil(n_k / Bc).
    pub fn k_blocks(&self) -> usize {
        self.n_k.div_ceil(self.bc)
    }
}

/// Block sizes and loop order of an instrumented run.
#[derive(Debug, Clone, Copy)]
pub struct TraceOptions {
    pub br: usize,
    pub bc: usize,
    pub loop_order: LoopOrder,
    /// SIMD tier; `ATTNVIZ_SIMD` or the best available if None.
    pub tier: Option<Tier>,
}

struct Recorder {
    events: Vec<TileEvent>,
    /// The scores of the tile in progress, until its state arrives.
    scores: Option<Vec<Vec<f64>>>,
}

impl TileObserver for Recorder {
    fn scores(&mut self, _: usize, _: usize, s: ScoresView<'_>) {
        let cols = s.cols();
        self.scores = Some(
            (0..s.rows())
                .map(|r| cols.clone().map(|j| s.s(r, j)).collect())
                .collect(),
        );
    }

    fn tile(&mut self, q_block: usize, k_block: usize, skipped: bool, state: BlockView<'_>) {
        let n = state.rows().len();
        let s = self.scores.take();
        self.events.push(TileEvent {
            q_block,
            k_block,
            skipped,
            rows: state.rows(),
            m: (0..n).map(|r| state.m(r)).collect(),
            l: (0..n).map(|r| state.l(r)).collect(),
            alpha: (0..n).map(|r| state.alpha(r)).collect(),
            o: (0..n).map(|r| state.o(r)).collect(),
            s: if skipped { None } else { s },
        });
    }
}

/// Run one head's attention tile by tile and record every tile.
///
/// q: [n_q, d], k: [n_k, d], v: [n_k, dv]; `spec` resolved for batch 1 and 1 head.
pub fn trace(
    q: ArrayView2<f32>,
    k: ArrayView2<f32>,
    v: ArrayView2<f32>,
    spec: &AttnSpec,
    opts: TraceOptions,
) -> Result<FlashTrace> {
    let (n_q, d) = q.dim();
    let (n_k, dk) = k.dim();
    let (n_v, dv) = v.dim();
    let shape = ProblemShape::from_dims([1, 1, n_q, d], [1, 1, n_k, dk], [1, 1, n_v, dv])?;
    let (q, k, v) = (
        q.as_standard_layout(),
        k.as_standard_layout(),
        v.as_standard_layout(),
    );
    let as_slice = |a: &ndarray::CowArray<'_, f32, ndarray::Ix2>| a.as_slice().map(<[f32]>::to_vec);
    let (Some(q), Some(k), Some(v)) = (as_slice(&q), as_slice(&k), as_slice(&v)) else {
        return Err(crate::Error::Internal(
            "standard layout is not contiguous".into(),
        ));
    };
    let mut rec = Recorder {
        events: Vec::new(),
        scores: None,
    };
    let (out, lse, tier) = kernel::attention_observed(
        &shape,
        &q,
        &k,
        &v,
        spec,
        opts.tier,
        opts.br,
        opts.bc,
        opts.loop_order,
        &mut rec,
    )?;
    Ok(FlashTrace {
        n_q,
        n_k,
        d,
        dv,
        br: opts.br,
        bc: opts.bc,
        loop_order: opts.loop_order,
        scale: spec.scale,
        tier,
        events: rec.events,
        out: out
            .chunks(dv)
            .map(|r| r.iter().map(|&x| x as f64).collect())
            .collect(),
        lse: lse.iter().map(|&x| x as f64).collect(),
    })
}
