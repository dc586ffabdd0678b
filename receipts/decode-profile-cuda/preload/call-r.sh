#!/usr/bin/env bash
# Issue 30 step 6: the Q4_K decode's first round loaded into registers before pdl_wait
# (R1: the compiler's registers, 116 in the fused 8-warp kernel, 2 blocks an SM; R2: the
# same capped at 3 blocks an SM, 80 registers and 92 bytes spilled), against O (HEAD plus
# per-op PPN_CUDA_PROF labels only). Bits, speeds alternating, then one per-op profile each.
set -u
O=.stage/bin/ppn-gate-old R1=.stage/bin/ppn-gate-r1 R2=.stage/bin/ppn-gate-r2
mkdir -p /tmp/t
$O synth --preset llama8b --layers 32 --quant q4_k_m -o /tmp/t/l32.gguf > /dev/null &
$O synth --preset llama8b --layers 8 --quant q4_k -o /tmp/t/l8q4k.gguf > /dev/null &
$O synth --preset llama70b --layers 2 --quant q4_k -o /tmp/t/l70.gguf > /dev/null &
$O synth --preset llama8b --layers 4 --quant q4_k_m -o /tmp/t/l4m.gguf > /dev/null &
wait
: > $OUT/same.txt
for mm in "l70 auto" "l8q4k auto" "l8q4k on" "l4m on"; do
  set -- $mm
  F="--backend cuda --model /tmp/t/$1.gguf --mma $2 --stages 2 --arms eager,pipelined,batched,prime,verify,serve --requests 12 --batch 8 --chunk 64 --prompt-len 70 --gen-len 8 -q"
  $O $F --receipt /tmp/t/o.json > /tmp/t/o.txt 2>&1; a=$?
  for b in R1 R2; do
    ${!b} $F --receipt /tmp/t/$b.json > /tmp/t/$b.txt 2>&1; c=$?
    echo "$1 --mma $2: exit O $a $b $c; $($O diff /tmp/t/o.json /tmp/t/$b.json 2>&1 | head -1)" >> $OUT/same.txt
  done
done
cat $OUT/same.txt
for m in l70 l8q4k l32; do
  for b in O R1 R2 O R1 R2; do
    ${!b} bench --backend cuda --model /tmp/t/$m.gguf --arms batched --batch 8 --steps 128 2>&1 | grep -E "eager +\(|batched +\(|floor" | sed "s/^/$m $b: /"
  done
done | tee $OUT/speed.txt | grep -v floor
for b in O R1; do
  echo "=== $b l8q4k --mma auto: PPN_CUDA_PROF=1 bench --steps 64"
  PPN_CUDA_PROF=1 ${!b} bench --backend cuda --model /tmp/t/l8q4k.gguf --arms pipelined --steps 64 2>&1 | grep -E "cuda prof stage|eager  "
  echo "=== $b l32 --mma auto: PPN_CUDA_PROF=1 bench --steps 64"
  PPN_CUDA_PROF=1 ${!b} bench --backend cuda --model /tmp/t/l32.gguf --arms pipelined --steps 64 2>&1 | grep -E "cuda prof stage|eager  "
done > $OUT/prof.txt
grep -v "cuda prof" $OUT/prof.txt; head -30 $OUT/prof.txt
