#!/usr/bin/env bash
# Issue 30 step 3: Q4_K decode weights staged in shared memory by cp.async (V1), plus the
# scale and min conversions moved off the conversion pipe (V2), against the build before (O).
set -u
O=.stage/bin/ppn-gate-old V1=.stage/bin/ppn-gate-v1 V2=.stage/bin/ppn-gate-v2
mkdir -p /tmp/r
$V2 synth --preset llama8b --layers 32 --quant q4_k_m -o /tmp/r/l32.gguf > /dev/null &
$V2 synth --preset llama8b --layers 8 --quant q4_k -o /tmp/r/l8q4k.gguf > /dev/null &
$V2 synth --preset llama70b --layers 2 --quant q4_k -o /tmp/r/l70.gguf > /dev/null &
$V2 synth --preset llama8b --layers 4 --quant q4_k_m --seed 5 -o /tmp/r/l4m.gguf > /dev/null &
wait
: > $OUT/same.txt
for g in "l8q4k auto" "l8q4k on" "l70 auto" "l4m auto" "l4m on"; do
  set -- $g
  F="--backend cuda --model /tmp/r/$1.gguf --mma $2 --stages 2 --arms eager,pipelined,batched,prime,verify,serve --requests 12 --batch 8 --chunk 64 --prompt-len 70 --gen-len 8 -q"
  $O $F --receipt /tmp/r/o.json > /tmp/r/o.txt 2>&1; a=$?
  $V1 $F --receipt /tmp/r/v1.json > /tmp/r/v1.txt 2>&1; b=$?
  $V2 $F --receipt /tmp/r/v2.json > /tmp/r/v2.txt 2>&1; c=$?
  echo "$1 --mma $2: exit old $a v1 $b v2 $c; v1: $($V2 diff /tmp/r/o.json /tmp/r/v1.json 2>&1 | head -1) v2: $($V2 diff /tmp/r/o.json /tmp/r/v2.json 2>&1 | head -1)" >> $OUT/same.txt
done
cat $OUT/same.txt; tail -3 /tmp/r/v2.txt
for m in l32 l8q4k l70; do
  for b in O V1 V2 O V1 V2; do
    ${!b} bench --backend cuda --model /tmp/r/$m.gguf --arms batched --batch 8 --steps 128 2>&1 | grep -E "eager +\(|batched +\(|floor" | sed "s/^/$m $b: /"
  done
done | tee $OUT/speed.txt
for b in O V2; do
  ${!b} bench --backend cuda --model /tmp/r/l8q4k.gguf --arms prime --chunk 512 --prompt-len 512 --steps 16 2>&1 | grep -E "prime|C=512" | sed "s/^/prefill $b: /"
done | tee $OUT/prefill.txt
for b in O V2; do
  PPN_CUDA_PROF=1 ${!b} bench --backend cuda --model /tmp/r/l8q4k.gguf --arms pipelined --steps 64 2>&1 | grep "cuda prof" > $OUT/prof-$b.txt
done
grep stage $OUT/prof-*.txt
