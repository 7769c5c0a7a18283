//! Sliding window, BigBird and linear attention against their definitions.

use attnviz::engine::config::{BigBird, MaskKind};
use attnviz::engine::mask::Mask;
use attnviz::engine::variants::{
    self, CellKind, compare_linear, linear_attention, linear_attention_quadratic,
};
use ndarray::{Array2, s};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn random(rng: &mut ChaCha8Rng, shape: (usize, usize)) -> Array2<f64> {
    Array2::from_shape_fn(shape, |_| rng.random_range(-1.5..1.5))
}

fn max_abs(a: &Array2<f64>, b: &Array2<f64>) -> f64 {
    assert_eq!(a.dim(), b.dim());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

#[test]
fn receptive_field_grows_by_w_minus_1_per_layer() {
    for (n, w) in [(20, 3), (9, 1), (12, 4), (6, 10)] {
        let sw = variants::sliding_window(n, w, 5, (4, 4)).unwrap();
        for i in 0..n {
            let row: Vec<usize> = (0..n).filter(|&j| sw.band[[i, j]]).collect();
            let first = (i + 1).saturating_sub(w);
            assert_eq!(row, (first..=i).collect::<Vec<_>>(), "band row {i}, W {w}");
        }
        for lr in &sw.layers {
            let l = lr.layer;
            assert_eq!(lr.span, (l * (w - 1) + 1).min(n));
            for i in 0..n {
                // What reaches position i after l layers, by composing the bands, is
                // exactly the min(i + 1, l (W - 1) + 1) positions ending at i.
                let reached: Vec<usize> = (0..n).filter(|&j| lr.reach[[i, j]]).collect();
                let first = (i + 1).saturating_sub(l * (w - 1) + 1);
                assert_eq!(
                    reached,
                    (first..=i).collect::<Vec<_>>(),
                    "n {n} W {w} L {l} i {i}"
                );
                assert_eq!(lr.earliest[i], first);
            }
            assert_eq!(lr.reach.row(n - 1).iter().filter(|&&x| x).count(), lr.span);
        }
        let seen: usize = (0..n).map(|i| (i + 1).min(w)).sum();
        assert_eq!(sw.seen, seen);
    }
}

#[test]
fn rolling_buffer_holds_what_the_window_sees() {
    let (n, w) = (13, 4);
    let sw = variants::sliding_window(n, w, 1, (4, 4)).unwrap();
    for frame in &sw.buffer {
        assert_eq!(frame.slot, frame.position % w);
        let mut held: Vec<usize> = frame.slots.iter().flatten().copied().collect();
        held.sort();
        let seen: Vec<usize> = (0..n).filter(|&j| sw.band[[frame.position, j]]).collect();
        assert_eq!(held, seen, "after position {}", frame.position);
        let evicted = frame.position.checked_sub(w);
        assert_eq!(frame.evicted, evicted);
    }
    // A 16 x 16 band of W = 4 in 4 x 4 tiles: each block row touches the diagonal tile
    // and the one before it.
    let sw = variants::sliding_window(16, 4, 1, (4, 4)).unwrap();
    assert_eq!(sw.tiles.total, 16);
    assert_eq!(sw.tiles.skipped, 16 - 4 - 3);
}

#[test]
fn bigbird_counts_add_up_and_skipped_tiles_are_fully_masked() {
    for (bb, n, tile) in [
        (
            BigBird {
                window: 1,
                globals: 1,
                random: 1,
                block: 2,
            },
            32,
            (4, 4),
        ),
        (
            BigBird {
                window: 0,
                globals: 2,
                random: 2,
                block: 1,
            },
            24,
            (3, 5),
        ),
        (
            BigBird {
                window: 2,
                globals: 0,
                random: 0,
                block: 4,
            },
            40,
            (8, 8),
        ),
    ] {
        let p = variants::bigbird_pattern(bb, n, tile).unwrap();
        assert_eq!(p.global + p.local + p.random + p.masked, n * n);
        let mask = Mask::resolve(&MaskKind::BigBird(bb), 1, 1, n, n).unwrap();
        for ((i, j), &c) in p.cells.indexed_iter() {
            assert_eq!(c == CellKind::Masked, mask.is_masked(0, 0, i, j));
        }
        // Each query block has min(random, candidates) random key blocks.
        let nb = n.div_ceil(bb.block);
        for qb in 0..nb {
            let i = qb * bb.block;
            let random_blocks = (0..nb)
                .filter(|&kb| p.cells[[i, kb * bb.block]] == CellKind::Random)
                .count();
            let candidates = (0..nb)
                .filter(|&kb| qb.abs_diff(kb) > bb.window && qb >= bb.globals && kb >= bb.globals)
                .count();
            assert_eq!(
                random_blocks,
                bb.random.min(candidates),
                "{bb:?} block {qb}"
            );
        }
        let (br, bc) = tile;
        let mut skipped = 0;
        for r0 in (0..n).step_by(br) {
            for c0 in (0..n).step_by(bc) {
                let t = p
                    .cells
                    .slice(s![r0..(r0 + br).min(n), c0..(c0 + bc).min(n)]);
                skipped += t.iter().all(|&c| c == CellKind::Masked) as usize;
            }
        }
        assert_eq!(p.tiles.skipped, skipped, "{bb:?}");
        assert_eq!(p.tiles.total, n.div_ceil(br) * n.div_ceil(bc));
        assert!(
            p.tiles.skipped > 0 || bb.window * 2 + 1 >= nb,
            "{bb:?}: no tile skipped"
        );
    }
}

#[test]
fn linear_form_equals_the_quadratic_form() {
    let mut rng = ChaCha8Rng::seed_from_u64(17);
    for (nq, nk, d, dv) in [(10, 10, 4, 3), (1, 7, 5, 5), (7, 12, 3, 2), (12, 7, 2, 4)] {
        let q = random(&mut rng, (nq, d));
        let k = random(&mut rng, (nk, d));
        let v = random(&mut rng, (nk, dv));
        for causal in [false, true] {
            let lin = linear_attention(q.view(), k.view(), v.view(), causal).unwrap();
            let (quad, weights) =
                linear_attention_quadratic(q.view(), k.view(), v.view(), causal).unwrap();
            let diff = max_abs(&lin.out, &quad);
            assert!(diff < 1e-12, "{nq}x{nk} causal {causal}: {diff}");
            assert_eq!(lin.state.dim(), (d, dv));
            assert_eq!(lin.normaliser.len(), d);
            for (i, row) in weights.outer_iter().enumerate() {
                let sum: f64 = row.sum();
                if causal && i + nk < nq {
                    assert_eq!(sum, 0.0);
                    assert!(lin.out.row(i).iter().all(|&x| x == 0.0));
                } else {
                    assert!((sum - 1.0).abs() < 1e-12);
                }
            }
        }
    }
}

#[test]
fn linear_attention_beside_softmax_on_the_same_inputs() {
    let mut rng = ChaCha8Rng::seed_from_u64(23);
    let (n, d, dv) = (16, 4, 4);
    let q = random(&mut rng, (n, d));
    let k = random(&mut rng, (n, d));
    let v = random(&mut rng, (n, dv));
    let c = compare_linear(q.view(), k.view(), v.view(), true, None).unwrap();
    assert_eq!(c.state_elements, (d * dv) as u64);
    assert_eq!(c.matrix_elements, (n * n) as u64);
    // Softmax weights are causal and reproduce the reference output.
    assert!((0..n).all(|i| (i + 1..n).all(|j| c.softmax_weights[[i, j]] == 0.0)));
    let again = c.softmax_weights.dot(&v);
    assert!(max_abs(&again, &c.softmax_out) < 1e-12);
    // Different functions of the same inputs: they differ, but stay the same size.
    assert!(
        c.max_abs_diff > 1e-3 && c.rel_diff < 1.0,
        "{} {}",
        c.max_abs_diff,
        c.rel_diff
    );
    // Costs: the linear form is linear in n, softmax quadratic.
    let long = 4 * n;
    let (q2, k2, v2) = (
        random(&mut rng, (long, d)),
        random(&mut rng, (long, d)),
        random(&mut rng, (long, dv)),
    );
    let c2 = compare_linear(q2.view(), k2.view(), v2.view(), false, None).unwrap();
    let c1 = compare_linear(q.view(), k.view(), v.view(), false, None).unwrap();
    assert_eq!(c2.linear_madds, 4 * c1.linear_madds);
    assert_eq!(c2.softmax_madds, 16 * c1.softmax_madds);
    assert_eq!(c1.softmax_madds, (n * n * (d + dv)) as u64);
    assert_eq!(c1.linear_madds, (2 * n * (d + d * dv)) as u64);
}
