//! What the flash view's backward mode shows, derived through the engine: the kernel's
//! own tiled backward run with an observer ([`flash_backward::trace_backward`]) on the
//! head the forward shows, with a seeded upstream gradient dO, its HBM traffic tile by
//! tile ([`memory_backward::backward_traffic`]) and the f64 reference gradients
//! ([`reference_backward`]) it is measured against. Nothing here computes attention.

use ndarray::{Array2, ArrayView2, Ix4};

use crate::engine::flash_backward::{self, BackwardEvent, BackwardTrace, seeded_grad_out};
use crate::engine::mask::TileClass;
use crate::engine::memory::TiledShape;
use crate::engine::memory_backward::{self, BackwardTraffic};
use crate::engine::problem::{AttnSpec, ProblemShape};
use crate::engine::reference_backward;
use crate::error::{Error, Result};

/// The backward of one head, recorded.
#[derive(Debug, Clone)]
pub struct BackwardLab {
    /// The instrumented run: the kernel's own tiled backward with an observer.
    pub trace: BackwardTrace,
    /// The upstream gradient dO [n_q, dv] (seeded from the model's seed).
    pub dout: Array2<f64>,
    /// `event_of[i * tc + j]`: index of tile (i, j)'s event in the backward's order.
    pub event_of: Vec<usize>,
    /// The backward's HBM traffic after each tile.
    pub traffic: BackwardTraffic,
    /// f64 reference gradients of the same head and dO: dQ [n_q, d], dK, dV [n_k, ..].
    pub ref_dq: Array2<f64>,
    pub ref_dk: Array2<f64>,
    pub ref_dv: Array2<f64>,
}

/// The inputs of one head as the forward's lab holds them.
pub struct HeadInputs<'a> {
    pub q: ArrayView2<'a, f64>,
    pub k: ArrayView2<'a, f64>,
    pub v: ArrayView2<'a, f64>,
    pub spec: &'a AttnSpec,
    pub seed: u64,
}

impl BackwardLab {
    /// Run the backward of `head` with blocks of `br` x `bc`; `classes` is the mask's
    /// class of every tile, row-major [tr][tc].
    pub fn build(
        head: &HeadInputs<'_>,
        br: usize,
        bc: usize,
        classes: &[TileClass],
    ) -> Result<BackwardLab> {
        let (n_q, d) = head.q.dim();
        let (n_k, dv) = head.v.dim();
        let f32s = |a: ArrayView2<f64>| a.mapv(|x| x as f32);
        let dout32 = seeded_grad_out(n_q, dv, head.seed);
        let trace = flash_backward::trace_backward(
            f32s(head.q).view(),
            f32s(head.k).view(),
            f32s(head.v).view(),
            dout32.view(),
            head.spec,
            br,
            bc,
            None,
        )?;
        let (tr, tc) = (n_q.div_ceil(br), n_k.div_ceil(bc));
        let mut event_of = vec![usize::MAX; tr * tc];
        for (e, ev) in trace.events.iter().enumerate() {
            let at = ev.q_block * tc + ev.k_block;
            if ev.q_block >= tr || ev.k_block >= tc || event_of[at] != usize::MAX {
                return Err(Error::Internal(format!(
                    "the backward trace's tile ({}, {}) is out of place",
                    ev.q_block, ev.k_block
                )));
            }
            event_of[at] = e;
        }
        if event_of.contains(&usize::MAX) {
            return Err(Error::Internal(
                "the backward trace misses some tiles of the grid".into(),
            ));
        }
        let shape = TiledShape {
            n_q: n_q as u64,
            n_k: n_k as u64,
            d: d as u64,
            dv: dv as u64,
            br: br as u64,
            bc: bc as u64,
        };
        let traffic = memory_backward::backward_traffic(&shape, |i, j| {
            classes[i * tc + j] == TileClass::Empty
        })?;
        // The reference reads the same f32 inputs, widened, so the distance is the
        // kernel's arithmetic alone.
        let widen = |a: ArrayView2<f32>, n: usize, w: usize| -> Result<ndarray::Array4<f64>> {
            a.mapv(f64::from)
                .into_shape_with_order((1, 1, n, w))
                .map_err(|e| Error::Internal(e.to_string()))
        };
        let pshape = ProblemShape::from_dims([1, 1, n_q, d], [1, 1, n_k, d], [1, 1, n_k, dv])?;
        let grads = reference_backward::attention_backward(
            &pshape,
            widen(f32s(head.q).view(), n_q, d)?.view(),
            widen(f32s(head.k).view(), n_k, d)?.view(),
            widen(f32s(head.v).view(), n_k, dv)?.view(),
            widen(dout32.view(), n_q, dv)?.view(),
            head.spec,
        );
        let head0 = |a: ndarray::Array<f64, Ix4>| {
            a.index_axis_move(ndarray::Axis(0), 0)
                .index_axis_move(ndarray::Axis(0), 0)
        };
        Ok(BackwardLab {
            trace,
            dout: dout32.mapv(f64::from),
            event_of,
            traffic,
            ref_dq: head0(grads.dq),
            ref_dk: head0(grads.dk),
            ref_dv: head0(grads.dv),
        })
    }

    pub fn tiles(&self) -> usize {
        self.trace.events.len()
    }

    pub fn event(&self, k: usize) -> &BackwardEvent {
        &self.trace.events[k.min(self.tiles() - 1)]
    }

    /// The previous event of the same key block (the dK_j, dV_j the tile added to), if
    /// any: None at the key block's first tile, where they start from 0.
    pub fn before_in_key_block(&self, k: usize) -> Option<&BackwardEvent> {
        let ev = self.event(k);
        (k > 0)
            .then(|| &self.trace.events[k - 1])
            .filter(|p| p.k_block == ev.k_block)
    }

    /// Query blocks whose tiles with key block `j` the pass has run up to position `k`
    /// (skipped ones included): how far dK_j, dV_j have summed.
    pub fn summed_over(&self, k: usize) -> usize {
        let j = self.event(k).k_block;
        self.trace.events[..=k.min(self.tiles() - 1)]
            .iter()
            .filter(|e| e.k_block == j && !e.skipped)
            .count()
    }

    /// Largest |x - x_ref| of the final dQ, dK and dV: the kernel against the f64
    /// reference.
    pub fn final_distances(&self) -> (f64, f64, f64) {
        let dist = |a: &[Vec<f64>], b: &Array2<f64>| {
            a.iter()
                .zip(b.rows())
                .flat_map(|(x, y)| x.iter().zip(y).map(|(p, q)| (p - q).abs()))
                .fold(0.0, f64::max)
        };
        (
            dist(&self.trace.dq, &self.ref_dq),
            dist(&self.trace.dk, &self.ref_dk),
            dist(&self.trace.dv, &self.ref_dv),
        )
    }

    /// The recomputed S, P and dS of the tile at position `k` as matrices [rows][keys];
    /// None for a skipped tile.
    pub fn tile_matrices(&self, k: usize) -> Option<[Array2<f64>; 3]> {
        let ev = self.event(k);
        let m = |g: &Option<Vec<Vec<f64>>>| -> Option<Array2<f64>> {
            let g = g.as_ref()?;
            let cols = g.first().map_or(0, Vec::len);
            Array2::from_shape_vec((g.len(), cols), g.concat()).ok()
        };
        Some([m(&ev.s)?, m(&ev.p)?, m(&ev.ds)?])
    }

    /// dK_j or dV_j (`value`) of the tile at position `k`, after it.
    pub fn key_grads(&self, k: usize, value: bool) -> Array2<f64> {
        let ev = self.event(k);
        let g = if value { &ev.dv } else { &ev.dk };
        let w = g.first().map_or(0, Vec::len);
        Array2::from_shape_vec((g.len(), w), g.concat()).unwrap_or_else(|_| Array2::zeros((0, 0)))
    }

    /// The final dQ, dK, dV as matrices.
    pub fn finals(&self) -> [Array2<f64>; 3] {
        let m = |g: &[Vec<f64>]| {
            let w = g.first().map_or(0, Vec::len);
            Array2::from_shape_vec((g.len(), w), g.concat())
                .unwrap_or_else(|_| Array2::zeros((0, 0)))
        };
        [m(&self.trace.dq), m(&self.trace.dk), m(&self.trace.dv)]
    }
}
