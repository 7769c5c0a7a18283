//! The characters the app draws with: Unicode blocks and arrows, or plain ASCII for
//! terminals and fonts without them (`--ascii`).

use ratatui::symbols::border;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Glyphs {
    pub ascii: bool,
    /// Intensity ramp from empty to full, one column each.
    pub ramp: &'static [&'static str],
    /// Fractional bar cells, from 1/8 to 8/8.
    pub eighths: &'static [&'static str],
    /// Drawn in a masked cell (the key is hidden from that query).
    pub masked: &'static str,
    pub ellipsis: &'static str,
    /// Between breadcrumb entries.
    pub next: &'static str,
    /// Separator between header fields.
    pub sep: &'static str,
    pub left: &'static str,
    pub right: &'static str,
    pub up: &'static str,
    pub down: &'static str,
    pub shift: &'static str,
    pub border: border::Set<'static>,
    /// Marks a highlighted cell's label.
    pub marker: &'static str,
}

const ASCII_BORDER: border::Set<'static> = border::Set {
    top_left: "+",
    top_right: "+",
    bottom_left: "+",
    bottom_right: "+",
    vertical_left: "|",
    vertical_right: "|",
    horizontal_top: "-",
    horizontal_bottom: "-",
};

impl Glyphs {
    pub const UNICODE: Glyphs = Glyphs {
        ascii: false,
        ramp: &[" ", "░", "▒", "▓", "█"],
        eighths: &["▏", "▎", "▍", "▌", "▋", "▊", "▉", "█"],
        masked: "×",
        ellipsis: "…",
        next: "›",
        sep: "│",
        left: "←",
        right: "→",
        up: "↑",
        down: "↓",
        shift: "⇧",
        border: border::ROUNDED,
        marker: "▸",
    };

    pub const ASCII: Glyphs = Glyphs {
        ascii: true,
        // No '.' or '-' in the ramp: the glyph sits right before a cell's number, and
        // ".-.1" or ".0.0" would read as part of it.
        ramp: &[" ", "'", ":", "+", "#"],
        eighths: &["#", "#", "#", "#", "#", "#", "#", "#"],
        masked: "x",
        ellipsis: "~",
        next: ">",
        sep: "|",
        left: "Left",
        right: "Right",
        up: "Up",
        down: "Down",
        shift: "Shift+",
        border: ASCII_BORDER,
        marker: ">",
    };

    pub fn new(ascii: bool) -> Glyphs {
        if ascii {
            Glyphs::ASCII
        } else {
            Glyphs::UNICODE
        }
    }

    /// The ramp glyph for an intensity in [0, 1]; any non-zero intensity gets at least
    /// the faintest visible glyph so a small weight is not mistaken for none.
    pub fn ramp_glyph(&self, t: f64) -> &'static str {
        let n = self.ramp.len() - 1;
        if t.is_nan() || t <= 0.0 {
            return self.ramp[0];
        }
        let i = ((t.min(1.0) * n as f64).round() as usize).clamp(1, n);
        self.ramp[i]
    }

    /// Text from elsewhere (formulas, narration) made drawable in ASCII mode: the few
    /// mathematical symbols attnviz uses are spelled out.
    pub fn text<'a>(&self, s: &'a str) -> std::borrow::Cow<'a, str> {
        if !self.ascii || s.is_ascii() {
            return std::borrow::Cow::Borrowed(s);
        }
        let mut out = String::with_capacity(s.len());
        for ch in s.chars() {
            match ch {
                '√' => out.push_str("sqrt"),
                '·' | '⋅' => out.push('.'),
                '×' => out.push('x'),
                '→' => out.push_str("->"),
                '←' => out.push_str("<-"),
                '−' | '–' | '—' => out.push('-'),
                '∞' => out.push_str("inf"),
                'ᵀ' => out.push_str("^T"),
                '²' => out.push_str("^2"),
                '≈' => out.push_str("~="),
                '≤' => out.push_str("<="),
                '≥' => out.push_str(">="),
                '≠' => out.push_str("!="),
                '∑' | 'Σ' => out.push_str("sum"),
                'θ' => out.push_str("theta"),
                'π' => out.push_str("pi"),
                '…' => out.push_str("..."),
                '›' => out.push('>'),
                '‖' => out.push_str("||"),
                '⊙' => out.push('*'),
                '₀'..='₉' => out.push((b'0' + (ch as u32 - '₀' as u32) as u8) as char),
                'ₖ' => out.push('k'),
                'ᵢ' => out.push('i'),
                'ⱼ' => out.push('j'),
                'ₕ' => out.push('h'),
                c => out.push(c),
            }
        }
        std::borrow::Cow::Owned(out)
    }
}

#[cfg(test)]
mod tests {
    use super::Glyphs;

    #[test]
    fn ramp_is_monotone_and_small_values_show() {
        let g = Glyphs::UNICODE;
        assert_eq!(g.ramp_glyph(0.0), " ");
        assert_eq!(g.ramp_glyph(0.01), "░");
        assert_eq!(g.ramp_glyph(1.0), "█");
        assert_eq!(g.ramp_glyph(f64::NAN), " ");
    }

    #[test]
    fn ascii_ramp_has_no_character_of_a_number() {
        for g in Glyphs::ASCII.ramp {
            assert!(
                !g.chars()
                    .any(|c| c.is_ascii_digit() || c == '.' || c == '-'),
                "{g}"
            );
        }
    }

    #[test]
    fn ascii_text_spells_symbols_out() {
        let g = Glyphs::ASCII;
        assert_eq!(g.text("S / √d_k → softmax"), "S / sqrtd_k -> softmax");
        assert_eq!(g.text("QKᵀ·x₁"), "QK^T.x1");
    }
}
