#!/bin/bash
# Issue 30, step 47 (BENCH.md "The integer prefill GEMM on wgmma"): builds probe.cu with nvcc on
# the GPU machine against the tree's own kernels (mksrc.py) and runs it once: engine mma_gemm
# against the wgmma kernels, microseconds a launch and differing outputs on the 8B shape's
# matrices (probe.txt), ptxas's registers and spills (build.txt). Run from the repo root:
#   OUT=DIR bash receipts/prefill-cuda/wgmma-int/call.sh [SET]
# SET (1..5, default 5): the kernels of callSET/ (probe.cu main's tables; set 5 not yet run).
set -u
OUT=${OUT:-/tmp}
cd "$(dirname "$0")"
python3 mksrc.py ../../../src/backend/cuda/kernels
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
nvcc -O3 -gencode arch=compute_90a,code=sm_90a -fmad=false -ftz=false -prec-div=true -prec-sqrt=true -Xptxas -v \
  -o /tmp/wgiprobe probe.cu > "$OUT/build.txt" 2>&1 || { tail -40 "$OUT/build.txt"; exit 1; }
grep -A2 "wgi_gemm\|mma_gemm" "$OUT/build.txt" | grep -E "Compiling|registers|spill" | head -24
/tmp/wgiprobe "$@" 2>&1 | tee "$OUT/probe.txt"
