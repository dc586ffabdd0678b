#!/usr/bin/env bash
# Issue 30 step 6: A = the unfused Q4_K decode kernels (k8/k16: B = 8 and the 8192-wide
# launches) load their first round into registers before pdl_wait; B = A and the 16-warp
# decode only where its blocks fit one wave (blocks <= SMs, was < 2 x SMs). Against O (HEAD
# plus per-op PPN_CUDA_PROF labels only). Bits, speeds alternating, per-op profiles.
set -u
O=.stage/bin/ppn-gate-old A=.stage/bin/ppn-gate-a B=.stage/bin/ppn-gate-b
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
  for b in A B; do
    ${!b} $F --receipt /tmp/t/$b.json > /tmp/t/$b.txt 2>&1; c=$?
    echo "$1 --mma $2: exit O $a $b $c; $($O diff /tmp/t/o.json /tmp/t/$b.json 2>&1 | head -1)" >> $OUT/same.txt
  done
done
cat $OUT/same.txt
for m in l70 l8q4k l32; do
  for b in O A B O A B; do
    ${!b} bench --backend cuda --model /tmp/t/$m.gguf --arms batched --batch 8 --steps 128 2>&1 | grep -E "eager +\(|batched +\(|floor" | sed "s/^/$m $b: /"
  done
done | tee $OUT/speed.txt | grep -v floor
for b in O B; do
  for m in l8q4k l70 l32; do
    echo "=== $b $m --mma auto: PPN_CUDA_PROF=1 bench --steps 64"
    PPN_CUDA_PROF=1 ${!b} bench --backend cuda --model /tmp/t/$m.gguf --arms pipelined --steps 64 2>&1 | grep -E "cuda prof stage|eager  " | awk '!seen[$0]++' | head -12
  done
done > $OUT/prof.txt
grep "===\|eager" $OUT/prof.txt
