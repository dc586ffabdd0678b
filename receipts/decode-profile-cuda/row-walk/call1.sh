#!/usr/bin/env bash
# Issue 30 step 27, call 1: the walk decode (one warp walks every super-block of its m-tiles in
# order, the next one's weights loaded under this one's compute; no shared memory, no barrier).
# Builds (.stage/bin): O = b655698 (main's kernels); W = O + probe.patch without its
# PPN_STAGE1 parts (those came in call 2); W1..W5 = W with
# PPN_WALK selecting which Q4_K decode launches (rows <= 8) walk: W1 gate|up; W2 + head (2
# m-tiles a warp); W3 + q|k|v, head on 1 m-tile a warp; W4 + o (n_sb <= 16); W5 + down.
# Proves: eager and B=8 speed (c1-speed.txt), per-op times of O and W5 (c1-prof.txt). Its
# same.txt did not come back: the second decode-ab.sh below, run into the same OUT, started it
# afresh; call2.sh checks the bits (SW4 walks every launch but down).
set -u
nvidia-smi -L
SAME="l8q4k:auto l4m:on" SPEED="" OUT=$OUT scripts/decode-ab.sh O=.stage/bin/O W2=.stage/bin/W2 W5=.stage/bin/W5
cat $OUT/same.txt
SAME="" SPEED="l8q4k l32" ROUNDS=2 PROF=1 OUT=$OUT scripts/decode-ab.sh O=.stage/bin/O W1=.stage/bin/W1 W2=.stage/bin/W2 W3=.stage/bin/W3 W4=.stage/bin/W4 W5=.stage/bin/W5
grep -v floor $OUT/speed.txt; grep -E 'prof stage' $OUT/prof.txt | head -40
