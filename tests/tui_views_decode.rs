//! The decode view: cached decoding step by step on the lesson, and GQA/MQA groups.

use attnviz::cli::Lang;
use attnviz::engine::config::MaskKind;
use attnviz::engine::pipeline::ModelConfig;
use attnviz::tui::{Action, AppOptions, State, ViewKind, draw, update};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

fn lesson(f: impl FnOnce(&mut ModelConfig)) -> State {
    let mut c = ModelConfig::example();
    f(&mut c);
    let mut s = State::for_model(c, AppOptions::headless(Lang::En, None, false, "decode")).unwrap();
    update(&mut s, Action::SetView(ViewKind::Decode));
    s
}

fn render(state: &mut State, cols: u16, rows: u16) -> String {
    update(state, Action::Resize { cols, rows });
    let mut term = Terminal::new(TestBackend::new(cols, rows)).unwrap();
    term.draw(|f| draw(state, f)).unwrap();
    term.backend().to_string()
}

#[test]
fn look() {
    let mut s = lesson(|_| {});
    update(&mut s, Action::Select { row: 3, col: 1 });
    println!("{}", render(&mut s, 120, 40));
    println!("{}", render(&mut s, 80, 24));
}
