//! Splitting a sentence into tokens, the way a lesson needs it: words, punctuation on
//! its own, and one token per CJK character (Chinese has no spaces between words).
//! The unit is the grapheme cluster (what a reader sees as one character): an emoji
//! joined with ZWJ, a flag or a letter with combining accents is never cut apart, and
//! no token is invisible.

use unicode_segmentation::UnicodeSegmentation;
use unicode_width::UnicodeWidthStr;

/// True for characters of the CJK scripts that are written without spaces: Han
/// ideographs, kana and Hangul syllables.
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF      // Hiragana, Katakana
        | 0x3400..=0x4DBF    // CJK Extension A
        | 0x4E00..=0x9FFF    // CJK Unified Ideographs
        | 0xAC00..=0xD7AF    // Hangul syllables
        | 0xF900..=0xFAFF    // CJK Compatibility Ideographs
        | 0x20000..=0x2FA1F  // CJK Extensions B.. and Compatibility Supplement
    )
}

/// An apostrophe or hyphen between two letters stays in the word ("don't", "self-made").
fn joins_word(c: char) -> bool {
    matches!(c, '\'' | '’' | '-')
}

/// The cluster is part of a word: it starts with a letter or digit of a spaced script.
fn is_word_cluster(g: &str) -> bool {
    g.chars()
        .next()
        .is_some_and(|c| c.is_alphanumeric() && !is_cjk(c))
}

pub(super) fn tokens(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        let clusters: Vec<&str> = word.graphemes(true).collect();
        let mut current = String::new();
        for (i, &g) in clusters.iter().enumerate() {
            let joins = g.chars().count() == 1
                && g.chars().all(joins_word)
                && !current.is_empty()
                && clusters.get(i + 1).is_some_and(|n| is_word_cluster(n));
            if is_word_cluster(g) || joins {
                current.push_str(g);
                continue;
            }
            if g.width() == 0 {
                // A zero-width cluster on its own (a stray joiner or mark at the start of a
                // word) belongs to what precedes it; with nothing before it, it is dropped.
                match out.last_mut() {
                    Some(prev) if current.is_empty() => prev.push_str(g),
                    _ => current.push_str(g),
                }
                continue;
            }
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            out.push(g.to_string());
        }
        if !current.is_empty() {
            out.push(current);
        }
    }
    out.retain(|t| t.width() > 0);
    out
}

#[cfg(test)]
mod tests {
    use super::tokens;
    use unicode_width::UnicodeWidthStr;

    fn t(s: &str) -> Vec<String> {
        tokens(s)
    }

    #[test]
    fn words_and_punctuation() {
        assert_eq!(
            t("The cat sat on the mat."),
            ["The", "cat", "sat", "on", "the", "mat", "."]
        );
        assert_eq!(t("  Hello,world!  "), ["Hello", ",", "world", "!"]);
        assert_eq!(
            t("don't self-made 'quoted'"),
            ["don't", "self-made", "'", "quoted", "'"]
        );
        assert_eq!(t("(x2)"), ["(", "x2", ")"]);
        assert!(t(" \t\n").is_empty());
    }

    #[test]
    fn each_cjk_character_is_a_token() {
        assert_eq!(t("我爱你。"), ["我", "爱", "你", "。"]);
        assert_eq!(t("注意力 is 好"), ["注", "意", "力", "is", "好"]);
        assert_eq!(t("GPT模型"), ["GPT", "模", "型"]);
    }

    #[test]
    fn a_grapheme_cluster_stays_one_token() {
        // Family (ZWJ sequence), a flag, a skin tone, a decomposed accent.
        let family = "\u{1F468}\u{200D}\u{1F469}\u{200D}\u{1F467}";
        assert_eq!(t(&format!("hi {family}!")), ["hi", family, "!"]);
        assert_eq!(t("\u{1F1EF}\u{1F1F5}"), ["\u{1F1EF}\u{1F1F5}"]);
        assert_eq!(t("\u{1F44D}\u{1F3FD} ok"), ["\u{1F44D}\u{1F3FD}", "ok"]);
        assert_eq!(t("cafe\u{301} au"), ["cafe\u{301}", "au"]);
        // A stray joiner is no token of its own.
        assert_eq!(t("a \u{200D} b"), ["a\u{200D}", "b"]);
        assert_eq!(t("\u{200D}"), Vec::<String>::new());
    }

    #[test]
    fn no_token_is_empty_or_invisible() {
        let samples = [
            "\u{1F468}\u{200D}\u{1F469}\u{200D}\u{1F467}\u{200D}\u{1F466} family",
            "x\u{FE0F} \u{200B}y \u{301}z",
            "\u{200D}\u{200D} \u{300}",
            "我\u{200D}爱 mixed-\u{1F600}",
        ];
        for s in samples {
            for tok in t(s) {
                assert!(tok.width() > 0, "{s:?} gave the invisible token {tok:?}");
            }
        }
    }
}
