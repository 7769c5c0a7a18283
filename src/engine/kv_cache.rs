//! Autoregressive decoding with a KV cache, on the f64 reference math.
//!
//! A decoder produces one token at a time. At step t the new token's query q_t, key k_t
//! and value v_t are known; k_t and v_t are appended to the cache, and q_t attends over
//! the cache: softmax(scale * q_t K_cache^T) V_cache. That costs (t + 1)(d + dv)
//! multiply-adds per query head — O(t d) — because the keys and values of earlier tokens
//! are kept instead of recomputed.
//!
//! Without a cache a decoder re-runs the model over the whole prefix at every step: in a
//! stack of layers the keys and values of earlier tokens at layer l come from their
//! outputs at layer l - 1, so every layer recomputes all t + 1 rows of causal attention,
//! sum_{i<=t} (i + 1)(d + dv) multiply-adds per head — O(t^2 d) per step. [`Decoder`]
//! counts both, and (with [`DecodeOptions::recompute`]) actually runs the recomputation
//! so the two paths can be compared number by number.
//!
//! With [`CacheLayout::Rolling`] the cache is Mistral's rolling buffer: W slots, position
//! i written to slot i mod W, so the cache never holds more than the sliding window sees.

use ndarray::{Array2, Array3, ArrayView1, ArrayView2, ArrayView3, s};

use crate::engine::problem::ProblemShape;
use crate::error::{Error, Result};

/// How the cache keeps past keys and values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CacheLayout {
    /// Every past token; the query attends causally over all of them.
    #[default]
    Full,
    /// A rolling buffer of `window` slots for sliding-window attention (query t sees
    /// keys t - W < j <= t, the `window:W` mask).
    Rolling { window: usize },
}

impl CacheLayout {
    /// How many keys the query at `position` sees.
    pub fn visible(self, position: usize) -> usize {
        match self {
            CacheLayout::Full => position + 1,
            CacheLayout::Rolling { window } => (position + 1).min(window),
        }
    }

    fn check(self) -> Result<()> {
        match self {
            CacheLayout::Rolling { window: 0 } => Err(Error::usage(
                "a rolling buffer of 0 slots holds no key; the window must be at least 1",
            )),
            _ => Ok(()),
        }
    }
}

/// One slot of the cache: the key and value rows of one past token for every KV head.
#[derive(Debug, Clone, PartialEq)]
pub struct CacheSlot {
    /// The token position whose key and value this slot holds.
    pub position: usize,
    /// [kv_heads, d]
    pub k: Array2<f64>,
    /// [kv_heads, dv]
    pub v: Array2<f64>,
}

/// Where an appended token went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    pub position: usize,
    pub slot: usize,
    /// The position whose key and value the rolling buffer overwrote.
    pub evicted: Option<usize>,
}

/// A KV cache for `kv_heads` heads of keys of width `d` and values of width `dv`.
#[derive(Debug, Clone, PartialEq)]
pub struct KvCache {
    layout: CacheLayout,
    kv_heads: usize,
    d: usize,
    dv: usize,
    slots: Vec<CacheSlot>,
    next_position: usize,
}

impl KvCache {
    pub fn new(layout: CacheLayout, kv_heads: usize, d: usize, dv: usize) -> Result<KvCache> {
        layout.check()?;
        Ok(KvCache {
            layout,
            kv_heads,
            d,
            dv,
            slots: Vec::new(),
            next_position: 0,
        })
    }

    /// Append the next token's keys [kv_heads, d] and values [kv_heads, dv].
    pub fn append(&mut self, k: ArrayView2<f64>, v: ArrayView2<f64>) -> Appended {
        debug_assert_eq!(k.dim(), (self.kv_heads, self.d));
        debug_assert_eq!(v.dim(), (self.kv_heads, self.dv));
        let position = self.next_position;
        self.next_position += 1;
        let entry = CacheSlot {
            position,
            k: k.to_owned(),
            v: v.to_owned(),
        };
        let (slot, evicted) = match self.layout {
            CacheLayout::Full => {
                self.slots.push(entry);
                (position, None)
            }
            CacheLayout::Rolling { window } => {
                let slot = position % window;
                if slot < self.slots.len() {
                    let old = std::mem::replace(&mut self.slots[slot], entry);
                    (slot, Some(old.position))
                } else {
                    self.slots.push(entry);
                    (slot, None)
                }
            }
        };
        Appended {
            position,
            slot,
            evicted,
        }
    }

    pub fn layout(&self) -> CacheLayout {
        self.layout
    }

    /// Rows held (tokens for a full cache, at most W for a rolling buffer).
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The slots in slot order (a rolling buffer's physical layout).
    pub fn slots(&self) -> &[CacheSlot] {
        &self.slots
    }

    /// Slot indices ordered by the positions they hold, oldest first.
    pub fn by_position(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.slots.len()).collect();
        order.sort_by_key(|&s| self.slots[s].position);
        order
    }

    /// Numbers held: len x kv_heads x (d + dv).
    pub fn elements(&self) -> u64 {
        (self.slots.len() * self.kv_heads * (self.d + self.dv)) as u64
    }

    /// Bytes held, in the f64 this cache stores.
    pub fn bytes(&self) -> u64 {
        self.elements() * std::mem::size_of::<f64>() as u64
    }
}

/// Options of [`decode`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DecodeOptions {
    pub layout: CacheLayout,
    /// Score scale; 1/sqrt(d) unless given.
    pub scale: Option<f64>,
    /// Also run the recomputation without a cache at every step (O(t^2 d) each) and
    /// record how far it lands from the cached result. Its cost is counted either way.
    pub recompute: bool,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        DecodeOptions {
            layout: CacheLayout::Full,
            scale: None,
            recompute: true,
        }
    }
}

/// What one decoding step did, for a view to show.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodeStep {
    /// The position t of the token decoded at this step.
    pub position: usize,
    /// The cache slot its key and value went to (t for a full cache, t mod W rolling).
    pub written_slot: usize,
    /// The position a rolling buffer overwrote, if any.
    pub evicted: Option<usize>,
    /// Rows in the cache after appending.
    pub cache_len: usize,
    /// The positions the query attends to, ascending; the columns of `weights`.
    pub cache_positions: Vec<usize>,
    /// The position held by each slot, in slot order (the buffer's contents).
    pub slot_positions: Vec<usize>,
    pub cache_elements: u64,
    /// In f64, as stored; multiply `cache_elements` by a dtype's size for other widths.
    pub cache_bytes: u64,
    /// [heads, cache_len]: each query head's softmax weights over the cached positions.
    pub weights: Array2<f64>,
    /// [heads, dv]: the step's output row for each query head.
    pub out: Array2<f64>,
    /// Multiply-adds this step performed with the cache: heads x visible x (d + dv).
    pub cached_madds: u64,
    /// Multiply-adds the step costs without a cache (all t + 1 rows recomputed).
    pub recompute_madds: u64,
    /// With `recompute`: max |recomputed last row - cached row| over heads and columns.
    pub recompute_max_abs_diff: Option<f64>,
}

/// Every step of a decoding run.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoding {
    pub shape: ProblemShape,
    pub scale: f64,
    pub layout: CacheLayout,
    pub steps: Vec<DecodeStep>,
}

impl Decoding {
    /// The outputs of every step stacked: [heads, n, dv], comparable with causal
    /// attention over the whole sequence.
    pub fn output(&self) -> Array3<f64> {
        let mut out = Array3::zeros((self.shape.heads, self.steps.len(), self.shape.dv));
        for (t, step) in self.steps.iter().enumerate() {
            out.slice_mut(s![.., t, ..]).assign(&step.out);
        }
        out
    }

    pub fn total_cached_madds(&self) -> u64 {
        self.steps.iter().map(|s| s.cached_madds).sum()
    }

    pub fn total_recompute_madds(&self) -> u64 {
        self.steps.iter().map(|s| s.recompute_madds).sum()
    }
}

/// Multiply-adds of one cached step: every query head scores `visible` keys (d each) and
/// sums as many values (dv each).
pub fn cached_step_madds(heads: usize, visible: usize, d: usize, dv: usize) -> u64 {
    (heads * visible * (d + dv)) as u64
}

/// Multiply-adds of one step without a cache: all rows 0..=t of causal (or windowed)
/// attention again.
pub fn recompute_step_madds(
    heads: usize,
    position: usize,
    layout: CacheLayout,
    d: usize,
    dv: usize,
) -> u64 {
    (0..=position)
        .map(|i| cached_step_madds(heads, layout.visible(i), d, dv))
        .sum()
}

/// Decodes a sequence token by token. Q is [H, n, d], K [G, n, d], V [G, n, dv]: the
/// rows the model's projections give each token (RoPE already applied, if any).
#[derive(Debug, Clone)]
pub struct Decoder<'a> {
    q: ArrayView3<'a, f64>,
    k: ArrayView3<'a, f64>,
    v: ArrayView3<'a, f64>,
    shape: ProblemShape,
    scale: f64,
    options: DecodeOptions,
    cache: KvCache,
}

impl<'a> Decoder<'a> {
    pub fn new(
        q: ArrayView3<'a, f64>,
        k: ArrayView3<'a, f64>,
        v: ArrayView3<'a, f64>,
        options: DecodeOptions,
    ) -> Result<Decoder<'a>> {
        let (h, n, d) = q.dim();
        let (g, nk, dk) = k.dim();
        let (gv, nv, dv) = v.dim();
        let shape = ProblemShape::from_dims([1, h, n, d], [1, g, nk, dk], [1, gv, nv, dv])?;
        if nk != n {
            return Err(Error::usage(format!(
                "decoding needs one query, key and value row per token; Q has {n} rows but K and V {nk}"
            )));
        }
        let cache = KvCache::new(options.layout, g, d, dv)?;
        Ok(Decoder {
            q,
            k,
            v,
            shape,
            scale: options.scale.unwrap_or(1.0 / (d as f64).sqrt()),
            options,
            cache,
        })
    }

    pub fn shape(&self) -> &ProblemShape {
        &self.shape
    }

    pub fn cache(&self) -> &KvCache {
        &self.cache
    }

    /// Decode the next token, or `None` once every token is done.
    pub fn step(&mut self) -> Option<DecodeStep> {
        let t = self.cache.next_position;
        if t >= self.shape.n_q {
            return None;
        }
        let sh = self.shape;
        let appended = self
            .cache
            .append(self.k.slice(s![.., t, ..]), self.v.slice(s![.., t, ..]));
        let order = self.cache.by_position();
        let mut weights = Array2::zeros((sh.heads, order.len()));
        let mut out = Array2::zeros((sh.heads, sh.dv));
        let mut madds = 0;
        for h in 0..sh.heads {
            let g = sh.kv_head_for(h);
            let rows: Vec<_> = order
                .iter()
                .map(|&slot| {
                    let s = &self.cache.slots[slot];
                    (s.k.row(g), s.v.row(g))
                })
                .collect();
            let (w, o) = attend(self.q.slice(s![h, t, ..]), &rows, self.scale, &mut madds);
            weights.row_mut(h).assign(&ndarray::ArrayView1::from(&w));
            out.row_mut(h).assign(&ndarray::ArrayView1::from(&o));
        }
        let (recompute_madds, recompute_max_abs_diff) = if self.options.recompute {
            let (again, cost) = self.recompute(t);
            let diff = again
                .iter()
                .zip(out.iter())
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            (cost, Some(diff))
        } else {
            (
                recompute_step_madds(sh.heads, t, self.options.layout, sh.d, sh.dv),
                None,
            )
        };
        Some(DecodeStep {
            position: t,
            written_slot: appended.slot,
            evicted: appended.evicted,
            cache_len: self.cache.len(),
            cache_positions: order
                .iter()
                .map(|&s| self.cache.slots[s].position)
                .collect(),
            slot_positions: self.cache.slots.iter().map(|s| s.position).collect(),
            cache_elements: self.cache.elements(),
            cache_bytes: self.cache.bytes(),
            weights,
            out,
            cached_madds: madds,
            recompute_madds,
            recompute_max_abs_diff,
        })
    }

    /// Without a cache: attention for every row 0..=t of the prefix, from Q, K and V
    /// themselves. Returns the last row [heads, dv] and the multiply-adds spent.
    fn recompute(&self, t: usize) -> (Array2<f64>, u64) {
        let sh = self.shape;
        let mut last = Array2::zeros((sh.heads, sh.dv));
        let mut madds = 0;
        for h in 0..sh.heads {
            let g = sh.kv_head_for(h);
            for i in 0..=t {
                let first = i + 1 - self.options.layout.visible(i);
                let rows: Vec<_> = (first..=i)
                    .map(|j| (self.k.slice(s![g, j, ..]), self.v.slice(s![g, j, ..])))
                    .collect();
                let (_, o) = attend(self.q.slice(s![h, i, ..]), &rows, self.scale, &mut madds);
                if i == t {
                    last.row_mut(h).assign(&ndarray::ArrayView1::from(&o));
                }
            }
        }
        (last, madds)
    }
}

/// Decode every token of Q, K, V (see [`Decoder`]).
pub fn decode(
    q: ArrayView3<f64>,
    k: ArrayView3<f64>,
    v: ArrayView3<f64>,
    options: DecodeOptions,
) -> Result<Decoding> {
    let mut decoder = Decoder::new(q, k, v, options)?;
    let mut steps = Vec::with_capacity(decoder.shape.n_q);
    while let Some(step) = decoder.step() {
        steps.push(step);
    }
    Ok(Decoding {
        shape: decoder.shape,
        scale: decoder.scale,
        layout: options.layout,
        steps,
    })
}

/// One query row against key/value rows, max-subtracted softmax, in the reference's
/// order of operations. Returns the weights and the output row; adds the multiply-adds
/// performed (d per score, dv per weighted value) to `madds`.
fn attend(
    q: ArrayView1<f64>,
    rows: &[(ArrayView1<f64>, ArrayView1<f64>)],
    scale: f64,
    madds: &mut u64,
) -> (Vec<f64>, Vec<f64>) {
    let scores: Vec<f64> = rows
        .iter()
        .map(|(k, _)| {
            *madds += k.len() as u64;
            q.iter().zip(k.iter()).map(|(a, b)| a * b).sum::<f64>() * scale
        })
        .collect();
    let m = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let dv = rows.first().map_or(0, |(_, v)| v.len());
    let mut out = vec![0.0; dv];
    let mut p: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
    let l: f64 = p.iter().sum();
    for (pj, (_, v)) in p.iter().zip(rows) {
        *madds += v.len() as u64;
        for (o, x) in out.iter_mut().zip(v.iter()) {
            *o += pj * x;
        }
    }
    out.iter_mut().for_each(|o| *o /= l);
    p.iter_mut().for_each(|x| *x /= l);
    (p, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array3;

    fn ramp(h: usize, n: usize, d: usize, phase: f64) -> Array3<f64> {
        Array3::from_shape_fn((h, n, d), |(a, b, c)| {
            ((a * 7 + b * 3 + c) as f64 * 0.37 + phase).sin()
        })
    }

    #[test]
    fn costs_grow_linearly_with_a_cache_and_quadratically_without() {
        let (q, k, v) = (
            ramp(2, 12, 4, 0.0),
            ramp(2, 12, 4, 1.0),
            ramp(2, 12, 3, 2.0),
        );
        let run = decode(q.view(), k.view(), v.view(), DecodeOptions::default()).unwrap();
        for (t, s) in run.steps.iter().enumerate() {
            assert_eq!(s.cache_len, t + 1);
            assert_eq!(s.cached_madds, cached_step_madds(2, t + 1, 4, 3));
            assert_eq!(s.cached_madds, (2 * (t + 1) * 7) as u64);
            assert_eq!(
                s.recompute_madds,
                recompute_step_madds(2, t, CacheLayout::Full, 4, 3)
            );
            assert_eq!(s.recompute_madds, (2 * (t + 1) * (t + 2) / 2 * 7) as u64);
            assert!(s.recompute_max_abs_diff.unwrap() < 1e-14);
            assert_eq!(s.cache_bytes, ((t + 1) * 2 * 7 * 8) as u64);
            let sums = s.weights.sum_axis(ndarray::Axis(1));
            assert!(sums.iter().all(|x| (x - 1.0).abs() < 1e-12));
        }
    }

    #[test]
    fn rolling_buffer_writes_slot_i_mod_w_and_evicts_the_oldest() {
        let (q, k, v) = (ramp(1, 7, 2, 0.0), ramp(1, 7, 2, 1.0), ramp(1, 7, 2, 2.0));
        let opts = DecodeOptions {
            layout: CacheLayout::Rolling { window: 3 },
            ..Default::default()
        };
        let run = decode(q.view(), k.view(), v.view(), opts).unwrap();
        let s5 = &run.steps[5];
        assert_eq!(s5.written_slot, 2);
        assert_eq!(s5.evicted, Some(2));
        assert_eq!(s5.slot_positions, [3, 4, 5]);
        assert_eq!(s5.cache_positions, [3, 4, 5]);
        let s6 = &run.steps[6];
        assert_eq!((s6.written_slot, s6.evicted), (0, Some(3)));
        assert_eq!(s6.slot_positions, [6, 4, 5]);
        assert_eq!(s6.cache_positions, [4, 5, 6]);
        assert!(run.steps.iter().all(|s| s.cache_len <= 3));
        assert!(
            run.steps
                .iter()
                .all(|s| s.recompute_max_abs_diff.unwrap() < 1e-14)
        );
    }

    #[test]
    fn mismatched_lengths_and_empty_windows_are_refused() {
        let (q, k) = (ramp(1, 4, 2, 0.0), ramp(1, 5, 2, 0.0));
        let e = decode(q.view(), k.view(), k.view(), DecodeOptions::default()).unwrap_err();
        assert!(e.to_string().contains("Q has 4 rows"), "{e}");
        let opts = DecodeOptions {
            layout: CacheLayout::Rolling { window: 0 },
            ..Default::default()
        };
        assert!(decode(q.view(), q.view(), q.view(), opts).is_err());
    }
}
