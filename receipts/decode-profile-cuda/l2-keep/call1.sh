#!/usr/bin/env bash
# One GPU (issue 30, step 46 probe): do the narrow models' layer weights, kept in L2 across
# tokens, shorten their launch-bound decode? Every token streams all weights once: SmolLM2's
# and Gemma-3's layers are ~66-70 MB, their heads 18 and 178 MB, the L2 50 MB, so under LRU
# no line of a layer survives to the next token. tried.patch (timing only: the same loads,
# an L2 eviction hint on each 16-byte quant load) marks a fraction F of the layer matrices'
# lines evict_last and the rest evict_first (createpolicy.fractional), and the dense head
# walk's evict_first. O = main ee56862's build, P4 and P6 = tried.patch with F = 0.4 and
# 0.65. Proves (scripts/decode-ab.sh):
#  - same.txt: P4's and P6's receipts `diff` same as O's on every arm and serve at N = 2 on
#    the SmolLM2 shape (--mma off) and the Gemma-3 Q4_K_M mix (auto);
#  - speed.txt: decode-only eager of O, P4, P6 alternating twice on smol, gemq4km and l8q8
#    (the Q8_0 row, 2.4 GB a token: where F of the weights cannot stay).
# Run: OUT=DIR receipts/decode-profile-cuda/l2-keep/call1.sh (from the repo root). As run
# (2026-12-06, one H100, `nvidia-h100-x1`, driver 580.159.04): as written, 92 s; P4 and P6
# built from tried.patch (F = 0.4 as in the patch; P6 with its MVQ_L2F set to 0.65f).
set -u
OUT=${OUT:?}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
SAME=${SAME-"smol:off gemq4km:auto"} SPEED=${SPEED-"smol gemq4km l8q8"} SPEED_ARGS="--arms eager --steps 128" \
  ROUNDS=2 timeout 400 scripts/decode-ab.sh O=.stage/bin/N P4=.stage/bin/P4 P6=.stage/bin/P6 > /tmp/ab-out.txt 2>&1
echo "decode-ab exit $?"; tail -3 /tmp/ab-out.txt
cat $OUT/same.txt; grep -v floor $OUT/speed.txt
