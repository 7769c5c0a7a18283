//! What the person has chosen in the flash view (block sizes, loop order, playback of
//! the tiles). Kept apart from the controls' code so the shared [`Context`] can hold it
//! without importing the view.
//!
//! [`Context`]: crate::tui::context::Context

use crate::engine::flash::LoopOrder;
use crate::scene::FlashPass;

/// Tiles per second that `f` and `F` step through.
pub const TILE_RATES: [f64; 8] = [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];
const DEFAULT_RATE: usize = 2;

/// What the person has chosen in the flash view; the tile on screen is the cell cursor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FlashControls {
    /// Query rows per block; None: chosen from the sequence length.
    pub br: Option<usize>,
    /// Keys per block; None: chosen from the sequence length.
    pub bc: Option<usize>,
    pub order: LoopOrder,
    /// The forward (online softmax) or the backward (dQ, dK, dV).
    pub pass: FlashPass,
    pub playing: bool,
    /// Index into [`TILE_RATES`].
    pub rate: usize,
    /// Milliseconds since the last tile while playing.
    pub elapsed_ms: f64,
}

impl Default for FlashControls {
    fn default() -> Self {
        FlashControls {
            br: None,
            bc: None,
            order: LoopOrder::Fa2,
            pass: FlashPass::Forward,
            playing: false,
            rate: DEFAULT_RATE,
            elapsed_ms: 0.0,
        }
    }
}

impl FlashControls {
    pub fn tiles_per_second(&self) -> f64 {
        TILE_RATES[self.rate.min(TILE_RATES.len() - 1)]
    }

    pub(super) fn interval_ms(&self) -> f64 {
        1000.0 / self.tiles_per_second()
    }
}
