//! The logit lens (nostalgebraist 2020): the residual stream after each block read as if
//! it were the last, through the model's final norm (recomputed for every layer and
//! position, unlike attribution's frozen scale) and its unembedding.

use std::cell::RefCell;

use crate::error::{Error, Result};
use crate::kernel::default_threads;
use crate::model::Site;
use crate::model::config::ModelConfig;
use crate::model::forward::{ForwardOptions, LogitRows, final_hidden, forward_hooked, lm_head};
use crate::model::predict::{TopToken, top_k};
use crate::model::weights::Weights;

/// Most logits held at once while reading the layers (rows x vocab f32): 64 MB.
const MAX_LOGIT_BYTES: usize = 64 << 20;

/// Most residual values [(layers + 1) x n x d_model] a lens keeps: 256 MB of f32.
pub const MAX_LENS_VALUES: u64 = 64 << 20;

/// One cell of the lens: layer l, position p.
#[derive(Debug, Clone, PartialEq)]
pub struct LensCell {
    pub top: Vec<TopToken>,
    /// The target's rank (0 = top) and probability, when a target was asked for.
    pub target: Option<(usize, f64)>,
}

/// [layers + 1][n] cells: row 0 the embeddings, row l the residual after block l (row
/// L is the model's own output).
pub fn logit_lens(
    cfg: &ModelConfig,
    w: &Weights,
    ids: &[u32],
    top: usize,
    target: Option<u32>,
    threads: Option<usize>,
) -> Result<Vec<Vec<LensCell>>> {
    logit_lens_targets(cfg, w, ids, top, &vec![target; ids.len()], threads)
}

/// The lens with a target of its own at each position (`targets[p]`, e.g. the text's
/// next token there), whose rank and probability every layer's cell at p reports.
pub fn logit_lens_targets(
    cfg: &ModelConfig,
    w: &Weights,
    ids: &[u32],
    top: usize,
    targets: &[Option<u32>],
    threads: Option<usize>,
) -> Result<Vec<Vec<LensCell>>> {
    let (n, d, rows) = (ids.len(), cfg.d_model, cfg.layers + 1);
    if targets.len() != n {
        return Err(Error::Internal(format!(
            "lens: {} targets for {n} positions",
            targets.len()
        )));
    }
    if let Some(&id) = targets
        .iter()
        .flatten()
        .find(|&&id| id as usize >= cfg.vocab)
    {
        return Err(Error::usage(format!(
            "lens: target token #{id} is outside the vocabulary of {} tokens",
            cfg.vocab
        )));
    }
    crate::model::attribution::unembed_row(cfg, w, 0)?;
    let values = rows as u64 * n as u64 * d as u64;
    if values > MAX_LENS_VALUES {
        return Err(Error::usage(format!(
            "lens: {n} tokens x {rows} layers x {d} values of residual stream is over the limit of {MAX_LENS_VALUES} values; give at most {} tokens",
            MAX_LENS_VALUES / (rows as u64 * d as u64)
        )));
    }
    let resid = RefCell::new(Vec::with_capacity(rows * n * d));
    let opts = ForwardOptions {
        threads,
        keep_attention: false,
        logits: LogitRows::Last,
        ..ForwardOptions::default()
    };
    let mut hook = |_l: usize, site: Site, a: &mut [f32]| -> Result<()> {
        if site == Site::ResidPre {
            resid.borrow_mut().extend_from_slice(a);
        }
        Ok(())
    };
    forward_hooked(cfg, w, ids, &opts, |_, _| Ok(()), &mut hook)?;
    let hidden = final_hidden(cfg, w, resid.into_inner());
    let t = threads.unwrap_or_else(default_threads);
    let chunk = (MAX_LOGIT_BYTES / (cfg.vocab * 4)).max(1);
    let mut cells = Vec::with_capacity(rows * n);
    let mut start = 0;
    while start < rows * n {
        let m = chunk.min(rows * n - start);
        let logits =
            crate::model::qmatmul::exact(|| lm_head(cfg, w, &hidden[start * d..][..m * d], m, t))?
                .ok_or_else(|| Error::usage("the model has no LM head"))?;
        for (k, row) in logits.chunks_exact(cfg.vocab).enumerate() {
            if row.iter().any(|x| !x.is_finite()) {
                return Err(Error::usage(
                    "lens: the model gave non-finite logits; the model file is damaged",
                ));
            }
            let target = targets[(start + k) % n].map(|id| {
                let v = row[id as usize];
                let rank = row
                    .iter()
                    .enumerate()
                    .filter(|&(j, &x)| x > v || (x == v && (j as u32) < id))
                    .count();
                let lse = crate::model::predict::log_sum_exp(row);
                (rank, (v as f64 - lse).exp())
            });
            cells.push(LensCell {
                top: top_k(row, top),
                target,
            });
        }
        start += m;
    }
    let mut out = Vec::with_capacity(rows);
    let mut it = cells.into_iter();
    for _ in 0..rows {
        out.push(it.by_ref().take(n).collect());
    }
    Ok(out)
}

/// The lens of a text as the app shows it: each cell's top tokens, and in every layer at
/// position p the rank and probability of p's target (the text's next token; at the last
/// position, where the text has none, the model's own top-1).
#[derive(Debug, Clone, PartialEq)]
pub struct TextLens {
    /// [layers + 1][n], as [`logit_lens`] returns them.
    pub cells: Vec<Vec<LensCell>>,
    /// The target at each position.
    pub targets: Vec<Option<u32>>,
}

/// [`logit_lens_targets`] with each position's target: `ids[p + 1]`, and `last` (the
/// model's own top-1 after the text) at the last position.
pub fn text_lens(
    cfg: &ModelConfig,
    w: &Weights,
    ids: &[u32],
    top: usize,
    last: Option<u32>,
    threads: Option<usize>,
) -> Result<TextLens> {
    let targets: Vec<Option<u32>> = (0..ids.len())
        .map(|p| ids.get(p + 1).copied().or(last))
        .collect();
    let cells = logit_lens_targets(cfg, w, ids, top, &targets, threads)?;
    Ok(TextLens { cells, targets })
}
