//! Tiny vocabularies: a byte-level BPE (3 special tokens, the 256 byte symbols, ~40
//! merges) and a WordPiece one, with tokenizer.json files for them.

use serde_json::{Value, json};

pub const SPECIALS: [&str; 3] = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"];

/// The merges, in rank order; every side is a token made by an earlier merge or a byte.
pub const MERGES: [(&str, &str); 41] = [
    ("Ġ", "t"),
    ("h", "e"),
    ("Ġt", "he"),
    ("i", "n"),
    ("Ġ", "a"),
    ("a", "t"),
    ("Ġ", "c"),
    ("Ġc", "at"),
    ("o", "n"),
    ("e", "r"),
    ("Ġ", "s"),
    ("i", "s"),
    ("Ġ", "Ġ"),
    ("ĠĠ", "ĠĠ"),
    ("r", "e"),
    ("Ġ", "o"),
    ("Ġo", "n"),
    ("e", "n"),
    ("Ġ", "m"),
    ("Ġm", "at"),
    ("in", "g"),
    ("Ġ", "w"),
    ("o", "r"),
    ("Ġw", "or"),
    ("l", "d"),
    ("Ġwor", "ld"),
    ("Ġs", "at"),
    ("1", "2"),
    ("Ġ", "1"),
    ("T", "he"),
    ("Ċ", "Ċ"),
    ("Ġ", "é"),
    ("a", "f"),
    ("c", "af"),
    ("Ġ", "is"),
    ("Ġc", "af"),
    ("ä", "½"),
    ("Ġ", "Ã"),
    ("s", "t"),
    ("Ġ", "st"),
    ("Ġt", "r"),
];

/// GPT-2's byte -> printable char map.
pub fn byte_chars() -> Vec<char> {
    let mut out = Vec::new();
    let mut n = 0u32;
    for b in 0..256u32 {
        let keep = (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
        out.push(if keep {
            char::from_u32(b).unwrap()
        } else {
            n += 1;
            char::from_u32(255 + n).unwrap()
        });
    }
    out
}

/// Tokens in id order: specials, the 256 byte symbols, then one token per merge (merges
/// whose result is already a token add nothing).
pub fn bpe_tokens() -> Vec<String> {
    let mut t: Vec<String> = SPECIALS.iter().map(|s| s.to_string()).collect();
    t.extend(byte_chars().into_iter().map(|c| c.to_string()));
    for (a, b) in MERGES {
        assert!(t.iter().any(|x| x == a), "merge side {a:?} not a token");
        assert!(t.iter().any(|x| x == b), "merge side {b:?} not a token");
        let m = format!("{a}{b}");
        if !t.contains(&m) {
            t.push(m);
        }
    }
    t
}

pub fn bpe_merges() -> Vec<String> {
    MERGES.iter().map(|(a, b)| format!("{a} {b}")).collect()
}

fn added(id: usize, content: &str, special: bool) -> Value {
    json!({"id": id, "content": content, "single_word": false, "lstrip": false,
           "rstrip": false, "normalized": !special, "special": special})
}

/// SmolLM2-style tokenizer.json over [`bpe_tokens`]: single digits split off, then the
/// byte-level regex; no special tokens added.
pub fn bpe_tokenizer_json() -> Value {
    let tokens = bpe_tokens();
    let vocab: serde_json::Map<String, Value> = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.clone(), json!(i)))
        .collect();
    json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": SPECIALS.iter().enumerate().map(|(i, s)| added(i, s, true)).collect::<Vec<_>>(),
        "normalizer": null,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": true},
            {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}
        ]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                  "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
                  "ignore_merges": false, "vocab": vocab, "merges": bpe_merges()}
    })
}

/// A WordPiece vocabulary: the BERT specials, a few words, letters and `##` letters.
pub fn wordpiece_tokens() -> Vec<String> {
    let mut t: Vec<String> = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for w in [
        "the", "cat", "sat", "on", "mat", "play", "##ing", "##s", ".", ",", "!",
    ] {
        t.push(w.to_string());
    }
    for c in 'a'..='z' {
        t.push(c.to_string());
    }
    for c in 'a'..='z' {
        t.push(format!("##{c}"));
    }
    for d in '0'..='9' {
        t.push(d.to_string());
    }
    t
}

/// BERT-style tokenizer.json: lowercasing normalizer, `[CLS] $A [SEP]`.
pub fn wordpiece_tokenizer_json() -> Value {
    let tokens = wordpiece_tokens();
    let vocab: serde_json::Map<String, Value> = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.clone(), json!(i)))
        .collect();
    let st = |s: &str, id: usize| json!({"id": s, "ids": [id], "tokens": [s]});
    // Padding and truncation as all-MiniLM-L6-v2's file has them: one text is encoded
    // without either (as transformers does).
    json!({
        "version": "1.0",
        "truncation": {"direction": "Right", "max_length": 128, "strategy": "LongestFirst", "stride": 0},
        "padding": {"strategy": {"Fixed": 16}, "direction": "Right", "pad_to_multiple_of": null,
                    "pad_id": 0, "pad_type_id": 0, "pad_token": "[PAD]"},
        "added_tokens": (0..5).map(|i| added(i, &tokens[i], true)).collect::<Vec<_>>(),
        "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
                       "strip_accents": null, "lowercase": true},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
            "special_tokens": {"[CLS]": st("[CLS]", 2), "[SEP]": st("[SEP]", 3)}},
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": vocab}
    })
}
