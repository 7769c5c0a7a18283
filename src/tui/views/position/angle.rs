//! An angle as an arrow, for the rotation panels of the lesson and of a real model.

use crate::tui::context::Context;

/// The arrow closest to an angle, for the rotation panel.
pub fn angle_glyph(state: &Context, theta: f64) -> &'static str {
    const UNI: [&str; 8] = ["→", "↗", "↑", "↖", "←", "↙", "↓", "↘"];
    const ASC: [&str; 8] = ["-", "/", "|", "\\", "-", "/", "|", "\\"];
    let k = ((theta.rem_euclid(std::f64::consts::TAU)) / (std::f64::consts::TAU / 8.0)).round()
        as usize
        % 8;
    if state.glyphs.ascii { ASC[k] } else { UNI[k] }
}
