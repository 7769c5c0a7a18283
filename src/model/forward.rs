//! The f32 forward pass of a whole model over a sequence of token ids, with the
//! interventions of `model run` (head ablation, mask override, RoPE base, no positions),
//! the attention weights for display and one block's full trace.

use crate::engine::config::MaskKind;
use crate::engine::mask::Mask;
use crate::engine::problem::{AttnSpec, ProblemShape};
use crate::error::{Error, Result};
use crate::kernel::default_threads;
use crate::model::block::{BlockCtx, Buffers, Hook, Keys, LayerOpts, Site, block_forward};
use crate::model::config::{ModelConfig, PosKind, RopeStyle};
use crate::model::gemm::matmul_matrix;
use crate::model::norm::norm_rows;
use crate::model::predict::token_loss;
use crate::model::rope::RopeTable;
use crate::model::softcap::softcap_slice;
use crate::model::trace::LayerTrace;
use crate::model::weights::Weights;

/// Which rows of logits to compute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogitRows {
    /// Every position's next-token logits [n, vocab] (loss per token).
    #[default]
    All,
    /// Only the last position's [1, vocab] (prediction, generation).
    Last,
    /// The last position's [1, vocab], and every position's token loss in
    /// [`ForwardOutput::token_loss`], computed a few rows at a time so that no [n, vocab]
    /// buffer exists (a long text on a 262,144-token vocabulary would need gigabytes).
    LastAndLoss,
}

/// Rows of logits computed at once for [`LogitRows::LastAndLoss`].
const LOSS_CHUNK_ROWS: usize = 64;

/// Most bytes that one layer's attention weights [heads, n, n] in f32 may take in a
/// command that reads them (`heads`, `model run --attn-out` or `--rollout`): a pass keeps
/// one layer's at a time, so with the model and its buffers a command stays under 1 GB.
pub const MAX_LAYER_WEIGHT_BYTES: u64 = 512 << 20;

/// Refuse a text whose one layer of attention weights would pass
/// [`MAX_LAYER_WEIGHT_BYTES`], naming `what` needs them and the longest text that fits.
pub fn check_weight_budget(cfg: &ModelConfig, n: usize, what: &str) -> Result<()> {
    let bytes = cfg.heads as u64 * n as u64 * n as u64 * 4;
    if bytes <= MAX_LAYER_WEIGHT_BYTES {
        return Ok(());
    }
    let max = ((MAX_LAYER_WEIGHT_BYTES / 4 / cfg.heads.max(1) as u64) as f64).sqrt() as u64;
    Err(Error::usage(format!(
        "{what}: {n} tokens give each layer {} x {n} x {n} attention weights ({} MB), over the limit of {} MB a layer; give at most {max} tokens",
        cfg.heads,
        bytes / 1_000_000,
        MAX_LAYER_WEIGHT_BYTES / 1_000_000
    )))
}

/// Options of one forward pass; `Default` is the model as it is, all threads, attention
/// weights kept, all logits.
#[derive(Debug, Clone, PartialEq)]
pub struct ForwardOptions {
    /// Worker threads (GEMMs and the attention kernel); all cores if None.
    pub threads: Option<usize>,
    /// (layer, head) pairs, from 0, whose attention outputs are zeroed before W_O.
    pub ablate: Vec<(usize, usize)>,
    /// Replaces the model's own mask (causal for decoders, none for encoders).
    pub mask: Option<MaskKind>,
    /// Replaces the model's RoPE base (RoPE models only).
    pub rope_base: Option<f64>,
    /// Drop position information: RoPE not applied, learned positions not added.
    pub no_pe: bool,
    /// Compute every layer's attention weights [heads, n, n] for display.
    pub keep_attention: bool,
    /// Keep every stage of this block (from 0) in [`ForwardOutput::layer_trace`].
    pub trace_layer: Option<usize>,
    pub logits: LogitRows,
}

impl ForwardOptions {
    /// The same interventions (ablation, mask, RoPE base, positions) as `other`.
    pub fn same_interventions(&self, other: &ForwardOptions) -> bool {
        self.ablate == other.ablate
            && self.mask == other.mask
            && self.rope_base == other.rope_base
            && self.no_pe == other.no_pe
    }
}

impl Default for ForwardOptions {
    fn default() -> Self {
        ForwardOptions {
            threads: None,
            ablate: Vec::new(),
            mask: None,
            rope_base: None,
            no_pe: false,
            keep_attention: true,
            trace_layer: None,
            logits: LogitRows::All,
        }
    }
}

/// What one forward pass computed.
#[derive(Debug, Clone)]
pub struct ForwardOutput {
    /// Next-token logits [rows, vocab] (rows = n, or 1 with [`LogitRows::Last`]); None for
    /// an encoder without an LM head.
    pub logits: Option<Vec<f32>>,
    /// The final hidden states [n, d_model]: after the final norm (pre-norm models) or the
    /// last block (post-norm), i.e. what the LM head reads.
    pub hidden: Vec<f32>,
    /// Per layer, the attention weights [heads, n, n] (row i: query i over keys j); empty
    /// vectors when `keep_attention` is off or when [`forward_with`] handed them to its sink.
    pub attention: Vec<Vec<f32>>,
    pub layer_trace: Option<LayerTrace>,
    /// -ln p(token i | tokens < i) for i >= 1, with [`LogitRows::LastAndLoss`] on a causal
    /// model with an LM head.
    pub token_loss: Option<Vec<f64>>,
}

/// Options checked and turned into what the blocks use.
pub(crate) struct Prepared {
    pub threads: usize,
    /// Per layer, the ablated query heads.
    pub ablate: Vec<Vec<usize>>,
    /// Per layer, the mask: the override of `--mask` on every layer, or the model's own
    /// (causal or none, a sliding window on its windowed layers).
    pub masks: Vec<MaskKind>,
    /// RoPE unless the model has none or `no_pe` drops it.
    pub rope: Option<RopePlan>,
    /// Learned position rows are added.
    pub learned_pos: bool,
}

/// The RoPE of one pass: the global base (or `--rope-base`, which then holds for every
/// layer), the sliding layers' own base if the model has one, the layout.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RopePlan {
    pub base: f64,
    pub local_base: Option<f64>,
    pub style: RopeStyle,
}

/// The RoPE tables of one pass's positions: the global one, and the sliding layers' one
/// when their base differs.
pub(crate) struct RopeTables {
    global: RopeTable,
    local: Option<RopeTable>,
    style: RopeStyle,
}

impl RopeTables {
    /// The table layer `l` rotates with.
    pub fn for_layer(&self, cfg: &ModelConfig, l: usize) -> (&RopeTable, RopeStyle) {
        let t = match (&self.local, cfg.window(l)) {
            (Some(local), Some(_)) => local,
            _ => &self.global,
        };
        (t, self.style)
    }
}

impl Prepared {
    pub fn new(cfg: &ModelConfig, w: &Weights, opts: &ForwardOptions) -> Result<Prepared> {
        check_weights(cfg, w)?;
        let threads = opts.threads.unwrap_or_else(default_threads);
        if threads == 0 {
            return Err(Error::usage("--threads must be at least 1"));
        }
        let mut ablate = vec![Vec::new(); cfg.layers];
        for &(l, h) in &opts.ablate {
            if l >= cfg.layers || h >= cfg.heads {
                return Err(Error::usage(format!(
                    "--ablate {l}.{h}: the model has layers 0..{} and heads 0..{} (LAYER.HEAD, from 0)",
                    cfg.layers - 1,
                    cfg.heads - 1
                )));
            }
            ablate[l].push(h);
        }
        let rope = match (cfg.pos, opts.rope_base) {
            (PosKind::Rope { base, style }, over) => Some(RopePlan {
                base: over.unwrap_or(base),
                local_base: if over.is_some() {
                    None
                } else {
                    cfg.details.local_rope_base
                },
                style,
            }),
            (PosKind::Learned, Some(_)) => {
                return Err(Error::usage(format!(
                    "--rope-base applies to RoPE models; this {} model has learned positions",
                    cfg.arch.name()
                )));
            }
            (PosKind::Learned, None) => None,
        };
        if let Some(plan) = rope {
            // Check the bases and the head size once, before any work.
            RopeTable::scaled(
                plan.base,
                cfg.d_head,
                cfg.rope_dims(),
                &cfg.details.rope_divisors,
                0,
                0,
            )?;
            if let Some(b) = plan.local_base {
                RopeTable::scaled(b, cfg.d_head, cfg.rope_dims(), &[], 0, 0)?;
            }
        }
        let masks = (0..cfg.layers)
            .map(|l| match (&opts.mask, cfg.window(l)) {
                (Some(m), _) => m.clone(),
                (None, Some(w)) => MaskKind::Window(w),
                (None, None) if cfg.causal => MaskKind::Causal,
                (None, None) => MaskKind::None,
            })
            .collect();
        Ok(Prepared {
            threads,
            ablate,
            masks,
            rope: if opts.no_pe { None } else { rope },
            learned_pos: cfg.pos == PosKind::Learned && !opts.no_pe,
        })
    }

    /// The RoPE tables for positions pos0..pos0 + n, if RoPE is applied.
    pub fn rope_tables(
        &self,
        cfg: &ModelConfig,
        pos0: usize,
        n: usize,
    ) -> Result<Option<RopeTables>> {
        let Some(plan) = self.rope else {
            return Ok(None);
        };
        let dims = cfg.rope_dims();
        let global = RopeTable::scaled(
            plan.base,
            cfg.d_head,
            dims,
            &cfg.details.rope_divisors,
            pos0,
            n,
        )?;
        let local = plan
            .local_base
            .map(|b| RopeTable::scaled(b, cfg.d_head, dims, &[], pos0, n))
            .transpose()?;
        Ok(Some(RopeTables {
            global,
            local,
            style: plan.style,
        }))
    }

    /// What block `l` of a pass needs besides its weights.
    pub fn ctx<'a>(
        &self,
        cfg: &'a ModelConfig,
        ropes: Option<&'a RopeTables>,
        l: usize,
    ) -> BlockCtx<'a> {
        BlockCtx {
            cfg,
            threads: self.threads,
            rope: ropes.map(|r| r.for_layer(cfg, l)),
        }
    }
}

/// Each layer's mask resolved for [H, n_q, n_k], resolving each distinct mask once.
pub(crate) fn layer_specs(
    cfg: &ModelConfig,
    masks: &[MaskKind],
    shape: &ProblemShape,
) -> Result<Vec<AttnSpec>> {
    let mut specs: Vec<AttnSpec> = Vec::with_capacity(masks.len());
    for (l, m) in masks.iter().enumerate() {
        let spec = match masks[..l].iter().position(|p| p == m) {
            Some(i) => specs[i].clone(),
            None => AttnSpec::new(
                shape,
                Mask::resolve(m, 1, cfg.heads, shape.n_q, shape.n_k)?,
                false,
                Some(cfg.attn_scale()),
            ),
        };
        specs.push(spec);
    }
    Ok(specs)
}

/// Run the model on `ids` (positions 0..n).
///
/// Errors (exit 2): empty input, an id >= vocab, more tokens than a learned position
/// table has rows, a bad intervention (layer or head out of range, a mask that does not
/// fit, `rope_base` on a model without RoPE), weights that do not fit the config.
pub fn forward(
    cfg: &ModelConfig,
    w: &Weights,
    ids: &[u32],
    opts: &ForwardOptions,
) -> Result<ForwardOutput> {
    let mut attention = vec![Vec::new(); cfg.layers];
    let mut out = forward_with(cfg, w, ids, opts, |l, a| {
        attention[l] = a.to_vec();
        Ok(())
    })?;
    if opts.keep_attention {
        out.attention = attention;
    }
    Ok(out)
}

/// [`forward`], handing each layer's attention weights [heads, n, n] to `sink` as soon as
/// the layer is done (when `keep_attention` is on) instead of keeping them all: one
/// layer's weights are in memory at a time, so a caller can reduce, compress or stream
/// them. [`ForwardOutput::attention`] is then empty. Every product is exact
/// ([`crate::model::qmatmul::exact`]): a one-token text and the last row's logits too.
pub fn forward_with(
    cfg: &ModelConfig,
    w: &Weights,
    ids: &[u32],
    opts: &ForwardOptions,
    sink: impl FnMut(usize, &[f32]) -> Result<()>,
) -> Result<ForwardOutput> {
    crate::model::qmatmul::exact(|| forward_exact(cfg, w, ids, opts, sink))
}

/// A hook over a whole pass: called with the layer (from 0) and the [`Site`] of each
/// activation; it may read or overwrite it. After the last block it is called once more
/// with layer = the number of layers and `Site::ResidPre`: the residual stream the final
/// norm reads.
pub type PassHook<'a> = &'a mut dyn FnMut(usize, Site, &mut [f32]) -> Result<()>;

/// [`forward_with`], calling `hook` at every [`Site`] of every layer (the residual
/// stream entering block l with `Site::ResidPre`): the reads of attribution and the
/// lens, the writes of activation patching.
pub fn forward_hooked(
    cfg: &ModelConfig,
    w: &Weights,
    ids: &[u32],
    opts: &ForwardOptions,
    sink: impl FnMut(usize, &[f32]) -> Result<()>,
    hook: PassHook,
) -> Result<ForwardOutput> {
    crate::model::qmatmul::exact(|| {
        let prep = Prepared::new(cfg, w, opts)?;
        let mut x = vec![0.0f32; ids.len() * cfg.d_model];
        embed(cfg, w, ids, 0, prep.learned_pos, &mut x)?;
        run_layers(cfg, w, ids, x, 0, opts, &prep, sink, Some(hook))
    })
}

/// The rest of a pass from block `start` on, given the residual stream `x` [n, d_model]
/// entering it (from an earlier pass's `Site::ResidPre`): what activation patching
/// reruns after the layer it patches. `ids` are the pass's tokens (for the loss).
pub fn forward_from(
    cfg: &ModelConfig,
    w: &Weights,
    ids: &[u32],
    x: Vec<f32>,
    start: usize,
    opts: &ForwardOptions,
    hook: PassHook,
) -> Result<ForwardOutput> {
    if x.len() != ids.len() * cfg.d_model || start > cfg.layers {
        return Err(Error::usage(format!(
            "a pass from layer {start} needs {} x {} residual values and a layer in 0..={}; got {} values",
            ids.len(),
            cfg.d_model,
            cfg.layers,
            x.len()
        )));
    }
    crate::model::qmatmul::exact(|| {
        let prep = Prepared::new(cfg, w, opts)?;
        run_layers(
            cfg,
            w,
            ids,
            x,
            start,
            opts,
            &prep,
            |_, _| Ok(()),
            Some(hook),
        )
    })
}

fn forward_exact(
    cfg: &ModelConfig,
    w: &Weights,
    ids: &[u32],
    opts: &ForwardOptions,
    sink: impl FnMut(usize, &[f32]) -> Result<()>,
) -> Result<ForwardOutput> {
    let prep = Prepared::new(cfg, w, opts)?;
    let mut x = vec![0.0f32; ids.len() * cfg.d_model];
    embed(cfg, w, ids, 0, prep.learned_pos, &mut x)?;
    run_layers(cfg, w, ids, x, 0, opts, &prep, sink, None)
}

/// Blocks `start..` on the residual stream x, then the final norm and the logits.
#[allow(clippy::too_many_arguments)]
fn run_layers(
    cfg: &ModelConfig,
    w: &Weights,
    ids: &[u32],
    mut x: Vec<f32>,
    start: usize,
    opts: &ForwardOptions,
    prep: &Prepared,
    mut sink: impl FnMut(usize, &[f32]) -> Result<()>,
    mut hook: Option<PassHook>,
) -> Result<ForwardOutput> {
    let n = ids.len();
    if let Some(l) = opts.trace_layer
        && l >= cfg.layers
    {
        return Err(Error::usage(format!(
            "trace layer {l} is out of range; the model has layers 0..{}",
            cfg.layers - 1
        )));
    }
    let shape = ProblemShape {
        batch: 1,
        heads: cfg.heads,
        kv_heads: cfg.kv_heads,
        n_q: n,
        n_k: n,
        d: cfg.d_head,
        dv: cfg.d_head,
    };
    let specs = layer_specs(cfg, &prep.masks, &shape)?;
    let ropes = prep.rope_tables(cfg, 0, n)?;
    let mut buf = Buffers::default();
    let mut weights = Vec::new();
    let mut trace = None;
    for (l, lw) in w.layers.iter().enumerate().skip(start) {
        let mut tr = (opts.trace_layer == Some(l)).then(|| LayerTrace::new(l));
        let mut layer_hook = hook
            .as_mut()
            .map(|h| move |site: Site, a: &mut [f32]| h(l, site, a));
        if let Some(h) = layer_hook.as_mut() {
            h(Site::ResidPre, &mut x)?;
        }
        let lo = LayerOpts {
            ablate: &prep.ablate[l],
            weights: opts.keep_attention.then_some(&mut weights),
            last_row_only: false,
            trace: tr.as_mut(),
            hook: layer_hook.as_mut().map(|h| h as Hook),
        };
        let ctx = prep.ctx(cfg, ropes.as_ref(), l);
        let keys = Keys::Own { spec: &specs[l] };
        block_forward(&ctx, lw, &mut x, n, keys, &mut buf, lo)?;
        if opts.keep_attention {
            sink(l, &weights)?;
        }
        if tr.is_some() {
            trace = tr;
        }
    }
    if let Some(h) = hook.as_mut() {
        h(cfg.layers, Site::ResidPre, &mut x)?;
    }
    drop(weights);
    drop(buf);
    let hidden = final_hidden(cfg, w, x);
    let (logits, token_loss) = match opts.logits {
        LogitRows::All => (lm_head(cfg, w, &hidden, n, prep.threads)?, None),
        LogitRows::Last => (last_logits(cfg, w, &hidden, n, prep.threads)?, None),
        LogitRows::LastAndLoss => {
            let losses = if cfg.causal {
                losses_by_chunks(cfg, w, &hidden, ids, prep.threads)?
            } else {
                None
            };
            (last_logits(cfg, w, &hidden, n, prep.threads)?, losses)
        }
    };
    Ok(ForwardOutput {
        logits,
        hidden,
        attention: vec![Vec::new(); cfg.layers],
        layer_trace: trace,
        token_loss,
    })
}

/// The last row's logits [1, vocab].
fn last_logits(
    cfg: &ModelConfig,
    w: &Weights,
    hidden: &[f32],
    n: usize,
    threads: usize,
) -> Result<Option<Vec<f32>>> {
    lm_head(cfg, w, &hidden[(n - 1) * cfg.d_model..], 1, threads)
}

/// -ln p(ids[i] | ids[..i]) for i >= 1, the LM head run on [`LOSS_CHUNK_ROWS`] rows at a
/// time; None when the model has no LM head.
fn losses_by_chunks(
    cfg: &ModelConfig,
    w: &Weights,
    hidden: &[f32],
    ids: &[u32],
    threads: usize,
) -> Result<Option<Vec<f64>>> {
    let (n, d) = (ids.len(), cfg.d_model);
    let mut losses = Vec::with_capacity(n.saturating_sub(1));
    // Row r predicts token r + 1: rows 0..n-1.
    let mut start = 0;
    while start + 1 < n {
        let rows = LOSS_CHUNK_ROWS.min(n - 1 - start);
        let Some(logits) = lm_head(cfg, w, &hidden[start * d..], rows, threads)? else {
            return Ok(None);
        };
        losses.extend(token_loss(
            &logits,
            cfg.vocab,
            &ids[start..start + rows + 1],
        ));
        start += rows;
    }
    Ok(Some(losses))
}

/// x [n, d_model] = token embeddings (+ learned positions pos0.. + BERT's type 0 row),
/// normed if the model norms its embeddings.
pub(crate) fn embed(
    cfg: &ModelConfig,
    w: &Weights,
    ids: &[u32],
    pos0: usize,
    learned_pos: bool,
    x: &mut [f32],
) -> Result<()> {
    let d = cfg.d_model;
    if ids.is_empty() {
        return Err(Error::usage(
            "no tokens to run: give a non-empty --text or --ids",
        ));
    }
    if let Some(&bad) = ids.iter().find(|&&id| id as usize >= cfg.vocab) {
        return Err(Error::usage(format!(
            "token id {bad} is out of range: the vocabulary has {} ids (0..{})",
            cfg.vocab,
            cfg.vocab - 1
        )));
    }
    let end = pos0 + ids.len();
    if learned_pos && end > cfg.context {
        return Err(Error::usage(format!(
            "{end} tokens but the model's learned position table has {} rows (its context); give at most {} tokens",
            cfg.context, cfg.context
        )));
    }
    for (i, (row, &id)) in x.chunks_exact_mut(d).zip(ids).enumerate() {
        w.tok_embed.row_into(id as usize, row);
        if let Some(s) = cfg.details.embed_scale {
            let s = s as f32;
            row.iter_mut().for_each(|a| *a *= s);
        }
        if learned_pos && let Some(pe) = &w.pos_embed {
            let p = &pe[(pos0 + i) * d..][..d];
            row.iter_mut().zip(p).for_each(|(a, b)| *a += b);
        }
        if let Some(te) = &w.type_embed {
            row.iter_mut().zip(te).for_each(|(a, b)| *a += b);
        }
    }
    if let Some(norm) = &w.embed_norm {
        let raw = x.to_vec();
        norm_rows(cfg.norm, &raw, d, norm, cfg.norm_eps, x);
    }
    Ok(())
}

/// The final norm (pre-norm models) of the residual stream.
pub(crate) fn final_hidden(cfg: &ModelConfig, w: &Weights, x: Vec<f32>) -> Vec<f32> {
    match &w.final_norm {
        Some(norm) => {
            let mut out = vec![0.0f32; x.len()];
            norm_rows(cfg.norm, &x, cfg.d_model, norm, cfg.norm_eps, &mut out);
            out
        }
        None => x,
    }
}

/// Logits [m, vocab] of hidden rows [m, d_model]: the LM head, or the token embedding
/// when tied; None when the model has neither.
pub(crate) fn lm_head(
    cfg: &ModelConfig,
    w: &Weights,
    hidden: &[f32],
    m: usize,
    threads: usize,
) -> Result<Option<Vec<f32>>> {
    let (head, bias) = if cfg.tied_embeddings {
        (&w.tok_embed, None)
    } else if let Some(lin) = &w.lm_head {
        (&lin.w, lin.b.as_deref())
    } else {
        return Ok(None);
    };
    let mut logits = vec![0.0f32; m * cfg.vocab];
    matmul_matrix(
        &hidden[..m * cfg.d_model],
        m,
        cfg.d_model,
        head,
        cfg.vocab,
        bias,
        &mut logits,
        threads,
    )?;
    if let Some(cap) = cfg.details.final_softcap {
        softcap_slice(&mut logits, cap);
    }
    Ok(Some(logits))
}

/// Check that every tensor has the size the config asks for, so that a mismatched
/// model is an error that names the tensor, never a panic.
pub fn check_weights(cfg: &ModelConfig, w: &Weights) -> Result<()> {
    let (d, dh, h, g) = (cfg.d_model, cfg.d_head, cfg.heads, cfg.kv_heads);
    if !cfg.details.windows.is_empty() && cfg.details.windows.len() != cfg.layers {
        return Err(Error::usage(format!(
            "model config: {} layer attention kinds for {} layers",
            cfg.details.windows.len(),
            cfg.layers
        )));
    }
    if cfg.details.windows.contains(&Some(0)) {
        return Err(Error::usage("model config: a sliding window of 0 tokens"));
    }
    if [cfg.layers, d, dh, h, g, cfg.vocab, cfg.d_ff].contains(&0) || !h.is_multiple_of(g) {
        return Err(Error::usage(format!(
            "model config: every size must be >= 1 and heads ({h}) a multiple of kv_heads ({g})"
        )));
    }
    let bad = |name: String, have: usize, want: usize| {
        Err(Error::usage(format!(
            "model tensor {name} holds {have} values; the config needs {want}"
        )))
    };
    let sized = |name: String, have: usize, want: usize| -> Result<()> {
        if have == want {
            Ok(())
        } else {
            bad(name, have, want)
        }
    };
    let linear = |name: String, lin: &crate::model::Linear, out: usize, inp: usize| -> Result<()> {
        if lin.out_dim != out || lin.in_dim != inp {
            return Err(Error::usage(format!(
                "model tensor {name} is [{}, {}]; the config needs [{out}, {inp}]",
                lin.out_dim, lin.in_dim
            )));
        }
        sized(format!("{name}.weight"), lin.w.len(), out * inp)?;
        match &lin.b {
            Some(b) => sized(format!("{name}.bias"), b.len(), out),
            None => Ok(()),
        }
    };
    let norm = |name: String, n: &crate::model::Norm| -> Result<()> {
        sized(format!("{name}.weight"), n.w.len(), d)?;
        match &n.b {
            Some(b) => sized(format!("{name}.bias"), b.len(), d),
            None => Ok(()),
        }
    };
    sized("token_embedding".into(), w.tok_embed.len(), cfg.vocab * d)?;
    if cfg.pos == PosKind::Learned {
        match &w.pos_embed {
            Some(p) => sized("position_embedding".into(), p.len(), cfg.context * d)?,
            None => {
                return Err(Error::usage(
                    "the model has learned positions but no position_embedding tensor",
                ));
            }
        }
    }
    if let Some(t) = &w.type_embed {
        sized("token_type_embedding".into(), t.len(), d)?;
    }
    if let Some(n) = &w.embed_norm {
        norm("embedding_norm".into(), n)?;
    }
    if w.layers.len() != cfg.layers {
        return Err(Error::usage(format!(
            "the model has {} blocks of tensors; the config says {} layers",
            w.layers.len(),
            cfg.layers
        )));
    }
    for (l, lw) in w.layers.iter().enumerate() {
        norm(format!("layer {l} attn_norm"), &lw.attn_norm)?;
        norm(format!("layer {l} mlp_norm"), &lw.mlp_norm)?;
        linear(format!("layer {l} wq"), &lw.wq, h * dh, d)?;
        linear(format!("layer {l} wk"), &lw.wk, g * dh, d)?;
        linear(format!("layer {l} wv"), &lw.wv, g * dh, d)?;
        linear(format!("layer {l} wo"), &lw.wo, d, h * dh)?;
        let sized_norm = |name: String, n: &Option<crate::model::Norm>, want: usize| {
            n.as_ref()
                .map_or(Ok(()), |n| sized(format!("{name}.weight"), n.w.len(), want))
        };
        sized_norm(format!("layer {l} q_norm"), &lw.extra.q_norm, dh)?;
        sized_norm(format!("layer {l} k_norm"), &lw.extra.k_norm, dh)?;
        sized_norm(format!("layer {l} post_attn_norm"), &lw.extra.post_attn, d)?;
        sized_norm(format!("layer {l} post_mlp_norm"), &lw.extra.post_mlp, d)?;
        match &lw.mlp {
            crate::model::Mlp::Gated { gate, up, down } => {
                linear(format!("layer {l} mlp gate"), gate, cfg.d_ff, d)?;
                linear(format!("layer {l} mlp up"), up, cfg.d_ff, d)?;
                linear(format!("layer {l} mlp down"), down, d, cfg.d_ff)?;
            }
            crate::model::Mlp::Plain { up, down } => {
                linear(format!("layer {l} mlp up"), up, cfg.d_ff, d)?;
                linear(format!("layer {l} mlp down"), down, d, cfg.d_ff)?;
            }
        }
    }
    if let Some(n) = &w.final_norm {
        norm("final_norm".into(), n)?;
    }
    if !cfg.tied_embeddings
        && let Some(head) = &w.lm_head
    {
        linear("lm_head".into(), head, cfg.vocab, d)?;
    }
    Ok(())
}
