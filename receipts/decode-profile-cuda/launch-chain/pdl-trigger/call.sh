#!/usr/bin/env bash
# Step 22, probe 5. Builds: O = 0e05443; T = O with t.patch (every mma decode kernel's
# pdl_trigger after its rounds, not first); T2 = T with ../two-blocks/n3.patch; N3 as there.
# Proves: bits, and eager and B=8 speeds.
set -u
SAME="l8q4k:auto" SPEED="l8q4k l32" ROUNDS=2 OUT=$OUT scripts/decode-ab.sh O=.stage/bin/O T=.stage/bin/T T2=.stage/bin/T2 N3=.stage/bin/N3
cat $OUT/same.txt; grep -v floor $OUT/speed.txt | grep eager; rm -f $OUT/prefill.txt
