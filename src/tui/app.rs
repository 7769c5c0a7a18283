//! The event loop: draw, wait for an event (or the next autoplay change), turn it into
//! an action, update. Everything interesting happens in `update` and the views.

use std::time::Duration;

use ratatui::crossterm::event::{self, Event, MouseButton, MouseEventKind};

use crate::error::Result;
use crate::tui::action::Action;
use crate::tui::clock::{SystemClock, Ticker};
use crate::tui::keymap;
use crate::tui::lens_worker;
use crate::tui::measure::Driver;
use crate::tui::render::draw;
use crate::tui::state::State;
use crate::tui::terminal::{self, TerminalGuard, io_error};
use crate::tui::update::update;
use crate::tui::{train_worker, training};

/// How long to wait for input when nothing is animating (the screen still redraws
/// after every event, so this only bounds idle wake-ups).
const IDLE_POLL: Duration = Duration::from_millis(500);

/// How often the screen shows a running measurement's progress.
const MEASURE_POLL: Duration = Duration::from_millis(100);

/// An input event as an action, if it means one.
pub fn action_for_event(state: &State, ev: &Event) -> Option<Action> {
    match ev {
        Event::Key(k) => keymap::action_for(state, k),
        Event::Mouse(m)
            if state.options.mouse && m.kind == MouseEventKind::Down(MouseButton::Left) =>
        {
            Some(Action::Click {
                x: m.column,
                y: m.row,
            })
        }
        Event::Resize(cols, rows) => Some(Action::Resize {
            cols: *cols,
            rows: *rows,
        }),
        _ => None,
    }
}

/// Run the app on a real terminal until the person quits.
pub fn run(mut state: State) -> Result<()> {
    terminal::ensure_terminal()?;
    let mut guard = TerminalGuard::enter(state.options.mouse)?;
    let size = guard.terminal.size().map_err(io_error)?;
    update(
        &mut state,
        Action::Resize {
            cols: size.width,
            rows: size.height,
        },
    );
    let clock = SystemClock::new();
    let mut ticker = Ticker::default();
    ticker.elapsed(&clock);
    // Starts and stops the scaling view's measuring thread; its reports come in as actions.
    let mut measuring = Driver::default();
    // Steps `attnviz train`'s run on a worker thread; its snapshots come in as actions.
    let mut training = train_worker::Driver::default();
    training.sync(&mut state);
    // Computes the lens and attribution views' numbers on worker threads; they come in as
    // actions.
    let mut lensing = lens_worker::Driver::default();
    // For the test that the panic path restores the terminal (tests/cli/terminal_restore.rs):
    // a panic after the first frame, while the app owns the terminal.
    let panic_for_test = std::env::var_os("ATTNVIZ_TEST_PANIC").is_some();
    while !state.quit {
        guard.terminal.draw(|f| draw(&state, f)).map_err(io_error)?;
        if panic_for_test {
            panic!("ATTNVIZ_TEST_PANIC is set: panicking after the first frame");
        }
        let next_change = state.next_change_in_ms();
        let timeout = next_change.map_or(IDLE_POLL, |ms| Duration::from_millis(ms.clamp(10, 100)));
        let timeout = if measuring.busy() || training.busy() || lensing.busy() {
            timeout.min(MEASURE_POLL)
        } else {
            timeout
        };
        // The flash view's tiles count time only from when they started playing, not
        // the idle wait in which Space was pressed.
        let tiles_were_playing = next_change.is_some() && state.flash.playing;
        if event::poll(timeout).map_err(io_error)? {
            // Take every pending event before drawing again (key repeat, resize storms).
            loop {
                let ev = event::read().map_err(io_error)?;
                if let Some(action) = action_for_event(&state, &ev) {
                    update(&mut state, action);
                }
                if state.quit || !event::poll(Duration::ZERO).map_err(io_error)? {
                    break;
                }
            }
        }
        measuring.sync(&mut state);
        training.sync(&mut state);
        lensing.sync(&mut state);
        let ms = ticker.elapsed(&clock);
        if state.script.as_ref().is_some_and(|p| p.playing)
            || tiles_were_playing
            || training::running_inline(&state)
        {
            update(&mut state, Action::Tick { ms });
        }
    }
    drop(guard);
    Ok(())
}
