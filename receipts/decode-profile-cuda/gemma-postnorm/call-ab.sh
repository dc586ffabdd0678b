#!/usr/bin/env bash
# A/B: add_residual block-per-row (N) vs warp-per-row (O): same bits, speed on the Gemma shapes.
set -u
OUT=$OUT SAME="gem:auto gemq4km:auto gemq4km:on" SPEED="gemq4km gem" PREFILL="gem" ROUNDS=2 PROF=1 \
  bash scripts/decode-ab.sh O=.stage/bin/ppn-gate-old N=.stage/bin/ppn-gate > $OUT/log.txt 2>&1
echo "rc $?"
cat $OUT/same.txt; cat $OUT/speed.txt | grep -v floor; cat $OUT/prefill.txt; grep -E "post-norm|eager  " $OUT/prof.txt
