//! Activation patching (Meng et al. 2022; Wang et al. 2022): a clean and a corrupt run of
//! two texts of the same length, then one corrupt run per site with that one activation
//! replaced by the clean run's, scored by the normalised logit difference
//! (LD_patched - LD_corrupt) / (LD_clean - LD_corrupt) (Zhang & Nanda 2023).
//!
//! A patched run recomputes only what the patch can change. A causal model's rows before
//! position p do not depend on row p, so a patch at (layer l, position p) reruns blocks
//! l.. on rows p.. only, reading the rows before p from the corrupt run's keys and values
//! (a KV cache filled once); and a patch whose values are bit for bit the corrupt run's
//! own (every position before the texts' first difference) is the corrupt run itself.

use crate::error::{Error, Result};
use crate::kernel::default_threads;
use crate::model::block::{Buffers, Hook, Keys, LayerOpts, Site, block_forward};
use crate::model::block_batch::{BatchBuffers, Seq, batchable, blocks_forward};
use crate::model::cache::KvCache;
use crate::model::config::ModelConfig;
use crate::model::forward::{
    ForwardOptions, PassHook, Prepared, RopeTables, check_weights, embed, final_hidden,
};
use crate::model::matrix::Matrix;
use crate::model::softcap::softcap_slice;
use crate::model::weights::{LayerWeights, Linear, Mlp, Weights};

fn dense(lin: &Linear) -> Linear {
    Linear {
        w: Matrix::F32(lin.w.to_f32().into_owned()),
        ..lin.clone()
    }
}

/// A block's weights with every matrix in f32.
fn dense_layer(lw: &LayerWeights) -> LayerWeights {
    LayerWeights {
        wq: dense(&lw.wq),
        wk: dense(&lw.wk),
        wv: dense(&lw.wv),
        wo: dense(&lw.wo),
        mlp: match &lw.mlp {
            Mlp::Gated { gate, up, down } => Mlp::Gated {
                gate: dense(gate),
                up: dense(up),
                down: dense(down),
            },
            Mlp::Plain { up, down } => Mlp::Plain {
                up: dense(up),
                down: dense(down),
            },
        },
        ..lw.clone()
    }
}

/// Which activations are patched, one site at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PatchWhat {
    /// The residual stream entering block l at position p.
    #[default]
    Resid,
    /// Head h's output of layer l (before W_O) at every position.
    Heads,
    /// The attention output of block l at position p.
    AttnOut,
    /// The MLP output of block l at position p.
    MlpOut,
}

impl PatchWhat {
    pub const ALL: [PatchWhat; 4] = [
        PatchWhat::Resid,
        PatchWhat::Heads,
        PatchWhat::AttnOut,
        PatchWhat::MlpOut,
    ];

    /// The sites named as the command line and scene files write them.
    pub fn from_name(s: &str) -> Option<PatchWhat> {
        PatchWhat::ALL.into_iter().find(|w| w.name() == s)
    }

    pub fn name(self) -> &'static str {
        match self {
            PatchWhat::Resid => "resid",
            PatchWhat::Heads => "heads",
            PatchWhat::AttnOut => "attn-out",
            PatchWhat::MlpOut => "mlp-out",
        }
    }

    /// Columns of a row: positions, or heads for [`PatchWhat::Heads`].
    pub fn columns(self, cfg: &ModelConfig, n: usize) -> usize {
        match self {
            PatchWhat::Heads => cfg.heads,
            _ => n,
        }
    }

    fn site(self) -> Site {
        match self {
            PatchWhat::Resid => Site::ResidPre,
            PatchWhat::Heads => Site::HeadOut,
            PatchWhat::AttnOut => Site::AttnOut,
            PatchWhat::MlpOut => Site::MlpOut,
        }
    }
}

/// The logit difference logit(target) - logit(foil) at the last position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogitPair {
    pub target: u32,
    pub foil: u32,
}

/// What a patching sweep found.
#[derive(Debug, Clone, PartialEq)]
pub struct PatchResult {
    pub what: PatchWhat,
    pub clean_ld: f64,
    pub corrupt_ld: f64,
    /// Per layer, per column (position or head): the normalised metric.
    pub rows: Vec<Vec<f64>>,
    /// Per layer, per column: the patched run's logit difference.
    pub patched_ld: Vec<Vec<f64>>,
    /// With [`patch_sweep_keeping`]: the final hidden state (after the final norm) at the
    /// last position of the clean run, the corrupt run and, per layer and column, each
    /// patched run, from which [`top_tokens`] reads a run's prediction. Empty otherwise.
    pub hidden: KeptHidden,
}

/// The final hidden states a sweep keeps (see [`PatchResult::hidden`]).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct KeptHidden {
    pub clean: Vec<f32>,
    pub corrupt: Vec<f32>,
    /// [layers][columns]; a site that is the corrupt run itself keeps an empty vector.
    pub patched: Vec<Vec<Vec<f32>>>,
}

impl KeptHidden {
    /// The patched run's hidden state at (layer, column), the corrupt run's where the
    /// site changed nothing; None if the sweep kept none.
    pub fn at(&self, layer: usize, col: usize) -> Option<&[f32]> {
        let h = self.patched.get(layer)?.get(col)?;
        let h = if h.is_empty() { &self.corrupt } else { h };
        (!h.is_empty()).then_some(h.as_slice())
    }
}

/// The `k` most likely next tokens of a final hidden state (after the final norm) that a
/// sweep kept: the unembedding (with the model's soft cap), the softmax.
pub fn top_tokens(
    cfg: &ModelConfig,
    w: &Weights,
    hidden: &[f32],
    k: usize,
) -> Result<Vec<crate::model::predict::TopToken>> {
    if hidden.len() != cfg.d_model {
        return Err(Error::Internal(format!(
            "a kept hidden state has {} values; the model's d_model is {}",
            hidden.len(),
            cfg.d_model
        )));
    }
    let Some(logits) = crate::model::forward::lm_head(cfg, w, hidden, 1, 1)? else {
        return Err(Error::usage(
            "this model has no LM head: it gives no tokens",
        ));
    };
    Ok(crate::model::predict::top_k(&logits, k))
}

/// Rows of kept hidden states unembedded at once by [`patched_tops`] (their logits are
/// this many rows of the vocabulary).
const TOPS_ROWS: usize = 128;

/// The `k` most likely next tokens of every patched run a sweep kept, [layers][columns]
/// (a site that changed nothing: the corrupt run's), the unembedding done in batches of
/// rows. Empty when the sweep kept nothing.
pub fn patched_tops(
    cfg: &ModelConfig,
    w: &Weights,
    kept: &KeptHidden,
    k: usize,
    threads: usize,
) -> Result<Vec<Vec<Vec<crate::model::predict::TopToken>>>> {
    let d = cfg.d_model;
    let sites: Vec<(usize, usize)> = (0..kept.patched.len())
        .flat_map(|l| (0..kept.patched[l].len()).map(move |c| (l, c)))
        .collect();
    let mut out: Vec<Vec<Vec<_>>> = kept
        .patched
        .iter()
        .map(|r| vec![Vec::new(); r.len()])
        .collect();
    for chunk in sites.chunks(TOPS_ROWS) {
        let mut rows = Vec::with_capacity(chunk.len() * d);
        for &(l, c) in chunk {
            let h = kept.at(l, c).ok_or_else(|| {
                Error::Internal(format!("no kept hidden state at layer {l}, column {c}"))
            })?;
            rows.extend_from_slice(h);
        }
        let Some(logits) =
            crate::model::forward::lm_head(cfg, w, &rows, chunk.len(), threads.max(1))?
        else {
            return Err(Error::usage(
                "this model has no LM head: it gives no tokens",
            ));
        };
        for (i, &(l, c)) in chunk.iter().enumerate() {
            out[l][c] = crate::model::predict::top_k(&logits[i * cfg.vocab..][..cfg.vocab], k);
        }
    }
    Ok(out)
}

/// One run's activations at every layer: [layers][n * width] for the chosen site.
struct Recorded {
    /// The residual stream entering each block [n, d_model].
    resid: Vec<Vec<f32>>,
    /// The site being patched, per layer.
    site: Vec<Vec<f32>>,
}

/// A causal model with a KV cache of one run: a pass from (layer, position) on.
struct Runner<'a> {
    cfg: &'a ModelConfig,
    w: &'a Weights,
    prep: Prepared,
    n: usize,
    /// The blocks' weights, dequantized once: every rerun multiplies by them again.
    layers: Vec<LayerWeights>,
    /// RoPE tables for the rows p..n of a run that starts at position p.
    ropes: Vec<Option<RopeTables>>,
    unembed: [Vec<f32>; 2],
    bias: [f32; 2],
}

/// One run in progress: its rows p..n of the residual stream and its keys and values.
struct Run {
    x: Vec<f32>,
    cache: KvCache,
    p: usize,
}

impl<'a> Runner<'a> {
    fn new(
        cfg: &'a ModelConfig,
        w: &'a Weights,
        n: usize,
        pair: LogitPair,
        threads: usize,
    ) -> Result<Self> {
        check_weights(cfg, w)?;
        if !cfg.causal {
            return Err(Error::usage(format!(
                "patching needs a causal model with an LM head; this {} model is bidirectional",
                cfg.arch.name()
            )));
        }
        let (head, bias) = if cfg.tied_embeddings {
            (&w.tok_embed, None)
        } else if let Some(lin) = &w.lm_head {
            (&lin.w, lin.b.as_deref())
        } else {
            return Err(Error::usage(format!(
                "this {} model has no LM head: it gives no logits to patch",
                cfg.arch.name()
            )));
        };
        for (flag, id) in [("--target", pair.target), ("--foil", pair.foil)] {
            if id as usize >= cfg.vocab {
                return Err(Error::usage(format!(
                    "{flag} #{id} is out of range; the vocabulary has {} ids (0..{})",
                    cfg.vocab,
                    cfg.vocab - 1
                )));
            }
        }
        let row = |id: u32| {
            let mut r = vec![0.0f32; cfg.d_model];
            head.row_into(id as usize, &mut r);
            r
        };
        let b = |id: u32| bias.map_or(0.0, |b| b[id as usize]);
        let opts = ForwardOptions {
            threads: Some(threads),
            keep_attention: false,
            ..ForwardOptions::default()
        };
        let prep = Prepared::new(cfg, w, &opts)?;
        let ropes = (0..n)
            .map(|p| prep.rope_tables(cfg, p, n - p))
            .collect::<Result<_>>()?;
        Ok(Runner {
            cfg,
            w,
            prep,
            ropes,
            n,
            layers: w.layers.iter().map(dense_layer).collect(),
            unembed: [row(pair.target), row(pair.foil)],
            bias: [b(pair.target), b(pair.foil)],
        })
    }

    /// Block `l` on a run's rows `p..n`, the rows before p read from its cache; the hook
    /// sees the block's sites (rows p..n).
    fn block(&self, l: usize, run: &mut Run, buf: &mut Buffers, hook: PassHook) -> Result<()> {
        let cfg = self.cfg;
        let rows = self.n - run.p;
        hook(l, Site::ResidPre, &mut run.x)?;
        let mut layer_hook = |site: Site, a: &mut [f32]| hook(l, site, a);
        let keys = Keys::Cache {
            cache: &mut run.cache.layers[l],
            len: run.p,
            capacity: run.cache.capacity,
            mask: &self.prep.masks[l],
        };
        let lo = LayerOpts {
            ablate: &self.prep.ablate[l],
            weights: None,
            last_row_only: false,
            trace: None,
            hook: Some(&mut layer_hook as Hook),
        };
        let ctx = self.prep.ctx(cfg, self.ropes[run.p].as_ref(), l);
        block_forward(&ctx, &self.layers[l], &mut run.x, rows, keys, buf, lo)
    }

    /// Block `k` (a [`batchable`] one) on every run, in batches of up to [`BATCH_ROWS`]
    /// rows.
    fn batch(&self, k: usize, runs: &mut [Run], buf: &mut BatchBuffers) -> Result<()> {
        let d = self.cfg.d_model;
        let mut from = 0;
        while from < runs.len() {
            let mut to = from;
            let mut rows = 0;
            while to < runs.len() && (to == from || rows + runs[to].x.len() / d <= BATCH_ROWS) {
                rows += runs[to].x.len() / d;
                to += 1;
            }
            let mut seqs: Vec<Seq> = runs[from..to]
                .iter_mut()
                .map(|run| {
                    let capacity = run.cache.capacity;
                    Seq {
                        x: &mut run.x,
                        cache: &mut run.cache.layers[k],
                        len: run.p,
                        capacity,
                        rope: self.prep.ctx(self.cfg, self.ropes[run.p].as_ref(), k).rope,
                    }
                })
                .collect();
            blocks_forward(
                self.cfg,
                &self.layers[k],
                &self.prep.ablate[k],
                &self.prep.masks[k],
                &mut seqs,
                buf,
                self.prep.threads,
            )?;
            from = to;
        }
        Ok(())
    }

    /// The last position's logit difference of a run that has been through every block.
    fn finish(&self, run: &Run) -> Result<(f64, Vec<f32>)> {
        let cfg = self.cfg;
        let last = run.x[run.x.len() - cfg.d_model..].to_vec();
        let hidden = final_hidden(cfg, self.w, last);
        let mut logit = [0.0f32; 2];
        for ((out, row), b) in logit.iter_mut().zip(&self.unembed).zip(self.bias) {
            let dot: f64 = hidden
                .iter()
                .zip(row)
                .map(|(&a, &b)| a as f64 * b as f64)
                .sum();
            *out = dot as f32 + b;
        }
        if let Some(cap) = cfg.details.final_softcap {
            softcap_slice(&mut logit, cap);
        }
        let ld = logit[0] as f64 - logit[1] as f64;
        if !ld.is_finite() {
            return Err(Error::usage(
                "a patched run gave a non-finite logit: the model file or the inputs give non-finite numbers",
            ));
        }
        Ok((ld, hidden))
    }

    /// A whole run of `ids` into `cache`, recording the residual entering each block and
    /// the activations at `site`.
    fn record(
        &self,
        ids: &[u32],
        cache: &mut KvCache,
        site: Site,
    ) -> Result<(f64, Vec<f32>, Recorded)> {
        let cfg = self.cfg;
        let mut x = vec![0.0f32; ids.len() * cfg.d_model];
        embed(cfg, self.w, ids, 0, self.prep.learned_pos, &mut x)?;
        let mut rec = Recorded {
            resid: vec![Vec::new(); cfg.layers],
            site: vec![Vec::new(); cfg.layers],
        };
        let mut buf = Buffers::default();
        let mut run = Run {
            x,
            cache: std::mem::replace(cache, KvCache::new(0, 0, 0, 0)),
            p: 0,
        };
        let mut hook = |l: usize, s: Site, a: &mut [f32]| {
            if l < cfg.layers {
                if s == Site::ResidPre {
                    rec.resid[l] = a.to_vec();
                }
                if s == site && s != Site::ResidPre {
                    rec.site[l] = a.to_vec();
                }
            }
            Ok(())
        };
        for l in 0..cfg.layers {
            self.block(l, &mut run, &mut buf, &mut hook)?;
        }
        let (ld, hidden) = self.finish(&run)?;
        *cache = run.cache;
        cache.len = ids.len();
        Ok((ld, hidden, rec))
    }
}

/// Most rows of the residual stream one batched block takes at once (its MLP's hidden
/// layer is this many rows of d_ff).
const BATCH_ROWS: usize = 512;

/// Most tokens a patching sweep takes: every site is one rerun.
pub const MAX_PATCH_TOKENS: usize = 1024;

/// Patch every site of `what`, one at a time, from the clean run into the corrupt run.
/// `progress(done, total)` is called after each rerun (and may return an error to stop,
/// e.g. a cancel).
///
/// Errors (exit 2): texts of different lengths, an empty or too long text, ids out of
/// range, a bidirectional model or one without an LM head, a clean and corrupt logit
/// difference that are equal (nothing to restore).
#[allow(clippy::too_many_arguments)]
pub fn patch_sweep(
    cfg: &ModelConfig,
    w: &Weights,
    clean: &[u32],
    corrupt: &[u32],
    pair: LogitPair,
    what: PatchWhat,
    threads: Option<usize>,
    progress: &mut dyn FnMut(usize, usize) -> Result<()>,
) -> Result<PatchResult> {
    crate::model::qmatmul::exact(|| {
        sweep(cfg, w, clean, corrupt, pair, what, threads, false, progress)
    })
}

/// [`patch_sweep`], keeping every run's final hidden state at the last position (d_model
/// floats per site) so that a viewer can show each patched run's prediction.
#[allow(clippy::too_many_arguments)]
pub fn patch_sweep_keeping(
    cfg: &ModelConfig,
    w: &Weights,
    clean: &[u32],
    corrupt: &[u32],
    pair: LogitPair,
    what: PatchWhat,
    threads: Option<usize>,
    progress: &mut dyn FnMut(usize, usize) -> Result<()>,
) -> Result<PatchResult> {
    crate::model::qmatmul::exact(|| {
        sweep(cfg, w, clean, corrupt, pair, what, threads, true, progress)
    })
}

#[allow(clippy::too_many_arguments)]
fn sweep(
    cfg: &ModelConfig,
    w: &Weights,
    clean: &[u32],
    corrupt: &[u32],
    pair: LogitPair,
    what: PatchWhat,
    threads: Option<usize>,
    keep: bool,
    progress: &mut dyn FnMut(usize, usize) -> Result<()>,
) -> Result<PatchResult> {
    let n = clean.len();
    if n != corrupt.len() {
        return Err(Error::usage(format!(
            "the clean text has {n} tokens and the corrupt one {}; patching needs the same number",
            corrupt.len()
        )));
    }
    if n == 0 || n > MAX_PATCH_TOKENS {
        return Err(Error::usage(format!(
            "patching takes 1..={MAX_PATCH_TOKENS} tokens; the texts have {n}"
        )));
    }
    let threads = threads.unwrap_or_else(default_threads);
    if threads == 0 {
        return Err(Error::usage("--threads must be at least 1"));
    }
    let runner = Runner::new(cfg, w, n, pair, threads)?;
    let site = what.site();
    let mut clean_cache = KvCache::new(cfg.layers, cfg.kv_heads, cfg.d_head, n);
    let (clean_ld, clean_hidden, clean_rec) = runner.record(clean, &mut clean_cache, site)?;
    drop(clean_cache);
    let mut base = KvCache::new(cfg.layers, cfg.kv_heads, cfg.d_head, n);
    let (corrupt_ld, corrupt_hidden, corrupt_rec) = runner.record(corrupt, &mut base, site)?;
    let denom = clean_ld - corrupt_ld;
    if denom == 0.0 {
        return Err(Error::usage(format!(
            "the clean and corrupt texts give the same logit difference ({clean_ld:.4}): there is no effect for a patch to restore; choose texts, --target and --foil that differ"
        )));
    }
    let cols = what.columns(cfg, n);
    let (d, dh) = (cfg.d_model, cfg.d_head);
    let hw = cfg.heads * dh;
    let total = cfg.layers * cols;
    let mut patched = vec![vec![corrupt_ld; cols]; cfg.layers];
    let mut kept = KeptHidden::default();
    if keep {
        kept.clean = clean_hidden;
        kept.corrupt = corrupt_hidden;
        kept.patched = vec![vec![Vec::new(); cols]; cfg.layers];
    }
    let mut buf = Buffers::default();
    let mut batch = BatchBuffers::default();
    let mut done = 0;
    #[allow(clippy::needless_range_loop)]
    for l in 0..cfg.layers {
        // Every site of layer l: the column and the first row its clean values change (a
        // site whose values are the corrupt run's own is the corrupt run itself).
        let mut runs = Vec::new();
        let mut cols_run = Vec::new();
        for c in 0..cols {
            let from = match what {
                PatchWhat::Heads => {
                    let at = |i: usize| i * hw + c * dh..i * hw + (c + 1) * dh;
                    (0..n).find(|&i| clean_rec.site[l][at(i)] != corrupt_rec.site[l][at(i)])
                }
                PatchWhat::Resid => (clean_rec.resid[l][c * d..][..d]
                    != corrupt_rec.resid[l][c * d..][..d])
                    .then_some(c),
                _ => (clean_rec.site[l][c * d..][..d] != corrupt_rec.site[l][c * d..][..d])
                    .then_some(c),
            };
            if let Some(p) = from {
                runs.push(Run {
                    x: corrupt_rec.resid[l][p * d..].to_vec(),
                    cache: base.clone(),
                    p,
                });
                cols_run.push(c);
            } else {
                done += 1;
                progress(done, total)?;
            }
        }
        // The runs go through each block together, so that its weights are read from
        // memory once for all of them: after the patched block, as one batch of rows.
        for k in l..cfg.layers {
            if k > l && batchable(cfg, &runner.layers[k]) {
                runner.batch(k, &mut runs, &mut batch)?;
                continue;
            }
            for (run, &c) in runs.iter_mut().zip(&cols_run) {
                let p = run.p;
                let mut hook = |layer: usize, s: Site, a: &mut [f32]| {
                    if layer != l || s != site {
                        return Ok(());
                    }
                    match what {
                        PatchWhat::Heads => {
                            for (r, row) in a.chunks_exact_mut(hw).enumerate() {
                                let i = p + r;
                                row[c * dh..][..dh]
                                    .copy_from_slice(&clean_rec.site[l][i * hw + c * dh..][..dh]);
                            }
                        }
                        PatchWhat::Resid => {
                            a[..d].copy_from_slice(&clean_rec.resid[l][p * d..][..d])
                        }
                        _ => a[..d].copy_from_slice(&clean_rec.site[l][p * d..][..d]),
                    }
                    Ok(())
                };
                runner.block(k, run, &mut buf, &mut hook)?;
            }
        }
        for (run, &c) in runs.iter().zip(&cols_run) {
            let (ld, hidden) = runner.finish(run)?;
            patched[l][c] = ld;
            if keep {
                kept.patched[l][c] = hidden;
            }
            done += 1;
            progress(done, total)?;
        }
    }
    let rows = patched
        .iter()
        .map(|r| {
            r.iter() // A site that changed nothing scores 0 (not -0 when the difference falls).
                .map(|&ld| {
                    if ld == corrupt_ld {
                        0.0
                    } else {
                        (ld - corrupt_ld) / denom
                    }
                })
                .collect()
        })
        .collect();
    Ok(PatchResult {
        what,
        clean_ld,
        corrupt_ld,
        rows,
        patched_ld: patched,
        hidden: kept,
    })
}
