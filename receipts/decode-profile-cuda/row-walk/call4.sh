#!/usr/bin/env bash
# Issue 30 step 28, call 4: the one-row Q4_K decode without a norm (o, down) prepares its own
# super-blocks in its warps (no mma_prep launch before it). Builds (.stage/bin): O = b655698
# (main's kernels); N = O + self-prep-ow.patch (not kept).
# Proves: the same bits (same.txt: every arm and serve at N = 2 on the 8B and 70B slices under
# auto, q3k and a 4-layer Q4_K_M file under --mma on; eager, pipelined and B = 8 with
# --graphs off and --pdl off); a soak x6 of eager, pipelined and verify at N = 2 with 50 us
# jitter on q3k under --mma on (soak.txt); eager and B=8 (speed.txt); per op (prof.txt).
set -u
nvidia-smi -L
SAME="l8q4k:auto l70:auto q3k:on l4m:on" SPEED="l8q4k l32 l70" ROUNDS=2 OUT=$OUT scripts/decode-ab.sh O=.stage/bin/O N=.stage/bin/N
for fl in "--graphs off" "--pdl off"; do
  .stage/bin/O --backend cuda --model /tmp/ab/l8q4k.gguf $fl --stages 2 --arms eager,pipelined,batched --batch 8 -q --receipt /tmp/ab/g0.json > /dev/null 2>&1
  .stage/bin/N --backend cuda --model /tmp/ab/l8q4k.gguf $fl --stages 2 --arms eager,pipelined,batched --batch 8 -q --receipt /tmp/ab/g1.json > /dev/null 2>&1
  echo "l8q4k --mma auto $fl: N $(.stage/bin/N diff --ignore placement.resident /tmp/ab/g0.json /tmp/ab/g1.json 2>&1 | head -2)"
done >> $OUT/same.txt
.stage/bin/N soak --runs 6 --out $OUT/soak --backend cuda --model /tmp/ab/q3k.gguf --mma on --stages 2 --arms eager,pipelined,verify --jitter-us 50 2>&1 | tail -4 > $OUT/soak.txt
rm -rf $OUT/soak
for n in O N; do
  for m in l8q4k l32; do
    echo "=== $n $m: PPN_CUDA_PROF=1 bench --steps 64"
    PPN_CUDA_PROF=1 .stage/bin/$n bench --backend cuda --model /tmp/ab/$m.gguf --arms pipelined --steps 64 2>&1 \
      | grep -E "cuda prof stage|eager  " | awk '!seen[$0]++' | head -12
  done
done > $OUT/prof.txt
cat $OUT/same.txt $OUT/soak.txt; grep -v floor $OUT/speed.txt | grep -E 'eager|batched'; grep -E "===|decode|prep" $OUT/prof.txt
