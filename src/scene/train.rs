//! A lesson that trains a small model while it plays (`[train]`): the run it trains, the
//! conditions a step waits for (`when = "induction >= 0.3"`) and the live numbers its
//! narration quotes (`{induction}`). The narration never states a result the run has
//! not produced: a step that waits for something the run never reaches is skipped, and
//! numbers come from the run's last evaluation.

use std::fmt;
use std::str::FromStr;

use crate::train::{AdamW, EvalRecord, ModelShape, Source, TrainConfig, defaults};

/// The run a `[train]` lesson trains, and how fast it plays.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainLesson {
    pub shape: ModelShape,
    pub steps: usize,
    pub batch: usize,
    pub lr: f32,
    pub warmup: usize,
    pub seed: u64,
    /// Evaluate (losses, head scores, the probe's maps) every this many steps.
    pub eval_every: usize,
    /// Training steps per second of lesson time at speed 1: a recording trains at this
    /// pace on its virtual clock, so it shows the same run at the same times on every
    /// machine.
    pub rate: f64,
}

impl TrainLesson {
    /// The trainer's config; the same for any thread count (the kernels sum in a fixed
    /// order), so a lesson is the same run wherever it plays.
    pub fn config(&self, threads: usize) -> TrainConfig {
        TrainConfig {
            shape: self.shape,
            steps: self.steps,
            batch: self.batch,
            lr: self.lr,
            warmup: self.warmup,
            adamw: AdamW::default(),
            clip: defaults::CLIP,
            seed: self.seed,
            threads,
            eval_batch: defaults::EVAL_BATCH,
        }
    }

    /// The induction task on the lesson's vocabulary.
    pub fn source(&self) -> Source {
        Source::Induction {
            vocab: self.shape.vocab,
        }
    }

    /// Lesson time the run takes at speed 1, in milliseconds.
    pub fn duration_ms(&self) -> u64 {
        (self.steps as f64 * 1000.0 / self.rate).ceil() as u64
    }
}

/// A number of an evaluation that conditions and narration can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    Step,
    Loss,
    LossRepeated,
    LossOther,
    Induction,
    PrevToken,
}

impl Metric {
    pub const ALL: [Metric; 6] = [
        Metric::Step,
        Metric::Loss,
        Metric::LossRepeated,
        Metric::LossOther,
        Metric::Induction,
        Metric::PrevToken,
    ];

    /// The name scene files write.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Step => "step",
            Metric::Loss => "loss",
            Metric::LossRepeated => "loss_repeated",
            Metric::LossOther => "loss_other",
            Metric::Induction => "induction",
            Metric::PrevToken => "prev_token",
        }
    }

    pub fn of(self, r: &EvalRecord) -> f64 {
        match self {
            Metric::Step => r.step as f64,
            Metric::Loss => r.loss,
            Metric::LossRepeated => r.loss_repeated,
            Metric::LossOther => r.loss_other,
            Metric::Induction => r.induction_max,
            Metric::PrevToken => r.prev_token_max,
        }
    }

    /// As the narration shows it: steps whole, the rest to two decimals.
    pub fn show(self, r: &EvalRecord) -> String {
        match self {
            Metric::Step => r.step.to_string(),
            _ => format!("{:.2}", self.of(r)),
        }
    }

    fn names() -> String {
        Metric::ALL.map(Metric::name).join(", ")
    }
}

impl FromStr for Metric {
    type Err = String;
    fn from_str(s: &str) -> Result<Metric, String> {
        Metric::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| format!("unknown number '{s}'; expected one of {}", Metric::names()))
    }
}

/// What a step of a `[train]` lesson waits for before it shows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Condition {
    /// The run has finished.
    Done,
    /// The last evaluation's number is at least this.
    AtLeast(Metric, f64),
    /// The last evaluation's number is at most this.
    AtMost(Metric, f64),
}

impl Condition {
    /// Does the run, as of its last evaluation, meet the condition?
    pub fn holds(&self, last: &EvalRecord, done: bool) -> bool {
        match *self {
            Condition::Done => done,
            Condition::AtLeast(m, x) => m.of(last) >= x,
            Condition::AtMost(m, x) => m.of(last) <= x,
        }
    }
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Condition::Done => f.write_str("done"),
            Condition::AtLeast(m, x) => write!(f, "{} >= {x}", m.name()),
            Condition::AtMost(m, x) => write!(f, "{} <= {x}", m.name()),
        }
    }
}

const CONDITION_FORMS: &str =
    "write `done` or `NAME >= X` / `NAME <= X`, e.g. `induction >= 0.3` or `step >= 200`";

impl FromStr for Condition {
    type Err = String;
    fn from_str(s: &str) -> Result<Condition, String> {
        let s = s.trim();
        if s == "done" {
            return Ok(Condition::Done);
        }
        let (name, at_least, value) = if let Some((a, b)) = s.split_once(">=") {
            (a, true, b)
        } else if let Some((a, b)) = s.split_once("<=") {
            (a, false, b)
        } else {
            return Err(format!("'{s}' is not a condition; {CONDITION_FORMS}"));
        };
        let metric: Metric = name.trim().parse()?;
        let x: f64 = value
            .trim()
            .parse()
            .ok()
            .filter(|x: &f64| x.is_finite())
            .ok_or_else(|| format!("'{}' is not a number; {CONDITION_FORMS}", value.trim()))?;
        Ok(if at_least {
            Condition::AtLeast(metric, x)
        } else {
            Condition::AtMost(metric, x)
        })
    }
}

/// The `{name}`s a narration quotes, each checked to be a [`Metric`]; an unclosed `{`
/// is an error too.
pub fn placeholders(text: &str) -> Result<Vec<Metric>, String> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let close = after
            .find('}')
            .ok_or_else(|| "a '{' without its '}'; write a number as {induction}".to_string())?;
        found.push(after[..close].trim().parse::<Metric>()?);
        rest = &after[close + 1..];
    }
    Ok(found)
}

/// `text` with each `{name}` replaced by that number of `last` (already checked by
/// [`placeholders`]; a name that is not a metric stays as written).
pub fn fill(text: &str, last: &EvalRecord) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close) => {
                let name = &after[..close];
                match name.trim().parse::<Metric>() {
                    Ok(m) => out.push_str(&m.show(last)),
                    Err(_) => {
                        out.push('{');
                        out.push_str(name);
                        out.push('}');
                    }
                }
                rest = &after[close + 1..];
            }
            None => {
                out.push_str(&rest[open..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec() -> EvalRecord {
        EvalRecord {
            step: 120,
            loss: 2.5,
            loss_repeated: 1.234,
            loss_other: 2.9,
            induction_max: 0.41,
            prev_token_max: 0.05,
            induction_offset_max: 0.02,
            ms_per_step: 3.0,
        }
    }

    #[test]
    fn conditions_parse_and_hold_on_the_last_evaluation() {
        let c: Condition = "induction >= 0.3".parse().unwrap();
        assert_eq!(c, Condition::AtLeast(Metric::Induction, 0.3));
        assert!(c.holds(&rec(), false));
        let c: Condition = " loss_repeated<=1.2 ".parse().unwrap();
        assert!(!c.holds(&rec(), false));
        assert!(!Condition::Done.holds(&rec(), false));
        assert!(Condition::Done.holds(&rec(), true));
        assert!("step > 3".parse::<Condition>().is_err());
        assert!(
            "speed >= 3"
                .parse::<Condition>()
                .unwrap_err()
                .contains("induction")
        );
        assert!("step >= x".parse::<Condition>().is_err());
    }

    #[test]
    fn narration_quotes_the_last_evaluation() {
        let t = "at step {step} the score is {induction} ({loss_repeated} vs {loss_other})";
        assert_eq!(placeholders(t).unwrap().len(), 4);
        assert_eq!(
            fill(t, &rec()),
            "at step 120 the score is 0.41 (1.23 vs 2.90)"
        );
        assert!(placeholders("{speed}").is_err());
        assert!(placeholders("open {step").is_err());
        assert_eq!(fill("no numbers", &rec()), "no numbers");
    }
}
