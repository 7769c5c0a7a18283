//! FlashAttention's backward pass tile by tile, recorded: the instrumented run behind
//! `attnviz trace --backward`. As [`super::flash`] does for the forward, it runs the
//! kernel's own tiled backward ([`crate::kernel::attention_backward_observed`]) with
//! an observer, so what it records converges to exactly what the kernel returns.

use std::ops::Range;

use ndarray::{Array2, ArrayView2};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::engine::problem::{AttnSpec, ProblemShape};
use crate::error::{Error, Result};
use crate::kernel::{
    self, BackwardInputs, GradObserver, GradView, KernelOptions, ScoresView, Tier,
};

/// One tile of the backward: which rows of dQ and which keys (rows of dK, dV) it
/// updated, their values after it, and the P and dS it recomputed.
#[derive(Debug, Clone, PartialEq)]
pub struct BackwardEvent {
    pub q_block: usize,
    pub k_block: usize,
    /// The mask empties this tile: nothing was computed or updated.
    pub skipped: bool,
    /// Query rows of the tile (the rows of dQ it updated).
    pub rows: Range<usize>,
    /// Keys of the tile (the rows of dK and dV it updated).
    pub cols: Range<usize>,
    /// dQ of `rows` after the tile, [rows][d] (partial sums over the key blocks so far).
    pub dq: Vec<Vec<f64>>,
    /// dK of `cols` after the tile, [cols][d].
    pub dk: Vec<Vec<f64>>,
    /// dV of `cols` after the tile, [cols][dv].
    pub dv: Vec<Vec<f64>>,
    /// S = scale Q_i K_j^T + biases as the backward recomputed it, [rows][cols], -inf
    /// where masked; None for a skipped tile.
    pub s: Option<Vec<Vec<f64>>>,
    /// P = exp(S - L), recomputed, [rows][cols]; None for a skipped tile.
    pub p: Option<Vec<Vec<f64>>>,
    /// scale * dS = scale * P (dP - D), [rows][cols]; None for a skipped tile.
    pub ds: Option<Vec<Vec<f64>>>,
}

/// Every tile of one head's backward, in the kernel's order (key blocks outer), and
/// the results.
#[derive(Debug, Clone)]
pub struct BackwardTrace {
    pub n_q: usize,
    pub n_k: usize,
    pub d: usize,
    /// V's head dimension.
    pub d_v: usize,
    pub br: usize,
    pub bc: usize,
    pub scale: f64,
    pub tier: Tier,
    pub events: Vec<BackwardEvent>,
    /// [n_q][d], [n_k][d], [n_k][dv].
    pub dq: Vec<Vec<f64>>,
    pub dk: Vec<Vec<f64>>,
    pub dv: Vec<Vec<f64>>,
    /// D = rowsum(dO * O) per query row.
    pub d_rows: Vec<f64>,
    /// The forward's output and log-sum-exp the backward read (-inf: no visible key).
    pub out: Vec<Vec<f64>>,
    pub lse: Vec<f64>,
}

struct Recorder {
    events: Vec<BackwardEvent>,
    /// The scores of the tile in progress, until its gradients arrive.
    scores: Option<Vec<Vec<f64>>>,
}

impl GradObserver for Recorder {
    const WANTS_SCORES: bool = true;

    fn scores(&mut self, _h: usize, _q_block: usize, _k_block: usize, s: ScoresView<'_>) {
        let cols = s.cols();
        self.scores = Some(
            (0..s.rows())
                .map(|r| cols.clone().map(|j| s.s(r, j)).collect())
                .collect(),
        );
    }

    fn tile(&mut self, _h: usize, q_block: usize, k_block: usize, skipped: bool, v: GradView<'_>) {
        let (rows, cols) = (v.rows(), v.cols());
        let grid = |f: &dyn Fn(usize, usize) -> f64| -> Vec<Vec<f64>> {
            (0..rows.len())
                .map(|r| cols.clone().map(|j| f(r, j)).collect())
                .collect()
        };
        // A band mask can trim a tile to no keys at all: then it saw no score, all -inf.
        let s = self.scores.take();
        let s = (!skipped).then(|| s.unwrap_or_else(|| grid(&|_, _| f64::NEG_INFINITY)));
        self.events.push(BackwardEvent {
            q_block,
            k_block,
            skipped,
            rows: rows.clone(),
            cols: cols.clone(),
            dq: (0..rows.len()).map(|r| v.dq(r)).collect(),
            dk: (0..cols.len()).map(|jj| v.dk(jj)).collect(),
            dv: (0..cols.len()).map(|jj| v.dv(jj)).collect(),
            s,
            p: (!skipped).then(|| grid(&|r, j| v.p(r, j))),
            ds: (!skipped).then(|| grid(&|r, j| v.ds(r, j))),
        });
    }
}

/// The upstream gradient dO [n_q, dv] a backward trace uses when none is given: uniform
/// in [-1, 1) from `seed` (the same for `attnviz trace --backward` and the flash view).
pub fn seeded_grad_out(n_q: usize, dv: usize, seed: u64) -> Array2<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xD0);
    Array2::from_shape_fn((n_q, dv), |_| rng.random_range(-1.0f32..1.0))
}

/// Run one head's forward, then its backward tile by tile, recording every tile.
///
/// q: [n_q, d], k: [n_k, d], v: [n_k, dv], dout: [n_q, dv]; `spec` for batch 1, 1 head.
#[allow(clippy::too_many_arguments)]
pub fn trace_backward(
    q: ArrayView2<f32>,
    k: ArrayView2<f32>,
    v: ArrayView2<f32>,
    dout: ArrayView2<f32>,
    spec: &AttnSpec,
    br: usize,
    bc: usize,
    tier: Option<Tier>,
) -> Result<BackwardTrace> {
    let (n_q, d) = q.dim();
    let (n_k, dk) = k.dim();
    let (n_v, dv) = v.dim();
    let shape = ProblemShape::from_dims([1, 1, n_q, d], [1, 1, n_k, dk], [1, 1, n_v, dv])?;
    if dout.dim() != (n_q, dv) {
        return Err(Error::usage(format!(
            "dO has shape {:?} but the output O is [{n_q}, {dv}]; dO must be shaped like O",
            dout.dim()
        )));
    }
    let flat = |a: ArrayView2<f32>| a.iter().copied().collect::<Vec<f32>>();
    let (q, k, v, g) = (flat(q), flat(k), flat(v), flat(dout));
    let tier = Tier::resolve(tier, "kernel tier")?;
    let opts = KernelOptions {
        threads: Some(1),
        tier: Some(tier),
        ..Default::default()
    };
    let fwd = kernel::attention(&shape, &q, &k, &v, spec, &opts)?;
    let inp = BackwardInputs {
        q: &q,
        k: &k,
        v: &v,
        out: &fwd.out,
        lse: &fwd.lse,
        dout: &g,
    };
    let mut rec = Recorder {
        events: Vec::new(),
        scores: None,
    };
    let grads =
        kernel::attention_backward_observed(&shape, &inp, spec, Some(tier), br, bc, &mut rec)?;
    let rows = |x: &[f32], w: usize| -> Vec<Vec<f64>> {
        x.chunks(w)
            .map(|r| r.iter().map(|&y| y as f64).collect())
            .collect()
    };
    Ok(BackwardTrace {
        n_q,
        n_k,
        d,
        d_v: dv,
        br,
        bc,
        scale: spec.scale,
        tier,
        events: rec.events,
        dq: rows(&grads.dq, d),
        dk: rows(&grads.dk, d),
        dv: rows(&grads.dv, dv),
        d_rows: grads.d.iter().map(|&x| x as f64).collect(),
        out: rows(&fwd.out, dv),
        lse: fwd.lse.iter().map(|&x| x as f64).collect(),
    })
}
