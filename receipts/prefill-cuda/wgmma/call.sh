#!/bin/bash
# Issue 30, step 21 (BENCH.md "The prefill GEMM on wgmma"): builds probe.cu with nvcc on the
# GPU machine against the tree's own kernels (mksrc.py) and runs it once: the micro table
# (wgmma's chain against mma.sync's, bit for bit) and the GEMM table (engine mma_gemm vs the
# wgmma GEMM: microseconds a launch and differing outputs). Run from the repo root:
#   OUT=DIR bash receipts/prefill-cuda/wgmma/call.sh
set -u
OUT=${OUT:-/tmp}
cd "$(dirname "$0")"
python3 mksrc.py ../../../src/backend/cuda/kernels
nvcc -O3 -gencode arch=compute_90a,code=sm_90a -fmad=false -ftz=false -prec-div=true -prec-sqrt=true -Xptxas -v \
  -o /tmp/wgprobe probe.cu > "$OUT/build.txt" 2>&1 || { tail -40 "$OUT/build.txt"; exit 1; }
grep -E "error|warning" "$OUT/build.txt" | head
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
/tmp/wgprobe 2>&1 | tee "$OUT/probe.txt"
