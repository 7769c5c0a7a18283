//! AdamW (Loshchilov & Hutter; PyTorch's `torch.optim.AdamW` update, step by step),
//! clipping of the global gradient norm, and the learning-rate schedule: linear warm-up,
//! then cosine decay to a tenth of the peak.

use super::params::Layout;

/// AdamW's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamW {
    pub beta1: f32,
    pub beta2: f32,
    pub eps: f32,
    /// Decoupled weight decay, applied to the tensors whose `decay` is set.
    pub weight_decay: f32,
}

impl Default for AdamW {
    fn default() -> Self {
        AdamW {
            beta1: 0.9,
            beta2: 0.95,
            eps: 1e-8,
            weight_decay: 0.01,
        }
    }
}

/// The optimizer's moments and step count.
#[derive(Debug, Clone)]
pub struct AdamState {
    pub m: Vec<f32>,
    pub v: Vec<f32>,
    pub t: u64,
}

impl AdamState {
    pub fn new(n: usize) -> Self {
        AdamState {
            m: vec![0.0; n],
            v: vec![0.0; n],
            t: 0,
        }
    }
}

impl AdamW {
    /// One update of `p` from `g` at learning rate `lr`, as PyTorch does it:
    /// p -= lr wd p; m, v moving averages; p -= lr/(1 - b1^t) m / (sqrt(v)/sqrt(1 - b2^t) + eps).
    pub fn step(&self, layout: &Layout, p: &mut [f32], g: &[f32], st: &mut AdamState, lr: f32) {
        st.t += 1;
        let t = st.t as i32;
        let bc1 = 1.0 - (self.beta1 as f64).powi(t);
        let bc2 = 1.0 - (self.beta2 as f64).powi(t);
        let step_size = (lr as f64 / bc1) as f32;
        let bc2_sqrt = bc2.sqrt() as f32;
        for info in &layout.tensors {
            let r = info.range.clone();
            let decay = if info.decay {
                1.0 - lr * self.weight_decay
            } else {
                1.0
            };
            let (pp, gg) = (&mut p[r.clone()], &g[r.clone()]);
            let (mm, vv) = (&mut st.m[r.clone()], &mut st.v[r]);
            for i in 0..pp.len() {
                let gi = gg[i];
                mm[i] = self.beta1 * mm[i] + (1.0 - self.beta1) * gi;
                vv[i] = self.beta2 * vv[i] + (1.0 - self.beta2) * gi * gi;
                let denom = vv[i].sqrt() / bc2_sqrt + self.eps;
                pp[i] = pp[i] * decay - step_size * mm[i] / denom;
            }
        }
    }
}

/// The global L2 norm of `g` (summed in f64) and, if it exceeds `max_norm`, `g` scaled
/// by max_norm / (norm + 1e-6) as `torch.nn.utils.clip_grad_norm_` does. Returns the
/// norm before clipping.
pub fn clip_grad_norm(g: &mut [f32], max_norm: f32) -> f64 {
    let norm = g
        .iter()
        .map(|&x| (x as f64) * (x as f64))
        .sum::<f64>()
        .sqrt();
    let coef = max_norm as f64 / (norm + 1e-6);
    if coef < 1.0 {
        let c = coef as f32;
        g.iter_mut().for_each(|x| *x *= c);
    }
    norm
}

/// Learning rate of step `step` (0-based) of `steps`: linear warm-up over `warmup` steps
/// to `peak`, then cosine decay to peak / 10 at the last step.
pub fn lr_at(step: usize, steps: usize, warmup: usize, peak: f32) -> f32 {
    if step < warmup {
        return peak * (step + 1) as f32 / warmup as f32;
    }
    let span = steps.saturating_sub(warmup).max(1);
    let frac = ((step - warmup) as f64 / span as f64).min(1.0);
    let cos = 0.5 * (1.0 + (std::f64::consts::PI * frac).cos());
    (peak as f64 * (0.1 + 0.9 * cos)) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_warms_up_then_decays_to_a_tenth() {
        assert_eq!(lr_at(0, 100, 10, 1.0), 0.1);
        assert_eq!(lr_at(9, 100, 10, 1.0), 1.0);
        assert!((lr_at(10, 100, 10, 1.0) - 1.0).abs() < 1e-6);
        assert!((lr_at(100, 100, 10, 1.0) - 0.1).abs() < 1e-6);
        assert!(lr_at(50, 100, 10, 1.0) < 1.0 && lr_at(50, 100, 10, 1.0) > 0.1);
    }

    #[test]
    fn clipping_scales_only_above_the_limit() {
        let mut g = vec![3.0f32, 4.0];
        assert!((clip_grad_norm(&mut g, 10.0) - 5.0).abs() < 1e-12);
        assert_eq!(g, vec![3.0, 4.0]);
        clip_grad_norm(&mut g, 1.0);
        let n = (g[0] * g[0] + g[1] * g[1]).sqrt();
        assert!((n - 1.0).abs() < 1e-5, "{n}");
    }
}
