//! The block's feed-forward part and its activations.
//!
//! Exact GELU needs erf, which Rust's std lacks: it comes from the `libm` crate (a port of
//! musl's / FreeBSD's `erf`, accurate to about 1 ulp in f64), evaluated in f64 and rounded
//! to f32, so its error is far below 1e-7.
//!
//! SiLU and GELU's tanh form (d_ff values per token, gated or not) run vectorised on the
//! kernel's SIMD tier, both as x sigmoid(z): SiLU with z = x, and since
//! 0.5 (1 + tanh(u)) = sigmoid(2u), GELU-tanh with z = 2 sqrt(2/pi) (x + 0.044715 x^3).
//! The sigmoid comes from the kernel's 2^x at a non-positive argument,
//! e = 2^(-|z| log2 e), sigmoid(z) = 1 / (1 + e) for z >= 0 and e / (1 + e) below, so no
//! value overflows; relative error about 2e-6 against [`activate`] for |z| < 16, growing
//! with |z| (the rounding of |z| log2 e) where the sigmoid is below 1e-6 anyway (tested).

use pulp::{Simd, WithSimd};

use crate::error::Result;
use crate::kernel::Tier;
use crate::kernel::exp::exp2;
use crate::model::config::Act;
use crate::model::gemm::{linear, linears};
use crate::model::rows::rows_mut;
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
            activated_rows(
                threads,
                act,
                &buf.pre_act,
                Some(&buf.up),
                ff,
                &mut buf.hidden,
            )?;
            linear(&buf.hidden, n, down, out, threads)
        }
        Mlp::Plain { up, down } => {
            let ff = up.out_dim;
            buf.pre_act.resize(n * ff, 0.0);
            buf.hidden.resize(n * ff, 0.0);
            buf.up.clear();
            linear(x, n, up, &mut buf.pre_act, threads)?;
            activated_rows(threads, act, &buf.pre_act, None, ff, &mut buf.hidden)?;
            linear(&buf.hidden, n, down, out, threads)
        }
    }
}

/// hidden [n, ff] = act(x) (* up when given), its rows shared out over the team.
fn activated_rows(
    threads: usize,
    act: Act,
    x: &[f32],
    up: Option<&[f32]>,
    ff: usize,
    hidden: &mut [f32],
) -> Result<()> {
    rows_mut(threads, hidden, ff, &|r, h| {
        let span = r.start * ff..r.end * ff;
        activated(act, &x[span.clone()], up.map(|u| &u[span]), h);
    })
}

/// hidden = act(x) (* up when given), element by element.
fn activated(act: Act, x: &[f32], up: Option<&[f32]>, hidden: &mut [f32]) {
    let form = match act {
        Act::Silu => SigmoidForm::Silu,
        Act::GeluTanh => SigmoidForm::GeluTanh,
        Act::Gelu => {
            match up {
                Some(up) => {
                    for ((h, &g), &u) in hidden.iter_mut().zip(x).zip(up) {
                        *h = activate(act, g) * u;
                    }
                }
                None => {
                    for (h, &g) in hidden.iter_mut().zip(x) {
                        *h = activate(act, g);
                    }
                }
            }
            return;
        }
    };
    Tier::detect().dispatch(SigmoidMul {
        form,
        gate: x,
        up,
        hidden,
    });
}

/// Which activation x sigmoid(z) computes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum SigmoidForm {
    /// z = x
    Silu,
    /// z = 2 sqrt(2/pi) (x + 0.044715 x^3)
    GeluTanh,
}

struct SigmoidMul<'a> {
    form: SigmoidForm,
    gate: &'a [f32],
    up: Option<&'a [f32]>,
    hidden: &'a mut [f32],
}

impl WithSimd for SigmoidMul<'_> {
    type Output = ();
    #[inline(always)]
    fn with_simd<S: Simd>(self, s: S) {
        let lanes = S::F32_LANES;
        let n = self
            .hidden
            .len()
            .min(self.gate.len())
            .min(self.up.map_or(usize::MAX, <[f32]>::len));
        let minus_log2e = s.splat_f32s(-std::f32::consts::LOG2_E);
        let one = s.splat_f32s(1.0);
        let zero = s.splat_f32s(0.0);
        // 2 sqrt(2 / pi), and 0.044715 times it
        let c1 = s.splat_f32s(1.595_769_121_605_730_7_f64 as f32);
        let c3 = s.splat_f32s(0.071_354_816_272_869_33_f64 as f32);
        let mut i = 0;
        while i < n {
            let w = lanes.min(n - i);
            let g = s.partial_load_f32s(&self.gate[i..i + w]);
            let z = match self.form {
                SigmoidForm::Silu => g,
                SigmoidForm::GeluTanh => {
                    let g2 = s.mul_f32s(g, g);
                    s.mul_f32s(g, s.mul_add_f32s(c3, g2, c1))
                }
            };
            let e = exp2(s, s.mul_f32s(s.abs_f32s(z), minus_log2e));
            let num = s.select_f32s(s.greater_than_or_equal_f32s(z, zero), one, e);
            let sig = s.div_f32s(num, s.add_f32s(one, e));
            let mut y = s.mul_f32s(g, sig);
            if let Some(up) = self.up {
                y = s.mul_f32s(y, s.partial_load_f32s(&up[i..i + w]));
            }
            s.partial_store_f32s(&mut self.hidden[i..i + w], y);
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
    fn vector_activations_match_the_f64_ones_on_every_tier_and_odd_lengths() {
        // sqrt(2 / pi)
        const C: f64 = 0.797_884_560_802_865_4;
        let sigmoid_arg = |act: Act, g: f64| match act {
            Act::Silu => g,
            _ => 2.0 * C * (g + 0.044715 * g * g * g),
        };
        for act in [Act::Silu, Act::GeluTanh] {
            for tier in crate::kernel::available_tiers() {
                for n in [1usize, 7, 16, 17, 33, 250] {
                    let gate: Vec<f32> =
                        (0..n).map(|i| (i as f32 - n as f32 / 2.0) * 0.37).collect();
                    let gate: Vec<f32> = gate
                        .iter()
                        .chain(&[-1e20, -200.0, -88.0, -20.0, 0.0, 20.0, 90.0, 200.0, 1e20])
                        .copied()
                        .collect();
                    let up: Vec<f32> = (0..gate.len()).map(|i| 1.0 - 0.01 * i as f32).collect();
                    for gated in [true, false] {
                        let mut got = vec![f32::NAN; gate.len()];
                        tier.dispatch(SigmoidMul {
                            form: match act {
                                Act::Silu => SigmoidForm::Silu,
                                _ => SigmoidForm::GeluTanh,
                            },
                            gate: &gate,
                            up: gated.then_some(&up[..]),
                            hidden: &mut got,
                        });
                        for i in 0..gate.len() {
                            let g = gate[i] as f64;
                            let u = if gated { up[i] as f64 } else { 1.0 };
                            let z = sigmoid_arg(act, g);
                            let want = g / (1.0 + (-z).exp()) * u;
                            let err = (got[i] as f64 - want).abs();
                            // Rounding |z| log2 e to f32 costs |z| 6e-8 in the exponent:
                            // the relative error grows with |z| where the sigmoid is
                            // already tiny.
                            let rel = 2e-6 * (1.0 + z.abs().min(1e3) / 16.0);
                            assert!(
                                err <= rel * want.abs() + 1e-30,
                                "{tier} {act:?} n {n} at {i}: act({g}) * {u} = {} vs {want}",
                                got[i]
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn the_vector_forms_agree_with_activate() {
        for act in [Act::Silu, Act::GeluTanh, Act::Gelu] {
            let x: Vec<f32> = (0..301).map(|i| (i as f32 - 150.0) * 0.07).collect();
            let mut got = vec![f32::NAN; x.len()];
            activated(act, &x, None, &mut got);
            for (&v, &g) in x.iter().zip(&got) {
                let want = activate(act, v);
                assert!(
                    (g - want).abs() <= 3e-6 * want.abs() + 1e-7,
                    "{act:?}({v}) = {g} vs {want}"
                );
            }
        }
    }
}
