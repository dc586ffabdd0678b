#!/usr/bin/env bash
# Issue 30 step 5: the persistent mma decode (grid = min(groups, occupancy x SMs), the fused
# prep once per block, the next group's first round asked of L2) against the build before it (O).
set -u
O=.stage/bin/ppn-gate-old R=.stage/bin/ppn-gate-p
mkdir -p /tmp/t
$O synth --preset llama8b --layers 32 --quant q4_k_m -o /tmp/t/l32.gguf > /dev/null &
$O synth --preset llama8b --layers 8 --quant q4_k -o /tmp/t/l8q4k.gguf > /dev/null &
$O synth --preset llama70b --layers 2 --quant q4_k -o /tmp/t/l70.gguf > /dev/null &
$O synth --preset llama8b --layers 4 --quant q4_k_m -o /tmp/t/l4m.gguf > /dev/null &
$O synth --preset llama8b --layers 2 --quant q8_0 -o /tmp/t/l2q8.gguf > /dev/null &
wait
: > $OUT/same.txt
for mm in "l70 auto" "l8q4k auto" "l8q4k on" "l4m auto" "l4m on" "l2q8 on"; do
  set -- $mm
  F="--backend cuda --model /tmp/t/$1.gguf --mma $2 --stages 2 --arms eager,pipelined,batched,prime,verify,serve --requests 12 --batch 8 --chunk 64 --prompt-len 70 --gen-len 8 -q"
  $O $F --receipt /tmp/t/o.json > /tmp/t/o.txt 2>&1; a=$?
  $R $F --receipt /tmp/t/r.json > /tmp/t/r.txt 2>&1; b=$?
  echo "$1 --mma $2: exit old $a new $b; $($O diff /tmp/t/o.json /tmp/t/r.json 2>&1 | head -1)" >> $OUT/same.txt
done
cat $OUT/same.txt
for m in l70 l8q4k l32; do
  for b in O R O R; do
    ${!b} bench --backend cuda --model /tmp/t/$m.gguf --arms batched --batch 8 --steps 128 2>&1 | grep -E "eager +\(|batched +\(|floor" | sed "s/^/$m $b: /"
  done
done | tee $OUT/speed.txt | grep -v floor
