//! Checks of a `[train]` lesson: the run's sizes (small enough to train while a
//! recording plays, and for every head's map to fit a 100x30 screen), its pace, and
//! what its steps may say: a `when` condition and `{name}` numbers in the narration, and
//! none of the keys that point into a fixed model (stage, head, highlight, ...).

use toml::Spanned;

use super::raw::{RawStep, RawTrain};
use super::train::{Condition, TrainLesson, placeholders};
use super::validate::Checker;
use crate::train::ModelShape;

pub const MAX_TRAIN_LAYERS: usize = 4;
pub const MAX_TRAIN_HEADS: usize = 8;
pub const MAX_TRAIN_D_MODEL: usize = 128;
/// Longest sequence: `attnviz train`'s own context; the train view pools each head's map of
/// the probe to fit.
pub const MAX_TRAIN_CONTEXT: usize = 64;
pub const MAX_TRAIN_VOCAB: usize = 256;
pub const MAX_TRAIN_STEPS: usize = 20_000;
pub const MAX_TRAIN_BATCH: usize = 64;
/// Fastest pace, in training steps per second of lesson time.
pub const MAX_TRAIN_RATE: f64 = 1000.0;

impl Checker<'_, '_> {
    /// `[train]`: the run, if every field is right.
    pub(super) fn train(&mut self, raw: &Spanned<RawTrain>) -> Option<TrainLesson> {
        let t = raw.get_ref();
        let layers = self.count(&t.layers, "train.layers", 2..=MAX_TRAIN_LAYERS);
        let heads = self.count(&t.heads, "train.heads", 1..=MAX_TRAIN_HEADS);
        let d_model = self.count(&t.d_model, "train.d_model", 1..=MAX_TRAIN_D_MODEL);
        let context = self.count(&t.context, "train.context", 4..=MAX_TRAIN_CONTEXT);
        let vocab = self.count(&t.vocab, "train.vocab", 2..=MAX_TRAIN_VOCAB);
        let steps = self.count(&t.steps, "train.steps", 1..=MAX_TRAIN_STEPS);
        let batch = self.count(&t.batch, "train.batch", 1..=MAX_TRAIN_BATCH);
        let eval_every = self.count(&t.eval_every, "train.eval_every", 1..=MAX_TRAIN_STEPS);
        let warmup = match &t.warmup {
            Some(w) => Some(self.count(w, "train.warmup", 0..=MAX_TRAIN_STEPS)?),
            None => None,
        };
        let seed = match &t.seed {
            Some(s) => Some(
                u64::try_from(*s.get_ref())
                    .map_err(|_| self.p.on(s, "train.seed", "must be a whole number >= 0"))
                    .ok()?,
            ),
            None => None,
        };
        let lr = *t.lr.get_ref();
        let lr_ok = lr.is_finite() && lr > 0.0 && lr <= 1.0;
        if !lr_ok {
            self.p.on(
                &t.lr,
                "train.lr",
                format!("{lr} is not a learning rate; give a number in (0, 1], e.g. 0.003"),
            );
        }
        let rate = *t.rate.get_ref();
        let rate_ok = rate.is_finite() && rate > 0.0 && rate <= MAX_TRAIN_RATE;
        if !rate_ok {
            self.p.on(
                &t.rate,
                "train.rate",
                format!(
                    "{rate} steps a second is out of range; expected more than 0 and at most {MAX_TRAIN_RATE}"
                ),
            );
        }
        let (heads, d_model) = (heads?, d_model?);
        if d_model % heads != 0 {
            self.p.on(
                &t.d_model,
                "train.d_model",
                format!("{d_model} is not divisible by {heads} heads; each head gets d_model / heads dimensions"),
            );
            return None;
        }
        let steps = steps?;
        Some(TrainLesson {
            shape: ModelShape {
                layers: layers?,
                heads,
                d_model,
                context: context?,
                vocab: vocab?,
            },
            steps,
            batch: batch?,
            lr: lr_ok.then_some(lr as f32)?,
            warmup: warmup.unwrap_or(steps / 10),
            seed: seed.unwrap_or(0),
            eval_every: eval_every?,
            rate: rate_ok.then_some(rate)?,
        })
    }

    /// A step's `when` and narration numbers: only in a `[train]` lesson, and well
    /// formed; the keys that point into a fixed model are refused there.
    pub(super) fn train_keys(
        &mut self,
        i: usize,
        s: &RawStep,
        train: bool,
    ) -> Option<Option<Condition>> {
        let field = |name: &str| format!("steps[{i}].{name}");
        let mut ok = true;
        let texts = [
            (&s.narration.get_ref().en, "en"),
            (&s.narration.get_ref().zh, "zh"),
        ];
        for (text, lang) in texts {
            let quotes = text.get_ref().contains('{');
            if quotes && !train {
                self.p.on(
                    text,
                    field(&format!("narration.{lang}")),
                    "`{name}` numbers are for lessons that train a model ([train]); write the text without braces",
                );
                ok = false;
            } else if let Err(msg) = placeholders(text.get_ref()) {
                self.p.on(text, field(&format!("narration.{lang}")), msg);
                ok = false;
            }
        }
        if train
            && let Some(v) = &s.view
            && v.get_ref() != "train"
        {
            self.p.on(
                v,
                field("view"),
                "a [train] lesson plays in the train view; leave `view` out",
            );
            ok = false;
        }
        if train {
            let fixed = [
                s.stage.as_ref().map(|v| (v.span(), "stage")),
                s.head.as_ref().map(|v| (v.span(), "head")),
                s.layer.as_ref().map(|v| (v.span(), "layer")),
                s.show.as_ref().map(|v| (v.span(), "show")),
                s.intervene.as_ref().map(|v| (v.span(), "intervene")),
                s.variant.as_ref().map(|v| (v.span(), "variant")),
                s.animate.as_ref().map(|v| (v.span(), "animate")),
                s.highlight.first().map(|v| (v.span(), "highlight")),
                s.tiles.first().map(|v| (v.span(), "tiles")),
            ];
            for (span, name) in fixed.into_iter().flatten() {
                self.p.at(
                    span,
                    field(name),
                    format!("`{name}` points into a fixed model; a [train] lesson shows the run in the train view (use `when` and the narration's {{numbers}})"),
                );
                ok = false;
            }
        }
        let when = match &s.when {
            Some(w) if !train => {
                self.p.on(
                    w,
                    field("when"),
                    "`when` waits for a training run; it is for lessons with a [train] table",
                );
                ok = false;
                None
            }
            Some(w) => match w.get_ref().parse::<Condition>() {
                Ok(c) => Some(c),
                Err(msg) => {
                    self.p.on(w, field("when"), msg);
                    ok = false;
                    None
                }
            },
            None => None,
        };
        ok.then_some(when)
    }
}
