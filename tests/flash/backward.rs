//! The flash view's backward mode: `d` through the shared key table and the pure
//! `update`, the backward's tile order (key blocks outer) and causal skips, every number
//! of the mode from the kernel's own tiled backward checked against the f64 reference
//! backward and against the forward's softmax, its HBM traffic, the lesson step option
//! `pass`, and snapshots at 80x24 and 120x40.
//!
//! As in tui_flash.rs the kernel runs its scalar tier here, so the snapshots do not
//! depend on the machine's SIMD. Accept changes with
//! `INSTA_UPDATE=always cargo test --test flash backward::` after checking them.

use attnviz::cli::Lang;
use attnviz::engine::config::MaskKind;
use attnviz::engine::flash_backward::seeded_grad_out;
use attnviz::engine::mask::Mask;
use attnviz::engine::memory::TiledShape;
use attnviz::engine::memory_backward::{backward_traffic, standard_backward};
use attnviz::engine::pipeline::{ModelConfig, StageId};
use attnviz::engine::problem::{AttnSpec, ProblemShape};
use attnviz::engine::reference_backward;
use attnviz::scene::FlashPass;
use attnviz::tui::action::FlashAction as F;
use attnviz::tui::keymap::{action_for, hints};
use attnviz::tui::views::flash::{FlashLab, lab};
use attnviz::tui::{Action, AppOptions, State, ViewKind, draw, update};
use ndarray::{Array2, Array4};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

fn pin_tier() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: set once, before any test of this binary reads the environment.
        unsafe { std::env::set_var(attnviz::kernel::SIMD_ENV, "scalar") };
    });
}

fn options() -> AppOptions {
    AppOptions::headless(Lang::En, None, false, "flash backward test")
}

fn lesson_with(f: impl FnOnce(&mut ModelConfig)) -> State {
    pin_tier();
    let mut c = ModelConfig::example();
    f(&mut c);
    let mut s = State::for_model(c, options()).expect("the lesson builds");
    update(&mut s, Action::SetView(ViewKind::Flash));
    s
}

fn causal() -> State {
    lesson_with(|c| c.mask = MaskKind::Causal)
}

fn the_lab(s: &State) -> &FlashLab {
    lab(s).expect("the flash view built its lab")
}

fn press(s: &mut State, c: char) {
    if let Some(a) = action_for(s, &KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)) {
        update(s, a);
    }
}

fn screen(s: &mut State, cols: u16, rows: u16) -> String {
    update(s, Action::Resize { cols, rows });
    let mut term = Terminal::new(TestBackend::new(cols, rows)).unwrap();
    term.draw(|f| draw(s, f)).unwrap();
    term.backend().to_string()
}

fn max_diff(a: &[Vec<f64>], b: &Array2<f64>) -> f64 {
    assert_eq!(a.len(), b.nrows());
    a.iter()
        .zip(b.rows())
        .flat_map(|(x, y)| {
            assert_eq!(x.len(), y.len());
            x.iter()
                .zip(y)
                .map(|(p, q)| (p - q).abs())
                .collect::<Vec<_>>()
        })
        .fold(0.0, f64::max)
}

#[test]
fn d_toggles_the_backward_and_its_tiles_go_key_blocks_outer() {
    let mut s = causal();
    assert_eq!(s.flash.pass, FlashPass::Forward);
    assert!(the_lab(&s).backward.is_none());
    press(&mut s, 'd');
    assert_eq!(s.flash.pass, FlashPass::Backward);
    let l = the_lab(&s);
    assert!(l.backward.is_some());
    assert_eq!((l.tr(), l.tc(), l.tiles()), (4, 4, 16));
    assert_eq!(s.cursor, (0, 0));
    let order: Vec<(usize, usize)> = (0..l.tiles()).map(|k| l.tile_at(k)).collect();
    let want: Vec<(usize, usize)> = (0..4).flat_map(|j| (0..4).map(move |i| (i, j))).collect();
    assert_eq!(order, want, "key blocks outer, query blocks inner");
    update(&mut s, Action::Flash(F::NextTile));
    assert_eq!(s.cursor, (1, 0));
    update(&mut s, Action::Flash(F::LastTile));
    update(&mut s, Action::Flash(F::NextTile));
    assert!(
        s.status
            .as_ref()
            .is_some_and(|st| st.text.contains("dQ, dK and dV are final"))
    );
    // The backward has one loop order: `a` says so and changes nothing.
    let order_before = s.flash.order;
    press(&mut s, 'a');
    assert_eq!(s.flash.order, order_before);
    assert!(
        s.status
            .as_ref()
            .is_some_and(|st| st.text.contains("one loop order"))
    );
    // From the last tile, d goes to the forward's last tile.
    press(&mut s, 'd');
    assert_eq!(s.flash.pass, FlashPass::Forward);
    assert!(the_lab(&s).backward.is_none());
    assert_eq!(the_lab(&s).index_of(s.cursor), 15);
}

#[test]
fn the_key_is_in_the_hints_and_conflicts_with_nothing() {
    let s = causal();
    let h = hints(&s);
    assert!(
        h.iter()
            .any(|x| x.0.contains("backward") || x.1.contains("backward")),
        "{h:?}"
    );
    // `d` means nothing else anywhere in the flash view's keys or the global ones.
    let a = action_for(&s, &KeyEvent::new(KeyCode::Char('d'), KeyModifiers::NONE));
    assert_eq!(a, Some(Action::Flash(F::TogglePass)));
}

#[test]
fn play_walks_the_backward_tiles_with_virtual_time() {
    let mut s = causal();
    press(&mut s, 'd');
    update(&mut s, Action::Flash(F::PlayPause));
    let ms = (1000.0 / s.flash.tiles_per_second()) as u64;
    update(&mut s, Action::Tick { ms: 3 * ms });
    assert_eq!(s.cursor, (3, 0));
    update(&mut s, Action::Tick { ms });
    assert_eq!(s.cursor, (0, 1));
    update(&mut s, Action::Tick { ms: 100 * ms });
    assert_eq!(s.cursor, (3, 3));
    assert!(!s.flash.playing);
}

/// The head's q, k, v the view ran, the f32 values the kernel read, widened.
fn inputs(l: &FlashLab) -> (Array2<f64>, Array2<f64>, Array2<f64>) {
    let w = |a: &Array2<f64>| a.mapv(|x| x as f32 as f64);
    (w(&l.q), w(&l.k), w(&l.v))
}

#[test]
fn every_number_comes_from_the_kernel_and_matches_the_f64_backward() {
    for mask in [MaskKind::Causal, MaskKind::None, MaskKind::Window(3)] {
        let mut s = lesson_with(|c| c.mask = mask.clone());
        press(&mut s, 'd');
        let l = the_lab(&s);
        let bw = l.backward.as_ref().unwrap();
        let (q, k, v) = inputs(l);
        let (n, d) = q.dim();
        let dv = v.ncols();
        let dout = seeded_grad_out(n, dv, s.pipeline.config.seed).mapv(f64::from);
        assert_eq!(bw.dout, dout);
        let spec = AttnSpec {
            mask: Mask::resolve(&mask, 1, 1, n, n).unwrap(),
            alibi: None,
            scale: s.pipeline.scale.unwrap_or(1.0),
        };
        let four = |a: &Array2<f64>| {
            a.clone()
                .into_shape_with_order((1, 1, a.nrows(), a.ncols()))
                .unwrap()
        };
        let shape = ProblemShape::from_dims([1, 1, n, d], [1, 1, n, d], [1, 1, n, dv]).unwrap();
        let g = reference_backward::attention_backward(
            &shape,
            four(&q).view(),
            four(&k).view(),
            four(&v).view(),
            four(&dout).view(),
            &spec,
        );
        let head = |a: &Array4<f64>| a.slice(ndarray::s![0, 0, .., ..]).to_owned();
        let tol = 2e-5;
        assert!(max_diff(&bw.trace.dq, &head(&g.dq)) < tol, "{mask:?} dQ");
        assert!(max_diff(&bw.trace.dk, &head(&g.dk)) < tol, "{mask:?} dK");
        assert!(max_diff(&bw.trace.dv, &head(&g.dv)) < tol, "{mask:?} dV");
        let dd = g.d.slice(ndarray::s![0, 0, ..]).to_vec();
        for (a, b) in bw.trace.d_rows.iter().zip(&dd) {
            assert!((a - b).abs() < 1e-5, "{mask:?} D");
        }
        // The recomputed P of every tile is the forward's softmax (the pipeline's f64
        // weights), and S the forward's scores where it is not masked.
        let weights = &s.pipeline.stage(StageId::Softmax).unwrap().matrices[s.head].data;
        let scores_fwd = &l.trace;
        for (e, ev) in bw.trace.events.iter().enumerate() {
            let fwd = &scores_fwd.events[l.event_of[ev.q_block * l.tc() + ev.k_block]];
            assert_eq!(ev.skipped, fwd.skipped, "{mask:?} tile {e}");
            let (Some(p), Some(sc)) = (&ev.p, &ev.s) else {
                assert!(ev.skipped);
                continue;
            };
            let fs = fwd.s.as_ref().unwrap();
            for (r, i) in ev.rows.clone().enumerate() {
                for (c, j) in ev.cols.clone().enumerate() {
                    assert!(
                        (p[r][c] - weights[[i, j]]).abs() < 1e-5,
                        "{mask:?} P[{i}][{j}]"
                    );
                    let same = (sc[r][c] == fs[r][c]) || (sc[r][c] - fs[r][c]).abs() < 1e-5;
                    assert!(same, "{mask:?} S[{i}][{j}] {} vs {}", sc[r][c], fs[r][c]);
                }
            }
        }
        // At each key block's last tile its dK_j, dV_j are final.
        for ev in &bw.trace.events {
            if ev.q_block + 1 == l.tr() {
                for (jj, j) in ev.cols.clone().enumerate() {
                    assert_eq!(ev.dk[jj], bw.trace.dk[j]);
                    assert_eq!(ev.dv[jj], bw.trace.dv[j]);
                }
            }
        }
    }
}

#[test]
fn causal_skips_the_forwards_tiles_and_dkv_sum_the_rest() {
    let mut s = causal();
    press(&mut s, 'd');
    let l = the_lab(&s);
    let bw = l.backward.as_ref().unwrap();
    let skipped: Vec<(usize, usize)> = bw
        .trace
        .events
        .iter()
        .filter(|e| e.skipped)
        .map(|e| (e.q_block, e.k_block))
        .collect();
    let fwd_skipped = l.trace.events.iter().filter(|e| e.skipped).count();
    assert_eq!(skipped.len(), 6);
    assert_eq!(fwd_skipped, 6);
    assert!(skipped.iter().all(|(i, j)| j > i));
    // Key block j sums over the 4 - j query blocks i >= j.
    for j in 0..4 {
        let last = (0..l.tiles()).rev().find(|&k| l.tile_at(k).1 == j).unwrap();
        assert_eq!(bw.summed_over(last), 4 - j);
    }
}

#[test]
fn the_backward_traffic_is_the_engine_walk_beside_the_forward() {
    let mut s = causal();
    press(&mut s, 'd');
    let l = the_lab(&s);
    let bw = l.backward.as_ref().unwrap();
    let (n, br) = (l.trace.n_q as u64, l.key.br as u64);
    let sh = TiledShape {
        n_q: n,
        n_k: n,
        d: l.q.ncols() as u64,
        dv: l.v.ncols() as u64,
        br,
        bc: l.key.bc as u64,
    };
    let skipped = |i: usize, j: usize| l.class(i, j) == attnviz::engine::mask::TileClass::Empty;
    let walk = backward_traffic(&sh, skipped).unwrap();
    assert_eq!(bw.traffic, walk);
    assert_eq!(walk.standard, standard_backward(&sh));
    update(&mut s, Action::Flash(F::LastTile));
    let text = screen(&mut s, 120, 40);
    let total = attnviz::engine::memory::group_digits(walk.total().total());
    let fwd = attnviz::engine::memory::group_digits(l_total_fwd(&s));
    assert!(text.contains(&total) && text.contains(&fwd), "{text}");
    assert!(text.contains("forward FA2") && text.contains("standard backward"));
}

fn l_total_fwd(s: &State) -> u64 {
    the_lab(s).fa2.total().total()
}

#[test]
fn a_lesson_step_chooses_the_pass_and_replaying_undoes_it() {
    pin_tier();
    let scene = attnviz::scene::builtin("flash-backward").unwrap();
    let steps = attnviz::tui::script::lesson(&scene, Lang::En);
    let mut s = State::for_model(scene.toy().unwrap().clone(), options())
        .unwrap()
        .with_script(steps, false, 1.0);
    assert_eq!(s.flash.pass, FlashPass::Forward);
    update(&mut s, Action::GotoStep(1));
    assert_eq!(s.flash.pass, FlashPass::Backward);
    assert!(the_lab(&s).backward.is_some());
    update(&mut s, Action::GotoStep(0));
    assert_eq!(s.flash.pass, FlashPass::Forward);
    assert!(the_lab(&s).backward.is_none());
}

#[test]
fn snapshots() {
    for (c, r) in [(80, 24), (120, 40)] {
        let mut s = causal();
        press(&mut s, 'd');
        for _ in 0..5 {
            update(&mut s, Action::Flash(F::NextTile));
        }
        insta::assert_snapshot!(
            format!("flash_backward_tile6_{c}x{r}"),
            screen(&mut s, c, r)
        );
    }
    let mut s = causal();
    press(&mut s, 'd');
    update(&mut s, Action::Flash(F::LastTile));
    insta::assert_snapshot!("flash_backward_last_120x40", screen(&mut s, 120, 40));
}
