//! A model's own tokenizer: `tokenizers::Tokenizer` from a folder's `tokenizer.json`, or
//! built from a GGUF file's `tokenizer.ggml.*` metadata (by `tokenizer_gguf`).

use std::collections::HashSet;
use std::path::Path;

use tokenizers::Tokenizer;

use crate::error::{Error, Result};

/// How a vocabulary writes the text of a piece.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PieceStyle {
    /// GPT-2's byte-to-unicode map (`Ġ` is a space).
    ByteLevel,
    /// SentencePiece: `▁` is a space, `<0xNN>` a raw byte.
    Metaspace,
    /// As written (WordPiece keeps `##ing`).
    Plain,
}

/// The tokenizer of a loaded model.
pub struct ModelTokenizer {
    tok: Tokenizer,
    kind: &'static str,
    style: PieceStyle,
    bos: Option<u32>,
    eos: Option<u32>,
    special: Vec<(String, u32)>,
    special_ids: HashSet<u32>,
    /// The model's Jinja chat template, if it ships one.
    chat_template: Option<String>,
    /// The end-of-turn token a GGUF names (`tokenizer.ggml.eot_token_id`).
    eot: Option<u32>,
}

impl std::fmt::Debug for ModelTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelTokenizer")
            .field("kind", &self.kind)
            .field("vocab", &self.vocab_size())
            .finish()
    }
}

impl ModelTokenizer {
    pub(crate) fn new(
        tok: Tokenizer,
        kind: &'static str,
        style: PieceStyle,
        bos: Option<u32>,
        eos: Option<u32>,
    ) -> Self {
        let mut special: Vec<(String, u32)> = tok
            .get_added_tokens_decoder()
            .into_iter()
            .filter(|(_, t)| t.special)
            .map(|(id, t)| (t.content, id))
            .collect();
        special.sort_by_key(|&(_, id)| id);
        let special_ids = special.iter().map(|&(_, id)| id).collect();
        ModelTokenizer {
            tok,
            kind,
            style,
            bos,
            eos,
            special,
            special_ids,
            chat_template: None,
            eot: None,
        }
    }

    /// The same tokenizer with the model's chat template and end-of-turn token.
    pub(crate) fn with_chat(mut self, template: Option<String>, eot: Option<u32>) -> Self {
        self.chat_template = template.filter(|t| !t.trim().is_empty());
        self.eot = eot;
        self
    }

    pub fn chat_template(&self) -> Option<&str> {
        self.chat_template.as_deref()
    }

    pub fn eot_id(&self) -> Option<u32> {
        self.eot
    }

    /// Token ids of `text` as written: special tokens in it matched, none added.
    pub fn encode_plain(&self, text: &str) -> Result<Vec<u32>> {
        let enc = self
            .tok
            .encode(text, false)
            .map_err(|e| Error::usage(format!("cannot tokenize {text:?}: {e}")))?;
        Ok(enc.get_ids().to_vec())
    }

    /// The vocabulary's string for `id` (`<bos>`, `<|im_start|>`), as a template writes it.
    pub fn piece_text(&self, id: u32) -> String {
        self.tok.id_to_token(id).unwrap_or_default()
    }

    /// From a Hugging Face folder: `tokenizer.json`, with BOS/EOS from
    /// `tokenizer_config.json` or `config.json` when they name them.
    pub fn from_hf_dir(dir: &Path) -> Result<Self> {
        let path = dir.join("tokenizer.json");
        let text = read_json_text(&path)?;
        let mut tok = Tokenizer::from_bytes(text.as_bytes())
            .map_err(|e| Error::file(&path, format!("not a tokenizers tokenizer.json: {e}")))?;
        // transformers encodes one text without the file's padding or truncation.
        tok.with_padding(None);
        tok.with_truncation(None)
            .map_err(|e| Error::file(&path, format!("truncation: {e}")))?;
        let json: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| Error::file(&path, format!("{}:{}: {e}", e.line(), e.column())))?;
        let model = &json["model"];
        let kind = match model["type"].as_str() {
            Some("WordPiece") => "wordpiece",
            Some("Unigram") => "sentencepiece",
            Some("BPE") if model["byte_fallback"].as_bool() == Some(true) => "sentencepiece",
            Some("WordLevel") => "wordlevel",
            // tokenizer.json files written before `type` was serialised are BPE.
            _ => "bpe",
        };
        let dec = json["decoder"].to_string();
        let style = if dec.contains("ByteLevel") {
            PieceStyle::ByteLevel
        } else if dec.contains("Metaspace") || dec.contains('\u{2581}') {
            PieceStyle::Metaspace
        } else {
            PieceStyle::Plain
        };
        let named = |key: &str| -> Option<u32> {
            let tc = read_json_text(&dir.join("tokenizer_config.json")).ok()?;
            let tc: serde_json::Value = serde_json::from_str(&tc).ok()?;
            let v = &tc[key];
            let s = v.as_str().or_else(|| v["content"].as_str())?;
            tok.token_to_id(s)
        };
        let from_config = |key: &str| -> Option<u32> {
            let c = read_json_text(&dir.join("config.json")).ok()?;
            let c: serde_json::Value = serde_json::from_str(&c).ok()?;
            c[key].as_u64().map(|v| v as u32)
        };
        let bos = named("bos_token").or_else(|| from_config("bos_token_id"));
        let eos = named("eos_token").or_else(|| from_config("eos_token_id"));
        Ok(Self::new(tok, kind, style, bos, eos).with_chat(hf_chat_template(dir), None))
    }

    /// Token ids of `text`, with the special tokens the model's tokenizer adds.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let enc = self
            .tok
            .encode(text, true)
            .map_err(|e| Error::usage(format!("cannot tokenize {text:?}: {e}")))?;
        Ok(enc.get_ids().to_vec())
    }

    /// The display text of one token (`Ġcat` and `▁cat` -> " cat", `##ing` kept).
    pub fn piece(&self, id: u32) -> String {
        let Some(t) = self.tok.id_to_token(id) else {
            return format!("<id {id}?>");
        };
        if self.special_ids.contains(&id) {
            return t;
        }
        match self.style {
            PieceStyle::Plain => t,
            PieceStyle::ByteLevel => match byte_level_bytes(&t) {
                Some(b) => bytes_text(&b),
                None => t,
            },
            PieceStyle::Metaspace => {
                if let Some(b) = byte_token(&t) {
                    bytes_text(&[b])
                } else {
                    t.replace('\u{2581}', " ")
                }
            }
        }
    }

    /// The text of a sequence of ids (special tokens kept).
    pub fn decode(&self, ids: &[u32]) -> String {
        self.tok
            .decode(ids, false)
            .unwrap_or_else(|_| ids.iter().map(|&i| self.piece(i)).collect())
    }

    pub fn bos_id(&self) -> Option<u32> {
        self.bos
    }

    pub fn eos_id(&self) -> Option<u32> {
        self.eos
    }

    pub fn is_special(&self, id: u32) -> bool {
        self.special_ids.contains(&id)
    }

    /// "bpe", "wordpiece" or "sentencepiece".
    pub fn kind(&self) -> &str {
        self.kind
    }

    /// Special tokens and their ids, by id.
    pub fn special_tokens(&self) -> Vec<(String, u32)> {
        self.special.clone()
    }

    /// Vocabulary size, added tokens included.
    pub fn vocab_size(&self) -> usize {
        self.tok.get_vocab_size(true)
    }

    /// The wrapped tokenizer.
    pub fn inner(&self) -> &Tokenizer {
        &self.tok
    }
}

/// `<0xNN>` -> the byte NN.
pub(crate) fn byte_token(t: &str) -> Option<u8> {
    let hex = t.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

/// Bytes as text; bytes that are not valid UTF-8 on their own shown as `<0xNN>`.
fn bytes_text(b: &[u8]) -> String {
    match std::str::from_utf8(b) {
        Ok(s) => s.to_string(),
        Err(_) => {
            let mut out = String::new();
            for chunk in b.utf8_chunks() {
                out.push_str(chunk.valid());
                for &x in chunk.invalid() {
                    out.push_str(&format!("<0x{x:02X}>"));
                }
            }
            out
        }
    }
}

/// GPT-2's byte -> printable char table (`bytes_to_unicode`): printable Latin-1 bytes map
/// to themselves, the other 68 bytes to U+0100.. in order.
pub(crate) fn byte_to_char() -> [char; 256] {
    let mut t = ['\0'; 256];
    let mut n = 0u32;
    for b in 0..256u32 {
        let keep = (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
        t[b as usize] = if keep {
            char::from_u32(b).expect("Latin-1")
        } else {
            n += 1;
            char::from_u32(255 + n).expect("U+0100..")
        };
    }
    t
}

/// The raw bytes of a byte-level token, or None if a char is outside the table.
fn byte_level_bytes(t: &str) -> Option<Vec<u8>> {
    static INVERSE: std::sync::OnceLock<std::collections::HashMap<char, u8>> =
        std::sync::OnceLock::new();
    let inv = INVERSE.get_or_init(|| {
        byte_to_char()
            .iter()
            .enumerate()
            .map(|(b, &c)| (c, b as u8))
            .collect()
    });
    t.chars().map(|c| inv.get(&c).copied()).collect()
}

/// A text file of a model folder, read only if it is a regular file (a FIFO would block)
/// and no larger than [`crate::input::MAX_MODEL_JSON_BYTES`].
fn read_json_text(path: &Path) -> Result<String> {
    crate::input::read_text_limited(
        path,
        crate::input::MAX_MODEL_JSON_BYTES,
        "a model's JSON file",
    )
}

/// A folder's chat template: `chat_template.jinja`, or `chat_template` in
/// `tokenizer_config.json` (a string, or a list of {name, template} whose `default` is used).
fn hf_chat_template(dir: &Path) -> Option<String> {
    if let Ok(t) = read_json_text(&dir.join("chat_template.jinja")) {
        return Some(t);
    }
    let tc = read_json_text(&dir.join("tokenizer_config.json")).ok()?;
    let tc: serde_json::Value = serde_json::from_str(&tc).ok()?;
    match &tc["chat_template"] {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Array(list) => list
            .iter()
            .find(|t| t["name"] == "default")
            .or(list.first())
            .and_then(|t| t["template"].as_str())
            .map(str::to_string),
        _ => None,
    }
}
