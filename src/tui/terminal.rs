//! The real terminal: raw mode, alternate screen, mouse capture, and putting it all
//! back on exit, on error (the guard's Drop), on panic (a hook that restores before
//! the message is printed) and on SIGTERM, SIGHUP, SIGINT and SIGQUIT sent from outside (a
//! thread that restores, then lets the signal end the process as it would have).

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
        install_signal_handler();
    });
}

/// SIGTERM, SIGHUP, SIGINT and SIGQUIT (in raw mode Ctrl-C and Ctrl-\\ are keys, so these
/// come from `kill`): restore the terminal, then end the process by the same signal, so the
/// parent sees what it sent. A thread, not a signal handler, does the restoring: it
/// writes to the terminal and takes locks, which a handler must not.
#[cfg(unix)]
fn install_signal_handler() {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGTERM, SIGHUP, SIGINT, SIGQUIT])
    else {
        // Without the handler the signals keep their default action (the terminal is
        // left as it is, as before); the app itself still works.
        return;
    };
    let spawned = std::thread::Builder::new()
        .name("attnviz-signals".into())
        .spawn(move || {
            if let Some(signal) = signals.forever().next() {
                // Hold stdout so the event loop cannot draw between the restore and the
                // end of the process.
                let _out = stdout().lock();
                restore();
                let _ = signal_hook::low_level::emulate_default_handler(signal);
                std::process::exit(128 + signal);
            }
        });
    drop(spawned);
}

#[cfg(not(unix))]
fn install_signal_handler() {}

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
