"""Reference dequantizations for src/model/quant_tests.rs, made with gguf-py.

For every type attnviz dequantizes except F32 this writes <TYPE>.bin, random raw blocks,
and <TYPE>.f32, gguf-py's dequantized values as little-endian f32. The bytes are uniform
random except the f16 scale fields ("d", "dmin", "m"), which are set to random finite
halves in [-2, 2] so every output is finite. Run from anywhere with
    /work/venv/py/bin/python tests/data/quant/make_fixtures.py
"""

from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize

OUT = Path(__file__).resolve().parent
BLOCKS = 4
FLOAT_ELEMS = 64

# type: (block bytes, byte offsets of its f16 scale fields), per ggml-common.h.
BLOCK_TYPES = {
    "Q8_0": (34, [0]),
    "Q4_0": (18, [0]),
    "Q4_1": (20, [0, 2]),
    "Q5_0": (22, [0]),
    "Q5_1": (24, [0, 2]),
    "Q2_K": (84, [80, 82]),
    "Q3_K": (110, [108]),
    "Q4_K": (144, [0, 2]),
    "Q5_K": (176, [0, 2]),
    "Q6_K": (210, [208]),
    "IQ4_NL": (18, [0]),
    "IQ4_XS": (136, [0]),
}


def float_bytes(rng: np.random.Generator, name: str) -> np.ndarray:
    """Random finite bit patterns (subnormals included) of FLOAT_ELEMS halves or bfloats."""
    bits = rng.integers(0, 1 << 16, size=FLOAT_ELEMS, dtype=np.uint16)
    exp_all_ones = np.uint16(0x7C00 if name == "F16" else 0x7F80)
    bits = np.where((bits & exp_all_ones) == exp_all_ones, bits ^ exp_all_ones, bits)
    return bits.astype("<u2").view(np.uint8)


def block_bytes(rng: np.random.Generator, size: int, scales: list[int]) -> np.ndarray:
    raw = rng.integers(0, 256, size=(BLOCKS, size), dtype=np.uint8)
    for off in scales:
        h = rng.uniform(-2.0, 2.0, size=BLOCKS).astype("<f2")
        raw[:, off : off + 2] = h.view(np.uint8).reshape(BLOCKS, 2)
    return raw.reshape(-1)


def main() -> None:
    rng = np.random.default_rng(20261204)
    names = ["F16", "BF16", *BLOCK_TYPES]
    for name in names:
        if name in BLOCK_TYPES:
            raw = block_bytes(rng, *BLOCK_TYPES[name])
        else:
            raw = float_bytes(rng, name)
        y = np.asarray(dequantize(raw, T[name]), dtype=np.float32).reshape(-1)
        assert np.all(np.isfinite(y)), name
        (OUT / f"{name}.bin").write_bytes(raw.tobytes())
        (OUT / f"{name}.f32").write_bytes(y.astype("<f4").tobytes())
        print(f"{name}: {raw.size} bytes -> {y.size} values")


if __name__ == "__main__":
    main()
