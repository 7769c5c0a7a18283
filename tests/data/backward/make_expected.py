#!/usr/bin/env python3
"""Expected gradients for tests/kernel/backward_autograd.rs, from PyTorch float64 autograd.

Run once in a throw-away venv with numpy and PyTorch (CPU); the tests never need torch:

    python tests/data/backward/make_expected.py      # rewrites tests/data/backward/*

Every case writes q, k, v, dO as float32 .npy (what `attnviz compute` reads; the float64
reference here starts from the same float32 values), an optional mask file, and the
expected O, dQ, dK, dV as float64 .npy, plus cases.json naming each case's flags. The
attention is written out in float64 from DESIGN.md's semantics and differentiated by
autograd: scale 1/sqrt(d); causal and window bottom-right aligned (query i stands at key
position i + Nk - Nq); padding masks keys j >= L_b; file masks 0/1 (keep) or additive;
ALiBi adds -m_h |i' - j| with the paper's slopes; RoPE rotates interleaved pairs (2i, 2i+1)
by pos * base^(-2i/d), gradients taken with respect to q and k before the rotation; GQA
head h reads K/V head h / (H / G); a row with every key masked gives zeros.
"""

import json
import math
import os

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def alibi_slopes(h):
    def pow2(n):
        return [2.0 ** (-8.0 * (i + 1) / n) for i in range(n)]
    p = 2 ** int(math.floor(math.log2(h)))
    if p == h:
        return pow2(h)
    return pow2(p) + pow2(2 * p)[0::2][: h - p]


def rope(x, positions, base):
    d = x.shape[-1]
    i = torch.arange(d // 2, dtype=torch.float64)
    theta = positions[:, None] * base ** (-2.0 * i / d)  # [n, d/2]
    c, s = torch.cos(theta), torch.sin(theta)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = x0 * c - x1 * s
    out[..., 1::2] = x0 * s + x1 * c
    return out


def attention(q, k, v, case, file_bias):
    b, h, nq, d = q.shape
    g, nk = k.shape[1], k.shape[2]
    qpos = torch.arange(nq, dtype=torch.float64) + (nk - nq)
    kpos = torch.arange(nk, dtype=torch.float64)
    if case.get("rope"):
        q = rope(q, qpos, case["rope"])
        k = rope(k, kpos, case["rope"])
    rep = h // g
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    s = (q @ k.transpose(-1, -2)) / math.sqrt(d)
    if case.get("alibi"):
        m = torch.tensor(alibi_slopes(h), dtype=torch.float64)[None, :, None, None]
        s = s - m * (qpos[:, None] - kpos[None, :]).abs()
    keep = torch.ones(b, h, nq, nk, dtype=torch.bool)
    mask = case["mask"]
    ii, jj = qpos[:, None], kpos[None, :]
    if mask == "causal":
        keep &= jj <= ii
    elif mask.startswith("window:"):
        w = int(mask.split(":")[1])
        keep &= (jj <= ii) & (jj > ii - w)
    elif mask.startswith("padding:"):
        lens = [int(x) for x in mask.split(":")[1].split(",")]
        for bi, length in enumerate(lens):
            keep[bi, :, :, length:] = False
    if file_bias is not None:
        fb = torch.from_numpy(file_bias)
        keep &= fb != -math.inf
        s = s + torch.where(fb == -math.inf, torch.zeros_like(fb), fb)
    s = s.masked_fill(~keep, -math.inf)
    rowmax = s.amax(-1, keepdim=True)
    rowmax = torch.where(torch.isfinite(rowmax), rowmax, torch.zeros_like(rowmax)).detach()
    e = torch.exp(s - rowmax)
    p = e / e.sum(-1, keepdim=True).clamp_min(1e-300)
    return p @ v


CASES = [
    {"name": "none", "shape": [1, 2, 2, 37, 37, 16], "mask": "none"},
    {"name": "causal_gqa", "shape": [2, 4, 2, 45, 45, 16], "mask": "causal"},
    {"name": "causal_decode_mqa", "shape": [1, 4, 1, 5, 40, 16], "mask": "causal"},
    {"name": "window", "shape": [1, 2, 2, 50, 50, 8], "mask": "window:7"},
    {"name": "window_decode", "shape": [1, 2, 1, 3, 29, 8], "mask": "window:5"},
    {"name": "padding", "shape": [2, 2, 2, 33, 33, 16], "mask": "padding:20,33"},
    {"name": "file_keep", "shape": [1, 2, 2, 21, 23, 16], "mask": "file"},
    {"name": "alibi_causal_h3", "shape": [1, 3, 3, 30, 30, 16], "mask": "causal", "alibi": True},
    {"name": "rope_causal", "shape": [1, 2, 2, 24, 24, 16], "mask": "causal", "rope": 10000.0},
    {"name": "rope_gqa_decode", "shape": [1, 4, 2, 6, 26, 16], "mask": "causal", "rope": 500.0},
    {"name": "alibi_rope_window_gqa", "shape": [1, 4, 2, 70, 70, 32], "mask": "window:20",
     "alibi": True, "rope": 10000.0},
]


def main():
    torch.set_default_dtype(torch.float64)
    rng = np.random.default_rng(20261202)
    listing = []
    for case in CASES:
        b, h, g, nq, nk, d = case["shape"]
        x = {
            "q": rng.standard_normal((b, h, nq, d)).astype(np.float32),
            "k": rng.standard_normal((b, g, nk, d)).astype(np.float32),
            "v": rng.standard_normal((b, g, nk, d)).astype(np.float32),
            "do": rng.standard_normal((b, h, nq, d)).astype(np.float32),
        }
        name = case["name"]
        flags = []
        file_bias = None
        if case["mask"] == "file":
            keep = (rng.random((nq, nk)) < 0.6).astype(np.float64)
            keep[3, :] = 0.0  # a row with every key masked: zeros, zero gradient
            np.save(os.path.join(HERE, f"{name}_mask.npy"), keep)
            file_bias = np.where(keep == 1.0, 0.0, -math.inf)
            flags.append(f"--mask=file:{name}_mask.npy")
        else:
            flags.append(f"--mask={case['mask']}")
        if case.get("alibi"):
            flags.append("--alibi")
        if case.get("rope"):
            flags.append(f"--rope={case['rope']:g}")
        t = {n: torch.from_numpy(a.astype(np.float64)).requires_grad_(n != "do") for n, a in x.items()}
        o = attention(t["q"], t["k"], t["v"], case, file_bias)
        dq, dk, dv = torch.autograd.grad(o, (t["q"], t["k"], t["v"]), t["do"])
        for n, a in x.items():
            np.save(os.path.join(HERE, f"{name}_{n}.npy"), a)
        for n, a in (("o", o), ("dq", dq), ("dk", dk), ("dv", dv)):
            np.save(os.path.join(HERE, f"{name}_expected_{n}.npy"), a.detach().numpy())
        listing.append({"name": name, "flags": flags})
    with open(os.path.join(HERE, "cases.json"), "w") as f:
        json.dump({"torch": torch.__version__, "cases": listing}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
