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

/// The rule behind [`alibi_slopes`] for `heads` heads, as the screen writes it: heads
/// counted from 1, and for a head count that is not a power of two the paper's other
/// rule (the slopes of the closest lower power of two p, then every other slope of 2p).
pub fn alibi_slope_rule(heads: usize) -> String {
    if heads == 0 || heads.is_power_of_two() {
        return format!("m_h = 2^(-8h/{heads}) for h = 1..{heads}");
    }
    let p = 1usize << (usize::BITS - 1 - heads.leading_zeros());
    let first = format!("m_h = 2^(-8h/{p}) for h = 1..{p}");
    let rest = if heads == p + 1 {
        format!("m_{heads} = 2^(-8/{})", 2 * p)
    } else {
        format!(
            "m_h = 2^(-8(2(h-{p})-1)/{}) for h = {}..{heads}",
            2 * p,
            p + 1
        )
    };
    format!("{first}, then {rest} ({heads} is not a power of two)")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Evaluate the rule as written, head by head, and compare with the slopes.
    fn from_rule(heads: usize) -> Vec<f64> {
        let p = if heads.is_power_of_two() {
            heads
        } else {
            1usize << (usize::BITS - 1 - heads.leading_zeros())
        };
        (1..=heads)
            .map(|h| {
                if h <= p {
                    2f64.powf(-8.0 * h as f64 / p as f64)
                } else {
                    2f64.powf(-8.0 * (2.0 * (h - p) as f64 - 1.0) / (2 * p) as f64)
                }
            })
            .collect()
    }

    #[test]
    fn the_rule_on_screen_gives_the_slopes() {
        for heads in 1..=16 {
            assert_eq!(from_rule(heads), alibi_slopes(heads), "H = {heads}");
        }
        assert_eq!(alibi_slope_rule(4), "m_h = 2^(-8h/4) for h = 1..4");
        assert_eq!(
            alibi_slope_rule(6),
            "m_h = 2^(-8h/4) for h = 1..4, then m_h = 2^(-8(2(h-4)-1)/8) for h = 5..6 (6 is not a power of two)"
        );
        assert_eq!(
            alibi_slope_rule(5),
            "m_h = 2^(-8h/4) for h = 1..4, then m_5 = 2^(-8/8) (5 is not a power of two)"
        );
    }
}
