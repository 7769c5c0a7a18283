//! Key bindings as data: a key pattern, the action it gives, its help text and hint,
//! its help section and when it is live. The app's table (`keymap`) and every view's
//! own table (`View::commands`) are written in these terms.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::tui::action::Action;
use crate::widgets::Glyphs;

/// A key as the table writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyPat {
    /// A character, case-sensitive (Shift is already in the character).
    Char(char),
    /// A non-character key without modifiers.
    Code(KeyCode),
    /// A non-character key with Shift.
    Shift(KeyCode),
    /// Ctrl and a character.
    Ctrl(char),
    /// The digits 1-9 (bound to heads).
    Digits,
}

impl KeyPat {
    pub fn matches(&self, key: &KeyEvent) -> bool {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let alt = key.modifiers.contains(KeyModifiers::ALT);
        let shift = key.modifiers.contains(KeyModifiers::SHIFT);
        match *self {
            KeyPat::Char(c) => key.code == KeyCode::Char(c) && !ctrl && !alt,
            // Shift+Tab arrives as BackTab with Shift set.
            KeyPat::Code(KeyCode::BackTab) => key.code == KeyCode::BackTab,
            KeyPat::Code(k) => key.code == k && !ctrl && !alt && !shift,
            KeyPat::Shift(k) => key.code == k && shift && !ctrl && !alt,
            KeyPat::Ctrl(c) => {
                ctrl && matches!(key.code, KeyCode::Char(x) if x.eq_ignore_ascii_case(&c))
            }
            KeyPat::Digits => matches!(key.code, KeyCode::Char('1'..='9')) && !ctrl && !alt,
        }
    }

    /// How help and hints write the key.
    pub fn label(&self, g: &Glyphs) -> String {
        let code = |k: KeyCode| -> String {
            match k {
                KeyCode::Left => g.left.into(),
                KeyCode::Right => g.right.into(),
                KeyCode::Up => g.up.into(),
                KeyCode::Down => g.down.into(),
                KeyCode::Tab => "Tab".into(),
                KeyCode::BackTab => "S-Tab".into(),
                KeyCode::Enter => "Enter".into(),
                KeyCode::Esc => "Esc".into(),
                KeyCode::Home => "Home".into(),
                KeyCode::End => "End".into(),
                KeyCode::Backspace => "Bksp".into(),
                KeyCode::Delete => "Del".into(),
                KeyCode::PageUp => "PgUp".into(),
                KeyCode::PageDown => "PgDn".into(),
                KeyCode::Char(' ') => "Space".into(),
                KeyCode::Char(c) => c.to_string(),
                other => format!("{other:?}"),
            }
        };
        match *self {
            KeyPat::Char(' ') => "Space".into(),
            KeyPat::Char(c) => c.to_string(),
            KeyPat::Code(k) => code(k),
            KeyPat::Shift(k) => format!("{}{}", g.shift, code(k)),
            KeyPat::Ctrl(c) => format!("Ctrl-{}", c.to_ascii_uppercase()),
            KeyPat::Digits => "1-9".into(),
        }
    }
}

/// Sections of the help overlay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    Move,
    Steps,
    Model,
    Views,
    Script,
    App,
    /// Keys of the current view only.
    ThisView,
}

impl Group {
    pub const ORDER: [Group; 7] = [
        Group::Move,
        Group::Steps,
        Group::Model,
        Group::ThisView,
        Group::Views,
        Group::Script,
        Group::App,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Group::Move => "Cell cursor",
            Group::Steps => "Stages and heads",
            Group::Model => "Change the model",
            Group::Views => "Views",
            Group::Script => "Scripted lesson",
            Group::App => "App",
            Group::ThisView => "This view",
        }
    }
}

/// When a binding is live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    Always,
    /// The app runs a model built from options (not the user's own tensors).
    Model,
    /// The app computes attention itself (a model, or q/k/v from files; not weights).
    Computed,
    /// A script (lesson) is loaded.
    Script,
    /// No script is loaded (a view's key that a script would take, e.g. Space).
    NoScript,
    /// The data has several layers (a 4-D `--attn` file).
    Layers,
    /// The text is long enough for its maps to need zoom (or a real model runs).
    Long,
}

pub struct Binding {
    pub keys: &'static [KeyPat],
    pub action: Action,
    /// For the help overlay.
    pub desc: &'static str,
    /// For the hint bar (None: help only). Order in the table is the hint priority.
    pub hint: Option<&'static str>,
    /// How the hint bar writes the keys, if not from `keys`.
    pub hint_keys: Option<&'static str>,
    pub group: Group,
    pub when: When,
}
