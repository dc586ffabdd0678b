#!/usr/bin/env bash
# One GPU: the two-ahead one-row walk (issue 30, step 42). O = .stage/bin/C (main fda963b's
# engine), R = the step's tree (mvq_r2 for the one-row launches of two rows a warp that fill
# at most two blocks an SM: the 8B shape's o and down). Proves, with scripts/decode-ab.sh:
# same.txt, R's receipts `diff` same as O's on every arm and serve at N = 2 (l8q8 under
# --mma off: Q8_0; l4m under off: Q4_K and Q6_K); speed.txt, decode-only eager tok/s on l8q8
# (the bench table's eager), builds alternating twice; prof.txt, per-op microseconds.
# (The files are committed in call3/.)
set -u
OUT=${OUT:?}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
SAME="l8q8:off l4m:off" SPEED="l8q8" SPEED_ARGS="--arms eager --steps 128" \
  ROUNDS=2 PROF=1 timeout ${DEADLINE_S:-200} scripts/decode-ab.sh O=.stage/bin/C R=.stage/bin/R
echo "decode-ab exit $?"
