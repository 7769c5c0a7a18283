//! Numbers as the inspector writes them: a few significant digits, no trailing zeros.

/// Significant digits of numbers in explanations.
const DIGITS: i32 = 4;

/// A number in at most [`DIGITS`] significant digits, without trailing zeros:
/// 1.2699 -> "1.27", -0.000123456 -> "-1.235e-4", 12346 -> "1.235e4".
pub(crate) fn num(x: f64) -> String {
    if x == 0.0 {
        return "0".into();
    }
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let exp = x.abs().log10().floor() as i32;
    if !(-3..4).contains(&exp) {
        let s = format!("{:.*e}", (DIGITS - 1) as usize, x);
        // "1.2350e4" -> "1.235e4"
        let (mantissa, e) = s.split_once('e').expect("exponent format");
        return format!("{}e{e}", trim_zeros(mantissa));
    }
    let decimals = (DIGITS - 1 - exp).max(0) as usize;
    trim_zeros(&format!("{x:.decimals$}")).to_string()
}

/// Terms of a sum shown before "..." (and the last one after it).
const SHOWN_TERMS: usize = 3;

/// "a0*b0 + a1*b1 + ... + an*bn" with at most [`SHOWN_TERMS`] + 1 products written.
pub(super) fn products(a: &[f64], b: &[f64]) -> String {
    let term = |i: usize| format!("{}*{}", num(a[i]), num(b[i]));
    let n = a.len();
    if n <= SHOWN_TERMS + 2 {
        (0..n).map(term).collect::<Vec<_>>().join(" + ")
    } else {
        let first: Vec<String> = (0..SHOWN_TERMS).map(term).collect();
        format!("{} + ... + {} ({n} terms)", first.join(" + "), term(n - 1))
    }
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::num;

    #[test]
    fn numbers_are_compact() {
        assert_eq!(num(1.2699), "1.27");
        assert_eq!(num(0.84291), "0.8429");
        assert_eq!(num(-0.12), "-0.12");
        assert_eq!(num(3.0), "3");
        assert_eq!(num(12346.0), "1.235e4");
        assert_eq!(num(-0.000123456), "-1.235e-4");
        assert_eq!(num(0.0), "0");
        assert_eq!(num(f64::NEG_INFINITY), "-inf");
        assert_eq!(num(1234.6), "1235");
    }
}
