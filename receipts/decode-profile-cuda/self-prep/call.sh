#!/usr/bin/env bash
# Issue 30 step 24: O2 (0ae9744: Q4_K one-row launches as mma_prep + the unfused decode)
# against N3 (tried.patch on 0ae9744: the self-preparing one-row Q4_K decode, no mma_prep
# launch; the first block prepares the row into the scratch once, the rest wait on a flag).
# Proves: the same bits (every arm and serve at N = 2; --graphs off and --pdl off), a soak
# of the flag under jitter, and eager/B=8 speeds, builds alternating.
set -u
SAME="l8q4k:auto l4m:on q3k:on" SPEED="l8q4k l32" ROUNDS=2 OUT=$OUT scripts/decode-ab.sh O2=.stage/bin/O2 N3=.stage/bin/N3
cat $OUT/same.txt; grep eager $OUT/speed.txt
for fl in "--graphs off" "--pdl off"; do
  .stage/bin/O2 --backend cuda --model /tmp/ab/l8q4k.gguf $fl --stages 2 --arms eager,pipelined -q --receipt /tmp/ab/g0.json > /dev/null 2>&1
  .stage/bin/N3 --backend cuda --model /tmp/ab/l8q4k.gguf $fl --stages 2 --arms eager,pipelined -q --receipt /tmp/ab/g1.json > /dev/null 2>&1
  echo "l8q4k $fl: $(.stage/bin/N3 diff --ignore placement.resident /tmp/ab/g0.json /tmp/ab/g1.json 2>&1 | head -2)"
done | tee -a $OUT/same.txt
.stage/bin/N3 soak --runs 6 --out $OUT/soak --backend cuda --model /tmp/ab/q3k.gguf --mma on --stages 2 --arms eager,pipelined,verify --jitter-us 50 2>&1 | tail -4 | tee $OUT/soak.txt
rm -rf $OUT/soak
