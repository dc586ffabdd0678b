#!/usr/bin/env bash
# Issue 30 step 53 (prepared, NOT yet run on a GPU; README.md here), call 1 on one H100 or
# H200: D (wgmma descriptors by offset) against M (main aca09de), builds from build.sh.
# Proves, through ../folded-scales/call1.sh with BUILDS="M D" G=D:
#  - the same bits at prime chunks 512 and 37, and every arm and serve at N = 2 (same.txt);
#    prefill512 M and D alternating (prefill.txt); microseconds a launch (prof.txt); D's
#    gates at N = 1..8 with chunks 512 and 37, the planted fault, a soak (gates.txt, soak.txt);
#  - chunked prefill at 64 and 37 rows, M and D alternating, two rounds (chunks.txt);
#  - every op's microseconds in D's 512-row prefill, attention and norms too (prof-all.txt).
#   OUT=DIR bash receipts/prefill-cuda/desc-offset/call1.sh     [DEADLINE=seconds, default 300]
set -u
OUT=${OUT:?}
B=.stage/bin
DEADLINE=${DEADLINE:-300} BUILDS="M D" G=D OUT=$OUT bash receipts/prefill-cuda/folded-scales/call1.sh > /dev/null 2>&1
rm -f "$OUT/speed.txt" "$OUT/llama-build-tail.txt"
scripts/prefill-chunks.sh M D > "$OUT/chunks.txt"
M8=/tmp/ab/l8q4k.gguf
# Every op of a 512-row prefill, not only the GEMMs (what the rest of the layer costs now).
PPN_CUDA_PROF=1 timeout 40 $B/D bench --backend cuda --model $M8 --arms prime --chunk 512 \
  --prompt-len 512 > "$OUT/prof-all.txt" 2>&1
cat "$OUT/prefill.txt" "$OUT/same.txt" "$OUT/gates.txt" "$OUT/chunks.txt"; tail -3 "$OUT/soak.txt"
