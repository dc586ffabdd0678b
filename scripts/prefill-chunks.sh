#!/usr/bin/env bash
# Chunked prefill of several builds alternating, on the GPU machine: for two rounds, at 64 and
# then 37 rows a chunk, each build's `bench --arms prime --chunk C --prompt-len 512` prefill
# line, as "chunk C NAME: ..." on stdout. Proves how a candidate GEMM moves the chunked
# prefill (the launches the wgmma GEMM's pick rule sends elsewhere, or gives ragged blocks)
# beside the build it would replace, in one call. The model is the 8B shape's 8-layer Q4_K
# slice scripts/decode-ab.sh synthesized (MODEL=another file); the builds are .stage/bin/NAME,
# so it runs from the repository root. Used by the receipts' call scripts under
# receipts/prefill-cuda/.
#   scripts/prefill-chunks.sh NAME [NAME ...] > chunks.txt      [MODEL=/tmp/ab/l8q4k.gguf]
set -u
[ $# -ge 1 ] || { echo "usage: $0 NAME [NAME ...]" >&2; exit 2; }
model=${MODEL:-/tmp/ab/l8q4k.gguf}
for round in 1 2; do
  for c in 64 37; do
    for n in "$@"; do
      timeout 40 .stage/bin/"$n" bench --backend cuda --model "$model" --arms prime --chunk $c \
        --prompt-len 512 2>&1 | grep -E 'prefill +\(' | sed "s/^/chunk $c $n: /"
    done
  done
done
