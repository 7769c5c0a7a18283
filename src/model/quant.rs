//! GGML tensor types and their dequantization to f32.
//!
//! Block layouts follow llama.cpp's `ggml-common.h` (and gguf-py's `quants.py`); every
//! function writes straight into the caller's output slice, so a tensor is dequantized
//! into its final `Vec<f32>` without an intermediate copy. All multi-byte fields are
//! little-endian; `f16` fields are IEEE half floats.

/// The tensor types attnviz can load (GGML type ids in GGUF tensor infos).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GgmlType {
    F32,
    F16,
    Bf16,
    Q8_0,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q2K,
    Q3K,
    Q4K,
    Q5K,
    Q6K,
    Iq4Nl,
    Iq4Xs,
}

/// Every supported type with its GGML name, for error messages.
pub const SUPPORTED: &str =
    "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS";

/// Super-block size of the k-quants.
pub const QK_K: usize = 256;

impl GgmlType {
    /// The type for a GGML type id, or None when attnviz cannot dequantize it.
    pub fn from_id(id: u32) -> Option<Self> {
        Some(match id {
            0 => GgmlType::F32,
            1 => GgmlType::F16,
            2 => GgmlType::Q4_0,
            3 => GgmlType::Q4_1,
            6 => GgmlType::Q5_0,
            7 => GgmlType::Q5_1,
            8 => GgmlType::Q8_0,
            10 => GgmlType::Q2K,
            11 => GgmlType::Q3K,
            12 => GgmlType::Q4K,
            13 => GgmlType::Q5K,
            14 => GgmlType::Q6K,
            20 => GgmlType::Iq4Nl,
            23 => GgmlType::Iq4Xs,
            30 => GgmlType::Bf16,
            _ => return None,
        })
    }

    /// The GGML type id.
    pub fn id(self) -> u32 {
        match self {
            GgmlType::F32 => 0,
            GgmlType::F16 => 1,
            GgmlType::Q4_0 => 2,
            GgmlType::Q4_1 => 3,
            GgmlType::Q5_0 => 6,
            GgmlType::Q5_1 => 7,
            GgmlType::Q8_0 => 8,
            GgmlType::Q2K => 10,
            GgmlType::Q3K => 11,
            GgmlType::Q4K => 12,
            GgmlType::Q5K => 13,
            GgmlType::Q6K => 14,
            GgmlType::Iq4Nl => 20,
            GgmlType::Iq4Xs => 23,
            GgmlType::Bf16 => 30,
        }
    }

    /// GGML's name of a type id (also for types attnviz does not load), for messages.
    pub fn name_of_id(id: u32) -> String {
        let name = match id {
            0 => "F32",
            1 => "F16",
            2 => "Q4_0",
            3 => "Q4_1",
            6 => "Q5_0",
            7 => "Q5_1",
            8 => "Q8_0",
            9 => "Q8_1",
            10 => "Q2_K",
            11 => "Q3_K",
            12 => "Q4_K",
            13 => "Q5_K",
            14 => "Q6_K",
            15 => "Q8_K",
            16 => "IQ2_XXS",
            17 => "IQ2_XS",
            18 => "IQ3_XXS",
            19 => "IQ1_S",
            20 => "IQ4_NL",
            21 => "IQ3_S",
            22 => "IQ2_S",
            23 => "IQ4_XS",
            24 => "I8",
            25 => "I16",
            26 => "I32",
            27 => "I64",
            28 => "F64",
            29 => "IQ1_M",
            30 => "BF16",
            34 => "TQ1_0",
            35 => "TQ2_0",
            39 => "MXFP4",
            _ => return format!("type id {id}"),
        };
        format!("{name} (type id {id})")
    }

    pub fn name(self) -> &'static str {
        match self {
            GgmlType::F32 => "F32",
            GgmlType::F16 => "F16",
            GgmlType::Bf16 => "BF16",
            GgmlType::Q8_0 => "Q8_0",
            GgmlType::Q4_0 => "Q4_0",
            GgmlType::Q4_1 => "Q4_1",
            GgmlType::Q5_0 => "Q5_0",
            GgmlType::Q5_1 => "Q5_1",
            GgmlType::Q2K => "Q2_K",
            GgmlType::Q3K => "Q3_K",
            GgmlType::Q4K => "Q4_K",
            GgmlType::Q5K => "Q5_K",
            GgmlType::Q6K => "Q6_K",
            GgmlType::Iq4Nl => "IQ4_NL",
            GgmlType::Iq4Xs => "IQ4_XS",
        }
    }

    /// Elements per block.
    pub fn block_elems(self) -> usize {
        match self {
            GgmlType::F32 | GgmlType::F16 | GgmlType::Bf16 => 1,
            GgmlType::Q8_0
            | GgmlType::Q4_0
            | GgmlType::Q4_1
            | GgmlType::Q5_0
            | GgmlType::Q5_1
            | GgmlType::Iq4Nl => 32,
            GgmlType::Q2K
            | GgmlType::Q3K
            | GgmlType::Q4K
            | GgmlType::Q5K
            | GgmlType::Q6K
            | GgmlType::Iq4Xs => QK_K,
        }
    }

    /// Bytes per block.
    pub fn block_bytes(self) -> usize {
        match self {
            GgmlType::F32 => 4,
            GgmlType::F16 | GgmlType::Bf16 => 2,
            GgmlType::Q8_0 => 2 + 32,
            GgmlType::Q4_0 => 2 + 16,
            GgmlType::Q4_1 => 2 + 2 + 16,
            GgmlType::Q5_0 => 2 + 4 + 16,
            GgmlType::Q5_1 => 2 + 2 + 4 + 16,
            GgmlType::Q2K => QK_K / 16 + QK_K / 4 + 2 + 2,
            GgmlType::Q3K => QK_K / 8 + QK_K / 4 + 12 + 2,
            GgmlType::Q4K => 2 + 2 + 12 + QK_K / 2,
            GgmlType::Q5K => 2 + 2 + 12 + QK_K / 8 + QK_K / 2,
            GgmlType::Q6K => QK_K / 2 + QK_K / 4 + QK_K / 16 + 2,
            GgmlType::Iq4Nl => 2 + 16,
            GgmlType::Iq4Xs => 2 + 2 + QK_K / 64 + QK_K / 2,
        }
    }

    /// Bytes of a tensor of `elems` elements (a whole number of blocks), or None when
    /// `elems` is not a multiple of the block size.
    pub fn tensor_bytes(self, elems: usize) -> Option<usize> {
        let b = self.block_elems();
        elems
            .is_multiple_of(b)
            .then(|| elems / b * self.block_bytes())
    }
}

/// Dequantize `src` (exactly `out.len() / block_elems` blocks of type `ty`) into `out`.
///
/// The caller checks the sizes; a mismatch is a bug (this function panics on it).
pub fn dequantize(ty: GgmlType, src: &[u8], out: &mut [f32]) {
    let be = ty.block_elems();
    let bb = ty.block_bytes();
    assert_eq!(out.len() % be, 0, "{} tensor size", ty.name());
    assert_eq!(src.len(), out.len() / be * bb, "{} tensor bytes", ty.name());
    // The element loops compiled for the CPU's vector tier. The block functions stay
    // calls of their own: inlined into the block loop, LLVM vectorised across blocks with
    // scatter stores, 1.2x slower than these calls (SmolLM2's prefill, AMD EPYC family 26).
    crate::kernel::Tier::detect().dispatch(Dequantize { ty, src, out });
}

struct Dequantize<'a> {
    ty: GgmlType,
    src: &'a [u8],
    out: &'a mut [f32],
}

impl pulp::WithSimd for Dequantize<'_> {
    type Output = ();
    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _: S) {
        let (src, out) = (self.src, self.out);
        match self.ty {
            // One element per "block": convert in bulk.
            GgmlType::F32 => {
                for (o, c) in out.iter_mut().zip(src.as_chunks::<4>().0) {
                    *o = f32::from_le_bytes(*c);
                }
            }
            GgmlType::F16 => {
                for (o, c) in out.iter_mut().zip(src.as_chunks::<2>().0) {
                    *o = half_at(c, 0);
                }
            }
            GgmlType::Bf16 => {
                for (o, c) in out.iter_mut().zip(src.as_chunks::<2>().0) {
                    *o = f32::from_bits((u16::from_le_bytes(*c) as u32) << 16);
                }
            }
            GgmlType::Q8_0 => blocks::<34, 32>(src, out, q8_0_block),
            GgmlType::Q4_0 => blocks::<18, 32>(src, out, q4_0_block),
            GgmlType::Q4_1 => blocks::<20, 32>(src, out, q4_1_block),
            GgmlType::Q5_0 => blocks::<22, 32>(src, out, q5_0_block),
            GgmlType::Q5_1 => blocks::<24, 32>(src, out, q5_1_block),
            GgmlType::Q2K => blocks::<84, QK_K>(src, out, q2_k_block),
            GgmlType::Q3K => blocks::<110, QK_K>(src, out, q3_k_block),
            GgmlType::Q4K => blocks::<144, QK_K>(src, out, q4_k_block),
            GgmlType::Q5K => blocks::<176, QK_K>(src, out, q5_k_block),
            GgmlType::Q6K => blocks::<210, QK_K>(src, out, q6_k_block),
            GgmlType::Iq4Nl => blocks::<18, 32>(src, out, iq4_nl_block),
            GgmlType::Iq4Xs => blocks::<136, QK_K>(src, out, iq4_xs_block),
        }
    }
}

/// Every block of `src` (BB bytes each) into BE values of `out`, through `f`.
#[inline(always)]
fn blocks<const BB: usize, const BE: usize>(
    src: &[u8],
    out: &mut [f32],
    f: impl Fn(&[u8], &mut [f32]),
) {
    for (b, y) in src
        .as_chunks::<BB>()
        .0
        .iter()
        .zip(out.as_chunks_mut::<BE>().0)
    {
        f(&b[..], &mut y[..]);
    }
}

/// The IEEE half at b[i..i + 2] as f32. Written out (not `half::f16::to_f32`, which
/// checks the CPU for F16C on every call and cannot inline) so that it inlines into the
/// block loops: the 15 bits below the sign, moved to an f32's exponent and mantissa
/// fields, give the value times 2^-112 exactly (subnormal halves become subnormal f32s),
/// and one multiplication by 2^112 rescales; infinities and NaNs keep their payload.
#[inline(always)]
fn half_at(b: &[u8], i: usize) -> f32 {
    let h = u16::from_le_bytes([b[i], b[i + 1]]) as u32;
    let sign = (h & 0x8000) << 16;
    let em = h & 0x7fff;
    let v = if em >= 0x7c00 {
        f32::from_bits((em << 13) | 0x7f80_0000)
    } else {
        f32::from_bits(em << 13) * f32::from_bits(0x7780_0000)
    };
    f32::from_bits(v.to_bits() | sign)
}

// block_q8_0 (34 bytes, 32 values):
//   f16 d; i8 qs[32];
//   y[j] = d * qs[j]
#[inline(always)]
fn q8_0_block(b: &[u8], y: &mut [f32]) {
    let d = half_at(b, 0);
    for (j, o) in y.iter_mut().enumerate() {
        *o = d * (b[2 + j] as i8) as f32;
    }
}

// block_q4_0 (18 bytes, 32 values):
//   f16 d; u8 qs[16];
//   y[j]      = d * ((qs[j] & 0xF) - 8)
//   y[j + 16] = d * ((qs[j] >> 4)  - 8)      for j in 0..16
#[inline(always)]
fn q4_0_block(b: &[u8], y: &mut [f32]) {
    let d = half_at(b, 0);
    let qs = &b[2..18];
    for j in 0..16 {
        y[j] = d * ((qs[j] & 0xF) as i32 - 8) as f32;
        y[j + 16] = d * ((qs[j] >> 4) as i32 - 8) as f32;
    }
}

// block_q4_1 (20 bytes, 32 values):
//   f16 d; f16 m; u8 qs[16];
//   y[j]      = d * (qs[j] & 0xF) + m
//   y[j + 16] = d * (qs[j] >> 4)  + m        for j in 0..16
#[inline(always)]
fn q4_1_block(b: &[u8], y: &mut [f32]) {
    let d = half_at(b, 0);
    let m = half_at(b, 2);
    let qs = &b[4..20];
    for j in 0..16 {
        y[j] = d * (qs[j] & 0xF) as f32 + m;
        y[j + 16] = d * (qs[j] >> 4) as f32 + m;
    }
}

// block_q5_0 (22 bytes, 32 values):
//   f16 d; u8 qh[4] (the 5th bits, one u32 little-endian: bit j for value j); u8 qs[16];
//   y[j]      = d * (((qs[j] & 0xF) | bit(qh, j) << 4)      - 16)
//   y[j + 16] = d * (((qs[j] >> 4)  | bit(qh, j + 16) << 4) - 16)   for j in 0..16
#[inline(always)]
fn q5_0_block(b: &[u8], y: &mut [f32]) {
    let d = half_at(b, 0);
    let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
    let qs = &b[6..22];
    for j in 0..16 {
        let h0 = ((qh >> j) & 1) as u8;
        let h1 = ((qh >> (j + 16)) & 1) as u8;
        y[j] = d * (((qs[j] & 0xF) | (h0 << 4)) as i32 - 16) as f32;
        y[j + 16] = d * (((qs[j] >> 4) | (h1 << 4)) as i32 - 16) as f32;
    }
}

// block_q5_1 (24 bytes, 32 values):
//   f16 d; f16 m; u8 qh[4] (as Q5_0); u8 qs[16];
//   y[j]      = d * ((qs[j] & 0xF) | bit(qh, j) << 4)      + m
//   y[j + 16] = d * ((qs[j] >> 4)  | bit(qh, j + 16) << 4) + m      for j in 0..16
#[inline(always)]
fn q5_1_block(b: &[u8], y: &mut [f32]) {
    let d = half_at(b, 0);
    let m = half_at(b, 2);
    let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    let qs = &b[8..24];
    for j in 0..16 {
        let h0 = ((qh >> j) & 1) as u8;
        let h1 = ((qh >> (j + 16)) & 1) as u8;
        y[j] = d * ((qs[j] & 0xF) | (h0 << 4)) as f32 + m;
        y[j + 16] = d * ((qs[j] >> 4) | (h1 << 4)) as f32 + m;
    }
}

/// The 6-bit scale and min of sub-block `j` (0..8) of a Q4_K/Q5_K super-block, packed in
/// 12 bytes: sub-blocks 0..4 keep scale and min in the low 6 bits of bytes j and j+4;
/// sub-blocks 4..8 keep their low 4 bits in the nibbles of byte j+4 and their high 2 bits
/// in the top bits of bytes j-4 (scale) and j (min).
#[inline(always)]
pub fn scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

// block_q2_K (84 bytes, 256 values = 16 sub-blocks of 16):
//   u8 scales[16] (sub-block s: scale in the low nibble, min in the high nibble);
//   u8 qs[64] (2-bit quants); f16 d; f16 dmin;
//   half h in 0..2 covers values 128h..128h+128 with qs[32h..32h+32]; shift k in 0..4:
//   q = (qs[32h + l] >> 2k) & 3 is value v = 128h + 32k + l (l in 0..32), sub-block v/16:
//   y[v] = d * (scales[v/16] & 0xF) * q - dmin * (scales[v/16] >> 4)
#[inline(always)]
fn q2_k_block(b: &[u8], y: &mut [f32]) {
    let scales = &b[0..16];
    let qs = &b[16..80];
    let d = half_at(b, 80);
    let dmin = half_at(b, 82);
    for h in 0..2 {
        let q = &qs[32 * h..32 * h + 32];
        for k in 0..4 {
            let v0 = 128 * h + 32 * k;
            for half16 in 0..2 {
                let sc = scales[v0 / 16 + half16];
                let dl = d * (sc & 0xF) as f32;
                let ml = dmin * (sc >> 4) as f32;
                for l in 16 * half16..16 * half16 + 16 {
                    y[v0 + l] = dl * ((q[l] >> (2 * k)) & 3) as f32 - ml;
                }
            }
        }
    }
}

/// The 16 signed 6-bit scales of a Q3_K super-block, packed in 12 bytes: the low 4 bits
/// of scale s are the low nibble of byte s (s < 8) or the high nibble of byte s - 8
/// (s >= 8); its high 2 bits are bits 2(s/4)..2(s/4)+2 of byte 8 + s%4; the stored
/// value is offset by 32.
#[inline(always)]
pub(crate) fn q3_k_scales(q: &[u8]) -> [i32; 16] {
    let mut out = [0i32; 16];
    for (s, o) in out.iter_mut().enumerate() {
        let lo = if s < 8 { q[s] & 0xF } else { q[s - 8] >> 4 };
        let hi = (q[8 + s % 4] >> (2 * (s / 4))) & 3;
        *o = (lo | (hi << 4)) as i32 - 32;
    }
    out
}

// block_q3_K (110 bytes, 256 values = 16 sub-blocks of 16):
//   u8 hmask[32] (high bits); u8 qs[64] (low 2 bits); u8 scales[12] (see q3_k_scales);
//   f16 d;
//   the low 2 bits of value v sit as in Q2_K: v = 128h + 32k + l takes (qs[32h + l] >> 2k) & 3;
//   its high bit is bit v/32 of hmask[v % 32], and a CLEAR bit subtracts 4:
//   y[v] = d * sc[v/16] * (((qs[32h + l] >> 2k) & 3) - (bit(hmask[l], v/32) ? 0 : 4))
#[inline(always)]
fn q3_k_block(b: &[u8], y: &mut [f32]) {
    let hmask = &b[0..32];
    let qs = &b[32..96];
    let sc = q3_k_scales(&b[96..108]);
    let d = half_at(b, 108);
    for h in 0..2 {
        let q = &qs[32 * h..32 * h + 32];
        for k in 0..4 {
            let v0 = 128 * h + 32 * k;
            let m = 1u8 << (4 * h + k);
            for half16 in 0..2 {
                let dl = d * sc[v0 / 16 + half16] as f32;
                for l in 16 * half16..16 * half16 + 16 {
                    let low = ((q[l] >> (2 * k)) & 3) as i32;
                    let off = if hmask[l] & m != 0 { 0 } else { 4 };
                    y[v0 + l] = dl * (low - off) as f32;
                }
            }
        }
    }
}

// block_q4_K (144 bytes, 256 values = 8 sub-blocks of 32):
//   f16 d; f16 dmin; u8 scales[12] (6-bit scale sc_s and min m_s per sub-block, see
//   scale_min_k4); u8 qs[128];
//   chunk c in 0..4 covers values 64c..64c+64 with qs[32c..32c+32]:
//   y[64c + l]      = d * sc_{2c}   * (qs[32c+l] & 0xF) - dmin * m_{2c}
//   y[64c + 32 + l] = d * sc_{2c+1} * (qs[32c+l] >> 4)  - dmin * m_{2c+1}
#[inline(always)]
fn q4_k_block(b: &[u8], y: &mut [f32]) {
    let d = half_at(b, 0);
    let dmin = half_at(b, 2);
    let scales = &b[4..16];
    let qs = &b[16..144];
    for c in 0..4 {
        let (s1, m1) = scale_min_k4(2 * c, scales);
        let (s2, m2) = scale_min_k4(2 * c + 1, scales);
        let (d1, m1) = (d * s1 as f32, dmin * m1 as f32);
        let (d2, m2) = (d * s2 as f32, dmin * m2 as f32);
        let q = &qs[32 * c..32 * c + 32];
        for l in 0..32 {
            y[64 * c + l] = d1 * (q[l] & 0xF) as f32 - m1;
            y[64 * c + 32 + l] = d2 * (q[l] >> 4) as f32 - m2;
        }
    }
}

// block_q5_K (176 bytes, 256 values = 8 sub-blocks of 32):
//   f16 d; f16 dmin; u8 scales[12] (as Q4_K); u8 qh[32]; u8 qs[128];
//   the 5th bit of value 64c + l is bit 2c of qh[l], of value 64c + 32 + l bit 2c+1:
//   y[64c + l]      = d * sc_{2c}   * ((qs[32c+l] & 0xF) + 16 * bit(qh[l], 2c))   - dmin * m_{2c}
//   y[64c + 32 + l] = d * sc_{2c+1} * ((qs[32c+l] >> 4)  + 16 * bit(qh[l], 2c+1)) - dmin * m_{2c+1}
#[inline(always)]
fn q5_k_block(b: &[u8], y: &mut [f32]) {
    let d = half_at(b, 0);
    let dmin = half_at(b, 2);
    let scales = &b[4..16];
    let qh = &b[16..48];
    let qs = &b[48..176];
    for c in 0..4 {
        let (s1, m1) = scale_min_k4(2 * c, scales);
        let (s2, m2) = scale_min_k4(2 * c + 1, scales);
        let (d1, m1) = (d * s1 as f32, dmin * m1 as f32);
        let (d2, m2) = (d * s2 as f32, dmin * m2 as f32);
        let q = &qs[32 * c..32 * c + 32];
        let (u1, u2) = (1u8 << (2 * c), 1u8 << (2 * c + 1));
        for l in 0..32 {
            let h1 = if qh[l] & u1 != 0 { 16 } else { 0 };
            let h2 = if qh[l] & u2 != 0 { 16 } else { 0 };
            y[64 * c + l] = d1 * ((q[l] & 0xF) + h1) as f32 - m1;
            y[64 * c + 32 + l] = d2 * ((q[l] >> 4) + h2) as f32 - m2;
        }
    }
}

// block_q6_K (210 bytes, 256 values = 16 sub-blocks of 16):
//   u8 ql[128] (low 4 bits); u8 qh[64] (high 2 bits); i8 scales[16]; f16 d;
//   half h in 0..2 covers values 128h..128h+128 with ql[64h..], qh[32h..], scales[8h..]:
//   for l in 0..32, with L = ql[64h + l], L' = ql[64h + 32 + l], H = qh[32h + l]:
//   q0 = (L  & 0xF) | ((H >> 0) & 3) << 4,   y[128h + l]      = d * sc[8h + l/16]     * (q0 - 32)
//   q1 = (L' & 0xF) | ((H >> 2) & 3) << 4,   y[128h + 32 + l] = d * sc[8h + l/16 + 2] * (q1 - 32)
//   q2 = (L  >> 4)  | ((H >> 4) & 3) << 4,   y[128h + 64 + l] = d * sc[8h + l/16 + 4] * (q2 - 32)
//   q3 = (L' >> 4)  | ((H >> 6) & 3) << 4,   y[128h + 96 + l] = d * sc[8h + l/16 + 6] * (q3 - 32)
#[inline(always)]
fn q6_k_block(b: &[u8], y: &mut [f32]) {
    let ql = &b[0..128];
    let qh = &b[128..192];
    let sc = &b[192..208];
    let d = half_at(b, 208);
    for h in 0..2 {
        let ql = &ql[64 * h..64 * h + 64];
        let qh = &qh[32 * h..32 * h + 32];
        let sc = &sc[8 * h..8 * h + 8];
        let y = &mut y[128 * h..128 * h + 128];
        for l in 0..32 {
            let is = l / 16;
            let hb = qh[l];
            let q0 = ((ql[l] & 0xF) | ((hb & 3) << 4)) as i32 - 32;
            let q1 = ((ql[l + 32] & 0xF) | (((hb >> 2) & 3) << 4)) as i32 - 32;
            let q2 = ((ql[l] >> 4) | (((hb >> 4) & 3) << 4)) as i32 - 32;
            let q3 = ((ql[l + 32] >> 4) | (((hb >> 6) & 3) << 4)) as i32 - 32;
            y[l] = d * (sc[is] as i8) as f32 * q0 as f32;
            y[l + 32] = d * (sc[is + 2] as i8) as f32 * q1 as f32;
            y[l + 64] = d * (sc[is + 4] as i8) as f32 * q2 as f32;
            y[l + 96] = d * (sc[is + 6] as i8) as f32 * q3 as f32;
        }
    }
}

/// The 16 non-uniform levels of IQ4_NL and IQ4_XS (llama.cpp's `kvalues_iq4nl`).
pub(crate) const KVALUES_IQ4NL: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

// block_iq4_nl (18 bytes, 32 values):
//   f16 d; u8 qs[16];
//   y[j]      = d * kvalues[qs[j] & 0xF]
//   y[j + 16] = d * kvalues[qs[j] >> 4]      for j in 0..16
#[inline(always)]
fn iq4_nl_block(b: &[u8], y: &mut [f32]) {
    let d = half_at(b, 0);
    let qs = &b[2..18];
    for j in 0..16 {
        y[j] = d * KVALUES_IQ4NL[(qs[j] & 0xF) as usize] as f32;
        y[j + 16] = d * KVALUES_IQ4NL[(qs[j] >> 4) as usize] as f32;
    }
}

// block_iq4_xs (136 bytes, 256 values = 8 sub-blocks of 32):
//   f16 d; u16 scales_h (2 high bits per sub-block); u8 scales_l[4] (a nibble per
//   sub-block, low nibble first); u8 qs[128];
//   sub-block s: ls = (nibble s of scales_l) | ((scales_h >> 2s) & 3) << 4, dl = d * (ls - 32);
//   y[32s + j]      = dl * kvalues[qs[16s + j] & 0xF]
//   y[32s + 16 + j] = dl * kvalues[qs[16s + j] >> 4]     for j in 0..16
#[inline(always)]
fn iq4_xs_block(b: &[u8], y: &mut [f32]) {
    let d = half_at(b, 0);
    let scales_h = u16::from_le_bytes([b[2], b[3]]);
    let scales_l = &b[4..8];
    let qs = &b[8..136];
    for s in 0..8 {
        let lo = (scales_l[s / 2] >> (4 * (s % 2))) & 0xF;
        let hi = ((scales_h >> (2 * s)) & 3) as u8;
        let dl = d * ((lo | (hi << 4)) as i32 - 32) as f32;
        let q = &qs[16 * s..16 * s + 16];
        let y = &mut y[32 * s..32 * s + 32];
        for j in 0..16 {
            y[j] = dl * KVALUES_IQ4NL[(q[j] & 0xF) as usize] as f32;
            y[j + 16] = dl * KVALUES_IQ4NL[(q[j] >> 4) as usize] as f32;
        }
    }
}

#[cfg(test)]
#[path = "quant_tests.rs"]
mod tests;
