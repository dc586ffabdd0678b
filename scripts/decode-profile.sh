#!/usr/bin/env bash
# Where one-token decode's time goes on a GPU (issue 30, step 0), in one call:
#
#   OUT=DIR scripts/decode-profile.sh BIN
#
# For three 4096-wide files (the full-depth Q4_K_M 8B shape, and 8-layer Q8_0 and Q4_K
# slices), under --mma auto and off: `ppn-gate bench` (eager and pipelined tok/s, floor,
# launches per token; graphs on) and the same with PPN_CUDA_PROF=1 (a timing event pair
# around every launch, graphs off: per kernel kind, launches and microseconds each). Kernel
# time per token against the graphs-on wall time says whether the gaps between kernels or
# the kernels themselves fill a token; a kind's microseconds against its weight bytes say
# which kernels are far from the bandwidth.
set -u
B=${1:?usage: OUT=DIR scripts/decode-profile.sh BIN}
OUT=${OUT:?OUT: where the results go}
mkdir -p /tmp/p "$OUT"
which nsys ncu 2>&1 | head -2
$B synth --preset llama8b --layers 32 --quant q4_k_m -o /tmp/p/l32.gguf > /dev/null
$B synth --preset llama8b --layers 8 --quant q8_0 -o /tmp/p/l8q8.gguf > /dev/null
$B synth --preset llama8b --layers 8 --quant q4_k -o /tmp/p/l8q4k.gguf > /dev/null
# One file per model (a call brings back 8 files at most): both settings, timed then profiled.
for m in l32 l8q8 l8q4k; do
  for md in auto off; do
    echo "=== $m --mma $md: bench --steps 128"
    $B bench --backend cuda --model /tmp/p/$m.gguf --mma $md --arms pipelined --steps 128 2>&1
    echo "=== $m --mma $md: PPN_CUDA_PROF=1 bench --steps 64"
    PPN_CUDA_PROF=1 $B bench --backend cuda --model /tmp/p/$m.gguf --mma $md --arms pipelined --steps 64 2>&1
  done > "$OUT/$m.txt"
done
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,memory.total --format=csv
grep -H "===\|eager  \|floor" "$OUT"/*.txt | head -40
