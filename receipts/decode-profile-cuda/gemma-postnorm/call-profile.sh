#!/usr/bin/env bash
# Profile the Gemma-3 270M Q4_K_M mix (gemq4km) against the Q5_0 shape (gem): eager, B=8, per-op.
set -u
B=.stage/bin/ppn-gate  # the build of 27750d6 with synth's q4_k_m fallback (bc0cd0f less the kernel)
. scripts/shapes.sh
mkdir -p /tmp/ab
which nsys ncu > $OUT/tools.txt 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv >> $OUT/tools.txt
for m in gemq4km gem; do $B synth ${SHAPES[$m]} -o /tmp/ab/$m.gguf > /dev/null & done; wait
{
for m in gemq4km gem; do
 for mma in auto on; do
  echo "== $m --mma $mma"
  $B bench --backend cuda --model /tmp/ab/$m.gguf --mma $mma --arms batched --batch 8 --steps 128 2>&1 | grep -E "eager +\(|batched +\(|floor|mma"
 done
done
} > $OUT/speed.txt 2>&1
cat $OUT/speed.txt
{
for m in gemq4km gem; do
  echo "=== $m eager (pipelined arm) PPN_CUDA_PROF"
  PPN_CUDA_PROF=1 $B bench --backend cuda --model /tmp/ab/$m.gguf --arms pipelined --steps 64 2>&1 | grep -E "cuda prof stage|eager  " | awk '!seen[$0]++' | head -30
  echo "=== $m batched B=8 PPN_CUDA_PROF"
  PPN_CUDA_PROF=1 $B bench --backend cuda --model /tmp/ab/$m.gguf --arms batched --batch 8 --steps 64 2>&1 | grep -E "cuda prof stage|batched  " | awk '!seen[$0]++' | head -40
done
} > $OUT/prof.txt 2>&1
cat $OUT/prof.txt
