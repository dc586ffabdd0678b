#!/usr/bin/env bash
# Why is the batched arm (B=3) slower than eager on 4096-wide models? Per-kernel-kind GPU
# time (PPN_CUDA_PROF's event pairs) of one-stage eager and batched at B = 1, 2, 3, 4, 8 on a
# 4-layer model of the 8.75 GB model's widths, and on SmolLM2's shapes for contrast.
#   bash receipts/cuda-wide/call-1.sh BIN OUT
set -u
B=$1 OUT=$2
mkdir -p /tmp/m
W=/tmp/m/wide4.gguf S=/tmp/m/smolshape.gguf
$B synth --arch llama --layers 4 --embd 4096 --heads 32 --kv-heads 8 --ff 11008 --vocab 32000 --quant q8_0 --seed 13 -o $W >/dev/null
$B synth --arch llama --layers 30 --embd 576 --heads 9 --kv-heads 3 --ff 1536 --vocab 49152 --quant q4_1 --seed 3 -o $S >/dev/null
for m in wide4:$W smol:$S; do
  for b in 1 2 3 4 8; do
    echo "=== ${m%%:*} B=$b"
    PPN_CUDA_PROF=1 $B bench --backend cuda --model ${m#*:} --stages 1 --arms batched --batch $b --steps 32 2>&1 |
      grep -E "^  (eager|batched)|cuda prof stage"
  done
done
