//! The flash view: FlashAttention computing one head tile by tile, from the kernel's own
//! tiled code run with an observer (`engine::flash::trace`). It shows the Tr x Tc tile
//! grid (the tile on screen, the ones done, the ones the mask skips), what is in SRAM
//! for the tile (Q_i, K_j, V_j and the block S_ij), the online softmax of each row of
//! the block (running max m, running sum l, the rescale factor exp(m_old - m_new), the
//! partial output O_i against the f64 reference) and the elements each algorithm moves
//! between HBM and SRAM, counted by the engine.
//!
//! The tile on screen is the cell cursor in tile coordinates, so arrows, clicks, `,`/`.`
//! and playback all move the same thing; the loop order decides which tiles are done.

mod backward_lab;
mod backward_panels;
mod blocks;
mod controls;
mod lab;
mod panels;
pub mod settings;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;

use crate::tui::action::{Action, FlashAction};
use crate::tui::component::Hit;
use crate::tui::component::View;
use crate::tui::context::Context;
use crate::tui::keys::{Binding, Group, KeyPat, When};
use crate::tui::view_kind::ViewKind;
use crate::widgets::text;

pub use backward_lab::BackwardLab;
pub use controls::{FlashStore, current_tile, lab, next_tile_in_ms, tick, update};
pub use lab::{FlashLab, LabKey, MAX_TILES, default_block, fit_blocks};
pub use settings::{FlashControls, TILE_RATES};

pub struct FlashView;

const fn key(
    keys: &'static [KeyPat],
    action: FlashAction,
    desc: &'static str,
    hint: Option<&'static str>,
    hint_keys: Option<&'static str>,
    when: When,
) -> Binding {
    Binding {
        keys,
        action: Action::Flash(action),
        desc,
        hint,
        hint_keys,
        group: Group::ThisView,
        when,
    }
}

use KeyPat::Char as C;

static KEYS: &[Binding] = &[
    key(
        &[C('.')],
        FlashAction::NextTile,
        "next tile in the loop order (the arrows pick any tile)",
        Some("tile"),
        Some(",/."),
        When::Always,
    ),
    key(
        &[C(',')],
        FlashAction::PrevTile,
        "previous tile",
        None,
        None,
        When::Always,
    ),
    key(
        &[C(' ')],
        FlashAction::PlayPause,
        "play / pause the tiles",
        Some("play"),
        None,
        When::NoScript,
    ),
    key(
        &[C('f')],
        FlashAction::Faster,
        "more tiles per second",
        Some("speed"),
        Some("f/F"),
        When::Always,
    ),
    key(
        &[C('F')],
        FlashAction::Slower,
        "fewer tiles per second",
        None,
        None,
        When::Always,
    ),
    key(
        &[C('a')],
        FlashAction::ToggleOrder,
        "loop order: FlashAttention-2 (query blocks outer) / FlashAttention-1 (key blocks outer)",
        Some("FA1/FA2"),
        None,
        When::Always,
    ),
    key(
        &[C('d')],
        FlashAction::TogglePass,
        "backward pass: dQ, dK, dV tile by tile (key blocks outer) / forward pass",
        Some("backward"),
        None,
        When::Always,
    ),
    key(
        &[C('b')],
        FlashAction::MoreRows,
        "more query rows per block (Br)",
        Some("Br"),
        Some("b/B"),
        When::Always,
    ),
    key(
        &[C('B')],
        FlashAction::FewerRows,
        "fewer query rows per block (Br)",
        None,
        None,
        When::Always,
    ),
    key(
        &[C('c')],
        FlashAction::MoreKeys,
        "more keys per block (Bc)",
        Some("Bc"),
        Some("c/C"),
        When::Always,
    ),
    key(
        &[C('C')],
        FlashAction::FewerKeys,
        "fewer keys per block (Bc)",
        None,
        None,
        When::Always,
    ),
    key(
        &[C('g')],
        FlashAction::FirstTile,
        "first tile",
        None,
        None,
        When::Always,
    ),
    key(
        &[C('G')],
        FlashAction::LastTile,
        "last tile (O is final)",
        None,
        None,
        When::Always,
    ),
];

impl View for FlashView {
    fn kind(&self) -> ViewKind {
        ViewKind::Flash
    }

    fn commands(&self) -> &'static [Binding] {
        KEYS
    }

    fn update(&self, state: &mut Context, action: Action) {
        match action {
            Action::Flash(a) => controls::update(state, a),
            Action::Tick { ms } => controls::tick(state, ms),
            _ => {}
        }
    }

    fn refresh(&self, state: &mut Context) {
        controls::refresh(state);
    }

    fn grid(&self, state: &Context) -> (usize, usize) {
        lab(state).map_or((0, 0), |l| (l.tr(), l.tc()))
    }

    /// A scripted animation plays the tiles in the loop order, masked ones included.
    fn frames(&self, state: &Context) -> usize {
        lab(state).map_or(0, |l| l.tiles())
    }

    fn show_frame(&self, state: &mut Context, k: usize) {
        if let Some(l) = lab(state) {
            state.cursor = l.tile_at(k);
        }
    }

    fn subtitle(&self, state: &Context) -> String {
        match lab(state) {
            Some(l) if l.backward.is_some() => format!(
                "FlashAttention's backward tile by tile: the kernel's own tiled backward, recorded, on head {} (K/V group {}), dO seeded",
                l.head + 1,
                l.group + 1
            ),
            Some(l) => format!(
                "FlashAttention tile by tile: the kernel's own tiled code, recorded, on head {} (K/V group {})",
                l.head + 1,
                l.group + 1
            ),
            None => "FlashAttention tile by tile".into(),
        }
    }

    fn numbers(&self, state: &Context) -> Option<String> {
        lab(state).map(|l| format!("numbers: f32 kernel ({}) vs f64", l.trace.tier))
    }

    fn render(&self, state: &Context, area: Rect, buf: &mut Buffer) {
        let store = state.views.get::<FlashStore>(ViewKind::Flash);
        match store.map(|s| &s.lab) {
            Some(Ok(lab)) => match &lab.backward {
                Some(bw) => backward_panels::render(state, lab, bw, area, buf),
                None => panels::render(state, lab, area, buf),
            },
            Some(Err(why)) => message(state, why, area, buf),
            None => message(state, "the flash view is being prepared", area, buf),
        }
    }

    fn hit_test(&self, state: &Context, area: Rect, x: u16, y: u16) -> Option<Hit> {
        let lab = lab(state)?;
        let (row, col) = match &lab.backward {
            Some(_) => backward_panels::tile_at(state, lab, area, x, y)?,
            None => panels::tile_at(state, lab, area, x, y)?,
        };
        Some(Hit::Cell { sub: 0, row, col })
    }
}

fn message(state: &Context, why: &str, area: Rect, buf: &mut Buffer) {
    let lines = text::wrap(&state.glyphs.text(why), area.width as usize);
    for (k, l) in lines.iter().take(area.height as usize).enumerate() {
        buf.set_stringn(
            area.x,
            area.y + k as u16,
            l,
            area.width as usize,
            state.theme.warn,
        );
    }
}
