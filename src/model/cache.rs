//! The KV cache of a decoding session: every layer's rotated keys and values of the tokens
//! seen so far, so that each new token costs one row of work per layer, not a whole forward.

use crate::kernel::AlignedBuf;

/// One layer's keys and values, [kv_heads, capacity, d_head] each; rows 0..len are filled.
///
/// A KV head's rows are contiguous and start on a 64-byte line when d_head is a multiple
/// of 16, so the kernel reads V in place instead of copying it.
#[derive(Clone, Default)]
pub struct LayerCache {
    pub(crate) k: AlignedBuf,
    pub(crate) v: AlignedBuf,
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
