#!/usr/bin/env bash
# Issue 30 step 51 (README.md here; run 2026-12-07, call1/), call 1 on one H100 or
# H200: T (two wgmma in flight) against M (main cdb6db0), builds from build.sh. Proves:
#  - the same bits, prefill512 alternating, per-op microseconds, T's every arm and serve at
#    N = 2, T's gates at N = 1..8 with chunks 512 and 37, the planted fault, a soak
#    (../folded-scales/call1.sh with BUILDS="M T" G=T: same.txt, prefill.txt, prof.txt,
#    gates.txt, soak.txt);
#  - chunked prefill at 64 and 37 rows, M and T alternating, two rounds (chunks.txt);
#  - Nsight Compute's sections of four of T's GEMM launches (ncu-T.txt: registers, issue
#    slots, occupancy; against ../one-warpgroup/call1/ncu-R.txt, M's kernel).
# With LC=1 it also starts llama.cpp's build (for ../one-warpgroup/call3.sh with BIN=.stage/bin/T after).
#   OUT=DIR bash receipts/prefill-cuda/two-in-flight/call1.sh     [DEADLINE=seconds, default 360]
set -u
OUT=${OUT:?}
B=.stage/bin
DEADLINE=${DEADLINE:-360} LC=${LC:-} BUILDS="M T" G=T OUT=$OUT bash receipts/prefill-cuda/folded-scales/call1.sh > /dev/null 2>&1
rm -f "$OUT/speed.txt" "$OUT/llama-build-tail.txt"
scripts/prefill-chunks.sh M T > "$OUT/chunks.txt"
OUT=/tmp/ncu timeout 120 scripts/prefill-ncu.sh T=$B/T > /dev/null 2>&1
cp /tmp/ncu/ncu-T.txt "$OUT/" 2>/dev/null
cat "$OUT/prefill.txt" "$OUT/same.txt" "$OUT/gates.txt" "$OUT/chunks.txt"; tail -3 "$OUT/soak.txt"
