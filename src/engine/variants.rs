//! Variants of attention that trade its n x n cost for structure, each on the same
//! inputs as standard attention so a view can put them side by side:
//!
//! - sliding window (Mistral): the band, the receptive field that grows by W - 1
//!   positions per layer, and the rolling-buffer cache (position i lives in slot i mod W);
//! - BigBird (Zaheer et al. 2020): local + global + random blocks, counted cell by cell,
//!   and the tiles a tiled kernel can skip;
//! - linear attention (Katharopoulos et al. 2020) with phi(x) = elu(x) + 1: the
//!   d x dv state phi(K)^T V replaces the n x n matrix.
//!
//! Mask semantics come from [`Mask`], so these agree with the reference and the kernel.

use ndarray::{Array1, Array2, ArrayView2, Axis};

use crate::engine::config::{BigBird, MaskKind};
use crate::engine::mask::{Mask, TileClass};
use crate::engine::problem::{AttnSpec, ProblemShape};
use crate::engine::reference;
use crate::error::{Error, Result};

// ---------------------------------------------------------------------------------
// Tiles
// ---------------------------------------------------------------------------------

/// How the tiles of a mask classify for a tiled kernel ([`Mask::tile_class`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct TileCounts {
    pub br: usize,
    pub bc: usize,
    pub total: usize,
    /// Every pair masked: the kernel skips the tile.
    pub skipped: usize,
    pub full: usize,
    pub partial: usize,
}

/// Classify every Br x Bc tile of one (batch 0, head 0) score matrix; the last row and
/// column of tiles may be smaller.
pub fn tile_counts(mask: &Mask, br: usize, bc: usize) -> Result<TileCounts> {
    if br == 0 || bc == 0 {
        return Err(Error::usage(format!(
            "tile size {br} x {bc}: both sides must be at least 1"
        )));
    }
    let mut c = TileCounts {
        br,
        bc,
        total: 0,
        skipped: 0,
        full: 0,
        partial: 0,
    };
    for r0 in (0..mask.n_q()).step_by(br) {
        for c0 in (0..mask.n_k()).step_by(bc) {
            let rows = r0..(r0 + br).min(mask.n_q());
            let cols = c0..(c0 + bc).min(mask.n_k());
            c.total += 1;
            match mask.tile_class(0, 0, rows, cols) {
                TileClass::Empty => c.skipped += 1,
                TileClass::Full => c.full += 1,
                TileClass::Partial => c.partial += 1,
            }
        }
    }
    Ok(c)
}

// ---------------------------------------------------------------------------------
// Sliding window
// ---------------------------------------------------------------------------------

/// Positions one token's output can depend on after `layers` layers of window W
/// attention: each layer reaches W - 1 further back, so L (W - 1) + 1, at most n.
pub fn receptive_span(window: usize, layers: usize, n: usize) -> usize {
    layers
        .saturating_mul(window.saturating_sub(1))
        .saturating_add(1)
        .min(n)
}

/// The receptive field after one more layer.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerReach {
    /// 1 for the first layer.
    pub layer: usize,
    /// [`receptive_span`] for this layer: how far back the last token sees.
    pub span: usize,
    /// For each position i, the earliest position whose input reaches i.
    pub earliest: Vec<usize>,
    /// [n, n]: `reach[[i, j]]` if input j influences output i after `layer` layers,
    /// found by composing the band with the previous layer's reach.
    pub reach: Array2<bool>,
}

/// Where a rolling buffer of W slots stands after writing one position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BufferFrame {
    pub position: usize,
    /// position mod W.
    pub slot: usize,
    /// The position that slot held before (overwritten).
    pub evicted: Option<usize>,
    /// The position each slot holds now; `None` while the buffer fills.
    pub slots: Vec<Option<usize>>,
}

/// Slot of position i in a rolling buffer of W slots.
pub fn rolling_slot(position: usize, window: usize) -> usize {
    position % window
}

/// The rolling buffer after each of positions 0..n.
pub fn rolling_buffer(n: usize, window: usize) -> Result<Vec<BufferFrame>> {
    if window == 0 {
        return Err(Error::usage("a window of 0 sees no key; W must be >= 1"));
    }
    let mut slots = vec![None; window];
    Ok((0..n)
        .map(|position| {
            let slot = rolling_slot(position, window);
            let evicted = slots[slot].replace(position);
            BufferFrame {
                position,
                slot,
                evicted,
                slots: slots.clone(),
            }
        })
        .collect())
}

/// Sliding-window attention of W over n tokens, through `layers` layers.
#[derive(Debug, Clone, PartialEq)]
pub struct SlidingWindow {
    pub n: usize,
    pub window: usize,
    /// [n, n]: query i sees key j (i - W < j <= i).
    pub band: Array2<bool>,
    /// Pairs seen: sum over i of min(i + 1, W).
    pub seen: usize,
    /// One entry per layer, 1..=layers.
    pub layers: Vec<LayerReach>,
    pub buffer: Vec<BufferFrame>,
    /// Tiles of the band for a Br x Bc tiled kernel.
    pub tiles: TileCounts,
}

pub fn sliding_window(
    n: usize,
    window: usize,
    layers: usize,
    tile: (usize, usize),
) -> Result<SlidingWindow> {
    if n == 0 {
        return Err(Error::usage("the sequence is empty; n must be at least 1"));
    }
    let mask = Mask::resolve(&MaskKind::Window(window), 1, 1, n, n)?;
    let band = Array2::from_shape_fn((n, n), |(i, j)| !mask.is_masked(0, 0, i, j));
    // The keys each query's band sees, so composing layers costs n^2 W, not n^3.
    let sees: Vec<Vec<usize>> = band
        .outer_iter()
        .map(|row| (0..n).filter(|&k| row[k]).collect())
        .collect();
    let mut reach = band.clone();
    let mut per_layer = Vec::with_capacity(layers);
    for layer in 1..=layers {
        if layer > 1 {
            // Output i of this layer mixes the outputs k of the layer below that its
            // band sees; each of those carries what reached k.
            let below = reach;
            reach = Array2::from_shape_fn((n, n), |(i, j)| sees[i].iter().any(|&k| below[[k, j]]));
        }
        let earliest = reach
            .outer_iter()
            .map(|row| row.iter().position(|&x| x).unwrap_or(0))
            .collect();
        per_layer.push(LayerReach {
            layer,
            span: receptive_span(window, layer, n),
            earliest,
            reach: reach.clone(),
        });
    }
    Ok(SlidingWindow {
        n,
        window,
        seen: band.iter().filter(|&&x| x).count(),
        band,
        layers: per_layer,
        buffer: rolling_buffer(n, window)?,
        tiles: tile_counts(&mask, tile.0, tile.1)?,
    })
}

// ---------------------------------------------------------------------------------
// BigBird
// ---------------------------------------------------------------------------------

/// Why a BigBird cell is seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CellKind {
    Masked,
    /// In a global block's row or column (it sees, and is seen by, everything).
    Global,
    /// Within `window` blocks of the diagonal (and not global).
    Local,
    /// One of the seeded random blocks (neither global nor local).
    Random,
}

/// BigBird's pattern over n tokens with its counts.
#[derive(Debug, Clone, PartialEq)]
pub struct BigBirdPattern {
    pub config: BigBird,
    pub n: usize,
    /// [n, n]
    pub cells: Array2<CellKind>,
    pub global: usize,
    pub local: usize,
    pub random: usize,
    pub masked: usize,
    /// Seen cells / n^2.
    pub density: f64,
    pub tiles: TileCounts,
}

/// BigBird `config` over n tokens; tiles of Br x Bc.
pub fn bigbird_pattern(config: BigBird, n: usize, tile: (usize, usize)) -> Result<BigBirdPattern> {
    if n == 0 {
        return Err(Error::usage("the sequence is empty; n must be at least 1"));
    }
    let mask = Mask::resolve(&MaskKind::BigBird(config), 1, 1, n, n)?;
    let block = config.block.max(1);
    // The same block rules as the mask itself; cells the mask allows beyond them are
    // the random blocks.
    let cells = Array2::from_shape_fn((n, n), |(i, j)| {
        let (qb, kb) = (i / block, j / block);
        if mask.is_masked(0, 0, i, j) {
            CellKind::Masked
        } else if qb < config.globals || kb < config.globals {
            CellKind::Global
        } else if qb.abs_diff(kb) <= config.window {
            CellKind::Local
        } else {
            CellKind::Random
        }
    });
    let count = |k: CellKind| cells.iter().filter(|&&c| c == k).count();
    let masked = count(CellKind::Masked);
    Ok(BigBirdPattern {
        config,
        n,
        global: count(CellKind::Global),
        local: count(CellKind::Local),
        random: count(CellKind::Random),
        masked,
        density: (n * n - masked) as f64 / (n * n) as f64,
        cells,
        tiles: tile_counts(&mask, tile.0, tile.1)?,
    })
}

// ---------------------------------------------------------------------------------
// Linear attention
// ---------------------------------------------------------------------------------

/// The feature map of Katharopoulos et al. 2020: elu(x) + 1, which is x + 1 for x > 0
/// and e^x otherwise — always positive, so the normaliser never vanishes.
pub fn elu_plus_one(x: f64) -> f64 {
    if x > 0.0 { x + 1.0 } else { x.exp() }
}

/// phi applied to every element.
pub fn feature_map(x: ArrayView2<f64>) -> Array2<f64> {
    x.mapv(elu_plus_one)
}

/// Linear attention's result and the state it kept instead of an n x n matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct LinearAttention {
    /// [n_q, dv]
    pub out: Array2<f64>,
    /// [d, dv]: phi(K)^T V over all keys (causal: the prefix state after the last query).
    pub state: Array2<f64>,
    /// [d]: phi(K)^T 1, the normaliser's state.
    pub normaliser: Array1<f64>,
    /// Multiply-adds performed (an accumulation counts as one).
    pub madds: u64,
}

fn check_single_head(
    q: &ArrayView2<f64>,
    k: &ArrayView2<f64>,
    v: &ArrayView2<f64>,
) -> Result<ProblemShape> {
    let ((nq, d), (nk, dk), (nv, dv)) = (q.dim(), k.dim(), v.dim());
    ProblemShape::from_dims([1, 1, nq, d], [1, 1, nk, dk], [1, 1, nv, dv])
}

/// phi(Q) (phi(K)^T V) normalised by phi(Q) (phi(K)^T 1), in that order: the d x dv
/// state first, then each query against it — never an n x n matrix. With `causal`,
/// query i (bottom-right aligned at i' = i + Nk - Nq) uses the prefix sums of keys
/// j <= i'; a row with no key is zeros.
pub fn linear_attention(
    q: ArrayView2<f64>,
    k: ArrayView2<f64>,
    v: ArrayView2<f64>,
    causal: bool,
) -> Result<LinearAttention> {
    let sh = check_single_head(&q, &k, &v)?;
    let (pq, pk) = (feature_map(q), feature_map(k));
    let mut state = Array2::<f64>::zeros((sh.d, sh.dv));
    let mut normaliser = Array1::<f64>::zeros(sh.d);
    let mut madds = 0u64;
    // Fold key j into the state: S += phi(k_j)^T v_j, z += phi(k_j).
    let absorb = |j: usize, state: &mut Array2<f64>, z: &mut Array1<f64>| {
        let (kj, vj) = (pk.row(j), v.row(j));
        for (a, &ka) in kj.iter().enumerate() {
            z[a] += ka;
            for (b, &vb) in vj.iter().enumerate() {
                state[[a, b]] += ka * vb;
            }
        }
        (sh.d + sh.d * sh.dv) as u64
    };
    let mut absorbed = 0; // keys folded into the state so far
    if !causal {
        while absorbed < sh.n_k {
            madds += absorb(absorbed, &mut state, &mut normaliser);
            absorbed += 1;
        }
    }
    let mut out = Array2::zeros((sh.n_q, sh.dv));
    for i in 0..sh.n_q {
        if causal {
            // Query i stands at i' = i + Nk - Nq and sees keys 0..=i'.
            if i + sh.n_k < sh.n_q {
                continue; // no key at or before this query's position: zeros
            }
            let visible = i + sh.n_k + 1 - sh.n_q;
            while absorbed < visible {
                madds += absorb(absorbed, &mut state, &mut normaliser);
                absorbed += 1;
            }
        }
        let qi = pq.row(i);
        let denom: f64 = qi.dot(&normaliser);
        for (b, o) in out.row_mut(i).iter_mut().enumerate() {
            *o = qi.dot(&state.column(b)) / denom;
        }
        madds += (sh.d + sh.d * sh.dv) as u64;
    }
    Ok(LinearAttention {
        out,
        state,
        normaliser,
        madds,
    })
}

/// The same linear attention the quadratic way: A = phi(Q) phi(K)^T (n x n, causal pairs
/// zeroed), out = A V / row sums of A. Returns (out, A / row sums): the weights linear
/// attention implies, for display and for checking [`linear_attention`].
pub fn linear_attention_quadratic(
    q: ArrayView2<f64>,
    k: ArrayView2<f64>,
    v: ArrayView2<f64>,
    causal: bool,
) -> Result<(Array2<f64>, Array2<f64>)> {
    let sh = check_single_head(&q, &k, &v)?;
    let mut a = feature_map(q).dot(&feature_map(k).t());
    if causal {
        for ((i, j), x) in a.indexed_iter_mut() {
            if j + sh.n_q > i + sh.n_k {
                *x = 0.0;
            }
        }
    }
    for mut row in a.outer_iter_mut() {
        let sum = row.sum();
        if sum > 0.0 {
            row /= sum;
        }
    }
    Ok((a.dot(&v), a))
}

/// Linear and softmax attention on the same inputs.
#[derive(Debug, Clone, PartialEq)]
pub struct LinearVsSoftmax {
    pub causal: bool,
    pub n_q: usize,
    pub n_k: usize,
    pub d: usize,
    pub dv: usize,
    pub linear: LinearAttention,
    /// [n_q, n_k]: the weights linear attention implies, phi(q_i).phi(k_j) / sum_j. Only
    /// for display: `linear.out` is computed from the state and never forms them.
    pub linear_weights: Array2<f64>,
    /// softmax(scale Q K^T + mask) V by the reference path, [n_q, dv].
    pub softmax_out: Array2<f64>,
    /// [n_q, n_k]
    pub softmax_weights: Array2<f64>,
    /// max |linear - softmax|.
    pub max_abs_diff: f64,
    /// ||linear - softmax||_F / ||softmax||_F.
    pub rel_diff: f64,
    /// Linear attention's state: d x dv (plus a normaliser of d).
    pub state_elements: u64,
    pub normaliser_elements: u64,
    /// Softmax attention's matrix: n_q x n_k.
    pub matrix_elements: u64,
    pub linear_madds: u64,
    /// Softmax's multiply-adds: (d + dv) per seen (query, key) pair.
    pub softmax_madds: u64,
}

/// One head [n, w] as a [1, 1, n, w] tensor for the reference path.
fn as_4d(a: ArrayView2<'_, f64>) -> ndarray::ArrayView4<'_, f64> {
    a.insert_axis(Axis(0)).insert_axis(Axis(0))
}

/// Linear attention beside softmax attention (scale 1/sqrt(d) unless given; linear
/// attention has no scale, as in Katharopoulos et al.).
pub fn compare_linear(
    q: ArrayView2<f64>,
    k: ArrayView2<f64>,
    v: ArrayView2<f64>,
    causal: bool,
    scale: Option<f64>,
) -> Result<LinearVsSoftmax> {
    let sh = check_single_head(&q, &k, &v)?;
    let linear = linear_attention(q, k, v, causal)?;
    let (_, linear_weights) = linear_attention_quadratic(q, k, v, causal)?;
    let kind = if causal {
        MaskKind::Causal
    } else {
        MaskKind::None
    };
    let mask = Mask::resolve(&kind, 1, 1, sh.n_q, sh.n_k)?;
    let spec = AttnSpec::new(&sh, mask, false, scale);
    let soft = reference::attention(&sh, as_4d(q), as_4d(k), as_4d(v), &spec);
    let softmax_out = soft.out.slice(ndarray::s![0, 0, .., ..]).to_owned();
    // The weights from the reference's log-sum-exp: exp(score - lse), zero where masked.
    let softmax_weights = Array2::from_shape_fn((sh.n_q, sh.n_k), |(i, j)| {
        let lse = soft.lse[[0, 0, i]];
        if spec.mask.is_masked(0, 0, i, j) || lse == f64::NEG_INFINITY {
            0.0
        } else {
            (q.row(i).dot(&k.row(j)) * spec.scale - lse).exp()
        }
    });
    let seen = (0..sh.n_q)
        .map(|i| {
            (0..sh.n_k)
                .filter(|&j| !spec.mask.is_masked(0, 0, i, j))
                .count()
        })
        .sum::<usize>();
    let diff = &linear.out - &softmax_out;
    let norm = softmax_out.iter().map(|x| x * x).sum::<f64>().sqrt();
    let diff_norm = diff.iter().map(|x| x * x).sum::<f64>().sqrt();
    Ok(LinearVsSoftmax {
        causal,
        n_q: sh.n_q,
        n_k: sh.n_k,
        d: sh.d,
        dv: sh.dv,
        linear_madds: linear.madds,
        linear,
        linear_weights,
        softmax_out,
        softmax_weights,
        max_abs_diff: diff.iter().map(|x| x.abs()).fold(0.0, f64::max),
        rel_diff: if norm > 0.0 {
            diff_norm / norm
        } else {
            diff_norm
        },
        state_elements: (sh.d * sh.dv) as u64,
        normaliser_elements: sh.d as u64,
        matrix_elements: (sh.n_q * sh.n_k) as u64,
        softmax_madds: (seen * (sh.d + sh.dv)) as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_grow_by_w_minus_1_per_layer_capped_by_n() {
        assert_eq!(receptive_span(4, 1, 100), 4);
        assert_eq!(receptive_span(4, 3, 100), 10);
        assert_eq!(receptive_span(4, 50, 100), 100);
        assert_eq!(receptive_span(1, 9, 100), 1);
        // Mistral 7B: 32 layers of W = 4096.
        assert_eq!(receptive_span(4096, 32, 1 << 20), 131_041);
    }

    #[test]
    fn rolling_buffer_fills_then_overwrites() {
        let frames = rolling_buffer(5, 2).unwrap();
        assert_eq!(frames[1].slots, [Some(0), Some(1)]);
        assert_eq!((frames[2].slot, frames[2].evicted), (0, Some(0)));
        assert_eq!(frames[4].slots, [Some(4), Some(3)]);
        assert!(rolling_buffer(3, 0).is_err());
    }

    #[test]
    fn elu_plus_one_is_positive_and_continuous() {
        assert_eq!(elu_plus_one(0.0), 1.0);
        assert_eq!(elu_plus_one(2.0), 3.0);
        assert!((elu_plus_one(-1.0) - (-1f64).exp()).abs() < 1e-15);
        assert!(elu_plus_one(-50.0) > 0.0);
    }
}
