#!/usr/bin/env bash
# One GPU (issue 30, step 44, not kept): the dense head walk (mvq_d8) dealt as a snake. O =
# main 987646d's build; S = the same with tried.patch (odd rows' units dealt from their last,
# kernels/mvq.cu mvd_unit, and each value stored at its position). Proves:
#  - ncu-O/, ncu-S/ (scripts/ncu-sectors.sh, the head launches only): the shared-load bank
#    conflicts of the head on the Gemma-3 Q4_K_M mix (Q8_0 head, 20 units a row) and the
#    SmolLM2 shape (Q4_1, 18 units), O against S, and each launch's us;
#  - same.txt (scripts/decode-ab.sh): S's receipts `diff` same as O's on every arm and serve
#    at N = 2 on the three files under --mma off (the head on the dense walk);
#  - speed.txt: decode-only eager on the two Gemma-3 files, builds alternating twice;
#  - prof.txt (PROF=1): each launch kind's us, O against S (events around each launch,
#    graphs off), on the same two files.
# Run: OUT=DIR receipts/decode-profile-cuda/snake-head/call1.sh (from the repo root; NCU_CASES,
# SAME, SPEED, ROUNDS and PROF override the parts above, for a call with less device time).
# As run (2026-12-06, one H100, the session's last 360 s of device time): NCU_CASES=
# gemq4km:eager:0:mvq_d8 SAME="gemq4km:off smol:off" SPEED=gemq4km ROUNDS=2 PROF=0; then on the
# same warm machine `SAME= SPEED="gemq4km gem smol" SPEED_ARGS="--arms eager --steps 128"
# ROUNDS=1 PROF=1 scripts/decode-ab.sh O=.stage/bin/O S=.stage/bin/S` (prof.txt) and the same
# with ROUNDS=2 and no PROF (speed.txt holds all three).
set -u
OUT=${OUT:?}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
C=${NCU_CASES:-"gemq4km:eager:0:mvq_d8 smol:eager:0:mvq_d8"}
for b in O S; do
  CASES="$C" OUT=$OUT/ncu-$b timeout 150 scripts/ncu-sectors.sh .stage/bin/$b > /dev/null 2>&1
  echo "ncu $b exit $?"; cat $OUT/ncu-$b/sectors.txt | grep -v "ncu exit"
done
SAME=${SAME:-"gemq4km:off gem:off smol:off"} SPEED=${SPEED:-"gemq4km gem"} SPEED_ARGS="--arms eager --steps 128" \
  ROUNDS=${ROUNDS:-2} PROF=${PROF:-1} \
  timeout ${DEADLINE_S:-330} scripts/decode-ab.sh O=.stage/bin/O S=.stage/bin/S
echo "decode-ab exit $?"
cat $OUT/same.txt; cat $OUT/speed.txt; grep -iE "head|mvq_d8|^#|file" $OUT/prof.txt | head -20
