//! From a value to a colour (or, without colour, a glyph): colour depth detection,
//! colour ramps and the scale that maps a matrix's values onto a ramp.

use ratatui::style::{Color, Style};

/// How many colours the terminal can show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColorDepth {
    TrueColor,
    Ansi256,
    Ansi16,
    /// No colour at all (NO_COLOR, `--theme mono`): glyphs and numbers carry the values.
    Mono,
}

impl ColorDepth {
    /// The depth the environment announces: COLORTERM=truecolor|24bit, a TERM naming
    /// 256 colours, a dumb terminal, or 16 colours otherwise. NO_COLOR (any non-empty
    /// value, per no-color.org) wins over everything.
    pub fn detect(var: impl Fn(&str) -> Option<String>) -> ColorDepth {
        if var("NO_COLOR").is_some_and(|v| !v.is_empty()) {
            return ColorDepth::Mono;
        }
        let colorterm = var("COLORTERM").unwrap_or_default().to_ascii_lowercase();
        if colorterm == "truecolor" || colorterm == "24bit" {
            return ColorDepth::TrueColor;
        }
        let term = var("TERM").unwrap_or_default().to_ascii_lowercase();
        if term == "dumb" {
            ColorDepth::Mono
        } else if term.contains("256") || term.contains("direct") {
            ColorDepth::Ansi256
        } else {
            ColorDepth::Ansi16
        }
    }

    /// Detected from this process's environment.
    pub fn from_env() -> ColorDepth {
        ColorDepth::detect(|k| std::env::var(k).ok())
    }
}

pub type Rgb = (u8, u8, u8);

/// An RGB colour as the terminal can show it; `None` for mono.
pub fn adapt(depth: ColorDepth, rgb: Rgb) -> Option<Color> {
    match depth {
        ColorDepth::TrueColor => Some(Color::Rgb(rgb.0, rgb.1, rgb.2)),
        ColorDepth::Ansi256 => Some(Color::Indexed(xterm256(rgb))),
        ColorDepth::Ansi16 => Some(Color::Indexed(ansi16(rgb))),
        ColorDepth::Mono => None,
    }
}

/// Nearest colour of the xterm 6x6x6 cube or its grey ramp.
fn xterm256((r, g, b): Rgb) -> u8 {
    const LEVELS: [i32; 6] = [0, 95, 135, 175, 215, 255];
    let nearest = |c: u8| {
        (0..6)
            .min_by_key(|&i| (LEVELS[i] - c as i32).abs())
            .unwrap_or(0)
    };
    let (ri, gi, bi) = (nearest(r), nearest(g), nearest(b));
    let cube = (LEVELS[ri], LEVELS[gi], LEVELS[bi]);
    let dist = |(x, y, z): (i32, i32, i32)| {
        (x - r as i32).pow(2) + (y - g as i32).pow(2) + (z - b as i32).pow(2)
    };
    let avg = (r as i32 + g as i32 + b as i32) / 3;
    let gi_ = ((avg - 8).max(0) / 10).min(23);
    let grey = 8 + 10 * gi_;
    if dist((grey, grey, grey)) < dist(cube) {
        232 + gi_ as u8
    } else {
        16 + 36 * ri as u8 + 6 * gi as u8 + bi as u8
    }
}

/// Nearest of the 16 standard ANSI colours (by their usual xterm values).
fn ansi16(rgb: Rgb) -> u8 {
    const TABLE: [Rgb; 16] = [
        (0, 0, 0),
        (205, 0, 0),
        (0, 205, 0),
        (205, 205, 0),
        (0, 0, 238),
        (205, 0, 205),
        (0, 205, 205),
        (229, 229, 229),
        (127, 127, 127),
        (255, 0, 0),
        (0, 255, 0),
        (255, 255, 0),
        (92, 92, 255),
        (255, 0, 255),
        (0, 255, 255),
        (255, 255, 255),
    ];
    let d = |c: Rgb| {
        (c.0 as i32 - rgb.0 as i32).pow(2)
            + (c.1 as i32 - rgb.1 as i32).pow(2)
            + (c.2 as i32 - rgb.2 as i32).pow(2)
    };
    (0..16).min_by_key(|&i| d(TABLE[i])).unwrap_or(0) as u8
}

fn lerp_stops(stops: &[Rgb], t: f64) -> Rgb {
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let x = t * (stops.len() - 1) as f64;
    let i = (x.floor() as usize).min(stops.len() - 2);
    let f = x - i as f64;
    let mix = |a: u8, b: u8| (a as f64 + (b as f64 - a as f64) * f).round() as u8;
    let (a, b) = (stops[i], stops[i + 1]);
    (mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

/// Perceived brightness in [0, 255] (Rec. 601 weights).
fn luma((r, g, b): Rgb) -> f64 {
    0.299 * r as f64 + 0.587 * g as f64 + 0.114 * b as f64
}

/// Paints heat: a sequential ramp for values in [0, 1], a diverging one for [-1, 1].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HeatPainter {
    pub depth: ColorDepth,
    /// Stops from 0 to 1.
    pub sequential: &'static [Rgb],
    /// Stops from -1 to 1 (the middle one is 0).
    pub diverging: &'static [Rgb],
}

impl HeatPainter {
    pub fn is_mono(&self) -> bool {
        self.depth == ColorDepth::Mono
    }

    /// The ramp colour for `t` (in [0, 1], or [-1, 1] if `diverging`).
    pub fn rgb(&self, t: f64, diverging: bool) -> Rgb {
        if diverging {
            lerp_stops(self.diverging, (t + 1.0) / 2.0)
        } else {
            lerp_stops(self.sequential, t)
        }
    }

    /// Background of a cell with a readable foreground for a number on it.
    pub fn cell_style(&self, t: f64, diverging: bool) -> Style {
        let rgb = self.rgb(t, diverging);
        match adapt(self.depth, rgb) {
            None => Style::default(),
            Some(bg) => {
                let fg = if luma(rgb) > 140.0 {
                    Color::Black
                } else {
                    Color::White
                };
                let black = fg == Color::Black;
                let fg = match self.depth {
                    ColorDepth::TrueColor => fg,
                    // Terminal themes remap the 16 named colours but not the 256-colour
                    // cube: use the cube's black and white where there is one.
                    ColorDepth::Ansi256 if black => Color::Indexed(16),
                    ColorDepth::Ansi256 => Color::Indexed(231),
                    _ if black => Color::Indexed(0),
                    _ => Color::Indexed(15),
                };
                Style::default().bg(bg).fg(fg)
            }
        }
    }
}

/// How a matrix's values map onto a ramp.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ValueScale {
    /// Non-negative data: lo maps to 0, hi to 1.
    Sequential { lo: f64, hi: f64 },
    /// Signed data: -abs .. abs onto -1 .. 1, zero in the middle.
    Diverging { abs: f64 },
}

impl ValueScale {
    /// A scale for these values (infinities and NaN are ignored): sequential from 0 to
    /// the maximum when nothing is negative, diverging around 0 otherwise.
    pub fn fit(values: impl IntoIterator<Item = f64>) -> ValueScale {
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for v in values.into_iter().filter(|v| v.is_finite()) {
            lo = lo.min(v);
            hi = hi.max(v);
        }
        if lo > hi {
            return ValueScale::Sequential { lo: 0.0, hi: 1.0 };
        }
        if lo >= 0.0 {
            ValueScale::Sequential {
                lo: 0.0,
                hi: if hi > 0.0 { hi } else { 1.0 },
            }
        } else {
            let abs = lo.abs().max(hi.abs());
            ValueScale::Diverging { abs }
        }
    }

    pub fn is_diverging(&self) -> bool {
        matches!(self, ValueScale::Diverging { .. })
    }

    /// Where `v` falls: [0, 1] for sequential, [-1, 1] for diverging.
    pub fn norm(&self, v: f64) -> f64 {
        if !v.is_finite() {
            return 0.0;
        }
        match *self {
            ValueScale::Sequential { lo, hi } => ((v - lo) / (hi - lo)).clamp(0.0, 1.0),
            ValueScale::Diverging { abs } if abs > 0.0 => (v / abs).clamp(-1.0, 1.0),
            ValueScale::Diverging { .. } => 0.0,
        }
    }

    /// The ends of the scale, for the legend.
    pub fn ends(&self) -> (f64, f64) {
        match *self {
            ValueScale::Sequential { lo, hi } => (lo, hi),
            ValueScale::Diverging { abs } => (-abs, abs),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn depth_falls_back_truecolor_256_16() {
        assert_eq!(
            ColorDepth::detect(env(&[("COLORTERM", "truecolor"), ("TERM", "xterm")])),
            ColorDepth::TrueColor
        );
        assert_eq!(
            ColorDepth::detect(env(&[("TERM", "tmux-256color")])),
            ColorDepth::Ansi256
        );
        assert_eq!(
            ColorDepth::detect(env(&[("TERM", "xterm")])),
            ColorDepth::Ansi16
        );
        assert_eq!(ColorDepth::detect(env(&[])), ColorDepth::Ansi16);
        assert_eq!(
            ColorDepth::detect(env(&[("NO_COLOR", "1"), ("COLORTERM", "truecolor")])),
            ColorDepth::Mono
        );
        assert_eq!(
            ColorDepth::detect(env(&[("NO_COLOR", ""), ("TERM", "xterm-256color")])),
            ColorDepth::Ansi256
        );
    }

    #[test]
    fn colours_map_to_their_palettes() {
        assert_eq!(xterm256((255, 0, 0)), 196);
        assert_eq!(xterm256((0, 0, 0)), 16);
        assert_eq!(xterm256((128, 128, 128)), 244);
        assert_eq!(ansi16((250, 250, 250)), 15);
        assert_eq!(ansi16((0, 0, 230)), 4);
    }

    #[test]
    fn sixteen_colour_cells_use_only_sixteen_colours() {
        let p = HeatPainter {
            depth: ColorDepth::Ansi16,
            sequential: &[(0, 0, 0), (255, 255, 0)],
            diverging: &[(0, 0, 255), (0, 0, 0), (255, 0, 0)],
        };
        for i in 0..=10 {
            let s = p.cell_style(i as f64 / 10.0, false);
            for c in [s.fg, s.bg] {
                assert!(matches!(c, Some(Color::Indexed(0..=15))), "{c:?}");
            }
        }
    }

    #[test]
    fn scales_fit_their_data() {
        let s = ValueScale::fit([0.0, 0.25, 0.5, f64::NEG_INFINITY]);
        assert_eq!(s, ValueScale::Sequential { lo: 0.0, hi: 0.5 });
        assert_eq!(s.norm(0.25), 0.5);
        let d = ValueScale::fit([-2.0, 1.0]);
        assert_eq!(d, ValueScale::Diverging { abs: 2.0 });
        assert_eq!(d.norm(-1.0), -0.5);
        assert_eq!(d.norm(f64::NEG_INFINITY), 0.0);
    }
}
