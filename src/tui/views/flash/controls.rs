//! The flash view's controls and their handling inside `update`: the tile being shown
//! (the cell cursor, in tile coordinates), play and pause, speed, Br, Bc and the loop
//! order. Pure like the rest of `update`: time arrives as `Action::Tick`, and a new
//! block size or loop order reruns the instrumented kernel through the engine.

use super::lab::{FlashLab, LabKey, default_block, fit_blocks};
use super::settings::TILE_RATES;
use crate::engine::flash::LoopOrder;
use crate::scene::FlashPass;
use crate::tui::action::FlashAction;
use crate::tui::context::{Context, StatusKind};
use crate::tui::view_kind::ViewKind;

/// Block sizes step by one up to this, then double (and halve back down).
const FINE_STEPS_UP_TO: usize = 8;

/// The lab, or why there is none.
#[derive(Debug)]
pub struct FlashStore {
    pub key: LabKey,
    pub lab: Result<Box<FlashLab>, String>,
}

pub fn lab(state: &Context) -> Option<&FlashLab> {
    state
        .views
        .get::<FlashStore>(ViewKind::Flash)
        .and_then(|s| s.lab.as_deref().ok())
}

fn lab_mut(state: &mut Context) -> Option<&mut FlashLab> {
    state
        .views
        .get_mut::<FlashStore>(ViewKind::Flash)
        .and_then(|s| s.lab.as_deref_mut().ok())
}

/// The key the lab should have now, with the blocks actually used.
fn wanted_key(state: &Context) -> LabKey {
    let sh = state.pipeline.shape;
    let c = state.flash;
    let br = c.br.unwrap_or_else(|| default_block(sh.n_q));
    let bc = c.bc.unwrap_or_else(|| default_block(sh.n_k));
    let (br, bc) = fit_blocks(sh.n_q, sh.n_k, sh.dv, br, bc);
    LabKey {
        config: state.pipeline.config.clone(),
        n_q: sh.n_q,
        n_k: sh.n_k,
        head: state.head,
        br,
        bc,
        order: c.order,
        pass: c.pass,
    }
}

/// Build the lab if it is missing or was built for other inputs; true if it changed.
pub fn ensure_lab(state: &mut Context) -> bool {
    let key = wanted_key(state);
    if let Some(store) = state.views.get::<FlashStore>(ViewKind::Flash)
        && store.key == key
    {
        return false;
    }
    let old = state.views.get::<FlashStore>(ViewKind::Flash);
    let old_blocks = old.map(|s| (s.key.br, s.key.bc));
    let tiles_seen = old
        .and_then(|s| s.lab.as_ref().ok())
        .map(|l| l.tiles_seen.clone())
        .unwrap_or_default();
    let lab = FlashLab::build(
        &state.pipeline,
        key.head,
        key.br,
        key.bc,
        key.order,
        key.pass,
    )
    .map(|mut l| {
        l.tiles_seen = tiles_seen;
        Box::new(l)
    })
    .map_err(|e| e.to_string());
    // Keep the same rows and keys in view when the blocks change size.
    if let (Some((br0, bc0)), Ok(_)) = (old_blocks, &lab)
        && (br0, bc0) != (key.br, key.bc)
    {
        let (i, j) = state.cursor;
        state.cursor = (i * br0 / key.br, j * bc0 / key.bc);
    }
    state.views.set(ViewKind::Flash, FlashStore { key, lab });
    true
}

/// The view opens, the pipeline changes or a script step arrives: rebuild what is stale
/// and move to the first tile a script highlights.
pub fn refresh(state: &mut Context) {
    ensure_lab(state);
    let tiles = state.tiles.clone();
    let Some(lab) = lab_mut(state) else {
        state.flash.playing = false;
        return;
    };
    if lab.tiles_seen != tiles {
        lab.tiles_seen = tiles.clone();
        if let Some(&(i, j)) = tiles.first() {
            let t = (i.min(lab.tr() - 1), j.min(lab.tc() - 1));
            state.cursor = t;
        }
    }
}

/// The tile shown: the cursor, clamped to the grid.
pub fn current_tile(state: &Context, lab: &FlashLab) -> (usize, usize) {
    (
        state.cursor.0.min(lab.tr() - 1),
        state.cursor.1.min(lab.tc() - 1),
    )
}

fn go_to(state: &mut Context, k: usize) {
    if let Some(lab) = lab(state) {
        state.cursor = lab.tile_at(k);
    }
}

fn grow(b: usize, n: usize) -> usize {
    let next = if b < FINE_STEPS_UP_TO { b + 1 } else { b * 2 };
    next.min(n)
}

fn shrink(b: usize) -> usize {
    if b > FINE_STEPS_UP_TO {
        (b / 2).max(FINE_STEPS_UP_TO)
    } else {
        b.saturating_sub(1).max(1)
    }
}

/// Change Br (`rows`) or Bc and rerun; say so, and say when a limit held it back.
fn resize_blocks(state: &mut Context, rows: bool, up: bool) {
    let Some(l) = lab(state) else { return };
    let (n, now) = if rows {
        (l.trace.n_q, l.key.br)
    } else {
        (l.trace.n_k, l.key.bc)
    };
    let asked = if up { grow(now, n) } else { shrink(now) };
    let name = if rows { "Br" } else { "Bc" };
    if asked == now {
        let why = if up {
            format!("{name} = {now} already spans all {n}")
        } else {
            format!("{name} = 1 is the smallest block")
        };
        state.set_status(StatusKind::Info, why);
        return;
    }
    if rows {
        state.flash.br = Some(asked);
    } else {
        state.flash.bc = Some(asked);
    }
    ensure_lab(state);
    if let Some(l) = lab(state) {
        let grid = (l.tr(), l.tc());
        state.clamp_cursor(grid);
    }
    let Some(lab) = lab(state) else {
        return;
    };
    let got = if rows { lab.key.br } else { lab.key.bc };
    let (tr, tc) = (lab.tr(), lab.tc());
    if got != asked {
        state.set_status(
            StatusKind::Warn,
            format!(
                "{name} = {asked} would make too many tiles to record; {name} = {got} ({tr} x {tc} tiles)"
            ),
        );
    } else {
        state.set_status(
            StatusKind::Info,
            format!("{name} = {got}: {tr} x {tc} tiles"),
        );
    }
}

/// Handle one of the flash view's actions.
pub fn update(state: &mut Context, action: FlashAction) {
    ensure_lab(state);
    let Some(lab) = lab(state) else {
        let why = state
            .views
            .get::<FlashStore>(ViewKind::Flash)
            .and_then(|s| s.lab.as_ref().err().cloned())
            .unwrap_or_else(|| "the flash view has nothing to run".into());
        state.set_status(StatusKind::Warn, why);
        return;
    };
    let last = lab.tiles() - 1;
    let k = lab.index_of(current_tile(state, lab));
    let backward_shown = lab.backward.is_some();
    match action {
        FlashAction::NextTile | FlashAction::PrevTile => {
            state.flash.playing = false;
            let next = if action == FlashAction::NextTile {
                k + 1
            } else {
                k.wrapping_sub(1)
            };
            if next > last {
                let edge = if action == FlashAction::NextTile && backward_shown {
                    "this is the last tile: dQ, dK and dV are final (g goes back to the first)"
                } else if action == FlashAction::NextTile {
                    "this is the last tile: O is final (g goes back to the first)"
                } else {
                    "this is the first tile"
                };
                state.set_status(StatusKind::Info, edge);
            } else {
                go_to(state, next);
            }
        }
        FlashAction::FirstTile => {
            state.flash.playing = false;
            go_to(state, 0);
        }
        FlashAction::LastTile => {
            state.flash.playing = false;
            go_to(state, last);
        }
        FlashAction::PlayPause => {
            let c = &mut state.flash;
            if c.playing {
                c.playing = false;
            } else {
                c.playing = true;
                c.elapsed_ms = 0.0;
                if k == last {
                    go_to(state, 0);
                }
            }
        }
        FlashAction::Faster | FlashAction::Slower => {
            let c = &mut state.flash;
            c.rate = if action == FlashAction::Faster {
                (c.rate + 1).min(TILE_RATES.len() - 1)
            } else {
                c.rate.saturating_sub(1)
            };
            let rate = c.tiles_per_second();
            state.set_status(StatusKind::Info, format!("{rate} tiles per second"));
        }
        FlashAction::MoreRows => resize_blocks(state, true, true),
        FlashAction::FewerRows => resize_blocks(state, true, false),
        FlashAction::MoreKeys => resize_blocks(state, false, true),
        FlashAction::FewerKeys => resize_blocks(state, false, false),
        FlashAction::ToggleOrder if state.flash.pass == FlashPass::Backward => {
            state.set_status(
                StatusKind::Info,
                "the backward has one loop order: key blocks outer, so dK_j and dV_j stay on chip (d goes back to the forward)",
            );
        }
        FlashAction::ToggleOrder => {
            state.flash.order = match state.flash.order {
                LoopOrder::Fa1 => LoopOrder::Fa2,
                LoopOrder::Fa2 => LoopOrder::Fa1,
            };
            ensure_lab(state);
            let what = match state.flash.order {
                LoopOrder::Fa1 => {
                    "FlashAttention-1 order: key/value blocks outer, query blocks inner (Dao et al. 2022)"
                }
                LoopOrder::Fa2 => {
                    "FlashAttention-2 order: query blocks outer, key/value blocks inner (Dao 2023)"
                }
            };
            state.set_status(StatusKind::Info, what);
        }
        FlashAction::TogglePass => {
            let backward = state.flash.pass == FlashPass::Forward;
            state.flash.pass = if backward {
                FlashPass::Backward
            } else {
                FlashPass::Forward
            };
            state.flash.playing = false;
            ensure_lab(state);
            // Start the other pass at its first tile, or at the end if this one was.
            if let Some(l) = self::lab(state) {
                let at = if k == last { l.tiles() - 1 } else { 0 };
                state.cursor = l.tile_at(at);
            }
            let what = if backward {
                "backward pass: key blocks outer; per tile P = exp(S - L) recomputed, dS = P (dP - D), dV_j, dK_j summed over query blocks, dQ_i updated"
            } else {
                "forward pass: the online softmax, tile by tile"
            };
            state.set_status(StatusKind::Info, what);
        }
    }
}

/// Time passes: while playing in the flash view, move on one tile per interval and stop
/// at the last.
pub fn tick(state: &mut Context, ms: u64) {
    if state.view != ViewKind::Flash || !state.flash.playing {
        return;
    }
    let Some(l) = lab(state) else {
        state.flash.playing = false;
        return;
    };
    let last = l.tiles() - 1;
    let mut k = l.index_of(current_tile(state, l));
    let interval = state.flash.interval_ms();
    let mut c = state.flash;
    c.elapsed_ms += ms as f64;
    while c.elapsed_ms >= interval {
        if k >= last {
            break;
        }
        c.elapsed_ms -= interval;
        k += 1;
    }
    if k >= last {
        c.playing = false;
        c.elapsed_ms = 0.0;
    }
    state.cursor = l.tile_at(k);
    state.flash = c;
}

/// Milliseconds until the animation shows the next tile, if it is playing.
pub fn next_tile_in_ms(state: &Context) -> Option<u64> {
    if state.view != ViewKind::Flash || !state.flash.playing {
        return None;
    }
    let left = state.flash.interval_ms() - state.flash.elapsed_ms;
    Some(left.max(0.0).ceil() as u64)
}

#[cfg(test)]
mod tests {
    use super::{grow, shrink};

    #[test]
    fn block_sizes_step_finely_then_double() {
        assert_eq!(grow(1, 7), 2);
        assert_eq!(grow(7, 7), 7);
        assert_eq!(grow(8, 100), 16);
        assert_eq!(grow(64, 100), 100);
        assert_eq!(shrink(16), 8);
        assert_eq!(shrink(100), 50);
        assert_eq!(shrink(3), 2);
        assert_eq!(shrink(1), 1);
    }
}
