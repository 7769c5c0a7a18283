//! One attention problem's shape and options, shared by every path (reference, naive,
//! kernel): which K/V head a query head reads, the ALiBi bias, the scale.

use crate::attn::alibi::alibi_slopes;
use crate::attn::mask::Mask;
use crate::error::{Error, Result};

/// Shapes of Q [B,H,Nq,d], K [B,G,Nk,d] and V [B,G,Nk,dv].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProblemShape {
    pub batch: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub n_q: usize,
    pub n_k: usize,
    pub d: usize,
    pub dv: usize,
}

impl ProblemShape {
    /// Check that Q, K and V shapes (each [B,H,N,d]) fit together; the message names
    /// the tensors and says what would fit.
    pub fn from_dims(q: [usize; 4], k: [usize; 4], v: [usize; 4]) -> Result<Self> {
        let [b, h, n_q, d] = q;
        let [bk, g, n_k, dk] = k;
        let [bv, gv, n_v, dv] = v;
        if bk != b || bv != b {
            return Err(Error::usage(format!(
                "Q, K and V must have the same batch size; got Q {b}, K {bk}, V {bv}"
            )));
        }
        if dk != d {
            return Err(Error::usage(format!(
                "Q and K must have the same head dimension d; got Q d={d}, K d={dk}"
            )));
        }
        if gv != g || n_v != n_k {
            return Err(Error::usage(format!(
                "K and V must have the same heads and length; got K [{g} heads, {n_k} keys], V [{gv} heads, {n_v} keys]"
            )));
        }
        if g == 0 || h % g != 0 {
            return Err(Error::usage(format!(
                "Q has {h} heads and K/V {g}: the query heads must be a multiple of the KV heads (GQA/MQA)"
            )));
        }
        if [b, h, n_q, d, n_k, dv].contains(&0) {
            return Err(Error::usage(format!(
                "empty tensor: Q is {q:?}, K {k:?}, V {v:?}; every dimension must be at least 1"
            )));
        }
        Ok(ProblemShape {
            batch: b,
            heads: h,
            kv_heads: g,
            n_q,
            n_k,
            d,
            dv,
        })
    }

    /// The K/V head that query head `h` reads: h / (H / G).
    pub fn kv_head_for(&self, h: usize) -> usize {
        h / (self.heads / self.kv_heads)
    }
}

/// Options of one attention computation (RoPE is applied to q and k before it).
#[derive(Debug, Clone)]
pub struct AttnSpec {
    pub mask: Mask,
    /// ALiBi slopes per query head, if ALiBi is on.
    pub alibi: Option<Vec<f64>>,
    pub scale: f64,
}

impl AttnSpec {
    /// `scale` defaults to 1/sqrt(d).
    pub fn new(shape: &ProblemShape, mask: Mask, alibi: bool, scale: Option<f64>) -> Self {
        AttnSpec {
            mask,
            alibi: alibi.then(|| alibi_slopes(shape.heads)),
            scale: scale.unwrap_or(1.0 / (shape.d as f64).sqrt()),
        }
    }

    /// ALiBi's bias for head `h` and pair (i, j): -m_h * |i' - j|.
    pub fn alibi_bias(&self, h: usize, i: usize, j: usize) -> f64 {
        match &self.alibi {
            None => 0.0,
            Some(slopes) => {
                let dist = (self.mask.query_pos(i) - j as isize).unsigned_abs() as f64;
                -slopes[h] * dist
            }
        }
    }
}
