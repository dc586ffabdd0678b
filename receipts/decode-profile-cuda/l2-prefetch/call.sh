#!/usr/bin/env bash
# Issue 30 step 2: L2 prefetch of the mma decode's later rounds (N) and that plus 16-warp
# decode blocks for every non-Q6_K launch (K), against the build before them (O).
set -u
N=.stage/bin/ppn-gate O=.stage/bin/ppn-gate-old K=.stage/bin/ppn-gate-k16
mkdir -p /tmp/q
$N synth --preset llama8b --layers 32 --quant q4_k_m -o /tmp/q/l32.gguf > /dev/null &
$N synth --preset llama8b --layers 8 --quant q4_k -o /tmp/q/l8q4k.gguf > /dev/null &
$N synth --preset llama70b --layers 2 --quant q4_k -o /tmp/q/l70.gguf > /dev/null &
$N synth --layers 30 --embd 576 --heads 9 --kv-heads 3 --ff 1536 --vocab 49152 --quant q8_0 --seed 3 -o /tmp/q/s576.gguf > /dev/null &
wait
: > $OUT/same.txt
for m in l8q4k s576 l70; do
  for md in auto on; do
    F="--backend cuda --model /tmp/q/$m.gguf --mma $md --stages 2 --arms eager,pipelined,batched,prime,verify,serve --requests 12 --batch 8 -q"
    $N $F --receipt /tmp/q/n.json > /tmp/q/n.txt 2>&1; a=$?
    $O $F --receipt /tmp/q/o.json > /tmp/q/o.txt 2>&1; b=$?
    $K $F --receipt /tmp/q/k.json > /tmp/q/k.txt 2>&1; c=$?
    echo "$m --mma $md: exit new $a old $b k16 $c; new: $($N diff /tmp/q/o.json /tmp/q/n.json 2>&1 | head -1) k16: $($N diff /tmp/q/o.json /tmp/q/k.json 2>&1 | head -1)" >> $OUT/same.txt
  done
done
cat $OUT/same.txt
for m in l32 l8q4k l70; do
  for b in O N K O N K; do
    bin=${!b}
    $bin bench --backend cuda --model /tmp/q/$m.gguf --arms batched --batch 8 --steps 128 2>&1 | grep -E "eager +\(|batched +\(|floor" | sed "s/^/$m $b: /"
  done
done | tee $OUT/speed.txt
for b in O N K; do
  PPN_CUDA_PROF=1 ${!b} bench --backend cuda --model /tmp/q/l8q4k.gguf --arms pipelined --steps 64 2>&1 | grep "cuda prof" > $OUT/prof-$b.txt
done
cat $OUT/prof-N.txt
