//! The real terminal: raw mode, alternate screen, mouse capture, and putting it all
//! back on exit, on error (the guard's Drop) and on panic (a hook that restores before
//! the message is printed).

use std::io::{IsTerminal, Stdout, stdout};
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};

use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::cursor::{Hide, Show};
use ratatui::crossterm::event::{DisableMouseCapture, EnableMouseCapture};
use ratatui::crossterm::execute;
use ratatui::crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};

use crate::error::{Error, Result};

/// True while the app owns the terminal (so the panic hook knows to restore it).
static ACTIVE: AtomicBool = AtomicBool::new(false);
static HOOK: Once = Once::new();

/// Refuse to start the app when stdout is not a terminal, and say what works instead.
pub fn ensure_terminal() -> Result<()> {
    if stdout().is_terminal() {
        Ok(())
    } else {
        Err(Error::usage(
            "the interactive app needs a terminal, but stdout is not a terminal (a pipe or a file?); \
             for a picture without a terminal use `attnviz snapshot SCENE --step K --txt OUT.txt` \
             (or --svg OUT.svg), for a recording `attnviz play SCENE --record OUT.cast`",
        ))
    }
}

/// Put the terminal back as it was. Safe to call more than once.
pub fn restore() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        let _ = disable_raw_mode();
        let _ = execute!(stdout(), DisableMouseCapture, LeaveAlternateScreen, Show);
    }
}

fn install_panic_hook() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
    });
}

/// Owns the terminal while the app runs; dropping it restores the terminal.
pub struct TerminalGuard {
    pub terminal: Terminal<CrosstermBackend<Stdout>>,
}

impl TerminalGuard {
    pub fn enter(mouse: bool) -> Result<TerminalGuard> {
        install_panic_hook();
        let setup = || -> std::io::Result<Terminal<CrosstermBackend<Stdout>>> {
            enable_raw_mode()?;
            ACTIVE.store(true, Ordering::SeqCst);
            execute!(stdout(), EnterAlternateScreen, Hide)?;
            if mouse {
                execute!(stdout(), EnableMouseCapture)?;
            }
            Terminal::new(CrosstermBackend::new(stdout()))
        };
        match setup() {
            Ok(terminal) => Ok(TerminalGuard { terminal }),
            Err(e) => {
                restore();
                Err(Error::usage(format!(
                    "cannot set up this terminal for the app ({e}); try another terminal, or `attnviz snapshot` for a still picture"
                )))
            }
        }
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

/// A terminal I/O failure while the app runs: not the user's doing.
pub fn io_error(e: std::io::Error) -> Error {
    Error::Internal(format!("terminal I/O failed: {e}"))
}
