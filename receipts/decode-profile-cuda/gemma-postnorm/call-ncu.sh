#!/usr/bin/env bash
# Per-op profile of gemq4km/gem under --mma on (eager and B=8), and ncu of one eager token's kernels on gemq4km (FFMA).
set -u
B=.stage/bin/ppn-gate  # the build of 27750d6 with synth's q4_k_m fallback (bc0cd0f less the kernel)
. scripts/shapes.sh
mkdir -p /tmp/ab
for m in gemq4km gem; do [ -f /tmp/ab/$m.gguf ] || $B synth ${SHAPES[$m]} -o /tmp/ab/$m.gguf > /dev/null & done; wait
{
for m in gemq4km gem; do
  echo "=== $m --mma on eager (pipelined arm) PPN_CUDA_PROF"
  PPN_CUDA_PROF=1 $B bench --backend cuda --model /tmp/ab/$m.gguf --mma on --arms pipelined --steps 64 2>&1 | grep -E "cuda prof stage|eager  " | awk '!seen[$0]++' | head -14
  echo "=== $m --mma on batched B=8 PPN_CUDA_PROF"
  PPN_CUDA_PROF=1 $B bench --backend cuda --model /tmp/ab/$m.gguf --mma on --arms batched --batch 8 --steps 64 2>&1 | grep -E "cuda prof stage|batched  " | awk '!seen[$0]++' | sed -n 1,40p
done
} > $OUT/prof-mma.txt 2>&1
cat $OUT/prof-mma.txt
timeout 200 ncu --csv --print-units base --graph-profiling node --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,launch__block_size,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,launch__occupancy_limit_registers \
  $B --backend cuda --model /tmp/ab/gemq4km.gguf --stages 1 --arms eager --prompt-len 3 --gen-len 2 -q > $OUT/ncu-gemq4km.csv 2> $OUT/ncu.err
echo "ncu rc $?"; wc -l $OUT/ncu-gemq4km.csv; tail -3 $OUT/ncu.err
