//! Changes to the lesson's inputs, all through the engine: the mask, the position
//! encoding, the 1/sqrt(d_k) scale, the sentence's length and text, the seed and the
//! layer of a real model or of weights from a file. Each builds a new `Source` and hands
//! it to `change::rebuild`, which keeps the old pipeline on screen if the engine refuses.

use crate::engine::config::{BIGBIRD_DEFAULT, MaskKind, PeKind, ROPE_BASE};
use crate::engine::limits;
use crate::engine::pipeline::ModelConfig;
use crate::tui::action::EditAction;
use crate::tui::change::rebuild;
use crate::tui::state::{LineEditor, Overlay, ScaleChange, Source, State, StatusKind};

pub(super) fn model_or_explain(state: &mut State, what: &str) -> Option<ModelConfig> {
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

pub(super) fn cycle_mask(state: &mut State) {
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

pub(super) fn cycle_pe(state: &mut State) {
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

pub(super) fn toggle_scale(state: &mut State) {
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

pub(super) fn change_length(state: &mut State, delta: isize) {
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

pub(super) fn change_layer(state: &mut State, delta: isize) {
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

pub(super) fn edit(state: &mut State, e: EditAction) {
    if e == EditAction::Start {
        match &state.source {
            Source::Model(c) => {
                state.overlay = Overlay::Edit(LineEditor::new(c.tokens.join(" ")));
            }
            // On a real model, `e` types the second text (the patch view's corrupt run).
            Source::Real { session, .. } => {
                let text = state.compare.as_ref().map_or_else(
                    || session.model.tokenizer.decode(&session.ids),
                    |c| c.text.clone(),
                );
                state.overlay = Overlay::Edit(LineEditor::new(text));
            }
            _ => state.set_status(
                StatusKind::Warn,
                "the tokens label tensors from files; edit the --tokens-file instead",
            ),
        }
        return;
    }
    let real = state.source.session().is_some();
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
        EditAction::Apply if real => {
            let text = ed.text.clone();
            let Some(s) = state.source.session() else {
                return;
            };
            match crate::tui::compare::compare_of(s, &text) {
                Ok(c) => {
                    let n = c.ids.len();
                    state.compare = Some(c);
                    state.overlay = Overlay::None;
                    let view = crate::tui::views::current(state);
                    view.refresh(state);
                    state.set_status(
                        StatusKind::Info,
                        format!("the second text: {n} tokens, as the first"),
                    );
                }
                Err(e) => state.set_status(StatusKind::Error, format!("{e} (Esc cancels)")),
            }
        }
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
