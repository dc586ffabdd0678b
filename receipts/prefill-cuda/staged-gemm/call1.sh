#!/usr/bin/env bash
# Issue 30 step 40, call 1: the staged Q4_K GEMM (S: kernels/mma.cu mma_gemm_q4k_staged, the
# weights and prepared columns of each super-block copied into shared memory by cp.async one
# super-block ahead of the warps) against O (main a4e3c80: mma_gemm_body, every warp's
# fragments from global memory). S was the first version of the branch's code (commit
# "Staged Q4_K GEMM"): two stages (cp.async.wait_group 0), XS and XE read from global memory in
# each super-block's values (mma_load_xs), the rest as committed. Proves:
#  same.txt     S gives O's bits: `diff` same of every arm and serve at N = 2 on the 8B l8 Q4_K
#               slice (auto) and a 4-layer Q4_K_M file (on: Q4_K and Q6_K GEMMs at chunk 64),
#               and of the prime arm at chunks 512 and 37 (ragged n-blocks) on the 8B slice;
#  prefill.txt  prefill512 (`bench --arms prime --chunk 512 --prompt-len 512`) on the 8B slice,
#               builds alternating, three rounds;
#  prof.txt     PPN_CUDA_PROF's per-launch microseconds of one prefill512 of each build
#               (graphs off, events around every launch): the GEMM launches themselves.
# Staged in .stage (ignored): bin/O, bin/S (stripped release builds).
# Run as OUT=$OUT bash receipts/prefill-cuda/staged-gemm/call1.sh
set -u
O=.stage/bin/O S=.stage/bin/S
nvidia-smi -L
SAME="l8q4k:auto l4m:on" SPEED= PREFILL="l8q4k" ROUNDS=3 \
  timeout 330 scripts/decode-ab.sh O=$O S=$S > $OUT/ab.log 2>&1
echo "decode-ab exit $?"
for b in O S; do
  echo "== $b" >> $OUT/prof.txt
  PPN_CUDA_PROF=1 .stage/bin/$b bench --backend cuda --model /tmp/ab/l8q4k.gguf --arms prime --chunk 512 \
    --prompt-len 512 2>&1 | grep -iE 'gemm|prep|prefill|tok/s|regs' | awk '!seen[$0]++' | head -24 >> $OUT/prof.txt
done
cat $OUT/same.txt $OUT/prefill.txt $OUT/prof.txt
