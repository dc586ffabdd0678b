#!/usr/bin/env bash
# Issue 30, step 18, call 1 (one H200): (a) 54ada91's mend (mvq_pre_add calls sumsq32) gives
# cfb742e's bits and speed on the gemma3 files; (b) where the vocabulary head's time goes on
# the FFMA walk (--mma auto) and on the tensor cores (--mma on), per op (PPN_CUDA_PROF).
# Run: OUT=DIR bash receipts/decode-profile-cuda/vocab-head/call1.sh  (builds in .stage/bin:
# ppn-gate-old = cfb742e, ppn-gate-m = 54ada91)
set -u
OUT=${OUT:?}
B=.stage/bin
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"
OUT=$OUT/mend SAME="gemq4km:auto gem:auto" SPEED="gemq4km gem" ROUNDS=2 \
  scripts/decode-ab.sh O=$B/ppn-gate-old M=$B/ppn-gate-m > /dev/null 2>&1
. scripts/shapes.sh
for m in smol; do [ -f /tmp/ab/$m.gguf ] || $B/ppn-gate-m synth ${SHAPES[$m]} -o /tmp/ab/$m.gguf > /dev/null; done
for m in gem gemq4km smol; do
  for mm in auto on; do
    echo "=== $m --mma $mm: PPN_CUDA_PROF=1 bench --arms pipelined --steps 64"
    PPN_CUDA_PROF=1 $B/ppn-gate-m bench --backend cuda --model /tmp/ab/$m.gguf --mma $mm --arms pipelined --steps 64 2>&1 \
      | grep -E "cuda prof stage|eager  " | awk '!seen[$0]++' | head -14
    echo "=== $m --mma $mm: bench --arms batched --batch 8 --steps 128"
    $B/ppn-gate-m bench --backend cuda --model /tmp/ab/$m.gguf --mma $mm --arms batched --batch 8 --steps 128 2>&1 | grep -E "eager +\(|batched +\("
  done
done > "$OUT/prof.txt" 2>&1
# (c) Nsight Compute on one head launch (mvq_d8, the dense walk) of each gemma3 file: what
# bounds it (issue slots, DRAM, occupancy, stall reasons), graphs off.
NCU=${NCU:-/usr/local/cuda/bin/ncu}
. scripts/ncu-stalls.sh
S="--section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis"
X="--metrics dram__bytes_read.sum,smsp__inst_executed.sum,sm__cycles_elapsed.avg"
for m in gem gemq4km; do
  RUN="bench --backend cuda --model /tmp/ab/$m.gguf --graphs off --arms eager --steps 8"
  timeout 150 $NCU $S $X -k regex:"mvq_d8" --launch-skip 4 --launch-count 1 $B/ppn-gate-m $RUN > "$OUT/ncu-$m.txt" 2>&1; echo "ncu $m exit $?"
  timeout 150 $NCU $(ncu_stall_metrics gpu__time_duration.sum) -k regex:"mvq_d8" --launch-skip 4 --launch-count 1 $B/ppn-gate-m $RUN > "$OUT/ncu-stalls-$m.txt" 2>&1; echo "stalls $m exit $?"
done
