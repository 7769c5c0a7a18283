//! Quantized products over many rows of x with int8 activations on vectors, for the x86
//! CPUs without AMX: AVX-512 VNNI (`vpdpbusd`, 64 multiply-adds in one instruction) or
//! AVX2 (`vpmaddubsw`, 32 into pairs), against W's levels unpacked 16 rows at a time
//! ([`super::i8panel`]). The f32 tiles they replace do 16 (AVX-512) or 8 (AVX2)
//! multiply-adds per instruction, on dequantized weights.
//!
//! The tokens run along the lanes (x's packed levels are already in that order) and each
//! row's four levels of a step are broadcast: AVX-512 takes 8 rows x 16 tokens at a time,
//! AVX2 4 rows x 16 tokens (two vectors). On AVX2 the pairs' i16 sums of several steps are
//! added before they are widened to i32: with levels at most 15 (Q4_0, Q4_1, Q4_K) and
//! |x| <= 127, a pair is at most 3,810 in magnitude, so all 8 steps of a block fit in i16;
//! with levels at most 31 (the Q5 types) 4 steps do, with Q6_K's (at most 63) 2. Q6_K's
//! halves of a block (16 values each, 4 steps) meet their own scales. Both instructions
//! take W's levels as the unsigned operand. VNNI takes the signed types' (Q8_0, IQ4_NL)
//! plus 128 and subtracts 128 d_w s_x after (`vpdpbusd` adds its four products in 32
//! bits). AVX2 takes |w| and x with w's sign (`vpsignb`), llama.cpp's way: a pair is at
//! most 2 x 128 x 127 = 32,512, so each step is widened on its own.
//!
//! Each block's integer sums meet their scales as on AMX: y += dot d_w d_x + c_w s_x.
//! Measured on an Intel Xeon (family 6 model 167) with the tile unit left unused, the
//! prefill of 128 tokens on one thread against the f32 tiles: SmolLM2 (Q4_1) 271 -> 150 ms
//! on VNNI and 392 -> 241 ms on AVX2, Gemma 3 270M (Q4_K_M) 281 -> 195 and 411 -> 288 ms;
//! SmolLM2 requantized to Q8_0 (the signed kernels) 252.8 -> 135.4 and 405.8 -> 329.2 ms.
//! Written here for the reason [`super::qdot`] gives: no crate offers GGML's quantized
//! products on their own.

use std::arch::x86_64::*;

use super::i8panel::{BLOCK, PackedX, Panel, TILE, kind, unpack};
use super::qdot::QTier;
use super::quant::GgmlType;

/// The vector kernel a CPU runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VecTier {
    Avx2,
    Vnni,
}

impl VecTier {
    /// The kernel of an integer tier, if it has one.
    pub fn for_tier(tier: QTier) -> Option<VecTier> {
        match tier {
            QTier::Avx512Vnni => Some(VecTier::Vnni),
            QTier::Avx2 => Some(VecTier::Avx2),
            QTier::Scalar => None,
        }
    }
}

/// Whether the vector kernels take W of type `ty` (every type with a [`kind`]).
pub fn supports(ty: GgmlType) -> bool {
    kind(ty).is_some()
}

/// One panel of W (`rows` <= 16 rows of `row_bytes` each, from `w`) against every group of
/// tokens: y[t][r] = x[t] . W[r] (+ bias[r]), where `y` points at the panel's first column
/// of y [m, n] (row stride `n`). Runs on the calling thread.
///
/// # Safety
/// `tier` must be [`VecTier::for_tier`] of an available [`QTier`], and `ty` pass
/// [`supports`]; `y` must be valid
/// for m rows of stride n, with the `rows` columns from `y` on free for this call to write.
#[allow(clippy::too_many_arguments)]
pub unsafe fn panel_product(
    tier: VecTier,
    ty: GgmlType,
    w: &[u8],
    row_bytes: usize,
    rows: usize,
    x: &PackedX,
    bias: Option<&[f32]>,
    y: *mut f32,
    n: usize,
    panel: &mut Panel,
) {
    let kd = kind(ty).expect("supports() checked the type");
    assert!(rows <= TILE);
    // VNNI takes signed levels plus 128; AVX2 as they are.
    let biased = kd.signed && tier == VecTier::Vnni;
    // SAFETY: both tiers have AVX2, FMA and F16C (`QTier::is_available` checks them).
    unsafe { unpack(ty, w, row_bytes, rows, x.k, panel, biased) };
    let mut out = [[0.0f32; TILE]; TILE];
    for g in 0..x.groups {
        // The lines of y this group's results go to, fetched while the group is computed
        // (a store that misses waits for its line).
        for t in 0..TILE.min(x.m - g * TILE) {
            let at = y.wrapping_add((g * TILE + t) * n);
            // SAFETY: a prefetch does not fault; both ends of the 16 columns are in y.
            unsafe {
                _mm_prefetch::<_MM_HINT_T0>(at.cast());
                _mm_prefetch::<_MM_HINT_T0>(at.wrapping_add(rows.saturating_sub(1)).cast());
            }
        }
        // SAFETY: the tier's features were detected; the kernels read inside the panel and
        // x's group g (its sums per half where the type has two parts).
        unsafe {
            match (tier, kd.corrected() || biased, kd.parts, kd.max_level) {
                (VecTier::Vnni, true, 1, _) => group_vnni::<true, 1>(panel, x, g, rows, &mut out),
                (VecTier::Vnni, false, 1, _) => group_vnni::<false, 1>(panel, x, g, rows, &mut out),
                (VecTier::Vnni, _, _, _) => group_vnni::<true, 2>(panel, x, g, rows, &mut out),
                (VecTier::Avx2, false, 1, _) if kd.signed => {
                    group_avx2::<1, false, 1, true>(panel, x, g, rows, &mut out)
                }
                (VecTier::Avx2, true, 1, ..=15) => {
                    group_avx2::<8, true, 1, false>(panel, x, g, rows, &mut out)
                }
                (VecTier::Avx2, false, 1, ..=15) => {
                    group_avx2::<8, false, 1, false>(panel, x, g, rows, &mut out)
                }
                (VecTier::Avx2, true, 1, ..=31) => {
                    group_avx2::<4, true, 1, false>(panel, x, g, rows, &mut out)
                }
                (VecTier::Avx2, false, 1, ..=31) => {
                    group_avx2::<4, false, 1, false>(panel, x, g, rows, &mut out)
                }
                (VecTier::Avx2, true, 2, ..=15) => {
                    group_avx2::<4, true, 2, false>(panel, x, g, rows, &mut out)
                }
                (VecTier::Avx2, true, 2, ..=63) => {
                    group_avx2::<2, true, 2, false>(panel, x, g, rows, &mut out)
                }
                _ => unreachable!("no AVX2 kernel for {}", ty.name()),
            }
        }
        let tokens = TILE.min(x.m - g * TILE);
        for t in 0..tokens {
            for (r, row) in out.iter().enumerate().take(rows) {
                let v = row[t] + bias.map_or(0.0, |b| b[r]);
                // SAFETY: token g * 16 + t < m, column r < rows: the caller's contract.
                unsafe { *y.add((g * TILE + t) * n + r) = v };
            }
        }
    }
}

/// The four levels of `row`'s step `c` in block `b`, broadcast.
#[inline(always)]
unsafe fn levels4(panel: &Panel, b: usize, row: usize, c: usize) -> i32 {
    // SAFETY: b < nb, row < 16, c < 8: inside the panel's levels.
    unsafe {
        panel
            .block_levels(b)
            .add(row * BLOCK + 4 * c)
            .cast::<i32>()
            .read_unaligned()
    }
}

/// Group g of x against the panel on AVX-512 VNNI: out[row][token], rows in eights;
/// each block's PARTS parts (of 32 / PARTS values) meet their own scales.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,fma")]
unsafe fn group_vnni<const MIN: bool, const PARTS: usize>(
    panel: &Panel,
    x: &PackedX,
    g: usize,
    rows: usize,
    out: &mut [[f32; TILE]; TILE],
) {
    let nb = x.k / BLOCK;
    let steps = BLOCK / 4 / PARTS;
    for r0 in (0..rows).step_by(8) {
        let mut acc = [_mm512_setzero_ps(); 8];
        for b in 0..nb {
            // SAFETY: block b of group g: 512 bytes of x's levels, 16 scales and sums
            // per part; the panel's block b and its scales per part.
            unsafe {
                let xl = x.block_levels(g, b);
                let dx = _mm512_loadu_ps(x.d.as_ptr().add(x.scale_at(g, b)));
                for h in 0..PARTS {
                    let mut dots = [_mm512_setzero_si512(); 8];
                    for c in h * steps..(h + 1) * steps {
                        let xv = _mm512_loadu_si512(xl.add(64 * c).cast());
                        for (r, dot) in dots.iter_mut().enumerate() {
                            let wv = _mm512_set1_epi32(levels4(panel, b, r0 + r, c));
                            *dot = _mm512_dpbusd_epi32(*dot, wv, xv);
                        }
                    }
                    let sx = _mm512_loadu_ps(x.sums(g, b, PARTS, h));
                    let at = (b * PARTS + h) * TILE + r0;
                    for (r, (acc, dot)) in acc.iter_mut().zip(dots).enumerate() {
                        let dw = _mm512_set1_ps(*panel.d.get_unchecked(at + r));
                        *acc =
                            _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(dx, dw), *acc);
                        if MIN {
                            let cw = _mm512_set1_ps(*panel.c.get_unchecked(at + r));
                            *acc = _mm512_fmadd_ps(sx, cw, *acc);
                        }
                    }
                }
            }
        }
        for (r, v) in acc.iter().enumerate() {
            // SAFETY: 16 floats of out's row r0 + r < 16.
            unsafe { _mm512_storeu_ps(out[r0 + r].as_mut_ptr(), *v) };
        }
    }
}

/// Group g of x against the panel on AVX2: out[row][token], rows in fours, the pairs'
/// i16 sums of SPAN steps added before they are widened; each block's PARTS parts meet
/// their own scales. SIGNED levels multiply as |w| by x with w's sign (`vpsignb`).
#[target_feature(enable = "avx2,fma")]
unsafe fn group_avx2<const SPAN: usize, const MIN: bool, const PARTS: usize, const SIGNED: bool>(
    panel: &Panel,
    x: &PackedX,
    g: usize,
    rows: usize,
    out: &mut [[f32; TILE]; TILE],
) {
    let nb = x.k / BLOCK;
    let steps = BLOCK / 4 / PARTS;
    let ones = _mm256_set1_epi16(1);
    for r0 in (0..rows).step_by(4) {
        // acc[2 r + h]: row r0 + r, tokens 8h..8h + 8.
        let mut acc = [_mm256_setzero_ps(); 8];
        for b in 0..nb {
            // SAFETY: block b of group g: 512 bytes of x's levels, 16 scales and sums
            // per part; the panel's block b and its scales per part.
            unsafe {
                let xl = x.block_levels(g, b);
                let at_x = x.scale_at(g, b);
                for part in 0..PARTS {
                    let mut dots = [_mm256_setzero_si256(); 8];
                    for c0 in (part * steps..(part + 1) * steps).step_by(SPAN) {
                        let mut pairs = [_mm256_setzero_si256(); 8];
                        for c in c0..c0 + SPAN {
                            let x0 = _mm256_loadu_si256(xl.add(64 * c).cast());
                            let x1 = _mm256_loadu_si256(xl.add(64 * c + 32).cast());
                            for r in 0..4 {
                                let wv = _mm256_set1_epi32(levels4(panel, b, r0 + r, c));
                                let (p0, p1) = if SIGNED {
                                    let aw = _mm256_abs_epi8(wv);
                                    (
                                        _mm256_maddubs_epi16(aw, _mm256_sign_epi8(x0, wv)),
                                        _mm256_maddubs_epi16(aw, _mm256_sign_epi8(x1, wv)),
                                    )
                                } else {
                                    (_mm256_maddubs_epi16(wv, x0), _mm256_maddubs_epi16(wv, x1))
                                };
                                pairs[2 * r] = _mm256_add_epi16(pairs[2 * r], p0);
                                pairs[2 * r + 1] = _mm256_add_epi16(pairs[2 * r + 1], p1);
                            }
                        }
                        for (dot, p) in dots.iter_mut().zip(pairs) {
                            *dot = _mm256_add_epi32(*dot, _mm256_madd_epi16(p, ones));
                        }
                    }
                    let sums = x.sums(g, b, PARTS, part);
                    for h in 0..2 {
                        let dx = _mm256_loadu_ps(x.d.as_ptr().add(at_x + 8 * h));
                        let sx = _mm256_loadu_ps(sums.add(8 * h));
                        for r in 0..4 {
                            let i = (b * PARTS + part) * TILE + r0 + r;
                            let dw = _mm256_set1_ps(*panel.d.get_unchecked(i));
                            let v = _mm256_cvtepi32_ps(dots[2 * r + h]);
                            let a = &mut acc[2 * r + h];
                            *a = _mm256_fmadd_ps(v, _mm256_mul_ps(dx, dw), *a);
                            if MIN {
                                let cw = _mm256_set1_ps(*panel.c.get_unchecked(i));
                                *a = _mm256_fmadd_ps(sx, cw, *a);
                            }
                        }
                    }
                }
            }
        }
        for r in 0..4.min(TILE - r0) {
            for h in 0..2 {
                // SAFETY: 8 floats of out's row r0 + r < 16 from token 8h.
                unsafe { _mm256_storeu_ps(out[r0 + r].as_mut_ptr().add(8 * h), acc[2 * r + h]) };
            }
        }
    }
}
