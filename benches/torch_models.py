#!/usr/bin/env python3
"""PyTorch's figures on SmolLM2-135M, to set beside attnviz's on the same CPU (not a test).

Run from the repository, in the venv of torch_common.py (PyTorch CPU, transformers, gguf),
after tests/data/models/fetch.sh:

    python benches/torch_models.py [--models DIR] [--threads 1,2] [--runs 7]

Measures, per thread count (torch.set_num_threads):
- forward: one eager fp32 forward over exactly 128 tokens (no KV cache), median of --runs
  after one warm-up; also with output_attentions=True (the weights attnviz shows);
- generate: greedy decoding of 64 new tokens after a 16-token prompt with the KV cache
  (EOS suppressed so every run makes 64), tokens/s = 64 / wall time, median of --runs.
Prints one JSON object. The GGUF file is dequantized to fp32 by transformers when it loads.
"""

import argparse
import datetime
import json
import os
import resource
import time

from torch_common import (
    FORWARD_TOKENS,
    NEW_TOKENS,
    PROMPT_TOKENS,
    SMOLLM2_FILE,
    SMOLLM2_PKG,
    cpu_model,
    default_models_dir,
    ids_of_length,
    import_torch,
    load_smollm2,
    median_ms,
    set_threads,
)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=default_models_dir())
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    if args.runs < 5:
        ap.error("--runs must be at least 5")

    torch = import_torch()
    import transformers

    t0 = time.perf_counter()
    tok, model = load_smollm2(args.models)
    load_s = time.perf_counter() - t0

    fwd_ids = torch.tensor([ids_of_length(tok, FORWARD_TOKENS)])
    prompt = torch.tensor([ids_of_length(tok, PROMPT_TOKENS)])
    assert fwd_ids.shape[1] == FORWARD_TOKENS and prompt.shape[1] == PROMPT_TOKENS

    results = []
    for threads in [int(x) for x in args.threads.split(",")]:
        set_threads(threads)
        with torch.inference_mode():
            fwd_ms, fwd_all = median_ms(lambda: model(fwd_ids, use_cache=False), args.runs)
            fwd_attn_ms, _ = median_ms(lambda: model(fwd_ids, use_cache=False, output_attentions=True), args.runs)

            def gen():
                out = model.generate(
                    prompt,
                    max_new_tokens=NEW_TOKENS,
                    min_new_tokens=NEW_TOKENS,
                    do_sample=False,
                    use_cache=True,
                    pad_token_id=model.config.pad_token_id,
                )
                assert out.shape[1] == PROMPT_TOKENS + NEW_TOKENS

            gen_ms, gen_all = median_ms(gen, args.runs)
            prefill_ms, _ = median_ms(lambda: model(prompt, use_cache=True), args.runs)
        results.append(
            {
                "threads": threads,
                "forward_tokens": FORWARD_TOKENS,
                "forward_ms_median": round(fwd_ms, 2),
                "forward_ms_runs": [round(x, 2) for x in fwd_all],
                "forward_with_attentions_ms_median": round(fwd_attn_ms, 2),
                "generate_prompt_tokens": PROMPT_TOKENS,
                "generate_new_tokens": NEW_TOKENS,
                "generate_ms_median": round(gen_ms, 2),
                "generate_ms_runs": [round(x, 2) for x in gen_all],
                "generate_tokens_per_s": round(NEW_TOKENS / (gen_ms / 1000.0), 2),
                "prefill_16_ms_median": round(prefill_ms, 2),
            }
        )

    print(
        json.dumps(
            {
                "model": os.path.join(SMOLLM2_PKG, SMOLLM2_FILE),
                "what": "PyTorch eager fp32 (GGUF dequantized by transformers), batch 1",
                "cpu": cpu_model(),
                "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "torch": torch.__version__,
                "transformers": transformers.__version__,
                "load_s": round(load_s, 2),
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1),
                "runs": args.runs,
                "results": results,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
