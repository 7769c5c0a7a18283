//! One table of semantic styles (what a thing *is*, not which colour it has), built once
//! for the chosen theme and the terminal's colour depth. Render code asks for
//! `theme.cursor`, never for a colour.

use ratatui::style::{Color, Modifier, Style};

use crate::cli::ThemeName;
use crate::widgets::heat::{ColorDepth, HeatPainter, Rgb, adapt};
use crate::widgets::heatmap::HeatmapStyle;

#[derive(Debug, Clone, PartialEq)]
pub struct Theme {
    pub name: ThemeName,
    pub depth: ColorDepth,
    /// Everything not styled otherwise.
    pub base: Style,
    pub app_title: Style,
    pub tab: Style,
    pub tab_active: Style,
    pub stage: Style,
    pub stage_active: Style,
    /// A stage that does nothing with the current options (e.g. RoPE when PE is sinusoidal).
    pub stage_inactive: Style,
    pub field_name: Style,
    pub field_value: Style,
    pub panel_title: Style,
    pub border: Style,
    pub label: Style,
    pub label_active: Style,
    pub masked: Style,
    pub formula: Style,
    pub value: Style,
    pub dim: Style,
    pub narration: Style,
    pub key: Style,
    pub key_desc: Style,
    pub good: Style,
    pub warn: Style,
    pub error: Style,
    pub cursor: Modifier,
    pub highlight: Modifier,
    /// One style per GQA group (query heads sharing a K/V head), cycled.
    pub groups: [Style; 4],
    pub heat: HeatPainter,
}

/// Perceptually ordered dark-to-bright ramp (viridis-like), for weights on dark screens.
const SEQ_DARK: &[Rgb] = &[
    (38, 20, 70),
    (59, 82, 139),
    (33, 145, 140),
    (94, 201, 98),
    (253, 231, 37),
];
/// Light-to-dark blue ramp for light screens.
const SEQ_LIGHT: &[Rgb] = &[
    (247, 251, 255),
    (198, 219, 239),
    (107, 174, 214),
    (33, 113, 181),
    (8, 48, 107),
];
/// Blue below zero, red above, the background colour at zero: small values recede.
const DIV_DARK: &[Rgb] = &[
    (70, 140, 255),
    (40, 70, 130),
    (30, 30, 36),
    (140, 60, 40),
    (255, 130, 60),
];
const DIV_LIGHT: &[Rgb] = &[
    (33, 102, 172),
    (146, 197, 222),
    (247, 247, 247),
    (244, 165, 130),
    (178, 24, 43),
];

struct Palette {
    fg: Rgb,
    dim: Rgb,
    accent: Rgb,
    accent2: Rgb,
    good: Rgb,
    warn: Rgb,
    error: Rgb,
    masked_bg: Rgb,
    masked_fg: Rgb,
    groups: [Rgb; 4],
    seq: &'static [Rgb],
    div: &'static [Rgb],
}

const DARK: Palette = Palette {
    fg: (220, 220, 228),
    dim: (130, 130, 145),
    accent: (120, 190, 255),
    accent2: (255, 200, 90),
    good: (120, 220, 140),
    warn: (255, 190, 80),
    error: (255, 100, 100),
    masked_bg: (60, 60, 66),
    masked_fg: (150, 150, 160),
    groups: [
        (120, 190, 255),
        (255, 160, 90),
        (140, 220, 140),
        (220, 140, 240),
    ],
    seq: SEQ_DARK,
    div: DIV_DARK,
};

const LIGHT: Palette = Palette {
    fg: (30, 30, 40),
    dim: (110, 110, 120),
    accent: (20, 90, 180),
    accent2: (170, 90, 0),
    good: (20, 130, 50),
    warn: (170, 100, 0),
    error: (190, 20, 20),
    masked_bg: (215, 215, 220),
    masked_fg: (90, 90, 100),
    groups: [(20, 90, 180), (190, 80, 0), (20, 130, 50), (140, 40, 170)],
    seq: SEQ_LIGHT,
    div: DIV_LIGHT,
};

impl Theme {
    /// The theme `name` drawn at `depth`; `mono` (or depth Mono) uses no colour at all,
    /// only bold, dim, reverse and underline.
    pub fn new(name: ThemeName, depth: ColorDepth) -> Theme {
        let depth = if name == ThemeName::Mono {
            ColorDepth::Mono
        } else {
            depth
        };
        let p = if name == ThemeName::Light {
            &LIGHT
        } else {
            &DARK
        };
        let fg = |rgb: Rgb| match adapt(depth, rgb) {
            Some(c) => Style::default().fg(c),
            None => Style::default(),
        };
        let bold = Modifier::BOLD;
        let mono = depth == ColorDepth::Mono;
        let masked = match (adapt(depth, p.masked_bg), adapt(depth, p.masked_fg)) {
            (Some(bg), Some(f)) => Style::default().bg(bg).fg(f),
            _ => Style::default().add_modifier(Modifier::DIM),
        };
        let dim = if mono {
            Style::default().add_modifier(Modifier::DIM)
        } else {
            fg(p.dim)
        };
        Theme {
            name,
            depth,
            base: fg(p.fg),
            app_title: fg(p.accent).add_modifier(bold),
            tab: dim,
            tab_active: fg(p.accent2).add_modifier(bold | Modifier::UNDERLINED),
            stage: fg(p.fg),
            stage_active: if mono {
                Style::default().add_modifier(Modifier::REVERSED | bold)
            } else {
                Style::default()
                    .bg(adapt(depth, p.accent).unwrap_or(Color::Reset))
                    .fg(adapt(depth, (10, 10, 20)).unwrap_or(Color::Reset))
                    .add_modifier(bold)
            },
            stage_inactive: dim.add_modifier(Modifier::CROSSED_OUT),
            field_name: dim,
            field_value: fg(p.fg).add_modifier(bold),
            panel_title: fg(p.accent2).add_modifier(bold),
            border: dim,
            label: dim,
            label_active: fg(p.accent2).add_modifier(bold),
            masked,
            formula: fg(p.accent),
            value: fg(p.fg).add_modifier(bold),
            dim,
            narration: fg(p.fg).add_modifier(Modifier::ITALIC),
            key: fg(p.accent2).add_modifier(bold),
            key_desc: dim,
            good: fg(p.good),
            warn: fg(p.warn).add_modifier(bold),
            error: fg(p.error).add_modifier(bold),
            cursor: Modifier::REVERSED | bold,
            highlight: Modifier::UNDERLINED | bold,
            groups: p.groups.map(|g| {
                if mono {
                    Style::default().add_modifier(bold)
                } else {
                    fg(g).add_modifier(bold)
                }
            }),
            heat: HeatPainter {
                depth,
                sequential: p.seq,
                diverging: p.div,
            },
        }
    }

    /// The theme the options and environment ask for: NO_COLOR or `--theme mono` give
    /// mono; otherwise the detected colour depth.
    pub fn choose(name: Option<ThemeName>, depth: ColorDepth) -> Theme {
        Theme::new(name.unwrap_or_default(), depth)
    }

    pub fn heatmap_style(&self) -> HeatmapStyle {
        HeatmapStyle {
            label: self.label,
            label_active: self.label_active,
            masked: self.masked,
            cursor: self.cursor,
            highlight: self.highlight,
        }
    }

    pub fn group(&self, g: usize) -> Style {
        self.groups[g % self.groups.len()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mono_has_no_colour_anywhere() {
        let t = Theme::new(ThemeName::Dark, ColorDepth::Mono);
        for s in [t.base, t.stage_active, t.masked, t.key, t.group(1)] {
            assert_eq!(s.fg, None);
            assert_eq!(s.bg, None);
        }
        let t = Theme::new(ThemeName::Mono, ColorDepth::TrueColor);
        assert_eq!(t.depth, ColorDepth::Mono);
    }

    #[test]
    fn depth_decides_the_colour_kind() {
        let t = Theme::new(ThemeName::Dark, ColorDepth::Ansi256);
        assert!(matches!(t.base.fg, Some(Color::Indexed(_))));
        let t = Theme::new(ThemeName::Light, ColorDepth::TrueColor);
        assert!(matches!(t.base.fg, Some(Color::Rgb(..))));
    }
}
