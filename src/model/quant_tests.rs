//! Each dequantizer against values computed from the block's fields directly: the test
//! picks the fields (scales, mins, quants) at random, packs them into bytes with its own
//! packer, and expects y[i] from the per-element formula in natural element order.
//! Every type is also checked bit for bit against gguf-py's dequantization of random
//! blocks (`tests/data/quant/`, made by `make_fixtures.py` there).

use super::*;
use half::f16;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

/// A random f16 value (as f32, exactly representable) and its bytes.
fn rand_half(r: &mut ChaCha8Rng, lo: f32, hi: f32) -> (f32, [u8; 2]) {
    let h = f16::from_f32(r.random_range(lo..hi));
    (h.to_f32(), h.to_le_bytes())
}

fn check(ty: GgmlType, bytes: &[u8], want: &[f32]) {
    let mut got = vec![f32::NAN; want.len()];
    dequantize(ty, bytes, &mut got);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-6 * w.abs().max(1.0),
            "{} element {i}: got {g}, want {w}",
            ty.name()
        );
    }
}

const BLOCKS: usize = 3;

#[test]
fn float_types_convert_each_element() {
    let mut r = rng(1);
    let xs: Vec<f32> = (0..37).map(|_| r.random_range(-4.0f32..4.0)).collect();
    let f32_bytes: Vec<u8> = xs.iter().flat_map(|x| x.to_le_bytes()).collect();
    check(GgmlType::F32, &f32_bytes, &xs);
    let halves: Vec<f16> = xs.iter().map(|&x| f16::from_f32(x)).collect();
    let want: Vec<f32> = halves.iter().map(|h| h.to_f32()).collect();
    let bytes: Vec<u8> = halves.iter().flat_map(|h| h.to_le_bytes()).collect();
    check(GgmlType::F16, &bytes, &want);
    // BF16 by hand: the top 16 bits of the f32 pattern.
    let bytes: Vec<u8> = xs
        .iter()
        .flat_map(|x| ((x.to_bits() >> 16) as u16).to_le_bytes())
        .collect();
    let want: Vec<f32> = xs
        .iter()
        .map(|x| f32::from_bits(x.to_bits() & 0xFFFF_0000))
        .collect();
    check(GgmlType::Bf16, &bytes, &want);
}

#[test]
fn q8_0_is_scale_times_int8() {
    let mut r = rng(2);
    let (mut bytes, mut want) = (vec![], vec![]);
    for _ in 0..BLOCKS {
        let (d, db) = rand_half(&mut r, -0.1, 0.1);
        bytes.extend_from_slice(&db);
        for _ in 0..32 {
            let q: i8 = r.random_range(-128..=127);
            bytes.push(q as u8);
            want.push(d * q as f32);
        }
    }
    check(GgmlType::Q8_0, &bytes, &want);
}

/// 32 quants 0..16 packed as Q4_0/Q4_1 do: value j in the low nibble of byte j, value
/// j + 16 in the high nibble.
fn pack_nibbles_32(q: &[u8]) -> Vec<u8> {
    (0..16).map(|j| q[j] | (q[j + 16] << 4)).collect()
}

#[test]
fn q4_0_is_scale_times_nibble_minus_8() {
    let mut r = rng(3);
    let (mut bytes, mut want) = (vec![], vec![]);
    for _ in 0..BLOCKS {
        let (d, db) = rand_half(&mut r, -0.1, 0.1);
        let q: Vec<u8> = (0..32).map(|_| r.random_range(0..16)).collect();
        bytes.extend_from_slice(&db);
        bytes.extend(pack_nibbles_32(&q));
        want.extend(q.iter().map(|&q| d * (q as f32 - 8.0)));
    }
    check(GgmlType::Q4_0, &bytes, &want);
}

#[test]
fn q4_1_is_scale_times_nibble_plus_min() {
    let mut r = rng(4);
    let (mut bytes, mut want) = (vec![], vec![]);
    for _ in 0..BLOCKS {
        let (d, db) = rand_half(&mut r, 0.0, 0.1);
        let (m, mb) = rand_half(&mut r, -1.0, 0.0);
        let q: Vec<u8> = (0..32).map(|_| r.random_range(0..16)).collect();
        bytes.extend_from_slice(&db);
        bytes.extend_from_slice(&mb);
        bytes.extend(pack_nibbles_32(&q));
        want.extend(q.iter().map(|&q| d * q as f32 + m));
    }
    check(GgmlType::Q4_1, &bytes, &want);
}

/// Packs 8 six-bit scales and mins into the 12 bytes of a Q4_K/Q5_K super-block.
fn pack_scales_k4(sc: &[u8; 8], m: &[u8; 8]) -> [u8; 12] {
    let mut out = [0u8; 12];
    out[..4].copy_from_slice(&sc[..4]);
    out[4..8].copy_from_slice(&m[..4]);
    for j in 4..8 {
        out[j + 4] = (sc[j] & 0xF) | ((m[j] & 0xF) << 4);
        out[j - 4] |= (sc[j] >> 4) << 6;
        out[j] |= (m[j] >> 4) << 6;
    }
    out
}

struct KBlock {
    d: f32,
    dmin: f32,
    head: Vec<u8>,
    sc: [u8; 8],
    m: [u8; 8],
}

fn k_block(r: &mut ChaCha8Rng) -> KBlock {
    let (d, db) = rand_half(r, 0.0, 0.01);
    let (dmin, mb) = rand_half(r, 0.0, 0.01);
    let sc: [u8; 8] = std::array::from_fn(|_| r.random_range(0..64));
    let m: [u8; 8] = std::array::from_fn(|_| r.random_range(0..64));
    let mut head = vec![];
    head.extend_from_slice(&db);
    head.extend_from_slice(&mb);
    head.extend_from_slice(&pack_scales_k4(&sc, &m));
    KBlock {
        d,
        dmin,
        head,
        sc,
        m,
    }
}

#[test]
fn scale_min_k4_unpacks_what_was_packed() {
    let mut r = rng(5);
    for _ in 0..50 {
        let sc: [u8; 8] = std::array::from_fn(|_| r.random_range(0..64));
        let m: [u8; 8] = std::array::from_fn(|_| r.random_range(0..64));
        let packed = pack_scales_k4(&sc, &m);
        for j in 0..8 {
            assert_eq!(scale_min_k4(j, &packed), (sc[j], m[j]), "sub-block {j}");
        }
    }
}

#[test]
fn q4_k_is_sub_block_scale_times_nibble_minus_min() {
    let mut r = rng(6);
    let (mut bytes, mut want) = (vec![], vec![]);
    for _ in 0..BLOCKS {
        let kb = k_block(&mut r);
        let q: Vec<u8> = (0..QK_K).map(|_| r.random_range(0..16)).collect();
        // Value i sits in chunk c = i / 64: low nibble of qs[32c + l] when i % 64 < 32.
        let mut qs = [0u8; 128];
        for (i, &v) in q.iter().enumerate() {
            let (c, w) = (i / 64, i % 64);
            if w < 32 {
                qs[32 * c + w] |= v;
            } else {
                qs[32 * c + w - 32] |= v << 4;
            }
        }
        bytes.extend_from_slice(&kb.head);
        bytes.extend_from_slice(&qs);
        for (i, &v) in q.iter().enumerate() {
            let s = i / 32;
            want.push(kb.d * kb.sc[s] as f32 * v as f32 - kb.dmin * kb.m[s] as f32);
        }
    }
    check(GgmlType::Q4K, &bytes, &want);
}

#[test]
fn q5_k_adds_the_fifth_bit() {
    let mut r = rng(7);
    let (mut bytes, mut want) = (vec![], vec![]);
    for _ in 0..BLOCKS {
        let kb = k_block(&mut r);
        let q: Vec<u8> = (0..QK_K).map(|_| r.random_range(0..32)).collect();
        let mut qs = [0u8; 128];
        let mut qh = [0u8; 32];
        for (i, &v) in q.iter().enumerate() {
            let s = i / 32; // sub-block 0..8: bit s of qh[i % 32]
            let l = i % 32;
            qh[l] |= (v >> 4) << s;
            let c = i / 64;
            if s.is_multiple_of(2) {
                qs[32 * c + l] |= v & 0xF;
            } else {
                qs[32 * c + l] |= (v & 0xF) << 4;
            }
        }
        bytes.extend_from_slice(&kb.head);
        bytes.extend_from_slice(&qh);
        bytes.extend_from_slice(&qs);
        for (i, &v) in q.iter().enumerate() {
            let s = i / 32;
            want.push(kb.d * kb.sc[s] as f32 * v as f32 - kb.dmin * kb.m[s] as f32);
        }
    }
    check(GgmlType::Q5K, &bytes, &want);
}

#[test]
fn q6_k_is_scale_times_six_bits_minus_32() {
    let mut r = rng(8);
    let (mut bytes, mut want) = (vec![], vec![]);
    for _ in 0..BLOCKS {
        let (d, db) = rand_half(&mut r, -0.01, 0.01);
        let sc: [i8; 16] = std::array::from_fn(|_| r.random_range(-128..=127));
        let q: Vec<u8> = (0..QK_K).map(|_| r.random_range(0..64)).collect();
        let mut ql = [0u8; 128];
        let mut qh = [0u8; 64];
        for (i, &v) in q.iter().enumerate() {
            // half h, then quarter k = which of the four 32-runs, l its index.
            let (h, w) = (i / 128, i % 128);
            let (k, l) = (w / 32, w % 32);
            let lo_byte = 64 * h + l + if k % 2 == 1 { 32 } else { 0 };
            if k < 2 {
                ql[lo_byte] |= v & 0xF;
            } else {
                ql[lo_byte] |= (v & 0xF) << 4;
            }
            qh[32 * h + l] |= (v >> 4) << (2 * k);
        }
        bytes.extend_from_slice(&ql);
        bytes.extend_from_slice(&qh);
        bytes.extend(sc.iter().map(|&s| s as u8));
        bytes.extend_from_slice(&db);
        for (i, &v) in q.iter().enumerate() {
            // 16 sub-blocks of 16 values, in element order.
            want.push(d * sc[i / 16] as f32 * (v as f32 - 32.0));
        }
    }
    check(GgmlType::Q6K, &bytes, &want);
}

#[test]
fn type_ids_round_trip_and_sizes_match_ggml() {
    let all = [
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::Bf16,
        GgmlType::Q8_0,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q4K,
        GgmlType::Q5K,
        GgmlType::Q6K,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q2K,
        GgmlType::Q3K,
        GgmlType::Iq4Nl,
        GgmlType::Iq4Xs,
    ];
    for t in all {
        assert_eq!(GgmlType::from_id(t.id()), Some(t));
        assert!(SUPPORTED.contains(t.name()));
    }
    // ggml's type_size for these types.
    let sizes = [4, 2, 2, 34, 18, 20, 144, 176, 210, 22, 24, 84, 110, 18, 136];
    for (t, s) in all.iter().zip(sizes) {
        assert_eq!(t.block_bytes(), s, "{}", t.name());
    }
    assert_eq!(GgmlType::from_id(16), None);
    assert!(GgmlType::name_of_id(16).contains("IQ2_XXS"));
    assert_eq!(GgmlType::Q4K.tensor_bytes(512), Some(288));
    assert_eq!(GgmlType::Q4K.tensor_bytes(100), None);
}

/// Reads `tests/data/quant/<name>.<ext>` (made by `make_fixtures.py` there).
fn fixture(name: &str, ext: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/data/quant/{name}.{ext}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn every_type_matches_gguf_py_bit_for_bit() {
    let types = [
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
    let mut failures = vec![];
    for ty in types {
        let bytes = fixture(ty.name(), "bin");
        let want: Vec<f32> = fixture(ty.name(), "f32")
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        assert_eq!(
            ty.tensor_bytes(want.len()),
            Some(bytes.len()),
            "{} fixture sizes",
            ty.name()
        );
        let mut got = vec![f32::NAN; want.len()];
        dequantize(ty, &bytes, &mut got);
        let bad: Vec<usize> = (0..want.len())
            .filter(|&i| got[i].to_bits() != want[i].to_bits())
            .collect();
        if let Some(&i) = bad.first() {
            failures.push(format!(
                "{}: {} of {} differ, first at {i}: got {}, gguf-py {}",
                ty.name(),
                bad.len(),
                want.len(),
                got[i],
                want[i]
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn half_at_converts_every_half_as_the_half_crate_does() {
    for bits in 0..=u16::MAX {
        let want = half::f16::from_bits(bits).to_f32();
        let got = super::half_at(&bits.to_le_bytes(), 0);
        assert!(
            got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
            "{bits:#06x}: {got} vs {want}"
        );
    }
}
