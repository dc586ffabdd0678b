#!/usr/bin/env bash
# Profiling call: per-kind GPU time (PPN_CUDA_PROF) vs wall rate, eager and B=8, on synth shapes
set -u
OUT=$1; B=.stage/ppn-gate; M=/tmp/m; mkdir -p $M
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/info.txt; which nsys ncu >> $OUT/info.txt 2>&1
$B synth --arch llama --layers 30 --embd 576 --heads 9 --kv-heads 3 --ff 1536 --vocab 49152 --quant q4_1 --tied -o $M/smol.gguf > /dev/null &
$B synth --arch gemma3 --layers 18 --embd 640 --heads 4 --kv-heads 1 --head-dim 256 --ff 2048 --vocab 262144 --quant q4_k_m -o $M/gemma.gguf > /dev/null &
$B synth --preset llama8b --layers 8 --quant q8_0 -o $M/l8-q8_0.gguf > /dev/null &
$B synth --preset llama8b --layers 8 --quant q4_k_m -o $M/l8-q4_k_m.gguf > /dev/null &
wait; echo "synth $(el) s" >> $OUT/info.txt
for m in smol gemma l8-q8_0 l8-q4_k_m; do
  echo "=== $m" >> $OUT/prof.txt
  $B bench --backend cuda --model $M/$m.gguf --stages 1 --arms batched --batch 8 --steps 64 2>&1 | grep -E "tok/s" >> $OUT/prof.txt
  PPN_CUDA_PROF=1 $B bench --backend cuda --model $M/$m.gguf --stages 1 --arms batched --batch 8 --steps 64 2>&1 | grep -E "prof stage|tok/s" >> $OUT/prof.txt
done
echo "done $(el) s" >> $OUT/info.txt
cat $OUT/info.txt $OUT/prof.txt
