#!/usr/bin/env bash
# Issue 30 step 60, call 2 (run 2026-12-07 on the same warm H100, right after call 1): C
# (the one-row mvq kernels at 2 blocks an SM) against H on more files, to see where call 1's
# C gain and loss come from. Proves (call2/same.txt, speed.txt, prof.txt): C's bits are H's
# on the Gemma-3 Q5_0 twin and the 8B Q8_0 slice (every arm and serve at N = 2); decode-only
# eager of H and C alternating, two rounds, on smol, gem, gemq4km, l8q8, l8q4k; per op
# (PPN_CUDA_PROF, graphs off) for both. l8q4k runs no one-row mvq launch (all its matrices
# on the integer decode), so its kernels are byte for byte H's: its figure is the control.
#   OUT=DIR bash receipts/decode-profile-cuda/warm-pass/call2.sh
set -u
OUT=${OUT:?}
mkdir -p $OUT/c2
SAME="gem:auto l8q8:auto" SPEED="smol gem gemq4km l8q8 l8q4k" SPEED_ARGS="--arms eager --steps 128" \
  ROUNDS=2 PROF=1 OUT=$OUT/c2 timeout 400 scripts/decode-ab.sh H=.stage/bin/H C=.stage/bin/C > $OUT/c2.out 2>&1
echo "exit $?"; cat $OUT/c2/same.txt; grep -h "eager " $OUT/c2/speed.txt
