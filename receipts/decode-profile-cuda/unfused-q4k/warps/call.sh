#!/usr/bin/env bash
# Issue 30 step 25: with Q4_K's one-row launches unfused (0ae9744 = O2), which block
# size should they take? P8 / P16: the probe build (warps.patch) forcing 8 or 16 warps on
# every one-row Q4_K launch (timing only; both compute THE ORDER). Eager and B=8, alternating.
set -u
SAME="" SPEED="l8q4k l32" ROUNDS=2 OUT=$OUT scripts/decode-ab.sh O2=.stage/bin/O2 P8=.stage/bin/P8 P16=.stage/bin/P16
grep eager $OUT/speed.txt
