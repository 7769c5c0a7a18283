//! The operands of a quantized product over many rows of x with int8 activations, as
//! both of its kernels take them (the AMX tile unit, [`super::amx`], and AVX-512 VNNI or
//! AVX2 vectors, [`super::i8vec`]): x quantized to int8 blocks of 32 values and packed
//! 16 tokens at a time, and 16 rows of W unpacked to their integer levels with one scale
//! and one correction per block of 32. A block's integer dot then meets its scales as
//! y += dot d_w d_x + c_w s_x, where s_x = d_x sum q_x and c_w is the block's minimum
//! (Q4_1, Q5_1, the k-quants' -dmin m) or its offset times d_w (Q4_0: -8 d_w). Q6_K's
//! sub-blocks of 16 values have scales of their own: its blocks of 32 are split in two
//! halves, each with its d_w and c_w = -32 d_w, met by x's sums over that half; so are
//! Q2_K's and Q3_K's.
//!
//! Layouts: x's levels per group of 16 tokens and block, 512 bytes in the order of an AMX
//! B tile (row r holds values 4r..4r+4 of each of the 16 tokens), which is also the order
//! an 8-bit vector dot product wants with the tokens along the lanes; W's levels per
//! block, 16 rows of 32 bytes (an A tile), block after block.

use std::arch::x86_64::*;
use std::cell::RefCell;

use crate::error::Result;
use crate::kernel::team;

use super::acts;
use super::qdot::x86::{Iq4NlL, Levels, Q4_0L, Q4_1L, Q5_0L, Q5_1L, Q8_0L, half, halves2};
use super::quant::{GgmlType, KVALUES_IQ4NL, QK_K, q3_k_scales, scale_min_k4};

/// Rows of W (and tokens) per panel and group.
pub const TILE: usize = 16;

/// Values per quantized block of x (and of W's levels).
pub const BLOCK: usize = 32;

/// How a type's blocks become levels: bytes per block (per super-block of 256 values for
/// the k-quants), the offset subtracted from its levels, whether it stores a minimum,
/// whether its levels are signed, the largest level of an unsigned type, and how many
/// parts of a block of 32 have scales of their own (2 for Q6_K's sub-blocks of 16).
#[derive(Clone, Copy)]
pub struct Kind {
    pub bytes: usize,
    pub offset: f32,
    pub has_min: bool,
    pub signed: bool,
    pub max_level: u8,
    pub parts: usize,
}

impl Kind {
    /// Whether a block's result needs the correction c_w s_x.
    pub fn corrected(&self) -> bool {
        self.has_min || self.offset != 0.0
    }
}

pub fn kind(ty: GgmlType) -> Option<Kind> {
    let k = |bytes, offset, has_min, signed, max_level, parts| {
        Some(Kind {
            bytes,
            offset,
            has_min,
            signed,
            max_level,
            parts,
        })
    };
    match ty {
        GgmlType::Q4_0 => k(18, 8.0, false, false, 15, 1),
        GgmlType::Q4_1 => k(20, 0.0, true, false, 15, 1),
        GgmlType::Q5_0 => k(22, 16.0, false, false, 31, 1),
        GgmlType::Q5_1 => k(24, 0.0, true, false, 31, 1),
        GgmlType::Q8_0 => k(34, 0.0, false, true, 127, 1),
        GgmlType::Iq4Nl => k(18, 0.0, false, true, 127, 1),
        GgmlType::Q4K => k(144, 0.0, true, false, 15, 1),
        GgmlType::Q5K => k(176, 0.0, true, false, 31, 1),
        GgmlType::Q6K => k(210, 32.0, false, false, 63, 2),
        GgmlType::Q2K => k(84, 0.0, true, false, 3, 2),
        GgmlType::Q3K => k(110, 4.0, false, false, 7, 2),
        GgmlType::Iq4Xs => k(136, 0.0, false, true, 127, 1),
        _ => None,
    }
}

thread_local! {
    /// The buffers of this thread's last dropped [`PackedX`], for its next one: a prefill
    /// packs x a few times a layer, and fresh zeroed buffers cost a serial pass over
    /// them each time.
    static SPARE: RefCell<Option<Spare>> = const { RefCell::new(None) };
}

/// A [`PackedX`]'s buffers between calls.
struct Spare {
    levels: Vec<i8>,
    d: Vec<f32>,
    s: Vec<f32>,
    s16: Vec<f32>,
}

impl Drop for PackedX {
    fn drop(&mut self) {
        let bufs = Spare {
            levels: std::mem::take(&mut self.levels),
            d: std::mem::take(&mut self.d),
            s: std::mem::take(&mut self.s),
            s16: std::mem::take(&mut self.s16),
        };
        // During thread exit the buffers are just freed.
        let _ = SPARE.try_with(|spare| *spare.borrow_mut() = Some(bufs));
    }
}

/// x [m, k] quantized and packed: per group of 16 tokens (the last padded with zeros) and
/// block of 32 values, 512 bytes of levels, 16 scales d_x and 16 sums s_x = d_x sum q_x;
/// when a product needs them (Q6_K), the sums of each half of 16 values too (`s16`, per
/// group, block and half, 16 lanes).
pub struct PackedX {
    pub m: usize,
    pub k: usize,
    pub groups: usize,
    pub levels: Vec<i8>,
    pub d: Vec<f32>,
    pub s: Vec<f32>,
    pub s16: Vec<f32>,
}

impl PackedX {
    /// Quantize as [`super::qdot::Acts`] does (the same function, so the same levels, and
    /// both int8 paths see the same activations). k a multiple of 32; the groups of 16
    /// tokens are quantized by up to `threads` threads; `halves`: also the sums per 16.
    pub fn new(x: &[f32], m: usize, k: usize, threads: usize, halves: bool) -> Result<PackedX> {
        assert!(k.is_multiple_of(BLOCK) && x.len() == m * k);
        assert!(
            is_x86_feature_detected!("avx2"),
            "the panel kernels need AVX2"
        );
        let groups = m.div_ceil(TILE);
        let nb = k / BLOCK;
        // The buffers of an earlier call on this thread, as they are: every lane of a
        // token is written below and the padded lanes are zeroed, so nothing stale is
        // read, and no serial pass zeroes them first.
        let spare = SPARE.with_borrow_mut(|spare| spare.take());
        let mut p = PackedX {
            m,
            k,
            groups,
            levels: Vec::new(),
            d: Vec::new(),
            s: Vec::new(),
            s16: Vec::new(),
        };
        if let Some(spare) = spare {
            (p.levels, p.d, p.s, p.s16) = (spare.levels, spare.d, spare.s, spare.s16);
        }
        p.levels.resize(groups * nb * TILE * BLOCK, 0);
        p.d.resize(groups * nb * TILE, 0.0);
        p.s.resize(groups * nb * TILE, 0.0);
        p.s16
            .resize(if halves { 2 * groups * nb * TILE } else { 0 }, 0.0);
        let (lb, sb) = (nb * TILE * BLOCK, nb * TILE);
        // Without halves every group gets an empty slice of s16.
        let s16b = if halves { 2 * sb } else { 0 };
        let mut s16 = p.s16.chunks_mut(s16b.max(1));
        let mut chunks: Vec<GroupChunks> = p
            .levels
            .chunks_mut(lb)
            .zip(p.d.chunks_mut(sb))
            .zip(p.s.chunks_mut(sb))
            .map(|(ld, s)| (ld, s, s16.next().unwrap_or_default()))
            .collect();
        let group = |g: usize, ((levels, d), s, s16): &mut GroupChunks| {
            if m - g * TILE < TILE {
                // The last group's lanes past the last token.
                levels.fill(0);
                d.fill(0.0);
                s.fill(0.0);
                s16.fill(0.0);
            }
            for lane in 0..TILE.min(m - g * TILE) {
                let t = g * TILE + lane;
                for (b, xb) in x[t * k..][..k].chunks_exact(BLOCK).enumerate() {
                    let tile = &mut levels[b * TILE * BLOCK..][..TILE * BLOCK];
                    // SAFETY: AVX2 (asserted above); 32 values in xb, 512 levels in tile,
                    // lane < 16.
                    let (db, sum, lo) = unsafe { quantize_into(xb, tile, lane) };
                    d[b * TILE + lane] = db;
                    s[b * TILE + lane] = db * sum as f32;
                    if halves {
                        s16[2 * b * TILE + lane] = db * lo as f32;
                        s16[(2 * b + 1) * TILE + lane] = db * (sum - lo) as f32;
                    }
                }
            }
        };
        team::for_each_mut(threads, &mut chunks, &group)?;
        Ok(p)
    }

    /// The levels of group g, block b (512 bytes).
    #[inline(always)]
    pub fn block_levels(&self, g: usize, b: usize) -> *const i8 {
        let nb = self.k / BLOCK;
        self.levels
            .as_ptr()
            .wrapping_add((g * nb + b) * TILE * BLOCK)
    }

    /// Index of group g, block b's 16 scales (and sums).
    #[inline(always)]
    pub fn scale_at(&self, g: usize, b: usize) -> usize {
        (g * (self.k / BLOCK) + b) * TILE
    }

    /// The 16 sums s_x of part `h` of group g, block b: the whole block's (`parts` 1) or
    /// those of its half h (`parts` 2, which [`PackedX::new`] must have been asked for).
    #[inline(always)]
    pub fn sums(&self, g: usize, b: usize, parts: usize, h: usize) -> *const f32 {
        let at = self.scale_at(g, b);
        if parts == 1 {
            self.s.as_ptr().wrapping_add(at)
        } else {
            debug_assert!(!self.s16.is_empty());
            self.s16.as_ptr().wrapping_add(2 * at + h * TILE)
        }
    }
}

/// One block of 32 values of one token quantized into its lane of a group's block (row r
/// holds values 4r..4r+4 of each token, token after token); returns d and the levels'
/// sum, and the sum of its first 16. The levels come from [`acts::quantize_block`]'s
/// vector loop, so they are the row dots' bits; a block holding a NaN or an infinity
/// takes its scalar loop.
#[target_feature(enable = "avx2")]
unsafe fn quantize_into(xb: &[f32], tile: &mut [i8], lane: usize) -> (f32, i32, i32) {
    assert!(xb.len() == BLOCK && tile.len() == TILE * BLOCK && lane < TILE);
    let mut q = [0i8; BLOCK];
    let d = acts::quantize_block(xb, &mut q);
    // SAFETY: 32 levels in q; the stores land at (r * 16 + lane) * 4 + 4 <= 512 bytes.
    unsafe {
        let v = _mm256_loadu_si256(q.as_ptr().cast());
        let pairs = _mm256_maddubs_epi16(_mm256_set1_epi8(1), v);
        let quads = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
        // Lanes 0..4 of the quads are the first 16 values, 4..8 the others.
        let lo = _mm256_castsi256_si128(quads);
        let hi = _mm256_extracti128_si256::<1>(quads);
        let two = _mm_hadd_epi32(lo, hi);
        let four = _mm_hadd_epi32(two, two);
        let dst = tile.as_mut_ptr().cast::<u32>();
        let src = q.as_ptr().cast::<u32>();
        for r in 0..BLOCK / 4 {
            dst.add(r * TILE + lane)
                .write_unaligned(src.add(r).read_unaligned());
        }
        let (first, second) = (_mm_cvtsi128_si32(four), _mm_extract_epi32::<1>(four));
        (d, first + second, first)
    }
}

/// One group's levels, scales, sums and sums per half in [`PackedX::new`].
type GroupChunks<'a> = ((&'a mut [i8], &'a mut [f32]), &'a mut [f32], &'a mut [f32]);

/// One worker's 16 rows of W unpacked: per block, 16 rows x 32 levels (zero rows past
/// W's end, 512 contiguous bytes), and per block and part ([`Kind::parts`]) 16 scales d_w
/// and 16 corrections c_w (at `(b * parts + h) * 16`).
#[derive(Default)]
pub struct Panel {
    pub levels: Vec<u8>,
    pub d: Vec<f32>,
    pub c: Vec<f32>,
}

impl Panel {
    /// The levels of block b (512 bytes).
    #[inline(always)]
    pub fn block_levels(&self, b: usize) -> *const u8 {
        self.levels.as_ptr().wrapping_add(b * TILE * BLOCK)
    }
}

/// Unpack rows `rows` (at most 16) of W, each `row_bytes` long starting at `w`, into
/// `panel`; k values per row. Needs AVX2, FMA and F16C. With `biased`, signed levels are
/// stored plus 128 (unsigned, for a kernel whose W operand is unsigned) and c_w = -128 d_w
/// takes the bias back out.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C; `ty` must have a [`kind`].
pub unsafe fn unpack(
    ty: GgmlType,
    w: &[u8],
    row_bytes: usize,
    rows: usize,
    k: usize,
    panel: &mut Panel,
    biased: bool,
) {
    let kd = kind(ty).expect("unpack only takes types with a kind");
    let nb = k / BLOCK;
    let per_row = if kd.bytes > 34 { k / QK_K } else { nb };
    assert!(rows <= TILE && w.len() >= rows * row_bytes && row_bytes == per_row * kd.bytes);
    panel.levels.clear();
    panel.levels.resize(TILE * k, 0);
    panel.d.clear();
    panel.d.resize(nb * kd.parts * TILE, 0.0);
    panel.c.clear();
    panel.c.resize(nb * kd.parts * TILE, 0.0);
    // SAFETY: the caller's CPU features; the sizes are asserted above.
    unsafe {
        match ty {
            GgmlType::Q4_0 => unpack_rows::<Q4_0L>(kd, w, row_bytes, rows, k, panel, false),
            GgmlType::Q4_1 => unpack_rows::<Q4_1L>(kd, w, row_bytes, rows, k, panel, false),
            GgmlType::Q5_0 => unpack_rows::<Q5_0L>(kd, w, row_bytes, rows, k, panel, false),
            GgmlType::Q5_1 => unpack_rows::<Q5_1L>(kd, w, row_bytes, rows, k, panel, false),
            GgmlType::Q8_0 => unpack_rows::<Q8_0L>(kd, w, row_bytes, rows, k, panel, biased),
            GgmlType::Iq4Nl => unpack_rows::<Iq4NlL>(kd, w, row_bytes, rows, k, panel, biased),
            GgmlType::Q4K => unpack_k4::<false>(w, row_bytes, rows, k, panel),
            GgmlType::Q5K => unpack_k4::<true>(w, row_bytes, rows, k, panel),
            GgmlType::Q6K => unpack_q6k(w, row_bytes, rows, k, panel),
            GgmlType::Q2K => unpack_k23::<false>(w, row_bytes, rows, k, panel),
            GgmlType::Q3K => unpack_k23::<true>(w, row_bytes, rows, k, panel),
            GgmlType::Iq4Xs => unpack_iq4xs(w, row_bytes, rows, k, panel, biased),
            _ => unreachable!("kind() is None for {}", ty.name()),
        }
    }
}

/// The weights stream from memory once per call: ask for the cache lines of a block of
/// `bytes` at `p` 2 KB ahead (a prefetch never faults, past the row's end included).
#[inline(always)]
fn prefetch_ahead(p: *const u8, bytes: usize) {
    for line in (0..bytes).step_by(64) {
        // SAFETY: a prefetch reads nothing and never faults, whatever the address.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(2048 + line).cast()) };
    }
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn unpack_rows<L: Levels>(
    kd: Kind,
    w: &[u8],
    row_bytes: usize,
    rows: usize,
    k: usize,
    panel: &mut Panel,
    biased: bool,
) {
    let nb = k / BLOCK;
    // Signed levels plus 128: the sign bit flipped.
    let (flip, offset) = if biased {
        (_mm256_set1_epi8(i8::MIN), kd.offset + 128.0)
    } else {
        (_mm256_setzero_si256(), kd.offset)
    };
    for r in 0..rows {
        let row = &w[r * row_bytes..][..row_bytes];
        for b in 0..nb {
            // SAFETY: block b of the row is `kd.bytes` long inside `row`; 32 bytes of the
            // block's levels at row r.
            unsafe {
                let blk = row.as_ptr().add(b * kd.bytes);
                prefetch_ahead(blk, kd.bytes);
                let dst = panel.levels.as_mut_ptr().add((b * TILE + r) * BLOCK);
                _mm256_storeu_si256(dst.cast(), _mm256_xor_si256(L::levels(blk), flip));
                let (d, m) = if kd.has_min {
                    halves2(blk)
                } else {
                    (half(blk), 0.0)
                };
                panel.d[b * TILE + r] = d;
                panel.c[b * TILE + r] = m - offset * d;
            }
        }
    }
}

/// Q4_K and Q5_K: each sub-block of 32 is a block, d_w = d sc_s, c_w = -dmin m_s (the
/// layouts are in [`super::quant`]).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn unpack_k4<const Q5: bool>(
    w: &[u8],
    row_bytes: usize,
    rows: usize,
    k: usize,
    panel: &mut Panel,
) {
    let bytes = if Q5 { 176 } else { 144 };
    let mask = _mm256_set1_epi8(0x0F);
    let one = _mm256_set1_epi8(1);
    for r in 0..rows {
        let row = &w[r * row_bytes..][..row_bytes];
        for sb in 0..k / QK_K {
            let blk = &row[sb * bytes..][..bytes];
            // SAFETY: every load is inside `blk` (bytes long); every store inside the
            // panel (nb blocks of 16 rows x 32 levels, nb x 16 scales).
            unsafe {
                let p = blk.as_ptr();
                prefetch_ahead(p, bytes);
                let (d, dmin) = halves2(p);
                let qs = p.add(if Q5 { 48 } else { 16 });
                let qh = if Q5 {
                    _mm256_loadu_si256(p.add(16).cast())
                } else {
                    _mm256_setzero_si256()
                };
                for c in 0..4 {
                    let q = _mm256_loadu_si256(qs.add(32 * c).cast());
                    let mut lo = _mm256_and_si256(q, mask);
                    let mut hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), mask);
                    if Q5 {
                        let h = _mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * c as i32));
                        lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(h, one), 4));
                        let h = _mm256_srli_epi16(h, 1);
                        hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(h, one), 4));
                    }
                    for (j, v) in [(2 * c, lo), (2 * c + 1, hi)] {
                        let b = sb * 8 + j;
                        let dst = panel.levels.as_mut_ptr().add((b * TILE + r) * BLOCK);
                        _mm256_storeu_si256(dst.cast(), v);
                        let (s, m) = scale_min_k4(j, &blk[4..16]);
                        panel.d[b * TILE + r] = d * s as f32;
                        panel.c[b * TILE + r] = -(dmin * m as f32);
                    }
                }
            }
        }
    }
}

/// Q6_K: levels 0..63 (the stored 6 bits, offset 32), each block of 32 in two halves of
/// 16 with their own scale: d_w = d sc, c_w = -32 d_w at `(b * 2 + h) * 16 + row` (the
/// layout is in [`super::quant`]).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn unpack_q6k(w: &[u8], row_bytes: usize, rows: usize, k: usize, panel: &mut Panel) {
    const BYTES: usize = 210;
    let low = _mm256_set1_epi8(0x0F);
    let high = _mm256_set1_epi8(0x30);
    for r in 0..rows {
        let row = &w[r * row_bytes..][..row_bytes];
        for sb in 0..k / QK_K {
            let blk = &row[sb * BYTES..][..BYTES];
            // SAFETY: every load is inside `blk` (210 bytes); every store inside the panel
            // (nb blocks of 16 rows x 32 levels, nb x 2 x 16 scales).
            unsafe {
                let p = blk.as_ptr();
                prefetch_ahead(p, BYTES);
                let d = half(p.add(208));
                for n in 0..2 {
                    let ql0 = _mm256_loadu_si256(p.add(64 * n).cast());
                    let ql1 = _mm256_loadu_si256(p.add(64 * n + 32).cast());
                    let qh = _mm256_loadu_si256(p.add(128 + 32 * n).cast());
                    // Bits 2c, 2c + 1 of qh become bits 4, 5 of block c's levels (16-bit
                    // shifts: the mask drops what crosses into the neighbouring byte).
                    let levels = [
                        _mm256_or_si256(
                            _mm256_and_si256(ql0, low),
                            _mm256_and_si256(_mm256_slli_epi16(qh, 4), high),
                        ),
                        _mm256_or_si256(
                            _mm256_and_si256(ql1, low),
                            _mm256_and_si256(_mm256_slli_epi16(qh, 2), high),
                        ),
                        _mm256_or_si256(
                            _mm256_and_si256(_mm256_srli_epi16(ql0, 4), low),
                            _mm256_and_si256(qh, high),
                        ),
                        _mm256_or_si256(
                            _mm256_and_si256(_mm256_srli_epi16(ql1, 4), low),
                            _mm256_and_si256(_mm256_srli_epi16(qh, 2), high),
                        ),
                    ];
                    for (c, v) in levels.into_iter().enumerate() {
                        let b = sb * 8 + 4 * n + c;
                        let dst = panel.levels.as_mut_ptr().add((b * TILE + r) * BLOCK);
                        _mm256_storeu_si256(dst.cast(), v);
                        for h in 0..2 {
                            let sc = blk[192 + 8 * n + 2 * c + h] as i8;
                            let dw = d * sc as f32;
                            panel.d[(2 * b + h) * TILE + r] = dw;
                            panel.c[(2 * b + h) * TILE + r] = -32.0 * dw;
                        }
                    }
                }
            }
        }
    }
}

/// Q2_K and Q3_K: levels 0..3 (Q2_K) or 0..7 (Q3_K, whose set high bit adds 4 to the low
/// two; offset 4), each block of 32 in two halves of 16 with their own scale: Q2_K's
/// d_w = d sc, c_w = -dmin m; Q3_K's d_w = d sc, c_w = -4 d_w (the layouts are in
/// [`super::quant`]).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn unpack_k23<const Q3: bool>(
    w: &[u8],
    row_bytes: usize,
    rows: usize,
    k: usize,
    panel: &mut Panel,
) {
    let bytes = if Q3 { 110 } else { 84 };
    let three = _mm256_set1_epi8(3);
    let one = _mm256_set1_epi8(1);
    for r in 0..rows {
        let row = &w[r * row_bytes..][..row_bytes];
        for sb in 0..k / QK_K {
            let blk = &row[sb * bytes..][..bytes];
            // SAFETY: every load is inside `blk` (bytes long); every store inside the
            // panel (nb blocks of 16 rows x 32 levels, nb x 2 x 16 scales).
            unsafe {
                let p = blk.as_ptr();
                prefetch_ahead(p, bytes);
                let (qs, d, dmin, sc3) = if Q3 {
                    (p.add(32), half(p.add(108)), 0.0, q3_k_scales(&blk[96..108]))
                } else {
                    let (d, dmin) = halves2(p.add(80));
                    (p.add(16), d, dmin, [0; 16])
                };
                let hmask = if Q3 {
                    _mm256_loadu_si256(p.cast())
                } else {
                    _mm256_setzero_si256()
                };
                for h in 0..2 {
                    let q = _mm256_loadu_si256(qs.add(32 * h).cast());
                    for kk in 0..4 {
                        // Value 32 j + l, j = 4 h + kk: bits 2 kk of qs[32 h + l], and for
                        // Q3_K bit j of hmask[l] (16-bit shifts, masked per byte).
                        let j = 4 * h + kk;
                        let shift = _mm_cvtsi32_si128(2 * kk as i32);
                        let mut levels = _mm256_and_si256(_mm256_srl_epi16(q, shift), three);
                        if Q3 {
                            let at = _mm_cvtsi32_si128(j as i32);
                            let hb = _mm256_and_si256(_mm256_srl_epi16(hmask, at), one);
                            levels = _mm256_or_si256(levels, _mm256_slli_epi16(hb, 2));
                        }
                        let b = sb * 8 + j;
                        let dst = panel.levels.as_mut_ptr().add((b * TILE + r) * BLOCK);
                        _mm256_storeu_si256(dst.cast(), levels);
                        for part in 0..2 {
                            let s = 2 * j + part;
                            let (dw, cw) = if Q3 {
                                let dw = d * sc3[s] as f32;
                                (dw, -4.0 * dw)
                            } else {
                                let v = blk[s];
                                (d * (v & 0xF) as f32, -(dmin * (v >> 4) as f32))
                            };
                            panel.d[(2 * b + part) * TILE + r] = dw;
                            panel.c[(2 * b + part) * TILE + r] = cw;
                        }
                    }
                }
            }
        }
    }
}

/// IQ4_XS: each sub-block of 32 is a block of IQ4_NL's signed levels (plus 128 when
/// `biased`), d_w = d (ls - 32) (the layout is in [`super::quant`]).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn unpack_iq4xs(
    w: &[u8],
    row_bytes: usize,
    rows: usize,
    k: usize,
    panel: &mut Panel,
    biased: bool,
) {
    const BYTES: usize = 136;
    let low = _mm256_set1_epi8(0x0F);
    let flip = if biased {
        _mm256_set1_epi8(i8::MIN)
    } else {
        _mm256_setzero_si256()
    };
    // SAFETY: 16 bytes of the table.
    let t = unsafe { _mm_loadu_si128(KVALUES_IQ4NL.as_ptr().cast()) };
    let table = _mm256_set_m128i(t, t);
    for r in 0..rows {
        let row = &w[r * row_bytes..][..row_bytes];
        for sb in 0..k / QK_K {
            let blk = &row[sb * BYTES..][..BYTES];
            // SAFETY: every load is inside `blk` (136 bytes); every store inside the panel
            // (nb blocks of 16 rows x 32 levels, nb x 16 scales).
            unsafe {
                let p = blk.as_ptr();
                prefetch_ahead(p, BYTES);
                let d = half(p);
                let scales_h = u16::from_le_bytes([blk[2], blk[3]]);
                for s in 0..8 {
                    let q = _mm_loadu_si128(p.add(8 + 16 * s).cast());
                    let n = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), low);
                    let levels = _mm256_xor_si256(_mm256_shuffle_epi8(table, n), flip);
                    let b = sb * 8 + s;
                    let dst = panel.levels.as_mut_ptr().add((b * TILE + r) * BLOCK);
                    _mm256_storeu_si256(dst.cast(), levels);
                    let lo = (blk[4 + s / 2] >> (4 * (s % 2))) & 0xF;
                    let hi = ((scales_h >> (2 * s)) & 3) as u8;
                    let dw = d * ((lo | (hi << 4)) as i32 - 32) as f32;
                    panel.d[b * TILE + r] = dw;
                    panel.c[b * TILE + r] = if biased { -128.0 * dw } else { 0.0 };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::qdot::{ActFormat, Acts};
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// x's packed levels, scales and sums are the row dots' (Acts) bits, block by block,
    /// with blocks on the rounding's edges (exact halves), an all-zero block, a NaN block,
    /// and a last group of 16 tokens that is not full.
    #[test]
    fn packed_levels_are_the_row_dots_bits() {
        let mut r = ChaCha8Rng::seed_from_u64(21);
        let (m, k) = (19, 96);
        let mut x: Vec<f32> = (0..m * k).map(|_| r.random_range(-3.0..3.0)).collect();
        for (i, v) in x[..32].iter_mut().enumerate() {
            *v = (i as f32 - 16.0) / 2.0 * (127.0 / 16.0) / 127.0 * 16.0;
        }
        x[32..64].fill(0.0);
        x[5 * k + 40] = f32::NAN;
        let acts = Acts::new(ActFormat::Q8x32, &x, k);
        let p = PackedX::new(&x, m, k, 2, true).unwrap();
        for t in 0..m {
            let row = acts.row(t);
            let (g, lane) = (t / TILE, t % TILE);
            for b in 0..k / BLOCK {
                let at = p.scale_at(g, b) + lane;
                assert_eq!(
                    p.d[at].to_bits(),
                    row.d[b].to_bits(),
                    "d of token {t} block {b}"
                );
                assert_eq!(
                    p.s[at].to_bits(),
                    row.ds[b].to_bits(),
                    "s of token {t} block {b}"
                );
                let levels = p.block_levels(g, b);
                for v in 0..BLOCK {
                    // SAFETY: value v of this lane inside the block's 512 bytes.
                    let got = unsafe { *levels.add(((v / 4) * TILE + lane) * 4 + v % 4) };
                    assert_eq!(got, row.qs[b * BLOCK + v], "token {t} block {b} value {v}");
                }
                for h in 0..2 {
                    let half = &row.qs[b * BLOCK + 16 * h..][..16];
                    let sum: i32 = half.iter().map(|&q| q as i32).sum();
                    // SAFETY: lane < 16 of the block's half h.
                    let got = unsafe { *p.sums(g, b, 2, h).add(lane) };
                    assert_eq!(
                        got.to_bits(),
                        (row.d[b] * sum as f32).to_bits(),
                        "sum of half {h} of token {t} block {b}"
                    );
                }
            }
        }
        let plain = PackedX::new(&x, m, k, 1, false).unwrap();
        assert!(plain.s16.is_empty());
        assert_eq!((&plain.levels, &plain.d, &plain.s), (&p.levels, &p.d, &p.s));
    }

    #[test]
    fn a_packing_after_a_bigger_one_has_nothing_stale_past_its_tokens() {
        // The second packing reuses the first one's buffers on this thread.
        let k = 64;
        let big: Vec<f32> = (0..40 * k)
            .map(|i| ((i % 23) as f32 - 11.0) * 0.3)
            .collect();
        drop(PackedX::new(&big, 40, k, 1, true).unwrap());
        let m = 5;
        let x: Vec<f32> = (0..m * k).map(|i| ((i % 7) as f32 - 3.0) * 0.5).collect();
        let p = PackedX::new(&x, m, k, 1, true).unwrap();
        assert_eq!(p.levels.len(), TILE * k);
        for b in 0..k / BLOCK {
            let levels = p.block_levels(0, b);
            for lane in m..TILE {
                for v in 0..BLOCK {
                    // SAFETY: value v of a lane < 16 inside the block's 512 bytes.
                    let got = unsafe { *levels.add(((v / 4) * TILE + lane) * 4 + v % 4) };
                    assert_eq!(got, 0, "lane {lane} block {b} value {v}");
                }
                let at = p.scale_at(0, b) + lane;
                assert_eq!((p.d[at], p.s[at]), (0.0, 0.0), "lane {lane} block {b}");
                for h in 0..2 {
                    // SAFETY: lane < 16 of the block's half h.
                    assert_eq!(unsafe { *p.sums(0, b, 2, h).add(lane) }, 0.0);
                }
            }
        }
    }
}
