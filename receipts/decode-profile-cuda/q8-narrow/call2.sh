#!/usr/bin/env bash
# One GPU: the Q8_0 one-row matvec asking L2 for its rounds ahead (issue 30, step 41). O =
# .stage/bin/C (main fda963b), P2 and P4 = the step's tree with MVQ_PF 2 and 4 (rounds a
# warp's walk prefetches ahead of its loads). Proves, with scripts/decode-ab.sh: same.txt,
# P2's and P4's receipts `diff` same as O's on every arm and serve at N = 2 (l8q8 under --mma
# off and auto, the narrow Q8_0 shapes qw05 and q3 under off); speed.txt, decode-only eager
# tok/s (the bench table's eager), builds alternating twice; prof.txt, per-op microseconds of
# O and P4.
set -u
OUT=${OUT:?}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
SAME="l8q8:off l8q8:auto qw05:off q3:off" SPEED="l8q8 qw05 q3" SPEED_ARGS="--arms eager --steps 128" \
  ROUNDS=2 PROF=1 timeout ${DEADLINE_S:-540} scripts/decode-ab.sh O=.stage/bin/C P2=.stage/bin/P2 P4=.stage/bin/P4
echo "decode-ab exit $?"
