#!/usr/bin/env bash
# Issue 30: --mma auto's batch rule (D): wide models with a batched arm of 8+ rows take every
# format on the tensor cores. Gates PASS, the receipt's note, the speeds against --batch 3.
set -u
D=.stage/bin/ppn-gate-d
mkdir -p /tmp/t
$D synth --preset llama8b --layers 8 --quant q8_0 -o /tmp/t/l8q8.gguf > /dev/null &
$D synth --preset llama8b --layers 4 --quant q4_k_m -o /tmp/t/l4m.gguf > /dev/null &
wait
for m in l8q8 l4m; do
  $D --backend cuda --model /tmp/t/$m.gguf --stages 2 --arms eager,pipelined,batched,prime,verify --batch 8 --prompt-len 16 --gen-len 24 --receipt /tmp/t/$m.json -q; echo "$m gate B=8 exit $?"
  grep -o '"mma": *"[^"]*"' /tmp/t/$m.json | head -1
done
for b in 8 3 8 3; do
  $D bench --backend cuda --model /tmp/t/l8q8.gguf --arms batched --batch $b --steps 128 --receipt /tmp/t/b.json 2>&1 | grep -E "eager +\(|batched +\(" | sed "s/^/l8q8 batch $b: /"
  grep -o '"mma": *"[^"]*"' /tmp/t/b.json | head -1
done
