#!/usr/bin/env bash
# Regenerate the gallery: every picture here is drawn by attnviz itself, the stills with
# `attnviz snapshot`, the animations with `attnviz play --record` (headless, on the
# virtual clock: the same bytes on every run with the same fonts).
#   bash docs/gallery/make.sh            (from the repository root)
# The Chinese GIF draws its characters with a CJK font found on the system (or the one
# in ATTNVIZ_CJK_FONT); without one attnviz warns and draws them as boxes.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --quiet
bin=target/debug/attnviz
out=docs/gallery
"$bin" snapshot intro --step 6 --svg "$out/intro-softmax.svg"
"$bin" snapshot causal-mask --step 3 --lang zh --svg "$out/causal-mask-zh.svg"
"$bin" snapshot multi-head --step 3 --svg "$out/multi-head-heads.svg"
"$bin" snapshot sinusoidal --step 2 --svg "$out/sinusoidal-position.svg"
"$bin" snapshot alibi --step 2 --size 120x36 --theme light --svg "$out/alibi-light.svg"
"$bin" snapshot intro --step 5 --txt "$out/intro-scores.txt"

font=()
if [[ -n "${ATTNVIZ_CJK_FONT:-}" ]]; then font=(--font "$ATTNVIZ_CJK_FONT"); fi
"$bin" play flash-tiling --record "$out/flash-tiling.svg"
"$bin" play flash-tiling --record "$out/flash-tiling.gif"
"$bin" play flash2-loop-order --record "$out/flash2-loop-order.svg"
"$bin" play kv-cache --lang zh --record "$out/kv-cache-zh.svg"
"$bin" play kv-cache --lang zh --record "$out/kv-cache-zh.gif" "${font[@]}"

# Lessons on trained models, where the two small models are (tests/data/models/fetch.sh).
if "$bin" model info SmolLM2-135M-Instruct.Q4_1 >/dev/null 2>&1; then
  "$bin" snapshot attention-sinks --step 2 --size 120x40 --svg "$out/attention-sinks.svg"
  "$bin" play induction-real --record "$out/induction-real.svg"
else
  echo "make.sh: SmolLM2 not found; the trained-model pictures were left as they are" >&2
fi
