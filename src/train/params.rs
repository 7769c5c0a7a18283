//! The trained model's shape and its parameters: every tensor in one flat f32 vector (so
//! the optimizer, the gradient norm and the byte-identical check see one slice), found by
//! name and range through a [`Layout`]. Matrices are stored as `nn.Linear` stores them,
//! [out, in]; the GPT-2 export transposes them to Conv1D's [in, out].

use std::ops::Range;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::error::{Error, Result};

/// Sizes of a GPT-2-style model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ModelShape {
    pub layers: usize,
    pub heads: usize,
    pub d_model: usize,
    /// Positions (rows of the learned position table) and the training sequence length.
    pub context: usize,
    pub vocab: usize,
}

impl ModelShape {
    pub fn d_head(&self) -> usize {
        self.d_model / self.heads
    }

    /// The MLP's hidden width, 4 d_model as in GPT-2.
    pub fn d_ff(&self) -> usize {
        4 * self.d_model
    }

    /// Parameters: token and position embeddings, per block two LayerNorms, Q/K/V and
    /// the output projection, the MLP (with biases), and the final LayerNorm.
    pub fn params(&self) -> u64 {
        let (d, l) = (self.d_model as u64, self.layers as u64);
        let block =
            4 * d + (3 * d * d + 3 * d) + (d * d + d) + (4 * d * d + 4 * d) + (4 * d * d + d);
        (self.vocab as u64 + self.context as u64) * d + l * block + 2 * d
    }

    /// Refuses sizes the model cannot have, naming the flag.
    pub fn check(&self) -> Result<()> {
        for (flag, v) in [
            ("--layers", self.layers),
            ("--heads", self.heads),
            ("--d-model", self.d_model),
            ("--vocab", self.vocab),
        ] {
            if v == 0 {
                return Err(Error::usage(format!("{flag} must be at least 1")));
            }
        }
        if self.context < 2 {
            return Err(Error::usage(format!(
                "--context {} is too short: a sequence needs at least 2 tokens (one to predict from, one to predict)",
                self.context
            )));
        }
        if !self.d_model.is_multiple_of(self.heads) {
            return Err(Error::usage(format!(
                "--d-model {} is not a multiple of --heads {}; each head gets d_model / heads dimensions",
                self.d_model, self.heads
            )));
        }
        if self.d_model > 4096 || self.layers > 64 || self.context > 4096 || self.vocab > 65536 {
            return Err(Error::usage(format!(
                "the model {} layers x d_model {} x context {} x vocab {} is larger than a CPU trains here (limits 64, 4096, 4096, 65536)",
                self.layers, self.d_model, self.context, self.vocab
            )));
        }
        Ok(())
    }
}

/// Where one block's tensors sit in the flat vector.
#[derive(Debug, Clone)]
pub struct LayerRanges {
    pub ln1_g: Range<usize>,
    pub ln1_b: Range<usize>,
    /// [3 d, d]: Q, K, V rows in that order (GPT-2's c_attn, transposed).
    pub qkv_w: Range<usize>,
    pub qkv_b: Range<usize>,
    /// [d, d].
    pub proj_w: Range<usize>,
    pub proj_b: Range<usize>,
    pub ln2_g: Range<usize>,
    pub ln2_b: Range<usize>,
    /// [4 d, d].
    pub fc_w: Range<usize>,
    pub fc_b: Range<usize>,
    /// [d, 4 d].
    pub out_w: Range<usize>,
    pub out_b: Range<usize>,
}

/// One tensor: its GPT-2 name, shape ([out, in] for matrices), range, whether AdamW
/// decays it (matrices and embeddings; not biases or LayerNorm gains), and its init.
#[derive(Debug, Clone)]
pub struct TensorInfo {
    pub name: String,
    pub shape: Vec<usize>,
    pub range: Range<usize>,
    pub decay: bool,
    /// Whether the export transposes it to Conv1D's [in, out].
    pub conv1d: bool,
    init: Init,
}

#[derive(Debug, Clone, Copy)]
enum Init {
    Normal(f32),
    Zeros,
    Ones,
}

/// Every tensor's place in the flat parameter vector.
#[derive(Debug, Clone)]
pub struct Layout {
    pub shape: ModelShape,
    /// [vocab, d]: token embedding and (tied) unembedding.
    pub wte: Range<usize>,
    /// [context, d].
    pub wpe: Range<usize>,
    pub layers: Vec<LayerRanges>,
    pub lnf_g: Range<usize>,
    pub lnf_b: Range<usize>,
    pub tensors: Vec<TensorInfo>,
    pub total: usize,
}

/// GPT-2's init: N(0, 0.02), the two residual projections of each block N(0, 0.02 /
/// sqrt(2 layers)) so the residual stream's variance does not grow with depth.
const INIT_STD: f32 = 0.02;
/// The learned position table starts smaller than the other weights (the recipe of
/// DESIGN.md, "Training a small model"): with 0.02 the model finds positional shortcuts
/// before the induction circuit.
const WPE_STD: f32 = 0.01;

impl Layout {
    pub fn new(shape: ModelShape) -> Layout {
        let (d, f) = (shape.d_model, shape.d_ff());
        let mut tensors = Vec::new();
        let mut at = 0;
        let resid = INIT_STD / (2.0 * shape.layers as f32).sqrt();
        let mut add = |name: String, dims: &[usize], decay: bool, conv1d: bool, init: Init| {
            let n: usize = dims.iter().product();
            let range = at..at + n;
            at += n;
            tensors.push(TensorInfo {
                name,
                shape: dims.to_vec(),
                range: range.clone(),
                decay,
                conv1d,
                init,
            });
            range
        };
        let normal = Init::Normal(INIT_STD);
        let wte = add("wte.weight".into(), &[shape.vocab, d], true, false, normal);
        let wpe = add(
            "wpe.weight".into(),
            &[shape.context, d],
            true,
            false,
            Init::Normal(WPE_STD),
        );
        let mut layers = Vec::with_capacity(shape.layers);
        for l in 0..shape.layers {
            let p = format!("h.{l}");
            let mut t = |s: &str, dims: &[usize], init: Init| {
                let mat = dims.len() == 2;
                add(format!("{p}.{s}"), dims, mat, mat, init)
            };
            layers.push(LayerRanges {
                ln1_g: t("ln_1.weight", &[d], Init::Ones),
                ln1_b: t("ln_1.bias", &[d], Init::Zeros),
                qkv_w: t("attn.c_attn.weight", &[3 * d, d], normal),
                qkv_b: t("attn.c_attn.bias", &[3 * d], Init::Zeros),
                proj_w: t("attn.c_proj.weight", &[d, d], Init::Normal(resid)),
                proj_b: t("attn.c_proj.bias", &[d], Init::Zeros),
                ln2_g: t("ln_2.weight", &[d], Init::Ones),
                ln2_b: t("ln_2.bias", &[d], Init::Zeros),
                fc_w: t("mlp.c_fc.weight", &[f, d], normal),
                fc_b: t("mlp.c_fc.bias", &[f], Init::Zeros),
                out_w: t("mlp.c_proj.weight", &[d, f], Init::Normal(resid)),
                out_b: t("mlp.c_proj.bias", &[d], Init::Zeros),
            });
        }
        let lnf_g = add("ln_f.weight".into(), &[d], false, false, Init::Ones);
        let lnf_b = add("ln_f.bias".into(), &[d], false, false, Init::Zeros);
        Layout {
            shape,
            wte,
            wpe,
            layers,
            lnf_g,
            lnf_b,
            tensors,
            total: at,
        }
    }

    /// Fresh parameters, drawn in tensor order from ChaCha8 seeded with `seed`.
    pub fn init(&self, seed: u64) -> Vec<f32> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut p = vec![0.0f32; self.total];
        for t in &self.tensors {
            let dst = &mut p[t.range.clone()];
            match t.init {
                Init::Zeros => dst.fill(0.0),
                Init::Ones => dst.fill(1.0),
                Init::Normal(std) => dst.iter_mut().for_each(|x| *x = std * normal(&mut rng)),
            }
        }
        p
    }
}

/// A standard normal by Box-Muller from two uniforms. Written here rather than taken from
/// rand_distr so that the init's bits depend only on ChaCha8's stream and this formula,
/// never on a crate's choice of algorithm (same seed, same weights across versions).
pub fn normal(rng: &mut ChaCha8Rng) -> f32 {
    // u1 in (0, 1]: ln(u1) is finite.
    let u1 = 1.0 - rng.random::<f64>();
    let u2 = rng.random::<f64>();
    ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_covers_the_vector_once_and_init_is_seeded() {
        let s = ModelShape {
            layers: 2,
            heads: 2,
            d_model: 8,
            context: 6,
            vocab: 5,
        };
        let l = Layout::new(s);
        let mut end = 0;
        for t in &l.tensors {
            assert_eq!(t.range.start, end, "{}", t.name);
            assert_eq!(t.range.len(), t.shape.iter().product::<usize>());
            end = t.range.end;
        }
        assert_eq!(end, l.total);
        // 5*8 + 6*8 + 2 * (12*8*8 + 13*8) + 2*8
        assert_eq!(l.total, 40 + 48 + 2 * (768 + 104) + 16);
        assert_eq!(s.params(), l.total as u64);
        let (a, b) = (l.init(3), l.init(3));
        assert_eq!(a, b);
        assert_ne!(a, l.init(4));
        let w = &a[l.layers[0].qkv_w.clone()];
        let sd = (w.iter().map(|x| (x * x) as f64).sum::<f64>() / w.len() as f64).sqrt();
        assert!((sd - 0.02).abs() < 0.004, "{sd}");
        assert!(a[l.layers[1].ln2_g.clone()].iter().all(|&x| x == 1.0));
    }
}
