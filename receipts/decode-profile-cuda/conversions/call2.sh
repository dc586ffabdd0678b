#!/usr/bin/env bash
# Issue 30 step 26, call 2: the Q4_K mma kernels' scale constants without the conversion unit.
# Builds (.stage/bin): O = main 03be331; K1 = O with mma_kconsts by PRMT and f16x2 FMAs (no
# I2F/F2F); K = K1 and the mins' byte-to-f32 by PRMT under 2^23 (no I2F). Proves: the same
# bits as O (same.txt: every arm and serve at N = 2 on the 8B l8 Q4_K slice under auto and a
# 4-layer Q4_K_M file under --mma on; the prime arm at chunks 512 and 37), eager and B=8 tok/s
# (speed.txt), prefill512 (prefill.txt), per-op times of O and K (prof.txt).
set -u
nvidia-smi -L
SAME="l8q4k:auto l4m:on" SPEED="l8q4k l32" PREFILL=l8q4k ROUNDS=2 PROF=1 OUT=$OUT scripts/decode-ab.sh O=.stage/bin/O K1=.stage/bin/K1 K=.stage/bin/K
cat $OUT/same.txt; grep -v floor $OUT/speed.txt | grep -E 'eager|batched'; cat $OUT/prefill.txt; grep -E 'prof stage' $OUT/prof.txt | head -40
