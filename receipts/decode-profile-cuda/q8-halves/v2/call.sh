#!/usr/bin/env bash
# One GPU: step 43's cursor without a spill. N = dbe7234's build (Cur::nu: the one-row
# two-rows-a-warp Q8_0 kernel, mvq_w2, spilled 16 bytes at its 80 registers, ptxas);
# V2 = the same layout with the second halves' offsets packed into Cur::lane (no spill).
# Proves (scripts/decode-ab.sh): same.txt, V2's receipts `diff` same as N's on every arm and
# serve at N = 2 on l8q8, qw05 (a partial round) and the Gemma-3 Q4_K_M mix (the dense
# walk's Q8_0 head), all under --mma off; speed.txt, decode-only eager on l8q8, alternating.
set -u
OUT=${OUT:?}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
SAME="l8q8:off qw05:off gemq4km:off" SPEED="l8q8" SPEED_ARGS="--arms eager --steps 128" ROUNDS=2 \
  timeout ${DEADLINE_S:-200} scripts/decode-ab.sh N=.stage/bin/N V2=.stage/bin/V2
echo "decode-ab exit $?"
