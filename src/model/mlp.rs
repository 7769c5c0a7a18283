//! The block's feed-forward part and its activations.
//!
//! Exact GELU needs erf, which Rust's std lacks: it comes from the `libm` crate (a port of
//! musl's / FreeBSD's `erf`, accurate to about 1 ulp in f64), evaluated in f64 and rounded
//! to f32, so its error is far below 1e-7.

use crate::error::Result;
use crate::model::config::Act;
use crate::model::gemm::linear;
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
            buf.pre_act.resize(n * ff, 0.0);
            buf.up.resize(n * ff, 0.0);
            buf.hidden.resize(n * ff, 0.0);
            linear(x, n, gate, &mut buf.pre_act, threads)?;
            linear(x, n, up, &mut buf.up, threads)?;
            for ((h, &g), &u) in buf.hidden.iter_mut().zip(&buf.pre_act).zip(&buf.up) {
                *h = activate(act, g) * u;
            }
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
}
