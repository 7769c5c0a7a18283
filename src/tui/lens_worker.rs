//! The event loop's side of the views and keys that wait for a long model computation:
//! the logit lens (an unembedding per layer and position, seconds on a long text), the
//! attribution (a forward pass), the decode view's decoding (a forward pass over the
//! text and a step per new token), the model run again with other heads ablated (`d`,
//! `D`) or keeping the contributions (`w`: a forward pass, and the pipeline of the layer
//! on screen), the model view's scores of every head and its rollout (seconds over a
//! 1,024-token text's 270 maps) and composition scores of every pair of heads (from the
//! weights), the position view's reading of the model's position encoding, and the patch
//! view's sweep between two texts (one partial forward pass per site). A worker
//! thread computes each and the result comes back as an action, so the screen never
//! freezes; while the run, the decoding or a view's numbers are computed, the screen
//! shows a progress line and Esc stops it. Headless drivers (recordings, tests) compute
//! them in place with [`run_pending`]. The state changes only through `update`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use crate::cli::Lang;
use crate::kernel::default_threads;
use crate::model::attribution::attribute;
use crate::model::composition::composition_scores;
use crate::model::decode_steps::{APP_NEW_TOKENS, Decoding};
use crate::model::forward::ForwardOptions;
use crate::model::lens::{TextLens, text_lens};
use crate::model::load::LoadedModel;
use crate::model::patching::{LogitPair, PatchWhat, patch_sweep_keeping, patched_tops};
use crate::model::session::Measure;
use crate::model::session::ModelSession;
use crate::tui::action::{
    Action, AttributionReport, CompositionReport, DerivedReport, LensReport, PatchOutcome,
    PatchReport, Shared, WorkReport,
};
use crate::tui::compare::second_run;
use crate::tui::state::{Source, State};
use crate::tui::update::update;
use crate::tui::views::attribution;
use crate::tui::views::decode::real as decode;
use crate::tui::views::lens::{self, LensKey, TOP, final_top};
use crate::tui::views::model::{self, Wanted, writers};
use crate::tui::views::patch;
use crate::tui::views::position::real as position;

/// What a job computes.
#[derive(Debug, Clone, PartialEq)]
enum What {
    /// The lens, with the last position's target.
    Lens { last: Option<u32> },
    /// The attribution of logit(target) - logit(foil) at the last position.
    Attribution { target: u32, foil: u32 },
    /// The decode view's decoding of the session `key`.
    Decode { key: String },
    /// The session `base` run again with `options` (keeping the contributions if
    /// `contributions`), and the pipeline of its block `layer`.
    Rerun {
        base: String,
        options: ForwardOptions,
        contributions: bool,
        layer: usize,
    },
    /// The composition scores of every pair of heads of the model (the key's ids empty).
    Composition,
    /// The model view's scores of every head of the session (by address) in `measure`.
    HeadScores { session: usize, measure: Measure },
    /// The model view's rollout of the session's weights or contributions.
    Rollout { session: usize, measure: Measure },
    /// The position view's reading of the session's position encoding (`key` as the
    /// view names the session).
    Position { key: String },
    /// The patch view's sweep from the session's text into `corrupt` at `what`
    /// (`sites` of them), with the second text's run.
    Patch {
        corrupt: Vec<u32>,
        what: PatchWhat,
        sites: usize,
    },
}

impl What {
    /// Does the screen show a progress line for it, and does Esc stop it?
    fn stoppable(&self) -> bool {
        !matches!(
            self,
            What::Lens { .. } | What::Attribution { .. } | What::Composition
        )
    }

    /// Jobs of one kind run one at a time: a superseded one is stopped and finishes
    /// before the next starts, so keys pressed fast never pile up threads and memory.
    fn kind(&self) -> u8 {
        match self {
            What::Lens { .. } => 0,
            What::Attribution { .. } => 1,
            What::Decode { .. } => 2,
            What::Rerun { .. } => 3,
            What::Composition => 4,
            What::HeadScores { .. } => 5,
            What::Rollout { .. } => 6,
            What::Position { .. } => 7,
            What::Patch { .. } => 8,
        }
    }
}

/// One job: what, for which model, text and session.
struct Job {
    key: LensKey,
    what: What,
    model: Arc<LoadedModel>,
    session: Arc<ModelSession>,
}

/// The jobs the views and keys wait for now, lens first.
fn jobs(state: &State) -> Vec<Job> {
    let Source::Real { session, .. } = &state.source else {
        return Vec::new();
    };
    let s = session.as_ref();
    let job = |key, what| Job {
        key,
        what,
        model: s.model.clone(),
        session: session.clone(),
    };
    let mut out = Vec::new();
    if let Some(key) = lens::wanted(state) {
        out.push(job(key, What::Lens { last: final_top(s) }));
    }
    if let Some((key, target, foil)) = attribution::wanted(state) {
        out.push(job(key, What::Attribution { target, foil }));
    }
    if let Some((key, _)) = decode::wanted(state) {
        out.push(job(lens::lens_key(s), What::Decode { key }));
    }
    if let Some(p) = &state.rerun
        && p.base == decode::session_key(s)
    {
        out.push(job(
            lens::lens_key(s),
            What::Rerun {
                base: p.base.clone(),
                options: p.options.clone(),
                contributions: p.contributions,
                layer: state.layer(),
            },
        ));
    }
    if let Some((session, wanted)) = model::wanted(state) {
        for w in wanted {
            out.push(job(
                lens::lens_key(s),
                match w {
                    Wanted::Scores(measure) => What::HeadScores { session, measure },
                    Wanted::Rollout(measure) => What::Rollout { session, measure },
                },
            ));
        }
    }
    if let Some(key) = position::wanted(state) {
        out.push(job(lens::lens_key(s), What::Position { key }));
    }
    if let Some(key) = patch::wanted(state) {
        let sites = s.config().layers * key.what.columns(s.config(), s.n());
        out.push(job(
            lens::lens_key(s),
            What::Patch {
                corrupt: key.corrupt,
                what: key.what,
                sites,
            },
        ));
    }
    if let Some(model) = writers::wanted(state) {
        out.push(Job {
            key: LensKey {
                model,
                ids: Vec::new(),
            },
            what: What::Composition,
            model: s.model.clone(),
            session: session.clone(),
        });
    }
    out
}

/// How far a job is: steps done of how many (0 of 0 when it cannot tell), and whether
/// it should stop.
#[derive(Default)]
struct Progress {
    done: AtomicUsize,
    stop: AtomicBool,
}

fn compute(job: &Job, progress: &Progress) -> Action {
    let m = &job.model;
    let ids = &job.key.ids;
    let key = (job.key.model, ids.clone());
    match &job.what {
        What::Lens { last } => Action::Lens(Box::new(LensReport {
            key,
            lens: text_lens(&m.config, &m.weights, ids, TOP, *last, None)
                .map(Arc::new)
                .map_err(|e| e.to_string()),
        })),
        What::Attribution { target, foil } => Action::Attribution(Box::new(AttributionReport {
            key,
            attribution: attribute(
                &m.config,
                &m.weights,
                ids,
                ids.len().saturating_sub(1),
                *target,
                Some(*foil),
                None,
            )
            .map(Arc::new)
            .map_err(|e| e.to_string()),
        })),
        What::Decode { key } => {
            let decoding = Decoding::run_with(&job.session, APP_NEW_TOKENS, |done| {
                progress.done.store(done, Ordering::Relaxed);
                !progress.stop.load(Ordering::Relaxed)
            });
            Action::Work(Box::new(WorkReport::Decoded {
                key: key.clone(),
                decoding: decoding
                    .map(|d| Shared(Arc::new(d)))
                    .map_err(|e| e.to_string()),
            }))
        }
        What::Rerun {
            base,
            options,
            contributions,
            layer,
        } => {
            let session = job
                .session
                .again(options.clone(), *contributions)
                .map(Arc::new);
            // The layer's pipeline too, so that showing the new session takes no work.
            let pipeline = session.as_ref().ok().and_then(|s| {
                let source = Source::Real {
                    session: s.clone(),
                    layer: *layer,
                };
                source.build().ok()
            });
            Action::Work(Box::new(WorkReport::Rerun {
                base: base.clone(),
                options: options.clone(),
                contributions: *contributions,
                session: session.map(Shared).map_err(|e| e.to_string()),
                pipeline: pipeline.map(|p| (*layer, Shared(Arc::new(p)))),
            }))
        }
        What::HeadScores { session, measure } => {
            let s = &job.session;
            let scores = s.maps(*measure).and_then(|maps| {
                model::scores_until(s, maps, |done| {
                    progress.done.store(done, Ordering::Relaxed);
                    !progress.stop.load(Ordering::Relaxed)
                })
            });
            derived(DerivedReport::HeadScores {
                session: *session,
                measure: *measure,
                scores: Shared(Arc::new(scores.unwrap_or_default())),
            })
        }
        What::Rollout { session, measure } => derived(DerivedReport::Rollout {
            session: *session,
            measure: *measure,
            rollout: Shared(Arc::new(
                model::rollout_of(&job.session, *measure).unwrap_or_default(),
            )),
        }),
        What::Position { key } => derived(DerivedReport::Position {
            key: key.clone(),
            data: Shared(Arc::new(position::compute(&job.session))),
        }),
        What::Patch { corrupt, what, .. } => {
            let (compare, outcome) = remembered_sweep(job, corrupt, *what, progress);
            Action::Patch(Box::new(PatchReport {
                key: (job.key.model, ids.clone(), corrupt.clone(), *what),
                compare: compare.map(Shared),
                outcome,
            }))
        }
        What::Composition => {
            let layers: Vec<usize> = (0..m.config.layers).collect();
            Action::Composition(Box::new(CompositionReport {
                model: job.key.model,
                scores: composition_scores(&m.config, &m.weights, &layers, default_threads())
                    .map(Arc::new)
                    .map_err(|e| e.to_string()),
            }))
        }
    }
}

/// A sweep's inputs: the model (held, and compared by address: a model dropped and
/// another loaded at its address cannot match), the first text's ids, the second's, and
/// the sites.
type SweepKey = (Arc<LoadedModel>, Vec<u32>, Vec<u32>, PatchWhat);

/// Sweeps this process finished, newest last, at most [`SWEEPS_KEPT`]: going back to a
/// kind of site, or a lesson's patch step played again (each still of a recording, a
/// second language), shows the result at once instead of running every site again; only
/// the second text's run (one forward pass) is made again. A sweep's outcome is its
/// metric and top tokens per site: at most about 3 MB (SmolLM2's residual stream on
/// 1,024 tokens). Each key has its own lock, so a second job for the same sweep waits for
/// the first instead of running it too.
type SweepMemo = Vec<(SweepKey, Arc<Mutex<Option<Arc<PatchOutcome>>>>)>;
static SWEEPS: Mutex<SweepMemo> = Mutex::new(Vec::new());
const SWEEPS_KEPT: usize = 16;

/// [`sweep`], or its outcome from [`SWEEPS`]. A stopped or failed sweep is not kept.
#[allow(clippy::type_complexity)]
fn remembered_sweep(
    job: &Job,
    corrupt: &[u32],
    what: PatchWhat,
    progress: &Progress,
) -> (Option<Arc<ModelSession>>, Result<Arc<PatchOutcome>, String>) {
    let key: SweepKey = (
        job.model.clone(),
        job.session.ids.clone(),
        corrupt.to_vec(),
        what,
    );
    let same =
        |k: &SweepKey| Arc::ptr_eq(&k.0, &key.0) && k.1 == key.1 && k.2 == key.2 && k.3 == key.3;
    let cell = {
        let mut memo = SWEEPS.lock().unwrap_or_else(|e| e.into_inner());
        match memo.iter().position(|(k, _)| same(k)) {
            Some(i) => {
                let entry = memo.remove(i);
                let cell = entry.1.clone();
                memo.push(entry);
                cell
            }
            None => {
                if memo.len() >= SWEEPS_KEPT {
                    memo.remove(0);
                }
                let cell = Arc::new(Mutex::new(None));
                memo.push((key, cell.clone()));
                cell
            }
        }
    };
    let mut slot = cell.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(outcome) = slot.as_ref() {
        return match second_run(&job.model, corrupt).map_err(|e| e.to_string()) {
            Ok(compare) => (Some(compare), Ok(outcome.clone())),
            Err(e) => (None, Err(e)),
        };
    }
    let (compare, outcome) = sweep(job, corrupt, what, progress);
    if let Ok(o) = &outcome {
        *slot = Some(o.clone());
    }
    (compare, outcome)
}

/// The patch view's sweep: the second text's run (its top-1 is the foil, unless it is the
/// first text's answer too: then the first text's top-2), the sweep keeping every patched
/// run's state, and their top tokens.
#[allow(clippy::type_complexity)]
fn sweep(
    job: &Job,
    corrupt: &[u32],
    what: PatchWhat,
    progress: &Progress,
) -> (Option<Arc<ModelSession>>, Result<Arc<PatchOutcome>, String>) {
    let m = &job.model;
    let s = &job.session;
    let compare = match second_run(m, corrupt).map_err(|e| e.to_string()) {
        Ok(c) => c,
        Err(e) => return (None, Err(e)),
    };
    let own = s.baseline.as_ref().map_or(&s.top_next, |b| &b.top_next);
    let (Some(&target), Some(&second)) = (own.first(), own.get(1)) else {
        return (
            Some(compare),
            Err("the model gave no next-token predictions".into()),
        );
    };
    let foil = match compare.top_next.first() {
        Some(&f) if f.id != target.id => f,
        _ => second,
    };
    let pair = LogitPair {
        target: target.id,
        foil: foil.id,
    };
    let outcome = patch_sweep_keeping(
        &m.config,
        &m.weights,
        &s.ids,
        corrupt,
        pair,
        what,
        None,
        &mut |done, _| {
            progress.done.store(done, Ordering::Relaxed);
            if progress.stop.load(Ordering::Relaxed) {
                Err(crate::error::Error::usage("stopped"))
            } else {
                Ok(())
            }
        },
    )
    .and_then(|mut result| {
        let tops = patched_tops(
            &m.config,
            &m.weights,
            &result.hidden,
            patch::TOP,
            default_threads(),
        )?;
        result.hidden = Default::default();
        Ok(Arc::new(PatchOutcome {
            result,
            target,
            foil,
            tops,
        }))
    })
    .map_err(|e| e.to_string());
    (Some(compare), outcome)
}

fn derived(report: DerivedReport) -> Action {
    Action::Derived(Box::new(report))
}

/// The report of a job whose thread ended without one (it panicked).
fn stopped(key: &LensKey, what: &What) -> Action {
    let key = (key.model, key.ids.clone());
    let e = "the worker thread stopped unexpectedly".to_string();
    match what {
        What::Lens { .. } => Action::Lens(Box::new(LensReport { key, lens: Err(e) })),
        What::Attribution { .. } => Action::Attribution(Box::new(AttributionReport {
            key,
            attribution: Err(e),
        })),
        What::Decode { key } => Action::Work(Box::new(WorkReport::Decoded {
            key: key.clone(),
            decoding: Err(e),
        })),
        What::Rerun {
            base,
            options,
            contributions,
            ..
        } => Action::Work(Box::new(WorkReport::Rerun {
            base: base.clone(),
            options: options.clone(),
            contributions: *contributions,
            session: Err(e),
            pipeline: None,
        })),
        // Nothing to show, and the views do not ask again.
        What::HeadScores { session, measure } => derived(DerivedReport::HeadScores {
            session: *session,
            measure: *measure,
            scores: Shared(Arc::new(Vec::new())),
        }),
        What::Rollout { session, measure } => derived(DerivedReport::Rollout {
            session: *session,
            measure: *measure,
            rollout: Shared(Arc::new(Vec::new())),
        }),
        What::Position { .. } => Action::CancelWork,
        What::Patch { corrupt, what, .. } => Action::Patch(Box::new(PatchReport {
            key: (key.0, key.1, corrupt.clone(), *what),
            compare: None,
            outcome: Err(e),
        })),
        What::Composition => Action::Composition(Box::new(CompositionReport {
            model: key.0,
            scores: Err(e),
        })),
    }
}

/// The progress line of a running job (`heads`: of the model, for the head scores), in
/// the app's language.
fn line(what: &What, tokens: usize, heads: usize, done: usize, secs: f64, lang: Lang) -> String {
    let zh = lang == Lang::Zh;
    let stops = if zh { "Esc 停止" } else { "Esc stops" };
    let body = match (what, zh) {
        (What::Decode { .. }, false) => format!(
            "decoding after the {tokens}-token text: {done} of up to {APP_NEW_TOKENS} tokens"
        ),
        (What::Decode { .. }, true) => {
            format!("在 {tokens} 个词元的文本之后解码：{done} / 最多 {APP_NEW_TOKENS} 个词元")
        }
        (
            What::Rerun {
                options,
                contributions,
                ..
            },
            false,
        ) => format!(
            "running the model again on {tokens} tokens{} ({})",
            if *contributions {
                " to keep every head's contributions"
            } else {
                ""
            },
            interventions(options, lang),
        ),
        (
            What::Rerun {
                options,
                contributions,
                ..
            },
            true,
        ) => format!(
            "在 {tokens} 个词元上重新运行模型{}（{}）",
            if *contributions {
                "，保留每个头的贡献"
            } else {
                ""
            },
            interventions(options, lang),
        ),
        (What::HeadScores { measure, .. }, false) => format!(
            "scoring every head's {} on {tokens} tokens: {done} of {heads} heads",
            match measure {
                Measure::Weights => "weights",
                Measure::Contributions => "contributions",
            }
        ),
        (What::HeadScores { measure, .. }, true) => format!(
            "在 {tokens} 个词元上为每个头的{}打分：{done} / {heads} 个头",
            match measure {
                Measure::Weights => "权重",
                Measure::Contributions => "贡献",
            }
        ),
        (What::Rollout { .. }, false) => {
            format!("rolling attention out through every layer on {tokens} tokens")
        }
        (What::Rollout { .. }, true) => format!("在 {tokens} 个词元上逐层展开注意力"),
        (What::Position { .. }, false) => {
            format!("reading the model's position encoding for {tokens} tokens")
        }
        (What::Position { .. }, true) => format!("读取模型对 {tokens} 个词元的位置编码"),
        (What::Patch { what, sites, .. }, false) => format!(
            "patching {} between the two {tokens}-token texts: {done} of {sites} sites",
            match what {
                PatchWhat::Resid => "the residual stream",
                PatchWhat::Heads => "each head's output",
                PatchWhat::AttnOut => "the attention outputs",
                PatchWhat::MlpOut => "the MLP outputs",
            }
        ),
        (What::Patch { what, sites, .. }, true) => format!(
            "在两段 {tokens} 个词元的文本之间修补{}：{done} / {sites} 个位置",
            match what {
                PatchWhat::Resid => "残差流",
                PatchWhat::Heads => "每个头的输出",
                PatchWhat::AttnOut => "注意力输出",
                PatchWhat::MlpOut => "MLP 输出",
            }
        ),
        (What::Lens { .. } | What::Attribution { .. } | What::Composition, _) => {
            return String::new();
        }
    };
    format!("{body} · {secs:.1} s · {stops}")
}

/// What a run changes, for its progress line: "2 heads ablated, mask window:6,1".
fn interventions(o: &ForwardOptions, lang: Lang) -> String {
    let zh = lang == Lang::Zh;
    let mut parts = Vec::new();
    match (o.ablate.len(), zh) {
        (0, _) => {}
        (1, false) => parts.push("1 head ablated".to_string()),
        (n, false) => parts.push(format!("{n} heads ablated")),
        (n, true) => parts.push(format!("置零 {n} 个头")),
    }
    if let Some(m) = &o.mask {
        parts.push(format!("{} {m}", if zh { "掩码" } else { "mask" }));
    }
    if let Some(b) = o.rope_base {
        parts.push(format!(
            "{} {b}",
            if zh { "RoPE 基数" } else { "RoPE base" }
        ));
    }
    if o.no_pe {
        parts.push(
            if zh {
                "无位置编码"
            } else {
                "no position encoding"
            }
            .to_string(),
        );
    }
    if parts.is_empty() {
        if zh { "保持原样" } else { "as it was" }.to_string()
    } else {
        parts.join(if zh { "，" } else { ", " })
    }
}

struct Running {
    key: LensKey,
    /// Heads of the model (layers x heads).
    heads: usize,
    what: What,
    progress: Arc<Progress>,
    started: Instant,
    report: Receiver<Action>,
    handle: JoinHandle<()>,
}

/// Owns the workers of the numbers being computed.
#[derive(Default)]
pub struct Driver {
    running: Vec<Running>,
    /// The progress line last sent.
    shown: Option<String>,
}

impl Driver {
    /// True while a worker runs (the loop then wakes often to take its report).
    pub fn busy(&self) -> bool {
        !self.running.is_empty()
    }

    /// Start a worker for each job waited for that no worker computes, stop the workers
    /// of jobs no longer waited for, feed finished workers' reports to `update`, and keep
    /// the progress line up to date.
    pub fn sync(&mut self, state: &mut State) {
        let jobs = jobs(state);
        for r in &self.running {
            if r.what.stoppable() && !jobs.iter().any(|j| j.key == r.key && j.what == r.what) {
                r.progress.stop.store(true, Ordering::Relaxed);
            }
        }
        for j in jobs {
            // A stopped worker does not count as computing its job: asked again (Esc,
            // then the view opened again), it starts anew once the stopped one ends.
            if self.running.iter().any(|r| {
                (r.key == j.key && r.what == j.what && !r.progress.stop.load(Ordering::Relaxed))
                    || (j.what.stoppable() && r.what.kind() == j.what.kind())
            }) {
                continue;
            }
            // A lens or attribution worker for another text is left to finish; its
            // report is dropped by the view, which no longer waits for it.
            let (tx, report) = mpsc::channel();
            let (key, what) = (j.key.clone(), j.what.clone());
            let heads = j.model.config.layers * j.model.config.heads;
            let progress = Arc::new(Progress::default());
            let p = progress.clone();
            let handle = std::thread::spawn(move || {
                let _ = tx.send(compute(&j, &p));
            });
            self.running.push(Running {
                key,
                heads,
                what,
                progress,
                started: Instant::now(),
                report,
                handle,
            });
        }
        let mut reports = Vec::new();
        self.running.retain(|r| match r.report.try_recv() {
            // What a stopped worker made (perhaps cut short) is not waited for.
            Ok(_) if r.progress.stop.load(Ordering::Relaxed) => false,
            Err(_) if r.handle.is_finished() && r.progress.stop.load(Ordering::Relaxed) => false,
            Ok(a) => {
                reports.push(a);
                false
            }
            Err(_) if r.handle.is_finished() => {
                reports.push(
                    r.report
                        .try_recv()
                        .unwrap_or_else(|_| stopped(&r.key, &r.what)),
                );
                false
            }
            Err(_) => true,
        });
        for a in reports {
            update(state, a);
        }
        // One line: a run of the model or a decoding before what a view derives.
        let lang = state.ctx.options.lang;
        let shown = self
            .running
            .iter()
            .filter(|r| r.what.stoppable() && !r.progress.stop.load(Ordering::Relaxed))
            .min_by_key(|r| !matches!(r.what, What::Rerun { .. } | What::Decode { .. }))
            .map(|r| {
                let secs = r.started.elapsed().as_secs_f64();
                let done = r.progress.done.load(Ordering::Relaxed);
                line(&r.what, r.key.ids.len(), r.heads, done, secs, lang)
            });
        if shown != self.shown {
            self.shown = shown.clone();
            update(state, Action::Work(Box::new(WorkReport::Progress(shown))));
        }
    }
}

/// Compute what the views and keys wait for here and now (for headless drivers); false
/// if they wait for nothing.
pub fn run_pending(state: &mut State) -> bool {
    let mut any = false;
    // A rerun may leave the decode view waiting for the new session: until nothing waits.
    for _ in 0..4 {
        let jobs = jobs(state);
        if jobs.is_empty() {
            break;
        }
        any = true;
        for j in &jobs {
            update(state, compute(j, &Progress::default()));
        }
    }
    any
}

/// The lens the lens view shows, once computed.
pub fn lens(state: &State) -> Option<Arc<TextLens>> {
    match &lens::lab(state)?.state {
        lens::LensState::Ready(l) => Some(l.clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_lines_speak_the_apps_language() {
        let options = ForwardOptions {
            ablate: vec![(1, 2), (3, 4)],
            ..ForwardOptions::default()
        };
        let jobs = [
            What::Decode { key: String::new() },
            What::Rerun {
                base: String::new(),
                options,
                contributions: true,
                layer: 0,
            },
            What::HeadScores {
                session: 0,
                measure: Measure::Contributions,
            },
            What::Rollout {
                session: 0,
                measure: Measure::Weights,
            },
            What::Position { key: String::new() },
            What::Patch {
                corrupt: vec![1, 2],
                what: PatchWhat::Heads,
                sites: 270,
            },
        ];
        for what in &jobs {
            let en = line(what, 100, 270, 117, 8.5, Lang::En);
            let zh = line(what, 100, 270, 117, 8.5, Lang::Zh);
            assert!(
                en.ends_with("8.5 s · Esc stops") && en.contains("100"),
                "{en}"
            );
            assert!(
                zh.ends_with("8.5 s · Esc 停止") && zh.contains("100"),
                "{zh}"
            );
            let english = ["token", "head", "model", "sites", "ablated", "the "];
            assert!(!english.iter().any(|w| zh.contains(w)), "{zh}");
        }
        let zh = line(&jobs[1], 100, 270, 0, 1.0, Lang::Zh);
        assert!(zh.contains("置零 2 个头"), "{zh}");
        assert_eq!(line(&What::Composition, 1, 1, 0, 0.0, Lang::Zh), "");
    }
}
