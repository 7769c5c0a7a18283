use attnviz::cli::Lang;
use attnviz::engine::pipeline::ModelConfig;
use attnviz::tui::{Action, AppOptions, State, ViewKind, draw, update};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

fn render(state: &mut State, cols: u16, rows: u16) -> String {
    update(state, Action::Resize { cols, rows });
    let mut term = Terminal::new(TestBackend::new(cols, rows)).unwrap();
    term.draw(|f| draw(state, f)).unwrap();
    term.backend().to_string()
}

#[test]
fn look() {
    let c = ModelConfig::example();
    let mut s = State::for_model(c, AppOptions::headless(Lang::En, None, false, "v")).unwrap();
    update(&mut s, Action::SetView(ViewKind::Variants));
    update(&mut s, Action::Select { row: 5, col: 2 });
    for _ in 0..3 {
        println!("{}", render(&mut s, 120, 40));
        println!("{}", render(&mut s, 80, 24));
        update(&mut s, Action::ViewCommand(0));
    }
}
