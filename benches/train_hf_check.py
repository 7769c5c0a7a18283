#!/usr/bin/env python3
"""Checks that a folder written by `attnviz train --out DIR` opens in transformers and that
its attention there equals attnviz's (not a test: tests never need torch).

Run from the repository, in the venv of torch_common.py (PyTorch CPU, transformers), after
`cargo build --release`:

    python benches/train_hf_check.py DIR [--ids 1,2,3,...]

Loads DIR with `GPT2LMHeadModel.from_pretrained` (eager attention, fp32) and its
tokenizer.json with `PreTrainedTokenizerFast`, runs the ids (default: 32 seeded random ids
twice, clipped to n_positions), and compares every layer's attention weights with
`attnviz model run DIR --ids .. --attn-out A.npy`. Prints the largest difference and
exits 1 if it exceeds 1e-4.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

from torch_common import attnviz_release, import_torch

torch = import_torch()
from transformers import GPT2LMHeadModel, PreTrainedTokenizerFast  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--ids", default=None)
    a = ap.parse_args()
    cfg = json.load(open(os.path.join(a.dir, "config.json")))
    if a.ids:
        ids = [int(x) for x in a.ids.split(",")]
    else:
        g = np.random.default_rng(0)
        half = g.integers(0, cfg["vocab_size"], size=min(32, cfg["n_positions"] // 2)).tolist()
        ids = half + half
    model = GPT2LMHeadModel.from_pretrained(a.dir, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    tok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(a.dir, "tokenizer.json"))
    print(f"transformers loaded {cfg['n_layer']} layers x {cfg['n_head']} heads; tokenizer of "
          f"{tok.vocab_size} tokens; decode(ids[:8]) = {tok.decode(ids[:8])!r}")
    with torch.no_grad():
        out = model(torch.tensor([ids]), output_attentions=True)
    theirs = np.stack([x[0].numpy() for x in out.attentions])  # [layers, heads, n, n]
    binary = attnviz_release()
    with tempfile.TemporaryDirectory() as t:
        path = os.path.join(t, "a.npy")
        subprocess.run([binary, "model", "run", a.dir, "--ids", ",".join(map(str, ids)),
                        "--attn-out", path, "--json"], check=True, capture_output=True)
        mine = np.load(path)
    if mine.shape != theirs.shape:
        sys.exit(f"shapes differ: attnviz {mine.shape}, transformers {theirs.shape}")
    diff = float(np.abs(mine - theirs).max())
    print(f"{len(ids)} tokens; largest |attnviz - transformers| attention difference: {diff:.3g}")
    sys.exit(0 if diff <= 1e-4 else 1)


if __name__ == "__main__":
    main()
