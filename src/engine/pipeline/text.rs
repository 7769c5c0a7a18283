//! Splitting a sentence into tokens, the way a lesson needs it: words, punctuation on
//! its own, and one token per CJK character (Chinese has no spaces between words).

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

pub(super) fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in text.split_whitespace() {
        let chars: Vec<char> = word.chars().collect();
        let mut current = String::new();
        for (i, &c) in chars.iter().enumerate() {
            let is_word_char = c.is_alphanumeric() && !is_cjk(c);
            let joins = joins_word(c)
                && !current.is_empty()
                && chars
                    .get(i + 1)
                    .is_some_and(|n| n.is_alphanumeric() && !is_cjk(*n));
            if is_word_char || joins {
                current.push(c);
                continue;
            }
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            out.push(c.to_string());
        }
        if !current.is_empty() {
            out.push(current);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::tokens;

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
}
