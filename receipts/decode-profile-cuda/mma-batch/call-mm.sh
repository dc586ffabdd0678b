#!/usr/bin/env bash
# Issue 30: --mma auto against on (the kept build 130b0d2) on the two files auto leaves
# partly (Q4_K_M: its Q6_K matrices) or wholly (Q8_0) on the FFMA kernels.
set -u
C=.stage/bin/ppn-gate-c
mkdir -p /tmp/t
$C synth --preset llama8b --layers 32 --quant q4_k_m -o /tmp/t/l32.gguf > /dev/null &
$C synth --preset llama8b --layers 8 --quant q8_0 -o /tmp/t/l8q8.gguf > /dev/null &
wait
for m in l32 l8q8; do
  for mm in auto on auto on; do
    $C bench --backend cuda --model /tmp/t/$m.gguf --mma $mm --arms batched --batch 8 --steps 128 2>&1 | grep -E "eager +\(|batched +\(" | sed "s/^/$m $mm: /"
  done
done | tee $OUT/speed.txt
