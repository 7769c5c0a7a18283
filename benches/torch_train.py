#!/usr/bin/env python3
"""The model and task of `attnviz train` in PyTorch (not a test): a hyper-parameter probe,
and one training step of attnviz beside PyTorch's for the same model, batch and threads.

Run from the repository, in the venv of torch_common.py (PyTorch CPU):

    python benches/torch_train.py probe [--steps 3000 --lr 3e-3 --warmup 100 ...]
    python benches/torch_train.py probe --data periodic --lr 2e-3 --steps 10000 --eval 500
    python benches/torch_train.py bench [--threads 2 --rounds 3]   # after cargo build --release

The model is attnviz's (src/train/): GPT-2 blocks (pre-LayerNorm, causal attention, tanh
GELU MLP of 4 d_model, final LayerNorm, tied unembedding, learned positions), init
N(0, 0.02) with the residual projections at 0.02 / sqrt(2 layers), AdamW (betas 0.9, 0.95,
weight decay on matrices and embeddings only), clipping of the global gradient norm at 1,
linear warm-up then cosine decay to a tenth. The task is the induction task: uniform random
tokens in which a span of random length L in [4, context/2] is repeated at a random later
offset. `probe` prints the losses and the head scores on a fixed probe (32 distinct tokens,
then the same 32 again) every --eval steps, as `attnviz train --json` does.

`bench`: `attnviz train --bench-steps` (its own median of timed steps) and PyTorch's step
(forward, backward, clip, AdamW; SDPA's causal attention) run alternately --rounds times;
the medians and the ratio PyTorch ms / attnviz ms (above 1: attnviz is faster) and the CPU.
"""

import argparse
import json
import math
import statistics
import subprocess
import time

from torch_common import attnviz_release, cpu_model, import_torch, median_ms, set_threads

torch = import_torch()
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


class Block(nn.Module):
    def __init__(self, d, h, layers):
        super().__init__()
        self.h = h
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)
        for lin in (self.qkv, self.proj, self.fc, self.out):
            nn.init.normal_(lin.weight, std=0.02)
            nn.init.zeros_(lin.bias)
        for lin in (self.proj, self.out):
            nn.init.normal_(lin.weight, std=0.02 / math.sqrt(2 * layers))
        self.keep = False
        self.attn = None

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.h, d // self.h).transpose(1, 2) for z in (q, k, v))
        if self.keep:
            s = (q @ k.transpose(-1, -2)) / math.sqrt(d // self.h)
            s = s.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), 1), float("-inf"))
            self.attn = s.softmax(-1)
            y = self.attn @ v
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class Model(nn.Module):
    def __init__(self, vocab, ctx, d, h, layers):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(ctx, d)
        nn.init.normal_(self.wte.weight, std=0.02)
        nn.init.normal_(self.wpe.weight, std=0.02)
        self.blocks = nn.ModuleList(Block(d, h, layers) for _ in range(layers))
        self.lnf = nn.LayerNorm(d)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for b in self.blocks:
            x = b(x)
        return self.lnf(x) @ self.wte.weight.T


def induction_batch(g, batch, ctx, vocab, min_span=4, max_span=None):
    x = torch.randint(vocab, (batch, ctx + 1), generator=g)
    rep = torch.zeros(batch, ctx, dtype=torch.bool)
    for i in range(batch):
        n = ctx + 1
        span = int(torch.randint(min_span, (max_span or ctx // 2) + 1, (1,), generator=g))
        a = int(torch.randint(0, n - 2 * span + 1, (1,), generator=g))
        b = int(torch.randint(a + span, n - span + 1, (1,), generator=g))
        x[i, b:b + span] = x[i, a:a + span]
        rep[i, b:b + span - 1] = True  # targets b+1 .. b+span-1 sit at positions b .. b+span-2
    return x[:, :-1], x[:, 1:], rep


def periodic_batch(g, batch, ctx, vocab, min_period=4, max_period=None):
    """The copy allowed to overlap its original: from a random start s, every token repeats
    the one `period` places back (period random in [4, context/2]), so the sequence is
    periodic from s on and every target after the first period is predictable."""
    n = ctx + 1
    x = torch.randint(vocab, (batch, n), generator=g)
    rep = torch.zeros(batch, ctx, dtype=torch.bool)
    for i in range(batch):
        p = int(torch.randint(min_period, (max_period or ctx // 2) + 1, (1,), generator=g))
        s = int(torch.randint(0, n - 2 * p + 1, (1,), generator=g))
        for j in range(s + p, n):
            x[i, j] = x[i, j - p]
        rep[i, s + p:] = True
    return x[:, :-1], x[:, 1:], rep


def optimizer(model, lr, wd):
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    keep = [p for n, p in model.named_parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": wd},
                              {"params": keep, "weight_decay": 0.0}],
                             lr=lr, betas=(0.9, 0.95), eps=1e-8)


def lr_at(step, a):
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    p = (step - a.warmup) / max(1, a.steps - a.warmup)
    return a.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, p))))


def head_scores(model, probe):
    for b in model.blocks:
        b.keep = True
    with torch.no_grad():
        model(probe[None])
    out = []
    half = probe.shape[0] // 2
    for l, b in enumerate(model.blocks):
        a = b.attn[0]
        b.keep = False
        n = a.shape[-1]
        i = torch.arange(1, n)
        prev = a[:, i, i - 1].mean(-1)
        j = torch.arange(half, n)
        ind = a[:, j, j - half + 1].mean(-1)
        out.append((prev.tolist(), ind.tolist()))
    return out


def probe(a):
    torch.manual_seed(a.seed)
    set_threads(a.threads)
    g = torch.Generator().manual_seed(a.seed)
    m = Model(a.vocab, a.context, a.d_model, a.heads, a.layers)
    if a.init_std != 0.02:
        for p in m.parameters():
            if p.dim() >= 2:
                nn.init.normal_(p, std=a.init_std)
    opt = optimizer(m, a.lr, a.wd)
    half = a.context // 2
    first = torch.randperm(a.vocab, generator=g)[:half]
    probe_seq = torch.cat([first, first])
    t0 = time.perf_counter()
    for step in range(a.steps + 1):
        if step % a.eval == 0 or step == a.steps:
            x, y, rep = induction_batch(g, 64, a.context, a.vocab)
            with torch.no_grad():
                ls = F.cross_entropy(m(x).reshape(-1, a.vocab), y.reshape(-1), reduction="none")
            r = rep.reshape(-1)
            sc = head_scores(m, probe_seq)
            print(json.dumps({
                "step": step, "loss": round(ls.mean().item(), 4),
                "loss_repeated": round(ls[r].mean().item(), 4),
                "loss_other": round(ls[~r].mean().item(), 4),
                "prev_token": [round(max(p), 3) for p, _ in sc],
                "induction": [round(max(q), 3) for _, q in sc],
                "s": round(time.perf_counter() - t0, 1)}), flush=True)
        if step == a.steps:
            break
        for grp in opt.param_groups:
            grp["lr"] = lr_at(step, a)
        if a.data == "periodic":
            x, y, _ = periodic_batch(g, a.batch, a.context, a.vocab, a.min_span, a.max_span)
        else:
            x, y, _ = induction_batch(g, a.batch, a.context, a.vocab, a.min_span, a.max_span)
        loss = F.cross_entropy(m(x).reshape(-1, a.vocab), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()


def torch_step_ms(a):
    torch.manual_seed(0)
    set_threads(a.threads)
    g = torch.Generator().manual_seed(0)
    m = Model(a.vocab, a.context, a.d_model, a.heads, a.layers)
    opt = optimizer(m, a.lr, a.wd)
    x, y, _ = induction_batch(g, a.batch, a.context, a.vocab)

    def step():
        loss = F.cross_entropy(m(x).reshape(-1, a.vocab), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()

    return median_ms(step, a.timed, warm_up_calls=5)[0]


def attnviz_step_ms(a):
    cmd = [attnviz_release(), "train", "--bench-steps", str(a.timed), "--threads", str(a.threads),
           "--layers", str(a.layers), "--heads", str(a.heads), "--d-model", str(a.d_model),
           "--context", str(a.context), "--vocab", str(a.vocab), "--batch", str(a.batch),
           "--json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["ms_per_step"]


def bench(a):
    rows = {"attnviz": [], "pytorch": []}
    for r in range(a.rounds):
        order = [("attnviz", attnviz_step_ms), ("pytorch", torch_step_ms)]
        if r % 2:
            order.reverse()
        for name, f in order:
            rows[name].append(f(a))
    at, pt = statistics.median(rows["attnviz"]), statistics.median(rows["pytorch"])
    print(f"CPU: {cpu_model()}; torch {torch.__version__}")
    print(f"model: {a.layers} layers, d_model {a.d_model}, {a.heads} heads, context {a.context}, "
          f"vocab {a.vocab}, batch {a.batch}, {a.threads} threads, AdamW fp32")
    print(f"attnviz {at:.1f} ms/step  PyTorch {pt:.1f} ms/step  PyTorch/attnviz {pt / at:.2f}x")
    print(f"rounds: attnviz {rows['attnviz']}  pytorch {[round(t, 1) for t in rows['pytorch']]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["probe", "bench"])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--context", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=64)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--wd", type=float, default=0.01)
    ap.add_argument("--eval", type=int, default=250)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--min-span", type=int, default=4)
    ap.add_argument("--max-span", type=int, default=None)
    ap.add_argument("--init-std", type=float, default=0.02)
    ap.add_argument("--data", choices=["span", "periodic"], default="span",
                    help="probe: train on attnviz's task (span) or on periodic sequences "
                         "(--min-span/--max-span bound the period); evaluation is always "
                         "on attnviz's task")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--timed", type=int, default=20)
    a = ap.parse_args()
    probe(a) if a.mode == "probe" else bench(a)


if __name__ == "__main__":
    main()
