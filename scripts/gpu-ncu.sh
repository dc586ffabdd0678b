#!/usr/bin/env bash
# Nsight Compute detail for the engine's kernels (issue 4 speed work), on the GPU machine:
#
#   scripts/gpu-ncu.sh BIN OUTDIR
#
# - the five kernels of one layer (norm+q|k|v, attention, o-proj+residual, norm+gate|up,
#   down+residual) and the head of one eager token: speed-of-light, launch, occupancy,
#   scheduler and warp-state sections (clocks left alone);
# - per-kernel GPU time of one batched (B=8) step (bench runs warm-up, reference, eager and
#   pipelined first: 4 x 12 x 152 launches).
set -u
BIN=$1
OUT=$2
M=/tmp/smolshape.gguf
[ -f $M ] || "$BIN" synth --arch llama --layers 30 --embd 576 --heads 9 --kv-heads 3 --ff 1536 \
    --vocab 49152 --quant q4_1 --seed 3 -o $M >/dev/null
S="--section SpeedOfLight --section LaunchStats --section Occupancy --section SchedulerStats --section WarpStateStats --section MemoryWorkloadAnalysis"
ncu --clock-control none --cache-control none $S --launch-skip 1521 --launch-count 5 \
    "$BIN" bench --backend cuda --model $M --stages 1 --arms eager --steps 12 >"$OUT/ncu-layer.txt" 2>&1
echo "layer sections: exit $?"
ncu --clock-control none --cache-control none $S --launch-skip 1671 --launch-count 1 \
    "$BIN" bench --backend cuda --model $M --stages 1 --arms eager --steps 12 >"$OUT/ncu-head.txt" 2>&1
echo "head sections: exit $?"
ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv \
    --launch-skip 7904 --launch-count 152 "$BIN" bench --backend cuda --model $M --stages 1 \
    --arms batched --batch 8 --steps 12 >"$OUT/ncu-b8.csv" 2>"$OUT/ncu-b8.err"
echo "batched times: exit $?"
