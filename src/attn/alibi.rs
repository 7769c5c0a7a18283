//! ALiBi's slopes (Press et al. 2022): part of an attention problem's spec, so they live
//! here with the mask and the shapes, below both the engine and the kernel.

/// ALiBi slopes per the paper (Press et al. 2022): for a power of two H,
/// m_h = 2^(-8(h+1)/H); otherwise the slopes of the closest lower power of two p,
/// then every other slope of 2p until there are H.
pub fn alibi_slopes(heads: usize) -> Vec<f64> {
    fn pow2_slopes(n: usize) -> Vec<f64> {
        (0..n)
            .map(|h| 2f64.powf(-8.0 * (h as f64 + 1.0) / n as f64))
            .collect()
    }
    if heads == 0 {
        return Vec::new();
    }
    if heads.is_power_of_two() {
        return pow2_slopes(heads);
    }
    let p = 1usize << (usize::BITS - 1 - heads.leading_zeros());
    let mut slopes = pow2_slopes(p);
    slopes.extend(pow2_slopes(2 * p).into_iter().step_by(2).take(heads - p));
    slopes
}
