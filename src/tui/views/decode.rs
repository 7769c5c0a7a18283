//! The decode view: the lesson decoded token by token with a KV cache, and the same
//! inputs with fewer KV heads (GQA/MQA).
//!
//! - The cache grows a row per step (a rolling buffer of W slots under `window:W`); the
//!   newest row is marked.
//! - The step's weights over the cache, and every earlier step's below the cache: the
//!   triangle of causal attention, one row appended per token.
//! - What the step cost with the cache, O(t d), against recomputing the prefix without
//!   one, and the running totals; the recomputation is rerun by the engine and its
//!   result compared.
//! - `g` cycles the KV heads over the divisors of the heads: which query heads share
//!   which K/V head, the cache bytes, and how far the output moves from the lesson's
//!   own K/V (mean-pooled groups, as `engine::gqa` converts a multi-head checkpoint).
//!
//! Every number comes from `engine::kv_cache` and `engine::gqa`; the cursor row is the
//! decoding step, its column a cached position.
//!
//! On a real model (`attnviz --model`) the view shows the model's own decoding instead:
//! `generate` step by step ([`real`]).
//!
//! This file holds the view and its keys; [`lab`] derives the decoding, [`draw`] draws
//! the caches and the weights, [`cost`] the cost and the KV-head groups.

mod cost;
mod draw;
mod inputs;
mod lab;
pub(crate) mod real;

pub(crate) use inputs::HeadInputs;
pub use lab::{CACHE_DTYPE, DecodeLab};
pub use real::{RealDecodeLab, session_key};

use std::sync::Arc;

use ratatui::buffer::Buffer;
use ratatui::crossterm::event::KeyCode;
use ratatui::layout::Rect;

use crate::engine::memory::decimal_bytes;

use crate::tui::action::{Action, WorkReport};
use crate::tui::component::View;
use crate::tui::context::{Context, StatusKind};
use crate::tui::keys::{Binding, Group, KeyPat, When};
use crate::tui::view_kind::ViewKind;
use crate::widgets::lines::LineWriter;
use draw::render_lab;

pub struct DecodeView;

const CMD_NEXT: u8 = 0;
const CMD_PREV: u8 = 1;
const CMD_FIRST: u8 = 2;
const CMD_LAST: u8 = 3;
const CMD_GROUPS_DOWN: u8 = 4;
const CMD_GROUPS_UP: u8 = 5;

static KEYS: &[Binding] = &[
    Binding {
        keys: &[KeyPat::Char('.')],
        action: Action::ViewCommand(CMD_NEXT),
        desc: "decode the next token (also Down / j)",
        hint: Some("step"),
        hint_keys: Some("./,"),
        group: Group::ThisView,
        when: When::Always,
    },
    Binding {
        keys: &[KeyPat::Char(',')],
        action: Action::ViewCommand(CMD_PREV),
        desc: "back one token (also Up / k)",
        hint: None,
        hint_keys: None,
        group: Group::ThisView,
        when: When::Always,
    },
    Binding {
        keys: &[KeyPat::Code(KeyCode::Home)],
        action: Action::ViewCommand(CMD_FIRST),
        desc: "first token",
        hint: None,
        hint_keys: None,
        group: Group::ThisView,
        when: When::Always,
    },
    Binding {
        keys: &[KeyPat::Code(KeyCode::End)],
        action: Action::ViewCommand(CMD_LAST),
        desc: "last token (the whole sentence decoded)",
        hint: None,
        hint_keys: None,
        group: Group::ThisView,
        when: When::Always,
    },
    Binding {
        keys: &[KeyPat::Char('g')],
        action: Action::ViewCommand(CMD_GROUPS_DOWN),
        desc: "fewer KV heads: MHA -> GQA -> MQA (divisors of the heads, cycling)",
        hint: Some("KV heads"),
        hint_keys: Some("g/G"),
        group: Group::ThisView,
        when: When::Always,
    },
    Binding {
        keys: &[KeyPat::Char('G')],
        action: Action::ViewCommand(CMD_GROUPS_UP),
        desc: "more KV heads",
        hint: None,
        hint_keys: None,
        group: Group::ThisView,
        when: When::Always,
    },
];

type LabResult = Result<DecodeLab, String>;

fn lab(state: &Context) -> Option<&LabResult> {
    state.views.get::<LabResult>(ViewKind::Decode)
}

fn rebuild(state: &mut Context) {
    let keep = lab(state)
        .and_then(|l| l.as_ref().ok())
        .map(|l| l.kv_heads());
    let fresh = DecodeLab::build(&state.pipeline, keep);
    state.views.set(ViewKind::Decode, fresh);
}

fn step_to(state: &mut Context, t: isize) {
    let n = if state.source.session().is_some() {
        real::grid(state).0 as isize
    } else {
        state.pipeline.shape.n_q as isize
    };
    let t = t.clamp(0, (n - 1).max(0)) as usize;
    state.cursor.0 = t;
    let grid = DecodeView.grid(state);
    state.clamp_cursor(grid);
}

fn cycle_groups(state: &mut Context, delta: isize) {
    if let Some(s) = state.source.session() {
        let c = s.config();
        let text = format!(
            "{} has {} KV head{} for {} query heads, fixed by its training; the cache line compares MHA",
            s.model.name,
            c.kv_heads,
            if c.kv_heads == 1 { "" } else { "s" },
            c.heads
        );
        state.set_status(StatusKind::Info, text);
        return;
    }
    let Some(Ok(lab)) = state.views.get_mut::<LabResult>(ViewKind::Decode) else {
        return;
    };
    let k = lab.groups.choices.len() as isize;
    let next = (lab.choice as isize + delta).rem_euclid(k) as usize;
    match lab.choose(next) {
        Ok(()) => {
            let c = &lab.groups.choices[next];
            let text = format!(
                "{} KV head{} ({}): cache {} per layer in {}",
                c.kv_heads,
                if c.kv_heads == 1 { "" } else { "s" },
                c.sharing.name(),
                decimal_bytes(c.cache_bytes),
                crate::engine::memory::dtype_name(CACHE_DTYPE)
            );
            state.set_status(StatusKind::Info, text);
        }
        Err(e) => state.set_status(StatusKind::Error, e),
    }
}

impl View for DecodeView {
    fn kind(&self) -> ViewKind {
        ViewKind::Decode
    }

    fn commands(&self) -> &'static [Binding] {
        KEYS
    }

    fn update(&self, state: &mut Context, action: Action) {
        let id = match action {
            Action::ViewCommand(id) => id,
            Action::Work(report) => {
                if let WorkReport::Decoded { key, decoding } = *report {
                    let decoding = decoding.map(|d| Arc::unwrap_or_clone(d.0));
                    real::receive(state, key, decoding);
                }
                return;
            }
            Action::CancelWork => {
                if real::cancel(state) {
                    state.set_status(StatusKind::Info, "decoding stopped (Esc)");
                }
                return;
            }
            _ => return,
        };
        let t = state.cursor.0 as isize;
        match id {
            CMD_NEXT => step_to(state, t + 1),
            CMD_PREV => step_to(state, t - 1),
            CMD_FIRST => step_to(state, 0),
            CMD_LAST => step_to(state, isize::MAX / 2),
            // `g` goes towards MQA (choices are ordered MQA first).
            CMD_GROUPS_DOWN => cycle_groups(state, -1),
            CMD_GROUPS_UP => cycle_groups(state, 1),
            _ => {}
        }
    }

    fn refresh(&self, state: &mut Context) {
        if state.source.session().is_some() {
            real::ensure(state);
        } else {
            rebuild(state);
        }
    }

    /// Rows: the decoding steps; columns: the positions a step can attend to.
    fn grid(&self, state: &Context) -> (usize, usize) {
        if state.source.session().is_some() {
            return real::grid(state);
        }
        let n = state.pipeline.shape.n_q;
        match lab(state) {
            Some(Ok(_)) => (n, n),
            _ => (0, 0),
        }
    }

    /// A scripted animation decodes token by token.
    fn frames(&self, state: &Context) -> usize {
        self.grid(state).0
    }

    fn show_frame(&self, state: &mut Context, k: usize) {
        step_to(state, k as isize);
    }

    fn subtitle(&self, state: &Context) -> String {
        if state.source.session().is_some() {
            return real::subtitle(state);
        }
        "KV-cache decoding token by token · cost with and without the cache · GQA/MQA groups".into()
    }

    fn render(&self, state: &Context, area: Rect, buf: &mut Buffer) {
        if state.source.session().is_some() {
            return real::render(state, area, buf);
        }
        match lab(state) {
            Some(Ok(lab)) => render_lab(state, lab, area, buf),
            Some(Err(e)) => LineWriter::new(area, buf).text(e, state.theme.warn),
            None => LineWriter::new(area, buf).text("preparing the decoding...", state.theme.dim),
        }
    }
}
