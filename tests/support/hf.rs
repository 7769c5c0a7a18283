//! Tiny Hugging Face folders (config.json, model.safetensors via safetensors' own
//! serializer, tokenizer.json) for bert, gpt2 and llama, with the tensors kept for
//! comparison.

use std::collections::BTreeMap;
use std::path::Path;

use half::{bf16, f16};
use safetensors::tensor::{Dtype, TensorView};
use serde_json::{Value, json};

use super::random;
use super::vocab;

/// One tensor as written: shape (PyTorch order) and its f32 values (after rounding to
/// the stored dtype).
#[derive(Debug, Clone)]
pub struct T {
    pub shape: Vec<usize>,
    pub values: Vec<f32>,
}

/// Tensors by name, and the dtype to store them in.
pub struct Folder {
    pub config: Value,
    pub tensors: BTreeMap<String, T>,
    pub dtype: Dtype,
    pub tokenizer: Value,
}

impl Folder {
    fn add(&mut self, seed: &mut u64, name: &str, shape: &[usize]) {
        *seed += 1;
        let n = shape.iter().product();
        let mut values = random(*seed, n);
        // Keep exactly what the stored dtype can hold.
        match self.dtype {
            Dtype::F16 => values
                .iter_mut()
                .for_each(|v| *v = f16::from_f32(*v).to_f32()),
            Dtype::BF16 => values
                .iter_mut()
                .for_each(|v| *v = bf16::from_f32(*v).to_f32()),
            _ => {}
        }
        self.tensors.insert(
            name.to_string(),
            T {
                shape: shape.to_vec(),
                values,
            },
        );
    }

    pub fn get(&self, name: &str) -> &T {
        self.tensors.get(name).expect(name)
    }

    fn bytes_of(&self, t: &T) -> Vec<u8> {
        match self.dtype {
            Dtype::F16 => t
                .values
                .iter()
                .flat_map(|v| f16::from_f32(*v).to_le_bytes())
                .collect(),
            Dtype::BF16 => t
                .values
                .iter()
                .flat_map(|v| bf16::from_f32(*v).to_le_bytes())
                .collect(),
            _ => t.values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        }
    }

    /// The safetensors bytes of the given tensors.
    pub fn safetensors(&self, names: &[&String]) -> Vec<u8> {
        let data: Vec<(String, Vec<u8>, Vec<usize>)> = names
            .iter()
            .map(|n| {
                let t = &self.tensors[*n];
                ((*n).clone(), self.bytes_of(t), t.shape.clone())
            })
            .collect();
        let views: Vec<(String, TensorView)> = data
            .iter()
            .map(|(n, b, s)| {
                (
                    n.clone(),
                    TensorView::new(self.dtype, s.clone(), b).unwrap(),
                )
            })
            .collect();
        safetensors::serialize(views, None).unwrap()
    }

    /// Write the folder; with `shards` > 1, as model-0000i-of-0000n.safetensors plus the
    /// index.
    pub fn write(&self, dir: &Path, shards: usize) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("config.json"), self.config.to_string()).unwrap();
        std::fs::write(dir.join("tokenizer.json"), self.tokenizer.to_string()).unwrap();
        let names: Vec<&String> = self.tensors.keys().collect();
        if shards <= 1 {
            std::fs::write(dir.join("model.safetensors"), self.safetensors(&names)).unwrap();
            return;
        }
        let per = names.len().div_ceil(shards);
        let mut map = serde_json::Map::new();
        for (i, chunk) in names.chunks(per).enumerate() {
            let f = format!("model-{:05}-of-{:05}.safetensors", i + 1, shards);
            std::fs::write(dir.join(&f), self.safetensors(chunk)).unwrap();
            for n in chunk {
                map.insert((*n).clone(), json!(f));
            }
        }
        std::fs::write(
            dir.join("model.safetensors.index.json"),
            json!({"metadata": {}, "weight_map": map}).to_string(),
        )
        .unwrap();
    }
}

pub const D: usize = 16;
pub const LAYERS: usize = 2;
pub const CTX: usize = 32;

/// A tiny BERT (with the `bert.` prefix when `prefixed`).
pub fn bert(prefixed: bool) -> Folder {
    let tokens = vocab::wordpiece_tokens();
    let (v, ff) = (tokens.len(), 2 * D);
    let mut f = Folder {
        config: json!({"model_type": "bert", "hidden_size": D, "num_hidden_layers": LAYERS,
            "num_attention_heads": 4, "intermediate_size": ff, "vocab_size": v,
            "max_position_embeddings": CTX, "layer_norm_eps": 1e-12, "hidden_act": "gelu",
            "type_vocab_size": 2, "position_embedding_type": "absolute"}),
        tensors: BTreeMap::new(),
        dtype: Dtype::F32,
        tokenizer: vocab::wordpiece_tokenizer_json(),
    };
    let p = if prefixed { "bert." } else { "" };
    let mut seed = 200;
    let e = format!("{p}embeddings");
    f.add(&mut seed, &format!("{e}.word_embeddings.weight"), &[v, D]);
    f.add(
        &mut seed,
        &format!("{e}.position_embeddings.weight"),
        &[CTX, D],
    );
    f.add(
        &mut seed,
        &format!("{e}.token_type_embeddings.weight"),
        &[2, D],
    );
    f.add(&mut seed, &format!("{e}.LayerNorm.weight"), &[D]);
    f.add(&mut seed, &format!("{e}.LayerNorm.bias"), &[D]);
    for l in 0..LAYERS {
        let q = format!("{p}encoder.layer.{l}");
        for (n, o, i) in [
            ("attention.self.query", D, D),
            ("attention.self.key", D, D),
            ("attention.self.value", D, D),
            ("attention.output.dense", D, D),
            ("intermediate.dense", ff, D),
            ("output.dense", D, ff),
        ] {
            f.add(&mut seed, &format!("{q}.{n}.weight"), &[o, i]);
            f.add(&mut seed, &format!("{q}.{n}.bias"), &[o]);
        }
        for n in ["attention.output.LayerNorm", "output.LayerNorm"] {
            f.add(&mut seed, &format!("{q}.{n}.weight"), &[D]);
            f.add(&mut seed, &format!("{q}.{n}.bias"), &[D]);
        }
    }
    f
}

/// A tiny GPT-2 (Conv1D weights [in, out], fused c_attn) in F16.
pub fn gpt2() -> Folder {
    let v = vocab::bpe_tokens().len();
    let ff = 4 * D;
    let mut f = Folder {
        config: json!({"model_type": "gpt2", "n_embd": D, "n_layer": LAYERS, "n_head": 4,
            "n_positions": CTX, "vocab_size": v, "layer_norm_epsilon": 1e-5,
            "activation_function": "gelu_new"}),
        tensors: BTreeMap::new(),
        dtype: Dtype::F16,
        tokenizer: vocab::bpe_tokenizer_json(),
    };
    let mut seed = 300;
    f.add(&mut seed, "wte.weight", &[v, D]);
    f.add(&mut seed, "wpe.weight", &[CTX, D]);
    for l in 0..LAYERS {
        let q = format!("h.{l}");
        for n in ["ln_1", "ln_2"] {
            f.add(&mut seed, &format!("{q}.{n}.weight"), &[D]);
            f.add(&mut seed, &format!("{q}.{n}.bias"), &[D]);
        }
        for (n, i, o) in [
            ("attn.c_attn", D, 3 * D),
            ("attn.c_proj", D, D),
            ("mlp.c_fc", D, ff),
            ("mlp.c_proj", ff, D),
        ] {
            f.add(&mut seed, &format!("{q}.{n}.weight"), &[i, o]);
            f.add(&mut seed, &format!("{q}.{n}.bias"), &[o]);
        }
    }
    f.add(&mut seed, "ln_f.weight", &[D]);
    f.add(&mut seed, "ln_f.bias", &[D]);
    f
}

/// A tiny llama (GQA 4 heads / 2 KV heads) in BF16, untied.
pub fn llama() -> Folder {
    let v = vocab::bpe_tokens().len();
    let (heads, kv, dh, ff) = (4, 2, D / 4, 2 * D);
    let mut f = Folder {
        config: json!({"model_type": "llama", "hidden_size": D, "num_hidden_layers": LAYERS,
            "num_attention_heads": heads, "num_key_value_heads": kv, "intermediate_size": ff,
            "vocab_size": v, "max_position_embeddings": CTX, "rms_norm_eps": 1e-6,
            "hidden_act": "silu", "rope_theta": 500000.0, "tie_word_embeddings": false}),
        tensors: BTreeMap::new(),
        dtype: Dtype::BF16,
        tokenizer: vocab::bpe_tokenizer_json(),
    };
    let mut seed = 400;
    f.add(&mut seed, "model.embed_tokens.weight", &[v, D]);
    for l in 0..LAYERS {
        let q = format!("model.layers.{l}");
        f.add(&mut seed, &format!("{q}.input_layernorm.weight"), &[D]);
        f.add(
            &mut seed,
            &format!("{q}.post_attention_layernorm.weight"),
            &[D],
        );
        for (n, o, i) in [
            ("self_attn.q_proj", heads * dh, D),
            ("self_attn.k_proj", kv * dh, D),
            ("self_attn.v_proj", kv * dh, D),
            ("self_attn.o_proj", D, heads * dh),
            ("mlp.gate_proj", ff, D),
            ("mlp.up_proj", ff, D),
            ("mlp.down_proj", D, ff),
        ] {
            f.add(&mut seed, &format!("{q}.{n}.weight"), &[o, i]);
        }
    }
    f.add(&mut seed, "model.norm.weight", &[D]);
    f.add(&mut seed, "lm_head.weight", &[v, D]);
    f
}
