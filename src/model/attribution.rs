//! Direct logit attribution (Elhage et al. 2021): the logit of a target token (minus a
//! foil's) at one position, split into what each part of the residual stream wrote:
//! the embeddings, every head through its slice of W_O, the attention biases, every MLP,
//! and the final norm's shift.
//!
//! The final norm is not linear in the residual; its scale is frozen from the run
//! (RMSNorm: w / rms(x_final[P]); LayerNorm: w / std(x_final[P]) with each part centred),
//! so the parts add up to the model's own logit. Models with a norm after attention
//! (Gemma 2 and 3) get the same treatment there: that norm's scale is frozen from the
//! run's attention output at P, so the heads of a layer and its bias add up to what the
//! layer wrote. Soft-capped logits (Gemma 2) are attributed before the cap.

use std::cell::RefCell;

use crate::error::{Error, Result};
use crate::model::Site;
use crate::model::config::{ModelConfig, NormKind, NormPlace};
use crate::model::forward::{ForwardOptions, LogitRows, forward_hooked};
use crate::model::weights::{Norm, Weights};

/// What [`attribute`] found at one position.
#[derive(Debug, Clone, PartialEq)]
pub struct Attribution {
    pub pos: usize,
    /// logit(target) - logit(foil) (or logit(target)) of the model's own final hidden
    /// state, before any soft cap.
    pub total: f64,
    /// The same after the model's logit soft cap, when it has one.
    pub capped_total: Option<f64>,
    pub embed: f64,
    /// [layers][heads]
    pub heads: Vec<Vec<f64>>,
    /// Per layer, the attention output's bias (and a post-attention norm's shift).
    pub attn_bias: Vec<f64>,
    /// Per layer, the MLP's output.
    pub mlp: Vec<f64>,
    /// The final norm's shift and the unembedding's bias.
    pub norm_bias: f64,
}

impl Attribution {
    /// embed + heads + attn_bias + mlp + norm_bias.
    pub fn sum(&self) -> f64 {
        self.embed
            + self.heads.iter().flatten().sum::<f64>()
            + self.attn_bias.iter().sum::<f64>()
            + self.mlp.iter().sum::<f64>()
            + self.norm_bias
    }
}

/// The unembedding row of token `id` (LM head or tied embedding) and its bias.
pub(crate) fn unembed_row(cfg: &ModelConfig, w: &Weights, id: u32) -> Result<(Vec<f32>, f64)> {
    let mut row = vec![0.0f32; cfg.d_model];
    if cfg.tied_embeddings {
        w.tok_embed.row_into(id as usize, &mut row);
        Ok((row, 0.0))
    } else if let Some(lin) = &w.lm_head {
        lin.w.row_into(id as usize, &mut row);
        Ok((row, lin.b.as_ref().map_or(0.0, |b| b[id as usize] as f64)))
    } else {
        Err(Error::usage(format!(
            "the {} model has no LM head (an encoder loaded without one): there are no logits to attribute or read through the lens; use a causal language model",
            cfg.arch.name()
        )))
    }
}

/// A norm's frozen linear map on a part c of its input x: (c - [mean c]) * w / s, where s
/// is rms(x) (RMSNorm) or std(x) (LayerNorm, which also centres each part).
struct FrozenNorm {
    kind: NormKind,
    scale: Vec<f64>,
}

impl FrozenNorm {
    fn new(kind: NormKind, x: &[f64], norm: &Norm, eps: f64) -> FrozenNorm {
        let d = x.len() as f64;
        let s = match kind {
            NormKind::Rms => (x.iter().map(|v| v * v).sum::<f64>() / d + eps).sqrt(),
            NormKind::Layer => {
                let mean = x.iter().sum::<f64>() / d;
                (x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / d + eps).sqrt()
            }
        };
        FrozenNorm {
            kind,
            scale: norm.w.iter().map(|&w| w as f64 / s).collect(),
        }
    }

    /// The direction g' such that part c contributes c . g' (centring folded in).
    fn pull_back(&self, g: &[f64]) -> Vec<f64> {
        let mut out: Vec<f64> = self.scale.iter().zip(g).map(|(s, g)| s * g).collect();
        if self.kind == NormKind::Layer {
            // (c - mean c) . a = c . (a - mean a)
            let mean = out.iter().sum::<f64>() / out.len() as f64;
            out.iter_mut().for_each(|v| *v -= mean);
        }
        out
    }
}

fn dot(a: &[f32], g: &[f64]) -> f64 {
    a.iter().zip(g).map(|(&a, g)| a as f64 * g).sum()
}

/// What the hooks keep of one pass at position P.
#[derive(Default)]
struct Kept {
    embed: Vec<f32>,
    head_out: Vec<Vec<f32>>,
    mlp_out: Vec<Vec<f32>>,
    resid_final: Vec<f32>,
}

/// Direct logit attribution at `pos` of logit(target) (- logit(foil)).
///
/// Errors (exit 2): a model without an LM head, a post-norm model (its residual stream
/// is renormalised after every block, so no part reaches the logits directly), `pos`
/// past the text.
pub fn attribute(
    cfg: &ModelConfig,
    w: &Weights,
    ids: &[u32],
    pos: usize,
    target: u32,
    foil: Option<u32>,
    threads: Option<usize>,
) -> Result<Attribution> {
    let (d, dh, h) = (cfg.d_model, cfg.d_head, cfg.heads);
    if cfg.norm_place == NormPlace::Post {
        return Err(Error::usage(format!(
            "attribute: the {} model normalises its residual stream after every block (post-norm), so no head's output reaches the logits directly; use a pre-norm model (llama, gemma, qwen, gpt2 ...)",
            cfg.arch.name()
        )));
    }
    if pos >= ids.len() {
        return Err(Error::usage(format!(
            "--pos {pos}: the text has {} tokens, positions 0..{}",
            ids.len(),
            ids.len().saturating_sub(1)
        )));
    }
    let (ut, bt) = unembed_row(cfg, w, target)?;
    let (u, ub): (Vec<f64>, f64) = match foil {
        Some(f) => {
            let (uf, bf) = unembed_row(cfg, w, f)?;
            (
                ut.iter()
                    .zip(&uf)
                    .map(|(&a, &b)| a as f64 - b as f64)
                    .collect(),
                bt - bf,
            )
        }
        None => (ut.iter().map(|&a| a as f64).collect(), bt),
    };
    let kept = RefCell::new(Kept {
        head_out: vec![Vec::new(); cfg.layers],
        mlp_out: vec![Vec::new(); cfg.layers],
        ..Kept::default()
    });
    let opts = ForwardOptions {
        threads,
        keep_attention: false,
        logits: LogitRows::Last,
        ..ForwardOptions::default()
    };
    let mut hook = |l: usize, site: Site, a: &mut [f32]| -> Result<()> {
        let mut k = kept.borrow_mut();
        match site {
            Site::ResidPre if l == 0 => k.embed = a[pos * d..][..d].to_vec(),
            Site::ResidPre if l == cfg.layers => k.resid_final = a[pos * d..][..d].to_vec(),
            Site::HeadOut => k.head_out[l] = a[pos * h * dh..][..h * dh].to_vec(),
            Site::MlpOut => k.mlp_out[l] = a[pos * d..][..d].to_vec(),
            _ => {}
        }
        Ok(())
    };
    forward_hooked(cfg, w, ids, &opts, |_, _| Ok(()), &mut hook)?;
    let kept = kept.into_inner();

    // The final norm, frozen at P: g is what a part of the residual is dotted with.
    let xf: Vec<f64> = kept.resid_final.iter().map(|&v| v as f64).collect();
    let (g, norm_bias, hidden) = match &w.final_norm {
        Some(norm) => {
            let frozen = FrozenNorm::new(cfg.norm, &xf, norm, cfg.norm_eps);
            let g = frozen.pull_back(&u);
            let shift = norm.b.as_ref().map_or(0.0, |b| dot(b, &u));
            let mut hidden = vec![0.0f32; d];
            crate::model::norm::norm_rows(
                cfg.norm,
                &kept.resid_final,
                d,
                norm,
                cfg.norm_eps,
                &mut hidden,
            );
            (g, shift, hidden)
        }
        None => (u.clone(), 0.0, kept.resid_final.clone()),
    };
    let total = dot(&hidden, &u) + ub;
    let capped_total = cfg.details.final_softcap.map(|cap| {
        let c = |x: f64| cap * (x / cap).tanh();
        let (lt, lf) = match foil {
            Some(_) => {
                let t = dot(&hidden, &ut.iter().map(|&v| v as f64).collect::<Vec<_>>()) + bt;
                (t, t - total)
            }
            None => (total, 0.0),
        };
        if foil.is_some() { c(lt) - c(lf) } else { c(lt) }
    });

    let mut heads = Vec::with_capacity(cfg.layers);
    let mut attn_bias = Vec::with_capacity(cfg.layers);
    let mut mlp = Vec::with_capacity(cfg.layers);
    for (l, lw) in w.layers.iter().enumerate() {
        let wo = lw.wo.w.to_f32();
        let concat = &kept.head_out[l];
        let hd = h * dh;
        // proj[P] = W_O concat + b_O, needed for a post-attention norm's frozen scale.
        let (gl, bias_part) = match &lw.extra.post_attn {
            Some(norm) => {
                let proj: Vec<f64> = (0..d)
                    .map(|j| {
                        let row = &wo[j * hd..][..hd];
                        let b = lw.wo.b.as_ref().map_or(0.0, |b| b[j] as f64);
                        b + row
                            .iter()
                            .zip(concat)
                            .map(|(&a, &c)| a as f64 * c as f64)
                            .sum::<f64>()
                    })
                    .collect();
                let frozen = FrozenNorm::new(cfg.norm, &proj, norm, cfg.norm_eps);
                let gl = frozen.pull_back(&g);
                let shift = norm.b.as_ref().map_or(0.0, |b| dot(b, &g));
                let b_o = lw.wo.b.as_ref().map_or(0.0, |b| dot(b, &gl));
                (gl, shift + b_o)
            }
            None => {
                let b_o = lw.wo.b.as_ref().map_or(0.0, |b| dot(b, &g));
                (g.clone(), b_o)
            }
        };
        // W_O^T g: what each head's output is dotted with.
        let mut wog = vec![0.0f64; hd];
        for (j, &gj) in gl.iter().enumerate() {
            for (o, &a) in wog.iter_mut().zip(&wo[j * hd..][..hd]) {
                *o += a as f64 * gj;
            }
        }
        heads.push(
            (0..h)
                .map(|head| dot(&concat[head * dh..][..dh], &wog[head * dh..][..dh]))
                .collect(),
        );
        attn_bias.push(bias_part);
        mlp.push(dot(&kept.mlp_out[l], &g));
    }
    Ok(Attribution {
        pos,
        total,
        capped_total,
        embed: dot(&kept.embed, &g),
        heads,
        attn_bias,
        mlp,
        norm_bias: norm_bias + ub,
    })
}
