//! Quantized products over many rows of x on Intel AMX (Advanced Matrix Extensions), the
//! tile unit of Sapphire Rapids and later Xeons, llama.cpp's way on such a CPU: x is
//! quantized to int8 blocks of 32 values and W's blocks unpacked to their integer levels
//! ([`super::i8panel`]), and one `tdpbusd` (or `tdpbssd` for signed levels) multiplies
//! 16 rows of W by 16 tokens over one block: 16 x 16 x 32 multiply-adds in one
//! instruction. Each block's int32 tile then meets its scales in AVX-512:
//! acc[row] += tile[row] * d_w d_x + c_w s_x.
//!
//! A tiles are W's levels (16 rows x 32 bytes, one block); B tiles x's, 8 rows x 64 bytes
//! in the VNNI order the unit wants (four consecutive values of each of 16 tokens per
//! row). Four result tiles take the blocks in turn, so three multiplies are in flight
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

use super::i8panel::{BLOCK, PackedX, Panel, TILE, kind, unpack};
use super::quant::GgmlType;

/// Environment variable: `off` keeps every product off the tile unit.
pub const AMX_ENV: &str = "ATTNVIZ_AMX";

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

/// Whether the tile path takes W of type `ty`: every quantized type (the k-quants'
/// sub-blocks of 32 are blocks here, those of 16 halves of a block).
pub fn supports(ty: GgmlType) -> bool {
    kind(ty).is_some()
}

/// The tile shapes: tmm0..tmm3 the int32 results (16 x 64 bytes), tmm4/tmm6 the A tiles
/// (16 rows x 32 / parts bytes of W), tmm5/tmm7 the B tiles (8 / parts rows x 64 bytes of
/// x): with two parts, each multiply takes half a block (16 values).
#[repr(C, align(64))]
struct TileConfig([u8; 64]);

impl TileConfig {
    fn new(parts: usize) -> TileConfig {
        let mut c = TileConfig([0; 64]);
        c.0[0] = 1; // palette 1
        let (a_cols, b_rows) = ((BLOCK / parts) as u16, (BLOCK / 4 / parts) as u8);
        let shapes: [(usize, u8, u16); 8] = [
            (0, 16, 64),
            (1, 16, 64),
            (2, 16, 64),
            (3, 16, 64),
            (4, 16, a_cols),
            (5, b_rows, 64),
            (6, 16, a_cols),
            (7, b_rows, 64),
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
    // SAFETY: `available` checked AVX2, FMA and F16C; `supports` types only.
    unsafe { unpack(ty, w, row_bytes, rows, k, panel, false) };
    let kd = kind(ty).expect("checked by unpack");
    let cfg = TileConfig::new(kd.parts);
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
            match (kd.signed, kd.corrected(), kd.parts) {
                (false, true, 1) => group::<false, true, 1>(panel, x, g, &mut out),
                (false, false, 1) => group::<false, false, 1>(panel, x, g, &mut out),
                (true, true, 1) => group::<true, true, 1>(panel, x, g, &mut out),
                (true, false, 1) => group::<true, false, 1>(panel, x, g, &mut out),
                _ => group::<false, true, 2>(panel, x, g, &mut out),
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

/// One group of 16 tokens against the panel, every block: out[row][token]. With PARTS 2
/// each half of a block (16 values: half of W's row of 32 bytes, half of x's 8 rows of
/// 64) is a multiply of its own.
#[target_feature(enable = "avx512f")]
unsafe fn group<const SIGNED: bool, const MIN: bool, const PARTS: usize>(
    panel: &Panel,
    x: &PackedX,
    g: usize,
    out: &mut [[f32; TILE]; TILE],
) {
    let units = x.k / BLOCK * PARTS;
    let mut ints: [Ints; 4] = std::array::from_fn(|_| Ints([[0; TILE]; TILE]));
    let mut acc = [_mm512_setzero_ps(); TILE];
    let part = |u: usize| u % PARTS;
    let a = |u: usize| {
        let bytes = BLOCK / PARTS;
        panel.block_levels(u / PARTS).wrapping_add(part(u) * bytes)
    };
    let bx = |u: usize| {
        let bytes = TILE * BLOCK / PARTS;
        x.block_levels(g, u / PARTS).wrapping_add(part(u) * bytes)
    };
    // SAFETY (the whole body): unit indices stay below nb x PARTS, so every tile load reads
    // inside the panel (nb tiles of 512 bytes) and x's packed levels; the scales likewise.
    unsafe {
        // Unit j's result goes to tile j % 4, its operands to pair j % 2; each step
        // issues the unit three ahead, so up to three multiplies are in flight while a
        // unit's result meets its scales.
        let issue = |j: usize| {
            if j < units {
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
        for u in 0..units {
            issue(u + 3);
            let dst = ints[u % 4].0.as_mut_ptr();
            match u % 4 {
                0 => store!("0", dst),
                1 => store!("1", dst),
                2 => store!("2", dst),
                _ => store!("3", dst),
            }
            scale::<MIN, PARTS>(&mut acc, &ints[u % 4], panel, x, g, u);
        }
        for (o, v) in out.iter_mut().zip(acc) {
            _mm512_storeu_ps(o.as_mut_ptr(), v);
        }
    }
}

/// A result tile as stored: 16 rows of 16 int32, one cache line each.
#[repr(C, align(64))]
struct Ints([[i32; TILE]; TILE]);

/// acc[row] += ints[row] * d_w[row] d_x + c_w[row] s_x for unit u (block u / PARTS, its
/// part u % PARTS) of group g.
#[inline(always)]
unsafe fn scale<const MIN: bool, const PARTS: usize>(
    acc: &mut [__m512; TILE],
    ints: &Ints,
    panel: &Panel,
    x: &PackedX,
    g: usize,
    u: usize,
) {
    let b = u / PARTS;
    // SAFETY: b < nb: 16 scales of x's block b in group g, 16 sums of its part; the
    // panel's 16 scales and corrections of unit u < nb x PARTS.
    unsafe {
        let dx = _mm512_loadu_ps(x.d.as_ptr().add(x.scale_at(g, b)));
        let sx = _mm512_loadu_ps(x.sums(g, b, PARTS, u % PARTS));
        let dw = panel.d.as_ptr().add(u * TILE);
        let cw = panel.c.as_ptr().add(u * TILE);
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
