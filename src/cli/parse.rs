//! The value parsers of the command line's flags: whole and real numbers, thread counts
//! and LAYER.HEAD pairs, each refusing a bad value with a message that says what the flag
//! takes (clap then exits with code 2 and names the flag).

/// `--ablate L.H,..`: one (layer, head) pair, both from 0.
pub fn layer_head(s: &str) -> Result<(usize, usize), String> {
    let bad = || format!("'{s}' is not LAYER.HEAD with both from 0 (e.g. 3.4)");
    let (l, h) = s.trim().split_once('.').ok_or_else(bad)?;
    Ok((l.parse().map_err(|_| bad())?, h.parse().map_err(|_| bad())?))
}

/// A worker-thread count: 1 up to [`crate::attn::limits::max_threads`], a few per core.
pub fn threads(s: &str) -> Result<usize, String> {
    let t = whole::<usize>(s)?;
    let max = crate::attn::limits::max_threads();
    if (1..=max).contains(&t) {
        Ok(t)
    } else {
        Err(format!(
            "{t} threads: give 1 to {max} (MAX_THREADS: {} per core of this machine; more only add switching)",
            crate::attn::limits::THREADS_PER_CORE
        ))
    }
}

/// The value parser of every flag that takes a whole number (counts, sizes, seeds). clap
/// would read `-1` as an unknown flag ("unexpected argument") or say "invalid digit";
/// with `allow_negative_numbers` the value reaches this parser, which says what the flag
/// takes.
pub fn whole<T>(s: &str) -> Result<T, String>
where
    T: std::str::FromStr + std::fmt::Display + num_bounds::Max,
{
    let t = s.trim();
    if let Ok(v) = t.parse::<T>() {
        return Ok(v);
    }
    let digits = t.strip_prefix('+').unwrap_or(t);
    Err(if t.starts_with('-') && t[1..].parse::<f64>().is_ok() {
        "takes a whole number 0 or more (e.g. 4); it cannot be negative".to_string()
    } else if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        format!("takes a whole number up to {}", T::MAX_VALUE)
    } else {
        "takes a whole number 0 or more, written in digits (e.g. 4)".to_string()
    })
}

/// The value parser of every flag that takes a real number (scale, RoPE base, speed): a
/// negative value is read as a number, and each command then checks its own range.
pub fn real<T: std::str::FromStr>(s: &str) -> Result<T, String> {
    s.trim()
        .parse::<T>()
        .map_err(|_| "takes a number written in digits (e.g. 0.125, -1 or 1e-3)".to_string())
}

/// The largest value of each whole-number type a flag can take, for [`whole`]'s message.
pub mod num_bounds {
    pub trait Max {
        const MAX_VALUE: Self;
    }
    macro_rules! max {
        ($($t:ty),*) => {$(impl Max for $t { const MAX_VALUE: Self = <$t>::MAX; })*};
    }
    max!(u16, u32, u64, usize);
}

#[cfg(test)]
mod number_tests {
    use super::*;

    #[test]
    fn whole_numbers_say_what_they_take() {
        assert_eq!(whole::<usize>("12"), Ok(12));
        assert!(
            whole::<u64>("-1")
                .unwrap_err()
                .contains("cannot be negative")
        );
        assert!(whole::<u16>("70000").unwrap_err().contains("up to 65535"));
        assert!(whole::<usize>("four").unwrap_err().contains("digits"));
        assert!(whole::<usize>("1.5").unwrap_err().contains("whole number"));
        assert_eq!(real::<f64>("-1"), Ok(-1.0));
        assert!(real::<f64>("x").unwrap_err().contains("number"));
    }
}
