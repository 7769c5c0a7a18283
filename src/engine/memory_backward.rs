//! The HBM traffic of FlashAttention-2's backward pass, tile by tile, beside the
//! forward's ([`super::memory::tiled_traffic`]): the elements the loops of Dao 2023,
//! Algorithm 2 move between HBM and SRAM, in the order attnviz's kernel runs them (key
//! blocks outer, query blocks inner), and standard attention's backward (Dao et al.
//! 2022, Algorithm 3), which reads and writes N x N matrices.

use super::memory::{TiledShape, Traffic};
use crate::error::{Error, Result};

/// The backward's HBM traffic after each tile, in its loop order.
#[derive(Debug, Clone, PartialEq)]
pub struct BackwardTraffic {
    pub shape: TiledShape,
    /// Before the first tile: D = rowsum(dO * O) reads dO and O and writes D, and dQ is
    /// set to 0 in HBM (Algorithm 2, lines 3-4).
    pub start: Traffic,
    /// `after[k]`: everything moved up to and including the k-th tile (key blocks
    /// outer), start included; the last entry is the pass's total.
    pub after: Vec<Traffic>,
    /// The same loops with no tile skipped.
    pub dense: Traffic,
    /// Standard attention's backward on the same sizes (it reads P and writes dP, dS).
    pub standard: Traffic,
}

impl BackwardTraffic {
    pub fn total(&self) -> Traffic {
        self.after.last().copied().unwrap_or(self.start)
    }
}

/// The closed form of [`backward_traffic`]'s dense count, for the screen and docs: D and
/// dQ = 0 before the loops; K, V in and dK, dV out once per key block; Q, dO, L, D, dQ
/// in and dQ out on every one of the Tc x Tr tiles.
pub const BACKWARD_FORMULA: &str = "2 Nq dv + Nq (d + 1) + 2 Nk (d + dv) + Tc Nq (3d + dv + 2)";

/// Standard attention's backward (Dao et al. 2022, Algorithm 3), which materialises
/// P, dP and dS: dV = P^T dO reads P, dO and writes dV; dP = dO V^T reads dO, V and
/// writes dP; dS = P * (dP - D) reads P, dP and writes dS; dQ = dS K reads dS, K and
/// writes dQ; dK = dS^T Q reads dS, Q and writes dK.
pub fn standard_backward(s: &TiledShape) -> Traffic {
    let (nq, nk, d, dv) = (s.n_q, s.n_k, s.d, s.dv);
    let nn = nq * nk;
    Traffic {
        reads: (nn + nq * dv) + (nq * dv + nk * dv) + 2 * nn + (nn + nk * d) + (nn + nq * d),
        writes: nk * dv + nn + nn + nq * d + nk * d,
    }
}

/// Walk the backward tile by tile and count what it moves. `skipped(i, j)` says whether
/// the mask empties tile (query block i, key block j).
///
/// - Before the loops: D = rowsum(dO * O) reads dO and O (Nq dv each) and writes D (Nq);
///   dQ is set to 0 in HBM (Nq d writes).
/// - Each key block j (outer): K_j and V_j are loaded once at its first tile; dK_j and
///   dV_j stay on chip while the query blocks stream past and are written once after
///   its last tile, whatever the mask skipped (as the forward's FA1 walk loads K_j, V_j).
/// - Each tile (i, j) that is not skipped: Q_i, dO_i, L_i, D_i and dQ_i are loaded, and
///   dQ_i is written back (it sums over the key blocks in HBM). Algorithm 2 (line 8) also
///   loads O_i; nothing after D reads it, and attnviz's kernel does not.
pub fn backward_traffic(
    shape: &TiledShape,
    skipped: impl Fn(usize, usize) -> bool,
) -> Result<BackwardTraffic> {
    let s = shape;
    for (name, v) in [
        ("n_q", s.n_q),
        ("n_k", s.n_k),
        ("d", s.d),
        ("dv", s.dv),
        ("Br", s.br),
        ("Bc", s.bc),
    ] {
        if v == 0 {
            return Err(Error::usage(format!("{name} is 0; it must be at least 1")));
        }
    }
    let (tr, tc) = (s.tr(), s.tc());
    let tiles = tr
        .checked_mul(tc)
        .filter(|t| *t <= 1 << 24)
        .ok_or_else(|| {
            Error::usage(format!(
                "{tr} x {tc} tiles are too many to walk one by one; choose larger Br and Bc"
            ))
        })?;
    let start = Traffic {
        reads: 2 * s.n_q * s.dv,
        writes: s.n_q + s.n_q * s.d,
    };
    let (mut now, mut dense) = (start, start);
    let mut after = Vec::with_capacity(tiles as usize);
    for j in 0..tc {
        for i in 0..tr {
            let (rows, cols) = (s.rows(i), s.cols(j));
            let mut step = Traffic::default();
            if i == 0 {
                step.reads += cols * (s.d + s.dv);
            }
            if i + 1 == tr {
                step.writes += cols * (s.d + s.dv);
            }
            let tile = Traffic {
                reads: rows * (s.d + s.dv + 2 + s.d),
                writes: rows * s.d,
            };
            for (t, counted) in [
                (&mut now, !skipped(i as usize, j as usize)),
                (&mut dense, true),
            ] {
                t.reads += step.reads;
                t.writes += step.writes;
                if counted {
                    t.reads += tile.reads;
                    t.writes += tile.writes;
                }
            }
            after.push(now);
        }
    }
    Ok(BackwardTraffic {
        shape: *s,
        start,
        after,
        dense,
        standard: standard_backward(s),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(n: u64, d: u64, b: u64) -> TiledShape {
        TiledShape {
            n_q: n,
            n_k: n,
            d,
            dv: d,
            br: b,
            bc: b,
        }
    }

    #[test]
    fn dense_count_is_the_closed_form() {
        for (n, d, b) in [(16, 4, 4), (10, 3, 4), (64, 8, 16), (7, 2, 7)] {
            let s = shape(n, d, b);
            let t = backward_traffic(&s, |_, _| false).unwrap();
            let tc = n.div_ceil(b);
            let formula = 2 * n * d + n + n * d + 2 * n * (d + d) + tc * n * (3 * d + d + 2);
            assert_eq!(t.dense.total(), formula, "{n} {d} {b}");
            assert_eq!(t.total(), t.dense);
            assert_eq!(t.after.len() as u64, tc * n.div_ceil(b));
        }
    }

    #[test]
    fn skipped_tiles_move_only_their_key_blocks() {
        let s = shape(16, 4, 4);
        let causal = |i: usize, j: usize| j > i;
        let t = backward_traffic(&s, causal).unwrap();
        // 6 of 16 tiles skipped, each 4 rows x (3d + dv + 2) = 72 elements.
        assert_eq!(t.dense.total() - t.total().total(), 6 * 4 * (3 * 4 + 4 + 2));
        assert!(t.after.windows(2).all(|w| w[0].total() <= w[1].total()));
    }

    #[test]
    fn standard_backward_grows_with_n_squared() {
        let a = standard_backward(&shape(1024, 64, 64)).total();
        let b = standard_backward(&shape(2048, 64, 64)).total();
        assert!(b as f64 / a as f64 > 3.5, "{a} {b}");
        assert!(backward_traffic(&shape(0, 4, 4), |_, _| false).is_err());
    }
}
