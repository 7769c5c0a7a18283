//! Terminal colours as RGB, for stills that have no terminal to pick them.

use ratatui::style::Color;

/// The colours `Color::Reset` stands for in a still: the terminal's own foreground and
/// background, which a picture has to choose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Defaults {
    pub fg: (u8, u8, u8),
    pub bg: (u8, u8, u8),
}

impl Defaults {
    pub const DARK: Defaults = Defaults {
        fg: (0xd4, 0xd4, 0xd4),
        bg: (0x12, 0x14, 0x18),
    };
    pub const LIGHT: Defaults = Defaults {
        fg: (0x1f, 0x23, 0x28),
        bg: (0xfa, 0xfa, 0xf7),
    };
}

/// xterm's 16 standard colours, the reference most terminals follow.
const ANSI16: [(u8, u8, u8); 16] = [
    (0x00, 0x00, 0x00),
    (0xcd, 0x00, 0x00),
    (0x00, 0xcd, 0x00),
    (0xcd, 0xcd, 0x00),
    (0x00, 0x00, 0xee),
    (0xcd, 0x00, 0xcd),
    (0x00, 0xcd, 0xcd),
    (0xe5, 0xe5, 0xe5),
    (0x7f, 0x7f, 0x7f),
    (0xff, 0x00, 0x00),
    (0x00, 0xff, 0x00),
    (0xff, 0xff, 0x00),
    (0x5c, 0x5c, 0xff),
    (0xff, 0x00, 0xff),
    (0x00, 0xff, 0xff),
    (0xff, 0xff, 0xff),
];

/// The RGB of a colour; `None` for `Reset` (the caller's default).
pub fn rgb(c: Color) -> Option<(u8, u8, u8)> {
    let named = |i: usize| Some(ANSI16[i]);
    match c {
        Color::Reset => None,
        Color::Black => named(0),
        Color::Red => named(1),
        Color::Green => named(2),
        Color::Yellow => named(3),
        Color::Blue => named(4),
        Color::Magenta => named(5),
        Color::Cyan => named(6),
        Color::Gray => named(7),
        Color::DarkGray => named(8),
        Color::LightRed => named(9),
        Color::LightGreen => named(10),
        Color::LightYellow => named(11),
        Color::LightBlue => named(12),
        Color::LightMagenta => named(13),
        Color::LightCyan => named(14),
        Color::White => named(15),
        Color::Indexed(i) => Some(indexed(i)),
        Color::Rgb(r, g, b) => Some((r, g, b)),
    }
}

/// The xterm 256-colour table: 16 named colours, a 6x6x6 cube, 24 greys.
fn indexed(i: u8) -> (u8, u8, u8) {
    const LEVELS: [u8; 6] = [0, 95, 135, 175, 215, 255];
    match i {
        0..=15 => ANSI16[i as usize],
        16..=231 => {
            let k = i - 16;
            (
                LEVELS[(k / 36) as usize],
                LEVELS[(k / 6 % 6) as usize],
                LEVELS[(k % 6) as usize],
            )
        }
        232..=255 => {
            let v = 8 + 10 * (i - 232);
            (v, v, v)
        }
    }
}

pub fn hex((r, g, b): (u8, u8, u8)) -> String {
    format!("#{r:02x}{g:02x}{b:02x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_256_colour_table_matches_xterm() {
        assert_eq!(indexed(16), (0, 0, 0));
        assert_eq!(indexed(196), (255, 0, 0));
        assert_eq!(indexed(231), (255, 255, 255));
        assert_eq!(indexed(232), (8, 8, 8));
        assert_eq!(indexed(255), (238, 238, 238));
        assert_eq!(hex(indexed(208)), "#ff8700");
    }
}
