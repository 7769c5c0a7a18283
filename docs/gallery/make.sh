#!/usr/bin/env bash
# Regenerate the gallery: every picture here is a still that attnviz draws itself.
#   bash docs/gallery/make.sh            (from the repository root)
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
