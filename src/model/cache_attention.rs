//! Attention over a layer's KV cache: new keys and values written after the cached ones
//! (with the bounds the kernel's range check reads, see [`LayerCache`]), and the new
//! queries' attention over every cached key, one kernel call per KV head; a decode
//! step's single query per head goes as one block of rows per KV head.

use std::ops::Range;

use crate::engine::config::MaskKind;
use crate::engine::mask::Mask;
use crate::engine::problem::{AttnSpec, ProblemShape};
use crate::error::Result;
use crate::kernel::{self, KernelOptions};
use crate::model::cache::LayerCache;
use crate::model::checks::model_attention;
use crate::model::config::ModelConfig;
use crate::model::rows::{self, rows_mut};

/// Attention of n new queries over a cache of len + n keys, one kernel call per KV head
/// (its keys are contiguous in the cache; the query heads that read it are contiguous in
/// q), each checked against the bounds the cache keeps instead of a scan of its keys.
#[allow(clippy::too_many_arguments)]
pub(crate) fn cached_attention(
    cfg: &ModelConfig,
    q: &[f32],
    n: usize,
    cache: &LayerCache,
    len: usize,
    capacity: usize,
    mask: &MaskKind,
    kopts: &KernelOptions,
) -> Result<(Vec<f32>, Vec<f32>)> {
    let (dh, g) = (cfg.d_head, cfg.kv_heads);
    let r = cfg.heads / g;
    let n_k = len + n;
    let shape = |heads, n_q, n_k| ProblemShape {
        batch: 1,
        heads,
        kv_heads: 1,
        n_q,
        n_k,
        d: dh,
        dv: dh,
    };
    let (shape, mask, keys) = match last_query_keys(mask, n_k) {
        // A decode step: the one new query of each of a KV head's r query heads sees the
        // same keys, so the r queries go to the kernel as r rows of one head over those
        // keys, unmasked. Alone, each would take a whole block of query rows (a vector's
        // width) for one row of work; out [r, dh] and lse [r] are laid out as the r
        // heads' [r, 1, dh] and [r, 1].
        Some(keys) if n == 1 && r > 1 => (
            shape(1, r, keys.len()),
            Mask::resolve(&MaskKind::None, 1, 1, r, keys.len())?,
            keys,
        ),
        _ => (shape(r, n, n_k), Mask::resolve(mask, 1, r, n, n_k)?, 0..n_k),
    };
    let spec = AttnSpec::new(&shape, mask, false, Some(cfg.attn_scale()));
    let mut out = Vec::with_capacity(cfg.heads * n * dh);
    let mut lse = Vec::with_capacity(cfg.heads * n);
    for kv in 0..g {
        let rows = (kv * capacity + keys.start) * dh..(kv * capacity + keys.end) * dh;
        let kopts = KernelOptions {
            kv_bounds: Some(cache.bounds(kv, capacity, n_k)),
            ..kopts.clone()
        };
        let res = kernel::attention(
            &shape,
            &q[kv * r * n * dh..][..r * n * dh],
            &cache.k.as_slice()[rows.clone()],
            &cache.v.as_slice()[rows],
            &spec,
            &kopts,
        )
        .map_err(model_attention)?;
        out.extend_from_slice(&res.out);
        lse.extend_from_slice(&res.lse);
    }
    Ok((out, lse))
}

/// The keys the last of n_k positions sees under `mask`, when they are one run (every
/// key for none and causal, the last W for a window without sinks).
fn last_query_keys(mask: &MaskKind, n_k: usize) -> Option<Range<usize>> {
    match mask {
        MaskKind::None | MaskKind::Causal => Some(0..n_k),
        MaskKind::Window(w) => Some(n_k.saturating_sub(*w)..n_k),
        _ => None,
    }
}

/// Write new keys and values [G, n, dh] after the `len` cached rows of each KV head, and
/// bound them for the range check (see [`LayerCache`]). `(g, n, dh)`: KV heads, new rows,
/// head size.
pub(crate) fn append_kv(
    threads: usize,
    cache: &mut LayerCache,
    kh: &[f32],
    vh: &[f32],
    (g, n, dh): (usize, usize, usize),
    len: usize,
    capacity: usize,
) -> Result<()> {
    let threads = rows::threads_for(threads, n * g * dh);
    append(threads, &mut cache.k, kh, g, n, dh, len, capacity)?;
    append(threads, &mut cache.v, vh, g, n, dh, len, capacity)?;
    cache
        .bound_rows(g, dh, capacity, len, len + n)
        .map_err(model_attention)
}

/// Write new rows [G, n, dh] after the `len` cached rows of each KV head, the heads
/// shared out over `threads`.
#[allow(clippy::too_many_arguments)]
fn append(
    threads: usize,
    cache: &mut kernel::AlignedBuf,
    new: &[f32],
    g: usize,
    n: usize,
    dh: usize,
    len: usize,
    capacity: usize,
) -> Result<()> {
    let heads = &mut cache.as_mut_slice()[..g * capacity * dh];
    rows_mut(threads, heads, capacity * dh, &|r, chunk| {
        for (kv, dst) in r.zip(chunk.chunks_exact_mut(capacity * dh)) {
            dst[len * dh..][..n * dh].copy_from_slice(&new[kv * n * dh..][..n * dh]);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::cache::KvCache;
    use crate::model::config::{Act, Arch, NormKind, NormPlace, PosKind, RopeStyle};
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn cfg(heads: usize, kv_heads: usize, d_head: usize) -> ModelConfig {
        ModelConfig {
            arch: Arch::Llama,
            layers: 1,
            heads,
            kv_heads,
            d_model: heads * d_head,
            d_head,
            d_ff: 8,
            vocab: 10,
            context: 512,
            norm: NormKind::Rms,
            norm_place: NormPlace::Pre,
            norm_eps: 1e-5,
            act: Act::Silu,
            pos: PosKind::Rope {
                base: 10000.0,
                style: RopeStyle::Interleaved,
            },
            causal: true,
            tied_embeddings: false,
            details: Default::default(),
        }
    }

    /// Head h's attention for its query `i` of n (at position len + i) in f64, straight
    /// from the definition: the keys position len + i sees under `mask`.
    #[allow(clippy::too_many_arguments)]
    fn reference(
        c: &ModelConfig,
        q: &[f32],
        cache: &KvCache,
        n: usize,
        h: usize,
        i: usize,
        mask: &MaskKind,
    ) -> Vec<f64> {
        let (dh, r) = (c.d_head, c.heads / c.kv_heads);
        let (keys, values) = (cache.keys(0, h / r), cache.values(0, h / r));
        let pos = cache.len() - n + i;
        let sees = |j: usize| match mask {
            MaskKind::None => true,
            MaskKind::Causal => j <= pos,
            MaskKind::Window(w) => j <= pos && j + w > pos,
            MaskKind::WindowSinks { window, sinks } => j <= pos && (j + window > pos || j < *sinks),
            _ => unreachable!(),
        };
        let qi = &q[(h * n + i) * dh..][..dh];
        let scores: Vec<(usize, f64)> = (0..cache.len())
            .filter(|&j| sees(j))
            .map(|j| {
                let k = &keys[j * dh..][..dh];
                let dot: f64 = qi.iter().zip(k).map(|(&a, &b)| a as f64 * b as f64).sum();
                (j, dot * c.attn_scale())
            })
            .collect();
        let m = scores.iter().fold(f64::NEG_INFINITY, |m, s| m.max(s.1));
        let z: f64 = scores.iter().map(|s| (s.1 - m).exp()).sum();
        let mut out = vec![0.0; dh];
        for &(j, s) in &scores {
            let p = (s - m).exp() / z;
            for (o, &v) in out.iter_mut().zip(&values[j * dh..][..dh]) {
                *o += p * v as f64;
            }
        }
        out
    }

    #[test]
    fn steps_and_blocks_over_the_cache_match_the_definition_under_every_band_mask() {
        // r = 3 query heads per KV head, d_head 20 (V copied to aligned rows), 200 cached
        // keys: decode steps (one query: the stacked path, or per head with sinks) and a
        // block of 5 new queries, under masks whose window is shorter and longer than the
        // cache.
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let (heads, g, dh, capacity) = (6, 2, 20, 256);
        let c = cfg(heads, g, dh);
        let masks = [
            MaskKind::None,
            MaskKind::Causal,
            MaskKind::Window(50),
            MaskKind::Window(500),
            MaskKind::WindowSinks {
                window: 50,
                sinks: 4,
            },
        ];
        for n in [1, 5] {
            let mut cache = KvCache::new(1, g, dh, capacity);
            for (len, step) in [(0, 195), (195, n)] {
                let mut rows = |k: usize| -> Vec<f32> {
                    (0..k).map(|_| rng.random_range(-2.0f32..2.0)).collect()
                };
                let (kh, vh) = (rows(g * step * dh), rows(g * step * dh));
                append_kv(
                    2,
                    &mut cache.layers[0],
                    &kh,
                    &vh,
                    (g, step, dh),
                    len,
                    capacity,
                )
                .unwrap();
                cache.len = len + step;
            }
            let len = cache.len() - n;
            let q: Vec<f32> = (0..heads * n * dh)
                .map(|_| rng.random_range(-2.0f32..2.0))
                .collect();
            for mask in &masks {
                for threads in [1, 2] {
                    let kopts = KernelOptions {
                        threads: Some(threads),
                        ..KernelOptions::default()
                    };
                    let (out, lse) =
                        cached_attention(&c, &q, n, &cache.layers[0], len, capacity, mask, &kopts)
                            .unwrap();
                    assert_eq!((out.len(), lse.len()), (heads * n * dh, heads * n));
                    for h in 0..heads {
                        for i in 0..n {
                            let want = reference(&c, &q, &cache, n, h, i, mask);
                            let got = &out[(h * n + i) * dh..][..dh];
                            for (a, b) in got.iter().zip(&want) {
                                assert!(
                                    (*a as f64 - b).abs() < 1e-5,
                                    "{mask:?} n {n} head {h} query {i}: {a} vs {b}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}
