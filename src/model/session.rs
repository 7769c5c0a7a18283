//! A real model's computation of one text, kept for the app: the tokens as the model's
//! tokenizer splits them, every layer's attention weights from the forward pass (the
//! project's flash kernel) and, once asked, their contributions ||A v W_O||, the
//! predictions and losses, and on demand one block's stages as an engine [`Pipeline`] for
//! the pipeline, heads and flash views.
//!
//! No terminal code: the app holds a session and draws from it.

use std::sync::Arc;
use std::time::Instant;

use ndarray::{Array2, Array3};

use crate::engine::config::MaskKind;
use crate::engine::limits;
use crate::engine::pipeline::{BlockMlp, BlockNorm, BlockTensors, Pipeline};
use crate::error::{Error, Result};
use crate::model::Site;
use crate::model::chat::chat_prompt;
use crate::model::config::{Arch, ModelConfig, NormKind, NormPlace, PosKind, RopeStyle};
use crate::model::contrib::{contributions, value_norms};
use crate::model::forward::{ForwardOptions, LogitRows, forward, forward_hooked, forward_with};
use crate::model::load::LoadedModel;
use crate::model::maps::AttentionMaps;
use crate::model::predict::{TopToken, top_k};
use crate::model::trace::LayerTrace;
use crate::model::weights::ExtraNorms;
use crate::model::weights::{Linear, Mlp};

/// Longest text the app opens a model on (its n x n maps stay responsive up to here).
pub const MAX_APP_TOKENS: usize = 1024;

/// How many next-token candidates the app shows.
pub const TOP_NEXT: usize = 10;

/// What a session's predictions were before an intervention: the run it is compared
/// with (loss, top next tokens, per-token loss).
#[derive(Debug, Clone, PartialEq)]
pub struct Baseline {
    pub top_next: Vec<TopToken>,
    pub token_loss: Vec<f64>,
    pub loss: Option<f64>,
    /// The options of that run.
    pub options: ForwardOptions,
}

/// Which of a model session's [heads, n, n] maps a view shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Measure {
    /// The attention weights A.
    #[default]
    Weights,
    /// The contributions ||A[i, j] v_j W_O^h||, each row normalised to sum 1
    /// ([`crate::model::contrib`]).
    Contributions,
}

/// One forward pass of a model over a text, with what the views read.
pub struct ModelSession {
    /// Shared by the sessions of one model (an intervention runs the same weights again).
    pub model: Arc<LoadedModel>,
    pub ids: Vec<u32>,
    /// Token texts as the tokenizer split them (" cat", "##ing").
    pub pieces: Vec<String>,
    /// The interventions in force (ablation, mask, RoPE base, no positions).
    pub options: ForwardOptions,
    /// Every layer's [heads, n, n] attention weights, kept in 2 bytes each.
    pub attention: AttentionMaps,
    /// Every layer's [heads, n, n] contributions ([`Measure::Contributions`]), kept like
    /// `attention` (2 bytes each, the lower triangle of a causal layer): as much memory
    /// again, 283 MB for SmolLM2 at [`MAX_APP_TOKENS`]. None until asked for
    /// ([`ModelSession::with_contributions`]), then kept by the runs that follow. An
    /// ablated head's are what it would add (as `model run --contrib` writes them).
    pub contributions: Option<AttentionMaps>,
    /// After the last token (causal models with an LM head).
    pub top_next: Vec<TopToken>,
    /// -ln p(token i | tokens < i), i >= 1 (causal models).
    pub token_loss: Vec<f64>,
    pub forward_ms: f64,
    /// The model's own run, when this one has interventions (`intervened`).
    pub baseline: Option<Arc<Baseline>>,
    /// Tokens that end a reply when the app decodes: the end-of-sequence token, or a chat
    /// template's end-of-turn tokens ([`ModelSession::chat`]).
    pub stop: Vec<u32>,
}

impl std::fmt::Debug for ModelSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelSession")
            .field("model", &self.model.name)
            .field("n", &self.ids.len())
            .finish_non_exhaustive()
    }
}

impl ModelSession {
    /// Tokenize `text` with the model's tokenizer and run the forward pass.
    pub fn new(model: LoadedModel, text: &str, options: ForwardOptions) -> Result<ModelSession> {
        let ids = model.tokenizer.encode(text)?;
        ModelSession::from_ids(model, ids, options)
    }

    pub fn from_ids(
        model: LoadedModel,
        ids: Vec<u32>,
        options: ForwardOptions,
    ) -> Result<ModelSession> {
        ModelSession::from_shared(Arc::new(model), ids, options)
    }

    /// [`ModelSession::from_ids`] on a model already loaded and shared.
    pub fn from_shared(
        model: Arc<LoadedModel>,
        ids: Vec<u32>,
        options: ForwardOptions,
    ) -> Result<ModelSession> {
        if ids.is_empty() {
            return Err(Error::usage(
                "--tokens: the text gives no tokens; give a word or two, e.g. --tokens \"The cat sat\"",
            ));
        }
        if ids.len() > MAX_APP_TOKENS {
            return Err(Error::usage(format!(
                "--tokens: the text is {} tokens, over the app's limit of {MAX_APP_TOKENS} (MAX_APP_TOKENS); `attnviz model run` takes longer texts",
                ids.len()
            )));
        }
        let pieces = ids.iter().map(|&id| model.tokenizer.piece(id)).collect();
        let stop = model.tokenizer.eos_id().into_iter().collect();
        let mut s = ModelSession {
            model,
            ids,
            pieces,
            options: ForwardOptions {
                keep_attention: true,
                trace_layer: None,
                ..options
            },
            attention: AttentionMaps::default(),
            contributions: None,
            top_next: Vec::new(),
            token_loss: Vec::new(),
            forward_ms: 0.0,
            baseline: None,
            stop,
        };
        s.run()?;
        Ok(s)
    }

    /// A user's `message` wrapped in the model's chat template (one user turn, the
    /// generation prompt added): the session runs on the template's tokens, and decoding
    /// stops at its end-of-turn tokens.
    pub fn chat(
        model: LoadedModel,
        message: &str,
        options: ForwardOptions,
    ) -> Result<ModelSession> {
        let prompt = chat_prompt(&model.tokenizer, message)?;
        let mut s = ModelSession::from_ids(model, prompt.ids, options)?;
        s.stop = prompt.stop;
        Ok(s)
    }

    /// The same text through the same model with other interventions (`options.ablate`,
    /// `mask`, `rope_base`, `no_pe`), compared with the model's own run: this model session's
    /// baseline if it has one, else this model session.
    pub fn intervened(&self, options: ForwardOptions) -> Result<ModelSession> {
        self.run_as(options, false)
    }

    /// [`intervened`](ModelSession::intervened), keeping every layer's contributions too
    /// if `contributions`.
    fn run_as(&self, options: ForwardOptions, contributions: bool) -> Result<ModelSession> {
        let baseline = self.baseline.clone().unwrap_or_else(|| {
            Arc::new(Baseline {
                top_next: self.top_next.clone(),
                token_loss: self.token_loss.clone(),
                loss: self.loss(),
                options: self.options.clone(),
            })
        });
        let mut s = self.unrun(options);
        if contributions {
            s.contributions = Some(AttentionMaps::default());
        }
        s.run()?;
        let plain = s.options.same_interventions(&baseline.options);
        s.baseline = (!plain).then_some(baseline);
        Ok(s)
    }

    /// The same run again, keeping every layer's contributions beside its weights (the
    /// value norms they need are read during the pass, so it runs again).
    pub fn with_contributions(&self) -> Result<ModelSession> {
        let mut s = self.unrun(self.options.clone());
        s.contributions = Some(AttentionMaps::default());
        s.baseline = self.baseline.clone();
        s.run()?;
        Ok(s)
    }

    /// The same text run again with `options`, keeping every layer's contributions if
    /// `contributions` or if `self` keeps them: [`with_contributions`] when only
    /// the contributions are new, else [`intervened`].
    ///
    /// [`with_contributions`]: ModelSession::with_contributions
    /// [`intervened`]: ModelSession::intervened
    pub fn again(&self, options: ForwardOptions, contributions: bool) -> Result<ModelSession> {
        let keep = contributions && self.contributions.is_none();
        if keep && options == self.options {
            self.with_contributions()
        } else {
            self.run_as(options, keep)
        }
    }

    /// A model session of the same text with `options`, not run yet: it keeps
    /// contributions if this one does.
    fn unrun(&self, options: ForwardOptions) -> ModelSession {
        ModelSession {
            model: self.model.clone(),
            ids: self.ids.clone(),
            pieces: self.pieces.clone(),
            options: ForwardOptions {
                keep_attention: true,
                trace_layer: None,
                ..options
            },
            attention: AttentionMaps::default(),
            contributions: self
                .contributions
                .as_ref()
                .map(|_| AttentionMaps::default()),
            top_next: Vec::new(),
            token_loss: Vec::new(),
            forward_ms: 0.0,
            baseline: None,
            stop: self.stop.clone(),
        }
    }

    /// The maps `m` shows: the weights always, the contributions once kept.
    pub fn maps(&self, m: Measure) -> Option<&AttentionMaps> {
        match m {
            Measure::Weights => Some(&self.attention),
            Measure::Contributions => self.contributions.as_ref(),
        }
    }

    /// The options of the run this model session is compared with: its own if it is that run.
    pub fn base_options(&self) -> &ForwardOptions {
        self.baseline.as_ref().map_or(&self.options, |b| &b.options)
    }

    /// Run the forward pass again with the current options (after an intervention), and
    /// the contributions too if this model session keeps them.
    pub fn run(&mut self) -> Result<()> {
        let t = Instant::now();
        let model = self.model.clone();
        let (cfg, w) = (&model.config, &model.weights);
        let n = self.ids.len();
        let mut maps = AttentionMaps::new(n, cfg.heads);
        let mut contrib = self
            .contributions
            .is_some()
            .then(|| AttentionMaps::new(n, cfg.heads));
        let opts = ForwardOptions {
            logits: LogitRows::LastAndLoss,
            ..self.options.clone()
        };
        // The layer's value norms, read when its values are made, before its weights.
        let norms = std::cell::RefCell::new(Vec::new());
        let sink = |_, a: &[f32]| {
            maps.push_layer(a);
            if let Some(c) = contrib.as_mut() {
                c.push_layer(&contributions(a, &norms.borrow(), cfg.heads, n));
            }
            Ok(())
        };
        let out = if self.contributions.is_some() {
            let mut hook = |l: usize, site: Site, a: &mut [f32]| -> Result<()> {
                if site == Site::Values {
                    *norms.borrow_mut() = value_norms(cfg, &w.layers[l], a, n);
                }
                Ok(())
            };
            forward_hooked(cfg, w, &self.ids, &opts, sink, &mut hook)?
        } else {
            forward_with(cfg, w, &self.ids, &opts, sink)?
        };
        self.contributions = contrib;
        self.forward_ms = t.elapsed().as_secs_f64() * 1e3;
        self.attention = maps;
        self.top_next.clear();
        self.token_loss.clear();
        if let Some(logits) = &out.logits
            && cfg.causal
        {
            self.top_next = top_k(logits, TOP_NEXT);
            self.token_loss = out.token_loss.unwrap_or_default();
        }
        Ok(())
    }

    pub fn config(&self) -> &ModelConfig {
        &self.model.config
    }

    pub fn n(&self) -> usize {
        self.ids.len()
    }

    /// Mean loss over the predicted tokens, if the model predicts.
    pub fn loss(&self) -> Option<f64> {
        (!self.token_loss.is_empty())
            .then(|| self.token_loss.iter().sum::<f64>() / self.token_loss.len() as f64)
    }

    /// Head `h`'s weights of `layer`, [n, n] row-major (within [`crate::model::maps::MAX_ERROR`] of the
    /// forward pass's f32 weights).
    pub fn head_weights(&self, layer: usize, h: usize) -> Vec<f32> {
        self.attention.head(layer, h)
    }

    /// Row `i` of head `h`'s weights in `layer`, [n].
    pub fn row_weights(&self, layer: usize, h: usize, i: usize) -> Vec<f32> {
        self.attention.row(layer, h, i)
    }

    /// One weight: query `i` on key `j`, head `h` of `layer`.
    pub fn weight(&self, layer: usize, h: usize, i: usize, j: usize) -> f32 {
        self.attention.get(layer, h, i, j)
    }

    /// The mask in force: the model's own, or the `--mask` that replaces it.
    pub fn mask(&self) -> MaskKind {
        self.options
            .mask
            .clone()
            .unwrap_or(if self.config().causal {
                MaskKind::Causal
            } else {
                MaskKind::None
            })
    }

    /// Layer `l`'s mask: `--mask` if given, else the model's own for that layer (a sliding
    /// window on the windowed layers).
    pub fn layer_mask(&self, l: usize) -> MaskKind {
        match (&self.options.mask, self.config().window(l)) {
            (None, Some(w)) => MaskKind::Window(w),
            _ => self.mask(),
        }
    }

    /// Layer `l`'s RoPE base, if RoPE is applied (a sliding layer of Gemma 3 has its own).
    pub fn layer_rope_base(&self, l: usize) -> Option<f64> {
        let base = self.rope_base()?;
        match self.config().details.local_rope_base {
            Some(local)
                if self.options.rope_base.is_none() && self.config().window(l).is_some() =>
            {
                Some(local)
            }
            _ => Some(base),
        }
    }

    /// The RoPE base in force, if RoPE is applied.
    pub fn rope_base(&self) -> Option<f64> {
        match self.config().pos {
            PosKind::Rope { base, .. } if !self.options.no_pe => {
                Some(self.options.rope_base.unwrap_or(base))
            }
            _ => None,
        }
    }

    /// True when one block's full pipeline (every stage in f64) fits the app's limits and
    /// the pipeline's stages are this family's block: plain RoPE over the whole head, the
    /// default scale, no soft cap, no norms on heads or after attention and MLP, no
    /// parallel residual. Otherwise the app shows the layer's weights alone.
    pub fn block_fits(&self) -> bool {
        let cells = (self.config().heads * self.n()) as u64 * self.n() as u64;
        let d = &self.config().details;
        let plain = d.local_rope_base.is_none()
            && d.rope_dims.is_none()
            && d.rope_divisors.is_empty()
            && d.attn_scale.is_none()
            && d.attn_softcap.is_none()
            && !d.parallel_residual
            && self
                .model
                .weights
                .layers
                .iter()
                .all(|lw| lw.extra == ExtraNorms::default());
        plain && cells <= limits::MAX_PIPELINE_SCORE_CELLS
    }

    /// Block `layer`'s stages as an engine pipeline: the forward pass is run again to keep
    /// that block's tensors, and the attention stages are recomputed from its q, k, v.
    pub fn block_pipeline(&self, layer: usize) -> Result<Pipeline> {
        let cfg = self.config();
        let opts = ForwardOptions {
            trace_layer: Some(layer),
            keep_attention: false,
            ..self.options.clone()
        };
        let out = forward(cfg, &self.model.weights, &self.ids, &opts)?;
        let trace = out.layer_trace.ok_or_else(|| {
            Error::Internal(format!("the forward pass kept no trace of layer {layer}"))
        })?;
        Pipeline::from_block(self.block_tensors(layer, &trace)?)
    }

    fn block_tensors(&self, layer: usize, t: &LayerTrace) -> Result<BlockTensors> {
        let cfg = self.config();
        let lw = &self.model.weights.layers[layer];
        let n = self.n();
        let get = |name: &str| {
            t.get(name).ok_or_else(|| {
                Error::Internal(format!("layer {layer}'s trace has no stage '{name}'"))
            })
        };
        let m2 = |name: &str| -> Result<Array2<f64>> {
            let s = get(name)?;
            let cols = s.data.len() / n;
            Ok(Array2::from_shape_fn((n, cols), |(i, j)| {
                s.data[i * cols + j] as f64
            }))
        };
        let style = match cfg.pos {
            PosKind::Rope { style, .. } => Some(style),
            PosKind::Learned => None,
        };
        // The engine's RoPE pairs dimensions (2i, 2i+1); rotate-half models pair (i, i+d/2).
        // Reordering the head dimensions changes no dot product, so q.k, the weights and
        // the outputs are the model's own.
        let d = cfg.d_head;
        let perm: Vec<usize> = match style {
            Some(RopeStyle::Half) => (0..d)
                .map(|c| if c % 2 == 0 { c / 2 } else { c / 2 + d / 2 })
                .collect(),
            _ => (0..d).collect(),
        };
        let m3 = |name: &str, permute: bool| -> Result<Array3<f64>> {
            let s = get(name)?;
            let g = s.shape[0];
            Ok(Array3::from_shape_fn((g, n, d), |(h, i, c)| {
                let c = if permute { perm[c] } else { c };
                s.data[(h * n + i) * d + c] as f64
            }))
        };
        let lin = |l: &Linear, permute: bool| {
            let w = l.w.to_f32();
            Array2::from_shape_fn((l.out_dim, l.in_dim), |(r, c)| {
                let r = if permute { r / d * d + perm[r % d] } else { r };
                w[r * l.in_dim + c] as f64
            })
        };
        let bias = |l: &Linear, permute: bool| -> Vec<f64> {
            match &l.b {
                None => vec![0.0; l.out_dim],
                Some(b) => (0..l.out_dim)
                    .map(|r| {
                        let r = if permute { r / d * d + perm[r % d] } else { r };
                        b[r] as f64
                    })
                    .collect(),
            }
        };
        let post = cfg.norm_place == NormPlace::Post;
        let f64s = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<_>>();
        let input = m2("block_input")?;
        let attn_residual = m2("attn_residual")?;
        let (mlp_kind, pre_act, up, w_down) = match &lw.mlp {
            Mlp::Gated { down, .. } => ("SwiGLU", m2("mlp_pre_act")?, Some(m2("mlp_up")?), down),
            Mlp::Plain { down, .. } => ("GELU", m2("mlp_pre_act")?, None, down),
        };
        let has_bias = lw.wq.b.is_some() || lw.wk.b.is_some() || lw.wv.b.is_some();
        Ok(BlockTensors {
            model: self.model.name.clone(),
            layer,
            layers: cfg.layers,
            tokens: self.pieces.clone(),
            ids: self.ids.clone(),
            norm: BlockNorm {
                rms: cfg.norm == NormKind::Rms,
                post,
                eps: cfg.norm_eps,
            },
            attn_in: if post {
                input.clone()
            } else {
                m2("attn_norm")?
            },
            input,
            attn_norm_w: f64s(&lw.attn_norm.w),
            attn_norm_b: lw.attn_norm.b.as_deref().map(f64s),
            w_q: lin(&lw.wq, true),
            w_k: lin(&lw.wk, true),
            w_v: lin(&lw.wv, false),
            b_qkv: has_bias.then(|| [bias(&lw.wq, true), bias(&lw.wk, true), bias(&lw.wv, false)]),
            q: m3("q", true)?,
            k: m3("k", true)?,
            v: m3("v", false)?,
            rope_base: self.rope_base(),
            rope_note: (style == Some(RopeStyle::Half) && self.rope_base().is_some()).then(|| {
                "head dimensions shown in the pairs RoPE rotates: (0, d/2), (1, d/2+1), ..".into()
            }),
            mask: self.layer_mask(layer),
            ablated: self
                .options
                .ablate
                .iter()
                .filter(|(l, _)| *l == layer)
                .map(|(_, h)| *h)
                .collect(),
            attn_out: m2("attn_out")?,
            w_o: lin(&lw.wo, false),
            attn_residual_normed: if post { Some(m2("attn_norm")?) } else { None },
            mlp_in: if post {
                m2("attn_norm")?
            } else {
                m2("mlp_norm")?
            },
            attn_residual,
            mlp_norm_w: f64s(&lw.mlp_norm.w),
            mlp_norm_b: lw.mlp_norm.b.as_deref().map(f64s),
            mlp: BlockMlp {
                kind: mlp_kind,
                pre_act,
                up,
                hidden: m2("mlp_hidden")?,
                w_down: lin(w_down, false),
                out: m2("mlp_out")?,
            },
            output: m2("block_output")?,
        })
    }

    /// A short description for the header: "SmolLM2-135M-Instruct.Q4_1 (llama, 30 layers)".
    pub fn describe(&self) -> String {
        let c = self.config();
        format!(
            "{} ({}, {} layers, {} heads{})",
            self.model.name,
            c.arch.name(),
            c.layers,
            c.heads,
            if c.kv_heads != c.heads {
                format!(" / {} KV", c.kv_heads)
            } else {
                String::new()
            }
        )
    }

    /// Is this an encoder (no next-token predictions)?
    pub fn is_encoder(&self) -> bool {
        self.config().arch == Arch::Bert
    }
}
