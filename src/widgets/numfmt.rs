//! Numbers fitted to a cell: as many decimals as the width allows.

/// `v` written in at most `width` ASCII characters, with as much precision as fits.
/// Infinities are written `-inf`/`inf` (or `-∞`/`∞` when `width` < 3 and `unicode`).
pub fn fit_number(v: f64, width: usize, unicode: bool) -> String {
    if v.is_nan() {
        return fit_word("nan", width);
    }
    if v.is_infinite() {
        let s = match (v < 0.0, width >= 4 || !unicode) {
            (true, true) => "-inf",
            (false, true) => "inf",
            (true, false) => "-∞",
            (false, false) => "∞",
        };
        return fit_word(s, width);
    }
    // Positive numbers keep their leading zero ("0.12" reads better than ".123");
    // negative ones drop it first ("-.12" keeps a digit "-0.1" would lose).
    for allow_drop_positive in [false, true] {
        for decimals in (0..=4).rev() {
            let s = normalise_zero(format!("{v:.decimals$}"));
            let s = if s.len() > width && (s.starts_with('-') || allow_drop_positive) {
                drop_leading_zero(&s)
            } else {
                s
            };
            if s.len() <= width && (decimals > 0 || !has_lost_everything(v, &s)) {
                return s;
            }
        }
    }
    // Too large or too small for fixed notation: try 1e3-style.
    for digits in (0..=2).rev() {
        let s = format!("{v:.digits$e}");
        if s.len() <= width {
            return s;
        }
    }
    "#".repeat(width.min(1))
}

/// `v` with up to `digits` significant digits and no trailing zeros, for places with
/// room (the inspector): 2067, 0.05536, -1.234e-7.
pub fn significant(v: f64, digits: usize) -> String {
    if !v.is_finite() {
        return fit_number(v, 4, false);
    }
    if v == 0.0 {
        return "0".into();
    }
    let digits = digits.max(1) as i32;
    let exp = v.abs().log10().floor() as i32;
    if !(-4..digits + 2).contains(&exp) {
        let s = format!("{:.*e}", (digits - 1) as usize, v);
        let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
        let m = if m.contains('.') {
            m.trim_end_matches('0').trim_end_matches('.')
        } else {
            m
        };
        return format!("{m}e{e}");
    }
    let decimals = (digits - 1 - exp).max(0) as usize;
    let s = format!("{v:.decimals$}");
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    normalise_zero(s)
}

fn fit_word(s: &str, width: usize) -> String {
    s.chars().take(width).collect()
}

/// "-0.12" -> "-.12", "0.12" -> ".12" (used only when the plain form does not fit).
fn drop_leading_zero(s: &str) -> String {
    if let Some(rest) = s.strip_prefix("-0.") {
        format!("-.{rest}")
    } else if let Some(rest) = s.strip_prefix("0.") {
        format!(".{rest}")
    } else {
        s.to_string()
    }
}

/// With no decimals left, a small non-zero value would read as 0: only accept that if
/// the value really rounds to an integer display.
fn has_lost_everything(v: f64, s: &str) -> bool {
    v != 0.0 && v.abs() < 0.5 && (s == "0" || s == "-0")
}

/// "-0.00" is drawn as "0.00": a sign on zero only distracts.
fn normalise_zero(s: String) -> String {
    if s.starts_with('-') && s[1..].chars().all(|c| c == '0' || c == '.') {
        s[1..].to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::fit_number;

    #[test]
    fn precision_follows_width() {
        assert_eq!(fit_number(0.123456, 5, true), "0.123");
        assert_eq!(fit_number(0.123456, 4, true), "0.12");
        assert_eq!(fit_number(-0.123456, 4, true), "-.12");
        assert_eq!(fit_number(-0.123456, 5, true), "-.123");
        assert_eq!(fit_number(12.345, 4, true), "12.3");
        assert_eq!(fit_number(-1234.6, 5, true), "-1235");
        assert_eq!(fit_number(1.0, 3, true), "1.0");
        assert_eq!(fit_number(-0.0001, 5, true), "0.000");
        assert_eq!(fit_number(-0.00001, 5, true), "0.000");
        assert_eq!(fit_number(f64::NEG_INFINITY, 5, true), "-inf");
        assert_eq!(fit_number(f64::NEG_INFINITY, 2, true), "-∞");
        assert_eq!(fit_number(123456789.0, 5, true), "1.2e8");
    }

    #[test]
    fn significant_digits() {
        use super::significant;
        assert_eq!(significant(2067.0, 6), "2067");
        assert_eq!(significant(0.0553612345, 4), "0.05536");
        assert_eq!(significant(-1.2345e-7, 4), "-1.235e-7");
        assert_eq!(significant(1.5, 6), "1.5");
        assert_eq!(significant(0.0, 6), "0");
    }

    #[test]
    fn never_wider_than_asked() {
        for &v in &[0.0, 1e-9, -1e-9, 1.23456, -271.8, 1e12, -1e-12, 0.5, -0.5] {
            for w in 1..8 {
                let s = fit_number(v, w, false);
                assert!(s.len() <= w, "{v} in {w}: {s}");
            }
        }
    }
}
