#!/usr/bin/env bash
# A/B: mvq staging limit (S) vs main (O): bench B=8 + bits; gemma-shape prof
set -u
OUT=$1; O=.stage/ppn-gate; S=.stage/ppn-gate-s; M=/tmp/m; mkdir -p $M
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
$O synth --preset llama8b --layers 8 --quant q8_0 -o $M/l8-q8_0.gguf > /dev/null &
$O synth --preset llama8b --layers 8 --quant q4_k_m -o $M/l8-q4_k_m.gguf > /dev/null &
$O synth --preset llama70b --layers 2 --quant q4_k -o $M/l70.gguf > /dev/null &
$O synth --arch gemma3 --layers 18 --embd 640 --heads 4 --kv-heads 1 --head-dim 256 --ff 2048 --vocab 262144 --quant q8_0 -o $M/gemma.gguf > /dev/null &
wait; echo "synth $(el) s" | tee -a $OUT/ab.txt
for m in l8-q8_0 l8-q4_k_m l70; do
  for b in O S; do bin=${!b}
    $bin --backend cuda -q --model $M/$m.gguf --stages 2 --batch 8 --arms batched --gen-len 8 --receipt $OUT/g-$m-$b.json > /dev/null 2>&1; echo "gate $m $b rc=$?" >> $OUT/ab.txt
    $bin bench --backend cuda --model $M/$m.gguf --stages 1 --arms batched --batch 8 --steps 64 2>&1 | grep -E "^  (eager|batched)" | sed "s/^/$m $b /" >> $OUT/ab.txt
  done
  $O diff $OUT/g-$m-O.json $OUT/g-$m-S.json > /dev/null 2>&1; echo "diff $m O vs S rc=$? (0 same)" >> $OUT/ab.txt
done
for b in O S; do bin=${!b}
  $bin bench --backend cuda --model $M/l8-q8_0.gguf --stages 1 --arms batched --batch 8 --steps 64 2>&1 | grep -E "^  (eager|batched)" | sed "s/^/l8-q8_0 again $b /" >> $OUT/ab.txt
done
echo "=== gemma-shape q8_0 prof" >> $OUT/ab.txt
$O bench --backend cuda --model $M/gemma.gguf --stages 1 --arms batched --batch 8 --steps 64 2>&1 | grep -E "tok/s" >> $OUT/ab.txt
PPN_CUDA_PROF=1 $O bench --backend cuda --model $M/gemma.gguf --stages 1 --arms batched --batch 8 --steps 64 2>&1 | grep -E "prof stage" >> $OUT/ab.txt
echo "done $(el) s" >> $OUT/ab.txt
rm -f $OUT/g-*.json
cat $OUT/ab.txt
