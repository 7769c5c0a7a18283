//! `update(&mut State, Action)`: the only place the state changes. It reads no clock,
//! no terminal and no environment; model changes go through the engine
//! (`Source::build`), and a failed rebuild leaves the old pipeline on screen with the
//! engine's message in the status line.

use crate::engine::config::{BIGBIRD_DEFAULT, MaskKind, PeKind, ROPE_BASE};
use crate::engine::limits;
use crate::engine::pipeline::{ModelConfig, StageId};
use crate::tui::action::{Action, EditAction, TrainAction};
use crate::tui::change::{rebuild, rerun};
use crate::tui::component::{Hit, View};
use crate::tui::context::Request;
use crate::tui::layout;
use crate::tui::playback::{apply_step, change_speed, goto_step, play_pause, tick};
use crate::tui::state::{LineEditor, Overlay, ScaleChange, Source, State, StatusKind};
use crate::tui::training;
use crate::tui::view_kind::ViewKind;
use crate::tui::views;

pub fn update(state: &mut State, action: Action) {
    if !matches!(
        action,
        Action::Tick { .. }
            | Action::Resize { .. }
            | Action::Measurement(_)
            | Action::TrainReport(_)
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
            // A training run first, so that a lesson step waiting for it sees the
            // evaluation this tick made.
            training::tick(state, ms);
            tick(state, ms);
        }
        // In a lesson the run follows the lesson: Space plays or pauses the lesson.
        Action::Train(TrainAction::PlayPause)
            if state.script.is_some() && views::train::lab(state).is_some() =>
        {
            play_pause(state)
        }
        Action::Train(a) => training::control(state, a),
        Action::TrainReport(r) => training::report(state, *r),
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
