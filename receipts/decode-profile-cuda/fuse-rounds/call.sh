#!/usr/bin/env bash
# Issue 30 step 4: the fused decode's prep rounds cap 4 -> 2 (R2: 8192-wide 8-warp launches and
# the 8B down-proj take mma_prep + the decode kernel), against the build before it (O).
set -u
O=.stage/bin/ppn-gate-old R=.stage/bin/ppn-gate-r2
mkdir -p /tmp/t
$O synth --preset llama8b --layers 32 --quant q4_k_m -o /tmp/t/l32.gguf > /dev/null &
$O synth --preset llama8b --layers 8 --quant q4_k -o /tmp/t/l8q4k.gguf > /dev/null &
$O synth --preset llama70b --layers 2 --quant q4_k -o /tmp/t/l70.gguf > /dev/null &
wait
: > $OUT/same.txt
for m in l70 l8q4k; do
  F="--backend cuda --model /tmp/t/$m.gguf --stages 2 --arms eager,pipelined,batched,prime,verify,serve --requests 12 --batch 8 --chunk 64 --prompt-len 70 --gen-len 8 -q"
  $O $F --receipt /tmp/t/o.json > /tmp/t/o.txt 2>&1; a=$?
  $R $F --receipt /tmp/t/r.json > /tmp/t/r.txt 2>&1; b=$?
  echo "$m: exit old $a r2 $b; $($O diff /tmp/t/o.json /tmp/t/r.json 2>&1 | head -1)" >> $OUT/same.txt
done
cat $OUT/same.txt
for m in l70 l8q4k l32; do
  for b in O R O R O R; do
    ${!b} bench --backend cuda --model /tmp/t/$m.gguf --arms batched --batch 8 --steps 128 2>&1 | grep -E "eager +\(|batched +\(|floor" | sed "s/^/$m $b: /"
  done
done | tee $OUT/speed.txt | grep -v floor
