//! Quantized products over many rows of x on Intel AMX (Advanced Matrix Extensions), the
//! tile unit of Sapphire Rapids and later Xeons, llama.cpp's way on such a CPU: x is
//! quantized to int8 blocks of 32 values (one f32 scale each, as for [`super::qdot`]'s
//! row dots), W's blocks are unpacked to their integer levels, and one `tdpbusd` (or
//! `tdpbssd` for signed levels) multiplies 16 rows of W by 16 tokens over one block:
//! 16 x 16 x 32 multiply-adds in one instruction. Each block's int32 tile then meets its
//! scales in AVX-512: acc[row] += tile[row] * d_w d_x + c_w s_x, where s_x = d_x sum q_x
//! and c_w is the block's minimum (Q4_1, Q5_1) or its offset times d_w (Q4_0: -8 d_w).
//!
//! Layout: A tiles are W's levels, 16 rows x 32 bytes, read from a per-thread buffer of
//! 16 unpacked rows stored block by block (each tile 512 contiguous bytes); B tiles are
//! x's, 8 rows x 64 bytes in the VNNI order the unit wants (four consecutive values of
//! each of 16 tokens per row), packed once per call. Four result tiles take the blocks in turn, so three multiplies are in flight
//! while a block's result meets its scales. Measured on an Intel Xeon (family 6 model
//! 167): one 16 x 16 x 32 multiply takes 5.2 ns, 11.9 ns with its tile loads and the store
//! of its result; the prefill of 128 tokens on SmolLM2 (Q4_1, one thread) went from 274 ms
//! on the f32 tiles to 104 ms.
//!
//! Written here because Rust's AMX intrinsics are unstable (`x86_amx_intrinsics`): the
//! tile instructions are inline assembly, which stable Rust accepts. Linux hands a process
//! the tile registers only after it asks (`arch_prctl(ARCH_REQ_XCOMP_PERM)`); [`available`]
//! asks once. Set `ATTNVIZ_AMX=off` to leave the unit unused.

use std::arch::asm;
use std::arch::x86_64::*;
use std::sync::OnceLock;

use crate::error::Result;
use crate::kernel::team;

use super::qdot::x86::{Iq4NlL, Levels, Q4_0L, Q4_1L, Q5_0L, Q5_1L, Q8_0L, half, halves2};
use super::quant::GgmlType;

/// Environment variable: `off` keeps every product off the tile unit.
pub const AMX_ENV: &str = "ATTNVIZ_AMX";

/// Rows of W (and tokens) per tile.
pub const TILE: usize = 16;

/// Values per quantized block of x (and of W's levels).
const BLOCK: usize = 32;

/// Whether this CPU and kernel let the process use AMX-INT8 (asked once per process).
pub fn available() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        if std::env::var(AMX_ENV).is_ok_and(|v| v.trim().eq_ignore_ascii_case("off")) {
            return false;
        }
        cpu_has_amx() && request_permission()
    })
}

fn cpu_has_amx() -> bool {
    // CPUID leaf 7: EDX bit 24 AMX-TILE, bit 25 AMX-INT8; AVX-512 for the scales.
    let leaf7 = __cpuid_count(7, 0);
    let amx = leaf7.edx >> 24 & 1 == 1 && leaf7.edx >> 25 & 1 == 1;
    amx && is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx2")
        && is_x86_feature_detected!("f16c")
        && is_x86_feature_detected!("fma")
}

/// `arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`: 0 when Linux grants the tiles.
#[cfg(target_os = "linux")]
fn request_permission() -> bool {
    const SYS_ARCH_PRCTL: i64 = 158;
    const ARCH_REQ_XCOMP_PERM: i64 = 0x1023;
    const XFEATURE_XTILEDATA: i64 = 18;
    let ret: i64;
    // SAFETY: a system call that only changes this process's permitted state components;
    // it clobbers rcx and r11 as every `syscall` does.
    unsafe {
        asm!(
            "syscall",
            inlateout("rax") SYS_ARCH_PRCTL => ret,
            in("rdi") ARCH_REQ_XCOMP_PERM,
            in("rsi") XFEATURE_XTILEDATA,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack)
        );
    }
    ret == 0
}

#[cfg(not(target_os = "linux"))]
fn request_permission() -> bool {
    false
}

/// How a type's blocks become tile rows: bytes per block, the offset subtracted from its
/// levels, whether it stores a minimum, whether its levels are signed.
#[derive(Clone, Copy)]
struct Kind {
    bytes: usize,
    offset: f32,
    has_min: bool,
    signed: bool,
}

fn kind(ty: GgmlType) -> Option<Kind> {
    let k = |bytes, offset, has_min, signed| {
        Some(Kind {
            bytes,
            offset,
            has_min,
            signed,
        })
    };
    match ty {
        GgmlType::Q4_0 => k(18, 8.0, false, false),
        GgmlType::Q4_1 => k(20, 0.0, true, false),
        GgmlType::Q5_0 => k(22, 16.0, false, false),
        GgmlType::Q5_1 => k(24, 0.0, true, false),
        GgmlType::Q8_0 => k(34, 0.0, false, true),
        GgmlType::Iq4Nl => k(18, 0.0, false, true),
        _ => None,
    }
}

/// Whether the tile path takes W of type `ty` (the 32-value block types).
pub fn supports(ty: GgmlType) -> bool {
    kind(ty).is_some()
}

/// x [m, k] quantized and packed for B tiles: per group of 16 tokens (the last padded
/// with zeros) and block of 32 values, 512 bytes of levels, 16 scales d_x and 16 sums
/// s_x = d_x sum q_x.
pub struct PackedX {
    pub m: usize,
    pub k: usize,
    groups: usize,
    levels: Vec<i8>,
    d: Vec<f32>,
    s: Vec<f32>,
}

impl PackedX {
    /// Quantize as [`super::qdot::Acts`] does (d = max |x| / 127, levels rounded half away
    /// from zero; the same f32 operations, so the same levels), so both int8 paths see the
    /// same activations. k a multiple of 32; [`available`] must be true.
    /// The groups of 16 tokens are quantized by up to `threads` threads.
    pub fn new(x: &[f32], m: usize, k: usize, threads: usize) -> Result<PackedX> {
        assert!(k.is_multiple_of(BLOCK) && x.len() == m * k);
        assert!(
            available(),
            "PackedX::new needs AMX and AVX-512 (checked by `available`)"
        );
        let groups = m.div_ceil(TILE);
        let nb = k / BLOCK;
        let mut p = PackedX {
            m,
            k,
            groups,
            levels: vec![0; groups * nb * TILE * BLOCK],
            d: vec![0.0; groups * nb * TILE],
            s: vec![0.0; groups * nb * TILE],
        };
        let (lb, sb) = (nb * TILE * BLOCK, nb * TILE);
        let mut chunks: Vec<GroupChunks> = p
            .levels
            .chunks_mut(lb)
            .zip(p.d.chunks_mut(sb))
            .zip(p.s.chunks_mut(sb))
            .collect();
        let group = |g: usize, ((levels, d), s): &mut GroupChunks| {
            for lane in 0..TILE.min(m - g * TILE) {
                let t = g * TILE + lane;
                for (b, xb) in x[t * k..][..k].chunks_exact(BLOCK).enumerate() {
                    let tile = &mut levels[b * TILE * BLOCK..][..TILE * BLOCK];
                    // SAFETY: AVX-512 is there (asserted); 32 values in xb, 512 in tile.
                    let (db, sum) = unsafe { quantize_block(xb, tile, lane) };
                    d[b * TILE + lane] = db;
                    s[b * TILE + lane] = db * sum as f32;
                }
            }
        };
        team::for_each_mut(threads, &mut chunks, &group)?;
        Ok(p)
    }
}

/// One group's levels, scales and sums in [`PackedX::new`].
type GroupChunks<'a> = ((&'a mut [i8], &'a mut [f32]), &'a mut [f32]);

/// One block of 32 values of one token quantized into its lane of a B tile (row r holds
/// values 4r..4r+4 of each token, token after token); returns d and the levels' sum.
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn quantize_block(xb: &[f32], tile: &mut [i8], lane: usize) -> (f32, i32) {
    assert!(xb.len() == BLOCK && tile.len() == TILE * BLOCK && lane < TILE);
    // SAFETY: the lengths above.
    unsafe {
        let v0 = _mm512_loadu_ps(xb.as_ptr());
        let v1 = _mm512_loadu_ps(xb.as_ptr().add(16));
        let amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
        let d = amax / 127.0;
        let id = if d > 0.0 { 1.0 / d } else { 0.0 };
        // round(v id) half away from zero: floor(|v id| + 0.5) (exact below 2^22) with
        // v's sign, then clamped to 127 as Acts clamps.
        let level = |v: __m512| {
            let a = _mm512_abs_ps(_mm512_mul_ps(v, _mm512_set1_ps(id)));
            let r = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC }>(
                _mm512_add_ps(a, _mm512_set1_ps(0.5)),
            );
            let r = _mm512_min_ps(r, _mm512_set1_ps(127.0));
            let i = _mm512_cvttps_epi32(r);
            let neg = _mm512_cmplt_ps_mask(v, _mm512_setzero_ps());
            _mm512_mask_sub_epi32(i, neg, _mm512_setzero_si512(), i)
        };
        let (i0, i1) = (level(v0), level(v1));
        let sum = _mm512_reduce_add_epi32(_mm512_add_epi32(i0, i1));
        let mut q = [0u32; 8];
        _mm_storeu_si128(q.as_mut_ptr().cast(), _mm512_cvtepi32_epi8(i0));
        _mm_storeu_si128(q.as_mut_ptr().add(4).cast(), _mm512_cvtepi32_epi8(i1));
        let dst = tile.as_mut_ptr().cast::<u32>();
        for (r, &quad) in q.iter().enumerate() {
            dst.add(r * TILE + lane).write_unaligned(quad);
        }
        (d, sum)
    }
}

/// One worker's 16 rows of W unpacked: per block, its A tile (16 rows x 32 levels, zero
/// rows past W's end, 512 contiguous bytes), 16 scales d_w and 16 corrections c_w.
#[derive(Default)]
pub struct Panel {
    levels: Vec<u8>,
    d: Vec<f32>,
    c: Vec<f32>,
}

/// Unpack rows `rows` (at most 16) of W, each `row_bytes` long starting at `w`, into
/// `panel`; k values per row.
fn unpack(ty: GgmlType, w: &[u8], row_bytes: usize, rows: usize, k: usize, panel: &mut Panel) {
    let kd = kind(ty).expect("unpack only takes supported types");
    let nb = k / BLOCK;
    assert!(rows <= TILE && w.len() >= rows * row_bytes && row_bytes == nb * kd.bytes);
    panel.levels.clear();
    panel.levels.resize(TILE * k, 0);
    panel.d.clear();
    panel.d.resize(nb * TILE, 0.0);
    panel.c.clear();
    panel.c.resize(nb * TILE, 0.0);
    // SAFETY: `supports` types only; `available` checked AVX2 + F16C; the sizes are
    // asserted above.
    unsafe {
        match ty {
            GgmlType::Q4_0 => unpack_rows::<Q4_0L>(kd, w, row_bytes, rows, k, panel),
            GgmlType::Q4_1 => unpack_rows::<Q4_1L>(kd, w, row_bytes, rows, k, panel),
            GgmlType::Q5_0 => unpack_rows::<Q5_0L>(kd, w, row_bytes, rows, k, panel),
            GgmlType::Q5_1 => unpack_rows::<Q5_1L>(kd, w, row_bytes, rows, k, panel),
            GgmlType::Q8_0 => unpack_rows::<Q8_0L>(kd, w, row_bytes, rows, k, panel),
            GgmlType::Iq4Nl => unpack_rows::<Iq4NlL>(kd, w, row_bytes, rows, k, panel),
            _ => unreachable!("kind() is None for {}", ty.name()),
        }
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
) {
    let nb = k / BLOCK;
    for r in 0..rows {
        let row = &w[r * row_bytes..][..row_bytes];
        for b in 0..nb {
            // SAFETY: block b of the row is `kd.bytes` long inside `row`; 32 bytes of the
            // block's tile at row r.
            unsafe {
                let blk = row.as_ptr().add(b * kd.bytes);
                // The weights stream from memory once per call: ask for them 2 KB ahead
                // (a prefetch never faults, past the row's end included).
                _mm_prefetch::<_MM_HINT_T0>(blk.wrapping_add(2048).cast());
                let dst = panel.levels.as_mut_ptr().add((b * TILE + r) * BLOCK);
                _mm256_storeu_si256(dst.cast(), L::levels(blk));
                let (d, m) = if kd.has_min {
                    halves2(blk)
                } else {
                    (half(blk), 0.0)
                };
                panel.d[b * TILE + r] = d;
                panel.c[b * TILE + r] = m - kd.offset * d;
            }
        }
    }
}

/// The tile shapes: tmm0..tmm3 the int32 results (16 x 64 bytes), tmm4/tmm6 the A tiles
/// (16 rows x 32 bytes of W), tmm5/tmm7 the B tiles (8 rows x 64 bytes of x).
#[repr(C, align(64))]
struct TileConfig([u8; 64]);

impl TileConfig {
    fn new() -> TileConfig {
        let mut c = TileConfig([0; 64]);
        c.0[0] = 1; // palette 1
        let shapes: [(usize, u8, u16); 8] = [
            (0, 16, 64),
            (1, 16, 64),
            (2, 16, 64),
            (3, 16, 64),
            (4, 16, 32),
            (5, 8, 64),
            (6, 16, 32),
            (7, 8, 64),
        ];
        for (i, rows, colsb) in shapes {
            c.0[16 + 2 * i..18 + 2 * i].copy_from_slice(&colsb.to_le_bytes());
            c.0[48 + i] = rows;
        }
        c
    }
}

/// One panel of W (`rows` <= 16 rows of `row_bytes` each, from `w`) against every group of
/// tokens: y[t][r] = x[t] . W[r] (+ bias[r]), where `y` points at the panel's first column
/// of y [m, n] (row stride `n`). Runs on the calling thread.
///
/// # Safety
/// [`available`] must be true; `y` must be valid for m rows of stride n, with the `rows`
/// columns from `y` on free for this call to write.
#[allow(clippy::too_many_arguments)]
pub unsafe fn panel_product(
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
    let k = x.k;
    unpack(ty, w, row_bytes, rows, k, panel);
    let kd = kind(ty).expect("checked by unpack");
    let cfg = TileConfig::new();
    let mut out = [[0.0f32; TILE]; TILE];
    let mut bias16 = [0.0f32; TILE];
    if let Some(b) = bias {
        bias16[..rows].copy_from_slice(&b[..rows]);
    }
    // SAFETY: `available` granted the tiles and AVX-512; every tile load reads inside
    // panel.levels (nb tiles of 512 bytes) and x.levels (groups x nb x 512 bytes).
    unsafe {
        asm!("ldtilecfg [{}]", in(reg) cfg.0.as_ptr(), options(nostack, readonly));
        for g in 0..x.groups {
            match (kd.signed, kd.has_min || kd.offset != 0.0) {
                (false, true) => group::<false, true>(panel, x, g, &mut out),
                (false, false) => group::<false, false>(panel, x, g, &mut out),
                (true, true) => group::<true, true>(panel, x, g, &mut out),
                (true, false) => group::<true, false>(panel, x, g, &mut out),
            }
            write_out(
                &out,
                TILE.min(x.m - g * TILE),
                rows,
                &bias16,
                y.add(g * TILE * n),
                n,
            );
        }
        asm!("tilerelease", options(nostack, nomem));
    }
}

/// out [row][token] + bias to y's rows (one per token, stride n), columns 0..rows.
#[target_feature(enable = "avx512f")]
unsafe fn write_out(
    out: &[[f32; TILE]; TILE],
    tokens: usize,
    rows: usize,
    bias: &[f32; TILE],
    y: *mut f32,
    n: usize,
) {
    let mut tr = [[0.0f32; TILE]; TILE];
    // SAFETY: 16 x 16 values each side; y holds `tokens` rows of stride n with `rows`
    // columns this call may write (the caller's contract).
    unsafe {
        crate::kernel::transpose::square16(
            out.as_ptr().cast(),
            TILE,
            tr.as_mut_ptr().cast(),
            TILE,
            1.0,
        );
        let b = _mm512_loadu_ps(bias.as_ptr());
        let mask: __mmask16 = if rows >= TILE { !0 } else { (1u16 << rows) - 1 };
        for (t, row) in tr.iter().enumerate().take(tokens) {
            let v = _mm512_add_ps(_mm512_loadu_ps(row.as_ptr()), b);
            _mm512_mask_storeu_ps(y.add(t * n), mask, v);
        }
    }
}

/// Load W's block `b` and x's into one pair of A/B tiles and multiply them into a zeroed
/// result tile (register numbers are literals in the instructions).
macro_rules! issue {
    ($signed:expr, $c:literal, $a:literal, $b:literal, $pa:expr, $sa:expr, $pb:expr) => {
        if $signed {
            issue!(@op "tdpbssd", $c, $a, $b, $pa, $sa, $pb)
        } else {
            issue!(@op "tdpbusd", $c, $a, $b, $pa, $sa, $pb)
        }
    };
    (@op $op:literal, $c:literal, $a:literal, $b:literal, $pa:expr, $sa:expr, $pb:expr) => {
        asm!(
            concat!("tileloadd tmm", $a, ", [{pa} + {sa}*1]"),
            concat!("tileloadd tmm", $b, ", [{pb} + {sb}*1]"),
            concat!("tilezero tmm", $c),
            concat!($op, " tmm", $c, ", tmm", $a, ", tmm", $b),
            pa = in(reg) $pa,
            sa = in(reg) $sa,
            pb = in(reg) $pb,
            sb = in(reg) 64usize,
            options(nostack, readonly)
        )
    };
}

/// Store a result tile to 16 x 16 int32.
macro_rules! store {
    ($c:literal, $dst:expr) => {
        asm!(
            concat!("tilestored [{p} + {s}*1], tmm", $c),
            p = in(reg) $dst,
            s = in(reg) 64usize,
            options(nostack)
        )
    };
}

/// One group of 16 tokens against the panel, every block: out[row][token].
#[target_feature(enable = "avx512f")]
unsafe fn group<const SIGNED: bool, const MIN: bool>(
    panel: &Panel,
    x: &PackedX,
    g: usize,
    out: &mut [[f32; TILE]; TILE],
) {
    let nb = x.k / BLOCK;
    let mut ints: [Ints; 4] = std::array::from_fn(|_| Ints([[0; TILE]; TILE]));
    let mut acc = [_mm512_setzero_ps(); TILE];
    let a = |b: usize| panel.levels.as_ptr().wrapping_add(b * TILE * BLOCK);
    let bx = |b: usize| x.levels.as_ptr().wrapping_add((g * nb + b) * TILE * BLOCK);
    // SAFETY (the whole body): block indices stay below nb, so every tile load reads inside
    // the panel (nb tiles of 512 bytes) and x's packed levels; the scales likewise.
    unsafe {
        // Block j's result goes to tile j % 4, its operands to pair j % 2; each step
        // issues the block three ahead, so up to three multiplies are in flight while a
        // block's result meets its scales.
        let issue = |j: usize| {
            if j < nb {
                match j % 4 {
                    0 => issue!(SIGNED, "0", "4", "5", a(j), BLOCK, bx(j)),
                    1 => issue!(SIGNED, "1", "6", "7", a(j), BLOCK, bx(j)),
                    2 => issue!(SIGNED, "2", "4", "5", a(j), BLOCK, bx(j)),
                    _ => issue!(SIGNED, "3", "6", "7", a(j), BLOCK, bx(j)),
                }
            }
        };
        issue(0);
        issue(1);
        issue(2);
        for b in 0..nb {
            issue(b + 3);
            let dst = ints[b % 4].0.as_mut_ptr();
            match b % 4 {
                0 => store!("0", dst),
                1 => store!("1", dst),
                2 => store!("2", dst),
                _ => store!("3", dst),
            }
            scale::<MIN>(&mut acc, &ints[b % 4], panel, x, g, b);
        }
        for (o, v) in out.iter_mut().zip(acc) {
            _mm512_storeu_ps(o.as_mut_ptr(), v);
        }
    }
}

/// A result tile as stored: 16 rows of 16 int32, one cache line each.
#[repr(C, align(64))]
struct Ints([[i32; TILE]; TILE]);

/// acc[row] += ints[row] * d_w[row] d_x + c_w[row] s_x for block b of group g.
#[inline(always)]
unsafe fn scale<const MIN: bool>(
    acc: &mut [__m512; TILE],
    ints: &Ints,
    panel: &Panel,
    x: &PackedX,
    g: usize,
    b: usize,
) {
    let nb = x.k / BLOCK;
    let at = (g * nb + b) * TILE;
    // SAFETY: at + 16 <= groups x nb x 16 (the scales' length); b * 16 + 16 <= nb x 16.
    unsafe {
        let dx = _mm512_loadu_ps(x.d.as_ptr().add(at));
        let sx = _mm512_loadu_ps(x.s.as_ptr().add(at));
        let dw = panel.d.as_ptr().add(b * TILE);
        let cw = panel.c.as_ptr().add(b * TILE);
        for (r, acc) in acc.iter_mut().enumerate() {
            let v = _mm512_cvtepi32_ps(_mm512_load_si512(ints.0[r].as_ptr().cast()));
            let s = _mm512_mul_ps(dx, _mm512_set1_ps(*dw.add(r)));
            *acc = _mm512_fmadd_ps(v, s, *acc);
            if MIN {
                *acc = _mm512_fmadd_ps(sx, _mm512_set1_ps(*cw.add(r)), *acc);
            }
        }
    }
}
