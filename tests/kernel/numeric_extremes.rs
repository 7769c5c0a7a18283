//! The f32 paths (the flash kernel on every SIMD tier, 1 and 2 threads, and the naive
//! path) on extreme but finite values: scales up to 1e38, huge and tiny Q and K, file
//! masks with huge negative (and positive) biases. Each either refuses with exit 2
//! naming a limit, or returns finite numbers that match the f64 reference to the
//! accuracy f32 logits allow; never NaN, never a fully masked row the reference does
//! not have.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use attnviz::engine::mask::Mask;
use attnviz::engine::problem::{AttnSpec, ProblemShape};
use attnviz::engine::{naive, reference};
use attnviz::kernel::{self, KernelOptions, available_tiers};
use ndarray::Array4;
use proptest::prelude::*;

/// Biases a file mask may hold: 0, masked, and huge finite values (the float32 minimum
/// PyTorch masks with, values beyond float32, a huge positive one).
const BIASES: [f64; 8] = [
    0.0,
    f64::NEG_INFINITY,
    -3.4028234663852886e38,
    -2.5e38,
    -1e30,
    -1e300,
    7e37,
    -1e9,
];

#[derive(Debug, Clone)]
struct Case {
    n_q: usize,
    n_k: usize,
    d: usize,
    dv: usize,
    /// Q and K entries are small integers times 2^eq, 2^ek; V is in (-1, 1) times 2^ev.
    q: Vec<i8>,
    k: Vec<i8>,
    v: Vec<f32>,
    eq: i32,
    ek: i32,
    ev: i32,
    scale: f64,
    /// Indices into BIASES per (i, j), or None for no mask.
    biases: Option<Vec<usize>>,
}

fn case() -> impl Strategy<Value = Case> {
    (1usize..=9, 1usize..=9, 1usize..=5, 1usize..=3).prop_flat_map(|(n_q, n_k, d, dv)| {
        (
            proptest::collection::vec(-3i8..=3, n_q * d),
            proptest::collection::vec(-3i8..=3, n_k * d),
            proptest::collection::vec(-1.0f32..1.0, n_k * dv),
            -60i32..=60,
            -60i32..=60,
            -100i32..=100,
            prop_oneof![
                (-126i32..=126).prop_map(|e| 2f64.powi(e)),
                (-126i32..=126).prop_map(|e| -(2f64.powi(e))),
                Just(1e38),
                Just(1.0),
            ],
            proptest::option::of(proptest::collection::vec(0..BIASES.len(), n_q * n_k)),
        )
            .prop_map(move |(q, k, v, eq, ek, ev, scale, biases)| Case {
                n_q,
                n_k,
                d,
                dv,
                q,
                k,
                v,
                eq,
                ek,
                ev,
                scale,
                biases,
            })
    })
}

struct Problem {
    shape: ProblemShape,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    spec: AttnSpec,
    _dir: tempfile::TempDir,
}

fn problem(c: &Case) -> Problem {
    let shape =
        ProblemShape::from_dims([1, 1, c.n_q, c.d], [1, 1, c.n_k, c.d], [1, 1, c.n_k, c.dv])
            .unwrap();
    let ints = |x: &[i8], e: i32| x.iter().map(|&i| i as f32 * 2f32.powi(e)).collect();
    let dir = tempfile::tempdir().unwrap();
    let kind = match &c.biases {
        None => Default::default(),
        Some(idx) => {
            let path = dir.path().join("mask.npy");
            let a =
                ndarray::Array2::from_shape_fn((c.n_q, c.n_k), |(i, j)| BIASES[idx[i * c.n_k + j]]);
            write_npy(&path, &a);
            format!("file:{}", path.display()).parse().unwrap()
        }
    };
    let mask = Mask::resolve(&kind, 1, 1, c.n_q, c.n_k).unwrap();
    Problem {
        shape,
        q: ints(&c.q, c.eq),
        k: ints(&c.k, c.ek),
        v: c.v.iter().map(|&x| x * 2f32.powi(c.ev)).collect(),
        spec: AttnSpec::new(&shape, mask, false, Some(c.scale)),
        _dir: dir,
    }
}

fn write_npy(path: &Path, a: &ndarray::Array2<f64>) {
    ndarray_npy::write_npy(path, a).unwrap();
}

fn to4(x: &[f32], dims: (usize, usize)) -> Array4<f64> {
    Array4::from_shape_vec(
        (1, 1, dims.0, dims.1),
        x.iter().map(|&v| v as f64).collect(),
    )
    .unwrap()
}

/// Per row: how far the output may be from the reference. f32 rounds each logit term
/// by about 2^-22 of its size, so a key whose logit is within that error of the best
/// can take a different weight; the softmax moves by at most twice the logit error.
fn row_tolerance(p: &Problem, i: usize) -> f64 {
    let (d, n_k) = (p.shape.d, p.shape.n_k);
    let eps = 2f64.powi(-21) * d as f64;
    let logit = |j: usize| {
        let dot: f64 = (0..d)
            .map(|c| p.q[i * d + c] as f64 * p.k[j * d + c] as f64)
            .sum();
        let terms: f64 = (0..d)
            .map(|c| (p.q[i * d + c] as f64 * p.k[j * d + c] as f64).abs())
            .sum();
        let b = p.spec.mask.shifted_bias(0, 0, i, j);
        (
            dot * p.spec.scale + b,
            eps * (terms * p.spec.scale.abs() + b.abs()),
        )
    };
    let ls: Vec<(f64, f64)> = (0..n_k)
        .map(logit)
        .filter(|(l, _)| *l > f64::NEG_INFINITY)
        .collect();
    let Some(top) = ls.iter().map(|(l, _)| *l).reduce(f64::max) else {
        return 1e-4;
    };
    let err = ls
        .iter()
        .filter(|(l, e)| top - l < 40.0 + 2.0 * e)
        .map(|(_, e)| *e)
        .fold(0.0, f64::max);
    1e-4 + 4.0 * err
}

fn compare(p: &Problem, out: &[f32], lse: &[f32], what: &str) -> Result<(), TestCaseError> {
    let r = reference::attention(
        &p.shape,
        to4(&p.q, (p.shape.n_q, p.shape.d)).view(),
        to4(&p.k, (p.shape.n_k, p.shape.d)).view(),
        to4(&p.v, (p.shape.n_k, p.shape.dv)).view(),
        &p.spec,
    );
    let vmax =
        p.v.iter()
            .fold(0.0f64, |m, &x| m.max(x.abs() as f64))
            .max(1e-300);
    for i in 0..p.shape.n_q {
        let want_lse = r.lse[[0, 0, i]];
        prop_assert!(!lse[i].is_nan(), "{what}: lse NaN at row {i}");
        prop_assert_eq!(
            lse[i] == f32::NEG_INFINITY,
            want_lse == f64::NEG_INFINITY,
            "{}: row {} fully masked {} vs reference lse {}",
            what,
            i,
            lse[i],
            want_lse
        );
        let tol = row_tolerance(p, i);
        for c in 0..p.shape.dv {
            let got = out[i * p.shape.dv + c];
            prop_assert!(got.is_finite(), "{what}: out[{i}][{c}] = {got}");
            if tol < 0.5 {
                let want = r.out[[0, 0, i, c]];
                let e = (got as f64 - want).abs() / vmax;
                prop_assert!(
                    e <= tol,
                    "{what}: out[{i}][{c}] = {got}, reference {want} (error {e:e} > {tol:e})"
                );
            }
        }
    }
    Ok(())
}

fn refused(e: &attnviz::Error, what: &str) -> Result<(), TestCaseError> {
    let msg = e.to_string();
    prop_assert_eq!(e.exit_code(), 2, "{}: {}", what, msg);
    prop_assert!(msg.contains("beyond"), "{what}: {msg}");
    Ok(())
}

/// Runs that returned numbers and runs that refused, over the whole property test.
static ACCEPTED: AtomicUsize = AtomicUsize::new(0);
static REFUSED: AtomicUsize = AtomicUsize::new(0);

fn check(c: &Case) -> Result<(), TestCaseError> {
    let p = problem(c);
    for tier in available_tiers() {
        for threads in [1, 2] {
            let what = format!("flash {tier} x{threads}");
            let opts = KernelOptions {
                threads: Some(threads),
                tier: Some(tier),
                block_q: Some(4),
                block_k: Some(4),
                ..Default::default()
            };
            match kernel::attention(&p.shape, &p.q, &p.k, &p.v, &p.spec, &opts) {
                Ok(o) => {
                    ACCEPTED.fetch_add(1, Ordering::Relaxed);
                    compare(&p, &o.out, &o.lse, &what)?
                }
                Err(e) => {
                    REFUSED.fetch_add(1, Ordering::Relaxed);
                    refused(&e, &what)?
                }
            }
        }
    }
    let view = |x: &[f32], r: usize, w: usize| {
        ndarray::ArrayView4::from_shape((1, 1, r, w), x)
            .unwrap()
            .to_owned()
    };
    let (q, k, v) = (
        view(&p.q, p.shape.n_q, p.shape.d),
        view(&p.k, p.shape.n_k, p.shape.d),
        view(&p.v, p.shape.n_k, p.shape.dv),
    );
    match naive::attention(&p.shape, q.view(), k.view(), v.view(), &p.spec) {
        Ok(o) => compare(
            &p,
            o.out.as_slice().unwrap(),
            o.lse.as_slice().unwrap(),
            "naive",
        )?,
        Err(e) => refused(&e, "naive")?,
    }
    Ok(())
}

#[test]
fn extreme_finite_values_are_right_or_refused() {
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 300,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    if let Err(e) = runner.run(&case(), |c| check(&c)) {
        panic!("{e}");
    }
    // Both outcomes must be exercised, or the property says little.
    let (ok, no) = (
        ACCEPTED.load(Ordering::Relaxed),
        REFUSED.load(Ordering::Relaxed),
    );
    assert!(
        ok * 5 >= ok + no && no * 20 >= ok + no,
        "{ok} accepted, {no} refused"
    );
}

/// Reported cases, on the library paths: scores that overflow f32 are refused by
/// the f32 paths and right in the reference; a bias of -3e38 on every key keeps the real
/// distribution instead of a "fully masked" row.
#[test]
fn the_reported_cases() {
    let shape = ProblemShape::from_dims([1, 1, 1, 1], [1, 1, 2, 1], [1, 1, 2, 1]).unwrap();
    let none = Mask::resolve(&Default::default(), 1, 1, 1, 2).unwrap();
    let spec = AttnSpec::new(&shape, none, false, Some(1.0));
    for k in [[3e19f32, 1e19], [-3e19, 1e19]] {
        let q = [3e19f32];
        let v = [1.0f32, 2.0];
        for tier in available_tiers() {
            let opts = KernelOptions {
                tier: Some(tier),
                threads: Some(1),
                ..Default::default()
            };
            let err = kernel::attention(&shape, &q, &k, &v, &spec, &opts).unwrap_err();
            assert!(err.to_string().contains("beyond"), "{tier}: {err}");
        }
        let r = reference::attention(
            &shape,
            to4(&q, (1, 1)).view(),
            to4(&k, (2, 1)).view(),
            to4(&v, (2, 1)).view(),
            &spec,
        );
        let want = if k[0] > 0.0 { 1.0 } else { 2.0 };
        assert_eq!(r.out[[0, 0, 0, 0]], want);
    }

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.npy");
    write_npy(&path, &ndarray::Array2::from_elem((1, 2), -3e38));
    let kind = format!("file:{}", path.display()).parse().unwrap();
    let mask = Mask::resolve(&kind, 1, 1, 1, 2).unwrap();
    let spec = AttnSpec::new(&shape, mask, false, Some(1.0));
    let (q, k, v) = ([1.0f32], [0.0f32, 1.0], [1.0f32, 2.0]);
    let e = std::f64::consts::E;
    let want = (1.0 + 2.0 * e) / (1.0 + e);
    for tier in available_tiers() {
        let opts = KernelOptions {
            tier: Some(tier),
            threads: Some(1),
            ..Default::default()
        };
        let o = kernel::attention(&shape, &q, &k, &v, &spec, &opts).unwrap();
        assert!(
            (o.out[0] as f64 - want).abs() < 1e-5,
            "{tier}: {}",
            o.out[0]
        );
        let lse = -3e38 + (1.0 + e).ln();
        assert!(
            ((o.lse[0] as f64 - lse) / lse).abs() < 1e-6,
            "{tier}: {}",
            o.lse[0]
        );
    }
}
