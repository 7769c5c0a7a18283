//! Shared by the model tests: random tiny models of each architecture, the llama.cpp
//! permutation of Q/K rows, and an independent f64 forward pass written with plain loops
//! (its own norms, RoPE in both layouts, erf by its own series, naive softmax).
#![allow(dead_code)]

use attnviz::model::{
    Act, Arch, LayerWeights, Linear, Mlp, ModelConfig, Norm, NormKind, NormPlace, PosKind,
    RopeStyle, Weights,
};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

pub struct Gen(ChaCha8Rng);

impl Gen {
    pub fn new(seed: u64) -> Self {
        Gen(ChaCha8Rng::seed_from_u64(seed))
    }
    pub fn vec(&mut self, n: usize, a: f32) -> Vec<f32> {
        (0..n).map(|_| self.0.random_range(-a..a)).collect()
    }
    fn linear(&mut self, out: usize, inp: usize, bias: bool) -> Linear {
        let a = 1.7 / (inp as f32).sqrt();
        Linear {
            w: self.vec(out * inp, a).into(),
            b: bias.then(|| self.vec(out, 0.2)),
            out_dim: out,
            in_dim: inp,
        }
    }
    fn norm(&mut self, d: usize, bias: bool) -> Norm {
        Norm {
            w: self.vec(d, 0.3).into_iter().map(|v| 1.0 + v).collect(),
            b: bias.then(|| self.vec(d, 0.1)),
        }
    }
    pub fn ids(&mut self, n: usize, vocab: usize) -> Vec<u32> {
        (0..n)
            .map(|_| self.0.random_range(0..vocab as u32))
            .collect()
    }
}

/// Llama-style: RMSNorm, RoPE (Half layout, HF order), SwiGLU, GQA 4 heads over 2 KV heads,
/// d_model 20, d_head 6 (H d_head = 24 != d_model), untied LM head.
pub fn llama(seed: u64) -> (ModelConfig, Weights) {
    let cfg = ModelConfig {
        arch: Arch::Llama,
        layers: 2,
        heads: 4,
        kv_heads: 2,
        d_model: 20,
        d_head: 6,
        d_ff: 34,
        vocab: 37,
        context: 64,
        norm: NormKind::Rms,
        norm_place: NormPlace::Pre,
        norm_eps: 1e-5,
        act: Act::Silu,
        pos: PosKind::Rope {
            base: 100.0,
            style: RopeStyle::Half,
        },
        causal: true,
        tied_embeddings: false,
        details: Default::default(),
    };
    let mut g = Gen::new(seed);
    let (d, dh) = (cfg.d_model, cfg.d_head);
    let layers = (0..cfg.layers)
        .map(|_| LayerWeights {
            attn_norm: g.norm(d, false),
            wq: g.linear(cfg.heads * dh, d, false),
            wk: g.linear(cfg.kv_heads * dh, d, false),
            wv: g.linear(cfg.kv_heads * dh, d, false),
            wo: g.linear(d, cfg.heads * dh, false),
            mlp_norm: g.norm(d, false),
            mlp: Mlp::Gated {
                gate: g.linear(cfg.d_ff, d, false),
                up: g.linear(cfg.d_ff, d, false),
                down: g.linear(d, cfg.d_ff, false),
            },
            extra: Default::default(),
        })
        .collect();
    let w = Weights {
        tok_embed: g.vec(cfg.vocab * d, 1.0).into(),
        pos_embed: None,
        type_embed: None,
        embed_norm: None,
        layers,
        final_norm: Some(g.norm(d, false)),
        lm_head: Some(g.linear(cfg.vocab, d, false)),
    };
    (cfg, w)
}

/// The same model with Q and K rows permuted as llama.cpp's converter does (HF row
/// i + j * d_head/2 of a head becomes row 2i + j), so that RoPE pairs are interleaved.
pub fn to_interleaved(cfg: &ModelConfig, w: &Weights) -> (ModelConfig, Weights) {
    let mut cfg2 = cfg.clone();
    let PosKind::Rope { base, .. } = cfg.pos else {
        panic!("not a RoPE model")
    };
    cfg2.pos = PosKind::Rope {
        base,
        style: RopeStyle::Interleaved,
    };
    let dh = cfg.d_head;
    let half = dh / 2;
    let permute = |lin: &Linear, heads: usize| -> Linear {
        let mut out = lin.clone();
        let src_w = lin.w.to_f32();
        let out_w = out.w.as_f32_mut().expect("f32 test weights");
        for h in 0..heads {
            for j in 0..2 {
                for i in 0..half {
                    let src = h * dh + j * half + i;
                    let dst = h * dh + 2 * i + j;
                    out_w[dst * lin.in_dim..][..lin.in_dim]
                        .copy_from_slice(&src_w[src * lin.in_dim..][..lin.in_dim]);
                    if let (Some(b), Some(bo)) = (&lin.b, out.b.as_mut()) {
                        bo[dst] = b[src];
                    }
                }
            }
        }
        out
    };
    let mut w2 = w.clone();
    for lw in &mut w2.layers {
        lw.wq = permute(&lw.wq, cfg.heads);
        lw.wk = permute(&lw.wk, cfg.kv_heads);
    }
    (cfg2, w2)
}

/// BERT-style: learned positions, type embedding, embedding LayerNorm, post-LayerNorm,
/// exact GELU, bidirectional, no LM head; d_model 20, 4 heads of 5.
pub fn bert(seed: u64) -> (ModelConfig, Weights) {
    let cfg = ModelConfig {
        arch: Arch::Bert,
        layers: 2,
        heads: 4,
        kv_heads: 4,
        d_model: 20,
        d_head: 5,
        d_ff: 36,
        vocab: 41,
        context: 16,
        norm: NormKind::Layer,
        norm_place: NormPlace::Post,
        norm_eps: 1e-12,
        act: Act::Gelu,
        pos: PosKind::Learned,
        causal: false,
        tied_embeddings: false,
        details: Default::default(),
    };
    let mut g = Gen::new(seed);
    let d = cfg.d_model;
    let layers = (0..cfg.layers)
        .map(|_| LayerWeights {
            attn_norm: g.norm(d, true),
            wq: g.linear(d, d, true),
            wk: g.linear(d, d, true),
            wv: g.linear(d, d, true),
            wo: g.linear(d, d, true),
            mlp_norm: g.norm(d, true),
            mlp: Mlp::Plain {
                up: g.linear(cfg.d_ff, d, true),
                down: g.linear(d, cfg.d_ff, true),
            },
            extra: Default::default(),
        })
        .collect();
    let w = Weights {
        tok_embed: g.vec(cfg.vocab * d, 1.0).into(),
        pos_embed: Some(g.vec(cfg.context * d, 0.5)),
        type_embed: Some(g.vec(d, 0.3)),
        embed_norm: Some(g.norm(d, true)),
        layers,
        final_norm: None,
        lm_head: None,
    };
    (cfg, w)
}

/// GPT-2-style: learned positions, pre-LayerNorm, GELU tanh, causal, tied LM head,
/// d_model 20, 4 heads of 5.
pub fn gpt2(seed: u64) -> (ModelConfig, Weights) {
    let (mut cfg, mut w) = bert(seed);
    cfg.arch = Arch::Gpt2;
    cfg.norm_place = NormPlace::Pre;
    cfg.norm_eps = 1e-5;
    cfg.act = Act::GeluTanh;
    cfg.causal = true;
    cfg.tied_embeddings = true;
    let mut g = Gen::new(seed ^ 0xABCD);
    w.type_embed = None;
    w.embed_norm = None;
    w.final_norm = Some(g.norm(cfg.d_model, true));
    (cfg, w)
}

/// Which keys a query sees, in the reference.
#[derive(Clone, Copy, Debug)]
pub enum RefMask {
    None,
    Causal,
    Window(usize),
    /// The window plus the first `.1` tokens.
    WindowSinks(usize, usize),
}

impl RefMask {
    fn sees(self, i: usize, j: usize) -> bool {
        match self {
            RefMask::None => true,
            RefMask::Causal => j <= i,
            RefMask::Window(w) => j <= i && i - j < w,
            RefMask::WindowSinks(w, s) => j <= i && (i - j < w || j < s),
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct RefOpts {
    pub ablate: Vec<(usize, usize)>,
    pub mask: Option<RefMask>,
    pub rope_base: Option<f64>,
    pub no_pe: bool,
}

pub struct RefOut {
    pub logits: Option<Vec<f64>>,
    pub hidden: Vec<f64>,
    /// per layer [heads][n][n]
    pub attention: Vec<Vec<f64>>,
    /// per layer, the block output [n][d]
    pub block_out: Vec<Vec<f64>>,
}

/// erf by its everywhere-convergent series of positive terms,
/// erf x = 2/sqrt(pi) e^(-x^2) sum_n 2^n x^(2n+1) / (1 3 5 .. (2n+1)).
pub fn erf_series(x: f64) -> f64 {
    if x.abs() > 6.0 {
        return x.signum();
    }
    let (mut term, mut sum) = (x, x);
    let mut n = 0.0;
    while term.abs() > 1e-18 * sum.abs() {
        n += 1.0;
        term *= 2.0 * x * x / (2.0 * n + 1.0);
        sum += term;
    }
    2.0 / std::f64::consts::PI.sqrt() * (-x * x).exp() * sum
}

fn act(a: Act, x: f64) -> f64 {
    match a {
        Act::Gelu => x * 0.5 * (1.0 + erf_series(x / 2f64.sqrt())),
        Act::GeluTanh => {
            let u = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x.powi(3));
            0.5 * x * (1.0 + u.tanh())
        }
        Act::Silu => x / (1.0 + (-x).exp()),
    }
}

fn norm(kind: NormKind, x: &[f64], n: &Norm, eps: f64) -> Vec<f64> {
    let d = x.len() as f64;
    let b = |j: usize| n.b.as_ref().map_or(0.0, |b| b[j] as f64);
    match kind {
        NormKind::Layer => {
            let mean = x.iter().sum::<f64>() / d;
            let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / d;
            x.iter()
                .enumerate()
                .map(|(j, v)| (v - mean) / (var + eps).sqrt() * n.w[j] as f64 + b(j))
                .collect()
        }
        NormKind::Rms => {
            let rms = (x.iter().map(|v| v * v).sum::<f64>() / d + eps).sqrt();
            x.iter()
                .enumerate()
                .map(|(j, v)| v / rms * n.w[j] as f64 + b(j))
                .collect()
        }
    }
}

fn lin(l: &Linear, x: &[f64]) -> Vec<f64> {
    let w = l.w.to_f32();
    (0..l.out_dim)
        .map(|o| {
            let mut acc = l.b.as_ref().map_or(0.0, |b| b[o] as f64);
            for (c, xc) in x.iter().enumerate() {
                acc += w[o * l.in_dim + c] as f64 * xc;
            }
            acc
        })
        .collect()
}

/// Rotate one head vector at `pos`; pairs by `style`; angle pos / base^(2i/d).
fn rope(v: &mut [f64], pos: usize, base: f64, style: RopeStyle) {
    let d = v.len();
    for i in 0..d / 2 {
        let theta = pos as f64 / base.powf((2 * i) as f64 / d as f64);
        let (a, b) = match style {
            RopeStyle::Interleaved => (2 * i, 2 * i + 1),
            RopeStyle::Half => (i, i + d / 2),
        };
        // (v_a + i v_b) e^(i theta)
        let (re, im) = (v[a], v[b]);
        v[a] = re * theta.cos() - im * theta.sin();
        v[b] = re * theta.sin() + im * theta.cos();
    }
}

pub fn reference(cfg: &ModelConfig, w: &Weights, ids: &[u32], o: &RefOpts) -> RefOut {
    let (n, d, dh) = (ids.len(), cfg.d_model, cfg.d_head);
    let f = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<f64>>();
    let emb = w.tok_embed.to_f32();
    let mut x: Vec<Vec<f64>> = ids
        .iter()
        .enumerate()
        .map(|(i, &id)| {
            let mut r = f(&emb[id as usize * d..][..d]);
            if let (Some(pe), false) = (&w.pos_embed, o.no_pe) {
                r.iter_mut()
                    .zip(&pe[i * d..][..d])
                    .for_each(|(a, b)| *a += *b as f64);
            }
            if let Some(te) = &w.type_embed {
                r.iter_mut().zip(te).for_each(|(a, b)| *a += *b as f64);
            }
            match &w.embed_norm {
                Some(nm) => norm(cfg.norm, &r, nm, cfg.norm_eps),
                None => r,
            }
        })
        .collect();
    let mask = o.mask.unwrap_or(if cfg.causal {
        RefMask::Causal
    } else {
        RefMask::None
    });
    let rope_cfg = match cfg.pos {
        PosKind::Rope { base, style } if !o.no_pe => Some((o.rope_base.unwrap_or(base), style)),
        _ => None,
    };
    let post = cfg.norm_place == NormPlace::Post;
    let mut attention = Vec::new();
    let mut block_out = Vec::new();
    for (l, lw) in w.layers.iter().enumerate() {
        let inp: Vec<Vec<f64>> = x
            .iter()
            .map(|r| {
                if post {
                    r.clone()
                } else {
                    norm(cfg.norm, r, &lw.attn_norm, cfg.norm_eps)
                }
            })
            .collect();
        let head_vec = |m: &Linear, i: usize, h: usize| -> Vec<f64> {
            lin(m, &inp[i])[h * dh..][..dh].to_vec()
        };
        let mut a_l = vec![0.0; cfg.heads * n * n];
        let mut concat = vec![vec![0.0; cfg.heads * dh]; n];
        for h in 0..cfg.heads {
            let g = h / (cfg.heads / cfg.kv_heads);
            let mut q: Vec<Vec<f64>> = (0..n).map(|i| head_vec(&lw.wq, i, h)).collect();
            let mut k: Vec<Vec<f64>> = (0..n).map(|i| head_vec(&lw.wk, i, g)).collect();
            let v: Vec<Vec<f64>> = (0..n).map(|i| head_vec(&lw.wv, i, g)).collect();
            if let Some((base, style)) = rope_cfg {
                for i in 0..n {
                    rope(&mut q[i], i, base, style);
                    rope(&mut k[i], i, base, style);
                }
            }
            for i in 0..n {
                let s: Vec<Option<f64>> = (0..n)
                    .map(|j| {
                        mask.sees(i, j).then(|| {
                            q[i].iter().zip(&k[j]).map(|(a, b)| a * b).sum::<f64>()
                                / (dh as f64).sqrt()
                        })
                    })
                    .collect();
                let max = s.iter().flatten().fold(f64::NEG_INFINITY, |m, &v| m.max(v));
                let e: Vec<f64> = s
                    .iter()
                    .map(|v| v.map_or(0.0, |v| (v - max).exp()))
                    .collect();
                let z: f64 = e.iter().sum();
                for j in 0..n {
                    let p = e[j] / z;
                    a_l[(h * n + i) * n + j] = p;
                    if !o.ablate.contains(&(l, h)) {
                        for c in 0..dh {
                            concat[i][h * dh + c] += p * v[j][c];
                        }
                    }
                }
            }
        }
        attention.push(a_l);
        for i in 0..n {
            let a = lin(&lw.wo, &concat[i]);
            x[i].iter_mut().zip(&a).for_each(|(r, v)| *r += v);
            if post {
                x[i] = norm(cfg.norm, &x[i], &lw.attn_norm, cfg.norm_eps);
            }
            let m_in = if post {
                x[i].clone()
            } else {
                norm(cfg.norm, &x[i], &lw.mlp_norm, cfg.norm_eps)
            };
            let hidden: Vec<f64> = match &lw.mlp {
                Mlp::Gated { gate, up, .. } => {
                    let (gt, u) = (lin(gate, &m_in), lin(up, &m_in));
                    gt.iter()
                        .zip(&u)
                        .map(|(g, u)| act(cfg.act, *g) * u)
                        .collect()
                }
                Mlp::Plain { up, .. } => lin(up, &m_in)
                    .into_iter()
                    .map(|u| act(cfg.act, u))
                    .collect(),
            };
            let down = match &lw.mlp {
                Mlp::Gated { down, .. } | Mlp::Plain { down, .. } => down,
            };
            let m = lin(down, &hidden);
            x[i].iter_mut().zip(&m).for_each(|(r, v)| *r += v);
            if post {
                x[i] = norm(cfg.norm, &x[i], &lw.mlp_norm, cfg.norm_eps);
            }
        }
        block_out.push(x.concat());
    }
    let hidden: Vec<Vec<f64>> = match &w.final_norm {
        Some(nm) => x
            .iter()
            .map(|r| norm(cfg.norm, r, nm, cfg.norm_eps))
            .collect(),
        None => x,
    };
    let head = if cfg.tied_embeddings {
        Some(Linear {
            w: w.tok_embed.clone(),
            b: None,
            out_dim: cfg.vocab,
            in_dim: d,
        })
    } else {
        w.lm_head.clone()
    };
    let logits = head.map(|hd| hidden.iter().flat_map(|r| lin(&hd, r)).collect());
    RefOut {
        logits,
        hidden: hidden.concat(),
        attention,
        block_out,
    }
}

/// Assert |got - want| <= tol (1 + |want|) everywhere, naming the first bad index.
pub fn assert_close(what: &str, got: &[f32], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            g.is_finite() && (g as f64 - w).abs() <= tol * (1.0 + w.abs()),
            "{what}[{i}]: {g} vs reference {w}"
        );
    }
}

/// Logits apart below which two tokens are a near tie for [`assert_greedy_matches`]: the
/// int8 activations of `generate`'s products move a logit by about 0.1 on the real models.
pub const NEAR_TIE: f32 = 0.25;

/// `generate`'s greedy tokens after `prompt` against transformers' (`want`). On the exact
/// path (every product on the dequantized tiles) they must be the same tokens. On the
/// default path (int8 activations, as llama.cpp's) a step may take the other of two
/// near-tied tokens: allowed only where the exact forward's logits of the two are within
/// [`NEAR_TIE`]; the tokens after it continue another text and are not compared.
pub fn assert_greedy_matches(
    cfg: &ModelConfig,
    w: &Weights,
    prompt: &[u32],
    want: &[u32],
    name: &str,
) {
    use attnviz::model::forward::{ForwardOptions, forward};
    use attnviz::model::generate::{GenerateOptions, generate};
    use attnviz::model::qmatmul;
    let opts = GenerateOptions {
        max_tokens: want.len(),
        forward: ForwardOptions {
            keep_attention: false,
            ..ForwardOptions::default()
        },
        ..GenerateOptions::default()
    };
    let exact = qmatmul::exact(|| generate(cfg, w, prompt, &opts, |_| true))
        .unwrap()
        .tokens();
    assert_eq!(exact, want, "{name}: greedy tokens on the exact path");
    let got = generate(cfg, w, prompt, &opts, |_| true).unwrap().tokens();
    let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) else {
        assert_eq!(got.len(), want.len(), "{name}: greedy tokens");
        return;
    };
    let mut ids = prompt.to_vec();
    ids.extend_from_slice(&want[..i]);
    let out = forward(cfg, w, &ids, &opts.forward).unwrap();
    let logits = out.logits.unwrap();
    let last = &logits[(ids.len() - 1) * cfg.vocab..][..cfg.vocab];
    let (a, b) = (last[got[i] as usize], last[want[i] as usize]);
    assert!(
        (a - b).abs() <= NEAR_TIE,
        "{name}: greedy token {i} is {} where transformers take {} ({a} against {b} on the exact path, more than {NEAR_TIE} apart)",
        got[i],
        want[i]
    );
    eprintln!(
        "{name}: greedy token {i} took the near tie {} over {} ({a:.3} against {b:.3} on the exact path)",
        got[i], want[i]
    );
}
