//! Loading tiny models that the tests write themselves: GGUF llama (F32, Q8_0, Q4_1) and
//! Hugging Face bert / gpt2 / llama folders; config, weights, tokenizers.

use crate::support;

use attnviz::model::load::Residency;
use attnviz::model::{self, Act, Arch, Mlp, NormPlace, PosKind, RopeStyle};
use support::gguf::{Quant, Tiny, tiny_llama};
use support::{hf, vocab};

fn assert_close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= 1e-6, "{what}[{i}]: got {g}, want {w}");
    }
}

fn write_gguf(
    dir: &tempfile::TempDir,
    t: Tiny,
    q: Quant,
) -> (std::path::PathBuf, support::gguf::Gguf) {
    let g = tiny_llama(t, q);
    let p = dir.path().join(format!("tiny-{q:?}.gguf"));
    g.write(&p);
    (p, g)
}

fn check_gguf_weights(m: &model::LoadedModel, g: &support::gguf::Gguf, t: Tiny) {
    let w = &m.weights;
    assert_close(
        &w.tok_embed.to_f32(),
        &g.tensor("token_embd.weight").want,
        "token_embd",
    );
    assert_eq!(w.layers.len(), t.layers);
    for (l, lw) in w.layers.iter().enumerate() {
        let p = format!("blk.{l}.");
        let want = |n: &str| &g.tensor(&format!("{p}{n}.weight")).want;
        assert_close(&lw.attn_norm.w, want("attn_norm"), "attn_norm");
        assert_close(&lw.wq.w.to_f32(), want("attn_q"), "attn_q");
        assert_close(&lw.wk.w.to_f32(), want("attn_k"), "attn_k");
        assert_close(&lw.wv.w.to_f32(), want("attn_v"), "attn_v");
        assert_close(&lw.wo.w.to_f32(), want("attn_output"), "attn_output");
        assert_close(&lw.mlp_norm.w, want("ffn_norm"), "ffn_norm");
        assert_eq!(
            (lw.wq.out_dim, lw.wq.in_dim),
            (t.heads * t.d_head(), t.d_model)
        );
        assert_eq!(
            (lw.wk.out_dim, lw.wk.in_dim),
            (t.kv_heads * t.d_head(), t.d_model)
        );
        assert_eq!(
            (lw.wo.out_dim, lw.wo.in_dim),
            (t.d_model, t.heads * t.d_head())
        );
        match &lw.mlp {
            Mlp::Gated { gate, up, down } => {
                assert_close(&gate.w.to_f32(), want("ffn_gate"), "ffn_gate");
                assert_close(&up.w.to_f32(), want("ffn_up"), "ffn_up");
                assert_close(&down.w.to_f32(), want("ffn_down"), "ffn_down");
                assert_eq!((down.out_dim, down.in_dim), (t.d_model, t.d_ff));
            }
            Mlp::Plain { .. } => panic!("llama has a gated MLP"),
        }
    }
    assert_close(
        &w.final_norm.as_ref().unwrap().w,
        &g.tensor("output_norm.weight").want,
        "output_norm",
    );
}

#[test]
fn gguf_f32_llama_config_and_weights_are_what_was_written() {
    let dir = tempfile::tempdir().unwrap();
    let t = Tiny::new();
    let (p, g) = write_gguf(&dir, t, Quant::F32);
    let m = model::load(p.to_str().unwrap()).unwrap();
    let c = &m.config;
    assert_eq!(c.arch, Arch::Llama);
    assert_eq!(
        (c.layers, c.heads, c.kv_heads, c.d_model, c.d_head, c.d_ff),
        (2, 4, 2, 32, 8, 64)
    );
    assert_eq!(c.vocab, vocab::bpe_tokens().len());
    assert_eq!(c.context, 64);
    assert_eq!(
        c.pos,
        PosKind::Rope {
            base: 100000.0,
            style: RopeStyle::Interleaved
        }
    );
    assert!((c.norm_eps - 1e-5).abs() < 1e-9);
    assert!(c.causal && !c.tied_embeddings);
    assert_eq!(c.act, Act::Silu);
    assert_eq!(c.norm_place, NormPlace::Pre);
    check_gguf_weights(&m, &g, t);
    assert_close(
        &m.weights.lm_head.as_ref().unwrap().w.to_f32(),
        &g.tensor("output.weight").want,
        "output",
    );
    // Every value of the file was loaded.
    let stored: usize = g.tensors.iter().map(|t| t.want.len()).sum();
    assert_eq!(m.params(), stored as u64);
    let info = model::inspect(p.to_str().unwrap()).unwrap();
    assert_eq!(info.params, stored as u64);
    assert_eq!(info.file_bytes, std::fs::metadata(&p).unwrap().len());
}

#[test]
fn gguf_quantized_tensors_equal_their_block_fields() {
    for q in [Quant::Q8_0, Quant::Q4_1] {
        let dir = tempfile::tempdir().unwrap();
        let t = Tiny {
            tied: true,
            ..Tiny::new()
        };
        let (p, g) = write_gguf(&dir, t, q);
        let m = model::load(p.to_str().unwrap()).unwrap();
        assert!(
            m.config.tied_embeddings,
            "{q:?}: no output.weight means tied"
        );
        assert!(m.weights.lm_head.is_none());
        check_gguf_weights(&m, &g, t);
        // As `generate` loads it: the tensor data copied to huge pages where the kernel
        // offers them (the same bytes either way).
        let copied = model::load::load_with(p.to_str().unwrap(), Residency::HugePages).unwrap();
        assert!(
            copied.weights == m.weights,
            "{q:?}: the copy holds other weights"
        );
        check_gguf_weights(&copied, &g, t);
    }
}

/// Texts that exercise the pre-tokenizer: digits, CJK, emoji, accents, runs of spaces,
/// newlines, contractions, special tokens inside text.
const TEXTS: [&str; 12] = [
    "The cat sat on the mat.",
    "the world is 12345 and 3.14",
    "café naïve Ünïcödé",
    "你好，世界",
    "emoji 🙂👍🏽 done",
    "a    b     c  ",
    "  leading and\n\n\ttabs\r\n",
    "don't we'll they're I'm",
    "<|im_start|>user\nhi<|im_end|>",
    "x<|endoftext|>y",
    "",
    "fn main() { println!(\"{}\", 1_000); }",
];

#[test]
fn gguf_bpe_tokenizer_matches_the_same_vocab_as_tokenizer_json() {
    let dir = tempfile::tempdir().unwrap();
    let (p, _) = write_gguf(&dir, Tiny::new(), Quant::F32);
    let m = model::load(p.to_str().unwrap()).unwrap();
    let tj = dir.path().join("tokenizer.json");
    std::fs::write(&tj, vocab::bpe_tokenizer_json().to_string()).unwrap();
    let reference = tokenizers::Tokenizer::from_file(&tj).unwrap();
    let tok = &m.tokenizer;
    assert_eq!(tok.kind(), "bpe");
    assert_eq!(tok.vocab_size(), vocab::bpe_tokens().len());
    for text in TEXTS {
        let ids = tok.encode(text).unwrap();
        let want = reference.encode(text, true).unwrap().get_ids().to_vec();
        assert_eq!(ids, want, "{text:?}");
        assert_eq!(tok.decode(&ids), text, "round trip of {text:?}");
    }
    // Digits split one by one (smollm), merges applied, no BOS added.
    let ids = tok.encode(" the cat 12").unwrap();
    let pieces: Vec<String> = ids.iter().map(|&i| tok.piece(i)).collect();
    assert_eq!(pieces, [" the", " cat", " ", "1", "2"]);
    let im = tok.encode("<|im_start|>").unwrap();
    assert_eq!(im, [1]);
    assert!(tok.is_special(1) && !tok.is_special(100));
    assert_eq!(tok.bos_id(), Some(1));
    assert_eq!(tok.eos_id(), Some(2));
    let names: Vec<String> = tok.special_tokens().into_iter().map(|(s, _)| s).collect();
    assert_eq!(names, vocab::SPECIALS);
    // A byte that is not UTF-8 alone shows as <0xNN>; a whole char decodes.
    let cjk = tok.encode("你").unwrap();
    assert!(cjk.len() > 1);
    assert!(
        tok.piece(cjk[0]).starts_with("<0x"),
        "{}",
        tok.piece(cjk[0])
    );
}

#[test]
fn hf_bert_folder_loads_with_and_without_prefix() {
    for prefixed in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let f = hf::bert(prefixed);
        f.write(dir.path(), 1);
        let m = model::load(dir.path().to_str().unwrap()).unwrap();
        let c = &m.config;
        assert_eq!(c.arch, Arch::Bert);
        assert_eq!(
            (c.layers, c.heads, c.kv_heads, c.d_model, c.d_head),
            (2, 4, 4, 16, 4)
        );
        assert!(!c.causal);
        assert_eq!(c.norm_place, NormPlace::Post);
        assert_eq!(c.act, Act::Gelu);
        assert_eq!(c.pos, PosKind::Learned);
        let p = if prefixed { "bert." } else { "" };
        let w = &m.weights;
        let g = |n: &str| &f.get(&format!("{p}{n}")).values;
        assert_close(
            &w.tok_embed.to_f32(),
            g("embeddings.word_embeddings.weight"),
            "word",
        );
        assert_close(
            w.pos_embed.as_ref().unwrap(),
            g("embeddings.position_embeddings.weight"),
            "pos",
        );
        // Row 0 of the token-type table.
        assert_close(
            w.type_embed.as_ref().unwrap(),
            &g("embeddings.token_type_embeddings.weight")[..16],
            "type",
        );
        let en = w.embed_norm.as_ref().unwrap();
        assert_close(
            en.b.as_ref().unwrap(),
            g("embeddings.LayerNorm.bias"),
            "embed ln",
        );
        let l1 = &w.layers[1];
        assert_close(
            &l1.wk.w.to_f32(),
            g("encoder.layer.1.attention.self.key.weight"),
            "key",
        );
        assert_close(
            l1.wk.b.as_ref().unwrap(),
            g("encoder.layer.1.attention.self.key.bias"),
            "key b",
        );
        assert_close(
            &l1.attn_norm.w,
            g("encoder.layer.1.attention.output.LayerNorm.weight"),
            "attn ln",
        );
        assert_close(
            &l1.mlp_norm.w,
            g("encoder.layer.1.output.LayerNorm.weight"),
            "out ln",
        );
        match &l1.mlp {
            Mlp::Plain { up, down } => {
                assert_close(
                    &up.w.to_f32(),
                    g("encoder.layer.1.intermediate.dense.weight"),
                    "up",
                );
                assert_close(
                    &down.w.to_f32(),
                    g("encoder.layer.1.output.dense.weight"),
                    "down",
                );
                assert_eq!((up.out_dim, up.in_dim), (32, 16));
            }
            Mlp::Gated { .. } => panic!("BERT has a plain MLP"),
        }
        assert!(w.lm_head.is_none() && w.final_norm.is_none());
        let tok = &m.tokenizer;
        assert_eq!(tok.kind(), "wordpiece");
        let ids = tok.encode("The cats playing!").unwrap();
        let pieces: Vec<String> = ids.iter().map(|&i| tok.piece(i)).collect();
        assert_eq!(
            pieces,
            ["[CLS]", "the", "cat", "##s", "play", "##ing", "!", "[SEP]"]
        );
        assert!(tok.is_special(2) && tok.is_special(3) && !tok.is_special(5));
    }
}

#[test]
fn hf_gpt2_fused_qkv_is_split_and_transposed() {
    let dir = tempfile::tempdir().unwrap();
    let f = hf::gpt2();
    f.write(dir.path(), 1);
    let m = model::load(dir.path().to_str().unwrap()).unwrap();
    let c = &m.config;
    assert_eq!(c.arch, Arch::Gpt2);
    assert_eq!(c.act, Act::GeluTanh);
    assert!(c.causal && c.tied_embeddings);
    assert_eq!(c.d_ff, 64);
    let d = hf::D;
    for l in 0..hf::LAYERS {
        let lw = &m.weights.layers[l];
        let attn = f.get(&format!("h.{l}.attn.c_attn.weight"));
        let bias = &f.get(&format!("h.{l}.attn.c_attn.bias")).values;
        for (k, lin) in [&lw.wq, &lw.wk, &lw.wv].into_iter().enumerate() {
            assert_eq!((lin.out_dim, lin.in_dim), (d, d));
            for o in 0..d {
                for i in 0..d {
                    // Conv1D [in, 3d]: column k*d + o of row i.
                    assert_eq!(
                        lin.w.to_f32()[o * d + i],
                        attn.values[i * 3 * d + k * d + o],
                        "layer {l} part {k} ({o},{i})"
                    );
                }
            }
            assert_eq!(lin.b.as_ref().unwrap(), &bias[k * d..(k + 1) * d]);
        }
        let fc = f.get(&format!("h.{l}.mlp.c_fc.weight"));
        let up = match &lw.mlp {
            Mlp::Plain { up, .. } => up,
            Mlp::Gated { .. } => panic!("gpt2 has a plain MLP"),
        };
        assert_eq!((up.out_dim, up.in_dim), (4 * d, d));
        for o in 0..4 * d {
            for i in 0..d {
                assert_eq!(up.w.to_f32()[o * d + i], fc.values[i * 4 * d + o]);
            }
        }
    }
    assert!(m.weights.lm_head.is_none());
    assert_eq!(m.tokenizer.kind(), "bpe");
    assert_eq!(
        m.tokenizer.piece(m.tokenizer.encode(" cat").unwrap()[0]),
        " cat"
    );
}

#[test]
fn hf_llama_bf16_sharded_loads_untied_with_half_rope() {
    let dir = tempfile::tempdir().unwrap();
    let f = hf::llama();
    f.write(dir.path(), 3);
    assert!(dir.path().join("model.safetensors.index.json").is_file());
    let m = model::load(dir.path().to_str().unwrap()).unwrap();
    let c = &m.config;
    assert_eq!((c.heads, c.kv_heads, c.d_head), (4, 2, 4));
    assert_eq!(
        c.pos,
        PosKind::Rope {
            base: 500000.0,
            style: RopeStyle::Half
        }
    );
    let w = &m.weights;
    assert_close(
        &w.lm_head.as_ref().unwrap().w.to_f32(),
        &f.get("lm_head.weight").values,
        "lm_head",
    );
    assert_close(
        &w.layers[1].wk.w.to_f32(),
        &f.get("model.layers.1.self_attn.k_proj.weight").values,
        "k",
    );
    assert_eq!(w.layers[1].wk.out_dim, 8);
    assert_close(
        &w.final_norm.as_ref().unwrap().w,
        &f.get("model.norm.weight").values,
        "norm",
    );
    let stored: usize = f.tensors.values().map(|t| t.values.len()).sum();
    assert_eq!(m.params(), stored as u64);
}

#[test]
fn gguf_sentencepiece_tokenizer_merges_by_score_with_byte_fallback() {
    use support::gguf::{Meta, s};
    let mut tokens: Vec<String> = ["<unk>", "<s>", "</s>"].map(String::from).to_vec();
    let mut types = vec![2, 3, 3];
    for b in 0..256 {
        tokens.push(format!("<0x{b:02X}>"));
        types.push(6);
    }
    let normal = [
        ("▁", -100.0),
        ("t", -100.0),
        ("h", -100.0),
        ("e", -100.0),
        ("c", -100.0),
        ("a", -100.0),
        ("▁the", -1.0),
        ("▁cat", -1.5),
        ("▁t", -2.0),
        ("he", -3.0),
        ("at", -4.0),
        ("▁c", -5.0),
        ("th", -6.0),
    ];
    let mut scores = vec![0f32; tokens.len()];
    for (t, sc) in normal {
        tokens.push(t.to_string());
        types.push(1);
        scores.push(sc);
    }
    let id = |t: &str| tokens.iter().position(|x| x == t).unwrap() as u32;
    let (the, cat, t_, h) = (id("▁the"), id("▁cat"), id("▁t"), id("h"));
    let mut g = tiny_llama(Tiny::new(), Quant::F32);
    g.set("tokenizer.ggml.model", s("llama"));
    g.remove("tokenizer.ggml.pre");
    g.remove("tokenizer.ggml.merges");
    g.remove("tokenizer.ggml.add_bos_token");
    g.set("tokenizer.ggml.tokens", Meta::Strs(tokens.clone()));
    g.set("tokenizer.ggml.token_type", Meta::I32s(types));
    g.set("tokenizer.ggml.scores", Meta::F32s(scores));
    g.set("tokenizer.ggml.unknown_token_id", Meta::U32(0));
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("spm.gguf");
    g.write(&p);
    let m = model::load(p.to_str().unwrap()).unwrap();
    let tok = &m.tokenizer;
    assert_eq!(tok.kind(), "sentencepiece");
    // BOS added by default; the highest-scoring merges win.
    assert_eq!(tok.encode("the cat").unwrap(), [1, the, cat]);
    assert_eq!(tok.decode(&[1, the, cat]), "<s> the cat");
    // é is not in the vocabulary: its UTF-8 bytes.
    let ids = tok.encode("thé").unwrap();
    assert_eq!(ids, [1, t_, h, 3 + 0xC3, 3 + 0xA9]);
    let pieces: Vec<String> = ids.iter().map(|&i| tok.piece(i)).collect();
    assert_eq!(pieces, ["<s>", " t", "h", "<0xC3>", "<0xA9>"]);
    assert_eq!(tok.piece(3 + b'A' as u32), "A");
    assert_eq!(tok.decode(&ids[1..]), "thé");
    assert!(tok.is_special(0) && tok.is_special(1) && tok.is_special(2));
}

/// GPT-2 as llama.cpp's converter writes it: the same weights as a Hugging Face folder
/// (whose loader is checked against transformers), renamed, Conv1D transposed to [out, in]
/// rows, Q, K and V fused in `attn_qkv`, learned positions in `position_embd`.
#[test]
fn gguf_gpt2_holds_the_same_model_as_its_folder() {
    use support::gguf::{Gguf, Meta, Tensor, encode, s};
    let dir = tempfile::tempdir().unwrap();
    hf::gpt2().write(dir.path(), 1);
    let from_hf = model::load(dir.path().to_str().unwrap()).unwrap();
    let (c, w) = (&from_hf.config, &from_hf.weights);
    let (d, ff, v) = (c.d_model as u64, c.d_ff as u64, c.vocab as u64);
    let mut meta: Vec<(String, Meta)> = tiny_llama(Tiny::new(), Quant::F32)
        .meta
        .into_iter()
        .filter(|(k, _)| k.starts_with("tokenizer.") || k == "general.alignment")
        .collect();
    meta.push(("general.architecture".into(), s("gpt2")));
    for (k, n) in [
        ("block_count", c.layers),
        ("context_length", c.context),
        ("embedding_length", c.d_model),
        ("feed_forward_length", c.d_ff),
        ("attention.head_count", c.heads),
    ] {
        meta.push((format!("gpt2.{k}"), Meta::U32(n as u32)));
    }
    meta.push(("gpt2.attention.layer_norm_epsilon".into(), Meta::F32(1e-5)));
    let mut tensors = Vec::new();
    let mut add = |name: String, dims: Vec<u64>, x: Vec<f32>| {
        let (ty, data, want) = encode(&x, Quant::F32);
        tensors.push(Tensor {
            name,
            dims,
            ty,
            data,
            want,
        });
    };
    add(
        "token_embd.weight".into(),
        vec![d, v],
        w.tok_embed.to_f32().into_owned(),
    );
    add(
        "position_embd.weight".into(),
        vec![d, c.context as u64],
        w.pos_embed.clone().unwrap(),
    );
    let cat =
        |parts: &[&model::Matrix]| parts.iter().flat_map(|p| p.to_f32().into_owned()).collect();
    for (l, lw) in w.layers.iter().enumerate() {
        let p = format!("blk.{l}.");
        for (name, norm) in [("attn_norm", &lw.attn_norm), ("ffn_norm", &lw.mlp_norm)] {
            add(format!("{p}{name}.weight"), vec![d], norm.w.clone());
            add(format!("{p}{name}.bias"), vec![d], norm.b.clone().unwrap());
        }
        let (q, k, vv) = (&lw.wq, &lw.wk, &lw.wv);
        add(
            format!("{p}attn_qkv.weight"),
            vec![d, 3 * d],
            cat(&[&q.w, &k.w, &vv.w]),
        );
        let b = |l: &model::Linear| l.b.clone().unwrap();
        add(
            format!("{p}attn_qkv.bias"),
            vec![3 * d],
            [b(q), b(k), b(vv)].concat(),
        );
        let Mlp::Plain { up, down } = &lw.mlp else {
            panic!("gpt2 has a plain MLP")
        };
        for (name, lin, dims) in [
            ("attn_output", &lw.wo, vec![d, d]),
            ("ffn_up", up, vec![d, ff]),
            ("ffn_down", down, vec![ff, d]),
        ] {
            add(
                format!("{p}{name}.weight"),
                dims,
                lin.w.to_f32().into_owned(),
            );
            add(format!("{p}{name}.bias"), vec![lin.out_dim as u64], b(lin));
        }
    }
    let fin = w.final_norm.clone().unwrap();
    add("output_norm.weight".into(), vec![d], fin.w);
    add("output_norm.bias".into(), vec![d], fin.b.unwrap());
    let g = Gguf {
        version: 3,
        alignment: 32,
        meta,
        tensors,
    };
    let path = dir.path().join("gpt2.gguf");
    g.write(&path);
    let from_gguf = model::load(path.to_str().unwrap()).unwrap();
    assert_eq!(from_gguf.config.arch, Arch::Gpt2);
    assert_eq!(from_gguf.config.pos, PosKind::Learned);
    assert_eq!(from_gguf.config.act, Act::GeluTanh);
    assert!(from_gguf.config.tied_embeddings);
    assert!(
        from_gguf.weights == from_hf.weights,
        "the GGUF's weights differ"
    );
    let ids = [5u32, 17, 3, 40, 22, 9];
    let opts = model::ForwardOptions::default();
    let a = model::forward(&from_hf.config, &from_hf.weights, &ids, &opts).unwrap();
    let b = model::forward(&from_gguf.config, &from_gguf.weights, &ids, &opts).unwrap();
    assert_eq!(a.logits, b.logits);
    assert_eq!(a.attention, b.attention);
}
