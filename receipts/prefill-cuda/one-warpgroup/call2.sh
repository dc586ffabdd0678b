#!/usr/bin/env bash
# Issue 30 step 50 (BENCH.md "One warpgroup a wgmma GEMM block"), call 2 on one H100 or H200:
# the landed build L (main with step 50: one warpgroup a block, three blocks an SM, the pick
# rule counted in step 48's blocks) against M (main before it, 23e374e) and R (call 1's
# build: step 50's kernel with the pick rule counted in its own 4-m-tile blocks). Proves:
#  - L's bits are M's, prefill512 of M and L alternating, per-op microseconds, L's gates at
#    N = 1..8, the planted fault, a soak (folded-scales/call1.sh with BUILDS="M L" G=L);
#  - chunked prefill at 64 and 37 rows (`bench --arms prime --chunk C --prompt-len 512`), M,
#    R and L alternating: whether counting the pick in 4-m-tile blocks (R: q|k|v then takes
#    the wgmma GEMM at 37 and 64 rows too) gains or loses there (chunks.txt).
#   OUT=DIR bash receipts/prefill-cuda/one-warpgroup/call2.sh      [DEADLINE=seconds, default 300]
set -u
OUT=${OUT:?}
DEADLINE=${DEADLINE:-300} BUILDS="M L" G=L OUT=$OUT bash receipts/prefill-cuda/folded-scales/call1.sh > /dev/null 2>&1
rm -f "$OUT/speed.txt" "$OUT/llama-build-tail.txt"
scripts/prefill-chunks.sh M R L > "$OUT/chunks.txt"
cat "$OUT/prefill.txt" "$OUT/same.txt" "$OUT/gates.txt" "$OUT/chunks.txt"; tail -3 "$OUT/soak.txt"
