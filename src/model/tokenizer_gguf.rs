//! A `tokenizers::Tokenizer` built from a GGUF file's `tokenizer.ggml.*` metadata, set up
//! the way the model's own Hugging Face `tokenizer.json` is:
//!
//! - `gpt2` (byte-level BPE): the tokens and merges as stored, the pre-tokenizer that
//!   llama.cpp picks for `tokenizer.ggml.pre` (llama-vocab.cpp), as the equivalent
//!   `tokenizers` pre-tokenizers (e.g. `smollm`: single digits split off, then GPT-2's
//!   byte-level regex, as SmolLM2's own tokenizer.json does);
//! - `llama` (SentencePiece BPE): byte fallback `<0xNN>`, `▁` for spaces, merges derived
//!   from the scores (every split of a token into two vocabulary pieces, ranked by the
//!   merged token's score, as transformers' SentencePiece converter does), BOS when
//!   `tokenizer.ggml.add_bos_token` (default true) says so.
//!
//! Control tokens (token type 3) and the bos/eos/unk/pad ids are special tokens, matched
//! in the text before splitting (`<|im_start|>` -> its id); user-defined tokens (type 4)
//! are matched too but are not special.

use tokenizers::decoders::byte_fallback::ByteFallback;
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::decoders::fuse::Fuse;
use tokenizers::decoders::sequence::Sequence as DecoderSequence;
use tokenizers::decoders::strip::Strip;
use tokenizers::models::bpe::{BPE, Vocab};
use tokenizers::normalizers::{Prepend, Replace, Sequence as NormSequence};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence as PreSequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::processors::template::TemplateProcessing;
use tokenizers::{
    AddedToken, DecoderWrapper, NormalizerWrapper, PreTokenizerWrapper, SplitDelimiterBehavior,
    Tokenizer,
};

use super::gguf::{GgufFile, Value};
use super::tokenizer::{ModelTokenizer, PieceStyle, byte_token};
use crate::error::{Error, Result};

/// `tokenizer.ggml.pre` values attnviz can reproduce.
pub const SUPPORTED_PRE: &str = "default, gpt2, smollm, starcoder, refact, command-r, codeshell, exaone, minerva, llama3 (llama-bpe), qwen2";

const LLAMA3_REGEX: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN2_REGEX: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

const TYPE_CONTROL: i64 = 3;
const TYPE_USER: i64 = 4;

fn err(g: &GgufFile, msg: String) -> Error {
    Error::file(&g.path, msg)
}

fn strings<'a>(g: &GgufFile, key: &str, a: &'a [Value]) -> Result<Vec<&'a str>> {
    a.iter()
        .enumerate()
        .map(|(i, v)| {
            v.as_str()
                .ok_or_else(|| err(g, format!("{key}[{i}] is not a string")))
        })
        .collect()
}

/// Build the tokenizer of a GGUF file.
pub fn build(g: &GgufFile) -> Result<ModelTokenizer> {
    let model = g.str("tokenizer.ggml.model")?;
    let tokens_v = g.opt_array("tokenizer.ggml.tokens")?.ok_or_else(|| {
        err(
            g,
            "missing required metadata key tokenizer.ggml.tokens".into(),
        )
    })?;
    let tokens = strings(g, "tokenizer.ggml.tokens", tokens_v)?;
    let types: Vec<i64> = match g.opt_array("tokenizer.ggml.token_type")? {
        Some(a) if a.len() == tokens.len() => a
            .iter()
            .map(|v| v.as_f64().map(|x| x as i64).unwrap_or(1))
            .collect(),
        Some(a) => {
            return Err(err(
                g,
                format!(
                    "tokenizer.ggml.token_type has {} entries but tokenizer.ggml.tokens has {}",
                    a.len(),
                    tokens.len()
                ),
            ));
        }
        None => vec![1; tokens.len()],
    };
    let id_key = |k: &str| -> Result<Option<u32>> {
        match g.opt_u64(k)? {
            Some(v) if (v as usize) < tokens.len() => Ok(Some(v as u32)),
            Some(v) => Err(err(
                g,
                format!("{k} is {v}, past the vocabulary of {} tokens", tokens.len()),
            )),
            None => Ok(None),
        }
    };
    let bos = id_key("tokenizer.ggml.bos_token_id")?;
    let eos = id_key("tokenizer.ggml.eos_token_id")?;
    let unk = id_key("tokenizer.ggml.unknown_token_id")?;
    let pad = id_key("tokenizer.ggml.padding_token_id")?;

    let mut vocab = Vocab::default();
    for (i, t) in tokens.iter().enumerate() {
        vocab.entry(t.to_string()).or_insert(i as u32);
    }

    let (mut tok, kind, style, default_bos) = match model {
        "gpt2" => {
            let merges_v = g.opt_array("tokenizer.ggml.merges")?.ok_or_else(|| {
                err(
                    g,
                    "missing required metadata key tokenizer.ggml.merges".into(),
                )
            })?;
            let merges = strings(g, "tokenizer.ggml.merges", merges_v)?
                .into_iter()
                .enumerate()
                .map(|(i, m)| {
                    m.split_once(' ')
                        .map(|(a, b)| (a.to_string(), b.to_string()))
                        .ok_or_else(|| {
                            err(
                                g,
                                format!("tokenizer.ggml.merges[{i}] {m:?} is not \"a b\""),
                            )
                        })
                })
                .collect::<Result<Vec<_>>>()?;
            let bpe = BPE::builder()
                .vocab_and_merges(vocab, merges)
                .build()
                .map_err(|e| err(g, format!("tokenizer.ggml.merges: {e}")))?;
            let mut tok = Tokenizer::new(bpe);
            let pre = g
                .get("tokenizer.ggml.pre")
                .and_then(|v| v.as_str())
                .unwrap_or("default");
            tok.with_pre_tokenizer(Some(pre_tokenizer(g, pre)?));
            tok.with_decoder(Some(DecoderWrapper::ByteLevel(ByteLevelDecoder::default())));
            (tok, "bpe", PieceStyle::ByteLevel, false)
        }
        "llama" => {
            let scores: Vec<f32> = match g.opt_array("tokenizer.ggml.scores")? {
                Some(a) if a.len() == tokens.len() => {
                    a.iter().map(|v| v.as_f64().unwrap_or(0.0) as f32).collect()
                }
                _ => {
                    return Err(err(
                        g,
                        "tokenizer.ggml.scores is missing or not one score per token".into(),
                    ));
                }
            };
            let merges = spm_merges(&tokens, &types, &scores, &vocab);
            let mut b = BPE::builder()
                .vocab_and_merges(vocab, merges)
                .byte_fallback(true)
                .fuse_unk(true);
            if let Some(u) = unk {
                b = b.unk_token(tokens[u as usize].to_string());
            }
            let bpe = b
                .build()
                .map_err(|e| err(g, format!("tokenizer.ggml.tokens: {e}")))?;
            let mut tok = Tokenizer::new(bpe);
            let space_prefix = g
                .opt_bool("tokenizer.ggml.add_space_prefix")?
                .unwrap_or(true);
            let replace = Replace::new(" ", "\u{2581}").expect("literal pattern");
            let norm = if space_prefix {
                NormalizerWrapper::Sequence(NormSequence::new(vec![
                    NormalizerWrapper::Prepend(Prepend::new("\u{2581}".into())),
                    NormalizerWrapper::Replace(replace),
                ]))
            } else {
                NormalizerWrapper::Replace(replace)
            };
            tok.with_normalizer(Some(norm));
            let mut decs = vec![
                DecoderWrapper::Replace(Replace::new("\u{2581}", " ").expect("literal pattern")),
                DecoderWrapper::ByteFallback(ByteFallback::new()),
                DecoderWrapper::Fuse(Fuse::new()),
            ];
            if space_prefix {
                decs.push(DecoderWrapper::Strip(Strip::new(' ', 1, 0)));
            }
            tok.with_decoder(Some(DecoderWrapper::Sequence(DecoderSequence::new(decs))));
            (tok, "sentencepiece", PieceStyle::Metaspace, true)
        }
        other => {
            return Err(err(
                g,
                format!("tokenizer.ggml.model {other:?} is not supported (supported: gpt2, llama)"),
            ));
        }
    };

    // Special tokens: control tokens and the named ids.
    let mut special: Vec<AddedToken> = Vec::new();
    let mut user: Vec<AddedToken> = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        let named = [bos, eos, unk, pad].contains(&Some(i as u32));
        if types[i] == TYPE_CONTROL || named {
            special.push(AddedToken::from(t.to_string(), true));
        } else if types[i] == TYPE_USER {
            user.push(AddedToken::from(t.to_string(), false));
        }
    }
    tok.add_special_tokens(&special);
    tok.add_tokens(&user);

    let add_bos = g
        .opt_bool("tokenizer.ggml.add_bos_token")?
        .unwrap_or(default_bos);
    if add_bos {
        let b = bos.ok_or_else(|| {
            err(
                g,
                "tokenizer.ggml.add_bos_token is true but tokenizer.ggml.bos_token_id is missing"
                    .into(),
            )
        })?;
        let text = tokens[b as usize];
        let tp = TemplateProcessing::builder()
            .try_single(vec![text.to_string(), "$A".to_string()])
            .and_then(|t| {
                t.try_pair(vec![
                    text.to_string(),
                    "$A".to_string(),
                    text.to_string(),
                    "$B".to_string(),
                ])
            })
            .map_err(|e| err(g, format!("BOS template: {e}")))?
            .special_tokens(vec![(text.to_string(), b)])
            .build()
            .map_err(|e| err(g, format!("BOS template: {e}")))?;
        tok.with_post_processor(Some(tp));
    }
    let eot = id_key("tokenizer.ggml.eot_token_id")?;
    let template = g
        .get("tokenizer.chat_template")
        .and_then(|v| v.as_str())
        .map(str::to_string);
    Ok(ModelTokenizer::new(tok, kind, style, bos, eos).with_chat(template, eot))
}

/// The pre-tokenizer of llama.cpp's `tokenizer.ggml.pre` as `tokenizers` parts.
fn pre_tokenizer(g: &GgufFile, pre: &str) -> Result<PreTokenizerWrapper> {
    let byte_level =
        |regex: bool| PreTokenizerWrapper::ByteLevel(ByteLevel::new(false, true, regex));
    let split = |re: &str| -> PreTokenizerWrapper {
        PreTokenizerWrapper::Split(
            Split::new(
                SplitPattern::Regex(re.to_string()),
                SplitDelimiterBehavior::Isolated,
                false,
            )
            .expect("a valid built-in regex"),
        )
    };
    Ok(match pre {
        "default" | "gpt2" | "gpt-2" => byte_level(true),
        // llama.cpp: "\p{N}" then GPT-2's regex, i.e. single digits split off first.
        "smollm" | "starcoder" | "refact" | "command-r" | "codeshell" | "exaone" | "minerva" => {
            PreTokenizerWrapper::Sequence(PreSequence::new(vec![
                PreTokenizerWrapper::Digits(Digits::new(true)),
                byte_level(true),
            ]))
        }
        "llama3" | "llama-v3" | "llama-bpe" => {
            PreTokenizerWrapper::Sequence(PreSequence::new(vec![
                split(LLAMA3_REGEX),
                byte_level(false),
            ]))
        }
        "qwen2" => PreTokenizerWrapper::Sequence(PreSequence::new(vec![
            split(QWEN2_REGEX),
            byte_level(false),
        ])),
        other => {
            return Err(err(
                g,
                format!(
                    "tokenizer.ggml.pre {other:?} is not supported (supported: {SUPPORTED_PRE})"
                ),
            ));
        }
    })
}

/// BPE merges of a SentencePiece vocabulary: every split of a normal token into two
/// vocabulary pieces, ranked by the merged token's score (higher first), ties by id.
fn spm_merges(
    tokens: &[&str],
    types: &[i64],
    scores: &[f32],
    vocab: &Vocab,
) -> Vec<(String, String)> {
    let mut merges: Vec<(f32, u32, String, String)> = Vec::new();
    for (id, t) in tokens.iter().enumerate() {
        if types[id] == TYPE_CONTROL || byte_token(t).is_some() {
            continue;
        }
        for (i, _) in t.char_indices().skip(1) {
            let (a, b) = t.split_at(i);
            if vocab.contains_key(a) && vocab.contains_key(b) {
                merges.push((scores[id], id as u32, a.to_string(), b.to_string()));
            }
        }
    }
    merges.sort_by(|x, y| y.0.total_cmp(&x.0).then(x.1.cmp(&y.1)));
    merges.into_iter().map(|(_, _, a, b)| (a, b)).collect()
}
