//! `attnviz train`: a small GPT-2-style model trained from scratch (DESIGN.md, "Training
//! a small model"). At a terminal: the train view (loss curve, head scores, the probe's
//! maps, live; the trainer on a worker thread). Headless: one JSON object per evaluation
//! (with `--json` or when stdout is not a terminal); with `--out DIR` (which writes the
//! result as a Hugging Face GPT-2 folder) one readable line per evaluation at a terminal;
//! `--bench-steps N` times steps only.

use std::io::IsTerminal;

use serde::Serialize;

use crate::cli::{TrainArgs, TrainTask};
use crate::error::{Error, Result};
use crate::kernel::default_threads;
use crate::output;
use crate::train::export::{self, Vocab};
use crate::train::{
    AblationRecord, AdamW, EvalRecord, ModelShape, Source, TrainConfig, Trainer, defaults,
};
use crate::tui::{AppOptions, State, app, terminal};

/// The run's config and data from the flags; every bad flag named.
pub fn setup(args: &TrainArgs) -> Result<(TrainConfig, Source)> {
    let source = match &args.text {
        Some(path) => {
            if args.vocab.is_some_and(|v| v != 256) {
                return Err(Error::usage(
                    "--vocab does not apply to --text: byte-level training has a vocabulary of 256",
                ));
            }
            Source::text(path, args.context)?
        }
        None => {
            let vocab = args.vocab.unwrap_or(defaults::VOCAB);
            if vocab < 2 {
                return Err(Error::usage(format!(
                    "--vocab {vocab} is too small: the induction task needs at least 2 tokens"
                )));
            }
            match args.task.unwrap_or_default() {
                TrainTask::Induction => Source::Induction { vocab },
                TrainTask::CopySpan => Source::CopySpan { vocab },
            }
        }
    };
    if args.steps == 0 && args.bench_steps.is_none() {
        return Err(Error::usage("--steps must be at least 1"));
    }
    if args.eval_every == 0 {
        return Err(Error::usage("--eval-every must be at least 1"));
    }
    let cfg = TrainConfig {
        shape: ModelShape {
            layers: args.layers,
            heads: args.heads,
            d_model: args.d_model,
            context: args.context,
            vocab: source.vocab(),
        },
        steps: args.steps,
        batch: args.batch,
        lr: args.lr,
        warmup: args.warmup,
        adamw: AdamW::default(),
        clip: defaults::CLIP,
        seed: args.seed,
        threads: args.threads.unwrap_or_else(default_threads),
        eval_batch: defaults::EVAL_BATCH,
    };
    cfg.check()?;
    Ok((cfg, source))
}

#[derive(Serialize)]
struct BenchJson {
    steps: usize,
    threads: usize,
    ms_per_step: f64,
}

pub fn run(args: &TrainArgs) -> Result<()> {
    let (cfg, source) = setup(args)?;
    if let Some(dir) = &args.out {
        export::check_out(dir)?;
    }
    let json = args.json || !std::io::stdout().is_terminal();
    let vocab = match source {
        Source::Induction { .. } | Source::CopySpan { .. } => Vocab::Numbers,
        Source::Text { .. } => Vocab::Bytes,
    };
    if let Some(n) = args.bench_steps {
        return bench(cfg, source, n, json);
    }
    let mut tr = Trainer::new(cfg, source)?;
    if !json && args.out.is_none() {
        return view(tr, args);
    }
    report(&tr.evaluate()?, json)?;
    while !tr.done() {
        tr.step()?;
        if tr.step_count().is_multiple_of(args.eval_every) || tr.done() {
            report(&tr.evaluate()?, json)?;
        }
    }
    if let Some(ab) = tr.ablation()? {
        report_ablation(&ab, json)?;
    }
    if let Some(dir) = &args.out {
        export::write_hf_gpt2(dir, tr.layout(), tr.params(), vocab)?;
        if !json {
            output::println(&format!("wrote {}", dir.display()))?;
        }
    }
    Ok(())
}

/// The train view on this run, until the person quits.
fn view(tr: Trainer, args: &TrainArgs) -> Result<()> {
    let s = tr.config().shape;
    let title = format!(
        "train: {} layers x {} heads, d_model {}, context {}, {} steps, seed {}",
        s.layers,
        s.heads,
        s.d_model,
        s.context,
        tr.config().steps,
        tr.config().seed
    );
    let options = AppOptions::interactive(args.lang, None, false, false, title);
    let state = State::for_training(tr, args.eval_every, None, options)?;
    terminal::ensure_terminal()?;
    app::run(state)
}

fn report(r: &EvalRecord, json: bool) -> Result<()> {
    if json {
        let line = serde_json::to_string(r).map_err(|e| Error::Internal(e.to_string()))?;
        return output::println(&line);
    }
    output::println(&format!(
        "step {:>6}  loss {:.3}  repeated {:.3}  other {:.3}  induction {:.2}  prev-token {:.2}  {:.1} ms/step",
        r.step,
        r.loss,
        r.loss_repeated,
        r.loss_other,
        r.induction_max,
        r.prev_token_max,
        r.ms_per_step
    ))
}

/// The ablation test at the end of a run: one JSON object `{"ablation": ...}`, or lines.
fn report_ablation(ab: &AblationRecord, json: bool) -> Result<()> {
    if json {
        #[derive(Serialize)]
        struct Line<'a> {
            ablation: &'a AblationRecord,
        }
        let line = serde_json::to_string(&Line { ablation: ab })
            .map_err(|e| Error::Internal(e.to_string()))?;
        return output::println(&line);
    }
    let mut line = format!(
        "ablation on the probe's copy: loss {:.3}; without L{}H{} (previous-token {:.2}) {:.3}; without L{}H{} (induction {:.2}) {:.3}; without both {:.3}; without the {} induction head(s) together {:.3}; without the {} previous-token head(s) together {:.3}; without all of them {:.3}",
        ab.probe_loss,
        ab.prev_token_head.layer,
        ab.prev_token_head.head,
        ab.prev_token_head.score,
        ab.prev_token_head.probe_loss,
        ab.induction_head.layer,
        ab.induction_head.head,
        ab.induction_head.score,
        ab.induction_head.probe_loss,
        ab.both_probe_loss,
        ab.induction_heads.len(),
        ab.induction_heads_probe_loss,
        ab.prev_token_heads.len(),
        ab.prev_token_heads_probe_loss,
        ab.circuit_probe_loss,
    );
    // With one head a layer there is no other head to remove.
    if let Some(worst) = ab.other_heads.iter().map(|h| h.probe_loss).reduce(f64::max) {
        line += &format!("; without any other head at most {worst:.3}");
    }
    output::println(&line)
}

/// Median wall time of `n` steps after 3 untimed ones.
fn bench(cfg: TrainConfig, source: Source, n: usize, json: bool) -> Result<()> {
    if n == 0 {
        return Err(Error::usage("--bench-steps must be at least 1"));
    }
    let threads = cfg.threads;
    let mut tr = Trainer::new(
        TrainConfig {
            steps: n + 3,
            ..cfg
        },
        source,
    )?;
    let mut times = Vec::with_capacity(n);
    for i in 0..n + 3 {
        let t0 = std::time::Instant::now();
        tr.step()?;
        if i >= 3 {
            times.push(t0.elapsed().as_secs_f64() * 1e3);
        }
    }
    times.sort_by(f64::total_cmp);
    let ms = times[n / 2];
    if json {
        let j = BenchJson {
            steps: n,
            threads,
            ms_per_step: ms,
        };
        output::println(&serde_json::to_string(&j).map_err(|e| Error::Internal(e.to_string()))?)
    } else {
        output::println(&format!(
            "{ms:.2} ms per step (median of {n}, {threads} threads)"
        ))
    }
}
