//! The app's screen as text, drawn headless the way the tui tests read it.

use attnviz::tui::{Action, State, draw, update};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;

/// A buffer's text, one line per row, each ending in a newline.
pub fn text(buf: &Buffer) -> String {
    let cols = buf.area.width as usize;
    buf.content()
        .chunks(cols.max(1))
        .map(|r| r.iter().map(|c| c.symbol()).collect::<String>() + "\n")
        .collect()
}

/// Draw `s` on `term` and return the screen.
pub fn on(s: &State, term: &mut Terminal<TestBackend>) -> String {
    term.draw(|f| draw(s, f)).unwrap();
    text(term.backend().buffer())
}

/// Draw `s` on a fresh `cols` x `rows` terminal and return the screen (the state's idea
/// of the terminal's size is left as it is).
pub fn screen(s: &State, cols: u16, rows: u16) -> String {
    on(s, &mut Terminal::new(TestBackend::new(cols, rows)).unwrap())
}

/// Tell `s` the terminal is `cols` x `rows`, as the app does on a resize, then draw it
/// there and return the screen.
pub fn sized(s: &mut State, cols: u16, rows: u16) -> String {
    update(s, Action::Resize { cols, rows });
    screen(s, cols, rows)
}
