//! The one key table. It drives key handling, the help overlay and the hint bar, so
//! what the help says and what the keys do cannot drift apart.
//!
//! The split between moving and stepping: plain arrows (or h j k l) move the cell
//! cursor; with Shift they take bigger steps: Shift+Left/Right (or H/L) step through
//! the stages, Shift+Up/Down (or K/J) change the head.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use crate::tui::action::{Action, EditAction};
use crate::tui::state::{Overlay, State};
use crate::tui::views;
use crate::widgets::Glyphs;

pub use crate::tui::keys::{Binding, Group, KeyPat, When};

use KeyCode as K;
use KeyPat::{Char as C, Code, Ctrl, Shift};

/// The global key table.
pub static BINDINGS: &[Binding] = &[
    Binding {
        keys: &[Shift(K::Right), C('L')],
        action: Action::StageNext,
        desc: "next stage (skips stages the options switch off)",
        hint: Some("stage"),
        hint_keys: Some("H/L"),
        group: Group::Steps,
        when: When::Always,
    },
    Binding {
        keys: &[Shift(K::Left), C('H')],
        action: Action::StagePrev,
        desc: "previous stage",
        hint: None,
        hint_keys: None,
        group: Group::Steps,
        when: When::Always,
    },
    Binding {
        keys: &[Code(K::Left), Code(K::Right), Code(K::Up), Code(K::Down)],
        action: Action::Move { rows: 0, cols: 0 },
        desc: "move the cell cursor (h j k l work too)",
        hint: Some("cell"),
        hint_keys: None,
        group: Group::Move,
        when: When::Always,
    },
    Binding {
        keys: &[C('h')],
        action: Action::Move { rows: 0, cols: -1 },
        desc: "cursor left",
        hint: None,
        hint_keys: None,
        group: Group::Move,
        when: When::Always,
    },
    Binding {
        keys: &[C('l')],
        action: Action::Move { rows: 0, cols: 1 },
        desc: "cursor right",
        hint: None,
        hint_keys: None,
        group: Group::Move,
        when: When::Always,
    },
    Binding {
        keys: &[C('k')],
        action: Action::Move { rows: -1, cols: 0 },
        desc: "cursor up",
        hint: None,
        hint_keys: None,
        group: Group::Move,
        when: When::Always,
    },
    Binding {
        keys: &[C('j')],
        action: Action::Move { rows: 1, cols: 0 },
        desc: "cursor down",
        hint: None,
        hint_keys: None,
        group: Group::Move,
        when: When::Always,
    },
    Binding {
        keys: &[C('o')],
        action: Action::NextPane,
        desc: "cursor to the stage's next matrix (Q, K, V, ...)",
        hint: None,
        hint_keys: None,
        group: Group::Move,
        when: When::Always,
    },
    Binding {
        keys: &[KeyPat::Digits],
        action: Action::Head(0),
        desc: "pick query head 1-9",
        hint: Some("head"),
        hint_keys: None,
        group: Group::Steps,
        when: When::Always,
    },
    Binding {
        keys: &[Shift(K::Down), C('J')],
        action: Action::HeadNext,
        desc: "next head",
        hint: None,
        hint_keys: None,
        group: Group::Steps,
        when: When::Always,
    },
    Binding {
        keys: &[Shift(K::Up), C('K')],
        action: Action::HeadPrev,
        desc: "previous head",
        hint: None,
        hint_keys: None,
        group: Group::Steps,
        when: When::Always,
    },
    Binding {
        keys: &[Code(K::Home)],
        action: Action::StageFirst,
        desc: "first stage",
        hint: None,
        hint_keys: None,
        group: Group::Steps,
        when: When::Always,
    },
    Binding {
        keys: &[Code(K::End)],
        action: Action::StageLast,
        desc: "last stage",
        hint: None,
        hint_keys: None,
        group: Group::Steps,
        when: When::Always,
    },
    Binding {
        keys: &[Code(K::Tab)],
        action: Action::NextView,
        desc: "next view",
        hint: Some("view"),
        hint_keys: None,
        group: Group::Views,
        when: When::Always,
    },
    Binding {
        keys: &[Code(K::BackTab)],
        action: Action::PrevView,
        desc: "previous view",
        hint: None,
        hint_keys: None,
        group: Group::Views,
        when: When::Always,
    },
    Binding {
        keys: &[C(' ')],
        action: Action::PlayPause,
        desc: "play / pause the lesson",
        hint: Some("play"),
        hint_keys: None,
        group: Group::Script,
        when: When::Script,
    },
    Binding {
        keys: &[C('n')],
        action: Action::StepNext,
        desc: "next lesson step",
        hint: Some("step"),
        hint_keys: None,
        group: Group::Script,
        when: When::Script,
    },
    Binding {
        keys: &[C('N')],
        action: Action::StepPrev,
        desc: "previous lesson step",
        hint: None,
        hint_keys: None,
        group: Group::Script,
        when: When::Script,
    },
    Binding {
        keys: &[C(']')],
        action: Action::Faster,
        desc: "play faster",
        hint: None,
        hint_keys: None,
        group: Group::Script,
        when: When::Script,
    },
    Binding {
        keys: &[C('[')],
        action: Action::Slower,
        desc: "play slower",
        hint: None,
        hint_keys: None,
        group: Group::Script,
        when: When::Script,
    },
    Binding {
        keys: &[C('m')],
        action: Action::CycleMask,
        desc: "cycle the mask: none, causal, window, padding, bigbird",
        hint: Some("mask"),
        hint_keys: None,
        group: Group::Model,
        when: When::Computed,
    },
    Binding {
        keys: &[C('p')],
        action: Action::CyclePe,
        desc: "cycle the position encoding: none, sinusoidal, learned, rope, alibi",
        hint: Some("PE"),
        hint_keys: None,
        group: Group::Model,
        when: When::Computed,
    },
    Binding {
        keys: &[C('s')],
        action: Action::ToggleScale,
        desc: "toggle the 1/sqrt(d_k) scale and compare row entropy and max weight",
        hint: Some("scale"),
        hint_keys: None,
        group: Group::Model,
        when: When::Computed,
    },
    Binding {
        keys: &[C('e')],
        action: Action::Edit(EditAction::Start),
        desc: "edit the sentence (Enter applies, Esc cancels)",
        hint: Some("edit"),
        hint_keys: None,
        group: Group::Model,
        when: When::Model,
    },
    Binding {
        keys: &[C('+'), C('=')],
        action: Action::Longer,
        desc: "one token more",
        hint: None,
        hint_keys: None,
        group: Group::Model,
        when: When::Model,
    },
    Binding {
        keys: &[C('-')],
        action: Action::Shorter,
        desc: "one token fewer",
        hint: None,
        hint_keys: None,
        group: Group::Model,
        when: When::Model,
    },
    Binding {
        keys: &[C('r')],
        action: Action::Reseed,
        desc: "reseed the embeddings and weights",
        hint: None,
        hint_keys: None,
        group: Group::Model,
        when: When::Model,
    },
    Binding {
        keys: &[C('<')],
        action: Action::LayerPrev,
        desc: "previous layer",
        hint: Some("layer"),
        hint_keys: None,
        group: Group::Steps,
        when: When::Layers,
    },
    Binding {
        keys: &[C('>')],
        action: Action::LayerNext,
        desc: "next layer",
        hint: None,
        hint_keys: None,
        group: Group::Steps,
        when: When::Layers,
    },
    Binding {
        keys: &[C('z')],
        action: Action::ZoomOut,
        desc: "zoom out: a cell covers a block of 2x2, 4x4, .. entries",
        hint: Some("zoom"),
        hint_keys: Some("z/Z"),
        group: Group::Move,
        when: When::Long,
    },
    Binding {
        keys: &[C('Z')],
        action: Action::ZoomIn,
        desc: "zoom in (back to one entry per cell)",
        hint: None,
        hint_keys: None,
        group: Group::Move,
        when: When::Long,
    },
    Binding {
        keys: &[C('b')],
        action: Action::TogglePool,
        desc: "a zoomed-out cell shows its block's mean / maximum",
        hint: Some("mean/max"),
        hint_keys: None,
        group: Group::Move,
        when: When::Long,
    },
    Binding {
        keys: &[C('?')],
        action: Action::ToggleHelp,
        desc: "show / hide this help",
        hint: Some("help"),
        hint_keys: None,
        group: Group::App,
        when: When::Always,
    },
    Binding {
        keys: &[C('q'), Ctrl('c')],
        action: Action::Quit,
        desc: "quit",
        hint: Some("quit"),
        hint_keys: Some("q"),
        group: Group::App,
        when: When::Always,
    },
];

/// Keys of the sentence editor (drawn under the edit box).
pub static EDIT_BINDINGS: &[Binding] = &[
    Binding {
        keys: &[Code(K::Enter)],
        action: Action::Edit(EditAction::Apply),
        desc: "apply",
        hint: Some("apply"),
        hint_keys: None,
        group: Group::Model,
        when: When::Always,
    },
    Binding {
        keys: &[Code(K::Esc)],
        action: Action::Edit(EditAction::Cancel),
        desc: "cancel",
        hint: Some("cancel"),
        hint_keys: None,
        group: Group::Model,
        when: When::Always,
    },
    Binding {
        keys: &[Ctrl('u')],
        action: Action::Edit(EditAction::Clear),
        desc: "clear",
        hint: Some("clear"),
        hint_keys: None,
        group: Group::Model,
        when: When::Always,
    },
    Binding {
        keys: &[Code(K::Backspace)],
        action: Action::Edit(EditAction::Backspace),
        desc: "delete before the cursor",
        hint: None,
        hint_keys: None,
        group: Group::Model,
        when: When::Always,
    },
    Binding {
        keys: &[Code(K::Delete)],
        action: Action::Edit(EditAction::Delete),
        desc: "delete at the cursor",
        hint: None,
        hint_keys: None,
        group: Group::Model,
        when: When::Always,
    },
    Binding {
        keys: &[Code(K::Left)],
        action: Action::Edit(EditAction::Left),
        desc: "cursor left",
        hint: None,
        hint_keys: None,
        group: Group::Model,
        when: When::Always,
    },
    Binding {
        keys: &[Code(K::Right)],
        action: Action::Edit(EditAction::Right),
        desc: "cursor right",
        hint: None,
        hint_keys: None,
        group: Group::Model,
        when: When::Always,
    },
    Binding {
        keys: &[Code(K::Home)],
        action: Action::Edit(EditAction::Home),
        desc: "start",
        hint: None,
        hint_keys: None,
        group: Group::Model,
        when: When::Always,
    },
    Binding {
        keys: &[Code(K::End)],
        action: Action::Edit(EditAction::End),
        desc: "end",
        hint: None,
        hint_keys: None,
        group: Group::Model,
        when: When::Always,
    },
    Binding {
        keys: &[Ctrl('c')],
        action: Action::Quit,
        desc: "quit",
        hint: None,
        hint_keys: None,
        group: Group::App,
        when: When::Always,
    },
];

/// Keys while the help overlay is open.
pub static HELP_BINDINGS: &[Binding] = &[
    Binding {
        keys: &[Code(K::Esc), C('?'), C('q')],
        action: Action::CloseOverlay,
        desc: "close the help",
        hint: Some("close"),
        hint_keys: None,
        group: Group::App,
        when: When::Always,
    },
    Binding {
        keys: &[Code(K::Down), C('j')],
        action: Action::HelpScroll(1),
        desc: "scroll down",
        hint: Some("scroll"),
        hint_keys: None,
        group: Group::App,
        when: When::Always,
    },
    Binding {
        keys: &[Code(K::Up), C('k')],
        action: Action::HelpScroll(-1),
        desc: "scroll up",
        hint: None,
        hint_keys: None,
        group: Group::App,
        when: When::Always,
    },
    Binding {
        keys: &[Ctrl('c')],
        action: Action::Quit,
        desc: "quit",
        hint: None,
        hint_keys: None,
        group: Group::App,
        when: When::Always,
    },
];

/// Is a binding with this condition live in this state?
pub fn holds(when: When, state: &State) -> bool {
    match when {
        When::Always => true,
        When::Model => state.source.is_model(),
        When::Computed => state.source.is_computed(),
        When::Script => state.script.is_some(),
        When::NoScript => state.script.is_none(),
        When::Layers => state.source.layers() > 1,
        When::Long => state.zoomable(),
    }
}

/// The action a binding gives for this key (digits carry the head, arrows the direction).
fn action_of(b: &Binding, key: &KeyEvent) -> Action {
    match (&b.action, key.code) {
        (Action::Head(_), KeyCode::Char(d @ '1'..='9')) => Action::Head(d as usize - '1' as usize),
        (Action::Move { .. }, code) => match code {
            KeyCode::Left => Action::Move { rows: 0, cols: -1 },
            KeyCode::Right => Action::Move { rows: 0, cols: 1 },
            KeyCode::Up => Action::Move { rows: -1, cols: 0 },
            KeyCode::Down => Action::Move { rows: 1, cols: 0 },
            _ => b.action.clone(),
        },
        _ => b.action.clone(),
    }
}

fn lookup(table: &[Binding], state: &State, key: &KeyEvent) -> Option<Action> {
    table
        .iter()
        .filter(|b| holds(b.when, state))
        .find(|b| b.keys.iter().any(|k| k.matches(key)))
        .map(|b| action_of(b, key))
}

/// What a key press means in the current state (None: nothing).
pub fn action_for(state: &State, key: &KeyEvent) -> Option<Action> {
    if key.kind == KeyEventKind::Release {
        return None;
    }
    match &state.overlay {
        Overlay::Edit(_) => lookup(EDIT_BINDINGS, state, key).or(match key.code {
            KeyCode::Char(c)
                if !key
                    .modifiers
                    .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT) =>
            {
                Some(Action::Edit(EditAction::Insert(c)))
            }
            _ => None,
        }),
        Overlay::Help { .. } => lookup(HELP_BINDINGS, state, key),
        // Esc stops the model running again, a decoding or a view's sweep while it works.
        Overlay::None if key.code == KeyCode::Esc && working(state) => Some(Action::CancelWork),
        Overlay::None => lookup(views::current(state).commands(), state, key)
            .or_else(|| lookup(BINDINGS, state, key)),
    }
}

/// Does the app wait for the model running again, a decoding, what the model or
/// position view derive from the model, or the patch view's sweep (which Esc stops)?
pub fn working(state: &State) -> bool {
    state.rerun.is_some()
        || views::decode::real::wanted(state).is_some()
        || views::model::wanted(state).is_some()
        || views::position::real::wanted(state).is_some()
        || views::patch::wanted(state).is_some()
}

/// Key label of a binding: all its keys joined by '/', arrows merged.
pub fn keys_label(b: &Binding, g: &Glyphs) -> String {
    let labels: Vec<String> = b.keys.iter().map(|k| k.label(g)).collect();
    if labels.len() == 4 && b.keys[0] == Code(K::Left) {
        return if g.ascii {
            "arrows".into()
        } else {
            format!("{}{}{}{}", g.left, g.up, g.down, g.right)
        };
    }
    labels.join("/")
}

/// The bindings live now, for the hint bar: (keys, short description), by priority.
pub fn hints(state: &State) -> Vec<(String, &'static str)> {
    let g = &state.glyphs;
    let table: &[Binding] = match state.overlay {
        Overlay::Edit(_) => EDIT_BINDINGS,
        Overlay::Help { .. } => HELP_BINDINGS,
        Overlay::None => BINDINGS,
    };
    let view_keys: &[Binding] = match state.overlay {
        Overlay::None => views::current(state).commands(),
        _ => &[],
    };
    // Priority: moving around first, then the view's own keys, then the rest; help and
    // quit come last (the bar drops entries before them when it is short of room).
    let (app, rest): (Vec<&Binding>, Vec<&Binding>) =
        table.iter().partition(|b| b.group == Group::App);
    let (nav, model): (Vec<&Binding>, Vec<&Binding>) = rest
        .into_iter()
        .partition(|b| matches!(b.group, Group::Move | Group::Steps | Group::Views));
    nav.into_iter()
        .chain(view_keys)
        .chain(model)
        .chain(app)
        .filter(|b| b.hint.is_some() && holds(b.when, state))
        .map(|b| {
            let keys = b.hint_keys.map_or_else(|| keys_label(b, g), str::to_string);
            (keys, b.hint.unwrap_or_default())
        })
        .collect()
}
