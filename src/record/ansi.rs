//! Frames as ANSI escape sequences: the difference between two ratatui buffers, written
//! the way a terminal would receive it (cursor moves, SGR colours, the glyphs).
//!
//! We write the sequences ourselves rather than through a terminal backend so the bytes
//! depend on nothing but the two buffers and the encoder's state.

use std::fmt::Write as _;

use ratatui::buffer::Buffer;
use ratatui::style::{Color, Modifier};
use unicode_width::UnicodeWidthStr;

/// Hide the cursor, clear the screen, home.
const START: &str = "\u{1b}[?25l\u{1b}[0m\u{1b}[2J\u{1b}[H";
/// Plain style and a visible cursor again, for the end of a recording.
pub const FINISH: &str = "\u{1b}[0m\u{1b}[?25h";

/// The style a terminal is in, as far as we have set it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pen {
    fg: Color,
    bg: Color,
    modifier: Modifier,
}

impl Pen {
    const PLAIN: Pen = Pen {
        fg: Color::Reset,
        bg: Color::Reset,
        modifier: Modifier::empty(),
    };
}

/// Turns a sequence of frames into terminal output, remembering where the cursor and
/// the pen are between frames.
#[derive(Debug)]
pub struct AnsiEncoder {
    prev: Option<Buffer>,
    cursor: Option<(u16, u16)>,
    pen: Pen,
}

impl Default for AnsiEncoder {
    fn default() -> Self {
        Self::new()
    }
}

impl AnsiEncoder {
    pub fn new() -> Self {
        AnsiEncoder {
            prev: None,
            cursor: None,
            pen: Pen::PLAIN,
        }
    }

    /// The output that turns the previous frame into `next` (the whole frame, after
    /// clearing the screen, the first time). Empty if nothing changed.
    pub fn frame(&mut self, next: &Buffer) -> String {
        let mut out = String::new();
        let prev = match self.prev.take() {
            Some(p) if p.area == next.area => p,
            _ => {
                out.push_str(START);
                self.cursor = Some((0, 0));
                self.pen = Pen::PLAIN;
                Buffer::empty(next.area)
            }
        };
        for (x, y, cell) in prev.diff(next) {
            let symbol = cell.symbol();
            let width = symbol.width();
            if width == 0 {
                continue;
            }
            if self.cursor != Some((x, y)) {
                let _ = write!(out, "\u{1b}[{};{}H", y + 1, x + 1);
            }
            let pen = Pen {
                fg: cell.fg,
                bg: cell.bg,
                modifier: cell.modifier,
            };
            if pen != self.pen {
                out.push_str(&sgr(pen));
                self.pen = pen;
            }
            out.push_str(symbol);
            // Past the last column the cursor position is terminal-specific: forget it,
            // so the next cell moves there explicitly.
            let end = x + width as u16;
            self.cursor = (end < next.area.right()).then_some((end, y));
        }
        self.prev = Some(next.clone());
        out
    }
}

/// One SGR sequence that sets the whole pen (reset first, so nothing lingers).
fn sgr(pen: Pen) -> String {
    let mut s = String::from("\u{1b}[0");
    for (m, code) in [
        (Modifier::BOLD, 1),
        (Modifier::DIM, 2),
        (Modifier::ITALIC, 3),
        (Modifier::UNDERLINED, 4),
        (Modifier::SLOW_BLINK, 5),
        (Modifier::RAPID_BLINK, 6),
        (Modifier::REVERSED, 7),
        (Modifier::HIDDEN, 8),
        (Modifier::CROSSED_OUT, 9),
    ] {
        if pen.modifier.contains(m) {
            let _ = write!(s, ";{code}");
        }
    }
    colour(&mut s, pen.fg, 30);
    colour(&mut s, pen.bg, 40);
    s.push('m');
    s
}

/// Append `;code` for a colour; `base` is 30 for foreground, 40 for background.
fn colour(s: &mut String, c: Color, base: u8) {
    let named = |i: u8| if i < 8 { base + i } else { base + 60 + i - 8 };
    let _ = match c {
        Color::Reset => Ok(()),
        Color::Black => write!(s, ";{}", named(0)),
        Color::Red => write!(s, ";{}", named(1)),
        Color::Green => write!(s, ";{}", named(2)),
        Color::Yellow => write!(s, ";{}", named(3)),
        Color::Blue => write!(s, ";{}", named(4)),
        Color::Magenta => write!(s, ";{}", named(5)),
        Color::Cyan => write!(s, ";{}", named(6)),
        Color::Gray => write!(s, ";{}", named(7)),
        Color::DarkGray => write!(s, ";{}", named(8)),
        Color::LightRed => write!(s, ";{}", named(9)),
        Color::LightGreen => write!(s, ";{}", named(10)),
        Color::LightYellow => write!(s, ";{}", named(11)),
        Color::LightBlue => write!(s, ";{}", named(12)),
        Color::LightMagenta => write!(s, ";{}", named(13)),
        Color::LightCyan => write!(s, ";{}", named(14)),
        Color::White => write!(s, ";{}", named(15)),
        Color::Indexed(i) => write!(s, ";{};5;{i}", base + 8),
        Color::Rgb(r, g, b) => write!(s, ";{};2;{r};{g};{b}", base + 8),
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::layout::Rect;
    use ratatui::style::Style;

    #[test]
    fn first_frame_clears_then_draws_with_colours() {
        let mut buf = Buffer::empty(Rect::new(0, 0, 4, 2));
        buf.set_string(0, 0, "ab", Style::new().fg(Color::Red).bold());
        buf.set_string(1, 1, "c", Style::new().bg(Color::Rgb(1, 2, 3)));
        let mut enc = AnsiEncoder::new();
        let out = enc.frame(&buf);
        assert_eq!(
            out,
            format!("{START}\u{1b}[0;1;31mab\u{1b}[2;2H\u{1b}[0;48;2;1;2;3mc")
        );
        // Nothing changed: nothing to send.
        assert_eq!(enc.frame(&buf), "");
    }

    #[test]
    fn later_frames_send_only_the_changes() {
        let mut buf = Buffer::empty(Rect::new(0, 0, 6, 1));
        buf.set_string(0, 0, "abcdef", Style::new());
        let mut enc = AnsiEncoder::new();
        enc.frame(&buf);
        buf.set_string(4, 0, "X", Style::new().fg(Color::Indexed(200)));
        assert_eq!(enc.frame(&buf), "\u{1b}[1;5H\u{1b}[0;38;5;200mX");
    }

    #[test]
    fn wide_glyphs_advance_two_columns() {
        let mut buf = Buffer::empty(Rect::new(0, 0, 6, 1));
        buf.set_string(0, 0, "注意x", Style::new());
        let out = AnsiEncoder::new().frame(&buf);
        // No cursor move between the glyphs: each wide one advances the cursor by two.
        assert_eq!(out, format!("{START}注意x"));
    }

    #[test]
    fn the_last_column_is_followed_by_an_explicit_move() {
        let mut buf = Buffer::empty(Rect::new(0, 0, 2, 2));
        buf.set_string(0, 0, "ab", Style::new());
        buf.set_string(0, 1, "c", Style::new());
        let out = AnsiEncoder::new().frame(&buf);
        assert_eq!(out, format!("{START}ab\u{1b}[2;1Hc"));
    }
}
