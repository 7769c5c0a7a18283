//! The KV cache of a decoding session: every layer's rotated keys and values of the tokens
//! seen so far, so that each new token costs one row of work per layer, not a whole forward.

use crate::attn::range::KvBounds;
use crate::error::Result;
use crate::kernel::AlignedBuf;

/// Rows of a KV head that share one entry of [`LayerCache`]'s bounds.
pub(crate) const BOUND_ROWS: usize = 32;

/// One layer's keys and values, [kv_heads, capacity, d_head] each; rows 0..len are filled.
///
/// A KV head's rows are contiguous and start on a 64-byte line when d_head is a multiple
/// of 16, so the kernel reads V in place instead of copying it.
///
/// Beside them, the range check's bounds (largest |k|, key norm and |v|) of each run of
/// [`BOUND_ROWS`] rows, made when the rows are written: a decode step's attention then
/// reads a few bounds instead of scanning every cached key and value again (that scan
/// took about as long as the attention itself).
#[derive(Clone, Default)]
pub struct LayerCache {
    pub(crate) k: AlignedBuf,
    pub(crate) v: AlignedBuf,
    /// [kv_heads, capacity / BOUND_ROWS rounded up]
    bounds: Vec<KvBounds>,
}

impl LayerCache {
    /// Bounds anew for rows from..to of every KV head (whole runs: the run holding row
    /// `from` is read again from its start), after those rows were written. Err names a
    /// value that is not finite.
    pub(crate) fn bound_rows(
        &mut self,
        kv_heads: usize,
        d_head: usize,
        capacity: usize,
        from: usize,
        to: usize,
    ) -> Result<()> {
        let runs = capacity.div_ceil(BOUND_ROWS);
        self.bounds.resize(kv_heads * runs, KvBounds::default());
        for g in 0..kv_heads {
            for run in from / BOUND_ROWS..to.div_ceil(BOUND_ROWS) {
                let rows = (g * capacity + run * BOUND_ROWS) * d_head
                    ..(g * capacity + to.min((run + 1) * BOUND_ROWS)) * d_head;
                let k = &self.k.as_slice()[rows.clone()];
                let v = &self.v.as_slice()[rows];
                self.bounds[g * runs + run] = KvBounds::of_f32(k, v, d_head, d_head)?;
            }
        }
        Ok(())
    }

    /// Bounds on rows 0..n of KV head g, as [`LayerCache::bound_rows`] last made them
    /// (at least the rows' own: a run past row n covers more rows, not fewer).
    pub(crate) fn bounds(&self, g: usize, capacity: usize, n: usize) -> KvBounds {
        let runs = capacity.div_ceil(BOUND_ROWS);
        self.bounds[g * runs..][..n.div_ceil(BOUND_ROWS)]
            .iter()
            .fold(KvBounds::default(), |a, &b| a.max(b))
    }
}

/// The cache of all layers.
#[derive(Clone)]
pub struct KvCache {
    pub(crate) layers: Vec<LayerCache>,
    pub(crate) kv_heads: usize,
    pub(crate) d_head: usize,
    pub(crate) capacity: usize,
    pub(crate) len: usize,
}

impl KvCache {
    /// An empty cache for `capacity` tokens.
    pub fn new(layers: usize, kv_heads: usize, d_head: usize, capacity: usize) -> Self {
        let size = kv_heads * capacity * d_head;
        KvCache {
            layers: (0..layers)
                .map(|_| LayerCache {
                    k: AlignedBuf::zeros(size),
                    v: AlignedBuf::zeros(size),
                    bounds: Vec::new(),
                })
                .collect(),
            kv_heads,
            d_head,
            capacity,
            len: 0,
        }
    }

    /// Tokens cached so far.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Tokens it has room for.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes the cached tokens take in f32: 2 (K and V) x layers x kv_heads x len x d_head x 4.
    pub fn bytes(&self) -> usize {
        2 * self.layers.len() * self.kv_heads * self.len * self.d_head * 4
    }

    /// Cached keys of `layer`, KV head `g`: [len, d_head] (rotated, as attention reads them).
    pub fn keys(&self, layer: usize, g: usize) -> &[f32] {
        let row = g * self.capacity * self.d_head;
        &self.layers[layer].k.as_slice()[row..row + self.len * self.d_head]
    }

    /// Cached values of `layer`, KV head `g`: [len, d_head].
    pub fn values(&self, layer: usize, g: usize) -> &[f32] {
        let row = g * self.capacity * self.d_head;
        &self.layers[layer].v.as_slice()[row..row + self.len * self.d_head]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_of_rows_written_in_steps_are_those_of_the_rows() {
        let (g, dh, capacity) = (2, 5, 100);
        let mut cache = KvCache::new(1, g, dh, capacity);
        let layer = &mut cache.layers[0];
        // Prefill 37 rows, three single steps, then 40 more: runs filled in pieces.
        let mut at = 0;
        for (step, n) in [37, 1, 1, 1, 40].into_iter().enumerate() {
            for (buf, sign) in [(&mut layer.k, 1.0f32), (&mut layer.v, -1.0)] {
                let dst = buf.as_mut_slice();
                for kv in 0..g {
                    for r in at..at + n {
                        for c in 0..dh {
                            let x = ((r * 7 + c * 3 + kv) % 11) as f32 - 5.0;
                            dst[(kv * capacity + r) * dh + c] = sign * x * (step + 1) as f32;
                        }
                    }
                }
            }
            layer.bound_rows(g, dh, capacity, at, at + n).unwrap();
            at += n;
            for kv in 0..g {
                let rows = kv * capacity * dh..(kv * capacity + at) * dh;
                let want = KvBounds::of_f32(
                    &layer.k.as_slice()[rows.clone()],
                    &layer.v.as_slice()[rows],
                    dh,
                    dh,
                )
                .unwrap();
                assert_eq!(
                    layer.bounds(kv, capacity, at),
                    want,
                    "{at} rows of head {kv}"
                );
            }
        }
        // A value that is not finite is named.
        layer.k.as_mut_slice()[capacity * dh + at * dh] = f32::NAN;
        let err = layer.bound_rows(g, dh, capacity, at, at + 1).unwrap_err();
        assert!(err.to_string().contains("K holds NaN"), "{err}");
    }
}
