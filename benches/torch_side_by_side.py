#!/usr/bin/env python3
"""attnviz and PyTorch side by side on SmolLM2-135M, in one run, alternating (not a test).

Run from the repository, in the venv of torch_common.py (PyTorch CPU, transformers, gguf),
after tests/data/models/fetch.sh:

    python benches/torch_side_by_side.py [--models DIR] [--threads 1,2] [--runs 9]
        [--what forward,attn,generate] [--json]

attnviz runs in its own process (benches/model_forward.rs, built with `cargo bench
--no-run`, or --server PATH), which loads the model once and answers one timed request at
a time; PyTorch runs in this one. Each round runs both once per thread count, attnviz first
in even rounds and PyTorch first in odd ones, so that a slow moment of a shared machine
falls on both. After one warm-up of each, --runs rounds; medians are printed with the ratio
PyTorch ms / attnviz ms (above 1: attnviz is faster) and the CPU model. At 1 thread the
calling thread's CPU time of both is printed too (on a shared machine the steadier figure:
it leaves out the time other programs held the core).

What is compared (the same token ids on both sides, 128 for the forward):
- forward: one eager fp32 forward, logits of every row, no KV cache. PyTorch's eager
  attention forms the softmax weights inside (not returned); attnviz's flash kernel does
  not form them.
- attn: the same with every layer's attention weights returned (PyTorch
  output_attentions=True, attnviz keep_attention, which is what `attnviz model run
  --attn-out` does).
- generate: greedy, 64 new tokens after a 16-token prompt, KV cache, EOS not stopping:
  tokens/s = 64 / wall time.
"""

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time

from torch_common import (
    FORWARD_TOKENS,
    NEW_TOKENS,
    PROMPT_TOKENS,
    REPO,
    SMOLLM2_FILE,
    SMOLLM2_PKG,
    cpu_model,
    default_models_dir,
    ids_of_length,
    import_torch,
    load_smollm2,
    set_threads,
)


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


class Attnviz:
    def __init__(self, exe, model):
        self.p = subprocess.Popen([exe, model], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(self, line):
        """(wall ms, calling thread's CPU ms or None) of one request."""
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        ans = self.p.stdout.readline().split()
        if len(ans) < 2 or ans[0] != "ms":
            sys.exit(f"attnviz bench server: {' '.join(ans) or 'no answer (did it crash?)'} for {line[:60]}")
        cpu = float(ans[3]) if len(ans) >= 4 and ans[2] == "cpu" else None
        return float(ans[1]), cpu

    def close(self):
        try:
            self.p.stdin.write("quit\n")
            self.p.stdin.flush()
        except BrokenPipeError:
            pass
        self.p.wait(timeout=60)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=default_models_dir())
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--what", default="forward,attn,generate")
    ap.add_argument("--server", help="the model_forward bench binary (default: cargo bench --no-run)")
    ap.add_argument("--json", action="store_true", help="print one JSON object, not a table")
    args = ap.parse_args()
    if args.runs < 5:
        ap.error("--runs must be at least 5")
    what = [w.strip() for w in args.what.split(",") if w.strip()]
    for w in what:
        if w not in ("forward", "attn", "generate"):
            ap.error(f"--what: unknown {w!r}; expected forward, attn, generate")
    threads = [int(x) for x in args.threads.split(",")]

    torch = import_torch()
    import transformers

    model_path = os.path.join(args.models, SMOLLM2_PKG, SMOLLM2_FILE)
    if not os.path.exists(model_path):
        sys.exit(f"{model_path} not found: run tests/data/models/fetch.sh or give --models")
    exe = args.server or build_server()
    av = Attnviz(exe, model_path)

    tok, model = load_smollm2(args.models)
    fwd = ids_of_length(tok, FORWARD_TOKENS)
    prompt = ids_of_length(tok, PROMPT_TOKENS)
    fwd_t = torch.tensor([fwd])
    prompt_t = torch.tensor([prompt])
    fwd_s = ",".join(map(str, fwd))
    prompt_s = ",".join(map(str, prompt))

    def torch_case(case):
        def run():
            with torch.inference_mode():
                if case == "forward":
                    out = model(fwd_t, use_cache=False)
                    assert out.logits.shape[1] == FORWARD_TOKENS
                elif case == "attn":
                    out = model(fwd_t, use_cache=False, output_attentions=True)
                    assert len(out.attentions) == model.config.num_hidden_layers
                else:
                    out = model.generate(
                        prompt_t,
                        max_new_tokens=NEW_TOKENS,
                        min_new_tokens=NEW_TOKENS,
                        do_sample=False,
                        use_cache=True,
                        pad_token_id=model.config.pad_token_id,
                    )
                    assert out.shape[1] == PROMPT_TOKENS + NEW_TOKENS

        return run

    def attnviz_case(case, t):
        if case == "forward":
            return lambda: av.ask(f"forward {t} 0 {fwd_s}")
        if case == "attn":
            return lambda: av.ask(f"forward {t} 1 {fwd_s}")
        return lambda: av.ask(f"generate {t} {NEW_TOKENS} {prompt_s}")

    def timed_torch(fn):
        c0, t0 = time.thread_time(), time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1000.0, (time.thread_time() - c0) * 1000.0

    results = []
    for case in what:
        for t in threads:
            set_threads(t)
            tf, af = torch_case(case), attnviz_case(case, t)
            tf()  # warm-up
            af()
            tms, ams = [], []
            for r in range(args.runs):
                if r % 2 == 0:
                    ams.append(af())
                    tms.append(timed_torch(tf))
                else:
                    tms.append(timed_torch(tf))
                    ams.append(af())
            tm = statistics.median(x[0] for x in tms)
            am = statistics.median(x[0] for x in ams)
            rec = {
                "case": case,
                "threads": t,
                "attnviz_ms_median": round(am, 2),
                "torch_ms_median": round(tm, 2),
                "ratio_torch_over_attnviz": round(tm / am, 3),
                "attnviz_ms_runs": [round(x[0], 1) for x in ams],
                "torch_ms_runs": [round(x[0], 1) for x in tms],
            }
            cpu_note = ""
            if t == 1 and all(x[1] is not None for x in ams):
                # At 1 thread both sides compute on the calling thread: its CPU time leaves
                # out the moments other programs held the core.
                tc = statistics.median(x[1] for x in tms)
                ac = statistics.median(x[1] for x in ams)
                rec["attnviz_cpu_ms_median"] = round(ac, 2)
                rec["torch_cpu_ms_median"] = round(tc, 2)
                rec["cpu_ratio_torch_over_attnviz"] = round(tc / ac, 3)
                cpu_note = f"  (thread CPU: {ac:.1f} vs {tc:.1f} ms, {tc / ac:.3f}x)"
            if case == "generate":
                rec["attnviz_tokens_per_s"] = round(NEW_TOKENS / (am / 1000.0), 2)
                rec["torch_tokens_per_s"] = round(NEW_TOKENS / (tm / 1000.0), 2)
            results.append(rec)
            if not args.json:
                print(
                    f"{case:8} threads {t}: attnviz {am:8.1f} ms  PyTorch {tm:8.1f} ms  "
                    f"PyTorch/attnviz {tm / am:.3f}x{cpu_note}",
                    flush=True,
                )
    av.close()
    doc = {
        "model": os.path.join(SMOLLM2_PKG, SMOLLM2_FILE),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "forward_tokens": FORWARD_TOKENS,
        "generate": {"prompt_tokens": PROMPT_TOKENS, "new_tokens": NEW_TOKENS},
        "runs": args.runs,
        "results": results,
    }
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print(f"CPU: {doc['cpu']} ({doc['cores']} logical CPUs), torch {doc['torch']}, "
              f"transformers {doc['transformers']}, {args.runs} rounds, medians")


if __name__ == "__main__":
    main()
