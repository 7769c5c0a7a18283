"""Tiny random models of eight architectures, as Hugging Face folders and GGUF files, with
transformers' attention, loss, top-5 and greedy tokens for one fixed input.

What it makes, under tests/data/models/arch/:
- <name>/ for llama3, mistral, qwen2, qwen3, gemma2, gemma3, phi3 and gpt_neox: config.json
  and model.safetensors (float16) as transformers' save_pretrained writes them, built with
  transformers' own config and model classes and random weights N(0, 0.2) (norm weights
  1 + N(0, 0.2), or N(0, 0.2) for Gemma whose norms add the 1 at run time), plus a
  tokenizer.json / tokenizer_config.json: one byte-level BPE of exactly VOCAB tokens trained
  here on a short text, shared by all eight.
- <name>.gguf: the same weights as llama.cpp's convert_hf_to_gguf.py writes that
  architecture (f16 matrices, f32 vectors and norms): its tensor names, its metadata keys
  and its tensor transforms (Llama's Q/K row permutation, Gemma's norm + 1, GPT-NeoX's
  Q/K/V regrouping, Llama 3's rope_freqs tensor, ...), with a gpt2 tokenizer
  (tokenizer.ggml.pre "gpt2"). Gemma norm weights are multiples of 1/1024 so that w + 1,
  which the converter computes in float16, is exact and the file holds the same numbers.
- expected.json: for each name, from the saved folder reloaded in float64 with eager
  attention: "ids" (12 token ids), "attention" [layer][head][query][key], "loss" (mean
  next-token cross-entropy, natural log), "top5" (next-token ids after the last position)
  and "greedy" (6 greedy ids after the 12). Where the GGUF cannot say what the folder says,
  because llama.cpp's converter writes no key for it and llama.cpp fixes it in code, the
  entry also has "gguf": the same values for what that file means to llama.cpp, and "why":
    mistral: no sliding window (the llama architecture has none),
    gemma2, gemma3: scores scaled by 1/sqrt(head_dim), not by query_pre_attn_scalar.

Every architecture feature the models are meant to exercise is checked to change the
attention or the loss well beyond the tests' tolerance (printed as "bites").

Run (from the repository root, with a venv holding CPU torch, transformers 5, safetensors,
numpy, gguf and tokenizers):
    /work/venv/py/bin/python tests/data/models/make_arch_models.py
The committed files were made with torch 2.15.0, transformers 5.25.0, tokenizers 0.23.3,
safetensors 0.8.0, gguf 0.19.0 and numpy 2.4.6. The output is deterministic for those
versions (fixed seeds, no threads-dependent reductions at these sizes).
"""

from __future__ import annotations

import json
import logging
import math
import shutil
from pathlib import Path

import gguf
import numpy as np
import torch
import transformers
from safetensors import safe_open
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoModelForCausalLM, GenerationConfig

HERE = Path(__file__).resolve().parent
OUT = HERE / "arch"
VOCAB = 300
SPECIAL = "<|endoftext|>"
# The input of every model: 12 ids below VOCAB, none the special token 0, one repeated.
IDS = [72, 245, 101, 33, 190, 72, 258, 14, 131, 287, 56, 245]
# 6 greedy tokens: the seventh of one model is its end token (id 0), which ends generation.
N_NEW = 6
STD = 0.2
# A feature "bites" when switching it off moves some attention weight by more than this.
BITE = 1e-2

TRAIN_TEXT = """\
The quick brown fox jumps over the lazy dog. A small model reads a short text and
learns which pairs of bytes come together most often: th, he, in, er, an, the, and.
Attention weights show which earlier tokens each token looks at; a sliding window lets
a token see only the last few tokens, and a global layer sees them all. Rotary position
embeddings turn queries and keys by angles that grow with the position. The tokenizer
merges the most frequent pair again and again until the vocabulary is full.
"""

COMMON = dict(
    vocab_size=VOCAB,
    max_position_embeddings=64,
    bos_token_id=0,
    eos_token_id=0,
    pad_token_id=None,
)
ROPE_DEFAULT = {"rope_type": "default", "rope_theta": 10000.0}

# name -> (config class, model class, config kwargs, GGUF architecture)
ARCHS = {
    "llama3": (
        "LlamaConfig",
        "LlamaForCausalLM",
        dict(
            hidden_size=64,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            rms_norm_eps=1e-5,
            # wavelengths 2 pi / freq at head_dim 16: 6.3, 32, 167, ...; with an original
            # context of 48 the first pair is kept (< 48/4), the second smoothed (between
            # 48/4 and 48/1), the other six slowed by the factor 8
            rope_parameters={
                "rope_type": "llama3",
                "rope_theta": 500000.0,
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 48,
            },
            tie_word_embeddings=False,
        ),
        "llama",
    ),
    "mistral": (
        "MistralConfig",
        "MistralForCausalLM",
        dict(
            hidden_size=64,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            rms_norm_eps=1e-5,
            sliding_window=4,
            rope_parameters=dict(ROPE_DEFAULT),
            tie_word_embeddings=False,
        ),
        "llama",
    ),
    "qwen2": (
        "Qwen2Config",
        "Qwen2ForCausalLM",
        dict(
            hidden_size=64,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            rms_norm_eps=1e-6,
            rope_parameters=dict(ROPE_DEFAULT),
            use_sliding_window=False,
            tie_word_embeddings=True,
        ),
        "qwen2",
    ),
    "qwen3": (
        "Qwen3Config",
        "Qwen3ForCausalLM",
        dict(
            hidden_size=48,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            rms_norm_eps=1e-6,
            rope_parameters=dict(ROPE_DEFAULT),
            use_sliding_window=False,
            tie_word_embeddings=False,
        ),
        "qwen3",
    ),
    "gemma2": (
        "Gemma2Config",
        "Gemma2ForCausalLM",
        dict(
            hidden_size=64,
            intermediate_size=64,
            num_hidden_layers=4,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            rms_norm_eps=1e-6,
            query_pre_attn_scalar=24,
            sliding_window=4,
            attn_logit_softcapping=5.0,
            final_logit_softcapping=3.0,
            rope_parameters=dict(ROPE_DEFAULT),
            tie_word_embeddings=True,
        ),
        "gemma2",
    ),
    "gemma3": (
        "Gemma3TextConfig",
        "Gemma3ForCausalLM",
        dict(
            hidden_size=64,
            intermediate_size=64,
            # llama.cpp fixes Gemma 3's pattern in code: layers 0-4 sliding, 5 global,
            # which is also transformers' default (sliding_window_pattern 6)
            num_hidden_layers=6,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            rms_norm_eps=1e-6,
            query_pre_attn_scalar=24,
            sliding_window=4,
            rope_parameters={
                "full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            },
            tie_word_embeddings=True,
        ),
        "gemma3",
    ),
    "phi3": (
        "Phi3Config",
        "Phi3ForCausalLM",
        dict(
            hidden_size=64,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            rms_norm_eps=1e-5,
            original_max_position_embeddings=64,
            rope_parameters={
                "rope_type": "default",
                "rope_theta": 10000.0,
                "partial_rotary_factor": 0.5,
            },
            sliding_window=None,
            tie_word_embeddings=False,
        ),
        "phi3",
    ),
    "gpt_neox": (
        "GPTNeoXConfig",
        "GPTNeoXForCausalLM",
        dict(
            hidden_size=64,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            layer_norm_eps=1e-5,
            use_parallel_residual=True,
            rope_parameters={
                "rope_type": "default",
                "rope_theta": 10000.0,
                "partial_rotary_factor": 0.25,
            },
            hidden_act="gelu",
            tie_word_embeddings=False,
        ),
        "gptneox",
    ),
}

# What the GGUF of a model means to llama.cpp where it differs from the folder: config
# overrides for the float64 reference of the .gguf, and why.
GGUF_MEANS = {
    "mistral": (
        {"sliding_window": None},
        "llama.cpp's converter writes no sliding window for MistralForCausalLM and its "
        "llama architecture has none: the GGUF attends to every earlier token",
    ),
    "gemma2": (
        {"query_pre_attn_scalar": 16},
        "llama.cpp's converter writes no query_pre_attn_scalar; llama.cpp scales Gemma 2 "
        "scores by 1/sqrt(head_dim) (1/sqrt(n_embd/n_head) for the 46-layer 27B only)",
    ),
    "gemma3": (
        {"query_pre_attn_scalar": 16},
        "llama.cpp's converter writes no query_pre_attn_scalar; llama.cpp scales Gemma 3 "
        "scores by 1/sqrt(head_dim) (1/sqrt(n_embd/n_head) for the 62-layer 27B only)",
    ),
}

def zero(m, suffixes) -> None:
    for n, p in m.named_parameters():
        if n.endswith(suffixes):
            p.data.zero_()


def ones(m, suffixes) -> None:
    for n, p in m.named_parameters():
        if n.endswith(suffixes):
            p.data.fill_(1.0)


# Config overrides (or weight edits) that switch one feature off; each must move the
# attention or the loss. (Gemma's q/k norms compute 1 + w, so w = 0 is no norm weight.)
BITES = {
    "llama3": {"llama3 rope scaling": {"rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}}},
    "mistral": {"sliding window": {"sliding_window": None}},
    "qwen2": {"q/k/v biases": lambda m: zero(m, ("q_proj.bias", "k_proj.bias", "v_proj.bias"))},
    "qwen3": {"q/k norms": lambda m: ones(m, ("q_norm.weight", "k_norm.weight"))},
    "gemma2": {
        "sliding window": {"sliding_window": 64},
        "attention soft cap": {"attn_logit_softcapping": None},
        "final soft cap": {"final_logit_softcapping": None},
        "query_pre_attn_scalar": {"query_pre_attn_scalar": 16},
    },
    "gemma3": {
        "sliding window": {"sliding_window": 64},
        "local rope base": {
            "rope_parameters": {
                "full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                "sliding_attention": {"rope_type": "default", "rope_theta": 1000000.0},
            }
        },
        "query_pre_attn_scalar": {"query_pre_attn_scalar": 16},
        "q/k norms": lambda m: zero(m, ("q_norm.weight", "k_norm.weight")),
    },
    "phi3": {
        "partial rotary": {
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 1.0}
        }
    },
    "gpt_neox": {
        "partial rotary": {
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 1.0}
        },
        "parallel residual": {"use_parallel_residual": False},
    },
}


def make_tokenizer() -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=[SPECIAL],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([TRAIN_TEXT], trainer=trainer)
    assert tok.get_vocab_size() == VOCAB, tok.get_vocab_size()
    assert tok.token_to_id(SPECIAL) == 0
    return tok


def save_tokenizer(tok: Tokenizer, d: Path) -> None:
    tok.save(str(d / "tokenizer.json"))
    tc = {
        # byte-level BPE with GPT-2's pre-tokenizer; also what makes llama.cpp's Phi-3
        # converter take the gpt2 vocabulary path
        "tokenizer_class": "GPT2Tokenizer",
        "bos_token": SPECIAL,
        "eos_token": SPECIAL,
        "unk_token": SPECIAL,
        "add_bos_token": False,
        "add_prefix_space": False,
        "model_max_length": 64,
    }
    (d / "tokenizer_config.json").write_text(json.dumps(tc, indent=2) + "\n")


def build(name: str, seed: int):
    cfg_cls, model_cls, kw, _ = ARCHS[name]
    config = getattr(transformers, cfg_cls)(**COMMON, **kw)
    torch.manual_seed(seed)
    model = getattr(transformers, model_cls)(config).eval()
    g = torch.Generator().manual_seed(seed)
    gemma = name.startswith("gemma")
    with torch.no_grad():
        for pname, p in model.named_parameters():
            r = torch.normal(0.0, STD, size=tuple(p.shape), generator=g)
            is_norm = "norm" in pname and pname.endswith(".weight")
            if is_norm and gemma:
                # Gemma's norms compute x * (1 + w): w on a 1/1024 grid keeps 1 + w exact in f16
                r = torch.round(r * 1024) / 1024
            elif is_norm:
                r = 1.0 + r
            p.copy_(r)
    return model.to(torch.float16)


def load64(d: Path, **overrides):
    m = AutoModelForCausalLM.from_pretrained(
        d, dtype=torch.float64, attn_implementation="eager", **overrides
    )
    return m.eval()


def sig(x: float) -> float:
    return float(f"{x:.7g}")


@torch.no_grad()
def reference(m) -> dict:
    ids = torch.tensor([IDS])
    out = m(ids, output_attentions=True, use_cache=False)
    logits = out.logits[0]
    att = torch.stack([a[0] for a in out.attentions])  # [layer, head, q, k]
    loss = torch.nn.functional.cross_entropy(logits[:-1], ids[0, 1:]).item()
    last = logits[-1]
    order = torch.argsort(last, descending=True, stable=True)
    top5 = order[:5].tolist()
    margin5 = (last[order[4]] - last[order[5]]).item()
    # greedy by full forwards (plain argmax), then checked against generate()
    seq = list(IDS)
    margins = []
    for _ in range(N_NEW):
        row = m(torch.tensor([seq]), use_cache=False).logits[0, -1]
        o = torch.argsort(row, descending=True, stable=True)
        margins.append((row[o[0]] - row[o[1]]).item())
        seq.append(int(o[0]))
    greedy = seq[len(IDS):]
    gc = GenerationConfig(
        max_new_tokens=N_NEW, do_sample=False, eos_token_id=None, pad_token_id=0
    )
    gen = m.generate(ids, generation_config=gc)[0, len(IDS):].tolist()
    assert gen == greedy, (gen, greedy)
    assert margin5 > 1e-3 and min(margins) > 1e-3, (margin5, margins)
    return {
        "attention": att,
        "loss": loss,
        "top5": top5,
        "greedy": greedy,
        "margin": min([margin5] + margins),
    }


def as_json(r: dict) -> dict:
    return {
        "attention": [[[[sig(x) for x in row] for row in head] for head in layer] for layer in r["attention"].tolist()],
        "loss": sig(r["loss"]),
        "top5": r["top5"],
        "greedy": r["greedy"],
    }


# ---- GGUF, as llama.cpp's convert_hf_to_gguf.py writes these architectures ----


def find_hparam(h: dict, keys, default=None):
    for k in keys:
        if k in h:
            return h[k]
    return default


def llama_permute(w: np.ndarray, n_head: int, n_head_kv: int) -> np.ndarray:
    # LlamaModel.permute: rows of each head from halves (0..d/2, d/2..d) to pairs (2i, 2i+1)
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (
        w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
        .swapaxes(1, 2)
        .reshape(w.shape)
    )


def llama3_rope_factors(rp: dict, dim: int) -> np.ndarray:
    base = rp.get("rope_theta", 10000.0)
    freqs = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    factor = rp.get("factor", 8.0)
    low = rp.get("low_freq_factor", 1.0)
    high = rp.get("high_freq_factor", 4.0)
    old = rp.get("original_max_position_embeddings", 8192)
    low_wl, high_wl = old / low, old / high
    out = []
    for f in freqs:
        wl = 2 * math.pi / f
        if wl < high_wl:
            out.append(1)
        elif wl > low_wl:
            out.append(factor)
        else:
            smooth = (old / wl - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return torch.tensor(out, dtype=torch.float32).numpy()


def base_params(w: gguf.GGUFWriter, h: dict, rope: dict, n_layer: int) -> None:
    """TextModel.set_gguf_parameters for the keys these configs have."""
    w.add_block_count(n_layer)
    if (v := find_hparam(h, ["max_position_embeddings", "n_ctx", "n_positions"])) is not None:
        w.add_context_length(v)
    if (v := find_hparam(h, ["hidden_size", "n_embd", "dim"])) is not None:
        w.add_embedding_length(v)
    if (v := find_hparam(h, ["intermediate_size", "n_inner", "hidden_dim"])) is not None:
        w.add_feed_forward_length(v)
    if (v := find_hparam(h, ["num_attention_heads", "n_head", "n_heads"])) is not None:
        w.add_head_count(v)
    if (v := find_hparam(h, ["num_key_value_heads", "n_kv_heads"])) is not None:
        w.add_head_count_kv(v)
    rp = rope.get("full_attention", rope)
    if (rt := rp.get("rope_type")) is not None and rt == "linear" and rp.get("factor"):
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(rp["factor"])
    # "llama3" becomes the rope_freqs tensor; "default" writes nothing
    if (v := rp.get("rope_theta")) is not None:
        w.add_rope_freq_base(v)
    if (v := rope.get("sliding_attention", {}).get("rope_theta")) is not None:
        w.add_rope_freq_base_swa(v)
    if (v := find_hparam(h, ["rms_norm_eps", "norm_eps"])) is not None:
        w.add_layer_norm_rms_eps(v)
    if (v := find_hparam(h, ["layer_norm_eps", "layer_norm_epsilon", "norm_epsilon"])) is not None:
        w.add_layer_norm_eps(v)
    if (v := h.get("head_dim")) is not None:
        w.add_key_length(v)
        w.add_value_length(v)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)


def rope_parameters(h: dict) -> dict:
    """TextModel.__init__'s rope_parameters, with the top-level keys mirrored in."""
    rope = dict(h.get("rope_parameters", h.get("rope_scaling")) or {})
    theta = find_hparam(h, ["global_rope_theta", "rope_theta", "rotary_emb_base"])
    local = find_hparam(h, ["local_rope_theta", "rope_local_base_freq"])
    prf = find_hparam(h, ["partial_rotary_factor", "rope_pct", "rope_percent"])
    omp = h.get("original_max_position_embeddings")
    if "full_attention" not in rope and "sliding_attention" not in rope:
        if local is not None:
            rope["sliding_attention"] = {"rope_theta": local}
        if "rope_theta" not in rope and theta is not None:
            rope["rope_theta"] = theta
        if "partial_rotary_factor" not in rope and prf is not None:
            rope["partial_rotary_factor"] = prf
        if "original_max_position_embeddings" not in rope and omp is not None:
            rope["original_max_position_embeddings"] = omp
    return rope


def arch_params(name: str, w: gguf.GGUFWriter, h: dict, rope: dict, n_layer: int) -> None:
    if name in ("llama3", "mistral"):  # LlamaModel
        base_params(w, h, rope, n_layer)
        w.add_vocab_size(h["vocab_size"])
        w.add_rope_dimension_count(h.get("head_dim") or h["hidden_size"] // h["num_attention_heads"])
    elif name in ("qwen2", "qwen3"):  # Qwen2Model, Qwen3Model
        base_params(w, h, rope, n_layer)
    elif name == "gemma2":  # Gemma2Model: its own list, no RoPE keys
        w.add_context_length(h["max_position_embeddings"])
        w.add_embedding_length(h["hidden_size"])
        w.add_block_count(n_layer)
        w.add_feed_forward_length(h["intermediate_size"])
        w.add_head_count(h["num_attention_heads"])
        w.add_head_count_kv(h.get("num_key_value_heads", h["num_attention_heads"]))
        w.add_layer_norm_rms_eps(h["rms_norm_eps"])
        w.add_key_length(h["head_dim"])
        w.add_value_length(h["head_dim"])
        w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
        w.add_attn_logit_softcapping(h["attn_logit_softcapping"])
        w.add_final_logit_softcapping(h["final_logit_softcapping"])
        w.add_sliding_window(h["sliding_window"])
    elif name == "gemma3":  # Gemma3Model: the base keys, some set again
        base_params(w, h, rope, n_layer)
        w.add_context_length(h.get("max_position_embeddings", 131072))
        w.add_head_count(h.get("num_attention_heads", 8))
        w.add_layer_norm_rms_eps(h.get("rms_norm_eps", 1e-6))
        w.add_key_length(h.get("head_dim", 256))
        w.add_value_length(h.get("head_dim", 256))
        w.add_rope_freq_base(rope.get("full_attention", rope).get("rope_theta", 1_000_000.0))
        assert h.get("attn_logit_softcapping") is None
        if fc := h.get("final_logit_softcapping"):
            w.add_final_logit_softcapping(fc)
        if h.get("sliding_window_pattern") != 1:
            w.add_sliding_window(h["sliding_window"])
        w.add_head_count_kv(h.get("num_key_value_heads", 4))
    elif name == "phi3":  # Phi3MiniModel: its own list
        n_embd, n_head = h["hidden_size"], h["num_attention_heads"]
        rot = rope.get("partial_rotary_factor", 1.0)
        w.add_context_length(h["max_position_embeddings"])
        w.add_rope_scaling_orig_ctx_len(rope["original_max_position_embeddings"])
        w.add_embedding_length(n_embd)
        w.add_feed_forward_length(h["intermediate_size"])
        w.add_block_count(n_layer)
        w.add_head_count(n_head)
        w.add_head_count_kv(h["num_key_value_heads"])
        w.add_layer_norm_rms_eps(h["rms_norm_eps"])
        w.add_rope_dimension_count(int(rot * n_embd) // n_head)
        w.add_rope_freq_base(rope.get("full_attention", rope)["rope_theta"])
        w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
        w.add_sliding_window(h.get("sliding_window") or 0)
    elif name == "gpt_neox":  # GPTNeoXModel: its own list, no RoPE base
        # The converter reads rotary_pct, which transformers 5 keeps in
        # rope_parameters["partial_rotary_factor"].
        rot = h.get("rotary_pct", rope.get("partial_rotary_factor"))
        w.add_context_length(h["max_position_embeddings"])
        w.add_embedding_length(h["hidden_size"])
        w.add_block_count(n_layer)
        w.add_feed_forward_length(h["intermediate_size"])
        w.add_rope_dimension_count(int(rot * (h["hidden_size"] // h["num_attention_heads"])))
        w.add_head_count(h["num_attention_heads"])
        w.add_parallel_residual(h.get("use_parallel_residual", True))
        w.add_layer_norm_eps(h["layer_norm_eps"])
    else:
        raise KeyError(name)


def gguf_tensors(name: str, h: dict, rope: dict, d: Path):
    """(gguf name, array) in the converter's order: extra tensors, then the file's."""
    arch = gguf.MODEL_ARCH[ARCHS[name][3].upper()]
    n_layer = h["num_hidden_layers"]
    tmap = gguf.get_tensor_name_map(arch, n_layer)
    n_head = h["num_attention_heads"]
    n_kv = h.get("num_key_value_heads", n_head)
    if name == "llama3":
        dim = h.get("head_dim") or h["hidden_size"] // n_head
        yield "rope_freqs.weight", llama3_rope_factors(rope, dim)
    with safe_open(d / "model.safetensors", "pt") as f:
        for hf in f.keys():
            t = f.get_tensor(hf)
            if name in ("gemma2", "gemma3"):
                if name == "gemma2" and hf == "lm_head.weight":
                    continue  # skipped by Gemma2Model.filter_tensors
                if hf.endswith("norm.weight"):
                    t = t + 1  # float16 arithmetic, as the converter does it
            if name in ("llama3", "mistral"):
                if hf.endswith(("q_proj.weight", "q_proj.bias")):
                    t = torch.from_numpy(llama_permute(t.numpy(), n_head, n_head))
                if hf.endswith(("k_proj.weight", "k_proj.bias")):
                    t = torch.from_numpy(llama_permute(t.numpy(), n_head, n_kv))
            if name == "gpt_neox" and "attention.query_key_value." in hf:
                e = h["hidden_size"]
                if hf.endswith(".weight"):
                    q = t.reshape(n_head, 3, e // n_head, e)
                    t = torch.cat([q[:, i].reshape(-1, e) for i in range(3)], dim=0)
                else:
                    q = t.reshape(n_head, 3, e // n_head)
                    t = torch.cat([q[:, i].reshape(e) for i in range(3)], dim=0)
            new = tmap.get_name(hf, try_suffixes=(".weight", ".bias"))
            if new is None:
                raise ValueError(f"{name}: no GGUF name for {hf}")
            yield new, t.numpy()


def write_gguf(name: str, d: Path, path: Path, tok: Tokenizer) -> list[str]:
    h = json.loads((d / "config.json").read_text())
    rope = rope_parameters(h)
    arch_name = ARCHS[name][3]
    n_layer = h["num_hidden_layers"]
    w = gguf.GGUFWriter(path, arch_name)
    tensors = list(gguf_tensors(name, h, rope, d))
    for tn, a in tensors:
        # 1-D tensors and norms as f32, every other matrix f16 (as the f16 source)
        if a.ndim <= 1 or tn.endswith("_norm.weight"):
            a = a.astype(np.float32)
        else:
            a = a.astype(np.float16)
        w.add_tensor(tn, a)
    # ModelBase.prepare_metadata: general.*, the architecture, the quantization version
    total, shared, expert, n_expert = w.get_total_parameter_count()
    md = gguf.Metadata.load(None, d, None, total)
    if md.name is None:
        md.name = d.name
    if md.size_label is None and total > 0:
        md.size_label = gguf.size_label(total, shared, expert, n_expert)
    w.add_type(gguf.GGUFType.MODEL)
    md.set_gguf_meta_model(w)
    arch_params(name, w, h, rope, n_layer)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    # TextModel._set_vocab_gpt2 (GPT-2 byte-level BPE; "gpt2" is our pre-tokenizer)
    vocab = tok.get_vocab(with_added_tokens=True)
    rev = {i: t for t, i in vocab.items()}
    special = {a.content for a in tok.get_added_tokens_decoder().values() if a.special}
    tokens = [rev[i] for i in range(h["vocab_size"])]
    types = [
        gguf.TokenType.CONTROL if t in special else gguf.TokenType.NORMAL for t in tokens
    ]
    if arch_name == "llama":  # LlamaModel.set_vocab reads add_prefix_space first
        tc = json.loads((d / "tokenizer_config.json").read_text())
        if (v := tc.get("add_prefix_space")) is not None:
            w.add_add_space_prefix(v)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    gguf.SpecialVocab(d, load_merges=True).add_to_gguf(w)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return [tn for tn, _ in tensors]


def max_diff(a: dict, b: dict) -> float:
    return (a["attention"] - b["attention"]).abs().max().item()


def main() -> None:
    torch.set_num_threads(1)
    transformers.utils.logging.disable_progress_bar()
    # Gemma 3's converter sets some keys twice; the writer warns and keeps the last
    logging.getLogger("gguf").setLevel(logging.ERROR)
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    tok = make_tokenizer()
    expected = {}
    for seed, name in enumerate(ARCHS, start=1):
        d = OUT / name
        build(name, 1000 + seed).save_pretrained(d)
        save_tokenizer(tok, d)
        names = write_gguf(name, d, OUT / f"{name}.gguf", tok)
        ref = reference(load64(d))
        bites = []
        for what, ov in BITES[name].items():
            if callable(ov):
                other = load64(d)
                ov(other)
                other = reference(other)
            else:
                other = reference(load64(d, **ov))
            dd = max(max_diff(ref, other), abs(ref["loss"] - other["loss"]))
            bites.append(f"{what} {dd:.3g}")
            assert dd > BITE, f"{name}: switching off {what} changes only {dd}"
        entry = {"ids": IDS, **as_json(ref)}
        if name in GGUF_MEANS:
            ov, why = GGUF_MEANS[name]
            g = reference(load64(d, **ov))
            entry["gguf"] = as_json(g)
            entry["why"] = why
            bites.append(f"gguf vs folder {max_diff(ref, g):.3g}")
        expected[name] = entry
        print(
            f"{name}: {len(names)} GGUF tensors, loss {ref['loss']:.4f}, top5 {ref['top5']}, "
            f"greedy {ref['greedy']}, smallest logit margin {ref['margin']:.2e}; bites: "
            + ", ".join(bites)
        )
    (OUT / "expected.json").write_text(json.dumps(expected, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
