//! A training run one step at a time, so a caller (the command's JSON loop, a view's
//! worker thread) decides when to step, evaluate and look: [`Trainer::step`],
//! [`Trainer::evaluate`], [`Trainer::snapshot`].

use std::time::Instant;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::model::scores::{HeadScores, head_scores};

use super::data::{self, Batch, Sampler, Source};
use super::defaults;
use super::model::{self, Cache};
use super::optim::{self, AdamState, AdamW};
use super::params::{Layout, ModelShape};
use super::shards::{self, Shard};

/// Everything that defines a run; the same config gives the same weights, bit for bit.
#[derive(Debug, Clone)]
pub struct TrainConfig {
    pub shape: ModelShape,
    pub steps: usize,
    pub batch: usize,
    /// Peak learning rate.
    pub lr: f32,
    pub warmup: usize,
    pub adamw: AdamW,
    /// Largest global gradient norm.
    pub clip: f32,
    pub seed: u64,
    pub threads: usize,
    /// Sequences in the fixed evaluation batch.
    pub eval_batch: usize,
}

/// Memory a training run may take (see [`TrainConfig::memory_bytes`]): past it a run
/// would swap or abort, not train.
pub const MAX_TRAIN_BYTES: u64 = 8 << 30;

impl TrainConfig {
    pub fn check(&self) -> Result<()> {
        self.shape.check()?;
        if self.batch == 0 {
            return Err(Error::usage("--batch must be at least 1"));
        }
        if self.threads == 0 {
            return Err(Error::usage("--threads must be at least 1"));
        }
        if !(self.lr.is_finite() && self.lr > 0.0 && self.lr <= 1.0) {
            return Err(Error::usage(format!(
                "--lr {} is not a learning rate; give a number in (0, 1], e.g. 0.003",
                self.lr
            )));
        }
        if self
            .batch
            .checked_mul(self.shape.context)
            .is_none_or(|tokens| tokens > 1 << 20)
        {
            return Err(Error::usage(format!(
                "--batch {} x --context {} is over 2^20 tokens a step; use a smaller batch",
                self.batch, self.shape.context
            )));
        }
        let need = self.memory_bytes();
        if need > MAX_TRAIN_BYTES {
            let s = &self.shape;
            return Err(Error::usage(format!(
                "--layers {} --d-model {} --context {} --vocab {} --batch {} would need about {:.1} GiB (weights, gradients and AdamW's two moments: {} parameters; activations of a step), past the {} GiB attnviz trains in; make the model or the batch smaller",
                s.layers,
                s.d_model,
                s.context,
                s.vocab,
                self.batch,
                need as f64 / (1u64 << 30) as f64,
                s.params(),
                MAX_TRAIN_BYTES >> 30
            )));
        }
        Ok(())
    }

    /// Bytes a run holds, estimated from the shape before anything is allocated: f32
    /// weights, gradients and AdamW's two moments (16 bytes a parameter), and a step's
    /// activations (about 20 d_model values a token in each block, and the logits and
    /// their gradient).
    pub fn memory_bytes(&self) -> u64 {
        let s = &self.shape;
        let tokens = (self.batch.max(self.eval_batch) as u128) * s.context as u128;
        let per_token = 20 * s.layers as u128 * s.d_model as u128 + 2 * s.vocab as u128;
        let total = 16 * s.params() as u128 + 4 * tokens * per_token;
        total.min(u64::MAX as u128) as u64
    }
}

/// One evaluation: the losses on the fixed evaluation batch, the largest head scores on
/// the probe, and the mean time of the training steps since the last evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct EvalRecord {
    pub step: usize,
    pub loss: f64,
    /// Mean loss on the targets copying predicts.
    pub loss_repeated: f64,
    pub loss_other: f64,
    /// Largest induction score of any head in layers after the first.
    pub induction_max: f64,
    /// Largest previous-token score of any head in the layers before the last.
    pub prev_token_max: f64,
    /// Largest induction score of any head in layers after the first on the offset probe
    /// (the copy after a random prefix), so a head that only learned "look at position
    /// i - L of a copy at 0" does not count.
    pub induction_offset_max: f64,
    pub ms_per_step: f64,
}

/// The loss on the probe's predictable tokens with one head's output removed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct HeadAblation {
    pub layer: usize,
    pub head: usize,
    /// The head's previous-token (layer 0) or induction (later layers) score.
    pub score: f64,
    pub probe_loss: f64,
}

/// The ablation test at the end of a run: the probe's loss on the tokens of its second
/// copy (after its first) with nothing removed, with the best previous-token head of the
/// first layer removed, with the best induction head of a later layer removed, and with
/// each other head removed in turn; then with the two removed together, with every
/// later head whose induction score reaches [`CIRCUIT_SCORE`] removed together (several
/// heads of one layer often learn to copy, and each covers for the others), the same for
/// the first layer's previous-token heads, and with both sets removed: the circuit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AblationRecord {
    pub probe_loss: f64,
    pub prev_token_head: HeadAblation,
    pub induction_head: HeadAblation,
    pub other_heads: Vec<HeadAblation>,
    /// The best previous-token and the best induction head removed together.
    pub both_probe_loss: f64,
    /// The later heads (layer, head) with an induction score of at least
    /// [`CIRCUIT_SCORE`] (at least the best one).
    pub induction_heads: Vec<(usize, usize)>,
    /// All of `induction_heads` removed together.
    pub induction_heads_probe_loss: f64,
    /// The first layer's heads with a previous-token score of at least
    /// [`CIRCUIT_SCORE`] (at least the best one).
    pub prev_token_heads: Vec<(usize, usize)>,
    /// All of `prev_token_heads` removed together.
    pub prev_token_heads_probe_loss: f64,
    /// `prev_token_heads` and `induction_heads` removed together.
    pub circuit_probe_loss: f64,
}

/// What a view shows: progress, every evaluation so far, and the probe's head scores
/// and attention maps as of the last evaluation.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub step: usize,
    pub steps: usize,
    pub history: Vec<EvalRecord>,
    pub probe: Vec<u32>,
    /// [layer][head].
    pub scores: Vec<Vec<HeadScores>>,
    /// [layer][head], each [T, T] row-major.
    pub maps: Vec<Vec<Vec<f32>>>,
    /// Whether a previous-token head (>= [`CIRCUIT_SCORE`]) sits in an earlier layer than
    /// an induction head (>= [`CIRCUIT_SCORE`]).
    pub circuit: bool,
}

/// The score at which a head counts as a previous-token or induction head.
pub const CIRCUIT_SCORE: f64 = 0.3;

/// A run in progress.
pub struct Trainer {
    cfg: TrainConfig,
    layout: Layout,
    params: Vec<f32>,
    grads: Vec<f32>,
    adam: AdamState,
    sampler: Sampler,
    eval: Batch,
    probe: Vec<u32>,
    offset_probe: Vec<u32>,
    cache: Cache,
    shards: Vec<Shard>,
    step: usize,
    history: Vec<EvalRecord>,
    scores: Vec<Vec<HeadScores>>,
    maps: Vec<Vec<Vec<f32>>>,
    step_ms: f64,
    steps_timed: usize,
    /// Whether the loss is taken only on the tokens copying predicts (the induction
    /// task): the other tokens are evaluated but carry no gradient.
    other_untrained: bool,
}

/// What one step did.
#[derive(Debug, Clone, Copy)]
pub struct StepInfo {
    pub step: usize,
    pub loss: f64,
    pub lr: f32,
    pub grad_norm: f64,
}

impl Trainer {
    pub fn new(cfg: TrainConfig, source: Source) -> Result<Trainer> {
        cfg.check()?;
        if source.vocab() != cfg.shape.vocab {
            return Err(Error::usage(format!(
                "the data has a vocabulary of {} but the model {}; with --text the vocabulary is 256 bytes",
                source.vocab(),
                cfg.shape.vocab
            )));
        }
        let layout = Layout::new(cfg.shape);
        let params = layout.init(cfg.seed);
        let t = cfg.shape.context;
        let probe = data::probe(&source, t, cfg.seed);
        let offset_probe = data::offset_probe(&source, t, cfg.seed);
        let mut eval_sampler = Sampler::new(source.clone(), t, cfg.seed.wrapping_add(1) ^ 0x5151);
        let eval = eval_sampler.next(cfg.eval_batch);
        let other_untrained = matches!(source, Source::Induction { .. });
        Ok(Trainer {
            grads: vec![0.0; layout.total],
            adam: AdamState::new(layout.total),
            sampler: Sampler::new(source, t, cfg.seed),
            eval,
            probe,
            offset_probe,
            cache: Cache::default(),
            shards: Vec::new(),
            step: 0,
            history: Vec::new(),
            scores: Vec::new(),
            maps: Vec::new(),
            step_ms: 0.0,
            steps_timed: 0,
            other_untrained,
            cfg,
            layout,
            params,
        })
    }

    pub fn config(&self) -> &TrainConfig {
        &self.cfg
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The parameters, in [`Layout`] order.
    pub fn params(&self) -> &[f32] {
        &self.params
    }

    pub fn step_count(&self) -> usize {
        self.step
    }

    pub fn done(&self) -> bool {
        self.step >= self.cfg.steps
    }

    /// One training step: a fresh batch, forward, backward, clipping, AdamW.
    pub fn step(&mut self) -> Result<StepInfo> {
        let t0 = Instant::now();
        if self.step == defaults::OFFSET_FROM {
            self.sampler.set_offset_share(defaults::OFFSET_SHARE);
        }
        let b = self.sampler.next(self.cfg.batch);
        let loss = self.forward_backward(&b)?;
        let grad_norm = optim::clip_grad_norm(&mut self.grads, self.cfg.clip);
        let horizon = self.cfg.steps.max(defaults::DECAY_STEPS);
        let lr = optim::lr_at(self.step, horizon, self.cfg.warmup, self.cfg.lr);
        self.cfg.adamw.step(
            &self.layout,
            &mut self.params,
            &self.grads,
            &mut self.adam,
            lr,
        );
        self.step += 1;
        self.step_ms += t0.elapsed().as_secs_f64() * 1e3;
        self.steps_timed += 1;
        Ok(StepInfo {
            step: self.step,
            loss,
            lr,
            grad_norm,
        })
    }

    /// The loss of `b` and its gradient in [`Trainer::grads`] (the batch in shards,
    /// [`shards`]).
    pub fn forward_backward(&mut self, b: &Batch) -> Result<f64> {
        shards::forward_backward(
            &self.layout,
            &self.params,
            b,
            &mut self.shards,
            &mut self.grads,
            self.cfg.threads,
        )
    }

    /// The gradient of the last [`Trainer::forward_backward`] (before clipping, unless a
    /// step has clipped it since).
    pub fn grads(&self) -> &[f32] {
        &self.grads
    }

    /// Losses on the evaluation batch and head scores on the probe; appended to the
    /// history.
    pub fn evaluate(&mut self) -> Result<EvalRecord> {
        let th = self.cfg.threads;
        let e = &self.eval;
        let trained = e.trained.iter().any(|&x| !x).then_some(&e.trained[..]);
        let loss = model::forward(
            &self.layout,
            &self.params,
            &e.tokens,
            &e.targets,
            trained,
            e.batch,
            th,
            &mut self.cache,
        )?;
        let (mut rep, mut nrep, mut oth, mut noth) = (0.0, 0usize, 0.0, 0usize);
        for (&l, &r) in self.cache.losses.iter().zip(&e.repeated) {
            if r {
                rep += l as f64;
                nrep += 1;
            } else {
                oth += l as f64;
                noth += 1;
            }
        }
        let mean = |s: f64, n: usize| if n == 0 { 0.0 } else { s / n as f64 };
        let offset = self.offset_scores()?;
        self.probe_maps()?;
        let layers = self.cfg.shape.layers;
        let best = |range: std::ops::Range<usize>, f: &dyn Fn(&HeadScores) -> f64| {
            self.scores[range]
                .iter()
                .flatten()
                .map(f)
                .fold(0.0, f64::max)
        };
        let rec = EvalRecord {
            step: self.step,
            loss,
            loss_repeated: mean(rep, nrep),
            loss_other: mean(oth, noth),
            induction_max: best(1.min(layers - 1)..layers, &|s| s.induction),
            prev_token_max: best(0..(layers - 1).max(1), &|s| s.prev_token),
            induction_offset_max: offset[1.min(layers - 1)..layers]
                .iter()
                .flatten()
                .map(|s| s.induction)
                .fold(0.0, f64::max),
            ms_per_step: mean(self.step_ms, self.steps_timed),
        };
        self.step_ms = 0.0;
        self.steps_timed = 0;
        self.history.push(rec);
        Ok(rec)
    }

    /// The attention maps [layer][head] of one sequence, and the loss on its second
    /// copy's predictable targets (`copy` = (start of the first copy, its length)), with
    /// the heads `ablate` lists removed.
    fn probe_run(
        &mut self,
        probe: &[u32],
        copy: (usize, usize),
        ablate: &[(usize, usize)],
    ) -> Result<(Vec<Vec<Vec<f32>>>, f64)> {
        let s = self.cfg.shape;
        let targets: Vec<u32> = probe[1..].iter().chain(&probe[..1]).copied().collect();
        let (at, len) = copy;
        let trained: Vec<bool> = (0..probe.len())
            .map(|p| p >= at + len && p + 1 < at + 2 * len)
            .collect();
        let loss = model::forward_ablated(
            &self.layout,
            &self.params,
            probe,
            &targets,
            Some(&trained),
            1,
            self.cfg.threads,
            &mut self.cache,
            ablate,
        )?;
        let maps = (0..s.layers)
            .map(|l| {
                (0..s.heads)
                    .map(|h| self.cache.attention(&self.layout, l, 0, h))
                    .collect()
            })
            .collect();
        Ok((maps, loss))
    }

    fn probe_copy(&self) -> (usize, usize) {
        (0, self.cfg.shape.context / 2)
    }

    fn probe_maps(&mut self) -> Result<()> {
        let probe = self.probe.clone();
        let (maps, _) = self.probe_run(&probe, self.probe_copy(), &[])?;
        self.maps = maps;
        self.scores = scores_of(&self.maps, &self.probe);
        Ok(())
    }

    /// Head scores on the offset probe.
    fn offset_scores(&mut self) -> Result<Vec<Vec<HeadScores>>> {
        let probe = self.offset_probe.clone();
        let t = self.cfg.shape.context;
        let (maps, _) = self.probe_run(&probe, (t / 4, (t - t / 4) / 2), &[])?;
        Ok(scores_of(&maps, &probe))
    }

    /// The ablation test on the probe (see [`AblationRecord`]), with the head scores of
    /// the last evaluation; `None` for a one-layer model or before any evaluation.
    pub fn ablation(&mut self) -> Result<Option<AblationRecord>> {
        let layers = self.cfg.shape.layers;
        if layers < 2 || self.scores.len() != layers {
            return Ok(None);
        }
        let pick = |scores: &[Vec<HeadScores>], f: &dyn Fn(&HeadScores) -> f64| {
            let mut best = (0, 0, f64::MIN);
            for (l, hs) in scores.iter().enumerate() {
                for (h, sc) in hs.iter().enumerate() {
                    if f(sc) > best.2 {
                        best = (l, h, f(sc));
                    }
                }
            }
            best
        };
        let prev = pick(&self.scores[..1], &|s| s.prev_token);
        let mut ind = pick(&self.scores[1..], &|s| s.induction);
        ind.0 += 1;
        let probe = self.probe.clone();
        let copy = self.probe_copy();
        let (_, probe_loss) = self.probe_run(&probe, copy, &[])?;
        let heads = self.cfg.shape.heads;
        let others: Vec<(usize, usize, f64)> = (0..layers)
            .flat_map(|l| (0..heads).map(move |h| (l, h)))
            .filter(|&(l, h)| (l, h) != (prev.0, prev.1) && (l, h) != (ind.0, ind.1))
            .map(|(l, h)| {
                let sc = &self.scores[l][h];
                (l, h, if l == 0 { sc.prev_token } else { sc.induction })
            })
            .collect();
        let mut induction_heads: Vec<(usize, usize)> = (1..layers)
            .flat_map(|l| (0..heads).map(move |h| (l, h)))
            .filter(|&(l, h)| self.scores[l][h].induction >= CIRCUIT_SCORE)
            .collect();
        if !induction_heads.contains(&(ind.0, ind.1)) {
            induction_heads.push((ind.0, ind.1));
        }
        let (_, both_probe_loss) =
            self.probe_run(&probe, copy, &[(prev.0, prev.1), (ind.0, ind.1)])?;
        let (_, induction_heads_probe_loss) = self.probe_run(&probe, copy, &induction_heads)?;
        let mut prev_token_heads: Vec<(usize, usize)> = (0..heads)
            .filter(|&h| self.scores[0][h].prev_token >= CIRCUIT_SCORE)
            .map(|h| (0, h))
            .collect();
        if !prev_token_heads.contains(&(prev.0, prev.1)) {
            prev_token_heads.push((prev.0, prev.1));
        }
        let (_, prev_token_heads_probe_loss) = self.probe_run(&probe, copy, &prev_token_heads)?;
        let circuit: Vec<(usize, usize)> = prev_token_heads
            .iter()
            .chain(&induction_heads)
            .copied()
            .collect();
        let (_, circuit_probe_loss) = self.probe_run(&probe, copy, &circuit)?;
        let mut with = |l: usize, h: usize, score: f64| -> Result<HeadAblation> {
            let (_, loss) = self.probe_run(&probe, copy, &[(l, h)])?;
            Ok(HeadAblation {
                layer: l,
                head: h,
                score,
                probe_loss: loss,
            })
        };
        let prev_token_head = with(prev.0, prev.1, prev.2)?;
        let induction_head = with(ind.0, ind.1, ind.2)?;
        let mut other_heads = Vec::new();
        for (l, h, score) in others {
            other_heads.push(with(l, h, score)?);
        }
        Ok(Some(AblationRecord {
            probe_loss,
            prev_token_head,
            induction_head,
            other_heads,
            both_probe_loss,
            induction_heads,
            induction_heads_probe_loss,
            prev_token_heads,
            prev_token_heads_probe_loss,
            circuit_probe_loss,
        }))
    }

    /// Whether `loss_other` is only measured: the task trains on the predictable tokens
    /// alone, so the other tokens carry no gradient.
    pub fn other_untrained(&self) -> bool {
        self.other_untrained
    }

    /// Whether the probe's scores (as of the last evaluation) show the two-head circuit.
    pub fn circuit(&self) -> bool {
        let first_prev = self
            .scores
            .iter()
            .position(|hs| hs.iter().any(|s| s.prev_token >= CIRCUIT_SCORE));
        match first_prev {
            Some(l) => self.scores[l + 1..]
                .iter()
                .any(|hs| hs.iter().any(|s| s.induction >= CIRCUIT_SCORE)),
            None => false,
        }
    }

    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            step: self.step,
            steps: self.cfg.steps,
            history: self.history.clone(),
            probe: self.probe.clone(),
            scores: self.scores.clone(),
            maps: self.maps.clone(),
            circuit: self.circuit(),
        }
    }
}

/// Each head's scores on the sequence `ids` its maps were computed on.
fn scores_of(maps: &[Vec<Vec<f32>>], ids: &[u32]) -> Vec<Vec<HeadScores>> {
    maps.iter()
        .map(|heads| {
            heads
                .iter()
                .map(|a| head_scores(a, ids, |i| i + 1))
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scores(prev: f64, ind: f64) -> HeadScores {
        HeadScores {
            prev_token: prev,
            first_token: 0.0,
            duplicate: 0.0,
            induction: ind,
            entropy: 0.0,
        }
    }

    /// A view runs the trainer on a worker thread and reads snapshots.
    #[test]
    fn a_trainer_can_move_to_a_worker_thread() {
        fn send<T: Send + 'static>() {}
        send::<Trainer>();
        send::<Snapshot>();
    }

    #[test]
    fn the_circuit_needs_a_previous_token_head_below_an_induction_head() {
        let cfg = TrainConfig {
            shape: ModelShape {
                layers: 3,
                heads: 1,
                d_model: 4,
                context: 4,
                vocab: 4,
            },
            steps: 1,
            batch: 1,
            lr: 1e-3,
            warmup: 1,
            adamw: AdamW::default(),
            clip: 1.0,
            seed: 0,
            threads: 1,
            eval_batch: 1,
        };
        let mut t = Trainer::new(cfg, Source::Induction { vocab: 4 }).unwrap();
        let cases = [
            ([(0.5, 0.0), (0.0, 0.4), (0.0, 0.0)], true),
            ([(0.0, 0.4), (0.5, 0.0), (0.0, 0.0)], false),
            ([(0.5, 0.4), (0.0, 0.0), (0.0, 0.0)], false),
            ([(0.2, 0.0), (0.0, 0.9), (0.0, 0.0)], false),
            ([(0.0, 0.0), (0.3, 0.0), (0.0, 0.3)], true),
        ];
        for (layers, want) in cases {
            t.scores = layers.iter().map(|&(p, i)| vec![scores(p, i)]).collect();
            assert_eq!(t.circuit(), want, "{layers:?}");
        }
    }
}
