#!/usr/bin/env bash
# Issue 30, step 14, call 4 on one H200: the fold in its own modules (G, 701b4d6: only engines
# of post-norm models build the MVQ_PRE modules; every other kernel is the one before the
# fold) against O (9917b9f, before the fold; F, 797ce72, the fold in every one-row kernel,
# cost the SmolLM2 shape 2 % in call 1 and `../head-prefetch/`). Proves
# (scripts/decode-ab.sh): every arm and serve at N = 2 `diff` same against O on gemq4km and
# smol (g-same.txt); eager and B=8 of both builds alternating twice on smol and gemq4km
# (g-speed.txt). (Two builds and two files: the session's last device minutes.)
# From the repository root, with .stage/ carried: OUT=DIR bash THIS
set -u
SAME="smol:auto gemq4km:auto" SPEED="smol gemq4km" ROUNDS=2 \
  scripts/decode-ab.sh O=.stage/bin/ppn-gate-old G=.stage/bin/ppn-gate-g > /tmp/ab.log 2>&1
echo "decode-ab exit $?"
mv $OUT/same.txt $OUT/g-same.txt; mv $OUT/speed.txt $OUT/g-speed.txt; rm -f $OUT/prefill.txt
cat $OUT/g-same.txt; grep eager $OUT/g-speed.txt
