//! Reusable ratatui widgets: heatmap, legend, bars, tile grid, and the pieces they share
//! (number formatting, display-width text fitting, colour and glyph ramps).
//!
//! Widgets know nothing about attention or the app's state: they draw the numbers they
//! are given with the styles they are given.

pub mod bars;
pub mod glyphs;
pub mod heat;
pub mod heatmap;
pub mod legend;
pub mod lines;
pub mod loglog;
pub mod minimap;
pub mod numfmt;
pub mod pooled;
pub mod text;
pub mod tile_grid;
pub mod token_links;

pub use bars::HBars;
pub use glyphs::Glyphs;
pub use heat::{ColorDepth, HeatPainter, ValueScale};
pub use heatmap::{Heatmap, HeatmapGeometry, HeatmapStyle};
pub use legend::Legend;
pub use loglog::{LogLogChart, Series};
pub use tile_grid::{TileGlyphs, TileGrid, TileGridGeometry, TileGridStyle, TileMark};
