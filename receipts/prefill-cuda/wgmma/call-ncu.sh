#!/bin/bash
# Issue 30, step 21: Nsight Compute on the probe's 8B gate|up GEMM at 512 columns (the
# engine's mma_gemm, w2-32 and pf-32 of probe.txt): speed of light, pipes (tensor included), warp
# stall reasons, occupancy; clocks as they run. Run from the repo root:
#   OUT=DIR bash receipts/prefill-cuda/wgmma/call-ncu.sh
set -u
OUT=${OUT:-/tmp}
cd "$(dirname "$0")"
python3 mksrc.py ../../../src/backend/cuda/kernels
nvcc -O3 -gencode arch=compute_90a,code=sm_90a -fmad=false -ftz=false -prec-div=true -prec-sqrt=true \
  -o /tmp/wgprobe probe.cu > "$OUT/build.txt" 2>&1 || { tail -40 "$OUT/build.txt"; exit 1; }
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
$NCU --clock-control none --kernel-name-base mangled -k regex:"mma_gemm|wg2_gemmILi32ELb0ELi2ELi8" -s 0 -c 6 \
  --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
  --section Occupancy --section LaunchStats --section SchedulerStats \
  --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_tensor_op_gmma.sum,smsp__inst_executed.sum \
  /tmp/wgprobe one > "$OUT/ncu.txt" 2>&1
{ echo "# OUT=DIR bash receipts/prefill-cuda/wgmma/call-ncu.sh: the lines of ncu.txt that BENCH.md step 21 cites"
  grep -E "^  (void )?(mma_gemm|wg2_gemm)|Duration|gmma.sum|hmma_cycles|smsp__inst_executed.sum|Issue Slots Busy|L1/TEX Cache Throughput|L2 Cache Throughput|DRAM Throughput|Eligible Warps|Warp Cycles Per Issued|Registers Per Thread|Achieved Occupancy|Dynamic Shared" "$OUT/ncu.txt"; } > "$OUT/ncu-summary.txt"
cat "$OUT/ncu-summary.txt"
