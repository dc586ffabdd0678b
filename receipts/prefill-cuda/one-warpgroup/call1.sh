#!/usr/bin/env bash
# Issue 30 step 50 (BENCH.md "One warpgroup a wgmma GEMM block"), call 1 on one H100 or H200:
# R and R2 (build.sh) against M, with step 49's call script (folded-scales/call1.sh: the same
# bits of each build against M at prime chunks 512 and 37, prefill512 alternating, PPN_CUDA_PROF
# per op, then for R every arm and serve at N = 2, gates at N = 1..8 with the planted fault,
# a soak), then Nsight Compute's sections of four of R's GEMM launches (ncu-R.txt: occupancy,
# registers, issue slots, against folded-scales/ncu/ncu-M.txt).
#   OUT=DIR bash receipts/prefill-cuda/one-warpgroup/call1.sh
set -u
OUT=${OUT:?}
DEADLINE=400 BUILDS="M R R2" G=R OUT=$OUT bash receipts/prefill-cuda/folded-scales/call1.sh > /tmp/c1.log 2>&1
rm -f "$OUT/speed.txt" "$OUT/llama-build-tail.txt"
OUT=/tmp/ncu timeout 120 scripts/prefill-ncu.sh R=.stage/bin/R > /tmp/ncu.log 2>&1
cp /tmp/ncu/ncu-R.txt "$OUT/" 2>/dev/null
cat "$OUT/prefill.txt" "$OUT/same.txt" "$OUT/gates.txt"; tail -3 "$OUT/soak.txt"
