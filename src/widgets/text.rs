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

/// Greedy line wrap by display width, breaking only where the Unicode line breaking
/// algorithm (UAX #14, the `unicode-linebreak` crate) allows: after spaces, and between
/// CJK characters but never before closing punctuation (。，、：；！？ and closing
/// brackets and quotes) or after opening ones. A piece longer than `w` (a long word) is
/// split between characters. A paragraph's leading spaces indent all of its lines.
pub fn wrap(s: &str, w: usize) -> Vec<String> {
    let mut lines = Vec::new();
    for para in s.split('\n') {
        let indent = para.len() - para.trim_start_matches(' ').len();
        let indent = indent.min(w.saturating_sub(1) / 2);
        let pad = " ".repeat(indent);
        let first = lines.len();
        wrap_para(
            para.trim_start_matches(' '),
            w.saturating_sub(indent).max(1),
            &mut lines,
        );
        for l in &mut lines[first..] {
            l.insert_str(0, &pad);
        }
    }
    lines
}

fn wrap_para(para: &str, w: usize, lines: &mut Vec<String>) {
    let mut line = String::new();
    // Width of `line`, its trailing spaces included.
    let mut used_spaced = 0;
    for piece in pieces(para) {
        let body = piece.trim_end_matches(' ');
        let bw = width(body);
        if used_spaced > 0 && used_spaced + bw > w {
            lines.push(line.trim_end_matches(' ').to_string());
            line.clear();
            used_spaced = 0;
        }
        if bw > w {
            // Longer than a line on its own: split it between characters.
            let mut used = used_spaced;
            for ch in body.chars() {
                let cw = ch.width().unwrap_or(0);
                if used + cw > w && used > 0 {
                    // Closing punctuation takes the character before it along.
                    let carry = if is_closing_punctuation(ch) && line.chars().count() > 1 {
                        line.pop()
                    } else {
                        None
                    };
                    lines.push(std::mem::take(&mut line));
                    used = 0;
                    if let Some(c) = carry {
                        line.push(c);
                        used = c.width().unwrap_or(0);
                    }
                }
                line.push(ch);
                used += cw;
            }
            used_spaced = used;
        } else {
            line.push_str(body);
            used_spaced += bw;
        }
        if body.len() < piece.len() {
            // The spaces after a piece count only if something follows on the line.
            let spaces = piece.len() - body.len();
            line.push_str(&piece[body.len()..]);
            used_spaced += spaces;
        }
    }
    lines.push(line.trim_end_matches(' ').to_string());
}

/// The pieces wrapping may break between (UAX #14 break opportunities), each with the
/// spaces that follow it. Runs of spaces inside the text are kept as written.
fn pieces(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    for (end, _) in unicode_linebreak::linebreaks(s) {
        if end > start {
            out.push(&s[start..end]);
        }
        start = end;
    }
    out
}

/// Closing punctuation that must not start a line (UAX #14 classes CL, CP, EX, IS, NS
/// and closing quotes, as they occur in Chinese text).
pub fn is_closing_punctuation(c: char) -> bool {
    matches!(
        c,
        '。' | '，'
            | '、'
            | '：'
            | '；'
            | '！'
            | '？'
            | '）'
            | '」'
            | '』'
            | '】'
            | '》'
            | '〉'
            | '”'
            | '’'
            | '…'
            | ')'
            | ']'
            | '}'
            | ','
            | '.'
            | ':'
            | ';'
            | '!'
            | '?'
    )
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

    #[test]
    fn closing_punctuation_never_starts_a_line() {
        // At width 8 a character-by-character wrap would start the second line with '，'.
        let zh = wrap("每个词都看，其他所有的词。", 8);
        assert_eq!(zh.concat(), "每个词都看，其他所有的词。");
        assert!(zh.iter().all(|l| width(l) <= 8), "{zh:?}");
        for l in &zh {
            let first = l.chars().next().unwrap();
            assert!(!is_closing_punctuation(first), "{zh:?}");
        }
        assert_eq!(zh[0], "每个词都");
        // Closing quotes and brackets stay with what they close.
        let q = wrap("查询“cat”对键（key）的分数", 6);
        assert!(
            q.iter()
                .all(|l| !l.starts_with('”') && !l.starts_with('）')),
            "{q:?}"
        );
        assert_eq!(q.concat(), "查询“cat”对键（key）的分数");
    }

    #[test]
    fn spaces_between_words_are_kept_and_not_carried() {
        assert_eq!(wrap("a  b", 10), ["a  b"]);
        assert_eq!(wrap("aaa bbb", 3), ["aaa", "bbb"]);
        assert_eq!(wrap("abcdefgh", 3), ["abc", "def", "gh"]);
        assert_eq!(wrap("", 5), [""]);
    }
}
