//! The variants view: attention that trades its n x n cost for structure, on the
//! lesson's own inputs, beside standard attention. `v` switches between
//!
//! - sliding window (Mistral): the band, the receptive field growing layer by layer by
//!   W - 1 positions (L x W reach), and the rolling buffer where position i lives in
//!   slot i mod W;
//! - BigBird: local + global + random blocks cell by cell, and the tiles a tiled kernel
//!   skips;
//! - linear attention, phi(x) = elu(x) + 1: phi(Q) (phi(K)^T V) beside softmax attention,
//!   its d x dv state against the n x n matrix, and how far the outputs differ.
//!
//! Every number comes from `engine::variants`; the cursor is (query, key).
//!
//! This file holds the view and its keys; [`lab`] derives what it shows
//! ([`VariantsLab`]), and each mode draws in its own file ([`window`], [`bigbird`],
//! [`linear`]) with the pieces they share in [`grid`].

mod bigbird;
mod grid;
mod lab;
mod linear;
mod window;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;

use crate::tui::action::Action;
use crate::tui::component::View;
use crate::tui::context::{Context, StatusKind};
use crate::tui::keys::{Binding, Group, KeyPat, When};
use crate::tui::view_kind::ViewKind;
use crate::widgets::lines::LineWriter;

pub use lab::{Mode, VariantsLab};

use bigbird::render_bigbird;
use lab::{MAX_LAYERS, Settings};
use linear::render_linear;
use window::render_window;

pub struct VariantsView;

const CMD_MODE: u8 = 0;
const CMD_WIDER: u8 = 1;
const CMD_NARROWER: u8 = 2;
const CMD_DEEPER: u8 = 3;
const CMD_SHALLOWER: u8 = 4;
const CMD_CAUSAL: u8 = 5;

static KEYS: &[Binding] = &[
    Binding {
        keys: &[KeyPat::Char('v')],
        action: Action::ViewCommand(CMD_MODE),
        desc: "next variant: sliding window, BigBird, linear attention",
        hint: Some("variant"),
        hint_keys: None,
        group: Group::ThisView,
        when: When::Always,
    },
    Binding {
        keys: &[KeyPat::Char('w')],
        action: Action::ViewCommand(CMD_WIDER),
        desc: "wider window (sliding window W, or BigBird's local blocks)",
        hint: Some("window"),
        hint_keys: Some("w/W"),
        group: Group::ThisView,
        when: When::Always,
    },
    Binding {
        keys: &[KeyPat::Char('W')],
        action: Action::ViewCommand(CMD_NARROWER),
        desc: "narrower window",
        hint: None,
        hint_keys: None,
        group: Group::ThisView,
        when: When::Always,
    },
    Binding {
        keys: &[KeyPat::Char('d')],
        action: Action::ViewCommand(CMD_DEEPER),
        desc: "one layer more (sliding window's receptive field)",
        hint: Some("layers"),
        hint_keys: Some("d/D"),
        group: Group::ThisView,
        when: When::Always,
    },
    Binding {
        keys: &[KeyPat::Char('D')],
        action: Action::ViewCommand(CMD_SHALLOWER),
        desc: "one layer fewer",
        hint: None,
        hint_keys: None,
        group: Group::ThisView,
        when: When::Always,
    },
    Binding {
        keys: &[KeyPat::Char('c')],
        action: Action::ViewCommand(CMD_CAUSAL),
        desc: "linear attention: causal (prefix sums) or not",
        hint: Some("causal"),
        hint_keys: None,
        group: Group::ThisView,
        when: When::Always,
    },
];

fn lab(state: &Context) -> Option<&VariantsLab> {
    state.views.get::<VariantsLab>(ViewKind::Variants)
}

fn rebuild(state: &mut Context, settings: Option<Settings>) {
    let n = state.pipeline.shape.n_k;
    let mut s = settings
        .or_else(|| lab(state).map(|l| l.settings))
        .unwrap_or_else(|| Settings::for_pipeline(&state.pipeline));
    // A script step's choice of panel, taken once so the v key still switches after it.
    if let Some(v) = state.variant.take() {
        s.mode = Mode::from_scene(v);
    }
    s.window = s.window.clamp(1, n.max(1));
    s.layers = s.layers.clamp(1, MAX_LAYERS);
    let lab = VariantsLab::build(&state.pipeline, s);
    state.views.set(ViewKind::Variants, lab);
}

fn change(state: &mut Context, id: u8) {
    let Some(mut s) = lab(state).map(|l| l.settings) else {
        return;
    };
    let n = state.pipeline.shape.n_k;
    let message = match (id, s.mode) {
        (CMD_MODE, _) => {
            s.mode = s.mode.next();
            format!("variant: {}", s.mode.name())
        }
        (CMD_WIDER | CMD_NARROWER, Mode::BigBird) => {
            let blocks = n.div_ceil(s.bigbird.block.max(1));
            let w = s.bigbird.window as isize + if id == CMD_WIDER { 1 } else { -1 };
            s.bigbird.window = w.clamp(0, blocks as isize) as usize;
            format!("BigBird: {} local block(s) each side", s.bigbird.window)
        }
        (CMD_WIDER | CMD_NARROWER, _) => {
            let w = s.window as isize + if id == CMD_WIDER { 1 } else { -1 };
            s.window = w.clamp(1, n.max(1) as isize) as usize;
            format!("window W = {}", s.window)
        }
        (CMD_DEEPER | CMD_SHALLOWER, _) => {
            let l = s.layers as isize + if id == CMD_DEEPER { 1 } else { -1 };
            s.layers = l.clamp(1, MAX_LAYERS as isize) as usize;
            format!("{} layer(s)", s.layers)
        }
        (CMD_CAUSAL, _) => {
            s.causal = !s.causal;
            format!(
                "linear and softmax attention: {}",
                if s.causal { "causal" } else { "no mask" }
            )
        }
        _ => return,
    };
    rebuild(state, Some(s));
    state.set_status(StatusKind::Info, message);
}

impl View for VariantsView {
    fn kind(&self) -> ViewKind {
        ViewKind::Variants
    }

    fn commands(&self) -> &'static [Binding] {
        KEYS
    }

    fn update(&self, state: &mut Context, action: Action) {
        let Action::ViewCommand(id) = action else {
            return;
        };
        change(state, id);
    }

    fn refresh(&self, state: &mut Context) {
        rebuild(state, None);
    }

    fn grid(&self, state: &Context) -> (usize, usize) {
        let n = state.pipeline.shape.n_k;
        (n, n)
    }

    fn subtitle(&self, state: &Context) -> String {
        let mode = lab(state).map_or(Mode::Window, |l| l.settings.mode);
        format!(
            "sliding window · BigBird · linear attention: {} (v switches)",
            mode.name()
        )
    }

    fn render(&self, state: &Context, area: Rect, buf: &mut Buffer) {
        let Some(lab) = lab(state) else {
            LineWriter::new(area, buf).text("preparing the variants...", state.theme.dim);
            return;
        };
        match lab.settings.mode {
            Mode::Window => render_window(state, lab, area, buf),
            Mode::BigBird => render_bigbird(state, lab, area, buf),
            Mode::Linear => render_linear(state, lab, area, buf),
        }
    }
}
