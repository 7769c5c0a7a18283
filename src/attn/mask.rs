//! Mask semantics, shared by the reference path, the naive path and the kernel.
//!
//! A [`Mask`] is a [`MaskKind`] resolved against concrete shapes (batch, heads, Nq, Nk).
//! Everything about which query sees which key lives here, so every path agrees:
//! causal and window are bottom-right aligned (query i stands at position
//! i' = i + Nk - Nq), a window may keep its first S keys visible (attention sinks), padding masks keys j >= L_b, BigBird is a seeded block pattern,
//! and a file mask is either a 0/1 keep-mask or additive biases.

use std::ops::Range;

use std::sync::Arc;

use ndarray::{Array2, Array3, Array4, ArrayD, Axis, Ix4};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::attn::config::{BigBird, MaskKind};
use crate::error::{Error, Result};

/// Seed of BigBird's random blocks: fixed, so a pattern is the same on every run and
/// platform for the same shapes.
pub const BIGBIRD_SEED: u64 = 0xB16B_12D5;

/// What a mask does to one rectangular tile of the score matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TileClass {
    /// Every (query, key) pair is masked: the tile need not be computed at all.
    Empty,
    /// No pair is masked and no (shifted) bias applies.
    Full,
    /// Some pairs masked or biased: apply [`Mask::shifted_bias`] element by element.
    Partial,
}

#[derive(Debug, Clone)]
enum Rule {
    None,
    Causal,
    /// Keys i' - w < j <= i', and j < sinks with j <= i'.
    Window {
        w: usize,
        sinks: usize,
    },
    Padding(Vec<usize>),
    /// allowed[query block, key block]; query blocks count from position 0 (i').
    Blocks {
        block: usize,
        allowed: Array2<bool>,
    },
    /// [Bm, Hm, Nq, Nk], Bm in {1, B}, Hm in {1, H}; values 0 or -inf or any bias; and
    /// per row [Bm, Hm, Nq] its largest finite bias (0 for a row with none), the shift
    /// the paths subtract (see [`Mask::row_shift`]). Shared, so a clone is cheap.
    Additive {
        biases: Arc<Array4<f64>>,
        shifts: Arc<Array3<f64>>,
        /// The largest |shift|.
        max_shift: f64,
    },
}

/// The keys one query row sees under a band mask (none, causal, window, padding): the
/// keys in `keys`, and those below `sinks` that come before `keys.end` (a window's
/// attention sinks; 0 for the other masks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Band {
    pub keys: Range<usize>,
    pub sinks: usize,
}

impl Band {
    pub fn contains(&self, j: usize) -> bool {
        j < self.keys.end && (j >= self.keys.start || j < self.sinks)
    }

    /// The sinks the row sees outside `keys`: 0..min(sinks, keys.start).
    pub fn sink_keys(&self) -> Range<usize> {
        0..self.sinks.min(self.keys.start)
    }

    /// The smallest range holding every key the row sees.
    pub fn span(&self) -> Range<usize> {
        if self.sink_keys().is_empty() {
            self.keys.clone()
        } else {
            0..self.keys.end
        }
    }
}

/// A mask resolved for one problem shape.
#[derive(Debug, Clone)]
pub struct Mask {
    rule: Rule,
    kind: MaskKind,
    batch: usize,
    heads: usize,
    n_q: usize,
    n_k: usize,
}

impl Mask {
    /// Resolve `kind` for `batch` x `heads` problems of `n_q` queries and `n_k` keys.
    /// Checks that padding lengths match the batch and that a file mask has a shape
    /// that broadcasts to [batch, heads, n_q, n_k].
    pub fn resolve(
        kind: &MaskKind,
        batch: usize,
        heads: usize,
        n_q: usize,
        n_k: usize,
    ) -> Result<Mask> {
        let rule = match kind {
            MaskKind::None => Rule::None,
            MaskKind::Causal => Rule::Causal,
            MaskKind::Window(0) | MaskKind::WindowSinks { window: 0, .. } => {
                return Err(Error::usage(
                    "--mask window:0 sees no key at all; W must be >= 1",
                ));
            }
            MaskKind::Window(w) => Rule::Window { w: *w, sinks: 0 },
            MaskKind::WindowSinks { window, sinks } => Rule::Window {
                w: *window,
                sinks: *sinks,
            },
            MaskKind::Padding(lens) => {
                if lens.len() != batch {
                    return Err(Error::usage(format!(
                        "--mask padding gives {} length(s) but the batch has {batch} sequence(s); give one valid length per sequence",
                        lens.len()
                    )));
                }
                if let Some(l) = lens.iter().find(|&&l| l > n_k) {
                    return Err(Error::usage(format!(
                        "--mask padding length {l} is longer than the {n_k} keys; each length must be <= {n_k}"
                    )));
                }
                Rule::Padding(lens.clone())
            }
            MaskKind::BigBird(bb) => bigbird_rule(bb, n_q, n_k),
            MaskKind::File(path) => {
                let data = crate::attn::npy::read_f64(path)?;
                let biases = file_mask(path, data, batch, heads, n_q, n_k)?;
                let shifts = biases.map_axis(Axis(3), |row| {
                    row.iter()
                        .copied()
                        .filter(|b| b.is_finite())
                        .fold(None, |m: Option<f64>, b| Some(m.map_or(b, |m| m.max(b))))
                        .unwrap_or(0.0)
                });
                let max_shift = shifts.iter().fold(0.0, |m: f64, s| m.max(s.abs()));
                Rule::Additive {
                    biases: Arc::new(biases),
                    shifts: Arc::new(shifts),
                    max_shift,
                }
            }
        };
        Ok(Mask {
            rule,
            kind: kind.clone(),
            batch,
            heads,
            n_q,
            n_k,
        })
    }

    pub fn kind(&self) -> &MaskKind {
        &self.kind
    }

    pub fn n_q(&self) -> usize {
        self.n_q
    }

    pub fn n_k(&self) -> usize {
        self.n_k
    }

    pub fn batch(&self) -> usize {
        self.batch
    }

    pub fn heads(&self) -> usize {
        self.heads
    }

    /// Position of query row `i` on the key axis (bottom-right alignment).
    pub fn query_pos(&self, i: usize) -> isize {
        i as isize + self.n_k as isize - self.n_q as isize
    }

    /// The additive bias of pair (i, j) for batch entry `b` and head `h`:
    /// 0 where the key is seen, -inf where it is masked, or a file's bias.
    pub fn bias(&self, b: usize, h: usize, i: usize, j: usize) -> f64 {
        let p = self.query_pos(i);
        let j_ = j as isize;
        let seen = match &self.rule {
            Rule::None => true,
            Rule::Causal => j_ <= p,
            Rule::Window { w, sinks } => j_ <= p && (j_ > p - *w as isize || j < *sinks),
            Rule::Padding(lens) => j < lens[b],
            Rule::Blocks { block, allowed } => p >= 0 && allowed[[p as usize / block, j / block]],
            Rule::Additive { biases: a, .. } => {
                let bb = if a.dim().0 == 1 { 0 } else { b };
                let hh = if a.dim().1 == 1 { 0 } else { h };
                return a[[bb, hh, i, j]];
            }
        };
        if seen { 0.0 } else { f64::NEG_INFINITY }
    }

    /// The constant every path subtracts from the biases of row `i` before the softmax
    /// and adds back to its log-sum-exp: the row's largest finite bias, for a file mask
    /// (0 for every other mask, and for a row with no finite bias). The softmax of a row
    /// is the same after any constant shift, and after this one every bias is in
    /// [-inf, 0]: a row whose biases are all huge (e.g. -3e38, the float32 minimum that
    /// PyTorch masks with) keeps its real distribution instead of overflowing to a row
    /// that looks fully masked.
    pub fn row_shift(&self, b: usize, h: usize, i: usize) -> f64 {
        match &self.rule {
            Rule::Additive { shifts, .. } => {
                let bb = if shifts.dim().0 == 1 { 0 } else { b };
                let hh = if shifts.dim().1 == 1 { 0 } else { h };
                shifts[[bb, hh, i]]
            }
            _ => 0.0,
        }
    }

    /// [`Mask::bias`] minus [`Mask::row_shift`]: what the paths add to a score. In
    /// [-inf, 0] for a file mask.
    pub fn shifted_bias(&self, b: usize, h: usize, i: usize, j: usize) -> f64 {
        match &self.rule {
            Rule::Additive { .. } => self.bias(b, h, i, j) - self.row_shift(b, h, i),
            _ => self.bias(b, h, i, j),
        }
    }

    /// The largest |row shift| of any row: what the shifts add to a log-sum-exp.
    pub fn max_row_shift(&self) -> f64 {
        match &self.rule {
            Rule::Additive { max_shift, .. } => *max_shift,
            _ => 0.0,
        }
    }

    /// The keys that row `i` of batch entry `b` sees, as a [`Band`], for the masks that
    /// are a band (none, causal, window, padding); None for block-sparse and file masks.
    /// Agrees with [`Mask::bias`]: 0 for the keys the band holds, -inf for the others.
    /// The kernel uses it to mask a tile lane-wise instead of element by element.
    pub fn band(&self, b: usize, i: usize) -> Option<Band> {
        let p = self.query_pos(i);
        let clamp = |x: isize| x.clamp(0, self.n_k as isize) as usize;
        let keys = match &self.rule {
            Rule::None => 0..self.n_k,
            Rule::Causal => 0..clamp(p + 1),
            Rule::Window { w, .. } => clamp(p + 1 - *w as isize)..clamp(p + 1),
            Rule::Padding(lens) => 0..lens[b],
            Rule::Blocks { .. } | Rule::Additive { .. } => return None,
        };
        Some(Band {
            keys,
            sinks: self.sinks(),
        })
    }

    /// The first keys a window keeps visible to every later query (0 for the other masks).
    pub fn sinks(&self) -> usize {
        match &self.rule {
            Rule::Window { sinks, .. } => *sinks,
            _ => 0,
        }
    }

    /// True if pair (i, j) is masked out entirely.
    pub fn is_masked(&self, b: usize, h: usize, i: usize, j: usize) -> bool {
        self.bias(b, h, i, j) == f64::NEG_INFINITY
    }

    /// Classify the tile `rows` x `cols` (non-empty ranges) for batch `b`, head `h`.
    pub fn tile_class(
        &self,
        b: usize,
        h: usize,
        rows: Range<usize>,
        cols: Range<usize>,
    ) -> TileClass {
        debug_assert!(!rows.is_empty() && !cols.is_empty());
        let (r0, r1) = (self.query_pos(rows.start), self.query_pos(rows.end - 1));
        let (c0, c1) = (cols.start as isize, cols.end as isize - 1);
        match &self.rule {
            Rule::None => TileClass::Full,
            Rule::Causal => {
                if c0 > r1 {
                    TileClass::Empty
                } else if c1 <= r0 {
                    TileClass::Full
                } else {
                    TileClass::Partial
                }
            }
            Rule::Window { w, sinks } => {
                let (w, s) = (*w as isize, *sinks as isize);
                // Some pair is a sink when the tile's first key is one and some row reaches it.
                let sink_seen = c0 < s && c0 <= r1;
                // Every pair seen: all keys causal for every row, and each key a sink or,
                // from the first non-sink key on, inside every row's window.
                let all_seen = c1 <= r0 && (c1 < s || c0.max(s) > r1 - w);
                if c0 > r1 || (c1 <= r0 - w && !sink_seen) {
                    TileClass::Empty
                } else if all_seen {
                    TileClass::Full
                } else {
                    TileClass::Partial
                }
            }
            Rule::Padding(lens) => {
                let l = lens[b];
                if cols.start >= l {
                    TileClass::Empty
                } else if cols.end <= l {
                    TileClass::Full
                } else {
                    TileClass::Partial
                }
            }
            Rule::Blocks { block, allowed } => {
                // One look per (query block, key block) cell the tile touches instead of
                // one per element: every touched cell holds at least one of its pairs.
                if r1 < 0 {
                    return TileClass::Empty;
                }
                let (mut any, mut all) = (false, r0 >= 0);
                for qb in r0.max(0) as usize / block..=r1 as usize / block {
                    for kb in cols.start / block..=(cols.end - 1) / block {
                        let seen = allowed[[qb, kb]];
                        any |= seen;
                        all &= seen;
                    }
                }
                match (any, all) {
                    (false, _) => TileClass::Empty,
                    (true, true) => TileClass::Full,
                    (true, false) => TileClass::Partial,
                }
            }
            Rule::Additive { .. } => self.scan_tile(b, h, rows, cols),
        }
    }

    /// The class of a tile from its elements' shifted biases (what the paths add).
    fn scan_tile(&self, b: usize, h: usize, rows: Range<usize>, cols: Range<usize>) -> TileClass {
        let (mut any_seen, mut all_plain) = (false, true);
        for i in rows {
            for j in cols.clone() {
                let v = self.shifted_bias(b, h, i, j);
                any_seen |= v != f64::NEG_INFINITY;
                all_plain &= v == 0.0;
            }
        }
        match (any_seen, all_plain) {
            (false, _) => TileClass::Empty,
            (true, true) => TileClass::Full,
            (true, false) => TileClass::Partial,
        }
    }

    /// The full [Nq, Nk] bias matrix of one (batch, head), for views and small problems.
    pub fn bias_matrix(&self, b: usize, h: usize) -> Array2<f64> {
        Array2::from_shape_fn((self.n_q, self.n_k), |(i, j)| self.bias(b, h, i, j))
    }
}

fn bigbird_rule(bb: &BigBird, n_q: usize, n_k: usize) -> Rule {
    let block = bb.block.max(1);
    let nbq = n_k.max(n_q).div_ceil(block).max(1);
    let nbk = n_k.div_ceil(block).max(1);
    let mut allowed = Array2::from_elem((nbq, nbk), false);
    for qb in 0..nbq {
        for kb in 0..nbk {
            let local = qb.abs_diff(kb) <= bb.window;
            let global = kb < bb.globals || qb < bb.globals;
            allowed[[qb, kb]] = local || global;
        }
        // `random` distinct extra key blocks per query block, from a seeded stream of
        // its own so that changing one row never moves another's links.
        let mut rng = ChaCha8Rng::seed_from_u64(
            BIGBIRD_SEED ^ (qb as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
        );
        let candidates: Vec<usize> = (0..nbk).filter(|&kb| !allowed[[qb, kb]]).collect();
        let mut pool = candidates;
        for _ in 0..bb.random.min(pool.len()) {
            let pick = rng.random_range(0..pool.len());
            let kb = pool.swap_remove(pick);
            allowed[[qb, kb]] = true;
        }
    }
    Rule::Blocks { block, allowed }
}

fn file_mask(
    path: &std::path::Path,
    data: ArrayD<f64>,
    batch: usize,
    heads: usize,
    n_q: usize,
    n_k: usize,
) -> Result<Array4<f64>> {
    let shape = data.shape().to_vec();
    let want =
        format!("[{n_q},{n_k}], [1|{heads},{n_q},{n_k}] or [1|{batch},1|{heads},{n_q},{n_k}]");
    let bad = || Error::file(path, format!("mask has shape {shape:?}; expected {want}"));
    let data4 = match shape.len() {
        2 => data
            .into_shape_with_order((1, 1, shape[0], shape[1]))
            .map_err(|_| bad())?,
        3 => data
            .into_shape_with_order((1, shape[0], shape[1], shape[2]))
            .map_err(|_| bad())?,
        4 => data.into_dimensionality::<Ix4>().map_err(|_| bad())?,
        _ => return Err(bad()),
    };
    let (bm, hm, nq, nk) = data4.dim();
    if nq != n_q || nk != n_k || !(bm == 1 || bm == batch) || !(hm == 1 || hm == heads) {
        return Err(bad());
    }
    if let Some(v) = data4.iter().find(|v| v.is_nan() || **v == f64::INFINITY) {
        return Err(Error::file(
            path,
            format!("mask holds {v}; use 0/1 or finite biases and -inf"),
        ));
    }
    // A 0/1 array with at least one 1 is a keep-mask; anything else is additive, so an
    // all-zero array adds nothing (as an additive mask of zeros should).
    let is_keep_mask =
        data4.iter().all(|&v| v == 0.0 || v == 1.0) && data4.iter().any(|&v| v == 1.0);
    Ok(if is_keep_mask {
        data4.mapv(|v| if v == 1.0 { 0.0 } else { f64::NEG_INFINITY })
    } else {
        data4
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mask(kind: &str, nq: usize, nk: usize) -> Mask {
        Mask::resolve(&kind.parse().unwrap(), 1, 1, nq, nk).unwrap()
    }

    #[test]
    fn causal_is_bottom_right_aligned() {
        let m = mask("causal", 2, 4);
        // query 0 stands at key position 2
        assert!(!m.is_masked(0, 0, 0, 2));
        assert!(m.is_masked(0, 0, 0, 3));
        assert!(!m.is_masked(0, 0, 1, 3));
    }

    #[test]
    fn window_sees_itself_and_w_minus_1_before() {
        let m = mask("window:2", 5, 5);
        let seen: Vec<usize> = (0..5).filter(|&j| !m.is_masked(0, 0, 3, j)).collect();
        assert_eq!(seen, vec![2, 3]);
        let wide = mask("window:9", 5, 5);
        let causal = mask("causal", 5, 5);
        assert_eq!(wide.bias_matrix(0, 0), causal.bias_matrix(0, 0));
    }

    #[test]
    fn tile_classes_agree_with_elements() {
        for kind in [
            "none",
            "causal",
            "window:3",
            "window:3,1",
            "window:2,3",
            "window:1,5",
            "window:9,2",
            "bigbird:1,1,1,2",
            "bigbird:0,1,2,3",
            "bigbird:1,0,1,1",
        ] {
            for (nq, nk) in [(7, 7), (5, 9), (9, 5), (12, 4)] {
                let m = mask(kind, nq, nk);
                for r0 in 0..nq {
                    for c0 in 0..nk {
                        let rows = r0..(r0 + 3).min(nq);
                        let cols = c0..(c0 + 2).min(nk);
                        let fast = m.tile_class(0, 0, rows.clone(), cols.clone());
                        let slow = m.scan_tile(0, 0, rows, cols);
                        assert_eq!(fast, slow, "{kind} {nq}x{nk} at ({r0},{c0})");
                    }
                }
            }
        }
    }

    #[test]
    fn bands_agree_with_bias() {
        for kind in [
            "none",
            "causal",
            "window:1",
            "window:3",
            "window:1,1",
            "window:3,2",
            "window:2,6",
            "padding:4,0",
        ] {
            for (nq, nk) in [(7, 7), (5, 9), (9, 5)] {
                let m = Mask::resolve(&kind.parse().unwrap(), 2, 1, nq, nk.max(4)).unwrap();
                for b in 0..2 {
                    for i in 0..nq {
                        let band = m.band(b, i).unwrap();
                        let span = band.span();
                        for j in 0..m.n_k() {
                            let seen = !m.is_masked(b, 0, i, j);
                            let at = format!("{kind} {nq}x{nk} b{b} ({i},{j})");
                            assert_eq!(seen, band.contains(j), "{at}");
                            assert_eq!(
                                seen,
                                band.keys.contains(&j) || band.sink_keys().contains(&j),
                                "{at}"
                            );
                            assert!(!seen || span.contains(&j), "{at}");
                        }
                    }
                }
            }
        }
        assert!(mask("bigbird:1,1,1,2", 4, 4).band(0, 0).is_none());
    }

    #[test]
    fn a_window_with_sinks_keeps_the_first_keys_in_sight() {
        let m = mask("window:2,1", 6, 6);
        let seen: Vec<usize> = (0..6).filter(|&j| !m.is_masked(0, 0, 4, j)).collect();
        assert_eq!(seen, vec![0, 3, 4]);
        // Query 0 sees only itself: the sinks stay causal.
        let first: Vec<usize> = (0..6).filter(|&j| !m.is_masked(0, 0, 0, j)).collect();
        assert_eq!(first, vec![0]);
        // As many sinks as keys, or a window as long as the sequence, is the causal mask.
        let causal = mask("causal", 6, 6).bias_matrix(0, 0);
        assert_eq!(mask("window:1,6", 6, 6).bias_matrix(0, 0), causal);
        assert_eq!(mask("window:6,2", 6, 6).bias_matrix(0, 0), causal);
        // Tiles beyond the window are still skipped; the one holding the sink is not.
        let m = mask("window:4,1", 32, 32);
        assert_eq!(m.tile_class(0, 0, 24..32, 0..8), TileClass::Partial);
        assert_eq!(m.tile_class(0, 0, 24..32, 8..16), TileClass::Empty);
        assert_eq!(m.tile_class(0, 0, 24..32, 0..1), TileClass::Full);
    }

    #[test]
    fn padding_length_must_match_batch() {
        let err = Mask::resolve(&"padding:3".parse().unwrap(), 2, 1, 4, 4).unwrap_err();
        assert!(err.to_string().contains("batch has 2"));
    }
}
