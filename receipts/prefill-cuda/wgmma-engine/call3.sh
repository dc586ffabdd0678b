#!/usr/bin/env bash
# Issue 30 step 48 (BENCH.md), call 3 on one GPU: the wgmma GEMM's block shape. Builds (.stage/bin):
#   M = main (d284faa); W = call 1's W (2 warpgroups, 2 stages; the refill's 8 copies unrolled);
#   A = W with the refill loop not unrolled (ptxas: 40-byte stack against 80);
#   B = A with 4 warpgroups a block (16 m-tiles, 256 weight rows: half the XG bytes a block
#       reads from L2 per output), 2 stages, one block an SM;
#   C = B with 3 stages.
# Proves, with scripts/decode-ab.sh: the same bits (every arm and serve at N = 2 under --mma on
# on the 8B l8 Q4_K slice, its prime chunk 64's gate|up on the wgmma GEMM, and the prime arm at
# chunks 512 and 37; same.txt), prefill512 of the builds alternating (prefill.txt), and
# PPN_CUDA_PROF's microseconds a wgmma launch per op (A, B, C: gate|up, q|k|v, +residual for o
# and down) on one 512-row prefill (prof.txt).
#   OUT=DIR bash receipts/prefill-cuda/wgmma-engine/call3.sh
set -u
OUT=${OUT:?}
B=.stage/bin
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"
SAME="l8q4k:on" SPEED= PREFILL="l8q4k" ROUNDS=2 OUT=$OUT \
  timeout 400 scripts/decode-ab.sh M=$B/M W=$B/W A=$B/A B=$B/B C=$B/C
for n in M A B C; do
  PPN_CUDA_PROF=1 timeout 40 $B/$n bench --backend cuda --model /tmp/ab/l8q4k.gguf --arms prime \
    --chunk 512 --prompt-len 512 2>&1 | grep -E 'stage 0: mma (gemm|prep)|prefill' | awk '!seen[$0]++' | sed "s/^/$n: /"
done > "$OUT/prof.txt"
cat "$OUT/same.txt" "$OUT/prefill.txt" "$OUT/prof.txt"
