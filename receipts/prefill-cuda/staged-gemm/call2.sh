#!/usr/bin/env bash
# Issue 30 step 40, call 2 (call 1's S lost 7 % of prefill512: its warps, in step after each
# super-block's barrier, all waited on their XS/XE loads from global memory at once): S2 and
# S3 also stage each super-block's XS and XE of the block's columns, and take 2 and 3 stages
# (S3: copies two super-blocks ahead); O is main a4e3c80's build. Proves what call1.sh's header
# names, for S2 and S3 against O: same.txt, prefill.txt (three rounds, builds alternating),
# prof.txt (PPN_CUDA_PROF's per-launch microseconds of O and S3).
# Staged in .stage (ignored): bin/O, bin/S2, bin/S3. Run as OUT=$OUT bash .../call2.sh
set -u
O=.stage/bin/O
nvidia-smi -L
SAME="l8q4k:auto l4m:on" SPEED= PREFILL="l8q4k" ROUNDS=3 \
  timeout 400 scripts/decode-ab.sh O=$O S2=.stage/bin/S2 S3=.stage/bin/S3 > $OUT/ab.log 2>&1
echo "decode-ab exit $?"
for b in O S3; do
  echo "== $b" >> $OUT/prof.txt
  PPN_CUDA_PROF=1 .stage/bin/$b bench --backend cuda --model /tmp/ab/l8q4k.gguf --arms prime --chunk 512 \
    --prompt-len 512 2>&1 | grep -iE 'gemm|prefill' | awk '!seen[$0]++' | head -12 >> $OUT/prof.txt
done
cat $OUT/same.txt $OUT/prefill.txt $OUT/prof.txt
