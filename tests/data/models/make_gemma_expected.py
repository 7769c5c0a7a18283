"""Expected values of Gemma 3 270M (GGUF Q4_K_M) from transformers, for tests/model/gemma.rs.

transformers loads the GGUF with `gguf_file=`, dequantizing every tensor to float32; the model
runs in float32 with eager attention. For each text: the token ids (the GGUF's tokenizer as
transformers builds it), every layer's and head's attention weights (4 decimals), the mean
next-token loss, the top-5 next tokens at the last position; for the first two texts also 8
greedy tokens.

Run once, in a throw-away venv with torch (CPU), transformers, accelerate and gguf:
    python tests/data/models/make_gemma_expected.py /path/to/folder-with-the-gguf
Made with transformers 5.25.0 and torch 2.15.0.
"""

import json
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

FILE = "gemma-3-270m-q4_k_m.gguf"
TEXTS = [
    "The capital of France is",
    "def add(a, b):\n    return a + b",
    "Once upon a time, a small fox",
    "东京是日本的首都。",
    "I love pizza 🍕 and tacos 🌮!",
    "SELECT name FROM users WHERE id = 1;",
    "The quick brown fox jumps over the lazy dog.",
    "Der Himmel ist blau und",
    "for i in range(10): print(i)",
    "안녕하세요, 반갑습니다.",
]


def main():
    folder = sys.argv[1]
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=FILE)
    model = AutoModelForCausalLM.from_pretrained(
        folder, gguf_file=FILE, dtype=torch.float32, attn_implementation="eager"
    )
    model.eval()
    out = []
    for n, text in enumerate(TEXTS):
        ids = tok(text, return_tensors="pt").input_ids
        with torch.no_grad():
            r = model(ids, output_attentions=True)
        logits = r.logits[0]
        loss = torch.nn.functional.cross_entropy(logits[:-1], ids[0, 1:]).item()
        top = logits[-1].softmax(-1).topk(5)
        rec = {
            "text": text,
            "ids": ids[0].tolist(),
            "loss": loss,
            "top5": [int(i) for i in top.indices],
            "top5_prob": [round(float(p), 6) for p in top.values],
            "attention": [
                [[[round(float(x), 4) for x in row] for row in head] for head in layer[0]]
                for layer in r.attentions
            ],
        }
        if n < 2:
            g = model.generate(ids, max_new_tokens=8, do_sample=False)
            rec["greedy"] = g[0, ids.shape[1]:].tolist()
        out.append(rec)
        print(text, len(rec["ids"]), loss, tok.decode(rec["top5"][:1]), file=sys.stderr)
    json.dump(out, open("tests/data/models/gemma3_expected.json", "w"), separators=(",", ":"))


if __name__ == "__main__":
    main()
