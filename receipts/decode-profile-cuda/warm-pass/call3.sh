#!/usr/bin/env bash
# Issue 30 step 60, call 3 (prepared 2026-12-07, not run: the session's device time ran out):
# is C's narrow gain the launch bounds, or the builds? Call 2's l8q4k, whose kernels C did
# not change, read +3.2 % for C, so H (main 48713a7 built last session in the main tree) and
# C (build-variant.sh) differ by more than their kernels. Here H2 = main built by
# build-variant.sh as C is, and C2 = two-blocks-not-q8.patch (2 blocks an SM for every
# one-row format but Q8_0, whose 4096-wide launches lost 17-19 % a launch at 2). Proves:
# bits (smol, every arm and serve at N = 2), and decode-only eager of H, C, H2, C2
# alternating, two rounds, on smol, gemq4km, l8q4k (the control) and l8q8.
#   bash scripts/build-variant.sh H2 HEAD; bash scripts/build-variant.sh C2 HEAD \
#     receipts/decode-profile-cuda/warm-pass/two-blocks-not-q8.patch   (and H, C: build.sh)
#   OUT=DIR bash receipts/decode-profile-cuda/warm-pass/call3.sh
set -u
OUT=${OUT:?}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
mkdir -p $OUT/c3
SAME="smol:auto" SPEED="smol gemq4km l8q4k l8q8" SPEED_ARGS="--arms eager --steps 128" ROUNDS=2 OUT=$OUT/c3 \
  timeout 300 scripts/decode-ab.sh H=.stage/bin/H C=.stage/bin/C H2=.stage/bin/H2 C2=.stage/bin/C2 > $OUT/c3.out 2>&1
echo "exit $?"; cat $OUT/c3/same.txt; grep -h "eager " $OUT/c3/speed.txt
