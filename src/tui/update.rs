//! `update(&mut State, Action)`: the only place the state changes. It reads no clock,
//! no terminal and no environment; model changes go through the engine
//! (`Source::build`), and a failed rebuild leaves the old pipeline on screen with the
//! engine's message in the status line.

use crate::engine::config::{BIGBIRD_DEFAULT, MaskKind, PeKind, ROPE_BASE};
use crate::engine::limits;
use crate::engine::pipeline::{ModelConfig, StageId};
use crate::model::forward::ForwardOptions;
use crate::tui::action::{Action, EditAction};
use crate::tui::component::{Hit, View};
use crate::tui::context::Request;
use crate::tui::layout;
use crate::tui::script::ScriptStep;
use crate::tui::state::{
    LineEditor, Overlay, Playback, SPEEDS, ScaleChange, Source, State, StatusKind,
};
use crate::tui::view_kind::ViewKind;
use crate::tui::views;

pub fn update(state: &mut State, action: Action) {
    if !matches!(
        action,
        Action::Tick { .. } | Action::Resize { .. } | Action::Measurement(_)
    ) {
        state.status = None;
    }
    match action {
        Action::Quit => state.quit = true,
        Action::StageNext => step_stage(state, 1),
        Action::StagePrev => step_stage(state, -1),
        Action::StageFirst => step_stage(state, -(StageId::ALL.len() as isize)),
        Action::StageLast => step_stage(state, StageId::ALL.len() as isize),
        Action::GoStage(id) => go_stage(state, id),
        Action::Move { rows, cols } => move_cursor(state, rows, cols),
        Action::NextPane => {
            let n = state.panes().len().max(1);
            state.sub = (state.sub + 1) % n;
            state.clamp();
        }
        Action::Select { row, col } => {
            state.cursor = (row, col);
            state.clamp();
        }
        Action::Click { x, y } => click(state, x, y),
        Action::Resize { cols, rows } => state.screen = (cols, rows),
        Action::NextView => cycle_view(state, 1),
        Action::PrevView => cycle_view(state, -1),
        Action::SetView(kind) => {
            state.narration = None;
            set_view(state, kind);
        }
        Action::Head(h) => select_head(state, h),
        Action::HeadNext => {
            let h = (state.head + 1) % state.heads().max(1);
            select_head(state, h);
        }
        Action::HeadPrev => {
            let n = state.heads().max(1);
            select_head(state, (state.head + n - 1) % n);
        }
        Action::CycleMask => cycle_mask(state),
        Action::CyclePe => cycle_pe(state),
        Action::ToggleScale => toggle_scale(state),
        Action::Longer => change_length(state, 1),
        Action::Shorter => change_length(state, -1),
        Action::Reseed => {
            if let Some(mut config) = model_or_explain(state, "reseeding") {
                config.seed = config.seed.wrapping_add(1);
                let seed = config.seed;
                if rebuild(state, Source::Model(config)) {
                    state.set_status(
                        StatusKind::Info,
                        format!("seed {seed}: new embeddings and weights"),
                    );
                }
            }
        }
        Action::LayerPrev => change_layer(state, -1),
        Action::LayerNext => change_layer(state, 1),
        Action::ZoomOut => zoom(state, true),
        Action::ZoomIn => zoom(state, false),
        Action::TogglePool => {
            state.zoom.pool = state.zoom.pool.toggled();
            let name = state.zoom.pool.name();
            state.set_status(
                StatusKind::Info,
                format!("a zoomed-out cell shows its block's {name}"),
            );
        }
        Action::Edit(e) => edit(state, e),
        Action::ToggleHelp => {
            state.overlay = match state.overlay {
                Overlay::Help { .. } => Overlay::None,
                _ => Overlay::Help { scroll: 0 },
            }
        }
        Action::HelpScroll(d) => {
            if let Overlay::Help { scroll } = &mut state.overlay {
                *scroll = (*scroll as isize + d).max(0) as u16;
            }
        }
        Action::CloseOverlay => state.overlay = Overlay::None,
        Action::ApplyStep(step) => apply_step(state, &step),
        Action::GotoStep(k) => goto_step(state, k),
        Action::PlayPause => play_pause(state),
        Action::StepNext => {
            let k = state.script.as_ref().map(|p| p.index + 1);
            if let Some(k) = k {
                goto_step(state, k);
            }
        }
        Action::StepPrev => {
            let k = state.script.as_ref().map(|p| p.index.saturating_sub(1));
            if let Some(k) = k {
                goto_step(state, k);
            }
        }
        Action::Faster => change_speed(state, 1),
        Action::Slower => change_speed(state, -1),
        Action::Tick { ms } => {
            // Time passes for every view (the flash view's tiles play on their own clock).
            for view in views::VIEWS {
                view.update(state, Action::Tick { ms });
            }
            tick(state, ms);
        }
        Action::ViewCommand(_) => to_view(state, views::current(state), action),
        Action::Measurement(_) => to_view(state, views::find(ViewKind::Scaling), action),
        Action::Flash(_) => to_view(state, views::find(ViewKind::Flash), action),
    }
}

/// Hand an action to the view it is for; the view changes only its own data and the
/// selection, and the app keeps the selection inside what is on screen.
fn to_view<'v>(state: &mut State, view: impl Into<Option<&'v dyn View>>, action: Action) {
    if let Some(view) = view.into() {
        view.update(state, action);
        state.clamp();
    }
    if let Some(request) = state.request.take() {
        handle_request(state, request);
    }
}

fn handle_request(state: &mut State, request: Request) {
    match request {
        Request::Ablate { heads, toggle } => {
            let Some(session) = state.source.session() else {
                return;
            };
            let mut options = session.options.clone();
            if toggle {
                for h in heads {
                    if let Some(i) = options.ablate.iter().position(|&x| x == h) {
                        options.ablate.remove(i);
                    } else {
                        options.ablate.push(h);
                    }
                }
            } else {
                options.ablate = heads;
            }
            if rerun(state, options) {
                let session = state.source.session().expect("a real model");
                let n = session.options.ablate.len();
                let loss = session
                    .loss()
                    .map_or(String::new(), |l| format!("; loss {l:.3}"));
                state.set_status(StatusKind::Info, format!("{n} head(s) ablated{loss}"));
            }
        }
        Request::OpenHead { layer, head, view } => {
            if let Source::Real {
                session,
                layer: now,
            } = &state.source
                && *now != layer
            {
                let new = Source::Real {
                    session: session.clone(),
                    layer,
                };
                if !rebuild(state, new) {
                    return;
                }
            }
            state.head = head;
            state.narration = None;
            set_view(state, view);
            // The head's weights: the stage every view with stages can show.
            if views::current(state).shows_stages()
                && state.pipeline.stage(StageId::Softmax).is_some()
            {
                state.stage = StageId::Softmax;
                state.sub = 0;
            }
            state.clamp();
            let layers = state.source.layers();
            state.set_status(
                StatusKind::Info,
                format!("layer {} of {layers}, head {}", layer + 1, head + 1),
            );
        }
    }
}

/// Run the real model again with other interventions (same text, same layer); the
/// cursor stays where it was. False (with the error on the status line) if it failed.
fn rerun(state: &mut State, options: ForwardOptions) -> bool {
    let Source::Real { session, layer } = &state.source else {
        return false;
    };
    if session.options == options {
        return true;
    }
    let layer = *layer;
    match session.intervened(options) {
        Ok(new) => {
            let source = Source::Real {
                session: std::sync::Arc::new(new),
                layer,
            };
            let cursor = state.cursor;
            let ok = rebuild(state, source);
            if ok {
                state.cursor = cursor;
                state.clamp();
            }
            ok
        }
        Err(e) => {
            state.set_status(StatusKind::Error, e.to_string());
            false
        }
    }
}

/// A lesson step's layer and interventions on a real model; the problems go to the
/// step's warning.
fn apply_model_step(state: &mut State, step: &ScriptStep, problems: &mut Vec<String>) {
    let Source::Real { session, layer } = &state.source else {
        if step.layer.is_some() || step.intervene.is_some() {
            problems.push("a layer or interventions, which only a trained model has".into());
        }
        return;
    };
    let (session, now) = (session.clone(), *layer);
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
        if !rerun(state, options) {
            problems.push("interventions the model could not run".into());
        }
    }
    if let Some(l) = step.layer
        && l != now
    {
        let layers = session.config().layers;
        if l >= layers {
            problems.push(format!(
                "layer index {l} (layers are indexed 0..={})",
                layers - 1
            ));
        } else if let Source::Real { session, .. } = &state.source {
            let session = session.clone();
            rebuild(state, Source::Real { session, layer: l });
        }
    }
}

// ---- stages, heads, cursor, views -------------------------------------------------

fn step_stage(state: &mut State, delta: isize) {
    let view = views::current(state);
    let steps: Vec<StageId> = state
        .pipeline
        .stages
        .iter()
        .filter(|s| view.steps_stage(s))
        .map(|s| s.id)
        .collect();
    if steps.is_empty() {
        state.set_status(
            StatusKind::Info,
            format!("the {} view has no stages to step through", state.view),
        );
        return;
    }
    let here = state.stage.index() as isize;
    let target = if delta > 0 {
        // The delta-th steppable stage after the current one (or the last).
        let later: Vec<StageId> = steps
            .iter()
            .copied()
            .filter(|s| s.index() as isize > here)
            .collect();
        later.get(delta as usize - 1).or(later.last()).copied()
    } else {
        let earlier: Vec<StageId> = steps
            .iter()
            .copied()
            .filter(|s| (s.index() as isize) < here)
            .collect();
        let k = (-delta) as usize;
        earlier
            .len()
            .checked_sub(k)
            .map(|i| earlier[i])
            .or(earlier.first().copied())
    };
    match target {
        Some(id) => {
            state.narration = None;
            state.stage = id;
            state.clamp();
        }
        None => {
            let edge = if delta > 0 { "last" } else { "first" };
            state.set_status(StatusKind::Info, format!("this is the {edge} stage"));
        }
    }
}

fn go_stage(state: &mut State, id: StageId) {
    if state.pipeline.stage(id).is_some() {
        state.narration = None;
        state.stage = id;
        state.clamp();
    }
}

fn select_head(state: &mut State, h: usize) {
    let n = state.heads();
    if h < n {
        state.head = h;
        // Views that derive data per head (flash) follow the new head.
        views::current(state).refresh(state);
        state.clamp();
    } else {
        state.set_status(
            StatusKind::Warn,
            format!(
                "there {} only {n} head{}: pick 1-{n}",
                if n == 1 { "is" } else { "are" },
                if n == 1 { "" } else { "s" }
            ),
        );
    }
}

fn move_cursor(state: &mut State, rows: isize, cols: isize) {
    let view = views::current(state);
    let (n_rows, n_cols) = view.grid(state);
    if n_rows == 0 || n_cols == 0 {
        return;
    }
    // Zoomed out, a step moves by one screen cell: a block of entries.
    let p = if view.zooms() {
        state.zoom.per_cell as isize
    } else {
        1
    };
    let (rows, cols) = (rows * p, cols * p);
    let (r, c) = state.cursor;
    let r = (r as isize + rows).clamp(0, n_rows as isize - 1) as usize;
    let c = c as isize + cols;
    // In the pipeline view the cursor walks on into the next (or previous) matrix of
    // the stage, e.g. from Q into K.
    let panes = if state.view == ViewKind::Pipeline {
        state.panes().len()
    } else {
        1
    };
    if c >= n_cols as isize && state.sub + 1 < panes {
        state.sub += 1;
        state.cursor = (r, 0);
    } else if c < 0 && state.sub > 0 {
        state.sub -= 1;
        let last = state
            .focused()
            .map_or(0, |m| m.data.ncols().saturating_sub(1));
        state.cursor = (r, last);
    } else {
        state.cursor = (r, c.clamp(0, n_cols as isize - 1) as usize);
    }
    state.clamp();
}

fn cycle_view(state: &mut State, delta: isize) {
    let all = views::shown(state);
    let here = all.iter().position(|v| v.kind() == state.view).unwrap_or(0) as isize;
    let n = all.len() as isize;
    let next = all[((here + delta) % n + n) as usize % all.len()].kind();
    state.narration = None;
    set_view(state, next);
}

/// Open a view if this build has it; the view prepares what it needs.
pub(crate) fn set_view(state: &mut State, kind: ViewKind) {
    match views::find(kind) {
        Some(view) if !view.available(state) => {
            state.set_status(StatusKind::Warn, view.unavailable());
        }
        Some(view) => {
            state.view = kind;
            view.refresh(state);
            state.clamp();
        }
        None => state.set_status(
            StatusKind::Warn,
            format!("the {kind} view is not in this build"),
        ),
    }
}

fn click(state: &mut State, x: u16, y: u16) {
    if state.overlay != Overlay::None {
        return;
    }
    match layout::hit_test(state, x, y) {
        Some(Hit::Cell { sub, row, col }) => {
            state.sub = sub;
            state.cursor = (row, col);
            state.clamp();
        }
        Some(Hit::Stage(id)) => go_stage(state, id),
        Some(Hit::View(kind)) => {
            state.narration = None;
            set_view(state, kind);
        }
        Some(Hit::HeadCell { head, row, col }) => {
            select_head(state, head);
            state.cursor = (row, col);
            state.clamp();
        }
        Some(Hit::Head(h)) => select_head(state, h),
        None => {}
    }
}

// ---- model changes, all through the engine ----------------------------------------

/// Replace the source and pipeline if the engine builds it; otherwise keep the old one
/// and show the engine's message.
pub(crate) fn rebuild(state: &mut State, source: Source) -> bool {
    match source.build() {
        Ok(pipeline) => {
            state.source = source;
            state.pipeline = pipeline;
            state.cache.clear();
            state.clamp();
            let view = views::current(state);
            view.refresh(state);
            state.clamp();
            true
        }
        Err(e) => {
            state.set_status(StatusKind::Error, e.to_string());
            false
        }
    }
}

fn model_or_explain(state: &mut State, what: &str) -> Option<ModelConfig> {
    match &state.source {
        Source::Model(c) => Some(c.clone()),
        _ => {
            state.set_status(
                StatusKind::Warn,
                format!("{what} needs a lesson model; these tensors came from files"),
            );
            None
        }
    }
}

/// The masks `m` cycles through, for `n` keys.
pub fn mask_cycle(n: usize) -> Vec<MaskKind> {
    vec![
        MaskKind::None,
        MaskKind::Causal,
        MaskKind::Window((n / 2).max(2)),
        MaskKind::Padding(vec![(n - n / 3).max(1)]),
        MaskKind::BigBird(BIGBIRD_DEFAULT),
    ]
}

fn next_in<T: PartialEq + Clone>(list: &[T], current: &T) -> T {
    let i = list.iter().position(|x| x == current).map_or(0, |i| i + 1);
    list[i % list.len()].clone()
}

fn cycle_mask(state: &mut State) {
    let n_k = state.pipeline.shape.n_k;
    let new = match &state.source {
        Source::Model(c) => {
            let mask = next_in(&mask_cycle(n_k), &c.mask);
            let mut c = c.clone();
            c.mask = mask;
            Source::Model(c)
        }
        Source::Tensors(t) => {
            let mut t = t.clone();
            t.mask = next_in(&mask_cycle(n_k), &t.mask);
            Source::Tensors(t)
        }
        Source::Real { .. } => {
            state.set_status(
                StatusKind::Warn,
                "a real model keeps its own mask here; `attnviz model run --mask` replaces it",
            );
            return;
        }
        Source::Weights { .. } => {
            state.set_status(
                StatusKind::Warn,
                "the weights came from a file: there are no scores to mask",
            );
            return;
        }
    };
    if rebuild(state, new) {
        let mask = state.pipeline.mask.kind().clone();
        state.set_status(StatusKind::Info, format!("mask: {mask}"));
    }
}

fn cycle_pe(state: &mut State) {
    let new = match &state.source {
        Source::Model(c) => {
            let mut cycle = PeKind::CYCLE.to_vec();
            if let PeKind::Rope { base } = c.pe {
                cycle[3] = PeKind::Rope { base };
            }
            let mut c = c.clone();
            c.pe = next_in(&cycle, &c.pe);
            Source::Model(c)
        }
        Source::Tensors(t) => {
            // Files hold q and k after the projection: only encodings that act inside
            // attention apply.
            let base = match t.pe {
                PeKind::Rope { base } => base,
                _ => ROPE_BASE,
            };
            let cycle = [PeKind::None, PeKind::Rope { base }, PeKind::Alibi];
            let mut t = t.clone();
            t.pe = next_in(&cycle, &t.pe);
            Source::Tensors(t)
        }
        Source::Weights { .. } => {
            state.set_status(
                StatusKind::Warn,
                "the weights came from a file: position encodings act before them",
            );
            return;
        }
        Source::Real { .. } => {
            state.set_status(
                StatusKind::Warn,
                "a real model keeps its own positions here; `attnviz model run --rope-base B` or `--no-pe` changes them",
            );
            return;
        }
    };
    if rebuild(state, new) {
        let pe = state.pipeline.config.pe;
        state.set_status(StatusKind::Info, format!("position encoding: {pe}"));
    }
}

fn toggle_scale(state: &mut State) {
    let head = state.head;
    let before = state.pipeline.row_stats(head);
    let was_scaled = state.pipeline.config.scaled;
    let new = match &state.source {
        Source::Model(c) => {
            let mut c = c.clone();
            c.scaled = !c.scaled;
            Source::Model(c)
        }
        Source::Tensors(t) => {
            let mut t = t.clone();
            t.scaled = !t.scaled;
            Source::Tensors(t)
        }
        Source::Weights { .. } => {
            state.set_status(
                StatusKind::Warn,
                "the weights came from a file: the scale acts before them",
            );
            return;
        }
        Source::Real { .. } => {
            state.set_status(
                StatusKind::Warn,
                "a trained model was trained with its scale: it stays on",
            );
            return;
        }
    };
    if rebuild(state, new) {
        let after = state.pipeline.row_stats(head);
        state.scale_change = Some(ScaleChange {
            head,
            was_scaled,
            before,
            after,
        });
        let now = if was_scaled { "off" } else { "on" };
        state.set_status(
            StatusKind::Info,
            format!("1/sqrt(d_k) {now}: the inspector compares the weights before and after"),
        );
    }
}

fn change_length(state: &mut State, delta: isize) {
    let Some(mut config) = model_or_explain(state, "changing the length") else {
        return;
    };
    if delta < 0 {
        if config.tokens.len() <= 1 {
            state.set_status(StatusKind::Warn, "one token is the shortest sentence");
            return;
        }
        let t = config.tokens.pop().unwrap_or_default();
        if rebuild(state, Source::Model(config)) {
            state.reserve.push(t);
        }
    } else {
        if config.tokens.len() >= limits::MAX_MODEL_TOKENS {
            state.set_status(
                StatusKind::Warn,
                format!("{} tokens is the longest lesson", limits::MAX_MODEL_TOKENS),
            );
            return;
        }
        let from_reserve = state.reserve.last().cloned();
        let t = from_reserve.clone().unwrap_or_else(|| {
            // Nothing taken off before: continue by repeating the sentence.
            let orig = &state.original_tokens;
            orig[config.tokens.len() % orig.len().max(1)].clone()
        });
        config.tokens.push(t);
        if rebuild(state, Source::Model(config)) && from_reserve.is_some() {
            state.reserve.pop();
        }
    }
    if state.status.is_none() {
        let n = state.pipeline.shape.n_k;
        state.set_status(
            StatusKind::Info,
            format!("{n} token{}", if n == 1 { "" } else { "s" }),
        );
    }
}

/// Largest zoom: the longest side of the n x n map still spans 4 cells.
fn max_zoom(state: &State) -> usize {
    let n = state
        .pipeline
        .shape
        .n_q
        .max(state.pipeline.shape.n_k)
        .max(1);
    (n / 4)
        .max(1)
        .next_power_of_two()
        .min(n.next_power_of_two())
}

fn zoom(state: &mut State, out: bool) {
    if !state.zoomable() {
        state.set_status(
            StatusKind::Info,
            format!(
                "zoom is for long texts ({} tokens or more) and real models",
                crate::tui::context::ZOOM_TOKENS
            ),
        );
        return;
    }
    let p = state.zoom.per_cell;
    state.zoom.per_cell = if out {
        (p * 2).min(max_zoom(state))
    } else {
        (p / 2).max(1)
    };
    let p = state.zoom.per_cell;
    let text = if p == 1 {
        "zoom: one entry per cell".to_string()
    } else {
        format!(
            "zoom: a cell is the {} of {p}x{p} entries (b: mean/max)",
            state.zoom.pool.name()
        )
    };
    state.set_status(StatusKind::Info, text);
}

fn change_layer(state: &mut State, delta: isize) {
    if let Source::Real { session, layer } = &state.source {
        let n = session.config().layers as isize;
        let new_layer = (*layer as isize + delta).rem_euclid(n.max(1)) as usize;
        let new = Source::Real {
            session: session.clone(),
            layer: new_layer,
        };
        if rebuild(state, new) {
            state.set_status(StatusKind::Info, format!("layer {} of {n}", new_layer + 1));
        }
        return;
    }
    let Source::Weights {
        tokens,
        layers,
        layer,
    } = &state.source
    else {
        return;
    };
    let n = layers.len() as isize;
    let new_layer = (*layer as isize + delta).rem_euclid(n.max(1)) as usize;
    let new = Source::Weights {
        tokens: tokens.clone(),
        layers: layers.clone(),
        layer: new_layer,
    };
    if rebuild(state, new) {
        state.set_status(StatusKind::Info, format!("layer {} of {n}", new_layer + 1));
    }
}

fn edit(state: &mut State, e: EditAction) {
    if e == EditAction::Start {
        match &state.source {
            Source::Model(c) => {
                state.overlay = Overlay::Edit(LineEditor::new(c.tokens.join(" ")));
            }
            _ => state.set_status(
                StatusKind::Warn,
                "the tokens label tensors from files; edit the --tokens-file instead",
            ),
        }
        return;
    }
    let Overlay::Edit(ed) = &mut state.overlay else {
        return;
    };
    match e {
        EditAction::Start => {}
        EditAction::Insert(c) => ed.insert(c),
        EditAction::Backspace => ed.backspace(),
        EditAction::Delete => ed.delete(),
        EditAction::Left => ed.left(),
        EditAction::Right => ed.right(),
        EditAction::Home => ed.home(),
        EditAction::End => ed.end(),
        EditAction::Clear => ed.clear(),
        EditAction::Cancel => state.overlay = Overlay::None,
        EditAction::Apply => {
            let tokens = ModelConfig::tokens_from_text(&ed.text);
            if tokens.is_empty() {
                state.set_status(StatusKind::Error, "type at least one word (Esc cancels)");
                return;
            }
            let Some(mut config) = state.model().cloned() else {
                return;
            };
            config.tokens = tokens.clone();
            if let MaskKind::Padding(lens) = &mut config.mask {
                // Keep the padding mask meaningful for the new length.
                let n = tokens.len();
                lens.iter_mut().for_each(|l| *l = (*l).min(n));
            }
            if rebuild(state, Source::Model(config)) {
                state.overlay = Overlay::None;
                state.reserve.clear();
                state.original_tokens = tokens;
                let n = state.pipeline.shape.n_k;
                state.set_status(
                    StatusKind::Info,
                    format!("{n} token{}", if n == 1 { "" } else { "s" }),
                );
            }
        }
    }
}

// ---- scripts ------------------------------------------------------------------------

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
    if let Some(&first) = step.highlight.first() {
        state.cursor = first;
    }
    state.tiles = step.tiles.clone();
    if step.variant.is_some() {
        state.variant = step.variant;
    }
    state.animation_rate = None;
    state.narration = (!step.narration.is_empty()).then(|| step.narration.clone());
    let view = views::current(state);
    view.refresh(state);
    if let Some(show) = step.show {
        views::model::show_in_lesson(state, show);
    }
    state.clamp();
    if !problems.is_empty() {
        state.set_status(
            StatusKind::Warn,
            format!("this step asks for {}", problems.join(", ")),
        );
    }
}

fn goto_step(state: &mut State, k: usize) {
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

fn play_pause(state: &mut State) {
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
}

fn change_speed(state: &mut State, delta: isize) {
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

fn tick(state: &mut State, ms: u64) {
    let Some(p) = state.script.as_mut() else {
        return;
    };
    if !p.playing {
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
        let finished = p.steps[p.index].animate;
        p.index += 1;
        p.frame = None;
        let step = p.steps[p.index].clone();
        // A tick long enough to pass the step's end passed its animation's end too.
        if let Some(a) = finished {
            views::current(state).show_frame(state, a.to);
        }
        apply_step(state, &step);
        if let Some(p) = state.script.as_mut() {
            p.elapsed_ms = rest;
        }
    }
}
