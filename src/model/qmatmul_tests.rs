//! Every type on every integer tier and both paths against an independent f64 reference:
//! the matrix dequantized by `quant::dequantize`, then f64 dot products.

use half::{bf16, f16};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::model::matrix::SharedBytes;
use crate::model::quant::{self, GgmlType};

const TYPES: [GgmlType; 15] = [
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::Bf16,
    GgmlType::Q8_0,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q2K,
    GgmlType::Q3K,
    GgmlType::Q4K,
    GgmlType::Q5K,
    GgmlType::Q6K,
    GgmlType::Iq4Nl,
    GgmlType::Iq4Xs,
];

/// Byte offsets of a block's f16 scales (random bytes there could be inf or NaN).
fn half_fields(ty: GgmlType) -> &'static [usize] {
    match ty {
        GgmlType::Q8_0 | GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Iq4Nl | GgmlType::Iq4Xs => {
            &[0]
        }
        GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4K | GgmlType::Q5K => &[0, 2],
        GgmlType::Q2K => &[80, 82],
        GgmlType::Q3K => &[108],
        GgmlType::Q6K => &[208],
        GgmlType::F32 | GgmlType::F16 | GgmlType::Bf16 => &[],
    }
}

/// A random matrix [rows, cols] of `ty`: random quant bytes, scales in a sane range.
fn random_matrix(r: &mut ChaCha8Rng, ty: GgmlType, rows: usize, cols: usize) -> QuantMatrix {
    let elems = rows * cols;
    let mut bytes: Vec<u8> = match ty {
        GgmlType::F32 => (0..elems)
            .flat_map(|_| r.random_range(-1.0f32..1.0).to_le_bytes())
            .collect(),
        GgmlType::F16 => (0..elems)
            .flat_map(|_| f16::from_f32(r.random_range(-1.0f32..1.0)).to_le_bytes())
            .collect(),
        GgmlType::Bf16 => (0..elems)
            .flat_map(|_| bf16::from_f32(r.random_range(-1.0f32..1.0)).to_le_bytes())
            .collect(),
        _ => (0..ty.tensor_bytes(elems).unwrap())
            .map(|_| r.random())
            .collect(),
    };
    for blk in bytes.chunks_exact_mut(ty.block_bytes()) {
        for &off in half_fields(ty) {
            let h = f16::from_f32(r.random_range(-0.05f32..0.05));
            blk[off..off + 2].copy_from_slice(&h.to_le_bytes());
        }
    }
    QuantMatrix::new(ty, SharedBytes::owned(bytes), rows, cols).unwrap()
}

/// y in f64 and, per output, sum |x| |w| (the scale of the int8 rounding error).
fn reference(x: &[f32], m: usize, w: &QuantMatrix, bias: &[f32]) -> (Vec<f64>, Vec<f64>) {
    let (n, k) = (w.rows(), w.cols());
    let mut wf = vec![0.0f32; n * k];
    quant::dequantize(w.ty(), w.bytes(), &mut wf);
    let mut y = vec![0.0; m * n];
    let mut mag = vec![0.0; m * n];
    for t in 0..m {
        for j in 0..n {
            let (mut acc, mut a) = (bias[j] as f64, 0.0);
            for c in 0..k {
                let p = x[t * k + c] as f64 * wf[j * k + c] as f64;
                acc += p;
                a += p.abs();
            }
            y[t * n + j] = acc;
            mag[t * n + j] = a;
        }
    }
    (y, mag)
}

/// x rounded as the int8 path rounds it: per block of `bl`, to multiples of max |x| / 127.
fn rounded(x: &[f32], bl: usize) -> Vec<f32> {
    x.chunks_exact(bl)
        .flat_map(|b| {
            let d = b.iter().fold(0.0f32, |m, v| m.max(v.abs())) / 127.0;
            b.iter()
                .map(move |&v| if d > 0.0 { (v / d).round() * d } else { 0.0 })
        })
        .collect()
}

/// y = x W^T (+ bias) alone in one call on `tier` and `path`, y starting as NaN so that an
/// output left unwritten shows.
#[allow(clippy::too_many_arguments)]
fn one_product(
    tier: QTier,
    path: QPath,
    x: &[f32],
    m: usize,
    k: usize,
    w: &QuantMatrix,
    bias: Option<&[f32]>,
    threads: usize,
) -> Vec<f32> {
    let mut y = vec![f32::NAN; m * w.rows()];
    let mut p = [QProduct { w, bias, y: &mut y }];
    products_on(tier, path, x, m, k, &mut p, threads).unwrap();
    y
}

#[test]
fn every_type_tier_and_path_matches_f64_dequantized() {
    let mut r = ChaCha8Rng::seed_from_u64(11);
    // (m, blocks per row, n): k is blocks x the type's block, so 32-value types get rows
    // that are not a multiple of 256; n and m not multiples of the tiles (16, 48, 6).
    let shapes = [
        (1, 1, 1),
        (1, 3, 37),
        (3, 2, 50),
        (17, 5, 7),
        (2, 1, 300),
        (1, 9, 130),
    ];
    for ty in TYPES {
        for &(m, blocks, n) in &shapes {
            let k = blocks * ty.block_elems().max(32);
            let w = random_matrix(&mut r, ty, n, k);
            let x: Vec<f32> = (0..m * k).map(|_| r.random_range(-2.0..2.0)).collect();
            let bias: Vec<f32> = (0..n).map(|_| r.random_range(-1.0..1.0)).collect();
            let (exact, mag) = reference(&x, m, &w, &bias);
            for tier in QTier::available() {
                let format = qdot::kernel(ty, tier).0;
                // On int8 activations the only difference from f64 is their rounding: the
                // reference takes the same rounded values and the kernels are held to f32
                // accumulation error; the rounding itself stays within 1e-2 of sum |x w|.
                let x8 = rounded(&x, format.block());
                let (on_x8, _) = reference(&x8, m, &w, &bias);
                // The panel kernels round x per block of 32 whatever the type.
                let (on_x32, _) = reference(&rounded(&x, 32), m, &w, &bias);
                for path in [QPath::Int8, QPath::Tiles, QPath::Panels, QPath::VecPanels] {
                    let on_panels = |amx| panel_kernel(ty, tier, amx) != Kernel::Tiles;
                    let want_all = match path {
                        QPath::Int8 if format != ActFormat::F32 => &on_x8,
                        QPath::Panels if on_panels(true) => &on_x32,
                        QPath::VecPanels if on_panels(false) => &on_x32,
                        _ => &exact,
                    };
                    let rel = 1e-5;
                    let mut y1 = vec![f32::NAN; m * n];
                    for threads in [1, 2] {
                        let y = one_product(tier, path, &x, m, k, &w, Some(&bias), threads);
                        for (i, (&got, &want)) in y.iter().zip(want_all).enumerate() {
                            let tol = rel * mag[i] + 1e-6;
                            assert!(
                                (want - exact[i]).abs() <= 1e-2 * mag[i] + 1e-6,
                                "{}: int8 rounding alone moves output {i} by more than 1e-2",
                                ty.name()
                            );
                            assert!(
                                (got as f64 - want).abs() <= tol,
                                "{} {tier} {path:?} [{m},{k}]x[{n},{k}]^T threads {threads} at {i}: {got} vs {want} (tol {tol})",
                                ty.name()
                            );
                        }
                        if threads == 1 {
                            y1 = y;
                        } else {
                            assert_eq!(y, y1, "{} {tier} {path:?}: threads change bits", ty.name());
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn several_products_share_x_and_bad_shapes_are_errors() {
    let mut r = ChaCha8Rng::seed_from_u64(12);
    let (m, k) = (2, 256);
    let x: Vec<f32> = (0..m * k).map(|_| r.random_range(-1.0..1.0)).collect();
    let a = random_matrix(&mut r, GgmlType::Q4K, 20, k);
    let b = random_matrix(&mut r, GgmlType::Q8_0, 9, k);
    // Q6_K's halves need x's sums per 16 beside Q4_K on the panels.
    let c = random_matrix(&mut r, GgmlType::Q6K, 17, k);
    let zero = [0.0; 29];
    let tier = QTier::detect();
    for path in [QPath::Int8, QPath::Tiles, QPath::Panels, QPath::VecPanels] {
        let (mut ya, mut yb, mut yc) = (vec![0.0; m * 20], vec![0.0; m * 9], vec![0.0; m * 17]);
        let mut p = [
            QProduct {
                w: &a,
                bias: None,
                y: &mut ya,
            },
            QProduct {
                w: &b,
                bias: None,
                y: &mut yb,
            },
            QProduct {
                w: &c,
                bias: None,
                y: &mut yc,
            },
        ];
        products_on(tier, path, &x, m, k, &mut p, 2).unwrap();
        for (w, y) in [(&a, &ya), (&b, &yb), (&c, &yc)] {
            let alone = one_product(tier, path, &x, m, k, w, None, 1);
            assert_eq!(&alone, y, "{path:?} {}", w.ty().name());
            let (want, mag) = reference(&x, m, w, &zero[..w.rows()]);
            for i in 0..y.len() {
                assert!((y[i] as f64 - want[i]).abs() <= 1e-2 * mag[i] + 1e-6);
            }
        }
    }
    let mut short = vec![0.0; 3];
    let mut p = [QProduct {
        w: &a,
        bias: None,
        y: &mut short,
    }];
    assert!(products(&x, m, k, &mut p, 1).is_err());
    let mut y = vec![0.0; m * 20];
    let mut p = [QProduct {
        w: &a,
        bias: None,
        y: &mut y,
    }];
    assert!(products(&x[..k], 1, k - 32, &mut p, 1).is_err());
}

/// A text long enough that x^T does not fit the block-by-block order (the tiles run one
/// panel of tokens at a time): the same values as the f64 reference, with m, n and the
/// panel count not multiples of the tiles, on 1 and 2 threads.
#[test]
fn a_long_text_on_tiles_matches_f64() {
    let mut r = ChaCha8Rng::seed_from_u64(13);
    let (m, k, n) = (75, 2048, 53);
    assert!(
        m * k * 4 > dense::XT_STREAMED,
        "the shape must take the panel order"
    );
    let x: Vec<f32> = (0..m * k).map(|_| r.random_range(-1.0..1.0)).collect();
    let bias: Vec<f32> = (0..n).map(|_| r.random_range(-1.0..1.0)).collect();
    for ty in [GgmlType::Q4_1, GgmlType::Q4K] {
        let w = random_matrix(&mut r, ty, n, k);
        let (want, mag) = reference(&x, m, &w, &bias);
        for threads in [1, 2] {
            let tier = QTier::detect();
            let y = one_product(tier, QPath::Tiles, &x, m, k, &w, Some(&bias), threads);
            for (i, (&got, &want)) in y.iter().zip(&want).enumerate() {
                let tol = 1e-5 * mag[i] + 1e-6;
                assert!(
                    (got as f64 - want).abs() <= tol,
                    "{} threads {threads} at {i}: {got} vs {want}",
                    ty.name()
                );
            }
        }
    }
}

/// The panel kernels (the tile unit where the CPU has it, the vectors of every integer
/// tier) against the int8 row dots, which quantize x the same way for the 32-value types,
/// and against f64 on x rounded per block of 32 for the k-quants: a text longer than one
/// group of 16 tokens and not a multiple of it, W's rows not a multiple of a panel,
/// several products in one call.
#[test]
fn panels_match_the_int8_row_dots() {
    let mut r = ChaCha8Rng::seed_from_u64(14);
    let (m, k) = (37, 1024);
    let x: Vec<f32> = (0..m * k).map(|_| r.random_range(-3.0..3.0)).collect();
    let x32 = rounded(&x, 32);
    let mut runs: Vec<(QTier, QPath)> = QTier::available()
        .into_iter()
        .map(|t| (t, QPath::VecPanels))
        .collect();
    if amx_available() {
        runs.push((QTier::detect(), QPath::Panels));
    } else {
        eprintln!("this CPU (or its kernel) offers no AMX: the tile unit's case is skipped");
    }
    for ty in [
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q8_0,
        GgmlType::Iq4Nl,
        GgmlType::Q4K,
        GgmlType::Q5K,
        GgmlType::Q6K,
        GgmlType::Q2K,
        GgmlType::Q3K,
        GgmlType::Iq4Xs,
    ] {
        let (wa, wb) = (
            random_matrix(&mut r, ty, 45, k),
            random_matrix(&mut r, ty, 16, k),
        );
        let bias: Vec<f32> = (0..45).map(|_| r.random_range(-1.0..1.0)).collect();
        let (on_x32, mag) = reference(&x32, m, &wa, &bias);
        for &(tier, path) in &runs {
            let kernel = panel_kernel(ty, tier, path == QPath::Panels);
            if kernel == Kernel::Tiles {
                continue;
            }
            let k_quant = ty.block_elems() > 32;
            let row_dots = one_product(tier, QPath::Int8, &x, m, k, &wa, Some(&bias), 1);
            for threads in [1, 2] {
                let (mut ya, mut yb) = (vec![f32::NAN; m * 45], vec![f32::NAN; m * 16]);
                let mut p = [
                    QProduct {
                        w: &wa,
                        bias: Some(&bias),
                        y: &mut ya,
                    },
                    QProduct {
                        w: &wb,
                        bias: None,
                        y: &mut yb,
                    },
                ];
                products_on(tier, path, &x, m, k, &mut p, threads).unwrap();
                for (i, &got) in ya.iter().enumerate() {
                    // The same integer sums and scales as the row dots; only the f32
                    // summation order differs. The k-quants' row dots round x per 256.
                    let (want, tol) = if k_quant {
                        (on_x32[i], 1e-5 * mag[i] + 1e-6)
                    } else {
                        (row_dots[i] as f64, 1e-6 * mag[i] + 1e-6)
                    };
                    assert!(
                        (got as f64 - want).abs() <= tol,
                        "{} {kernel:?} threads {threads} at {i}: {got} vs {want}",
                        ty.name()
                    );
                }
                let alone = one_product(tier, path, &x, m, k, &wb, None, 1);
                assert_eq!(
                    alone,
                    yb,
                    "{} {kernel:?}: a product alone and beside another",
                    ty.name()
                );
            }
        }
    }
}
