#!/usr/bin/env bash
# Issue 30, after step 18 (one H200): where a B=8 step's time goes on the narrow files, per op,
# on the FFMA kernels (--mma auto) and on the tensor cores (--mma on), for a per-matrix rule
# (BENCH.md step 12: "a per-matrix rule must come from measuring those, matrix by matrix").
# PPN_CUDA_PROF prints one block per engine: the reference's (one row a step) and the batched
# arm's (8 rows a step). prof-b8.txt.
# Run: OUT=DIR bash receipts/decode-profile-cuda/vocab-head/call4.sh  (the build in .stage/bin)
set -u
OUT=${OUT:?}
B=.stage/bin/ppn-gate-n5
. scripts/shapes.sh
mkdir -p /tmp/ab
for m in gem gemq4km smol; do
  [ -f /tmp/ab/$m.gguf ] || $B synth ${SHAPES[$m]} -o /tmp/ab/$m.gguf > /dev/null
  for mm in auto on; do
    echo "=== $m --mma $mm: PPN_CUDA_PROF=1 bench --arms batched --batch 8 --steps 64"
    PPN_CUDA_PROF=1 $B bench --backend cuda --model /tmp/ab/$m.gguf --mma $mm --arms batched --batch 8 --steps 64 2>&1 \
      | grep -E "cuda prof|eager  |batched  "
  done
done > "$OUT/prof-b8.txt" 2>&1
