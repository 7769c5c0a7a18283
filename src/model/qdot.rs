//! Dot products of one quantized weight row with one activation row, per GGML block type
//! and SIMD tier, as llama.cpp's `vec_dot_*` do them: the activation row is quantized once
//! to int8 blocks with one f32 scale each ([`Acts`]: blocks of 32 for the 32-value types,
//! of 256 for the k-quants, with the sum of every 16 values for the types' offsets and
//! minimums), and a weight block's integers meet the activation's in integer multiply-adds
//! (AVX2 `vpmaddubsw`, AVX-512 VNNI `vpdpbusd`); only the per-block scales are floats.
//! The weights are never dequantized to memory.
//!
//! Written here because no crate offers GGML's quantized dot products on their own:
//! `candle-core` has some inside its tensor framework (its own tensor and storage types),
//! `ggml` bindings bring llama.cpp's C/C++ build; the block layouts are in [`super::quant`].
//!
//! Tiers ([`QTier`]): `Scalar` dequantizes a block at a time and takes an f32 dot with
//! the f32 activations (every type, and the reference order the others are tested
//! against); `Avx2` and `Avx512Vnni` run the integer kernels for Q4_0, Q4_1, Q5_0, Q5_1,
//! Q8_0, IQ4_NL, Q4_K, Q5_K, Q6_K and an f16-to-f32 kernel for F16; the remaining types
//! (BF16, Q2_K, Q3_K, IQ4_XS) take the scalar path on every tier. The two x86 tiers share
//! every kernel; only the 8-bit multiply-add ([`x86::I8Dot`]) differs. AVX-512 VNNI is
//! used on 256-bit vectors (its VL form): a 32-value block fills one.
//!
//! Error: quantizing the activations rounds each to 1/254 of its block's largest
//! magnitude, so a dot differs from the f32 one by up to about sum |x_i w_i| / 254 (in
//! practice far less, the roundings cancel); [`super::qmatmul`] says where that is used.

use super::quant::{self, GgmlType, QK_K};
use crate::kernel::Tier;

/// Which kernels run the quantized dot products.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QTier {
    /// Dequantize a block, f32 dot with f32 activations; everywhere.
    Scalar,
    /// AVX2 + FMA + F16C integer kernels.
    Avx2,
    /// The same kernels with AVX-512 VNNI's 8-bit dot product (256-bit vectors).
    Avx512Vnni,
}

impl QTier {
    pub fn name(self) -> &'static str {
        match self {
            QTier::Scalar => "scalar",
            QTier::Avx2 => "avx2",
            QTier::Avx512Vnni => "avx512vnni",
        }
    }

    pub fn is_available(self) -> bool {
        match self {
            QTier::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            QTier::Avx2 => {
                is_x86_feature_detected!("avx2")
                    && is_x86_feature_detected!("fma")
                    && is_x86_feature_detected!("f16c")
            }
            #[cfg(target_arch = "x86_64")]
            QTier::Avx512Vnni => {
                QTier::Avx2.is_available()
                    && is_x86_feature_detected!("avx512f")
                    && is_x86_feature_detected!("avx512bw")
                    && is_x86_feature_detected!("avx512vl")
                    && is_x86_feature_detected!("avx512vnni")
            }
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// Every tier this CPU can run, slowest first.
    pub fn available() -> Vec<QTier> {
        [QTier::Scalar, QTier::Avx2, QTier::Avx512Vnni]
            .into_iter()
            .filter(|t| t.is_available())
            .collect()
    }

    /// The tier that matches the f32 kernels' tier (`ATTNVIZ_SIMD` or the best): scalar
    /// for scalar (and NEON, which has no integer kernels here), AVX2 for AVX2, VNNI for
    /// AVX-512 when the CPU has it.
    pub fn detect() -> QTier {
        let want = match Tier::detect() {
            Tier::Scalar | Tier::Neon => QTier::Scalar,
            Tier::Avx2 => QTier::Avx2,
            Tier::Avx512 => QTier::Avx512Vnni,
        };
        [want, QTier::Avx2, QTier::Scalar]
            .into_iter()
            .find(|t| t.is_available())
            .unwrap_or(QTier::Scalar)
    }
}

impl std::fmt::Display for QTier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

pub use super::acts::{ActFormat, ActRow, Acts};

/// Row dot products: `w` holds `out.len()` weight rows of equal length, one after the
/// other; out[i] = row i . the activation row. One call per block of rows, so the checks
/// of the sizes and the call itself are paid once per block, not once per row (a
/// one-thread decode step of SmolLM2 on an Intel Xeon, family 6 model 167: 12.8 -> 12.4 ms,
/// medians of 7 alternating runs).
pub type RowDot = fn(GgmlType, &[u8], ActRow<'_>, &mut [f32]);

/// The kernel for weights of type `ty` on `tier` and the activations it takes.
pub fn kernel(ty: GgmlType, tier: QTier) -> (ActFormat, RowDot) {
    #[cfg(target_arch = "x86_64")]
    if tier != QTier::Scalar
        && tier.is_available()
        && let Some(k) = x86::kernel(ty, tier == QTier::Avx512Vnni)
    {
        return k;
    }
    let _ = tier;
    (ActFormat::F32, dot_dequantized)
}

/// Scalar: dequantize up to 256 values at a time and take the f32 dot with x.
fn dot_dequantized(ty: GgmlType, w: &[u8], a: ActRow<'_>, out: &mut [f32]) {
    if out.is_empty() {
        return;
    }
    let rb = w.len() / out.len();
    for (o, row) in out.iter_mut().zip(w.chunks_exact(rb)) {
        *o = dot_dequantized_row(ty, row, a);
    }
}

fn dot_dequantized_row(ty: GgmlType, w: &[u8], a: ActRow<'_>) -> f32 {
    let be = ty.block_elems();
    let per = (QK_K / be).max(1);
    let mut buf = [0.0f32; QK_K];
    let mut acc = [0.0f32; 8];
    for (wb, xb) in w.chunks(per * ty.block_bytes()).zip(a.x.chunks(per * be)) {
        let buf = &mut buf[..xb.len()];
        quant::dequantize(ty, wb, buf);
        let (w8, wt) = buf.as_chunks::<8>();
        let (x8, xt) = xb.as_chunks::<8>();
        for (w8, x8) in w8.iter().zip(x8) {
            for i in 0..8 {
                acc[i] = w8[i].mul_add(x8[i], acc[i]);
            }
        }
        for (w, x) in wt.iter().zip(xt) {
            acc[0] = w.mul_add(*x, acc[0]);
        }
    }
    acc.iter().sum()
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    //! The AVX2 / AVX-512 VNNI kernels. Each `*_dot` is written once over [`I8Dot`] and
    //! stamped out per tier by `tiers!` inside a `#[target_feature]` function.

    use std::arch::x86_64::*;

    use super::{ActFormat, ActRow, RowDot};
    use crate::model::quant::{GgmlType, scale_min_k4};

    /// The 8-bit multiply-add of a tier: i32 lane j of the result sums bytes 4j..4j+4 of
    /// u (unsigned) times s (signed).
    pub trait I8Dot {
        unsafe fn dot(u: __m256i, s: __m256i) -> __m256i;
        /// The same with bytes 0..16 weighted by `lo`, bytes 16..32 by `hi`.
        unsafe fn scaled(u: __m256i, s: __m256i, lo: i32, hi: i32) -> __m256i;
    }

    /// `vpmaddubsw` (pairs to i16, saturating: the kernels keep |u| <= 63 or, for signed
    /// weights, |u| <= 128 with |s| <= 127, so pair sums stay below 2^15) then `vpmaddwd`.
    pub struct Avx2;
    /// `vpdpbusd`: four products summed into i32 in one instruction, no saturation.
    pub struct Vnni;

    impl I8Dot for Avx2 {
        #[inline(always)]
        unsafe fn dot(u: __m256i, s: __m256i) -> __m256i {
            unsafe { _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)) }
        }
        #[inline(always)]
        unsafe fn scaled(u: __m256i, s: __m256i, lo: i32, hi: i32) -> __m256i {
            unsafe {
                let sc = _mm256_set_m128i(_mm_set1_epi16(hi as i16), _mm_set1_epi16(lo as i16));
                _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), sc)
            }
        }
    }

    impl I8Dot for Vnni {
        #[inline(always)]
        unsafe fn dot(u: __m256i, s: __m256i) -> __m256i {
            unsafe { _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s) }
        }
        #[inline(always)]
        unsafe fn scaled(u: __m256i, s: __m256i, lo: i32, hi: i32) -> __m256i {
            unsafe {
                let sc = _mm256_set_m128i(_mm_set1_epi32(hi), _mm_set1_epi32(lo));
                _mm256_mullo_epi32(Self::dot(u, s), sc)
            }
        }
    }

    /// Signed bytes w times signed bytes x (`vpmaddubsw` takes one unsigned operand).
    #[inline(always)]
    unsafe fn dot_signed<D: I8Dot>(w: __m256i, x: __m256i) -> __m256i {
        unsafe { D::dot(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w)) }
    }

    #[inline(always)]
    unsafe fn load(p: *const u8) -> __m256i {
        unsafe { _mm256_loadu_si256(p.cast()) }
    }

    #[inline(always)]
    unsafe fn load_i8(p: *const i8) -> __m256i {
        unsafe { _mm256_loadu_si256(p.cast()) }
    }

    /// The f16 at p and the one after it, as f32.
    #[inline(always)]
    pub(crate) unsafe fn halves2(p: *const u8) -> (f32, f32) {
        unsafe {
            let v = _mm_cvtph_ps(_mm_cvtsi32_si128(p.cast::<i32>().read_unaligned()));
            (_mm_cvtss_f32(v), _mm_cvtss_f32(_mm_movehdup_ps(v)))
        }
    }

    #[inline(always)]
    pub(crate) unsafe fn half(p: *const u8) -> f32 {
        unsafe {
            let bits = p.cast::<u16>().read_unaligned() as i32;
            _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(bits)))
        }
    }

    #[inline(always)]
    unsafe fn hsum(v: __m256) -> f32 {
        unsafe {
            let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
            let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
            _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)))
        }
    }

    /// 16 bytes of packed nibbles -> 32 bytes: the low nibbles (values 0..16), then the
    /// high ones (16..32).
    #[inline(always)]
    unsafe fn nibbles(p: *const u8) -> __m256i {
        unsafe {
            let q = _mm_loadu_si128(p.cast());
            let v = _mm256_set_m128i(_mm_srli_epi16(q, 4), q);
            _mm256_and_si256(v, _mm256_set1_epi8(0x0F))
        }
    }

    /// Bit j of qh -> 16 in byte j (Q5_0 / Q5_1's fifth bits).
    #[inline(always)]
    unsafe fn fifth_bits(p: *const u8) -> __m256i {
        unsafe {
            let qh = p.cast::<i32>().read_unaligned();
            let x = _mm256_set1_epi32(qh);
            let idx = _mm256_setr_epi64x(
                0,
                0x0101_0101_0101_0101,
                0x0202_0202_0202_0202,
                0x0303_0303_0303_0303,
            );
            let b = _mm256_shuffle_epi8(x, idx);
            let b = _mm256_or_si256(b, _mm256_set1_epi64x(0x7fbf_dfef_f7fb_fdfe_u64 as i64));
            let set = _mm256_cmpeq_epi8(b, _mm256_set1_epi64x(-1));
            _mm256_and_si256(set, _mm256_set1_epi8(0x10))
        }
    }

    /// The 32-value types: `bytes` per block, unsigned levels from `levels`, then
    /// y = sum_b d_w d_x (dot - offset * sum_x) + m_w d_x sum_x. Two blocks per step into
    /// two accumulators, so that the FMA latency does not bound the loop. The accumulators
    /// are named locals, not an array indexed by `b % 2`: LLVM kept such an array on the
    /// stack, every FMA waiting on a store and a load of the one before it (a third of a
    /// decode step's time in that store, in a profile on a Zen 3).
    ///
    /// No closures here or in the kernels: a closure is a function of its own without the
    /// caller's target features, so its intrinsics would not inline (each became a call,
    /// and decoding ran 7x slower than llama.cpp). Helpers are `#[inline(always)]` fns.
    #[inline(always)]
    unsafe fn dot_32<D: I8Dot, L: Levels>(
        w: &[u8],
        a: ActRow<'_>,
        bytes: usize,
        offset: f32,
        has_min: bool,
    ) -> f32 {
        unsafe {
            let nb = a.d.len();
            let (mut acc0, mut acc1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
            let (mut corr0, mut corr1) = (0.0f32, 0.0f32);
            let mut b = 0;
            while b + 2 <= nb {
                (acc0, corr0) = step_32::<D, L>(w, a, b, bytes, offset, has_min, acc0, corr0);
                (acc1, corr1) = step_32::<D, L>(w, a, b + 1, bytes, offset, has_min, acc1, corr1);
                b += 2;
            }
            if b < nb {
                (acc0, corr0) = step_32::<D, L>(w, a, b, bytes, offset, has_min, acc0, corr0);
            }
            hsum(_mm256_add_ps(acc0, acc1)) + corr0 + corr1
        }
    }

    /// Block b of [`dot_32`] added to (acc, corr).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    unsafe fn step_32<D: I8Dot, L: Levels>(
        w: &[u8],
        a: ActRow<'_>,
        b: usize,
        bytes: usize,
        offset: f32,
        has_min: bool,
        acc: __m256,
        corr: f32,
    ) -> (__m256, f32) {
        unsafe {
            let blk = w.as_ptr().add(b * bytes);
            prefetch(blk);
            let (dw, mw) = if has_min {
                halves2(blk)
            } else {
                (half(blk), 0.0)
            };
            let p = D::dot(L::levels(blk), load_i8(a.qs.as_ptr().add(32 * b)));
            let dd = dw * *a.d.get_unchecked(b);
            (
                _mm256_fmadd_ps(_mm256_set1_ps(dd), _mm256_cvtepi32_ps(p), acc),
                corr + (mw - offset * dw) * *a.ds.get_unchecked(b),
            )
        }
    }

    /// A 32-value block's 32 levels as bytes, from the block's start.
    pub trait Levels {
        unsafe fn levels(blk: *const u8) -> __m256i;
    }
    pub struct Q4_0L;
    pub struct Q4_1L;
    pub struct Q5_0L;
    pub struct Q5_1L;
    pub struct Q8_0L;
    pub struct Iq4NlL;
    impl Levels for Q4_0L {
        #[inline(always)]
        unsafe fn levels(b: *const u8) -> __m256i {
            unsafe { nibbles(b.add(2)) }
        }
    }
    impl Levels for Q4_1L {
        #[inline(always)]
        unsafe fn levels(b: *const u8) -> __m256i {
            unsafe { nibbles(b.add(4)) }
        }
    }
    impl Levels for Q5_0L {
        #[inline(always)]
        unsafe fn levels(b: *const u8) -> __m256i {
            unsafe { _mm256_or_si256(nibbles(b.add(6)), fifth_bits(b.add(2))) }
        }
    }
    impl Levels for Q5_1L {
        #[inline(always)]
        unsafe fn levels(b: *const u8) -> __m256i {
            unsafe { _mm256_or_si256(nibbles(b.add(8)), fifth_bits(b.add(4))) }
        }
    }
    impl Levels for Q8_0L {
        #[inline(always)]
        unsafe fn levels(b: *const u8) -> __m256i {
            unsafe { load(b.add(2)) }
        }
    }
    impl Levels for Iq4NlL {
        #[inline(always)]
        unsafe fn levels(b: *const u8) -> __m256i {
            unsafe {
                let t = _mm_loadu_si128(super::quant::KVALUES_IQ4NL.as_ptr().cast());
                _mm256_shuffle_epi8(_mm256_set_m128i(t, t), nibbles(b.add(2)))
            }
        }
    }

    // block_q4_0: f16 d; u8 qs[16].  y = d (nibble - 8)
    #[inline(always)]
    unsafe fn q4_0_dot<D: I8Dot>(w: &[u8], a: ActRow<'_>) -> f32 {
        unsafe { dot_32::<D, Q4_0L>(w, a, 18, 8.0, false) }
    }

    // block_q4_1: f16 d; f16 m; u8 qs[16].  y = d nibble + m
    #[inline(always)]
    unsafe fn q4_1_dot<D: I8Dot>(w: &[u8], a: ActRow<'_>) -> f32 {
        unsafe { dot_32::<D, Q4_1L>(w, a, 20, 0.0, true) }
    }

    // block_q5_0: f16 d; u8 qh[4]; u8 qs[16].  y = d ((nibble | bit << 4) - 16)
    #[inline(always)]
    unsafe fn q5_0_dot<D: I8Dot>(w: &[u8], a: ActRow<'_>) -> f32 {
        unsafe { dot_32::<D, Q5_0L>(w, a, 22, 16.0, false) }
    }

    // block_q5_1: f16 d; f16 m; u8 qh[4]; u8 qs[16].  y = d (nibble | bit << 4) + m
    #[inline(always)]
    unsafe fn q5_1_dot<D: I8Dot>(w: &[u8], a: ActRow<'_>) -> f32 {
        unsafe { dot_32::<D, Q5_1L>(w, a, 24, 0.0, true) }
    }

    /// How far ahead of the block being read the kernels ask for weights (bytes). A
    /// decode step reads every weight once from memory, and the hardware prefetcher alone
    /// left the row dots waiting on it: on a Zen 3, Gemma 3 270M's one-thread decode step
    /// (its 178 MB Q8_0 output matrix is 43% of it) went from 45.8 to 38.7 ms with 2 KB,
    /// SmolLM2's from 24.3 to 23.2 ms (medians of 9, alternating; 512 B to 4 KB all
    /// helped). Prefetching past the end of a row or the file is harmless: a prefetch
    /// never faults.
    const PREFETCH: usize = 2048;

    /// Hint that the cache line `PREFETCH` bytes past `p` will be read soon.
    #[inline(always)]
    unsafe fn prefetch(p: *const u8) {
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH).cast()) }
    }

    /// Signed 32-value types (Q8_0, IQ4_NL): y = sum_b d_w d_x dot(levels, x), two
    /// accumulators as [`dot_32`].
    #[inline(always)]
    unsafe fn dot_32_signed<D: I8Dot, L: Levels>(w: &[u8], a: ActRow<'_>, bytes: usize) -> f32 {
        unsafe {
            let nb = a.d.len();
            let (mut acc0, mut acc1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
            let mut b = 0;
            while b + 2 <= nb {
                acc0 = step_32_signed::<D, L>(w, a, b, bytes, acc0);
                acc1 = step_32_signed::<D, L>(w, a, b + 1, bytes, acc1);
                b += 2;
            }
            if b < nb {
                acc0 = step_32_signed::<D, L>(w, a, b, bytes, acc0);
            }
            hsum(_mm256_add_ps(acc0, acc1))
        }
    }

    /// Block b of [`dot_32_signed`] added to acc.
    #[inline(always)]
    unsafe fn step_32_signed<D: I8Dot, L: Levels>(
        w: &[u8],
        a: ActRow<'_>,
        b: usize,
        bytes: usize,
        acc: __m256,
    ) -> __m256 {
        unsafe {
            let blk = w.as_ptr().add(b * bytes);
            prefetch(blk);
            let p = dot_signed::<D>(L::levels(blk), load_i8(a.qs.as_ptr().add(32 * b)));
            let dd = half(blk) * *a.d.get_unchecked(b);
            _mm256_fmadd_ps(_mm256_set1_ps(dd), _mm256_cvtepi32_ps(p), acc)
        }
    }

    // block_q8_0: f16 d; i8 qs[32].
    #[inline(always)]
    unsafe fn q8_0_dot<D: I8Dot>(w: &[u8], a: ActRow<'_>) -> f32 {
        unsafe { dot_32_signed::<D, Q8_0L>(w, a, 34) }
    }

    // block_iq4_nl: f16 d; u8 qs[16]; y = d kvalues[nibble].
    #[inline(always)]
    unsafe fn iq4_nl_dot<D: I8Dot>(w: &[u8], a: ActRow<'_>) -> f32 {
        unsafe { dot_32_signed::<D, Iq4NlL>(w, a, 18) }
    }

    /// The 8 (scale, min) pairs of a Q4_K / Q5_K super-block.
    #[inline(always)]
    fn scales_mins_k4(q: &[u8]) -> ([i32; 8], [i32; 8]) {
        let mut sc = [0; 8];
        let mut mn = [0; 8];
        for j in 0..8 {
            let (s, m) = scale_min_k4(j, q);
            sc[j] = s as i32;
            mn[j] = m as i32;
        }
        (sc, mn)
    }

    /// Q4_K and Q5_K: 8 sub-blocks of 32, y = d sc_s q - dmin m_s.
    #[inline(always)]
    unsafe fn dot_k4<D: I8Dot, const Q5: bool>(w: &[u8], a: ActRow<'_>) -> f32 {
        let bytes = if Q5 { 176 } else { 144 };
        unsafe {
            let mut acc = _mm256_setzero_ps();
            let mut corr = 0.0f32;
            let mask = _mm256_set1_epi8(0x0F);
            let one = _mm256_set1_epi8(1);
            for (b, &dx) in a.d.iter().enumerate() {
                let blk = w.as_ptr().add(b * bytes);
                for l in 0..bytes.div_ceil(64) {
                    prefetch(blk.wrapping_add(64 * l));
                }
                let (d, dmin) = halves2(blk);
                let (sc, mn) = scales_mins_k4(&w[b * bytes + 4..b * bytes + 16]);
                let qs = blk.add(if Q5 { 48 } else { 16 });
                let qh = if Q5 {
                    load(blk.add(16))
                } else {
                    _mm256_setzero_si256()
                };
                let xs = a.qs.as_ptr().add(256 * b);
                let mut isum = _mm256_setzero_si256();
                for c in 0..4 {
                    let q = load(qs.add(32 * c));
                    let mut lo = _mm256_and_si256(q, mask);
                    let mut hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), mask);
                    if Q5 {
                        let sh = _mm_cvtsi32_si128(2 * c as i32);
                        let h = _mm256_srl_epi16(qh, sh);
                        lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(h, one), 4));
                        let h = _mm256_srli_epi16(h, 1);
                        hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(h, one), 4));
                    }
                    let (s0, s1) = (sc[2 * c], sc[2 * c + 1]);
                    isum = _mm256_add_epi32(isum, D::scaled(lo, load_i8(xs.add(64 * c)), s0, s0));
                    isum =
                        _mm256_add_epi32(isum, D::scaled(hi, load_i8(xs.add(64 * c + 32)), s1, s1));
                }
                acc = _mm256_fmadd_ps(_mm256_set1_ps(d * dx), _mm256_cvtepi32_ps(isum), acc);
                let sums = &a.sums[16 * b..16 * b + 16];
                let msum: i32 = (0..8)
                    .map(|s| mn[s] * (sums[2 * s] + sums[2 * s + 1]))
                    .sum();
                corr += dmin * dx * msum as f32;
            }
            hsum(acc) - corr
        }
    }

    #[inline(always)]
    unsafe fn q4_k_dot<D: I8Dot>(w: &[u8], a: ActRow<'_>) -> f32 {
        unsafe { dot_k4::<D, false>(w, a) }
    }

    #[inline(always)]
    unsafe fn q5_k_dot<D: I8Dot>(w: &[u8], a: ActRow<'_>) -> f32 {
        unsafe { dot_k4::<D, true>(w, a) }
    }

    /// The low 2 bits of each byte of v, moved to bits 4-5 (Q6_K's high bits).
    #[inline(always)]
    unsafe fn high2(v: __m256i) -> __m256i {
        unsafe { _mm256_slli_epi16(_mm256_and_si256(v, _mm256_set1_epi8(3)), 4) }
    }

    // block_q6_K: u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d (layout in quant.rs).
    #[inline(always)]
    unsafe fn q6_k_dot<D: I8Dot>(w: &[u8], a: ActRow<'_>) -> f32 {
        unsafe {
            let mut acc = _mm256_setzero_ps();
            let mut corr = 0.0f32;
            let m4 = _mm256_set1_epi8(0x0F);
            for (b, &dx) in a.d.iter().enumerate() {
                let blk = &w[b * 210..b * 210 + 210];
                for l in 0..4 {
                    prefetch(blk.as_ptr().wrapping_add(64 * l));
                }
                let d = half(blk.as_ptr().add(208));
                let sc: [i32; 16] = std::array::from_fn(|i| blk[192 + i] as i8 as i32);
                let mut isum = _mm256_setzero_si256();
                for h in 0..2 {
                    let ql = blk.as_ptr().add(64 * h);
                    let qh = load(blk.as_ptr().add(128 + 32 * h));
                    let (l0, l1) = (load(ql), load(ql.add(32)));
                    let xs = a.qs.as_ptr().add(256 * b + 128 * h);
                    let s = &sc[8 * h..8 * h + 8];
                    let q0 = _mm256_or_si256(_mm256_and_si256(l0, m4), high2(qh));
                    let q1 =
                        _mm256_or_si256(_mm256_and_si256(l1, m4), high2(_mm256_srli_epi16(qh, 2)));
                    let q2 = _mm256_or_si256(
                        _mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                        high2(_mm256_srli_epi16(qh, 4)),
                    );
                    let q3 = _mm256_or_si256(
                        _mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                        high2(_mm256_srli_epi16(qh, 6)),
                    );
                    isum = _mm256_add_epi32(isum, D::scaled(q0, load_i8(xs), s[0], s[1]));
                    isum = _mm256_add_epi32(isum, D::scaled(q1, load_i8(xs.add(32)), s[2], s[3]));
                    isum = _mm256_add_epi32(isum, D::scaled(q2, load_i8(xs.add(64)), s[4], s[5]));
                    isum = _mm256_add_epi32(isum, D::scaled(q3, load_i8(xs.add(96)), s[6], s[7]));
                }
                let dd = d * dx;
                acc = _mm256_fmadd_ps(_mm256_set1_ps(dd), _mm256_cvtepi32_ps(isum), acc);
                let sums = &a.sums[16 * b..16 * b + 16];
                let ssum: i32 = sc.iter().zip(sums).map(|(s, x)| s * x).sum();
                corr += 32.0 * dd * ssum as f32;
            }
            hsum(acc) - corr
        }
    }

    /// F16 weights against f32 activations (F16C conversion, 4 accumulators).
    #[inline(always)]
    unsafe fn f16_dot<D: I8Dot>(w: &[u8], a: ActRow<'_>) -> f32 {
        unsafe {
            let k = a.x.len();
            let (wp, xp) = (w.as_ptr(), a.x.as_ptr());
            let mut acc = [_mm256_setzero_ps(); 4];
            let mut i = 0;
            while i + 32 <= k {
                for (j, acc) in acc.iter_mut().enumerate() {
                    let wv = _mm256_cvtph_ps(_mm_loadu_si128(wp.add(2 * (i + 8 * j)).cast()));
                    *acc = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xp.add(i + 8 * j)), *acc);
                }
                i += 32;
            }
            while i + 8 <= k {
                let wv = _mm256_cvtph_ps(_mm_loadu_si128(wp.add(2 * i).cast()));
                acc[0] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xp.add(i)), acc[0]);
                i += 8;
            }
            let s = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
            let mut sum = hsum(s);
            for t in i..k {
                sum += half(wp.add(2 * t)) * a.x[t];
            }
            sum
        }
    }

    /// For each kernel, a safe entry per tier that enables the tier's features. The
    /// entries are only handed out by [`kernel`] after the features were detected.
    macro_rules! stamp {
        ($modname:ident, $feat:literal, $d:ty, [$(($name:ident, $ty:ident)),*]) => {
            mod $modname {
                use super::*;
                $(
                    pub fn $name(_: GgmlType, w: &[u8], a: ActRow<'_>, out: &mut [f32]) {
                        #[target_feature(enable = $feat)]
                        unsafe fn inner(w: &[u8], rb: usize, a: ActRow<'_>, out: &mut [f32]) {
                            for (o, row) in out.iter_mut().zip(w.chunks_exact(rb)) {
                                *o = unsafe { super::$name::<$d>(row, a) };
                            }
                        }
                        if out.is_empty() {
                            return;
                        }
                        let rb = w.len() / out.len();
                        assert!(
                            rb * out.len() == w.len() && sizes_fit(GgmlType::$ty, &w[..rb], &a),
                            "{} row sizes",
                            stringify!($ty)
                        );
                        // SAFETY: handed out by `kernel` only where the features were
                        // detected; each row is rb bytes, whose size was just checked
                        // against the activations.
                        unsafe { inner(w, rb, a, out) }
                    }
                )*
            }
        };
    }

    /// The weight row holds as many values as the activation row, and the activations
    /// are in the kernel's format ([`kernel`] pairs them).
    fn sizes_fit(ty: GgmlType, w: &[u8], a: &ActRow<'_>) -> bool {
        let k = a.x.len();
        let blocks_ok = |bl: usize| {
            a.qs.len() == k && a.d.len() * bl == k && a.ds.len() * bl == k && a.sums.len() * 16 == k
        };
        ty.tensor_bytes(k) == Some(w.len())
            && match ty {
                GgmlType::F16 => true,
                GgmlType::Q4K | GgmlType::Q5K | GgmlType::Q6K => blocks_ok(256),
                _ => blocks_ok(32),
            }
    }

    stamp!(
        avx2,
        "avx2,fma,f16c",
        Avx2,
        [
            (q4_0_dot, Q4_0),
            (q4_1_dot, Q4_1),
            (q5_0_dot, Q5_0),
            (q5_1_dot, Q5_1),
            (q8_0_dot, Q8_0),
            (iq4_nl_dot, Iq4Nl),
            (q4_k_dot, Q4K),
            (q5_k_dot, Q5K),
            (q6_k_dot, Q6K),
            (f16_dot, F16)
        ]
    );
    stamp!(
        vnni,
        "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni",
        Vnni,
        [
            (q4_0_dot, Q4_0),
            (q4_1_dot, Q4_1),
            (q5_0_dot, Q5_0),
            (q5_1_dot, Q5_1),
            (q8_0_dot, Q8_0),
            (iq4_nl_dot, Iq4Nl),
            (q4_k_dot, Q4K),
            (q5_k_dot, Q5K),
            (q6_k_dot, Q6K),
            (f16_dot, F16)
        ]
    );

    /// The kernel of `ty` on AVX2 or (`vnni`) AVX-512 VNNI, if it has one.
    pub fn kernel(ty: GgmlType, vnni: bool) -> Option<(ActFormat, RowDot)> {
        use GgmlType as T;
        macro_rules! pick {
            ($name:ident) => {
                if vnni {
                    vnni::$name as RowDot
                } else {
                    avx2::$name as RowDot
                }
            };
        }
        Some(match ty {
            T::Q4_0 => (ActFormat::Q8x32, pick!(q4_0_dot)),
            T::Q4_1 => (ActFormat::Q8x32, pick!(q4_1_dot)),
            T::Q5_0 => (ActFormat::Q8x32, pick!(q5_0_dot)),
            T::Q5_1 => (ActFormat::Q8x32, pick!(q5_1_dot)),
            T::Q8_0 => (ActFormat::Q8x32, pick!(q8_0_dot)),
            T::Iq4Nl => (ActFormat::Q8x32, pick!(iq4_nl_dot)),
            T::Q4K => (ActFormat::Q8x256, pick!(q4_k_dot)),
            T::Q5K => (ActFormat::Q8x256, pick!(q5_k_dot)),
            T::Q6K => (ActFormat::Q8x256, pick!(q6_k_dot)),
            T::F16 => (ActFormat::F32, pick!(f16_dot)),
            _ => return None,
        })
    }
}
