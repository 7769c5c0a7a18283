//! The flash view: its actions through the pure `update`, its keys in the shared key
//! table, snapshots at 80x24 and 120x40, and what the Done-when of the FlashAttention
//! issue asks of the app: the output converges tile by tile to the reference, the
//! tiles a mask skips are shown as skipped, and each algorithm's HBM traffic is counted.
//!
//! The numbers on screen come from the f32 kernel, whose last bits may differ between
//! SIMD tiers, so the snapshots run under one tier (scalar, set for this test binary)
//! and print numbers with at most 4 decimals. Accept changes with
//! `INSTA_UPDATE=always cargo test --test flash forward::` after checking them.

use attnviz::cli::{Lang, ThemeName};
use attnviz::engine::config::{MaskKind, PeKind};
use attnviz::engine::flash::LoopOrder;
use attnviz::engine::mask::Mask;
use attnviz::engine::pipeline::{ModelConfig, StageId};
use attnviz::tui::action::FlashAction as F;
use attnviz::tui::keymap::{action_for, hints};
use attnviz::tui::views::flash::{FlashLab, TILE_RATES, lab};
use attnviz::tui::{Action, AppOptions, ScriptStep, State, ViewKind, draw, update};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// Every state of this binary runs the kernel's scalar tier, so snapshots do not depend
/// on the machine's SIMD.
fn pin_tier() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: set once, before any test of this binary reads the environment.
        unsafe { std::env::set_var(attnviz::kernel::SIMD_ENV, "scalar") };
    });
}

fn options(ascii: bool, theme: Option<ThemeName>) -> AppOptions {
    AppOptions::headless(Lang::En, theme, ascii, "flash test")
}

fn lesson_with(f: impl FnOnce(&mut ModelConfig), ascii: bool, theme: Option<ThemeName>) -> State {
    pin_tier();
    let mut c = ModelConfig::example();
    f(&mut c);
    let mut s = State::for_model(c, options(ascii, theme)).expect("the lesson builds");
    update(&mut s, Action::SetView(ViewKind::Flash));
    s
}

fn causal() -> State {
    lesson_with(|c| c.mask = MaskKind::Causal, false, None)
}

fn the_lab(s: &State) -> &FlashLab {
    lab(s).expect("the flash view built its lab")
}

fn press(s: &mut State, code: KeyCode) {
    let mods = match code {
        KeyCode::Char(c) if c.is_ascii_uppercase() => KeyModifiers::SHIFT,
        _ => KeyModifiers::NONE,
    };
    if let Some(a) = action_for(s, &KeyEvent::new(code, mods)) {
        update(s, a);
    }
}

fn screen(s: &mut State, cols: u16, rows: u16) -> String {
    update(s, Action::Resize { cols, rows });
    let mut term = Terminal::new(TestBackend::new(cols, rows)).unwrap();
    term.draw(|f| draw(s, f)).unwrap();
    term.backend().to_string()
}

fn lines(s: &mut State, cols: u16, rows: u16) -> Vec<String> {
    update(s, Action::Resize { cols, rows });
    let mut term = Terminal::new(TestBackend::new(cols, rows)).unwrap();
    term.draw(|f| draw(s, f)).unwrap();
    let buf = term.backend().buffer();
    (0..rows)
        .map(|y| {
            (0..cols)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect()
        })
        .collect()
}

/// Position of the current tile in the loop order.
fn position(s: &State) -> usize {
    the_lab(s).index_of(s.cursor)
}

// ---- actions through update ---------------------------------------------------------

#[test]
fn tiles_step_in_the_loop_order_of_each_algorithm() {
    let mut s = causal();
    let l = the_lab(&s);
    assert_eq!((l.tr(), l.tc(), l.key.br, l.key.bc), (4, 4, 2, 2));
    assert_eq!(s.cursor, (0, 0));
    // FlashAttention-2: along a row of tiles (key blocks), then the next query block.
    update(&mut s, Action::Flash(F::NextTile));
    assert_eq!(s.cursor, (0, 1));
    for _ in 0..3 {
        update(&mut s, Action::Flash(F::NextTile));
    }
    assert_eq!(s.cursor, (1, 0));
    update(&mut s, Action::Flash(F::PrevTile));
    assert_eq!(s.cursor, (0, 3));
    update(&mut s, Action::Flash(F::LastTile));
    assert_eq!(s.cursor, (3, 3));
    update(&mut s, Action::Flash(F::NextTile));
    assert_eq!(s.cursor, (3, 3), "no tile after the last");
    assert!(
        s.status
            .as_ref()
            .is_some_and(|st| st.text.contains("last tile"))
    );
    update(&mut s, Action::Flash(F::FirstTile));
    assert_eq!(s.cursor, (0, 0));
    // FlashAttention-1: down a column of tiles (query blocks), then the next key block.
    update(&mut s, Action::Flash(F::ToggleOrder));
    assert_eq!(s.flash.order, LoopOrder::Fa1);
    assert_eq!(the_lab(&s).key.order, LoopOrder::Fa1);
    update(&mut s, Action::Flash(F::NextTile));
    assert_eq!(s.cursor, (1, 0));
    let l = the_lab(&s);
    let order: Vec<(usize, usize)> = (0..l.tiles()).map(|k| l.tile_at(k)).collect();
    assert_eq!(&order[..5], &[(0, 0), (1, 0), (2, 0), (3, 0), (0, 1)]);
    update(&mut s, Action::Flash(F::ToggleOrder));
    assert_eq!(the_lab(&s).key.order, LoopOrder::Fa2);
}

#[test]
fn play_advances_with_virtual_time_and_stops_at_the_last_tile() {
    let mut s = causal();
    assert_eq!(s.next_change_in_ms(), None);
    update(&mut s, Action::Flash(F::PlayPause));
    assert!(s.flash.playing);
    let rate = s.flash.tiles_per_second();
    assert_eq!(rate, 2.0);
    assert_eq!(s.next_change_in_ms(), Some(500));
    update(&mut s, Action::Tick { ms: 499 });
    assert_eq!(position(&s), 0);
    update(&mut s, Action::Tick { ms: 1 });
    assert_eq!(position(&s), 1);
    update(&mut s, Action::Tick { ms: 1500 });
    assert_eq!(position(&s), 4);
    // Faster: twice the tiles per second.
    update(&mut s, Action::Flash(F::Faster));
    assert_eq!(s.flash.tiles_per_second(), 4.0);
    update(&mut s, Action::Tick { ms: 500 });
    assert_eq!(position(&s), 6);
    update(&mut s, Action::Flash(F::Slower));
    update(&mut s, Action::Flash(F::Slower));
    assert_eq!(s.flash.tiles_per_second(), 1.0);
    // A long wait ends on the last tile, and playback stops there.
    update(&mut s, Action::Tick { ms: 60_000 });
    assert_eq!(position(&s), 15);
    assert!(!s.flash.playing);
    assert_eq!(s.next_change_in_ms(), None);
    // Play again from the end starts over.
    update(&mut s, Action::Flash(F::PlayPause));
    assert!(s.flash.playing && position(&s) == 0);
    update(&mut s, Action::Flash(F::PlayPause));
    assert!(!s.flash.playing);
    // Ticks do nothing while paused, or in another view.
    update(&mut s, Action::Tick { ms: 5000 });
    assert_eq!(position(&s), 0);
    update(&mut s, Action::Flash(F::PlayPause));
    update(&mut s, Action::SetView(ViewKind::Pipeline));
    assert_eq!(s.next_change_in_ms(), None);
    update(&mut s, Action::Tick { ms: 5000 });
    update(&mut s, Action::SetView(ViewKind::Flash));
    assert_eq!(position(&s), 0);
    // The speed stays within its table.
    for _ in 0..20 {
        update(&mut s, Action::Flash(F::Faster));
    }
    assert_eq!(s.flash.tiles_per_second(), *TILE_RATES.last().unwrap());
}

#[test]
fn a_manual_step_pauses_playback() {
    let mut s = causal();
    update(&mut s, Action::Flash(F::PlayPause));
    update(&mut s, Action::Flash(F::NextTile));
    assert!(!s.flash.playing);
    assert_eq!(position(&s), 1);
}

#[test]
fn br_and_bc_change_the_tiles_and_keep_the_place() {
    let mut s = causal();
    for _ in 0..5 {
        update(&mut s, Action::Flash(F::NextTile));
    }
    assert_eq!(s.cursor, (1, 1));
    update(&mut s, Action::Flash(F::MoreRows));
    let l = the_lab(&s);
    assert_eq!((l.key.br, l.key.bc, l.tr(), l.tc()), (3, 2, 3, 4));
    // Row 2 (the old block 1's first row) is in the new block 0.
    assert_eq!(s.cursor, (0, 1));
    update(&mut s, Action::Flash(F::FewerKeys));
    let l = the_lab(&s);
    assert_eq!((l.key.bc, l.tc()), (1, 7));
    assert_eq!(s.cursor, (0, 2));
    for _ in 0..10 {
        update(&mut s, Action::Flash(F::FewerKeys));
    }
    assert_eq!(the_lab(&s).key.bc, 1);
    assert!(
        s.status
            .as_ref()
            .is_some_and(|st| st.text.contains("smallest"))
    );
    for _ in 0..10 {
        update(&mut s, Action::Flash(F::MoreRows));
    }
    let l = the_lab(&s);
    assert_eq!((l.key.br, l.tr()), (7, 1), "Br stops at N");
    update(&mut s, Action::Flash(F::FewerRows));
    assert_eq!(the_lab(&s).key.br, 6);
    update(&mut s, Action::Flash(F::MoreKeys));
    assert_eq!(the_lab(&s).key.bc, 2);
}

#[test]
fn keys_come_from_the_shared_table_and_show_in_help_and_hints() {
    let mut s = causal();
    press(&mut s, KeyCode::Char('.'));
    assert_eq!(s.cursor, (0, 1));
    press(&mut s, KeyCode::Char(','));
    assert_eq!(s.cursor, (0, 0));
    press(&mut s, KeyCode::Char(' '));
    assert!(s.flash.playing);
    press(&mut s, KeyCode::Char(' '));
    assert!(!s.flash.playing);
    press(&mut s, KeyCode::Char('f'));
    assert_eq!(s.flash.tiles_per_second(), 4.0);
    press(&mut s, KeyCode::Char('F'));
    assert_eq!(s.flash.tiles_per_second(), 2.0);
    press(&mut s, KeyCode::Char('b'));
    assert_eq!(the_lab(&s).key.br, 3);
    press(&mut s, KeyCode::Char('B'));
    press(&mut s, KeyCode::Char('c'));
    assert_eq!(the_lab(&s).key.bc, 3);
    press(&mut s, KeyCode::Char('C'));
    press(&mut s, KeyCode::Char('a'));
    assert_eq!(s.flash.order, LoopOrder::Fa1);
    press(&mut s, KeyCode::Char('G'));
    assert_eq!(position(&s), the_lab(&s).tiles() - 1);
    press(&mut s, KeyCode::Char('g'));
    assert_eq!(position(&s), 0);
    // The arrows pick any tile, and so does a click on the grid (its first tile row is
    // line 6 of the screen: header, blank line, status line, column labels).
    press(&mut s, KeyCode::Down);
    press(&mut s, KeyCode::Right);
    assert_eq!(s.cursor, (1, 1));
    update(
        &mut s,
        Action::Resize {
            cols: 120,
            rows: 40,
        },
    );
    update(&mut s, Action::Click { x: 7, y: 8 });
    assert_eq!(s.cursor, (2, 1));
    let h: Vec<String> = hints(&s)
        .into_iter()
        .map(|(k, d)| format!("{k} {d}"))
        .collect();
    for want in [
        ",/. tile",
        "Space play",
        "f/F speed",
        "a FA1/FA2",
        "b/B Br",
        "c/C Bc",
    ] {
        assert!(h.iter().any(|x| x == want), "{want} not in {h:?}");
    }
    update(&mut s, Action::ToggleHelp);
    let help = screen(&mut s, 120, 60);
    for want in [
        "This view (flash)",
        "play / pause the tiles",
        "keys per block (Bc)",
    ] {
        assert!(help.contains(want), "{want} not in the help:\n{help}");
    }
}

#[test]
fn in_a_lesson_space_stays_the_lessons_and_tiles_step_with_the_period() {
    pin_tier();
    let steps = vec![
        ScriptStep {
            view: Some(ViewKind::Flash),
            narration: "one".into(),
            ..Default::default()
        },
        ScriptStep {
            narration: "two".into(),
            ..Default::default()
        },
    ];
    let mut c = ModelConfig::example();
    c.mask = MaskKind::Causal;
    let mut s = State::for_model(c, options(false, None))
        .unwrap()
        .with_script(steps, false, 1.0);
    assert_eq!(s.view, ViewKind::Flash);
    press(&mut s, KeyCode::Char(' '));
    assert!(s.script.as_ref().unwrap().playing, "Space plays the lesson");
    assert!(!s.flash.playing);
    press(&mut s, KeyCode::Char('.'));
    assert_eq!(s.cursor, (0, 1));
}

// ---- the view follows the lesson --------------------------------------------------------

#[test]
fn the_tiles_follow_mask_head_and_position_encoding() {
    let mut s = lesson_with(|_| {}, false, None);
    let none = the_lab(&s).classes.clone();
    assert!(
        none.iter()
            .all(|c| *c == attnviz::engine::mask::TileClass::Full)
    );
    update(&mut s, Action::CycleMask);
    assert_eq!(s.pipeline.config.mask, MaskKind::Causal);
    let l = the_lab(&s);
    assert_eq!(l.key.config.mask, MaskKind::Causal);
    let skipped = l.trace.events.iter().filter(|e| e.skipped).count();
    assert_eq!(
        skipped, 6,
        "a causal 4 x 4 grid skips the 6 tiles above the diagonal"
    );
    // Another head: its own q (the kernel's input is the pipeline's head).
    let q0 = the_lab(&s).q.clone();
    update(&mut s, Action::HeadNext);
    let l = the_lab(&s);
    assert_eq!(l.head, 1);
    assert_ne!(l.q, q0);
    let rope = s
        .pipeline
        .stage(StageId::Rope)
        .map(|st| st.matrices[1].data.clone())
        .unwrap();
    assert_eq!(l.q, rope);
    // RoPE rotates q and k before the kernel sees them.
    let mut s = lesson_with(|c| c.pe = PeKind::Rope { base: 10000.0 }, false, None);
    let l = the_lab(&s);
    let split = s.pipeline.stage(StageId::SplitHeads).unwrap().matrices[0]
        .data
        .clone();
    let rotated = s.pipeline.stage(StageId::Rope).unwrap().matrices[0]
        .data
        .clone();
    assert_ne!(split, rotated);
    assert_eq!(l.q, rotated);
    assert!(l.final_distance() < 1e-5);
    // Scale off: the run uses scale 1 like the pipeline.
    update(&mut s, Action::ToggleScale);
    assert_eq!(the_lab(&s).trace.scale, 1.0);
    assert!(the_lab(&s).final_distance() < 1e-5);
}

#[test]
fn scripted_tiles_are_highlighted_and_shown() {
    let mut s = lesson_with(|c| c.mask = MaskKind::Causal, true, Some(ThemeName::Mono));
    let step = ScriptStep {
        view: Some(ViewKind::Flash),
        tiles: vec![(2, 1), (3, 3)],
        narration: "these two".into(),
        ..Default::default()
    };
    update(&mut s, Action::ApplyStep(Box::new(step)));
    assert_eq!(s.cursor, (2, 1), "the first scripted tile is the one shown");
    let text = lines(&mut s, 120, 40);
    // Grid rows: "Q2" holds the current tile, "Q3" the bracketed highlight.
    let q2 = text.iter().find(|l| l.starts_with("Q2")).unwrap();
    let q3 = text.iter().find(|l| l.starts_with("Q3")).unwrap();
    assert!(q2.contains(">@<"), "{q2}");
    assert!(q3.contains("[.]"), "{q3}");
}

// ---- Done when: converges to the reference, causal skips shown ------------------------

/// The reference output of one head, computed here independently from the pipeline's
/// q, k, v after RoPE, with plain loops: softmax(scale q k^T + mask) v.
fn independent_reference(s: &State) -> ndarray::Array2<f64> {
    let l = the_lab(s);
    let (n_q, n_k) = (l.q.nrows(), l.k.nrows());
    let mask = Mask::resolve(s.pipeline.mask.kind(), 1, 1, n_q, n_k).unwrap();
    let scale = s.pipeline.scale.unwrap_or(1.0);
    let slope = s.pipeline.alibi_slopes.as_ref().map_or(0.0, |m| m[l.head]);
    let mut out = ndarray::Array2::zeros((n_q, l.v.ncols()));
    for i in 0..n_q {
        let sc: Vec<f64> = (0..n_k)
            .map(|j| {
                if mask.is_masked(0, 0, i, j) {
                    return f64::NEG_INFINITY;
                }
                let dist = (mask.query_pos(i) - j as isize).unsigned_abs() as f64;
                l.q.row(i).dot(&l.k.row(j)) * scale - slope * dist
            })
            .collect();
        let m = sc.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if m == f64::NEG_INFINITY {
            continue;
        }
        let w: Vec<f64> = sc.iter().map(|x| (x - m).exp()).collect();
        let z: f64 = w.iter().sum();
        for (j, wj) in w.iter().enumerate() {
            for c in 0..l.v.ncols() {
                out[[i, c]] += wj / z * l.v[[j, c]];
            }
        }
    }
    out
}

#[test]
fn after_the_last_tile_the_views_output_is_the_reference() {
    let configs: [fn(&mut ModelConfig); 6] = [
        |c| c.mask = MaskKind::Causal,
        |_| {},
        |c| c.mask = MaskKind::Window(3),
        |c| {
            c.mask = MaskKind::BigBird(attnviz::engine::config::BIGBIRD_DEFAULT);
            c.tokens = ModelConfig::tokens_from_text(
                "one two three four five six seven eight nine ten eleven twelve thirteen",
            );
        },
        |c| {
            c.pe = PeKind::Alibi;
            c.mask = MaskKind::Causal;
        },
        |c| {
            c.heads = 4;
            c.kv_heads = 2;
            c.pe = PeKind::Rope { base: 10000.0 };
            c.mask = MaskKind::Padding(vec![5]);
        },
    ];
    for (n, f) in configs.iter().enumerate() {
        for order in [F::NextTile, F::ToggleOrder] {
            let mut s = lesson_with(f, false, None);
            if order == F::ToggleOrder {
                update(&mut s, Action::Flash(F::ToggleOrder));
            }
            let last_head = s.heads() - 1;
            update(&mut s, Action::Head(last_head));
            update(&mut s, Action::Flash(F::LastTile));
            let l = the_lab(&s);
            let k = position(&s);
            assert_eq!(k + 1, l.tiles());
            let (o, done) = l.output_after(k);
            assert!(done.iter().all(|d| *d), "config {n}: every row final");
            let reference = independent_reference(&s);
            let pipeline_out =
                &s.pipeline.stage(StageId::WeightedSum).unwrap().matrices[l.head].data;
            for ((a, b), c) in o.iter().zip(reference.iter()).zip(pipeline_out.iter()) {
                assert!(
                    (a - b).abs() < 1e-5,
                    "config {n}: view {a} vs reference {b}"
                );
                assert!(
                    (b - c).abs() < 1e-12,
                    "config {n}: reference {b} vs pipeline {c}"
                );
            }
            // The view's O is exactly the kernel's output (f32, printed through f64).
            for (row, want) in o.rows().into_iter().zip(&l.trace.out) {
                for (a, b) in row.iter().zip(want) {
                    assert!(
                        (a - b).abs() <= 1e-6 * b.abs().max(1.0),
                        "config {n}: {a} vs kernel {b}"
                    );
                }
            }
            assert!(l.final_distance() < 1e-5);
            // And the screen says so.
            let text = screen(&mut s, 120, 40);
            assert!(text.contains("last tile done: all"), "config {n}:\n{text}");
        }
    }
}

#[test]
fn the_output_converges_tile_by_tile() {
    let mut s = lesson_with(|_| {}, false, None);
    // Without a mask every tile of row block 0 adds keys: the distance falls to f32
    // rounding only at the last key block.
    let tc = the_lab(&s).tc();
    let mut d = Vec::new();
    for _ in 0..tc {
        d.push(the_lab(&s).block_distance(position(&s)));
        update(&mut s, Action::Flash(F::NextTile));
    }
    assert!(d[0] > 1e-3, "{d:?}");
    assert!(d[tc - 1] < 1e-5, "{d:?}");
    // Each tile's m and l are an online softmax over the keys seen so far (of the
    // pipeline's f64 scores), and its S block is the kernel's own.
    let l = the_lab(&s);
    let scores = &s.pipeline.stage(StageId::Mask).unwrap().matrices[l.head].data;
    let ev = l.event(1);
    let keys = l.cols(1).end;
    let block = l.s_block(1).expect("a computed tile has its scores");
    for (r, row) in ev.rows.clone().enumerate() {
        for (c, j) in l.cols(1).enumerate() {
            assert!((block[[r, c]] - scores[[row, j]]).abs() < 1e-5);
        }
        let seen: Vec<f64> = (0..keys).map(|j| scores[[row, j]]).collect();
        let m = seen.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = seen.iter().map(|x| (x - m).exp()).sum();
        assert!(
            (ev.m[r] - m).abs() < 1e-5 && (ev.l[r] - sum).abs() < 1e-4,
            "row {row}"
        );
        let m_old = l.before(1).unwrap().m[r];
        assert!((ev.alpha[r] - (m_old - ev.m[r]).exp()).abs() < 1e-5);
    }
}

/// Tile (i, j) of a causal square problem is empty when its first key comes after its
/// last query.
fn causal_empty(i: usize, j: usize, br: usize, bc: usize, n: usize) -> bool {
    j * bc > ((i + 1) * br).min(n) - 1
}

#[test]
fn causal_skips_are_the_tiles_the_mask_empties_and_read_as_skipped() {
    for (ascii, glyph) in [(true, "x"), (false, "×")] {
        let mut s = lesson_with(|c| c.mask = MaskKind::Causal, ascii, Some(ThemeName::Mono));
        update(&mut s, Action::Flash(F::FewerRows)); // Br 1: 7 x 4 tiles
        let l = the_lab(&s);
        let (tr, tc, br, bc, n) = (l.tr(), l.tc(), l.key.br, l.key.bc, l.trace.n_q);
        assert_eq!((tr, tc), (7, 4));
        for e in &l.trace.events {
            assert_eq!(
                e.skipped,
                causal_empty(e.q_block, e.k_block, br, bc, n),
                "tile ({}, {})",
                e.q_block,
                e.k_block
            );
        }
        // On screen: the grid's rows "Q0".. show the skip glyph exactly at those tiles.
        update(&mut s, Action::Flash(F::LastTile));
        let text = lines(&mut s, 120, 40);
        let header = text
            .iter()
            .position(|l| l.trim_start().starts_with("K0"))
            .unwrap();
        let k_cols: Vec<usize> = (0..tc)
            .map(|j| text[header].find(&format!("K{j}")).unwrap())
            .collect();
        for i in 0..tr {
            let row = &text[header + 1 + i];
            assert!(row.starts_with(&format!("Q{i}")), "{row}");
            let chars: Vec<char> = row.chars().collect();
            for (j, &x) in k_cols.iter().enumerate() {
                // Column labels are centred over 3-column cells: the glyph sits under
                // the label's first or second character.
                let cell: String = chars[x.saturating_sub(1)..x + 3].iter().collect();
                assert_eq!(
                    cell.contains(glyph),
                    causal_empty(i, j, br, bc, n),
                    "tile ({i}, {j}) shows '{cell}' in '{row}'"
                );
            }
        }
    }
}

#[test]
fn traffic_counters_come_from_the_engine_walk() {
    let mut s = causal();
    let l = the_lab(&s);
    assert_eq!(l.fa2.dense.total(), l.report.flash2.accesses);
    assert_eq!(l.fa1.dense.total(), l.report.flash.accesses);
    assert_eq!(l.fa1.standard.total(), l.report.standard.accesses);
    // After tile 6 of FA2 (Q0's row and two tiles of Q1), as DESIGN's lesson counts it:
    // Q0 + K0V0 (24), O0 + L0 written (10), Q1 + K0V0 (24), K1V1 (16).
    for _ in 0..5 {
        update(&mut s, Action::Flash(F::NextTile));
    }
    let text = screen(&mut s, 120, 40);
    assert_eq!(the_lab(&s).traffic().after[5].total(), 74);
    let fa2 = text.lines().find(|l| l.contains("FA2 (Dao 2023")).unwrap();
    assert!(
        fa2.contains(" 74 ") && fa2.contains(" 215 ") && fa2.contains(" 287 "),
        "{fa2}"
    );
    assert!(text.contains("Theta(N^2 d^2 / M) = 21.8"), "{text}");
    assert!(text.contains("Theta(N d + N^2) = 77"), "{text}");
}

#[test]
fn weights_from_a_file_explain_why_there_are_no_tiles() {
    pin_tier();
    let src = attnviz::tui::Source::Weights {
        tokens: vec![],
        layers: vec![ndarray::Array3::from_elem((1, 3, 3), 1.0 / 3.0)],
        layer: 0,
    };
    let mut s = State::new(src, options(false, None)).unwrap();
    update(&mut s, Action::SetView(ViewKind::Flash));
    assert!(lab(&s).is_none());
    let text = screen(&mut s, 80, 24);
    assert!(text.contains("q, k and v"), "{text}");
    update(&mut s, Action::Flash(F::NextTile));
    assert!(s.status.is_some());
}

// ---- snapshots ---------------------------------------------------------------------

#[test]
fn snapshots() {
    for (c, r) in [(80, 24), (120, 40)] {
        let mut s = causal();
        for _ in 0..5 {
            update(&mut s, Action::Flash(F::NextTile));
        }
        insta::assert_snapshot!(format!("flash_causal_tile6_{c}x{r}"), screen(&mut s, c, r));
    }
    let mut s = lesson_with(|_| {}, true, Some(ThemeName::Mono));
    update(&mut s, Action::Flash(F::ToggleOrder));
    update(&mut s, Action::Flash(F::LastTile));
    insta::assert_snapshot!("flash_fa1_last_ascii_120x40", screen(&mut s, 120, 40));
    let mut s = lesson_with(|c| c.mask = MaskKind::Window(3), false, None);
    update(&mut s, Action::Flash(F::FewerRows));
    update(&mut s, Action::Select { row: 5, col: 1 });
    insta::assert_snapshot!("flash_window_skipped_80x24", screen(&mut s, 80, 24));
}

#[test]
fn the_frame_bench_draws_the_flash_view() {
    // `bench --ui` times every view of the registry: the flash view is one of them, and
    // draws its tiles at the benchmark's 200 x 60.
    let names: Vec<&str> = attnviz::tui::views::VIEWS
        .iter()
        .map(|v| v.kind().name())
        .collect();
    assert!(names.contains(&"flash"), "{names:?}");
    let mut s = causal();
    let text = screen(
        &mut s,
        attnviz::tui::frame_bench::COLS,
        attnviz::tui::frame_bench::ROWS,
    );
    assert!(
        text.contains("tile 1/16") && text.contains("HBM <-> SRAM"),
        "{text}"
    );
}

// ---- a lesson step that plays the tiles ---------------------------------------------------

/// The flash-tiling lesson's animated step (from its scene file) through `update`: the
/// tiles move at the step's rate while the lesson plays, hold while it is paused, and
/// jumping to a later step leaves them where playing would have.
#[test]
fn a_lesson_step_plays_its_tiles_at_its_rate() {
    pin_tier();
    let scene = attnviz::scene::builtin("flash-tiling").unwrap();
    // An animated step followed by one that is not: the next step must start where the
    // animation ended.
    let k = (0..scene.steps.len() - 1)
        .find(|&k| scene.steps[k].animate.is_some() && scene.steps[k + 1].animate.is_none())
        .expect("flash-tiling animates a step before a still one");
    let a = scene.steps[k].animate.unwrap();
    let steps = attnviz::tui::script::lesson(&scene, Lang::En);
    let mut s = State::for_model(scene.toy().unwrap().clone(), options(false, None))
        .unwrap()
        .with_script(steps, true, 1.0);
    update(&mut s, Action::GotoStep(k));
    let tile = |s: &State| {
        let l = the_lab(s);
        l.index_of(s.cursor)
    };
    assert_eq!(tile(&s), a.from);
    assert_eq!(s.animation_rate, Some(a.rate));
    let step_ms = (1000.0 / a.rate) as u64;
    assert_eq!(s.next_change_in_ms(), Some(step_ms));
    update(&mut s, Action::Tick { ms: step_ms - 1 });
    assert_eq!(tile(&s), a.from);
    update(&mut s, Action::Tick { ms: 1 });
    assert_eq!(tile(&s), a.from + 1);
    // Paused, time moves no tile.
    update(&mut s, Action::PlayPause);
    update(&mut s, Action::Tick { ms: 10 * step_ms });
    assert_eq!(tile(&s), a.from + 1);
    update(&mut s, Action::PlayPause);
    update(&mut s, Action::Tick { ms: 100 * step_ms });
    assert!(s.script.as_ref().unwrap().index > k);
    // The next step starts where the animation ended, whether played or jumped to.
    let played = s.cursor;
    update(&mut s, Action::GotoStep(k + 1));
    assert_eq!(s.cursor, played);
    assert_eq!(tile(&s), a.to);
    assert_eq!(s.animation_rate, None);
}

/// A scene without `[flash]` is checked against the grid the app draws.
#[test]
fn the_scene_checker_and_the_app_choose_the_same_default_blocks() {
    for n in 1..=attnviz::scene::validate::MAX_TOKENS {
        assert_eq!(
            attnviz::scene::validate::default_flash_block(n),
            attnviz::tui::views::flash::default_block(n),
            "n = {n}"
        );
    }
}
