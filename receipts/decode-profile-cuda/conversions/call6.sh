#!/usr/bin/env bash
# Issue 30 step 26, call 6: what the prefill GEMM's A build and lo mma cost. Builds
# (.stage/bin): N = 534ca29 (the kept tree); P = N with probe-gemm.patch (-DPPN_PROBE from the
# environment; wrong bits, timing only); GL, GD, GA = P with PPN_PROBE=2 (the GEMM without its
# lo mma), 4 (without its dequant: A = the raw nibble words), 6 (both).
# Proves: prefill512 tok/s of each on the 8B l8 Q4_K slice, builds alternating (call6-prefill.txt).
set -u
. scripts/shapes.sh
mkdir -p /tmp/ab
.stage/bin/N synth ${SHAPES[l8q4k]} -o /tmp/ab/l8q4k.gguf > /dev/null
for r in 1 2; do for b in N GL GD GA; do
  echo "l8q4k $b: $(.stage/bin/$b bench --backend cuda --model /tmp/ab/l8q4k.gguf --arms prime --chunk 512 --prompt-len 512 2>&1 | grep -E 'prefill ')"
done; done | tee $OUT/prefill.txt
