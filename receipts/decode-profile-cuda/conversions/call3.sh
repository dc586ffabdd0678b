#!/usr/bin/env bash
# Issue 30 step 26, call 3: N (the kept build: mma_kconsts without the conversion unit) and K6
# (N, and Q6_K's int8 sub-block scale to f32 by PRMT under 2^23 instead of I2F) against O =
# main 03be331. Proves: the same bits on the 70B slice (auto), the narrow all-Q4_K files q3k
# and l1b and a 4-layer Q4_K_M file (--mma on), every arm and serve at N = 2, and N's with
# --graphs off and --pdl off; the prime arm of the Q4_K_M file at chunks 512 and 37; speeds:
# full-depth 8B eager and B=8 (its Q6_K matrices take the mma kernels at B=8), and the
# Q4_K_M file's prefill512 (its GEMM walks Q6_K).
set -u
nvidia-smi -L
SAME="l70:auto q3k:on l1b:on l4m:on" SPEED="l32" PREFILL=l4m ROUNDS=2 OUT=$OUT scripts/decode-ab.sh O=.stage/bin/O N=.stage/bin/N K6=.stage/bin/K6
for fl in "--graphs off" "--pdl off"; do
  .stage/bin/O --backend cuda --model /tmp/ab/l4m.gguf --mma on $fl --stages 2 --arms eager,pipelined,batched --batch 8 -q --receipt /tmp/ab/g0.json > /dev/null 2>&1
  .stage/bin/N --backend cuda --model /tmp/ab/l4m.gguf --mma on $fl --stages 2 --arms eager,pipelined,batched --batch 8 -q --receipt /tmp/ab/g1.json > /dev/null 2>&1
  echo "l4m --mma on $fl: N $(.stage/bin/N diff --ignore placement.resident /tmp/ab/g0.json /tmp/ab/g1.json 2>&1 | head -2)"
done >> $OUT/same.txt
cat $OUT/same.txt; grep -v floor $OUT/speed.txt | grep -E 'eager|batched'; cat $OUT/prefill.txt
