//! Where each GGML type keeps its f16 (or bf16) fields, so that a weight matrix kept in
//! its type can be checked finite without dequantizing it.
//!
//! In a quantized block only the f16 scales and mins can be NaN or infinite (the quants
//! and the K-types' 6-bit sub-scales are integers), so checking those fields is checking
//! every value the block decodes to. It reads 2-4 bytes of every 18-210 but touches
//! every page: 90-250 ms on SmolLM2's 93 MB and Gemma 3's 241 MB on a busy 2-core
//! machine, 10-15% of a load, so it runs only when a run's numbers come out non-finite.

use super::quant::GgmlType;

/// Byte offsets of the 16-bit float fields within one block.
fn half_fields(ty: GgmlType) -> &'static [usize] {
    match ty {
        GgmlType::F32 => &[],
        GgmlType::F16
        | GgmlType::Bf16
        | GgmlType::Q8_0
        | GgmlType::Q4_0
        | GgmlType::Q5_0
        | GgmlType::Iq4Nl
        | GgmlType::Iq4Xs => &[0],
        GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4K | GgmlType::Q5K => &[0, 2],
        GgmlType::Q2K => &[80, 82],
        GgmlType::Q3K => &[108],
        GgmlType::Q6K => &[208],
    }
}

/// The first block of `bytes` (blocks of `ty`) with a non-finite 16-bit float field, if
/// any. F32 data is not looked at here (it is copied out and checked as f32).
pub fn first_non_finite_block(ty: GgmlType, bytes: &[u8]) -> Option<usize> {
    // All exponent bits set: infinity or NaN.
    let exponent: u16 = if ty == GgmlType::Bf16 { 0x7F80 } else { 0x7C00 };
    let fields = half_fields(ty);
    if fields.is_empty() {
        return None;
    }
    bytes.chunks_exact(ty.block_bytes()).position(|b| {
        fields
            .iter()
            .any(|&o| u16::from_le_bytes([b[o], b[o + 1]]) & exponent == exponent)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_non_finite_scale_is_found_in_its_block() {
        for ty in [
            GgmlType::F16,
            GgmlType::Q8_0,
            GgmlType::Q4_1,
            GgmlType::Q2K,
            GgmlType::Q3K,
            GgmlType::Q6K,
            GgmlType::Iq4Xs,
        ] {
            let bb = ty.block_bytes();
            let mut bytes = vec![0u8; 3 * bb];
            assert_eq!(first_non_finite_block(ty, &bytes), None, "{ty:?}");
            let o = *half_fields(ty).last().unwrap();
            // f16 infinity is 0x7C00.
            bytes[2 * bb + o..2 * bb + o + 2].copy_from_slice(&0x7C00u16.to_le_bytes());
            assert_eq!(first_non_finite_block(ty, &bytes), Some(2), "{ty:?}");
        }
        let mut bf = vec![0u8; 8];
        bf[6..8].copy_from_slice(&0x7FC0u16.to_le_bytes());
        assert_eq!(first_non_finite_block(GgmlType::Bf16, &bf), Some(3));
    }
}
