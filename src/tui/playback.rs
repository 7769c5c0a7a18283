//! Lesson playback: a script's steps applied to the state (each says only what changes,
//! so jumping to step k replays steps 0..=k), its animations, play and pause, speed, and
//! virtual time. Called from `update`, never with a clock of its own.

use crate::cli::Lang;
use crate::model::forward::ForwardOptions;
use crate::scene::train::Condition;
use crate::tui::change::rebuild;
use crate::tui::script::ScriptStep;
use crate::tui::state::{PendingRerun, Playback, SPEEDS, Source, State, StatusKind};
use crate::tui::training::{self, Gate};
use crate::tui::views;
use crate::tui::views::decode::session_key;

impl State {
    /// Load a script and show its first step; `autoplay` starts playing at once.
    pub fn with_script(mut self, steps: Vec<ScriptStep>, autoplay: bool, speed: f64) -> State {
        if steps.is_empty() {
            return self;
        }
        let first = steps[0].clone();
        self.script = Some(Playback {
            steps,
            index: 0,
            playing: autoplay,
            speed: if speed.is_finite() && speed > 0.0 {
                speed
            } else {
                1.0
            },
            elapsed_ms: 0.0,
            frame: None,
            quoted: None,
        });
        apply_step(&mut self, &first);
        show_animation(&mut self);
        self
    }
}

/// Show one scripted step: its view, stage, head, highlighted cells (the first gets the
/// cursor), tiles, variants panel and narration. Parts that do not fit the data are left out and said so.
pub(crate) fn apply_step(state: &mut State, step: &ScriptStep) {
    // A step that autoplay reaches (through a tick) must not inherit the previous
    // step's warning: the status line would hide this step's narration.
    state.status = None;
    let mut problems = Vec::new();
    if let Some(kind) = step.view {
        if views::find(kind).is_some() {
            state.view = kind;
        } else {
            problems.push(format!("view {kind} is not in this build"));
        }
    }
    apply_model_step(state, step, &mut problems);
    if let Some(c) = step.contributions {
        apply_measure(state, c);
    }
    if let Some(id) = step.stage {
        state.stage = id;
    }
    if let Some(h) = step.head {
        if h < state.heads() {
            state.head = h;
        } else {
            problems.push(format!(
                "head index {h} (heads are indexed 0..={})",
                state.heads() - 1
            ));
        }
    }
    if let Some(b) = step.flash_blocks {
        state.flash.br = Some(b.br);
        state.flash.bc = Some(b.bc);
    }
    state.sub = 0;
    state.highlight = step.highlight.clone();
    state.tiles = step.tiles.clone();
    if step.variant.is_some() {
        state.variant = step.variant;
    }
    if let Some(pass) = step.pass {
        state.flash.pass = pass;
    }
    state.animation_rate = None;
    state.narration = (!step.narration.is_empty()).then(|| step.narration.clone());
    let quoted = training::last_evaluation(state).map(|(last, _)| last);
    if let Some(p) = state.script.as_mut() {
        p.quoted = quoted;
    }
    let view = views::current(state);
    view.refresh(state);
    if let Some(show) = step.show {
        views::model::show_in_lesson(state, show);
    }
    if let Some(on) = step.lens_target {
        views::lens::target_in_lesson(state, on);
    }
    if let Some(what) = step.patch {
        views::patch::what_in_lesson(state, what);
    }
    if let Some(on) = step.writers {
        views::model::writers_in_lesson(state, on);
    }
    // After the view's refresh, which may put the cursor on its own first cell.
    if let Some(&first) = step.highlight.first() {
        state.cursor = first;
    }
    state.clamp();
    if !problems.is_empty() {
        state.set_status(
            StatusKind::Warn,
            format!("this step asks for {}", problems.join(", ")),
        );
    }
}

pub(crate) fn goto_step(state: &mut State, k: usize) {
    let Some(p) = state.script.as_mut() else {
        state.set_status(StatusKind::Warn, "no lesson is loaded (attnviz play SCENE)");
        return;
    };
    if k >= p.steps.len() {
        state.set_status(StatusKind::Info, "this is the last step");
        return;
    }
    p.index = k;
    p.elapsed_ms = 0.0;
    p.frame = None;
    // A step says only what changes, so step k shows what steps 0..=k built up: replay
    // them in order (jumping back from step 5 to step 2 must not keep step 5's stage),
    // each earlier animation played to its end, as autoplay leaves it.
    let mut steps: Vec<ScriptStep> = p.steps[..=k].to_vec();
    // A trained model runs again for each change of interventions: apply only the ones
    // in force at step k, and at its first step, rather than each on the way.
    if let Some(iv) = steps.iter().rev().find_map(|s| s.intervene.clone()) {
        for s in &mut steps {
            s.intervene = None;
        }
        steps[0].intervene = Some(iv);
    }
    // The same for the layer: each change builds the layer's pipeline (a forward pass on
    // a real model), so only the last step that sets one does.
    if let Some(last) = steps.iter().rposition(|s| s.layer.is_some()) {
        for s in &mut steps[..last] {
            s.layer = None;
        }
    }
    for (i, step) in steps.iter().enumerate() {
        apply_step(state, step);
        if let Some(a) = step.animate
            && i < k
        {
            views::current(state).show_frame(state, a.to);
        }
    }
    show_animation(state);
}

/// Show the position the current step's animation has reached, if it moved: the view's
/// tile or token, through the view (the cursor stays the person's between positions).
fn show_animation(state: &mut State) {
    let Some((a, k)) = state.script.as_ref().and_then(|p| p.animation_now()) else {
        return;
    };
    let moving = k < a.to && state.script.as_ref().is_some_and(|p| p.playing);
    state.animation_rate = moving.then_some(a.rate);
    if state.script.as_ref().and_then(|p| p.frame) == Some(k) {
        return;
    }
    let view = views::current(state);
    if k < view.frames(state) {
        view.show_frame(state, k);
        state.clamp();
    }
    if let Some(p) = state.script.as_mut() {
        p.frame = Some(k);
    }
}

pub(crate) fn play_pause(state: &mut State) {
    let Some(p) = state.script.as_mut() else {
        state.set_status(StatusKind::Warn, "no lesson is loaded (attnviz play SCENE)");
        return;
    };
    if p.playing {
        p.playing = false;
    } else if p.finished() {
        // Play again from the start.
        p.playing = true;
        goto_step(state, 0);
    } else {
        p.playing = true;
    }
    training::follow_script(state);
}

pub(crate) fn change_speed(state: &mut State, delta: isize) {
    let Some(p) = state.script.as_mut() else {
        return;
    };
    let i = SPEEDS
        .iter()
        .position(|&s| s >= p.speed)
        .unwrap_or(SPEEDS.len() - 1) as isize;
    p.speed = SPEEDS[(i + delta).clamp(0, SPEEDS.len() as isize - 1) as usize];
    let speed = p.speed;
    state.set_status(StatusKind::Info, format!("speed x{speed}"));
}

pub(crate) fn tick(state: &mut State, ms: u64) {
    let Some(p) = state.script.as_mut() else {
        return;
    };
    // The clock waits while the model runs again for the step on screen.
    if !p.playing || state.rerun.is_some() {
        return;
    }
    p.elapsed_ms += ms as f64 * p.speed;
    advance(state);
    show_animation(state);
}

/// Move on past every step whose dwell the elapsed time has used up.
fn advance(state: &mut State) {
    loop {
        let Some(p) = state.script.as_mut() else {
            return;
        };
        let dwell = p.dwell_ms(p.index) as f64;
        if p.elapsed_ms < dwell {
            return;
        }
        if p.index + 1 >= p.steps.len() {
            p.elapsed_ms = dwell;
            p.playing = false;
            return;
        }
        let rest = p.elapsed_ms - dwell;
        // A training lesson's next step may wait for the run, or be skipped when the
        // run ended without reaching what it waits for.
        let mut next = p.index + 1;
        let mut skipped = Vec::new();
        loop {
            let when = state.script.as_ref().and_then(|p| p.steps.get(next)?.when);
            match training::gate(state, when.as_ref()) {
                Gate::Open => break,
                Gate::Skip => {
                    skipped.extend(when);
                    next += 1;
                }
                Gate::Wait => {
                    if let Some(p) = state.script.as_mut() {
                        p.elapsed_ms = dwell;
                    }
                    return;
                }
            }
        }
        let Some(p) = state.script.as_mut() else {
            return;
        };
        if next >= p.steps.len() {
            // Every step left waited for something the run never reached.
            p.elapsed_ms = dwell;
            p.playing = false;
            say_skipped(state, &skipped);
            return;
        }
        let finished = p.steps[p.index].animate;
        p.index = next;
        p.frame = None;
        let step = p.steps[p.index].clone();
        // A tick long enough to pass the step's end passed its animation's end too.
        if let Some(a) = finished {
            views::current(state).show_frame(state, a.to);
        }
        apply_step(state, &step);
        say_skipped(state, &skipped);
        if let Some(p) = state.script.as_mut() {
            p.elapsed_ms = rest;
        }
        if state.rerun.is_some() {
            // The step's model run comes first; the clock goes on once it is shown.
            return;
        }
    }
}

/// A step skipped because the run ended without what it waited for is never skipped
/// in silence: the narration of the step shown instead begins by saying so.
fn say_skipped(state: &mut State, skipped: &[Condition]) {
    if skipped.is_empty() {
        return;
    }
    let what: Vec<String> = skipped.iter().map(|c| format!("`{c}`")).collect();
    let what = what.join(", ");
    let note = match state.options.lang {
        Lang::En => format!(
            "(The run ended without reaching {what}, so the step that waited for it is skipped.) "
        ),
        Lang::Zh => format!("（训练结束时没有达到 {what}，等待它的那一步已跳过。）"),
    };
    let rest = state.narration.take().unwrap_or_default();
    state.narration = Some(note + &rest);
}

/// A lesson step's `measure`: the model and tokens views draw contributions or weights;
/// contributions the session does not keep yet come from a run on the worker (with the
/// step's interventions, if it has some on their way).
fn apply_measure(state: &mut State, contrib: bool) {
    views::model::contrib_in_lesson(state, contrib);
    views::tokens::contrib_in_lesson(state, contrib);
    let Source::Real { session, .. } = &state.source else {
        return;
    };
    if !contrib || session.contributions.is_some() {
        return;
    }
    let session = session.clone();
    let base = session_key(&session);
    match &mut state.rerun {
        Some(p) if p.base == base => p.contributions = true,
        _ => {
            state.rerun = Some(PendingRerun {
                base,
                options: session.options.clone(),
                contributions: true,
                for_lesson: true,
            })
        }
    }
}

/// A lesson step's layer and interventions on a real model; the problems go to the
/// step's warning. The model runs again on a worker (the event loop's, or
/// `lens_worker::run_pending` for headless drivers), with a progress line, while the
/// lesson's clock waits for it ([`tick`]); Esc stops it and leaves the model as it was.
fn apply_model_step(state: &mut State, step: &ScriptStep, problems: &mut Vec<String>) {
    let Source::Real { session, layer } = &state.source else {
        if step.layer.is_some() || step.intervene.is_some() {
            problems.push("a layer or interventions, which only a trained model has".into());
        }
        return;
    };
    let (session, now) = (session.clone(), *layer);
    if let Some(l) = step.layer
        && l != now
    {
        let layers = session.config().layers;
        if l >= layers {
            problems.push(format!(
                "layer index {l} (layers are indexed 0..={})",
                layers - 1
            ));
        } else {
            rebuild(
                state,
                Source::Real {
                    session: session.clone(),
                    layer: l,
                },
            );
        }
    }
    if let Some(iv) = &step.intervene {
        // A mask the lesson set up (padding) stays unless the step replaces it.
        let base = session.base_options().mask.clone();
        let options = ForwardOptions {
            ablate: iv.ablate.clone(),
            mask: iv.mask.clone().or(base),
            rope_base: iv.rope_base,
            no_pe: iv.no_pe,
            ..session.options.clone()
        };
        state.rerun = (session.options != options).then(|| PendingRerun {
            base: session_key(&session),
            options,
            contributions: false,
            for_lesson: true,
        });
    }
}
