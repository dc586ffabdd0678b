#!/usr/bin/env bash
# Issue 30 step 61, call 4 (what call 3 asked, with the builds made alike): M = febdf20's
# build and C2 = febdf20 + two-blocks-not-q8.patch, both by scripts/build-variant.sh (so the
# control l8q4k, whose token runs no one-row mvq launch, shows what the builds alone differ
# by). Bits (every arm and serve at N = 2 on smol) and decode-only eager of M and C2
# alternating, two rounds, on smol, gemq4km, l8q4k and l8q8 (`c4.out`); then, in the same
# call, the CUDA shape sweep on M (scripts/shape-sweep.py, seed 7; its seven findings, every
# one a width the matvec does not walk refused mid-run, led to 2c35475).
#   bash scripts/build-variant.sh M febdf20; bash scripts/build-variant.sh C2 febdf20 \
#     receipts/decode-profile-cuda/warm-pass/two-blocks-not-q8.patch
#   OUT=DIR bash receipts/decode-profile-cuda/warm-pass/call4.sh     [.stage carried]
set -u
OUT=${OUT:?}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
mkdir -p $OUT/c4
SAME="smol:auto" SPEED="smol gemq4km l8q4k l8q8" SPEED_ARGS="--arms eager --steps 128" ROUNDS=2 OUT=$OUT/c4 \
  timeout 200 scripts/decode-ab.sh M=.stage/bin/M C2=.stage/bin/C2 > $OUT/c4.out 2>&1
echo "ab exit $?"; cat $OUT/c4/same.txt; grep -h "eager " $OUT/c4/speed.txt
.stage/bin/M --version
python3 scripts/shape-sweep.py .stage/bin/M --backend cuda --out /tmp/shapes --models 300 --seed 7 \
  --budget-s 300 > $OUT/shapes.out 2>&1
echo "shapes exit $?"
cp /tmp/shapes/summary.txt /tmp/shapes/refusals.txt /tmp/shapes/findings.txt $OUT/
tail -1 $OUT/summary.txt
