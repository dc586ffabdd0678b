#!/usr/bin/env bash
# Issue 30 step 27, call 3: what the one-row Q4_K decode launches spend their issue slots and
# pipes on (Nsight Compute, clocks as they run), build O (b655698), the 8B l8 Q4_K slice, one
# layer's launches (mma_prep and mma_decode_k8/k16) decoding one row.
# Proves: instructions, IPC, issue-slot, tensor/ALU/FMA pipe and DRAM shares of each launch.
set -u
nvidia-smi -L
B=.stage/bin/O
mkdir -p /tmp/ab "$OUT"
. scripts/shapes.sh
[ -f /tmp/ab/l8q4k.gguf ] || $B synth ${SHAPES[l8q4k]} -o /tmp/ab/l8q4k.gguf > /dev/null
. scripts/ncu-stalls.sh
M=$(ncu_stall_metrics gpu__time_duration.sum,sm__inst_executed.sum,sm__inst_executed.avg.per_cycle_active,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,sm__warps_active.avg.pct_of_peak_sustained_active,launch__grid_size,launch__block_size,launch__registers_per_thread)
/usr/local/cuda/bin/ncu --clock-control none $M -k regex:"mma_decode|mma_prep" --launch-skip 45 --launch-count 9 \
  $B --backend cuda --model /tmp/ab/l8q4k.gguf --mma auto --graphs off --stages 1 --arms eager --prompt-len 8 --gen-len 8 -q \
  > "$OUT"/ncu-issue.txt 2>&1; echo "ncu exit $?"
grep -E "^  mma|duration|inst_executed|issue_active|pipe|dram__|warps_active|grid_size|block_size|registers" "$OUT"/ncu-issue.txt | head -150
