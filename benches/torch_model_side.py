#!/usr/bin/env python3
"""PyTorch's side of benches/models_side_by_side.py (not a test): loads one GGUF file with
transformers (dequantized to fp32, eager attention), then answers timing requests read
from stdin, one per line, as benches/model_forward.rs does for attnviz:
- `prefill THREADS ID,ID,..`: one forward over the prompt, no KV cache kept, the last
  position's logits only (`logits_to_keep=1`). Answers `ms M`.
- `decode THREADS NEW ID,ID,..`: the prompt with the KV cache, then NEW - 1 greedy steps
  over it (EOS does not stop it). Answers `ms M`, the mean time of one cached step.
- `quit`.

Run in the venv docs/models.md describes (PyTorch CPU, transformers, gguf):
    python benches/torch_model_side.py MODEL.gguf
"""

import os
import sys
import time

import torch
from transformers import AutoModelForCausalLM


def load(path):
    model = AutoModelForCausalLM.from_pretrained(
        os.path.dirname(path),
        gguf_file=os.path.basename(path),
        dtype=torch.float32,
        attn_implementation="eager",
    )
    model.eval()
    return model


def ids_of(s):
    return torch.tensor([[int(t) for t in s.split(",")]])


def prefill(model, ids):
    with torch.inference_mode():
        t = time.perf_counter()
        model(ids, use_cache=False, logits_to_keep=1)
        return (time.perf_counter() - t) * 1e3


def decode(model, new, ids):
    steps = []
    with torch.inference_mode():
        out = model(ids, use_cache=True, logits_to_keep=1)
        past = out.past_key_values
        token = out.logits[:, -1].argmax(-1, keepdim=True)
        for _ in range(new - 1):
            t = time.perf_counter()
            out = model(token, past_key_values=past, use_cache=True)
            past = out.past_key_values
            token = out.logits[:, -1].argmax(-1, keepdim=True)
            steps.append((time.perf_counter() - t) * 1e3)
    return sum(steps) / len(steps)


def main():
    if len(sys.argv) != 2:
        print("usage: torch_model_side.py MODEL.gguf", file=sys.stderr)
        sys.exit(2)
    model = load(sys.argv[1])
    for line in sys.stdin:
        parts = line.split()
        try:
            if parts == ["quit"]:
                break
            if len(parts) == 3 and parts[0] == "prefill":
                torch.set_num_threads(int(parts[1]))
                answer = f"ms {prefill(model, ids_of(parts[2])):.3f}"
            elif len(parts) == 4 and parts[0] == "decode":
                torch.set_num_threads(int(parts[1]))
                answer = f"ms {decode(model, int(parts[2]), ids_of(parts[3])):.3f}"
            else:
                answer = f"error unknown request {line.strip()!r}"
        except Exception as e:  # the driver reports it and goes on
            answer = "error " + str(e).replace("\n", " ")
        print(answer, flush=True)


if __name__ == "__main__":
    main()
