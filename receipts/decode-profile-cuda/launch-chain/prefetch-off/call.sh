#!/usr/bin/env bash
# Step 22, probe 3. Builds: O = 0e05443; N1 = O with tried.patch (the fused kernels do not ask
# L2 for their first round before pdl_wait). ../sass/ holds call2.sh (here .stage/call2.sh)
# and top.py (.stage/top.py). Proves: bits, speeds, per-op times, and the o-proj's stall
# sampling under each build.
set -u
SAME="l8q4k:auto l4m:on" SPEED="l8q4k l32 l70" ROUNDS=2 PROF=1 OUT=$OUT scripts/decode-ab.sh O=.stage/bin/O N1=.stage/bin/N1
cat $OUT/same.txt; grep -v floor $OUT/speed.txt | grep eager; grep -E 'prof stage' $OUT/prof.txt
rm -f $OUT/prefill.txt
for b in O N1; do BIN=.stage/bin/$b KS=13 TAG=$b OUT=$OUT .stage/call2.sh | grep -E 'Duration|exit'; grep -A12 -- '--- top 8' $OUT/sass-top-${b}13.txt; done
