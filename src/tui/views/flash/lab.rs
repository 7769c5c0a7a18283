//! What the flash view shows, derived through the engine from the current pipeline: one
//! head's q, k, v (after RoPE), the scale, bias and mask, the instrumented tiled run of
//! the kernel ([`engine::flash::trace`]) and its HBM traffic tile by tile
//! ([`memory::tiled_traffic`]). Nothing here computes attention; it picks the engine's
//! numbers apart for drawing.

use std::ops::Range;

use ndarray::{Array2, ArrayView2, s};

use crate::engine::flash::{self, FlashTrace, LoopOrder, TileEvent, TraceOptions};
use crate::engine::mask::{Mask, TileClass};
use crate::engine::memory::{self, MemoryReport, MemoryShape, TiledShape, TiledTraffic};
use crate::engine::pipeline::{ModelConfig, Pipeline, Source as PipelineSource, StageId};
use crate::engine::problem::AttnSpec;
use crate::error::{Error, Result};
use crate::scene::FlashPass;

use super::backward_lab::{BackwardLab, HeadInputs};

/// Most tiles a run may have: 64 x 64 keeps every tile on a 200-column screen at one
/// column each and the trace small.
pub const MAX_TILES: usize = 64 * 64;

/// Most numbers the recorded states may hold (m, l, rescale and dv outputs per row of
/// every event): 2^22 f64 values are 32 MiB.
pub const MAX_TRACE_VALUES: usize = 1 << 22;

/// Tiles per side the default block sizes aim for.
const DEFAULT_TILES_PER_SIDE: usize = 4;

/// What a lab was built from; a lab whose key differs from the state's is stale.
#[derive(Debug, Clone, PartialEq)]
pub struct LabKey {
    pub config: ModelConfig,
    pub n_q: usize,
    pub n_k: usize,
    pub head: usize,
    pub br: usize,
    pub bc: usize,
    pub order: LoopOrder,
    pub pass: FlashPass,
}

/// The derived data of the flash view.
#[derive(Debug, Clone)]
pub struct FlashLab {
    pub key: LabKey,
    pub head: usize,
    /// The KV group the head reads (GQA).
    pub group: usize,
    /// q [n_q, d], k [n_k, d], v [n_k, dv] of the head, after RoPE, as the run read them.
    pub q: Array2<f64>,
    pub k: Array2<f64>,
    pub v: Array2<f64>,
    /// True when ALiBi biases the scores.
    pub alibi: bool,
    /// The f64 reference output of the head (the pipeline's weights x V).
    pub reference: Array2<f64>,
    pub query_labels: Vec<String>,
    pub key_labels: Vec<String>,
    pub dim_labels: Vec<String>,
    pub value_labels: Vec<String>,
    /// The instrumented run: the kernel's own tiled code with an observer.
    pub trace: FlashTrace,
    /// The mask's class of every tile, row-major [tr][tc].
    pub classes: Vec<TileClass>,
    /// `event_of[i * tc + j]`: index of tile (i, j)'s event in the loop order.
    pub event_of: Vec<usize>,
    /// `prev_in_block[e]`: the previous event of the same query block, if any.
    pub prev_in_block: Vec<Option<usize>>,
    /// `block_final[i]`: the event after which query block i's rows are final: its last
    /// computed tile (the tiles after it are skipped), or its first if all are.
    pub block_final: Vec<usize>,
    /// HBM traffic of both loop orders on these blocks and this mask.
    pub fa1: TiledTraffic,
    pub fa2: TiledTraffic,
    /// The closed forms and Theta values of the papers for N = n_k, d and the SRAM the
    /// tiles use.
    pub report: MemoryReport,
    /// M: elements on chip for one tile step (Q_i, O_i, K_j, V_j, S_ij).
    pub sram_elements: u64,
    /// The tiles of the last scripted step this lab has moved to.
    pub tiles_seen: Vec<(usize, usize)>,
    /// The backward pass of the same head and blocks, when the view plays it; then the
    /// tiles are counted, numbered and played in its order (key blocks outer).
    pub backward: Option<Box<BackwardLab>>,
}

/// Block sizes for a sequence of `n`: about [`DEFAULT_TILES_PER_SIDE`] tiles per side.
pub fn default_block(n: usize) -> usize {
    n.div_ceil(DEFAULT_TILES_PER_SIDE).max(1)
}

/// The smallest blocks that keep a run of n_q x n_k within [`MAX_TILES`] and
/// [`MAX_TRACE_VALUES`], raising `br` and `bc` (in turn) as needed.
pub fn fit_blocks(n_q: usize, n_k: usize, dv: usize, br: usize, bc: usize) -> (usize, usize) {
    let (mut br, mut bc) = (br.clamp(1, n_q.max(1)), bc.clamp(1, n_k.max(1)));
    let too_big = |br: usize, bc: usize| {
        let tiles = n_q.div_ceil(br) * n_k.div_ceil(bc);
        // Every event holds its block's rows: tc events per query row.
        let values = n_k.div_ceil(bc) * n_q * (dv + 3);
        tiles > MAX_TILES || values > MAX_TRACE_VALUES
    };
    while too_big(br, bc) && (br < n_q || bc < n_k) {
        if (bc <= br || br >= n_q) && bc < n_k {
            bc = (bc * 2).min(n_k);
        } else {
            br = (br * 2).min(n_q);
        }
    }
    (br, bc)
}

fn to_f32(a: ArrayView2<f64>) -> Array2<f32> {
    a.mapv(|x| x as f32)
}

fn labels(n: usize) -> Vec<String> {
    (0..n).map(|c| c.to_string()).collect()
}

impl FlashLab {
    /// Build the lab of `head` of `pipeline` with the given blocks and loop order.
    pub fn build(
        pipeline: &Pipeline,
        head: usize,
        br: usize,
        bc: usize,
        order: LoopOrder,
        pass: FlashPass,
    ) -> Result<FlashLab> {
        if pipeline.source == PipelineSource::Weights {
            return Err(Error::usage(
                "the flash view computes attention from q, k and v; these are attention weights loaded from a file (open the tensors with attnviz view --q --k --v)",
            ));
        }
        let sh = pipeline.shape;
        let group = pipeline.kv_group_for(head);
        let missing = |what: &str| Error::Internal(format!("the pipeline has no {what}"));
        let rope = pipeline
            .stage(StageId::Rope)
            .ok_or_else(|| missing("RoPE stage"))?;
        let q = &rope
            .matrices
            .get(head)
            .ok_or_else(|| missing("q of this head"))?
            .data;
        let kv = rope
            .kv_groups
            .get(group)
            .ok_or_else(|| missing("k, v of this group"))?;
        let (k, v) = match kv.as_slice() {
            [k, v, ..] => (&k.data, &v.data),
            _ => return Err(missing("k and v of this group")),
        };
        let reference = &pipeline
            .stage(StageId::WeightedSum)
            .and_then(|st| st.matrices.get(head))
            .ok_or_else(|| missing("output of this head"))?
            .data;
        // The app's masks are the same for every head (file masks are for `compute`),
        // so the mask resolved for this one head is the pipeline's.
        let mask = Mask::resolve(pipeline.mask.kind(), 1, 1, sh.n_q, sh.n_k)?;
        let spec = AttnSpec {
            mask: mask.clone(),
            alibi: pipeline
                .alibi_slopes
                .as_ref()
                .map(|slopes| vec![slopes[head]]),
            scale: pipeline.scale.unwrap_or(1.0),
        };
        let backward_of = |classes: &[TileClass]| -> Result<Option<Box<BackwardLab>>> {
            if pass == FlashPass::Forward {
                return Ok(None);
            }
            let inputs = HeadInputs {
                q: q.view(),
                k: k.view(),
                v: v.view(),
                spec: &spec,
                seed: pipeline.config.seed,
            };
            Ok(Some(Box::new(BackwardLab::build(
                &inputs, br, bc, classes,
            )?)))
        };
        let trace = flash::trace(
            to_f32(q.view()).view(),
            to_f32(k.view()).view(),
            to_f32(v.view()).view(),
            &spec,
            TraceOptions {
                br,
                bc,
                loop_order: order,
                tier: None,
            },
        )?;
        let (tr, tc) = (trace.q_blocks(), trace.k_blocks());
        let mut classes = Vec::with_capacity(tr * tc);
        for i in 0..tr {
            for j in 0..tc {
                let rows = i * br..((i + 1) * br).min(sh.n_q);
                let cols = j * bc..((j + 1) * bc).min(sh.n_k);
                classes.push(mask.tile_class(0, 0, rows, cols));
            }
        }
        let mut event_of = vec![usize::MAX; tr * tc];
        let mut prev_in_block = Vec::with_capacity(trace.events.len());
        let mut last_of_block: Vec<Option<usize>> = vec![None; tr];
        let mut block_final: Vec<Option<usize>> = vec![None; tr];
        for (e, ev) in trace.events.iter().enumerate() {
            let i = ev.q_block * tc + ev.k_block;
            if ev.q_block >= tr || ev.k_block >= tc || event_of[i] != usize::MAX {
                return Err(Error::Internal(format!(
                    "the trace's tile ({}, {}) is out of place",
                    ev.q_block, ev.k_block
                )));
            }
            event_of[i] = e;
            prev_in_block.push(last_of_block[ev.q_block]);
            last_of_block[ev.q_block] = Some(e);
            let f = &mut block_final[ev.q_block];
            if !ev.skipped || f.is_none() {
                *f = Some(e);
            }
        }
        let block_final: Vec<usize> = block_final.iter().map(|e| e.unwrap_or(0)).collect();
        if event_of.contains(&usize::MAX) {
            return Err(Error::Internal(
                "the trace misses some tiles of the grid".into(),
            ));
        }
        let tiled = TiledShape {
            n_q: sh.n_q as u64,
            n_k: sh.n_k as u64,
            d: sh.d as u64,
            dv: sh.dv as u64,
            br: br as u64,
            bc: bc as u64,
        };
        let skipped = |i: usize, j: usize| classes[i * tc + j] == TileClass::Empty;
        let fa1 = memory::tiled_traffic(&tiled, LoopOrder::Fa1, skipped)?;
        let fa2 = memory::tiled_traffic(&tiled, LoopOrder::Fa2, skipped)?;
        let sram = memory::tile_elements(br as u64, bc as u64, sh.d as u64);
        let sram_elements =
            u64::try_from(sram).map_err(|_| Error::usage("the tiles are too large to count"))?;
        let report = memory::memory_report(&MemoryShape {
            n: sh.n_k as u64,
            heads: 1,
            d: sh.d as u64,
            dtype: crate::cli::Dtype::F32,
            sram_bytes: sram_elements * 4,
            br: Some(br as u64),
            bc: Some(bc as u64),
        })?;
        let backward = backward_of(&classes)?;
        Ok(FlashLab {
            key: LabKey {
                config: pipeline.config.clone(),
                n_q: sh.n_q,
                n_k: sh.n_k,
                head,
                br,
                bc,
                order,
                pass,
            },
            head,
            group,
            q: q.clone(),
            k: k.clone(),
            v: v.clone(),
            alibi: pipeline.alibi_slopes.is_some(),
            reference: reference.clone(),
            query_labels: pipeline.query_labels.clone(),
            key_labels: pipeline.key_labels.clone(),
            dim_labels: labels(sh.d),
            value_labels: labels(sh.dv),
            trace,
            classes,
            event_of,
            prev_in_block,
            block_final,
            fa1,
            fa2,
            report,
            sram_elements,
            tiles_seen: Vec::new(),
            backward,
        })
    }

    pub fn tr(&self) -> usize {
        self.trace.q_blocks()
    }

    pub fn tc(&self) -> usize {
        self.trace.k_blocks()
    }

    /// Tiles of the pass shown (both passes visit every tile once).
    pub fn tiles(&self) -> usize {
        self.trace.events.len()
    }

    pub fn rows(&self, i: usize) -> Range<usize> {
        i * self.trace.br..((i + 1) * self.trace.br).min(self.trace.n_q)
    }

    pub fn cols(&self, j: usize) -> Range<usize> {
        j * self.trace.bc..((j + 1) * self.trace.bc).min(self.trace.n_k)
    }

    pub fn class(&self, i: usize, j: usize) -> TileClass {
        self.classes[i * self.tc() + j]
    }

    /// Position of tile (i, j) in the loop order of the pass shown.
    pub fn index_of(&self, tile: (usize, usize)) -> usize {
        let (i, j) = (tile.0.min(self.tr() - 1), tile.1.min(self.tc() - 1));
        match &self.backward {
            Some(b) => b.event_of[i * self.tc() + j],
            None => self.event_of[i * self.tc() + j],
        }
    }

    /// The tile at position `k` of the loop order of the pass shown.
    pub fn tile_at(&self, k: usize) -> (usize, usize) {
        if let Some(b) = &self.backward {
            let e = b.event(k);
            return (e.q_block, e.k_block);
        }
        let e = &self.trace.events[k.min(self.tiles() - 1)];
        (e.q_block, e.k_block)
    }

    pub fn event(&self, k: usize) -> &TileEvent {
        &self.trace.events[k]
    }

    /// The state of the block before event `k` touched it: the previous event of the
    /// same query block (None: the block starts from m = -inf, l = 0, O = 0).
    pub fn before(&self, k: usize) -> Option<&TileEvent> {
        self.prev_in_block[k].map(|p| &self.trace.events[p])
    }

    /// Each query block's latest event up to and including position `k`.
    pub fn latest_per_block(&self, k: usize) -> Vec<Option<usize>> {
        let mut out = vec![None; self.tr()];
        let mut left = self.tr();
        for e in (0..=k.min(self.tiles() - 1)).rev() {
            let b = self.trace.events[e].q_block;
            if out[b].is_none() {
                out[b] = Some(e);
                left -= 1;
                if left == 0 {
                    break;
                }
            }
        }
        out
    }

    /// The output so far of every query row after position `k` (zeros for rows whose
    /// block has not started), and for each row whether it is final (no computed tile of
    /// its block is left).
    pub fn output_after(&self, k: usize) -> (Array2<f64>, Vec<bool>) {
        let (n_q, dv) = (self.trace.n_q, self.trace.dv);
        let mut o = Array2::zeros((n_q, dv));
        let mut done = vec![false; n_q];
        for (b, e) in self.latest_per_block(k).into_iter().enumerate() {
            let Some(e) = e else { continue };
            let ev = &self.trace.events[e];
            let finished = self.block_final[b] <= k;
            for (r, row) in ev.rows.clone().enumerate() {
                for (c, &x) in ev.o[r].iter().enumerate() {
                    o[[row, c]] = x;
                }
                done[row] = finished;
            }
        }
        (o, done)
    }

    /// Largest |O - O_ref| over the rows of event `k`'s block.
    pub fn block_distance(&self, k: usize) -> f64 {
        let ev = &self.trace.events[k];
        ev.rows
            .clone()
            .enumerate()
            .flat_map(|(r, row)| {
                ev.o[r]
                    .iter()
                    .zip(self.reference.row(row))
                    .map(|(a, b)| (a - b).abs())
            })
            .fold(0.0, f64::max)
    }

    /// Largest |O - O_ref| over one row of event `k`'s block.
    pub fn row_distance(&self, k: usize, r: usize) -> f64 {
        let ev = &self.trace.events[k];
        let row = ev.rows.start + r;
        ev.o[r]
            .iter()
            .zip(self.reference.row(row))
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max)
    }

    /// Largest |out - O_ref| over the whole head: the run's final output against the
    /// f64 reference.
    pub fn final_distance(&self) -> f64 {
        self.trace
            .out
            .iter()
            .enumerate()
            .flat_map(|(i, row)| {
                row.iter()
                    .zip(self.reference.row(i))
                    .map(|(a, b)| (a - b).abs())
            })
            .fold(0.0, f64::max)
    }

    /// The traffic of the loop order this lab ran.
    pub fn traffic(&self) -> &TiledTraffic {
        match self.key.order {
            LoopOrder::Fa1 => &self.fa1,
            LoopOrder::Fa2 => &self.fa2,
        }
    }

    /// Q_i, K_j and V_j of tile (i, j), as the run read them.
    pub fn q_block(&self, i: usize) -> ArrayView2<'_, f64> {
        self.q.slice(s![self.rows(i), ..])
    }

    pub fn k_block(&self, j: usize) -> ArrayView2<'_, f64> {
        self.k.slice(s![self.cols(j), ..])
    }

    pub fn v_block(&self, j: usize) -> ArrayView2<'_, f64> {
        self.v.slice(s![self.cols(j), ..])
    }

    /// The scores S = scale Q_i K_j^T + biases of the tile at position `k`, as the kernel
    /// computed them on chip (-inf where masked); None for a skipped tile.
    pub fn s_block(&self, k: usize) -> Option<Array2<f64>> {
        let s = self.trace.events[k].s.as_ref()?;
        let cols = s.first().map_or(0, Vec::len);
        Array2::from_shape_vec((s.len(), cols), s.concat()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fitted_blocks_stay_within_the_limits() {
        for (n, br, bc) in [(2048, 1, 1), (2048, 64, 1), (128, 2, 2), (7, 9, 0)] {
            let (br2, bc2) = fit_blocks(n, n, 64, br, bc);
            assert!(
                n.div_ceil(br2) * n.div_ceil(bc2) <= MAX_TILES,
                "{n} {br2} {bc2}"
            );
            assert!(
                n.div_ceil(bc2) * n * 67 <= MAX_TRACE_VALUES,
                "{n} {br2} {bc2}"
            );
            assert!(br2 >= 1 && bc2 >= 1 && br2 <= n && bc2 <= n);
        }
        assert_eq!(fit_blocks(128, 128, 4, 2, 2), (2, 2));
        assert_eq!(default_block(7), 2);
        assert_eq!(default_block(1), 1);
    }
}
