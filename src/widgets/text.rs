//! Text measured by display width (CJK characters take two columns), fitted to a width.

use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// `s` with its control characters (C0, DEL and C1, e.g. ESC) written as visible
/// escapes (`\u{1b}`), for text from files that is shown or recorded as it is (titles):
/// raw, they would drive the terminal of whoever looks at it. Tabs become a space.
pub fn escape_controls(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\t' => out.push(' '),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Columns `s` takes on a terminal.
pub fn width(s: &str) -> usize {
    UnicodeWidthStr::width(s)
}

/// `s` cut to at most `max` columns; if anything was cut, the last column holds
/// `ellipsis` (which must be one column wide).
pub fn fit(s: &str, max: usize, ellipsis: &str) -> String {
    if width(s) <= max {
        return s.to_string();
    }
    if max == 0 {
        return String::new();
    }
    let room = max - width(ellipsis).min(max);
    let mut out = String::new();
    let mut used = 0;
    for ch in s.chars() {
        let w = ch.width().unwrap_or(0);
        if used + w > room {
            break;
        }
        used += w;
        out.push(ch);
    }
    out.push_str(ellipsis);
    out
}

/// `s` fitted to exactly `w` columns, centred (padding with spaces).
pub fn center(s: &str, w: usize, ellipsis: &str) -> String {
    let s = fit(s, w, ellipsis);
    let pad = w - width(&s);
    let left = pad / 2;
    format!("{}{}{}", " ".repeat(left), s, " ".repeat(pad - left))
}

/// `s` fitted to exactly `w` columns, aligned right.
pub fn right(s: &str, w: usize, ellipsis: &str) -> String {
    let s = fit(s, w, ellipsis);
    format!("{}{}", " ".repeat(w - width(&s)), s)
}

/// `s` fitted to exactly `w` columns, aligned left.
pub fn left(s: &str, w: usize, ellipsis: &str) -> String {
    let s = fit(s, w, ellipsis);
    let pad = w - width(&s);
    format!("{}{}", s, " ".repeat(pad))
}

/// Greedy word wrap by display width. Words longer than `w` are split; CJK text, which
/// has no spaces, is broken between characters. A paragraph's leading spaces indent all
/// of its lines.
pub fn wrap(s: &str, w: usize) -> Vec<String> {
    let mut lines = Vec::new();
    for para in s.split('\n') {
        let indent = para.len() - para.trim_start_matches(' ').len();
        let indent = indent.min(w.saturating_sub(1) / 2);
        let pad = " ".repeat(indent);
        let first = lines.len();
        wrap_para(para, w.saturating_sub(indent).max(1), &mut lines);
        for l in &mut lines[first..] {
            l.insert_str(0, &pad);
        }
    }
    lines
}

fn wrap_para(para: &str, w: usize, lines: &mut Vec<String>) {
    {
        let mut line = String::new();
        let mut used = 0;
        for (spaced, word) in pieces(para) {
            let ww = width(word);
            let gap = usize::from(used > 0 && spaced);
            if used > 0 && used + gap + ww > w {
                lines.push(std::mem::take(&mut line));
                used = 0;
            } else if gap == 1 {
                line.push(' ');
                used += 1;
            }
            for ch in word.chars() {
                let cw = ch.width().unwrap_or(0);
                if used + cw > w && used > 0 {
                    lines.push(std::mem::take(&mut line));
                    used = 0;
                }
                line.push(ch);
                used += cw;
            }
        }
        lines.push(line);
    }
}

/// The pieces wrapping may break between, each with whether a space came before it:
/// space-separated words, and every wide (CJK) character on its own.
fn pieces(s: &str) -> Vec<(bool, &str)> {
    let mut out = Vec::new();
    for word in s.split(' ').filter(|w| !w.is_empty()) {
        let mut spaced = true;
        let mut start = 0;
        for (i, ch) in word.char_indices() {
            if ch.width().unwrap_or(0) == 2 {
                if start < i {
                    out.push((spaced, &word[start..i]));
                    spaced = false;
                }
                out.push((spaced, &word[i..i + ch.len_utf8()]));
                spaced = false;
                start = i + ch.len_utf8();
            }
        }
        if start < word.len() {
            out.push((spaced, &word[start..]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cjk_counts_two_columns() {
        assert_eq!(width("注意力"), 6);
        assert_eq!(fit("注意力机制", 5, "…"), "注意…");
        assert_eq!(width(&center("猫", 5, "…")), 5);
        assert_eq!(fit("attention", 4, "~"), "att~");
        assert_eq!(fit("cat", 4, "~"), "cat");
    }

    #[test]
    fn wrap_respects_width() {
        let lines = wrap("the quick brown fox jumps over the lazy dog", 10);
        assert!(lines.iter().all(|l| width(l) <= 10), "{lines:?}");
        assert_eq!(lines[0], "the quick");
        assert_eq!(
            wrap("   indented words here", 12),
            ["   indented", "   words", "   here"]
        );
        let zh = wrap("每个词都看向其他所有的词", 8);
        assert!(zh.iter().all(|l| width(l) <= 8), "{zh:?}");
        assert_eq!(zh.concat(), "每个词都看向其他所有的词");
        let mixed = wrap("softmax 把每一行变成权重", 12);
        assert_eq!(mixed.concat(), "softmax 把每一行变成权重");
        assert!(mixed.iter().all(|l| width(l) <= 12), "{mixed:?}");
    }
}
