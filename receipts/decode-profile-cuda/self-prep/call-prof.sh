#!/usr/bin/env bash
# Issue 30 step 24, second call: PPN_CUDA_PROF per op (events around each launch, graphs off)
# of O2 and N3 on the 8B l8 Q4_K slice: where the self-preparing decode's time went.
set -u
. scripts/shapes.sh
mkdir -p /tmp/ab $OUT
.stage/bin/N3 synth ${SHAPES[l8q4k]} -o /tmp/ab/l8q4k.gguf > /dev/null
for b in O2 N3; do
  echo "=== $b l8q4k: PPN_CUDA_PROF=1 bench --arms pipelined --steps 64"
  PPN_CUDA_PROF=1 .stage/bin/$b bench --backend cuda --model /tmp/ab/l8q4k.gguf --arms pipelined --steps 64 2>&1 \
    | grep -E "cuda prof stage|eager  " | awk '!seen[$0]++' | head -8
done | tee $OUT/prof.txt
