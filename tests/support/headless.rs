//! Options of a headless run (recordings and stills), as the recording tests use them.

use attnviz::cli::{Lang, TermSize};
use attnviz::record::HeadlessOptions;

/// The size recordings default to (`--size 100x30`).
pub const SIZE: TermSize = TermSize {
    cols: 100,
    rows: 30,
};

/// Headless options at `size` and `speed`, with the default theme and Unicode glyphs.
pub fn options_at(lang: Lang, size: TermSize, speed: f64) -> HeadlessOptions {
    HeadlessOptions {
        lang,
        size,
        speed,
        theme: None,
        ascii: false,
    }
}

/// Headless options at 100x30 and speed 1.
pub fn options(lang: Lang) -> HeadlessOptions {
    options_at(lang, SIZE, 1.0)
}
