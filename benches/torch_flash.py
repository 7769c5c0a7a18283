#!/usr/bin/env python3
"""attnviz's FlashAttention kernel and PyTorch's CPU flash kernel side by side (not a test):
the forward (`--pass forward`) or the backward (`--pass backward`, the default).

Run from the repository, in the venv of torch_common.py (PyTorch CPU), after
`cargo build --release`:

    python benches/torch_flash.py [--pass forward|backward] [--n 1024,4096] [--threads 1,2] [--rounds 3]

Shape B=1, H=8, d=64, fp32, as `attnviz bench`. For every case (N, causal, threads) the two
run alternately, --rounds times, attnviz first in even rounds and PyTorch first in odd ones,
so a slow moment of a shared machine falls on both. attnviz: `attnviz bench --backward`
(its own median of 5 or more timed calls after half a second of warm-up calls). PyTorch: the
backward only of `scaled_dot_product_attention` with the flash backend (`torch.autograd.grad`
of the saved graph), median of 5 (21 below N = 1024) after the same half second of warm-up
calls; the forward under inference_mode.
GFLOP/s counts 10*B*H*N^2*d for the backward, 4*B*H*N^2*d for the forward, halved for causal;
"% peak" is attnviz's share of the FMA peak it measured in the same call.
Prints the medians over rounds, the ratio PyTorch ms / attnviz ms (above 1: attnviz is
faster) and the CPU model.
"""

import argparse
import json
import os
import statistics
import subprocess
import time

from torch_common import attnviz_release, cpu_model, import_torch, set_threads, time_ms, warm_up

torch = import_torch()
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

B, H, D = 1, 8, 64


def attnviz_ms(binary, n, causal, threads, backward):
    # PyTorch's OpenMP workers spin for a while after a parallel region: let them settle
    # so they do not take the CPU from the attnviz process started next.
    time.sleep(0.5)
    cmd = [binary, "bench", "--n", str(n), "--threads", str(threads),
           "--kernels", "flash", "--json"]
    if backward:
        cmd.append("--backward")
    if causal:
        cmd.append("--causal")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    recs = [r for r in json.loads(out) if r["kernel"] == "flash"]
    return recs[0]["ms"], recs[0]["pct_peak"]


def reps_for(n):
    return 5 if n >= 1024 else 21


def torch_forward_ms(n, causal, threads):
    set_threads(threads)
    g = torch.Generator().manual_seed(n + threads)
    q, k, v = (torch.randn(B, H, n, D, generator=g) for _ in range(3))
    with torch.inference_mode(), sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        def step():
            F.scaled_dot_product_attention(q, k, v, is_causal=causal)

        warm_up(step)
        times = time_ms(step, reps_for(n))
    return statistics.median(times)


def torch_backward_ms(n, causal, threads):
    set_threads(threads)
    g = torch.Generator().manual_seed(n + threads)
    q, k, v = (torch.randn(B, H, n, D, generator=g, requires_grad=True) for _ in range(3))
    do = torch.randn(B, H, n, D, generator=g)
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)

        def step():
            torch.autograd.grad(o, (q, k, v), do, retain_graph=True)

        warm_up(step)
        times = time_ms(step, reps_for(n))
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pass", dest="which", choices=["forward", "backward"], default="backward")
    ap.add_argument("--n", default="1024,4096")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--binary", default=attnviz_release())
    a = ap.parse_args()
    ns = [int(x) for x in a.n.split(",")]
    threads = [int(x) for x in a.threads.split(",")]
    backward = a.which == "backward"
    torch_ms = torch_backward_ms if backward else torch_forward_ms
    print(f"CPU: {cpu_model()} ({os.cpu_count()} logical CPUs), torch {torch.__version__}, "
          f"{a.which}, B={B} H={H} d={D} fp32, {a.rounds} rounds, medians")
    print(f"{'N':>5} {'causal':>6} {'thr':>3} {'attnviz ms':>11} {'GFLOP/s':>8} {'% peak':>7} "
          f"{'PyTorch ms':>11} {'GFLOP/s':>8} {'PyTorch/attnviz':>16}")
    for n in ns:
        for causal in (False, True):
            for t in threads:
                av, pct, pt = [], [], []
                for r in range(a.rounds):
                    if r % 2 == 1:
                        pt.append(torch_ms(n, causal, t))
                    ms, pp = attnviz_ms(a.binary, n, causal, t, backward)
                    av.append(ms)
                    pct.append(pp)
                    if r % 2 == 0:
                        pt.append(torch_ms(n, causal, t))
                per_n2 = 10.0 if backward else 4.0
                flops = per_n2 * B * H * n * n * D / (2.0 if causal else 1.0)
                am, pm = statistics.median(av), statistics.median(pt)
                print(f"{n:>5} {str(causal).lower():>6} {t:>3} {am:>11.3f} "
                      f"{flops / am / 1e6:>8.1f} {statistics.median(pct):>6.1f}% "
                      f"{pm:>11.3f} {flops / pm / 1e6:>8.1f} {pm / am:>15.2f}x", flush=True)


if __name__ == "__main__":
    main()
