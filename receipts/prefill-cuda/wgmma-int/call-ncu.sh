#!/bin/bash
# Issue 30, step 47: Nsight Compute on the probe's 8B gate|up GEMM at 512 columns (the
# engine's mma_gemm, w2-32-2 and s1-48-2 of probe.txt, two launches each): speed of light, pipes
# (tensor included), issue slots, warp stall reasons, occupancy; clocks as they run. Says what
# bounds the wgmma kernels. Run from the repo root:
#   OUT=DIR bash receipts/prefill-cuda/wgmma-int/call-ncu.sh
# SET=N K=REGEX: another call's kernels (probe.cu's tables) and a kernel-name filter (ncu/ ran
# the defaults; ncu4/ ran SET=4 with the engine, w2-32-2e and w2-32-3x).
set -u
OUT=${OUT:-/tmp}
cd "$(dirname "$0")"
python3 mksrc.py ../../../src/backend/cuda/kernels
nvcc -O3 -gencode arch=compute_90a,code=sm_90a -fmad=false -ftz=false -prec-div=true -prec-sqrt=true \
  -o /tmp/wgiprobe probe.cu > "$OUT/build-ncu.txt" 2>&1 || { tail -40 "$OUT/build-ncu.txt"; exit 1; }
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
$NCU --clock-control none --kernel-name-base mangled \
  -k regex:"${K:-mma_gemm|wgi_gemmILi32ELi2ELi2ELi2ELb0ELb0ELb0E|wgs_gemmILi48ELi1ELi2ELi1ELb0ELb0E}" -s 0 -c 6 \
  --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
  --section Occupancy --section LaunchStats --section SchedulerStats --section InstructionStats \
  --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_tensor_op_gmma.sum,smsp__inst_executed.sum,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_fmaheavy_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_membar_per_issue_active.ratio,smsp__average_warps_issue_stalled_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_sleeping_per_issue_active.ratio,smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio,smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio,smsp__average_warps_issue_stalled_misc_per_issue_active.ratio \
  /tmp/wgiprobe one ${SET:-2} > "$OUT/ncu.txt" 2>&1
{ echo "# OUT=DIR bash receipts/prefill-cuda/wgmma-int/call-ncu.sh: the lines of ncu.txt that BENCH.md step 47 cites"
  grep -E "^  (void )?(mma_gemm|wgi_gemm|wgs_gemm)|Duration|gmma|pipe_alu|pipe_fma|smsp__inst_executed.sum|stalled|Issue Slots Busy|Executed Ipc Active|L1/TEX Cache Throughput|L2 Cache Throughput|DRAM Throughput|Eligible Warps|Warp Cycles Per Issued|Registers Per Thread|Achieved Occupancy|Dynamic Shared|Block Limit" "$OUT/ncu.txt"; } > "$OUT/ncu-summary.txt"
cat "$OUT/ncu-summary.txt"
