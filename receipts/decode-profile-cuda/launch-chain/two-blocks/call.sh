#!/usr/bin/env bash
# Step 22, probe 4. Builds: O = 0e05443; N2 = O with n2.patch (mma_decode_f16 at
# __launch_bounds__(512, 2): 64 registers, 16 bytes spilled, two blocks an SM); N3 = O with
# n3.patch (that, and mma_decode_f8 at (256, 4): 64 registers, 20 bytes spilled). Proves: bits, speeds, per-op times.
set -u
SAME="l8q4k:auto l4m:on" SPEED="l8q4k l32 l70" ROUNDS=2 PROF=1 OUT=$OUT scripts/decode-ab.sh O=.stage/bin/O N2=.stage/bin/N2 N3=.stage/bin/N3
cat $OUT/same.txt; grep -v floor $OUT/speed.txt | grep eager; grep -E 'prof stage' $OUT/prof.txt; rm -f $OUT/prefill.txt
