//! A training batch split into shards of whole sequences, run side by side.
//!
//! Each shard runs the model's forward and backward on its own sequences into its own
//! gradient, on one thread of the pool; the shards' gradients are then summed in shard
//! order, each weighted by its share of the batch's tokens. The split depends on the
//! batch and the context only, never on the thread count, and every operation inside a
//! shard gives the same bits on any number of threads, so a run's weights stay the same
//! bit for bit whatever `--threads` is.
//!
//! Why not only threads inside each operation: at the default size (2048 tokens,
//! d_model 64) a step is some 60 operations of a few hundred microseconds, with
//! LayerNorm, GELU, the residual adds and the loss between them; sharing each one out
//! left the second core idle half the time (22 -> 20 ms a step on 2 threads), and
//! PyTorch's step is 40% faster on two threads than on one. Shards of about
//! [`SHARD_TOKENS`] tokens keep every operation busy on one core, their activations in
//! L2, and need one synchronisation per step.

use std::ops::Range;

use rayon::prelude::*;

use crate::error::Result;
use crate::kernel::thread_pool;

use super::data::Batch;
use super::model::{self, Cache};
use super::params::Layout;

/// Tokens per shard (whole sequences: at least one sequence however long).
pub const SHARD_TOKENS: usize = 256;

/// The shards of `batch` sequences of `context` tokens: ranges of sequences, in order.
pub fn plan(batch: usize, context: usize) -> Vec<Range<usize>> {
    let per = (SHARD_TOKENS / context.max(1)).max(1);
    (0..batch)
        .step_by(per)
        .map(|s| s..(s + per).min(batch))
        .collect()
}

/// One shard's activations, gradient and loss, kept from step to step.
#[derive(Default)]
pub struct Shard {
    cache: Cache,
    grads: Vec<f32>,
    loss: f64,
}

/// The mean loss of `b` over its tokens and its gradient in `grads` (overwritten), the
/// shards of [`plan`] run on `threads` workers.
pub fn forward_backward(
    layout: &Layout,
    params: &[f32],
    b: &Batch,
    shards: &mut Vec<Shard>,
    grads: &mut [f32],
    threads: usize,
) -> Result<f64> {
    let t = layout.shape.context;
    let plan = plan(b.batch, t);
    // Batches that train on every token may leave `trained` empty.
    let trained = (b.trained.len() == b.tokens.len() && b.trained.iter().any(|&x| !x))
        .then_some(&b.trained[..]);
    shards.resize_with(plan.len(), Shard::default);
    // Threads left over when there are fewer shards than threads go inside the shards.
    let inner = (threads / plan.len().max(1)).max(1);
    let run = |(sh, seqs): (&mut Shard, &Range<usize>)| -> Result<()> {
        let toks = seqs.start * t..seqs.end * t;
        sh.loss = model::forward(
            layout,
            params,
            &b.tokens[toks.clone()],
            &b.targets[toks.clone()],
            trained.map(|m| &m[toks]),
            seqs.len(),
            inner,
            &mut sh.cache,
        )?;
        sh.grads.resize(layout.total, 0.0);
        model::backward(layout, params, &mut sh.cache, &mut sh.grads, inner)
    };
    let parts = threads.min(plan.len());
    if parts <= 1 {
        shards.iter_mut().zip(&plan).try_for_each(run)?;
    } else {
        thread_pool(parts)?.install(|| shards.par_iter_mut().zip(&plan).try_for_each(run))?;
    }
    // The gradient of the batch's mean is the sum of the shards' means, each weighted by
    // its share of the trained tokens (with every token trained and equal shards the
    // weights are powers of two at the default sizes: exact).
    let total: usize = shards.iter().map(|sh| sh.cache.trained).sum();
    let weights: Vec<f32> = shards
        .iter()
        .map(|sh| {
            if total == 0 {
                0.0
            } else {
                sh.cache.trained as f32 / total as f32
            }
        })
        .collect();
    let sum = |(i, g): (usize, &mut [f32])| {
        let at = i * GRAD_CHUNK;
        for (j, v) in g.iter_mut().enumerate() {
            let mut acc = 0.0f32;
            for (sh, &w) in shards.iter().zip(&weights) {
                acc += w * sh.grads[at + j];
            }
            *v = acc;
        }
    };
    if parts <= 1 {
        grads.chunks_mut(GRAD_CHUNK).enumerate().for_each(sum);
    } else {
        thread_pool(parts)?.install(|| grads.par_chunks_mut(GRAD_CHUNK).enumerate().for_each(sum));
    }
    Ok(shards
        .iter()
        .map(|sh| {
            if total == 0 {
                0.0
            } else {
                sh.loss * sh.cache.trained as f64 / total as f64
            }
        })
        .sum())
}

/// Parameters per piece of the gradient sum handed to a worker.
const GRAD_CHUNK: usize = 16 * 1024;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_cover_the_batch_in_order_with_whole_sequences() {
        assert_eq!(
            plan(32, 64),
            (0..8).map(|i| i * 4..i * 4 + 4).collect::<Vec<_>>()
        );
        assert_eq!(plan(5, 64), vec![0..4, 4..5]);
        assert_eq!(plan(3, 1024), vec![0..1, 1..2, 2..3]);
        assert_eq!(plan(1, 8), vec![0..1]);
        assert!(plan(0, 64).is_empty());
    }
}
