//! The block's feed-forward part and its activations.
//!
//! Exact GELU needs erf, which Rust's std lacks: it comes from the `libm` crate (a port of
//! musl's / FreeBSD's `erf`, accurate to about 1 ulp in f64), evaluated in f64 and rounded
//! to f32, so its error is far below 1e-7.
//!
//! SiLU in a gated MLP (Llama's SwiGLU, d_ff values per token) runs vectorised on the
//! kernel's SIMD tier: sigmoid from the kernel's 2^x at a non-positive argument,
//! e = 2^(-|x| log2 e), sigmoid(x) = 1 / (1 + e) for x >= 0 and e / (1 + e) below, so no
//! value overflows; relative error about 2e-6 against [`activate`] for |x| < 16, growing
//! with |x| (the rounding of |x| log2 e) where silu(x) is below 1e-6 anyway (tested).

use pulp::{Simd, WithSimd};

use crate::error::Result;
use crate::kernel::Tier;
use crate::kernel::exp::exp2;
use crate::model::config::Act;
use crate::model::gemm::{linear, linears};
use crate::model::weights::Mlp;

/// The activation applied element-wise.
pub fn activate(act: Act, x: f32) -> f32 {
    match act {
        Act::Gelu => {
            let x = x as f64;
            (0.5 * x * (1.0 + libm::erf(x * std::f64::consts::FRAC_1_SQRT_2))) as f32
        }
        Act::GeluTanh => {
            // sqrt(2 / pi)
            const C: f64 = 0.797_884_560_802_865_4;
            let x = x as f64;
            (0.5 * x * (1.0 + (C * (x + 0.044715 * x * x * x)).tanh())) as f32
        }
        Act::Silu => x / (1.0 + (-x).exp()),
    }
}

/// Buffers of the MLP for n rows, reused across layers.
#[derive(Debug, Default)]
pub struct MlpBuffers {
    /// act(gate x) * up x, or act(up x): [n, d_ff]
    pub hidden: Vec<f32>,
    /// up x of a gated MLP before the product: [n, d_ff]
    pub up: Vec<f32>,
    /// gate x before the activation (gated), or up x before it (plain): [n, d_ff]
    pub pre_act: Vec<f32>,
}

/// out [n, d_model] = the MLP of x [n, d_model]; the intermediate values stay in `buf`.
pub fn mlp_forward(
    mlp: &Mlp,
    act: Act,
    x: &[f32],
    n: usize,
    buf: &mut MlpBuffers,
    out: &mut [f32],
    threads: usize,
) -> Result<()> {
    match mlp {
        Mlp::Gated { gate, up, down } => {
            let ff = gate.out_dim;
            buf.hidden.resize(n * ff, 0.0);
            linears(
                x,
                n,
                &[gate, up],
                &mut [&mut buf.pre_act, &mut buf.up],
                threads,
            )?;
            gated(act, &buf.pre_act, &buf.up, &mut buf.hidden);
            linear(&buf.hidden, n, down, out, threads)
        }
        Mlp::Plain { up, down } => {
            let ff = up.out_dim;
            buf.pre_act.resize(n * ff, 0.0);
            buf.hidden.resize(n * ff, 0.0);
            buf.up.clear();
            linear(x, n, up, &mut buf.pre_act, threads)?;
            for (h, &u) in buf.hidden.iter_mut().zip(&buf.pre_act) {
                *h = activate(act, u);
            }
            linear(&buf.hidden, n, down, out, threads)
        }
    }
}

/// hidden = act(gate) * up, element by element (SiLU vectorised, other activations scalar).
pub fn gated(act: Act, gate: &[f32], up: &[f32], hidden: &mut [f32]) {
    if act == Act::Silu {
        Tier::detect().dispatch(SiluMul { gate, up, hidden });
        return;
    }
    for ((h, &g), &u) in hidden.iter_mut().zip(gate).zip(up) {
        *h = activate(act, g) * u;
    }
}

struct SiluMul<'a> {
    gate: &'a [f32],
    up: &'a [f32],
    hidden: &'a mut [f32],
}

impl WithSimd for SiluMul<'_> {
    type Output = ();
    #[inline(always)]
    fn with_simd<S: Simd>(self, s: S) {
        let lanes = S::F32_LANES;
        let n = self.hidden.len().min(self.gate.len()).min(self.up.len());
        let minus_log2e = s.splat_f32s(-std::f32::consts::LOG2_E);
        let one = s.splat_f32s(1.0);
        let zero = s.splat_f32s(0.0);
        let mut i = 0;
        while i < n {
            let w = lanes.min(n - i);
            let g = s.partial_load_f32s(&self.gate[i..i + w]);
            let u = s.partial_load_f32s(&self.up[i..i + w]);
            let e = exp2(s, s.mul_f32s(s.abs_f32s(g), minus_log2e));
            let num = s.select_f32s(s.greater_than_or_equal_f32s(g, zero), one, e);
            let sig = s.div_f32s(num, s.add_f32s(one, e));
            s.partial_store_f32s(
                &mut self.hidden[i..i + w],
                s.mul_f32s(s.mul_f32s(g, sig), u),
            );
            i += w;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn activations_at_known_points() {
        // GELU(1) = 0.5 (1 + erf(1/sqrt 2)) = 0.8413447460685429
        assert!((activate(Act::Gelu, 1.0) as f64 - 0.841_344_746_068_542_9).abs() < 1e-7);
        assert!((activate(Act::Gelu, -3.0) as f64 + 0.004_049_694_094_890_31).abs() < 1e-8);
        // gelu_new(1) = 0.5 (1 + tanh(sqrt(2/pi) 1.044715)) = 0.8411919906082768
        assert!((activate(Act::GeluTanh, 1.0) as f64 - 0.841_191_990_608_276_8).abs() < 1e-7);
        // silu(2) = 2 / (1 + e^-2) = 1.7615941559557646
        assert!((activate(Act::Silu, 2.0) as f64 - 1.761_594_155_955_764_6).abs() < 1e-6);
        assert_eq!(activate(Act::Silu, -200.0), -0.0);
    }

    #[test]
    fn vector_silu_matches_the_scalar_one_on_every_tier_and_odd_lengths() {
        for tier in crate::kernel::available_tiers() {
            for n in [1usize, 7, 16, 17, 33, 250] {
                let gate: Vec<f32> = (0..n).map(|i| (i as f32 - n as f32 / 2.0) * 0.37).collect();
                let gate: Vec<f32> = gate
                    .iter()
                    .chain(&[-200.0, -88.0, -20.0, 0.0, 20.0, 90.0, 200.0])
                    .copied()
                    .collect();
                let up: Vec<f32> = (0..gate.len()).map(|i| 1.0 - 0.01 * i as f32).collect();
                let mut got = vec![f32::NAN; gate.len()];
                tier.dispatch(SiluMul {
                    gate: &gate,
                    up: &up,
                    hidden: &mut got,
                });
                for i in 0..gate.len() {
                    let g = gate[i] as f64;
                    let want = g / (1.0 + (-g).exp()) * up[i] as f64;
                    let err = (got[i] as f64 - want).abs();
                    // Rounding |x| log2 e to f32 costs |x| 6e-8 in the exponent: the
                    // relative error grows with |x| where silu(x) is already tiny.
                    let rel = 2e-6 * (1.0 + g.abs() / 16.0);
                    assert!(
                        err <= rel * want.abs() + 1e-30,
                        "{tier} n {n} at {i}: silu({g}) * {} = {} vs {want}",
                        up[i],
                        got[i]
                    );
                }
            }
        }
    }
}
