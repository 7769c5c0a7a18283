//! What the flash-backward lesson says holds for the numbers the engine computes for its
//! model: each test takes the app to a step, as a person jumping there would, and checks
//! that step's narration against the flash view's lab (the kernel's own tiled backward,
//! recorded) and the pipeline's f64 numbers.

use attnviz::cli::Lang;
use attnviz::engine::pipeline::StageId;
use attnviz::scene::{self, FlashPass, Scene};
use attnviz::tui::views::flash::{self, FlashLab, current_tile};
use attnviz::tui::{Action, AppOptions, State, script, update};
use ndarray::Array2;

const NAME: &str = "flash-backward";

fn lesson() -> Scene {
    scene::builtin(NAME).unwrap()
}

/// The app at step `k` (from 1) of the lesson.
fn at(k: usize) -> State {
    let sc = lesson();
    let app = AppOptions::headless(Lang::En, None, false, "claims");
    let mut s = State::for_model(sc.toy().unwrap().clone(), app)
        .unwrap()
        .with_script(script::lesson(&sc, Lang::En), false, 1.0);
    update(
        &mut s,
        Action::Resize {
            cols: 120,
            rows: 40,
        },
    );
    update(&mut s, Action::GotoStep(k - 1));
    s
}

fn the_lab(s: &State) -> &FlashLab {
    flash::lab(s).expect("the flash lab")
}

fn weights(s: &State) -> Array2<f64> {
    s.pipeline.stage(StageId::Softmax).unwrap().matrices[s.head]
        .data
        .clone()
}

fn narration(k: usize) -> (String, String) {
    let n = &lesson().steps[k - 1].narration;
    (n.en.clone(), n.zh.clone())
}

#[test]
fn step_1_the_forward_saved_l_as_m_plus_log_l() {
    let s = at(1);
    assert_eq!(s.flash.pass, FlashPass::Forward);
    let l = the_lab(&s);
    assert!(l.backward.is_none());
    // L = m + log l of each row's last state, and the run's lse.
    for b in 0..l.tr() {
        let ev = l.event(l.block_final[b]);
        for (r, i) in ev.rows.clone().enumerate() {
            let want = ev.m[r] + ev.l[r].ln();
            assert!((l.trace.lse[i] - want).abs() < 1e-5, "row {i}");
        }
    }
}

#[test]
fn step_2_plays_the_first_key_block_down_its_query_blocks() {
    let s = at(2);
    assert_eq!(s.flash.pass, FlashPass::Backward);
    let l = the_lab(&s);
    let a = lesson().steps[1].animate.unwrap();
    let tiles: Vec<(usize, usize)> = (a.from..=a.to).map(|k| l.tile_at(k)).collect();
    assert_eq!(tiles, [(0, 0), (1, 0), (2, 0), (3, 0)]);
    let (en, _) = narration(2);
    assert!(en.contains("query blocks 0 to 3") && en.contains("K0, V0"));
}

#[test]
fn step_3_p_recomputed_from_l_is_the_forwards_softmax() {
    let s = at(3);
    let l = the_lab(&s);
    let bw = l.backward.as_ref().unwrap();
    let tile = current_tile(&s, l);
    assert_eq!(tile, lesson().steps[2].tiles[0]);
    let w = weights(&s);
    let k = l.index_of(tile);
    let ev = bw.event(k);
    assert!(!ev.skipped);
    let [sc, p, _] = bw.tile_matrices(k).unwrap();
    let fwd = l.s_block(l.event_of[tile.0 * l.tc() + tile.1]).unwrap();
    for (r, i) in ev.rows.clone().enumerate() {
        for (c, j) in ev.cols.clone().enumerate() {
            assert!((p[[r, c]] - w[[i, j]]).abs() < 1e-6, "P[{i}][{j}]");
            // P = exp(S - L), with the S it recomputed and the forward's L.
            let from_l = (sc[[r, c]] - bw.trace.lse[i]).exp();
            assert!((p[[r, c]] - from_l).abs() < 1e-6);
            assert!(sc[[r, c]] == fwd[[r, c]] || (sc[[r, c]] - fwd[[r, c]]).abs() < 1e-6);
        }
    }
}

#[test]
fn step_4_d_is_the_row_sum_of_p_times_dp() {
    let s = at(4);
    let l = the_lab(&s);
    let bw = l.backward.as_ref().unwrap();
    let w = weights(&s);
    // dP = dO V^T, with the view's dO and V.
    let dp = bw.dout.dot(&l.v.t());
    for i in 0..w.nrows() {
        let sum: f64 = (0..w.ncols()).map(|j| w[[i, j]] * dp[[i, j]]).sum();
        assert!((bw.trace.d_rows[i] - sum).abs() < 1e-5, "row {i}");
    }
    // And dS = P (dP - D) x scale tile by tile, written so in the narration and on screen.
    let formula = "dS = P (dP - D) x scale";
    let (en, zh) = narration(4);
    assert!(en.contains(formula) && zh.contains(formula), "{en}\n{zh}");
    let wide = attnviz::record::still::text(
        &attnviz::record::still(
            &lesson(),
            &attnviz::record::HeadlessOptions {
                lang: Lang::En,
                size: attnviz::cli::TermSize {
                    cols: 200,
                    rows: 50,
                },
                speed: 1.0,
                theme: None,
                ascii: false,
            },
            4,
        )
        .unwrap(),
    );
    assert!(wide.contains(formula), "{wide}");
    let scale = bw.trace.scale;
    for ev in bw.trace.events.iter().filter(|e| !e.skipped) {
        let ds = ev.ds.as_ref().unwrap();
        for (r, i) in ev.rows.clone().enumerate() {
            for (c, j) in ev.cols.clone().enumerate() {
                let want = scale * w[[i, j]] * (dp[[i, j]] - bw.trace.d_rows[i]);
                assert!((ds[r][c] - want).abs() < 1e-5);
            }
        }
    }
}

#[test]
fn step_5_dk_dv_sum_on_chip_and_dq_sums_over_key_blocks() {
    let s = at(5);
    let l = the_lab(&s);
    let bw = l.backward.as_ref().unwrap();
    let a = lesson().steps[4].animate.unwrap();
    assert_eq!(a.to, l.tiles() - 1);
    // The step opens on a tile that accumulates, not on one the mask skips.
    assert!(!bw.event(a.from).skipped, "tile {:?}", l.tile_at(a.from));
    assert_eq!(l.tile_at(a.from), (1, 1));
    for (k, ev) in bw.trace.events.iter().enumerate() {
        // dV_j after a tile = dV_j before it + P^T dO_i.
        let before = bw.before_in_key_block(k);
        if let Some(p) = &ev.p {
            for (c, _) in ev.cols.clone().enumerate() {
                for x in 0..bw.trace.d_v {
                    let prev = before.map_or(0.0, |b| b.dv[c][x]);
                    let add: f64 = ev
                        .rows
                        .clone()
                        .enumerate()
                        .map(|(r, i)| p[r][c] * bw.dout[[i, x]])
                        .sum();
                    assert!((ev.dv[c][x] - prev - add).abs() < 1e-5);
                }
            }
        }
        // dQ_i is final at its last key block.
        if ev.k_block + 1 == l.tc() {
            for (r, i) in ev.rows.clone().enumerate() {
                assert_eq!(ev.dq[r], bw.trace.dq[i]);
            }
        }
    }
}

#[test]
fn step_6_skips_the_forwards_six_tiles() {
    let s = at(6);
    let l = the_lab(&s);
    let bw = l.backward.as_ref().unwrap();
    let mut skipped: Vec<(usize, usize)> = bw
        .trace
        .events
        .iter()
        .filter(|e| e.skipped)
        .map(|e| (e.q_block, e.k_block))
        .collect();
    skipped.sort();
    let mut named = lesson().steps[5].tiles.clone();
    named.sort();
    assert_eq!(skipped, named);
    let fwd: Vec<(usize, usize)> = l
        .trace
        .events
        .iter()
        .filter(|e| e.skipped)
        .map(|e| (e.q_block, e.k_block))
        .collect();
    assert_eq!(fwd.len(), 6);
    let (en, zh) = narration(6);
    assert!(en.contains("same 6 tiles") && zh.contains("6 个分块"));
    let last_of = |j: usize| (0..l.tiles()).rev().find(|&k| l.tile_at(k).1 == j).unwrap();
    assert_eq!(bw.summed_over(last_of(3)), 1, "key block 3 sums one tile");
    assert_eq!(bw.summed_over(last_of(0)), 4, "key block 0 sums four");
}

#[test]
fn step_7_keeps_two_numbers_a_row_and_states_the_traffic_ratio() {
    let s = at(7);
    let l = the_lab(&s);
    let bw = l.backward.as_ref().unwrap();
    let n = l.trace.n_q;
    assert_eq!((bw.trace.lse.len(), bw.trace.d_rows.len()), (n, n));
    let ratio = bw.traffic.total().total() as f64 / l.fa2.total().total() as f64;
    let said = format!("{ratio:.1}");
    let (en, zh) = narration(7);
    assert!(en.contains(&format!("{said} times")), "{en} vs {ratio}");
    assert!(zh.contains(&format!("{said} 倍")), "{zh} vs {ratio}");
    // At this N the tiled backward moves more than the standard one, and says so.
    let (tiled, standard) = (bw.traffic.total().total(), bw.traffic.standard.total());
    assert!(tiled > standard, "{tiled} vs {standard}");
    let g = attnviz::engine::memory::group_digits;
    let figures = [format!("N = {n}"), g(tiled), g(standard)];
    for f in &figures {
        assert!(
            en.contains(f.as_str()) && zh.contains(f.as_str()),
            "{f}: {en}\n{zh}"
        );
    }
    assert!(en.contains("more than the standard backward"), "{en}");
    // No N x N term: the dense count is linear in N for a fixed number of key blocks.
    let sh = |n: u64| attnviz::engine::memory::TiledShape {
        n_q: n,
        n_k: n,
        d: 8,
        dv: 8,
        br: n / 4,
        bc: n / 4,
    };
    let t = |n| {
        attnviz::engine::memory_backward::backward_traffic(&sh(n), |_, _| false)
            .unwrap()
            .dense
            .total()
    };
    assert_eq!(t(2048), 2 * t(1024));
}

#[test]
fn step_8_the_gradients_match_the_f64_reference() {
    let s = at(8);
    let l = the_lab(&s);
    let bw = l.backward.as_ref().unwrap();
    let (q, k, v) = bw.final_distances();
    assert!(q < 1e-6 && k < 1e-6 && v < 1e-6, "{q} {k} {v}");
    let (en, _) = narration(8);
    assert!(en.contains("1e-6"));
}
