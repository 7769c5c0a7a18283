//! A small GGUF v3 writer and a tiny random llama model.
//!
//! Quantized tensors are written by a simple quantizer here (Q8_0: d = max|x| / 127;
//! Q4_1: d = (max - min) / 15, m = min); the expected f32 of each element is computed
//! from the block fields it chose (d * q or d * q + m), independently of attnviz's
//! dequantizer.

use std::path::Path;

use half::f16;

use super::random;
use super::vocab;

/// A metadata value.
#[derive(Debug, Clone)]
pub enum Meta {
    U32(u32),
    I32(i32),
    U64(u64),
    F32(f32),
    Bool(bool),
    Str(String),
    Strs(Vec<String>),
    I32s(Vec<i32>),
    F32s(Vec<f32>),
    /// Any value with an explicit type id and raw bytes (for bad-file tests).
    Raw(u32, Vec<u8>),
}

pub fn s(v: &str) -> Meta {
    Meta::Str(v.to_string())
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend((s.len() as u64).to_le_bytes());
    out.extend(s.as_bytes());
}

impl Meta {
    fn write(&self, out: &mut Vec<u8>) {
        match self {
            Meta::U32(v) => {
                out.extend(4u32.to_le_bytes());
                out.extend(v.to_le_bytes());
            }
            Meta::I32(v) => {
                out.extend(5u32.to_le_bytes());
                out.extend(v.to_le_bytes());
            }
            Meta::U64(v) => {
                out.extend(10u32.to_le_bytes());
                out.extend(v.to_le_bytes());
            }
            Meta::F32(v) => {
                out.extend(6u32.to_le_bytes());
                out.extend(v.to_le_bytes());
            }
            Meta::Bool(v) => {
                out.extend(7u32.to_le_bytes());
                out.push(*v as u8);
            }
            Meta::Str(v) => {
                out.extend(8u32.to_le_bytes());
                put_str(out, v);
            }
            Meta::Strs(v) => {
                out.extend(9u32.to_le_bytes());
                out.extend(8u32.to_le_bytes());
                out.extend((v.len() as u64).to_le_bytes());
                for x in v {
                    put_str(out, x);
                }
            }
            Meta::I32s(v) => {
                out.extend(9u32.to_le_bytes());
                out.extend(5u32.to_le_bytes());
                out.extend((v.len() as u64).to_le_bytes());
                for x in v {
                    out.extend(x.to_le_bytes());
                }
            }
            Meta::F32s(v) => {
                out.extend(9u32.to_le_bytes());
                out.extend(6u32.to_le_bytes());
                out.extend((v.len() as u64).to_le_bytes());
                for x in v {
                    out.extend(x.to_le_bytes());
                }
            }
            Meta::Raw(t, b) => {
                out.extend(t.to_le_bytes());
                out.extend(b);
            }
        }
    }
}

/// One tensor: GGML dims (ne[0] first), type id, raw data, and the f32 values a correct
/// reader must produce.
#[derive(Debug, Clone)]
pub struct Tensor {
    pub name: String,
    pub dims: Vec<u64>,
    pub ty: u32,
    pub data: Vec<u8>,
    pub want: Vec<f32>,
}

/// Tensor element types the writer can produce.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Quant {
    F32,
    Q8_0,
    Q4_1,
}

/// Encode `x` (length a multiple of the block size for quantized types).
pub fn encode(x: &[f32], q: Quant) -> (u32, Vec<u8>, Vec<f32>) {
    match q {
        Quant::F32 => (
            0,
            x.iter().flat_map(|v| v.to_le_bytes()).collect(),
            x.to_vec(),
        ),
        Quant::Q8_0 => {
            let (mut data, mut want) = (vec![], vec![]);
            for b in x.chunks(32) {
                let amax = b.iter().fold(0f32, |a, v| a.max(v.abs()));
                let d = f16::from_f32(amax / 127.0);
                let df = d.to_f32();
                data.extend(d.to_le_bytes());
                for &v in b {
                    let q = if df == 0.0 {
                        0
                    } else {
                        (v / df).round().clamp(-128.0, 127.0) as i8
                    };
                    data.push(q as u8);
                    want.push(df * q as f32);
                }
            }
            (8, data, want)
        }
        Quant::Q4_1 => {
            let (mut data, mut want) = (vec![], vec![]);
            for b in x.chunks(32) {
                let lo = b.iter().fold(f32::INFINITY, |a, &v| a.min(v));
                let hi = b.iter().fold(f32::NEG_INFINITY, |a, &v| a.max(v));
                let d = f16::from_f32((hi - lo) / 15.0);
                let m = f16::from_f32(lo);
                let (df, mf) = (d.to_f32(), m.to_f32());
                data.extend(d.to_le_bytes());
                data.extend(m.to_le_bytes());
                let q: Vec<u8> = b
                    .iter()
                    .map(|&v| {
                        if df == 0.0 {
                            0
                        } else {
                            ((v - mf) / df).round().clamp(0.0, 15.0) as u8
                        }
                    })
                    .collect();
                for j in 0..16 {
                    data.push(q[j] | (q[j + 16] << 4));
                }
                want.extend(q.iter().map(|&q| df * q as f32 + mf));
            }
            (3, data, want)
        }
    }
}

/// A whole GGUF file.
#[derive(Debug, Clone)]
pub struct Gguf {
    pub version: u32,
    pub alignment: u64,
    pub meta: Vec<(String, Meta)>,
    pub tensors: Vec<Tensor>,
}

impl Gguf {
    pub fn set(&mut self, key: &str, v: Meta) {
        match self.meta.iter_mut().find(|(k, _)| k == key) {
            Some(e) => e.1 = v,
            None => self.meta.push((key.to_string(), v)),
        }
    }

    pub fn remove(&mut self, key: &str) {
        self.meta.retain(|(k, _)| k != key);
    }

    pub fn tensor(&self, name: &str) -> &Tensor {
        self.tensors.iter().find(|t| t.name == name).expect(name)
    }

    pub fn tensor_mut(&mut self, name: &str) -> &mut Tensor {
        self.tensors
            .iter_mut()
            .find(|t| t.name == name)
            .expect(name)
    }

    pub fn bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend(b"GGUF");
        out.extend(self.version.to_le_bytes());
        out.extend((self.tensors.len() as u64).to_le_bytes());
        out.extend((self.meta.len() as u64).to_le_bytes());
        for (k, v) in &self.meta {
            put_str(&mut out, k);
            v.write(&mut out);
        }
        let align = self.alignment as usize;
        let mut off = 0usize;
        let mut offsets = Vec::new();
        for t in &self.tensors {
            offsets.push(off);
            off = (off + t.data.len()).div_ceil(align) * align;
        }
        for (t, &o) in self.tensors.iter().zip(&offsets) {
            put_str(&mut out, &t.name);
            out.extend((t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                out.extend(d.to_le_bytes());
            }
            out.extend(t.ty.to_le_bytes());
            out.extend((o as u64).to_le_bytes());
        }
        out.resize(out.len().div_ceil(align) * align, 0);
        let base = out.len();
        for (t, &o) in self.tensors.iter().zip(&offsets) {
            out.resize(base + o, 0);
            out.extend(&t.data);
        }
        out
    }

    pub fn write(&self, path: &Path) {
        std::fs::write(path, self.bytes()).expect("write gguf");
    }
}

/// Shape of the tiny llama.
#[derive(Debug, Clone, Copy)]
pub struct Tiny {
    pub layers: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub d_model: usize,
    pub d_ff: usize,
    pub context: usize,
    pub tied: bool,
}

impl Tiny {
    /// 2 layers, 4 heads, 2 KV heads, d_model 32 (a whole Q8_0/Q4_1 block per row).
    pub fn new() -> Self {
        Tiny {
            layers: 2,
            heads: 4,
            kv_heads: 2,
            d_model: 32,
            d_ff: 64,
            context: 64,
            tied: false,
        }
    }

    pub fn d_head(&self) -> usize {
        self.d_model / self.heads
    }
}

/// A tiny llama GGUF with the byte-level BPE vocabulary; 2-D weights in `q`, norms F32.
pub fn tiny_llama(t: Tiny, q: Quant) -> Gguf {
    let tokens = vocab::bpe_tokens();
    let vocab_n = tokens.len();
    let mut types = vec![1i32; vocab_n];
    for ty in types.iter_mut().take(vocab::SPECIALS.len()) {
        *ty = 3;
    }
    let meta = vec![
        ("general.architecture".into(), s("llama")),
        ("general.name".into(), s("tiny")),
        ("general.alignment".into(), Meta::U32(32)),
        ("llama.block_count".into(), Meta::U32(t.layers as u32)),
        ("llama.context_length".into(), Meta::U32(t.context as u32)),
        ("llama.embedding_length".into(), Meta::U32(t.d_model as u32)),
        ("llama.feed_forward_length".into(), Meta::U32(t.d_ff as u32)),
        (
            "llama.attention.head_count".into(),
            Meta::U32(t.heads as u32),
        ),
        (
            "llama.attention.head_count_kv".into(),
            Meta::U32(t.kv_heads as u32),
        ),
        ("llama.rope.freq_base".into(), Meta::F32(100000.0)),
        (
            "llama.attention.layer_norm_rms_epsilon".into(),
            Meta::F32(1e-5),
        ),
        (
            "llama.rope.dimension_count".into(),
            Meta::U32(t.d_head() as u32),
        ),
        ("tokenizer.ggml.model".into(), s("gpt2")),
        ("tokenizer.ggml.pre".into(), s("smollm")),
        ("tokenizer.ggml.tokens".into(), Meta::Strs(tokens)),
        ("tokenizer.ggml.token_type".into(), Meta::I32s(types)),
        (
            "tokenizer.ggml.merges".into(),
            Meta::Strs(vocab::bpe_merges()),
        ),
        ("tokenizer.ggml.bos_token_id".into(), Meta::U32(1)),
        ("tokenizer.ggml.eos_token_id".into(), Meta::U32(2)),
        ("tokenizer.ggml.add_bos_token".into(), Meta::Bool(false)),
    ];
    let mut seed = 100;
    let mut tensors = Vec::new();
    let mut add = |name: String, dims: Vec<u64>, q: Quant| {
        seed += 1;
        let n: u64 = dims.iter().product();
        let x = random(seed, n as usize);
        let (ty, data, want) = encode(&x, q);
        tensors.push(Tensor {
            name,
            dims,
            ty,
            data,
            want,
        });
    };
    let (d, f) = (t.d_model as u64, t.d_ff as u64);
    let qd = (t.heads * t.d_head()) as u64;
    let kvd = (t.kv_heads * t.d_head()) as u64;
    add("token_embd.weight".into(), vec![d, vocab_n as u64], q);
    for l in 0..t.layers {
        let p = format!("blk.{l}.");
        add(format!("{p}attn_norm.weight"), vec![d], Quant::F32);
        add(format!("{p}attn_q.weight"), vec![d, qd], q);
        add(format!("{p}attn_k.weight"), vec![d, kvd], q);
        add(format!("{p}attn_v.weight"), vec![d, kvd], q);
        add(format!("{p}attn_output.weight"), vec![qd, d], q);
        add(format!("{p}ffn_norm.weight"), vec![d], Quant::F32);
        add(format!("{p}ffn_gate.weight"), vec![d, f], q);
        add(format!("{p}ffn_up.weight"), vec![d, f], q);
        add(format!("{p}ffn_down.weight"), vec![f, d], q);
    }
    add("output_norm.weight".into(), vec![d], Quant::F32);
    if !t.tied {
        add("output.weight".into(), vec![d, vocab_n as u64], q);
    }
    Gguf {
        version: 3,
        alignment: 32,
        meta,
        tensors,
    }
}
